"""KV-cache decoding speed and cache size vs context length (harness.decode), as rows.

For each context length L: a prefill of L random bytes into a KVCache (one decode.step), then `new_tokens`
one-token steps against it. Inputs are random bytes: the cost does not depend on the content, and feeding
pre-drawn tokens keeps an argmax out of the timed loop.
- decode_tokens_per_s (eval_len = L, tokens/s): batch_size * new_tokens / the seconds of the new_tokens steps,
  the median over `repeats` after `warmup` runs (harness.measure.timing: a throughput row takes the median, a typical
  run). Every repeat decodes from the same prefilled cache: a step concatenates into new tensors (decode._block)
  and never writes the old ones, so the reset to the prefill's tensors that opens each timed call is a pointer
  assignment, no copy.
- kv_cache_bytes (eval_len = L, bytes): the bytes of every cached k and v after the prefill of L tokens,
  2 * n_layers * B * H * L * head_dim * element_size for this model (the closed form is tested).
Params: batch_size, new_tokens, path = kv_cache (the cache path, against eval_tokens_per_s's full forward).
A model that cannot decode with a cache (decode.check: linear attention, xPos) gives NaN rows carrying that
reason at every length; a length the encoding cannot represent (its own ValueError, e.g. a learned table
shorter than L + new_tokens) likewise, keeping kv_cache_bytes when only the steps beyond the prefill fail.
"""
import math

import torch

from harness import decode
from harness.measure import timing
from harness.measure.extrapolation import _row

PROTOCOL = "decode"
METRICS = (("decode_tokens_per_s", "tokens/s"), ("kv_cache_bytes", "bytes"))


def cache_bytes(cache):
    """Bytes of every cached k and v tensor (B, H, Tc, D) over the layers."""
    return sum(t.numel() * t.element_size() for t in cache.k + cache.v if t is not None)


def prefill(model, L, batch_size, device, seed=0):
    """A KVCache holding L random bytes (batch_size, L), filled by one decode.step."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (batch_size, L), generator=g).to(device)
    cache = decode.KVCache(len(model.blocks))
    decode.step(model, x, cache)
    return cache


def decode_tokens_per_s(model, cache, *, new_tokens, repeats, warmup, device, seed=1):
    """Tokens/s of new_tokens one-token steps from the prefilled cache (median over repeats); cache unchanged."""
    B = cache.k[0].shape[0]
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 256, (B, new_tokens), generator=g).to(device)  # (B, new_tokens)
    k0, v0, pos0 = list(cache.k), list(cache.v), cache.pos

    def run():
        cache.k, cache.v, cache.pos = list(k0), list(v0), pos0  # back to the prefill: no copy
        for t in range(new_tokens):
            decode.step(model, tokens[:, t:t + 1], cache)

    try:
        sec = timing.median(timing.seconds_per_call(run, repeats=repeats, warmup=warmup, device=device))
    finally:
        cache.k, cache.v, cache.pos = k0, v0, pos0
    return B * new_tokens / sec


def _nan(metrics, L, reason, params):
    return [_row(m, L, PROTOCOL, math.nan, u, nan_reason=reason, **params) for m, u in metrics]


def length_rows(model, L, *, new_tokens, batch_size, repeats, warmup, device):
    """Both rows at context length L; a ValueError of the encoding gives NaN rows with its message."""
    params = dict(batch_size=batch_size, new_tokens=new_tokens, path="kv_cache")
    try:
        cache = prefill(model, L, batch_size, device)
    except ValueError as e:  # the encoding cannot represent L positions
        return _nan(METRICS, L, str(e), params)
    out = [_row("kv_cache_bytes", L, PROTOCOL, cache_bytes(cache), "bytes", **params)]
    try:
        tps = decode_tokens_per_s(model, cache, new_tokens=new_tokens, repeats=repeats, warmup=warmup, device=device)
    except ValueError as e:  # positions L .. L + new_tokens - 1 are beyond what it represents
        return _nan(METRICS[:1], L, str(e), params) + out
    return [_row("decode_tokens_per_s", L, PROTOCOL, tps, "tokens/s", **params)] + out


def rows(model, context_lens, *, new_tokens, batch_size=1, repeats, warmup, device):
    """decode_tokens_per_s and kv_cache_bytes at every context length (module docstring); model unchanged."""
    try:
        decode.check(model)
    except ValueError as e:
        params = dict(batch_size=batch_size, new_tokens=new_tokens, path="kv_cache")
        return [r for L in sorted(context_lens) for r in _nan(METRICS, L, str(e), params)]
    was_training = model.training
    model.eval()
    try:
        return [r for L in sorted(context_lens)
                for r in length_rows(model, L, new_tokens=new_tokens, batch_size=batch_size, repeats=repeats,
                                     warmup=warmup, device=device)]
    finally:
        model.train(was_training)
