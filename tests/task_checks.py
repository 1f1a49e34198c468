"""The checks every registered synthetic task must pass, as plain functions (not a test module):
tests/test_synthetic.py runs them on harness.tasks.synthetic.TASKS, tests/test_content_tasks.py on the content tasks
it registers. Each takes a task name (and a length) and asserts."""
import pytest
import torch
import torch.nn.functional as F

from harness.tasks import synthetic as S

LENGTHS = (16, 37, 64, 1024)  # 1024 = 16x a 64-byte training length


def rng(seed):
    return torch.Generator().manual_seed(seed)


def minimum_length(task):
    """The shortest length the generator accepts (each says its own minimum in its error)."""
    return next(L for L in range(1, 128) if _fits(task, L))


def _fits(task, L):
    try:
        S.generate(task, 1, L, rng(0))
        return True
    except ValueError:
        return False


def full_sequences(b):
    """The full byte sequences (n, T+1) that x and y were cut from."""
    return torch.cat([b.x[:, :1], b.y], dim=1)


def check_shapes_shift_and_determinism(task, length):
    b = S.generate(task, 4, length, rng(1))
    assert b.x.shape == b.y.shape == b.mask.shape == (4, length) and b.pos.shape == (length,)
    assert b.x.dtype == b.y.dtype == b.pos.dtype == torch.int64 and b.mask.dtype == torch.bool
    assert torch.equal(b.x[:, 1:], b.y[:, :-1])
    again, other = S.generate(task, 4, length, rng(1)), S.generate(task, 4, length, rng(2))
    assert all(torch.equal(getattr(b, f), getattr(again, f)) for f in ("x", "y", "mask", "pos"))
    assert not torch.equal(b.x, other.x)  # a one-bit answer (parity) may repeat by chance; the prompt does not


def check_mask_is_exactly_the_bytes_after_the_only_sep(task, length):
    b = S.generate(task, 4, length, rng(3))
    seq = full_sequences(b)
    assert ((seq == S.SEP).sum(dim=1) == 1).all()
    after_sep = (seq == S.SEP).long().cumsum(dim=1).bool() & (seq != S.SEP)  # (n, T+1)
    assert torch.equal(b.mask, after_sep[:, 1:])
    # markers are control bytes, answers are letters or digits (and a RULER task's reference separator): the byte
    # ranges never overlap
    answers = b.y[b.mask]
    content = ((answers >= ord("a")) & (answers <= ord("z"))) | ((answers >= ord("0")) & (answers <= ord("9")))
    assert (content | (answers == (-1 if b.sep is None else b.sep))).all()
    assert (b.x[b.x < 32] <= S.KEY).all()


def check_oracle_scores_one_and_random_scores_chance(task):
    b = S.generate(task, 64, 128, rng(4))
    oracle = F.one_hot(b.y, 256).float()  # (n, T, V)
    assert S.accuracy(oracle, b)["token_acc"] == S.accuracy(oracle, b)["seq_acc"] == 1.0
    wrong = oracle.clone()
    wrong[0, b.mask[0].nonzero()[0, 0], :] = torch.arange(256.0) == 255  # one answer byte wrong
    acc = S.accuracy(wrong, b)
    assert acc["seq_acc"] == pytest.approx(63 / 64) and acc["token_acc"] < 1.0
    rand = S.accuracy(torch.randn(64, 128, 256, generator=rng(9)), b)
    assert acc["n_answer_tokens"] == int(b.mask.sum())
    assert rand["token_acc"] < 0.03 and rand["seq_acc"] < 0.03  # chance is 1/256


def check_refuses_a_length_below_its_minimum_with_one_line_naming_it(task):
    m = minimum_length(task)
    with pytest.raises(ValueError, match=rf"^task '{task}' needs length >= {m}; got {m - 1}$"):
        S.generate(task, 2, m - 1, rng(0))
