"""vLLM's rotary embeddings (vllm/model_executor/layers/rotary_embedding/: get_rope in __init__.py, base.py
RotaryEmbedding.forward_static, linear_scaling_rope.py, ntk_scaling_rope.py, dynamic_ntk_scaling_rope.py,
yarn_scaling_rope.py, llama3_rope.py, phi3_long_rope_scaled_rope.py, gemma4_rope.py), called as its models call
them (models/llama.py): get_rope(head_dim, max_position=config.max_position_embeddings,
rope_parameters=config.rope_parameters, is_neox_style=True) then rotary_emb(positions, q, k) with q, k flattened to
(num_tokens, heads * head_dim), any positions (a cos/sin cache over max_position rows, index_select'ed).

Its CustomOp layers need a current VllmConfig (set_current_vllm_config(VllmConfig()), as vLLM's own tests do) and a
platform: without CUDA the adapter selects vLLM's CPU platform (VLLM_TARGET_DEVICE=cpu, vLLM's own switch, set only
where unset), on which the CustomOp dispatch runs the pure-PyTorch forward_native. What the config decides:
- longrope: Phi3LongRoPEScaledRotaryEmbedding takes the long factors iff max_model_len > original (its KV-cache
  choice); max_model_len is the call's length (the case's seq_len), max_position factor * original (Phi-3's config).
- dynamic: vLLM builds one table at max_position, its base scaled by factor * max_position / max_trained_positions
  - (factor - 1): HF's dynamic at a length of max_position. The adapter serves the call's length (max_position = L,
  max_trained_positions = the trained length); with max_position the trained length it is plain RoPE over 8192
  rows only."""
import os
import types

from harness.conformance.libraries import lacks

_KEEP = ("rope_type", "rope_theta", "partial_rotary_factor", "factor", "original_max_position_embeddings",
         "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "short_factor", "long_factor")


def config(max_model_len):
    """A VllmConfig for building layers outside a model; model_config carries only max_model_len (what the LongRoPE
    layer reads; a real ModelConfig needs a checkpoint on disk)."""
    from vllm.config import VllmConfig
    cfg = VllmConfig()
    object.__setattr__(cfg, "model_config", types.SimpleNamespace(max_model_len=max_model_len))
    return cfg


def rope(q, k, positions, *, rope):
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # read when vllm.platforms first resolves the platform
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers import rotary_embedding
    lacks("vllm", rope)
    kind, n = rope["rope_type"], int(positions.max()) + 1
    params, max_position = {n_: rope[n_] for n_ in _KEEP if n_ in rope}, rope["max_position_embeddings"]
    if kind == "longrope":
        max_position = int(round(rope["factor"] * rope["original_max_position_embeddings"]))
    if kind == "dynamic":
        params["max_trained_positions"], max_position = rope["max_position_embeddings"], max(n, max_position)
    b, p, h, d = q.shape  # bshd: (1, P, H, D) -> the model's (tokens, H * D)
    with set_current_vllm_config(config(rope["max_position_embeddings"] if kind != "dynamic" else max_position)):
        rotary_embedding._ROPE_DICT.clear()  # get_rope's memo ignores max_model_len: one server, one config
        # dtype: the model's, as the loader builds every layer under set_default_torch_dtype(model_config.dtype)
        # (model_loader/base_loader.py) and get_rope's dtype=None takes the default dtype
        emb = rotary_embedding.get_rope(d, max_position=max_position, is_neox_style=True, rope_parameters=params,
                                        dtype=q.dtype)
        q2, k2 = emb(positions, q.reshape(p, h * d), k.reshape(p, h * d))
    return q2.reshape(b, p, h, d), k2.reshape(b, p, h, d)
