"""The rotation itself in plain PyTorch: cos/sin tables and the three formulas every kernel must match.

Shapes: x (..., T, D); cos, sin (T, R/2) or broadcastable to x[..., :R/2], with rotary dim R <= D
(partial rotary: the last D - R features pass through untouched). Pair j is (2j, 2j+1) in the
`interleaved` layout (RoFormer, Su et al. 2021, §3.2.2) and (j, j + R/2) in the `half` layout (GPT-NeoX/HF).
Every implementation rotates pair j by the angle whose cos/sin are given; they must agree.
Imports torch only: the kernels (harness/rope/fused.py, cpu.py, compiled.py) build on this module, and
choosing among them is harness/rope/apply.py's job.
"""
import torch

LAYOUTS = ("half", "interleaved")
FP16_MAX = 65504.0


def to_device(t, device, dtype=None):
    """t (a small table made on the CPU, e.g. inv_freq) on device, in dtype: on CUDA through pinned memory without
    a stream sync. A plain .to() from pageable memory waits for every kernel queued on the GPU; once per forward,
    that left the GPU idle while the host caught up (H200, d_model 1024 training step: the table and its copy
    cost +1.7% of a step, +0.2% without them; results/baselines/gpu-h200.md). A tensor that requires grad, is
    already there, or goes elsewhere takes the plain .to()."""
    t = t.to(dtype=dtype or t.dtype)
    device = torch.device(device)
    if device.type != "cuda" or t.device.type != "cpu" or t.requires_grad:
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)  # the host allocator keeps the block until the copy ends


def rotary_table(inv_freq, pos, attention_factor=1.0, dtype=torch.float32):
    """cos, sin of the phase pos * inv_freq, shape pos.shape + (R/2,); phase computed in inv_freq's dtype."""
    if pos.dtype == torch.float16 and pos.numel() and float(pos.max()) >= FP16_MAX:
        raise ValueError(f"positions up to {float(pos.max()):.0f} cannot be held in float16 (largest finite "
                         f"value {FP16_MAX:.0f}); pass int64 or float32 positions")
    phase = pos.to(inv_freq.dtype)[..., None] * inv_freq  # (..., T, R/2)
    return (phase.cos() * attention_factor).to(dtype), (phase.sin() * attention_factor).to(dtype)


def _check(x, cos, layout):
    if layout not in LAYOUTS:
        raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
    r = 2 * cos.shape[-1]
    if r > x.shape[-1]:
        raise ValueError(f"rotary dim {r} exceeds head dim {x.shape[-1]}")
    return r


def _pairs(x, r, layout):
    """(a, b): the two members of each rotated pair, each (..., T, R/2)."""
    if layout == "half":
        return x[..., : r // 2], x[..., r // 2: r]
    return x[..., 0:r:2], x[..., 1:r:2]


def _unpairs(a, b, layout):
    """Inverse of _pairs: (..., T, R/2) x 2 -> (..., T, R)."""
    if layout == "half":
        return torch.cat((a, b), dim=-1)
    return torch.stack((a, b), dim=-1).flatten(-2)


def reference(x, cos, sin, layout="half"):
    """The oracle: an explicit (R x R) rotation matrix per position, block-diagonal in pair order
    (RoFormer's R^d_{Theta,m}, Su et al. 2021, §3.2.2), applied with a matmul."""
    r = _check(x, cos, layout)
    j = torch.arange(r // 2)
    a, b = (j, j + r // 2) if layout == "half" else (2 * j, 2 * j + 1)
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    m = torch.zeros(*cos.shape[:-1], r, r, dtype=x.dtype, device=x.device)  # (..., T, R, R)
    m[..., a, a], m[..., a, b] = c, -s
    m[..., b, a], m[..., b, b] = s, c
    rot = (m @ x[..., :r, None])[..., 0]
    return torch.cat((rot, x[..., r:]), dim=-1)


def eager(x, cos, sin, layout="half"):
    """Rotate-half (HF) or RoFormer's elementwise form (Su et al. 2021, §3.4.2): x*cos + rot90(x)*sin."""
    r = _check(x, cos, layout)
    a, b = _pairs(x, r, layout)
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    rot = _unpairs(a * c - b * s, b * c + a * s, layout)
    return torch.cat((rot, x[..., r:]), dim=-1) if r < x.shape[-1] else rot


def complex_(x, cos, sin, layout="half"):
    """Polar form (Meta's llama): pair j as a complex number times e^{i*phase}."""
    r = _check(x, cos, layout)
    a, b = _pairs(x, r, layout)
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    z = torch.complex(a.to(work), b.to(work)) * torch.complex(cos.to(work), sin.to(work))
    rot = _unpairs(z.real, z.imag, layout).to(x.dtype)
    return torch.cat((rot, x[..., r:]), dim=-1) if r < x.shape[-1] else rot


# The pure-PyTorch implementations by name; apply.IMPLS adds the kernels.
FORMULAS = {"reference": reference, "eager": eager, "complex": complex_}
