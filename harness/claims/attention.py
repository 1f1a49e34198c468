"""Attention probabilities of a trained softmax model, recomputed outside the model (model.py has no hook
for them): each block's q/k projection, the encoding's rotate and bias hooks, the causal softmax,
exactly as Block.forward computes them before SDPA."""
import math

import torch


@torch.no_grad()
def probabilities(model, idx, pos=None):
    """[(B, H, T, T)] per layer for tokens idx (B, T) at positions pos (T,) (default 0..T-1)."""
    B, T = idx.shape
    pos = torch.arange(T, device=idx.device) if pos is None else pos
    enc = model.encoding
    x = enc.embed(model.tok(idx), pos)  # (B, T, C)
    causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
    out = []
    for block in model.blocks:
        if block.attention != "softmax":
            raise ValueError(f"attention probabilities need attention 'softmax', got {block.attention!r}")
        qkv = block.qkv(block.ln1(x)).view(B, T, 3, block.n_heads, block.head_dim)
        q, k, _ = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, D)
        q, k = enc.rotate(q, k, pos)
        scores = q @ k.transpose(-1, -2) / math.sqrt(block.head_dim)  # (B, H, T, T), SDPA's scale
        bias = enc.bias(q, pos, pos)
        if bias is not None:
            scores = scores + bias
        out.append(scores.masked_fill(~causal, float("-inf")).softmax(-1))
        x = block(x, enc, pos)
    return out


def locality(probs, skip=8):
    """Mean attention distance E_p[i - j] of each query i >= skip, divided by i / 2 (the uniform causal
    value), averaged over queries, heads, batch and layers: < 1 is local, 1 flat. probs: [(B, H, T, T)]."""
    T = probs[0].shape[-1]
    i = torch.arange(T, dtype=torch.float64)
    dist = (i[:, None] - i[None, :]).clamp_min(0)  # (T, T)
    ratios = [((p.double() * dist).sum(-1)[..., skip:] / (i[skip:] / 2)).mean() for p in probs]
    return float(torch.stack(ratios).mean())
