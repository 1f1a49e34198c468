"""RNoPE-SWA (Yang et al. 2025, "Rope to Nope and Back Again: A New Hybrid Attention Strategy", arXiv
2501.18795; Cohere Command A): `rope_layers` RoPE layers with sliding-window attention, then one global NoPE
layer, repeated over the depth. The paper's ratio is 3:1 with a 4k window; the defaults here are scaled to this
harness's 2-layer, 64-token models (1:1, window half the train length), so the NoPE layer exists in them."""
from harness.encodings import nope, rope
from harness.encodings._layered import Layered, Windowed, check_depth
from harness.encodings._params import count


class RNoPESWA(Layered):
    """cycle = [Windowed(rope, window)] * rope_layers + [nope]; the RoPE layers share one table."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("per layer: `rope_layers` sliding-window RoPE layers, then a global NoPE layer",
            "rotate + window, per layer",
            "Yang et al. 2025")

    RANGES = {"rope_layers": count(1)}

    relative = True  # RoPE + a window of distances, and NoPE: logits depend on i - j only
    rotary = True  # every layer's rotate is orthogonal (RoPE, or none)

    def __init__(self, *, head_dim, window=32, rope_layers=1, base=10000.0, impl="auto", n_layers=None):
        if not isinstance(rope_layers, int) or rope_layers < 1:
            raise ValueError(f"rope_layers must be an integer >= 1 (RoPE-SWA layers per NoPE layer), "
                             f"got {rope_layers!r}")
        check_depth("rnope_swa", "rope_layers", rope_layers, rope_layers + 1, n_layers, "global NoPE")
        swa = Windowed(rope.Rope(head_dim=head_dim, base=base, impl=impl), window)
        super().__init__([swa] * rope_layers + [nope.NoPE()])
