"""Report tables whose every cell carries its confidence: `mean ± half` over seeds (harness.stats), or
`mean [lo, hi]` where the interval of the metric's kind is not symmetric about the mean (harness.report.bounds).

A table is built from long rows (variant, <column key>, seed, value): stats.summarize, with the interval of the
metric's kind, gives one cell per (variant, key) and ranks.best_and_ties, paired by seed within one column, picks
the **bold** best cell and the † cells that no paired interval separates from it. n (seeds) and the kind's
interval are stated once, in the heading line."""
import math

import numpy as np
import pandas as pd

from harness import ranks, stats
from harness.report import bounds

# Which way is better, by metric name (the last part of an lm-eval `<task>/<metric>[/<filter>]` counts too).
# Metrics not listed (signed gaps, drifts) get no best and no † marks.
LOWER = {"ppl", "nll_beyond_train", "nll_by_pos", "peak_mem_bytes", "kl_fp32", "train_wall_s", "train_loss",
         "kv_cache_bytes", "byte_perplexity", "word_perplexity", "bits_per_byte", "perplexity"}
HIGHER = {"acc", "seq_acc", "acc_norm", "exact_match", "train_tokens_per_s", "eval_tokens_per_s",
          "train_loop_tokens_per_s", "byte_acc", "ruler_all", "ruler_part", "effective_len_absolute",
          "effective_len_relative", "decode_tokens_per_s"}
TIE_LEGEND = "† tied with the best of its column (paired 95% CI of the difference contains 0)"


def lower_is_better(metric):
    """True / False / None (no direction) for a metric name."""
    for name in [metric, *str(metric).split("/")[1:2]]:
        if name in LOWER:
            return True
        if name in HIGHER:
            return False
    return None


def fmt(x, spec="{:.3g}"):
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else spec.format(x)


def decimals(half):
    """Decimals that show `half` to 2 significant digits (negative: round to tens, hundreds...)."""
    return 1 - math.floor(math.log10(half))


def fmt_ci(mean, half):
    """`mean ± half`, both rounded to 2 significant digits of half; just the mean without a half."""
    if not math.isfinite(mean):
        return "—"
    if not math.isfinite(half):
        return f"{mean:.3g}"
    if half == 0:
        return f"{mean:.4g} ± 0"
    dec = decimals(half)
    big = max(abs(mean), half)
    if big >= 1e6 or big < 1e-3 or dec > 5:  # one shared exponent: (8.11 ± 0.39)e-04
        e = math.floor(math.log10(big))
        m, h = mean / 10 ** e, half / 10 ** e
        k = min(max(decimals(h), 0), 4)
        return f"({m:.{k}f} ± {h:.{k}f})e{e:+03d}"
    if dec < 0:  # 20297 ± 684 -> 20300 ± 680
        return f"{round(mean, dec):.0f} ± {round(half, dec):.0f}"
    return f"{mean:.{dec}f} ± {half:.{dec}f}"


def _bound(x, dec):
    """One end of an interval to `dec` decimals; a nonzero end that would round to 0 keeps 2 significant digits
    (a ratio's lower end 0.004 must not read as 0, which a positive quantity cannot be)."""
    r = round(x, dec)
    if r == 0 and x != 0:
        return f"{x:.2g}"
    return f"{r:.0f}" if dec <= 0 else f"{x:.{dec}f}"


def symmetric(mean, lo, hi):
    """True when [lo, hi] is symmetric about mean up to rounding (a t interval; not a clipped or geometric one)."""
    return abs((hi - mean) - (mean - lo)) <= 1e-9 * max((hi - lo) / 2, abs(mean))


def fmt_interval(mean, lo, hi):
    """A cell of an interval: `mean ± half` (fmt_ci) when it is symmetric about the mean (a t interval), else
    `mean [lo, hi]` (a clipped t interval, a ratio's geometric one), each to the decimals of 2 significant digits
    of the half-width; just the mean without bounds (n < 2)."""
    if not (math.isfinite(mean) and math.isfinite(lo) and math.isfinite(hi)):
        return fmt_ci(mean, math.nan)
    half = (hi - lo) / 2
    if symmetric(mean, lo, hi):
        return fmt_ci(mean, half)
    dec = decimals(half)
    big = max(abs(mean), abs(lo), abs(hi))
    if big >= 1e6 or big < 1e-3 or dec > 5:  # one shared exponent: (8.11 [7.70, 8.52])e-04
        e = math.floor(math.log10(big))
        k = min(max(decimals(half / 10 ** e), 0), 4)
        return f"({mean / 10 ** e:.{k}f} [{_bound(lo / 10 ** e, k)}, {_bound(hi / 10 ** e, k)}])e{e:+03d}"
    if dec < 0:  # 20297 [19612, 20990] -> 20300 [19610, 20990]
        return f"{round(mean, dec):.0f} [{_bound(lo, dec)}, {_bound(hi, dec)}]"
    return f"{mean:.{dec}f} [{_bound(lo, dec)}, {_bound(hi, dec)}]"


# What a table's cells are, by the kind of its metric (harness.report.bounds): said once, in its heading line
KIND_TEXT = {
    "real": "± is the 95% t interval.",
    "proportion": ("± is the 95% t interval; a proportion: where that interval would leave [0, 1] it is clipped "
                   "to [0, 1] and the cell shows [lo, hi]."),
    "nonnegative": ("± is the 95% t interval; a quantity ≥ 0: where that interval would run below 0 it is "
                    "clipped at 0 and the cell shows [lo, hi]."),
    "ratio": ("a positive ratio-scale quantity: each cell is the geometric mean over seeds [95% t interval of the "
              "logarithms, exponentiated]."),
    "trials": "k/n trials [Wilson 95% interval].",
}


def n_line(ns, lower=None, kind="real"):
    """The heading line of a table whose cells have n seeds each (ns: the n of every measured cell) and intervals
    of `kind` (KIND_TEXT)."""
    ns = pd.Series(ns, dtype=float).dropna()
    ns = ns[ns > 0]
    if ns.empty:
        return "No measured cell."
    lo, hi = int(ns.min()), int(ns.max())
    what = KIND_TEXT[kind]
    if hi < 2:
        line = ("n = 1 seed per cell: each cell is one run, no interval; nothing is marked significant "
                "(one seed decides nothing).")
    elif lo == hi:
        line = f"n = {hi} seeds per cell; {what}"
    else:
        line = (f"n = {lo}–{hi} seeds per cell (a cell's n is shown where it is not {int(ns.mode().max())}); "
                f"{what[:-1]} (none at n = 1).")
    if lower is not None:
        line += f" **Bold**: best of its column ({'lower' if lower else 'higher'} is better)."
        if hi >= 2:
            line += "  \n" + TIE_LEGEND + "."
    return line


def ci_cells(d, col, lower=None, order=None, kind=None):
    """d: rows with variant, col, seed, value -> (cells: variant x col DataFrame of strings, heading line).
    lower: True/False marks the best cell of each column in bold and its ties with †; None marks nothing.
    kind: the interval kind (harness.stats.KINDS); default the one kind of d's metric and unit (bounds.kind_of)."""
    kind = kind or bounds.kind_of(d)
    s = stats.summarize(d, ["variant", col], kind=kind)
    order = list(order) if order is not None else sorted(s[col].dropna().unique())
    measured = s[s.n > 0]
    common = int(measured.n.mode().max()) if len(measured) else 0
    several = len(measured) and measured.n.max() >= 2
    best, ties = {}, {}
    if lower is not None:
        for c, g in d.groupby(col):
            table = stats.seed_table(g, "variant")
            if np.isfinite(table.to_numpy(dtype=float)).any():  # NaN or inf only (a diverged run): no best
                best[c], t = ranks.best_and_ties(table, lower, kind=kind)
                ties[c] = t if several else set()  # one seed: nothing is separated, so nothing is marked
    cells = pd.DataFrame("—", index=pd.Index(sorted(s.variant.unique()), name="variant"), columns=order,
                         dtype=object)
    for r in s.to_dict("records"):
        if r[col] not in cells.columns or r["n"] == 0:
            continue
        text = fmt_interval(r["mean"], r["lo"], r["hi"])
        if best.get(r[col]) == r["variant"]:
            text = f"**{text}**"
        elif r["variant"] in ties.get(r[col], ()):
            text += " †"
        if r["n"] != common:
            text += f" (n={r['n']})"
        cells.loc[r["variant"], r[col]] = text
    return cells, n_line(measured.n, lower, kind)


def render(cells, index_name="variant"):
    """A table of strings as GitHub markdown."""
    head = [index_name] + [str(c) for c in cells.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join([str(i)] + [str(v) for v in row]) + " |" for i, row in cells.iterrows()]
    return "\n".join(lines)


def ci_table(d, col, lower=None, order=None, index_name="variant", kind=None):
    """Markdown lines: the n heading line, then the table (see ci_cells)."""
    cells, head = ci_cells(d, col, lower, order, kind)
    return [head + "\n", render(cells, index_name), ""]


def md_table(pt: pd.DataFrame, spec="{:.3g}") -> str:
    """A table of values that are not aggregated over seeds (kernel grids) as markdown; NaN shows as '—'."""
    cells = pt.apply(lambda c: c.map(lambda v: fmt(v, spec) if isinstance(v, float) else spec.format(v)))
    return render(cells, str(pt.index.name or ""))


def select(df, metric, protocol=None):
    """Rows of one metric (protocol: a prefix), or None when there are none."""
    d = df[df.metric == metric]
    if protocol is not None:
        d = d[d.protocol.str.startswith(protocol)]
    return None if d.empty else d


def table(d, title, col="eval_len", scale=1.0, order=None):
    """`### title` + the mean ± CI table of rows d (variant x col); direction from the metric."""
    d = d.assign(value=d.value / scale)
    return [f"### {title}\n"] + ci_table(d, col, lower_is_better(d.metric.iloc[0]), order)
