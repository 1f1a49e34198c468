"""Findings: every order, trend, flip and rank the words around a report may state, generated from the rows with its
test, its Holm-adjusted p over a named family, and the power the test had at the effect seen. Prose in the README,
docs/ and a results folder's RUN.md states an order only by citing a finding's id (tests/test_findings_prose.py).

Kinds and their families (Holm 1979 within each family; the family is written in every finding):
- order: two variants of one comparison group (task, budget, train length) at one evaluation length of the group's
  headline metric (1x, 8x the train length and the longest, harness.report.confidence.lengths). Paired t test over
  the seeds both have; a ratio-scale metric (PPL) on its log, so the effect is a ratio of geometric means. Family:
  every pair of that group at that length (with more than ALL_PAIRS variants, two families: the pairs with the
  report's reference, as its Comparisons table, and the other pairs with the best mean). The Comparisons table tests
  the raw difference; a finding on PPL tests its log (seed effects on PPL are multiplicative), so their p can differ.
- change (with two or more budgets): one variant's metric at a larger budget against a smaller one, paired by seed
  (harness.transfer.rung_change; Welch where seeds do not match). Family: the variants x lengths of that rung pair.
- flip (two or more budgets): a pair whose mean order differs between two rungs. Established only when its order
  finding is established at both (each after its own Holm), with opposite signs; its power is the smaller of the two.
- rank: a variant's rank of the mean (1 = best) with the paired-bootstrap interval of harness.ranks.rank_bootstrap
  over the seeds every variant has. Established only when the variant's order against every other variant is (with
  3 seeds the bootstrap has 10 distinct resamples and its interval is optimistic); its p (Holm) and power are the
  largest and smallest of those order findings'.

Power is that of the two-sided paired t test at alpha / m, m the family's size (the level Holm's first step uses,
so a lower bound on Holm's power), n the seeds used, at the standardized effect seen (mean / sd of the per-seed
differences; the noncentral t). It is how often n seeds would pass that bar were the true effect the one seen: a
small power says a "not established" is a lack of seeds, not evidence of no difference.
"""
import math
from itertools import combinations

import numpy as np
import pandas as pd
import scipy.stats

from harness import ranks, stats, transfer
from harness.report import bounds
from harness.report import budget as report_budget
from harness.report.confidence import groups as confidence_groups, lengths
from harness.report.tables import lower_is_better

ALPHA = 1 - stats.LEVEL
ALL_PAIRS = 12  # more variants than this: order findings against the reference and the best only (`pairs`)
COLUMNS = ["id", "kind", "statement", "established", "effect", "lo", "hi", "p", "p_holm", "n", "power", "test",
           "family", "where", "rung", "L"]  # where / rung / L: the task (and train length), '16x' or '', the length
NAMES = {"ppl": "PPL", "nll_beyond_train": "NLL beyond the train length", "acc": "accuracy",
         "seq_acc": "passkey accuracy"}


def power(diffs, alpha=ALPHA) -> float:
    """Power of the two-sided paired t test at level alpha with these per-seed differences' n, at their standardized
    mean d = |mean| / sd: P(|T| > t_crit) for T noncentral t with n - 1 df and noncentrality d sqrt(n) (Cohen 1988,
    ch. 2; statsmodels' TTestPower, which returns NaN for large d, is the test's reference). NaN with n < 2;
    1 when the differences are identical and not 0 (harness.stats.paired's p is then 0)."""
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return math.nan
    sd, mean = float(d.std(ddof=1)), abs(float(d.mean()))
    if sd <= 10 * np.finfo(float).eps * mean:
        return 1.0 if mean != 0 else alpha
    df, nc = len(d) - 1, mean / sd * math.sqrt(len(d))
    crit = float(scipy.stats.t.ppf(1 - alpha / 2, df))
    upper, lower = float(scipy.stats.nct.sf(crit, df, nc)), float(scipy.stats.nct.cdf(-crit, df, nc))
    return min(1.0, upper + (lower if math.isfinite(lower) else 0.0))  # far tail: scipy gives NaN where it is ~0


def _scale(table, kind):
    """The table on the scale the test runs on: the log of a ratio-scale metric (non-positive values dropped)."""
    t = table.astype(float)
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(t.where(t > 0))
    return t


def _effect(diff, lo, hi, kind):
    """(effect, lo, hi) back on the metric's scale: a ratio for a log-scale test, else the difference."""
    f = np.exp if kind == "ratio" else (lambda v: v)
    return float(f(diff)), float(f(lo)), float(f(hi))


def _fmt_effect(e, lo, hi, kind):
    if not math.isfinite(e):
        return "—"
    if kind == "ratio":
        return f"×{e:.3g}" + (f" [{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) else "")
    return f"{e:+.3g}" + (f" [{lo:+.3g}, {hi:+.3g}]" if math.isfinite(lo) else "")


def _status(established, pw):
    return "established" if established else ("not established" + (f" (power {pw:.0%})" if math.isfinite(pw) else
                                                                   " (fewer than 2 seeds)"))


def families(table, lower, reference=None):
    """[(family in words, pairs)]: every pair of columns when there are at most ALL_PAIRS columns; else two families,
    the pairs with the reference (as the report's Comparisons table) and the other pairs with the best mean (a Holm
    family of all k(k-1)/2 pairs of 32 variants would ask each p to beat 0.05 / 496, which 3 seeds cannot)."""
    cols = sorted(table.columns)
    if len(cols) <= ALL_PAIRS:
        return [("pairs", list(combinations(cols, 2)))]
    means = table.mean()
    best = str(means.idxmin() if lower else means.idxmax())
    out = []
    if reference in cols:
        out.append((f"pairs with `{reference}` (the reference)", [tuple(sorted((c, reference))) for c in cols
                                                                   if c != reference]))
    if best != reference:
        out.append((f"pairs with `{best}` (the best mean)", [tuple(sorted((c, best))) for c in cols
                                                              if c not in (best, reference)]))
    return out


def order_findings(table, prefix, where, metric, kind, reference=None):
    """Order findings of one seed table (seeds x variants) at one length; Holm within each of its `families`.
    prefix: the id's part naming the group and length; where: the same in words."""
    x, lower, name = _scale(table, kind), lower_is_better(metric), NAMES.get(metric, metric)
    parts = []
    for family, chosen in families(table, lower, reference):
        rows = []
        for i, j in chosen:
            r = stats.paired(x[i], x[j])
            e, lo, hi = _effect(r.diff, r.lo, r.hi, kind)
            rows.append(dict(id=f"order/{prefix}/{_slug(i)}-{_slug(j)}", kind="order", i=i, j=j, diff=r.diff,
                             effect=e, lo=lo, hi=hi, p=r.p, n=r.n, diffs=(x[i] - x[j]).to_numpy(),
                             test=f"paired t on {'log ' if kind == 'ratio' else ''}{name}, n {r.n}"))
        f = pd.DataFrame(rows)
        f["p_holm"] = stats.holm(f.p.to_numpy())
        f["power"] = [power(d, ALPHA / len(f)) for d in f.diffs]
        f["family"] = f"the {len(f)} {family} at {where}"
        parts.append(f)
    if not parts:
        return pd.DataFrame(columns=COLUMNS + ["diff", "i", "j"])
    out = pd.concat(parts, ignore_index=True)
    out["established"] = (out.p_holm < ALPHA) & (out.n >= 2)
    better = np.where(out["diff"] < 0, out.i, out.j) if lower else np.where(out["diff"] > 0, out.i, out.j)
    worse = np.where(out.i == better, out.j, out.i)
    out["statement"] = [
        (f"`{b}` {'lower' if lower else 'higher'} {name} than `{w}`" if d != 0 else f"`{i}` and `{j}` equal {name}")
        + f" at {where}: {_fmt_effect(e, lo, hi, kind)} (`{i}`/`{j}`); {_status(s, pw)}"
        for b, w, d, e, lo, hi, i, j, s, pw in
        zip(better, worse, out["diff"], out.effect, out.lo, out.hi, out.i, out.j, out.established, out.power)]
    return out


def rank_findings(table, prefix, where, metric, orders):
    """Rank findings of one seed table at one length: the rank of the mean with its paired-bootstrap interval
    (ranks.rank_bootstrap over the seeds every variant has); established only when the variant's order against every
    other variant is (its order findings, `orders`), since a bootstrap over 3 seeds has 10 distinct resamples."""
    r = ranks.rank_bootstrap(table, lower_is_better=lower_is_better(metric))
    n = int(table.dropna(axis=0, how="any").shape[0])
    k = len(r)
    rows = []
    for v, q in r.iterrows():
        mine = orders[(orders.i == v) | (orders.j == v)]
        est = bool(len(mine) == k - 1 and mine.established.all())
        span = f"{q.lo:g}–{q.hi:g}" if math.isfinite(q.lo) else "—"
        rows.append(dict(id=f"rank/{prefix}/{_slug(v)}", kind="rank", effect=float(q["rank"]), lo=float(q.lo),
                         hi=float(q.hi), p=math.nan, p_holm=float(mine.p_holm.max()) if len(mine) else math.nan, n=n,
                         power=float(mine.power.min()) if len(mine) else math.nan, established=est,
                         test=f"paired bootstrap over seeds, n {n}; the {len(mine)} order findings of `{v}`",
                         family=f"the {k} variants at {where}",
                         statement=f"`{v}` ranks {q['rank']:g} of {k} at {where} (95% interval {span}); " + (
                             _status(est, float(mine.power.min()) if len(mine) else math.nan) if len(mine) == k - 1
                             else f"not established (its order against {k - 1 - len(mine)} of the others is not "
                                  f"tested)")))
    return pd.DataFrame(rows)


def _slug(x):
    """An id part: '16×' -> '16x', 'rope qk_norm=default' -> 'rope+qk_norm=default' (ids have no spaces)."""
    return str(x).replace("×", "x").replace(", ", "+").replace(",", "+").replace(" ", "+")


def _group_tables(df):
    """Yield (where, rung, length, words, metric, kind, seed table by `short`) for each comparison group's headline
    metric at its compared lengths. where: the task (and train length when the rows hold several); rung: '16x' when
    the rows hold several budgets, else ''."""
    rungs = report_budget.rung_names(report_budget.budget_table(df)) if df.budget.nunique() > 1 else {}
    for group, m in confidence_groups(df):
        if not m:
            continue
        metric, _, _, d = m[0]
        kind = bounds.kind_of(d)
        task = d.task.iloc[0]
        rung = rungs.get(d.budget.iloc[0], "")
        many_tl = df[df.task == task].train_len.nunique() > 1
        where = task + (f"/L{int(d.train_len.iloc[0])}" if many_tl else "")
        for L, _ in lengths(d):
            words = f"{L} ({'' if not rung else rung + ' compute, '}{group.split(', ')[0]})"
            yield where, _slug(rung), L, words, metric, kind, stats.seed_table(d[d.eval_len == L], "short")


def change_findings(df):
    """Change findings of every ladder (harness.report.budget.ladders)."""
    out = []
    for task, title, d, b, names, *_ in report_budget.ladders(df):
        kind = bounds.kind_of(d)
        metric = d.metric.iloc[0]
        name = NAMES.get(metric, metric)
        for ka, kb in combinations(b.index, 2):
            rn = f"{_slug(names[ka])}-{_slug(names[kb])}"
            fam = []
            for rel in sorted(d.rel.dropna().unique()):
                ta = stats.seed_table(d[(d.budget == ka) & (d.rel == rel)], "pair")
                tb = stats.seed_table(d[(d.budget == kb) & (d.rel == rel)], "pair")
                if ta.empty or tb.empty:
                    continue
                L = int(rel * d.train_len.iloc[0])
                xa, xb = _scale(ta, kind), _scale(tb, kind)
                for r in transfer.rung_change(ta, tb, kind).itertuples():
                    shared = xa[r.variant].dropna().index.intersection(xb[r.variant].dropna().index)
                    diffs = (xb[r.variant][shared] - xa[r.variant][shared]).to_numpy() if r.test == "paired" else []
                    fam.append(dict(id=f"change/{task}/{rn}/{L}/{_slug(r.variant)}", kind="change", effect=r.change,
                                    lo=r.lo, hi=r.hi, p=r.p, n=r.n, diffs=diffs, v=r.variant, L=L, where=task,
                                    rung=rn,
                                    test=f"{'paired t' if r.test == 'paired' else 'Welch t'} on "
                                         f"{'log ' if kind == 'ratio' else ''}{name}, n {r.n}"))
            f = pd.DataFrame(fam)
            if f.empty:
                continue
            f["p_holm"] = stats.holm(f.p.to_numpy())
            f["power"] = [power(x, ALPHA / len(f)) for x in f.diffs]
            f["family"] = f"the {len(f)} variant x length changes {names[ka]} → {names[kb]}"
            f["established"] = (f.p_holm < ALPHA) & (f.n >= 2)
            f["statement"] = [f"`{v}`'s {name} at {L} changes {names[ka]} → {names[kb]} compute: "
                              f"{_fmt_effect(e, lo, hi, kind)}; {_status(s, pw)}" for v, L, e, lo, hi, s, pw in
                              zip(f.v, f.L, f.effect, f.lo, f.hi, f.established, f.power)]
            out.append(f)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=COLUMNS)


def flip_findings(orders):
    """Flip findings from the order findings of a ladder's rungs (columns where, rung, L: findings() sets them):
    every pair whose mean order differs between two rungs (same task, train length and evaluation length)."""
    o = orders[orders.rung != ""]
    rows = []
    for (where, L, i, j), g in o.groupby(["where", "L", "i", "j"]):
        g = g.set_index("rung")
        for ra, rb in combinations(sorted(g.index, key=lambda r: float(r.rstrip("x"))), 2):  # cheaper first
            a, b = g.loc[ra], g.loc[rb]
            if not (np.sign(a["diff"]) * np.sign(b["diff"]) < 0):
                continue
            est = bool(a.established and b.established)
            pw = float(np.nanmin([a.power, b.power])) if np.isfinite([a.power, b.power]).any() else math.nan
            rows.append(dict(id=f"flip/{where}/{ra}-{rb}/{L}/{_slug(i)}-{_slug(j)}", kind="flip", effect=math.nan,
                             lo=math.nan, hi=math.nan, p=max(a.p, b.p), p_holm=max(a.p_holm, b.p_holm),
                             n=min(a.n, b.n), power=pw, established=est, test="the two order findings",
                             family=f"{a.family}; {b.family}", where=where, rung=f"{ra}-{rb}", L=L,
                             statement=f"`{i}` / `{j}` order at {L} flips {ra} → {rb} compute "
                                       f"(`{i}`/`{j}`: {a.effect:.3g} → {b.effect:.3g}); {_status(est, pw)}"))
    return pd.DataFrame(rows, columns=COLUMNS)


def findings(df, reference=None) -> pd.DataFrame:
    """Every finding of prepared report rows (harness.report.build.prepare; extension rows left out), COLUMNS.
    reference: the variant that order findings always include (the report's --reference)."""
    core = df[~df.ext]
    orders, rank_rows = [], []
    for where, rung, L, words, metric, kind, table in _group_tables(core):
        if table.shape[1] < 2:
            continue
        task, _, train_len = where.partition("/")
        prefix = task + (f"@{rung}" if rung else "") + (f"/{train_len}" if train_len else "") + f"/{L}"
        orders.append(order_findings(table, prefix, words, metric, kind, reference).assign(where=where, rung=rung,
                                                                                           L=L))
        rank_rows.append(rank_findings(table, prefix, words, metric, orders[-1]))
    orders = pd.concat(orders, ignore_index=True) if orders else pd.DataFrame(columns=COLUMNS)
    parts = [orders, flip_findings(orders) if len(orders) else None, change_findings(core),
             pd.concat(rank_rows, ignore_index=True) if rank_rows else None]
    parts = [p for p in parts if p is not None and len(p)]
    return pd.concat(parts, ignore_index=True).reindex(columns=COLUMNS) if parts else pd.DataFrame(columns=COLUMNS)
