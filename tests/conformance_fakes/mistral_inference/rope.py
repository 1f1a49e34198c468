"""mistral_inference/rope.py precompute_freqs_cis(dim, end, theta) (complex64) and apply_rotary_emb(xq, xk, freqs_cis)
(xq (tokens, heads, D) or (B, S, H, D), complex pairs in fp32, freqs_cis[:, None, :]); the same maths."""
import torch
from _rot import inv_freq


def precompute_freqs_cis(dim, end, theta):
    freqs = torch.outer(torch.arange(end).float(), inv_freq(dim, theta))
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    f = freqs_cis[:, None, :]
    out = [torch.view_as_real(torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2)) * f).flatten(-2)
           for x in (xq, xk)]
    return out[0].type_as(xq), out[1].type_as(xk)
