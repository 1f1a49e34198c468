"""The run-dir lock: one live holder, stale locks taken over, busy runs skipped or waited for, and two
sweeps on one out= computing each run once."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from harness import results, runner, train
from harness.infra import runlock
from tests.tiny_runs import ROOT, command


def dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid  # reaped: no process has this pid now (reuse within the test is vanishingly unlikely)


def write_lock(run_dir, age_s=0.0, **info):
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / runlock.LOCK
    path.write_text(json.dumps({"since": time.time() - age_s, "token": "someone", **info}))
    os.utime(path, (time.time() - age_s,) * 2)
    return path


def test_one_live_holder_at_a_time(tmp_path):
    lock = runlock.claim(tmp_path)
    assert lock is not None and runlock.claim(tmp_path) is None  # this process is alive: held
    info = runlock.holder(tmp_path)
    assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
    lock.release()
    assert runlock.holder(tmp_path) is None
    again = runlock.claim(tmp_path)
    assert again is not None
    again.release()


def test_a_dead_pid_on_this_host_is_stale_and_taken_over(tmp_path, capsys):
    write_lock(tmp_path, pid=dead_pid(), host=socket.gethostname())
    lock = runlock.claim(tmp_path)
    assert lock is not None and runlock.holder(tmp_path)["pid"] == os.getpid()
    assert "taking over the stale lock of pid" in capsys.readouterr().err
    lock.release()


def test_another_host_is_stale_only_when_its_heartbeat_stops(tmp_path):
    write_lock(tmp_path, age_s=10, pid=1, host="elsewhere")
    assert runlock.claim(tmp_path) is None  # fresh heartbeat: cannot test its pid, so it is alive
    write_lock(tmp_path, age_s=runlock.STALE_S + 1, pid=1, host="elsewhere")
    lock = runlock.claim(tmp_path)
    assert lock is not None
    lock.release()


def test_release_leaves_a_lock_that_is_no_longer_ours(tmp_path):
    lock = runlock.claim(tmp_path)
    write_lock(tmp_path, pid=os.getpid(), host=socket.gethostname())  # taken over by someone else meanwhile
    lock.release()
    assert runlock.holder(tmp_path)["token"] == "someone"


def test_heartbeat_keeps_a_long_run_fresh(tmp_path, monkeypatch):
    monkeypatch.setattr(runlock, "HEARTBEAT_S", 0.05)
    lock = runlock.claim(tmp_path)
    os.utime(tmp_path / runlock.LOCK, (time.time() - 1000,) * 2)
    time.sleep(0.5)
    assert runlock.holder(tmp_path)["age_s"] < 1
    lock.release()


def test_a_busy_run_is_skipped_untouched_or_waited_for(tmp_path, monkeypatch, capsys, tiny):
    cfg, run_dir = tiny(tmp_path), tmp_path / "run"
    held = runlock.claim(run_dir)
    fit = train.fit
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("a busy run was trained"))
    assert runner.run(cfg, run_dir, progress=False, busy="skip")["status"] == "busy"
    assert sorted(p.name for p in run_dir.iterdir()) == [runlock.LOCK]
    assert capsys.readouterr().out.startswith("busy ")

    def finish_then_release():  # the holder finishes the run, then lets go
        monkeypatch.setattr(train, "fit", fit)
        runner._run(cfg, run_dir, "run", False, results.config_hash(cfg))
        monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("a run finished meanwhile was trained"))
        held.release()
    monkeypatch.setattr(runlock, "POLL_S", 0.05)
    t = threading.Timer(0.3, finish_then_release)
    t.start()
    status = runner.run(cfg, run_dir, progress=False, busy="wait")
    t.join()
    out = capsys.readouterr().out
    assert status["status"] == "ok" and "wait " in out and "skip run: finished" in out
    assert not (run_dir / runlock.LOCK).exists()


@pytest.mark.slow
def test_two_sweeps_on_one_out_compute_each_run_once(tmp_path):
    cmd = command(tmp_path, "encoding=rope,alibi,nope")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    trained = [line for out, _ in outs for line in out.splitlines() if line.startswith("ok ")]
    assert len(trained) == 3, outs  # each of the three runs trained by one of the two sweeps
    assert all("Traceback" not in err for _, err in outs)
    sweep = tmp_path / "out" / "sweeps" / "single"
    runs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert len(runs) == 3 and all(results.finished(r) for r in runs)
    assert not list(sweep.glob(f"*/{runlock.LOCK}"))


RACER = """
import sys, time
from pathlib import Path
from harness.infra import runlock
run_dir, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.005)
lock = runlock.claim(run_dir)
print("won" if lock else "busy", flush=True)
time.sleep(1.0)  # hold it while the others decide
if lock:
    lock.release()
"""


def test_racing_takeovers_of_a_stale_lock_leave_one_holder(tmp_path):
    # the claim guard (filelock) makes judge-stale, remove and create one step: of several processes that find the
    # same dead holder's lock at once, exactly one takes it over and the others see it held
    run_dir, go = tmp_path / "run", tmp_path / "go"
    write_lock(run_dir, pid=dead_pid(), host=socket.gethostname())
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(run_dir), str(go)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    time.sleep(1.0)
    go.touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert sorted(out.strip() for out, _ in outs) == ["busy"] * 5 + ["won"], outs
    assert sum("taking over the stale lock" in err for _, err in outs) == 1
    assert sorted(p.name for p in run_dir.iterdir()) == []  # the winner released; no guard left behind


def test_a_guard_left_by_a_dead_claimer_does_not_block(tmp_path):
    # a claimer killed inside the guard leaves filelock's marker behind; filelock reclaims it by its dead pid
    code = "import os, sys; from harness.infra import runlock; g = runlock._guard(sys.argv[1]); g.acquire(); os._exit(0)"
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, check=True)
    assert (tmp_path / f"{runlock.LOCK}.claim").exists()
    t0 = time.monotonic()
    lock = runlock.claim(tmp_path)
    assert lock is not None and time.monotonic() - t0 < runlock.GUARD_LEASE_S
    lock.release()
    assert not (tmp_path / f"{runlock.LOCK}.claim").exists()
