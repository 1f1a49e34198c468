"""HF transformers `config.json` <-> the keyword parameters of the `rope` encoding.

`rope_from_hf` reads what HF's RoPE init functions read (transformers/modeling_rope_utils.py:
`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict` / `standardize_rope_params`, then `ROPE_INIT_FUNCTIONS`
or a model's `compute_default_rope_parameters`), so `build("rope", **rope_from_hf(cfg))` has HF's inv_freq and
attention_factor. `rope_to_hf` writes the fragment HF v5 saves (`PreTrainedConfig.to_dict`: `head_dim` top-level,
`rope_theta` and the type's keys inside `rope_parameters`). Parameters in the form `rope_from_hf` returns (every
constructor knob but `impl` spelled out) round-trip exactly: `rope_from_hf(rope_to_hf(p)) == p`.
"""
import inspect
from pathlib import Path

from harness.encodings import ENCODINGS
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, frequencies

# HF's rope_types: the keys of its ROPE_INIT_FUNCTIONS plus "default" (each model's own
# `compute_default_rope_parameters`). Ours minus `ntk` (static NTK-aware base, which HF never had).
HF_ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")
# Old names HF still maps: `su` was Phi-3's first name for LongRoPE (Phi3Config.convert_rope_params_to_dict).
LEGACY_TYPES = {"su": "longrope"}
# Types whose pretraining length HF fills from max_position_embeddings when the config has none, preferring a
# top-level `original_max_position_embeddings` (Phi-3 keeps it there) to the one in rope_parameters
# (standardize_rope_params).
ORIGINAL_LENGTH_TYPES = ("llama3", "yarn", "longrope")
# Types whose missing or null `factor` HF derives as max_position_embeddings / original_max_position_embeddings
# (_compute_yarn_parameters: DeepSeek-V3; _compute_longrope_parameters: Phi-3, whose rope_scaling has no factor).
DERIVED_FACTOR_TYPES = ("yarn", "longrope")
# Types for which HF takes the trained length from `max_position_embeddings` itself and never reads
# rope_parameters' original_max_position_embeddings (_compute_dynamic_ntk_parameters; dynamic_rope_update's
# original_max_seq_len). Our `dynamic` names that length original_max_position_embeddings.
LENGTH_FROM_MAX_POSITIONS = ("dynamic",)
# model_types whose HF attention pairs features (2j, 2j+1) when config.json has no `rope_interleave`: the config
# classes that default it to True (DeepseekV3Config, Glm4MoeLiteConfig, Mistral4Config, YoutuConfig, Axk1Config)
# and DeepSeek-V2's complex-number apply_rotary_emb (torch.view_as_complex over (..., D/2, 2)).
INTERLEAVED_MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1")
# Keys HF requires (its _validate_<type>_rope_parameters, and its init function indexes them) where our function
# has a default: a config without them fails in HF, so it must not quietly get ours.
HF_REQUIRED = {"llama3": ("low_freq_factor", "high_freq_factor")}
# Keys any rope_parameters dict may hold besides its type's own (transformers' RopeParameters TypedDict).
COMMON_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")
ORIGINAL = "original_max_position_embeddings"


def _type_keys(rope_type):
    """(every rope_parameters key rope_type takes, the required ones): our function's keyword-only parameters."""
    params = inspect.signature(ROPE_INIT_FUNCTIONS[rope_type]).parameters
    kw = {n: p for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n != "partial_rotary_factor"}
    return sorted(kw), sorted(n for n, p in kw.items() if p.default is p.empty)


def _pick(name, inner, outer, strict=True):
    """inner (rope_parameters) else outer (top level); None is absent, as HF's `.get` reads it. Differing values
    are an error where HF would silently prefer one (strict), not in a per-layer dict, which HF fills from the top
    level only where it is absent (standardize_rope_params)."""
    if strict and inner is not None and outer is not None and inner != outer:
        raise ValueError(f"conflicting {name}: {inner!r} in rope_parameters, {outer!r} at the top level; keep one")
    return outer if inner is None else inner


def _rope_dict(config, layer_type):
    """(the flat rope dict for layer_type, whether it came from a per-layer dict)."""
    new, old = config.get("rope_parameters"), config.get("rope_scaling")
    if new and old and new != old:
        # convert_rope_params_to_dict takes rope_scaling over rope_parameters; two different ones are a mistake
        raise ValueError("config has both rope_parameters and rope_scaling and they differ; keep rope_parameters")
    rp = dict(new or old or {})
    # v5 nests per layer type (Gemma 3: {"sliding_attention": {...}, "full_attention": {...}})
    if rp and all(isinstance(v, dict) or v is None for v in rp.values()):
        if layer_type not in rp or rp[layer_type] is None:
            raise ValueError(f"rope_parameters is per layer type; layer_type {layer_type!r} is not one of "
                             f"{sorted(k for k, v in rp.items() if v is not None)}")
        return dict(rp[layer_type]), True
    return rp, False


def _head_dim(config):
    # MLA (DeepSeek-V2/V3): RoPE rotates only the qk_rope_head_dim slice (DeepseekV3Config sets head_dim to it);
    # then head_dim, null in some configs (HF: `getattr(config, "head_dim", None) or hidden_size // heads`)
    for key in ("qk_rope_head_dim", "head_dim"):
        if config.get(key):
            return int(config[key])
    if config.get("hidden_size") and config.get("num_attention_heads"):
        return config["hidden_size"] // config["num_attention_heads"]
    raise ValueError("config needs head_dim, or hidden_size and num_attention_heads (qk_rope_head_dim for MLA)")


def _rope_type(rp):
    rope_type, legacy = rp.get("rope_type"), rp.get("type")
    if rope_type is not None and legacy is not None and LEGACY_TYPES.get(legacy, legacy) != rope_type:
        raise ValueError(f"conflicting rope_type {rope_type!r} and legacy type {legacy!r}; keep rope_type")
    name = rope_type if rope_type is not None else legacy if legacy is not None else "default"
    rope_type = LEGACY_TYPES.get(name, name)
    if rope_type not in HF_ROPE_TYPES:
        raise ValueError(f"unknown rope_type {rope_type!r}; expected one of {list(HF_ROPE_TYPES)}")
    return rope_type


def _scaling(config, rp, rope_type, nested):
    """The type's own keys, with HF's fallbacks for the trained length and the factor filled in."""
    takes, required = _type_keys(rope_type)
    scaling = {k: v for k, v in rp.items() if k not in COMMON_KEYS and v is not None}
    unknown = sorted(set(scaling) - set(takes))
    if unknown:
        raise ValueError(f"rope_parameters keys {unknown} are not taken by rope_type {rope_type!r}; "
                         f"its keys: {takes}")
    max_len = config.get("max_position_embeddings")
    if rope_type in LENGTH_FROM_MAX_POSITIONS:
        for given in (scaling.get(ORIGINAL), config.get(ORIGINAL)):
            if given is not None and given != max_len:
                raise ValueError(f"{ORIGINAL} {given} differs from max_position_embeddings {max_len}, which HF's "
                                 f"{rope_type!r} RoPE uses as the trained length; drop it or make them equal")
        if max_len is None:
            raise ValueError(f"rope_type {rope_type!r} needs max_position_embeddings (HF's trained length for it)")
        scaling[ORIGINAL] = max_len
    if rope_type in ORIGINAL_LENGTH_TYPES:
        # Phi-3 keeps the pretraining length at the top level (a per-layer dict never reads it); HF falls back to
        # max_position_embeddings
        top = None if nested else config.get(ORIGINAL)
        original = _pick(ORIGINAL, scaling.get(ORIGINAL), top) or max_len
        if original is None:
            raise ValueError(f"rope_type {rope_type!r} needs {ORIGINAL} (or max_position_embeddings)")
        scaling[ORIGINAL] = original
    if rope_type in DERIVED_FACTOR_TYPES and "factor" not in scaling and max_len is not None:
        scaling["factor"] = max_len / scaling[ORIGINAL]
    missing = [k for k in sorted({*required, *HF_REQUIRED.get(rope_type, ())}) if k not in scaling]
    if missing:
        raise ValueError(f"rope_parameters for rope_type {rope_type!r} needs {missing}; its keys: {takes}")
    return scaling


def _layout(config):
    # DeepseekV3Config & co. default rope_interleave to True, so their hub config.json often omits it
    interleave = config.get("rope_interleave")
    if interleave is None:
        interleave = config.get("model_type") in INTERLEAVED_MODEL_TYPES
    return "interleaved" if interleave else "half"


def rope_from_hf(config: dict, *, layer_type: str | None = None) -> dict:
    """The `rope` encoding's parameters (head_dim, base, layout, partial_rotary_factor, rope_type, scaling) from
    an HF config.json dict, v4 (`rope_scaling`, top-level `rope_theta`) or v5 (`rope_parameters`, per layer type
    when nested: pass `layer_type`). Bad input raises ValueError in one line naming the key."""
    rp, nested = _rope_dict(config, layer_type)
    rope_type = _rope_type(rp)
    base = _pick("rope_theta", rp.get("rope_theta"), config.get("rope_theta"), not nested)
    if base is None:
        # HF would fall back to the config class's default_theta, which differs by class (10000, 5e5, 1e6, ...)
        raise ValueError("config needs rope_theta (top level or in rope_parameters); HF's default depends on the class")
    partial = _pick("partial_rotary_factor", rp.get("partial_rotary_factor"), config.get("partial_rotary_factor"),
                    not nested)
    params = {"head_dim": _head_dim(config), "base": float(base), "layout": _layout(config),
              "partial_rotary_factor": float(1.0 if partial is None else partial), "rope_type": rope_type,
              "scaling": _scaling(config, rp, rope_type, nested)}
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
    if p["rope_type"] not in HF_ROPE_TYPES:
        raise ValueError(f"rope_type {p['rope_type']!r} has no HF equivalent; HF's: {list(HF_ROPE_TYPES)}")
    p["scaling"] = dict(p["scaling"] or {})
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


def _hydra(v):
    """A value in Hydra's override grammar: dicts as {k: v}, lists as [a, b], scalars as themselves."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_hydra(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(_hydra, v)) + "]"
    return str(v)


def overrides(params: dict) -> list:
    """Hydra overrides that select these rope parameters (`python -m harness ...`); head_dim is the model's.
    A dict or list is quoted for the shell and forced with ++ (rope.yaml's `scaling: {}` has no keys to
    override)."""
    out = ["encoding=rope"]
    for k, v in params.items():
        if k != "head_dim":
            out.append(f"'++encoding.{k}={_hydra(v)}'" if isinstance(v, (dict, list)) else f"encoding.{k}={v}")
    return out


def from_run(run_dir) -> dict:
    """The HF fragment of a run's rope encoding (its resolved .hydra/config.yaml); head_dim from the model."""
    import yaml
    f = Path(run_dir) / ".hydra" / "config.yaml"
    if not f.is_file():
        raise ValueError(f"{run_dir}: no .hydra/config.yaml (a run dir of python -m harness)")
    cfg = yaml.safe_load(f.read_text())
    enc, model = dict(cfg.get("encoding") or {}), cfg.get("model") or {}
    if enc.pop("name", None) != "rope":
        raise ValueError(f"{run_dir}: its encoding is not rope; HF configs describe RoPE")
    head_dim = model.get("head_dim") or model["d_model"] // model["n_heads"]
    return rope_to_hf({**enc, "head_dim": head_dim})


def main(argv=None):
    import argparse
    import json
    import sys
    ap = argparse.ArgumentParser(prog="python -m harness.hf_config",
                                 description="HF config.json -> Hydra overrides of encoding=rope, or a run -> HF")
    ap.add_argument("config", nargs="?", help="an HF config.json")
    ap.add_argument("--layer-type", help="with per-layer-type rope_parameters (Gemma 3): which one")
    ap.add_argument("--from-run", metavar="RUN_DIR", help="print the HF rope fragment of this run's encoding")
    a = ap.parse_args(argv)
    try:
        if (a.config is None) == (a.from_run is None):
            raise ValueError("give an HF config.json or --from-run RUN_DIR (one of them)")
        if a.from_run:
            print(json.dumps(from_run(a.from_run), indent=1))
            return 0
        try:
            cfg = json.loads(Path(a.config).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{a.config}: not a readable JSON file ({e})") from None
        params = rope_from_hf(cfg, layer_type=a.layer_type)
    except ValueError as e:
        print(f"harness.hf_config: error: {e}", file=sys.stderr)
        return 2
    print(" ".join(overrides(params)))
    print(f"# head_dim {params['head_dim']}: choose model.d_model / model.n_heads to give it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["HF_ROPE_TYPES", "from_run", "main", "overrides", "rope_from_hf", "rope_to_hf"]
