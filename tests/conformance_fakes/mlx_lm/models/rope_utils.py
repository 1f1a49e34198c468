"""mlx_lm/models/rope_utils.py initialize_rope(dims, base, traditional, scaling_config, max_position_embeddings):
nn.RoPE for default and linear (scale = 1 / factor), layer(x, offset) -> mlx.core.fast.rope (the fake's, on torch);
the fake has no other rope_type."""
import mlx.core as mx


class _RoPE:
    def __init__(self, dims, traditional=False, base=10000, scale=1.0):
        self.dims, self.traditional, self.base, self.scale = dims, traditional, base, scale

    def __call__(self, x, offset=0):
        return mx.fast.rope(x, self.dims, traditional=self.traditional, base=self.base, scale=self.scale,
                            offset=offset)


def initialize_rope(dims, base, traditional, scaling_config=None, max_position_embeddings=None):
    kind = (scaling_config or {}).get("rope_type", "default")
    if kind not in ("default", "linear"):
        raise NotImplementedError(f"the fake has no {kind}")
    scale = 1 / scaling_config["factor"] if kind == "linear" else 1.0
    return _RoPE(dims, traditional=traditional, base=base, scale=scale)
