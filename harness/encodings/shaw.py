"""Clipped relative key embeddings (Shaw et al. 2018, arXiv 1803.02155): e_ij += q_i . R^K_clip(j-i) / sqrt(d)."""
import math

import torch
from torch import nn

from harness.encodings._base import Encoding


class Shaw(Encoding):
    """R^K has 2k+1 learned rows (clip distance k), shared by heads. Only the key term: the value term
    R^V changes the attention output, which the bias contract does not cover."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("clipped relative keys, q·R^K_clip(j−i)",
            "bias",
            "Shaw et al. 2018")

    relative = True
    content_bias = True

    def __init__(self, *, head_dim, max_distance=16):
        super().__init__()
        self.max_distance = int(max_distance)
        self.rel_k = nn.Parameter(torch.randn(2 * self.max_distance + 1, head_dim) * head_dim ** -0.5)

    def bias(self, q, q_pos, k_pos):
        # q (B, H, Tq, D) @ R^T -> (B, H, Tq, 2k+1); then pick column clip(j - i) for each key: O(T^2) not O(T^2 D)
        scores = q @ self.rel_k.to(q.dtype).T / math.sqrt(q.shape[-1])
        rel = (k_pos[None, :] - q_pos[:, None]).clamp(-self.max_distance, self.max_distance) + self.max_distance
        return scores.gather(-1, rel.expand(*scores.shape[:-2], *rel.shape))  # (B, H, Tq, Tk)
