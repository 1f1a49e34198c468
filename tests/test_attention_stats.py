"""Attention statistics (harness/measure/attention.py): the materialized probabilities are exactly what the
model's forward attends with, for every registered encoding, and the sink and entropy statistics of Gu et al.
(ICLR 2025, arXiv 2410.10781) match closed forms on planted models."""
import math

import pytest
import torch

from harness.encodings import ENCODINGS, build
from harness import attention as attention_lib
from harness.measure import attention
from harness.model import Transformer

H, D, T = 2, 16, 16
DIMS = dict(d_model=H * D, n_heads=H, head_dim=D)


def model(name, n_layers=2, **kw):
    """A 2-layer model with every encoding parameter moved off its init (+ U(0, 1), as tests/test_decode.py)."""
    torch.manual_seed(0)
    enc = build(name, **DIMS)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(torch.rand_like(p))
    return Transformer(encoding=enc, n_layers=n_layers, attention_impl="sdpa", **DIMS, **kw).eval()


def tokens(B, L, seed=1):
    return torch.randint(0, 256, (B, L), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_materialized_attention_reproduces_the_forward(name):
    """Running the blocks on A @ v gives model(x): every layer's A is the one SDPA (or FlexAttention) applies,
    also at shifted positions. A is causal and its rows sum to 1 (where the encoding's normalizer says so:
    softmax and stick-breaking; sigmoid attention's rows are free)."""
    net, x = model(name), tokens(2, T)
    for pos in (None, torch.arange(T) * 2 + 3):
        probs = []
        with torch.no_grad():
            ref = net(x, pos)
        got = attention.materialized_forward(net, x, pos, visit=lambda layer, A: probs.append(A))
        torch.testing.assert_close(got, ref, atol=2e-6, rtol=0)  # all agreed to <= 2.4e-7
        assert len(probs) == 2
        for A in probs:
            assert A.shape == (2, H, T, T) and A.dtype == torch.float32
            enc = net.encoding.at(0)  # softmax always; an own normalizer where its rows sum to 1 (stick-breaking)
            sums_to_one = torch.allclose(attention_lib.normalized(enc, torch.zeros(1, 1, 1, 3)).sum(), torch.tensor(1.0))
            if not enc.replaces_softmax or sums_to_one:
                torch.testing.assert_close(A.sum(-1), torch.ones(2, H, T), atol=1e-6, rtol=0)
            assert (A.triu(1) == 0).all()
        assert [torch.equal(a, b) for a, b in zip(attention.probabilities(net, x, pos), probs)] == [True, True]


def flat(name, n_layers=2):
    """A model whose q is zero at every layer (the first H*D output rows of qkv): every logit is 0 + bias."""
    net = model(name, n_layers=n_layers)
    with torch.no_grad():
        for block in net.blocks:
            block.qkv.weight[:H * D] = 0
    return net


def values(rows, metric):
    return [r["value"] for r in rows if r["metric"] == metric]


@pytest.mark.parametrize("name", ["nope", "rope"])
def test_uniform_causal_attention_has_the_closed_forms(name):
    """q = 0 and no bias: logits 0 on j <= i (RoPE rotates a zero q to zero), so row i (1-based) is uniform over
    its i keys, A_ij = 1/i. Then alpha_1 = (1/T) sum_i 1/i = H_T / T (the harmonic number), and row i has entropy
    -sum_j (1/i) log(1/i) = log i, whose mean over rows is (1/T) sum_i log i = log(T!) / T = lgamma(T + 1) / T."""
    L = 64
    net, x = flat(name), tokens(3, L)
    out = attention.rows(net, {L: (x, None), T: (x[:, :T], None)}, probe_len=L, device="cpu")
    harmonic = sum(1 / i for i in range(1, L + 1))
    assert values(out, "first_token_attn") == pytest.approx([harmonic / L] * 2, abs=1e-6)
    entropies = {(r["eval_len"], r["extra_params"]["layer"]): r["value"] for r in out if r["metric"] == "attn_entropy"}
    expect = {(n, layer): math.lgamma(n + 1) / n for n in (T, L) for layer in (0, 1)}
    assert entropies == pytest.approx(expect, abs=1e-5)
    assert values(out, "sink_rate") == [0.0]  # H_64 / 64 = 0.074 < 0.3
    low = attention.rows(net, {L: (x, None)}, probe_len=L, eps=0.07, device="cpu")
    assert values(low, "sink_rate") == [1.0]
    assert [r["extra_params"] for r in low if r["metric"] == "sink_rate"] == [{"eps": 0.07}]


def test_sink_rate_counts_the_heads_over_eps():
    """ALiBi with slopes (-20, 0) and q = 0: head 0's bias is +20 (i - j), so every row puts 1 - O(e^-20) on the
    first key (alpha_1 = 1, a sink); head 1 is uniform (alpha_1 = H_64 / 64 < 0.3). In both layers: rate 2 / 4."""
    L = 64
    net = flat("alibi")
    net.encoding.slopes.copy_(torch.tensor([-20.0, 0.0]))
    out = attention.rows(net, {L: (tokens(2, L), None)}, probe_len=L, device="cpu")
    assert values(out, "sink_rate") == [0.5]
    harmonic = sum(1 / i for i in range(1, L + 1))
    assert values(out, "first_token_attn") == pytest.approx([(1 + harmonic / L) / 2] * 2, abs=1e-6)


def test_sink_rate_thresholds_each_probe_sequence():
    """As the authors' code: the indicator per (sequence, layer, head), then the mean (not the mean alpha_1)."""
    alphas = [torch.tensor([[0.9, 0.1], [0.2, 0.31]]), torch.tensor([[0.3, 0.5], [0.0, 0.0]])]  # [(B, H)] x 2
    assert attention.sink_rate(alphas, 0.3) == 3 / 8
    A = torch.zeros(1, 1, 3, 3)
    A[..., 0] = 1  # every row on the first key
    assert float(attention.first_token_importance(A)) == 1.0 and attention.entropy(A) == 0.0


def test_rows_schema_and_probe_length():
    net = model("rope")
    out = attention.rows(net, {8: (tokens(1, 8), None), T: (tokens(1, T), torch.arange(T))}, probe_len=8,
                         device="cpu")
    assert {(r["metric"], r["eval_len"], r["unit"]) for r in out} == {
        ("sink_rate", 8, "frac"), ("first_token_attn", 8, "frac"), ("attn_entropy", 8, "nats"),
        ("attn_entropy", T, "nats")}
    assert all(math.isfinite(r["value"]) and r["protocol"] == "nonoverlapping" for r in out)
    assert sorted(r["extra_params"]["layer"] for r in out if r["metric"] == "attn_entropy") == [0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"^attention rows need a batch at probe_len=64"):
        attention.rows(net, {8: (tokens(1, 8), None)}, device="cpu")


def test_linear_attention_gives_nan_rows_with_the_reason():
    out = attention.rows(model("rope", attention="linear"), {8: (tokens(1, 8), None), T: (tokens(1, T), None)},
                         probe_len=8, device="cpu")
    assert len(out) == 1 + 2 + 2 + 2  # sink_rate, first_token_attn x 2 layers, attn_entropy x 2 layers x 2 lengths
    assert all(math.isnan(r["value"]) and r["extra_params"]["nan_reason"] == attention.SOFTMAX_ONLY for r in out)


def test_a_length_beyond_a_learned_table_gives_nan_rows():
    torch.manual_seed(0)
    net = Transformer(encoding=build("learned", max_len=12, **DIMS), n_layers=2, attention_impl="sdpa", **DIMS)
    out = attention.rows(net, {8: (tokens(1, 8), None), T: (tokens(1, T), None)}, probe_len=8, device="cpu")
    far = [r for r in out if r["eval_len"] == T]
    assert [r["metric"] for r in far] == ["attn_entropy"] * 2
    assert all(math.isnan(r["value"]) and "beyond the learned table" in r["extra_params"]["nan_reason"] for r in far)
    assert all(math.isfinite(r["value"]) for r in out if r["eval_len"] == 8)
