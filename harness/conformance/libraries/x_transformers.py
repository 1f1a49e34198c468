"""x-transformers: RotaryEmbedding(dim, interpolation_factor, base, base_rescale_factor)(positions) then
apply_rotary_pos_emb(t, freqs, scale) (x_transformers/x_transformers.py); partial by the angles' width."""
from harness.conformance.libraries import lacks, rotary_dim


def rope(q, k, positions, *, rope):
    from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb
    lacks("x-transformers", rope)
    kind = rope["rope_type"]
    emb = RotaryEmbedding(rotary_dim(rope), base=rope["rope_theta"],
                          interpolation_factor=rope["factor"] if kind == "linear" else 1.0,
                          base_rescale_factor=rope["factor"] if kind == "ntk" else 1.0)
    freqs, scale = emb(positions)  # (1, P, R) interleaved angles
    return tuple(apply_rotary_pos_emb(x, freqs, scale) for x in (q, k))
