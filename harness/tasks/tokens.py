"""A corpus in a pretrained checkpoint's tokens (task.tokenizer): the laptop side of a comparison with that model
counts lengths in the same unit, so "2x the trained context" means the same thing on both sides.

The tokenizer is read offline from the checkpoint (harness.pretrained.checkpoint.locate: a shipped name, a checkpoint
directory, or a .gguf file's own vocabulary), never downloaded. The corpus is split in bytes first
(harness.tasks.data.split) and each split tokenized on its own, so no token straddles train and held-out text."""
import functools
import os
from pathlib import Path

import torch


def _path(spec):
    from harness.pretrained import checkpoint
    p = Path(spec).expanduser()
    if p.exists():
        return checkpoint.locate(None, str(p))
    if spec not in checkpoint.SHIPPED:
        raise ValueError(f"unknown task.tokenizer {spec!r}; expected one of {sorted(checkpoint.SHIPPED)}, a "
                         f"checkpoint directory or a .gguf file (null: bytes)")
    return checkpoint.locate(spec)


def check(spec):
    """One ValueError naming what is wrong with a task.tokenizer, before any work (the file is found, not read)."""
    _path(spec)


def identity(spec) -> str:
    """The tokenizer's file: its name and size (a replaced checkpoint at the same path changes it)."""
    p = _path(spec)
    f = p / "tokenizer.json" if p.is_dir() else p
    return f"{f.name}:{f.stat().st_size if f.exists() else 0}"


@functools.lru_cache(maxsize=4)
def load(spec):
    """The checkpoint's tokenizer (transformers, offline)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoTokenizer
    from transformers.utils import logging
    logging.set_verbosity_error()
    p = _path(spec)
    where, extra = (p, {}) if p.is_dir() else (p.parent, {"gguf_file": p.name})
    return AutoTokenizer.from_pretrained(where, local_files_only=True, **extra)


def encode(tok, data: bytes) -> torch.Tensor:
    """(N,) int32 token ids of UTF-8 text (invalid bytes replaced), no special tokens, in 1 MB pieces cut at a
    newline (the fast tokenizer's time grows with a piece's length; a newline is a token boundary in the
    Llama-family pre-tokenizers the harness reads)."""
    text, ids, start = data.decode("utf-8", errors="replace"), [], 0
    while start < len(text):
        end = text.find("\n", start + 1_000_000)
        end = len(text) if end < 0 else end + 1
        ids += tok(text[start:end], add_special_tokens=False)["input_ids"]
        start = end
    return torch.tensor(ids, dtype=torch.int32)


@functools.lru_cache(maxsize=4)
def _splits(sha, spec, data):
    from harness.tasks import data as data_lib
    tok = load(spec)
    return {k: encode(tok, bytes(v.numpy())) for k, v in data_lib.split(data).items()}, len(tok)


def splits(corpus, spec):
    """({train, val, test}: (N,) int32 ids, vocab size) of a Corpus in the tokenizer of `spec`."""
    out, vocab = _splits(corpus.sha256, spec, corpus.data)
    return out, vocab

