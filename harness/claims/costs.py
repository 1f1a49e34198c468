"""Claims on RoPE's numerics and cost, tested without training: FP16 phase precision, the cos/sin cache
trade, parameters and time complexity (sources per claim in harness/claims/__init__.py)."""
import torch

from harness import encodings
from harness.claims.maths import D, slope, time_s
from harness.claims.table import Evidence, fmt, missing, plot, verdict
from harness.measure.precision_pipelines import Pipeline, phase_error
from harness.attention import rotate, softmax_attention
from harness.rope import apply_rotary, frequencies, rotary_table


# ---- 10. fp16 precision
FP16_ALL = Pipeline("fp16_phase", positions="fp16", inv_freq="fp16", phase="fp16", table="fp16",
                    rotation="fp16", activations="fp16")
FP32_PHASE = Pipeline("fp32_phase", positions="fp32", inv_freq="fp32", phase="fp32", table="fp16",
                      rotation="fp16", activations="fp16")


def fp16(ctx):
    pos = torch.arange(32768)
    errs = {p.name: phase_error(p, 128, 10000.0, pos) for p in (FP16_ALL, FP32_PHASE)}
    n = {f"{name}_max_{L}": float(e[:L].max()) for name, e in errs.items() for L in (2048, 32768)}
    png = plot(ctx.out / "c10_fp16.png", {k: (pos.tolist()[1::7], e[1::7].clamp_min(1e-6).tolist())
                                         for k, e in errs.items()}, xlabel="position", ylabel="phase error (rad)",
               logx=True, logy=True, title="RoPE phase error vs fp64, head_dim 128", hlines=[(0.1, "0.1 rad")])
    return Evidence(n, f"max phase error, all-fp16 pipeline: {fmt(n['fp16_phase_max_2048'])} rad below 2048, "
                       f"{fmt(n['fp16_phase_max_32768'])} below 32768; fp32 phase then fp16 table: "
                       f"{fmt(n['fp32_phase_max_2048'])}, {fmt(n['fp32_phase_max_32768'])}", png)


def fp16_rule(n):
    """Loss: the all-fp16 pipeline's phase error exceeds 0.1 rad at some position < 32768. Fix: the fp32
    phase pipeline (fp16 table and rotation) stays <= 0.01 rad to 32768. Both: supported; no loss (fp16
    <= 0.01 rad) or no fix (fp32 phase > 0.1 rad): contradicted; otherwise inconclusive."""
    lost, fixed = n["fp16_phase_max_32768"], n["fp32_phase_max_32768"]
    if missing(n):
        return verdict("not measured", "not measured: a number it judges is NaN")
    if lost > 0.1 and fixed <= 0.01:
        return verdict("supported", f"fp16 phase {fmt(lost)} rad > 0.1; fp32 phase {fmt(fixed)} rad <= 0.01")
    if lost <= 0.01 or fixed > 0.1:
        return verdict("contradicted", f"fp16 phase {fmt(lost)} rad, fp32 phase {fmt(fixed)} rad")
    return verdict("inconclusive", f"fp16 phase {fmt(lost)} rad, fp32 phase {fmt(fixed)} rad")


# ---- 11. cache vs on the fly
def cache(ctx):
    inv = frequencies("default", D, 10000.0)[0]
    lens = (1024, 4096, 16384)
    cache_bytes = [sum(t.nbytes for t in rotary_table(inv, torch.arange(L))) for L in lens]
    gen = torch.Generator().manual_seed(0)
    n = dict(cache_bytes_16k=float(cache_bytes[-1]), cache_growth=cache_bytes[-1] / cache_bytes[0],
             len_growth=lens[-1] / lens[0], onfly_bytes=float(inv.nbytes))
    cos_all, sin_all = rotary_table(inv, torch.arange(4096))
    for T in (64, 1024):
        q, k = torch.randn(2, 1, 4, T, D, generator=gen)
        pos = torch.arange(T)

        def cached():
            c, s = cos_all[:T], sin_all[:T]
            return apply_rotary(q, c, s), apply_rotary(k, c, s)

        def onfly():
            c, s = rotary_table(inv, pos)
            return apply_rotary(q, c, s), apply_rotary(k, c, s)
        n[f"onfly_over_cached_{T}"] = time_s(onfly, inner=20) / time_s(cached, inner=20)
    png = plot(ctx.out / "c11_cache.png", {"cache bytes (cos+sin, fp32)": (list(lens), cache_bytes),
                                           "on-the-fly bytes (inv_freq)": (list(lens), [inv.nbytes] * len(lens))},
               xlabel="cached positions L", ylabel="bytes", logx=True, logy=True, title="RoPE table memory, head_dim 64")
    return Evidence(n, f"cache of cos+sin (fp32, head_dim {D}): {fmt(n['cache_bytes_16k'] / 2**20)} MiB at 16k "
                       f"positions, grows {fmt(n['cache_growth'])}x for {fmt(n['len_growth'])}x length; on the fly "
                       f"holds inv_freq only ({n['onfly_bytes']:.0f} B). Time on the fly / cached (q, k of 4 heads): "
                       f"{fmt(n['onfly_over_cached_64'])} at T=64, {fmt(n['onfly_over_cached_1024'])} at T=1024", png)


def cache_rule(n):
    """Memory: cache bytes grow with length within 1% of proportionally, on the fly holds O(d) bytes.
    Speed: on-the-fly / cached time at T=1024 >= 1.05: supported (the trade exists); <= 0.97 (on the fly
    is not slower): contradicted; between, or memory not proportional: inconclusive."""
    if missing(n):
        return verdict("not measured", "not measured: a number it judges is NaN")
    linear = abs(n["cache_growth"] / n["len_growth"] - 1) <= 0.01
    r = n["onfly_over_cached_1024"]
    if linear and r >= 1.05:
        return verdict("supported", f"cache O(L d) (x{fmt(n['cache_growth'])}); on the fly {fmt(r)}x slower")
    if r <= 0.97:
        return verdict("contradicted", f"on the fly is not slower ({fmt(r)}x)")
    return verdict("inconclusive", f"memory proportional: {linear}; speed ratio {fmt(r)} within noise")


# ---- 12. parameters and cost
def cost(ctx):
    from harness.model import Transformer
    count = {name: sum(p.numel() for p in Transformer(encoding=encodings.build(
        name, d_model=128, n_heads=4, head_dim=32)).parameters()) for name in ("nope", "rope", "learned")}
    enc, gen = encodings.build("rope", head_dim=32), torch.Generator().manual_seed(0)
    # a wide range of T: the per-call overhead (small T) and cache misses (large T) average out
    rot_lens, t_rot = (1024, 2048, 4096, 8192, 16384, 32768), []
    for T in rot_lens:
        q, k = torch.randn(2, 1, 4, T, 32, generator=gen)
        t_rot.append(time_s(lambda: rotate(enc, q, k, torch.arange(T)), repeats=9))
    lens, t_att, t_both = (256, 512, 1024, 2048), [], []
    for T in lens:
        q, k, v = torch.randn(3, 1, 4, T, 32, generator=gen)
        pos = torch.arange(T)
        t_att.append(time_s(lambda: softmax_attention(q, k, v, None), repeats=9, inner=2))
        t_both.append(time_s(lambda: softmax_attention(*rotate(enc, q, k, pos), v, None), repeats=9, inner=2))
    n = dict(extra_params_rope=float(count["rope"] - count["nope"]), extra_params_learned=float(
        count["learned"] - count["nope"]), rotate_slope=slope(rot_lens, t_rot), attention_slope=slope(lens, t_att),
        attention_rope_slope=slope(lens, t_both), overhead_first=t_both[0] / t_att[0],
        overhead_last=t_both[-1] / t_att[-1])
    png = plot(ctx.out / "c12_cost.png", {"rotate q, k": (rot_lens, t_rot), "attention": (lens, t_att),
                                          "rotate + attention": (lens, t_both)}, xlabel="sequence length T",
               ylabel="seconds", logx=True, logy=True, title="RoPE cost vs causal softmax attention (4 heads x 32)")
    return Evidence(n, f"params over NoPE (model=tiny): rope {n['extra_params_rope']:.0f}, learned "
                       f"{n['extra_params_learned']:.0f}; time exponent in T: rotate {fmt(n['rotate_slope'])}, "
                       f"attention {fmt(n['attention_slope'])}, with rope {fmt(n['attention_rope_slope'])}; rope "
                       f"overhead {fmt(n['overhead_first'])}x at T=256, {fmt(n['overhead_last'])}x at T=2048", png)


def cost_rule(n):
    """Zero extra parameters, the rotation's time exponent in T within [0.7, 1.3] (linear), and RoPE's
    overhead on causal softmax attention shrinking with T to <= 1.25x at T=2048 (so attention's T^2 term
    dominates as before): supported; extra parameters > 0 or a rotation exponent > 1.6: contradicted;
    otherwise inconclusive (timing noise on shared cores)."""
    if missing(n):
        return verdict("not measured", "not measured: a number it judges is NaN")
    if n["extra_params_rope"] > 0 or n["rotate_slope"] > 1.6:
        return verdict("contradicted", f"{n['extra_params_rope']:.0f} params, exponent {fmt(n['rotate_slope'])}")
    shrinks = n["overhead_last"] <= min(n["overhead_first"], 1.25)
    if 0.7 <= n["rotate_slope"] <= 1.3 and shrinks:
        return verdict("supported", f"0 params; rotate exponent {fmt(n['rotate_slope'])}; overhead "
                                    f"{fmt(n['overhead_first'])}x -> {fmt(n['overhead_last'])}x as T grows 8x")
    return verdict("inconclusive", f"rotate exponent {fmt(n['rotate_slope'])}, overhead "
                                   f"{fmt(n['overhead_first'])}x -> {fmt(n['overhead_last'])}x")
