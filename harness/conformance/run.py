"""Run every golden case through a third-party rotation and judge it: rows, one-line messages, a table.

A row: case, layout, check (`frequencies` or `rotation`), max_err (max |observed - oracle|, rotated q/k, or
inv_freq / attention factor), tol (the bound at the worst element), ratio (max err/bound over elements and
logits; pass <= 1), result (pass | FAIL | error | skip), bug (the matched class for a failure, bugs.py).

Two halves, so that no verdict is formed beside the code under test: observe() calls it and returns what it
returned (outputs in their own dtype, the names of inputs it changed, what it raised), and judge() forms the rows
(tolerances, bug classes). The CLI runs observe() in a worker process and judge() in its own
(harness/conformance/isolate.py); run() does both in this process, for tests and the Python API.
The code under test gets its own copies of every input and is checked not to change them (MUTATES: a rotation
that zeroes or rotates the caller's q in place fails even where its outputs are right); its outputs must have the
input's dtype and be real and finite, else a named FAIL (bugs.WRONG_DTYPE, COMPLEX_OUTPUT, NON_FINITE) whatever
their values; anything it raises, SystemExit included, is an `error` row (KeyboardInterrupt too where
CATCH_INTERRUPT is set: the CLI's worker process, which no terminal Ctrl-C reaches). Time limits per case are the
CLI's (isolate.py).
"""
import copy
import math

import torch

from harness.conformance import adapters, bugs, golden
from harness.conformance import conventions as C
from harness.conformance import tolerance as T

MUTATES = "mutates its inputs"
CATCH_INTERRUPT = False  # the CLI's worker sets it: there a KeyboardInterrupt can only come from the code under test


def _theirs(e):
    """True where e, raised by the code under test, is to become an `error` row (a user's Ctrl-C is not)."""
    return not isinstance(e, KeyboardInterrupt) or CATCH_INTERRUPT


def rope_dict(case):
    """The `rope` dict of the positions convention: HF rope_parameters plus head_dim, max_position_embeddings."""
    rope = {"rope_type": case["rope_type"], "rope_theta": case["base"], "head_dim": case["head_dim"],
            "partial_rotary_factor": case["partial_rotary_factor"], **case["params"]}
    # HF derives yarn's / longrope's factor from max_position_embeddings / original and dynamic's trained length
    # from max_position_embeddings itself
    rope["max_position_embeddings"] = case["seq_len"]
    if case["rope_type"] == "dynamic":  # HF's dynamic reads its trained length from max_position_embeddings only
        rope["max_position_embeddings"] = rope.pop("original_max_position_embeddings")
    return rope


def _row(case, layout, check, result, max_err=math.nan, tol=math.nan, ratio=math.nan, bug=""):
    return {"case": case["id"], "layout": layout, "check": check, "max_err": max_err, "tol": tol,
            "ratio": ratio, "result": result, "bug": bug}


def _dense(x, pos, length):
    """x (P, D) of the sampled positions spread over every position 0..length-1 (rows tiled; row pos[i] = x[i])."""
    out = x[torch.arange(length) % len(x)]
    out[pos] = x
    return out


def _judge(observed, arrays, layout, bounds, compare):
    """(ratio, max_err, tol at the worst element) of observed [(q', k') (P, D) fp64, ...] against the golden."""
    qe, ke = torch.from_numpy(arrays[f"q_rot_{layout}"]), torch.from_numpy(arrays[f"k_rot_{layout}"])
    le, (bq, bk) = torch.from_numpy(arrays[f"logits_{layout}"]), bounds
    lb = T.logit_bound(qe, ke, bq, bk)
    ratios, err, tol = [], 0.0, math.nan
    for qo, ko in observed:
        ratios.append(T.ratio(qo @ ko.T, le, lb))
        if compare == "logits":  # their basis is their own: only q'(m)·k'(n) is comparable
            e = T.max_abs(qo @ ko.T, le)
            if e >= err:
                worst = (qo @ ko.T - le).abs().nan_to_num(math.inf).argmax()
                err, tol = e, float(lb.flatten()[worst])
            continue
        ratios += [T.ratio(qo, qe, bq), T.ratio(ko, ke, bk)]
        e = max(T.max_abs(qo, qe), T.max_abs(ko, ke))
        if e >= err:  # the tolerance shown is the one at the largest error
            worst = (qo - qe).abs().nan_to_num(math.inf).argmax()
            err, tol = e, float(bq.flatten()[worst])
    return max(ratios), err, tol


def _plain(t):
    """A plain torch tensor of t's values and dtype, detached from anything of theirs (a subclass, a graph)."""
    return torch.Tensor(t.detach().cpu()).clone() if type(t) is not torch.Tensor else t.detach().cpu().clone()


def observe(fn, calling, case, arrays, dtype, freq_fn=None):
    """What the code under test returned for one case, judged nowhere here: the CLI's worker sends this record to
    the CLI, which judges it in its own process (judge(); harness/conformance/isolate.py). A dict:
    freq: None (no --frequencies) | {"skip": why} | {"error": one line, "type": name} | {"inv": (R/2,) fp64, "att"}
    rot: None (after a frequency skip or error) | {"skip": why} | {"error", "type"} |
         {"q": (H, P, D), "k": (H, P, D) in the dtype the code returned, sampled positions only, "mutated": names}."""
    rec = {"freq": None, "rot": None}
    inv, att = torch.from_numpy(arrays["inv_freq"]), float(arrays["attention_factor"])
    pos = torch.from_numpy(arrays["positions"])
    rope = rope_dict(case)
    if freq_fn is not None:
        try:
            inv, att = adapters.frequencies(freq_fn, case, rope)
        except NotImplementedError as e:
            rec["freq"] = {"skip": str(e)}
            return rec
        except BaseException as e:
            if not _theirs(e):
                raise
            rec["freq"] = {"error": f"frequencies raised {adapters.describe(e)}", "type": type(e).__name__}
            return rec
        rec["freq"] = {"inv": inv, "att": att}
    q64, k64 = torch.from_numpy(arrays["q"]), torch.from_numpy(arrays["k"])
    given = pos.clone()
    if calling.dense(case["rope_type"]):
        q64, k64 = _dense(q64, pos, case["seq_len"]), _dense(k64, pos, case["seq_len"])
        given = torch.arange(case["seq_len"])
    mutated = []
    try:
        with torch.no_grad():  # copies of everything: the golden arrays are never handed out
            phase = given.double()[:, None] * inv[None, :]  # (P, R/2) fp64 from the frequencies in use
            qi, ki = C.heads(q64.to(T.TORCH_DTYPES[dtype]), k64.to(T.TORCH_DTYPES[dtype]))
            qo, ko = C.call(fn, calling, qi, ki, phase, att, given, copy.deepcopy(rope), mutated)
            qo, ko = (_plain(t)[:, pos] if len(given) != len(pos) else _plain(t) for t in (qo, ko))
    except NotImplementedError as e:
        rec["rot"] = {"skip": str(e)}
        return rec
    except BaseException as e:
        if not _theirs(e):
            raise
        rec["rot"] = {"error": adapters.describe(e), "type": type(e).__name__}
        return rec
    rec["rot"] = {"q": qo, "k": ko, "mutated": list(mutated)}
    return rec


def output_faults(qo, ko, dtype):
    """What is wrong with the outputs themselves, whatever their values: a dtype other than the input's, complex
    values, non-finite values (every input is finite). Each a named class (bugs.WRONG_DTYPE, ...)."""
    want, faults = T.TORCH_DTYPES[dtype], []
    got = {t.dtype for t in (qo, ko)}
    if got != {want}:
        faults.append(f"{bugs.WRONG_DTYPE} ({', '.join(sorted(str(g).replace('torch.', '') for g in got))} "
                      f"for a {str(want).replace('torch.', '')} input)")
    if any(t.is_complex() for t in (qo, ko)):
        faults.append(bugs.COMPLEX_OUTPUT)
    if any(t.dtype.is_floating_point or t.is_complex() for t in (qo, ko)):
        bad = sum(int((~torch.isfinite(t)).sum()) for t in (qo, ko))
        if bad:
            faults.append(f"{bugs.NON_FINITE} ({bad} of {qo.numel() + ko.numel()} values)")
    return faults


def judge(rec, calling, case, arrays, dtype):
    """(rows, one-line messages) of one case from what the code returned (observe's record): run by the CLI's own
    process, never beside the code under test."""
    rows, msgs, cid, layout = [], [], case["id"], calling.layout
    inv, att = torch.from_numpy(arrays["inv_freq"]), float(arrays["attention_factor"])
    pos = torch.from_numpy(arrays["positions"])
    own = calling.convention in ("positions", "angles")  # a table of their own, or angles held in fp32
    use_att, f = att, rec["freq"]
    if f is not None:
        if "skip" in f:
            msgs.append(f"{cid}: skip: {f['skip']}")
            return [_row(case, "-", "frequencies", "skip", bug=f["skip"])], msgs
        if "error" in f:
            msgs.append(f"{cid}: {f['error']}")
            return [_row(case, "-", "frequencies", "error", bug=f["type"])], msgs
        got_inv, use_att = f["inv"], f["att"]
        bug = bugs.classify_frequencies(case, inv, att, got_inv, use_att)
        err = (float((got_inv - inv).abs().max()) if got_inv.shape == inv.shape else math.inf)
        err = max(err, abs(use_att - att))
        tol = float((T.inv_freq_rel(inv) * inv.abs()).max())
        rows.append(_row(case, "-", "frequencies", "pass" if bug is None else "FAIL", err, tol, bug=bug or ""))
        own = True
    r, where = rec["rot"], f"{cid} [{layout}, {dtype}]"
    if "skip" in r:
        msgs.append(f"{cid} [{layout}]: skip: {r['skip']}")
        return rows + [_row(case, layout, "rotation", "skip", bug=r["skip"])], msgs
    if "error" in r:
        msgs.append(f"{where}: {r['error']}")
        return rows + [_row(case, layout, "rotation", "error", bug=r["type"])], msgs
    qo, ko, mutated = r["q"], r["k"], r["mutated"]
    faults = output_faults(qo, ko, dtype)
    qo, ko = (t.real.double() if t.is_complex() else t.double() for t in (qo, ko))
    if calling.convention == "angles":  # the attention factor is not an angle: applied here, in fp64 (linear)
        scale = torch.ones(qo.shape[-1], dtype=torch.float64)
        scale[:2 * inv.numel()] = use_att  # a partial rotary's rest passes through
        qo, ko = qo * scale, ko * scale
    if mutated:
        msgs.append(f"{where}: {MUTATES} in place: {', '.join(mutated)}")
    msgs += [f"{where}: {fault}" for fault in faults]
    q64, k64 = torch.from_numpy(arrays["q"]), torch.from_numpy(arrays["k"])
    bounds = [T.bound(x, pos, inv, att, layout, dtype, own) for x in (q64, k64)]
    observed = [(qo[0], ko[0]), (ko[1], qo[1])]  # head 1 of q holds k's input, and the reverse
    judged = [_judge([o], arrays, layout, bounds, calling.compare) for o in observed]
    ratio, err, tol = max(judged)
    if ratio <= 1.0 and not mutated and not faults:
        return rows + [_row(case, layout, "rotation", "pass", err, tol, ratio)], msgs
    worse = observed[judged.index(max(judged))]
    bug = bugs.classify(case, arrays, layout, worse, dtype, own, calling.compare) if ratio > 1.0 else ""
    if bug in bugs.CLASSES:  # a known class explains the values, non-finite ones too (fp16 positions: inf)
        faults = [f for f in faults if not f.startswith(bugs.NON_FINITE)]
    named = ([f"{MUTATES} ({', '.join(mutated)})"] if mutated else []) + faults
    bug = "; ".join(named + ([bug] if bug else []))
    return rows + [_row(case, layout, "rotation", "FAIL", err, tol, ratio, bug)], msgs


def selected(case_list, rope_types=None):
    """The cases of rope_types (all where None), in file order."""
    return [c for c in case_list if not rope_types or c["rope_type"] in rope_types]


def observe_one(fn, calling, case, arrays, dtype, freq_fn=None):
    """observe()'s record of one golden case; freq_fn a function or a mapping rope_type -> function."""
    f = freq_fn
    if isinstance(freq_fn, dict) or hasattr(freq_fn, "keys"):
        try:
            f = freq_fn.get(case["rope_type"])
        except BaseException as e:
            if not _theirs(e):
                raise
            return {"freq": {"error": f"--frequencies' .get raised {adapters.describe(e)}", "type": type(e).__name__},
                    "rot": None}
        if f is None:
            return {"freq": {"skip": f"--frequencies has no rope_type {case['rope_type']!r}"}, "rot": None}
    return observe(fn, calling, case, arrays, dtype, f)


def run_one(fn, calling, case, data, dtype, freq_fn=None):
    """(rows, messages) of one golden case, observed and judged in this process."""
    arrays = golden.case_arrays(data, case)
    return judge(observe_one(fn, calling, case, arrays, dtype, freq_fn), calling, case, arrays, dtype)


def run(fn, convention, layout, dtype, freq_fn=None, rope_types=None, path=golden.PATH, echo=None, *,
        qk_layout=None, width=None, order=None, compare="outputs", positions=None, array="torch"):
    """(rows, messages) over every golden case (filtered by rope_types); echo(line) as each message comes.
    The keywords are conventions.Calling's. In this process: no time limit (the CLI runs the cases in a worker
    with one, harness/conformance/isolate.py)."""
    calling = C.Calling(convention, layout, qk_layout, width, order, compare, positions, array)
    case_list, data = golden.load(path)
    rows, msgs = [], []
    for case in selected(case_list, rope_types):
        r, m = run_one(fn, calling, case, data, dtype, freq_fn)
        rows += r
        msgs += m
        for line in m:
            if echo:
                echo(line)
    return rows, msgs


def table(rows):
    """The rows as a fixed-width text table."""
    head = f"{'case':<38} {'layout':<11} {'check':<11} {'max_err':>9} {'tol':>9} {'err/tol':>8}  {'result':<6} bug"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['case']:<38} {r['layout']:<11} {r['check']:<11} {r['max_err']:>9.2e} {r['tol']:>9.2e} "
                     f"{r['ratio']:>8.3g}  {r['result']:<6} {r['bug']}")
    return "\n".join(lines)


def summary(rows):
    count = {s: sum(r["result"] == s for r in rows) for s in ("pass", "FAIL", "error", "skip")}
    return ", ".join(f"{n} {s}" for s, n in count.items()) + f" of {len(rows)} checks"


def ok(rows):
    """Every check passed or was skipped, and at least one passed: zero verdicts is never a pass."""
    return all(r["result"] in ("pass", "skip") for r in rows) and any(r["result"] == "pass" for r in rows)
