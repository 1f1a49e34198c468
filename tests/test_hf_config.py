"""HF configs in and out for the `rope` encoding (`harness/hf/`), checked against transformers itself.

For each model family, the rope part of its hub config.json (literal dicts below, each citing its repo id; nothing is
downloaded) goes three ways: through `rope_from_hf` into our encoding, through the model's HF config class into its
RotaryEmbedding (`inv_freq`, `attention_scaling`) or `ROPE_INIT_FUNCTIONS[rope_type]` (transformers/
modeling_rope_utils.py), and back out through `rope_to_hf`. The frequencies must be equal bit for bit: both sides
run the same float32 operations."""
import copy

import pytest
import torch

try:  # the reference: without it, the tests of the plain-JSON reading, the checks and the CLI still run
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS as HF_INIT
except ImportError:
    transformers = None
needs_transformers = pytest.mark.skipif(transformers is None, reason="transformers is not installed: HF's own config "
                                        "and rotary classes are the reference (the plain-JSON reading is tested)")

from harness.encodings import build
from harness.hf import HF_ROPE_TYPES, rope_from_hf, rope_to_hf
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, SEQ_LEN_TYPES

# meta-llama/Llama-3.1-8B config.json (rope keys and the dims they need)
LLAMA_31_8B = {
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
# Qwen/Qwen2-7B config.json: plain RoPE at base 1e6
QWEN2_7B = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 131072,
            "rope_theta": 1000000.0}
# Qwen/Qwen2-7B-Instruct config.json (max_position_embeddings 32768) with the YaRN rope_scaling its model card says
# to add for long inputs (legacy `type` key)
QWEN2_7B_INSTRUCT_YARN = {
    "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}}
# google/gemma-2-9b config.json: head_dim 256 is not hidden_size / heads (224)
GEMMA2_9B = {"model_type": "gemma2", "head_dim": 256, "hidden_size": 3584, "num_attention_heads": 16,
             "max_position_embeddings": 8192, "rope_theta": 10000.0}
# deepseek-ai/DeepSeek-V3 config.json: MLA rotates the qk_rope_head_dim slice; YaRN with mscale; no rope_interleave
# key, which DeepseekV3Config defaults to True
DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "qk_nope_head_dim": 128,
               "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840, "rope_theta": 10000,
               "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                "original_max_position_embeddings": 4096, "type": "yarn"}}
# microsoft/phi-2 config.json: partial rotary, 32 of 80 features
PHI_2 = {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "max_position_embeddings": 2048,
         "partial_rotary_factor": 0.4, "rope_theta": 10000.0}
# meta-llama/Llama-2-7b-hf config.json dims; the rope_scaling are overrides (HF's Llama docs' linear / dynamic
# examples): no hub checkpoint of this family ships them
LLAMA_2_7B = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "max_position_embeddings": 4096, "rope_theta": 10000.0}
LLAMA_2_LINEAR = {**LLAMA_2_7B, "rope_scaling": {"type": "linear", "factor": 4.0}}
LLAMA_2_DYNAMIC = {**LLAMA_2_7B, "rope_scaling": {"type": "dynamic", "factor": 2.0}}  # no original_max_position_...
# p-RoPE as Gemma 4's global layers use it (DESIGN.md §2: p = 0.25, base 1e6), v5 form; head_dim 128 is ours
PROPORTIONAL = {"model_type": "llama", "head_dim": 128, "hidden_size": 1024, "num_attention_heads": 8,
                "max_position_embeddings": 8192, "rope_parameters": {
                    "rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25}}
# microsoft/Phi-3.5-mini-instruct config.json (the Phi-3 family's LongRoPE layout: 48 factors = head_dim 96 / 2, no
# factor in rope_scaling, original_max_position_embeddings at the top level). Values from a public copy of that file.
PHI35_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062,
]
PHI35_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979,
    1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662,
    1.2899998426437378, 1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
    1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
    2.729999542236328, 2.749999523162842, 2.8399994373321533,
]
PHI35_MINI = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
              "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
              "rope_scaling": {"long_factor": PHI35_LONG, "short_factor": PHI35_SHORT, "type": "longrope"}}

# id: (config.json dict, HF config class, the model's modeling module and its RotaryEmbedding class), by name
FAMILIES = {
    "llama3.1": (LLAMA_31_8B, "LlamaConfig", "llama.modeling_llama.LlamaRotaryEmbedding"),
    "qwen2": (QWEN2_7B, "Qwen2Config", "qwen2.modeling_qwen2.Qwen2RotaryEmbedding"),
    "qwen2_yarn": (QWEN2_7B_INSTRUCT_YARN, "Qwen2Config", "qwen2.modeling_qwen2.Qwen2RotaryEmbedding"),
    "gemma2": (GEMMA2_9B, "Gemma2Config", "gemma2.modeling_gemma2.Gemma2RotaryEmbedding"),
    "deepseek_v3": (DEEPSEEK_V3, "DeepseekV3Config", "deepseek_v3.modeling_deepseek_v3.DeepseekV3RotaryEmbedding"),
    "phi2": (PHI_2, "PhiConfig", "phi.modeling_phi.PhiRotaryEmbedding"),
    "phi3.5_longrope": (PHI35_MINI, "Phi3Config", "phi3.modeling_phi3.Phi3RotaryEmbedding"),
    "llama2_linear": (LLAMA_2_LINEAR, "LlamaConfig", "llama.modeling_llama.LlamaRotaryEmbedding"),
    "llama2_dynamic": (LLAMA_2_DYNAMIC, "LlamaConfig", "llama.modeling_llama.LlamaRotaryEmbedding"),
    "proportional": (PROPORTIONAL, "LlamaConfig", "llama.modeling_llama.LlamaRotaryEmbedding"),
}


def hf_object(dotted):
    """transformers.models.<dotted>: a modeling module's class or function."""
    import importlib
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


# lengths at which the seq_len-dependent types are compared too: at, just past and far past the trained length
LENGTHS = {"llama2_dynamic": (4096, 4097, 3 * 4096 + 5), "phi3.5_longrope": (4096, 4097, 131072)}


def class_config(family, overrides=None):
    """The HF config object as transformers builds it from config.json (a deep copy: HF edits the dicts it gets)."""
    cfg, cls, _ = FAMILIES[family]
    return getattr(transformers, cls)(**copy.deepcopy(overrides if overrides is not None else cfg))


def hf_frequencies(family, config, seq_len=None):
    """(inv_freq, attention_factor) as the model's RotaryEmbedding holds them at init, or as HF recomputes them at
    seq_len (dynamic_rope_update calls ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len=...))."""
    if seq_len is None:
        rotary = hf_object(FAMILIES[family][2])(config)
        return rotary.inv_freq, rotary.attention_scaling
    return HF_INIT[config.rope_parameters["rope_type"]](config, None, seq_len=seq_len)


def assert_same(ours, theirs):
    (inv, att), (hf_inv, hf_att) = ours, theirs
    assert inv.dtype == hf_inv.dtype == torch.float32 and inv.shape == hf_inv.shape
    assert torch.equal(inv, hf_inv), (inv - hf_inv).abs().max()
    assert att == pytest.approx(hf_att, rel=1e-15, abs=0)


@pytest.fixture(params=["transformers", "json"])
def reading(request, monkeypatch):
    """Each reading of a config.json: transformers' own config class for its model_type, and the plain JSON by
    HF's rules (harness.hf.plain: what runs without transformers)."""
    from harness.hf import classes
    if request.param == "json":
        monkeypatch.setattr(classes, "config_class", lambda model_type: None)
    elif transformers is None:
        pytest.skip("transformers is not installed: its reading cannot run")
    return request.param


@needs_transformers
def test_hf_rope_types_are_transformers_own():
    # every type HF computes (its ROPE_INIT_FUNCTIONS plus each model's "default") and nothing else; all are ours
    assert set(HF_ROPE_TYPES) == set(HF_INIT) | {"default"}
    assert set(HF_ROPE_TYPES) <= set(ROPE_INIT_FUNCTIONS)


@needs_transformers
@pytest.mark.parametrize("family", FAMILIES)
def test_frequencies_equal_hf(family):
    enc = build("rope", **rope_from_hf(FAMILIES[family][0]))
    config = class_config(family)
    assert_same(enc.frequencies(None), hf_frequencies(family, config))
    for seq_len in LENGTHS.get(family, ()):
        assert enc.rope_type in SEQ_LEN_TYPES
        assert_same(enc.frequencies(seq_len), hf_frequencies(family, config, seq_len))


@needs_transformers
@pytest.mark.parametrize("family", FAMILIES)
def test_reads_what_transformers_v5_writes(family):
    # PreTrainedConfig.to_dict: rope_theta moved into rope_parameters, type and rope_type both kept, Phi-3's
    # partial_rotary_factor 1.0 and original_max_position_embeddings copied in
    assert rope_from_hf(class_config(family).to_dict()) == rope_from_hf(FAMILIES[family][0])


@needs_transformers
@pytest.mark.parametrize("family", FAMILIES)
def test_round_trip_and_the_fragment_is_hf_correct(family):
    params = rope_from_hf(FAMILIES[family][0])
    fragment = rope_to_hf(params)
    assert rope_from_hf(fragment) == params
    assert "rope_scaling" not in fragment and "rope_theta" not in fragment  # v5 keeps them in rope_parameters
    # the fragment alone (over the class's defaults) gives HF the same frequencies
    config = class_config(family, fragment)
    enc = build("rope", **params)
    assert_same(enc.frequencies(None), hf_frequencies(family, config))
    for seq_len in LENGTHS.get(family, ()):
        assert_same(enc.frequencies(seq_len), hf_frequencies(family, config, seq_len))


# family: (HF's apply function for it, first position): offsets past the trained length make HF's forward switch
# to LongRoPE's long factors / rescale dynamic NTK (dynamic_rope_update) and ours do the same from pos.max()
LLAMA_APPLY = "llama.modeling_llama.apply_rotary_pos_emb"
ROTATIONS = {"deepseek_v3": ("deepseek_v3.modeling_deepseek_v3.apply_rotary_pos_emb_interleave", 0),
             "qwen2_yarn": (LLAMA_APPLY, 0), "phi3.5_longrope": ("phi3.modeling_phi3.apply_rotary_pos_emb", 5000),
             "llama2_dynamic": (LLAMA_APPLY, 9000), "proportional": (LLAMA_APPLY, 0), "llama3.1": (LLAMA_APPLY, 0)}


@needs_transformers
@pytest.mark.parametrize("family", ROTATIONS)
def test_rotated_scores_equal_hf(family):
    # through both forwards: the model's RotaryEmbedding (cos, sin times attention_scaling) and its apply function
    # against our rotate(). Compared as q.k scores: DeepSeek's interleave returns the pairs de-interleaved
    # (x[2j] to j, x[2j+1] to j + D/2), a permutation of the features that q.k does not see.
    apply, start = hf_object(ROTATIONS[family][0]), ROTATIONS[family][1]
    params = rope_from_hf(FAMILIES[family][0])
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, 2, 12, params["head_dim"], generator=gen)  # each (B, H, T, D)
    pos = torch.arange(start, start + 12)
    cos, sin = hf_object(FAMILIES[family][2])(class_config(family))(q, pos[None])
    hq, hk = apply(q, k, cos, sin)
    oq, ok = build("rope", **params, impl="reference").rotate(q, k, pos)
    torch.testing.assert_close(oq @ ok.transpose(-1, -2), hq @ hk.transpose(-1, -2), rtol=1e-5, atol=1e-5)


def test_parameters_of_real_configs(reading):
    assert rope_from_hf(LLAMA_31_8B) == {
        "head_dim": 128, "base": 500000.0, "layout": "half", "partial_rotary_factor": 1.0, "rope_type": "llama3",
        "scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192}}
    deepseek = rope_from_hf(DEEPSEEK_V3)
    assert (deepseek["head_dim"], deepseek["layout"], deepseek["rope_type"]) == (64, "interleaved", "yarn")
    assert rope_from_hf({**DEEPSEEK_V3, "rope_interleave": False})["layout"] == "half"
    assert rope_from_hf(GEMMA2_9B)["head_dim"] == 256
    assert rope_from_hf(PHI_2)["partial_rotary_factor"] == 0.4
    phi3 = rope_from_hf(PHI35_MINI)["scaling"]
    # Phi-3 has no factor: HF's is max_position_embeddings / original_max_position_embeddings = 32
    assert (phi3["factor"], phi3["original_max_position_embeddings"]) == (32.0, 4096)
    assert rope_from_hf({**PHI35_MINI, "rope_scaling": {**PHI35_MINI["rope_scaling"], "type": "su"}}) == \
        rope_from_hf(PHI35_MINI)  # Phi-3's first name for LongRoPE


def test_dynamic_takes_max_position_embeddings_as_trained_length(reading):
    # HF's dynamic NTK never reads original_max_position_embeddings: its trained length is max_position_embeddings
    params = rope_from_hf(LLAMA_2_DYNAMIC)
    assert params["scaling"] == {"factor": 2.0, "original_max_position_embeddings": 4096}
    assert rope_to_hf(params)["max_position_embeddings"] == 4096
    assert "original_max_position_embeddings" not in rope_to_hf(params)["rope_parameters"]
    same = {**LLAMA_2_DYNAMIC, "rope_scaling": {"type": "dynamic", "factor": 2.0,
                                                "original_max_position_embeddings": 4096}}
    assert rope_from_hf(same) == params


def test_rope_theta_top_level_or_in_rope_parameters(reading):
    v4 = {"hidden_size": 64, "num_attention_heads": 2, "rope_theta": 5e5}
    v5 = {"hidden_size": 64, "num_attention_heads": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    both = {**v5, "rope_theta": 500000}  # equal values: fine
    assert rope_from_hf(v4) == rope_from_hf(v5) == rope_from_hf(both)
    assert rope_from_hf(v4)["base"] == 500000.0 and rope_from_hf(v4)["rope_type"] == "default"


@needs_transformers
def test_per_layer_rope_parameters():
    # google/gemma-3-4b-it config.json text_config: global layers linear x8 at 1e6, local layers at 1e4;
    # Gemma3TextConfig turns it into v5's per-layer-type rope_parameters
    gemma3 = {"head_dim": 256, "hidden_size": 2560, "num_attention_heads": 8, "num_hidden_layers": 34,
              "max_position_embeddings": 131072, "sliding_window": 1024, "rope_theta": 1000000.0,
              "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}
    config = transformers.Gemma3TextConfig(**copy.deepcopy(gemma3))
    saved, rotary = config.to_dict(), hf_object("gemma3.modeling_gemma3.Gemma3RotaryEmbedding")(config)
    for layer_type, rope_type in (("full_attention", "linear"), ("sliding_attention", "default")):
        params = rope_from_hf(saved, layer_type=layer_type)
        assert params["rope_type"] == rope_type
        hf = getattr(rotary, f"{layer_type}_inv_freq"), getattr(rotary, f"{layer_type}_attention_scaling")
        assert_same(build("rope", **params).frequencies(None), hf)
    with pytest.raises(ValueError, match=r"layer_type None is not one of \['full_attention', 'sliding_attention'\]"):
        rope_from_hf(saved)


def test_to_hf_fills_defaults_and_drops_impl():
    fragment = rope_to_hf({"head_dim": 64, "impl": "eager"})
    assert fragment == {"head_dim": 64, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    interleaved = rope_to_hf({"head_dim": 64, "layout": "interleaved", "partial_rotary_factor": 0.5})
    assert interleaved["rope_interleave"] is True and interleaved["rope_parameters"]["partial_rotary_factor"] == 0.5


DIMS = {"hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 128, "rope_theta": 10000.0}
BAD_FROM_HF = [
    ({**DIMS, "rope_scaling": {"type": "ntk", "factor": 2.0}},
     r"unknown rope_type 'ntk'; expected one of \['default'"),
    ({**DIMS, "rope_scaling": {"type": "mrope", "mrope_section": [8, 4, 4]}}, r"unknown rope_type 'mrope'"),
    ({**DIMS, "rope_scaling": {"rope_type": "linear"}},
     r"rope_type 'linear' needs \['factor'\]; its keys: \['factor'\]"),
    # HF requires both llama3 blend factors (_validate_llama3_rope_parameters), ours default to Llama 3.1's
    ({**DIMS, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0}},
     r"rope_type 'llama3' needs \['low_freq_factor'\]"),
    ({**DIMS, "rope_scaling": {"rope_type": "default", "mrope_section": [8, 4, 4]}},
     r"^rope_parameters\.mrope_section \[8, 4, 4\]: multimodal RoPE .* the harness's rope is 1-D RoPE over token "
     r"positions \(on text alone, where t = h = w, M-RoPE is this RoPE: drop mrope_section to read it so\)$"),
    ({**DIMS, "rope_scaling": {"rope_type": "default", "short_factor": [1.0] * 16}},
     r"keys \['short_factor'\] are not taken by rope_type 'default'; its keys: \[\]"),
    ({**DIMS, "rope_scaling": {"rope_type": "axial"}},
     r"^rope_type 'axial' is 2-D RoPE over a vision encoder's patch rows and columns; the harness's rope is 1-D"),
    ({**DIMS, "rope_scaling": {"rope_type": "yarn", "type": "linear", "factor": 2.0}},
     r"conflicting rope_type 'yarn' and legacy type 'linear'"),
    ({**DIMS, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}, r"conflicting rope_theta"),
    ({**DIMS, "rope_scaling": {"type": "linear", "factor": 2.0}, "rope_parameters": {"type": "linear", "factor": 4.0}},
     r"both rope_parameters and rope_scaling"),
    ({**DIMS, "partial_rotary_factor": 0.5, "rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.25}},
     r"conflicting partial_rotary_factor"),
    ({**DIMS, "rope_scaling": {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}},
     r"original_max_position_embeddings 64 differs from max_position_embeddings 128"),
    ({"hidden_size": 64, "num_attention_heads": 2, "rope_scaling": {"type": "dynamic", "factor": 2.0},
      "rope_theta": 1e4}, r"rope_type 'dynamic' needs max_position_embeddings"),
    ({**DIMS, "original_max_position_embeddings": 32,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}},
     r"conflicting original_max_position_embeddings"),
    ({"hidden_size": 64, "num_attention_heads": 2}, r"config needs rope_theta"),
    ({"rope_theta": 1e4}, r"config needs head_dim, or hidden_size and num_attention_heads"),
    ({**DIMS, "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.0] * 8}},
     r"longrope short_factor needs 16 entries"),
    ({**DIMS, "rope_scaling": {"type": "linear", "factor": 0.5}}, r"rope_scaling\.factor must be a finite number >= 1"),
    # every value is checked before use: type, finiteness, sign, naming the key (nested ones by their path)
    ([1, 2], r"^an HF config.json holds a JSON object; got \[1, 2\] \(a list\)$"),
    ({**DIMS, "rope_theta": float("nan")}, r"^rope_theta must be a finite number > 0, got nan \(a number\)$"),
    ({**DIMS, "rope_theta": float("inf")}, r"^rope_theta must be a finite number > 0, got inf"),
    ({**DIMS, "rope_theta": -1e4}, r"^rope_theta must be a finite number > 0, got -10000.0"),
    ({**DIMS, "rope_theta": "1e4"}, r"^rope_theta must be a finite number > 0, got '1e4' \(a string\)$"),
    ({**DIMS, "rope_theta": True}, r"^rope_theta must be a finite number > 0, got True \(a boolean\)$"),
    ({**DIMS, "rope_scaling": {"type": "linear", "factor": "abc"}},
     r"^rope_scaling\.factor must be a finite number >= 1, got 'abc' \(a string\)$"),
    ({**DIMS, "rope_scaling": {"type": "linear", "factor": float("nan")}}, r"^rope_scaling\.factor must be"),
    ({**DIMS, "rope_scaling": "linear"}, r"^rope_scaling must be a JSON object, got 'linear' \(a string\)$"),
    ({**DIMS, "rope_scaling": {"type": ["linear"], "factor": 2.0}}, r"^rope_scaling\.type must be a string"),
    ({**DIMS, "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 15 + ["x"], "long_factor": [1.0] * 16}},
     r"^rope_scaling\.short_factor must be a non-empty list of finite numbers > 0"),
    ({**DIMS, "rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64.5}},
     r"^rope_scaling\.original_max_position_embeddings must be a positive integer, got 64.5"),
    ({**DIMS, "rope_scaling": {"type": "yarn", "factor": 2.0, "beta_fast": 0}}, r"^rope_scaling\.beta_fast must be"),
    ({**DIMS, "rope_scaling": {"type": "yarn", "factor": 2.0, "truncate": "no"}},
     r"^rope_scaling\.truncate must be true or false, got 'no'"),
    ({**DIMS, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": "8"}, "sliding_attention": {}}},
     r"^rope_parameters\.full_attention\.factor must be a finite number >= 1, got '8'"),
    ({**DIMS, "rope_parameters": {"full_attention": {"rope_type": "default"}, "sliding_attention": 10000.0}},
     r"^rope_parameters is per layer type, so rope_parameters\.sliding_attention must be a JSON object"),
    ({**DIMS, "head_dim": -64}, r"^head_dim must be a positive integer, got -64"),
    ({**DIMS, "head_dim": 64.0}, r"^head_dim must be a positive integer, got 64.0 \(a number\)"),
    ({**DIMS, "max_position_embeddings": "4k"}, r"^max_position_embeddings must be a positive integer"),
    ({**DIMS, "partial_rotary_factor": 1.5}, r"^partial_rotary_factor must be a finite number in \(0, 1\]"),
    ({**DIMS, "rope_interleave": "yes"}, r"^rope_interleave must be true or false"),
    ({**DIMS, "rope_scaling": {"type": "xpos", "factor": 2.0}},
     r"unknown rope_type 'xpos'; expected one of \['default', 'linear', 'dynamic', 'yarn', 'longrope', 'llama3', "
     r"'proportional'\]$"),
]


@pytest.mark.parametrize("config, message", BAD_FROM_HF)
def test_bad_config_json_is_one_line(config, message, reading):
    with pytest.raises(ValueError, match=message) as info:
        rope_from_hf(config)
    assert "\n" not in str(info.value)


def test_every_rope_key_has_a_checked_kind():
    """A rope_type's keys (and any HF config key read) are all type-checked: a new key without a kind fails here."""
    from harness.hf.rope import COMMON_KEYS, ROPE_KEYS, _type_keys
    taken = {k for t in HF_ROPE_TYPES for k in _type_keys(t)[0]} | set(COMMON_KEYS)
    assert taken <= set(ROPE_KEYS), sorted(taken - set(ROPE_KEYS))


def test_layer_type_on_a_flat_config_is_refused(reading):
    with pytest.raises(ValueError, match=r"^layer_type 'full_attention' given, but this config's rope parameters are "
                                         r"not per layer type"):
        rope_from_hf(LLAMA_31_8B, layer_type="full_attention")


@pytest.mark.parametrize("params, message", [
    ({"head_dim": 64, "base": float("nan")}, r"^base must be a finite number > 0, got nan"),
    ({"head_dim": 64, "layout": "diagonal"}, r"^unknown layout 'diagonal'; expected one of \['half', 'interleaved'\]"),
    ({"head_dim": 64, "rope_type": "linear", "scaling": {"factor": "2"}}, r"^scaling\.factor must be a finite number"),
    ({"head_dim": 64, "scaling": [1]}, r"^scaling must be a JSON object"),
    ({"head_dim": 64, "rope_type": "ntk", "scaling": {"factor": 2.0}}, r"rope_type 'ntk' has no HF equivalent; HF's"),
    ({"head_dim": 64, "window": 8}, r"rope does not take \['window'\]; its parameters: \['head_dim'"),
    ({"base": 1e4}, r"rope_to_hf needs head_dim"),
    ({"head_dim": 64, "rope_type": "yarn", "scaling": {"factor": 2.0}},
     r"needs \['original_max_position_embeddings'\]"),
])
def test_bad_params_are_one_line(params, message):
    with pytest.raises(ValueError, match=message) as info:
        rope_to_hf(params)
    assert "\n" not in str(info.value)


def test_longrope_needs_its_factor(reading):
    """Phi-3's rope_scaling has no factor; HF derives 32 (131072 / 4096), whose attention factor is
    sqrt(1 + ln 32 / ln 4096) = 1.1902 (transformers modeling_rope_utils._compute_longrope_parameters). A default
    of 1 would give 1.0 silently, so our longrope refuses a missing factor and rope_from_hf supplies HF's."""
    from harness.rope.frequencies import frequencies
    ones = [1.0] * 32
    with pytest.raises(ValueError, match=r"^rope_type 'longrope' needs \['factor'\]"):
        frequencies("longrope", 64, short_factor=ones, long_factor=ones, original_max_position_embeddings=4096)
    cfg = {"head_dim": 64, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
           "rope_theta": 10000.0, "rope_scaling": {"type": "longrope", "short_factor": ones, "long_factor": ones}}
    p = rope_from_hf(cfg)
    _, attention = frequencies(p["rope_type"], p["head_dim"], p["base"], **p["scaling"])
    assert attention == pytest.approx(1.1902380714238083)


def test_cli_prints_overrides_that_compose_to_the_same_rope(tmp_path, capsys):
    """`python -m harness.hf config.json` -> Hydra overrides; composed, they are rope_from_hf's parameters."""
    import json
    import shlex

    from hydra import compose, initialize_config_dir

    from harness import config as config_lib
    from harness.__main__ import CONF
    from harness.hf.cli import main
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B))
    assert main([str(tmp_path / "config.json")]) == 0
    out = capsys.readouterr()
    assert out.err.startswith("# head_dim 128: ")
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = config_lib.to_config(compose("config", overrides=shlex.split(out.out)))
    got = {k: v for k, v in config_lib.to_dict(cfg)["encoding"].items() if k not in ("name", "impl")}
    want = rope_from_hf(LLAMA_31_8B)
    assert got == {k: v for k, v in want.items() if k != "head_dim"}


@pytest.mark.parametrize("hf", [QWEN2_7B, LLAMA_31_8B, PHI35_MINI], ids=["plain", "dict", "lists"])
def test_cli_prints_one_shell_quoted_line_that_the_harness_validates(hf, tmp_path, capsys):
    """stdout is one line, shlex.join's quoting (what a POSIX shell reads back as the same argv), and that argv with
    the model.head_dim the stderr hint names passes the CLI's own validation (harness.infra.preflight.validate:
    compose, to_config and the encoding's checks), which is what `python -m harness <pasted line>` runs first."""
    import json
    import re
    import shlex
    import subprocess

    from harness.hf.cli import main
    from harness.infra.preflight import validate
    (tmp_path / "config.json").write_text(json.dumps(hf))
    assert main([str(tmp_path / "config.json")]) == 0
    out = capsys.readouterr()
    assert out.out.endswith("\n") and out.out.count("\n") == 1, out.out[:300]
    line = out.out.rstrip("\n")
    argv = shlex.split(line)
    assert shlex.join(argv) == line and argv[0] == "encoding=rope"
    assert all("'" not in a for a in argv), argv  # the quotes are the shell's, not part of any override
    # pasted into a real shell: the same argv items
    shell = subprocess.run(["sh", "-c", f"printf '%s\\0' {line}"], capture_output=True, text=True, timeout=30)
    assert shell.stdout.split("\0")[:-1] == argv, shell
    (head_dim,) = re.findall(r"^# head_dim \d+: (model\.head_dim=\d+)", out.err, re.M)
    assert validate([*argv, head_dim, f"out={tmp_path / 'out'}"]) == (None, 1)


def test_cli_from_run_writes_the_fragment_and_refuses_in_one_line(tmp_path, capsys):
    import json

    from harness.hf.cli import main
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    params = {k: v for k, v in rope_from_hf(LLAMA_31_8B).items() if k != "head_dim"}
    (run / ".hydra" / "config.yaml").write_text(json.dumps({"encoding": {"name": "rope", **params, "impl": "auto"},
                                                            "model": {"d_model": 256, "n_heads": 2}}))
    assert main(["--from-run", str(run)]) == 0
    frag = json.loads(capsys.readouterr().out)
    assert frag["head_dim"] == 128 and rope_from_hf(frag) == {**params, "head_dim": 128}
    for argv, says in (([str(tmp_path / "none.json")], "not a readable JSON file"), ([], "give an HF config.json"),
                       (["--from-run", str(tmp_path)], "no .hydra/config.yaml")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("harness.hf: error: ") and err.count("\n") == 1 and says in err


@pytest.mark.parametrize("content, says", [
    (b"", r"not a readable JSON file \(it is empty\)$"),
    (b"  \n", r"not a readable JSON file \(it is empty\)$"),
    (b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00", r"not a readable JSON file \(binary, not UTF-8 text\)$"),
    (b'{"rope_theta": 1e4,', r"not a readable JSON file \(Expecting property name enclosed in double quotes at line 1"),
    (b"[1, 2]", r"an HF config.json holds a JSON object, got \[1, 2\] \(a list\)$"),
    (b'"config"', r"an HF config.json holds a JSON object, got 'config' \(a string\)$"),
    (b"null", r"an HF config.json holds a JSON object, got None \(null\)$"),
    (b'{"hidden_size": 64, "num_attention_heads": 2, "rope_theta": NaN}',
     r"cfg\.json: rope_theta must be a finite number > 0, got nan \(a number\)$"),
    (b'{"hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e4, "rope_scaling": {"type": "linear", '
     b'"factor": "abc"}}', r"cfg\.json: rope_scaling\.factor must be a finite number >= 1, got 'abc' \(a string\)$"),
    (b"[" * 100000, r"not a readable JSON file \((nested too deeply|.*)\)$"),
])
def test_cli_bad_files_are_one_line_naming_the_file(tmp_path, capsys, content, says):
    import re

    from harness.hf.cli import main
    (tmp_path / "cfg.json").write_bytes(content)
    assert main([str(tmp_path / "cfg.json")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"harness.hf: error: {tmp_path / 'cfg.json'}: ")
    assert re.search(says, err.strip()), err


def test_cli_directory_and_usage_errors_are_one_line(tmp_path, capsys):
    from harness.hf.cli import main
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{tmp_path}: not a readable JSON file (is a directory)")
    for argv, says in ((["a.json", "b.json"], "unrecognized arguments: b.json"), (["--layer"], "expected one argument"),
                       (["--nosuch"], "unrecognized arguments: --nosuch")):
        with pytest.raises(SystemExit) as info:
            main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize("yaml_text, says", [
    ("encoding: {name: rope\nmodel: [", r"config\.yaml: not a readable YAML file \(.* at line \d+\)$"),
    ("- 1\n- 2\n", r"config\.yaml: a run config holds a mapping, got \[1, 2\] \(a list\)$"),
    ("encoding: rope\nmodel: {d_model: 64, n_heads: 2}\n", r"config\.yaml: encoding must be a mapping, got 'rope'"),
    ("encoding: {name: rope, base: .nan}\nmodel: {d_model: 64, n_heads: 2}\n",
     r"config\.yaml: base must be a finite number > 0, got nan"),
    ("encoding: {name: rope, base: abc}\nmodel: {d_model: 64, n_heads: 2}\n",
     r"config\.yaml: base must be a finite number > 0, got 'abc' \(a string\)$"),
    ("encoding: {name: rope}\nmodel: {n_heads: 2}\n", r"config\.yaml: model needs head_dim, or d_model and n_heads$"),
    ("encoding: {name: rope}\nmodel: {d_model: 64, n_heads: 0}\n",
     r"config\.yaml: model\.n_heads must be a positive integer, got 0"),
    ("encoding: {name: rope, layout: diagonal}\nmodel: {d_model: 64, n_heads: 2}\n",
     r"config\.yaml: unknown layout 'diagonal'"),
    ("encoding: {name: alibi}\nmodel: {d_model: 64, n_heads: 2}\n", r"its encoding is not rope"),
])
def test_cli_from_run_bad_config_yaml_is_one_line(tmp_path, capsys, yaml_text, says):
    import re

    from harness.hf.cli import main
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml_text)
    assert main(["--from-run", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and re.search(says, err.strip()), err
    assert main(["--from-run", str(tmp_path), "--layer-type", "full_attention"]) == 2
    assert "--layer-type reads an HF config.json" in capsys.readouterr().err


def test_cli_layer_type_on_a_flat_config_names_the_file(tmp_path, capsys):
    import json

    from harness.hf.cli import main
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA_31_8B))
    assert main([str(tmp_path / "cfg.json"), "--layer-type", "full_attention"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'cfg.json'}: layer_type 'full_attention' given" in err


# google/gemma-4 text config's RoPE layout (Gemma4TextConfig's defaults, 6 layers): sliding layers head_dim 256 at
# 1e4; full-attention layers global_head_dim 512 (the hub key: a builder-only kwarg that becomes per_layer_config),
# proportional RoPE at 1e6 with p = 0.25
GEMMA4 = {"model_type": "gemma4_text", "hidden_size": 2304, "num_attention_heads": 8, "num_hidden_layers": 6,
          "head_dim": 256, "global_head_dim": 512, "max_position_embeddings": 131072,
          "layer_types": ["sliding_attention"] * 5 + ["full_attention"], "rope_parameters": {
              "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
              "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}}}


def test_gemma4_full_attention_takes_the_global_head_dim(reading):
    full = rope_from_hf(GEMMA4, layer_type="full_attention")
    assert (full["head_dim"], full["rope_type"], full["base"], full["partial_rotary_factor"]) == \
        (512, "proportional", 1e6, 0.25)
    inv, _ = build("rope", **full).frequencies(None)
    assert inv.shape == (256,) and int((inv != 0).sum()) == 64  # 512 / 2 pairs, a quarter of them rotating
    assert rope_from_hf(GEMMA4, layer_type="sliding_attention")["head_dim"] == 256
    # v5's saved form: per_layer_config instead of global_head_dim
    saved = {**{k: v for k, v in GEMMA4.items() if k != "global_head_dim"}, "per_layer_config": {"5": {"head_dim": 512}}}
    assert rope_from_hf(saved, layer_type="full_attention") == full


def test_gemma4_without_its_global_head_dim_is_refused_as_plain_json(monkeypatch):
    from harness.hf import classes
    monkeypatch.setattr(classes, "config_class", lambda model_type: None)
    bare = {k: v for k, v in GEMMA4.items() if k != "global_head_dim"}
    with pytest.raises(ValueError, match=r"gives its full_attention layers their own head size \(global_head_dim"):
        rope_from_hf(bare, layer_type="full_attention")


def test_cli_per_layer_config_names_the_flag_and_the_layer_types(tmp_path, capsys):
    import json

    from harness.hf.cli import main
    (tmp_path / "gemma4.json").write_text(json.dumps(GEMMA4))
    assert main([str(tmp_path / "gemma4.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --layer-type, one of ['full_attention', 'sliding_attention']" in err, err
    assert main([str(tmp_path / "gemma4.json"), "--layer-type", "global"]) == 2
    err = capsys.readouterr().err
    assert "--layer-type global: " in err and "['full_attention', 'sliding_attention']" in err, err
    assert main([str(tmp_path / "gemma4.json"), "--layer-type", "full_attention"]) == 0
    out = capsys.readouterr()
    assert "encoding.rope_type=proportional" in out.out and "encoding.base=1000000.0" in out.out
    assert out.err.startswith("# head_dim 512: model.head_dim=512")


def test_cli_names_the_keys_it_ignores(tmp_path, capsys):
    """Ministral 3 keeps its query temperature's beta in rope_parameters: not the rotation, said on stderr."""
    import json

    from harness.hf.cli import main
    cfg = {**DIMS, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 16.0, "beta_fast": 32.0,
                                       "beta_slow": 1.0, "original_max_position_embeddings": 16,
                                       "llama_4_scaling_beta": 0.1}}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    assert main([str(tmp_path / "cfg.json")]) == 0
    err = capsys.readouterr().err
    assert "# ignored rope_parameters.llama_4_scaling_beta 0.1: Ministral 3" in err


def test_without_transformers_the_cli_reads_the_plain_json(tmp_path):
    """transformers missing: `python -m harness.hf` still converts (the plain-JSON reading)."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA_31_8B))
    code = ("import runpy, sys; sys.modules['transformers'] = None; "
            f"sys.argv = ['harness.hf', {str(tmp_path / 'cfg.json')!r}]; "
            "runpy.run_module('harness.hf', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("encoding=rope encoding.base=500000.0 encoding.layout=half") and \
        "encoding.rope_type=llama3" in out.stdout
