"""harness.tasks.content (count, flip_flop): every answer equals a plain-Python run of its prompt (the interpreters
below are written from the tasks' definitions, not from the generators' code), the statement and instruction laws
are the papers', sizes, refusals and determinism, tests/task_checks.py's checks of every registered task, the
Hydra task configs, and the lm-eval tasks tasks/count.yaml and tasks/flip_flop.yaml."""
from pathlib import Path

import pytest
import torch
import yaml
from lm_eval import simple_evaluate
from lm_eval.api.model import LM

from harness.tasks import synthetic  # first: harness.tasks.synthetic imports the task modules
from harness import config, tasks
from harness.tasks import content as content_tasks
from harness.config import EvalConfig
from harness.lmeval import rows as lm_eval_rows
from tests import task_checks as generic

ROOT = Path(__file__).resolve().parent.parent
NAMES = list(content_tasks.TASKS)
MINIMUM = {"count": 6, "flip_flop": 4}  # the minimal lengths the docstrings state
LENGTHS = [6, 7, 16, 37, 64, 255, 1024]
KEY, SEP = bytes([synthetic.KEY]), bytes([synthetic.SEP])


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """harness.tasks.synthetic.TASKS and config.TASK_NAMES with these generators (what registering them gives)."""
    monkeypatch.setattr(synthetic, "TASKS", {**synthetic.TASKS, **content_tasks.TASKS})
    names = tuple(dict.fromkeys((*config.TASK_NAMES, *content_tasks.TASKS)))
    for module in (config, tasks):  # harness.tasks imported the name
        monkeypatch.setattr(module, "TASK_NAMES", names)


def _gen(name, n, length, seed=0, **params):
    return content_tasks.TASKS[name](n, length, torch.Generator().manual_seed(seed), **params)


def _split(b):
    """[(prompt, answer)] bytes per sequence: [PAD]* prompt SEP answer, the answer = the masked targets."""
    K = int(b.mask[0].sum())
    assert (b.mask.sum(dim=1) == K).all() and b.mask[:, -K:].all()
    out = []
    for s in torch.cat([b.x, b.y[:, -1:]], dim=1).tolist():
        prompt = bytes(s[:-K - 1]).lstrip(b"\0")
        assert s[-K - 1] == synthetic.SEP and b"\0" not in prompt and SEP not in prompt
        out.append((prompt, bytes(s[-K:])))
    return out


def run_count(prompt, nvars=3, max_val=9):
    """Execute the program (`X` x = 0, `x` x ++, `.` pass) and print the asked variable; every increment must be
    one the authors' generator allows (of a variable already set, not past max_val)."""
    body, question = prompt[:-2], prompt[-2:]
    assert question[:1] == KEY
    letters = "abcdefghijklmnopqrstuvwxyz"[:nvars]
    values = {}
    for c in body.decode():
        if c == ".":
            continue
        assert c.lower() in letters, c
        if c.isupper():
            values[c.lower()] = 0
        else:
            assert values.get(c, max_val) < max_val, (c, values)
            values[c] += 1
    return str(values[chr(question[1])]).encode()


def run_flip_flop(prompt):
    """Run the flip-flop register: `w` stores its bit, `r` must repeat the stored bit; the last `r` is asked."""
    ops, bits = prompt[0::2], prompt[1::2]
    assert len(ops) == len(bits) + 1 and ops[:1] == b"w" and ops[-1:] == b"r" and set(ops) <= set(b"wir")
    stored = None
    for op, bit in zip(ops, bits):
        assert bit in b"01"
        if op == ord("w"):
            stored = bit
        elif op == ord("r"):
            assert bit == stored
    return bytes([stored])


def run(name, prompt, **params):
    return run_count(prompt, **params) if name == "count" else run_flip_flop(prompt)


@pytest.mark.parametrize("name, params", [("count", {}), ("count", {"nvars": 1}), ("count", {"nvars": 26}),
                                          ("count", {"nvars": 5, "max_val": 2}), ("flip_flop", {}),
                                          ("flip_flop", {"p_ignore": 0.0}), ("flip_flop", {"p_ignore": 0.98}),
                                          ("flip_flop", {"p_ignore": 1.0})])
def test_answers_are_the_run_of_the_prompt_at_every_length(name, params):
    for L in [L for L in LENGTHS if L >= MINIMUM[name]]:
        b = _gen(name, 16, L, seed=L, **params)
        assert b.x.shape == b.y.shape == b.mask.shape == (16, L) and b.pos.tolist() == list(range(L))
        assert b.sep is None and b.x.dtype == torch.int64
        for prompt, answer in _split(b):
            # the problem fills the length: L - 3 statements, or L // 2 instructions
            assert len(prompt) == (L - 1 if name == "count" else 2 * (L // 2) - 1)
            assert len(answer) == 1 and run(name, prompt, **params) == answer, (name, L, prompt, answer)


def test_count_statement_law_is_the_authors():
    # count_data_gen.py OP_WEIGHTS: set 1, increment 7, pass 50 (dropped increments become passes)
    prompts = [p[:-2].decode() for p, _ in _split(_gen("count", 64, 1024))]
    text = "".join(prompts)
    assert abs(sum(c.isupper() for c in text) / len(text) - 1 / 58) < 0.003
    assert 50 / 58 - 0.005 < text.count(".") / len(text) and 0.05 < sum(c.islower() for c in text) / len(text) < 7 / 58
    assert set(text) == set("abcABC.")
    values = [a for _, a in _split(_gen("count", 256, 64))]
    assert len(set(values)) == 10  # every value 0..9 occurs at the train length
    assert set(values) == set(a for _, a in _split(_gen("count", 256, 1024)))


def test_count_rows_without_a_set_are_drawn_again():
    # at the minimum (3 statements) most draws set nothing; every row kept has its asked variable set
    for prompt, answer in _split(_gen("count", 64, 6)):
        assert prompt[-1:].upper() in prompt[:-2] and run_count(prompt) == answer


def test_flip_flop_instruction_law_is_ffl():
    for p in (0.1, 0.8, 0.98):
        ops = torch.tensor([list(pr[0::2]) for pr, _ in _split(_gen("flip_flop", 256, 512, p_ignore=p))])
        assert (ops[:, 0] == ord("w")).all() and (ops[:, -1] == ord("r")).all()
        mid = ops[:, 1:-1]
        freq = {c: (mid == ord(c)).float().mean().item() for c in "wir"}
        assert abs(freq["i"] - p) < 0.01 and abs(freq["w"] - (1 - p) / 2) < 0.01 and abs(freq["r"] - freq["w"]) < 0.01


def _offset_of_the_event(name, prompt):
    """Bytes from the event that decides the answer to the question: the asked variable's last reset, or the
    last write."""
    if name == "count":
        return len(prompt) - prompt.rindex(prompt[-1:].upper())
    return len(prompt) - prompt.rindex(b"w")


@pytest.mark.parametrize("name, params", [("count", {}), ("flip_flop", {"p_ignore": 0.98})])
def test_the_deciding_event_is_at_no_fixed_offset(name, params):
    # content, not a token index, says where to look: the offset spreads, and further at 16x the length
    short = [_offset_of_the_event(name, p) for p, _ in _split(_gen(name, 64, 64, **params))]
    long = [_offset_of_the_event(name, p) for p, _ in _split(_gen(name, 64, 1024, **params))]
    assert len(set(short)) > 8 and len(set(long)) > 30 and max(long) > 4 * max(short)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_given_the_generator(name):
    a, b, c = _gen(name, 8, 300, seed=1), _gen(name, 8, 300, seed=1), _gen(name, 8, 300, seed=2)
    assert all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("x", "y", "mask", "pos"))
    assert not torch.equal(a.x, c.x)


@pytest.mark.parametrize("name", NAMES)
def test_minimal_length_and_too_short(name):
    m = MINIMUM[name]
    b = _gen(name, 4, m)
    assert b.x.shape == (4, m) and all(run(name, p) == a for p, a in _split(b))
    with pytest.raises(ValueError, match=rf"^task '{name}' needs length >= {m}; got {m - 1}$"):
        _gen(name, 4, m - 1)


@pytest.mark.parametrize("name, params, words", [
    ("count", {"nvars": 0}, r"nvars must be in \[1, 26\] .*; got 0$"), ("count", {"nvars": 27}, r"; got 27$"),
    ("count", {"max_val": 0}, r"max_val must be in \[1, 9\] .*; got 0$"), ("count", {"max_val": 10}, r"; got 10$"),
    ("flip_flop", {"p_ignore": -0.1}, r"p_ignore must be in \[0, 1\]; got -0.1$"),
    ("flip_flop", {"p_ignore": 1.5}, r"p_ignore must be in \[0, 1\]; got 1.5$")])
def test_bad_parameters_refused(name, params, words):
    with pytest.raises(ValueError, match=words):
        _gen(name, 2, 64, **params)


# ---- tests/task_checks.py's checks of every registered task (tests/test_synthetic.py runs them too), on these ----
CASES = [(t, max(L, MINIMUM[t])) for t in NAMES for L in generic.LENGTHS]


@pytest.mark.parametrize("name, length", CASES)
def test_generic_checks(name, length):
    assert generic.minimum_length(name) == MINIMUM[name]
    generic.check_shapes_shift_and_determinism(name, length)
    generic.check_mask_is_exactly_the_bytes_after_the_only_sep(name, length)


@pytest.mark.parametrize("name", NAMES)
def test_generic_oracle_and_refusal(name):
    generic.check_oracle_scores_one_and_random_scores_chance(name)
    generic.check_refuses_a_length_below_its_minimum_with_one_line_naming_it(name)


@pytest.mark.parametrize("name", NAMES)
def test_hydra_task_config_builds_and_trains(name):
    cfg = config.TaskConfig(**yaml.safe_load((ROOT / "conf" / "task" / f"{name}.yaml").read_text()))
    tasks.SyntheticTask.check(cfg, 64)
    task = tasks.build(cfg, 0)
    x, y, mask, pos = task.train_batch(4, 64, torch.Generator().manual_seed(0))
    assert x.shape == (4, x.shape[1]) and cfg.min_len <= x.shape[1] <= 64 and mask.sum() == 4
    assert task.describe() == {"generator": name, **cfg.params}


# ---- lm-eval: tasks/<name>.yaml through the repo's task path (harness.lmeval.rows.task_manager) ----
@pytest.fixture()
def loaded():
    return lm_eval_rows.task_manager(NAMES).load(NAMES)["tasks"]


def test_lm_eval_docs_are_the_generators_test_set(loaded):
    assert sorted(loaded) == sorted(NAMES)
    for name, task in loaded.items():
        meta, docs = task.config.metadata, list(task.test_docs())
        assert meta["content_task"] == name and meta["params"] == config.TaskConfig(
            **yaml.safe_load((ROOT / "conf" / "task" / f"{name}.yaml").read_text())).params
        assert len(docs) == len(meta["lengths"]) * meta["n"]
        for L in meta["lengths"]:
            g, seqs = synthetic.eval_generator(L, 0), []
            while len(seqs) < meta["n"]:
                seqs += _split(content_tasks.TASKS[name](EvalConfig().batch_size, L, g, **meta["params"]))
            got = [(d["input"], d["target"]) for d in docs if d["length"] == L]
            assert len(got) == meta["n"]
            for (inp, target), (prompt, answer) in zip(got, seqs):
                assert inp.encode().lstrip(b"\0") == prompt + SEP and target.encode() == answer
                assert run(name, prompt, **meta["params"]) == answer
        assert task.config.generation_kwargs["max_gen_toks"] == len(docs[0]["target"]) == 1


class ScriptedLM(LM):
    """Answers by running the prompt, but wrongly on docs with doc_id % 4 == 3."""

    def generate_until(self, requests):
        out = []
        for r in requests:
            right = run(r.task_name, r.args[0].encode().lstrip(b"\0")[:-1]).decode()
            out.append(right if r.doc_id % 4 != 3 else str((int(right) + 1) % 10))
        return out

    def loglikelihood(self, requests):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError


def test_exact_match_scores_end_to_end():
    # docs 0..7 are all at length 64; 3 and 7 are answered wrongly
    r = simple_evaluate(model=ScriptedLM(), tasks=NAMES, task_manager=lm_eval_rows.task_manager(NAMES), limit=8)
    for name in NAMES:
        assert r["results"][name]["64,none"] == pytest.approx(0.75), name
