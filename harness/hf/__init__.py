"""HF transformers `config.json` <-> the keyword parameters of the `rope` encoding.

`rope_from_hf` reads a config.json as HF does: with transformers installed, through the model_type's own config
class (harness.hf.classes: HF's `standardize_rope_params`, its layer types and per-layer configs, so Gemma 4's
full-attention layers get their own head_dim), else by HF's rules read by hand from the plain JSON
(harness.hf.plain, which also checks every value first); then the type's keys as HF's `ROPE_INIT_FUNCTIONS` read
them (harness.hf.rope), so `build("rope", **rope_from_hf(cfg))` has the inv_freq and attention factor of the
model's own rotary class (tests/test_hf_config_classes.py: every config class transformers has with a RoPE).
`rope_to_hf` writes the fragment HF v5 saves (`PreTrainedConfig.to_dict`: `head_dim` top-level, `rope_theta` and the
type's keys inside `rope_parameters`). Parameters in the form `rope_from_hf` returns (every constructor knob but
`impl` spelled out) round-trip exactly: `rope_from_hf(rope_to_hf(p)) == p`.

`python -m harness.hf` is the CLI (harness.hf.cli, with `--layer-type` and `--from-run`). This facade never imports
it: the CLI reads run dirs (harness.results), and the facade stays importable by the layers below them.
"""
from harness.hf.plain import read_config
from harness.hf.rope import *  # noqa: F401,F403 - the facade: rope_from_hf, rope_to_hf and their tables
from harness.hf.rope import HF_ROPE_TYPES, LayerTypeError, rope_from_hf, rope_to_hf  # noqa: F401

__all__ = ["HF_ROPE_TYPES", "LayerTypeError", "read_config", "rope_from_hf", "rope_to_hf"]
