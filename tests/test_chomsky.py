"""Chomsky-hierarchy tasks (harness/tasks/chomsky.py): every answer against a plain-Python computation from the prompt
bytes, the harness.tasks.synthetic contract (shapes, shift, masks, markers, determinism, minimum lengths), and the
report section on a hand-made results frame."""
import math

import pandas as pd
import pytest
import torch

from harness.tasks import synthetic as S  # first: harness.tasks.synthetic imports harness.tasks.chomsky at its bottom
from harness.tasks import chomsky as C
from harness.report import chomsky as report_chomsky

LENGTHS = (8, 9, 16, 37, 40, 64, 500, 1024)
MINIMUM = {"parity": 2, "even_pairs": 3, "modular_arithmetic": 4, "duplicate_string": 6, "binary_addition": 6}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _split(b):
    """[(prompt, answer)] strings of a batch: the bytes before and after the only SEP, PADs left out."""
    seq = torch.cat([b.x[:, :1], b.y], dim=1)  # (n, T+1)
    out = []
    for row in seq.tolist():
        row = [c for c in row if c != S.PAD]
        k = row.index(S.SEP)
        out.append((bytes(row[:k]).decode(), bytes(row[k + 1:]).decode()))
    return out


def test_every_task_is_tested_and_named_once():
    assert sorted(C.TASKS) == sorted(MINIMUM)
    assert all(fn.__name__ == name for name, fn in C.TASKS.items())


@pytest.mark.parametrize("task", list(C.TASKS))
@pytest.mark.parametrize("length", LENGTHS)
def test_contract_shapes_masks_markers_determinism(task, length):
    b = C.TASKS[task](4, length, _gen(1))
    assert b.x.shape == b.y.shape == b.mask.shape == (4, length) and b.pos.shape == (length,)
    assert b.x.dtype == b.y.dtype == b.pos.dtype == torch.int64 and b.mask.dtype == torch.bool
    assert torch.equal(b.x[:, 1:], b.y[:, :-1]) and torch.equal(b.pos, torch.arange(length))
    seq = torch.cat([b.x[:, :1], b.y], dim=1)
    assert ((seq == S.SEP).sum(dim=1) == 1).all() and ((seq == S.KEY).sum() == 0)
    after_sep = (seq == S.SEP).long().cumsum(dim=1).bool() & (seq != S.SEP)
    assert torch.equal(b.mask, after_sep[:, 1:])  # every answer byte is scored, nothing else
    ans = b.y[b.mask]
    assert (((ans >= ord("a")) & (ans <= ord("z"))) | ((ans >= ord("0")) & (ans <= ord("9")))).all()
    content = seq[seq != S.PAD]
    assert ((content == S.SEP) | (content >= ord("*"))).all()  # no other control byte
    again, other = C.TASKS[task](4, length, _gen(1)), C.TASKS[task](4, length, _gen(2))
    assert all(torch.equal(getattr(b, f), getattr(again, f)) for f in ("x", "y", "mask", "pos"))
    assert not torch.equal(b.x, other.x)
    assert S.accuracy(torch.nn.functional.one_hot(b.y, 256).float(), b)["seq_acc"] == 1.0


@pytest.mark.parametrize("length", LENGTHS)
def test_parity_and_even_pairs_answers(length):
    for p, a in _split(C.parity(16, length, _gen(3))):
        assert len(p) == length - 1 and set(p) <= {"0", "1"}
        assert a == str(p.count("1") % 2)
    for p, a in _split(C.even_pairs(16, length, _gen(3))):
        assert len(p) == length - 1 and set(p) <= {"a", "b"}
        assert a == str((p.count("ab") + p.count("ba")) % 2)
        assert a == str(int(p[0] != p[-1]))  # why the task is regular: first vs last decides it


@pytest.mark.parametrize("length", LENGTHS)
def test_modular_arithmetic_answers_follow_the_usual_precedence(length):
    pairs = _split(C.modular_arithmetic(32, length, _gen(4)))
    differs = 0
    for p, a in pairs:
        e = length - 1 if length % 2 == 0 else length - 2  # the largest odd length <= length - 1
        assert len(p) == e and set(p[0::2]) <= set("01234") and set(p[1::2]) <= set("+-*")
        assert a == str(eval(p) % 5)  # Python: * before + and -, as the authors' file; % is non-negative
        left = int(p[0])  # strictly left to right, for contrast
        for op, x in zip(p[1::2], p[2::2]):
            left = {"+": left + int(x), "-": left - int(x), "*": left * int(x)}[op]
        differs += str(left % 5) != a
    assert length < 16 or differs > 0  # the order matters on these expressions


@pytest.mark.parametrize("expr, value", [("1+2*3", 2), ("1-1-1", 4), ("0*1+4*3-2", 0),  # the authors' docstring
                                         ("4", 4), ("2*3*4-1", 3), ("3-2*2", 4), ("4*4-4*4+1", 1)])
def test_modular_arithmetic_hand_worked(expr, value):
    nums = torch.tensor([[int(c) for c in expr[0::2]]])
    ops = torch.tensor([[ord(c) for c in expr[1::2]]], dtype=torch.long).reshape(1, -1)
    if ops.shape[1]:
        assert int(C._evaluate(nums, ops, 5)) == value
    assert eval(expr) % 5 == value


def test_modular_arithmetic_parameters():
    for p, a in _split(C.modular_arithmetic(32, 41, _gen(5), modulus=7, operators="+*")):
        assert set(p[1::2]) <= {"+", "*"} and set(p[0::2]) <= set("0123456") and a == str(eval(p) % 7)
    with pytest.raises(ValueError, match="modulus must be in"):
        C.modular_arithmetic(2, 41, _gen(0), modulus=11)
    for bad in ("", "/", "++"):
        with pytest.raises(ValueError, match="operators must be distinct"):
            C.modular_arithmetic(2, 41, _gen(0), operators=bad)


@pytest.mark.parametrize("length", LENGTHS)
def test_duplicate_string_answers(length):
    for p, a in _split(C.duplicate_string(8, length, _gen(6))):
        assert len(p) == length // 3 and set(p) <= {"a", "b"} and a == p + p
    for p, a in _split(C.duplicate_string(8, length, _gen(6), vocab_size=26)):
        assert a == p + p
    with pytest.raises(ValueError, match="vocab_size must be in"):
        C.duplicate_string(2, 30, _gen(0), vocab_size=1)


@pytest.mark.parametrize("length", LENGTHS)
def test_binary_addition_answers_are_little_endian_sums(length):
    P = length // 2
    for p, ans in _split(C.binary_addition(32, length, _gen(7))):
        a, b = p.split("+")
        assert len(p) == P and len(a) >= 1 and len(b) >= 1 and set(a + b + ans) <= {"0", "1"}
        x, y = int(a[::-1], 2), int(b[::-1], 2)  # little-endian: the first byte is the lowest bit
        assert x >= 1 and y >= 1  # the authors draw each number from [1, 2^len - 1]
        assert len(ans) == P - 1 and int(ans[::-1], 2) == x + y


def test_binary_addition_hand_worked_and_split_covers_its_range():
    b = C.binary_addition(2000, 12, _gen(8))  # P = 6: a has 1..4 bits, b the rest of 5
    pairs = _split(b)
    assert {len(p.split("+")[0]) for p, _ in pairs} == {1, 2, 3, 4}
    for p, ans in pairs:
        if p == "011+01":  # 6 + 2 = 8 = 0001 little-endian, zero-extended to 5 bits
            assert ans == "00010"
        if p == "1111+1":  # 15 + 1 = 16
            assert ans == "00001"
    assert {"011+01", "1111+1"} <= {p for p, _ in pairs}


def test_answers_are_balanced():
    par = C.parity(4000, 20, _gen(9)).y[:, -1]
    ev = C.even_pairs(4000, 20, _gen(9)).y[:, -1]
    mod = C.modular_arithmetic(4000, 20, _gen(9)).y[:, -1]
    assert abs((par == ord("1")).float().mean() - 0.5) < 0.03 and abs((ev == ord("1")).float().mean() - 0.5) < 0.03
    assert set(mod.tolist()) == set(range(ord("0"), ord("5")))


@pytest.mark.parametrize("task, minimum", sorted(MINIMUM.items()))
def test_too_short_names_the_minimum(task, minimum):
    with pytest.raises(ValueError, match=f"task {task!r} needs length >= {minimum}; got {minimum - 1}"):
        C.TASKS[task](2, minimum - 1, _gen(0))
    assert C.TASKS[task](2, minimum, _gen(0)).mask.any()


# ---- report section ----

def _rows(table, tasks=("parity", "binary_addition"), lens=(40, 64, 500), seeds=(0, 1, 2)):
    """Hand-made result rows: table[(task, encoding)] = OOD acc; in-distribution acc is 1.0; seed s adds 0.01 s."""
    out = []
    for task in tasks:
        for enc in ("nope", "rope", "alibi"):
            for s in seeds:
                for L in lens:
                    v = 1.0 if L == 40 else table[(task, enc)] + 0.01 * s
                    out.append(dict(encoding=enc, task=task, seed=s, metric="acc", eval_len=L, train_len=40, value=v,
                                    protocol="iid", params="{}"))
    return pd.DataFrame(out)


OOD = {("parity", "nope"): 0.9, ("parity", "rope"): 0.6, ("parity", "alibi"): 0.5,
       ("binary_addition", "nope"): 0.7, ("binary_addition", "rope"): 0.4, ("binary_addition", "alibi"): 0.6}


def test_report_section_ood_means_and_mrr():
    df = _rows(OOD)
    noise = df.assign(metric="seq_acc", value=0.0)  # other metrics and tasks are not this section's
    other = df.assign(task="copy", value=0.0)
    md = report_chomsky.section(pd.concat([df, noise, other], ignore_index=True))
    assert md.startswith(report_chomsky.TITLE) and "copy" not in md.split("\n### ")[1]
    table = [line for line in md.splitlines() if line.startswith("| ")]
    head = [c.strip() for c in table[0].strip("|").split("|")]
    assert head == ["variant", "parity", "binary_addition", "MRR", "MRR 95% CI", "P(best MRR)"]
    body = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")] for r in table[1:4]}
    assert [r.split("|")[1].strip() for r in table[1:4]] == ["nope", "alibi", "rope"]  # best MRR first
    # per seed the OOD mean is the value of every OOD length; over seeds 0.9 + 0.01 * (0, 1, 2) -> 0.91
    assert body["nope"][1].startswith("**0.91") and body["nope"][3] == "1.000"
    # parity ranks nope, rope, alibi; binary_addition nope, alibi, rope: alibi (1/3 + 1/2) / 2, rope the same
    assert body["alibi"][3] == body["rope"][3] == f"{(1 / 3 + 1 / 2) / 2:.3f}"
    assert body["nope"][5] == "1.00"  # nope is best in every seed of every task
    assert "In-distribution accuracy" in md and "1 ± 0" in md


def test_report_section_drops_a_seed_missing_an_ood_length_and_is_empty_without_rows():
    df = _rows(OOD)
    gap = (df.encoding == "rope") & (df.task == "parity") & (df.seed == 2) & (df.eval_len == 500)
    df.loc[gap, "value"] = math.nan
    md = report_chomsky.section(df)
    row = [line for line in md.splitlines() if line.startswith("| rope ")][0]
    assert "0.605 ± 0.064 (n=2)" in row  # seeds 0 and 1 only: mean 0.605, t interval of (0.60, 0.61)
    assert report_chomsky.section(df.assign(task="copy")) == ""
    assert report_chomsky.section(df.assign(metric="ppl")) == ""
    one = report_chomsky.section(_rows(OOD, seeds=(0,)))
    assert "n = 1 seed" in one and "| nope | **0.9** | **0.7** | 1.000 | — | — |" in one


def test_report_section_uses_the_short_label_when_present():
    df = _rows(OOD)
    df["short"] = df.encoding + " train.max_position=2048"
    md = report_chomsky.section(df)
    assert "| nope train.max_position=2048 |" in md
    assert "| nope |" in report_chomsky.section(df, by="encoding")


def test_report_section_keeps_budgets_and_train_lengths_apart():
    df = pd.concat([_rows(OOD).assign(model="tiny"), _rows(OOD).assign(model="small", value=0.5)], ignore_index=True)
    md = report_chomsky.section(df)
    assert "| nope model=tiny |" in md and "| nope model=small |" in md
    assert "| nope model=tiny | **0.910 ± 0.025** |" in md  # not averaged with the small model's runs


def test_report_section_with_a_task_measured_only_in_distribution():
    df = pd.concat([_rows(OOD), _rows({(t, e): 0.5 for t in ["parity"] for e in ("nope", "rope", "alibi")},
                                      tasks=("even_pairs",), lens=(40,))], ignore_index=True)
    md = report_chomsky.section(df)
    assert "MRR over 2 task(s)" in md and "| variant | parity | even_pairs | binary_addition | MRR" in md
