"""What a kernel benchmark number depends on, recorded next to it (harness/bench/kernel_bench.py): the machine,
torch, the thread count, the allocator's tunables, the CPU's vector extensions and the C kernel's level, and the
cache state each timed call starts from (kernel_timing.cold_start)."""
import os
import pathlib
import platform
import time

import torch

from harness.bench.kernel_spec import COLD_SHAPES
from harness.bench.kernel_timing import cache_method

THREADS = int(os.environ.get("BENCH_THREADS", "1"))


def _cpu_isa():
    """The C kernel's dispatch level here (harness/rope/cpu.py), or why there is none."""
    from harness.rope import cpu
    return cpu.unavailable() or cpu.isa()


def _cpuinfo(field):
    """The first `field` line of /proc/cpuinfo ('' where there is none)."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(field)), "")


def environment(device="cpu"):
    """What a benchmark number depends on, recorded next to it."""
    env = dict(device=platform.processor() or platform.machine(), torch=torch.__version__, threads=THREADS,
               glibc_tunables=os.environ.get("GLIBC_TUNABLES", ""), time=time.strftime("%Y-%m-%dT%H:%M:%S"))
    if device == "cpu":
        # the vector extensions the kernel's levels and the measured R depend on
        flags = [f for f in _cpuinfo("flags").split() if f.startswith(("avx", "f16c", "fma", "amx"))]
        env.update(cpu=_cpuinfo("model name"), cpu_isa=_cpu_isa(), cpu_flags=" ".join(flags),
                   cache="; ".join(f"{shape} cold: {cache_method()}" for shape in COLD_SHAPES["cpu"]))
    if device == "cuda":
        import triton
        env.update(device=torch.cuda.get_device_name(), cuda=torch.version.cuda, triton=triton.__version__)
    return env

