"""Encodings that replace softmax (Encoding.normalize) against their authors' public code, re-derived here
(neither package installs on a CPU machine: both ship CUDA/Triton kernels).

sigmoid_alibi: apple/ml-sigmoid-attention, attention_simulator/src/attention_simulator/layers/attention.py
(Attention.forward: q * scale @ k^T, the ALiBi transform, the causal mask, + attn_bias, torch.sigmoid, @ v) with
position_embedding.py (alibi: slopes * (j - i); _get_slopes) and activations.py (unnormalized_sigmoid_attention).
stick_breaking: shawntan/stickbreaking-attention, stickbreaking_attention/sb_ref.py (stickbreaking) and
tests/test_attn.py (ref_fwd: cum_weight = ones.tril(-1), mask = ones.triu(0) for attend_current=False, then
o + rem * v).
"""
import math

import pytest
import torch
import torch.nn.functional as F

from harness.encodings.sigmoid_alibi import SigmoidAlibi
from harness.encodings.stick_breaking import StickBreaking
from harness.attention import attention_logits


def qkv(B=2, H=4, T=12, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=g, dtype=torch.float64) for _ in range(3)]


def apple_slopes(n):
    """position_embedding.py _get_slopes, as written there."""
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + apple_slopes(2 * closest)[0::2][: n - closest]


def apple_sigmoid_attention(q, k, v, attn_bias):
    """attention.py Attention.forward for an ALiBiAttention with unnormalized_sigmoid_attention."""
    B, H, T, D = q.shape
    attn = (q * D ** -0.5) @ k.transpose(-2, -1)
    position = torch.arange(T)
    relative = (position[None, :] - position[:, None]).to(q.dtype)  # j - i
    attn = attn + torch.tensor(apple_slopes(H), dtype=q.dtype)[None, :, None, None] * relative
    attn = attn.masked_fill(~torch.ones(T, T).tril().bool(), float("-inf"))
    weights = torch.sigmoid(attn + attn_bias)
    return weights @ v, weights


@pytest.mark.parametrize("heads", [4, 6])  # 6: the non-power-of-two slope set
def test_sigmoid_alibi_matches_the_authors_attention_layer(heads):
    q, k, v = qkv(H=heads)
    enc = SigmoidAlibi(n_heads=heads, train_len=8192).double()
    pos = torch.arange(q.shape[2])
    weights = enc.normalize(attention_logits(q, k, enc.bias(q, pos, pos)))
    want_y, want_w = apple_sigmoid_attention(q, k, v, attn_bias=-math.log(8192))  # the config's "-ln(8192)"
    torch.testing.assert_close(weights, want_w, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(weights @ v, want_y, rtol=1e-12, atol=1e-14)


def test_sigmoid_alibi_offset_is_minus_log_train_len():
    """A zero score at distance 0 gets σ(-log n) = 1 / (n + 1): a row of n such keys sums to about 1."""
    enc = SigmoidAlibi(n_heads=2, train_len=64)
    assert enc.normalize(torch.zeros(1, 1, 1, 1)).item() == pytest.approx(1 / 65, rel=1e-6)
    with pytest.raises(ValueError, match="train_len must be a number of positions >= 1"):
        SigmoidAlibi(n_heads=2, train_len=0)


def authors_stickbreaking(q, k, v):
    """sb_ref.py stickbreaking + tests/test_attn.py ref_fwd with attend_current=False, in float64."""
    T = q.shape[2]
    cum_weight = torch.ones(T, T).tril(-1).to(q)
    mask = torch.ones(T, T).triu(0).bool()
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    log_z = F.logsigmoid(logits).masked_fill(mask, -1e5)
    log_beta = F.logsigmoid(-logits).masked_fill(mask, 0)
    re_cum_log_beta = torch.einsum("bhij,jk->bhik", log_beta, cum_weight)
    att = (log_z + re_cum_log_beta).exp()
    o, rem = att @ v, 1 - att.sum(dim=-1)
    return o + rem[..., None] * v


def test_stick_breaking_matches_the_authors_reference():
    q, k, v = (t.requires_grad_() for t in qkv(T=16))
    weights = StickBreaking().normalize(attention_logits(q, k, None))
    ours, want = weights.double() @ v, authors_stickbreaking(q, k, v)
    torch.testing.assert_close(ours, want, rtol=1e-5, atol=1e-6)
    up = torch.randn(ours.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for a, b in zip(torch.autograd.grad(ours, (q, k, v), up), torch.autograd.grad(want, (q, k, v), up)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # the backward too (training runs through it)
    weights = weights.detach()
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), rtol=0, atol=1e-6)
    assert (weights.triu(1) == 0).all()


def test_stick_breaking_closed_form_at_three_keys():
    """Query 2: A_21 = σ(z21), A_20 = σ(z20)(1 - σ(z21)), own key the rest (ordering is the only position)."""
    z = torch.tensor([[1.0, float("-inf"), float("-inf")], [0.3, -0.5, float("-inf")], [-1.2, 0.7, 2.0]])
    w = StickBreaking().normalize(z[None, None])[0, 0, 2]
    s = torch.sigmoid
    a21, a20 = s(torch.tensor(0.7)), s(torch.tensor(-1.2)) * (1 - s(torch.tensor(0.7)))
    torch.testing.assert_close(w, torch.stack([a20, a21, 1 - a20 - a21]), rtol=1e-6, atol=1e-7)
