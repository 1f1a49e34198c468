"""Length extrapolation: train at train_len, evaluate at every eval_len of `lens`.

lm: PPL over the scored tokens of each window and NLL of the scored tokens at window positions
>= train_len (that cancels the early-token effect: Press et al. 2022, "Train Short, Test Long", §5). Synthetic tasks:
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


def _batches(windows, batch_size):
    """Group (x, y, mask) windows of equal length into (B, T) batches."""
    buf = []
    for w in windows:
        buf.append(w)
        if len(buf) == batch_size:
            yield tuple(torch.cat(t) for t in zip(*buf))
            buf = []
    if buf:
        yield tuple(torch.cat(t) for t in zip(*buf))


@torch.no_grad()
def lm_nll(model, windows, train_len, batch_size, device):
    """NLL of the scored tokens: (mean, mean at positions >= train_len, n scored, by_pos) where by_pos is
    (sum, count), each (T,) float64: the summed NLL and the number of scored tokens at each window position."""
    total, n, beyond, n_beyond = 0.0, 0, 0.0, 0  # n: scored tokens (<= eval.max_tokens)
    pos_sum = pos_n = None
    for x, y, mask in _batches(windows, batch_size):
        x, y, mask = x.to(device), y.to(device), mask.to(device)
        logits = model(x)  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), reduction="none").view_as(y)
        far = mask.clone()
        far[:, :train_len] = False  # (B, T) scored and beyond the trained length
        total, n = total + nll[mask].double().sum().item(), n + int(mask.sum())
        beyond, n_beyond = beyond + nll[far].double().sum().item(), n_beyond + int(far.sum())
        s, c = (nll * mask).double().sum(0).cpu(), mask.double().sum(0).cpu()  # (T,) each
        pos_sum, pos_n = (s, c) if pos_sum is None else (pos_sum + s, pos_n + c)
    return total / max(n, 1), (beyond / n_beyond if n_beyond else math.nan), n, (pos_sum, pos_n)


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
            split, device, progress=True):
    """PPL and beyond-train NLL at every length of `lens` under each protocol, on the task's held-out
    text of `split` (an LMTask). stride None = train_len // 2; sliding_max_tokens None = max_tokens."""
    stride = stride or max(1, train_len // 2)
    lens = sorted(lens)
    tokens = task.eval_tokens(split, max_tokens + 2 * lens[-1] + 1)  # the sliding protocol's longest span
    jobs = [(L, p) for L in lens for p in protocols]
    rows = []
    for L, protocol in tqdm(jobs, desc="eval", disable=not progress, leave=False):
        s = min(stride, L) if protocol == "sliding" else None
        label = f"sliding{s}" if protocol == "sliding" else protocol
        cap = sliding_max_tokens if protocol == "sliding" and sliding_max_tokens else max_tokens
        windows = task.data.eval_windows(tokens, L, protocol=protocol, stride=s, max_tokens=cap)
        try:
            nll, nll_far, n, by_pos = lm_nll(model, windows, train_len, batch_size, device)
        except ValueError as e:  # the encoding cannot represent this length (its own clear message)
            rows += nan_rows([("ppl", "ppl"), ("nll_beyond_train", "nats")], L, label, str(e))
            continue
        rows.append(_row("ppl", L, label, math.exp(nll), "ppl"))
        if L > train_len:
            rows.append(_row("nll_beyond_train", L, label, nll_far, "nats"))
        if L == lens[-1] and protocol == "nonoverlapping":  # the per-position curve of the longest window
            rows += by_position_rows(by_pos, L, label, train_len)
    return rows


@torch.no_grad()
def _accuracy(model, task, n, L, generator, batch_size, device, **extra):
    """Mean token and sequence accuracy over n generated sequences of length L."""
    tok = seq = 0.0
    done = 0
    while done < n:
        b = task.batch(min(batch_size, n - done), L, generator, **extra)
        logits = model(b.x.to(device), b.pos.to(device) if b.pos is not None else None)
        acc = task.module.accuracy(logits.cpu(), b)
        k = b.x.shape[0]
        tok, seq, done = tok + float(acc["token_acc"]) * k, seq + float(acc["seq_acc"]) * k, done + k
    return tok / n, seq / n


def synthetic_rows(model, task, *, lens, batch_size, device, progress=True):
    """acc (token accuracy on scored positions) and seq_acc vs length; over depth when the task has one.
    task: a SyntheticTask (its generator, samples per length, depths and seed set the test sets)."""
    takes_depth = "depth" in inspect.signature(task.fn).parameters
    grid = [{"depth": float(d)} for d in task.depths] if takes_depth else [{}]
    jobs = [(L, g) for L in sorted(lens) for g in grid]
    rows = []
    for L, extra in tqdm(jobs, desc="eval", disable=not progress, leave=False):
        label = f"depth={extra['depth']:g}" if extra else "iid"
        generator = task.eval_generator(L)
        try:
            tok, seq = _accuracy(model, task, task.eval_samples, L, generator, batch_size, device, **extra)
        except ValueError as e:
            rows += nan_rows([("acc", "frac"), ("seq_acc", "frac")], L, label, str(e))
            continue
        rows += [_row("acc", L, label, tok, "frac"), _row("seq_acc", L, label, seq, "frac")]
    return rows


def rows(model, task, *, train_len, lens, protocols, stride, max_tokens, sliding_max_tokens, batch_size, split,
         device, progress=True):
    """The extrapolation rows of `task`: lm_rows for a corpus, synthetic_rows for a generator (which
    uses only lens, batch_size, device and progress of these knobs)."""
    if task.kind == "lm":
        return lm_rows(model, task, train_len=train_len, lens=lens, protocols=protocols, stride=stride,
                       max_tokens=max_tokens, sliding_max_tokens=sliding_max_tokens, batch_size=batch_size,
                       split=split, device=device, progress=progress)
    return synthetic_rows(model, task, lens=lens, batch_size=batch_size, device=device, progress=progress)
