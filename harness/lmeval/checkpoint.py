"""A trained run's checkpoint as a model, for lm-eval and the claims: every way a user's path can be wrong is one
line (UsageError for what harness-lm-eval was given)."""
import pickle
from pathlib import Path

import torch

from harness import config as config_lib
from harness import model as model_lib
from harness import results


class UsageError(ValueError):
    """An ordinary mistake in what harness-lm-eval was given (model_args, a checkpoint, a task name): the CLI
    prints it as one line, exit 2. A ValueError, so Python callers catch it as before."""


def _first_line(e):
    """An exception as one short line: torch's and OmegaConf's messages run over several lines."""
    line = (str(e).strip().splitlines() or [""])[0].split(". ")[0]
    return f"{type(e).__name__}: {line[:160]}" + ("..." if len(line) > 160 else "")


def load_run(run_dir):
    """(Config, model in eval mode) from a run dir's checkpoint (torch.load with weights_only=True).
    Every way a user's path can be wrong is one line: FileNotFoundError (no dir, no checkpoint), ValueError
    (a truncated file, another file type, a checkpoint this harness cannot read)."""
    run_dir = Path(run_dir)
    path = run_dir / results.CHECKPOINT
    if not run_dir.is_dir():
        what = "is a file, not a run dir" if run_dir.exists() else "does not exist"
        raise FileNotFoundError(f"no checkpoint at {path}: {run_dir} {what}")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; run dirs hold one when the run finished with "
                                f"checkpoint=true")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    # each is how torch.load reports a file that is not a whole checkpoint (a truncated zip, an empty file,
    # random bytes, text): RuntimeError, EOFError, OSError, UnpicklingError, KeyError
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, KeyError) as e:
        raise ValueError(f"checkpoint {path} is truncated or not a checkpoint ({_first_line(e)})") from e
    if not isinstance(ckpt, dict) or not {"state_dict", "config"} <= set(ckpt):
        got = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(f"{path} is not a harness checkpoint: expected a dict with keys ['config', 'state_dict'], "
                         f"got {got}")
    try:
        cfg = config_lib.from_dict(ckpt["config"])
        if cfg.task.tokenizer:
            raise ValueError(f"lm-eval feeds the model bytes; this run was trained on task.tokenizer="
                             f"{cfg.task.tokenizer} tokens")
        net = model_lib.from_config(cfg.model, cfg.encoding)
        net.load_state_dict(ckpt["state_dict"])
    # OmegaConf's ValidationError / ConfigKeyError (ValueError, KeyError), our validation (ValueError), a
    # state_dict of other shapes (RuntimeError): a checkpoint of another harness version
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise ValueError(f"checkpoint {path} does not fit this harness version ({_first_line(e)})") from e
    return cfg, net.eval()
