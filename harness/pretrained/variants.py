"""The eval-time RoPE variants of the pretrained study, built as the harness's own encodings from the checkpoint's
config: its head_dim, base and layout (`harness.hf_config.rope_from_hf`), then the variant's rope_type with HF's
rope_parameters keys (factor; original_max_position_embeddings = the checkpoint's trained context; HF's defaults
for the rest: YaRN beta_fast 32, beta_slow 1; Llama 3 low/high_freq_factor 1/4)."""
import inspect

from harness import encodings
from harness.hf_config import rope_from_hf
from harness.measure.extension import SELF_SCALING
from harness.rope import ROPE_INIT_FUNCTIONS

# name -> (encoding, rope_type). `none` is the checkpoint's own RoPE; `resonance_yarn` is YaRN with every
# wavelength rounded to an integer (Wang et al. 2024, arXiv 2403.00071, their ResonanceYaRN).
EXTENSIONS = {
    "none": ("rope", "default"),
    "linear": ("rope", "linear"),          # PI, Chen et al. 2023 (arXiv 2306.15595)
    "ntk": ("rope", "ntk"),                # static NTK-aware base, bloc97 2023
    "dynamic": ("rope", "dynamic"),        # dynamic NTK (HF's `dynamic`)
    "yarn": ("rope", "yarn"),              # Peng et al. 2023 (arXiv 2309.00071)
    "llama3": ("rope", "llama3"),          # Llama 3.1 (arXiv 2407.21783)
    "resonance_yarn": ("rope_resonance", "yarn"),
}
# HF's defaults where our functions take them as knobs (transformers/modeling_rope_utils.py)
HF_DEFAULTS = dict(beta_fast=32.0, beta_slow=1.0, low_freq_factor=1.0, high_freq_factor=4.0)


def trained_len(hf_config: dict) -> int:
    """The checkpoint's trained context: HF's max_position_embeddings (SmolLM2 8192, Gemma 3 270M 32768)."""
    return int(hf_config["max_position_embeddings"])


def factor_for(extension, factor):
    """The factor a variant applies: none takes none (1); dynamic NTK rescales by length / trained length
    itself, so its HF factor is 1, as in the laptop study (harness.measure.extension.SELF_SCALING)."""
    rope_type = EXTENSIONS[extension][1]
    return 1.0 if rope_type == "default" or rope_type in SELF_SCALING else float(factor)


def build(hf_config: dict, extension: str, factor: float, impl: str = "eager"):
    """(encoding, its parameters) for one variant: a harness `rope`-family encoding with the checkpoint's RoPE."""
    if extension not in EXTENSIONS:
        raise ValueError(f"unknown pretrained.extension {extension!r}; expected one of {list(EXTENSIONS)}")
    name, rope_type = EXTENSIONS[extension]
    params = rope_from_hf(hf_config)
    if params["rope_type"] != "default":
        raise ValueError(f"the checkpoint already has rope_type {params['rope_type']!r}; the study extends a "
                         f"checkpoint trained with plain RoPE")
    f = factor_for(extension, factor)
    offered = dict(HF_DEFAULTS, factor=f, original_max_position_embeddings=trained_len(hf_config))
    takes = inspect.signature(ROPE_INIT_FUNCTIONS[rope_type]).parameters
    params.update(rope_type=rope_type, scaling={k: v for k, v in offered.items() if k in takes}, impl=impl)
    return encodings.build(name, **params), {"encoding": name, **params, "extension": extension, "factor": f}
