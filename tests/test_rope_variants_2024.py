"""rope_resonance (Resonance RoPE, Wang et al. 2024, arXiv 2403.00071) and hope (HoPE, Chen et al. 2025, arXiv
2410.21216) against their definitions re-derived here in NumPy / plain Python, plus the properties each claims:
Resonance RoPE's exact periodicity, HoPE's unrotated features, relative scores, KV-cache decoding. Nothing on the
expected side calls the encodings' own methods, except where a rope_type's frequencies are the input (they are
checked against HF in tests/test_hf_config.py)."""
import cmath
import math

import numpy as np
import pytest
import torch

from harness import decode
from harness.encodings import build
from harness.model import Transformer
from harness.attention import attention_logits
from harness.rope import frequencies, rotary_table

EPS32 = 2.0 ** -24  # fp32 unit roundoff: one correctly rounded fp32 operation errs by at most this, relatively


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def rope_theta(head_dim, base, factor=1.0):
    # RoFormer eq. (15): theta_i = base^(-2i/d), i = 0 .. d/2 - 1, in fp64; PI (arXiv 2306.15595) divides by factor
    return base ** (-2.0 * np.arange(head_dim // 2) / head_dim) / factor


def fp32_rtol(theta):
    """Relative error bound of the harness's fp32 theta_i = 1 / base^(fp32(2i/d)) (harness/rope/frequencies.py)
    against the fp64 formula: the exponent's rounding moves theta by |ln theta| EPS32, pow <= 2 ulp, the reciprocal,
    a factor's division and NTK's fp32 base one rounding each: (|ln theta| + 5) EPS32."""
    return (np.abs(np.log(theta)) + 5) * EPS32


# ---------------------------------------------------------------------------------------------------------------
# Resonance RoPE. Definition (paper, and the authors' `resonance_register`, sheryc/resonance_rope at 4a7f5a70,
# llama_finetuning/scaled_rope/modeling_llama_yarn.py): lambda_i = 2 pi / theta_i of the (scaled) RoPE,
# theta'_i = 2 pi / round(lambda_i), round half to even (torch.round there, numpy.round here).

def resonance_reference(theta):
    """(rounded wavelengths, theta') in fp64 from the frequencies theta (fp64 ndarray); a zero theta gives
    wavelength inf and theta' 0."""
    with np.errstate(divide="ignore"):
        wavelength = np.round(2 * np.pi / theta)
    return wavelength, 2 * np.pi / wavelength


YARN = dict(factor=4.0, original_max_position_embeddings=64, beta_fast=4.0, beta_slow=1.0)
CASES = {  # name: (build kwargs, fp64 reference theta, or None for "the rope_type's own fp32 theta")
    "default": (dict(head_dim=32), rope_theta(32, 1e4)),
    # d = 96: 2i/d is not exact in fp32 (the |ln theta| term of fp32_rtol). Llama's base 5e5 is not a case: some
    # wavelength there lies within the fp32 bound of a half-integer, so fp32 and fp64 theta may round it apart
    "d96": (dict(head_dim=96), rope_theta(96, 1e4)),
    "partial_half": (dict(head_dim=64, partial_rotary_factor=0.5), rope_theta(32, 1e4)),
    "linear": (dict(head_dim=32, rope_type="linear", scaling=dict(factor=4.0)), rope_theta(32, 1e4, 4.0)),
    # static NTK (bloc97): base' = base * factor^(d/(d-2))
    "ntk": (dict(head_dim=32, rope_type="ntk", scaling=dict(factor=4.0)), rope_theta(32, 1e4 * 4.0 ** (32 / 30))),
    "yarn": (dict(head_dim=32, rope_type="yarn", scaling=YARN), None),
    "proportional": (dict(head_dim=32, rope_type="proportional", partial_rotary_factor=0.25), None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_resonance_frequencies_are_the_rounded_wavelengths(case):
    kwargs, theta = CASES[case]
    enc = build("rope_resonance", **kwargs)
    if theta is None:  # YaRN's blend / p-RoPE's zeros: the rope_type's own frequencies are the input
        scaling = kwargs.get("scaling", {})
        extra = {k: kwargs[k] for k in ("partial_rotary_factor",) if k in kwargs}
        theta = frequencies(kwargs["rope_type"], kwargs["head_dim"], 1e4, **scaling, **extra)[0].double().numpy()
        rtol = np.zeros_like(theta)  # the encoding rounds exactly these fp32 values
    else:
        rtol = fp32_rtol(theta)
    want_wavelength, want_theta = resonance_reference(theta)
    # The encoding rounds 2 pi / theta from its fp32 theta, off the fp64 theta by <= rtol relatively: rounding
    # agrees with the reference when lambda lies farther than lambda * rtol from a half-integer. Check that the
    # case is such, so a coincidence fails here, not as a flaky wavelength.
    finite = np.isfinite(want_wavelength)
    lam = 2 * np.pi / theta[finite]
    assert (np.abs(lam - np.floor(lam) - 0.5) > lam * rtol[finite]).all()
    got_wavelength, attention_factor = enc.wavelengths(None)
    assert got_wavelength.tolist() == want_wavelength.tolist()  # integers (and inf), exactly
    # theta' = fl32(2 pi / integer): the one rounding to fp32 is the only error, <= EPS32 relatively
    got = enc.frequencies(None)[0]
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), torch.from_numpy(want_theta), rtol=EPS32, atol=0)
    assert attention_factor == frequencies(enc.rope_type, enc.head_dim, enc.base, **enc.scaling,
                                           partial_rotary_factor=enc.partial_rotary_factor)[1]


@pytest.mark.parametrize("rope_type,scaling", [("default", {}), ("yarn", YARN)])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_resonance_rotation_repeats_exactly_every_rounded_wavelength(rope_type, scaling, layout):
    """R(p + round(lambda_i)) = R(p) for pair i, to the bit in fp32: the table reduces p mod round(lambda_i) (as the
    authors' compute_freqs tiles arange(round(lambda_i))), so both positions get the same phase and the same cos, sin;
    the fp32 rounding that would otherwise grow with the phase (p theta ~ 1e5 rad here) has nothing to act on."""
    D = 32
    enc = build("rope_resonance", head_dim=D, layout=layout, rope_type=rope_type, scaling=scaling, impl="eager")
    wavelengths = enc.wavelengths(None)[0].long().tolist()
    q = _rand(1, 2, 200, D, dtype=torch.float32)
    pos = torch.arange(200) * 523 + 7  # up to ~1e5: plain fp32 RoPE phases would carry errors ~1e-2 rad
    base, _ = enc.rotate(q, q, pos)
    for i, wavelength in enumerate(wavelengths):
        pair = [i, i + D // 2] if layout == "half" else [2 * i, 2 * i + 1]
        shifted, _ = enc.rotate(q, q, pos + wavelength)
        assert torch.equal(shifted[..., pair], base[..., pair]), f"pair {i}, wavelength {wavelength}"
        other = [w for w in wavelengths if w != wavelength]
        if other:  # and it is that pair's period, not every pair's: some other pair moves
            assert not torch.equal(shifted, base)


def test_resonance_fp32_table_error_is_bounded_by_the_phase_not_the_position():
    """The fp32 table against the exact rotation (fp64 of 2 pi (p mod L) / L, L = round(lambda_i)). Phase error
    <= 4 pi EPS32: theta' = fl32(2 pi / L) is off by <= EPS32 relatively, times p mod L < L gives <= 2 pi EPS32, and
    the product's rounding <= |phase| EPS32 < 2 pi EPS32; fp32 cos/sin add <= 2 ulp(1) = 4 EPS32. So
    4 pi EPS32 + 4 EPS32 at every position; plain RoPE's fp32 table (phase p theta) errs ~ p EPS32."""
    enc = build("rope_resonance", head_dim=32)
    pos = torch.tensor([0, 1, 5, 6, 999, 65_537, 1_000_003, 2 ** 24 + 11, 3_000_000_017])
    cos, sin = enc.table(pos, torch.float32)
    assert cos.dtype == torch.float32
    want = [[2 * math.pi * (p % L) / L for L in enc.wavelengths(None)[0].long().tolist()] for p in pos.tolist()]
    want = torch.tensor(want, dtype=torch.float64)  # (P, R/2) exact phases, integer arithmetic then fp64
    bound = 4 * math.pi * EPS32 + 4 * EPS32
    assert (cos.double() - want.cos()).abs().max() <= bound
    assert (sin.double() - want.sin()).abs().max() <= bound
    plain_cos, _ = rotary_table(enc.frequencies(None)[0], pos)  # the same theta', phase not reduced
    assert (plain_cos.double() - want.cos()).abs()[-3:].max() > 100 * bound  # the bound is not vacuous


def test_resonance_wavelength_rounding_to_zero_is_refused_and_to_one_is_the_identity():
    # base 1e-3, d = 4: theta_1 = 1e-3^(-1/2) = 31.6 > 4 pi, lambda = 0.199 rounds to 0: no finite frequency
    with pytest.raises(ValueError, match="rounds to 0"):
        build("rope_resonance", head_dim=4, base=1e-3)
    # base 0.01: theta_1 = 10, lambda = 0.628 rounds to 1, theta' = 2 pi: the identity at every integer position
    enc = build("rope_resonance", head_dim=4, base=0.01, impl="eager")
    assert enc.wavelengths(None)[0].tolist() == [6.0, 1.0]
    q = _rand(1, 1, 50, 4)
    rq, _ = enc.rotate(q, q, torch.arange(50) * 13)
    assert torch.equal(rq[..., [1, 3]], q[..., [1, 3]])  # half layout: pair 1 is features (1, 3)


# ---------------------------------------------------------------------------------------------------------------
# HoPE. Definition (paper abstract: HoPE "replaces the specific components in RoPE with position-independent ones,
# retaining only high-frequency signals"; the split as in harness/encodings/hope.py's docstring, with no author
# code to compare): pair i rotates iff lambda_i = 2 pi / theta_i <= L, the training length; the other features
# are not rotated.

def hope_reference(head_dim, base, train_len):
    """fp64 theta_i of the kept pairs, and all wavelengths."""
    theta = rope_theta(head_dim, base)
    wavelength = 2 * np.pi / theta
    return theta[wavelength <= train_len], wavelength


@pytest.mark.parametrize("head_dim,base,train_len,want_pairs", [
    (32, 1e4, 64, 5), (16, 1e4, 64, 3), (64, 1e4, 64, 9), (32, 500.0, 64, 6), (64, 1e4, 4096, 23),
    (128, 5e5, 256, 19)])
def test_hope_keeps_the_pairs_that_turn_within_the_training_length(head_dim, base, train_len, want_pairs):
    enc = build("hope", head_dim=head_dim, base=base, train_len=train_len)
    theta, wavelength = hope_reference(head_dim, base, train_len)
    assert len(theta) == want_pairs  # λ for d = 32: 6.3, 11.2, 19.9, 35.3, 62.8 | 111.7 ...: 5 kept at L = 64
    assert (np.abs(wavelength - train_len) > 1e-9 * train_len).all()  # no tie: both sides' fp64 agree on the split
    assert enc.rotated_pairs == want_pairs
    got = enc.frequencies(None)[0]
    assert got.shape == (want_pairs,)  # rotated width R = 2n; the other D - 2n features pass through
    torch.testing.assert_close(got.double(), torch.from_numpy(theta), rtol=float(fp32_rtol(theta).max()), atol=0)


def hope_score(q, k, m, n, theta, layout):
    """RoFormer §3.2 on the kept pairs (pair j as the complex number z = x_a + i x_b; (j, j + n_pairs) for half,
    (2j, 2j + 1) interleaved, over the first 2 n_pairs features) plus the plain product of the rest."""
    pairs = len(theta)
    idx = [(j, j + pairs) if layout == "half" else (2 * j, 2 * j + 1) for j in range(pairs)]
    s = 0j
    for j, (a, b) in enumerate(idx):
        s += complex(q[a], q[b]) * complex(k[a], k[b]).conjugate() * cmath.exp(1j * (m - n) * theta[j])
    return s.real + sum(q[f] * k[f] for f in range(2 * pairs, len(q)))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_hope_scores_are_the_closed_form(layout):
    D, T = 16, 10
    enc = build("hope", head_dim=D, train_len=64, layout=layout, impl="eager").double()
    theta, _ = hope_reference(D, 1e4, 64)
    q, k, pos = _rand(1, 1, T, D), _rand(1, 1, T, D, seed=1), torch.arange(T) * 4 + 3
    rq, rk = enc.rotate(q, k, pos)
    got = (rq @ rk.transpose(-1, -2))[0, 0]
    qs, ks, p = q[0, 0].tolist(), k[0, 0].tolist(), pos.tolist()
    want = torch.tensor([[hope_score(qs[i], ks[j], p[i], p[j], theta, layout) for j in range(T)] for i in range(T)],
                        dtype=torch.float64)
    # the encoding's theta is fp32: its phase at position p is off by <= p max_i(theta_i rtol_i) (from
    # fp32_rtol), so each score by <= 2 max(p) that bound sum_j |q_j||k_j| <= 2 max(p) bound |q||k|
    phase = max(p) * float((theta * fp32_rtol(theta)).max())
    atol = 2 * phase * float(q.norm(dim=-1).max() * k.norm(dim=-1).max()) + 1e-12
    torch.testing.assert_close(got, want, rtol=0, atol=atol)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", ["auto", "eager", "reference", "complex"])
def test_hope_position_independent_features_are_exactly_unrotated(layout, impl):
    D = 32
    enc = build("hope", head_dim=D, layout=layout, impl=impl)
    n = enc.rotated_pairs
    q, k = _rand(2, 4, 24, D, dtype=torch.float32), _rand(2, 4, 24, D, seed=1, dtype=torch.float32)
    pos = torch.randint(0, 10 ** 6, (24,), generator=torch.Generator().manual_seed(2))
    rq, rk = enc.rotate(q, k, pos)
    assert torch.equal(rq[..., 2 * n:], q[..., 2 * n:]) and torch.equal(rk[..., 2 * n:], k[..., 2 * n:])
    assert not torch.equal(rq[..., :2 * n], q[..., :2 * n])  # the kept pairs do rotate
    # hence their q.k does not depend on positions at all: with the rotated features zeroed, any two position
    # sets give the same logits to the bit
    q0, k0 = q.clone(), k.clone()
    q0[..., :2 * n], k0[..., :2 * n] = 0, 0
    logits = [attention_logits(*enc.rotate(q0, k0, p), None) for p in (torch.arange(24), pos, pos * 7 + 11)]
    assert torch.equal(logits[0], logits[1]) and torch.equal(logits[0], logits[2])


def test_hope_refuses_a_training_length_no_pair_turns_in():
    with pytest.raises(ValueError, match="rotates no pair.*use the `nope` encoding"):
        build("hope", head_dim=16, train_len=6)  # the fastest pair's wavelength is 2 pi > 6


# ---------------------------------------------------------------------------------------------------------------
# Both: relative scores and KV-cache decoding, in the configurations the registry tests do not build.

VARIANTS = {
    "resonance": dict(name="rope_resonance"),
    "resonance_yarn": dict(name="rope_resonance", rope_type="yarn",
                           scaling=dict(YARN, original_max_position_embeddings=8)),
    "resonance_interleaved_partial": dict(name="rope_resonance", layout="interleaved", partial_rotary_factor=0.5),
    "hope": dict(name="hope"),
    "hope_interleaved_L16": dict(name="hope", layout="interleaved", train_len=16),
}


def _build(variant, **dims):
    kw = dict(VARIANTS[variant])
    return build(kw.pop("name"), **dims, **kw)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_scores_depend_only_on_the_distance(variant):
    # fp64: HoPE is RoPE on its pairs plus a position-free product; Resonance's reduced phase
    # ((m mod L) - (n mod L)) theta' differs from (m - n) theta' by a multiple of L theta' = 2 pi (1 + O(1e-16))
    enc = _build(variant, head_dim=16).double()
    q, k, T = _rand(2, 4, 48, 16), _rand(2, 4, 48, 16, seed=1), 48
    base = attention_logits(*enc.rotate(q, k, torch.arange(T)), None)
    for offset in (1, 37, 1000, 4000, 10 ** 7 + 3):
        shifted = attention_logits(*enc.rotate(q, k, torch.arange(T) + offset), None)
        torch.testing.assert_close(shifted, base, rtol=1e-9, atol=1e-9, msg=f"{variant} offset {offset}")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_decoding_with_the_kv_cache_equals_the_full_forward(variant):
    # as tests/test_decode.py: a prefill of 13, then one token at a time, against one full forward (fp32)
    H, D, T, T0 = 4, 16, 40, 13
    torch.manual_seed(0)
    enc = _build(variant, d_model=H * D, n_heads=H, head_dim=D)
    net = Transformer(encoding=enc, n_layers=2, attention_impl="sdpa", d_model=H * D, n_heads=H, head_dim=D).eval()
    idx = torch.randint(0, 256, (2, T), generator=torch.Generator().manual_seed(1))
    cache, out, at = decode.KVCache(2), [], 0
    with torch.no_grad():
        full = net(idx)
        for n in [T0] + [1] * (T - T0):
            out.append(decode.step(net, idx[:, at:at + n], cache))
            at += n
    torch.testing.assert_close(torch.cat(out, 1), full, atol=2e-6, rtol=0)  # tests/test_decode.py's TOL
