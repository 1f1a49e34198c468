"""Claims tested on trained models: rows and checkpoints of sweeps default, base_ablation and claims
(results/sweeps/<sweep>/), each run once per seed (run dirs `encoding=rope,seed=1`; an older single-seed dir
`encoding=rope` counts as the seed in its rows).

Every number is computed seed by seed first, then aggregated by harness.stats (the one place that aggregates
over seeds): a quantity of one encoding (PPL at k x the train length over PPL at 1x, nonoverlapping windows,
rows without an eval-time extension) is a 95% CI over seeds (stats.interval); a comparison of two encodings
or bases is a paired difference (stats.paired: one seed trains every variant on the same batches and scores it
on the same windows). Evidence numbers follow harness.claims.judge's flat convention (q, q_lo, q_hi, q_n) and
every rule judges on the interval (judge.judge), so a claim needs >= 3 seeds to be more than inconclusive.
Seeds, train lengths, head_dim and the ablated bases are read from the rows. A run whose rows lack a
parameter its encoding's YAML now has is stale (trained by older code): it is left out (inconclusive)."""
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from harness import results, stats, tasks
from harness.claims import attention
from harness.claims.judge import est, every, fewest, judge, put, show, unmeasured, within
from harness.claims.table import VERDICTS, Evidence, by_parts, fmt, plot, verdict

ENCODING_CONF = Path(__file__).resolve().parents[2] / "conf" / "encoding"
MULTIPLES = (1, 2, 4, 8)
S, C, I = VERDICTS


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


def cells(df, metric, k, *, by="encoding", protocol="nonoverlapping", **params):
    """(seed x <by>) table of per-seed values of `metric` at eval_len = k x the row's own train_len (k None: any
    eval_len), rows without an eval-time extension whose params match `params`. by: a row column or an
    encoding-parameter key (e.g. "base"). Empty (no columns) when nothing matches."""
    sel = df[(df.metric == metric) & (df.protocol == protocol)]
    if k is not None:
        L = pd.to_numeric(sel.eval_len, errors="coerce").astype(float)
        sel = sel[L == k * pd.to_numeric(sel.train_len, errors="coerce").astype(float)]
    meta = sel.params.map(json.loads)
    keep = meta.map(lambda m: "extension" not in m and all(m.get(p) == v for p, v in params.items())).astype(bool)
    sel, meta = sel[keep], meta[keep]
    if sel.empty:
        return pd.DataFrame(index=pd.Index([], name="seed"))
    if by not in sel.columns:
        sel = sel.assign(**{by: meta.map(lambda m: m.get(by))})
    return stats.seed_table(sel.assign(value=sel.value.astype(float)), by)


def _col(table, name):
    """One variant's per-seed values (index: seed); empty when the table lacks it."""
    return table[name].astype(float) if name in table.columns else pd.Series(dtype=float)


def _ratios(df, by="encoding"):
    """{k: (seed x <by>) PPL at k x the train length / PPL at 1x, seed by seed} for k in MULTIPLES."""
    one = cells(df, "ppl", 1, by=by)
    return {k: cells(df, "ppl", k, by=by) / one for k in MULTIPLES}


def _values(df, col):
    """'64' or '64/128': the distinct values of a row column (train_len, head_dim, seed)."""
    vals = sorted({int(v) for v in pd.to_numeric(df[col], errors="coerce").dropna()}) if len(df) else []
    return "/".join(map(str, vals)) or "n/a"


def _checkpoints(ctx, sweep, encoding=None):
    """[(seed, run dir)] of the fresh runs of a sweep (of `encoding` when given) that saved a checkpoint, by
    seed. Dirs come from the rows' run_id (<sweep>/<dir>), so `encoding=rope,seed=1` and the older single-seed
    `encoding=rope` both work."""
    df = rows(ctx, sweep)
    df = df[df.encoding == encoding] if encoding else df
    out = []
    for run_id, seed in df[["run_id", "seed"]].drop_duplicates().itertuples(index=False):
        d = Path(ctx.sweeps) / run_id
        if (d / results.CHECKPOINT).exists():
            out.append((int(seed), d))
    return sorted(out)


def _states(ctx, sweep, encoding):
    """{seed: state_dict} of `encoding`'s checkpoints in a sweep (a seed run twice: the later dir)."""
    return {seed: torch.load(d / results.CHECKPOINT, map_location="cpu", weights_only=True)["state_dict"]
            for seed, d in _checkpoints(ctx, sweep, encoding)}


def _band(per_seed):
    """(seed x point) table -> (mean, lo, hi) lists, a stats.interval per point."""
    ivs = [stats.interval(per_seed[c]) for c in per_seed.columns]
    return [i.mean for i in ivs], [i.lo for i in ivs], [i.hi for i in ivs]


# ---- 3. theta vs attention locality
def locality(ctx):
    from harness.lm import load_run  # imports lm-eval: only when a claim needs a checkpoint's model
    points, batch = [], {}
    for seed, d in _checkpoints(ctx, "base_ablation"):
        cfg, net = load_run(d)
        T = cfg.train.seq_len
        for L in (T, 4 * T):
            if (seed, L) not in batch:  # the seed's val windows, shared by its runs (paired by seed)
                batch[seed, L] = tasks.build(cfg.task, seed).eval_batch(L, 16 * 64)[0]  # (B, L)
            dist = attention.locality(attention.probabilities(net, batch[seed, L]))
            points.append((seed, float(cfg.encoding["base"]), L // T, L, dist))
    # points: one row per (seed, base, length multiple); value = normalised mean attention distance
    df = pd.DataFrame(points, columns=["seed", "base", "k", "L", "value"])
    n = {}
    for k, key in ((1, "spearman"), (4, "spearman_4x")):
        # per seed: Spearman over the bases, and max/min over them (>= 3 bases, else NaN for that seed)
        g = [x.sort_values("base") for _, x in df[df.k == k].groupby("seed")] if len(df) else []
        rho = [x.base.corr(x.value, method="spearman") if len(x) > 2 else math.nan for x in g]
        iv = stats.interval(rho)  # a t interval of a mean correlation can pass +-1; the mean itself cannot
        put(n, key, dataclasses.replace(iv, lo=max(iv.lo, -1.0), hi=min(iv.hi, 1.0)) if iv.n >= 2 else iv)
        if k == 1:
            put(n, "spread", stats.interval([x.value.max() / x.value.min() if len(x) > 2 else math.nan for x in g]))
    png = None
    if len(df):
        series = {}
        for (k, L), g in df.groupby(["k", "L"]):
            s = stats.summarize(g, "base")  # per base: n, mean, lo, hi over seeds
            series[f"T={L} ({k}x train)"] = (s.base.tolist(), s["mean"].tolist(), s.lo.tolist(), s.hi.tolist())
        png = plot(ctx.out / "c03_locality.png", series, xlabel="RoPE base (larger = smaller theta_i)",
                   ylabel="mean attention distance / uniform", logx=True,
                   title="Attention locality of trained models (95% CI over seeds)")
    short = stats.summarize(df[df.k == 1], "base") if len(df) else pd.DataFrame(columns=["base", "mean"])
    table = ", ".join(f"{b:g}: {fmt(v)}" for b, v in zip(short.base, short["mean"]))
    return Evidence(n, f"mean attention distance / uniform-causal at the train length, base -> mean over seeds: "
                       f"{table or 'n/a'}; per seed then over seeds: "
                       f"{show(est(n, 'spearman'), 'Spearman(base, value)')}, {show(est(n, 'spread'), 'max/min')} "
                       f"(at 4x: {show(est(n, 'spearman_4x'), 'Spearman')})",
                    png, n=fewest(n, ("spearman", "spread")))


def locality_rule(n):
    """theta_i = base^(-2i/d), so a larger theta (every i > 0) is a smaller base; the claim predicts the
    normalised attention distance rises with the base. Per seed over the base_ablation runs (>= 3 bases):
    Spearman(base, distance) and max/min distance; each a 95% CI over seeds (>= 3 seeds, else inconclusive).
    Parts: the trend has the claim's sign (Spearman CI above 0; below 0 contradicts: a larger base is more
    local) and is not negligible (max/min CI above 1.1; below 1.1 contradicts: the base barely moves
    locality). Both supported: supported; either contradicted: contradicted; otherwise inconclusive."""
    if unmeasured(n, ("spearman", "spread")):
        return verdict(I, "not measured: run make sweep SWEEP=base_ablation (with checkpoints)")
    parts = [judge(est(n, "spearman"), 0.0, "above", label="Spearman(base, distance)"),
             judge(est(n, "spread"), 1.1, "above", label="max/min distance")]
    return by_parts([(t, v) for v, t in parts], contradict_at=1)


# ---- 5. learnable frequencies
def learned_freq(ctx):
    df = rows(ctx, "default")
    rel = {}  # seed -> (n_freq,) theta_i / theta_i(init) - 1
    for seed, state in _states(ctx, "default", "rope_learned_freq").items():
        a = next((v for k, v in state.items() if k.endswith("log_scale")), None)
        if a is not None:
            rel[seed] = (a.double().exp() - 1).flatten()
    alpha = [next((float(v) for k, v in s.items() if k.endswith("alpha")), math.nan)
             for s in _states(ctx, "default", "rope_rf").values()]
    rf = df[(df.encoding == "rope_rf") & (df.protocol == "train")]
    init = rf.params.map(lambda p: json.loads(p).get("alpha_init", math.nan))
    init = float(init.iloc[0]) if len(init) else math.nan
    n = {}
    put(n, "max_rel", stats.interval([float(r.abs().max()) for r in rel.values()]))
    put(n, "mean_rel", stats.interval([float(r.abs().mean()) for r in rel.values()]))
    put(n, "alpha", stats.interval(alpha))
    if not rel:
        return Evidence(n, "no fresh rope_learned_freq checkpoint", n=0)
    lf = df[df.encoding == "rope_learned_freq"]
    base = {json.loads(p).get("base") for p in lf.params}
    per_seed = pd.DataFrame([r.tolist() for r in rel.values()], index=list(rel))  # (seed, frequency index)
    mean, lo, hi = _band(per_seed)
    png = plot(ctx.out / "c05_learned_freq.png", {"theta_i / init - 1": (list(per_seed.columns), mean, lo, hi)},
               xlabel=f"i (theta_i = base^(-2i/d) e^(a_i); base {'/'.join(f'{b:g}' for b in base)}, "
                      f"d {_values(lf, 'head_dim')})", ylabel="relative change (95% CI over seeds)",
               title="Learned RoPE frequencies after training", kind="bar")
    return Evidence(n, f"after training (sweep default), per seed then over seeds: "
                       f"{show(est(n, 'max_rel'), 'max_i |theta_i/theta_i(init) - 1|')}, "
                       f"{show(est(n, 'mean_rel'), 'mean')} over {per_seed.shape[1]} frequencies (head_dim "
                       f"{_values(lf, 'head_dim')}); rope_rf alpha "
                       f"{fmt(init)} -> {show(est(n, 'alpha'), 'alpha')}", png, n=fewest(n, ("max_rel",)))


def learned_freq_rule(n):
    """Largest relative change of a learnable theta_i after training, per seed, then a 95% CI over seeds
    (>= 3 seeds, else inconclusive): CI below 0.05: supported (barely moves); CI above 0.25: contradicted;
    otherwise inconclusive (between, or a CI overlapping [0.05, 0.25])."""
    if unmeasured(n, ("max_rel",)):
        return verdict(I, "not measured: run make sweep (rope_learned_freq with checkpoints)")
    return judge(est(n, "max_rel"), 0.05, "below", far=0.25, label="max change")


# ---- 6. base ablation
REF, POOR, LONG = 10000.0, 100.0, 100000.0  # the bases the claim names; the others come from the rows


def _bases(df):
    """Bases ablated in a sweep's rows (their params' `base`), ascending."""
    return sorted({float(b) for b in df.params.map(lambda p: json.loads(p).get("base")).dropna()}) if len(df) else []


def bases(ctx):
    df = rows(ctx, "base_ablation")
    ablated = _bases(df)
    tabs = {k: cells(df, "ppl", k, by="base") for k in (1, 8)}  # (seed x base) PPL at k x the train length
    n = {}
    for k, t in tabs.items():
        for b in ablated:
            put(n, f"ppl{k}_{b:g}", stats.interval(_col(t, b)))
            if b != REF:  # d<k>_<b> = PPL(1e4) - PPL(b), paired by seed: < 0 where 1e4 is better
                put(n, f"d{k}_{b:g}", stats.paired(_col(t, REF), _col(t, b)))
    series = {f"{k}x train length": (ablated, *([n[f"ppl{k}_{b:g}{s}"] for b in ablated] for s in ("", "_lo", "_hi")))
              for k in (1, 8)}
    png = plot(ctx.out / "c06_base.png", series, xlabel="RoPE base", ylabel="PPL (nonoverlapping; 95% CI)", logx=True,
               title=f"RoPE base ablation (train length {_values(df, 'train_len')})")
    cells_ = "; ".join(f"{b:g}: {show(est(n, f'ppl1_{b:g}'), '1x')}, {show(est(n, f'ppl8_{b:g}'), '8x')}"
                       for b in ablated)
    judged = [k for k in n if k.startswith("d") and not k.endswith(("_lo", "_hi", "_n"))]
    return Evidence(n, f"PPL per base at 1x / 8x the train length {_values(df, 'train_len')}, seeds "
                       f"{_values(df, 'seed')}: {cells_ or 'n/a'}", png, n=fewest(n, judged))


def _diffs(n, k):
    """Bases (as written in the keys) compared with 1e4 at k x the train length."""
    pre = f"d{k}_"
    return [key[len(pre):] for key in n if key.startswith(pre) and not key.endswith(("_lo", "_hi", "_n"))]


def bases_rule(n):
    """Paired by seed in sweep base_ablation: d_k(b) = PPL(1e4) - PPL(b) at k x the train length, a 95% CI
    over seeds (>= 3 seeds, else inconclusive); the other bases are those in the rows. Four parts: 1e4 best
    at 1x (every d_1(b) CI below 0: it beats each other base; any CI above 0 contradicts), 1e4 best at 8x (the
    same with d_8), 100 poor at 1x (d_1(100) CI below 0), 1e5 worse at 8x (d_8(1e5) CI below 0); a part whose
    CI lies above 0 is contradicted. A tie (CI containing 0) is not a win. All parts supported: supported;
    two or more contradicted: contradicted; otherwise inconclusive."""
    if not _diffs(n, 1) or unmeasured(n, [f"d{k}_{b}" for k in (1, 8) for b in _diffs(n, k)]):
        return verdict(I, "not measured: run make sweep SWEEP=base_ablation")
    d = lambda k, b: est(n, f"d{k}_{b}")  # noqa: E731
    best = [every([judge(d(k, b), 0.0, "below", label=f"PPL(1e4) - PPL({b})") for b in _diffs(n, k)],
                  f"1e4 best at {k}x") for k in (1, 8)]
    parts = best + [judge(d(1, f"{POOR:g}"), 0.0, "below", label="100 poor at 1x: PPL(1e4) - PPL(100)"),
                    judge(d(8, f"{LONG:g}"), 0.0, "below", label="1e5 worse at 8x: PPL(1e4) - PPL(1e5)")]
    return by_parts([(t, v) for v, t in parts])


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
    supported: supported; two or more contradicted, or the ratio clearly falls with length (a paired CI of
    r4 - r2 or r8 - r4 below 0): contradicted; otherwise inconclusive."""
    if unmeasured(n, ("r2", "r4", "r8")):
        return verdict(I, "not measured: run make sweep")
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
    whose CI lies on the other side is contradicted. All supported: supported; two or more contradicted:
    contradicted; otherwise inconclusive."""
    if unmeasured(n, [f"r8_{e}" for e in ENCS_8]):
        return verdict(I, "not measured: run make sweep")
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
               title="Linear attention (RoPE in the numerator) vs softmax")
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
    supported; either contradicted (loss CI above 0.6, or the difference CI above 0): contradicted; otherwise
    inconclusive (a tie is inconclusive). The ratio to softmax+RoPE (sweep default) is reported, not judged."""
    keys = ("loss_drop_linear_rope", "d_linear_rope_nope")
    if unmeasured(n, keys):
        return verdict(I, "not measured: run make sweep SWEEP=claims")
    parts = [judge(est(n, "loss_drop_linear_rope"), 0.6, "below", label="trains: final/first loss"),
             judge(est(n, "d_linear_rope_nope"), 0.0, "below", label="beats NoPE: PPL linear+RoPE - NoPE")]
    v, reason = by_parts([(t, x) for x, t in parts], contradict_at=1)
    return v, reason + f"; {show(est(n, 'linear_over_softmax'), 'PPL / softmax+RoPE PPL')} (not judged)"


# ---- 15. RoPE vs learned in distribution
def rope_vs_learned(ctx):
    df = rows(ctx, "default")
    t = cells(df, "ppl", 1)  # (seed x encoding) PPL at the train length
    rope, learned = _col(t, "rope"), _col(t, "learned")
    n = {}
    put(n, "ppl_rope", stats.interval(rope))
    put(n, "ppl_learned", stats.interval(learned))
    # paired on log PPL: the CI of the mean log ratio, shown as a ratio (geometric mean over seeds)
    p = stats.paired(np.log(rope), np.log(learned))
    n.update(ratio_rope_learned=math.exp(p.diff), ratio_rope_learned_lo=math.exp(p.lo),
             ratio_rope_learned_hi=math.exp(p.hi), ratio_rope_learned_n=float(p.n))
    for e in ("rope", "learned"):
        states = _states(ctx, "default", e)
        state = states[min(states)] if states else None  # the parameter count does not depend on the seed
        n[f"params_{e}"] = (float(sum(v.numel() for k, v in state.items() if k.startswith("encoding.")))
                            if state is not None else math.nan)
    return Evidence(n, f"PPL at the train length {_values(df, 'train_len')}, paired by seed: "
                       f"{show(est(n, 'ratio_rope_learned'), 'rope/learned')} ({show(est(n, 'ppl_rope'), 'rope')} with "
                       f"{fmt(n['params_rope'])} encoding params, {show(est(n, 'ppl_learned'), 'learned')} with "
                       f"{fmt(n['params_learned'])})", "c08_extrapolation.png", n=fewest(n, ("ratio_rope_learned",)))


def rope_vs_learned_rule(n):
    """RoPE's encoding parameters counted in a checkpoint (exact) and PPL(rope) / PPL(learned) at the train
    length, paired by seed (stats.paired on log PPL: a geometric-mean ratio with a 95% CI over seeds; >= 3
    seeds, else inconclusive). Zero parameters and the ratio's CI below 1.03 (matches or beats): supported;
    parameters > 0 or the CI above 1.10: contradicted; otherwise inconclusive."""
    if unmeasured(n, ("ratio_rope_learned",)):
        return verdict(I, "not measured: run make sweep")
    p = n.get("params_rope", math.nan)
    zero = (I if math.isnan(p) else S if p == 0 else C, f"{fmt(p)} RoPE encoding params")
    match = judge(est(n, "ratio_rope_learned"), 1.03, "below", far=1.10, label="PPL rope/learned")
    return by_parts([(t, v) for v, t in (zero, match)], contradict_at=1)
