"""mlx.core: fast.rope(a, dims, *, traditional, base, scale, offset) (mlx fast.rope docstring) and concatenate,
here on torch tensors: positions (offset + arange(L)) * scale, the first dims features rotated."""
import types

import torch
from _rot import inv_freq, rotate


def _rope(a, dims, *, traditional, base, scale, offset, freqs=None):
    pos = (offset + torch.arange(a.shape[-2])).float() * scale
    ang = torch.outer(pos, inv_freq(dims, base))
    ang = ang.repeat_interleave(2, -1) if traditional else torch.cat((ang, ang), -1)
    return rotate(a, ang, interleaved=traditional)


fast = types.SimpleNamespace(rope=_rope)


def concatenate(arrays, axis=0):
    return torch.cat(arrays, axis)
