"""The pretrained report's retrieval section: rows of `study=retrieval` (harness.pretrained.retrieval) -> per needle,
exact match per variant and length as k/n with its Wilson 95% interval, the answer's NLL paired against `none`,
and a figure: accuracy at each length as points with their intervals (lengths are points, not a line), and the
answer's mean NLL per (length, depth) as one heatmap per variant."""
import numpy as np

from harness import stats
from harness.pretrained.rows import order as _order
from harness.report.bounds import checked
from harness.report.plots import save, style

NEEDLES = {"passkey": "passkey (Mohtashami & Jaggi 2023, arXiv 2305.16300)",
           "single": "RULER niah_single_2 (Hsieh et al. 2024, arXiv 2404.06654): one needle in prose",
           "multikey": "RULER niah_multikey_1: the needle among three distractors with other keys"}


def rows(d):
    return d[(d.protocol == "retrieval") & d.metric.isin(["acc", "answer_nll"])]


def _acc(g):
    iv = checked("acc", stats.interval(g.value, method="wilson"))
    return "—" if iv.n == 0 else f"{round(iv.mean * iv.n):.0f}/{iv.n} [{iv.lo:.2f}, {iv.hi:.2f}]"


def lines(d):
    """Markdown per needle: exact match k/n [Wilson 95%] per variant x length; answer NLL minus none's, paired on
    the samples (the same prompts), mean [95% CI] (* = excludes 0)."""
    r = rows(d)
    if r.empty:
        return []
    out = []
    for needle in [n for n in NEEDLES if n in set(r.needle)]:
        g = r[r.needle == needle]
        acc, nll = g[g.metric == "acc"], g[g.metric == "answer_nll"]
        lens, depths = sorted(acc.eval_len.unique()), sorted(acc.depth.unique())
        n = acc.groupby(["variant", "eval_len"]).seed.nunique().min()
        out += [f"#### {NEEDLES[needle]}\n",
                f"Exact match of the answer (teacher-forced argmax on every answer token), n = {n} samples per length "
                f"at depths {', '.join(f'{x:g}' for x in depths)} ({n // len(depths)} each), the same keys for every "
                f"variant: found/n [Wilson 95%].\n",
                "| variant | " + " | ".join(map(str, lens)) + " |", "|---" * (len(lens) + 1) + "|"]
        for v in _order(acc.variant.unique()):
            out.append(f"| {v} | " + " | ".join(_acc(acc[(acc.variant == v) & (acc.eval_len == L)]) for L in lens)
                       + " |")
        others = [v for v in _order(nll.variant.unique()) if v != "none"]
        if "none" in set(nll.variant) and others:
            out += ["", "The answer's NLL (nats, summed over its tokens) minus none's, paired on the samples: "
                        "mean [95% CI] (* = the CI excludes 0).\n",
                    "| variant | " + " | ".join(map(str, lens)) + " |", "|---" * (len(lens) + 1) + "|"]
            for v in others:
                cells = []
                for L in lens:
                    t = stats.seed_table(nll[nll.eval_len == L], "variant")
                    p = stats.paired(t[v], t["none"]) if v in t else None
                    cells.append("—" if p is None or p.n < 2 else
                                 f"{p.diff:+.2f} [{p.lo:+.2f}, {p.hi:+.2f}]{' *' if p.significant else ''}")
                out.append(f"| {v} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def figure(d, out, made, name):
    """One row per needle: accuracy vs length (points, Wilson 95% bars, variants side by side) and the answer's
    mean NLL per (depth, length), one heatmap per variant on a shared colour scale."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    r = rows(d)
    needles = [n for n in NEEDLES if n in set(r.needle)]
    if not needles:
        return None
    variants = _order(r.variant.unique())
    fig, axes = plt.subplots(len(needles), 1 + len(variants), figsize=(4.0 * (1 + len(variants)), 3.9 * len(needles)),
                             squeeze=False, layout="constrained")
    for row, needle in zip(axes, needles):
        g = r[r.needle == needle]
        acc, nll = g[g.metric == "acc"], g[g.metric == "answer_nll"]
        lens = sorted(acc.eval_len.unique())
        a = row[0]
        seen = {}
        for i, v in enumerate(variants):
            s = stats.summarize(acc[acc.variant == v], ["eval_len"], method="wilson")
            for _, q in s.iterrows():
                checked("acc", q)
            x = np.arange(len(s)) + (i - (len(variants) - 1) / 2) * 0.12
            c, _, mk = style(i)
            a.errorbar(x, s["mean"], yerr=[s["mean"] - s.lo, s.hi - s["mean"]], fmt=mk, color=c,
                       label=_same_as(v, s, seen, lens), ms=5, capsize=2, lw=1.2)
            seen[v] = s
        a.set(ylim=(-0.03, 1.03), ylabel="exact match", title=f"{needle}: accuracy (Wilson 95%)",
              xlabel="length (tokens)")
        a.set_xticks(range(len(lens)), [f"{L // 1024}k" if L >= 1024 else str(L) for L in lens])
        a.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
        grid = {v: nll[nll.variant == v].pivot_table(index="depth", columns="eval_len", values="value", aggfunc="mean")
                for v in variants}
        # a log scale: the answer's NLL spans ~0.5 nats (found) to ~30 (lost); a linear one hides the first decade
        vals = np.concatenate([m.to_numpy().ravel() for m in grid.values() if m.size])
        vals = vals[np.isfinite(vals)]
        norm = LogNorm(vmin=max(float(vals.min()), 0.05), vmax=max(float(vals.max()), 0.1))
        for h, v in zip(row[1:], variants):
            m = grid[v].reindex(columns=lens)
            im = h.imshow(np.clip(m.to_numpy(), norm.vmin, None), aspect="auto", origin="lower", cmap="viridis",
                          norm=norm)
            h.set_xticks(range(len(lens)), [f"{L // 1024}k" if L >= 1024 else str(L) for L in lens])
            h.set_yticks(range(len(m.index)), [f"{x:g}" for x in m.index])
            h.set(xlabel="length (tokens)", ylabel="needle depth" if h is row[1] else None,
                  title=f"{v}: answer NLL (nats)")
            for (yi, xi), val in np.ndenumerate(m.to_numpy()):
                if np.isfinite(val):
                    h.text(xi, yi, f"{val:.1f}", ha="center", va="center", fontsize=7,
                           color="white" if norm(max(val, norm.vmin)) < 0.6 else "black")
        bar = fig.colorbar(im, ax=row[1:].tolist(), shrink=0.85, label="mean answer NLL (nats, log scale)")
        ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if norm.vmin <= t <= norm.vmax]
        bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
        bar.ax.minorticks_off()
    save(fig, out, name, made)
    return name


def _same_as(v, s, seen, lens):
    """v's legend label, naming the earlier variant whose accuracy (mean and interval) it equals: `B = A (coincide)`
    at every length, `B (= A at 1k–8k)` at some (the points sit side by side, so a reader would not see it)."""
    key = lambda t: t.set_index("eval_len")[["mean", "lo", "hi"]].round(12)  # noqa: E731
    for u, t in seen.items():
        a, b = key(s), key(t)
        at = [L for L in lens if L in a.index and L in b.index and a.loc[L].equals(b.loc[L])]
        if at:
            k = lambda L: f"{L // 1024}k" if L >= 1024 else str(L)  # noqa: E731
            if len(at) == len(lens):
                return f"{v} = {u} (coincide)"
            return f"{v} (= {u} at {k(at[0])}" + (f"–{k(at[-1])})" if len(at) > 1 else ")")
    return v
