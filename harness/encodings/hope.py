"""HoPE (Chen et al., ACL 2025, arXiv 2410.21216): RoPE keeping only the pairs that turn fully within training.

RoPE's pair i has θ_i = base^(-2i/D) and wavelength λ_i = 2π/θ_i. HoPE ("High-frequency rotary Position
Encoding") keeps the high-frequency pairs and replaces the others by position-independent features: they are left
unrotated, so their share of q·k is a plain dot product, with no long-term decay and no phase outside the trained
range. The paper removes the components "activated" within the training length (those it finds shaping the
U-shaped attention) and all lower frequencies; here a pair is kept when it completes a full rotation within the
training length L, λ_i <= L (θ_i L >= 2π), and removed when its rotation over every trained distance is
incomplete. This is the split of Liu et al.'s critical dimension (arXiv 2310.05209): 2⌈(D/2) log_base(L/2π)⌉
features have λ_i <= L (up to the tie λ_i = L, kept here). No author code was found to pin the boundary further.

Layout: the n = #{i: λ_i <= L} kept pairs (RoPE's first n for base > 1; same θ_i, exponent over the full D) are on
features [0, 2n) as partial rotary does: `half` pairs (j, j + n), `interleaved` (2j, 2j + 1); features [2n, D)
are the position-independent part, untouched (q, k (B, H, T, D) -> same shapes). The projections are free to
learn any pairing, so which features pair up is a convention, as RoPE's half/interleaved.

`train_len` is the training sequence length the rotations must fit in: conf/encoding/hope.yaml sets it to
train.seq_len (with randomized positions, train.max_position is the range positions cover: set it to that)."""
import math

from harness.encodings.rope import Rope


class Hope(Rope):
    """RoPE's pairs with λ_i <= train_len rotate; the remaining features pass through unrotated."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary on the pairs with 2π/θ_i ≤ `train_len` (= train.seq_len), the other features unrotated",
            "rotate",
            "Chen et al. 2025")

    def __init__(self, *, head_dim, base=10000.0, train_len=64, layout="half", impl="auto"):
        super().__init__(head_dim=head_dim, base=base, layout=layout, impl=impl)
        if isinstance(train_len, bool) or not isinstance(train_len, (int, float)) or train_len < 1 \
                or train_len != int(train_len):
            raise ValueError(f"hope train_len must be a whole number of positions >= 1, got {train_len!r}")
        self.train_len = int(train_len)
        # the split from the formula in fp64, not from fp32 θ_i: a λ_i a hair from L is not left to fp32 rounding
        wavelengths = [2 * math.pi * self.base ** (2 * i / head_dim) for i in range(head_dim // 2)]
        self.kept = [i for i, wavelength in enumerate(wavelengths) if wavelength <= self.train_len]
        self.rotated_pairs = len(self.kept)
        if not self.kept:
            raise ValueError(f"hope rotates no pair: every wavelength 2π/θ_i (shortest {min(wavelengths):.3g}) "
                             f"exceeds train_len {train_len}; use the `nope` encoding for no rotation")

    def frequencies(self, seq_len):
        """(θ_i of the kept pairs (n,) float32, 1.0): rotated width R = 2n, the rest of D is left as is. With
        base > 1 the kept pairs are RoPE's first n (θ_i decreases with i)."""
        theta, attention_factor = super().frequencies(seq_len)  # (D/2,)
        return theta[self.kept], attention_factor
