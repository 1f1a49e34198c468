"""The report's confidence sections: `## Comparisons` (each variant against a reference, paired by seed,
Holm-adjusted), `## Ranking with confidence` (bootstrap rank intervals) and `## Signal to noise`.

They use the main metrics of each task at 1x and 8x the train length (and the longest length), one
comparison group per (task, budget, train length): only variants trained the same way are paired. Rows
need the report's columns variant/short/group/rel (harness.report.prepare); extension rows are left out."""
import math

import pandas as pd

from harness import ranks, stats
from harness.report.tables import decimals, fmt, lower_is_better, render

# (metric, protocol prefix, title): the quantities a comparison is about, in headline order.
MAIN = (("ppl", "nonoverlapping", "PPL, nonoverlapping windows"),
        ("nll_beyond_train", "nonoverlapping", "NLL (nats) of tokens beyond the train length"),
        ("acc", "iid", "token accuracy"),
        ("seq_acc", "depth=", "passkey accuracy (mean over depths)"))
LENGTHS = ((1, "1×"), (8, "8×"))


def main_rows(df, metric, protocol):
    """Rows of one main metric (not extension rows); empty when absent."""
    return df[(df.metric == metric) & df.protocol.str.startswith(protocol) & ~df.ext]


def mains(df):
    """[(metric, protocol, title, rows)] of the main metrics present in df."""
    out = []
    for metric, protocol, title in MAIN:
        d = main_rows(df, metric, protocol)
        if d.value.notna().any():
            out.append((metric, protocol, title, d))
    return out


def lengths(d, longest=True):
    """[(eval_len, label)] at 1x and 8x the train length (and the longest length) that d has rows at."""
    have = d.dropna(subset=["value"])
    out = [(int(have.eval_len[have.rel == r].iloc[0]), f"{lab} train length") for r, lab in LENGTHS
           if (have.rel == r).any()]
    if longest and len(have):
        top = int(have.eval_len.max())
        if top not in [L for L, _ in out]:
            out.append((top, "longest"))
    return out


def _p(p):
    return "—" if not math.isfinite(p) else ("<0.001" if p < 1e-3 else f"{p:.3f}")


def _signed(x, dec=None):
    """+0.12 / -3.4: to `dec` decimals (those of the CI half-width) when given, else 3 significant digits."""
    if not math.isfinite(x):
        return "—"
    if dec is None or not 0 <= dec <= 5:
        return f"{x:+.3g}"
    return f"{x:+.{dec}f}"


def comparison_table(table, reference, lower, method):
    """Markdown of stats.compare(table, reference): one row per variant, best first."""
    c = stats.compare(table, reference, method=method).sort_values("diff", ascending=bool(lower))
    cells = pd.DataFrame(index=c.index, dtype=object)
    cells["n"] = c.n.astype(str)
    dec = [decimals((hi - lo) / 2) if math.isfinite(lo) and hi > lo else None for lo, hi in zip(c.lo, c.hi)]
    cells[f"Δ vs {reference}"] = [_signed(x, k) for x, k in zip(c["diff"], dec)]
    cells["95% CI of Δ"] = [f"[{_signed(lo, k)}, {_signed(hi, k)}]" if math.isfinite(lo) else "—"
                            for lo, hi, k in zip(c.lo, c.hi, dec)]
    cells["p"] = c.p.map(_p)
    cells["p (Holm)"] = c.p_holm.map(_p)
    better = (c["diff"] < 0) if lower else (c["diff"] > 0)
    cells["significant"] = ["yes, " + ("better" if b else "worse") if s else "no"
                            for s, b in zip(c.significant, better)]
    return render(cells, "variant"), c


def _heading(d):
    ns = stats.seed_table(d, "short").notna().sum()
    ns = ns[ns > 0]
    if ns.empty:
        return None
    lo, hi = int(ns.min()), int(ns.max())
    n = f"n = {hi}" if lo == hi else f"n = {lo}–{hi}"
    return n + (" seed: nothing can be significant (one seed decides nothing)." if hi < 2 else " seeds per variant.")


def groups(df):
    """[(group label, mains of that group)] for the comparison groups of df (extension rows left out)."""
    return [(group, mains(g)) for group, g in df[~df.ext].groupby("group")]


def df_n(groups):
    """The largest number of seeds of any main metric in groups."""
    return max((d.dropna(subset=["value"]).seed.nunique() for _, m in groups for *_, d in m), default=0)


def comparisons(groups, reference, method="t"):
    """`## Comparisons` lines."""
    test = "paired t-test" if method == "t" else "sign-flip permutation test (CI: bootstrap of the differences)"
    md = ["## Comparisons\n",
          f"Each variant against the reference `{reference}` (`--reference` picks another), paired by seed: "
          f"Δ = variant − reference, the mean over seeds of the per-seed difference, with its 95% CI; p from a "
          f"{test}; p (Holm) adjusted over the variants of one table. *significant* = Holm p < 0.05 with n ≥ 2; "
          f"with one seed nothing is.\n"]
    if method == "permutation":
        n = int(df_n(groups)) if groups else 0
        md.append(f"The exact sign-flip test with n seeds cannot give p below 2/2^n (n = {n}: "
                  f"{2 / 2 ** n if n else math.nan:.3g}); with few seeds use the t-test.\n")
    for group, m in groups:
        blocks = []
        for metric, _, title, d in m:
            lower = lower_is_better(metric)
            for L, label in lengths(d):
                dl = d[d.eval_len == L]
                table = stats.seed_table(dl, "short")
                if reference not in table.columns or table.shape[1] < 2:
                    continue
                text, _ = comparison_table(table, reference, lower, method)
                blocks += [f"#### {title} at {L} ({label}; {'lower' if lower else 'higher'} is better)\n",
                           (_heading(dl) or "") + "\n", text, ""]
        if blocks:
            md += [f"### {group}\n"] + blocks
        elif m:
            md += [f"### {group}\n", f"No comparison: the reference `{reference}` has no rows here or is the only "
                                     f"variant.\n"]
    return md


def ranking(groups):
    """`## Ranking with confidence` lines: the headline metric of each group at 1x and 8x."""
    md = ["## Ranking with confidence\n",
          "Rank of the mean over seeds (1 = best), its 95% interval from a paired bootstrap over seeds (seeds "
          "resampled with replacement, the same for every variant; only seeds where every variant is measured), "
          "and P(rank 1), the share of resamples in which the variant ranks first.\n"]
    found = False
    for group, m in groups:
        if not m:
            continue
        metric, _, title, d = m[0]
        lower = lower_is_better(metric)
        cols, ns = {}, []
        for L, label in lengths(d, longest=False) or lengths(d)[-1:]:
            table = stats.seed_table(d[d.eval_len == L], "short")
            r = ranks.rank_bootstrap(table, lower_is_better=lower)
            if r.empty:
                continue
            ns.append(int(table.dropna(axis=1, how="all").dropna(axis=0, how="any").shape[0]))
            head = f"at {L} ({label.split()[0]})"
            cols[f"rank {head}"] = r["rank"].map(lambda x: fmt(x, "{:g}"))
            cols["95% interval " + head] = [f"{lo:g}–{hi:g}" if math.isfinite(lo) else "—"
                                            for lo, hi in zip(r.lo, r.hi)]
            cols["P(rank 1) " + head] = r.p_best.map(lambda x: fmt(x, "{:.2f}"))
            last = r["rank"]
        if not cols:
            continue
        found = True
        cells = pd.DataFrame(cols)
        cells = cells.loc[list(last.sort_values().index) + [v for v in cells.index if v not in last.index]]
        n = min(ns)
        md += [f"### {group}: {title} ({'lower' if lower else 'higher'} is better)\n",
               (f"n = {n} seeds." if n >= 2 else f"n = {n} seed: ranks of single runs; no interval, nothing is "
                                                 f"decided (one seed decides nothing).")
               + (f" With {n} seeds a bootstrap has only {math.comb(2 * n - 1, n)} distinct resamples: read these "
                  f"intervals as optimistic, and the paired tests of `## Comparisons` as the decision."
                  if 2 <= n < 6 else "") + "\n",
               render(cells, "variant"), ""]
    return md if found else []


def signal_to_noise(groups):
    """`## Signal to noise` lines: ranks.snr per (group, main metric, eval length)."""
    rows = []
    for group, m in groups:
        for metric, _, title, d in m:
            for L, dl in d.groupby("eval_len"):
                table = stats.seed_table(dl, "short")
                s = ranks.snr(table)
                rel = float(dl.rel.iloc[0])
                if not math.isfinite(s):
                    verdict = ("n/a: needs ≥ 2 seeds and ≥ 2 variants" if s != math.inf
                               else "∞: no seed-to-seed noise, the means differ")
                else:
                    verdict = ("**< 1: this budget cannot separate encodings on this metric**" if s < 1
                               else "≥ 1: differences exceed the seed noise")
                rows.append([group, title, str(int(L)), f"{rel:g}×", "∞" if s == math.inf else fmt(s, "{:.3g}"),
                             verdict])
    if not rows:
        return []
    if all(r[4] == "—" for r in rows):
        return ["## Signal to noise\n", "Not available: the signal-to-noise ratio needs ≥ 2 seeds and ≥ 2 variants "
                                         "of a main metric (one seed has no seed-to-seed noise to compare with).\n"]
    cells = pd.DataFrame(rows, columns=["group", "metric", "eval length", "× train", "SNR", "reading"])
    cells = cells.set_index("group")
    return ["## Signal to noise\n",
            "SNR = variance across variants of their mean over seeds / mean over variants of the seed-to-seed "
            "variance (ranks.snr). Below 1 the spread between encodings is smaller than the noise of retraining "
            "one of them.\n", render(cells, "group"), ""]


def section(df, reference, method="t"):
    """All three sections (Comparisons only when there is a reference)."""
    g = groups(df)
    md = comparisons(g, reference, method) if reference is not None else []
    return md + ranking(g) + signal_to_noise(g)
