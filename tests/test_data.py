"""Corpora, split, training batches and the evaluation-window protocols of harness.tasks.data."""
import hashlib
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.tasks import data


def test_kjv_is_pinned_english_prose():
    c = data.load_corpus("kjv")
    assert c.sha256 == data.KJV_SHA256 == hashlib.sha256(c.data).hexdigest()
    assert 4_000_000 < c.size < 4_400_000
    assert c.data.startswith(b"The First Book of Moses, called Genesis\n\nIn the beginning God created")
    assert c.data.rstrip().endswith(b"Amen.")
    assert data.load_corpus("kjv") is c  # assembled once per process


def test_kjv_pin_mismatch_is_one_clear_error(monkeypatch):
    data.load_corpus.cache_clear()
    monkeypatch.setattr(data, "KJV_SHA256", "0" * 64)
    with pytest.raises(ValueError, match=r"expected 0{64}, found [0-9a-f]{64}"):
        data.load_corpus("kjv")
    data.load_corpus.cache_clear()


def test_pystdlib_loads_without_tests_or_site_packages():
    c = data.load_corpus("pystdlib")
    assert c.size > 5_000_000 and c.sha256 == hashlib.sha256(c.data).hexdigest()
    assert b"# ==> os.py <==\n" in c.data
    headers = re.findall(rb"^# ==> (.*) <==$", c.data, flags=re.M)
    assert headers == sorted(headers) and b"os.py" in headers
    assert not [h for h in headers if re.search(rb"(^|/)(tests?|idle_test|site-packages)/", h)]


def test_path_corpus_file_and_folder(tmp_path):
    (tmp_path / "b.txt").write_bytes(b"second")
    (tmp_path / "a.txt").write_bytes(b"first\n")
    (tmp_path / ".hidden").write_bytes(b"never")
    assert data.load_corpus(str(tmp_path / "b.txt")).data == b"second"
    assert data.load_corpus(str(tmp_path)).data == b"# ==> a.txt <==\nfirst\n# ==> b.txt <==\nsecond\n"


def test_unknown_corpus_lists_choices():
    with pytest.raises(ValueError, match=r"unknown corpus 'kvj'; expected one of \['kjv', 'pystdlib'\]"):
        data.load_corpus("kvj")


def test_hf_corpus_not_in_cache_is_one_clear_error(monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # restored after the test; load_corpus sets it too
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match=r"corpus 'hf:no-such-user/no-such-set' is not in the local Hugging Face cache"):
        data.load_corpus("hf:no-such-user/no-such-set")


def test_split_is_contiguous_disjoint_and_covers_the_data():
    raw = bytes(range(256)) * 40
    a, b = data.split(raw), data.split(raw)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [t.dtype for t in a.values()] == [torch.uint8] * 3
    assert bytes(torch.cat([a["train"], a["val"], a["test"]]).tolist()) == raw
    assert (a["val"].numel(), a["test"].numel()) == (512, 512)
    with pytest.raises(ValueError, match="val_frac"):
        data.split(raw, val_frac=0.6, test_frac=0.5)


def test_lm_batch_shapes_and_shift():
    tokens = torch.arange(1000) % 251  # distinct within any window, so y = next byte is checkable
    tokens = tokens.to(torch.uint8)
    x, y = data.lm_batch(tokens, 8, 32, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 32) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1]) and torch.equal(y, (x + 1) % 251)
    x2, _ = data.lm_batch(tokens, 8, 32, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="at least 33"):
        data.lm_batch(tokens[:32], 1, 32, torch.Generator())


def _scored_targets(tokens, seq_len, **kw):
    """Text index of every scored target, in iteration order; checks window shapes and y = next byte."""
    out = []
    for x, y, m in data.eval_windows(tokens, seq_len, **kw):
        assert x.shape == y.shape == m.shape == (1, seq_len) and m.dtype == torch.bool
        start = int(x[0, 0])  # tokens are their own index
        assert torch.equal(x[0], torch.arange(start, start + seq_len)) and torch.equal(y, x + 1)
        out += (start + torch.nonzero(m[0]).flatten()).tolist()
    return out


@settings(max_examples=150, deadline=None)
@given(n=st.integers(2, 400), seq_len=st.integers(1, 64), stride_frac=st.floats(0, 1),
       sliding=st.booleans(), cap=st.one_of(st.none(), st.integers(1, 500)))
def test_eval_windows_score_each_token_exactly_once(n, seq_len, stride_frac, sliding, cap):
    tokens = torch.arange(n)
    if n - 1 < seq_len:
        with pytest.raises(ValueError, match="too few"):
            next(data.eval_windows(tokens, seq_len))
        return
    kw = {"protocol": "sliding", "stride": max(1, round(stride_frac * seq_len))} if sliding else {}
    scored = _scored_targets(tokens, seq_len, max_tokens=cap, **kw)
    expected = min(n - 1, cap or n)
    assert sorted(scored) == list(range(expected))  # a prefix of the text, each target exactly once


def test_sliding_scores_only_the_last_stride_after_the_first_window():
    masks = [m[0] for _, _, m in data.eval_windows(torch.arange(41), 16, protocol="sliding", stride=4)]
    assert masks[0].all() and all(m.sum() == 4 and m[-4:].all() for m in masks[1:])
    masks = [m[0] for _, _, m in data.eval_windows(torch.arange(41), 16)]
    assert [int(m.sum()) for m in masks] == [16, 16, 8] and masks[-1][-8:].all()  # tail: last window at the end


@pytest.mark.parametrize("kw, msg", [
    ({"protocol": "slide"}, r"expected one of \['nonoverlapping', 'sliding'\]"),
    ({"protocol": "sliding"}, "needs 1 <= stride <= seq_len"),
    ({"protocol": "sliding", "stride": 17}, "needs 1 <= stride <= seq_len"),
    ({"protocol": "sliding", "stride": 0}, "needs 1 <= stride <= seq_len"),
    ({"protocol": "nonoverlapping", "stride": 4}, "only to protocol 'sliding'"),
])
def test_eval_windows_bad_arguments(kw, msg):
    with pytest.raises(ValueError, match=msg):
        next(data.eval_windows(torch.arange(100), 16, **kw))
