"""Fault cases on run files (tests/faults.py runs them; `python -m tests.faults -k "runs:"`): every file the harness
reads from a run dir (status.json, rows.parquet, checkpoint.pt, .hydra/config.yaml) missing, empty, truncated, of
the wrong JSON type, binary bytes, or not a file at all; resume keyed on the code; a full disk and unwritable
directories; and the hostile or hurried user's run dirs (a file, a symlink loop, a FIFO, a foreign checkpoint, clock
skew, a Ctrl-C). Clean: one line naming the file, a finished run computed again where its own files are bad, no
traceback, and nothing half-written that a later command would read as finished."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pandas as pd

from tests.fault_kit import (Case, LM, LM_ERR, harness, with_base, status, expect, finished_ok, skipped, the_run,
                             load)

# --- commands -----------------------------------------------------------------------------------------

# `python -c WRAP <file name> <entry> args...`: the entry point with a full disk at the first write of that file
# (os.fsync of its temp file fails with ENOSPC, as a filling disk does after write() buffered the bytes). The
# file name "config.yaml" is Hydra's own .hydra/config.yaml write instead (its _save_config: a plain open()).
WRAP = r"""
import errno, os, sys
name, entry = sys.argv[1:3]
del sys.argv[1:3]
def full(what):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), what)
real_fsync = os.fsync
def fsync(fd):
    target = os.path.basename(os.readlink("/proc/self/fd/%d" % fd))
    if target.startswith("." + name + ".") or target == name:
        raise full(target)
    return real_fsync(fd)
os.fsync = fsync
if name == "config.yaml":
    import hydra.core.utils as hu
    real_save = hu._save_config
    def save(cfg, filename, output_dir):
        if filename == name:
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / filename).write_text("defaults:\n  - base_con")  # what fit on the disk
            raise full(str(output_dir / filename))
        return real_save(cfg, filename, output_dir)
    hu._save_config = save
if entry == "harness":
    from harness.__main__ import cli
    cli()
else:
    from harness.report.build import main
    sys.exit(main())
"""

# `python -c SIGINT_AT <file name> args...` (report): Ctrl-C arrives while that file's temp copy is being written.
SIGINT_AT = r"""
import os, signal, sys
# as in a terminal: a battery started in the background (nohup, `&`) hands its children SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
name = sys.argv.pop(1)
real_fsync = os.fsync
def fsync(fd):
    if os.path.basename(os.readlink("/proc/self/fd/%d" % fd)).startswith("." + name + "."):
        os.kill(os.getpid(), signal.SIGINT)
    return real_fsync(fd)
os.fsync = fsync
from harness.report.build import main
sys.exit(main())
"""

# `python -c FROM_COPY <source dir> args...`: the harness imported from a copy of the package (an edited checkout).
FROM_COPY = r"""
import sys
sys.path.insert(0, sys.argv.pop(1))
import harness
assert harness.__file__.startswith(sys.path[0]), harness.__file__
from harness.__main__ import cli
cli()
"""


def full_disk(name, *over, entry="harness"):
    """argv: the tiny run (or `report` with its arguments in `over`) with a full disk at `name`'s write."""
    tail = harness(*over)[2:] if entry == "harness" else list(over)
    return ["-c", WRAP, name, entry, *tail]


REPORT = ["-m", "harness.report", "{tmp}/sweep", "--wandb", "disabled"]
CLAIMS = ["-m", "harness.claims", "--sweeps", "{tmp}/sweeps", "--out", "{tmp}/claims", "--only", "7"]
COMPLETION = "-m harness -sc query=bash"


# --- setups -------------------------------------------------------------------------------------------

def spoil(name, data):
    """setup: the shared finished run with `name` (relative to the run dir) replaced by data (bytes, or a
    callable(path) that writes whatever it likes there)."""
    def setup(ctx):
        with_base(ctx)
        path = ctx.run / name
        if callable(data):
            data(path)
        else:
            path.write_bytes(data)
    return setup


def drop(name):
    def setup(ctx):
        with_base(ctx)
        (ctx.run / name).unlink()
    return setup


def truncate(fraction):
    return lambda path: os.truncate(path, int(path.stat().st_size * fraction))


def flip_byte(path):
    """One byte in the middle of the file changed (a bad disk block, a bad copy): same size, bad CRC."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def edit_status(**fields):
    """The finished status with fields set (a value None removes the key)."""
    def write(path):
        s = json.loads(path.read_text())
        s.update(fields)
        path.write_text(json.dumps({k: v for k, v in s.items() if v is not None}))
    return write


def zero_rows(path):
    df = pd.read_parquet(path)
    df.iloc[:0].to_parquet(path, index=False)


def other_columns(path):
    df = pd.read_parquet(path)
    df.rename(columns={"value": "val"}).to_parquet(path, index=False)


def rows_as_csv(path):
    path.write_text(pd.read_parquet(path).to_csv(index=False))


def a_directory(path):
    path.unlink()
    path.mkdir()
    (path / "part-0.parquet").write_bytes(b"PAR1")


def a_fifo(path):
    path.unlink()
    os.mkfifo(path)


def huge_status(path):
    """A status.json of 64 MiB (a log pasted into it, a runaway writer): valid JSON, finished, and huge."""
    s = json.loads(path.read_text())
    path.write_text(json.dumps({**s, "note": "x" * (64 << 20)}))


def with_bom(path):
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


def link_to(target):
    def write(path):
        path.unlink()
        path.symlink_to(target)
    return write


def copy_source(ctx, edit=None):
    """A copy of the checkout's package, conf/, tasks/ and pyproject.toml under tmp/src (edit(src) changes it)."""
    src = ctx.tmp / "src"
    for name in ("harness", "conf", "tasks"):
        shutil.copytree(ctx.root / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ctx.root / "pyproject.toml", src / "pyproject.toml")
    if edit:
        edit(src)


def warmup_changed(src):
    """A code change the config does not show: the warm-up ramps from lr/2 instead of from lr/warmup."""
    f = src / "harness" / "train.py"
    text = f.read_text()
    old = "return train_cfg.lr * (step + 1) / train_cfg.warmup"
    assert old in text, "harness/train.py's warm-up line moved: update this case"
    f.write_text(text.replace(old, "return train_cfg.lr * (0.5 + 0.5 * (step + 1) / train_cfg.warmup)"))


def code_edited(ctx):
    with_base(ctx)
    copy_source(ctx, warmup_changed)


def run_dir_as(kind):
    """setup: where the run dir goes, something else: a file, a symlink loop, a dangling symlink."""
    def setup(ctx):
        ctx.run.parent.mkdir(parents=True)
        if kind == "file":
            ctx.run.write_text("notes I kept here\n")
        elif kind == "loop":
            ctx.run.symlink_to(ctx.run.name)
        else:
            ctx.run.symlink_to(ctx.tmp / "scratch_disk_not_mounted")
    return setup


def hydra_as(kind):
    def setup(ctx):
        with_base(ctx)
        h = ctx.run / ".hydra"
        if kind == "file":
            shutil.rmtree(h)
            h.write_text("x")
        else:
            (h / "config.yaml").unlink()
            (h / "config.yaml").mkdir()
    return setup


def sweep_copies(*names, sweeps=False):
    """setup: copies of the shared run as run dirs `names` of one sweep dir (tmp/sweep, or tmp/sweeps/default)."""
    def setup(ctx):
        where = ctx.tmp / ("sweeps/default" if sweeps else "sweep")
        for n in names:
            shutil.copytree(ctx.base_run, where / n)
        ctx.where = where
    return setup


def report_with(name, data, sweeps=False):
    """setup: two good copies and one whose `name` is replaced by data (bytes or callable(path))."""
    def setup(ctx):
        sweep_copies("good1", "good2", "bad", sweeps=sweeps)(ctx)
        path = ctx.where / "bad" / name
        if callable(data):
            data(path)
        else:
            path.write_bytes(data)
    return setup


def other_encoding_checkpoint(ctx):
    """The shared run, its checkpoint.pt replaced by an alibi run's (a `cp` into the wrong dir)."""
    with_base(ctx)
    other = ctx.tmp / "other"
    p = subprocess.run([sys.executable, *ctx.fmt(harness("encoding=alibi", f"out={other}"))], cwd=ctx.root,
                       env=ctx.env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    (ckpt,) = other.glob("runs/*/checkpoint.pt")
    shutil.copy(ckpt, ctx.run / "checkpoint.pt")


def can_lock_dirs(ctx):
    """None where this user can make a directory unwritable here (chmod; as root, which ignores modes: chattr +i);
    else why this case is skipped."""
    if os.geteuid() != 0:
        return None
    probe = ctx.tmp / "probe"
    probe.mkdir()
    try:
        if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
            return "running as root on a file system without chattr +i: no way to make a directory unwritable"
        try:
            (probe / "x").write_text("x")
            return "chattr +i does not stop root here"
        except OSError:
            return None
    except FileNotFoundError:
        return "running as root without chattr: no way to make a directory unwritable"
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
        shutil.rmtree(probe, ignore_errors=True)


def lock_dir(path):
    """Make a directory unwritable (chmod 555; as root chattr +i, which root obeys too)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    else:
        path.chmod(0o555)


def unlock_dirs(ctx):
    """Undo lock_dir under the case's folder (the battery removes it afterwards)."""
    for p in [ctx.tmp, *ctx.tmp.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(p)], capture_output=True)
            p.chmod(0o755)


def locked(path_of):
    """setup: path_of(ctx) made (if absent) and made unwritable."""
    def setup(ctx):
        with_base(ctx)
        p = path_of(ctx)
        p.mkdir(parents=True, exist_ok=True)
        lock_dir(p)
    return setup


def unlocking(check=None):
    """check: undo the case's locked dirs first, then `check` (if any)."""
    def run(ctx, procs):
        unlock_dirs(ctx)
        return check(ctx, procs) if check else []
    return run


def lock_sweep_after_first_run(ctx):
    """A sweep of two runs; a watcher makes the sweep dir unwritable as soon as the first run is finished
    (permissions changed mid-sweep: a quota, a chmod by a colleague, a remount)."""
    sweep = ctx.out / "sweeps" / "single"

    def watch():
        deadline = time.time() + 240
        while time.time() < deadline:
            done = [p for p in sweep.glob("*/status.json") if '"ok"' in p.read_text(errors="replace")]
            if done:
                lock_dir(sweep)
                return
            time.sleep(0.02)
    threading.Thread(target=watch, daemon=True).start()


def sweep_then(*over):
    """setup: a first sweep into tmp/shared with these overrides (another preset), before the case's own."""
    def setup(ctx):
        cmd = [sys.executable, *ctx.fmt(harness(*over, "hydra.sweep.dir={tmp}/shared", multirun=True))]
        p = subprocess.run(cmd, cwd=ctx.root, env=ctx.env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        ctx.first = {f: f.read_bytes() for f in (ctx.tmp / "shared").rglob("rows.parquet")}
    return setup


def lock_of(host, age_s=0.0, pid=None):
    """setup: a .lock in the run dir (another host's, or this host's pid) with its heartbeat age_s ago
    (negative: in the future, a clock ahead of this one)."""
    def setup(ctx):
        ctx.run.mkdir(parents=True)
        lock = ctx.run / ".lock"
        lock.write_text(json.dumps({"pid": pid or 12345, "host": host, "since": time.time(), "token": "x"}))
        t = time.time() - age_s
        os.utime(lock, (t, t))
    return setup


def lock_is_dir(ctx):
    with_base(ctx)
    (ctx.run / ".lock").mkdir()


def temp_leftovers(ctx):
    """Temp files of writes killed half-way (kill -9 during atomic_write): never read, and cleaned up."""
    with_base(ctx)
    for name in ("rows.parquet", "status.json", "checkpoint.pt"):
        (ctx.run / f".{name}.abc123.tmp").write_bytes(b"half")


def status_links_elsewhere(ctx):
    """status.json a symlink to another run's status (a user 'saving space'): a rerun replaces the link, not
    the other run's file."""
    with_base(ctx)
    other = ctx.tmp / "other_run"
    shutil.copytree(ctx.base_run, other)
    s = json.loads((other / "status.json").read_text())
    (other / "status.json").write_text(json.dumps({**s, "config_hash": "0123456789ab"}))
    ctx.other_status = (other / "status.json").read_bytes()
    (ctx.run / "status.json").unlink()
    (ctx.run / "status.json").symlink_to(other / "status.json")


def immutable_rows(ctx):
    """rows.parquet chmod 444 (made read-only by a backup tool): a rerun still replaces it (the dir is writable)."""
    spoil("status.json", edit_status(config_hash="000000000000"))(ctx)
    (ctx.run / "rows.parquet").chmod(0o444)


def out_loop(ctx):
    (ctx.tmp / "loop").symlink_to("loop")


def with_env(**env):
    def setup(ctx):
        ctx.env = {**ctx.env, **{k: ctx.fmt([v])[0] for k, v in env.items()}}
        (ctx.tmp / "afile").write_text("x")
    return setup


def completion(ctx):
    line = "harness encoding=ro"
    ctx.env = {**ctx.env, "COMP_LINE": line, "COMP_POINT": str(len(line))}


def old_report(ctx):
    sweep_copies("good1", "good2")(ctx)
    (ctx.where / "report.md").write_text("# the report of yesterday\n")


# --- checks -------------------------------------------------------------------------------------------

def safely(check):
    """check, a failure to read what it reads (the command left a spoiled file) reported as a problem."""
    def run(ctx, procs):
        try:
            return check(ctx, procs)
        except Exception as e:  # noqa: BLE001 - what the command left does not read: that is the finding
            return [f"after the command: {type(e).__name__}: {str(e)[:120]}"]
    return run


@safely
def fresh(ctx, procs):
    """The run was computed again: finished, its rows rewritten, recorded with the current hashes."""
    s, rows = status(ctx), the_run(ctx) / "rows.parquet"
    base = status(ctx, ctx.base_run)
    return (finished_ok(ctx, procs)
            + expect(s.get("config_hash") == base.get("config_hash"), f"config hash {s.get('config_hash')} recorded")
            + expect(s.get("code_hash") is not None, "no code_hash recorded in status.json")
            + expect(rows.stat().st_mtime_ns != (ctx.base_run / "rows.parquet").stat().st_mtime_ns,
                     "rows.parquet was not rewritten: stale rows kept")
            + no_temp(ctx, procs) + checkpoint_loads(ctx, procs))


@safely
def fresh_from_copy(ctx, procs):
    s = status(ctx)
    return (finished_ok(ctx, procs)
            + expect(s.get("code_hash") not in (None, status(ctx, ctx.base_run).get("code_hash")),
                     f"code_hash {s.get('code_hash')} is not the edited code's")
            + expect((the_run(ctx) / "rows.parquet").read_bytes() != (ctx.base_run / "rows.parquet").read_bytes(),
                     "rows.parquet not rewritten"))


def checkpoint_loads(ctx, procs):
    import torch
    try:
        ck = torch.load(the_run(ctx) / "checkpoint.pt", map_location="cpu", weights_only=True)
        return expect({"state_dict", "config"} <= set(ck), "checkpoint.pt lacks state_dict/config")
    except Exception as e:  # noqa: BLE001 - any failure to load is the problem reported
        return [f"checkpoint.pt does not load: {type(e).__name__}"]


def no_temp(ctx, procs):
    left = [str(p.relative_to(ctx.tmp)) for p in ctx.tmp.rglob(".*.tmp")]
    return expect(not left, f"temp files left behind: {left[:3]}")


def not_finished(ctx, procs):
    """After a failed write: nothing a later run would read as finished, no temp files."""
    from harness import results
    runs = list((ctx.out / "runs").glob("*"))
    done = [r for r in runs if results.finished(r)]
    return expect(not done, f"{[r.name for r in done]} reads as finished") + no_temp(ctx, procs)


def rerun_after(check):
    """check, then the same command again (the disk has room now) finishes the run."""
    def run(ctx, procs):
        problems = check(ctx, procs)
        p = subprocess.run([sys.executable, *ctx.fmt(harness())], cwd=ctx.root, env=ctx.env, capture_output=True,
                           text=True, timeout=300)
        return problems + expect(p.returncode == 0 and "Traceback" not in p.stderr,
                                 f"the rerun failed: {p.stderr[-300:]}") + finished_ok(ctx, procs)
    return run


def report_ok(n_runs):
    """report.md written from the good runs' rows (copies of the shared run: n_runs x its rows)."""
    def check(ctx, procs):
        df = load(ctx.where)
        return (expect((ctx.where / "report.md").exists(), "no report.md")
                + expect(len(df) == n_runs * ctx.base_rows, f"{len(df)} rows read, want {n_runs * ctx.base_rows}"))
    return check


def old_report_kept(ctx, procs):
    md = ctx.where / "report.md"
    return (expect(md.read_text() == "# the report of yesterday\n", "report.md is not the old one")
            + no_temp(ctx, procs))


def other_untouched(ctx, procs):
    return (fresh(ctx, procs) + expect((ctx.tmp / "other_run" / "status.json").read_bytes() == ctx.other_status,
                                       "the other run's status.json was changed"))


def first_sweep_kept(ctx, procs):
    now = {f: f.read_bytes() for f in (ctx.tmp / "shared").rglob("rows.parquet")}
    return expect(all(now.get(f) == b for f, b in ctx.first.items()), "the first sweep's rows were replaced")


def sweep_keeps_first(ctx, procs):
    """The run finished before the change is kept; the failure is one `harness: error:` line naming it."""
    from harness import results
    unlock_dirs(ctx)
    dirs = [d for d in (ctx.out / "sweeps" / "single").iterdir() if d.is_dir()]
    said = [s for p in procs for s in p.stderr.splitlines()
            if re.search(r"^harness: error: .*(Permission denied|Operation not permitted|not writable)", s)]
    return (expect(sum(results.finished(d) for d in dirs) >= 1, "the run finished before the change was lost")
            + expect(len(said) == 1, f"{len(said)} 'harness: error:' lines naming the unwritable dir, want 1"))


def completes(ctx, procs):
    words = procs[0].stdout.split()
    return expect("encoding=rope" in words, f"no completion 'encoding=rope' in {words[:8]}")


@safely
def lock_taken(ctx, procs):
    return finished_ok(ctx, procs)


TINY_SWEEP = ("encoding=rope,alibi", "hydra/launcher=basic")

def previous_rows_kept(ctx, procs):
    """The rerun moved the stale run's rows aside (rows.parquet.previous) before failing: none read as results."""
    kept = list(ctx.out.rglob("rows.parquet.previous"))
    return expect(bool(kept) and not list(ctx.out.rglob("rows.parquet")),
                  f"rows.parquet.previous {'missing' if not kept else 'beside a rows.parquet'}")


CASES = [
    # 1. resume keyed on the code; a finished run is one whose files all read back whole
    Case("runs: code edited (harness/train.py warm-up), rerun names the code change",
         ["-c", FROM_COPY, "{tmp}/src", *harness()[2:]], line=r"^rerun .*code.*changed", stream="out",
         setup=code_edited, rows="base", check=fresh_from_copy),
    Case("runs: code_hash of other code in status.json, rerun", harness(), stream="out",
         line=r"^rerun .*code hash 000000000000 -> \w{12}", setup=spoil("status.json", edit_status(
             code_hash="000000000000")), rows="base", check=fresh),
    Case("runs: status.json from before code hashes, rerun says so", harness(), stream="out",
         line=r"^rerun .*no code hash", setup=spoil("status.json", edit_status(code_hash=None)), rows="base",
         check=fresh),
    Case("runs: rows.parquet with zero rows, rerun", harness(), line=r"^rerun .*rows\.parquet.* no rows",
         stream="out", setup=spoil("rows.parquet", zero_rows), rows="base", check=fresh),
    Case("runs: rows.parquet without the value column, rerun", harness(), line=r"^rerun .*rows\.parquet.*column",
         stream="out", setup=spoil("rows.parquet", other_columns), rows="base", check=fresh),
    Case("runs: truncated checkpoint.pt, rerun", harness(), line=r"^rerun .*checkpoint\.pt", stream="out",
         setup=spoil("checkpoint.pt", truncate(0.5)), rows="base", check=fresh),
    Case("runs: checkpoint.pt with one byte flipped (bad CRC), rerun", harness(), line=r"^rerun .*checkpoint\.pt",
         stream="out", setup=spoil("checkpoint.pt", flip_byte), rows="base", check=fresh),
    # 2. each run file missing, empty, truncated, the wrong JSON type, binary bytes
    Case("runs: status.json missing beside rows, rerun", harness(), line=r"^rerun .*status\.json", stream="out",
         setup=drop("status.json"), rows="base", check=fresh),
    Case("runs: status.json empty, rerun", harness(), line=r"^rerun .*status\.json", stream="out",
         setup=spoil("status.json", b""), rows="base", check=fresh),
    Case("runs: status.json holds [\"ok\"], rerun", harness(), line=r"^rerun .*status\.json.*list",
         stream="out", setup=spoil("status.json", b'["ok"]'), rows="base", check=fresh),
    Case("runs: status.json binary bytes, rerun", harness(), line=r"^rerun .*status\.json", stream="out",
         setup=spoil("status.json", bytes(range(256)) * 4), rows="base", check=fresh),
    Case("runs: status.json holds \"ok\" (a JSON string), rerun", harness(), line=r"^rerun .*status\.json",
         stream="out", setup=spoil("status.json", b'"ok"'), rows="base", check=fresh),
    Case("runs: rows.parquet missing, rerun", harness(), line=r"^rerun .*rows\.parquet", stream="out",
         setup=drop("rows.parquet"), rows="base", check=fresh),
    Case("runs: rows.parquet empty (0 bytes), rerun", harness(), line=r"^rerun .*rows\.parquet", stream="out",
         setup=spoil("rows.parquet", b""), rows="base", check=fresh),
    Case("runs: rows.parquet binary bytes, rerun", harness(), line=r"^rerun .*rows\.parquet", stream="out",
         setup=spoil("rows.parquet", os.urandom(4096)), rows="base", check=fresh),
    Case("runs: checkpoint.pt missing, rerun", harness(), line=r"^rerun .*checkpoint\.pt", stream="out",
         setup=drop("checkpoint.pt"), rows="base", check=fresh),
    Case("runs: checkpoint.pt empty, rerun", harness(), line=r"^rerun .*checkpoint\.pt", stream="out",
         setup=spoil("checkpoint.pt", b""), rows="base", check=fresh),
    Case("runs: .hydra/config.yaml binary bytes, rerun", harness(), line=r"^rerun .*config\.yaml", stream="out",
         setup=spoil(".hydra/config.yaml", bytes(range(256)) * 4), rows="base", check=fresh),
    Case("runs: .hydra/config.yaml holds a list, rerun", harness(), line=r"^rerun .*config\.yaml", stream="out",
         setup=spoil(".hydra/config.yaml", b"- ok\n"), rows="base", check=fresh),
    Case("runs: report, a status.json holding [\"ok\"]", REPORT, line=r"bad/status\.json", setup=report_with(
        "status.json", b'["ok"]'), check=report_ok(2)),
    Case("runs: report, a status.json of binary bytes", REPORT, line=r"bad/status\.json", setup=report_with(
        "status.json", bytes(range(256)) * 4), check=report_ok(2)),
    Case("runs: report, a .hydra/config.yaml of binary bytes", REPORT, line=r"bad/\.hydra/config\.yaml",
         setup=report_with(".hydra/config.yaml", bytes(range(256)) * 4), check=report_ok(2)),
    Case("runs: report, a .hydra/config.yaml holding a list", REPORT, line=r"bad/\.hydra/config\.yaml",
         setup=report_with(".hydra/config.yaml", b"- ok\n"), check=report_ok(2)),
    Case("runs: claims, a status.json holding [\"ok\"]", CLAIMS, line=r"bad/status\.json",
         setup=report_with("status.json", b'["ok"]', sweeps=True)),
    Case("runs: claims, a status.json of binary bytes", CLAIMS, line=r"bad/status\.json",
         setup=report_with("status.json", bytes(range(256)) * 4, sweeps=True)),
    Case("runs: claims, a truncated checkpoint.pt", CLAIMS, rc=2, line=r"^harness\.claims: error: .*bad/checkpoint\.pt",
         setup=report_with("checkpoint.pt", truncate(0.5), sweeps=True), unchanged=True),
    Case("runs: make eval on a run whose rows.parquet is truncated refuses", [*LM, "{run}", "--tasks", "passkey"],
         rc=2, line=LM_ERR + r".*rows\.parquet.*python -m harness", setup=spoil("rows.parquet", truncate(0.3)),
         unchanged=True),
    Case("runs: make eval on a run with zero rows refuses", [*LM, "{run}", "--tasks", "passkey"], rc=2,
         line=LM_ERR + r".*rows\.parquet.* no rows", setup=spoil("rows.parquet", zero_rows), unchanged=True),
    Case("runs: make eval on a run whose status.json is binary refuses", [*LM, "{run}", "--tasks", "passkey"],
         rc=2, line=LM_ERR + r".*status\.json", setup=spoil("status.json", bytes(range(256))), unchanged=True),
    # 3. a full disk, unwritable directories
    Case("runs: hydra.sweep.dir in a read-only dir", harness("hydra.sweep.dir={tmp}/ro/sweep", multirun=True),
         rc=2, line=r"^harness: error: cannot write .*ro", setup=locked(lambda ctx: ctx.tmp / "ro"),
         skip=can_lock_dirs, check=unlocking()),
    Case("runs: hydra.sweep.dir under a file", harness("hydra.sweep.dir={tmp}/afile/sweep", multirun=True),
         rc=2, line=r"^harness: error: cannot write .*afile.* is a file", unchanged=True,
         setup=lambda ctx: (ctx.tmp / "afile").write_text("x")),
    Case("runs: hydra.run.dir in a read-only dir", harness("hydra.run.dir={tmp}/ro/run"), rc=2,
         line=r"^harness: error: cannot write .*ro", setup=locked(lambda ctx: ctx.tmp / "ro"), skip=can_lock_dirs,
         check=unlocking()),
    Case("runs: HOME is a file (no ~/.cache)", harness(), line=r"^ok ", stream="out", rows="base",
         setup=with_env(HOME="{tmp}/afile"), check=finished_ok),
    Case("runs: TMPDIR does not exist", harness(), line=r"^ok ", stream="out", rows="base",
         setup=with_env(TMPDIR="{tmp}/nonexistent"), check=finished_ok),
    Case("runs: disk full writing rows.parquet", full_disk("rows.parquet"), rc=1,
         line=r"^failed .*rows\.parquet.*No space left", stream="out", check=rerun_after(not_finished)),
    Case("runs: disk full writing checkpoint.pt", full_disk("checkpoint.pt"), rc=1,
         line=r"^failed .*checkpoint\.pt.*No space left", stream="out", check=rerun_after(not_finished)),
    Case("runs: disk full writing status.json", full_disk("status.json"), rc=1, stream="out",
         line=r"^failed .*status\.json.*No space left", check=rerun_after(not_finished)),
    Case("runs: disk full writing .hydra/config.yaml (Hydra's write)", full_disk("config.yaml"), rc=1,
         line=r"^harness: error: .*config\.yaml.*No space left", check=rerun_after(not_finished)),
    Case("runs: disk full on a rerun keeps nothing stale as finished",
         full_disk("rows.parquet"), rc=1, line=r"^failed .*rows\.parquet.*No space left", stream="out",
         setup=spoil("status.json", edit_status(config_hash="000000000000")), rows="aside",
         check=lambda ctx, procs: not_finished(ctx, procs) + previous_rows_kept(ctx, procs)),
    Case("runs: report, disk full writing report.md", full_disk("report.md", "{tmp}/sweep", "--wandb", "disabled",
                                                                entry="report"), rc=1,
         line=r"^harness\.report: error: .*report\.md.*No space left", setup=old_report, check=old_report_kept),
    # 4. threads=-1; 5. shell completion
    Case("runs: threads=-1", harness("threads=-1"), rc=2, line=r"^harness: error: .*threads", unchanged=True,
         setup=with_base),
    Case("runs: shell completion (harness -sc query=bash)", COMPLETION.split(), setup=completion,
         stream="out", check=completes),
    # the hostile or hurried user's run dirs
    Case("runs: run dir is a file", harness(), rc=2, line=r"^harness: error: .* is a file", unchanged=True,
         setup=run_dir_as("file")),
    Case("runs: run dir is a symlink loop", harness(), rc=2, line=r"^harness: error: .*symlink", unchanged=True,
         setup=run_dir_as("loop")),
    Case("runs: run dir is a dangling symlink (scratch disk not mounted)", harness(), rc=2,
         line=r"^harness: error: .*scratch_disk_not_mounted", unchanged=True, setup=run_dir_as("dangling")),
    Case("runs: .hydra is a file", harness(), rc=2, line=r"^harness: error: .*\.hydra.* not a directory",
         unchanged=True, setup=hydra_as("file")),
    Case("runs: .hydra/config.yaml is a directory", harness(), rc=2, line=r"^harness: error: .*config\.yaml",
         unchanged=True, setup=hydra_as("dir")),
    Case("runs: rows.parquet is a directory", harness(), rc=2, line=r"^harness: error: .*rows\.parquet.* directory",
         unchanged=True, setup=spoil("rows.parquet", a_directory)),
    Case("runs: status.json is a directory", harness(), rc=2, line=r"^harness: error: .*status\.json.* directory",
         unchanged=True, setup=spoil("status.json", a_directory)),
    Case("runs: status.json is a FIFO (reading it would block), rerun", harness(), line=r"^rerun .*status\.json.*FIFO",
         stream="out", setup=spoil("status.json", a_fifo), rows="base", check=fresh),
    Case("runs: status.json of 64 MiB, rerun", harness(), line=r"^rerun .*status\.json", stream="out",
         setup=spoil("status.json", huge_status), rows="base", check=fresh),
    Case("runs: status.json saved with a BOM by an editor, kept", harness(), line=r"^skip ", stream="out",
         setup=spoil("status.json", with_bom)),
    Case("runs: status.json with config_hash a list, rerun", harness(), line=r"^rerun .*config", stream="out",
         setup=spoil("status.json", edit_status(config_hash=[])), rows="base", check=fresh),
    Case("runs: status.json with an unknown status, rerun", harness(), line=r"^rerun .*status\.json.*'done'",
         stream="out", setup=spoil("status.json", edit_status(status="done")), rows="base", check=fresh),
    Case("runs: rows.parquet is a CSV someone saved over it, rerun", harness(), line=r"^rerun .*rows\.parquet",
         stream="out", setup=spoil("rows.parquet", rows_as_csv), rows="base", check=fresh),
    Case("runs: checkpoint.pt a symlink to /dev/zero, rerun", harness(), line=r"^rerun .*checkpoint\.pt",
         stream="out", setup=spoil("checkpoint.pt", link_to("/dev/zero")), rows="base", check=fresh),
    Case("runs: checkpoint.pt a dangling symlink, rerun", harness(), line=r"^rerun .*checkpoint\.pt",
         stream="out", setup=spoil("checkpoint.pt", link_to("/nonexistent/ckpt.pt")), rows="base", check=fresh),
    Case("runs: checkpoint.pt from another encoding's run, rerun", harness(),
         line=r"^rerun .*checkpoint\.pt.*alibi", stream="out", setup=other_encoding_checkpoint, check=fresh),
    Case("runs: make eval with a checkpoint from another encoding's run refuses",
         [*LM, "{run}", "--tasks", "passkey"], rc=2, line=LM_ERR + r".*checkpoint\.pt.*alibi",
         setup=other_encoding_checkpoint, unchanged=True),
    Case("runs: temp files of a killed write are ignored and cleaned up", harness(), line=r"^skip ", stream="out",
         setup=temp_leftovers, check=lambda ctx, procs: skipped(ctx, procs) + no_temp(ctx, procs)),
    Case("runs: status.json a symlink to another run's status, rerun replaces the link only", harness(),
         line=r"^rerun ", stream="out", setup=status_links_elsewhere, check=other_untouched),
    Case("runs: rows.parquet read-only (chmod 444) is still replaced on a rerun", harness(), line=r"^rerun ",
         stream="out", setup=immutable_rows, rows="base", check=fresh),
    Case("runs: out= is a symlink loop", harness("out={tmp}/loop"), rc=2, line=r"^harness: error: .*loop",
         unchanged=True, setup=out_loop),
    Case("runs: permissions changed mid-sweep", harness(*TINY_SWEEP, multirun=True), rc=1, stream="out",
         rows="more", setup=lock_sweep_after_first_run, skip=can_lock_dirs, check=sweep_keeps_first),
    Case("runs: a second sweep with another preset into the same hydra.sweep.dir is refused",
         harness("encoding=rope", "sweep=prope", "encoding.partial_rotary_factor=0.25", "seeds=1",
                 "hydra/launcher=basic", "hydra.sweep.dir={tmp}/shared", multirun=True),
         rc=2, line=r"^harness: error: .*sweep 'single'.*hydra\.sweep\.dir",
         setup=sweep_then("encoding=rope", "encoding.partial_rotary_factor=0.25", "seed=0"), check=first_sweep_kept),
    Case("runs: a lock from a host whose clock is a day ahead (clock skew) is stale", harness(),
         line=r"taking over the stale lock", setup=lock_of("otherhost", age_s=-86400.0), rows="base",
         check=lock_taken),
    Case("runs: .lock is a directory", harness(), rc=2, line=r"^harness: error: .*\.lock", unchanged=True,
         setup=lock_is_dir),
    Case("runs: report, Ctrl-C while writing report.md keeps the old one", ["-c", SIGINT_AT, "report.md",
                                                                           "{tmp}/sweep", "--wandb", "disabled"],
         rc=130, line=r"^harness\.report: interrupted", setup=old_report, check=old_report_kept),
    Case("runs: report, rows.parquet is a directory among good runs", REPORT, line=r"bad/rows\.parquet",
         setup=report_with("rows.parquet", a_directory), check=report_ok(2)),
    Case("runs: report, a symlink loop among the run dirs", REPORT, line=r"^wrote ", stream="out",
         setup=lambda ctx: (sweep_copies("good1", "good2")(ctx), (ctx.where / "loop").symlink_to("loop")),
         check=report_ok(2)),
    Case("runs: report, report.md is a directory", REPORT, rc=1, line=r"^harness\.report: error: .*report\.md",
         setup=lambda ctx: (sweep_copies("good1")(ctx), (ctx.where / "report.md").mkdir())),
]
