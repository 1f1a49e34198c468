"""The report's figures. Every curve is a mean over seeds with its 95% t band (lo..hi from stats.summarize:
columns variant, <x>, n, mean, lo, hi, half); with one seed lo/hi are NaN and no band is drawn.

Each figure is built by a `fig_*` function that returns the Figure (tests inspect its artists) and saved
by `save`. Up to 30 variants stay distinct: 10 colours x 3 line styles/markers."""
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.collections  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

STYLES, MARKERS = ("-", "--", ":"), ("o", "s", "^")
BAND_ALPHA = 0.14


def style(i):
    """(colour, line style, marker) of the i-th curve."""
    return plt.get_cmap("tab10")(i % 10), STYLES[i // 10 % 3], MARKERS[i // 10 % 3]


def save(fig, out, name, made, tight=True):
    """Write out/name; bbox 'tight' keeps a legend placed outside the axes in the picture."""
    if tight:
        fig.tight_layout()
    fig.savefig(Path(out) / name, dpi=110, bbox_inches="tight" if tight else None)
    plt.close(fig)
    made.append(name)


def _plain_log_y(ax):
    plain = matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}")
    ax.set_yscale("log")
    ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.5, 2, 3, 4, 5, 6, 7, 8, 9)))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)


def band(ax, x, lo, hi, color, logy=False):
    """fill_between lo..hi where both are finite (a PolyCollection); nothing when no point has an interval."""
    x, lo, hi = (np.asarray(a, dtype=float) for a in (x, lo, hi))
    if logy:  # a wide interval of a small-n mean can reach below 0, which a log axis cannot show
        lo = np.where(lo > 0, lo, np.nan)
    ok = np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return None
    return ax.fill_between(x, lo, hi, where=ok, color=color, alpha=BAND_ALPHA, lw=0, interpolate=False)


def n_text(s):
    """'n = 3 seeds' (or a range) for a figure's caption, from a summarize frame."""
    ns = s.n[s.n > 0]
    if ns.empty:
        return "no data"
    lo, hi = int(ns.min()), int(ns.max())
    seeds = f"n = {hi}" if lo == hi else f"n = {lo}–{hi}"
    return seeds + (" seeds; band: 95% t interval" if hi >= 2 else " seed: no interval")


def fig_curves(s, x, title, xlabel, ylabel, vlines=(), logy=True, logx=True, panels=None):
    """One line per variant (mean over seeds) with its CI band vs x; legend ordered by the right end.
    A `panel` column in s (e.g. the budget) gives one panel per value (in the order `panels`, default
    sorted), shared axes, one colour per variant."""
    s = s.sort_values(x)
    if "panel" in s:
        panels = [p for p in (panels or sorted(s["panel"].unique())) if p in set(s["panel"])]
    else:
        panels = [None]
    first = s if panels == [None] else s[s["panel"] == panels[-1]]
    last = first.dropna(subset=["mean"]).groupby("variant")["mean"].last()
    order = list(last.sort_values(ascending=False).index) + sorted(set(s.variant) - set(last.index))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.0 + 7.0 * len(panels) ** 0.8, 5.8), sharey=True,
                             squeeze=False)
    for ax, p in zip(axes[0], panels):
        sp = s if p is None else s[s["panel"] == p]
        for i, v in enumerate(order):
            g = sp[sp.variant == v]
            if g.empty:
                continue
            c, ls, m = style(i)
            xs = g[x].astype(float).to_numpy()
            ax.plot(xs, g["mean"].to_numpy(dtype=float), marker=m, ms=4, label=v, color=c, ls=ls, lw=1.4)
            band(ax, xs, g["lo"], g["hi"], c, logy)
        for L in vlines:
            ax.axvline(float(L), color="grey", ls=":", lw=1.2)
        if logx:
            ticks = sorted({int(v) for v in sp[x].dropna()})
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [str(t) for t in ticks])
        if logy:
            _plain_log_y(ax)
        ax.set(xlabel=xlabel, title=str(p) if p is not None else "")
        ax.grid(alpha=0.3, which="both")
    axes[0, 0].set_ylabel(ylabel)
    fig.suptitle(f"{title}\n({n_text(s)})", fontsize=11)
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]}
    axes[0, -1].legend([handles[v] for v in order if v in handles], [v for v in order if v in handles],
                       fontsize=7, ncol=1 if len(order) <= 24 else 2, loc="upper left", bbox_to_anchor=(1.01, 1),
                       title="variant (top: highest at right end" + (f" of {panels[-1]})" if len(panels) > 1
                                                                    else ")"), title_fontsize=7)
    return fig


def fig_bars(s, title, xlabel):
    """Horizontal bars of the mean per variant with 95% CI error bars; s: summarize frame by variant."""
    s = s.dropna(subset=["mean"]).sort_values("mean")
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(s) + 1.6))
    xerr = s["half"].where(s["n"] >= 2).fillna(0).to_numpy()
    ax.barh(s.variant, s["mean"], xerr=xerr, color="tab:blue", ecolor="k", capsize=2)
    for y, (v, e) in enumerate(zip(s["mean"], xerr)):
        ax.text(v + e, y, f" {v:,.0f}" if abs(v) >= 1e4 else f" {v:.3g}", va="center", fontsize=7)
    ax.set(title=f"{title}\n({n_text(s).replace('band', 'error bar')})", xlabel=xlabel)
    ax.grid(alpha=0.3, axis="x")
    return fig


def label_points(ax, xs, ys, labels, fontsize=7):
    """Annotate points with labels that do not overlap: each label takes the first of a few offsets
    around its point whose box (estimated from the text length) is free of the boxes already placed."""
    ax.autoscale_view()
    pts = ax.transData.transform(np.column_stack([xs, ys])) * 72 / ax.figure.dpi  # display -> points
    w_char, h = 0.56 * fontsize, fontsize + 1
    placed = []
    for (px, py), x, y, text in sorted(zip(pts.tolist(), xs, ys, labels), key=lambda t: -t[0][1]):
        w = w_char * len(text)
        cands = [(4, 2), (4, -h - 2), (-w - 4, 2), (-w - 4, -h - 2), (4, h + 3), (4, -2 * h - 4), (-w / 2, h + 4),
                 (-w / 2, -2 * h - 4)]

        def overlap(o):
            x0, y0 = px + o[0], py + o[1]
            return sum(max(0, min(x0 + w, b[2]) - max(x0, b[0])) * max(0, min(y0 + h, b[3]) - max(y0, b[1]))
                       for b in placed)
        best = min(cands, key=lambda o: (overlap(o) > 0, overlap(o), cands.index(o)))
        placed.append((px + best[0], py + best[1], px + best[0] + w, py + best[1] + h))
        ax.annotate(text, (x, y), xytext=best, textcoords="offset points", fontsize=fontsize)


def fig_cost(q, costs, qlabel, logy=True):
    """Quality against cost, one panel per cost: points are variants, error bars the 95% CIs both ways.
    q: summarize frame by variant (quality); costs: [(xlabel, summarize frame by variant)]."""
    fig, axes = plt.subplots(1, len(costs), figsize=(6.5 * len(costs), 5.2), squeeze=False)
    for ax, (xlabel, c) in zip(axes[0], costs):
        m = q.merge(c, on="variant", suffixes=("_q", "_c")).dropna(subset=["mean_q", "mean_c"])
        for i, r in enumerate(m.itertuples()):
            col = style(i)[0]
            xerr = r.half_c if r.n_c >= 2 and math.isfinite(r.half_c) else 0
            yerr = r.half_q if r.n_q >= 2 and math.isfinite(r.half_q) else 0
            ax.errorbar(r.mean_c, r.mean_q, xerr=xerr, yerr=yerr, fmt="o", ms=5, color=col, capsize=2, lw=1)
        if logy:
            _plain_log_y(ax)
        ax.set(xlabel=xlabel, ylabel=qlabel)
        ax.grid(alpha=0.3, which="both")
        label_points(ax, m.mean_c.to_numpy(float), m.mean_q.to_numpy(float), list(m.variant))
    fig.suptitle(f"quality against cost ({n_text(q).replace('band', 'error bars')})", fontsize=10)
    return fig


def fig_training(s, ylabel="train loss (nats/byte)"):
    """Small multiples: one panel per variant (mean over seeds + band) on shared axes; every other
    variant's mean in light grey behind it for context. s: summarize frame by (variant, step)."""
    curves = {v: g.sort_values("step") for v, g in s.groupby("variant")}
    vs = sorted(curves)
    ncol = min(4, len(vs))
    nrow = math.ceil(len(vs) / ncol)
    w, h = 3.3 * ncol, 2.3 * nrow + 0.9
    fig, axes = plt.subplots(nrow, ncol, figsize=(w, h), sharex=True, sharey=True, squeeze=False)
    # fixed margins (inches -> fractions): tight_layout over 16 shared panels costs seconds
    fig.subplots_adjust(left=0.75 / w, right=1 - 0.15 / w, bottom=0.55 / h, top=1 - 0.6 / h, wspace=0.08,
                        hspace=0.35)
    late = s[s.step >= 0.1 * s.step.max()]  # the first steps (loss ~ log 256) would flatten everything else
    vals = late[["mean", "lo", "hi"]].to_numpy(dtype=float)
    top, bottom = (np.nanmax(vals), np.nanmin(vals)) if np.isfinite(vals).any() else (math.nan, math.nan)
    segs = {v: np.column_stack([g.step.to_numpy(dtype=float), g["mean"].to_numpy(dtype=float)])
            for v, g in curves.items()}
    for ax, v in zip(axes.flat, vs):
        ax.add_collection(matplotlib.collections.LineCollection([segs[w] for w in vs if w != v], colors="0.82",
                                                                linewidths=0.7))
        g = curves[v]
        ax.plot(g.step, g["mean"], color="tab:blue", lw=1.4)
        band(ax, g.step, g["lo"], g["hi"], "tab:blue")
        ax.set_title(v, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(vs):]:
        ax.axis("off")
    if math.isfinite(top):
        pad = 0.05 * (top - bottom) or 0.05
        axes[0, 0].set_ylim(bottom - pad, top + pad)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("step", fontsize=8)
    fig.suptitle(f"training loss per variant, grey: the other variants ({n_text(s)}; the first 10% of steps "
                 f"run off the top)", fontsize=10)
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
        ax.set(title=v, xlabel="length", ylabel="key depth" if i == 0 else "")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label=f"passkey accuracy ({n_text(s).split(';')[0]})")
    return fig
