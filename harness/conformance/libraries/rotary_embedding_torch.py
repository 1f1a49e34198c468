"""lucidrains' rotary-embedding-torch, both call styles (rotary_embedding_torch/rotary_embedding_torch.py)."""
import torch

from harness.conformance.libraries import lacks, rotary_dim


def _module(rope):
    from rotary_embedding_torch import RotaryEmbedding
    kind = rope["rope_type"]
    return RotaryEmbedding(dim=rotary_dim(rope), theta=rope["rope_theta"],
                           interpolate_factor=rope["factor"] if kind == "linear" else 1.0,
                           theta_rescale_factor=rope["factor"] if kind == "ntk" else 1.0)


class Style1(torch.nn.Module):
    """RotaryEmbedding(dim=R, theta) as a submodule (its freqs parameter and cached_freqs buffer follow a cast);
    forward(q, k, positions) calls rotate_queries_or_keys(x, offset), which builds the positions as
    arange(offset, offset + T) itself, so dense positions are one call and sampled ones one call each."""

    def __init__(self, rope):
        super().__init__()
        lacks("rotary-embedding-torch", rope)
        self.emb = _module(rope)

    def forward(self, q, k, positions):
        n = len(positions)
        if bool((positions == torch.arange(n)).all()):
            return tuple(self.emb.rotate_queries_or_keys(x) for x in (q, k))
        return tuple(torch.cat([self.emb.rotate_queries_or_keys(x[..., i:i + 1, :], offset=int(p))
                                for i, p in enumerate(positions)], -2) for x in (q, k))


def build(rope):
    """The usage cases' hook (Library.build): one module, kept, cast and called again."""
    return Style1(rope)


def rotate_queries_or_keys(q, k, positions, *, rope):
    """A fresh Style1(rope) per call: the golden cases' adapter."""
    return Style1(rope)(q, k, positions)


def freqs_then_apply(q, k, positions, *, rope):
    """freqs = RotaryEmbedding(dim=R, theta)(positions), then apply_rotary_emb(freqs, x) (its README's second
    style, for positions of one's own)."""
    from rotary_embedding_torch import apply_rotary_emb
    lacks("rotary-embedding-torch-freqs", rope)
    emb = _module(rope)
    # forward(positions) takes them as given: interpolate_factor applies only where the module builds them
    # (get_seq_pos), so a caller with positions of its own divides, as rotate_queries_or_keys would
    freqs = emb(positions / emb.interpolate_factor)  # (P, R) interleaved angles
    return apply_rotary_emb(freqs, q), apply_rotary_emb(freqs, k)
