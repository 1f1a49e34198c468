"""lm-eval integration (issue 6): the `harness` LM honours lm-eval's contract on our offline tasks, the CLI
runs in a subprocess, and pystdlib_ppl equals the runner's own PPL for the same model and protocol."""
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lm_eval import simple_evaluate
from lm_eval.api.instance import Instance
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from harness import config, data, results, tasks, train
from harness import eval as lm_eval_rows
from harness import model as model_lib
from harness.lm import HarnessLM, load_run
from harness.measure import extrapolation

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = ["copy", "reverse", "passkey", "kv_recall", "pystdlib_ppl"]


def _cfg(encoding="rope", corpus="pystdlib"):
    return config.Config(encoding={"name": encoding}, model=config.ModelConfig(n_layers=1, d_model=32, n_heads=2),
                         task=config.TaskConfig(corpus=corpus),
                         train=config.TrainConfig(seq_len=16, steps=30, batch_size=8, warmup=3, log_every=10),
                         eval=config.EvalConfig(lens=[16, 32], max_tokens=300, batch_size=4),
                         wandb=config.WandbConfig(mode="disabled"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run dir holding a tiny model trained 30 steps on pystdlib (about a second)."""
    cfg = _cfg()
    torch.manual_seed(0)
    net = model_lib.from_config(cfg.model, cfg.encoding)
    fit = train.fit(net, tasks.build(cfg.task, 0), cfg.train, torch.Generator().manual_seed(0), "cpu", False)
    assert fit.status == "ok"
    d = tmp_path_factory.mktemp("run")
    results.write_checkpoint(d, net.state_dict(), config.to_dict(cfg))
    return d


def _req(kind, args, i=0):
    return Instance(request_type=kind, doc={}, arguments=args, idx=i, metadata=("t", i, 1))


def test_load_run_roundtrip(run_dir):
    cfg, net = load_run(run_dir)
    assert cfg.model.d_model == 32 and not net.training
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_run(run_dir / "missing")


def test_simple_evaluate_offline_tasks_end_to_end(run_dir):
    tm = lm_eval_rows.task_manager(OFFLINE)
    res = simple_evaluate(model="harness", model_args={"run": str(run_dir)}, tasks=OFFLINE, task_manager=tm,
                          limit=3, device="cpu", batch_size=4)
    r = res["results"]
    assert set(r) == set(OFFLINE)
    assert r["copy"]["16,none"] in (0.0, 1 / 3, 2 / 3, 1.0) and "64,none" in r["passkey"]
    assert 0.0 <= r["kv_recall"]["32,none"] <= 1.0
    assert 1.0 < r["pystdlib_ppl"]["byte_perplexity,none"] < 256.0


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
    runner = {r["eval_len"]: r["value"] for r in extrapolation.lm_rows(net, data, val, cfg, "cpu", False)
              if r["metric"] == "ppl"}
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


def test_evaluate_writes_rows_into_the_run(run_dir):
    kw = dict(lens=[16], limit=2, wandb_mode="disabled", progress=False)
    new = lm_eval_rows.evaluate(run_dir, ["kv_recall", "pystdlib_ppl"], **kw)
    assert list(new.columns) == results.COLUMNS
    got = {(m, int(L) if L == L else None, p) for m, L, p in zip(new.metric, new.eval_len, new.protocol)}
    assert ("kv_recall/acc", 32, "lm_eval") in got
    assert ("pystdlib_ppl/byte_perplexity", 16, "lm_eval:nonoverlapping") in got
    assert ("pystdlib_ppl/byte_perplexity", 16, "lm_eval:sliding8") in got
    lm_eval_rows.evaluate(run_dir, ["kv_recall", "pystdlib_ppl"], **kw)  # again: replaced, not duplicated
    df = results.load(run_dir)
    assert len(df) == len(new) and set(df.metric) == set(new.metric)


@pytest.mark.slow
def test_cli_subprocess(run_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LMEVAL_LOG_LEVEL": "DEBUG"}
    cmd = [sys.executable, "-m", "harness.lm_eval", "--model", "harness", "--model_args", f"run={run_dir}",
           "--tasks", "passkey,pystdlib_ppl", "--include_path", str(ROOT / "tasks"), "--limit", "2",
           "--device", "cpu"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "byte_perplexity" in p.stdout and "|passkey" in p.stdout
    built = [line for line in p.stderr.splitlines() if "Building task index from" in line]
    assert built and not any("lm_eval/tasks" in line for line in built)  # lm-eval's own index not built


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
