"""A new encoding is one file plus one YAML and nothing else: in a copy of the checkout, one file under
harness/encodings/ (a RoPE whose base is scaled by a knob of its own, with its Range and its docs row declared in the
file) and one under conf/encoding/ make an encoding the registry finds, the command line validates (a bad value of
the new knob is one line naming it), the runner trains and measures, and the docs' encodings table regenerates with
its row. The committed table is what the registry generates (test_the_encodings_table_is_generated)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ENCODING = '''"""RoPE at base x base_scale: an outside contributor's encoding (tests/test_add_encoding.py)."""
from harness.encodings._params import positive
from harness.encodings.rope import Rope


class RopeScaledBase(Rope):
    """RoPE whose base is multiplied by base_scale."""

    RANGES = {"base_scale": positive()}
    CARD = ("rotary at base x `base_scale`", "rotate", "an outside contributor")

    def __init__(self, *, head_dim, base=10000.0, base_scale=2.0, layout="half", impl="auto"):
        super().__init__(head_dim=head_dim, base=base * base_scale, layout=layout, impl=impl)
'''
YAML = "name: rope_scaled_base\nbase: 10000.0\nbase_scale: 2.0\nlayout: half\nimpl: auto\n"


def test_one_file_and_one_yaml_make_an_encoding(tmp_path):
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build")
    for d in ("harness", "conf", "tasks"):
        shutil.copytree(ROOT / d, repo / d, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    (repo / "harness" / "encodings" / "rope_scaled_base.py").write_text(ENCODING)
    (repo / "conf" / "encoding" / "rope_scaled_base.yaml").write_text(YAML)
    (tmp_path / "corpus.txt").write_text("the quick brown fox jumps over the lazy dog. " * 400)
    env = {**os.environ, "PYTHONPATH": str(repo), "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    base = [sys.executable, "-m", "harness", "encoding=rope_scaled_base", f"out={tmp_path / 'out'}",
            f"task.corpus={tmp_path / 'corpus.txt'}", "model.n_layers=1", "model.d_model=32", "model.n_heads=2",
            "train.seq_len=16", "train.steps=4", "train.batch_size=4", "train.warmup=1", "eval.multiples=[1,2]",
            "eval.max_tokens=64", "eval.throughput_repeats=1", "eval.warmup=0", "eval.extension.types=[linear]",
            "wandb.mode=disabled", "checkpoint=false", "threads=1"]
    bad = subprocess.run([*base, "encoding.base_scale=-1"], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "harness: error: encoding.base_scale must be > 0 and finite, got -1"], bad.stderr[-2000:]
    ok = subprocess.run(base, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr[-3000:]
    import pandas as pd
    (rows,) = list((tmp_path / "out" / "runs").glob("*/rows.parquet"))
    df = pd.read_parquet(rows)
    assert set(df.encoding) == {"rope_scaled_base"} and (df.metric == "ppl").any()
    page = repo / "docs" / "encodings.md"
    page.parent.mkdir()
    shutil.copy(ROOT / "docs" / "encodings.md", page)
    table = subprocess.run([sys.executable, "-m", "harness.report.encodings_table", "--write", str(page)], cwd=repo,
                           env=env, capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "| `rope_scaled_base` | rotary at base x `base_scale` | rotate | an outside contributor |" in page.read_text()


def test_the_encodings_table_is_generated():
    """docs/encodings.md's table is the registry's (python -m harness.report.encodings_table --write
    docs/encodings.md); every encoding declares its own row, so an inherited one cannot stand in for it."""
    from harness.report import encodings_table
    text = (ROOT / "docs" / "encodings.md").read_text()
    assert encodings_table.render(text) == text
