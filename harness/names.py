"""Names that configuration validates and low layers (model, measure) also need, without Hydra or OmegaConf:
harness.config re-exports them for its schema; importing this module costs nothing. Encoding and task names come
from their registries (harness.encodings.ENCODINGS, harness.tasks.TASK_NAMES)."""
ATTENTIONS = ("softmax", "linear")
QK_NORMS = ("none", "rms", "l2")  # harness.model.QK_NORM_SPECS: where and how each normalizes q and k
LOW_DTYPES = ("fp32", "bf16", "fp16")  # model-level precision: the dtype a trained model is run in
PRECISION_PROTOCOLS = ("cast", "autocast")  # ...by casting the module, or under torch.autocast
WANDB_MODES = ("offline", "online", "disabled")
