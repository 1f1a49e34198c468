"""megatron/core/models/common/embeddings/rope_utils.py _apply_rotary_pos_emb_bshd: t [s, b, h, d], freqs
[s, 1, 1, R] full-width angles, mscale on cos/sin."""
from _rot import rotate


def _apply_rotary_pos_emb_bshd(t, freqs, rotary_interleaved=False, multi_latent_attention=False, mscale=1.0):
    return rotate(t, freqs, rotary_interleaved, mscale)
