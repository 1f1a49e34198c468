"""Run every golden case through a third-party rotation and judge it: rows, one-line messages, a table.

A row: case, layout, check (`frequencies` or `rotation`), max_err (max |observed - oracle|, rotated q/k, or
inv_freq / attention factor), tol (the bound at the worst element), ratio (max err/bound over elements and
logits; pass <= 1), result (pass | FAIL | error | skip), bug (the matched class for a failure, bugs.py).
"""
import math

import torch

from harness.conformance import adapters, bugs, golden
from harness.conformance import tolerance as T


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
    tol = T.PHASE_C * T.EPS["fp32"] * float(inv.abs().max())
    return _row(case, "-", "frequencies", "pass" if bug is None else "FAIL", err, tol,
                bug=bug or ""), got_inv, got_att


def run_case(fn, convention, case, arrays, layout, dtype, freq_fn=None):
    """Rows for one case and layout, and the one-line messages (errors, NaN, skips) it produced."""
    rows, msgs, cid = [], [], case["id"]
    inv, att = torch.from_numpy(arrays["inv_freq"]), float(arrays["attention_factor"])
    pos = torch.from_numpy(arrays["positions"])
    rope = rope_dict(case)
    use_inv, use_att, own = inv, att, convention == "positions"
    if freq_fn is not None:
        try:
            row, use_inv, use_att = _frequency_row(freq_fn, case, rope, inv, att)
        except NotImplementedError as e:
            msgs.append(f"{cid}: skip: {e}")
            return [_row(case, "-", "frequencies", "skip", bug=str(e))], msgs
        except Exception as e:
            msgs.append(f"{cid}: frequencies raised {type(e).__name__}: {e}")
            return [_row(case, "-", "frequencies", "error", bug=type(e).__name__)], msgs
        rows.append(row)
        own = True
    q64, k64 = torch.from_numpy(arrays["q"]), torch.from_numpy(arrays["k"])
    tdt = T.TORCH_DTYPES[dtype]
    phase = pos.double()[:, None] * use_inv[None, :]
    cos, sin = phase.cos() * use_att, phase.sin() * use_att  # (P, R/2) fp64 from the frequencies in use
    try:
        with torch.no_grad():
            out = adapters.call(fn, convention, q64.to(tdt)[None, None], k64.to(tdt)[None, None], cos, sin, pos,
                                rope, layout)
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(torch.is_tensor(t) for t in out)):
            raise TypeError(f"returned {type(out).__name__}, expected two tensors (q', k')")
        qo, ko = (t.detach().reshape(q64.shape).double() for t in out)
    except NotImplementedError as e:
        msgs.append(f"{cid} [{layout}]: skip: {e}")
        return rows + [_row(case, layout, "rotation", "skip", bug=str(e))], msgs
    except Exception as e:
        msgs.append(f"{cid} [{layout}, {dtype}]: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return rows + [_row(case, layout, "rotation", "error", bug=type(e).__name__)], msgs
    if bool(qo.isnan().any() or ko.isnan().any()):
        msgs.append(f"{cid} [{layout}, {dtype}]: NaN outputs")
    qe, ke = torch.from_numpy(arrays[f"q_rot_{layout}"]), torch.from_numpy(arrays[f"k_rot_{layout}"])
    bq = T.bound(q64, pos, inv, att, layout, dtype, own)
    bk = T.bound(k64, pos, inv, att, layout, dtype, own)
    ratios = [T.ratio(qo, qe, bq), T.ratio(ko, ke, bk)]
    logits = qo @ ko.T
    ratios.append(T.ratio(logits, torch.from_numpy(arrays[f"logits_{layout}"]), T.logit_bound(qe, ke, bq, bk)))
    ratio = max(ratios)
    err = max(T.max_abs(qo, qe), T.max_abs(ko, ke))
    worst = (qo - qe).abs().nan_to_num(math.inf).argmax()  # the tolerance shown is the one at the largest error
    tol = float(bq.flatten()[worst])
    if ratio <= 1.0:
        return rows + [_row(case, layout, "rotation", "pass", err, tol, ratio)], msgs
    bug = bugs.classify(case, arrays, layout, (qo, ko), dtype, own)
    return rows + [_row(case, layout, "rotation", "FAIL", err, tol, ratio, bug)], msgs


def run(fn, convention, layout, dtype, freq_fn=None, rope_types=None, path=golden.PATH, echo=None):
    """(rows, messages) over every golden case (filtered by rope_types); echo(line) as each message comes."""
    case_list, data = golden.load(path)
    rows, msgs = [], []
    for case in case_list:
        if rope_types and case["rope_type"] not in rope_types:
            continue
        f = freq_fn
        if isinstance(freq_fn, dict) or hasattr(freq_fn, "keys"):
            f = freq_fn.get(case["rope_type"])
            if f is None:
                m = f"{case['id']}: skip: --frequencies has no rope_type {case['rope_type']!r}"
                rows.append(_row(case, "-", "frequencies", "skip", bug="no such rope_type"))
                msgs.append(m)
                if echo:
                    echo(m)
                continue
        r, m = run_case(fn, convention, case, golden.case_arrays(data, case), layout, dtype, f)
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
    return all(r["result"] in ("pass", "skip") for r in rows) and any(r["result"] == "pass" for r in rows)
