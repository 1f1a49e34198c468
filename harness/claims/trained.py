"""Claims tested on trained models: rows and checkpoints of sweeps default, base_ablation and claims
(results/sweeps/<sweep>/). Ratios are PPL at k x the train length over PPL at 1x, nonoverlapping
windows, rows without an eval-time extension. A run whose rows lack a parameter its encoding's YAML now
has is stale (trained by older code): it is left out and its numbers read NaN (inconclusive)."""
import json
import math
from pathlib import Path

import pandas as pd
import torch
import yaml

from harness import results, tasks
from harness.claims import attention
from harness.claims.table import Evidence, by_parts, fmt, missing, plot, verdict
from harness.data import eval_windows

ENCODING_CONF = Path(__file__).resolve().parents[2] / "conf" / "encoding"
MULTIPLES = (1, 2, 4, 8)


def _stale(df):
    """run_ids whose params lack a key of conf/encoding/<encoding>.yaml."""
    out = set()
    for (run_id, name), g in df[df.protocol == "train"].groupby(["run_id", "encoding"]):
        conf = ENCODING_CONF / f"{name}.yaml"
        want = set(yaml.safe_load(conf.read_text())) - {"name"} if conf.exists() else set()
        if want - set(json.loads(g.params.iloc[0])):
            out.add(run_id)
    return out


def rows(ctx, sweep):
    """All fresh rows of a sweep (empty when it was not run); stale run_ids go to ctx.stale."""
    if sweep not in ctx.cache:
        path = Path(ctx.sweeps) / sweep
        df = results.load(path) if path.exists() else pd.DataFrame(columns=results.COLUMNS)
        stale = _stale(df)
        ctx.stale.update(stale)  # run_ids read <sweep>/<run dir>
        ctx.cache[sweep] = df[~df.run_id.isin(stale)]
    return ctx.cache[sweep]


def value(df, metric, L, *, encoding=None, protocol="nonoverlapping", **params):
    """Mean value of the matching rows (NaN when none): metric at eval_len L, no extension, params match."""
    sel = df[(df.metric == metric) & (df.protocol == protocol)]
    sel = sel[sel.eval_len == L] if L is not None else sel
    sel = sel[sel.encoding == encoding] if encoding else sel
    meta = sel.params.map(json.loads)
    keep = meta.map(lambda m: "extension" not in m and all(m.get(k) == v for k, v in params.items()))
    return float(sel[keep].value.mean()) if keep.any() else math.nan


def _ratios(df, encoding, train_len=64, **params):
    base = value(df, "ppl", train_len, encoding=encoding, **params)
    return {k: value(df, "ppl", k * train_len, encoding=encoding, **params) / base for k in MULTIPLES}


def _fresh_dirs(ctx, sweep):
    """Run dirs of a sweep with a checkpoint and fresh rows."""
    fresh = set(rows(ctx, sweep).run_id)
    return [d for d in results.run_dirs(Path(ctx.sweeps) / sweep)
            if f"{sweep}/{d.name}" in fresh and (d / results.CHECKPOINT).exists()]


def _state(ctx, sweep, run):
    d = Path(ctx.sweeps) / sweep / run
    if not (d / results.CHECKPOINT).exists() or f"{sweep}/{run}" in ctx.stale:
        return None
    return torch.load(d / results.CHECKPOINT, map_location="cpu", weights_only=True)["state_dict"]


# ---- 3. theta vs attention locality
def locality(ctx):
    from harness.lm import load_run  # imports lm-eval: only when a claim needs a checkpoint's model
    rows(ctx, "base_ablation")
    points, batch = [], {}
    for d in _fresh_dirs(ctx, "base_ablation"):
        cfg, net = load_run(d)
        for L in (cfg.train.seq_len, 4 * cfg.train.seq_len):
            if L not in batch:  # one batch of val windows shared by every run (same corpus)
                val = tasks.build(cfg.task, cfg.seed).splits["val"]
                ws = [x for x, _, _ in eval_windows(val, L, max_tokens=16 * 64)]
                batch[L] = torch.cat(ws)  # (B, L)
            points.append((cfg.encoding["base"], L, attention.locality(attention.probabilities(net, batch[L]))))
    df = pd.DataFrame(points, columns=["base", "L", "locality"]).sort_values("base")
    short = df[df.L == df.L.min()] if len(df) else df
    n = dict(spearman=float(short.base.corr(short.locality, method="spearman")) if len(short) > 2 else math.nan,
             spread=float(short.locality.max() / short.locality.min()) if len(short) else math.nan,
             n_runs=float(len(short)))
    long = df[df.L == df.L.max()] if len(df) else df  # 4x the train length: reported, not judged
    n["spearman_4x"] = float(long.base.corr(long.locality, method="spearman")) if len(long) > 2 else math.nan
    png = None
    if len(df):
        png = plot(ctx.out / "c03_locality.png", {f"T={L}": (g.base.tolist(), g.locality.tolist())
                                                  for L, g in df.groupby("L")}, xlabel="RoPE base (larger = smaller theta_i)",
                   ylabel="mean attention distance / uniform", logx=True, title="Attention locality of trained models")
    table = ", ".join(f"{b:g}: {v:.3f}" for b, v in zip(short.base, short.locality))
    return Evidence(n, f"mean attention distance / uniform-causal at T=64 (train length), base -> value: {table}; "
                       f"Spearman(base, value) {fmt(n['spearman'])}, max/min {fmt(n['spread'])} (at T=256, 4x: Spearman "
                       f"{fmt(n['spearman_4x'])})", png)


def locality_rule(n):
    """theta_i = base^(-2i/d), so a larger theta (every i > 0) is a smaller base; the claim predicts the
    normalised attention distance rises with the base. Over the base_ablation runs (>= 3 needed), Spearman(base,
    distance) >= 0.8 and max/min >= 1.1: supported; Spearman <= -0.8 and max/min >= 1.1: contradicted;
    otherwise inconclusive (a weak or flat trend)."""
    if missing({k: n[k] for k in ("spearman", "spread")}) or n["n_runs"] < 3:
        return verdict("inconclusive", f"{n['n_runs']:.0f} fresh runs; run make sweep SWEEP=base_ablation")
    s, r = n["spearman"], n["spread"]
    if s >= 0.8 and r >= 1.1:
        return verdict("supported", f"smaller base (larger theta) -> more local: Spearman {fmt(s)}, spread {fmt(r)}")
    if s <= -0.8 and r >= 1.1:
        return verdict("contradicted", f"larger base -> more local: Spearman {fmt(s)}, spread {fmt(r)}")
    return verdict("inconclusive", f"Spearman {fmt(s)}, spread {fmt(r)}")


# ---- 5. learnable frequencies
def learned_freq(ctx):
    rows(ctx, "default")
    state = _state(ctx, "default", "encoding=rope_learned_freq")
    rf = _state(ctx, "default", "encoding=rope_rf")
    a = next((v for k, v in (state or {}).items() if k.endswith("log_scale")), None)
    alpha = next((float(v) for k, v in (rf or {}).items() if k.endswith("alpha")), math.nan)
    df = rows(ctx, "default")
    init = df[(df.encoding == "rope_rf") & (df.protocol == "train")].params.map(lambda p: json.loads(p).get(
        "alpha_init", math.nan))
    init = float(init.iloc[0]) if len(init) else math.nan
    if a is None:
        return Evidence(dict(max_rel=math.nan, mean_rel=math.nan), "no fresh rope_learned_freq checkpoint")
    rel = a.double().exp() - 1  # theta_i / theta_i(init) - 1
    n = dict(max_rel=float(rel.abs().max()), mean_rel=float(rel.abs().mean()), alpha=alpha)
    png = plot(ctx.out / "c05_learned_freq.png", {"theta_i / init - 1": (list(range(len(rel))), rel.tolist())},
               xlabel="frequency index i (theta_i = 1e4^(-2i/d) e^(a_i))", ylabel="relative change",
               title="Learned RoPE frequencies after training", kind="bar")
    return Evidence(n, f"after training (sweep default): |theta_i/theta_i(init) - 1| max {fmt(n['max_rel'])}, "
                       f"mean {fmt(n['mean_rel'])} over {len(rel)} frequencies; rope_rf alpha {fmt(init)} -> {fmt(alpha)}", png)


def learned_freq_rule(n):
    """Largest relative change of a learnable theta_i: < 0.05: supported (barely moves); > 0.25: contradicted;
    otherwise inconclusive."""
    m = n["max_rel"]
    if math.isnan(m):
        return verdict("inconclusive", "not measured: run make sweep")
    if m < 0.05:
        return verdict("supported", f"max change {fmt(m)} < 5%")
    return verdict("contradicted", f"max change {fmt(m)} > 25%") if m > 0.25 else verdict(
        "inconclusive", f"max change {fmt(m)} between 5% and 25%")


# ---- 6. base ablation
BASES = (100.0, 1000.0, 10000.0, 100000.0, 500000.0)
TOL = 0.01  # PPL differences within 1% count as ties (one seed)


def bases(ctx):
    df = rows(ctx, "base_ablation")
    n = {f"ppl{k}_{b:g}": value(df, "ppl", 64 * k, base=b) for b in BASES for k in (1, 8)}
    png = plot(ctx.out / "c06_base.png", {f"{k}x train length": (list(BASES), [n[f"ppl{k}_{b:g}"] for b in BASES])
                                          for k in (1, 8)}, xlabel="RoPE base", ylabel="PPL (nonoverlapping)",
               logx=True, title="RoPE base ablation (model=tiny, train 64)")
    cells = "; ".join(f"{b:g}: {fmt(n[f'ppl1_{b:g}'])} / {fmt(n[f'ppl8_{b:g}'])}" for b in BASES)
    return Evidence(n, f"PPL at 1x / 8x (64 / 512) per base: {cells}", png)


def bases_rule(n):
    """Four parts, a 1% tie tolerance (one seed): 1e4 best at 1x (<= 1.01 x the best), 1e4 best at 8x,
    100 poor (> 1.01 x 1e4 at 1x), 1e5 worse at 8x (> 1.01 x 1e4). All hold: supported; two or more
    fail: contradicted; one fails: inconclusive."""
    if missing(n):
        return verdict("inconclusive", "not measured: run make sweep SWEEP=base_ablation")
    best = {k: min(n[f"ppl{k}_{b:g}"] for b in BASES) for k in (1, 8)}
    return by_parts([("1e4 best at 1x", n["ppl1_10000"] <= best[1] * (1 + TOL)),
                     ("1e4 best at 8x", n["ppl8_10000"] <= best[8] * (1 + TOL)),
                     ("100 poor at 1x", n["ppl1_100"] > n["ppl1_10000"] * (1 + TOL)),
                     ("1e5 worse at 8x", n["ppl8_100000"] > n["ppl8_10000"] * (1 + TOL))])


# ---- 7 and 8. extrapolation
SLIGHT, BAD = 1.10, 1.50  # PPL ratio vs 1x: < 1.10 slight, [1.10, 1.50) noticeable, >= 1.50 bad
EXTRAPOLATES = 1.05  # an encoding extrapolates when its 8x PPL is within 5% of its 1x PPL


def _ratio_plot(ctx, name, df, encs, title):
    series = {e: (list(MULTIPLES), [_ratios(df, e)[k] for k in MULTIPLES]) for e in encs}
    return plot(ctx.out / name, series, xlabel="eval length / train length", ylabel="PPL / PPL at 1x", logx=True,
                title=title, hlines=[(SLIGHT, "slight"), (BAD, "bad")])


def rope_lengths(ctx):
    df = rows(ctx, "default")
    r = _ratios(df, "rope")
    n = {f"r{k}": r[k] for k in (2, 4, 8)}
    png = _ratio_plot(ctx, "c07_rope_lengths.png", df, ["rope"], "RoPE beyond the train length (64)")
    return Evidence(n, f"RoPE PPL ratio vs 1x: 2x {fmt(n['r2'])}, 4x {fmt(n['r4'])}, 8x {fmt(n['r8'])}", png)


def rope_lengths_rule(n):
    """Categories of the PPL ratio vs 1x: slight < 1.10 <= noticeable < 1.50 <= bad. Parts: 2x slight,
    4x noticeable, 8x bad. All hold: supported; two or more fail, or the ratio falls with length:
    contradicted; one fails: inconclusive."""
    if missing(n):
        return verdict("inconclusive", "not measured: run make sweep")
    if not n["r2"] <= n["r4"] <= n["r8"]:
        return verdict("contradicted", "PPL does not degrade monotonically with length")
    return by_parts([(f"2x slight ({fmt(n['r2'])})", n["r2"] < SLIGHT),
                     (f"4x noticeable ({fmt(n['r4'])})", SLIGHT <= n["r4"] < BAD),
                     (f"8x bad ({fmt(n['r8'])})", n["r8"] >= BAD)])


def absolute_vs_bias(ctx):
    df = rows(ctx, "default")
    encs = ("learned", "sinusoidal", "alibi", "t5")
    n = {f"r8_{e}": _ratios(df, e)[8] for e in encs}
    png = _ratio_plot(ctx, "c08_extrapolation.png", df, encs + ("rope",), "Extrapolation (train 64)")
    return Evidence(n, "PPL at 8x / 1x: " + ", ".join(f"{e} {fmt(n[f'r8_{e}'])}" for e in encs), png)


def absolute_vs_bias_rule(n):
    """PPL ratio 8x / 1x. Parts: learned cannot extrapolate (>= 1.50); sinusoidal only slightly
    (above 1.05 yet below learned's); ALiBi extrapolates (<= 1.05); T5 extrapolates (<= 1.05).
    All hold: supported; two or more fail: contradicted; one fails: inconclusive."""
    if missing(n):
        return verdict("inconclusive", "not measured: run make sweep")
    return by_parts([(f"learned {fmt(n['r8_learned'])} >= {BAD}", n["r8_learned"] >= BAD),
                     (f"sinusoidal {fmt(n['r8_sinusoidal'])} in ({EXTRAPOLATES}, learned)",
                      EXTRAPOLATES < n["r8_sinusoidal"] < n["r8_learned"]),
                     (f"alibi {fmt(n['r8_alibi'])} <= {EXTRAPOLATES}", n["r8_alibi"] <= EXTRAPOLATES),
                     (f"t5 {fmt(n['r8_t5'])} <= {EXTRAPOLATES}", n["r8_t5"] <= EXTRAPOLATES)])


# ---- 9. linear attention
def linear(ctx):
    lin, soft = rows(ctx, "claims"), rows(ctx, "default")
    n = dict(ppl_linear_rope=value(lin, "ppl", 64, encoding="rope"), ppl_linear_nope=value(lin, "ppl", 64,
             encoding="nope"), ppl_softmax_rope=value(soft, "ppl", 64, encoding="rope"))
    curves = {}
    for label, df, enc in (("linear rope", lin, "rope"), ("linear nope", lin, "nope"), ("softmax rope", soft, "rope")):
        loss = df[(df.metric == "train_loss") & (df.encoding == enc)].sort_values("step")
        curves[label] = (loss.step.tolist(), loss.value.tolist())
        n[f"loss_drop_{label.replace(' ', '_')}"] = (float(loss.value.iloc[-1] / loss.value.iloc[0])
                                                      if len(loss) else math.nan)
    png = plot(ctx.out / "c09_linear.png", curves, xlabel="step", ylabel="train loss (nats)",
               title="Linear attention (RoPE in the numerator) vs softmax")
    return Evidence(n, f"PPL at 64: linear+RoPE {fmt(n['ppl_linear_rope'])}, linear NoPE {fmt(n['ppl_linear_nope'])}, "
                       f"softmax+RoPE {fmt(n['ppl_softmax_rope'])}; final/first train loss linear+RoPE "
                       f"{fmt(n['loss_drop_linear_rope'])}", png)


def linear_rule(n):
    """Trains: final / first logged train loss <= 0.6. Then linear+RoPE PPL <= 0.98 x linear NoPE PPL:
    supported; it does not train, or PPL >= 1.02 x linear NoPE: contradicted; otherwise inconclusive.
    The softmax gap is reported, not judged (the notes make no number of it)."""
    need = {k: n[k] for k in ("ppl_linear_rope", "ppl_linear_nope", "loss_drop_linear_rope")}
    if missing(need):
        return verdict("inconclusive", "not measured: run make sweep SWEEP=claims")
    ratio = n["ppl_linear_rope"] / n["ppl_linear_nope"]
    gap = f"; {fmt(n['ppl_linear_rope'] / n['ppl_softmax_rope'])}x softmax+RoPE's PPL"
    if n["loss_drop_linear_rope"] > 0.6 or ratio >= 1.02:
        return verdict("contradicted", f"loss ratio {fmt(n['loss_drop_linear_rope'])}, PPL {fmt(ratio)}x NoPE" + gap)
    if ratio <= 0.98:
        return verdict("supported", f"trains; PPL {fmt(ratio)}x linear NoPE's" + gap)
    return verdict("inconclusive", f"trains; PPL {fmt(ratio)}x linear NoPE's (a tie)" + gap)


# ---- 15. RoPE vs learned in distribution
def rope_vs_learned(ctx):
    df = rows(ctx, "default")
    n = dict(ppl_rope=value(df, "ppl", 64, encoding="rope"), ppl_learned=value(df, "ppl", 64, encoding="learned"))
    for e in ("rope", "learned"):
        state = _state(ctx, "default", f"encoding={e}")
        n[f"params_{e}"] = (float(sum(v.numel() for k, v in state.items() if k.startswith("encoding.")))
                            if state is not None else math.nan)
    return Evidence(n, f"PPL at the train length 64: rope {fmt(n['ppl_rope'])} with {fmt(n['params_rope'])} encoding "
                       f"params, learned {fmt(n['ppl_learned'])} with {fmt(n['params_learned'])}",
                    "c08_extrapolation.png")


def rope_vs_learned_rule(n):
    """Zero RoPE parameters and RoPE PPL <= 1.03 x learned PPL at 1x: supported (matches or beats); RoPE
    parameters > 0 or PPL > 1.10 x learned: contradicted; otherwise inconclusive."""
    if missing(n):
        return verdict("inconclusive", "not measured: run make sweep")
    r = n["ppl_rope"] / n["ppl_learned"]
    if n["params_rope"] > 0 or r > 1.10:
        return verdict("contradicted", f"{n['params_rope']:.0f} params, PPL ratio {fmt(r)}")
    if r <= 1.03:
        return verdict("supported", f"0 params; PPL ratio rope/learned {fmt(r)} <= 1.03")
    return verdict("inconclusive", f"PPL ratio {fmt(r)}")
