"""HF transformers `config.json` <-> the keyword parameters of the `rope` encoding.

`rope_from_hf` reads what HF's RoPE init functions read (transformers/modeling_rope_utils.py:
`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict` / `standardize_rope_params`, then `ROPE_INIT_FUNCTIONS`
or a model's `compute_default_rope_parameters`), so `build("rope", **rope_from_hf(cfg))` has HF's inv_freq and
attention_factor. `rope_to_hf` writes the fragment HF v5 saves (`PreTrainedConfig.to_dict`: `head_dim` top-level,
`rope_theta` and the type's keys inside `rope_parameters`). Parameters in the form `rope_from_hf` returns (every
constructor knob but `impl` spelled out) round-trip exactly: `rope_from_hf(rope_to_hf(p)) == p`.
"""
import inspect
import math
from pathlib import Path

from harness.encodings import ENCODINGS
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, frequencies
from harness.rope.rotation import LAYOUTS

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
# What each value HF's config may hold must be (null = absent everywhere): checked before any use, so a wrong
# type, NaN or a negative length is one line naming the key, never a traceback or a silently wrong encoding.
KINDS = {
    "int>0": "a positive integer", "num>0": "a finite number > 0", "num>=0": "a finite number >= 0",
    "num>=1": "a finite number >= 1", "(0,1]": "a finite number in (0, 1]", "bool": "true or false",
    "str": "a string", "list>0": "a non-empty list of finite numbers > 0", "dict": "a JSON object",
}
TOP_LEVEL = {"head_dim": "int>0", "qk_rope_head_dim": "int>0", "hidden_size": "int>0",
             "num_attention_heads": "int>0", "max_position_embeddings": "int>0", ORIGINAL: "int>0",
             "rope_theta": "num>0", "partial_rotary_factor": "(0,1]", "rope_interleave": "bool", "model_type": "str",
             "rope_parameters": "dict", "rope_scaling": "dict"}
# every key a rope_parameters dict may hold (COMMON_KEYS and each type's own: tests check none is missing)
ROPE_KEYS = {"rope_type": "str", "type": "str", "rope_theta": "num>0", "partial_rotary_factor": "(0,1]",
             "factor": "num>=1", ORIGINAL: "int>0", "attention_factor": "num>0", "beta_fast": "num>0",
             "beta_slow": "num>0", "mscale": "num>=0", "mscale_all_dim": "num>=0", "low_freq_factor": "num>0",
             "high_freq_factor": "num>0", "truncate": "bool", "short_factor": "list>0", "long_factor": "list>0"}
JSON_TYPES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
              dict: "an object", type(None): "null"}


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
    return isinstance(v, {"bool": bool, "str": str, "dict": dict}[kind])


def _show(v):
    text = repr(v) if not isinstance(v, float) or math.isfinite(v) else str(v)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({JSON_TYPES.get(type(v), type(v).__name__)})"


def _check_values(d, kinds, where=""):
    """ValueError in one line naming the first key of d (a dict) whose value is not of its kind; null passes."""
    for key, kind in kinds.items():
        v = d.get(key)
        if v is not None and not _fits(v, kind):
            raise ValueError(f"{where}{key} must be {KINDS[kind]}, got {_show(v)}")


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
    """(the flat rope dict for layer_type, whether it came from a per-layer dict), its values checked."""
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
                                 f"type's rope parameters), got {_show(v)}")
            _check_values(v or {}, ROPE_KEYS, f"{name}.{key}.")
        if layer_type not in rp or rp[layer_type] is None:
            raise ValueError(f"rope_parameters is per layer type; layer_type {layer_type!r} is not one of "
                             f"{sorted(k for k, v in rp.items() if v is not None)}")
        return dict(rp[layer_type]), True
    if layer_type is not None:
        raise ValueError(f"layer_type {layer_type!r} given, but this config's rope parameters are not per layer "
                         f"type (only nested rope_parameters, as Gemma 3's, have layer types); drop it")
    _check_values(rp, ROPE_KEYS, f"{name}.")
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
    if not isinstance(config, dict):
        raise ValueError(f"an HF config.json holds a JSON object; got {_show(config)}")
    _check_values(config, TOP_LEVEL)
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
    _check_values({"head_dim": p["head_dim"], "base": p["base"], "partial_rotary_factor": p["partial_rotary_factor"],
                   "rope_type": p["rope_type"], "scaling": p["scaling"]},
                  {"head_dim": "int>0", "base": "num>0", "partial_rotary_factor": "(0,1]", "rope_type": "str",
                   "scaling": "dict"})
    if p["layout"] not in LAYOUTS:
        raise ValueError(f"unknown layout {p['layout']!r}; expected one of {list(LAYOUTS)}")
    if p["rope_type"] not in HF_ROPE_TYPES:
        raise ValueError(f"rope_type {p['rope_type']!r} has no HF equivalent; HF's: {list(HF_ROPE_TYPES)}")
    p["scaling"] = dict(p["scaling"] or {})
    _check_values(p["scaling"], ROPE_KEYS, "scaling.")
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
    """The HF fragment of a run's rope encoding (its resolved .hydra/config.yaml); head_dim from the model.
    Bad input raises ValueError in one line naming the file and the key."""
    import yaml
    f = Path(run_dir) / ".hydra" / "config.yaml"
    if not f.is_file():
        raise ValueError(f"{run_dir}: no .hydra/config.yaml (a run dir of python -m harness)")
    try:
        cfg = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        mark = getattr(e, "problem_mark", None)
        what = getattr(e, "problem", None) or getattr(e, "reason", None) or getattr(e, "strerror", None) or e
        raise ValueError(f"{f}: not a readable YAML file ({what}"
                         f"{f' at line {mark.line + 1}' if mark else ''})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{f}: a run config holds a mapping, got {_show(cfg)}")
    enc, model = cfg.get("encoding"), cfg.get("model")
    for key, v in (("encoding", enc), ("model", model)):
        if not isinstance(v, dict):
            raise ValueError(f"{f}: {key} must be a mapping, got {_show(v)}")
    enc = dict(enc)
    if enc.pop("name", None) != "rope":
        raise ValueError(f"{run_dir}: its encoding is not rope; HF configs describe RoPE")
    try:
        _check_values(model, {"head_dim": "int>0", "d_model": "int>0", "n_heads": "int>0"}, "model.")
        if model.get("head_dim") is None and None in (model.get("d_model"), model.get("n_heads")):
            raise ValueError("model needs head_dim, or d_model and n_heads")
        head_dim = model.get("head_dim") or model["d_model"] // model["n_heads"]
        return rope_to_hf({**enc, "head_dim": head_dim})
    except ValueError as e:
        raise ValueError(f"{f}: {e}") from None


def _parser(**kw):
    """argparse whose usage errors are one line (`prog: error: ...`, exit 2) like every other refusal here."""
    import argparse
    import sys

    class OneLine(argparse.ArgumentParser):
        def error(self, message):
            print(f"{self.prog.removeprefix('python -m ')}: error: {message}; see --help", file=sys.stderr)
            raise SystemExit(2)
    return OneLine(**kw)


def read_config(path) -> dict:
    """An HF config.json as a dict; ValueError in one line naming the file and what is wrong with it."""
    import json
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
        raise ValueError(f"{path}: an HF config.json holds a JSON object, got {_show(cfg)}")
    return cfg


def main(argv=None):
    import json
    import sys
    ap = _parser(prog="python -m harness.hf_config",
                 description="HF config.json -> Hydra overrides of encoding=rope, or a run -> HF")
    ap.add_argument("config", nargs="?", help="an HF config.json")
    ap.add_argument("--layer-type", help="with per-layer-type rope_parameters (Gemma 3): which one")
    ap.add_argument("--from-run", metavar="RUN_DIR", help="print the HF rope fragment of this run's encoding")
    a = ap.parse_args(argv)
    try:
        if (a.config is None) == (a.from_run is None):
            raise ValueError("give an HF config.json or --from-run RUN_DIR (one of them)")
        if a.from_run:
            if a.layer_type is not None:
                raise ValueError("--layer-type reads an HF config.json; a run has one rope encoding")
            print(json.dumps(from_run(a.from_run), indent=1))
            return 0
        cfg = read_config(a.config)
        try:
            params = rope_from_hf(cfg, layer_type=a.layer_type)
        except ValueError as e:
            raise ValueError(f"{a.config}: {e}") from None
    except ValueError as e:
        print(f"harness.hf_config: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(" ".join(overrides(params)))
    print(f"# head_dim {params['head_dim']}: choose model.d_model / model.n_heads to give it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["HF_ROPE_TYPES", "from_run", "main", "overrides", "read_config", "rope_from_hf", "rope_to_hf"]
