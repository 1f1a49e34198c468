"""Fixtures shared by the test modules (pytest finds them here; no test module imports another).
Helpers that are constants or plain functions live in modules that are not test modules: tests/tiny_runs.py,
harness/bench/gate_support.py, tests/task_checks.py."""
import os

import pytest

from tests import tiny_runs


def pytest_configure(config):
    """Under pytest-xdist (`make test`: -n 2, one worker per core) each worker computes with one torch thread. With
    torch's default (one thread per core) the two workers ran four compute threads on two cores, and OpenMP's
    spinning threads burnt the difference: the in-process model, encoding and precision tests took 112 CPU-s with
    the default and 37 CPU-s with one thread each (64 s -> 24 s of wall). Tests that need several threads set them
    (test_rope_avx512's threaded kernel check); subprocesses keep torch's default; the serial run (no workers) is
    untouched."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch
        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny():
    """tests.tiny_runs.tiny: tiny(tmp_path, **{"dotted.key": value}) is a config that runs in about a second.
    Session-scoped (it is a function), so module-scoped fixtures may use it too."""
    return tiny_runs.tiny
