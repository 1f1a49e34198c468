"""Stick-breaking attention (Tan et al. 2024, arXiv 2410.17980): no positional encoding; softmax replaced by
breaking a stick from the query backwards, so recency comes from the normalizer itself.

For query i and an earlier key j, with z_ij = q_i·k_j/√D (+ bias, none here):

  A_ij = σ(z_ij) Π_{j<k<i} (1 − σ(z_ik)),

computed in log space as exp(logsigmoid(z_ij) + Σ_{j<k<i} logsigmoid(−z_ik)) with a reverse cumulative sum over
keys: the authors' reference `stickbreaking` (shawntan/stickbreaking-attention, stickbreaking_attention/sb_ref.py)
with its test's default `attend_current=False` (tests/test_attn.py, ref_fwd), where the query's own key is not
scored and the stick left over, 1 − Σ_j A_ij, goes to the query's own value (`o + rem * v`). Here that remainder
is the weight of the own key (key r + Tk − Tq of query row r), so attention is weights @ v as for any
normalizer. O(T²) in memory like the reference; no fused kernel here. Weights depend on the order of the
visible keys only: relative."""
import torch
import torch.nn.functional as F

from harness.encodings._base import Encoding


class StickBreaking(Encoding):
    """No embedding, rotation or bias; the stick-breaking normalizer."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("no PE; weights σ(z_ij)·Π_{j<k<i}(1 − σ(z_ik)), the rest of the stick on the own token",
            "normalizer",
            "Tan et al. 2024 (shawntan/stickbreaking-attention)")

    relative = True

    def normalize(self, scores):
        """scores (B, H, Tq, Tk), -inf where masked -> stick-breaking weights in fp32, each row summing to 1.
        The own key of query row r is key r + Tk - Tq (the diagonal of a full forward, the newest keys when
        decoding with a cache). Masked keys need no mask of their own: log(1 - σ(-inf)) = 0 leaves the product
        alone and σ(-inf) = 0 scores them 0. One transcendental per element besides the final exp:
        log(1 - σ(z)) = -softplus(z) and log σ(z) = z + log(1 - σ(z))."""
        z = scores.float()
        tq, tk = z.shape[-2:]
        log_beta = F.softplus(z).neg_()  # (B, H, Tq, Tk) log(1 - σ(z_ik)); 0 at masked keys
        log_beta.diagonal(tk - tq, -2, -1).zero_()  # the own key is not in any product
        after = log_beta.flip(-1).cumsum(-1).flip(-1).sub_(log_beta)  # Σ_{k>j} log(1 - σ(z_ik))
        log_z = log_beta.add_(z)  # log σ(z_ij), -inf at masked keys (log_beta's storage, no longer needed)
        log_z.diagonal(tk - tq, -2, -1).fill_(float("-inf"))  # the own key gets the rest of the stick below
        att = log_z.add_(after).exp_()  # exp_ keeps its output for the backward: the diagonal is set out of place
        return torch.diagonal_scatter(att, 1.0 - att.sum(-1), tk - tq, -2, -1)
