"""RoPE kernels x shapes (prefill, decode) x dtypes x layouts x fwd/bwd, each with its copy baseline.

pytest-benchmark times the kernel alone; R (harness/bench/kernel_bench.py) is measured alternately with
copy_ of the same q+k and stored in extra_info, with the target R (harness/bench/kernel_spec.py), for
the CSV and the plot (`python -m harness.bench.kernel_bench report`). Run by `make bench`.
"""
import pytest
import torch

from harness.bench import external_rope
from harness.bench.kernel_bench import alternate, copy_fn, environment, inputs, kernel_fn, measure, quantile
from harness.bench.kernel_spec import COLD_SHAPES, DEVICE_SHAPES, DTYPES, target
from harness.bench.kernel_env import THREADS
from harness.bench.kernel_timing import cold_start

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Outside kernels where their packages import (external_rope): HF's eager formula everywhere (transformers
# is a dev dependency), Liger-Kernel's and flash-attn's Triton kernels on a GPU
OUTSIDE = [p for p in external_rope.BUILDERS if external_rope.available(p) and (DEVICE == "cuda" or p == "hf")]
PROVIDERS = ["eager", "complex", "compiled", *(["triton"] if DEVICE == "cuda" else ["cpu"]), *OUTSIDE]
SHAPES = DEVICE_SHAPES[DEVICE]


def _record(benchmark, provider, mode, layout, dtype, shape, m):
    benchmark.extra_info.update(provider=provider, mode=mode, layout=layout, dtype=dtype, shape=shape,
                                R=m["R"], p20=m["p20"], p50=m["p50"], p80=m["p80"],
                                target=target(provider, mode, shape, DEVICE), **environment(DEVICE))
    if DEVICE == "cpu":
        benchmark.extra_info["device"] = "cpu"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("mode", ["fwd", "bwd"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_rope(benchmark, provider, mode, layout, dtype, shape):
    if layout not in external_rope.LAYOUTS.get(provider, (layout,)):
        pytest.skip(f"{provider} does only {external_rope.LAYOUTS[provider]} layout")
    m = measure(f"{provider}/{mode}/{layout}/{dtype}/{shape}", device=DEVICE)
    q, k, cos, sin = inputs(shape, DTYPES[dtype], DEVICE)
    _record(benchmark, provider, mode, layout, dtype, shape, m)
    benchmark.pedantic(kernel_fn(provider, mode, q, k, cos, sin, layout), rounds=10, warmup_rounds=2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_copy(benchmark, dtype, shape):
    """The yardstick itself (R = 1 by definition, up to the table bytes a kernel also reads)."""
    q, k, _, _ = inputs(shape, DTYPES[dtype], DEVICE)
    fn = copy_fn(q, k)
    cold = cold_start() if shape in COLD_SHAPES[DEVICE] else None  # from DRAM where the kernels' R is
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)  # the kernels' thread count (kernel_bench.measure)
    try:
        times = alternate(fn, fn, device=torch.device(DEVICE), cold=cold)[0]  # device time on a GPU, as the kernels'
    finally:
        torch.set_num_threads(previous)
    _record(benchmark, "copy", "fwd", "-", dtype, shape,
            dict(R=1.0, p20=quantile(times, 0.2), p50=quantile(times, 0.5), p80=quantile(times, 0.8)))
    benchmark.pedantic(fn, rounds=20, warmup_rounds=2)
