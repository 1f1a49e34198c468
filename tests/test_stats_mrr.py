"""ranks.mean_reciprocal_rank and ranks.mrr_interval against hand-worked tables."""
import math

import numpy as np
import pandas as pd
import pytest

from harness import ranks

# rows: tasks, columns: variants. t1 ranks A B C; t2 ranks B C A; t3 ties A and B for first (1.5 each), C third.
TABLE = pd.DataFrame({"A": [0.9, 0.2, 0.7], "B": [0.5, 0.8, 0.7], "C": [0.1, 0.4, 0.3]},
                     index=pd.Index(["t1", "t2", "t3"], name="task"))
HAND = {"A": (1 + 1 / 3 + 1 / 1.5) / 3, "B": (1 / 2 + 1 + 1 / 1.5) / 3, "C": (1 / 3 + 1 / 2 + 1 / 3) / 3}


def test_hand_worked_mrr_with_averaged_ties_best_first():
    m = ranks.mean_reciprocal_rank(TABLE)
    assert list(m.index) == ["B", "A", "C"] and m.name == "mrr" and m.index.name == "variant"
    assert m.to_dict() == pytest.approx(HAND)
    assert m["A"] == pytest.approx(2 / 3) and m["B"] == pytest.approx(13 / 18) and m["C"] == pytest.approx(7 / 18)


def test_lower_is_better_reverses_each_task():
    m = ranks.mean_reciprocal_rank(TABLE, higher_is_better=False)
    # t1 ranks C B A; t2 A C B; t3 C first, A and B tied at 2.5
    hand = {"A": (1 / 3 + 1 + 1 / 2.5) / 3, "B": (1 / 2 + 1 / 3 + 1 / 2.5) / 3, "C": (1 + 1 / 2 + 1) / 3}
    assert list(m.index) == ["C", "A", "B"] and m.to_dict() == pytest.approx(hand)


def test_all_tied_and_exact_ties_keep_column_order():
    flat = pd.DataFrame({"x": [1.0, 2.0], "y": [1.0, 2.0]})
    m = ranks.mean_reciprocal_rank(flat)
    assert list(m.index) == ["x", "y"] and m.to_dict() == pytest.approx({"x": 1 / 1.5, "y": 1 / 1.5})


def test_missing_scores_drop_tasks_and_unscored_variants():
    t = TABLE.copy()
    t["D"] = math.nan  # never scored: dropped
    t.loc["t2", "C"] = math.inf  # not finite: t2 is left out for every variant
    m = ranks.mean_reciprocal_rank(t)
    assert "D" not in m.index
    assert m.to_dict() == pytest.approx(ranks.mean_reciprocal_rank(TABLE.drop(index="t2")).to_dict())
    assert m["A"] == pytest.approx((1 + 1 / 1.5) / 2)
    assert ranks.mean_reciprocal_rank(pd.DataFrame({"A": [math.nan]})).empty


def _tables(values):
    """{task: seed table} from {task: {variant: [per-seed values]}}."""
    return {k: pd.DataFrame(v).rename_axis("seed") for k, v in values.items()}


def test_interval_is_nan_with_one_seed_and_point_is_the_mrr_of_means():
    tables = _tables({"t1": {"A": [0.9], "B": [0.5]}, "t2": {"A": [0.2], "B": [0.8]}})
    r = ranks.mrr_interval(tables)
    assert r.mrr.to_dict() == pytest.approx({"A": 0.75, "B": 0.75})
    assert r[["lo", "hi", "p_best"]].isna().all().all() and (r.n == 1).all() and (r.n_tasks == 2).all()


def test_hand_worked_bootstrap():
    # t1: A = (1, 0), B = (0.5, 0.5) tie on the means; t2: A beats B in every seed. Resampling t1's two seeds:
    # (s0, s0) p = 1/4 -> A first in t1: MRR A 1, B 0.5; (s1, s1) p = 1/4 -> B first in t1: both 0.75;
    # mixed p = 1/2 -> tie in t1: A 5/6, B 7/12. So A's interval is [0.75, 1] and P(A best) = 1/4 + 1/2 + 1/8.
    tables = _tables({"t1": {"A": [1.0, 0.0], "B": [0.5, 0.5]}, "t2": {"A": [0.9, 0.8], "B": [0.1, 0.2]}})
    r = ranks.mrr_interval(tables, n_boot=20_000, seed=1)
    assert list(r.index) == ["A", "B"]
    assert r.mrr.to_dict() == pytest.approx({"A": 5 / 6, "B": 7 / 12})
    assert (r.loc["A", "lo"], r.loc["A", "hi"]) == pytest.approx((0.75, 1.0))
    assert (r.loc["B", "lo"], r.loc["B", "hi"]) == pytest.approx((0.5, 0.75))
    assert r.loc["A", "p_best"] == pytest.approx(0.875, abs=0.01) and r.p_best.sum() == pytest.approx(1.0)
    again = ranks.mrr_interval(tables, n_boot=20_000, seed=1)
    pd.testing.assert_frame_equal(r, again)  # deterministic given the seed


def test_interval_uses_complete_seeds_and_common_variants():
    rng = np.random.default_rng(0)
    tables = _tables({"t1": {"A": [0.9, 0.8, 0.95], "B": [0.1, math.nan, 0.2], "C": [0.5, 0.5, 0.5]},
                      "t2": {"A": rng.uniform(0.8, 1, 4), "B": rng.uniform(0, 0.2, 4)}})
    r = ranks.mrr_interval(tables)
    assert list(r.index) == ["A", "B"]  # C is not scored in t2
    assert (r.n == 2).all() and (r.n_tasks == 2).all()  # t1 has two seeds where A and B are both finite
    assert r.loc["A", "mrr"] == r.loc["A", "lo"] == r.loc["A", "hi"] == 1.0 and r.loc["A", "p_best"] == 1.0
    assert ranks.mrr_interval({}).empty


def test_mrr_interval_agrees_with_mean_reciprocal_rank():
    rng = np.random.default_rng(3)
    tables = {f"t{i}": pd.DataFrame(rng.uniform(size=(5, 4)), columns=list("wxyz")) for i in range(6)}
    r = ranks.mrr_interval(tables, n_boot=500)
    means = pd.DataFrame({k: t.mean() for k, t in tables.items()}).T
    assert r.mrr.to_dict() == pytest.approx(ranks.mean_reciprocal_rank(means).to_dict())
    assert (r.lo <= r.hi).all() and ((r.lo >= 1 / 4) & (r.hi <= 1)).all()
    assert list(r.index) == list(r.mrr.sort_values(ascending=False).index)


def test_interval_equals_the_hand_written_bootstrap_it_replaced():
    # scipy.stats.bootstrap resamples the tasks in order from one default_rng(seed), as harness.stats did by hand up
    # to commit 634cf8b; the numbers are that code's output (equal up to float rounding)
    rng = np.random.default_rng(3)
    tables = {f"t{i}": pd.DataFrame(rng.uniform(size=(5, 4)), columns=list("wxyz")) for i in range(6)}
    r = ranks.mrr_interval(tables, n_boot=500)
    assert r.lo.to_dict() == pytest.approx({"y": 11 / 24, "w": 23 / 72, "x": 31 / 72, "z": 11 / 36}, rel=1e-12)
    assert r.hi.to_dict() == pytest.approx({"y": 29 / 36, "w": 2 / 3, "x": 47 / 72, "z": 0.6461805555555552}, rel=1e-12)
    assert r.p_best.to_dict() == pytest.approx({"y": 0.679, "w": 0.139, "x": 0.103, "z": 0.079}, rel=1e-12)
