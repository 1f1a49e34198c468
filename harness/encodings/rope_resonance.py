"""Resonance RoPE (Wang et al., ACL Findings 2024, arXiv 2403.00071): every RoPE wavelength rounded to an integer.

Feature pair i rotates with wavelength λ_i = 2π/θ_i; Resonance RoPE uses θ'_i = 2π / round(λ_i), so the rotation
of pair i repeats exactly every round(λ_i) positions and a position beyond the training length shows each feature
a phase it was trained on. The rounding acts on the frequencies the rope_type produced ("Resonance YaRN" =
YaRN, then round), as the authors do: sheryc/resonance_rope at 4a7f5a703b2e96756939db51916937ab7c5ab3a9,
llama_finetuning/scaled_rope/modeling_llama_yarn.py (`LlamaResonanceYaRNScaledRotaryEmbedding.yarn` builds YaRN's
inv_freq, then `resonance_register` rounds 2π/inv_freq) and src/models/components/positional_embedding/
rotary_resonance.py (`ResonanceNTKScaledRotaryEmbedding` scales the base first, `ResonanceYaRNScaledRotaryEmbedding`
rounds YaRN's inv_freq). That file's `ResonanceLinearScaledRotaryEmbedding` rounds before dividing positions by
the factor, but reads attributes the class never sets (`r_wavelength`, `inv_freq`), so it cannot run; here
`linear`, like every rope_type, is rounded after scaling.

Short wavelengths: the authors do not guard (their frequencies are <= 1, so λ_i >= 2π rounds to >= 6). Here a
λ_i that rounds to 0 (θ_i > 4π: 2π/0 would be an infinite frequency) is refused; one that rounds to 1 gives
θ' = 2π, the identity at every integer position (that pair becomes position-independent), and 2 gives θ' = π
(a sign flip per step): both are what the formula says and are kept. A zero frequency (p-RoPE's identity pairs,
rope_type `proportional`) has λ = inf and stays zero.

The table reduces each position modulo round(λ_i) before multiplying by θ'_i, as the authors' `compute_freqs`
tiles arange(round(λ_i)) * θ'_i: the phase stays in [0, 2π), so the table at p and p + round(λ_i) is the same
to the bit, and its fp32 error is bounded by the phase (< 2π), not the position (tests/test_rope_variants_2024.py).
"""
import math

import torch

from harness.encodings.rope import Rope
from harness.rope import to_device
from harness.rope.frequencies import SEQ_LEN_TYPES

NO_PERIOD = 2.0 ** 62  # stands in for an infinite wavelength: remainder by it leaves int64 positions unchanged


class RopeResonance(Rope):
    """RoPE with integer wavelengths; any base, layout, partial rotary and rope_type, as `rope`."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary, wavelengths rounded to integers θ' = 2π/round(2π/θ), any `rope_type` (yarn = Resonance YaRN)",
            "rotate",
            "Wang et al. 2024")

    def __init__(self, *, head_dim, base=10000.0, layout="half", partial_rotary_factor=1.0,
                 rope_type="default", scaling=None, impl="auto"):
        super().__init__(head_dim=head_dim, base=base, layout=layout, partial_rotary_factor=partial_rotary_factor,
                         rope_type=rope_type, scaling=scaling, impl=impl)
        self.wavelengths(None)  # refuse a wavelength that rounds to 0 at build time

    def wavelengths(self, seq_len):
        """(round(2π/θ_i) (R/2,) float64, attention_factor): integers, inf where the rope_type's θ_i is 0.
        Rounded in fp64 from the rope_type's fp32 θ_i (the authors round in fp32; the two differ only for a λ_i
        within ~1e-7 relative of a half-integer). torch.round is half-to-even, as the authors' code."""
        theta, attention_factor = super().frequencies(seq_len)
        wavelength = torch.round(2 * math.pi / theta.double())  # (R/2,)
        if (wavelength == 0).any():
            raise ValueError(f"rope_resonance: a wavelength 2π/θ below 0.5 rounds to 0 (θ = {float(theta.max()):.4g}"
                             f" > 4π); lower the frequencies (base, rope_type) or use `rope`")
        return wavelength, attention_factor

    def frequencies(self, seq_len):
        """(θ'_i = 2π/round(λ_i) (R/2,) float32, attention_factor); 0 where λ_i is inf."""
        wavelength, attention_factor = self.wavelengths(seq_len)
        return (2 * math.pi / wavelength).float(), attention_factor

    def _table(self, pos, dtype):
        """cos, sin (T, R/2) of (pos mod round(λ_i)) · θ'_i for positions pos (T,); phase in fp32 or fp64 (as rope).
        θ' is made in the phase's dtype from the integer wavelength, so an fp64 table is exact to fp64."""
        needs_len = self.rope_type in SEQ_LEN_TYPES and pos.numel()  # pos.max() is a device-to-host sync
        wavelength, attention_factor = self.wavelengths(int(pos.max()) + 1 if needs_len else None)
        work = torch.promote_types(torch.float32, dtype)
        wavelength = to_device(wavelength, pos.device)
        period = wavelength.nan_to_num(posinf=NO_PERIOD).clamp(max=NO_PERIOD)  # (R/2,)
        period = period.to(pos.dtype) if pos.dtype.is_floating_point else period.long()
        reduced = torch.remainder(pos[:, None], period)  # (T, R/2), exact: integer, or fmod of floats
        phase = reduced.to(work) * (2 * math.pi / wavelength).to(work)  # in [0, 2π); 0 for a zero frequency
        return phase.cos() * attention_factor, phase.sin() * attention_factor
