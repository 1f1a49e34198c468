"""The report's small-multiple figures: quality against cost, training curves, passkey heatmaps. Panels follow the
family groups of harness.report.families and every variant keeps the style harness.report.style gives it."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.collections  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from harness.report import families  # noqa: E402
from harness.report.plots import _plain_log_y, band, grid, n_text  # noqa: E402
from harness.report.style import REFERENCE, legend, styles  # noqa: E402


def fig_cost(q, costs, qlabel, logy=True, groups=None, reference=None):
    """Quality against cost: a panel per (group, cost), the group's variants as points with 95% CI error bars both
    ways (named in the legend of the group's last panel), every other variant a grey dot for context. q: summarize
    frame by variant (quality); costs: [(xlabel, summarize frame by variant)]; groups: [(title, [variants])]."""
    groups = groups or families.panels({v: "" for v in q.variant}, reference)
    look = styles(groups, reference)
    fig, cells = grid(len(groups), [c for c, _ in costs], w=4.6, h=3.6)
    merged = {xlabel: q.merge(c, on="variant", suffixes=("_q", "_c")).dropna(subset=["mean_q", "mean_c"])
              for xlabel, c in costs}
    for (gi, xlabel), ax in cells.items():
        name, members = groups[gi]
        m = merged[xlabel]
        rest, mine = m[~m.variant.isin(members)], m[m.variant.isin(members)]
        ax.scatter(rest.mean_c, rest.mean_q, s=9, color="0.8", zorder=1)
        for r in mine.itertuples():
            c, _, mk = look[r.variant]
            xerr = r.half_c if r.n_c >= 2 and math.isfinite(r.half_c) else 0
            yerr = r.half_q if r.n_q >= 2 and math.isfinite(r.half_q) else 0
            ax.errorbar(r.mean_c, r.mean_q, xerr=xerr, yerr=yerr, fmt="none", ecolor=c, capsize=2, lw=1, alpha=0.7)
            ax.plot(r.mean_c, r.mean_q, marker=mk, ms=10 if r.variant == reference else 7, color=c, ls="none",
                    label=f"{r.variant} (reference)" if r.variant == reference else r.variant, zorder=3)
        if logy:
            _plain_log_y(ax)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if xlabel == costs[-1][0] and len(mine):
            legend(ax)
    fig.supylabel(qlabel, fontsize=10)
    fig.suptitle(f"quality against cost ({n_text(q).replace('band', 'error bars')}; grey dots: the variants of the "
                 f"other panels)", fontsize=11)
    return fig


def fig_training(s, ylabel="train loss (nats/byte)", groups=None, reference=None):
    """Small multiples: one panel per variant (mean over seeds + band) on shared axes, in family order; the other
    variants of its family panel in light grey behind it for context. s: summarize frame by (variant, step)."""
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
    late = s[s.step >= 0.1 * s.step.max()]  # the first steps (loss ~ log 256) would flatten everything else
    # the means' range (0.5th..99.5th percentile) widened by the typical half-width: a one-step spike of one
    # variant's band (a seed's loss spike) would flatten every panel
    mean, half = (late[c].to_numpy(dtype=float) for c in ("mean", "half"))
    mean, half = mean[np.isfinite(mean)], half[np.isfinite(half)]
    pad = float(np.median(half)) if len(half) else 0.0
    top, bottom = ((np.percentile(mean, 99.5) + pad, np.percentile(mean, 0.5) - pad) if len(mean)
                   else (math.nan, math.nan))
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
        ax.plot(g.step, g["mean"], color=c, marker=mk, ms=4, markevery=max(1, len(g) // 6), lw=1.3, label=v)
        band(ax, g.step, g["lo"], g["hi"], c)
        ax.set_title(v, fontsize=9)
        if name:
            ax.text(0.97, 0.93, name, transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.35")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(vs):]:
        ax.axis("off")
    if math.isfinite(top):
        pad = 0.05 * (top - bottom) or 0.05
        axes[0, 0].set_ylim(bottom - pad, top + pad)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("training step", fontsize=8)
    fig.suptitle(f"training loss per variant; grey: the other variants of its family panel\n({n_text(s)}; the "
                 f"first 10% of steps run off the top)", fontsize=10, y=1 - 0.2 / h, va="top")
    return fig


def fig_passkey(s):
    """One heatmap per variant: depth x length, mean accuracy over seeds (± half when n >= 2) in each cell.
    s: summarize frame by (variant, protocol, eval_len)."""
    vs = sorted(s.variant.unique())
    fig, axes = plt.subplots(1, len(vs), figsize=(3.4 * len(vs) + 1, 3.8), squeeze=False, layout="constrained")
    im = None
    for i, (ax, v) in enumerate(zip(axes[0], vs)):
        g = s[s.variant == v]
        mean = g.pivot(index="protocol", columns="eval_len", values="mean")
        half = g.pivot(index="protocol", columns="eval_len", values="half").reindex_like(mean)
        rows = sorted(mean.index, key=lambda p: float(p.split("=")[1]))
        mean, half = mean.loc[rows], half.loc[rows]
        im = ax.imshow(mean.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for (r, c), val in np.ndenumerate(mean.to_numpy(dtype=float)):
            h = half.to_numpy(dtype=float)[r, c]
            text = f"{val:.2f}" + (f"\n±{h:.2f}" if math.isfinite(h) else "")
            ax.text(c, r, text, ha="center", va="center", fontsize=6, color="w" if val < 0.6 else "k")
        ax.set_xticks(range(len(mean.columns)), [str(c) for c in mean.columns], fontsize=7, rotation=45)
        ax.set_yticks(range(len(rows)), [p.split("=")[1] for p in rows], fontsize=7)
        ax.set(title=v, xlabel="sequence length (tokens)", ylabel="needle depth (share of the context)" if i == 0
               else "")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label=f"passkey accuracy ({n_text(s).split(';')[0]})")
    return fig
