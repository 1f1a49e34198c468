"""Cases for how RoPE is used, beyond one fresh call: a module cast after it is built, several instances in one
process, decoding one position at a time. `--usage` runs them after the golden cases (python -m harness.conformance).

The golden cases build the rotation afresh in the input dtype; a model does otherwise. Its rotary module is built
in fp32 and cast with the model (`model.half()`, `model.to(torch.bfloat16)`, which casts every floating buffer and
parameter, an inv_freq among them); a process holds layers or models of other bases and factors, so a cache keyed
on too little serves one the other's table; and generation rotates one new position at a time, at an offset or
position id. The kinds (KINDS), each judged against the fp64 oracle (cases.rotate) computed here at run time, never
stored (golden.npz is unchanged):
- cast: the library's module (Library.build, or --build) built in fp32, cast to the run's dtype (fp16: .half(),
  bf16: .to(torch.bfloat16)) and run on inputs of that dtype, against the oracle of the fp32-built frequencies;
  the golden sampled positions up to 131071. fp32 casts nothing: a skip. Named candidates: bugs.CAST_FREQ,
  CAST_POS, both, and CAST_PHASE (positions, frequencies and their product all in the cast dtype).
- shared: instances A (default, base 1e4), B (base 5e5), C (linear factor 4 or llama3, where the library has one),
  at one length (8192, its sampled positions): build A, run A, build B, run B, build C, run C, run A again. With
  no build hook the positions function is called with each rope dict (a module-level cache is what can go stale).
  Named candidate: bugs.STALE_TABLE (another step's frequencies).
- decode: the whole sequence 0..4099 (DECODE_LEN) in one call, then positions 1, 255, 2049, 4099 (DECODE_STEPS)
  each alone (q, k of one position, positions = [t]), for default and llama3 or linear; both against the oracle,
  and the message gives each step's distance from the whole call's row.
  Named candidate: bugs.DECODE_RESTART (positions restart at 0).
Code without a positions argument (--positions dense: it rotates 0..L-1, equinox's module) runs every step over
0..L-1, and its one-position decode steps are skips (no offset to decode at).
Every output is also checked for the input's dtype, real and finite values (run.output_faults). observe() runs
beside the code under test (the CLI: in a worker, usage_worker.py), judge() in the caller's process.
"""
import torch

from harness.conformance import adapters, bugs, cases, run
from harness.conformance import conventions as C
from harness.conformance import tolerance as T

KINDS = ("cast", "shared", "decode")
CASTS = {"fp16": ".half()", "bf16": ".to(torch.bfloat16)"}
HEAD_DIM = 64
DECODE_LEN = 4100  # past 2049, the first integer fp16 cannot hold, and 4097 (bf16 holds 8 bits)
DECODE_STEPS = (1, 255, 2049, 4099)
SCALED = ("yarn", "llama3", "linear")  # a cast / decode case's scaled type: the first the library has


def _case(rope_type, base, seq_len, tag):
    params = cases.type_params(rope_type, HEAD_DIM)
    return {"id": tag, "rope_type": rope_type, "head_dim": HEAD_DIM, "base": base, "partial_rotary_factor": 1.0,
            "seq_len": seq_len, "params": params}


def plan(kinds, types):
    """[(kind, [step, ...])]; a step: {"label", "case" (cases.py's form), "pos" (sampled positions), "call":
    sampled | dense | single, "instance": which built instance runs it}. types: the rope_types the code has."""
    scaled = [t for t in SCALED if t in types][:1]
    out = []
    if "cast" in kinds:
        steps = [{"label": t, "case": _case(t, 1e4, cases.LONG, t), "pos": cases.POSITIONS[cases.LONG],
                  "call": "sampled", "instance": t} for t in ["default"] + scaled]
        out.append(("cast", steps))
    if "shared" in kinds:
        third = [t for t in ("linear", "llama3") if t in types][:1]
        made = [("A", _case("default", 1e4, cases.ORIGINAL, "A default b1e4")),
                ("B", _case("default", 5e5, cases.ORIGINAL, "B default b5e5"))]
        made += [("C", _case(t, 1e4, cases.ORIGINAL, f"C {t} b1e4")) for t in third]
        steps = [{"label": f"{i + 1} {c['id']}", "case": c, "pos": cases.POSITIONS[cases.ORIGINAL],
                  "call": "sampled", "instance": name} for i, (name, c) in enumerate(made)]
        steps.append({**steps[0], "label": f"{len(steps) + 1} A again"})
        out.append(("shared", steps))
    if "decode" in kinds:
        steps = []
        for t in ["default"] + [t for t in ("llama3", "linear") if t in types][:1]:
            c = _case(t, 1e4, cases.LONG, t)
            steps += [{"label": f"{t} whole sequence", "case": c, "pos": DECODE_STEPS, "call": "dense",
                       "instance": t},
                      {"label": f"{t} one at a time", "case": c, "pos": DECODE_STEPS, "call": "single",
                       "instance": t}]
        out.append(("decode", steps))
    return out


def _inputs(step):
    return cases.inputs(HEAD_DIM, len(step["pos"]), seed=len(step["pos"]))  # (P, D) fp64 each


def observe(fn, build, calling, kinds, types, dtype):
    """{kind: [step record]} from the code under test: {"q", "k" (H, P, D) as returned, "mutated"} | {"skip"} |
    {"error", "type"}, one per plan() step. fn: the positions-convention function; build: rope -> module, or
    None (then no cast case). Instances are made when their first step comes, and kept."""
    out = {}
    for kind, steps in plan(kinds, types):
        made, recs = {}, []
        for step in steps:
            try:
                recs.append(_observe_step(fn, build, calling, kind, step, dtype, made))
            except NotImplementedError as e:
                recs.append({"skip": str(e)})
            except BaseException as e:
                if not run._theirs(e):
                    raise
                recs.append({"error": adapters.describe(e), "type": type(e).__name__})
        out[kind] = recs
    return out


def _observe_step(fn, build, calling, kind, step, dtype, made):
    if calling.convention != "positions":
        raise NotImplementedError(f"the usage cases need code that builds its own table (--convention positions); "
                                  f"{calling.convention!r} is handed it")
    if kind == "cast" and build is None:
        raise NotImplementedError("the cast case needs the library's module: Library.build / --build")
    if kind == "cast" and dtype not in CASTS:
        raise NotImplementedError(f"--dtype {dtype} casts nothing: run --dtype bf16 or fp16")
    case, pos = step["case"], torch.tensor(step["pos"])
    rope = run.rope_dict(case)
    if step["instance"] not in made:  # build A, run A, build B, ...: each instance made just before its first run
        if build is not None:
            module = build(dict(rope))
            if kind == "cast":
                module = module.half() if dtype == "fp16" else module.to(torch.bfloat16)
            made[step["instance"]] = lambda q, k, positions, *, rope: module(q, k, positions)
        else:
            made[step["instance"]] = fn
    inst, x = made[step["instance"]], T.TORCH_DTYPES[dtype]
    q64, k64 = _inputs(step)
    calls = [(q64, k64, pos)]  # (q (P, D), k, positions) per call; rows gathered back to the sampled positions
    # code without a positions argument (--positions dense: it rotates 0..L-1) runs every step densely, and has no
    # offset to decode at
    dense = step["call"] == "dense" or (calling.positions == "dense" and step["call"] == "sampled")
    if calling.positions == "dense" and step["call"] == "single":
        raise NotImplementedError("the code rotates positions 0..L-1 only (--positions dense): no offset to decode at")
    if dense:
        n = DECODE_LEN if step["call"] == "dense" else step["case"]["seq_len"]
        calls = [(run._dense(q64, pos, n), run._dense(k64, pos, n), torch.arange(n))]
    elif step["call"] == "single":
        calls = [(q64[i:i + 1], k64[i:i + 1], pos[i:i + 1]) for i in range(len(pos))]
    qs, ks, mutated = [], [], []
    with torch.no_grad():
        for q, k, given in calls:
            qi, ki = C.heads(q.to(x), k.to(x))
            phase = torch.zeros(len(given), 1, dtype=torch.float64)  # unused by the positions convention
            qo, ko = C.call(inst, calling, qi, ki, phase, 1.0, given.clone(), dict(rope), mutated)
            keep = pos if dense else slice(None)
            qs.append(run._plain(qo)[:, keep])
            ks.append(run._plain(ko)[:, keep])
    return {"q": torch.cat(qs, 1), "k": torch.cat(ks, 1), "mutated": list(dict.fromkeys(mutated))}


def oracle(case, pos, layout):
    """A golden-style arrays dict (numpy) for case at positions pos: what bugs.classify and run._judge read."""
    inv, att = cases.case_frequencies(case)
    pos = torch.tensor(pos, dtype=torch.int64)
    q, k = cases.inputs(HEAD_DIM, len(pos), seed=len(pos))
    qr, kr = cases.rotate(torch.stack((q, k)), inv, pos, att, layout)
    out = {"inv_freq": inv, "attention_factor": torch.tensor(att, dtype=torch.float64), "positions": pos,
           "q": q, "k": k, f"q_rot_{layout}": qr, f"k_rot_{layout}": kr, f"logits_{layout}": qr @ kr.T}
    return {n: v.numpy() for n, v in out.items()}


def _extra(kind, step, steps, arrays, layout, dtype):
    """The usage candidates classify tries first: [(name, inv_freq, positions fp64, attention_factor, layout)]."""
    inv, pos = torch.from_numpy(arrays["inv_freq"]), torch.from_numpy(arrays["positions"]).double()
    att = float(arrays["attention_factor"])
    if kind == "cast":
        low = T.TORCH_DTYPES[dtype]
        inv16, pos16 = inv.to(low).double(), pos.to(low).double()
        phase16 = (pos16[:, None] * inv16[None, :]).to(low).double()  # (P, R/2): the product rounded too
        return [(bugs.CAST_FREQ, inv16, pos, att, layout), (bugs.CAST_POS, inv, pos16, att, layout),
                (f"{bugs.CAST_FREQ} and positions", inv16, pos16, att, layout),
                (bugs.CAST_PHASE, inv, phase16, att, layout)]
    if kind == "shared":
        out = []
        for other in steps:
            f, a = cases.case_frequencies(other["case"])
            if other["case"]["id"] != step["case"]["id"] and not (f.shape == inv.shape and torch.equal(f, inv)):
                out.append((f"{bugs.STALE_TABLE} ({other['case']['id']})", f, pos, a, layout))
        return out
    if kind == "decode" and step["call"] == "single":
        return [(bugs.DECODE_RESTART, inv, torch.zeros_like(pos), att, layout)]
    return []


def judge(observed, calling, dtype, types):
    """(rows, messages) of observe()'s records (the same types), formed here, in the CLI's own process: run.py's
    row form, case "usage:<kind>:<step>", check the kind."""
    rows, msgs, layout = [], [], calling.layout
    planned = dict(plan(list(observed), types))
    for kind, recs in observed.items():
        steps, whole = planned[kind], {}
        for step, rec in zip(steps, recs):
            case = {**step["case"], "id": f"usage:{kind}:{step['label']}"}
            where = f"{case['id']} [{layout}, {dtype}]"
            if "skip" in rec or "error" in rec:
                result, bug = ("skip", rec["skip"]) if "skip" in rec else ("error", rec["type"])
                msgs.append(f"{where}: {result}: {rec.get('skip') or rec.get('error')}")
                rows.append(run._row(case, layout, kind, result, bug=bug))
                continue
            arrays = oracle(step["case"], step["pos"], layout)
            row, lines = _judge_step(kind, step, steps, rec, arrays, calling, dtype, case)
            if step["call"] == "dense":
                whole[step["case"]["id"]] = rec
            elif step["call"] == "single" and step["case"]["id"] in whole:
                w = whole[step["case"]["id"]]
                gap = max(T.max_abs(rec[n].double(), w[n].double()) for n in ("q", "k"))
                lines.append(f"{where}: one position at a time vs the whole sequence's rows: max |diff| {gap:.3g}")
            rows.append(row)
            msgs += lines
    return rows, msgs


def _judge_step(kind, step, steps, rec, arrays, calling, dtype, case):
    """(row, messages) of one step, as run.judge forms a golden case's rotation row."""
    where, layout = f"{case['id']} [{calling.layout}, {dtype}]", calling.layout
    qo, ko, mutated = rec["q"], rec["k"], rec["mutated"]
    faults = run.output_faults(qo, ko, dtype)
    qo, ko = (t.real.double() if t.is_complex() else t.double() for t in (qo, ko))
    pos, inv = torch.from_numpy(arrays["positions"]), torch.from_numpy(arrays["inv_freq"])
    att = float(arrays["attention_factor"])
    bounds = [T.bound(torch.from_numpy(arrays[n]), pos, inv, att, layout, dtype, True) for n in ("q", "k")]
    observed = [(qo[0], ko[0]), (ko[1], qo[1])]  # head 1 of q holds k's input (conventions.heads)
    judged = [run._judge([o], arrays, layout, bounds, calling.compare) for o in observed]
    ratio, err, tol = max(judged)
    msgs = [f"{where}: {run.MUTATES} in place: {', '.join(mutated)}"] if mutated else []
    msgs += [f"{where}: {f}" for f in faults]
    if ratio <= 1.0 and not mutated and not faults:
        return run._row(case, layout, kind, "pass", err, tol, ratio), msgs
    worse = observed[judged.index(max(judged))]
    extra = _extra(kind, step, steps, arrays, layout, dtype)
    bug = bugs.classify(step["case"], arrays, layout, worse, dtype, True, calling.compare, extra) if ratio > 1 else ""
    if not bug.startswith("unrecognised") and bug:
        faults = [f for f in faults if not f.startswith(bugs.NON_FINITE)]
    named = ([f"{run.MUTATES} ({', '.join(mutated)})"] if mutated else []) + faults + ([bug] if bug else [])
    msgs.append(f"{where}: FAIL: {'; '.join(named)}")
    return run._row(case, layout, kind, "FAIL", err, tol, ratio, "; ".join(named)), msgs


def run_usage(fn, calling, dtype, kinds=KINDS, types=cases.ROPE_TYPES, build=None):
    """(rows, messages) of the usage cases, observed and judged in this process (tests, the Python API; the CLI
    observes in a worker, usage_worker.py). calling: a conventions.Calling; types: the rope_types fn has."""
    return judge(observe(fn, build, calling, kinds, types, dtype), calling, dtype, types)
