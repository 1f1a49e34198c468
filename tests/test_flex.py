"""The FlexAttention path (harness/flex.py) against the SDPA path it replaces, driven by the registry: every layer
of every encoding whose bias is a function of i - j alone must give softmax_attention's output; the others
must take SDPA, and an explicit `flex` for them is one line at build time.

FlexAttention: https://docs.pytorch.org/docs/2.13/nn.attention.flex_attention.html and the PyTorch blog post
"FlexAttention: The Flexibility of PyTorch with the Performance of FlashAttention"
(https://pytorch.org/blog/flexattention/). Most tests run flex_attention uncompiled, its reference
implementation (same score_mod and BlockMask, the full score matrix, no compile time); one test compiles it.
HARNESS_TEST_DEVICE=cuda adds a training step through the compiled kernel on the GPU (forward and backward)."""
import os

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from harness import attention, flex
from harness.config import Config, ModelConfig, encoding_params
from harness.encodings import ENCODINGS, build, parameters
from harness.model import Transformer, from_config
from harness.attention import softmax_attention

pytestmark = [pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile"),
              pytest.mark.gpu]  # make test-gpu runs it on a lent GPU
DEVICE = os.environ.get("HARNESS_TEST_DEVICE", "cpu")
B, H, D = 2, 4, 16
DIMS = dict(d_model=H * D, n_heads=H, head_dim=D)


def perturbed(name, **params):
    """Encoding `name` with every parameter moved off its init (rope_bias starts at 0: a zero bias proves
    nothing); + U(0, 1) keeps KERPLE's positive parameters positive."""
    torch.manual_seed(0)
    enc = build(name, **DIMS, **params)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(torch.rand_like(p))
    return enc


ALL = [m for name in ENCODINGS for m in ((name, i) for i in range(build(name, **DIMS).period))]
FLEXIBLE = [(n, i) for n, i in ALL if attention.flex_unsupported(build(n, **DIMS).at(i)) is None]
NEVER = [n for n in ENCODINGS if all(attention.flex_unsupported(build(n, **DIMS).at(i)) for i in range(build(n, **DIMS).period))]


def qkv(T, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=g) for _ in range(3)]


def test_the_registry_has_both_kinds():
    """Guards the parametrizations below against an empty list; names only in this assertion."""
    assert {"alibi", "t5"} <= {n for n, _ in FLEXIBLE} and {"shaw", "fire", "rope", "nope"} <= set(NEVER)
    assert ("rnope_swa", 0) in FLEXIBLE and ("rnope_swa", 1) not in FLEXIBLE  # the window, not the NoPE layer


@pytest.mark.parametrize("T", [17, 64])
@pytest.mark.parametrize("name,layer", FLEXIBLE, ids=[f"{n}[{i}]" for n, i in FLEXIBLE])
def test_flex_equals_sdpa(name, layer, T):
    enc = perturbed(name).at(layer)
    pos = torch.arange(T) + 5  # an offset: the table is read at key pos[0]
    q, k, v = qkv(T)
    q, k = enc.rotate(q, k, pos)
    with torch.no_grad():
        want = softmax_attention(q, k, v, enc.bias(q, pos, pos))
        got = attention.flex_attention(q, k, v, enc, pos, compiled=False)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


WINDOWED = [(n, i) for n, i in FLEXIBLE if "window" in parameters(n)]  # the policies with a sliding window


@pytest.mark.parametrize("name,layer", WINDOWED, ids=[f"{n}[{i}]" for n, i in WINDOWED])
def test_blocks_beyond_a_window_are_skipped_and_the_output_unchanged(name, layer):
    """A -inf bias beyond distance w leaves only the blocks near the diagonal in the BlockMask."""
    T, window = 3 * flex.BLOCK + 5, 9
    enc = perturbed(name, window=window).at(layer)
    pos = torch.arange(T)
    q, k, v = qkv(T)
    q, k = enc.rotate(q, k, pos)
    table = attention.distance_table(q, enc, pos)
    assert torch.isinf(table[:, window:]).all() and torch.isfinite(table[:, :window]).all()
    mask = flex.block_mask(torch.isfinite(table).any(0))
    assert mask.kv_num_blocks.flatten().tolist() == [1, 2, 2, 2]  # the diagonal block and the one before
    with torch.no_grad():
        torch.testing.assert_close(attention.flex_attention(q, k, v, enc, pos, compiled=False),
                                   softmax_attention(q, k, v, enc.bias(q, pos, pos)), atol=1e-5, rtol=1e-5)


@pytest.fixture
def eager(monkeypatch):
    """The model's flex path with the uncompiled kernel; counts the calls that took it."""
    calls = []

    def kernel(compiled=True, device_type="cpu"):
        calls.append(compiled)
        return flex_attention
    monkeypatch.setattr(flex, "kernel", kernel)
    return calls


@pytest.mark.parametrize("name", [n for n in ENCODINGS if n not in NEVER])
def test_the_model_takes_flex_exactly_on_flexible_layers(name, eager):
    """Whole models, flex vs sdpa with the same weights: equal outputs; flex ran on the flexible layers only,
    never under auto on CPU (no FlexAttention backward there), never for randomized positions."""
    period = build(name, **DIMS).period
    n_layers = max(2, period)
    flexible = [(name, i % period) in FLEXIBLE for i in range(n_layers)]
    torch.manual_seed(0)
    nets = {impl: Transformer(encoding=perturbed(name), n_layers=n_layers, **DIMS, attention_impl=impl).eval()
            for impl in flex.IMPLS}
    for net in nets.values():
        net.load_state_dict(nets["sdpa"].state_dict())
    assert [b.attention_impl for b in nets["flex"].blocks] == ["flex" if f else "sdpa" for f in flexible]
    x = torch.randint(0, 256, (B, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = nets["sdpa"](x)
        assert not eager
        torch.testing.assert_close(nets["auto"](x), want, atol=1e-5, rtol=1e-5)
        assert not eager  # auto on CPU: SDPA
        torch.testing.assert_close(nets["flex"](x), want, atol=1e-5, rtol=1e-5)
        assert len(eager) == sum(flexible)
        nets["flex"](x, pos=torch.arange(40) * 3)  # randomized positions: q_idx - kv_idx is not a distance
    assert len(eager) == sum(flexible)
    nets["flex"].train()(x).sum().backward()  # needs a gradient: no FlexAttention backward on CPU, SDPA
    assert len(eager) == sum(flexible)


@pytest.mark.parametrize("name", NEVER)
def test_explicit_flex_where_unsupported_is_one_line(name):
    cfg = Config(encoding={"name": name}, model=ModelConfig(attention_impl="flex"))
    with pytest.raises(ValueError, match=r"^model.attention_impl='flex' needs a score bias of i - j alone, but "
                       rf"encoding '{name}' has none \(.+\); use one of \['auto', 'sdpa'\]$") as e:
        from_config(cfg.model, cfg.encoding)
    assert "\n" not in str(e.value)
    auto = from_config(ModelConfig(), cfg.encoding)
    assert {b.attention_impl for b in auto.blocks} == {"sdpa"}


def test_bad_knobs_are_one_line():
    with pytest.raises(ValueError, match=r"^unknown model.attention_impl 'flax'; expected one of "
                                         r"\['auto', 'sdpa', 'flex'\]$"):
        ModelConfig(attention_impl="flax")
    with pytest.raises(ValueError, match=r"^model.attention_impl='flex' needs attention=softmax"):
        Transformer(encoding=build("rope", **DIMS), **DIMS, attention="linear", attention_impl="flex")


def test_rows_carry_attention_impl_only_when_flex_runs():
    """SDPA runs' params are what they were before the knob; a run where some layer takes flex says so."""
    def params(name, impl, device="cpu"):
        return encoding_params(Config(encoding={"name": name}, model=ModelConfig(attention_impl=impl), device=device))
    assert params("alibi", "auto") == params("alibi", "sdpa") == {}
    assert params("alibi", "flex") == params("rnope_swa", "flex") == {"attention_impl": "flex"}
    assert params("alibi", "auto", "cuda") == {}  # auto: none of AUTO_DEVICES until verified on a GPU
    assert params("alibi", "flex", "cuda") == {"attention_impl": "flex"}
    assert params("rope", "auto", "cuda") == {}


def test_runs_needs_an_arange_and_a_pass_the_device_has():
    q = torch.zeros(1, H, 8, D)
    assert flex.runs("flex", q, torch.arange(8) + 100)
    assert not flex.runs("flex", q, torch.tensor([0, 1, 2, 3, 5, 6, 7, 8]))
    assert not flex.runs("flex", q.requires_grad_(), torch.arange(8))
    assert not flex.runs("auto", q.detach(), torch.arange(8))  # CPU is not in AUTO_DEVICES


@pytest.mark.slow
def test_compiled_kernel_equals_sdpa():
    """The compiled kernel (the path that saves memory), once: the first flexible encoding, T 64 (~10 s)."""
    name, layer = FLEXIBLE[0]
    enc = perturbed(name).at(layer)
    T, pos = 64, torch.arange(64)
    q, k, v = qkv(T)
    with torch.no_grad():
        torch.testing.assert_close(attention.flex_attention(q, k, v, enc, pos), softmax_attention(q, k, v, enc.bias(q, pos, pos)),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(DEVICE != "cuda", reason="FlexAttention's backward: runs with HARNESS_TEST_DEVICE=cuda")
@pytest.mark.parametrize("name", ["alibi", "t5", "rnope_swa"])
def test_cuda_training_step_through_flex_equals_sdpa(name):
    """flex on CUDA trains through the compiled kernel: gradients (bias parameters included) equal SDPA's."""
    torch.manual_seed(0)
    nets = {impl: Transformer(encoding=perturbed(name), **DIMS, attention_impl=impl).to(DEVICE)
            for impl in ("flex", "sdpa")}
    nets["flex"].load_state_dict(nets["sdpa"].state_dict())
    x = torch.randint(0, 256, (B, 200), device=DEVICE)
    for net in nets.values():
        net(x).float().pow(2).mean().backward()
    for (n, a), (_, b) in zip(nets["flex"].named_parameters(), nets["sdpa"].named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-3, msg=n)
