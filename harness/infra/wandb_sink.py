"""W&B sink: one run per job, grouped by sweep. Called after the local files are written, so a W&B
failure can never lose local results; the failure is returned and recorded in status.json.

Online mode first checks that the W&B server answers (PROBE_S, once per process): without a network,
wandb.init would stall for about 95 s per run. When it does not answer, the run is logged offline
into the run dir instead, and the returned line says so and how to upload it (`wandb sync`)."""
import importlib
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd

PROBE_S = 5.0
_probed = {}  # base URL -> None (answers) or the reason it does not


def unreachable(base_url=None):
    """None when the W&B server at base_url (WANDB_BASE_URL, else api.wandb.ai) answers HTTP within
    PROBE_S, else the reason. Any HTTP status counts as an answer; urllib honours the proxy variables."""
    url = base_url or os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    if url not in _probed:
        try:
            urllib.request.urlopen(url, timeout=PROBE_S).close()
            _probed[url] = None
        except urllib.error.HTTPError:
            _probed[url] = None
        except (OSError, ValueError) as e:  # URLError, timeouts, refused, a malformed URL
            _probed[url] = f"{url} does not answer ({getattr(e, 'reason', e)})"
    return _probed[url]


def _mode(mode):
    """(the mode to log in, a note when online falls back to offline)."""
    if mode != "online":
        return mode, None
    reason = unreachable()
    return ("offline", f"wandb online: {reason}; logged offline instead") if reason else ("online", None)


def _packages_listed_once():
    """W&B lists the installed distributions at every wandb.init (wandb.util.working_set, which parses every
    package's metadata: 35% of the time of a run's record, made in the sweep's process while its jobs run). The
    list is read once per process and handed to every later init unchanged: each run still records it."""
    util = importlib.import_module("wandb.util")
    if getattr(util.working_set, "harness_once", False):
        return
    listed = tuple(util.working_set())

    def working_set():
        return iter(listed)
    working_set.harness_once = True
    util.working_set = working_set


def log(run_dir, wandb_cfg, config_dict, run_id, group, rows, train_log, status):
    """Log config, loss curve, final metrics, a Table of the rows and an extrapolation plot.

    Returns None on success (or mode 'disabled'), else a one-line error or fallback note."""
    if wandb_cfg.mode == "disabled":
        return None
    mode, note = _mode(wandb_cfg.mode)
    raising = logging.raiseExceptions
    logging.raiseExceptions = False  # W&B's own log handlers on a full disk: no traceback per record (31k lines)
    try:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb
        _packages_listed_once()
        wandb_dir = Path(run_dir) / "wandb_files"
        wandb_dir.mkdir(parents=True, exist_ok=True)
        if note:
            note += f" (`wandb sync {wandb_dir}/wandb/offline-run-*` uploads it)"
        run = wandb.init(mode=mode, project=wandb_cfg.project, entity=wandb_cfg.entity,
                         dir=str(wandb_dir), group=group, name=run_id, job_type="train",
                         config=config_dict, reinit="finish_previous")
        try:
            for r in train_log:
                run.log({"train/loss": r["loss"], "train/lr": r["lr"], "train/tokens": r["tokens"]},
                        step=int(r["step"]))
            # from plain lists: Table(dataframe=) reads the frame cell by cell (0.27 s against 0.07 s for a run's
            # ~400 rows); the same column types and values
            frame = rows.astype({"eval_len": "float64"})
            table = wandb.Table(columns=list(frame.columns), data=frame.values.tolist())
            ppl = rows[(rows.metric == "ppl") & (rows.protocol == "nonoverlapping")]
            ppl = ppl[~ppl.params.str.contains('"extension"')].sort_values("eval_len")
            log_dict = {"rows": table}
            if len(ppl):
                xy = wandb.Table(columns=["eval_len", "ppl"],
                                 data=[[int(a), float(b)] for a, b in zip(ppl.eval_len, ppl.value)])
                log_dict["extrapolation"] = wandb.plot.line(xy, "eval_len", "ppl",
                                                            title=f"{run_id}: PPL vs eval length")
            run.log(log_dict)
            # extension and per-position rows live in the Table (one summary key per metric/protocol/length);
            # one update: a summary key set alone is one message to W&B's service each
            base = rows[~rows.params.str.contains('"extension"') & (rows.metric != "nll_by_pos")]
            run.summary.update({"status": status["status"], **{
                r.metric if pd.isna(r.eval_len) else f"{r.metric}/{r.protocol}/{int(r.eval_len)}": r.value
                for r in base.itertuples()}})
        finally:
            run.finish()
        return note
    except Exception as e:  # noqa: BLE001 - W&B is a sink: report, never take local results down
        return f"wandb {mode} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        logging.raiseExceptions = raising


def log_summary(out_dir, mode, group, summary, project="pe-harness", entity=None):
    """One W&B run per sweep report (job_type 'report', the sweep's group): the over-seed aggregates of
    harness.stats.summarize as a Table, and `<metric>/<protocol>/<eval_len>/<variant>` summary keys
    holding mean, lo, hi and n. Per-run W&B runs hold one seed each; this is where seeds meet.
    Returns None on success (or mode 'disabled'), else a one-line error string."""
    if mode == "disabled":
        return None
    mode, note = _mode(mode)
    try:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb
        wandb_dir = Path(out_dir) / "wandb_files"
        wandb_dir.mkdir(parents=True, exist_ok=True)
        if note:
            note += f" (`wandb sync {wandb_dir}/wandb/offline-run-*` uploads it)"
        run = wandb.init(mode=mode, project=project, entity=entity, dir=str(wandb_dir), group=group,
                         name=f"{group}/report", job_type="report", reinit="finish_previous")
        try:
            lens = pd.array(summary["eval_len"], dtype="Float64").to_numpy(dtype=float, na_value=float("nan"))
            table = summary.assign(eval_len=lens)  # nullable Int64 (NA for length-free metrics) -> float
            run.log({"summary": wandb.Table(dataframe=table)})
            for r in summary.itertuples():
                length = "" if pd.isna(r.eval_len) else f"/{int(r.eval_len)}"
                run.summary[f"{r.metric}/{r.protocol}{length}/{r.variant}"] = {
                    "mean": r.mean, "lo": r.lo, "hi": r.hi, "n": int(r.n)}
        finally:
            run.finish()
        return note
    except Exception as e:  # noqa: BLE001 - W&B is a sink: the report on disk stands either way
        return f"wandb {mode} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


LOGGED = ("ok", "diverged", "failed")  # final statuses; a failed run's rows so far are logged too


def log_run(run_dir: Path, cfg=None):
    """The W&B record of one finished run whose status says `wandb: pending`, made from its files (rows, train log,
    status; its `.hydra/config.yaml` when cfg is None) under its run lock; status.json then says `wandb: done`
    (and any `wandb_error`, also printed: local results stand either way). Returns the new status, or None when
    there is nothing to log (not finished, not pending, or another process holds the run)."""
    from harness import results  # here: harness.results imports nothing of W&B, and this module is imported first
    from harness.config import from_dict, to_dict
    from harness.infra import runlock
    status = results.read_status(run_dir)
    if not status or status.get("wandb") != "pending" or status.get("status") not in LOGGED:
        return None
    lock = runlock.claim(run_dir)
    if lock is None:  # a process is computing this run again: it will leave its own status
        return None
    with lock:
        status = results.read_status(run_dir)
        if not status or status.get("wandb") != "pending" or status.get("status") not in LOGGED:
            return None
        if cfg is None:
            from omegaconf import OmegaConf
            cfg = from_dict(OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra" / "config.yaml")))
        run_id = status.get("run_id") or f"{cfg.sweep}/{run_dir.name}"
        rows = pd.read_parquet(run_dir / results.ROWS)
        err = log(run_dir, cfg.wandb, to_dict(cfg), run_id, cfg.sweep, rows, results.read_train_log(run_dir), status)
        status["wandb"] = "done"
        if err:
            status["wandb_error"] = err
            print(f"{run_id}: {err} (local results are written)")
        try:
            results.write_json(run_dir / results.STATUS, status)
        except OSError as e:  # the run's own status (ok, wandb pending) stands: the next command logs it again
            print(f"{run_id}: W&B's outcome not recorded in status.json ({e.strerror or e}); the run stays "
                  f"{status['status']}, W&B pending")
            return {**status, "wandb": "pending"}
    return status


def log_pending(sweep_dir):
    """log_run for every run dir under sweep_dir; the number logged. A sweep's process calls it while its jobs run
    and once at its end, so W&B runs outside the processes whose speed the rows measure."""
    return sum(log_run(p.parent) is not None for p in sorted(Path(sweep_dir).glob("*/status.json")))
