"""Sliding-window attention at the cost of its window, through transformers' public attention seam.

HF's `sdpa` attention runs a sliding-window layer (Gemma 2/3, per-layer `layer_types`) as SDPA over the whole
(T x T) rectangle with a boolean mask: at 16k tokens and a 512-token window that is 32x the useful work, and the
masked call cannot use SDPA's fused causal CPU kernel. `banded_attention` computes the same thing by blocks of
queries, each against only the keys its window can see, with SDPA on each block; full-attention layers go to SDPA
with `is_causal` as before. It is registered under NAME in `transformers.AttentionInterface` (the documented way to
add an attention function) and chosen per model by `use(model)`.

Scope: unpadded inputs (the harness scores and retrieves one sequence, never padded) whose queries are the last
q_len of the kv_len keys at positions 0..kv_len-1 (no cache, or a plain cache of the same sequence). The mask
transformers would build is not built: NAME has no mask function, so the model passes attention_mask=None.
"""
import torch
import torch.nn.functional as F

NAME = "harness_banded"
BLOCK = 1024  # queries per block: (BLOCK x (BLOCK + window)) scores per head, 1.5x the band's work at window 512


def _band_mask(q_pos, k_pos, window):
    """(q, k) bool: key j visible from query i, HF's sliding-window causal rule (masking_utils): i - window < j <= i;
    window None: causal only."""
    d = q_pos[:, None] - k_pos[None, :]
    return (d >= 0) & (d < window) if window else d >= 0


def banded_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                     **kwargs):
    """HF attention function: query (B, Hq, q, D), key/value (B, Hk, k, D) -> ((B, q, Hq, D), None)."""
    if attention_mask is not None:
        raise ValueError(f"{NAME} attention computes its own causal band; it takes no attention_mask (padded input)")
    if kwargs.get("softcap") is not None:
        raise ValueError(f"{NAME} attention has no logit soft-cap (Gemma 2's attn_logit_softcapping): use eager")
    groups = query.shape[1] // key.shape[1]
    if groups > 1:  # GQA: each key/value head serves `groups` query heads
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    q_len, k_len = query.shape[2], key.shape[2]
    window = sliding_window if sliding_window and sliding_window < k_len else None
    if window is None and q_len == k_len:  # plain causal: SDPA's fused kernel, lower triangle only
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling)
        return out.transpose(1, 2).contiguous(), None
    offset = k_len - q_len  # queries are the last q_len positions (a cache of the same sequence)
    outs = []
    for s in range(0, q_len, BLOCK):
        e = min(s + BLOCK, q_len)
        lo = max(0, offset + s - window + 1) if window else 0  # the first key any query of the block can see
        q_pos = torch.arange(offset + s, offset + e, device=query.device)
        k_pos = torch.arange(lo, offset + e, device=query.device)
        mask = _band_mask(q_pos, k_pos, window)
        outs.append(F.scaled_dot_product_attention(query[:, :, s:e], key[:, :, lo:offset + e],
                                                   value[:, :, lo:offset + e], attn_mask=mask, scale=scaling))
    return torch.cat(outs, 2).transpose(1, 2).contiguous(), None


def register():
    from transformers import AttentionInterface
    AttentionInterface.register(NAME, banded_attention)


def use(model):
    """Switch `model` to the banded attention when it has sliding-window layers and ran SDPA; returns the name of
    the attention implementation it runs (recorded in the rows)."""
    cfg = model.config
    sliding = "sliding_attention" in (getattr(cfg, "layer_types", None) or [])
    if sliding and cfg._attn_implementation == "sdpa" and not getattr(cfg, "attn_logit_softcapping", None):
        register()
        model.set_attn_implementation(NAME)
    return model.config._attn_implementation
