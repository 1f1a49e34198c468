"""The pretrained report's transfer section at matched points: sweep `transfer` (the laptop proxy of the real model's
RoPE geometry, and the same runs in the laptop's own geometry as the baseline) against the real model's rows at 1.5x
and 2x its trained context (harness.pretrained.transfer.cells), as markdown and one scatter figure of the pairs."""
import json
import math

import numpy as np

from harness.pretrained import transfer
from harness.report.plots import save, style
from harness.rope import geometry

LINTHRESH = 0.01  # bits per byte: the figure's axes are linear inside it


def FORMAT(v, _=None):
    return f"{v:g}"


def _scale(rows, model, unit):
    """'ladder16x (1.82M parameters, 1137 steps, 1.16M bytes)' of a laptop size, from its rows (unit: what its
    tokens are)."""
    r = rows[rows.model == model]

    def one(metric):
        v = r[r.metric == metric].value
        return float(v.iloc[0]) if len(v) else math.nan
    return (f"{model} ({one('n_params') / 1e6:.2f}M parameters, {one('train_steps'):.0f} steps, "
            f"{one('train_tokens') / 1e6:.2f}M {unit}s)")


def _geometry(base, head_dim, train_len):
    k = geometry.critical_dim(head_dim, base, train_len)
    return f"base {base:.4g}: {k} of {head_dim} dims turned in {train_len}"


def _tau(t):
    if math.isnan(t.lo):  # fewer than 2 seeds or windows on a side: a point, no interval
        return f"{t.tau:+.2f} [no interval: n < 2]"
    return f"{t.tau:+.2f} [{t.lo:+.2f}, {t.hi:+.2f}]"


def _diff(x):
    return "—" if x.n < 2 else f"{x.diff:+.3f} [{x.lo:+.3f}, {x.hi:+.3f}]{' *' if x.significant else ''}"


SWEEPS = {"transfer": "byte", "transfer_tokens": "token"}  # the proxy sweeps and the unit their lengths count


def cells(df, d):
    """cells of the committed rows: df all rows (the transfer sweeps among them), d the real model's prepared rows;
    each cell's `unit`: what its lengths and bits count (bytes, or the real model's tokens)."""
    return [dict(c, unit=unit) for sweep, unit in SWEEPS.items() for c in _cells(df, d, sweep, unit)]


def _cells(df, d, sweep, unit):
    rows = transfer.proxy_rows(df, sweep)
    real = {r: transfer.matched_real_table(d, r, unit=unit) for r in (1.5, 2)}
    scale = {m: _scale(df[df.sweep == sweep], m, unit) for m in rows.model.unique()}
    hd = {m: int(rows[rows.model == m].head_dim.iloc[0]) for m in rows.model.unique()}
    L = int(rows.train_len.iloc[0]) if len(rows) else 0
    out = transfer.cells(rows, real)
    r = d.iloc[0]  # the real model: its RoPE's share of the head turned inside its trained context
    target = geometry.critical_fraction(float(json.loads(r.params)["base"]), int(r.train_len))
    for c in out:
        c["scale"], c["geometry"] = scale[c["model"]], _geometry(c["base"], hd[c["model"]], L)
        r = df[(df.sweep == sweep) & (df.model == c["model"]) & (df.metric == "n_params")].value
        c["n_params"] = float(r.iloc[0]) if len(r) else math.nan
        c["matched"] = math.isclose(geometry.critical_fraction(c["base"], L), target, rel_tol=1e-9)
    return out


def summary_lines(cs, real_model, real_len):
    """Markdown: one row per (geometry, laptop size, ratio): τ-b with its interval and the pair outcomes."""
    if not cs:
        return []
    lines = [f"Kendall τ-b between the laptop's mean order of the variants (log2 PPL, n = seeds) and {real_model}'s "
             f"(n = windows) in one unit: bits per byte where the laptop models bytes, bits per token where it models "
             f"{real_model}'s tokens; at the same ratio of evaluation length to trained context ({real_len} tokens "
             f"on the real model at 2x), every variant at the factor the real model ran it at; 95% interval from the "
             f"uncertainty of both mean vectors (harness.transfer). Pairs: agree / flip = the order is established "
             f"(paired 95% CI excludes 0) on both sides; open = not established on at least one.\n",
             "| unit | laptop geometry | laptop size | ratio | variants | n (laptop, real) | τ-b [95%] | agree | flip | "
             "open |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(cs, key=lambda c: (c["unit"], not c["matched"], c["model"] != "tiny", c["ratio"])):
        t = c["tau"]
        lines.append(f"| {c['unit']} | {'matched' if c['matched'] else 'unmatched'} ({c['geometry']}) | {c['scale']} | "
                     f"{c['ratio']:g}x | {t.n_variants} | {t.n_seeds_a}, {t.n_seeds_b} | {_tau(t)} | {c['agree']} | "
                     f"{c['flip']} | {c['open']} |")
    return lines + [""]


def pair_lines(c):
    """Markdown: the pairs of one cell, each side's paired difference."""
    u = c["unit"]
    lines = [f"Pairs, {'matched' if c['matched'] else 'unmatched'} geometry, {c['model']}, {c['ratio']:g}x, in {u}s "
             f"(laptop Δ bits per {u} over n = {c['tau'].n_seeds_a} seeds, real Δ bits per {u} over n = "
             f"{c['tau'].n_seeds_b} windows; * = the paired 95% CI excludes 0):\n",
             "| pair (a − b) | laptop Δ | real Δ | outcome |", "|---|---|---|---|"]
    return lines + [f"| {r.a} − {r.b} | {_diff(r.laptop)} | {_diff(r.real)} | {r.outcome} |"
                    for r in c["pairs"].itertuples()] + [""]


def figure(cs, out, made, name="transfer_matched.png"):
    """One panel per laptop size at 2x: every pair's laptop Δ against its real Δ, with both 95% CIs, matched
    geometry and the unmatched baseline in two colours. Points in the upper-right and lower-left quadrants agree
    in sign."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    at2 = [c for c in cs if c["ratio"] == 2]
    panels = sorted({(c["unit"], c["model"]) for c in at2}, key=lambda k: (k[0], k[1] != "tiny"))
    if not panels:
        return None
    cols = min(2, len(panels))
    rows_ = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(6.6 * cols, 6.0 * rows_), squeeze=False)
    for extra in axes.ravel()[len(panels):]:
        extra.set_visible(False)
    for ax, (u, m) in zip(axes.ravel(), panels):
        lim = LINTHRESH
        here = [c for c in at2 if (c["unit"], c["model"]) == (u, m)]
        for i, c in enumerate(sorted(here, key=lambda c: not c["matched"])):
            pr = c["pairs"]
            x = np.array([p.diff for p in pr.laptop]), np.array([[p.diff - p.lo, p.hi - p.diff] for p in pr.laptop]).T
            y = np.array([p.diff for p in pr.real]), np.array([[p.diff - p.lo, p.hi - p.diff] for p in pr.real]).T
            kind = "matched" if c["matched"] else "unmatched"
            ax.errorbar(x[0], y[0], xerr=x[1], yerr=y[1], fmt="o", ms=4, lw=0.8, alpha=0.75, color=style(i)[0],
                        label=f"{kind} ({c['geometry']}): τ-b {_tau(c['tau'])}")
            lim = max(lim, *np.abs(x[0]) + x[1].max(axis=0), *np.abs(y[0]) + y[1].max(axis=0))
        ax.axhline(0, color="0.3", lw=0.8)
        ax.axvline(0, color="0.3", lw=0.8)
        lim *= 1.3
        ax.plot([-lim, lim], [-lim, lim], color="0.6", lw=0.8, ls=":", label="equal Δ on both sides")
        for axis in ("x", "y"):  # linear within ±0.01 bits, logarithmic beyond: pairs differ by 1000x
            getattr(ax, f"set_{axis}scale")("symlog", linthresh=LINTHRESH)
            getattr(ax, f"set_{axis}lim")(-lim, lim)
            getattr(ax, f"{axis}axis").set_major_formatter(FuncFormatter(FORMAT))
        ax.set(xlabel=f"laptop: Δ bits per {u} of the pair (a − b), paired over seeds",
               ylabel=f"real model: Δ bits per {u} (a − b), paired over windows",
               title=f"laptop {m} in {u}s: pairs of variants at 2x the trained context\n(bars: paired 95% CIs; "
                     f"upper-right and lower-left quadrants agree in sign)")
        ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    save(fig, out, name, made)
    return name


def _overlap(a, b):
    """'intervals overlap', 'intervals apart', or 'no interval' (n < 2 on a side) of two TauIntervals."""
    if any(math.isnan(x) for x in (a.lo, a.hi, b.lo, b.hi)):
        return "no interval"
    return "intervals overlap" if a.lo <= b.hi and b.lo <= a.hi else "intervals apart"


def _fmt(c):
    return f"τ-b = {_tau(c['tau'])} (n = {c['tau'].n_seeds_a} seeds, {c['tau'].n_seeds_b} windows)"


def compute_line(cs):
    """Per unit, one sentence: τ at the smallest and the largest laptop size (by parameters), matched geometry, 2x:
    does more compute help?"""
    out = []
    for unit in sorted({c["unit"] for c in cs}):
        m = sorted((c for c in cs if c["matched"] and c["ratio"] == 2 and c["unit"] == unit),
                   key=lambda c: c["n_params"])
        if len(m) < 2:
            continue
        lo, hi = m[0], m[-1]
        verdict = {"intervals overlap": "the two intervals overlap: these runs cannot tell whether the larger laptop "
                                        "model transfers differently",
                   "intervals apart": "the two intervals do not overlap: the larger laptop model transfers "
                                      "differently",
                   "no interval": "a side has fewer than 2 seeds: no comparison"}[_overlap(lo["tau"], hi["tau"])]
        out += [f"Does more laptop compute help ({unit}s, matched geometry, 2x)? {lo['model']} {_fmt(lo)}, "
                f"{hi['model']} ({hi['n_params'] / lo['n_params']:.1f}x the parameters) {_fmt(hi)}; {verdict}.", ""]
    return out


def matching_line(cs):
    """One sentence: at 2x, matched against unmatched τ per (unit, laptop size), and whether the intervals overlap."""
    parts = []
    for (unit, model) in sorted({(c["unit"], c["model"]) for c in cs}):
        two = {c["matched"]: c for c in cs if (c["unit"], c["model"], c["ratio"]) == (unit, model, 2)}
        if len(two) == 2:
            a, b = two[True]["tau"], two[False]["tau"]
            parts.append(f"{model} in {unit}s {_tau(b)} unmatched -> {_tau(a)} matched ({_overlap(a, b)})")
    return ["What matching the geometry changed, τ-b at 2x: " + "; ".join(parts) + ". Where the intervals overlap, "
            "these runs do not show that matching changed τ.", ""] if parts else []


def meaning_line(cs, real_model):
    """What a τ here says and does not, with the scales it holds at."""
    sizes = sorted({(c["n_params"], c["model"]) for c in cs})
    span = " to ".join(f"{n / 1e6:.2f}M" for n in (sizes[0][0], sizes[-1][0])) if len(sizes) > 1 else \
        f"{sizes[0][0] / 1e6:.2f}M"
    return [f"What this measures: whether laptop models of {span} parameters rank these eval-time variants as "
            f"{real_model} does, at 1.5x and 2x each side's trained context, without fine-tuning. It does not say "
            f"that the differences have the same size (the pair tables give both), nor that the order holds for "
            f"other models, other lengths or fine-tuned extensions.", ""]


def section(d, df, out=None, made=None):
    """Markdown lines of the matched-points transfer (empty without sweep `transfer` rows or real variants)."""
    cs = cells(df, d)
    if not cs:
        return []
    real_len = int(2 * d.train_len.iloc[0])
    md = ["### Transfer at matched RoPE geometry\n",
          "The laptop proxy (`make sweep SWEEP=transfer`, conf/proxy/) is trained at 64 bytes with the RoPE base that "
          "puts its critical dimension (Liu et al. 2023, arXiv 2310.05209) at the real model's share of the head, "
          "and YaRN's and Llama 3's turn-counted knobs carried to that base (harness.rope.geometry); the unmatched "
          "baseline is the same runs with the laptop's base 1e4. Sweep `transfer_tokens` trains the same proxy on "
          "the real model's own tokens (task.tokenizer), 64 of them, so that 2x means the same unit on both sides. "
          "All are scored on the Python stdlib, as the real model is. The real model's scale is in its section's "
          "first line; the laptop's in the table.\n",
          *summary_lines(cs, d.model.iloc[0], real_len), *matching_line(cs), *compute_line(cs),
          *meaning_line(cs, d.model.iloc[0])]
    for c in sorted(cs, key=lambda c: (c["unit"], c["model"] != "tiny")):
        if c["matched"] and c["ratio"] == 2:
            md += pair_lines(c)
    if out is not None:
        name = figure(cs, out, made if made is not None else [])
        md += [f"![transfer at matched geometry]({name})\n"] if name else []
    return md


def readme_lines(d, df):
    """The README's lines: the summary table and the compute sentence."""
    cs = cells(df, d)
    return [*summary_lines(cs, d.model.iloc[0], int(2 * d.train_len.iloc[0])), *matching_line(cs),
            *compute_line(cs), *meaning_line(cs, d.model.iloc[0])] if cs else []


def extension_lines(d, laptop, ratio):
    """The unmatched comparison with sweep `extension` (model=tiny at 64 bytes, kjv, factor auto): markdown lines
    and (τ, pairs)."""
    toy, real = transfer.laptop_table(laptop, ratio), transfer.real_table(d, ratio)
    if toy.empty or real.empty:
        return [f"At {ratio}x: not measured (needs sweep extension and the pretrained rows at {ratio}x)."], None
    tau, pr = transfer.tau(toy, real), transfer.pairs(toy, real)
    lap = laptop[(laptop.sweep == "extension") & (laptop.metric == "train_steps")]
    toy_scale = (f"model={lap.model.iloc[0]}, {int(lap.n_layers.iloc[0])} layers, d_model {int(lap.d_model.iloc[0])}, "
                 f"{int(lap.value.iloc[0])} steps at {int(lap.train_len.iloc[0])} bytes" if len(lap) else "")
    L_toy, L_real = int(ratio * lap.train_len.iloc[0]) if len(lap) else "?", int(ratio * d.train_len.iloc[0])
    counts = pr.outcome.value_counts()
    lines = [f"At {ratio}x the trained context (laptop, {toy_scale}: PPL at {L_toy} bytes, n = {tau.n_seeds_a} "
             f"seeds; real: bits per byte at {L_real} tokens, n = {tau.n_seeds_b} windows), {tau.n_variants} variants: "
             f"Kendall τ-b = {tau.tau:+.2f}, 95% interval [{tau.lo:+.2f}, {tau.hi:+.2f}] (from the uncertainty of both "
             f"mean vectors, harness.transfer; with this few seeds and windows, read the pairs). Of "
             f"{len(pr)} pairs: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + ".", "",
             "| pair (a − b) | laptop Δ PPL | real Δ bits/byte | outcome |", "|---|---|---|---|"]
    lines += [f"| {r.a} − {r.b} | {_diff(r.laptop)} | {_diff(r.real)} | {r.outcome} |" for r in pr.itertuples()]
    return lines, (tau, pr)
