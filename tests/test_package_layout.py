"""The package's shape (DESIGN.md §1): a short top level, the low layers free of Hydra and OmegaConf (which stop at
harness.config and the entry points)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The layers below configuration: model and attention, encodings, rope, tasks, measurement, rows and statistics.
LOW = ["harness.model", "harness.attention", "harness.decode", "harness.train", "harness.names", "harness.encodings",
       "harness.rope", "harness.tasks", "harness.results", "harness.stats", "harness.flex",
       *sorted(f"harness.measure.{p.stem}" for p in (ROOT / "harness" / "measure").glob("*.py")
               if p.stem not in ("__init__", "__main__"))]


def test_top_level_is_short():
    modules = sorted(p.name for p in (ROOT / "harness").glob("*.py") if not p.name.startswith("__"))
    assert len(modules) <= 12, modules


@pytest.mark.parametrize("module", LOW)
def test_low_layers_do_not_import_hydra(module):
    code = f"import sys, {module}; print(sorted(m for m in ('hydra', 'omegaconf') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"
