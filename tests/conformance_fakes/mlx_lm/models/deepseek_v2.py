"""mlx_lm/models/deepseek_v2.py DeepseekV2YarnRotaryEmbedding(dim, max_position_embeddings, base, scaling_factor, ...)
(x, offset): mx.fast.rope over x.shape[-1], traditional=True; the fake has no YaRN (scaling_factor 1 only)."""
import mlx.core as mx


class DeepseekV2YarnRotaryEmbedding:
    def __init__(self, dim, max_position_embeddings=2048, base=10000, scaling_factor=1.0, **kw):
        if scaling_factor != 1.0:
            raise NotImplementedError("the fake has no YaRN")
        self.base = base

    def __call__(self, x, offset=0):
        return mx.fast.rope(x, x.shape[-1], traditional=True, base=self.base, scale=1.0, offset=offset)
