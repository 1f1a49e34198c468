"""The verdict cannot be forged through the new conventions either: a rotation that raises SystemExit(0), one that
zeroes its inputs in place and one that hangs are each a named failure and exit 1, under the positions
convention with dense positions (the largest inputs handed over) and under the angles convention."""
import sys

import pytest

from harness.conformance import isolate
from harness.conformance.__main__ import main

FORGERIES = '''
import time
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
