"""Typed configuration: dataclasses registered in Hydra's ConfigStore. Hydra and OmegaConf stop here;
the rest of the package receives these dataclasses and plain arguments."""
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from harness import encodings
from harness.model import ATTENTIONS


@dataclass
class ModelConfig:
    """Transformer size; head_dim None means d_model // n_heads."""

    name: str = "tiny"
    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    head_dim: Optional[int] = None
    attention: str = "softmax"
    mlp_ratio: int = 4

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown model.attention {self.attention!r}; expected one of {list(ATTENTIONS)}")
        for k in ("n_layers", "d_model", "n_heads", "mlp_ratio"):
            if getattr(self, k) < 1:
                raise ValueError(f"model.{k} must be >= 1, got {getattr(self, k)}")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"model.d_model {self.d_model} is not divisible by n_heads {self.n_heads}; "
                             f"set model.head_dim explicitly")


@dataclass
class Config:
    """One run. `encoding` is {name, **params}; the encoding's constructor signature is its schema."""

    encoding: Dict[str, Any] = field(default_factory=lambda: {"name": "rope"})
    model: ModelConfig = field(default_factory=ModelConfig)
    seed: int = 0

    def __post_init__(self):
        name = self.encoding.get("name")
        if name not in encodings.ENCODINGS:
            raise ValueError(f"unknown encoding {name!r}; expected one of {list(encodings.ENCODINGS)}")


def encoding_params(cfg: Config) -> Dict[str, Any]:
    """The encoding's own parameters (everything but its name), as plain Python values."""
    return {k: v for k, v in cfg.encoding.items() if k != "name"}


def to_config(cfg) -> Config:
    """Hydra's DictConfig -> Config (validated by the dataclasses' __post_init__)."""
    return OmegaConf.to_object(cfg)


ConfigStore.instance().store(name="base_config", node=Config)
