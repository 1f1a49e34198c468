"""The kernel-speed gate as a child process, shared by tests/test_bench_gate.py and tests/gate_trials.py (not a test
module): the committed baseline, the key a planted slowdown hits, the planted child's code, and `gate`, which runs
`harness.measure.kernel_bench check` (or the plant) with the same GLIBC_TUNABLES as `make bench-check`."""
import os
import pathlib
import subprocess
import sys

from harness.measure.kernel_spec import BASELINE

ROOT = pathlib.Path(__file__).parents[1]
ENV = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456")
KEY = "cpu/fwd/half/float32/prefill"
# harness.rope.cpu.launch wrapped to run its kernel twice (the extra pass a careless change would add), then the CLI
PLANT = """
import sys
import harness.rope.cpu as cpu
fast = cpu.launch
def slow(*args, **kwargs):
    for _ in range(2):
        fast(*args, **kwargs)
cpu.launch = slow
from harness.measure.kernel_bench import main
sys.exit(main(sys.argv[1:]))
"""

__all__ = ["BASELINE", "ENV", "KEY", "PLANT", "ROOT", "gate"]


def gate(*code, keys=None):
    """The finished `check` child run by `python *code` against the committed baseline (5 runs of each key)."""
    args = ["check", "--baseline", str(ROOT / BASELINE), "--runs", "5", "--keys", *(keys or [KEY])]
    return subprocess.run([sys.executable, *code, *args], cwd=ROOT, env=ENV, capture_output=True, text=True)
