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

Methods are scipy.stats' and statsmodels' (t, ttest_rel, permutation_test, bootstrap, Holm); written
here is only what neither has: seed tables, best-and-ties, SNR and the mean reciprocal rank."""
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
    x = _finite(x)
    n, mean = len(x), float(x.mean()) if len(x) else NAN
    if method == "wilson" and n:  # k successes of n: statsmodels' proportion_confint, defined from n = 1 on
        if not np.isin(x, (0.0, 1.0)).all():
            raise ValueError(f"method 'wilson' is for proportions: every value 0 or 1, got {sorted(set(x))[:5]}")
        from statsmodels.stats.proportion import proportion_confint
        lo, hi = proportion_confint(int(x.sum()), n, alpha=1 - level, method="wilson")
        return Interval(n, mean, float(x.std(ddof=1)) if n > 1 else NAN, float(lo), float(hi))
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


def summarize(df, by, *, value="value", seed="seed", level=LEVEL, method="t") -> pd.DataFrame:
    """One row per group of `by`: n, mean, std, lo, hi, half over seeds (rows of one seed averaged first)."""
    _check([method], INTERVAL_METHODS)
    by = [by] if isinstance(by, str) else list(by)
    _check(by + [value, seed], df.columns, "column")
    per_seed = df.groupby(by + [seed], dropna=False, sort=True)[value].mean()  # one value per (group, seed)
    rows = []
    for key, vals in per_seed.groupby(level=list(range(len(by))), dropna=False, sort=True):
        iv = interval(vals.to_numpy(), level=level, method=method)
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


def best_and_ties(table, lower_is_better=True, level=LEVEL) -> tuple[str, set]:
    """(best column by mean, set of columns not separated from it by a paired CI or with paired n < 2)."""
    t = _finite_table(table)
    if t.shape[1] == 0:
        raise ValueError(f"no column with a finite value; columns: {list(table.columns)}")
    best = t.mean().idxmin() if lower_is_better else t.mean().idxmax()
    ties = {c for c in t.columns if c != best and not paired(t[c], t[best], level=level).significant}
    return best, ties


def _ranks_of_means(x, axis):
    """(k, ..., n) -> (k, ...): rank of each column's mean among the k columns (1 = smallest, ties averaged)."""
    return scipy.stats.rankdata(np.mean(x, axis=axis), axis=0)


def rank_bootstrap(table, lower_is_better=True, n_boot=2000, seed=0, level=LEVEL) -> pd.DataFrame:
    """Rank of each column's mean (1 = best) with a paired bootstrap-over-seeds rank interval and p_best.
    lo, hi, p_best are NaN with fewer than 2 complete seeds (one seed decides nothing)."""
    t = _finite_table(table).dropna(axis=0, how="any")  # only seeds where every column is finite
    x = (1.0 if lower_is_better else -1.0) * t.to_numpy()  # (n_seeds, k); smaller is better after the sign
    out = pd.DataFrame(index=pd.Index(t.columns, name="variant"), columns=["rank", "lo", "hi", "p_best"],
                       dtype=float)
    if len(x) == 0:
        return out
    out["rank"] = scipy.stats.rankdata(x.mean(axis=0))
    if len(x) < 2:
        return out
    res = _bootstrap((x,), _ranks_of_means, n_boot, seed, level)  # the same seed rows for every column
    out["lo"], out["hi"] = res.confidence_interval
    ranks = res.bootstrap_distribution  # (k, n_boot); equal ranks <=> equal means (ties averaged)
    is_best = ranks == ranks.min(axis=0, keepdims=True)
    out["p_best"] = (is_best / is_best.sum(axis=0, keepdims=True)).mean(axis=1)  # ties at 1 share
    return out


def snr(table) -> float:
    """Variance of the column means across columns (ddof=1) / mean within-column seed variance (ddof=1)."""
    t = _finite_table(table)
    var = t.var(ddof=1).dropna()  # columns with >= 2 finite seeds
    if t.shape[1] < 2 or var.empty:
        return NAN
    signal, noise = float(t.mean().var(ddof=1)), float(var.mean())
    return signal / noise if noise > 0 else (float("inf") if signal > 0 else NAN)


def mean_reciprocal_rank(table, higher_is_better=True) -> pd.Series:
    """Mean reciprocal rank of each variant across tasks (Kazemnejad et al. 2023, "The Impact of Positional
    Encoding on Length Generalization in Transformers", rank their encodings across tasks this way).

    table: (task x variant) scores, e.g. the mean over seeds of each task's OOD accuracy. Per task the variants
    are ranked (1 = best; tied scores share the average of their ranks, so two variants tied for first both
    get 1.5); a variant's MRR is the mean over tasks of 1 / rank, in (0, 1]. Only tasks where every variant
    has a finite score count (variants never scored are dropped first), so every MRR is over the same
    tasks. Returns a Series named mrr, index variant, best first (ties keep the table's column order)."""
    t = _finite_table(table).dropna(axis=0, how="any")  # (tasks, variants): complete tasks only
    if t.empty:
        return pd.Series(dtype=float, name="mrr", index=pd.Index([], name="variant"))
    x = (-1.0 if higher_is_better else 1.0) * t.to_numpy()  # smaller is better after the sign
    ranks = scipy.stats.rankdata(x, axis=1)  # (tasks, variants), ties averaged
    mrr = pd.Series((1.0 / ranks).mean(axis=0), index=pd.Index(t.columns, name="variant"), name="mrr")
    return mrr.sort_values(ascending=False, kind="stable")


def _mrr_of_means(*tasks, axis):
    """Per task (k, ..., n_t), smaller is better: mean over tasks of 1 / rank of the column means -> (k, ...)."""
    return np.mean([1.0 / _ranks_of_means(t, axis) for t in tasks], axis=0)


def mrr_interval(tables, higher_is_better=True, n_boot=2000, seed=0, level=LEVEL) -> pd.DataFrame:
    """mean_reciprocal_rank with a bootstrap-over-seeds interval, from one seed table per task.

    tables: {task: (seed x variant) seed table}. Variants scored (some finite value) in every task are kept; in
    each task only seeds where all of them are finite (as rank_bootstrap), and a task without such a seed is
    left out. mrr ranks each task's means over those seeds. The interval resamples each task's seeds with
    replacement, the same rows for every variant (paired within a task), independently across tasks (their
    runs are not paired), and takes percentiles of the resampled MRR; p_best is the share of resamples in
    which the variant has the top MRR (ties share). Columns mrr, lo, hi, p_best, n_tasks, n (the fewest seeds
    of any task), rows best first; lo, hi, p_best NaN when n < 2 (one seed decides nothing). With few seeds
    a bootstrap has few distinct resamples (3 seeds: 10 per task): read the interval as optimistic."""
    ts = {k: _finite_table(t) for k, t in tables.items()}
    cols = [c for c in (next(iter(ts.values())).columns if ts else []) if all(c in t.columns for t in ts.values())]
    done = {k: t[cols].dropna(axis=0, how="any") for k, t in ts.items()}
    done = {k: t for k, t in done.items() if len(t) and cols}  # (n_seeds_k, variants) each
    out = pd.DataFrame(index=pd.Index(cols, name="variant"), columns=["mrr", "lo", "hi", "p_best"], dtype=float)
    n = min((len(t) for t in done.values()), default=0)
    out["n_tasks"], out["n"] = len(done), n
    if not done:
        return out
    out["mrr"] = mean_reciprocal_rank(pd.DataFrame({k: t.mean() for k, t in done.items()}).T, higher_is_better)
    if n >= 2:  # each task draws its own resamples, in task order
        sign = -1.0 if higher_is_better else 1.0
        res = _bootstrap([sign * t.to_numpy() for t in done.values()], _mrr_of_means, n_boot, seed, level)
        out["lo"], out["hi"] = res.confidence_interval
        recip = res.bootstrap_distribution  # (variants, n_boot) resampled MRR
        is_best = recip >= recip.max(axis=0, keepdims=True) - 1e-12
        out["p_best"] = (is_best / is_best.sum(axis=0, keepdims=True)).mean(axis=1)
    return out.sort_values("mrr", ascending=False, kind="stable")
