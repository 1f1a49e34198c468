"""local-attention (lucidrains; local_attention/rotary.py, as LocalAttention.forward uses it): SinusoidalEmbeddings(
dim, theta)(x) -> (freqs [n, dim], half layout, over arange(n) where n is x.shape[-2]; scale) and
apply_rotary_pos_emb(q, k, freqs, scale). The table is built over 0..max(position) and its rows taken at the
positions. Default rope_type only, whole head (no partial rotary, no scaling types)."""
from harness.conformance.libraries import lacks


def rope(q, k, positions, *, rope):
    import torch
    from local_attention.rotary import SinusoidalEmbeddings, apply_rotary_pos_emb
    lacks("local-attention", rope, partial=False)
    emb = SinusoidalEmbeddings(rope["head_dim"], theta=rope["rope_theta"])
    freqs, scale = emb(torch.empty(int(positions.max()) + 1, 1))  # forward reads the length from x.shape[-2]
    return apply_rotary_pos_emb(q, k, freqs[positions], scale)
