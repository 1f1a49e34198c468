"""The fault battery's kit: `Case` (a command, its setup, and what a clean answer is) and the setups and checks
the case lists share (tests/fault_cases.py and its topic modules tests/fault_cases_*.py). A case's command runs
after its setup, in a fresh folder `tmp`; `{out}`, `{tmp}`, `{run}`, `{corpus}`, `{short}` in its arguments name
that folder's paths."""
import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

# The cheapest real run (tests/tiny_runs.py's sizes, nothing optional measured): a few seconds of work.
TINY = ["task.corpus={corpus}", "model.n_layers=1", "model.d_model=32", "model.n_heads=2", "train.seq_len=16",
        "train.steps=2", "train.batch_size=4", "train.warmup=1", "eval.multiples=[1,2]", "eval.max_tokens=64",
        "eval.throughput_repeats=1", "eval.warmup=0", "eval.extension.types=[]", "precision.model_level=false",
        "wandb.mode=disabled", "out={out}"]
@dataclass
class Case:
    name: str
    argv: list                 # after `python`: ["-m", "harness", ...]
    rc: int = 0
    line: str = ""             # regex (re.search) the case's message must match
    stream: str = "err"        # where the message is; rc != 0 with "err": stderr is exactly that one line
    setup: Callable = None     # setup(ctx), before the command
    check: Callable = None     # check(ctx, procs) -> list of problems
    rows: str = "same"         # rows after: "same" as before, "base" = the shared run's, "more" than before
    unchanged: bool = False    # no file or folder under tmp created, removed or changed (bytes)
    copies: int = 1            # identical commands started at once
    skip: Callable = None      # skip(ctx) -> reason to skip, or None
    known: str = ""            # why today's code fails it (still counted as failing)
    umask: int = None


def harness(*over, multirun=False):
    """`-m harness` + TINY, each `key=value` of `over` replacing TINY's value of that key."""
    args = {a.split("=", 1)[0]: a for a in TINY}
    args.update({a.split("=", 1)[0]: a for a in over})
    return ["-m", "harness", *(["-m"] if multirun else []), *args.values()]


def with_base(ctx):
    """Start from the shared finished run (same overrides as TINY: the same run dir name)."""
    shutil.copytree(ctx.base, ctx.out)


def rejected(name, over, line, multirun=False, **kw):
    """Bad input: exit 2, one `harness: error:` line, nothing under out= created or changed."""
    return Case(name, harness(*over, multirun=multirun), rc=2, line=r"^harness: error: " + line,
                setup=kw.pop("setup", with_base), unchanged=True, **kw)


def the_run(ctx):
    """The one run dir under out= (the case's own overrides name it)."""
    runs = sorted((ctx.out / "runs").iterdir())
    assert len(runs) == 1, f"{len(runs)} run dirs under out=, want 1"
    return runs[0]


def status(ctx, run=None):
    return json.loads(((run or the_run(ctx)) / "status.json").read_text())


def expect(cond, problem):
    return [] if cond else [problem]


def stdout_line(procs, pattern):
    return any(re.search(pattern, line) for p in procs for line in p.stdout.splitlines())


# --- setups -------------------------------------------------------------------------------------------

def kernel_level(level):
    """setup: this case's commands run with HARNESS_ROPE_ISA=level (its own env; the other cases' is untouched)."""
    def setup(ctx):
        ctx.env = {**ctx.env, "HARNESS_ROPE_ISA": level}
    return setup


def truncate_rows(ctx):
    with_base(ctx)
    rows = ctx.run / "rows.parquet"
    rows.write_bytes(rows.read_bytes()[:100])


def garbage_status(ctx):
    with_base(ctx)
    (ctx.run / "status.json").write_text("{\"status\": \"ok\", garbage")


def stale_hash(ctx):
    """A pulled default change: the recorded config hash is not the one the current code computes."""
    with_base(ctx)
    s = status(ctx)
    (ctx.run / "status.json").write_text(json.dumps({**s, "config_hash": "000000000000"}))


def sigkill_mid_training(ctx):
    """Start the run, SIGKILL its process group as soon as status.json says 'running' (before the checkpoint)."""
    cmd = [sys.executable, *ctx.fmt(harness())]
    proc = subprocess.Popen(cmd, cwd=ctx.root, env=ctx.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            try:
                if status(ctx)["status"] == "running":
                    break
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not (ctx.run / "checkpoint.pt").exists(), "killed after training, not during it"


def report_dirs(ctx, *names):
    for n in names:
        shutil.copytree(ctx.base_run, ctx.tmp / "sweep" / n)


def with_failed_run(ctx):
    report_dirs(ctx, "good", "failed")
    s = ctx.tmp / "sweep" / "failed" / "status.json"
    s.write_text(json.dumps({**json.loads(s.read_text()), "status": "failed", "message": "RuntimeError: boom"}))


def with_corrupt_run(ctx):
    report_dirs(ctx, "good1", "good2", "bad")
    bad = ctx.tmp / "sweep" / "bad" / "rows.parquet"
    bad.write_bytes(bad.read_bytes()[:100])


def dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def stale_lock(ctx):
    ctx.run.mkdir(parents=True)
    (ctx.run / ".lock").write_text(json.dumps({"pid": dead_pid(), "host": socket.gethostname(),
                                               "since": time.time(), "token": "stale"}))


# --- checks -------------------------------------------------------------------------------------------

def finished_ok(ctx, procs, state="ok"):
    s = status(ctx)
    return (expect(s["status"] == state, f"status {s['status']!r}, want {state!r}")
            + expect(not (the_run(ctx) / ".lock").exists(), "a .lock is left behind"))


def skipped(ctx, procs):
    same = [f for f in ("rows.parquet", "status.json", "checkpoint.pt")
            if (the_run(ctx) / f).read_bytes() == (ctx.base_run / f).read_bytes()]
    return expect(len(same) == 3, "a finished run's files were rewritten")


def rerun_fresh(ctx, procs):
    s, rows = status(ctx), the_run(ctx) / "rows.parquet"
    return (finished_ok(ctx, procs) + expect(s["config_hash"] == status(ctx, ctx.base_run)["config_hash"],
                                            f"recorded hash {s['config_hash']} is not the current one")
            + expect(rows.stat().st_mtime_ns != (ctx.base_run / "rows.parquet").stat().st_mtime_ns,
                     "rows.parquet was not rewritten: stale rows kept"))


def failed_keeps_checkpoint(ctx, procs):
    s, df = status(ctx), pd.read_parquet(the_run(ctx) / "rows.parquet")
    return (expect(s["status"] == "failed", f"status {s['status']!r}")
            + expect((the_run(ctx) / "checkpoint.pt").exists(), "checkpoint lost")
            + expect({"train_loss", "train_tokens_per_s"} <= set(df.metric), "train/throughput rows lost")
            + expect(load(ctx.out).empty, "results.load reads the failed run's rows as results"))


def diverged(ctx, procs):
    df = pd.read_parquet(the_run(ctx) / "rows.parquet")
    return finished_ok(ctx, procs, "diverged") + expect((df.metric == "train_loss").any(), "train rows lost")


def modes_664(ctx, procs):
    bad = [f"{p.relative_to(ctx.out)} {p.stat().st_mode & 0o777:o}" for p in ctx.out.rglob("*")
           if p.is_file() and p.stat().st_mode & 0o777 != 0o664]
    return expect(not bad, f"not 0664 under umask 002: {bad}")


def load(path):
    """harness.results.load, its stderr lines swallowed (the command's own are what the case judges)."""
    from harness import results
    with contextlib.redirect_stderr(io.StringIO()):
        return results.load(path)


def failed_left_out(ctx, procs):
    df, md = load(ctx.tmp / "sweep"), (ctx.tmp / "sweep" / "report.md").read_text()
    return (expect(len(df) == ctx.base_rows, f"results.load reads {len(df)} rows, want {ctx.base_rows}")
            + expect([Path(d).name for d, _ in df.attrs["failed"]] == ["failed"], "load does not name it")
            + expect("failed" in md and "boom" in md, "report.md does not list the failed run"))


def corrupt_skipped(ctx, procs):
    df, md = load(ctx.tmp / "sweep"), (ctx.tmp / "sweep" / "report.md").read_text()
    return (expect(len(df) == 2 * ctx.base_rows, f"results.load reads {len(df)} rows, want {2 * ctx.base_rows}")
            + expect([Path(f).parent.name for f, _ in df.attrs["skipped"]] == ["bad"], "load does not name it")
            + expect("bad/rows.parquet" in md, "report.md does not name the corrupt file"))


def one_trains(ctx, procs):
    trained = [p for p in procs if stdout_line([p], r"^ok ")]
    others = [p for p in procs if p not in trained]
    return (finished_ok(ctx, procs) + expect(len(trained) == 1, f"{len(trained)} of 2 trained")
            + expect(all(stdout_line([p], r"^(wait|busy|skip)") for p in others),
                     "the other did not say wait/busy/skip"))


def root(ctx):
    return "running as root, which ignores file permissions" if os.geteuid() == 0 else None


def read_only(ctx):
    ctx.tmp.joinpath("ro").mkdir()
    ctx.tmp.joinpath("ro").chmod(0o555)


def cuda_present(ctx):
    import torch
    return "CUDA is available here" if torch.cuda.is_available() else None


def ray_installed(ctx):
    import importlib.util
    found = importlib.util.find_spec("hydra_plugins.hydra_ray_launcher")
    return "the ray launcher plugin is installed" if found else None


LM = ["-m", "harness.lmeval.rows"]
LM_ERR = r"^harness\.lmeval: error: "
HF_APPLY = "transformers.models.llama.modeling_llama:apply_rotary_pos_emb"
