"""Rotary maths shared by the rotary family: frequencies, tables, rotation implementations, decay bound.

Modules: frequencies and rotation (the formulas) import torch only; fused (the kernels' front end)
imports rotation; apply (names -> implementations, `auto`) imports fused and rotation. The kernels
(cpu, triton_rope, compiled) are imported by fused/apply at first call; none imports apply.
"""
import torch

from harness.rope.apply import IMPLS, apply_rotary, apply_rotary_qk
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, frequencies
from harness.rope.rotation import LAYOUTS, rotary_table, to_device

__all__ = ["IMPLS", "LAYOUTS", "ROPE_INIT_FUNCTIONS", "apply_rotary", "apply_rotary_qk", "decay_curve",
           "frequencies", "rotary_table", "to_device"]


def decay_curve(head_dim, base, distances):
    """Su's long-range bound (RoFormer, Su et al. 2021, §3.4.3): mean over j of |S_j(m)|, S_j = sum_{i<=j} e^{i m theta_i}.

    distances: (N,) relative distances m; returns (N,) float64. At m = 0 it is (head_dim/2 + 1)/2.
    """
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (d/2,), exact in fp64
    m = torch.as_tensor(distances, dtype=torch.float64)
    phase = m[:, None] * theta  # (N, d/2)
    s = torch.polar(torch.ones_like(phase), phase).cumsum(dim=-1)  # S_j for each j
    return s.abs().mean(dim=-1)
