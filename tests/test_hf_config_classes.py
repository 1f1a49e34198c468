"""`rope_from_hf` against every config class transformers has with a RoPE (harness/hf/).

The classes: every entry of transformers' CONFIG_MAPPING whose default config has rope_parameters, built from the
class defaults. For each, its config.json (`to_dict()`, what v5's save_pretrained writes but for unchanged defaults)
goes through `rope_from_hf` (per layer type where the rope is), into the harness's `rope`, and its inverse
frequencies and attention scaling must equal bit for bit those the model's own `*RotaryEmbedding` class holds (found
in the model's modeling module: the one whose `config` parameter is annotated with this class, else the one named
after it). A class that cannot be compared so is listed below with the reason, never skipped silently: the listings
must be exactly the classes that need them."""
import importlib
import inspect
import math
import os
import re
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is not installed: HF's own rotary classes "
                                                          "are the reference (the plain-JSON path: test_hf_config.py)")

from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES  # noqa: E402

from harness.encodings import build  # noqa: E402
from harness.hf import rope_from_hf  # noqa: E402

AXIAL = "rope_type 'axial': 2-D RoPE over a vision encoder's patch rows and columns (harness.hf refuses it)"
# model_type: why harness.hf refuses it (a one-line ValueError, checked below): not 1-D RoPE over token positions
REFUSED = {
    **{t: AXIAL for t in (
        "cohere_compass_vision", "dots3_note_vision_encoder", "edgetam_video", "ernie4_5_vl_moe_vision",
        "exaone4_5_vision", "gemma4_vision", "glm4v_moe_vision", "glm4v_vision", "glm5_next_vision", "glm_ocr_vision",
        "inkling2_vision", "kimi_k25_vision", "lfm3_vl_vision", "minimax_m3_vl_vision", "mlcd", "mlcd_vision_model",
        "muse_glimmer_vision", "muse_spark_vision", "paddleocr_vl_vision", "pixtral", "qwen2_5_omni_vision_encoder",
        "qwen2_5_vl_vision", "qwen2_vl_vision", "qwen3_5_moe_vision", "qwen3_5_vision",
        "qwen3_omni_moe_vision_encoder", "qwen3_vl_moe_vision", "qwen3_vl_vision", "qwen4_exp_vision", "sam2_video",
        "sam3_tracker_video", "sam3_vit_model", "step3p5_vision", "video_llama_3_vision")},
    "cosmos3_edge_text": "its rope_parameters hold mrope_section: multimodal RoPE over (t, h, w) position ids",
    "eomt_dinov3": "DINOv3's RoPE is 2-D over patch rows and columns (rope_type default, head_dim / 4 per axis)",
    "llama4_vision_model": "Llama 4's vision RoPE is 2-D over patch rows and columns",
    "efficientloftr": "2-D RoPE over feature-map rows and columns, partial_rotary_factor 4.0",
    "musicflamingo": "2-D RoPE over window and time",
    "ernie4_5_vl_moe_text": "3-D RoPE whose inv_freq is reordered by mrope_section",
}
# model_type: (overrides, reason): class defaults HF's own rotary cannot use as a RoPE, compared with the overrides
OVERRIDDEN = {
    "glm4_moe": ({"head_dim": 128}, "its default head_dim 4096 // 96 = 42 at partial 0.5 is an odd rotary dim, 21"),
    "glm4v_moe_text": ({"head_dim": 128}, "its default head_dim 42 at partial 0.5 is an odd rotary dim, 21"),
    "qwen3_omni_moe_text": ({"head_dim": 128}, "its default head_dim 2048 // 28 = 73 is odd"),
}
# model_type: why there is nothing to compare
NOT_COMPARED = {
    "blt": "BltConfig holds the four BLT transformers, which are compared on their own (blt_global_transformer, "
           "blt_local_decoder, blt_local_encoder, blt_patcher); its own rope_parameters have no head size",
}
# model_type: why its default config cannot be built (so whether it has a RoPE cannot be asked)
NO_DEFAULT = {
    "gemma4_assistant": "Gemma4AssistantConfig() fails its own validator (validate_architecture): it needs a target",
    "nougat": "NougatConfig() names a sub-config model_type transformers does not register (donut_swin)",
}


def _default(model_type):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[model_type](**OVERRIDDEN.get(model_type, ({},))[0])


def _rope_types():
    """{model_type: default config} of every class whose default config has rope_parameters; the unbuildable."""
    from transformers.utils import logging
    logging.set_verbosity_error()
    found, failed = {}, []
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        try:
            cfg = _default(model_type)
        except Exception:  # noqa: BLE001 - listed in NO_DEFAULT, checked below
            failed.append(model_type)
            continue
        if getattr(cfg, "rope_parameters", None):
            found[model_type] = cfg
    return found, failed


CLASSES, UNBUILDABLE = _rope_types()


def test_the_listings_are_exactly_the_classes_that_need_them():
    assert sorted(UNBUILDABLE) == sorted(NO_DEFAULT)
    listed = set(REFUSED) | set(OVERRIDDEN) | set(NOT_COMPARED)
    assert listed <= set(CLASSES), sorted(listed - set(CLASSES))
    assert len(CLASSES) > 200  # transformers 5.x: about 235


def _modeling_module(cfg, model_type):
    name = type(cfg).__module__.replace(".configuration_", ".modeling_")
    try:
        return importlib.import_module(name)
    except ImportError:  # a config whose model is another family's (InternLM3, IQuestCoder: LlamaModel)
        return importlib.import_module(getattr(transformers, MODEL_MAPPING_NAMES[model_type]).__module__)


def rotaries(cfg, model_type):
    """The model's own rotary embeddings built from cfg: the *RotaryEmbedding classes of its modeling module whose
    `config` is annotated with cfg's class (or a base of it), else with the class named most like it."""
    module = _modeling_module(cfg, model_type)
    built = {}
    for name, cls in sorted(vars(module).items()):
        if inspect.isclass(cls) and name.endswith("RotaryEmbedding"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    built[name] = cls(cfg)
                except Exception:  # noqa: BLE001 - another part's rotary (vision, audio): not this config's
                    continue
    def kin(name):  # (annotated with cfg's class or a base of it, common prefix of that class's name and cfg's)
        hint = inspect.signature(type(built[name]).__init__).parameters.get("config")
        hint = hint.annotation if hint is not None else None
        label = hint.__name__ if isinstance(hint, type) else name
        return (isinstance(hint, type) and isinstance(cfg, hint), hint is type(cfg),
                len(os.path.commonprefix([label, type(cfg).__name__])))
    best = max(map(kin, built), default=None)
    picks = [n for n in built if kin(n) == best]
    assert picks, f"{model_type}: no rotary class of {module.__name__} builds from {type(cfg).__name__}"
    return [built[n] for n in picks]  # several where the modeling module's parts share the config (Qwen Omni)


def hf_frequencies(rot):
    """{layer_type or None: (inv_freq, attention_scaling)} the rotary class holds."""
    out = {}
    for name, buf in rot.named_buffers():
        m = re.fullmatch(r"(?:(\w+)_)?inv_freq", name)
        if m and not name.endswith("original_inv_freq"):
            prefix = f"{m.group(1)}_" if m.group(1) else ""
            out[m.group(1)] = (buf, getattr(rot, f"{prefix}attention_scaling"))
    return out


COMPARED = sorted(set(CLASSES) - set(REFUSED) - set(NOT_COMPARED))


@pytest.mark.parametrize("model_type", COMPARED)
def test_frequencies_equal_the_model_s_own_rotary(model_type):
    cfg = CLASSES[model_type]
    saved = cfg.to_dict()
    for rot in rotaries(cfg, model_type):
        theirs = hf_frequencies(rot)
        assert theirs, f"{model_type}: {type(rot).__name__} holds no inv_freq"
        _compare(saved, theirs)


def _compare(saved, theirs):
    for layer_type, (hf_inv, hf_att) in theirs.items():
        params = rope_from_hf(saved, layer_type=layer_type)
        inv, att = build("rope", **params).frequencies(None)
        assert inv.dtype == hf_inv.dtype and inv.shape == hf_inv.shape, (layer_type, params, hf_inv.shape)
        assert torch.equal(inv, hf_inv), (layer_type, params, (inv - hf_inv).abs().max())
        assert math.isclose(att, hf_att, rel_tol=1e-15, abs_tol=0), (layer_type, att, hf_att)
    if list(theirs) != [None]:  # per layer type: harness.hf names the same layer types, and wants one
        with pytest.raises(ValueError, match=r"per layer type") as info:
            rope_from_hf(saved)
        assert sorted(info.value.choices) == sorted(theirs)


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_refused_classes_are_one_line(model_type):
    """What is not 1-D RoPE over token positions is refused in one line saying why, never converted wrongly."""
    with pytest.raises(ValueError) as info:
        rope_from_hf(CLASSES[model_type].to_dict())
    message = str(info.value)
    assert "\n" not in message and ("1-D" in message or "2-D" in message or "must be" in message), message


@pytest.mark.parametrize("model_type", sorted(OVERRIDDEN))
def test_overridden_defaults_are_refused_as_given(model_type):
    """The defaults OVERRIDDEN replaces: harness.hf refuses them in one line rather than build what HF cannot."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = CONFIG_MAPPING[model_type]().to_dict()
    with pytest.raises(ValueError, match=r"even") as info:
        rope_from_hf(raw)
    assert "\n" not in str(info.value)


def test_gemma4_full_attention_layers_take_the_global_head_dim():
    """Gemma4TextConfig() resolves head_dim 512 for its full-attention layers (global_head_dim, per_layer_config):
    256 inverse frequencies, 64 of them nonzero at partial factor 0.25 (proportional RoPE); its sliding ones 256."""
    saved = transformers.Gemma4TextConfig().to_dict()
    full = rope_from_hf(saved, layer_type="full_attention")
    assert (full["head_dim"], full["rope_type"], full["partial_rotary_factor"]) == (512, "proportional", 0.25)
    inv, _ = build("rope", **full).frequencies(None)
    assert inv.shape == (256,) and int((inv != 0).sum()) == 64
    assert rope_from_hf(saved, layer_type="sliding_attention")["head_dim"] == 256
    hub = {k: v for k, v in saved.items() if k != "per_layer_config"}  # the hub's form: global_head_dim, no overrides
    assert rope_from_hf({**hub, "global_head_dim": 512}, layer_type="full_attention") == full


def _layer_types(saved):
    try:
        rope_from_hf(saved)
    except ValueError as e:
        if getattr(e, "choices", None):
            return e.choices
    return [None]


def test_plain_json_reading_equals_transformers_for_every_class(monkeypatch):
    """Without transformers (or for a model_type it does not know) harness.hf reads the JSON by HF's rules by
    hand (harness.hf.plain): for every compared class's config.json it gives what transformers' class gives."""
    from harness.hf import classes
    ours = {}
    for model_type in COMPARED:
        saved = CLASSES[model_type].to_dict()
        ours[model_type] = {lt: rope_from_hf(saved, layer_type=lt) for lt in _layer_types(saved)}
    monkeypatch.setattr(classes, "config_class", lambda model_type: None)
    differ = [t for t in COMPARED
              if {lt: rope_from_hf(CLASSES[t].to_dict(), layer_type=lt) for lt in ours[t]} != ours[t]]
    assert not differ


def test_the_plain_reading_s_tables_are_transformers_own():
    """harness.hf.plain's tables of class knowledge equal what transformers' classes say: the attribute_map entries
    of the keys it reads, and the classes whose rope_interleave defaults to True."""
    from harness.hf.plain import ATTRIBUTE_MAPS, INTERLEAVED_MODEL_TYPES
    keys = ("head_dim", "hidden_size", "num_attention_heads", "max_position_embeddings", "rope_theta",
            "partial_rotary_factor", "rope_interleave")
    maps = {t: {k: v for k, v in (getattr(type(c), "attribute_map", None) or {}).items() if k in keys}
            for t, c in CLASSES.items() if t not in REFUSED}
    assert {t: m for t, m in maps.items() if m} == ATTRIBUTE_MAPS
    interleaved = {t for t, c in CLASSES.items() if getattr(c, "rope_interleave", None) is True}
    assert interleaved == set(INTERLEAVED_MODEL_TYPES) - {"deepseek_v2"}  # V2 rotates via view_as_complex


def test_a_composite_config_reads_its_text_config():
    """A multimodal config.json (Gemma 3, Qwen2-VL, ...: the text model's RoPE in text_config) reads as its text
    config does, for every composite class transformers has whose text config has a RoPE."""
    checked = 0
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        if model_type in NO_DEFAULT or model_type in CLASSES:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                cfg = CONFIG_MAPPING[model_type]()
                text = cfg.get_text_config(decoder=True)
            except Exception:  # noqa: BLE001 - a class without a text part
                continue
        if text is cfg or not getattr(text, "rope_parameters", None) or text.model_type in {**REFUSED, **OVERRIDDEN}:
            continue
        saved, alone = cfg.to_dict(), text.to_dict()
        for lt in _layer_types(alone):
            assert rope_from_hf(saved, layer_type=lt) == rope_from_hf(alone, layer_type=lt), (model_type, lt)
        checked += 1
    assert checked > 50  # transformers 5.x: about 100
