"""KV-cache decoding: a prefill, then tokens one (or a few) at a time, each attending to the cached keys and values
instead of rerunning the prefix. The encoding's hooks are called exactly as in a full forward but with the new
positions only: `embed(x, pos)`, `rotate(q, k, pos)` and `token_state(x)` on the new tokens, `scores_bias(q, k, pos,
cached_pos, state)` for the new queries against every cached key and its state. Whatever an encoding computes from
absolute positions must therefore not depend on how many positions one call holds; `tests/test_decode.py` checks,
for every registered encoding, that decoding gives the logits of one full forward (the x-transformers bugs #242 and
#70 were ALiBi and absolute PEs wrong with cached memories). Softmax attention only (an encoding's own normalizer,
`normalize`, included); the SDPA path (no FlexAttention). The attention over the cache is the model's own
(Transformer.forward with a cache, harness.attention.attend): nothing here forms attention."""
import torch

from harness.attention import KVCache
from harness.model import Transformer

__all__ = ["KVCache", "check", "generate", "greedy", "refusal", "rerun", "step"]


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


@torch.no_grad()
def step(model: Transformer, idx, cache: KVCache, pos=None):
    """idx (B, T) new tokens at positions pos (T,) (default: right after the cache) -> logits (B, T, vocab);
    the model's own forward, attending over the cache and extending it (harness.attention.attend)."""
    check(model)
    return model(idx, pos, cache=cache)


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
