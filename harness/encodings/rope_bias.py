"""RoPE plus a learned relative bias: score = (R_i q)^T (R_j k) + b_{i-j}.

A hybrid studied in public RoFormer notes: RoFormer's rotation (Su et al. 2021, arXiv 2104.09864) with a learned
scalar bias per relative distance (T5's bias, Raffel et al. 2020, arXiv 1910.10683, without its log buckets),
clipped as in Shaw et al. 2018 (arXiv 1803.02155). b is per head over i - j clipped to [-max_distance,
max_distance] (beyond that the edge value, as Shaw)."""
import torch
from torch import nn

from harness.encodings.rope import Rope


class RopeBias(Rope):
    """b_{i-j}: one learnable scalar per head and clipped distance, init 0 (starts as plain RoPE)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary + learned b_{i−j}",
            "rotate + bias",
            "Su et al. 2021 + a T5/Shaw-style relative bias (a hybrid)")

    def __init__(self, *, head_dim, n_heads, base=10000.0, max_distance=128, layout="half",
                 partial_rotary_factor=1.0, impl="auto"):
        super().__init__(head_dim=head_dim, base=base, layout=layout,
                         partial_rotary_factor=partial_rotary_factor, impl=impl)
        self.max_distance = int(max_distance)
        self.table_b = nn.Parameter(torch.zeros(n_heads, 2 * self.max_distance + 1))

    def bias(self, q, q_pos, k_pos):
        rel = (q_pos[:, None] - k_pos[None, :]).clamp(-self.max_distance, self.max_distance)
        return self.table_b[:, rel + self.max_distance]  # (H, Tq, Tk)
