"""The conformance suite as a pytest plugin (harness/conformance/pytest_plugin.py): a library's CI runs it with one
option. HF's own rotation passes it (transformers' modeling_llama.apply_rotary_pos_emb, the suite's reference
convention), a planted sign error fails with the suite's table and bug name, an adapter that raises
NotImplementedError is skipped, and bad options stop pytest in one line."""
import textwrap

import pytest

pytest_plugins = ("pytester",)

PLANTED = textwrap.dedent('''
    import torch

    def wrong_sign(q, k, cos, sin):
        # rotate_half with the wrong sign: (x1, x2) -> (x2, -x1) instead of (-x2, x1)
        def rot(x):
            x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
            return torch.cat((x2, -x1), dim=-1)
        return q * cos + rot(q) * sin, k * cos + rot(k) * sin

    def not_mine(q, k, cos, sin):
        raise NotImplementedError("this adapter does not do these cases")
''')


def _run(pytester, *args):
    pytester.makepyfile(planted=PLANTED)
    pytester.syspathinsert()
    return pytester.runpytest_inprocess("-p", "harness.conformance.pytest_plugin", "-p", "no:randomly",
                                        "-p", "no:cacheprovider", *args)


def test_hf_passes(pytester):
    r = _run(pytester, "--rope-conformance", "transformers.models.llama.modeling_llama:apply_rotary_pos_emb",
             "--rope-type", "default,linear")
    r.assert_outcomes(passed=r.parseoutcomes()["passed"])
    assert r.ret == 0 and r.parseoutcomes()["passed"] >= 2
    r.stdout.fnmatch_lines(["rope-conformance: transformers.models.llama.modeling_llama:apply_rotary_pos_emb*"])


def test_planted_bug_fails_with_its_table(pytester):
    r = _run(pytester, "--rope-conformance", "planted:wrong_sign", "--rope-type", "default")
    assert r.ret == 1 and r.parseoutcomes()["failed"] >= 1
    r.stdout.fnmatch_lines(["*rope_conformance[[]*-fp32[]]*", "*max_err*", "*FAIL*"])


def test_not_implemented_is_a_skip(pytester):
    r = _run(pytester, "--rope-conformance", "planted:not_mine", "--rope-type", "default")
    assert r.ret == 0 and r.parseoutcomes().get("skipped", 0) >= 1 and "passed" not in r.parseoutcomes()


@pytest.mark.parametrize("args, words", [
    (["--rope-conformance", "planted:wrong_sign", "--rope-dtype", "fp8"], "--rope-dtype ['fp8']: choose from"),
    (["--rope-conformance", "planted:missing"], "planted has no attribute 'missing'"),
    (["--rope-conformance", "planted:wrong_sign", "--rope-type", "nope"], "--rope-type ['nope']: choose from"),
])
def test_bad_options_in_one_line(pytester, args, words):
    r = _run(pytester, *args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert words in r.stderr.str()


def test_usage_items_with_positions_convention(pytester):
    """With --rope-convention positions the usage cases are items too: HF's LlamaRotaryEmbedding (transformers 5.23)
    passes shared state and decode, and its module cast with .to(torch.bfloat16) fails, named: the cast rounds its
    inv_freq buffer to bf16 (modeling_llama.py registers inv_freq as a buffer; nn.Module.to casts floating buffers)."""
    # a subprocess: pytester's in-process runs restore sys.modules between runs, which breaks transformers' lazy
    # imports ("Could not import module 'LlamaConfig'") once an earlier test has imported it
    r = pytester.runpytest_subprocess(
        "-p", "harness.conformance.pytest_plugin", "-p", "no:cacheprovider",
        "--rope-conformance", "harness.conformance.libraries.transformers:llama",
        "--rope-build", "harness.conformance.libraries.transformers:build_llama", "--rope-convention",
        "positions", "--rope-type", "default,llama3", "--rope-dtype", "bf16")
    outcomes = r.parseoutcomes()
    assert r.ret == 1 and outcomes["failed"] == 1, "\n".join(r.outlines[-40:])
    r.stdout.fnmatch_lines(["*rope_usage[[]cast-bf16[]]*", "*16-bit frequencies after a cast*"])
    assert "rope_usage[shared-bf16]" not in "".join(line for line in r.outlines if "FAILED" in line)


def test_usage_option_refuses_unknown_kinds(pytester):
    r = _run(pytester, "--rope-conformance", "planted:wrong_sign", "--rope-usage", "warp")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rope-usage ['warp']: choose from" in r.stderr.str()
