"""Synthetic tasks where the position that matters is defined by content, not by a token index.

Both tasks ask about "the last event of a kind": the last reset of a variable and the increments after it
(count), the last write instruction (flip_flop). The distance to that event is random and what lies between
is filler of the same bytes, so an encoding that counts tokens (absolute, relative) has no fixed offset to
attend to, while one that counts chosen tokens (CoPE: Golovneva et al., "Contextual Position Encoding:
Learning to Count What's Important", arXiv 2405.18719, §4) can. Each is one harness.tasks.synthetic sequence,
[PAD]* prompt SEP answer (harness.tasks.sequences.pack), with the contract of harness.tasks.synthetic:
fn(n, length, generator, **params) -> Batch, length = T, the problem grows with the length (more statements,
more instructions), one ValueError below the minimum length, deterministic given the torch.Generator and
vectorized (no Python loop over positions or sequences; count redraws the rare rows with no variable set,
as the authors' generator does). Answers are digits; markers are the control bytes KEY and SEP.
harness.tasks.synthetic merges `TASKS` into its own."""
from typing import Callable, Dict, Tuple

import torch

from harness.tasks.sequences import A, KEY, LETTERS, ZERO, Batch, need, pack

# count: the authors' OP_WEIGHTS (facebookresearch/RAM, projects/cope/scripts/count_data_gen.py)
SET, INC, PASS = 0, 1, 2
OP_WEIGHTS = {SET: 1, PASS: 50, INC: 7}
MIN_STEPS = 3  # the authors' nsteps = random.randint(3, max_steps)
DOT = ord(".")  # a `pass;` statement
UPPER = ord("A")  # `x = 0 ;` is the variable's capital letter, `x ++;` its small letter

# flip_flop: instruction bytes of Liu et al.'s flip-flop language
WRITE, IGNORE, READ = ord("w"), ord("i"), ord("r")


def _program(m: int, steps: int, nvars: int, max_val: int, g: torch.Generator) -> Tuple[torch.Tensor, ...]:
    """m counting programs of `steps` one-byte statements: (bytes (m, steps), query var (m,), its value (m,),
    ok (m,): some variable was set, so there is something to print).

    Statements are drawn i.i.d. with OP_WEIGHTS; a SET names a uniform variable; an INC names a uniform one among
    the variables set before it (the authors' sample_existing_var), and it is dropped to a `pass` when none is
    set or when it would take the value past max_val (where the authors' generator raises GenerationFail and
    draws the statement again). Values after dropping are min(increments since the last set, max_val): the
    k-th increment after a set is kept iff k <= max_val, so no sequential pass is needed."""
    w = torch.tensor([OP_WEIGHTS[SET], OP_WEIGHTS[INC], OP_WEIGHTS[PASS]], dtype=torch.float64)
    edges = w.cumsum(0) / w.sum()  # (3,) upper ends of SET, INC, PASS on [0, 1)
    u = torch.rand(m, steps, generator=g, dtype=torch.float64)
    op = (u[..., None] >= edges[:2]).sum(-1)  # (m, S) in {SET, INC, PASS}
    set_var = torch.randint(0, nvars, (m, steps), generator=g)
    pick = torch.rand(m, steps, generator=g)  # which set variable an INC names
    ask = torch.rand(m, generator=g)  # which set variable the question names
    t, v = torch.arange(steps), torch.arange(nvars)
    is_set = (op == SET)[..., None] & (set_var[..., None] == v)  # (m, S, V)
    first = torch.where(is_set.any(1), is_set.int().argmax(1), steps)  # (m, V) first SET of each variable
    order = first.argsort(dim=1, stable=True)  # (m, V) variables by first SET; never-set ones last
    known = (first[:, None, :] < t[None, :, None]).sum(-1)  # (m, S) variables set strictly before each step
    inc_var = order.gather(1, torch.minimum((pick * known).long(), (known - 1).clamp(min=0)))  # (m, S) one of them
    is_inc = ((op == INC) & (known > 0))[..., None] & (inc_var[..., None] == v)  # (m, S, V)
    seen = is_inc.long().cumsum(1)  # (m, S, V) increments up to each step
    last_set = torch.where(is_set, t[None, :, None], -1).cummax(1).values  # (m, S, V)
    since = seen - torch.where(last_set >= 0, seen.gather(1, last_set.clamp(min=0)), 0)  # incs since last SET
    kept = (is_inc & (since <= max_val)).any(-1)  # (m, S)
    code = torch.where(op == SET, UPPER + set_var, torch.where(kept, A + inc_var, DOT))
    n_set = (first < steps).sum(1)  # (m,)
    query = order.gather(1, torch.minimum((ask * n_set).long(), (n_set - 1).clamp(min=0))[:, None])[:, 0]  # (m,)
    value = since[:, -1].gather(1, query[:, None])[:, 0].clamp(max=max_val)  # (m,)
    return code, query, value, n_set > 0


def count(n: int, length: int, generator: torch.Generator, *, nvars: int = 3, max_val: int = 9) -> Batch:
    """The counting task of CoPE (Golovneva et al. 2024, §4; data generator facebookresearch/RAM,
    projects/cope/scripts/count_data_gen.py): a program of statements on variables, then `print x`, and the
    value of x. Every variable is only ever set to 0 or incremented, so the answer is the number of increments
    of x since its last reset: counting x's statements, not tokens.

    Bytes: one per statement as the authors' tokens are (`x = 0 ;` -> capital 'X', `x ++;` -> 'x',
    `pass;` -> '.'), with the first `nvars` letters as variables; the question is KEY and the small letter.
    Prompt S = length - 3 statements, KEY, x (n, S + 2); answer one digit (n, 1). Statement weights are the
    authors' (set 1, increment 7, pass 50) and S plays their nsteps (3 to 512 there), so longer sequences put
    more passes and resets between the question and the increments it counts. Differences: max_val defaults
    to 9 (the authors cap at 10), so that the answer is one digit; an increment their generator would draw again
    (no variable set yet, or one past max_val) is a pass here (_program). Like theirs, a program in which no
    variable is set has nothing to print and is drawn again. Minimum length 6 (3 statements)."""
    if not 1 <= nvars <= LETTERS:
        raise ValueError(f"count nvars must be in [1, {LETTERS}] (one letter each); got {nvars}")
    if not 1 <= max_val <= 9:
        raise ValueError(f"count max_val must be in [1, 9] (a one-digit answer); got {max_val}")
    need("count", length, MIN_STEPS + 3)  # T + 1 = S + (KEY, x) + SEP + digit
    steps = length - 3
    code, query, value, ok = _program(n, steps, nvars, max_val, generator)
    while not ok.all():  # the authors' generate_sample: a failed sample is drawn again
        bad = (~ok).nonzero()[:, 0]
        code[bad], query[bad], value[bad], ok[bad] = _program(len(bad), steps, nvars, max_val, generator)
    prompt = torch.cat([code, torch.full((n, 1), KEY), (A + query)[:, None]], dim=1)  # (n, S + 2)
    return pack(prompt, (ZERO + value)[:, None], length)


def flip_flop(n: int, length: int, generator: torch.Generator, *, p_ignore: float = 0.8) -> Batch:
    """Flip-flop language modelling (Liu et al., "Exposing Attention Glitches with Flip-Flop Language Modeling",
    NeurIPS 2023, arXiv 2306.00946): instructions w (write), i (ignore), r (read), each followed by a bit; a
    read's bit is the bit of the last write. FFL(p_ignore): the first instruction is w, the last r, those in
    between i with probability p_ignore and w or r with (1 - p_ignore) / 2 each; written and ignored bits are
    uniform. Their released data (hf datasets synthseq/flipflop) trains on FFL(0.8) (256 instructions:
    80% ignore, 10% read, 10% write), validates on FFL(0.8), FFL(0.1) (val_dense) and FFL(0.98) (val_sparse,
    long gaps between writes). The reads inside the prompt carry their bits, as in the language.

    Bytes: `w0i1r0...r` (no separator, as their text), SEP, the final read's bit: m = length // 2
    instructions, prompt (n, 2m - 1), answer one digit '0'/'1' (n, 1); one PAD when length is odd. Longer
    sequences hold more instructions, and under p_ignore near 1 a longer gap back to the last write.
    Minimum length 4 (`w b r`)."""
    if not 0.0 <= p_ignore <= 1.0:
        raise ValueError(f"flip_flop p_ignore must be in [0, 1]; got {p_ignore}")
    need("flip_flop", length, 4)  # T + 1 = (2m - 1) + SEP + bit (+ 1 PAD if odd), m >= 2
    m = length // 2
    u = torch.rand(n, m, generator=generator, dtype=torch.float64)
    op = torch.where(u < p_ignore, IGNORE, torch.where(u < p_ignore + (1.0 - p_ignore) / 2, WRITE, READ))
    op[:, 0], op[:, -1] = WRITE, READ
    bits = torch.randint(0, 2, (n, m), generator=generator)  # (n, m)
    last = torch.where(op == WRITE, torch.arange(m), -1).cummax(dim=1).values  # (n, m) >= 0: op 0 is a write
    bits = torch.where(op == READ, bits.gather(1, last), bits)
    prompt = torch.stack([op, ZERO + bits], dim=2).reshape(n, 2 * m)[:, :-1]  # (n, 2m - 1): the last bit asked
    return pack(prompt, ZERO + bits[:, -1:], length)


TASKS: Dict[str, Callable[..., Batch]] = {"count": count, "flip_flop": flip_flop}
