"""The numbers of the typed configuration in one table: RANGES maps "section.field" to the Range its values must
lie in (an encoding's parameters: its own file's RANGES and the shared names', harness.encodings._params), and
`check_section` is the one
check every section's __post_init__ runs on every numeric field (int, float, their Optional and List forms, and
any field named here). NaN and +-inf are refused unless a Range allows infinity; a bool is not a number, a float
is not an integer. Refusals are one line naming the key, the bad value and the valid range:
`train.lr must be > 0 and finite, got inf`.

Relations between fields stay with the section that holds both (harness/config/__init__.py, eval.py) or with the
encoding that knows them (its constructor: local_global's local_layers against the model's n_layers, t5's
max_distance against its buckets); `check_encoding` applies the encoding's ranges to an encoding dict before it is
built. tests/test_validation.py checks that every numeric field of every section has an entry here and every
numeric constructor parameter of every registered encoding has a Range (harness.encodings.ranges)."""
import dataclasses
import inspect
import math
import typing
from typing import Any, Mapping, Optional, Tuple

from harness.range_types import SEED_MAX, Range, count, fraction, nonnegative, positive  # noqa: F401

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
    "eval.extension.factors": Range(lo=1, words=("auto",), entries="factors"),
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
    "pretrained.lens": count(2, entries="lengths", nonempty=True, null="pretrained.multiples x the trained context"),
    "pretrained.multiples": positive(entries="multiples", why="of the checkpoint's trained context"),
    "pretrained.depths": fraction(entries="depths"),
    "pretrained.samples": count(1),
    "pretrained.windows": count(1),
    "pretrained.bucket": count(1),
    "pretrained.chunk": count(1),
    "pretrained.reference_len": count(0, zero="off", null="the shortest length"),
    "pretrained.kl_bar": positive(),
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
    own = encodings.ranges(encoding["name"])
    for name, value in encoding.items():
        if name == "name":
            continue
        key = f"encoding.{name}"
        if name in own:
            check(key, value, own[name])
        elif isinstance(defaults.get(name), bool) and not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        check_finite(key, value)
