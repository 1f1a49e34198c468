"""`## Attention paths: FlexAttention against SDPA` from the CSVs of `python -m harness.bench.flex_bench`.

Those rows are not training runs: one attention forward per (encoding, length, path) on one machine, no seeds.
Peak memory is the allocator's counter (exact and repeatable for tensor memory); time is the median of the
calls named in `repeats`. So the table states ratios of single measurements, not intervals over seeds."""
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from harness.bench.flex_bench import summary
from harness.report.plots import legend, save, style
from harness.report.style import label, name_coincident
from harness.report.tables import md_table

MiB = 2 ** 20
COLUMNS = {"encoding", "layer", "path", "T", "metric", "value", "unit", "repeats", "nan_reason"}


def read(paths):
    """The rows of every CSV in paths with column `machine` = the file's stem (cpu.csv -> cpu).
    A file that is missing or lacks the flex_bench columns is a ValueError naming it."""
    frames = []
    for p in map(Path, paths):
        if not p.is_file():
            raise ValueError(f"--flex {p}: no such file; write one with python -m harness.bench.flex_bench")
        d = pd.read_csv(p)
        missing = COLUMNS - set(d.columns)
        if missing:
            raise ValueError(f"--flex {p}: not flex_bench rows (missing columns {', '.join(sorted(missing))})")
        frames.append(d.assign(machine=p.stem))
    return pd.concat(frames, ignore_index=True) if frames else None


def member(d):
    """`name` or `name:layer` (a per-layer policy's member), as flex_bench's --encodings spells it."""
    return d.encoding + d.layer.map(lambda i: f":{i}" if i else "")


def fig_paths(d):
    """Peak memory and time per call against T (all log): one colour per encoding, solid SDPA, dashed flex."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    d = d.assign(member=member(d))
    for ax, (metric, scale) in zip(axes, (("peak_extra_bytes", MiB), ("s_per_call", 1.0))):
        lines = {f"{'/'.join(name)} {path}": (g[g.path == path].set_index("T").value.sort_index() / scale, i, ls, mk)
                 for i, (name, g) in enumerate(d[d.metric == metric].groupby(["machine", "member"]))
                 for path, ls, mk in (("sdpa", "-", "o"), ("flex", "--", "x"))}
        for k, (v, i, ls, mk) in lines.items():
            ax.plot(v.index, v.values, ls=ls, marker=mk, ms=6, color=style(i)[0], label=k, zorder=2)
        ax.set(xscale="log", yscale="log", xlabel=label("T", log=True), ylabel=label(metric, log=True))
        ax.grid(alpha=0.3, which="both")
        name_coincident(ax)
        legend(ax)
    fig.suptitle("one causal attention forward with the encoding's bias: SDPA (solid, ●) vs FlexAttention "
                 "(dashed, ×)", fontsize=11)
    return fig


def section(paths, out, made):
    """Markdown lines of the section (and attention_paths.png), or [] without paths."""
    d = read(paths)
    if d is None:
        return []
    md = ["## Attention paths: FlexAttention against SDPA\n",
          "One causal attention forward (B 1, H 4, D 32, fp32, no gradient) with the encoding's bias built "
          "by SDPA as an (H, T, T) mask and by FlexAttention (`harness.flex`) as an (H, T) distance table "
          "inside the kernel. Single measurements on one machine, no seeds: memory is the allocator's exact "
          "peak, time the median of `repeats` calls (`python -m harness.bench.flex_bench`). `name:layer` is a "
          "per-layer policy's member (its layer 0 without one).\n"]
    for machine, g in d.groupby("machine"):
        s = summary(g).reset_index()
        s.insert(0, "member", member(s))
        t = s.drop(columns=["encoding", "layer"]).set_index(["member", "T"])
        t.index = [f"{m} @ {T}" for m, T in t.index]
        t.index.name = "encoding @ T"
        md += [f"### Machine `{machine}`\n", md_table(t), ""]
        both = s.dropna(subset=["mem_flex/sdpa"])
        longest = both.loc[both.groupby("member")["T"].idxmax()]
        if len(longest):
            md += ["Peak memory flex/SDPA at the longest length both paths ran: " + "; ".join(
                f"`{m}` {r:.3g} at T {T}" for m, r, T in zip(longest.member, longest["mem_flex/sdpa"], longest["T"]))
                + ".\n"]
        why = g.dropna(subset=["nan_reason"]).drop_duplicates(["encoding", "layer", "path", "T"])
        md += [f"- not measured: {r.encoding} {r.path} at T {int(r.T)}: {r.nan_reason}" for r in why.itertuples()]
    save(fig_paths(d), out, "attention_paths.png", made)
    return md + ["![attention paths](attention_paths.png)\n"]
