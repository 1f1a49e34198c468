"""Trained-model claims about attention normalizers and content-dependent biases: 18 (stick-breaking attention needs
no positional encoding), 19 (sigmoid attention with ALiBi and b = -log n matches softmax attention with ALiBi) and
20 (FoX's forget gate, a data-dependent ALiBi, extrapolates like ALiBi and better than RoPE).
Same conventions as harness.claims.trained: per-seed values of sweep default, paired by seed, judged on the 95% CI
(stats.paired on log PPL, shown as a geometric-mean ratio)."""
from harness.claims.judge import est, fewest, judge, show, unmeasured
from harness.claims.table import Evidence, by_parts, verdict
from harness.claims.trained import N, _col, _values, cells, log_ratio, rows
from harness.claims.trained_layers import NO_HARM

LENGTHS = (1, 8)  # the train length and 8x it


def _versus(ctx, ours, theirs, what):
    """PPL(ours) / PPL(theirs) at 1x and 8x the train length, paired by seed."""
    df = rows(ctx, "default")
    n = {}
    for k in LENGTHS:
        t = cells(df, "ppl", k)  # (seed x encoding) PPL at k x the train length
        log_ratio(n, f"r{k}", _col(t, ours), _col(t, theirs))
    keys = [f"r{k}" for k in LENGTHS]
    return Evidence(n, f"PPL {ours} / {theirs} ({what}; train length {_values(df, 'train_len')}), paired by seed: "
                       + ", ".join(show(est(n, key), f"{key[1:]}x") for key in keys), None, n=fewest(n, keys))


# ---- 18. stick-breaking attention without a positional encoding
def stick_breaking_vs_rope(ctx):
    return _versus(ctx, "stick_breaking", "rope", "no PE against softmax with RoPE")


def stick_breaking_vs_rope_rule(n):
    """PPL(stick_breaking) / PPL(rope), paired by seed on log PPL (>= 3 seeds, else inconclusive). At the train
    length the CI below 1.03 (no PE costs nothing; above 1.10: contradicted); at 8x the CI below 1 (it extrapolates
    better than RoPE; above 1: contradicted). Both hold: supported; both contradicted: contradicted; one:
    partly contradicted; otherwise inconclusive."""
    return _matches_and_beats(n, ("r1", "1x stick_breaking/rope"), ("r8", "8x stick_breaking/rope"),
                              "stick_breaking and rope")


def _matches_and_beats(n, matches, beats, runs):
    """The verdict of two ratio parts, each (key, label): `matches` with its CI below NO_HARM[0] (above NO_HARM[1]:
    contradicted), `beats` with its CI below 1 (above 1: contradicted); by_parts combines them."""
    if unmeasured(n, (matches[0], beats[0])):
        return verdict(N, f"not measured: run make sweep ({runs})")
    parts = [judge(est(n, matches[0]), NO_HARM[0], "below", far=NO_HARM[1], label=matches[1]),
             judge(est(n, beats[0]), 1.0, "below", label=beats[1])]
    return by_parts([(t, v) for v, t in parts])


# ---- 19. sigmoid attention matches softmax attention
def sigmoid_vs_softmax(ctx):
    return _versus(ctx, "sigmoid_alibi", "alibi", "sigmoid against softmax, both with ALiBi")


def sigmoid_vs_softmax_rule(n):
    """PPL(sigmoid_alibi) / PPL(alibi), paired by seed on log PPL (>= 3 seeds, else inconclusive). At 1x and at 8x
    the CI below 1.03 (matches; above 1.10: worse, contradicted). Both hold: supported; both contradicted:
    contradicted; one: partly contradicted; otherwise inconclusive."""
    if unmeasured(n, ("r1", "r8")):
        return verdict(N, "not measured: run make sweep (sigmoid_alibi and alibi)")
    parts = [judge(est(n, f"r{k}"), NO_HARM[0], "below", far=NO_HARM[1], label=f"{k}x sigmoid_alibi/alibi")
             for k in LENGTHS]
    return by_parts([(t, v) for v, t in parts])


# ---- 20. the Forgetting Transformer extrapolates like ALiBi, better than RoPE
def fox_vs_alibi(ctx):
    df = rows(ctx, "default")
    n = {}
    t = cells(df, "ppl", 8)  # (seed x encoding) PPL at 8x the train length
    log_ratio(n, "alibi8", _col(t, "fox"), _col(t, "alibi"))
    log_ratio(n, "rope8", _col(t, "fox"), _col(t, "rope"))
    return Evidence(n, f"PPL at 8x the train length ({_values(df, 'train_len')}), paired by seed: "
                       + ", ".join(show(est(n, f"{other}8"), f"fox/{other}") for other in ("alibi", "rope")), None,
                    n=fewest(n, ("alibi8", "rope8")))


def fox_vs_alibi_rule(n):
    """At 8x the train length, paired by seed on log PPL (>= 3 seeds, else inconclusive): PPL(fox) / PPL(alibi)
    with its CI below 1.03 (like ALiBi; above 1.10: contradicted) and PPL(fox) / PPL(rope) with its CI below 1
    (better than RoPE; above 1: contradicted). Both hold: supported; both contradicted: contradicted; one:
    partly contradicted; otherwise inconclusive."""
    return _matches_and_beats(n, ("alibi8", "8x fox/alibi"), ("rope8", "8x fox/rope"), "fox, alibi and rope")
