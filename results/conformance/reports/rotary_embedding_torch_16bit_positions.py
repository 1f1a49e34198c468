"""rotary-embedding-torch 0.9.1: `RotaryEmbedding.rotate_queries_or_keys` builds the positions in the input's dtype
(rotary_embedding_torch/rotary_embedding_torch.py: `self.get_seq_pos(seq_len, device=device, dtype=dtype, ...)`
with `dtype = t.dtype`, i.e. `torch.arange(seq_len, dtype=t.dtype)`; `rotate_queries_with_cached_keys` goes
through it and `rotate_queries_and_keys` does the same). With bf16 q/k every position above 256 is rounded to 8
significant bits (steps of 16 in [2048, 4096)), with fp16 above 2048, and from 65520 on fp16 positions are inf.
The module's frequencies are fp32; only the positions are 16-bit.
Setting: RotaryEmbedding(dim=64), q of shape (1, 1, 4096, 64), used as in the README
(`rotary_emb.rotate_queries_or_keys(q)`). Expected (RoFormer arXiv 2104.09864 eq. 34, interleaved pairs,
theta_j = 10000^(-2j/d), in fp64, applied to the same 16-bit q): error at the output dtype's rounding (< 0.02,
as with fp32 positions).
Got: max error 7.37 (bf16) / 3.72 (fp16); fp32 input is right (4.6e-4). Exit 1 while the bug is present.
"""
import numpy as np
import torch
from rotary_embedding_torch import RotaryEmbedding

N, D = 4096, 64
q = torch.randn(1, 1, N, D, generator=torch.Generator().manual_seed(0))
ang = np.arange(N)[:, None] * 10000.0 ** (-np.arange(0, D, 2) / D)  # fp64, (N, D/2)
bad = False
for dt in (torch.float32, torch.bfloat16, torch.float16):
    x = q.to(dt)
    got = RotaryEmbedding(dim=D).rotate_queries_or_keys(x).double().numpy()[0, 0]  # fresh module per dtype
    xe, xo = x.double().numpy()[0, 0, :, 0::2], x.double().numpy()[0, 0, :, 1::2]
    ref = np.empty((N, D))
    ref[:, 0::2] = xe * np.cos(ang) - xo * np.sin(ang)
    ref[:, 1::2] = xo * np.cos(ang) + xe * np.sin(ang)
    err = np.abs(got - ref).max()
    print(f"{str(dt):15s} max |out - fp64 reference| = {err:.4g}  (bound 0.05; fp32 positions give < 0.02)")
    bad |= bool(err > 0.05)
raise SystemExit(1 if bad else 0)
