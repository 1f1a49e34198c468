"""The report's visual vocabulary in one place: curve styles (no two curves of a figure alike) and the human axis
labels of row columns and metrics, with their units."""
import colorsys

import colorcet
import matplotlib

matplotlib.use("Agg")

# colorcet's glasbey_category10: tab10, then colours chosen by Glasbey's method to be far from all before them.
# Left out: greys (grey is the context colour) and light colours that vanish on white (HLS saturation < 0.3 or
# lightness > 0.75). The first 9 are tab10 without its grey; 177 in all. The reference curve is black.
PALETTE = tuple(c for c in map(tuple, colorcet.glasbey_category10)
                if colorsys.rgb_to_hls(*c)[2] >= 0.3 and colorsys.rgb_to_hls(*c)[1] <= 0.75)
LINESTYLES = ("-", "--", "-.", ":")
# matplotlib's filled markers less "*" (the reference's), "." (too small) and the look-alikes of "o" ("8", "H")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "d")
REFERENCE = ("black", "-", "*")
# every legend: readable, and outside its axes (to their right), so it never covers a curve
LEGEND = dict(fontsize=8, framealpha=0.85, handlelength=2.6, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              borderaxespad=0.0)
COINCIDE = 0.005  # two curves coincide when they are this share of the axes' span apart, or less, at every x

# Axis labels by row column or metric name (values in MiB where the name is in bytes: the callers divide).
LABELS = {
    "eval_len": "eval length (tokens)", "pos": "position in the window (tokens)", "step": "training step",
    "ppl": "perplexity", "nll_beyond_train": "NLL past the train length (nats/byte)",
    "nll_by_pos": "NLL (nats/byte)", "byte_acc": "next-byte accuracy", "acc": "token accuracy",
    "seq_acc": "sequence accuracy", "ruler_all": "RULER string match (share of references found)",
    "attn_entropy": "attention entropy (nats)", "train_loss": "train loss (nats/byte)",
    "train_tokens_per_s": "train throughput (tokens/s)", "eval_tokens_per_s": "eval throughput (tokens/s)",
    "peak_mem_bytes": "peak memory (MiB)", "effective_len_relative": "effective length (tokens)",
    "effective_len_absolute": "effective length (tokens)", "kl_fp32": "KL(fp32 ‖ low precision) (nats)",
    "phase_err_rad": "RoPE phase error (rad, max per window)",
    "logit_err": "attention-logit error |Δ logit| (max per window)",
    "shift_variance": "std of one logit over offsets (logit units)",
    "peak_extra_bytes": "peak extra memory (MiB)", "s_per_call": "time per forward (s)",
    "T": "sequence length T (tokens)", "position": "position (tokens)", "distance": "relative distance (tokens)",
    "offset": "offset (tokens)",
}


def label(name, log=False):
    """The axis label of a column or metric (the name itself when unknown), `, log scale` appended on request."""
    return LABELS.get(name, str(name)) + (", log scale" if log else "")


def look(j, k):
    """(colour, line style, marker) of the j-th curve of the k-th panel: a colour per place in the panel, a line
    style per panel, and a marker that changes with both (curves that coincide in a panel, or plots of markers
    alone, still show two shapes). No two (j, k) alike for j < len(PALETTE) (177) and k < 48 (the markers alone
    tell panels apart for k < 12)."""
    return (PALETTE[j % len(PALETTE)], LINESTYLES[(k + k // len(MARKERS)) % len(LINESTYLES)],
            MARKERS[(j + k) % len(MARKERS)])


def style(i):
    """(colour, line style, marker) of the i-th curve of a flat list: a colour of its own for i < len(PALETTE), then
    the next line style; distinct for i < len(PALETTE) * len(LINESTYLES) (708). The marker changes every curve."""
    return PALETTE[i % len(PALETTE)], LINESTYLES[i // len(PALETTE) % len(LINESTYLES)], MARKERS[i % len(MARKERS)]


def distinct(i):
    """(colour, line style, marker) of the i-th of a few curves that may lie on one another (precision pipelines):
    all three change from one curve to the next, distinct for i < lcm(177, 4, 12) = 708."""
    return PALETTE[i % len(PALETTE)], LINESTYLES[i % len(LINESTYLES)], MARKERS[i % len(MARKERS)]


def styles(panels, reference=None):
    """{variant: (colour, line style, marker)} for [(title, [variants])] (see `look`), black stars for `reference`;
    a variant keeps its first style in every panel."""
    out = {}
    for k, (_, members) in enumerate(panels):
        j = 0
        for v in members:
            if v in out:
                continue
            out[v] = REFERENCE if v == reference else look(j, k)
            j += (v != reference)
    return out


def legend(ax, handles=None, labels=None, **kw):
    """The report's legend of ax, outside the axes to their right (never over the data); kw: matplotlib's, e.g.
    ncol. A figure that wants it elsewhere passes its own loc and bbox_to_anchor, outside the axes too."""
    args = (handles, labels) if handles is not None else ()
    return ax.legend(*args, **{**LEGEND, **kw})


def coincident(curves, log=False, tol=COINCIDE):
    """{name: the earlier name it coincides with} for curves {name: (xs, ys)} of one axes, in drawing order: two
    curves coincide when they have the same xs (and NaNs) and their ys are within `tol` of the span of every
    curve's ys (log: of their decades) at every x, which on a figure is a pixel or two: a reader sees one curve."""
    import numpy as np
    prep = {}
    for name, (xs, ys) in curves.items():
        y = np.asarray(ys, dtype=float)
        if log:
            y = np.log10(np.where(y > 0, y, np.nan))
        prep[name] = (np.asarray(xs, dtype=float), y)
    finite = np.concatenate([y[np.isfinite(y)] for _, y in prep.values()] or [np.zeros(0)])
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    out, seen = {}, []
    for name, (x, y) in prep.items():
        for other, (x2, y2) in seen:
            if (len(x) == len(x2) and len(x) and np.array_equal(x, x2) and np.array_equal(np.isnan(y), np.isnan(y2))
                    and np.isfinite(y).any()
                    and np.all(np.abs(y - y2)[np.isfinite(y)] <= tol * span)):
                out[name] = other
                break
        seen.append((name, (x, y)))
    return out


def coincide_label(name, other):
    """The legend text of a curve drawn over an earlier one: `B = A (coincide)`."""
    return f"{name} = {other} (coincide)"


def name_coincident(ax):
    """Find the labelled lines of ax that coincide (see `coincident`; on the axes' y scale) and name them in the
    legend (`B = A (coincide)`), drawing the later one with larger open markers above the other so both show.
    Call it after the axes' curves are drawn and before its legend. Returns {later label: earlier label}."""
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    same = coincident({id(ln): (ln.get_xdata(), ln.get_ydata()) for ln in lines}, log=ax.get_yscale() == "log")
    by_id = {id(ln): ln for ln in lines}
    named = {}
    for later, earlier in same.items():
        ln, first = by_id[later], by_id[earlier]
        named[ln.get_label()] = first.get_label().split(" = ")[0]
        ln.set_label(coincide_label(ln.get_label(), named[ln.get_label()]))
        ln.set_markerfacecolor("none")
        ln.set_markersize(max(ln.get_markersize(), 5) + 3)
        ln.set_zorder(max(ln.get_zorder(), first.get_zorder()) + 0.1)
    return named
