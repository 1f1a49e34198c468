"""The conformance suite's calling conventions (harness/conformance/conventions.py): each convention and flag
passes a correct implementation against the golden data and fails a wrong one."""
import importlib.util

import numpy as np
import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as hf_apply

from harness.conformance import arrays, run
from harness.conformance import conventions as C
from harness.conformance.__main__ import main
from harness.rope.frequencies import frequencies
from harness.rope.rotation import eager


def _results(rows):
    return {(r["result"], r["bug"]) for r in rows if r["check"] == "rotation"}


def _rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


def angles_fn(x, theta):
    """x-transformers / Megatron style: full-width angles, partial by their width (megatron rope_utils.py)."""
    r = theta.shape[-1]
    xr = x[..., :r]
    return torch.cat((xr * theta.cos().to(x.dtype) + _rotate_half(xr) * theta.sin().to(x.dtype), x[..., r:]), -1)


@pytest.mark.parametrize("qk_layout", C.QK_LAYOUTS)
def test_angles_convention_passes_in_every_qk_layout(qk_layout):
    rows, _ = run.run(angles_fn, "angles", "half", "bf16", rope_types=["yarn", "default"], qk_layout=qk_layout)
    assert len(rows) == 12 and _results(rows) == {("pass", "")}


def test_full_width_sin_first_tables_pass_and_the_wrong_order_fails():
    def timm_style(x, sin, cos):  # timm apply_rot_embed(x, sin_emb, cos_emb, half=True), partial by the width
        r = cos.shape[-1]
        return torch.cat((x[..., :r] * cos + _rotate_half(x[..., :r]) * sin, x[..., r:]), -1)
    rows, _ = run.run(timm_style, "x_cos_sin", "half", "fp32", rope_types=["llama3"], width="full",
                      order="sin-cos")
    assert _results(rows) == {("pass", "")}
    rows, _ = run.run(timm_style, "x_cos_sin", "half", "fp32", rope_types=["llama3"], width="full")
    assert {r for r, _ in _results(rows)} == {"FAIL"}


@pytest.mark.parametrize("qk_layout, unsqueeze", [("bhsd", 1), ("bshd", 2)])
def test_hf_convention_in_bshd_with_unsqueeze_dim(qk_layout, unsqueeze):
    rows, _ = run.run(lambda q, k, c, s: hf_apply(q, k, c, s, unsqueeze_dim=unsqueeze), "hf", "half", "fp32",
                      rope_types=["default"], qk_layout=qk_layout)
    assert _results(rows) == {("pass", "")}


def test_heads_mixed_with_positions_fail():
    def seq_first(x, cos, sin):  # reads a bshd input as bhsd: heads taken for positions
        return eager(x.transpose(1, 2), cos, sin).transpose(1, 2)
    rows, _ = run.run(seq_first, "x_cos_sin", "half", "fp32", rope_types=["default"], qk_layout="bshd")
    assert {r for r, _ in _results(rows)} <= {"FAIL", "error"} and not run.ok(rows)


def test_compare_logits_accepts_a_permuted_basis_that_outputs_reject():
    from harness.conformance.libraries import transformers as lib
    kw = dict(rope_types=["yarn", "default"])
    rows, _ = run.run(lib.deepseek_v3, "positions", "interleaved", "fp32", compare="logits", **kw)
    assert len(rows) == 12 and _results(rows) == {("pass", "")}
    rows, _ = run.run(lib.deepseek_v3, "positions", "interleaved", "fp32", **kw)
    assert {r for r, _ in _results(rows)} == {"FAIL"}


def length_from_shape(q, k, positions, *, rope):
    """A dynamic-NTK implementation that, like a model's forward, takes the length from the input's shape."""
    skip = ("rope_type", "rope_theta", "head_dim", "max_position_embeddings")
    kw = {n: v for n, v in rope.items() if n not in skip}
    if rope["rope_type"] == "dynamic":  # HF's dynamic reads its trained length from max_position_embeddings
        kw["original_max_position_embeddings"] = rope["max_position_embeddings"]
    inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], q.shape[-2], **kw)
    phase = torch.arange(q.shape[-2]).float()[:, None] * inv[None]
    cos, sin = phase.cos() * att, phase.sin() * att
    return eager(q, cos, sin), eager(k, cos, sin)


def test_dense_positions_for_length_dependent_types():
    rows, _ = run.run(length_from_shape, "positions", "half", "fp32", rope_types=["dynamic"])  # auto: dense
    assert len(rows) == 12 and _results(rows) == {("pass", "")}
    rows, _ = run.run(length_from_shape, "positions", "half", "fp32", rope_types=["dynamic"], positions="sampled")
    assert {r for r, _ in _results(rows)} == {"FAIL"}


def numpy_rotation(x, cos, sin):
    assert isinstance(x, np.ndarray) and isinstance(cos, np.ndarray)
    h = cos.shape[-1]
    a, b = x[..., :h], x[..., h:2 * h]
    return np.concatenate((a * cos - b * sin, b * cos + a * sin, x[..., 2 * h:]), -1)


def test_numpy_arrays_at_the_boundary():
    rows, _ = run.run(numpy_rotation, "x_cos_sin", "half", "fp16", rope_types=["default"], array="numpy")
    assert _results(rows) == {("pass", "")}


@pytest.mark.parametrize("kind, module", [("jax", "jax"), ("mlx", "mlx")])
def test_jax_and_mlx_arrays_when_importable(kind, module):
    if importlib.util.find_spec(module) is None:
        with pytest.raises(ValueError, match=f"--array {kind}: .* is not importable"):
            arrays.check(kind)
        pytest.skip(f"{module} is not installed (not a dependency); the one-line refusal was checked")
    arrays.check(kind)
    t = torch.tensor([[0.5, -1.25]], dtype=torch.bfloat16)
    back = arrays.back(arrays.to(kind, t))
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)


def test_mutation_is_seen_through_numpy_arrays():
    def zeroes(x, cos, sin):
        out = numpy_rotation(x, cos, sin)
        x[...] = 0
        return out
    rows, _ = run.run(zeroes, "x_cos_sin", "half", "fp32", rope_types=["default"], array="numpy")
    assert {r["result"] for r in rows} == {"FAIL"} and all(r["bug"].startswith(run.MUTATES) for r in rows)


@pytest.mark.parametrize("argv, needle", [
    (["--qk-layout", "hsbd"], "unknown --qk-layout 'hsbd'; choose one of ['bhsd', 'bshd', 'sbhd']"),
    (["--width", "double"], "unknown --width 'double'"),
    (["--order", "tan-cos"], "unknown --order 'tan-cos'"),
    (["--compare", "norms"], "unknown --compare 'norms'"),
    (["--positions", "dense", "--convention", "hf"], "--positions applies to --convention positions"),
    (["--width", "full", "--convention", "complex", "--layout", "interleaved"], "--width and --order apply"),
    (["--array", "cupy"], "unknown --array 'cupy'"),
    (["--library", "nosuch"], "unknown --library 'nosuch'"),
    (["--library", "transformers", "--apply", "a.b:c"], "give --apply or --library, not both")])
def test_bad_flags_are_one_line_exit_2(capsys, argv, needle):
    if "--apply" not in argv and "--library" not in argv:
        argv = ["--apply", "harness.rope.rotation:eager", *argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_help_names_every_flags_choices(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = "".join(capsys.readouterr().out.split())  # argparse wraps lines, even inside 'cos-sin'
    for choices in (C.CONVENTIONS, C.QK_LAYOUTS, C.WIDTHS, C.ORDERS, C.COMPARES, C.POSITION_MODES, arrays.ARRAYS):
        assert str(list(choices)).replace(" ", "") in out, choices


def test_help_states_the_adapter_contract(capsys):
    """What each convention's function receives, and that NotImplementedError skips a case, is in --help (not only
    in the code): the epilog is conventions.py's docstring."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "NotImplementedError marks a case it does not support (skip)" in out
    for convention in C.CONVENTIONS:
        assert f"- {convention}: " in out, convention
