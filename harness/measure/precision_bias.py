"""Precision of the bias encodings and xPos in bf16/fp16 against fp64, as tidy rows.

Two ways a model runs in low precision, one `protocol` each: `cast` (the module cast, model.to(dtype))
and `autocast` (fp32 module under torch.autocast). Either way the bias is added to the scores in the
activations dtype (harness/model.py: bias.to(q.dtype)), so the output is cast last.
"""
import copy
import math

import torch

from harness.attention import positions_bias, rotate
from harness.names import PRECISION_PROTOCOLS as PROTOCOLS
from harness.encodings import ENCODINGS, build
from harness.encodings.xpos import zeta as xpos_zeta
from harness.measure.precision_pipelines import DTYPES, MAX_LEN, inv_freq_fp64, row, window_rows, windows
from harness.rope import apply_rotary



def _build(name, n_heads, head_dim=16):
    """Encoding `name` with the study's model dims (build drops those it does not take)."""
    return build(name, d_model=n_heads * head_dim, n_heads=n_heads, head_dim=head_dim)


def bias_encodings(n_heads=8):
    """The encodings whose bias is measured: every registered one that is `bias_only` (harness/encodings/
    _base.py: positions reach its scores through a bias of positions alone), in registry order."""
    return tuple(name for name in ENCODINGS if _build(name, n_heads).bias_only)


def in_low_precision(enc, protocol, dtype, call):
    """Run call(module) in the protocol's precision; the result in dtype, as the model adds it."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown precision protocol {protocol!r}; expected one of {list(PROTOCOLS)}")
    if protocol == "cast":
        return call(copy.deepcopy(enc).to(DTYPES[dtype]))
    with torch.autocast("cpu", dtype=DTYPES[dtype]):
        return call(enc)


@torch.no_grad()
def bias_rows(encodings=None, *, dtypes=("bf16", "fp16"), protocols=PROTOCOLS, n_heads=8,
              max_len=MAX_LEN, seed=0):
    """bias_err: max over heads of |bias - fp64 bias| (logits) for a query at max_len - 1 and keys at
    every distance d, per window of d. Far keys carry large negative biases whose absolute rounding is big
    but harmless to softmax; bias_collision_rate is the share of adjacent distances whose biases are
    distinct in fp64 but equal in the dtype (attention can no longer order those keys), mean over heads.
    FIRE is not translation invariant: its numbers hold for this query position. encodings: names, default
    bias_encodings()."""
    out, edges = [], windows(max_len)
    q_pos, k_pos = torch.tensor([max_len - 1]), torch.arange(max_len)

    def bias(module):  # (H, N) indexed by distance d = max_len - 1 - k
        return positions_bias(module, None, q_pos, k_pos).reshape(-1, max_len).flip(-1)

    for name in bias_encodings(n_heads) if encodings is None else encodings:
        torch.manual_seed(seed)
        enc = _build(name, n_heads).eval()
        ref = bias(copy.deepcopy(enc).double()).double()  # (H, N)
        distinct = ref[:, 1:] != ref[:, :-1]  # (H, N - 1): pair (d, d + 1) at index d
        for dt in dtypes:
            for proto in protocols:
                got = in_low_precision(enc, proto, dt, bias).to(DTYPES[dt])  # (H, N)
                ids = dict(encoding=name, protocol=proto, dtype=dt, n_heads=n_heads, q_pos=max_len - 1)
                out += window_rows((got.double() - ref).abs().amax(0), edges, "bias_err", "logit", **ids)
                same = ((got[:, 1:] == got[:, :-1]) & distinct).double().mean(0)  # (N - 1,)
                out += window_rows(torch.cat((same, same[-1:])), edges, "bias_collision_rate", "share",
                                   reduce="mean", **ids)
    return out


def _xpos_reference_tables(enc, pos, head_dim, base):
    """xPos's tables in fp64 from the module's own constants (Sun et al. 2022): cos, sin (T, D/2) scaled by
    zeta^(n/scale_base) for q and by its inverse for k."""
    inv = inv_freq_fp64(head_dim, base)
    phase = pos.double()[:, None] * inv  # (T, D/2)
    centred = (pos - pos.numel() // 2).double()  # the module's centring, which cancels in q.k
    scale = xpos_zeta(enc.head_dim, dtype=torch.float64) ** (centred[:, None] / enc.scale_base)  # (T, D/2)
    cos, sin = phase.cos(), phase.sin()
    return cos * scale, sin * scale, cos / scale, sin / scale


@torch.no_grad()
def xpos_rows(*, dtypes=("fp32", "bf16", "fp16"), protocols=PROTOCOLS, head_dim=128, base=10000.0,
              max_len=MAX_LEN, seed=0):
    """Per sequence length T (window ends): xpos_scale_overflow = share of rotated q/k entries that are
    non-finite (zeta^(n/scale_base) overflows fp16 past ~4.5k positions from the centre, fp32 past ~36k),
    and rot_rel_err = max per-position relative error (inf once anything overflowed; a k flushed to zero
    by the underflowing 1/scale reads as error 1). The fp64 reference tables are made once per T, for every
    dtype (they do not depend on q and k)."""
    out = []
    enc = build("xpos", head_dim=head_dim, base=base).eval()
    gen = torch.Generator().manual_seed(seed)
    for T in windows(max_len)[1:]:
        pos = torch.arange(T)
        qk = torch.randn(2, 1, 1, T, head_dim, generator=gen)  # q and k as one (2, B=1, H=1, T, D) batch
        cq, sq, ck, sk = _xpos_reference_tables(enc, pos, head_dim, base)
        for dt in dtypes:
            x = qk.to(DTYPES[dt])
            ref = (apply_rotary(x[0].double(), cq, sq, enc.layout, "eager"),  # fp64 q and k, rotated and scaled
                   apply_rotary(x[1].double(), ck, sk, enc.layout, "eager"))
            ref_norm = [r.norm(dim=-1) for r in ref]  # (1, 1, T) each
            # fp32 is the module's own precision: there is nothing for a cast or autocast to do
            for proto in (protocols if dt != "fp32" else ("cast",)):
                got = in_low_precision(enc, proto, dt, lambda m: rotate(m, x[0], x[1], pos))
                # share of non-finite entries: zeta^(n/scale_base) overflowed (1/scale flushing k shows in
                # rot_rel_err); a count over q and k together, exact in fp64
                bad = sum(int((~g.isfinite()).sum()) for g in got) / (2 * got[0].numel())
                rel = max(((g.double() - r).norm(dim=-1) / n).amax() for g, r, n in zip(got, ref, ref_norm))
                ids = dict(encoding="xpos", protocol=proto, dtype=dt, eval_len=T, head_dim=head_dim,
                           scale_base=enc.scale_base)
                out.append(row("xpos_scale_overflow", bad, "share", **ids))
                # a non-finite output is an infinite error (NaN would read as missing data)
                out.append(row("rot_rel_err", rel if rel.isfinite() else math.inf, "rel", **ids))
    return out
