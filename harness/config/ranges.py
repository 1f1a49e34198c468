"""The numbers of the typed configuration in one table: RANGES maps "section.field" (and "encoding.<parameter>",
the encodings' constructor parameters by name) to the Range its values must lie in, and `check_section` is the one
check every section's __post_init__ runs on every numeric field (int, float, their Optional and List forms, and
any field named here). NaN and +-inf are refused unless a Range allows infinity; a bool is not a number, a float
is not an integer. Refusals are one line naming the key, the bad value and the valid range:
`train.lr must be > 0 and finite, got inf`.

Relations between fields stay with the section that holds both (harness/config/__init__.py, eval.py) or with the
encoding that knows them (its constructor: local_global's local_layers against the model's n_layers, t5's
max_distance against its buckets); `check_encoding` applies the table to an encoding dict before it is built.
tests/test_validation.py checks that every numeric field of every section and every numeric constructor
parameter of every registered encoding has an entry here."""
import dataclasses
import inspect
import math
import typing
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

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


SCORE = fraction(lo_open=True, why="scores are fractions")

RANGES = {
    # top level (harness.config.Config)
    "seed": Range(lo=0, hi=SEED_MAX, integer=True, why="the task and eval generators derive their seeds from it"),
    "seeds": count(1),
    "threads": count(0, zero="torch's default, or the launcher's cpus_per_task"),
    # model
    "model.n_layers": count(1),
    "model.d_model": count(1),
    "model.n_heads": count(1),
    "model.head_dim": count(1, null="model.d_model // n_heads"),
    "model.mlp_ratio": count(1),
    # task
    "task.min_len": count(1, null="train.seq_len, one length"),
    "task.eval_samples": count(1),
    "task.depths": fraction(entries="depths"),
    # train
    "train.seq_len": count(1),
    "train.steps": count(1),
    "train.batch_size": count(1),
    "train.lr": positive(),
    "train.min_lr_frac": fraction(why="of train.lr, where the cosine decay ends"),
    "train.warmup": count(0, zero="no warm-up"),
    "train.weight_decay": nonnegative(),
    "train.grad_clip": nonnegative(zero="no clipping"),
    "train.log_every": count(1),
    "train.max_position": count(0, zero="off"),
    # eval
    "eval.lens": count(1, entries="lengths", nonempty=True, null="eval.multiples x train.seq_len"),
    "eval.multiples": count(1, entries="multiples", why="of train.seq_len, the lengths when eval.lens is null"),
    "eval.stride": count(1, null="train.seq_len // 2"),
    "eval.max_tokens": count(1),
    "eval.sliding_max_tokens": count(1, null="eval.max_tokens"),
    "eval.batch_size": count(1),
    "eval.attention_samples": count(0, zero="off"),
    "eval.decode_tokens": count(0, zero="off"),
    "eval.throughput_repeats": count(1),
    "eval.warmup": count(0, zero="none"),
    "eval.extension.factor": Range(lo=1, words=("auto",)),
    "eval.extension.beta_fast": positive(),
    "eval.extension.beta_slow": positive(),
    "eval.extension.low_freq_factor": positive(),
    "eval.extension.high_freq_factor": positive(),
    "eval.extension.finetune_steps": count(0, zero="off"),
    "eval.extension.finetune_lens": count(1, entries="lengths", why="[] = 4 x train.seq_len"),
    "eval.effective_length.threshold": SCORE,
    "eval.effective_length.relative": SCORE,
    "eval.effective_length.min_base": SCORE,
    # precision
    "precision.lens": count(1, entries="lengths", nonempty=True, null="train.seq_len and the longest eval length"),
    "precision.max_tokens": count(1),
    "precision.shifts": count(0, entries="position shifts"),
    "precision.anchor_shift": count(0),
    # pretrained
    "pretrained.factor": Range(lo=1),
    "pretrained.lens": count(2, entries="lengths", nonempty=True),
    "pretrained.windows": count(1),
    "pretrained.bucket": count(1),
    "pretrained.chunk": count(1),
    "pretrained.reference_len": count(0, zero="off"),
    "pretrained.kl_bar": positive(),
    # the encodings' constructor parameters, by name (one meaning in every encoding that takes it)
    "encoding.base": positive(),
    "encoding.local_base": positive(),
    "encoding.global_base": positive(),
    "encoding.partial_rotary_factor": fraction(lo_open=True),
    "encoding.global_partial_rotary_factor": fraction(lo_open=True),
    "encoding.window": count(1),
    "encoding.local_layers": count(1),
    "encoding.rope_layers": count(1),
    "encoding.nope_every": count(2),
    "encoding.floor_scale": positive(),
    "encoding.attn_scale": nonnegative(),
    "encoding.train_len": count(1),
    "encoding.npos": count(2, null="train_len + 1"),
    "encoding.width": count(1),
    "encoding.height": count(1),
    "encoding.sections": count(0, entries="pairs per axis", null="the layout's default split"),
    "encoding.block_size": count(2),
    "encoding.init_std": positive(),
    "encoding.mlp_width": count(1),
    "encoding.init_c": positive(),
    "encoding.init_L": positive(),
    "encoding.eps": nonnegative(),
    "encoding.max_distance": count(1),
    "encoding.max_len": count(1),
    "encoding.num_buckets": count(2),
    "encoding.scale": positive(null="d_model^-1/2"),
    "encoding.scale_base": positive(),
    "encoding.rho": fraction(),
    "encoding.alpha_init": Range(),
}


def numeric_kind(hint) -> Optional[Tuple[type, bool, bool]]:
    """(int or float, is a list, may be null) of a field's type hint, or None when it is not numeric."""
    optional = False
    if typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) != 1:
            return None
        hint, optional = rest[0], True
    if hint in (int, float):
        return hint, False, optional
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (list, typing.List) and args and args[0] in (int, float):
        return args[0], True, optional
    return None


def key_of(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name


def numeric_fields(cls, section: str):
    """[(key, field name)] of the fields of dataclass cls that check_section checks: numeric by type or named."""
    hints = typing.get_type_hints(cls)
    return [(key_of(section, f.name), f.name) for f in dataclasses.fields(cls)
            if numeric_kind(hints[f.name]) is not None or key_of(section, f.name) in RANGES]


def check(key: str, value, rng: Optional[Range] = None):
    """Raise ValueError (one line) unless value lies in RANGES[key] (or rng); returns value."""
    problem = (rng or RANGES[key]).problem(key, value)
    if problem:
        raise ValueError(problem)
    return value


def check_section(section: str, obj):
    """Every numeric field of a config section (a dataclass instance) against its Range; "" is the top level. A
    numeric field without an entry (a test keeps them from existing) is still checked for finiteness."""
    for key, name in numeric_fields(type(obj), section):
        rng = RANGES.get(key)
        if rng is None:
            kind, is_list, optional = numeric_kind(typing.get_type_hints(type(obj))[name])
            rng = Range(integer=kind is int, entries="numbers" if is_list else "", null="unset" if optional else "")
        check(key, getattr(obj, name), rng)


def check_finite(key: str, value):
    """Every number inside value (nested dicts and lists too) finite: `key.sub` / `key[i]` names the bad one."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key} must be finite, got {value!r}")
    if isinstance(value, Mapping):
        for k, v in value.items():
            check_finite(f"{key}.{k}", v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(f"{key}[{i}]", v)


def check_encoding(encoding: Mapping[str, Any]):
    """An encoding dict {name, **params} before it is built: each parameter named in RANGES against its Range, a
    parameter whose constructor default is a bool must be a bool, and every other number anywhere in it finite.
    The constructor then checks its choices and the relations only it knows."""
    from harness import encodings
    defaults = {p.name: p.default for p in inspect.signature(encodings.ENCODINGS[encoding["name"]]).parameters.values()}
    for name, value in encoding.items():
        if name == "name":
            continue
        key = f"encoding.{name}"
        if key in RANGES:
            check(key, value)
        elif isinstance(defaults.get(name), bool) and not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        check_finite(key, value)
