"""One run: claim -> build -> train -> measure -> write (DESIGN.md §3). Resume skips a finished run; a run
another live process holds (harness.infra.runlock) is waited for or left to it.

Order of writes: status 'running' first; train_log and checkpoint after training, rows and the final status
at the end.
A run killed at any point has no finished status, so a rerun restarts it; a finished run is skipped."""
import importlib
import time
import traceback
from pathlib import Path

import torch

from harness import model as model_lib
from harness import results, tasks, train
from harness.infra import distributed
from harness.infra import runlock
from harness.infra import wandb_sink
from harness.results import resume
from harness.config import Config, protocol_list, to_dict
from harness.measure import attention, cost, decode_bench, effective_length, extension, extrapolation, memory
from harness.measure import precision_model, throughput


def _rows(metric, value, unit, *, eval_len=None, protocol="train", **extra):
    return dict(metric=metric, eval_len=eval_len, protocol=protocol, value=float(value), unit=unit,
                extra_params=extra)


def _per_length(fn, lens, metric, unit, protocol):
    """fn(L) at each length; a ValueError (an encoding that cannot represent L) becomes a NaN row."""
    out = []
    for L in lens:
        try:
            out.append(_rows(metric, fn(L), unit, eval_len=L, protocol=protocol))
        except ValueError as e:
            out += extrapolation.nan_rows([(metric, unit)], L, protocol, str(e))
    return out


def measure(model, task, cfg: Config, device, generator, progress, rows):
    """Throughput, memory, extrapolation, extension and model-level precision rows for a trained model,
    appended to `rows` as each measurement finishes: a later measurement that fails keeps the earlier ones."""
    lens, ev = cfg.eval.resolved_lens(cfg.train.seq_len), cfg.eval
    rows += [_rows("train_tokens_per_s", throughput.train_tokens_per_s(
                model, cfg.train, device, warmup=ev.warmup, repeats=ev.throughput_repeats),
                "tokens/s", eval_len=cfg.train.seq_len),
            _rows("peak_mem_bytes", memory.train_peak_bytes(model, cfg.train, device), "bytes",
                  eval_len=cfg.train.seq_len)]
    rows += _per_length(lambda L: throughput.eval_tokens_per_s(model, L, 1, device, warmup=ev.warmup,
                                                               repeats=ev.throughput_repeats),
                        lens, "eval_tokens_per_s", "tokens/s", "eval")
    rows += _per_length(lambda L: memory.eval_peak_bytes(model, L, device), lens, "peak_mem_bytes",
                        "bytes", "eval")
    knobs = dict(train_len=cfg.train.seq_len, stride=ev.stride, max_tokens=ev.max_tokens,
                 sliding_max_tokens=ev.sliding_max_tokens, batch_size=ev.batch_size, split=ev.split, device=device,
                 text_len=max(lens))  # every scoring call of this run reads the same text (variants are paired)
    scored = extrapolation.rows(model, task, lens=lens, protocols=ev.protocols(), progress=progress, **knobs)
    bars = ev.effective_length
    rows += scored + effective_length.rows(scored, train_len=cfg.train.seq_len, threshold=bars.threshold,
                                           relative=bars.relative, min_base=bars.min_base)
    if ev.attention_samples:
        probes = {L: _probe(task, L, ev.attention_samples) for L in sorted({*lens, attention.PROBE_LEN})}
        rows += attention.rows(model, probes, probe_len=attention.PROBE_LEN, device=device)
    if ev.decode_tokens:
        rows += decode_bench.rows(model, lens, new_tokens=ev.decode_tokens, repeats=ev.throughput_repeats,
                                  warmup=ev.warmup, device=device)

    def at_length(m, L):  # one length under the extension's protocol: what extension rows score
        return extrapolation.rows(m, task, lens=[L], protocols=protocol_list(ev.extension.protocol), progress=False,
                                  **knobs)
    rows += extension.rows(model, at_length, cfg.encoding, ev.extension, train_len=cfg.train.seq_len, lens=lens,
                           task=task, train_cfg=cfg.train, generator=generator, device=device, progress=progress)
    pr = cfg.precision
    if pr.model_level:  # bf16/fp16 evaluation against fp32 (the precision study, model level)
        rows += precision_model.rows(model, task, train_len=cfg.train.seq_len, lens=pr.resolved_lens(
            cfg.train.seq_len, lens), dtypes=pr.dtypes, protocols=pr.protocols, max_tokens=pr.max_tokens,
            shifts=pr.shifts, anchor_shift=pr.anchor_shift)
    if ev.lm_eval_tasks:  # imported only when asked: lm-eval is a heavy import
        lm_eval = importlib.import_module("harness.lmeval.rows")
        rows += lm_eval.rows_for_model(model, cfg, list(ev.lm_eval_tasks), device=device, progress=progress)


def _probe(task, L, n):
    """(x (n', L), pos (L,) or None): up to n held-out sequences of length L (the task's eval batch)."""
    x, _, _, pos = task.eval_batch(L, max_tokens=n * L)
    return x[:n], pos


def _cannot_write(run_dir, run_id, e: OSError):
    """A run file could not be written (a full disk, a directory made read-only): one line; the run's status
    says failed where that can still be written, else stays `running`: either way not finished, and
    results.atomic_write left nothing half-written."""
    line = results.write_error(e)
    status = {"status": "failed", "message": f"{line}; free space or fix the permissions, then rerun the command",
              "run_id": run_id}
    try:
        results.write_json(run_dir / results.STATUS, status)
    except OSError:
        pass  # the status still says 'running' (or nothing): a rerun computes the run
    print(f"failed {run_id}: {status['message']}")
    return status


def run(cfg: Config, run_dir, run_id=None, progress=True, busy="wait", log_wandb=True):
    """run_job, then the run's W&B record from its files when log_wandb (a sweep's jobs leave it `pending` to the
    sweep's own process, harness.infra.wandb_sink.log_pending: W&B out of the measured process)."""
    status = run_job(cfg, run_dir, run_id, progress, busy)
    if log_wandb and status.get("wandb") == "pending" and cfg.wandb.mode != "disabled":
        status = wandb_sink.log_run(Path(run_dir), cfg) or status
    return status


def run_job(cfg: Config, run_dir, run_id=None, progress=True, busy="wait"):
    """Run one job into run_dir; returns its status dict. Skips a finished run (resume). The run claims its
    dir first (harness.infra.runlock); when another live process holds it, busy='wait' waits for that process and
    then skips or runs, busy='skip' returns {'status': 'busy'} at once (a sweep: its end waits for them).
    A run dir the harness cannot use (results.unusable: a file where it goes, ...) is a failed run, one line,
    nothing written; a run file that cannot be written (a full disk) fails the run in one line."""
    run_dir = Path(run_dir)
    run_id = run_id or run_dir.name
    chash = results.config_hash(cfg)
    problem = results.unusable(run_dir)
    if problem:
        print(f"failed {run_id}: {problem}")
        return {"status": "failed", "message": problem, "run_id": run_id}
    threads = torch.get_num_threads()  # a job's threads=N is its own: the next job in this process starts as this did
    try:
        if distributed.world_size() > 1:  # torchrun: the ranks run one job together; no lock between them
            return resume.skip(run_dir, run_id, chash, cfg) or _run(cfg, run_dir, run_id, progress, chash)
        while (lock := runlock.claim(run_dir)) is None:
            if busy == "skip":
                print(f"busy {run_id}: being computed by {runlock.describe(runlock.holder(run_dir) or {})}; "
                      f"left to that process")
                return {"status": "busy", "run_id": run_id}
            runlock.wait(run_dir)
        with lock:
            results.clean_temp(run_dir)  # temp files of writes killed half-way; no one else writes here now
            job = _run if cfg.pretrained is None else _run_pretrained
            return resume.skip(run_dir, run_id, chash, cfg) or job(cfg, run_dir, run_id, progress, chash)
    except OSError as e:  # the lock or a run file could not be written
        return _cannot_write(run_dir, run_id, e)
    except runlock.Unusable as e:  # a .lock that appeared as a directory after results.unusable looked
        print(f"failed {run_id}: {e}")
        return {"status": "failed", "message": str(e), "run_id": run_id}
    finally:
        torch.set_num_threads(threads)


def _running(cfg, run_dir, run_id, chash):
    """The status a run writes first (and carries to its end): config and code hashes, whether a checkpoint
    is written."""
    return {"status": "running", "run_id": run_id, "config_hash": chash, "code_hash": results.run_code_hash(cfg),
            "checkpoint": bool(cfg.checkpoint and cfg.pretrained is None)}


def _run_pretrained(cfg: Config, run_dir, run_id, progress, chash):
    """A pretrained-model job (harness.pretrained): nothing trained; its rows carry the window index in `seed`."""
    study = importlib.import_module("harness.pretrained.study")  # transformers: a heavy import, only here
    running = _running(cfg, run_dir, run_id, chash)
    results.write_json(run_dir / results.STATUS, running)
    results.retire_rows(run_dir)  # after the status: a kill in between leaves rows beside 'running', never read
    t_start = time.perf_counter()
    try:
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        measured, fields = study.rows(cfg.pretrained, progress, cfg.device)
    except Exception as e:  # noqa: BLE001 - recorded as 'failed', as a training run's failure is
        status = {"status": "failed", "message": f"{type(e).__name__}: {e}", "run_id": run_id,
                  "traceback": traceback.format_exc(limit=8)}
        results.write_json(run_dir / results.STATUS, status)
        print(f"failed {run_id}: {status['message']}")
        return status
    status = {**running, "status": "ok", "message": "", "wall_s": round(time.perf_counter() - t_start, 3),
              # the evaluated file: resume reruns the job when another file sits at its path (checkpoint_of)
              "checkpoint_sha256": next((r["extra_params"].get("checkpoint_sha256") for r in measured), None)}
    df = results.complete(measured, {**results.base_row(cfg, run_id), "params": {}, **fields}, 0)
    results.write_rows(run_dir, df)
    status["rows_sha256"] = results.file_sha256(run_dir / results.ROWS)
    if cfg.wandb.mode != "disabled":
        status["wandb"] = "pending"
    results.write_json(run_dir / results.STATUS, status)
    print(f"ok {run_id}: {len(df)} rows in {status['wall_s']:.1f}s -> {run_dir}")
    return status


def _run(cfg: Config, run_dir, run_id, progress, chash):
    try:
        return _train_and_measure(cfg, run_dir, run_id, progress, chash)
    except OSError as e:  # training and measuring record their own errors: this is a run file's write
        return _cannot_write(run_dir, run_id, e)


def _train_and_measure(cfg: Config, run_dir, run_id, progress, chash):
    device = torch.device(cfg.device)
    writer = distributed.rank() == 0  # under torchrun rank 0 measures and writes; the others only train
    running = _running(cfg, run_dir, run_id, chash)
    if writer:
        results.write_json(run_dir / results.STATUS, running)
        results.retire_rows(run_dir)  # after the status: a kill in between leaves rows beside 'running', never read
    t_start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    config_dict = to_dict(cfg)
    try:
        if cfg.threads:  # inside: a count torch refuses fails this run in one line (harness.__main__ checks first)
            torch.set_num_threads(cfg.threads)
        task = tasks.build(cfg.task, cfg.seed)
        net = model_lib.from_config(cfg.model, cfg.encoding, vocab_size=task.vocab_size).to(device)
        fit = train.fit(net, task, cfg.train, generator, device, progress, desc=f"train {cfg.encoding['name']}")
    except Exception as e:  # noqa: BLE001 - recorded as 'failed'; the sweep's other runs go on; exit code says so
        status = {"status": "failed", "message": f"{type(e).__name__}: {e}", "run_id": run_id,
                  "traceback": traceback.format_exc(limit=8)}
        if writer:
            results.write_json(run_dir / results.STATUS, status)
        print(f"failed {run_id}: {status['message']}")
        return status
    if not writer:
        return {"status": fit.status, "message": fit.message, "run_id": run_id, "rank": distributed.rank()}
    results.write_train_log(run_dir, fit.log)
    status = {**running, "status": fit.status, "message": fit.message, "steps": fit.steps,
              "train_wall_s": round(fit.wall_s, 3), "task": task.describe(), "world_size": distributed.world_size()}
    rows = [_rows("train_loss", r["loss"], "nats", step=r["step"]) for r in fit.log]
    rows += [_rows("train_wall_s", fit.wall_s, "s"), _rows("train_steps", fit.steps, "steps"),
             # the training loop's global-batch tokens/s: all ranks together under torchrun
             _rows("train_loop_tokens_per_s", fit.log[-1]["tokens"] / max(fit.wall_s, 1e-9) if fit.log else 0.0,
                   "tokens/s", world_size=distributed.world_size())]
    rows += _cost_rows(net, cfg, fit.log[-1]["tokens"] if fit.log else 0)
    if cfg.checkpoint:  # first: a measurement that fails later keeps the trained model (a failed write: _run)
        results.write_checkpoint(run_dir, net.state_dict(), config_dict)
    try:
        if fit.status == "ok":
            measure(net, task, cfg, device, generator, progress, rows)
    except Exception as e:  # noqa: BLE001 - the run fails with its message; rows so far are kept
        status.update(status="failed", message=f"{type(e).__name__}: {e}",
                      traceback=traceback.format_exc(limit=8))
    status["wall_s"] = round(time.perf_counter() - t_start, 3)
    df = results.complete(_steps(rows), results.base_row(cfg, run_id), fit.steps)
    results.write_rows(run_dir, df)
    status["rows_sha256"] = results.file_sha256(run_dir / results.ROWS)
    if cfg.wandb.mode != "disabled":  # logged by run() or the sweep's process, from the files (wandb_sink)
        status["wandb"] = "pending"
    results.write_json(run_dir / results.STATUS, status)
    reason = f" ({status['message']})" if status["status"] == "failed" else ""
    print(f"{status['status']} {run_id}{reason}: {len(df)} rows in {status['wall_s']:.1f}s -> {run_dir}")
    return status


def _cost_rows(net, cfg: Config, tokens):
    """The run's scale: trainable parameters, training tokens and training FLOPs (harness.measure.cost)."""
    m = cfg.model
    flops = cost.training_flops(n_layers=m.n_layers, d_model=m.d_model, d_attn=m.n_heads * m.head_dim,
                                mlp_ratio=m.mlp_ratio, vocab=net.tok.num_embeddings, seq_len=cfg.train.seq_len,
                                tokens=tokens)
    return [_rows("n_params", cost.trainable_params(net), "parameters"), _rows("train_tokens", tokens, "tokens"),
            _rows("train_flops", flops, "FLOPs")]


def _steps(rows):
    """Training-curve rows carry their own step; the 'step' column of the others is the final step."""
    out = []
    for r in rows:
        r = dict(r)
        step = r["extra_params"].pop("step", None)
        if step is not None:
            r["step"] = step
        out.append(r)
    return out
