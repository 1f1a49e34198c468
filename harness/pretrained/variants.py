"""The eval-time RoPE variants of the pretrained study, built as the harness's own encodings from the checkpoint's
config: its head_dim, base and layout (`harness.hf.rope_from_hf`), then the variant's rope_type with HF's
rope_parameters keys (factor; original_max_position_embeddings = the checkpoint's trained context; HF's defaults
for the rest: YaRN beta_fast 32, beta_slow 1; Llama 3 low/high_freq_factor 1/4)."""
import inspect

from harness import encodings
from harness.hf import rope_from_hf
from harness.names import EXTENSION_VARIANTS
from harness.rope import ROPE_INIT_FUNCTIONS

# name -> (encoding, rope_type), harness.names.EXTENSION_VARIANTS with the checkpoint's RoPE as `rope`
EXTENSIONS = {k: (enc or "rope", t) for k, (enc, t) in EXTENSION_VARIANTS.items()}
# HF's defaults where our functions take them as knobs (transformers/modeling_rope_utils.py)
HF_DEFAULTS = dict(beta_fast=32.0, beta_slow=1.0, low_freq_factor=1.0, high_freq_factor=4.0)


def trained_len(config: dict) -> int:
    """The checkpoint's trained context: HF's max_position_embeddings (SmolLM2 8192, Gemma 3 270M 32768)."""
    return int(config["max_position_embeddings"])


def factor_for(extension, factor):
    """The factor a variant applies: none takes none (1); every other its HF `factor`. Dynamic NTK's factor
    multiplies its own length / trained length ratio (HF's _compute_dynamic_ntk_parameters), so at factor 2 it
    differs from static NTK x2; at factor 1 it equals static NTK at that ratio (rows record the applied factor)."""
    return 1.0 if EXTENSIONS[extension][1] == "default" else float(factor)


LAYERS = ("all", "global")  # which layers an extension applies to: every layer, or the full-attention ones only
GLOBAL = "full_attention"  # HF's layer type of global layers (Gemma 2/3, Qwen's mixed attention)


def layer_types(config: dict):
    """[None] for one RoPE for the whole model; the layer types of a per-layer-type rope_parameters (Gemma 3)."""
    rp = config.get("rope_parameters") or {}
    nested = rp and all(isinstance(v, dict) or v is None for v in rp.values())
    return sorted(k for k, v in rp.items() if v is not None) if nested else [None]


def check(extension, layers="all"):
    """One ValueError naming the valid choices for an unknown extension or layers setting."""
    if extension not in EXTENSIONS:
        raise ValueError(f"unknown pretrained.extension {extension!r}; expected one of {list(EXTENSIONS)}")
    if layers not in LAYERS:
        raise ValueError(f"unknown pretrained.layers {layers!r}; expected one of {list(LAYERS)}")


def build(config: dict, extension: str, factor: float, impl: str = "eager", layers: str = "all"):
    """(encoding or {layer_type: encoding}, the parameters rows record) for one variant: harness `rope`-family
    encodings with the checkpoint's RoPE per layer type, the extension applied to `layers` (all | global)."""
    check(extension, layers)
    types = layer_types(config)
    if layers == "global" and GLOBAL not in types:
        raise ValueError(f"pretrained.layers=global needs layer type {GLOBAL!r} in rope_parameters; this "
                         f"checkpoint has {types}")
    name, rope_type = EXTENSIONS[extension]
    f = factor_for(extension, factor)
    built, shown = {}, None
    for lt in types:
        params = rope_from_hf(config, layer_type=lt)
        if params["rope_type"] != "default":
            raise ValueError(f"the checkpoint already has rope_type {params['rope_type']!r}; the study extends a "
                             f"checkpoint trained with plain RoPE")
        if layers == "all" or lt == GLOBAL:
            offered = dict(HF_DEFAULTS, factor=f, original_max_position_embeddings=trained_len(config))
            takes = inspect.signature(ROPE_INIT_FUNCTIONS[rope_type]).parameters
            params.update(rope_type=rope_type, scaling={k: v for k, v in offered.items() if k in takes})
            built[lt] = encodings.build(name, **params, impl=impl)
            shown = shown or params
        else:
            built[lt] = encodings.build("rope", **params, impl=impl)
    record = {"encoding": name, **shown, "impl": impl, "extension": extension, "factor": f}
    if types != [None]:
        record.update(layers=layers, bases={str(lt): float(e.base) for lt, e in built.items()})
    return (built[None] if types == [None] else built), record
