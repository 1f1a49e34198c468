"""Wall-clock timing shared by every timed quantity: seconds per call over repeats, and the statistics.

Which statistic: rows that report a throughput (harness.measure.throughput, harness.bench.overhead) take the
median over repeats, a typical run; cost ratios of the claims take the lower quintile, since on shared
cores the fast repeats are the undisturbed ones and both sides of a ratio are timed the same way. The
kernel benchmark alternates each kernel call with a `copy_` of the same bytes and keeps its own loop
(harness.bench.kernel_bench), with the same lower quintile."""
import statistics
import time

import torch


def sync(device):
    """Wait for queued CUDA work, so a timer read after it includes it (a no-op on CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def seconds_per_call(fn, *, repeats, inner=1, warmup=1, device="cpu"):
    """[seconds], one per repeat: the mean wall time of `inner` calls of fn, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        times.append((time.perf_counter() - t0) / inner)
    return times


def median(times):
    return statistics.median(times)


def lower_quintile(times):
    """The 20th percentile as the element at index n // 5 of the sorted times (the minimum below 5)."""
    return sorted(times)[len(times) // 5]
