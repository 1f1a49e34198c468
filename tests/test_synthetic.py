"""Synthetic tasks: determinism, exact answer masks, oracle/chance accuracy, and that grid2d needs 2D positions and
grid3d (frame, row, col) positions. The checks every registered task must pass are in tests/task_checks.py
(tests/test_content_tasks.py runs them on the content tasks too)."""
import pytest
import torch

from harness.tasks import synthetic as S
from harness.encodings import build
from tests.task_checks import (LENGTHS, check_mask_is_exactly_the_bytes_after_the_only_sep,
                               check_oracle_scores_one_and_random_scores_chance,
                               check_refuses_a_length_below_its_minimum_with_one_line_naming_it,
                               check_shapes_shift_and_determinism, full_sequences, minimum_length, rng)

CASES = [(t, max(L, minimum_length(t))) for t in S.TASKS for L in LENGTHS]  # a task's own minimum for the 16 case


@pytest.mark.parametrize("task, length", CASES)
def test_shapes_shift_and_determinism(task, length):
    check_shapes_shift_and_determinism(task, length)


@pytest.mark.parametrize("task, length", CASES)
def test_mask_is_exactly_the_bytes_after_the_only_sep(task, length):
    check_mask_is_exactly_the_bytes_after_the_only_sep(task, length)


def _content(row):
    return row[row != S.PAD]


@pytest.mark.parametrize("length", LENGTHS)
def test_copy_reverse_kv_passkey_answers(length):
    for row in full_sequences(S.generate("copy", 3, length, rng(0))):
        c = _content(row).tolist()
        k = c.index(S.SEP)
        assert c[k + 1:] == c[:k]
    for row in full_sequences(S.generate("reverse", 3, length, rng(0))):
        c = _content(row).tolist()
        k = c.index(S.SEP)
        assert c[k + 1:] == c[:k][::-1]
    for row in full_sequences(S.generate("kv_recall", 3, length, rng(0))):
        c = bytes(_content(row).tolist())
        pairs, rest = c[:len(c) - 5], c[len(c) - 5:]
        table = {pairs[i:i + 2]: pairs[i + 2:i + 4] for i in range(0, len(pairs), 4)}
        assert len(table) == len(pairs) // 4  # distinct keys
        assert rest[2] == S.SEP and table[rest[:2]] == rest[3:]
    for row in full_sequences(S.generate("passkey", 3, length, rng(0))):
        c = bytes(row.tolist())
        at = c.index(bytes([S.KEY]))
        assert c[at + 1:at + 6] == c[-5:] and c[-6] == S.SEP and c[-5:].isdigit()


@pytest.mark.parametrize("filler", list(S.FILLERS))
def test_passkey_depth_places_the_key(filler):
    L = 200
    f = L - 11  # filler bytes
    for depth, want in ((0.0, 0), (0.5, round(0.5 * f)), (1.0, f)):
        b = S.generate("passkey", 2, L, rng(0), depth=depth, filler=filler)
        assert ((full_sequences(b) == S.KEY).nonzero()[:, 1] == want).all()
        prompt = full_sequences(b)[:, :-6]
        assert (((prompt >= ord("0")) & (prompt <= ord("9"))).sum(dim=1) == 5).all()  # no digits but the key's
    assert torch.equal(S.generate("passkey", 2, L, rng(5), filler=filler).x,
                       S.generate("passkey", 2, L, rng(5), filler=filler).x)


@pytest.mark.parametrize("task", list(S.TASKS))
def test_oracle_scores_one_and_random_scores_chance(task):
    check_oracle_scores_one_and_random_scores_chance(task)


def _answer_from_grid_positions(b, width=16):
    """Solve grid2d from x and pos alone: the input at (row, width-1) asks for the byte at (row, 0)."""
    where = {int(p): t for t, p in enumerate(b.pos)}
    cols = [where[int(b.pos[t]) // width * width] for t in b.mask[0].nonzero().flatten()]
    return b.x[:, cols]  # (n, H)


@pytest.mark.parametrize("length", LENGTHS)
def test_grid2d_is_solved_by_grid_positions(length):
    for seed in range(3):
        b = S.generate("grid2d", 4, length, rng(seed))
        assert torch.equal(_answer_from_grid_positions(b), b.y[b.mask].view(4, -1))


def test_grid2d_answer_is_not_a_function_of_bytes_and_sequential_positions():
    cells = torch.tensor([list(b"abcdefghijkl")])  # the same 12 letters, as a 4x3 or a 3x4 grid
    narrow, wide = S.grid_batch(cells, 3, 16), S.grid_batch(cells, 4, 15)
    n_prompt = 13  # cells + SEP: everything before the first answer byte
    assert torch.equal(narrow.x[:, :n_prompt], wide.x[:, :n_prompt])  # identical byte streams
    assert bytes(narrow.y[narrow.mask].tolist()) == b"adgj" and bytes(wide.y[wide.mask].tolist()) == b"aei"
    # the second answer byte is predicted from the same bytes at the same sequential positions, yet differs;
    # only the grid positions tell the two apart
    assert not torch.equal(narrow.pos[:n_prompt], wide.pos[:n_prompt])
    assert torch.equal(_answer_from_grid_positions(narrow), narrow.y[narrow.mask][None])
    assert torch.equal(_answer_from_grid_positions(wide), wide.y[wide.mask][None])


def test_grid2d_varies_width_across_batches():
    cols = [int((S.generate("grid2d", 1, 256, rng(s)).pos // 16 == 1).sum()) - 1 for s in range(30)]  # row 1
    assert len(set(cols)) > 5 and min(cols) >= 2 and max(cols) <= 15


def _answer_from_frame_positions(b, frame=16):
    """Solve grid3d from x and pos alone: the input at p asks for the byte at p - frame (one frame back)."""
    where = {int(p): t for t, p in enumerate(b.pos)}
    return b.x[:, [where[int(b.pos[t]) - frame] for t in b.mask[0].nonzero().flatten()]]  # (n, rows * cols)


@pytest.mark.parametrize("length", LENGTHS)
def test_grid3d_is_solved_by_frame_positions(length):
    for seed in range(3):
        b = S.generate("grid3d", 4, length, rng(seed))
        assert torch.equal(_answer_from_frame_positions(b), b.y[b.mask].view(4, -1))
    b = S.generate("grid3d", 1, 40, rng(0), rows=3, cols=2, height=5, width=3)
    assert torch.equal(_answer_from_frame_positions(b, frame=15), b.y[b.mask][None])


def test_grid3d_positions_are_the_raster_mrope_reads():
    b = S.generate("grid3d", 2, 64, rng(5), rows=3, cols=2)
    t, h, w = build("mrope", head_dim=32, height=4, width=4).coordinates(b.pos)
    ask = b.mask[0].nonzero().flatten()  # inputs predicting an answer: the frame after the last, same (h, w) cells
    assert (t[ask] == t.max()).all() and (t[ask - 6] == t.max() - 1).all()
    assert torch.equal(h[ask], h[ask - 6]) and torch.equal(w[ask], w[ask - 6])
    cells = t > 0  # PADs fill frame 0
    assert int(h[cells].max()) == 2 and int(w[cells].max()) == 1  # 3 x 2 cells per frame
    assert len(set(b.pos.tolist())) == 64 and (b.x[:, ~cells] == S.PAD).all()


def test_grid3d_answer_is_not_a_function_of_bytes_and_sequential_positions():
    # 24 letters then SEP, as 6 frames of 2 x 2 or 4 frames of 2 x 3: the same bytes at positions 0..24
    small = S.generate("grid3d", 1, 28, rng(7), rows=2, cols=2)
    large = S.generate("grid3d", 1, 30, rng(7), rows=2, cols=3)
    assert torch.equal(small.x[:, :25], large.x[:, :25]) and small.x[0, 24] == S.SEP
    assert small.y[0, 24] != large.y[0, 24]  # the first answer byte: cell 20 or cell 18 of the same stream
    assert not torch.equal(small.pos[:25], large.pos[:25])  # only the raster positions tell them apart
    assert torch.equal(_answer_from_frame_positions(small), small.y[small.mask][None])
    assert torch.equal(_answer_from_frame_positions(large), large.y[large.mask][None])


def test_grid3d_varies_frame_size_across_batches():
    sizes = {int(S.generate("grid3d", 1, 64, rng(s)).mask.sum()) for s in range(30)}  # rows * cols
    assert len(sizes) > 4 and min(sizes) >= 4 and max(sizes) <= 16


@pytest.mark.parametrize("task, kw, msg", [
    ("cpy", {}, r"unknown task 'cpy'; expected one of \['copy', 'reverse', 'kv_recall', 'passkey', 'grid2d', 'grid3d', "
                r"'parity', .*'vt', 'cwe', 'fwe', 'count', 'flip_flop'\]$"),
    ("copy", {"depth": 0.5}, r"unknown parameter\(s\) \['depth'\] for task 'copy'; expected a subset of \[\]"),
    ("passkey", {"dept": 0.5}, r"expected a subset of \['depth', 'filler'\]"),
    ("passkey", {"depth": 1.5}, r"depth must be in \[0, 1\]"),
    ("passkey", {"filler": "lorem"}, r"expected one of \['landmark', 'kjv'\]"),
    ("grid2d", {"cols": 16}, r"cols must be in \[1, width - 1 = 15\]"),
    ("grid3d", {"rows": 5}, r"^grid3d rows must be in \[1, height = 4\]; got 5$"),
    ("grid3d", {"min_side": 5}, r"min_side must be in \[1, min\(height, width\) = 4\]"),
])
def test_bad_task_or_parameter(task, kw, msg):
    with pytest.raises(ValueError, match=msg):
        S.generate(task, 2, 64, rng(0), **kw)


@pytest.mark.parametrize("task, minimum", [("copy", 4), ("reverse", 4), ("kv_recall", 12), ("passkey", 14),
                                           ("grid2d", 6), ("grid3d", 12), ("niah_single", 18), ("vt", 48),
                                           ("parity", 2)])
def test_too_short_names_the_minimum(task, minimum):
    with pytest.raises(ValueError, match=f"needs length >= {minimum}; got {minimum - 1}"):
        S.generate(task, 2, minimum - 1, rng(0))
    assert S.generate(task, 2, minimum, rng(0)).mask.any()


@pytest.mark.parametrize("task", list(S.TASKS))
def test_every_task_refuses_a_length_below_its_minimum_with_one_line_naming_it(task):
    check_refuses_a_length_below_its_minimum_with_one_line_naming_it(task)


def test_raster_reads_positions_as_the_grid_tasks_lay_them_out():
    """harness.tasks.positions.raster, the reading rope2d, rope_mixed, comrope and mrope share, inverts the layouts of
    grid_batch (p = 16 row + col) and grid3d (p = 16 frame + 4 row + col), negative positions included."""
    from harness.tasks.positions import raster
    frame, row, col = torch.meshgrid(torch.arange(-3, 5), torch.arange(4), torch.arange(4), indexing="ij")
    p = (16 * frame + 4 * row + col).flatten()
    assert torch.equal(raster(p, (4, 4)), torch.stack((frame.flatten(), row.flatten(), col.flatten())))
    r, c = torch.meshgrid(torch.arange(-2, 6), torch.arange(16), indexing="ij")
    assert torch.equal(raster((16 * r + c).flatten(), (16,)), torch.stack((r.flatten(), c.flatten())))
