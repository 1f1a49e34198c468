"""Fault-injection battery: hostile-but-fair inputs and faults against the real CLI, as a markdown table.

`python -m tests.faults [--out results/faults.md] [-k substring] [-j N]` (`make faults`); exit 1 unless every
case is clean. Clean = the exit code wanted; no traceback on stderr or stdout; the message matches (bad input:
stderr is exactly that one line); no rows file that read before the case fails to read after it; the rows
count the case expects; nothing under the case's folder changed where it must not; the case's own checks.
The cases and their expectations are in tests/fault_cases.py (and tests/fault_cases_*.py; kit: tests/fault_kit.py)."""
import argparse
import concurrent.futures
import dataclasses
import datetime
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from tests.fault_cases import CASES, harness

ROOT = Path(__file__).resolve().parent.parent
TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog {i * 7 % 13}\n" for i in range(1500))
TRACEBACK = "Traceback (most recent call last)"
PROGRESS = re.compile(r"it/s|s/it|\|\s*\d+/\d+ \[")  # tqdm bars (split on \r they are one line per refresh)
TIMEOUT_S = 300


@dataclasses.dataclass
class Ctx:
    """Paths a case's arguments, setup and checks use; `tmp` is the case's own fresh folder."""
    tmp: Path
    corpus: Path
    short: Path  # a corpus whose held-out split is too short for long eval lengths
    env: dict
    root: Path = ROOT
    base: Path = None  # out= of the shared finished run
    run_name: str = ""
    base_rows: int = 0

    @property
    def out(self):
        return self.tmp / "out"

    @property
    def run(self):
        return self.out / "runs" / self.run_name

    @property
    def base_run(self):
        return self.base / "runs" / self.run_name

    def fmt(self, argv):
        names = dict(out=self.out, tmp=self.tmp, run=self.run, corpus=self.corpus, short=self.short)
        return [re.sub(r"\{(\w+)\}", lambda m: str(names[m.group(1)]), a) for a in argv]


@dataclasses.dataclass
class Proc:
    rc: int
    stdout: str
    stderr: str


def rows(path):
    """{rows file: row count, or None where it does not read}."""
    out = {}
    for f in sorted(Path(path).rglob("rows.parquet")):
        try:
            out[f] = pq.read_table(f).num_rows
        except Exception:  # noqa: BLE001 - any unreadable file counts as no rows
            out[f] = None
    return out


def _moved_aside(f, n):
    """True when a rerun moved rows file f (n rows) aside to rows.parquet.previous (harness.results.retire_rows):
    kept, not lost."""
    try:
        return pq.read_table(f.with_name(f.name + ".previous")).num_rows == n
    except Exception:  # noqa: BLE001 - missing or unreadable: not kept
        return False


def tree(path):
    """{relative path: sha256 of its bytes, '' for a folder} of everything under path."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
            for p in sorted(Path(path).rglob("*"))}


def execute(case, ctx):
    """Start the case's command (case.copies at once); their exit codes and output."""
    kw = dict(cwd=ROOT, env=ctx.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
              start_new_session=True, umask=-1 if case.umask is None else case.umask)
    procs = [subprocess.Popen([sys.executable, *ctx.fmt(case.argv)], **kw) for _ in range(case.copies)]
    done = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, err = p.communicate()
            err += f"\n(killed by the battery after {TIMEOUT_S}s)"
        done.append(Proc(p.returncode, out, err))
    return done


def lines(text):
    return [s for s in text.splitlines() if s.strip()]  # splitlines also splits tqdm's \r refreshes


def message(case, ctx, procs):
    """The line the case is judged on (bad input's one stderr line, else the first line matching), with
    the case's folder as <tmp> and run ids as <run>, so that the table shows what the line says."""
    every = [s for p in procs for s in lines(p.stdout if case.stream == "out" else p.stderr)]
    hit = [s for s in every if case.line and re.search(case.line, s)]
    rest = [s for s in every if not PROGRESS.search(s)]
    line = (hit or rest or [""])[0].strip().replace(str(ctx.tmp), "<tmp>")
    return re.sub(r"(?<=single/)[^\s:;()/]+|(?<=/runs/)[^\s:;()/]+", "<run>", line)


def judge(case, ctx, procs, before, after, tree_before):
    problems = [f"exit {p.rc}, want {case.rc}" for p in procs if p.rc != case.rc]
    problems += ["a traceback on " + name for p in procs for name, text in (("stderr", p.stderr), ("stdout", p.stdout))
                 if TRACEBACK in text]
    if case.rc != 0 and case.stream == "err":
        problems += [f"{len(lines(p.stderr))} stderr lines, want 1" for p in procs if len(lines(p.stderr)) != 1]
    if case.line and not any(re.search(case.line, s) for p in procs
                             for s in lines(p.stdout if case.stream == "out" else p.stderr)):
        problems.append(f"no {'stdout' if case.stream == 'out' else 'stderr'} line matches /{case.line}/")
    lost = [str(f.relative_to(ctx.tmp)) for f, n in before.items() if n is not None and after.get(f) is None
            and not _moved_aside(f, n)]
    problems += [f"rows lost: {lost}"] if lost else []
    n0, n1 = (sum(n or 0 for n in r.values()) for r in (before, after))
    want = {"same": n0, "base": ctx.base_rows}.get(case.rows)
    if (case.rows == "more" and n1 <= n0) or (want is not None and n1 != want):
        problems.append(f"{n1} rows after, want {'more than ' + str(n0) if case.rows == 'more' else want}")
    if tree_before is not None:
        now = tree(ctx.tmp)
        changed = sorted(k for k in tree_before.keys() | now.keys() if tree_before.get(k) != now.get(k))
        problems += [f"{len(changed)} files or folders changed under the case's folder, first "
                     f"{cell(changed[0], 80)}"] if changed else []
    if case.check:
        problems += case.check(ctx, procs)
    return problems


def run_case(case, ctx):
    """One case in its own folder -> a table row's fields."""
    ctx.tmp.mkdir(parents=True)
    t0 = time.perf_counter()
    res = dict(case=case, rc="-", message="", rows="-", problems=[], skipped=None)
    res["skipped"] = case.skip(ctx) if case.skip else None
    if res["skipped"]:
        return res
    try:
        if case.setup:
            case.setup(ctx)
        before, tree_before = rows(ctx.tmp), tree(ctx.tmp) if case.unchanged else None
        procs = execute(case, ctx)
        after = rows(ctx.tmp)
        res.update(rc=",".join(str(p.rc) for p in procs), message=message(case, ctx, procs),
                   rows=f"{sum(n or 0 for n in before.values())} → {sum(n or 0 for n in after.values())}",
                   problems=judge(case, ctx, procs, before, after, tree_before))
    except Exception as e:  # noqa: BLE001 - a setup or check that breaks is a failing case, never a pass
        res["problems"].append(f"battery: {type(e).__name__}: {e}")
    res["seconds"] = time.perf_counter() - t0
    return res


def verdict(r):
    if r["skipped"]:
        return f"skipped: {r['skipped']}"
    if not r["problems"]:
        return "clean" + (" (marked known-failing: remove the mark)" if r["case"].known else "")
    return "**FAIL**" + (" (known)" if r["case"].known else "") + ": " + "; ".join(r["problems"])


def cell(text, width=150):
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[:width - 1] + "…"


def table(results, wall, jobs):
    bad = [r for r in results if r["problems"] or (r["case"].known and not r["skipped"])]
    known = [r for r in results if r["case"].known and r["problems"]]
    skipped = [r for r in results if r["skipped"]]
    md = ["# Fault-injection battery", "",
          f"`make faults` (`python -m tests.faults -j {jobs}`), {datetime.date.today()}: {len(results)} cases, "
          f"{len(results) - len(bad) - len(skipped)} clean, {len(bad)} failing ({len(known)} known), "
          f"{len(skipped)} skipped; {wall:.0f} s wall on {os.cpu_count()} cores (load average "
          f"{os.getloadavg()[0]:.1f} at the end: other work shares them). Expectations: "
          f"tests/fault_cases.py; rows = readable rows under the case's folder before → after.", "",
          "| case | exit (want) | message | rows | s | verdict |", "|---|---|---|---|---|---|"]
    for r in results:
        c = r["case"]
        md.append(f"| {cell(c.name)} | {r['rc']} ({c.rc}) | {cell(r['message'])} | {r['rows']} | "
                  f"{r.get('seconds', 0):.0f} | {cell(verdict(r), 400)} |")
    if known:
        md += ["", "Known failures (what today's code does instead):", ""]
        md += [f"- {r['case'].name}: {r['case'].known}" for r in known]
    return "\n".join(md) + "\n", not bad


def shared_run(ctx):
    """Train the shared tiny run once; every case that needs a finished run copies it."""
    base = dataclasses.replace(ctx, tmp=ctx.tmp / "_base")
    p = subprocess.run([sys.executable, *base.fmt(harness())], cwd=ROOT, env=ctx.env, capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    runs = list((base.out / "runs").glob("*")) if p.returncode == 0 else []
    if len(runs) != 1:
        sys.exit(f"faults: error: the shared tiny run failed (exit {p.returncode}): {p.stderr[-2000:]}")
    return dataclasses.replace(ctx, base=base.out, run_name=runs[0].name,
                               base_rows=sum(n or 0 for n in rows(base.out).values()))


def slug(name):
    """A case's name as a folder name and pytest id: `lmeval: bad --lens` -> `lmeval_bad_lens`."""
    return re.sub(r"\W+", "_", name).strip("_")


def battery(cases, work: Path, jobs=2):
    """Run `cases` in folders under `work` (the shared run first), `jobs` at a time; their results in order."""
    (work / "corpus.txt").write_text(TEXT)
    (work / "short.txt").write_text(TEXT[:3000])
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env.update(WANDB_MODE="disabled", OMP_NUM_THREADS="1")  # jobs processes share the cores
    ctx = shared_run(Ctx(tmp=work, corpus=work / "corpus.txt", short=work / "short.txt", env=env))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(run_case, c, dataclasses.replace(ctx, tmp=work / slug(c.name))) for c in cases]
        for f in concurrent.futures.as_completed(futures):
            r = f.result()
            print(f"{cell(verdict(r), 60):<60} {r.get('seconds', 0):5.1f}s  {r['case'].name}", file=sys.stderr)
    return [f.result() for f in futures]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the table here (make faults: results/faults.md)")
    p.add_argument("-k", default="", help="only the cases whose name contains this (case-insensitive)")
    p.add_argument("-j", type=int, default=2, help="cases run in parallel (default 2)")
    p.add_argument("--keep", action="store_true", help="keep the cases' folders (printed)")
    a = p.parse_args(argv)
    work, t0 = Path(tempfile.mkdtemp(prefix="faults-")), time.perf_counter()
    try:
        results = battery([c for c in CASES if a.k.lower() in c.name.lower()], work, a.j)
    finally:
        for d in work.rglob("*"):  # read-only folders a case made
            if d.is_dir() and not d.is_symlink():
                d.chmod(0o755)
        if a.keep:
            print(f"cases' folders kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work)
    md, clean = table(results, time.perf_counter() - t0, a.j)
    print(md)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(md)
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
