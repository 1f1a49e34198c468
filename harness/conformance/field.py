"""The suite on every shipped adapter whose library imports here: pass / FAIL / error / skip per dtype.

    python -m harness.conformance.field [--dtypes fp32,bf16,fp16] [--libraries a,b] [--jobs 2]
                                        [--out results/conformance/field.md] [--cache DIR]

Each (library, dtype) runs as the CLI does with --usage (isolate.run: a worker process, --timeout per case; then the
usage cases, cast, shared state and decode, in a worker of their own: usage.py), --jobs of them at once. --out replaces the block between the FIELD markers of that file (the
hand-written analysis around it stays), rewritten as each run finishes. Each finished run is kept in --cache
(default: <out>.cache/ beside --out), keyed by the library's version, the dtype, the golden file and the suite's
own code, so a run stopped midway resumes where it was: a run whose key matches is read back, not run again.
Exit 0 when every run passed, 1 when one has a FAIL or error (a library's real bug is a FAIL here too), 2 on bad
arguments.
"""
import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import pathlib
import sys
import threading

from harness.conformance import conventions as C
from harness.conformance import golden, isolate, libraries, usage, usage_worker
from harness.conformance.tolerance import TORCH_DTYPES

BEGIN, END = "<!-- FIELD:BEGIN (python -m harness.conformance.field) -->", "<!-- FIELD:END -->"


def _key(name, lib, dtype):
    """What a cached run must match: the library's version, the dtype, the golden data and the suite's code."""
    h = hashlib.sha256(f"{name}|{libraries.version(lib)}|{dtype}".encode())
    here = pathlib.Path(__file__).parent
    for f in [golden.PATH, *sorted(here.rglob("*.py"))]:
        h.update(pathlib.Path(f).read_bytes())
    return h.hexdigest()[:16]


def _one(name, lib, dtype, cache):
    """(library, version, dtype, counts, failing rows, cached?) of one run, read from cache when its key matches."""
    key = _key(name, lib, dtype)
    kept = cache / f"{name}-{dtype}.json" if cache else None
    if kept and kept.exists():
        rec = json.loads(kept.read_text())
        if rec.get("key") == key:
            return (name, rec["version"], dtype, rec["counts"], rec["failing"], True)
    spec = dict(apply=lib.apply, frequencies=None, calling=dataclasses.asdict(C.Calling(**lib.calling)),
                dtype=dtype, rope_types=None)
    rows, _ = isolate.run(spec)
    more, _ = usage_worker.run({**spec, "build": lib.build or None, "kinds": list(usage.KINDS),
                                "types": list(lib.rope_types)}, C.Calling(**lib.calling), isolate.TIMEOUT_S)
    rows += more
    golden_rows = [r for r in rows if not r["case"].startswith("usage:")]
    counts = {s: sum(r["result"] == s for r in golden_rows) for s in ("pass", "FAIL", "error", "skip")}
    counts["worst"] = max((r["ratio"] for r in golden_rows if r["result"] == "pass"), default=float("nan"))
    counts["usage"] = {kind: _verdict([r for r in rows if r["case"].startswith(f"usage:{kind}")])
                       for kind in usage.KINDS}
    failing = [r for r in rows if r["result"] in ("FAIL", "error")]
    out = (name, libraries.version(lib), dtype, counts, failing, False)
    if kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(key=key, version=out[1], counts=counts, failing=failing)))
        tmp.replace(kept)  # whole or absent: a run stopped mid-write is run again
    return out


def field(names, dtypes, echo=print, jobs=1, cache=None, done_cb=None):
    """[(library, version, dtype, counts, failing rows)] for the installed libraries among names, in names x dtypes
    order; and the rest [(library, why not)]. jobs runs at once; cache: a dir of finished runs (resume);
    done_cb(done so far) after each run."""
    absent, todo = [], []
    for name in names:
        lib = libraries.LIBRARIES[name]
        why = libraries.missing(lib)
        if why:
            absent.append((name, why))
        else:
            todo += [(name, lib, dtype) for dtype in dtypes]
    results, lock = {}, threading.Lock()

    def finish(res):
        with lock:
            results[(res[0], res[2])] = res[:5]
            echo(f"{res[0]} {res[2]}: {_summary(res[3])}{' (cached)' if res[5] else ''}")
            if done_cb:
                done_cb([results[(n, d)] for n, _, d in todo if (n, d) in results], absent)
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
        for f in concurrent.futures.as_completed([ex.submit(_one, *job, cache) for job in todo]):
            finish(f.result())
    return [results[(n, d)] for n, _, d in todo], absent


def _verdict(rows):
    """One word for a usage kind's checks: FAIL or error if any is, else pass if any is, else skip."""
    got = {r["result"] for r in rows}
    return next((s for s in ("FAIL", "error", "pass") if s in got), "skip")


def _summary(c):
    return ", ".join(f"{c[s]} {s}" for s in ("pass", "FAIL", "error", "skip")) + \
        f" of {sum(c[s] for s in ('pass', 'FAIL', 'error', 'skip'))} checks"


def markdown(done, absent):
    lines = ["| library | version | dtype | pass | FAIL | error | skip | worst err/tol of the passes | "
             f"{' / '.join(usage.KINDS)} | failing checks: bug class |", "|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    for name, ver, dtype, c, bad in done:
        classes = sorted({r["bug"].split(";")[0].split(" (")[0] for r in bad})
        what = "; ".join(f"{sum(r['bug'].startswith(k) for r in bad)}: {k}" for k in classes)
        lines.append(f"| {name} | {ver} | {dtype} | {c['pass']} | {c['FAIL']} | {c['error']} | {c['skip']} | "
                     f"{'-' if c['worst'] != c['worst'] else format(c['worst'], '.2g')} | "
                     f"{' / '.join(c.get('usage', {}).get(k, '-') for k in usage.KINDS)} | {what} |")
    lines += ["", "Not run here:", ""] + [f"- {name}: {why}" for name, why in absent] if absent else []
    return "\n".join(lines)


def _write(path, table):
    """Replace the FIELD block of path with table (the text around it stays)."""
    text = path.read_text() if path.exists() else f"{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    path.write_text(f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.conformance.field", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="fp32,bf16,fp16", help=f"comma-separated subset of {list(TORCH_DTYPES)}")
    ap.add_argument("--libraries", help=f"comma-separated subset of {list(libraries.LIBRARIES)}; default all")
    ap.add_argument("--jobs", default="2", help="runs at once (default 2: one per core of a laptop)")
    ap.add_argument("--out", help="a markdown file whose FIELD block is replaced with the table")
    ap.add_argument("--cache", help="a dir of finished runs to resume from (default <out>.cache/ with --out)")
    a = ap.parse_args(argv)
    dtypes = a.dtypes.split(",")
    names = a.libraries.split(",") if a.libraries else list(libraries.LIBRARIES)
    bad = sorted(set(dtypes) - set(TORCH_DTYPES)) + sorted(set(names) - set(libraries.LIBRARIES))
    if bad or not a.jobs.isdigit() or int(a.jobs) < 1:
        what = f"unknown {bad}" if bad else f"--jobs {a.jobs!r}: give a whole number >= 1"
        print(f"harness.conformance.field: error: {what}; dtypes {list(TORCH_DTYPES)}, libraries "
              f"{list(libraries.LIBRARIES)}", file=sys.stderr)
        return 2
    out = pathlib.Path(a.out) if a.out else None
    cache = pathlib.Path(a.cache) if a.cache else (out.with_name(out.name + ".cache") if out else None)
    done, absent = field(names, dtypes, echo=lambda m: print(m, file=sys.stderr, flush=True), jobs=int(a.jobs),
                         cache=cache, done_cb=(lambda d, ab: _write(out, markdown(d, ab))) if out else None)
    table = markdown(done, absent)
    print(table)
    if out:
        _write(out, table)
    if not done:
        print("harness.conformance.field: no library is installed here; no verdict", file=sys.stderr)
        return 1
    return 0 if all(not bad for *_, bad in done) else 1


if __name__ == "__main__":
    sys.exit(main())
