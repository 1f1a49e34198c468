"""Where the Hydra configs (conf/) and the lm-eval task YAMLs (tasks/) are.

In a source checkout (and an editable install, which imports harness/ from the checkout) they are the
checkout's top-level conf/ and tasks/, so an edit there takes effect without reinstalling. A wheel
(`pip install .`) has no checkout beside it: pyproject.toml ships copies inside the package as
harness/conf and harness/lm_eval_tasks (not harness/tasks, which is the module harness/tasks/__init__.py)."""
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent  # the repo root in a checkout; site-packages in an installed wheel


def _in_checkout(name, marker):
    # pyproject.toml as well: site-packages could hold an unrelated top-level conf/ or tasks/.
    return (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / name / marker).is_file()


def conf_dir() -> Path:
    """The Hydra config dir: <checkout>/conf, else the copy in the installed package."""
    return CHECKOUT / "conf" if _in_checkout("conf", "config.yaml") else PACKAGE / "conf"


def tasks_dir() -> Path:
    """The lm-eval task dir (--include_path): <checkout>/tasks, else the copy in the installed package."""
    return CHECKOUT / "tasks" if _in_checkout("tasks", "utils.py") else PACKAGE / "lm_eval_tasks"
