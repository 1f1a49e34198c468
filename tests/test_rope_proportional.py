"""p-RoPE (`rope_type: proportional`) against HF transformers and against its own definition.

Barbero et al., ICLR 2025, "Round and Round We Go! What makes Rotary Positional Encodings useful?" (arXiv
2410.06205), §6: rotate only the highest p fraction of the frequencies, leave the lowest unrotated.
HF: `_compute_proportional_rope_parameters` in transformers/modeling_rope_utils.py (ROPE_INIT_FUNCTIONS
["proportional"]), applied by Gemma 4's global layers in transformers/models/gemma4/modeling_gemma4.py
(`Gemma4TextRotaryEmbedding.forward`: cos/sin of cat(freqs, freqs); `apply_rotary_pos_emb`: rotate-half).
The registry tests (tests/test_encodings.py) build each encoding from its YAML defaults only, so the relative
and norm properties of this rope_type are checked here.
"""
import os

if os.environ.get("HARNESS_TEST_DEVICE", "cpu") == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton (as tests/test_rope_kernels.py)

import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig  # noqa: E402
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding  # noqa: E402
from transformers.models.gemma4.modeling_gemma4 import apply_rotary_pos_emb as gemma4_apply  # noqa: E402

from harness.config import to_config  # noqa: E402
from harness.encodings import build  # noqa: E402
from harness.model import from_config  # noqa: E402
from harness.attention import attention_logits
from harness.rope import IMPLS, frequencies  # noqa: E402
from harness.rope import cpu as cpu_kernel  # noqa: E402

pytestmark = pytest.mark.gpu  # make test-gpu runs this file on a lent GPU (HARNESS_TEST_DEVICE=cuda)

CONF = os.path.join(os.path.dirname(__file__), "..", "conf")
# Positions past fp32's exact phase range too (both sides compute pos.float() * inv_freq in fp32).
POS = torch.tensor([0, 1, 2, 3, 50, 1000, 4095, 65535])


def _impl_param(name):
    """Every impl the dispatch offers, run on CPU; the ones that cannot run here skip with the reason."""
    if name == "cpu" and cpu_kernel.unavailable():
        return pytest.param(name, marks=pytest.mark.skip(reason=f"C kernel: {cpu_kernel.unavailable()}"))
    if name == "triton" and (importlib.util.find_spec("triton") is None
                             or os.environ.get("TRITON_INTERPRET") != "1"):
        return pytest.param(name, marks=pytest.mark.skip(reason="triton on CPU needs TRITON_INTERPRET=1 and triton"))
    return name


IMPL_PARAMS = [_impl_param(n) for n in IMPLS]


def _rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _hf_inv_freq(head_dim, p, theta, **extra):
    """HF's inv_freq (head_dim/2,) from a bare config holding rope_parameters, as HF's own rope tests do."""
    rp = {"rope_type": "proportional", "rope_theta": theta, "partial_rotary_factor": p, **extra}
    cfg = PretrainedConfig(head_dim=head_dim, hidden_size=4 * head_dim, num_attention_heads=4, rope_parameters=rp)
    inv_freq, att = ROPE_INIT_FUNCTIONS["proportional"](cfg, "cpu")
    assert att == 1.0
    return inv_freq


def _gemma4_rotate(x, pos, head_dim, p, theta):
    """Gemma 4's global-layer path on x (B, H, T, D): its rotary embedding, then its apply on (B, T, H, D)."""
    cfg = Gemma4TextConfig(vocab_size=16, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=32, global_head_dim=head_dim,
                           layer_types=["sliding_attention", "full_attention"],
                           rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                            "full_attention": {"rope_type": "proportional", "rope_theta": theta,
                                                               "partial_rotary_factor": p}})
    cos, sin = Gemma4TextRotaryEmbedding(cfg)(x, pos[None], "full_attention")  # (1, T, D) each
    return gemma4_apply(x.transpose(1, 2), cos, sin, unsqueeze_dim=2).transpose(1, 2)


def _rope(p, theta=1e6, head_dim=64, **kw):
    return build("rope", head_dim=head_dim, base=theta, rope_type="proportional", partial_rotary_factor=p, **kw)


@pytest.mark.parametrize("head_dim", [64, 256])
@pytest.mark.parametrize("p", [0.25, 0.3, 0.5, 1.0])  # D=64, p=0.3: p*D/2 = 9.6 -> HF's int(p*D//2) = 9 angles
@pytest.mark.parametrize("theta", [1e4, 1e6])
def test_inv_freq_equals_hf(head_dim, p, theta):
    ours, att = frequencies("proportional", head_dim, theta, partial_rotary_factor=p)
    ref = _hf_inv_freq(head_dim, p, theta)
    torch.testing.assert_close(ours, ref, rtol=0, atol=0)  # the same float32 arithmetic: bit-equal
    assert att == 1.0 and ours.shape == (head_dim // 2,)  # full size: the whole head is paired
    assert int((ours > 0).sum()) == int(p * head_dim // 2)  # the rest is zero: identity pairs


def test_factor_divides_like_hf():
    # HF reads rope_parameters["factor"] (default 1.0) and divides inv_freq by it: PI on the rotated part
    ours = frequencies("proportional", 256, 1e6, partial_rotary_factor=0.25, factor=4.0)[0]
    torch.testing.assert_close(ours, _hf_inv_freq(256, 0.25, 1e6, factor=4.0), rtol=0, atol=0)
    assert not torch.equal(ours, frequencies("proportional", 256, 1e6, partial_rotary_factor=0.25)[0])


@pytest.mark.parametrize("impl", IMPL_PARAMS)
@pytest.mark.parametrize("head_dim,p,theta", [(256, 0.25, 1e6), (64, 0.3, 1e4), (64, 1.0, 1e4)])
def test_rotate_equals_gemma4(impl, head_dim, p, theta):
    q, k = _rand(2, 3, len(POS), head_dim), _rand(2, 1, len(POS), head_dim, seed=1)  # GQA: one k head
    rq, rk = _rope(p, theta, head_dim, impl=impl).rotate(q, k, POS)
    torch.testing.assert_close(rq, _gemma4_rotate(q, POS, head_dim, p, theta), rtol=0, atol=1e-6)
    torch.testing.assert_close(rk, _gemma4_rotate(k, POS, head_dim, p, theta), rtol=0, atol=1e-6)
    # the unrotated (lowest-frequency) pairs j >= n, dims [n, D/2) and [D/2 + n, D), pass through exactly
    n, h = int(p * head_dim // 2), head_dim // 2
    keep = torch.cat((torch.arange(n, h), torch.arange(h + n, head_dim)))
    assert torch.equal(rq[..., keep], q[..., keep]) and torch.equal(rk[..., keep], k[..., keep])


@pytest.mark.parametrize("impl", ["eager", "cpu"])
def test_interleaved_is_half_with_dims_relabelled(impl):
    # The paper states p-RoPE per frequency, in RoFormer's pairwise (interleaved) form; `half` is the same map
    # on the head dims permuted (interleaved pair (2j, 2j+1) -> half pair (j, j + D/2)). Since W_q and W_k are
    # learned, both layouts give the same model family; only `half` loads Gemma 4's weights unchanged.
    if impl == "cpu" and cpu_kernel.unavailable():
        pytest.skip(f"C kernel: {cpu_kernel.unavailable()}")
    D = 64
    perm = torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))  # interleaved index of half dim i
    q, k = _rand(1, 2, len(POS), D), _rand(1, 2, len(POS), D, seed=1)
    rq, rk = _rope(0.25, layout="interleaved", impl=impl).rotate(q, k, POS)
    hq, hk = _rope(0.25, layout="half", impl=impl).rotate(q[..., perm], k[..., perm], POS)
    torch.testing.assert_close(rq[..., perm], hq, rtol=0, atol=1e-6)
    torch.testing.assert_close(rk[..., perm], hk, rtol=0, atol=1e-6)


@pytest.mark.parametrize("theta", [1e4, 1e6])
def test_p1_equals_default(theta):
    ours = frequencies("proportional", 128, theta, partial_rotary_factor=1.0)[0]
    torch.testing.assert_close(ours, frequencies("default", 128, theta)[0], rtol=0, atol=0)
    q, k = _rand(1, 2, len(POS), 128), _rand(1, 2, len(POS), 128, seed=1)
    plain = build("rope", head_dim=128, base=theta, impl="eager").rotate(q, k, POS)
    for got, ref in zip(_rope(1.0, theta, 128, impl="eager").rotate(q, k, POS), plain):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


@pytest.mark.parametrize("p", [0.25, 0.5])
def test_differs_from_partial_rotary_default(p):
    # default + partial_rotary_factor re-spaces R/2 frequencies over R = p*D and rotates dims [0, R);
    # p-RoPE keeps the first p*D/2 frequencies of the full head and rotates pairs (j, j + D/2)
    prop = frequencies("proportional", 64, 1e4, partial_rotary_factor=p)[0]
    part = frequencies("default", 64, 1e4, partial_rotary_factor=p)[0]
    n = len(part)
    assert len(prop) == 32 and (prop[:n] - part).abs().max() > 1e-3
    q, k = _rand(1, 2, len(POS), 64), _rand(1, 2, len(POS), 64, seed=1)
    a = _rope(p, 1e4, impl="eager").rotate(q, k, POS)[0]
    b = build("rope", head_dim=64, base=1e4, partial_rotary_factor=p, impl="eager").rotate(q, k, POS)[0]
    assert (a - b).abs().max() > 1e-2


def test_relative_and_norm_preserving():
    # what tests/test_encodings.py checks from the YAML defaults (rope_type default), for this rope_type
    enc = _rope(0.25).double()
    T = 48
    q, k = _rand(2, 4, T, 64, dtype=torch.float64), _rand(2, 4, T, 64, seed=1, dtype=torch.float64)
    base = attention_logits(*enc.rotate(q, k, torch.arange(T)), None)  # (B, H, T, T)
    for offset in (1, 37, 1000, 4000):
        shifted = attention_logits(*enc.rotate(q, k, torch.arange(T) + offset), None)
        torch.testing.assert_close(shifted, base, rtol=1e-9, atol=1e-9, msg=f"offset {offset}")
    rq, _ = enc.rotate(q, k, torch.arange(T) * 97)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(rq, q)  # and it does rotate


def test_composes_through_hydra_and_trains_a_forward():
    over = ["encoding=rope", "encoding.rope_type=proportional", "encoding.partial_rotary_factor=0.25"]
    with initialize_config_dir(config_dir=os.path.abspath(CONF), version_base="1.3"):
        cfg = to_config(compose("config", overrides=over))
    model = from_config(cfg.model, cfg.encoding)
    assert model.encoding.rope_type == "proportional"
    out = model(torch.randint(0, 256, (2, 24)))
    assert out.shape == (2, 24, 256) and torch.isfinite(out).all()


@pytest.mark.parametrize("kw,match", [
    (dict(partial_rotary_factor=0.0), r"^partial_rotary_factor must be in \(0, 1\], got 0\.0$"),
    (dict(partial_rotary_factor=1.5), r"^partial_rotary_factor must be in \(0, 1\], got 1\.5$"),
    (dict(partial_rotary_factor=0.01), r"^proportional RoPE rotates no pair: .*use the `nope` encoding"),
    (dict(partial_rotary_factor=0.25, scaling=dict(factor=0.5)), r"^rope scaling factor must be >= 1, got 0\.5$"),
    (dict(partial_rotary_factor=0.25, scaling=dict(beta_fast=8)), r"^rope_type 'proportional' does not take"),
])
def test_bad_knobs_fail_at_build_in_one_line(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        build("rope", head_dim=64, rope_type="proportional", **kw)
    assert "\n" not in str(e.value)
