"""Trained-model claims about 2025 designs: 16 (RNoPE-SWA extrapolates better than full RoPE) and 17 (p-RoPE:
removing the lowest frequencies does not hurt and helps beyond the train length). Same conventions as
harness.claims.trained: per-seed values, paired by seed, judged on the 95% CI (stats.paired on log PPL, shown
as a geometric-mean ratio)."""
from harness.claims.judge import est, fewest, judge, show, unmeasured
from harness.claims.table import Evidence, by_parts, verdict
from harness.claims.trained import N, _col, _values, cells, log_ratio, rows

NO_HARM = (1.03, 1.10)  # PPL ratio at 1x: CI below 1.03 does not hurt; CI above 1.10 hurts
P_ROPE = (0.25, 0.75)  # Barbero et al.'s rope_percentage values (sweep prope)


# ---- 16. RNoPE-SWA vs RoPE beyond the train length
def rnope_vs_rope(ctx):
    df = rows(ctx, "default")
    n = {}
    for k in (4, 8):
        t = cells(df, "ppl", k)  # (seed x encoding) PPL at k x the train length
        log_ratio(n, f"r{k}", _col(t, "rnope_swa"), _col(t, "rope"))
    return Evidence(n, f"PPL rnope_swa / rope beyond the train length {_values(df, 'train_len')}, paired by seed: "
                       + ", ".join(show(est(n, f"r{k}"), f"{k}x") for k in (4, 8)), None, n=fewest(n, ("r4", "r8")))


def rnope_vs_rope_rule(n):
    """PPL(rnope_swa) / PPL(rope) at 4x and 8x the train length, paired by seed on log PPL (geometric-mean ratio
    with a 95% CI; >= 3 seeds, else inconclusive). Each length's CI below 1: that part holds; above 1:
    contradicted. Both hold: supported; both contradicted: contradicted; one: partly contradicted; otherwise
    inconclusive."""
    if unmeasured(n, ("r4", "r8")):
        return verdict(N, "not measured: run make sweep (rnope_swa and rope)")
    parts = [judge(est(n, f"r{k}"), 1.0, "below", label=f"{k}x rnope_swa/rope") for k in (4, 8)]
    return by_parts([(t, v) for v, t in parts])


# ---- 17. p-RoPE vs RoPE
def prope_vs_rope(ctx):
    rope, prope = rows(ctx, "default"), rows(ctx, "prope")
    n = {}
    for k in (1, 8):
        base = _col(cells(rope, "ppl", k), "rope")
        per_p = cells(prope, "ppl", k, by="partial_rotary_factor", rope_type="proportional")
        for p in P_ROPE:
            log_ratio(n, f"p{p}_r{k}", _col(per_p, p), base)
    keys = [f"p{p}_r{k}" for p in P_ROPE for k in (1, 8)]
    return Evidence(n, "PPL p-RoPE / RoPE (base 10000), paired by seed: " + ", ".join(
        show(est(n, key), key.replace("_r", " at ").replace("p0", "p=0") + "x") for key in keys), None,
        n=fewest(n, keys))


def prope_vs_rope_rule(n):
    """PPL(p-RoPE, rope_type proportional) / PPL(RoPE) for p = 0.25 and 0.75, paired by seed on log PPL (>= 3
    seeds, else inconclusive). Per p: at the train length the CI below 1.03 (does not hurt; above 1.10: hurts,
    contradicted); at 8x the CI below 1 (helps; above 1: contradicted). All parts hold: supported; all
    contradicted: contradicted; some: partly contradicted; otherwise inconclusive."""
    keys = [f"p{p}_r{k}" for p in P_ROPE for k in (1, 8)]
    if unmeasured(n, keys):
        return verdict(N, "not measured: run make sweep SWEEP=prope (and SWEEP=default)")
    parts = []
    for p in P_ROPE:
        parts.append(judge(est(n, f"p{p}_r1"), NO_HARM[0], "below", far=NO_HARM[1], label=f"p={p} at 1x"))
        parts.append(judge(est(n, f"p{p}_r8"), 1.0, "below", label=f"p={p} at 8x"))
    return by_parts([(t, v) for v, t in parts])
