"""xPos (Sun et al. 2022): RoPE whose pair j is also scaled by zeta_j^(n/scale_base) on q and its inverse
on k, so the score decays as zeta_j^((m-n)/scale_base); zeta_j = (2j/D + 0.4)/1.4."""
import torch

from harness.encodings._base import Encoding
from harness.rope import LAYOUTS, apply_rotary, frequencies, rotary_table


class XPos(Encoding):
    """Relative but not norm-preserving. Positions are centred before the power so that zeta^(n/512)
    stays finite in fp16 for long sequences (the centre cancels in the score)."""

    relative = True

    def __init__(self, *, head_dim, base=10000.0, scale_base=512.0, layout="interleaved", impl="auto"):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
        self.layout, self.impl, self.scale_base = layout, impl, float(scale_base)
        self.register_buffer("inv_freq", frequencies("default", head_dim, base)[0], persistent=False)
        zeta = (torch.arange(0, head_dim, 2, dtype=torch.float32) + 0.4 * head_dim) / (1.4 * head_dim)
        self.register_buffer("zeta", zeta, persistent=False)  # (D/2,)

    def rotate(self, q, k, pos):
        cos, sin = rotary_table(self.inv_freq, pos, dtype=self.inv_freq.dtype)  # (T, D/2)
        centred = (pos - pos.numel() // 2).to(self.zeta.dtype)
        scale = self.zeta ** (centred[:, None] / self.scale_base)  # (T, D/2)
        q = apply_rotary(q, cos * scale, sin * scale, self.layout, self.impl)
        k = apply_rotary(k, cos / scale, sin / scale, self.layout, self.impl)
        return q, k
