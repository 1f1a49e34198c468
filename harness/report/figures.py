"""The report's small-multiple figures: quality against cost, training curves, passkey heatmaps. Panels follow the
family groups of harness.report.families and every variant keeps the style harness.report.style gives it."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.collections  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from harness.report import families  # noqa: E402
from harness.report.labels import human  # noqa: E402
from harness.report.plots import BAND_TEXT, _plain_log_y, band, errorbars, grid, kind_of, n_text  # noqa: E402
from harness.report.style import REFERENCE, legend, styles  # noqa: E402
from harness.report.tables import symmetric  # noqa: E402


def fig_cost(q, costs, qlabel, logy=True, groups=None, reference=None):
    """Quality against cost: a panel per (group, cost), the group's variants as points with 95% error bars both
    ways (lo..hi of each metric's kind; named in the legend of the group's last panel), every other variant a grey
    dot for context. q: summarize frame by variant (quality); costs: [(xlabel, summarize frame by variant)];
    groups: [(title, [variants])]."""
    groups = groups or families.panels({v: "" for v in q.variant}, reference)
    look, q_kind = styles(groups, reference), kind_of(q)
    c_kinds = {xlabel: kind_of(c) for xlabel, c in costs}
    fig, cells = grid(len(groups), [c for c, _ in costs], w=4.6, h=3.6, legend_w=2.9)
    merged = {xlabel: q.merge(c, on="variant", suffixes=("_q", "_c")).dropna(subset=["mean_q", "mean_c"])
              for xlabel, c in costs}
    for (gi, xlabel), ax in cells.items():
        name, members = groups[gi]
        m = merged[xlabel]
        rest, mine = m[~m.variant.isin(members)], m[m.variant.isin(members)]
        ax.scatter(rest.mean_c, rest.mean_q, s=9, color="0.8", zorder=1)
        for r in mine.itertuples():
            c, _, mk = look[r.variant]
            bars = dict(ecolor=c, capsize=2, lw=1, alpha=0.7)
            if r.n_c >= 2:
                errorbars(ax, r.mean_c, r.mean_q, r.lo_c, r.hi_c, "x", c_kinds[xlabel], **bars)
            if r.n_q >= 2:
                errorbars(ax, r.mean_c, r.mean_q, r.lo_q, r.hi_q, "y", q_kind, **bars)
            ax.plot(r.mean_c, r.mean_q, marker=mk, ms=10 if r.variant == reference else 7, color=c, ls="none",
                    label=human(r.variant) + (" (reference)" if r.variant == reference else ""), zorder=3)
        if logy:
            _plain_log_y(ax)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if xlabel == costs[-1][0] and len(mine):
            legend(ax)
    fig.supylabel(qlabel, fontsize=10)
    said = n_text(q)  # 'n = 3 seeds; band: ...', or no interval: each axis its own kind's error bars
    if "; band: " in said:
        said = (said.split(";")[0] + f"; error bars: quality {BAND_TEXT[q_kind]}, cost "
                + " / ".join(sorted({BAND_TEXT[k] for k in c_kinds.values()})))
    fig.suptitle(f"quality against cost (grey dots: the variants of the other panels)\n({said})", fontsize=11)
    return fig


def fig_training(s, ylabel="train loss (nats/byte)", groups=None, reference=None):
    """Small multiples: one panel per variant (mean over seeds + band) on shared axes, in family order; the other
    variants of its family panel in light grey behind it for context. s: summarize frame by (variant, step).
    Each variant is drawn from 10% of its own steps on: its first steps (a loss near log 256) would flatten the
    rest. The y axis holds every band it draws: a limit that cut one (a seed's loss spike) would hide the spread
    it shows."""
    kind = kind_of(s)
    s = s[s.step >= 0.1 * s.groupby("variant").step.transform("max")]
    curves = {v: g.sort_values("step") for v, g in s.groupby("variant")}
    groups = groups or families.panels({v: "" for v in curves}, reference)
    look = styles(groups, reference)
    home = {}  # a variant's panel group: the first that lists it
    for name, members in groups:
        for v in members:
            home.setdefault(v, (name, members))
    vs = [v for v in home if v in curves] + sorted(set(curves) - set(home))
    ncol = min(4, len(vs))
    nrow = math.ceil(len(vs) / ncol)
    w, h = 3.3 * ncol, 2.3 * nrow + 1.1
    fig, axes = plt.subplots(nrow, ncol, figsize=(w, h), sharex=True, sharey=True, squeeze=False)
    # fixed margins (inches -> fractions): tight_layout over 32 shared panels costs seconds; the top margin
    # holds the two-line title above the first row's panel titles
    fig.subplots_adjust(left=0.75 / w, right=1 - 0.15 / w, bottom=0.55 / h, top=1 - 1.0 / h, wspace=0.08,
                        hspace=0.38)
    segs = {v: np.column_stack([g.step.to_numpy(dtype=float), g["mean"].to_numpy(dtype=float)])
            for v, g in curves.items()}
    for ax, v in zip(axes.flat, vs):
        name, members = home.get(v, ("", list(curves)))
        if v == reference and len(groups) > 1:  # grey in every other panel: no context of its own
            name, members = "reference", [v]
        others = [segs[u] for u in members if u != v and u in segs]
        ax.add_collection(matplotlib.collections.LineCollection(others, colors="0.82", linewidths=0.7))
        g = curves[v]
        c, _, mk = look.get(v, REFERENCE)  # solid: a noisy curve drawn dotted is hard to read; the panel names it
        ax.plot(g.step, g["mean"], color=c, marker=mk, ms=4, markevery=max(1, len(g) // 6), lw=1.3, label=human(v))
        band(ax, g.step, g["lo"], g["hi"], c, kind=kind)
        ax.set_title(human(v), fontsize=9)
        if name:
            ax.text(0.97, 0.93, name, transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.35")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(vs):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("training step", fontsize=8)
    fig.suptitle(f"training loss per variant; grey: the other variants of its family panel\n({n_text(s)}; the "
                 f"first 10% of each variant's steps are left out)", fontsize=10, y=1 - 0.2 / h, va="top")
    return fig


def fig_passkey(s):
    """One heatmap per variant: depth x length, mean accuracy over seeds with its interval when n >= 2 (± half, or
    [lo, hi] where clipped to [0, 1]), two decimals to fit a cell, in each cell. s: summarize frame by (variant,
    protocol, eval_len)."""
    vs = sorted(s.variant.unique())
    fig, axes = plt.subplots(1, len(vs), figsize=(3.4 * len(vs) + 1, 3.8), squeeze=False, layout="constrained")
    im = None
    for i, (ax, v) in enumerate(zip(axes[0], vs)):
        g = s[s.variant == v]
        mean = g.pivot(index="protocol", columns="eval_len", values="mean")
        lo, hi = (g.pivot(index="protocol", columns="eval_len", values=k).reindex_like(mean) for k in ("lo", "hi"))
        rows = sorted(mean.index, key=lambda p: float(p.split("=")[1]))
        mean, lo, hi = (t.loc[rows].to_numpy(dtype=float) for t in (mean, lo, hi))
        im = ax.imshow(mean, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for (r, c), val in np.ndenumerate(mean):
            a, b = lo[r, c], hi[r, c]
            text = f"{val:.2f}" + ("" if not (np.isfinite(a) and np.isfinite(b)) else
                                   f"\n±{(b - a) / 2:.2f}" if symmetric(val, a, b) else f"\n[{a:.2f}, {b:.2f}]")
            ax.text(c, r, text, ha="center", va="center", fontsize=6, color="w" if val < 0.6 else "k")
        cols = sorted(g.eval_len.unique())
        ax.set_xticks(range(len(cols)), [str(c) for c in cols], fontsize=7, rotation=45)
        ax.set_yticks(range(len(rows)), [p.split("=")[1] for p in rows], fontsize=7)
        ax.set(title=human(v), xlabel="sequence length (tokens)", ylabel="needle depth (share of the context)" if i == 0
               else "")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label=f"passkey accuracy ({n_text(s).split(';')[0]})")
    if "; band: " in n_text(s):
        fig.suptitle(f"passkey accuracy: mean over seeds and its {n_text(s).split('; band: ')[1]} (± where the "
                     f"interval is symmetric, [lo, hi] where clipped)", fontsize=9)
    return fig
