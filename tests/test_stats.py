"""harness.stats against scipy references, closed forms and planted truths (known effects + seed noise).
harness.stats computes through scipy.stats and statsmodels, so the reference tests are regression tests: they pin
the library calls (options, axes, NaN handling) to the values the hand-written code they replaced gave."""
import math
import time
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from harness import ranks, stats

X = np.array([2.1, 2.5, 1.9, 2.8, 2.2])


def _table(cols: dict) -> pd.DataFrame:
    t = pd.DataFrame(cols)
    t.index.name = "seed"
    return t


# ---------------------------------------------------------------- interval

def test_interval_t_equals_scipy():
    iv = stats.interval(X)
    # reference: scipy.stats.t.interval with the standard error of the mean (sem, ddof=1)
    lo, hi = scipy.stats.t.interval(0.95, len(X) - 1, loc=X.mean(), scale=scipy.stats.sem(X))
    assert (iv.n, iv.mean, iv.std) == (5, pytest.approx(X.mean()), pytest.approx(X.std(ddof=1)))
    assert (iv.lo, iv.hi) == (pytest.approx(lo, rel=1e-12), pytest.approx(hi, rel=1e-12))
    assert iv.half == pytest.approx((hi - lo) / 2)
    lo90, hi90 = scipy.stats.t.interval(0.9, len(X) - 1, loc=X.mean(), scale=scipy.stats.sem(X))
    assert (stats.interval(X, level=0.9).lo, stats.interval(X, level=0.9).hi) == (pytest.approx(lo90),
                                                                                 pytest.approx(hi90))
    rng = np.random.default_rng(0)  # the cached quantiles give scipy's bits, not only its value
    for n, level in ((2, 0.95), (3, 0.95), (5, 0.9), (7, 0.99), (12, 0.95)):
        x = rng.normal(rng.normal() * 10, rng.uniform(1e-3, 5), n)
        ref = scipy.stats.t.interval(level, n - 1, loc=x.mean(), scale=scipy.stats.sem(x))
        assert (stats.interval(x, level=level).lo, stats.interval(x, level=level).hi) == ref


def test_interval_one_seed_nan_bounds_and_nonfinite_dropped():
    one = stats.interval([3.0])
    assert one.n == 1 and one.mean == 3.0 and all(math.isnan(v) for v in (one.std, one.lo, one.hi, one.half))
    assert stats.interval([1.0, np.nan, 3.0, np.inf]) == stats.interval([1.0, 3.0])
    empty = stats.interval([np.nan])
    assert empty.n == 0 and math.isnan(empty.mean)


def test_interval_bad_method():
    with pytest.raises(ValueError, match="'median'.*t, bootstrap"):
        stats.interval(X, method="median")


def test_interval_bootstrap_known_answer():
    # Normal sample: the sampling distribution of the mean is N(mu, sigma^2/n), so the percentile bootstrap
    # CI is close to mean ± 1.96 s/√n (s: sample std, estimating sigma; Efron & Tibshirani 1993, ch. 13).
    # Tolerance 3% of the half-width: the Monte Carlo error of 10,000 resampled 2.5%/97.5% quantiles is ~1%.
    x = np.random.default_rng(1).normal(5.0, 2.0, size=400)
    iv = stats.interval(x, method="bootstrap", seed=0)
    half = 1.959964 * x.std(ddof=1) / math.sqrt(len(x))  # 1.959964 = scipy.stats.norm.ppf(0.975)
    assert iv.lo == pytest.approx(x.mean() - half, abs=0.03 * half)
    assert iv.hi == pytest.approx(x.mean() + half, abs=0.03 * half)
    assert half == pytest.approx(1.96 * 2.0 / 20, rel=0.1)  # and s is near the known sigma = 2
    const = stats.interval([4.0] * 5, method="bootstrap")
    assert const.lo == const.hi == 4.0 and const.half == 0.0


@pytest.mark.serial
def test_bootstrap_interval_is_fast():
    # called for hundreds of cells by the report: must stay well under 10 ms (best of 5, shared CPUs)
    best = min(_timed(lambda: stats.interval(X, method="bootstrap")) for _ in range(5))
    assert best < 0.01


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------- summarize / seed_table

def _rows():
    return pd.DataFrame({"variant": ["a", "a", "a", "a", "b", "b"], "seed": [0, 0, 1, 2, 0, 1],
                         "value": [1.0, 3.0, 4.0, 6.0, np.nan, np.nan]})


def test_summarize_averages_rows_of_one_seed_and_keeps_empty_groups():
    out = stats.summarize(_rows(), "variant").set_index("variant")
    ref = stats.interval([2.0, 4.0, 6.0])  # seed 0 = mean(1, 3)
    assert list(out.columns) == ["n", "mean", "std", "lo", "hi", "half"]
    assert out.loc["a", "n"] == 3 and out.loc["a", "mean"] == pytest.approx(4.0)
    assert out.loc["a", "lo"] == pytest.approx(ref.lo) and out.loc["a", "half"] == pytest.approx(ref.half)
    assert out.loc["b", "n"] == 0 and math.isnan(out.loc["b", "mean"])  # 'not measurable' cell kept
    with pytest.raises(ValueError, match="unknown column 'nope'; valid: variant, seed, value"):
        stats.summarize(_rows(), ["nope"])


def test_seed_table():
    t = stats.seed_table(_rows())
    assert t.index.name == "seed" and list(t.columns) == ["a", "b"]
    assert t.loc[0, "a"] == 2.0 and math.isnan(t.loc[2, "b"]) and t["b"].isna().all()


# ---------------------------------------------------------------- paired

A = np.array([3.1, 2.9, 3.4, 3.0, 3.3])
B = np.array([3.3, 3.0, 3.6, 3.3, 3.4])


def test_paired_t_equals_scipy():
    r = stats.paired(A, B)
    assert r.p == pytest.approx(scipy.stats.ttest_rel(A, B).pvalue, rel=1e-10)  # reference: ttest_rel
    iv = stats.interval(A - B)
    assert (r.n, r.diff, r.lo, r.hi) == (5, pytest.approx((A - B).mean()), pytest.approx(iv.lo), pytest.approx(iv.hi))
    assert r.significant == (r.hi < 0)


def test_paired_aligns_series_and_drops_nan_pairs():
    a = pd.Series([1.0, 2.0, 4.0, np.nan], index=[0, 1, 2, 3])
    b = pd.Series([1.5, 1.0, 3.0], index=[2, 0, 1])  # other order, seed 3 missing
    r = stats.paired(a, b)
    assert r.n == 3 and r.diff == pytest.approx(np.mean([0.0, -1.0, 2.5]))
    with pytest.raises(ValueError, match="lengths 3 and 2"):
        stats.paired([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="t, permutation"):
        stats.paired(A, B, method="wilcoxon")
    assert math.isnan(stats.paired([1.0], [2.0]).p) and not stats.paired([1.0], [2.0]).significant


def test_paired_zero_variance_difference():
    d = np.arange(1.0, 6.0)  # + 0.5 and + 0.25 are exact in binary: the differences are exactly 0.25
    for method in ("t", "permutation"):
        r = stats.paired(d + 0.5, d + 0.25, method=method)
        assert (r.diff, r.lo, r.hi, r.p, r.significant) == (0.25, 0.25, 0.25, 0.0, True)
    same = stats.paired(A, A)
    assert (same.diff, same.lo, same.hi, same.p, same.significant) == (0.0, 0.0, 0.0, 1.0, False)


def test_differences_constant_up_to_rounding_are_constant():
    # 3.3 - 1.7 and 7.7 - 6.1 are 1.6 up to one rounding each: their spread (7e-16) is no variance. scipy's
    # precision-loss test decides (max |d - mean| <= 10 eps |mean|), so scipy is not asked and does not warn; the
    # hand-written t-test before gave p = 1.4e-16 and a CI [1.5999999999999956, 1.6000000000000045] from that rounding
    a, b = np.array([3.3, 7.7]), np.array([1.7, 6.1])
    assert np.ptp(a - b) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in ("t", "permutation"):
            r = stats.paired(a, b, method=method)
            assert (r.lo, r.hi, r.p) == (r.diff, r.diff, 0.0) and r.diff == pytest.approx(1.6)
        iv = stats.interval(a - b)
        assert iv.lo == iv.hi == iv.mean
    assert stats.paired(np.array([1.0, 2.0]), np.array([2.0, 1.0])).p == 1.0  # mean 0, spread 2: a real t-test


def test_permutation_exact_sign_flip():
    # hand count: d = 1..5, mean 3 is the largest |mean| of the 32 sign patterns, reached only by all + and
    # all - -> two-sided p = 2/32
    d = np.arange(1.0, 6.0)
    assert stats.paired(d, np.zeros(5), method="permutation").p == pytest.approx(2 / 32)
    # reference: scipy.stats.permutation_test, paired ("samples") exchange = sign flip of each difference
    ref = scipy.stats.permutation_test((A, B), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                       permutation_type="samples", n_resamples=np.inf)
    r = stats.paired(A, B, method="permutation")
    assert r.p == pytest.approx(ref.pvalue) and r.lo <= r.diff <= r.hi
    # 2^n > n_perm: random flips, drawn by scipy from default_rng(seed)
    rand = scipy.stats.permutation_test((A, B), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                        permutation_type="samples", n_resamples=16, rng=np.random.default_rng(0))
    assert stats.paired(A, B, method="permutation", n_perm=16).p == rand.pvalue


def test_permutation_random_flips_near_the_exact_p():
    # 16 seeds: 2^16 = 65,536 sign patterns > n_perm = 10,000, so the flips are drawn at random. Reference: the
    # exact p over all patterns; tolerance 5 Monte Carlo standard errors, sqrt(p (1 - p) / n_perm)
    d = np.random.default_rng(7).normal(0.5, 1.0, 16)
    exact = scipy.stats.permutation_test((d, np.zeros(16)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                         vectorized=True, permutation_type="samples", n_resamples=np.inf).pvalue
    assert 0.001 < exact < 0.5  # a p where the error matters
    r = stats.paired(d, np.zeros(16), method="permutation")
    assert r.p == pytest.approx(exact, abs=5 * math.sqrt(exact * (1 - exact) / 10_000)) and r.p != exact


# ---------------------------------------------------------------- holm

HOLM_P = [0.01, 0.04, np.nan, 0.03, 0.005, 0.6, 0.7]
# by hand (Holm 1979, Scand. J. Statist. 6:65-70): m = 6 (NaN not counted); sorted p_(i) * (m - i + 1):
# 0.005*6 = 0.03, 0.01*5 = 0.05, 0.03*4 = 0.12, 0.04*3 = 0.12, 0.6*2 = 1.2, 0.7*1 = 0.7;
# running max 0.03, 0.05, 0.12, 0.12, 1.2, 1.2; capped at 1 -> back in input order:
HOLM_ADJ = [0.05, 0.12, np.nan, 0.12, 0.03, 1.0, 1.0]


def test_holm_worked_example():
    np.testing.assert_allclose(stats.holm(HOLM_P), HOLM_ADJ, rtol=1e-12)
    assert stats.holm([]).shape == (0,)


def test_holm_equals_statsmodels():
    p = np.array([v for v in HOLM_P if not np.isnan(v)] + [0.02, 0.011, 0.5])
    ref = multipletests(p, method="holm")[1]
    np.testing.assert_allclose(stats.holm(p), ref, rtol=1e-12)


# ---------------------------------------------------------------- compare / best_and_ties

def _planted(n=5, rng_seed=0):
    # per-seed effect shared by all variants (0.3) >> paired noise (0.05): the pairing must cancel it
    rng = np.random.default_rng(rng_seed)
    base = rng.normal(3.0, 0.3, n)
    ref = base + rng.normal(0, 0.05, n)
    return _table({"ref": ref, "better": base - 0.5 + rng.normal(0, 0.05, n),
                   "copy": ref + rng.normal(0, 1e-3, n)})


def test_compare_planted_truth():
    out = stats.compare(_planted(), "ref")
    assert list(out.index) == ["better", "copy"] and out.index.name == "variant"
    assert list(out.columns) == ["n", "diff", "lo", "hi", "p", "p_holm", "significant"]
    assert out.loc["better", "significant"] and out.loc["better", "hi"] < 0
    assert out.loc["better", "diff"] == pytest.approx(-0.5, abs=0.1)
    assert not out.loc["copy", "significant"]
    np.testing.assert_allclose(out["p_holm"], stats.holm(out["p"].to_numpy()))
    assert not stats.compare(_planted(n=1), "ref")["significant"].any()  # one seed decides nothing
    with pytest.raises(ValueError, match="unknown reference 'nope'; valid: ref, better, copy"):
        stats.compare(_planted(), "nope")


def test_best_and_ties_planted_truth():
    t = _planted()
    t = t.assign(worse=t["ref"] + 0.3 + np.random.default_rng(1).normal(0, 0.02, 5), same=t["better"],
                 one_seed=[4.0, np.nan, np.nan, np.nan, np.nan], empty=np.nan)
    best, ties = ranks.best_and_ties(t)
    assert best == "better" and ties == {"same", "one_seed"}  # identical -> tied; n = 1 -> cannot separate
    assert ranks.best_and_ties(t.drop(columns="one_seed"), lower_is_better=False) == ("worse", set())
    best1, ties1 = ranks.best_and_ties(t.iloc[:1])
    assert best1 == "better" and ties1 == {"ref", "copy", "worse", "same", "one_seed"}
    with pytest.raises(ValueError, match="no column"):
        ranks.best_and_ties(t[["empty"]])


# ---------------------------------------------------------------- rank_bootstrap

def test_rank_bootstrap_clear_best_and_shared_p_best():
    t = _planted().assign(empty=np.nan)
    out = ranks.rank_bootstrap(t)
    assert list(out.columns) == ["rank", "lo", "hi", "p_best"] and "empty" not in out.index
    assert out.loc["better", "p_best"] == 1.0 and (out.loc["better", "lo"], out.loc["better", "hi"]) == (1, 1)
    assert out.loc["better", "rank"] == 1 and out["p_best"].sum() == pytest.approx(1.0)
    two = ranks.rank_bootstrap(t.assign(twin=t["better"]))
    assert two.loc["better", "p_best"] == two.loc["twin", "p_best"] == 0.5
    assert two.loc["twin", "rank"] == 1.5
    worst = ranks.rank_bootstrap(t, lower_is_better=False)
    assert worst.loc["better", "rank"] == 3 and worst.loc["better", "p_best"] == 0.0
    one = ranks.rank_bootstrap(t.iloc[:1])
    assert one.loc["better", "rank"] == 1 and one[["lo", "hi", "p_best"]].isna().all().all()


@pytest.mark.serial
def test_rank_bootstrap_is_fast():
    t = _table({f"v{i}": np.random.default_rng(i).normal(i * 0.01, 0.1, 5) for i in range(16)})
    best = min(_timed(lambda: ranks.rank_bootstrap(t, n_boot=2000)) for _ in range(3))
    assert best < 0.1


# ---------------------------------------------------------------- snr

def test_snr_closed_form():
    # means 3 and 11 -> var ddof=1 = 32; seed variances 4 and 3 -> mean 3.5; snr = 32 / 3.5
    t = _table({"a": [1.0, 3.0, 5.0], "b": [10.0, 10.0, 13.0]})
    assert ranks.snr(t) == pytest.approx(32 / 3.5)
    assert ranks.snr(_table({"a": [1.0, 1.0], "b": [2.0, 2.0]})) == math.inf
    assert math.isnan(ranks.snr(t.iloc[:1])) and math.isnan(ranks.snr(t[["a"]]))


def test_bootstraps_equal_the_hand_written_ones_they_replaced():
    # scipy.stats.bootstrap draws rng.integers(0, n, (n_boot, n)) per sample, in order, from default_rng(seed), as
    # harness.stats did by hand up to commit 634cf8b, and takes linear percentiles as np.quantile did: the pinned
    # numbers are that code's output (equal up to float rounding)
    assert (stats.interval(X, method="bootstrap").lo, stats.interval(X, method="bootstrap").hi) == pytest.approx(
        (2.04, 2.56), rel=1e-12)
    t = _planted()
    out = ranks.rank_bootstrap(t.assign(twin=t["better"], noisy=t["ref"] + np.random.default_rng(2).normal(0, 0.3, 5)))
    assert out.to_dict() == {"rank": {"ref": 5.0, "better": 1.5, "copy": 4.0, "twin": 1.5, "noisy": 3.0},
                             "lo": {"ref": 3.0, "better": 1.5, "copy": 3.0, "twin": 1.5, "noisy": 3.0},
                             "hi": {"ref": 5.0, "better": 1.5, "copy": 5.0, "twin": 1.5, "noisy": 5.0},
                             "p_best": {"ref": 0.0, "better": 0.498, "copy": 0.0, "twin": 0.498, "noisy": 0.004}}
    t16 = _table({f"v{i}": np.random.default_rng(i).normal(i * 0.01, 0.1, 5) for i in range(16)})
    out16 = ranks.rank_bootstrap(t16)
    assert out16.loc["v13", "lo"] == pytest.approx(4.975, rel=1e-12) and out16.loc["v8", "hi"] == 5.0
    assert out16.p_best[out16.p_best > 0].to_dict() == {"v2": 0.2445, "v3": 0.1015, "v6": 0.02, "v8": 0.634}


@pytest.mark.parametrize("k, n", [(0, 5), (1, 5), (5, 5), (7, 20)])
def test_wilson_interval_is_wilsons_closed_form_inside_0_1(k, n):
    # Wilson 1927 (JASA 22:209), the score interval: (p + z²/2n ± z √(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    z, p = scipy.stats.norm.ppf(0.975), k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (
        1 + z * z / n)
    iv = stats.interval([1.0] * k + [0.0] * (n - k), method="wilson")
    assert (iv.n, iv.mean) == (n, p)
    assert (iv.lo, iv.hi) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert 0.0 <= iv.lo <= p <= iv.hi <= 1.0


def test_wilson_refuses_values_that_are_not_0_or_1():
    with pytest.raises(ValueError, match="method 'wilson' is for proportions"):
        stats.interval([0.0, 0.5, 1.0], method="wilson")


# ---------------------------------------------------------------- interval kinds

def test_proportion_interval_is_the_t_interval_clipped_to_0_1():
    x = [0.9, 1.0, 1.0]  # a t interval reaches 1.11
    t, iv = stats.interval(x), stats.proportion_interval(x)
    assert t.hi > 1 and iv.hi == 1.0 and (iv.n, iv.mean, iv.std, iv.lo) == (t.n, t.mean, t.std, t.lo)
    y = [0.40, 0.55, 0.47]  # inside [0, 1]: the t interval itself, bit for bit
    assert stats.proportion_interval(y) == stats.interval(y)
    assert stats.proportion_interval([0.0, 0.0, 0.3]).lo == 0.0
    assert stats.proportion_interval([1.0, 1.0, 1.0]) == stats.Interval(3, 1.0, 0.0, 1.0, 1.0)  # no spread: [1, 1]
    with pytest.raises(ValueError, match="a proportion is in \\[0, 1\\], got \\[1.2\\]"):
        stats.proportion_interval([0.5, 1.2])


def test_clipping_to_the_range_keeps_the_t_intervals_coverage():
    # the clipped interval contains a mean in [0, 1] exactly when the t interval does: planted per-seed accuracies
    # near 1 (Beta(20, 1): mean 20/21), 3 seeds; both intervals cover it in the same experiments
    rng = np.random.default_rng(0)
    p = 20 / 21
    cover_t = cover_c = 0
    for x in rng.beta(20, 1, size=(2000, 3)):
        t, c = stats.interval(x), stats.proportion_interval(x)
        cover_t += t.lo <= p <= t.hi
        cover_c += c.lo <= p <= c.hi
        assert 0 <= c.lo <= c.hi <= 1
    assert cover_t == cover_c and 0.85 < cover_c / 2000 < 0.99  # skewed values, 3 seeds: near 95%, not exact


def test_ratio_interval_is_the_t_interval_of_the_logs_exponentiated():
    x = np.array([1000.0, 30000.0, 2000.0])
    logs = np.log(x)
    lo, hi = scipy.stats.t.interval(0.95, 2, loc=logs.mean(), scale=scipy.stats.sem(logs))
    iv = stats.ratio_interval(x)
    assert stats.interval(x).lo < 0 < iv.lo  # the t interval of a throughput ran below 0
    assert (iv.mean, iv.lo, iv.hi) == (pytest.approx(np.exp(logs.mean())), pytest.approx(np.exp(lo)),
                                       pytest.approx(np.exp(hi)))
    assert iv.std == pytest.approx(x.std(ddof=1)) and iv.n == 3
    assert stats.ratio_interval([6.1, 6.1]) == stats.Interval(2, 6.1, 0.0, 6.1, 6.1)  # the value itself, exactly
    one = stats.ratio_interval([6.1, math.nan])
    assert (one.n, one.mean) == (1, 6.1) and math.isnan(one.lo)
    with pytest.raises(ValueError, match="a ratio-scale value is > 0, got \\[0.0\\]"):
        stats.ratio_interval([3.0, 0.0])


def test_ratio_interval_covers_a_lognormal_median_95_percent():
    # Limpert et al. 2001: under a log-normal model exp(t interval of the logs) is exact for the median exp(mu)
    rng = np.random.default_rng(1)
    x = np.exp(rng.normal(2.0, 0.8, size=(4000, 3)))
    cover = np.mean([(iv.lo <= np.exp(2.0) <= iv.hi) for iv in map(stats.ratio_interval, x)])
    assert abs(cover - 0.95) < 0.015  # Monte Carlo error of 4000 experiments: 0.0034


def test_nonnegative_interval_is_clipped_at_0_and_keeps_its_mean():
    x = [0.0, 0.01, 0.6]
    t, iv = stats.interval(x), stats.nonnegative_interval(x)
    assert t.lo < 0 and (iv.lo, iv.hi, iv.mean) == (0.0, t.hi, t.mean)
    kl = [-2e-10, -1e-10, -3e-10]  # a KL of 0 summed in fp32: the interval stops at the mean, not above it
    assert stats.nonnegative_interval(kl).lo <= stats.nonnegative_interval(kl).mean


def test_trials_interval_is_wilsons_and_the_kinds_cover_their_ranges():
    x = [1.0, 1.0, 0.0, 1.0]
    assert stats.trials_interval(x) == stats.interval(x, method="wilson")
    assert set(stats.KINDS) == set(stats.RANGES)
    with pytest.raises(ValueError, match="unknown kind 'log'"):
        stats.summarize(_rows(), "variant", kind="log")
    with pytest.raises(ValueError, match="method 'bootstrap' is kind real's"):
        stats.summarize(_rows(), "variant", kind="ratio", method="bootstrap")
    out = stats.summarize(_rows(), "variant", kind="ratio").set_index("variant")
    assert out.loc["a", "mean"] == pytest.approx(np.exp(np.log([2.0, 4.0, 6.0]).mean()))  # seed 0 = mean(1, 3)
    assert list(out.columns) == ["n", "mean", "std", "lo", "hi", "half"]


def test_best_and_ties_picks_the_best_mean_of_the_kind():
    # a: arithmetic mean 50.5, geometric 10; b: 20.5 and 20.49. The tables print the kind's mean beside the mark.
    t = _table({"a": [1.0, 100.0], "b": [20.0, 21.0]})
    assert ranks.best_and_ties(t, lower_is_better=True)[0] == "b"
    assert ranks.best_and_ties(t, lower_is_better=True, kind="ratio")[0] == "a"
    assert ranks.best_and_ties(t, lower_is_better=False, kind="ratio")[0] == "b"
    assert ranks.best_and_ties(t, lower_is_better=True, kind="ratio")[1] == {"b"}  # ties: paired t on the values
