"""ComRoPE-LD (Yu et al., CVPR 2025, arXiv 2506.03737): rotary embedding with trainable commuting angle matrices.

RoPE's fixed 2x2 rotations become R(x) = exp(sum_a x_a A_a) with learned skew-symmetric angle matrices A_a, one per
position axis a (here 2: the grid row and column). The paper proves R(x)^T R(y) = R(y - x) -- scores depend on
positions only through their difference -- iff the A_a pairwise commute; LieRE (Ostmeier et al. 2024, arXiv
2406.10322) learns the A_a freely, so they do not commute and it is not relative. Both act block-diagonally: the
head dim D is cut into D/b blocks of b features, each with its own b x b angle matrices.

Variant: ComRoPE-LD ("linearly dependent"); the paper offers it beside ComRoPE-AP (axial partition: each axis
rotates its own disjoint set of blocks), and LD is the general one: every block mixes both axes. Per head and
block j one learned P_j, and A_{a,j} = theta_{a,j} (P_j - P_j^T) with learned scalars theta. Multiples of one
matrix commute, so the relative property is exact (not approximate) for any learned values.

Re-derived from the authors' code (github.com/Longin-Yu/ComRoPE, model.py, ComRoPELDAttention and
RoPESelfAttentionBase.get_rotation_matrix), which fixes the init: P ~ N(0, init_std^2) per head (config default
init_std 1.0), theta ~ N(0, 1) per axis and block, shared by the heads; and the position scale: with axis_scale
(their default) a coordinate is divided by the patches per axis -- here by `width`, the grid's side. Their +0.5
centring shifts every position alike and cancels in q.k, so it is left out.
block_size defaults to 8, the size we take the paper's ImageNet comparison to use (unverified here: its full text
was not readable; the code's config default, 2, is its plain-RoPE case); 2, 4 and 8 are accepted.

Positions: a 1-D position p is the grid cell (row, col) = (p // width, p % width), as rope2d. Scores are therefore
relative for shifts by whole rows (shift_unit = width), not for arbitrary 1-D shifts (a shift by one wraps the
column at the row's end).

Cost: exp(r A_r + c A_c) = exp(r A_r) exp(c A_c) since A_r, A_c commute, so matrix_exp runs on the unique rows and
the unique columns only (about T/width + width matrices per head and block) and one b x b product per position.
The rotations depend on learned parameters, so under autograd they are rebuilt per block (Encoding.per_positions).
Per layer, as the authors (each attention layer owns its P and theta): layer 0's are `angle` and `multiplier`, the
others are members (`at(layer)`, harness/encodings/_layered.py PerLayer). LM positions instead of image patches.
"""
import torch
from torch import nn

from harness.encodings._layered import PerLayer
from harness.encodings._params import count, positive
from harness.tasks.positions import raster

BLOCK_SIZES = (2, 4, 8)
AXES = 2  # (row, col)


class Comrope(PerLayer):
    """Learned block rotations R(p) = exp((row/w) A_row + (col/w) A_col), A_axis = theta_axis (P - P^T)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("2D rotation exp(row·A_r + col·A_c) of blocks of `block_size` features, A = θ·(P − Pᵀ) "
            "learned and commuting: exactly relative (ComRoPE-LD)",
            "rotate",
            "Yu et al. 2025 (Longin-Yu/ComRoPE)")

    RANGES = {"block_size": count(2), "init_std": positive()}

    relative = True  # exact: A_row and A_col are multiples of one skew-symmetric matrix per head and block
    rotary = True  # R(p) is orthogonal (exp of a skew-symmetric matrix)
    cacheable = True  # R(p) depends on p alone: a cached key stays valid for later queries

    def __init__(self, *, head_dim, n_heads, width=16, block_size=8, init_std=1.0, axis_scale=True, n_layers=2):
        super().__init__()
        if block_size not in BLOCK_SIZES:
            raise ValueError(f"comrope block_size must be one of {list(BLOCK_SIZES)}, got {block_size!r}")
        if head_dim % block_size:
            raise ValueError(f"comrope needs head_dim divisible by block_size={block_size}, got {head_dim}")
        if width < 1:
            raise ValueError(f"comrope width must be >= 1, got {width}")
        if not init_std > 0:
            raise ValueError(f"comrope init_std must be positive, got {init_std}")
        self.width, self.block_size, self.axis_scale = int(width), int(block_size), bool(axis_scale)
        self.shift_unit = self.width
        n_blocks = head_dim // block_size
        # P: (H, D/b, b, b), the angle matrix of every block is P - P^T (skew-symmetric by construction)
        self.angle = nn.Parameter(torch.randn(n_heads, n_blocks, block_size, block_size) * float(init_std))
        # theta: (2, D/b), one scale per axis and block, shared by the heads (the authors' `multiplier`)
        self.multiplier = nn.Parameter(torch.randn(AXES, n_blocks))
        self.own_layers(n_layers, lambda: Comrope(head_dim=head_dim, n_heads=n_heads, width=width,
                                                  block_size=block_size, init_std=init_std, axis_scale=axis_scale,
                                                  n_layers=1))

    def rotations(self, pos, dtype=torch.float32):
        """R(p) per head, position and block: (H, T, D/b, b, b), in fp32 or wider."""
        return self.per_positions(pos, dtype, lambda: (self._rotations(pos, dtype),))[0]

    def _rotations(self, pos, dtype):
        # fp32+ whatever the cast of the module or the inputs (a bf16 phase would be off by up to pi)
        work = torch.promote_types(torch.float32, torch.promote_types(dtype, self.angle.dtype))
        p = self.angle.to(work)
        skew = p - p.transpose(-1, -2)  # (H, D/b, b, b)
        theta = self.multiplier.to(work)  # (2, D/b)
        row, col = raster(pos, (self.width,))
        factors = []
        for axis, coord in enumerate((row, col)):
            values, where = torch.unique(coord, return_inverse=True)  # (U,), (T,)
            x = values.to(work) / self.width if self.axis_scale else values.to(work)
            generator = theta[axis, :, None, None] * skew  # (H, D/b, b, b): A_axis
            exps = torch.linalg.matrix_exp(x[None, :, None, None, None] * generator[:, None])  # (H, U, D/b, b, b)
            factors.append(exps[:, where])  # (H, T, D/b, b, b)
        return factors[0] @ factors[1]  # exp(x_r A_r) exp(x_c A_c) = exp(x_r A_r + x_c A_c): they commute

    def rotate(self, q, k, pos):
        rot = self.rotations(pos, q.dtype)
        return self._rotate_blocks(q, rot), self._rotate_blocks(k, rot)

    @staticmethod
    def _rotate_blocks(x, rot):
        """x (B, H, T, D) -> R(p) x per head, position and block, computed in rot's dtype, returned in x's."""
        B, H, T, D = x.shape
        blocks = x.to(rot.dtype).reshape(B, H, T, rot.shape[-3], rot.shape[-1])  # (B, H, T, D/b, b)
        out = torch.einsum("htnij,bhtnj->bhtni", rot, blocks)
        return out.reshape(B, H, T, D).to(x.dtype)
