"""Precision study: the public bug reports reproduced as numbers, and the row contract."""
import json
import math

import pytest
import torch

from harness.measure import precision as P
from harness.measure.precision_pipelines import (REFERENCE, Pipeline, inv_freq_fp64, load_pipeline, pipeline_names,
                                                 rotate, round_tf32, table)

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


def test_reference_pipeline_equals_python_fp64():
    # The fp64 reference against values computed here with Python floats (math.cos/sin of p * theta_j,
    # theta_j = base^(-2j/d), RoFormer eq. 15): the phase p * theta_j is one double rounding away from exact
    # (< 131072 * 2^-53 ~ 1.5e-11 rad), so the two agree to ~1e-11.
    d, base = 64, 1e4
    theta = [base ** (-2 * j / d) for j in range(d // 2)]
    assert inv_freq_fp64(d, base).tolist() == pytest.approx(theta, rel=1e-15)
    pos = torch.cat((torch.arange(20), torch.randint(0, 131072, (200,), generator=torch.Generator().manual_seed(0))))
    cos, sin = table(REFERENCE, pos, d, base)  # (N, d/2)
    want_cos = torch.tensor([[math.cos(p * t) for t in theta] for p in pos.tolist()], dtype=torch.float64)
    want_sin = torch.tensor([[math.sin(p * t) for t in theta] for p in pos.tolist()], dtype=torch.float64)
    assert cos.dtype == torch.float64 and (cos - want_cos).abs().max() < 1e-10 and (sin - want_sin).abs().max() < 1e-10
    # the reference rotation, half layout (pair j = (j, j + d/2)): x_j cos - x_{j+d/2} sin, x_{j+d/2} cos + x_j sin
    x = torch.randn(len(pos), d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    a, b = x[:, :d // 2], x[:, d // 2:]
    want = torch.cat((a * want_cos - b * want_sin, b * want_cos + a * want_sin), dim=-1)
    assert (rotate(REFERENCE, x, cos, sin) - want).abs().max() < 1e-9
    # and phase_error measures against that value: fp32's error re-derived from its table and the Python phase
    cos32, sin32 = table("fp32", pos, d, base)
    got = torch.atan2(sin32.double(), cos32.double())
    ref = torch.tensor([[p * t for t in theta] for p in pos.tolist()], dtype=torch.float64)
    want_err = (torch.remainder(got - ref + math.pi, 2 * math.pi) - math.pi).abs().amax(-1)
    assert (P.phase_error("fp32", d, base, pos) - want_err).abs().max() < 1e-9


MANTISSA = {"bf16": 7, "fp16": 10, "tf32": 10, "fp32": 23}  # explicit mantissa bits of each format (IEEE 754, bf16)


def held_integer(p, m):
    """Integer p rounded to a float with m explicit mantissa bits, round half to even, in Python integers:
    exact below 2^(m+1); above, a multiple of the spacing 2^(floor(log2 p) - m)."""
    if p < 2 ** (m + 1):
        return p
    spacing = 2 ** (p.bit_length() - 1 - m)
    q, rem = divmod(p, spacing)
    if 2 * rem > spacing or (2 * rem == spacing and q % 2):
        q += 1
    return q * spacing


def test_phase_onset_is_the_position_spacing():
    # positions held in bf16 / fp16, every other stage fp32 (bf16_positions also stores its table in bf16): the
    # phase error at p is |held(p) - p| * theta_0 with theta_0 = 1, the largest frequency, plus < 0.01 rad of
    # table and fp32 phase rounding. So the first p over t is the first p whose rounding error exceeds t
    # (thresholds 0.1 and 1.5 lie between the attainable errors 0, 1, 2): bf16 257 and 514, fp16 2049 and 4098.
    fp16_positions = Pipeline("fp16_positions", positions="fp16")
    rows = P.phase_rows(["bf16_positions", fp16_positions], head_dim=32, max_len=8192, thresholds=(0.1, 1.5))
    onset = {(r["protocol"], json.loads(r["params"])["threshold"]): r["value"] for r in rows
             if r["metric"] == "phase_err_onset"}
    for name, dtype in (("bf16_positions", "bf16"), ("fp16_positions", "fp16")):
        for t in (0.1, 1.5):
            want = next(p for p in range(8192) if abs(held_integer(p, MANTISSA[dtype]) - p) > t)
            assert onset[name, t] == want, (name, t)
    assert (onset["bf16_positions", 0.1], onset["fp16_positions", 1.5]) == (257, 4098)


def test_collision_rate_is_one_minus_one_over_the_spacing():
    # adjacent integers (p, p + 1) in [2^k, 2^(k+1)) held with m mantissa bits share a value at the rate
    # 1 - 1/spacing = 1 - 2^(m - k) once the spacing 2^(k - m) is >= 2, else 0; checked here also pair by pair
    # against held_integer (round half to even in Python integers)
    rows = P.collision_rows(["fp32"], dtypes=("bf16", "fp16", "tf32", "fp32"), max_len=8192)
    got = {(r["dtype"], r["eval_len"]): r["value"] for r in rows if r["metric"] == "collision_rate"}
    edges = P.windows(8192)
    assert len(got) == 4 * (len(edges) - 1)
    for dtype, m in MANTISSA.items():
        for lo, hi in zip(edges[:-1], edges[1:]):
            k = max(lo, 1).bit_length() - 1  # windows are [2^k, 2^(k+1)) above 16
            closed = max(0.0, 1 - 2.0 ** (m - k)) if lo >= 16 else 0.0
            by_pair = sum(held_integer(p, m) == held_integer(p + 1, m) for p in range(lo, hi)) / (hi - lo)
            assert got[dtype, hi] == closed == by_pair, (dtype, lo, hi)


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
    # onsets and collision rates against closed forms: test_phase_onset_is_the_position_spacing,
    # test_collision_rate_is_one_minus_one_over_the_spacing
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
