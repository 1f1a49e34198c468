"""lm-eval tasks as harness rows (the row schema: harness/results.py): `evaluate(run_dir, tasks)` for a finished run, and
`rows_for_model(model, cfg, tasks)` for the runner right after training.

Rows: metric `<task>/<metric>` (a filter other than lm-eval's `none` is appended: `<task>/<metric>/<filter>`),
protocol `lm_eval`, and one more row `<task>/<metric>_stderr` where lm-eval reports a standard error.
A metric named by a length (our synthetic tasks: RULER-style) becomes metric `<task>/acc` with that
eval_len. loglikelihood_rolling tasks (pystdlib_ppl, wikitext) depend on the window, so they run at
every eval length under each of the run's protocols: eval_len = window, protocol `lm_eval:<protocol>`.

`python -m harness.lmeval.rows RUN_DIR --tasks passkey,pystdlib_ppl` (`make eval RUN=... TASKS=...`) writes the
rows into the run's rows.parquet (replacing earlier rows of the same measurement), so results.load and
the report see them, and logs them to W&B through the run's sink (cfg.wandb)."""
import argparse
import dataclasses
import io
import math
from pathlib import Path

import pandas as pd
from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager

from harness import paths, results, wandb_sink
from harness.config import to_dict
from harness.lmeval.model import HarnessLM, load_run

TASKS_DIR = paths.tasks_dir()
UNITS = {"byte_perplexity": "ppl", "word_perplexity": "ppl", "bits_per_byte": "bits", "acc": "frac",
         "acc_norm": "frac", "exact_match": "frac"}


def task_manager(tasks, metadata=None):
    """TaskManager over tasks/ alone when it holds every requested task; else tasks/ + lm-eval's own."""
    local = TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata=metadata)
    if all(local.match_tasks([t]) for t in tasks):
        return local
    full = TaskManager(include_path=str(TASKS_DIR), metadata=metadata)
    missing = [t for t in tasks if not full.match_tasks([t])]
    if missing:
        raise ValueError(f"unknown lm-eval task(s) {missing}; expected one of {local.all_tasks} (tasks/) or "
                         f"a task of lm-eval's own (`lm-eval ls tasks`)")
    return full


def _rows(res, eval_len, protocol, extra):
    """simple_evaluate's results -> runner-format measurement dicts."""
    out = []
    for task, metrics in res["results"].items():
        for key, value in metrics.items():
            name, _, filt = key.partition(",")
            if not filt or name.endswith("_stderr") or not isinstance(value, (int, float)):
                continue
            length = int(name) if name.isdigit() else eval_len
            metric = f"{task}/{'acc' if name.isdigit() else name}" + (f"/{filt}" if filt != "none" else "")
            unit = "frac" if name.isdigit() else UNITS.get(name, "score")
            err = metrics.get(f"{name}_stderr,{filt}")
            out.append(dict(metric=metric, eval_len=length, protocol=protocol, value=float(value), unit=unit,
                            extra_params=dict(extra)))
            if isinstance(err, (int, float)):
                out.append(dict(metric=f"{metric}_stderr", eval_len=length, protocol=protocol, value=float(err),
                                unit=unit, extra_params=dict(extra)))
    return out


def rows_for_model(model, cfg, tasks, *, device=None, batch_size=None, lens=None, limit=None,
                   rope_type=None, factor="auto", progress=True):
    """Measurement dicts (the runner's format) for lm-eval `tasks` on an in-memory model + Config.

    lens: windows for loglikelihood_rolling tasks (default: the run's eval lengths); the run's
    eval.protocol(s), eval.stride and eval.max_tokens (pystdlib_ppl's size) apply."""
    tm = task_manager(tasks, metadata={"max_bytes": cfg.eval.max_tokens})
    loaded = tm.load(list(tasks))["tasks"]
    rolling = [t for t in loaded.values() if t.OUTPUT_TYPE == "loglikelihood_rolling"]
    others = [t for t in loaded.values() if t.OUTPUT_TYPE != "loglikelihood_rolling"]
    kw = dict(model=model, config=cfg, device=device, batch_size=batch_size or cfg.eval.batch_size,
              rope_type=rope_type, factor=factor, progress=progress)
    was_training, out = model.training, []
    try:
        lm = HarnessLM(**kw) if others else None
        for task in others:  # one at a time: a length the encoding cannot represent fails only its task
            try:
                out += _rows(_evaluate(lm, [task], tm, limit), None, "lm_eval", lm.extension)
            except ValueError as e:
                out += _nan_rows(task, None, "lm_eval", str(e))
        for L in (lens or cfg.eval.resolved_lens(cfg.train.seq_len)) if rolling else []:
            for protocol in cfg.eval.protocols():
                lm = HarnessLM(**kw, max_length=L, protocol=protocol)
                label = f"lm_eval:{protocol}{lm.stride or ''}"
                try:
                    out += _rows(_evaluate(lm, rolling, tm, limit), L, label, lm.extension)
                except ValueError as e:  # the encoding cannot represent L (its own message): NaN rows
                    out += [r for t in rolling for r in _nan_rows(t, L, label, str(e))]
    finally:
        model.train(was_training)
    return out


def _nan_rows(task, eval_len, protocol, reason):
    """'Not measurable' rows for every metric of a task (a length-named metric at its own length)."""
    return [dict(metric=f"{task.task_name}/{'acc' if n.isdigit() else n}", eval_len=int(n) if n.isdigit() else eval_len,
                 protocol=protocol, value=math.nan, unit="frac" if n.isdigit() else UNITS.get(n, "score"),
                 extra_params=dict(nan_reason=reason)) for n in task.aggregation()]


def _evaluate(lm, task_objs, tm, limit):
    return simple_evaluate(model=lm, tasks=list(task_objs), task_manager=tm, limit=limit, log_samples=False)


def evaluate(run_dir, tasks, *, lens=None, device=None, batch_size=None, limit=None, rope_type=None,
             factor="auto", wandb_mode=None, progress=True) -> pd.DataFrame:
    """Run lm-eval `tasks` on a run dir's checkpoint; merge the rows into its rows.parquet; log to W&B
    (wandb_mode: the run's cfg.wandb.mode unless given). Returns the new rows."""
    run_dir = Path(run_dir)
    cfg, model = load_run(run_dir)
    status = results.read_status(run_dir) or {}
    run_id = status.get("run_id") or run_dir.name
    measured = rows_for_model(model, cfg, tasks, device=device, batch_size=batch_size, lens=lens, limit=limit,
                              rope_type=rope_type, factor=factor, progress=progress)
    new = results.complete(measured, results.base_row(cfg, run_id), status.get("steps", cfg.train.steps))
    _merge(run_dir, new)
    wcfg = dataclasses.replace(cfg.wandb, mode=wandb_mode) if wandb_mode else cfg.wandb
    err = wandb_sink.log(run_dir, wcfg, to_dict(cfg), run_id, cfg.sweep, new, [], {"status": "ok"})
    if err:
        print(f"{run_id}: {err} (local rows are written)")
    return new


KEY = ["metric", "eval_len", "protocol", "params"]


def _merge(run_dir, new):
    """rows.parquet := old rows minus those measured again + new rows (atomic write)."""
    path = Path(run_dir) / results.ROWS
    if path.exists():
        old = pd.read_parquet(path)
        again = old[KEY].astype(str).apply(tuple, axis=1).isin(set(new[KEY].astype(str).apply(tuple, axis=1)))
        new = pd.concat([old[~again], new], ignore_index=True)
    new["eval_len"] = new["eval_len"].astype("Int64")
    results.write_rows(run_dir, new[results.COLUMNS])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.lmeval.rows", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--tasks", required=True, help="comma-separated lm-eval task names (tasks/ or hub)")
    p.add_argument("--lens", default=None, help="comma-separated windows for rolling tasks (default: the run's)")
    p.add_argument("--limit", type=float, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--batch_size", type=int, default=None)
    p.add_argument("--rope_type", default=None)
    p.add_argument("--factor", default="auto")
    p.add_argument("--wandb_mode", default=None, choices=["offline", "online", "disabled"])
    a = p.parse_args(argv)
    factor = a.factor if a.factor == "auto" else float(a.factor)
    lens = [int(x) for x in a.lens.split(",")] if a.lens else None
    df = evaluate(a.run_dir, [t for t in a.tasks.split(",") if t], lens=lens, device=a.device,
                  batch_size=a.batch_size, limit=a.limit, rope_type=a.rope_type, factor=factor,
                  wandb_mode=a.wandb_mode)
    buf = io.StringIO()
    df[["metric", "eval_len", "protocol", "value", "unit"]].to_string(buf, index=False)
    print(buf.getvalue())
    print(f"{len(df)} rows -> {Path(a.run_dir) / results.ROWS}")


if __name__ == "__main__":
    main()
