"""Whether a run dir holds a whole run: each file it wrote read back (status, rows, checkpoint, Hydra config), one
phrase naming the file where one does not; and whether the harness can use the dir at all."""
import json
import os
import zipfile
from pathlib import Path

import pyarrow.parquet as pq

from harness.results.files import (CHECKPOINT, COLUMNS, FINISHED, HYDRA_FILES, KNOWN, MAX_CONFIG_BYTES,
                                   MAX_STATUS_BYTES, ROWS, RUN_FILES, STATUS, _what, writable)
from harness.results.identity import NOT_RESULTS


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


def file_sha256(path) -> str:
    """The sha256 of a file's bytes (a run's rows: a few MB at most)."""
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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
    want = status.get("rows_sha256")  # runs before the fingerprint have none: their rows are taken as they read
    if want and file_sha256(run_dir / ROWS) != want:
        return status, (f"{run_dir / ROWS} is not the file the run wrote (its sha256 differs from the one "
                        f"status.json records: edited or replaced since)")
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
    if cfg.pretrained is not None:  # the evaluated checkpoint is the one at the path now (another file there: rerun)
        from harness.pretrained import checkpoint
        status = read_status(run_dir) or {}
        recorded = status.get("checkpoint_sha256")
        if recorded and recorded != checkpoint.sha256(checkpoint.locate(cfg.pretrained.name, cfg.pretrained.path)):
            return ("the checkpoint it evaluated is not the one at its path now (sha256 differs from the one "
                    "status.json records)")
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
