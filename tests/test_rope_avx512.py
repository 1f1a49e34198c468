"""Every dispatch level of the C kernel (generic, avx2, avx512bf16) gives the same bits as an outside oracle, NaN
payloads included, on inputs built to break it: denormals, NaN with random payloads (quiet and signalling, both
signs, in q/k and in the table), +-inf, +-0, odd row lengths, partial rotary, strided inputs and outputs, in place
and out of place, outputs large enough to be streamed, forward and backward (sign -1).

The oracle is torch arithmetic in fp32 with the NaN of every operation chosen explicitly, as harness/rope/csrc/
rope_cpu.c defines it: s' = sign x s, y = (a x c) - (b x s'), z = (b x c) + (a x s'); an operation that gives NaN
gives its first NaN operand with the quiet bit set, else the default NaN 0xFFC00000 (x86's rule, operand order as
written). Then bf16: torch's round to nearest even, NaN (u >> 16) | 0x40; fp16: torch's conversion, NaN
sign | 0x7E00 | the payload's top bits. A level the CPU lacks is skipped with the reason.
"""
import pytest
import torch

from harness.rope import cpu
from harness.rope.apply import rotary_table
from harness.rope.frequencies import frequencies

pytestmark = pytest.mark.skipif(cpu.unavailable() is not None, reason=f"no C kernel here: {cpu.unavailable()}")
INT = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
QUIET, DEFAULT_NAN = 0x00400000, -0x00400000  # 0xFFC00000 as int32
# (D, R): whole vectors, 32 + 16 bf16 steps, a scalar rest, odd D with partial rotary, tiny
SHAPES = [(64, 64), (96, 96), (40, 40), (67, 64), (130, 96), (35, 18), (2, 2)]


def runnable():
    return list(cpu.ISAS[:cpu.library().rope_isa_supported() + 1])


@pytest.fixture(params=cpu.ISAS)
def level(request, monkeypatch):
    if request.param not in runnable():
        pytest.skip(f"this CPU lacks the {request.param} level (it runs {runnable()}: /proc/cpuinfo flags)")
    monkeypatch.setattr(cpu, "_ISA", [request.param])
    return request.param


# ---- the oracle ----
def _pinned(op, u, v):
    """op(u, v) in fp32 with x86's NaN: the first NaN operand, quieted, else the default NaN (int32 bits)."""
    r = op(u.view(torch.float32), v.view(torch.float32))
    nan = torch.where(u.view(torch.float32).isnan(), u | QUIET,
                      torch.where(v.view(torch.float32).isnan(), v | QUIET, DEFAULT_NAN))
    return torch.where(r.isnan(), nan, r.view(torch.int32))


def _to_f32_bits(x):
    """x (any of the three dtypes) as fp32 bits: exact; a 16-bit NaN keeps sign and payload (top bits)."""
    if x.dtype == torch.float32:
        return x.view(torch.int32).clone()
    h = x.view(torch.int16).to(torch.int32) & 0xFFFF
    if x.dtype == torch.bfloat16:
        return h << 16
    nan = ((h & 0x8000) << 16) | 0x7F800000 | ((h & 0x3FF) << 13)
    return torch.where(x.isnan(), nan, x.float().view(torch.int32))


def _from_f32_bits(u, dtype):
    f = u.view(torch.float32)
    if dtype == torch.float32:
        return u
    u64 = u.to(torch.int64) & 0xFFFFFFFF
    if dtype == torch.bfloat16:
        nan = (u64 >> 16) | 0x40
    else:
        nan = ((u64 >> 16) & 0x8000) | 0x7E00 | ((u64 >> 13) & 0x3FF)
    plain = f.to(dtype).view(torch.int16).to(torch.int64) & 0xFFFF
    out = torch.where(f.isnan(), nan, plain)
    return torch.where(out >= 0x8000, out - 0x10000, out).to(torch.int16)


def oracle(x, cos, sin, interleaved, sign):
    """The bits (x's int view) of the rotation of x (B, H, T, D) by the (T, R/2) table, pass-through kept."""
    r = 2 * cos.shape[-1]
    u = _to_f32_bits(x)
    if interleaved:
        a, b = u[..., 0:r:2], u[..., 1:r:2]
    else:
        a, b = u[..., :r // 2], u[..., r // 2:r]
    c, s = cos.contiguous().view(torch.int32), sin.contiguous().view(torch.int32)
    s = _pinned(torch.mul, torch.full_like(s, 0x3F800000 if sign > 0 else -0x40800000), s)  # sign x s
    mul = lambda p, q: _pinned(torch.mul, p, q)  # noqa: E731
    y = _pinned(torch.sub, mul(a, c), mul(b, s))
    z = _pinned(torch.add, mul(b, c), mul(a, s))
    out = x.view(INT[x.dtype]).clone()
    if interleaved:
        out[..., 0:r:2], out[..., 1:r:2] = _from_f32_bits(y, x.dtype), _from_f32_bits(z, x.dtype)
    else:
        out[..., :r // 2], out[..., r // 2:r] = _from_f32_bits(y, x.dtype), _from_f32_bits(z, x.dtype)
    return out


# ---- inputs ----
def _nans(n, dtype, g):
    """n NaN bit patterns of dtype (as its int view): random sign, quiet or signalling, random nonzero payload."""
    wide = dtype == torch.float32
    exp, mant = (0x7F800000, 23) if wide else ((0x7F80, 7) if dtype == torch.bfloat16 else (0x7C00, 10))
    payload = torch.randint(1, 1 << mant, (n,), generator=g, dtype=torch.int64)
    sign = torch.randint(0, 2, (n,), generator=g, dtype=torch.int64) << (31 if wide else 15)
    bits = sign | exp | payload
    return (torch.where(bits >= 1 << 31, bits - (1 << 32), bits).to(torch.int32) if wide
            else torch.where(bits >= 1 << 15, bits - (1 << 16), bits).to(torch.int16))


def sprinkle(t, g, rate=0.03):
    """t with about rate of its values each replaced by NaN (random payloads), +-inf, +-0 and a denormal."""
    flat = t.view(INT[t.dtype]).view(-1)
    n = flat.numel()
    for kind in range(5):
        idx = torch.randperm(n, generator=g)[:max(1, int(rate * n))]
        if kind == 0:
            flat[idx] = _nans(len(idx), t.dtype, g)
        else:
            tiny = {torch.float32: 1e-40, torch.bfloat16: 1e-39, torch.float16: 1e-6}[t.dtype]
            val = (float("inf"), 0.0, tiny, -tiny)[kind - 1]
            sg = torch.randint(0, 2, (len(idx),), generator=g).to(t.dtype) * 2 - 1
            t.view(-1)[idx] = (sg * val).to(t.dtype) if kind < 3 else torch.tensor(val, dtype=t.dtype)
    return t


def hard_inputs(shape, dtype, seed):
    """Normal samples over the dtype's whole range (denormal and overflowing products), then sprinkled."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-8.0, 4.8) if dtype == torch.float16 else (-44.0, 38.0)
    mag = 10 ** (lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float64))
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * mag).to(dtype)
    return sprinkle(x, g)


def hard_table(t, r, seed):
    cos, sin = rotary_table(frequencies("default", r, 10000.0)[0], torch.arange(t) * 977)
    g = torch.Generator().manual_seed(seed + 1)
    return sprinkle(cos.contiguous(), g, 0.02), sprinkle(sin.contiguous(), g, 0.02)


def rotate(x, cos, sin, interleaved, sign, out=None):
    out = torch.empty_like(x) if out is None else out
    cpu.launch((x,), (out,), cos, sin, interleaved=interleaved, sign=sign)
    return out


def views(x):
    """x's values in the layouts the kernel takes: contiguous, D-strided, T-strided, (B, T, H, D) memory."""
    b, h, t, d = x.shape
    wide = torch.empty(b, h, t, 2 * d, dtype=x.dtype)[..., ::2]
    tall = torch.empty(b, h, 2 * t, d, dtype=x.dtype)[:, :, ::2]
    bthd = torch.empty(b, t, h, d, dtype=x.dtype).transpose(1, 2)
    return {"contiguous": x.clone(), "D stride 2": wide.copy_(x), "T stride 2": tall.copy_(x),
            "BTHD": bthd.copy_(x)}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_level_gives_the_oracles_bits(level, dtype):
    for i, (d, r) in enumerate(SHAPES):
        # (3, 5, 37): heads in lockstep groups of 4 and 1, and 2 threads that split rows inside a (b, h) block
        x = hard_inputs((2, 3, 37, d) if i % 2 == 0 else (3, 5, 37, d), dtype, seed=i)
        cos, sin = hard_table(37, r, seed=i)
        for inter in (0, 1):
            for sign in (1.0, -1.0):
                want = oracle(x, cos, sin, inter, sign)
                for name, v in views(x).items():
                    got = rotate(v, cos, sin, inter, sign).view(INT[dtype])
                    bad = (got != want).nonzero()
                    assert len(bad) == 0, (f"{level} {dtype} D{d} R{r} inter={inter} sign={sign} {name}: "
                                           f"{len(bad)} differ, first at {bad[0].tolist()}: got "
                                           f"{got[tuple(bad[0])]:#x} want {want[tuple(bad[0])]:#x}")
                    out = views(x)[name]  # strided output too
                    rotate(v, cos, sin, inter, sign, out=out)
                    assert torch.equal(out.view(INT[dtype]), want), (level, dtype, d, r, inter, sign, name, "out")
                    v = views(x)[name]  # in place: pass-through untouched, the rest as out of place
                    rotate(v, cos, sin, inter, sign, out=v)
                    assert torch.equal(v.view(INT[dtype]), want), (level, dtype, d, r, inter, sign, name, "in place")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_streamed_and_threaded_outputs_give_the_oracles_bits(level, dtype):
    """Out of place and past STREAM_MIN (4 MB): non-temporal stores, 2 OpenMP threads."""
    x = hard_inputs((2, 8, 2048, 64), dtype, seed=7)  # 2M values: 4 MB in 16 bits, 8 MB in fp32
    x = torch.cat([x, x.flip(0)])  # 8 MB / 16 MB
    cos, sin = hard_table(2048, 64, seed=7)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for inter in (0, 1):
            for sign in (1.0, -1.0):
                got = rotate(x, cos, sin, inter, sign)
                assert got.data_ptr() % 64 == 0
                assert torch.equal(got.view(INT[dtype]), oracle(x, cos, sin, inter, sign)), (level, inter, sign)
    finally:
        torch.set_num_threads(threads)


def test_bf16_denormal_results_are_rounded_not_flushed(level):
    """x = 1 and cos holding fp32 denormals (sin 0): y = cos exactly, which bf16 rounds to nearest even where
    vcvtne2ps2bf16 alone would give 0; 64 pairs: the avx512bf16 level's 32-pair steps, both layouts."""
    den = [0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x807FFFFF, 0x00400000, 0x80008001, 0x0000FFFF]
    c = torch.tensor(den * 8, dtype=torch.int64).to(torch.int32).view(torch.float32)
    want = torch.tensor([((b & 0xFFFFFFFF) + 0x7FFF + (((b & 0xFFFFFFFF) >> 16) & 1)) >> 16 for b in den * 8])
    x = torch.ones(1, 1, 1, 128, dtype=torch.bfloat16)
    for inter in (0, 1):
        y = rotate(x, c[None], torch.zeros(1, 64), inter, 1.0)[0, 0, 0].view(torch.int16).to(torch.int64) & 0xFFFF
        first = y[:64] if inter == 0 else y[0::2]
        assert first.tolist() == want.tolist(), (level, inter)
        assert first.count_nonzero() > 0


def test_nan_operand_order_is_pinned(level):
    """Both operands of a x c NaN (different payloads): a's payload wins, on every level and dtype."""
    for dtype, a_bits, c_bits, want in ((torch.float32, 0x7F812345, 0x7FC00ABC, 0x7FC12345),
                                        (torch.bfloat16, 0x7F81, 0x7FC00ABC, 0x7FC1),
                                        (torch.float16, 0x7C81, 0x7FC00ABC, 0x7E81)):
        n = 64
        x = torch.zeros(1, 1, 1, 2 * n, dtype=dtype)
        x.view(INT[dtype])[..., :n] = a_bits if dtype == torch.float32 else a_bits - 0x10000 * (a_bits >= 0x8000)
        c = torch.full((1, n), c_bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
        y = rotate(x, c, torch.zeros(1, n), 0, 1.0)[0, 0, 0, :n].view(INT[dtype]).to(torch.int64)
        mask = 0xFFFFFFFF if dtype == torch.float32 else 0xFFFF
        assert set((y & mask).tolist()) == {want}, (level, dtype)
