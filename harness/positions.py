"""Randomized positional encodings (Ruoss et al. 2023): train on positions drawn from a larger range."""
import torch


def randomized(seq_len: int, max_position: int, generator: torch.Generator) -> torch.Tensor:
    """A sorted random subset of [0, max_position) of size seq_len, shared by the batch. (T,) int64."""
    if max_position < seq_len:
        raise ValueError(f"max_position {max_position} must be >= seq_len {seq_len}")
    return torch.randperm(max_position, generator=generator)[:seq_len].sort().values


def remap(pos: torch.Tensor, max_position: int, generator: torch.Generator) -> torch.Tensor:
    """Replace a task's positions pos (T,) by an order-preserving random subset of [0, max_position)."""
    table = randomized(int(pos.max()) + 1, max_position, generator)  # one new position per old one
    return table[pos]
