"""The package's shape (DESIGN.md §1): a short top level, the low layers free of Hydra and OmegaConf (which stop at
harness.config and the entry points)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The layers below configuration: model and attention, encodings, rope, tasks, measurement, rows and statistics.
LOW = ["harness.model", "harness.attention", "harness.decode", "harness.train", "harness.names", "harness.encodings",
       "harness.rope", "harness.tasks", "harness.results", "harness.stats", "harness.flex",
       *sorted(f"harness.{d}.{p.stem}" for d in ("measure", "bench") for p in (ROOT / "harness" / d).glob("*.py")
               if p.stem not in ("__init__", "__main__"))]
FORBIDDEN = ("hydra", "omegaconf")
# One interpreter imports every LOW module in turn (one process per module cost ~2 s of torch start-up each, about
# 60 s in all) and records, per module, which of FORBIDDEN its import brought into sys.modules. After each module
# they are dropped from sys.modules again (with their submodules), so the next module's import of them is seen
# afresh. A module that reaches Hydra only through a module an earlier LOW module already imported is reported
# at that earlier module, the first culprit, so the suite fails exactly where one process per module would.
IMPORTS = f"""
import importlib, json, sys
FORBIDDEN = {FORBIDDEN!r}
def present():
    return sorted(m for m in FORBIDDEN if m in sys.modules)
out = {{"before": present()}}
for module in {LOW!r}:
    try:
        importlib.import_module(module)
    except BaseException as e:
        out[module] = f"import failed: {{type(e).__name__}}: {{e}}"
        continue
    out[module] = present()
    for name in [n for n in sys.modules if n.split(".")[0] in FORBIDDEN]:
        del sys.modules[name]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def imported():
    """{module: the FORBIDDEN modules its import brought in, or why it failed to import}, from one interpreter."""
    out = subprocess.run([sys.executable, "-c", IMPORTS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found.pop("before") == [], "the interpreter imports Hydra before any harness module"
    return found


def test_top_level_is_short():
    modules = sorted(p.name for p in (ROOT / "harness").glob("*.py") if not p.name.startswith("__"))
    assert len(modules) <= 12, modules


@pytest.mark.parametrize("module", LOW)
def test_low_layers_do_not_import_hydra(module, imported):
    assert imported[module] == [], f"{module} imports {imported[module]}"


def test_hydra_through_its_public_modules_only():
    """No module of the harness imports a private Hydra module (hydra._internal changes without notice)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "harness"
    private = re.compile(r"^\s*(from|import)\s+hydra\._internal", re.M)
    assert not [str(p.relative_to(root)) for p in root.rglob("*.py") if private.search(p.read_text())]
