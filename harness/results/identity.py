"""What a run's rows say about where they came from: the config and code hashes that decide whether a finished run is
still current, and the columns every row of a run shares."""
import datetime
import functools
import hashlib
import json
import subprocess
from pathlib import Path

import pandas as pd
import torch

import harness
from harness.results.files import COLUMNS


def git_sha():
    try:
        root = Path(harness.__file__).resolve().parent.parent
        return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# Where and how a run is executed, not what it measures: a change here does not make its rows stale.
NOT_RESULTS = ("out", "threads", "wandb", "sweep", "seeds", "checkpoint")


def config_hash(cfg) -> str:
    """12 hex digits of the resolved config minus NOT_RESULTS, plus the harness version and the task's data
    identity (harness.tasks.data_identity: the corpus's sha256): a finished run whose recorded hash differs
    was made by another config (a changed default, a pulled change, an edited corpus) and is run again
    instead of being kept."""
    from harness import tasks
    from harness.config import to_dict
    try:
        data = tasks.data_identity(cfg.task)
    except (ValueError, OSError):  # an unreadable corpus: the run itself fails with this error, recorded
        data = None
    d = {k: v for k, v in to_dict(cfg).items() if k not in NOT_RESULTS}
    text = json.dumps([d, harness.__version__] + ([data] if data else []), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# The code a run's rows come from: the package's source, less what only reads run dirs (report/, claims/) or tests
# kernels apart from runs (conformance/): DESIGN.md section 1's import layers keep the runner from importing them.
# conf/ is not hashed: every value a run takes from it is in the resolved config, which config_hash covers (a
# comment, a launcher or another preset's edit must not rerun every run). The lm-eval task YAMLs (tasks/) are,
# for runs that evaluate lm-eval tasks.
CODE = ("**/*.py", "rope/csrc/*", "tasks/*.txt")
NOT_RUN_CODE = ("report", "claims", "conformance")


@functools.lru_cache(maxsize=2)
def code_hash(lm_eval=False) -> str:
    """12 hex digits of the harness source a run executes (CODE, less NOT_RUN_CODE; plus the lm-eval task dir
    with lm_eval): its files' paths and bytes, read once per process (about 150 files, a few MB). A finished run
    whose recorded code hash differs was made by other code (a pulled change, an edit the config does not
    show) and is run again."""
    from harness import paths
    pkg = Path(harness.__file__).resolve().parent
    files = {p for pattern in CODE for p in pkg.glob(pattern)
             if p.is_file() and "__pycache__" not in p.parts and p.relative_to(pkg).parts[0] not in NOT_RUN_CODE}
    roots = [(pkg, sorted(files))]
    if lm_eval:
        tasks_dir = paths.tasks_dir()
        roots.append((tasks_dir, sorted(p for p in tasks_dir.rglob("*")
                                        if p.is_file() and "__pycache__" not in p.parts)))
    h = hashlib.sha256()
    for root, found in roots:
        for p in found:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def run_code_hash(cfg) -> str:
    """The code hash of the code cfg's run executes (the lm-eval tasks only when it evaluates some)."""
    return code_hash(bool(cfg.eval.lm_eval_tasks))


def base_row(cfg, run_id):
    """The columns every row of this run shares."""
    from harness.config import encoding_params
    from harness.rope.apply import resolved_params  # impl='auto' recorded as the implementation that ran
    return dict(run_id=run_id, sweep=cfg.sweep, encoding=cfg.encoding["name"],
                params=resolved_params(encoding_params(cfg), cfg.device),
                model=cfg.model.name, d_model=cfg.model.d_model, n_layers=cfg.model.n_layers,
                n_heads=cfg.model.n_heads, head_dim=cfg.model.head_dim, task=cfg.task.name, train_len=cfg.train.seq_len,
                dtype="float32", device=cfg.device, seed=cfg.seed, torch=torch.__version__,
                harness_version=harness.__version__,
                git_sha=git_sha(), time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


def complete(measured, base, step):
    """Measurement dicts (metric, eval_len, protocol, value, unit, extra_params) -> DataFrame of COLUMNS."""
    rows = []
    for m in measured:
        m = dict(m)
        params = {**base["params"], **m.pop("extra_params", {})}
        rows.append({**base, "step": step, **m, "params": json.dumps(params, sort_keys=True, default=str)})
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["eval_len"] = df["eval_len"].astype("Int64")
    df["value"] = df["value"].astype("float64")
    return df
