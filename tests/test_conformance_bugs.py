"""Bug classes of what RoPE implementations get wrong (harness/conformance/bugs.py, faults.py): each planted into
an otherwise correct implementation is caught and named; the tolerance model (tolerance.py) passes correct code
whose fp32 inv_freq is a few ulps off."""

import pytest
import torch

from conformance_kit import in_kernel_exp, knobs, rotary, sampled, ulps_off, with_inv, yarn_reversed
from harness.conformance import bugs, run
from harness.rope.frequencies import frequencies


def _named(fn, types, **kw):
    rows, _ = run.run(fn, "positions", "half", "fp32", rope_types=types, positions=sampled(), **kw)
    return rows, {(r["case"].split("-p")[1].split("-")[0], r["result"], r["bug"]) for r in rows}


def test_yarn_ramp_reversed_is_named():
    _, named = _named(yarn_reversed, ["yarn"])
    assert {(res, bug) for _, res, bug in named} == {("FAIL", bugs.YARN_RAMP)}


def test_partial_fraction_ignored_is_named_both_ways():
    def whole_head(q, k, positions, *, rope):  # the type's frequencies over the whole head: partial ignored
        kw = {**knobs(rope), "partial_rotary_factor": 1.0}
        inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], int(positions.max()) + 1, **kw)
        return rotary(q, k, positions, inv, att)

    def ntk_exponent_of_head(rope, inv, att):  # R rotated, base * factor^(D/(D-2)): the dim term from head_dim
        r, d = 2 * inv.numel(), rope["head_dim"]
        base = rope["rope_theta"] * rope["factor"] ** (d / (d - 2))
        return 1.0 / (base ** (torch.arange(0, r, 2).float() / r)), att
    _, named = _named(whole_head, ["yarn", "llama3"])
    assert {(p, res, bug) for p, res, bug in named} == {("1", "pass", ""), ("0.5", "FAIL", bugs.PARTIAL_IGNORED)}
    _, named = _named(with_inv(ntk_exponent_of_head), ["ntk"])
    assert {(p, res, bug) for p, res, bug in named} == {("1", "pass", ""), ("0.5", "FAIL", bugs.PARTIAL_IGNORED)}


def test_dynamic_rescaling_every_frequency_is_named():
    def every(rope, inv, att):
        r, f, big_l = 2 * inv.numel(), rope["factor"], rope["max_position_embeddings"]
        plain = 1.0 / (rope["rope_theta"] ** (torch.arange(0, r, 2).float() / r))
        s = f * 131072 / big_l - (f - 1)  # the golden dynamic cases run at 8192 (no scaling) and 131072
        return (plain / s ** (r / (r - 2)) if inv[-1] != plain[-1] else plain), att
    _, named = _named(with_inv(every), ["dynamic"])
    assert {res for _, res, _ in named} == {"pass", "FAIL"}
    assert {bug for _, res, bug in named if res == "FAIL"} == {bugs.EVERY_FREQ}


@pytest.mark.parametrize("change, types, name", [
    (lambda rope, inv, att: (inv, att * att), ["yarn", "longrope"], bugs.ATTENTION_TWICE),
    (lambda rope, inv, att: (inv * rope["factor"] ** 2, att), ["linear"], bugs.INTERP_REVERSED),
    (lambda rope, inv, att: (inv * rope["factor"], att), ["linear"], bugs.INTERP_MISSING),
    (lambda rope, inv, att: (1.0 / rope["rope_theta"] ** (torch.arange(inv.numel()).float() / (2 * inv.numel()))
                             / rope.get("factor", 1.0), att), ["default", "linear"], bugs.EXPONENT)])
def test_scaling_bug_is_named(change, types, name):
    rows, named = _named(with_inv(change), types)
    fails = {bug for _, res, bug in named if res == "FAIL"}
    assert fails == {name} and sum(r["result"] == "FAIL" for r in rows) >= len(rows) // 2, named


def _late_drift(rope, inv, att):  # the lowest frequency 1% off
    out = inv.clone()
    out[-1] *= 1.01
    return out, att


def _two_swapped(rope, inv, att):  # the two lowest frequencies in each other's place
    out = inv.clone()
    out[-2], out[-1] = inv[-1], inv[-2]
    return out, att


def _sped_up(rope, inv, att):  # every frequency 1.5x (no rope_type's factor: the default has none)
    return inv * 1.5, att


@pytest.mark.parametrize("plant", [_late_drift, _two_swapped, _sped_up])
def test_a_bug_outside_the_list_is_unrecognised_with_its_signature_never_a_nearest_name(plant):
    _, named = _named(with_inv(plant), ["default"])
    bugs_seen = [b for _, res, b in named if res == "FAIL"]
    assert bugs_seen
    for bug in bugs_seen:
        assert bug.startswith("unrecognised (") and "nearest" not in bug, bug
        assert "first wrong at position" in bug and "pairs " in bug and "norm ratio" in bug and "in fp32" in bug, bug
    if plant is _late_drift:
        assert any(p in bugs_seen[0] for p in ("pairs 31 of 32", "pairs 63 of 64", "pairs 15 of 16"))  # bugs.spans


@pytest.mark.parametrize("fn", [ulps_off(3), with_inv(in_kernel_exp)], ids=["3ulps", "in-kernel-exp"])
def test_no_false_alarm_for_an_fp32_inv_freq_a_few_ulps_off(fn):
    rows, _ = run.run(fn, "positions", "half", "fp32", positions=sampled())
    assert {r["result"] for r in rows} == {"pass"}, [(r["case"], r["ratio"]) for r in rows if r["result"] != "pass"]
