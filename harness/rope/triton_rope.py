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
def _heads(x, o, sxh, sxd, soh, sod, H, j, jm, c, s, D, R, INTERLEAVED: tl.constexpr,
           BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr, COPY_TAIL: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    """Rotate the (H, R/2) pairs of one (b, t) row block; x, o point at head 0, dim 0."""
    h = tl.arange(0, BLOCK_H)[:, None]  # (BLOCK_H, 1)
    math = tl.float64 if x.dtype.element_ty == tl.float64 else tl.float32
    c, s = c[None, :].to(math), s[None, :].to(math)  # (1, BLOCK_R)
    if INTERLEAVED:  # pair j = (2j, 2j+1), RoFormer: one contiguous (H, R) load, split into the pairs.
        # Two stride-2 loads instead ran at R = 0.09 (bf16) on an H100; this one streams like `half`.
        e = tl.arange(0, 2 * BLOCK_R)[None, :]  # (1, 2 BLOCK_R)
        m = (h < H) & (e < R)
        xy = tl.load(x + h * sxh + e * sxd, mask=m, other=0.0).to(math)
        a, b = tl.split(tl.reshape(xy, (BLOCK_H, BLOCK_R, 2)))  # (BLOCK_H, BLOCK_R) each
        y = tl.reshape(tl.join(a * c - b * s, b * c + a * s), (BLOCK_H, 2 * BLOCK_R))
        tl.store(o + h * soh + e * sod, y.to(o.dtype.element_ty), mask=m)
    else:  # pair j = (j, j + R/2): GPT-NeoX / HF rotate_half; two contiguous half-row loads
        m = (h < H) & jm[None, :]  # (BLOCK_H, BLOCK_R)
        a = tl.load(x + h * sxh + j[None, :] * sxd, mask=m, other=0.0).to(math)
        b = tl.load(x + h * sxh + (j[None, :] + R // 2) * sxd, mask=m, other=0.0).to(math)
        tl.store(o + h * soh + j[None, :] * sod, (a * c - b * s).to(o.dtype.element_ty), mask=m)
        tl.store(o + h * soh + (j[None, :] + R // 2) * sod, (b * c + a * s).to(o.dtype.element_ty), mask=m)
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
    _heads(q + b * sqb + t * sqt, qo + b * sob + t * sot, sqh, sqd, soh, sod, HQ, j, jm, c, s, D, 2 * R2,
           INTERLEAVED, BLOCK_HQ, BLOCK_R, COPY_TAIL, BLOCK_TAIL)
    if HAS_K:
        _heads(k + b * skb + t * skt, ko + b * spb + t * spt, skh, skd, sph, spd, HK, j, jm, c, s, D,
               2 * R2, INTERLEAVED, BLOCK_HK, BLOCK_R, COPY_TAIL, BLOCK_TAIL)


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
