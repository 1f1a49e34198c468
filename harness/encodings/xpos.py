"""xPos (Sun et al. 2022): RoPE whose pair j is also scaled by zeta_j^(n/scale_base) on q and its inverse
on k, so the score decays as zeta_j^((m-n)/scale_base); zeta_j = (2j/D + 0.4)/1.4."""
import torch

from harness.encodings._base import Encoding
from harness.encodings._params import positive
from harness.rope import LAYOUTS, apply_rotary, frequencies, rotary_table, to_device
from harness.rope.apply import check_impl


def zeta(head_dim, device=None, dtype=torch.float32):
    """Per-pair decay bases zeta_j = (2j/D + 0.4)/1.4 (Sun et al. 2022, torchscale's XPOS), (D/2,)."""
    return (torch.arange(0, head_dim, 2, device=device, dtype=dtype) + 0.4 * head_dim) / (1.4 * head_dim)


class XPos(Encoding):
    """Relative but not norm-preserving. Positions are centred before the power so that zeta^(n/512)
    stays finite in fp16 for long sequences (the centre cancels in the score). The centre is the middle of
    the call's positions, so keys cached from an earlier call carry another centre: not `cacheable` (decoding
    one token at a time against them was off by up to 8.7e-5 in the logits, at 40 and 160 tokens)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary with exponential decay (scale_base 512)",
            "rotate",
            "Sun et al. 2022")

    RANGES = {"scale_base": positive()}

    relative = True
    cacheable = False

    def __init__(self, *, head_dim, base=10000.0, scale_base=512.0, layout="interleaved", impl="auto"):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
        self.head_dim, self.base = head_dim, float(base)
        check_impl(impl)
        self.layout, self.impl, self.scale_base = layout, impl, float(scale_base)

    def rotate(self, q, k, pos):
        # Frequencies and zeta are made here, in fp32 or better, never stored as buffers: model.to(bf16)
        # would cast such buffers and put the phase in bf16 (Modalities #462).
        cq, sq, ck, sk = self.per_positions(pos, q.dtype, lambda: self._tables(pos, q.dtype))
        return apply_rotary(q, cq, sq, self.layout, self.impl), apply_rotary(k, ck, sk, self.layout, self.impl)

    def _tables(self, pos, dtype):
        """cos, sin (T, D/2) scaled by zeta^(n/scale_base) for q, and by its inverse for k."""
        work = torch.promote_types(torch.float32, dtype)
        inv_freq = to_device(frequencies("default", self.head_dim, self.base)[0], pos.device, work)  # (D/2,)
        cos, sin = rotary_table(inv_freq, pos, dtype=work)  # (T, D/2)
        centred = (pos - pos.numel() // 2).to(work)
        scale = zeta(self.head_dim, pos.device, work) ** (centred[:, None] / self.scale_base)  # (T, D/2)
        return cos * scale, sin * scale, cos / scale, sin / scale
