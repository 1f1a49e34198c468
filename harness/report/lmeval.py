"""`## lm-eval tasks`: rows of protocol `lm_eval` / `lm_eval:<protocol>` (harness.lmeval.rows), when present.

Two uncertainties that answer different questions sit side by side: the ± over seeds (95% t interval of
the mean over training seeds: retrain the model and the score moves this much) and lm-eval's own stderr
(the standard error over the task's examples within one run, from its `<metric>_stderr` rows; averaged over
runs with stats.summarize). They are not interchangeable and are never combined."""
import math

import pandas as pd

from harness import stats
from harness.report.tables import ci_cells, fmt, lower_is_better, render

ALL = "all"  # column of a metric measured without an eval length


def _col(d):
    return d.assign(col=d.eval_len.map(lambda L: ALL if pd.isna(L) else str(int(L))))


def _order(cols):
    return sorted(cols, key=lambda c: -1 if c == ALL else int(c))


def section(df):
    """Markdown lines; [] when no lm-eval rows."""
    d = df[df.protocol.str.startswith("lm_eval")]
    if d.empty:
        return []
    is_err = d.metric.str.endswith("_stderr")
    vals, errs = _col(d[~is_err]), _col(d[is_err])
    md = ["## lm-eval tasks\n",
          "Two different uncertainties, side by side and never combined: **mean ± 95% CI over seeds** (how much "
          "the score moves when the model is retrained with another seed) and **lm-eval stderr** (lm-eval's own "
          "standard error over the task's examples within one run, the mean over runs: how much it moves with "
          "another sample of examples).\n"]
    for (metric, protocol), g in vals.groupby(["metric", "protocol"]):
        order = _order(g.col.unique())
        cells, head = ci_cells(g, "col", lower_is_better(metric), order)
        e = errs[(errs.metric == metric + "_stderr") & (errs.protocol == protocol)]
        se = stats.summarize(e, ["variant", "col"]) if len(e) else None
        table = pd.DataFrame(index=cells.index, dtype=object)
        for c in order:
            name = "" if order == [ALL] else f"{c}: "
            table[name + "mean ± CI over seeds"] = cells[c]
            if se is not None:
                s = se[se.col == c].set_index("variant")["mean"].reindex(cells.index)
                table[name + "lm-eval stderr"] = s.map(lambda x: fmt(x, "{:.2g}") if math.isfinite(x) else "—")
        where = "" if protocol == "lm_eval" else f", windows `{protocol.split(':', 1)[1]}` by length"
        md += [f"### `{metric}`{where}\n", head + "\n", render(table, "variant"), ""]
    return md
