"""The harness's RoPE inside an HF model: `swapped(model, encoding, pipeline)` replaces the model's rotary
embedding (`model.model.rotary_emb`) and its modeling module's `apply_rotary_pos_emb` for the duration.

HF's decoders compute (cos, sin) once per forward in `rotary_emb(hidden, position_ids)` and rotate q and k in
every attention layer with the module-level `apply_rotary_pos_emb(q, k, cos, sin)` (modeling_llama.py and its
copies in the Qwen, Gemma, Mistral families). Inside the context the first returns the harness encoding's own
half-width table (T, R/2): its rope_type's frequencies and attention factor (`rope`, `rope_resonance`), or a
precision pipeline's table stages; the second rotates with `harness.measure.precision_pipelines.rotate`: q and k
cast to the pipeline's activation dtype, rotated in its rotation dtype by `harness.rope.apply_rotary`, and cast
back to the model's dtype, so everything but the RoPE stages stays in the model's dtype. HF's own
`apply_rotary_pos_emb` would fail on the half-width table (its shapes do not broadcast), so a layer the patch
misses cannot silently mix the two."""
import contextlib
import sys

import torch
from torch import nn

from harness.measure import precision_pipelines as pp

FP32 = pp.resolve("fp32")  # the guarded fp32 pipeline: every stage fp32 (HF's own recipe for an fp32 model)


class HarnessRotary(nn.Module):
    """Stands in for `model.model.rotary_emb`: (cos, sin), each (T, R/2), for the forward's positions.

    `encoding` is one encoding, or {layer_type: encoding} for models whose RoPE differs per layer type (Gemma 3:
    `rotary_emb(x, position_ids, layer_type)`, sliding layers at θ 1e4, full-attention layers at θ 1e6)."""

    def __init__(self, encoding, pipeline=FP32):
        super().__init__()
        self.encodings = dict(encoding) if isinstance(encoding, dict) else {None: encoding}
        self.pipeline = pp.resolve(pipeline)
        for enc in self.encodings.values():
            if self.pipeline.dtypes() != FP32.dtypes() and type(enc).frequencies is not _plain_frequencies():
                raise ValueError(f"precision pipeline {self.pipeline.name!r} models plain RoPE's table; use it with "
                                 f"encoding rope (got {enc.name or type(enc).__name__})")
            if self.pipeline.dtypes() != FP32.dtypes() and enc.rope_type != "default":
                raise ValueError(f"precision pipeline {self.pipeline.name!r} models rope_type 'default'; got "
                                 f"{enc.rope_type!r} (compare extensions with pipeline fp32)")

    def forward(self, x, position_ids, layer_type=None):  # x (B, T, C), position_ids (B, T)
        if layer_type not in self.encodings:
            raise ValueError(f"the RoPE swap has no encoding for layer type {layer_type!r}; it has "
                             f"{sorted(map(str, self.encodings))}")
        enc = self.encodings[layer_type]
        pos = position_ids[0]
        if position_ids.shape[0] > 1 and not bool((position_ids == pos).all()):
            raise ValueError("the harness's RoPE swap takes one row of positions shared by the batch")
        if self.pipeline.dtypes() == FP32.dtypes():
            cos, sin = enc.table(pos, torch.float32)  # the encoding's own path (Resonance's too)
            enc.end_forward()
            return cos, sin
        cos, sin = pp.table(self.pipeline, pos.cpu(), enc.head_dim, enc.base)  # the stages' maths on the CPU
        return cos.to(pos.device), sin.to(pos.device)


def _plain_frequencies():
    from harness.encodings.rope import Rope
    return Rope.frequencies


def _modules(model):
    """The modeling modules whose attention layers call a module-level apply_rotary_pos_emb."""
    names = {type(m).__module__ for m in model.modules()}
    return [sys.modules[n] for n in sorted(names) if hasattr(sys.modules.get(n), "apply_rotary_pos_emb")]


@contextlib.contextmanager
def swapped(model, encoding, pipeline=FP32, impl="eager"):
    """Within the context, `model` rotates with `encoding` (a built `rope`-family encoding, or {layer_type:
    encoding}) under `pipeline`.
    The patch is on the modeling module, so other models of the same family in this process see it too
    until the context exits; both are restored on exit, also after an error."""
    rot = HarnessRotary(encoding, pipeline)
    p, layouts = rot.pipeline, {e.layout for e in rot.encodings.values()}
    if len(layouts) > 1:
        raise ValueError(f"the RoPE swap needs one layout for every layer type; got {sorted(layouts)}")
    layout = layouts.pop()
    modules = _modules(model)
    if not modules:
        raise ValueError(f"{type(model).__name__}'s modeling code has no module-level apply_rotary_pos_emb; the "
                         f"RoPE swap supports the Llama, Qwen, Gemma and Mistral families")

    def apply(q, k, cos, sin, unsqueeze_dim=1, **_):  # q (B, Hq, T, D), k (B, Hk, T, D); cos, sin (T, R/2)
        if unsqueeze_dim != 1:
            raise ValueError(f"the RoPE swap rotates (B, H, T, D) heads; got unsqueeze_dim={unsqueeze_dim}")
        return (pp.rotate(p, q, cos, sin, layout, impl).to(q.dtype),
                pp.rotate(p, k, cos, sin, layout, impl).to(k.dtype))

    base = model.model
    saved = [(m, m.apply_rotary_pos_emb) for m in modules]
    own = base.rotary_emb
    try:
        for m, _ in saved:
            m.apply_rotary_pos_emb = apply
        base.rotary_emb = rot
        yield model
    finally:
        base.rotary_emb = own
        for m, fn in saved:
            m.apply_rotary_pos_emb = fn
