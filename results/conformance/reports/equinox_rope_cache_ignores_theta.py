"""equinox 0.13.8: `eqx.nn.RotaryPositionalEmbedding` caches its cos/sin table keyed by (embedding_size, dtype) only
(equinox/nn/_embedding.py, `internal_rope_embedding_cache`), not by `theta`. Two modules of the same size and
different theta in one process (two models, or layers of different bases) share whichever table was built first.
Setting: head size 64, L = 512, jax CPU, used as the class docstring's TransformerBlock uses it
(jax.vmap(rope, in_axes=1, out_axes=1) over heads). Expected (RoFormer arXiv 2104.09864 eq. 34, half pairs as HF
transformers' modeling_llama.rotate_half, theta_j = theta^(-2j/d), fp64): a theta=5e5 module rotates by 5e5's
angles whatever was built before it. Got: built first it is right (max error / max |ref| 1.5e-5, fp32); built
after a theta=1e4 module it rotates by 1e4's angles (1.7). Exit 1 while the bug is present.
"""
import equinox as eqx
import jax
import numpy as np

L, D = 512, 64
x = np.random.default_rng(0).standard_normal((L, 1, D)).astype(np.float32)  # (seq, heads, head size)


def reference(theta):
    ang = np.arange(L)[:, None] * theta ** (-np.arange(0, D, 2) / D)  # fp64 (L, D/2)
    c, s = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))
    rot = np.concatenate([-x[:, 0, D // 2:], x[:, 0, :D // 2]], 1).astype(np.float64)
    return x[:, 0].astype(np.float64) * c + rot * s


def run(theta):
    out = jax.vmap(eqx.nn.RotaryPositionalEmbedding(embedding_size=D, theta=theta), in_axes=1, out_axes=1)(x)
    ref = reference(theta)
    return np.abs(np.asarray(out)[:, 0] - ref).max() / np.abs(ref).max()


first = run(5e5)  # nothing cached yet: right
eqx.clear_caches()  # equinox's public reset of its internal caches, this one among them
run(1e4)          # a theta=1e4 module of the same size fills the cache
after = run(5e5)  # a new theta=5e5 module: served the 1e4 table
print(f"theta=5e5 built first: rel. error {first:.2e}; built after theta=1e4: rel. error {after:.2e}")
raise SystemExit(1 if after > 1e-3 else 0)
