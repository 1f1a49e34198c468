"""Length extrapolation: train at train_len, evaluate at every eval_len of `lens`.

lm: PPL and next-byte accuracy over the scored tokens of each window, NLL of the scored tokens at window
positions >= train_len (that cancels the early-token effect: Press et al. 2022, "Train Short, Test Long", §5)
and the mean NLL by window position at every length. Synthetic tasks:
accuracy vs length; a generator that takes `depth` (passkey) is evaluated over (length x depth),
with `protocol` = "depth=<d>". A length the encoding cannot represent (learned table) is a NaN row
whose params carry the reason, never a crash."""
import inspect
import math

import torch
import torch.nn.functional as F
from tqdm import tqdm


def _row(metric, eval_len, protocol, value, unit, **params):
    return dict(metric=metric, eval_len=int(eval_len), protocol=protocol, value=float(value), unit=unit,
                extra_params=params)


def nan_rows(metrics, eval_len, protocol, reason):
    """Rows saying 'not measurable at this length' with the reason (an encoding's own error message)."""
    return [_row(m, eval_len, protocol, math.nan, u, nan_reason=reason) for m, u in metrics]


def _first_scored(mask):
    """The first window position a (1, T) score mask scores (T when it scores none)."""
    hit = mask[0].nonzero()
    return int(hit[0]) if len(hit) else mask.shape[-1]


def _batches(windows, batch_size):
    """Group consecutive (x, y, mask) windows of equal length into (B, T) batches of windows that score from the
    same position: lm_nll computes a batch past the last block's keys and values from its first scored position
    on, so the sliding protocol's first window (it scores all of its tokens) would make its whole batch a full
    forward (16% of the sliding protocol's time over 64-1024 tokens, 19% at 512-1024; model=tiny nope)."""
    buf, first = [], None
    for w in windows:
        f = _first_scored(w[2])
        if buf and (len(buf) == batch_size or f != first):
            yield tuple(torch.cat(t) for t in zip(*buf))
            buf = []
        buf.append(w)
        first = f
    if buf:
        yield tuple(torch.cat(t) for t in zip(*buf))


def _takes_last(model):
    """Whether model(x, last=k) computes only the last k positions (harness.model.Transformer does)."""
    return "last" in inspect.signature(model.forward).parameters


@torch.no_grad()
def lm_nll(model, windows, train_len, batch_size, device):
    """NLL of the scored tokens: (mean, mean at positions >= train_len, n scored, by_pos, byte accuracy) where
    by_pos is (sum, count), each (T,) float64: the summed NLL and the number of scored tokens at each window
    position, and byte accuracy the share of scored tokens whose argmax is the next byte."""
    total, n, beyond, n_beyond, right = 0.0, 0, 0.0, 0, 0  # n: scored tokens (<= eval.max_tokens)
    pos_sum = pos_n = None
    for x, y, mask in _batches(windows, batch_size):
        x, y, mask = x.to(device), y.to(device), mask.to(device)
        T = x.shape[1]
        far = mask.clone()
        far[:, :train_len] = False  # (B, T) scored and beyond the trained length
        # Only the positions some window of the batch scores (a sliding window's last `stride`) are computed
        # past the last block's keys and values; the rows equal the full forward's (tests/test_extrapolation.py)
        scored = mask.any(0).nonzero()
        if not len(scored):
            continue
        first = int(scored[0])
        if first == 0 or not _takes_last(model):  # a model without `last=` (a test's stand-in): all of it
            logits = model(x)[:, first:]
        else:
            logits = model(x, last=T - first)  # (B, T - first, V)
        y, mask, far = y[:, first:], mask[:, first:], far[:, first:]
        nll = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), reduction="none").view_as(y)
        total, n = total + nll[mask].double().sum().item(), n + int(mask.sum())
        beyond, n_beyond = beyond + nll[far].double().sum().item(), n_beyond + int(far.sum())
        right += int(((logits.argmax(-1) == y) & mask).sum())
        s, c = torch.zeros(T, dtype=torch.float64), torch.zeros(T, dtype=torch.float64)  # (T,) each
        s[first:], c[first:] = (nll * mask).double().sum(0).cpu(), mask.double().sum(0).cpu()
        pos_sum, pos_n = (s, c) if pos_sum is None else (pos_sum + s, pos_n + c)
    return (total / max(n, 1), (beyond / n_beyond if n_beyond else math.nan), n, (pos_sum, pos_n),
            right / max(n, 1))


def by_position_rows(by_pos, eval_len, protocol, width):
    """`nll_by_pos`: mean NLL of the scored tokens in each bin [pos_lo, pos_hi) of `width` window
    positions (the Forgetting Transformer's per-position loss, Lin et al. 2025, binned); empty bins skipped."""
    pos_sum, pos_n = by_pos
    rows = []
    for lo in range(0, eval_len, width):
        c = float(pos_n[lo:lo + width].sum())
        if c:
            rows.append(_row("nll_by_pos", eval_len, protocol, float(pos_sum[lo:lo + width].sum()) / c, "nats",
                             pos_lo=lo, pos_hi=min(lo + width, eval_len)))
    return rows


def lm_rows(model, task, *, train_len, lens, protocols, stride, max_tokens, sliding_max_tokens, batch_size,
            split, device, progress=True, text_len=None):
    """PPL and beyond-train NLL at every length of `lens` under each protocol, on the task's held-out
    text of `split` (an LMTask). stride None = train_len // 2; sliding_max_tokens None = max_tokens.
    text_len (default max(lens)): the longest length of the run, which sets where the scored text starts
    (data.eval_offset): calls that score one length each pass the run's, so every call reads the same text."""
    if stride is not None and stride < 1:  # the config refuses it first; direct callers get the same line
        raise ValueError(f"eval.stride must be >= 1 (null: train_len // 2), got {stride}")
    stride = stride if stride is not None else max(1, train_len // 2)
    lens = sorted(lens)
    longest = max(lens[-1], text_len or 0)
    tokens = task.eval_tokens(split, max_tokens + 2 * longest + 1)  # the sliding protocol's longest span
    jobs = [(L, p) for L in lens for p in protocols]
    rows = []
    for L, protocol in tqdm(jobs, desc="eval", disable=not progress, leave=False):
        s = min(stride, L) if protocol == "sliding" else None
        label = f"sliding{s}" if protocol == "sliding" else protocol
        cap = sliding_max_tokens if protocol == "sliding" and sliding_max_tokens else max_tokens
        windows = task.data.eval_windows(tokens, L, protocol=protocol, stride=s, max_tokens=cap)
        try:
            nll, nll_far, n, by_pos, acc = lm_nll(model, windows, train_len, batch_size, device)
        except ValueError as e:  # the encoding cannot represent this length (its own clear message)
            rows += nan_rows([("ppl", "ppl"), ("nll_beyond_train", "nats"), ("byte_acc", "frac")], L, label, str(e))
            continue
        rows += [_row("ppl", L, label, math.exp(nll), "ppl"), _row("byte_acc", L, label, acc, "frac")]
        if L > train_len:
            rows.append(_row("nll_beyond_train", L, label, nll_far, "nats"))
        if protocol == "nonoverlapping":  # the per-position curve of every window length (1x ... 16x)
            rows += by_position_rows(by_pos, L, label, train_len)
    return rows


def ruler_scores(model, b, device):
    """RULER's string match of the greedily generated answer of batch b (b.sep set): the prompt is everything
    before the K answer bytes, K bytes are decoded (harness.decode.greedy: KV cache where the encoding allows)
    and scored against the references the answer lists. -> ({ruler_all, ruler_part}: (n,) each, decode path)."""
    from harness import decode
    from harness.tasks import ruler
    K = int(b.mask[0].sum())  # every sequence of a batch has the same answer length
    T = b.x.shape[1]
    pos = b.pos.to(device) if b.pos is not None else None
    pred, path = decode.greedy(model, b.x[:, :T + 1 - K].to(device), K, pos)
    every, part = ruler.string_match(pred.cpu(), b.y[:, T - K:], b.sep)
    return {"ruler_all": every, "ruler_part": part}, path


@torch.no_grad()
def _accuracy(model, task, n, L, generator, batch_size, device, **extra):
    """Sums over n generated sequences of length L -> ({metric: mean}, decode path or None): token and
    sequence accuracy under teacher forcing; a RULER task (Batch.sep) adds its generated string match."""
    sums, done, path = {}, 0, None
    while done < n:
        b = task.batch(min(batch_size, n - done), L, generator, **extra)
        logits = model(b.x.to(device), b.pos.to(device) if b.pos is not None else None)
        acc = task.module.accuracy(logits.cpu(), b)
        k = b.x.shape[0]
        got = {"acc": float(acc["token_acc"]) * k, "seq_acc": float(acc["seq_acc"]) * k}
        if b.sep is not None:
            scores, path = ruler_scores(model, b, device)
            got.update({m: float(v.sum()) for m, v in scores.items()})
        sums = {m: sums.get(m, 0.0) + v for m, v in got.items()}
        done += k
    return {m: v / n for m, v in sums.items()}, path


def synthetic_rows(model, task, *, lens, batch_size, device, progress=True):
    """acc (token accuracy on scored positions) and seq_acc vs length, and a RULER task's ruler_all and
    ruler_part (RULER's string match of the generated answer; params say how it was decoded); over depth
    when the task has one. task: a SyntheticTask (its generator, samples per length, depths and seed set
    the test sets)."""
    takes_depth = "depth" in inspect.signature(task.fn).parameters
    grid = [{"depth": float(d)} for d in task.depths] if takes_depth else [{}]
    jobs = [(L, g) for L in sorted(lens) for g in grid]
    rows = []
    for L, extra in tqdm(jobs, desc="eval", disable=not progress, leave=False):
        label = f"depth={extra['depth']:g}" if extra else "iid"
        generator = task.eval_generator(L)
        try:
            means, path = _accuracy(model, task, task.eval_samples, L, generator, batch_size, device, **extra)
        except ValueError as e:
            rows += nan_rows([("acc", "frac"), ("seq_acc", "frac")], L, label, str(e))
            continue
        params = {} if path is None else {"decode": path}
        rows += [_row(m, L, label, v, "frac", **(params if m.startswith("ruler") else {})) for m, v in means.items()]
    return rows


def rows(model, task, *, train_len, lens, protocols, stride, max_tokens, sliding_max_tokens, batch_size, split,
         device, progress=True, text_len=None):
    """The extrapolation rows of `task`: lm_rows for a corpus, synthetic_rows for a generator (which
    uses only lens, batch_size, device and progress of these knobs)."""
    if task.kind == "lm":
        return lm_rows(model, task, train_len=train_len, lens=lens, protocols=protocols, stride=stride,
                       max_tokens=max_tokens, sliding_max_tokens=sliding_max_tokens, batch_size=batch_size,
                       split=split, device=device, progress=progress, text_len=text_len)
    return synthetic_rows(model, task, lens=lens, batch_size=batch_size, device=device, progress=progress)
