"""lm-eval integration: the `harness` LM honours lm-eval's contract on our offline tasks, the CLI
runs in a subprocess, and pystdlib_ppl equals the runner's own PPL for the same model and protocol."""
import importlib.metadata
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lm_eval import simple_evaluate
from hydra import compose, initialize_config_dir
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from harness import config, results, tasks
from harness.tasks import data
from harness.lmeval import rows as lm_eval_rows
from harness import model as model_lib
from harness.lmeval.model import HarnessLM, load_run
from harness.measure import extrapolation

from tests.lmeval_runs import OFFLINE, ROOT, run_into, sweep_dir, train_into
from tests.lmeval_runs import cfg as _cfg



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run dir holding a tiny model trained 30 steps on pystdlib (about a second)."""
    return train_into(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def sweep_run_dir(tmp_path_factory):
    """run_dir's model trained into a dir named as a sweep's run dir."""
    return train_into(sweep_dir(tmp_path_factory.mktemp("out")))


def _req(kind, args, i=0):
    return Instance(request_type=kind, doc={}, arguments=args, idx=i, metadata=("t", i, 1))


def test_load_run_roundtrip(run_dir):
    cfg, net = load_run(run_dir)
    assert cfg.model.d_model == 32 and not net.training
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_run(run_dir / "missing")


LIMIT = 8  # docs per task: the first 8 are all at the task's shortest length (and passkey's first depth)
FIRST_LEN = {"copy": "16", "reverse": "16", "passkey": "64", "kv_recall": "32"}


def _docs(name):
    """The first LIMIT docs lm-eval builds for task `name` (tasks/<name>.yaml through the task manager)."""
    task = lm_eval_rows.task_manager([name]).load([name])["tasks"][name]
    return [task.test_docs()[i] for i in range(LIMIT)]


@torch.no_grad()
def _direct(net, name, doc):
    """(score 1.0 or 0.0, evidence) for one doc from the model's logits alone (no HarnessLM): bytes in, no BOS,
    positions 0..T-1. generate_until tasks: evidence = the greedy argmax bytes for len(target) steps, right
    if they are the target; kv_recall (multiple choice): evidence = each choice's summed log-probability over
    its bytes, right if the gold one is the largest."""
    ctx = list(doc["input"].encode())
    if name != "kv_recall":
        seq = list(ctx)
        for _ in range(len(doc["target"].encode())):
            seq.append(int(net(torch.tensor([seq]))[0, -1].argmax()))
        return float(bytes(seq[len(ctx):]) == doc["target"].encode()), bytes(seq[len(ctx):])
    lls = []
    for choice in doc["choices"]:
        cont = list(choice.encode())
        lp = net(torch.tensor([ctx + cont[:-1]]))[0].log_softmax(-1)  # (T, 256)
        lls.append(sum(float(lp[len(ctx) - 1 + t, c]) for t, c in enumerate(cont)))
    return float(max(range(len(lls)), key=lls.__getitem__) == doc["gold"]), lls


def test_simple_evaluate_offline_tasks_end_to_end(run_dir):
    tm = lm_eval_rows.task_manager(OFFLINE)
    res = simple_evaluate(model="harness", model_args={"run": str(run_dir)}, tasks=OFFLINE, task_manager=tm,
                          limit=LIMIT, device="cpu", batch_size=4, log_samples=True)
    r = res["results"]
    assert set(r) == set(OFFLINE)
    _, net = load_run(run_dir)
    for name, L in FIRST_LEN.items():
        samples = sorted(res["samples"][name], key=lambda x: x["doc_id"])
        want = []
        for doc, sample in zip(_docs(name), samples):
            score, evidence = _direct(net, name, doc)
            if name == "kv_recall":  # every choice's log-likelihood, not only which one wins
                assert [ll for ll, _ in sample["filtered_resps"]] == pytest.approx(evidence, rel=1e-4, abs=1e-4)
            else:
                assert sample["filtered_resps"][0].encode("utf-8", "surrogateescape")[:len(evidence)] == evidence
            assert sample[L] == score
            want.append(score)
        assert r[name][f"{L},none"] == pytest.approx(sum(want) / LIMIT, abs=1e-12), name
    # its exact value is test_pystdlib_ppl_equals_runner_ppl's
    assert 1.0 < r["pystdlib_ppl"]["byte_perplexity,none"] < 256.0


class ScriptedLM(LM):
    """An LM whose answers are known: it solves each synthetic task from the context alone, by the task's
    definition in harness/tasks/synthetic.py's docstrings (PAD 0, SEP 1, KEY 2 are the markers), except on docs whose
    doc_id % 3 == 2, where it answers wrong; a rolling document gets log-likelihood -ln 2 per byte."""

    @staticmethod
    def answer(ctx):
        body = ctx.lstrip("\x00")[:-1]  # no left padding, no SEP
        if "\x02" in body:  # passkey: the 5 digits after KEY
            at = body.index("\x02")
            return body[at + 1:at + 6]
        if body.isalpha():  # copy or reverse: which one, the request's task name says
            return body
        key, pairs = body[-2:], body[:-2]  # kv_recall: pairs `key value` of 2 letters + 2 digits, then the key
        return {pairs[i:i + 2]: pairs[i + 2:i + 4] for i in range(0, len(pairs), 4)}[key]

    def generate_until(self, requests):
        out = []
        for r in requests:
            right = self.answer(r.args[0])
            right = right[::-1] if r.task_name == "reverse" else right
            out.append(right if r.doc_id % 3 != 2 else right[:-1] + "x")  # wrong in the last byte only
        return out

    def loglikelihood(self, requests):
        return [(0.0 if (cont == self.answer(ctx)) == (r.doc_id % 3 != 2) else -1.0, False)
                for r in requests for ctx, cont in [r.args]]

    def loglikelihood_rolling(self, requests):
        return [-math.log(2) * len(r.args[0].encode()) for r in requests]


def test_scores_of_a_model_whose_answers_are_known():
    # docs 0..7: wrong on 2 and 5, so each synthetic task scores 6/8 at its first length; -ln 2 per byte is
    # a byte perplexity of 2 and 1 bit per byte
    tm = lm_eval_rows.task_manager(OFFLINE)
    r = simple_evaluate(model=ScriptedLM(), tasks=OFFLINE, task_manager=tm, limit=LIMIT)["results"]
    for name, L in FIRST_LEN.items():
        assert r[name][f"{L},none"] == 6 / 8, name
    assert r["pystdlib_ppl"]["byte_perplexity,none"] == pytest.approx(2.0, rel=1e-12)
    assert r["pystdlib_ppl"]["bits_per_byte,none"] == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("name", ["copy", "reverse", "passkey", "kv_recall"])
def test_lm_eval_docs_are_the_runner_test_set(name):
    """tasks/utils.py's claim: a synthetic task's lm-eval docs at each length (and depth) are the first n
    sequences the runner scores there for seed 0 (extrapolation.rows on tasks.build, as runner.measure calls
    it with the default eval config). The runner's sequences are recorded as it draws them."""
    task_obj = lm_eval_rows.task_manager([name]).load([name])["tasks"][name]
    meta, docs = task_obj.config.metadata, list(task_obj.test_docs())
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = config.to_config(compose("config", overrides=[f"task={name}", f"eval.lens={meta['lengths']}",
                                                            "seed=0"]))
    assert meta["n"] <= cfg.task.eval_samples
    task, drawn = tasks.build(cfg.task, cfg.seed), {}
    draw = task.batch

    def recording(n, length, generator, **extra):
        b = draw(n, length, generator, **extra)
        seqs = torch.cat([b.x, b.y[:, -1:]], dim=1)  # (n, L + 1): the whole sequence
        drawn.setdefault((length, extra.get("depth")), []).extend(bytes(s.tolist()).decode() for s in seqs)
        return b

    task.batch = recording
    ev = cfg.eval
    extrapolation.rows(lambda x, pos: torch.zeros(*x.shape, 256), task, train_len=cfg.train.seq_len,
                       lens=ev.resolved_lens(cfg.train.seq_len), protocols=ev.protocols(), stride=ev.stride,
                       max_tokens=ev.max_tokens, sliding_max_tokens=ev.sliding_max_tokens, batch_size=ev.batch_size,
                       split=ev.split, device="cpu", progress=False)
    grid = [float(d) for d in meta["depths"]] if name == "passkey" else [None]
    assert set(drawn) == {(L, d) for L in meta["lengths"] for d in grid}
    for L in meta["lengths"]:
        for d in grid:
            got = [doc["input"] + doc["target"] for doc in docs if doc["length"] == L and doc.get("depth") == d]
            assert got == drawn[L, d][:meta["n"]], (name, L, d)


def test_batched_equals_unbatched_and_rolling_matches_lm_eval_windows(run_dir):
    one, eight = (HarnessLM(str(run_dir), batch_size=b, progress=False) for b in (1, 8))
    reqs = [_req("loglikelihood", (c, k), i) for i, (c, k) in
            enumerate([("", "abc"), ("def f(x):", " return x"), ("a" * 40, "b"), ("xyz", "\x00\x01é")])]
    for (a, ga), (b, gb) in zip(one.loglikelihood(reqs), eight.loglikelihood(reqs)):
        assert a == pytest.approx(b, abs=1e-4) and ga == gb
    text = "import os\nprint(os.getcwd())\n" * 5
    for protocol, stride in (("nonoverlapping", None), ("sliding", 8)):
        lm = HarnessLM(str(run_dir), protocol=protocol, stride=stride, progress=False)
        got = lm.loglikelihood_rolling([_req("loglikelihood_rolling", (text,))])[0]
        # lm-eval's own windowing (HF models use it): context_len 1 = nonoverlapping, W - stride + 1 = sliding
        toks, W = lm.tok_encode(text), lm.window
        ref = 0.0
        for ctx, pred in map(make_disjoint_window, get_rolling_token_windows(
                toks, lm.prefix[0], W, 1 if stride is None else W - stride + 1)):
            lp = lm._logprobs([ctx + pred[:-1]])[0, -len(pred):]
            ref += float(lp.gather(-1, torch.tensor(pred)[:, None]).sum())
        assert got == pytest.approx(ref, rel=1e-5)


def test_generate_until_greedy_stops_and_batches(run_dir):
    lm = HarnessLM(str(run_dir), batch_size=3, progress=False)
    ctxs = ["abc", "hello world", "x" * 30, "def"]
    free = lm.generate_until([_req("generate_until", (c, {"until": [], "max_gen_toks": 6}), i)
                              for i, c in enumerate(ctxs)])
    assert [len(lm.tok_encode(t)) for t in free] == [6] * 4
    single = HarnessLM(str(run_dir), batch_size=1, progress=False)
    assert single.generate_until([_req("generate_until", (ctxs[1], {"until": [], "max_gen_toks": 6}))]) == [free[1]]
    stop = free[0][2]  # the 3rd generated character: output is cut before its first occurrence
    cut = lm.generate_until([_req("generate_until", ("abc", {"until": [stop], "max_gen_toks": 6}))])[0]
    assert cut == free[0].split(stop)[0]
    with pytest.raises(ValueError, match="greedily"):
        lm.generate_until([_req("generate_until", ("a", {"do_sample": True}))])
    with pytest.raises(ValueError, match=r"unsupported gen_kwargs \['top_p'\]"):
        lm.generate_until([_req("generate_until", ("a", {"top_p": 0.9}))])


def test_generate_until_decodes_with_the_kv_cache_and_gives_the_rerun_texts(run_dir):
    """The cache is one prefill and a token per step; rerunning the prefix per token is the oracle. A max_length
    the prompt and its generation outgrow (a sliding window) takes the rerun path; a prompt beyond it is refused."""
    from harness.lmeval import generate
    lm = HarnessLM(str(run_dir), batch_size=2, progress=False)
    reqs = [_req("generate_until", (c, {"until": ["q"], "max_gen_toks": 7}), i)
            for i, c in enumerate(["abc", "hello world", "x" * 30])]
    got = lm.generate_until(reqs)
    assert lm.decode_paths == {"kv_cache"}
    jobs = [(lm.tok_encode(c), ["q"], 7) for c in ("abc", "hello world", "x" * 30)]
    assert got == [lm.tok_decode(g).split("q")[0] for g in generate.rerun(lm, jobs)]
    short = HarnessLM(str(run_dir), batch_size=2, max_length=12, progress=False)  # 11 + 7 bytes: the window slides
    short.generate_until(reqs[:2])
    assert short.decode_paths == {"rerun"}
    with pytest.raises(ValueError, match=r"^a generate_until prompt of 30 bytes exceeds max_length=12; prompts"):
        short.generate_until(reqs)  # "x" * 30 would lose its start


@pytest.mark.parametrize("protocol", ["nonoverlapping", "sliding"])
def test_pystdlib_ppl_equals_runner_ppl(run_dir, protocol):
    """Same model, protocol, window and bytes: lm-eval's byte_perplexity == extrapolation.lm_rows' ppl.
    The runner scores targets 1..max_tokens of the val split with byte 0 as context; prefix=byte 0.
    max_tokens is a multiple of every window and stride: otherwise the runner's last window is a full one
    with its mask cut at max_tokens, while a rolling document's last window ends at the text's end."""
    cfg, net = load_run(run_dir)
    val = data.split(data.load_corpus("pystdlib").data)["val"]
    assert val[0] < 128  # one ASCII byte, so it can be the prefix string
    cfg = config.Config(**{**cfg.__dict__, "eval": config.EvalConfig(lens=[16, 32], protocol=protocol,
                                                                     max_tokens=256, batch_size=4)})
    start_of_val = SimpleNamespace(data=data, eval_tokens=lambda split, need: val)  # an LMTask from offset 0
    ev = cfg.eval
    rows = extrapolation.lm_rows(net, start_of_val, train_len=cfg.train.seq_len, lens=ev.lens, protocols=ev.protocols(),
                                 stride=ev.stride, max_tokens=ev.max_tokens, sliding_max_tokens=None,
                                 batch_size=ev.batch_size, split="val", device="cpu", progress=False)
    runner = {r["eval_len"]: r["value"] for r in rows if r["metric"] == "ppl"}
    tm = lm_eval_rows.task_manager(["pystdlib_ppl"], metadata={"max_bytes": 256})
    for L, want in runner.items():
        lm = HarnessLM(model=net, config=cfg, max_length=L, protocol=protocol, prefix=chr(val[0]),
                       batch_size=4, progress=False)
        got = simple_evaluate(model=lm, tasks=["pystdlib_ppl"], task_manager=tm)["results"]["pystdlib_ppl"]
        assert got["byte_perplexity,none"] == pytest.approx(want, rel=1e-5)
        assert got["bits_per_byte,none"] == pytest.approx(math.log2(want), rel=1e-5)


def test_rope_extension_via_model_args(run_dir):
    base = HarnessLM(str(run_dir), max_length=64, progress=False)
    ext = HarnessLM(str(run_dir), max_length=64, rope_type="linear", progress=False)
    assert ext.extension["factor"] == 4.0 and ext.extension["scaling"] == {"factor": 4.0}
    r = [_req("loglikelihood_rolling", ("for i in range(10):\n    print(i)\n" * 3,))]
    assert base.loglikelihood_rolling(r)[0] != ext.loglikelihood_rolling(r)[0]
    with pytest.raises(ValueError, match=r"unknown rope_type 'yarm'; expected one of \["):
        HarnessLM(str(run_dir), rope_type="yarm")


def test_errors_are_one_line(run_dir):
    with pytest.raises(ValueError, match=r"unknown model_args \['pretrained'\] for model 'harness'; expected"):
        HarnessLM.create_from_arg_obj({"run": str(run_dir), "pretrained": "gpt2"})
    with pytest.raises(ValueError, match=r"unknown protocol 'overlap'; expected one of \['nonoverlapping'"):
        HarnessLM(str(run_dir), protocol="overlap")
    with pytest.raises(ValueError, match="batch_size 'auto' is not supported"):
        HarnessLM(str(run_dir), batch_size="auto")
    with pytest.raises(ValueError, match=r"unknown lm-eval task\(s\) \['no_such_task'\]"):
        lm_eval_rows.task_manager(["no_such_task"])


def test_evaluate_writes_rows_into_the_run(tmp_path):
    run_dir = run_into(tmp_path / "run")  # a finished run: make eval adds to its rows, never to a bare checkpoint
    trained = results.load(run_dir)
    kw = dict(lens=[16], limit=2, wandb_mode="disabled", progress=False)
    new = lm_eval_rows.evaluate(run_dir, ["kv_recall", "pystdlib_ppl"], **kw)
    assert list(new.columns) == results.COLUMNS
    got = {(m, int(L) if L == L else None, p) for m, L, p in zip(new.metric, new.eval_len, new.protocol)}
    assert ("kv_recall/acc", 32, "lm_eval") in got
    assert ("pystdlib_ppl/byte_perplexity", 16, "lm_eval:nonoverlapping") in got
    assert ("pystdlib_ppl/byte_perplexity", 16, "lm_eval:sliding8") in got
    lm_eval_rows.evaluate(run_dir, ["kv_recall", "pystdlib_ppl"], **kw)  # again: replaced, not duplicated
    df = results.load(run_dir)
    assert len(df) == len(trained) + len(new) and set(df.metric) == set(trained.metric) | set(new.metric)


def readme_command():
    """The harness-lm-eval command of docs/lm-eval.md's section, as argv (its comment left off)."""
    text = (ROOT / "docs" / "lm-eval.md").read_text() + "\n## end\n"
    section = text[text.index("\n## Standard tasks (lm-eval)"):]
    section = section[:section.index("\n## ", 1)]
    lines = [line for line in section.splitlines() if line.startswith("harness-lm-eval ")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0].split("#")[0])


def test_readme_command_on_a_sweep_run_dir(sweep_run_dir, capsys, monkeypatch):
    """README's command, through the installed console script's function, on a run dir named as `make sweep`
    names them (commas, brackets, =): lm-eval splits --model_args on commas, so the run dir must not reach it
    as `run=<dir>` text. No --include_path: the harness's tasks are the default."""
    argv = readme_command()
    assert argv[:2] == ["harness-lm-eval", "<run_dir>"] and "--include_path" not in argv
    script = importlib.metadata.entry_points(group="console_scripts")["harness-lm-eval"]
    assert script.value == "harness.infra.entry:lm_eval"  # = harness.lmeval.cli.main once the run extra is found
    from harness.lmeval import cli
    monkeypatch.setattr(cli, "setup_logging", lambda *a, **k: None)  # lm-eval's: binds a handler to stderr
    script.load()([str(sweep_run_dir) if a == "<run_dir>" else a for a in argv[1:]] + ["--limit", "2",
                                                                                     "--device", "cpu"])
    out = capsys.readouterr().out
    assert "byte_perplexity" in out and "|passkey" in out
    assert json.dumps(str(sweep_run_dir))[1:-1] in out  # the header names the model_args: the whole dir


@pytest.mark.slow
def test_cli_subprocess(sweep_run_dir, tmp_path):
    """The real entry point, `--model_args run=<dir>` with a sweep's run dir, our tasks/ by default; --output_path
    and --log_samples save lm-eval's results and samples files (its EvaluationTracker)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LMEVAL_LOG_LEVEL": "DEBUG"}
    cmd = [sys.executable, "-m", "harness.lmeval.cli", "--model", "harness", "--model_args",
           f"run={sweep_run_dir},batch_size=2", "--tasks", "passkey,pystdlib_ppl", "--limit", "2", "--device", "cpu",
           "--output_path", str(tmp_path / "out"), "--log_samples"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "byte_perplexity" in p.stdout and "|passkey" in p.stdout
    assert "batch_size: 2" in p.stdout  # model_args' batch_size, not the CLI's default
    built = [line for line in p.stderr.splitlines() if "Building task index from" in line]
    assert built and not any("lm_eval/tasks" in line for line in built)  # lm-eval's own index not built
    (saved,) = (tmp_path / "out").glob("*/results_*.json")
    res = json.loads(saved.read_text())
    assert res["config"]["model"] == "harness" and res["config"]["model_args"]["run"] == str(sweep_run_dir)
    assert res["results"]["passkey"]["64,none"] == pytest.approx(float(p.stdout.split("|passkey")[1].split("|")[6]),
                                                                 abs=1e-4)
    assert {f.name.split("_20")[0] for f in saved.parent.glob("samples_*.jsonl")} == {"samples_passkey",
                                                                                      "samples_pystdlib_ppl"}


def test_unrepresentable_length_is_a_nan_row_with_the_reason():
    cfg = _cfg()
    cfg = config.Config(**{**cfg.__dict__, "encoding": {"name": "learned", "max_len": 24}})
    net = model_lib.from_config(cfg.model, cfg.encoding)
    rows = lm_eval_rows.rows_for_model(net, cfg, ["pystdlib_ppl"], lens=[16, 32], progress=False)
    ppl = {(r["eval_len"], r["protocol"]): r for r in rows if r["metric"] == "pystdlib_ppl/byte_perplexity"}
    assert set(ppl) == {(16, "lm_eval:nonoverlapping"), (16, "lm_eval:sliding8"),
                        (32, "lm_eval:nonoverlapping"), (32, "lm_eval:sliding8")}
    assert ppl[16, "lm_eval:nonoverlapping"]["value"] > 1
    assert math.isnan(ppl[32, "lm_eval:sliding8"]["value"])
    assert "beyond the learned table" in ppl[32, "lm_eval:sliding8"]["extra_params"]["nan_reason"]


def test_metrics_per_length_sort_as_numbers():
    """A passkey metric at 1024 comes after 128 wherever the harness prints lm-eval results: its rows table
    (python -m harness.lmeval.rows) and lm-eval's results table (make_table) under harness-lm-eval (make_table
    sorts the `metric,filter` keys as strings, 1024 before 128)."""
    import pandas as pd

    from harness.lmeval import cli, rows
    lens = [1024, 128, 64, 256]
    df = pd.DataFrame({"metric": ["passkey/acc"] * 4 + ["passkey/acc_stderr"], "eval_len": lens + [128],
                       "protocol": ["lm_eval"] * 5, "value": [0.1, 0.2, 0.3, 0.4, 0.01], "unit": ["frac"] * 5})
    shown = rows.table(df)
    assert list(shown.eval_len[:4]) == [64, 128, 256, 1024] and shown.metric.iloc[-1] == "passkey/acc_stderr"
    results = {"results": {"passkey": {"alias": "passkey", **{f"{n},none": 0.5 for n in lens},
                                       **{f"{n}_stderr,none": 0.1 for n in lens}}},
               "versions": {"passkey": 1}, "n-shot": {"passkey": 0}, "higher_is_better": {"passkey": {}}}
    import lm_eval.utils
    plain = [line.split("|") for line in lm_eval.utils.make_table(results).splitlines()[2:]]
    assert [cells[5].strip() for cells in plain] == ["1024", "128", "256", "64"]  # lm-eval's order: natural_table's fix
    given = json.dumps(results)
    table = cli.natural_table(results)
    metrics = [line.split("|")[5].strip() for line in table.splitlines()[2:]]
    assert metrics == ["64", "128", "256", "1024"], table
    assert table.splitlines()[2].split("|")[1].strip() == "passkey"  # the task's name on its first row
    assert [line.split("|")[7:10] for line in table.splitlines()[2:]] == [cells[7:10] for cells in plain]  # ± stderr
    assert json.dumps(results) == given and not hasattr(lm_eval.utils, "sorted")  # nothing changed, nothing patched
