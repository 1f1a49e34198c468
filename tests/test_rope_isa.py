"""The C kernel's dispatch levels (harness/rope/cpu.py, csrc/): each level this CPU runs gives the same bits,
bf16/fp16 outputs round like torch's own conversion, and the level is chosen, refused and recorded as said.

Outside reference for the rounding: torch's fp32 -> bf16/fp16 conversion (round to nearest, ties to even;
c10/util/BFloat16.h round_to_nearest_even, and IEEE 754 binary16). NaN: torch writes the canonical 0x7FC0,
the kernel keeps sign and payload and sets the quiet bit (what its scalar path always did), so NaN is
checked as NaN. Between levels, bf16 outputs agree bit for bit, NaN included; fp32/fp16 NaN bits may
differ (which operand's NaN an x86 add or multiply passes on depends on the operand order the compiler
picked), so there every other value agrees bit for bit and NaN stays NaN.
"""
import pytest
import torch

from harness.rope import cpu
from harness.rope.apply import resolved_params, rotary_table
from harness.rope.frequencies import frequencies

pytestmark = pytest.mark.skipif(cpu.unavailable() is not None, reason=f"no C kernel here: {cpu.unavailable()}")
BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def levels():
    """The dispatch levels this CPU runs, narrowest first."""
    best = cpu.library().rope_isa_supported()
    return list(cpu.ISAS[:best + 1])


@pytest.fixture
def at_level(monkeypatch):
    """Run the kernel at a given level for one test (the choice is cached per process)."""
    def use(level):
        monkeypatch.setattr(cpu, "_ISA", [level])
    return use


def rotate(x, cos, sin, interleaved, sign, out=None):
    out = torch.empty_like(x) if out is None else out
    cpu.launch((x,), (out,), cos, sin, interleaved=interleaved, sign=sign)
    return out


def hard_inputs(shape, seed=0):
    """Normal samples over 80 decades (denormal and overflowing products), with NaN and +-inf sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    n = torch.Size(shape).numel()
    scale = torch.logspace(-42, 38, n)[torch.randperm(n, generator=g)].reshape(shape)
    x = torch.randn(shape, generator=g) * scale
    x.view(-1)[::97] = float("nan")
    x.view(-1)[5::101] = float("inf")
    x.view(-1)[7::89] = -float("inf")
    return x


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("head_dim", [64, 96, 40])  # whole vectors, 3 bf16 steps of 16, a scalar rest
def test_levels_agree_bit_for_bit(at_level, dtype, head_dim):
    cos, sin = rotary_table(frequencies("default", head_dim, 10000.0)[0], torch.arange(37))
    x = hard_inputs((2, 3, 37, head_dim)).to(dtype)
    wide = torch.randn(2, 3, 37, 2 * head_dim).to(dtype)
    outs = {}
    for level in levels():
        at_level(level)
        for inter in (0, 1):
            for sign in (1.0, -1.0):
                outs.setdefault((inter, sign), []).append(rotate(x, cos, sin, inter, sign).view(BITS[dtype]))
                strided = wide[..., ::2].copy_(x)  # the D-stride path: no vector steps
                outs[(inter, sign)].append(rotate(strided, cos, sin, inter, sign).view(BITS[dtype]))
    for key, got in outs.items():
        nan = got[0].view(dtype).isnan()
        assert all(torch.equal(g.view(dtype).isnan(), nan) for g in got[1:]), f"NaN moved at {key}"
        if dtype != torch.bfloat16:
            got = [torch.where(nan, 0, g) for g in got]
        assert all(torch.equal(got[0], g) for g in got[1:]), f"levels {levels()} disagree at {key}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_output_is_torchs_rounding_of_the_fp32_result(at_level, dtype):
    cos, sin = rotary_table(frequencies("default", 64, 10000.0)[0], torch.arange(37))
    x = hard_inputs((2, 3, 37, 64), seed=1).to(dtype)
    for level in levels():
        at_level(level)
        for inter in (0, 1):
            got = rotate(x, cos, sin, inter, 1.0)
            want = rotate(x.float(), cos, sin, inter, 1.0).to(dtype)
            nan = want.isnan()
            assert torch.equal(got.isnan(), nan)
            assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16)), (level, inter)


def test_bf16_rounding_of_chosen_values(at_level):
    """x = 1 and a table whose cos holds the values to round (sin 0): the output is round(cos) exactly."""
    bits = [0x3F808000, 0x3F818000, 0x3F80C000, 0x7F7FFFFF, 0x7F7F7FFF, 0x00000001, 0x00008000, 0x00018000,
            0x807FFFFF, 0xBF808000, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x3F7FFFFF, 0x477FE000]
    c = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    n = len(bits)  # 16 pairs: one full bf16 vector step of the half layout, two of the interleaved one
    cos, sin = c.repeat(3, 1), torch.zeros(3, n)
    x = torch.ones(1, 1, 3, 2 * n, dtype=torch.bfloat16)
    want = c.to(torch.bfloat16).view(torch.int16)  # ties to even, max finite rounding up to inf
    for level in levels():
        at_level(level)
        for inter in (0, 1):
            y = rotate(x, cos, sin, inter, 1.0)[0, 0].view(torch.int16)
            first = y[:, :n] if inter == 0 else y[:, 0::2]
            assert torch.equal(first, want.expand(3, n)), (level, inter, first[0].tolist(), want.tolist())


def test_nan_keeps_sign_and_payload_with_the_quiet_bit_set(at_level):
    nans = torch.tensor([0x7F800001, 0xFFC12345, 0x7FA00000], dtype=torch.int64).to(torch.int32)
    c = torch.cat([nans.view(torch.float32), torch.ones(13)])
    x = torch.ones(1, 1, 1, 32, dtype=torch.bfloat16)
    for level in levels():
        at_level(level)
        y = rotate(x, c[None], torch.zeros(1, 16), 0, 1.0)[0, 0, 0, :3].view(torch.int16).to(torch.int32) & 0xFFFF
        assert y.tolist() == [((int(b) & 0xFFFFFFFF) >> 16) | 0x40 for b in nans], level


def test_an_unknown_or_missing_level_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(cpu, "_ISA", [])
    monkeypatch.setenv("HARNESS_ROPE_ISA", "avx512")
    with pytest.raises(ValueError, match=r"^HARNESS_ROPE_ISA='avx512': unknown level; choose one of "
                                         r"\['generic', 'avx2', 'avx512bf16'\]$"):
        cpu.isa()
    monkeypatch.setattr(cpu, "_ISA", [])
    monkeypatch.setenv("HARNESS_ROPE_ISA", "generic")
    assert cpu.isa() == "generic"


def test_rows_record_the_level_that_ran():
    assert resolved_params({"impl": "auto"}, "cpu") == {"impl": "cpu", "cpu_isa": cpu.isa()}
    assert resolved_params({"impl": "eager"}, "cpu") == {"impl": "eager"}
