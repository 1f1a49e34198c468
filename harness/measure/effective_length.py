"""Effective length: the longest evaluated length up to which a score stays at or above a bar.

RULER (Hsieh et al., COLM 2024, arXiv 2404.06654) calls a model's effective length the longest length whose
score stays above a fixed threshold (theirs: Llama-2-7B's 85.6 at 4K); NoLiMa (Modarressi et al., ICML 2025,
arXiv 2502.05167) uses a bar relative to the model's own short-context score (0.85 x its base score). Both rules
here, on one run's rows (one seed: the report puts the CI over seeds on them, harness.stats):

- absolute: bar = `threshold` (scores are fractions in [0, 1]);
- relative: bar = `relative` x the score at the train length (the shortest evaluated length when the train
  length itself was not evaluated; the row's params say which length was the base). A base score below
  `min_base` makes the rule vacuous (0.85 x a score near 0 is passed by chance): the row is NaN with the reason,
  because a model that does not solve the task at its own train length has no context length to lose.

"Stays": the lengths are walked from the shortest up and the first one below the bar (or not measurable) ends
the walk, so a score that dips and recovers at a longer length is not credited with it. 0 means even the
shortest length is below the bar. Scores: next-byte accuracy for lm, answer accuracy for a synthetic task and
RULER's string match for a RULER task; a task evaluated over needle depths is scored by its mean over depths
at each length, as RULER reports it."""
import math
from collections import defaultdict

SCORES = ("byte_acc", "acc", "ruler_all")  # fractions in [0, 1], higher is better
DEPTHS = "depths"  # the protocol of a score averaged over the `depth=<d>` protocols


def effective_length(scores, bar):
    """scores {eval_len: score}: the longest length L such that every length <= L scores >= bar; 0 if none,
    NaN when the bar itself is not a number (a relative bar whose base length was not measurable)."""
    if not math.isfinite(bar):
        return math.nan
    last = 0
    for L in sorted(scores):
        s = scores[L]
        if not (isinstance(s, float) and math.isfinite(s)) or s < bar:
            break
        last = L
    return last


def score_curves(rows):
    """{(score metric, protocol): {eval_len: score}} from extrapolation rows (dicts as the runner makes them):
    base rows only (no eval-time extension), `depth=<d>` protocols averaged into one `depths` curve."""
    acc = defaultdict(lambda: defaultdict(list))
    for r in rows:
        p = r.get("extra_params") or {}
        if r["metric"] not in SCORES or r.get("eval_len") is None or "extension" in p:
            continue
        proto = DEPTHS if str(r["protocol"]).startswith("depth=") else r["protocol"]
        acc[(r["metric"], proto)][int(r["eval_len"])].append(float(r["value"]))
    return {k: {L: sum(v) / len(v) for L, v in c.items()} for k, c in acc.items()}


def rows(run_rows, *, train_len, threshold, relative, min_base):
    """`effective_len_absolute` and `effective_len_relative` rows (unit tokens, eval_len None) for every score
    curve in run_rows, protocol `<score>:<its protocol>` (e.g. `byte_acc:nonoverlapping`, `ruler_all:depths`),
    params: bar (and base_len for the relative rule)."""
    out = []
    for (metric, proto), curve in sorted(score_curves(run_rows).items()):
        base = train_len if train_len in curve else min(curve)
        rel = {"base_len": base, "base_score": curve[base]}
        if not curve[base] >= min_base:
            rel["nan_reason"] = (f"{metric} at the base length {base} is {curve[base]:.3g} < eval.effective_length."
                                 f"min_base {min_base}: the model does not solve the task at its train length")
        rules = [("absolute", threshold, {}), ("relative", relative * curve[base] if "nan_reason" not in rel
                                                 else math.nan, rel)]
        for rule, bar, extra in rules:
            out.append(dict(metric=f"effective_len_{rule}", eval_len=None, protocol=f"{metric}:{proto}", unit="tokens",
                            value=float(effective_length(curve, bar)), extra_params=dict(bar=float(bar), **extra)))
    return out
