"""The valid ranges of encoding parameters. A parameter name several encodings share has one meaning and one Range
here (SHARED); a parameter of one encoding is declared in that encoding's own file as its class's `RANGES`
{name: Range} (inherited by subclasses). `ranges(cls)` is what an encoding's constructor parameters must lie in;
harness.config.ranges.check_encoding applies it to an encoding dict before it is built, and tests/test_validation.py
checks that every numeric constructor parameter of every registered encoding has one."""
import inspect

from harness.range_types import Range, count, fraction, nonnegative, positive  # noqa: F401 - for encodings' RANGES

SHARED = {
    "base": positive(),
    "partial_rotary_factor": fraction(lo_open=True),
    "window": count(1),
    "train_len": count(1),
    "width": count(1),
    "max_distance": count(1),
}


def ranges(cls):
    """{parameter: Range} of an encoding class's constructor parameters that have one: SHARED for the shared names
    it takes, then the RANGES of its class and its bases (the most derived wins)."""
    taken = set(inspect.signature(cls).parameters)
    out = {k: v for k, v in SHARED.items() if k in taken}
    for c in reversed(cls.__mro__):
        out.update({k: v for k, v in vars(c).get("RANGES", {}).items() if k in taken})
    return out
