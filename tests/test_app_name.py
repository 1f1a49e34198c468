"""The app is `harness` wherever it names itself: Hydra's --help, its job log in the run dir, lm-eval's wrapper."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ["model.n_layers=1", "model.d_model=32", "model.n_heads=2", "train.seq_len=16", "train.steps=2",
        "train.batch_size=4", "train.warmup=1", "eval.multiples=[1]", "eval.max_tokens=32",
        "eval.throughput_repeats=1", "eval.warmup=0", "eval.extension.types=[linear]", "wandb.mode=disabled",
        "checkpoint=false", "precision.model_level=false"]


def harness(*argv, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_help_names_the_app_harness():
    out = harness("--help", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("harness: ") and "__main__" not in out.stdout, out.stdout[:300]
    assert "python -m harness -m sweep=<preset>" in out.stdout and "encoding: alibi" in out.stdout


def test_a_run_logs_to_harness_log_not_main_log(tmp_path):
    """Hydra's job log is <run dir>/<hydra.job.name>.log: harness.log (empty unless a library logs), never
    __main__.log."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(800)))
    out = harness(f"out={tmp_path / 'out'}", f"task.corpus={corpus}", *TINY)
    assert out.returncode == 0, out.stderr[-2000:]
    (run,) = (tmp_path / "out" / "runs").iterdir()
    assert (run / "harness.log").is_file() and not (run / "__main__.log").exists(), sorted(p.name for p in run.iterdir())
    assert not list(tmp_path.rglob("__main__.log"))
