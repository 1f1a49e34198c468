"""The usage cases (harness/conformance/usage.py) and the output checks: each planted bug of how RoPE is used (a
cast reaching the frequencies, a cache keyed on the length only, a decode offset ignored, a wrong output dtype)
fails with its name, and the correct reference passes. The reference values are the fp64 oracle's
(harness/conformance/cases.py), computed at run time."""
import sys

import torch

from conformance_kit import rotary, sampled, with_inv
from harness.conformance import bugs, run, usage
from harness.conformance import conventions as C
from harness.conformance.__main__ import main
from harness.rope.frequencies import frequencies

HALF = C.Calling("positions", "half")
good = with_inv(lambda rope, inv, att: (inv, att))  # our frequencies, an fp32 table: correct


def _freqs(rope, n=None):
    kw = {k: v for k, v in rope.items() if k not in ("rope_type", "rope_theta", "head_dim", "max_position_embeddings")}
    return frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], n, **kw)


class Reference(torch.nn.Module):
    """Correct after a cast: the frequencies a plain fp32 attribute, which .half() / .to() do not reach."""

    def __init__(self, rope):
        super().__init__()
        self.inv, self.att = _freqs(rope)

    def forward(self, q, k, positions):
        return rotary(q, k, positions, self.inv, self.att)


class Buffered(Reference):
    """inv_freq a buffer, as HF's LlamaRotaryEmbedding holds it: a model's cast makes it 16-bit."""

    def __init__(self, rope):
        super().__init__(rope)
        self.register_buffer("inv_freq", self.inv, persistent=False)

    def forward(self, q, k, positions):
        return rotary(q, k, positions, self.inv_freq.float(), self.att)


def _usage(fn, dtype, kinds, build=None, types=("default", "linear")):
    rows, _ = usage.run_usage(fn, HALF, dtype, kinds=kinds, types=types, build=build)
    return [(r["case"].split(":", 2)[2], r["result"], r["bug"]) for r in rows]


def test_correct_reference_passes_every_usage_case():
    for dtype in ("bf16", "fp16"):
        got = _usage(good, dtype, usage.KINDS, build=Reference)
        assert {res for _, res, _ in got} == {"pass"} and len(got) == 2 + 4 + 4, got


def test_cast_reaching_the_frequencies_is_named():
    for dtype in ("bf16", "fp16"):
        got = _usage(good, dtype, ("cast",), build=Buffered)
        assert {(res, bug) for _, res, bug in got} == {("FAIL", bugs.CAST_FREQ)}, got
    assert {res for _, res, _ in _usage(good, "fp32", ("cast",), build=Buffered)} == {"skip"}  # casts nothing


def test_hf_llama_rotary_embedding_after_a_cast_holds_16_bit_frequencies():
    """transformers 5.23.0: LlamaRotaryEmbedding keeps inv_freq and original_inv_freq as nn.Buffer, so
    .to(torch.bfloat16) / .half() round them to 16 bits (measured: results/conformance/README.md)."""
    from harness.conformance.libraries import transformers as hf
    got = _usage(hf.llama, "bf16", ("cast",), build=hf.build_llama, types=("default",))
    assert got == [("default", "FAIL", bugs.CAST_FREQ)]


def test_rotary_embedding_torch_after_a_cast_computes_its_phase_in_16_bits():
    """rotary-embedding-torch 0.9.1: freqs is an nn.Parameter (cast with the model), the positions are built in the
    input's dtype (get_seq_pos) and multiplied in it: the phase itself is 16-bit."""
    from harness.conformance.libraries import rotary_embedding_torch as ret
    rows, _ = usage.run_usage(ret.rotate_queries_or_keys, C.Calling("positions", "interleaved"), "bf16",
                              kinds=("cast",), types=("default",), build=ret.build)
    assert [(r["result"], r["bug"]) for r in rows] == [("FAIL", bugs.CAST_PHASE)], rows


_CACHE = {}


def cached_by_length(q, k, positions, *, rope):
    """A module-level table cache keyed by the length only: the second base or factor gets the first's table."""
    n = int(positions.max()) + 1
    if n not in _CACHE:
        _CACHE[n] = _freqs(rope, n)
    return rotary(q, k, positions, *_CACHE[n])


def test_a_cache_keyed_on_the_length_only_is_named():
    _CACHE.clear()
    got = _usage(cached_by_length, "fp32", ("shared",))
    assert [res for _, res, _ in got] == ["pass", "FAIL", "FAIL", "pass"], got  # A, B, C (linear), A again
    assert got[1][2] == f"{bugs.STALE_TABLE} (A default b1e4)" and got[2][2].startswith(bugs.STALE_TABLE), got
    _CACHE.clear()
    assert {res for _, res, _ in _usage(good, "fp32", ("shared",))} == {"pass"}


class LastBuilt(Reference):
    """Every instance reads the table of the one built last (a class attribute): run A again gets C's."""
    table = None

    def __init__(self, rope):
        super().__init__(rope)
        LastBuilt.table = (self.inv, self.att)

    def forward(self, q, k, positions):
        return rotary(q, k, positions, *LastBuilt.table)


def test_a_table_shared_by_every_instance_fails_when_a_is_run_again():
    got = _usage(good, "fp32", ("shared",), build=LastBuilt)
    assert [res for _, res, _ in got] == ["pass", "pass", "pass", "FAIL"], got
    assert got[3][2] == f"{bugs.STALE_TABLE} (C linear b1e4)", got


def offset_ignored(q, k, positions, *, rope):
    """Positions taken as 0..n-1 whatever was asked: right for a whole sequence, wrong for one new position."""
    return good(q, k, torch.arange(len(positions)), rope=rope)


def test_a_decode_offset_ignored_is_named():
    got = _usage(offset_ignored, "fp32", ("decode",))
    assert [(label, res, bug) for label, res, bug in got] == [
        ("default whole sequence", "pass", ""), ("default one at a time", "FAIL", bugs.DECODE_RESTART),
        ("linear whole sequence", "pass", ""), ("linear one at a time", "FAIL", bugs.DECODE_RESTART)], got


def widened(q, k, positions, *, rope):
    """Right values, returned in fp32 for a bf16 input (the next layer would run in fp32)."""
    return tuple(t.float() for t in good(q, k, positions, rope=rope))


def test_a_wrong_output_dtype_is_named_in_golden_and_usage_cases():
    rows, _ = run.run(widened, "positions", "half", "bf16", rope_types=["default"], positions=sampled())
    assert {r["result"] for r in rows} == {"FAIL"}
    assert {r["bug"] for r in rows} == {f"{bugs.WRONG_DTYPE} (float32 for a bfloat16 input)"}
    got = _usage(widened, "bf16", ("shared", "decode"))
    assert {(res, bug) for _, res, bug in got} == {("FAIL", f"{bugs.WRONG_DTYPE} (float32 for a bfloat16 input)")}


def test_x_transformers_fake_after_a_cast_and_torchtune_fake(monkeypatch):
    """x-transformers registers inv_freq as a buffer and casts the positions to its dtype (t.type_as(inv_freq)),
    so after .to(bfloat16) both, and their product, are 16-bit; torchtune's fake keeps its table a plain attribute
    and passes."""
    import pathlib
    from harness.conformance.libraries import torchtune, x_transformers
    fakes = pathlib.Path(__file__).with_name("conformance_fakes")
    monkeypatch.syspath_prepend(str(fakes))
    for name in [n for n in sys.modules if n.split(".")[0] in ("x_transformers", "torchtune", "_rot")]:
        monkeypatch.delitem(sys.modules, name)
    inter = C.Calling("positions", "interleaved")
    rows, _ = usage.run_usage(x_transformers.rope, inter, "bf16", kinds=("cast",), types=("default",),
                              build=x_transformers.build)
    assert [(r["result"], r["bug"]) for r in rows] == [("FAIL", bugs.CAST_PHASE)], rows
    bshd = C.Calling("positions", "interleaved", "bshd")
    rows, _ = usage.run_usage(torchtune.rope, bshd, "bf16", kinds=("cast", "shared"), types=("default",),
                              build=torchtune.build)
    assert {r["result"] for r in rows} == {"pass"}, rows
    for name in [n for n in sys.modules if n.split(".")[0] in ("x_transformers", "torchtune", "_rot")]:
        del sys.modules[name]


def test_cli_usage_runs_in_a_worker_and_refuses_an_unknown_kind(capsys):
    assert main(["--apply", "test_conformance_usage:cached_by_length", "--convention", "positions",
                 "--rope-type", "default", "--usage", "shared"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL   {bugs.STALE_TABLE} (A default b1e4)" in out and "usage:shared:4 A again" in out, out
    assert main(["--apply", "test_conformance_usage:good", "--usage", "replay"]) == 2
    assert "unknown --usage ['replay']" in capsys.readouterr().err


def dense_only_cached(q, k, positions, *, rope):
    """Code with no positions argument (it rotates 0..L-1, as equinox's RotaryPositionalEmbedding) and a table cache
    keyed on the size only (equinox 0.13.8 keys it by (embedding_size, dtype), results/conformance/field.md)."""
    if positions.tolist() != list(range(len(positions))):
        raise ValueError("rotates positions 0..L-1 only: call with --positions dense")
    return cached_by_length(q, k, positions, rope=rope)


def test_code_without_positions_runs_shared_densely_and_skips_decoding_at_an_offset():
    """--positions dense: the shared steps run over 0..L-1 (so the stale cache is found), the one-position decode
    steps are skips (no offset to decode at), never errors."""
    _CACHE.clear()
    dense = C.Calling("positions", "half", positions="dense")
    rows, _ = usage.run_usage(dense_only_cached, dense, "fp32", kinds=("shared", "decode"), types=("default",))
    got = {r["case"]: (r["result"], r["bug"]) for r in rows}
    _CACHE.clear()
    assert got["usage:shared:2 B default b5e5"] == ("FAIL", f"{bugs.STALE_TABLE} (A default b1e4)"), got
    assert got["usage:shared:1 A default b1e4"][0] == "pass" and got["usage:decode:default whole sequence"][0] == "pass"
    assert got["usage:decode:default one at a time"][0] == "skip", got
