"""Meta's llama-models, Llama 3 (llama_models/llama3/model.py): precompute_freqs_cis(dim, end, theta,
use_scaled) + apply_rotary_emb(xq, xk, freqs_cis) on (b, s, h, d), the table gathered at the positions.
apply_scaling's constants are fixed (factor 8, low/high 1/4, 8192); other llama3 parameters are a skip."""
from harness.conformance.libraries import lacks

LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def rope(q, k, positions, *, rope):
    from llama_models.llama3.model import apply_rotary_emb, precompute_freqs_cis
    lacks("llama-models", rope, partial=False)
    scaled = rope["rope_type"] == "llama3"
    if scaled and any(rope[n] != v for n, v in LLAMA3.items()):
        raise NotImplementedError(f"llama-models' apply_scaling fixes {LLAMA3}")
    cis = precompute_freqs_cis(rope["head_dim"], int(positions.max()) + 1, rope["rope_theta"], use_scaled=scaled)
    return apply_rotary_emb(q, k, cis[positions])
