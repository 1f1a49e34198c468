"""Orders among variants, over seeds: the best and those tied with it (`best_and_ties`), each variant's rank of the
mean with a paired bootstrap interval (`rank_bootstrap`), the mean reciprocal rank across tasks with its interval
(`mean_reciprocal_rank`, `mrr_interval`), and whether the seeds can separate the variants at all (`snr`). Means,
intervals, paired tests and the bootstrap are harness.stats'; only ordering is here."""
import numpy as np
import pandas as pd
import scipy.stats

from harness.stats import KINDS, LEVEL, NAN, _bootstrap, _check, _finite_table, paired


def best_and_ties(table, lower_is_better=True, level=LEVEL, kind="real") -> tuple[str, set]:
    """(best column by mean, set of columns not separated from it by a paired CI or with paired n < 2).
    kind: the mean is that of KINDS[kind] (a ratio's geometric mean), the one a report prints beside the mark; the
    ties are the paired t test's on the values themselves, whatever the kind."""
    _check([kind], KINDS, "kind")
    t = _finite_table(table)
    if t.shape[1] == 0:
        raise ValueError(f"no column with a finite value; columns: {list(table.columns)}")
    means = t.apply(lambda c: KINDS[kind](c.to_numpy()).mean)
    best = means.idxmin() if lower_is_better else means.idxmax()
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


def snr(table) -> float:
    """Variance of the column means across columns (ddof=1) / mean within-column seed variance (ddof=1)."""
    t = _finite_table(table)
    var = t.var(ddof=1).dropna()  # columns with >= 2 finite seeds
    if t.shape[1] < 2 or var.empty:
        return NAN
    signal, noise = float(t.mean().var(ddof=1)), float(var.mean())
    return signal / noise if noise > 0 else (float("inf") if signal > 0 else NAN)
