"""x_transformers/x_transformers.py RotaryEmbedding (interpolation_factor, base_rescale_factor) ->
(freqs (1, n, R) interleaved, scale) and apply_rotary_pos_emb(t, freqs, scale)."""
import torch
from _rot import inv_freq, rotate


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, use_xpos=False, scale_base=512, interpolation_factor=1., base=10000,
                 base_rescale_factor=1.):
        super().__init__()
        # a buffer, as in x-transformers (register_buffer('inv_freq', ...)): a model's .half() casts it
        self.register_buffer("inv_freq", inv_freq(dim, base * base_rescale_factor ** (dim / (dim - 2))))
        self.interpolation_factor = interpolation_factor

    def forward(self, t, offset=0):
        freqs = torch.einsum("i,j->ij", t.type_as(self.inv_freq), self.inv_freq) / self.interpolation_factor
        return freqs.repeat_interleave(2, -1)[None], 1.


def apply_rotary_pos_emb(t, freqs, scale=1):
    return rotate(t, freqs[:, None] if t.ndim == 4 else freqs, interleaved=True, scale=scale)
