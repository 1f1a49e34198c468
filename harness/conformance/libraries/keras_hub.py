"""keras-hub's RotaryEmbedding layer on the torch backend (keras_hub/src/layers/modeling/rotary_embedding.py):
x (batch, seq, heads, features), positions given; its rope_type "dynamic" divides every frequency by
factor^(d/(d-2)), which is checked as HF's static ntk (base * factor^(d/(d-2))), the type it is closest to. The
layer is built with the activations' dtype as its dtype policy, as a keras-hub model in bf16 / fp16 builds its
layers (a layer's output is in its compute dtype, float32 by default, not the input's)."""
import os

from harness.conformance.libraries import lacks, rotary_dim, split

_TYPE = {"default": "linear", "linear": "linear", "ntk": "dynamic", "yarn": "yarn"}


def load():
    """keras_hub's RotaryEmbedding on the torch backend (KERAS_BACKEND=torch unless the user chose one)."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    if keras.backend.backend() != "torch":
        raise RuntimeError(f"keras runs on {keras.backend.backend()!r}; set KERAS_BACKEND=torch")
    from keras_hub.layers import RotaryEmbedding
    return RotaryEmbedding


def rope(q, k, positions, *, rope):
    RotaryEmbedding = load()
    lacks("keras-hub", rope)
    kind, r = rope["rope_type"], rotary_dim(rope)
    kw = dict(max_wavelength=rope["rope_theta"], scaling_factor=rope.get("factor", 1.0), rope_type=_TYPE[kind])
    if kind == "yarn":
        kw.update(original_max_position_embeddings=rope["original_max_position_embeddings"],
                  beta_fast=rope.get("beta_fast", 32.0), beta_slow=rope.get("beta_slow", 1.0))
    layer = RotaryEmbedding(dtype=str(q.dtype).removeprefix("torch."), **kw)  # "bfloat16", "float16", "float32"
    return tuple(split(lambda x: layer(x, positions=positions), x, r) for x in (q, k))
