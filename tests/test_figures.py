"""Every figure a reader gets is readable: each figure generator (the study report on planted runs, the pretrained
report and the bench heatmap on committed rows, the claims' plot) is rendered and checked for (a) no Hydra override
syntax (`model=tiny`, `steps=300`) in any title, label, tick or legend: variants are named by
harness.report.labels.human; (b) no legend over the plotted data: every legend lies outside its axes; (c) curves
that coincide (harness.report.style.coincident) are named in the legend (`B = A (coincide)`)."""
import re
from pathlib import Path

import matplotlib
import matplotlib.figure
import numpy as np
import pytest

from harness.report.labels import human
from harness.report.style import coincident

ROOT = Path(__file__).resolve().parents[1]
OVERRIDE = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*=(?=[^\s=])")  # key=value, as Hydra spells an override


def _texts(fig):
    """Every piece of text a reader sees in fig: titles, axis labels, ticks, legends, annotations."""
    out = [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_visible()]
    return [t for t in out if t.strip()]


def _check(name, fig):
    fig.canvas.draw()
    bad = [t for t in _texts(fig) if OVERRIDE.search(t)]
    assert not bad, (name, bad)
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            box, inside = leg.get_window_extent(), ax.get_window_extent()
            overlap = min(box.x1, inside.x1) - max(box.x0, inside.x0), min(box.y1, inside.y1) - max(box.y0, inside.y0)
            assert min(overlap) <= 1, (name, ax.get_title(), "legend drawn over the axes")
        lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") and len(ln.get_xdata())]
        same = coincident({i: (ln.get_xdata(), ln.get_ydata()) for i, ln in enumerate(lines)},
                          log=ax.get_yscale() == "log")
        for later, earlier in same.items():
            label = lines[later].get_label()
            assert "coincide" in label and lines[earlier].get_label().split(" = ")[0] in label, (name, label)


@pytest.fixture
def captured(monkeypatch):
    """{file name: Figure} of every figure saved while the test runs, checked as it is saved."""
    figs, savefig = {}, matplotlib.figure.Figure.savefig

    def capture(fig, path, *a, **k):
        name = str(path).rsplit("/", 1)[-1]
        _check(name, fig)
        figs[name] = fig
        return savefig(fig, path, *a, **k)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", capture)
    return figs


def test_human_names_a_variant_without_override_syntax():
    assert human("learned model=ladder16x steps=1137") == "learned, 16x ladder (1137 steps)"
    assert human("rope base=100") == "rope base 100"
    assert human("model=tiny steps=300") == "tiny model (300 steps)"
    assert human("rope qk_norm=rms+yarn ft128") == "rope QK-norm rms + yarn (fine-tuned at 128)"
    assert human("Task `lm`, model=tiny steps=300, train_len=64") == "Task `lm`, tiny model (300 steps), trained at 64"
    assert human("alibi") == "alibi"


def test_coincident_curves_are_found_at_the_axes_resolution():
    xs = [1, 2, 3]
    same = coincident({"a": (xs, [1.0, 10, 100]), "b": (xs, [1.001, 10.01, 100.1]), "c": (xs, [2.0, 20, 200])},
                      log=True)
    assert same == {"b": "a"}


def test_the_study_report_figures(tmp_path, captured):
    """The report on planted runs of several families, two budgets, extensions and precision rows: every figure."""
    from harness import report
    from tests.report_runs import many_encodings, planted
    many_encodings(tmp_path / "sweep", ["rope", "alibi", "learned", "nope"])
    planted(tmp_path / "sweep" / "ladder", seeds=range(3), budgets=(("tiny", 32, 100), ("ladder4x", 64, 400)))
    report.build([tmp_path / "sweep"], tmp_path / "out", kernel_max_len=256)
    assert {"extrapolation_lm.png", "extension_lm.png", "ladder_lm.png", "cost_lm.png", "training.png",
            "precision_shift.png", "precision_model_kl.png"} <= set(captured)
    ext = [ln.get_label() for ax in captured["extension_lm.png"].axes for ln in ax.get_lines()]
    assert not [t for t in ext if "=" in t.replace(" = ", "")], ext
    shift = captured["precision_shift.png"]
    assert any("tf32" in t and "2048" in t for t in _texts(shift))  # tf32's curve explained under the axes


def test_the_pretrained_figures_on_committed_rows(tmp_path, captured):
    from harness.report.pretrained import main
    main([str(ROOT / "results" / "pretrained"), "--out", str(tmp_path)])
    assert any(n.startswith("retrieval_") for n in captured) and any(n.startswith("pretrained_") for n in captured)


def test_the_bench_heatmap_on_committed_rows(tmp_path, captured):
    from harness.bench.kernel_report import plot_csv
    plot_csv(ROOT / "results" / "baselines" / "bench-h100.csv", tmp_path / "bench.png")
    ticks = [t.get_text() for ax in captured["bench.png"].axes for t in ax.get_yticklabels()]
    assert "triton" in ticks and len(captured["bench.png"].axes) >= 3


def test_a_claims_figure_states_its_verdict_and_names_coincident_curves(tmp_path, captured):
    from harness.claims.table import plot, stamp
    xs = list(range(1, 9))
    series = {"alpha 0, rho 0": (xs, np.linspace(1, 0, 8).tolist()), "alpha 0, rho 1": (xs, np.linspace(1, 0, 8).tolist()),
              "p=0.25": (xs, np.linspace(1, 0.5, 8).tolist())}
    name = plot(tmp_path / "c99.png", series, xlabel="x", ylabel="y", title="t")

    def rule(n):
        """error < 1e-9: supported."""
    stamp(name, 99, "supported", "error 1e-16 < 1e-9", rule)
    texts = _texts(captured["c99.png"])
    assert any("supported" in t for t in texts) and any("tolerance" in t and "1e-9" in t for t in texts)
    assert any(t == "alpha 0, rho 1 = alpha 0, rho 0 (coincide)" for t in texts)
