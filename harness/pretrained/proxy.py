"""A laptop proxy of a pretrained model's RoPE geometry (harness.rope.geometry), read from the model's own config.

`proxy_rope(target, layer_type, train_len)` -> the proxy's `base` and the eval-time extension knobs counted in turns
(YaRN's betas, Llama 3's frequency factors: HF's defaults at the target, carried to the proxy), from the target's
HF config: a shipped checkpoint name (harness.pretrained.checkpoint.SHIPPED), a checkpoint directory, a
config.json, or a .gguf file (its metadata only, no weights). A layer type's span is the context its layers see:
the trained context (max_position_embeddings), or the sliding window for a sliding-attention layer type."""
import functools
import os
from pathlib import Path

from harness.rope import geometry

SLIDING = "sliding_attention"  # HF's layer type of sliding-window layers (Gemma 2/3)


@functools.lru_cache(maxsize=8)
def target_config(target: str) -> dict:
    """The target's HF config as a dict, offline; one ValueError naming what is wrong."""
    from harness.hf import read_config
    from harness.pretrained import checkpoint
    p = Path(target).expanduser()
    if p.suffix == ".json" and p.is_file():
        return read_config(p)
    if not (p.exists() or target in checkpoint.SHIPPED):
        raise ValueError(f"unknown proxy.target {target!r}; expected one of {sorted(checkpoint.SHIPPED)}, a checkpoint "
                         f"directory, a config.json or a .gguf file")
    path = checkpoint.locate(None, str(p)) if p.exists() else checkpoint.locate(target)
    if path.is_dir():
        return read_config(path / "config.json")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoConfig
    from transformers.utils import logging
    logging.set_verbosity_error()
    return AutoConfig.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True).to_dict()


def target_rope(cfg: dict, layer_type=None):
    """(base, span, rotary dims) of one layer type of the target; the span a sliding layer sees is its window."""
    from harness.hf import rope_from_hf
    from harness.pretrained.variants import layer_types
    types = layer_types(cfg)
    if types != [None] and layer_type not in types:
        raise ValueError(f"proxy.layer_type {layer_type!r}: this target has one RoPE per layer type; expected one of "
                         f"{types}")
    if types == [None] and layer_type is not None:
        raise ValueError(f"proxy.layer_type {layer_type!r}: this target has one RoPE for every layer; expected null")
    p = rope_from_hf(cfg, layer_type=layer_type)
    if p["rope_type"] != "default":
        raise ValueError(f"proxy.target has rope_type {p['rope_type']!r}; a proxy matches a RoPE trained without "
                         f"scaling (rope_type default)")
    span = int(cfg["max_position_embeddings"])
    if layer_type == SLIDING and cfg.get("sliding_window"):
        span = min(span, int(cfg["sliding_window"]))
    return float(p["base"]), span, int(round(p["head_dim"] * p.get("partial_rotary_factor", 1.0)))


def proxy_rope(target: str, layer_type, train_len: int) -> dict:
    """The proxy's base and turn-counted extension knobs (harness.rope.geometry.proxy) for a laptop train length."""
    from harness.pretrained.variants import HF_DEFAULTS
    base, span, _ = target_rope(target_config(str(target)), layer_type)
    return geometry.proxy(base, span, train_len, HF_DEFAULTS)
