"""`## Does the laptop ranking hold at more compute?` — only when the rows hold two or more budgets (rungs).

A budget is (model, train steps): the `budget` label of harness.report.labels. Rungs are ordered by their
training FLOPs (the runs' `train_flops` rows, harness.measure.cost; runs written before those rows existed fall
back to n_layers · d_model² · steps, proportional to them). Every pair of rungs is compared at every evaluation
length: Kendall τ between the encodings' mean orders with the interval of harness.transfer, and the pairs
whose order is established (paired 95% CI over seeds excludes 0) at both rungs, agreeing or flipping, by name.
Variants are matched across rungs by their label without the budget part (column `pair`).

Each encoding's own change between rungs (`Change with compute`, harness.transfer.rung_change) is paired by seed:
a seed scores the same evaluation text with the same data order at every rung, so its seed effect is shared by the
rungs and cancels in the per-seed change, where an independent-samples test would count it as noise at both rungs
(RoPE's 8× PPL, 1× to 4×: Welch p 0.069, paired p 0.012). Only where a rung pair's seeds do not match (fewer than
2 seed labels with a finite value at both) does it fall back to Welch's test; the table's `test` column says which.
PPL (kind ratio) is compared on its log and shown as the ratio of the rungs' geometric means."""
import math
from itertools import combinations

import pandas as pd

from harness import stats, transfer
from harness.report import bounds
from harness.report.confidence import mains
from harness.report.plots import fig_curves, kind_of, save
from harness.report.tables import render

SCALE = {"n_params": "parameters", "train_tokens": "tokens", "train_flops": "FLOPs"}


def budget_table(df):
    """One row per budget label: model, steps, n_layers, d_model, cost (FLOPs where the rows state them, else the
    proxy n_layers · d_model² · steps), and the median n_params / train_tokens / train_flops rows; cheapest first."""
    b = df.groupby("budget").agg(model=("model", "first"), steps=("steps", "first"),
                                 n_layers=("n_layers", "first"), d_model=("d_model", "first"))
    for metric in SCALE:
        b[metric] = df[df.metric == metric].groupby("budget").value.median().reindex(b.index)
    proxy = b.n_layers.astype(float) * b.d_model.astype(float) ** 2 * b.steps.astype(float).fillna(1.0)
    b["cost"] = b.train_flops if b.train_flops.notna().all() else proxy
    return b.sort_values(["cost", "steps"])


def rung_names(b):
    """'1×', '4×', ... : each budget's cost over the cheapest one's, rounded as a label."""
    return {k: f"{c / b.cost.iloc[0]:.3g}×" for k, c in b.cost.items()}


def _amount(v):
    return "—" if not math.isfinite(v) else (f"{v / 1e12:.3g}e12" if v >= 1e11 else f"{v / 1e6:.3g}M")


def rung_cells(b, names):
    """The rungs table: name, model shape, steps and the scale rows."""
    rows = [[names[k], f"{r.model} ({int(r.n_layers)} layers, d_model {int(r.d_model)})", f"{r.steps:.0f}",
             _amount(r.n_params), _amount(r.train_tokens), _amount(r.train_flops)] for k, r in b.iterrows()]
    return pd.DataFrame(rows, columns=["rung", "model", "steps", "parameters", "tokens", "training FLOPs"])


def _pairs(names_list):
    return ", ".join(f"{i} / {j}" for i, j in names_list) or "—"


def _change_cell(r, kind):
    """'×1.08 [1.02, 1.15], p 0.012' (ratio) or '+0.1 [0.02, 0.18], p 0.012'; bold when the interval excludes no change."""
    if not math.isfinite(r.change):
        return "—"
    fmt = (lambda v: f"×{v:.3g}") if kind == "ratio" else (lambda v: f"{v:+.3g}")
    ci = f" [{fmt(r.lo)[1 if kind == 'ratio' else 0:]}, {fmt(r.hi)[1 if kind == 'ratio' else 0:]}]" if math.isfinite(r.lo) else ""
    p = f", p {r.p:.2g}" if math.isfinite(r.p) else ""
    text = f"{fmt(r.change)}{ci}{p}"
    return f"**{text}**" if r.significant else text


def changes(tables, names, rel, kind):
    """One row per encoding at length rel: its change (rung_change) for every pair of rungs, and `test`: which
    test each pair used, paired by seed unless the seeds do not match (then Welch)."""
    per = {}
    for ka, kb in combinations(tables, 2):
        for r in transfer.rung_change(tables[ka], tables[kb], kind).itertuples():
            per.setdefault(r.variant, {})[f"{names[ka]} → {names[kb]}"] = r
    rows = []
    for v, cells in per.items():
        tests = {f"{k}: {r.test} (n {r.n})" for k, r in cells.items()}
        kinds_used = {(r.test, r.n) for r in cells.values()}
        test = (f"{'paired by seed' if next(iter(kinds_used))[0] == 'paired' else 'Welch'}, n {next(iter(kinds_used))[1]}"
                if len(kinds_used) == 1 else "; ".join(sorted(tests)))
        rows.append({"encoding": v, "length": f"{rel:g}×", **{k: _change_cell(r, kind) for k, r in cells.items()},
                     "test": test})
    return rows


def comparisons(d, b, names):
    """One row per (rung pair, length): τ, its interval, draws' median, agree / flip / one-rung / open counts and
    the flipped pairs by name; the crossovers between consecutive rungs at each length; and each encoding's change
    between every pair of rungs at each length (`changes`)."""
    rows, cross, change = [], [], []
    kind = bounds.kind_of(d) if {"metric", "unit"} <= set(d.columns) else "real"
    for rel in sorted(d.rel.dropna().unique()):
        tables = {k: stats.seed_table(d[(d.budget == k) & (d.rel == rel)], "pair") for k in b.index}
        tables = {k: t for k, t in tables.items() if not t.empty}
        for ka, kb in combinations(tables, 2):
            ta, tb = tables[ka], tables[kb]
            tau, agree = transfer.tau_interval(ta, tb), transfer.agreement(ta, tb)
            v = agree.verdict.value_counts()
            flips = agree[agree.verdict == "flip"]
            rows.append({"rungs": f"{names[ka]} → {names[kb]}", "length": f"{rel:g}× ({int(rel * d.train_len.iloc[0])})",
                         "Kendall τ": f"{tau.tau:.2f}",
                         "95% interval": f"[{tau.lo:.2f}, {tau.hi:.2f}]" if math.isfinite(tau.lo) else "— (< 2 seeds)",
                         "draws' median": f"{tau.median:.2f}" if math.isfinite(tau.median) else "—",
                         "agree": int(v.get("agree", 0)), "flip": int(v.get("flip", 0)),
                         "one rung only": int(v.get("a only", 0) + v.get("b only", 0)), "open": int(v.get("open", 0)),
                         "flipped pairs": _pairs(zip(flips.i, flips.j)), "seeds": f"{tau.n_seeds_a} / {tau.n_seeds_b}"})
        change += changes(tables, names, rel, kind)
        c = transfer.crossovers(tables)
        for r in c.itertuples():
            cross.append({"pair": f"{r.i} / {r.j}", "length": f"{rel:g}×",
                          "between": f"{names[r.from_rung]} → {names[r.to_rung]}",
                          "mean difference (before → after)": f"{r.diff_from:+.3g} → {r.diff_to:+.3g}",
                          "established": r.established})
    change = pd.DataFrame(change)
    if not change.empty:
        change = change.sort_values(["encoding", "length"], key=lambda c: c.map(
            lambda x: float(x[:-1]) if isinstance(x, str) and x.endswith("×") else 0) if c.name == "length" else c,
            kind="stable")
    return pd.DataFrame(rows), pd.DataFrame(cross), change


def ladders(df):
    """(task, title, rows of its headline metric, rungs table, rung names, comparisons table, crossovers, changes) of every
    task whose headline metric was measured at two or more budgets."""
    core, b_all = df[~df.ext], budget_table(df)
    for task, t in core.groupby("task"):
        m = mains(t)
        if not m:
            continue
        _, _, title, d = m[0]
        b = b_all.loc[[k for k in b_all.index if k in set(d.budget)]]
        if len(b) >= 2:
            names = rung_names(b)
            yield (task, title, d, b, names, *comparisons(d, b, names))


def fig_ladder(d, b, names, title):
    """Mean metric against compute (× the cheapest rung), one panel per evaluation length, 95% bands of the
    metric's kind (a ratio's, perplexity's, on a log axis; any other on a linear one)."""
    cost = {k: c / b.cost.iloc[0] for k, c in b.cost.items()}
    panel = d.rel.map(lambda r: f"{r:g}× train length")
    s = bounds.summarize(d.assign(variant=d.pair, compute=d.budget.map(cost), panel=panel),
                         ["panel", "variant", "compute"])
    order = [f"{r:g}× train length" for r in sorted(d.rel.dropna().unique())]
    return fig_curves(s, "compute", f"{title} against training compute (rungs {', '.join(names[k] for k in b.index)})",
                      "training FLOPs, × the cheapest rung", title, logy=kind_of(s) == "ratio", panels=order)


def section(df, out, made):
    """Markdown lines of the budget section; [] with fewer than two budgets."""
    core = df[~df.ext]
    if core.budget.nunique() < 2:
        return []
    md = ["## Does the laptop ranking hold at more compute?\n",
          "Each rung trains the same encodings with more compute (model and tokens scaled together). For every "
          "pair of rungs and every evaluation length: Kendall τ between the encodings' mean orders (1: the same "
          "order, 0: unrelated) with a 95% interval from the uncertainty of both rungs' mean vectors (harness."
          "transfer: posterior draws, reflected about τ and joined with their own interval; the draws' median shows how far noise alone pulls τ "
          "down), and the pairs of encodings whose order is established (paired 95% CI over seeds excludes 0) "
          "at both rungs, agreeing or flipping. Crossovers: pairs whose mean order changes between consecutive "
          "rungs. Change with compute: each encoding's metric at the later rung against the earlier (a ratio of "
          "geometric means for PPL), 95% interval and p paired by seed (a seed scores the same evaluation text at "
          "every rung, so its shared effect cancels); Welch's independent-samples test only where the rungs' seeds "
          "do not match, as the `test` column says; bold: the interval excludes no change.\n"]
    for task, title, d, b, names, table, cross, change in ladders(df):
        name = f"ladder_{task}.png"
        save(fig_ladder(d, b, names, title), out, name, made)
        md += [f"### Task `{task}`: {title}\n", render(rung_cells(b, names).set_index("rung"), "rung"), "",
               render(table.set_index("rungs"), "rungs") if not table.empty else "", "",
               f"![compute ladder]({name})\n", "#### Crossovers between consecutive rungs\n",
               render(cross.set_index("pair"), "pair") if not cross.empty else "None: no pair's mean order changes.",
               "", "#### Change with compute, per encoding\n",
               render(change.set_index("encoding"), "encoding") if not change.empty else "None.", ""]
    return md


def _seeds(d):
    """'3 seeds per rung', or where encodings have more: '3-8 seeds per encoding and rung (8: nope, rope, t5)'."""
    n = d.dropna(subset=["value"]).groupby(["pair", "budget"]).seed.nunique()
    lo, hi = int(n.min()), int(n.max())
    if lo == hi:
        return f"{lo} seeds per rung"
    most = sorted({p for (p, _), k in n.items() if k == hi})
    return f"{lo}–{hi} seeds per encoding and rung ({hi}: {', '.join(most)})"


def readme_lines(df):
    """The README's ladder-summary block (harness.report.summary.render) for report rows: the rungs' scale, then
    per pair of rungs and length τ with its interval and the agree / flip counts, from `comparisons`."""
    out = []
    for task, title, d, b, names, table, cross, _ in ladders(df):
        rungs = "; ".join(f"{names[k]}: {r.model} ({int(r.n_layers)} layers, d_model {int(r.d_model)}), "
                          f"{_amount(r.n_params)} parameters, {_amount(r.train_tokens)} tokens, "
                          f"{_amount(r.train_flops)} FLOPs" for k, r in b.iterrows())
        out += [f"Task `{task}`, {title}; {d.pair.nunique()} encodings, {_seeds(d)}. Rungs: "
                f"{rungs}.\n", "| rungs | length | Kendall τ [95% interval] | pairs agree / flip / one rung / open "
                "(paired 95% CI, unadjusted) | flipped pairs |", "|---|---|---|---|---|"]
        out += [f"| {r['rungs']} | {r['length']} | {r['Kendall τ']} {r['95% interval']} | {r['agree']} / {r['flip']} / "
                f"{r['one rung only']} / {r['open']} | {r['flipped pairs']} |" for _, r in table.iterrows()]
        out += ["", f"Crossovers between consecutive rungs (mean order changes): {len(cross)}, of which with a paired "
                f"CI excluding 0 at both rungs (unadjusted): "
                f"{int((cross.established == transfer.WHERE['flip']).sum()) if len(cross) else 0}.", ""]
    return out
