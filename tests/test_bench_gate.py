"""The kernel-speed gate (`make bench-check`): instruction ceilings that load cannot move, loose R floors, and both
fail a planted regression while the tree as it is passes.

The regressions are planted in a child process only (harness/bench/gate_support.py): PLANT wraps harness.rope.cpu.launch
to run its kernel twice (2x slower, 2x the instructions); PLANT_WORK builds the C kernel from a copy of csrc/ whose
rows run their vector steps twice (about 2x the instructions, R barely moved). Then the real CLI runs against the
committed baseline, with the same GLIBC_TUNABLES as `make bench-check`.
"""
import json

import pytest

from harness.bench import kernel_icount
from harness.bench.kernel_gate import compare, floors
from harness.bench.kernel_spec import C_KEYS, CPU_BASELINE, GATED, LOOSE
from harness.bench.gate_support import BASELINE, KEY, PLANT, PLANT_WORK, ROOT, gate

counts_here = pytest.mark.skipif(kernel_icount.unavailable() is not None,
                                 reason=f"no instruction counts here: {kernel_icount.unavailable()}")


def test_compare_flags_only_keys_below_their_floor():
    assert compare({"a": [0.4, 0.71], "b": [0.36]}, {"a": 0.7, "b": 0.35}) == []
    assert compare({"a": [0.69, 0.6], "b": [0.9]}, {"a": 0.7, "b": 0.35}) == ["a: R 0.690 < floor 0.700"]
    with pytest.raises(ValueError, match="baseline keys not measured: \\['b'\\]"):
        compare({"a": [1.0]}, {"a": 0.7, "b": 0.35})


def test_floor_is_loose_where_instructions_gate_and_tight_elsewhere():
    doc = {"R": {"a": 1.2, "b": 0.6}, "machines": {"m1": {"a": [1.0, 1.1]}}}
    assert floors(doc) == pytest.approx({"a": 0.7 * 1.2, "b": 0.7 * 0.6})  # GPU baselines: 30% below R
    doc["instructions"] = {"ceiling": {}}
    assert floors(doc) == pytest.approx({"a": LOOSE * 1.2, "b": LOOSE * 0.6})  # CPU: LOOSE x R, machines aside


def test_instruction_ceilings_flag_counts_above_them_and_counts_without_one():
    ceiling = {"avx2": {"k1": 2.0, "k2": 3.0}, "avx512bf16": {"k1": 1.0}}
    assert kernel_icount.compare({"avx2": {"k1": 1.99, "k2": 3.0}, "avx512bf16": {"k1": 0.5}}, ceiling) == []
    assert kernel_icount.compare({"avx2": {"k1": 2.01, "k2": 1.0}}, ceiling) == [
        "k1 [avx2]: 2.010 instructions per element > ceiling 2.000"]
    assert kernel_icount.compare({"avx512bf16": {"k2": 0.1}, "new": {"k1": 0.1}}, ceiling) == [
        "k2 [avx512bf16]: no instruction ceiling in the baseline (python -m harness.bench.kernel_bench ceilings)",
        "k1 [new]: no instruction ceiling in the baseline (python -m harness.bench.kernel_bench ceilings)"]


def test_recorded_ceilings_are_the_margin_over_the_counts_and_keep_other_levels():
    old = {"instructions": {"per_element": {"avx512bf16": {"k": 1.0}, "avx2": {"k": 9.0}}}}
    rec = kernel_icount.record(old, {"avx2": {"k": 2.0}}, "gcc 12")
    assert rec["per_element"] == {"avx512bf16": {"k": 1.0}, "avx2": {"k": 2.0}}
    assert rec["ceiling"] == {"avx512bf16": {"k": kernel_icount.MARGIN}, "avx2": {"k": 2 * kernel_icount.MARGIN}}
    assert rec["compiler"] == "gcc 12" and 1 < kernel_icount.MARGIN < 2  # 2x the instructions always fails


def test_baseline_is_committed_and_covers_the_gated_kernels():
    doc = json.loads((ROOT / BASELINE).read_text())
    assert set(GATED) <= set(doc["R"]) <= set(CPU_BASELINE)
    assert doc["meta"]["statistic"] == "median of runs" and doc["meta"]["runs"] >= 3
    assert "mmap_threshold=268435456" in doc["meta"]["glibc_tunables"]
    ceilings = doc["instructions"]["ceiling"]
    assert {"avx2", "avx512bf16"} <= set(ceilings)  # every vector level, whichever machine runs the gate
    assert all(set(per) == set(C_KEYS) for per in ceilings.values())  # every dtype x layout x direction


@pytest.mark.slow
@pytest.mark.serial
def test_gate_passes_on_unchanged_tree():
    run = gate("-m", "harness.bench.kernel_bench")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "bench-check: passed" in run.stdout


@pytest.mark.slow
@pytest.mark.serial
@counts_here
def test_gate_fails_on_planted_slowdown():
    run = gate("-c", PLANT)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"KERNEL SPEED REGRESSION {KEY} [" in run.stdout  # the instruction count: twice the ceiling's count


@pytest.mark.slow
@pytest.mark.serial
@counts_here
def test_gate_fails_on_planted_double_work():
    run = gate("-c", PLANT_WORK)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"KERNEL SPEED REGRESSION {KEY} [" in run.stdout and "instructions per element > ceiling" in run.stdout


def test_gate_trials_estimate_reads_one_machine_and_brackets_the_floor():
    """harness/bench/gate_trials.py --estimate: a key whose trials sit far above its floor almost never fails unchanged;
    one whose trials straddle the floor fails about half the time (the t prediction is centred on the mean). With
    LOOSE floors a 2x slower kernel passes R's floor: the instruction ceilings catch it, not R."""
    from harness.bench.gate_trials import estimate
    far = [1.0, 1.02, 0.98, 1.01, 0.99]
    doc = {"R": {"a": 1.0, "b": 2.0}, "instructions": {},
           "machines": {"kind X trials": {"a": far, "b": [0.5, 0.7, 0.6, 0.65, 0.55]}, "kind Y": {"a": [0.75]}}}
    est = estimate(doc, "X trials")
    n, mean, sd, floor, fail, slow = est["a"]
    assert n == 5 and mean == pytest.approx(1.0) and floor == pytest.approx(LOOSE * 1.0)
    assert fail < 1e-4 and slow > 0.99  # t with 4 degrees of freedom: heavy tails
    assert est["b"][3] == pytest.approx(LOOSE * 2.0) and 0.3 < est["b"][4] < 0.7  # floor 0.6 at the samples' mean
    with pytest.raises(ValueError, match="exactly one machine entry"):
        estimate(doc, "kind")


def test_a_new_baseline_keeps_the_instruction_ceilings(tmp_path, monkeypatch):
    """`kernel_bench baseline` rewrites R on a quiet machine; the counts and ceilings (`ceilings`) stay."""
    from harness.bench import kernel_bench
    path = tmp_path / "kernels-cpu.json"
    old = {"R": {}, "machines": {"m": {}}, "instructions": {"ceiling": {"avx2": {KEY: 2.0}}}}
    path.write_text(json.dumps(old))
    monkeypatch.setattr(kernel_bench, "best_of", lambda keys, runs, device="cpu": {k: [1.0] * runs for k in keys})
    monkeypatch.setattr(kernel_bench, "environment", lambda device: {"time": "t", "cpu": "c", "cpu_isa": "avx2"})
    doc = kernel_bench.write_baseline(path, 3, (KEY,))
    assert json.loads(path.read_text()) == doc and doc["instructions"] == old["instructions"]
    assert doc["R"] == {KEY: 1.0} and set(doc["machines"]) == {"m", "c avx2 t"}
