"""Passkey retrieval on a pretrained model (Mohtashami & Jaggi 2023, arXiv 2305.16300, Appendix: the prompt of their
passkey task): a random 5-digit key stated once at a depth of L tokens of repeated filler, then asked for; scored by
greedy decoding with the KV cache (never a T x vocab logits tensor: only the last position goes through the head)."""
import torch

from harness.pretrained import scoring

INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
         "I will quiz you about the important information there.\n")
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key.\n"
QUESTION = "What is the pass key? The pass key is"
NEW_TOKENS = 8  # a 5-digit key is at most 5 tokens in every tokenizer here; room for a leading space


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def prompt(tok, length, depth, key):
    """ids (length,) int64: intro, filler cut to fit, the needle after round(depth x filler) tokens (at a filler
    sentence's start), the question. A length the fixed parts do not fit is one ValueError."""
    intro, needle, question = _ids(tok, INTRO), _ids(tok, NEEDLE.format(key=key)), _ids(tok, QUESTION)
    block = _ids(tok, FILLER)
    n_fill = length - len(intro) - len(needle) - len(question)
    if n_fill < 0:
        raise ValueError(f"passkey length {length} is shorter than the prompt's fixed parts "
                         f"({length - n_fill} tokens)")
    filler = (block * (n_fill // len(block) + 1))[:n_fill]
    at = min(n_fill, round(depth * n_fill / len(block)) * len(block))  # a whole number of filler blocks
    ids = intro + filler[:at] + needle + filler[at:] + question
    return torch.tensor(ids, dtype=torch.int64)


def greedy(model, ids, new_tokens=NEW_TOKENS):
    """The greedy continuation (new_tokens,) of ids (T,): one prefill into HF's KV cache, then one token a step."""
    with torch.no_grad():
        out = model.model(input_ids=ids[None], use_cache=True)
        nxt = scoring.logits(model, out.last_hidden_state[0, -1:]).argmax(-1)  # (1,)
        got, cache = [nxt], out.past_key_values
        for _ in range(new_tokens - 1):
            out = model.model(input_ids=nxt[None], past_key_values=cache, use_cache=True)
            nxt, cache = scoring.logits(model, out.last_hidden_state[0, -1:]).argmax(-1), out.past_key_values
            got.append(nxt)
    return torch.cat(got)


def found(tok, continuation, key):
    """1.0 when the decoded continuation states the key (its digits, as a whole number), else 0.0."""
    text = tok.decode(continuation.tolist())
    digits = "".join(c if c.isdigit() else " " for c in text).split()
    return float(bool(digits) and digits[0] == str(key))


def keys(n, seed=0):
    """n random 5-digit keys, seeded (the same for every variant: comparisons are paired on the samples)."""
    return torch.randint(10_000, 100_000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()
