"""The fault-injection battery (tests/faults.py, `make faults`) under pytest: one test per case.

Marked `faults` and left out of `make test` by pyproject's addopts (`-m "not faults"`): the battery takes
minutes. Run it with `pytest -m faults tests/test_faults.py`. A case marked known-failing in
tests/fault_cases.py is a strict xfail: once the code is fixed it XPASSes and fails, so the mark is removed."""
import pytest

from tests import faults
from tests.fault_cases import CASES

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def battery(request, tmp_path_factory):
    """Every selected case (`-k` selects cases too), run once, 2 at a time."""
    chosen = {item.callspec.params["case"].name for item in request.session.items
              if "case" in getattr(getattr(item, "callspec", None), "params", {})}
    cases = [c for c in CASES if c.name in chosen]
    return {r["case"].name: r for r in faults.battery(cases, tmp_path_factory.mktemp("faults"), jobs=2)}


def _param(c):
    known = [pytest.mark.xfail(reason=c.known, strict=True)] if c.known else []
    return pytest.param(c, id=faults.slug(c.name), marks=known)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case_is_clean(battery, case):
    r = battery[case.name]
    if r["skipped"]:
        pytest.skip(r["skipped"])
    assert not r["problems"], r["problems"]
