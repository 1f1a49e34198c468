"""The verdict cannot be forged through the new conventions either: a rotation that raises SystemExit(0), one that
zeroes its inputs in place and one that hangs are each a named failure and exit 1, under the positions
convention with dense positions (the largest inputs handed over) and under the angles convention. Nor from inside
the worker: code that replaces the suite's tolerance and judging functions there, or writes pass rows on the
worker's channel to the CLI, still fails (the CLI judges raw outputs in its own process); outputs in another
dtype than the input's, or complex, are named failures; a process the code starts in a session of its own neither
outlives the run nor keeps a caller that captures the CLI's output waiting."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.conformance import isolate
from harness.conformance.__main__ import main

FORGERIES = '''
import os
import sys
import time

import torch
from conformance_kit import knobs, rotary
from harness.rope.frequencies import frequencies


def _right(q, k, positions, rope):
    inv, att = frequencies(rope["rope_type"], rope["head_dim"], rope["rope_theta"], int(positions.max()) + 1,
                           **knobs(rope))
    return rotary(q, k, positions, inv, att)


def exits_0(q, k, positions, *, rope):
    raise SystemExit(0)


def zeroes_inputs(q, k, positions, *, rope):
    out = _right(q, k, positions, rope)
    q.zero_()
    k.zero_()
    return out


def hangs(q, k, positions, *, rope):
    time.sleep(3600)


def angles_zeroes_theta(x, theta):
    out = x.clone()
    theta.zero_()
    return out


def angles_exits_0(x, theta):
    raise SystemExit(0)


def replaces_the_judge(q, k, positions, *, rope):
    # every verdict function the worker could hold, told to pass; the rotation itself left out
    import harness.conformance.run as R
    import harness.conformance.tolerance as T
    T.ratio = lambda *a, **kw: 0.0
    R.judge = lambda rec, calling, case, arrays, dtype: ([R._row(case, calling.layout, "rotation", "pass",
                                                                 0.0, 1.0, 0.0)], [])
    R.ok = lambda rows: True
    return q.clone(), k.clone()


def writes_pass_rows(q, k, positions, *, rope):
    # the worker's channel is the fd in its argv; its case list is in the spec beside it
    import json
    fd, spec = int(sys.argv[1]), json.loads(sys.argv[2])
    for cid in spec["cases"]:
        row = {"case": cid, "layout": "half", "check": "rotation", "max_err": 0.0, "tol": 1.0, "ratio": 0.0,
               "result": "pass", "bug": ""}
        os.write(fd, (json.dumps({"event": "start", "case": cid}) + "\\n").encode())
        os.write(fd, (json.dumps({"event": "done", "case": cid, "rows": [row], "msgs": []}) + "\\n").encode())
    os.write(fd, b'{"event": "end"}\\n')
    os._exit(0)


def returns_fp64(q, k, positions, *, rope):
    qo, ko = _right(q, k, positions, rope)
    return qo.double(), ko.double()


def returns_complex(q, k, positions, *, rope):
    qo, ko = _right(q, k, positions, rope)
    return qo.to(torch.complex64), ko.to(torch.complex64)


def leaves_a_child(q, k, positions, *, rope):
    # a sleeper in a session of its own, holding the worker's stdout and stderr
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
    with open(os.environ["CHILD_PID_FILE"], "a") as f:
        f.write(f"{child.pid}\\n")
    return _right(q, k, positions, rope)
'''


@pytest.fixture
def forgeries(tmp_path, monkeypatch):
    (tmp_path / "conformance_forgeries.py").write_text(FORGERIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))  # conformance_kit
    monkeypatch.delitem(sys.modules, "conformance_forgeries", raising=False)


def _cli(capsys, fn, *argv):
    rc = main(["--apply", f"conformance_forgeries:{fn}", "--rope-type", "dynamic", *argv])
    out, err = capsys.readouterr()
    return rc, [line for line in out.splitlines() if line.startswith("dynamic-d")], out, err


@pytest.mark.parametrize("fn, argv, named", [
    ("exits_0", ["--convention", "positions"], "error  SystemExit"),
    ("zeroes_inputs", ["--convention", "positions", "--positions", "dense"], "FAIL   mutates its inputs (q, k)"),
    ("angles_exits_0", ["--convention", "angles"], "error  SystemExit"),
    ("angles_zeroes_theta", ["--convention", "angles"], "FAIL   mutates its inputs (theta)")])
def test_forgery_is_a_named_failure_and_exit_1(forgeries, capsys, fn, argv, named):
    rc, rows, out, _ = _cli(capsys, fn, *argv)
    assert rc == 1 and len(rows) == 12 and all(named in r for r in rows), out
    assert "0 pass" in out.splitlines()[-1]


def test_a_hang_is_a_timeout_fail_and_exit_1(forgeries, capsys, monkeypatch):
    monkeypatch.setattr(isolate, "MAX_STOPS", 1)
    rc, rows, out, err = _cli(capsys, "hangs", "--convention", "positions", "--timeout", "1")
    assert rc == 1 and "FAIL   timeout after 1 s" in rows[0] and all("not run" in r for r in rows[1:]), out


@pytest.mark.parametrize("fn, named", [
    ("replaces_the_judge", "FAIL   "),
    ("writes_pass_rows", "error  worker ended: its channel to the suite broke")])
def test_code_under_test_cannot_forge_the_verdict_from_inside_the_worker(forgeries, capsys, fn, named):
    rc, rows, out, err = _cli(capsys, fn, "--convention", "positions")
    assert rc == 1 and rows and named in rows[0], out + err
    assert "0 pass" in out.splitlines()[-1], out


@pytest.mark.parametrize("fn, dtype, named", [
    ("returns_fp64", "bf16", "FAIL   wrong output dtype (float64 for a bfloat16 input)"),
    ("returns_fp64", "fp32", "FAIL   wrong output dtype (float64 for a float32 input)"),
    ("returns_complex", "fp32", "FAIL   wrong output dtype (complex64 for a float32 input); complex output")])
def test_outputs_in_another_dtype_or_complex_are_named_failures(forgeries, capsys, fn, dtype, named):
    rc, rows, out, _ = _cli(capsys, fn, "--convention", "positions", "--dtype", dtype)
    assert rc == 1 and len(rows) == 12 and all(named in r for r in rows), out


def test_a_child_in_its_own_session_is_killed_and_holds_no_output(forgeries, tmp_path):
    pids = tmp_path / "pids"
    env = {**os.environ, "CHILD_PID_FILE": str(pids),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parent), str(Path.cwd())])}
    try:  # capture_output waits for every holder of the pipes: the sleeper would hold them for an hour
        p = subprocess.run([sys.executable, "-m", "harness.conformance", "--apply",
                            "conformance_forgeries:leaves_a_child", "--rope-type", "dynamic", "--convention",
                            "positions"], capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        children = [int(x) for x in pids.read_text().split()]
        assert len(children) == 12
        for pid in children:
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], pid
    finally:
        for pid in (int(x) for x in pids.read_text().split()) if pids.exists() else ():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
