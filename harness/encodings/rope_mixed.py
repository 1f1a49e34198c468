"""RoPE-Mixed (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer", arXiv 2403.13298, Eq. 12):
2D RoPE whose frequencies are learned and mix both axes. Pair j of head h turns by

    phase(p) = f_x[h, j] * col(p) + f_y[h, j] * row(p),

with (f_x, f_y) a learned 2-vector per pair and head. 1-D positions p are read as a row-major grid exactly as
rope2d does: (row, col) = (p // width, p % width). The authors' code (naver-ai/rope-vit, models/vit_rope.py)
names the column axis x and the row axis y: init_t_xy gives t_x = t % end_x, t_y = t // end_x, and
compute_mixed_cis turns by t_x * freqs[0] + t_y * freqs[1]; here freqs[0] = f_x multiplies the column,
freqs[1] = f_y the row, as there.

Init as their init_random_2d_freqs: magnitudes base^(-4j/D), j < D/4 (the axial RoPE's per-axis frequencies);
per head one angle a ~ U(0, 2 pi) from torch's global RNG (seeded by the runner, as the model's own init), the
first D/4 pairs pointing along (cos a, sin a), the last D/4 along (cos(a + pi/2), sin(a + pi/2)). base defaults to
their rope_theta for the mixed models, 10.0 (rope_mixed_deit_*; their axial models use 100.0).

Relative: a score is a function of (row_i - row_j, col_i - col_j) only, so shifting every position by a multiple
of `width` (whole rows) leaves it unchanged; a shift by 1 does not (the column wraps): shift_unit = width.

Per layer, as rope-vit (one (2, H, D/2) table per block, each with its own random init): layer 0's is `freqs`,
the others are members (`at(layer)`, harness/encodings/_layered.py PerLayer). Their class token is left
unrotated; a language model has none. Layout `interleaved` (pairs (2j, 2j+1), their view_as_complex convention) is
the default; `half` pairs (j, j + D/2), the same model up to a fixed feature permutation. The table is per head
(H, T, D/2), which the fused kernels do not take: the rotation runs on the plain-PyTorch `eager` formula
(harness/rope/rotation.py), which broadcasts it over the batch.
"""
import math

import torch
from torch import nn

from harness.encodings._layered import PerLayer
from harness.tasks.positions import raster
from harness.rope import LAYOUTS
from harness.rope.apply import apply_rotary_qk


def init_mixed_freqs(head_dim, n_heads, base):
    """(2, H, D/2) float32: [0] = f_x (column), [1] = f_y (row); rope-vit's init_random_2d_freqs, re-derived."""
    mag = base ** (-torch.arange(0, head_dim, 4)[: head_dim // 4].float() / head_dim)  # (D/4,)
    angle = torch.rand(n_heads, 1) * 2 * math.pi  # (H, 1): one random rotation per head, global RNG
    direction = torch.cat((angle.expand(-1, mag.numel()), (angle + math.pi / 2).expand(-1, mag.numel())), -1)
    mag = torch.cat((mag, mag))  # (D/2,): both halves share the axial magnitudes
    return torch.stack((mag * direction.cos(), mag * direction.sin()))  # (2, H, D/2)


class RopeMixed(PerLayer):
    """Learned mixed-axis frequencies `freqs` (2, n_heads, head_dim/2) of layer 0; `deeper` holds the others."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("2D rotary with learned per-head, per-layer frequencies mixing both axes, f_x·col + f_y·row",
            "rotate",
            "Heo et al. 2024 (naver-ai/rope-vit, RoPE-Mixed)")

    relative = True
    rotary = True

    def __init__(self, *, head_dim, n_heads, width=16, base=10.0, layout="interleaved", n_layers=2):
        super().__init__()
        if head_dim % 4:
            raise ValueError(f"rope_mixed needs head_dim divisible by 4 (D/4 magnitudes, two directions), "
                             f"got {head_dim}")
        if n_heads < 1:
            raise ValueError(f"rope_mixed n_heads must be >= 1, got {n_heads}")
        if width < 1:
            raise ValueError(f"rope_mixed width must be >= 1, got {width}")
        if not base > 0:
            raise ValueError(f"rope_mixed base must be > 0, got {base}")
        if layout not in LAYOUTS:
            raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
        self.head_dim, self.n_heads, self.base, self.layout = head_dim, n_heads, float(base), layout
        self.width = int(width)
        self.shift_unit = self.width  # whole rows: (row, col) -> (row + n, col)
        self.freqs = nn.Parameter(init_mixed_freqs(head_dim, n_heads, self.base))
        self.own_layers(n_layers, lambda: RopeMixed(head_dim=head_dim, n_heads=n_heads, width=width, base=base,
                                                    layout=layout, n_layers=1))

    def table(self, pos, dtype=torch.float32):
        """cos, sin (H, T, D/2) for positions pos (T,). Built once per forward where it needs no grad (eval);
        while training it requires grad through `freqs`, so each block builds its own (per_positions)."""
        return self.per_positions(pos, dtype, lambda: self._table(pos, dtype))

    def _table(self, pos, dtype):
        # phase in fp32 (fp64 for fp64 inputs) even when the model is cast to bf16, as rope-vit's
        # compute_mixed_cis does with autocast off: a bf16 phase would be off by up to pi at large positions
        work = torch.promote_types(torch.float32, dtype)
        f = self.freqs.to(work)  # (2, H, D/2)
        row, col = raster(pos, (self.width,))
        phase = col.to(work)[:, None] * f[0, :, None, :] + row.to(work)[:, None] * f[1, :, None, :]  # (H, T, D/2)
        return phase.cos(), phase.sin()

    def rotate(self, q, k, pos):
        """q, k (B, H, T, D) -> rotated; the per-head table broadcasts over B."""
        cos, sin = self.table(pos, q.dtype)
        return apply_rotary_qk(q, k, cos, sin, self.layout, impl="eager")
