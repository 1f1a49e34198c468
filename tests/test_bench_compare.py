"""make bench-compare is pytest-benchmark's own comparison (`--benchmark-compare`, `--benchmark-compare-fail`): a real
timed run of one small benchmark is stored, then compared with a copy of it whose median is 1 ps (must fail:
"Performance has regressed") and one whose median is 1000 s (must pass). Load moves this benchmark by thousands of
times (4 us idle, 20 ms with both cores busy: the copy runs on the kernels' threads), so the planted runs are set to
times no run can reach rather than scaled from the one stored."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ONE = "test_copy and float32 and decode"  # the smallest benchmark: a copy_ of one decode step's q and k
pytestmark = pytest.mark.slow


def _bench(storage, *args):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/bench", "--benchmark-enable",
           "-k", ONE, f"--benchmark-storage=file://{storage}", *args]
    # the outer run's pytest / xdist variables left out: under `pytest -n 2` (make test-slow) an inherited
    # PYTEST_XDIST_WORKER makes the inner pytest-benchmark skip saving its run
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def _planted(saved, seconds, name):
    """A copy of the stored run whose every time statistic is `seconds` (spread 0)."""
    data = json.loads(saved.read_text())
    for b in data["benchmarks"]:
        for key in ("min", "max", "mean", "median", "q1", "q3", "ld15iqr", "hd15iqr"):
            b["stats"][key] = seconds
        b["stats"].update(stddev=0.0, iqr=0.0, ops=1 / seconds, total=seconds * b["stats"]["rounds"])
    path = saved.parent / name
    path.write_text(json.dumps(data))
    return path.stem.split("_")[0]


def test_compare_fails_against_a_faster_stored_run_and_passes_against_a_slower(tmp_path):
    r = _bench(tmp_path, "--benchmark-save=base")
    assert r.returncode == 0, r.stdout + r.stderr
    (saved,) = tmp_path.rglob("0001_base.json")
    fast, slow = _planted(saved, 1e-12, "0002_fast.json"), _planted(saved, 1e3, "0003_slow.json")
    worse = _bench(tmp_path, f"--benchmark-compare={fast}", "--benchmark-compare-fail=median:25%")
    assert worse.returncode != 0 and "Performance has regressed" in worse.stdout + worse.stderr, worse.stdout + worse.stderr
    better = _bench(tmp_path, f"--benchmark-compare={slow}", "--benchmark-compare-fail=median:25%")
    assert better.returncode == 0, better.stdout + better.stderr
