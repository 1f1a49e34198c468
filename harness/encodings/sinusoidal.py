"""Sinusoidal absolute encoding (Vaswani et al. 2017, arXiv 1706.03762): PE[p, 2i] = sin(p w_i),
PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/d), added to token embeddings; defined for every position."""
import torch

from harness.encodings._base import Encoding
from harness.encodings._params import positive


def table(pos, d_model, base=10000.0):
    """(T, d_model) encoding of positions pos (T,), phase in float64 so long positions stay exact."""
    w = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    phase = pos.to(torch.float64)[:, None] * w
    return torch.stack((phase.sin(), phase.cos()), dim=-1).flatten(-2)[:, :d_model]


class Sinusoidal(Encoding):
    """No parameters; computed on the fly for whatever positions arrive.

    Vaswani et al. multiply token embeddings by sqrt(d_model) before adding the unit-amplitude table; our
    embeddings are initialised at std 0.02 and tied to the output, so we scale the table by `scale`
    (default d_model^-1/2) instead: the same ratio. Unscaled, the table swamped the tokens (PPL 20 on kjv)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("absolute",
            "embed",
            "Vaswani et al. 2017")

    RANGES = {"scale": positive(null="d_model^-1/2")}

    def __init__(self, *, d_model, base=10000.0, scale=None):
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal needs an even d_model, got {d_model}")
        self.d_model, self.base = d_model, float(base)
        self.scale = d_model ** -0.5 if scale is None else float(scale)

    def embed(self, x, pos):
        return x + self.scale * table(pos, self.d_model, self.base).to(x.dtype)
