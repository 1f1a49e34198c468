"""`harness-lm-eval RUN_DIR --tasks ... [lm-eval flags]` (= `python -m harness.lmeval.cli`): lm-eval's own CLI
with model `harness` registered and the harness's task YAMLs (tasks/, paths.tasks_dir()) as --include_path.

lm-eval 0.4.x has no plug-in discovery for model classes (its registry holds its own MODEL_MAPPING and what an
import registers; no entry points), so plain `lm_eval --model harness` cannot find the model: this imports
harness.lmeval.model, which registers `harness`, and runs lm-eval's CLI on an argv rewritten first (_rewrite):

- RUN_DIR as the first argument, or `--run RUN_DIR`, is `--model harness --model_args run=RUN_DIR`. lm-eval
  splits --model_args on commas and a sweep's run dir is named by its Hydra overrides, commas and brackets
  included (`encoding=rope,eval.lens=[64,128],seed=0`); so model harness's model_args reach lm-eval as one
  JSON object, which it does not split. `--model_args run=RUN_DIR,k=v` is read the same way
  (model.parse_model_args: run's value is the longest comma-extended stretch that is a directory).
- --include_path is the harness's tasks/ unless one is given (`run`, `ls`, `validate`).
- No --tasks (and no --config to hold them) is one line before any work, instead of lm-eval building its
  ~15k-task index (~30 s) and then raising.
- `--help` (or no argument) prints a few lines on model `harness`, its model_args, RUN_DIR and the task
  path, then lm-eval's own help.
- The results table lm-eval prints lists a task's metrics per length in numeric order (128 before 1024;
  lm-eval sorts them as strings): natural_table.

Then two narrow changes to the run. Indexing lm-eval's built-in task configs costs 8-25 s, so `run` first
resolves the requested tasks against --include_path alone (TaskManager(include_defaults=False)); only when a
task is not found there (a hub task such as hellaswag) is the full index built, exactly as lm-eval would have.
This wraps EvaluatorConfig.process_tasks, the one place lm-eval's CLI builds its TaskManager. And the ordinary
mistakes, a wrong --model_args (HarnessLM's construction: its arguments and the checkpoint, model.UsageError)
or a task in no index, are one line `harness.lmeval: error: ...`, exit 2, instead of a traceback; anything
else (a bug included) is raised as lm-eval raises it."""
import functools
import json
import sys
import textwrap
from unittest import mock

import lm_eval.tasks
import lm_eval.utils
from lm_eval.__main__ import cli_evaluate
from lm_eval._cli.harness import HarnessCLI
from lm_eval._cli.utils import key_val_to_dict, try_parse_json
from lm_eval.config.evaluate_config import EvaluatorConfig

from harness.lmeval import rows  # imports harness.lmeval.model, which registers model "harness"
from harness.lmeval.model import UsageError, model_args, parse_model_args

NOT_FOUND = "Tasks not found: "  # lm-eval's message when a requested task is in no index
NO_TASKS = ("No tasks specified", "Need to specify task")  # lm-eval's, when none are (a --config without them)
PROG = "harness-lm-eval"
EXAMPLE = "--tasks passkey,pystdlib_ppl"


def _local_first(process_tasks):
    """process_tasks with include_defaults=False first; the full index only if a task is missing."""
    @functools.wraps(process_tasks)
    def wrapper(self, metadata=None):
        if self.include_path:
            local = functools.partial(lm_eval.tasks.TaskManager, include_defaults=False)
            try:
                with mock.patch.object(lm_eval.tasks, "TaskManager", local):
                    return process_tasks(self, metadata)
            except ValueError as e:
                if NOT_FOUND not in str(e):
                    raise
        try:
            return process_tasks(self, metadata)
        except ValueError as e:
            if not str(e).startswith(NOT_FOUND):
                raise
            raise UsageError(_unknown(str(e)[len(NOT_FOUND):].split(", "), self.include_path)) from e
    return wrapper


def _unknown(missing, include_path):
    """rows.check_tasks' message, naming the tasks of --include_path (ours, when it is not given)."""
    paths = include_path if isinstance(include_path, (list, tuple)) else [include_path] if include_path else []
    ours = lm_eval.tasks.TaskManager(include_path=[str(p) for p in paths] or str(rows.TASKS_DIR),
                                     include_defaults=False).all_tasks
    where = f"--include_path {' '.join(map(str, paths))}" if paths else f"tasks/, with --include_path {rows.TASKS_DIR}"
    return rows.unknown_tasks_message(missing, ours, where)


def _natural_sorted(iterable, key=None, reverse=False):
    """sorted() with digit runs ordered by value: lm-eval's make_table sorts a task's `metric,filter` keys with
    sorted(), which puts a length-named metric `1024,none` before `128,none`."""
    return sorted(iterable, key=lambda x: _natural_key(key(x) if key else x), reverse=reverse)


def _natural_key(x):
    return rows.natural(x) if isinstance(x, str) else tuple(map(_natural_key, x)) if isinstance(x, tuple) else x


def natural_table(make_table):
    """lm-eval's make_table (the results table its CLI prints) with metrics per length in numeric order."""
    @functools.wraps(make_table)
    def wrapper(*args, **kwargs):
        with mock.patch.object(lm_eval.utils, "sorted", _natural_sorted, create=True):
            return make_table(*args, **kwargs)
    return wrapper


def header():
    """The lines `--help` prints before lm-eval's own help."""
    args = ", ".join("run=RUN_DIR" if k == "run" else f"{k}={v!r}" for k, v in model_args().items())
    wrap = functools.partial(textwrap.fill, width=110, subsequent_indent="      ", break_on_hyphens=False,
                             break_long_words=False)
    return "\n".join([
        f"{PROG}: lm-eval's CLI with model `harness` (a harness run dir's checkpoint) and the harness's tasks.",
        "",
        f"  {PROG} RUN_DIR {EXAMPLE} [lm-eval flags]",
        wrap("    RUN_DIR: a run dir holding checkpoint.pt (a sweep's, e.g. "
             "results/sweeps/lm_eval/encoding=rope,seed=0: commas, brackets and = are fine); the same as "
             "--run RUN_DIR, or --model harness --model_args run=RUN_DIR"),
        wrap(f"    model_args of model `harness` (--model_args k=v,k2=v2): {args}"),
        wrap(f"    tasks: the harness's task YAMLs at {rows.TASKS_DIR} (package harness.lm_eval_tasks), the "
             f"--include_path unless one is given; `{PROG} ls tasks` lists every task"),
        f"    plain `lm_eval --model harness` cannot find the model (lm-eval has no model plug-ins): use {PROG}",
        "",
        "lm-eval's own help:",
        "",
    ])


def _option(parser, token):
    """(dest, inline value or None) of the option token names in parser (an exact option, or a unique prefix of
    a long one, as argparse takes them), else (None, None)."""
    table = parser._option_string_actions
    if token.startswith("--"):
        name, eq, value = token.partition("=")
        hits = [name] if name in table else [o for o in table if o.startswith("--") and o.startswith(name)]
        return (table[hits[0]].dest, value if eq else None) if len({table[o].dest for o in hits}) == 1 else (None, None)
    if token.startswith("-") and token[:2] in table:
        value = token[2:].removeprefix("=")
        return table[token[:2]].dest, value or None
    return None, None


def _scan(parser, argv):
    """argv as [(dest or None, [tokens], [values])]: an option of parser (or --run) with the tokens it takes,
    else one token alone. Values are what argparse would take: the inline one, else nargs' share of the next
    tokens that do not start with '-'."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        dest, inline = ("run", token.partition("=")[2] or None) if token.partition("=")[0] == "--run" else \
            _option(parser, token)
        if dest is None:
            out.append((None, [token], []))
            i += 1
            continue
        nargs = "1" if dest == "run" else parser._option_string_actions[
            next(o for o, a in parser._option_string_actions.items() if a.dest == dest)].nargs
        j = i + 1
        if inline is None and nargs != 0:
            while j < len(argv) and not argv[j].startswith("-") and (nargs in ("+", "*") or j == i + 1):
                j += 1
        out.append((dest, argv[i:j], [inline] if inline is not None else argv[i + 1:j]))
        i = j
    return out


def _harness_args(values):
    """One dict of all --model_args values (JSON objects, `k=v,...` strings whose run= may hold commas)."""
    merged = {}
    for v in values:
        obj = try_parse_json(v)
        try:
            merged.update(obj if isinstance(obj, dict) else parse_model_args(v, key_val_to_dict))
        except ValueError as e:  # lm-eval's `expected key=value, got ...`
            raise UsageError(f"argument --model_args: {e}") from e
    return merged


def _rewrite(argv):
    """lm-eval's argv for ours (see the module docstring); UsageError for an argv refused in one line."""
    commands = HarnessCLI()._subparsers.choices
    if argv[:1] and argv[0] in ("ls", "validate"):
        given = {dest for dest, _, _ in _scan(commands[argv[0]], argv[1:])}
        return argv if given & {"help", "include_path"} else [*argv, "--include_path", str(rows.TASKS_DIR)]
    rest = argv[1:] if argv[:1] == ["run"] else list(argv)
    run = [rest.pop(0)] if rest and not rest[0].startswith("-") else []  # RUN_DIR first
    items = _scan(commands["run"], rest)
    given = {dest for dest, _, _ in items}
    if "help" in given:
        return argv
    if not given & {"tasks", "config"}:
        raise UsageError(f"no --tasks given; name the tasks to evaluate, e.g. {EXAMPLE} (the harness's: "
                         f"{', '.join(rows._index(False).all_tasks)}); `{PROG} ls tasks` lists every task")
    for i, tok in enumerate(rest):  # a --limit lm-eval would take and fail on deep inside (--limit -1, 0)
        value = tok.partition("=")[2] if tok.startswith("--limit=") else rest[i + 1] if (
            tok == "--limit" and i + 1 < len(rest)) else None
        if value is not None:
            try:
                rows._limit(value)
            except Exception as e:  # noqa: BLE001 - argparse.ArgumentTypeError: its message is the line
                raise UsageError(f"--limit: {e}") from None
    run += [v for dest, _, values in items if dest == "run" for v in values]
    model = [v for dest, _, values in items if dest == "model" for v in values]
    margs = [v for dest, _, values in items if dest == "model_args" for v in values]
    if len(run) > 1:
        raise UsageError(f"one run dir, please; got {run}")
    if model not in ([], ["harness"]):
        if run:
            raise UsageError(f"a run dir is model `harness`'s; got --model {' '.join(model)}")
        out = ["run", *rest]  # another model's: lm-eval's as given
    elif run or any("run" in _harness_args([v]) for v in margs):
        # model harness: its model_args as one JSON object, which lm-eval does not split on commas
        harness_args = _harness_args(margs)
        if run and "run" in harness_args:
            raise UsageError(f"run dir given twice: {run[0]!r} and model_args run={harness_args['run']!r}")
        harness_args.update({"run": run[0]} if run else {})
        out = ["run", "--model", "harness", "--model_args", json.dumps(harness_args),
               *(t for dest, tokens, _ in items if dest not in ("run", "model", "model_args") for t in tokens)]
    else:
        out = ["run", *rest]
    return out if "include_path" in given else [*out, "--include_path", str(rows.TASKS_DIR)]


def main(argv=None):
    """Run lm-eval's CLI on argv (default sys.argv[1:]) rewritten by _rewrite, with model `harness` available.
    A mistake in the arguments, --model_args, the checkpoint or a task name is one line, exit 2; anything else
    is lm-eval's as it was."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or "-h" in argv or "--help" in argv:
        print(header())
    try:
        sys.argv = [sys.argv[0], *_rewrite(argv)] if argv else [sys.argv[0]]
        with mock.patch.object(EvaluatorConfig, "process_tasks", _local_first(EvaluatorConfig.process_tasks)), \
                mock.patch.object(lm_eval.utils, "make_table", natural_table(lm_eval.utils.make_table)):
            cli_evaluate()
    except UsageError as e:
        rows.fail(e)
    except ValueError as e:  # a --config without tasks: lm-eval's own check, after its index is built
        if not str(e).startswith(NO_TASKS):
            raise
        rows.fail(f"no tasks given (--tasks, or tasks: in the --config); e.g. {EXAMPLE}; `{PROG} ls tasks` "
                  f"lists every task")


if __name__ == "__main__":
    main()
