"""An HF config.json read by transformers' own config class for its model_type (harness.hf, when transformers
is installed): HF's rope-parameter standardisation (`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict` /
`standardize_rope_params` in transformers/modeling_rope_utils.py: rope_theta, partial_rotary_factor and the
pretraining length moved into rope_parameters, v4's rope_scaling read, the class's defaults for what the file
leaves out), its layer types (`nested_rope_parameter_keys`: layer_types, or `_rope_type_labels` such as
DeepSeek-V4's main / compress) and its per-layer configs (`per_layer_config[layer_type]`: Gemma 4's full-attention
layers have their own head_dim), the text config of a composite one (`get_text_config`). What a model's rotary
class then computes from it, tests/test_hf_config_classes.py checks for every config class transformers has."""
import contextlib
import copy
import warnings

from harness.hf.plain import (INTERLEAVED_MODEL_TYPES, LEGACY_TYPES, ROTARY_INTERLEAVES, LayerTypeError, Resolved,
                              choose_layer)


def config_class(model_type):
    """transformers' config class for model_type, or None (transformers not installed, or a model_type it does not
    know: a remote-code model, or a config.json without one)."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        return None
    try:
        return CONFIG_MAPPING[model_type] if isinstance(model_type, str) and model_type in CONFIG_MAPPING else None
    except (KeyError, ImportError, AttributeError):  # a class whose module does not import here
        return None


@contextlib.contextmanager
def quiet():
    """transformers' logger warnings (unrecognized rope keys, its defaults) off: the harness says what it refuses."""
    from transformers.utils import logging
    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.set_verbosity(level)


def _one_line(e):
    return " ".join(str(e).split()) or type(e).__name__


def _new_names(config):
    """config with legacy rope_type names as HF means them (`su`: LongRoPE): Phi3Config maps `su` only after
    standardize_rope_params, which then has not filled longrope's pretraining length, and refuses the config."""
    for part in (config, config.get("text_config")):
        for key in ("rope_scaling", "rope_parameters"):
            rp = part.get(key) if isinstance(part, dict) else None
            for d in ([rp] if isinstance(rp, dict) else []) + [v for v in (rp or {}).values() if isinstance(v, dict)]:
                for name in ("rope_type", "type"):
                    if d.get(name) in LEGACY_TYPES:
                        d[name] = LEGACY_TYPES[d[name]]
    return config


def _head_dim(view):
    """HF's rotary head size: `getattr(config, "head_dim", None) or hidden_size // num_attention_heads` (every
    ROPE_INIT_FUNCTIONS entry and the models' compute_default_rope_parameters), through the class's attribute_map
    (DBRX's d_model, JetMoe's kv_channels, ...)."""
    dim = getattr(view, "head_dim", None)
    if not dim:
        hidden, heads = getattr(view, "hidden_size", None), getattr(view, "num_attention_heads", None)
        if not (hidden and heads):
            raise ValueError(f"{type(view).__name__} has no head_dim, nor hidden_size and num_attention_heads")
        dim = hidden // heads
    return int(dim)


def resolve(config, layer_type=None):
    """The layer type's RoPE as transformers' config class for config['model_type'] standardizes it, or None where
    transformers has no class for it (harness.hf.plain.resolve reads it then). Refusals are one ValueError
    line naming what HF refuses."""
    cls = config_class(config.get("model_type"))
    if cls is None:
        return None
    with quiet():
        try:
            hf = cls.from_dict(_new_names(copy.deepcopy(config)))
            text = hf.get_text_config(decoder=True)
            rp = getattr(text, "rope_parameters", None) or {}
            labels = text.nested_rope_parameter_keys(rp) if rp else []
            rope = choose_layer({k: rp[k] for k in labels} if labels else rp, bool(labels), layer_type)
            view = text
            if labels:
                try:
                    view = text.per_layer_config[layer_type]
                except ValueError:  # a label that is no layer type (DeepSeek-V4): HF's init functions use the config
                    pass
            try:
                head_dim, problem = _head_dim(view), None
            except (ValueError, AttributeError) as e:  # a vision config without one: its rope_type may say why
                head_dim, problem = None, _one_line(e)
            max_len = getattr(view, "max_position_embeddings", None)
            interleave = getattr(view, "rope_interleave", None)
        except LayerTypeError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the class refuses (its validators, a missing key) is input
            raise ValueError(f"transformers' {cls.__name__} refuses this config: {_one_line(e)}") from None
    model_type = getattr(text, "model_type", None)
    interleaved = model_type in ROTARY_INTERLEAVES or (
        model_type in INTERLEAVED_MODEL_TYPES if interleave is None else bool(interleave))
    return Resolved(dict(rope), head_dim, max_len, interleaved, model_type, problem)

