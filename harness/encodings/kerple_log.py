"""KERPLE, logarithmic kernel (Chi et al. 2022, eq. 10): bias = -r1 log(1 + r2 |i - j|), r1, r2 > 0 per head."""
import torch
from torch import nn

from harness.encodings._base import Encoding

EPS = 1e-2  # the paper's code clamps its parameters to stay positive


class KerpleLog(Encoding):
    """Learnable per-head r1 (scale) and r2 (distance stretch), initialised uniform in (0, 1) x 2 and (0, 1)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("learnable kernel biases",
            "bias",
            "Chi et al. 2022")

    relative = True

    def __init__(self, *, n_heads):
        super().__init__()
        self.r1 = nn.Parameter(torch.rand(n_heads) * 2)
        self.r2 = nn.Parameter(torch.rand(n_heads))

    def bias(self, q, q_pos, k_pos):
        dist = (q_pos[:, None] - k_pos[None, :]).abs().to(self.r1.dtype)  # (Tq, Tk)
        r1, r2 = self.r1.clamp(min=EPS)[:, None, None], self.r2.clamp(min=EPS)[:, None, None]
        return -r1 * torch.log1p(r2 * dist)  # (H, Tq, Tk)
