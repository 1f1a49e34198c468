"""`## Does the cheap budget predict a bigger one?` — only when the rows hold two or more budgets.

A budget is (model, train steps): the `model` column and the value of the run's `train_steps` row. The
cheapest and the largest budget (cost ~ n_layers · d_model² · steps, the FLOPs of training up to a
constant) are compared by Kendall τ between the variants' mean headline metric (stats.kendall_tau, seeds
of each budget resampled independently: different models are not paired). Variants are matched across
budgets by their label without the budget part (column `pair`, harness.report.prepare)."""
import math

import matplotlib.pyplot as plt
import matplotlib.ticker
import pandas as pd

from harness import stats
from harness.report.confidence import LENGTHS, mains
from harness.report.plots import label_points, n_text, save, style
from harness.report.tables import render


def budget_table(df):
    """One row per budget label: model, steps, cost; sorted cheapest first."""
    b = df.groupby("budget").agg(model=("model", "first"), steps=("steps", "first"),
                                 n_layers=("n_layers", "first"), d_model=("d_model", "first"))
    b["cost"] = b.n_layers.astype(float) * b.d_model.astype(float) ** 2 * b.steps.astype(float).fillna(1.0)
    return b.sort_values(["cost", "steps"])


def fig_budgets(pairs, cheap, large, qlabel, logscale):
    """One panel per length: each variant at the cheap budget (x) against the large budget (y), 95% CIs."""
    fig, axes = plt.subplots(1, len(pairs), figsize=(6.2 * len(pairs), 5.4), squeeze=False)
    for ax, (title, a, b, tau) in zip(axes[0], pairs):
        m = a.merge(b, on="pair", suffixes=("_a", "_b")).dropna(subset=["mean_a", "mean_b"])
        for i, r in enumerate(m.itertuples()):
            c, _, mk = style(i)
            ax.errorbar(r.mean_a, r.mean_b, xerr=r.half_a if r.n_a >= 2 else 0, yerr=r.half_b if r.n_b >= 2 else 0,
                        fmt="none", ecolor=c, capsize=2, lw=1)
            ax.plot(r.mean_a, r.mean_b, marker=mk, ms=6, color=c, ls="none", label=r.pair)
        if logscale:
            plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.set(xscale="log", yscale="log")
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_formatter(plain)
                axis.set_minor_formatter(plain)
            ax.tick_params(which="minor", labelsize=7)
        label_points(ax, m.mean_a.to_numpy(float), m.mean_b.to_numpy(float), list(m.pair))
        ci = f" [{tau.lo:.2f}, {tau.hi:.2f}]" if math.isfinite(tau.lo) else ""
        ax.set(title=f"{title}: Kendall τ = {tau.tau:.2f}{ci}", xlabel=f"{qlabel}, {cheap}",
               ylabel=f"{qlabel}, {large}")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(f"does the cheap budget predict the large one? (points: variants; error bars: 95% CI; "
                 f"{n_text(pairs[0][1]).split(';')[0]} at the cheap budget)", fontsize=10)
    return fig


def section(df, out, made):
    """Markdown lines of the budget section; [] with fewer than two budgets."""
    core = df[~df.ext]
    if core.budget.nunique() < 2:
        return []
    md = ["## Does the cheap budget predict a bigger one?\n",
          "Kendall τ between the variants' order at the cheapest and at the largest budget (τ = 1: the same "
          "order, 0: unrelated); 95% CI from resampling the seeds of each budget independently.\n"]
    for task, t in core.groupby("task"):
        m = mains(t)
        if not m:
            continue
        metric, _, title, d = m[0]
        b = budget_table(d)
        if len(b) < 2:
            continue
        cheap, large = b.index[0], b.index[-1]
        rows, pairs = [], []
        for r, lab in LENGTHS:
            da, db = (d[(d.budget == x) & (d.rel == r)] for x in (cheap, large))
            if da.empty or db.empty:
                continue
            tau = stats.kendall_tau(stats.seed_table(da, "pair"), stats.seed_table(db, "pair"))
            ci = f"[{tau.lo:.2f}, {tau.hi:.2f}]" if math.isfinite(tau.lo) else "— (needs ≥ 2 seeds per budget)"
            rows.append([f"{lab} ({int(da.eval_len.iloc[0])} / {int(db.eval_len.iloc[0])})", f"{tau.tau:.2f}", ci,
                         str(tau.n_variants), f"{tau.n_seeds_a} / {tau.n_seeds_b}"])
            pairs.append((f"{lab} train length", stats.summarize(da, "pair"), stats.summarize(db, "pair"), tau))
        if not rows:
            continue
        cells = pd.DataFrame(rows, columns=["length (cheap / large)", "Kendall τ", "95% CI", "encodings",
                                            "seeds (cheap / large)"]).set_index("length (cheap / large)")
        name = f"budgets_{task}.png"
        save(fig_budgets(pairs, cheap, large, title, metric == "ppl"), out, name, made)
        md += [f"### Task `{task}`: {title}, cheapest `{cheap}` against largest `{large}` "
               f"({len(b)} budgets)\n", render(cells, "length (cheap / large)"), "", f"![budgets]({name})\n"]
    return md
