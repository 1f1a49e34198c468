"""The kernel-speed tables of docs/kernels.md, generated from the committed baseline JSONs so they cannot drift.

`python -m harness.bench.kernel_table [--check|--write] docs/kernels.md` regenerates every block between
`<!-- kernel-table: PATH -->` and `<!-- /kernel-table -->` (PATH relative to the page's folder) from
`table(PATH)`; `--check` (tests, CI) exits 1 when the README differs, `--write` rewrites it, no flag prints them.
A baseline JSON (harness.bench.kernel_bench baseline) holds meta, R[key] (the statistic meta names, over
runs[key]) and, for the gate, machines; key = provider/mode/layout/dtype/shape. A decode JSON
(harness/bench/kernel_decode.py) holds us[key], microseconds per call, in place of R: lower is better there.
"""
import argparse
import json
import math
import pathlib
import re
import statistics
import sys

from harness.bench.kernel_spec import SHAPES
from harness.bench.kernel_timing import cache_state

# Columns: the fused kernels first, then the formula baselines; providers not listed follow, sorted.
PROVIDERS = ("cpu", "triton", "compiled", "liger", "flash_attn", "eager", "complex", "hf")
LABELS = {"cpu": "cpu (C/OpenMP)", "hf": "hf (HF transformers)", "liger": "liger (Liger-Kernel)",
          "flash_attn": "flash_attn (flash-attn)"}
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
LAYOUTS = ("half", "interleaved")
# meta["statistic"] -> how R follows from runs: checked, so the caption cannot claim what R is not.
STATISTICS = {"median of runs": statistics.median, "max of runs": max}
BLOCK = re.compile(r"(<!-- kernel-table: (\S+) -->\n)(.*?)(<!-- /kernel-table -->)", re.S)
OPEN = "<!-- kernel-table: "


def _shape(name):
    """B4·H8·T2048·D64, or B8·Hq32·Hk8·T4096·D128 with grouped-query heads."""
    s = SHAPES[name]
    heads = f"H{s['hq']}" if s["hq"] == s["hk"] else f"Hq{s['hq']}·Hk{s['hk']}"
    return f"B{s['b']}·{heads}·T{s['t']}·D{s['d']}"


def _caption(meta, shape, name):
    """One line: device (thread count and cache state on CPU), shape, file, statistic, date, all read from the JSON."""
    stat = meta["statistic"].replace("runs", str(meta["runs"]))
    date = meta["time"][:10]
    if "cuda" in meta:
        where = f"GPU, {meta['device']}"
    else:
        cpu = f" ({meta['cpu']}, C kernel level {meta['cpu_isa']})" if meta.get("cpu_isa") else ""
        where = f"CPU{cpu}, {meta['threads']} thread{'' if meta['threads'] == 1 else 's'}"
        method = cache_state(meta, shape)  # kernel_timing.cold_start's, or warm
        if method != "warm":
            where += ", cold data (tensors evicted by clflush)" if method == "evict" else f", cold caches ({method})"
    return f"{where}, {_shape(shape)} (`{name}`, {stat}, {date}):"


def _metric(doc):
    """'R' (higher is better) or 'us' (time per call, lower is better): what the JSON's cells hold."""
    return "us" if "us" in doc else "R"


def _check_statistic(doc):
    """ValueError where R (or us) is not meta's statistic of runs: the caption would misstate the cells."""
    fn = STATISTICS.get(doc["meta"]["statistic"])
    if fn is None:
        raise ValueError(f"unknown statistic {doc['meta']['statistic']!r}; known: {sorted(STATISTICS)}")
    for key, r in doc[_metric(doc)].items():
        runs = doc.get("runs", {}).get(key)
        if runs is None or len(runs) != doc["meta"]["runs"] or not math.isclose(fn(runs), r, rel_tol=1e-12):
            raise ValueError(f"{key}: R {r} is not the {doc['meta']['statistic']} ({doc['meta']['runs']}) of {runs}")


def _cell(vals, best, fmt):
    """'fwd / bwd' (or one mode) formatted, '–' for a mode not measured, '' for none; the row's best in bold."""
    if all(v is None for v in vals):
        return ""
    parts = ["–" if v is None else fmt(v) for v in vals]
    bold = [v is not None and best[i] is not None and fmt(v) == best[i] for i, v in enumerate(vals)]
    if all(bold):
        return "**" + " / ".join(parts) + "**"
    return " / ".join(f"**{p}**" if b else p for p, b in zip(parts, bold))


def table(json_path, name=None):
    """Caption line, blank line, markdown table (rows dtype x layout, a column per provider measured) for the
    baseline at json_path; name is the path the caption shows (json_path as given by default)."""
    doc = json.loads(pathlib.Path(json_path).read_text())
    _check_statistic(doc)
    metric = _metric(doc)
    fmt, pick = ((lambda v: f"{v:.2f}"), max) if metric == "R" else ((lambda v: f"{v:.0f}"), min)
    r = {tuple(k.split("/")): v for k, v in doc[metric].items()}
    modes = [m for m in ("fwd", "bwd") if any(k[1] == m for k in r)]
    shapes = sorted({k[4] for k in r})
    if len(shapes) != 1:
        raise ValueError(f"{json_path}: one shape per table, found {shapes}")
    provs = [p for p in PROVIDERS if any(k[0] == p for k in r)] + sorted({k[0] for k in r} - set(PROVIDERS))
    dtypes = [d for d in DTYPES if any(k[3] == d for k in r)] + sorted({k[3] for k in r} - set(DTYPES))
    layouts = [x for x in LAYOUTS if any(k[2] == x for k in r)] + sorted({k[2] for k in r} - set(LAYOUTS))
    head = f"{' / '.join(modes)} {'R' if metric == 'R' else 'µs per call'}"
    lines = [f"| {head} | " + " | ".join(LABELS.get(p, p) for p in provs) + " |", "|---" * (len(provs) + 1) + "|"]
    for dtype in dtypes:
        for layout in layouts:
            vals = {p: [r.get((p, m, layout, dtype, shapes[0])) for m in modes] for p in provs}
            if all(v is None for pair in vals.values() for v in pair):
                continue
            measured = [p for p in provs if any(v is not None for v in vals[p])]
            best = [None] * len(modes)
            if len(measured) > 1:
                for i in range(len(modes)):
                    seen = [vals[p][i] for p in provs if vals[p][i] is not None]
                    best[i] = fmt(pick(seen)) if seen else None
            cells = [f"{DTYPES.get(dtype, dtype)}, {layout}"] + [_cell(vals[p], best, fmt) for p in provs]
            lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
    return _caption(doc["meta"], shapes[0], json_path if name is None else name) + "\n\n" + "\n".join(lines)


def render(text, root):
    """text with every kernel-table block regenerated (paths relative to root); ValueError on no/unclosed block."""
    if text.count(OPEN) != len(BLOCK.findall(text)) or not BLOCK.search(text):
        raise ValueError(f"expected closed '{OPEN}PATH -->' ... '<!-- /kernel-table -->' blocks")
    return BLOCK.sub(lambda m: f"{m[1]}\n{table(pathlib.Path(root) / m[2], m[2])}\n\n{m[4]}", text)


def main(argv=None):
    """Exit status: 0 when the README is (now) current, 1 when --check finds it stale or a block is malformed."""
    ap = argparse.ArgumentParser(prog="python -m harness.bench.kernel_table", description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the README's tables are stale")
    mode.add_argument("--write", action="store_true", help="rewrite the README's tables in place")
    ap.add_argument("readme", type=pathlib.Path)
    args = ap.parse_args(argv)
    text = args.readme.read_text()
    try:
        new = render(text, args.readme.parent)
    except ValueError as e:
        print(f"{args.readme}: {e}", file=sys.stderr)
        return 1
    stale = [m[2] for m, n in zip(BLOCK.finditer(text), BLOCK.finditer(new)) if m[0] != n[0]]
    if args.check:
        if stale:
            print(f"{args.readme}: kernel table differs from {', '.join(stale)}; run "
                  f"python -m harness.bench.kernel_table --write {args.readme}", file=sys.stderr)
            return 1
    elif args.write:
        if stale:
            args.readme.write_text(new)
        print(f"{args.readme}: {'rewrote tables from ' + ', '.join(stale) if stale else 'tables current'}")
    else:
        print("\n\n".join(m[3].strip() for m in BLOCK.finditer(new)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
