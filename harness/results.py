"""Run rows -> run dir (atomic writes); any number of run dirs -> one tidy DataFrame (DESIGN.md §4).

Row conventions. `protocol`: `train` (train_loss per `step`, train_wall_s, train_steps,
train_tokens_per_s, peak_mem_bytes of a training step; train_loop_tokens_per_s: the training loop's
global-batch tokens/s over all torchrun ranks, param world_size), `eval` (eval_tokens_per_s and peak_mem_bytes of
one forward at eval_len), `nonoverlapping` / `sliding<stride>` (lm: ppl, nll_beyond_train), `iid`
(synthetic: acc, seq_acc), `depth=<d>` (passkey: acc, seq_acc). lm also has `nll_by_pos` at the longest
eval length (nonoverlapping): mean NLL of the window positions [pos_lo, pos_hi), bins of train-length
width. `params` is JSON: the encoding's parameters, plus `extension`, `factor`, the applied
`rope_type`/`scaling` (and `finetune_*`) on RoPE eval-time extension rows, `pos_lo`/`pos_hi` on
`nll_by_pos` rows, plus `nan_reason` on a NaN row the encoding could not measure. `seed` sets init, data
order and eval text: rows of one seed are paired across encodings; harness.stats aggregates over seeds."""
import datetime
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import torch

import harness

COLUMNS = ["run_id", "sweep", "encoding", "params", "model", "d_model", "n_layers", "n_heads", "head_dim",
           "task", "train_len", "metric", "eval_len", "protocol", "dtype", "device", "value", "unit", "seed",
           "step", "torch", "harness_version", "git_sha", "time"]
ROWS, STATUS, TRAIN_LOG, CHECKPOINT = "rows.parquet", "status.json", "train_log.csv", "checkpoint.pt"
FINISHED = ("ok", "diverged")  # a run with rows and one of these statuses is not run again


def _umask():
    mask = os.umask(0)  # reading the umask means setting it; put it back at once (done once, at import)
    os.umask(mask)
    return mask


UMASK = _umask()


def atomic_write(path, data: bytes):
    """Write bytes to path via a temp file in the same dir + fsync + rename: readers see old or new.
    The file gets the mode a plain open() would give (0666 minus the umask), not mkstemp's 0600, so a team
    sharing an out= directory can read each other's results."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path, obj):
    atomic_write(path, (json.dumps(obj, indent=2, default=str) + "\n").encode())


def write_rows(run_dir, df: pd.DataFrame):
    """rows.parquet, columns exactly COLUMNS."""
    if list(df.columns) != COLUMNS:
        raise ValueError(f"rows must have exactly the columns {COLUMNS}; got {list(df.columns)}")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    atomic_write(Path(run_dir) / ROWS, buf.getvalue())


def write_train_log(run_dir, log):
    atomic_write(Path(run_dir) / TRAIN_LOG, pd.DataFrame(log, columns=["step", "loss", "lr", "tokens", "wall_s"])
                 .to_csv(index=False).encode())


def read_train_log(run_dir):
    """train_log.csv as the list of dicts train.fit logged (empty when the run has none)."""
    path = Path(run_dir) / TRAIN_LOG
    return pd.read_csv(path).to_dict("records") if path.exists() else []


def write_checkpoint(run_dir, state_dict, config_dict):
    """state_dict + resolved config; loadable with torch.load(..., weights_only=True)."""
    buf = io.BytesIO()
    torch.save({"state_dict": state_dict, "config": config_dict}, buf)
    atomic_write(Path(run_dir) / CHECKPOINT, buf.getvalue())


def read_status(run_dir):
    try:
        return json.loads((Path(run_dir) / STATUS).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def readable_rows(path):
    """True when path is a parquet file whose footer reads and whose columns include every COLUMNS name
    (a truncated or overwritten file fails here: the footer is the file's last bytes)."""
    try:
        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001 - missing, truncated, not parquet: all mean "no usable rows"
        return False
    return set(COLUMNS) <= set(names)


def finished(run_dir):
    """True when run_dir holds readable rows and a finished status (ok or diverged): resume skips it.
    A corrupt rows file is not finished, so a rerun measures the run again and replaces it."""
    status = read_status(run_dir)
    return bool(status) and status.get("status") in FINISHED and readable_rows(Path(run_dir) / ROWS)


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


def run_dirs(path):
    """Every dir under path (or path itself) that holds a rows file."""
    path = Path(path)
    return sorted({p.parent for p in path.rglob(ROWS)}) if path.is_dir() else []


def load(*paths, errors=None, failed=False) -> pd.DataFrame:
    """All rows under the given run dirs / sweep dirs, concatenated. A corrupt rows file is reported on
    stderr with its path and skipped; the (path, error) pairs are appended to `errors` when given and
    kept in the frame's attrs["skipped"]. Rows of a run whose status is `failed` (what it measured before
    the failure) are left out unless failed=True, each such run named on stderr and in attrs["failed"] as
    (run dir, message): they are incomplete, and must not read as results."""
    skipped = [] if errors is None else errors
    frames, left_out = [], []
    for path in paths or ("results",):
        if not Path(path).exists():
            raise FileNotFoundError(f"no results at {path}")
        for d in run_dirs(path):
            f = d / ROWS
            status = read_status(d) or {}
            if status.get("status") == "failed" and not failed:
                left_out.append((str(d), status.get("message", "")))
                print(f"results.load: leaving out the rows of failed run {d} ({status.get('message', '')})",
                      file=sys.stderr)
                continue
            try:
                df = pd.read_parquet(f)
                missing = [c for c in COLUMNS if c not in df.columns]
                if missing:
                    raise ValueError(f"missing columns {missing}")
            except Exception as e:  # noqa: BLE001 - any unreadable file is reported and skipped
                msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                print(f"results.load: skipping corrupt rows file {f} ({msg})", file=sys.stderr)
                skipped.append((str(f), msg))
                continue
            frames.append(df[COLUMNS])
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    out.attrs["skipped"] = list(skipped)
    out.attrs["failed"] = left_out
    return out
