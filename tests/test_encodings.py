"""Registry-driven property tests: every encoding in ENCODINGS gets these for free."""
import os

import pytest
import torch
from hydra import compose, initialize_config_dir

from harness import encodings
from harness.config import to_config
from harness.encodings import ENCODINGS, build
from harness.model import Transformer, from_config
from harness.attention import attention_logits

CONF = os.path.join(os.path.dirname(__file__), "..", "conf")
DIMS = dict(d_model=64, n_heads=4, head_dim=16)
NAMES = list(ENCODINGS)
RELATIVE = [n for n in NAMES if ENCODINGS[n].relative]
ROTARY = [n for n in NAMES if ENCODINGS[n].rotary]


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def logits(enc, q, k, pos, layer=0):
    """Pre-softmax attention scores as block `layer` forms them, (R q)(R k)^T / sqrt(D) + bias, -inf above the
    diagonal: the model's own attention_logits on the hooks of enc.at(layer). (B, H, T, T)"""
    enc = enc.at(layer)
    rq, rk = enc.rotate(q, k, pos)
    x = _rand(q.shape[0], q.shape[2], DIMS["d_model"], seed=7, dtype=q.dtype)  # the block input token_state reads
    return attention_logits(rq, rk, enc.scores_bias(rq, rk, pos, pos, enc.token_state(x)))


def layers(enc):
    """Each distinct per-layer encoding (one for all but a per-layer policy)."""
    return [enc.at(i) for i in range(enc.period)]


def test_yaml_set_equals_registry():
    yamls = sorted(f[:-5] for f in os.listdir(os.path.join(CONF, "encoding")) if f.endswith(".yaml"))
    assert yamls == sorted(ENCODINGS)


@pytest.mark.parametrize("name", NAMES)
def test_yaml_composes_through_hydra_and_builds(name):
    with initialize_config_dir(config_dir=os.path.abspath(CONF), version_base="1.3"):
        cfg = to_config(compose("config", overrides=[f"encoding={name}"]))
    assert cfg.encoding["name"] == name
    model = from_config(cfg.model, cfg.encoding)
    assert model.encoding.name == name
    out = model(torch.randint(0, 256, (2, 24)))
    assert out.shape == (2, 24, 256) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_logits_depend_only_on_distance(name):
    torch.manual_seed(0)
    enc = build(name, **DIMS).double()
    T = 48
    q, k = _rand(2, 4, T, 16), _rand(2, 4, T, 16, seed=1)
    for layer in range(enc.period):
        base = logits(enc, q, k, torch.arange(T), layer)
        for offset in (1, 37, 1000, 4000):
            shifted = logits(enc, q, k, torch.arange(T) + offset * enc.shift_unit, layer)
            torch.testing.assert_close(shifted, base, rtol=1e-9, atol=1e-9, msg=f"{name} layer {layer} offset {offset}")


@pytest.mark.parametrize("name", [n for n in NAMES if n not in RELATIVE])
def test_absolute_encodings_are_not_relative(name):
    # the test above must be able to fail: these change logits under a shift (FIRE once i > L = 512)
    torch.manual_seed(0)
    enc = build(name, **DIMS).double()
    x = _rand(1, 24, 64)
    pos = torch.arange(24)
    a, b = enc.embed(x, pos), enc.embed(x, pos + 600)
    qa = a.view(1, 24, 4, 16).transpose(1, 2)
    qb = b.view(1, 24, 4, 16).transpose(1, 2)
    diffs = []
    for layer in range(enc.period):  # a per-layer policy is absolute when one of its layers is
        la, lb = logits(enc, qa, qa, pos, layer), logits(enc, qb, qb, pos + 600, layer)
        causal = torch.isfinite(la)
        diffs.append(float((la - lb).detach()[causal].abs().max()))
    assert max(diffs) > 1e-3


@pytest.mark.parametrize("name", ROTARY)
def test_rotary_preserves_norms(name):
    enc = build(name, **DIMS).double()
    q, k = _rand(2, 4, 100, 16), _rand(2, 4, 100, 16, seed=1)
    rotated = []
    for e in layers(enc):
        rq, rk = e.rotate(q, k, torch.arange(100) * 97)
        torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(rk.norm(dim=-1), k.norm(dim=-1), rtol=1e-12, atol=1e-12)
        rotated.append(not torch.allclose(rq, q))
    assert any(rotated)  # and it does rotate


def _model(name, attention):
    torch.manual_seed(0)
    enc = build(name, **DIMS)
    return Transformer(encoding=enc, n_layers=2, attention=attention, **DIMS).eval()


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("name", NAMES)
def test_causality(name, attention):
    enc = ENCODINGS[name](**{k: v for k, v in DIMS.items() if k in encodings.parameters(name)})
    if attention == "linear" and (enc.has_bias or enc.replaces_softmax):  # a bias or a normalizer of its own
        with pytest.raises(ValueError, match="which linear attention (cannot take|has none of)"):
            _model(name, attention)
        return
    model = _model(name, attention)
    idx = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(0))
    t = 23
    changed = idx.clone()
    changed[:, t + 1:] = torch.randint(0, 256, (2, 40 - t - 1), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], rtol=0, atol=1e-6)
    assert (a[:, t + 1:] - b[:, t + 1:]).abs().max() > 1e-4  # later positions do see the change


@pytest.mark.parametrize("name", NAMES)
def test_gradients_reach_every_parameter(name):
    model = _model(name, "softmax").train()
    model(torch.randint(0, 256, (2, 16))).logsumexp(-1).mean().backward()
    for pname, p in model.encoding.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), f"{name}.{pname} got no gradient"


@pytest.mark.parametrize("name", ROTARY + ["xpos"])
def test_model_cast_keeps_rotary_phase_in_fp32(name):
    # Modalities #462: a stored inv_freq buffer cast by model.to(bf16) puts the phase in bf16. Cast the
    # encoding to bf16; the rotation of bf16 inputs must match the fp32 encoding's up to bf16 I/O rounding.
    enc32, enc16 = build(name, **DIMS), build(name, **DIMS).to(torch.bfloat16)
    params = {k: v.to(torch.bfloat16) for k, v in enc32.state_dict().items()}  # same values in both
    enc16.load_state_dict(params)
    enc32.load_state_dict({k: v.float() for k, v in params.items()})
    q = _rand(1, 4, 600, 16, dtype=torch.float32).to(torch.bfloat16)
    pos = torch.arange(600) * 7  # phases up to ~4200 rad at the highest frequency
    for e32, e16 in zip(layers(enc32), layers(enc16)):
        ref, _ = e32.rotate(q.float(), q.float(), pos)
        got, _ = e16.rotate(q, q, pos)
        assert (got.float() - ref).abs().max() < 0.05  # a bf16 phase would be off by up to pi


def test_rotary_table_is_built_once_per_forward_and_not_kept_after_it():
    """Encoding.per_positions: every block of a forward shares one table; a table that needs grad
    (rope_rf's alpha while training) is built per block; nothing is kept once the forward ends."""
    enc = build("rope_rf", head_dim=16)
    model = Transformer(encoding=enc, n_layers=3, d_model=32, n_heads=2)
    built, make = [], enc._table
    enc._table = lambda pos, dtype: built.append(1) or make(pos, dtype)
    x = torch.randint(0, 256, (1, 8))
    model(x)  # training forward: alpha requires grad, so no caching: one table per block
    assert len(built) == 3
    built.clear()
    with torch.no_grad():
        pos = torch.arange(8)
        first = model(x, pos)
        assert len(built) == 1 and "_per_positions" not in enc.__dict__  # one table for three blocks, dropped
        enc.alpha.add_(0.5)  # what an optimizer step does
        second = model(x, pos)
    assert len(built) == 2 and not torch.equal(first, second)
    with torch.no_grad():  # outside a model, a kept table is rebuilt once the parameters change
        t1 = enc.table(pos)
        assert enc.table(pos) is t1
        enc.alpha.add_(0.5)
        assert enc.table(pos) is not t1


@pytest.mark.parametrize("name", [n for n in NAMES if issubclass(ENCODINGS[n], encodings.RotaryEncoding)])
def test_every_rotary_encoding_keeps_the_rotary_contract(name):
    """What the real-model backend and the precision studies read from a RotaryEncoding: head_dim, base, layout,
    rope_type, frequencies (R/2 inverse frequencies and a factor) and a (T, R/2) table that agree."""
    from harness.rope import LAYOUTS
    enc = build(name, **DIMS)
    assert enc.head_dim == DIMS["head_dim"] and enc.base > 0 and enc.layout in LAYOUTS and isinstance(enc.rope_type,
                                                                                                     str)
    inv_freq, factor = enc.frequencies(None)
    cos, sin = enc.table(torch.arange(8), torch.float32)
    assert inv_freq.ndim == 1 and cos.shape == sin.shape == (8, inv_freq.numel()) and float(factor) > 0
    torch.testing.assert_close(cos ** 2 + sin ** 2, torch.full_like(cos, float(factor) ** 2))
