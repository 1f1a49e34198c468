"""CLI: `python -m harness.claims [--sweeps DIR] [--out DIR] [--only 3 7]`. With --only the table is
printed, and claims.md is left as it is (it always holds every claim)."""
import argparse
import time

from harness.claims import header, run, write


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.claims", description=__doc__)
    ap.add_argument("--sweeps", default="results/sweeps", help="dir holding sweeps default, base_ablation, claims")
    ap.add_argument("--out", default="results/claims", help="where claims.md and the plots go")
    ap.add_argument("--only", type=int, nargs="*", help="claim ids to run (default: all)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    rows, ctx = run(args.sweeps, args.out, only=set(args.only or ()))
    if args.only:
        for claim, ev, v, reason in rows:
            print(f"\n{claim.id}. {claim.text}\n   evidence: {ev.summary}\n   verdict: {v}: {reason}")
        return
    print(f"wrote {write(rows, args.out, header(ctx, time.perf_counter() - t))}")


if __name__ == "__main__":
    main()
