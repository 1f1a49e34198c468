"""Synthetic length-generalization tasks, byte-level and deterministic given a torch.Generator: the registry.

Every task is `fn(n, length, generator, **params) -> Batch` (harness.tasks.sequences: [PAD]* prompt SEP answer,
next-byte targets, `mask` on the answer). Loss may be taken on every target (the prompt is random, so it only
teaches the byte statistics; PADs are trivial) or on `mask` only; accuracy is always on `mask` only. TASKS holds
the tasks below, the Chomsky-hierarchy tasks (harness.tasks.chomsky), the byte-level mini-RULER (harness.tasks.ruler) and
the content-counting tasks (harness.tasks.content)."""
import inspect
from typing import Callable, Dict, Optional

import torch

from harness.tasks import chomsky
from harness.tasks import content as content_tasks
from harness.tasks import ruler
from harness.tasks.sequences import (A, DIGITS, FILLERS, KEY, KEY_DIGITS, LETTERS, PAD, SEP, ZERO, Batch,  # noqa: F401
                               letters, need, pack)

def copy(n: int, length: int, generator: torch.Generator) -> Batch:
    """k random letters, SEP, the same k letters; k = length // 2."""
    need("copy", length, 4)
    s = letters(n, length // 2, generator)
    return pack(s, s, length)


def reverse(n: int, length: int, generator: torch.Generator) -> Batch:
    """k random letters, SEP, the k letters reversed; k = length // 2."""
    need("reverse", length, 4)
    s = letters(n, length // 2, generator)
    return pack(s, s.flip(1), length)


def kv_recall(n: int, length: int, generator: torch.Generator, *, key_len: int = 2) -> Batch:
    """Associative recall (Ba et al. 2016; Zoology's MQAR, Arora et al. 2023, with one query):
    p pairs `key value` (key: key_len distinct-per-sequence letters, value: 2 digits), then the query key,
    SEP, and its value. p = (length - 2 - key_len) // (key_len + 2) fills the length."""
    if key_len < 1:
        raise ValueError(f"kv_recall key_len must be >= 1; got {key_len}")
    pair = key_len + 2
    p = (length - 2 - key_len) // pair  # T + 1 = PADs + p * pair + key_len + 1 + 2
    need("kv_recall", length, 2 * pair + 2 + key_len)
    if p > LETTERS ** key_len:
        raise ValueError(f"kv_recall with key_len={key_len} has {LETTERS ** key_len} distinct keys; length "
                         f"{length} needs {p}: use length < {(LETTERS ** key_len + 1) * pair + 2 + key_len} or a larger key_len")
    # p distinct key ids per sequence: the first p of a random permutation (argsort of uniform noise)
    ids = torch.rand(n, LETTERS ** key_len, generator=generator).argsort(dim=1)[:, :p]  # (n, p)
    keys = torch.stack([(ids // LETTERS ** i) % LETTERS for i in reversed(range(key_len))], dim=-1) + A  # (n, p, key_len)
    values = torch.randint(ZERO, ZERO + DIGITS, (n, p, 2), generator=generator)  # (n, p, 2)
    q = torch.randint(0, p, (n,), generator=generator)  # (n,) which pair is queried
    rows = torch.arange(n)
    prompt = torch.cat([torch.cat([keys, values], dim=-1).reshape(n, p * pair), keys[rows, q]], dim=1)
    return pack(prompt, values[rows, q], length)


def passkey(n: int, length: int, generator: torch.Generator, *, depth: Optional[float] = None,
            filler: str = "landmark") -> Batch:
    """Passkey retrieval (Mohtashami & Jaggi 2023; RULER, Hsieh et al. 2024): filler text with
    `KEY ddddd` at relative depth `depth` of the filler (None: uniform per sequence, for training),
    then SEP and the 5 digits. filler: 'landmark' (the paper's repeated sentences) or 'kjv' (a random
    contiguous slice of the kjv corpus per sequence; it has no digits)."""
    if filler not in FILLERS:
        raise ValueError(f"unknown passkey filler {filler!r}; expected one of {list(FILLERS)}")
    if depth is not None and not 0.0 <= depth <= 1.0:
        raise ValueError(f"passkey depth must be in [0, 1] or None; got {depth}")
    need("passkey", length, 2 * KEY_DIGITS + 4)
    f = length - 2 * KEY_DIGITS - 1  # filler bytes: T + 1 = f + (1 + 5) + 1 + 5
    text = FILLERS[filler](n, f, generator)  # (n, f)
    d = torch.rand(n, generator=generator) if depth is None else torch.full((n,), float(depth))
    at = (d * f).round().long()  # (n,) filler bytes before the key
    digits = torch.randint(ZERO, ZERO + DIGITS, (n, KEY_DIGITS), generator=generator)
    block = torch.cat([torch.full((n, 1), KEY), digits], dim=1)  # (n, 6)
    prompt = torch.stack([torch.cat([text[i, :at[i]], block[i], text[i, at[i]:]]) for i in range(n)])
    return pack(prompt, digits, length)


def grid_batch(cells: torch.Tensor, cols: int, length: int, *, width: int = 16) -> Batch:
    """Lay out cells (n, H*cols) row-major as an H x cols grid and ask for its first column.

    Stream: [PAD]* cells SEP a_0 .. a_{H-1} with a_r = cell (r, 0); no row separators. Positions are raster
    indices p = row * width + col (rope2d reads (p // width, p % width)): PADs in row 0, cell (r, c) at
    (r + 1, c), and the input that must predict a_r (SEP, then a_{r-1}) at (r + 1, width - 1), the end of
    the row it asks about. The answer is a fixed 2D offset (0, -(width - 1)) away, but in the byte stream
    it is cells[r * cols], which depends on cols: unrecoverable from the bytes and positions 0..T-1.
    A 1-D encoding fed the same raster positions sees the rows only through p; the task compares that."""
    n, hw = cells.shape
    H = hw // cols
    if hw != H * cols or not 1 <= cols <= width - 1:
        raise ValueError(f"grid_batch needs 1 <= cols <= width - 1 = {width - 1} dividing the {hw} cells; got cols={cols}")
    pad = length - H * (cols + 1)
    if not 0 <= pad <= width:
        raise ValueError(f"grid_batch: {H} rows of {cols} cells need length {H * (cols + 1)} (+ up to {width} PADs); got {length}")
    r, c = torch.arange(hw) // cols, torch.arange(hw) % cols
    pos = torch.cat([torch.arange(pad), (r + 1) * width + c, (torch.arange(H) + 1) * width + width - 1])  # (T,)
    return pack(cells, cells[:, ::cols], length, pos=pos)


def grid2d(n: int, length: int, generator: torch.Generator, *, cols: Optional[int] = None,
           min_cols: int = 2, width: int = 16) -> Batch:
    """Read the first column of a letter grid whose width `cols` is only visible in the positions.

    cols (one per batch: positions are shared) is drawn from [min_cols, width - 1] unless given; the grid
    gets H = length // (cols + 1) rows. `width` must equal the rope2d encoding's width."""
    if not 1 <= min_cols <= width - 1:
        raise ValueError(f"grid2d min_cols must be in [1, width - 1 = {width - 1}]; got {min_cols}")
    if cols is None:
        hi = min(width - 1, length // 2 - 1)  # at least 2 rows
        need("grid2d", length, 2 * (min_cols + 1))
        cols = int(torch.randint(min_cols, hi + 1, (1,), generator=generator))
    elif not 1 <= cols <= width - 1:
        raise ValueError(f"grid2d cols must be in [1, width - 1 = {width - 1}]; got {cols}")
    need("grid2d", length, 2 * (cols + 1))
    H = length // (cols + 1)
    return grid_batch(letters(n, H * cols, generator), cols, length, width=width)


def grid3d(n: int, length: int, generator: torch.Generator, *, rows: Optional[int] = None,
           cols: Optional[int] = None, min_side: int = 2, height: int = 4, width: int = 4) -> Batch:
    """grid2d with a time axis: F frames of rows x cols letters, then the last frame again, asked cell by cell
    from the frame after it (the cell at the same (row, col) one frame back).

    Positions are the raster mrope reads, p = frame * height * width + row * width + col: PADs (< rows * cols)
    in frame 0, frame f's cell (r, c) at (f + 1, r, c), and the input predicting answer k (SEP, then answer k-1)
    at (F + 1, r_k, c_k): the answer is one frame back at the same (row, col). In the byte stream it is
    rows * cols bytes back, and with no frame separators rows * cols is visible only in the positions.
    rows and cols (one per batch: positions are shared) are drawn from [min_side, height] x [min_side, width],
    where at least 2 frames fit, unless given; `height` and `width` must equal the mrope encoding's."""
    if not 1 <= min_side <= min(height, width):
        raise ValueError(f"grid3d min_side must be in [1, min(height, width) = {min(height, width)}]; got {min_side}")
    for name, v, bound, hi in (("rows", rows, "height", height), ("cols", cols, "width", width)):
        if v is not None and not 1 <= v <= hi:
            raise ValueError(f"grid3d {name} must be in [1, {bound} = {hi}]; got {v}")
    sizes = [(r, c) for r in (range(min_side, height + 1) if rows is None else [rows])
             for c in (range(min_side, width + 1) if cols is None else [cols])]
    need("grid3d", length, 3 * min(r * c for r, c in sizes))  # 2 frames + the answer frame
    sizes = [(r, c) for r, c in sizes if 3 * r * c <= length]
    rows, cols = sizes[int(torch.randint(0, len(sizes), (1,), generator=generator))]
    k = rows * cols
    F = length // k - 1  # frames of cells: pad + F * k cells + SEP + k answers = length + 1
    cell = (torch.arange(k) // cols) * width + torch.arange(k) % cols  # (k,) offset of (r, c) in a frame
    frames = torch.arange(1, F + 2)[:, None] * (height * width) + cell  # (F + 1, k): cells, then the answers
    pos = torch.cat([torch.arange(length - (F + 1) * k), frames.flatten()])  # (T,)
    cells = letters(n, F * k, generator)
    return pack(cells, cells[:, -k:], length, pos=pos)


TASKS: Dict[str, Callable[..., Batch]] = {
    "copy": copy, "reverse": reverse, "kv_recall": kv_recall, "passkey": passkey, "grid2d": grid2d, "grid3d": grid3d,
    **chomsky.TASKS, **ruler.TASKS,  # the Chomsky-hierarchy tasks and the byte-level mini-RULER
    **content_tasks.TASKS,  # counting (CoPE) and flip-flop: where content-dependent positions should win
}


def parameters(name: str):
    """The keyword parameters generator `name` takes from task.params: its keyword-only arguments, but
    `depth`, which the passkey evaluation sets itself (task.depths)."""
    sig = inspect.signature(TASKS[name]).parameters
    return [k for k, p in sig.items() if p.kind is p.KEYWORD_ONLY and k != "depth"]


def eval_generator(length: int, seed: int) -> torch.Generator:
    """The test set of one (length, seed): every encoding trained with this seed is scored on it (paired
    design), and each seed draws another (its CIs cover test sampling too). Seed 0 keeps the old sets."""
    return torch.Generator().manual_seed(1_000_003 + length + 104_729 * seed)


def generate(task: str, n: int, length: int, generator: torch.Generator, **params) -> Batch:
    """TASKS[task](n, length, generator, **params), with one clear error for a bad task or parameter."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {list(TASKS)}")
    valid = [p for p in inspect.signature(TASKS[task]).parameters if p not in ("n", "length", "generator")]
    bad = sorted(set(params) - set(valid))
    if bad:
        raise ValueError(f"unknown parameter(s) {bad} for task {task!r}; expected a subset of {valid}")
    if n < 1:
        raise ValueError(f"task {task!r} needs n >= 1; got {n}")
    return TASKS[task](n, length, generator, **params)


def accuracy(logits: torch.Tensor, batch: Batch) -> Dict[str, float]:
    """token_acc over answer targets; seq_acc = fraction of sequences with every answer target right."""
    right = logits.argmax(dim=-1) == batch.y.to(logits.device)  # (n, T)
    mask = batch.mask.to(logits.device)
    return {"token_acc": right[mask].float().mean().item(),
            "seq_acc": (right | ~mask).all(dim=1).float().mean().item(),
            "n_answer_tokens": int(mask.sum())}
