"""docs/kernels.md's kernel-speed tables are what harness.bench.kernel_table generates from the committed
baselines.

A hand-typed table drifted from its JSON once (cells for runs that no committed file holds); comparing the
page with a regeneration makes a stale table a test failure, and `--check` is what names the fix.
"""
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from harness.bench.kernel_table import BLOCK, main, render, table

ROOT = pathlib.Path(__file__).parents[1]
PAGE = ROOT / "docs" / "kernels.md"  # its block paths are relative to docs/
BASELINES = ("results/baselines/kernels-cpu.json", "results/baselines/kernels-h100.json",
             "results/baselines/decode-cpu.json")


def _edit_cpu_cell(text):
    """text with the first number in the CPU table's first data row raised by 0.1, whatever the baseline holds."""
    block = next(m for m in BLOCK.finditer(text) if m[2].endswith("kernels-cpu.json"))
    start, end = block.span(3)
    row = next(line for line in text[start:end].splitlines() if line.startswith("| fp32"))
    edited = re.sub(r"\d+\.\d\d", lambda m: f"{float(m[0]) + 0.1:.2f}", row, count=1)
    assert edited != row
    return text[:start] + text[start:end].replace(row, edited, 1) + text[end:]


def _doc(r, meta=None):
    """A baseline with 3 runs per key whose median is r[key]."""
    meta = {**dict(device="x86_64", threads=2, time="2030-01-02T03:04:05", runs=3, statistic="median of runs"),
            **(meta or {})}
    return dict(meta=meta, R=r, runs={k: [v - 0.01, v, v + 0.02] for k, v in r.items()})


def test_readme_tables_are_generated():
    """Every committed baseline has its block in docs/kernels.md, and each block equals a regeneration."""
    text = PAGE.read_text()
    blocks = {m[2]: m[3] for m in BLOCK.finditer(text)}
    assert sorted(blocks) == sorted("../" + b for b in BASELINES)
    for path, body in blocks.items():
        assert body == f"\n{table(PAGE.parent / path, path)}\n\n", path
    assert render(text, PAGE.parent) == text


def test_small_json(tmp_path):
    """Rows dtype x layout, columns per provider, '–' for a mode not measured, an empty cell for neither, the
    row's best fwd and bwd in bold only where the row has two providers; the caption reads the JSON."""
    r = {"cpu/fwd/half/float32/prefill": 1.004, "cpu/bwd/half/float32/prefill": 0.5,
         "eager/fwd/half/float32/prefill": 0.2, "eager/bwd/half/float32/prefill": 0.61,
         "cpu/fwd/interleaved/bfloat16/prefill": 0.356, "hf/fwd/half/bfloat16/prefill": 0.16}
    path = tmp_path / "k.json"
    path.write_text(json.dumps(_doc(r)))
    assert table(path, "k.json") == "\n".join([
        "CPU, 2 threads, B4·H8·T2048·D64 (`k.json`, median of 3, 2030-01-02):",
        "",
        "| fwd / bwd R | cpu (C/OpenMP) | eager | hf (HF transformers) |",
        "|---|---|---|---|",
        "| fp32, half | **1.00** / 0.50 | 0.20 / **0.61** | |",
        "| bf16, half | | | 0.16 / – |",
        "| bf16, interleaved | 0.36 / – | | |"])


def test_decode_json_is_time_per_call_lower_is_better(tmp_path):
    """A decode JSON (us in place of R, forward only): one mode per cell, whole microseconds, the fastest bold."""
    r = {"cpu/fwd/half/float32/decode": 48.4, "eager/fwd/half/float32/decode": 121.6,
         "hf/fwd/half/float32/decode": 120.2, "cpu/fwd/interleaved/float32/decode": 50.0}
    doc = _doc(r)
    doc["us"] = doc.pop("R")
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))
    assert table(path, "d.json").splitlines()[2:] == [
        "| fwd µs per call | cpu (C/OpenMP) | eager | hf (HF transformers) |",
        "|---|---|---|---|",
        "| fp32, half | **48** | 122 | 120 |",
        "| fp32, interleaved | 50 | | |"]


def test_gpu_caption(tmp_path):
    """A CUDA baseline names its device, not a thread count, and grouped-query heads as Hq·Hk."""
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_doc({"triton/fwd/half/bfloat16/prefill_large": 0.944},
                                    dict(device="NVIDIA H100 80GB HBM3", cuda="13.0"))))
    assert table(path).splitlines()[0] == (f"GPU, NVIDIA H100 80GB HBM3, B8·Hq32·Hk8·T4096·D128 (`{path}`, "
                                           "median of 3, 2030-01-02):")


@pytest.mark.parametrize("cache, said", [("prefill cold: evict", ", cold data (tensors evicted by clflush)"),
                                         ("prefill cold: read 128 MiB", ", cold caches (read 128 MiB)"),
                                         ("decode cold: evict", ""), (None, "")])
def test_cpu_caption_says_how_the_caches_were_emptied_for_its_shape(tmp_path, cache, said):
    """kernel_timing.cold_start's method, recorded in meta as '<shape> cold: <method>', only for that shape."""
    path = tmp_path / "c.json"
    meta = {} if cache is None else dict(cache=cache)
    path.write_text(json.dumps(_doc({"cpu/fwd/half/float32/prefill": 1.0}, meta)))
    assert table(path, "c.json").splitlines()[0] == (f"CPU, 2 threads{said}, B4·H8·T2048·D64 (`c.json`, median of 3, "
                                                     "2030-01-02):")


def test_caption_must_match_runs(tmp_path):
    """R that is not the stated statistic of its runs is refused rather than captioned wrongly."""
    doc = _doc({"cpu/fwd/half/float32/prefill": 1.0})
    doc["R"]["cpu/fwd/half/float32/prefill"] = 1.02  # the max of the runs, captioned as the median
    path = tmp_path / "k.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="median of runs"):
        table(path)


@pytest.fixture
def readme_copy(tmp_path):
    """docs/kernels.md with the baselines it points at, in a scratch folder."""
    for path in BASELINES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    (tmp_path / "docs").mkdir()
    shutil.copy(PAGE, tmp_path / "docs" / "kernels.md")
    return tmp_path / "docs" / "kernels.md"


def test_check_fails_on_edited_table(readme_copy, capsys):
    """An edited cell makes --check exit 1 with one line naming the README and the baseline; --write repairs it."""
    text = readme_copy.read_text()
    assert main(["--check", str(readme_copy)]) == 0
    readme_copy.write_text(_edit_cpu_cell(text))
    capsys.readouterr()
    assert main(["--check", str(readme_copy)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(readme_copy) in err and "results/baselines/kernels-cpu.json" in err
    assert "kernels-h100.json" not in err and "decode-cpu.json" not in err
    assert main(["--write", str(readme_copy)]) == 0
    assert readme_copy.read_text() == text


def test_check_fails_without_closed_block(readme_copy, capsys):
    """A deleted closing marker is an error, not a README with nothing to check."""
    text = readme_copy.read_text()
    readme_copy.write_text(text.replace("<!-- /kernel-table -->", "", 1))
    assert main(["--check", str(readme_copy)]) == 1
    assert str(readme_copy) in capsys.readouterr().err


def test_cli_exit_status(readme_copy):
    """The module entry point (what a Makefile target would run) exits 1 on a stale table."""
    readme_copy.write_text(_edit_cpu_cell(readme_copy.read_text()))
    proc = subprocess.run([sys.executable, "-m", "harness.bench.kernel_table", "--check", str(readme_copy)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1 and "kernel table differs" in proc.stderr
