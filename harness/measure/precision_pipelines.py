"""Precision pipelines for RoPE: in which dtype each stage of the rotary maths is held or computed.

A pipeline names six dtypes (conf/precision/<name>.yaml): the positions, inv_freq, the phase
pos x inv_freq, the cos/sin table, the rotation, and the activations q/k entering and leaving it.
The presets model real code paths: gpt-neox #1003 (fp16 tables), HF transformers #29285 (autocast ran
the phase matmul in bf16), Modalities #462 (inv_freq cast to bf16), transformers #48450 (TF32 phase):
https://github.com/EleutherAI/gpt-neox/issues/1003, https://github.com/huggingface/transformers/pull/29285,
https://github.com/Modalities/modalities/pull/462, https://github.com/huggingface/transformers/issues/48450.
Everything here runs with autocast disabled: a pipeline states its dtypes, autocast must not change them.
"""
import json
import math

import torch

from harness.rope.pipelines import STAGE_DTYPES, STAGES, Pipeline, load_pipeline, pipeline_names  # noqa: F401
from harness.rope import apply_rotary, frequencies

# the stage dtype names (harness.rope.pipelines.STAGE_DTYPES, the schema) as torch dtypes
DTYPES = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
          "bf16": torch.bfloat16, "fp16": torch.float16}
assert tuple(DTYPES) == STAGE_DTYPES
MAX_LEN = 131072  # the longest context the study covers (log windows up to 131072)


# The reference every metric compares against: every stage in fp64 (not a preset, so not in conf/).
REFERENCE = Pipeline("fp64", *(["fp64"] * len(STAGES)))




def resolve(pipeline):
    """A Pipeline from a Pipeline or a preset name."""
    return pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline)


def round_tf32(x):
    """fp32 -> fp32 carrying only TF32's 10 explicit mantissa bits, round-to-nearest-even.

    Why: a TF32 tensor-core GEMM reads fp32 operands at 10-bit mantissa (11 significant bits), so
    integers above 2048 are no longer exact; HF computes the phase as a matmul, which is how TF32
    rounds positions above 2048 (transformers #48450). Hardware conversion modes differ (PTX
    cvt.rna.tf32.f32 rounds ties away from zero, raw fp32 fed to tensor cores may be truncated); they
    differ from round-to-nearest-even by at most one TF32 ulp, on ties only for cvt.rna.
    """
    bits = x.to(torch.float32).contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1  # the last kept mantissa bit decides ties (even)
    bits = (bits + 0x0FFF + lsb) & ~0x1FFF  # add half an ulp (minus one on even ties), clear 13 bits
    return bits.view(torch.float32)


def inv_freq_fp64(head_dim, base):
    """The exact reference theta_j = base^(-2j/d) (RoFormer eq. 15), computed in fp64, shape (d/2,)."""
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def _inv_freq(p, head_dim, base):
    if p.inv_freq == "fp64":
        return inv_freq_fp64(head_dim, base)
    # the fp32 inv_freq the model really holds (HF semantics), then cast as the pipeline says:
    # Modalities #462 did inv_freq.to(x.dtype), gpt-neox #1003 got it from model.half()
    return frequencies("default", head_dim, base)[0].to(DTYPES[p.inv_freq])


def table(pipeline, positions, head_dim, base=10000.0):
    """cos, sin (T, d/2) in the pipeline's table dtype for integer positions (T,)."""
    p = resolve(pipeline)
    pos = torch.as_tensor(positions, dtype=torch.int64)
    with torch.autocast(device_type=pos.device.type, enabled=False):
        held = pos.to(DTYPES[p.positions])  # (T,); fp16 holds integers exactly only to 2048, bf16 to 256
        inv = _inv_freq(p, head_dim, base)  # (d/2,)
        if p.phase == "tf32":
            a, b = round_tf32(held), round_tf32(inv)
        else:
            a, b = held.to(DTYPES[p.phase]), inv.to(DTYPES[p.phase])
        # the outer product as a (T,1) @ (1,d/2) matmul, as HF does: one product, one rounding into the
        # phase dtype (for tf32 the product of two 11-bit significands is exact in fp32)
        phase = a[:, None] @ b[None, :]  # (T, d/2)
        # trig in fp32 (fp64 for an fp64 phase): what CUDA/CPU kernels do for half inputs, then one rounding
        trig = phase.to(torch.float64 if p.phase == "fp64" else torch.float32)
        out = DTYPES[p.table]
        return trig.cos().to(out), trig.sin().to(out)


def rotate(pipeline, x, cos, sin, layout="half", impl="eager"):
    """Rotate x (..., T, D) by the table: x cast to activations, rotated in the rotation dtype, cast back."""
    p = resolve(pipeline)
    act, rot = DTYPES[p.activations], DTYPES[p.rotation]
    with torch.autocast(device_type=x.device.type, enabled=False):
        y = apply_rotary(x.to(act).to(rot), cos.to(rot), sin.to(rot), layout, impl)  # (..., T, D)
        return y.to(act)


def wrap(angle):
    """Angle difference wrapped into [-pi, pi)."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def phase_error(pipeline, head_dim, base, positions):
    """Per position (T,): max over frequency pairs of |wrapped phase error| in radians against fp64.

    The phase is read back from the stored table, atan2(sin, cos), so it is the angle the rotation
    really applies: it includes the table's own rounding (about 2.8e-3 rad for a bf16 table, Modalities
    #462). Non-finite tables (fp16 positions past 65504) give NaN.
    """
    pos = torch.as_tensor(positions, dtype=torch.int64)
    cos, sin = table(pipeline, pos, head_dim, base)  # (T, d/2)
    got = torch.atan2(sin.double(), cos.double())
    ref = pos.double()[:, None] * inv_freq_fp64(head_dim, base)[None, :]  # (T, d/2)
    return wrap(got - ref).abs().amax(dim=-1)


# The row format shared by precision.py and precision_bias.py (conventions in precision.py's docstring)


def windows(max_len):
    """Window edges [0, 16, 32, ..., max_len]: log-spaced, the last one ending at max_len."""
    edges = [0] + [2 ** k for k in range(4, max(4, math.ceil(math.log2(max_len))))]
    return [e for e in edges if e < max_len] + [max_len]


def row(metric, value, unit, *, protocol, dtype, eval_len=None, encoding="rope", head_dim=None, pipeline=None,
        **params):
    """One tidy row; extra keyword knobs go into the JSON `params`. `pipeline` marks a RoPE pipeline's rows."""
    return dict(encoding=encoding, pipeline=pipeline, params=json.dumps(params, sort_keys=True),
                head_dim=head_dim, metric=metric, eval_len=eval_len, protocol=protocol, dtype=dtype, device="cpu",
                value=float(value), unit=unit)


def sample_positions(edges, per_window, seed=0):
    """Sorted positions (N,): all of a window up to per_window wide, per_window seeded-random ones of a
    wider window (random, not strided: a stride of 2^k would pick exactly representable positions)."""
    gen, parts = torch.Generator().manual_seed(seed), []
    for lo, hi in zip(edges[:-1], edges[1:]):
        pick = torch.arange(hi - lo) if hi - lo <= per_window else torch.randperm(hi - lo, generator=gen)[:per_window]
        parts.append(lo + pick.sort().values)
    return torch.cat(parts)


def window_rows(values, edges, metric, unit, reduce="max", at=None, **fields):
    """Rows of values (N,) at x-positions `at` (default 0..N-1) reduced over each window [lo, hi);
    reduce is max, mean, or cummax/std over all x < hi. A NaN (a lost position) propagates."""
    at = torch.arange(len(values)) if at is None else at  # sorted, so a window is one slice
    reducers = {"max": torch.amax, "mean": torch.mean, "cummax": torch.amax, "std": torch.std}
    if reduce not in reducers:
        raise ValueError(f"unknown window reduce {reduce!r}; expected one of {list(reducers)}")
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        start = 0 if reduce in ("cummax", "std") else int(torch.searchsorted(at, lo))
        chunk = values[start:int(torch.searchsorted(at, hi))]
        out.append(row(metric, reducers[reduce](chunk.double()), unit, eval_len=hi, **fields))
    return out
