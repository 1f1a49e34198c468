"""Probe: a RoPE kernel tiled over (b, h, t-block) for head-major (B, H, T, D) storage."""
import torch, triton
import triton.language as tl


@triton.jit
def _tile(x, o, cos, sin, sxb, sxh, sxt, sxd, sob, soh, sot, sod, sct, H, T, R2, sign,
          INTERLEAVED: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    b, h = pid // H, pid % H
    t = (tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T))[:, None].to(tl.int64)  # (BLOCK_T, 1)
    j = tl.arange(0, BLOCK_R)[None, :]
    m = (t < T) & (j < R2)
    c = tl.load(cos + t * sct + j, mask=m, other=0.0)
    s = tl.load(sin + t * sct + j, mask=m, other=0.0) * sign
    x = x + b * sxb + h * sxh + t * sxt
    o = o + b * sob + h * soh + t * sot
    if INTERLEAVED:
        e = tl.arange(0, 2 * BLOCK_R)[None, :]
        me = (t < T) & (e < 2 * R2)
        xy = tl.load(x + e * sxd, mask=me, other=0.0).to(tl.float32)
        a, bb = tl.split(tl.reshape(xy, (BLOCK_T, BLOCK_R, 2)))
        y = tl.reshape(tl.join(a * c - bb * s, bb * c + a * s), (BLOCK_T, 2 * BLOCK_R))
        tl.store(o + e * sod, y.to(o.dtype.element_ty), mask=me)
    else:
        a = tl.load(x + j * sxd, mask=m, other=0.0).to(tl.float32)
        bb = tl.load(x + (j + R2) * sxd, mask=m, other=0.0).to(tl.float32)
        tl.store(o + j * sod, (a * c - bb * s).to(o.dtype.element_ty), mask=m)
        tl.store(o + (j + R2) * sod, (bb * c + a * s).to(o.dtype.element_ty), mask=m)


def rotate(x, cos, sin, interleaved, sign=1.0, out=None, block_t=16, num_warps=4):
    B, H, T, D = x.shape
    r2 = cos.shape[-1]
    assert D == 2 * r2
    o = torch.empty_like(x) if out is None else out
    _tile[(B * H, triton.cdiv(T, block_t))](x, o, cos, sin, *x.stride(), *o.stride(), cos.stride(0), H, T, r2,
                                            float(sign), INTERLEAVED=bool(interleaved), BLOCK_T=block_t,
                                            BLOCK_R=triton.next_power_of_2(r2), num_warps=num_warps)
    return o
