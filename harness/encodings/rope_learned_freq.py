"""RoPE with learnable frequencies: theta_i = base^(-2i/d) * exp(a_i), a_i init 0.

Su tried trainable theta_i initialised at 10000^(-2i/d) and found they barely moved (Su 2021,
https://spaces.ac.cn/archives/8265, section 远程衰减); the log-scale parametrisation exp(a_i) is ours."""
import torch
from torch import nn

from harness.encodings.rope import Rope


class RopeLearnedFreq(Rope):
    """One learnable log-scale a_i per frequency pair, shared by all heads and layers."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary, θ_i·exp(a_i), a_i learnable (init 0)",
            "rotate",
            "Su 2021 (trainable θ_i, https://spaces.ac.cn/archives/8265)")

    def __init__(self, *, head_dim, base=10000.0, layout="half", partial_rotary_factor=1.0, impl="auto"):
        super().__init__(head_dim=head_dim, base=base, layout=layout,
                         partial_rotary_factor=partial_rotary_factor, impl=impl)
        self.log_scale = nn.Parameter(torch.zeros(int(head_dim * partial_rotary_factor) // 2))

    def frequencies(self, seq_len):
        theta, attention_factor = super().frequencies(seq_len)
        a = self.log_scale.to(torch.promote_types(torch.float32, self.log_scale.dtype))  # fp32+ under .to(bf16)
        return theta.to(a) * a.exp(), attention_factor
