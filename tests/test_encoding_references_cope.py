"""CoPE against the authors' attention layer, re-derived here: facebookresearch/RAM,
projects/cope/src/cope/context_position.py, ContextPosSelfAttn.forward with its argument defaults
(cope_sep_key, cope_val_gates, cope_nodiv False; pos_emb "cope", no relative term; attn_mask a 0/1 causal matrix,
added to the logits as its log), query/key/val of shape (B x L x H) with heads folded into the batch."""
import math

import torch

from harness.encodings.cope import CoPE
from harness.attention import softmax_attention


def authors_cope(query, key, val, pos_emb, npos):
    """ContextPosSelfAttn.forward (defaults), dropout off; pos_emb (1, head_dim, npos)."""
    B, L, H = key.size()
    attn_mask = torch.ones(L, L, dtype=query.dtype).tril()[None].expand(B, L, L)
    gate_logits = torch.bmm(query, key.transpose(-1, -2))
    gates = torch.sigmoid(gate_logits / math.sqrt(H))
    gates = gates * attn_mask
    positions = gates.flip(-1).cumsum(dim=-1).flip(-1).clamp(max=npos - 1)
    pos_logits_fixed = torch.matmul(query, pos_emb)
    positions_ceil, positions_floor = positions.ceil().long(), positions.floor().long()
    pos_logits_ceil = pos_logits_fixed.gather(-1, positions_ceil)
    pos_logits_floor = pos_logits_fixed.gather(-1, positions_floor)
    pos_ceil_weight = positions - positions_floor
    pos_logits = pos_logits_ceil * pos_ceil_weight + pos_logits_floor * (1 - pos_ceil_weight)
    attn_logits = gate_logits + pos_logits
    attn_logits = attn_logits / math.sqrt(H)
    attn_logits = attn_logits + attn_mask.log()
    return torch.bmm(torch.softmax(attn_logits, dim=-1), val)


def test_cope_matches_the_authors_attention_layer():
    g = torch.Generator().manual_seed(0)
    B, H, T, D, npos = 2, 3, 20, 8, 9  # npos < T: counts past 8 are clamped, as the reference clamps them
    q, k, v = (torch.randn(B, H, T, D, generator=g, dtype=torch.float64).requires_grad_() for _ in range(3))
    enc = CoPE(head_dim=D, npos=npos).double()
    with torch.no_grad():
        enc.pos_emb.copy_(torch.randn(D, npos, generator=g, dtype=torch.float64))
    pos = torch.arange(T)
    ours = softmax_attention(q, k, v, enc.scores_bias(q, k, pos, pos, None))
    fold = lambda t: t.reshape(B * H, T, D)  # noqa: E731  (heads into the batch, as their bmm takes them)
    want = authors_cope(fold(q), fold(k), fold(v), enc.pos_emb[None], npos).reshape(B, H, T, D)
    torch.testing.assert_close(ours, want, rtol=1e-10, atol=1e-12)
    up = torch.randn(ours.shape, generator=g, dtype=torch.float64)
    inputs = (q, k, v, enc.pos_emb)
    for a, b in zip(torch.autograd.grad(ours, inputs, up), torch.autograd.grad(want, inputs, up)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)  # the backward too (training runs through it)


def test_cope_counts_content_not_distance():
    """Shifting every position changes nothing (no absolute position enters), but two pairs at the same
    distance get different biases when the gated keys between them differ: CoPE is not a function of i - j."""
    g = torch.Generator().manual_seed(1)
    q, k = (torch.randn(1, 1, 12, 8, generator=g, dtype=torch.float64) for _ in range(2))
    enc = CoPE(head_dim=8, train_len=16).double()
    with torch.no_grad():
        enc.pos_emb.copy_(torch.randn(8, 17, generator=g, dtype=torch.float64))
    pos = torch.arange(12)
    b = enc.scores_bias(q, k, pos, pos, None)
    torch.testing.assert_close(enc.scores_bias(q, k, pos + 1000, pos + 1000, None), b, rtol=0, atol=0)
    same_distance = torch.stack([b[0, 0, i, i - 3] for i in range(3, 12)])
    assert same_distance.std() > 1e-3  # a relative (i - j) bias would make these equal
    assert enc.npos == 17  # train_len + 1, the authors' block size + 1
