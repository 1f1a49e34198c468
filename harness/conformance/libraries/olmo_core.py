"""AI2's OLMo-core (olmo_core/nn/rope.py RotaryEmbedding, ComplexRotaryEmbedding and the scaling configs
PIRoPEScalingConfig, StepwiseRoPEScalingConfig (Llama 3.1), YaRNRoPEScalingConfig), called as
olmo_core/nn/attention/__init__.py's _apply_rope calls them: rope(q, k, head_first=False, start_pos=...) on
(B, T, H, D). A call rotates positions start_pos .. start_pos + T - 1 (decoding passes the cache length), so the
sampled positions are one call per position (start_pos = p) and a prefill 0..P-1 is one call. full_precision True
(its default): the rotation runs in fp32 and is cast back. Partial rotary by partial_rotary_factor (the first
int(head_size * p) features). Its ABFRoPEScalingConfig is a new base only (no HF type), so static ntk is a skip.
olmo_core/config.py imports cached_path (with boto3 and google-cloud-storage) and olmo_core.nn's __init__ imports
the vision and data modules (bettermap): it needs those to import, none of them torch."""
from harness.conformance.libraries import lacks


def _scaling(rope):
    from olmo_core.nn.rope import PIRoPEScalingConfig, StepwiseRoPEScalingConfig, YaRNRoPEScalingConfig
    kind = rope["rope_type"]
    if kind == "linear":
        return PIRoPEScalingConfig(factor=rope["factor"])
    if kind == "llama3":  # to_hf_config: low_freq_factor = 1 / (1 - low_freq_proportion), high = 1 / high_proportion
        return StepwiseRoPEScalingConfig(factor=rope["factor"], low_freq_proportion=1 - 1 / rope["low_freq_factor"],
                                         high_freq_proportion=1 / rope["high_freq_factor"],
                                         old_context_len=rope["original_max_position_embeddings"])
    if kind == "yarn":
        return YaRNRoPEScalingConfig(factor=rope["factor"], beta_fast=rope.get("beta_fast", 32),
                                     beta_slow=rope.get("beta_slow", 1),
                                     old_context_len=rope["original_max_position_embeddings"])
    return None


def _call(emb, q, k, positions):
    """emb(q, k) at the positions, (B, T, H, D) as the attention module hands them (head_first=False)."""
    import torch
    pos = [int(p) for p in positions.tolist()]
    if pos == list(range(len(pos))):
        return emb(q, k, head_first=False)
    outs = [emb(q[:, i:i + 1], k[:, i:i + 1], head_first=False, start_pos=p) for i, p in enumerate(pos)]
    return tuple(torch.cat([o[j] for o in outs], 1) for j in (0, 1))


def rope(q, k, positions, *, rope):
    from olmo_core.nn.rope import RotaryEmbedding
    lacks("olmo-core", rope)
    emb = RotaryEmbedding(head_size=rope["head_dim"], theta=rope["rope_theta"], scaling=_scaling(rope),
                          partial_rotary_factor=rope.get("partial_rotary_factor", 1.0))
    return _call(emb, q, k, positions)


def complex_rope(q, k, positions, *, rope):
    """ComplexRotaryEmbedding (RoPEType.complex): complex pairs (2j, 2j + 1), interleaved; no scaling (it raises
    OLMoConfigurationError for any)."""
    from olmo_core.nn.rope import ComplexRotaryEmbedding
    lacks("olmo-core-complex", rope)
    emb = ComplexRotaryEmbedding(head_size=rope["head_dim"], theta=rope["rope_theta"],
                                 partial_rotary_factor=rope.get("partial_rotary_factor", 1.0))
    return _call(emb, q, k, positions)
