"""x-transformers 2.31.10: `RotaryEmbedding` registers `inv_freq` as a buffer and its forward casts the positions to
it (x_transformers/x_transformers.py: `torch.einsum('b i , j -> b i j', t.type_as(self.inv_freq), self.inv_freq)`),
so after `model.to(torch.bfloat16)` / `model.half()` the positions, the frequencies and their product are all
16-bit: above position 256 (bf16) consecutive positions share one angle and every angle is off by up to a turn.
Setting: RotaryEmbedding(64), positions 255, 2047, 8191, the module built in fp32, then cast as a model is.
Expected (RoFormer arXiv 2104.09864 eq. 34, theta_j = 1e4^(-2j/d), fp64, as HF transformers'
modeling_rope_utils._compute_default_rope_parameters): angles within fp32 rounding (the uncast module: 1.7e-4 rad
at 8191). Got: after .to(bfloat16), max angle error 2.57 rad at 8191. Exit 1 while the bug is present.
"""
import math

import numpy as np
import torch
from x_transformers.x_transformers import RotaryEmbedding

D, pos = 64, torch.tensor([255, 2047, 8191])
ref = pos.numpy()[:, None] * 1e4 ** (-np.arange(0, D, 2) / D)  # fp64 angles (3, D/2)
errs = {}
for how in ("kept fp32", "cast .to(bfloat16)"):
    m = RotaryEmbedding(D)
    if how.startswith("cast"):
        m = m.to(torch.bfloat16)  # what model.to(torch.bfloat16) does to it
    freqs, _ = m(pos)  # (1, 3, D): each angle twice, interleaved
    got = freqs[0, :, 0::2].double().numpy()
    errs[how] = np.abs((got - ref + math.pi) % (2 * math.pi) - math.pi).max(axis=1)
    print(f"{how:20s} inv_freq {str(m.inv_freq.dtype):15s} max |angle - fp64| (rad) at 255, 2047, 8191:",
          " ".join(f"{e:.3g}" for e in errs[how]))
raise SystemExit(1 if errs["cast .to(bfloat16)"].max() > 0.05 else 0)
