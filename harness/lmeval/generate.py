"""Greedy decoding for HarnessLM.generate_until: with the KV cache (harness.decode: one prefill, then one token per
step) where the model can decode with one and no context must be cut to the LM's max_length; else every step reruns
the still-active sequences. `lm.decode_paths` records which ran (the rows' `decode` param)."""
import torch

from harness import decode


def greedy(lm, jobs):
    """Texts for jobs (context tokens, stop strings, max tokens), each cut before its first stop string."""
    if decode.refusal(lm.model) is None and not any(lm.max_length and len(c) + n > lm.max_length for c, _, n in jobs):
        lm.decode_paths.add("kv_cache")
        gen = [cached(lm, c, until, n) for c, until, n in jobs]
    else:
        lm.decode_paths.add("rerun")
        gen = rerun(lm, jobs)
    texts = []
    for (_, until, _), g in zip(jobs, gen):
        text = lm.tok_decode(g)
        for s in until:
            text = text.split(s)[0] if s else text
        texts.append(text)
    return texts


def _stop(lm, gen, until, n):
    return len(gen) >= n or any(s in lm.tok_decode(gen) for s in until)


@torch.no_grad()
def cached(lm, ctx, until, n):
    """Generated tokens of one context: a prefill into a KV cache, then one token per step."""
    gen = []
    if n <= 0:
        return gen
    cache = decode.KVCache(len(lm.model.blocks))
    logits = decode.step(lm.model, torch.tensor([ctx], device=lm._device), cache)
    while True:
        gen.append(int(logits[0, -1].argmax()))
        if _stop(lm, gen, until, n):
            return gen
        logits = decode.step(lm.model, torch.tensor([gen[-1:]], device=lm._device), cache)


def rerun(lm, jobs):
    """Generated tokens per job without a cache: each step runs the still-active sequences in full."""
    seqs = [list(c) for c, _, _ in jobs]
    gen = [[] for _ in jobs]
    active = [i for i, (_, _, n) in enumerate(jobs) if n > 0]
    while active:
        lp = lm._logprobs([lm._cut(seqs[i]) for i in active])
        for row, i in enumerate(active):
            tok = int(lp[row, len(lm._cut(seqs[i])) - 1].argmax())
            seqs[i].append(tok)
            gen[i].append(tok)
        active = [i for i in active if not _stop(lm, gen[i], jobs[i][1], jobs[i][2])]
    return gen
