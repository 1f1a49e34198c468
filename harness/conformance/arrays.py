"""Array kinds at the boundary: the code under test may take and return NumPy, JAX or MLX arrays, not torch.

The suite keeps its cases in torch; `to(kind, t)` converts an input just before the call and `back(a)` converts
whatever came back (any of the kinds) to a torch tensor of the same dtype, so the judging never changes. Values
convert exactly: the inputs are multiples of 1/16 in [-4, 4] (cases.inputs), exact in every dtype here, and bf16
goes through fp32, which holds every bf16 value. JAX and MLX are imported only when asked for (neither is a
dependency); NumPy has no bf16 of its own and takes ml_dtypes' (the type JAX uses) where it is importable.
JAX runs with 32-bit defaults unless the user enabled x64, so int64 positions reach it as int32 (exact: every
position here is below 2^31).
"""
import importlib

import numpy as np
import torch

ARRAYS = ("torch", "numpy", "jax", "mlx")
_NEEDS = {"torch": "torch", "numpy": "numpy", "jax": "jax.numpy", "mlx": "mlx.core"}
_NP = {torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64, torch.int32: np.int32,
       torch.complex64: np.complex64, torch.float64: np.float64, torch.bool: np.bool_}


def check(kind, dtype=None):
    """ValueError in one line where arrays of `kind` (in torch dtype `dtype`) cannot be made here."""
    if kind not in ARRAYS:
        raise ValueError(f"unknown --array {kind!r}; choose one of {list(ARRAYS)}")
    try:
        importlib.import_module(_NEEDS[kind])
    except ImportError as e:
        raise ValueError(f"--array {kind}: {_NEEDS[kind]} is not importable here ({e}); install it, or pick "
                         f"another of {list(ARRAYS)}") from None
    if kind == "numpy" and dtype == torch.bfloat16 and _ml_bf16() is None:
        raise ValueError("--array numpy with --dtype bf16 needs ml_dtypes (NumPy has no bfloat16 of its own)")


def _ml_bf16():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


def _numpy(t):
    """t as a NumPy array of its own dtype (bf16: ml_dtypes')."""
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(_ml_bf16())
    return t.detach().cpu().numpy().astype(_NP[t.dtype], copy=True)


def to(kind, t):
    """The torch tensor t as an array of `kind`, same values and dtype (a new array: never a view of t)."""
    if kind == "torch":
        return t
    a = _numpy(t)
    if kind == "numpy":
        return a
    if kind == "jax":
        import jax.numpy as jnp
        return jnp.asarray(a)
    import mlx.core as mx
    if t.dtype == torch.bfloat16:
        return mx.array(t.float().numpy()).astype(mx.bfloat16)
    return mx.array(a)


def is_array(a):
    """True for a torch tensor, a NumPy array or anything with __array__ (JAX, MLX)."""
    return torch.is_tensor(a) or isinstance(a, np.ndarray) or hasattr(a, "__array__")


def back(a):
    """Any array kind -> a torch tensor with a's values and dtype (bf16 kept bf16), never sharing a's memory."""
    if torch.is_tensor(a):
        return a
    bf16 = "bfloat16" in str(getattr(a, "dtype", ""))
    if bf16 and hasattr(a, "astype"):
        try:
            import mlx.core as mx
            if isinstance(a, mx.array):
                a = a.astype(mx.float32)
        except ImportError:
            pass
    n = np.array(a)
    if bf16:
        return torch.from_numpy(n.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(n.copy())
