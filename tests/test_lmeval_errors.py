"""The lm-eval entry points refuse ordinary mistakes in one stderr line (`harness.lmeval: error: ...`, exit 2)
before any evaluation, changing nothing in the run dir; check_tasks is the one refusal of unknown task names;
merging rows into an unreadable rows.parquet keeps the new rows and the old bytes."""
import functools
import io
import json
import os
import random
import subprocess
import sys

import lm_eval.tasks
import pandas as pd
import pytest
import torch

from harness import config, paths, results
from harness import model as model_lib
from harness.lmeval import cli, rows
from harness.lmeval import model as model_lib_lmeval
from harness.lmeval.model import HarnessLM
from tests.lmeval_runs import ROOT, sweep_dir
from tests.lmeval_runs import cfg as _cfg

PREFIX = "harness.lmeval: error: "


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A run dir as a finished run leaves it: an untrained tiny model's checkpoint, rows and a status."""
    d = tmp_path_factory.mktemp("good")
    cfg = _cfg()
    torch.manual_seed(0)
    results.write_checkpoint(d, model_lib.from_config(cfg.model, cfg.encoding).state_dict(), config.to_dict(cfg))
    results.write_rows(d, _rows(cfg, ["ppl", "acc"], 1.0))
    results.write_json(d / results.STATUS, {"status": "ok", "run_id": "good"})
    return d


def _rows(cfg, metrics, value):
    measured = [dict(metric=m, eval_len=16, protocol="lm_eval", value=value, unit="frac") for m in metrics]
    return results.complete(measured, results.base_row(cfg, "good"), 30)


@pytest.fixture
def run(good, tmp_path):
    """A fresh copy of the good run dir, for a case to spoil."""
    d = tmp_path / "run"
    d.mkdir()
    for f in good.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    return d


@pytest.fixture(autouse=True)
def no_evaluation(monkeypatch):
    """Any evaluation starting is a failure here: every refusal comes before it."""
    def started(*a, **k):
        raise AssertionError("evaluation started")
    monkeypatch.setattr(rows, "rows_for_model", started)
    monkeypatch.setattr(rows, "simple_evaluate", started)


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())} if d.exists() else None


def _refused(capsys, call, *words):
    """call() exits 2 with one stderr line: the prefix and every word; nothing on stdout. Returns the line."""
    with pytest.raises(SystemExit) as e:
        call()
    out, err = capsys.readouterr()
    assert e.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith(PREFIX), err
    for w in words:
        assert w in err, (w, err)
    assert out == ""
    return err.strip()


def _truncate(d):
    (d / results.CHECKPOINT).write_bytes((d / results.CHECKPOINT).read_bytes()[:100])


def _saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


SPOIL = {  # ways a run dir's checkpoint.pt is not one
    "no_checkpoint": lambda d: (d / results.CHECKPOINT).unlink(),
    "truncated": _truncate,
    "random_bytes": lambda d: (d / results.CHECKPOINT).write_bytes(random.Random(0).randbytes(3000)),
    "text": lambda d: (d / results.CHECKPOINT).write_text("not a checkpoint\n"),
    "other_dict": lambda d: (d / results.CHECKPOINT).write_bytes(_saved({"weights": [1, 2]})),
}
def test_check_tasks_ours_without_lm_evals_index(monkeypatch):
    built = []
    real = rows.TaskManager
    monkeypatch.setattr(rows, "TaskManager", lambda **kw: built.append(kw["include_defaults"]) or real(**kw))
    # an empty cache, as in a fresh process: a fresh one for this test, the process's own (which may hold lm-eval's
    # whole index, 6-8 s to build, from tests run before) put back afterwards rather than cleared
    monkeypatch.setattr(rows, "_index", functools.lru_cache(maxsize=2)(rows._index.__wrapped__))
    rows.check_tasks(["copy", "passkey", "pystdlib_ppl"])
    assert built == [False]  # tasks/ alone: lm-eval's ~15k configs are not indexed


NOT_CKPT = ("truncated or not a checkpoint",)
CASES = {  # case: (spoil the run dir, extra argv, words the line must hold)
    "no_checkpoint": (SPOIL["no_checkpoint"], [], ("no checkpoint at", "checkpoint.pt", "checkpoint=true")),
    "truncated": (SPOIL["truncated"], [], NOT_CKPT + ("RuntimeError",)),
    "random_bytes": (SPOIL["random_bytes"], [], NOT_CKPT),
    "text": (SPOIL["text"], [], NOT_CKPT),
    "other_dict": (SPOIL["other_dict"], [], ("not a harness checkpoint", "['weights']", "state_dict")),
    "unknown_task": (None, ["--tasks", "copy,nosuchtask"],
                     ("unknown lm-eval task(s) ['nosuchtask']", "'copy'", "'passkey'", "'pystdlib_ppl'",
                      "(tasks/)", "`lm-eval ls tasks`")),
    "no_task": (None, ["--tasks", ","], ("no lm-eval task given", "'copy'")),
    "lens": (None, ["--lens", "16,abc"], ("argument --lens", "'16,abc'", "window lengths")),
    "lens_zero": (None, ["--lens", "0"], ("argument --lens", "'0'")),
    "limit": (None, ["--limit", "-1"], ("argument --limit", "'-1'")),
    "device": (None, ["--device", "tpu"], ("unknown device 'tpu'", "cpu", "cuda")),
    "rope_type": (None, ["--rope_type", "yarm"], ("argument --rope_type", "'yarm'", "'linear'", "'yarn'")),
    "batch_size": (None, ["--batch_size", "0"], ("batch_size must be >= 1",)),
    "factor": (None, ["--factor", "big"], ("argument --factor", "'big'", "'auto'")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rows_refuses_in_one_line_and_changes_nothing(run, capsys, case):
    spoil, extra, words = CASES[case]
    if spoil:
        spoil(run)
    before = _snapshot(run)
    argv = [str(run), "--tasks", "copy", *extra]
    _refused(capsys, lambda: rows.main(argv), *words)
    assert _snapshot(run) == before, case


def test_rows_missing_run_dir_is_not_created(tmp_path, capsys):
    d = tmp_path / "nope"
    _refused(capsys, lambda: rows.main([str(d), "--tasks", "copy"]), "no checkpoint at", str(d), "does not exist")
    assert not d.exists()


def test_rows_subprocess_prints_no_traceback(run):
    """The real entry point: one line on stderr, exit 2, nothing written."""
    _truncate(run)
    before = _snapshot(run)
    p = subprocess.run([sys.executable, "-m", "harness.lmeval.rows", str(run), "--tasks", "copy"], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [p.stderr.strip()] and p.stderr.startswith(PREFIX + "checkpoint "), p.stderr
    assert _snapshot(run) == before


def test_check_tasks_is_the_one_refusal():
    rows.check_tasks(["copy", "wikitext"])  # one of ours and one of lm-eval's own
    ruler = ("", "_cwe", "_fwe", "_niah_multikey", "_niah_multiquery", "_niah_multivalue", "_niah_single", "_vt")
    ours = ["copy", "count", "flip_flop", "kv_recall", *(f"miniruler{t}" for t in ruler), "passkey", "pystdlib_ppl",
            "pystdlib_ppl_test", "reverse"]
    want = (f"unknown lm-eval task(s) ['nosuchtask', 'copyy']; expected one of {ours} (tasks/) or a task of lm-eval's "
            f"own (`lm-eval ls tasks`)")
    for check in (rows.check_tasks, rows.task_manager):
        with pytest.raises(ValueError) as e:
            check(["copy", "nosuchtask", "copyy"])
        assert str(e.value) == want


# ---- harness.lmeval.cli (lm-eval's Python API on our model): in-process, lm-eval's log handler left out
@pytest.fixture
def lm_eval_cli(monkeypatch):
    monkeypatch.setattr(cli, "setup_logging", lambda *a, **k: None)  # lm-eval's: binds a handler to stderr

    def call(model_args, tasks="copy"):
        return lambda: cli.main(["--model", "harness", "--model_args", model_args, "--tasks", tasks,
                                 "--include_path", str(ROOT / "tasks"), "--limit", "2", "--device", "cpu"])
    return call


def _cli_refused(capsys, call, *words):
    """As _refused, but lm-eval's own log lines (warnings before the model is built) may come first."""
    with pytest.raises(SystemExit) as e:
        call()
    out, err = capsys.readouterr()
    assert e.value.code == 2 and "Traceback" not in err
    lines = err.splitlines()
    assert [line for line in lines if line.startswith(PREFIX)] == lines[-1:], err
    for w in words:
        assert w in lines[-1], (w, lines[-1])
    return lines[-1]


def test_cli_bad_model_args_are_one_line(run, tmp_path, capsys, lm_eval_cli):
    before = _snapshot(run)
    _cli_refused(capsys, lm_eval_cli(f"run={run},pretrained=gpt2"), "unknown model_args ['pretrained']",
                 "expected a subset of", "'run'", "'rope_type'")
    _cli_refused(capsys, lm_eval_cli(f"run={tmp_path / 'nope'}"), "no checkpoint at", "does not exist")
    _cli_refused(capsys, lm_eval_cli(f"run={run},rope_type=yarm"), "unknown rope_type 'yarm'", "'linear'")
    assert _snapshot(run) == before and not (tmp_path / "nope").exists()
    _truncate(run)
    before = _snapshot(run)
    _cli_refused(capsys, lm_eval_cli(f"run={run}"), *NOT_CKPT)
    assert _snapshot(run) == before


def test_cli_unknown_task_is_one_line(run, capsys, lm_eval_cli, monkeypatch):
    # lm-eval's full index takes 15-25 s to build; the one check_tasks cached is the same (tasks/ + lm-eval's),
    # and what is tested here is the CLI's answer to lm-eval's "Tasks not found"
    real = lm_eval.tasks.TaskManager
    monkeypatch.setattr(lm_eval.tasks, "TaskManager", lambda include_defaults=True, **kw: rows._index(True)
                        if include_defaults else real(include_defaults=False, **kw))
    _cli_refused(capsys, lm_eval_cli(f"run={run}", tasks="copy,nosuchtask"),
                 "unknown lm-eval task(s) ['nosuchtask']", "'copy'", "--include_path", "`lm-eval ls tasks`")


@pytest.fixture
def not_started(monkeypatch):
    """Any work starting (building the model, indexing tasks, evaluating) is a failure: the refusal comes first."""
    def started(*a, **k):
        raise AssertionError("work started")
    monkeypatch.setattr(cli, "evaluate", started)
    monkeypatch.setattr(cli, "task_manager", started)


@pytest.mark.parametrize("argv", [["--model", "harness", "--model_args", "run={run}"], ["{run}"],
                                  ["{run}", "--limit", "2"], ["run", "--run", "{run}", "--device", "cpu"]])
def test_cli_no_tasks_is_one_line_before_any_work(run, capsys, not_started, argv):
    _refused(capsys, lambda: cli.main([a.format(run=run) for a in argv]), "no --tasks given", "--tasks passkey",
             "copy, count", "`harness-lm-eval ls tasks`")


def test_cli_help_names_model_run_dir_and_tasks_then_the_options(capsys, lm_eval_cli):  # lm_eval_cli: no log handler
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    ours, _, options = out.partition("usage: harness-lm-eval [run] RUN_DIR --tasks")
    assert ours.startswith("harness-lm-eval: ") and "model `harness`" in ours
    assert "harness-lm-eval RUN_DIR --tasks" in ours and "--run RUN_DIR" in ours
    for name in model_lib_lmeval.model_args():  # read from HarnessLM, so a new model_arg shows up
        assert f"{name}=" in ours, name
    assert str(paths.tasks_dir()) in ours.replace("\n      ", " ") and "harness.lm_eval_tasks" in ours
    for names, _ in cli.RUN_OPTIONS:  # the options, after ours; then the other commands
        assert all(n in options for n in names), names
    assert "harness-lm-eval ls [tasks|groups|subtasks|tags]" in options
    assert "harness-lm-eval validate --tasks" in options


def test_cli_sweep_run_dir_reaches_the_model_whole(run, tmp_path, capsys, lm_eval_cli, monkeypatch):
    """A run dir named as a sweep's, through --model_args run=, --run and RUN_DIR: the checkpoint loads (the
    refusal is of rope_type, which is checked after it), however lm-eval would have split the name."""
    d = sweep_dir(tmp_path)
    for f in run.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    _cli_refused(capsys, lm_eval_cli(f"run={d},rope_type=yarm"), "unknown rope_type 'yarm'")
    _cli_refused(capsys, lm_eval_cli(f"rope_type=yarm,run={d}"), "unknown rope_type 'yarm'")
    for argv in ([str(d)], ["--run", str(d)], [f"--run={d}"]):
        _cli_refused(capsys, lambda: cli.main([*argv, "--model_args", "rope_type=yarm", "--tasks", "copy"]),
                     "unknown rope_type 'yarm'")
    _cli_refused(capsys, lm_eval_cli(f"run={d}/nope,max_length=8"), "no checkpoint at", f"{d}/nope/", "does not exist")
    a = cli.parse([str(d), "--model_args", "max_length=64", "batch_size=2", "--tasks", "copy", "--limit", "2"])
    assert a.model_args == {"max_length": 64, "batch_size": 2, "run": str(d)} and a.include_path is None
    assert a.batch_size is None and a.device == "cuda:0"  # model_args' batch_size is not overridden; lm-eval's device
    assert json.loads(json.dumps(cli.parse([str(d), "--model_args", json.dumps({"stride": 4}), "--tasks", "copy"])
                                 .model_args)) == {"stride": 4, "run": str(d)}
    tm = cli.task_manager(["copy"])  # no --include_path: the harness's tasks/, lm-eval's own not indexed
    assert "copy" in tm.all_tasks and "hellaswag" not in tm.all_tasks
    lm = HarnessLM.create_from_arg_string(f"run={d},max_length=64", {"device": "cpu"})  # lm-eval's Python API
    assert lm.max_length == 64


def test_parse_model_args_run_with_commas(tmp_path):
    d = tmp_path / "encoding=rope,seed=0"
    d.mkdir()
    parse = model_lib_lmeval.parse_model_args
    assert parse(f"max_length=64,run={d},protocol=sliding") == {"max_length": 64, "run": str(d), "protocol": "sliding"}
    assert parse(f"run={d}") == {"run": str(d)}
    # no such dir: run ends before the first `,<model_arg>=`, so the message names the whole intended path
    assert parse("run=/no/a=1,b=[2,3],stride=4") == {"run": "/no/a=1,b=[2,3]", "stride": 4}
    assert parse("max_length=8") == {"max_length": 8}


def test_cli_run_dir_refusals(run, capsys, not_started):
    _refused(capsys, lambda: cli.main([str(run), "--model_args", f"run={run}", "--tasks", "copy"]),
             "run dir given twice")
    _refused(capsys, lambda: cli.main([str(run), "--model", "hf", "--tasks", "copy"]), "model `harness`", "--model hf")
    _refused(capsys, lambda: cli.main([str(run), "--model_args", "oops", "--tasks", "copy"]),
             "argument --model_args", "'oops'")


def test_plain_lm_eval_cannot_find_model_harness():
    """README: lm-eval has no model plug-ins, so without our import `harness` is no model (if a later lm-eval
    found it through an entry point, this fails and README's line should change)."""
    code = "from lm_eval.api.registry import get_model; get_model('harness')"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Attempted to load model 'harness', but no model for this name found" in p.stderr


def test_cli_subprocess_prints_no_traceback(run):
    _truncate(run)
    cmd = [sys.executable, "-m", "harness.lmeval.cli", "--model", "harness", "--model_args", f"run={run}",
           "--tasks", "copy", "--include_path", str(ROOT / "tasks"), "--device", "cpu"]
    p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.splitlines()[-1].startswith(PREFIX + "checkpoint "), p.stderr


# ---- merging rows into the run's rows.parquet
def test_merge_replaces_measured_again_and_keeps_the_rest(run):
    rows._merge(run, _rows(_cfg(), ["acc", "bpb"], 2.0))
    got = pd.read_parquet(run / results.ROWS).set_index("metric")["value"].to_dict()
    assert got == {"ppl": 1.0, "acc": 2.0, "bpb": 2.0}


def test_merge_into_a_corrupt_file_keeps_the_new_rows_and_the_old_bytes(run, capsys):
    path = run / results.ROWS
    corrupt = path.read_bytes()[:100]
    path.write_bytes(corrupt)
    rows._merge(run, _rows(_cfg(), ["acc", "bpb"], 2.0))
    got = pd.read_parquet(path)
    assert list(got.columns) == results.COLUMNS and got.set_index("metric")["value"].to_dict() == {"acc": 2.0,
                                                                                                  "bpb": 2.0}
    aside = [p for p in run.iterdir() if p.name.startswith("rows.parquet.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == corrupt
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unreadable" in err and aside[0].name in err and str(path) in err


@pytest.mark.parametrize("limit", ["-1", "0", "abc"])
def test_cli_limit_lm_eval_cannot_take_is_one_line_before_any_work(tmp_path, limit):
    """Before: `harness-lm-eval RUN --limit -1` reached lm-eval and failed there in a traceback."""
    from harness.lmeval import cli
    from harness.lmeval.model import UsageError
    with pytest.raises(UsageError, match="^--limit: expected a number of docs per task"):
        cli.parse([str(tmp_path), "--tasks", "copy", "--limit", limit])


CLI_OPTIONS = {  # case: (argv after the run dir, words the line must hold)
    "unknown_option": (["--tasks", "copy", "--wandb_args", "project=x"],
                       ("unrecognized arguments: --wandb_args", "'--model_args'", "'--limit'", "'--output_path'")),
    "other_model": (["--tasks", "copy", "--model", "hf"], ("--model hf", "model `harness`", "lm_eval --model hf")),
    "num_fewshot": (["--tasks", "copy", "--num_fewshot", "two"], ("argument --num_fewshot", "'two'")),
    "seed": (["--tasks", "copy", "--seed", "1,2"], ("--seed", "'1,2'", "python,numpy,torch,fewshot")),
    "log_samples": (["--tasks", "copy", "--log_samples"], ("--log_samples", "--output_path")),
    "two_run_dirs": (["--run", "/elsewhere", "--tasks", "copy"], ("one run dir, please", "'/elsewhere'")),
    "gen_kwargs": (["--tasks", "copy", "--gen_kwargs", "until"], ("argument --gen_kwargs", "'until'", "k=v")),
    "metadata_json": (["--tasks", "copy", "--metadata", "{max_bytes: 4}"], ("argument --metadata", "JSON object")),
}


@pytest.mark.parametrize("case", list(CLI_OPTIONS))
def test_cli_bad_options_are_one_line_before_any_work(run, capsys, not_started, case):
    argv, words = CLI_OPTIONS[case]
    _refused(capsys, lambda: cli.main([str(run), *argv]), *words)


def test_cli_validate(capsys, lm_eval_cli, monkeypatch):
    """validate: the names found, else one line naming the missing ones and ours; ls: the lists lm-eval has."""
    cli.main(["validate", "--tasks", "copy,passkey"])
    assert capsys.readouterr().out == "Validating tasks: ['copy', 'passkey']\nAll tasks found and valid\n"
    real = lm_eval.tasks.TaskManager  # lm-eval's full index: the one check_tasks cached, as in test_cli_unknown_task
    monkeypatch.setattr(lm_eval.tasks, "TaskManager", lambda include_defaults=True, **kw: rows._index(True)
                        if include_defaults else real(include_defaults=False, **kw))
    _refused(capsys, lambda: cli.main(["validate", "--tasks", "copy,nosuchtask"]),
             "unknown lm-eval task(s) ['nosuchtask']", "'passkey'", "(tasks/)")
    _refused(capsys, lambda: cli.main(["validate"]), "no --tasks given")
    _refused(capsys, lambda: cli.main(["ls", "everything"]), "argument what", "'everything'", "'tags'")
