"""FIRE (Li et al. 2023): bias = f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1), f a small MLP.

The normaliser max(L, i) is progressive interpolation: below the threshold L the bias is relative; past
it distances are squashed into [0, 1], which is what lets FIRE extrapolate. Not translation-invariant."""
import torch
from torch import nn

from harness.encodings._base import Encoding
from harness.encodings._params import count, nonnegative, positive


class Fire(Encoding):
    """Defaults follow the paper's reference code: MLP width 32, c = 0.1, L = 512 times a learnable multiplier."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("MLP over log distance, progressive interpolation",
            "bias",
            "Li et al. 2023")

    RANGES = {"mlp_width": count(1), "init_c": positive(), "init_L": positive(), "eps": nonnegative()}

    def __init__(self, *, n_heads, mlp_width=32, init_c=0.1, init_L=512.0, eps=1e-6):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, n_heads))
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.register_buffer("init_L", torch.tensor(float(init_L)))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))
        self.eps = eps

    def bias(self, q, q_pos, k_pos):
        if q_pos is k_pos:  # the model's self-attention: one (H, T, T) table per forward, not one per block
            return self.per_positions(q_pos, (q.dtype, torch.is_autocast_enabled()),
                                      lambda: (self._bias(q_pos, k_pos),))[0]
        return self._bias(q_pos, k_pos)

    def _bias(self, q_pos, k_pos):
        qp, kp = q_pos.to(self.c.dtype), k_pos.to(self.c.dtype)
        rel = (qp[:, None] - kp[None, :]).abs()  # (Tq, Tk)
        norm = torch.maximum(qp, (self.L_multiplier * self.init_L).abs())[:, None]  # (Tq, 1)
        x = torch.log(torch.abs(self.c * rel) + 1) / (torch.log(torch.abs(self.c * norm) + 1) + self.eps)
        return self.mlp(x[..., None]).permute(2, 0, 1)  # (H, Tq, Tk)
