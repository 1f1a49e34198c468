"""Tasks as the runner sees them: training batches and held-out data (harness.measure.extrapolation scores
them by the task's `kind`: a corpus, "lm", or a generator, "synthetic").

`lm` reads a corpus (harness.tasks.data); every generator in harness.tasks.synthetic is a task of the same name.
The lookup is a dict of task kinds, so adding a synthetic generator adds a task with no edit here."""
import torch

from harness.tasks import positions, synthetic

LM = "lm"
TASK_NAMES = (LM, *sorted(synthetic.TASKS))  # what config's `task` may name


class LMTask:
    """Language modelling on a corpus, in bytes or (task.tokenizer) in a checkpoint's tokens: random windows for
    training, the val split for evaluation. vocab_size: the model's embedding rows (256 for bytes)."""

    kind = "lm"

    def __init__(self, task_cfg, seed):
        from harness.tasks import data
        self.data = data
        self.seed = seed
        self.corpus = data.load_corpus(task_cfg.corpus)
        self.tokenizer = task_cfg.tokenizer
        if self.tokenizer:  # each byte split tokenized on its own: no token straddles two splits
            from harness.tasks import tokens
            self.splits, self.vocab_size = tokens.splits(self.corpus, self.tokenizer)
        else:
            self.splits, self.vocab_size = data.split(self.corpus.data), 256

    def eval_tokens(self, split, need):
        """The held-out text this seed scores: the split from a seeded offset on (data.eval_offset)."""
        tokens = self.splits[split]
        return tokens[self.data.eval_offset(tokens.numel(), need, self.seed):]

    @staticmethod
    def check(task_cfg, train_len):
        from harness.tasks import data  # as in __init__: harness.tasks.data is imported only where a corpus is read
        data.check_corpus(task_cfg.corpus)
        if task_cfg.tokenizer:
            from harness.tasks import tokens
            tokens.check(task_cfg.tokenizer)

    @staticmethod
    def data_identity(task_cfg):
        """What the config does not say about the data: the corpus bytes (a file edited in place), and the
        tokenizer's file when there is one (another checkpoint at the same path)."""
        from harness.tasks import data
        out = {"corpus_sha256": data.load_corpus(task_cfg.corpus).sha256}
        if task_cfg.tokenizer:
            from harness.tasks import tokens
            out["tokenizer"] = tokens.identity(task_cfg.tokenizer)
        return out

    def describe(self):
        return {"corpus": self.corpus.name, "source": self.corpus.source, "sha256": self.corpus.sha256,
                "bytes": len(self.corpus.data), **({"tokenizer": self.tokenizer} if self.tokenizer else {})}

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


class SyntheticTask:
    """A generator from harness.tasks.synthetic: train lengths in [min_len, seq_len], test up to 16x."""

    kind = "synthetic"
    vocab_size = 256  # bytes

    def __init__(self, task_cfg, seed):
        self.module = synthetic
        self.name = task_cfg.name
        self.fn = synthetic.TASKS[self.name]
        self.params = dict(task_cfg.params)
        self.min_len = task_cfg.min_len
        self.eval_samples, self.depths = task_cfg.eval_samples, list(task_cfg.depths)
        self.seed = seed

    @staticmethod
    def check(task_cfg, train_len):
        """One sequence at the shortest and the longest train length: a length below the generator's template
        or a bad parameter value is its one-line ValueError before any run starts (names: TaskConfig)."""
        if (task_cfg.min_len or 0) > train_len:
            raise ValueError(f"task.min_len {task_cfg.min_len} exceeds train.seq_len {train_len}: training draws "
                             f"lengths from [task.min_len, train.seq_len]")
        g = torch.Generator().manual_seed(0)
        for L in sorted({task_cfg.min_len or train_len, train_len}):
            synthetic.TASKS[task_cfg.name](1, L, g, **task_cfg.params)

    @staticmethod
    def data_identity(task_cfg):
        """Generated from the config, the seed and the harness's code: nothing more to record."""
        return {}

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
        b = self.batch(max(1, max_tokens // length), length, self.eval_generator(length))
        return b.x, b.y, b.mask, b.pos

    def eval_generator(self, length):
        """The seeded test set of this length (synthetic.eval_generator): paired across encodings."""
        return synthetic.eval_generator(length, self.seed)


KINDS = {LM: LMTask}  # every other task name is a synthetic generator


def build(task_cfg, seed):
    """The task named by task_cfg.name."""
    if task_cfg.name not in TASK_NAMES:
        raise ValueError(f"unknown task {task_cfg.name!r}; expected one of {list(TASK_NAMES)}")
    return KINDS.get(task_cfg.name, SyntheticTask)(task_cfg, seed)


def check(task_cfg, train_len):
    """What building or training the task would refuse, found without reading its data (before any run starts)."""
    KINDS.get(task_cfg.name, SyntheticTask).check(task_cfg, train_len)


def data_identity(task_cfg):
    """The task's data beyond its config (the corpus's sha256): part of a run's config hash, so a corpus
    edited in place makes finished runs stale."""
    return KINDS.get(task_cfg.name, SyntheticTask).data_identity(task_cfg)


def with_positions(batch, max_position, generator):
    """Apply randomized positions (Ruoss et al. 2023) to a training batch when max_position > 0."""
    x, y, mask, pos = batch
    if not max_position:
        return batch
    pos = torch.arange(x.shape[1]) if pos is None else pos
    return x, y, mask, positions.remap(pos, max_position, generator)
