"""RoPE precision pipelines as configuration: the stage names, the dtype names a stage may take, and the
presets in conf/precision/. Part of the schema (harness.config validates with it); the maths that runs a
pipeline is harness.measure.precision_pipelines."""
from dataclasses import asdict, dataclass

import yaml

from harness import paths

CONF_DIR = paths.conf_dir() / "precision"
STAGES = ("positions", "inv_freq", "phase", "table", "rotation", "activations")
STAGE_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class Pipeline:
    """The dtype name of each stage; `tf32` is a matmul input format, so only `phase` may take it."""

    name: str
    positions: str = "fp32"
    inv_freq: str = "fp32"
    phase: str = "fp32"
    table: str = "fp32"
    rotation: str = "fp32"
    activations: str = "fp32"

    def __post_init__(self):
        for stage in STAGES:
            value = getattr(self, stage)
            allowed = list(STAGE_DTYPES) if stage == "phase" else [d for d in STAGE_DTYPES if d != "tf32"]
            if value not in allowed:
                raise ValueError(f"pipeline {self.name!r}: unknown {stage} dtype {value!r}; expected one of {allowed}")

    def dtypes(self):
        """The stage -> dtype-name mapping (what goes into a row's params)."""
        return {k: v for k, v in asdict(self).items() if k != "name"}


def pipeline_names():
    """Names of the shipped presets: the YAML files in conf/precision/."""
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml"))


def load_pipeline(name):
    """Read preset `name` from conf/precision/<name>.yaml (values only; behaviour lives here)."""
    names = pipeline_names()
    if name not in names:
        raise ValueError(f"unknown precision pipeline {name!r}; expected one of {names}")
    values = yaml.safe_load((CONF_DIR / f"{name}.yaml").read_text())
    if values.get("name", name) != name:
        raise ValueError(f"conf/precision/{name}.yaml says name: {values['name']!r}; it must be {name!r}")
    unknown = sorted(set(values) - {"name", *STAGES})
    if unknown:
        raise ValueError(f"conf/precision/{name}.yaml has unknown keys {unknown}; expected {['name', *STAGES]}")
    return Pipeline(**{**values, "name": name})
