"""RoPE kernel benchmark: speed as a ratio to copy bandwidth, and the CI regression gate.

R = (rope bytes / kernel time) / (copy bytes / copy time), kernel and `copy_` of the same q+k timed
alternately in one loop, on the CPU's prefill from cold caches (kernel_spec.COLD_SHAPES); each time is the
lower quintile (p20) of its series (see `measure` for why not the median). Bytes: read q, k + write q, k +
the cos/sin table (read once); copy: read q, k + write q, k. Backward: the same bytes (read dq', dk',
write dq, dk, table). Absolute times are reported too (p20/p50/p80 of the kernel) but never gated.

Shapes, dtypes, targets and the gated keys: harness/bench/kernel_spec.py.

CLI (the Makefile's bench-check / bench):
  python -m harness.bench.kernel_bench check    [--baseline P] [--runs 5]  instruction ceilings, then R floors; exit 1
  python -m harness.bench.kernel_bench baseline [--baseline P] [--runs 5]  median of runs -> P (a quiet machine)
  python -m harness.bench.kernel_bench ceilings [--baseline P]            instruction counts and ceilings -> P
  python -m harness.bench.kernel_bench report   JSON                      pytest-benchmark JSON -> CSV + PNG + targets
"""
import argparse
import json
import pathlib
import platform
import statistics
import sys

import torch
import torch._functorch.config  # noqa: F401  (donated_buffer, below)

from harness.bench import kernel_icount
from harness.bench.kernel_env import THREADS, environment
from harness.bench.kernel_timing import alternate, cold_start, quantile, reads  # noqa: F401  (re-exported)
from harness.bench.kernel_gate import compare, floors
from harness.bench.kernel_report import report
from harness.bench.kernel_spec import (BASELINE, C_KEYS, COLD_SHAPES, CPU_BASELINE, DROP, DTYPES, GATED, SHAPES,
                                         target)
from harness.rope.frequencies import frequencies
from harness.rope.rotation import rotary_table


def inputs(shape, dtype, device="cpu", requires_grad=False, seed=0):
    """q (B, Hq, T, D), k (B, Hk, T, D) in dtype; cos, sin (T, D/2) fp32 at positions 0..T-1."""
    s = SHAPES[shape] if isinstance(shape, str) else shape
    g = torch.Generator(device).manual_seed(seed)  # drawn where they live: prefill_large is 134M values
    q = torch.randn(s["b"], s["hq"], s["t"], s["d"], generator=g, device=device).to(dtype)
    k = torch.randn(s["b"], s["hk"], s["t"], s["d"], generator=g, device=device).to(dtype)
    cos, sin = rotary_table(frequencies("default", s["d"], 10000.0)[0], torch.arange(s["t"]))
    return q.requires_grad_(requires_grad), k.requires_grad_(requires_grad), cos.to(device), sin.to(device)


def rope_bytes(q, k, cos, sin):
    """Bytes a streaming RoPE must move: read + write q and k, read the table once."""
    return 2 * (q.nbytes + k.nbytes) + cos.nbytes + sin.nbytes


def kernel_fn(provider, mode, q, k, cos, sin, layout):
    """A zero-argument callable running one fwd (or one bwd) of `provider` on q, k."""
    from harness.bench import external_rope
    from harness.rope.apply import apply_rotary_qk
    if provider in external_rope.BUILDERS:  # liger, flash_attn: called as their projects call them
        return external_rope.build(provider, mode, q, k, cos, sin, layout)
    if provider == "triton_bthd":  # ours on liger's and flash-attn's storage: (B, T, H, D) memory seen as (B, H, T, D)
        q, k = (t.detach().transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k))
        provider = "triton"
    if provider == "compiled":
        # Each case compiles for its own shape, as a fixed-length training run does. Without the reset a
        # second shape makes dynamo recompile with dynamic shapes, and those kernels are slower (H100,
        # prefill_large bf16 fwd: R 0.22 after prefill and decode had been compiled, 0.93 compiled fresh).
        torch._dynamo.reset()
    if mode == "fwd":
        return reads(lambda: apply_rotary_qk(q, k, cos, sin, layout, impl=provider), q, k, cos, sin)
    if mode != "bwd":
        raise ValueError(f"unknown mode {mode!r}; expected one of ['fwd', 'bwd']")
    q, k = q.detach().requires_grad_(), k.detach().requires_grad_()
    # retain_graph re-runs one backward; compiled backwards that donate buffers forbid that, and the
    # backward compiles lazily at its first call, so the switch stays off in this (benchmark) process.
    torch._functorch.config.donated_buffer = False
    outs = apply_rotary_qk(q, k, cos, sin, layout, impl=provider)
    grads = tuple(torch.randn_like(o) for o in outs)
    return reads(lambda: torch.autograd.grad(outs, (q, k), grads, retain_graph=True), *grads, cos, sin)


def copy_fn(q, k):
    """The bandwidth yardstick: copy_ q and k into preallocated buffers."""
    q, k = q.detach(), k.detach()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    return reads(lambda: (qo.copy_(q), ko.copy_(k)), q, k)


def measure(key, *, budget_s=0.5, device="cpu", threads=None):
    """Measure one `provider/mode/layout/dtype/shape` key: dict with p20/p50/p80 (s), copy p50, R.

    CPU threads default to 1 (BENCH_THREADS overrides): with other jobs on the 2 cores, a 2-thread
    OpenMP barrier waits for a descheduled thread and kernel and copy times alike snap to the 4 ms
    scheduler tick (measured: p20 12 ms for a 1 ms kernel), which makes R read ~1.0 for anything."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads or THREADS)
    try:
        return _measure(key, budget_s, device)
    finally:
        torch.set_num_threads(previous)


def _measure(key, budget_s, device):
    provider, mode, layout, dtype, shape = key.split("/")
    device = torch.device(device)
    q, k, cos, sin = inputs(shape, DTYPES[dtype], device)
    kernel, copy = kernel_fn(provider, mode, q, k, cos, sin, layout), copy_fn(q, k)
    cold = cold_start() if shape in COLD_SHAPES[device.type] else None
    tk, tc = alternate(kernel, copy, budget_s=budget_s, device=device, cold=cold)
    scale = rope_bytes(q, k, cos, sin) / (2 * (q.nbytes + k.nbytes))
    # p20 of each, not the median of paired ratios: other jobs on the 2 cores preempt either half of
    # a pair at random; the lower quintile is the uncontended time of each.
    ratio = quantile(tc, 0.2) / quantile(tk, 0.2) * scale
    return dict(p20=quantile(tk, 0.2), p50=quantile(tk, 0.5), p80=quantile(tk, 0.8),
                copy_p50=quantile(tc, 0.5), R=ratio, reps=len(tk), bytes=rope_bytes(q, k, cos, sin))


def measured_runs(keys, runs, budget_s=0.5, device="cpu"):
    """{key: [measure() of each run]}; runs interleave the keys so a noisy minute hits all of them."""
    out = {key: [] for key in keys}
    for _ in range(runs):
        for key in keys:
            out[key].append(measure(key, budget_s=budget_s, device=device))
    return out


def best_of(keys, runs, budget_s=0.5, device="cpu"):
    """{key: [R of each run]} (measured_runs)."""
    return {key: [m["R"] for m in ms] for key, ms in measured_runs(keys, runs, budget_s, device).items()}


def icount_case(key, shape):
    """kernel_icount's case: the benchmark's callable for key at shape, and the elements one call rotates."""
    provider, mode, layout, dtype, _ = key.split("/")
    q, k, cos, sin = inputs(shape, DTYPES[dtype])
    return kernel_fn(provider, mode, q, k, cos, sin, layout), q.numel() + k.numel()


def check(path=BASELINE, runs=5, keys=None):
    """The CI gate: instruction counts against their ceilings, then best of `runs` R per key against its floor
    (harness.bench.kernel_gate); the failure lines."""
    doc = json.loads(pathlib.Path(path).read_text())
    floor = floors(doc)
    if [key for key in (keys or GATED) if key not in floor]:
        raise ValueError(f"no baseline R for {[key for key in (keys or GATED) if key not in floor]} in {path}")
    floor = {key: floor[key] for key in (keys or GATED)}
    failures = kernel_icount.check(doc, keys or C_KEYS, icount_case)
    measured = best_of(list(floor), runs)
    for key in floor:
        print(f"{key:42s} R best {max(measured[key]):.3f}  baseline {doc['R'][key]:.3f}  "
              f"floor {floor[key]:.3f}  runs {' '.join(f'{r:.3f}' for r in measured[key])}")
    return failures + compare(measured, floor)


def gpu_keys():
    """GPU baseline rows: every provider present, fwd and bwd, both layouts, bf16 and fp32, prefill_large."""
    from harness.bench import external_rope
    providers = ["triton", "triton_bthd", "compiled", "complex", "eager", *filter(external_rope.available, external_rope.BUILDERS)]
    return [f"{p}/{m}/{lay}/{dt}/prefill_large" for p in providers for m in ("fwd", "bwd") for lay in ("half", "interleaved")
            for dt in ("bfloat16", "float32") if lay in external_rope.LAYOUTS.get(p, (lay,))]


def _machine_name(env):
    """The machines entry a baseline run adds: CPU model (else host name), kernel level, time."""
    return " ".join(filter(None, (env.get("cpu") or platform.node(), env.get("cpu_isa"), env["time"])))


def write_baseline(path=BASELINE, runs=5, keys=CPU_BASELINE, device="cpu"):
    """Baseline = median R of `runs` runs per gated key, with the environment it was measured in."""
    measured = best_of(keys, runs, device=device)
    old = json.loads(pathlib.Path(path).read_text()) if pathlib.Path(path).exists() else {}
    env = environment(device)
    doc = dict(meta=dict(env, runs=runs, statistic="median of runs", drop=DROP,
                         command=" ".join([sys.executable, "-m", "harness.bench.kernel_bench", *sys.argv[1:]])),
               R={key: statistics.median(v) for key, v in measured.items()}, runs=measured,
               targets={key: target(key.split("/")[0], key.split("/")[1], key.split("/")[4], device)
                        for key in keys},
               # every machine measured so far, a record of R's spread (kernel_gate); this one joins them
               machines={**old.get("machines", {}), _machine_name(env):
                         {key: [max(v)] for key, v in measured.items()}})
    if "instructions" in old:  # the counts and ceilings (`ceilings`) do not depend on the timing: kept
        doc["instructions"] = old["instructions"]
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.bench.kernel_bench", description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["check", "baseline", "ceilings", "report", "decode"])
    p.add_argument("json", nargs="?", help="report: the pytest-benchmark JSON")
    p.add_argument("--baseline", default=str(BASELINE))
    p.add_argument("--runs", type=int)
    p.add_argument("--keys", nargs="*", help="check only these keys (default: R of GATED, instructions of C_KEYS)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="baseline on cuda: every GPU provider on prefill_large (results/baselines/kernels-<gpu>.json)")
    a = p.parse_args(argv)
    if a.runs is not None and a.runs < 1:
        p.error(f"--runs must be >= 1, got {a.runs}")
    try:
        return _command(p, a)
    except (OSError, ValueError) as e:  # a baseline or report file that is missing or not JSON: one line, exit 2
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2


def _command(p, a):
    if a.command != "report":  # a report's environment is the one recorded in its JSON rows
        print(f"environment: {environment(a.device)}")
    if a.command == "report":
        if not a.json:
            p.error("report needs the pytest-benchmark JSON path")
        try:
            report(a.json)
        except json.JSONDecodeError as e:
            raise ValueError(f"{a.json} is not a pytest-benchmark JSON ({e})") from e
    elif a.command == "decode":  # time per call of the one-token rotation (harness/bench/kernel_decode.py)
        from harness.bench import kernel_decode
        path = f"results/baselines/decode-{a.device}.json"
        doc = kernel_decode.write(path, a.runs or 5, a.device, measured_runs, environment)
        for key, us in doc["us"].items():
            print(f"{key:45s} {us:8.1f} us per call  (R {doc['R_median'][key]:.3f})")
        print(f"wrote {path}")
    elif a.command == "ceilings":  # instruction counts and ceilings into the baseline (kernel_icount.py)
        for level, per in kernel_icount.write(a.baseline, C_KEYS, icount_case)["per_element"].items():
            for key, n in per.items():
                print(f"{key:45s} [{level}] {n:.3f} instructions per element")
    elif a.command == "baseline":
        keys = gpu_keys() if a.device == "cuda" else CPU_BASELINE
        doc = write_baseline(a.baseline, a.runs or 5, keys, a.device)
        for key, r in doc["R"].items():
            tgt = doc["targets"][key]
            print(f"{key:45s} R {r:.3f}" + ("" if tgt is None else f"  target {tgt:.2f} {'met' if r >= tgt else 'MISSED'}"))
    else:
        failures = check(a.baseline, a.runs or 5, a.keys)  # keys the baseline lacks: ValueError, one line
        for line in failures:
            print(f"KERNEL SPEED REGRESSION {line}")
        print("bench-check: " + ("FAILED" if failures else "passed"))
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
