"""timm/layers/pos_embed_sincos.py apply_rot_embed(x, sin_emb, cos_emb, half=False): sin first, full width,
interleaved pairs unless half."""
import torch


def apply_rot_embed(x, sin_emb, cos_emb, half=False):
    if half:
        a, b = x.chunk(2, -1)
        rot = torch.cat((-b, a), -1)
    else:
        rot = torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)
    return x * cos_emb + rot * sin_emb
