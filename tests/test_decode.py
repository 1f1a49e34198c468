"""KV-cache decoding gives the logits of one full forward, for every registered encoding (a prefill, then one
token at a time). x-transformers #242 (ALiBi) and #70 (absolute PEs) were exactly such decoding bugs:
https://github.com/lucidrains/x-transformers/issues/242, https://github.com/lucidrains/x-transformers/issues/70."""
import pytest
import torch

from harness import decode
from harness.rope.frequencies import ROPE_INIT_FUNCTIONS, SEQ_LEN_TYPES
from harness.encodings import ENCODINGS, build
from harness.model import Transformer

H, D, T, T0 = 4, 16, 40, 13
DIMS = dict(d_model=H * D, n_heads=H, head_dim=D)


def model(name, **kw):
    """A 2-layer model (both members of a 1:1 per-layer policy) with every encoding parameter moved off its init
    (a zero bias proves nothing; + U(0, 1) keeps KERPLE's parameters positive)."""
    torch.manual_seed(0)
    enc = build(name, **DIMS)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(torch.rand_like(p))
    return Transformer(encoding=enc, n_layers=2, attention_impl="sdpa", **DIMS, **kw).eval()


def decoded(net, idx, splits):
    """Logits of idx (B, T) fed as consecutive chunks of the given lengths through one cache."""
    cache, out, at = decode.KVCache(len(net.blocks)), [], 0
    for n in splits:
        out.append(decode.step(net, idx[:, at:at + n], cache))
        at += n
    return torch.cat(out, 1)


CACHEABLE = sorted(n for n in ENCODINGS if all(build(n, **DIMS).at(i).cacheable for i in range(2)))
TOL = dict(atol=2e-6, rtol=0)  # every cacheable encoding agreed to <= 5.4e-7 (fp32 reduction order)


@pytest.mark.parametrize("name", CACHEABLE)
def test_decoding_token_by_token_equals_the_full_forward(name):
    net = model(name)
    idx = torch.randint(0, 256, (2, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = net(idx)
    torch.testing.assert_close(decoded(net, idx, [T0] + [1] * (T - T0)), full, **TOL)


def test_an_encoding_that_is_not_cacheable_is_refused_and_would_be_wrong():
    """xPos centres positions on the middle of each call: keys cached from the prefill carry another centre."""
    assert set(ENCODINGS) - set(CACHEABLE) == {"xpos"}
    net = model("xpos")
    idx = torch.randint(0, 256, (2, T), generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match=r"^encoding 'xpos' cannot decode with a KV cache"):
        decoded(net, idx, [T0, 1])
    net.encoding.cacheable = True  # what decoding would give: measurably off, not rounding
    with torch.no_grad():
        full = net(idx)
    assert (decoded(net, idx, [T0] + [1] * (T - T0)) - full).abs().max() > 10 * TOL["atol"]


@pytest.mark.parametrize("qk_norm", ["rms", "l2"])
def test_decoding_with_qk_norm_and_uneven_chunks(qk_norm):
    net = model("rope", qk_norm=qk_norm)
    idx = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = net(idx)
    torch.testing.assert_close(decoded(net, idx, [5, 7, 1, 20, 7]), full, **TOL)


def test_generate_is_greedy_on_the_full_forward():
    net = model("alibi")
    prompt = torch.randint(0, 256, (1, 9), generator=torch.Generator().manual_seed(3))
    new = decode.generate(net, prompt, 6)
    seq = prompt
    for _ in range(6):  # the cache-free way: rerun the whole prefix for every token
        with torch.no_grad():
            seq = torch.cat((seq, net(seq)[:, -1:].argmax(-1)), 1)
    assert torch.equal(new, seq[:, 9:])


def test_linear_attention_is_refused_in_one_line():
    net = model("rope", attention="linear")
    with pytest.raises(ValueError, match=r"^KV-cache decoding needs attention=softmax"):
        decode.step(net, torch.zeros(1, 3, dtype=torch.long), decode.KVCache(2))


# Every HF rope_type of harness.rope.frequencies, with scaling that moves its frequencies off the default at T
# positions (original_max_position_embeddings 8 < T; LongRoPE 16: short factors for the prefill of T0 = 13,
# long ones after it): a type that ignores the length must decode exactly; one
# whose frequencies follow the call's longest position (dynamic NTK, LongRoPE) must be refused, and would be wrong.
ROPE_SCALING = {"default": {}, "linear": dict(factor=4.0), "ntk": dict(factor=4.0), "proportional": {},
                "dynamic": dict(factor=4.0, original_max_position_embeddings=8),
                "yarn": dict(factor=4.0, original_max_position_embeddings=8),
                "llama3": dict(factor=4.0, original_max_position_embeddings=8),
                "longrope": dict(factor=4.0, original_max_position_embeddings=16, short_factor=[1.0] * (D // 2),
                                 long_factor=[4.0] * (D // 2))}


@pytest.mark.parametrize("rope_type", sorted(ROPE_INIT_FUNCTIONS))
def test_every_rope_type_decodes_exactly_or_is_refused(rope_type):
    torch.manual_seed(0)
    enc = build("rope", **DIMS, rope_type=rope_type, scaling=ROPE_SCALING[rope_type])
    net = Transformer(encoding=enc, n_layers=2, attention_impl="sdpa", **DIMS).eval()
    idx = torch.randint(0, 256, (2, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = net(idx)
    if rope_type not in SEQ_LEN_TYPES:
        torch.testing.assert_close(decoded(net, idx, [T0] + [1] * (T - T0)), full, **TOL)
        return
    with pytest.raises(ValueError, match=r"^encoding 'rope' cannot decode with a KV cache"):
        decoded(net, idx, [T0, 1])
    enc.cacheable = True  # what decoding would give: keys of the prefill rotated with the prefill's frequencies
    assert (decoded(net, idx, [T0] + [1] * (T - T0)) - full).abs().max() > 10 * TOL["atol"]


@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_greedy_takes_the_cache_where_it_can_and_says_which_path_ran(name):
    net = model(name)
    prompt = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(5))
    pos = torch.arange(3, 3 + 9 + 5)  # shifted positions reach both paths' position arguments
    tokens, path = decode.greedy(net, prompt, 5, pos)
    assert path == ("kv_cache" if name in CACHEABLE else "rerun")
    assert torch.equal(tokens, decode.rerun(net, prompt, 5, pos))
    seq = prompt
    for _ in range(5):  # the oracle: argmax of one full forward per token
        with torch.no_grad():
            seq = torch.cat((seq, net(seq, pos[:seq.shape[1]])[:, -1:].argmax(-1)), 1)
    assert torch.equal(tokens, seq[:, 9:])
