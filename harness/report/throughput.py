"""The report's throughput and memory section: train tokens/s and peak memory of a training step (bars), and both
at every eval length (tables of the geometric mean over seeds and its 95% interval: a positive ratio-scale quantity,
harness.report.bounds)."""
import pandas as pd

from harness.report import bounds
from harness.report.plots import fig_bars, save
from harness.report.style import label
from harness.report.tables import ci_table, lower_is_better

MiB = 2 ** 20


def section(df, out, made):
    md = ["## Throughput and memory\n"]
    tp = df[df.metric.isin(["train_tokens_per_s", "eval_tokens_per_s", "peak_mem_bytes"])]
    if tp.empty:
        return md
    tr = tp[tp.metric == "train_tokens_per_s"]
    mem = tp[(tp.metric == "peak_mem_bytes") & (tp.protocol == "train")].assign(value=lambda d: d.value / MiB)
    if len(tr):
        save(fig_bars(bounds.summarize(tr, "variant"), "train throughput (fwd+bwd+AdamW)",
                      label("train_tokens_per_s")), out, "throughput.png", made)
    if len(mem):
        save(fig_bars(bounds.summarize(mem, "variant"), "peak memory of one training step", label("peak_mem_bytes")),
             out, "memory.png", made)

    def by_len(train, ev):
        """train rows in column 'train', eval rows by eval length (both directions are the same metric's)."""
        d = pd.concat([train.assign(col="train"), ev.assign(col=ev.eval_len.astype(str))])
        lens = sorted(ev.eval_len.dropna().unique())
        return d, (["train"] if len(train) else []) + [str(L) for L in lens]

    ev_tp = tp[(tp.metric == "eval_tokens_per_s") & tp.protocol.str.startswith("eval")]
    ev_mem = tp[(tp.metric == "peak_mem_bytes") & tp.protocol.str.startswith("eval")].assign(
        value=lambda d: d.value / MiB)
    md += ["Wall-clock numbers from the machine that ran the sweep (two jobs in parallel, one thread each): "
           "compare encodings within one sweep, not across machines.\n"]
    d, order = by_len(tr, ev_tp)
    if len(d):
        md += [f"### Train tokens/s (at train length) and eval tokens/s (batch 1) by eval length\n",
               *ci_table(d, "col", lower_is_better("train_tokens_per_s"), order)]
        md += ["![throughput](throughput.png)\n"] if "throughput.png" in made else []
    d, order = by_len(mem, ev_mem)
    if len(d):
        md += ["### Peak memory (MiB): one training step, and one eval forward by eval length\n",
               *ci_table(d, "col", lower_is_better("peak_mem_bytes"), order)]
        md += ["![memory](memory.png)\n"] if "memory.png" in made else []
    return md
