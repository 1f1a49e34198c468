"""mlx-lm's own RoPE layers (mlx_lm/models/rope_utils.py initialize_rope -> nn.RoPE for default / linear,
DynamicNTKScalingRoPE, Llama3RoPE, YarnRoPE, SuScaledRoPE for longrope, ProportionalRoPE; deepseek_v2.py
DeepseekV2YarnRotaryEmbedding), each a precomputed frequency table handed to mlx.core.fast.rope(freqs=...), called
as mlx-lm's models call them (llama.py, phi3.py, gemma4_text.py, deepseek_v2.py): layer(x, offset=cache.offset) on
(B, H, L, D) mlx arrays. A model's positions are offset + arange(L), so sampled positions are one call per position
(offset = p), as the `mlx` adapter does; the length-dependent types get every position 0..L-1 in one call.
Partial rotary: the layer is built over R = rotary dims (phi3.py: rope_dim = head_dim * partial_rotary_factor),
p-RoPE over the whole head with partial_rotary_factor in the scaling config (gemma4_text.py)."""
from harness.conformance.libraries import lacks, rotary_dim


def _offsets(layer, x, positions):
    """layer(x) at the given positions: one call when they are 0..P-1 (a prefill), else one per position."""
    import mlx.core as mx
    pos = [int(p) for p in positions.tolist()]
    if pos == list(range(len(pos))):
        return layer(x, offset=0)
    return mx.concatenate([layer(x[..., i:i + 1, :], offset=p) for i, p in enumerate(pos)], axis=-2)


def scaling_config(rope):
    """(scaling_config, max_position_embeddings) as an HF config.json gives them to initialize_rope.

    longrope: mlx-lm takes the attention factor's ratio from max_position_embeddings / original (Phi-3-128k's
    config: 131072 / 4096), so the model's max_position_embeddings is factor * original, not the call's length.
    dynamic: the trained length is max_position_embeddings (HF's dynamic reads it there too; run.rope_dict)."""
    kind = rope["rope_type"]
    if kind == "default":
        return None, rope["max_position_embeddings"]  # llama.py passes args.rope_scaling, None without scaling
    keys = {"linear": ("factor",), "dynamic": ("factor",),
            "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
            "yarn": ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow"),
            "longrope": ("original_max_position_embeddings", "short_factor", "long_factor"),
            "proportional": ("partial_rotary_factor",)}[kind]
    cfg = {"rope_type": kind, **{n: rope[n] for n in keys if n in rope}}
    if kind == "longrope":
        return cfg, int(round(rope["factor"] * rope["original_max_position_embeddings"]))
    return cfg, rope["max_position_embeddings"]


def rope(q, k, positions, *, rope):
    from mlx_lm.models.rope_utils import initialize_rope
    lacks("mlx-lm", rope)
    cfg, max_pos = scaling_config(rope)
    layer = initialize_rope(rotary_dim(rope), rope["rope_theta"], False, cfg, max_pos)
    return tuple(_offsets(layer, x, positions) for x in (q, k))


def deepseek_v2(q, k, positions, *, rope):
    """DeepseekV2YarnRotaryEmbedding(dim=qk_rope_head_dim, ...) on the rope part q_pe (traditional=True: interleaved
    pairs over x.shape[-1]), the nope part passed through as DeepseekV2Attention concatenates it. No rope_scaling:
    scaling_factor 1 (plain RoPE, mscale 1)."""
    import mlx.core as mx
    from mlx_lm.models.deepseek_v2 import DeepseekV2YarnRotaryEmbedding
    lacks("mlx-lm-deepseek-v2", rope)
    r, kw = rotary_dim(rope), {}
    if rope["rope_type"] == "yarn":
        kw = {n: rope[n] for n in ("original_max_position_embeddings", "beta_fast", "beta_slow") if n in rope}
        kw["scaling_factor"] = rope["factor"]
    layer = DeepseekV2YarnRotaryEmbedding(dim=r, max_position_embeddings=rope["max_position_embeddings"],
                                          base=rope["rope_theta"], **kw)
    return tuple(mx.concatenate([_offsets(layer, x[..., :r], positions), x[..., r:]], axis=-1)
                 if r < x.shape[-1] else _offsets(layer, x, positions) for x in (q, k))
