"""comrope against outside references, in fp64: RoFormer's closed-form 2x2 rotation, a matrix exponential computed
here by eigendecomposition and by a Taylor series, the ComRoPE paper's formula, and its relative property
R(x)^T R(y) = R(y - x) with a LieRE-style negative control.

Sources: ComRoPE, Yu et al., CVPR 2025, arXiv 2506.03737 (R(x) = exp(sum_a x_a A_a); LD: A_a = theta_a (P - P^T));
the authors' code github.com/Longin-Yu/ComRoPE, model.py (ComRoPELDAttention: P per head and block, theta per
axis and block; coordinates divided by the patches per axis); RoFormer, Su et al., arXiv 2104.09864 eq. 13 (the
2x2 rotation by m*theta); LieRE, Ostmeier et al., arXiv 2406.10322 (exp of a sum of free skew-symmetric generators).
The expected sides never call the encoding's methods: they read its two parameter tensors (P: `angle`, theta:
`multiplier`) and rebuild the rotation from the paper; the encoding is observed only through rotate(), by
rotating the basis vectors e_0..e_{D-1} (column i of R(p) is R(p) e_i).
"""
import pytest
import torch

from harness.encodings import build

EPS = torch.finfo(torch.float64).eps


def rotation_via_rotate(enc, pos, head_dim, n_heads):
    """(H, T, D, D) dense R(p) observed through rotate(): batch entry i carries e_i at every head and position."""
    basis = torch.eye(head_dim, dtype=torch.float64)[:, None, None, :].expand(-1, n_heads, len(pos), -1)
    with torch.no_grad():
        out, _ = enc.rotate(basis.contiguous(), basis.contiguous(), pos)  # out[i, h, t] = R_{h,t} e_i
    return out.permute(1, 2, 3, 0)  # (H, T, row, col=i)


def expm_eigh(L):
    """exp(L) for real skew-symmetric L (..., n, n): iL is Hermitian, iL = V diag(lam) V^H, so
    exp(L) = V diag(exp(-i lam)) V^H. Independent of torch.linalg.matrix_exp (Pade/Taylor + squaring)."""
    lam, V = torch.linalg.eigh(1j * L.to(torch.complex128))
    return ((V * torch.exp(-1j * lam)[..., None, :]) @ V.mH).real


def expm_taylor(L, terms=30):
    """exp(L) by scaling and squaring a plain Taylor series: exp(L) = exp(L / 2^s)^(2^s) with |L / 2^s| <= 1/2,
    where 30 terms leave a remainder below 0.5^31 / 31! ~ 1e-43, far under fp64 rounding."""
    norm = float(torch.linalg.matrix_norm(L, ord=2).max())
    s = max(0, int(torch.tensor(norm * 2).log2().ceil()))
    X = L / 2 ** s
    out = term = torch.eye(L.shape[-1], dtype=L.dtype).expand_as(L)
    for n in range(1, terms + 1):
        term = term @ X / n
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


def block_diag(blocks):
    """(..., nb, b, b) -> (..., nb*b, nb*b) block-diagonal."""
    *lead, nb, b, _ = blocks.shape
    out = torch.zeros(*lead, nb * b, nb * b, dtype=blocks.dtype)
    for j in range(nb):
        out[..., j * b:(j + 1) * b, j * b:(j + 1) * b] = blocks[..., j, :, :]
    return out


def paper_log_rotation(P, theta, pos, width):
    """The paper's sum_a x_a A_a per head, position and block, (H, T, nb, b, b), with ComRoPE-LD's
    A_{a,j} = theta_{a,j} (P_j - P_j^T) and the grid coordinates x = (p // width, p % width) / width."""
    S = P - P.transpose(-1, -2)  # (H, nb, b, b)
    x = torch.stack((pos // width, pos % width), -1).double() / width  # (T, 2)
    coeff = x @ theta  # (T, nb): sum_a x_a theta_{a,j}
    return coeff[None, :, :, None, None] * S[:, None]


def relative_error(R, pos_a, pos_b, pos_diff):
    """max |R(a)^T R(b) - R(b - a)| over the pairs; R(pos) -> (H, T, D, D)."""
    Ra, Rb, Rd = R(pos_a), R(pos_b), R(pos_diff)
    return float((Ra.transpose(-1, -2) @ Rb - Rd).abs().max())


def pairs(width, n=200, far=4000, seed=0):
    """Position pairs a, b (and b - a) whose columns satisfy col_b >= col_a, so that the 1-D difference b - a
    decodes to the grid difference (row_b - row_a, col_b - col_a); rows reach `far` (a long shifted context)."""
    g = torch.Generator().manual_seed(seed)
    ra, rb = torch.randint(0, far, (n,), generator=g), torch.randint(0, far, (n,), generator=g)
    ca = torch.randint(0, width, (n,), generator=g)
    cb = ca + (torch.rand(n, generator=g) * (width - ca)).long()
    ra, rb = torch.minimum(ra, rb), torch.maximum(ra, rb)
    a, b = ra * width + ca, rb * width + cb
    return a, b, b - a


def test_block2_with_rope_generators_is_roformer_axial_rope():
    # RoFormer eq. 13: exp(m theta [[0, -1], [1, 0]]) = [[cos m theta, -sin m theta], [sin m theta, cos m theta]].
    # P = [[0, -1], [0, 0]] gives P - P^T = [[0, -1], [1, 0]]; theta_row,j = width f_j on the first half of the
    # pairs (0 for columns) and theta_col,j = width f_j on the second half: axial 2D RoPE (Heo et al. 2024,
    # arXiv 2403.13298) in RoFormer's interleaved layout, f_j = 10000^(-2j/(D/2)) per axis.
    D, H, W, T = 16, 2, 16, 7 * 16 + 5
    enc = build("comrope", head_dim=D, n_heads=H, width=W, block_size=2).double()
    f = 10000.0 ** (-torch.arange(0, D // 2, 2, dtype=torch.float64) / (D // 2))  # (D/4,)
    with torch.no_grad():
        enc.angle.zero_()
        enc.angle[..., 0, 1] = -1.0
        enc.multiplier.zero_()
        enc.multiplier[0, : D // 4] = W * f
        enc.multiplier[1, D // 4:] = W * f
    pos = torch.arange(T)
    q = torch.randn(3, H, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got, _ = enc.rotate(q, q, pos)
    row, col = (pos // W).double(), (pos % W).double()
    phase = torch.cat((row[:, None] * f, col[:, None] * f), -1)  # (T, D/2): pair i's angle
    c, s = torch.cos(phase), torch.sin(phase)
    x0, x1 = q[..., 0::2], q[..., 1::2]
    want = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2)
    # angles <= 7 rad, b = 2: matrix_exp and cos/sin each within a few ulp of |angle| (<= 1e-14 absolute);
    # times |q| entries <= ~4: 1e-12 leaves a wide margin while a wrong sign or pair would be O(1) off
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("block_size", [4, 8])
def test_rotation_equals_paper_formula_with_independent_matrix_exponentials(block_size):
    D, H, W = 16, 2, 16
    torch.manual_seed(1)
    enc = build("comrope", head_dim=D, n_heads=H, width=W, block_size=block_size).double()
    pos = torch.cat((torch.arange(80), torch.arange(80) + 1000 * W + 3))  # near and far rows
    got = rotation_via_rotate(enc, pos, D, H)  # (H, T, D, D)
    L = paper_log_rotation(enc.angle.detach(), enc.multiplier.detach(), pos, W)  # (H, T, nb, b, b)
    for expm in (expm_eigh, expm_taylor):
        want = block_diag(expm(L))
        # fp64 exp of a skew matrix: error grows like eps * |L| (the squarings of matrix_exp, the phase
        # exp(-i lam) of eigh); |L| reaches ~1e3 rad at rows ~1000, so bound by 64 * eps * max |L|_2 (~1e-11)
        tol = 64 * EPS * float(torch.linalg.matrix_norm(L, ord=2).max())
        torch.testing.assert_close(got, want, rtol=0, atol=tol, msg=lambda m: f"{expm.__name__}: {m}")


@pytest.mark.parametrize("block_size", [2, 4, 8])
def test_relative_property_holds_for_learned_generators(block_size):
    # the paper's RoPE equation R(x)^T R(y) = R(y - x), on random (perturbed) learned P and theta
    D, H, W = 16, 2, 16
    torch.manual_seed(2)
    enc = build("comrope", head_dim=D, n_heads=H, width=W, block_size=block_size).double()
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(torch.rand_like(p))
    a, b, d = pairs(W)
    err = relative_error(lambda pos: rotation_via_rotate(enc, pos, D, H), a, b, d)
    L = paper_log_rotation(enc.angle.detach(), enc.multiplier.detach(), torch.cat((a, b)), W)
    # each of the three rotations carries ~ eps * |L| rounding (|L| <= ~1e3 rad at rows < 4000); 3 factors
    assert err < 3 * 64 * EPS * float(torch.linalg.matrix_norm(L, ord=2).max()), err


def test_lieRE_style_non_commuting_generators_break_the_relative_property():
    # negative control: LieRE's R(x) = exp(x_r A_r + x_c A_c) with independent skew-symmetric A_r, A_c (which do
    # not commute) fails the same check by O(1), so the check above can fail; ComRoPE's generators commute
    D, H, W, b = 16, 2, 16, 4
    torch.manual_seed(3)
    enc = build("comrope", head_dim=D, n_heads=H, width=W, block_size=b).double()
    P = enc.angle.detach()
    S = P - P.transpose(-1, -2)
    theta = enc.multiplier.detach()
    A_r, A_c = theta[0, :, None, None] * S, theta[1, :, None, None] * S
    assert float((A_r @ A_c - A_c @ A_r).abs().max()) < 1e-12  # LD: multiples of one matrix commute
    Q = torch.randn(H, D // b, b, b, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    B_r, B_c = S, Q - Q.transpose(-1, -2)  # LieRE: two free generators per head and block
    assert float((B_r @ B_c - B_c @ B_r).abs().max()) > 0.1

    def liere(pos):
        x = torch.stack((pos // W, pos % W), -1).double() / W
        L = x[None, :, 0, None, None, None] * B_r[:, None] + x[None, :, 1, None, None, None] * B_c[:, None]
        return block_diag(expm_eigh(L))

    a, b_, d = pairs(W, far=50)
    assert relative_error(liere, a, b_, d) > 1e-2
    assert relative_error(lambda pos: rotation_via_rotate(enc, pos, D, H), a, b_, d) < 1e-10
