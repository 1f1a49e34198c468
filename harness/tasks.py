"""Tasks as the runner sees them: a training batch source and an evaluation that returns rows.

`lm` reads a corpus (harness.data); every generator in harness.synthetic is a task of the same name.
The lookup is a dict of task kinds, so adding a synthetic generator adds a task with no edit here."""
import importlib

import torch

from harness import positions

LM = "lm"


def _synthetic():
    return importlib.import_module("harness.synthetic")


def _names():
    try:
        return [LM, *sorted(_synthetic().TASKS)]
    except ImportError:  # the synthetic generators are optional for the lm task
        return [LM]


class _Names:
    """Lazy list of task names (harness.synthetic is imported on first use)."""

    def __contains__(self, name):
        return name in _names()

    def __iter__(self):
        return iter(_names())


TASK_NAMES = _Names()


class LMTask:
    """Language modelling on a byte corpus: random windows for training, the val split for evaluation."""

    def __init__(self, task_cfg, seed):
        from harness import data
        self.data = data
        self.seed = seed
        self.corpus = data.load_corpus(task_cfg.corpus)
        self.splits = data.split(self.corpus.data)

    def eval_tokens(self, split, need):
        """The held-out text this seed scores: the split from a seeded offset on (data.eval_offset)."""
        tokens = self.splits[split]
        return tokens[self.data.eval_offset(tokens.numel(), need, self.seed):]

    def describe(self):
        return {"corpus": self.corpus.name, "sha256": self.corpus.sha256, "bytes": len(self.corpus.data)}

    def train_batch(self, batch_size, seq_len, generator):
        """(x, y, mask, pos): (B, T) int64 inputs and targets; every target scored; default positions."""
        x, y = self.data.lm_batch(self.splits["train"], batch_size, seq_len, generator)
        return x, y, None, None

    def eval_batch(self, length, max_tokens, split="val"):
        """(x, y, mask, pos): nonoverlapping windows of the split, at least one whole window; pos None."""
        need = max(max_tokens, length) + length + 1
        ws = self.data.eval_windows(self.eval_tokens(split, need), length, protocol="nonoverlapping",
                                    max_tokens=max(max_tokens, length))
        x, y, mask = (torch.cat(t) for t in zip(*ws))
        return x, y, mask, None

    def evaluate(self, model, cfg, device, progress=True):
        from harness.measure import extrapolation
        lens = cfg.eval.resolved_lens(cfg.train.seq_len)
        need = cfg.eval.max_tokens + 2 * max(lens) + 1  # the sliding protocol's span at the longest length
        return extrapolation.lm_rows(model, self.data, self.eval_tokens(cfg.eval.split, need), cfg, device,
                                     progress)


class SyntheticTask:
    """A generator from harness.synthetic: train lengths in [min_len, seq_len], test up to 16x."""

    def __init__(self, task_cfg, seed):
        self.module = _synthetic()
        self.name = task_cfg.name
        self.fn = self.module.TASKS[self.name]
        self.params = dict(task_cfg.params)
        self.min_len = task_cfg.min_len
        self.seed = seed

    def describe(self):
        return {"generator": self.name, **self.params}

    def train_batch(self, batch_size, seq_len, generator):
        lo = self.min_len or seq_len
        length = int(torch.randint(lo, seq_len + 1, (1,), generator=generator))
        b = self.fn(batch_size, length, generator, **self.params)
        return b.x, b.y, b.mask, b.pos

    def batch(self, n, length, generator, **extra):
        return self.fn(n, length, generator, **self.params, **extra)

    def eval_batch(self, length, max_tokens, split="val"):
        """(x, y, mask, pos): max_tokens // length sequences (at least one), one seeded test set per length."""
        from harness.measure.extrapolation import eval_generator
        generator = eval_generator(length, self.seed)
        b = self.batch(max(1, max_tokens // length), length, generator)
        return b.x, b.y, b.mask, b.pos

    def evaluate(self, model, cfg, device, progress=True):
        from harness.measure import extrapolation
        return extrapolation.synthetic_rows(model, self, cfg, device, progress)


KINDS = {LM: LMTask}  # every other task name is a synthetic generator


def build(task_cfg, seed):
    """The task named by task_cfg.name."""
    if task_cfg.name not in TASK_NAMES:
        raise ValueError(f"unknown task {task_cfg.name!r}; expected one of {list(TASK_NAMES)}")
    return KINDS.get(task_cfg.name, SyntheticTask)(task_cfg, seed)


def with_positions(batch, max_position, generator):
    """Apply randomized positions (Ruoss et al. 2023) to a training batch when max_position > 0."""
    x, y, mask, pos = batch
    if not max_position:
        return batch
    pos = torch.arange(x.shape[1]) if pos is None else pos
    return x, y, mask, positions.remap(pos, max_position, generator)
