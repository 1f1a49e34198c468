"""KV-cache decode benchmark (harness/measure/decode_bench.py): rows, their NaN reasons, and the cache's bytes
against the closed form 2 (k and v) * n_layers * B * H * L * head_dim * element_size."""
import math
import re

import pytest
import torch

from harness import decode
from harness.encodings import build
from harness.measure import decode_bench
from harness.model import Transformer

H, D, N_LAYERS = 2, 16, 2
DIMS = dict(d_model=H * D, n_heads=H, head_dim=D)
KNOBS = dict(new_tokens=3, repeats=2, warmup=1, device="cpu")


def model(name, **kw):
    torch.manual_seed(0)
    enc = build(name, **{**DIMS, **kw.pop("enc", {})})
    return Transformer(encoding=enc, n_layers=N_LAYERS, attention_impl="sdpa", **DIMS, **kw).eval()


def by_metric(rows, metric):
    return {r["eval_len"]: r for r in rows if r["metric"] == metric}


def test_rope_decodes_at_a_positive_rate_and_caches_exactly_the_closed_form_bytes():
    B, lens = 2, [8, 24]
    rows = decode_bench.rows(model("rope"), lens, batch_size=B, **KNOBS)
    assert len(rows) == 4
    assert all(r["protocol"] == "decode" and r["extra_params"] == dict(batch_size=B, new_tokens=3, path="kv_cache")
               for r in rows)
    tps, kv = by_metric(rows, "decode_tokens_per_s"), by_metric(rows, "kv_cache_bytes")
    assert all(math.isfinite(tps[L]["value"]) and tps[L]["value"] > 0 and tps[L]["unit"] == "tokens/s" for L in lens)
    assert {L: kv[L]["value"] for L in lens} == {L: 2 * N_LAYERS * B * H * L * D * 4 for L in lens}  # fp32: 4 bytes


def test_cache_bytes_follow_the_dtype_and_the_timing_leaves_the_prefill_unchanged():
    net = model("alibi").to(torch.bfloat16)
    cache = decode_bench.prefill(net, 10, 1, "cpu")
    assert decode_bench.cache_bytes(cache) == 2 * N_LAYERS * 1 * H * 10 * D * 2  # bf16: 2 bytes
    k0 = list(cache.k)
    assert decode_bench.decode_tokens_per_s(net, cache, new_tokens=2, repeats=1, warmup=0, device="cpu") > 0
    assert len(cache) == 10 and all(a is b for a, b in zip(cache.k, k0))


@pytest.mark.parametrize("name, kw, reason", [
    ("xpos", {}, r"^encoding 'xpos' cannot decode with a KV cache"),
    ("rope", dict(attention="linear"), r"^KV-cache decoding needs attention=softmax")])
def test_a_model_that_cannot_decode_with_a_cache_gives_nan_rows_with_the_reason(name, kw, reason):
    with pytest.raises(ValueError, match=reason):  # the reason is decode.check's own line
        decode.check(model(name, **kw))
    rows = decode_bench.rows(model(name, **kw), [8, 16], **KNOBS)
    assert sorted((r["metric"], r["eval_len"]) for r in rows) == [
        ("decode_tokens_per_s", 8), ("decode_tokens_per_s", 16), ("kv_cache_bytes", 8), ("kv_cache_bytes", 16)]
    for r in rows:
        assert math.isnan(r["value"])
        assert re.match(reason, r["extra_params"]["nan_reason"])
        assert r["extra_params"]["path"] == "kv_cache"


def test_lengths_beyond_a_learned_table_give_nan_rows():
    """max_len 10: a prefill of 8 fits but its steps reach position 10; a prefill of 12 does not fit."""
    rows = decode_bench.rows(model("learned", enc=dict(max_len=10)), [8, 12], **KNOBS)
    tps, kv = by_metric(rows, "decode_tokens_per_s"), by_metric(rows, "kv_cache_bytes")
    assert kv[8]["value"] == 2 * N_LAYERS * H * 8 * D * 4
    for r in (tps[8], tps[12], kv[12]):
        assert math.isnan(r["value"]) and "beyond the learned table" in r["extra_params"]["nan_reason"]
