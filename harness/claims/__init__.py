"""`make claims` (issue 8): the reference notes' claims, each with its source, the command that tests it,
the measured evidence and a verdict computed by a stated rule. Trained-model claims read the runs of sweeps
default, base_ablation and claims (conf/sweep/); the others compute from the maths."""
import dataclasses
import datetime
import time
from pathlib import Path

import pandas as pd
import torch

from harness.claims import costs, maths, trained, trained_compare
from harness.claims.table import Claim, write

CLAIM = "python -m harness.claims --only"
SWEEP_DEFAULT = "make sweep SWEEP=default && "

CLAIMS = [
    Claim(1, "RoPE preserves vector norms and makes q.k depend only on m - n.",
          "001 (elementwise formula); 003 RoPE; 004 §2.1.9, §2.2.4", f"{CLAIM} 1", maths.relative,
          maths.relative_rule),
    Claim(2, "Su's long-range bound decreases with relative distance (and is not monotone).",
          "002 (decay-curve code); 004 §2.3", f"{CLAIM} 2", maths.su_decay, maths.decay_rule),
    Claim(3, "Larger theta concentrates attention near the diagonal, smaller theta flattens it (larger theta = "
             "smaller base).", "000 §5.3", f"make sweep SWEEP=base_ablation && {CLAIM} 3", trained.locality,
          trained.locality_rule),
    Claim(4, "The receptive-field variant's alpha and rho tune locality; q.k = cos((m-n)phi)a' - sin((m-n)phi)b' "
             "with phi = alpha/base^rho.", "000 §4.5, §6", f"{CLAIM} 4", maths.receptive_field,
          maths.receptive_field_rule),
    Claim(5, "Learnable theta_i initialised at base^(-2i/d) barely move in training.", "002; 004 §5.5.1",
          f"{SWEEP_DEFAULT}{CLAIM} 5", trained.learned_freq, trained.learned_freq_rule),
    Claim(6, "Base 10000 is best for short and long text, 100 is poor, 100000 is worse at extrapolation.",
          "004 §4.1.1, §5.3.4", f"make sweep SWEEP=base_ablation && {CLAIM} 6", trained.bases, trained.bases_rule),
    Claim(7, "RoPE degrades slightly at 2x the train length, noticeably at 4x, badly at 8x.", "004 §4.2.3",
          f"{SWEEP_DEFAULT}{CLAIM} 7", trained_compare.rope_lengths, trained_compare.rope_lengths_rule),
    Claim(8, "Learned absolute PE cannot extrapolate, sinusoidal only slightly; ALiBi and T5 extrapolate.",
          "003; 004 §4.1.3, §4.3", f"{SWEEP_DEFAULT}{CLAIM} 8", trained_compare.absolute_vs_bias,
          trained_compare.absolute_vs_bias_rule),
    Claim(9, "RoPE works in linear attention with RoPE in the numerator only.", "004 §4.4",
          f"make sweep SWEEP=claims && {SWEEP_DEFAULT}{CLAIM} 9", trained_compare.linear, trained_compare.linear_rule),
    Claim(10, "FP16 RoPE loses precision; computing the phase in FP32 fixes it.", "004 §4.2.1, §5.2.1",
          f"{CLAIM} 10", costs.fp16, costs.fp16_rule),
    Claim(11, "A precomputed cos/sin cache costs O(L d) memory vs O(d) on the fly, which is slower.",
          "004 §4.2.2", f"{CLAIM} 11", costs.cache, costs.cache_rule),
    Claim(12, "RoPE adds no parameters and O(L d) compute, not changing attention's complexity.",
          "004 §3.5, §4.3", f"{CLAIM} 12", costs.cost, costs.cost_rule),
    Claim(13, "Sinusoidal PE: p_(k+delta) = T(delta) p_k, a linear map independent of k.", "003 (相对性质)",
          f"{CLAIM} 13", maths.sinusoidal_linear, maths.sinusoidal_linear_rule),
    Claim(14, "Sinusoidal PE inner products decay with distance.", "003 (远程衰减)", f"{CLAIM} 14",
          maths.sinusoidal_decay, maths.decay_rule),
    Claim(15, "RoPE matches learned PE at in-distribution lengths with zero parameters.", "004 §4.1.3",
          f"{SWEEP_DEFAULT}{CLAIM} 15", trained_compare.rope_vs_learned, trained_compare.rope_vs_learned_rule),
]


@dataclasses.dataclass
class Context:
    """Where the sweeps are, where plots go; the loaded sweeps (cache) and stale runs left out."""

    sweeps: Path
    out: Path
    cache: dict = dataclasses.field(default_factory=dict)
    stale: set = dataclasses.field(default_factory=set)


def run(sweeps="results/sweeps", out="results/claims", only=None, threads=1):
    """Measure and judge each claim (all, or the ids in `only`); returns [(Claim, Evidence, verdict, reason)]."""
    if threads:
        torch.set_num_threads(threads)  # timings of claims 11-12 on one thread, as the kernel benchmarks
    ctx = Context(Path(sweeps), Path(out))
    ctx.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for claim in CLAIMS:
        if only and claim.id not in only:
            continue
        t = time.perf_counter()
        evidence = claim.measure(ctx)
        v, reason = claim.rule(evidence.numbers)
        print(f"claim {claim.id:2d} {v:12s} ({time.perf_counter() - t:5.1f}s) {reason}", flush=True)
        rows.append((claim, evidence, v, reason))
    return rows, ctx


def _setup(ctx):
    """What the loaded sweeps trained: model, task, train length and steps, and the seeds found per sweep
    (from their rows)."""
    frames = {sweep: df for sweep, df in ctx.cache.items() if len(df)}
    if not frames:
        return "no trained runs"
    df = pd.concat(frames.values())
    steps = df[df.metric == "train_steps"].value
    vals = lambda col: "/".join(sorted({str(v) for v in col.dropna()}))  # noqa: E731
    seeds = "; ".join(f"{sweep} seeds {vals(g.seed.astype(int))} (n={g.seed.nunique()})"
                      for sweep, g in sorted(frames.items()))
    return (f"model={vals(df.model)}, task {vals(df.task)}, train length {vals(df.train_len)}, "
            f"{vals(steps.astype(int)) or 'n/a'} steps; {seeds}")


def header(ctx, wall_s):
    stale = f" Left out as stale (trained by older code; rerun them): {sorted(ctx.stale)}." if ctx.stale else ""
    return (f"Generated by `make claims` ({datetime.date.today().isoformat()}, torch {torch.__version__}, "
            f"{wall_s:.0f} s for this step) from the runs under `{ctx.sweeps}` (sweeps default, base_ablation, "
            f"claims: {_setup(ctx)}) and from direct computation. Verdicts follow from the numbers by the rules "
            f"listed below the table; a trained claim is judged on the 95% CI over seeds (paired by seed where "
            f"it compares encodings or bases) and needs >= 3 seeds to be more than inconclusive; \"at this "
            f"scale\" means these small models trained for seconds to minutes on CPU.{stale}")


__all__ = ["CLAIMS", "Claim", "Context", "run", "write"]
