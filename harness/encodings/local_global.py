"""Local/global alternation as Gemma 3 and 4 ship it: `local_layers` sliding-window RoPE layers with base
`local_base`, then one global RoPE layer with `global_base` (Gemma 3 technical report, arXiv 2503.19786: 5:1,
window 1024, bases 10k / 1M). Gemma 4's global layers use p-RoPE (`global_rope_type: proportional`,
`global_partial_rotary_factor: 0.25`; harness/rope/frequencies.py). Defaults scaled to this harness's 2-layer,
64-token models: 1:1, window half the train length; the bases are Gemma's."""
from harness.encodings import rope
from harness.encodings._layered import Layered, Windowed, check_depth
from harness.encodings._params import count, fraction, positive


class LocalGlobal(Layered):
    """cycle = [Windowed(rope(local_base), window)] * local_layers + [rope(global_base, global_rope_type)]."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("per layer: sliding-window RoPE (local base), then global RoPE (global base, optional p-RoPE)",
            "rotate + window, per layer",
            "Gemma 3 / 4")

    RANGES = {"local_layers": count(1), "local_base": positive(), "global_base": positive(),
              "global_partial_rotary_factor": fraction(lo_open=True)}

    relative = True  # RoPE (any rope_type here is position-independent scaling) + a window of distances
    rotary = True

    def __init__(self, *, head_dim, window=32, local_layers=1, local_base=10000.0, global_base=1000000.0,
                 global_rope_type="default", global_partial_rotary_factor=1.0, impl="auto", n_layers=None):
        if not isinstance(local_layers, int) or local_layers < 1:
            raise ValueError(f"local_layers must be an integer >= 1 (sliding-window layers per global layer), "
                             f"got {local_layers!r}")
        check_depth("local_global", "local_layers", local_layers, local_layers + 1, n_layers, "global")
        local = Windowed(rope.Rope(head_dim=head_dim, base=local_base, impl=impl), window)
        glob = rope.Rope(head_dim=head_dim, base=global_base, rope_type=global_rope_type,
                         partial_rotary_factor=global_partial_rotary_factor, impl=impl)
        super().__init__([local] * local_layers + [glob])
