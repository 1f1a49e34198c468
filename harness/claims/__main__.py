"""CLI: `python -m harness.claims [--sweeps DIR] [--out DIR] [--only 3 7]`. With --only the table is
printed, and claims.md is left as it is (it always holds every claim)."""
import argparse
import sys
import time
from pathlib import Path

from harness import results
from harness.claims import header, run, select, write


def unreadable_checkpoint(sweeps):
    """The first checkpoint under `sweeps` that does not read back whole (results.checkpoint_problem), as one
    line naming it and what to do, or None. The trained claims load checkpoints as they go: a damaged one is
    said here, before any claim is measured."""
    root = Path(sweeps)
    for path in sorted(root.rglob(results.CHECKPOINT)) if root.is_dir() else []:
        problem, _ = results.checkpoint_problem(path)
        if problem:
            return (f"{problem}: rerun its sweep, which computes that run again (or move the run dir away), then "
                    f"make claims")
    return None


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, as every other refusal of this CLI."""

    def error(self, message):
        print(f"harness.claims: error: {message}; see --help", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None):
    ap = _Parser(prog="python -m harness.claims", description=__doc__)
    ap.add_argument("--sweeps", default="results/sweeps",
                    help="dir holding sweeps default, base_ablation, claims, prope, content; the checkout's results/: "
                         "the committed runs only (how results/claims/claims.md is made)")
    ap.add_argument("--out", default="results/claims", help="where claims.md and the plots go")
    ap.add_argument("--only", nargs="+", metavar="N", help="claim numbers to run (default: all)")
    args = ap.parse_args(argv)
    try:
        only = select(args.only)  # before any work: unknown numbers and non-integers, naming the valid range
    except ValueError as e:
        print(f"harness.claims: error: {e}", file=sys.stderr)
        return 2
    if not Path(args.sweeps).is_dir():  # else every trained claim reads "not measured", as if no sweep had run
        print(f"harness.claims: error: --sweeps {args.sweeps} is not a directory; give the dir holding the sweeps "
              f"(default results/sweeps)", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # found before the claims run, not when claims.md is written at the end
        print(f"harness.claims: error: --out {out} is a file, not a directory; give a directory for claims.md and its "
              f"plots", file=sys.stderr)
        return 2
    bad = unreadable_checkpoint(args.sweeps)
    if bad:
        print(f"harness.claims: error: {bad}", file=sys.stderr)
        sys.exit(2)
    t = time.perf_counter()
    rows, ctx = run(args.sweeps, args.out, only=only)
    if only:
        for claim, ev, v, reason in rows:
            print(f"\n{claim.id}. {claim.text}\n   evidence: {ev.summary}\n   verdict: {v}: {reason}")
        return
    print(f"wrote {write(rows, args.out, header(ctx, time.perf_counter() - t))}")


if __name__ == "__main__":
    sys.exit(main())
