"""The kernel benchmark's cold start (harness/bench/kernel_timing.py): after every timed call of a cold shape, what
the call read and returned leaves the caches, so kernel and copy_ each read their tensors from DRAM; warm shapes
(decode) are timed as they are."""
import pytest
import torch

from harness.bench import kernel_bench, kernel_timing
from harness.bench.kernel_spec import COLD_SHAPES
from harness.rope import cpu

SMALL = dict(b=1, hq=2, hk=2, t=8, d=16)
have_c = pytest.mark.skipif(cpu.unavailable() is not None, reason=f"no C kernel library: {cpu.unavailable()}")


def _evicted(monkeypatch):
    """Storage addresses the cold start evicts, recorded instead of evicted."""
    seen = []
    monkeypatch.setattr(kernel_timing, "_evict_fn", lambda: lambda ptr, n: seen.append((ptr, n)))
    return seen


def _storages(*ts):
    return {(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in ts}


@pytest.mark.parametrize("mode", ["fwd", "bwd"])
def test_cold_start_evicts_what_the_timed_call_read_and_returned(monkeypatch, mode):
    seen = _evicted(monkeypatch)
    q, k, cos, sin = kernel_bench.inputs(SMALL, torch.float32)
    fn = kernel_bench.kernel_fn("eager", mode, q, k, cos, sin, "half")
    out = fn()
    kernel_timing.cold_start()(fn, out)
    reads = (q, k) if mode == "fwd" else fn.tensors[:2]  # the backward reads the output gradients, not q and k
    assert mode == "fwd" or not _storages(q, k) & _storages(*reads)
    assert _storages(*reads, cos, sin, *out) <= set(seen)


def test_cold_start_evicts_the_copy_yardsticks_source_and_destination(monkeypatch):
    seen = _evicted(monkeypatch)
    q, k, _, _ = kernel_bench.inputs(SMALL, torch.float16)
    copy = kernel_bench.copy_fn(q, k)
    out = copy()
    kernel_timing.cold_start()(copy, out)
    assert _storages(q, k, *out) <= set(seen)


def test_prefill_is_timed_cold_and_decode_warm(monkeypatch):
    colds = {}

    def fake_alternate(kernel, copy, *, cold=None, **kw):
        colds[kernel] = cold
        return [1e-3] * 5, [1e-3] * 5
    monkeypatch.setattr(kernel_bench, "alternate", fake_alternate)
    monkeypatch.setitem(kernel_bench.SHAPES, "prefill", SMALL)
    for shape in ("prefill", "decode"):
        colds.clear()
        kernel_bench.measure(f"eager/fwd/half/float32/{shape}")
        assert (next(iter(colds.values())) is not None) == (shape in COLD_SHAPES["cpu"]), shape
    assert "prefill" in COLD_SHAPES["cpu"] and "decode" not in COLD_SHAPES["cpu"]


def test_alternate_runs_the_cold_start_after_every_call_untimed():
    calls = []
    kernel_bench.alternate(lambda: calls.append("k"), lambda: calls.append("c"), min_reps=3, max_reps=3, warmup=1,
                           budget_s=0, cold=lambda fn, out: calls.append("evict"))
    assert calls == ["k", "evict", "c", "evict"] * 4  # warm-up pair, then three timed pairs


@have_c
def test_evicting_a_tensor_keeps_its_values():
    x = torch.randn(1 << 16)
    before = x.clone()
    kernel_timing._evict_fn()(x.data_ptr() + 3, x.nbytes - 3)  # unaligned ends: whole lines around them
    assert torch.equal(x, before)
    assert kernel_timing.cache_method() == "evict"


def test_without_the_c_library_the_cold_start_reads_past_the_last_level_cache(monkeypatch):
    monkeypatch.setattr(kernel_timing, "_evict_fn", lambda: None)
    monkeypatch.setattr(kernel_timing, "last_level_cache_bytes", lambda: 1 << 20)
    kernel_timing._read_buffer.cache_clear()
    try:
        reads = []
        buf = kernel_timing._read_buffer()
        monkeypatch.setattr(torch.Tensor, "sum", lambda self, *a, **kw: reads.append(self.data_ptr()))
        kernel_timing.cold_start()(lambda: None, None)
        assert reads == [buf.data_ptr()] and buf.nbytes == kernel_timing.FLUSH_LLC << 20
        assert kernel_timing.cache_method() == f"read {kernel_timing.FLUSH_LLC} MiB"
    finally:
        kernel_timing._read_buffer.cache_clear()


def test_last_level_cache_is_read_from_sysfs_or_defaults():
    size = kernel_timing.last_level_cache_bytes()
    assert size >= 1 << 20 and size % 1024 == 0


def test_bench_csv_says_each_rows_cache_state_and_level(tmp_path):
    """make bench's CSV (kernel_report): 'evict' on the rows of a cold shape, 'warm' on the others, and cpu_isa."""
    import csv
    import json

    from harness.bench.kernel_report import report
    env = dict(device="cpu", torch=torch.__version__, glibc_tunables="", cpu_isa="avx2", cache="prefill cold: evict")
    rows = [dict(provider="cpu", mode="fwd", layout="half", dtype="float32", shape=shape, R=0.9, p20=1e-3, p50=1e-3,
                 p80=1e-3, **env) for shape in ("prefill", "decode")]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(dict(datetime="2030-01-01", benchmarks=[dict(extra_info=e) for e in rows])))
    report(path)
    with open(path.with_suffix(".csv")) as f:
        got = {r["x_value"]: (r["cache"], r["cpu_isa"]) for r in csv.DictReader(f)}
    assert got == {"prefill": ("evict", "avx2"), "decode": ("warm", "avx2")}
