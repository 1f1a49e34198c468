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
forwards without gradient (evaluation), training on SDPA. This module is the kernel side only (no encoding
hook is called here): harness.attention plans which blocks take it, reads the encoding's distance table and
calls `attention`; flex_attention is imported at first use.
"""
import functools

import torch


IMPLS = ("auto", "sdpa", "flex")  # model.attention_impl
BACKWARD_DEVICES = ("cuda",)  # where FlexAttention has a backward (not CPU in torch 2.13): training steps may take it
# Where `auto` takes it: empty until the CUDA path is verified on a GPU (HARNESS_TEST_DEVICE=cuda pytest
# tests/test_flex.py); `flex` is opt-in meanwhile.
AUTO_DEVICES = ()
BLOCK = 128  # FlexAttention's default sparse block size








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


def attention(q, k, v, table, compiled=True):
    """Causal attention of q, k, v (B, H, T, D) with a score bias of the distance alone, table (H, T): table[h, d]
    is added to every score of head h at i - j = d; O(H T) memory when compiled."""
    T = q.shape[-2]
    keep = torch.isfinite(table).any(0)  # (T,) distances some head sees

    def score_mod(score, b, h, q_idx, kv_idx):  # clamped: masked and padded pairs read a valid entry
        return score + table[h, (q_idx - kv_idx).clamp(0, T - 1)]
    return kernel(compiled, q.device.type)(q, k, v, score_mod=score_mod, block_mask=block_mask(keep))
