"""Generated findings (harness/report/findings.py) and the prose checker (harness/report/prose.py): the power against
statsmodels, Holm families, flips and ranks on planted seed tables, committed findings.md regenerating from the
committed rows, and every ordering sentence of the README, docs/ and RUN.md citing a finding."""
import math

import numpy as np
import pandas as pd
import pytest

from harness.report import findings as F, findings_md
from harness.report import prose


@pytest.mark.parametrize("d, n", [(0.3, 8), (1.0, 3), (1.0, 8), (2.5, 5), (3.0, 4)])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 28])
def test_power_matches_statsmodels(d, n, alpha):
    # reference: statsmodels.stats.power.TTestPower (the one-sample / paired t test's power, Cohen 1988 ch. 2)
    from statsmodels.stats.power import TTestPower
    want = TTestPower().power(effect_size=d, nobs=n, alpha=alpha, alternative="two-sided")
    diffs = np.linspace(-1, 1, n)
    diffs = diffs / diffs.std(ddof=1) + d  # sd 1, mean d: standardized effect d
    assert F.power(diffs, alpha) == pytest.approx(want, rel=1e-9)


def test_power_edges():
    assert math.isnan(F.power([0.4]))  # one seed decides nothing
    assert F.power([0.2, 0.2, 0.2]) == 1.0  # identical nonzero differences: stats.paired's p is 0
    assert F.power(np.array([0.0, 1.0, 2.0]) + 40) == pytest.approx(1.0)  # huge d: statsmodels gives NaN here


def _table(effects, n, sd=0.02, seed=0):
    """seeds x variants table of PPL-like values: exp(effect + seed noise + a shared per-seed effect)."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.1, n)[:, None]
    x = np.exp(np.array(effects)[None, :] + shared + rng.normal(0, sd, (n, len(effects)))) * 8
    return pd.DataFrame(x, columns=[f"v{k}" for k in range(len(effects))]).rename_axis("seed")


def test_order_findings_holm_family_and_status():
    t = _table([0.0, 0.3, 0.3, 0.3005], n=8)  # v0 far below the rest; v1, v2, v3 equal up to noise
    f = F.order_findings(t, "lm/64", "64", "ppl", "ratio").set_index("id")
    assert len(f) == 6 and (f.family == "the 6 pairs at 64").all()
    assert f.loc["order/lm/64/v0-v1", "established"] and "`v0` lower PPL than `v1`" in f.loc["order/lm/64/v0-v1",
                                                                                              "statement"]
    assert f.loc["order/lm/64/v0-v1", "effect"] == pytest.approx(math.exp(-0.3), rel=0.05)  # a ratio
    weak = f.loc["order/lm/64/v1-v2"]
    assert not weak.established and "not established (power" in weak.statement and weak.power < 0.5
    assert (f.p_holm >= f.p - 1e-15).all()  # Holm never lowers a p


def test_order_findings_two_families_beyond_all_pairs():
    k = F.ALL_PAIRS + 2
    t = _table(list(np.linspace(0, 0.5, k)), n=4)
    f = F.order_findings(t, "lm/64", "64", "ppl", "ratio", reference="v3")
    fams = f.family.unique()
    assert len(fams) == 2 and len(f) == (k - 1) + (k - 2)  # pairs with v3, then the other pairs with the best (v0)
    assert all(("v3" in i) or ("v0" in i) for i in f.id)


def test_flip_needs_both_orders_established():
    a = _table([0.0, 0.2], n=8, seed=1)  # v0 < v1 clearly at the cheap rung
    b_weak = pd.DataFrame({"v0": [8.5, 7.9, 8.6], "v1": [8.0, 8.2, 8.1]})  # reversed in mean, noisy at the large rung
    b_strong = _table([0.2, 0.0], n=8, seed=3)  # reversed and clear
    for b, want in ((b_weak, False), (b_strong, True)):
        orders = pd.concat([F.order_findings(a, "lm@1x/64", "64", "ppl", "ratio").assign(where="lm", rung="1x", L=64),
                            F.order_findings(b, "lm@16x/64", "64", "ppl", "ratio").assign(where="lm", rung="16x",
                                                                                          L=64)],
                           ignore_index=True)
        flips = F.flip_findings(orders)
        assert list(flips.id) == ["flip/lm/1x-16x/64/v0-v1"] and flips.established.iloc[0] == want
        assert ("not established" in flips.statement.iloc[0]) != want


def test_rank_established_only_when_every_order_is():
    t = _table([0.0, 0.3, 0.3005], n=8)
    orders = F.order_findings(t, "lm/64", "64", "ppl", "ratio")
    r = F.rank_findings(t, "lm/64", "64", "ppl", orders).set_index("id")
    assert r.loc["rank/lm/64/v0", "established"]  # v0 is separated from both
    assert not r.loc["rank/lm/64/v1", "established"]  # v1 and v2 are not separated


@pytest.mark.parametrize("study", ["budget", "content", "grid", "longctx", "reference"])
def test_committed_findings_regenerate(study):
    """findings.md holds what the committed rows give (a one-digit edit of it fails here)."""
    from harness import results
    from harness.report.build import pick_reference, prepare
    df = prepare(results.load(prose.ROOT / "results" / study))
    core = df[~df.params.str.contains('"pretrained"')]
    made = findings_md.markdown(F.findings(core, pick_reference(core, None)))
    assert (prose.ROOT / "results" / study / "findings.md").read_text() == made


def test_prose_cites_findings():
    """Every sentence of the README, docs/ and the studies' RUN.md that orders encodings cites a finding."""
    assert prose.problems() == []


def test_prose_checker_catches(tmp_path):
    ids = {"order/lm/512/rope-t5": False, "order/lm/512/alibi-rope": True}
    cases = {"RoPE is worse than T5 at 16x.": "without citing",
             "RoPE is worse than T5 (finding order/lm/512/rope-t9).": "no committed finding",
             "RoPE is worse than T5 (finding order/lm/512/rope-t5).": "not established without saying so",
             "ALiBi is better than RoPE (finding order/lm/512/alibi-rope).": None,
             "RoPE against T5: not established (finding order/lm/512/rope-t5).": None,
             "The sign-flip test with `rope` as reference.": None,  # a method, not an order
             "T5 extrapolates worse than claimed (claim 8).": None,  # a generated claim verdict
             "The kernel in `harness/rope/csrc/rope_body.h` prefetches rows ahead.": None,  # a path, no encoding
             "<!-- ladder-summary: x -->\nRoPE is worse than T5.\n<!-- /ladder-summary -->": None}  # generated
    for text, want in cases.items():
        (tmp_path / "doc.md").write_text(text + "\n")
        got = prose.problems(["doc.md"], tmp_path, ids, names=["rope", "t5", "alibi"])
        assert (got[0][3] if got else None) == want or (want and want in got[0][3]), (text, got)
