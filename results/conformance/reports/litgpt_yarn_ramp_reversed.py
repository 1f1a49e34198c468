"""litgpt 0.5.13: YaRN frequencies blended in the wrong direction in `build_rope_cache` (litgpt/model.py).

The YaRN branch sets `theta = theta_interpolation * (1 - ramp) + theta_extrapolation * ramp` with
`ramp = clamp((j - low) / (high - low), 0, 1)`, so dims j < low (the highest frequencies, many rotations in the
original context) are interpolated (theta / factor) and dims j > high (the lowest) are left unscaled. YaRN
("NTK-by-parts", arXiv 2309.00071 eq. 18-19) and HF transformers `_compute_yarn_parameters`
(src/transformers/modeling_rope_utils.py: `inv_freq_extrapolation_factor = 1 - linear_ramp_factor(...)`) do the
reverse: keep theta where the ramp is 0, theta / factor where it is 1.
Config: head_size 128, rotary_percentage 1, rope_base 10000, rope_adjustments = {factor 16, beta_fast 32, beta_slow 1,
original_max_seq_len 8192}. Expected theta_0 = 1.0 (kept), theta_63 = 1e4**(-126/128) / 16. Got theta_0 = 1/16,
theta_63 unscaled (16x too large). Exit 1 while the bug is present.
"""
import math
import numpy as np
from litgpt import Config
from litgpt.model import GPT

D, BASE, S, L0, BF, BS = 128, 10000, 16.0, 8192, 32.0, 1.0
cfg = Config(n_layer=1, n_head=1, n_embd=D, block_size=4, padded_vocab_size=8, rope_base=BASE, rotary_percentage=1.0,
             rope_adjustments=dict(factor=S, beta_fast=BF, beta_slow=BS, original_max_seq_len=L0))
cos, sin = GPT(cfg).rope_cache()  # what GPT.forward uses: (seq, head_size), half layout cat(freqs, freqs)
got = np.arctan2(sin[1, :D // 2].double().numpy(), cos[1, :D // 2].double().numpy())  # theta_j at position 1

# fp64 reference, HF _compute_yarn_parameters (truncate=True) / YaRN eq. 18-19
cdim = lambda rot: D * math.log(L0 / (rot * 2 * math.pi)) / (2 * math.log(BASE))
low, high = max(math.floor(cdim(BF)), 0), min(math.ceil(cdim(BS)), D - 1)
ramp = np.clip((np.arange(D // 2) - low) / (high - low), 0, 1)
theta = BASE ** (-np.arange(0, D, 2) / D)
ref = theta / S * ramp + theta * (1 - ramp)  # ramp 0 -> extrapolate (keep), 1 -> interpolate (/S)

rel = np.abs(got / ref - 1)
print(f"theta_0:  litgpt {got[0]:.6f}  expected {ref[0]:.6f}")
print(f"theta_63: litgpt {got[63]:.6e}  expected {ref[63]:.6e}  ratio {got[63] / ref[63]:.3f}")
print(f"dims with relative error > 1e-5: {int((rel > 1e-5).sum())} of {D // 2}; max {rel.max():.3g}")
raise SystemExit(1 if rel.max() > 1e-5 else 0)
