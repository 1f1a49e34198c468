"""`pip install "harness[conformance]"` brings only what the conformance suite needs: the core (torch, numpy) and
pytest for its plugin. Checked in a scratch venv that sees this venv's torch, numpy and pytest and what they require,
and nothing else (hydra, pandas, lm-eval, W&B absent): the wheel installs with --no-index, so any requirement beyond
those would fail the install; then the suite's CLI and its pytest plugin run there from outside the checkout (a
correct rotation passes, a planted sign error fails), and the `harness` command says in one line that the run extra
is missing."""
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from wheel_kit import build_wheel

pytestmark = pytest.mark.slow
CORE = ("torch", "numpy", "pytest")  # the core dependencies and the conformance extra's
ROTATIONS = textwrap.dedent('''
    import torch

    def _rot(x, sign):  # HF's rotate_half (modeling_llama.py): (x1, x2) -> (-x2, x1); sign -1 plants the error
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-sign * x2, sign * x1), dim=-1)

    def correct(q, k, cos, sin):
        return q * cos + _rot(q, 1) * sin, k * cos + _rot(k, 1) * sin

    def wrong_sign(q, k, cos, sin):
        return q * cos + _rot(q, -1) * sin, k * cos + _rot(k, -1) * sin
''')


def _name(req):
    return re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names):
    """The distributions `names` need here, themselves included (extras-only requirements left out)."""
    seen, todo = {}, list(names)
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        todo += [_name(r) for r in dist.requires or () if "extra ==" not in r and _marker_ok(r)]
    return seen


def _marker_ok(req):
    from packaging.requirements import Requirement
    marker = Requirement(req).marker
    return marker is None or marker.evaluate({"extra": ""})


def _visible_site(dists, folder):
    """A folder holding links to these distributions' files (top-level packages, modules, dist-info) only."""
    folder.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for dist in dists.values():
        for top in {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}:
            if (site / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


def _run(cmd, cwd, ok=True):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=300,
                       env={**env, "OMP_NUM_THREADS": "1", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""})
    assert (p.returncode == 0) == ok, f"{cmd}: rc {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p


def test_conformance_extra_installs_and_runs_on_torch_numpy_pytest_alone(tmp_path):
    dists = _closure(CORE)
    assert not {"hydra-core", "pandas", "lm-eval", "wandb", "omegaconf"} & set(dists), sorted(dists)
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path)  # no setuptools of its own either
    py = venv / "bin" / "python"
    site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).stdout.strip()
    (Path(site) / "core.pth").write_text(str(_visible_site(dists, tmp_path / "core")) + "\n")
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-index", f"{wheel}[conformance]"],
         cwd=tmp_path)
    work = tmp_path / "outside"
    work.mkdir()
    (work / "rotations.py").write_text(ROTATIONS)
    _run([py, "-m", "harness.conformance", "--help"], cwd=work)
    plugin = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "harness.conformance.pytest_plugin",
              "--rope-type", "default,linear", "--rope-conformance"]
    assert "passed" in _run([*plugin, "rotations:correct"], cwd=work).stdout
    assert "FAIL" in _run([*plugin, "rotations:wrong_sign"], cwd=work, ok=False).stdout
    p = _run([venv / "bin" / "harness", "--help"], cwd=work, ok=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and 'pip install "harness[run]"' in p.stderr, p.stderr
