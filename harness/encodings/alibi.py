"""ALiBi (Press et al. 2022): score - m_h |i - j|, head slopes a geometric sequence."""
import math

import torch

from harness.encodings._base import Encoding


def slopes(n_heads):
    """Head slopes, paper §3: for 2^k heads 2^(-8/n), 2^(-16/n), ...; otherwise the 2^floor(log2 n) set
    plus every other slope of the 2^(floor+1) set (the paper's code for non-powers of two)."""
    if n_heads < 1:
        raise ValueError(f"ALiBi needs n_heads >= 1, got {n_heads}")
    p = 2 ** math.floor(math.log2(n_heads))
    base = [2.0 ** (-8.0 * (i + 1) / p) for i in range(p)]
    extra = [2.0 ** (-8.0 * (i + 1) / (2 * p)) for i in range(0, 2 * (n_heads - p), 2)]
    return base + extra


def linear_bias(slopes_t, q_pos, k_pos):
    """-m_h |i - j| as (H, Tq, Tk); symmetric so it stays relative on both sides of the diagonal."""
    dist = (q_pos[:, None] - k_pos[None, :]).abs().to(slopes_t.dtype)  # (Tq, Tk)
    return -slopes_t[:, None, None] * dist


class Alibi(Encoding):
    """No embedding, no rotation: a fixed linear distance penalty per head."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("linear bias, paper slopes (any head count)",
            "bias",
            "Press et al. 2022")

    relative = True

    def __init__(self, *, n_heads):
        super().__init__()
        self.register_buffer("slopes", torch.tensor(slopes(n_heads)), persistent=False)

    def bias(self, q, q_pos, k_pos):
        return linear_bias(self.slopes, q_pos, k_pos)
