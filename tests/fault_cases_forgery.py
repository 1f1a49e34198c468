"""Fault cases for the conformance CLI's verdict, tried as code written to forge one would: replacing the suite's
judging functions inside the worker, writing rows or malformed records on the worker's channel, returning outputs
in another dtype, complex or non-finite, leaving processes behind; and checkpoints, run dirs and configs that read
as something they are not. On the code before them, each passed, tracebacked, hung or read as finished."""
import json
import os
import shutil
from pathlib import Path

from tests.fault_cases_tools import conform, both, stderr_says, table_says
from tests.fault_kit import Case, expect, harness, rejected, status, the_run, with_base

# implementations under test (x_cos_sin: fn(x, cos, sin)), conformance_forge:<name> on PYTHONPATH
FORGE = '''
import json, os, subprocess, sys, time
import torch
from harness.rope.rotation import eager

HERE = os.path.dirname(os.path.abspath(__file__))


def _send(msg):  # the worker's channel to the CLI: the fd in its argv
    os.write(int(sys.argv[1]), (json.dumps(msg) + "\\n").encode())


def _first_case():
    return json.loads(sys.argv[2])["cases"][0]


def replaces_the_judge(x, c, s):
    import harness.conformance.run as R
    import harness.conformance.tolerance as T
    T.ratio = lambda *a, **kw: 0.0
    R.judge = lambda rec, calling, case, arrays, dtype: (
        [R._row(case, calling.layout, "rotation", "pass", 0.0, 1.0, 0.0)], [])
    R.ok = lambda rows: True
    return x.clone()


def writes_pass_rows(x, c, s):
    for cid in json.loads(sys.argv[2])["cases"]:
        row = {"case": cid, "layout": "half", "check": "rotation", "max_err": 0.0, "tol": 1.0, "ratio": 0.0,
               "result": "pass", "bug": ""}
        _send({"event": "start", "case": cid})
        _send({"event": "done", "case": cid, "rows": [row], "msgs": []})
    _send({"event": "end"})
    os._exit(0)


def starts_a_case_it_was_not_given(x, c, s):
    _send({"event": "start", "case": "no-such-case"})
    time.sleep(60)


def _forge_done(rot):
    _send({"event": "done", "case": _first_case(), "record": {"freq": None, "rot": rot}})
    time.sleep(60)


def sends_outputs_of_another_shape(x, c, s):
    t = {"dtype": "torch.float32", "shape": [1], "data": "AAAAAAAAAAA="}
    _forge_done({"q": t, "k": t, "mutated": []})


def sends_a_dtype_torch_lacks(x, c, s):
    t = {"dtype": "torch.float128", "shape": [1], "data": "AAAAAAAAAAA="}
    _forge_done({"q": t, "k": t, "mutated": []})


def sends_values_that_are_not_numbers(x, c, s):
    t = {"dtype": "torch.float32", "shape": [x.shape[1], x.shape[2], x.shape[3]], "data": "not base64!"}  # bhsd
    _forge_done({"q": t, "k": t, "mutated": []})


def sends_a_pass_verdict_as_its_record(x, c, s):
    _forge_done({"result": "pass"})


def returns_fp64(x, c, s):
    return eager(x, c, s).double()


def returns_bf16(x, c, s):
    return eager(x, c, s).bfloat16()


def returns_fp32(x, c, s):
    return eager(x.float(), c.float(), s.float())


def returns_complex(x, c, s):
    return eager(x, c, s).to(torch.complex64)


def returns_int64(x, c, s):
    return eager(x, c, s).round().long()


def returns_inf(x, c, s):
    out = eager(x, c, s)
    out[..., 0] = float("inf")
    return out


def returns_nan(x, c, s):
    out = eager(x, c, s)
    out[..., -1] = float("nan")
    return out


def _remember(pid):
    with open(os.path.join(HERE, "children"), "a") as f:
        f.write(f"{pid}\\n")


def leaves_a_child(x, c, s):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
    _remember(child.pid)
    return eager(x, c, s)


def leaves_an_orphan(x, c, s):
    # a child that starts a sleeper in a session of its own and exits: the sleeper is reparented away
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'], "
            "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    _remember(int(out.split()[0]))
    return eager(x, c, s)


def positions_fp64(q, k, positions, *, rope):
    r = int(rope["head_dim"] * rope["partial_rotary_factor"])
    inv = 1.0 / rope["rope_theta"] ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    phase = positions.double()[:, None] * inv[None, :]
    return tuple(eager(t.double(), phase.cos(), phase.sin()) for t in (q, k))


def angles_fp32(x, theta):
    r = theta.shape[-1]  # a partial rotary's rest passes through
    h, xr = r // 2, x[..., :r].float()
    rot = torch.cat((-xr[..., h:], xr[..., :h]), -1)
    return torch.cat((xr * theta.cos() + rot * theta.sin(), x[..., r:].float()), -1)


def hf_fp64(q, k, cos, sin):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    return tuple(t.double() for t in apply_rotary_pos_emb(q, k, cos, sin))


def numpy_fp64(x, c, s):
    import numpy as np
    x, c, s = (np.asarray(a, dtype=np.float64) for a in (x, c, s))
    h = c.shape[-1]
    a, b = x[..., :h], x[..., h:2 * h]
    return np.concatenate((a * c - b * s, b * c + a * s, x[..., 2 * h:]), -1)


def floods_its_output(x, c, s):
    sys.stdout.write("x" * (1 << 20) + "\\n")
    sys.stdout.flush()
    return eager(x, c, s)
'''


def forge(ctx):
    (ctx.tmp / "conformance_forge.py").write_text(FORGE)
    ctx.env = {**ctx.env, "PYTHONPATH": str(ctx.tmp)}


def forged(name, fn, summary, *argv, rc=1, check=None):
    return conform(name, fn, summary, *argv, rc=rc, check=check, module="conformance_forge", setup=forge)


def children_gone(ctx, procs):
    """check: every process the implementation started (pids it wrote down) has ended."""
    f = ctx.tmp / "children"
    pids = [int(p) for p in f.read_text().split()] if f.exists() else []
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    for p in alive:  # the case's own mess: end it, then report it
        try:
            os.kill(p, 9)
        except ProcessLookupError:
            pass
    return expect(pids, "the implementation started no process") + expect(not alive, f"still running: {alive}")


def no_linux_proc(ctx):
    return None if Path("/proc/self/stat").exists() else "no /proc here: the run cannot find what a worker started"


NONE = r"0 pass, 0 FAIL, 6 error, 0 skip of 6 checks"
FAILS = r"0 pass, 6 FAIL, 0 error, 0 skip of 6 checks"
PASSES = r"6 pass, 0 FAIL, 0 error, 0 skip of 6 checks"
BROKE = "error  worker ended: its channel to the suite broke"


# --- checkpoints, run dirs and configs that read as something they are not

def _gguf(ctx):
    from harness.pretrained import checkpoint
    return checkpoint.locate("smollm2")


def cut_gguf(ctx):
    with_base(ctx)
    with open(_gguf(ctx), "rb") as f:
        (ctx.tmp / "cut.gguf").write_bytes(f.read(8 << 20))


def hf_dir(config, files=()):
    def setup(ctx):
        with_base(ctx)
        d = ctx.tmp / "ckpt"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        for name in files:
            (d / name).write_text("{}")
    return setup


LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 2,
         "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 128}


def two_corpora(ctx):
    (ctx.tmp / "a").mkdir()
    for p in (ctx.tmp / "a_b.txt", ctx.tmp / "a" / "b.txt"):
        shutil.copy(ctx.corpus, p)


def two_runs(ctx, procs):
    runs = sorted(f.parent for f in ctx.out.rglob("status.json"))
    return (expect(len(runs) == 2, f"{len(runs)} run dirs for two jobs, want 2")
            + expect(all(status(ctx, r)["status"] == "ok" for r in runs), "a job did not finish ok"))


def cut_to_training_rows(ctx):
    """The shared run's rows cut down to its training rows, status.json left saying ok."""
    import pandas as pd
    with_base(ctx)
    f = the_run(ctx) / "rows.parquet"
    df = pd.read_parquet(f)
    df[df.protocol == "train"].to_parquet(f)


def edited_value(ctx):
    """One value of the shared run's rows changed by hand, status.json left saying ok."""
    import pandas as pd
    with_base(ctx)
    f = the_run(ctx) / "rows.parquet"
    df = pd.read_parquet(f)
    df.loc[df.index[df.metric == "ppl"][0], "value"] = 1.0
    df.to_parquet(f)


def reran(ctx, procs):
    return expect(any("rerun" in p.stdout + p.stderr for p in procs), "the rerun is not said") + expect(
        status(ctx)["status"] == "ok", f"status {status(ctx)['status']!r}")


def one_metric(value, metric="ppl"):
    """setup: the shared run's first `metric` row holding value (a diverged evaluation)."""
    def setup(ctx):
        import pandas as pd
        with_base(ctx)
        f = the_run(ctx) / "rows.parquet"
        df = pd.read_parquet(f)
        df.loc[df.index[df.metric == metric][0], "value"] = value
        df.to_parquet(f)
    return setup


def report_written(ctx, procs):
    return expect((ctx.out / "report.md").is_file(), "no report.md")


def rewritten_config(ctx):
    """A finished run whose .hydra/config.yaml was rewritten afterwards (another model size)."""
    with_base(ctx)
    cfg = the_run(ctx) / ".hydra" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("d_model: 32", "d_model: 48"))


CASES = [
    # --- the verdict, forged from inside the worker
    forged("replaces the suite's judge in the worker", "replaces_the_judge", FAILS),
    forged("writes pass rows on the worker's channel", "writes_pass_rows", NONE, check=table_says(BROKE)),
    forged("starts a case it was not given", "starts_a_case_it_was_not_given", NONE,
           check=table_says(BROKE + " (a case it was not given)")),
    forged("sends outputs of another shape", "sends_outputs_of_another_shape", NONE,
           check=table_says(BROKE + " (not a record of the case: q': shape [1]")),
    forged("sends a dtype torch does not have", "sends_a_dtype_torch_lacks", NONE,
           check=table_says(BROKE + " (not a record of the case: q': no dtype 'torch.float128')")),
    forged("sends values that are not numbers", "sends_values_that_are_not_numbers", NONE,
           check=table_says(BROKE + " (not a record of the case: q': its values are not base64 fp64)")),
    forged("sends a pass verdict as its record", "sends_a_pass_verdict_as_its_record", NONE,
           check=table_says(BROKE + " (not a record of the case: rot is none of skip, error, (q, k, mutated))")),
    # --- outputs that are wrong whatever their values
    forged("fp64 back for an fp32 input", "returns_fp64", FAILS,
           check=table_says("FAIL   wrong output dtype (float64 for a float32 input)")),
    forged("bf16 back for an fp32 input", "returns_bf16", FAILS,
           check=table_says("FAIL   wrong output dtype (bfloat16 for a float32 input)")),
    forged("fp32 back for a bf16 input", "returns_fp32", FAILS, "--dtype", "bf16",
           check=table_says("FAIL   wrong output dtype (float32 for a bfloat16 input)")),
    forged("fp32 back for an fp16 input", "returns_fp32", FAILS, "--dtype", "fp16",
           check=table_says("FAIL   wrong output dtype (float32 for a float16 input)")),
    forged("complex outputs", "returns_complex", FAILS,
           check=table_says("FAIL   wrong output dtype (complex64 for a float32 input); complex output")),
    forged("integer outputs", "returns_int64", FAILS, check=table_says("FAIL   wrong output dtype (int64")),
    forged("fp64 back under the positions convention (dense)", "positions_fp64", FAILS, "--convention", "positions",
           "--positions", "dense", check=table_says("FAIL   wrong output dtype (float64 for a float32 input)")),
    forged("fp32 back for a bf16 input under the angles convention", "angles_fp32", FAILS, "--convention", "angles",
           "--dtype", "bf16", check=table_says("FAIL   wrong output dtype (float32 for a bfloat16 input)")),
    forged("fp64 back under HF's convention", "hf_fp64", FAILS, "--convention", "hf",
           check=table_says("FAIL   wrong output dtype (float64 for a float32 input)")),
    forged("NumPy fp64 arrays back for fp32 (--array numpy)", "numpy_fp64", FAILS, "--array", "numpy",
           check=table_says("FAIL   wrong output dtype (float64 for a float32 input)")),
    forged("inf in the outputs", "returns_inf", FAILS, check=table_says("FAIL   non-finite output (")),
    forged("NaN in the outputs", "returns_nan", FAILS,
           check=both(table_says("FAIL   non-finite output ("), stderr_says("non-finite output ("))),
    # --- what the code under test starts, and what it prints
    Case("tools: conformance: leaves a child in a session of its own",
         ["-m", "harness.conformance", "--convention", "x_cos_sin", "--rope-type", "default", "--apply",
          "conformance_forge:leaves_a_child"], rc=0, stream="out", line=r"^conformance_forge:leaves_a_child .*"
         + PASSES, setup=forge, check=children_gone, skip=no_linux_proc),
    Case("tools: conformance: leaves an orphan in a session of its own",
         ["-m", "harness.conformance", "--convention", "x_cos_sin", "--rope-type", "default", "--apply",
          "conformance_forge:leaves_an_orphan"], rc=0, stream="out", line=r"^conformance_forge:leaves_an_orphan .*"
         + PASSES, setup=forge, check=children_gone, skip=no_linux_proc),
    forged("floods its output (1 MiB a call)", "floods_its_output", PASSES, rc=0),
    # --- checkpoints that are not what they say
    rejected("reliability: a GGUF cut to its first 8 MiB", ["pretrained=smollm2", "pretrained.path={tmp}/cut.gguf"],
             r"pretrained\.path .*cut\.gguf (is cut short|is not a whole GGUF file)", setup=cut_gguf),
    rejected("reliability: a checkpoint dir with config.json only", ["pretrained=smollm2", "pretrained.path={tmp}/ckpt"],
             r"pretrained\.path .*ckpt has no tokenizer", setup=hf_dir(LLAMA)),
    rejected("reliability: a checkpoint dir without weights", ["pretrained=smollm2", "pretrained.path={tmp}/ckpt"],
             r"pretrained\.path .*ckpt has no weights", setup=hf_dir(LLAMA, ["tokenizer.json"])),
    rejected("reliability: a checkpoint dir naming custom code (auto_map)",
             ["pretrained=smollm2", "pretrained.path={tmp}/ckpt"], r"pretrained\.path .*ckpt: its config\.json names custom code \(auto_map\)",
             setup=hf_dir({**LLAMA, "auto_map": {"AutoModelForCausalLM": "modeling_x.X"}}, ["tokenizer.json"])),
    rejected("reliability: pretrained.path with '='", ["pretrained=smollm2", "pretrained.path=/tmp/a=b.gguf"],
             r"pretrained\.path: Hydra's override grammar cannot read the value '/tmp/a=b\.gguf' as it is; quote "
             r"it: pretrained\.path='/tmp/a=b\.gguf'"),
    # --- run dirs and finished runs
    Case("reliability: two corpus paths that escape alike (a_b.txt, a/b.txt)",
         harness("task.corpus={tmp}/a_b.txt,{tmp}/a/b.txt", multirun=True), setup=two_corpora, rows="more",
         check=two_runs),
    Case("reliability: rows cut to the training rows beside status ok, rerun", harness(), setup=cut_to_training_rows,
         rows="more", check=reran),
    Case("reliability: a value edited beside status ok, rerun", harness(), setup=edited_value, rows="same",
         check=reran),
    Case("reliability: report over a run with one ppl of inf", ["-m", "harness.report", "{out}", "--wandb",
                                                                "disabled"], setup=one_metric(float("inf")),
         line=r"wrote .*report\.md", stream="out", check=report_written),
    Case("reliability: report over a run with one ppl of NaN", ["-m", "harness.report", "{out}", "--wandb",
                                                                "disabled"], setup=one_metric(float("nan")),
         line=r"wrote .*report\.md", stream="out", check=report_written),
    Case("reliability: hf --from-run whose config.yaml was rewritten after the run",
         ["-m", "harness.hf", "--from-run", "{run}"], rc=2, setup=rewritten_config, unchanged=True,
         line=r"^harness\.hf: error: .*config"),
]
