"""Per-element error bounds for a rotated output, per dtype, from unit-roundoff arguments.

u = eps/2 is the unit roundoff (fp32 2^-24, bf16 2^-8, fp16 2^-11). An output pair (a', b') = af * (a c - b s,
b c + a s) with inputs a, b exact in every dtype (cases.inputs) and |c|, |s| <= 1:

- rotation arithmetic (table given): c, s rounded to the dtype (u each), two products and one sum rounded (u
  each), the result rounded once more (u): |error| <= 3u * af * (|a| + |b|) + O(u^2). We allow
  ROTATION_C = 2 eps = 4u * af * (|a| + |b|) per element, a margin of 4/3 over the bound.
- phase (the implementation builds its own table, takes its own frequencies, or is handed fp32 angles): the
  phase p * theta_j is held in fp32 by HF and every conforming kernel (a bf16 phase is HF #29285, a bug), and
  inv_freq may be computed in fp32 in-kernel as exp(-(2j/d) ln b) or pow(b, -2j/d): the argument ln theta_j
  carries <= 3 u32 relative (ln b rounded, the product rounded, 2j/d rounded where d is no power of two), which
  exp turns into 3 u32 |ln theta_j| relative in theta, plus exp's own ulp (2 u32) and a scaling multiply or blend
  (2 u32): |dtheta/theta| <= (3 |ln theta_j| + 4) u32, a few ulps that grow with |ln theta_j|. The product p theta
  rounded (u32) and cos/sin rounded (u32 each) give |dphi| <= (3 |ln theta_j| + 5) u32 |phi| + 2 u32. We allow
  (PHASE_LN |ln theta_j| + PHASE_REL) u32 |phi| + PHASE_ABS u32 with 3, 8, 4; the pair moves by |dphi| * af *
  sqrt(a^2 + b^2) <= |dphi| * af * (|a| + |b|). Largest at p = 131071, theta_0 = 1: 8 u32 * 131071 = 0.06 rad.
  The planted bugs stay far above it (results/conformance/TOLERANCES.md: the smallest bug's error is ~1e3x it).
- the logits q'(m) . k'(n) are computed here in fp64 from the implementation's outputs, so their bound is
  the propagated one: sum_d (bound_q |k'| + |q'| bound_k).

Where the table is given, bf16 at |a| + |b| = 8 allows 0.0625; fp32 allows 1.9e-6.
"""
import torch

EPS = {"fp32": torch.finfo(torch.float32).eps, "bf16": torch.finfo(torch.bfloat16).eps,
       "fp16": torch.finfo(torch.float16).eps}
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
ROTATION_C = 2.0
PHASE_LN, PHASE_REL, PHASE_ABS = 3.0, 8.0, 4.0  # in u32 = eps32 / 2: see the docstring
U32 = EPS["fp32"] / 2
FLOOR = 1e-30  # keeps the ratio finite where a bound is exactly zero (an exact zero output)


def _pair_magnitude(x, rotary_dim, layout):
    """|a| + |b| of each element's pair, (P, D); pass-through features get |x|."""
    mag = x.abs().clone()
    r = rotary_dim
    if layout == "half":
        s = x[:, :r // 2].abs() + x[:, r // 2:r].abs()
        mag[:, :r // 2], mag[:, r // 2:r] = s, s
    else:
        s = x[:, 0:r:2].abs() + x[:, 1:r:2].abs()
        mag[:, 0:r:2], mag[:, 1:r:2] = s, s
    return mag


def _pair_values(pos, inv_freq, head_dim, layout, per_pair):
    """per_pair (P, R/2) spread to each element of its pair, (P, D); zero on pass-through features."""
    r = 2 * inv_freq.numel()
    out = torch.zeros(len(pos), head_dim, dtype=torch.float64)
    if layout == "half":
        out[:, :r // 2], out[:, r // 2:r] = per_pair, per_pair
    else:
        out[:, 0:r:2], out[:, 1:r:2] = per_pair, per_pair
    return out


def inv_freq_rel(inv_freq):
    """Allowed relative error of each fp32 inv_freq computed in-kernel: (PHASE_LN |ln theta| + PHASE_REL) u32;
    zero frequencies (p-RoPE's identity pairs) are exact."""
    inv = inv_freq.double().abs()
    ln = torch.where(inv > 0, inv.clamp_min(1e-300).log().abs(), torch.zeros_like(inv))
    return torch.where(inv > 0, (PHASE_LN * ln + PHASE_REL) * U32, torch.zeros_like(inv))


def phase_bound(pos, inv_freq):
    """Allowed |dphi| (P, R/2) of a table built in fp32 (the docstring's phase term)."""
    phase = (pos.double()[:, None] * inv_freq.double()[None, :]).abs()
    return inv_freq_rel(inv_freq)[None, :] * phase + PHASE_ABS * U32


def bound(x, pos, inv_freq, attention_factor, layout, dtype, own_table):
    """Allowed |error| per element of the rotated x (P, D), fp64. Pass-through features: the output is the
    input rounded to the dtype, which is exact (cases.inputs), so only the floor."""
    r = 2 * inv_freq.numel()
    mag = _pair_magnitude(x.double(), r, layout) * max(attention_factor, 1.0)
    b = ROTATION_C * EPS[dtype] * mag
    if own_table:
        b = b + _pair_values(pos, inv_freq, x.shape[-1], layout, phase_bound(pos, inv_freq)) * mag
    b[:, r:] = 0.0
    return b + FLOOR


def logit_bound(qr, kr, bq, bk):
    """(P, P) bound on q'(m) . k'(n) given the per-element bounds of q' and k'."""
    return bq @ kr.abs().T + qr.abs() @ bk.T + FLOOR


def ratio(observed, expected, allowed):
    """max |observed - expected| / allowed; NaN where both are NaN matches, NaN on one side only is inf."""
    o, e = observed.double(), expected.double()
    both = o.isnan() & e.isnan()
    one = o.isnan() ^ e.isnan()
    if bool(one.any()):
        return float("inf")
    err = ((o - e).abs() / allowed).masked_fill(both, 0.0)
    err = err.masked_fill(o.isinf() & e.isinf() & (o == e), 0.0)
    return float(err.max()) if err.numel() else 0.0


def max_abs(observed, expected):
    d = (observed.double() - expected.double()).abs()
    return float(d.nan_to_num(float("inf")).max())
