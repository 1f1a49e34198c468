"""FoX, the Forgetting Transformer (Lin et al., ICLR 2025, arXiv 2503.02130): softmax attention with a forget gate
and no other positional encoding. Each layer has its own gate; head h of token t forgets by

  f_t = σ(w_h · x_t + b_h),   bias_ij = Σ_{l=j+1}^{i} log f_l = c_i − c_j,   c_i = Σ_{l<=i} log f_l,

x_t the attention input (the block input after its LayerNorm), so the bias is a data-dependent ALiBi: a
per-head, per-token slope. As in the authors' code (zhixuan-lin/forgetting-transformer, src/forgetting_transformer/
model/forgetting_transformer/modeling_forgetting_transformer.py, fgate_type "full"): `fgate_proj` = nn.Linear
(d_model, n_heads) with a bias, initialized like their other linears (weight N(0, 0.02), bias 0), log f =
logsigmoid(logit.float()) in fp32, c = cumsum over the keys, bias = c[-Tq:, None] − c[None, :] (their
ops/forgetting_attention.py reference `decay_bias`). FoX-Pro's output gate, QK-norm and token shifts are not modelled.

The gates are the token_state (B, H, T) of the contract: the KV cache keeps them next to the keys (their
FgateDynamicCache does the same), so FoX decodes with the cache. No position is read: logits are unchanged when
every position shifts (`relative` records that), but they are not a function of i − j. The bias reads content
(`content_bias`), so there is no FlexAttention table; O(T²) memory like any materialized bias, no fused path."""
import torch
import torch.nn.functional as F
from torch import nn

from harness.encodings._layered import PerLayer


class Fox(PerLayer):
    """Layer 0's forget gate; the gates of layers 1 .. n_layers − 1 are the `deeper` members (at(layer))."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("no PE; a forget gate f_t = σ(w·x_t + b) per head and layer, bias Σ_{l=j+1}^{i} log f_l "
            "(a data-dependent ALiBi)",
            "bias from the block input",
            "Lin et al. 2025 (zhixuan-lin/forgetting-transformer)")

    relative = True  # shift-invariant: positions are never read
    content_bias = True

    def __init__(self, *, d_model, n_heads, n_layers=2):
        super().__init__()
        self.fgate = nn.Linear(d_model, n_heads)  # x_t (C,) -> one gate logit per head
        nn.init.normal_(self.fgate.weight, std=0.02)
        nn.init.zeros_(self.fgate.bias)
        self.own_layers(n_layers, lambda: Fox(d_model=d_model, n_heads=n_heads, n_layers=1))

    def token_state(self, x):
        """x (B, T, C) attention input -> log f (B, H, T), in fp32 or wider (fp16/bf16 logits upcast, as theirs)."""
        logit = self.fgate(x)
        return F.logsigmoid(logit.to(torch.promote_types(logit.dtype, torch.float32))).transpose(1, 2)

    def scores_bias(self, q, k, q_pos, k_pos, state):
        """state (B, H, Tk) log forget gates of every key -> bias (B, H, Tq, Tk), fp32; the queries are the last
        Tq keys. Above the diagonal the values are positive and masked by the caller."""
        if state is None or state.shape[-1] != k.shape[-2]:
            raise ValueError("fox's bias needs the log forget gates (token_state) of every key, "
                             f"got {None if state is None else tuple(state.shape)} for {k.shape[-2]} keys")
        c = state.cumsum(-1)  # (B, H, Tk): c_j = Σ_{l<=j} log f_l
        return c[..., -q.shape[-2]:, None] - c[..., None, :]
