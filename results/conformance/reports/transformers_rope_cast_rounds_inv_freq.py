"""transformers 5.23.0: `LlamaRotaryEmbedding` registers `inv_freq` (and `original_inv_freq`) as buffers
(models/llama/modeling_llama.py), so `model.to(torch.bfloat16)` / `model.half()` on a built model rounds the
frequencies to 16 bits; forward's `.float()` cannot restore them, so every cos/sin past a few hundred positions is
off. `from_pretrained(..., dtype=torch.bfloat16)` keeps both buffers in fp32; only casting a built model loses them
(as in huggingface/transformers#25681, closed; NVIDIA-NeMo/Automodel#2549 keeps them fp32 in its own models).
Setting: head_dim 64, rope_theta 1e4, positions 255, 2047, 8191; cos of the module built in fp32, then cast.
Expected (RoFormer arXiv 2104.09864 eq. 34, theta_j = 1e4^(-2j/d), fp64): cos within the output dtype's rounding
(the fp32-built module's bf16 cos is within 0.004). Got: after .to(bfloat16), max error 1.4 at position 8191 (0.33
at 2047). Exit 1 while the bug is present.
"""
import numpy as np
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

cfg = LlamaConfig(hidden_size=512, num_attention_heads=8, rope_theta=1e4)  # head_dim 64
pos = torch.tensor([[255, 2047, 8191]])
ref = np.cos(pos.numpy()[0][:, None] * 1e4 ** (-np.arange(0, 64, 2) / 64))  # fp64 (3, 32)
x = torch.zeros(1, 3, 64, dtype=torch.bfloat16)  # only its dtype and device are read
errs = {}
for how in ("kept fp32", "cast .to(bfloat16)"):
    emb = LlamaRotaryEmbedding(cfg)
    if how.startswith("cast"):
        emb = emb.to(torch.bfloat16)  # what model.to(torch.bfloat16) does to it
    cos, _ = emb(x, pos)  # (1, 3, 64) in bf16, cat(freqs, freqs)
    errs[how] = np.abs(cos[0, :, :32].double().numpy() - ref).max(axis=1)
    print(f"{how:20s} inv_freq {str(emb.inv_freq.dtype):15s} max |cos - fp64| at 255, 2047, 8191:",
          " ".join(f"{e:.3g}" for e in errs[how]))
raise SystemExit(1 if errs["cast .to(bfloat16)"].max() > 0.05 else 0)
