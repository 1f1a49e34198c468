"""iRoPE, Llama 4's per-layer policy (transformers models/llama4/modeling_llama4.py and
configuration_llama4.py): RoPE layers with Llama 4's weightless QK-norm after the rotation, and every
`nope_every`-th layer (1-based: layer i is NoPE when (i + 1) % nope_every == 0, as HF's no_rope_layers) a
NoPE layer whose queries get the attention temperature log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1
(arXiv 2501.19399). Llama 4: nope_every 4, rope_theta 500000, interleaved pairs (its complex rotation),
floor_scale 8192, attn_scale 0.1. Defaults scaled to this harness's 2-layer, 64-token models: nope_every 2,
floor_scale 64 (the temperature starts beyond the train length, as Llama 4's beyond 8k)."""
from harness.encodings import rope
from harness.encodings._layered import L2Normed, Layered, QueryTemperature, check_depth
from harness.encodings._params import count, nonnegative, positive


class IRoPE(Layered):
    """cycle = [L2Normed(rope)] * (nope_every - 1) + [QueryTemperature]; rope_qk_norm=False drops the norm."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("per layer: QK-normed RoPE layers, every `nope_every`-th a NoPE layer with query temperature",
            "rotate, per layer",
            "Llama 4 (HF `modeling_llama4.py`)")

    RANGES = {"nope_every": count(2), "floor_scale": positive(), "attn_scale": nonnegative()}

    relative = False  # the NoPE layers' temperature reads absolute positions
    rotary = False  # the QK-norm rescales q and k

    def __init__(self, *, head_dim, nope_every=2, base=500000.0, layout="interleaved", rope_qk_norm=True,
                 floor_scale=64.0, attn_scale=0.1, impl="auto", n_layers=None):
        if not isinstance(nope_every, int) or nope_every < 2:
            raise ValueError(f"nope_every must be an integer >= 2 (every n-th layer is NoPE), got {nope_every!r}")
        check_depth("irope", "nope_every", nope_every, nope_every, n_layers, "NoPE")
        r = rope.Rope(head_dim=head_dim, base=base, layout=layout, impl=impl)
        super().__init__([L2Normed(r) if rope_qk_norm else r] * (nope_every - 1)
                         + [QueryTemperature(floor_scale, attn_scale)])
