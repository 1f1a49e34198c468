"""RoPE maths against outside references: HF transformers (ROPE_INIT_FUNCTIONS, GPT-NeoX apply),
rotary-embedding-torch (interleaved layout, xPos), closed forms from RoFormer (arXiv 2104.09864) and Su's blog."""
import math

import pytest
import torch
from transformers import GPTNeoXConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as hf_apply

from harness.rope import apply_rotary, decay_curve, frequencies, rotary_table

# (head_dim, base, partial_rotary_factor, hf_max_position_embeddings, scaling params)
CASES = {
    "linear": [(64, 1e4, 1.0, 2048, dict(factor=2.0)), (128, 5e5, 0.5, 4096, dict(factor=8.0))],
    "dynamic": [(64, 1e4, 1.0, 512, dict(factor=4.0)), (96, 1e6, 1.0, 1024, dict(factor=2.5))],
    "yarn": [(64, 1e4, 1.0, 1024, dict(factor=4.0)), (128, 1e4, 1.0, 4096, dict(factor=16.0, beta_fast=8, beta_slow=2)),
             (64, 5e5, 0.5, 2048, dict(factor=8.0, mscale=1.0, mscale_all_dim=0.8)),
             (32, 1e4, 1.0, 64, dict(factor=4.0, truncate=False, attention_factor=1.3))],
    "llama3": [(128, 5e5, 1.0, 8192, dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0)),
               (64, 1e4, 1.0, 256, dict(factor=4.0, low_freq_factor=2.0, high_freq_factor=8.0))],
    "longrope": [(64, 1e4, 1.0, 4096, dict(factor=4.0))],
}


def _gpt_neox_config(rope_type, head_dim, base, prf, max_pos, params):
    rp = {"rope_type": rope_type, "rope_theta": base, "partial_rotary_factor": prf, **params}
    if rope_type in ("yarn", "llama3", "longrope"):
        rp["original_max_position_embeddings"] = max_pos // 4 if rope_type != "llama3" else max_pos
    return GPTNeoXConfig(hidden_size=4 * head_dim, num_attention_heads=4, head_dim=head_dim,
                         max_position_embeddings=max_pos, rope_parameters=rp)


def _ours(rope_type, cfg, seq_len=None):
    rp = dict(cfg.rope_parameters)
    rp.pop("rope_type"), rp.pop("rope_theta")
    if rope_type == "dynamic":  # HF reads the trained length from max_position_embeddings
        rp["original_max_position_embeddings"] = cfg.max_position_embeddings
    return frequencies(rope_type, cfg.head_dim, cfg.rope_parameters["rope_theta"], seq_len, **rp)


@pytest.mark.parametrize("rope_type,case", [(t, c) for t, cs in CASES.items() for c in cs])
def test_frequencies_equal_hf_rope_init_functions(rope_type, case):
    head_dim, base, prf, max_pos, params = case
    if rope_type == "longrope":
        n = int(head_dim * prf) // 2
        params = dict(params, short_factor=[1.0 + i / n for i in range(n)], long_factor=[2.0 + 3 * i / n for i in range(n)])
    cfg = _gpt_neox_config(rope_type, head_dim, base, prf, max_pos, params)
    for seq_len in (None, max_pos // 8, max_pos, 3 * max_pos):
        ref, ref_att = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu", seq_len=seq_len)
        got, att = _ours(rope_type, cfg, seq_len)
        torch.testing.assert_close(got, ref, rtol=0, atol=0)  # same float32 arithmetic: bit-equal
        assert att == pytest.approx(ref_att, rel=1e-12)


@pytest.mark.parametrize("head_dim,base,prf", [(64, 1e4, 1.0), (128, 5e5, 0.25), (80, 1e6, 0.5)])
def test_default_equals_hf_gpt_neox(head_dim, base, prf):
    cfg = _gpt_neox_config("default", head_dim, base, prf, 2048, {})
    ref, _ = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(cfg)
    torch.testing.assert_close(frequencies("default", head_dim, base, partial_rotary_factor=prf)[0], ref,
                               rtol=0, atol=0)


@pytest.mark.parametrize("head_dim,base,factor", [(64, 1e4, 2.0), (128, 5e5, 8.0), (32, 100.0, 3.5)])
def test_ntk_closed_form(head_dim, base, factor):
    # NTK-aware (bloc97): base' = base * factor^(d/(d-2)); theta_j = base'^(-2j/d), in float64
    j = torch.arange(head_dim // 2, dtype=torch.float64)
    ref = (base * factor ** (head_dim / (head_dim - 2))) ** (-2 * j / head_dim)
    got = frequencies("ntk", head_dim, base, factor=factor)[0]
    torch.testing.assert_close(got.double(), ref, rtol=2e-6, atol=0)


def test_dynamic_returns_to_original_after_long_sequence():
    # HF #25306: dynamic NTK kept the stretched frequencies after a long input. Ours is stateless.
    kw = dict(factor=4.0, original_max_position_embeddings=256)
    short, long_ = frequencies("dynamic", 64, 1e4, 100, **kw)[0], frequencies("dynamic", 64, 1e4, 2048, **kw)[0]
    again = frequencies("dynamic", 64, 1e4, 100, **kw)[0]
    assert not torch.equal(short, long_)
    torch.testing.assert_close(again, short, rtol=0, atol=0)
    torch.testing.assert_close(again, frequencies("default", 64, 1e4)[0], rtol=0, atol=0)


def _xqk(shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", ["eager", "complex"])  # kernels: tests/test_rope_kernels.py
@pytest.mark.parametrize("T,D,prf", [(4096, 64, 1.0), (333, 48, 0.5), (17, 32, 0.25)])
def test_impls_agree_with_reference_matrix(layout, impl, T, D, prf):
    x = _xqk((2, 3, T, D))
    inv_freq = frequencies("default", D, 1e4, partial_rotary_factor=prf)[0].double()
    cos, sin = rotary_table(inv_freq, torch.arange(T), dtype=torch.float64)
    ref = apply_rotary(x, cos, sin, layout, "reference")
    torch.testing.assert_close(apply_rotary(x, cos, sin, layout, impl), ref, rtol=1e-12, atol=1e-12)


def test_reference_matrix_is_rotation_and_half_matches_hf():
    # outside reference for the `half` layout: HF GPT-NeoX apply_rotary_pos_emb (rotate_half, cat(freqs, freqs))
    T, D = 64, 32
    q, k = _xqk((1, 2, T, D)), _xqk((1, 2, T, D), seed=1)
    inv_freq = frequencies("default", D, 1e4)[0].double()
    cos, sin = rotary_table(inv_freq, torch.arange(T), dtype=torch.float64)
    hq, hk = hf_apply(q, k, torch.cat((cos, cos), -1)[None], torch.cat((sin, sin), -1)[None])
    torch.testing.assert_close(apply_rotary(q, cos, sin, "half", "reference"), hq, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(apply_rotary(k, cos, sin, "half", "reference"), hk, rtol=1e-12, atol=1e-12)


def test_interleaved_matches_rotary_embedding_torch():
    # outside reference for the `interleaved` layout (RoFormer's pairs): lucidrains' rotary-embedding-torch
    from rotary_embedding_torch import RotaryEmbedding
    T, D = 50, 32
    x = _xqk((1, 2, T, D), dtype=torch.float32)
    ref = RotaryEmbedding(dim=D).rotate_queries_or_keys(x)
    cos, sin = rotary_table(frequencies("default", D, 1e4)[0], torch.arange(T))
    torch.testing.assert_close(apply_rotary(x, cos, sin, "interleaved", "eager"), ref, rtol=1e-5, atol=1e-5)


def test_notes_elementwise_formula_interleaved():
    # RoFormer §3.4.2: R x = x (*) [cos0, cos0, cos1, cos1, ...] + [-x1, x0, -x3, x2, ...] (*) [sin0, sin0, ...]
    T, D = 9, 8
    x = _xqk((T, D))
    cos, sin = rotary_table(frequencies("default", D, 1e4)[0].double(), torch.arange(T), dtype=torch.float64)
    perm = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    ref = x * cos.repeat_interleave(2, -1) + perm * sin.repeat_interleave(2, -1)
    torch.testing.assert_close(apply_rotary(x, cos, sin, "interleaved", "eager"), ref, rtol=1e-13, atol=1e-13)


def test_decay_curve_closed_form_and_notes_code():
    # at m = 0 every S_j = j + 1, so the mean over j is (d/2 + 1)/2 exactly
    assert decay_curve(128, 1e4, [0.0])[0].item() == pytest.approx((128 / 2 + 1) / 2, abs=1e-12)
    # Su's decay-curve code (https://spaces.ac.cn/archives/8265, 远程衰减) as a Python loop:
    # f(m) = mean_j |sum_{i<=j} e^{i m theta_i}|
    d = 64
    def f(m):
        total = 0.0
        for j in range(d // 2):
            total += abs(sum(complex(math.cos(m * 1e4 ** (-2 * i / d)), math.sin(m * 1e4 ** (-2 * i / d)))
                             for i in range(j + 1)))
        return total / (d / 2)
    ms = [0.0, 1.0, 7.5, 64.0, 250.0]
    torch.testing.assert_close(decay_curve(d, 1e4, ms), torch.tensor([f(m) for m in ms], dtype=torch.float64),
                               rtol=1e-9, atol=1e-9)
    # and it decays: the bound at distance 256 is well below that at 0
    assert decay_curve(d, 1e4, [256.0])[0] < 0.5 * decay_curve(d, 1e4, [0.0])[0]


@pytest.mark.parametrize("call,match", [
    (lambda: frequencies("yarnn", 64), r"unknown rope_type 'yarnn'; expected one of \["),
    (lambda: frequencies("default", 63), "even head_dim"),
    (lambda: frequencies("default", 64, partial_rotary_factor=0.3), "even, non-zero rotary dim"),
    (lambda: frequencies("linear", 64, factor=0.5), "factor must be >= 1"),
    (lambda: frequencies("default", 64, base=0.0), "base must be positive"),
    (lambda: frequencies("default", 64, base=-5.0), "base must be positive"),
    (lambda: frequencies("linear", 64), r"needs \['factor'\]"),
    (lambda: frequencies("linear", 64, factor=2.0, beta_fast=3), r"does not take \['beta_fast'\]"),
    (lambda: rotary_table(frequencies("default", 8)[0], torch.tensor([0.0, 70000.0], dtype=torch.float16)),
     "cannot be held in float16"),
    (lambda: apply_rotary(torch.zeros(2, 8), torch.zeros(2, 4), torch.zeros(2, 4), "interleave"), "unknown rope layout"),
    (lambda: apply_rotary(torch.zeros(2, 8), torch.zeros(2, 4), torch.zeros(2, 4), impl="fast"), "unknown rope impl"),
])
def test_bad_input_one_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
