"""Apple MLX's fused kernel mlx.core.fast.rope(a, dims, traditional, base, scale, offset) (mlx/fast.cpp's
docstring): a (B, H, L, D) mlx arrays, positions offset + arange(L) times scale; half pairs (traditional
False); linear interpolation as scale = 1 / factor; partial by dims."""
from harness.conformance.libraries import lacks, rotary_dim


def rope(q, k, positions, *, rope):
    import mlx.core as mx
    lacks("mlx", rope)
    kw = dict(traditional=False, base=rope["rope_theta"],
              scale=1.0 / rope["factor"] if rope["rope_type"] == "linear" else 1.0)
    r, pos = rotary_dim(rope), [int(p) for p in positions.tolist()]
    if pos == list(range(len(pos))):
        return tuple(mx.fast.rope(x, r, offset=0, **kw) for x in (q, k))
    return tuple(mx.concatenate([mx.fast.rope(x[..., i:i + 1, :], r, offset=p, **kw) for i, p in enumerate(pos)],
                                axis=-2) for x in (q, k))
