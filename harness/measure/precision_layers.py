"""Kernel-level precision of the per-layer policies' members that act through `rotate` (DESIGN.md §2: a
RoPE layer of irope or local_global with its wrappers, a sliding-window RoPE layer, a NoPE layer's query
temperature), in bf16/fp16 against the same member in fp64, as tidy rows.

The RoPE pipelines (harness.measure.precision) cover rope at one base; a policy's rotary layers differ in
base (local_global's global layers: 1e6), layout (irope: interleaved) and what wraps them (L2 QK-norm after
the rotation), so each member is measured through its own hook: no policy is named here, a new one is
covered by registering it. Rows are named `name:layer` (flex_bench's spelling); the report's safe-length
table lists them beside the bias encodings."""
import copy
import math

import torch

from harness.attention import rotate
from harness.names import PRECISION_PROTOCOLS as PROTOCOLS
from harness.encodings import ENCODINGS, build
from harness.encodings._base import Encoding
from harness.measure.precision_bias import in_low_precision
from harness.measure.precision_pipelines import DTYPES, MAX_LEN, sample_positions, window_rows, windows

HEAD_DIM = 128  # the RoPE pipelines' head_dim, so a member's rows read against theirs


def _policy(name, head_dim=HEAD_DIM):
    return build(name, d_model=head_dim, n_heads=1, head_dim=head_dim)


def members(head_dim=HEAD_DIM):
    """`name:layer` of every layer of a registered per-layer policy (period > 1) whose member overrides
    rotate, in registry order."""
    out = []
    for name in ENCODINGS:
        enc = _policy(name, head_dim)
        if enc.period > 1:
            out += [f"{name}:{i}" for i in range(enc.period) if type(enc.at(i)).rotate is not Encoding.rotate]
    return tuple(out)


def _logits(enc, q, k, pos):
    """(P, N) fp64 logits q.k / sqrt(D) of each pair's q at every position in pos against its k at pos[0];
    q, k (1, P, N, D): the P pairs ride as heads (a member acts on every head alike)."""
    rq, rk = rotate(enc, q, k, pos)
    enc.end_forward()  # a table built for these positions must not serve the next call
    return (rq[0].double() * rk[0, :, :1].double()).sum(-1) / math.sqrt(q.shape[-1])


@torch.no_grad()
def member_rows(specs=None, *, dtypes=("bf16", "fp16"), protocols=PROTOCOLS, head_dim=HEAD_DIM, max_len=MAX_LEN,
                per_window=512, n_pairs=2, seed=0):
    """logit_err: max over n_pairs seeded unit-variance (q, k) of |logit - fp64 logit| for k at position 0
    and q at distance d, per window of d (d sampled as the pipelines' logit_err: seeded random beyond
    per_window). The fp64 logit is the member deep-copied to float64 with the same inputs, so only the
    member's own arithmetic in the dtype is measured. specs: `name:layer`s, default members()."""
    out, edges = [], windows(max_len)
    pos = sample_positions(edges, per_window, seed)  # (N,) sorted, pos[0] = 0 holds k
    gen = torch.Generator().manual_seed(seed)
    qk = torch.randn(2, 1, n_pairs, 1, head_dim, generator=gen).expand(-1, -1, -1, len(pos), -1)  # same per pos
    for spec in members(head_dim) if specs is None else specs:
        name, _, layer = spec.partition(":")
        torch.manual_seed(seed)  # learned parameters of a member, if any, are seeded
        enc = _policy(name, head_dim).eval().at(int(layer or 0))
        ref = copy.deepcopy(enc).double()
        for dt in dtypes:
            q, k = qk.to(DTYPES[dt])  # (1, P, N, D) each, entering in the activations' dtype
            truth = _logits(ref, q.double(), k.double(), pos)
            for proto in protocols:
                got = in_low_precision(enc, proto, dt, lambda m: _logits(m, q, k, pos))
                err = (got - truth).abs().amax(0)  # (N,)
                ids = dict(encoding=spec, protocol=proto, dtype=dt, head_dim=head_dim)
                out += window_rows(err, edges, "logit_err", "logit", at=pos, **ids)
    return out
