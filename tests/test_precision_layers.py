"""Kernel-level precision of the per-layer policies' rotating members (harness.measure.precision_layers)."""
import numpy as np
import pandas as pd
import pytest
import torch

from harness.measure import precision_layers as PL


def test_members_are_the_layers_that_rotate():
    """irope (nope_every 2): RoPE+L2 layer 0, NoPE-with-temperature layer 1; local_global: local 0, global 1;
    rnope_swa: its sliding-window RoPE layer 0, not its global NoPE layer 1 (which only has no window)."""
    m = PL.members()
    assert {"irope:0", "irope:1", "local_global:0", "local_global:1", "rnope_swa:0"} <= set(m)
    assert "rnope_swa:1" not in m and not any(s.startswith(("rope:", "alibi:", "nope:")) for s in m)


def test_fp64_member_logits_equal_the_closed_form_rope_logit():
    """local_global's global layer (RoPE, base 1e6, half layout) in fp64 against RoFormer's closed form
    (Su et al. 2021, arXiv 2104.09864, eq. 16) in HF's rotate_half pairing (i, i + D/2), with HF's fp32
    inv_freq (transformers modeling_rope_utils._compute_default_rope_parameters), k at position 0."""
    D, base = PL.HEAD_DIM, 1e6
    enc = PL._policy("local_global").at(1).double()
    pos = torch.tensor([0, 1, 7, 100, 4095, 70000])
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 1, 1, 1, D, generator=g, dtype=torch.float64).expand(-1, -1, -1, len(pos), -1)
    got = PL._logits(enc, q, k, pos)[0].numpy()
    inv = (1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))).double().numpy()  # HF's line
    h, qv, kv = D // 2, q[0, 0, 0].numpy(), k[0, 0, 0].numpy()
    ang = pos.numpy()[:, None] * inv[None]  # (N, D/2)
    want = (np.cos(ang) @ (qv[:h] * kv[:h] + qv[h:] * kv[h:]) + np.sin(ang) @ (qv[:h] * kv[h:] - qv[h:] * kv[:h]))
    np.testing.assert_allclose(got, want / np.sqrt(D), rtol=1e-9, atol=1e-9)


def test_rows_measure_the_dtype_rounding_and_nothing_where_the_member_is_exact():
    df = pd.DataFrame(PL.member_rows(["local_global:1", "irope:1"], dtypes=("bf16",), max_len=4096))
    assert set(df.metric) == {"logit_err"} and set(df.protocol) == {"cast", "autocast"}
    g = df[df.encoding == "local_global:1"]
    # bf16 keeps 8 significant bits: a unit-variance logit's rounding is ~2^-9, far below the 0.1 bound
    assert (g.value > 0).all() and g.value.max() < 0.05
    # Llama 4's temperature is exactly 1 while floor((p + 1) / floor_scale) = 0 (p < 63 at floor_scale 64):
    # the NoPE layer's q is untouched, so bf16 adds no error there (and rounds it beyond)
    t = df[df.encoding == "irope:1"].set_index(["protocol", "eval_len"]).value
    assert (t.xs(32, level="eval_len") == 0).all() and (t.xs(4096, level="eval_len") > 0).all()  # [16, 32)


def test_unknown_member_is_one_line():
    with pytest.raises(ValueError, match="unknown encoding 'irop'"):
        PL.member_rows(["irop:0"], max_len=64)
