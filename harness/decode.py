"""KV-cache decoding: a prefill, then tokens one (or a few) at a time, each attending to the cached keys and values
instead of rerunning the prefix. The encoding's hooks are called exactly as in a full forward but with the new
positions only: `embed(x, pos)`, `rotate(q, k, pos)` and `token_state(x)` on the new tokens, `scores_bias(q, k, pos,
cached_pos, state)` for the new queries against every cached key and its state. Whatever an encoding computes from
absolute positions must therefore not depend on how many positions one call holds; `tests/test_decode.py` checks,
for every registered encoding, that decoding gives the logits of one full forward (the x-transformers bugs #242 and
#70 were ALiBi and absolute PEs wrong with cached memories). Softmax attention only (an encoding's own normalizer,
`normalize`, included); the SDPA path (no FlexAttention)."""
import math

import torch
import torch.nn.functional as F

from harness.model import Transformer


class KVCache:
    """Per block: keys and values (B, H, Tc, D) after the encoding (rotated, QK-normed), the encoding's token_state
    (B, H, Tc) or None, and their positions (Tc,)."""

    def __init__(self, n_layers):
        self.k, self.v, self.state, self.pos = [None] * n_layers, [None] * n_layers, [None] * n_layers, None

    def __len__(self):
        return 0 if self.pos is None else int(self.pos.numel())


def refusal(model: Transformer):
    """None where the model can decode with a cache, else the one-line reason it cannot."""
    if any(b.attention != "softmax" for b in model.blocks):
        return "KV-cache decoding needs attention=softmax (linear attention keeps a running sum instead)"
    enc = model.encoding
    if not all(enc.at(i).cacheable for i in range(enc.period)):
        return (f"encoding {enc.name!r} cannot decode with a KV cache (its keys depend on the call they were made "
                f"in; see its docstring): rerun the prefix instead")
    return None


def check(model: Transformer):
    """One line, before any work, where the model cannot decode with a cache."""
    reason = refusal(model)
    if reason:
        raise ValueError(reason)


def _block(block, x, encoding, pos, keys_pos, cache, i):
    """One block on the new tokens x (B, T, C) at positions pos (T,); appends their k, v to cache layer i."""
    B = x.shape[0]
    enc, q, k, v, state = block.rotated(x, encoding, pos)  # (B, H, T, D) each, at the new positions only
    if cache.k[i] is not None:
        k, v = torch.cat((cache.k[i], k), 2), torch.cat((cache.v[i], v), 2)
        state = None if state is None else torch.cat((cache.state[i], state), -1)  # (B, H, Tc)
    cache.k[i], cache.v[i], cache.state[i] = k, v, state
    visible = keys_pos[None, :] <= pos[:, None]  # (T, Tc): causal by position, not by index
    bias = enc.scores_bias(q, k, pos, keys_pos, state)  # (H|B,H, T, Tc) or None
    mask = torch.zeros(visible.shape, dtype=q.dtype, device=q.device) if bias is None else bias.to(q.dtype)
    mask = mask.masked_fill(~visible, float("-inf"))
    if enc.replaces_softmax:  # the new queries' rows over every cached key; their own keys are the last T
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
        return block.out(x, enc.normalize(scores).to(v.dtype) @ v)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.expand(B, *mask.shape[-3:]) if mask.dim() >= 3
                                       else mask)
    return block.out(x, y)


@torch.no_grad()
def step(model: Transformer, idx, cache: KVCache, pos=None):
    """idx (B, T) new tokens at positions pos (T,) (default: right after the cache) -> logits (B, T, vocab)."""
    check(model)
    if pos is None:
        pos = torch.arange(len(cache), len(cache) + idx.shape[1], device=idx.device)
    keys_pos = pos if cache.pos is None else torch.cat((cache.pos, pos))
    enc = model.encoding
    try:
        x = enc.embed(model.tok(idx), pos)
        for i, block in enumerate(model.blocks):
            x = _block(block, x, enc, pos, keys_pos, cache, i)
    finally:
        enc.end_forward()
    cache.pos = keys_pos
    return model.head(model.ln_f(x))


@torch.no_grad()
def generate(model: Transformer, prompt, n_new, pos=None):
    """Greedy continuation of prompt (B, T0) by n_new tokens with one prefill and n_new - 1 one-token steps.
    pos: (T0 + n_new - 1,) positions of the prompt and the fed-back tokens (default 0, 1, ...)."""
    cache = KVCache(len(model.blocks))
    T0 = prompt.shape[1]
    logits = step(model, prompt, cache, None if pos is None else pos[:T0])
    out = [logits[:, -1:].argmax(-1)]
    for i in range(n_new - 1):
        out.append(step(model, out[-1], cache, None if pos is None else pos[T0 + i:T0 + i + 1])[:, -1:].argmax(-1))
    return torch.cat(out, 1)


@torch.no_grad()
def rerun(model: Transformer, prompt, n_new, pos=None):
    """The same greedy tokens without a cache: the whole prefix is run again for every new token."""
    seq = prompt
    for _ in range(n_new):
        p = None if pos is None else pos[:seq.shape[1]]
        seq = torch.cat((seq, model(seq, p)[:, -1:].argmax(-1)), 1)
    return seq[:, prompt.shape[1]:]


def greedy(model: Transformer, prompt, n_new, pos=None):
    """(tokens (B, n_new), path): decoded with the KV cache (path 'kv_cache') where the model can, else by
    rerunning the prefix ('rerun': the same tokens, slower). Callers record the path with their rows."""
    if refusal(model):
        return rerun(model, prompt, n_new, pos), "rerun"
    return generate(model, prompt, n_new, pos), "kv_cache"
