"""The claim registry's record, the verdict vocabulary, and the writer of results/claims/claims.md.

A claim pairs a `measure(ctx) -> Evidence` (runs or reads the experiment, returns numbers and a plot)
with a `rule(numbers) -> (verdict, reason)`: the verdict is computed from the numbers by the thresholds
in the rule's docstring, never typed in. Rules take plain dicts so tests can feed them synthetic evidence."""
import dataclasses
import math
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

VERDICTS = ("supported", "contradicted", "inconclusive")  # of one part (a judged comparison) and of a whole claim
S, C, I = VERDICTS
PARTLY = "partly contradicted"  # a claim with some, not all, parts contradicted: "partly contradicted (part <name>)"
N = "not measured"  # a claim whose rows (or checkpoints) are not where it reads: no evidence at all
KINDS = (S, C, PARTLY, I, N)  # what a claim's verdict can be; the summary line counts each


@dataclasses.dataclass(frozen=True)
class Evidence:
    """numbers: name -> float (the rule's input); summary: one line quoting them; plot: file name or None;
    n: seeds behind the verdict (the fewest over the judged quantities), None for a computed claim."""

    numbers: Dict[str, float]
    summary: str
    plot: Optional[str] = None
    n: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Claim:
    """One row of the table. `command` reproduces the evidence; `rule`'s docstring states its thresholds."""

    id: int
    text: str
    source: str
    command: str
    measure: Callable[..., Evidence]
    rule: Callable[[Dict[str, float]], Tuple[str, str]]

    def __post_init__(self):
        for field in ("text", "source", "command"):
            if not getattr(self, field).strip():
                raise ValueError(f"claim {self.id}: empty {field}")
        if not (self.rule.__doc__ or "").strip():
            raise ValueError(f"claim {self.id}: its rule must document its thresholds in a docstring")


def kind(v):
    """The verdict class of `v`: 'partly contradicted (part 8x bad)' -> 'partly contradicted'."""
    return v.split(" (", 1)[0]


def verdict(v, reason):
    """(v, reason) after checking v's kind is one of KINDS."""
    if kind(v) not in KINDS:
        raise ValueError(f"unknown verdict {v!r}; expected one of {list(KINDS)}")
    return v, reason


def part_name(label):
    """A part's name: its label up to the first ': ' or ' = ' ('8x bad: 8x/1x = 1.25 ...' -> '8x bad';
    'p=0.25 at 8x = 1.37 ...' -> 'p=0.25 at 8x'), the whole label when it has neither."""
    cuts = [i for i in (label.find(": "), label.find(" = ")) if i > 0]
    return label[:min(cuts)] if cuts else label


def _part(label, v):
    """The part's name, its verdict, then the rest of its label: '8x bad: 8x/1x = 1.25 [1.2, 1.3] (n=3) < 1.5'
    -> '8x bad contradicted (8x/1x = 1.25 [1.2, 1.3] (n=3) < 1.5)'; 'p=0.25 at 8x = 1.37 [1.24, 1.52] (n=3) > 1'
    -> 'p=0.25 at 8x contradicted (1.37 [1.24, 1.52] (n=3) > 1)'."""
    name = part_name(label)
    rest = label[len(name):].removeprefix(": ").removeprefix(" = ")
    return f"{name} {v}" + (f" ({rest})" if rest else "")


def by_parts(parts):
    """Verdict of a claim made of sub-claims: parts = [(label, state)], state a part verdict (supported,
    contradicted, inconclusive) or a bool (True: supported, False: contradicted; a NaN comparison is False).
    Every part supported: supported; every part contradicted: contradicted; some but not all contradicted:
    'partly contradicted (part <name>)', naming them; no part contradicted and one open: inconclusive. A part
    contradicted at 95% is never reported as inconclusive, whatever the other parts say. The reason gives each
    part's verdict (issue: verdicts that say no more than the data)."""
    state = [(label, _part_state(ok)) for label, ok in parts]
    if all(v == S for _, v in state):
        return verdict(S, "every part holds: " + "; ".join(label for label, _ in state))
    if all(v == C for _, v in state):
        return verdict(C, "every part fails: " + "; ".join(label for label, _ in state))
    bad = [part_name(label) for label, v in state if v == C]
    v = f"{PARTLY} ({'parts' if len(bad) > 1 else 'part'} {', '.join(bad)})" if bad else I
    return verdict(v, "; ".join(_part(label, x) for label, x in state))


def _part_state(ok):
    if isinstance(ok, str):
        if ok not in VERDICTS:
            raise ValueError(f"unknown verdict {ok!r} of a part; expected one of {list(VERDICTS)}")
        return ok
    return S if ok else C


def missing(numbers):
    """Names of the rule inputs that are NaN (not measured)."""
    return [k for k, v in numbers.items() if isinstance(v, float) and math.isnan(v)]


def fmt(x, digits=3):
    """A number for the table: NaN as 'n/a', else `digits` significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _doc(rule):
    return " ".join((rule.__doc__ or "").split())


def summary(rows):
    """'Verdicts: <n> supported, <n> contradicted, <n> partly contradicted, <n> inconclusive, <n> not measured'
    (rows as write takes them; every kind counted, zeros included)."""
    counts = {k: sum(kind(r[2]) == k for r in rows) for k in KINDS}
    return "Verdicts: " + ", ".join(f"{n} {k}" for k, n in counts.items())


def write(rows, out_dir, header=""):
    """rows: [(Claim, Evidence | None, verdict, reason)] -> out_dir/claims.md (the table, then each
    claim's rule with its thresholds). Returns the path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Claims about RoPE from the literature, tested", "", header, "",
             "| # | claim | source | command | evidence | n | verdict | reason |",
             "|---|---|---|---|---|---|---|---|"]
    for claim, ev, v, reason in rows:
        evidence = "not measured" if ev is None else ev.summary + (f" ([plot]({ev.plot}))" if ev.plot else "")
        n = "-" if ev is None or ev.n is None else ev.n  # seeds behind a trained claim; '-' computed directly
        lines.append("| " + " | ".join(_cell(c) for c in (
            claim.id, claim.text, claim.source, f"`{claim.command}`", evidence, n, f"**{v}**", reason)) + " |")
    lines += ["", summary(rows) + ". Column n: seeds behind a trained claim's verdict (the fewest over the quantities "
              "it judges; '-': computed, no training). Intervals are 95% CIs over seeds; a trained claim needs >= 3 "
              "seeds to be more than inconclusive. A claim of several parts is contradicted when every part is, "
              "partly contradicted (naming the part) when some are, and inconclusive only when none is; its reason "
              "gives each part's verdict.",
              "", "## Rules (thresholds) per claim", ""]
    lines += [f"{claim.id}. {_doc(claim.rule)}" for claim, *_ in rows]
    path = out_dir / "claims.md"
    path.write_text("\n".join(lines) + "\n")
    return path


_DRAWN = {}  # file name -> (path, series, options) of each plot drawn, redrawn by `stamp` with its verdict


def plot(path, series, *, xlabel, ylabel, title, logx=False, logy=False, hlines=(), kind="line"):
    """series: {label: (xs, ys)} or {label: (xs, ys, lo, hi)} -> PNG at path (file name returned; None when every
    value is NaN). lo, hi: a 95% CI per point, drawn as error bars (bars, lines of <= 20 points) or a band
    (longer lines); a NaN bound draws none. hlines: [(y, label)] threshold lines. kind: line | bar. Series that
    coincide are named in the legend (`B = A (coincide)`); `stamp` redraws it with the claim's verdict."""
    series = {k: v for k, v in series.items() if any(y == y for y in v[1])}  # drop all-NaN
    if not series:
        return None  # nothing measured: no plot to link
    opts = dict(xlabel=xlabel, ylabel=ylabel, title=title, logx=logx, logy=logy, hlines=hlines, kind=kind)
    _DRAWN[Path(path).name] = (path, series, opts)
    _draw(path, series, **opts)
    return Path(path).name


def stamp(plot_name, claim_id, v, reason, rule):
    """Redraw the plot `plot_name` (drawn by `plot` in this process) with claim `claim_id`'s verdict `v`, the
    reason and the rule (its tolerance) in a box under the axes; nothing when it was not drawn here."""
    if plot_name in _DRAWN:
        path, series, opts = _DRAWN.pop(plot_name)
        _draw(path, series, **opts, verdict=(claim_id, v, reason, " ".join((rule.__doc__ or "").split())))


def _draw(path, series, *, xlabel, ylabel, title, logx, logy, hlines, kind, verdict=None):
    import textwrap

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from harness.report.labels import human
    from harness.report.style import coincide_label, coincident, legend
    same = coincident({k: v[:2] for k, v in series.items()}, log=logy) if kind == "line" else {}
    fig, ax = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    width = 0.8 / len(series)
    for i, (label, (xs, ys, *ci)) in enumerate(series.items()):
        ys = np.asarray(ys, dtype=float)
        lo, hi = (np.asarray(b, dtype=float) for b in ci) if ci else (ys, ys)
        err = np.nan_to_num(np.stack([ys - lo, hi - ys]), nan=0.0)  # (2, points) below / above the mean
        twin = same.get(label)
        text = human(coincide_label(label, twin) if twin else label)
        over = dict(mfc="none", ms=9, zorder=3) if twin else {}  # a coincident series: open markers over the other
        if kind == "bar":  # bars of several series side by side at integer slots
            at = np.arange(len(xs)) + (i - (len(series) - 1) / 2) * width
            ax.bar(at, ys, width=width, label=text, yerr=err if ci else None, capsize=2)
            ax.set_xticks(np.arange(len(xs)), [str(x) for x in xs])
        elif ci and len(xs) > 20:
            line, = ax.plot(xs, ys, label=text, lw=1.2, ls=("-", "--", ":", "-.")[i % 4])
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        elif ci:
            ax.errorbar(xs, ys, yerr=err, label=text, marker="o", lw=1.2, ls=("-", "--", ":", "-.")[i % 4], capsize=3,
                        **over)
        else:
            ax.plot(xs, ys, label=text, marker="o" if len(xs) <= 20 or twin else None, lw=1.2,
                    ls=("-", "--", ":", "-.")[i % 4], markevery=None if len(xs) <= 20 else max(1, len(xs) // 12),
                    **over)
    for y, label in hlines:
        ax.axhline(y, color="grey", lw=0.8, ls="--")
        ax.annotate(label, (0.01, y), xycoords=("axes fraction", "data"), fontsize=7, color="grey", va="bottom")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if logx:
        ax.set_xscale("log")
        xs = sorted({x for v in series.values() for x in v[0]})
        if len(xs) <= 12:  # plain labels at the measured points, not 2x10^0
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    legend(ax)  # outside the axes, never over a curve; one series too: its label says what is drawn
    ax.grid(alpha=0.3)
    if verdict:
        cid, v, reason, rule = verdict
        wrap = lambda t: textwrap.fill(t, 125, max_lines=4, placeholder=" …")  # noqa: E731
        fig.suptitle(f"claim {cid}: {v}", fontsize=11, fontweight="bold")
        fig.text(0.01, 0.0, wrap(f"verdict: {v}, because {reason}") + "\n" + wrap(f"tolerance (the rule): {rule}"),
                 fontsize=7, va="top", ha="left", wrap=False,
                 bbox=dict(boxstyle="round", facecolor="0.96", edgecolor="0.6"))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
