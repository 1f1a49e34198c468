"""megatron-core 0.16.1: YarnRotaryEmbedding ignores rotary_percent (megatron/core/models/common/embeddings/
yarn_rotary_pos_embedding.py).

`YarnRotaryEmbedding.__init__` passes `rotary_percent` to `RotaryEmbedding.__init__` but builds `inv_freq_extra` /
`inv_freq_inter` over `self.dim = kv_channels`, and `get_emb` returns angles of width kv_channels, so
`_apply_rotary_pos_emb_bshd` (rot_dim = freqs.shape[-1]) rotates the whole head. GPTModel builds it with the
model's rotary_percent (megatron/core/models/gpt/gpt_model.py, position_embedding_type='yarn'). Plain
`RotaryEmbedding` honours it (dim = int(kv_channels * rotary_percent)).
Setting: kv_channels 128, rotary_percent 0.5, scaling_factor 16, original_max_position_embeddings 8192.
Expected (YaRN arXiv 2309.00071 over the rotary part, as HF transformers `_compute_yarn_parameters` with
partial_rotary_factor, src/transformers/modeling_rope_utils.py): angles of width 64, features 64..127 unchanged.
Got: width 128, every feature rotated, with frequencies over dim 128. Exit 1 while the bug is present.
"""
import math
import numpy as np
import torch
from megatron.core.models.common.embeddings.yarn_rotary_pos_embedding import YarnRotaryEmbedding
from megatron.core.models.common.embeddings.rope_utils import _apply_rotary_pos_emb_bshd

if not torch.cuda.is_available():  # get_emb moves inv_freq to torch.cuda.current_device(): keep it on the CPU
    torch.cuda.current_device = lambda: "cpu"  # (nothing else is patched)
KV, PCT, S, L0, BASE, P = 128, 0.5, 16.0, 8192, 10000.0, 64
rope = YarnRotaryEmbedding(kv_channels=KV, rotary_percent=PCT, use_cpu_initialization=True, rotary_base=BASE,
                           scaling_factor=S, original_max_position_embeddings=L0)
emb, mscale = rope(P)  # [P, 1, 1, width]
x = torch.randn(P, 1, 1, KV, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
got = _apply_rotary_pos_emb_bshd(x, emb.double(), mscale=mscale).numpy()[:, 0, 0]

r = int(KV * PCT)  # fp64 reference: YaRN frequencies over the rotary dim r, rotate_half on x[:r], x[r:] passes
cdim = lambda rot: r * math.log(L0 / (rot * 2 * math.pi)) / (2 * math.log(BASE))
lo, hi = max(math.floor(cdim(32.0)), 0), min(math.ceil(cdim(1.0)), r - 1)
ramp = np.clip((np.arange(r // 2) - lo) / (hi - lo), 0, 1)
theta = BASE ** (-np.arange(0, r, 2) / r)
ang = np.arange(P)[:, None] * np.tile(theta / S * ramp + theta * (1 - ramp), 2)
a, xn = 0.1 * math.log(S) + 1.0, x.numpy()[:, 0, 0]  # HF default attention factor = megatron's mscale here
xr = np.concatenate([-xn[:, r // 2:r], xn[:, :r // 2]], 1)  # rotate_half
ref = np.concatenate([(xn[:, :r] * np.cos(ang) + xr * np.sin(ang)) * a, xn[:, r:]], 1)
err = np.abs(got - ref).max(); print(f"rotated width: {emb.shape[-1]} (expected {r}); pass-through features changed: "
      f"{bool(np.abs(got[:, r:] - xn[:, r:]).max() > 0)}; max |out - fp64 reference| = {err:.3g}")
raise SystemExit(1 if emb.shape[-1] != r or err > 1e-4 else 0)  # fp32 frequencies: ~1e-5 when fixed
