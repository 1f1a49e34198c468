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
import errno
import functools
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import zipfile
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


def _json_type(obj):
    return {list: "a JSON list", str: "a JSON string", bool: "a JSON boolean", type(None): "JSON null",
            int: "a JSON number", float: "a JSON number"}.get(type(obj), type(obj).__name__)


def _read_small(path, limit, what):
    """(bytes, None) of a regular file of at most `limit` bytes, else (None, why not: one phrase naming it)."""
    kind = _what(path)
    if kind == "missing":
        return None, f"{path} is missing"
    if kind:
        return None, f"{path} is {kind}, not {what}"
    try:
        size = os.stat(path).st_size
        if size > limit:
            return None, f"{path} is {size / 2**20:.0f} MiB, too big for {what} (at most {limit / 2**20:.0f} MiB)"
        data = Path(path).read_bytes()
    except OSError as e:
        return None, f"{path} cannot be read ({e.strerror})"
    if not data.strip():
        return None, f"{path} is empty"
    return data, None


def status_checked(run_dir):
    """(status dict, None) for a readable status.json with a known status; (None, None) where there is none;
    (None, why: one phrase naming the file) where it is empty, truncated, binary, the wrong JSON type, huge,
    not a file, or holds an unknown status. Never raises."""
    path = Path(run_dir) / STATUS
    data, problem = _read_small(path, MAX_STATUS_BYTES, "a status file")
    if data is None:
        return None, (None if problem.endswith(" is missing") else problem)
    try:
        obj = json.loads(data.decode("utf-8-sig"))  # an editor's BOM is not damage
    except UnicodeDecodeError:
        return None, f"{path} is binary bytes, not JSON"
    except RecursionError:
        return None, f"{path} is JSON nested too deep to be a status"
    except ValueError as e:
        return None, f"{path} is not whole JSON ({getattr(e, 'msg', e)} at byte {getattr(e, 'pos', '?')})"
    if not isinstance(obj, dict):
        return None, f"{path} holds {_json_type(obj)}, not a JSON object"
    if obj.get("status") not in KNOWN:
        return None, f"{path} has status {obj.get('status')!r}, none of {list(KNOWN)}"
    return obj, None


def read_status(run_dir):
    """status.json as a dict, or None where it is missing or unusable (status_checked says why)."""
    return status_checked(run_dir)[0]


def readable_rows(path):
    """True when path is a parquet file whose footer reads and whose columns include every COLUMNS name
    (a truncated or overwritten file fails here: the footer is the file's last bytes)."""
    if _what(path) is not None:
        return False
    try:
        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001 - missing, truncated, not parquet: all mean "no usable rows"
        return False
    return set(COLUMNS) <= set(names)


def _first_line(e):
    text = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {text[:160]}" if text else type(e).__name__


def rows_problem(path, run_id=None):
    """None when path is a whole rows file (every page decodes) with the COLUMNS and at least one row (of run
    run_id, when given); else why not, one phrase naming the file."""
    kind = _what(path)
    if kind:
        return f"{path} is {kind}" + ("" if kind == "missing" else ", not a rows file")
    try:
        table = pq.read_table(path)
    except Exception as e:  # noqa: BLE001 - truncated, overwritten, another format: all "not rows"
        return f"{path} is truncated or not a parquet file ({_first_line(e)})"
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        return f"{path} lacks the column(s) {missing}"
    if table.num_rows == 0:
        return f"{path} has no rows"
    if run_id is not None:
        others = sorted({str(r) for r in table.column("run_id").to_pylist()} - {str(run_id)})
        if others:
            return f"{path} holds rows of {others[:2]}, not only of this run ({run_id})"
    return None


def checkpoint_problem(path):
    """(None, its config dict) when path is a whole checkpoint (a complete zip whose every CRC matches, which
    torch.load reads with weights_only into {state_dict, config}); else (why not, one phrase naming it, None).
    Reads the file once (the CRCs) and maps it (torch.load(mmap=True)): no tensor is copied."""
    kind = _what(path)
    if kind:
        return f"{path} is {kind}" + ("" if kind == "missing" else ", not a checkpoint"), None
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        return f"{path} is truncated or not a checkpoint (not a whole zip: {_first_line(e)})", None
    if bad:
        return f"{path} is damaged (its {bad} fails its CRC)", None
    import torch
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - torch's ways of saying "not a checkpoint" are many
        return f"{path} does not load ({_first_line(e)})", None
    if not isinstance(ck, dict) or not {"state_dict", "config"} <= set(ck) or not isinstance(ck["config"], dict):
        return f"{path} is not a harness checkpoint (want a dict with state_dict and config)", None
    return None, ck["config"]


def _flat(d, prefix=""):
    out = {}
    for k, v in (d.items() if isinstance(d, dict) else ()):
        key = f"{prefix}{k}"
        out.update(_flat(v, key + ".") if isinstance(v, dict) else {key: json.dumps(v, sort_keys=True, default=str)})
    return out


def config_difference(a: dict, b: dict):
    """The keys (dotted) where two run configs differ in what they measure (NOT_RESULTS left out), as
    'encoding.name alibi, not rope' phrases (at most 3), or None when they agree."""
    fa, fb = ({k: v for k, v in _flat(x).items() if k.split(".")[0] not in NOT_RESULTS} for x in (a, b))
    diff = [k for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)]
    if not diff:
        return None
    first = [k for k in diff if k.endswith(".name")] + [k for k in diff if not k.endswith(".name")]
    return "; ".join(f"{k} {fa.get(k, '(none)')}, not {fb.get(k, '(none)')}".replace('"', "") for k in first[:3])


def yaml_loader():
    """libyaml's safe loader where PyYAML has it (safe_load's results, about 10x faster: a report reads every run's
    config), else PyYAML's own."""
    import yaml
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def hydra_config_problem(run_dir):
    """None when .hydra/config.yaml is missing or a YAML mapping; else why not (one phrase naming it)."""
    path = Path(run_dir) / ".hydra" / "config.yaml"
    data, problem = _read_small(path, MAX_CONFIG_BYTES, "a run config")
    if data is None:
        return None if problem.endswith(" is missing") else problem
    import yaml
    try:
        obj = yaml.load(data.decode("utf-8-sig"), Loader=yaml_loader())
    except UnicodeDecodeError:
        return f"{path} is binary bytes, not YAML"
    except yaml.YAMLError as e:
        return f"{path} is not whole YAML ({_first_line(e)})"
    if not isinstance(obj, dict):
        return f"{path} holds {_json_type(obj).replace('JSON', 'YAML')}, not a run config"
    return None


def check_run(run_dir):
    """(status or None, problem or None): whether run_dir holds a whole run. The problem (one phrase naming the
    file) where a file the run wrote does not read back whole: status.json (status_checked), rows.parquet of a
    finished run (rows_problem: the run's rows, at least one), checkpoint.pt (checkpoint_problem; missing where
    the status says one was written), .hydra/config.yaml; rows or a checkpoint without a status. A status marked
    `rerun` by an earlier command says why. Whether the run is cfg's: checkpoint_of."""
    run_dir = Path(run_dir)
    status, problem = status_checked(run_dir)
    if problem:
        return None, problem
    if status is None:
        left = [n for n in (ROWS, CHECKPOINT) if os.path.lexists(run_dir / n)]
        return None, (f"{run_dir / STATUS} is missing beside {' and '.join(left)}" if left else None)
    if status.get("rerun"):
        return status, str(status["rerun"])
    if status["status"] not in FINISHED:
        return status, None
    problem = rows_problem(run_dir / ROWS, status.get("run_id"))
    if problem:
        return status, problem
    ckpt = run_dir / CHECKPOINT
    if os.path.lexists(ckpt) or status.get("checkpoint"):
        problem, _ = checkpoint_problem(ckpt)
        if problem:
            return status, problem
    return status, hydra_config_problem(run_dir)


def checkpoint_of(run_dir, cfg):
    """For a whole finished run (check_run) made by cfg's config hash: why its checkpoint is not cfg's run's (one
    phrase naming it), or None: missing where cfg asks for one (it ran with checkpoint=false), or holding another
    run's model (copied in from another run dir: its config differs from cfg's in what is measured)."""
    ckpt = Path(run_dir) / CHECKPOINT
    if cfg.pretrained is not None:
        return None
    if not os.path.lexists(ckpt):
        return f"{ckpt} is missing (checkpoint=true asks for one)" if cfg.checkpoint else None
    problem, ck_config = checkpoint_problem(ckpt)
    if problem:
        return problem
    from harness.config import to_dict
    diff = config_difference(ck_config, to_dict(cfg))
    return f"{ckpt} holds another run's model ({diff})" if diff else None


def finished(run_dir):
    """True when run_dir holds a whole finished run (check_run: status ok or diverged, its rows, its checkpoint):
    resume skips it. A corrupt or empty rows file, or a damaged checkpoint, is not finished, so a rerun
    measures the run again and replaces it."""
    status, problem = check_run(run_dir)
    return status is not None and problem is None and status["status"] in FINISHED


def unusable(run_dir):
    """Why the harness cannot use run_dir without removing something it did not write (one line naming the path
    and what to do), or None: a file, symlink loop or dangling symlink where the dir goes; .hydra not a
    directory; a directory or symlink where Hydra writes .hydra/<file> (it would fail, or write through the
    link); a directory where a run file goes (a write cannot replace it); a .lock that is not a file; a dir
    this user cannot write in."""
    run_dir = Path(run_dir)
    if os.path.lexists(run_dir) and not run_dir.is_dir():
        kind = _what(run_dir)
        if kind == "missing":
            kind = f"a symlink to {os.readlink(run_dir)}, which does not exist"
        return f"run dir {run_dir} is {kind or 'a file'}, not a directory: move it away, or choose another out="
    if not run_dir.is_dir():
        return None
    hydra_dir = run_dir / ".hydra"
    if os.path.lexists(hydra_dir) and (not hydra_dir.is_dir() or hydra_dir.is_symlink()):
        return f"{hydra_dir} is {_what(hydra_dir, follow=False) or 'a file'}, not a directory: move it away"
    for name in HYDRA_FILES:
        kind = _what(hydra_dir / name, follow=False)
        if kind not in (None, "missing"):
            return f"{hydra_dir / name} is {kind}, where Hydra writes a file: move it away"
    for name in RUN_FILES:
        if _what(run_dir / name) == "a directory":
            return f"{run_dir / name} is a directory, where the run writes a file: move it away"
    kind = _what(run_dir / ".lock", follow=False)
    if kind not in (None, "missing"):
        return f"{run_dir / '.lock'} is {kind}, not a run lock: remove it"
    return writable(run_dir)


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


_said = set()


def _say(line):
    """A line on stderr, once per process (run_dirs and load may meet the same run dir several times)."""
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)


def _rows_dirs(path):
    path = Path(path)
    return sorted({p.parent for p in path.rglob(ROWS)}) if path.is_dir() else []


def run_dirs(path):
    """Every dir under path (or path itself) that holds a rows file and whose .hydra/config.yaml, if any, reads
    as a run config (the report reads those: one whose config does not read is named on stderr and left out)."""
    out = []
    for d in _rows_dirs(path):
        problem = hydra_config_problem(d)
        if problem:
            _say(f"results.load: leaving out the rows of {d}: {problem}; rerun it to recompute")
            continue
        out.append(d)
    return out


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
        for d in _rows_dirs(path):
            f = d / ROWS
            status, problem = status_checked(d)
            bad = d / STATUS if problem else d / ".hydra" / "config.yaml"
            problem = problem or hydra_config_problem(d)
            if problem:  # a run whose status or config does not read: it may be failed or running; not results
                _say(f"results.load: leaving out the rows of {d}: {problem}; rerun it to recompute")
                skipped.append((str(bad), problem.replace(f"{bad} ", "", 1)))
                continue
            status = status or {}
            if status.get("status") == "failed" and not failed:
                left_out.append((str(d), status.get("message", "")))
                print(f"results.load: leaving out the rows of failed run {d} ({status.get('message', '')})",
                      file=sys.stderr)
                continue
            try:
                kind = _what(f)
                if kind:
                    raise ValueError(f"it is {kind}, not a rows file")
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
