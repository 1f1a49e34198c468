"""Resume keyed on the code and on whole files: a finished run is one whose status, rows and checkpoint read back
whole and whose config and code hashes are the current ones; anything else is computed again with one line naming
the file (or the change). Readers (results.load, the report, make eval) never traceback on a spoiled run file,
a full disk leaves nothing half-written, and the command line checks run dirs before any work."""
import errno
import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import torch

from harness import results, runner, train
from harness.lmeval import rows as lm_rows
from tests.tiny_runs import ROOT, command


@pytest.fixture(scope="module")
def done(tmp_path_factory, tiny):
    """A finished tiny run (and its config), made once; tests spoil copies of it."""
    base = tmp_path_factory.mktemp("done")
    cfg = tiny(base)
    assert runner.run(cfg, base / "run", progress=False)["status"] == "ok"
    return cfg, base / "run"


@pytest.fixture
def run(done, tmp_path):
    cfg, base = done
    shutil.copytree(base, tmp_path / "run")
    return cfg, tmp_path / "run"


def lines(out, start):
    return [line for line in out.splitlines() if line.startswith(start)]


# ---- the code hash

def test_status_records_the_config_and_code_hashes_and_the_checkpoint(done):
    cfg, d = done
    s = results.read_status(d)
    assert s["config_hash"] == results.config_hash(cfg) and s["code_hash"] == results.code_hash()
    assert s["checkpoint"] is True and len(s["code_hash"]) == 12


def test_the_code_hash_covers_run_code_and_kernel_sources_not_the_report_or_conf(tmp_path, monkeypatch):
    import harness
    pkg = tmp_path / "pkg" / "harness"
    for rel in ("__init__.py", "train.py", "rope/csrc/rope_cpu.c", "tasks/ruler_words.txt", "report/build.py",
                "claims/judge.py", "conformance/run.py", "conf/train/default.yaml"):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(rel)
    monkeypatch.setattr(harness, "__file__", str(pkg / "__init__.py"))

    def digest():
        results.code_hash.cache_clear()
        return results.code_hash()
    try:
        first = digest()
        for rel, counts in (("report/build.py", False), ("claims/judge.py", False), ("conformance/run.py", False),
                            ("conf/train/default.yaml", False), ("train.py", True), ("rope/csrc/rope_cpu.c", True),
                            ("tasks/ruler_words.txt", True)):
            (pkg / rel).write_text(rel + " edited")
            now = digest()
            assert (now != first) == counts, rel
            first = now
    finally:
        results.code_hash.cache_clear()


@pytest.mark.parametrize("recorded, why", [("000000000000", "code hash 000000000000 -> "),
                                           (None, "no code hash in its status.json")])
def test_a_finished_run_made_by_other_code_is_computed_again(run, capsys, recorded, why):
    cfg, d = run
    s = results.read_status(d)
    s.pop("code_hash")
    results.write_json(d / results.STATUS, {**s, **({"code_hash": recorded} if recorded else {})})
    assert runner.run(cfg, d, progress=False)["status"] == "ok"
    (line,) = lines(capsys.readouterr().out, "rerun ")
    assert why in line
    assert results.read_status(d)["code_hash"] == results.code_hash()


def test_a_finished_run_of_this_code_is_skipped(run, monkeypatch, capsys):
    cfg, d = run
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("a finished run was trained again"))
    assert runner.run(cfg, d, progress=False)["status"] == "ok"
    assert lines(capsys.readouterr().out, "skip ")


# ---- every run file, every way it can be spoiled

def _zero_rows(p):
    pd.read_parquet(p).iloc[:0].to_parquet(p, index=False)


def _flip(p):
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0xFF
    p.write_bytes(bytes(b))


def _replace(p, make):
    p.unlink()
    make(p)


SPOILED = {  # name: (file, how, what the line says)
    "status missing": (results.STATUS, lambda p: p.unlink(), "status.json is missing beside rows.parquet"),
    "status empty": (results.STATUS, lambda p: p.write_bytes(b""), "status.json is empty"),
    "status truncated": (results.STATUS, lambda p: p.write_bytes(p.read_bytes()[:30]), "not whole JSON"),
    "status a list": (results.STATUS, lambda p: p.write_text('["ok"]'), "holds a JSON list"),
    "status a string": (results.STATUS, lambda p: p.write_text('"ok"'), "holds a JSON string"),
    "status binary": (results.STATUS, lambda p: p.write_bytes(bytes(range(256))), "binary bytes"),
    "status unknown": (results.STATUS, lambda p: p.write_text('{"status": "done"}'), "status 'done'"),
    "status huge": (results.STATUS, lambda p: p.write_text(json.dumps({"status": "ok", "x": "y" * (2 << 20)})),
                    "too big"),
    "status a FIFO": (results.STATUS, lambda p: _replace(p, os.mkfifo), "is a FIFO"),
    "rows missing": (results.ROWS, lambda p: p.unlink(), "rows.parquet is missing"),
    "rows empty": (results.ROWS, lambda p: p.write_bytes(b""), "rows.parquet is truncated or not a parquet"),
    "rows zero": (results.ROWS, _zero_rows, "rows.parquet has no rows"),
    "rows truncated": (results.ROWS, lambda p: p.write_bytes(p.read_bytes()[:200]), "truncated or not a parquet"),
    "rows binary": (results.ROWS, lambda p: p.write_bytes(os.urandom(3000)), "truncated or not a parquet"),
    "rows csv": (results.ROWS, lambda p: p.write_text(pd.read_parquet(p).to_csv()), "truncated or not a parquet"),
    "rows columns": (results.ROWS, lambda p: pd.read_parquet(p).drop(columns="value").to_parquet(p),
                     "lacks the column(s) ['value']"),
    "rows of another run": (results.ROWS, lambda p: pd.read_parquet(p).assign(run_id="x/y").to_parquet(p),
                            "holds rows of ['x/y']"),
    "checkpoint missing": (results.CHECKPOINT, lambda p: p.unlink(), "checkpoint.pt is missing"),
    "checkpoint empty": (results.CHECKPOINT, lambda p: p.write_bytes(b""), "not a whole zip"),
    "checkpoint truncated": (results.CHECKPOINT, lambda p: os.truncate(p, p.stat().st_size // 2), "not a whole zip"),
    "checkpoint flipped": (results.CHECKPOINT, _flip, "fails its CRC"),
    "checkpoint /dev/zero": (results.CHECKPOINT, lambda p: _replace(p, lambda q: q.symlink_to("/dev/zero")),
                             "is a device"),
    "checkpoint dangling": (results.CHECKPOINT, lambda p: _replace(p, lambda q: q.symlink_to("/nonexistent")),
                            "checkpoint.pt is missing"),
    "checkpoint of a dict": (results.CHECKPOINT, lambda p: torch.save({"w": torch.zeros(2)}, p),
                             "not a harness checkpoint"),
    "config binary": (".hydra/config.yaml", lambda p: p.write_bytes(bytes(range(256))), "binary bytes, not YAML"),
    "config a list": (".hydra/config.yaml", lambda p: p.write_text("- ok\n"), "holds a YAML list"),
    "config truncated": (".hydra/config.yaml", lambda p: p.write_text("a: [1, 2"), "not whole YAML"),
}


@pytest.mark.parametrize("case", list(SPOILED))
def test_a_spoiled_run_file_is_named_and_the_run_computed_again(run, capsys, case):
    cfg, d = run
    name, spoil, says = SPOILED[case]
    (d / name).parent.mkdir(exist_ok=True)
    if not (d / name).exists():
        (d / name).write_text("a: 1\n")  # the runner API writes no .hydra: a good one first
    spoil(d / name)
    status, problem = results.check_run(d)
    assert problem and says in problem and str(d) in problem, problem
    assert not results.finished(d)
    assert runner.run(cfg, d, progress=False)["status"] == "ok"
    (line,) = lines(capsys.readouterr().out, "rerun ")
    assert says in line and "computed again" in line
    if name.startswith(".hydra"):  # Hydra rewrites it at a job's start (the runner API writes no .hydra)
        (d / name).write_text("a: 1\n")
    assert results.finished(d) and results.check_run(d) == (results.read_status(d), None)
    assert results.checkpoint_of(d, cfg) is None


def test_a_checkpoint_of_another_encoding_is_not_this_runs(run, tmp_path, tiny):
    cfg, d = run
    other = tiny(tmp_path, **{"encoding.name": "alibi"})
    assert runner.run(other, tmp_path / "alibi", progress=False)["status"] == "ok"
    shutil.copy(tmp_path / "alibi" / results.CHECKPOINT, d / results.CHECKPOINT)
    assert results.finished(d)  # a whole checkpoint: only the run's config tells it is another run's
    problem = results.checkpoint_of(d, cfg)
    assert "holds another run's model (encoding.name alibi, not rope" in problem


def test_a_bom_in_status_json_is_not_damage(run):
    cfg, d = run
    p = d / results.STATUS
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    assert results.check_run(d)[1] is None


def test_no_checkpoint_is_needed_where_the_run_wrote_none(tmp_path, tiny):
    cfg = tiny(tmp_path, checkpoint=False)
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    assert not (tmp_path / "run" / results.CHECKPOINT).exists() and results.finished(tmp_path / "run")
    assert results.check_run(tmp_path / "run")[1] is None and results.checkpoint_of(tmp_path / "run", cfg) is None
    assert "checkpoint=true asks for one" in results.checkpoint_of(tmp_path / "run", tiny(tmp_path))


def test_a_run_dir_in_the_way_is_one_line_and_no_work(tmp_path, tiny, monkeypatch, capsys):
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("trained into an unusable run dir"))
    (tmp_path / "file").write_text("notes")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "rows_dir" / results.ROWS).mkdir(parents=True)
    (tmp_path / "lock_dir" / ".lock").mkdir(parents=True)
    for name, says in (("file", "is a file, not a directory"), ("loop", "a symlink loop"),
                       ("rows_dir", "rows.parquet is a directory"), ("lock_dir", ".lock is a directory")):
        assert runner.run(tiny(tmp_path), tmp_path / name, progress=False)["status"] == "failed"
        (line,) = lines(capsys.readouterr().out, "failed ")
        assert says in line, line
    assert (tmp_path / "file").read_text() == "notes"


def test_temp_files_of_killed_writes_are_cleaned_by_the_next_run(run):
    cfg, d = run
    (d / ".rows.parquet.x1.tmp").write_bytes(b"half")
    (d / ".notes.tmp").write_bytes(b"not ours")
    runner.run(cfg, d, progress=False)
    assert not (d / ".rows.parquet.x1.tmp").exists() and (d / ".notes.tmp").exists()


# ---- a full disk

def full_at(monkeypatch, name):
    """os.fsync of `name`'s temp file fails with ENOSPC (a disk that filled while the bytes were buffered)."""
    real = os.fsync

    def fsync(fd):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(f".{name}."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)


def test_atomic_write_names_the_file_and_leaves_nothing(tmp_path, monkeypatch):
    results.write_json(tmp_path / "status.json", {"status": "ok"})
    full_at(monkeypatch, "status.json")
    with pytest.raises(OSError) as e:
        results.write_json(tmp_path / "status.json", {"status": "running"})
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "status.json")
    assert results.write_error(e.value) == f"cannot write {tmp_path / 'status.json'}: No space left on device (ENOSPC)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]
    assert results.read_status(tmp_path) == {"status": "ok"}


@pytest.mark.parametrize("name", [results.STATUS, results.ROWS, results.CHECKPOINT, results.TRAIN_LOG])
def test_a_full_disk_fails_the_run_in_one_line_and_nothing_reads_as_finished(tmp_path, tiny, monkeypatch, capsys,
                                                                             name):
    cfg = tiny(tmp_path)
    d = tmp_path / "run"
    with monkeypatch.context() as m:
        full_at(m, name)
        status = runner.run(cfg, d, progress=False)
    assert status["status"] == "failed" and "No space left on device" in status["message"]
    (line,) = lines(capsys.readouterr().out, "failed ")
    assert f"cannot write {d / name}: No space left on device (ENOSPC)" in line
    assert not results.finished(d) and not list(d.glob(".*.tmp")) and not (d / runlock_name()).exists()
    assert runner.run(cfg, d, progress=False)["status"] == "ok" and results.finished(d)


def runlock_name():
    from harness.infra import runlock
    return runlock.LOCK


# ---- readers never traceback

@pytest.mark.parametrize("content", [b'["ok"]', bytes(range(256)), b"", b'{"status": 3}'])
def test_load_leaves_out_and_names_a_run_whose_status_does_not_read(run, tmp_path, capsys, content):
    _, d = run
    good = tmp_path / "good"
    shutil.copytree(d, good)
    (d / results.STATUS).write_bytes(content)
    df = results.load(tmp_path)
    assert len(df) == len(results.load(good))
    assert [p for p, _ in df.attrs["skipped"]] == [str(d / results.STATUS)]
    assert str(d / results.STATUS) in capsys.readouterr().err


def test_run_dirs_leave_out_a_run_whose_config_does_not_read(run, tmp_path):
    _, d = run
    (d / ".hydra").mkdir()
    (d / ".hydra" / "config.yaml").write_bytes(bytes(range(256)))
    assert results.run_dirs(tmp_path) == [] and results.load(tmp_path).empty


def test_read_train_log_of_garbage_is_empty(run):
    _, d = run
    (d / results.TRAIN_LOG).write_bytes(bytes(range(256)) * 10)
    assert results.read_train_log(d) == []


# ---- make eval: never the lm-eval rows alone in a run's rows file

def test_make_eval_refuses_a_run_whose_rows_do_not_read(run):
    cfg, d = run
    (d / results.ROWS).write_bytes((d / results.ROWS).read_bytes()[:300])
    problem = lm_rows.run_problem(d, cfg)
    assert str(d / results.ROWS) in problem and "recompute the run first" in problem
    with pytest.raises(ValueError, match="recompute the run first"):
        lm_rows.evaluate(d, ["passkey"])


def test_make_eval_refuses_a_checkpoint_of_another_run(run, tmp_path, tiny):
    cfg, d = run
    other = tiny(tmp_path, **{"encoding.name": "alibi"})
    assert "encoding alibi, not rope" in lm_rows.run_problem(d, other)
    assert lm_rows.run_problem(d, cfg) is None


def test_the_recompute_hint_is_the_runs_own_command(tmp_path):
    d = tmp_path / "out" / "sweeps" / "single" / "encoding=rope"
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text("- encoding=rope\n- eval.lens=[16,32]\n")
    hint = lm_rows.recompute_hint(d)
    assert hint.startswith(f"`python -m harness -m hydra.sweep.dir={d.parent} encoding=rope 'eval.lens=[16,32]'`")
    assert "rerun the command" in lm_rows.recompute_hint(tmp_path)


def test_a_merge_into_rows_spoiled_meanwhile_marks_the_run_to_be_computed_again(run, tiny):
    cfg, d = run
    new = results.complete([dict(metric="x/acc", eval_len=None, protocol="lm_eval", value=1.0, unit="frac")],
                           results.base_row(cfg, results.read_status(d)["run_id"]), 4)
    (d / results.ROWS).write_bytes(b"garbage")
    lm_rows._merge(d, new)
    assert not results.finished(d) and "training rows are lost" in results.check_run(d)[1]


# ---- the command line: run dirs checked before any work, completion, threads

def cli(tmp_path, *args, env=None):
    cmd = command(tmp_path, *args)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def test_the_run_dirs_named_before_launch_are_hydras(tmp_path):
    from hydra import initialize_config_dir
    from harness.config import overrides
    argv = command(tmp_path, "encoding=rope,alibi", "seed=0,1")[3:]  # after `python -m harness`: -m, overrides
    with initialize_config_dir(config_dir=overrides.CONF, version_base="1.3"):
        cfg, jobs = overrides.jobs_of(argv)
        predicted = overrides.job_dirs(cfg, jobs, multirun=True)
    p = cli(tmp_path, "encoding=rope,alibi", "seed=0,1")
    assert p.returncode == 0, p.stderr[-2000:]
    made = sorted(d for d in (tmp_path / "out" / "sweeps" / "single").iterdir() if d.is_dir())
    assert sorted(predicted) == made and len(made) == 4


def test_a_file_where_a_run_dir_goes_is_refused_before_any_work(tmp_path):
    # where the run dir goes, as the command line predicts it (that this is the dir Hydra makes is
    # test_the_run_dirs_named_before_launch_are_hydras's), rather than running the sweep once to find it
    from hydra import initialize_config_dir
    from harness.config import overrides
    with initialize_config_dir(config_dir=overrides.CONF, version_base="1.3"):
        cfg, jobs = overrides.jobs_of(command(tmp_path, "encoding=rope")[3:])
        (run,) = overrides.job_dirs(cfg, jobs, multirun=True)
    assert run.parent == tmp_path / "out" / "sweeps" / "single"
    run.parent.mkdir(parents=True)
    run.write_text("notes")
    p = cli(tmp_path, "encoding=rope")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == (f"harness: error: run dir {run} is a file, not a directory: move it away, or "
                                f"choose another out=")


def test_threads_torch_refuses_is_one_line_before_any_work(tmp_path):
    p = cli(tmp_path, "threads=-1")
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith("harness: error: ") and "threads" in p.stderr
    assert not (tmp_path / "out").exists()


def test_shell_completion_queries_complete(tmp_path):
    line = "harness encoding=ro"
    p = subprocess.run([sys.executable, "-m", "harness", "-sc", "query=bash"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "COMP_LINE": line, "COMP_POINT": str(len(line))})
    assert p.returncode == 0 and "encoding=rope" in p.stdout.split(), (p.stdout, p.stderr)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs (a disk with no room for a checkpoint), where this user may mount one; else skipped."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()[:100]}")
    try:
        yield mnt
    finally:  # lazily when busy: a W&B service the run started may still hold a file there for a moment
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_really_full_disk_fails_the_run_in_one_line_and_leaves_nothing_half_written(tmp_path, tiny, tiny_disk,
                                                                                     capsys):
    d = tiny_disk / "run"
    status = runner.run(tiny(tmp_path), d, progress=False)
    assert status["status"] == "failed"
    (line,) = lines(capsys.readouterr().out, "failed ")
    assert f"cannot write {d / results.CHECKPOINT}: No space left on device (ENOSPC)" in line
    assert not results.finished(d) and not list(d.glob(".*.tmp")) and not (d / results.CHECKPOINT).exists()


def test_another_sweeps_run_with_another_config_is_not_replaced(tiny, tmp_path, monkeypatch, capsys):
    cfg, d = tiny(tmp_path), tmp_path / "run"
    assert runner.run(cfg, d, run_id="test/run", progress=False)["status"] == "ok"  # as harness names it
    before = (d / results.ROWS).read_bytes()
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("another sweep's run was replaced"))
    mine = tiny(tmp_path, **{"sweep": "other", "train.lr": 1e-3})
    status = runner.run(mine, d, progress=False)
    assert status["status"] == "failed" and "holds a finished run of sweep 'test'" in status["message"]
    assert (d / results.ROWS).read_bytes() == before and results.finished(d)
    assert lines(capsys.readouterr().out, "failed ")


# ---- stale rows, colliding run dirs, empty out, zero-job sweeps (each failed on the code before the fix)

def test_rows_beside_a_running_status_are_not_results(run, capsys):
    """A rerun in progress (or killed) writes status 'running': results.load leaves its rows out, naming the run,
    and a rerun moves the previous rows aside before any work, so a kill mid-rerun leaves no rows to misread."""
    cfg, d = run
    assert len(results.load(d))
    results.write_json(d / results.STATUS, {**results.read_status(d), "status": "running"})
    df = results.load(d)
    assert df.empty and df.attrs["failed"] == [(str(d), "running")]
    assert "its status is 'running'" in capsys.readouterr().err
    results.retire_rows(d)
    assert not (d / results.ROWS).exists() and (d / (results.ROWS + ".previous")).is_file()


def test_two_overrides_that_differ_only_by_slash_get_two_run_dirs():
    from harness.config import resolvers
    a, b = resolvers.run_name("task.corpus=/d/a_b.txt"), resolvers.run_name("task.corpus=/d/a/b.txt")
    assert a != b and "/" not in a + b
    assert resolvers.run_name("encoding=rope,seed=0") == "encoding=rope,seed=0"  # nothing to escape: unchanged


@pytest.mark.parametrize("argv, says", [
    (["out="], "out is empty"),
    (["seeds=0", "sweep=extension"], "seeds must be >= 1"),
    (["encoding=rope,rope"], "two jobs resolve to one run dir"),
])
def test_a_sweep_that_would_write_nowhere_nothing_or_twice_is_refused_before_any_work(tmp_path, argv, says):
    cmd = [a for a in command(tmp_path, *argv) if not (a.startswith("out=") and argv == ["out="])] + argv[:1]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("harness: error: ") and says in p.stderr
    assert not (tmp_path / "out" / "sweeps").exists() and not (tmp_path / "sweeps").exists()


@pytest.mark.parametrize("argv, says", [
    (["hydra/launcher=joblib", "hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs must be any whole number but 0"),
    (["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=0"], "hydra.launcher.timeout_min must be >= 1"),
    (["threads=100000"], "threads=100000 is more than the"),
])
def test_launcher_settings_and_threads_a_machine_cannot_run_are_one_line_before_any_work(tmp_path, argv, says):
    """Before the fix: joblib's n_jobs=0 and submitit's timeout_min=0 were tracebacks, and threads=100000 spawned
    that many threads (starving the machine) before a traceback or a SIGSEGV."""
    p = cli(tmp_path, *argv)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("harness: error: ") and says in p.stderr
    assert not (tmp_path / "out" / "sweeps").exists()


def test_rows_edited_after_the_run_are_not_trusted_as_finished(run, capsys):
    """status.json records the rows file's sha256: rows cut down to the training rows beside status ok (before:
    skipped forever) are named and the run computed again."""
    cfg, d = run
    assert results.read_status(d)["rows_sha256"] == results.file_sha256(d / results.ROWS)
    df = pd.read_parquet(d / results.ROWS)
    df[df.protocol == "train"].to_parquet(d / results.ROWS, index=False)
    assert runner.run(cfg, d, progress=False)["status"] == "ok"
    (line,) = lines(capsys.readouterr().out, "rerun ")
    assert "is not the file the run wrote" in line and (pd.read_parquet(d / results.ROWS).protocol != "train").any()


def test_a_model_beside_a_budget_is_refused_not_dropped(tmp_path):
    """budget=4x sets the model; model=small beside it was dropped without a word (the run trained ladder4x)."""
    p = cli(tmp_path, "budget=4x", "model=small")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "budget=4x sets the model itself" in p.stderr and "model=small would be dropped" in p.stderr


@pytest.mark.parametrize("value, says", [("/d/a=b", "cannot read the value '/d/a=b' as it is; quote it: "
                                                   "out='/d/a=b'"),
                                         ("/d/é", "quote it: out='/d/é'"),
                                         ("/d/a,b", "is a sweep (its commas separate values), which runs with -m")])
def test_a_path_hydra_cannot_read_names_the_key_and_the_quoted_form(tmp_path, value, says):
    """Before: Hydra's grammar message ("mismatched input '=' expecting <EOF>", "LexerNoViableAltException") without
    the key or the fix, and a comma silently made two jobs of a single run."""
    cmd = [a for a in command(tmp_path) if a != "-m" and not a.startswith("out=")] + [f"out={value}"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("harness: error: out") and says in p.stderr


def test_wandb_on_a_full_disk_after_the_rows_is_one_line_and_the_run_stays_ok(tmp_path, tiny_disk):
    """Before: W&B's log handlers failed on every record (31,690 lines of logging tracebacks on stderr) and the
    status rewrite after it failed the run (exit 1), with its rows written."""
    cmd = [a if a != "wandb.mode=disabled" else "wandb.mode=offline" for a in command(tmp_path)
           if a not in ("-m",) and not a.startswith("out=")] + [f"out={tiny_disk}"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    text = (p.stdout + p.stderr).replace("\r", "\n")
    lines_ = [x for x in text.splitlines() if x.strip() and "it/s" not in x]  # not the progress bars
    assert p.returncode == 0 and "Traceback" not in text and len(lines_) <= 3, lines_[:20]  # ok, W&B's two
    said = [line for line in lines_ if "W&B" in line or "wandb offline failed" in line]
    assert 1 <= len(said) <= 2 and any("No space left on device" in line for line in said), said
    (status,) = list(tiny_disk.glob("runs/*/status.json"))
    assert json.loads(status.read_text())["status"] == "ok"


def test_hf_from_run_refuses_a_config_a_later_command_rewrote(tmp_path, capsys):
    """Before: --from-run read .hydra/config.yaml as it found it, whatever run made the rows."""
    import yaml
    from harness.hf.cli import main
    p = subprocess.run([a for a in command(tmp_path, "encoding=rope") if a != "-m"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = [d for d in (tmp_path / "out" / "runs").iterdir() if d.is_dir()]
    assert main(["--from-run", str(run)]) == 0 and "rope_parameters" in capsys.readouterr().out
    f = run / ".hydra" / "config.yaml"
    cfg = yaml.safe_load(f.read_text())
    cfg["encoding"]["base"] = 500000.0
    f.write_text(yaml.safe_dump(cfg))
    assert main(["--from-run", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not the config of the run" in err and "a later command rewrote it" in err
