"""Front end shared by the fused kernels (`cpu`, `triton`): shapes, outputs, autograd, lazy registration.

A backend is a module with `launch(xs, outs, cos, sin, *, interleaved, sign)`: for each pair (x, out) it writes
the rotation of x into out (out may be x: in place); one with `empty_like(x, table)` allocates the outputs of
contiguous inputs itself (cpu: away from the input's and the table's addresses modulo 4 KiB, for its row loop).
x, out are (B, H, T, D) with any strides (no `.contiguous()` copies); cos, sin are (T, R/2) in the math dtype
(fp32; fp64 for fp64 x), any T stride (0 = one position broadcast); sign = -1 rotates by -phase, which is the
backward (R(-t) = R(t)^T). The triton backend handles q and k in one launch; `xs` holds one or two tensors.

Aliasing: out-of-place by default (the caller's tensors are never written); `inplace=True` overwrites
q and k and returns them (autograd marks them dirty). Gradients w.r.t. the table (learned frequencies,
rope_learned_freq) are not in the kernels: a table that requires grad goes through `eager`.
Nothing here imports triton or compiles: backends load at first call. Which implementation runs is
chosen in harness/rope/apply.py, which imports this module (never the other way round).
"""
import importlib

import torch

from harness.rope.rotation import LAYOUTS, eager

BACKENDS = {"cpu": "harness.rope.cpu", "triton": "harness.rope.triton_rope"}


def _backend(name):
    """The backend's module, imported at its first call (import_module alone costs a decode call ~2 us)."""
    module = _LOADED.get(name)
    if module is None:
        module = _LOADED[name] = importlib.import_module(BACKENDS[name])
    return module


_LOADED = {}


def _as4d(t):
    """(..., T, D) -> a (B, H, T, D) view (never a copy)."""
    if t.dim() == 4:
        return t
    if t.dim() < 2:
        raise ValueError(f"rope input must be (..., T, D), got shape {tuple(t.shape)}")
    if t.dim() <= 4:
        return t.view((1,) * (4 - t.dim()) + tuple(t.shape))
    try:
        return t.view(-1, *t.shape[-3:])
    except RuntimeError:
        raise ValueError(f"fused rope kernels need the leading dims of a >4-d input to merge without a "
                         f"copy; got shape {tuple(t.shape)} strides {t.stride()}; use impl='eager'") from None


def table(cos, t, math_dtype):
    """cos/sin (T, R/2), (1, R/2), (R/2,) or with leading 1s -> a (T, R/2) view in math_dtype."""
    if cos.dim() == 2 and cos.shape[0] == t and cos.dtype == math_dtype and cos.stride(-1) == 1:
        return cos  # the common case, as rotary_table makes it: nothing to do (decode calls are ~30 us)
    lead = cos.shape[:-2]
    if any(n != 1 for n in lead):
        raise ValueError(f"fused rope kernels take a table broadcastable to (T, R/2); got {tuple(cos.shape)} "
                         f"(per-batch positions); use impl='eager'")
    c = cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos[None]
    if c.shape[0] not in (1, t):
        raise ValueError(f"rope table has {c.shape[0]} positions but the input has T={t}")
    c = c.to(math_dtype).expand(t, c.shape[-1])
    return c if c.stride(-1) == 1 else c.contiguous()  # the table is small; q/k are never copied


def _empty_like(backend, x, table):
    """A fresh output for x: the backend's own where it has one and x is contiguous (placed against x and the
    table, cpu), else like x (contiguous > 4-d)."""
    if x.is_contiguous() and hasattr(backend, "empty_like"):
        return backend.empty_like(x, table)
    return torch.empty_like(x) if x.dim() <= 4 else torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _run(backend, interleaved, sign, inplace, cos, sin, xs):
    """The outputs (xs themselves when inplace) after one launch."""
    outs = xs if inplace else tuple(_empty_like(backend, x, (cos, sin)) for x in xs)
    backend.launch(tuple(map(_as4d, xs)), tuple(map(_as4d, outs)), cos, sin, interleaved=interleaved, sign=sign)
    return outs


class _Rotate(torch.autograd.Function):
    """outs = R(sign * phase) xs; backward applies R(-sign * phase) with the same kernel."""

    @staticmethod
    def forward(ctx, backend, interleaved, sign, inplace, cos, sin, *xs):
        outs = _run(backend, interleaved, sign, inplace, cos, sin, xs)
        if inplace:
            ctx.mark_dirty(*xs)
        ctx.backend, ctx.interleaved, ctx.sign = backend, interleaved, sign
        ctx.save_for_backward(cos, sin)
        return outs

    @staticmethod
    def backward(ctx, *grads):
        cos, sin = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: the gradient is itself differentiable
            gx = _Rotate.apply(ctx.backend, ctx.interleaved, -ctx.sign, False, cos, sin, *grads)
        else:  # the usual backward: the kernel alone, without a second autograd node around it
            gx = _run(ctx.backend, ctx.interleaved, -ctx.sign, False, cos, sin, grads)
        return (None, None, None, None, None, None, *gx)


def rotate(backend, xs, cos, sin, layout="half", *, inplace=False):
    """Rotate each x in xs (..., T, D) by cos/sin with the named backend; returns a tuple like xs."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
    r, d = 2 * cos.shape[-1], xs[0].shape[-1]
    if r > d or any(x.shape[-1] != d or x.shape[-2] != xs[0].shape[-2] for x in xs):
        raise ValueError(f"rotary dim {r} vs inputs {[tuple(x.shape) for x in xs]}: need R <= D and equal T, D")
    if cos.requires_grad or sin.requires_grad:  # table gradients: the eager formula under autograd
        outs = tuple(eager(x, cos, sin, layout) for x in xs)
        return tuple(x.copy_(o) for x, o in zip(xs, outs)) if inplace else outs
    math_dtype = torch.float64 if xs[0].dtype == torch.float64 else torch.float32
    t = xs[0].shape[-2]
    c, s = table(cos, t, math_dtype), table(sin, t, math_dtype)
    if not (torch.is_grad_enabled() and any(x.requires_grad for x in xs)):  # inference (decode): no autograd node
        return _run(_backend(backend), layout == "interleaved", 1.0, inplace, c, s, xs)
    return _Rotate.apply(_backend(backend), layout == "interleaved", 1.0, inplace, c, s, *xs)
