"""local_attention/rotary.py SinusoidalEmbeddings(dim, theta)(x) -> (freqs over arange(x.shape[-2]), cat(f, f);
ones) and apply_rotary_pos_emb(q, k, freqs, scale) (half pairs, the whole head)."""
import torch
from _rot import inv_freq, rotate


class SinusoidalEmbeddings(torch.nn.Module):
    def __init__(self, dim, scale_base=None, use_xpos=False, theta=10000):
        super().__init__()
        self.inv_freq = inv_freq(dim, theta)

    def forward(self, x):
        freqs = torch.outer(torch.arange(x.shape[-2]).float(), self.inv_freq)
        return torch.cat((freqs, freqs), -1), torch.ones(1)


def apply_rotary_pos_emb(q, k, freqs, scale=1):
    return rotate(q, freqs, scale=scale), rotate(k, freqs, scale=scale ** -1)
