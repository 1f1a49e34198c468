"""One run in-process: its files, rows, NaN guard, resume, determinism, extension and learned NaN rows."""
import json
import math

import pandas as pd
import pytest
import torch

from harness import results, runner, tasks, train
from harness.tasks import data
from harness.measure import extension, extrapolation
from tests.tiny_runs import TEXT, tiny


def test_run_writes_files_and_rows(tmp_path):
    status = runner.run(tiny(tmp_path), tmp_path / "run", progress=False)
    run = tmp_path / "run"
    assert status["status"] == "ok", status
    assert {p.name for p in run.iterdir()} >= {results.ROWS, results.STATUS, results.TRAIN_LOG, results.CHECKPOINT}
    df = results.load(run)
    assert list(df.columns) == results.COLUMNS
    assert {"train_loss", "train_wall_s", "train_tokens_per_s", "eval_tokens_per_s", "peak_mem_bytes", "ppl",
            "nll_beyond_train"} <= set(df.metric)
    ppl = df[(df.metric == "ppl") & ~df.params.str.contains("extension")]
    assert set(ppl.eval_len) == {16, 32} and {"nonoverlapping", "sliding8"} == set(ppl.protocol)
    assert ppl.value.between(1, 256).all()
    ext = df[df.params.str.contains('"extension"')]
    assert {json.loads(p)["extension"] for p in ext.params} == {"linear", "yarn"}
    assert (df.encoding == "rope").all() and (df.sweep == "test").all()
    ck = torch.load(run / results.CHECKPOINT, weights_only=True)
    assert ck["config"]["train"]["seq_len"] == 16 and "tok.weight" in ck["state_dict"]


def test_rerun_skips_a_finished_run(tmp_path, monkeypatch):
    cfg = tiny(tmp_path)
    runner.run(cfg, tmp_path / "run", progress=False)
    before = (tmp_path / "run" / results.ROWS).stat().st_mtime_ns
    monkeypatch.setattr(train, "fit", lambda *a, **k: pytest.fail("a finished run was trained again"))
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    assert (tmp_path / "run" / results.ROWS).stat().st_mtime_ns == before


def test_a_finished_run_with_corrupt_rows_is_run_again_and_repaired(tmp_path):
    cfg = tiny(tmp_path)
    runner.run(cfg, tmp_path / "run", progress=False)
    rows = tmp_path / "run" / results.ROWS
    rows.write_bytes(rows.read_bytes()[:100])  # truncated, as by a full disk or a killed copy
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    assert results.readable_rows(rows) and len(results.load(tmp_path / "run")) > 0


def test_a_measurement_that_fails_keeps_the_checkpoint_and_the_rows_before_it(tmp_path, monkeypatch, capsys):
    from harness.measure import precision_model

    def boom(*a, **k):
        raise RuntimeError("precision study out of memory")
    monkeypatch.setattr(precision_model, "rows", boom)  # the last measurement before lm-eval
    status = runner.run(tiny(tmp_path), tmp_path / "run", progress=False)
    assert status["status"] == "failed" and "out of memory" in status["message"]
    assert results.load(tmp_path / "run").empty  # a failed run's rows never read as results...
    df = results.load(tmp_path / "run", failed=True)  # ...but they are kept
    measured = set(df.metric)
    assert {"train_loss", "train_tokens_per_s", "peak_mem_bytes", "ppl"} <= measured  # kept, not only train rows
    assert (df.params.str.contains('"extension"')).any()  # the extension rows measured before it too
    assert (tmp_path / "run" / results.CHECKPOINT).exists()
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("failed")]
    assert "(RuntimeError: precision study out of memory)" in line  # the printed line gives the reason


def reran(out):  # the runner's own line, not a tmp path that happens to contain the word
    return any(line.startswith("rerun run: ") for line in out.splitlines())


def skipped(out):
    return any(line.startswith("skip run: ") for line in out.splitlines())


def test_a_finished_run_is_rerun_when_its_resolved_config_changed(tmp_path, capsys):
    cfg = tiny(tmp_path)
    runner.run(cfg, tmp_path / "run", progress=False)
    first = results.read_status(tmp_path / "run")["config_hash"]
    moved = tiny(tmp_path, **{"train.lr": 1e-3})  # e.g. a changed default in conf/train/default.yaml
    where = tiny(tmp_path, **{"threads": 1, "wandb.mode": "offline", "sweep": "other"})  # not what is measured
    runner.run(where, tmp_path / "run", progress=False)
    assert skipped(capsys.readouterr().out) and results.read_status(tmp_path / "run")["config_hash"] == first
    runner.run(moved, tmp_path / "run", progress=False)
    assert reran(capsys.readouterr().out)
    second = results.read_status(tmp_path / "run")["config_hash"]
    assert second != first and results.finished(tmp_path / "run")
    runner.run(moved, tmp_path / "run", progress=False)  # and now it is current: skipped
    assert skipped(capsys.readouterr().out)


def test_a_finished_run_is_rerun_when_its_corpus_file_changed(tmp_path, capsys):
    cfg = tiny(tmp_path)
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    first = results.read_status(tmp_path / "run")["config_hash"]
    assert not reran(capsys.readouterr().out)
    (tmp_path / "corpus.txt").write_text(TEXT.replace("fox", "cat"))  # same path and config, other bytes
    data.load_corpus.cache_clear()  # as a new process would read it
    assert results.config_hash(cfg) != first
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    assert reran(capsys.readouterr().out) and results.finished(tmp_path / "run")
    assert results.read_status(tmp_path / "run")["config_hash"] == results.config_hash(cfg)


def test_a_jobs_thread_count_is_not_left_to_the_next_job_in_the_process(tmp_path, monkeypatch):
    # a launcher running jobs in one process (basic, or a joblib worker): a job with threads unset must run with the
    # process's threads, not those an earlier threads=N job set (its throughput rows would be at the wrong count)
    before = torch.get_num_threads()
    other = 2 if before == 1 else 1
    seen, fit = [], train.fit
    monkeypatch.setattr(runner.train, "fit", lambda *a, **k: (seen.append(torch.get_num_threads()), fit(*a, **k))[1])
    try:
        runner.run(tiny(tmp_path, threads=other, seed=1), tmp_path / "a", progress=False)
        assert torch.get_num_threads() == before
        runner.run(tiny(tmp_path, seed=2), tmp_path / "b", progress=False)  # threads unset: the process's own
    finally:
        torch.set_num_threads(before)
    assert seen == [other, before]


def test_unfinished_run_is_restarted(tmp_path):
    results.write_json(tmp_path / "run" / results.STATUS, {"status": "running"})
    assert runner.run(tiny(tmp_path), tmp_path / "run", progress=False)["status"] == "ok"


def test_nan_loss_is_diverged_with_rows_kept(tmp_path, monkeypatch):
    real = train.masked_loss
    calls = {"n": 0}

    def poisoned(logits, y, mask):
        calls["n"] += 1
        loss = real(logits, y, mask)
        return loss * float("nan") if calls["n"] == 3 else loss

    monkeypatch.setattr(train, "masked_loss", poisoned)
    status = runner.run(tiny(tmp_path), tmp_path / "run", progress=False)
    assert status["status"] == "diverged" and "step 2" in status["message"]
    df = results.load(tmp_path / "run")
    losses = df[df.metric == "train_loss"].sort_values("step")
    assert list(losses.step) == [0, 2] and math.isnan(losses.value.iloc[-1]) and math.isfinite(losses.value.iloc[0])
    assert results.finished(tmp_path / "run")  # diverged is final: a rerun does not retrain it


def test_same_seed_gives_identical_metrics(tmp_path):
    timing = ["train_wall_s", "train_tokens_per_s", "eval_tokens_per_s", "train_loop_tokens_per_s"]
    frames = []
    for name in ("a", "b"):
        runner.run(tiny(tmp_path), tmp_path / name, progress=False)
        df = results.load(tmp_path / name)
        frames.append(df[~df.metric.isin(timing)].sort_values(["metric", "eval_len", "protocol", "params", "step"])
                      [["metric", "eval_len", "protocol", "params", "step", "value"]].reset_index(drop=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_other_seed_differs(tmp_path):
    a = runner.run(tiny(tmp_path), tmp_path / "a", progress=False)
    b = runner.run(tiny(tmp_path, seed=1), tmp_path / "b", progress=False)
    la, lb = (results.load(tmp_path / n) for n in ("a", "b"))
    assert a["status"] == b["status"] == "ok"
    assert not la[la.metric == "ppl"].value.reset_index(drop=True).equals(lb[lb.metric == "ppl"].value.reset_index(drop=True))


def _consumed(tmp_path, monkeypatch, name, **over):
    """The training inputs (B, T) and eval windows (1, L) one run fed its model, in order."""
    seen = {"train": [], "eval": []}
    batch, nll = tasks.LMTask.train_batch, extrapolation.lm_nll

    def record_batch(self, *a, **k):
        out = batch(self, *a, **k)
        seen["train"].append(out[0].clone())
        return out

    def record_nll(model, windows, *a, **k):
        windows = list(windows)
        seen["eval"] += [x for x, _, _ in windows]
        return nll(model, windows, *a, **k)

    monkeypatch.setattr(tasks.LMTask, "train_batch", record_batch)
    monkeypatch.setattr(extrapolation, "lm_nll", record_nll)
    cfg = tiny(tmp_path, **{"eval.extension.types": [], "precision.model_level": False, **over})
    assert runner.run(cfg, tmp_path / name, progress=False)["status"] == "ok"
    monkeypatch.undo()
    return seen


def _same(xs, ys):
    return len(xs) == len(ys) and all(torch.equal(x, y) for x, y in zip(xs, ys))


def test_one_seed_pairs_encodings_on_the_same_batches_and_windows(tmp_path, monkeypatch):
    """The design is paired by seed: with one seed, every encoding trains on the same batches and is
    scored on the same eval windows; another seed draws other batches and other windows."""
    nope = _consumed(tmp_path, monkeypatch, "nope", encoding={"name": "nope"}, seed=1)
    alibi = _consumed(tmp_path, monkeypatch, "alibi", encoding={"name": "alibi"}, seed=1)
    other = _consumed(tmp_path, monkeypatch, "other", encoding={"name": "nope"}, seed=2)
    assert len(nope["train"]) == 4 and len(nope["eval"]) >= 4
    assert _same(nope["train"], alibi["train"]) and _same(nope["eval"], alibi["eval"])
    assert not _same(nope["train"], other["train"]) and not _same(nope["eval"], other["eval"])


def test_sliding_protocol_has_its_own_token_cap(tmp_path, monkeypatch):
    from harness.tasks import data
    caps, windows = set(), data.eval_windows

    def record(tokens, L, **kw):
        caps.add((kw["protocol"], kw["max_tokens"]))
        return windows(tokens, L, **kw)

    monkeypatch.setattr(data, "eval_windows", record)
    runner.run(tiny(tmp_path, **{"eval.sliding_max_tokens": 32, "eval.extension.types": [],
                                 "precision.model_level": False}), tmp_path / "r", progress=False)
    assert caps == {("nonoverlapping", 64), ("sliding", 32)}


def test_per_position_loss_bins_every_window_length(tmp_path):
    """nll_by_pos: train-length bins over the window of every eval length; with every position scored equally
    often (whole nonoverlapping windows), the bins' mean is the log of that length's PPL."""
    runner.run(tiny(tmp_path, **{"eval.extension.types": []}), tmp_path / "r", progress=False)
    df = results.load(tmp_path / "r")
    base = df[~df.params.str.contains('"extension"')]
    pos = base[base.metric == "nll_by_pos"]
    assert set(pos.protocol) == {"nonoverlapping"}
    for L in (16, 32):
        at = pos[pos.eval_len == L]
        bins = at.params.map(json.loads).map(lambda p: (p["pos_lo"], p["pos_hi"])).tolist()
        assert bins == [(lo, lo + 16) for lo in range(0, L, 16)]
        ppl = base[(base.metric == "ppl") & (base.eval_len == L) & (base.protocol == "nonoverlapping")].value.item()
        assert at.value.mean() == pytest.approx(math.log(ppl), rel=1e-6)
    acc = base[(base.metric == "byte_acc") & (base.protocol == "nonoverlapping")]
    assert sorted(acc.eval_len) == [16, 32] and acc.value.between(0, 1).all()


def test_byte_accuracy_of_a_model_that_always_predicts_one_byte_is_that_bytes_frequency():
    """A closed form: argmax is always byte e, so byte_acc = share of e among the scored targets."""
    class Constant(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(*x.shape, 256)
            out[..., ord("e")] = 1.0
            return out
    y = torch.tensor([list(b"the seed here")])
    mask = torch.ones_like(y, dtype=torch.bool)
    mask[0, :3] = False  # "the" unscored: 10 scored bytes " seed here", 4 of them 'e'
    *_, acc = extrapolation.lm_nll(Constant(), [(y, y, mask)], train_len=4, batch_size=1, device="cpu")
    assert acc == pytest.approx(4 / 10)


def test_learned_table_beyond_max_len_is_a_nan_row_not_a_crash(tmp_path):
    cfg = tiny(tmp_path, **{"encoding": {"name": "learned", "max_len": 20}})
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    df = results.load(tmp_path / "run")
    far = df[(df.eval_len == 32) & df.metric.isin(["ppl", "eval_tokens_per_s", "peak_mem_bytes"])]
    assert len(far) and far.value.isna().all()
    assert all("max_len=20" in json.loads(p)["nan_reason"] for p in far.params)
    assert df[(df.eval_len == 16) & (df.metric == "ppl")].value.notna().all()


def test_extension_applies_only_to_encodings_taking_rope_type():
    assert extension.applies({"name": "rope"}) and not extension.applies({"name": "alibi"})
    assert not extension.applies({"name": "rope", "rope_type": "yarn"})


def test_linear_extension_at_factor_one_is_exactly_the_trained_model(tmp_path):
    from harness.model import from_config
    cfg = tiny(tmp_path)
    torch.manual_seed(0)
    net = from_config(cfg.model, cfg.encoding).eval()
    x = torch.randint(0, 256, (2, 16))
    ext = extension.extended(net, cfg.encoding, "linear",
                             extension.scaling("linear", 1.0, cfg.eval.extension, 16))
    assert torch.equal(ext(x), net(x)) and net.encoding.rope_type == "default"
    ext4 = extension.extended(net, cfg.encoding, "linear",
                              extension.scaling("linear", 4.0, cfg.eval.extension, 16))
    assert not torch.allclose(ext4(x), net(x))


def test_extension_after_finetune_adds_rows(tmp_path):
    cfg = tiny(tmp_path, **{"eval.extension": {"types": ["yarn"], "finetune_steps": 2, "finetune_lens": [32],
                                               "beta_fast": 4.0, "beta_slow": 0.5}})
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    params = [json.loads(p) for p in results.load(tmp_path / "run").params]
    tuned = [p for p in params if "finetune_len" in p]
    assert {p["extension"] for p in tuned} == {"yarn", "default"}  # default: the fine-tuned control
    assert all(p["finetune_len"] == 32 and p["factor"] == (2.0 if p["extension"] == "yarn" else 1.0) for p in tuned)
    assert all(p["scaling"]["beta_fast"] == 4.0 for p in params if p.get("extension") == "yarn")


def test_randomized_positions_train_any_encoding(tmp_path):
    from harness.tasks import positions
    g = torch.Generator().manual_seed(0)
    pos = positions.randomized(16, 256, g)
    assert pos.shape == (16,) and bool((pos.diff() > 0).all()) and int(pos.max()) < 256
    assert torch.equal(pos, positions.randomized(16, 256, torch.Generator().manual_seed(0)))
    cfg = tiny(tmp_path, **{"train.max_position": 64, "encoding": {"name": "alibi"}})
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"


def test_a_run_that_cannot_start_is_failed_not_finished(tmp_path):
    cfg = tiny(tmp_path, **{"model.attention": "linear", "encoding": {"name": "alibi"}})  # bias + linear: error
    status = runner.run(cfg, tmp_path / "run", progress=False)
    assert status["status"] == "failed" and "linear attention" in status["message"]
    assert not results.finished(tmp_path / "run")  # a rerun tries again


def test_attention_statistics_and_the_decode_benchmark_are_rows_when_asked(tmp_path):
    cfg = tiny(tmp_path, **{"eval.extension.types": [], "eval.attention_samples": 2, "eval.decode_tokens": 3,
                            "precision.model_level": False})
    assert runner.run(cfg, tmp_path / "r", progress=False)["status"] == "ok"
    df = results.load(tmp_path / "r")
    ent = df[df.metric == "attn_entropy"]
    assert sorted(set(ent.eval_len)) == [16, 32, 64] and len(ent) == 3  # one layer; 64: the sink probes
    assert df[df.metric == "sink_rate"].eval_len.tolist() == [64]
    dec = df[df.metric == "decode_tokens_per_s"]
    assert sorted(dec.eval_len) == [16, 32] and (dec.value > 0).all()
    assert not df[df.metric.isin(["attn_entropy", "sink_rate", "decode_tokens_per_s"])].value.isna().any()
    eff = df[df.metric.str.startswith("effective_len")]
    assert set(eff.metric) == {"effective_len_absolute", "effective_len_relative"}
    assert set(eff.protocol) == {"byte_acc:nonoverlapping", "byte_acc:sliding8"}  # eval.protocol both
    # the report reads labels from the rows alone: every measurement param must be a known non-label key
    from harness.report.labels import EXTENSION_KEYS, MEASUREMENT_KEYS
    keys = set().union(*df.params.map(lambda p: set(json.loads(p))))
    assert keys - set(json.loads(df.params.iloc[0])) <= set(MEASUREMENT_KEYS) | set(EXTENSION_KEYS)


@pytest.mark.parametrize("encoding, path", [("rope", "kv_cache"), ("xpos", "rerun")])
def test_a_ruler_task_is_scored_by_string_match_of_the_greedy_answer_with_its_decoding_path(tmp_path, encoding, path):
    cfg = tiny(tmp_path, **{"encoding": {"name": encoding}, "task": {"name": "niah_single", "min_len": 24,
                                                                      "eval_samples": 3, "depths": [0.0, 1.0]},
                            "train.seq_len": 32, "eval.extension.types": [], "precision.model_level": False})
    assert runner.run(cfg, tmp_path / "r", progress=False)["status"] == "ok"
    df = results.load(tmp_path / "r")
    r = df[df.metric == "ruler_all"]
    assert sorted(zip(r.eval_len, r.protocol)) == [(32, "depth=0"), (32, "depth=1"), (64, "depth=0"), (64, "depth=1")]
    assert r.value.between(0, 1).all() and {json.loads(p)["decode"] for p in r.params} == {path}
    eff = df[df.metric.str.startswith("effective_len")]
    assert set(eff.protocol) == {"acc:depths", "ruler_all:depths"} and len(eff) == 4


def test_every_variant_of_a_run_scores_the_same_text(tmp_path):
    # none, and every extension at factor 1 (the identity for linear, YaRN and resonance YaRN at lengths <= train:
    # exactly the trained model), must be scored on the same windows: equal to the bit at every length. Before the
    # fix each extension call scored one length, so its text started at another seeded offset than the run's.
    cfg = tiny(tmp_path, **{"eval.multiples": [1, 2, 4], "eval.extension": {
        "types": ["linear", "dynamic", "resonance_yarn"], "factors": [1, 2]}})
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    df = results.load(tmp_path / "run")
    ppl = df[(df.metric == "ppl") & (df.protocol == "nonoverlapping")]
    p = ppl.params.map(json.loads)
    key = p.map(lambda q: (q.get("extension", "none"), q.get("factor")))
    table = ppl.assign(key=key).pivot_table(index="eval_len", columns="key", values="value")
    assert set(table.index) == {16, 32, 64} and len(table.columns) == 7  # none + 3 variants x 2 factors
    assert (table[("linear", 1.0)] == table[("none", None)]).all()
    assert (table[("dynamic", 1.0)].loc[16] == table[("none", None)].loc[16])  # dynamic is the identity up to train
    assert (table[("linear", 2.0)] != table[("none", None)]).all()
    # resonance YaRN at factor 1 is YaRN's identity with rounded wavelengths: another encoding, on the same text
    assert table[("resonance_yarn", 1.0)].loc[16] == pytest.approx(table[("none", None)].loc[16], rel=0.05)


def test_resonance_yarn_applies_to_a_trained_rope_only_as_its_subclass():
    assert extension.applies({"name": "rope"}, "resonance_yarn") and extension.applies({"name": "rope"}, "yarn")
    assert extension.applies({"name": "rope_resonance"}, "resonance_yarn")
    assert not extension.applies({"name": "alibi"}, "resonance_yarn")
