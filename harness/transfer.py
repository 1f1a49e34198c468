"""Does an order measured at one budget hold at another? Statistics between rungs of a compute ladder.

Each rung is a seed table (seed x variant) of one metric at one evaluation length. Within a rung the seeds are
paired across variants (one seed = one init, data order and evaluation text for every encoding). The models of
two rungs differ, so τ's interval treats the rungs as independent; but a seed's evaluation text (and data order) is
the same at every rung, so one encoding's change between rungs is paired by seed where the seeds match
(`rung_change`).

Kendall τ between the two mean vectors is the point estimate. Its interval does not resample seeds: with 3
seeds a bootstrap has 10 distinct resamples per rung, and resampling can only add discordance to two orders,
so the point estimate sits at the top of such an interval whatever the data. Instead it comes from the
uncertainty of the mean vectors themselves: each rung's mean vector is drawn from its posterior under the usual
noninformative prior, a multivariate t with n - 1 degrees of freedom, location the seed mean and scale S / n
(S the sample covariance of the seeds, so the shared seed effect that pairs the variants is kept; with n <= k
it is singular and the draws move in the span of the seeds' deviations), and τ is taken between the two drawn
vectors. A draw adds the noise once more on top of the seed means, which pulls τ toward 0 (toward its value
between unrelated orders), not always down: near τ = 1 the draws sit below τ(means), near τ = -1 above it, and
around τ = 0 on both sides. The interval is a conservative union of two intervals: the draws' central 95% reflected
about the point estimate (the "basic" interval, Davison & Hinkley 1997, §5.2.1), [2τ̂ - q97.5, 2τ̂ - q2.5], which
corrects that pull where it is a shift, and the draws' own percentile interval [q2.5, q97.5], which a reflection
cannot replace at the boundary (τ̂ = 1 reflects to [1, 1] whatever the draws); their hull, clipped to [-1, 1]. No
argument makes it exact; its coverage is simulated (tests/test_transfer.py): with 3 seeds, 8 variants and a shared
seed effect it covers the true τ (0.93 or 1) in 91-100% of experiments while the noise is up to 1.5x the gap
between neighbouring means, where the draws' own percentile interval covers 9-38%; with 7 variants, 3 seeds against
4 windows (the laptop-to-real comparison's shape) and a true τ of 0.14, 0.52 or 0.71, in 99-100% (conservative).
The estimand is τ between the true (infinite-seed) mean orders at the two rungs.

Pairwise orders: a pair's order is established at a rung when the paired 95% t interval of its difference over
seeds excludes 0 (harness.stats.paired); a pair established at both rungs agrees or flips.

One encoding between rungs (`rung_change`): the seed effect on a metric (which text a seed scores, its data order)
is shared by the rungs (the ladder's seed 0 has a shared log-PPL effect of -0.055 / -0.057 / -0.046 at 1x, 4x,
16x), so the change b - a taken seed by seed cancels it where an independent (Welch) test counts it as noise twice
(RoPE's 8x PPL, 1x to 4x: Welch p 0.069, paired p 0.012). Paired (harness.stats.paired) over the seeds both rungs
have when at least 2 match; Welch's test (harness.stats.independent) only when they do not (different seed
labels, or fewer than 2 in common), and the row says which. A ratio metric (PPL) is compared on its log, the scale
of its interval (harness.stats.ratio_interval), and reported as the ratio b / a with that interval exponentiated."""
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
import scipy.stats

from harness import stats

LEVEL = stats.LEVEL
NAN = float("nan")


@dataclass(frozen=True)
class TauInterval:
    """τ-b between two rungs' mean orders; lo/hi its interval (module docstring); the draws' median and quantiles."""
    tau: float
    lo: float
    hi: float
    median: float  # the draws' median τ: below tau by about the noise's pull on the seed means
    draws_lo: float  # the draws' own central interval (their 2.5% and 97.5% quantiles)
    draws_hi: float
    n_variants: int
    n_seeds_a: int
    n_seeds_b: int


def _complete(table, cols):
    """(n_seeds, k) array of the seeds where every column is finite."""
    t = table[cols].replace([np.inf, -np.inf], np.nan).dropna(axis=0, how="any")
    return t.to_numpy(float)


def mean_draws(x, n_draws, rng):
    """x (n, k) seeds x variants -> (n_draws, k) draws of the mean vector: multivariate t, n - 1 df, location
    x.mean(0), scale S / n (S = the sample covariance, which may be singular)."""
    n = len(x)
    dev = (x - x.mean(axis=0)) / np.sqrt(n - 1)  # (n, k): dev.T @ dev = S
    z = rng.standard_normal((n_draws, n))  # z @ dev ~ N(0, S)
    g = rng.chisquare(n - 1, size=n_draws) / (n - 1)  # the t's mixing variable
    return x.mean(axis=0) + (z @ dev) / np.sqrt(n) / np.sqrt(g)[:, None]


def _tau_rows(a, b):
    """τ-b of each row pair of a, b (m, k) -> (m,), vectorized: (concordant - discordant) over the square root
    of the untied pair counts (Kendall 1945; scipy.stats.kendalltau's default), NaN where a row is all tied.
    Hand-written because scipy.stats.kendalltau loops over rows (axis=1 too): 2.9 s for 4000 draws of 8, this
    a few ms; tests/test_transfer.py holds it equal to scipy's."""
    i, j = np.triu_indices(a.shape[1], 1)
    sa, sb = np.sign(a[:, i] - a[:, j]), np.sign(b[:, i] - b[:, j])  # (m, k(k-1)/2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sa * sb).sum(axis=1) / np.sqrt(np.abs(sa).sum(axis=1) * np.abs(sb).sum(axis=1))


def tau_interval(a: pd.DataFrame, b: pd.DataFrame, n_draws=4000, seed=0, level=LEVEL) -> TauInterval:
    """Kendall τ-b between the mean orders of seed tables a and b (their shared columns), with the interval of
    the module docstring. lo/hi/median NaN when a rung has fewer than 2 complete seeds."""
    cols = [c for c in a.columns if c in set(b.columns)]
    xa, xb = _complete(a, cols), _complete(b, cols)
    k, na, nb = len(cols), len(xa), len(xb)
    if k < 2 or na == 0 or nb == 0:
        return TauInterval(NAN, NAN, NAN, NAN, NAN, NAN, k, na, nb)
    tau = float(scipy.stats.kendalltau(xa.mean(axis=0), xb.mean(axis=0)).statistic)
    if na < 2 or nb < 2:
        return TauInterval(tau, NAN, NAN, NAN, NAN, NAN, k, na, nb)
    rng = np.random.default_rng(seed)
    draws = _tau_rows(mean_draws(xa, n_draws, rng), mean_draws(xb, n_draws, rng))
    q_lo, med, q_hi = (float(q) for q in np.nanquantile(draws, [(1 - level) / 2, 0.5, (1 + level) / 2]))
    lo, hi = max(-1.0, min(2 * tau - q_hi, q_lo)), min(1.0, max(2 * tau - q_lo, q_hi))
    return TauInterval(tau, lo, hi, med, q_lo, q_hi, k, na, nb)


def pair_orders(table: pd.DataFrame, level=LEVEL) -> pd.DataFrame:
    """Every pair (i, j) of a seed table's columns: the mean of i - j, its paired CI, and `order`: +1 (i > j
    established), -1 (i < j established) or 0 (the interval contains 0, or fewer than 2 seeds)."""
    out = []
    for i, j in combinations(table.columns, 2):
        p = stats.paired(table[i], table[j], level=level)
        out.append(dict(i=i, j=j, diff=p.diff, lo=p.lo, hi=p.hi, n=p.n,
                        order=int(np.sign(p.diff)) if p.significant else 0))
    return pd.DataFrame(out, columns=["i", "j", "diff", "lo", "hi", "n", "order"])


def agreement(a: pd.DataFrame, b: pd.DataFrame, level=LEVEL) -> pd.DataFrame:
    """Pairs of the columns a and b share, with their established order at each rung (pair_orders) and the
    verdict: `agree` / `flip` (established at both, same / opposite sign), `a only` / `b only` (established at
    one rung), `open` (at neither)."""
    cols = [c for c in a.columns if c in set(b.columns)]
    m = pair_orders(a[cols], level).merge(pair_orders(b[cols], level), on=["i", "j"], suffixes=("_a", "_b"))
    both = (m.order_a != 0) & (m.order_b != 0)
    m["verdict"] = np.select([both & (m.order_a == m.order_b), both, m.order_a != 0, m.order_b != 0],
                             ["agree", "flip", "a only", "b only"], "open")
    return m


# a crossover's `established`: where the pair's order is established (agreement's verdict, in words)
WHERE = {"flip": "at both (a flip)", "a only": "before only", "b only": "after only", "open": "at neither"}


def crossovers(tables: dict, level=LEVEL) -> pd.DataFrame:
    """tables: {rung: seed table}, cheapest rung first. Each pair whose mean order changes between consecutive
    rungs, with those rungs and whether the order is established (paired CI excludes 0) on each side."""
    rungs, out = list(tables), []
    for ra, rb in zip(rungs, rungs[1:]):
        m = agreement(tables[ra], tables[rb], level)
        changed = np.sign(m.diff_a) * np.sign(m.diff_b) < 0
        for r in m[changed].itertuples():
            out.append(dict(i=r.i, j=r.j, from_rung=ra, to_rung=rb, diff_from=r.diff_a, diff_to=r.diff_b,
                            established=WHERE[r.verdict]))
    return pd.DataFrame(out, columns=["i", "j", "from_rung", "to_rung", "diff_from", "diff_to", "established"])


def rung_change(a: pd.DataFrame, b: pd.DataFrame, kind="real", level=LEVEL) -> pd.DataFrame:
    """Each column a and b share (one encoding): its change from rung a to rung b. `change` is b - a, or b / a (the
    ratio of geometric means, its interval and p from the logs) for kind ratio; lo, hi its 95% interval, p two-sided,
    n the seeds used (paired) or the smaller rung's (Welch), `test` "paired" (by seed, over the >= 2 seeds both have
    finite) or "Welch" (seeds do not match: independent samples), `significant` the interval excluding no change."""
    out = []
    for c in [c for c in a.columns if c in set(b.columns)]:
        xa, xb = a[c].astype(float), b[c].astype(float)
        if kind == "ratio":
            with np.errstate(divide="ignore", invalid="ignore"):
                xa, xb = np.log(xa.where(xa > 0)), np.log(xb.where(xb > 0))
        xa, xb = xa[np.isfinite(xa)], xb[np.isfinite(xb)]
        shared = xa.index.intersection(xb.index)
        test = "paired" if len(shared) >= 2 else "Welch"
        r = stats.paired(xb[shared], xa[shared], level=level) if test == "paired" else stats.independent(xb, xa, level)
        f = np.exp if kind == "ratio" else (lambda v: v)
        out.append(dict(variant=c, change=float(f(r.diff)), lo=float(f(r.lo)), hi=float(f(r.hi)), p=r.p, n=r.n,
                        test=test, significant=r.significant))
    return pd.DataFrame(out, columns=["variant", "change", "lo", "hi", "p", "n", "test", "significant"])
