"""Claims 22-24 on a real pretrained model (SmolLM2-135M, harness.pretrained): the unit of variation is the
evaluation window, so `n` is windows, intervals are over windows and differences are paired on the same windows
(harness.stats), judged on the 95% CI like every trained claim. Reads sweeps pretrained (bits per byte per
extension and length, pystdlib) and pretrained_precision (KL to the fp32 RoPE pipeline per log window)."""
from harness import stats
from harness.claims.judge import est, fewest, judge, put, put_nan, show, unmeasured
from harness.claims.table import Evidence, by_parts, verdict
from harness.claims.trained import N, rows
from harness.pretrained.rows import lm_rows, prepare

RUN = "make pretrained"


def _bpb(ctx, L_of):
    """(window x variant) bits per byte at length L_of(trained context), pystdlib, harness RoPE."""
    d = prepare(rows(ctx, "pretrained"))
    if d.empty:
        return d, None
    b = lm_rows(d)
    L0 = int(b.train_len.iloc[0])
    return stats.seed_table(b[b.eval_len == L_of(L0)], "variant"), L0


def _pair(n, key, t, a, b):
    if a in t and b in t:
        put(n, key, stats.paired(t[a], t[b]))
    else:
        put_nan(n, key)


def rises_past_context(ctx):
    n = {}
    t2, L0 = _bpb(ctx, lambda L: 2 * L)
    t1, _ = _bpb(ctx, lambda L: L)
    if L0 is None or "none" not in t2 or "none" not in t1:
        put_nan(n, "rise")
        return Evidence(n, "not measured", None, n=0)
    put(n, "rise", stats.paired(t2["none"], t1["none"]))
    return Evidence(n, f"no extension: {show(est(n, 'rise'), f'bits/byte at {2 * L0} - at {L0}')}", None,
                    n=fewest(n, ["rise"]))


def rises_past_context_rule(n):
    """bpb(none, 2x trained context) - bpb(none, 1x), paired over windows (>= 3, else inconclusive): supported when
    its 95% CI lies above 0, contradicted when it lies below 0."""
    if unmeasured(n, ["rise"]):
        return verdict(N, f"not measured: run {RUN}")
    return judge(est(n, "rise"), 0.0, "above", label="bits/byte rise from 1x to 2x")


def ntk_yarn_beat_pi(ctx):
    n = {}
    t, L0 = _bpb(ctx, lambda L: 2 * L)
    for key in ("ntk", "yarn"):
        _pair(n, key, t if L0 else {}, f"{key} x2", "linear x2")
    text = "; ".join(show(est(n, k), f"{k} - linear (bits/byte at 2x)") for k in ("ntk", "yarn"))
    return Evidence(n, text, None, n=fewest(n, ["ntk", "yarn"]))


def ntk_yarn_beat_pi_rule(n):
    """bpb(ntk x2) - bpb(linear x2) and bpb(yarn x2) - bpb(linear x2) at 2x the trained context, no fine-tune,
    paired over windows (>= 3): each part holds when its CI lies below 0 and fails when above. Both hold: supported;
    both fail: contradicted; one fails: partly contradicted; otherwise inconclusive."""
    if unmeasured(n, ["ntk", "yarn"]):
        return verdict(N, f"not measured: run {RUN}")
    parts = [judge(est(n, k), 0.0, "below", label=f"{k} - linear") for k in ("ntk", "yarn")]
    return by_parts([(t, v) for v, t in parts])


def bf16_positions_hurt(ctx):
    n = {}
    d = prepare(rows(ctx, "pretrained_precision"))
    k = d[(d.metric == "kl_fp32") & (d.pipeline == "bf16_positions") & (d.corpus == "pystdlib")] if len(d) else d
    if k.empty:
        put_nan(n, "late"), put_nan(n, "gap")
        return Evidence(n, "not measured", None, n=0)
    last = k.eval_len.max()
    late = k[k.eval_len == last].set_index("seed").value
    early = k[k.eval_len == 256].set_index("seed").value  # the window [128, 256): bf16 holds integers to 256
    put(n, "late", stats.paired(late, early))
    g = d[(d.metric == "ppl_gap") & (d.pipeline == "bf16_positions") & (d.corpus == "pystdlib")]
    put(n, "gap", stats.interval(g[g.eval_len == g.eval_len.max()].value))
    text = (f"bf16 positions, pystdlib: {show(est(n, 'late'), f'KL at positions up to {last} - KL at [128, 256)')}; "
            f"{show(est(n, 'gap'), f'PPL gap at {g.eval_len.max()}')}")
    return Evidence(n, text, None, n=fewest(n, ["late", "gap"]))


def bf16_positions_hurt_rule(n):
    """Pipeline bf16_positions against fp32, windows paired: (1) mean KL in the last log window of positions minus
    that in [128, 256) (where bf16 still holds every integer), CI above 0; (2) the PPL gap at the longest length, CI
    above 0. Each part fails when its CI lies below 0. Both hold: supported; both fail: contradicted; one fails:
    partly contradicted; otherwise inconclusive."""
    if unmeasured(n, ["late", "gap"]):
        return verdict(N, f"not measured: run {RUN}")
    parts = [judge(est(n, "late"), 0.0, "above", label="KL grows with position"),
             judge(est(n, "gap"), 0.0, "above", label="PPL gap at the longest length")]
    return by_parts([(t, v) for v, t in parts])
