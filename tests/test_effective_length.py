"""Effective length by RULER's absolute rule (Hsieh et al. 2024, arXiv 2404.06654, §4: the longest length whose
score exceeds a threshold) and NoLiMa's relative one (Modarressi et al. 2025, arXiv 2502.05167: 0.85 x the
model's own base score), on hand-worked curves."""
import math

import pytest

from harness.config import from_dict
from harness.measure.effective_length import effective_length, rows, score_curves


def test_the_walk_stops_at_the_first_length_below_the_bar():
    curve = {64: 0.9, 128: 0.8, 256: 0.4, 512: 0.7}  # dips at 256 and recovers: 512 is not credited
    assert effective_length(curve, 0.5) == 128
    assert effective_length(curve, 0.95) == 0
    assert effective_length(curve, 0.4) == 512
    assert effective_length({64: 0.9, 128: math.nan, 256: 0.9}, 0.5) == 64  # not measurable ends the walk
    assert math.isnan(effective_length(curve, math.nan))


def _row(metric, L, value, protocol="iid", **params):
    return dict(metric=metric, eval_len=L, protocol=protocol, value=value, unit="frac", extra_params=params)


def test_rows_average_depths_take_the_train_length_as_base_and_skip_extensions():
    run = [_row("acc", 64, 1.0, "depth=0"), _row("acc", 64, 0.8, "depth=1"),  # mean 0.9 at 64
           _row("acc", 128, 0.8, "depth=0"), _row("acc", 128, 0.7, "depth=1"),  # 0.75 < 0.85 * 0.9 = 0.765
           _row("acc", 256, 0.9, "depth=0"), _row("acc", 256, 0.9, "depth=1"),
           _row("byte_acc", 64, 0.6, "nonoverlapping"), _row("byte_acc", 128, 0.55, "nonoverlapping"),
           _row("byte_acc", 128, 0.01, "nonoverlapping", extension="yarn"), _row("ppl", 64, 3.0, "nonoverlapping")]
    assert score_curves(run) == {("acc", "depths"): {64: 0.9, 128: 0.75, 256: 0.9},
                                 ("byte_acc", "nonoverlapping"): {64: 0.6, 128: 0.55}}
    got = {(r["protocol"].split(":")[0], r["metric"].rpartition("_")[2]): r
           for r in rows(run, train_len=64, threshold=0.7, relative=0.85, min_base=0.2)}
    assert got[("acc", "absolute")]["value"] == 256 and got[("acc", "relative")]["value"] == 64
    assert got[("acc", "relative")]["extra_params"]["bar"] == pytest.approx(0.765)
    assert got[("byte_acc", "absolute")]["value"] == 0  # 0.6 < 0.7 already at the train length
    assert got[("byte_acc", "relative")]["value"] == 128  # 0.55 >= 0.85 * 0.6 = 0.51
    assert got[("acc", "absolute")]["protocol"] == "acc:depths" and len(got) == 4
    r = rows([_row("acc", 128, 0.9), _row("acc", 256, 0.8)], train_len=64, threshold=0.5, relative=0.85, min_base=0.2)
    assert r[1]["extra_params"]["base_len"] == 128 and r[1]["value"] == 256  # train length not evaluated


def test_the_relative_rule_is_not_a_number_when_the_task_is_not_solved_at_the_train_length():
    """0.85 x a base score near 0 is passed by chance at every length: the rule would credit a model that never
    solved the task with the longest length."""
    run = [_row("ruler_all", 64, 0.01), _row("ruler_all", 128, 0.02), _row("ruler_all", 256, 0.0)]
    absolute, relative = rows(run, train_len=64, threshold=0.5, relative=0.85, min_base=0.2)
    assert absolute["value"] == 0
    assert math.isnan(relative["value"]) and relative["extra_params"]["base_score"] == 0.01
    assert relative["extra_params"]["nan_reason"].startswith("ruler_all at the base length 64 is 0.01 < eval.")


@pytest.mark.parametrize("key,value", [("threshold", 0), ("relative", 1.5)])
def test_bars_outside_the_unit_interval_are_refused(key, value):
    with pytest.raises(ValueError, match=rf"^eval.effective_length.{key} must be a number in \(0, 1\]"):
        from_dict({"eval": {"effective_length": {key: value}}})
