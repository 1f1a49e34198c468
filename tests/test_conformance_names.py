"""No misleading nearest name (harness/conformance/bugs.py): a bug outside the list of known classes is
"unrecognised" with its measured signature (positions, pairs, dtype), never another class's name; the new classes
(non-finite output, LongRoPE's factor choice) are named. References: the fp64 oracle of the golden file."""
import math

import pytest
import torch

from conformance_kit import knobs, sampled, with_inv
from harness.conformance import bugs, run
from harness.rope.frequencies import frequencies

good = with_inv(lambda rope, inv, att: (inv, att))
NAMES = bugs.CLASSES + bugs.USAGE_CLASSES + (bugs.WRONG_DTYPE, bugs.COMPLEX_OUTPUT)


def _wrong_base(rope, inv, att):  # base 1.5x too large (a config read with the wrong rope_theta)
    r = 2 * inv.numel()
    return 1.0 / ((1.5 * rope["rope_theta"]) ** (torch.arange(0, r, 2).float() / r)) / rope.get("factor", 1.0), att


def nan_rows(q, k, positions, *, rope):
    """Right values but NaN in the first five features of the last three rows of q."""
    q2, k2 = good(q, k, positions, rope=rope)
    q2[..., -3:, :5] = math.nan
    return q2, k2


def sign_flips(q, k, positions, *, rope):
    """Features 3 and 7 negated (half layout: pairs 3 and 7 of the first half), all positions."""
    q2, k2 = good(q, k, positions, rope=rope)
    for x in (q2, k2):
        x[..., 3] *= -1
        x[..., 7] *= -1
    return q2, k2


def _permuted(rope, inv, att):  # the frequencies in a seeded random order
    return inv[torch.randperm(inv.numel(), generator=torch.Generator().manual_seed(1))], att


PLANTS = {"wrong base": with_inv(_wrong_base), "NaN rows": nan_rows, "sign flips": sign_flips,
          "permuted pairs": with_inv(_permuted)}


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_bug_outside_the_list_is_unrecognised_with_a_signature(plant, dtype):
    rows, _ = run.run(PLANTS[plant], "positions", "half", dtype, rope_types=["default", "linear"],
                      positions=sampled())
    assert {r["result"] for r in rows} == {"FAIL"}
    for r in rows:
        parts = r["bug"].split("; ")
        assert parts[-1].startswith("unrecognised (") and f"in {dtype})" in parts[-1], r["bug"]
        assert "first wrong at position" in parts[-1] and "err/tol up to" in parts[-1], r["bug"]
        assert not any(p.startswith(n) for p in parts for n in NAMES), r["bug"]  # never another class's name
        if plant == "NaN rows":
            assert parts[0].startswith(bugs.NON_FINITE) and "non-finite from position" in parts[-1], r["bug"]
            assert "pairs 0-4 of" in parts[-1], r["bug"]
        if plant == "sign flips":  # the exact pairs, not the span 3-7; from position 0
            assert "first wrong at position 0, pairs 3, 7 of" in parts[-1], r["bug"]


def test_a_wrong_base_from_a_frequency_function_is_unrecognised_with_the_base_it_fits():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    def wrong(head_dim, base, seq_len, **kw):
        return frequencies("linear", head_dim, 2 * base, seq_len, **kw)
    rows, _ = run.run(apply_rotary_pos_emb, "hf", "half", "fp32", freq_fn={"linear": wrong}, rope_types=["linear"])
    freq = [r for r in rows if r["check"] == "frequencies"]
    for r in freq:
        assert r["result"] == "FAIL" and r["bug"].startswith("unrecognised (inv_freq indices 1-"), r["bug"]
    assert any("fits base 2e+04" in r["bug"] for r in freq if "-p1-" in r["case"] and "b1e4" in r["case"])


def test_longrope_factor_choice_the_wrong_way_is_named():
    def flipped(rope, inv, att):  # long factors at 8192, short ones at 131072 (HF: long iff length > original)
        n, orig = rope["max_position_embeddings"], rope["original_max_position_embeddings"]
        kw = {k: v for k, v in knobs(rope).items()}
        return frequencies("longrope", rope["head_dim"], rope["rope_theta"], orig if n > orig else orig + 1, **kw)
    rows, _ = run.run(with_inv(flipped), "positions", "half", "fp32", rope_types=["longrope"], positions=sampled())
    assert {(r["result"], r["bug"]) for r in rows} == {("FAIL", bugs.LONGROPE_CHOICE)}
    rows, _ = run.run(good, "positions", "half", "fp32", rope_types=["longrope"], positions=sampled())
    assert {r["result"] for r in rows} == {"pass"}


def test_spans_lists_indices_as_ranges():
    assert bugs.spans([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert bugs.spans([0, 2, 4, 6, 8, 10]) == "0, 2, 4, 6, ..."
