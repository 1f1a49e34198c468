"""Helpers for the conformance tests: a positions-convention RoPE built on our frequencies, with one fault planted
(tests/test_conformance_bugs.py) or its inv_freq a few fp32 ulps off (the tolerance model's no-false-alarm case)."""
import functools
import math

import torch

from harness.conformance import bugs, golden
from harness.rope.frequencies import frequencies
from harness.rope.rotation import eager

SKIP = ("rope_type", "rope_theta", "head_dim", "max_position_embeddings")


def knobs(rope):
    kw = {n: v for n, v in rope.items() if n not in SKIP}
    if rope["rope_type"] == "dynamic":  # HF's dynamic reads its trained length from max_position_embeddings
        kw["original_max_position_embeddings"] = rope["max_position_embeddings"]
    return kw


def rotary(q, k, positions, inv, att, r=None):
    """Rotate the first r (default 2 len(inv)) features of q, k (..., P, D) with an fp32 table, half pairs."""
    phase = positions.float()[:, None] * inv.float()[None, :]
    cos, sin = phase.cos() * att, phase.sin() * att
    return eager(q, cos, sin, "half"), eager(k, cos, sin, "half")


def with_inv(change):
    """A positions-convention fn whose (inv_freq, att) from our frequencies are passed through change(rope, inv,
    att) -> (inv, att) first."""
    def fn(q, k, positions, *, rope):
        inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], int(positions.max()) + 1,
                               **knobs(rope))
        inv, att = change(rope, inv, att)
        return rotary(q, k, positions, inv, att)
    return fn


def ulps_off(n, seed=0):
    """inv_freq moved by up to n fp32 ulps, a seeded sign per frequency (an in-kernel fp32 exp / pow)."""
    def change(rope, inv, att):
        g = torch.Generator().manual_seed(seed)
        steps = torch.randint(-n, n + 1, inv.shape, generator=g)
        out = inv.clone()
        for _ in range(n):  # one ulp at a time, toward the seeded side
            up = torch.nextafter(out, torch.full_like(out, math.inf))
            down = torch.nextafter(out, torch.zeros_like(out))
            go = steps != 0
            out = torch.where(go & (steps > 0), up, torch.where(go & (steps < 0), down, out))
            steps = steps - steps.sign()
        return torch.where(inv == 0, inv, out), att
    return with_inv(change)


def in_kernel_exp(rope, inv, att):
    """inv_freq recomputed as an fp32 kernel does, exp(-(2j/R) ln base), keeping the type's per-frequency scale
    (the ratio of ours to the plain base^(-2j/R), itself fp32)."""
    r = 2 * inv.numel()
    j = torch.arange(0, r, 2, dtype=torch.float32)
    plain = 1.0 / (rope["rope_theta"] ** (j / r))
    kernel = torch.exp(-(j / r) * torch.tensor(math.log(rope["rope_theta"]), dtype=torch.float32))
    return torch.where(inv == 0, inv, inv / plain * kernel), att


def planted_table(fault):
    """A positions-convention RoPE (our frequencies, an fp32 table, eager half rotation) with one bug planted."""
    def fn(q, k, positions, *, rope):
        skip = ("rope_type", "rope_theta", "head_dim", "max_position_embeddings")
        kw = {n: v for n, v in rope.items() if n not in skip}
        inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], int(positions.max()) + 1, **kw)
        pos = positions.float()
        if fault == bugs.ATTENTION:
            att = 1.0
        elif fault == bugs.BF16_INV:
            inv = inv.to(torch.bfloat16).float()
        elif fault == bugs.FP16_POS:
            pos = positions.to(torch.float16).float()
        elif fault == bugs.BF16_POS:
            pos = positions.to(torch.bfloat16).float()
        elif fault == bugs.OFF_BY_ONE:
            pos = pos + 1
        phase = pos[:, None] * inv[None, :]
        cos, sin = phase.cos() * att, phase.sin() * att
        return eager(q, cos, sin, "half"), eager(k, cos, sin, "half")
    return fn


def yarn_reversed(q, k, positions, *, rope):
    """YaRN with the blend the wrong way round (modeling_rope_utils._compute_yarn_parameters, ramp not 1 - ramp)."""
    r, base, f = int(rope["head_dim"] * rope["partial_rotary_factor"]), rope["rope_theta"], rope["factor"]
    corr = [r * math.log(rope["original_max_position_embeddings"] / (n * 2 * math.pi)) / (2 * math.log(base))
            for n in (32, 1)]
    low, high = max(math.floor(corr[0]), 0), min(math.ceil(corr[1]), r - 1)
    ramp = ((torch.arange(r // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, r, 2).float() / r)
    inv = (1 / pos_freqs) * ramp + (1 / (f * pos_freqs)) * (1 - ramp)
    return rotary(q, k, positions, inv, 0.1 * math.log(f) + 1)


@functools.cache
def sampled():
    """positions= "sampled", for the runs of tests/test_conformance_bugs.py and the unbroken planted implementation
    (tests/test_conformance.py). Under the positions convention the length-dependent types (dynamic,
    longrope) are otherwise handed every position 0..L-1 (up to 131072 rows, about 1 s a case), of which only the
    sampled rows are judged; the functions there read the length as max(positions) + 1, which the sampled positions
    reach (checked here), and each output row depends only on its own position, so the judged rows, results and
    bug names are the same bit for bit (measured: 60 + 12 + 18 + 24 rows). The dense hand-over itself is checked by
    test_conformance_conventions.py::test_dense_positions_for_length_dependent_types (dynamic), the real transformers
    of test_conformance_libraries.py (longrope) and the dense forgery of test_conformance_verdict.py."""
    case_list, data = golden.load()
    assert all(int(golden.case_arrays(data, c)["positions"].max()) == c["seq_len"] - 1 for c in case_list)
    return "sampled"
