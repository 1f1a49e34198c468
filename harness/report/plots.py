"""The report's figures: the shared pieces (save, band, grid of panels, point labels) and the curve and bar
figures. Every curve is a mean over seeds with its 95% band (lo..hi from harness.report.bounds.summarize: columns
variant, <x>, n, mean, lo, hi, half, kind), the interval of the metric's kind, so no band leaves what the metric can
be; with one seed lo/hi are NaN and no band is drawn. Axis limits never cut a band or an error bar: each is tagged
with its kind (its gid, `interval:<kind>:<axis>`), and the tests check both against the kind's range and the axes.

Each figure is built by a `fig_*` function that returns the Figure (tests inspect its artists) and saved by
`save`. Curves are split into panels of at most families.CAP, grouped by encoding family (harness.report.families);
harness.report.style gives every curve of a figure its own colour x line style x marker."""
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from harness.report import families  # noqa: E402
from harness.report.labels import human  # noqa: E402
from harness.report.style import legend, name_coincident, style, styles  # noqa: E402,F401 - legend, style: shared

BAND_ALPHA = 0.14


def save(fig, out, name, made, tight=True):
    """Write out/name; bbox 'tight' keeps everything drawn (legends, notes) in the picture."""
    if tight and fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(Path(out) / name, dpi=110, bbox_inches="tight" if tight else None)
    plt.close(fig)
    made.append(name)


def plain_log(axis):
    """A log axis (ax.xaxis / ax.yaxis) whose tick labels read 20, 30, not 2×10¹."""
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_minor_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.5, 2, 3, 4, 5, 6, 7, 8, 9)))
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


def _plain_log_y(ax):
    ax.set_yscale("log")
    plain_log(ax.yaxis)
    ax.tick_params(axis="y", which="minor", labelsize=7)


def tag(artist, kind, axis="y"):
    """Mark an interval's artist (band, error bars) with its kind and the axis it spans: its gid
    `interval:<kind>:<axis>`, which tests read to hold it inside the kind's range and inside the axes."""
    artist.set_gid(f"interval:{kind}:{axis}")
    return artist


def kind_of(s):
    """The interval kind of a summarize frame (its `kind` column, else real: stats.summarize's t)."""
    ks = set(s["kind"].dropna()) if "kind" in s else {"real"}
    if len(ks) > 1:
        raise ValueError(f"one figure, one interval kind; got {sorted(ks)}")
    return ks.pop() if ks else "real"


def band(ax, x, lo, hi, color, logy=False, kind="real"):
    """fill_between lo..hi where both are finite (a PolyCollection tagged with `kind`); nothing when no point has
    an interval. On a log axis a bound <= 0 cannot be drawn: ValueError (a ratio's interval is positive; any other
    kind on a log axis is the caller's mistake), never a band cut where it cannot be shown."""
    x, lo, hi = (np.asarray(a, dtype=float) for a in (x, lo, hi))
    if logy and (lo <= 0).any():
        raise ValueError(f"a band reaching {np.nanmin(lo):.3g} on a log axis (kind {kind}): draw a {kind} metric on "
                         f"a linear axis, or give it the ratio kind's interval")
    ok = np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return None
    return tag(ax.fill_between(x, lo, hi, where=ok, color=color, alpha=BAND_ALPHA, lw=0, interpolate=False), kind)


def errorbars(ax, x, y, lo, hi, axis, kind, **kw):
    """Error bars lo..hi along `axis` ("x" or "y") at points (x, y), tagged with `kind` (see tag); where a bound is
    NaN (n < 2) the bar has no length."""
    x, y, lo, hi = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (x, y, lo, hi))
    at = x if axis == "x" else y
    err = np.nan_to_num(np.vstack([at - lo, hi - at]), nan=0.0)
    c = ax.errorbar(x, y, **{f"{axis}err": err}, fmt="none", **kw)
    for coll in c.lines[2]:
        tag(coll, kind, axis)
    return c


def twins(pt):
    """{row: the earlier row it equals at every x} of a (label x x) table: curves drawn exactly over another."""
    out, seen = {}, []
    for name, r in pt.iterrows():
        v = r.to_numpy(dtype=float)
        same = next((o for o, w in seen if np.array_equal(np.isnan(v), np.isnan(w))
                     and np.allclose(v[~np.isnan(v)], w[~np.isnan(w)], rtol=1e-9, atol=0)), None)
        if same is not None:
            out[name] = same
        seen.append((name, v))
    return out


# A figure's band by the kind of its metric (harness.report.bounds), in its caption
BAND_TEXT = {"real": "95% t interval", "proportion": "95% t interval clipped to [0, 1]",
             "nonnegative": "95% t interval clipped at 0", "ratio": "geometric mean, 95% t interval of the logs",
             "trials": "Wilson 95% interval"}


def n_text(s):
    """'n = 3 seeds; band: ...' (or a range of n) for a figure's caption, from a summarize frame."""
    ns = s.n[s.n > 0]
    if ns.empty:
        return "no data"
    lo, hi = int(ns.min()), int(ns.max())
    seeds = f"n = {hi}" if lo == hi else f"n = {lo}–{hi}"
    return seeds + (f" seeds; band: {BAND_TEXT[kind_of(s)]}" if hi >= 2 else " seed: no interval")


def grid(n_groups, cols=(None,), w=4.8, h=3.5, sharey=True, legend_w=0.0):
    """(Figure, {(group index, column key): Axes}): a panel per (group, column key). Without column keys the
    groups wrap three a row (two with legends); with keys a group's panels sit side by side, groups wrapped to about
    four panels a row. Panels of one column key share x, all share y (sharey); unused cells are hidden. legend_w:
    inches added per group for its legend, outside its last panel."""
    cols = list(cols)
    per_row = min(n_groups, (2 if legend_w else 3) if cols == [None] else max(1, 4 // len(cols)))
    nrow, ncol = math.ceil(n_groups / per_row), per_row * len(cols)
    fig, axes = plt.subplots(nrow, ncol, figsize=(w * ncol + legend_w * per_row + 0.6, h * nrow + 1.0),
                             squeeze=False, sharey=sharey, layout="constrained")
    cells, first = {}, {}
    for gi in range(n_groups):
        for ci, col in enumerate(cols):
            ax = axes[gi // per_row, (gi % per_row) * len(cols) + ci]
            if col in first:
                ax.sharex(first[col])
            first.setdefault(col, ax)
            cells[(gi, col)] = ax
    used = set(map(id, cells.values()))
    for ax in axes.flat:
        if id(ax) not in used:
            ax.set_visible(False)
    return fig, cells


def right_end_order(sp, x, members):
    """members ordered by their last mean along x, highest first (the legend's order); unmeasured last."""
    last = sp.dropna(subset=["mean"]).sort_values(x).groupby("variant")["mean"].last()
    last = last[last.index.isin(members)]
    return list(last.sort_values(ascending=False).index) + sorted(set(members) - set(last.index))


def fig_curves(s, x, title, xlabel, ylabel, vlines=(), logy=True, logx=True, panels=None, groups=None,
               reference=None):
    """One line per variant (mean over seeds) with its CI band vs x. groups: [(title, [variants])] from
    families.panels (default: every variant, split into panels of families.CAP); `reference` is drawn in black
    in every panel it is listed in. A `panel` column in s (e.g. the budget) adds one panel per value and group
    (in the order `panels`, default sorted), shared axes, one style per variant."""
    s = s.sort_values(x)
    if "panel" in s:
        cols = [p for p in (panels or sorted(s["panel"].unique())) if p in set(s["panel"])]
    else:
        cols = [None]
    groups = groups or families.panels({v: "" for v in s.variant.unique()}, reference)
    look, kind = styles(groups, reference), kind_of(s)
    fig, cells = grid(len(groups), cols, legend_w=2.9)
    for (gi, col), ax in cells.items():
        name, members = groups[gi]
        sp = s if col is None else s[s["panel"] == col]
        order = [v for v in right_end_order(sp, x, members) if (sp.variant == v).any()]
        for v in order:
            g = sp[sp.variant == v]
            c, ls, m = look[v]
            xs = g[x].astype(float).to_numpy()
            ref = v == reference
            # the reference under the others (a curve on it stays visible)
            ax.plot(xs, g["mean"].to_numpy(dtype=float), marker=m, ms=7 if ref else 4.5, ls=ls, color=c,
                    lw=2.0 if ref else 1.5, zorder=1.9 if ref else 2,
                    label=human(v) + (" (reference)" if ref else ""))
            band(ax, xs, g["lo"], g["hi"], c, logy, kind)
        for L in vlines:
            ax.axvline(float(L), color="grey", ls=":", lw=1.2)
        if logx:
            ticks = sorted({int(v) for v in sp[x].dropna()})
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if logy:
            _plain_log_y(ax)
        ax.set_title(" · ".join(human(t) for t in (name, col) if t), fontsize=10)
        ax.grid(alpha=0.3, which="both")
    for (gi, col), ax in cells.items():  # coincident curves named in every panel; one legend a group, at its right
        same = name_coincident(ax)
        if ax.get_lines() and (col == cols[-1] or same):
            legend(ax)
    fig.supxlabel(xlabel, fontsize=10)
    fig.supylabel(ylabel, fontsize=10)
    fig.suptitle(f"{title}\n({n_text(s)}; each legend: highest at the right end first)", fontsize=11)
    return fig


def _amount(v):
    return f"{v:,.0f}" if abs(v) >= 1e3 else f"{v:.3g}"


def fig_bars(s, title, xlabel, censored=(), note=""):
    """Horizontal bars of the mean per variant with 95% error bars (lo..hi: the interval of the metric's kind, so
    not symmetric about a clipped or geometric mean); s: summarize frame by variant.
    censored: variants whose value is only a lower bound (every seed reached the longest length measured):
    labelled `≥`, marked by a ▶ at the bar's end and explained by `note` under the axis."""
    s = s.dropna(subset=["mean"]).sort_values("mean")
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(s) + 1.8))
    ax.barh([human(v) for v in s.variant], s["mean"], color="tab:blue")
    lo, hi = (s[c].where(s["n"] >= 2).to_numpy(dtype=float) for c in ("lo", "hi"))
    errorbars(ax, s["mean"], np.arange(len(s)), lo, hi, "x", kind_of(s), ecolor="k", capsize=2)
    cens = [y for y, v in enumerate(s.variant) if v in set(censored)]
    for y, (v, e) in enumerate(zip(s["mean"], np.where(np.isfinite(hi), hi, s["mean"]))):
        ax.annotate(("≥ " if y in cens else "") + _amount(v), (e, y), xytext=(8 if y in cens else 3, 0),
                    textcoords="offset points", va="center", fontsize=8)
    if cens:
        ax.plot(s["mean"].to_numpy(float)[cens], cens, ">", color="tab:red", ms=7, ls="none",
                label="≥: a lower bound (censored)")  # explained by `note`, under the axis
        ax.set_xlim(right=ax.get_xlim()[1] * 1.08)
    ax.set(title=f"{title}\n({n_text(s).replace('band', 'error bar')})",
           xlabel=xlabel + (f"\n{note}" if cens and note else ""))
    ax.grid(alpha=0.3, axis="x")
    return fig


def label_points(ax, xs, ys, labels, fontsize=8):
    """Annotate points with labels that overlap neither one another nor the points, a thin grey line from a label
    moved off its point (adjustText). Call it last: it places the labels for the axes' limits at the time."""
    from adjustText import adjust_text  # at first use (DESIGN.md §6.6)
    ax.autoscale_view()
    texts = [ax.text(x, y, text, fontsize=fontsize) for x, y, text in zip(xs, ys, labels)]
    adjust_text(texts, x=np.asarray(xs, dtype=float), y=np.asarray(ys, dtype=float), ax=ax,
                arrowprops=dict(arrowstyle="-", color="grey", lw=0.6),
                iter_lim=500)  # not its default 0.5 s time limit: a loaded machine then left labels overlapping
    return texts
