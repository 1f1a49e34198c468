"""The report's visual vocabulary in one place: curve styles (no two curves of a figure alike) and the human axis
labels of row columns and metrics, with their units."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# tab10 without its grey (grey is the context colour); the reference curve is black
PALETTE = tuple(c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7)
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<")
REFERENCE = ("black", "-", "*")
LEGEND = dict(fontsize=8, framealpha=0.85, handlelength=2.6)  # every legend: readable, inside its axes

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
    """(colour, line style, marker) of the j-th curve (j < 9) of the k-th panel: a colour per place in the panel,
    a line style per panel, and a marker that changes with both (curves that coincide in a panel still show two
    shapes). Two (j, k) look alike only when j and k both agree (k modulo 32)."""
    return (PALETTE[j % len(PALETTE)], LINESTYLES[(k + k // len(MARKERS)) % len(LINESTYLES)],
            MARKERS[(j + k) % len(MARKERS)])


def style(i):
    """(colour, line style, marker) of the i-th curve of a flat list: distinct for i < 288."""
    return look(i % len(PALETTE), i // len(PALETTE))


def distinct(i):
    """(colour, line style, marker) of the i-th of a few curves that may lie on one another (precision pipelines):
    all three change from one curve to the next, distinct for i < 72."""
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
            if v == reference:
                out[v] = REFERENCE
                continue
            out[v] = look(j, k + len(panels) * (j // len(PALETTE)))
            j += 1
    return out


def legend(ax, handles=None, labels=None, **kw):
    """A legend inside ax in the report's size (matplotlib's `best` place: where it covers the fewest points)."""
    args = (handles, labels) if handles is not None else ()
    return ax.legend(*args, **{**LEGEND, "loc": "best", **kw})
