"""Model-level precision study: a trained model evaluated in bf16/fp16 against fp32, as rows.

Two ways to run a model in low precision, one `protocol` each (as precision_bias.py): `autocast` (the fp32
model under torch.autocast) and `cast` (a copy cast with model.to(dtype)). The `dtype` column is the low
precision dtype; `fp32` (protocol `cast`, a copy that stays fp32) is the baseline and must give 0 gaps.
The same inputs (task.eval_batch: lm windows of the eval split, or a seeded synthetic test set) feed
every variant, so a difference is the precision's alone.

Metrics (eval_len is the metric's x-axis):
- ppl_gap (eval_len = window length L): PPL(low) - PPL(fp32) over the same nonoverlapping windows.
- kl_fp32 (eval_len = end of a log window [0, 16), [16, 32), ... of token positions; params seq_len = L):
  mean over the window's tokens of KL(p_fp32 || p_low) of the next-token distributions, in nats.
- anchor_d (eval_len = shift D1): AnchorAttention (Wang et al. 2024, arXiv 2411.13476, Eq. 4) as we read it:
  the same window (length train_len) fed at positions p + D1 and at p + D2 (D2 = anchor_shift = 16);
  D = mean over layers, heads and causal pairs (i, j <= i) of |A_ij(D1) - A_ij(D2)|, A the attention weights
  the model uses (softmax, or an encoding's own normalizer). A relative encoding has D = 0 in exact arithmetic, so D measures the broken relative
  property; absolute encodings (learned, sinusoidal) are not shift invariant even in fp32 (see the fp32 rows).
- anchor_d_logit (eval_len = sequence length T; Eq. 5 as we read it): the same mean |.| on the
  pre-softmax attention logits S = q.k / sqrt(D) + bias, positions p + 0 against p + D2, vs T.
Scores and weights are the model's own, observed in its forward (harness.attention.attend with an observer):
scores in the activations' dtype as the model computes them, weights in fp32 (softmax) or the encoding's own.
A length or shift the encoding cannot represent (its own ValueError) gives NaN rows with the reason.
"""
import contextlib
import copy
import math

import torch

from harness.names import LOW_DTYPES
from harness.names import PRECISION_PROTOCOLS as PROTOCOLS
from harness.attention import causal_mask
from harness.measure.precision_pipelines import DTYPES, windows as log_windows

PARAM_KEYS = ("seq_len", "shift", "anchor_shift")  # measurement knobs in params (not the encoding's)


def _row(metric, value, unit, *, eval_len, protocol, dtype, **params):
    return dict(metric=metric, eval_len=int(eval_len), protocol=protocol, dtype=dtype, value=float(value),
                unit=unit, extra_params=params)


def variants(model, dtypes, protocols):
    """(protocol, dtype, model, context factory) per low-precision evaluation; fp32 once, as a `cast` copy."""
    for dt in dtypes:
        if dt not in LOW_DTYPES:
            raise ValueError(f"unknown precision dtype {dt!r}; expected one of {list(LOW_DTYPES)}")
    for p in protocols:
        if p not in PROTOCOLS:
            raise ValueError(f"unknown precision protocol {p!r}; expected one of {list(PROTOCOLS)}")
    device = next(model.parameters()).device.type
    out = []
    for dt in dtypes:
        for p in (protocols if dt != "fp32" else ("cast",)):  # fp32 autocast would be a no-op
            if p == "cast":
                out.append((p, dt, copy.deepcopy(model).to(DTYPES[dt]), contextlib.nullcontext))
            else:
                out.append((p, dt, model, lambda dt=dt: torch.autocast(device, dtype=DTYPES[dt])))
    return out


@torch.no_grad()
def _logprobs(model, ctx, x, pos=None):
    """Next-token log-probabilities (B, T, V) in fp32."""
    with ctx():
        logits = model(x, pos)
    return logits.float().log_softmax(-1)


def _batch(task, L, max_tokens, device):
    """The task's evaluation inputs at length L: x, y, mask (n, L) and positions (L,)."""
    x, y, mask, pos = task.eval_batch(L, max_tokens)
    pos = torch.arange(L) if pos is None else pos
    return x.to(device), y.to(device), mask.to(device), pos.to(device)


def _nan(metrics, eval_len, variants_, reason, **params):
    return [_row(m, math.nan, u, eval_len=eval_len, protocol=p, dtype=dt, nan_reason=reason, **params)
            for m, u in metrics for p, dt, _, _ in variants_]


def gap_rows(model, task, lens, variants_, *, max_tokens, device):
    """ppl_gap per length and kl_fp32 per log window of positions, for each (protocol, dtype) variant."""
    rows = []
    for L in lens:
        x, y, mask, pos = _batch(task, L, max_tokens, device)
        try:
            ref = _logprobs(model, contextlib.nullcontext, x, pos)  # (n, L, V) fp32
        except ValueError as e:  # the encoding cannot represent length L
            rows += _nan([("ppl_gap", "ppl"), ("kl_fp32", "nats")], L, variants_, str(e), seq_len=L)
            continue
        m = mask.double()
        count = m.sum(0).clamp(min=1)  # (L,) scored tokens per position
        ref_nll = -ref.gather(-1, y[..., None])[..., 0].double()  # (n, L)
        ppl_ref = math.exp(float((ref_nll * m).sum() / m.sum()))
        for protocol, dt, net, ctx in variants_:
            low = _logprobs(net, ctx, x, pos)
            nll = -low.gather(-1, y[..., None])[..., 0].double()
            gap = math.exp(float((nll * m).sum() / m.sum())) - ppl_ref
            rows.append(_row("ppl_gap", gap, "ppl", eval_len=L, protocol=protocol, dtype=dt))
            kl = (ref.exp() * (ref - low)).sum(-1).double()  # (n, L) KL(p_fp32 || p_low) per token
            per_pos = (kl * m).sum(0) / count  # (L,)
            edges = log_windows(L)
            for lo, hi in zip(edges[:-1], edges[1:]):
                w = m[:, lo:hi].sum(0)  # scored tokens per position of the window
                if not w.sum():  # a synthetic task scores only its answer positions
                    continue
                value = float((per_pos[lo:hi] * w).sum() / w.sum())
                rows.append(_row("kl_fp32", value, "nats", eval_len=hi, protocol=protocol, dtype=dt, seq_len=L))
    return rows


def _attention(model, ctx, x, pos):
    """Per layer, the scores (B, H, T, T) attend forms (-inf above the diagonal) and the weights the forward then
    uses (an encoding's own normalizer included), both fp32: the model's forward, observed."""
    scores, weights = [], []

    def observe(seen):
        scores.append(seen.scores.float())
        weights.append(seen.weights)
    with torch.no_grad(), ctx():
        model(x, pos, observer=observe)
    return scores, weights


def _mean_abs(a, b, causal):
    """Mean over layers, batch, heads and causal pairs of |a - b|."""
    return float(torch.stack([(u - v).abs()[..., causal].mean() for u, v in zip(a, b)]).mean())


def anchor_rows(model, task, train_len, lens, variants_, *, shifts, anchor_shift, n_windows, device):
    """anchor_d vs shift D1 at the train length, and anchor_d_logit vs sequence length (module docstring)."""
    rows = []
    for metric, unit, grid in (("anchor_d", "prob", shifts), ("anchor_d_logit", "logit", lens)):
        T_fixed = train_len if metric == "anchor_d" else None
        for protocol, dt, net, ctx in variants_:
            anchored = {}  # T -> scores at the anchor shift: the same for every D1 shift of the grid
            for g in grid:
                T, shift = (T_fixed, g) if metric == "anchor_d" else (g, 0)
                x, _, _, pos = _batch(task, T, n_windows * T, device)
                causal = causal_mask(T, device=device)
                ids = dict(eval_len=g, protocol=protocol, dtype=dt, anchor_shift=anchor_shift, seq_len=T,
                           shift=shift)
                try:
                    if T not in anchored:
                        anchored[T] = _attention(net, ctx, x, pos + anchor_shift)
                    got = _attention(net, ctx, x, pos + shift)
                except ValueError as e:
                    rows.append(_row(metric, math.nan, unit, nan_reason=str(e), **ids))
                    continue
                which = 1 if metric == "anchor_d" else 0  # the weights the model uses, or its scores
                s1, s2 = got[which], anchored[T][which]
                value = _mean_abs(s1, s2, causal)
                reason = {} if math.isfinite(value) else {"nan_reason": f"non-finite attention logits in {dt}"}
                rows.append(_row(metric, value if not reason else math.nan, unit, **ids, **reason))
    return rows


def rows(model, task, *, train_len, lens, dtypes=("bf16", "fp16"), protocols=PROTOCOLS,
         max_tokens=512, shifts=(0, 64, 256, 1000, 2000), anchor_shift=16, n_windows=1, baseline=True):
    """Every model-level precision row for a trained model (module docstring); model stays unchanged.
    baseline adds the fp32 rows (a `cast` copy in fp32: zero gaps, and absolute encodings' own D)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        vs = variants(model, (("fp32",) if baseline else ()) + tuple(dtypes), protocols)
        out = gap_rows(model, task, lens, vs, max_tokens=max_tokens, device=device)
        out += anchor_rows(model, task, train_len, lens, vs, shifts=shifts, anchor_shift=anchor_shift,
                           n_windows=n_windows, device=device)
    finally:
        model.train(was_training)
    return out
