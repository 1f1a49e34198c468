"""equinox/nn/_embedding.py RotaryPositionalEmbedding(embedding_size, theta)(x (seq_length, embedding_size)):
positions 0..seq_length-1, half pairs (rotate_half), fp32 table, cast back to x's dtype; on torch."""
import types

import torch
from _rot import inv_freq, rotate


class RotaryPositionalEmbedding:
    def __init__(self, embedding_size, theta=10_000.0, dtype=None):
        self.embedding_size, self.theta = embedding_size, theta

    def __call__(self, x, *, key=None):
        ang = torch.outer(torch.arange(x.shape[0]).float(), inv_freq(self.embedding_size, self.theta))
        return rotate(x, torch.cat((ang, ang), -1))


nn = types.SimpleNamespace(RotaryPositionalEmbedding=RotaryPositionalEmbedding)
