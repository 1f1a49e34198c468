"""Byte sequences of the synthetic tasks: markers, the Batch every generator returns and the helpers that build it.

Generators (harness.tasks.synthetic, harness.tasks.chomsky, harness.tasks.ruler) build n byte sequences of length T + 1
(T = `length`): [PAD]* prompt SEP answer; x = seq[:T], y = seq[1:] (next-byte targets), `mask` marks the answer
targets. Markers are control bytes (PAD 0, SEP 1, KEY 2); content is letters, digits or filler text without
digits, so no marker can be mistaken for content. Left padding keeps the answer at the end of the sequence.
This module imports nothing of the task modules, so each of them can import it first."""
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch

PAD, SEP, KEY = 0, 1, 2
LETTERS, DIGITS = 26, 10
A, ZERO = ord("a"), ord("0")
# Passkey filler of Landmark Attention (Mohtashami & Jaggi 2023, the passkey-retrieval test RULER reuses)
LANDMARK_FILLER = b"The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
KEY_DIGITS = 5


@dataclass
class Batch:
    """x, y (n, T) int64; mask (n, T) bool answer targets; pos (T,) int64 positions to feed the model.
    sep: None, or the byte that splits the answer into references (a RULER task): the answer is then also
    scored by greedy generation and RULER's string match (harness.tasks.ruler.string_match)."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    pos: torch.Tensor
    sep: Optional[int] = None


def need(task: str, length: int, minimum: int):
    if length < minimum:
        raise ValueError(f"task {task!r} needs length >= {minimum}; got {length}")


def letters(n: int, k: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(A, A + LETTERS, (n, k), generator=g)  # (n, k)


def pack(prompt: torch.Tensor, answer: torch.Tensor, length: int, pos: Optional[torch.Tensor] = None) -> Batch:
    """[PAD]* prompt SEP answer -> Batch; prompt (n, P), answer (n, K) with P + 1 + K <= length + 1."""
    n, K = answer.shape
    pad = length + 1 - prompt.shape[1] - 1 - K
    assert pad >= 0, "task computed a problem size that does not fit its length"
    seq = torch.cat([torch.full((n, pad), PAD), prompt, torch.full((n, 1), SEP), answer], dim=1)  # (n, T+1)
    mask = torch.zeros(n, length, dtype=torch.bool)
    mask[:, length - K:] = True  # y[:, t] = seq[:, t+1]: the last K targets are the answer
    pos = torch.arange(length) if pos is None else pos
    return Batch(x=seq[:, :-1].long(), y=seq[:, 1:].long(), mask=mask, pos=pos.long())


def landmark_filler(n: int, f: int, generator: torch.Generator) -> torch.Tensor:
    reps = -(-f // len(LANDMARK_FILLER))
    return torch.tensor(list(LANDMARK_FILLER * reps)[:f]).expand(n, f)


def kjv_filler(n: int, f: int, generator: torch.Generator) -> torch.Tensor:
    from harness.tasks.data import load_corpus
    text = torch.frombuffer(bytearray(load_corpus("kjv").data), dtype=torch.uint8)
    start = torch.randint(0, text.numel() - f, (n,), generator=generator)
    return text[start[:, None] + torch.arange(f)].long()  # (n, f)


FILLERS: Dict[str, Callable] = {"landmark": landmark_filler, "kjv": kjv_filler}
