"""OmegaConf resolvers of the configs under conf/ (`${encodings:}`, `${run_name:...}`), registered on import, and
Hydra's launcher schema-matching notice filtered there too.

harness/__main__.py imports it before Hydra composes, so every process that composes or runs a job has
them: the command line (validation, `--cfg ... --resolve`), Hydra's sweeper, and the launchers' workers
(joblib and submitit unpickle the job function from harness.__main__, which imports this module, before the worker
composes the job's config)."""
import hashlib
import json
import math
import re
import statistics
import warnings
from pathlib import Path

from omegaconf import OmegaConf

from harness import encodings as registry
from harness.paths import CHECKOUT

# conf/hydra/launcher/<name>.yaml holds our values for the launcher plugin's config of the same name, and Hydra 1.3
# validates it against that plugin schema (typed keys, every plugin key overridable). Hydra announces this matching
# as deprecated on every compose, in the sweep's workers too (4 lines per worker); pyproject pins hydra-core < 1.4,
# and tests/test_launchers.py fails if a launcher file stops composing into its plugin's schema.
SCHEMA_MATCHING = r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema"


def quiet_schema_matching():
    warnings.filterwarnings("ignore", message=SCHEMA_MATCHING, category=UserWarning)


quiet_schema_matching()


# The committed reference sweep (`make sweep`'s own runs): their wall times order the encodings longest first,
# so that a sweep's slowest jobs start first instead of finishing it alone on one core (longest processing time
# first, Graham 1969). Absent (an installed wheel), the registry's order.
REFERENCE = CHECKOUT / "results" / "reference"


def wall_times(root=None) -> dict:
    """{encoding: median wall_s of its finished runs under root (default REFERENCE; run dirs named
    ...encoding=<name>...)}."""
    out = {}
    for status in Path(root or REFERENCE).glob("*/status.json"):
        name = dict(p.split("=", 1) for p in status.parent.name.split(",") if "=" in p).get("encoding")
        try:
            wall = json.loads(status.read_text()).get("wall_s")
        except (OSError, ValueError):  # a run dir being written or damaged: no time from it
            continue
        if name and isinstance(wall, (int, float)):
            out.setdefault(name, []).append(float(wall))
    return {k: statistics.median(v) for k, v in out.items()}


def encodings() -> str:
    """Every registered encoding (harness/encodings) as one Hydra sweep value, "stick_breaking,cope,...",
    longest first by the reference sweep's wall times (encodings it has not timed first of all, in registry
    order): a preset's `hydra.sweeper.params.encoding: ${encodings:}` sweeps them all, so a new encoding file
    joins that preset without an edit to it. Read at each resolution, not cached."""
    times = wall_times()
    return ",".join(sorted(registry.ENCODINGS, key=lambda n: -times.get(n, math.inf)))  # stable sort


def run_name(override_dirname: str) -> str:
    """Run dir name from Hydra's override_dirname ('default' when there is none). Deterministic, so a
    rerun finds its dir; '/' cannot nest dirs, so a name that had one gets a hash of the original after the escape
    (`a/b_c` and `a_b/c` stay two dirs), and a long name keeps a prefix + hash (255-byte limit)."""
    name = (override_dirname or "default").replace("/", "_")
    if "/" in (override_dirname or ""):
        name += "-" + hashlib.sha256(override_dirname.encode()).hexdigest()[:8]
    if len(name) > 120:  # the seed stays readable: runs that differ only in it sit side by side
        seed = re.search(r"(?:^|,)(seed=\d+)(?=,|$)", name)
        name = f"{name[:100]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}" + (f",{seed.group(1)}" if seed else "")
    return name


def proxy_rope(key: str, _root_) -> float:
    """`${proxy_rope:base}` (or a turn-counted extension knob: beta_fast, beta_slow, low_freq_factor,
    high_freq_factor): the laptop proxy of the config's proxy.target at its train.seq_len
    (harness.pretrained.proxy; conf/proxy/)."""
    from harness.pretrained import proxy  # transformers is imported only when a GGUF target is read
    if key not in ("base", *proxy.geometry.TURN_KNOBS):
        raise ValueError(f"unknown proxy_rope key {key!r}; expected one of {['base', *proxy.geometry.TURN_KNOBS]}")
    p = _root_.proxy
    return float(proxy.proxy_rope(str(p.target), p.layer_type, int(_root_.train.seq_len))[key])


RESOLVERS = {"encodings": encodings, "run_name": run_name, "proxy_rope": proxy_rope}

for _name, _fn in RESOLVERS.items():
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn)
