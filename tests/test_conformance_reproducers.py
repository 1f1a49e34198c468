"""results/conformance/reports/*.py: the standalone upstream reproducers of the field run's real bugs.

Each is short enough to paste into an issue (<= 40 lines), stands alone (no import from harness; only the library,
torch/keras where the library needs it, numpy and the stdlib's math/os), and its docstring names the library and
the version it was measured on. Where that library, at that version, is importable here, the reproducer is run and
must exit 1 (bug present) with no traceback; otherwise the run is skipped with the reason.
"""
import ast
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPORTS = Path(__file__).resolve().parent.parent / "results" / "conformance" / "reports"
STDLIB = {"math", "os"}
# file: (distribution, pinned version, top-level modules it may import besides numpy/torch/stdlib)
REPRODUCERS = {
    "litgpt_yarn_ramp_reversed.py": ("litgpt", "0.5.13", {"litgpt"}),
    "megatron_core_yarn_rotary_percent.py": ("megatron-core", "0.16.1", {"megatron"}),
    "keras_hub_dynamic_rope.py": ("keras-hub", "0.32.0", {"keras_hub", "keras"}),
    "rotary_embedding_torch_16bit_positions.py": ("rotary-embedding-torch", "0.9.1", {"rotary_embedding_torch"}),
    "local_attention_16bit_rotary_dtype.py": ("local-attention", "1.11.2", {"local_attention"}),
    "equinox_rope_cache_ignores_theta.py": ("equinox", "0.13.8", {"equinox", "jax"}),
    "transformers_rope_cast_rounds_inv_freq.py": ("transformers", "5.23.0", {"transformers"}),
    "x_transformers_cast_16bit_phase.py": ("x-transformers", "2.31.10", {"x_transformers"}),
    "rotary_embedding_torch_cast_16bit_phase.py": ("rotary-embedding-torch", "0.9.1", {"rotary_embedding_torch"}),
}
IMPORT_NAME = {"litgpt": "litgpt", "megatron-core": "megatron.core", "keras-hub": "keras_hub",
               "rotary-embedding-torch": "rotary_embedding_torch", "local-attention": "local_attention",
               "equinox": "equinox", "transformers": "transformers", "x-transformers": "x_transformers"}


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield "." * node.level + (node.module or "")


def test_every_reproducer_is_listed():
    assert sorted(p.name for p in REPORTS.glob("*.py")) == sorted(REPRODUCERS)
    readme = (REPORTS / "README.md").read_text()
    for name in REPRODUCERS:
        assert name in readme, f"{name} has no line in reports/README.md"


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_reproducer_is_short_standalone_and_names_its_version(name):
    dist, version, own = REPRODUCERS[name]
    src = (REPORTS / name).read_text()
    assert len(src.splitlines()) <= 40, f"{name}: {len(src.splitlines())} lines"
    tree = ast.parse(src)
    doc = ast.get_docstring(tree)
    assert doc and f"{dist} {version}" in doc.splitlines()[0], f"{name}: docstring must open with '{dist} {version}'"
    assert "arXiv" in doc, f"{name}: the docstring cites the paper"
    for mod in _imports(tree):
        top = mod.split(".")[0]
        assert top and not mod.startswith("."), f"{name}: relative import {mod!r}"
        assert top != "harness", f"{name} imports {mod} from the harness"
        assert top in own | {"numpy", "torch"} | STDLIB, f"{name} imports {mod}"


def _skip_reason(dist, version):
    try:
        if importlib.util.find_spec(IMPORT_NAME[dist].split(".")[0]) is None:
            return f"{dist} is not importable here (install it with --no-deps into a side folder: reports/README.md)"
        installed = importlib.metadata.version(dist)
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError) as e:
        return f"{dist} is not importable here ({e})"
    if installed != version:
        return f"{dist} {installed} installed; the reproducer's expected exit is measured on {version}"
    return None


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_reproducer_finds_the_bug_in_the_pinned_version(name):
    dist, version, _ = REPRODUCERS[name]
    reason = _skip_reason(dist, version)
    if reason:
        pytest.skip(reason)
    env = dict(os.environ, KERAS_BACKEND=os.environ.get("KERAS_BACKEND", "torch"))
    run = subprocess.run([sys.executable, str(REPORTS / name)], capture_output=True, text=True, timeout=300, env=env)
    if "ModuleNotFoundError" in run.stderr:  # the library is there, one of its own dependencies is not
        pytest.skip(f"{dist} {version} does not import here: {run.stderr.strip().splitlines()[-1]}")
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr)
    assert run.stdout.strip(), "the reproducer prints the discrepancy"
