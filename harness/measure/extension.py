"""RoPE context extension at evaluation time: rescale a trained rotary encoding without retraining.

Applies to every encoding whose constructor takes `rope_type` (the HF rope_scaling mechanism) and that
was trained with rope_type 'default'; no encoding name is tested here. The trained encoding is swapped
for the same one built with rope_type = <extension> and HF rope_scaling keys; its state dict is copied
over (plain RoPE has none, so the swap is exact). Rows keep the trained encoding's name; their params
JSON gains `extension` and `factor` (and rope_type/scaling are the applied ones), and for fine-tuned variants `finetune_steps` and
`finetune_len`. Optionally each extension is also fine-tuned briefly at a longer length first
(PI, Chen et al. 2023: ~1000 steps at the target length; here eval.extension.finetune_steps), with the
unscaled RoPE fine-tuned the same way as a control (extension 'default')."""
import copy
import dataclasses
import inspect

from harness import encodings, train
from harness.names import EXTENSION_VARIANTS
from harness.rope import ROPE_INIT_FUNCTIONS

# dynamic NTK already rescales by current_len / original_len; its HF `factor` multiplies that ratio,
# so 'auto' (= eval_len / train_len) would apply the ratio twice. Its auto factor is therefore 1.
SELF_SCALING = {"dynamic"}


def applies(encoding_dict, variant=None):
    """True when the encoding can be rescaled with a rope_type (and was trained without one); with a variant
    (harness.names.EXTENSION_VARIANTS) that names its own encoding, also when that encoding is a subclass of the
    trained one (it takes the trained parameters and state: rope_resonance of a trained rope)."""
    name = encoding_dict["name"]
    if not ("rope_type" in encodings.parameters(name) and encoding_dict.get("rope_type", "default") == "default"):
        return False
    own = EXTENSION_VARIANTS[variant][0] if variant else None
    return own is None or issubclass(encodings.ENCODINGS[own], encodings.ENCODINGS[name])


def factor_for(rope_type, ext_cfg, eval_len, train_len):
    """The HF `factor` for this extension at eval_len ('auto' = eval_len / train_len, at least 1)."""
    if ext_cfg.factor != "auto":
        return float(ext_cfg.factor)
    return 1.0 if rope_type in SELF_SCALING else max(1.0, eval_len / train_len)


def scaling(rope_type, factor, ext_cfg, train_len):
    """HF rope_scaling keys this rope_type takes, from the extension config (signature-driven)."""
    offered = dict(factor=factor, original_max_position_embeddings=train_len,
                   beta_fast=ext_cfg.beta_fast, beta_slow=ext_cfg.beta_slow,
                   low_freq_factor=ext_cfg.low_freq_factor, high_freq_factor=ext_cfg.high_freq_factor)
    takes = inspect.signature(ROPE_INIT_FUNCTIONS[rope_type]).parameters
    return {k: v for k, v in offered.items() if k in takes}


def extended(model, encoding_dict, rope_type, scale, name=None):
    """A shallow copy of model whose shared encoding is rebuilt with rope_type and scaling (the model's
    own dimensions), as encoding `name` when given (a subclass of the trained one: applies())."""
    params = {k: v for k, v in encoding_dict.items() if k != "name"}
    params.update(rope_type=rope_type, scaling=scale)
    block = model.blocks[0]
    enc = encodings.build(name or encoding_dict["name"], d_model=model.tok.embedding_dim, n_heads=block.n_heads,
                          head_dim=block.head_dim, **params)
    enc.load_state_dict(model.encoding.state_dict())
    out = copy.copy(model)  # shares the trained blocks; only the encoding attribute differs
    out._modules = dict(model._modules, encoding=enc.to(next(model.parameters()).device))
    return out


def rows(model, evaluate, encoding_dict, ext, *, train_len, lens, task, train_cfg, generator, device,
         progress=True):
    """Extension rows for every variant (ext.types, harness.names.EXTENSION_VARIANTS) x factor setting
    (ext.factors, else ext.factor) x eval length (x fine-tune length when ext.finetune_steps > 0).
    evaluate(model, L) -> the extrapolation rows of `model` at length L (the runner's scoring knobs, under
    ext.protocol); ext: the extension knobs (ExtensionConfig); task, train_cfg, generator: fine-tuning."""
    if not applies(encoding_dict):
        return []
    out = []
    for variant in ext.types:
        if not applies(encoding_dict, variant):
            continue
        own, rope_type = EXTENSION_VARIANTS[variant]
        for setting in ext.factors or [ext.factor]:
            at = dataclasses.replace(ext, factor=setting)
            for L in lens:
                f = factor_for(rope_type, at, L, train_len)
                scale = scaling(rope_type, f, at, train_len)
                m = extended(model, encoding_dict, rope_type, scale, own)
                for r in evaluate(m, L):
                    r["extra_params"].update(extension=variant, factor=f, rope_type=rope_type, scaling=scale)
                    out.append(r)
        if ext.finetune_steps > 0:
            out += _finetuned(model, evaluate, encoding_dict, ext, variant, train_len, lens, task, train_cfg,
                              generator, device, progress)
    if ext.finetune_steps > 0 and ext.types:
        # control: the unscaled RoPE fine-tuned the same way, so an extension's gain is not confused with
        # the gain of the extra training steps (rows: extension 'default', factor 1)
        out += _finetuned(model, evaluate, encoding_dict, ext, "default", train_len, lens, task, train_cfg,
                          generator, device, progress)
    return out


def _finetuned(model, evaluate, encoding_dict, ext, variant, train_len, lens, task, train_cfg, generator, device,
               progress):
    """Fine-tune a copy at each finetune length with the extension applied, then evaluate all lengths."""
    own, rope_type = EXTENSION_VARIANTS.get(variant, (None, variant))  # 'default': the unscaled control
    out = []
    for FL in ext.finetune_lens or [4 * train_len]:
        f = 1.0 if rope_type == "default" else factor_for(rope_type, ext, FL, train_len)
        scale = scaling(rope_type, f, ext, train_len)
        m = extended(copy.deepcopy(model), encoding_dict, rope_type, scale, own)
        tcfg = dataclasses.replace(train_cfg, seq_len=FL, steps=ext.finetune_steps,
                                   warmup=max(1, ext.finetune_steps // 10), lr=train_cfg.lr * 0.3)
        res = train.fit(m, task, tcfg, generator, device, progress, desc=f"finetune {variant}@{FL}")
        for L in lens:
            for r in evaluate(m, L):
                r["extra_params"].update(extension=variant, factor=f, rope_type=rope_type, scaling=scale,
                                         finetune_steps=ext.finetune_steps,
                                         finetune_len=FL, finetune_status=res.status)
                out.append(r)
    return out
