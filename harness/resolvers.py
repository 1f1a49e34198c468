"""OmegaConf resolvers of the configs under conf/, registered when this module is imported.

harness/__main__.py imports it before Hydra composes, so every process that composes or runs a job has
them: the command line (validation, `--cfg ... --resolve`), Hydra's sweeper, and the launchers' workers
(joblib and submitit unpickle the job function from harness.__main__, which imports this module)."""
from omegaconf import OmegaConf

from harness import encodings as registry


def encodings() -> str:
    """Every registered encoding (harness/encodings, in registry order) as one Hydra sweep value,
    "alibi,fire,...": a preset's `hydra.sweeper.params.encoding: ${encodings:}` sweeps them all, so a
    new encoding file joins that preset without an edit to it. Read at each resolution, not cached."""
    return ",".join(registry.ENCODINGS)


RESOLVERS = {"encodings": encodings}

for _name, _fn in RESOLVERS.items():
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)
