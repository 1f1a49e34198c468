"""Per-layer policies (harness/encodings/_layered.py): irope against HF transformers' own Llama 4 attention
module, sliding windows against HF's mask rule, each block using its own layer's encoding, and bad input."""
import pytest
import torch
from transformers.models.llama4.configuration_llama4 import Llama4TextConfig
from transformers.models.llama4.modeling_llama4 import Llama4TextAttention, Llama4TextRotaryEmbedding

from harness.encodings import ENCODINGS, build
from harness.encodings._layered import PerLayer
from harness.model import Transformer
from harness.attention import attention_logits, softmax_attention

H, D, T = 2, 16, 40


def llama4(layer_idx, floor_scale, attn_scale=0.1):
    """HF's Llama4TextAttention (eager) with nope every 2nd layer, QK-norm and temperature tuning on."""
    cfg = Llama4TextConfig(hidden_size=H * D, num_attention_heads=H, num_key_value_heads=H, head_dim=D,
                           rope_theta=500000.0, no_rope_layers=[1, 0], use_qk_norm=True, rms_norm_eps=1e-5,
                           attn_temperature_tuning=True, floor_scale=floor_scale, attn_scale=attn_scale,
                           num_hidden_layers=2, attention_chunk_size=None)
    cfg._attn_implementation = "eager"
    torch.manual_seed(layer_idx)
    return cfg, Llama4TextAttention(cfg, layer_idx).eval()


@pytest.mark.parametrize("layer", [0, 1])  # layer 0 RoPE + QK-norm, layer 1 NoPE + temperature
def test_irope_layers_are_llama4_attention(layer):
    floor_scale = 8  # small, so the temperature acts within T = 40 positions (1 below 7, up to 1.16 at 39)
    cfg, attn = llama4(layer, floor_scale)
    x = torch.randn(1, T, H * D)
    pos = torch.arange(T)
    mask = torch.zeros(T, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))[None, None]
    with torch.no_grad():
        ref, _ = attn(x, Llama4TextRotaryEmbedding(cfg)(x, pos[None]), mask)
        enc = build("irope", head_dim=D, nope_every=2, floor_scale=floor_scale, attn_scale=0.1, impl="eager")
        heads = [p(x).view(1, T, H, D).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
        e = enc.at(layer)
        q, k = e.rotate(heads[0], heads[1], pos)
        ours = attn.o_proj(softmax_attention(q, k, heads[2], e.bias(q, pos, pos)).transpose(1, 2).reshape(1, T, -1))
    torch.testing.assert_close(ours, ref, atol=2e-6, rtol=1e-5)


def test_the_temperature_and_the_norm_each_matter():
    """The test above can fail: without the temperature (attn_scale 0) or the QK-norm, HF and ours part."""
    q = torch.randn(1, H, T, D)
    plain = build("irope", head_dim=D, floor_scale=8, attn_scale=0.0).at(1).rotate(q, q, torch.arange(T))[0]
    warm = build("irope", head_dim=D, floor_scale=8).at(1).rotate(q, q, torch.arange(T))[0]
    assert torch.equal(plain, q) and not torch.allclose(warm[..., 7:, :], q[..., 7:, :])
    assert torch.equal(warm[..., :6, :], q[..., :6, :])  # factor 1 below floor_scale - 1
    normed = build("irope", head_dim=D).at(0).rotate(q, q, torch.arange(T))[0]
    unnormed = build("irope", head_dim=D, rope_qk_norm=False).at(0).rotate(q, q, torch.arange(T))[0]
    torch.testing.assert_close(normed.pow(2).mean(-1), torch.ones(1, H, T), atol=1e-4, rtol=0)
    assert not torch.allclose(unnormed.pow(2).mean(-1), torch.ones(1, H, T), atol=1e-2)


@pytest.mark.parametrize("name", ["rnope_swa", "local_global"])
def test_sliding_window_is_hf_rule_on_the_local_layers_only(name):
    """Local layers: key j visible iff i - window < j <= i (transformers masking_utils.sliding_window_overlay:
    kv_idx > q_idx - sliding_window); the global layer sees every j <= i."""
    window = 5
    enc = build(name, head_dim=D, window=window)
    q = torch.randn(1, H, T, D)
    pos = torch.arange(T)
    i, j = pos[:, None], pos[None, :]
    for layer, want in ((0, (j <= i) & (j > i - window)), (1, j <= i)):
        e = enc.at(layer)
        rq, rk = e.rotate(q, q, pos)
        seen = torch.isfinite(attention_logits(rq, rk, e.bias(rq, pos, pos)))
        assert torch.equal(seen, want.expand_as(seen)), (name, layer)


def test_each_block_uses_its_own_layer():
    """A model's block i runs enc.at(i): with the window on layer 0 only, the model differs from plain rope
    exactly through block 0 (nope in block 1 is checked by swapping the cycle)."""
    enc = build("rnope_swa", head_dim=D, window=4, rope_layers=1)
    net = Transformer(encoding=enc, n_layers=3, d_model=H * D, n_heads=H)
    assert [net.blocks[i].layer for i in range(3)] == [0, 1, 2]
    assert [type(enc.at(i)).__name__ for i in range(3)] == ["Windowed", "NoPE", "Windowed"]
    x = torch.randn(1, T, H * D)
    pos = torch.arange(T)
    for block in net.blocks:  # the logits the block forms are its own layer's
        got = torch.isfinite(block.logits(x, enc, pos))
        e = enc.at(block.layer)
        q, k, _ = block.heads(x)
        rq, rk = e.rotate(q, k, pos)
        assert torch.equal(got, torch.isfinite(attention_logits(rq, rk, e.bias(rq, pos, pos))))


BAD = [
    ("rnope_swa", dict(window=0), "window must be an integer >= 1"),
    ("rnope_swa", dict(window=2.5), "window must be an integer >= 1"),
    ("rnope_swa", dict(rope_layers=0), "rope_layers must be an integer >= 1"),
    ("local_global", dict(local_layers=0), "local_layers must be an integer >= 1"),
    ("local_global", dict(global_rope_type="proportional", global_partial_rotary_factor=1.5),
     "partial_rotary_factor"),
    ("irope", dict(nope_every=1), "nope_every must be an integer >= 2"),
    ("irope", dict(floor_scale=0), "floor_scale > 0"),
]


@pytest.mark.parametrize("name,params,words", BAD, ids=[f"{n}-{p}" for n, p, _ in BAD])
def test_bad_policy_knobs_are_one_line_at_build(name, params, words):
    with pytest.raises(ValueError, match=words) as e:
        build(name, head_dim=D, **params)
    assert "\n" not in str(e.value)


def test_a_policy_cannot_hold_an_embedding_encoding():
    from harness.encodings._layered import Layered
    with pytest.raises(ValueError, match="token embeddings, which every layer shares"):
        Layered([build("rope", head_dim=D), build("learned", d_model=H * D)])


def test_linear_attention_refuses_a_windowed_policy():
    with pytest.raises(ValueError, match="linear attention cannot take"):
        Transformer(encoding=build("rnope_swa", head_dim=D), d_model=H * D, n_heads=H, attention="linear")


PER_LAYER = sorted(n for n, c in ENCODINGS.items() if issubclass(c, PerLayer))  # fox, rope_mixed, comrope, ...


@pytest.mark.parametrize("name", PER_LAYER)
def test_per_layer_encodings_own_distinct_parameters_and_refuse_a_deeper_model(name):
    torch.manual_seed(0)
    enc = build(name, d_model=64, n_heads=4, head_dim=16, n_layers=3)
    assert enc.period == 3 and [enc.at(i).period for i in range(3)] == [3, 1, 1]
    own = [{id(p) for p in enc.at(i).parameters(recurse=False)} | {id(p) for m in enc.at(i).children()
                                                                  if not isinstance(m, torch.nn.ModuleList)
                                                                  for p in m.parameters()} for i in range(3)]
    assert all(own) and not (own[0] & own[1]) and not (own[1] & own[2]) and not (own[0] & own[2])
    first = [next(iter(enc.at(i).state_dict().values())) for i in range(3)]  # each layer's own random init
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])
    Transformer(encoding=enc, n_layers=3, d_model=64, n_heads=4)
    with pytest.raises(ValueError, match="parameters for 3 layers"):
        Transformer(encoding=enc, n_layers=4, d_model=64, n_heads=4)
