"""Attention probabilities of a trained softmax model: each block's own logits (Block.logits, the
function the model's SDPA inputs come from) through a softmax."""
import torch


@torch.no_grad()
def probabilities(model, idx, pos=None):
    """[(B, H, T, T)] per layer for tokens idx (B, T) at positions pos (T,) (default 0..T-1)."""
    pos = torch.arange(idx.shape[1], device=idx.device) if pos is None else pos
    enc = model.encoding
    x = enc.embed(model.tok(idx), pos)  # (B, T, C)
    out = []
    for block in model.blocks:
        out.append(block.logits(x, enc, pos).softmax(-1))
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
