"""rope_alibi, rope_bias, rope_learned_freq and learned against closed forms written here from their sources:
RoPE's complex form (Su et al. 2021, RoFormer, arXiv 2104.09864, §3.2), ALiBi's bias and slopes (Press et al.
2022, arXiv 2108.12409, §3), Shaw et al.'s clipping (arXiv 1803.02155, eq. 3-4) and nanoGPT's wpe
(karpathy/nanoGPT model.py). Nothing on the expected side calls the encodings' own methods."""
import cmath
import math

import pytest
import torch

from harness.attention import attend
from harness.encodings import build
from harness.model import Transformer

D, H, T = 16, 4, 40


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def roformer_score(q, k, m, n, theta, layout):
    """RoFormer §3.2: with pair j as the complex number z = x_a + i x_b, the rotated dot product is
    Re[sum_j q_j conj(k_j) e^{i (m - n) theta_j}]. Pairs: (2j, 2j+1) interleaved (RoFormer), (j, j + d/2)
    half (GPT-NeoX / HF rotate_half). Plain Python complex arithmetic, one (q, k) pair of vectors."""
    half = len(q) // 2
    idx = [(2 * j, 2 * j + 1) for j in range(half)] if layout == "interleaved" else [(j, j + half) for j in range(half)]
    s = 0j
    for j, (a, b) in enumerate(idx):
        s += complex(q[a], q[b]) * complex(k[a], k[b]).conjugate() * cmath.exp(1j * (m - n) * theta[j])
    return s.real


def roformer_theta(d, base=10000.0):
    # RoFormer eq. (15): theta_j = base^(-2j/d), j = 0 .. d/2 - 1
    return [base ** (-2 * j / d) for j in range(d // 2)]


def expected_logits(q, k, pos, theta, layout, bias_fn):
    """(B, H, T, T) closed-form pre-softmax scores: RoFormer score / sqrt(d) + bias_fn(h, m, n)."""
    B, Hn, Tn, d = q.shape
    out = torch.empty(B, Hn, Tn, Tn, dtype=torch.float64)
    p = pos.tolist()
    for b in range(B):
        for h in range(Hn):
            qs, ks = q[b, h].tolist(), k[b, h].tolist()
            for i in range(Tn):
                for j in range(Tn):
                    out[b, h, i, j] = (roformer_score(qs[i], ks[j], p[i], p[j], theta, layout) / math.sqrt(d)
                                       + bias_fn(h, p[i], p[j]))
    return out


def encoding_logits(enc, q, k, pos):
    """What Block.forward hands SDPA, as scores: rotate, then q k^T / sqrt(d) plus the encoding's bias."""
    rq, rk = enc.rotate(q, k, pos)
    s = rq @ rk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    b = enc.bias(rq, pos, pos)
    return s if b is None else s + b


def check_attention(enc, q, k, pos, want):
    """The model's own attention path (harness.attention.attend, SDPA) equals softmax(want) @ v, causal."""
    v = _rand(*q.shape, seed=5)
    got = attend(enc, q, k, v, None, pos)  # h: no token_state for these encodings
    causal = torch.ones(len(pos), len(pos), dtype=torch.bool).tril()
    ref = want.masked_fill(~causal, float("-inf")).softmax(-1) @ v
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)


# The encodings hold inv_freq in float32 (HF semantics), the closed form uses exact fp64 theta_j: at distances
# below 100 the phase differs by < 100 * 6e-8 rad, so the logits by < 1e-5 for unit-variance q, k.
TOL = dict(rtol=1e-5, atol=1e-5)


def press_slopes(n):
    # Press et al. 2022 §3: for n = 2^k heads, the geometric sequence starting at 2^(-8/n) with ratio 2^(-8/n);
    # 8 heads give 1/2, 1/4, ..., 1/256 (ofirpress/attention_with_linear_biases, fairseq/models/transformer.py
    # get_slopes_power_of_2 at 4b92f28a005ead2567abe2359f633e73e08f3833)
    assert math.log2(n).is_integer()
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


@pytest.mark.parametrize("n_heads", [4, 8])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_alibi_is_rope_plus_alibi(n_heads, layout):
    # score = (R_m q)^T (R_n k) / sqrt(d) - m_h |m - n| (Press et al. 2022 §3 eq. for the bias, RoFormer for RoPE)
    enc = build("rope_alibi", head_dim=D, n_heads=n_heads, layout=layout, impl="eager").double()
    q, k, pos = _rand(1, n_heads, 12, D), _rand(1, n_heads, 12, D, seed=1), torch.arange(12) * 3 + 5
    slopes = press_slopes(n_heads)
    want = expected_logits(q, k, pos, roformer_theta(D), layout, lambda h, m, n: -slopes[h] * abs(m - n))
    torch.testing.assert_close(encoding_logits(enc, q, k, pos), want, **TOL)
    check_attention(enc, q, k, pos, want)


def test_rope_bias_is_rope_plus_clipped_relative_scalar():
    # rope_bias.py's source (its docstring): score = (R_i q)^T (R_j k) + b_{i-j}, b per head over i - j clipped
    # to [-max_distance, max_distance] as Shaw et al. 2018 eq. (3): clip(x, k) = max(-k, min(k, x)).
    M = 5
    enc = build("rope_bias", head_dim=D, n_heads=H, max_distance=M, impl="eager").double()
    q, k, pos = _rand(1, H, 14, D), _rand(1, H, 14, D, seed=1), torch.arange(14)
    # at init b = 0: plain RoPE
    want0 = expected_logits(q, k, pos, roformer_theta(D), "half", lambda h, m, n: 0.0)
    torch.testing.assert_close(encoding_logits(enc, q, k, pos), want0, **TOL)

    def b(h, r):  # distinct, sign-asymmetric values per head and clipped distance
        return 0.3 * h - 0.11 * r + 0.02 * r * r + (0.5 if r == M else 0.0) - (0.7 if r == -M else 0.0)

    with torch.no_grad():
        for h in range(H):
            for r in range(-M, M + 1):
                enc.table_b[h, r + M] = b(h, r)  # the table's layout: column r + max_distance holds b_r
    want = expected_logits(q, k, pos, roformer_theta(D), "half",
                           lambda h, m, n: b(h, max(-M, min(M, m - n))))
    torch.testing.assert_close(encoding_logits(enc, q, k, pos), want, **TOL)
    check_attention(enc, q, k, pos, want)
    # both sides of the diagonal (the bias is defined for i < j too, where the causal mask later drops it)
    got = enc.bias(None, torch.tensor([2, 30]), torch.tensor([9, 0, 2]))
    assert got[1].flatten().tolist() == pytest.approx([b(1, -5), b(1, 2), b(1, 0), b(1, 5), b(1, 5), b(1, 5)])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_learned_freq_is_rope_with_scaled_frequencies(layout):
    # as in rope_learned_freq.py's docstring: theta_j = base^(-2j/d) exp(a_j), a_j init 0
    enc = build("rope_learned_freq", head_dim=D, layout=layout, impl="eager").double()
    q, k, pos = _rand(1, H, 10, D), _rand(1, H, 10, D, seed=1), torch.arange(10) * 7
    theta = roformer_theta(D)
    torch.testing.assert_close(encoding_logits(enc, q, k, pos),
                               expected_logits(q, k, pos, theta, layout, lambda h, m, n: 0.0), **TOL)
    a = [0.3 * (-1) ** j - 0.05 * j for j in range(D // 2)]
    with torch.no_grad():
        enc.log_scale.copy_(torch.tensor(a))
    scaled = [t * math.exp(aj) for t, aj in zip(theta, a)]
    want = expected_logits(q, k, pos, scaled, layout, lambda h, m, n: 0.0)
    torch.testing.assert_close(encoding_logits(enc, q, k, pos), want, **TOL)
    check_attention(enc, q, k, pos, want)


def test_rope_learned_freq_gradient_is_the_closed_form():
    # d/da_j Re[z_j e^{i (m-n) theta_j e^{a_j}}] = Re[z_j * i (m-n) theta_j e^{a_j} e^{i (m-n) theta_j e^{a_j}}]
    # (the chain rule on RoFormer's complex form), z_j = q_j conj(k_j), interleaved pairs
    enc = build("rope_learned_freq", head_dim=D, layout="interleaved", impl="eager").double()
    a = [0.1 * j - 0.2 for j in range(D // 2)]
    with torch.no_grad():
        enc.log_scale.copy_(torch.tensor(a))
    q, k = _rand(D), _rand(D, seed=1)
    m, n = 23, 4
    rq, _ = enc.rotate(q.expand(1, 1, 1, D), q.expand(1, 1, 1, D), torch.tensor([m]))
    _, rk = enc.rotate(k.expand(1, 1, 1, D), k.expand(1, 1, 1, D), torch.tensor([n]))
    (rq.flatten() @ rk.flatten()).backward()
    want = []
    for j, t in enumerate(roformer_theta(D)):
        w = t * math.exp(a[j])
        z = complex(q[2 * j], q[2 * j + 1]) * complex(k[2 * j], k[2 * j + 1]).conjugate()
        want.append((z * 1j * (m - n) * w * cmath.exp(1j * (m - n) * w)).real)
    assert enc.log_scale.grad.tolist() == pytest.approx(want, rel=1e-4, abs=1e-5)
    assert all(abs(g) > 1e-3 for g in want)  # every frequency's gradient is non-trivial here


def test_learned_is_nanogpt_wpe():
    # karpathy/nanoGPT model.py at 3adf61e154c3fe3fca428ad6bc3818b27a3b8291: wpe = nn.Embedding(block_size, n_embd),
    # initialised normal(mean 0, std 0.02) (_init_weights), x = drop(tok_emb + wpe(arange(t))), and
    # `assert t <= block_size` (position block_size - 1 is the last one with a row).
    d_model, max_len = 64, 1024
    torch.manual_seed(0)
    enc = build("learned", d_model=d_model, max_len=max_len)
    W = enc.table.weight.detach()
    assert W.shape == (max_len, d_model)
    # N(0, 0.02^2) over 65536 values: std within 2% (the sample std's sd is 0.28%), mean within 5 sd
    assert abs(W.std().item() / 0.02 - 1) < 0.02 and abs(W.mean().item()) < 5 * 0.02 / math.sqrt(W.numel())
    x, pos = _rand(2, 9, d_model).float(), torch.tensor([0, 1, 2, 500, 7, 1023, 3, 3, 64])
    want = torch.stack([torch.stack([x[b, t] + W[int(pos[t])] for t in range(9)]) for b in range(2)])
    torch.testing.assert_close(enc.embed(x, pos), want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="beyond the learned table"):
        enc.embed(x[:, :2], torch.tensor([0, max_len]))
    # in the model: the first block's input is wte[idx] + wpe[pos], as nanoGPT's forward
    torch.manual_seed(0)
    net = Transformer(encoding=build("learned", d_model=d_model, max_len=32), n_layers=1, d_model=d_model, n_heads=H)
    seen = []
    net.blocks[0].register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach()))
    idx = torch.randint(0, 256, (2, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        net(idx)
    tok, wpe = net.tok.weight.detach(), net.encoding.table.weight.detach()
    torch.testing.assert_close(seen[0], tok[idx] + wpe[:20][None], rtol=0, atol=0)


def test_closed_form_helper_is_rope():
    # the helper above against a hand-computed case: d = 2, one pair, theta_0 = 1: the score is
    # |q||k| cos(angle(q) - angle(k) + (m - n)) (a rotation by m - n of q relative to k)
    q, k = [1.0, 0.0], [0.0, 2.0]  # angles 0 and pi/2
    assert roformer_score(q, k, 5, 3, [1.0], "interleaved") == pytest.approx(2 * math.cos(-math.pi / 2 + 2))
