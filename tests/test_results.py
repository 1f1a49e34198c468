"""Results: atomic run files, the exact row schema, load() over many run dirs, corrupt files reported."""
import json
import os
import stat

import pandas as pd
import pytest
import torch

from harness import results
from harness.results import files
from harness.measure import memory

SCHEMA = ("run_id, sweep, encoding, params, model, d_model, n_layers, n_heads, head_dim, task, train_len, metric, "
          "eval_len, protocol, dtype, device, value, unit, seed, step, torch, harness_version, git_sha, time")


def _rows(run_id, n=3):
    return pd.DataFrame([{c: None for c in results.COLUMNS} | dict(run_id=run_id, metric="ppl", eval_len=64 * (i + 1),
                                                                    value=float(i), params="{}") for i in range(n)],
                        columns=results.COLUMNS)


def test_columns_are_design_section_4():
    assert results.COLUMNS == [c.strip() for c in SCHEMA.split(",")]


def test_write_rows_rejects_other_columns(tmp_path):
    with pytest.raises(ValueError, match="exactly the columns"):
        results.write_rows(tmp_path, _rows("a").drop(columns=["time"]))


def test_atomic_write_leaves_no_temp_files_and_replaces(tmp_path):
    results.atomic_write(tmp_path / "x.bin", b"old")
    results.atomic_write(tmp_path / "x.bin", b"new")
    assert (tmp_path / "x.bin").read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_load_concatenates_run_dirs_and_reports_corrupt_file(tmp_path, capsys):
    for name in ("a", "b"):
        results.write_rows(tmp_path / "sweep" / name, _rows(name))
    bad = tmp_path / "sweep" / "c" / results.ROWS
    bad.parent.mkdir()
    bad.write_bytes(b"PAR1 this is not parquet")
    errors = []
    df = results.load(tmp_path / "sweep", errors=errors)
    assert sorted(df.run_id.unique()) == ["a", "b"] and len(df) == 6
    assert list(df.columns) == results.COLUMNS
    assert errors and errors[0][0] == str(bad) and df.attrs["skipped"] == errors
    assert str(bad) in capsys.readouterr().err


def test_load_missing_path_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        results.load(tmp_path / "nothing")


def test_finished_needs_rows_and_final_status(tmp_path):
    results.write_json(tmp_path / results.STATUS, {"status": "running"})
    results.write_rows(tmp_path, _rows("a"))
    assert not results.finished(tmp_path)
    results.write_json(tmp_path / results.STATUS, {"status": "diverged"})
    assert results.finished(tmp_path)
    results.write_json(tmp_path / results.STATUS, {"status": "failed"})
    assert not results.finished(tmp_path)  # a failed run is retried by a rerun


def test_result_files_get_the_umask_mode_not_0600(tmp_path):
    # mkstemp creates 0600 files; a team sharing out= needs the mode open() would give: 0666 & ~umask
    old = os.umask(0o022)
    try:
        files.UMASK = 0o022  # atomic_write reads it where it is defined
        results.write_json(tmp_path / results.STATUS, {"status": "ok"})
        results.write_rows(tmp_path, _rows("a"))
    finally:
        os.umask(old)
        files.UMASK = files._umask()
    for f in (results.STATUS, results.ROWS):
        assert stat.S_IMODE((tmp_path / f).stat().st_mode) == 0o644, f


def test_rows_of_a_failed_run_are_left_out_and_named(tmp_path, capsys):
    for name, status in (("good", "ok"), ("bad", "failed")):
        results.write_rows(tmp_path / name, _rows(name))
        results.write_json(tmp_path / name / results.STATUS, {"status": status, "message": "boom"})
    df = results.load(tmp_path)
    assert set(df.run_id) == set(_rows("good").run_id) and df.attrs["failed"] == [(str(tmp_path / "bad"), "boom")]
    assert "failed run" in capsys.readouterr().err
    assert len(results.load(tmp_path, failed=True)) == len(_rows("good")) + len(_rows("bad"))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "missing_columns"])
def test_a_corrupt_rows_file_is_not_finished(tmp_path, damage):
    results.write_json(tmp_path / results.STATUS, {"status": "ok"})
    results.write_rows(tmp_path, _rows("a"))
    assert results.finished(tmp_path)
    f = tmp_path / results.ROWS
    data = f.read_bytes()
    if damage == "missing_columns":
        _rows("a").drop(columns=["value"]).to_parquet(f, index=False)
    else:
        f.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"x" * len(data), "empty": b""}[damage])
    assert not results.finished(tmp_path)  # a rerun measures it again instead of skipping it


def test_checkpoint_loads_with_weights_only(tmp_path):
    results.write_checkpoint(tmp_path, {"w": torch.ones(3)}, {"encoding": {"name": "rope"}, "seed": 0})
    ck = torch.load(tmp_path / results.CHECKPOINT, weights_only=True)
    assert torch.equal(ck["state_dict"]["w"], torch.ones(3)) and ck["config"]["seed"] == 0


def test_cpu_peak_memory_measures_a_known_allocation():
    keep = torch.empty(7_000_000, dtype=torch.uint8)  # live before: not part of the extra peak

    def fn():
        a = torch.empty(10_000_000, dtype=torch.uint8)
        b = torch.empty(5_000_000, dtype=torch.uint8)
        del a  # peak was 15 MB here
        c = torch.empty(3_000_000, dtype=torch.uint8)
        return b, c

    peak = memory.peak_extra_bytes(fn)
    assert 15_000_000 <= peak < 15_000_000 + 64_000, peak
    leak = []
    memory.peak_extra_bytes(lambda: leak.append(torch.empty(1_000_000, dtype=torch.uint8)))  # outlives a session
    assert memory.peak_extra_bytes(fn) == peak  # the profiler's process-wide counter does not drift into it
    assert keep.numel() == 7_000_000


def test_state_bytes_counts_shared_storage_once():
    lin = torch.nn.Linear(10, 10, bias=False)
    assert memory.state_bytes(lin, lin.weight) == 400
    assert json.dumps(memory.state_bytes(torch.zeros(5))) == "20"


def test_committed_reference_sweep_loads():
    from pathlib import Path
    from harness import encodings
    ref = Path(__file__).resolve().parent.parent / "results" / "reference"
    df = results.load(ref)
    assert set(df.encoding) <= set(encodings.ENCODINGS) and not df.attrs["skipped"]
    # an encoding registered after the reference ran is named in its RUN.md as not in it (a reader is told)
    later = set(encodings.ENCODINGS) - set(df.encoding)
    assert all(f"`{name}`" in (ref / "RUN.md").read_text() for name in later), later
    assert df[(df.metric == "ppl") & (df.eval_len == 16 * df.train_len)].value.notna().any()


def test_report_from_reference_has_tables_and_plots(tmp_path):
    from pathlib import Path
    from harness import report
    ref = Path(__file__).resolve().parent.parent / "results" / "reference"
    md = report.build([ref], tmp_path).read_text()
    for heading in ("Perplexity, nonoverlapping", "positions ≥ train length", "context extension",
                    "Train tokens/s", "Peak memory", "![extrapolation](extrapolation_lm.png)"):
        assert heading in md
    assert "| rope qk_norm=default+yarn |" in md and "| alibi |" in md  # default and qk_norm sweeps: labels say which
    for png in ("extrapolation_lm.png", "extension_lm.png", "throughput.png", "memory.png", "training.png"):
        assert (tmp_path / png).stat().st_size > 10_000


def test_report_from_the_committed_long_context_run_has_its_sections(tmp_path):
    """results/longctx (make sweep SWEEP=longctx): effective length by both rules, RULER's string match with the
    decoding path, attention statistics and KV-cache decoding, each a table over seeds, and their plots."""
    from pathlib import Path
    from harness import report
    runs = Path(__file__).resolve().parent.parent / "results" / "longctx"
    md = report.build([runs], tmp_path, kernel_max_len=1024).read_text()
    for heading in ("### Effective length", "Score `ruler_all:depths`", "Score `acc:iid`",
                    "| variant | absolute | relative |", "### RULER string match", "Decoded with: kv_cache",
                    "### Attention statistics", "| variant | sink rate |", "### KV-cache decoding",
                    "### KV-cache size after the prefill (MiB)"):
        assert heading in md, heading
    assert "| rope task=niah_single |" in md and "| nope task=vt |" in md
    for png in ("effective_length_niah_single.png", "attention_entropy_vt.png", "depths_niah_single.png"):
        assert (tmp_path / png).stat().st_size > 10_000
