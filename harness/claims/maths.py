"""Claims tested without training: RoPE's algebra, decay bounds, the receptive-field identity,
and the sinusoidal table's properties (RoFormer, arXiv 2104.09864; Su's blog posts). Every measure returns
Evidence; every rule turns its numbers into a verdict by the thresholds in its docstring."""
import math

import pandas as pd
import torch

from harness import encodings
from harness.attention import rotate
from harness.measure import timing
from harness.claims.table import Evidence, by_parts, fmt, missing, plot, verdict
from harness.encodings.sinusoidal import table as sin_table
from harness.rope import decay_curve, frequencies

D = 64  # head_dim of model=tiny (d_model 128 / 4 heads)


def _spearman(xs, ys):
    return float(pd.Series(list(xs)).corr(pd.Series(list(ys)), method="spearman"))


def time_s(fn, repeats=9, inner=5):
    """Seconds per call: the lower quintile over repeats of the mean of `inner` calls, after one warm-up
    call (harness.measure.timing: ratios of two such times are what the claims report)."""
    return timing.lower_quintile(timing.seconds_per_call(fn, repeats=repeats, inner=inner, warmup=1))


def slope(xs, ys):
    """Least-squares slope of log y against log x (the exponent of a power law)."""
    lx, ly = torch.tensor(xs, dtype=torch.float64).log(), torch.tensor(ys, dtype=torch.float64).log()
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx * lx).sum())


# ---- 1. norms and relativity
def relative(ctx):
    gen = torch.Generator().manual_seed(0)
    enc = encodings.build("rope", head_dim=D)
    pos = torch.arange(4096)
    q, k = torch.randn(2, D, generator=gen, dtype=torch.float64)
    out, dev32 = {}, None
    for dtype in (torch.float64, torch.float32):
        rq, rk = rotate(enc, q.to(dtype).expand(1, 1, len(pos), D), k.to(dtype).expand(1, 1, len(pos), D), pos)
        rq, rk = rq[0, 0].double(), rk[0, 0].double()  # (T, D)
        qn, kn = q.to(dtype).double().norm(), k.to(dtype).double().norm()
        norm_err = float(((rq.norm(dim=-1) - qn).abs() / qn).max())
        o = torch.arange(0, len(pos) - 64)
        dev = torch.stack([((rq[o + d] * rk[o]).sum(-1) - (rq[d] * rk[0]).sum()).abs() / (qn * kn)
                           for d in (0, 1, 7, 63)]).amax(0)  # (offsets,): worst over distances
        tag = "fp64" if dtype == torch.float64 else "fp32"
        out[f"norm_err_{tag}"], out[f"shift_err_{tag}"] = norm_err, float(dev.max())
        dev32 = dev if tag == "fp32" else dev32
    png = plot(ctx.out / "c01_relative.png", {"fp32 |q.k(m+o, n+o) - q.k(m, n)| / |q||k|": (
        o.tolist()[1:], dev32[1:].clamp_min(1e-12).tolist())}, xlabel="offset o", ylabel="relative deviation",
        title="RoPE score at fixed m-n over absolute offsets", logy=True)
    return Evidence(out, f"fp64: max norm change {fmt(out['norm_err_fp64'])}, max score change over 4096 "
                         f"offsets {fmt(out['shift_err_fp64'])} (fp32: {fmt(out['norm_err_fp32'])}, "
                         f"{fmt(out['shift_err_fp32'])}); head_dim {D}", png)


def relative_rule(n):
    """Relative errors in fp64 (|q| vs |R q|; q.k at the same m-n over 4096 absolute offsets): both < 1e-9:
    supported; either > 1e-6: contradicted; otherwise inconclusive. fp32 errors are reported, not judged."""
    worst = max(n["norm_err_fp64"], n["shift_err_fp64"])
    if missing(n) or worst > 1e-6:
        return verdict("contradicted", f"fp64 error {fmt(worst)} > 1e-6")
    if worst < 1e-9:
        return verdict("supported", f"fp64 errors {fmt(worst)} < 1e-9: exact up to rounding")
    return verdict("inconclusive", f"fp64 error {fmt(worst)} between 1e-9 and 1e-6")


# ---- 2 and 14. decay with distance
def _decay_numbers(curve, upto=256):
    """curve (N,) at distances 0..N-1 -> trend numbers over [0, upto]."""
    c = curve[:upto + 1]
    rises = (c[1:] > c[:-1]).nonzero()
    return dict(spearman=_spearman(range(len(c)), c.tolist()),
                tail_ratio=float(c[upto // 2:].mean() / c[0]),
                first_rise=float(rises[0] + 1) if len(rises) else math.nan,
                rise_frac=float((c[1:] > c[:-1]).double().mean()))


def decay_rule(n):
    """Over distances 0..256: Spearman(distance, value) <= -0.5 and mean over [128, 256] <= 0.5 x the
    value at 0: supported (it decays); Spearman >= 0 or that mean >= the value at 0: contradicted;
    otherwise inconclusive. Where it is not monotone (first rise, share of rising steps) is reported."""
    if missing({k: n[k] for k in ("spearman", "tail_ratio")}):
        return verdict("not measured", "not measured: a number it judges is NaN")
    s, t = n["spearman"], n["tail_ratio"]
    if s <= -0.5 and t <= 0.5:
        return verdict("supported", f"Spearman {fmt(s)} <= -0.5 and tail/head {fmt(t)} <= 0.5")
    if s >= 0 or t >= 1:
        return verdict("contradicted", f"Spearman {fmt(s)} or tail/head {fmt(t)} shows no decay")
    return verdict("inconclusive", f"Spearman {fmt(s)}, tail/head {fmt(t)}: a weak decay")


def su_decay(ctx):
    m = torch.arange(0, 4097)
    curve = decay_curve(128, 10000.0, m)
    n = _decay_numbers(curve)
    png = plot(ctx.out / "c02_decay.png", {f"base {b:g}": (m.tolist()[1:], decay_curve(128, b, m)[1:].tolist())
                                           for b in (10000.0, 500000.0)},
               xlabel="relative distance m", ylabel="(1/(d/2)) sum_j |S_j(m)|", logx=True,
               title="Su's long-range bound, head_dim 128")
    return Evidence(n, f"head_dim 128, base 1e4: value {fmt(float(curve[0]))} at 0, mean over 128..256 is "
                       f"{fmt(n['tail_ratio'])} of it, Spearman {fmt(n['spearman'])}; not monotone: first rise at "
                       f"m={fmt(n['first_rise'])}, {fmt(100 * n['rise_frac'], 2)}% of steps rise", png)


def sinusoidal_decay(ctx):
    pos = torch.arange(0, 4097)
    tab = sin_table(pos, 128)  # (N, 128) fp64, unit amplitude
    curve = tab @ tab[0]  # p_0 . p_m = sum_i cos(m w_i)
    other = sin_table(pos + 1000, 128) @ sin_table(torch.tensor([1000]), 128)[0]
    n = _decay_numbers(curve)
    n["k_dependence"] = float((curve - other).abs().max())
    png = plot(ctx.out / "c14_sinusoidal_decay.png", {"p_0 . p_m": (pos.tolist()[1:], curve[1:].tolist())},
               xlabel="distance m", ylabel="inner product", logx=True, title="Sinusoidal PE, d_model 128")
    return Evidence(n, f"d_model 128: p_k.p_(k+m) from {fmt(float(curve[0]))} at 0; mean over 128..256 is "
                       f"{fmt(n['tail_ratio'])} of it, Spearman {fmt(n['spearman'])}; first rise at m="
                       f"{fmt(n['first_rise'])}, {fmt(100 * n['rise_frac'], 2)}% of steps rise; k=0 vs k=1000 "
                       f"differ by {fmt(n['k_dependence'])}", png)


# ---- 4. receptive-field variant
def _half_width(theta, max_d=4096):
    """First distance where mean_j cos(d theta_j) (the score of q = k with unit pairs) falls below 0.5."""
    d = torch.arange(max_d + 1, dtype=torch.float64)
    k = torch.cos(d[:, None] * theta[None, :].double()).mean(-1)
    below = (k < 0.5).nonzero()
    return float(below[0]) if len(below) else float(max_d), k


def receptive_field(ctx):
    gen = torch.Generator().manual_seed(0)
    theta = frequencies("default", D, 10000.0)[0].double()  # (D/2,)
    q, k = torch.randn(2, D, generator=gen, dtype=torch.float64)
    zq, zk = torch.complex(q[:D // 2], q[D // 2:]), torch.complex(k[:D // 2], k[D // 2:])  # half layout
    pos, errs, widths, curves = torch.arange(512), [], {}, {}
    for alpha in (0.0, 0.25, 0.5, 0.9):
        for rho in (0.0, 0.5, 1.0):
            enc = encodings.build("rope_rf", head_dim=D, rho=rho, alpha_init=alpha).double()
            with torch.no_grad():
                rq, rk = rotate(enc, q.expand(1, 1, 512, D), k.expand(1, 1, 512, D), pos)
            a = enc.alpha.item()  # the parameter's value (alpha_init rounded to fp32), not the literal
            score = rq[0, 0] @ rk[0, 0].T  # (m, n)
            delta = (pos[:, None] - pos[None, :]).double()  # (m, n)
            phi = a / 10000.0 ** rho
            s = (zq * zk.conj() * torch.exp(1j * delta[..., None] * (1 - a) * theta)).sum(-1)  # a' + i b'
            ident = torch.cos(delta * phi) * s.real - torch.sin(delta * phi) * s.imag
            errs.append(float((score - ident).abs().max() / (q.norm() * k.norm())))
            widths[(alpha, rho)], curve = _half_width(phi + (1 - a) * theta)
            if rho == 0.5 or alpha == 0.0:
                curves[f"alpha {alpha:g}, rho {rho:g}"] = (list(range(1, 1025)), curve[1:1025].tolist())
    w = list(widths.values())
    n = dict(identity_err=max(errs), width_min=min(w), width_max=max(w), width_ratio=max(w) / max(min(w), 1.0))
    png = plot(ctx.out / "c04_receptive_field.png", curves, xlabel="distance m - n", logx=True,
               ylabel="mean_j cos((m-n) theta*_j)", title="RoPE-RF position kernel", hlines=[(0.5, "half")])
    table = ", ".join(f"(a{a:g},r{r:g})={v:g}" for (a, r), v in widths.items())
    return Evidence(n, f"identity max rel. error {fmt(n['identity_err'])} over 512x512 (m, n), 12 (alpha, rho); "
                       f"kernel half-width spans {fmt(n['width_min'])}..{fmt(n['width_max'])} positions: {table}", png)


def receptive_field_rule(n):
    """Identity error (fp64, relative to |q||k|) < 1e-9 and the position kernel's half-width varies by a
    factor >= 2 over the (alpha, rho) grid: supported; identity error > 1e-6 or a factor < 1.1: contradicted;
    otherwise inconclusive."""
    if missing(n) or n["identity_err"] > 1e-6 or n["width_ratio"] < 1.1:
        return verdict("contradicted", f"identity error {fmt(n['identity_err'])}, half-width factor "
                                       f"{fmt(n['width_ratio'])}")
    if n["identity_err"] < 1e-9 and n["width_ratio"] >= 2:
        return verdict("supported", f"identity exact ({fmt(n['identity_err'])}); alpha, rho change the "
                                    f"half-width {fmt(n['width_ratio'])}x")
    return verdict("inconclusive", f"identity error {fmt(n['identity_err'])}, factor {fmt(n['width_ratio'])}")


# ---- 13. sinusoidal T(delta)
def sinusoidal_linear(ctx):
    d, pos = 128, torch.arange(0, 10000)
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    tab = sin_table(pos, d)  # (N, d) interleaved (sin, cos) pairs
    errs = []
    for delta in (1, 7, 100, 1000):
        c, s = torch.cos(delta * w), torch.sin(delta * w)  # T(delta) from delta alone: a rotation per pair
        sin_k, cos_k = tab[:-delta, 0::2], tab[:-delta, 1::2]
        pred = torch.stack((sin_k * c + cos_k * s, cos_k * c - sin_k * s), -1).flatten(-2)
        errs.append(float((pred - tab[delta:]).abs().amax(-1).max()))
    n = dict(max_err=max(errs))
    png = plot(ctx.out / "c13_sinusoidal_linear.png", {"max_k |p_(k+delta) - T(delta) p_k|": (
        [1, 7, 100, 1000], [max(e, 1e-18) for e in errs])}, xlabel="delta", ylabel="max abs error", logx=True,
        logy=True, title="Sinusoidal PE: T(delta) independent of k (fp64)")
    return Evidence(n, f"T(delta) = per-pair rotation by delta*w_i (built from delta alone) maps p_k to p_(k+delta) "
                       f"for all k < 10000, delta in 1, 7, 100, 1000: max abs error {fmt(n['max_err'])} (fp64)", png)


def sinusoidal_linear_rule(n):
    """Max abs error of p_(k+delta) - T(delta) p_k over k (fp64, unit-amplitude table): < 1e-9: supported;
    > 1e-3: contradicted; otherwise inconclusive."""
    e = n["max_err"]
    if missing(n) or e > 1e-3:
        return verdict("contradicted", f"error {fmt(e)} > 1e-3")
    return verdict("supported", f"error {fmt(e)} < 1e-9") if e < 1e-9 else verdict(
        "inconclusive", f"error {fmt(e)}")

