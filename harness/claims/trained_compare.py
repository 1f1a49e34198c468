"""Trained-model claims that compare encodings: 7 and 8 (PPL beyond the train length), 9 (linear attention
with RoPE), 15 (RoPE vs a learned table in distribution). Same conventions as harness.claims.trained (its
readers, per-seed values, stats intervals and judge rules)."""

import json
import math

import pandas as pd

from harness import encodings, stats
from harness.claims.judge import est, every, fewest, judge, put, show, unmeasured, within
from harness.claims.table import Evidence, by_parts, fmt, plot, verdict
from harness.claims.trained import MULTIPLES, C, I, N, S, _col, _ratios, _values, cells, log_ratio, rows

# ---- 7 and 8. extrapolation
SLIGHT, BAD = 1.10, 1.50  # PPL ratio vs 1x: < 1.10 slight, [1.10, 1.50) noticeable, >= 1.50 bad
EXTRAPOLATES = 1.05  # an encoding extrapolates when its 8x PPL is within 5% of its 1x PPL


def _ratio_plot(ctx, name, df, encs, title):
    r = _ratios(df)
    series = {}
    for e in encs:
        ivs = [stats.interval(_col(r[k], e)) for k in MULTIPLES]
        series[e] = (list(MULTIPLES), [i.mean for i in ivs], [i.lo for i in ivs], [i.hi for i in ivs])
    return plot(ctx.out / name, series, xlabel="eval length / train length", ylabel="PPL / PPL at 1x (95% CI)",
                logx=True, title=title, hlines=[(SLIGHT, "slight"), (BAD, "bad")])


def rope_lengths(ctx):
    df = rows(ctx, "default")
    r = {k: _col(t, "rope") for k, t in _ratios(df).items()}  # k -> per-seed ratio
    n = {}
    for k in (2, 4, 8):
        put(n, f"r{k}", stats.interval(r[k]))
    for a, b in ((4, 2), (8, 4)):  # does it degrade with length? paired by seed
        put(n, f"r{a}_minus_r{b}", stats.paired(r[a], r[b]))
    T = _values(df, "train_len")
    png = _ratio_plot(ctx, "c07_rope_lengths.png", df, ["rope"], f"RoPE beyond the train length ({T})")
    return Evidence(n, f"RoPE PPL ratio vs 1x (train length {T}), per seed then over seeds: " + ", ".join(
        show(est(n, f"r{k}"), f"{k}x") for k in (2, 4, 8)), png, n=fewest(n, ("r2", "r4", "r8")))


def rope_lengths_rule(n):
    """RoPE's PPL ratio vs 1x, per seed, then a 95% CI over seeds (>= 3 seeds, else inconclusive); categories
    slight < 1.10 <= noticeable < 1.50 <= bad. Parts: 2x slight (CI below 1.10), 4x noticeable (CI inside
    (1.10, 1.50)), 8x bad (CI above 1.50); a part whose CI lies on the other side is contradicted. All
    supported: supported; all contradicted, or the ratio clearly falls with length (a paired CI of r4 - r2 or
    r8 - r4 below 0): contradicted; some: partly contradicted; otherwise inconclusive."""
    if unmeasured(n, ("r2", "r4", "r8")):
        return verdict(N, "not measured: run make sweep")
    for a, b in ((4, 2), (8, 4)):
        v, t = judge(est(n, f"r{a}_minus_r{b}"), 0.0, "above", label=f"{a}x - {b}x ratio")
        if v == C:
            return verdict(C, f"PPL does not degrade monotonically with length: {t}")
    parts = [judge(est(n, "r2"), SLIGHT, "below", label="2x slight: 2x/1x"),
             within(est(n, "r4"), SLIGHT, BAD, label="4x noticeable: 4x/1x"),
             judge(est(n, "r8"), BAD, "above", label="8x bad: 8x/1x")]
    return by_parts([(t, v) for v, t in parts])


ENCS_8 = ("learned", "sinusoidal", "alibi", "t5")


def absolute_vs_bias(ctx):
    df = rows(ctx, "default")
    r8 = _ratios(df)[8]
    n = {}
    for e in ENCS_8:
        put(n, f"r8_{e}", stats.interval(_col(r8, e)))
    put(n, "r8_sinusoidal_minus_learned", stats.paired(_col(r8, "sinusoidal"), _col(r8, "learned")))
    T = _values(df, "train_len")
    png = _ratio_plot(ctx, "c08_extrapolation.png", df, ENCS_8 + ("rope",), f"Extrapolation (train length {T})")
    judged = [f"r8_{e}" for e in ENCS_8] + ["r8_sinusoidal_minus_learned"]
    return Evidence(n, "PPL at 8x / 1x, per seed then over seeds: " + ", ".join(
        show(est(n, f"r8_{e}"), e) for e in ENCS_8), png, n=fewest(n, judged))


def absolute_vs_bias_rule(n):
    """PPL ratio 8x / 1x per seed, then a 95% CI over seeds (>= 3 seeds, else inconclusive). Parts: learned
    cannot extrapolate (CI above 1.50); sinusoidal only slightly (CI above 1.05, and the paired CI of
    sinusoidal - learned below 0); ALiBi extrapolates (CI below 1.05); T5 extrapolates (CI below 1.05). A part
    whose CI lies on the other side is contradicted. All supported: supported; all contradicted:
    contradicted; some: partly contradicted; otherwise inconclusive."""
    if unmeasured(n, [f"r8_{e}" for e in ENCS_8]):
        return verdict(N, "not measured: run make sweep")
    sin = every([judge(est(n, "r8_sinusoidal"), EXTRAPOLATES, "above", label="8x/1x"),
                 judge(est(n, "r8_sinusoidal_minus_learned"), 0.0, "below", label="minus learned's")],
                "sinusoidal only slightly")
    parts = [judge(est(n, "r8_learned"), BAD, "above", label="learned cannot: 8x/1x"), sin,
             judge(est(n, "r8_alibi"), EXTRAPOLATES, "below", label="alibi extrapolates: 8x/1x"),
             judge(est(n, "r8_t5"), EXTRAPOLATES, "below", label="t5 extrapolates: 8x/1x")]
    return by_parts([(t, v) for v, t in parts])


# ---- 9. linear attention
def _loss_drop(df, encoding):
    """Per seed: final / first logged train loss of `encoding`'s run (index: seed)."""
    loss = df[(df.metric == "train_loss") & (df.encoding == encoding)]
    out = {}
    for seed, g in loss.groupby("seed"):
        curve = g.groupby("step").value.mean().sort_index()  # one run per seed (a rerun's rows averaged)
        out[seed] = float(curve.iloc[-1] / curve.iloc[0])
    return pd.Series(out, dtype=float)


def linear(ctx):
    lin, soft = rows(ctx, "claims"), rows(ctx, "default")
    t_lin, t_soft = cells(lin, "ppl", 1), cells(soft, "ppl", 1)  # (seed x encoding) PPL at the train length
    rope, nope, softmax = _col(t_lin, "rope"), _col(t_lin, "nope"), _col(t_soft, "rope")
    n = {}
    for key, x in (("ppl_linear_rope", rope), ("ppl_linear_nope", nope), ("ppl_softmax_rope", softmax)):
        put(n, key, stats.interval(x))
    put(n, "d_linear_rope_nope", stats.paired(rope, nope))  # same seed, same batches: paired
    put(n, "linear_over_softmax", stats.interval(rope / softmax))  # per-seed ratio; reported, not judged
    curves = {}
    for label, df, enc in (("linear rope", lin, "rope"), ("linear nope", lin, "nope"), ("softmax rope", soft, "rope")):
        put(n, f"loss_drop_{label.replace(' ', '_')}", stats.interval(_loss_drop(df, enc)))
        loss = df[(df.metric == "train_loss") & (df.encoding == enc)]
        if len(loss):
            s = stats.summarize(loss, "step")  # per step: mean, lo, hi over seeds
            curves[label] = (s.step.tolist(), s["mean"].tolist(), s.lo.tolist(), s.hi.tolist())
    png = plot(ctx.out / "c09_linear.png", curves, xlabel="step", ylabel="train loss (nats; 95% CI over seeds)",
               title="Linear attention (RoPE in the numerator) vs softmax") if "linear rope" in curves else None
    T = _values(lin, "train_len")
    return Evidence(n, f"PPL at the train length {T}, over seeds: {show(est(n, 'ppl_linear_rope'), 'linear+RoPE')}, "
                       f"{show(est(n, 'ppl_linear_nope'), 'linear NoPE')}, "
                       f"{show(est(n, 'ppl_softmax_rope'), 'softmax+RoPE')}; paired "
                       f"{show(est(n, 'd_linear_rope_nope'), 'linear+RoPE - NoPE')}; "
                       f"{show(est(n, 'loss_drop_linear_rope'), 'final/first train loss linear+RoPE')}", png,
                    n=fewest(n, ("d_linear_rope_nope", "loss_drop_linear_rope")))


def linear_rule(n):
    """Sweep claims (causal linear attention), per seed, then 95% CIs over seeds (>= 3 seeds, else
    inconclusive). Parts: it trains (final / first logged train loss of linear+RoPE, CI below 0.6) and RoPE
    helps (paired PPL difference linear+RoPE - linear NoPE at the train length, CI below 0). Both supported:
    supported; both contradicted (loss CI above 0.6, and the difference CI above 0): contradicted; one: partly
    contradicted; otherwise inconclusive (a tie is inconclusive). The ratio to softmax+RoPE (sweep default) is
    reported, not judged."""
    keys = ("loss_drop_linear_rope", "d_linear_rope_nope")
    if unmeasured(n, keys):
        return verdict(N, "not measured: run make sweep SWEEP=claims")
    parts = [judge(est(n, "loss_drop_linear_rope"), 0.6, "below", label="trains: final/first loss"),
             judge(est(n, "d_linear_rope_nope"), 0.0, "below", label="beats NoPE: PPL linear+RoPE - NoPE")]
    v, reason = by_parts([(t, x) for x, t in parts])
    return v, reason + f"; {show(est(n, 'linear_over_softmax'), 'PPL / softmax+RoPE PPL')} (not judged)"


# ---- 15. RoPE vs learned in distribution
def encoding_params(df, name):
    """Parameters (state_dict numel) of `name`'s encoding built as its runs built it: the model dims and the
    encoding's own parameters of its train rows (row-only keys such as cpu_isa dropped); NaN without such rows.
    The model holds the encoding as `encoding`, so this is a checkpoint's encoding.* count, exactly, without
    the checkpoint (git-ignored, while rows are committed); the count does not depend on training or seed."""
    train = df[(df.encoding == name) & (df.protocol == "train")]
    if train.empty:
        return math.nan
    r = train.iloc[0]
    own = {k: v for k, v in json.loads(r.params).items() if k in encodings.parameters(name)}
    enc = encodings.build(name, d_model=int(r.d_model), n_heads=int(r.n_heads), head_dim=int(r.head_dim),
                          n_layers=int(r.n_layers), **own)
    return float(sum(v.numel() for v in enc.state_dict().values()))


def rope_vs_learned(ctx):
    df = rows(ctx, "default")
    t = cells(df, "ppl", 1)  # (seed x encoding) PPL at the train length
    rope, learned = _col(t, "rope"), _col(t, "learned")
    n = {}
    put(n, "ppl_rope", stats.interval(rope))
    put(n, "ppl_learned", stats.interval(learned))
    # paired on log PPL: the CI of the mean log ratio, shown as a ratio (geometric mean over seeds)
    log_ratio(n, "ratio_rope_learned", rope, learned)
    for e in ("rope", "learned"):
        n[f"params_{e}"] = encoding_params(df, e)
    return Evidence(n, f"PPL at the train length {_values(df, 'train_len')}, paired by seed: "
                       f"{show(est(n, 'ratio_rope_learned'), 'rope/learned')} ({show(est(n, 'ppl_rope'), 'rope')} with "
                       f"{fmt(n['params_rope'])} encoding params, {show(est(n, 'ppl_learned'), 'learned')} with "
                       f"{fmt(n['params_learned'])})", "c08_extrapolation.png", n=fewest(n, ("ratio_rope_learned",)))


def rope_vs_learned_rule(n):
    """RoPE's encoding parameters (exact: its encoding built as its runs' rows say) and PPL(rope) / PPL(learned)
    at the train length, paired by seed (stats.paired on log PPL: a geometric-mean ratio with a 95% CI over
    seeds; >= 3 seeds, else inconclusive). Zero parameters and the ratio's CI below 1.03 (matches or beats):
    supported; parameters > 0 and the CI above 1.10: contradicted; one of them: partly contradicted; otherwise
    inconclusive."""
    if unmeasured(n, ("ratio_rope_learned",)):
        return verdict(N, "not measured: run make sweep")
    p = n.get("params_rope", math.nan)
    zero = (I if math.isnan(p) else S if p == 0 else C, f"zero params: {fmt(p)} RoPE encoding params")
    match = judge(est(n, "ratio_rope_learned"), 1.03, "below", far=1.10, label="PPL rope/learned")
    return by_parts([(t, v) for v, t in (zero, match)])
