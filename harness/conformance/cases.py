"""The conformance cases and the fp64 oracle that answers them.

A case is one (rope_type, head_dim, base, partial/full rotary, sequence length); each is run in both layouts.
The oracle: the frequencies are our port of HF's ROPE_INIT_FUNCTIONS (harness/rope/frequencies.py, equal to HF
bit for bit, tests/test_hf_config.py) held as the fp32 values a model holds, widened to fp64; the phase
pos * inv_freq, cos, sin and the rotation (rotation.reference, an explicit rotation matrix) are fp64
(precision_pipelines.REFERENCE, every stage fp64). Positions are sampled, not dense, to keep the data small:
powers of two and their neighbours (where fp16 stops holding integers: 2048, 65504) and the largest.
"""
import torch

from harness.rope.frequencies import frequencies
from harness.rope.rotation import LAYOUTS, reference

ORIGINAL = 8192          # the trained length every extension case extends from
LONG = 131072            # the longest length covered (128k)
# (head_dim, base): a small grid; base 5e5 is Llama 3's, 1e4 RoFormer's
DIMS_BASES = ((64, 1e4), (128, 1e4), (128, 5e5))
POSITIONS = {  # 12 sampled positions per length; 2049 is the first integer fp16 cannot hold, 65536 is inf in fp16
    LONG: (0, 1, 255, 2047, 2049, 8191, 8193, 32767, 65504, 65536, 100003, LONG - 1),
    ORIGINAL: (0, 1, 3, 255, 256, 2047, 2049, 4095, 4097, 6001, ORIGINAL - 2, ORIGINAL - 1),
}
# the partial fraction of each type's "partial" variant: p-RoPE's is Gemma 4's p (DESIGN.md §2)
PARTIAL = {"proportional": 0.25}
DEFAULT_PARTIAL = 0.5


def _longrope_factors(n):
    """Deterministic stand-ins for LongRoPE's searched factors, (n,) each: short ~1, long rising to 16."""
    short = [round(1.0 + 0.5 * j / n, 4) for j in range(n)]
    long = [round(1.0 + 15.0 * (j / n) ** 2, 4) for j in range(n)]
    return short, long


def type_params(rope_type, rotary_dim):
    """HF rope_parameters keys (beyond rope_type, rope_theta, partial_rotary_factor) for each type's case."""
    if rope_type in ("default", "proportional"):
        return {}
    if rope_type in ("linear", "ntk"):
        return {"factor": 4.0}
    if rope_type == "dynamic":
        return {"factor": 4.0, "original_max_position_embeddings": ORIGINAL}
    if rope_type == "yarn":
        return {"factor": LONG / ORIGINAL, "original_max_position_embeddings": ORIGINAL}
    if rope_type == "llama3":
        return {"factor": 8.0, "original_max_position_embeddings": ORIGINAL, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0}
    if rope_type == "longrope":
        short, long = _longrope_factors(rotary_dim // 2)
        return {"factor": LONG / ORIGINAL, "original_max_position_embeddings": ORIGINAL,
                "short_factor": short, "long_factor": long}
    raise ValueError(f"unknown rope_type {rope_type!r}")


ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional")


def cases():
    """Every case as a dict: id, rope_type, head_dim, base, partial_rotary_factor, seq_len, params."""
    out = []
    for rope_type in ROPE_TYPES:
        lengths = (ORIGINAL, LONG) if rope_type in ("dynamic", "longrope") else (LONG,)
        for head_dim, base in DIMS_BASES:
            for partial in (1.0, PARTIAL.get(rope_type, DEFAULT_PARTIAL)):
                rotary_dim = head_dim if rope_type == "proportional" else int(head_dim * partial)
                for seq_len in lengths:
                    cid = f"{rope_type}-d{head_dim}-b{base:.0e}-p{partial:g}-L{seq_len}".replace("+0", "")
                    out.append({"id": cid, "rope_type": rope_type, "head_dim": head_dim, "base": base,
                                "partial_rotary_factor": partial, "seq_len": seq_len,
                                "params": type_params(rope_type, rotary_dim)})
    return out


def case_frequencies(case):
    """(inv_freq fp64 (R/2,), attention_factor float): our port's fp32 values, widened."""
    kw = dict(case["params"])
    if case["partial_rotary_factor"] != 1.0:
        kw["partial_rotary_factor"] = case["partial_rotary_factor"]
    inv, att = frequencies(case["rope_type"], case["head_dim"], case["base"], case["seq_len"], **kw)
    return inv.double(), float(att)


def inputs(head_dim, n_pos, seed=0):
    """q, k (n_pos, head_dim) fp64, multiples of 1/16 in [-4, 4]: exact in fp16, bf16 and fp32, so the inputs
    themselves carry no rounding whatever dtype the implementation runs in."""
    g = torch.Generator().manual_seed(seed + head_dim)
    q, k = (torch.round(torch.randn(2, n_pos, head_dim, generator=g, dtype=torch.float64) * 32) / 16).clamp(-4, 4)
    return q, k


def table(inv_freq, pos, attention_factor):
    """cos, sin (P, R/2) fp64 of the phase pos * inv_freq, scaled by the attention factor (HF's attention_scaling)."""
    phase = pos.double()[:, None] * inv_freq.double()[None, :]
    return phase.cos() * attention_factor, phase.sin() * attention_factor


def rotate(x, inv_freq, pos, attention_factor, layout):
    """The oracle rotation of x (..., P, D) in fp64: RoFormer's rotation matrix per position (rotation.reference)."""
    cos, sin = table(inv_freq, pos, attention_factor)
    return reference(x.double(), cos, sin, layout)


def positions(case):
    return torch.tensor(POSITIONS[case["seq_len"]], dtype=torch.int64)


def golden_case(case):
    """Every array the golden file holds for one case, fp64 / int64 numpy."""
    inv, att = case_frequencies(case)
    pos = positions(case)
    q, k = inputs(case["head_dim"], len(pos))
    cos, sin = table(inv, pos, att)
    out = {"inv_freq": inv, "attention_factor": torch.tensor(att, dtype=torch.float64), "positions": pos,
           "cos": cos, "sin": sin, "q": q, "k": k}
    for layout in LAYOUTS:
        qr, kr = rotate(torch.stack((q, k)), inv, pos, att, layout)  # one (P, R, R) matrix batch for both
        out[f"q_rot_{layout}"], out[f"k_rot_{layout}"] = qr, kr
        out[f"logits_{layout}"] = qr @ kr.T  # (P, P): q at position m against k at position n
    return {name: v.numpy() for name, v in out.items()}
