"""NoPE: no positional information beyond the causal mask (Kazemnejad et al. 2023)."""
from harness.encodings._base import Encoding


class NoPE(Encoding):
    """Every hook is the identity; causal attention alone must carry position."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("none",
            "—",
            "Kazemnejad et al. 2023")

    relative = True  # trivially: logits do not depend on positions at all
