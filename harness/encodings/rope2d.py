"""Axial 2D RoPE (Heo et al. 2024, arXiv 2403.13298): R_(h,w) = R_h (x) R_w; half the pairs rotate by the row,
half by the column. 1-D positions p are read as a row-major grid: (p // width, p % width)."""
import torch

from harness.encodings._base import Encoding
from harness.tasks.positions import raster
from harness.rope import LAYOUTS, frequencies, rotary_table, to_device
from harness.rope.apply import apply_rotary_qk, check_impl


class Rope2D(Encoding):
    """Scores depend only on (row_i - row_j, col_i - col_j): relative for shifts by whole rows."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("axial 2D rotary over (p // width, p % width)",
            "rotate",
            "Heo et al. 2024 (axial 2D RoPE)")

    relative = True
    rotary = True

    def __init__(self, *, head_dim, width=16, base=10000.0, layout="half", impl="auto"):
        super().__init__()
        if head_dim % 4:
            raise ValueError(f"rope2d needs head_dim divisible by 4 (pairs for rows and columns), got {head_dim}")
        if layout not in LAYOUTS:
            raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
        if width < 1:
            raise ValueError(f"rope2d width must be >= 1, got {width}")
        check_impl(impl)
        self.width, self.layout, self.impl = int(width), layout, impl
        self.head_dim, self.base = head_dim, float(base)
        self.shift_unit = self.width

    def table(self, pos, dtype=torch.float32):
        """cos, sin (T, D/2): the first D/4 pairs carry the row phase, the rest the column phase. Each axis
        has the frequencies of a head_dim/2 RoPE, made here in fp32+ (not a buffer that .to(bf16) casts)."""
        return self.per_positions(pos, dtype, lambda: self._table(pos, dtype))

    def _table(self, pos, dtype):
        work = torch.promote_types(torch.float32, dtype)
        inv_freq = to_device(frequencies("default", self.head_dim // 2, self.base)[0], pos.device, work)  # (D/4,)
        row, col = raster(pos, (self.width,))
        cr, sr = rotary_table(inv_freq, row, dtype=work)
        cc, sc = rotary_table(inv_freq, col, dtype=work)
        return torch.cat((cr, cc), dim=-1), torch.cat((sr, sc), dim=-1)

    def rotate(self, q, k, pos):
        cos, sin = self.table(pos, q.dtype)
        return apply_rotary_qk(q, k, cos, sin, self.layout, impl=self.impl)
