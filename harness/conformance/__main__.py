"""python -m harness.conformance: run a third-party RoPE against the golden data (see __init__.py)."""
import argparse
import sys
import time

from harness.conformance import adapters, golden, run
from harness.conformance.cases import ROPE_TYPES
from harness.conformance.tolerance import TORCH_DTYPES
from harness.rope.rotation import LAYOUTS

NATURAL_LAYOUT = {"hf": "half", "x_cos_sin": "half", "complex": "interleaved", "positions": "half"}


def _fail(msg):
    print(f"harness.conformance: error: {msg}", file=sys.stderr)
    return 2


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.conformance", description=__doc__)
    ap.add_argument("--apply", help="pkg.module:function, the rotation under test")
    ap.add_argument("--frequencies", help="pkg.module:mapping of rope_type -> inv_freq function (HF's or ours)")
    ap.add_argument("--layout", help=f"one of {list(LAYOUTS)}; default: the convention's own")
    ap.add_argument("--dtype", default="fp32", help=f"one of {list(TORCH_DTYPES)}")
    ap.add_argument("--convention", default="hf", help=f"one of {list(adapters.CONVENTIONS)}")
    ap.add_argument("--rope-type", help=f"comma-separated subset of {list(ROPE_TYPES)}")
    ap.add_argument("--generate", action="store_true", help="regenerate the golden file and exit")
    a = ap.parse_args(argv)
    if a.generate:
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
    types = a.rope_type.split(",") if a.rope_type else None
    bad = sorted(set(types or ()) - set(ROPE_TYPES))
    if bad:
        return _fail(f"unknown --rope-type {bad}; choose from {list(ROPE_TYPES)}")
    try:
        fn = adapters.resolve(a.apply, "--apply")
        adapters.check_signature(fn, a.convention, a.apply)
        freq = adapters.resolve(a.frequencies, "--frequencies") if a.frequencies else None
        if freq is not None and not (callable(freq) or hasattr(freq, "keys")):
            raise ValueError(f"--frequencies {a.frequencies!r} is neither a function nor a mapping of them")
        golden.load()  # a missing or stale golden file is bad input too
    except ValueError as e:
        return _fail(str(e))
    t = time.perf_counter()
    rows, _ = run.run(fn, a.convention, layout, a.dtype, freq, types, echo=lambda m: print(m, file=sys.stderr))
    print(run.table(rows))
    print(f"{a.apply} [{a.convention}, {layout}, {a.dtype}]: {run.summary(rows)} "
          f"in {time.perf_counter() - t:.1f} s")
    return 0 if run.ok(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
