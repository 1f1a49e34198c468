"""The shipped library adapters (harness/conformance/libraries/): each runs against a tiny fake of its library
(tests/conformance_fakes/, the real call signatures) where CI has none, and against the real one where it is
importable (transformers and rotary-embedding-torch are in the dev extra)."""
import importlib.util
import pathlib
import sys

import pytest
import torch

from harness.conformance import adapters, libraries, run
from harness.conformance.__main__ import main

FAKES = pathlib.Path(__file__).with_name("conformance_fakes")
# library -> (the fake's top-level packages, rope_types the fake has, calling overrides: the fakes run on torch)
FAKED = {
    "torchtune": (["torchtune"], ["default"], {}),
    "litgpt": (["litgpt"], ["default", "linear"], {}),
    "megatron-core": (["megatron"], ["default", "linear"], {}),
    "megatron-core-apply": (["megatron"], ["yarn", "llama3"], {}),
    "x-transformers": (["x_transformers"], ["default", "linear", "ntk"], {}),
    "local-attention": (["local_attention"], ["default"], {}),
    "liger-kernel": (["liger_kernel"], ["default", "yarn", "llama3"], {}),
    "keras-hub": (["keras", "keras_hub"], ["default", "linear"], {}),
    "llama-models": (["llama_models"], ["default"], {}),
    "llama-models-apply": (["llama_models"], ["llama3", "yarn"], {}),
    "mlx": (["mlx"], ["default", "linear"], {"array": "torch"}),
    "mlx-traditional": (["mlx"], ["default", "linear"], {"array": "torch"}),
    "gemma": (["gemma"], ["default", "proportional"], {"array": "torch"}),
    "timm": (["timm"], ["default"], {}),
    "mlx-lm": (["mlx", "mlx_lm"], ["default", "linear"], {"array": "torch"}),
    "mlx-lm-deepseek-v2": (["mlx", "mlx_lm"], ["default"], {"array": "torch"}),
    "mistral-inference": (["mistral_inference"], ["default"], {}),
    "mistral-inference-apply": (["mistral_inference"], ["default", "yarn"], {}),
    "equinox": (["equinox", "jax"], ["default"], {"array": "torch"}),
    "olmo-core": (["olmo_core"], ["default"], {}),
    "olmo-core-complex": (["olmo_core"], ["default"], {}),
    "vllm": (["vllm"], ["default", "linear"], {}),
}


TOP = {p for v in FAKED.values() for p in v[0]} | {"_rot"}


@pytest.fixture
def fakes(monkeypatch):
    """The fakes first on sys.path; afterwards none of them stays imported (einops, for one, picks backends by
    what sys.modules holds: a fake keras or mlx left there breaks the real rotary-embedding-torch)."""
    for name in [n for n in sys.modules if n.split(".")[0] in TOP]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(FAKES))
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in TOP]:
        del sys.modules[name]


def _run(name, types, **over):
    lib = libraries.LIBRARIES[name]
    kw = {**lib.calling, **over}
    conv, layout = kw.pop("convention"), kw.pop("layout", None)
    return run.run(adapters.resolve(lib.apply, "--apply"), conv, layout, "fp32", rope_types=types, **kw)


@pytest.mark.parametrize("name", sorted(FAKED))
def test_adapter_passes_against_its_fake(fakes, name):
    _, types, over = FAKED[name]
    rows, msgs = _run(name, types, **over)
    results = {r["result"] for r in rows if name != "timm" or "-p1-" in r["case"]}  # timm has no partial rotary
    assert results <= {"pass", "skip"} and "pass" in results, [m for m in msgs if "skip" not in m][:3]


def test_a_type_the_library_lacks_is_a_skip_naming_what_it_has(fakes):
    rows, _ = _run("x-transformers", ["yarn"])
    assert {r["result"] for r in rows} == {"skip"}
    assert rows[0]["bug"].startswith("x-transformers has no rope_type 'yarn' (it has ['default', 'linear', 'ntk'])")


def test_every_library_is_covered_here():
    real = {"transformers", "transformers-deepseek-v3", "transformers-gptj", "transformers-cohere", "transformers-glm",
            "transformers-llama4", "transformers-qwen2-vl", "transformers-gpt-oss", "rotary-embedding-torch",
            "rotary-embedding-torch-freqs"}
    assert set(libraries.LIBRARIES) == set(FAKED) | real


@pytest.mark.parametrize("name, types", [("transformers", ["default", "longrope"]),
                                         ("transformers-gptj", ["default"]),
                                         ("transformers-cohere", ["default", "yarn"]),
                                         ("transformers-glm", ["default", "llama3"]),
                                         ("transformers-llama4", ["llama3"]),
                                         ("transformers-qwen2-vl", ["default", "yarn"]),
                                         ("transformers-gpt-oss", ["yarn"]),
                                         ("rotary-embedding-torch", ["default", "linear"]),
                                         ("rotary-embedding-torch-freqs", ["default", "ntk", "linear"])])
def test_real_libraries_of_the_dev_extra(name, types):
    rows, _ = _run(name, types)
    assert {r["result"] for r in rows} - {"skip"} == {"pass"}  # skips: GPT-J's base 5e5, partial cases


@pytest.mark.parametrize("name", ["transformers-gptj", "transformers-cohere", "transformers-glm",
                                  "transformers-llama4"])
def test_hf_interleaved_models_fail_when_declared_half_pairs(name):
    """GPT-J's rotate_every_two, Cohere's and GLM's rotate_half and Llama 4's complex pairs are (2j, 2j + 1): checked
    as half pairs they fail, so their passes say which pairing they use."""
    rows, _ = _run(name, ["default"], layout=None)
    assert "FAIL" in {r["result"] for r in rows}


def test_gpt_oss_fails_when_declared_interleaved_pairs():
    """GPT-OSS chunks the head into halves: checked as interleaved pairs it fails."""
    rows, _ = _run("transformers-gpt-oss", ["default"], layout="interleaved")
    assert "FAIL" in {r["result"] for r in rows}


def test_qwen2_vl_fails_when_one_m_rope_section_sees_other_positions(monkeypatch):
    """The text path holds only while every section of the head gets the token's index: width ids halved, it fails."""
    import torch
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding
    real = Qwen2VLRotaryEmbedding.forward
    monkeypatch.setattr(Qwen2VLRotaryEmbedding, "forward", lambda self, x, ids: real(self, x, torch.stack([ids, ids,
                                                                                                          ids // 2])))
    rows, _ = _run("transformers-qwen2-vl", ["default"])
    assert "FAIL" in {r["result"] for r in rows}


def test_library_list_and_a_missing_library_are_one_line(capsys):
    assert main(["--library", "list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}: " in out for name in libraries.LIBRARIES) and "rope_types" in out
    if importlib.util.find_spec("torchtune") is None:
        assert main(["--library", "torchtune"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install torchtune" in err, err


def test_cli_library_runs_in_the_worker(capsys):
    assert main(["--library", "transformers", "--rope-type", "yarn", "--dtype", "bf16"]) == 0
    assert "6 pass, 0 FAIL, 0 error, 0 skip of 6 checks" in capsys.readouterr().out


def test_megatron_cpu_device_answers_cpu_inside_and_restores_after_an_exception():
    """megatron's get_emb places its frequencies on torch.cuda.current_device(); on a CPU machine the adapter answers
    "cpu" inside the block only, and puts the real function back even when the block raises."""
    from harness.conformance.libraries.megatron import cpu_device
    before = torch.cuda.current_device
    with pytest.raises(RuntimeError, match="inside"):
        with cpu_device():
            if not torch.cuda.is_available():
                assert torch.cuda.current_device() == "cpu"
            raise RuntimeError("inside")
    assert torch.cuda.current_device is before


def test_mlx_lm_and_vllm_longrope_take_the_models_max_position():
    """mlx-lm's SuScaledRoPE and vLLM's Phi3LongRoPE derive the attention factor from max_position_embeddings /
    original (Phi-3-128k's config); the adapter hands them factor * original, not the call's length."""
    from harness.conformance.libraries.mlx_lm import scaling_config
    rope = {"rope_type": "longrope", "rope_theta": 1e4, "head_dim": 64, "partial_rotary_factor": 1.0, "factor": 16.0,
            "original_max_position_embeddings": 8192, "short_factor": [1.0], "long_factor": [2.0],
            "max_position_embeddings": 8192}
    cfg, max_pos = scaling_config(rope)
    assert max_pos == 131072 and cfg == {"rope_type": "longrope", "original_max_position_embeddings": 8192,
                                         "short_factor": [1.0], "long_factor": [2.0]}
    assert scaling_config({**rope, "rope_type": "default"}) == (None, 8192)


def test_equinox_takes_dense_positions_only(fakes):
    """eqx.nn.RotaryPositionalEmbedding has no positions argument (a call rotates 0..L-1): sampled positions are an
    error naming --positions dense, never a silent pass."""
    rows, msgs = _run("equinox", ["default"], array="torch", positions="sampled")
    assert {r["result"] for r in rows} == {"error"} and any("--positions dense" in m for m in msgs), msgs[:2]
