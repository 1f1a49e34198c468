"""Known RoPE bug classes, simulated from the oracle, to name what a failing implementation got wrong.

Each variant is the fp64 oracle with one fault planted; a failure is named by the variant its output matches
within the same tolerance (tolerance.bound). The classes and where they were seen:
- pairing: layouts swapped: half (GPT-NeoX/HF, pair (j, j+R/2)) vs interleaved (RoFormer, pair (2j, 2j+1));
  the classic HF-checkpoint-into-Meta-code mistake (transformers' convert_llama_weights_to_hf permutes q/k).
- pairing: proportional vs partial: p-RoPE pairs (j, j+D/2) over the whole head with zero frequencies, partial
  rotary pairs (j, j+R/2) inside R = p*D features (DESIGN.md §2, HF _compute_proportional_rope_parameters).
- attention factor missing: YaRN / LongRoPE cos, sin not multiplied by attention_factor (HF attention_scaling).
- bf16 inv_freq: inv_freq cast to bf16 (Modalities #462, gpt-neox #1003 via model.half()).
- fp16 positions: positions held in fp16, exact only to 2048, inf past 65504 (precision_pipelines docstring).
- bf16 positions: positions held in bf16, exact only to 256 (rotary-embedding-torch 0.9.1 builds
  arange(seq_len, dtype=x.dtype) in rotate_queries_or_keys; found by this suite, results/conformance/README.md).
- off-by-one position: positions shifted by +1 or -1 (a cache offset or a 1-based position_ids).
- YaRN ramp reversed: the blend interpolates the high frequencies and keeps the low ones (faults.py).
- partial rotary fraction ignored: the whole head rotated with whole-head frequencies, or R rotated with the
  scaling's dimension terms (YaRN's correction range, NTK's d/(d-2)) computed from head_dim.
- every frequency rescaled: (dynamic) NTK dividing every inv_freq by s^(d/(d-2)) instead of scaling the base.
- attention factor applied twice: cos/sin scaled by af^2 (HF's attention_scaling plus a model's own mscale).
- interpolation reversed / missing: linear PI multiplying positions (or inv_freq) by the factor, or not at all.
- exponent j/d: inv_freq = base^(-j/d) for base^(-2j/d) (arange(d/2) / d).
- LongRoPE short/long factors: the long factors below the original length or the short ones above it (HF picks
  by max(position_ids) + 1 > original_max_position_embeddings, modeling_rope_utils.longrope_frequency_update).
The usage cases (usage.py) add their own candidates in front of these (classify's `extra`), each only where its
case can produce it: 16-bit frequencies, positions or phase (their product rounded too: x-transformers'
einsum of t.type_as(inv_freq), rotary-embedding-torch's) after a cast (`module.half()` / `.to(torch.bfloat16)` casts an
inv_freq buffer: HF's LlamaRotaryEmbedding, measured in results/conformance/README.md), a table built for other
parameters (a cache keyed on too little: the sequence length, not the base or factor) and decode positions that
restart at 0 (an offset or position ids ignored).
When nothing matches, the note is "unrecognised" with the error's measured signature (pattern(): from which position,
in which pairs, pass-through features, the norm ratio, the dtype), never the name of the closest class: a bug outside
the list read as "off-by-one" or "layouts swapped" sends its reader after the wrong fix.
Three classes are properties of the output whatever its values (run.output_faults), named beside any of the above:
a dtype other than the input's (fp64 or fp32 back for a bf16 input: a model's next layer runs in another
precision), complex values (the imaginary part would be dropped by a cast), non-finite values (every input is).
"""
import torch

from harness.conformance import cases as C
from harness.conformance import faults as F
from harness.conformance import tolerance as T
from harness.rope.rotation import eager

PAIRING = "pairing: layouts swapped"
PROPORTIONAL = "pairing: proportional vs partial"
ATTENTION = "attention factor missing"
BF16_INV = "bf16 inv_freq"
FP16_POS = "fp16 positions"
BF16_POS = "bf16 positions"
OFF_BY_ONE = "off-by-one position"
YARN_RAMP = "YaRN ramp reversed"
PARTIAL_IGNORED = "partial rotary fraction ignored"
EVERY_FREQ = "every frequency rescaled, not the base"
ATTENTION_TWICE = "attention factor applied twice"
INTERP_REVERSED = "interpolation on the wrong side"
INTERP_MISSING = "interpolation missing"
EXPONENT = "inv_freq exponent j/d, not 2j/d"
LONGROPE_CHOICE = "LongRoPE short/long factors chosen the wrong way"
CAST_FREQ = "16-bit frequencies after a cast"
CAST_POS = "16-bit positions after a cast"
CAST_PHASE = "16-bit phase after a cast"
STALE_TABLE = "table built for other parameters"
DECODE_RESTART = "decode positions restart at 0 (offset ignored)"
WRONG_DTYPE = "wrong output dtype"
COMPLEX_OUTPUT = "complex output"
NON_FINITE = "non-finite output"
OUTPUT_CLASSES = (WRONG_DTYPE, COMPLEX_OUTPUT, NON_FINITE)
CLASSES = (PAIRING, PROPORTIONAL, ATTENTION, BF16_INV, FP16_POS, BF16_POS, OFF_BY_ONE, YARN_RAMP, PARTIAL_IGNORED,
           EVERY_FREQ, ATTENTION_TWICE, INTERP_REVERSED, INTERP_MISSING, EXPONENT, LONGROPE_CHOICE)
USAGE_CLASSES = (CAST_FREQ, CAST_POS, CAST_PHASE, STALE_TABLE, DECODE_RESTART)  # only the usage cases name these
_FAULTS = ((YARN_RAMP, F.yarn_ramp_reversed), (PARTIAL_IGNORED, F.scaling_with_head_dim),
           (EVERY_FREQ, F.every_frequency_rescaled), (EXPONENT, F.exponent_j_over_d))


def _other_pairing_freqs(case, inv):
    """inv_freq vectors of the other p-RoPE/partial reading of this case (empty when it has none)."""
    p, d = case["partial_rotary_factor"], case["head_dim"]
    if p == 1.0:
        return []
    if case["rope_type"] == "proportional":
        angles = int(torch.count_nonzero(inv))
        respaced = C.case_frequencies({**case, "rope_type": "default"})[0]  # base^(-2j/R), R = p*D
        return [inv[:angles], respaced]  # p-RoPE read as partial: same or re-spaced frequencies, pairs (j, j+R/2)
    padded = torch.cat((inv, torch.zeros(d // 2 - inv.numel(), dtype=inv.dtype)))
    return [padded]  # partial read as p-RoPE: pairs (j, j+D/2)


def _other_longrope(case):
    """LongRoPE's inv_freq (R/2,) with the other factor set: long where the case's length picks short, and back."""
    original = case["params"]["original_max_position_embeddings"]
    other = original + 1 if case["seq_len"] <= original else original
    return C.case_frequencies({**case, "seq_len": other})[0]


def variants(case, inv, pos, att, layout):
    """[(class name, inv_freq, positions (fp64), attention_factor, layout)] for this case; a layout
    "a/b" pairs features as layout a with the full-width cos/sin laid out as layout b (mixed conventions)."""
    other = "interleaved" if layout == "half" else "half"
    out = [(PAIRING, inv, pos.double(), att, other), (PAIRING, inv, pos.double(), att, f"{other}/{layout}")]
    out += [(PROPORTIONAL, f, pos.double(), att, layout) for f in _other_pairing_freqs(case, inv)]
    if att != 1.0:
        out.append((ATTENTION, inv, pos.double(), 1.0, layout))
    out.append((BF16_INV, inv.to(torch.bfloat16).double(), pos.double(), att, layout))
    out.append((FP16_POS, inv, pos.to(torch.float16).double(), att, layout))
    out.append((BF16_POS, inv, pos.to(torch.bfloat16).double(), att, layout))
    out += [(OFF_BY_ONE, inv, pos.double() + s, att, layout) for s in (1, -1)]
    if att != 1.0:
        out.append((ATTENTION_TWICE, inv, pos.double(), att * att, layout))
    if case["rope_type"] == "linear":
        factor = case["params"]["factor"]
        out += [(INTERP_REVERSED, inv * factor * factor, pos.double(), att, layout),
                (INTERP_MISSING, inv * factor, pos.double(), att, layout)]
    for name, fault in _FAULTS:
        got = fault(case)
        if got is not None:
            out.append((name, got[0], pos.double(), got[1], layout))
    if case["rope_type"] == "longrope":
        out.append((LONGROPE_CHOICE, _other_longrope(case), pos.double(), att, layout))
    if case["partial_rotary_factor"] != 1.0 and case["rope_type"] not in ("proportional", "longrope"):
        # the whole head rotated (longrope's factors are R/2 long: it has no whole-head reading)
        whole = C.case_frequencies({**case, "partial_rotary_factor": 1.0})
        out.append((PARTIAL_IGNORED, whole[0], pos.double(), whole[1], layout))
    return out


def _full_width(t, layout):
    return torch.cat((t, t), -1) if layout == "half" else t.repeat_interleave(2, -1)


def _table(inv, pos, att):
    """cos, sin (P, R/2) fp64; pos (P,) positions, or (P, R/2) the phase itself (a candidate whose phase was
    rounded as a whole, CAST_PHASE: no (inv_freq, positions) pair gives it)."""
    if pos.dim() == 2:
        return pos.cos() * att, pos.sin() * att
    return C.table(inv, pos, att)


def _rotate(x, inv, pos, att, layout):
    """The oracle's rotation by the elementwise formula (rotation.eager) in fp64: same maths as the matrix
    reference to an fp64 rounding, 10x faster, which is all a classifier needs."""
    cos, sin = _table(inv, pos, att)
    return eager(x.double(), cos, sin, layout)


def _mixed(x, inv, pos, att, lay):
    """x (P, D) rotated HF-style, x * C + rot(x) * S, with rot pairing as layout a and C, S (P, R) laid out as
    layout b: what rotate_half does when given interleaved cos/sin, or the reverse."""
    pairing, width = lay.split("/")
    cos, sin = _table(inv, pos, att)
    c, s, r = _full_width(cos, width), _full_width(sin, width), 2 * cos.shape[-1]
    xr = x[:, :r].double()
    if pairing == "half":
        rot = torch.cat((-xr[:, r // 2:], xr[:, :r // 2]), -1)
    else:
        rot = torch.stack((-xr[:, 1::2], xr[:, 0::2]), -1).flatten(-2)
    return torch.cat((xr * c + rot * s, x[:, r:].double()), -1)


def classify(case, arrays, layout, observed, dtype, own_table, compare="outputs", extra=()):
    """The bug class whose simulated output matches observed (q_rot, k_rot), two (P, D) fp64 tensors, within
    the tolerance of that variant (its own pairing decides each element's pair magnitude), else a note naming
    "unrecognised" and the error pattern. arrays: the golden case (or a usage case's, usage.py). compare "logits"
    matches q'(m)·k'(n) only. extra: candidates (name, inv_freq, positions, attention_factor, layout) tried before
    the known classes, winning ties (a stale table of a linear case equals "interpolation missing")."""
    inv, pos = torch.from_numpy(arrays["inv_freq"]), torch.from_numpy(arrays["positions"])
    att = float(arrays["attention_factor"])
    q, k = torch.from_numpy(arrays["q"]), torch.from_numpy(arrays["k"])
    best = None
    for name, f, p, a, lay in list(extra) + variants(case, inv, pos, att, layout):
        pairing = lay.split("/")[0]
        with torch.no_grad():
            ref = [(_rotate if "/" not in lay else _mixed)(x, f, p, a, lay) for x in (q, k)]
            allowed = [T.bound(x, pos, f, max(a, att), pairing, dtype, own_table) for x in (q, k)]  # pos (P,)
        if compare == "logits":
            r = T.ratio(observed[0] @ observed[1].T, ref[0] @ ref[1].T, T.logit_bound(*ref, *allowed))
        else:
            r = max(T.ratio(o, e, b) for o, e, b in zip(observed, ref, allowed))
        if best is None or r < best[1]:
            best = (name, r)
    if best[1] <= 1.0:
        return best[0]
    how = pattern(case, arrays, layout, observed, dtype, own_table)
    return f"unrecognised ({how})"


def spans(idx):
    """Sorted indices as ranges: [0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8' (at most 4 ranges, then '...')."""
    runs = []
    for i in idx:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = [f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:4]]
    return ", ".join(text) + (", ..." if len(runs) > 4 else "")


def pattern(case, arrays, layout, observed, dtype, own_table):
    """The measured error signature in words: from which position, which pairs (frequency indices j of
    theta_j, listed exactly, not as a span: a sign flip on pairs 3 and 7 is not 'pairs 3-7'), pass-through
    features, non-finite values, the norm ratio over finite rows (a rotation keeps norms), the largest
    error / tolerance and the dtype. Each (P, D) output of observed against the golden arrays."""
    inv, pos = torch.from_numpy(arrays["inv_freq"]), torch.from_numpy(arrays["positions"])
    att, r = float(arrays["attention_factor"]), 2 * len(arrays["inv_freq"])
    over, norms, worst = torch.zeros(len(pos), dtype=torch.bool), [], 0.0
    pairs = torch.zeros(r // 2, dtype=torch.bool)
    rest, nonfinite = False, torch.zeros(len(pos), dtype=torch.bool)
    for name, o in zip(("q", "k"), observed):
        x = torch.from_numpy(arrays[name])
        e = torch.from_numpy(arrays[f"{name}_rot_{layout}"])
        b = T.bound(x, pos, inv, att, layout, dtype, own_table)
        err = (o - e).abs().nan_to_num(float("inf"))
        bad = err > b
        finite = (err / b)[torch.isfinite(err)]  # the size of the finite errors (non-finite ones are said apart)
        worst = max(worst, float(finite.max()) if finite.numel() else 0.0)
        over |= bad.any(-1)
        nonfinite |= (~torch.isfinite(o)).any(-1)
        j = bad[:, :r].reshape(len(pos), 2, r // 2) if layout == "half" else bad[:, :r].reshape(len(pos), r // 2, 2)
        pairs |= (j.any(1) if layout == "half" else j.any(2)).any(0)
        rest |= bool(bad[:, r:].any())
        fin = torch.isfinite(o).all(-1)  # (P,): rows whose norm means something
        if bool(fin.any()):
            norms.append(float(o[fin, :r].norm() / e[fin, :r].norm().clamp_min(1e-300)))
    first = int(pos[over.nonzero()[0, 0]]) if bool(over.any()) else None
    where = f"first wrong at position {first}" if first is not None else "only in the logits"
    idx = pairs.nonzero().flatten().tolist()
    span = f"pairs {spans(idx)} of {r // 2}" if idx else "no pair"
    extra = ", pass-through features changed" if rest else ""
    if bool(nonfinite.any()):
        extra += f", non-finite from position {int(pos[nonfinite.nonzero()[0, 0]])}"
    ratio = f"norm ratio {min(norms):.4g}-{max(norms):.4g}" if norms else "no finite row"
    size = f"err/tol up to {worst:.3g}"
    return f"{where}, {span}{extra}, {ratio}, {size}, in {dtype}"


def frequency_signature(inv, got):
    """A provider's inv_freq (n,) against the oracle's, in words: which indices differ (relative error over the
    fp32 allowance), the largest relative error, and the base a plain base^(-2j/R) fit through its first two
    frequencies implies (a wrong base reads as one)."""
    if got.shape != inv.shape:
        return f"inv_freq has {got.numel()} entries, expected {inv.numel()}"
    if not bool(torch.isfinite(got).all()):
        return f"inv_freq non-finite at indices {spans((~torch.isfinite(got)).nonzero().flatten().tolist())}"
    rel = ((got - inv).abs() / inv.abs().clamp_min(1e-300))
    bad = ((got - inv).abs() > T.inv_freq_rel(inv) * inv.abs()).nonzero().flatten().tolist()
    text = f"inv_freq indices {spans(bad)} of {inv.numel()} differ, relative error up to {float(rel.max()):.3g}"
    if got.numel() >= 2 and float(got[0]) > float(got[1]) > 0:
        text += f", fits base {(float(got[0]) / float(got[1])) ** got.numel():.4g}"
    return text


def classify_frequencies(case, inv, att, got_inv, got_att):
    """Bug class of a provider's (inv_freq, attention_factor) that differs from the oracle's, or None if equal."""
    def same(a, b):
        return a.shape == b.shape and bool(((a - b).abs() <= T.inv_freq_rel(b) * b.abs()).all())
    tol = (T.PHASE_LN + T.PHASE_REL) * T.U32  # the attention factor: a few fp32 ulps
    inv_ok = same(got_inv, inv)
    att_ok = abs(got_att - att) <= tol * abs(att)
    if inv_ok and att_ok:
        return None
    if inv_ok and got_att == 1.0 and att != 1.0:
        return ATTENTION
    if same(got_inv, inv.to(torch.bfloat16).double()):
        return BF16_INV
    if any(same(got_inv, f) for f in _other_pairing_freqs(case, inv)):
        return PROPORTIONAL
    if inv_ok and att != 1.0 and abs(got_att - att * att) <= tol * att * att:
        return ATTENTION_TWICE
    if case["rope_type"] == "longrope" and same(got_inv, _other_longrope(case)):
        return LONGROPE_CHOICE
    for name, fault in _FAULTS:
        f = fault(case)
        if f is not None and same(got_inv, f[0]):
            return name
    if not inv_ok:
        return f"unrecognised ({frequency_signature(inv, got_inv)})"
    return f"unrecognised (attention factor {got_att:.6g}, expected {att:.6g})"
