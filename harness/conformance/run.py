"""Run every golden case through a third-party rotation and judge it: rows, one-line messages, a table.

A row: case, layout, check (`frequencies` or `rotation`), max_err (max |observed - oracle|, rotated q/k, or
inv_freq / attention factor), tol (the bound at the worst element), ratio (max err/bound over elements and
logits; pass <= 1), result (pass | FAIL | error | skip), bug (the matched class for a failure, bugs.py).

The code under test gets its own copies of every input and is checked not to change them (MUTATES: a rotation
that zeroes or rotates the caller's q in place fails even where its outputs are right); anything it raises,
SystemExit included, is an `error` row (KeyboardInterrupt too where CATCH_INTERRUPT is set: the CLI's worker
process, which no terminal Ctrl-C reaches). Time limits per case are the CLI's (harness/conformance/isolate.py).
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


def _frequency_row(freq_fn, case, rope, inv, att):
    """(row, provider inv_freq, provider attention factor)."""
    got_inv, got_att = adapters.frequencies(freq_fn, case, rope)
    bug = bugs.classify_frequencies(case, inv, att, got_inv, got_att)
    err = (float((got_inv - inv).abs().max()) if got_inv.shape == inv.shape else math.inf)
    err = max(err, abs(got_att - att))
    tol = float((T.inv_freq_rel(inv) * inv.abs()).max())
    return _row(case, "-", "frequencies", "pass" if bug is None else "FAIL", err, tol,
                bug=bug or ""), got_inv, got_att


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


def run_case(fn, calling, case, arrays, dtype, freq_fn=None):
    """Rows for one case under a conventions.Calling, and the one-line messages (errors, NaN, skips) it produced."""
    rows, msgs, cid, layout = [], [], case["id"], calling.layout
    inv, att = torch.from_numpy(arrays["inv_freq"]), float(arrays["attention_factor"])
    pos = torch.from_numpy(arrays["positions"])
    rope = rope_dict(case)
    use_inv, use_att = inv, att
    own = calling.convention in ("positions", "angles")  # a table of their own, or angles held in fp32
    if freq_fn is not None:
        try:
            row, use_inv, use_att = _frequency_row(freq_fn, case, rope, inv, att)
        except NotImplementedError as e:
            msgs.append(f"{cid}: skip: {e}")
            return [_row(case, "-", "frequencies", "skip", bug=str(e))], msgs
        except BaseException as e:
            if not _theirs(e):
                raise
            msgs.append(f"{cid}: frequencies raised {adapters.describe(e)}")
            return [_row(case, "-", "frequencies", "error", bug=type(e).__name__)], msgs
        rows.append(row)
        own = True
    q64, k64 = torch.from_numpy(arrays["q"]), torch.from_numpy(arrays["k"])
    tdt, given = T.TORCH_DTYPES[dtype], pos.clone()
    if calling.dense(case["rope_type"]):
        q64, k64 = _dense(q64, pos, case["seq_len"]), _dense(k64, pos, case["seq_len"])
        given = torch.arange(case["seq_len"])
    phase = given.double()[:, None] * use_inv[None, :]  # (P, R/2) fp64 from the frequencies in use
    mutated, where = [], f"{cid} [{layout}, {dtype}]"
    try:
        with torch.no_grad():  # copies of everything: the golden arrays are never handed out
            qi, ki = C.heads(q64.to(tdt), k64.to(tdt))
            qo, ko = C.call(fn, calling, qi, ki, phase, use_att, given, copy.deepcopy(rope), mutated)
            qo, ko = (t.detach().double()[:, pos] if len(given) != len(pos) else t.detach().double() for t in (qo, ko))
    except NotImplementedError as e:
        msgs.append(f"{cid} [{layout}]: skip: {e}")
        return rows + [_row(case, layout, "rotation", "skip", bug=str(e))], msgs
    except BaseException as e:
        if not _theirs(e):
            raise
        msgs.append(f"{where}: {adapters.describe(e)}")
        return rows + [_row(case, layout, "rotation", "error", bug=type(e).__name__)], msgs
    if mutated:
        msgs.append(f"{where}: {MUTATES} in place: {', '.join(mutated)}")
    if bool(qo.isnan().any() or ko.isnan().any()):
        msgs.append(f"{where}: NaN outputs")
    q64, k64 = torch.from_numpy(arrays["q"]), torch.from_numpy(arrays["k"])
    bounds = [T.bound(x, pos, inv, att, layout, dtype, own) for x in (q64, k64)]
    observed = [(qo[0], ko[0]), (ko[1], qo[1])]  # head 1 of q holds k's input, and the reverse
    judged = [_judge([o], arrays, layout, bounds, calling.compare) for o in observed]
    ratio, err, tol = max(judged)
    if ratio <= 1.0 and not mutated:
        return rows + [_row(case, layout, "rotation", "pass", err, tol, ratio)], msgs
    worse = observed[judged.index(max(judged))]
    bug = bugs.classify(case, arrays, layout, worse, dtype, own, calling.compare) if ratio > 1.0 else ""
    if mutated:
        bug = f"{MUTATES} ({', '.join(mutated)})" + (f"; {bug}" if bug else "")
    return rows + [_row(case, layout, "rotation", "FAIL", err, tol, ratio, bug)], msgs


def selected(case_list, rope_types=None):
    """The cases of rope_types (all where None), in file order."""
    return [c for c in case_list if not rope_types or c["rope_type"] in rope_types]


def run_one(fn, calling, case, data, dtype, freq_fn=None):
    """(rows, messages) of one golden case; freq_fn a function or a mapping rope_type -> function."""
    f = freq_fn
    if isinstance(freq_fn, dict) or hasattr(freq_fn, "keys"):
        try:
            f = freq_fn.get(case["rope_type"])
        except BaseException as e:
            if not _theirs(e):
                raise
            m = f"{case['id']}: --frequencies' .get raised {adapters.describe(e)}"
            return [_row(case, "-", "frequencies", "error", bug=type(e).__name__)], [m]
        if f is None:
            m = f"{case['id']}: skip: --frequencies has no rope_type {case['rope_type']!r}"
            return [_row(case, "-", "frequencies", "skip", bug="no such rope_type")], [m]
    return run_case(fn, calling, case, golden.case_arrays(data, case), dtype, f)


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
