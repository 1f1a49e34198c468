"""Stick-breaking attention (Tan et al. 2024, arXiv 2410.17980): no positional encoding; softmax replaced by
breaking a stick from the query backwards, so recency comes from the normalizer itself.

For query i and an earlier key j, with z_ij = q_i·k_j/√D (+ bias, none here):

  A_ij = σ(z_ij) Π_{j<k<i} (1 − σ(z_ik)),

computed in log space as exp(logsigmoid(z_ij) + Σ_{j<k<i} logsigmoid(−z_ik)) with a reverse cumulative sum over
keys: the authors' reference `stickbreaking` (shawntan/stickbreaking-attention, stickbreaking_attention/sb_ref.py)
with its test's default `attend_current=False` (tests/test_attn.py, ref_fwd), where the query's own key is not
scored and the stick left over, 1 − Σ_j A_ij, goes to the query's own value (`o + rem * v`). Here that remainder
is the weight of the own key (the last visible key of the row), so attention is weights @ v as for any
normalizer. O(T²) in memory like the reference; no fused kernel here. Weights depend on the order of the
visible keys only: relative."""
import torch
import torch.nn.functional as F

from harness.encodings._base import Encoding


class StickBreaking(Encoding):
    """No embedding, rotation or bias; the stick-breaking normalizer."""

    relative = True

    def normalize(self, scores):
        """scores (B, H, Tq, Tk), -inf where masked -> stick-breaking weights in fp32, each row summing to 1."""
        z = scores.float()
        col = torch.arange(z.shape[-1], device=z.device)
        visible = z > float("-inf")
        own = torch.where(visible, col, -1).amax(-1, keepdim=True)  # (B, H, Tq, 1): the query's own key
        past = visible & (col < own)
        log_z = F.logsigmoid(z).masked_fill(~past, float("-inf"))
        log_beta = F.logsigmoid(-z).masked_fill(~past, 0.0)
        after = log_beta.flip(-1).cumsum(-1).flip(-1) - log_beta  # Σ_{k>j} log(1 − σ(z_ik)), keys k < own only
        att = torch.exp(log_z + after)
        rest = 1.0 - att.sum(-1, keepdim=True)
        return att + rest * (col == own)
