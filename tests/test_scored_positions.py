"""Scoring only a window's scored positions (Transformer.forward(last=...), used by the sliding protocol) gives
the full forward's logits and the same PPL rows, for every registered encoding."""
import math

import pytest
import torch
import torch.nn.functional as F

from harness.encodings import ENCODINGS, build
from harness.measure import extrapolation
from harness.model import Transformer
from harness.tasks.data import eval_windows

H, D, T, LAYERS = 2, 16, 40, 2
DIMS = dict(d_model=H * D, n_heads=H, head_dim=D)


def model(name, attention="softmax"):
    torch.manual_seed(0)
    enc = build(name, n_layers=LAYERS, **DIMS)
    with torch.no_grad():  # parameters off their init, so a bias or gate that starts at zero shows
        for p in enc.parameters():
            p.add_(torch.rand_like(p))
    return Transformer(encoding=enc, n_layers=LAYERS, attention=attention, attention_impl="sdpa", **DIMS).eval()


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_last_positions_and_query_blocks_equal_the_full_forward(name, monkeypatch):
    """last= gives the full forward's last rows; scores no fused kernel forms, formed in query blocks
    (harness.attention.QUERY_BLOCK), give the logits of one whole (Tq, Tk) square, with and without last=."""
    from harness import attention
    net = model(name)
    x = torch.randint(0, 256, (3, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = net(x)  # T = 40 < QUERY_BLOCK: one square
        for last in (1, 7, T):
            torch.testing.assert_close(net(x, last=last), full[:, -last:], rtol=1e-5, atol=1e-5)
        monkeypatch.setattr(attention, "QUERY_BLOCK", 8)  # five blocks, the last one short
        torch.testing.assert_close(net(x), full, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(net(x, last=21), full[:, -21:], rtol=1e-5, atol=1e-5)


def test_linear_attention_last_positions():
    net = model("rope", attention="linear")
    x = torch.randint(0, 256, (2, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(net(x, last=5), net(x)[:, -5:], rtol=1e-5, atol=1e-5)


def _full_nll(net, windows, train_len):
    """The reference: every position through the whole model, then the scored ones' NLL (the old lm_nll)."""
    total = n = beyond = n_beyond = right = 0
    for x, y, mask in windows:
        logits = net(x)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), reduction="none").view_as(y)
        far = mask.clone()
        far[:, :train_len] = False
        total, n = total + nll[mask].double().sum().item(), n + int(mask.sum())
        beyond, n_beyond = beyond + nll[far].double().sum().item(), n_beyond + int(far.sum())
        right += int(((logits.argmax(-1) == y) & mask).sum())
    return total / n, beyond / n_beyond, n, right / n


@pytest.mark.parametrize("name", ["rope", "alibi", "stick_breaking", "cope", "fox"])
@pytest.mark.parametrize("protocol,stride", [("sliding", 8), ("nonoverlapping", None)])
def test_sliding_rows_equal_the_full_computation(name, protocol, stride):
    net = model(name)
    tokens = torch.randint(0, 256, (400,), generator=torch.Generator().manual_seed(3))
    windows = list(eval_windows(tokens, 32, protocol=protocol, stride=stride, max_tokens=160))
    nll, far, n, (pos_sum, pos_n), acc = extrapolation.lm_nll(net, windows, 16, 4, "cpu")
    want = _full_nll(net, windows, 16)
    assert (n, acc) == (want[2], want[3])
    assert math.isclose(nll, want[0], rel_tol=1e-6) and math.isclose(far, want[1], rel_tol=1e-6)
    assert pos_n.sum() == n and math.isclose(pos_sum.sum() / n, nll, rel_tol=1e-9)



def test_a_batch_holds_windows_that_score_from_one_position():
    # the sliding protocol's first window scores all 32 of its tokens, the next ones their last 8: batched with
    # them it would make lm_nll compute every position of the whole batch
    tokens = torch.randint(0, 256, (400,), generator=torch.Generator().manual_seed(3))
    windows = list(eval_windows(tokens, 32, protocol="sliding", stride=8, max_tokens=160))
    batches = list(extrapolation._batches(windows, 4))
    firsts = [[int(m.nonzero()[0]) for m in b[2]] for b in batches]
    assert firsts[0] == [0] and all(f == [24] * len(f) for f in firsts[1:]) and max(map(len, firsts)) == 4
    assert torch.equal(torch.cat([b[0] for b in batches]), torch.cat([w[0] for w in windows]))  # all, in order
    nonoverlapping = list(eval_windows(tokens, 32, protocol="nonoverlapping", max_tokens=160))
    assert [len(b[0]) for b in extrapolation._batches(nonoverlapping, 4)] == [4, 1]
