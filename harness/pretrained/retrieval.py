"""Retrieval on a pretrained model over a grid of lengths x depths: a needle hidden at a depth of a haystack, then
asked for, scored by teacher forcing on the answer's own tokens.

Needles (`NEEDLES`):
- passkey: Mohtashami & Jaggi 2023 (arXiv 2305.16300, their Appendix prompt): a 5-digit key in repeated filler.
- single / multikey: RULER's niah_single_2 and niah_multikey_1 (Hsieh et al. 2024, arXiv 2404.06654, their
  Table 2 templates): "One of the special magic numbers for <word> is: <7 digits>." in prose (the corpus's text,
  as RULER's essays), asked for by its word; multikey adds three distractor needles with other words.

Scoring: one forward of prompt + answer[:-1]; `acc` is 1 when the argmax at every answer position is the answer's
token (what greedy decoding of the answer's canonical tokens gives: a greedy continuation that spells the same
digits in other tokens counts as a miss), `answer_nll` the answer's summed NLL in nats (continuous, paired across
variants on the same prompts).

Shared work: samples whose prompts start alike (every prompt starts with the intro and the haystack's start) reuse
the KV cache of their common prefix when it is longer than the rest of the prompt (`Scorer.score` says why), in an
order that makes neighbours share the most (lexicographic), when the
variant's frequencies do not depend on the length between the two (dynamic NTK past the trained context does:
those prompts run whole) and the cache is plain (sliding-window caches are not cut: those run whole). Each row
records the tokens it reused (`shared`)."""
import contextlib

import torch

from harness.pretrained import scoring

PASSKEY_INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
                 "I will quiz you about the important information there.\n")
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
RULER_INTRO = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
               "I will quiz you about the numbers afterwards.\n")
# RULER draws its keys from a word list; these are fixed, distinct, single common words
WORDS = ("apple", "river", "candle", "mountain", "violin", "garden", "thunder", "lantern", "harbor", "meadow",
         "copper", "falcon", "orchid", "glacier", "pepper", "saddle", "marble", "compass", "willow", "ember",
         "anchor", "biscuit", "cactus", "dolphin", "feather", "goblet", "hammock", "island", "jasmine", "kettle")
DISTRACTORS = 3  # multikey: other needles in the haystack


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def bos(tok):
    """[BOS id] when the tokenizer adds one by default (its config says so: Gemma), else []."""
    b = getattr(tok, "bos_token_id", None)
    if b is None:
        return []
    return [b] if tok("a", add_special_tokens=True)["input_ids"][:1] == [b] else []


def answer_ids(tok, question, value):
    """The answer's tokens as they follow the question: the question with ' value' tokenized, less the question's
    own tokens (falls back to ' value' alone where the tokenizer merges across the boundary)."""
    q, qa = _ids(tok, question), _ids(tok, f"{question} {value}")
    return qa[len(q):] if qa[:len(q)] == q else _ids(tok, f" {value}")


class Haystack:
    """Tokens to hide needles in, and the positions a needle may go (a sentence's or line's start)."""

    def __init__(self, ids, starts):
        self.ids, self.starts = list(ids), torch.tensor(sorted(starts))

    def at(self, depth, n_fill):
        """The last allowed position <= depth x n_fill."""
        ok = self.starts[self.starts <= round(depth * n_fill)]
        return int(ok[-1]) if ok.numel() else 0


def filler_haystack(tok, n):
    block = _ids(tok, FILLER)
    reps = n // len(block) + 1
    return Haystack(block * reps, range(0, len(block) * reps + 1, len(block)))


def prose_haystack(tok, text_ids, n):
    """The corpus's tokens; a needle goes at a line's start (after a token whose text ends a line)."""
    ids = list(text_ids[:n])
    starts = [0] + [i + 1 for i, t in enumerate(ids) if tok.decode([t]).endswith("\n")]
    return Haystack(ids, starts)


def prompt(tok, needle, length, depth, key, words=(), haystack=None):
    """(ids, answer ids), lists, len(ids) + len(answer) - 1 == length (the scored sequence is `length` tokens, so a
    length-dependent RoPE sees exactly that length): intro, haystack cut to fit with the needle at `depth` (and multikey's
    distractors at depths spread from it), the question. A length the fixed parts do not fit is one ValueError.
    key: the 5-digit passkey, or (word, value) for single/multikey; words: the distractors' (word, value)s."""
    if needle == "passkey":
        intro, q = PASSKEY_INTRO, "What is the pass key? The pass key is"
        inserts = [(depth, f"The pass key is {key}. Remember it. {key} is the pass key.\n")]
        value = key
    else:
        word, value = key
        intro = RULER_INTRO
        q = (f"What is the special magic number for {word} mentioned in the provided text? The special magic "
             f"number for {word} mentioned in the provided text is")
        inserts = [(depth, f"One of the special magic numbers for {word} is: {value}.\n")]
        inserts += [((depth + (i + 1) / (len(words) + 1)) % 1.0, f"One of the special magic numbers for {w} is: "
                     f"{v}.\n") for i, (w, v) in enumerate(words)]
    head, question = bos(tok) + _ids(tok, intro), _ids(tok, "\n" + q)
    needles = [(d, _ids(tok, s)) for d, s in inserts]
    answer = answer_ids(tok, q, value)
    n_fill = length - len(head) - len(question) - sum(len(n) for _, n in needles) - (len(answer) - 1)
    if n_fill < 0:
        raise ValueError(f"retrieval length {length} is shorter than the {needle} prompt's fixed parts "
                         f"({length - n_fill} tokens)")
    hay = haystack if haystack is not None else filler_haystack(tok, n_fill)
    if len(hay.ids) < n_fill:
        raise ValueError(f"the haystack has {len(hay.ids)} tokens, fewer than the {n_fill} length {length} needs")
    cuts = sorted((hay.at(d, n_fill), n) for d, n in needles)
    out, prev = list(head), 0
    for at, n in cuts:
        out += hay.ids[prev:at] + n
        prev = at
    out += hay.ids[prev:n_fill] + question
    return out, answer


def keys(needle, n, seed=0):
    """n keys, seeded (the same for every variant: comparisons are paired on the samples): 5-digit passkeys, or
    (word, 7-digit value) pairs, words cycling through WORDS less the distractors' first DISTRACTORS."""
    g = torch.Generator().manual_seed(seed)
    if needle == "passkey":
        return torch.randint(10_000, 100_000, (n,), generator=g).tolist()
    values = torch.randint(1_000_000, 10_000_000, (n,), generator=g).tolist()
    pool = WORDS[DISTRACTORS:]
    return [(pool[i % len(pool)], v) for i, v in enumerate(values)]


def distractors(needle, seed=0):
    """multikey's other needles: the first DISTRACTORS words with seeded 7-digit values (none for the others)."""
    if needle != "multikey":
        return ()
    g = torch.Generator().manual_seed(10_000 + seed)
    return tuple(zip(WORDS[:DISTRACTORS], torch.randint(1_000_000, 10_000_000, (DISTRACTORS,), generator=g).tolist()))


def _plain(cache):
    """True when every layer of the cache is a plain full-attention DynamicLayer (one we may cut by slicing)."""
    from transformers.cache_utils import DynamicLayer
    return all(type(layer) is DynamicLayer for layer in getattr(cache, "layers", [None]))


def _cut(cache, n):
    for layer in cache.layers:  # keys, values (B, H, T, D): keep the first n positions
        layer.keys, layer.values = layer.keys[..., :n, :], layer.values[..., :n, :]


class Scorer:
    """Scores prompts in turn, reusing the cached prefix the current prompt shares with the previous one when
    `same_frequencies(len_a, len_b)` says the variant rotates both lengths alike; `swap(T)`: the context in which
    the model rotates as the variant does for a sequence of T tokens (harness.pretrained.rotary.swapped)."""

    def __init__(self, model, same_frequencies, swap=contextlib.nullcontext):
        self.model, self.same, self.swap = model, same_frequencies, swap
        self.cache, self.cached, self.cached_len = None, [], 0

    def score(self, ids, answer):
        """(acc 0/1, answer NLL in nats, tokens reused) for one prompt (list) and its answer (list)."""
        seq = ids + answer[:-1]
        n = 0
        if self.cache is not None and self.same(self.cached_len, len(seq)):
            lim = min(len(self.cached), len(ids) - 1)
            a, b = torch.tensor(self.cached[:lim]), torch.tensor(ids[:lim])
            diff = (a != b).nonzero()
            n = int(diff[0]) if diff.numel() else lim
            # the rest's forward over a cached prefix attends through an explicit mask (HF builds one when the queries
            # are fewer than the keys), so it computes the whole (rest x all) rectangle; the whole prompt's causal
            # forward computes a triangle. Reuse pays only when the prefix is longer than the rest.
            n = n if n > len(seq) - n else 0
        x = torch.tensor(seq[n:], device=self.model.device)[None]
        with torch.no_grad(), self.swap(len(seq)):
            if n:
                _cut(self.cache, n)
                out = self.model.model(input_ids=x, past_key_values=self.cache, use_cache=True,
                                       position_ids=torch.arange(n, len(seq), device=x.device)[None])
            else:
                out = self.model.model(input_ids=x, use_cache=True)
            k = len(answer)
            logp = scoring.logits(self.model, out.last_hidden_state[0, -k:]).log_softmax(-1)  # (k, V)
        cache = out.past_key_values
        self.cache = cache if _plain(cache) else None
        self.cached, self.cached_len = seq, len(seq)
        tgt = torch.tensor(answer, device=logp.device)
        nll = -logp.gather(1, tgt[:, None])[:, 0].double().sum().item()
        return float(bool((logp.argmax(-1) == tgt).all())), nll, n
