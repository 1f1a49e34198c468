"""fox against the Forgetting Transformer's definition (Lin et al., ICLR 2025, arXiv 2503.02130, eq. 5-6:
o_i = Σ_j F_ij exp(q_i·k_j) v_j / Σ_j F_ij exp(q_i·k_j), F_ij = Π_{l=j+1}^{i} f_l, f_t = σ(w·x_t + b)) and the
authors' reference in zhixuan-lin/forgetting-transformer, src/forgetting_transformer/ops/forgetting_attention.py
(test_op: p = q k^T · sm_scale + decay_bias, decay_bias = log_lambda[..., -M:, None] − log_lambda[..., None, :],
causal mask tril(diagonal = N − M) for M queries over N keys, softmax, @ v). The expected side multiplies the
gates as the paper's product F_ij in fp64 loops, never calling the encoding or a cumulative sum. Tolerance: fp64
throughout, T ≤ 12 terms per product: errors ~1e-15, checked at 1e-10."""
import math

import pytest
import torch

from harness.encodings import build
from harness.model import Transformer
from harness.attention import softmax_attention

B, H, D, C = 2, 3, 8, 12


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def paper_attention(q, k, v, x, w, b):
    """Forgetting attention by the paper's eq. 5-6 for M = q.shape[2] queries, the last M of N keys.
    q (B, H, M, D), k, v (B, H, N, D), x (B, N, C), w (H, C), b (H,) -> (B, H, M, D)."""
    Bn, Hn, M, _ = q.shape
    N = k.shape[2]
    out = torch.zeros_like(q)
    for bi in range(Bn):
        for h in range(Hn):
            f = [1 / (1 + math.exp(-(float(w[h] @ x[bi, t]) + float(b[h])))) for t in range(N)]  # σ(w·x_t + b)
            for r in range(M):
                i = N - M + r  # the query's own key
                num, den = torch.zeros(q.shape[-1], dtype=torch.float64), 0.0
                for j in range(i + 1):
                    F = math.prod(f[j + 1:i + 1])  # Π_{l=j+1}^{i} f_l (1 for j = i)
                    e = F * math.exp(float(q[bi, h, r] @ k[bi, h, j]) / math.sqrt(q.shape[-1]))
                    num, den = num + e * v[bi, h, j], den + e
                out[bi, h, r] = num / den
    return out


def _fox(seed=3):
    enc = build("fox", d_model=C, n_heads=H, n_layers=1).double()
    with torch.no_grad():  # trained-looking gates: logits spread over (-3, 5), not the init's σ(≈0)
        enc.fgate.weight.copy_(_rand(H, C, seed=seed))
        enc.fgate.bias.copy_(torch.linspace(-1.0, 3.0, H, dtype=torch.float64))
    return enc


@pytest.mark.parametrize("M", [12, 1, 5])  # a full forward; one and five new queries over a cache of 12 keys
def test_fox_attention_equals_the_paper_product_of_forget_gates(M):
    N = 12
    enc = _fox()
    q, k, v, x = _rand(B, H, M, D, seed=1), _rand(B, H, N, D, seed=2), _rand(B, H, N, D, seed=4), _rand(B, N, C, seed=5)
    pos = torch.arange(N)
    bias = enc.scores_bias(q, k, pos[-M:], pos, enc.token_state(x))  # (B, H, M, N)
    visible = pos[None, :] <= pos[-M:, None]
    mask = bias.masked_fill(~visible, float("-inf"))
    ours = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, -1) @ v
    expected = paper_attention(q, k, v, x, enc.fgate.weight.detach(), enc.fgate.bias.detach())
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)
    if M == N:  # the model's SDPA path with the same bias
        torch.testing.assert_close(softmax_attention(q, k, v, bias), expected, rtol=1e-10, atol=1e-10)


def test_fox_gradients_reach_the_gate_as_through_the_paper_formula():
    N = 6
    q, k, v, x = _rand(1, H, N, D, seed=1), _rand(1, H, N, D, seed=2), _rand(1, H, N, D, seed=4), _rand(1, N, C, seed=5)
    enc = _fox()
    pos = torch.arange(N)
    out = softmax_attention(q, k, v, enc.scores_bias(q, k, pos, pos, enc.token_state(x)))
    ours = torch.autograd.grad(out.square().sum(), (enc.fgate.weight, enc.fgate.bias))
    w = enc.fgate.weight.detach().clone().requires_grad_()
    b = enc.fgate.bias.detach().clone().requires_grad_()

    def paper_torch(w, b):  # eq. 5-6 with autograd: the product F_ij as a product of tensors
        f = torch.sigmoid(x[0] @ w.T + b).T  # (H, N)
        out = []
        for h in range(H):
            rows = []
            for i in range(N):
                F = torch.stack([f[h, j + 1:i + 1].prod() for j in range(i + 1)])
                e = F * torch.exp(q[0, h, i] @ k[0, h, :i + 1].T / math.sqrt(D))
                rows.append(e @ v[0, h, :i + 1] / e.sum())
            out.append(torch.stack(rows))
        return torch.stack(out)[None]

    expected = torch.autograd.grad(paper_torch(w, b).square().sum(), (w, b))
    for o, e in zip(ours, expected):
        torch.testing.assert_close(o, e, rtol=1e-9, atol=1e-12)


def test_each_layer_gates_its_own_ln1_output():
    """The model hands layer i's gate the block's LayerNorm output (the authors' attn_norm before fgate_proj)."""
    torch.manual_seed(0)
    enc = build("fox", d_model=16, n_heads=2, n_layers=2).double()
    net = Transformer(encoding=enc, n_layers=2, d_model=16, n_heads=2).double()
    assert enc.at(1).fgate is not enc.at(0).fgate
    x = _rand(1, 7, 16, seed=9)
    pos = torch.arange(7)
    for i, block in enumerate(net.blocks):
        h = block.ln1(x)
        log_f = torch.nn.functional.logsigmoid(h @ enc.at(i).fgate.weight.T + enc.at(i).fgate.bias)  # (1, T, H)
        seen = block.observed(x, enc, pos)  # bias = scores - q k^T / sqrt(D), the model's own
        bias = seen.scores - seen.q @ seen.k.transpose(-1, -2) / seen.q.shape[-1] ** 0.5
        for j in range(7):
            for t in range(j, 7):  # bias_tj = Σ_{l=j+1}^{t} log f_l
                torch.testing.assert_close(bias[0, :, t, j], log_f[0, j + 1:t + 1].sum(0), rtol=1e-12, atol=1e-12)


def test_fox_refuses_a_model_deeper_than_its_gates():
    enc = build("fox", d_model=16, n_heads=2, n_layers=2)
    with pytest.raises(ValueError, match="parameters for 2 layers"):
        Transformer(encoding=enc, n_layers=3, d_model=16, n_heads=2)
