"""Resume: whether a run dir already holds this job's finished run (the runner then skips it), or why it is computed
again, in one line: its files do not read back whole, its config or the harness code changed since it ran, its
checkpoint is another run's."""
from harness.results.checks import check_run, checkpoint_of
from harness.results.files import FINISHED
from harness.results.identity import run_code_hash


def stale(status, chash, code):
    """Why a finished run's rows do not come from this config and this code (one phrase), or None."""
    recorded = status.get("config_hash", chash)  # a status without one is caught by its missing code hash
    if recorded != chash:
        return f"its resolved config changed since it ran (config hash {recorded} -> {chash})"
    if "code_hash" not in status:
        return ("it ran before runs recorded their code (no code hash in its status.json), so its rows may come "
                "from other code")
    if status["code_hash"] != code:
        return (f"the harness code changed since it ran (code hash {status['code_hash']} -> {code}: an edit under "
                f"harness/ that its config does not show)")
    return None


def skip(run_dir, run_id, chash, cfg):
    """The status of a whole finished run made by this config and this code (resume skips it, first logging it
    to W&B if a kill interrupted that), else None, saying in one line why a finished run, or a run dir whose
    files do not read back whole (check_run), is run again."""
    status, problem = check_run(run_dir)
    if problem:
        print(f"rerun {run_id}: {problem}; the run is computed again")
        return None
    if status is None or status["status"] not in FINISHED:
        return None
    other = str(status.get("run_id", "")).rpartition("/")[0]
    if status.get("config_hash", chash) != chash and other and other != cfg.sweep:
        # another sweep's run, with another config (two sweeps pointed at one hydra.sweep.dir, started together:
        # harness.__main__ refuses this before any work when the first one has finished)
        line = (f"{run_dir} holds a finished run of sweep {other!r} made with another config; sweep {cfg.sweep!r} "
                f"does not replace its rows: give it its own hydra.sweep.dir (or out=)")
        print(f"failed {run_id}: {line}")
        return {"status": "failed", "message": line, "run_id": run_id}
    why = stale(status, chash, run_code_hash(cfg))
    if why:
        print(f"rerun {run_id}: {why}; its rows are replaced")
        return None
    problem = checkpoint_of(run_dir, cfg)
    if problem:
        print(f"rerun {run_id}: {problem}; the run is computed again")
        return None
    print(f"skip {run_id}: finished ({status['status']}) rows exist in {run_dir}")
    return status
