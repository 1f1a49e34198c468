"""Encodings against outside references: the ALiBi paper's slope code, HF T5's bucket function, the FIRE
paper's reference module, rotary-embedding-torch (xPos, axial 2D RoPE), closed forms from the papers."""
import math

import pytest
import torch
from torch import nn
from transformers.models.t5.modeling_t5 import T5Attention

from harness.encodings import build
from harness.encodings.alibi import slopes
from harness.encodings.sinusoidal import table as sinusoidal_table
from harness.encodings.t5 import relative_position_bucket
from harness.rope import frequencies


def paper_alibi_slopes(n):
    # verbatim logic of get_slopes() in ofirpress/attention_with_linear_biases (fairseq transformer.py)
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + paper_alibi_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 8, 12, 16, 20, 24, 40, 64, 96])
def test_alibi_slopes_equal_paper_code(n):
    assert slopes(n) == pytest.approx(paper_alibi_slopes(n), rel=1e-14)


def test_alibi_slopes_paper_values_for_8_heads():
    # ALiBi paper §3: for 8 heads the slopes are 1/2, 1/4, ..., 1/256
    assert slopes(8) == [2.0 ** -i for i in range(1, 9)]


def test_alibi_bias_is_minus_slope_times_distance():
    enc = build("alibi", n_heads=12)
    b = enc.bias(None, torch.arange(10), torch.arange(10))  # (12, 10, 10)
    m = torch.tensor(paper_alibi_slopes(12))
    assert b[:, 7, 2].tolist() == pytest.approx((-5 * m).tolist())
    assert (b.diagonal(dim1=1, dim2=2) == 0).all()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (64, 512)])
def test_t5_buckets_equal_hf(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-1500, 1500)[None, :] + torch.zeros(3, 1, dtype=torch.long)
    ref = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                                max_distance=max_distance)
    assert torch.equal(relative_position_bucket(rel, bidirectional, num_buckets, max_distance), ref)


class PaperFIRE(nn.Module):
    # The FIRE paper's reference implementation (Li et al. 2023, arXiv 2310.04418, Appendix), transcribed.
    def __init__(self, num_heads=12, mlp_width=32, init_c=0.1, init_L=512., eps=1e-6):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, num_heads))
        self.c = nn.Parameter(torch.tensor(init_c))
        self.init_L = nn.Parameter(torch.tensor(init_L), requires_grad=False)
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))
        self.eps = eps

    def forward(self, x):
        seq_length = x.size(1)
        positions = torch.arange(seq_length, dtype=torch.float, device=x.device)
        rel_distance = positions[:, None] - positions[None, :]
        threshold = torch.abs(self.L_multiplier * self.init_L)
        pos_normalizer = torch.max(positions, threshold)
        pos_normalizer = pos_normalizer[:, None]
        rel_distance = torch.log(torch.abs(self.c * rel_distance) + 1)
        pos_normalizer = torch.log(torch.abs(self.c * pos_normalizer) + 1) + self.eps
        normalized_distance = rel_distance / pos_normalizer
        fire_bias = self.mlp(normalized_distance.unsqueeze(-1))
        fire_bias = fire_bias.unsqueeze(0).permute(0, 3, 1, 2)
        return fire_bias


def test_fire_equals_paper_reference():
    torch.manual_seed(0)
    ours = build("fire", n_heads=4, init_L=16.0)
    ref = PaperFIRE(num_heads=4, init_L=16.0)
    ref.mlp.load_state_dict(ours.mlp.state_dict())
    with torch.no_grad():
        ours.c.fill_(0.3), ref.c.fill_(0.3), ours.L_multiplier.fill_(1.5), ref.L_multiplier.fill_(1.5)
    T = 60  # past the threshold 16 * 1.5 = 24, so progressive interpolation is exercised
    torch.testing.assert_close(ours.bias(None, torch.arange(T), torch.arange(T))[None], ref(torch.zeros(1, T, 8)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name,formula", [
    ("kerple_log", lambda r1, r2, d: -r1 * math.log(1 + r2 * d)),  # Chi et al. 2022, eq. 10
    ("kerple_power", lambda r1, r2, d: -r1 * d ** r2),  # Chi et al. 2022, eq. 9
])
def test_kerple_closed_forms(name, formula):
    enc = build(name, n_heads=2)
    with torch.no_grad():
        enc.r1.copy_(torch.tensor([2.0, 0.5])), enc.r2.copy_(torch.tensor([0.5, 1.5]))
    b = enc.bias(None, torch.arange(8), torch.arange(8))
    assert b[0, 5, 2].item() == pytest.approx(formula(2.0, 0.5, 3), rel=1e-6)
    assert b[1, 7, 0].item() == pytest.approx(formula(0.5, 1.5, 7), rel=1e-6)


def test_kerple_power_clamps_exponent_to_paper_range():
    enc = build("kerple_power", n_heads=1)
    with torch.no_grad():
        enc.r1.fill_(1.0), enc.r2.fill_(5.0)  # r2 must stay in (0, 2]
    assert enc.bias(None, torch.arange(4), torch.arange(4))[0, 3, 0].item() == pytest.approx(-9.0)


def test_shaw_bias_equals_explicit_sum():
    # Shaw et al. 2018 eq. (5) key term: q_i . a^K_ij / sqrt(d), a^K_ij = w^K_clip(j - i, k)
    torch.manual_seed(0)
    enc = build("shaw", head_dim=8, max_distance=3).double()
    q = torch.randn(2, 2, 10, 8, dtype=torch.float64)
    b = enc.bias(q, torch.arange(10), torch.arange(10))
    for i, j in [(0, 0), (9, 0), (4, 6), (5, 4), (2, 9)]:
        w = enc.rel_k[max(-3, min(3, j - i)) + 3]
        torch.testing.assert_close(b[:, :, i, j], q[:, :, i] @ w / math.sqrt(8))


def test_xpos_equals_rotary_embedding_torch():
    from rotary_embedding_torch import RotaryEmbedding
    T, D = 40, 32
    q, k = torch.randn(1, 2, T, D), torch.randn(1, 2, T, D)
    ref_q, ref_k = RotaryEmbedding(dim=D, use_xpos=True, xpos_scale_base=512).rotate_queries_and_keys(q, k)
    ours_q, ours_k = build("xpos", head_dim=D).rotate(q, k, torch.arange(T))
    torch.testing.assert_close(ours_q, ref_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours_k, ref_k, rtol=1e-5, atol=1e-5)


def test_rope2d_equals_rotary_embedding_torch_axial():
    # lucidrains' axial frequencies: RotaryEmbedding(dim=D/2).get_axial_freqs(H, W) -> (H, W, D), rows then cols
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
    H, W, D = 5, 16, 32
    x = torch.randn(1, 2, H * W, D)
    freqs = RotaryEmbedding(dim=D // 2).get_axial_freqs(H, W).reshape(H * W, D)
    ref = apply_rotary_emb(freqs, x)
    enc = build("rope2d", head_dim=D, width=W, layout="interleaved")
    ours, _ = enc.rotate(x, x, torch.arange(H * W))
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


def test_sinusoidal_closed_form_and_linear_shift():
    # Vaswani et al. 2017: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)
    d = 16
    pe = sinusoidal_table(torch.arange(300), d)
    assert pe[37, 6].item() == pytest.approx(math.sin(37 / 10000 ** (6 / d)), abs=1e-12)
    assert pe[37, 7].item() == pytest.approx(math.cos(37 / 10000 ** (6 / d)), abs=1e-12)
    # Vaswani et al. 2017 §3.5: p_{k+D} = T(D) p_k with T(D) block rotations independent of k
    delta = 11
    w = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = torch.cos(delta * w), torch.sin(delta * w)
    sin_k, cos_k = pe[:-delta, 0::2], pe[:-delta, 1::2]
    torch.testing.assert_close(pe[delta:, 0::2], sin_k * c + cos_k * s)
    torch.testing.assert_close(pe[delta:, 1::2], cos_k * c - sin_k * s)


def test_rope_rf_alpha_zero_equals_rope():
    q, k = torch.randn(2, 4, 50, 16), torch.randn(2, 4, 50, 16)
    for layout in ("half", "interleaved"):
        rf = build("rope_rf", head_dim=16, alpha_init=0.0, rho=0.3, layout=layout, impl="eager")
        rope = build("rope", head_dim=16, layout=layout, impl="eager")
        for a, b in zip(rf.rotate(q, k, torch.arange(50)), rope.rotate(q, k, torch.arange(50))):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_rope_rf_identity_of_notes_000_section_4_5():
    # a*(m-n) = cos((m-n) phi) a'(m-n) - sin((m-n) phi) b'(m-n), phi = alpha / base^rho, with a' + i b' =
    # sum_j (q_2j + i q_2j+1)(k_2j - i k_2j+1) e^{i (m-n)(1-alpha) theta_j}
    alpha, rho, d = 0.3, 0.4, 16
    enc = build("rope_rf", head_dim=d, alpha_init=alpha, rho=rho, layout="interleaved").double()
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    theta = frequencies("default", d, 10000.0)[0].double()  # the identity holds for any theta_j; use RoPE's
    alpha = enc.alpha.item()  # 0.3 as stored (a float32 parameter, then cast to float64)
    phi = alpha / 10000.0 ** rho
    zq, zk = torch.complex(q[0::2], q[1::2]), torch.complex(k[0::2], k[1::2])
    for m, n in [(5, 2), (100, 3), (7, 7), (1000, 999), (3, 40)]:
        pos = torch.tensor([m, n])
        rq, rk = enc.rotate(q.expand(2, d), k.expand(2, d), pos)
        a_star = (rq[0] @ rk[1]).item()
        z = (zq * zk.conj() * torch.polar(torch.ones_like(theta), (m - n) * (1 - alpha) * theta)).sum()
        rhs = math.cos((m - n) * phi) * z.real.item() - math.sin((m - n) * phi) * z.imag.item()
        assert a_star == pytest.approx(rhs, rel=1e-9, abs=1e-9)


def kerple_authors_init(variant, n_heads):
    # chijames/KERPLE at 25be3d712e96a3353b374f1f8e36b97d86f97ffa, megatron/mpu/layers.py:
    # get_parameter(scale, 'uniform') = torch.rand(num_heads)[:, None, None] * scale (on the GPU there, here on
    # the CPU). ParallelKerpleLog: bias_p = get_parameter(2, ...), then bias_a = get_parameter(1, ...), bias
    # -bias_p * log(1 + bias_a |m - n|). ParallelKerplePower, pos_emb 'kerple_power_ap_' (train.sh): bias_arg
    # 'ap' so bias_p = get_parameter(2, ...), then bias_a = get_parameter(1, ...), bias -bias_a |m - n|^bias_p.
    bias_p = torch.rand(n_heads)[:, None, None] * 2
    bias_a = torch.rand(n_heads)[:, None, None] * 1
    # (scale, shape): ours call the scale r1 in both; the shape is r2 (log: a, power: p)
    return (bias_p.flatten(), bias_a.flatten()) if variant == "kerple_log" else (bias_a.flatten(), bias_p.flatten())


@pytest.mark.parametrize("name,r1_high,r2_high", [("kerple_log", 2.0, 1.0), ("kerple_power", 1.0, 2.0)])
def test_kerple_init_is_the_authors(name, r1_high, r2_high):
    # r1_high, r2_high: the bounds of the authors' uniform inits (kerple_authors_init above)
    for seed in (0, 1, 7):
        torch.manual_seed(seed)
        want_r1, want_r2 = kerple_authors_init(name, 64)
        torch.manual_seed(seed)
        enc = build(name, n_heads=64)
        assert torch.equal(enc.r1.data, want_r1) and torch.equal(enc.r2.data, want_r2)
    torch.manual_seed(0)
    enc = build(name, n_heads=4096)
    for p, high in ((enc.r1, r1_high), (enc.r2, r2_high)):
        # U(0, high) over 4096 heads: min, max within 0.5% of the ends (a miss has probability 2e-9 each), mean
        # high/2 within 4 standard errors (high / sqrt(12 * 4096) each)
        assert 0 <= p.min() < 0.005 * high and 0.995 * high < p.max() < high
        assert abs(p.mean().item() - high / 2) < 4 * high / math.sqrt(12 * 4096)
