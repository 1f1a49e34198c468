"""The report's figures (at most 8 curves a panel, grouped by encoding family, no two alike, censored values
marked, coincident curves named), its `## What to use` summary (best and paired ties on planted rows) and the README
block generated from the committed reference results."""
from pathlib import Path

import pandas as pd

from harness import report, stats
from tests.report_runs import many_encodings, planted, table_rows


def test_every_figure_has_at_most_8_curves_a_panel_and_no_two_alike(tmp_path, monkeypatch):
    import matplotlib.colors
    import matplotlib.figure
    from harness.encodings import ENCODINGS
    figs, savefig = {}, matplotlib.figure.Figure.savefig

    def capture(fig, path, *a, **k):
        figs[str(path).rsplit("/", 1)[-1]] = fig
        return savefig(fig, path, *a, **k)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", capture)
    report.build([many_encodings(tmp_path / "sweep", list(ENCODINGS))], tmp_path / "out",
                 kernel_max_len=256)
    assert {"extrapolation_lm.png", "nll_by_pos_lm.png", "training.png", "cost_lm.png", "extension_lm.png",
            "precision_model_kl.png", "precision_phase.png", "effective_length_lm.png"} <= set(figs)
    for name, fig in figs.items():
        looks = {}
        for ax in fig.axes:
            curves = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
            assert len(curves) <= 8, (name, ax.get_title(), len(curves))
            for ln in curves:
                key = (matplotlib.colors.to_hex(ln.get_color()), ln.get_linestyle(), ln.get_marker())
                looks.setdefault(key, set()).add(ln.get_label())
        alike = {k: v for k, v in looks.items() if len(v) > 1}
        assert not alike, (name, alike)
    panels = [ax for ax in figs["extrapolation_lm.png"].axes if ax.get_lines()]
    assert len(panels) >= 5 and all("rope (reference)" in [ln.get_label() for ln in ax.get_lines()] for ax in panels)
    assert {ax.get_title() for ax in panels} >= {"bias", "per-layer", "content / normalizer"}


def test_styles_stay_distinct_for_many_curves_and_panels():
    import matplotlib.colors
    import matplotlib.pyplot as plt
    from harness.report import style
    tab10 = [matplotlib.colors.to_hex(c) for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7]
    assert [matplotlib.colors.to_hex(c) for c in style.PALETTE[:9]] == tab10  # the usual colours first
    assert all(max(c) - min(c) > 0.1 for c in style.PALETTE)  # no grey: grey is the context colour
    assert len({style.style(i) for i in range(708)}) == 708 and len({style.distinct(i) for i in range(708)}) == 708
    assert all(a != b for i in range(100) for a, b in zip(style.distinct(i), style.distinct(i + 1)))
    panels = [(f"p{k}", ["ref"] + [f"v{k}.{j}" for j in range(8)]) for k in range(48)]  # 48 panels of 8 + reference
    looks = style.styles(panels, reference="ref")
    assert looks["ref"] == style.REFERENCE and len(set(looks.values())) == len(looks) == 1 + 48 * 8


def test_point_labels_overlap_neither_one_another_nor_leave_the_axes():
    import matplotlib.pyplot as plt
    import numpy as np
    from harness.report.plots import label_points
    rng = np.random.default_rng(0)
    xs, ys = rng.normal(0, 1, 15), rng.normal(0, 1, 15)
    xs[:6], ys[:6] = rng.normal(0, 0.01, 6), rng.normal(0, 0.01, 6)  # six points on top of one another
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot(xs, ys, "o")
    texts = label_points(ax, xs, ys, [f"encoding_{i} pair" for i in range(15)])
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in texts]
    assert [t.get_text() for t in texts] == [f"encoding_{i} pair" for i in range(15)]
    assert not [(i, j) for i in range(15) for j in range(i) if boxes[i].overlaps(boxes[j])]
    inside = ax.get_window_extent()
    assert all(inside.x0 <= b.x0 and b.x1 <= inside.x1 and inside.y0 <= b.y0 and b.y1 <= inside.y1 for b in boxes)
    plt.close(fig)


def test_families_come_from_the_encoding_objects():
    from harness.report import families
    names = ("alibi", "rope", "xpos", "learned", "nope", "irope", "cope", "stick_breaking", "rope_alibi", "comrope",
             "twin")
    got = {n: families.family(n) for n in names}
    assert got == {"alibi": "bias", "rope": "rotary", "xpos": "rotary", "learned": "absolute / none",
                   "nope": "absolute / none", "irope": "per-layer", "cope": "content / normalizer",
                   "stick_breaking": "content / normalizer", "rope_alibi": "bias", "comrope": "rotary", "twin": "other"}
    p = families.panels({f"r{i}": "rotary" for i in range(13)} | {"ref": "rotary", "b": "bias"}, "ref")
    assert [len(m) for _, m in p] == [8, 7, 2] and all(m[0] == "ref" for _, m in p)
    assert [t for t, _ in p] == ["rotary (1/2)", "rotary (2/2)", "bias"]
    assert families.panels({"a": "x", "b": "y"}) == [("", ["a", "b"])]  # few curves: one panel


def test_summary_names_the_best_and_its_paired_ties(tmp_path):
    from harness.report import summary
    t = pd.DataFrame({"a": [5.0, 6.0, 7.0, 5.5], "b": [5.01, 5.98, 7.02, 5.49], "c": [6.1, 7.05, 8.0, 6.4]})
    best, n, ties = summary.best_and_tied(t, lower=True)
    assert best == "a" and n == 4 and [v for v, _ in ties] == ["b"] and ties[0][1].lo < 0 < ties[0][1].hi
    assert summary.best_and_tied(-t, lower=False)[0] == "a"
    md = report.build([planted(tmp_path / "sweep")], tmp_path / "out").read_text()
    head = md[:md.index("## Task")]
    assert "## What to use" in head and "model `tiny` (1 layer, d_model 32)" in head
    train = next(x for x in head.splitlines() if x.startswith("- **Train length**"))
    best = "rope" if "best `rope`" in train else "twin"
    assert f"tied with it: `{'twin' if best == 'rope' else 'rope'}` (Δ" in train and "alibi" not in train
    assert train.endswith("n = 4 seeds.") and "- **Extrapolation** — PPL, nonoverlapping windows at 512" in head
    assert "Cost" not in head and "Long context" not in head  # no rows for them


def test_censored_effective_length_is_marked(tmp_path):
    from harness.report.plots import fig_bars
    md = report.build([many_encodings(tmp_path / "sweep", ["rope", "alibi"])], tmp_path / "out",
                      kernel_max_len=256).read_text()
    rows, block = table_rows(md, "Score `byte_acc:nonoverlapping`")
    assert rows["alibi"][-1].startswith("≥ ") and not rows["rope"][-1].startswith("≥")  # alibi reached 512: longest
    assert "censored" in md
    s = stats.summarize(pd.DataFrame(dict(variant=["a", "b"] * 2, seed=[0, 0, 1, 1], value=[512.0, 100, 512, 90])),
                        "variant")
    ax = fig_bars(s, "t", "tokens", censored={"a"}, note="≥: a lower bound").axes[0]
    [mark] = [ln for ln in ax.get_lines() if ln.get_marker() == ">"]
    assert list(mark.get_xdata()) == [512.0] and any(t.get_text() == "≥ 512" for t in ax.texts)


def test_a_curve_drawn_over_another_says_so():
    from harness.report.precision import fig_loglog
    pt = pd.DataFrame([[1e-3, 2e-3], [1e-6, 2e-6], [1e-6, 2e-6]], index=["bf16", "fp32", "meta"], columns=[16, 32])
    labels = [ln.get_label() for ln in fig_loglog(pt, "t", "position", "phase_err_rad").axes[0].get_lines()]
    assert labels == ["bf16", "fp32", "meta = fp32 (coincide)"]


def test_readme_block_regenerates_and_goes_stale(tmp_path):
    sweep = planted(tmp_path / "results" / "ref")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- reference-summary: results/ref -->\nSTALE\n<!-- /reference-summary -->\ntail\n")
    assert report.main([str(sweep), "--readme", str(readme), "--check"]) == 1
    assert report.main([str(sweep), "--readme", str(readme), "--write"]) == 0
    text = readme.read_text()
    assert "STALE" not in text and "- **Train length**" in text and text.endswith("<!-- /reference-summary -->\ntail\n")
    assert report.main([str(sweep), "--readme", str(readme), "--check"]) == 0


def test_readme_reference_summary_is_what_the_committed_results_give():
    """python -m harness.report results/reference --readme README.md --write; fails when results or code changed."""
    from harness.report import summary
    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text()
    assert summary.BLOCK.search(text), "README has no reference-summary block"
    assert summary.render(text, root) == text
