"""The report's precision section: kernel-level rows once per sweep, model-level rows per run
(aggregated over seeds by harness.stats: mean ± 95% t interval tables, clipped where the metric's kind bounds it
(harness.report.bounds), KL curves of the seed means).

Kernel rows (harness.measure.precision.precision_report_rows) do not depend on a run, so the report
computes them once and caches them next to report.md as precision_kernel-<hash>.parquet (the hash covers
the pipelines, max_len, the bias encodings, the per-layer members and the rows' fields; delete the file to
recompute). They take ~20 s of one core, so the report starts them in a second process and makes everything
else meanwhile (the report of make sweep: 50 s -> 27 s on 2 cores). The pipelines are every conf/precision
preset plus any other pipeline a run named (precision.pipeline in its .hydra/config.yaml)."""
import hashlib
import io
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch
import yaml

from harness import results
from harness.report import bounds, families
from harness.report.plots import grid, legend, save, twins
from harness.report.labels import human
from harness.report.style import distinct, label, name_coincident, styles
from harness.measure.precision import precision_report_rows, safe_length
from harness.measure.precision_bias import bias_encodings
from harness.measure.precision_layers import members
from harness.measure.precision_pipelines import MAX_LEN, Pipeline, load_pipeline, pipeline_names, row
from harness.report.tables import ci_table

KL_SAFE = 1e-3  # nats: the model-level "safe" bound on the mean next-token KL against fp32


def run_pipelines(paths):
    """Pipelines named by the runs' Hydra configs that are not presets (a preset is covered anyway)."""
    found = {}
    for path in paths:
        for d in results.run_dirs(path):
            f = d / ".hydra" / "config.yaml"
            cfg = yaml.load(f.read_text(), Loader=results.yaml_loader()) if f.exists() else None
            spec = ((cfg or {}).get("precision") or {}).get("pipeline")
            if spec and spec["name"] not in pipeline_names():
                found[spec["name"]] = Pipeline(**spec)
    return list(found.values())


def _cache(paths, out, max_len):
    """(pipelines, the cache file in out, where else an earlier report may have left it)."""
    pipelines = [load_pipeline(n) for n in pipeline_names()] + run_pipelines(paths)
    fields = sorted(row("", 0, "", protocol="", dtype=""))  # a cache written with other fields is not read
    key = json.dumps([[asdict(p) for p in pipelines], max_len, bias_encodings(), members(), fields],
                     sort_keys=True)
    name = f"precision_kernel-{hashlib.sha256(key.encode()).hexdigest()[:10]}.parquet"
    return pipelines, Path(out) / name, [Path(out) / name] + [Path(p) / name for p in paths]


def _compute(pipelines, max_len, cache):
    """The kernel-level rows written to cache (parquet, whole or not at all). The rows do not depend on the thread
    count (1 and 2 threads give the same bits)."""
    df = pd.DataFrame(precision_report_rows(pipelines=pipelines, max_len=max_len))
    df["eval_len"] = df["eval_len"].astype("Int64")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    results.atomic_write(cache, buf.getvalue())


def second_process():
    """What start_kernel_rows runs: `python -c "...second_process()" SPEC`, SPEC the JSON of its arguments (a command
    line of its own rather than multiprocessing, which would import the caller's __main__ script again)."""
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(1)  # the report's own process has the other core
    _compute([Pipeline(**p) for p in spec["pipelines"]], spec["max_len"], Path(spec["cache"]))


# The kernel rows allocate fp64 tables of up to 131072 positions (64 MiB) again and again: above glibc's mmap
# threshold (32 MiB at most) each one is fresh pages from the kernel. Kept in the heap, the rows take 21 s of one
# core instead of 32 s (15 s of it in the kernel). The Makefile's BENCH_ENV sets the same for the benchmarks.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456"
_started = {}  # cache file -> the process computing its kernel rows for this report (subprocess.Popen)


def start_kernel_rows(paths, out, max_len=MAX_LEN):
    """Start the kernel-level rows in a second process (one torch thread) when no cache holds them: they take
    ~20 s of one core, which the rest of the report (one core: tables, figures) leaves free. kernel_rows waits
    for them; stop_kernel_rows ends the process when the report stops before."""
    pipelines, cache, found = _cache(paths, out, max_len)
    if cache in _started or any(f.exists() for f in found):
        return
    spec = json.dumps({"pipelines": [asdict(p) for p in pipelines], "max_len": max_len, "cache": str(cache)})
    code = "from harness.report.precision import second_process; second_process()"
    # its output is not read: a process that fails leaves no cache, and kernel_rows then computes them here
    _started[cache] = subprocess.Popen([sys.executable, "-c", code, spec], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL,
                                       env={**os.environ, "GLIBC_TUNABLES": MALLOC_TUNABLES})


def stop_kernel_rows():
    """End any kernel-rows process still running (the report failed or was interrupted before it needed them)."""
    while _started:
        proc = _started.popitem()[1]
        proc.kill()
        proc.wait()


def kernel_rows(paths, out, max_len=MAX_LEN):
    """The kernel-level rows as a DataFrame, computed once per sweep and cached in out (a cache of the same key
    that an earlier report left in one of `paths`, the results themselves, is read too). Rows that start_kernel_rows
    is computing are waited for; if that process failed they are computed here, where its error (if it is one)
    is raised as itself."""
    pipelines, cache, found = _cache(paths, out, max_len)
    if cache in _started:
        _started.pop(cache).wait()
    for f in found:
        if f.exists():
            return pd.read_parquet(f)
    _compute(pipelines, max_len, cache)
    return pd.read_parquet(cache)


def _meta(df):
    return df["params"].map(json.loads)


def fig_loglog(pt, title, xlabel, ylabel, note=""):
    """One line per row of pt (label x x), log-log, at most families.CAP a panel, each in its own colour, line style
    and marker; a row that coincides with an earlier one is drawn with larger open markers over it and says so in
    the legend (`B = A (coincide)`). note: text under the axes (what a curve's place means)."""
    groups = families.panels({str(i): "" for i in pt.index})
    fig, cells = grid(len(groups), w=7.0, h=4.6, legend_w=2.6)
    for (gi, _), ax in cells.items():
        for name in groups[gi][1]:
            r = pt.loc[name].dropna()
            c, ls, m = distinct(list(pt.index).index(name))
            ax.plot(r.index.astype(float), r.values.clip(min=1e-12), ls=ls, marker=m, color=c, ms=5, lw=1.4,
                    zorder=2, label=human(name))
        ax.set(xscale="log", yscale="log", title=groups[gi][0])
        ax.grid(alpha=0.3, which="both")
        name_coincident(ax)
        legend(ax)
    fig.supxlabel(label(xlabel, log=True) + (f"\n\n{note}" if note else ""), fontsize=10)
    fig.supylabel(label(ylabel, log=True), fontsize=10)
    fig.suptitle(title, fontsize=11)
    return fig


# What the tf32 pipeline's curve means, under the figure where it lies below fp32 (precision_shift)
TF32_NOTE = ("tf32 is emulated (harness.measure.precision_pipelines.round_tf32: positions and inv_freq rounded to "
             "TF32's 11 significant bits, then an fp32 matmul), so it is the same on CPU and GPU and torch's tf32 "
             "switch plays no part.\nUp to position 2048 TF32 holds every integer exactly and the product of two "
             "11-bit significands is exact in fp32: each phase is exact for its (rounded) frequency, so a logit at\n"
             "a fixed distance barely moves with the offset and tf32 lies below fp32, whose phase products are "
             "rounded (an error growing with the position). Past 2048 TF32 rounds neighbouring positions to one\n"
             "value and its error jumps to bf16's level.")
def _kl_panels(s, title, groups=None, reference=None):
    """Log-log panels per (family group, low dtype and mode): one line per variant (mean KL over seeds vs window
    end), the same style for a variant in every panel; dashed: the safe bound. s: summarize frame by (variant,
    dtype, protocol, eval_len); groups: [(title, [variants])] (families.panels)."""
    cols = sorted(s[["dtype", "protocol"]].drop_duplicates().itertuples(index=False, name=None))
    groups = groups or families.panels({v: "" for v in s.variant.unique()}, reference)
    look = styles(groups, reference)
    fig, cells = grid(len(groups), cols, w=4.4, h=3.3, legend_w=2.9)
    for (gi, (dtype, mode)), ax in cells.items():
        name, members = groups[gi]
        for v in members:
            g = s[(s.variant == v) & (s.dtype == dtype) & (s.protocol == mode)].sort_values("eval_len")
            c, ls, m = look[v]
            ax.plot(g.eval_len.astype(float), g["mean"].clip(lower=1e-12), marker=m, ms=4, lw=1.3, color=c, ls=ls,
                    label=human(v) + (" (reference)" if v == reference else ""))
        ax.axhline(KL_SAFE, color="k", ls="--", lw=0.8)
        ax.set(xscale="log", yscale="log", title=" · ".join(t for t in (name, f"{dtype} {mode}") if t))
        ax.grid(alpha=0.3, which="both")
        if name_coincident(ax) or (dtype, mode) == cols[-1]:  # one legend a group, at its right
            legend(ax)
    fig.supxlabel("position (end of a log window of positions, tokens), log scale", fontsize=10)
    fig.supylabel(f"{label('kl_fp32')}, log scale; dashed: {KL_SAFE:g}", fontsize=10)
    fig.suptitle(title, fontsize=11)
    return fig


def _kernel_plots(k, out, made, md):
    rope = k[k.pipeline.notna()]  # the RoPE pipelines' rows
    meta = _meta(rope)
    unit_d1 = meta.map(lambda m: m.get("key") == "unit" and m.get("distance") == 1)
    for metric, sel, title, xlabel, name in (
            ("phase_err_rad", None, "RoPE phase error vs position (max per window; pipelines against fp64)",
             "position", "precision_phase.png"),
            ("logit_err", None, "attention-logit error vs relative distance (offset 0)", "distance",
             "precision_logit.png"),
            ("shift_variance", unit_d1, "shift variance: std of one logit (distance 1) over offsets < x",
             "offset", "precision_shift.png")):
        d = rope[(rope.metric == metric) & (sel if sel is not None else True)]
        if d.empty:
            continue
        pt = d.pivot_table(index="protocol", columns="eval_len", values="value", aggfunc="max")
        tf32 = "tf32" in pt.index and metric == "shift_variance"
        save(fig_loglog(pt, title, xlabel, metric, note=TF32_NOTE if tf32 else ""), out, name, made)
        md.append(f"![{metric}]({name})\n")
        md += [f"`{a}` is identical to `{b}` at every {xlabel} here (drawn with open markers over it).\n"
               for a, b in twins(pt).items()]


def _safe_table(k, md_table):
    """Safe-length table per pipeline (RoPE) and per encoding x protocol x dtype (bias encodings, xPos)."""
    safe = k[k.metric == "safe_length"].copy()
    meta = _meta(safe)
    keep = meta.map(lambda m: m.get("key", "unit") == "unit" and m.get("distance", 1) == 1)
    safe, meta = safe[keep], meta[keep]
    safe["bound"] = meta.map(lambda m: f"{m['of']}<={m['threshold']:g}")
    safe["row"] = (safe.encoding + " pipeline " + safe.pipeline).where(
        safe.pipeline.notna(), safe.encoding + " " + safe.protocol + " " + safe.dtype)
    censored = meta.map(lambda m: m["censored"])
    safe["L"] = safe.value.astype(int).astype(str).where(~censored, safe.value.astype(int).astype(str) + "+")
    pt = safe.pivot_table(index="row", columns="bound", values="L", aggfunc="first").fillna("—")
    pt.index.name = "pipeline / encoding"
    return md_table(pt, "{}")


MODEL_METRICS = ("ppl_gap", "kl_fp32", "anchor_d", "anchor_d_logit")  # the section is there when runs have them


def start(df, paths, out, kernel_max_len=MAX_LEN):
    """start_kernel_rows when the section will show them (some run has model-level rows)."""
    if df.metric.isin(MODEL_METRICS).any():
        start_kernel_rows(paths, out, kernel_max_len)


def section(df, paths, out, made, md_table, kernel_max_len=MAX_LEN, reference=None):
    """Markdown lines (and plots) of the precision section; [] when no run has model-level rows."""
    model = df[df.metric.isin(MODEL_METRICS)].copy()
    if model.empty:
        return []
    md = ["## Precision: FP16/BF16 against FP32\n",
          "Kernel level (RoPE pipelines and bias encodings, against fp64; computed once per sweep): "
          "'safe up to L' is the longest length whose every window stays within the bound "
          "(L+ = safe to the end of the grid).\n"]
    at = len(md)  # the kernel-level part goes here, made last: its rows may still be computing (start_kernel_rows)
    model["series"] = model.variant + " " + model.dtype + " " + model.protocol
    kl = model[model.metric == "kl_fp32"]
    kl = kl[kl.params.map(lambda p: json.loads(p)["seq_len"]) == kl.params.map(lambda p: json.loads(p)["seq_len"]).max()]
    if not kl.empty:
        L = json.loads(kl.params.iloc[0])["seq_len"]
        low = kl[kl.dtype != "fp32"]
        s = bounds.summarize(low, ["variant", "dtype", "protocol", "eval_len"])  # mean over seeds per window
        groups, ref = families.of_rows(low, reference)
        fig = _kl_panels(s, f"model: mean next-token KL(fp32 ‖ low precision) vs position (sequence length {L}; "
                            f"{_n(s)}, mean over seeds)", groups, ref)
        save(fig, out, "precision_model_kl.png", made)
        md += [f"### Model level: safe up to position L (mean KL against fp32 <= {KL_SAFE:g} nats; at most {L})\n",
               f"{_n(s)}. L: every window up to L has its mean KL over seeds within the bound; in brackets, "
               f"where it differs, the L of the upper end of the 95% t interval (safe with confidence).\n",
               md_table(_safe_cells(s, low), "{}"), "", "![model KL](precision_model_kl.png)\n"]
    for metric, title in (("ppl_gap", "PPL(low) − PPL(fp32) by eval length"),
                          ("anchor_d", "AnchorAttention D (mean |ΔA| of attention probabilities) by shift D1, "
                                       "against D2 = 16 at the train length"),
                          ("anchor_d_logit", "AnchorAttention D_logit (mean |Δ attention logit|, shift 0 vs 16) "
                                             "by sequence length")):
        d = model[model.metric == metric]
        if not d.empty:
            # one table row per series: the ci table's row key is the column named variant
            md += [f"### {title}\n", *ci_table(d.assign(variant=d.series), "eval_len",
                                               index_name="variant dtype protocol")]
    k, kernel = kernel_rows(paths, out, kernel_max_len), []
    _kernel_plots(k, out, made, kernel)
    md[at:at] = [_safe_table(k, md_table), "", *kernel]
    return md


def _n(s):
    ns = s.n[s.n > 0]
    lo, hi = (int(ns.min()), int(ns.max())) if len(ns) else (0, 0)
    return f"n = {hi} seed{'s' if hi > 1 else ''}" if lo == hi else f"n = {lo}–{hi} seeds"


def _safe_cells(s, low):
    """variant x (dtype protocol) table of safe lengths from the seed means (and the upper CI ends)."""
    first = low.groupby(["variant", "dtype", "protocol"]).first()  # the other columns safe_length keys on
    out = {}
    for col in ("mean", "hi"):
        rows = s.assign(value=s[col], metric="kl_fp32").join(first[["encoding", "head_dim", "params"]],
                                                             on=["variant", "dtype", "protocol"])
        # the series key of safe_length is (encoding, protocol, dtype, head_dim, params): the variant goes
        # into params so that two variants of one encoding stay apart
        rows["params"] = [json.dumps({"seq_len": json.loads(p)["seq_len"], "variant": v})
                          for p, v in zip(rows.params, rows.variant)]
        if col == "hi" and rows.value.isna().all():
            break
        safe = pd.DataFrame(safe_length(rows, KL_SAFE, "kl_fp32"))
        safe["variant"] = safe.params.map(lambda p: json.loads(p)["variant"])
        out[col] = safe.assign(cell=safe.dtype + " " + safe.protocol).pivot_table(
            index="variant", columns="cell", values="value", aggfunc="min")
    mean = out["mean"].astype("Int64").astype(str)
    if "hi" in out:
        hi = out["hi"].reindex_like(out["mean"]).astype("Int64").astype(str)
        mean = mean.where(mean == hi, mean + " [" + hi + "]")
    mean.index.name = "variant"
    return mean
