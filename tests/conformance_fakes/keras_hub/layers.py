"""keras_hub/src/layers/modeling/rotary_embedding.py RotaryEmbedding on torch: inputs (batch, seq, heads, feat),
positions given, half pairs; rope_type linear divides inv_freq by scaling_factor (the fake has no yarn)."""
import torch
from _rot import inv_freq, rotate


class RotaryEmbedding:
    def __init__(self, max_wavelength=10000, scaling_factor=1.0, rope_type="linear", **kwargs):
        if rope_type != "linear":
            raise NotImplementedError(f"the fake has no {rope_type}")
        self.base, self.factor = max_wavelength, scaling_factor

    def __call__(self, inputs, start_index=0, positions=None):
        inv = inv_freq(inputs.shape[-1], self.base) / self.factor
        ang = torch.einsum("i,j->ij", positions.float(), inv)
        return rotate(inputs, torch.cat((ang, ang), -1)[None, :, None])
