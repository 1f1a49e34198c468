"""The small transformer: linear attention's O(T) form, head_dim != d_model / n_heads, and bad input."""
import pytest
import torch

from harness.encodings import build
from harness.model import Transformer
from harness.attention import linear_attention, linear_attention_quadratic


@pytest.mark.parametrize("name", ["rope", "nope", "xpos", "rope_learned_freq"])
def test_linear_attention_linear_form_equals_quadratic(name):
    torch.manual_seed(0)
    enc = build(name, head_dim=16).double()
    q, k, v = (torch.randn(2, 3, 200, 16, dtype=torch.float64) for _ in range(3))
    pos = torch.arange(200)
    torch.testing.assert_close(linear_attention(q, k, v, enc, pos), linear_attention_quadratic(q, k, v, enc, pos),
                               rtol=1e-10, atol=1e-10)


def test_linear_attention_rope_only_in_numerator():
    # RoFormer §3.3: the denominator is sum_j f(q_i).f(k_j) without rotation, so it stays positive;
    # with no rotation at all (NoPE) the weights are a proper average: constant v gives back v
    q, k = torch.randn(1, 1, 30, 8), torch.randn(1, 1, 30, 8)
    v = torch.ones(1, 1, 30, 8)
    out = linear_attention(q, k, v, build("nope"), torch.arange(30))
    torch.testing.assert_close(out, torch.ones_like(out), rtol=1e-5, atol=1e-5)
    rot = linear_attention(q, k, v, build("rope", head_dim=8), torch.arange(30))
    assert not torch.allclose(rot, out)  # the numerator does see the rotation


def test_head_dim_may_differ_from_d_model_over_heads():
    enc = build("rope", head_dim=32)
    model = Transformer(encoding=enc, n_layers=1, d_model=48, n_heads=3, head_dim=32)
    assert model.blocks[0].qkv.out_features == 3 * 3 * 32
    assert model(torch.randint(0, 256, (1, 10))).shape == (1, 10, 256)


def test_tied_output_embedding():
    model = Transformer(encoding=build("nope"), n_layers=1, d_model=32, n_heads=2)
    assert model.head.weight is model.tok.weight


@pytest.mark.parametrize("call,match", [
    (lambda: build("alibl", n_heads=4), r"unknown encoding 'alibl'; expected one of \['alibi'"),
    (lambda: build("rope", head_dim=15), "even head_dim"),
    (lambda: build("rope", head_dim=64, partial_rotary_factor=0.3), "even, non-zero rotary dim"),
    (lambda: build("rope", head_dim=64, rope_type="linear", scaling={"factor": 0.5}), "factor must be >= 1"),
    (lambda: build("rope", head_dim=64, base=0), "base must be positive"),
    (lambda: build("rope", head_dim=64, layout="interleave"), r"unknown rope layout 'interleave'; expected one of"),
    (lambda: build("rope", head_dim=64, bse=5), r"does not take \['bse'\]; its parameters: \['base'"),
    (lambda: build("rope2d", head_dim=18), "divisible by 4"),
    (lambda: Transformer(encoding=build("alibi", n_heads=2), n_heads=2, d_model=32, attention="linear"),
     "linear attention cannot take"),
    (lambda: Transformer(encoding=build("nope"), attention="flash"), r"unknown attention 'flash'; expected one of"),
    (lambda: Transformer(encoding=build("learned", d_model=32, max_len=16), d_model=32, n_heads=2)(
        torch.zeros(1, 20, dtype=torch.long)), r"position 19 is beyond the learned table \(max_len=16\)"),
])
def test_bad_input_one_clear_error(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)  # one line
