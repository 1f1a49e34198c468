"""Intervals that say no more than the data: no table cell and no drawn band of a bounded metric leaves what the metric
can be (an accuracy [0, 1], a ratio-scale quantity > 0, a loss >= 0), and no axis limit hides part of a band.

The reports are built from the committed rows (results/grid, results/longctx, results/reference) with every figure
kept in memory instead of written; each table's heading line says its interval kind (tables.KIND_TEXT), each band
and error bar carries its kind (plots.tag), and each printed or drawn interval is held to harness.stats.RANGES of its
kind. The checkers are run on planted defects first, so that a pass means something."""
import re
from pathlib import Path

import matplotlib
import matplotlib.collections
import matplotlib.container
import matplotlib.figure
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import scipy.stats

from harness import report, results, stats
from harness.report import bounds, confidence, summary
from harness.report.plots import band, fig_bars, fig_curves
from harness.report.tables import KIND_TEXT, ci_cells, n_line, render

ROOT = Path(__file__).resolve().parents[1]
NUM = r"[+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
CELL = [re.compile(p) for p in (
    rf"^(?P<m>{NUM}) ± ?(?P<h>{NUM})$", rf"^(?P<m>{NUM}) \[(?P<lo>{NUM}), (?P<hi>{NUM})\]$",
    rf"^\((?P<m>{NUM}) ± (?P<h>{NUM})\)e(?P<e>[+-]\d+)$",
    rf"^\((?P<m>{NUM}) \[(?P<lo>{NUM}), (?P<hi>{NUM})\]\)e(?P<e>[+-]\d+)$",
    rf"^\[(?P<lo>{NUM}), (?P<hi>{NUM})\]$")]  # the last: an interval alone (the MRR's)


def _ulp(text):
    """One unit of the last printed decimal of a number's text: the rounding either end of a `mean ± half` carries."""
    digits = text.split("e")[0].partition(".")[2]
    return 10.0 ** -len(digits)


def interval_of(cell):
    """(lo, hi, slack) printed in a table cell (marks, n and ≥ stripped); None for a cell without an interval.
    slack: the rounding of a `mean ± half` cell's ends (a [lo, hi] cell prints its ends themselves: none)."""
    text = re.sub(r"\s*\(n=\d+\)$", "", cell.strip()).replace("**", "").removesuffix(" †").removeprefix("≥ ").strip()
    for pattern in CELL:
        m = pattern.match(text)
        if m:
            scale = 10.0 ** int(m["e"]) if m.groupdict().get("e") else 1.0
            if m.groupdict().get("h") is not None:
                mean, half = float(m["m"]), float(m["h"])
                return (mean - half) * scale, (mean + half) * scale, (_ulp(m["m"]) + _ulp(m["h"])) * scale
            return float(m["lo"]) * scale, float(m["hi"]) * scale, 0.0
    return None


def outside(kind, lo, hi, slack=0.0):
    """Why [lo, hi] leaves the range of `kind` (harness.stats.RANGES; a ratio's lower end must be > 0), or ''."""
    low, high = stats.RANGES[kind]
    if lo < low - slack or hi > high + slack or (kind == "ratio" and lo <= 0):
        return f"[{lo:.4g}, {hi:.4g}] leaves {kind}'s range [{low:g}, {high:g}]"
    return ""


def heading_kind(line):
    """The interval kind a table's heading line states (the longest KIND_TEXT it holds), None for one seed."""
    if "n = 1 seed per cell" in line:
        return None
    said = [k for k, text in KIND_TEXT.items() if text[:-1] in line]
    assert said, f"a table's heading line states no interval kind: {line!r}"
    return max(said, key=lambda k: len(KIND_TEXT[k]))


def table_problems(md):
    """['heading: cell: why'] for every cell of every seed-aggregated table (a heading line `n = ... per cell`)
    whose printed interval leaves the range of the kind its heading states."""
    lines, bad, checked = md.splitlines(), [], 0
    for i, line in enumerate(lines):
        if not (line.startswith("n = ") and "per cell" in line):
            continue
        kind = heading_kind(line)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("|") and not lines[j].startswith("#"):
            j += 1
        for row in lines[j + 2:]:
            if not row.startswith("|"):
                break
            for cell in row.strip("|").split("|")[1:]:
                checked += bool(kind) and _judge(bad, line, cell.strip(), kind)
    return bad, checked


def _judge(bad, where, cell, kind):
    """1 when cell prints an interval (its reason appended to bad if it leaves kind's range), else 0."""
    iv = interval_of(cell)
    if not iv:
        return 0
    why = outside(kind, *iv)
    if why:
        bad.append(f"{where[:60]}: {cell}: {why}")
    return 1


def summary_problems(md, df):
    """The same for the `## What to use` answers: each best's printed interval against its metric's kind (the
    metric from the answer's title: confidence.MAIN, summary.COST, summary.LONG; its kind from the rows' unit)."""
    titles = [(t, m) for m, _, t in confidence.MAIN] + [(t, m) for m, _, t, _ in summary.COST] + \
             [(t, m) for m, t in summary.LONG]
    bad, checked = [], 0
    for line in md.splitlines():
        if not (line.startswith("- **") and " best `" in line):
            continue
        metric = next((m for t, m in titles if f"— {t}" in line), None)
        assert metric is not None, f"an answer whose metric is not known: {line[:80]}"
        kind = bounds.kind_of(df[df.metric == metric])
        cell = line.split(" best `", 1)[1].split("` ", 1)[1].split(";")[0]
        checked += _judge(bad, line, cell, kind)
    return bad, checked


def _coords(artist, axis):
    """The coordinates along `axis` of a band's polygons or an error bar's segments."""
    k = 0 if axis == "x" else 1
    if isinstance(artist, matplotlib.collections.PolyCollection):
        pts = [p.vertices for p in artist.get_paths()]
    else:
        pts = [np.asarray(s) for s in artist.get_segments()]
    pts = np.concatenate(pts) if pts else np.zeros((0, 2))
    c = pts[:, k].astype(float)
    return c[np.isfinite(c)]


def figure_problems(name, fig):
    """['name: why'] for every band (PolyCollection) and error bar of fig that carries no kind, leaves its kind's
    range, or runs past its axes' limits (a limit that hides part of it); and for a heatmap's printed intervals."""
    bad, checked = [], 0
    for ax in fig.axes:
        found = [c for c in ax.collections if isinstance(c, matplotlib.collections.PolyCollection)]
        for cont in ax.containers:
            if isinstance(cont, matplotlib.container.ErrorbarContainer):
                found += list(cont.lines[2])
        found += [c for c in ax.collections if str(c.get_gid() or "").startswith("interval:") and c not in found]
        for artist in found:
            gid = str(artist.get_gid() or "")
            if not gid.startswith("interval:"):
                bad.append(f"{name}: an interval drawn without its kind ({type(artist).__name__})")
                continue
            _, kind, axis = gid.split(":")
            c = _coords(artist, axis)
            if not len(c):
                continue
            checked += 1
            why = outside(kind, c.min(), c.max())
            lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
            tol = 1e-9 * (hi - lo)
            if c.min() < lo - tol or c.max() > hi + tol:
                why += f"; runs past the axis limits [{lo:.4g}, {hi:.4g}]: [{c.min():.4g}, {c.max():.4g}]"
            if why:
                bad.append(f"{name} {ax.get_title()!r}: {why.strip('; ')}")
        for t in ax.texts:  # a heatmap's cells: an accuracy with its interval
            iv = interval_of(t.get_text().replace("\n", " "))
            if iv and name.startswith("depths_"):
                checked += 1
                why = outside("proportion", *iv)
                if why:
                    bad.append(f"{name} {ax.get_title()!r}: {t.get_text()!r}: {why}")
    return bad, checked


# ---------------------------------------------------------------- planted: the interval of each kind

def _rows(values, metric, unit, variant="v"):
    return pd.DataFrame(dict(variant=variant, seed=range(len(values)), value=values, metric=metric, unit=unit,
                             col="c"))


def test_an_accuracy_of_0_9_1_1_gets_no_bound_above_1():
    x = [0.9, 1.0, 1.0]
    assert stats.interval(x).hi > 1  # the t interval this replaces: 1.11
    iv = stats.proportion_interval(x)
    assert iv.hi == 1.0 and iv.lo == pytest.approx(stats.interval(x).lo) and iv.mean == pytest.approx(2.9 / 3)
    s = bounds.summarize(_rows(x, "acc", "frac"), "variant")
    assert s.kind.item() == "proportion" and s.hi.item() == 1.0
    cells, head = ci_cells(_rows(x, "acc", "frac"), "col")
    assert cells.loc["v", "c"] == "0.967 [0.823, 1.000]" and heading_kind(head) == "proportion"
    assert interval_of(cells.loc["v", "c"])[1] <= 1.0


def test_a_positive_metric_gets_a_positive_lower_bound():
    x = [1000.0, 30000.0, 2000.0]  # tokens/s of three seeds on a machine that was busy for one
    assert stats.interval(x).lo < 0  # the t interval: -27000
    iv = stats.ratio_interval(x)
    logs = np.log(x)
    lo, hi = np.exp(scipy.stats.t.interval(0.95, 2, loc=logs.mean(), scale=scipy.stats.sem(logs)))
    assert (iv.lo, iv.hi) == (pytest.approx(lo), pytest.approx(hi)) and iv.lo > 0
    assert iv.mean == pytest.approx(np.exp(logs.mean()))  # the geometric mean, 3915, not the arithmetic 11000
    cells, head = ci_cells(_rows(x, "train_tokens_per_s", "tokens/s"), "col")
    assert heading_kind(head) == "ratio" and interval_of(cells.loc["v", "c"])[0] > 0


def test_a_loss_reaching_0_gets_no_bound_below_0():
    x = [0.0, 0.01, 0.6]
    assert stats.interval(x).lo < 0
    iv = bounds.summarize(_rows(x, "train_loss", "nats"), "variant")
    assert iv.kind.item() == "nonnegative" and iv.lo.item() == 0.0 and iv.hi.item() == stats.interval(x).hi


def test_every_unit_the_committed_rows_use_has_a_kind():
    df = pd.concat([results.load(ROOT / "results" / d) for d in ("reference", "grid", "longctx", "budget",
                                                                 "content", "pretrained")])
    k = bounds.kinds(df)
    assert set(k) <= set(stats.KINDS)
    assert (k[df.unit == "frac"] == "proportion").all() and (k[df.metric == "ppl"] == "ratio").all()
    assert (k[df.metric == "ppl_gap"] == "real").all()  # a signed difference in PPL units
    assert (k[df.metric.str.startswith("effective_len")] == "nonnegative").all()  # 0: below the bar at once
    with pytest.raises(ValueError, match="no interval kind for metric 'x' in unit 'furlongs'"):
        bounds.kind("x", "furlongs")
    with pytest.raises(ValueError, match="mix interval kinds"):
        bounds.kind_of(pd.concat([_rows([0.5], "acc", "frac"), _rows([3.0], "ppl", "ppl")]))


# ---------------------------------------------------------------- planted: the checkers find what they look for

def test_the_checkers_find_planted_defects():
    x = pd.concat([_rows([0.9, 1.0, 1.0], "acc", "frac", "a"), _rows([0.2, 0.6, 0.3], "acc", "frac", "b")])
    good, head = ci_cells(x, "col")
    assert table_problems(head + "\n\n" + render(good)) == ([], 2)
    t = stats.summarize(x, ["variant", "col"])  # the plain t interval: a's upper end 1.11
    bad = good.copy()
    bad.loc["a", "c"] = f"{t.loc[0, 'mean']:.3f} ± {t.loc[0, 'half']:.3f}"
    problems, _ = table_problems(head + "\n\n" + render(bad))
    assert len(problems) == 1 and "leaves proportion's range" in problems[0]
    with pytest.raises(AssertionError, match="states no interval kind"):
        table_problems("n = 3 seeds per cell; something else.\n\n" + render(good))
    assert interval_of("≥ 170 [0, 540] † (n=2)") == (0.0, 540.0, 0.0) and interval_of("—") is None

    s = bounds.summarize(x.assign(eval_len=64), ["variant", "eval_len"])
    fig = fig_curves(pd.concat([s, s.assign(eval_len=128)]), "eval_len", "t", "x", "y", logy=False)
    assert figure_problems("ok", fig) == ([], 2)  # one band per variant, each tagged proportion, inside [0, 1]
    ax = fig.axes[0]
    ax.set_ylim(0.5, 1.0)  # a limit that cuts b's band (0.0..0.8)
    problems, _ = figure_problems("cut", fig)
    assert len(problems) == 1 and "runs past the axis limits" in problems[0]
    t = stats.summarize(x.assign(eval_len=64), ["variant", "eval_len"])
    fig2, ax2 = plt.subplots()
    band(ax2, [64, 128], [t.lo[0]] * 2, [t.hi[0]] * 2, "k", kind="proportion")  # a t band claiming [0, 1]
    ax2.fill_between([64, 128], [0, 0], [1, 1])  # a band without its kind
    problems, _ = figure_problems("planted", fig2)
    assert len(problems) == 2 and "leaves proportion's range" in problems[0] and "without its kind" in problems[1]
    bars = fig_bars(bounds.summarize(_rows([1000.0, 30000.0, 2000.0], "train_tokens_per_s", "tokens/s"), "variant"),
                    "t", "tokens/s")
    assert figure_problems("bars", bars) == ([], 1)
    with pytest.raises(ValueError, match="on a log axis"):
        band(ax2, [64, 128], [-0.1, 0.1], [1.0, 1.0], "k", logy=True)
    for f in (fig, fig2, bars):
        plt.close(f)


def test_n_line_states_the_kind_it_is_given():
    assert {heading_kind(n_line([3, 3], kind=k)) for k in ("real", "proportion", "nonnegative", "ratio")} == \
        {"real", "proportion", "nonnegative", "ratio"}
    assert heading_kind(n_line([2, 3], kind="proportion")) == "proportion"  # the line for several n too
    assert heading_kind(n_line([1], kind="ratio")) is None  # one seed: no interval to state


# ---------------------------------------------------------------- the committed reports

SWEEPS = ("grid", "longctx", "reference")  # accuracies at 0 and 1, RULER, passkey heatmaps; PPL, throughput, memory


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{sweep: (report.md text, {png name: Figure}, rows)} of each committed sweep, figures kept, not written."""
    out, saved = {}, {}

    def keep(fig, path, *a, **k):
        saved[str(path).rsplit("/", 1)[-1]] = fig
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.figure.Figure, "savefig", keep)
        for sweep in SWEEPS:
            saved.clear()
            paths = [ROOT / "results" / sweep]
            md = report.build(paths, tmp_path_factory.mktemp(sweep)).read_text()
            out[sweep] = (md, dict(saved), report.prepare(results.load(*paths)))
    return out


@pytest.mark.slow  # builds the three committed reports (about 45 s): make test-slow
@pytest.mark.parametrize("sweep", SWEEPS)
def test_no_table_cell_of_a_committed_report_leaves_its_range(built, sweep):
    md, _, df = built[sweep]
    bad, checked = table_problems(md)
    assert not bad, "\n".join(bad)
    assert checked > 100  # the tables were read, not skipped
    bad, checked = summary_problems(md, df)
    assert not bad, "\n".join(bad)
    assert checked >= 2


@pytest.mark.slow
@pytest.mark.parametrize("sweep", SWEEPS)
def test_no_band_of_a_committed_report_leaves_its_range_or_its_axes(built, sweep):
    _, figs, _ = built[sweep]
    bad, checked = [], 0
    for name, fig in sorted(figs.items()):
        b, c = figure_problems(name, fig)
        bad += b
        checked += c
    assert not bad, "\n".join(bad)
    assert checked > 20
    kinds = {str(c.get_gid()).split(":")[1] for f in figs.values() for ax in f.axes for c in ax.collections
             if str(c.get_gid()).startswith("interval:")}
    assert {"ratio", "nonnegative"} <= kinds and (sweep == "reference" or "proportion" in kinds)
