"""`make claims`: claims about RoPE from the literature, each with its public source, the command that tests
it, the measured evidence and a verdict computed by a stated rule. Trained-model claims read the runs of sweeps
default, base_ablation, claims and prope (conf/sweep/); the others compute from the maths."""
import dataclasses
import datetime
import time
from pathlib import Path

import pandas as pd
import torch

from harness.claims import (costs, maths, pretrained, trained, trained_compare, trained_content, trained_layers,
                            trained_normalizers)
from harness import paths
from harness.claims.table import N, Claim, kind, stamp, write

CLAIM = "python -m harness.claims --only"
SWEEP_DEFAULT = "make sweep SWEEP=default && "

CLAIMS = [
    Claim(1, "RoPE preserves vector norms and makes q.k depend only on m - n.",
          "RoFormer §3.2, §3.4.2 (arXiv 2104.09864); Su 2021, https://spaces.ac.cn/archives/8265 (编码形式)",
          f"{CLAIM} 1", maths.relative, maths.relative_rule),
    Claim(2, "Su's long-range bound decreases with relative distance (and is not monotone).",
          "RoFormer §3.4.3 (arXiv 2104.09864); Su 2021, https://spaces.ac.cn/archives/8265 (远程衰减)",
          f"{CLAIM} 2", maths.su_decay, maths.decay_rule),
    Claim(3, "Larger theta concentrates attention near the diagonal, smaller theta flattens it (larger theta = "
             "smaller base).", "public RoFormer notes, not in the paper (cos((m-n)theta) ~ 1 - ((m-n)theta)^2/2)",
          f"make sweep SWEEP=base_ablation && {CLAIM} 3", trained.locality, trained.locality_rule),
    Claim(4, "The receptive-field variant's alpha and rho tune locality; q.k = cos((m-n)phi)a' - sin((m-n)phi)b' "
             "with phi = alpha/base^rho.",
          "the harness's own variant (rope_rf); the score in the complex form of RoFormer §3.4.3 (arXiv 2104.09864)",
          f"{CLAIM} 4", maths.receptive_field, maths.receptive_field_rule),
    Claim(5, "Learnable theta_i initialised at base^(-2i/d) barely move in training.",
          "Su 2021, https://spaces.ac.cn/archives/8265 (远程衰减: trainable theta_i did not move)",
          f"{SWEEP_DEFAULT}{CLAIM} 5", trained.learned_freq, trained.learned_freq_rule),
    Claim(6, "Base 10000 is best for short and long text, 100 is poor, 100000 is worse at extrapolation.",
          "public RoFormer notes, not in the paper or Su's post; cf. Liu et al. 2023 (arXiv 2310.05209) on base "
          "and extrapolation", f"make sweep SWEEP=base_ablation && {CLAIM} 6", trained.bases, trained.bases_rule),
    Claim(7, "RoPE degrades slightly at 2x the train length, noticeably at 4x, badly at 8x.",
          "public RoFormer notes, not in the paper; cf. Press et al. 2022 (arXiv 2108.12409) Fig. 1, rotary past "
          "the train length", f"{SWEEP_DEFAULT}{CLAIM} 7", trained_compare.rope_lengths,
          trained_compare.rope_lengths_rule),
    Claim(8, "Learned absolute PE cannot extrapolate, sinusoidal only slightly; ALiBi and T5 extrapolate.",
          "Press et al. 2022 (arXiv 2108.12409), §2 and Fig. 1", f"{SWEEP_DEFAULT}{CLAIM} 8",
          trained_compare.absolute_vs_bias, trained_compare.absolute_vs_bias_rule),
    Claim(9, "RoPE works in linear attention with RoPE in the numerator only.",
          "RoFormer §3.3 (arXiv 2104.09864); Su 2021, https://spaces.ac.cn/archives/8265 (线性场景)",
          f"make sweep SWEEP=claims && {SWEEP_DEFAULT}{CLAIM} 9", trained_compare.linear, trained_compare.linear_rule),
    Claim(10, "FP16 RoPE loses precision; computing the phase in FP32 fixes it.",
          "https://github.com/EleutherAI/gpt-neox/issues/1003 (fp16 tables); "
          "https://github.com/huggingface/transformers/pull/29285 (phase forced to fp32)",
          f"{CLAIM} 10", costs.fp16, costs.fp16_rule),
    Claim(11, "A precomputed cos/sin cache costs O(L d) memory vs O(d) on the fly, which is slower.",
          "public RoFormer notes, not in the paper (the cos/sin cache of GPT-NeoX and HF transformers vs "
          "recomputing)", f"{CLAIM} 11", costs.cache, costs.cache_rule),
    Claim(12, "RoPE adds no parameters and O(L d) compute, not changing attention's complexity.",
          "RoFormer §3.4.2 (arXiv 2104.09864: fixed theta_i, elementwise O(L d) rotation)",
          f"{CLAIM} 12", costs.cost, costs.cost_rule),
    Claim(13, "Sinusoidal PE: p_(k+delta) = T(delta) p_k, a linear map independent of k.",
          "Vaswani et al. 2017 §3.5 (arXiv 1706.03762); proof: "
          "https://blog.timodenk.com/linear-relationships-in-the-transformers-positional-encoding/",
          f"{CLAIM} 13", maths.sinusoidal_linear, maths.sinusoidal_linear_rule),
    Claim(14, "Sinusoidal PE inner products decay with distance.",
          "Su 2021, https://spaces.ac.cn/archives/8231 (远程衰减)", f"{CLAIM} 14",
          maths.sinusoidal_decay, maths.decay_rule),
    Claim(15, "RoPE matches learned PE at in-distribution lengths with zero parameters.",
          "RoFormer §4 (arXiv 2104.09864: GLUE fine-tuning against BERT's learned PE)",
          f"{SWEEP_DEFAULT}{CLAIM} 15", trained_compare.rope_vs_learned, trained_compare.rope_vs_learned_rule),
    Claim(16, "RNoPE-SWA (sliding-window RoPE layers + global NoPE layers) extrapolates better than full RoPE.",
          "Yang et al. 2025, Rope to Nope and Back Again (arXiv 2501.18795), long-context results; Cohere Command A",
          f"{SWEEP_DEFAULT}{CLAIM} 16", trained_layers.rnope_vs_rope, trained_layers.rnope_vs_rope_rule),
    Claim(17, "Removing the lowest RoPE frequencies (p-RoPE) does not hurt, and helps beyond the train length.",
          "Barbero et al., ICLR 2025 (arXiv 2410.06205): Table 2 (Gemma 2B, base 10k, p 0.25 / 0.75) and its "
          "argument that low frequencies are semantic channels not robust over long contexts",
          f"make sweep SWEEP=prope && {SWEEP_DEFAULT}{CLAIM} 17", trained_layers.prope_vs_rope,
          trained_layers.prope_vs_rope_rule),
    Claim(18, "Stick-breaking attention needs no positional encoding: it matches softmax with RoPE at the train "
              "length and extrapolates better.",
          "Tan et al. 2024, Scaling Stick-Breaking Attention (arXiv 2410.17980): no position embedding, length "
          "extrapolation against softmax + RoPE", f"{SWEEP_DEFAULT}{CLAIM} 18",
          trained_normalizers.stick_breaking_vs_rope, trained_normalizers.stick_breaking_vs_rope_rule),
    Claim(19, "Sigmoid attention (b = -log n) with ALiBi matches softmax attention with ALiBi.",
          "Ramapuram et al., ICLR 2025 (arXiv 2409.04431): SigmoidAttn matches softmax in language modelling; "
          "apple/ml-sigmoid-attention", f"{SWEEP_DEFAULT}{CLAIM} 19", trained_normalizers.sigmoid_vs_softmax,
          trained_normalizers.sigmoid_vs_softmax_rule),
    Claim(20, "The Forgetting Transformer (FoX, a forget gate and no PE) extrapolates like ALiBi and better than "
              "RoPE.",
          "Lin et al., ICLR 2025 (arXiv 2503.02130): FoX as a data-dependent ALiBi; length extrapolation against "
          "the Transformer with RoPE", f"{SWEEP_DEFAULT}{CLAIM} 20", trained_normalizers.fox_vs_alibi,
          trained_normalizers.fox_vs_alibi_rule),
    Claim(21, "CoPE counts where RoPE fails: on CoPE's counting task it answers more accurately than RoPE, at the "
              "train length and beyond.",
          "Golovneva et al. 2024, Contextual Position Encoding (arXiv 2405.18719), §4 counting task; "
          "facebookresearch/RAM projects/cope", f"make sweep SWEEP=content && {CLAIM} 21",
          trained_content.cope_counts, trained_content.cope_counts_rule),
    Claim(22, "Without an extension, a RoPE model's perplexity rises past its trained context (a real pretrained "
              "model, SmolLM2-135M, at 2x its 8192 tokens).",
          "Press et al. 2022 (arXiv 2108.12409), §2 and Fig. 1: rotary models degrade past the training length",
          f"make pretrained && {CLAIM} 22", pretrained.rises_past_context, pretrained.rises_past_context_rule),
    Claim(23, "Without fine-tuning, NTK-aware scaling and YaRN beat linear position interpolation at 2x the trained "
              "context (SmolLM2-135M).",
          "Peng et al. 2023, YaRN (arXiv 2309.00071), §3 and Table 1 (PI degrades without fine-tuning; NTK-aware "
          "and YaRN less); bloc97 2023, NTK-aware scaled RoPE",
          f"make pretrained && {CLAIM} 23", pretrained.ntk_yarn_beat_pi, pretrained.ntk_yarn_beat_pi_rule),
    Claim(24, "RoPE positions held in bf16 hurt a real model at long positions (SmolLM2-135M, the rest of the model "
              "in fp32).",
          "Wang et al. 2024, AnchorAttention (arXiv 2411.13476), §3: bf16 breaks RoPE's relative property, "
          "worse with position",
          f"make pretrained && {CLAIM} 24", pretrained.bf16_positions_hurt, pretrained.bf16_positions_hurt_rule),
]


@dataclasses.dataclass
class Context:
    """Where the sweeps are, where plots go; the loaded sweeps (cache), the dir each was read from (dirs; None:
    no rows), stale runs left out, and what the claim being measured found missing (missing, reset per claim).
    committed: sweeps is the checkout's results/, so each sweep is read from its committed runs only
    (harness.claims.trained.COMMITTED)."""

    sweeps: Path
    out: Path
    cache: dict = dataclasses.field(default_factory=dict)
    stale: set = dataclasses.field(default_factory=set)
    committed: bool = False
    dirs: dict = dataclasses.field(default_factory=dict)
    missing: list = dataclasses.field(default_factory=list)


def committed_root(sweeps):
    """True when `sweeps` is this checkout's results/ (the committed runs), not a dir of sweeps."""
    root = paths.CHECKOUT / "results"
    return (paths.CHECKOUT / "pyproject.toml").is_file() and Path(sweeps).resolve() == root.resolve()


def _not_measured(ctx, v, reason):
    """A not-measured verdict's reason naming what its claim lacked: 'not measured: rows of sweep prope not
    committed; run make sweep SWEEP=prope ...' (committed) or '... not under <sweeps>; run ...'."""
    if kind(v) != N or not ctx.missing:
        return reason
    where = "not committed" if ctx.committed else f"not under {ctx.sweeps}"
    lacks = list(dict.fromkeys(ctx.missing))  # in the order met, once each
    todo = reason.removeprefix("not measured").lstrip(": ")
    return f"not measured: {', '.join(lacks)} {where}" + (f"; {todo}" if todo else "")


def _valid_ids():
    ids = sorted(c.id for c in CLAIMS)
    contiguous = ids == list(range(ids[0], ids[-1] + 1))
    return ids, f"the claims are numbered {ids[0]} to {ids[-1]}" if contiguous else f"the claim numbers are {ids}"


def select(only):
    """The set of claim ids `only` names (ints or strings of digits, as --only gives them); empty or None: all.
    Anything else is a ValueError in one line naming the valid numbers, before any work."""
    ids, valid = _valid_ids()
    chosen = set()
    for x in only or ():
        text = str(x).strip()
        if isinstance(x, bool) or not (isinstance(x, int) or text.lstrip("+-").isdigit()):
            raise ValueError(f"--only {x!r} is not a claim number; {valid}")
        if int(text) not in ids:
            raise ValueError(f"--only {int(text)}: no such claim; {valid}")
        chosen.add(int(text))
    return chosen


def run(sweeps="results/sweeps", out="results/claims", only=None, threads=1):
    """Measure and judge each claim (all, or the ids in `only`); returns [(Claim, Evidence, verdict, reason)].
    An id in `only` that names no claim is a ValueError (one line, the valid numbers) before any work."""
    only = select(only)
    if threads:
        torch.set_num_threads(threads)  # timings of claims 11-12 on one thread, as the kernel benchmarks
    ctx = Context(Path(sweeps), Path(out), committed=committed_root(sweeps))
    ctx.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for claim in CLAIMS:
        if only and claim.id not in only:
            continue
        t = time.perf_counter()
        ctx.missing = []
        evidence = claim.measure(ctx)
        v, reason = claim.rule(evidence.numbers)
        reason = _not_measured(ctx, v, reason)
        if evidence.plot:  # the figure states its verdict and tolerance
            stamp(evidence.plot, claim.id, v, reason, claim.rule)
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


def _read(ctx):
    """'default: results/reference; content: results/content; ...; no rows: base_ablation, claims, prope'."""
    read = [f"{sweep}: `{d}`" for sweep, d in sorted(ctx.dirs.items()) if d is not None]
    absent = sorted(sweep for sweep, d in ctx.dirs.items() if d is None)
    return "; ".join(read + ([f"{'not committed' if ctx.committed else 'no rows'}: {', '.join(absent)}"] if absent
                             else []))


def header(ctx, wall_s):
    stale = f" Left out as stale (trained by older code; rerun them): {sorted(ctx.stale)}." if ctx.stale else ""
    runs = (f"the committed runs under `{ctx.sweeps}`, each sweep's own rows only and no checkpoint (they are "
            f"git-ignored)" if ctx.committed else f"the runs under `{ctx.sweeps}`")
    return (f"Generated by `python -m harness.claims --sweeps {ctx.sweeps}` ({datetime.date.today().isoformat()}, "
            f"torch {torch.__version__}, {wall_s:.0f} s for this step) from {runs} (sweeps read: {_read(ctx)}. "
            f"Their rows: {_setup(ctx)}) and from direct computation. Verdicts follow from the numbers by the rules "
            f"listed below the table; a trained claim is judged on the 95% CI over seeds (paired by seed where "
            f"it compares encodings or bases) and needs >= 3 seeds to be more than inconclusive; \"at this "
            f"scale\" means these small models trained for seconds to minutes on CPU.{stale}")


__all__ = ["CLAIMS", "Claim", "Context", "run", "select", "write"]
