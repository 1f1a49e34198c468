"""Kernel benchmarks run only in `make bench` (pytest-benchmark enabled); `make test` skips them."""
import pytest


def pytest_collection_modifyitems(config, items):
    if config.getoption("benchmark_disable", default=False) and not config.getoption("benchmark_enable", default=False):
        skip = pytest.mark.skip(reason="timing runs in `make bench`; make test passes --benchmark-disable")
        for item in items:
            if "tests/bench/" in str(item.fspath):
                item.add_marker(skip)
