"""One pretrained-model job -> measurement dicts (harness.runner writes them as rows).

Windows: the corpus split's text (UTF-8), tokenized by the checkpoint's tokenizer without special tokens, cut into
`windows` consecutive nonoverlapping windows of max(lens) tokens from the split's start. The unit of variation is
the window, so rows carry the window's index in `seed` and every comparison is paired on the same windows. A
window's first L tokens are its length-L window: with causal attention their scores do not depend on what
follows, so one forward of the longest length serves every shorter one, except where the variant's frequencies
depend on the length (dynamic NTK past the trained context): lengths are grouped by identical frequencies and
each group is one forward at its longest length (tests/test_pretrained.py checks both).

- `study=lm`: per (window, length) `bpb` (bits per byte of the scored targets' text: comparable across tokenizers)
  and `ppl` (per token); `nll_by_pos` per `bucket` of positions at the longest length; `eval_tokens_per_s` of each
  forward, and `flops_ratio`: its useful FLOP/s over an fp32 matmul's in the same process (harness.pretrained.speed).
  With the checkpoint's own RoPE (`none`), also transformers' unmodified forward at `reference_len` (rows with
  rope_impl 'transformers'): the check that the swap is the model.
- `study=retrieval`: per (length, sample) `acc` (exact match of the answer, 0/1) and `answer_nll` (nats) of one
  needle task (harness.pretrained.retrieval: passkey, RULER's single and multikey), sample i at depth
  depths[i % len(depths)], the same keys for every variant (`seed` = sample).

Windows and prompts start with the BOS token where the tokenizer adds one by default (Gemma); rows record the
corpus's and the checkpoint's sha256 (the stdlib corpus is this Python's own source: it changes with the version).
- `study=precision`: the RoPE stages in each precision pipeline (conf/precision/) against the fp32 pipeline on
  the same windows, the rest of the model in fp32: `kl_fp32` per log window of positions (as
  harness.measure.precision_model), `ppl_gap` per length, `kl_safe_len` (the end of the last log window up to
  which every window's mean KL is at most `kl_bar`).
"""
import math
import time

import torch

from harness.tasks import data
from harness.measure import precision_pipelines as pp
from harness.pretrained import checkpoint, retrieval, rotary, scoring, speed, variants

LN2 = math.log(2.0)


def tokens(tok, corpus, split, need):
    """(ids (N,) int64, ends (N,) int64): token ids of the split's text and each token's end as a byte offset,
    tokenizing at most about 8 bytes per needed token of the split's start."""
    raw = bytes(data.split(data.load_corpus(corpus).data)[split].numpy())
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"corpus {corpus!r} split {split!r} is not UTF-8 text at byte {e.start}; the pretrained "
                         f"study scores text through the model's tokenizer") from None
    text = text[: 8 * need]
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ends_char = [e for _, e in enc["offset_mapping"]]
    # char offset -> byte offset, via the UTF-8 length of each prefix (one pass)
    byte_at = [0] * (len(text) + 1)
    for i, ch in enumerate(text):
        byte_at[i + 1] = byte_at[i] + len(ch.encode("utf-8"))
    return torch.tensor(enc["input_ids"], dtype=torch.int64), torch.tensor([byte_at[e] for e in ends_char])


def windows(ids, ends, n, length, bos=()):
    """[(ids (length,), target bytes (length - 1,))]: each target's own text in bytes, from the previous token's end
    (so the spaces and bytes between tokens are counted once), for n consecutive windows. With `bos` ([id]) each
    window is the BOS token and length - 1 text tokens, every text token a target."""
    text = length - len(bos)
    if ids.numel() < n * text + 1:
        raise ValueError(f"the split has {ids.numel()} tokens in its tokenized start, fewer than {n} windows x "
                         f"{length}; lower pretrained.windows or the longest of pretrained.lens")
    out, b = [], torch.tensor(list(bos), dtype=ids.dtype)
    for w in range(n):
        a = w * text
        if bos:  # targets a .. a+text-1; token a's text starts at the previous token's end (0 at the split's start)
            prev = torch.cat([ends[a - 1:a] if a else torch.zeros(1, dtype=ends.dtype), ends[a:a + text - 1]])
            out.append((torch.cat([b, ids[a:a + text]]), (ends[a:a + text] - prev).double()))
        else:
            out.append((ids[a:a + length], (ends[a + 1:a + length] - ends[a:a + length - 1]).double()))
    return out


def groups(encoding, lens):
    """[(forward length, [lengths])]: lengths whose frequencies (every layer type's) equal the longest one's share
    its forward."""
    encs = list(encoding.values()) if isinstance(encoding, dict) else [encoding]
    out = []
    for L in sorted(lens, reverse=True):
        f = [e.frequencies(L) for e in encs]
        for g in out:
            if all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(g[2], f)):
                g[1].append(L)
                break
        else:
            out.append((L, [L], f))
    return [(M, sorted(Ls)) for M, Ls, _ in reversed(out)]


def _m(metric, value, unit, eval_len, protocol, window, **params):
    return dict(metric=metric, value=float(value), unit=unit, eval_len=eval_len, protocol=protocol, seed=window,
                extra_params=params)


def lm_rows(model, encoding, wins, lens, *, bucket, chunk, impl, reference_len, progress):
    rows, longest, hf = [], max(lens), model.config.to_dict()
    peak = speed.yardstick(hf["hidden_size"], hf["intermediate_size"])
    for w, (ids, nbytes) in enumerate(wins):
        for M, Ls in groups(encoding, lens):
            t = time.perf_counter()
            with rotary.swapped(model, encoding, impl=impl, length=M):
                nll = scoring.token_nll(model, ids[:M], chunk)  # (M-1,)
            dt = time.perf_counter() - t
            rows.append(_m("eval_tokens_per_s", M / dt, "tokens/s", M, "eval", w, rope_impl="harness"))
            rows.append(_m("flops_ratio", speed.forward_flops(hf, M, head=M - 1) / dt / peak, "ratio", M, "eval", w,
                           rope_impl="harness", yardstick_flops=peak))
            if progress:
                print(f"  window {w} forward {M}: {time.perf_counter() - t:.1f}s", flush=True)
            for L in Ls:
                rows += _scores(nll[:L - 1], nbytes[:L - 1], L, w, rope_impl="harness")
            if M == longest:
                for lo in range(0, M - 1, bucket):
                    rows.append(_m("nll_by_pos", nll[lo:lo + bucket].mean(), "nats", M, "nonoverlapping", w,
                                   pos_lo=lo + 1, pos_hi=min(lo + bucket, M - 1) + 1, rope_impl="harness"))
        if reference_len:  # transformers' own forward, no swap (the caller passes it for `none` only)
            nll = scoring.token_nll(model, ids[:reference_len], chunk)
            rows += _scores(nll, nbytes[:reference_len - 1], reference_len, w, rope_impl="transformers")
    return rows


def _scores(nll, nbytes, L, w, **params):
    return [_m("bpb", nll.sum() / LN2 / nbytes.sum(), "bits/byte", L, "nonoverlapping", w, **params),
            _m("ppl", nll.mean().exp(), "ppl", L, "nonoverlapping", w, **params)]


def precision_rows(model, encoding, wins, lens, pipelines, *, chunk, impl, kl_bar, progress):
    rows, longest = [], max(lens)
    edges = pp.windows(longest - 1)  # log windows of target positions [0, 16), [16, 32), ...
    for w, (ids, _) in enumerate(wins):
        with rotary.swapped(model, encoding, impl=impl):
            h_ref = scoring.hidden(model, ids)
        for name in pipelines:
            t = time.perf_counter()
            with rotary.swapped(model, encoding, name, impl=impl):
                h_low = scoring.hidden(model, ids)
            kl, ref, low = scoring.token_kl(model, ids, h_ref, h_low, chunk)  # (T-1,) each
            if progress:
                print(f"  window {w} pipeline {name}: {time.perf_counter() - t:.1f}s", flush=True)
            p = pp.resolve(name)
            knobs = dict(pipeline=name, **p.dtypes())
            safe = 0
            for lo, hi in zip(edges[:-1], edges[1:]):
                m = kl[lo:hi].mean()
                rows.append(_m("kl_fp32", m, "nats", hi, "rope_pipeline", w, pos_lo=lo, **knobs))
                safe = hi if m <= kl_bar and safe == lo else safe
            rows.append(_m("kl_safe_len", safe, "tokens", longest, "rope_pipeline", w, bar=kl_bar, **knobs))
            for L in lens:
                gap = low[:L - 1].mean().exp() - ref[:L - 1].mean().exp()
                rows.append(_m("ppl_gap", gap, "ppl", L, "rope_pipeline", w, **knobs))
    return rows


def same_frequencies(encoding):
    """(len_a, len_b) -> True when every layer type's frequencies at the two lengths are equal (a cached prefix of
    one is then the other's prefix too)."""
    encs = list(encoding.values()) if isinstance(encoding, dict) else [encoding]

    def same(a, b):
        return all(torch.equal(x[0], y[0]) and x[1] == y[1]
                   for x, y in ((e.frequencies(a), e.frequencies(b)) for e in encs))
    return same


def retrieval_rows(model, tok, encoding, lens, pre, prose, *, progress):
    """acc and answer_nll per (length, sample): sample i at depth depths[i % len(depths)], key i (the same for
    every variant); prompts run in an order that lets neighbours share their prefix's work."""
    ks, others = retrieval.keys(pre.needle, pre.samples), retrieval.distractors(pre.needle)
    hay = None if pre.needle == "passkey" else retrieval.prose_haystack(tok, prose, max(lens))
    order = {L: g for g, (_, Ls) in enumerate(groups(encoding, lens)) for L in Ls}
    jobs = []
    for L in lens:
        for i, key in enumerate(ks):
            depth = pre.depths[i % len(pre.depths)]
            ids, ans = retrieval.prompt(tok, pre.needle, L, depth, key, others, hay)
            jobs.append((order[L], ids, ans, L, i, depth))
    jobs.sort(key=lambda j: (j[0], j[1]))
    scorer = retrieval.Scorer(model, same_frequencies(encoding),
                              lambda T: rotary.swapped(model, encoding, impl=pre.impl, length=T))
    rows, t0 = [], time.perf_counter()
    for k, (_, ids, ans, L, i, depth) in enumerate(jobs):
        t = time.perf_counter()
        acc, nll, shared = scorer.score(ids, ans)
        if progress:
            print(f"  {pre.needle} {L} depth {depth:.3f} sample {i}: {acc:.0f} nll {nll:.2f} (reused {shared}, "
                  f"{time.perf_counter() - t:.1f}s; {k + 1}/{len(jobs)} at {time.perf_counter() - t0:.0f}s)", flush=True)
        extra = dict(depth=depth, needle=pre.needle, shared=shared)
        rows += [_m("acc", acc, "frac", L, "retrieval", i, **extra),
                 _m("answer_nll", nll, "nats", L, "retrieval", i, **extra)]
    return rows


def lengths(pre, hf):
    """(lengths, reference length): pre.lens, or pre.multiples x the checkpoint's trained context; reference_len
    must be one of them (None: the shortest; 0: none)."""
    lens = sorted(set(pre.lens if pre.lens is not None else
                      [int(round(m * variants.trained_len(hf))) for m in pre.multiples]))
    if pre.reference_len and pre.reference_len not in lens:
        raise ValueError(f"pretrained.reference_len {pre.reference_len} must be one of the lengths {lens} (or 0)")
    if lens[0] < 2:
        raise ValueError(f"pretrained lengths {lens}: every length must be at least 2 tokens")
    return lens, lens[0] if pre.reference_len is None else pre.reference_len


def check(pre):
    """What the job would refuse, before any work: the checkpoint's file, the variant, the pipelines, lengths."""
    checkpoint.check_files(checkpoint.locate(pre.name, pre.path))
    variants.check(pre.extension, pre.layers)
    for name in pre.pipelines:
        pp.resolve(name)
    data.check_corpus(pre.corpus)
    from harness.pretrained.proxy import target_config
    lengths(pre, target_config(pre.path or pre.name))


def rows(pre, progress=True, device="cpu"):
    """(measurement dicts, the model's row fields) for one PretrainedConfig, the model on `device`."""
    model, tok = checkpoint.load(checkpoint.locate(pre.name, pre.path))
    model.to(device)
    hf = model.config.to_dict()
    encoding, params = variants.build(hf, pre.extension, pre.factor, pre.impl, pre.layers)
    lens, reference = lengths(pre, hf)
    longest = max(lens)
    if pre.study == "retrieval":
        prose = [] if pre.needle == "passkey" else tokens(tok, pre.corpus, pre.split, longest)[0].tolist()
        out = retrieval_rows(model, tok, encoding, lens, pre, prose, progress=progress)
    else:
        ids, ends = tokens(tok, pre.corpus, pre.split, pre.windows * longest)
        wins = [(w.to(device), b) for w, b in windows(ids, ends, pre.windows, longest, retrieval.bos(tok))]
    if pre.study == "lm":
        out = lm_rows(model, encoding, wins, lens, bucket=pre.bucket, chunk=pre.chunk, impl=pre.impl,
                      reference_len=reference if pre.extension == "none" else 0, progress=progress)
    elif pre.study == "precision":
        out = precision_rows(model, encoding, wins, lens, pre.pipelines, chunk=pre.chunk, impl=pre.impl,
                             kl_bar=pre.kl_bar, progress=progress)
    c = model.config
    fields = dict(model=checkpoint.label(pre.name, pre.path), d_model=c.hidden_size, n_layers=c.num_hidden_layers,
                  n_heads=c.num_attention_heads, head_dim=params["head_dim"], train_len=variants.trained_len(hf),
                  encoding=params["encoding"])
    common = {k: v for k, v in params.items() if k not in ("encoding",)}
    common.update(pretrained=pre.name, corpus=pre.corpus, split=pre.split, windows=pre.windows,
                  attention=c._attn_implementation,
                  corpus_sha256=data.load_corpus(pre.corpus).sha256,
                  checkpoint_sha256=checkpoint.sha256(checkpoint.locate(pre.name, pre.path)))
    for r in out:
        r["extra_params"] = {**common, **r["extra_params"]}
    return out, fields
