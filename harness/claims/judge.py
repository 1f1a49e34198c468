"""Judging a claim on an interval over seeds (issue: trained claims judge on the CI, never on one number).

Flat-dict convention of the trained claims' evidence (rules take plain dicts, so tests feed synthetic ones):
a quantity `q` is four numbers, `q` (mean over seeds, or the mean paired difference), `q_lo`, `q_hi` (its
95% CI) and `q_n` (seeds behind it). `put` writes them from a harness.stats Interval or Paired; `est` reads
them back; `judge` turns (interval, threshold, side) into supported / contradicted / inconclusive."""
import dataclasses
import math

from harness.claims.table import VERDICTS, fmt, verdict

MIN_SEEDS = 3  # one seed decides nothing; two give a CI too wide to trust (t_{0.975,1} = 12.7)
SIDES = ("above", "below")
S, C, I = VERDICTS  # supported, contradicted, inconclusive


@dataclasses.dataclass(frozen=True)
class Est:
    """One quantity as a rule sees it: mean, 95% CI [lo, hi] (NaN when n < 2), n seeds."""

    mean: float
    lo: float
    hi: float
    n: int


def put(numbers, key, x):
    """numbers[key, key_lo, key_hi, key_n] from a stats.Interval (its mean) or stats.Paired (its diff)."""
    mean = x.diff if hasattr(x, "diff") else x.mean
    numbers.update({key: float(mean), f"{key}_lo": float(x.lo), f"{key}_hi": float(x.hi), f"{key}_n": float(x.n)})
    return numbers


def put_nan(numbers, key):
    """A quantity that could not be measured: NaN with n = 0."""
    numbers.update({key: math.nan, f"{key}_lo": math.nan, f"{key}_hi": math.nan, f"{key}_n": 0.0})
    return numbers


def est(numbers, key):
    """Est of `key` from a flat dict; a key absent from it reads as not measured (n = 0)."""
    n = numbers.get(f"{key}_n", 0.0)
    return Est(numbers.get(key, math.nan), numbers.get(f"{key}_lo", math.nan), numbers.get(f"{key}_hi", math.nan),
               0 if n != n else int(n))


def show(e, label):
    """'label = 1.62 [1.48, 1.77] (n=3)'."""
    ci = "n/a" if math.isnan(e.lo) or math.isnan(e.hi) else f"{fmt(e.lo)}, {fmt(e.hi)}"
    return f"{label} = {fmt(e.mean)} [{ci}] (n={e.n})"


def judge(e, threshold, side, *, label, far=None):
    """(verdict, text) of the claim 'the quantity lies `side` (above | below) `threshold`'. Supported when the
    whole CI lies strictly on that side; contradicted when it lies strictly on the other side of `far` (default:
    the threshold itself; a rule with a dead zone between the two gives a farther one); otherwise, or with fewer
    than MIN_SEEDS seeds, inconclusive. The threshold itself counts on neither side."""
    if side not in SIDES:
        raise ValueError(f"unknown side {side!r}; expected one of {list(SIDES)}")
    far = threshold if far is None else far
    text = show(e, label)
    if e.n < MIN_SEEDS or math.isnan(e.lo) or math.isnan(e.hi):
        return verdict(I, f"{text}: needs >= {MIN_SEEDS} seeds (have {e.n})")
    up = side == "above"
    if (e.lo > threshold) if up else (e.hi < threshold):
        return verdict(S, f"{text} {'>' if up else '<'} {threshold:g}")
    if (e.hi < far) if up else (e.lo > far):
        return verdict(C, f"{text} {'<' if up else '>'} {far:g}")
    where = f"{threshold:g}" if far == threshold else f"[{min(threshold, far):g}, {max(threshold, far):g}]"
    return verdict(I, f"{text}, CI overlaps {where}")


def within(e, low, high, *, label):
    """(verdict, text) of 'the quantity lies in (low, high)': supported when the CI does, contradicted when it
    lies wholly below low or above high, otherwise (or with fewer than MIN_SEEDS seeds) inconclusive."""
    text = show(e, label)
    if e.n < MIN_SEEDS or math.isnan(e.lo) or math.isnan(e.hi):
        return verdict(I, f"{text}: needs >= {MIN_SEEDS} seeds (have {e.n})")
    if low < e.lo and e.hi < high:
        return verdict(S, f"{text} in ({low:g}, {high:g})")
    if e.hi < low or e.lo > high:
        return verdict(C, f"{text} outside ({low:g}, {high:g})")
    return verdict(I, f"{text}, CI overlaps {low:g} or {high:g}")


def every(judged, label):
    """One part made of several judged comparisons, all of which must hold (e.g. 1e4 beats every other base):
    supported when all are, contradicted when any is, else inconclusive. judged: [(verdict, text)]."""
    vs = [v for v, _ in judged]
    v = C if C in vs else S if all(x == S for x in vs) else I
    shown = [t for x, t in judged if x == v] or [t for _, t in judged]  # the comparisons that decide it
    return v, f"{label}: {'; '.join(shown)}"


def unmeasured(numbers, keys):
    """True when no key of `keys` has a single seed (the sweep was not run)."""
    return all(est(numbers, k).n == 0 for k in keys)


def fewest(numbers, keys):
    """Seeds behind a verdict: the fewest over the judged quantities (0 when one is missing)."""
    return min((est(numbers, k).n for k in keys), default=0)
