"""The kernel-speed gate (`make bench-check`) fails on a planted 2x slowdown and passes on the tree as it is.

The slowdown is planted in a child process only: harness.rope.cpu.launch is wrapped to run its
kernel twice (the extra pass a careless change would add), then the real CLI runs against the
committed baseline. The child gets the same GLIBC_TUNABLES as `make bench-check`.
"""
import json
import math

import pytest

from harness.measure.kernel_gate import compare, floors
from harness.measure.kernel_spec import GATED
from tests.gate_support import BASELINE, KEY, PLANT, ROOT, gate


def test_compare_flags_only_keys_below_their_floor():
    assert compare({"a": [0.4, 0.71], "b": [0.36]}, {"a": 0.7, "b": 0.35}) == []
    assert compare({"a": [0.69, 0.6], "b": [0.9]}, {"a": 0.7, "b": 0.35}) == ["a: R 0.690 < floor 0.700"]
    with pytest.raises(ValueError, match="baseline keys not measured: \\['b'\\]"):
        compare({"a": [1.0]}, {"a": 0.7, "b": 0.35})


def test_floor_is_the_geometric_midpoint_of_the_slowest_run_and_half_the_fastest():
    doc = {"R": {"a": 1.2, "b": 1.0, "gpu": 0.9},
           "machines": {"m1": {"a": [1.0, 1.1], "b": [0.5, 0.6]}, "m2": {"a": [1.5, 1.2], "b": [1.1]}}}
    with pytest.raises(ValueError, match=r"^b: R spreads 0.500..1.100 over machines \(>= 2x\)"):
        floors(doc)
    del doc["R"]["b"]
    f = floors(doc)
    assert f["a"] == pytest.approx((1.0 * 1.5 / 2) ** 0.5)  # unchanged >= 1.0 passes, 2x slower <= 0.75 fails
    assert f["gpu"] == pytest.approx(0.7 * 0.9)  # no machines recorded: 30% below its R


def test_baseline_is_committed_and_covers_the_gated_kernels():
    doc = json.loads((ROOT / BASELINE).read_text())
    assert set(doc["R"]) == set(GATED)
    assert doc["meta"]["statistic"] == "median of runs" and doc["meta"]["runs"] >= 3
    assert "mmap_threshold=268435456" in doc["meta"]["glibc_tunables"]
    assert len(doc["machines"]) >= 2 and set(floors(doc)) == set(GATED)  # every floor exists (spread < 2x)


@pytest.mark.slow
@pytest.mark.serial
def test_gate_passes_on_unchanged_tree():
    run = gate("-m", "harness.measure.kernel_bench")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "bench-check: passed" in run.stdout


@pytest.mark.slow
@pytest.mark.serial
def test_gate_fails_on_planted_slowdown():
    run = gate("-c", PLANT)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"KERNEL SPEED REGRESSION {KEY}" in run.stdout


def test_gate_trials_estimate_reads_one_machine_and_brackets_the_floor():
    """tests/gate_trials.py --estimate: a key whose trials sit far above its floor almost never fails unchanged;
    one whose trials straddle the floor fails about half the time (the t prediction is centred on the mean)."""
    from tests.gate_trials import estimate
    far = [1.0, 1.02, 0.98, 1.01, 0.99]
    doc = {"R": {"a": 1.0, "b": 1.0},
           "machines": {"kind X trials": {"a": far, "b": far}, "kind Y": {"a": [0.75], "b": [1.9]}}}
    est = estimate(doc, "X trials")
    n, mean, sd, floor, fail, slow = est["a"]  # floor sqrt(0.75 * 1.02 / 2) = 0.618: 22 sd below, 14 above R / 2
    assert n == 5 and mean == pytest.approx(1.0) and floor == pytest.approx(math.sqrt(0.75 * 1.02 / 2))
    assert fail < 1e-4 and slow < 1e-3  # t with 4 degrees of freedom: heavy tails
    floor_b = est["b"][3]  # sqrt(0.98 * 1.9 / 2) = 0.965, inside the samples' spread
    assert 0.05 < est["b"][4] < 0.5 and floor_b == pytest.approx(math.sqrt(0.98 * 1.9 / 2))
    with pytest.raises(ValueError, match="exactly one machine entry"):
        estimate(doc, "kind")
