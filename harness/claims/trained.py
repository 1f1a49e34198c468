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

from harness import paths, results, stats, tasks
from harness.claims import attention
from harness.claims.judge import est, every, fewest, judge, put, show, unmeasured
from harness.claims.table import N, VERDICTS, Evidence, by_parts, fmt, plot, verdict

ENCODING_CONF = paths.conf_dir() / "encoding"
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


# Where the repository commits the runs of each sweep the claims read (git-tracked under results/, DESIGN.md §1),
# relative to results/. With --sweeps at the checkout's results/ (ctx.committed) a sweep is read from here and
# nowhere else, only its own rows (results/reference also holds sweep qk_norm), and no checkpoint (*.pt is
# git-ignored).
COMMITTED = {"default": "reference", "content": "content", "pretrained": "pretrained/pretrained",
             "pretrained_precision": "pretrained/pretrained_precision", "prope": "claims/sweeps/prope",
             "base_ablation": "claims/sweeps/base_ablation", "claims": "claims/sweeps/claims"}


def sweep_dir(ctx, sweep):
    """The dir holding a sweep's runs: <sweeps>/<sweep>, or with ctx.committed its committed dir (None: none)."""
    if not ctx.committed:
        return Path(ctx.sweeps) / sweep
    return Path(ctx.sweeps) / COMMITTED[sweep] if sweep in COMMITTED else None


def rows(ctx, sweep):
    """All fresh rows of a sweep (empty when it was not run, or with ctx.committed not committed); stale run_ids
    go to ctx.stale, and a sweep without rows to ctx.missing (what the claim being measured lacks)."""
    if sweep not in ctx.cache:
        path = sweep_dir(ctx, sweep)
        df = results.load(path) if path is not None and path.exists() else pd.DataFrame(columns=results.COLUMNS)
        if ctx.committed:
            df = df[df.sweep == sweep]
        stale = _stale(df)
        ctx.stale.update(stale)  # run_ids read <sweep>/<run dir>
        ctx.cache[sweep] = df[~df.run_id.isin(stale)]
        ctx.dirs[sweep] = path if len(df) else None
    if ctx.cache[sweep].empty:
        ctx.missing.append(f"rows of sweep {sweep}")
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
        if not ctx.committed and (d / results.CHECKPOINT).exists():  # committed runs have none (git-ignored)
            out.append((int(seed), d))
    if len(df) and not out:
        ctx.missing.append(f"checkpoints of sweep {sweep}" + (f" ({encoding})" if encoding else ""))
    return sorted(out)


def _states(ctx, sweep, encoding):
    """{seed: state_dict} of `encoding`'s checkpoints in a sweep (a seed run twice: the later dir)."""
    return {seed: torch.load(d / results.CHECKPOINT, map_location="cpu", weights_only=True)["state_dict"]
            for seed, d in _checkpoints(ctx, sweep, encoding)}


def log_ratio(numbers, key, a, b):
    """numbers[key, key_lo, key_hi, key_n]: exp of the paired mean of log a - log b and of its CI (a, b: per-seed
    PPL Series by seed), a geometric-mean ratio; NaN with n = 0 when either is missing."""
    p = stats.paired(np.log(a), np.log(b)) if len(a) and len(b) else None
    if p is None or p.n == 0:
        numbers.update({key: math.nan, f"{key}_lo": math.nan, f"{key}_hi": math.nan, f"{key}_n": 0.0})
        return
    numbers.update({key: math.exp(p.diff), f"{key}_lo": math.exp(p.lo), f"{key}_hi": math.exp(p.hi),
                    f"{key}_n": float(p.n)})


def _band(per_seed):
    """(seed x point) table -> (mean, lo, hi) lists, a stats.interval per point."""
    ivs = [stats.interval(per_seed[c]) for c in per_seed.columns]
    return [i.mean for i in ivs], [i.lo for i in ivs], [i.hi for i in ivs]


# ---- 3. theta vs attention locality
def locality(ctx):
    from harness.lmeval.model import load_run  # imports lm-eval: only when a claim needs a checkpoint's model
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
    locality). Both supported: supported; both contradicted: contradicted; one: partly contradicted; otherwise
    inconclusive."""
    if unmeasured(n, ("spearman", "spread")):
        return verdict(N, "not measured: run make sweep SWEEP=base_ablation (with checkpoints)")
    parts = [judge(est(n, "spearman"), 0.0, "above", label="Spearman(base, distance)"),
             judge(est(n, "spread"), 1.1, "above", label="max/min distance")]
    return by_parts([(t, v) for v, t in parts])


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
        return verdict(N, "not measured: run make sweep (rope_learned_freq with checkpoints)")
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
    all contradicted: contradicted; some: partly contradicted; otherwise inconclusive."""
    if not _diffs(n, 1) or unmeasured(n, [f"d{k}_{b}" for k in (1, 8) for b in _diffs(n, k)]):
        return verdict(N, "not measured: run make sweep SWEEP=base_ablation")
    d = lambda k, b: est(n, f"d{k}_{b}")  # noqa: E731
    best = [every([judge(d(k, b), 0.0, "below", label=f"PPL(1e4) - PPL({b})") for b in _diffs(n, k)],
                  f"1e4 best at {k}x") for k in (1, 8)]
    parts = best + [judge(d(1, f"{POOR:g}"), 0.0, "below", label="100 poor at 1x: PPL(1e4) - PPL(100)"),
                    judge(d(8, f"{LONG:g}"), 0.0, "below", label="1e5 worse at 8x: PPL(1e4) - PPL(1e5)")]
    return by_parts([(t, v) for v, t in parts])
