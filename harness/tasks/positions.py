"""Positions: randomized (Ruoss et al. 2023: train on positions drawn from a larger range), and the raster reading
of a 1-D position that the 2D/3D encodings share."""
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


def raster(pos: torch.Tensor, sizes) -> torch.Tensor:
    """pos (T,) int -> (len(sizes) + 1, T) coordinates of a row-major raster whose trailing axes have `sizes`:
    (width,) gives (row, col), (height, width) gives (frame, row, col); the leading axis is unbounded. Floor
    division, so negative positions decode too and a shift by prod(sizes) moves the leading coordinate only."""
    coords = []
    for size in reversed(sizes):
        q = torch.div(pos, size, rounding_mode="floor")
        coords.append(pos - q * size)
        pos = q
    return torch.stack([pos, *reversed(coords)])
