"""One attention path (harness/attention.py): the weights any code reports are the weights the model uses, for
every registered encoding, against reference normalizers written here from the papers; nothing outside
harness/attention.py forms attention or calls an encoding's attention hooks; wrappers forward every hook."""
import math
import re
from pathlib import Path

import pytest
import torch

from harness import attention
from harness.claims import attention as claims_attention
from harness.encodings import ENCODINGS, build
from harness.encodings._base import HOOKS, Encoding, Wrapper
from harness.encodings._layered import L2Normed, Windowed
from harness.measure import attention as measure_attention
from harness.model import Transformer

ROOT = Path(__file__).resolve().parent.parent
H, D, T, LAYERS = 2, 16, 12, 2
DIMS = dict(d_model=H * D, n_heads=H, head_dim=D)


def softmax_reference(scores, n):
    """exp(s_ij) / Σ_j exp(s_ij) in fp64; masked scores are -inf."""
    e = (scores.double() - scores.double().amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def sigmoid_reference(scores, n):
    """Ramapuram et al. 2025 (arXiv 2409.04431) §3: σ(scores + b), b = -log n with n the training length the
    encoding was built for (apple/ml-sigmoid-attention); masked scores are -inf, so their weight is 0."""
    return torch.sigmoid(scores.double() - math.log(n))


def stick_breaking_reference(scores, n):
    """Tan et al. 2024 (arXiv 2410.17980) eq. 1: A_ij = σ(z_ij) Π_{j<k<=i} (1 - σ(z_ik)) for j < i, the own key
    i taking the rest of the stick (the encoding's docstring: rows sum to 1); a plain double loop."""
    z = scores.double()
    out = torch.zeros_like(z)
    Tq, Tk = z.shape[-2:]
    for i in range(Tq):
        own = i + Tk - Tq
        rest = torch.ones(z.shape[:-2], dtype=z.dtype)
        for j in range(own - 1, -1, -1):
            out[..., i, j] = torch.sigmoid(z[..., i, j]) * rest
            rest = rest * (1 - torch.sigmoid(z[..., i, j]))
        out[..., i, own] = rest
    return out


# The encodings whose normalizer is not softmax, each with its reference; a new one fails the registry check below
# until its reference is written here.
OWN_NORMALIZERS = {"sigmoid_alibi": sigmoid_reference, "stick_breaking": stick_breaking_reference}


def model(name):
    torch.manual_seed(0)
    enc = build(name, n_layers=LAYERS, **DIMS)
    with torch.no_grad():  # parameters off their init, so a bias or gate that starts at zero shows
        for p in enc.parameters():
            p.add_(torch.rand_like(p))
    return Transformer(encoding=enc, n_layers=LAYERS, attention_impl="sdpa", **DIMS).eval()


def test_the_normalizer_references_cover_the_registry():
    own = {n for n in ENCODINGS if any(build(n, n_layers=LAYERS, **DIMS).at(i).replaces_softmax
                                       for i in range(LAYERS))}
    assert own == set(OWN_NORMALIZERS)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_reported_weights_are_the_models(name):
    """The observed weights equal the reference normalizer on the observed scores; the forward that computes its
    output from them equals the unobserved forward (SDPA's own softmax, or the encoding's normalizer); the
    measurement and claims code report exactly these weights."""
    net = model(name)
    x = torch.randint(0, 256, (2, T), generator=torch.Generator().manual_seed(1))
    seen = []
    with torch.no_grad():
        plain = net(x)
        observed = net(x, observer=seen.append)
    torch.testing.assert_close(observed, plain, atol=2e-6, rtol=0)
    assert [s.layer for s in seen] == list(range(LAYERS))
    for s in seen:
        enc = net.encoding.at(s.layer)
        ref = OWN_NORMALIZERS[name] if enc.replaces_softmax else softmax_reference
        # n: the training length sigmoid attention's b = -log n is built for (its default, 64)
        torch.testing.assert_close(s.weights.double(), ref(s.scores, 64), atol=1e-6, rtol=1e-5)
        assert (s.weights.triu(1) == 0).all()
    reported = measure_attention.probabilities(net, x)
    assert all(torch.equal(r, s.weights) for r, s in zip(reported, seen))
    assert claims_attention.probabilities is measure_attention.probabilities


def test_decoding_observes_the_same_weights_as_a_full_forward():
    """Weights over the cache (new queries against every cached key) are the full forward's last rows."""
    net = model("alibi")
    x = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(2))
    full, step = [], []
    with torch.no_grad():
        net(x, observer=full.append)
        cache = attention.KVCache(LAYERS)
        net(x[:, :-3], cache=cache)
        net(x[:, -3:], cache=cache, observer=step.append)
    for f, s in zip(full, step):
        torch.testing.assert_close(s.weights, f.weights[..., -3:, :], atol=1e-6, rtol=0)


class Recording(Encoding):
    """An inner encoding that records which hook was called and returns a sentinel from each."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def _record(self, hook, *args):
        self.calls.append(hook)
        return hook

    def rotate(self, q, k, pos):
        self._record("rotate")
        return q, k

    def token_state(self, x):
        return self._record("token_state")

    def bias(self, q, q_pos, k_pos):
        self._record("bias")
        return None

    def scores_bias(self, q, k, q_pos, k_pos, state):
        self._record("scores_bias")
        return None

    def normalize(self, scores):
        return self._record("normalize")


@pytest.mark.parametrize("wrapper", [lambda e: Windowed(e, 4), L2Normed], ids=["Windowed", "L2Normed"])
def test_wrappers_forward_every_hook(wrapper):
    """Each hook of HOOKS reaches the inner encoding through a wrapper, including hooks the wrapper does not know."""
    assert set(HOOKS) <= {n for n in vars(Wrapper)}
    inner = Recording()
    w = wrapper(inner)
    q = torch.zeros(1, 1, 3, 4)
    pos = torch.arange(3)
    args = {"rotate": (q, q, pos), "token_state": (torch.zeros(1, 3, 4),), "bias": (q, pos, pos),
            "scores_bias": (q, q, pos, pos, None), "normalize": (torch.zeros(1, 1, 3, 3),)}
    assert set(args) == set(HOOKS)
    for hook in HOOKS:
        inner.calls.clear()
        getattr(w, hook)(*args[hook])
        assert hook in inner.calls, f"{type(w).__name__}.{hook} did not reach the inner encoding"
    assert w.replaces_softmax  # Recording overrides normalize: the wrapper says so too


# Where attention may be formed and its hooks called: the one path, and the encodings that define (and, for
# composites, delegate) the hooks.
HOOK_CALL = re.compile(r"(\w+)\.(rotate|bias|scores_bias|token_state|normalize)\(")
# harness.attention's own functions, the precision pipelines' rotate(p, x, cos, sin) (a RoPE table function) and
# the conformance oracle's cases.rotate(x, inv_freq, pos, attention_factor, layout) (its fp64 RoPE reference)
NOT_HOOKS = {"attention", "pp", "cases"}
ATTENTION_FORMS = re.compile(r"scaled_dot_product_attention|\bsoftmax\(|(?<!attention\.)\bflex_attention\(")


def _sources():
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        # harness/bench/probes/: one-off GPU kernel probes (their `tile.rotate` is a Triton tile kernel, not a hook);
        # harness/pretrained/banded.py: an attention function for transformers' own models (AttentionInterface),
        # which rotate with their own RoPE; the harness's models never reach it
        if rel in ("harness/attention.py", "harness/pretrained/banded.py") or \
                rel.startswith(("harness/encodings/", "harness/bench/probes/")):
            continue
        yield rel, path.read_text()


def test_only_harness_attention_forms_attention():
    hooks = [(rel, m.group(0)) for rel, text in _sources() for m in HOOK_CALL.finditer(text)
             if m.group(1) not in NOT_HOOKS]
    forms = [(rel, m.group(0)) for rel, text in _sources() for m in ATTENTION_FORMS.finditer(text)
             if rel != "harness/flex.py" or m.group(0) == "scaled_dot_product_attention"]
    assert hooks == [] and forms == []
