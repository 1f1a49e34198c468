"""Sigmoid attention with ALiBi (Ramapuram et al., ICLR 2025, arXiv 2409.04431): softmax replaced by an
elementwise sigmoid, weights_ij = σ(q_i·k_j/√D − m_h |i − j| + b), with no normalization over j.

The bias b = −log n keeps the summed weights of a length-n row near 1 at initialization (the paper's §3 and its
"−ln(8192)" for 8192-token training in apple/ml-sigmoid-attention, attention_simulator/examples/language_modeling/
configs/experiment_realnews_transformer_sigmoid_alibi.yaml); n is the training length (`train_len`, set to
train.seq_len by conf/encoding/sigmoid_alibi.yaml), a constant of the model, so a longer evaluation sums more
weights rather than renormalizing. ALiBi's slopes and distance penalty are harness/encodings/alibi.py's. The
reference layer (attention_simulator/src/attention_simulator/layers/attention.py, Attention.forward) applies
the ALiBi transform, the causal mask, then `attn + attn_bias` and `torch.sigmoid`: the order used here.
Masked keys get σ(−inf) = 0. Weights depend on i − j alone: relative."""
import math

import torch

from harness.encodings.alibi import Alibi


class SigmoidAlibi(Alibi):
    """ALiBi's bias; the normalizer is σ(score − log train_len)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("sigmoid attention σ(q·k/√D − m_h·|i−j| − log n) in place of softmax, n = `train_len` (= "
            "train.seq_len)",
            "bias + normalizer",
            "Ramapuram et al. 2025 (apple/ml-sigmoid-attention)")

    def __init__(self, *, n_heads, train_len=64):
        super().__init__(n_heads=n_heads)
        if isinstance(train_len, bool) or not isinstance(train_len, (int, float)) or train_len < 1:
            raise ValueError(f"sigmoid_alibi train_len must be a number of positions >= 1, got {train_len!r}")
        self.offset = -math.log(train_len)  # b = -log n

    def normalize(self, scores):
        """scores (B, H, Tq, Tk), -inf where masked -> σ(scores + b), 0 where masked."""
        return torch.sigmoid(scores + self.offset)
