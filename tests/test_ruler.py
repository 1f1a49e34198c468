"""harness.tasks.ruler (mini-RULER, Hsieh et al. 2024): every answer equals what a plain parse of its prompt gives
(parsers written here from the task definitions, not from the generators' code), needles sit at the stated
depth, haystacks hold nothing a needle could be confused with, sizes and refusals, string_match on cases worked
by hand from RULER's definition, and the lm-eval tasks tasks/ruler_*.yaml."""
import collections
import re

import pytest
import torch
from lm_eval import simple_evaluate
from lm_eval.api.model import LM

from harness.tasks import synthetic  # first: harness.tasks.synthetic imports harness.tasks.ruler at its bottom
from harness.tasks import ruler
from harness.config import EvalConfig
from harness.lmeval import rows as lm_eval_rows

LENGTHS = [64, 128, 256, 512, 1024]
NIAH = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"]
MIN_LEN = {"niah_single": 18, "niah_multikey": 45, "niah_multivalue": 60, "niah_multiquery": 54, "vt": 48,
           "cwe": 43, "fwe": 46}  # the minimal lengths the docstrings state for the defaults
STATEMENT = re.compile(rb"\x02([a-z]+)=([a-z]+|[0-9]+)")  # a needle `KEY key=value` or `KEY name=rhs`


def _gen(name, n, length, seed=0, **params):
    return ruler.TASKS[name](n, length, torch.Generator().manual_seed(seed), **params)


def _split(b):
    """[(prompt, answer)] bytes per sequence: [PAD]* prompt SEP answer, the answer = the masked targets."""
    K = int(b.mask[0].sum())
    assert (b.mask.sum(dim=1) == K).all() and b.mask[:, -K:].all()
    seq = torch.cat([b.x, b.y[:, -1:]], dim=1)
    out = []
    for s in seq.tolist():
        prompt = bytes(s[:-K - 1]).lstrip(b"\0")
        assert s[-K - 1] == synthetic.SEP and b"\0" not in prompt and b"\x01" not in prompt
        out.append((prompt, bytes(s[-K:])))
    return out


def parse(name, prompt, num_cw=2):
    """The answer by the task's definition, from the prompt bytes alone."""
    if name.startswith("niah"):  # needles `KEY key=value`, then the question `KEY k1,k2,..`
        body, _, question = prompt.rpartition(b"\x02")
        needles = STATEMENT.findall(body)
        return b",".join(v for k in question.split(b",") for key, v in needles if key == k)
    if name == "vt":  # `KEY x=ddd` and `KEY y=x`; the question `KEY ddd`: every name holding ddd, in order
        body, _, value = prompt.rpartition(b"\x02")
        held, names = {value}, []
        for name_, rhs in STATEMENT.findall(body):
            if rhs in held:
                held.add(name_)
                names.append(name_)
        return b",".join(names)
    words = prompt.split(b" ")
    ranked = collections.Counter(words).most_common()
    top = num_cw if name == "cwe" else 3
    counts = [c for _, c in ranked] + [0]  # a 0 for "no further word"
    assert len(ranked) >= top and counts[top - 1] > counts[top], "the answer must be unambiguous"
    if name == "fwe":
        assert counts[0] > counts[1] > counts[2]
        return b",".join(w for w, _ in ranked[:3])
    return b",".join(sorted((w for w, _ in ranked[:top]), key=words.index))  # cwe: order of first appearance


def _haystack(prompt):
    """The prompt's filler: needles/statements and the question removed (niah, vt)."""
    return STATEMENT.sub(b"", prompt.rpartition(b"\x02")[0])


@pytest.mark.parametrize("name", list(ruler.TASKS))
def test_answers_are_the_parse_of_the_prompt_at_every_length(name):
    for L in LENGTHS:
        b = _gen(name, 8, L, seed=L)
        assert b.x.shape == b.y.shape == b.mask.shape == (8, L) and b.pos.tolist() == list(range(L))
        assert b.sep == ord(",")
        pairs = _split(b)
        for prompt, answer in pairs:
            assert parse(name, prompt) == answer, (name, L, prompt, answer)
        if name in NIAH + ["vt"]:  # the haystack grows with the length: the problem scales
            assert len(_haystack(pairs[0][0])) >= L - MIN_LEN[name] - 1
        else:
            assert len(pairs[0][0]) > L - 2 * MIN_LEN[name]


def test_keys_values_and_names_are_distinct_and_sized():
    for prompt, _ in _split(_gen("niah_multikey", 16, 256)):
        keys, values = zip(*STATEMENT.findall(prompt.rpartition(b"\x02")[0]))
        assert len(set(keys)) == 4 and len(set(values)) == 4
        assert {len(k) for k in keys} == {3} and {len(v) for v in values} == {4} and all(v.isdigit() for v in values)
    for prompt, _ in _split(_gen("niah_multivalue", 16, 256)):
        keys, values = zip(*STATEMENT.findall(prompt.rpartition(b"\x02")[0]))
        assert len(set(keys)) == 1 and len(set(values)) == 4
    for prompt, answer in _split(_gen("vt", 16, 256, num_chains=3, num_hops=2)):
        names = [n for n, _ in STATEMENT.findall(prompt)]
        assert len(names) == len(set(names)) == 9 and len(answer.split(b",")) == 3
    for prompt, answer in _split(_gen("niah_multiquery", 16, 256, num_keys=5, num_queries=3)):
        assert len(prompt.rpartition(b"\x02")[2].split(b",")) == 3 and len(answer.split(b",")) == 3
    listed = set(ruler.WORDS_FILE.read_text().encode().split())
    for prompt, answer in _split(_gen("cwe", 16, 512, num_cw=3)):
        assert set(prompt.split(b" ")) <= listed and {len(w) for w in prompt.split(b" ")} == {4}
        assert len(answer.split(b",")) == 3
    for prompt, _ in _split(_gen("fwe", 16, 512, word_len=5)):
        assert all(re.fullmatch(rb"[a-z]{5}", w) for w in prompt.split(b" "))


@pytest.mark.parametrize("name", NIAH)
@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_depth_places_the_queried_needle(name, depth):
    for L in (64, 1024):
        for prompt, _ in _split(_gen(name, 8, L, depth=depth)):
            body, _, question = prompt.rpartition(b"\x02")
            target = question.split(b",")[0]
            f = len(_haystack(prompt))
            found = []
            for m in STATEMENT.finditer(body):  # haystack bytes before each needle of the first queried key
                if m.group(1) == target:
                    found.append(len(STATEMENT.sub(b"", body[:m.start()])))
            assert round(depth * f) in found, (name, L, depth, found, f)


def test_depth_none_spreads_the_needle():
    at = []
    for prompt, _ in _split(_gen("niah_single", 64, 512)):
        body = prompt.rpartition(b"\x02")[0]
        at.append(body.index(b"\x02") / len(_haystack(prompt)))
    assert min(at) < 0.2 and max(at) > 0.8


@pytest.mark.parametrize("haystack", ["repeat", "kjv"])
def test_haystack_has_no_digit_or_control_byte(haystack):
    for name in NIAH + ["vt"]:
        for prompt, _ in _split(_gen(name, 16, 1024, haystack=haystack)):
            filler = _haystack(prompt)
            assert filler and all(32 <= c < 127 and not chr(c).isdigit() for c in filler), (name, haystack)
            assert prompt.count(b"\x02") == len(STATEMENT.findall(prompt)) + 1  # each KEY: a statement or the question
    if haystack == "kjv":  # real text: differs between sequences
        assert len({p for p, _ in _split(_gen("niah_single", 4, 256, haystack="kjv"))}) == 4


@pytest.mark.parametrize("name", list(ruler.TASKS))
def test_deterministic_given_the_generator(name):
    a, b, c = _gen(name, 8, 300, seed=1), _gen(name, 8, 300, seed=1), _gen(name, 8, 300, seed=2)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.mask, b.mask)
    assert not torch.equal(a.x, c.x)


@pytest.mark.parametrize("name", list(ruler.TASKS))
def test_minimal_length_and_too_short(name):
    b = _gen(name, 2, MIN_LEN[name])
    assert b.x.shape == (2, MIN_LEN[name]) and all(parse(name, p) == a for p, a in _split(b))
    with pytest.raises(ValueError, match=rf"task '{name}' needs length >= {MIN_LEN[name]}; got {MIN_LEN[name] - 1}"):
        _gen(name, 2, MIN_LEN[name] - 1)


@pytest.mark.parametrize("name", NIAH + ["vt"])
def test_bad_haystack_and_depth_refused_with_the_choices(name):
    with pytest.raises(ValueError, match=r"haystack must be one of \['repeat', 'kjv'\]; got 'essay'"):
        _gen(name, 2, 128, haystack="essay")
    if name != "vt":
        for d in (-0.1, 1.5):
            with pytest.raises(ValueError, match=r"depth must be in \[0, 1\] or None"):
                _gen(name, 2, 128, depth=d)


def test_bad_parameters_refused():
    cases = [("cwe", dict(freq_cw=1, freq_ucw=1), "freq_cw must be > freq_ucw"),
             ("cwe", dict(word_len=9), r"word_len must be one of \[4, 5\]"),
             ("cwe", dict(num_cw=0), "num_cw must be an integer >= 1"),
             ("niah_multiquery", dict(num_queries=5), "num_queries must be <= num_keys = 4"),
             ("fwe", dict(alpha=1.0), "alpha must be > 1"),
             ("vt", dict(num_chains=6, name_len=1), "needs 30 distinct items per sequence but only 26 exist")]
    for name, params, words in cases:
        with pytest.raises(ValueError, match=words):
            _gen(name, 2, 1024, **params)
    with pytest.raises(ValueError, match="needs 404 distinct words of 4 letters; ruler_words.txt has 400"):
        _gen("cwe", 1, 2048)


def test_zipf_counts_strict_top3_and_exact_total():
    for N in range(9, 700):
        c = ruler.zipf_counts(N, 2.0)
        assert sum(c) == N and c == sorted(c, reverse=True) and c[0] > c[1] > c[2] > max(c[3:] + [0]), N
    assert ruler.zipf_counts(608, 2.0)[:4] == [369, 92, 41, 23]  # floor(608 / zeta(2) / k^2), k = 1..4


def test_word_list_is_documented_lowercase_words():
    lines = ruler.WORDS_FILE.read_text().splitlines()
    header = [ln for ln in lines if ln.startswith("#")]
    words = [ln for ln in lines if not ln.startswith("#")]
    assert header == lines[:len(header)] and "King James" in " ".join(header)
    assert len(words) == len(set(words)) >= 300 and all(re.fullmatch("[a-z]+", w) for w in words)
    assert len(_split(_gen("cwe", 2, 1024, word_len=5))) == 2


def _t(*rows):
    return torch.tensor([list(r) for r in rows], dtype=torch.long)


def test_string_match_hand_worked():
    # NVIDIA/RULER scripts/eval/synthetic/constants.py: string_match_all = mean over refs of
    # [ref.lower() in pred.lower()], string_match_part = max over refs of the same
    pred = _t(b"values 1234 and 9999", b"none of them here...", b"THE KEY IS ABC,2345.", b"5678-123-99999999999")
    answer = _t(b"1234,5678,9999", b"1234,5678,9999", b",abc,,2345,abc", b"1234,5678,9999")
    all_, part = ruler.string_match(pred, answer, ord(","))  # refs 1234 5678 9999 | same | abc 2345 abc | same
    assert all_.tolist() == pytest.approx([2 / 3, 0.0, 1.0, 2 / 3]) and part.tolist() == [1.0, 0.0, 1.0, 1.0]
    one, _ = ruler.string_match(_t(b"x"), _t(b"xy"), ord(","))  # a ref longer than pred is not in it
    assert one.tolist() == [0.0]
    b = _gen("niah_multivalue", 4, 128)
    ref = b.y[b.mask].view(4, -1)
    assert ruler.string_match(ref, ref, b.sep)[0].tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="no reference"):
        ruler.string_match(_t(b"ab"), _t(b",,"), ord(","))


# ---- lm-eval: tasks/miniruler_*.yaml through the repo's task path (harness.lmeval.rows.task_manager) ----
LM_TASKS = [f"miniruler_{k}" for k in ruler.TASKS]


@pytest.fixture()
def registered(monkeypatch):
    """harness.tasks.synthetic.TASKS with the ruler generators (what synthetic.py's merge of ruler.TASKS gives)."""
    monkeypatch.setattr(synthetic, "TASKS", {**synthetic.TASKS, **ruler.TASKS})


@pytest.fixture()
def loaded(registered):
    return lm_eval_rows.task_manager(LM_TASKS).load(LM_TASKS)["tasks"]


def test_lm_eval_docs_are_the_generators_test_set(loaded):
    for name, task in loaded.items():
        meta, docs = task.config.metadata, list(task.test_docs())
        gen = meta["ruler_task"]
        grid = [{"depth": float(d)} for d in meta.get("depths", [])] or [{}]
        assert len(docs) == len(meta["lengths"]) * len(grid) * meta["n"]
        for L in meta["lengths"]:
            for extra in grid:
                g, seqs = synthetic.eval_generator(L, 0), []
                while len(seqs) < meta["n"]:
                    seqs += _split(ruler.TASKS[gen](EvalConfig().batch_size, L, g, **meta.get("params", {}), **extra))
                got = [(d["input"], d["target"], d["sep"]) for d in docs
                       if d["length"] == L and d.get("depth") == extra.get("depth")]
                assert len(got) == meta["n"]
                for (inp, target, sep), (prompt, answer) in zip(got, seqs):
                    assert inp.encode().lstrip(b"\0") == prompt + b"\x01" and target.encode() == answer and sep == ","
                    assert parse(gen, inp.encode().lstrip(b"\0")[:-1]) == target.encode()
        assert task.config.generation_kwargs["max_gen_toks"] == len(docs[0]["target"])


class ScriptedLM(LM):
    """Answers by `parse`, but on docs with doc_id % 3 == 2 the first reference is replaced by junk."""

    def generate_until(self, requests):
        out = []
        for r in requests:
            gen = r.task_name[len("miniruler_"):]
            right = parse(gen, r.args[0].encode().lstrip(b"\0")[:-1]).decode()
            refs = right.split(",")
            out.append(right if r.doc_id % 3 != 2 else ",".join(["#" * len(refs[0])] + refs[1:]))
        return out

    def loglikelihood(self, requests):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError


def test_string_match_scores_end_to_end(registered):
    # docs 0..5 are all at length 64; 2 and 5 lose one of their k references: 4 + 2 (k - 1) / k over 6
    tm = lm_eval_rows.task_manager(LM_TASKS)
    r = simple_evaluate(model=ScriptedLM(), tasks=LM_TASKS, task_manager=tm, limit=6)["results"]
    k = {"niah_single": 1, "niah_multikey": 1, "niah_multivalue": 4, "niah_multiquery": 2, "vt": 5, "cwe": 2, "fwe": 3}
    for name, refs in k.items():
        assert r[f"miniruler_{name}"]["64,none"] == pytest.approx((4 + 2 * (refs - 1) / refs) / 6), name
