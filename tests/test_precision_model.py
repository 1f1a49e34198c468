"""Model-level precision study: exact fp32 baseline, low-precision gaps, rows, config, report."""
import json

import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir

from harness import config as config_lib
from harness import report, results, runner, tasks
from harness.lmeval.model import load_run
from harness.__main__ import CONF
from harness.measure import precision_model as PM
from harness.measure.precision_bias import bias_encodings
from harness.measure.precision_layers import members
from harness.measure.precision_pipelines import pipeline_names, table

SMALL = dict(train_len=16, lens=[16, 64], max_tokens=64, shifts=(0, 200), anchor_shift=16)


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny):
    """One tiny trained run (runner.run: 4 steps), with its model-level precision rows."""
    tmp = tmp_path_factory.mktemp("pm")
    cfg = tiny(tmp, **{"precision.lens": [16, 64], "precision.max_tokens": 64, "precision.shifts": [0, 200]})
    assert runner.run(cfg, tmp / "run", progress=False)["status"] == "ok"
    cfg, net = load_run(tmp / "run")
    return tmp / "run", cfg, net, tasks.build(cfg.task, cfg.seed)


def _by(rows, **sel):
    return [r for r in rows if all(r.get(k, r["extra_params"].get(k)) == v for k, v in sel.items())]


def test_fp32_is_exactly_zero_and_bf16_cast_is_not(run):
    _, _, net, task = run
    rows = PM.rows(net, task, dtypes=("bf16",), protocols=("cast",), **SMALL)
    base = _by(rows, dtype="fp32")
    assert {r["metric"] for r in base} == {"ppl_gap", "kl_fp32", "anchor_d", "anchor_d_logit"}
    assert all(r["value"] == 0.0 for r in base if r["metric"] in ("ppl_gap", "kl_fp32"))
    kl = _by(rows, metric="kl_fp32", dtype="bf16", protocol="cast")
    assert kl and all(r["value"] > 0 for r in kl)
    # RoPE is relative: shifting every position changes attention only by rounding, far more in bf16
    d32, d16 = (max(r["value"] for r in _by(rows, metric="anchor_d", dtype=dt)) for dt in ("fp32", "bf16"))
    assert 0 <= d32 < d16 / 100
    assert next(net.parameters()).dtype == torch.float32  # the cast worked on a copy


def test_autocast_fp16_and_unknown_choices(run):
    _, _, net, task = run
    rows = PM.rows(net, task, dtypes=("fp16",), protocols=("autocast",), baseline=False, **SMALL)
    assert {(r["dtype"], r["protocol"]) for r in rows} == {("fp16", "autocast")}
    assert all(r["value"] == r["value"] for r in rows)  # no NaN: rope represents every length and shift
    with pytest.raises(ValueError, match=r"unknown precision dtype 'bf17'; expected one of \['fp32', 'bf16', 'fp16'\]"):
        PM.variants(net, ("bf17",), ("cast",))
    with pytest.raises(ValueError, match="unknown precision protocol 'half'; expected one of"):
        PM.variants(net, ("bf16",), ("half",))


def test_guarded_rope_table_in_autocast_is_the_fp32_pipeline(run):
    """The model's RoPE keeps its phase in fp32 under autocast: bit-identical to the `fp32` pipeline."""
    _, _, net, _ = run
    pos = torch.arange(4096)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cos, sin = net.encoding.table(pos, torch.bfloat16)
    ref_cos, ref_sin = table("fp32", pos, net.encoding.head_dim, net.encoding.base)
    assert cos.dtype == torch.float32 and torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)


def test_runner_rows_have_design_columns(run):
    run_dir = run[0]
    df = results.load(run_dir)
    assert list(df.columns) == results.COLUMNS
    pm = df[df.metric.isin(["ppl_gap", "kl_fp32", "anchor_d", "anchor_d_logit"])]
    assert set(pm.metric) == {"ppl_gap", "kl_fp32", "anchor_d", "anchor_d_logit"}
    assert set(pm.dtype) == {"fp32", "bf16", "fp16"} and set(pm.protocol) == {"autocast", "cast"}
    assert set(pm[pm.metric == "ppl_gap"].eval_len) == {16, 64}
    assert set(pm[pm.metric == "anchor_d"].eval_len) == {0, 200}
    assert pm.value.notna().all() and (pm.encoding == "rope").all()
    assert {json.loads(p)["seq_len"] for p in pm[pm.metric == "kl_fp32"].params} == {16, 64}


def test_report_precision_section_from_rows(run, tmp_path):
    path = report.build([run[0]], tmp_path, kernel_max_len=256)
    md = path.read_text()
    assert "## Precision: FP16/BF16 against FP32" in md and "rope pipeline hf_bf16" in md
    assert "### Model level: safe up to position L" in md
    for png in ("precision_phase.png", "precision_logit.png", "precision_shift.png", "precision_model_kl.png"):
        assert (tmp_path / png).stat().st_size > 0
    cache = list(tmp_path.glob("precision_kernel-*.parquet"))
    assert len(cache) == 1  # computed once; a second build reads it
    k = pd.read_parquet(cache[0])  # the pipeline marker, not the encoding, tells the RoPE pipeline rows apart
    assert set(k.pipeline.dropna()) == set(pipeline_names())
    assert (k.pipeline.notna() == k.protocol.isin(pipeline_names())).all()
    assert set(k.encoding[k.pipeline.isna()]) == {"rope", "xpos", *bias_encodings(), *members()}  # rope: positions
    assert "| local_global:1 cast bf16 |" in md  # a per-layer policy's global RoPE layer in the safe table
    report.build([run[0]], tmp_path, kernel_max_len=256)
    assert list(tmp_path.glob("precision_kernel-*.parquet")) == cache


def test_kernel_rows_made_in_a_second_process_are_the_ones_made_in_the_report(run, tmp_path):
    # the report starts them in a second process (one torch thread, glibc's large blocks kept in the heap) while it
    # makes the rest; the same rows, bit for bit, as the report's own process computes
    from harness.report import precision as report_precision
    paths = [run[0]]
    report_precision.start_kernel_rows(paths, tmp_path / "a", max_len=256)
    (proc,) = report_precision._started.values()
    background = report_precision.kernel_rows(paths, tmp_path / "a", max_len=256)
    assert report_precision._started == {} and proc.returncode == 0  # waited for; it made them
    here = report_precision.kernel_rows(paths, tmp_path / "b", max_len=256)
    pd.testing.assert_frame_equal(background, here)
    assert len(background) > 100 and background.value.notna().any()


def test_kernel_rows_of_a_report_that_stops_are_not_left_computing(run, tmp_path):
    from harness.report import precision as report_precision
    report_precision.start_kernel_rows([run[0]], tmp_path, max_len=4096)
    (proc,) = report_precision._started.values()
    assert proc.poll() is None
    report_precision.stop_kernel_rows()
    assert report_precision._started == {} and proc.poll() is not None
    assert not list(tmp_path.glob("precision_kernel-*"))  # nothing half written


def test_kernel_rows_whose_second_process_failed_are_made_by_the_report(run, tmp_path, monkeypatch):
    from harness.report import precision as report_precision
    monkeypatch.setattr(report_precision.sys, "executable", "false")  # a process that exits 1 at once
    report_precision.start_kernel_rows([run[0]], tmp_path, max_len=256)
    k = report_precision.kernel_rows([run[0]], tmp_path, max_len=256)
    assert len(k) > 100 and len(list(tmp_path.glob("precision_kernel-*.parquet"))) == 1


def test_the_bias_study_takes_the_encodings_whose_positions_are_a_bias_alone():
    """Shaw's bias reads q, and RoPE with a bias (rope_alibi, rope_bias) also rotates: both are left out.
    sigmoid_alibi is in: its normalizer is not softmax, but its positions are ALiBi's bias alone."""
    assert bias_encodings() == ("alibi", "fire", "kerple_log", "kerple_power", "sigmoid_alibi", "t5")


def test_precision_group_selects_a_pipeline():
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = config_lib.to_config(compose("config", overrides=["precision=hf_bf16"]))
        assert cfg.precision.pipeline.build().table == "bf16"
        with pytest.raises(Exception, match="differs from the preset 'hf_bf16'; give it a new name"):
            config_lib.to_config(compose("config", overrides=["precision=hf_bf16", "precision.pipeline.table=fp32"]))
        mine = config_lib.to_config(compose("config", overrides=[
            "precision=hf_bf16", "precision.pipeline.table=fp32", "precision.pipeline.name=mine"]))
        assert mine.precision.pipeline.name == "mine" and cfg.precision.model_level
