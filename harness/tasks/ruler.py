"""Mini-RULER: byte-level versions of RULER's synthetic tasks (Hsieh et al., "RULER: What's the real context
size of your long-context language models?", COLM 2024; github.com/NVIDIA/RULER, scripts/data/synthetic/niah.py,
variable_tracking.py, common_words_extraction.py, freq_words_extraction.py) as seeded generators with
harness.tasks.synthetic's contract: fn(n, length, generator, **params) -> Batch holding [PAD]* prompt SEP answer.

RULER's templates are English prose sized for 4k-128k-token models; these are compact so that a 64-byte training
length holds every task with its defaults, and the problem grows with `length` (more haystack, more words), so
an evaluation at 16x the training length scales the context as RULER does. Markers KEY (2) and SEP (1) are
control bytes; haystacks are printable ASCII without digits; keys and variable names are letters a-z, values
digits, so no needle can be confused with filler. An answer with several references joins them with ',' (never
inside a reference), which Batch.sep records for string_match (RULER's scoring)."""
import functools
from pathlib import Path
from typing import Optional, Tuple

import torch
from scipy.special import zeta

from harness.tasks.sequences import A, DIGITS, FILLERS, KEY, LETTERS, PAD, SEP, ZERO, Batch, landmark_filler, need, pack

COMMA, EQ, SPACE = ord(","), ord("="), ord(" ")
HAYSTACKS = ("repeat", "kjv")
WORDS_FILE = Path(__file__).with_name("ruler_words.txt")
TOP = 3  # fwe answers the 3 most frequent words (RULER's freq_words_extraction)
assert PAD < SEP < KEY < SPACE  # the markers are control bytes, below every haystack byte

# kjv bytes -> haystack bytes: control bytes (its newlines), non-ASCII (the UTF-8 of its curly apostrophe and
# ligatures, about 0.1% of the text) and digits (it has none) become spaces: printable ASCII with no digit
_PRINTABLE = torch.arange(256)
_PRINTABLE[:SPACE] = SPACE
_PRINTABLE[127:] = SPACE
_PRINTABLE[ZERO:ZERO + DIGITS] = SPACE


def _haystack(task: str, name: str, n: int, f: int, g: torch.Generator) -> torch.Tensor:
    """(n, f) filler bytes: 'repeat' = the landmark sentences (RULER's `noise` haystack, the same for every
    sequence), 'kjv' = a random slice of the King James text per sequence (RULER's `essay`, real prose)."""
    if name == "repeat":
        return landmark_filler(n, f, g)
    return _PRINTABLE[FILLERS["kjv"](n, f, g)]


def _check(task: str, haystack: Optional[str] = None, depth: Optional[float] = None, **positive: int):
    if haystack is not None and haystack not in HAYSTACKS:
        raise ValueError(f"{task} haystack must be one of {list(HAYSTACKS)}; got {haystack!r}")
    if depth is not None and not 0.0 <= depth <= 1.0:
        raise ValueError(f"{task} depth must be in [0, 1] or None (uniform per sequence); got {depth}")
    for k, v in positive.items():
        if int(v) != v or v < 1:
            raise ValueError(f"{task} {k} must be an integer >= 1; got {v}")


def _distinct(task: str, n: int, k: int, space: int, g: torch.Generator) -> torch.Tensor:
    """(n, k) ids in [0, space), distinct within each row, uniform over such rows: draw all, then redraw each
    entry that repeats an earlier one (the procedure commutes with relabelling the space, hence uniform)."""
    if k > space:
        raise ValueError(f"{task} needs {k} distinct items per sequence but only {space} exist")
    ids = torch.randint(0, space, (n, k), generator=g)
    while True:
        s, i = ids.sort(dim=1, stable=True)
        dup = torch.zeros_like(ids, dtype=torch.bool).scatter_(1, i[:, 1:], s[:, 1:] == s[:, :-1])
        count = int(dup.sum())
        if not count:
            return ids
        ids[dup] = torch.randint(0, space, (count,), generator=g)


def _spell(ids: torch.Tensor, width: int, base: int = LETTERS, zero: int = A) -> torch.Tensor:
    """ids (...) -> (..., width) bytes, most significant first: letters (base 26) or digits (base 10)."""
    return torch.stack([(ids // base ** i) % base for i in reversed(range(width))], dim=-1) + zero


def _digits(ids: torch.Tensor, width: int) -> torch.Tensor:
    return _spell(ids, width, DIGITS, ZERO)


def _col(n: int, byte: int, *lead: int) -> torch.Tensor:
    return torch.full((n, *lead, 1), byte)


def _join(items: torch.Tensor, sep: int) -> torch.Tensor:
    """items (n, k, w) -> (n, k * (w + 1) - 1): the k items separated by byte sep."""
    n, k, w = items.shape
    return torch.cat([items, _col(n, sep, k)], dim=-1).reshape(n, k * (w + 1))[:, :-1]


def _insert(text: torch.Tensor, blocks: torch.Tensor, at: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Insert blocks (n, m, b) into text (n, f), block j after at[:, j] text bytes (at (n, m) in [0, f]; ties
    keep block order). Returns the prompt (n, f + m * b) and order (n, m): order[:, r] is the r-th block."""
    n, m, b = blocks.shape
    off, order = at.sort(dim=1, stable=True)
    start = off + torch.arange(m) * b  # (n, m) where the r-th block begins in the prompt
    idx = (start[..., None] + torch.arange(b)).reshape(n, m * b)
    out = torch.zeros(n, text.shape[1] + m * b, dtype=torch.long)
    out.scatter_(1, idx, blocks.gather(1, order[..., None].expand(n, m, b)).reshape(n, m * b))
    is_block = torch.zeros_like(out, dtype=torch.bool).scatter_(1, idx, True)
    out[~is_block] = text.reshape(-1)  # row-major: each row's f free places take its text in order
    return out, order


def _batch(prompt: torch.Tensor, answer: torch.Tensor, length: int) -> Batch:
    b = pack(prompt, answer, length)
    b.sep = COMMA
    return b


def _niah(task, n, length, g, *, num_keys=1, num_values=1, num_queries=1, depth, haystack, key_len, value_len):
    """RULER's NIAH family (niah.py): needles `KEY key=value` (key_len letters, value_len digits; keys distinct,
    values distinct) hidden at byte offsets of the haystack; the prompt ends with the question `KEY k_1,..,k_q`
    (the first num_queries keys, in that order), the answer is each queried key's values in context order,
    ','-joined. Needle 0 (key 0, the first queried, and its first drawn value) sits after round(depth * f)
    haystack bytes (depth None: uniform per sequence); the others at uniform offsets."""
    _check(task, haystack, depth, num_keys=num_keys, num_values=num_values, num_queries=num_queries,
           key_len=key_len, value_len=value_len)
    if num_queries > num_keys:
        raise ValueError(f"{task} num_queries must be <= num_keys = {num_keys}; got {num_queries}")
    m, nb = num_keys * num_values, key_len + value_len + 2
    q_len, K = num_queries * (key_len + 1), num_queries * num_values * (value_len + 1) - 1
    need(task, length, m * nb + q_len + K + 1)  # T + 1 = f + m * nb + q_len + 1 + K with f >= 1
    f = length - m * nb - q_len - K
    text = _haystack(task, haystack, n, f, g)  # (n, f)
    keys = _spell(_distinct(task, n, num_keys, LETTERS ** key_len, g), key_len)  # (n, k, key_len)
    values = _digits(_distinct(task, n, m, DIGITS ** value_len, g), value_len)  # (n, m, value_len)
    d = torch.rand(n, generator=g) if depth is None else torch.full((n,), float(depth))
    at = torch.cat([(d * f).round().long()[:, None], torch.randint(0, f + 1, (n, m - 1), generator=g)], dim=1)
    needles = torch.cat([_col(n, KEY, m), keys.repeat_interleave(num_values, dim=1), _col(n, EQ, m), values], -1)
    prompt, order = _insert(text, needles, at)  # needle j = (key j // num_values, value j)
    rank = order.argsort(dim=1).view(n, num_keys, num_values)  # context rank of each needle
    by_key = values.view(n, num_keys, num_values, value_len)
    by_key = by_key.gather(2, rank.argsort(dim=2)[..., None].expand_as(by_key))  # each key's values, in context order
    question = torch.cat([_col(n, KEY), _join(keys[:, :num_queries], COMMA)], dim=1)
    answer = _join(by_key[:, :num_queries].reshape(n, num_queries * num_values, value_len), COMMA)
    return _batch(torch.cat([prompt, question], dim=1), answer, length)


def niah_single(n: int, length: int, generator: torch.Generator, *, depth: Optional[float] = None,
                haystack: str = "repeat", key_len: int = 3, value_len: int = 4) -> Batch:
    """One needle `KEY key=value`, question `KEY key`, answer `value` (RULER niah_single_1/2). Minimal length
    key_len + value_len + 2 + (key_len + 1) + value_len + 1 = 18 with the defaults."""
    return _niah("niah_single", n, length, generator, depth=depth, haystack=haystack, key_len=key_len,
                 value_len=value_len)


def niah_multikey(n: int, length: int, generator: torch.Generator, *, depth: Optional[float] = None,
                  haystack: str = "repeat", num_keys: int = 4, key_len: int = 3, value_len: int = 4) -> Batch:
    """num_keys needles with distinct keys (the others are distractors), one queried (RULER niah_multikey_1,
    4 keys). Minimal length 45 with the defaults."""
    return _niah("niah_multikey", n, length, generator, num_keys=num_keys, depth=depth, haystack=haystack,
                 key_len=key_len, value_len=value_len)


def niah_multivalue(n: int, length: int, generator: torch.Generator, *, depth: Optional[float] = None,
                    haystack: str = "repeat", num_values: int = 4, key_len: int = 3, value_len: int = 4) -> Batch:
    """num_values needles of one key with distinct values; answer all values in context order (RULER
    niah_multivalue, 4 values). Minimal length 60 with the defaults."""
    return _niah("niah_multivalue", n, length, generator, num_values=num_values, depth=depth, haystack=haystack,
                 key_len=key_len, value_len=value_len)


def niah_multiquery(n: int, length: int, generator: torch.Generator, *, depth: Optional[float] = None,
                    haystack: str = "repeat", num_keys: int = 4, num_queries: int = 2, key_len: int = 3,
                    value_len: int = 4) -> Batch:
    """num_keys needles with distinct keys; the question lists num_queries of them, the answer their values
    in the question's order (RULER niah_multiquery asks 4 of 4). Minimal length 54 with the defaults."""
    return _niah("niah_multiquery", n, length, generator, num_keys=num_keys, num_queries=num_queries, depth=depth,
                 haystack=haystack, key_len=key_len, value_len=value_len)


def vt(n: int, length: int, generator: torch.Generator, *, num_chains: int = 1, num_hops: int = 4,
       name_len: int = 2, haystack: str = "repeat") -> Batch:
    """Variable tracking (RULER variable_tracking.py, 1 chain of 4 hops by default): per chain the statements
    `KEY x0=ddd`, `KEY x1=x0`, .., `KEY xh=x(h-1)` (names: name_len letters, distinct in a sequence; values:
    name_len digits, distinct across chains, so every statement has 2 * name_len + 2 bytes) at haystack offsets
    uniform over those before a non-letter (word boundaries: no letter runs on after a name), each chain in
    order; question `KEY ddd` (chain 0's value), answer x0,x1,..,xh.
    Minimal length 48 with the defaults."""
    _check("vt", haystack, None, num_chains=num_chains, num_hops=num_hops, name_len=name_len)
    C, h, w = num_chains, num_hops, name_len
    m, nb, K = C * (h + 1), 2 * w + 2, (h + 1) * (w + 1) - 1
    need("vt", length, m * nb + (1 + w) + K + 1)  # T + 1 = f + m * nb + (1 + w) + 1 + K with f >= 1
    f = length - m * nb - (1 + w) - K
    text = _haystack("vt", haystack, n, f, generator)
    names = _spell(_distinct("vt", n, m, LETTERS ** w, generator), w).view(n, C, h + 1, w)
    values = _digits(_distinct("vt", n, C, DIGITS ** w, generator), w)  # (n, C, w)
    rhs = torch.cat([values[:, :, None], names[:, :, :-1]], dim=2)  # (n, C, h + 1, w)
    stmts = torch.cat([_col(n, KEY, C, h + 1), names, _col(n, EQ, C, h + 1), rhs], dim=-1).view(n, m, nb)
    # offsets before a non-letter (or at the end): a name is never followed by a letter, so it ends where it ends
    free = torch.cat([((text | 32) < A) | ((text | 32) >= A + LETTERS), torch.ones(n, 1, dtype=torch.bool)], 1)
    at = torch.multinomial(free.float(), m, replacement=True, generator=generator)  # (n, m) uniform over free
    at = at.view(n, C, h + 1).sort(dim=-1).values.view(n, m)  # each chain in order
    prompt, _ = _insert(text, stmts, at)
    question = torch.cat([_col(n, KEY), values[:, 0]], dim=1)
    return _batch(torch.cat([prompt, question], dim=1), _join(names[:, 0], COMMA), length)


@functools.lru_cache(maxsize=None)
def _words(word_len: int) -> torch.Tensor:
    """(V, word_len) bytes: the words of ruler_words.txt with word_len letters, in file order."""
    lines = [ln.strip() for ln in WORDS_FILE.read_text().splitlines() if not ln.startswith("#")]
    words = [w for w in dict.fromkeys(lines) if w.isascii() and w.isalpha() and w.islower()]
    lens = sorted({len(w) for w in words})
    if word_len not in lens:
        raise ValueError(f"cwe word_len must be one of {lens} (the word lengths in {WORDS_FILE.name}); got {word_len}")
    return torch.tensor([list(w.encode()) for w in words if len(w) == word_len])


def _shuffled(n: int, counts: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """(n, sum(counts)) item indices: item i counts[i] times, in a random order per row."""
    slots = torch.repeat_interleave(torch.arange(len(counts)), counts)
    return slots[torch.rand(n, len(slots), generator=g).argsort(dim=1)]


def _text(vocab: torch.Tensor, seq: torch.Tensor) -> torch.Tensor:
    """vocab (n, D, w) words, seq (n, N) indices -> (n, N * (w + 1) - 1) the words separated by spaces."""
    return _join(vocab.gather(1, seq[..., None].expand(-1, -1, vocab.shape[2])), SPACE)


def cwe(n: int, length: int, generator: torch.Generator, *, num_cw: int = 2, freq_cw: int = 3, freq_ucw: int = 1,
        word_len: int = 4) -> Batch:
    """Common words extraction (RULER common_words_extraction.py: 10 words x 30 among others x 3; 6 vs 1 for
    short contexts): distinct words of word_len letters from ruler_words.txt separated by spaces, num_cw of them
    freq_cw times each and as many others freq_ucw times as the length holds, shuffled; answer the num_cw
    common words in order of first appearance, ','-joined. One word length per task keeps the answer's size
    fixed. Minimal length (num_cw * freq_cw + freq_ucw) * (word_len + 1) - 1 + answer = 43 with the defaults."""
    _check("cwe", None, None, num_cw=num_cw, freq_cw=freq_cw, freq_ucw=freq_ucw, word_len=word_len)
    if freq_cw <= freq_ucw:
        raise ValueError(f"cwe freq_cw must be > freq_ucw = {freq_ucw} (common words strictly more frequent); "
                         f"got {freq_cw}")
    words, w, K = _words(word_len), word_len, num_cw * (word_len + 1) - 1
    need("cwe", length, (num_cw * freq_cw + freq_ucw) * (w + 1) - 1 + K)
    n_words = (length - K + 1) // (w + 1)  # T + 1 >= n_words * (w + 1) - 1 + 1 + K
    n_ucw = (n_words - num_cw * freq_cw) // freq_ucw
    if num_cw + n_ucw > len(words):
        raise ValueError(f"cwe at length {length} needs {num_cw + n_ucw} distinct words of {w} letters; "
                         f"{WORDS_FILE.name} has {len(words)}: use a larger freq_ucw or another word_len")
    ids = _distinct("cwe", n, num_cw + n_ucw, len(words), generator)  # (n, D): the first num_cw are common
    seq = _shuffled(n, torch.tensor([freq_cw] * num_cw + [freq_ucw] * n_ucw), generator)  # (n, N)
    vocab = words[ids]  # (n, D, w)
    first = torch.stack([(seq == c).int().argmax(dim=1) for c in range(num_cw)], dim=1)  # (n, num_cw)
    common = vocab[:, :num_cw].gather(1, first.argsort(dim=1)[..., None].expand(-1, -1, w))
    return _batch(_text(vocab, seq), _join(common, COMMA), length)


def zipf_counts(n_words: int, alpha: float) -> list:
    """Word counts summing to n_words, most frequent first: RULER's floor(n_words * k^-alpha / zeta(alpha)) for
    rank k (freq_words_extraction.py), then the top 3 raised where needed to exceed the 4th and 1 strictly (no
    ties), the tail trimmed from its rarest words (then the first count) to fit, the rest filled with words
    seen once (the Zipf tail whose expected count is below 1). Needs n_words >= 9 (counts 4, 3, 2)."""
    z = float(zeta(alpha))
    c = [x for x in (int(n_words * k ** -alpha / z) for k in range(1, n_words + 1)) if x > 0]
    head, tail = (c + [0] * TOP)[:TOP], c[TOP:]
    nxt = max(tail[:1] + [1])
    for r in reversed(range(TOP)):
        head[r] = nxt = max(head[r], nxt + 1)
    while tail and sum(head) + sum(tail) > n_words:
        tail[-1] -= 1
        tail = tail if tail[-1] else tail[:-1]
    head[0] -= max(0, sum(head) - n_words)
    assert head[0] > head[1], (n_words, alpha, head)
    return head + tail + [1] * (n_words - sum(head) - sum(tail))


def fwe(n: int, length: int, generator: torch.Generator, *, alpha: float = 2.0, word_len: int = 3) -> Batch:
    """Frequent words extraction (RULER freq_words_extraction.py, alpha 2.0, coded words of 6 letters): random
    distinct letter strings of word_len letters with Zipf counts (zipf_counts), shuffled, separated by spaces;
    answer the 3 most frequent, most frequent first, ','-joined. RULER's noise word '...' (rank 1, ignored)
    is left out. Minimal length 9 * (word_len + 1) - 1 + 3 * (word_len + 1) - 1 = 46 with the defaults."""
    _check("fwe", None, None, word_len=word_len)
    if not alpha > 1.0:
        raise ValueError(f"fwe alpha must be > 1 (zeta(alpha) is finite); got {alpha}")
    w, K = word_len, TOP * (word_len + 1) - 1
    need("fwe", length, 9 * (w + 1) - 1 + K)
    counts = torch.tensor(zipf_counts((length - K + 1) // (w + 1), alpha))
    vocab = _spell(_distinct("fwe", n, len(counts), LETTERS ** w, generator), w)  # (n, D, w), rank order
    seq = _shuffled(n, counts, generator)
    return _batch(_text(vocab, seq), _join(vocab[:, :TOP], COMMA), length)


def string_match(pred: torch.Tensor, answer: torch.Tensor, sep: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """RULER's scoring (scripts/eval/synthetic/constants.py), per sequence: pred (n, K') generated bytes,
    answer (n, K) reference bytes (batch.y[batch.mask].view(n, K)), split on byte sep into references (empty
    pieces dropped). Returns (all, part), each (n,) float: all = fraction of references found as substrings of
    pred (string_match_all), part = 1.0 if any is (string_match_part); case-insensitive, as RULER's .lower()."""
    out_all, out_part = [], []
    for p, a in zip(pred.tolist(), answer.tolist()):
        text = bytes(p).lower()
        refs = [r.lower() for r in bytes(a).split(bytes([sep])) if r]
        if not refs:
            raise ValueError(f"string_match: an answer row has no reference between separators {sep!r}")
        hits = [r in text for r in refs]
        out_all.append(sum(hits) / len(refs))
        out_part.append(float(any(hits)))
    return torch.tensor(out_all), torch.tensor(out_part)


TASKS = {"niah_single": niah_single, "niah_multikey": niah_multikey, "niah_multivalue": niah_multivalue,
         "niah_multiquery": niah_multiquery, "vt": vt, "cwe": cwe, "fwe": fwe}
