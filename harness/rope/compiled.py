"""`compiled`: torch.compile of the eager formula (inductor fuses the slices, products and cat).

Imported at first use only (harness/rope/apply.py), so importing harness never starts a compile.
dynamic=None: the first call specialises on shapes, a second distinct shape recompiles dynamically;
inductor on CPU generates C++ (gcc) and upcasts bf16/fp16 math to fp32.
"""
import torch

from harness.rope.rotation import eager

# Each (layout, dtype, requires_grad, shape class) is its own graph and dynamo's limit is per code
# object: `make bench` alone needs 16 of them, the default limit is 8 (then fullgraph fails hard).
torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
_COMPILED = torch.compile(eager, fullgraph=True)


def compiled(x, cos, sin, layout="half"):
    """Rotate x (..., T, D) by cos/sin (T, R/2) with the compiled eager formula."""
    return _COMPILED(x, cos, sin, layout)
