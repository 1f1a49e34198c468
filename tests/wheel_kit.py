"""Building the package's wheel from a copy of the sources, for the tests that install it (test_install.py,
test_light_extra.py)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env={**env, "OMP_NUM_THREADS": "1"},
                       capture_output=True, text=True, timeout=180, **kw)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def build_wheel(tmp):
    """The wheel of a copy of the sources: no build/ or egg-info in the checkout, no stale build/lib."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("harness", "conf", "tasks"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src],
        cwd=tmp)
    (wheel,) = (tmp / "dist").glob("harness-*.whl")
    return wheel
