"""The geometry-matched proxy (harness.rope.geometry, harness.pretrained.proxy, conf/proxy/): the critical dimension
against Liu et al.'s published value and hand computation for SmolLM2 and Gemma 3, the proxy's base read from the
target's own config, the turn-counted knobs marking the same share of the head on both sides, and the one-line
refusals."""
import json
import math
import subprocess
import sys

import pytest

from harness.pretrained import proxy
from harness.rope import geometry
from tests.tiny_runs import ROOT


def test_critical_dim_of_llama2_is_liu_et_als_92():
    # Liu et al. 2023, "Scaling Laws of RoPE-based Extrapolation" (arXiv 2310.05209), §3.3: for Llama 2 (base 10000,
    # head_dim 128, trained context 4096) the critical dimension d_extra = 2 ceil(64 log_10000(4096 / 2π)) = 92.
    assert geometry.critical_dim(128, 10000.0, 4096) == 92


# Hand computation, written out: c = ln(T / 2π) / ln(base), d_extra = 2 ceil(d/2 · c).
# SmolLM2-135M (HuggingFaceTB/SmolLM2-135M config.json: rope_theta 100000, head_dim 576 / 9 = 64,
#   max_position_embeddings 8192): ln(1303.80) / ln(1e5) = 7.1730 / 11.5129 = 0.62304; 32 c = 19.94 -> 40 of 64.
# Gemma 3 270M (google/gemma-3-270m config.json: head_dim 256, rope_theta 1e6 for full_attention layers,
#   rope_local_base_freq 1e4 for sliding_attention layers, sliding_window 512, max_position_embeddings 32768):
#   global: ln(5215.19) / ln(1e6) = 8.5593 / 13.8155 = 0.61954; 128 c = 79.30 -> 160 of 256;
#   sliding (span = the 512-token window): ln(81.487) / ln(1e4) = 4.4004 / 9.2103 = 0.47777; 128 c = 61.15 -> 124.
HAND = [(64, 1e5, 8192, 0.62304, 40), (256, 1e6, 32768, 0.61954, 160), (256, 1e4, 512, 0.47777, 124)]


@pytest.mark.parametrize("dims, base, span, fraction, critical", HAND)
def test_critical_dim_by_hand(dims, base, span, fraction, critical):
    assert geometry.critical_fraction(base, span) == pytest.approx(fraction, abs=1e-5)
    assert geometry.critical_dim(dims, base, span) == critical


def _smollm2():
    try:
        return proxy.target_config("smollm2")
    except ValueError as e:  # make test installs it; a bare checkout without the pretrained extra does not
        pytest.skip(str(e))


def test_smollm2s_own_config_gives_40_of_64():
    base, span, dims = proxy.target_rope(_smollm2())
    assert (base, span, dims) == (1e5, 8192, 64)
    assert geometry.critical_dim(dims, base, span) == 40


def test_gemma3s_own_config_per_layer_type():
    try:
        cfg = proxy.target_config("gemma3")
    except ValueError as e:  # make pretrained installs Gemma 3 (253 MB); make test does not
        pytest.skip(str(e))
    got = {lt: proxy.target_rope(cfg, lt) for lt in ("full_attention", "sliding_attention")}
    assert got == {"full_attention": (1e6, 32768, 256), "sliding_attention": (1e4, 512, 256)}
    assert [geometry.critical_dim(d, b, s) for b, s, d in got.values()] == [160, 124]


def test_matched_base_puts_the_proxy_at_the_targets_fraction():
    for dims, base, span, _, critical in HAND:
        b = geometry.matched_base(64, geometry.critical_fraction(base, span))
        assert geometry.critical_fraction(b, 64) == pytest.approx(geometry.critical_fraction(base, span), rel=1e-12)
        # the same share of the head has turned: 40/64 -> 20/32, 160/256 -> 20/32, 124/256 -> 16/32
        assert geometry.critical_dim(32, b, 64) / 32 == pytest.approx(critical / dims, abs=1 / 32)


def test_carried_turns_mark_the_same_head_fraction():
    # A threshold of r turns inside the context marks head fraction x = c - log_base(r) (YaRN's find_correction_dim,
    # Peng et al. 2023 eq. 17, up to its 2π and d/2 factors); carried, it marks the same x at the proxy.
    c = geometry.critical_fraction(1e5, 8192)
    p = geometry.proxy(1e5, 8192, 64, dict(beta_fast=32.0, beta_slow=1.0, high_freq_factor=4.0, factor=2.0))
    assert "factor" not in p  # not counted in turns: the factor is the same at both scales
    for k, r in (("beta_fast", 32.0), ("beta_slow", 1.0), ("high_freq_factor", 4.0)):
        x_target = c - math.log(r) / math.log(1e5)
        x_proxy = c - math.log(p[k]) / math.log(p["base"])
        assert x_proxy == pytest.approx(x_target, abs=1e-12)
    assert p["beta_slow"] == 1.0  # one turn stays one
    assert geometry.carried_turns(32.0, 1e4, 1e4) == pytest.approx(32.0)


def _config_json(tmp_path, name, theta, ctx=4096, head_dim=64):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 8 * head_dim,
        "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2, "intermediate_size": 64,
        "vocab_size": 256, "max_position_embeddings": ctx, "rope_theta": theta}))
    return d


def _composed_base(*overrides):
    """encoding.base as the entry point composes it (in-process: the resolver is what a run resolves)."""
    from hydra import compose, initialize_config_dir

    from harness import config as config_lib
    from harness.__main__ import CONF
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return float(config_lib.to_config(compose("config", overrides=list(overrides))).encoding["base"])


def test_the_proxy_base_comes_from_the_targets_config(tmp_path):
    # two checkpoints that differ only in rope_theta give two bases, each the formula's for its own config
    got = [_composed_base("proxy=smollm2", f"proxy.target={_config_json(tmp_path, n, theta)}", "train.seq_len=64")
           for n, theta in (("a", 1e4), ("b", 5e5))]
    want = [geometry.matched_base(64, geometry.critical_fraction(theta, 4096)) for theta in (1e4, 5e5)]
    assert got == pytest.approx(want, rel=1e-12)
    assert got[0] != pytest.approx(got[1])
    # and from the train length: the same target at 128 tokens needs another base
    assert _composed_base("proxy=smollm2", f"proxy.target={tmp_path / 'a'}", "train.seq_len=128") == pytest.approx(
        geometry.matched_base(128, geometry.critical_fraction(1e4, 4096)), rel=1e-12)


def test_an_unknown_target_is_one_line_before_any_work(tmp_path):
    out = subprocess.run([sys.executable, "-m", "harness", "proxy=smollm2", "proxy.target=no_such_model",
                          f"out={tmp_path}", "wandb.mode=disabled"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown proxy.target 'no_such_model'; expected one of ['gemma3', 'smollm2']" in lines[0]
    assert not (tmp_path / "runs").exists()  # refused before any work


@pytest.mark.parametrize("overrides, expected", [
    (["eval.extension.types=[bogus]"], "unknown eval.extension.types entry 'bogus'; expected one of ['linear', 'ntk', "
                                       "'dynamic', 'yarn', 'llama3', 'resonance_yarn']"),
    (["eval.extension.factors=[2,0.5]"], "eval.extension.factors"),
])
def test_bad_extension_knobs_are_refused_in_one_line(overrides, expected):
    from harness.__main__ import validate
    with pytest.raises(ValueError) as e:
        validate(overrides)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_a_per_layer_type_target_needs_its_layer_type():
    cfg = {"max_position_embeddings": 32768, "sliding_window": 512, "head_dim": 256, "hidden_size": 640,
           "num_attention_heads": 4, "model_type": "gemma3_text",
           "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    with pytest.raises(ValueError, match=r"expected one of \['full_attention', 'sliding_attention'\]"):
        proxy.target_rope(cfg, None)
    assert proxy.target_rope(cfg, "sliding_attention") == (1e4, 512, 256)
