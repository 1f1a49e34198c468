"""CoPE, Contextual Position Encoding (Golovneva et al. 2024, arXiv 2405.18719): positions counted by content.

For query i and key j (j <= i), with D the head dim:

  g_ik = σ(q_i·k_k / √D),  p_ij = Σ_{k=j}^{i} g_ik  (a reverse cumulative sum over keys, clamped to npos − 1),
  bias_ij = [(1 − w) q_i·e[⌊p_ij⌋] + w q_i·e[⌈p_ij⌉]] / √D,  w = p_ij − ⌊p_ij⌋,

e the learned position embeddings (D, npos), zero at initialization: the authors' ContextPosSelfAttn.forward
(facebookresearch/RAM, projects/cope/src/cope/context_position.py) with its defaults: gates from the attention
keys (no --cope-sep-key, no --cope-val-gates), logits (q·k + pos) / √D (no --cope-nodiv), npos = block size + 1
(`train_len` + 1 here; `npos` overrides). One embedding table for every head and layer, as their --cope-shared
(their default gives each layer its own table).

Not a function of i − j (p_ij counts what the gates select, e.g. sentences or a given token), and no absolute
position enters: logits do not change when every position shifts, which is what `relative` records here. The
bias reads q and k (content_bias; `scores_bias`), so it has no FlexAttention table; it decodes with the KV cache
(a new query's row needs only the cached keys). O(T²) memory, no fused path."""
import math

import torch
from torch import nn

from harness.encodings._base import Encoding
from harness.encodings._params import count


class CoPE(Encoding):
    """Gates σ(q·k/√D), counted backwards from the query; the count interpolates learned position logits."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("contextual positions: gates σ(q·k/√D) counted back from the query, the count "
            "interpolating learned position logits (`npos` = `train_len` + 1, one table for all heads"
            " and layers)",
            "bias reading q and k",
            "Golovneva et al. 2024 (facebookresearch/RAM, projects/cope)")

    RANGES = {"npos": count(2, null="train_len + 1")}

    relative = True  # shift-invariant (content and order only); not a function of i - j
    content_bias = True

    def __init__(self, *, head_dim, train_len=64, npos=None):
        super().__init__()
        npos = int(train_len) + 1 if npos is None else npos
        if isinstance(npos, bool) or not isinstance(npos, int) or npos < 2:
            raise ValueError(f"cope npos must be an integer >= 2 (positions 0 .. npos - 1), got {npos!r}")
        self.npos = npos
        self.pos_emb = nn.Parameter(torch.zeros(head_dim, npos))  # e: zeros, as the authors initialize it

    def scores_bias(self, q, k, q_pos, k_pos, state):
        """q (B, H, Tq, D), k (B, H, Tk, D) -> (B, H, Tq, Tk); keys after a query (by position) get no gate.
        state: None (no token_state).
        In place where autograd allows, since every step is a full (B, H, Tq, Tk) pass."""
        scale = math.sqrt(q.shape[-1])
        hidden = k_pos[None, :] > q_pos[:, None]  # (Tq, Tk)
        gates = (q @ k.transpose(-1, -2)).div_(scale).masked_fill_(hidden, float("-inf")).sigmoid_()
        p = gates.flip(-1).cumsum(-1).flip(-1).clamp_(max=self.npos - 1)  # p_ij = Σ_{k >= j} g_ik
        fixed = (q @ self.pos_emb.to(q.dtype)).div_(scale)  # (B, H, Tq, npos): q_i·e[n] / √D
        lo = p.detach().floor()
        idx = lo.long()
        at_lo = fixed.gather(-1, idx)
        at_hi = fixed.gather(-1, (idx + 1).clamp_(max=self.npos - 1))  # ⌈p⌉ where p is not whole; w = 0 else
        return torch.addcmul(at_lo, at_hi - at_lo, p - lo)  # (1 - w) at_lo + w at_hi, w = p - ⌊p⌋
