"""Apple MLX's fused kernel mlx.core.fast.rope(a, dims, traditional, base, scale, offset) (mlx/fast.cpp's
docstring): a (B, H, L, D) mlx arrays, positions offset + arange(L) times scale; half pairs (traditional False,
`rope`) or interleaved pairs (traditional True, `rope_traditional`, as mlx-lm's Llama with rope_traditional);
linear interpolation as scale = 1 / factor; partial by dims."""
from harness.conformance.libraries import lacks, rotary_dim


def _rope(q, k, positions, rope, traditional):
    import mlx.core as mx
    lacks("mlx", rope)
    kw = dict(traditional=traditional, base=rope["rope_theta"],
              scale=1.0 / rope["factor"] if rope["rope_type"] == "linear" else 1.0)
    r, pos = rotary_dim(rope), [int(p) for p in positions.tolist()]
    if pos == list(range(len(pos))):
        return tuple(mx.fast.rope(x, r, offset=0, **kw) for x in (q, k))
    return tuple(mx.concatenate([mx.fast.rope(x[..., i:i + 1, :], r, offset=p, **kw) for i, p in enumerate(pos)],
                                axis=-2) for x in (q, k))


def rope(q, k, positions, *, rope):
    return _rope(q, k, positions, rope, traditional=False)


def rope_traditional(q, k, positions, *, rope):
    return _rope(q, k, positions, rope, traditional=True)
