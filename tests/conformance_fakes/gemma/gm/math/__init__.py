"""gemma/gm/math/_positional_embeddings.py apply_rope on torch: inputs [B, L, N, H], positions [B, L], p-RoPE
by rope_proportion (timescale padded with inf: identity pairs), positions / scale_factor, half pairs."""
import torch
from _rot import rotate


def apply_rope(inputs, positions, *, base_frequency, scale_factor=1.0, rope_proportion=1.0):
    h = inputs.shape[-1]
    angles = int(rope_proportion * h // 2)
    timescale = torch.full((h // 2,), float("inf"))
    timescale[:angles] = base_frequency ** ((2.0 / h) * torch.arange(angles).float())
    ang = (positions[..., None].float() / timescale)[..., None, :] / scale_factor  # [B, L, 1, H/2]
    return rotate(inputs, torch.cat((ang, ang), -1))
