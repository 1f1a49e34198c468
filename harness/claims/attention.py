"""Attention locality of a trained softmax model, from the weights its forward uses
(harness.measure.attention.probabilities: the model's own attend, observed)."""
import torch

from harness.measure.attention import probabilities  # noqa: F401 - the claims' probabilities are the model's own


def locality(probs, skip=8):
    """Mean attention distance E_p[i - j] of each query i >= skip, divided by i / 2 (the uniform causal
    value), averaged over queries, heads, batch and layers: < 1 is local, 1 flat. probs: [(B, H, T, T)]."""
    T = probs[0].shape[-1]
    i = torch.arange(T, dtype=torch.float64)
    dist = (i[:, None] - i[None, :]).clamp_min(0)  # (T, T)
    ratios = [((p.double() * dist).sum(-1)[..., skip:] / (i[skip:] / 2)).mean() for p in probs]
    return float(torch.stack(ratios).mean())
