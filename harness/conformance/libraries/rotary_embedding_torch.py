"""lucidrains' rotary-embedding-torch, both call styles (rotary_embedding_torch/rotary_embedding_torch.py)."""
import torch

from harness.conformance.libraries import lacks, rotary_dim


def _module(rope):
    from rotary_embedding_torch import RotaryEmbedding
    kind = rope["rope_type"]
    return RotaryEmbedding(dim=rotary_dim(rope), theta=rope["rope_theta"],
                           interpolate_factor=rope["factor"] if kind == "linear" else 1.0,
                           theta_rescale_factor=rope["factor"] if kind == "ntk" else 1.0)


def rotate_queries_or_keys(q, k, positions, *, rope):
    """RotaryEmbedding(dim=R, theta).rotate_queries_or_keys(x, offset): it builds positions as
    arange(offset, offset + T) itself, so dense positions are one call and sampled ones one call each."""
    lacks("rotary-embedding-torch", rope)
    emb, n = _module(rope), len(positions)
    if bool((positions == torch.arange(n)).all()):
        return tuple(emb.rotate_queries_or_keys(x) for x in (q, k))
    return tuple(torch.cat([emb.rotate_queries_or_keys(x[..., i:i + 1, :], offset=int(p))
                            for i, p in enumerate(positions)], -2) for x in (q, k))


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
