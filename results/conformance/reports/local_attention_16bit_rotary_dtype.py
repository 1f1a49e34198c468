"""local-attention 1.11.2: LocalAttention / LocalTransformer raise RuntimeError on bf16 / fp16 inputs (no autocast),
because the rotary embedding hands back fp32 q and k (local_attention/rotary.py, `apply_rotary_pos_emb`).

`SinusoidalEmbeddings.forward` returns fp32 angles and an fp32 `torch.ones(1)` xpos scale, and
`apply_rotary_pos_emb(q, k, freqs, scale)` multiplies the 16-bit q, k by them, so type promotion returns fp32 q, k
(also after `module.to(torch.bfloat16)`: the fp32 scale still promotes). `LocalAttention.forward`
(local_attention/local_attention.py) then computes fp32 attention weights and fails at
`einsum('b h i j, b h j e -> b h i e', attn, bv)` with bv still 16-bit: "expected m1 and m2 to have the same
dtype, but got: float != c10::BFloat16". `LocalTransformer(...).to(torch.bfloat16)` fails the same way;
`use_rotary_pos_emb=False` runs and returns bf16; under torch.autocast it runs (the einsum is autocast).
The rotary values are right (vs RoFormer arXiv 2104.09864 in fp64, half layout as HF `rotate_half` in
src/transformers/models/llama/modeling_llama.py: 4.9e-5), only the dtype is not. Expected: output in the input
dtype. Casting q, k back at the end of `apply_rotary_pos_emb` (as rotary-embedding-torch's `apply_rotary_emb`
does) gives that. Setting: LocalAttention(dim=64, window_size=128, causal=True), q, k, v (1, 2, 512, 64) on CPU.
Exit 1 while the bug is present.
"""
import numpy as np
import torch
from local_attention import LocalAttention
from local_attention.rotary import SinusoidalEmbeddings, apply_rotary_pos_emb

N, D, W = 512, 64, 128
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, N, D, generator=g) for _ in range(3))
ang = np.arange(N)[:, None] * np.tile(10000.0 ** (-np.arange(0, D, 2) / D), 2)  # fp64, half layout
bad = False
for dt in (torch.bfloat16, torch.float16):
    q16, k16, v16 = q.to(dt), k.to(dt), v.to(dt)
    freqs, scale = SinusoidalEmbeddings(D)(k16)  # as LocalAttention.forward: self.rel_pos(bk)
    rq, _ = apply_rotary_pos_emb(q16, k16, freqs, scale=scale)
    x = q16.double().numpy()
    ref = x * np.cos(ang) + np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1) * np.sin(ang)
    err = np.abs(rq.double().numpy() - ref).max()
    try:
        out = LocalAttention(dim=D, window_size=W, causal=True)(q16, k16, v16)
        res, bad = f"returns {out.dtype}", bad or out.dtype != dt
    except RuntimeError as e:
        res, bad = f"raises RuntimeError: {e}", True
    print(f"{dt} input: apply_rotary_pos_emb returns {rq.dtype} (max |q' - fp64 RoPE| {err:.2g}); LocalAttention {res}")
raise SystemExit(1 if bad else 0)
