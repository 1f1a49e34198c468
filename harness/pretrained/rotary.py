"""The harness's RoPE inside an HF model, through transformers' own seam: `swapped(model, encoding, pipeline,
length=T)` registers the encoding's frequencies in `transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS` under a
rope_type of its own (the registry's documented extension point: "append new {'rope_type': callable} pairs ... as
long as the callable has the same signature") and builds the model's own rotary class from a copy of its config whose
`rope_parameters` name that type (per layer type for Gemma 3). The model then computes its (cos, sin) table and
rotates q and k with its own code, as it would for a built-in rope_type; on exit the model's rotary module comes back
and the registry entry goes. An encoding whose table is more than its frequencies (Resonance RoPE's positions
modulo its wavelengths) gives the model its own table instead (`OwnTable`), which the model's attention rotates.

A rope_type whose frequencies depend on the sequence length (dynamic NTK, LongRoPE) is built for `length`, the
forward's total length (with a KV cache: prefix and new tokens), so a forward of another length needs another
context; HF's own dynamic update (which keeps the longest length's frequencies until a forward shorter than the
trained context) never runs on these types.

Precision pipelines (conf/precision/) change the table's stages and the rotation's dtype, which the model's own code
does not express: for them the model's rotary module returns the pipeline's half-width table and each of this model's
attention modules rotates with `harness.measure.precision_pipelines.rotate` for the duration of its own forward
(the modeling module's `apply_rotary_pos_emb` is rebound inside that call only), so other models are untouched."""
import contextlib
import copy
import functools
import itertools
import sys

import torch

from harness.measure import precision_pipelines as pp
from harness.rope.frequencies import SEQ_LEN_TYPES

FP32 = pp.resolve("fp32")  # the guarded fp32 pipeline: every stage fp32 (HF's own recipe for an fp32 model)
_ids = itertools.count()


def _check(encodings, pipeline, length):
    from harness.encodings import RotaryEncoding
    low = pipeline.dtypes() != FP32.dtypes()
    for enc in encodings.values():
        if not isinstance(enc, RotaryEncoding):
            raise ValueError(f"the RoPE swap takes a rotary encoding (harness.encodings.RotaryEncoding: rope and its "
                             f"variants); got {enc.name or type(enc).__name__}")
        if low and type(enc).frequencies is not _plain_frequencies():
            raise ValueError(f"precision pipeline {pipeline.name!r} models plain RoPE's table; use it with "
                             f"encoding rope (got {enc.name or type(enc).__name__})")
        if low and enc.rope_type != "default":
            raise ValueError(f"precision pipeline {pipeline.name!r} models rope_type 'default'; got "
                             f"{enc.rope_type!r} (compare extensions with pipeline fp32)")
        if enc.rope_type in SEQ_LEN_TYPES and length is None:
            raise ValueError(f"rope_type {enc.rope_type!r} depends on the sequence length: give the forward's "
                             f"length (rotary.swapped(..., length=T))")
    layouts = {e.layout for e in encodings.values()}
    if layouts != {"half"}:
        raise ValueError(f"transformers' RoPE decoders rotate the half layout; the encoding has {sorted(layouts)}")


def _plain_frequencies():
    from harness.encodings.rope import Rope
    return Rope.frequencies


def init_function(encodings, length):
    """A ROPE_INIT_FUNCTIONS entry: (config, device, seq_len, layer_type) -> (inv_freq, attention_factor) of the
    encoding for that layer type at `length` (the registry's signature; config and seq_len are not read)."""
    def init(config=None, device=None, seq_len=None, layer_type=None, **_):
        if layer_type not in encodings:
            raise ValueError(f"the RoPE swap has no encoding for layer type {layer_type!r}; it has "
                             f"{sorted(map(str, encodings))}")
        inv_freq, factor = encodings[layer_type].frequencies(length)
        return inv_freq.float().to(device) if device is not None else inv_freq.float(), float(factor)
    return init


def _rope_parameters(encodings, name):
    """The config's rope_parameters naming rope_type `name`: one dict, or one per layer type."""
    one = {lt: {"rope_type": name, "rope_theta": float(e.base)} for lt, e in encodings.items()}
    return one[None] if list(one) == [None] else one


class OwnTable(torch.nn.Module):
    """An encoding whose table is more than its frequencies (Resonance RoPE reduces each position modulo its integer
    wavelength before the phase, as its authors tile it): (cos, sin), each (T, R) in HF's half layout (the half
    table twice), from the encoding's own `table`, for the model's own attention to rotate with."""

    def __init__(self, encodings):
        super().__init__()
        self.encodings = encodings

    def forward(self, x, position_ids, layer_type=None):  # x (B, T, C), position_ids (B, T)
        enc = self.encodings[layer_type]
        pos = position_ids[0]
        if position_ids.shape[0] > 1 and not bool((position_ids == pos).all()):
            raise ValueError("the harness's RoPE swap takes one row of positions shared by the batch")
        cos, sin = enc.table(pos, torch.float32)
        enc.end_forward()
        return torch.cat([cos, cos], -1)[None].to(x.dtype), torch.cat([sin, sin], -1)[None].to(x.dtype)


def _own_table(enc):
    from harness.encodings.rope import Rope
    return type(enc)._table is not Rope._table or type(enc).table is not Rope.table


class PipelineTable(torch.nn.Module):
    """A precision pipeline's (cos, sin), each (T, R/2), for the forward's positions: the table's stages in the
    pipeline's dtypes (harness.measure.precision_pipelines.table), computed on the CPU as the pipelines define."""

    def __init__(self, encodings, pipeline):
        super().__init__()
        self.encodings, self.pipeline = encodings, pipeline

    def forward(self, x, position_ids, layer_type=None):  # x (B, T, C), position_ids (B, T)
        enc = self.encodings[layer_type]
        pos = position_ids[0]
        if position_ids.shape[0] > 1 and not bool((position_ids == pos).all()):
            raise ValueError("the harness's RoPE swap takes one row of positions shared by the batch")
        cos, sin = pp.table(self.pipeline, pos.cpu(), enc.head_dim, enc.base)
        return cos.to(pos.device), sin.to(pos.device)


def _attention_modules(model):
    """(module, its modeling module) for each of the model's modules whose modeling code rotates with a
    module-level apply_rotary_pos_emb (its attention layers)."""
    out = []
    for m in model.modules():
        mod = sys.modules.get(type(m).__module__)
        if hasattr(mod, "apply_rotary_pos_emb") and "Attention" in type(m).__name__:
            out.append((m, mod))
    return out


@contextlib.contextmanager
def swapped(model, encoding, pipeline=FP32, impl="eager", length=None):
    """Within the context, `model` rotates with `encoding` (a built `rope`-family encoding, or {layer_type:
    encoding}) under `pipeline`; `length`: the forward's total length, needed by length-dependent rope_types.
    The model's rotary module and the registry are restored on exit, also after an error."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    encodings = dict(encoding) if isinstance(encoding, dict) else {None: encoding}
    p = pp.resolve(pipeline)
    _check(encodings, p, length)
    base = model.model
    own = base.rotary_emb
    name = f"harness_{next(_ids)}"
    cfg = copy.copy(own.config)
    cfg.rope_parameters = _rope_parameters(encodings, name)
    ROPE_INIT_FUNCTIONS[name] = init_function(encodings, length)
    patched = []
    try:
        if p.dtypes() == FP32.dtypes() and any(map(_own_table, encodings.values())):
            base.rotary_emb = OwnTable(encodings)
        elif p.dtypes() == FP32.dtypes():
            base.rotary_emb = type(own)(cfg).to(next(model.parameters()).device)
        else:
            base.rotary_emb = PipelineTable(encodings, p)
            layout = "half"
            for m, mod in _attention_modules(model):
                m.forward = functools.partial(_rotating, m, mod, _pipeline_apply(p, layout, impl))
                patched.append(m)
        yield model
    finally:
        for m in patched:
            del m.forward  # the class's forward again
        base.rotary_emb = own
        ROPE_INIT_FUNCTIONS.pop(name, None)


def _pipeline_apply(p, layout, impl):
    def apply(q, k, cos, sin, unsqueeze_dim=1, **_):  # q (B, Hq, T, D), k (B, Hk, T, D); cos, sin (T, R/2)
        if unsqueeze_dim != 1:
            raise ValueError(f"the RoPE swap rotates (B, H, T, D) heads; got unsqueeze_dim={unsqueeze_dim}")
        return (pp.rotate(p, q, cos, sin, layout, impl).to(q.dtype),
                pp.rotate(p, k, cos, sin, layout, impl).to(k.dtype))
    return apply


def _rotating(m, mod, apply, *args, **kwargs):
    """m's own forward with its modeling module's apply_rotary_pos_emb bound to `apply` for this call only."""
    own = mod.apply_rotary_pos_emb
    mod.apply_rotary_pos_emb = apply
    try:
        return type(m).forward(m, *args, **kwargs)
    finally:
        mod.apply_rotary_pos_emb = own
