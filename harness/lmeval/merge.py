"""A finished run's rows.parquet and the lm-eval rows `make eval` adds to it (harness.lmeval.rows.evaluate): whether
the run may take them (`run_problem`: its files read back whole, it is finished, its checkpoint is the one its rows
measured) and the merge (`_merge`: the rows measured again replaced, an unreadable file's bytes kept aside)."""
import datetime
import shlex
import sys
from pathlib import Path

import pandas as pd

from harness import results

KEY = ["metric", "eval_len", "protocol", "params"]
SAME_RUN = ("encoding", "model", "d_model", "n_layers", "n_heads", "task", "train_len", "seed")


def recompute_hint(run_dir):
    """How to compute a run dir again: the command that made it, from its .hydra/overrides.yaml (resume computes
    only that run), else a pointer to it."""
    run_dir = Path(run_dir)
    try:
        import yaml
        overrides = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())
        assert isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)
    except Exception:  # noqa: BLE001 - no readable overrides: say what to do in words
        return "rerun the command that made it (it computes only this run again)"
    words = [] if run_dir.parent.name == "runs" else ["-m", f"hydra.sweep.dir={run_dir.parent}"]
    return f"`python -m harness {' '.join(shlex.quote(w) for w in words + overrides)}` computes only this run"


def run_problem(run_dir, cfg):
    """Why make eval must not add rows to run_dir (one phrase naming the file and how to recompute it), or None:
    its files do not read back whole (results.check_run: a corrupt or empty rows file would leave the lm-eval
    rows alone in it, and the run would read as finished with its training rows lost), it is not finished, or
    its checkpoint (cfg: what load_run read from it) is another run's model than its rows measured."""
    status, problem = results.check_run(run_dir)
    if problem is None and (status is None or status["status"] not in results.FINISHED):
        problem = (f"{Path(run_dir) / results.STATUS} says the run is "
                   f"{status['status'] if status else 'not there'}, not finished")
    if problem is None:
        old = _old_rows(Path(run_dir) / results.ROWS)
        mine = {"encoding": cfg.encoding["name"], "model": cfg.model.name, "d_model": cfg.model.d_model,
                "n_layers": cfg.model.n_layers, "n_heads": cfg.model.n_heads, "task": cfg.task.name,
                "train_len": cfg.train.seq_len, "seed": cfg.seed}
        train = old[~old.protocol.astype(str).str.startswith("lm_eval")] if old is not None else None
        diff = [f"{k} {mine[k]}, not {sorted(set(map(str, train[k])))[0]}" for k in SAME_RUN
                if train is not None and len(train) and set(map(str, train[k])) != {str(mine[k])}]
        if diff:
            return (f"{Path(run_dir) / results.CHECKPOINT} holds another run's model than its rows measured "
                    f"({'; '.join(diff[:3])}): recompute the run ({recompute_hint(run_dir)}), or put its own "
                    f"checkpoint back")
        return None
    return (f"{problem}; make eval adds rows to a finished run's and would leave its training rows lost: recompute "
            f"the run first ({recompute_hint(run_dir)}), then run make eval again")


def _merge(run_dir, new):
    """rows.parquet := old rows minus those measured again + new rows (atomic write). An unreadable old
    file never costs the new rows: its bytes are kept beside it as rows.parquet.corrupt-<UTC time>."""
    path = Path(run_dir) / results.ROWS
    old = _old_rows(path)
    if old is not None:
        again = old[KEY].astype(str).apply(tuple, axis=1).isin(set(new[KEY].astype(str).apply(tuple, axis=1)))
        new = pd.concat([old[~again], new], ignore_index=True)
    elif path.exists():  # spoiled while evaluating (main and evaluate refuse a run whose rows do not read)
        aside = path.with_name(f"{path.name}.corrupt-{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S%fZ}")
        results.atomic_write(aside, path.read_bytes())  # copied before rows.parquet is replaced: never absent
        print(f"harness.lmeval: {path} was unreadable (not a parquet file with the harness columns); its bytes "
              f"are kept in {aside.name}, and it now holds only the {len(new)} new rows", file=sys.stderr)
        status = results.read_status(run_dir)
        if status:  # its training rows are lost: the run must not read as finished (a resume computes it again)
            results.write_json(Path(run_dir) / results.STATUS, {**status, "rerun": (
                f"{path} was unreadable when make eval added rows to it ({aside.name}): its training rows are lost")})
    new["eval_len"] = new["eval_len"].astype("Int64")
    results.write_rows(run_dir, new[results.COLUMNS])
    status = results.read_status(run_dir)
    if status and status.get("rows_sha256"):  # the rows are the run's and make eval's now: their fingerprint too
        results.write_json(Path(run_dir) / results.STATUS,
                           {**status, "rows_sha256": results.file_sha256(Path(run_dir) / results.ROWS)})


def _old_rows(path):
    """The rows of path, or None where it is missing, truncated, or not rows."""
    if not results.readable_rows(path):
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError):  # a footer that reads over damaged pages (pyarrow: ArrowInvalid, ArrowIOError)
        return None
