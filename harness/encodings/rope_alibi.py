"""RoPE plus ALiBi: score = (R_i q)^T (R_j k) - m_h |i - j|.

A hybrid studied in public RoFormer notes: RoFormer's rotation (Su et al. 2021, arXiv 2104.09864) and ALiBi's
per-head linear distance penalty (Press et al. 2022, arXiv 2108.12409)."""
import torch

from harness.encodings.alibi import linear_bias, slopes
from harness.encodings.rope import Rope


class RopeAlibi(Rope):
    """RoPE's rotation and ALiBi's per-head linear distance penalty together."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary + ALiBi",
            "rotate + bias",
            "Su et al. 2021 + Press et al. 2022 (a hybrid)")

    def __init__(self, *, head_dim, n_heads, base=10000.0, layout="half", partial_rotary_factor=1.0,
                 impl="auto"):
        super().__init__(head_dim=head_dim, base=base, layout=layout,
                         partial_rotary_factor=partial_rotary_factor, impl=impl)
        self.register_buffer("slopes", torch.tensor(slopes(n_heads)), persistent=False)

    def bias(self, q, q_pos, k_pos):
        return linear_bias(self.slopes, q_pos, k_pos)
