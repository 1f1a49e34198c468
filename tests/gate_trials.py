"""How often the kernel-speed gate passes an unchanged tree and catches a 2x slowdown: N runs of each.

  python -m tests.gate_trials --n 20 [--keys cpu/fwd/half/float32/prefill ...]

Each trial is a fresh `python -m harness.measure.kernel_bench check` process (as `make bench-check` runs it);
a planted trial wraps harness.rope.cpu.launch to run its kernel twice (tests/test_bench_gate.py's PLANT).
Prints one line per trial and the two counts; not part of make test (minutes)."""
import argparse
import re
import sys

from tests.test_bench_gate import PLANT, _gate


def trial(planted, keys=None):
    """(exit code, {key: best R}) of one gate run."""
    run = _gate(*(("-c", PLANT) if planted else ("-m", "harness.measure.kernel_bench")), keys=keys)
    best = dict(re.findall(r"^(\S+)\s+R best ([0-9.]+)", run.stdout, re.M))
    runs = dict(re.findall(r"^(\S+)\s+R best .* runs ([0-9. ]+)$", run.stdout, re.M))
    return run.returncode, best, runs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--keys", nargs="*", help="baseline keys (default: the planted kernel's key)")
    a = ap.parse_args(argv)
    counts = {}
    for planted in (False, True):
        for i in range(a.n):
            code, best, runs = trial(planted, a.keys)
            counts[planted] = counts.get(planted, 0) + (code == 0)
            print(f"{'2x slower' if planted else 'unchanged'} {i + 1:3d}: exit {code}  " +
                  "  ".join(f"{k} {v} (runs {runs.get(k, '?')})" for k, v in best.items()), flush=True)
    print(f"unchanged passed {counts[False]}/{a.n}; 2x slower passed {counts[True]}/{a.n} (should be 0)")
    return 0 if counts[False] == a.n and counts[True] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
