"""The configuration's numbers (harness/config/ranges.py): one table of ranges covers every numeric field of every
section and every numeric constructor parameter of every registered encoding, and every out-of-range, NaN or
infinite value is refused by the validation the CLI runs (harness.__main__.validate) in one line naming the key,
the value and the valid range. Relations live with their section or encoding and are refused the same way."""
import dataclasses
import inspect
import math
import typing

import pytest

from harness import config as config_lib
from harness import encodings
from harness.__main__ import validate
from harness.config import ranges
from harness.config.ranges import RANGES, Range
from harness.model import from_config


def sections(cls=config_lib.Config, prefix=""):
    """{prefix: dataclass} of the schema, found from Config's fields (a new section is covered without an edit)."""
    out = {prefix: cls}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        inner = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        if dataclasses.is_dataclass(inner[0]):
            out.update(sections(inner[0], ranges.key_of(prefix, f.name)))
    return out


SECTIONS = sections()
SECTION_KEYS = sorted(RANGES)


def numeric_params(name):
    """An encoding's constructor parameters that have a Range (every numeric one: test below)."""
    return list(encodings.ranges(name))


def refused(*overrides):
    """The one-line message the CLI's validation gives for these overrides (it must refuse them)."""
    with pytest.raises(ValueError) as e:
        validate(list(overrides))
    message = str(e.value)
    assert "\n" not in message, message
    return message


# --- the table covers the schema and the encodings, and nothing else

def test_sections_are_found():
    assert {"", "model", "task", "train", "eval", "eval.extension", "eval.effective_length", "precision",
            "precision.pipeline", "wandb", "pretrained", "proxy"} == set(SECTIONS)


def test_every_numeric_field_of_every_section_has_a_range():
    hints = {ranges.key_of(p, f.name): typing.get_type_hints(cls)[f.name]
             for p, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
    numeric = {k for k, h in hints.items() if ranges.numeric_kind(h) is not None}
    assert numeric - set(RANGES) == set(), "numeric fields without a range in harness/config/ranges.py"
    assert set(SECTION_KEYS) <= set(hints), f"ranges of no field: {set(SECTION_KEYS) - set(hints)}"
    for key in numeric:  # the entry's shape is the field's: int or float, list or not, null or not
        kind, is_list, optional = ranges.numeric_kind(hints[key])
        r = RANGES[key]
        assert (r.integer, bool(r.entries), bool(r.null)) == (kind is int, is_list, optional), key


def test_every_numeric_encoding_parameter_has_a_range():
    for name, cls in encodings.ENCODINGS.items():
        for p in inspect.signature(cls).parameters.values():
            if p.name in encodings.MODEL_DIMS or isinstance(p.default, bool):
                continue
            if isinstance(p.default, (int, float)):
                r = encodings.ranges(name).get(p.name)
                assert r is not None, (f"{name}.{p.name}: no Range (declare it in the encoding's RANGES, or in "
                                       f"harness/encodings/_params.py SHARED for a name several encodings take)")
                assert r.integer == isinstance(p.default, int), f"{name}.{p.name}"
    from harness.encodings import _params
    taken = {p for name in encodings.ENCODINGS for p in encodings.parameters(name)}
    declared = set(_params.SHARED) | {k for c in encodings.ENCODINGS.values() for k in vars(c).get("RANGES", {})}
    assert not declared - taken, f"ranges of parameters no encoding takes: {declared - taken}"
    shared = {k for k in _params.SHARED if sum(k in encodings.parameters(n) for n in encodings.ENCODINGS) < 2}
    assert not shared, f"SHARED names one encoding takes (declare them in its file): {shared}"


def test_defaults_lie_in_their_ranges():
    for cls in SECTIONS.values():
        cls()  # its __post_init__ checks every field against the table
    for name, cls in encodings.ENCODINGS.items():
        for p, r in encodings.ranges(name).items():
            ranges.check(f"encoding.{p}", inspect.signature(cls).parameters[p].default, r)


# --- every field and every encoding parameter, out of range, NaN and infinite: refused by the CLI's validation

def bad_values(r: Range):
    """Values r refuses, as override text: below and above the bounds, NaN and +-inf where floats may go."""
    step = 1 if r.integer else 0.5
    out = []
    if r.lo > -math.inf:
        out.append(r.lo if r.lo_open else r.lo - step)
    if r.hi < math.inf:
        out.append(r.hi if r.hi_open else r.hi + step)
    if not r.integer:
        out += ["nan", "inf", "-inf"]
    out = [int(v) if r.integer else float(v) if not isinstance(v, str) else v for v in out]
    return [f"[{v}]" for v in out] + (["[]"] if r.nonempty else []) if r.entries else [str(v) for v in out]


@pytest.mark.parametrize("key", SECTION_KEYS)
def test_every_field_out_of_range_is_one_line_naming_it(key):
    first = ["pretrained=smollm2"] if key.startswith("pretrained.") else []
    for value in bad_values(RANGES[key]):
        message = refused(*first, f"{key}={value}")
        assert message.startswith(f"{key} must ") and message.endswith(f"got {value}"), (key, value, message)


# Each numeric encoding parameter once, under the first encoding (registry order) that takes it: the refusal
# (ranges.check_encoding, from Config.__post_init__) checks every key of the encoding dict against RANGES by the
# key alone, before any encoding is built, so encoding.base=nan under rope, xpos or rope_rf is one code path; the
# 55 (encoding, parameter) pairs were 29 parameters checked again under other names (about 30 CPU-s of Hydra
# composes). test_every_numeric_encoding_parameter_has_a_range covers every encoding's parameters.
FIRST_TAKER = {}
for _name in encodings.ENCODINGS:
    for _p in numeric_params(_name):
        FIRST_TAKER.setdefault(_p, _name)


@pytest.mark.parametrize("param", sorted(FIRST_TAKER))
def test_every_encoding_parameter_nan_or_inf_is_refused_naming_it(param):
    for value in ("nan", "inf", "-inf"):
        message = refused(f"encoding={FIRST_TAKER[param]}", f"++encoding.{param}={value}")
        assert message.startswith(f"encoding.{param} must ") and message.endswith(f"got {value}"), message


@pytest.mark.parametrize("param", sorted(p for p in FIRST_TAKER
                                         if encodings.ranges(FIRST_TAKER[p])[p].lo > -math.inf))
def test_every_encoding_parameter_below_its_range_is_refused_naming_it(param):
    (value,) = bad_values(encodings.ranges(FIRST_TAKER[param])[param])[:1]
    assert refused(f"encoding={FIRST_TAKER[param]}", f"++encoding.{param}={value}").startswith(
        f"encoding.{param} must "), param


def test_numbers_nested_in_an_encoding_parameter_are_finite():
    assert refused("encoding=rope", "encoding.rope_type=linear", "+encoding.scaling.factor=nan") == \
        "encoding.scaling.factor must be finite, got nan"
    assert refused("encoding=mrope", "encoding.sections=[2,3,nan]").startswith("encoding.sections must be a list")


def test_types_a_hurried_user_gets_wrong_in_an_encoding():
    assert refused("encoding=shaw", "encoding.max_distance=2.5") == \
        "encoding.max_distance must be an integer >= 1, got 2.5"
    assert refused("encoding=learned", "encoding.max_len=true") == "encoding.max_len must be an integer >= 1, got True"
    assert refused("encoding=rope", "encoding.base=true") == "encoding.base must be a number > 0 and finite, got True"
    assert refused("encoding=t5", "encoding.bidirectional=2") == "encoding.bidirectional must be true or false, got 2"


def test_task_params_are_finite():
    assert "nan" in refused("task=flip_flop", "task.params.p_ignore=nan")
    with pytest.raises(ValueError, match=r"^task\.params\.p_ignore must be finite, got inf$"):
        config_lib.TaskConfig(name="flip_flop", params={"p_ignore": math.inf})


# --- the messages existing callers read keep their wording

@pytest.mark.parametrize("overrides,message", [
    (["train.steps=-1"], "train.steps must be >= 1, got -1"),
    (["train.lr=-1e-3"], "train.lr must be > 0 and finite, got -0.001"),
    (["eval.lens=[16,0]"], "eval.lens must be a non-empty list of lengths >= 1"),
    (["task.depths=[0.5,1.5]"], "task.depths must lie in [0, 1], got [0.5, 1.5]"),
    (["eval.effective_length.relative=1.5"], "eval.effective_length.relative must be a number in (0, 1]"),
    (["eval.sliding_max_tokens=0"], "eval.sliding_max_tokens must be >= 1 or null"),
    (["eval.attention_samples=-1"], "eval.attention_samples must be >= 0 (0 = off), got -1"),
    (["eval.protocol=sliding", "eval.stride=0"], "eval.stride must be >= 1 or null (= train.seq_len // 2), got 0"),
    (["train.warmup=-5"], "train.warmup must be >= 0 (0 = no warm-up), got -5"),
    (["threads=-1"], "threads must be >= 0 (0 = torch's default"),
    (["seed=-1"], "seed must be an integer in [0, 2**32 - 1]"),
    (["seed=4294967296"], "seed must be an integer in [0, 2**32 - 1]"),
    (["train.max_position=99999999999999999999"], "train.max_position must be at most 2**63 - 1 (int64)"),
    (["eval.extension.factor=inf"], "eval.extension.factor must be 'auto' or a number >= 1 and finite, got inf"),
])
def test_messages(overrides, message):
    assert refused(*overrides).startswith(message)


def test_threads_is_checked_before_the_job_reads_it():
    """harness/__main__.py reads c.threads after config_lib.to_config(cfg) (main) and after validate (the CLI):
    both run the schema's check."""
    with pytest.raises(ValueError, match="^threads must be >= 0"):
        config_lib.from_dict({"threads": -1})
    assert config_lib.from_dict({"threads": 0}).threads == 0


def test_python_callers_get_the_same_checks():
    with pytest.raises(ValueError, match=r"^train\.lr must be > 0 and finite, got nan$"):
        config_lib.TrainConfig(lr=math.nan)
    with pytest.raises(ValueError, match=r"^train\.steps must be an integer >= 1, got True$"):
        config_lib.TrainConfig(steps=True)
    with pytest.raises(ValueError, match=r"^eval\.extension\.beta_slow must be > 0 and finite, got inf$"):
        config_lib.ExtensionConfig(beta_slow=math.inf)
    with pytest.raises(ValueError, match=r"^pretrained\.kl_bar must be > 0 and finite, got nan$"):
        config_lib.PretrainedConfig(kl_bar=math.nan)


# --- relations

@pytest.mark.parametrize("name,knob,top", [("local_global", "local_layers", 3), ("rnope_swa", "rope_layers", 3),
                                           ("irope", "nope_every", 4)])
def test_a_per_layer_policy_needs_the_layers_its_cycle_ends_in(name, knob, top):
    """local_global's global layer, rnope_swa's NoPE layer, irope's NoPE layer come last in the cycle: a model
    with fewer layers than the cycle never has them. n_layers 4: the largest knob that keeps them is `top`."""
    validate([f"encoding={name}", f"encoding.{knob}={top}", "model.n_layers=4"])
    message = refused(f"encoding={name}", f"encoding.{knob}={top + 1}", "model.n_layers=4")
    assert message.startswith(f"{name} {knob}={top + 1} ") and "model.n_layers=4" in message
    encodings.build(name, head_dim=16, **{knob: top + 1})  # built without the model's depth: nothing to compare


def test_t5_max_distance_beyond_its_exact_buckets():
    validate(["encoding=t5", "encoding.max_distance=17"])
    assert refused("encoding=t5", "encoding.max_distance=16").startswith("t5 max_distance=16 must exceed its exact "
                                                                         "range, num_buckets // 2 = 16")
    assert refused("encoding=t5", "encoding.bidirectional=true", "encoding.num_buckets=3").startswith(
        "t5 num_buckets=3 leaves no exact bucket")


def test_extension_relations_only_for_the_types_that_read_them():
    assert refused("eval.extension.types=[llama3]", "eval.extension.low_freq_factor=8").startswith(
        "eval.extension.high_freq_factor 4.0 must be > low_freq_factor 8.0")
    assert refused("eval.extension.types=[yarn]", "eval.extension.beta_fast=0.5").startswith(
        "eval.extension.beta_fast 0.5 must be >= beta_slow 1.0")
    validate(["eval.extension.types=[linear]", "eval.extension.low_freq_factor=8", "eval.extension.beta_fast=0.5"])


def test_multiples_may_be_empty_only_when_lens_are_given():
    assert refused("eval.multiples=[]").startswith("eval.multiples must be a non-empty list of multiples >= 1")
    validate(["eval.multiples=[]", "eval.lens=[64]"])


def test_model_parameters_is_the_model_s_count_without_the_encoding():
    for m in (config_lib.ModelConfig(), config_lib.ModelConfig(n_layers=3, d_model=48, n_heads=3, head_dim=8,
                                                              mlp_ratio=2)):
        net = from_config(m, {"name": "nope"})
        assert config_lib.model_parameters(m) == sum(p.numel() for p in net.parameters())


def test_a_model_beyond_this_machine_s_memory_is_refused_before_it_is_built(monkeypatch):
    monkeypatch.setattr(config_lib, "machine_memory", lambda: 2 ** 30)  # 1 GiB
    # head_dim given: from_dict merges onto the default ModelConfig, whose head_dim is already resolved (32)
    big = {"model": {"d_model": 2048, "n_heads": 16, "head_dim": 128, "n_layers": 8}}  # 4e8 parameters: 1.5 GiB
    with pytest.raises(ValueError, match=r"^model\.d_model=2048, n_heads=16, head_dim=128, n_layers=8, "
                                         r"mlp_ratio=4: 4\.03e\+08 parameters: 6\.01 GiB \(16 bytes each: .*\), "
                                         r"but this machine has 1 GiB of memory$"):
        config_lib.from_dict(big)
    with pytest.raises(ValueError, match=r"1\.5 GiB \(4 bytes each: fp32 weights, built on the CPU by validation\)"):
        config_lib.from_dict({**big, "device": "cuda"})
    config_lib.from_dict({"model": {"d_model": 512, "n_heads": 8, "head_dim": 64, "n_layers": 8}})  # 0.4 GiB
    monkeypatch.setattr(config_lib, "machine_memory", lambda: None)  # an OS that does not say: no check
    config_lib.from_dict(big)


# --- lm-eval's stride model_arg: the schema's range for eval.stride

def test_lm_eval_stride_is_checked_like_eval_stride():
    from harness.lmeval.model import HarnessLM
    cfg = config_lib.from_dict({"model": {"n_layers": 1, "d_model": 32, "n_heads": 2}, "train": {"seq_len": 16},
                                "wandb": {"mode": "disabled"}})
    net = from_config(cfg.model, cfg.encoding)
    for bad in (0, -4, 2.5, True):
        with pytest.raises(ValueError, match=rf"^stride must be .*>= 1 or null \(= the run's eval.stride, else "
                                             rf"train_len // 2\), got {bad!r}$"):
            HarnessLM(model=net, config=cfg, protocol="sliding", stride=bad, progress=False)

    def lm(stride, c=cfg):
        return HarnessLM(model=net, config=c, protocol="sliding", stride=stride, progress=False)
    assert (lm(None).stride, lm(3).stride, lm(100).stride) == (8, 3, 16)  # default train_len // 2; at most the window
    with_stride = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, stride=4))
    assert lm(None, with_stride).stride == 4
