"""The kernel-speed gate (`make bench-check`) fails on a planted slowdown and passes on the tree as it is.

The slowdown is planted in a child process only: harness.rope.cpu.launch is wrapped to run its
kernel three times (the extra passes a careless change would add), then the real CLI runs against the
committed baseline. The child gets the same GLIBC_TUNABLES as `make bench-check`.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from harness.measure.kernel_bench import compare
from harness.measure.kernel_spec import BASELINE, GATED

ROOT = pathlib.Path(__file__).parents[1]
ENV = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456")
KEY = "cpu/fwd/half/float32/prefill"
PLANT = """
import sys
import harness.rope.cpu as cpu
fast = cpu.launch
def slow(*args, **kwargs):
    for _ in range(3):
        fast(*args, **kwargs)
cpu.launch = slow
from harness.measure.kernel_bench import main
sys.exit(main(sys.argv[1:]))
"""


def _gate(*code):
    args = ["check", "--baseline", str(ROOT / BASELINE), "--runs", "3", "--keys", KEY]
    return subprocess.run([sys.executable, *code, *args], cwd=ROOT, env=ENV, capture_output=True, text=True)


def test_compare_flags_only_drops_beyond_30_percent():
    base = {"a": 1.0, "b": 0.5}
    assert compare({"a": [0.4, 0.71], "b": [0.36]}, base) == []
    assert compare({"a": [0.69, 0.6], "b": [0.9]}, base) == ["a: R 0.690 < 0.70 x baseline 1.000"]
    with pytest.raises(ValueError, match="baseline keys not measured: \\['b'\\]"):
        compare({"a": [1.0]}, base)


def test_baseline_is_committed_and_covers_the_gated_kernels():
    doc = json.loads((ROOT / BASELINE).read_text())
    assert set(doc["R"]) == set(GATED)
    assert doc["meta"]["statistic"] == "median of runs" and doc["meta"]["runs"] >= 3
    assert "mmap_threshold=268435456" in doc["meta"]["glibc_tunables"]


@pytest.mark.slow
@pytest.mark.serial
def test_gate_passes_on_unchanged_tree():
    run = _gate("-m", "harness.measure.kernel_bench")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "bench-check: passed" in run.stdout


@pytest.mark.slow
@pytest.mark.serial
def test_gate_fails_on_planted_slowdown():
    run = _gate("-c", PLANT)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"KERNEL SPEED REGRESSION {KEY}" in run.stdout
