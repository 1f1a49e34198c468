"""The claim registry's record, the verdict vocabulary, and the writer of results/claims/claims.md.

A claim pairs a `measure(ctx) -> Evidence` (runs or reads the experiment, returns numbers and a plot)
with a `rule(numbers) -> (verdict, reason)`: the verdict is computed from the numbers by the thresholds
in the rule's docstring, never typed in. Rules take plain dicts so tests can feed them synthetic evidence."""
import dataclasses
import math
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

VERDICTS = ("supported", "contradicted", "inconclusive")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """numbers: name -> float (the rule's input); summary: one line quoting them; plot: file name or None."""

    numbers: Dict[str, float]
    summary: str
    plot: Optional[str] = None


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


def verdict(v, reason):
    """(v, reason) after checking v is one of VERDICTS."""
    if v not in VERDICTS:
        raise ValueError(f"unknown verdict {v!r}; expected one of {list(VERDICTS)}")
    return v, reason


def by_parts(parts, *, contradict_at=2):
    """Verdict of a claim made of sub-claims: parts = [(label, passed)]. All pass: supported; at least
    `contradict_at` fail: contradicted; otherwise (some fail): inconclusive. A part that is NaN fails."""
    failed = [label for label, ok in parts if not ok]
    if not failed:
        return verdict("supported", "every part holds: " + "; ".join(label for label, _ in parts))
    kind = "contradicted" if len(failed) >= min(contradict_at, len(parts)) else "inconclusive"
    held = [label for label, ok in parts if ok]
    return verdict(kind, f"fails: {'; '.join(failed)}" + (f" (holds: {'; '.join(held)})" if held else ""))


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


def write(rows, out_dir, header=""):
    """rows: [(Claim, Evidence | None, verdict, reason)] -> out_dir/claims.md (the table, then each
    claim's rule with its thresholds). Returns the path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Claims of the reference notes, tested", "", header, "",
             "| # | claim | source | command | evidence | verdict | reason |", "|---|---|---|---|---|---|---|"]
    for claim, ev, v, reason in rows:
        evidence = "not measured" if ev is None else ev.summary + (f" ([plot]({ev.plot}))" if ev.plot else "")
        lines.append("| " + " | ".join(_cell(c) for c in (
            claim.id, claim.text, claim.source, f"`{claim.command}`", evidence, f"**{v}**", reason)) + " |")
    counts = {k: sum(r[2] == k for r in rows) for k in VERDICTS}
    lines += ["", "Verdicts: " + ", ".join(f"{n} {k}" for k, n in counts.items()) + ".", "",
              "## Rules (thresholds) per claim", ""]
    lines += [f"{claim.id}. {_doc(claim.rule)}" for claim, *_ in rows]
    path = out_dir / "claims.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def plot(path, series, *, xlabel, ylabel, title, logx=False, logy=False, hlines=(), kind="line"):
    """series: {label: (xs, ys)} -> PNG at path (file name returned; None when every value is NaN). hlines: [(y, label)] threshold lines. kind: line | bar."""
    series = {k: (xs, ys) for k, (xs, ys) in series.items() if any(y == y for y in ys)}  # drop all-NaN
    if not series:
        return None  # nothing measured: no plot to link
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, (label, (xs, ys)) in enumerate(series.items()):
        if kind == "bar":
            ax.bar([str(x) for x in xs], ys, label=label)
        else:
            ax.plot(xs, ys, label=label, marker="o" if len(xs) <= 20 else None, lw=1.2,
                    ls=("-", "--", ":", "-.")[i % 4])
    for y, label in hlines:
        ax.axhline(y, color="grey", lw=0.8, ls="--")
        ax.annotate(label, (0.01, y), xycoords=("axes fraction", "data"), fontsize=7, color="grey", va="bottom")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if logx:
        ax.set_xscale("log")
        xs = sorted({x for xs, _ in series.values() for x in xs})
        if len(xs) <= 12:  # plain labels at the measured points, not 2x10^0
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    if len(series) > 1:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path).name
