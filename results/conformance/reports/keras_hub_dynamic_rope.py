"""keras-hub 0.32.0: `keras_hub.layers.RotaryEmbedding(rope_type="dynamic")` divides every frequency by
scaling_factor ** (d / (d - 2)) instead of scaling the base (keras_hub/src/layers/modeling/rotary_embedding.py,
`RotaryEmbedding._get_inverse_freq`: `return inv / ops.power(scaling_factor, rotary_dim / (rotary_dim - 2))`).

That is position interpolation by s^(d/(d-2)) (4.09 for s = 4), not NTK: NTK-aware scaling (YaRN paper arXiv
2309.00071 sec. 3.1, b' = b * s^(|D|/(|D|-2)); "dynamic" NTK, sec. 3.3) and HF transformers
`_compute_dynamic_ntk_parameters` (src/transformers/modeling_rope_utils.py) multiply the *base* by that power,
which keeps theta_0 = 1 and scales theta_{d/2-1} by ~1/s. HF's dynamic factor follows the sequence length; at
any factor, theta_0 stays 1. Setting: d 128, max_wavelength 10000, scaling_factor 4.
Expected theta_j / theta_j(unscaled) = 1.0000 (j=0), 0.4945 (j=32), 0.2500 (j=63); got 0.2446 for every j.
Exit 1 while the bug is present.
"""
import os
os.environ.setdefault("KERAS_BACKEND", "torch")
import numpy as np
import keras
from keras_hub.layers import RotaryEmbedding

D, BASE, S = 128, 10000.0, 4.0
x = np.zeros((1, 2, 1, D), "float32")  # (batch, seq, heads, features); x1 = 1, x2 = 0: out = (cos, sin)
x[..., :D // 2] = 1.0
layer = RotaryEmbedding(max_wavelength=BASE, scaling_factor=S, rope_type="dynamic", sequence_axis=1)
y = keras.ops.convert_to_numpy(layer(x)).astype(np.float64)[0, 1, 0]  # position 1
got = np.arctan2(y[D // 2:], y[:D // 2])  # theta_j, in fp64

j = np.arange(0, D, 2)
ref = (BASE * S ** (D / (D - 2))) ** (-j / D)  # fp64 NTK-aware: base * s^(d/(d-2))
plain = BASE ** (-j / D)
print("theta_j / theta_j(unscaled) at j = 0, 32, 63")
print("  keras-hub:", " ".join(f"{v:.4f}" for v in (got / plain)[[0, 32, 63]]))
print("  expected: ", " ".join(f"{v:.4f}" for v in (ref / plain)[[0, 32, 63]]))
rel = np.abs(got / ref - 1).max()
print(f"max relative error in theta_j: {rel:.3g}")
raise SystemExit(1 if rel > 1e-5 else 0)
