"""A run dir's files (DESIGN.md section 4): the row columns, atomic writes (a temp file, then a rename), what stands
where a file should be."""
import errno
import io
import json
import os
import stat
import tempfile
from pathlib import Path

import pandas as pd
import torch

COLUMNS = ["run_id", "sweep", "encoding", "params", "model", "d_model", "n_layers", "n_heads", "head_dim",
           "task", "train_len", "metric", "eval_len", "protocol", "dtype", "device", "value", "unit", "seed",
           "step", "torch", "harness_version", "git_sha", "time"]
ROWS, STATUS, TRAIN_LOG, CHECKPOINT = "rows.parquet", "status.json", "train_log.csv", "checkpoint.pt"
FINISHED = ("ok", "diverged")  # a run with rows and one of these statuses is not run again
KNOWN = ("running", *FINISHED, "failed")  # every status a run writes
RUN_FILES = (STATUS, ROWS, CHECKPOINT, TRAIN_LOG)  # written by atomic_write: a temp file, then os.replace
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")  # Hydra writes .hydra/<these> with a plain open()
MAX_STATUS_BYTES = 1 << 20  # a status is a few KB (a traceback included); more is not a status
MAX_CONFIG_BYTES = 16 << 20


class RunDirError(ValueError):
    """A run dir the harness cannot use without removing something it did not write (a file where the dir goes,
    a directory where a run file goes): one line naming the path and what to do."""


def _umask():
    mask = os.umask(0)  # reading the umask means setting it; put it back at once (done once, at import)
    os.umask(mask)
    return mask


UMASK = _umask()


def atomic_write(path, data: bytes):
    """Write bytes to path via a temp file in the same dir + fsync + rename: readers see old or new.
    The file gets the mode a plain open() would give (0666 minus the umask), not mkstemp's 0600, so a team
    sharing an out= directory can read each other's results.
    A failure (a full disk, a directory turned read-only) leaves no temp file and the old file as it was, and is
    raised as an OSError whose filename is `path` (errno and strerror kept): "cannot write <path>: ..." in one line.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename != str(path):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def write_error(e: OSError) -> str:
    """A failed write as one line: `cannot write <file>: No space left on device (errno 28)`."""
    what = e.strerror or str(e)
    code = f" ({errno.errorcode.get(e.errno, e.errno)})" if e.errno else ""
    return f"cannot write {e.filename or 'a file'}: {what}{code}"


def write_json(path, obj):
    atomic_write(path, (json.dumps(obj, indent=2, default=str) + "\n").encode())


def write_rows(run_dir, df: pd.DataFrame):
    """rows.parquet, columns exactly COLUMNS."""
    if list(df.columns) != COLUMNS:
        raise ValueError(f"rows must have exactly the columns {COLUMNS}; got {list(df.columns)}")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    atomic_write(Path(run_dir) / ROWS, buf.getvalue())


def retire_rows(run_dir):
    """Move a previous run's rows.parquet aside (to rows.parquet.previous) as a rerun starts: until the rerun
    writes its own, the dir holds no rows to be read as this run's."""
    p = Path(run_dir) / ROWS
    if p.is_file():
        os.replace(p, p.with_name(ROWS + ".previous"))


def write_train_log(run_dir, log):
    atomic_write(Path(run_dir) / TRAIN_LOG, pd.DataFrame(log, columns=["step", "loss", "lr", "tokens", "wall_s"])
                 .to_csv(index=False).encode())


def read_train_log(run_dir):
    """train_log.csv as the list of dicts train.fit logged (empty when the run has none or it does not read)."""
    path = Path(run_dir) / TRAIN_LOG
    if _what(path) is not None:
        return []
    try:
        return pd.read_csv(path).to_dict("records")
    except Exception:  # noqa: BLE001 - empty, binary, truncated: the log is only W&B's training curve
        return []


def write_checkpoint(run_dir, state_dict, config_dict):
    """state_dict + resolved config; loadable with torch.load(..., weights_only=True)."""
    buf = io.BytesIO()
    torch.save({"state_dict": state_dict, "config": config_dict}, buf)
    atomic_write(Path(run_dir) / CHECKPOINT, buf.getvalue())


def _what(path, follow=True):
    """None for a regular file (through symlinks when follow); "missing" where there is nothing (a dangling
    symlink too, when follow: a write replaces the link); else what is there instead ("a directory", "a FIFO",
    "a symlink loop", ...). Reading only regular files: a FIFO blocks a reader, /dev/zero never ends."""
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return "a symlink loop" if e.errno == errno.ELOOP else f"unreadable ({e.strerror})"
    for test, name in ((stat.S_ISREG, None), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a device"




def writable(directory):
    """None when this process can create files in directory (tried: a mode bit does not tell root, an
    immutable or read-only mount does), else why not, one line."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".harness-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"cannot write in {directory}: {e.strerror}"
    return None


def clean_temp(run_dir):
    """Remove the temp files of run-file writes killed half-way (`.<file>.*.tmp`): called by the lock holder,
    so no write of another process is in flight."""
    for name in RUN_FILES:
        for p in Path(run_dir).glob(f".{name}.*.tmp"):
            p.unlink(missing_ok=True)
