"""llama_models/llama3/model.py precompute_freqs_cis (no scaling in the fake) and apply_rotary_emb (complex)."""
import torch
from _rot import inv_freq


def precompute_freqs_cis(dim, end, theta=10000.0, use_scaled=False):
    if use_scaled:
        raise NotImplementedError("the fake has no apply_scaling")
    freqs = torch.outer(torch.arange(end).float(), inv_freq(dim, theta))
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    f = freqs_cis.view(1, xq.shape[1], 1, xq.shape[-1] // 2)
    out = [torch.view_as_real(torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2)) * f).flatten(3)
           for x in (xq, xk)]
    return out[0].type_as(xq), out[1].type_as(xk)
