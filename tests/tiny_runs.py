"""The smallest real runs the tests make (not a test module): `tiny`, a config that trains in about a second
in-process (tests/conftest.py serves it as the `tiny` fixture), and `command`, a Hydra multirun of runs as small
started as a user starts one (`python -m harness -m ...`, from ROOT)."""
import sys
from pathlib import Path

from harness.config import from_dict

ROOT = Path(__file__).resolve().parent.parent
TEXT = ("In the beginning was the byte, and the byte was with the model. " * 40 +
        "".join(f"line {i}: the quick brown fox jumps over the lazy dog {i * 7 % 13}\n" for i in range(400)))
SWEEP_TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog {i * 7 % 13}\n" for i in range(1500))


def tiny(tmp_path, **over):
    """A config that runs in about a second: 1 layer, d_model 32, 4 steps, eval at 16 and 32."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    d = {"encoding": {"name": "rope"}, "model": {"n_layers": 1, "d_model": 32, "n_heads": 2},
         "task": {"corpus": str(corpus)}, "train": {"seq_len": 16, "steps": 4, "batch_size": 4, "warmup": 1},
         "eval": {"multiples": [1, 2], "max_tokens": 64, "throughput_repeats": 1, "warmup": 0,
                  "extension": {"types": ["linear", "yarn"]}},
         "wandb": {"mode": "disabled"}, "sweep": "test"}
    for key, value in over.items():
        node = d
        *path, last = key.split(".")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
    return from_dict(d)


def command(tmp_path, *sweep):
    """argv of a Hydra multirun over `sweep` (e.g. "encoding=rope,alibi") into tmp_path/out, on a corpus it writes."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(SWEEP_TEXT)
    return [sys.executable, "-m", "harness", "-m", *sweep, f"out={tmp_path / 'out'}", f"task.corpus={corpus}",
            "model.n_layers=1", "model.d_model=32", "model.n_heads=2", "train.seq_len=16", "train.steps=4",
            "train.batch_size=4", "train.warmup=1", "eval.multiples=[1,2]", "eval.max_tokens=64",
            "eval.throughput_repeats=1", "eval.warmup=0", "eval.extension.types=[linear]", "wandb.mode=disabled",
            "checkpoint=false"]
