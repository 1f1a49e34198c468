"""Equinox's eqx.nn.RotaryPositionalEmbedding(embedding_size, theta, dtype) (equinox/nn/_embedding.py), called as its
docstring's TransformerBlock calls it: jax.vmap(rope, in_axes=1, out_axes=1)(heads) on (seq_length, num_heads,
qk_size) JAX arrays. It has no positions argument: a call of length L rotates positions 0..L-1 (its cos/sin table,
built by precompute_freqs_cis in `dtype`, default fp32, is cached per (embedding_size, dtype) and cut to L), so the
entry asks for dense positions and the suite gathers the sampled rows. Half pairs (rotate_half); the output is cast
back to x's dtype. Plain RoPE only; partial rotary as a model would do it, the module over the first R features."""
from harness.conformance.libraries import lacks, rotary_dim


def rope(q, k, positions, *, rope):
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    lacks("equinox", rope)
    if [int(p) for p in positions.tolist()] != list(range(q.shape[1])):
        raise ValueError("equinox rotates positions 0..L-1 only: call with --positions dense")
    r = rotary_dim(rope)
    emb = eqx.nn.RotaryPositionalEmbedding(embedding_size=r, theta=rope["rope_theta"])
    rotate = jax.vmap(emb, in_axes=1, out_axes=1)  # over heads, (L, H, R) -> (L, H, R)
    return tuple(jnp.concatenate([rotate(x[0, ..., :r]), x[0, ..., r:]], axis=-1)[None] for x in (q, k))
