"""RoPE with a learnable receptive field: theta*_j = alpha/base^rho + (1-alpha) theta_j.

The harness's own variant of RoPE (Su et al. 2021, arXiv 2104.09864). phi = alpha/base^rho adds one shared
frequency; since e^{i(m-n)theta*_j} = e^{i(m-n)phi} e^{i(m-n)(1-alpha)theta_j}, the score becomes
cos((m-n)phi) a'(m-n) - sin((m-n)phi) b'(m-n), a' and b' the real and imaginary parts of RoPE's complex score sum
at frequencies (1-alpha) theta_j. alpha = 0 is plain RoPE."""
import torch
from torch import nn

from harness.encodings.rope import Rope
from harness.encodings._params import Range, fraction


class RopeRF(Rope):
    """alpha is learnable (init alpha_init); rho is a fixed hyperparameter in [0, 1]."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary, θ*_j = α/base^ρ + (1−α)θ_j, α learnable",
            "rotate",
            "the harness's own variant of RoPE")

    RANGES = {"rho": fraction(), "alpha_init": Range()}

    def __init__(self, *, head_dim, base=10000.0, rho=0.5, alpha_init=0.1, layout="half",
                 partial_rotary_factor=1.0, impl="auto"):
        super().__init__(head_dim=head_dim, base=base, layout=layout,
                         partial_rotary_factor=partial_rotary_factor, impl=impl)
        self.rho = float(rho)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))

    def frequencies(self, seq_len):
        theta, attention_factor = super().frequencies(seq_len)
        # fp32 or better even when the model is cast to bf16 (a bf16 phase: Modalities #462); explicit because
        # a 0-dim alpha does not promote a 1-dim theta (torch promotion rules)
        alpha = self.alpha.to(torch.promote_types(torch.float32, self.alpha.dtype))
        phi = alpha / self.base ** self.rho
        return phi + (1 - alpha) * theta.to(alpha), attention_factor
