"""python -m harness.conformance: run a third-party RoPE against the golden data (see __init__.py)."""
import argparse
import dataclasses
import math
import sys
import textwrap
import time

from harness.conformance import arrays, golden, isolate, libraries, run, usage, usage_worker
from harness.conformance import conventions as C
from harness.conformance.cases import ROPE_TYPES
from harness.conformance.tolerance import TORCH_DTYPES
from harness.rope.rotation import LAYOUTS


def _fail(msg):
    print(f"harness.conformance: error: {' '.join(str(msg).split())}", file=sys.stderr)
    return 2


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every other refusal here."""

    def error(self, message):
        print(f"{self.prog.removeprefix('python -m ')}: error: {message}; see --help", file=sys.stderr)
        raise SystemExit(2)


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help lines wrapped at spaces only: a choice such as 'cos-sin' or 'transformers-deepseek-v3' stays whole."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _parser():
    # the adapter contract (what each --convention's function receives and returns; NotImplementedError = skip) is
    # conventions.py's docstring, printed as the help's epilog so that --help and the code say it once
    ap = _Parser(prog="python -m harness.conformance", description=__doc__, formatter_class=_Help,
                 epilog="The adapter contract (harness/conformance/conventions.py):\n" + C.__doc__
                 + "\nThe usage cases (--usage; harness/conformance/usage.py):\n" + usage.__doc__)
    ap.add_argument("--apply", help="pkg.module:function, the rotation under test")
    ap.add_argument("--library", metavar="NAME",
                    help=f"a shipped adapter instead of --apply (it sets the call flags): one of "
                         f"{list(libraries.LIBRARIES)}; `--library list` says which are installed, their "
                         f"rope_types and options")
    ap.add_argument("--frequencies", help="pkg.module:mapping of rope_type -> inv_freq function (HF's or ours)")
    ap.add_argument("--convention", help=f"one of {list(C.CONVENTIONS)}; default hf (conventions.py)")
    ap.add_argument("--layout", help=f"pairing, one of {list(LAYOUTS)}; default the convention's own "
                                     f"(complex: interleaved, else half)")
    ap.add_argument("--qk-layout", help=f"q, k shape, one of {list(C.QK_LAYOUTS)}; default bhsd (complex: bshd)")
    ap.add_argument("--width", help=f"cos/sin width (hf, x_cos_sin), one of {list(C.WIDTHS)}; default hf full, "
                                    f"x_cos_sin half")
    ap.add_argument("--order", help=f"cos/sin argument order (hf, x_cos_sin), one of {list(C.ORDERS)}; "
                                    f"default cos-sin")
    ap.add_argument("--compare", help=f"one of {list(C.COMPARES)}; logits judges only q'(m).k'(n), for code "
                                      f"returning a permuted basis; default outputs")
    ap.add_argument("--positions", help=f"(positions convention) one of {list(C.POSITION_MODES)}; auto: every "
                                        f"position 0..L-1 for {list(C.LENGTH_DEPENDENT)}, else sampled")
    ap.add_argument("--array", help=f"array kind handed over, one of {list(arrays.ARRAYS)}; default torch")
    ap.add_argument("--dtype", default="fp32", help=f"one of {list(TORCH_DTYPES)}; default fp32")
    ap.add_argument("--rope-type", help=f"comma-separated subset of {list(ROPE_TYPES)}")
    ap.add_argument("--timeout", default=str(isolate.TIMEOUT_S), metavar="S",
                    help=f"seconds one case may take before it is a FAIL (default {isolate.TIMEOUT_S:g}); "
                         f"importing --apply may take this or {isolate.IMPORT_MIN_S:g} s, the longer")
    ap.add_argument("--usage", nargs="?", const=",".join(usage.KINDS), metavar="KINDS",
                    help=f"after the golden cases, the usage cases: comma-separated subset of {list(usage.KINDS)} "
                         f"(all when given bare): a module cast after it is built (needs --build or a library's "
                         f"build hook; --dtype bf16 or fp16), instances of other bases and factors in one process, "
                         f"decoding one position at a time; --convention positions only")
    ap.add_argument("--build", metavar="pkg.module:fn",
                    help="(--usage cast) fn(rope) -> a torch.nn.Module holding the code's own module(s), "
                         "forward(q, k, positions) -> (q', k') called as --apply is; --library sets it where the "
                         "adapter has one")
    ap.add_argument("--generate", action="store_true", help="regenerate the golden file and exit")
    return ap


FLAGS = ("convention", "layout", "qk_layout", "width", "order", "compare", "positions", "array")


def main(argv=None):
    a = _parser().parse_args(argv)
    flags = {n: getattr(a, n) for n in FLAGS}
    if a.generate:
        given = [f for f, v in (("--apply", a.apply), ("--library", a.library), ("--frequencies", a.frequencies),
                                ("--rope-type", a.rope_type), ("--usage", a.usage), ("--build", a.build),
                                *(("--" + n.replace("_", "-"), v)
                                                                for n, v in flags.items())) if v is not None]
        if given:
            return _fail(f"--generate rewrites the golden file and runs nothing; drop {given}")
        t = time.perf_counter()
        path, size = golden.write()
        print(f"wrote {path} ({size / 1024:.0f} KB) in {time.perf_counter() - t:.1f} s")
        return 0
    if a.library == "list":
        print(libraries.listing())
        return 0
    if a.library is not None:
        if a.apply is not None:
            return _fail("give --apply or --library, not both")
        if a.library not in libraries.LIBRARIES:
            return _fail(f"unknown --library {a.library!r}; choose one of {list(libraries.LIBRARIES)} (or list)")
        lib = libraries.LIBRARIES[a.library]
        why = libraries.missing(lib)
        if why:
            return _fail(f"--library {a.library}: {why}")
        a.apply = lib.apply
        a.build = a.build or lib.build or None
        flags = {**lib.calling, **{n: v for n, v in flags.items() if v is not None}}
    if not a.apply:
        return _fail("--apply pkg.module:function or --library NAME is required (or --generate)")
    if a.dtype not in TORCH_DTYPES:
        return _fail(f"unknown --dtype {a.dtype!r}; choose one of {list(TORCH_DTYPES)}")
    try:
        calling = C.Calling(**{n: v for n, v in flags.items() if v is not None})
        arrays.check(calling.array, TORCH_DTYPES[a.dtype])
    except ValueError as e:
        return _fail(str(e))
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
    kinds = [k.strip() for k in a.usage.split(",")] if a.usage is not None else []
    if sorted(set(kinds) - set(usage.KINDS)):
        return _fail(f"unknown --usage {sorted(set(kinds) - set(usage.KINDS))}; choose from {list(usage.KINDS)}")
    for flag, spec in (("--apply", a.apply), ("--frequencies", a.frequencies), ("--build", a.build)):
        if spec is not None and (spec.count(":") != 1 or not all(spec.split(":"))):
            return _fail(f"{flag} {spec!r}: expected pkg.module:function")
    try:
        spec = dict(apply=a.apply, frequencies=a.frequencies, calling=dataclasses.asdict(calling), dtype=a.dtype,
                    rope_types=types)
        t = time.perf_counter()
        # the code under test runs in a worker process, each case with a time limit (isolate.py); a missing or
        # stale golden file is bad input too (read before the worker starts)
        rows, _ = isolate.run(spec, echo=lambda m: print(m, file=sys.stderr, flush=True), timeout=timeout)
        if kinds:  # the usage cases in a worker of their own (usage_worker.py), judged here
            have = list(libraries.LIBRARIES[a.library].rope_types) if a.library else list(ROPE_TYPES)
            more, _ = usage_worker.run({**spec, "build": a.build, "kinds": kinds, "types": have}, calling, timeout,
                                       echo=lambda m: print(m, file=sys.stderr, flush=True))
            rows += more
    except ValueError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        print("harness.conformance: interrupted; no verdict", file=sys.stderr)
        return 130
    print(run.table(rows))
    how = ", ".join(str(v) for v in dataclasses.asdict(calling).values())
    print(f"{a.library or a.apply} [{how}, {a.dtype}]: {run.summary(rows)} in {time.perf_counter() - t:.1f} s")
    if not any(r["result"] in ("pass", "FAIL", "error") for r in rows):
        print("harness.conformance: no verdict: every check was skipped, which is not a pass", file=sys.stderr)
    return 0 if run.ok(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
