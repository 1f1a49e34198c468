"""Length-generalization tasks of the Chomsky-hierarchy study, as byte sequences for harness.tasks.synthetic.

Delétang et al., "Neural Networks and the Chomsky Hierarchy" (ICLR 2023; google-deepmind/
neural_networks_chomsky_hierarchy, tasks/regular/*.py, tasks/cs/*.py), reused by Ruoss et al.,
"Randomized Positional Encodings Boost Length Generalization of Transformers" (ACL 2023). Their tasks map
one-hot input strings to output strings; here each is one harness.tasks.synthetic sequence, [PAD]* prompt SEP
answer (harness.tasks.sequences.pack), where the prompt is the input string and the answer the output string, so
the same next-byte model, masks and accuracy serve every task. Content is digits, letters and the operator
bytes + - * (never a control byte PAD/SEP/KEY). `length` is T as everywhere in harness.tasks.synthetic: each
generator fills it with the largest problem that fits and raises one ValueError below its minimum.

Every generator is deterministic given the torch.Generator and vectorized (no Python loop over positions or
sequences; binary_addition redraws the rare all-zero operand). harness.tasks.synthetic merges `TASKS` into its own."""
from typing import Callable, Dict

import torch

from harness.tasks.sequences import A, LETTERS, ZERO, Batch, need, pack

OPERATORS = "+-*"  # modular_arithmetic's operator bytes, as in the authors' OP_BY_CHARACTER


def _bits(n: int, k: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, (n, k), generator=g)  # (n, k) in {0, 1}


def parity(n: int, length: int, generator: torch.Generator) -> Batch:
    """parity_check (regular; tasks/regular/parity_check.py): k = length - 1 bits '0'/'1', SEP, the parity
    of the number of 1s ('0' even, '1' odd: the authors' class ids). Answer (n, 1)."""
    need("parity", length, 2)
    b = _bits(n, length - 1, generator)  # (n, k)
    return pack(ZERO + b, ZERO + b.sum(dim=1, keepdim=True) % 2, length)


def even_pairs(n: int, length: int, generator: torch.Generator) -> Batch:
    """even_pairs (regular; tasks/regular/even_pairs.py): k = length - 1 letters 'a'/'b', SEP, the number of
    'ab' and 'ba' pairs mod 2 ('0' even, '1' odd: the authors' class ids). The count is that of unequal
    neighbours, computed as the authors do (xor of neighbours); it is odd exactly when first != last, so a
    model can solve the task by comparing two bytes, at any length. Answer (n, 1)."""
    need("even_pairs", length, 3)
    s = _bits(n, length - 1, generator)  # (n, k)
    odd = (s[:, 1:] != s[:, :-1]).sum(dim=1, keepdim=True) % 2  # (n, 1)
    return pack(A + s, ZERO + odd, length)


def _evaluate(nums: torch.Tensor, ops: torch.Tensor, modulus: int) -> torch.Tensor:
    """Value mod `modulus` of d_0 o_1 d_1 ... o_{m-1} d_{m-1} with * before + and -: nums (n, m) digits, ops
    (n, m - 1) operator bytes -> (n,).

    Read left to right, the state v = (sum of the closed terms, signed product of the open term, 1) goes
    through one linear map per operator: `* x` keeps the sum and multiplies the term by x, `+ x` / `- x` adds
    the term to the sum and opens the term +x / -x. The maps are 3x3 integer matrices, multiplied pairwise
    (later @ earlier) mod `modulus` in log2(m) rounds, so there is no loop over positions."""
    n, k = ops.shape
    x = nums[:, 1:]
    mats = torch.zeros(n, k, 3, 3, dtype=torch.long)  # (n, k, 3, 3): v' = M v
    mul = ops == ord("*")
    mats[..., 0, 0] = 1
    mats[..., 0, 1] = (~mul).long()  # + and -: the open term joins the sum
    mats[..., 1, 1] = torch.where(mul, x, 0)  # *: the open term times x
    mats[..., 1, 2] = torch.where(mul, 0, torch.where(ops == ord("-"), -x, x)) % modulus  # + / -: opens +-x
    mats[..., 2, 2] = 1
    while mats.shape[1] > 1:
        if mats.shape[1] % 2:  # pad with the identity
            mats = torch.cat([mats, torch.eye(3, dtype=torch.long).expand(n, 1, 3, 3)], dim=1)
        mats = (mats[:, 1::2] @ mats[:, 0::2]) % modulus
    v0 = torch.stack([torch.zeros_like(nums[:, 0]), nums[:, 0], torch.ones_like(nums[:, 0])], dim=1)  # (n, 3)
    v = (mats[:, 0] @ v0[:, :, None])[:, :, 0]  # k >= 1: length >= 4
    return (v[:, 0] + v[:, 1]) % modulus


def modular_arithmetic(n: int, length: int, generator: torch.Generator, *, modulus: int = 5,
                       operators: str = OPERATORS) -> Batch:
    """modular_arithmetic (regular; tasks/regular/modular_arithmetic.py, without brackets): an expression of
    m = (e + 1) // 2 digits in [0, modulus) and m - 1 operators drawn uniformly from `operators`, with e the
    largest odd length <= length - 1 (the authors force odd lengths the same way), SEP, its value mod
    `modulus` as one digit. Answer (n, 1).

    Order of evaluation: the authors' file does *not* evaluate left to right. _replace_subtractions turns
    `a - b` into `a + (-b)`, _perform_multiplications multiplies each run of `*` first, and the terms are
    summed mod the modulus: usual precedence (their docstring: 1 + 2 * 3 = 2 mod 5). We do the same, so the
    answer equals Python's eval of the expression mod `modulus`. The paper uses modulus 5 and all three
    operators."""
    if not 2 <= modulus <= 10:
        raise ValueError(f"modular_arithmetic modulus must be in [2, 10] (one digit byte); got {modulus}")
    if not operators or len(set(operators)) != len(operators) or set(operators) - set(OPERATORS):
        raise ValueError(f"modular_arithmetic operators must be distinct characters of {OPERATORS!r}; "
                         f"got {operators!r}")
    need("modular_arithmetic", length, 4)  # one operator: e = 3
    m = length // 2  # digits: e = 2m - 1 <= length - 1
    nums = torch.randint(0, modulus, (n, m), generator=generator)  # (n, m)
    op_bytes = torch.tensor([ord(c) for c in operators])
    ops = op_bytes[torch.randint(0, len(operators), (n, m - 1), generator=generator)]  # (n, m - 1) bytes
    value = _evaluate(nums, ops, modulus)  # (n,)
    prompt = torch.empty(n, 2 * m - 1, dtype=torch.long)
    prompt[:, 0::2], prompt[:, 1::2] = ZERO + nums, ops
    return pack(prompt, (ZERO + value)[:, None], length)


def duplicate_string(n: int, length: int, generator: torch.Generator, *, vocab_size: int = 2) -> Batch:
    """duplicate_string (context-sensitive; tasks/cs/duplicate_string.py): k = length // 3 letters from the
    first `vocab_size` of a-z (the paper: 2), SEP, the k letters twice with no separator. Answer (n, 2k)."""
    if not 2 <= vocab_size <= LETTERS:
        raise ValueError(f"duplicate_string vocab_size must be in [2, {LETTERS}]; got {vocab_size}")
    need("duplicate_string", length, 6)  # k >= 2, as copy
    s = torch.randint(A, A + vocab_size, (n, length // 3), generator=generator)  # (n, k)
    return pack(s, torch.cat([s, s], dim=1), length)


def _nonzero_bits(width: torch.Tensor, cols: int, g: torch.Generator) -> torch.Tensor:
    """(n, cols) little-endian bits of a uniform integer in [1, 2^width - 1] per row (width (n,) >= 1):
    uniform bits below `width`, rows that came out zero drawn again (the authors' random.randint(1, ...))."""
    keep = torch.arange(cols) < width[:, None]  # (n, cols)
    bits = _bits(len(width), cols, g) * keep
    while True:
        zero = bits.sum(dim=1) == 0
        if not zero.any():
            return bits
        bits[zero] = _bits(int(zero.sum()), cols, g) * keep[zero]


def binary_addition(n: int, length: int, generator: torch.Generator) -> Batch:
    """binary_addition (context-sensitive; tasks/cs/binary_addition.py): `a+b` in little-endian binary,
    SEP, a + b in little-endian binary. Prompt P = length // 2 bytes, answer P - 1 bits (n, P - 1).

    Sampled as the authors do: a has la ~ U[1, P - 2] bits, b the other lb = P - 1 - la, each a uniform
    integer in [1, 2^l - 1] written with exactly l bits (high zeros kept). Little-endian (the authors' default,
    least significant bit first) because the answer is generated left to right: bit i of the sum needs only
    bit i of a and b and the carry out of bit i - 1, which the model has just written; big-endian would need
    the carry from bits not yet produced.

    One difference: the authors end the sum with a termination token, pad it with zeros and score only up
    to the terminator; the harness scores every answer byte of a fixed-width answer (one mask shape for all
    tasks), so the sum is zero-extended to P - 1 bits (a + b < 2^(P - 1)) and its high zeros are scored.
    Token accuracy counts those easy zeros; seq_acc (all bits right) is exactly 'the sum is right'."""
    need("binary_addition", length, 6)  # P >= 3: one bit each side of the +
    P = length // 2
    S = P - 1  # sum width; operands have at most P - 2 bits, below S
    la = torch.randint(1, P - 1, (n,), generator=generator)  # (n,) in [1, P - 2]
    a = _nonzero_bits(la, S, generator)  # (n, S) little-endian, zero above la
    b = _nonzero_bits(P - 1 - la, S, generator)
    # ripple-carry addition without a loop: bit j generates a carry (a & b), propagates one (a ^ b), or
    # kills it; the carry into bit i is the generate bit of the last non-propagating bit below i (0 if none)
    gen, prop = a & b, a ^ b  # (n, S)
    cols = torch.arange(S).expand(n, S)
    last = torch.where(prop == 0, cols, -1).cummax(dim=1).values  # (n, S) last non-propagating bit <= i
    below = torch.cat([torch.full((n, 1), -1), last[:, :-1]], dim=1)  # ... < i
    carry = torch.where(below >= 0, gen.gather(1, below.clamp(min=0)), 0)
    total = prop ^ carry  # (n, S) little-endian bits of a + b
    j = torch.arange(P).expand(n, P)  # prompt columns: a's la bits, '+', b's bits
    from_a = a.gather(1, j.clamp(max=S - 1))
    from_b = b.gather(1, (j - la[:, None] - 1).clamp(0, S - 1))
    prompt = torch.where(j < la[:, None], ZERO + from_a, torch.where(j == la[:, None], ord("+"), ZERO + from_b))
    return pack(prompt, ZERO + total, length)


TASKS: Dict[str, Callable[..., Batch]] = {
    "parity": parity, "even_pairs": even_pairs, "modular_arithmetic": modular_arithmetic,
    "duplicate_string": duplicate_string, "binary_addition": binary_addition,
}
