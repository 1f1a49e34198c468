"""A wheel works without the checkout: build it, install it into a scratch venv that cannot see the
source tree, and run both console scripts from a directory outside the repo.

The scratch venv reuses this venv's dependencies through a .pth line (torch, hydra, lm-eval are not
installed twice, and nothing is downloaded). Only site dirs have their .pth files run, so this venv's
editable-install finder for harness stays inactive there: `import harness` finds the wheel's copy."""
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from wheel_kit import build_wheel, run

ROOT = Path(__file__).resolve().parent.parent
CORPUS = "the quick brown fox jumps over the lazy dog. " * 400
# the smallest job the runner accepts: one layer, 2 steps, one eval length, no extensions, no W&B
JOB = ["model.n_layers=1", "model.d_model=32", "model.n_heads=2", "train.seq_len=16", "train.steps=2",
       "train.batch_size=4", "train.warmup=1", "eval.multiples=[1]", "eval.max_tokens=32",
       "eval.throughput_repeats=1", "eval.warmup=0", "eval.extension.types=[]", "wandb.mode=disabled",
       "checkpoint=false", "threads=1"]


def scratch_venv(path, wheel):
    """A venv holding the wheel alone; this venv's site-packages appended (after it) for dependencies."""
    run([sys.executable, "-m", "venv", "--without-pip", path], cwd=path.parent)
    py = path / "bin" / "python"
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=path).strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel], cwd=path)
    return py, site


@pytest.mark.slow
def test_wheel_runs_outside_the_checkout(tmp_path):
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    # every package under harness/ is listed in pyproject.toml (they are listed by hand, not found)
    assert {f"{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "harness").rglob("__init__.py")} <= names
    for top, inside in (("conf", "harness/conf"), ("tasks", "harness/lm_eval_tasks")):
        shipped = {f"{inside}/{p.relative_to(ROOT / top).as_posix()}" for p in (ROOT / top).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
        assert shipped <= names, f"{top}/ files missing from the wheel: {sorted(shipped - names)}"
    assert "harness/conformance/golden.npz" in names  # the conformance suite's data ships with it
    csrc = {f"harness/rope/csrc/{p.name}" for p in (ROOT / "harness/rope/csrc").iterdir()}
    assert csrc <= names, f"the C kernel's sources missing from the wheel: {sorted(csrc - names)}"

    py, site = scratch_venv(tmp_path / "venv", wheel)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = run([py, "-c", "import sys, harness, harness.paths as p; "
                           "print(harness.__file__, p.conf_dir(), p.tasks_dir(), "
                           "any('editable' in type(f).__module__ for f in sys.meta_path), sep='\\n')"], cwd).split("\n")
    assert all(Path(w).is_relative_to(site) for w in where[:3]), where  # the wheel's copy, not the checkout
    assert where[3] == "False", "the editable finder is active in the scratch venv"
    assert (Path(where[1]) / "config.yaml").is_file()
    assert {"passkey.yaml", "pystdlib_ppl.yaml", "_generate_template_yaml", "utils.py"} <= {
        p.name for p in Path(where[2]).iterdir()}

    # One interpreter (torch and lm-eval imported once, not in two processes): the wheel's C kernel builds from its
    # own sources (a fresh cache, so nothing comes from the checkout's), then the packaged tasks load:
    # `include: _generate_template_yaml` and `!function utils.*` resolve there.
    built, loaded = run([py, "-c", "import os; os.environ['HARNESS_CACHE'] = os.getcwd() + '/cache'; "
                                   "from harness.rope import cpu; print(cpu.unavailable() or cpu.isa()); "
                                   "print('-- tasks', flush=True); "
                                   "from harness.lmeval.rows import TASKS_DIR; from lm_eval.tasks import TaskManager; "
                                   "tm = TaskManager(include_path=str(TASKS_DIR), include_defaults=False); "
                                   "print(sorted(tm.load(['copy', 'passkey'])['tasks']))"], cwd).split("-- tasks\n")
    from harness.rope import cpu
    assert built.strip() == (cpu.unavailable() or cpu.isa()), built  # as the checkout's kernel does here
    assert loaded.strip().splitlines()[-1] == "['copy', 'passkey']"

    (cwd / "corpus.txt").write_text(CORPUS)
    bin_ = py.parent
    run([bin_ / "harness", f"task.corpus={cwd / 'corpus.txt'}", *JOB, f"out={tmp_path / 'out'}"], cwd)
    (rows,) = (tmp_path / "out" / "runs").glob("*/rows.parquet")
    import pandas
    assert len(pandas.read_parquet(rows)) > 0
    # Hydra composed the job from the wheel's conf (hydra.runtime.config_sources names the dir)
    assert f"path: {where[1]}\n      schema: file" in (rows.parent / ".hydra" / "hydra.yaml").read_text()

    assert "validate" in run([bin_ / "harness-lm-eval", "--help"], cwd)
