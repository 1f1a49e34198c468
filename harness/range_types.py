"""The Range a numeric config value must lie in, and its constructors (`count`, `positive`, `nonnegative`, `fraction`):
membership, and the one-line refusal naming the key, the value and the range. The table of which knob takes which
Range is harness/config/ranges.py."""
import math
import typing
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

INF = math.inf
INT64_MAX = 2 ** 63 - 1  # positions, lengths and counts become int64 tensors
# seed feeds torch generators as 1_000_003 + length + 104_729 * seed (tasks.synthetic.eval_generator) and
# 7_777_777 + seed (tasks.data.eval_offset), which must stay below 2**64: 2**32 - 1 leaves room for any length
SEED_MAX = 2 ** 32 - 1


@dataclass(frozen=True)
class Range:
    """Where a numeric knob's values may lie. `entries`: the field is a list and each entry must lie in the range
    (the noun names an entry, "lengths"); `null`: null is allowed and means this; `zero`: what 0 means, said in the
    message; `words`: strings allowed besides numbers ("auto"); `why`: a reason appended to the message."""

    lo: float = -INF
    hi: float = INF
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    allow_inf: bool = False
    null: str = ""
    zero: str = ""
    words: Tuple[str, ...] = ()
    entries: str = ""
    nonempty: bool = False
    why: str = ""

    def interval(self) -> str:
        return f"{'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"

    def core(self, typed=False) -> str:
        """'>= 1', '> 0 and finite', 'a number in (0, 1]', 'an integer in [0, 2**32 - 1]'; typed: always with the
        noun ('an integer >= 1'), for a value of the wrong type."""
        noun = "an integer" if self.integer else "a number"
        if self.lo > -INF and self.hi < INF:
            return f"{noun} in {self.interval()}"
        finite = "" if self.integer or self.allow_inf else " and finite"
        if self.lo > -INF:
            bound = f"{'>' if self.lo_open else '>='} {_num(self.lo)}{finite}"
        elif self.hi < INF:
            bound = f"{'<' if self.hi_open else '<='} {_num(self.hi)}{finite}"
        else:
            return noun if self.integer or self.allow_inf else "a finite number"
        return f"{noun} {bound}" if typed else bound

    def describe(self, typed=False) -> str:
        """What a valid value is, as the message says it after 'must'."""
        if self.entries:
            two_sided = self.lo > -INF and self.hi < INF
            if two_sided and not self.nonempty:
                text = f"lie in {self.interval()}"
            else:
                bound = f"in {self.interval()}" if two_sided else self.core()
                bound = "" if bound == "an integer" else "(finite)" if bound == "a finite number" else bound
                text = f"be a {'non-empty ' if self.nonempty else ''}list of {self.entries} {bound}".rstrip()
        elif self.words:
            text = "be " + " or ".join(repr(w) for w in self.words) + " or " + self.core(typed=True)
        else:
            text = "be " + self.core(typed=typed)
        if self.zero:
            text += f" (0 = {self.zero})"
        if self.null:
            text += f" or null (= {self.null})"
        if self.why:
            text += f" ({self.why})"
        return text

    def accepts(self, v) -> bool:
        """True when the single value v lies in the range (and has the right type)."""
        if isinstance(v, str):
            return v in self.words
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not isinstance(v, int):
            return False
        if math.isnan(v) or (math.isinf(v) and not self.allow_inf):
            return False
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below and not _too_big(v)

    def problem(self, key: str, value) -> Optional[str]:
        """The one-line refusal of value at key, or None when it is valid."""
        if value is None:
            return None if self.null else f"{key} must {self.describe(typed=True)}, got null"
        if self.entries:
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, typing.Iterable):
                return f"{key} must {self.describe()}, got {value!r}"
            values = list(value)
            if (self.nonempty and not values) or not all(self.accepts(v) for v in values):
                big = [v for v in values if _too_big(v)]
                return (f"{key} entries must be at most {_num(INT64_MAX)} (int64), got {big[0]}" if big else
                        f"{key} must {self.describe()}, got {values}")
            return None
        if self.accepts(value):
            return None
        if _too_big(value) and self.hi >= INT64_MAX:
            return f"{key} must be at most {_num(INT64_MAX)} (int64), got {value}"
        wrong_type = isinstance(value, (bool, str)) or not isinstance(value, (int, float)) or (
            self.integer and isinstance(value, float))
        return f"{key} must {self.describe(typed=wrong_type)}, got {value!r}"


def _too_big(v) -> bool:
    """An int outside int64 (Python ints are unbounded; tensors, positions and torch seeds are not)."""
    return isinstance(v, int) and not isinstance(v, bool) and not -INT64_MAX - 1 <= v <= INT64_MAX


def _num(x) -> str:
    """A bound as the message prints it: 1, 0.5, 2**32 - 1 (not 4294967295), inf."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, int) and x >= 2 ** 16 and ((x + 1) & x) == 0:
        return f"2**{(x + 1).bit_length() - 1} - 1"
    return str(x)


def count(lo=1, **kw) -> Range:
    """An integer >= lo (at most int64)."""
    return Range(lo=lo, hi=INF, integer=True, **kw)


def positive(**kw) -> Range:
    """A finite number > 0."""
    return Range(lo=0, lo_open=True, **kw)


def nonnegative(**kw) -> Range:
    """A finite number >= 0."""
    return Range(lo=0, **kw)


def fraction(lo_open=False, **kw) -> Range:
    """A number in [0, 1] (or (0, 1])."""
    return Range(lo=0, hi=1, lo_open=lo_open, **kw)
