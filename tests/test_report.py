"""The report (harness.report): every comparison carries its confidence. Planted-truth run dirs (known
differences, known seed noise) go through report.build, and the markdown and figures are checked."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from matplotlib.collections import PolyCollection

from harness import report, results, stats
from harness.report import figures as report_figures
from harness.report import plots as report_plots
from harness.report.tables import fmt_ci, fmt_interval
from tests.report_runs import LENS, OWN, SEED_EFFECT, planted, run_rows, table_rows


def test_planted_difference_is_significant_and_tie_is_marked(tmp_path):
    md = report.build([planted(tmp_path / "sweep")], tmp_path / "out").read_text()
    rows, block = table_rows(md, "### Perplexity, nonoverlapping")
    assert "n = 4 seeds per cell; a positive ratio-scale quantity: each cell is the geometric mean" in block
    assert "† tied with the best of its column (paired 95% CI of the difference contains 0)" in block
    for k in range(len(LENS)):
        best = [v for v in rows if rows[v][k].startswith("**")]
        assert len(best) == 1 and best[0] in ("rope", "twin")  # the two are equal up to the wiggle
        assert "†" not in rows["alibi"][k] and not rows["alibi"][k].startswith("**")  # 1 nat of PPL apart
        other = "twin" if best[0] == "rope" else "rope"
        assert rows[other][k].endswith("†")
    # Comparisons: alibi is significantly worse (Δ > 0), the twin is not different
    comp, block = table_rows(md, "#### PPL, nonoverlapping windows at 64 (1×")
    assert "n = 4 seeds" in block
    assert comp["alibi"][-1] == "yes, worse" and float(comp["alibi"][1]) > 0
    assert comp["twin"][-1] == "no"
    ci = comp["alibi"][2].strip("[]").split(", ")
    assert 0 < float(ci[0]) < 1 < float(ci[1])  # the planted difference is 1 + mean(OWN) = 1.0
    assert "## Ranking with confidence" in md
    snr, _ = table_rows(md, "## Signal to noise")
    assert all("cannot separate" not in cells[-1] for cells in snr.values())  # 1 nat apart, seed sd ~0.2
    rank, _ = table_rows(md, "### Task `lm`: PPL")
    assert rank["alibi"][3] == "3" and rank["alibi"][4] == "3–3"  # last at 8x in every resample


def test_snr_below_one_says_the_budget_cannot_separate(tmp_path):
    md = report.build([planted(tmp_path / "sweep", encodings=("rope", "twin"))], tmp_path / "out").read_text()
    snr, _ = table_rows(md, "## Signal to noise")
    # signal: the twin's wiggle (means equal); noise: the seed effect, variance ~0.05
    assert snr and all("cannot separate encodings on this metric" in cells[-1] for cells in snr.values())


def test_cell_is_mean_and_t_interval_and_every_cell_has_one(tmp_path):
    md = report.build([planted(tmp_path / "sweep")], tmp_path / "out").read_text()
    rows, _ = table_rows(md, "### Perplexity, nonoverlapping")
    x = np.log([6 + 64 / 512 + e for e in SEED_EFFECT])  # PPL is ratio-scale: the t interval of its logs
    lo, hi = scipy.stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy.stats.sem(x))  # the 95% t CI
    assert rows["rope"][0].strip("*† ") == fmt_interval(np.exp(x.mean()), np.exp(lo), np.exp(hi))
    assert rows["rope"][0].strip("*† ") == "6.13 [5.78, 6.51]"  # the geometric mean; the arithmetic one is 6.1375
    # every cell of every seed-aggregated table (a heading line with n >= 2) carries its interval (± or [lo, hi])
    lines = md.splitlines()
    checked = 0
    for i, line in enumerate(lines):
        if line.startswith("n = 4 seeds per cell"):
            j = i + 1
            while not lines[j].startswith("|"):
                j += 1
            for row in lines[j + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")][1:]
                assert all("±" in c or "[" in c for c in cells if c != "—"), row
                checked += 1
    assert checked >= 3


def test_one_seed_says_n_1_and_marks_nothing(tmp_path):
    md = report.build([planted(tmp_path / "sweep", seeds=[0])], tmp_path / "out").read_text()
    _, block = table_rows(md, "### Perplexity, nonoverlapping")
    assert "n = 1 seed per cell" in block and "nothing is marked significant" in block
    assert "±" not in block and "†" not in md
    comp, block = table_rows(md, "#### PPL, nonoverlapping windows at 64 (1×")
    assert "n = 1 seed: nothing can be significant" in block
    assert all(cells[-1] == "no" for cells in comp.values())
    assert "yes," not in md


def test_reference_option_and_unknown_reference(tmp_path, capsys):
    sweep = planted(tmp_path / "sweep")
    md = report.build([sweep], tmp_path / "out", reference="alibi").read_text()
    comp, _ = table_rows(md, "#### PPL, nonoverlapping windows at 64 (1×")
    assert "Δ vs alibi" in md
    assert comp["rope"][-1] == "yes, better" and float(comp["rope"][1]) < 0
    md = report.build([sweep], tmp_path / "out", reference="alibi", test="permutation").read_text()
    comp, _ = table_rows(md, "#### PPL, nonoverlapping windows at 64 (1×")
    assert "sign-flip permutation" in md and "cannot give p below 2/2^n (n = 4: 0.125)" in md
    # all 4 differences negative: only the 2 all-same-sign patterns of 2^4 reach |mean| (exact test: 2/16)
    assert comp["rope"][3] == "0.125" and comp["rope"][-1] == "no"
    with pytest.raises(SystemExit) as e:
        report.main([str(sweep), "--out", str(tmp_path / "o2"), "--reference", "yarn"])
    msg = capsys.readouterr().err
    assert e.value.code == 2 and msg.count("\n") == 1 and msg.startswith("harness.report: error: ")
    assert "unknown reference 'yarn'" in msg and "alibi, rope, twin" in msg
    assert not (tmp_path / "o2" / "report.md").exists()
    with pytest.raises(ValueError, match="unknown test 'z'; valid: t, permutation"):
        report.build([sweep], tmp_path / "o3", test="z")


def test_headline_curves_have_ci_bands(tmp_path):
    df = report.prepare(results.load(planted(tmp_path / "sweep")))
    s = stats.summarize(df[df.metric == "ppl"], ["variant", "eval_len"])
    fig = report_plots.fig_curves(s, "eval_len", "t", "x", "y", [64])
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 3  # one per variant
    one = stats.summarize(df[(df.metric == "ppl") & (df.seed == 0)], ["variant", "eval_len"])
    fig = report_plots.fig_curves(one, "eval_len", "t", "x", "y", [64])
    assert not [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]  # one seed: no band


def test_training_small_multiples_have_bands():
    import pandas as pd
    rows = [dict(variant=v, step=k, seed=s, value=3 - k / 100 + 0.1 * s + (v == "b")) for v in "abc"
            for k in range(0, 100, 10) for s in range(3)]
    s = stats.summarize(pd.DataFrame(rows), ["variant", "step"])
    fig = report_figures.fig_training(s)
    used = [ax for ax in fig.axes if ax.axison]
    assert len(used) == 3 and all(any(isinstance(c, PolyCollection) for c in ax.collections) for ax in used)
    assert len({ax.get_ylim() for ax in used}) == 1  # shared axes


def test_budget_section_only_with_two_budgets(tmp_path):
    one = report.build([planted(tmp_path / "a")], tmp_path / "oa").read_text()
    assert "ranking hold at more compute" not in one
    two = planted(tmp_path / "b", budgets=(("tiny", 32, 100), ("small", 64, 400)))
    md = report.build([two], tmp_path / "ob").read_text()
    assert "## Does the laptop ranking hold at more compute?" in md
    rungs, _ = table_rows(md, "### Task `lm`: PPL, nonoverlapping windows")
    assert list(rungs) == ["1×", "16×"]  # cost n_layers · d_model² · steps: (64² · 400) / (32² · 100)
    lines = [line for line in md.splitlines() if line.startswith("| 1× → 16× |")]
    assert len(lines) == len({line.split("|")[2] for line in lines}) >= 2  # one row per evaluation length
    for line in lines:  # the same planted order at both rungs: rope < alibi and twin < alibi established, rope ~ twin
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2] == "1.00" and cells[5:9] == ["2", "0", "0", "1"] and cells[-1] == "4 / 4"
    assert "None: no pair's mean order changes." in md
    changes, _ = table_rows(md, "#### Change with compute, per encoding")
    assert changes and all(cells[-1].startswith("paired by seed") for cells in changes.values())  # same seed labels
    assert (tmp_path / "ob" / "ladder_lm.png").stat().st_size > 10_000
    from harness.report import summary  # the README's ladder-summary block: the same numbers, compact
    block = summary.render(f"<!-- ladder-summary: {two.name} -->\n<!-- /ladder-summary -->\n", two.parent)
    assert "| 1× → 16× | 1× (64) | 1.00 [" in block and "Crossovers between consecutive rungs (mean order changes): 0" in block


def test_lm_eval_and_position_rows(tmp_path):
    def extra(enc, s):
        err = 0.01 * (s + 1)  # lm-eval's stderr of run s: mean over the 4 runs = 0.025
        pos = [dict(metric="nll_by_pos", eval_len=512, protocol="nonoverlapping", value=1.5 + lo / 512 + 0.01 * s,
                    unit="nats", extra_params=dict(pos_lo=lo, pos_hi=lo + 64)) for lo in range(0, 512, 64)]
        return [dict(metric="passkey/acc", eval_len=None, protocol="lm_eval", value=0.5 + 0.1 * s, unit="frac"),
                dict(metric="passkey/acc_stderr", eval_len=None, protocol="lm_eval", value=err, unit="frac"), *pos]
    md = report.build([planted(tmp_path / "sweep", extra=extra)], tmp_path / "out").read_text()
    rows, block = table_rows(md, "### `passkey/acc`")
    assert rows["rope"][1] == "0.025" and "±" in rows["rope"][0]
    assert "lm-eval stderr" in block and "mean ± CI over seeds" in block
    assert "pos_lo" not in md and "pos_hi" not in md  # the bins are not variants
    assert (tmp_path / "out" / "nll_by_pos_lm.png").stat().st_size > 10_000


def test_fmt_ci_rounds_to_the_interval():
    assert fmt_ci(20297.0, 684.0) == "20300 ± 680"  # 2 significant digits of the half-width
    assert fmt_ci(5.7234, 0.0346) == "5.723 ± 0.035"
    assert fmt_ci(5.7234, math.nan) == "5.72"  # one seed: the mean alone
    assert fmt_ci(0.0008106, 3.9e-05) == "(8.11 ± 0.39)e-04"  # tiny values share one exponent


def test_fmt_interval_says_pm_only_for_a_symmetric_interval():
    assert fmt_interval(5.7234, 5.7234 - 0.0346, 5.7234 + 0.0346) == "5.723 ± 0.035"  # a t interval: as fmt_ci
    assert fmt_interval(0.967, 0.90, 1.0) == "0.967 [0.900, 1.000]"  # clipped at 1: the bounds themselves
    assert fmt_interval(20297.0, 19612.0, 20990.0) == "20300 [19610, 20990]"  # a geometric one, to tens
    assert fmt_interval(16.0, 0.004, 900.0) == "20 [0.004, 900]"  # to tens; a positive lower end never reads 0
    assert fmt_interval(0.0008106, 0.00077, 0.00085) == "(8.11 [7.70, 8.50])e-04"
    assert fmt_interval(3.0, math.nan, math.nan) == "3"  # one seed


def test_variant_labels_ignore_seed_and_position_bins(tmp_path):
    df = results.load(planted(tmp_path / "sweep"))
    df.loc[df.index[0], "params"] = json.dumps({"pos_lo": 0, "pos_hi": 64})
    assert set(report.variants(df)) == {"rope", "alibi", "twin"}


def test_runs_of_two_configs_never_share_a_label(tmp_path):
    """A sweep over train.lr (not an encoding param) and the same runs from two sweeps: without their own
    labels each seed's rows of both would be averaged as one value under one label."""
    frames = []
    for lr, sweep in (("0.001", "a"), ("0.003", "a"), ("0.001", "b")):
        for s in range(2):
            df = run_rows("rope", s, lambda L: 6.0 + float(lr))
            frames.append(df.assign(run_id=f"{sweep}/encoding=rope,train.lr={lr},seed={s}", sweep=sweep))
    df = pd.concat(frames, ignore_index=True)
    labels = report.variants(df)
    assert set(labels) == {"rope sweep=a train.lr=0.001", "rope sweep=a train.lr=0.003", "rope sweep=b train.lr=0.001"}
    assert df.assign(v=labels).groupby("v").seed.nunique().eq(2).all()  # each label keeps both seeds, paired
    one = pd.concat(frames[:2], ignore_index=True)
    assert set(report.variants(one)) == {"rope"}  # one config: no suffix


def test_a_knob_left_at_its_default_reads_default():
    """Rows carry a model knob such as qk_norm in params only when it is set (harness.config.encoding_params)."""
    df = pd.concat([run_rows("rope", 0, lambda L: 6.0).assign(params=json.dumps(p))
                    for p in ({}, {"qk_norm": "rms"})], ignore_index=True)
    assert set(report.variants(df)) == {"rope qk_norm=default", "rope qk_norm=rms"}
    assert report.pick_reference(report.prepare(df), None) == "rope qk_norm=default"  # the Comparisons' reference


def test_wandb_summary_holds_the_over_seed_interval(tmp_path):
    """The report's W&B run (offline) carries each cell's mean, 95% CI and n from harness.stats: the same
    numbers as the tables; per-run W&B runs hold one seed each."""
    root = planted(tmp_path / "sweep")
    assert report.log_summary([root], tmp_path / "out", "offline") is None
    [table] = (tmp_path / "out" / "wandb_files").rglob("summary_*.table.json")  # the logged wandb.Table
    t = json.loads(table.read_text())
    rows = [dict(zip(t["columns"], r)) for r in t["data"]]
    [cell] = [r for r in rows if (r["metric"], r["eval_len"], r["variant"]) == ("ppl", 64, "alibi")]
    want = stats.ratio_interval([6 + 64 / 512 + SEED_EFFECT[s] + 1.0 + OWN[s] for s in range(4)])  # PPL: a ratio
    assert cell["n"] == 4 and cell["mean"] == pytest.approx(want.mean) and cell["lo"] == pytest.approx(want.lo)
    assert cell["kind"] == "ratio"
    assert report.log_summary([root], tmp_path / "none", "disabled") is None
    assert not (tmp_path / "none").exists()


def test_labels_skip_every_measurement_knob_the_measurement_code_writes_into_params():
    # the report reads labels from the rows alone; a knob added to the precision study's params must be
    # listed as a measurement key, or every precision variant would get its own label
    from harness.measure import precision_model
    from harness.report.labels import MEASUREMENT_KEYS
    assert set(precision_model.PARAM_KEYS) <= set(MEASUREMENT_KEYS)


def test_an_inf_value_is_named_and_left_out_not_a_refusal():
    # one diverged evaluation (ppl = inf) in a run of its own: the table has no finite value for that cell, and the
    # report says which row it left out instead of refusing the whole report
    from harness.report import summary
    from harness.report.build import non_finite
    table = pd.DataFrame({"rope": [math.inf], "alibi": [math.nan]}, index=pd.Index([0], name="seed"))
    assert summary.best_and_tied(table, True) is None
    df = pd.DataFrame({"run_id": ["r1", "r2"], "metric": ["ppl", "ppl"], "eval_len": [128.0, 128.0],
                       "value": [math.inf, 3.0]})
    line = non_finite(df)
    assert len(line) == 1 and "`r1` ppl at 128 = inf" in line[0] and "r2" not in line[0]
    assert non_finite(df.iloc[1:]) == []
