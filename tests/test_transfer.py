"""harness.transfer: the mean-vector draws against the multivariate t's closed-form covariance, τ's interval by
simulated coverage, and the pairwise agree / flip verdicts on planted orders."""
import numpy as np
import pandas as pd
import pytest
import scipy.stats

from harness import stats, transfer


def test_mean_draws_have_the_multivariate_t_covariance():
    # A multivariate t with nu df and scale Sigma has covariance nu / (nu - 2) * Sigma (Kotz & Nadarajah 2004,
    # "Multivariate t Distributions", eq. 1.2); here nu = n - 1 and Sigma = S / n.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 0.4]])
    n, nu = len(x), len(x) - 1
    draws = transfer.mean_draws(x, 400_000, np.random.default_rng(1))
    expected = nu / (nu - 2) * np.cov(x, rowvar=False) / n
    np.testing.assert_allclose(np.cov(draws, rowvar=False), expected, rtol=0.03, atol=1e-4)
    np.testing.assert_allclose(draws.mean(axis=0), x.mean(axis=0), atol=0.01)


def test_draws_of_seeds_that_agree_are_the_mean():
    x = np.tile(np.arange(5.0), (3, 1))  # every seed the same: no uncertainty left
    assert np.allclose(transfer.mean_draws(x, 10, np.random.default_rng(0)), np.arange(5.0))
    t = transfer.tau_interval(pd.DataFrame(x), pd.DataFrame(x[:, ::-1]))
    assert (t.tau, t.lo, t.hi) == pytest.approx((-1.0, -1.0, -1.0))


def test_vectorized_tau_equals_scipy():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(50, 7)), rng.normal(size=(50, 7))
    b[:, 3] = b[:, 4]  # ties in b: τ-b, not τ-a
    want = [scipy.stats.kendalltau(x, y).statistic for x, y in zip(a, b)]
    np.testing.assert_allclose(transfer._tau_rows(a, b), want)


def _coverage(noise, interval, swap=True, n_sims=100):
    """Share of simulated 3-seed experiments whose interval holds the true τ (0.93: one swapped pair of 8; 1)."""
    mu_a = np.arange(8.0)
    mu_b = mu_a.copy()
    if swap:
        mu_b[[3, 4]] = mu_b[[4, 3]]
    true = scipy.stats.kendalltau(mu_a, mu_b).statistic
    rng, hits = np.random.default_rng(1), 0
    for s in range(n_sims):  # each seed shifts every variant alike (the pairing), plus its own noise
        table = lambda mu: pd.DataFrame(mu + rng.normal(0, 1.0, (3, 1)) + rng.normal(0, noise, (3, 8)))  # noqa: E731
        t = transfer.tau_interval(table(mu_a), table(mu_b), n_draws=500, seed=s)
        lo, hi = (t.lo, t.hi) if interval == "hull" else (t.draws_lo, t.draws_hi)
        hits += lo - 1e-12 <= true <= hi + 1e-12
    return hits / n_sims


@pytest.mark.parametrize("noise,swap", [(0.8, True), (1.5, True), (1.5, False)])
def test_tau_interval_covers_the_true_tau(noise, swap):
    assert _coverage(noise, "hull", swap) >= 0.9


def test_tau_interval_covers_a_middling_tau_with_unequal_n():
    # the laptop-to-real comparison's shape: 7 variants, 3 seeds on one side and 4 windows on the other, a true τ
    # of 11/21 (5 of 21 pairs swapped in a planted order), noise 1.5x the gap between neighbouring means
    mu_a = np.arange(7.0)
    mu_b = mu_a[[2, 0, 1, 5, 3, 6, 4]]
    true = scipy.stats.kendalltau(mu_a, mu_b).statistic
    rng, hits = np.random.default_rng(1), 0
    for s in range(100):
        ta = pd.DataFrame(mu_a + rng.normal(0, 1.0, (3, 1)) + rng.normal(0, 1.5, (3, 7)))
        tb = pd.DataFrame(mu_b + rng.normal(0, 1.0, (4, 1)) + rng.normal(0, 1.5, (4, 7)))
        t = transfer.tau_interval(ta, tb, n_draws=500, seed=s)
        hits += t.lo - 1e-12 <= true <= t.hi + 1e-12
    assert true == pytest.approx(11 / 21) and hits >= 90


def test_the_draws_own_interval_would_not():
    assert _coverage(1.5, "draws") < 0.5  # why the interval is reflected (module docstring)


def test_a_perfect_agreement_is_not_an_interval_of_one_point():
    rng = np.random.default_rng(0)
    a = pd.DataFrame(np.arange(6.0) + rng.normal(0, 0.3, (3, 6)))
    b = pd.DataFrame(np.arange(6.0) + rng.normal(0, 0.3, (3, 6)))
    t = transfer.tau_interval(a, b)
    assert t.tau == pytest.approx(1.0) and t.hi == 1.0 and t.lo < 0.8  # the reflection alone would give [1, 1]


def test_agreement_names_agreeing_flipping_and_open_pairs():
    seeds = np.array([[0.0], [0.3], [-0.2]])  # a shared seed effect: paired differences are exact
    a = pd.DataFrame(seeds + [[1.0, 2.0, 3.0, 3.0]] + [[0, 0, 0, 1.5], [0, 0, 0, -1.5], [0, 0, 0, 0.3]],
                     columns=["x", "y", "z", "w"])
    b = pd.DataFrame(seeds + [[1.0, 3.0, 2.0, 3.0]] + [[0.01, 0, 0, 0], [0, 0.02, 0, 0], [0, 0, 0.03, 0]],
                     columns=["x", "y", "z", "w"])
    m = transfer.agreement(a, b).set_index(["i", "j"]).verdict
    assert m["x", "y"] == "agree" and m["y", "z"] == "flip" and m["z", "w"] == "b only"
    assert m["x", "w"] == "b only"  # w is noisy at a only
    c = transfer.crossovers({"1x": a, "4x": b})
    assert set(zip(c.i, c.j)) == {("y", "z"), ("y", "w")} and set(c.from_rung) == {"1x"}
    assert c.set_index(["i", "j"]).established.to_dict() == {("y", "z"): "at both (a flip)", ("y", "w"): "at neither"}


def test_rung_change_pairs_by_seed_where_seeds_match_else_welch():
    # a shared seed effect (±0.3 on log PPL, the same at both rungs) swamps a 10% rise: Welch misses it, paired finds it
    seed_effect = pd.Series([-0.3, 0.0, 0.3], index=pd.Index([0, 1, 2], name="seed"))
    noise = pd.Series([0.01, -0.01, 0.0], index=seed_effect.index)
    a = pd.DataFrame({"rope": np.exp(2.0 + seed_effect)})
    b = pd.DataFrame({"rope": np.exp(2.0 + np.log(1.1) + seed_effect + noise)})
    r = transfer.rung_change(a, b, kind="ratio").iloc[0]
    assert r.test == "paired" and r.n == 3 and r.significant and r.p < 0.01
    assert r.change == pytest.approx(1.1, rel=1e-2) and r.lo > 1
    welch = stats.independent(np.log(b.rope), np.log(a.rope))
    assert not welch.significant and welch.p > 0.5  # the same rows as independent samples: no difference
    # seeds that do not match (other labels at rung b): Welch, and the row says so
    b_other = b.set_axis(pd.Index([10, 11, 12], name="seed"))
    w = transfer.rung_change(a, b_other, kind="ratio").iloc[0]
    assert w.test == "Welch" and not w.significant and w.p == pytest.approx(welch.p)
    # a real-kind metric: the difference b - a, paired
    d = transfer.rung_change(np.log(a), np.log(b)).iloc[0]
    assert d.test == "paired" and d.change == pytest.approx(np.log(1.1), abs=1e-2) and d.significant
