"""The report's Chomsky-hierarchy section: out-of-distribution accuracy per task and encoding, and the ranking of
encodings across tasks by mean reciprocal rank.

Delétang et al. (ICLR 2023) and Ruoss et al. (ACL 2023) score a model on a task by its accuracy averaged over
the test lengths beyond training; Kazemnejad et al. (NeurIPS 2023) rank encodings across tasks by mean
reciprocal rank (MRR). Here, per run (one seed): the mean of `acc` over the eval lengths > train_len; per
(task, encoding): mean ± 95% t interval over seeds, clipped to [0, 1] (an accuracy: harness.report.bounds, via
report_tables.ci_cells); across tasks:
ranks.mrr_interval (bootstrap over seeds). A seed missing one of its OOD lengths (a NaN row) has no OOD mean:
it is dropped, never averaged over the lengths it has."""
import math

import pandas as pd

from harness import ranks, stats
from harness.tasks import chomsky
from harness.report import bounds
from harness.report.tables import ci_cells, fmt, render

ACC = bounds.kind("acc", "frac")  # the rows of `rows` keep no unit: their kind, a proportion's
TITLE = "## Chomsky-hierarchy tasks: OOD accuracy and mean reciprocal rank\n"


def _label(df, by):
    """The column that names a variant: `by`, else the report's `short` label (harness.report.labels; it keeps
    randomized-position runs apart from plain ones), else the encoding."""
    return by or ("short" if "short" in df.columns else "encoding")


def rows(df, by=None):
    """acc rows of the Chomsky tasks, without eval-time extension rows; columns task, variant, seed, eval_len,
    train_len, value. The variant label never holds the task: MRR compares one variant across tasks."""
    keep = df.task.isin(list(chomsky.TASKS)) & (df.metric == "acc")
    if "protocol" in df.columns:
        keep &= df.protocol == "iid"
    if "ext" in df.columns:
        keep &= ~df.ext.astype(bool)
    elif "params" in df.columns:
        keep &= ~df.params.astype(str).str.contains('"extension"')
    d = df[keep]
    label = d[_label(df, by)].astype(str)
    # runs trained differently are not one variant: the budget (else the model) and train length, when they vary
    for col in (["budget"] if "budget" in d.columns else ["model"]) + ["train_len"]:
        if col in d.columns and d[col].nunique() > 1:
            label = label + f" {col}=" + d[col].astype(str)
    return d.assign(variant=label)[["task", "variant", "seed", "eval_len", "train_len", "value"]]


def per_seed(d, where):
    """One value per (task, variant, seed): the mean over the eval lengths `where` selects (NaN if any is)."""
    d = d[where(d)]
    if d.empty:
        return pd.DataFrame(columns=["task", "variant", "seed", "value"])
    g = d.groupby(["task", "variant", "seed"], sort=True)["value"]
    return g.agg(lambda v: v.mean() if v.notna().all() else math.nan).reset_index()


def _mrr_cells(ood, order):
    """(cells: variant x [MRR, 95% CI, P(best)] strings, the mrr_interval frame) over the tasks in `order`."""
    tables = {t: stats.seed_table(ood[ood.task == t], "variant") for t in order if (ood.task == t).any()}
    r = ranks.mrr_interval(tables, higher_is_better=True)
    cells = pd.DataFrame(index=r.index, dtype=object)
    cells["MRR"] = r.mrr.map(lambda x: fmt(x, "{:.3f}"))
    cells["MRR 95% CI"] = [f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else "—" for lo, hi in zip(r.lo, r.hi)]
    cells["P(best MRR)"] = r.p_best.map(lambda x: fmt(x, "{:.2f}"))
    return cells, r


def section(df, by=None) -> str:
    """Markdown of the section (a string ending in a newline), "" when df has no acc rows of a Chomsky task.
    df: tidy result rows (encoding, task, seed, metric, eval_len, train_len, value; protocol, params and the
    report's short/ext columns are used when present). by: the column naming a variant (see _label)."""
    d = rows(df, by)
    if d.empty or d.value.notna().sum() == 0:
        return ""
    order = [t for t in chomsky.TASKS if t in set(d.task)]
    ood = per_seed(d, lambda x: x.eval_len > x.train_len)
    ind = per_seed(d, lambda x: x.eval_len == x.train_len)
    md = [TITLE,
          "Tasks of Delétang et al. (ICLR 2023; harness/tasks/chomsky.py). OOD accuracy: per seed, the token accuracy "
          "on the answer bytes averaged over every eval length beyond the train length (lengths: "
          f"{', '.join(str(int(L)) for L in sorted(d[d.eval_len > d.train_len].eval_len.unique()))}); then mean ± "
          "95% t interval over seeds (clipped to [0, 1]). Chance is 1/2 on parity and even_pairs, 1/modulus (5) on modular_arithmetic.\n",
          "MRR (Kazemnejad et al. 2023): in each task the variants are ranked by mean OOD accuracy (1 = best, "
          "ties share the average rank); MRR is the mean over tasks of 1/rank, over the tasks where every ranked "
          "variant is measured. Its interval and P(best MRR) resample seeds within each task (bootstrap, "
          "ranks.mrr_interval); with few seeds read them as optimistic.\n"]
    if ood.value.notna().any():
        cells, line = ci_cells(ood.rename(columns={"task": "col"}), "col", lower=False, order=order, kind=ACC)
        mrr, r = _mrr_cells(ood, order)
        cells = cells.join(mrr, how="left").fillna("—")
        ranked = [v for v in r.index if v in cells.index]
        cells = cells.loc[ranked + [v for v in cells.index if v not in ranked]]
        n_tasks = int(r.n_tasks.iloc[0]) if len(r) else 0
        md += ["### Mean OOD accuracy per task, and MRR across tasks (higher is better)\n",
               f"{line}  \nMRR over {n_tasks} task(s).\n", render(cells, "variant"), ""]
    else:
        md += ["No OOD accuracy: no eval length beyond the train length was measured.\n"]
    if ind.value.notna().any():
        cells, line = ci_cells(ind.rename(columns={"task": "col"}), "col", lower=False, order=order, kind=ACC)
        md += ["### In-distribution accuracy (at the train length): did the model learn the task?\n",
               line + "\n", render(cells, "variant"), ""]
    return "\n".join(md) + "\n"
