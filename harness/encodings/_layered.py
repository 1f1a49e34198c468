"""Per-layer policies (DESIGN.md §2): a cycle of per-layer encodings repeated over the depth, e.g. Llama 4's
three RoPE layers and one NoPE layer. Not registered (the module starts with '_'): an encoding with a policy
subclasses Layered and builds its cycle in its constructor, so it stays one file + one YAML. Every block asks
`encoding.at(block.layer)` for its own; hooks are never called on the policy itself."""
import math

import torch
from torch import nn

from harness.encodings._base import Encoding, Wrapper


class Windowed(Wrapper):
    """`inner` plus causal sliding-window attention: query i sees keys j with i - window < j <= i, as HF's
    `sliding_window` (transformers masking_utils.sliding_window_overlay: kv_idx > q_idx - sliding_window).
    The window is a -inf bias, so it composes with any other bias; distances are position differences."""

    def __init__(self, inner, window):
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError(f"window must be an integer >= 1 (keys a query sees, itself included), got {window!r}")
        super().__init__(inner)
        self.window = window

    def bias(self, q, q_pos, k_pos):
        """inner's bias (or none) + (1, Tq, Tk) -inf beyond the window."""
        return self._windowed(q, q_pos, k_pos, self.inner.bias(q, q_pos, k_pos))

    def scores_bias(self, q, k, q_pos, k_pos, state):
        return self._windowed(q, q_pos, k_pos, self.inner.scores_bias(q, k, q_pos, k_pos, state))

    def _windowed(self, q, q_pos, k_pos, inner):
        far = (q_pos[:, None] - k_pos[None, :]) >= self.window  # (Tq, Tk)
        mask = torch.zeros(far.shape, dtype=q.dtype, device=q.device).masked_fill(far, float("-inf"))[None]
        return mask if inner is None else inner + mask


def check_depth(encoding, knob, value, period, n_layers, last):
    """A per-layer policy's cycle of `period` layers ends in its `last` layer (local_global's global one): a model
    of fewer layers (n_layers, when the builder gives it) never reaches that layer and would run under the
    policy's name without it. Called by the policies' constructors."""
    if n_layers is not None and n_layers < period:
        raise ValueError(f"{encoding} {knob}={value} makes a cycle of {period} layers ending in its {last} layer, but "
                         f"model.n_layers={n_layers} never reaches it: lower {knob} or use model.n_layers >= {period}")


class Layered(Encoding):
    """A cycle of encodings: block `layer` uses cycle[layer % len(cycle)]. Members may not embed (the token
    embeddings are shared by every layer) and are checked at build time."""

    def __init__(self, cycle):
        super().__init__()
        for e in cycle:
            if type(e).embed is not Encoding.embed:
                raise ValueError(f"a per-layer policy cannot hold {type(e).__name__}: it adds to the token "
                                 f"embeddings, which every layer shares; use an encoding that rotates or biases")
        self.cycle = nn.ModuleList(cycle)
        self.period = len(cycle)

    def at(self, layer):
        return self.cycle[layer % self.period]

    def rotate(self, q, k, pos):
        raise TypeError(f"{type(self).__name__} acts per layer: call at(layer).rotate")

    def bias(self, q, q_pos, k_pos):
        raise TypeError(f"{type(self).__name__} acts per layer: call at(layer).bias")

    @property
    def has_bias(self):
        return any(e.has_bias for e in self.cycle)

    @property
    def bias_only(self):
        return False  # no one bias is the whole positional signal: each layer has its own

    def end_forward(self):
        for e in self.cycle:
            e.end_forward()


class PerLayer(Encoding):
    """An encoding with its own parameters in every layer (FoX's forget gates; rope-vit's and ComRoPE's learned
    rotations are per block too): the instance serves layer 0 and `deeper` holds one more of its kind for each
    further layer, built by `make()`. Unlike a Layered cycle, a model deeper than n_layers is refused at build
    (the Transformer asks at(i) of every block), so no two layers share parameters by accident."""

    def own_layers(self, n_layers, make):
        """Call at the end of __init__ (after this layer's parameters, so their init draws come first)."""
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"{self.name or type(self).__name__} n_layers must be an integer >= 1 (its "
                             f"parameters per layer), got {n_layers!r}")
        self.deeper = nn.ModuleList(make() for _ in range(n_layers - 1))
        self.period = n_layers

    def at(self, layer):
        if not 0 <= layer < self.period:
            raise ValueError(f"{self.name or type(self).__name__} was built with parameters for {self.period} "
                             f"layers (n_layers), not layer {layer}: build it with the model's n_layers")
        return self if layer == 0 else self.deeper[layer - 1]

    def end_forward(self):
        super().end_forward()
        for e in self.deeper:
            e.end_forward()


class L2Normed(Wrapper):
    """`inner`, then Llama 4's weightless QK-norm on its output: x * rsqrt(mean(x^2) + eps) over D, in fp32
    (transformers models/llama4/modeling_llama4.py: Llama4TextL2Norm after apply_rotary_emb, RoPE layers only)."""

    def __init__(self, inner, eps=1e-5):
        super().__init__(inner)
        self.eps = eps
        self.rotary = False  # the norm changes q's and k's lengths: not an orthogonal map

    def rotate(self, q, k, pos):
        q, k = self.inner.rotate(q, k, pos)
        return self._norm(q), self._norm(k)

    def _norm(self, x):
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class QueryTemperature(Encoding):
    """Llama 4's attention temperature tuning on its NoPE layers (arXiv 2501.19399): q at position p is scaled
    by log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1, which is 1 below floor_scale - 1 and grows
    with the log of the position beyond (transformers models/llama4/modeling_llama4.py,
    Llama4TextAttention.forward, attn_temperature_tuning). Absolute: it reads positions, not distances."""

    def __init__(self, floor_scale, attn_scale):
        super().__init__()
        if not (floor_scale > 0 and attn_scale >= 0 and math.isfinite(floor_scale) and math.isfinite(attn_scale)):
            raise ValueError(f"temperature needs finite floor_scale > 0 and attn_scale >= 0, got {floor_scale}, "
                             f"{attn_scale}")
        self.floor_scale, self.attn_scale = float(floor_scale), float(attn_scale)

    def scale(self, pos):
        """(T,) fp32 factors for positions pos (T,)."""
        return torch.log1p(torch.floor((pos.float() + 1.0) / self.floor_scale)) * self.attn_scale + 1.0

    def rotate(self, q, k, pos):
        return (q * self.scale(pos).to(q.device)[:, None]).to(q.dtype), k
