"""The committed uv.lock is what `uv sync --extra dev` installs: it satisfies pyproject.toml (`uv lock --check`, run
offline, so no index is asked and the check reads the lock alone), its Python floor is pyproject's requires-python
(the floor resolves: uv locks every Python from the floor up), and it pins torch to the release make install pins
(TORCH in the Makefile), so pip and uv users get the same torch. uv comes with the dev extra."""
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UV = shutil.which("uv", path=os.pathsep.join([str(Path(os.sys.executable).parent), os.environ.get("PATH", "")]))
needs_uv = pytest.mark.skipif(UV is None, reason="uv is not installed (it comes with the dev extra: make install)")


def _check(folder):
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(folder / ".uv-cache"), "UV_NO_CONFIG": "1"}
    return subprocess.run([UV, "lock", "--check", "--offline", "--directory", str(folder)], capture_output=True,
                          text=True, env=env, timeout=120)


def _lock():
    return tomllib.loads((ROOT / "uv.lock").read_text())


@needs_uv
def test_committed_lock_satisfies_pyproject(tmp_path):
    for name in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    r = _check(tmp_path)
    assert r.returncode == 0, f"uv.lock is stale (run `uv lock`):\n{r.stderr}"


@needs_uv
def test_a_changed_requirement_fails_the_check(tmp_path):
    """The check above can fail: the same copy with one requirement the lock does not hold exits non-zero. (Offline,
    uv cannot re-resolve, so it stops at the first package it would have to look up; with the network it says the
    lockfile needs to be updated. Either way only the planted requirement differs from the passing copy.)"""
    for name in ("uv.lock", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text.replace('"numpy>=1.24"', '"numpy>=1.24", "six==1.16.0"', 1))
    assert _check(tmp_path).returncode != 0


def test_lock_floor_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _lock()["requires-python"] == project["requires-python"]


def test_torch_is_pinned_alike_for_make_install_and_uv():
    make = re.search(r"^TORCH \?= torch==(\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    uv = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["constraint-dependencies"]
    locked = [p["version"] for p in _lock()["package"] if p["name"] == "torch"]
    assert uv == [f"torch=={make}"] and locked == [make]
