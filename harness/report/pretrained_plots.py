"""The pretrained report's figure: one PNG per model (harness.report.pretrained writes it next to report.md)."""
from harness import stats
from harness.rope.pipelines import pipeline_names
from harness.pretrained.rows import lm_rows, order as _order
from harness.report.bounds import checked
from harness.report.plots import BAND_ALPHA, save, style
from harness.report.style import legend, name_coincident


def figure(d, out, made, name="pretrained.png"):
    """name: up to four panels, two a row: (1) bits per byte vs length per variant (bands: 95% t over windows,
    which differ in how hard their text is); (2) each variant minus `none` paired on the windows (bands: the paired
    95% CI, the comparison the report makes); (3) KL to fp32 vs position per precision pipeline (retrieval has its
    own figure: harness.report.pretrained_retrieval). Variants keep one colour across panels; pipelines take
    another palette."""
    import matplotlib.pyplot as plt
    kl, lm = d[(d.metric == "kl_fp32")], lm_rows(d)
    names = _order(set(lm.variant))
    panels = (["bpb"] * bool(len(lm)) + ["diff"] * (lm.variant.nunique() > 1 and "none" in set(lm.variant))
              + ["kl"] * bool(len(kl)))
    if not panels:
        return None
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2 if len(panels) > 1 else 1, figsize=(17 if len(panels) > 1 else 8.5, 4.6 * rows),
                             squeeze=False, layout="constrained")
    ax = dict(zip(panels, axes.ravel()))
    for extra in axes.ravel()[len(panels):]:
        extra.set_visible(False)
    colour = {v: style(i) for i, v in enumerate(names)}
    for key in ("bpb", "diff"):
        if key in ax:
            _variant_panel(ax[key], key, lm, colour)
    if "bpb" in ax:
        ax["bpb"].set(ylabel="bits per byte", title=f"{d.model.iloc[0]}: RoPE variants, no fine-tune "
                                                    f"(n = {lm.seed.nunique()} windows)")
        name_coincident(ax["bpb"])
        legend(ax["bpb"])
    if "diff" in ax:
        ax["diff"].axhline(0, color="0.3", lw=0.8)
        ax["diff"].set(ylabel="bits per byte minus none's (same windows)", title="each variant − none, paired "
                                                                                "(bands: 95% CI)")
        if name_coincident(ax["diff"]):
            legend(ax["diff"])
    if "kl" in ax:
        _precision_panel(ax["kl"], kl)
    save(fig, out, name, made)
    return name


def _variant_panel(a, key, rows, colour):
    """One curve per variant vs length: the mean (bpb) or the paired difference to none (diff), with bands."""
    lens = sorted(rows.eval_len.unique())
    n = rows.groupby("variant").seed.nunique()
    for v in sorted(rows.variant.unique(), key=list(colour).index):
        if key == "diff" and v == "none":
            continue
        c, ls, mk = colour[v]
        if key == "diff":
            p = [stats.paired(t[v], t["none"]) for t in (stats.seed_table(rows[rows.eval_len == L], "variant")
                                                          for L in lens)]
            x, y, lo, hi = lens, [q.diff for q in p], [q.lo for q in p], [q.hi for q in p]
        else:
            s = stats.summarize(rows[rows.variant == v], ["eval_len"])
            for _, q in s.iterrows():
                checked(rows.metric.iloc[0], q)
            x, y, lo, hi = s.eval_len, s["mean"], s.lo, s.hi
        label = v if n[v] == n.max() else f"{v} (n = {n[v]})"  # the title's n is the most windows any variant has
        a.plot(x, y, ls, marker=mk, color=c, label=label, lw=1.6, ms=4)
        a.fill_between(x, lo, hi, color=c, alpha=BAND_ALPHA, lw=0)
    a.axvline(int(rows.train_len.iloc[0]), color="0.4", ls=":", lw=1)
    a.set_xscale("log")
    a.set_xticks(lens, [f"{L // 1024}k" for L in lens])
    a.minorticks_off()  # log-scale minor labels (4x10^3, 6x10^3) would collide with the k labels
    a.set_xlabel("window length (tokens; dotted: trained context)")


def _precision_panel(b, kl):
    palette, every = plt_palette(), pipeline_names()  # a pipeline keeps its colour in every figure
    corpora = [c for c in ("pystdlib", "kjv") if c in set(kl.corpus)]
    for name in sorted(kl.pipeline.dropna().unique()):
        i = every.index(name) if name in every else len(every)
        for corpus, ls in zip(corpora, ("-", "--")):
            g = kl[(kl.pipeline == name) & (kl.corpus == corpus)]
            s = stats.summarize(g, ["eval_len"])
            b.plot(s.eval_len, s["mean"], ls, color=palette(i), label=name if corpus == corpora[0] else None)
    b.axhline(1e-3, color="0.4", ls=":", lw=1)
    which = " and ".join(f"{c} ({ls})" for c, ls in zip(corpora, ("solid", "dashed")))
    b.set(xscale="log", yscale="log", xlabel=f"target position (end of a log window); {which}",
          ylabel="mean KL to the fp32 pipeline (nats)",
          title=f"RoPE precision pipelines, n = {kl.seed.nunique()} windows (dotted: 1e-3)")
    name_coincident(b)
    legend(b)


def plt_palette():
    """The pipelines' palette (Dark2), apart from the variants' tab10."""
    import matplotlib.pyplot as plt
    return plt.get_cmap("Dark2")
