"""KERPLE, power kernel (Chi et al. 2022, eq. 9): bias = -r1 |i - j|^r2, r1 > 0, 0 < r2 <= 2 per head."""
import torch
from torch import nn

from harness.encodings._base import Encoding

EPS = 1e-2  # the paper's code clamps its parameters into their valid ranges


class KerplePower(Encoding):
    """Learnable per-head r1 (scale) and r2 (power), initialised uniform in (0, 1) and (0, 2).

    As the authors' code (chijames/KERPLE, megatron/mpu/layers.py, ParallelKerplePower, the
    'kerple_power_ap_' variant of train.sh): bias_p = rand * 2 drawn first, then bias_a = rand * 1."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("learnable kernel biases",
            "bias",
            "Chi et al. 2022")

    relative = True

    def __init__(self, *, n_heads):
        super().__init__()
        power = torch.rand(n_heads) * 2  # the authors' bias_p, drawn first
        scale = torch.rand(n_heads)  # the authors' bias_a
        self.r1 = nn.Parameter(scale)
        self.r2 = nn.Parameter(power)

    def bias(self, q, q_pos, k_pos):
        dist = (q_pos[:, None] - k_pos[None, :]).abs().to(self.r1.dtype)  # (Tq, Tk)
        r1, r2 = self.r1.clamp(min=EPS)[:, None, None], self.r2.clamp(EPS, 2.0)[:, None, None]
        return -r1 * dist.pow(r2)  # (H, Tq, Tk)
