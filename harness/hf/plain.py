"""An HF config.json as plain JSON (harness.hf): the checks of every value before any use, and HF's rules read
by hand for a config whose class transformers cannot give (transformers not installed, or a model_type it does not
know): `standardize_rope_params` (transformers/modeling_rope_utils.py) and the per-layer head size.

With transformers installed, a config.json of a model_type it knows is read by that model's own config class instead
(harness.hf.classes); both hand their result over as a `Resolved`."""
import math
from dataclasses import dataclass
from typing import Optional

ORIGINAL = "original_max_position_embeddings"
# Old names HF still maps: `su` was Phi-3's first name for LongRoPE (Phi3Config.convert_rope_params_to_dict).
LEGACY_TYPES = {"su": "longrope"}
# Types whose pretraining length HF fills from max_position_embeddings when the config has none, preferring a
# top-level `original_max_position_embeddings` (Phi-3 keeps it there) to the one in rope_parameters
# (standardize_rope_params).
ORIGINAL_LENGTH_TYPES = ("llama3", "yarn", "longrope")
# Types for which HF takes the trained length from `max_position_embeddings` itself and never reads
# rope_parameters' original_max_position_embeddings (_compute_dynamic_ntk_parameters; dynamic_rope_update's
# original_max_seq_len). Our `dynamic` names that length original_max_position_embeddings.
LENGTH_FROM_MAX_POSITIONS = ("dynamic",)
# model_types whose HF attention pairs features (2j, 2j+1) when config.json has no `rope_interleave`: the config
# classes that default it to True (DeepseekV3Config, Glm4MoeLiteConfig, Mistral4Config, YoutuConfig, AXK1Config)
# and DeepSeek-V2's complex-number apply_rotary_emb (torch.view_as_complex over (..., D/2, 2)).
INTERLEAVED_MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1")
# model_types whose rotary class itself interleaves, whatever the config says: cos/sin built with
# torch.repeat_interleave(freqs, 2) and a rotate_half over (x[..., ::2], x[..., 1::2]) (CohereRotaryEmbedding,
# Cohere2's, Cohere2Moe's, BltRotaryEmbedding: the four BLT transformers' model_types).
ROTARY_INTERLEAVES = ("cohere", "cohere2", "cohere2_moe", "blt_global_transformer", "blt_local_decoder",
                      "blt_local_encoder", "blt_patcher")
# model_types whose full-attention layers take their own head size, `global_head_dim` (512 in transformers'
# Gemma4TextConfig & co., a builder-only key that becomes per_layer_config): without transformers it must be given.
GLOBAL_HEAD_DIM_TYPES = ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text", "embedding_gemma2_text")
GLOBAL_LAYERS = "full_attention"
# The config classes whose names for what harness.hf reads differ from HF's usual ones (their `attribute_map`;
# tests/test_hf_config_classes.py checks this against every class transformers has): the JSON key -> HF's name.
ATTRIBUTE_MAPS = {
    "bailing_hybrid": {"max_position_embeddings": "model_max_length"},
    "dbrx": {"num_attention_heads": "n_heads", "hidden_size": "d_model", "max_position_embeddings": "max_seq_len"},
    "glm4_moe_lite": {"head_dim": "qk_rope_head_dim"},
    "jetmoe": {"head_dim": "kv_channels"},
    "moonshine": {"num_attention_heads": "decoder_num_attention_heads"},
    "zamba2": {"head_dim": "attention_head_dim"},
}
COMMON_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")
# What each value HF's config may hold must be (null = absent everywhere): checked before any use, so a wrong
# type, NaN or a negative length is one line naming the key, never a traceback or a silently wrong encoding.
KINDS = {
    "int>0": "a positive integer", "num>0": "a finite number > 0", "num>=0": "a finite number >= 0",
    "num>=1": "a finite number >= 1", "(0,1]": "a finite number in (0, 1]", "bool": "true or false",
    "str": "a string", "list>0": "a non-empty list of finite numbers > 0", "dict": "a JSON object",
    "list": "a list",
}
TOP_LEVEL = {"head_dim": "int>0", "qk_rope_head_dim": "int>0", "hidden_size": "int>0", "global_head_dim": "int>0",
             "num_attention_heads": "int>0", "max_position_embeddings": "int>0", ORIGINAL: "int>0",
             "rope_theta": "num>0", "partial_rotary_factor": "(0,1]", "rope_interleave": "bool", "model_type": "str",
             "rope_parameters": "dict", "rope_scaling": "dict", "per_layer_config": "dict", "layer_types": "list",
             "text_config": "dict"}
# every key a rope_parameters dict may hold (COMMON_KEYS and each type's own: tests check none is missing)
ROPE_KEYS = {"rope_type": "str", "type": "str", "rope_theta": "num>0", "partial_rotary_factor": "(0,1]",
             "factor": "num>=1", ORIGINAL: "int>0", "attention_factor": "num>0", "beta_fast": "num>0",
             "beta_slow": "num>0", "mscale": "num>=0", "mscale_all_dim": "num>=0", "low_freq_factor": "num>0",
             "high_freq_factor": "num>0", "truncate": "bool", "short_factor": "list>0", "long_factor": "list>0"}
JSON_TYPES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
              dict: "an object", type(None): "null"}
RAW_ROPE = ("rope_parameters", "rope_scaling", "rope_theta")  # a config with none of them keeps its rope elsewhere


@dataclass
class Resolved:
    """One layer type's RoPE as HF standardizes it, and what HF's init functions read beside it."""

    rope: dict  # rope_parameters of the layer type: rope_type (or legacy type), rope_theta, partial factor, its keys
    head_dim: Optional[int]  # the layer's head size, before partial_rotary_factor; None: `problem` says why
    max_len: Optional[int]  # max_position_embeddings
    interleaved: bool  # features paired (2j, 2j+1) instead of (j, j + D/2)
    model_type: Optional[str]  # of the config the rope is read from (a composite's text config)
    problem: Optional[str] = None  # why there is no head size (refused after the rope_type, which may say more)


class LayerTypeError(ValueError):
    """A per-layer-type config read without a valid layer_type (`choices`), or a flat one read with one."""

    def __init__(self, message, choices=()):
        super().__init__(message)
        self.choices = list(choices)


def _finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fits(v, kind):
    if kind == "int>0":
        return isinstance(v, int) and not isinstance(v, bool) and v > 0
    if kind.startswith("num"):
        return _finite(v) and (v > 0 if kind == "num>0" else v >= 0 if kind == "num>=0" else v >= 1)
    if kind == "(0,1]":
        return _finite(v) and 0 < v <= 1
    if kind == "list>0":
        return isinstance(v, list) and len(v) > 0 and all(_finite(x) and x > 0 for x in v)
    return isinstance(v, {"bool": bool, "str": str, "dict": dict, "list": list}[kind])


def show(v):
    """A value as one short phrase with its JSON type: `'1e4' (a string)`."""
    text = repr(v) if not isinstance(v, float) or math.isfinite(v) else str(v)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({JSON_TYPES.get(type(v), type(v).__name__)})"


def check_values(d, kinds, where=""):
    """ValueError in one line naming the first key of d (a dict) whose value is not of its kind; null passes."""
    for key, kind in kinds.items():
        v = d.get(key)
        if v is not None and not _fits(v, kind):
            raise ValueError(f"{where}{key} must be {KINDS[kind]}, got {show(v)}")


def pick(name, inner, outer, strict=True):
    """inner (rope_parameters) else outer (top level); None is absent, as HF's `.get` reads it. Differing values
    are an error where HF would silently prefer one (strict), not in a per-layer dict, which HF fills from the top
    level only where it is absent (standardize_rope_params)."""
    if strict and inner is not None and outer is not None and inner != outer:
        raise ValueError(f"conflicting {name}: {inner!r} in rope_parameters, {outer!r} at the top level; keep one")
    return outer if inner is None else inner


def text_part(config):
    """The part of config.json that holds the text model's RoPE: a composite's text_config (Gemma 3, Qwen2-VL:
    HF's get_text_config) when the top level has none; with HF's names for the keys its class names otherwise."""
    inner = config.get("text_config")
    if isinstance(inner, dict) and all(config.get(k) is None for k in RAW_ROPE):
        config = inner
    names = ATTRIBUTE_MAPS.get(config.get("model_type"), {})  # HF's name -> the class's own
    return {**config, **{hf: config[own] for hf, own in names.items() if config.get(own) is not None}}


def rope_dict(config):
    """(rope_parameters or rope_scaling as given, whether it is per layer type), every value checked."""
    new, old = config.get("rope_parameters"), config.get("rope_scaling")
    if new and old and new != old:
        # convert_rope_params_to_dict takes rope_scaling over rope_parameters; two different ones are a mistake
        raise ValueError("config has both rope_parameters and rope_scaling and they differ; keep rope_parameters")
    name = "rope_parameters" if new else "rope_scaling"
    rp = dict(new or old or {})
    # v5 nests per layer type (Gemma 3: {"sliding_attention": {...}, "full_attention": {...}})
    if any(isinstance(v, dict) for v in rp.values()):
        for key, v in rp.items():
            if v is not None and not isinstance(v, dict):
                raise ValueError(f"{name} is per layer type, so {name}.{key} must be a JSON object (that layer "
                                 f"type's rope parameters), got {show(v)}")
            check_values(v or {}, ROPE_KEYS, f"{name}.{key}.")
        return rp, True
    check_values(rp, ROPE_KEYS, f"{name}.")
    return rp, False


def rope_type_of(rp):
    """The rope_type a rope_parameters dict names (rope_type, else the legacy `type`, else default), old names
    mapped; one line where the two keys disagree."""
    rope_type, legacy = rp.get("rope_type"), rp.get("type")
    if rope_type is not None and legacy is not None and LEGACY_TYPES.get(legacy, legacy) != rope_type:
        raise ValueError(f"conflicting rope_type {rope_type!r} and legacy type {legacy!r}; keep rope_type")
    name = rope_type if rope_type is not None else legacy if legacy is not None else "default"
    return LEGACY_TYPES.get(name, name)


def lint(config):
    """The checks both readings run on the JSON as given: every value's kind, and what HF would resolve silently
    by a priority (rope_parameters and rope_scaling that differ, a top-level value that contradicts
    rope_parameters, a dynamic NTK trained length HF never reads)."""
    if not isinstance(config, dict):
        raise ValueError(f"an HF config.json holds a JSON object; got {show(config)}")
    check_values(config, TOP_LEVEL)
    part = text_part(config)
    where = "text_config." if config.get("text_config") is not None and all(
        config.get(k) is None for k in RAW_ROPE) else ""
    check_values(part, TOP_LEVEL, where)
    rp, nested = rope_dict(part)
    max_len = part.get("max_position_embeddings")
    for layer in (v for v in rp.values() if isinstance(v, dict)) if nested else [rp]:
        rope_type = rope_type_of(layer)
        if not nested:
            for key in ("rope_theta", "partial_rotary_factor"):
                pick(key, layer.get(key), part.get(key))
            if rope_type in ORIGINAL_LENGTH_TYPES:
                pick(ORIGINAL, layer.get(ORIGINAL), part.get(ORIGINAL))
        if rope_type in LENGTH_FROM_MAX_POSITIONS:
            for given in (layer.get(ORIGINAL), None if nested else part.get(ORIGINAL)):
                if given is not None and given != max_len:
                    raise ValueError(f"{ORIGINAL} {given} differs from max_position_embeddings {max_len}, which "
                                     f"HF's {rope_type!r} RoPE uses as the trained length; drop it or make them equal")


def choose_layer(rp, nested, layer_type):
    """The rope dict of layer_type in rp (per layer type when nested); LayerTypeError naming the valid ones."""
    if not nested:
        if layer_type is not None:
            raise LayerTypeError(f"layer_type {layer_type!r} given, but this config's rope parameters are not per "
                                 f"layer type (only nested rope_parameters, as Gemma 3's, have layer types); drop it")
        return dict(rp)
    valid = sorted(k for k, v in rp.items() if v is not None)
    if layer_type in rp and rp[layer_type] is None:
        raise LayerTypeError(f"layer type {layer_type!r} has no RoPE (rope_parameters.{layer_type} is null: those "
                             f"layers are NoPE); the ones with RoPE: {valid}", valid)
    if layer_type not in valid:
        raise LayerTypeError(f"rope_parameters is per layer type; layer_type {layer_type!r} is not one of {valid}",
                             valid)
    return dict(rp[layer_type])


def _layer_head_dim(config, layer_type):
    """The head size per_layer_config gives every layer of layer_type (HF's per_layer_config[layer_type]), or the
    hub's global_head_dim for full-attention layers; None where neither says."""
    types, overrides = config.get("layer_types") or [], config.get("per_layer_config") or {}
    try:  # v5 writes the layer indices zero-padded ("05"), as strings
        by_layer = {int(k): v or {} for k, v in overrides.items()}
    except ValueError:
        raise ValueError(f"per_layer_config keys must be layer indices, got {sorted(overrides)[:4]}") from None
    dims = {by_layer.get(i, {}).get("head_dim") for i, t in enumerate(types) if t == layer_type} if by_layer else set()
    if len(dims) > 1:
        raise ValueError(f"per_layer_config gives the {layer_type} layers different head_dim {sorted(dims, key=str)}")
    dim = dims.pop() if dims else None
    if dim is None and layer_type == GLOBAL_LAYERS:
        dim = config.get("global_head_dim")
        if dim is None and config.get("model_type") in GLOBAL_HEAD_DIM_TYPES:
            raise ValueError(f"model_type {config['model_type']!r} gives its {GLOBAL_LAYERS} layers their own head "
                             f"size (global_head_dim, 512 in transformers' default) and this config has neither "
                             f"global_head_dim nor per_layer_config; add global_head_dim, or install transformers")
    return dim


def head_dim(config, layer_type=None):
    """HF's head size: the layer type's own, else head_dim (null in some configs), else qk_rope_head_dim (MLA:
    DeepSeek-V2/V3 rotate only that slice; DeepseekV3Config sets head_dim to it), else hidden_size // heads."""
    dim = _layer_head_dim(config, layer_type) if layer_type is not None else None
    for key in ("head_dim", "qk_rope_head_dim"):
        dim = dim or config.get(key)
    if not dim and config.get("hidden_size") and config.get("num_attention_heads"):
        dim = config["hidden_size"] // config["num_attention_heads"]
    if not dim:
        raise ValueError("config needs head_dim, or hidden_size and num_attention_heads (qk_rope_head_dim for MLA)")
    return int(dim)


def resolve(config, layer_type=None) -> Resolved:
    """The layer type's RoPE by HF's rules read by hand (standardize_rope_params: rope_type from the legacy type,
    the top-level rope_theta and partial_rotary_factor, the pretraining length of llama3 / yarn / longrope, Phi-3's
    top-level one first in a flat dict); `lint` has run."""
    config = text_part(config)
    rp, nested = rope_dict(config)
    rope = choose_layer(rp, nested, layer_type)
    for key in ("rope_theta", "partial_rotary_factor"):
        if rope.get(key) is None and config.get(key) is not None:
            rope[key] = config[key]
    if rope_type_of(rope) in ORIGINAL_LENGTH_TYPES:
        top = None if nested else config.get(ORIGINAL)
        rope[ORIGINAL] = top or rope.get(ORIGINAL) or config.get("max_position_embeddings")
    model_type = config.get("model_type")
    interleave = config.get("rope_interleave")
    interleaved = model_type in ROTARY_INTERLEAVES or (
        model_type in INTERLEAVED_MODEL_TYPES if interleave is None else bool(interleave))
    return Resolved(rope, head_dim(config, layer_type), config.get("max_position_embeddings"), interleaved, model_type)


def read_config(path) -> dict:
    """An HF config.json as a dict; ValueError in one line naming the file and what is wrong with it."""
    import json
    from pathlib import Path
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: not a readable JSON file ({e.strerror.lower() if e.strerror else e})") from None
    if not raw.strip():
        raise ValueError(f"{path}: not a readable JSON file (it is empty)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a readable JSON file (binary, not UTF-8 text)") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a readable JSON file ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"{path}: not a readable JSON file (nested too deeply)") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: an HF config.json holds a JSON object, got {show(cfg)}")
    return cfg
