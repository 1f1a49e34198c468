"""`make claims` (issue 8): verdict rules on synthetic evidence, the table writer, the registry's fields,
and the attention maps recomputed outside the model. No training."""
import math

import pytest
import torch

from harness import encodings
from harness.claims import CLAIMS, costs, maths, run, trained
from harness.claims.attention import locality, probabilities
from harness.claims.table import VERDICTS, Claim, Evidence, by_parts, write
from harness.model import Transformer

NAN = math.nan
S, C, I = VERDICTS  # supported, contradicted, inconclusive


def _base(ppl1, ppl8):
    return {f"ppl{k}_{b:g}": v for k, vals in ((1, ppl1), (8, ppl8)) for b, v in zip(trained.BASES, vals)}


def _linear(rope, nope, drop):
    return dict(ppl_linear_rope=rope, ppl_linear_nope=nope, ppl_softmax_rope=5.0, loss_drop_linear_rope=drop)


# rule -> [(numbers, expected verdict)]: each rule shown to reach each verdict
CASES = {
    maths.relative_rule: [(dict(norm_err_fp64=1e-16, shift_err_fp64=1e-16), S),
                          (dict(norm_err_fp64=1e-3, shift_err_fp64=1e-16), C),
                          (dict(norm_err_fp64=1e-8, shift_err_fp64=1e-16), I)],
    maths.decay_rule: [(dict(spearman=-0.9, tail_ratio=0.3), S), (dict(spearman=0.2, tail_ratio=0.3), C),
                       (dict(spearman=-0.3, tail_ratio=0.7), I), (dict(spearman=NAN, tail_ratio=0.3), I)],
    maths.receptive_field_rule: [(dict(identity_err=1e-14, width_min=2, width_max=200, width_ratio=100), S),
                                 (dict(identity_err=1e-3, width_min=2, width_max=200, width_ratio=100), C),
                                 (dict(identity_err=1e-14, width_min=2, width_max=3, width_ratio=1.5), I)],
    maths.sinusoidal_linear_rule: [(dict(max_err=1e-12), S), (dict(max_err=0.1), C), (dict(max_err=1e-6), I)],
    costs.fp16_rule: [(dict(fp16_phase_max_32768=3.0, fp32_phase_max_32768=0.002), S),
                      (dict(fp16_phase_max_32768=0.001, fp32_phase_max_32768=0.002), C),
                      (dict(fp16_phase_max_32768=3.0, fp32_phase_max_32768=0.05), I)],
    costs.cache_rule: [(dict(cache_growth=16.0, len_growth=16.0, onfly_over_cached_1024=1.3), S),
                       (dict(cache_growth=16.0, len_growth=16.0, onfly_over_cached_1024=0.9), C),
                       (dict(cache_growth=16.0, len_growth=16.0, onfly_over_cached_1024=1.0), I)],
    costs.cost_rule: [(dict(extra_params_rope=0.0, rotate_slope=1.0, overhead_first=1.3, overhead_last=1.05), S),
                      (dict(extra_params_rope=8.0, rotate_slope=1.0, overhead_first=1.3, overhead_last=1.05), C),
                      (dict(extra_params_rope=0.0, rotate_slope=0.4, overhead_first=1.3, overhead_last=1.05), I)],
    trained.locality_rule: [(dict(spearman=1.0, spread=1.5, n_runs=5.0), S),
                            (dict(spearman=-0.9, spread=1.5, n_runs=5.0), C),
                            (dict(spearman=0.9, spread=1.01, n_runs=5.0), I),
                            (dict(spearman=NAN, spread=NAN, n_runs=0.0), I)],
    trained.learned_freq_rule: [(dict(max_rel=0.01), S), (dict(max_rel=0.5), C), (dict(max_rel=0.1), I)],
    trained.bases_rule: [(_base([7, 6, 5, 5.5, 5.2], [9, 8, 7, 9, 8]), S),
                         (_base([5, 6, 7, 5.5, 5.2], [5, 8, 9, 6, 8]), C),
                         (_base([7, 6, 5, 5.5, 5.2], [9, 6, 7, 9, 8]), I), (_base([NAN] * 5, [NAN] * 5), I)],
    trained.rope_lengths_rule: [(dict(r2=1.02, r4=1.2, r8=2.0), S), (dict(r2=1.3, r4=1.2, r8=2.0), C),
                                (dict(r2=1.02, r4=1.2, r8=1.3), I)],
    trained.absolute_vs_bias_rule: [(dict(r8_learned=2.0, r8_sinusoidal=1.3, r8_alibi=1.0, r8_t5=1.01), S),
                                    (dict(r8_learned=1.0, r8_sinusoidal=1.0, r8_alibi=1.0, r8_t5=1.01), C),
                                    (dict(r8_learned=2.0, r8_sinusoidal=1.3, r8_alibi=1.0, r8_t5=1.2), I)],
    trained.linear_rule: [(_linear(5.0, 6.0, 0.4), S), (_linear(5.0, 6.0, 0.9), C), (_linear(7.0, 6.0, 0.4), C),
                          (_linear(6.0, 6.0, 0.4), I), (_linear(NAN, 6.0, 0.4), I)],
    trained.rope_vs_learned_rule: [(dict(ppl_rope=5.0, ppl_learned=5.1, params_rope=0.0, params_learned=9.0), S),
                                   (dict(ppl_rope=6.0, ppl_learned=5.0, params_rope=0.0, params_learned=9.0), C),
                                   (dict(ppl_rope=5.3, ppl_learned=5.0, params_rope=0.0, params_learned=9.0), I)],
}


@pytest.mark.parametrize("rule, numbers, expected", [(r, n, e) for r, cases in CASES.items() for n, e in cases],
                         ids=lambda x: getattr(x, "__name__", None) if callable(x) else None)
def test_rule_on_synthetic_evidence(rule, numbers, expected):
    v, reason = rule(numbers)
    assert v == expected, reason
    assert reason.strip()


def test_every_rule_is_tested_and_reaches_every_verdict():
    for claim in CLAIMS:
        assert claim.rule in CASES, f"claim {claim.id}: rule {claim.rule.__name__} has no synthetic cases"
    for rule, cases in CASES.items():
        assert {e for _, e in cases} == set(VERDICTS), rule.__name__


def test_by_parts():
    assert by_parts([("a", True), ("b", True)])[0] == S
    assert by_parts([("a", True), ("b", False), ("c", True)])[0] == I
    assert by_parts([("a", False), ("b", False), ("c", True)])[0] == C
    assert by_parts([("a", False)])[0] == C  # a one-part claim that fails is contradicted


def test_registry_fields():
    ids = [c.id for c in CLAIMS]
    assert ids == list(range(1, len(CLAIMS) + 1)) and len(CLAIMS) >= 15
    for c in CLAIMS:
        assert c.text.strip() and c.source.strip() and c.command.strip()
        assert f"harness.claims --only {c.id}" in c.command
        assert callable(c.measure) and len(c.rule.__doc__.split()) > 10  # the thresholds are written down
    with pytest.raises(ValueError, match="empty source"):
        Claim(99, "x", " ", "cmd", maths.relative, maths.relative_rule)


def test_writer(tmp_path):
    claim = Claim(1, "a | b", "000 §1", "python -m harness.claims --only 1", maths.relative, maths.relative_rule)
    rows = [(claim, Evidence({"x": 1.0}, "x = 1", "c01.png"), "supported", "because"),
            (claim, None, "inconclusive", "not run")]
    text = write(rows, tmp_path, "header line").read_text()
    table = [line for line in text.splitlines() if line.startswith("| 1 |")]
    assert len(table) == 2 and "a \\| b" in table[0] and "[plot](c01.png)" in table[0]
    assert "**supported**" in table[0] and "not measured" in table[1]
    assert "1 supported, 0 contradicted, 1 inconclusive" in text and "header line" in text
    assert maths.relative_rule.__doc__.split()[0] in text  # the rule with its thresholds


def test_fast_claims_measure(tmp_path):
    rows, _ = run(tmp_path / "no-sweeps", tmp_path, only={1, 2, 13, 14})
    for claim, ev, v, _ in rows:
        assert v == S and ev.summary and set(ev.numbers)  # exact maths: supported
        assert ev.plot is None or (tmp_path / ev.plot).exists()


def test_trained_claims_without_sweeps_are_inconclusive(tmp_path):
    rows, _ = run(tmp_path / "no-sweeps", tmp_path, only={3, 5, 6, 7, 8, 9, 15})
    assert [v for *_, v, _ in rows] == [I] * 7


@pytest.mark.parametrize("name", ["rope", "alibi", "t5"])
def test_attention_probabilities_reproduce_the_block(name):
    torch.manual_seed(0)
    net = Transformer(encoding=encodings.build(name, d_model=64, n_heads=4, head_dim=16), n_layers=2,
                      d_model=64, n_heads=4).eval()
    idx, pos = torch.randint(0, 256, (2, 24)), torch.arange(24)
    probs = probabilities(net, idx)
    x = net.encoding.embed(net.tok(idx), pos)
    for block, p in zip(net.blocks, probs):
        assert torch.allclose(p.sum(-1), torch.ones(()), atol=1e-5) and (p.triu(1) == 0).all()
        v = block.qkv(block.ln1(x)).view(2, 24, 3, 4, 16)[:, :, 2].transpose(1, 2)  # (B, H, T, D)
        y = x + block.proj((p @ v).transpose(1, 2).reshape(2, 24, -1))
        with torch.no_grad():
            x = block(x, net.encoding, pos)
            assert torch.allclose(y + block.mlp(block.ln2(y)), x, atol=1e-5)
    assert 0 < locality(probs) <= 2


def test_locality_of_known_maps():
    T = 32
    diag = torch.eye(T)[None, None]  # attends to itself: distance 0
    uniform = torch.ones(T, T).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True))[None, None]
    assert locality([diag]) == 0 and locality([uniform]) == pytest.approx(1.0)
