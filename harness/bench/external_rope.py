"""Other projects' RoPE kernels, timed side by side with ours on a GPU (the kernel benchmark). Optional: a provider
is offered only where its package imports (`available`). Each is called the way its project calls it.

- `liger`: Liger-Kernel's `LigerRopeFunction` (liger_kernel/ops/rope.py), as HF Llama calls it: q, k
  are (B, H, T, D) views of (B, T, H, D) projections and are rotated IN PLACE; cos, sin (1, T, D) in
  the I/O dtype (halves repeated, HF's table). GPT-NeoX (`half`) layout only.
- `hf`: HF transformers' `apply_rotary_pos_emb` (models/llama), the rotate-half eager formula as HF
  models run it: cos, sin (1, T, D) in the I/O dtype (halves repeated), out of place. The issue's
  "HF-style eager" yardstick, on CPU and GPU alike.
- `flash_attn`: flash-attn's Triton `apply_rotary` through `ApplyRotaryEmb` (flash_attn/layers/
  rotary.py): x (B, T, H, D), cos, sin (T, D/2) fp32, out of place, one launch per tensor (q, then k);
  both layouts. Its package `__init__` loads the CUDA attention extension; the rotary modules need
  only torch and triton.

Each `build(...)` returns (fn, inputs): fn() runs one forward, or one backward with retained graph.
"""
import importlib.util

import torch

from harness.bench.kernel_timing import reads

PACKAGES = {"liger": "liger_kernel", "flash_attn": "flash_attn", "hf": "transformers"}
LAYOUTS = {"liger": ("half",), "flash_attn": ("half", "interleaved"), "hf": ("half",)}


def available(provider):
    """True if the provider's package imports here (checked without importing it)."""
    try:
        return importlib.util.find_spec(PACKAGES[provider]) is not None
    except ValueError:  # a package whose __spec__ is unset
        return False


def _liger(q, k, cos, sin, layout):
    from liger_kernel.ops.rope import LigerRopeFunction
    # (B, H, T, D) views of fresh (B, T, H, D) storage, as q_proj(x).view(B, T, H, D).transpose(1, 2)
    # gives. A fresh copy: with one head, .contiguous() of the transpose is the caller's own tensor,
    # which liger would then rotate in place.
    q, k = (torch.empty_like(t.transpose(1, 2), memory_format=torch.contiguous_format)
            .copy_(t.detach().transpose(1, 2)).transpose(1, 2) for t in (q, k))
    full = lambda t: torch.cat([t, t], dim=-1)[None].to(q.dtype)  # noqa: E731  (1, T, D), HF's table
    c, s = full(cos), full(sin)
    return (lambda q, k: LigerRopeFunction.apply(q, k, c, s)), q, k


def _flash_attn(q, k, cos, sin, layout):
    from flash_attn.layers.rotary import apply_rotary_emb
    q, k = (t.detach().transpose(1, 2).clone(memory_format=torch.contiguous_format) for t in (q, k))  # (B, T, H, D)
    c, s, inter = cos.float().contiguous(), sin.float().contiguous(), layout == "interleaved"
    return (lambda q, k: (apply_rotary_emb(q, c, s, inter), apply_rotary_emb(k, c, s, inter))), q, k


def _hf(q, k, cos, sin, layout):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    c, s = (torch.cat([t, t], dim=-1)[None].to(q.dtype) for t in (cos, sin))  # (1, T, D), HF's table
    return (lambda q, k: apply_rotary_pos_emb(q, k, c, s)), q.detach(), k.detach()


BUILDERS = {"liger": _liger, "flash_attn": _flash_attn, "hf": _hf}


def build(provider, mode, q, k, cos, sin, layout):
    """A zero-argument callable running one fwd (or bwd) of `provider` on q (B, Hq, T, D), k (B, Hk, T, D);
    cos, sin (T, D/2) fp32. Raises ValueError for a layout the provider does not do."""
    if layout not in LAYOUTS[provider]:
        raise ValueError(f"{provider} rope does only {list(LAYOUTS[provider])} layout; got {layout!r}")
    fn, q, k = BUILDERS[provider](q, k, cos, sin, layout)
    if mode == "fwd":
        return reads(lambda: fn(q, k), q, k, cos, sin)
    # leaves, so the timed backward is the provider's alone (liger rotates them in place: values only)
    q, k = q.detach().requires_grad_(), k.detach().requires_grad_()
    outs = fn(q, k)
    grads = tuple(torch.randn_like(o) for o in outs)
    return reads(lambda: torch.autograd.grad(outs, (q, k), grads, retain_graph=True), *grads, cos, sin)


def apply(provider, q, k, cos, sin, layout):
    """Rotated (q, k) as (B, H, T, D) tensors, for checking the outside kernels against the fp64 oracle."""
    fn, q2, k2 = BUILDERS[provider](q, k, cos, sin, layout)
    oq, ok = fn(q2, k2)
    if provider == "flash_attn":
        oq, ok = oq.transpose(1, 2), ok.transpose(1, 2)
    return oq, ok
