"""`triton`: q and k rotated in one launch; one program per (batch, position) does every q and k head.

Design after Liger-Kernel's rope kernel (linkedin/Liger-Kernel, ops/rope.py): the cos/sin row of
position t is loaded once and reused for all Hq + Hk heads, so the table costs T*R bytes, not B*H*T*R.
Any strides (the (B, T, H, D) -> (B, H, T, D) transpose of a fused qkv projection included), both
layouts, partial rotary (tail copied when out of place), GQA (Hk down to 1), fp32 math for
fp32/bf16/fp16 I/O (fp64 in fp64). Backward is the same kernel with sign = -1 (harness/rope/fused.py).
On CPU it runs under TRITON_INTERPRET=1 (set before triton is imported): that is how CI checks it.
Imported only when impl='triton' is first called.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _heads(x, o, sxh, sxd, soh, sod, H, d1, d2, jm, c, s, D, R,
           BLOCK_H: tl.constexpr, COPY_TAIL: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    """Rotate the (H, R/2) pairs of one (b, t) row block; x, o point at head 0, dim 0."""
    h = tl.arange(0, BLOCK_H)[:, None]  # (BLOCK_H, 1)
    m = (h < H) & jm[None, :]  # (BLOCK_H, BLOCK_R)
    a = tl.load(x + h * sxh + d1[None, :] * sxd, mask=m, other=0.0)
    b = tl.load(x + h * sxh + d2[None, :] * sxd, mask=m, other=0.0)
    math = tl.float64 if a.dtype == tl.float64 else tl.float32
    a, b = a.to(math), b.to(math)
    ya = a * c[None, :].to(math) - b * s[None, :].to(math)
    yb = b * c[None, :].to(math) + a * s[None, :].to(math)
    tl.store(o + h * soh + d1[None, :] * sod, ya.to(o.dtype.element_ty), mask=m)
    tl.store(o + h * soh + d2[None, :] * sod, yb.to(o.dtype.element_ty), mask=m)
    if COPY_TAIL:  # partial rotary: features R..D-1 pass through
        e = R + tl.arange(0, BLOCK_TAIL)[None, :]
        em = (h < H) & (e < D)
        tl.store(o + h * soh + e * sod, tl.load(x + h * sxh + e * sxd, mask=em), mask=em)


@triton.jit
def _rope(q, k, qo, ko, cos, sin,
          sqb, sqh, sqt, sqd, skb, skh, skt, skd, sob, soh, sot, sod, spb, sph, spt, spd,
          sct, T, HQ, HK, D, R2, sign,
          INTERLEAVED: tl.constexpr, HAS_K: tl.constexpr, COPY_TAIL: tl.constexpr,
          BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # int64: offsets of large tensors overflow int32
    b, t = pid // T, pid % T
    j = tl.arange(0, BLOCK_R)  # pair index (R/2,)
    jm = j < R2
    c = tl.load(cos + t * sct + j, mask=jm, other=0.0)
    s = tl.load(sin + t * sct + j, mask=jm, other=0.0) * sign
    if INTERLEAVED:  # pair j = (2j, 2j+1): RoFormer
        d1 = 2 * j
        d2 = 2 * j + 1
    else:  # pair j = (j, j + R/2): GPT-NeoX / HF rotate_half
        d1 = j
        d2 = j + R2
    _heads(q + b * sqb + t * sqt, qo + b * sob + t * sot, sqh, sqd, soh, sod, HQ, d1, d2, jm, c, s, D, 2 * R2,
           BLOCK_HQ, COPY_TAIL, BLOCK_TAIL)
    if HAS_K:
        _heads(k + b * skb + t * skt, ko + b * spb + t * spt, skh, skd, sph, spd, HK, d1, d2, jm, c, s, D,
               2 * R2, BLOCK_HK, COPY_TAIL, BLOCK_TAIL)


def launch(xs, outs, cos, sin, *, interleaved, sign):
    """Fused-backend entry (see harness/rope/fused.py): xs, outs hold q (and k) as (B, H, T, D) views."""
    q, qo = xs[0], outs[0]
    k, ko = (xs[1], outs[1]) if len(xs) > 1 else (q, qo)
    if q.shape[0] != k.shape[0] or q.dtype != k.dtype:
        raise ValueError(f"triton rope needs q and k with the same batch and dtype; got {tuple(q.shape)} "
                         f"{q.dtype} and {tuple(k.shape)} {k.dtype}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        raise ValueError(f"triton rope takes float32/float16/bfloat16/float64 tensors; got {q.dtype}")
    bsz, hq, t, d = q.shape
    r2 = cos.shape[-1]
    if cos.stride() != sin.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    out_of_place = qo.data_ptr() != q.data_ptr()
    _rope[(bsz * t,)](
        q, k, qo, ko, cos, sin, *q.stride(), *k.stride(), *qo.stride(), *ko.stride(),
        cos.stride(0), t, hq, k.shape[1], d, r2, float(sign),
        INTERLEAVED=bool(interleaved), HAS_K=len(xs) > 1, COPY_TAIL=out_of_place and d > 2 * r2,
        BLOCK_HQ=triton.next_power_of_2(hq), BLOCK_HK=triton.next_power_of_2(k.shape[1]),
        BLOCK_R=triton.next_power_of_2(r2), BLOCK_TAIL=triton.next_power_of_2(max(d - 2 * r2, 1)))
