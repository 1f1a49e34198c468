"""Fixtures shared by the test modules (pytest finds them here; no test module imports another).
Helpers that are constants or plain functions live in modules that are not test modules: tests/tiny_runs.py,
tests/gate_support.py, tests/task_checks.py."""
import pytest

from tests import tiny_runs


@pytest.fixture(scope="session")
def tiny():
    """tests.tiny_runs.tiny: tiny(tmp_path, **{"dotted.key": value}) is a config that runs in about a second.
    Session-scoped (it is a function), so module-scoped fixtures may use it too."""
    return tiny_runs.tiny
