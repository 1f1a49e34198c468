"""The CLI's `--usage` run: the usage cases (usage.py) observed in a worker process, judged in the CLI's own.

As for the golden cases (isolate.py), the code under test never runs beside a verdict: the worker imports --apply
(and --build), runs usage.observe and prints one line, MARK and the records as JSON (tensors as channel.py sends
them: dtype, shape, fp64 values); the CLI checks each record's shape and judges it (usage.judge). Simpler than
isolate.py: one worker for every usage case under one time limit (timeout per step, plus the import); a worker
that hangs, ends without the line or sends a malformed one gives an `error` (or, on a timeout, FAIL) row per
kind, and its whole session is killed at the end.
"""
import json
import os
import signal
import subprocess
import sys

from harness.conformance import usage
from harness.conformance.channel import pack_tensor, unpack_tensor

MARK = "@@harness-conformance-usage@@ "


def _pack(observed):
    return {kind: [{n: pack_tensor(v) if n in ("q", "k") else v for n, v in rec.items()} for rec in recs]
            for kind, recs in observed.items()}


def _unpack(packed, kinds, types, head_dim=usage.HEAD_DIM):
    """The worker's records back, each checked against its planned step (ValueError naming what is wrong)."""
    planned = dict(usage.plan(kinds, types))
    if not isinstance(packed, dict) or set(packed) != set(planned):
        raise ValueError(f"expected the kinds {sorted(planned)}")
    out = {}
    for kind, steps in planned.items():
        recs = packed[kind]
        if not isinstance(recs, list) or len(recs) != len(steps):
            raise ValueError(f"{kind}: expected {len(steps)} records")
        out[kind] = []
        for step, rec in zip(steps, recs):
            if isinstance(rec, dict) and (set(rec) == {"skip"} or set(rec) == {"error", "type"}) and all(
                    isinstance(v, str) for v in rec.values()):
                out[kind].append(dict(rec))
                continue
            if not isinstance(rec, dict) or set(rec) != {"q", "k", "mutated"} or not (
                    isinstance(rec["mutated"], list) and all(isinstance(n, str) for n in rec["mutated"])):
                raise ValueError(f"{kind}: a record is none of skip, error, (q, k, mutated)")
            shape = (2, len(step["pos"]), head_dim)
            out[kind].append({"q": unpack_tensor(rec["q"], shape, "q'"), "k": unpack_tensor(rec["k"], shape, "k'"),
                              "mutated": list(rec["mutated"])})
    return out


def run(spec, calling, timeout, echo=None):
    """(rows, messages) of the usage cases in a worker. spec: apply, build (or None), calling (Calling's fields),
    dtype, kinds, types."""
    n = sum(len(steps) for _, steps in usage.plan(spec["kinds"], spec["types"]))
    limit = timeout * (n + 1) + 30.0  # every step, and the import (isolate.IMPORT_MIN_S)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.conformance.usage_worker", json.dumps(spec)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True, text=True)
    why, result = None, "error"
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        why, result, out, err = f"timeout after {limit:g} s", "FAIL", "", ""
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the code under test started in the worker's session
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    lines = out.splitlines()
    said = [ln for ln in lines if not ln.startswith(MARK)] + err.splitlines()
    for line in said:
        print(line, file=sys.stderr)
    found = [ln[len(MARK):] for ln in lines if ln.startswith(MARK)]
    if why is None:
        try:
            if len(found) != 1:
                raise ValueError(f"the worker ended (exit code {proc.returncode}) without its records")
            msg = json.loads(found[0])
            if "bad" in msg:
                raise ValueError(msg["bad"])
            observed = _unpack(msg["records"], spec["kinds"], spec["types"])
        except ValueError as e:
            why = str(e)
    if why is not None:
        from harness.conformance import run as R
        rows = [R._row({"id": f"usage:{kind}"}, calling.layout, kind, result, bug=why) for kind in spec["kinds"]]
        msgs = [f"usage:{kind} [{calling.layout}, {spec['dtype']}]: {result}: {why}" for kind in spec["kinds"]]
    else:
        rows, msgs = usage.judge(observed, calling, spec["dtype"], spec["types"])
    for line in msgs:
        if echo:
            echo(line)
    return rows, msgs


def _worker(spec):
    from harness.conformance import adapters
    from harness.conformance import conventions as C
    from harness.conformance import run as R
    try:
        fn = adapters.resolve(spec["apply"], "--apply")
        build = adapters.resolve(spec["build"], "--build") if spec.get("build") else None
    except BaseException as e:
        print(MARK + json.dumps({"bad": str(e) if isinstance(e, ValueError) else adapters.describe(e)}), flush=True)
        return
    R.CATCH_INTERRUPT = True
    observed = usage.observe(fn, build, C.Calling(**spec["calling"]), spec["kinds"], spec["types"], spec["dtype"])
    print(MARK + json.dumps({"records": _pack(observed)}), flush=True)


if __name__ == "__main__":
    _worker(json.loads(sys.argv[1]))
    sys.stdout.flush()
    os._exit(0)  # no atexit or thread of the code under test runs after the records
