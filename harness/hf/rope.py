"""HF `config.json` -> the `rope` encoding's parameters and back (`rope_from_hf`, `rope_to_hf`): the maths behind
harness.hf (the facade, `harness/hf/__init__.py`, re-exports it; the CLI harness.hf.cli imports it)."""
import inspect

from harness.encodings import ENCODINGS
from harness.hf import classes, plain
from harness.hf.plain import (COMMON_KEYS, INTERLEAVED_MODEL_TYPES, KINDS, LEGACY_TYPES,  # noqa: F401 - re-exported
                              LENGTH_FROM_MAX_POSITIONS, ORIGINAL, ORIGINAL_LENGTH_TYPES, ROPE_KEYS, ROTARY_INTERLEAVES,
                              TOP_LEVEL, LayerTypeError, check_values, read_config)
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, frequencies
from harness.rope.rotation import LAYOUTS

# HF's rope_types: the keys of its ROPE_INIT_FUNCTIONS plus "default" (each model's own
# `compute_default_rope_parameters`). Ours minus `ntk` (static NTK-aware base, which HF never had).
HF_ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")
# Types whose missing or null `factor` HF derives as max_position_embeddings / original_max_position_embeddings
# (_compute_yarn_parameters: DeepSeek-V3; _compute_longrope_parameters: Phi-3, whose rope_scaling has no factor).
DERIVED_FACTOR_TYPES = ("yarn", "longrope")
# Keys HF requires (its _validate_<type>_rope_parameters, and its init function indexes them) where our function
# has a default: a config without them fails in HF, so it must not quietly get ours.
HF_REQUIRED = {"llama3": ("low_freq_factor", "high_freq_factor")}
NOT_1D = "the harness's rope is 1-D RoPE over token positions"
# RoPE that is not 1-D over token positions, by rope_type or by the model_type of the config holding it
# (transformers' rotary classes: each builds its inv_freq for 2-D or 3-D positions).
REFUSED_TYPES = {"axial": "2-D RoPE over a vision encoder's patch rows and columns"}
REFUSED_MODELS = {
    "eomt_dinov3": "DINOv3's RoPE is 2-D over patch rows and columns (head_dim / 4 frequencies per axis)",
    "llama4_vision_model": "Llama 4's vision RoPE is 2-D over patch rows and columns",
    "efficientloftr": "EfficientLoFTR's RoPE is 2-D over feature-map rows and columns",
    "musicflamingo": "MusicFlamingo's RoPE is 2-D over window and time",
    "ernie4_5_vl_moe_text": "Ernie 4.5 VL's RoPE is 3-D (t, h, w) with its frequencies reordered by mrope_section",
}
# rope_parameters keys a model reads elsewhere than its rotary frequencies: dropped, each named on stderr by the CLI
IGNORED_KEYS = {
    "llama_4_scaling_beta": "Ministral 3 / Mistral 4's position-dependent query scale (attention, not the rotation)",
    "max_position_embeddings": "a copy of the extended context length; HF's RoPE reads the config's own",
}
MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def _type_keys(rope_type):
    """(every rope_parameters key rope_type takes, the required ones): our function's keyword-only parameters."""
    params = inspect.signature(ROPE_INIT_FUNCTIONS[rope_type]).parameters
    kw = {n: p for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "partial_rotary_factor"}
    return sorted(kw), sorted(n for n, p in kw.items() if p.default is p.empty)


def _rope_type(rp):
    rope_type = plain.rope_type_of(rp)
    if rope_type in REFUSED_TYPES:
        raise ValueError(f"rope_type {rope_type!r} is {REFUSED_TYPES[rope_type]}; {NOT_1D}")
    if rope_type not in HF_ROPE_TYPES:
        raise ValueError(f"unknown rope_type {rope_type!r}; expected one of {list(HF_ROPE_TYPES)}")
    return rope_type


def _scaling(rp, rope_type, max_len, notes):
    """The type's own keys, with HF's fallbacks for the trained length and the factor filled in."""
    takes, required = _type_keys(rope_type)
    scaling = {k: v for k, v in rp.items() if k not in COMMON_KEYS and v is not None}
    for key in sorted(set(scaling) & set(IGNORED_KEYS)):
        notes.append(f"ignored rope_parameters.{key} {scaling.pop(key)!r}: {IGNORED_KEYS[key]}")
    for key in (k for k in MROPE_KEYS if k in scaling):
        raise ValueError(f"rope_parameters.{key} {scaling[key]!r}: multimodal RoPE (Qwen2-VL's M-RoPE over (t, h, w) "
                         f"position ids); {NOT_1D} (on text alone, where t = h = w, M-RoPE is this RoPE: drop "
                         f"{', '.join(k for k in MROPE_KEYS if k in scaling)} to read it so)")
    unknown = sorted(set(scaling) - set(takes))
    if unknown:
        raise ValueError(f"rope_parameters keys {unknown} are not taken by rope_type {rope_type!r}; "
                         f"its keys: {takes}")
    if rope_type in LENGTH_FROM_MAX_POSITIONS:
        if max_len is None:
            raise ValueError(f"rope_type {rope_type!r} needs max_position_embeddings (HF's trained length for it)")
        scaling[ORIGINAL] = max_len
    if rope_type in ORIGINAL_LENGTH_TYPES:
        scaling.setdefault(ORIGINAL, max_len)  # set by HF's standardisation; max_position_embeddings is its fallback
        if scaling[ORIGINAL] is None:
            raise ValueError(f"rope_type {rope_type!r} needs {ORIGINAL} (or max_position_embeddings)")
    if rope_type in DERIVED_FACTOR_TYPES and "factor" not in scaling and max_len is not None:
        scaling["factor"] = max_len / scaling[ORIGINAL]
    missing = [k for k in sorted({*required, *HF_REQUIRED.get(rope_type, ())}) if k not in scaling]
    if missing:
        raise ValueError(f"rope_parameters for rope_type {rope_type!r} needs {missing}; its keys: {takes}")
    return scaling


def rope_from_hf(config: dict, *, layer_type: str | None = None, notes: list | None = None) -> dict:
    """The `rope` encoding's parameters (head_dim, base, layout, partial_rotary_factor, rope_type, scaling) from
    an HF config.json dict, v4 (`rope_scaling`, top-level `rope_theta`) or v5 (`rope_parameters`), a composite's
    text_config included; per layer type (Gemma 3 / 4) pass `layer_type`. Bad input raises ValueError in one line
    naming the key (LayerTypeError, with the valid `choices`, for a missing or wrong layer_type). `notes`, when a
    list, receives a line per rope_parameters key the rotation does not read."""
    plain.lint(config)
    resolved = classes.resolve(config, layer_type) or plain.resolve(config, layer_type)
    if resolved.model_type in REFUSED_MODELS:
        raise ValueError(f"model_type {resolved.model_type!r}: {REFUSED_MODELS[resolved.model_type]}; {NOT_1D}")
    rp = resolved.rope
    rope_type = _rope_type(rp)
    if resolved.head_dim is None:
        raise ValueError(resolved.problem)
    if rp.get("rope_theta") is None:
        # HF would fall back to the config class's default_theta, which differs by class (10000, 5e5, 1e6, ...)
        raise ValueError("config needs rope_theta (top level or in rope_parameters); HF's default depends on the class")
    partial = rp.get("partial_rotary_factor")
    params = {"head_dim": resolved.head_dim, "base": float(rp["rope_theta"]),
              "layout": "interleaved" if resolved.interleaved else "half",
              "partial_rotary_factor": float(1.0 if partial is None else partial), "rope_type": rope_type,
              "scaling": _scaling(rp, rope_type, resolved.max_len, notes if notes is not None else [])}
    _check(params)
    return params


def _check(params):
    """Our own validation of every knob (lengths of LongRoPE's lists, factor >= 1, an even rotary dim, ...)."""
    frequencies(params["rope_type"], params["head_dim"], params["base"],
                partial_rotary_factor=params["partial_rotary_factor"], **params["scaling"])


def rope_to_hf(params: dict) -> dict:
    """The HF config fragment for the `rope` encoding's parameters: head_dim, rope_parameters as v5 writes it
    (rope_type, rope_theta, partial_rotary_factor where not 1, the type's keys), the trained length where HF reads
    it outside rope_parameters, and rope_interleave for the interleaved layout. `impl` (how, not what) is dropped."""
    signature = inspect.signature(ENCODINGS["rope"]).parameters
    unknown = sorted(set(params) - set(signature))
    if unknown:
        raise ValueError(f"rope does not take {unknown}; its parameters: {list(signature)}")
    p = {n: params.get(n, s.default) for n, s in signature.items() if n != "impl"}
    if p["head_dim"] is inspect.Parameter.empty:
        raise ValueError("rope_to_hf needs head_dim")
    check_values({"head_dim": p["head_dim"], "base": p["base"], "partial_rotary_factor": p["partial_rotary_factor"],
                   "rope_type": p["rope_type"], "scaling": p["scaling"]},
                  {"head_dim": "int>0", "base": "num>0", "partial_rotary_factor": "(0,1]", "rope_type": "str",
                   "scaling": "dict"})
    if p["layout"] not in LAYOUTS:
        raise ValueError(f"unknown layout {p['layout']!r}; expected one of {list(LAYOUTS)}")
    if p["rope_type"] not in HF_ROPE_TYPES:
        raise ValueError(f"rope_type {p['rope_type']!r} has no HF equivalent; HF's: {list(HF_ROPE_TYPES)}")
    p["scaling"] = dict(p["scaling"] or {})
    check_values(p["scaling"], ROPE_KEYS, "scaling.")
    _check(p)
    rope_type, scaling = p["rope_type"], dict(p["scaling"])
    out = {"head_dim": p["head_dim"]}
    if rope_type in LENGTH_FROM_MAX_POSITIONS:
        out["max_position_embeddings"] = scaling.pop(ORIGINAL)
    if rope_type in ORIGINAL_LENGTH_TYPES:
        # also top-level: Phi3Config's own original_max_position_embeddings (default 4096) overrides the inner one
        out[ORIGINAL] = scaling[ORIGINAL]
    rp = {"rope_type": rope_type, "rope_theta": p["base"]}
    if p["partial_rotary_factor"] != 1.0:
        rp["partial_rotary_factor"] = p["partial_rotary_factor"]
    out["rope_parameters"] = {**rp, **scaling}
    if p["layout"] == "interleaved":
        out["rope_interleave"] = True
    return out
