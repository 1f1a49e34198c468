"""Names that configuration validates and low layers (model, measure) also need, without Hydra or OmegaConf:
harness.config re-exports them for its schema; importing this module costs nothing. Encoding and task names come
from their registries (harness.encodings.ENCODINGS, harness.tasks.TASK_NAMES)."""
ATTENTIONS = ("softmax", "linear")
QK_NORMS = ("none", "rms", "l2")  # harness.model.QK_NORM_SPECS: where and how each normalizes q and k
LOW_DTYPES = ("fp32", "bf16", "fp16")  # model-level precision: the dtype a trained model is run in
PRECISION_PROTOCOLS = ("cast", "autocast")  # ...by casting the module, or under torch.autocast
WANDB_MODES = ("offline", "online", "disabled")
# Eval-time RoPE extensions, one name on the laptop (eval.extension.types) and on a pretrained model
# (pretrained.extension): name -> (encoding, rope_type); encoding None = the model's own RoPE encoding rebuilt with
# the rope_type. resonance_yarn is YaRN with every wavelength rounded to an integer (Wang et al. 2024,
# arXiv 2403.00071, their ResonanceYaRN).
EXTENSION_VARIANTS = {
    "none": (None, "default"),
    "linear": (None, "linear"),          # PI, Chen et al. 2023 (arXiv 2306.15595)
    "ntk": (None, "ntk"),                # static NTK-aware base, bloc97 2023
    "dynamic": (None, "dynamic"),        # dynamic NTK (HF's `dynamic`)
    "yarn": (None, "yarn"),              # Peng et al. 2023 (arXiv 2309.00071)
    "llama3": (None, "llama3"),          # Llama 3.1 (arXiv 2407.21783)
    "resonance_yarn": ("rope_resonance", "yarn"),
}
