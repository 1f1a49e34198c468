"""The suite on every shipped adapter whose library imports here: pass / FAIL / error / skip per dtype.

    python -m harness.conformance.field [--dtypes fp32,bf16,fp16] [--libraries a,b] [--out results/conformance/field.md]

Each (library, dtype) runs as the CLI does (isolate.run: a worker process, --timeout per case). --out replaces
the block between the FIELD markers of that file (the hand-written analysis around it stays). Exit 0 when every
run passed, 1 when one has a FAIL or error (a library's real bug is a FAIL here too), 2 on bad arguments.
"""
import argparse
import dataclasses
import pathlib
import sys

from harness.conformance import conventions as C
from harness.conformance import isolate, libraries, run
from harness.conformance.tolerance import TORCH_DTYPES

BEGIN, END = "<!-- FIELD:BEGIN (python -m harness.conformance.field) -->", "<!-- FIELD:END -->"


def field(names, dtypes, echo=print):
    """[(library, version, dtype, counts, failing rows)] for the installed libraries among names; and the rest
    [(library, why not)]."""
    done, absent = [], []
    for name in names:
        lib = libraries.LIBRARIES[name]
        why = libraries.missing(lib)
        if why:
            absent.append((name, why))
            continue
        for dtype in dtypes:
            spec = dict(apply=lib.apply, frequencies=None, calling=dataclasses.asdict(C.Calling(**lib.calling)),
                        dtype=dtype, rope_types=None)
            rows, _ = isolate.run(spec)
            counts = {s: sum(r["result"] == s for r in rows) for s in ("pass", "FAIL", "error", "skip")}
            counts["worst"] = max((r["ratio"] for r in rows if r["result"] == "pass"), default=float("nan"))
            echo(f"{name} {dtype}: {run.summary(rows)}")
            done.append((name, libraries.version(lib), dtype, counts,
                         [r for r in rows if r["result"] in ("FAIL", "error")]))
    return done, absent


def markdown(done, absent):
    lines = ["| library | version | dtype | pass | FAIL | error | skip | worst err/tol of the passes | failing cases: "
             "bug class |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for name, ver, dtype, c, bad in done:
        classes = sorted({r["bug"].split(";")[0].split(" (")[0] for r in bad})
        what = "; ".join(f"{sum(r['bug'].startswith(k) for r in bad)}: {k}" for k in classes)
        lines.append(f"| {name} | {ver} | {dtype} | {c['pass']} | {c['FAIL']} | {c['error']} | {c['skip']} | "
                     f"{'-' if c['worst'] != c['worst'] else format(c['worst'], '.2g')} | {what} |")
    lines += ["", "Not run here:", ""] + [f"- {name}: {why}" for name, why in absent] if absent else []
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.conformance.field", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="fp32,bf16,fp16", help=f"comma-separated subset of {list(TORCH_DTYPES)}")
    ap.add_argument("--libraries", help=f"comma-separated subset of {list(libraries.LIBRARIES)}; default all")
    ap.add_argument("--out", help="a markdown file whose FIELD block is replaced with the table")
    a = ap.parse_args(argv)
    dtypes = a.dtypes.split(",")
    names = a.libraries.split(",") if a.libraries else list(libraries.LIBRARIES)
    bad = sorted(set(dtypes) - set(TORCH_DTYPES)) + sorted(set(names) - set(libraries.LIBRARIES))
    if bad:
        print(f"harness.conformance.field: error: unknown {bad}; dtypes {list(TORCH_DTYPES)}, libraries "
              f"{list(libraries.LIBRARIES)}", file=sys.stderr)
        return 2
    done, absent = field(names, dtypes, echo=lambda m: print(m, file=sys.stderr, flush=True))
    table = markdown(done, absent)
    print(table)
    if a.out:
        path = pathlib.Path(a.out)
        text = path.read_text() if path.exists() else f"{BEGIN}\n{END}\n"
        if BEGIN not in text or END not in text:
            text += f"\n{BEGIN}\n{END}\n"
        head, rest = text.split(BEGIN, 1)
        path.write_text(f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}")
    if not done:
        print("harness.conformance.field: no library is installed here; no verdict", file=sys.stderr)
        return 1
    return 0 if all(not bad for *_, bad in done) else 1


if __name__ == "__main__":
    sys.exit(main())
