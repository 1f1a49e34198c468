"""x-transformers: RotaryEmbedding(dim, interpolation_factor, base, base_rescale_factor)(positions) then
apply_rotary_pos_emb(t, freqs, scale) (x_transformers/x_transformers.py); partial by the angles' width."""
import torch

from harness.conformance.libraries import lacks, rotary_dim


class Rope(torch.nn.Module):
    """RotaryEmbedding as a submodule (its inv_freq buffer follows a cast); forward(q, k, positions) -> (q', k'),
    q, k (1, H, P, D), interleaved pairs."""

    def __init__(self, rope):
        from x_transformers.x_transformers import RotaryEmbedding
        super().__init__()
        lacks("x-transformers", rope)
        kind = rope["rope_type"]
        self.emb = RotaryEmbedding(rotary_dim(rope), base=rope["rope_theta"],
                                   interpolation_factor=rope["factor"] if kind == "linear" else 1.0,
                                   base_rescale_factor=rope["factor"] if kind == "ntk" else 1.0)

    def forward(self, q, k, positions):
        from x_transformers.x_transformers import apply_rotary_pos_emb
        freqs, scale = self.emb(positions)  # (1, P, R) interleaved angles
        return tuple(apply_rotary_pos_emb(x, freqs, scale) for x in (q, k))


def build(rope):
    """The usage cases' hook (Library.build)."""
    return Rope(rope)


def rope(q, k, positions, *, rope):
    return Rope(rope)(q, k, positions)
