"""The cases of the fault-injection battery (tests/faults.py runs them): hostile-but-fair inputs and faults, each
with what a clean answer is (tests/fault_kit.py: Case and the shared setups and checks). The topic modules
tests/fault_cases_*.py hold more; CASES is all of them."""
import importlib
import os
from pathlib import Path

from tests.fault_kit import (Case, harness, with_base, rejected, status, expect, kernel_level, truncate_rows,
                             garbage_status, stale_hash, sigkill_mid_training, with_failed_run, with_corrupt_run,
                             stale_lock, finished_ok, skipped, rerun_fresh, failed_keeps_checkpoint, diverged,
                             modes_664, load, failed_left_out, corrupt_skipped, one_trains, root, read_only,
                             cuda_present, ray_installed, LM, LM_ERR, HF_APPLY)

CASES = [
    # bad overrides: one line, exit 2, nothing written
    rejected("unknown key", ["train.stepz=3"], r"unknown key 'train.stepz'; valid keys in train: \[.*'steps'"),
    rejected("bad type", ["train.steps=abc"], r".*train\.steps.*'abc'.*Integer"),
    rejected("unknown encoding", ["encoding=alibl"], r"unknown encoding 'alibl'; expected one of \[.*'alibi'"),
    rejected("unknown model", ["model=huge"], r"unknown model 'huge'; expected one of \[.*'tiny'"),
    rejected("unknown task", ["task=nosuch"], r"unknown task 'nosuch'; expected one of \[.*'kv_recall'"),
    rejected("bad value in a sweep", ["encoding=rope,alibl"], r"unknown encoding 'alibl'", multirun=True),
    rejected("unknown sweep preset", ["sweep=nosuch"], r"unknown sweep 'nosuch'; expected one of", multirun=True),
    # a pretrained job is checked before any work too (its checkpoint file, then its knobs)
    rejected("pretrained: no checkpoint at path", ["pretrained=smollm2", "pretrained.path=/nonexistent/m.gguf"],
             r"pretrained\.path /nonexistent/m\.gguf is not an HF checkpoint directory or a \.gguf file$"),
    rejected("pretrained: unknown model", ["pretrained=smollm2", "pretrained.name=llama9"],
             r"unknown pretrained model 'llama9'; expected one of \['gemma3', 'smollm2'\]"),
    rejected("null parent", ["precision.pipeline.table=fp16"],
             r"cannot set 'precision.pipeline.table': 'precision.pipeline' is null; choose one first, precision="),
    rejected("encoding param typo", ["encoding=rope", "encoding.bse=100"],
             r"unknown key 'encoding.bse'; valid keys in encoding: \[.*'base'"),
    rejected("task length below its template", ["task=vt", "train.seq_len=48", "task.min_len=40"],
             r"task 'vt' needs length >= 48; got 40$"),
    rejected("task min_len above the train length", ["task=niah_single", "train.seq_len=16"],
             r"task.min_len 32 exceeds train.seq_len 16: training draws lengths from \[task.min_len, train.seq_len\]$"),
    rejected("task depth outside [0, 1]", ["task=niah_single", "task.depths=[0.5,1.5]"],
             r"task.depths must lie in \[0, 1\], got \[0.5, 1.5\]$"),
    rejected("unknown haystack", ["task=niah_single", "train.seq_len=32", "task.params.haystack=essay"],
             r"niah_single haystack must be one of \['repeat', 'kjv'\]; got 'essay'$"),
    rejected("task param typo", ["task=kv_recall", "task.params.key_ln=3"],
             r"unknown key 'task.params.key_ln'; valid keys in task.params: \['key_len'\]"),
    rejected("encoding param typo in a sweep", ["encoding=rope,alibi", "encoding.bse=100"],
             r"unknown key 'encoding.bse'; valid keys in encoding: \[.*'base'", multirun=True),
    rejected("task param typo with +", ["task=kv_recall", "+task.params.key_ln=3"], r".*'key_ln'.*'key_len'"),
    rejected("negative steps", ["train.steps=-1"], r"train.steps must be >= 1, got -1"),
    rejected("zero steps", ["train.steps=0"], r"train.steps must be >= 1, got 0"),
    rejected("seq_len 0", ["train.seq_len=0"], r"train.seq_len must be >= 1, got 0"),
    rejected("negative lr", ["train.lr=-1e-3"], r"train.lr must be > 0"),
    rejected("bogus eval.protocol", ["eval.protocol=bogus"], r"unknown eval.protocol 'bogus'; expected one of"),
    rejected("eval length 0", ["eval.lens=[16,0]"], r"eval.lens .*>= 1"),
    rejected("heads not dividing d_model", ["model.d_model=30", "model.n_heads=4"],
             r"model.d_model 30 is not divisible by n_heads 4"),
    rejected("unknown launcher", ["hydra/launcher=nosuch"], r"unknown hydra/launcher 'nosuch'", multirun=True),
    rejected("launcher without its plugin", ["hydra/launcher=ray"],
             r"hydra/launcher=ray: its Hydra plugin is not installed", multirun=True, skip=ray_installed),
    rejected("unknown lm-eval task", ["eval.lm_eval_tasks=[nosuchtask]"], r"unknown lm-eval task.*'nosuchtask'"),
    rejected("missing corpus file", ["task.corpus={tmp}/nonexistent.txt"], r"unknown corpus .*nonexistent"),
    rejected("unknown rope impl", ["encoding.impl=nosuch"], r"unknown rope impl 'nosuch'"),
    rejected("device=cuda without CUDA", ["device=cuda"], r"device=.cuda. but .* no CUDA", skip=cuda_present),
    rejected("out= under a file", ["out={tmp}/afile/sub"], r"cannot write results under out=.*is a file",
             setup=lambda ctx: (with_base(ctx), (ctx.tmp / "afile").write_text("x"))),
    rejected("out= in a read-only dir", ["out={tmp}/ro/out"], r"cannot write results under out=.*not writable",
             setup=lambda ctx: (with_base(ctx), read_only(ctx)), skip=root),
    # faults on results
    Case("rerun of a finished run skips it", harness(), line=r"^skip .*: finished \(ok\)", stream="out",
         setup=with_base, check=skipped),
    Case("rerun with threads=1 (not a result knob) skips", harness("threads=1"), line=r"^skip ", stream="out",
         setup=with_base, check=skipped),
    Case("truncated rows.parquet, rerun", harness(), line=r"^ok ", stream="out", setup=truncate_rows,
         rows="base", check=finished_ok),
    Case("garbage status.json, rerun", harness(), line=r"^ok ", stream="out", setup=garbage_status,
         rows="base", check=finished_ok),
    Case("SIGKILL mid-training, rerun", harness(), line=r"^ok ", stream="out", setup=sigkill_mid_training,
         rows="base", check=finished_ok),
    Case("changed default (config_hash), rerun", harness(), line=r"^rerun .*config hash 000000000000 -> \w{12}",
         stream="out", setup=stale_hash, rows="base", check=rerun_fresh),
    Case("umask 002: files 0664", harness(), line=r"^ok ", stream="out", umask=0o002, rows="base",
         check=modes_664),
    Case("measurement fails after training", harness("task.corpus={short}", "eval.multiples=[1,64]"), rc=1,
         line=r"^failed .*eval_windows.*too few", stream="out", rows="more", check=failed_keeps_checkpoint),
    Case("diverging lr", harness("train.steps=4", "train.lr=1e30"), line=r"^diverged ", stream="out", rows="more",
         check=diverged),
    # report / load
    Case("report: missing dir", ["-m", "harness.report", "{tmp}/nope", "--wandb", "disabled"], rc=2,
         line=r"^harness\.report: error: no results at", unchanged=True),
    Case("report: empty dir", ["-m", "harness.report", "{tmp}/empty", "--wandb", "disabled"], rc=2,
         line=r"^harness\.report: error: no rows", setup=lambda ctx: (ctx.tmp / "empty").mkdir(), unchanged=True),
    Case("report: a failed run is listed, not read", ["-m", "harness.report", "{tmp}/sweep", "--wandb", "disabled"],
         line=r"leaving out the rows of failed run .*failed", setup=with_failed_run, check=failed_left_out),
    Case("report: one corrupt rows file among good", ["-m", "harness.report", "{tmp}/sweep", "--wandb", "disabled"],
         line=r"skipping corrupt rows file .*bad/rows.parquet", setup=with_corrupt_run,
         check=corrupt_skipped),
    # lm-eval entry point
    Case("lmeval: missing run dir", [*LM, "{tmp}/nope", "--tasks", "passkey"], rc=2, line=LM_ERR + r".*nope",
         unchanged=True),
    Case("lmeval: run dir without checkpoint", [*LM, "{run}", "--tasks", "passkey"], rc=2,
         line=LM_ERR + "no checkpoint", setup=lambda ctx: (with_base(ctx), (ctx.run / "checkpoint.pt").unlink()),
         unchanged=True),
    Case("lmeval: truncated checkpoint", [*LM, "{run}", "--tasks", "passkey"], rc=2, line=LM_ERR + r"checkpoint",
         setup=lambda ctx: (with_base(ctx), os.truncate(ctx.run / "checkpoint.pt", 200)), unchanged=True),
    Case("lmeval: unknown task", [*LM, "{run}", "--tasks", "nosuchtask"], rc=2,
         line=LM_ERR + r"unknown lm-eval task.*'nosuchtask'", setup=with_base, unchanged=True),
    Case("lmeval: bad --lens", [*LM, "{run}", "--tasks", "passkey", "--lens", "16,abc"], rc=2,
         line=LM_ERR + r".*--lens", setup=with_base, unchanged=True),
    # the conformance suite and the HF config converter
    Case("conformance: --apply that does not import", ["-m", "harness.conformance", "--apply", "nosuch_pkg.mod:fn"],
         rc=2, line=r"^harness\.conformance: error: .*nosuch_pkg", unchanged=True),
    Case("conformance: bad --dtype", ["-m", "harness.conformance", "--apply", HF_APPLY, "--dtype", "fp8"], rc=2,
         line=r"^harness\.conformance: error: unknown --dtype 'fp8'", unchanged=True),
    Case("hf: missing config.json", ["-m", "harness.hf", "{tmp}/none.json"], rc=2,
         line=r"^harness\.hf: error: .*none\.json: not a readable JSON file", unchanged=True),
    # the run-dir lock
    Case("two identical runs at once", harness(), line=r"^ok ", stream="out", copies=2, rows="base",
         check=one_trains),
    Case("unknown C kernel level (HARNESS_ROPE_ISA)", harness(), rc=2, setup=kernel_level("avx512"),
         line=r"^harness: error: HARNESS_ROPE_ISA='avx512': unknown level; choose one of "
               r"\['generic', 'avx2', 'avx512bf16'\]$"),
    Case("stale lock (dead pid on this host)", harness(), line=r"taking over the stale lock of pid \d+",
         setup=stale_lock, rows="base", check=finished_ok),
]


def _topics():
    """The cases of every topic module tests/fault_cases_<topic>.py (each defines CASES), in file order."""
    for path in sorted(Path(__file__).parent.glob("fault_cases_*.py")):
        yield from importlib.import_module(f"tests.{path.stem}").CASES


CASES += list(_topics())
_names = [c.name for c in CASES]
assert len(set(_names)) == len(_names), f"fault case names repeat: {sorted({n for n in _names if _names.count(n) > 1})}"
