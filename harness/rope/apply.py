"""Choosing and calling a rotary implementation by name: IMPLS, `auto`, apply_rotary, apply_rotary_qk.

Names: the plain-PyTorch formulas (harness/rope/rotation.py: reference, eager, complex), torch.compile
of eager (`compiled`), the fused kernels (`cpu`, `triton`, harness/rope/fused.py) and `fastest`, which
`auto` means: per call, the implementation `make bench` measured fastest on x's device (`pick`).
Kernel modules are imported at first call only (importing harness compiles nothing, imports no triton).

Where the C kernel cannot be built or loaded (no compiler, macOS without OpenMP, not x86), `auto` on
CPU falls back to FALLBACK, says so once per process on stderr, and rows record the name that ran
(`resolved_params`, with the kernel's dispatch level `cpu_isa` where it ran); asking for impl='cpu' there
fails with the reason and the valid choices.
"""
import importlib
import importlib.util
import sys

import torch

from harness.rope.fused import BACKENDS, rotate
from harness.rope.rotation import FORMULAS, LAYOUTS, rotary_table  # noqa: F401  (rotary_table, LAYOUTS: re-exported)

# The fastest PyTorch path on CPU without the C kernel: eager beat complex in 6 of the 8 prefill cases
# fp32/bf16 x half/interleaved x fwd/bwd (kernel_bench.measure, 1 thread, 2-core x86; complex won only
# interleaved fwd), and fp32 half fwd R 0.21 vs 0.19 in results/baselines/kernels-cpu.json.
# `compiled` is no candidate: inductor needs a C++ compiler on CPU, which is what is usually missing here.
FALLBACK = "eager"
AUTO = ("auto", "fastest")
_TOLD = []  # the fallback line is printed once per process
_RESOLVED = {}  # device type -> what auto runs as there (resolved)


def _kernel(name):
    def impl(x, cos, sin, layout="half"):
        _require(name)
        return rotate(name, (x,), cos, sin, layout)[0]
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"The fused `{name}` kernel (harness/rope/{BACKENDS[name].rsplit('.', 1)[1]}.py), loaded at first call."
    return impl


def _compiled(x, cos, sin, layout="half"):
    """torch.compile of the eager formula (harness/rope/compiled.py), compiled at first call."""
    return importlib.import_module("harness.rope.compiled").compiled(x, cos, sin, layout)


def _fastest(x, cos, sin, layout="half"):
    """Dispatch on x's device to the fastest measured implementation that works here (see `pick`)."""
    return IMPLS[pick(x, cos, sin)](x, cos, sin, layout)


IMPLS = {**FORMULAS, "compiled": _compiled, "cpu": _kernel("cpu"), "triton": _kernel("triton"), "fastest": _fastest}


def _cpu_reason():
    """None where the C kernel builds and loads here, else why not (one line; tried once per process)."""
    cpu = sys.modules.get("harness.rope.cpu") or importlib.import_module("harness.rope.cpu")  # (import_module: ~2 us)
    return cpu.unavailable()


def _require(name):
    """Fail in one line, with the choices, when an explicitly named kernel cannot run on this machine."""
    reason = _cpu_reason() if name == "cpu" else None
    if reason:
        choices = ["auto", *(n for n in IMPLS if n != "cpu")]
        raise RuntimeError(f"rope impl 'cpu' cannot run here: {reason}; valid choices here: {choices}")


def resolved(impl, device):
    """The implementation `impl` runs as on `device`: `auto`/`fastest` resolved as `pick` resolves them for
    a table without gradients; any other name is itself. Decided once per process and device type (whether the
    C kernel loads is decided once per process): a decode step calls this for every layer."""
    if impl not in AUTO:
        return impl
    kind = device.type if isinstance(device, torch.device) else torch.device(device).type
    name = _RESOLVED.get(kind)
    if name is None:
        name = _RESOLVED[kind] = _resolve(kind)
    return name


def _resolve(kind):
    if kind == "cpu":
        reason = _cpu_reason()
        if reason and not _TOLD:
            _TOLD.append(reason)
            print(f"harness.rope: impl='auto' uses {FALLBACK!r} on this CPU, not the C kernel 'cpu': {reason}",
                  file=sys.stderr, flush=True)
        return FALLBACK if reason else "cpu"
    if kind == "cuda" and importlib.util.find_spec("triton") is not None:
        return "triton"
    return "eager"


def resolved_params(params, device):
    """An encoding's parameters as a row records them: impl='auto' replaced by the name that ran on device,
    and where that is the C kernel, its dispatch level (`cpu_isa`: the portable level is the slow path)."""
    if params.get("impl") in AUTO:
        params = {**params, "impl": resolved(params["impl"], device)}
    if params.get("impl") == "cpu":
        params = {**params, "cpu_isa": importlib.import_module("harness.rope.cpu").isa()}
    return params


def pick(x, cos, sin):
    """The fastest implementation for x's device, as measured by `make bench` (results/baselines):
    on CPU the C/OpenMP kernel (R ~1.2 vs eager's ~0.2) where it builds, else FALLBACK; on CUDA triton
    when importable; else eager."""
    if cos.requires_grad or sin.requires_grad or cos.dim() > 2 and any(n != 1 for n in cos.shape[:-2]):
        return "eager"  # outside what the fused kernels do
    return resolved("auto", x.device)


def check_impl(impl):
    """An encoding's `impl` knob at build time, before any tensor: one line listing the choices."""
    if impl not in AUTO and impl not in IMPLS:
        raise ValueError(f"unknown rope impl {impl!r}; expected one of {['auto', *IMPLS]}")


def apply_rotary(x, cos, sin, layout="half", impl="eager"):
    """Rotate x (..., T, D) by the table cos/sin (T, R/2) with the named implementation."""
    name = "fastest" if impl == "auto" else impl
    if name not in IMPLS:
        raise ValueError(f"unknown rope impl {impl!r}; expected one of {['auto', *IMPLS]}")
    return IMPLS[name](x, cos, sin, layout)


def apply_rotary_qk(q, k, cos, sin, layout="half", *, impl="auto", inplace=False):
    """Rotate q (B, Hq, T, D) and k (B, Hk, T, D) together (GQA: Hk may be 1); one launch on triton."""
    name = pick(q, cos, sin) if impl in AUTO else impl
    if name in BACKENDS:
        if impl not in AUTO:  # auto picks a kernel only where it runs
            _require(name)
        return rotate(name, (q, k), cos, sin, layout, inplace=inplace)
    if inplace:
        raise ValueError(f"inplace=True needs a fused impl, one of {list(BACKENDS)}; got {impl!r}")
    if name not in IMPLS:
        raise ValueError(f"unknown rope impl {impl!r}; expected one of {['auto', *IMPLS]}")
    return apply_rotary(q, cos, sin, layout, name), apply_rotary(k, cos, sin, layout, name)
