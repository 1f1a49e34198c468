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
import sys
from pathlib import Path

import pandas as pd

from harness.results.files import (CHECKPOINT, COLUMNS, FINISHED, HYDRA_FILES, KNOWN, MAX_CONFIG_BYTES,  # noqa: F401
                                   MAX_STATUS_BYTES, ROWS, RUN_FILES, STATUS, TRAIN_LOG, RunDirError, _what,
                                   atomic_write, clean_temp, read_train_log, retire_rows, writable, write_checkpoint,
                                   write_error, write_json, write_rows, write_train_log)
from harness.results.checks import (check_run, checkpoint_of, checkpoint_problem, config_difference, file_sha256,  # noqa: F401
                                    finished, hydra_config_problem, read_status, readable_rows, rows_problem,
                                    status_checked, unusable, yaml_loader)
from harness.results.identity import (CODE, NOT_RESULTS, NOT_RUN_CODE, base_row, code_hash, complete,  # noqa: F401
                                      config_hash, git_sha, run_code_hash)

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
    (run dir, message): they are incomplete, and must not read as results. Rows beside a `running` status are
    left out always (named the same way, message 'running'): a run in progress or killed."""
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
            if status.get("status") == "running":  # being recomputed, or killed while it was: not results
                left_out.append((str(d), "running"))
                _say(f"results.load: leaving out the rows of {d}: its status is 'running' (a run in progress, or one "
                     f"killed before it finished); rerun it to finish")
                continue
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
