"""liger_kernel/transformers/rope.py liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
HF's apply_rotary_pos_emb (half pairs, cos/sin [b, s, D] unsqueezed at dim 1), without the Triton kernel."""
import torch


def _rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), -1)


def liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    r = cos.shape[-1]

    def one(x):
        xr, rest = x[..., :r], x[..., r:]
        return torch.cat(((xr * cos + _rotate_half(xr) * sin).to(x.dtype), rest), -1)
    return one(q), one(k)
