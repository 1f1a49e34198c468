"""The RoPE conformance suite (harness/conformance): its golden data, HF passing it, and every known bug class,
planted into a deliberately broken implementation, caught and named; bad input in one line."""
import sys
import types

import numpy as np
import pytest
import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS as HF_INIT
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as hf_apply

from harness.conformance import bugs, golden, run
from harness.conformance.__main__ import main
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, frequencies
from harness.rope.rotation import eager


def test_shipped_golden_equals_regeneration():
    case_list, shipped = golden.load()
    fresh = golden.generate()
    fresh.pop("meta")
    assert len(case_list) == 60 and sorted(shipped) == sorted(fresh)
    for name, a in fresh.items():
        np.testing.assert_allclose(shipped[name], a, rtol=0, atol=1e-12, err_msg=name)
    assert golden.PATH.stat().st_size < 3_000_000


def _results(rows, check="rotation"):
    return {r["result"] for r in rows if r["check"] == check}


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_hf_apply_rotary_pos_emb_passes(dtype):
    types_ = None if dtype == "fp32" else ["yarn", "proportional"]  # every case in fp32, a sample in half dtypes
    rows, msgs = run.run(hf_apply, "hf", "half", dtype, rope_types=types_)
    assert len(rows) == (60 if dtype == "fp32" else 12) and _results(rows) == {"pass"} and msgs == []


def test_hf_frequencies_pass_and_ours_too():
    # the seq_len-dependent, attention-factor and p-RoPE types here; every type: results/conformance/README.md
    rows, _ = run.run(hf_apply, "hf", "half", "fp32", dict(HF_INIT), ["dynamic", "yarn", "longrope", "proportional",
                                                                      "ntk"])
    assert {r["result"] for r in rows} == {"pass", "skip"}  # skips: ntk, which HF's mapping lacks
    assert sum(r["result"] == "pass" for r in rows) == 2 * 36 and sum(r["result"] == "skip" for r in rows) == 6
    rows, _ = run.run(eager, "x_cos_sin", "half", "fp32", ROPE_INIT_FUNCTIONS, ["ntk", "default"])
    assert {r["result"] for r in rows} == {"pass"}


def test_the_whole_hf_llama_path_passes_in_bf16():
    rows, _ = run.run(run.adapters.hf_llama, "positions", "half", "bf16", rope_types=["yarn", "default"])
    assert _results(rows) == {"pass"}


def test_meta_complex_convention_passes():
    def meta_apply_rotary_emb(xq, xk, freqs_cis):
        # Meta llama/model.py apply_rotary_emb (github.com/meta-llama/llama, model.py), reshape_for_broadcast inlined
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        f = freqs_cis.view(1, xq.shape[1], 1, xq.shape[-1] // 2)
        return (torch.view_as_real(xq_ * f).flatten(3).type_as(xq),
                torch.view_as_real(xk_ * f).flatten(3).type_as(xk))
    rows, _ = run.run(meta_apply_rotary_emb, "complex", "interleaved", "bf16", rope_types=["llama3", "yarn"])
    assert _results(rows) == {"pass"}


def _faulty(fault):
    """A positions-convention RoPE (our frequencies, an fp32 table, eager half rotation) with one bug planted."""
    def fn(q, k, positions, *, rope):
        skip = ("rope_type", "rope_theta", "head_dim", "max_position_embeddings")
        kw = {n: v for n, v in rope.items() if n not in skip}
        inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], int(positions.max()) + 1, **kw)
        pos = positions.float()
        if fault == bugs.ATTENTION:
            att = 1.0
        elif fault == bugs.BF16_INV:
            inv = inv.to(torch.bfloat16).float()
        elif fault == bugs.FP16_POS:
            pos = positions.to(torch.float16).float()
        elif fault == bugs.BF16_POS:
            pos = positions.to(torch.bfloat16).float()
        elif fault == bugs.OFF_BY_ONE:
            pos = pos + 1
        phase = pos[:, None] * inv[None, :]
        cos, sin = phase.cos() * att, phase.sin() * att
        return eager(q, cos, sin, "half"), eager(k, cos, sin, "half")
    return fn


@pytest.mark.parametrize("fault", [bugs.ATTENTION, bugs.BF16_INV, bugs.FP16_POS, bugs.BF16_POS, bugs.OFF_BY_ONE])
def test_planted_table_bug_is_caught_and_named(fault):
    rows, _ = run.run(_faulty(fault), "positions", "half", "fp32", rope_types=["yarn"])
    assert len(rows) == 6 and {(r["result"], r["bug"]) for r in rows} == {("FAIL", fault)}


def test_the_unbroken_planted_implementation_passes():
    rows, _ = run.run(_faulty(None), "positions", "half", "fp32", rope_types=["yarn", "default", "longrope"])
    assert len(rows) == 24 and _results(rows) == {"pass"}


def test_planted_pairing_bugs_are_caught_and_named():
    # an interleaved kernel checked as half, and HF's rotate_half handed interleaved (GLM-style) cos/sin
    rows, _ = run.run(lambda x, c, s: eager(x, c, s, "interleaved"), "x_cos_sin", "half", "fp32",
                      rope_types=["proportional"])
    assert {(r["result"], r["bug"]) for r in rows} == {("FAIL", bugs.PAIRING)}
    rows, _ = run.run(hf_apply, "hf", "interleaved", "fp32", rope_types=["llama3"])
    assert {(r["result"], r["bug"]) for r in rows} == {("FAIL", bugs.PAIRING)}


def test_planted_proportional_read_as_partial_is_caught_and_named():
    def partial_style(head_dim, base, seq_len=None, *, partial_rotary_factor=1.0, factor=1.0):
        return ROPE_INIT_FUNCTIONS["default"](head_dim, base, partial_rotary_factor=partial_rotary_factor)
    rows, _ = run.run(eager, "x_cos_sin", "half", "fp32", {"proportional": partial_style}, ["proportional"])
    p1 = {(r["result"], r["bug"]) for r in rows if "-p1-" in r["case"]}
    partial = {(r["check"], r["result"], r["bug"]) for r in rows if "-p0.25-" in r["case"]}
    assert p1 == {("pass", "")}  # at p = 1 the two readings agree
    assert partial == {("frequencies", "FAIL", bugs.PROPORTIONAL), ("rotation", "FAIL", bugs.PROPORTIONAL)}


@pytest.fixture
def planted(monkeypatch):
    mod = types.ModuleType("conformance_planted")
    mod.no_bf16 = lambda x, c, s: (_ for _ in ()).throw(TypeError("bf16 not supported")) \
        if x.dtype == torch.bfloat16 else eager(x, c, s)
    mod.nan = lambda x, c, s: eager(x, c, s) * float("nan")
    mod.one_arg = lambda x: x
    monkeypatch.setitem(sys.modules, "conformance_planted", mod)
    return mod


@pytest.mark.parametrize("argv, needle", [
    (["--apply", "no_such_pkg.mod:fn"], "cannot import no_such_pkg.mod"),
    (["--apply", "harness.rope.rotation:nothing"], "has no attribute 'nothing'"),
    (["--apply", "harness.rope.rotation"], "expected pkg.module:function"),
    (["--apply", "conformance_planted:one_arg", "--convention", "x_cos_sin"], "cannot take the 'x_cos_sin'"),
    (["--apply", "harness.rope.rotation:eager", "--layout", "diagonal"], "unknown --layout 'diagonal'"),
    (["--apply", "harness.rope.rotation:eager", "--dtype", "fp8"], "unknown --dtype 'fp8'"),
    (["--apply", "harness.rope.rotation:eager", "--convention", "jax"], "unknown --convention 'jax'"),
    (["--apply", "harness.rope.rotation:eager", "--rope-type", "xpos"], "unknown --rope-type ['xpos']"),
])
def test_bad_arguments_are_one_line_and_exit_2(planted, capsys, argv, needle):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and needle in err


@pytest.mark.parametrize("fn, dtype, needle", [("no_bf16", "bf16", "TypeError: bf16 not supported"),
                                               ("nan", "fp32", "NaN outputs")])
def test_case_failures_are_one_line_each_and_the_table_still_prints(planted, capsys, fn, dtype, needle):
    argv = ["--apply", f"conformance_planted:{fn}", "--convention", "x_cos_sin", "--dtype", dtype,
            "--rope-type", "default"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 6 and all(needle in line and line.startswith("default-d") for line in lines)
    assert out.count("\n") == 6 + 3 and "case" in out.splitlines()[0]


def test_cli_passes_hf(capsys):
    assert main(["--apply", "transformers.models.llama.modeling_llama:apply_rotary_pos_emb",
                 "--rope-type", "yarn"]) == 0
    assert "6 pass, 0 FAIL, 0 error, 0 skip of 6 checks" in capsys.readouterr().out
