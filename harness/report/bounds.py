"""Each metric's interval kind (a key of harness.stats.KINDS) and the range its values and intervals keep: by the
row's unit, or by the metric's name where the unit does not say (a signed gap in PPL units, a length that can be 0).
Every interval the report prints or draws is the one of its metric's kind, so none leaves what the metric can be;
the pretrained report's `checked` raises on one that does, instead of clipping it."""
import math

import pandas as pd

from harness import stats

# unit (harness.results, DESIGN.md §4) -> kind
UNITS = {
    "frac": "proportion", "prob": "proportion",  # accuracies, string match, sink rates; attention probabilities
    "ppl": "ratio", "tokens/s": "ratio", "bytes": "ratio", "s": "ratio", "steps": "ratio", "parameters": "ratio",
    "FLOPs": "ratio", "tokens": "ratio", "ratio": "ratio",  # ... and a pretrained model's share of peak FLOPs
    "nats": "nonnegative", "bits": "nonnegative", "bits/byte": "nonnegative",  # losses, NLL, entropies, KL; bits/byte
    "logit": "real", "score": "real",  # a logit may have either sign; lm-eval scores of unknown scale
}
# metric -> kind, where its unit does not tell
METRICS = {
    "ppl_gap": "real",  # PPL(low precision) - PPL(fp32): a signed difference in PPL units
    "effective_len_absolute": "nonnegative", "effective_len_relative": "nonnegative",  # 0 = below the bar already
    "anchor_d_logit": "nonnegative",  # a mean |Δ logit|
    "kl_safe_len": "nonnegative",  # a length, 0 when no window is within the bar
}


def kind(metric, unit=None):
    """The interval kind of a metric measured in `unit` (METRICS first, then UNITS); ValueError naming the choices."""
    if metric in METRICS:
        return METRICS[metric]
    if unit in UNITS:
        return UNITS[unit]
    raise ValueError(f"no interval kind for metric {metric!r} in unit {unit!r}; units: {', '.join(UNITS)}; "
                     f"add it to harness.report.bounds.UNITS (or METRICS)")


def kinds(d):
    """Per row of d (columns metric, unit): its kind, a Series aligned with d."""
    if "metric" not in d or "unit" not in d:
        raise ValueError(f"rows without metric and unit columns (columns: {', '.join(map(str, d.columns))}): "
                         f"pass the kind")
    pairs = d[["metric", "unit"]].drop_duplicates()
    found = {(m, u): kind(m, u) for m, u in pairs.itertuples(index=False)}
    return pd.Series([found[(m, u)] for m, u in zip(d.metric, d.unit)], index=d.index, dtype=object)


def kind_of(d):
    """The one kind of rows d; ValueError when they mix kinds (one table, one scale)."""
    ks = sorted(set(kinds(d))) if len(d) else ["real"]
    if len(ks) != 1:
        raise ValueError(f"rows of {sorted(set(d.metric))} mix interval kinds {ks}: one table per kind")
    return ks[0]


def summarize(d, by, kind=None, **kw):
    """stats.summarize of d with each row's kind (given, or per row from its metric and unit) and a `kind` column:
    mean and lo..hi on the metric's scale (a geometric mean for a ratio, an interval clipped to a proportion's
    [0, 1])."""
    by = [by] if isinstance(by, str) else list(by)
    if kind is not None:
        return stats.summarize(d, by, kind=kind, **kw).assign(kind=kind)
    if d.empty:
        return stats.summarize(d, by, **kw).assign(kind="real")
    k = kinds(d)
    parts = [stats.summarize(g, by, kind=name, **kw).assign(kind=name) for name, g in d.groupby(k, sort=True)]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


# The pretrained report's metrics: their kind's range, narrower where the metric says more (a perplexity is >= 1; a
# KL of 0 summed in fp32 comes out at about -1e-10).
PRETRAINED = {"acc": "trials", "answer_nll": "nonnegative", "bpb": "nonnegative", "ppl": "ratio",
              "kl_fp32": "nonnegative", "kl_safe_len": "nonnegative", "eval_tokens_per_s": "ratio",
              "flops_ratio": "ratio"}
RANGES = {m: stats.RANGES[k] for m, k in PRETRAINED.items()} | {"ppl": (1.0, math.inf), "kl_fp32": (-1e-8, math.inf)}


def checked(metric, iv):
    """iv (anything with lo, hi, mean: harness.stats.Interval or a summarize row) when its interval lies inside
    the metric's range (NaN bounds, n < 2, pass); else one ValueError naming the metric and the interval."""
    lo_ok, hi_ok = RANGES[metric]
    lo, hi, mean = (iv[k] if hasattr(iv, "index") else getattr(iv, k) for k in ("lo", "hi", "mean"))
    for x in (lo, hi, mean):
        if x == x and not lo_ok <= x <= hi_ok:  # x == x: not NaN
            raise ValueError(f"a {metric} interval [{lo:.4g}, {hi:.4g}] (mean {mean:.4g}) leaves the "
                             f"metric's range [{lo_ok:g}, {hi_ok:g}]: use an interval method that respects it")
    return iv
