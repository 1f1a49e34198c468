"""The decode-shape RoPE benchmark: time per call of one new token's rotation, ours against the peers.

  python -m harness.bench.kernel_bench decode [--runs 5] [--device cuda]

One decode step rotates q (B, Hq, 1, D) and k (B, Hk, 1, D) of the KV-cache path (harness/decode.py):
kernel_spec.SHAPES["decode"], 16 sequences x Llama-3-8B's heads (32 q / 8 kv, D 128). A few hundred KB, so the
call is launch- and overhead-bound, not bandwidth-bound: the statistic is microseconds per call, lower is
better (R next to it for reference). Providers: our fused kernel (`cpu`, or `triton` on CUDA), the formulas
(`eager`, `complex`) and the outside ones that import here: HF transformers' `apply_rotary_pos_emb` (`hf`,
its eager path) everywhere, Liger-Kernel and flash-attn on a GPU (harness/bench/external_rope.py).
Forward only: decoding runs under no_grad. The JSON (results/baselines/decode-<device>.json) has the same
meta/runs layout as the R baselines, with `us` (median over runs of each run's p20 time per call) in place of R;
the README's decode table is generated from it (harness/bench/kernel_table.py).
"""
import json
import pathlib
import statistics

import torch

from harness.bench import external_rope


def keys(device="cpu"):
    """provider/fwd/layout/dtype/decode for every provider that runs on device, both layouts it does."""
    fused = "cpu" if device == "cpu" else "triton"
    outside = [p for p in external_rope.BUILDERS if external_rope.available(p) and (device == "cuda" or p == "hf")]
    return [f"{p}/fwd/{lay}/{dt}/decode" for p in (fused, "eager", "complex", *outside)
            for dt in ("float32", "bfloat16") for lay in ("half", "interleaved")
            if lay in external_rope.LAYOUTS.get(p, (lay,))]


def write(path, runs, device, measured_runs, environment):
    """Measure every key `runs` times (interleaved, so a noisy minute hits all) under no_grad; write the JSON.
    measured_runs, environment: kernel_bench's (passed in: kernel_bench's CLI imports this module)."""
    with torch.no_grad():
        measured = measured_runs(keys(device), runs, device=device)
    times = {k: [1e6 * m["p20"] for m in ms] for k, ms in measured.items()}
    ratios = {k: [m["R"] for m in ms] for k, ms in measured.items()}
    doc = dict(meta=dict(environment(device), runs=runs, statistic="median of runs", unit="us per call",
                         command=f"python -m harness.bench.kernel_bench decode --runs {runs}"),
               us={k: statistics.median(v) for k, v in times.items()}, runs=times,
               R_median={k: statistics.median(v) for k, v in ratios.items()})
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc
