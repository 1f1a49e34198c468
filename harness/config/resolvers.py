"""OmegaConf resolvers of the configs under conf/ (`${encodings:}`, `${run_name:...}`), registered on import.

harness/__main__.py imports it before Hydra composes, so every process that composes or runs a job has
them: the command line (validation, `--cfg ... --resolve`), Hydra's sweeper, and the launchers' workers
(joblib and submitit unpickle the job function from harness.__main__, which imports this module)."""
import hashlib
import re

from omegaconf import OmegaConf

from harness import encodings as registry


def encodings() -> str:
    """Every registered encoding (harness/encodings, in registry order) as one Hydra sweep value,
    "alibi,fire,...": a preset's `hydra.sweeper.params.encoding: ${encodings:}` sweeps them all, so a
    new encoding file joins that preset without an edit to it. Read at each resolution, not cached."""
    return ",".join(registry.ENCODINGS)


def run_name(override_dirname: str) -> str:
    """Run dir name from Hydra's override_dirname ('default' when there is none). Deterministic, so a
    rerun finds its dir; '/' cannot nest dirs, and a long name keeps a prefix + hash (255-byte limit)."""
    name = (override_dirname or "default").replace("/", "_")
    if len(name) > 120:  # the seed stays readable: runs that differ only in it sit side by side
        seed = re.search(r"(?:^|,)(seed=\d+)(?=,|$)", name)
        name = f"{name[:100]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}" + (f",{seed.group(1)}" if seed else "")
    return name


RESOLVERS = {"encodings": encodings, "run_name": run_name}

for _name, _fn in RESOLVERS.items():
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)
