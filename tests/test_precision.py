"""Precision study (issue 4): the public bug reports reproduced as numbers, and the row contract."""
import json
import math

import pytest
import torch

from harness.measure import precision as P
from harness.measure.precision_pipelines import (REFERENCE, Pipeline, load_pipeline, pipeline_names, rotate,
                                                 round_tf32, table)

PRESETS = ["bf16", "bf16_inv_freq", "bf16_positions", "fp16", "fp32", "hf_bf16", "meta_bf16", "tf32"]
ROW_KEYS = {"encoding", "params", "head_dim", "metric", "eval_len", "protocol", "dtype", "device", "value", "unit"}


def test_presets_are_the_issue_list_and_load():
    assert pipeline_names() == PRESETS
    for name in PRESETS:
        assert load_pipeline(name).name == name


def test_unknown_pipeline_fails_listing_the_names():
    with pytest.raises(ValueError, match=r"unknown precision pipeline 'bf61'; expected one of \['bf16'"):
        P.phase_error("bf61", 128, 1e4, torch.arange(4))
    with pytest.raises(ValueError, match="only|expected one of"):
        Pipeline("x", table="tf32")  # tf32 is a matmul input format: phase only


def test_gpt_neox_1003_fp16_table():
    """gpt-neox #1003: inv_freq.half(), t = arange(2048).type_as(inv_freq), fp16 einsum, cos of the fp16
    phase; against the same in fp32. The report printed 0.7819 (emb[1857, 1]: 1044.2678 -> 1045)."""
    pos = torch.arange(2048)
    cos16, _ = table("fp16", pos, 32, 10000.0)
    cos32, _ = table("fp32", pos, 32, 10000.0)
    assert (cos16.float() - cos32).abs().max().item() == pytest.approx(0.7819, abs=1e-3)
    phase16 = pos[1857].half() * torch.tensor(1e4 ** (-2 / 32)).half()
    assert phase16.item() == 1045.0


def test_modalities_462_bf16_inv_freq():
    """Modalities #462: inv_freq cast to bf16 before the fp32 phase, tables read back against fp64:
    0.62 / 2.5 / pi rad below 512 / 2048 / 4096 (the PR's table gives two digits), 2.8e-3 once fixed."""
    err = P.phase_error("bf16_inv_freq", 128, 1e4, torch.arange(4096))
    assert err[:512].max().item() == pytest.approx(0.625, abs=0.01)
    assert err[:2048].max().item() == pytest.approx(2.5, abs=0.02)
    assert err.max().item() == pytest.approx(math.pi, abs=1e-3)
    fixed = P.phase_error("hf_bf16", 128, 1e4, torch.arange(4096))
    assert fixed.max().item() == pytest.approx(2.8e-3, abs=1e-4)


def test_guarded_fp32_is_bit_identical_under_autocast():
    pos, x = torch.arange(8192), torch.randn(8192, 64)
    cos, sin = table("fp32", pos, 64, 1e4)
    y = rotate("fp32", x, cos, sin)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cos_a, sin_a = table("fp32", pos, 64, 1e4)
        y_a = rotate("fp32", x, cos_a, sin_a)
        # the control: HF's unguarded phase matmul does change under autocast (transformers #29285)
        unguarded = pos.float()[:, None] @ torch.ones(1, 32)
    assert cos_a.dtype == torch.float32 and torch.equal(cos, cos_a) and torch.equal(sin, sin_a)
    assert torch.equal(y, y_a)
    assert unguarded.dtype == torch.bfloat16


def test_tf32_rounding_is_nearest_even_on_10_bits():
    x = torch.tensor([2048.0, 2049.0, 2050.0, 2051.0, 2053.0, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, -2051.0])
    assert round_tf32(x).tolist() == [2048.0, 2048.0, 2050.0, 2052.0, 2052.0, 1.0, 1.0 + 2 ** -9, -2052.0]
    assert torch.equal(round_tf32(torch.arange(2049.0)), torch.arange(2049.0))  # exact up to 2048


def test_reference_matches_harness_frequencies_and_is_exact():
    from harness.rope import frequencies

    inv32 = frequencies("default", 128, 1e4)[0]
    assert P.phase_error(REFERENCE, 128, 1e4, torch.arange(100000)).max().item() < 1e-9
    assert torch.allclose(inv32.double(), 1e4 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128), rtol=1e-6)


def test_fp32_stays_accurate_and_fp16_positions_are_lost_past_65504():
    err32 = P.phase_error("fp32", 128, 1e4, torch.arange(0, 131072, 7))
    assert err32.max().item() < 0.01
    err16 = P.phase_error("fp16", 128, 1e4, torch.tensor([65519, 65520]))
    assert err16[0].isfinite() and err16[1].isnan()  # 65520 rounds to inf in fp16


def _check_rows(rows):
    assert rows and all(ROW_KEYS <= set(r) for r in rows)
    for r in rows:
        json.loads(r["params"])
        assert isinstance(r["value"], float)


def test_metric_rows_small_grid():
    kw = dict(head_dim=32, base=1e4, max_len=4096)
    rows = (P.phase_rows(["fp32", "bf16"], **kw) + P.rotation_rows(["hf_bf16", "tf32"], **kw)
            + P.logit_rows(["fp32", "bf16"], distances=(1, 64), n_pairs=1, **kw)
            + P.collision_rows(["bf16"], **kw))
    _check_rows(rows)
    by = {(r["metric"], r["protocol"], r["dtype"], r["eval_len"], r["params"]): r["value"] for r in rows}
    # the onset row is the first position whose phase error exceeds the threshold
    err = P.phase_error("bf16", 32, 1e4, torch.arange(4096))
    for r in (r for r in rows if r["metric"] == "phase_err_onset" and r["protocol"] == "bf16"):
        t = json.loads(r["params"])["threshold"]
        assert r["value"] == float((err > t).nonzero()[0]) and r["value"] < 300
    # bf16 holds integers exactly only to 256: half of the adjacent positions collide in [256, 512)
    coll = {r["eval_len"]: r["value"] for r in rows if r["metric"] == "collision_rate" and r["dtype"] == "bf16"}
    assert coll[256] == 0.0 and coll[512] == 0.5
    # the relative property: fp32 shift error is tiny, all-bf16 is O(1) at a few thousand positions
    shift = {(r["protocol"], r["eval_len"]): r["value"] for r in rows
             if r["metric"] == "shift_max_err" and json.loads(r["params"])["key"] == "unit"}
    assert shift[("fp32", 4096)] < 1e-3 < 0.1 < shift[("bf16", 4096)]
    assert len(by) == len(rows)  # one row per (metric, pipeline, dtype, window, params)


def test_safe_length_from_rows():
    rows = [P.row("phase_err_rad", v, "rad", protocol="p", dtype="bf16", eval_len=e)
            for e, v in ((16, 0.01), (32, 0.05), (64, 0.2), (128, 0.01))]
    rows.append(P.row("phase_err_rad", 0.0, "rad", protocol="ok", dtype="fp32", eval_len=16))
    (ok, p) = sorted(P.safe_length(rows, 0.1), key=lambda r: r["protocol"])
    assert p["value"] == 32.0 and json.loads(p["params"])["censored"] is False  # first failure stops it
    assert ok["value"] == 16.0 and json.loads(ok["params"])["censored"] is True
    nan = [P.row("phase_err_rad", math.nan, "rad", protocol="n", dtype="fp16", eval_len=16)]
    assert P.safe_length(nan, 0.1)[0]["value"] == 0.0


def test_bias_and_xpos_rows():
    rows = P.bias_rows(("alibi", "t5"), dtypes=("bf16",), max_len=2048) + P.xpos_rows(
        dtypes=("fp16",), head_dim=32, max_len=16384)
    _check_rows(rows)
    err = {(r["encoding"], r["protocol"], r["eval_len"]): r["value"] for r in rows if r["metric"] == "bias_err"}
    assert err[("alibi", "cast", 256)] == 0.0 and err[("alibi", "cast", 2048)] > 0  # bf16 distances past 256
    over = {(r["protocol"], r["eval_len"]): r["value"] for r in rows if r["metric"] == "xpos_scale_overflow"}
    # fp16: zeta^(n/512) passes 65504 once |n| > ~4.5k, i.e. past ~9k positions with centring
    assert over[("cast", 4096)] == 0.0 and over[("cast", 16384)] > 0.0
