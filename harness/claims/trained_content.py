"""Trained-model claim 21 about content-defined positions: CoPE counts where RoPE fails (Golovneva et al. 2024,
arXiv 2405.18719, §4: on their counting task CoPE's error is far below RoPE's and absolute PE's). Reads the count
runs of sweep content; answer-byte accuracy (metric acc, protocol iid) per seed, paired by seed (same seed, same
test set), judged on the 95% CI of the paired difference (harness.stats.paired)."""
from harness import stats
from harness.claims.judge import est, fewest, judge, put, put_nan, show, unmeasured
from harness.claims.table import Evidence, by_parts, verdict
from harness.claims.trained import N, _col, _values, cells, rows

LENGTHS = (1, 4)  # the train length and 4x it (the content sweep tests 1x..4x)


def cope_counts(ctx):
    df = rows(ctx, "content")
    df = df[df.task == "count"] if len(df) else df
    n = {}
    for k in LENGTHS:
        t = cells(df, "acc", k, protocol="iid")  # (seed x encoding) answer accuracy at k x the train length
        cope, rope = _col(t, "cope"), _col(t, "rope")
        for name, x in (("cope", cope), ("rope", rope)):
            if len(x):
                put(n, f"{name}{k}", stats.interval(x))
            else:
                put_nan(n, f"{name}{k}")
        if len(cope) and len(rope):
            put(n, f"d{k}", stats.paired(cope, rope))
        else:
            put_nan(n, f"d{k}")
    keys = [f"d{k}" for k in LENGTHS]
    text = "; ".join(f"{k}x: {show(est(n, f'cope{k}'), 'cope')}, {show(est(n, f'rope{k}'), 'rope')}, paired "
                     f"{show(est(n, f'd{k}'), 'cope - rope')}" for k in LENGTHS)
    return Evidence(n, f"count accuracy (train length {_values(df, 'train_len')}): {text}", None, n=fewest(n, keys))


def cope_counts_rule(n):
    """acc(cope) - acc(rope) on the count task, paired by seed (>= 3 seeds, else inconclusive), at 1x and at 4x the
    train length: each part holds when its CI lies above 0 and fails when it lies below 0. Both hold: supported; both
    fail: contradicted; one fails: partly contradicted; otherwise inconclusive."""
    if unmeasured(n, [f"d{k}" for k in LENGTHS]):
        return verdict(N, "not measured: run make sweep SWEEP=content (cope and rope on count)")
    parts = [judge(est(n, f"d{k}"), 0.0, "above", label=f"{k}x cope - rope accuracy") for k in LENGTHS]
    return by_parts([(t, v) for v, t in parts])
