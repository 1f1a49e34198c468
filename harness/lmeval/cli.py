"""`python -m harness.lmeval.cli [lm-eval flags]`: lm-eval's own CLI with model `harness` registered.

lm-eval 0.4.x has no plugin discovery for model classes, so this imports harness.lmeval.model (which registers
`harness`) and runs lm-eval's CLI on the unchanged argv:

    python -m harness.lmeval.cli --model harness --model_args run=<run_dir> --tasks passkey --include_path tasks/

One narrow change: indexing lm-eval's ~15k built-in task configs costs 8-25 s, so `run` first resolves
the requested tasks against --include_path alone (TaskManager(include_defaults=False)); only when a
task is not found there (a hub task such as hellaswag) is the full index built, exactly as lm-eval
would have. This wraps EvaluatorConfig.process_tasks, the one place lm-eval's CLI builds its
TaskManager; the `ls` and `validate` subcommands are untouched."""
import functools
import sys
from unittest import mock

import lm_eval.tasks
from lm_eval.__main__ import cli_evaluate
from lm_eval.config.evaluate_config import EvaluatorConfig

import harness.lmeval.model  # noqa: F401 - registers model "harness"

NOT_FOUND = "Tasks not found"  # lm-eval's message when a requested task is in no index


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
        return process_tasks(self, metadata)
    return wrapper


def main(argv=None):
    """Run lm-eval's CLI on argv (default sys.argv[1:]) with model `harness` available."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    with mock.patch.object(EvaluatorConfig, "process_tasks", _local_first(EvaluatorConfig.process_tasks)):
        cli_evaluate()


if __name__ == "__main__":
    main()
