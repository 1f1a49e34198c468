"""The W&B sink as a run uses it: offline files in the run dir, failures that keep local results, online
without a server that answers (no stall: logged offline), and a run killed while logging is logged on resume."""
import socket
import time

import pytest

from harness import results, runner, train
from harness.infra import wandb_sink


def wandb_files(run_dir):
    return list((run_dir / "wandb_files").rglob("*.wandb"))


def test_wandb_offline_writes_inside_run_dir(tmp_path, tiny):
    status = runner.run(tiny(tmp_path, **{"wandb.mode": "offline"}), tmp_path / "run", progress=False)
    assert "wandb_error" not in status, status
    assert list((tmp_path / "run" / "wandb_files").rglob("*.wandb"))


def test_wandb_failure_keeps_local_results(tmp_path, monkeypatch, tiny):
    import wandb

    def broken(*a, **k):
        raise RuntimeError("service unreachable")

    monkeypatch.setattr(wandb, "init", broken)
    status = runner.run(tiny(tmp_path, **{"wandb.mode": "offline"}), tmp_path / "run", progress=False)
    assert status["status"] == "ok" and "service unreachable" in status["wandb_error"]
    assert results.finished(tmp_path / "run") and len(results.load(tmp_path / "run"))


@pytest.fixture
def silent_server(monkeypatch):
    """A W&B base URL that accepts connections and never answers (a firewall that drops replies, a dead
    proxy): what made each run stall about 95 s in wandb.init."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{srv.getsockname()[1]}")
    monkeypatch.setattr(wandb_sink, "PROBE_S", 0.5)
    monkeypatch.setattr(wandb_sink, "_probed", {})
    yield
    srv.close()


def test_online_without_an_answering_server_logs_offline_at_once(tmp_path, silent_server, capsys, tiny):
    cfg = tiny(tmp_path, **{"wandb.mode": "online"})
    t0 = time.perf_counter()
    status = runner.run(cfg, tmp_path / "run", progress=False)
    runner.run(tiny(tmp_path, **{"wandb.mode": "online"}), tmp_path / "run2", progress=False)
    assert time.perf_counter() - t0 < 60  # two runs of seconds each, not two 95 s stalls
    assert status["status"] == "ok" and status["wandb"] == "done"
    assert "does not answer" in status["wandb_error"] and "logged offline instead" in status["wandb_error"]
    assert "wandb sync" in capsys.readouterr().out
    assert wandb_files(tmp_path / "run") and wandb_files(tmp_path / "run2")
    assert results.read_status(tmp_path / "run")["wandb"] == "done"


def test_a_run_killed_while_logging_to_wandb_is_logged_on_resume(tmp_path, monkeypatch, tiny):
    cfg, run_dir = tiny(tmp_path, **{"wandb.mode": "offline"}), tmp_path / "run"
    log = wandb_sink.log

    def killed(*a, **k):
        raise KeyboardInterrupt  # as a Ctrl-C or a scheduler's kill between the rows and the W&B record

    monkeypatch.setattr(wandb_sink, "log", killed)
    with pytest.raises(KeyboardInterrupt):
        runner.run(cfg, run_dir, progress=False)
    assert results.finished(run_dir) and results.read_status(run_dir)["wandb"] == "pending"
    assert not wandb_files(run_dir)
    monkeypatch.setattr(wandb_sink, "log", log)
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("a finished run was trained again"))
    status = runner.run(cfg, run_dir, progress=False)
    assert status["wandb"] == "done" and "wandb_error" not in status and wandb_files(run_dir)
    assert results.read_status(run_dir)["wandb"] == "done"


def test_a_sweeps_jobs_leave_wandb_to_the_sweeps_process(tmp_path, tiny):
    """W&B out of the measured process: a job run with log_wandb=False leaves its record pending, and
    wandb_sink.log_pending (the sweep's process) makes it from the run's files, once."""
    cfg, run_dir = tiny(tmp_path, **{"wandb.mode": "offline"}), tmp_path / "sweep" / "run"
    status = runner.run(cfg, run_dir, progress=False, log_wandb=False)
    assert status["wandb"] == "pending" and not wandb_files(run_dir)
    (run_dir / ".hydra").mkdir()
    from omegaconf import OmegaConf
    from harness.config import to_dict
    OmegaConf.save(OmegaConf.create(to_dict(cfg)), run_dir / ".hydra" / "config.yaml")
    assert wandb_sink.log_pending(tmp_path / "sweep") == 1 and wandb_files(run_dir)
    assert results.read_status(run_dir)["wandb"] == "done" and "wandb_error" not in results.read_status(run_dir)
    assert wandb_sink.log_pending(tmp_path / "sweep") == 0  # done is done


def test_a_sweep_ends_with_every_wandb_record_made(tmp_path):
    import subprocess
    from tests.tiny_runs import ROOT, command
    argv = [a if a != "wandb.mode=disabled" else "wandb.mode=offline" for a in command(tmp_path, "encoding=rope,alibi")]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = [p.parent for p in (tmp_path / "out").rglob("status.json")]
    assert len(runs) == 2 and all(results.read_status(r)["wandb"] == "done" and wandb_files(r) for r in runs)


def test_every_run_records_the_installed_packages_read_once(tmp_path, monkeypatch, tiny):
    import importlib.metadata
    import wandb.util
    scans, real = [], wandb.util.working_set
    monkeypatch.setattr(wandb.util, "working_set", lambda: scans.append(1) or real())  # put back after the test
    for name in ("a", "b"):
        status = runner.run(tiny(tmp_path, **{"wandb.mode": "offline"}), tmp_path / name, progress=False)
        assert "wandb_error" not in status, status
    assert len(scans) == 1  # W&B's own working_set reads every package's metadata at every init
    want = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                  if d.metadata["Name"])
    for name in ("a", "b"):  # what W&B writes from the list: one line per distribution
        (req,) = (tmp_path / name / "wandb_files").rglob("requirements.txt")
        assert sorted(req.read_text().split()) == want
