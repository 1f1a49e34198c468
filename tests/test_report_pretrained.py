"""The pretrained report and the laptop-to-real transfer statistics on synthetic rows whose answers are known,
and the README's generated block against the committed results."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import results
from harness.report import pretrained as report_pretrained
from harness.pretrained import transfer

ROOT = Path(__file__).resolve().parents[1]


def _rows(rows):
    df = pd.DataFrame(rows)
    for c in results.COLUMNS:
        if c not in df:
            df[c] = None
    return df[results.COLUMNS]


def real_rows(means, lens=(8192, 16384), windows=4, noise=0.01):
    """bpb rows of the pretrained study: means[variant] = value at 2x; at 1x every variant is 0.6."""
    rng, out = np.random.default_rng(0), []
    for (ext, factor), m in means.items():
        for w in range(windows):
            for L in lens:
                v = (m if L == 16384 else 0.6) + noise * rng.standard_normal()
                p = dict(pretrained="smollm2", extension=ext, factor=factor, rope_impl="harness", corpus="pystdlib",
                         base=1e5)
                out.append(dict(metric="bpb", value=v, eval_len=L, seed=w, train_len=8192, sweep="pretrained",
                                protocol="nonoverlapping", params=json.dumps(p), model="SmolLM2", n_layers=30,
                                d_model=576, n_heads=9, head_dim=64))
    return out


def laptop_rows(means, seeds=3, noise=0.01):
    rng, out = np.random.default_rng(1), []
    for ext, m in means.items():
        for s in range(seeds):
            p = {} if ext == "none" else dict(extension=ext, factor=2.0)
            out.append(dict(metric="ppl", value=m + noise * rng.standard_normal(), eval_len=128, seed=s, train_len=64,
                            sweep="extension", protocol="nonoverlapping", params=json.dumps(p)))
    return out


def test_transfer_agree_and_flip_are_found_where_both_sides_establish_the_order():
    real = _rows(real_rows({("none", 1.0): 1.0, ("linear", 2.0): 1.2, ("ntk", 2.0): 0.7}))
    lap = _rows(laptop_rows({"none": 5.0, "linear": 4.0, "ntk": 3.0}))
    toy, r = transfer.laptop_table(lap, 2), transfer.real_table(real, 2)
    assert sorted(toy.columns) == sorted(r.columns) == ["linear", "none", "ntk"]
    pr = transfer.pairs(toy, r).set_index(["a", "b"]).outcome
    # laptop: linear < none, real: none < linear -> flip; ntk best on both -> agree
    got = {frozenset(k): v for k, v in pr.items()}
    assert got[frozenset({"none", "linear"})] == "flip"
    assert got[frozenset({"none", "ntk"})] == got[frozenset({"linear", "ntk"})] == "agree"
    tau = transfer.tau(toy, r)
    assert np.isclose(tau.tau, 1 / 3) and tau.n_variants == 3 and (tau.n_seeds_a, tau.n_seeds_b) == (3, 4)


def test_an_order_within_noise_is_not_established():
    real = _rows(real_rows({("none", 1.0): 1.0, ("linear", 2.0): 1.0}, noise=0.2))
    lap = _rows(laptop_rows({"none": 5.0, "linear": 4.0}))
    pr = transfer.pairs(transfer.laptop_table(lap, 2), transfer.real_table(real, 2))
    assert pr.outcome.tolist() == ["not established on real"]


def test_report_tables_state_n_and_the_reference_check(tmp_path):
    rows = real_rows({("none", 1.0): 1.0, ("linear", 2.0): 1.2})
    ref = [dict(r, params=json.dumps({**json.loads(r["params"]), "rope_impl": "transformers"}))
           for r in rows if json.loads(r["params"])["extension"] == "none" and r["eval_len"] == 8192]
    df = _rows(rows + ref)
    md = "\n".join(report_pretrained.section(df, df, tmp_path, []))
    assert "n = 4 windows" in md and "max |Δ bits/byte| = 0.0e+00 at 8192 tokens over n = 4 windows" in md
    assert "| linear x2 | +0.19" in md and (tmp_path / "pretrained_smollm2.png").is_file()


def test_a_pair_equal_by_construction_on_both_sides_is_called_identical():
    """Dynamic NTK at f x the trained length is static NTK with factor f: equal on every seed and window."""
    toy = pd.DataFrame({"ntk": [3.0, 3.1, 2.9], "dynamic": [3.0, 3.1, 2.9], "none": [5.0, 5.2, 4.9]})
    real = pd.DataFrame({"ntk": [0.5, 0.6, 0.55, 0.7], "dynamic": [0.5, 0.6, 0.55, 0.7], "none": [1.0, 1.1, 0.9, 1.2]})
    pr = {frozenset((r.a, r.b)): r.outcome for r in transfer.pairs(toy, real).itertuples()}
    assert pr[frozenset({"ntk", "dynamic"})] == "identical on both"
    assert pr[frozenset({"ntk", "none"})] == "agree"


def test_readme_block_is_what_the_committed_results_give():
    """docs/pretrained.md's block is generated (python -m harness.report.pretrained results/pretrained --readme
    docs/pretrained.md --write); it fails here when a committed result or the generator changed without it."""
    text = (ROOT / "docs" / "pretrained.md").read_text()
    assert report_pretrained.BLOCK.search(text), "docs/pretrained.md has no pretrained block"
    assert report_pretrained.render(text, ROOT / "docs") == text


def proxy_rows(means, base, seeds=3, noise=0.01, sweep="transfer"):
    """PPL rows of a transfer sweep at 2x (128 of 64): means[(extension, factor)] = PPL; one n_params row a seed."""
    rng, out = np.random.default_rng(2), []
    common = dict(train_len=64, sweep=sweep, protocol="nonoverlapping", model="tiny", n_layers=2, d_model=128,
                  n_heads=4, head_dim=32)
    for s in range(seeds):
        out.append(dict(common, metric="n_params", value=4.3e5, seed=s, params=json.dumps(dict(base=base))))
        for (ext, f), m in means.items():
            p = dict(base=base) if ext == "none" else dict(base=base, extension=ext, factor=f)
            out.append(dict(common, metric="ppl", value=m * (1 + noise * rng.standard_normal()), eval_len=128, seed=s,
                            params=json.dumps(p)))
    return out


def test_matched_points_pair_variants_by_their_factor_and_compare_in_one_unit():
    from harness.pretrained.rows import prepare
    from harness.report import pretrained_transfer
    real = real_rows({("none", 1.0): 1.0, ("linear", 2.0): 1.2, ("ntk", 2.0): 0.7, ("dynamic", 1.0): 0.8,
                      ("dynamic", 2.0): 0.75})
    same = {("none", None): 8.0, ("linear", 2.0): 9.0, ("ntk", 2.0): 4.0, ("dynamic", 1.0): 6.0, ("dynamic", 2.0): 5.0,
            ("linear", 1.0): 8.0}  # the real order; linear x1 has no real counterpart
    other = {k: 20.0 - v for k, v in same.items()}  # the reverse order
    from harness.rope import geometry
    matched = geometry.matched_base(64, geometry.critical_fraction(1e5, 8192))  # SmolLM2's share at 64 tokens
    df = _rows(real + proxy_rows(same, matched) + proxy_rows(other, 10000.0))
    d = prepare(df)
    cs = {c["matched"]: c for c in pretrained_transfer.cells(df, d) if c["ratio"] == 2}
    assert sorted(cs[True]["toy"].columns) == ["dynamic", "dynamic x2", "linear", "linear x2", "none", "ntk x2"]
    assert sorted(cs[True]["real"].columns) == ["dynamic", "dynamic x2", "linear x2", "none", "ntk x2"]
    assert cs[True]["tau"].n_variants == 5 and cs[True]["unit"] == "byte"
    assert cs[True]["tau"].tau == pytest.approx(1.0) and cs[False]["tau"].tau == pytest.approx(-1.0)
    assert cs[True]["agree"] == 10 and cs[False]["flip"] == 10
    # the laptop side is log2 PPL: bits per byte, the real side's unit
    assert np.allclose(cs[True]["toy"]["none"], np.log2(8.0), atol=0.05)
    assert "20 of 32 dims turned in 64" in cs[True]["geometry"] and "10 of 32" in cs[False]["geometry"]
    md = "\n".join(pretrained_transfer.section(d, df))
    assert "| byte | matched (base 41.48: 20 of 32 dims turned in 64) |" in md and "+1.00" in md


def test_a_tau_without_an_interval_is_never_called_apart():
    from harness.report import pretrained_transfer
    from harness.transfer import TauInterval
    nan = float("nan")
    one_seed = TauInterval(0.5, nan, nan, nan, nan, nan, 8, 1, 4)
    full = TauInterval(0.1, -0.2, 0.3, 0.1, -0.2, 0.3, 8, 5, 4)
    assert pretrained_transfer._overlap(one_seed, full) == "no interval"
    assert pretrained_transfer._tau(one_seed) == "+0.50 [no interval: n < 2]"
    assert pretrained_transfer._overlap(full, TauInterval(0.6, 0.4, 0.8, 0.6, 0.4, 0.8, 8, 5, 4)) == "intervals apart"


def retrieval_rows(acc, lens=(1024, 2048), samples=8, depths=(0.25, 0.75)):
    """acc / answer_nll rows of study=retrieval: acc[variant] = P(found) (deterministic pattern), NLL = 1 - found."""
    out = []
    for v, p in acc.items():
        for L in lens:
            for i in range(samples):
                found = float(i < round(p * samples))
                prm = json.dumps(dict(pretrained="smollm2", extension=v, factor=2.0, needle="passkey",
                                      depth=depths[i % len(depths)], corpus="kjv"))
                for metric, value in (("acc", found), ("answer_nll", 1.0 - found + 0.1 * i)):
                    out.append(dict(metric=metric, value=value, eval_len=L, seed=i, train_len=8192,
                                    sweep="pretrained_retrieval", protocol="retrieval", params=prm, model="SmolLM2",
                                    n_layers=30, d_model=576, n_heads=9, head_dim=64))
    return out


def test_every_interval_the_report_draws_for_a_bounded_metric_stays_in_its_range(tmp_path):
    """The bounds check refuses an interval outside its metric's range (a t interval on 1 of 5 found runs below 0,
    the old passkey band's defect), and the pretrained report with its figures, built from the committed results
    and from retrieval rows at 0 and 1 found, passes every interval through it (it would raise otherwise)."""
    from harness import stats
    from harness.report.bounds import checked
    with pytest.raises(ValueError, match="acc interval .* leaves the metric's range"):
        checked("acc", stats.interval([1, 0, 0, 0, 0]))
    checked("acc", stats.interval([1, 0, 0, 0, 0], method="wilson"))
    report_pretrained.build([ROOT / "results" / "pretrained"], tmp_path / "committed")
    df = _rows(retrieval_rows({"none": 0.0, "dynamic": 1.0, "yarn": 0.5}))
    text = report_pretrained.build([_write(tmp_path, df)], tmp_path / "synthetic").read_text()
    assert "0/8 [0.00, 0.32]" in text and "8/8 [0.68, 1.00]" in text  # Wilson 95% (statsmodels), n = 8
    assert (tmp_path / "synthetic" / "retrieval_smollm2.png").is_file()


def _write(tmp_path, df):
    run = tmp_path / "rows" / "runs" / "r0"
    run.mkdir(parents=True)
    df.assign(run_id="r0").to_parquet(run / "rows.parquet")
    (run / "status.json").write_text(json.dumps({"status": "ok"}))
    return tmp_path / "rows"


def test_code_and_prose_that_establish_opposite_orders_are_named():
    means = {("none", 1.0): 0.9, ("linear", 2.0): 1.0, ("yarn", 2.0): 0.8}
    code = real_rows(means, windows=6, noise=0.005)
    prose = real_rows({("none", 1.0): 0.9, ("linear", 2.0): 0.8, ("yarn", 2.0): 0.8}, windows=6, noise=0.005)
    for r in prose:
        r["params"] = r["params"].replace('"pystdlib"', '"kjv"')
    from harness.pretrained.rows import prepare
    lines = "\n".join(report_pretrained.corpora_lines(prepare(_rows(code + prose))))
    assert "none vs linear x2 (code -0.10" in lines and "prose +0.09" in lines  # established both ways: named
    assert "linear x2 > yarn x2 on pystdlib only" in lines and "none vs yarn" not in lines  # agreeing: not listed
