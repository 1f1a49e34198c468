"""Learned absolute position embeddings (GPT-2): a (max_len, d_model) table added to token embeddings."""
import torch
from torch import nn

from harness.encodings._base import Encoding
from harness.encodings._params import count


class Learned(Encoding):
    """A position at or beyond max_len is an error: the table has no row for it."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("absolute, table of `max_len` rows (beyond it: an error)",
            "embed",
            "GPT-2")

    RANGES = {"max_len": count(1)}

    def __init__(self, *, d_model, max_len=1024):
        super().__init__()
        self.max_len = int(max_len)
        self.table = nn.Embedding(self.max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def embed(self, x, pos):
        top = int(pos.max()) if pos.numel() else 0
        if top >= self.max_len:
            raise ValueError(f"position {top} is beyond the learned table (max_len={self.max_len}); "
                             f"set encoding.max_len > {top} or evaluate at most {self.max_len} positions")
        return x + self.table(pos)
