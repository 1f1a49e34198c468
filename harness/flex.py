"""FlexAttention for a score bias that is a function of the distance i - j alone: one (H, T) table per call,
added inside the kernel, in place of the (H, T, T) mask that softmax_attention hands to SDPA.

torch.nn.attention.flex_attention (https://docs.pytorch.org/docs/2.13/nn.attention.flex_attention.html; the
PyTorch blog post "FlexAttention: The Flexibility of PyTorch with the Performance of FlashAttention",
https://pytorch.org/blog/flexattention/) calls score_mod(score, b, h, q_idx, kv_idx) on each score inside a
kernel that torch.compile generates, and visits only the blocks a BlockMask lists. Without torch.compile it
runs a reference implementation that forms the whole score matrix (the tests' oracle mode, no memory gain).

Which layers: an encoding whose bias is a function of positions (not `content_bias`, which reads q) and of
i - j alone (`relative`, `shift_unit` 1); nothing here names an encoding. Which calls: q_idx - kv_idx is an
index distance, equal to the position distance only when positions are arange(T) + offset, which every call
checks (randomized training positions take SDPA). torch 2.13 has no FlexAttention backward on CPU, so `auto`
takes it only on AUTO_DEVICES (none until the CUDA path is verified on a GPU) and an explicit `flex` on CPU runs
forwards without gradient (evaluation), training on SDPA. Imported by config (IMPLS, recorded) and model;
flex_attention at first use.
"""
import functools

import torch

from harness import encodings

IMPLS = ("auto", "sdpa", "flex")  # model.attention_impl
BACKWARD_DEVICES = ("cuda",)  # where FlexAttention has a backward (not CPU in torch 2.13): training steps may take it
# Where `auto` takes it: empty until the CUDA path is verified on a GPU (HARNESS_TEST_DEVICE=cuda pytest
# tests/test_flex.py); `flex` is opt-in meanwhile.
AUTO_DEVICES = ()
BLOCK = 128  # FlexAttention's default sparse block size


def unsupported(encoding):
    """Why one layer's encoding has no bias of i - j alone (SDPA then), or None when it has one."""
    if not encoding.has_bias:
        return "it adds no score bias"
    if encoding.replaces_softmax:
        return "it replaces softmax by its own normalizer (FlexAttention is a softmax kernel)"
    if encoding.content_bias:
        return "its bias reads q (content_bias), not positions alone"
    if not encoding.relative or encoding.shift_unit != 1:
        return "its bias is not a function of i - j alone (relative is False)"
    # has_bias says the class overrides bias(); a wrapper's may still return None (L2Normed around RoPE)
    device = next((t.device for t in (*encoding.parameters(), *encoding.buffers())), torch.device("cpu"))
    p = torch.zeros(1, dtype=torch.long, device=device)
    with torch.no_grad():
        if encoding.bias(torch.zeros(1, 1, 1, 1, device=device), p, p) is None:
            return "it adds no score bias"
    return None


def layer_plan(requested, encoding, n_layers):
    """[bool] per block: may it take FlexAttention? An explicit 'flex' that no block can take: ValueError."""
    if requested not in IMPLS:
        raise ValueError(f"unknown model.attention_impl {requested!r}; expected one of {list(IMPLS)}")
    reasons = [unsupported(encoding.at(i)) for i in range(n_layers)]
    if requested == "flex" and all(reasons):
        raise ValueError(f"model.attention_impl='flex' needs a score bias of i - j alone, but encoding "
                         f"{encoding.name!r} has none ({reasons[0]}); use one of ['auto', 'sdpa']")
    return [requested != "sdpa" and r is None for r in reasons]


def recorded(cfg):
    """{'attention_impl': 'flex'} when some block of run config `cfg` (harness.config.Config) takes FlexAttention
    on its device, else {}: rows carry the path only where it is not SDPA, so SDPA runs' rows are unchanged."""
    m = cfg.model
    if m.attention != "softmax" or m.attention_impl == "sdpa" or (
            m.attention_impl == "auto" and torch.device(cfg.device).type not in AUTO_DEVICES):
        return {}
    params = {k: v for k, v in cfg.encoding.items() if k != "name"}
    enc = encodings.build(cfg.encoding["name"], d_model=m.d_model, n_heads=m.n_heads, head_dim=m.head_dim, **params)
    return {"attention_impl": "flex"} if any(layer_plan(m.attention_impl, enc, m.n_layers)) else {}


def runs(requested, q, pos):
    """Whether this call takes FlexAttention: the device has the passes it needs (`auto`: forward and
    backward; `flex`: a forward without gradient at least) and pos (T,) is arange(T) + offset."""
    if requested == "auto" and q.device.type not in AUTO_DEVICES:
        return False
    if q.requires_grad and q.device.type not in BACKWARD_DEVICES:
        return False
    return bool((pos.diff() == 1).all())  # index distance = position distance


@functools.cache
def kernel(compiled=True, device_type="cpu"):
    """flex_attention compiled once per process and device type (10-30 s on CPU, again at each new length:
    torch 2.13's CPU template fails to build with dynamic shapes, "'cur_kvSplitSize8' was not declared"; past
    dynamo's recompile limit, 8 lengths, dynamo runs it uncompiled), or uncompiled: the reference, no gain."""
    from torch.nn.attention.flex_attention import flex_attention
    if not compiled:
        return flex_attention
    return torch.compile(flex_attention, dynamic=False if device_type == "cpu" else None)


def distance_table(q, encoding, pos):
    """(H, T) table[h, d] = bias at distance d, read from the encoding's own hook at key pos[0]."""
    H, T = q.shape[1], q.shape[-2]
    table = encoding.bias(q, pos, pos[:1])[..., 0]  # (H|1, T) or (1, H|1, T): bias[., i, 0] = f(pos[i] - pos[0])
    if table.dim() == 3 and table.shape[0] != 1:
        raise ValueError(f"{type(encoding).__name__}.bias is per batch element {tuple(table.shape)}: set its "
                         f"content_bias = True")
    return table.reshape(-1, T).to(q.dtype).expand(H, T).contiguous()  # in q's dtype, as softmax_attention adds it


def block_mask(keep):
    """Causal BlockMask that visits a (q, kv) block only if some pair in it has a distance d = q - kv with
    keep[d] (keep (T,) bool: a finite bias at d; a sliding window's -inf distances are skipped); the mask_mod
    applies keep to each pair. Built from offsets o = i - j of blocks: (T / BLOCK)^2 ints, never T^2."""
    from torch.nn.attention.flex_attention import BlockMask
    T, n = keep.shape[0], -(-keep.shape[0] // BLOCK)
    count = torch.nn.functional.pad(keep.cumsum(0), (1, 0))  # count[d] = keep[:d].sum()
    o = torch.arange(n, device=keep.device)
    lo, hi = (o * BLOCK - BLOCK + 1).clamp(0, T), (o * BLOCK + BLOCK).clamp(0, T)  # block o holds d in [lo, hi)
    visit = count[hi] > count[lo]  # (n,)
    off = o[:, None] - o[None, :]
    listed = (off >= 0) & visit[off.clamp(min=0)]  # (n, n): q block i, kv block j
    order = torch.argsort((~listed).to(torch.int8), dim=-1, stable=True)  # listed kv blocks first, ascending

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & keep[(q_idx - kv_idx).clamp(0, T - 1)]
    return BlockMask.from_kv_blocks(listed.sum(-1, dtype=torch.int32)[None, None], order.to(torch.int32)[None, None],
                                    BLOCK_SIZE=BLOCK, mask_mod=mask_mod, seq_lengths=(T, T))


def attention(q, k, v, encoding, pos, compiled=True):
    """Causal attention of q, k, v (B, H, T, D) with encoding's bias as a distance table: equal to
    softmax_attention(q, k, v, encoding.bias(q, pos, pos)) for pos = arange(T) + offset, in O(H T) memory
    when compiled."""
    T = q.shape[-2]
    table = distance_table(q, encoding, pos)  # (H, T)
    keep = torch.isfinite(table).any(0)  # (T,) distances some head sees

    def score_mod(score, b, h, q_idx, kv_idx):  # clamped: masked and padded pairs read a valid entry
        return score + table[h, (q_idx - kv_idx).clamp(0, T - 1)]
    return kernel(compiled, q.device.type)(q, k, v, score_mod=score_mod, block_mask=block_mask(keep))
