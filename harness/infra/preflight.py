"""Before any work: what a command or a run would refuse, found while nothing has started. `validate(argv)` (the
command line: every job composed and checked, out and the run dirs writable and distinct, seeds, launcher settings,
a budget beside a model) and `check(cfg)` (one job: the task's data spec, the model and encoding built on the CPU,
the device, threads; a pretrained job's checkpoint files, variant, pipelines and corpus instead). harness.__main__
calls validate before Hydra launches anything; each refusal is one line (ValueError)."""
import importlib
import os
import re
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness import config as config_lib
from harness import model as model_lib
from harness import results, tasks
from harness.config import Config, overrides
from harness.config.overrides import CONF, MULTIRUN_FLAGS
from harness.infra import distributed, runlock


def check(cfg: Config):
    """What a run would refuse, found before any run starts (harness.__main__ validates each job with it): the
    task's data spec, the model and encoding built on the CPU with every knob, and the device; for a pretrained
    job the checkpoint's file, the variant, the pipelines and the corpus instead of the task and model."""
    if cfg.pretrained is not None:
        importlib.import_module("harness.pretrained.study").check(cfg.pretrained)
    else:
        tasks.check(cfg.task, cfg.train.seq_len)
        model_lib.from_config(cfg.model, cfg.encoding)
    _check_device(cfg)
    _check_threads(cfg)


OVERSUBSCRIBE = "HARNESS_OVERSUBSCRIBE"  # =1: threads may exceed the CPUs (an explicit choice, e.g. a timing study)


def _check_threads(cfg: Config):
    """threads=N as torch takes it, by torch's own rule (tried, then put back): a count torch refuses is one line
    before any job starts instead of a traceback at the run's start. The schema's range rule, where it has one,
    comes first (harness.config.to_config)."""
    if not cfg.threads:
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    over = os.environ.get(OVERSUBSCRIBE) == "1"
    if cfg.threads > (16 * cpus if over else cpus):  # checked before torch spawns them (tens of thousands starve
        # every process on the machine)
        raise ValueError(f"threads={cfg.threads} is more than the {cpus} CPUs this process may use"
                         + (f" x 16, the most {OVERSUBSCRIBE}=1 allows" if over else
                            f"; set {OVERSUBSCRIBE}=1 to oversubscribe on purpose (up to 16x), or threads=0 for "
                            f"torch's default"))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(cfg.threads)
    except (RuntimeError, ValueError, TypeError) as e:
        raise ValueError(f"threads={cfg.threads}: {str(e).strip().splitlines()[0]}") from None
    finally:
        torch.set_num_threads(before)


def _check_device(cfg: Config):
    if os.environ.get("HARNESS_ROPE_ISA"):  # a level this CPU lacks fails here, not at the first rotation
        importlib.import_module("harness.rope.cpu").isa()
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={cfg.device!r} but this torch ({torch.__version__}) sees no CUDA device; "
                         f"use device=cpu")



def _check_writable(out: Path, key="out"):
    """Fail before any work when results cannot be written under `out` (what `key=` gave): its nearest existing
    ancestor must be a directory this process can create files in (tried with a temp file, removed at once:
    a mode bit does not tell for root, an immutable directory or a read-only mount)."""
    probe = Path(os.path.abspath(out))
    while not os.path.lexists(probe):  # the nearest existing ancestor is where the run dirs would be created
        probe = probe.parent
    if not probe.is_dir():
        what = "a file" if probe.exists() else "a symlink loop or a symlink to nothing"
        raise ValueError(f"cannot write results under {key}={out}: {probe} is {what}, not a directory")
    problem = results.writable(probe)
    if problem:
        raise ValueError(f"cannot write results under {key}={out}: {probe} is not writable by this user "
                         f"({problem.rpartition(': ')[2]})")


def _run_id_sweep(status):
    return str(status.get("run_id", "")).rpartition("/")[0] or None


def _scan(cfg, all_jobs, dirs):
    """Before any work: every job's run dir is one the harness can use (results.unusable: else one line naming
    what is in the way); a finished run there made by another sweep with another config is not replaced (two
    sweeps pointed at one hydra.sweep.dir); a finished run whose .hydra/config.yaml does not read is marked to
    be computed again (Hydra rewrites that file before the run can see it)."""
    sweep = OmegaConf.select(cfg, "sweep")
    for job, d in zip(all_jobs, dirs):
        problem = results.unusable(d)
        if problem:
            raise ValueError(problem)
        status = results.read_status(d)
        held = runlock.holder(d)
        if not status or status["status"] not in results.FINISHED or (held and runlock.alive(held)):
            continue  # nothing finished there, or another live process is computing it
        other = _run_id_sweep(status)
        if other and other != str(sweep):
            theirs = status.get("config_hash")
            ours = results.config_hash(config_lib.to_config(compose("config", overrides=job)))
            if theirs != ours:
                raise ValueError(f"{d} holds a finished run of sweep {other!r} made with another config (config hash "
                                 f"{theirs} -> {ours}); sweep {str(sweep)!r} would replace its rows: give this sweep "
                                 f"its own hydra.sweep.dir (or out=)")
        problem = results.hydra_config_problem(d)
        if problem:
            results.write_json(d / results.STATUS, {**status, "rerun": f"{problem} (before this command rewrote it)"})


# The launchers' numeric settings (hydra-joblib-launcher, hydra-submitit-launcher): name -> (lowest, what it is).
# joblib's n_jobs may be negative (CPUs + 1 + n_jobs: -1 = every CPU), never 0.
LAUNCHER_NUMBERS = {"n_jobs": (None, "jobs at a time, or -1 for every CPU"), "timeout_min": (1, "minutes a job may run"),
                    "cpus_per_task": (1, "CPUs per job"), "tasks_per_node": (1, "tasks per node"),
                    "nodes": (1, "nodes per job"), "array_parallelism": (1, "jobs of the array at a time"),
                    "gpus_per_node": (0, "GPUs per node"), "mem_gb": (0, "memory per job (GB)"),
                    "signal_delay_s": (0, "seconds between the timeout signal and the kill"),
                    "max_num_timeout": (0, "requeues after a timeout")}


def _check_launcher(launcher):
    """Every numeric launcher setting Hydra's launchers take is one the launcher can run with (else one line
    before any work: joblib with n_jobs=0 and submitit with timeout_min=0 failed in a traceback)."""
    for key, (lo, what) in LAUNCHER_NUMBERS.items():
        v = OmegaConf.select(launcher, key) if launcher is not None else None
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (key != "mem_gb" and not float(v).is_integer()):
            raise ValueError(f"hydra.launcher.{key} must be a whole number ({what}), got {v!r}")
        if (v == 0 if lo is None else v < lo):
            valid = "any whole number but 0" if lo is None else f">= {lo}"
            raise ValueError(f"hydra.launcher.{key} must be {valid} ({what}), got {v!r}")


def _check_budget_and_model(all_jobs):
    """budget=<rung> sets the model (its size is the rung's); a model group chosen beside it would be dropped
    without a word (the budget file is applied after it), so the pair is refused."""
    for job in all_jobs:
        keys = {o.split("=", 1)[0].lstrip("+~"): o.split("=", 1)[1] for o in job if "=" in o}
        if keys.get("budget", "null") != "null" and "model" in keys:
            raise ValueError(f"budget={keys['budget']} sets the model itself (conf/budget/{keys['budget']}.yaml), so "
                             f"model={keys['model']} would be dropped: choose one (model.* keys may still adjust it)")


def validate(argv):
    """Compose and validate every job of this command line; returns (sweep dir or None, n jobs)."""
    argv = overrides.normalise(argv)
    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg, all_jobs = overrides.jobs_of(argv)
        # jobs that differ only in their seed compose alike (any int is a valid seed): validate one of each
        distinct = {tuple(o for o in job if not re.fullmatch(r"seed=\d+", o)): job for job in all_jobs}
        lm_eval_tasks = set()
        for job in distinct.values():
            job_cfg = config_lib.to_config(compose("config", overrides=job))
            check(job_cfg)  # data spec, model and encoding knobs, device: before any job starts
            lm_eval_tasks.update(job_cfg.eval.lm_eval_tasks)
        if lm_eval_tasks:  # checked before any training; lm-eval is a heavy import, made only when asked
            importlib.import_module("harness.lmeval.rows").check_tasks(sorted(lm_eval_tasks))
        _check_budget_and_model(all_jobs)
        out = OmegaConf.select(cfg, "out")
        if out is None or not str(out).strip():
            raise ValueError(f"out is empty ({out!r}); give the directory that receives the runs (default: results)")
        seeds = OmegaConf.select(cfg, "seeds")
        if multirun and isinstance(seeds, int) and seeds < 1:  # range(0, seeds) would launch no job at all
            raise ValueError(f"seeds must be >= 1 (the sweep runs seeds 0 .. seeds-1), got {seeds}")
        if multirun and not all_jobs:
            raise ValueError("the sweep has no jobs (an empty sweep list); it would succeed having run nothing")
        _check_writable(Path(str(out)))
        sweep_dir = Path(OmegaConf.select(cfg, "hydra.sweep.dir")) if multirun else None
        if multirun:
            _check_writable(sweep_dir, "hydra.sweep.dir")
        launcher = str(OmegaConf.select(cfg, "hydra.launcher._target_"))
        if multirun and launcher == "None":
            raise ValueError(overrides.missing_launcher(OmegaConf.select(cfg, "hydra.runtime.choices")["hydra/launcher"]))
        if multirun:
            _check_launcher(OmegaConf.select(cfg, "hydra.launcher"))
        dirs = overrides.job_dirs(cfg, all_jobs, multirun)
        seen = {}
        for job, d in zip(all_jobs, dirs):
            if d in seen:
                raise ValueError(f"two jobs resolve to one run dir {d}: {' '.join(seen[d])} and {' '.join(job)}; "
                                 f"the second would replace the first's rows")
            seen[d] = job
        if not multirun:
            _check_writable(dirs[0].parent, "hydra.run.dir")
        _scan(cfg, all_jobs, dirs)
    if multirun and distributed.launched() and not launcher.endswith(".BasicLauncher"):
        raise ValueError(f"under torchrun a sweep runs its jobs in turn inside the process group: use "
                         f"hydra/launcher=basic, not {launcher.rpartition('.')[2]}")
    return sweep_dir, len(all_jobs)
