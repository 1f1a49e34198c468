"""Fault cases found by trying the harness as a hostile user would (tests/fault_cases.py collects them): inputs that
wrote nowhere, ran nothing, wrote twice into one run dir, tracebacked, or read stale rows as results on the code
before these cases were added. Each expects one clear line before any work, or the handled outcome."""
import json

from tests.fault_kit import Case, expect, harness, rejected, the_run, with_base

CLAIMS_ERR = r"^harness\.claims: error: "
LM_CLI = ["-m", "harness.lmeval.cli", "{run}", "--tasks", "pystdlib_ppl"]


def running_rows_left_out(ctx, procs):
    """The shared run's status rewritten to 'running' (a rerun killed): results.load reads none of its rows."""
    return expect("rows 0" in procs[0].stdout, f"results.load read the rows of a running run: {procs[0].stdout!r}")


def mark_running(ctx):
    with_base(ctx)
    st = the_run(ctx) / "status.json"
    st.write_text(json.dumps({**json.loads(st.read_text()), "status": "running"}))


LOAD = ["-c", "import sys; from harness import results; print('rows', len(results.load(sys.argv[1])))", "{out}"]

CASES = [
    # nowhere, nothing, twice
    rejected("reliability: out= empty", ["out="], r"out is empty \(''\); give the directory"),
    rejected("reliability: seeds=0 sweep", ["seeds=0", "sweep=extension"], r"seeds must be >= 1", multirun=True),
    rejected("reliability: seeds=-1 sweep", ["seeds=-1", "sweep=extension"], r"seeds must be >= 1", multirun=True),
    rejected("reliability: two jobs, one run dir", ["encoding=rope,rope"], r"two jobs resolve to one run dir",
             multirun=True),
    # launcher settings and threads the machine cannot run
    rejected("reliability: joblib n_jobs=0", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=0"],
             r"hydra\.launcher\.n_jobs must be any whole number but 0", multirun=True),
    rejected("reliability: joblib n_jobs=1.5", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=1.5"],
             r"Error merging override hydra\.launcher\.n_jobs=1\.5 .*could not be converted to Integer",
             multirun=True),
    rejected("reliability: submitit timeout_min=0", ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=0"],
             r"hydra\.launcher\.timeout_min must be >= 1", multirun=True),
    rejected("reliability: submitit cpus_per_task=0", ["hydra/launcher=submitit_local",
                                                      "hydra.launcher.cpus_per_task=0"],
             r"hydra\.launcher\.cpus_per_task must be >= 1", multirun=True),
    rejected("reliability: threads=100000", ["threads=100000"], r"threads=100000 is more than the \d+ CPUs"),
    # a choice dropped without a word
    rejected("reliability: budget beside a model", ["budget=4x", "model=small"],
             r"budget=4x sets the model itself .*model=small would be dropped"),
    # values Hydra's grammar cannot read as one value
    rejected("reliability: out with '='", ["out=/tmp/x=y"], r"out: Hydra's override grammar cannot read the value "
                                                            r"'/tmp/x=y' as it is; quote it: out='/tmp/x=y'"),
    rejected("reliability: out with a non-ASCII letter", ["out=/tmp/é"], r"out: .*quote it: out='/tmp/é'"),
    rejected("reliability: out with a comma, no -m", ["out=/tmp/a,b"], r"out=/tmp/a,b is a sweep"),
    # checkpoints that cannot load, refused before loading
    rejected("reliability: a file that is no GGUF", ["pretrained=smollm2", "pretrained.path={out}/../junk.gguf"],
             r"pretrained\.path .*junk\.gguf is not a GGUF file", setup=lambda ctx: (with_base(ctx), (ctx.out.parent / "junk.gguf").write_bytes(
                 b"not a model"))),
    # tools
    Case("reliability: claims --sweeps that does not exist", ["-m", "harness.claims", "--sweeps", "{tmp}/nosuch",
                                                              "--out", "{tmp}/claims"], rc=2,
         line=CLAIMS_ERR + r"--sweeps .*nosuch is not a directory", unchanged=True),
    Case("reliability: claims --out on a file", ["-m", "harness.claims", "--sweeps", "{tmp}", "--out", "{tmp}/f.txt"],
         rc=2, line=CLAIMS_ERR + r"--out .*f\.txt is a file", setup=lambda ctx: (ctx.tmp / "f.txt").write_text("x"),
         unchanged=True),
    Case("reliability: lm-eval --limit -1", [*LM_CLI, "--limit", "-1"], rc=2,
         line=r"^harness\.lmeval: error: --limit: expected a number of docs per task", setup=with_base),
    # stale rows
    Case("reliability: rows beside a 'running' status are not results", LOAD, setup=mark_running,
         check=running_rows_left_out, stream="out"),
]
