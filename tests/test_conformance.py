"""The RoPE conformance suite (harness/conformance): its golden data, HF passing it, and every known bug class,
planted into a deliberately broken implementation, caught and named; bad input in one line."""
import sys

import numpy as np
import pytest
import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS as HF_INIT
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as hf_apply

from conformance_kit import planted_table, sampled
from harness.conformance import bugs, golden, run
from harness.conformance.__main__ import main
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS
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


@pytest.mark.parametrize("fault", [bugs.ATTENTION, bugs.BF16_INV, bugs.FP16_POS, bugs.BF16_POS, bugs.OFF_BY_ONE])
def test_planted_table_bug_is_caught_and_named(fault):
    rows, _ = run.run(planted_table(fault), "positions", "half", "fp32", rope_types=["yarn"])
    assert len(rows) == 6 and {(r["result"], r["bug"]) for r in rows} == {("FAIL", fault)}


def test_the_unbroken_planted_implementation_passes():
    # sampled positions for longrope: the same judged rows bit for bit as its dense hand-over (conformance_kit.sampled)
    rows, _ = run.run(planted_table(None), "positions", "half", "fp32", rope_types=["yarn", "default", "longrope"],
                      positions=sampled())
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


PLANTED = """
import os, signal, sys, time
import torch
from harness.rope.rotation import eager
from harness.rope.frequencies import frequencies


def no_bf16(x, c, s):
    if x.dtype == torch.bfloat16:
        raise TypeError("bf16 not supported")
    return eager(x, c, s)


def nan(x, c, s):
    return eager(x, c, s) * float("nan")


def one_arg(x):
    return x


# forging attempts: each must end in a FAIL or an error, never a pass or exit 0
def correct_then_zeroes_its_input(x, c, s):
    out = eager(x, c, s)
    x.zero_()
    return out


def rotates_in_place(x, c, s):
    x.copy_(eager(x, c, s))
    return x


def zeroes_the_table(x, c, s):
    out = eager(x, c, s)
    c.zero_()
    return out


def positions_zeroed(q, k, positions, *, rope):
    skip = ("rope_type", "rope_theta", "head_dim", "max_position_embeddings")
    kw = {n: v for n, v in rope.items() if n not in skip}
    inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], int(positions.max()) + 1, **kw)
    phase = positions.float()[:, None] * inv[None, :]
    cos, sin = phase.cos() * att, phase.sin() * att
    positions.zero_()
    rope.clear()
    return eager(q, cos, sin), eager(k, cos, sin)


def exits_0(x, c, s):
    raise SystemExit(0)


def sys_exit(x, c, s):
    sys.exit()


def interrupts(x, c, s):
    raise KeyboardInterrupt


def hard_exit(x, c, s):
    os._exit(0)


def hangs(x, c, s):
    while True:
        time.sleep(0.05)


def spins(x, c, s):
    while True:
        pass


def skips(q, k, positions, *, rope):
    raise NotImplementedError("nothing supported")
"""


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """conformance_planted: a real module on sys.path (the CLI imports --apply in its worker process)."""
    (tmp_path / "conformance_planted.py").write_text(PLANTED)
    (tmp_path / "conformance_exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "conformance_hangs_at_import.py").write_text("import time\nwhile True:\n    time.sleep(0.05)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "conformance_planted", raising=False)
    import conformance_planted
    return conformance_planted


@pytest.mark.parametrize("fn, mutated, right", [("correct_then_zeroes_its_input", "q, k", True),
                                                ("rotates_in_place", "q, k", True),
                                                ("zeroes_the_table", "cos", False)])  # k then gets a zero table
def test_an_implementation_that_mutates_its_inputs_fails_even_with_right_outputs(planted, fn, mutated, right):
    rows, msgs = run.run(getattr(planted, fn), "x_cos_sin", "half", "fp32", rope_types=["default"])
    assert len(rows) == 6 and {r["result"] for r in rows} == {"FAIL"}
    assert all(r["bug"].startswith(f"{run.MUTATES} ({mutated})") for r in rows), rows[0]
    assert all((r["ratio"] <= 1) == right for r in rows)
    assert all(f"{run.MUTATES} in place: {mutated}" in m for m in msgs) and len(msgs) == 6


def test_positions_convention_gets_copies_and_is_checked_too(planted):
    _, data = golden.load()
    before = {n: a.copy() for n, a in data.items() if n.endswith("/positions")}
    rows, _ = run.run(planted.positions_zeroed, "positions", "half", "fp32", rope_types=["yarn"])
    assert {r["result"] for r in rows} == {"FAIL"}
    assert all(r["bug"] == f"{run.MUTATES} (positions, rope)" for r in rows), rows[0]
    _, again = golden.load()
    assert all(np.array_equal(again[n], a) for n, a in before.items())


@pytest.mark.parametrize("fn, says", [("exits_0", "SystemExit(0): it tried to end the process"),
                                      ("sys_exit", "SystemExit(None)")])
def test_system_exit_from_the_code_under_test_is_an_error_row(planted, fn, says):
    rows, msgs = run.run(getattr(planted, fn), "x_cos_sin", "half", "fp32", rope_types=["default"])
    assert {(r["result"], r["bug"]) for r in rows} == {("error", "SystemExit")} and all(says in m for m in msgs)
    assert not run.ok(rows)


def test_keyboard_interrupt_is_the_users_in_process_and_an_error_in_the_worker(planted, monkeypatch):
    with pytest.raises(KeyboardInterrupt):  # in the caller's process a Ctrl-C stops the run
        run.run(planted.interrupts, "x_cos_sin", "half", "fp32", rope_types=["default"])
    monkeypatch.setattr(run, "CATCH_INTERRUPT", True)  # the worker: no terminal reaches it
    rows, _ = run.run(planted.interrupts, "x_cos_sin", "half", "fp32", rope_types=["default"])
    assert {(r["result"], r["bug"]) for r in rows} == {("error", "KeyboardInterrupt")}


def _cli(capsys, *argv):
    rc = main(["--convention", "x_cos_sin", "--rope-type", "default", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("fn, bug", [("exits_0", "error  SystemExit"), ("interrupts", "error  KeyboardInterrupt"),
                                     ("correct_then_zeroes_its_input", f"FAIL   {run.MUTATES} (q, k)")])
def test_cli_forgeries_are_never_exit_0(planted, capsys, fn, bug):
    rc, out, err = _cli(capsys, "--apply", f"conformance_planted:{fn}")
    table = [line for line in out.splitlines() if line.startswith("default-d")]
    assert rc == 1 and len(table) == 6 and all(bug in line for line in table), out
    assert "0 pass" in out.splitlines()[-1]


def test_cli_an_implementation_that_ends_the_process_is_an_error(planted, capsys, monkeypatch):
    from harness.conformance import isolate
    monkeypatch.setattr(isolate, "MAX_STOPS", 2)
    rc, out, err = _cli(capsys, "--apply", "conformance_planted:hard_exit")
    rows = [line for line in out.splitlines() if line.startswith("default-d")]
    assert rc == 1 and len(rows) == 6
    assert sum("error  worker ended: exit code 0" in r for r in rows) == 2
    assert sum("error  not run: stopped after 2 timeouts or worker endings" in r for r in rows) == 4
    assert "the code under test ended the worker process (exit code 0)" in err
    assert "4 remaining cases not run" in err


@pytest.mark.parametrize("fn", ["hangs", "spins"])
def test_cli_a_hang_is_a_timeout_fail_naming_the_case(planted, capsys, monkeypatch, fn):
    from harness.conformance import isolate
    monkeypatch.setattr(isolate, "MAX_STOPS", 1)
    rc, out, err = _cli(capsys, "--apply", f"conformance_planted:{fn}", "--timeout", "0.5")
    rows = [line for line in out.splitlines() if line.startswith("default-d")]
    assert rc == 1 and len(rows) == 6 and "FAIL   timeout after 0.5 s" in rows[0]
    assert all("not run: stopped after 1 timeouts" in r for r in rows[1:])
    assert err.splitlines()[0] == ("default-d64-b1e4-p1-L131072 [half, fp32]: timeout after 0.5 s: the call did not "
                                   "return (raise --timeout if it is only slow)")


def test_cli_a_hang_in_one_case_does_not_stop_the_others(planted, capsys, tmp_path):
    (tmp_path / "conformance_hangs_once.py").write_text(
        "import os, time\nfrom harness.rope.rotation import eager\n"
        "def f(x, c, s):\n"
        "    if x.shape[-1] == 128 and not os.path.exists(__file__ + '.done'):\n"
        "        open(__file__ + '.done', 'w').close()\n"
        "        time.sleep(3600)\n"
        "    return eager(x, c, s)\n")
    rc, out, err = _cli(capsys, "--apply", "conformance_hangs_once:f", "--timeout", "2")
    results = [line.split()[6] for line in out.splitlines() if line.startswith("default-d")]
    assert rc == 1 and results == ["pass", "pass", "FAIL", "pass", "pass", "pass"], out


@pytest.mark.parametrize("module, says", [
    ("conformance_exits_at_import", "cannot import conformance_exits_at_import: SystemExit(0): it tried to end"),
    ("conformance_hangs_at_import", "importing it did not finish in 1 s")])
def test_cli_import_that_exits_or_hangs_is_one_line_exit_2(planted, capsys, monkeypatch, module, says):
    from harness.conformance import isolate
    monkeypatch.setattr(isolate, "IMPORT_MIN_S", 1.0)
    rc, out, err = _cli(capsys, "--apply", f"{module}:f", "--timeout", "1")
    assert rc == 2 and out == "" and err.count("\n") == 1 and says in err, err


def test_cli_zero_verdicts_is_not_a_pass(planted, capsys):
    rc, out, err = _cli(capsys, "--apply", "conformance_planted:skips", "--convention", "positions")
    assert rc == 1 and "0 pass, 0 FAIL, 0 error, 6 skip of 6 checks" in out
    assert "no verdict: every check was skipped, which is not a pass" in err


@pytest.mark.parametrize("argv, needle", [
    (["--apply", "no_such_pkg.mod:fn"], "cannot import no_such_pkg.mod"),
    (["--apply", "harness.rope.rotation:nothing"], "has no attribute 'nothing'"),
    (["--apply", "harness.rope.rotation"], "expected pkg.module:function"),
    (["--apply", "conformance_planted:one_arg", "--convention", "x_cos_sin"], "cannot take the 'x_cos_sin'"),
    (["--apply", "harness.rope.rotation:eager", "--layout", "diagonal"], "unknown --layout 'diagonal'"),
    (["--apply", "harness.rope.rotation:eager", "--dtype", "fp8"], "unknown --dtype 'fp8'"),
    (["--apply", "harness.rope.rotation:eager", "--convention", "jax"], "unknown --convention 'jax'"),
    (["--apply", "harness.rope.rotation:eager", "--rope-type", "xpos"], "unknown --rope-type ['xpos']"),
    (["--apply", "harness.rope.rotation:eager", "--timeout", "0"], "--timeout '0': give the seconds"),
    (["--apply", "harness.rope.rotation:eager", "--timeout", "nan"], "--timeout 'nan': give the seconds"),
    (["--apply", ":eager"], "expected pkg.module:function"),
    (["--apply", "harness.rope.rotation:eager", "--frequencies", "nope"], "--frequencies 'nope': expected pkg.module"),
    (["--generate", "--apply", "harness.rope.rotation:eager"], "--generate rewrites the golden file and runs nothing"),
    (["--apply", "math:pi"], "--apply 'math:pi' is not callable"),
])
def test_bad_arguments_are_one_line_and_exit_2(planted, capsys, argv, needle):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize("argv, needle", [(["--nosuch"], "unrecognized arguments: --nosuch"),
                                          (["--apply"], "argument --apply: expected one argument")])
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize("fn, dtype, needle", [("no_bf16", "bf16", "TypeError: bf16 not supported"),
                                               ("nan", "fp32", "non-finite output (")])
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
