"""The kernel-speed gate as a child process, shared by tests/test_bench_gate.py and harness/bench/gate_trials.py (not a test
module): the committed baseline, the key a planted regression hits, the planted children's code, and `gate`, which
runs `harness.bench.kernel_bench check` (or a plant) with the same GLIBC_TUNABLES as `make bench-check`."""
import os
import pathlib
import subprocess
import sys

from harness.bench.kernel_spec import BASELINE

ROOT = pathlib.Path(__file__).parents[2]
ENV = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456")
KEY = "cpu/fwd/half/float32/prefill"
# 2x slower: harness.rope.cpu.launch wrapped to run its kernel twice (the extra pass a careless change would add),
# then the CLI
PLANT = """
import sys
import harness.rope.cpu as cpu
fast = cpu.launch
def slow(*args, **kwargs):
    for _ in range(2):
        fast(*args, **kwargs)
cpu.launch = slow
from harness.bench.kernel_bench import main
sys.exit(main(sys.argv[1:]))
"""
# 2x the instructions: the C kernel built from a copy of csrc/ whose row loop runs every row's vector steps twice
# (a second pass that reads from L1, so R barely moves while the work doubles), in a cache of its own, then the CLI
MARKER = "      const int64_t j = INTER ? VINTER("
PLANT_WORK = r"""
import os, pathlib, shutil, sys, tempfile
import harness.rope.cpu as cpu
MARKER = @MARKER@
tmp = pathlib.Path(tempfile.mkdtemp(prefix="gate-plant-"))
shutil.copytree(cpu.CSRC, tmp / "csrc")
body = tmp / "csrc" / "rope_body.h"
text = body.read_text()
if MARKER not in text:
    sys.exit("the plant's marker is gone from rope_body.h; update harness/bench/gate_support.py")
again = "      (void)(INTER ? VINTER(TAG, xk, yk, cr, sr, half, NEG, STREAM) : VHALF(TAG, xk, yk, cr, sr, half, NEG, STREAM)); \\\n"
body.write_text(text.replace(MARKER, again + MARKER, 1))
cpu.CSRC = tmp / "csrc"
os.environ["HARNESS_CACHE"] = str(tmp / "cache")
from harness.bench.kernel_bench import main
code = main(sys.argv[1:])
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(code)
""".replace("@MARKER@", repr(MARKER))

__all__ = ["BASELINE", "ENV", "KEY", "PLANT", "PLANT_WORK", "ROOT", "gate"]


def gate(*code, keys=None):
    """The finished `check` child run by `python *code` against the committed baseline (5 runs of each key): keys,
    by default KEY alone; "all": the keys `make bench-check` checks."""
    args = ["check", "--baseline", str(ROOT / BASELINE), "--runs", "5",
            *([] if keys == "all" else ["--keys", *(keys or [KEY])])]
    return subprocess.run([sys.executable, *code, *args], cwd=ROOT, env=ENV, capture_output=True, text=True)
