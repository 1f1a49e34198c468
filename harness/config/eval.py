"""The eval section of the typed configuration (harness.config re-exports it): extrapolation lengths and protocols,
RoPE eval-time extension, effective-length bars, and the validators every section shares (numbers: ranges.py)."""
import dataclasses
from dataclasses import dataclass, field
from typing import Any, List, Optional

from harness.config.ranges import RANGES, check, check_section, count
from harness.names import EXTENSION_VARIANTS

PROTOCOLS = ("nonoverlapping", "sliding", "both")
# HF rope_types that rescale a trained RoPE at eval time without retraining (not longrope: searched factors):
# eval.extension.types' default. Every name of harness.names.EXTENSION_VARIANTS but none is a valid entry.
EXTENSIONS = ("linear", "ntk", "dynamic", "yarn", "llama3")
VARIANTS = tuple(k for k in EXTENSION_VARIANTS if k != "none")


def protocol_list(protocol):
    """An eval protocol setting ("nonoverlapping", "sliding" or "both") as the protocols it runs."""
    return ["nonoverlapping", "sliding"] if protocol == "both" else [protocol]


def _choice(key, value, choices):
    if value not in choices:
        raise ValueError(f"unknown {key} {value!r}; expected one of {list(choices)}")


def _positive(section, obj, keys):
    """Each of keys an integer >= 1 (for a value a relation derives; the schema's own fields are in ranges.RANGES)."""
    for k in keys:
        check(f"{section}.{k}", getattr(obj, k), count(1))


@dataclass
class ExtensionConfig:
    """RoPE context extension at evaluation time, applied to encodings that take `rope_type`."""

    types: List[str] = field(default_factory=lambda: list(EXTENSIONS))
    factor: Any = "auto"  # "auto" = eval_len / train_len, or a number >= 1
    factors: List[Any] = field(default_factory=list)  # several settings of `factor`, each evaluated (empty: [factor])
    # YaRN counts rotations over the trained context: HF's 32/1 suit 2k-4k contexts; at a train length
    # of 64 no frequency turns 32 times, so every dimension sits in the interpolated/blended part.
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    finetune_steps: int = 0  # > 0: also fine-tune a copy at the eval length before evaluating
    finetune_lens: List[int] = field(default_factory=list)  # lengths to fine-tune at (default: 4x train)
    # The report's extension tables read nonoverlapping PPL; `both` adds sliding rows (the sliding protocol
    # costs about 12x the forward passes, and most of a RoPE run's evaluation time went to it).
    protocol: str = "nonoverlapping"

    def __post_init__(self):
        _choice("eval.extension.protocol", self.protocol, PROTOCOLS)
        for t in self.types:
            _choice("eval.extension.types entry", t, VARIANTS)
        check_section("eval.extension", self)
        if "llama3" in self.types and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(f"eval.extension.high_freq_factor {float(self.high_freq_factor)} must be > "
                             f"low_freq_factor {float(self.low_freq_factor)} (llama3 blends between them; "
                             f"eval.extension.types has llama3)")
        if "yarn" in self.types and self.beta_fast < self.beta_slow:
            raise ValueError(f"eval.extension.beta_fast {float(self.beta_fast)} must be >= beta_slow "
                             f"{float(self.beta_slow)} (YaRN's ramp runs from beta_fast rotations down to beta_slow; "
                             f"eval.extension.types has yarn)")


@dataclass
class EffectiveLengthConfig:
    """The two bars of harness.measure.effective_length: an absolute score and a share of the train-length
    score (RULER's fixed threshold; NoLiMa's 0.85 x the model's own short-context score)."""

    threshold: float = 0.5
    relative: float = 0.85
    min_base: float = 0.2  # the relative rule needs this score at the train length (else its row is NaN)

    def __post_init__(self):
        check_section("eval.effective_length", self)


@dataclass
class EvalConfig:
    """Extrapolation: evaluate at `lens` (default multiples x train.seq_len), capped tokens per length."""

    lens: Optional[List[int]] = None
    multiples: List[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    protocol: str = "both"  # nonoverlapping | sliding | both
    stride: Optional[int] = None  # sliding stride, >= 1; None = train.seq_len // 2 (0 is refused, not a default)
    max_tokens: int = 4096  # scored tokens per (length, protocol): keeps CPU eval cheap
    # the sliding protocol's own cap (None = max_tokens): each of its scored tokens costs L / stride times
    # a nonoverlapping one, so at 16x the train length it was half of a run's evaluation time
    sliding_max_tokens: Optional[int] = None
    split: str = "val"
    batch_size: int = 8
    extension: ExtensionConfig = field(default_factory=ExtensionConfig)
    effective_length: EffectiveLengthConfig = field(default_factory=EffectiveLengthConfig)
    # attention sink rate (64-token probes) and entropy per layer at every length (harness.measure.attention)
    # on this many held-out sequences; 0 = off
    attention_samples: int = 0
    decode_tokens: int = 0  # KV-cache decode benchmark (harness.measure.decode_bench): new tokens timed; 0 = off
    throughput_repeats: int = 5
    warmup: int = 2
    # lm-eval tasks (tasks/*.yaml or cached hub tasks) run on the trained model in the same job
    # (harness.lmeval.rows.rows_for_model); [] = none. `make eval` runs them later on a run dir instead.
    lm_eval_tasks: List[str] = field(default_factory=list)

    def __post_init__(self):
        _choice("eval.protocol", self.protocol, PROTOCOLS)
        _choice("eval.split", self.split, ("val", "test"))
        check_section("eval", self)
        if self.lens is None:  # the lengths are the multiples of train.seq_len: none would measure nothing
            check("eval.multiples", self.multiples, dataclasses.replace(RANGES["eval.multiples"], nonempty=True))

    def resolved_lens(self, train_len):
        """The evaluated lengths, sorted."""
        return sorted(set(self.lens if self.lens is not None else [m * train_len for m in self.multiples]))

    def protocols(self):
        return protocol_list(self.protocol)
