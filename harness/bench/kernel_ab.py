"""Paired A/B timing of builds of the C kernel: which of two (or more) variants is faster, by R.

  python -m harness.bench.kernel_ab --keys cpu/fwd/interleaved/float16/prefill cpu/bwd/half/bfloat16/prefill \
      --variant base= --variant lock8=-DLOCK=8 --variant mine=/tmp/csrc_copy [--rounds 8]

A variant is NAME=FLAGS (harness/rope/csrc built with extra compiler flags, e.g. -DLOCK=8 or -DPF_BYTES=8192) or
NAME=DIR (a copy of csrc/ with an edit in it), built with the project's flags (harness/rope/cpu.py) into a temporary
folder; the first variant is the base. Each round times every key with every variant in turn
(`kernel_bench.measure`: R against copy_, cold start and all, as the baseline), the order of the variants reversed
every other round, so that drift and the neighbours' load fall on all of them alike. Printed per key: each variant's
median R, and the median over the rounds of its R / the base's R in the same round. Only such paired ratios tell
small differences apart on a shared machine (R alone moves by about +-0.1 from run to run; results/baselines/RUN.md).
Run it on an idle machine, not beside other timing. Not part of make test (minutes); tests/test_kernel_ab.py runs
it once, small."""
import argparse
import os
import ctypes
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile

import torch

from harness.bench import kernel_bench
from harness.rope import cpu


def build(name, spec, folder):
    """The shared library of one variant (spec: extra flags, or a folder holding a copy of csrc/)."""
    src, flags = (pathlib.Path(spec), []) if spec and pathlib.Path(spec).is_dir() else (cpu.CSRC, shlex.split(spec))
    out = pathlib.Path(folder) / f"{name}.so"
    cc = shlex.split(os.environ.get("HARNESS_CC", "gcc"))
    run = subprocess.run([*cc, *cpu.FLAGS, *flags, str(src / "rope_cpu.c"), "-o", str(out)],
                         capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"variant {name!r} did not build: {(run.stderr.strip().splitlines() or ['?'])[0]}")
    return out


def kernels(path):
    """{dtype: the library's kernel function at this process's level}, declared as harness.rope.cpu declares its own."""
    lib, level = ctypes.CDLL(str(path)), cpu.isa()
    out = {}
    for dtype, symbol in cpu.SYMBOLS.items():
        if dtype in cpu.GENERIC_ONLY:
            continue
        own = cpu._kernel(dtype)
        fn = getattr(lib, f"{symbol}_{level}")
        fn.argtypes, fn.restype = own.argtypes, own.restype
        out[dtype] = fn
    return out


def use(fns):
    """Make harness.rope.cpu launch these kernel functions (the process's level, every dtype they cover)."""
    for dtype, fn in fns.items():
        cpu._FNS[(dtype, cpu.isa())] = fn


def paired(keys, variants, rounds, budget_s=0.5):
    """{key: {name: [R of each round]}}: every key with every variant (name -> kernel functions) in each round."""
    names = list(variants)
    out = {key: {name: [] for name in names} for key in keys}
    for r in range(rounds):
        for key in keys:
            for name in names if r % 2 == 0 else names[::-1]:
                use(variants[name])
                out[key][name].append(kernel_bench.measure(key, budget_s=budget_s)["R"])
    return out


def summary(results, base):
    """Lines: per key, each variant's median R and median paired ratio to the base."""
    lines = []
    for key, per in results.items():
        cells = [f"{name} R {statistics.median(rs):.3f} x{statistics.median(a / b for a, b in zip(rs, per[base])):.3f}"
                 for name, rs in per.items()]
        lines.append(f"{key:40s} " + " | ".join(cells))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", nargs="+", required=True, help="kernel_bench keys (provider cpu), e.g. "
                                                              "cpu/fwd/interleaved/float16/prefill")
    ap.add_argument("--variant", action="append", required=True, metavar="NAME=FLAGS|DIR",
                    help="repeat for each build; the first is the base")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement (kernel_bench.measure)")
    a = ap.parse_args(argv)
    bad = [v for v in a.variant if "=" not in v]
    if bad or a.rounds < 1 or [k for k in a.keys if not k.startswith("cpu/")]:
        ap.error(f"need NAME=FLAGS|DIR variants (got {bad}), --rounds >= 1 and keys of provider cpu (got {a.keys})")
    if cpu.unavailable():
        ap.error(f"no C kernel here: {cpu.unavailable()}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="kernel-ab-") as folder:
        specs = dict(v.split("=", 1) for v in a.variant)
        variants = {name: kernels(build(name, spec, folder)) for name, spec in specs.items()}
        own = {dtype: cpu._kernel(dtype) for dtype in variants[next(iter(variants))]}
        try:
            results = paired(a.keys, variants, a.rounds, a.budget)
        finally:
            use(own)
    print("\n".join(summary(results, next(iter(variants)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
