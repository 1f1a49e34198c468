"""rotary-embedding-torch 0.9.1: `RotaryEmbedding` holds its frequencies as a parameter (`self.freqs`) and its
forward casts the positions to it (rotary_embedding_torch/rotary_embedding_torch.py: `einsum('..., f -> ... f',
t.type(freqs.dtype), freqs)`), so after `model.to(torch.bfloat16)` / `model.half()` the positions, the frequencies
and their product are all 16-bit, even for fp32 positions passed in (the README's second style, `freqs =
rotary_emb(positions)`, which is right before the cast). Separate from its 16-bit positions in
rotate_queries_or_keys (rotary_embedding_torch_16bit_positions.py): here the cast module is the cause.
Setting: RotaryEmbedding(dim=64), fp32 positions 255, 2047, 8191, the module built in fp32, then cast.
Expected (RoFormer arXiv 2104.09864 eq. 34, theta_j = 1e4^(-2j/d), fp64, as HF transformers'
modeling_rope_utils._compute_default_rope_parameters): angles within fp32 rounding (uncast: 1.7e-4 rad at 8191).
Got: after .to(bfloat16), max angle error 2.57 rad at 8191. Exit 1 while the bug is present.
"""
import math

import numpy as np
import torch
from rotary_embedding_torch import RotaryEmbedding

D, pos = 64, torch.tensor([255.0, 2047.0, 8191.0])  # fp32 positions, as a caller passes them
ref = pos.double().numpy()[:, None] * 1e4 ** (-np.arange(0, D, 2) / D)  # fp64 angles (3, D/2)
errs = {}
for how in ("kept fp32", "cast .to(bfloat16)"):
    m = RotaryEmbedding(dim=D)
    if how.startswith("cast"):
        m = m.to(torch.bfloat16)  # what model.to(torch.bfloat16) does to it
    got = m(pos)[:, 0::2].double().numpy()  # (3, D): each angle twice, interleaved
    errs[how] = np.abs((got - ref + math.pi) % (2 * math.pi) - math.pi).max(axis=1)
    print(f"{how:20s} freqs {str(m.freqs.dtype):15s} max |angle - fp64| (rad) at 255, 2047, 8191:",
          " ".join(f"{e:.3g}" for e in errs[how]))
raise SystemExit(1 if errs["cast .to(bfloat16)"].max() > 0.05 else 0)
