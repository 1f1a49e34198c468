"""Sweeps as a user runs them (subprocess, Hydra multirun): SIGKILL + rerun, parallel jobs, divergence."""
import json
import os
import signal
import subprocess
import time

import pytest
from omegaconf import OmegaConf

from harness import results
from tests.tiny_runs import ROOT, command


def run_dirs(tmp_path):
    return sorted(p for p in (tmp_path / "out" / "sweeps" / "single").iterdir() if p.is_dir())


def check_rows(run_dir):
    """A run dir's rows belong to that run only, in full (no lost or interleaved rows)."""
    df = results.load(run_dir)
    status = json.loads((run_dir / results.STATUS).read_text())
    assert df.run_id.nunique() == 1 and df.run_id.iloc[0] == status["run_id"]
    assert (df.encoding == OmegaConf.load(run_dir / ".hydra" / "config.yaml").encoding.name).all()
    if status["status"] == "ok":
        ppl = df[(df.metric == "ppl") & ~df.params.str.contains("extension")]
        assert len(ppl) == 4 and ppl.value.notna().all()  # 2 lengths x 2 protocols
    return df, status


@pytest.mark.slow
def test_sigkill_mid_sweep_then_rerun_loses_nothing_and_skips_finished(tmp_path):
    cmd = command(tmp_path, "encoding=rope,alibi,nope,t5")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            done = [d for d in (run_dirs(tmp_path) if (tmp_path / "out" / "sweeps" / "single").exists() else [])
                    if results.finished(d)]
            if len(done) >= 1 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be killed; make the runs longer"
        os.killpg(proc.pid, signal.SIGKILL)  # the process group this test started
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    finished = {d: (d / results.ROWS).stat().st_mtime_ns for d in run_dirs(tmp_path) if results.finished(d)}
    assert 1 <= len(finished) < 4
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert all((d / results.ROWS).stat().st_mtime_ns == t for d, t in finished.items()), "finished run recomputed"
    assert p.stdout.count("skip ") == len(finished)
    dirs = run_dirs(tmp_path)
    assert len(dirs) == 4 and all(results.finished(d) for d in dirs)
    for d in dirs:
        check_rows(d)
    assert results.load(tmp_path / "out").run_id.nunique() == 4


@pytest.mark.slow
def test_parallel_jobs_with_a_diverging_one_keep_every_row(tmp_path):
    cmd = command(tmp_path, "hydra/launcher=joblib", "encoding=rope,alibi", "train.lr=3e-3,1e30")
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    dirs = run_dirs(tmp_path)
    assert len(dirs) == 4
    statuses = {}
    for d in dirs:
        df, status = check_rows(d)
        statuses[d.name] = status["status"]
        assert len(df[df.metric == "train_loss"]) >= 1
    assert sorted(statuses.values()) == ["diverged", "diverged", "ok", "ok"], statuses
    lrs = {d.name: OmegaConf.load(d / ".hydra" / "config.yaml").train.lr for d in dirs}
    assert all((s == "diverged") == (lrs[n] > 1) for n, s in statuses.items())
    assert results.load(tmp_path / "out").run_id.nunique() == 4
