"""The rotation the fakes share: x (..., D) by full-width angles (..., R), half or interleaved pairs."""
import torch


def rotate(x, angles, interleaved=False, scale=1.0):
    r = angles.shape[-1]
    xr, rest = x[..., :r], x[..., r:]
    if interleaved:
        half = torch.stack((-xr[..., 1::2], xr[..., 0::2]), -1).flatten(-2)
    else:
        half = torch.cat((-xr[..., r // 2:], xr[..., :r // 2]), -1)
    out = xr * angles.cos() * scale + half * angles.sin() * scale
    return torch.cat((out.to(x.dtype), rest), -1)


def inv_freq(dim, base):
    return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
