"""Independent fp64 checks of every failure in field.md, outside the suite's own code paths.

    KERAS_BACKEND=torch PYTHONPATH=/tmp/conflibs .venv/bin/python harness/conformance/field_checks.py

Each check reads a library's frequencies back from what the library itself returns and compares them, in fp64,
with the definition in the paper or the reference code it follows (cited per check). Prints one block per check.
"""
import math

import torch

D, BASE, FACTOR, L0 = 128, 1e4, 16.0, 8192


def paper_yarn(dim, base, factor, l0, alpha=1.0, beta=32.0):
    """YaRN 'NTK-by-parts' (Peng et al. 2023, arXiv 2309.00071, eq. 18-19) in fp64: r_d = L0 / lambda_d rotations;
    gamma = 0 below alpha (interpolate: theta/s), 1 above beta (keep theta), linear between; HF rounds the ramp's
    ends to whole dims (truncate), which moves no dim by more than one here."""
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    r = l0 / (2 * math.pi / theta)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0, 1)
    return (1 - gamma) * theta / factor + gamma * theta


def angles_at_one(cos, sin):
    """theta_j recovered from a library's table at position 1 (atan2 in fp64)."""
    return torch.atan2(sin.double(), cos.double())


def litgpt_yarn():
    from litgpt.model import build_rope_cache
    extra = {"factor": FACTOR, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "original_max_seq_len": L0}
    cos, sin = build_rope_cache(2, D, base=BASE, extra_config=extra)
    att = float(torch.hypot(cos[1, 0].double(), sin[1, 0].double()))
    theta = angles_at_one(cos[1, :D // 2] / att, sin[1, :D // 2] / att)
    ref = paper_yarn(D, BASE, FACTOR, L0)
    print("litgpt build_rope_cache YaRN (d=128, base 1e4, factor 16, L0 8192), theta_j / paper:")
    print("  j=0 (highest frequency, 1304 rotations in L0):", f"{float(theta[0] / ref[0]):.6f}", "(paper: 1, kept)")
    print("  j=63 (lowest, 0.06 rotations):", f"{float(theta[63] / ref[63]):.6f}", "(paper: 1, both /16)")
    flipped = (theta / ref - 1).abs() > 1e-3
    print(f"  dims off by more than 1e-3: {int(flipped.sum())} of 64; theta_0 = {float(theta[0]):.6f} "
          f"= 1/{1 / float(theta[0]):.2f}")


def megatron_yarn_partial():
    from harness.conformance.libraries.megatron import cpu_device
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
    from megatron.core.models.common.embeddings.yarn_rotary_pos_embedding import YarnRotaryEmbedding
    with cpu_device():
        plain = RotaryEmbedding(kv_channels=D, rotary_percent=0.5, use_cpu_initialization=True)(4)
        yarn = YarnRotaryEmbedding(kv_channels=D, rotary_percent=0.5, use_cpu_initialization=True,
                                   scaling_factor=FACTOR, original_max_position_embeddings=L0)(4)[0]
    print("megatron-core rotary_percent=0.5 of kv_channels=128: rotated width")
    print(f"  RotaryEmbedding: {plain.shape[-1]} (honours rotary_percent); YarnRotaryEmbedding: {yarn.shape[-1]} "
          f"(ignores it; _apply_rotary_pos_emb_bshd rotates freqs.shape[-1] features)")


def keras_hub_dynamic():
    import os
    os.environ.setdefault("KERAS_BACKEND", "torch")
    from keras_hub.layers import RotaryEmbedding
    factor, d = 4.0, D
    x = torch.zeros(1, 2, 1, d)
    x[..., :d // 2] = 1.0
    out = {}
    for kind in ("linear", "dynamic"):
        layer = RotaryEmbedding(max_wavelength=BASE, scaling_factor=1.0 if kind == "linear" else factor, rope_type=kind)
        y = torch.as_tensor(layer(x, positions=torch.tensor([0, 1]))).double()[0, 1, 0]
        out[kind] = torch.atan2(y[d // 2:], y[:d // 2])
    ratio = out["dynamic"] / out["linear"]
    j = torch.arange(0, d, 2, dtype=torch.float64)
    ntk = (BASE * factor ** (d / (d - 2))) ** (-j / d) / BASE ** (-j / d)  # HF static NTK / Code Llama: base scaled
    print("keras-hub RotaryEmbedding rope_type='dynamic' (factor 4, d=128): theta_j / theta_j(unscaled)")
    print(f"  keras: j=0 {float(ratio[0]):.6f}, j=32 {float(ratio[32]):.6f}, j=63 {float(ratio[63]):.6f} "
          f"(one constant: factor^(-d/(d-2)) = {factor ** (-d / (d - 2)):.6f})")
    print(f"  NTK (base * factor^(d/(d-2))): j=0 {float(ntk[0]):.6f}, j=32 {float(ntk[32]):.6f}, j=63 "
          f"{float(ntk[63]):.6f}; HF dynamic is NTK with factor (s L/L0) - (s - 1) from the call's length")


def rotary_embedding_torch_bf16():
    from rotary_embedding_torch import RotaryEmbedding
    d, n = 64, 4096
    x = torch.zeros(1, 1, n, d)
    x[..., 0::2] = 1.0
    got = {dt: RotaryEmbedding(dim=d).rotate_queries_or_keys(x.to(dt)).double() for dt in (torch.float32,
                                                                                           torch.bfloat16)}
    ang = torch.atan2(got[torch.bfloat16][0, 0, :, 1], got[torch.bfloat16][0, 0, :, 0])  # pair 0, theta_0 = 1
    pos = torch.arange(n, dtype=torch.float64)
    wrapped = torch.remainder(ang - pos + math.pi, 2 * math.pi) - math.pi
    rounded = torch.remainder(ang - pos.to(torch.bfloat16).double() + math.pi, 2 * math.pi) - math.pi
    print("rotary-embedding-torch rotate_queries_or_keys, bf16 input, 4096 positions, pair 0 (theta 1):")
    print(f"  angle - position: max {float(wrapped.abs().max()):.3f} rad; angle - bf16(position): max "
          f"{float(rounded.abs().max()):.3f} rad (positions held in bf16)")


def equinox_rope_cache():
    """eqx.nn.RotaryPositionalEmbedding caches its cos/sin table per (embedding_size, dtype), not theta
    (equinox/nn/_embedding.py internal_rope_embedding_cache): a second module of another theta reads the first's."""
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np
    from equinox.nn._embedding import internal_rope_embedding_cache
    x = jnp.zeros((4, D)).at[:, :D // 2].set(1.0)  # pair j: (1, 0) -> (cos, sin) of position * theta_j

    def theta(base):  # the module's angles at position 1, fp64
        y = torch.from_numpy(np.array(eqx.nn.RotaryPositionalEmbedding(D, theta=base)(x))).double()
        return torch.atan2(y[1, D // 2:], y[1, :D // 2])
    ref = {b: (b ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)) for b in (1e4, 5e5)}
    internal_rope_embedding_cache.clear()
    alone = theta(5e5)
    internal_rope_embedding_cache.clear()
    theta(1e4)
    after = theta(5e5)
    print("equinox RotaryPositionalEmbedding(128, theta=5e5), theta_j at position 1 vs 5e5^(-2j/d):")
    print(f"  built first: max rel err {float((alone / ref[5e5] - 1).abs().max()):.2e}; built after a theta=1e4 "
          f"module: max rel err {float((after / ref[5e5] - 1).abs().max()):.2e}, vs 1e4's "
          f"{float((after / ref[1e4] - 1).abs().max()):.2e} (it rotates by the other module's theta)")


def mlx_lm_longrope():
    """mlx-lm's SuScaledRoPE takes long_factor always (short_factor is accepted, never read); Phi-3's reference and
    HF pick short_factor while the sequence fits in original_max_position_embeddings."""
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.rope_utils import SuScaledRoPE
    short, long = [1.0 + j / 64 for j in range(D // 2)], [1.0 + 15.0 * (j / 64) ** 2 for j in range(D // 2)]
    layer = SuScaledRoPE(D, base=BASE, max_position_embeddings=16 * L0, original_max_position_embeddings=L0,
                         short_factor=short, long_factor=long)
    x = mx.zeros((1, 1, 2, D))
    x[..., :D // 2] = 1.0
    y = torch.from_numpy(np.array(layer(x).astype(mx.float32))).double()[0, 0, 1]
    theta = torch.atan2(y[D // 2:], y[:D // 2])
    base = BASE ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    got = base / theta  # the rescale factor it applied per frequency
    print("mlx-lm SuScaledRoPE (d=128, L0 8192, 2 positions): per-frequency rescale factor read back, j=63:")
    print(f"  {float(got[63]):.4f}; long_factor[63] = {long[63]:.4f}, short_factor[63] = {short[63]:.4f} "
          f"(a 2-token sequence: Phi-3 / HF take short)")


def vllm_ntk():
    """vLLM's rope_type "ntk" (NTKScalingRotaryEmbedding, 'fixed NTK' of kexue.fm/archives/9706): base * factor, then
    every frequency / factor^(2/R): theta_j = base^(-2j/R) factor^(-2(j+1)/R); the suite's ntk is Code Llama's /
    bloc97's base * factor^(R/(R-2)), which keeps theta_0."""
    import os
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from harness.conformance.libraries.vllm import config
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope
    factor = 4.0
    with set_current_vllm_config(config(4)):
        emb = get_rope(D, 4, True, {"rope_type": "ntk", "factor": factor, "rope_theta": BASE}, torch.float32)
    cos, sin = emb.cos_sin_cache[1].double().chunk(2)
    ratio = torch.atan2(sin, cos) / BASE ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    j = torch.arange(D // 2, dtype=torch.float64)
    print("vLLM get_rope rope_type 'ntk' (factor 4, d=128): theta_j / theta_j(unscaled)")
    print(f"  vLLM: j=0 {float(ratio[0]):.6f}, j=63 {float(ratio[63]):.6f}; its formula factor^(-2(j+1)/d): "
          f"{factor ** (-2 / D):.6f}, {factor ** -1:.6f} (max diff "
          f"{float((ratio - factor ** (-2 * (j + 1) / D)).abs().max()):.1e}); Code Llama NTK: 1, "
          f"{factor ** (-2 * 63 / (D - 2)):.6f}")


def cast_16bit_tables():
    """The usage cases' cast FAILs: each module built in fp32, then cast as a model is (.to(torch.bfloat16)), its
    angle at position 8191 read back in fp64 against theta_j = 1e4^(-2j/d) (RoFormer arXiv 2104.09864): HF's
    LlamaRotaryEmbedding (inv_freq a buffer; huggingface/transformers#25681), x-transformers' RotaryEmbedding
    (inv_freq a buffer, positions cast to its dtype: t.type_as(self.inv_freq)), rotary-embedding-torch's (freqs a
    parameter, positions cast to its dtype in forward)."""
    d, p = 64, 8191
    ref = p * BASE ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,) fp64 angles
    pos = torch.tensor([p])

    def hf(m):
        cos, sin = m(torch.zeros(1, 1, d, dtype=torch.float32), pos[None])  # fp32 activations: the table's own error
        return torch.atan2(sin[0, 0, :d // 2].double(), cos[0, 0, :d // 2].double())

    def xt(m):
        return m(pos)[0][0, 0, 0::2].double()  # (freqs, scale); freqs (1, 1, d), interleaved (stack then flatten)

    def ret(m):
        return m(pos.float())[0, 0::2].double()  # its forward: positions -> freqs (1, d) interleaved

    builders = []
    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        builders.append(("transformers LlamaRotaryEmbedding",
                         lambda: LlamaRotaryEmbedding(LlamaConfig(hidden_size=512, num_attention_heads=8)), hf))
    except ImportError:
        pass
    try:
        from x_transformers.x_transformers import RotaryEmbedding as XT
        builders.append(("x-transformers RotaryEmbedding", lambda: XT(d), xt))
    except ImportError:
        pass
    from rotary_embedding_torch import RotaryEmbedding as RET
    builders.append(("rotary-embedding-torch RotaryEmbedding", lambda: RET(d), ret))
    print(f"modules built in fp32, then .to(torch.bfloat16); angle at position {p} vs fp64 (rad, wrapped):")
    for name, build, read in builders:
        for cast in (False, True):
            m = build()
            m = m.to(torch.bfloat16) if cast else m
            err = torch.remainder(read(m).float().double() - ref + math.pi, 2 * math.pi) - math.pi
            print(f"  {name}{' cast' if cast else ' fp32'}: max |angle error| {float(err.abs().max()):.3g} rad")


if __name__ == "__main__":
    for check in (litgpt_yarn, megatron_yarn_partial, keras_hub_dynamic, rotary_embedding_torch_bf16,
                  equinox_rope_cache, mlx_lm_longrope, vllm_ntk, cast_16bit_tables):
        try:
            check()
        except ImportError as e:
            print(f"{check.__name__}: skipped, {e}")
