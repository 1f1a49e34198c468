"""The kernel benchmark's providers compute what they name: each callable of harness.bench.kernel_bench.kernel_fn
gives the eager formula's rotation (the GPU baseline times these same callables)."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: the Triton kernel runs on the CPU

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.bench import kernel_bench  # noqa: E402
from harness.rope.apply import apply_rotary  # noqa: E402

SHAPE = dict(b=2, hq=3, hk=1, t=9, d=16)


@pytest.mark.parametrize("provider", ["triton", "triton_bthd", "eager", "complex"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_forward_providers_rotate_like_the_eager_formula(provider, layout):
    pytest.importorskip("triton")
    q, k, cos, sin = kernel_bench.inputs(SHAPE, torch.float32)
    oq, ok = kernel_bench.kernel_fn(provider, "fwd", q, k, cos, sin, layout)()
    torch.testing.assert_close(oq, apply_rotary(q, cos, sin, layout, impl="eager"), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ok, apply_rotary(k, cos, sin, layout, impl="eager"), rtol=1e-5, atol=1e-5)


def test_triton_bthd_runs_on_token_major_storage():
    pytest.importorskip("triton")
    q, k, cos, sin = kernel_bench.inputs(SHAPE, torch.float32)
    oq, _ = kernel_bench.kernel_fn("triton_bthd", "fwd", q, k, cos, sin, "half")()
    assert oq.shape == q.shape and oq.stride(1) == SHAPE["d"]  # heads adjacent in memory: (B, T, H, D) storage
