"""`harness-lm-eval RUN_DIR --tasks ... [options]` (= `python -m harness.lmeval.cli`): lm-eval on model `harness` (a
run dir's checkpoint) and the harness's task YAMLs (tasks/, paths.tasks_dir()), through lm-eval's public Python API:
lm_eval.simple_evaluate on a HarnessLM with a lm_eval.tasks.TaskManager, the table by lm_eval.utils.make_table.
`harness-lm-eval ls [tasks|groups|subtasks|tags]` lists tasks, `harness-lm-eval validate --tasks A,B` checks names.

Why a CLI of our own: lm-eval 0.4.x has no plug-in discovery for model classes (its registry holds what an import
registers; no entry points), so plain `lm_eval --model harness` cannot find the model, and lm-eval's CLI is a private
module (lm_eval._cli). The options are lm-eval's run options that apply to model `harness`, with lm-eval's names and
defaults (--batch_size 1, --device cuda:0, which is CPU where there is no CUDA):

- RUN_DIR as the first argument, `--run RUN_DIR` or `--model_args run=RUN_DIR,k=v` names the checkpoint. A sweep's
  run dir is named by its Hydra overrides, commas and brackets included (`encoding=rope,eval.lens=[64,128],seed=0`),
  so run's value in `k=v,...` is the longest comma-extended stretch that is a directory (model.parse_model_args).
- --include_path is the harness's tasks/ unless one is given. Indexing lm-eval's built-in task configs costs 8-25 s,
  so the tasks are resolved against --include_path alone first (TaskManager(include_defaults=False)); only when one
  is not there (a hub task such as hellaswag) is the full index built, as lm-eval builds it.
- An ordinary mistake (an option, a --model_args, the checkpoint, a task in no index, no --tasks) is one line
  `harness.lmeval: error: ...`, exit 2, before any evaluation; anything else (a bug included) is raised.
- The results table lists a task's metrics per length in numeric order (128 before 1024): natural_table."""
import argparse
import functools
import sys
import textwrap

import lm_eval
import lm_eval.tasks
import lm_eval.utils
from lm_eval.utils import setup_logging

from harness.lmeval import rows  # imports harness.lmeval.model, which registers model "harness" with lm-eval
from harness.lmeval.model import HarnessLM, UsageError, model_args, parse_model_args
from harness.lmeval.options import dict_option, key_values, seed_option

PROG = "harness-lm-eval"
EXAMPLE = "--tasks passkey,pystdlib_ppl"
LISTS = {"tasks": {}, "groups": dict(list_subtasks=False, list_tags=False),  # `ls WHAT`: list_all_tasks' flags
         "subtasks": dict(list_groups=False, list_tags=False), "tags": dict(list_groups=False, list_subtasks=False)}
DICT = dict(nargs="+", action="extend", metavar="ARG")  # `k=v,k2=v2`, `k=v k2=v2` or a JSON object, merged
RUN_OPTIONS = [  # (names, argparse keywords): lm-eval's run options that apply to model `harness`
    (["--run"], dict(action="append", metavar="RUN_DIR", help="the run dir (the same as RUN_DIR)")),
    (["--model", "-M"], dict(help="harness, the one model here (lm-eval's others: `lm_eval --model ...`)")),
    (["--model_args", "-a"], dict(DICT, help="model `harness`'s arguments, `k=v,k2=v2` or a JSON object")),
    (["--tasks", "-t"], dict(nargs="+", action="extend", metavar="TASK", help="task names, comma- or space-separated")),
    (["--include_path"], dict(metavar="DIR", help="the task YAMLs' dir (default: the harness's tasks/)")),
    (["--limit", "-L"], dict(help="docs per task (>= 1), or a fraction of them (< 1)")),
    (["--num_fewshot", "-f"], dict(type=int, metavar="N", help="examples in the few-shot context")),
    (["--batch_size", "-b"], dict(help="an integer (default: model_args batch_size, else 1)")),
    (["--device"], dict(help="cpu, cuda or cuda:<N> (default: model_args device, else cuda:0; CPU without CUDA)")),
    (["--gen_kwargs"], dict(DICT, help="generation arguments (decoding is greedy)")),
    (["--metadata"], dict(DICT, help="task metadata, merged over the model_args (e.g. max_bytes=4096)")),
    (["--seed"], dict(help="python,numpy,torch,fewshot seeds, or one for all four (default 0,1234,1234,1234)")),
    (["--output_path", "-o"], dict(metavar="PATH", help="dir or .json file for the results (and samples)")),
    (["--log_samples", "-s"], dict(action="store_true", help="save every doc's model output (needs --output_path)")),
    (["--write_out", "-w"], dict(action="store_true", help="print the prompts of the first docs")),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's is usage + error on two lines; ours is one line, with the choices
        if message.startswith("unrecognized arguments"):
            message += f"; expected options of `{self.prog}`: {self.options}"
        raise UsageError(message)


def parser():
    """The run command's parser (`harness-lm-eval [run] ...`)."""
    p = _Parser(prog=PROG, usage=f"{PROG} [run] RUN_DIR --tasks TASK[,TASK...] [options]", epilog=textwrap.dedent(f"""
        other commands:
          {PROG} ls [tasks|groups|subtasks|tags] [--include_path DIR]   lm-eval's tasks and the harness's
          {PROG} validate --tasks TASK[,TASK...] [--include_path DIR]   check that the tasks are found"""),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="a run dir holding checkpoint.pt")
    for names, kw in RUN_OPTIONS:
        p.add_argument(*names, **kw)
    p.options = [n for names, _ in RUN_OPTIONS for n in names if n.startswith("--")]
    return p


def header():
    """The lines `--help` prints before the options."""
    args = ", ".join("run=RUN_DIR" if k == "run" else f"{k}={v!r}" for k, v in model_args().items())
    wrap = functools.partial(textwrap.fill, width=110, subsequent_indent="      ", break_on_hyphens=False,
                             break_long_words=False)
    return "\n".join([
        f"{PROG}: lm-eval (its Python API) on model `harness`, a run dir's checkpoint, and the harness's tasks.",
        "",
        f"  {PROG} RUN_DIR {EXAMPLE} [options]",
        wrap("    RUN_DIR: a run dir holding checkpoint.pt (a sweep's, e.g. "
             "results/sweeps/lm_eval/encoding=rope,seed=0: commas, brackets and = are fine); the same as "
             "--run RUN_DIR, or --model harness --model_args run=RUN_DIR"),
        wrap(f"    model_args of model `harness` (--model_args k=v,k2=v2): {args}"),
        wrap(f"    tasks: the harness's task YAMLs at {rows.TASKS_DIR} (package harness.lm_eval_tasks), the "
             f"--include_path unless one is given, and lm-eval's own; `{PROG} ls tasks` lists every task"),
        f"    plain `lm_eval --model harness` cannot find the model (lm-eval has no model plug-ins): use {PROG}",
        "",
    ])


def _tasks(values):
    """The task names of --tasks (comma- or space-separated, each once); UsageError when there are none."""
    names = list(dict.fromkeys(t.strip() for v in values or () for t in v.split(",") if t.strip()))
    if not names:
        raise UsageError(f"no --tasks given; name the tasks to evaluate, e.g. {EXAMPLE} (the harness's: "
                         f"{', '.join(rows._index(False).all_tasks)}); `{PROG} ls tasks` lists every task")
    return names


def parse(argv):
    """The run command's arguments, checked and completed: tasks (a list), limit (a float), model_args (one dict,
    run included), gen_kwargs, metadata and seed (dicts), batch_size and device. UsageError names what
    is wrong."""
    a = parser().parse_args(argv)
    a.tasks = _tasks(a.tasks)
    if a.limit is not None:
        try:
            a.limit = rows._limit(a.limit)
        except argparse.ArgumentTypeError as e:
            raise UsageError(f"--limit: {e}") from None
    runs = [*([a.run_dir] if a.run_dir else []), *(a.run or [])]
    if len(runs) > 1:
        raise UsageError(f"one run dir, please; got {runs}")
    if a.model not in (None, "harness"):
        raise UsageError(f"--model {a.model}: {PROG} evaluates model `harness` (a run dir's checkpoint) only; "
                         f"expected --model harness or none (lm-eval's own models: `lm_eval --model {a.model}`)")
    a.model_args = dict_option("--model_args", a.model_args, lambda text: parse_model_args(text, key_values))
    if runs and "run" in a.model_args:
        raise UsageError(f"run dir given twice: {runs[0]!r} and model_args run={a.model_args['run']!r}")
    a.model_args = {**a.model_args, **({"run": runs[0]} if runs else {})}
    if "run" not in a.model_args:
        raise UsageError(f"no run dir given; expected {PROG} RUN_DIR {EXAMPLE}, or --run RUN_DIR, or --model_args "
                         f"run=RUN_DIR")
    a.gen_kwargs, a.metadata = dict_option("--gen_kwargs", a.gen_kwargs), dict_option("--metadata", a.metadata)
    if a.log_samples and not a.output_path:
        raise UsageError("--log_samples saves the samples beside the results: give --output_path too")
    a.seed = seed_option(a.seed) if a.seed is not None else {}
    # lm-eval's CLI defaults, which a model_args batch_size or device is not overridden by
    a.batch_size = a.batch_size or (None if "batch_size" in a.model_args else 1)
    a.device = a.device or (None if "device" in a.model_args else "cuda:0")
    return a


def task_manager(tasks, include_path=None, metadata=None):
    """TaskManager over include_path (default tasks/) alone when it holds every task, else with lm-eval's own
    configs as well; UsageError naming the tasks found in neither, and the valid ones."""
    paths = include_path or str(rows.TASKS_DIR)
    local = lm_eval.tasks.TaskManager(include_path=paths, include_defaults=False, metadata=metadata)
    missing = [t for t in tasks if not local.match_tasks([t])]
    if not missing:
        return local
    full = lm_eval.tasks.TaskManager(include_path=paths, metadata=metadata)
    missing = [t for t in missing if not full.match_tasks([t])]
    if missing:
        where = f"--include_path {include_path}" if include_path else "tasks/"
        raise UsageError(rows.unknown_tasks_message(missing, local.all_tasks, where))
    return full


class _Natural(str):
    """A metric key `metric,filter` that sorts with its digit runs by value (rows.natural)."""
    def __lt__(self, other):
        return rows.natural(self) < rows.natural(other)


def natural_table(results, column="results"):
    """lm_eval.utils.make_table(results, column) with a task's metrics per length in numeric order: make_table
    sorts a task's `metric,filter` keys with sorted(), which puts `1024,none` before `128,none`; these keys
    sort by value (and are in that order, should make_table ever keep the dict's)."""
    shown = {task: {_Natural(k): metrics[k] for k in sorted(metrics, key=rows.natural)}
             for task, metrics in results[column].items()}
    return lm_eval.utils.make_table({**results, column: shown}, column)


def evaluate(a):
    """Build the model (its arguments and checkpoint checked), resolve the tasks, run simple_evaluate, save and
    print the results as lm-eval's CLI does."""
    lm = HarnessLM.create_from_arg_obj(a.model_args, {"batch_size": a.batch_size, "device": a.device})
    tm = task_manager(a.tasks, a.include_path, {**a.model_args, **a.metadata})  # lm-eval's CLI's metadata
    tracker = None
    if a.output_path:
        from lm_eval.loggers import EvaluationTracker  # imports datasets and huggingface_hub: only when saving
        tracker = EvaluationTracker(output_path=a.output_path)
    res = lm_eval.simple_evaluate(
        model=lm, model_args=a.model_args, tasks=a.tasks, task_manager=tm, num_fewshot=a.num_fewshot,
        batch_size=lm.batch_size, device=a.device, limit=a.limit, write_out=a.write_out, log_samples=a.log_samples,
        evaluation_tracker=tracker, gen_kwargs=a.gen_kwargs, **a.seed)
    if res is None:  # not rank 0
        return
    res["config"]["model"] = "harness"  # simple_evaluate names an LM instance by its class; lm-eval's CLI by --model
    samples = res.pop("samples", None)
    if tracker:
        tracker.save_results_aggregated(results=res, samples=samples if a.log_samples else None)
        for task in res["configs"] if a.log_samples else ():
            tracker.save_results_samples(task_name=task, samples=samples[task])
    sizes = ",".join(map(str, res["config"]["batch_sizes"]))
    print(f"harness ({a.model_args}), gen_kwargs: ({a.gen_kwargs}), limit: {a.limit}, num_fewshot: "
          f"{a.num_fewshot}, batch_size: {lm.batch_size}{f' ({sizes})' if sizes else ''}")
    print(natural_table(res))
    if "groups" in res:
        print(natural_table(res, "groups"))


def _small(command, first):
    """The parser of `ls` or `validate`: first (its argument) and --include_path."""
    p = _Parser(prog=f"{PROG} {command}")
    p.add_argument(*first[0], **first[1])
    p.add_argument("--include_path", metavar="DIR", help="the task YAMLs' dir (default: the harness's tasks/)")
    p.options = [n for n in (*first[0], "--include_path") if n.startswith("--")]
    return p


def ls(argv):
    """lm-eval's list of tasks, groups, subtasks or tags, with those of --include_path (default tasks/)."""
    a = _small("ls", (["what"], dict(nargs="?", default="tasks", choices=list(LISTS)))).parse_args(argv)
    setup_logging()
    print(lm_eval.tasks.TaskManager(include_path=a.include_path or str(rows.TASKS_DIR)).list_all_tasks(**LISTS[a.what]))


def validate(argv):
    """Whether every task of --tasks is found (in --include_path, default tasks/, or lm-eval's own)."""
    a = _small("validate", (["--tasks", "-t"], dict(nargs="+", action="extend", metavar="TASK"))).parse_args(argv)
    tasks = _tasks(a.tasks)
    setup_logging()
    task_manager(tasks, a.include_path)
    print(f"Validating tasks: {tasks}\nAll tasks found and valid")


def run(argv):
    a = parse(argv)
    setup_logging()  # lm-eval's log lines on stderr (LMEVAL_LOG_LEVEL), as its own CLI shows them
    evaluate(a)


COMMANDS = {"run": run, "ls": ls, "validate": validate}


def main(argv=None):
    """harness-lm-eval on argv (default sys.argv[1:]): `[run] RUN_DIR --tasks ...`, `ls`, `validate`. A mistake in
    the arguments, --model_args, the checkpoint or a task name is one line, exit 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or "-h" in argv or "--help" in argv:
        print(header())
    if not argv:
        parser().print_help()
        return
    command, rest = (argv[0], argv[1:]) if argv[0] in COMMANDS else ("run", argv)
    try:
        COMMANDS[command](rest)
    except UsageError as e:
        rows.fail(e)


if __name__ == "__main__":
    main()
