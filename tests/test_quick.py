"""The first minute: `make quick`'s preset (conf/sweep/quick.yaml) is small, its Makefile target runs it, `make help`
prints every description with its variables' values, and a run's Hydra job log (<run dir>/harness.log) holds the
run's own lines. The preset is checked composed, not run (its wall time is in docs/install.md)."""
import subprocess

from tests.tiny_runs import ROOT, command


def make(*argv):
    # -o .venv/.installed: the venv counts as built, so no target here runs pip whatever the stamp's age
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_the_quick_preset_is_one_seed_two_encodings_and_a_few_steps(tmp_path):
    """Its jobs as the basic sweeper expands them, each composed into the Config a job receives, and the CLI's own
    validation of the whole command line (`python -m harness -m sweep=quick`)."""
    from hydra import compose, initialize_config_dir

    from harness import config as config_lib
    from harness.__main__ import CONF, jobs, validate
    from harness.config.resolvers import quiet_schema_matching
    quiet_schema_matching()  # pytest resets warning filters per test
    argv = ["-m", "sweep=quick", f"out={tmp_path}"]
    assert validate(argv) == (tmp_path / "sweeps" / "quick", 2)
    every = jobs(argv)
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfgs = [config_lib.to_config(compose("config", overrides=job)) for job in every]
    assert sorted(c.encoding["name"] for c in cfgs) == ["alibi", "rope"]
    assert {c.seed for c in cfgs} == {0} and {c.seeds for c in cfgs} == {1}
    for c in cfgs:
        assert c.sweep == "quick" and c.train.steps <= 200 and c.model.n_layers <= 2
        assert max(c.eval.resolved_lens(c.train.seq_len)) <= 8 * c.train.seq_len and c.eval.protocols() == [
            "nonoverlapping"]
        assert c.eval.extension.types == [] and not c.precision.model_level and c.wandb.mode == "disabled"


def test_make_quick_runs_the_preset_then_its_report():
    r = make("-n", "quick", "RESULTS=/elsewhere/sweeps")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    (sweep,) = [ln for ln in lines if "-m harness -m " in ln]
    (report,) = [ln for ln in lines if "-m harness.report " in ln]
    assert "sweep=quick" in sweep.split() and "out=/elsewhere/" in sweep.split()
    assert "/elsewhere/sweeps/quick" in report.split() and lines.index(sweep) < lines.index(report)
    assert "pip install" not in r.stdout


def test_make_help_prints_the_values_of_the_variables_it_names():
    """Every `## ...` description goes through make's own expansion: no `$(` is left, and a value given on the
    command line is the one printed."""
    r = make("help")
    assert r.returncode == 0, r.stderr
    assert "$(" not in r.stdout and "quick " in r.stdout, r.stdout
    assert "results/sweeps/quick/report.md" in r.stdout and "results/sweeps/claims/claims.md" in r.stdout
    moved = make("help", "RESULTS=/elsewhere", "SWEEP=budget").stdout
    assert "$(" not in moved and "/elsewhere/quick/report.md" in moved and "rows in /elsewhere/budget" in moved
    assert len(moved.splitlines()) == len(r.stdout.splitlines()) > 10


def test_a_runs_harness_log_holds_its_own_lines(tmp_path):
    """Two tiny jobs of one multirun (the basic launcher: one process): each run dir's harness.log has that run's
    start and status lines, and nothing of the other (Hydra's job_logging; harness.__main__.JOB_LOG)."""
    argv = command(tmp_path, "encoding=rope,alibi")
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = sorted(d for d in (tmp_path / "out" / "sweeps" / "single").iterdir() if d.is_dir())
    assert [d.name.split(",")[0] for d in runs] == ["encoding=alibi", "encoding=rope"], runs
    for run, other in zip(runs, runs[::-1]):
        log = (run / "harness.log").read_text()
        start, status = [ln.split(" - ", 1)[1] for ln in log.splitlines() if "[harness.job][INFO] - " in ln]
        assert start == f"start single/{run.name}" and other.name not in log, log
        assert status.startswith(f"ok single/{run.name}: ") and status in r.stdout.splitlines()  # the console's line
