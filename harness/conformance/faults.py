"""Frequencies with one scaling mistake planted: the simulated bugs of bugs.py that need their own inv_freq.

Each function takes a golden case and returns (inv_freq fp64 (n,), attention factor), or None where the
mistake cannot show in that case. They follow HF's definitions (transformers/modeling_rope_utils.py:
_compute_yarn_parameters, _compute_dynamic_ntk_parameters) with the one change named, in fp32 as a model holds
them; written here rather than taken from harness/rope/frequencies.py so that the correct path and the faulty
ones share no code.
"""
import math

import torch


def _rotary(case):
    return int(case["head_dim"] * case["partial_rotary_factor"])


def _inv(dim, base, n=None):
    """base^(-2j/dim) for j < n (default dim/2), fp32."""
    n = dim // 2 if n is None else n
    return 1.0 / (base ** (torch.arange(0, 2 * n, 2, dtype=torch.int64).float() / dim))


def _yarn(case, ramp_dim, reverse=False):
    """YaRN inv_freq over R = p*D, its correction range computed with ramp_dim; reverse blends the ramp the
    wrong way round (interpolating the high frequencies, keeping the low ones)."""
    p, base, r = case["params"], case["base"], _rotary(case)
    factor, big_l = p["factor"], p["original_max_position_embeddings"]

    def corr(n_rot):
        return (ramp_dim * math.log(big_l / (n_rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = max(math.floor(corr(p.get("beta_fast", 32.0))), 0), min(math.ceil(corr(p.get("beta_slow", 1.0))),
                                                                         ramp_dim - 1)
    high = high + 0.001 if low == high else high
    ramp = ((torch.arange(r // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = ramp if reverse else 1 - ramp  # HF: the extrapolated (unscaled) share is 1 - ramp
    pos_freqs = base ** (torch.arange(0, r, 2).float() / r)
    inv = (1.0 / (factor * pos_freqs)) * (1 - keep) + (1.0 / pos_freqs) * keep
    return inv.double(), 0.1 * math.log(factor) + 1.0


def yarn_ramp_reversed(case):
    return _yarn(case, _rotary(case), reverse=True) if case["rope_type"] == "yarn" else None


def _ntk_scale(case):
    """The base multiplier's inner term: factor (static NTK) or HF dynamic's (factor L / L0) - (factor - 1)."""
    p = case["params"]
    if case["rope_type"] == "ntk":
        return p["factor"]
    if case["rope_type"] == "dynamic" and case["seq_len"] > p["original_max_position_embeddings"]:
        return p["factor"] * case["seq_len"] / p["original_max_position_embeddings"] - (p["factor"] - 1)
    return None


def scaling_with_head_dim(case):
    """R = p*D rotated, but the scaling's dimension terms (YaRN's correction range, NTK's exponent d/(d-2))
    computed with the whole head_dim D."""
    if case["partial_rotary_factor"] == 1.0:
        return None
    if case["rope_type"] == "yarn":
        return _yarn(case, case["head_dim"])
    s, r, d = _ntk_scale(case), _rotary(case), case["head_dim"]
    if s is None:
        return None
    return _inv(r, case["base"] * s ** (d / (d - 2))).double(), 1.0


def every_frequency_rescaled(case):
    """NTK / dynamic NTK dividing every frequency by s^(d/(d-2)) instead of multiplying the base by it."""
    s, r = _ntk_scale(case), _rotary(case)
    if s is None:
        return None
    return (_inv(r, case["base"]) / s ** (r / (r - 2))).double(), 1.0


def exponent_j_over_d(case):
    """inv_freq = base^(-j/R) instead of base^(-2j/R) (arange(R/2) / R), the type's constant scale kept."""
    if case["rope_type"] not in ("default", "linear"):
        return None
    r, scale = _rotary(case), case["params"].get("factor", 1.0)
    return (_inv(2 * r, case["base"], r // 2) / scale).double(), 1.0
