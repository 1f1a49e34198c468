"""`python -m harness.lmeval.cli [lm-eval flags]`: lm-eval's own CLI with model `harness` registered.

lm-eval 0.4.x has no plugin discovery for model classes, so this imports harness.lmeval.model (which registers
`harness`) and runs lm-eval's CLI on the unchanged argv:

    python -m harness.lmeval.cli --model harness --model_args run=<run_dir> --tasks passkey --include_path tasks/

Two narrow changes. Indexing lm-eval's ~15k built-in task configs costs 8-25 s, so `run` first resolves
the requested tasks against --include_path alone (TaskManager(include_defaults=False)); only when a
task is not found there (a hub task such as hellaswag) is the full index built, exactly as lm-eval
would have. This wraps EvaluatorConfig.process_tasks, the one place lm-eval's CLI builds its
TaskManager; the `ls` and `validate` subcommands are untouched. And the ordinary mistakes, a wrong
--model_args (HarnessLM's construction: its arguments and the checkpoint, model.UsageError) or a task in no
index, are one line `harness.lmeval: error: ...`, exit 2, instead of a traceback; anything else (a bug
included) is raised as lm-eval raises it."""
import functools
import sys
from unittest import mock

import lm_eval.tasks
from lm_eval.__main__ import cli_evaluate
from lm_eval.config.evaluate_config import EvaluatorConfig

from harness.lmeval import rows  # imports harness.lmeval.model, which registers model "harness"
from harness.lmeval.model import UsageError

NOT_FOUND = "Tasks not found: "  # lm-eval's message when a requested task is in no index


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


def main(argv=None):
    """Run lm-eval's CLI on argv (default sys.argv[1:]) with model `harness` available. A mistake in
    --model_args, the checkpoint or a task name is one line, exit 2; anything else is lm-eval's as it was."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    with mock.patch.object(EvaluatorConfig, "process_tasks", _local_first(EvaluatorConfig.process_tasks)):
        try:
            cli_evaluate()
        except UsageError as e:
            rows.fail(e)


if __name__ == "__main__":
    main()
