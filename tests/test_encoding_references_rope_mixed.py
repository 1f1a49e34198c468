"""rope_mixed against RoPE-Mixed as its authors compute it, re-derived here (never through the encoding's methods).

Source: Heo et al. 2024, "Rotary Position Embedding for Vision Transformer", arXiv 2403.13298 (Eq. 12), and the
authors' code github.com/naver-ai/rope-vit, models/vit_rope.py:
- init_t_xy(end_x, end_y): t_x = t % end_x (column), t_y = t // end_x (row), t the row-major patch index;
- compute_mixed_cis: freqs_cis = polar(1, t_x * freqs[0] + t_y * freqs[1]) per head, (H, N, D/2);
- apply_rotary_emb: q viewed as D/2 complex numbers (q[2j] + i q[2j+1]) times freqs_cis;
- init_random_2d_freqs(dim, num_heads, theta): mag = 1 / theta^(arange(0, dim, 4)[:dim/4] / dim); per head one
  angle a = rand(1) * 2 pi; f_x = [mag cos a, mag cos(pi/2 + a)], f_y = [mag sin a, mag sin(pi/2 + a)];
- rope_mixed_deit_{small,base,large}_patch16_LS pass rope_theta=10.0 (the axial models 100.0).
"""
import math

import pytest
import torch

from harness.encodings import build

EPS64 = torch.finfo(torch.float64).eps


def rope_vit_rotate(x, fx, fy, width, pos):
    """rope-vit's rotation of x (B, H, T, D) at 1-D positions pos read as their (t_y, t_x) grid with end_x = width;
    fx, fy (H, D/2). Complex arithmetic, as apply_rotary_emb; interleaved pairs (2j, 2j+1)."""
    t_x = (pos % width).to(torch.float64)  # (T,) column
    t_y = torch.div(pos, width, rounding_mode="floor").to(torch.float64)  # (T,) row
    angle = t_x[None, :, None] * fx[:, None, :] + t_y[None, :, None] * fy[:, None, :]  # (H, T, D/2)
    cis = torch.polar(torch.ones_like(angle), angle)
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())  # (B, H, T, D/2)
    return torch.view_as_real(xc * cis).flatten(-2), angle


def rope_vit_init(dim, num_heads, theta):
    """init_random_2d_freqs with rotate=True, re-derived: (2, H, D/2), drawing one torch.rand(1) per head."""
    mag = 1 / (theta ** (torch.arange(0, dim, 4)[: dim // 4].float() / dim))
    fx, fy = [], []
    for _ in range(num_heads):
        a = torch.rand(1) * 2 * torch.pi
        fx.append(torch.cat([mag * torch.cos(a), mag * torch.cos(torch.pi / 2 + a)]))
        fy.append(torch.cat([mag * torch.sin(a), mag * torch.sin(torch.pi / 2 + a)]))
    return torch.stack([torch.stack(fx), torch.stack(fy)])


def _interleave_perm(d):
    """Feature order that takes the half layout's pairs (j, j + d/2) to interleaved slots (2j, 2j + 1)."""
    return torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), -1).flatten()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("positions", ["arange", "spread"])
def test_rotation_equals_rope_vit_mixed_cis(layout, positions):
    H, D, W, T = 4, 16, 5, 23
    g = torch.Generator().manual_seed(0)
    enc = build("rope_mixed", head_dim=D, n_heads=H, width=W, layout=layout).double()
    known = torch.randn(2, H, D // 2, generator=g, dtype=torch.float64)  # arbitrary learned (f_x, f_y)
    with torch.no_grad():
        enc.freqs.copy_(known)
    q = torch.randn(2, H, T, D, generator=g, dtype=torch.float64)
    k = torch.randn(2, H, T, D, generator=g, dtype=torch.float64)
    pos = torch.arange(T) if positions == "arange" else torch.arange(T) * 37 + 11
    perm = _interleave_perm(D) if layout == "half" else torch.arange(D)
    inv = torch.argsort(perm)
    ref_q, angle = rope_vit_rotate(q[..., perm], known[0], known[1], W, pos)
    ref_k, _ = rope_vit_rotate(k[..., perm], known[0], known[1], W, pos)
    got_q, got_k = enc.rotate(q, k, pos)
    # Tolerance: both sides form the same phase f_x*col + f_y*row in fp64, but may round the products and sum in
    # another order and use other cos/sin kernels: each rotated entry a cos - b sin differs by at most a few ulp
    # of the largest phase (times |a| + |b|) plus a few ulp of the entry; 16 ulp of max|phase| * max|x| * 2 bounds
    # both (phases here reach ~5e2 for `spread`: tol ~1e-11; the observed difference was <= 1.2e-16).
    tol = 16 * EPS64 * float(angle.abs().max() + 1) * 2 * float(max(q.abs().max(), k.abs().max()))
    torch.testing.assert_close(got_q, ref_q[..., inv], rtol=0, atol=tol)
    torch.testing.assert_close(got_k, ref_k[..., inv], rtol=0, atol=tol)
    # and the scores rope-vit's RoPEAttention forms, (q * scale) @ k^T, with the same bound summed over D
    scores = (got_q / math.sqrt(D)) @ got_k.transpose(-1, -2)
    ref_scores = (ref_q / math.sqrt(D)) @ ref_k.transpose(-1, -2)
    torch.testing.assert_close(scores, ref_scores, rtol=0, atol=D * tol * float(k.abs().max() + q.abs().max()))


def test_x_is_the_column_and_y_the_row():
    # rope-vit's t_x = t % end_x: with only f_x nonzero, positions one row apart (same column) rotate alike,
    # and positions one column apart do not; with only f_y nonzero, the reverse
    H, D, W = 2, 8, 6
    q = torch.randn(1, H, 1, D, dtype=torch.float64).expand(-1, -1, 3, -1)  # one vector at three positions
    for axis in (0, 1):
        enc = build("rope_mixed", head_dim=D, n_heads=H, width=W).double()
        with torch.no_grad():
            enc.freqs[1 - axis].zero_()
        out, _ = enc.rotate(q, q, torch.tensor([7, 7 + W, 8]))  # (row 1, col 1), (row 2, col 1), (row 1, col 2)
        same_col, same_row = (out[:, :, 0] - out[:, :, 1]).abs().max(), (out[:, :, 0] - out[:, :, 2]).abs().max()
        if axis == 0:  # f_x only: the column turns it
            assert same_col < 1e-12 < same_row
        else:  # f_y only: the row turns it
            assert same_row < 1e-12 < same_col


@pytest.mark.parametrize("dims", [(16, 4), (64, 6)])  # model=tiny's 4 heads of 32 / test dims; rope-vit small 6x64
def test_init_equals_init_random_2d_freqs(dims):
    D, H = dims
    enc = build("rope_mixed", head_dim=D, n_heads=H)
    assert enc.base == 10.0  # rope-vit's rope_theta for RoPE-Mixed
    for seed in (0, 1):
        torch.manual_seed(seed)  # the runner seeds the global RNG before the model's init; so does rope-vit's
        ours = build("rope_mixed", head_dim=D, n_heads=H).freqs.detach()
        torch.manual_seed(seed)
        theirs = rope_vit_init(D, H, 10.0)
        # same float32 operations on the same draws: equal up to the cos/sin kernels' float32 rounding
        # (vectorized vs scalar paths; 3e-8 observed at D=64)
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    # magnitudes: |(f_x, f_y)| of pair j is the axial frequency 10^(-4 (j mod D/4) / D), in fp64 here
    j = torch.arange(D // 2) % (D // 4)
    mag = 10.0 ** (-4.0 * j.double() / D)
    torch.testing.assert_close(ours.double().norm(dim=0), mag.expand(H, -1), rtol=1e-6, atol=0)  # fp32 storage
    # directions: the first D/4 pairs share an angle a per head, the last D/4 point along a + pi/2
    angle = torch.atan2(ours[1].double(), ours[0].double())  # (H, D/2)
    first, second = angle[:, : D // 4], angle[:, D // 4:]
    torch.testing.assert_close(first, first[:, :1].expand_as(first), rtol=0, atol=1e-6)
    turn = torch.remainder(second - first + math.pi, 2 * math.pi) - math.pi  # wrapped to (-pi, pi]
    torch.testing.assert_close(turn, torch.full_like(turn, math.pi / 2), rtol=0, atol=1e-6)
    assert len(set(first[:, 0].round(decimals=4).tolist())) == H  # a random rotation per head
