"""How the RoPE kernel benchmark times a kernel against its yardstick (harness/bench/kernel_bench.py): the two
called alternately (`alternate`; on a GPU by CUDA events behind a spin kernel), each call of a cold shape followed,
untimed, by the eviction of what it touched (`cold_start`), and lower quantiles of the series (`quantile`)."""
import ctypes
import functools
import pathlib
import time

import torch

from harness.bench.kernel_spec import FLUSH_LLC

DEFAULT_LLC = 32 << 20  # where sysfs does not say (macOS, some containers): a server CPU's L3


def last_level_cache_bytes():
    """The largest data or unified cache of cpu0 (Linux sysfs), else DEFAULT_LLC."""
    sizes = []
    for d in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            kind, size = (d / "type").read_text().strip(), (d / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction" and size[:-1].isdigit():
            sizes.append(int(size[:-1]) << {"K": 10, "M": 20, "G": 30}.get(size[-1], 0))
    return max(sizes, default=DEFAULT_LLC)


@functools.lru_cache(maxsize=1)
def _read_buffer():
    # ones, not zeros: calloc'd zero pages all map one physical page, and reading them evicts nothing
    return torch.ones(FLUSH_LLC * last_level_cache_bytes() // 4, dtype=torch.float32)


def _evict_fn():
    """The C library's rope_evict (harness/rope/csrc/rope_cpu.c), or None where that library is unavailable."""
    from harness.rope import cpu
    if cpu.unavailable():
        return None
    fn = cpu.library().rope_evict
    fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_int64), None
    return fn


def cache_method():
    """How a cold start empties the caches here: 'evict' (clflush of the touched tensors' lines), or 'read N MiB'
    where the C library cannot be had."""
    return "evict" if _evict_fn() else f"read {FLUSH_LLC * last_level_cache_bytes() >> 20} MiB"


def reads(fn, *tensors):
    """fn, with the tensors it reads (besides those it returns) as fn.tensors: what a cold start evicts."""
    fn.tensors = tensors
    return fn


def cache_state(env, shape):
    """How the caches stood for timings of `shape` recorded with environment `env` (kernel_env writes
    '<shape> cold: <method>' for each cold shape, joined by '; '): the cold start's method, else 'warm'."""
    prefix = f"{shape} cold: "
    return next((e[len(prefix):] for e in env.get("cache", "").split("; ") if e.startswith(prefix)), "warm")


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    return [t for o in obj for t in _tensors(o)] if isinstance(obj, (tuple, list)) else []


def cold_start():
    """evict(fn, result): after a timed CPU call, empty the caches of what it touched (the tensors fn reads, listed
    in fn.tensors, and those it returned), so that the next timed call, of either side, reads its tensors from
    DRAM with its code still cached (kernel_spec.COLD_SHAPES). Without the C library: a read of FLUSH_LLC x the
    last-level cache instead, which also evicts code and page-table entries (host work then reads slower)."""
    fn = _evict_fn()
    if fn is None:
        buf = _read_buffer()
        return lambda timed, result: buf.sum()

    def evict(timed, result):
        for t in (*getattr(timed, "tensors", ()), *_tensors(result)):
            fn(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
    return evict


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def alternate(kernel, copy, *, budget_s=0.5, min_reps=5, max_reps=200, warmup=2, device=torch.device("cpu"),
              cold=None):
    """Time kernel and copy alternately for about budget_s: lists of kernel and copy seconds, one pair per rep.
    cold(fn, result) (CPU): called, untimed, after every call (kernel_timing.cold_start)."""
    for _ in range(warmup):
        for fn in (kernel, copy):
            out = fn()
            cold and cold(fn, out)
    if device.type == "cuda":
        return _alternate_cuda(kernel, copy, budget_s, min_reps, max_reps)
    tk, tc = [], []
    start = time.perf_counter()
    while len(tk) < max_reps and (len(tk) < min_reps or time.perf_counter() - start < budget_s):
        for fn, out in ((kernel, tk), (copy, tc)):
            _sync(device)
            t0 = time.perf_counter()
            result = fn()
            _sync(device)
            out.append(time.perf_counter() - t0)
            cold and cold(fn, result)
    return tk, tc


def _alternate_cuda(kernel, copy, budget_s, min_reps, max_reps, chunk=16):
    """Device time from CUDA events between back-to-back launches. Each chunk of reps is queued behind
    a spin kernel (torch.cuda._sleep) that outlasts its enqueueing, so host-side launch overhead (Python
    wrappers, autograd) is not in the intervals: R compares memory traffic, the kernel's own business.
    Without it, flash-attn's bf16 rotary read R 0.5-0.97 run to run on an H100 (the GPU idled waiting
    for the host)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel(), copy()
    host = time.perf_counter() - t0  # host time to enqueue one rep
    torch.cuda.synchronize()
    reps = int(min(max_reps, max(min_reps, budget_s / max(time.perf_counter() - t0, 1e-6))))
    tk, tc = [], []
    for start in range(0, reps, chunk):
        n = min(chunk, reps - start)
        torch.cuda._sleep(int(min(2 * host * n, 0.1) * 2e9))  # cycles at <= 2 GHz: >= 2x the enqueue time
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * n + 1)]
        ev[0].record()
        for i in range(n):
            kernel()
            ev[2 * i + 1].record()
            copy()
            ev[2 * i + 2].record()
        torch.cuda.synchronize()
        ms = [a.elapsed_time(b) / 1e3 for a, b in zip(ev, ev[1:])]
        tk, tc = tk + ms[0::2], tc + ms[1::2]
    return tk, tc


def quantile(xs, q):
    """Linear-interpolated quantile q in [0, 1] of a list."""
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)
