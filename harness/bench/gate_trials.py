"""How often the kernel-speed gate passes an unchanged tree and catches planted regressions: N runs of each.

  python -m harness.bench.gate_trials --n 20 [--keys cpu/fwd/half/float32/prefill ... | --keys all] [--busy 2]
  python -m harness.bench.gate_trials --estimate "AMD EPYC avx2"   # no runs: R's pass rates the committed trials imply

Each trial is a fresh `python -m harness.bench.kernel_bench check` process (as `make bench-check` runs it);
a planted trial runs harness/bench/gate_support.py's PLANT (launch wrapped to run its kernel twice: 2x slower) or PLANT_WORK
(the C kernel rebuilt to run every row's vector steps twice: 2x the instructions). --busy K keeps K
`python -c "while 1: pass"` processes running throughout (two on a two-core machine: both cores busy).
Prints one line per trial and the counts; not part of make test (minutes)."""
import argparse
import json
import math
import re
import subprocess
import sys

import numpy as np
import scipy.stats

from harness.bench.kernel_gate import floors
from harness.bench.gate_support import BASELINE, PLANT, PLANT_WORK, ROOT, gate

PLANTS = {"unchanged": None, "2x slower": PLANT, "2x instructions": PLANT_WORK}


def trial(plant, keys=None):
    """(exit code, {key: best R}, {key: runs}, failure lines) of one gate run; plant: None or a child's code."""
    run = gate(*(("-c", plant) if plant else ("-m", "harness.bench.kernel_bench")), keys=keys)
    best = dict(re.findall(r"^(\S+)\s+R best ([0-9.]+)", run.stdout, re.M))
    runs = dict(re.findall(r"^(\S+)\s+R best .* runs ([0-9. ]+)$", run.stdout, re.M))
    return run.returncode, best, runs, re.findall(r"^KERNEL SPEED REGRESSION (.*)$", run.stdout, re.M)


def estimate(doc, machine):
    """{key: (n, mean, sd, floor, P(unchanged fails), P(2x slower passes))} from the trial samples of the machine
    entry whose name contains `machine`. Each key's best-of-runs R is modelled as normal with the samples' mean and
    sd; a new trial is predicted by Student's t with n - 1 degrees of freedom and scale sd * sqrt(1 + 1/n) (the
    samples' own uncertainty included). A 2x slower kernel measures R / 2: mean / 2, sd / 2."""
    names = [m for m in doc["machines"] if machine in m]
    if len(names) != 1:
        raise ValueError(f"--estimate {machine!r} must name exactly one machine entry; entries: "
                         f"{list(doc['machines'])}")
    floor, out = floors(doc), {}
    for key, xs in doc["machines"][names[0]].items():
        x = np.asarray(xs, dtype=float)
        if len(x) < 3:
            continue
        n, mean, sd = len(x), float(x.mean()), float(x.std(ddof=1))
        pred = scipy.stats.t(df=n - 1, loc=mean, scale=sd * math.sqrt(1 + 1 / n))
        slow = scipy.stats.t(df=n - 1, loc=mean / 2, scale=sd / 2 * math.sqrt(1 + 1 / n))
        out[key] = (n, mean, sd, floor[key], float(pred.cdf(floor[key])), float(slow.sf(floor[key])))
    return out


def print_estimate(machine):
    with open(ROOT / BASELINE) as f:
        est = estimate(json.load(f), machine)
    p_pass = 1.0
    for key, (n, mean, sd, fl, fail, slow) in est.items():
        p_pass *= 1 - fail
        print(f"{key}: n {n}  R {mean:.3f} sd {sd:.3f}  floor {fl:.3f}  P(unchanged fails) {fail:.1e}  "
              f"P(2x slower passes R's floor) {slow:.1e}")
    print(f"P(an unchanged tree passes every key) = {p_pass:.6f} (keys independent; per 100 runs: "
          f"{100 * p_pass:.2f} expected passes)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="unchanged trials")
    ap.add_argument("--n-planted", type=int, help="trials of each plant (default: --n)")
    ap.add_argument("--keys", nargs="*", help="baseline keys, or 'all': as make bench-check (default: the "
                                              "planted kernel's key)")
    ap.add_argument("--busy", type=int, default=0, help="busy-loop processes to keep running during the trials")
    ap.add_argument("--estimate", metavar="MACHINE", help="print the pass rates implied by the committed trial "
                                                          "samples of this machine entry, run nothing")
    a = ap.parse_args(argv)
    if a.estimate:
        print_estimate(a.estimate)
        return 0
    keys = "all" if a.keys == ["all"] else a.keys
    total = {name: a.n if plant is None or a.n_planted is None else a.n_planted for name, plant in PLANTS.items()}
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(a.busy)]
    passed = {}
    try:
        for name, plant in PLANTS.items():
            for i in range(total[name]):
                code, best, runs, failed = trial(plant, keys)
                passed[name] = passed.get(name, 0) + (code == 0)
                print(f"{name} {i + 1:3d}: exit {code}  " +
                      "  ".join(f"{k} {v} (runs {runs.get(k, '?')})" for k, v in best.items()) +
                      "".join(f"\n    {line}" for line in failed), flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print("; ".join(f"{name} passed {passed.get(name, 0)}/{total[name]}" for name in PLANTS) +
          f" (planted should be 0){f'; {a.busy} busy loops running' if a.busy else ''}")
    return 0 if passed.get("unchanged", 0) == total["unchanged"] and not any(
        passed.get(name, 0) for name, plant in PLANTS.items() if plant) else 1


if __name__ == "__main__":
    sys.exit(main())
