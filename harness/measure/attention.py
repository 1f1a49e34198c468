"""Attention statistics of a trained softmax model: attention sinks and attention entropy, as rows.

Sinks (Gu et al., "When Attention Sink Emerges in Language Models: An Empirical View", ICLR 2025, arXiv
2410.10781, §3.2): the first-token importance alpha_1^{l,h} = (1/T) sum_{i=1..T} A^{l,h}_{i,1} of one probe
sequence of T = 64 tokens, A the causal softmax attention probabilities; the sink rate is the share of
(layer, head) pairs with alpha_1 > epsilon = 0.3. As the authors' code (sail-sg/Attention-Sink,
eval_sink_open_source.py, compute_attention_sink) the threshold is applied per probe sequence and the indicator
is averaged over sequences, layers and heads.
Entropy: -sum_j A_ij log A_ij (nats, 0 log 0 = 0), mean over batch, heads and query rows, per layer and length;
uniform causal attention gives log i at row i, so the mean grows like log T - 1 when attention stays flat.

Probabilities are the model's own forward with an observer (harness.attention.attend): each layer's weights
(B, H, T, T) are materialized, one layer at a time, and the block's output is computed from them (A @ v), so the
statistics are those of the weights the forward uses, an encoding's own normalizer included (sigmoid attention,
stick-breaking). A layer that runs FlexAttention or SDPA unobserved computes the same weights up to rounding
(tests/test_flex.py, tests/test_attention_stats.py).
Linear attention forms no probabilities: its rows are NaN with the reason, as is a length the encoding
cannot represent (its own ValueError, e.g. a learned table shorter than the length).
"""
import math

import torch

from harness.measure.extrapolation import _row

PROBE_LEN = 64  # Gu et al.'s probe length
SOFTMAX_ONLY = "attention statistics need attention=softmax (linear attention forms no attention probabilities)"


def check(model):
    """One line where the model has no materialized attention probabilities."""
    if any(b.attention != "softmax" for b in model.blocks):
        raise ValueError(SOFTMAX_ONLY)


@torch.no_grad()
def materialized_forward(model, idx, pos=None, visit=None):
    """The model's forward with its attention weights observed: logits (B, T, vocab) for idx (B, T) at
    positions pos (T,) (default 0..T-1); visit(layer, A) is called with each layer's A (B, H, T, T), fp32,
    rows summing to 1 (softmax; an encoding's own normalizer, e.g. sigmoid attention, need not) and 0 above the
    diagonal, before the next layer is computed (one layer in memory)."""
    check(model)
    return model(idx, pos, observer=None if visit is None else lambda seen: visit(seen.layer, seen.weights))


def probabilities(model, idx, pos=None):
    """[(B, H, T, T)] per layer: the causal softmax attention probabilities the model's forward uses, fp32."""
    out = []
    materialized_forward(model, idx, pos, visit=lambda layer, A: out.append(A))
    return out


def first_token_importance(A):
    """alpha_1 (B, H): mean over query rows i of A_{i,1}, the attention on the first key. A (B, H, T, T)."""
    return A[..., :, 0].mean(-1)


def sink_rate(alphas, eps=0.3):
    """Share of (sequence, layer, head) triples with alpha_1 > eps: Gu et al.'s Sink_1^eps averaged over
    probe sequences. alphas: [(B, H)] per layer, or one (L, B, H) tensor."""
    a = torch.stack(list(alphas)) if not torch.is_tensor(alphas) else alphas
    return float((a > eps).double().mean())


def entropy(A):
    """Mean over batch, heads and query rows of -sum_j A_ij log A_ij, in nats. A (B, H, T, T)."""
    return float(-torch.special.xlogy(A, A).sum(-1).double().mean())


def _per_layer_nan(metric, unit, L, protocol, reason, n_layers, **params):
    return [_row(metric, L, protocol, math.nan, unit, nan_reason=reason, layer=i, **params) for i in range(n_layers)]


def _nan_rows(L, probe, protocol, reason, n_layers, eps):
    """NaN rows of every metric measured at length L (the probe metrics only when L is the probe length)."""
    out = _per_layer_nan("attn_entropy", "nats", L, protocol, reason, n_layers)
    if L == probe:
        out.append(_row("sink_rate", L, protocol, math.nan, "frac", nan_reason=reason, eps=eps))
        out += _per_layer_nan("first_token_attn", "frac", L, protocol, reason, n_layers)
    return out


def length_rows(model, x, pos, *, probe, eps, protocol):
    """attn_entropy per layer at length L = x.shape[1], and at L == probe also sink_rate and first_token_attn
    per layer. x (B, L) tokens, pos (L,) or None."""
    L = x.shape[1]
    entropies, alphas = {}, {}

    def visit(layer, A):  # reduce each layer's (B, H, L, L) at once: only one layer is ever held
        entropies[layer] = entropy(A)
        if L == probe:
            alphas[layer] = first_token_importance(A)  # (B, H)

    materialized_forward(model, x, pos, visit)
    out = [_row("attn_entropy", L, protocol, e, "nats", layer=i) for i, e in sorted(entropies.items())]
    if L == probe:
        layers = [alphas[i] for i in sorted(alphas)]
        out.append(_row("sink_rate", L, protocol, sink_rate(layers, eps), "frac", eps=eps))
        out += [_row("first_token_attn", L, protocol, float(a.double().mean()), "frac", layer=i)
                for i, a in enumerate(layers)]
    return out


def rows(model, batches_by_len, *, probe_len=PROBE_LEN, eps=0.3, device, protocol="nonoverlapping"):
    """Every attention-statistics row of a trained model (module docstring); the model is left unchanged.

    batches_by_len: {eval_len: (x, pos)}, x (B, eval_len) token ids of held-out text (the caller's windows),
    pos (eval_len,) positions or None for 0..eval_len-1; it must hold probe_len (the sink probes).
    Rows: sink_rate (eval_len = probe_len, frac, params eps), first_token_attn (eval_len = probe_len, frac,
    params layer: mean over probes and heads of alpha_1), attn_entropy (every eval_len, nats, params layer)."""
    if probe_len not in batches_by_len:
        raise ValueError(f"attention rows need a batch at probe_len={probe_len} (the sink probes); "
                         f"got lengths {sorted(batches_by_len)}")
    n_layers = len(model.blocks)
    try:
        check(model)
    except ValueError as e:
        return [r for L in sorted(batches_by_len) for r in _nan_rows(L, probe_len, protocol, str(e), n_layers, eps)]
    was_training = model.training
    model.eval()
    out = []
    try:
        for L in sorted(batches_by_len):
            x, pos = batches_by_len[L]
            x, pos = x.to(device), (None if pos is None else pos.to(device))
            try:
                out += length_rows(model, x, pos, probe=probe_len, eps=eps, protocol=protocol)
            except ValueError as e:  # the encoding cannot represent length L (its own message)
                out += _nan_rows(L, probe_len, protocol, str(e), n_layers, eps)
    finally:
        model.train(was_training)
    return out
