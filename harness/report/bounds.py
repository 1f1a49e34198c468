"""The ranges of the pretrained report's bounded metrics, and the one check every interval it prints or draws for
them passes through: an interval outside its metric's range (a t band below 0 on an accuracy) is a defect of the
method that made it, so drawing one raises instead of clipping."""
import math

RANGES = {  # metric -> (lowest, highest) a value and its interval can take
    "acc": (0.0, 1.0),  # exact match: a proportion (Wilson intervals stay inside)
    "answer_nll": (0.0, math.inf),
    "bpb": (0.0, math.inf),
    "ppl": (1.0, math.inf),
    "kl_fp32": (-1e-8, math.inf),  # >= 0 exactly; a KL of 0 summed in fp32 comes out at about -1e-10
    "kl_safe_len": (0.0, math.inf),
    "eval_tokens_per_s": (0.0, math.inf),
    "flops_ratio": (0.0, math.inf),
}


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
