"""`python -m harness [overrides]` runs one job; `python -m harness -m sweep=<preset>` runs a sweep.

Hydra and OmegaConf stop here: the job receives a Config dataclass and a run dir. Before Hydra starts,
the overrides are composed once per sweep value and validated, so a wrong key, type or choice is one
line on stderr (exit 2) instead of a traceback; multirun also gets a sweep-wide progress bar.

Where jobs run is only the launcher (conf/hydra/launcher: joblib, submitit_local, submitit_slurm, ray);
`torchrun --nproc_per_node N -m harness ...` trains one job on N processes (harness.infra.distributed)."""
import contextlib
import logging
import os
import sys
import threading
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.plugins.sweeper import Sweeper
from hydra.types import RunMode
from omegaconf import OmegaConf
from tqdm import tqdm

from harness import config as config_lib
from harness import results, runner
from harness.infra.preflight import validate  # noqa: F401 - re-exported (tests, launchers)
from harness.config import overrides, resolvers  # noqa: F401 - resolvers: registered on import
from harness.config.overrides import CONF, MULTIRUN_FLAGS, jobs  # noqa: F401 - re-exported (tests, launchers)
from harness.infra import distributed, runlock, wandb_sink

# flags after which Hydra composes nothing to run (help, config printing, shell completion: `-sc query=bash` is
# what Hydra's installed completion script calls on every tab)
NO_RUN_FLAGS = {"--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc"}
@contextlib.contextmanager
def _validated_once():
    """Hydra's basic sweeper composes every job of the sweep once more in this process before launching any
    (Sweeper.validate_batch_is_legal; 84 composes, 8.5 s of `make sweep` on one core while the other idles).
    `validate` has already composed each distinct job (jobs that differ only in their seed compose alike), so
    that second pass is skipped while this command's sweep launches; each job still composes its own config."""
    original = Sweeper.validate_batch_is_legal
    Sweeper.validate_batch_is_legal = lambda self, batch: None
    try:
        yield
    finally:
        Sweeper.validate_batch_is_legal = original


def _log_pending(sweep_dir: Path, stop: threading.Event):
    """The sweep's W&B records, made here while its jobs run (harness.infra.wandb_sink.log_pending), then once more
    when stop is set."""
    while not stop.wait(2.0):
        wandb_sink.log_pending(sweep_dir)
    wandb_sink.log_pending(sweep_dir)


def _watch(sweep_dir: Path, total: int, stop: threading.Event):
    """Sweep-wide progress: counts run dirs under sweep_dir with a final status (ok/diverged/failed)."""
    bar = tqdm(total=total, desc=f"sweep {sweep_dir.name}", unit="run", position=0, dynamic_ncols=True)
    while True:
        stopping = stop.wait(2.0)
        done = sum(1 for p in sweep_dir.glob(f"*/{results.STATUS}")
                   if (results.read_status(p.parent) or {}).get("status") in ("ok", "diverged", "failed"))
        bar.n = min(done, total)
        bar.refresh()
        if stopping:
            break
    bar.close()


# The job's own lines (what the runner prints: ok/failed/skip/rerun/busy ...) as records of this logger, which
# conf/config.yaml's hydra.job_logging sends to the run dir's harness.log only (the console has them from print).
JOB_LOG = logging.getLogger("harness.job")


class _LinesToLog:
    """sys.stdout during one job: every write passes through unchanged; each whole line the job's thread prints is
    also a record of JOB_LOG. Other threads (the sweep's W&B logger) print about other runs: not logged here."""

    def __init__(self, out):
        self._out, self._thread, self._part = out, threading.get_ident(), ""

    def write(self, s):
        n = self._out.write(s)
        if threading.get_ident() == self._thread:
            *lines, self._part = (self._part + s).split("\n")
            for line in lines:
                if line.strip():
                    JOB_LOG.info(line)
        return n

    def __getattr__(self, name):  # flush, isatty, fileno, encoding: the real stream's
        return getattr(self._out, name)


@contextlib.contextmanager
def _job_log():
    tee = _LinesToLog(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    if tee._part.strip():  # a last line printed without its newline
        JOB_LOG.info(tee._part)


@hydra.main(version_base="1.3", config_path=CONF, config_name="config")
def main(cfg):
    try:
        c = config_lib.to_config(cfg)
    except ValueError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        sys.exit(2)
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    if not c.threads:  # a job uses the CPUs its launcher reserved for it (submitit: cpus_per_task)
        c.threads = OmegaConf.select(hc, "launcher.cpus_per_task") or 0
    distributed.setup(c.device)
    # a sweep leaves a run another process is computing to it (its end waits); one run waits for it
    # a sweep's jobs leave their W&B record to the sweep's process (_log_pending): W&B out of the measured process
    with _job_log():
        JOB_LOG.info(f"start {c.sweep}/{run_dir.name}")  # the log's own (the console has the progress bars)
        status = runner.run(c, run_dir, run_id=f"{c.sweep}/{run_dir.name}",
                            busy="wait" if hc.mode == RunMode.RUN else "skip", log_wandb=hc.mode == RunMode.RUN)
    if status["status"] == "failed" and hc.mode == RunMode.RUN:
        sys.exit(1)
    return status["status"]


def _failed(sweep_dir: Path):
    """'run: message' for every failed run of a finished sweep, and for every run still 'running' once no
    live process holds it (another process computing it stopped: rerunning the command computes it)."""
    out = []
    for p in sorted(sweep_dir.glob(f"*/{results.STATUS}")):
        s = results.read_status(p.parent) or {}
        if s.get("status") == "failed":
            out.append(f"{p.parent.name}: {s.get('message', '')}")
        elif s.get("status") == "running":
            out.append(f"{p.parent.name}: left unfinished by a process that stopped; rerun the command")
    return out


def _wait_for_others(sweep_dir: Path):
    """Runs this sweep left to another process (busy) are waited for, so the sweep ends with its rows."""
    held = runlock.live_locks(sweep_dir)
    if held:
        print(f"waiting for {len(held)} run(s) another process is computing: {[p.name for p in held]}")
    while runlock.live_locks(sweep_dir):
        time.sleep(runlock.POLL_S)


def cli(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:  # HF's names for the rope keys, as the harness's: before Hydra names the run dir from them
        normal = overrides.normalise(argv)
    except ValueError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        sys.exit(2)
    if list(argv) == sys.argv[1:]:  # Hydra's main reads sys.argv
        sys.argv[1:] = normal
    typed, argv = argv, normal
    if int(os.environ.get("RANK", "0")) > 0:  # torchrun: rank 0 alone writes the run dir's .hydra files
        sys.argv.append("hydra.output_subdir=null")
    try:
        _cli(argv, typed)
    finally:
        distributed.teardown()


def _main():
    """Hydra's main, with its own errors raised here rather than printed as a traceback (HYDRA_FULL_ERROR);
    returns None, or (exit code, the one line to print once progress bars are closed): a run dir Hydra cannot
    write (its .hydra files: a full disk, a directory made read-only mid-sweep) is exit 1, Ctrl-C exit 130.
    Finished runs are kept either way, and rerunning the command resumes."""
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        main()
    except OSError as e:
        return 1, (f"harness: error: {results.write_error(e)}; finished runs are kept: fix it, then rerun the "
                   f"command to resume")
    except KeyboardInterrupt:
        return 130, "harness: interrupted; finished runs are kept, and rerunning the command resumes"
    finally:
        if before is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = before
    return None


def _stop(failure):
    if failure:
        print(failure[1], file=sys.stderr)
        sys.exit(failure[0])


def _cli(argv, typed=()):
    if not any(a in NO_RUN_FLAGS for a in argv):
        try:
            sweep_dir, n_jobs = validate(argv)
        except Exception as e:  # noqa: BLE001 - any composition/validation error is the user's input
            msg = overrides.one_line(e)
            try:
                null = overrides.null_parent(argv)
            except Exception:  # noqa: BLE001 - only a better message; the original stands
                null = None
            print(f"harness: error: {overrides.unknown_key(msg, argv, typed) or null or msg}", file=sys.stderr)
            sys.exit(2)
        if sweep_dir is not None:
            stop, logged = threading.Event(), threading.Event()
            watcher = threading.Thread(target=_watch, args=(sweep_dir, n_jobs, stop), daemon=True)
            logger = threading.Thread(target=_log_pending, args=(sweep_dir, logged), daemon=True)
            watcher.start()
            logger.start()
            try:
                with _validated_once():
                    failure = _main()
            finally:
                stop.set()
                watcher.join(timeout=5)
            _stop(failure)  # interrupted or unwritable: exits now; what is not logged yet stays `pending`
            _wait_for_others(sweep_dir)
            logged.set()  # the last records, then the sweep ends
            logger.join()
            failed = _failed(sweep_dir)
            if failed:  # the other runs are kept; the sweep still fails loudly
                print(f"harness: error: {len(failed)} run(s) failed: " + "; ".join(failed), file=sys.stderr)
                sys.exit(1)
            return
        _stop(_main())
        return
    main()


if __name__ == "__main__":
    cli()
