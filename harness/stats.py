"""The one place that aggregates over seeds: means, intervals, paired differences, ranks.

Why. Every comparison in the harness is *paired by seed*: for one seed, every encoding trains on the same
batches and is scored on the same eval windows, so the seed-to-seed noise they share cancels in a
difference a - b taken seed by seed. Nothing else in the package computes means or medians over seeds;
each aggregation is one function here, so the report, the claims and the tests use the same numbers.

Vocabulary. `n` = number of seeds with a finite value (NaN/inf are dropped, never imputed). A 95% CI
(`LEVEL`) goes with every mean. A *seed table* is a (seed x variant) DataFrame of one value per seed
(`seed_table`). A difference is called a difference only when its paired interval excludes zero
(`Paired.significant`); one seed decides nothing (n < 2 gives NaN intervals and p-values, and a column
measured on one seed cannot be separated from the best).

Kinds. An interval respects the scale of what it bounds, one function per kind (`KINDS`, ranges in `RANGES`;
harness.report.bounds says which kind a metric is, by its unit): `real` (`interval`: signed quantities, and every
paired difference, `paired`), `trials` (`trials_interval`: 0/1 outcomes, k of n, Wilson), `proportion`
(`proportion_interval`: a mean of per-seed fractions), `nonnegative` (`nonnegative_interval`: losses, entropies,
lengths that can be 0) and `ratio` (`ratio_interval`: positive ratio-scale quantities, on the log scale). A t
interval drawn on an accuracy or a throughput runs outside what the quantity can be (grid2d's accuracy band
reached -0.5 and 2.0); these kinds keep every bound inside.

Methods are scipy.stats' and statsmodels' (t, ttest_rel, permutation_test, bootstrap, Holm, Wilson); written
here is only what neither has (seed tables). Orders among variants (best and ties, ranks, the mean reciprocal rank,
SNR) are harness.ranks, on these."""
import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.stats

LEVEL = 0.95
# wilson: a proportion (every value 0 or 1), Wilson's score interval (Wilson 1927), inside [0, 1] by construction
INTERVAL_METHODS, PAIRED_METHODS = ("t", "bootstrap", "wilson"), ("t", "permutation")
NAN = float("nan")


@dataclass(frozen=True)
class Interval:
    """One quantity over seeds: mean, sample std (ddof=1) and CI; std/lo/hi NaN when n < 2."""
    n: int
    mean: float
    std: float
    lo: float
    hi: float
    @property
    def half(self) -> float:
        return (self.hi - self.lo) / 2


@dataclass(frozen=True)
class Paired:
    """a - b over shared seeds: mean difference, its CI and a two-sided p-value (NaN when n < 2)."""
    n: int
    diff: float
    lo: float
    hi: float
    p: float
    @property
    def significant(self) -> bool:
        return self.n >= 2 and not (self.lo <= 0 <= self.hi)  # NaN bounds compare False: never significant


def _check(given, valid, what="method"):
    """One clear ValueError naming what is wrong and the valid choices."""
    bad = [g for g in given if g not in list(valid)]
    if bad:
        raise ValueError(f"unknown {what} {', '.join(map(repr, bad))}; valid: {', '.join(map(str, valid))}")


def _finite(x) -> np.ndarray:
    x = np.asarray(x, dtype=float).ravel()
    return x[np.isfinite(x)]


def _finite_table(table: pd.DataFrame) -> pd.DataFrame:
    """Non-finite -> NaN, all-NaN columns dropped."""
    t = table.astype(float)
    return t.where(np.isfinite(t)).dropna(axis=1, how="all")


def _bootstrap(samples, statistic, n_boot, seed, level):
    """scipy.stats.bootstrap, percentile method, resampling rows (axis 0) of each sample independently;
    statistic(*resamples, axis) sees each sample with its rows last: (k, n_boot, n) for a (n, k) sample."""
    return scipy.stats.bootstrap(samples, statistic, n_resamples=n_boot, vectorized=True, axis=0,
                                 confidence_level=level, method="percentile", rng=np.random.default_rng(seed))


@functools.lru_cache(maxsize=256)
def _t_quantiles(level, df):
    """Student-t quantiles (1-level)/2 and (1+level)/2 at df, as scipy.stats.t.interval computes them; cached:
    t.interval costs 0.3 ms a call, and a report asks for thousands of intervals of a few seeds each."""
    a, b = scipy.stats.t.ppf([(1.0 - level) / 2, (1.0 + level) / 2], df)
    return float(a), float(b)


def interval(x, level=LEVEL, method="t", n_boot=10_000, seed=0) -> Interval:
    """Mean of per-seed values x with a Student-t, percentile-bootstrap or (0/1 values) Wilson CI (NaN/inf dropped)."""
    _check([method], INTERVAL_METHODS)
    if method == "wilson":
        return trials_interval(x, level)
    x = _finite(x)
    n, mean = len(x), float(x.mean()) if len(x) else NAN
    if n < 2:
        return Interval(n, mean, NAN, NAN, NAN)
    std = float(x.std(ddof=1))
    if np.abs(x - mean).max() <= 10 * np.finfo(float).eps * abs(mean):  # constant up to rounding (scipy's test):
        return Interval(n, mean, std, mean, mean)  # no t scale > 0, and every resample's mean is the mean
    if method == "t":  # mean ± t_{(1+level)/2, n-1} s/√n: scipy.stats.t.interval's own bits (a test holds them)
        a, b = _t_quantiles(level, n - 1)
        scale = std / np.sqrt(n)  # scipy.stats.sem(x)
        lo, hi = a * scale + mean, b * scale + mean
    else:
        lo, hi = _bootstrap((x,), np.mean, n_boot, seed, level).confidence_interval
    return Interval(n, mean, std, float(lo), float(hi))


def trials_interval(x, level=LEVEL) -> Interval:
    """k successes in n trials (x: one 0/1 outcome per trial, NaN/inf dropped): k/n with Wilson's score interval.

    The counts are known here, so the interval is the binomial one: Wilson's (1927, "Probable inference, the law of
    succession, and statistical inference", JASA 22:209-212), computed by statsmodels.stats.proportion.
    proportion_confint(method="wilson"). It lies inside [0, 1] by construction and is defined from n = 1 on; with
    k = 0 or k = n it still has width, unlike the Wald interval p ± z√(p(1-p)/n), which collapses to a point there."""
    x = _finite(x)
    n, mean = len(x), float(x.mean()) if len(x) else NAN
    if not n:
        return Interval(0, NAN, NAN, NAN, NAN)
    if not np.isin(x, (0.0, 1.0)).all():
        raise ValueError(f"method 'wilson' is for proportions: every value 0 or 1, got {sorted(set(x))[:5]}")
    from statsmodels.stats.proportion import proportion_confint  # statsmodels loads at first use (DESIGN.md §6.6)
    lo, hi = proportion_confint(int(x.sum()), n, alpha=1 - level, method="wilson")
    return Interval(n, mean, float(x.std(ddof=1)) if n > 1 else NAN, float(lo), float(hi))


def _clipped(iv, low, high) -> Interval:
    """iv with lo, hi clipped to [low, high], never past its own mean (a KL summed to -1e-10 keeps its mean)."""
    lo = max(iv.lo, min(low, iv.mean)) if iv.lo == iv.lo else iv.lo  # iv.lo == iv.lo: not NaN
    hi = min(iv.hi, max(high, iv.mean)) if iv.hi == iv.hi else iv.hi
    return Interval(iv.n, iv.mean, iv.std, float(lo), float(hi))


def proportion_interval(x, level=LEVEL) -> Interval:
    """Mean of per-seed proportions x in [0, 1] (each seed's accuracy over its many scored items) with the 95%
    Student-t interval over seeds, clipped to [0, 1].

    Why not Wilson: the counts behind a seed's accuracy (how many tokens or sequences it scored) are not in the rows,
    and a seed's 1.0 is a fraction, not one trial; the uncertainty that matters across retrained models is the
    seed-to-seed spread, which the t interval over seeds measures (trials_interval is for 0/1 trials).
    Why clipped t and not the logit scale: intersecting an interval with [0, 1] removes only values a mean accuracy
    cannot take, so the clipped interval covers the true mean exactly as often as the t interval does (no coverage
    lost or gained), and it stays centred on the arithmetic mean that the tables print and the paired tests
    compare. A logit-scale interval needs a finite logit of every seed: a seed at exactly 0 or 1 (grid2d's rope
    scores 1.0 on every seed; longctx has 118 seq_acc rows at 0) has logit ±inf, and moving it inside would take a
    pseudo-count of the items the rows do not record; and it is centred on expit(mean logit), not on the mean.
    The clipping is stated wherever it shows: a clipped cell prints [lo, hi] instead of ± (harness.report.tables).
    All seeds equal (1.0, 1.0, 1.0): [1, 1], the t interval's own answer to no spread between seeds."""
    x = _finite(x)
    if ((x < 0) | (x > 1)).any():
        raise ValueError(f"a proportion is in [0, 1], got {sorted(set(x[(x < 0) | (x > 1)].tolist()))[:5]}; "
                         f"use interval (kind real) for a quantity that is not one")
    return _clipped(interval(x, level), *RANGES["proportion"])


def nonnegative_interval(x, level=LEVEL) -> Interval:
    """Mean of per-seed values that cannot be below 0 but can be 0 (a loss, an entropy, a KL, an effective length
    of 0 = below the bar already at the shortest length), with the 95% t interval clipped at 0.

    A loss that reaches 0 on one seed and not on another gives a t interval reaching below 0; cutting it at 0
    removes only values the mean cannot take, so coverage is that of the t interval. A log scale (ratio_interval)
    has no place for a value of 0. Values a little below 0 (a KL of 0 summed in fp32: about -1e-10) are kept; the
    interval then stops at the mean."""
    return _clipped(interval(x, level), *RANGES["nonnegative"])


def ratio_interval(x, level=LEVEL) -> Interval:
    """Geometric mean of positive ratio-scale values (perplexity, tokens/s, bytes, seconds) with the 95% t interval
    of their logarithms, exponentiated: [exp(m - t s/√n), exp(m + t s/√n)], m and s the mean and sample std of
    log x. std is the std of x itself (ddof=1).

    The log-normal model of a positive quantity whose spread grows with its size (Limpert, Stahel & Abbt 2001,
    "Log-normal distributions across the sciences: keys and clues", BioScience 51(5):341-352: the geometric mean
    and the multiplicative interval x* ×/÷ (s*)^t); under it this interval is exact for the geometric mean (the
    log-normal's median), and it is positive for every sample. It is not an interval for the arithmetic mean (that
    is Cox's method, Zhou & Gao 1997, Statistics in Medicine 16:783-790), so the mean it goes with is the geometric
    one. A value <= 0 has no logarithm: ValueError (a quantity that can be 0 is nonnegative_interval's)."""
    x = _finite(x)
    if (x <= 0).any():
        raise ValueError(f"a ratio-scale value is > 0, got {sorted(set(x[x <= 0].tolist()))[:5]}; use nonnegative_interval "
                         f"for a quantity that can be 0")
    n = len(x)
    if n == 0:
        return Interval(0, NAN, NAN, NAN, NAN)
    if (x == x[0]).all():  # one seed or no spread: the value itself, exactly (exp(log x) can be an ulp off)
        v = float(x[0])
        return Interval(n, v, 0.0 if n > 1 else NAN, v if n > 1 else NAN, v if n > 1 else NAN)
    logs = interval(np.log(x), level)
    return Interval(n, float(np.exp(logs.mean)), float(x.std(ddof=1)), float(np.exp(logs.lo)), float(np.exp(logs.hi)))


KINDS = {"real": interval, "trials": trials_interval, "proportion": proportion_interval,
         "nonnegative": nonnegative_interval, "ratio": ratio_interval}  # kind -> its interval over seeds
INF = float("inf")
RANGES = {"real": (-INF, INF), "trials": (0.0, 1.0), "proportion": (0.0, 1.0), "nonnegative": (0.0, INF),
          "ratio": (0.0, INF)}  # kind -> (lowest, highest) its values and bounds take (ratio: > 0, strictly)


def summarize(df, by, *, value="value", seed="seed", level=LEVEL, method="t", kind="real") -> pd.DataFrame:
    """One row per group of `by`: n, mean, std, lo, hi, half over seeds (rows of one seed averaged first).
    kind: a key of KINDS, the interval for the values' scale (method: real's, t / bootstrap / wilson)."""
    _check([method], INTERVAL_METHODS)
    _check([kind], KINDS, "kind")
    if kind != "real" and method != "t":
        raise ValueError(f"method {method!r} is kind real's; kind {kind!r} has its own interval")
    one = functools.partial(interval, method=method) if kind == "real" else KINDS[kind]
    by = [by] if isinstance(by, str) else list(by)
    _check(by + [value, seed], df.columns, "column")
    per_seed = df.groupby(by + [seed], dropna=False, sort=True)[value].mean()  # one value per (group, seed)
    rows = []
    for key, vals in per_seed.groupby(level=list(range(len(by))), dropna=False, sort=True):
        iv = one(vals.to_numpy(), level=level)
        key = key if isinstance(key, tuple) else (key,)
        rows.append(list(key) + [iv.n, iv.mean, iv.std, iv.lo, iv.hi, iv.half])
    return pd.DataFrame(rows, columns=by + ["n", "mean", "std", "lo", "hi", "half"])


def seed_table(df, columns="variant", *, value="value", seed="seed") -> pd.DataFrame:
    """(seed x columns) table of per-seed values, rows of one (seed, column) averaged; index named seed."""
    cols = [columns] if isinstance(columns, str) else list(columns)
    _check(cols + [value, seed], df.columns, "column")
    t = df.groupby([seed] + cols, dropna=False)[value].mean().unstack(cols)  # all-NaN columns kept
    return t.rename_axis("seed")


def paired(a, b, level=LEVEL, method="t", n_perm=10_000, seed=0) -> Paired:
    """Mean of a - b over seeds where both are finite; paired t-test (scipy.stats.ttest_rel) or sign-flip
    permutation test (scipy.stats.permutation_test; its CI: percentile bootstrap of the differences with n_perm
    resamples). With 2^n <= n_perm the permutation test enumerates all 2^n sign patterns: the exact p."""
    _check([method], PAIRED_METHODS)
    if isinstance(a, pd.Series) and isinstance(b, pd.Series):
        a, b = a.align(b, join="inner")  # pair by seed label
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if len(a) != len(b):
        raise ValueError(f"paired needs one value per seed in a and b; got lengths {len(a)} and {len(b)}")
    a, b = a[np.isfinite(a - b)], b[np.isfinite(a - b)]
    d = a - b
    n, diff = len(d), float(d.mean()) if len(d) else NAN
    if n < 2:
        return Paired(n, diff, NAN, NAN, NAN)
    if np.abs(d - diff).max() <= 10 * np.finfo(float).eps * abs(diff):  # constant up to rounding: t = ±inf or 0/0
        return Paired(n, diff, diff, diff, 0.0 if diff != 0 else 1.0)
    if method == "t":
        res = scipy.stats.ttest_rel(a, b)
        lo, hi = res.confidence_interval(level)
        return Paired(n, diff, float(lo), float(hi), float(res.pvalue))
    # permutation_type="samples" swaps a and b within a seed, i.e. flips the sign of that seed's difference
    res = scipy.stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                       permutation_type="samples", n_resamples=n_perm, rng=np.random.default_rng(seed))
    lo, hi = _bootstrap((d,), np.mean, n_perm, seed, level).confidence_interval
    return Paired(n, diff, float(lo), float(hi), float(res.pvalue))


def independent(a, b, level=LEVEL) -> Paired:
    """Mean of a minus mean of b for two samples that share no seeds (Welch's t, scipy.stats.ttest_ind with
    equal_var=False; NaN/inf dropped): the fallback of a comparison that cannot be paired by seed. n is the smaller
    sample's size; lo, hi, p NaN when either has fewer than 2 values."""
    a, b = _finite(a), _finite(b)
    n = min(len(a), len(b))
    diff = float(a.mean() - b.mean()) if n else NAN
    if n < 2:
        return Paired(n, diff, NAN, NAN, NAN)
    res = scipy.stats.ttest_ind(a, b, equal_var=False)
    lo, hi = res.confidence_interval(level)
    return Paired(n, diff, float(lo), float(hi), float(res.pvalue))


def holm(p) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values (statsmodels.stats.multitest.multipletests, method holm).
    NaN entries stay NaN and do not count in m."""
    from statsmodels.stats.multitest import multipletests  # statsmodels loads at first use (DESIGN.md §6.6)
    p = np.asarray(p, dtype=float).ravel()
    out, ok = np.full(p.shape, NAN), ~np.isnan(p)
    out[ok] = multipletests(p[ok], method="holm")[1] if ok.any() else []
    return out


def compare(table, reference, *, level=LEVEL, method="t") -> pd.DataFrame:
    """Every column of a seed table vs `reference`, paired by seed, p-values Holm-adjusted over variants."""
    _check([reference], table.columns, "reference")
    variants = [c for c in table.columns if c != reference]
    res = [vars(paired(table[v], table[reference], level=level, method=method)) for v in variants]
    out = pd.DataFrame(res, index=pd.Index(variants, name="variant"), columns=["n", "diff", "lo", "hi", "p"])
    out["p_holm"] = holm(out["p"].to_numpy())
    out["significant"] = (out["p_holm"] < 1 - level) & (out["n"] >= 2)
    return out
