"""python -m harness.conformance: run a third-party RoPE against the golden data (see __init__.py)."""
import argparse
import math
import sys
import time

from harness.conformance import adapters, golden, isolate, run
from harness.conformance.cases import ROPE_TYPES
from harness.conformance.tolerance import TORCH_DTYPES
from harness.rope.rotation import LAYOUTS

NATURAL_LAYOUT = {"hf": "half", "x_cos_sin": "half", "complex": "interleaved", "positions": "half"}


def _fail(msg):
    print(f"harness.conformance: error: {' '.join(str(msg).split())}", file=sys.stderr)
    return 2


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every other refusal here."""

    def error(self, message):
        print(f"{self.prog.removeprefix('python -m ')}: error: {message}; see --help", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None):
    ap = _Parser(prog="python -m harness.conformance", description=__doc__)
    ap.add_argument("--apply", help="pkg.module:function, the rotation under test")
    ap.add_argument("--frequencies", help="pkg.module:mapping of rope_type -> inv_freq function (HF's or ours)")
    ap.add_argument("--layout", help=f"one of {list(LAYOUTS)}; default: the convention's own")
    ap.add_argument("--dtype", default="fp32", help=f"one of {list(TORCH_DTYPES)}")
    ap.add_argument("--convention", default="hf", help=f"one of {list(adapters.CONVENTIONS)}")
    ap.add_argument("--rope-type", help=f"comma-separated subset of {list(ROPE_TYPES)}")
    ap.add_argument("--timeout", default=str(isolate.TIMEOUT_S), metavar="S",
                    help=f"seconds one case may take before it is a FAIL (default {isolate.TIMEOUT_S:g}); "
                         f"importing --apply may take this or {isolate.IMPORT_MIN_S:g} s, the longer")
    ap.add_argument("--generate", action="store_true", help="regenerate the golden file and exit")
    a = ap.parse_args(argv)
    if a.generate:
        given = [f for f, v in (("--apply", a.apply), ("--frequencies", a.frequencies), ("--layout", a.layout),
                                ("--rope-type", a.rope_type)) if v is not None]
        if given:
            return _fail(f"--generate rewrites the golden file and runs nothing; drop {given}")
        t = time.perf_counter()
        path, size = golden.write()
        print(f"wrote {path} ({size / 1024:.0f} KB) in {time.perf_counter() - t:.1f} s")
        return 0
    if not a.apply:
        return _fail("--apply pkg.module:function is required (or --generate)")
    if a.convention not in adapters.CONVENTIONS:
        return _fail(f"unknown --convention {a.convention!r}; choose one of {list(adapters.CONVENTIONS)}")
    layout = a.layout or NATURAL_LAYOUT[a.convention]
    if layout not in LAYOUTS:
        return _fail(f"unknown --layout {layout!r}; choose one of {list(LAYOUTS)}")
    if a.convention == "complex" and layout != "interleaved":
        return _fail("--convention complex pairs (2j, 2j+1) by construction; it needs --layout interleaved")
    if a.dtype not in TORCH_DTYPES:
        return _fail(f"unknown --dtype {a.dtype!r}; choose one of {list(TORCH_DTYPES)}")
    types = [t.strip() for t in a.rope_type.split(",")] if a.rope_type is not None else None
    bad = sorted(set(types or ()) - set(ROPE_TYPES))
    if bad:
        return _fail(f"unknown --rope-type {bad}; choose from {list(ROPE_TYPES)}")
    try:
        timeout = float(a.timeout)
    except ValueError:
        timeout = math.nan
    if not (math.isfinite(timeout) and timeout > 0):
        return _fail(f"--timeout {a.timeout!r}: give the seconds one case may take, a number > 0")
    for flag, spec in (("--apply", a.apply), ("--frequencies", a.frequencies)):
        if spec is not None and (spec.count(":") != 1 or not all(spec.split(":"))):
            return _fail(f"{flag} {spec!r}: expected pkg.module:function")
    try:
        spec = dict(apply=a.apply, frequencies=a.frequencies, convention=a.convention, layout=layout,
                    dtype=a.dtype, rope_types=types)
        t = time.perf_counter()
        # the code under test runs in a worker process, each case with a time limit (isolate.py); a missing or
        # stale golden file is bad input too (read before the worker starts)
        rows, _ = isolate.run(spec, echo=lambda m: print(m, file=sys.stderr, flush=True), timeout=timeout)
    except ValueError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        print("harness.conformance: interrupted; no verdict", file=sys.stderr)
        return 130
    print(run.table(rows))
    print(f"{a.apply} [{a.convention}, {layout}, {a.dtype}]: {run.summary(rows)} "
          f"in {time.perf_counter() - t:.1f} s")
    if not any(r["result"] in ("pass", "FAIL", "error") for r in rows):
        print("harness.conformance: no verdict: every check was skipped, which is not a pass", file=sys.stderr)
    return 0 if run.ok(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
