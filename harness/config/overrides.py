"""The command line of `python -m harness` before Hydra runs it: HF's names for the rope keys read as the harness's
(`normalise`: encoding.rope_theta is encoding.base, before the run dir is named from the overrides), every job's
overrides (`jobs`, sweeps expanded as the basic sweeper does), their run dirs (`job_dirs`), and a composition error
as one line naming the valid keys or choices (`one_line`, `unknown_key`, `null_parent`). Hydra-side helpers of
harness/__main__.py, which validates and launches."""
import itertools
import re
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, read_write

from harness import config as config_lib
from harness import paths

CONF = str(paths.conf_dir())  # the checkout's conf/, or the copy a wheel ships (harness/paths.py)
MULTIRUN_FLAGS = {"-m", "--multirun"}
# HF's names (rope_parameters / rope_scaling keys, config.json's rope_theta) -> the rope encoding's keys
HF_KEYS = {"rope_theta": "base", "rope_type": "rope_type", "type": "rope_type",
           "partial_rotary_factor": "partial_rotary_factor"}
HF_DICTS = ("rope_scaling", "rope_parameters")  # HF's dicts: their type's own keys are encoding.scaling's


def hydra_value(v):
    """A value in Hydra's override grammar: dicts as {k: v}, lists as [a, b], scalars as themselves."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {hydra_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(hydra_value, v)) + "]"
    return str(v)


def normalise(argv):
    """argv with HF's names for the rope keys as the harness's own: `encoding.rope_theta=X` is `encoding.base=X`
    (a sweep too), and `encoding.rope_scaling={...}` / `encoding.rope_parameters={...}` (HF's dicts) are split into
    encoding.rope_type, encoding.base, encoding.partial_rotary_factor and the type's keys as encoding.scaling. Done
    before Hydra sees the overrides, so the run dir is the one the harness's names give. ValueError (one line) for
    a form that cannot be read so: a sweep or a deletion of a dict, a dict that is not one."""
    out, parser = [], OverridesParser.create()
    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    for arg in argv:
        if "=" in arg and not arg.startswith("-"):  # an override (a flag's value, `--cfg job`, is Hydra's)
            _parsable(arg, parser, multirun)
        m = re.fullmatch(r"([+~]{0,2})encoding\.(\w+)(=.*)?", arg)
        key = m.group(2) if m else None
        if key == "rope_theta":
            out.append(f"{m.group(1)}encoding.base{m.group(3) or ''}")
        elif key in HF_DICTS:
            out += _split(arg, key, parser)
        else:
            out.append(arg)
    return out


def _parsable(arg, parser, multirun):
    """One line naming the key and the quoted form for a value Hydra's override grammar cannot read as one value
    (an '=' or a character outside it: a path with '=', spaces or non-ASCII), or reads as a sweep without -m (a
    comma), instead of the grammar's own message."""
    key, eq, value = arg.partition("=")
    try:
        o = parser.parse_override(arg)
    except Exception:  # noqa: BLE001 - hydra's OverrideParseException (and the lexer's), whatever its class
        raise ValueError(f"{key}: Hydra's override grammar cannot read the value {value!r} as it is; quote it: "
                         f"{key}='{value}' (in a shell, \"{key}='{value}'\")") from None
    if o.is_sweep_override() and not multirun and not key.startswith("hydra"):
        raise ValueError(f"{key}={value} is a sweep (its commas separate values), which runs with -m; for one value "
                         f"holding a comma quote it: {key}='{value}'")


def _split(arg, key, parser):
    """`encoding.rope_parameters={rope_type: yarn, factor: 4}` -> encoding.rope_type=yarn, encoding.scaling={...}."""
    o = parser.parse_override(arg)
    value = None if o.is_sweep_override() or o.is_delete() else o.value()
    if not isinstance(value, dict):
        raise ValueError(f"encoding.{key} (HF's name) is read as encoding.rope_type, encoding.base, "
                         f"encoding.partial_rotary_factor and encoding.scaling, so it must be one dict such as "
                         f"{{rope_type: yarn, factor: 4.0}}; got {arg!r}: set those keys instead")
    split = {HF_KEYS[k]: v for k, v in value.items() if k in HF_KEYS}
    scaling = {k: v for k, v in value.items() if k not in HF_KEYS}
    return [f"encoding.{k}={hydra_value(v)}" for k, v in split.items()] + [f"++encoding.scaling={hydra_value(scaling)}"]


def hf_hint(key, argv):
    """For an unknown key the harness got from an HF name, what the user typed: ' (encoding.rope_theta: ...)'."""
    typed = {"encoding.base": "encoding.rope_theta", "encoding.scaling": "encoding.rope_scaling / rope_parameters"}
    hf = typed.get(key)
    if hf and any(re.match(rf"[+~]{{0,2}}encoding\.({'|'.join(('rope_theta',) + HF_DICTS)})\b", a) for a in argv):
        return f" ({hf}, HF's name, is read as {key}, which this encoding does not take)"
    return ""


def one_line(e: BaseException) -> str:
    """An exception chain as one line (Hydra's multi-line messages joined, whitespace collapsed)."""
    parts, seen = [], e
    while seen is not None:
        text = str(seen).replace("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", "")
        parts.append(re.sub(r"\s*\n\s*", "; ", text.strip()).strip("; "))
        seen = seen.__cause__
    line = " <- ".join(p for p in dict.fromkeys(parts) if p)
    m = re.search(r"Could not find '([^']+)'; Available options in '([^']+)':; (.*?)(?:; Config search path.*)?$", line)
    if m:  # a config group choice: "unknown model 'huge'; expected one of [...]"
        group, choice = m.group(2), m.group(1).rpartition("/")[2]
        return f"unknown {group} {choice!r}; expected one of {m.group(3).split('; ')}"
    return line


def group_choices(argv):
    """The config composed from the command line's group choices alone (encoding=rope, task=kv_recall):
    what its dotted overrides apply to."""
    overrides = [a for a in argv if not a.startswith("-") and "=" in a and "." not in a.split("=", 1)[0]]
    first = [o.split(",")[0] for o in overrides if not o.lstrip("+~").startswith("hydra")]  # a sweep's first value
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("config", overrides=first)


def unknown_key(message: str, argv=(), typed=()):
    """For an unknown key, a clear line naming the valid keys at its parent (in the chosen encoding or task
    when the parent is one: `encoding.bse` lists rope's parameters), and the HF name it came from (typed: the
    command line as given, before `normalise`); else None."""
    m = re.search(r"Key '[^']+' (?:is )?not in .*?full_key: ([\w.]+)", message, re.S)
    if not m:
        return None
    key = m.group(1)
    parent = key.rpartition(".")[0]
    try:
        node = group_choices(argv)
    except Exception:  # noqa: BLE001 - the choices themselves are wrong: fall back to the schema
        node = OmegaConf.structured(config_lib.Config)
    node = OmegaConf.select(node, parent) if parent else node
    if not OmegaConf.is_dict(node):
        return None
    return (f"unknown key {key!r}; valid keys{' in ' + parent if parent else ''}: {list(node.keys())}"
            f"{hf_hint(key, typed or argv)}")


def null_parent(argv):
    """For `a.b.c=v` under a node that is null by default (precision.pipeline), a clear line naming the
    presets that fill it; Hydra only asserts "Unexpected type for root: NoneType". None if not that."""
    overrides = [a for a in argv if not a.startswith("-")]
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        base = compose("config", overrides=[o for o in overrides if "." not in o.split("=", 1)[0]])
    for key in keys:
        parts = key.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if OmegaConf.select(base, parent, default="<absent>") is None:
                group = Path(CONF) / parts[0]
                presets = sorted(f.stem for f in group.glob("*.yaml")) if group.is_dir() else []
                hint = f"; choose one first, {parts[0]}=<one of {presets}>" if presets else ""
                return f"cannot set {key!r}: {parent!r} is null{hint}"
    return None


def _combinations(overrides, sweeper_params):
    """Every job's override list (sweeps expanded), like Hydra's basic sweeper."""
    parser = OverridesParser.create()
    given = {o.key_or_group: o for o in parser.parse_overrides(overrides)}
    params = parser.parse_overrides([f"{k}={v}" for k, v in (sweeper_params or {}).items()])
    merged = {**{o.key_or_group: o for o in params}, **given}
    axes = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
            else [o.input_line] for o in merged.values()]
    return [list(c) for c in itertools.product(*axes)]


def missing_launcher(name: str) -> str:
    """Without its Hydra plugin a launcher file has no `_target_` (Hydra itself would fail late, one job
    at a time). The install line is the one the file's comments give."""
    files = sorted((Path(CONF) / "hydra" / "launcher").glob("*.yaml"))
    usable = [f.stem for f in files
              if OmegaConf.select(compose("config", overrides=[f"hydra/launcher={f.stem}"],
                                          return_hydra_config=True), "hydra.launcher._target_")]
    hint = re.search(r"pip install [^\n]+", (Path(CONF) / "hydra" / "launcher" / f"{name}.yaml").read_text())
    return (f"hydra/launcher={name}: its Hydra plugin is not installed"
            f"{' (' + hint.group(0).strip() + ')' if hint else ''}; usable launchers here: {['basic', *usable]}")


def jobs_of(argv):
    """(the first job's config with its hydra node, every job's override list) of this command line;
    inside an initialized config dir. The sweeper's params are resolved (`${encodings:}`, `${seeds}`)."""
    overrides = [a for a in argv if not a.startswith("-")]
    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    parser = OverridesParser.create()
    first = [o.input_line if not o.is_sweep_override() else
             f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}"
             for o in parser.parse_overrides(overrides)]
    cfg = compose("config", overrides=first, return_hydra_config=True)
    params = OmegaConf.select(cfg, "hydra.sweeper.params")
    return cfg, _combinations(overrides, OmegaConf.to_container(params, resolve=True) if multirun and params else None)


def jobs(argv):
    """Every job's override list of this command line, in the order the basic sweeper runs them."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return jobs_of(normalise(argv))[1]


def overrides_dirname(overrides, exclude_keys, item_sep, kv_sep) -> str:
    """hydra.job.override_dirname of a job's parsed overrides (hydra.core.override_parser Overrides), as Hydra forms
    it: their input lines less the excluded keys, sorted, joined by item_sep, every '=' written as kv_sep (Hydra 1.3's
    rule, written here so no private Hydra module is imported; test_resume checks the dirs against Hydra's own)."""
    lines = sorted(o.input_line for o in overrides if o.key_or_group not in exclude_keys)
    return item_sep.join(lines).replace("=", kv_sep)


def job_dirs(cfg, all_jobs, multirun):
    """Each job's run dir as Hydra will name it (hydra.run.dir, or hydra.sweep.dir / hydra.sweep.subdir), from the
    job's overrides and the override_dirname settings, resolved with a stand-in HydraConfig."""
    od = cfg.hydra.job.config.override_dirname
    parser = OverridesParser.create()
    instance = HydraConfig.instance()
    saved = instance.cfg
    instance.set_config(cfg)
    try:
        out = []
        for job in all_jobs:
            app = [o for o in parser.parse_overrides(job) if not o.key_or_group.startswith("hydra")]
            if multirun:  # the basic sweeper hands each job its overrides re-rendered (`false` -> `False`)
                app = parser.parse_overrides([f"{o.get_key_element()}={o.get_value_element_as_str()}" for o in app])
            with read_write(instance.cfg.hydra.job):
                instance.cfg.hydra.job.override_dirname = overrides_dirname(
                    app, list(od.exclude_keys), od.item_sep, od.kv_sep)
            if multirun:
                out.append(Path(OmegaConf.select(cfg, "hydra.sweep.dir")) / OmegaConf.select(cfg, "hydra.sweep.subdir"))
            else:
                out.append(Path(OmegaConf.select(cfg, "hydra.run.dir")))
        return out
    finally:
        instance.cfg = saved
