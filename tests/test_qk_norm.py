"""model.qk_norm against HF transformers' own modules (Qwen3's q_norm/k_norm before the rotation, Llama 4's
weightless L2 norm after it), then registry-driven: every encoding trains with either, and bad input is refused."""
import pytest
import torch
from transformers.models.llama4.modeling_llama4 import Llama4TextL2Norm
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb

from harness import encodings
from harness.config import ModelConfig, QK_NORMS, encoding_params, from_dict
from harness.encodings import ENCODINGS
from harness.model import Block, Transformer, from_config

D, H, T, BASE = 32, 2, 12, 10000.0


def hf_rope(x, pos):
    """HF's default RoPE on x (B, H, T, D), half layout: inv_freq = base^(-2i/D) (modeling_rope_utils
    _compute_default_rope_parameters), cos/sin of cat(freqs, freqs) (Qwen3RotaryEmbedding), then
    models/qwen3/modeling_qwen3.py apply_rotary_pos_emb."""
    inv_freq = 1.0 / BASE ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
    emb = torch.cat([pos[:, None].float() * inv_freq] * 2, dim=-1)[None]  # (1, T, D)
    out, _ = apply_rotary_pos_emb(x, x, emb.cos(), emb.sin())
    return out


def block_and_heads(kind, seed=0):
    torch.manual_seed(seed)
    block = Block(H * D, H, D, "softmax", 2, qk_norm=kind)
    for p in block.parameters():  # gains away from 1, so a missing or misplaced gain shows
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(2, T, H * D)
    return block, x, block.heads(x)


def test_rms_is_qwen3_q_norm_and_k_norm_before_the_rotation():
    block, x, (q, k, _) = block_and_heads("rms")
    rope, pos = encodings.build("rope", head_dim=D, base=BASE, impl="eager"), torch.arange(T)
    _, got_q, got_k, _, _ = block.observed(x, rope, pos)
    for raw, gain, got in ((q, block.qk_norm.q_gain, got_q), (k, block.qk_norm.k_gain, got_k)):
        norm = Qwen3RMSNorm(D, eps=1e-6)  # Qwen3Config.rms_norm_eps default
        norm.weight.data.copy_(gain.data)
        # Qwen3Attention.forward: q_norm on (B, T, H, D) before the transpose and the rotation
        ref = hf_rope(norm(raw.transpose(1, 2)).transpose(1, 2), pos)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_l2_is_llama4_weightless_norm_after_the_rotation():
    block, x, (q, k, _) = block_and_heads("l2")
    assert not list(block.qk_norm.parameters())  # weightless
    rope, pos = encodings.build("rope", head_dim=D, base=BASE, impl="eager"), torch.arange(T)
    _, got_q, got_k, _, _ = block.observed(x, rope, pos)
    norm = Llama4TextL2Norm(eps=1e-5)  # Llama4TextConfig.rms_norm_eps default
    torch.testing.assert_close(got_q, norm(hf_rope(q, pos)), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_k, norm(hf_rope(k, pos)), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(ENCODINGS))
@pytest.mark.parametrize("kind", [k for k in QK_NORMS if k != "none"])
def test_every_encoding_trains_with_qk_norm(name, kind):
    """l2 leaves every head's q and k with RMS 1 whatever the encoding did; rms gets gradients to its gains."""
    torch.manual_seed(0)
    # 2 layers: the per-layer policies' default cycles need that many (their constructors refuse fewer)
    cfg = ModelConfig(n_layers=2, d_model=H * D, n_heads=H, qk_norm=kind)
    net = from_config(cfg, {"name": name})
    idx = torch.randint(0, 256, (2, T))
    loss = torch.nn.functional.cross_entropy(net(idx).flatten(0, 1), idx.flatten())
    loss.backward()
    assert torch.isfinite(loss)
    block, pos = net.blocks[0], torch.arange(T)
    _, q, k, _, _ = block.observed(net.encoding.embed(net.tok(idx), pos), net.encoding, pos)
    net.encoding.end_forward()
    if kind == "l2":
        for t in (q, k):
            # mean square ms / (ms + eps) with eps 1e-5: within 5e-3 of 1 for ms >= 2e-3 (untrained q, k: ~0.03)
            torch.testing.assert_close(t.pow(2).mean(-1), torch.ones(t.shape[:-1]), atol=5e-3, rtol=0)
    else:
        assert block.qk_norm.q_gain.grad.abs().sum() > 0 and block.qk_norm.k_gain.grad.abs().sum() > 0


def test_bad_qk_norm_is_one_clear_line():
    with pytest.raises(ValueError, match=r"model.qk_norm 'layer'; expected one of \['none', 'rms', 'l2'\]"):
        ModelConfig(qk_norm="layer")
    with pytest.raises(ValueError, match="needs model.attention=softmax"):
        ModelConfig(qk_norm="rms", attention="linear")
    with pytest.raises(ValueError, match="needs attention=softmax"):
        Transformer(encoding=encodings.build("rope", head_dim=16), d_model=32, n_heads=2, attention="linear",
                    qk_norm="l2")


def test_rows_and_labels_carry_qk_norm_only_when_set():
    base = {"encoding": {"name": "rope", "base": 100.0}}
    assert encoding_params(from_dict(base)) == {"base": 100.0}
    assert encoding_params(from_dict({**base, "model": {"qk_norm": "rms"}})) == {"base": 100.0, "qk_norm": "rms"}
