"""lm-eval tasks as harness rows (the row schema: harness/results/files.py): `evaluate(run_dir, tasks)` for a finished
run, and `rows_for_model(model, cfg, tasks)` for the runner right after training; `check_tasks(names)` refuses unknown
task names (the runner calls it before training).

Rows: metric `<task>/<metric>` (a filter other than lm-eval's `none` is appended: `<task>/<metric>/<filter>`),
protocol `lm_eval`, and one more row `<task>/<metric>_stderr` where lm-eval reports a standard error.
A metric named by a length (our synthetic tasks: RULER-style) becomes metric `<task>/acc` with that
eval_len. loglikelihood_rolling tasks (pystdlib_ppl, wikitext) depend on the window, so they run at
every eval length under each of the run's protocols: eval_len = window, protocol `lm_eval:<protocol>`.

`python -m harness.lmeval.rows RUN_DIR --tasks passkey,pystdlib_ppl` (`make eval RUN=... TASKS=...`) writes the
rows into the run's rows.parquet (replacing earlier rows of the same measurement), so results.load and
the report see them, and logs them to W&B through the run's sink (cfg.wandb). A wrong argument, run dir, checkpoint
or task name is one line `harness.lmeval: error: ...`, exit 2, before any evaluation and with the run dir unchanged."""
import argparse
import dataclasses
import functools
import io
import logging
import math
import re
import sys
from pathlib import Path

import pandas as pd
from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager

from harness import paths, results
from harness.infra import wandb_sink
from harness.config import EXTENSIONS, to_dict
from harness.lmeval.merge import _merge, recompute_hint, run_problem  # noqa: F401 - re-exported
from harness.lmeval.model import HarnessLM, load_run

TASKS_DIR = paths.tasks_dir()
UNITS = {"byte_perplexity": "ppl", "word_perplexity": "ppl", "bits_per_byte": "bits", "acc": "frac",
         "acc_norm": "frac", "exact_match": "frac"}


@functools.lru_cache(maxsize=2)
def _index(defaults):
    """TaskManager over tasks/ (defaults=False) or tasks/ + lm-eval's own ~15k configs (8-25 s to index):
    built once per process (check_tasks; task_manager without metadata)."""
    log = logging.getLogger("lm_eval.tasks._index")
    log.addFilter(_our_override)
    try:
        return TaskManager(include_path=str(TASKS_DIR), include_defaults=defaults)
    finally:
        log.removeFilter(_our_override)


def _our_override(record):
    """False for lm-eval's warning that a task of tasks/ overrides one of its own: meant (our passkey is the
    runner's test set, lm-eval's libra/passkey another task), and a second stderr line before an error."""
    args = record.args if isinstance(record.args, tuple) else ()
    return not ("overrides existing task" in record.msg and len(args) > 1 and Path(args[1]).parent == TASKS_DIR)


def unknown_tasks_message(missing, ours, where):
    """The one-line refusal of task names found nowhere (check_tasks; harness.lmeval.cli for its --include_path)."""
    return (f"unknown lm-eval task(s) {list(missing)}; expected one of {list(ours)} ({where}) or a task of "
            f"lm-eval's own (`lm-eval ls tasks`)")


def check_tasks(names):
    """ValueError (one line, the valid choices) unless every name is a task, group or tag of tasks/ or of
    lm-eval's own; lm-eval's own are indexed only when a name is not one of ours."""
    names = list(names)
    if not names:
        raise ValueError(f"no lm-eval task given; expected one or more of {_index(False).all_tasks} (tasks/) or "
                         f"of lm-eval's own (`lm-eval ls tasks`)")
    missing = [t for t in names if not _index(False).match_tasks([t])]
    missing = [t for t in missing if not _index(True).match_tasks([t])]
    if missing:
        raise ValueError(unknown_tasks_message(missing, _index(False).all_tasks, "tasks/"))


def task_manager(tasks, metadata=None):
    """TaskManager over tasks/ alone when it holds every requested task; else tasks/ + lm-eval's own.
    metadata reaches the tasks' loaders, so a manager with metadata is built afresh (tasks/ alone is cheap)."""
    check_tasks(tasks)
    local = all(_index(False).match_tasks([t]) for t in tasks)
    if metadata is None:
        return _index(not local)
    return TaskManager(include_path=str(TASKS_DIR), include_defaults=not local, metadata=metadata)


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
    batch_size = cfg.eval.batch_size if batch_size is None else batch_size  # not `or`: 0 is refused, not replaced
    kw = dict(model=model, config=cfg, device=device, batch_size=batch_size, rope_type=rope_type, factor=factor,
              progress=progress)
    was_training, out = model.training, []
    try:
        lm = HarnessLM(**kw) if others else None
        for task in others:  # one at a time: a length the encoding cannot represent fails only its task
            try:
                lm.decode_paths.clear()
                res = _evaluate(lm, [task], tm, limit)
                paths = {"decode": "+".join(sorted(lm.decode_paths))} if lm.decode_paths else {}
                out += _rows(res, None, "lm_eval", {**lm.extension, **paths})
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
             factor="auto", wandb_mode=None, progress=True, run=None) -> pd.DataFrame:
    """Run lm-eval `tasks` on a run dir's checkpoint; merge the rows into its rows.parquet; log to W&B
    (wandb_mode: the run's cfg.wandb.mode unless given). Returns the new rows. run: its (Config, model),
    when already loaded (main loads it to check the arguments before any evaluation)."""
    run_dir = Path(run_dir)
    cfg, model = run or load_run(run_dir)  # task names: checked first thing in rows_for_model (task_manager)
    if run is None:  # main checked it with the arguments
        problem = run_problem(run_dir, cfg)
        if problem:
            raise ValueError(problem)
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


def natural(text):
    """A sort key that orders the digit runs of text by value: metric `passkey/acc` at 128 before 1024, lm-eval's
    length-named metrics `128,none` before `1024,none` (a plain string sort puts 1024 first)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(text)) if t)


def table(df):
    """The rows as the CLI prints them: metric, eval_len, protocol, value, unit, ordered by metric and protocol
    (digit runs by value), then by length as a number."""
    cols = ["metric", "eval_len", "protocol", "value", "unit"]
    key = {"metric": natural, "protocol": natural, "eval_len": lambda L: (pd.isna(L), 0 if pd.isna(L) else int(L))}
    order = sorted(range(len(df)),
                   key=lambda i: tuple(key[c](df[c].iloc[i]) for c in ("metric", "protocol", "eval_len")))
    return df[cols].iloc[order].reset_index(drop=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage + error is two lines; the entry points say one
        fail(message)


def fail(message):
    """The entry points' way to refuse: one stderr line, exit 2 (as `harness: error:` in harness/__main__.py)."""
    print(f"harness.lmeval: error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(2)


def _ints(text):
    try:
        lens = [int(x) for x in text.split(",")]
    except ValueError:
        lens = []
    if not lens or min(lens) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated window lengths >= 1, e.g. 64,128; got {text!r}")
    return lens


def _limit(text):
    try:
        limit = float(text)
    except ValueError:
        limit = math.nan
    if not limit > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a number of docs per task (>= 1) or a fraction of them "
                                         f"(0 < limit < 1); got {text!r}")
    return limit


def _factor(text):
    try:
        return text if text == "auto" else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number; got {text!r}") from None


def main(argv=None):
    p = _Parser(prog="python -m harness.lmeval.rows", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--tasks", required=True, help="comma-separated lm-eval task names (tasks/ or hub)")
    p.add_argument("--lens", type=_ints, default=None, help="comma-separated windows for rolling tasks (default: "
                                                            "the run's)")
    p.add_argument("--limit", type=_limit, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--batch_size", type=int, default=None)
    p.add_argument("--rope_type", default=None, choices=list(EXTENSIONS))
    p.add_argument("--factor", type=_factor, default="auto")
    p.add_argument("--wandb_mode", default=None, choices=["offline", "online", "disabled"])
    a = p.parse_args(argv)
    tasks = [t for t in a.tasks.split(",") if t]
    kw = dict(lens=a.lens, device=a.device, batch_size=a.batch_size, limit=a.limit, rope_type=a.rope_type,
              factor=a.factor)
    try:  # every argument, the checkpoint and the task names are checked here, before any evaluation
        run = load_run(a.run_dir)
        cfg, net = run
        problem = run_problem(a.run_dir, cfg)
        if problem:
            fail(problem)
        HarnessLM(model=net, config=cfg, device=a.device, rope_type=a.rope_type, factor=a.factor, progress=False,
                  batch_size=cfg.eval.batch_size if a.batch_size is None else a.batch_size)
        check_tasks(tasks)
    except (ValueError, OSError) as e:  # load_run's and HarnessLM's own one-line messages
        fail(e)
    df = evaluate(a.run_dir, tasks, wandb_mode=a.wandb_mode, run=run, **kw)
    buf = io.StringIO()
    table(df).to_string(buf, index=False)
    print(buf.getvalue())
    print(f"{len(df)} rows -> {Path(a.run_dir) / results.ROWS}")


if __name__ == "__main__":
    main()
