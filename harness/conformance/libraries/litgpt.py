"""litgpt: build_rope_cache + apply_rope (litgpt/model.py), the cache gathered at the positions as its
GPT.forward does (cos[input_pos]); rotary_percentage < 1 rotates the first rope_n_elem features."""
from harness.conformance.libraries import lacks, rotary_dim, split


def rope(q, k, positions, *, rope):
    from litgpt.model import apply_rope, build_rope_cache
    lacks("litgpt", rope)
    kind, r, condense, extra = rope["rope_type"], rotary_dim(rope), 1, None
    if kind == "linear":  # rope_condense_ratio: positions / ratio
        condense = rope["factor"]
    elif kind == "llama3":
        extra = {"factor": rope["factor"], "low_freq_factor": rope["low_freq_factor"],
                 "high_freq_factor": rope["high_freq_factor"],
                 "original_max_seq_len": rope["original_max_position_embeddings"]}
    elif kind == "yarn":  # mscale 1 is HF's default attention factor 0.1 ln(factor) + 1 (litgpt's default is none)
        extra = {"factor": rope["factor"], "beta_fast": rope.get("beta_fast", 32.0),
                 "beta_slow": rope.get("beta_slow", 1.0), "mscale": 1.0,
                 "original_max_seq_len": rope["original_max_position_embeddings"]}
    cos, sin = build_rope_cache(int(positions.max()) + 1, r, base=rope["rope_theta"], condense_ratio=condense,
                                extra_config=extra)
    cos, sin = cos[positions][None], sin[positions][None]  # (1, P, R) fp32, as GPT.forward gathers its buffers
    return tuple(split(lambda x: apply_rope(x, cos, sin), x, r) for x in (q, k))
