"""The cases of the fault-injection battery (tests/faults.py runs them): hostile-but-fair inputs and faults,
each with what a clean answer is. A case's command runs after its setup, in a fresh folder `tmp`;
`{out}`, `{tmp}`, `{run}`, `{corpus}`, `{short}` in its arguments name that folder's paths."""
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

# The cheapest real run (tests/test_reliability.py's sizes, nothing optional measured): ~4 s of work.
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

CASES = [
    # bad overrides: one line, exit 2, nothing written
    rejected("unknown key", ["train.stepz=3"], r"unknown key 'train.stepz'; valid keys in train: \[.*'steps'"),
    rejected("bad type", ["train.steps=abc"], r".*train\.steps.*'abc'.*Integer"),
    rejected("unknown encoding", ["encoding=alibl"], r"unknown encoding 'alibl'; expected one of \[.*'alibi'"),
    rejected("unknown model", ["model=huge"], r"unknown model 'huge'; expected one of \[.*'tiny'"),
    rejected("unknown task", ["task=nosuch"], r"unknown task 'nosuch'; expected one of \[.*'kv_recall'"),
    rejected("bad value in a sweep", ["encoding=rope,alibl"], r"unknown encoding 'alibl'", multirun=True),
    rejected("unknown sweep preset", ["sweep=nosuch"], r"unknown sweep 'nosuch'; expected one of", multirun=True),
    # a pretrained job is checked before any work too (its checkpoint file, then its knobs)
    rejected("pretrained: no checkpoint at path", ["pretrained=smollm2", "pretrained.path=/nonexistent/m.gguf"],
             r"pretrained\.path /nonexistent/m\.gguf is not an HF checkpoint directory or a \.gguf file$"),
    rejected("pretrained: unknown model", ["pretrained=smollm2", "pretrained.name=llama9"],
             r"unknown pretrained model 'llama9'; expected one of \['gemma3', 'smollm2'\]"),
    rejected("null parent", ["precision.pipeline.table=fp16"],
             r"cannot set 'precision.pipeline.table': 'precision.pipeline' is null; choose one first, precision="),
    rejected("encoding param typo", ["encoding=rope", "encoding.bse=100"],
             r"unknown key 'encoding.bse'; valid keys in encoding: \[.*'base'"),
    rejected("task length below its template", ["task=vt", "train.seq_len=48", "task.min_len=40"],
             r"task 'vt' needs length >= 48; got 40$"),
    rejected("task min_len above the train length", ["task=niah_single", "train.seq_len=16"],
             r"task.min_len 32 exceeds train.seq_len 16: training draws lengths from \[task.min_len, train.seq_len\]$"),
    rejected("task depth outside [0, 1]", ["task=niah_single", "task.depths=[0.5,1.5]"],
             r"task.depths must lie in \[0, 1\], got \[0.5, 1.5\]$"),
    rejected("unknown haystack", ["task=niah_single", "train.seq_len=32", "task.params.haystack=essay"],
             r"niah_single haystack must be one of \['repeat', 'kjv'\]; got 'essay'$"),
    rejected("task param typo", ["task=kv_recall", "task.params.key_ln=3"],
             r"unknown key 'task.params.key_ln'; valid keys in task.params: \['key_len'\]"),
    rejected("encoding param typo in a sweep", ["encoding=rope,alibi", "encoding.bse=100"],
             r"unknown key 'encoding.bse'; valid keys in encoding: \[.*'base'", multirun=True),
    rejected("task param typo with +", ["task=kv_recall", "+task.params.key_ln=3"], r".*'key_ln'.*'key_len'"),
    rejected("negative steps", ["train.steps=-1"], r"train.steps must be >= 1, got -1"),
    rejected("zero steps", ["train.steps=0"], r"train.steps must be >= 1, got 0"),
    rejected("seq_len 0", ["train.seq_len=0"], r"train.seq_len must be >= 1, got 0"),
    rejected("negative lr", ["train.lr=-1e-3"], r"train.lr must be > 0"),
    rejected("bogus eval.protocol", ["eval.protocol=bogus"], r"unknown eval.protocol 'bogus'; expected one of"),
    rejected("eval length 0", ["eval.lens=[16,0]"], r"eval.lens .*>= 1"),
    rejected("heads not dividing d_model", ["model.d_model=30", "model.n_heads=4"],
             r"model.d_model 30 is not divisible by n_heads 4"),
    rejected("unknown launcher", ["hydra/launcher=nosuch"], r"unknown hydra/launcher 'nosuch'", multirun=True),
    rejected("launcher without its plugin", ["hydra/launcher=ray"],
             r"hydra/launcher=ray: its Hydra plugin is not installed", multirun=True, skip=ray_installed),
    rejected("unknown lm-eval task", ["eval.lm_eval_tasks=[nosuchtask]"], r"unknown lm-eval task.*'nosuchtask'"),
    rejected("missing corpus file", ["task.corpus={tmp}/nonexistent.txt"], r"unknown corpus .*nonexistent"),
    rejected("unknown rope impl", ["encoding.impl=nosuch"], r"unknown rope impl 'nosuch'"),
    rejected("device=cuda without CUDA", ["device=cuda"], r"device=.cuda. but .* no CUDA", skip=cuda_present),
    rejected("out= under a file", ["out={tmp}/afile/sub"], r"cannot write results under out=.*is a file",
             setup=lambda ctx: (with_base(ctx), (ctx.tmp / "afile").write_text("x"))),
    rejected("out= in a read-only dir", ["out={tmp}/ro/out"], r"cannot write results under out=.*not writable",
             setup=lambda ctx: (with_base(ctx), read_only(ctx)), skip=root),
    # faults on results
    Case("rerun of a finished run skips it", harness(), line=r"^skip .*: finished \(ok\)", stream="out",
         setup=with_base, check=skipped),
    Case("rerun with threads=1 (not a result knob) skips", harness("threads=1"), line=r"^skip ", stream="out",
         setup=with_base, check=skipped),
    Case("truncated rows.parquet, rerun", harness(), line=r"^ok ", stream="out", setup=truncate_rows,
         rows="base", check=finished_ok),
    Case("garbage status.json, rerun", harness(), line=r"^ok ", stream="out", setup=garbage_status,
         rows="base", check=finished_ok),
    Case("SIGKILL mid-training, rerun", harness(), line=r"^ok ", stream="out", setup=sigkill_mid_training,
         rows="base", check=finished_ok),
    Case("changed default (config_hash), rerun", harness(), line=r"^rerun .*config hash 000000000000 -> \w{12}",
         stream="out", setup=stale_hash, rows="base", check=rerun_fresh),
    Case("umask 002: files 0664", harness(), line=r"^ok ", stream="out", umask=0o002, rows="base",
         check=modes_664),
    Case("measurement fails after training", harness("task.corpus={short}", "eval.multiples=[1,64]"), rc=1,
         line=r"^failed .*eval_windows.*too few", stream="out", rows="more", check=failed_keeps_checkpoint),
    Case("diverging lr", harness("train.steps=4", "train.lr=1e30"), line=r"^diverged ", stream="out", rows="more",
         check=diverged),
    # report / load
    Case("report: missing dir", ["-m", "harness.report", "{tmp}/nope", "--wandb", "disabled"], rc=2,
         line=r"^harness\.report: error: no results at", unchanged=True),
    Case("report: empty dir", ["-m", "harness.report", "{tmp}/empty", "--wandb", "disabled"], rc=2,
         line=r"^harness\.report: error: no rows", setup=lambda ctx: (ctx.tmp / "empty").mkdir(), unchanged=True),
    Case("report: a failed run is listed, not read", ["-m", "harness.report", "{tmp}/sweep", "--wandb", "disabled"],
         line=r"leaving out the rows of failed run .*failed", setup=with_failed_run, check=failed_left_out),
    Case("report: one corrupt rows file among good", ["-m", "harness.report", "{tmp}/sweep", "--wandb", "disabled"],
         line=r"skipping corrupt rows file .*bad/rows.parquet", setup=with_corrupt_run,
         check=corrupt_skipped),
    # lm-eval entry point
    Case("lmeval: missing run dir", [*LM, "{tmp}/nope", "--tasks", "passkey"], rc=2, line=LM_ERR + r".*nope",
         unchanged=True),
    Case("lmeval: run dir without checkpoint", [*LM, "{run}", "--tasks", "passkey"], rc=2,
         line=LM_ERR + "no checkpoint", setup=lambda ctx: (with_base(ctx), (ctx.run / "checkpoint.pt").unlink()),
         unchanged=True),
    Case("lmeval: truncated checkpoint", [*LM, "{run}", "--tasks", "passkey"], rc=2, line=LM_ERR + r"checkpoint",
         setup=lambda ctx: (with_base(ctx), os.truncate(ctx.run / "checkpoint.pt", 200)), unchanged=True),
    Case("lmeval: unknown task", [*LM, "{run}", "--tasks", "nosuchtask"], rc=2,
         line=LM_ERR + r"unknown lm-eval task.*'nosuchtask'", setup=with_base, unchanged=True),
    Case("lmeval: bad --lens", [*LM, "{run}", "--tasks", "passkey", "--lens", "16,abc"], rc=2,
         line=LM_ERR + r".*--lens", setup=with_base, unchanged=True),
    # the conformance suite and the HF config converter
    Case("conformance: --apply that does not import", ["-m", "harness.conformance", "--apply", "nosuch_pkg.mod:fn"],
         rc=2, line=r"^harness\.conformance: error: .*nosuch_pkg", unchanged=True),
    Case("conformance: bad --dtype", ["-m", "harness.conformance", "--apply", HF_APPLY, "--dtype", "fp8"], rc=2,
         line=r"^harness\.conformance: error: unknown --dtype 'fp8'", unchanged=True),
    Case("hf_config: missing config.json", ["-m", "harness.hf_config", "{tmp}/none.json"], rc=2,
         line=r"^harness\.hf_config: error: .*none\.json: not a readable JSON file", unchanged=True),
    # the run-dir lock
    Case("two identical runs at once", harness(), line=r"^ok ", stream="out", copies=2, rows="base",
         check=one_trains),
    Case("unknown C kernel level (HARNESS_ROPE_ISA)", harness(), rc=2, setup=kernel_level("avx512"),
         line=r"^harness: error: HARNESS_ROPE_ISA='avx512': unknown level; choose one of \['generic', 'avx2'\]$"),
    Case("stale lock (dead pid on this host)", harness(), line=r"taking over the stale lock of pid \d+",
         setup=stale_lock, rows="base", check=finished_ok),
]
