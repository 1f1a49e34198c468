"""Every rotary implementation against the fp64 rotation-matrix oracle (`reference`).

Tolerances come from the dtype: per rotated pair (a, b) -> (a c - b s, b c + a s) the error bound is
k * eps(dtype) * (|a| + |b|) with the table as given (the table's own precision is the subject of
harness/measure/precision.py). Why these k: fp32 I/O, three roundings (two products, one sum) -> k = 2; bf16/fp16
I/O with fp32 math, one final round-to-nearest: half an ulp of the exact result (+ the fp32 error), which
catches a truncating cast; the eager formula computes in the I/O dtype (cos/sin rounded to it too), five
roundings -> k = 3. Pass-through features must be bit-exact. Triton runs under TRITON_INTERPRET=1 on CPU;
the interpreter truncates fp32 -> bf16 (triton/runtime/interpreter.py cast_impl passes no rounding mode;
GPU casts round to nearest even), so its bf16 bound there is one ulp.

HARNESS_TEST_DEVICE=cuda runs the same file on a GPU (no interpreter; fused = triton only):
  HARNESS_TEST_DEVICE=cuda TRITON_INTERPRET=0 python -m pytest tests/test_rope_kernels.py
"""
import os
import subprocess
import sys

DEVICE = os.environ.get("HARNESS_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton

import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.bench import external_rope  # noqa: E402
from harness.rope.apply import IMPLS, apply_rotary_qk, pick, rotary_table  # noqa: E402
from harness.rope.frequencies import frequencies  # noqa: E402
from harness.rope.fused import rotate  # noqa: E402

pytestmark = pytest.mark.gpu  # make test-gpu runs this file on a lent GPU (HARNESS_TEST_DEVICE=cuda)

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (pip install -e '.[dev]')")
FUSED_NAMES = ["cpu", "triton"] if DEVICE == "cpu" else ["triton"]
FUSED = [pytest.param(n, marks=needs_triton) if n == "triton" else n for n in FUSED_NAMES]
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
on_cpu_only = pytest.mark.skipif(DEVICE != "cpu", reason="a CPU-only check")
ALL = ["eager", "complex", "compiled", "fastest", *FUSED]
LOWP_K = {"eager": 3, "compiled": 3, "liger": 3, "hf": 3}  # eps multiples for math in bf16/fp16 (liger, hf: a bf16 table)
# Positions up to 131072: the table at the end of a 128k context.
POS = torch.tensor([0, 1, 2, 4095, 65535, 131071, 131072])


def tables(head_dim, pos=POS, partial=0.5):
    """cos, sin (T, R/2) in fp32, phase computed in fp64 (the kernels' input; exact for the oracle)."""
    inv_freq, _ = frequencies("default", head_dim, 10000.0, partial_rotary_factor=partial)
    return tuple(t.to(DEVICE) for t in rotary_table(inv_freq.double(), pos, dtype=torch.float32))


def randn(*shape, dtype=torch.float32, seed=None, requires_grad=False):
    """Normal samples drawn on the CPU (seeded or not), then moved to DEVICE."""
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    return torch.randn(*shape, generator=g, dtype=dtype).to(DEVICE).requires_grad_(requires_grad)


def pair_mag(x, r, layout):
    """|a| + |b| of the pair each element belongs to (fp64, x's shape); 0 on the pass-through tail."""
    x = x.double().abs()
    j = torch.arange(r // 2)
    i1, i2 = (j, j + r // 2) if layout == "half" else (2 * j, 2 * j + 1)
    out = torch.zeros_like(x)
    out[..., i1] = out[..., i2] = x[..., i1] + x[..., i2]
    return out


def ulp(y, dtype):
    """Unit in the last place of |y| in dtype (normal range): 2^(e-1) * eps for |y| = m 2^e, m in [0.5, 1)."""
    return torch.ldexp(torch.full_like(y, torch.finfo(dtype).eps / 2), torch.frexp(y)[1])


def check(y, x, cos, sin, layout, impl):
    """y (any dtype) against the fp64 oracle applied to the same x and table."""
    ref = IMPLS["reference"](x.double(), cos.double(), sin.double(), layout)
    mag = pair_mag(x, 2 * cos.shape[-1], layout)
    if x.dtype in (torch.float32, torch.float64):
        lim = 2 * torch.finfo(x.dtype).eps * mag
    elif impl in LOWP_K:  # the eager formula: math in the I/O dtype
        lim = LOWP_K[impl] * torch.finfo(x.dtype).eps * mag
    else:  # fp32 math then one rounding to the I/O dtype
        ulps = 1.0 if (impl, x.dtype) == ("triton", torch.bfloat16) and INTERPRETED else 0.5
        lim = ulps * ulp(ref, x.dtype) + 2 * torch.finfo(torch.float32).eps * mag
    worst = ((y.double() - ref).abs() - lim).max().item()
    assert y.dtype == x.dtype and y.shape == x.shape
    assert worst <= 0, f"{impl} {layout} {x.dtype}: error exceeds the bound by {worst:.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", ALL)
def test_matches_fp64_reference_partial_rotary_odd_heads(impl, layout, dtype):
    cos, sin = tables(32)  # R = 16 < D = 32
    x = randn(2, 3, len(POS), 32, seed=0).to(dtype)
    check(IMPLS[impl](x, cos, sin, layout), x, cos, sin, layout, impl)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", FUSED)
def test_fp64_full_rotary(impl, layout):
    """D = 24: R/2 = 12 pairs is not a power of two, so the kernels' padded blocks are masked."""
    cos, sin = tables(24, partial=1.0)
    x = randn(1, 5, len(POS), 24, dtype=torch.float64)
    check(IMPLS[impl](x, cos.double(), sin.double(), layout), x, cos, sin, layout, impl)


def _strided_views():
    """(B, H, T, D) views that are not contiguous: a fused-qkv transpose, and a D stride of 2."""
    qkv = randn(2, len(POS), 3, 5, 32)  # (B, T, 3, H, D) as a qkv projection lays it out
    yield "qkv-transpose", qkv[:, :, 1].transpose(1, 2), qkv
    wide = randn(2, 3, len(POS), 64)
    yield "d-stride-2", wide[..., ::2], wide


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", [*FUSED, "eager"])
def test_strided_inputs_out_of_place_and_in_place(impl, layout):
    cos, sin = tables(32)
    for name, x, base in _strided_views():
        assert not x.is_contiguous(), name
        before = base.clone()
        check(IMPLS[impl](x, cos, sin, layout), x, cos, sin, layout, impl)
        assert torch.equal(base, before), f"{impl} wrote into the caller's tensor ({name})"
        if impl in FUSED_NAMES:  # in place through the view: only the view's elements change
            expect = IMPLS["reference"](x.double(), cos.double(), sin.double(), layout)
            (out,) = rotate(impl, (x,), cos, sin, layout, inplace=True)
            assert out.data_ptr() == x.data_ptr()
            assert (x.double() - expect).abs().max() < 1e-5
            mask = torch.ones_like(base, dtype=torch.bool)
            (mask[:, :, 1].transpose(1, 2) if name == "qkv-transpose" else mask[..., ::2]).fill_(False)
            assert torch.equal(base[mask], before[mask]), f"{impl} in place wrote outside the view ({name})"


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", [*FUSED, "eager", "auto"])
def test_gqa_one_kv_head_q_and_k_together(impl, layout):
    cos, sin = tables(32)
    q = randn(2, 5, len(POS), 32, dtype=torch.bfloat16)
    k = randn(2, 1, len(POS), 32, dtype=torch.bfloat16)
    rq, rk = apply_rotary_qk(q, k, cos, sin, layout, impl=impl)
    check(rq, q, cos, sin, layout, impl)
    check(rk, k, cos, sin, layout, impl)


@pytest.mark.parametrize("impl", FUSED)
def test_outputs_of_a_fused_qkv_keep_its_memory_order(impl):
    """q, k sliced from a (B, T, 3, H, D) projection are not dense; their rotations come out dense in (B, T, H, D)
    memory order, like v (torch.empty_like keeps a view's order of strides), not as (B, H, T, D) memory."""
    cos, sin = tables(32)
    qkv = randn(2, len(POS), 3, 5, 32, requires_grad=True)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, D)
    rq, rk = apply_rotary_qk(q, k, cos, sin, impl=impl)
    (gq,) = torch.autograd.grad(rq, qkv, torch.ones_like(rq))
    dense = v.contiguous().transpose(1, 2).contiguous().transpose(1, 2).stride()  # (B, T, H, D) memory
    for x, y in ((q, rq), (k, rk)):
        check(y, x, cos, sin, "half", impl)
        assert y.stride() == dense, (y.stride(), dense)
    assert torch.equal(gq[:, :, 1:], torch.zeros_like(gq[:, :, 1:]))  # only q's slice gets a gradient


@pytest.mark.skipif(DEVICE != "cuda", reason="a CUDA stream sync; runs with HARNESS_TEST_DEVICE=cuda")
def test_rope_table_copy_does_not_sync_the_stream():
    """The CPU-made inv_freq reaches the GPU without a stream sync (a pageable .to() syncs): the GPU would idle."""
    from harness import encodings
    enc = encodings.build("rope", head_dim=32, d_model=64, n_heads=2)
    pos = torch.arange(64)
    torch.cuda.set_sync_debug_mode("error")
    try:
        cos, sin = enc.table(pos.to(DEVICE))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    want = rotary_table(frequencies("default", 32, 10000.0)[0], pos)  # the same fp32 maths on the CPU
    assert torch.allclose(cos.cpu(), want[0], atol=1e-6) and torch.allclose(sin.cpu(), want[1], atol=1e-6)


@pytest.mark.parametrize("impl", FUSED)
def test_in_place_is_explicit(impl):
    """Out of place by default (inputs untouched); inplace=True returns the caller's tensors, rotated."""
    cos, sin = tables(32)
    q, k = randn(1, 4, len(POS), 32), randn(1, 2, len(POS), 32)
    q0, k0 = q.clone(), k.clone()
    oq, ok = apply_rotary_qk(q, k, cos, sin, impl=impl)
    assert torch.equal(q, q0) and torch.equal(k, k0)
    iq, ik = apply_rotary_qk(q, k, cos, sin, impl=impl, inplace=True)
    assert iq is q and ik is k and torch.equal(q, oq) and torch.equal(k, ok)
    with pytest.raises(ValueError, match="inplace=True needs a fused impl"):
        apply_rotary_qk(q, k, cos, sin, impl="eager", inplace=True)


def _mod4k(a, b):
    return (a.data_ptr() - b.data_ptr()) % 4096


@on_cpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cpu_outputs_sit_away_from_inputs_modulo_4k(dtype):
    """The cpu kernel's streamed outputs (over 4 MB; forward and backward) start 1-3 KiB from their input modulo
    4 KiB, 64-byte aligned: its (b, h) blocks run in lockstep only that far from 4K aliasing
    (harness/rope/csrc/rope_cpu.c, ALIAS_FAR). Smaller ones are torch's."""
    from harness.rope import cpu
    cos, sin = tables(64, pos=torch.arange(4096))
    for shape in [(2, 5, 4096, 64), (10, 4096, 64)]:  # 4-d, 3-d; 5.2 MB in 16 bits
        q, k = randn(*shape, dtype=dtype, requires_grad=True), randn(*shape, dtype=dtype, requires_grad=True)
        oq, ok = apply_rotary_qk(q, k, cos, sin, impl="cpu")
        dq, dk = torch.ones_like(oq), torch.ones_like(ok)  # the backward's inputs
        gq, gk = torch.autograd.grad((oq, ok), (q, k), (dq, dk))
        for x, y in ((q, oq), (k, ok), (dq, gq), (dk, gk)):
            assert 1024 <= _mod4k(y, x) <= 3072 and y.data_ptr() % 64 == 0, (shape, dtype)
            assert y.shape == x.shape and y.dtype == x.dtype and y.is_contiguous()
        iq, ik = apply_rotary_qk(q.detach().clone(), k.detach().clone(), cos, sin, impl="cpu", inplace=True)
        assert torch.equal(oq, iq) and torch.equal(ok, ik)  # lockstep gives the bits of one block at a time
    # a strided input keeps its own layout (torch.empty_like), as before
    x = randn(1, 4096, 2, 64, dtype=dtype).transpose(1, 2)
    out, _ = apply_rotary_qk(x, x, cos, sin, impl="cpu")
    assert out.stride() == x.stride()
    small = randn(1, 2, 4096, 64, dtype=dtype)
    assert cpu.empty_like(small, (cos, sin)).untyped_storage().nbytes() == small.nbytes  # torch's own


@on_cpu_only
def test_cpu_outputs_keep_off_the_table_modulo_4k():
    """Where the table sits where the output would (2 KiB from x modulo 4 KiB), the output moves: at least 512 B
    from cos and sin, still 1-3 KiB from x."""
    from harness.rope import cpu
    x = torch.empty(5, 8192, 64, dtype=torch.bfloat16)  # 5 MiB: streamed
    raw = torch.empty(3 * 4096 // 4, dtype=torch.float32)
    for c_at, s_at in [(2048, 2048 + 1024), (2048, 2048 - 1024), (1536, 2560), (2048, 2048)]:
        def placed(at):  # a float32 tensor starting `at` bytes past x modulo 4 KiB
            skip = (x.data_ptr() + at - raw.data_ptr()) % 4096 // 4
            return raw[skip:skip + 32]
        c, s = placed(c_at), placed(s_at)
        y = cpu.empty_like(x, (c, s))
        assert 1024 <= _mod4k(y, x) <= 3072, (c_at, s_at)
        away = min(min(m, 4096 - m) for m in (_mod4k(y, c), _mod4k(y, s)))
        assert away >= 512, (c_at, s_at, _mod4k(y, x), away)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("impl", [*(["cpu"] if DEVICE == "cpu" else []), "eager", "complex"])
def test_gradcheck_fp64(impl, layout):
    cos, sin = tables(8, pos=torch.tensor([3, 70000, 131072]))
    x = randn(1, 3, 3, 8, dtype=torch.float64, requires_grad=True)
    fn = lambda x: IMPLS[impl](x, cos.double(), sin.double(), layout)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    if impl == "cpu":  # the backward is the same Function: second derivatives come for free
        assert torch.autograd.gradgradcheck(fn, (x,))


@needs_triton
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_gradcheck_fp64_triton(layout):
    """Small: the interpreter costs ~50 ms per launch and gradcheck launches 2 x numel times."""
    cos, sin = tables(4, pos=torch.tensor([5, 131072]))
    x = randn(1, 1, 2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: IMPLS["triton"](x, cos.double(), sin.double(), layout), (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("impl", FUSED)
def test_backward_q_and_k_is_the_inverse_rotation(impl, dtype):
    """d/dx of R(t) x is R(t)^T = R(-t): compare with the oracle's gradient (GQA, partial, in place too)."""
    cos, sin = tables(32)
    q = randn(1, 3, len(POS), 32, dtype=dtype, requires_grad=True)
    k = randn(1, 1, len(POS), 32, dtype=dtype, requires_grad=True)
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    rq, rk = apply_rotary_qk(q, k, cos, sin, "interleaved", impl=impl)
    dq, dk = torch.autograd.grad((rq, rk), (q, k), (gq, gk))
    for g, d in ((gq, dq), (gk, dk)):
        check(d, g, cos, -sin, "interleaved", impl)  # R(-t) g, same error bound as a forward
    qi, ki = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    rq, rk = apply_rotary_qk(qi * 1, ki * 1, cos, sin, "interleaved", impl=impl, inplace=True)
    assert torch.equal(torch.autograd.grad((rq, rk), (qi, ki), (gq, gk))[0], dq)


@pytest.mark.parametrize("impl", FUSED)
def test_table_gradient_goes_through_eager(impl):
    """Learned frequencies (rope_learned_freq) need d/dcos, d/dsin: the fused front end uses eager."""
    cos, sin = (t.double().requires_grad_() for t in tables(8, pos=torch.tensor([1, 9])))
    x = randn(1, 2, 2, 8, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda c, s: IMPLS[impl](x, c, s, "half"), (cos, sin))


OUTSIDE = [p for p in external_rope.BUILDERS if external_rope.available(p) and (DEVICE == "cuda" or p == "hf")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("provider", list(external_rope.BUILDERS))
def test_outside_kernels_within_the_same_bounds(provider, layout, dtype):
    """The kernels timed beside ours in `make bench` compute the same rotation (GQA, positions to 131072)."""
    if layout not in external_rope.LAYOUTS[provider]:
        pytest.skip(f"{provider} does only {list(external_rope.LAYOUTS[provider])} layout")
    if provider not in OUTSIDE:
        pytest.skip(f"{provider}: on a GPU where the package imports (HARNESS_TEST_DEVICE=cuda)")
    cos, sin = tables(64, partial=1.0)
    q, k = randn(2, 4, len(POS), 64).to(dtype), randn(2, 1, len(POS), 64).to(dtype)
    oq, ok = external_rope.apply(provider, q, k, cos, sin, layout)
    check(oq, q, cos, sin, layout, provider)
    check(ok, k, cos, sin, layout, provider)


@on_cpu_only
def test_auto_on_cpu_is_the_measured_fastest():
    """`auto` -> cpu kernel on CPU because the committed baseline measured it faster than eager (where it
    cannot be built: eager, tests/test_rope_dispatch.py)."""
    import json
    import pathlib
    base = json.loads((pathlib.Path(__file__).parents[1] / "results/baselines/kernels-cpu.json").read_text())["R"]
    assert base["cpu/fwd/half/float32/prefill"] > max(base["eager/fwd/half/float32/prefill"],
                                                       base["complex/fwd/half/float32/prefill"])
    cos, sin = tables(32)
    from harness.rope import cpu
    assert pick(torch.zeros(1, 1, len(POS), 32), cos, sin) == ("cpu" if cpu.unavailable() is None else "eager")
    assert pick(torch.zeros(1, 1, len(POS), 32), cos.requires_grad_(), sin) == "eager"


@pytest.mark.skipif(DEVICE != "cuda", reason="the GPU's choice; runs with HARNESS_TEST_DEVICE=cuda")
def test_auto_on_cuda_is_triton():
    cos, sin = tables(32)
    assert pick(randn(1, 1, len(POS), 32), cos, sin) == "triton"


def test_fused_errors_name_the_choices():
    cos, sin = tables(32)
    x = randn(1, 2, len(POS), 32)
    fused = FUSED_NAMES[0]
    with pytest.raises(ValueError, match=r"unknown rope layout 'halve'; expected one of \['half', 'interleaved'\]"):
        IMPLS[fused](x, cos, sin, "halve")
    with pytest.raises(ValueError, match="broadcastable to \\(T, R/2\\).*use impl='eager'"):
        IMPLS[fused](x, cos.expand(3, *cos.shape), sin.expand(3, *sin.shape))
    with pytest.raises(ValueError, match="unknown rope impl 'fast'; expected one of"):
        apply_rotary_qk(x, x, cos, sin, impl="fast")


def test_importing_harness_imports_no_kernel():
    """Registration is lazy: no triton import, no gcc, no torch.compile until a kernel is called."""
    code = ("import sys, harness.rope, harness.model; "
            "bad = [m for m in ('triton', 'harness.rope.cpu', 'harness.rope.compiled') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
