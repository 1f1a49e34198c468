"""Tiny lm-eval runs shared by tests/test_lm_eval.py and tests/test_lmeval_errors.py: the config, a model
trained into a run dir, and a run dir named as `make sweep` names one (not a test module)."""
from pathlib import Path

import torch

from harness import config, results, tasks, train
from harness import model as model_lib
from harness.config import resolvers

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = ["copy", "reverse", "passkey", "kv_recall", "pystdlib_ppl"]


def cfg(encoding="rope", corpus="pystdlib"):
    return config.Config(encoding={"name": encoding}, model=config.ModelConfig(n_layers=1, d_model=32, n_heads=2),
                         task=config.TaskConfig(corpus=corpus),
                         train=config.TrainConfig(seq_len=16, steps=30, batch_size=8, warmup=3, log_every=10),
                         eval=config.EvalConfig(lens=[16, 32], max_tokens=300, batch_size=4),
                         wandb=config.WandbConfig(mode="disabled"))


def train_into(d):
    """d holding a tiny model trained 30 steps on pystdlib (about a second)."""
    c = cfg()
    torch.manual_seed(0)
    net = model_lib.from_config(c.model, c.encoding)
    fit = train.fit(net, tasks.build(c.task, 0), c.train, torch.Generator().manual_seed(0), "cpu", False)
    assert fit.status == "ok"
    results.write_checkpoint(d, net.state_dict(), config.to_dict(c))
    return d


SWEEP_OVERRIDES = "encoding=rope,eval.lens=[16,32],seed=0"  # what Hydra's override_dirname is for such a job


def sweep_dir(root):
    """root/sweeps/lm_eval/<the run dir name `make sweep` gives SWEEP_OVERRIDES> (conf/config.yaml:
    hydra.sweep.subdir = run_name(override_dirname)): commas, brackets and = in one path component."""
    d = root / "sweeps" / "lm_eval" / resolvers.run_name(SWEEP_OVERRIDES)
    assert d.name == SWEEP_OVERRIDES
    d.mkdir(parents=True)
    return d


def run_into(d):
    """d holding a finished run of cfg() made by the runner (status, rows, checkpoint): what make eval adds to."""
    from harness import runner
    status = runner.run(cfg(), d, progress=False)
    assert status["status"] == "ok", status
    return d
