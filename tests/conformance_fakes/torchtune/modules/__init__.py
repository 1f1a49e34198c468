"""torchtune/modules/position_embeddings.py RotaryPositionalEmbeddings: x [b, s, n_h, h_d], input_pos [b, s],
interleaved pairs, a cache of max_seq_len positions."""
import torch
from _rot import inv_freq, rotate


class RotaryPositionalEmbeddings(torch.nn.Module):
    def __init__(self, dim, max_seq_len=4096, base=10_000):
        super().__init__()
        self.cache = torch.arange(max_seq_len).float()[:, None] * inv_freq(dim, base)[None]  # [s, dim/2]

    def forward(self, x, *, input_pos=None):
        ang = self.cache[input_pos].repeat_interleave(2, -1)[:, :, None]  # [b, s, 1, dim]
        return rotate(x, ang, interleaved=True)
