"""litgpt/model.py build_rope_cache (default and condense_ratio only) and apply_rope (half pairs)."""
import torch
from _rot import inv_freq, rotate


def build_rope_cache(seq_len, n_elem, device=None, base=10000, condense_ratio=1, extra_config=None,
                     rope_local_base_freq=None):
    if extra_config is not None:
        raise NotImplementedError("the fake has no extra_config")
    idx = torch.outer(torch.arange(seq_len).float() / condense_ratio, inv_freq(n_elem, base)).repeat(1, 2)
    return torch.cos(idx), torch.sin(idx)


def apply_rope(x, cos, sin):
    ang = torch.atan2(sin, cos)[:, None]  # (1, 1, T, n_elem): the fake recovers the angles
    return rotate(x, ang)
