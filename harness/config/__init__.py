"""Typed configuration: dataclasses in Hydra's ConfigStore. Hydra and OmegaConf stop here; the rest of the
package receives these dataclasses and plain arguments."""
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from harness import attention, encodings, flex
from harness.config import resolvers  # noqa: F401 - registered on import: conf/ interpolates them
from harness.config.eval import (EXTENSIONS, PROTOCOLS, EffectiveLengthConfig, EvalConfig,  # noqa: F401 - re-exported
                                 ExtensionConfig, _choice, _positive, protocol_list)
from harness.config.pretrained import PretrainedConfig  # noqa: F401 - re-exported
from harness.config.ranges import RANGES, check, check_encoding, check_finite, check_section  # noqa: F401 - re-exported
# Names this schema validates: fixed tuples in harness.names (Hydra-free, for the low layers too), the eval
# section's in harness.config.eval; encoding and task names come from their registries.
from harness.names import (ATTENTIONS, LOW_DTYPES, PRECISION_PROTOCOLS, QK_NORMS,  # noqa: F401 - re-exported
                           WANDB_MODES)
from harness.rope.pipelines import Pipeline, load_pipeline, pipeline_names
from harness.tasks import TASK_NAMES, synthetic


@dataclass
class ModelConfig:
    """Transformer size; head_dim None in YAML means d_model // n_heads, resolved here once."""

    name: str = "tiny"
    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    head_dim: Optional[int] = None
    attention: str = "softmax"
    mlp_ratio: int = 4
    qk_norm: str = "none"  # none | rms (Qwen3: learned gain, before the rotation) | l2 (Llama 4: after it)
    attention_impl: str = "auto"  # auto | sdpa | flex: a bias of i - j alone as a table in FlexAttention (harness.flex)

    def __post_init__(self):
        _choice("model.attention", self.attention, ATTENTIONS)
        _choice("model.qk_norm", self.qk_norm, QK_NORMS)
        _choice("model.attention_impl", self.attention_impl, flex.IMPLS)
        if self.attention == "linear" and self.qk_norm != "none":  # harness.model says why, for direct use
            raise ValueError(f"model.qk_norm={self.qk_norm!r} needs model.attention=softmax; got linear")
        check_section("model", self)
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"model.d_model {self.d_model} is not divisible by n_heads {self.n_heads}; "
                             f"set model.head_dim explicitly")
        self.head_dim = self.d_model // self.n_heads if self.head_dim is None else self.head_dim
        _positive("model", self, ("head_dim",))


@dataclass
class TaskConfig:
    """What the model learns. `lm` reads `corpus`; synthetic tasks take `params` (generator kwargs)."""

    name: str = "lm"
    corpus: str = "kjv"  # lm: kjv | pystdlib | a file or folder path | hf:<name> (cached only)
    params: Dict[str, Any] = field(default_factory=dict)  # synthetic generator keyword arguments
    min_len: Optional[int] = None  # synthetic: train lengths drawn from [min_len, train.seq_len]
    # lm: a pretrained checkpoint's tokenizer (a shipped name, a checkpoint dir or .gguf) instead of bytes; lengths
    # (train.seq_len, eval lengths) then count its tokens (harness.tasks.tokens)
    tokenizer: Optional[str] = None
    eval_samples: int = 64  # synthetic: sequences per evaluated length (and per passkey depth)
    depths: List[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])  # passkey

    def __post_init__(self):
        _choice("task", self.name, TASK_NAMES)
        takes = synthetic.parameters(self.name) if self.name in synthetic.TASKS else []
        unknown = sorted(set(self.params) - set(takes))
        if unknown:
            raise ValueError(f"task {self.name!r} does not take task.params {unknown}; its parameters: {takes}")
        if self.tokenizer is not None and self.name != "lm":
            raise ValueError(f"task.tokenizer applies to task lm (a corpus); task {self.name!r} generates bytes: "
                             f"leave it null")
        check_section("task", self)
        check_finite("task.params", dict(self.params))  # their ranges: the generator's own checks (tasks.check)


@dataclass
class TrainConfig:
    """AdamW with linear warm-up and cosine decay; the NaN guard stops a diverged run."""

    seq_len: int = 64
    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    min_lr_frac: float = 0.1
    warmup: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    log_every: int = 10
    # Randomized positions (Ruoss et al. 2023): each step feeds a sorted random subset of [0, max_position)
    max_position: int = 0  # shared by the batch; 0 = off (positions 0..T-1)

    def __post_init__(self):
        check_section("train", self)
        if self.max_position and self.max_position < self.seq_len:
            raise ValueError(f"train.max_position {self.max_position} must be 0 (off) or >= "
                             f"train.seq_len {self.seq_len}")


@dataclass
class PipelineConfig:
    """A RoPE precision pipeline's stage dtypes (harness.rope.pipelines.Pipeline, which is
    frozen and so cannot take Hydra overrides itself); validated by building that Pipeline."""

    name: str = "fp32"
    positions: str = "fp32"
    inv_freq: str = "fp32"
    phase: str = "fp32"
    table: str = "fp32"
    rotation: str = "fp32"
    activations: str = "fp32"

    def __post_init__(self):
        self.build()

    def build(self) -> Pipeline:
        return Pipeline(**vars(self))


@dataclass
class PrecisionConfig:
    """Model-level precision on the trained model (harness.measure.precision_model), and the RoPE kernel
    pipeline a run names. The sweep report's kernel section covers every conf/precision preset once per
    sweep, plus `pipeline` when a run sets one that is not a preset (`precision=<preset>` picks a preset;
    `precision.pipeline.<stage>=<dtype> precision.pipeline.name=<new>` composes a new one)."""

    model_level: bool = True
    dtypes: List[str] = field(default_factory=lambda: ["bf16", "fp16"])
    protocols: List[str] = field(default_factory=lambda: ["autocast", "cast"])
    lens: Optional[List[int]] = None  # None = train.seq_len and the longest eval length
    max_tokens: int = 512  # scored tokens per length for ppl_gap / kl_fp32 (at least one whole window)
    shifts: List[int] = field(default_factory=lambda: [0, 64, 256, 1000, 2000])  # AnchorAttention D1
    anchor_shift: int = 16  # AnchorAttention D2
    pipeline: Optional[PipelineConfig] = None

    def __post_init__(self):
        for dt in self.dtypes:
            _choice("precision.dtypes entry", dt, LOW_DTYPES)
        for p in self.protocols:
            _choice("precision.protocols entry", p, PRECISION_PROTOCOLS)
        check_section("precision", self)
        p = self.pipeline.build() if self.pipeline is not None else None
        if p is not None and p.name in pipeline_names() and p != load_pipeline(p.name):
            raise ValueError(f"precision.pipeline differs from the preset {p.name!r}; give it a new name "
                             f"(precision.pipeline.name=...) so its rows are not mistaken for the preset's")

    def resolved_lens(self, train_len, eval_lens):
        """The lengths of ppl_gap / kl_fp32 / anchor_d_logit, sorted."""
        return sorted(set(self.lens if self.lens is not None else [train_len, max(eval_lens)]))


@dataclass
class WandbConfig:
    """W&B sink: offline by default (files inside the run dir; `wandb sync` later)."""

    mode: str = "offline"
    project: str = "pe-harness"
    entity: Optional[str] = None

    def __post_init__(self):
        _choice("wandb.mode", self.mode, WANDB_MODES)


@dataclass
class ProxyConfig:
    """Train in a pretrained model's RoPE geometry (conf/proxy/, harness.pretrained.proxy): the YAML interpolates
    encoding.base and the extension knobs from `target`; `layer_type` picks one RoPE of a per-layer-type model."""

    target: str = "smollm2"  # a shipped checkpoint name, a checkpoint dir, a config.json or a .gguf file
    layer_type: Optional[str] = None


@dataclass
class Config:
    """One run. `encoding` is {name, **params}; the encoding's constructor signature is its schema."""

    encoding: Dict[str, Any] = field(default_factory=lambda: {"name": "rope"})
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    # set (pretrained=smollm2): evaluate that pretrained checkpoint instead of training a model (harness.pretrained)
    pretrained: Optional[PretrainedConfig] = None
    proxy: Optional[ProxyConfig] = None  # set (proxy=smollm2): the RoPE base and extension knobs derived from it
    seed: int = 0  # in [0, 2**32 - 1] (ranges.SEED_MAX)
    # Seeds a sweep preset runs (its sweeper sweeps seed over range(0, seeds)): every comparison is paired
    # by seed, since the seed sets model init, data order and eval windows. Not part of a run dir's name.
    seeds: int = 1  # >= 1
    sweep: str = "single"  # the sweep name written into every row and used as the W&B group
    device: str = "cpu"
    threads: int = 0  # torch intra-op threads, >= 0; 0 = torch's default. Parallel sweeps set 1 per job.
    out: str = "results"  # root of run dirs (hydra.run.dir / hydra.sweep.dir interpolate it)
    checkpoint: bool = True

    def __post_init__(self):
        name = self.encoding.get("name")
        if name not in encodings.ENCODINGS:
            raise ValueError(f"unknown encoding {name!r}; expected one of {list(encodings.ENCODINGS)}")
        check_section("", self)
        check_encoding(self.encoding)  # before anything builds it (infra.preflight.check, the model)
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ValueError(f"unknown device {self.device!r}; expected cpu or cuda[:N]")
        if self.task.tokenizer and self.eval.lm_eval_tasks:
            raise ValueError(f"eval.lm_eval_tasks feed the model bytes; task.tokenizer={self.task.tokenizer} trains "
                             f"it on tokens: leave one of them empty")
        if self.pretrained is None:
            _check_memory(self.model, self.device)


# bytes per parameter: validation builds the model on this machine's CPU in fp32 (infra.preflight.check); training on the
# CPU also holds its gradient and AdamW's two moments
BUILD_BYTES, CPU_TRAIN_BYTES = 4, 16


def model_parameters(m: ModelConfig) -> int:
    """The Transformer's parameter count without the encoding's own (harness.model: tied byte embedding, qkv,
    output projection and MLP per block, LayerNorms): a lower bound of what building it allocates."""
    inner = m.n_heads * m.head_dim
    block = 4 * m.d_model * inner + 2 * m.mlp_ratio * m.d_model ** 2 + 4 * m.d_model
    return 256 * m.d_model + m.n_layers * block + 2 * m.d_model


def machine_memory() -> Optional[int]:
    """This machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(m: ModelConfig, device: str):
    """Refuse a model whose parameters alone do not fit this machine's memory: validation would build it on the
    CPU (a cryptic allocator error, or the OOM killer) and a CPU run could not train it."""
    ram, n = machine_memory(), model_parameters(m)
    per, what = (CPU_TRAIN_BYTES, "fp32 weights, gradients and AdamW's two moments to train on the CPU") \
        if device == "cpu" else (BUILD_BYTES, "fp32 weights, built on the CPU by validation")
    if ram and n * per > ram:
        raise ValueError(f"model.d_model={m.d_model}, n_heads={m.n_heads}, head_dim={m.head_dim}, n_layers="
                         f"{m.n_layers}, mlp_ratio={m.mlp_ratio}: {n:.3g} parameters: {n * per / 2 ** 30:.3g} GiB "
                         f"({per} bytes each: {what}), but this machine has {ram / 2 ** 30:.3g} GiB of memory")


def encoding_params(cfg: Config) -> Dict[str, Any]:
    """The encoding's own parameters but its name, as plain values, plus what rows and labels must carry: `qk_norm`
    when set (it changes what positions do to the scores), `attention_impl` when FlexAttention runs (harness.flex)."""
    qk = {"qk_norm": cfg.model.qk_norm} if cfg.model.qk_norm != "none" else {}
    return {**{k: v for k, v in cfg.encoding.items() if k != "name"}, **qk, **_flex_recorded(cfg)}


def _flex_recorded(cfg: Config) -> Dict[str, Any]:
    """{'attention_impl': 'flex'} when some block of the run takes FlexAttention on its device, else {}: rows
    carry the path only where it is not SDPA, so SDPA runs' rows are unchanged."""
    m = cfg.model
    if m.attention != "softmax" or m.attention_impl == "sdpa" or (
            m.attention_impl == "auto" and torch_device_type(cfg.device) not in flex.AUTO_DEVICES):
        return {}
    params = {k: v for k, v in cfg.encoding.items() if k != "name"}
    enc = encodings.build(cfg.encoding["name"], d_model=m.d_model, n_heads=m.n_heads, head_dim=m.head_dim, **params)
    return {"attention_impl": "flex"} if any(attention.flex_plan(m.attention_impl, enc, m.n_layers)) else {}


def torch_device_type(device: str) -> str:
    """'cuda:1' -> 'cuda' (torch.device(...).type without importing torch here)."""
    return device.split(":")[0]


def to_config(cfg) -> Config:
    """Hydra's DictConfig -> Config (validated by the dataclasses' __post_init__)."""
    return OmegaConf.to_object(cfg)


def to_dict(cfg: Config) -> Dict[str, Any]:
    """Config -> plain nested dict (for checkpoints, W&B, and re-running)."""
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


def from_dict(d: Dict[str, Any]) -> Config:
    """Plain dict (from `to_dict` or a checkpoint) -> validated Config."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config), d))


ConfigStore.instance().store(name="base_config", node=Config)
