"""olmo_core/nn/rope.py RotaryEmbedding / ComplexRotaryEmbedding(head_size, theta, scaling, partial_rotary_factor)
(q, k, head_first, start_pos): positions start_pos + 0..T-1, fp32, the first int(head_size * p) features; half pairs
(RotaryEmbedding) or complex pairs (ComplexRotaryEmbedding). The fake has no scaling configs (names only)."""
import torch
from _rot import inv_freq, rotate


class _NoScaling:
    def __init__(self, *a, **k):
        raise NotImplementedError("the fake has no RoPE scaling")


PIRoPEScalingConfig = StepwiseRoPEScalingConfig = YaRNRoPEScalingConfig = _NoScaling


class RotaryEmbedding(torch.nn.Module):
    interleaved = False

    def __init__(self, *, head_size, theta=500_000, full_precision=True, scaling=None, partial_rotary_factor=1.0):
        super().__init__()
        self.inv_freq = inv_freq(int(head_size * partial_rotary_factor), theta)

    def forward(self, q, k, head_first=True, start_pos=None):
        t = q.shape[2 if head_first else 1]
        ang = torch.outer((start_pos or 0) + torch.arange(t).float(), self.inv_freq)
        ang = ang.repeat_interleave(2, -1) if self.interleaved else torch.cat((ang, ang), -1)
        ang = ang if head_first else ang[:, None]
        return tuple(rotate(x.float(), ang, interleaved=self.interleaved).type_as(x) for x in (q, k))


class ComplexRotaryEmbedding(RotaryEmbedding):
    interleaved = True
