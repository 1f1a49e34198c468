"""The harness reaches its ecosystem through public doors only: no module under harness/ imports a private module of
lm-eval or Hydra (`lm_eval._cli`, `hydra._internal`, any dotted part with a leading underscore, or a private name
from them), since those change without notice; and none patches at run time with unittest.mock (`mock.patch`),
which belongs in tests. Read from each file's syntax tree, so a comment or docstring naming them is no offence."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "harness"
GUARDED = ("lm_eval", "hydra")  # whose private modules and names are off limits

# Known offenders outside this change's scope, each with its reason: (file under harness/, kind). Only that kind is
# allowed in that file, so a new offence anywhere (one of these files included) fails; an entry whose file no longer
# offends fails too, so the list only shrinks. To be emptied as they are fixed.
ALLOWED = set()


def _private(dotted):
    """Whether a dotted module or name lies in a private part of a GUARDED package."""
    parts = dotted.split(".")
    return parts[0] in GUARDED and any(p.startswith("_") for p in parts[1:])


def _mock(dotted):
    return dotted in ("mock", "unittest.mock") or dotted.startswith(("mock.", "unittest.mock."))


def offences(source):
    """[(line, kind, what)] of source: kind 'private' (an import of a private lm-eval or Hydra module or name,
    import_module / __import__ included) or 'mock' (unittest.mock or mock imported, or a `mock.patch...` call)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private(alias.name):
                    out.append((node.lineno, "private", f"import {alias.name}"))
                if _mock(alias.name):
                    out.append((node.lineno, "mock", f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if _private(f"{node.module}.{alias.name}"):
                    out.append((node.lineno, "private", f"from {node.module} import {alias.name}"))
                if _mock(f"{node.module}.{alias.name}"):
                    out.append((node.lineno, "mock", f"from {node.module} import {alias.name}"))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str) and getattr(node.func, "attr", getattr(node.func, "id", None)) \
                in ("import_module", "__import__") and _private(node.args[0].value):
            out.append((node.lineno, "private", f"import_module({node.args[0].value!r})"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("patch") and \
                isinstance(node.value, ast.Name) and node.value.id == "mock":
            out.append((node.lineno, "mock", f"mock.{node.attr}"))
    return out


def _found():
    """{(file under harness/, kind): [(line, what)]} over every .py file under harness/."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, kind, what in offences(path.read_text()):
            found.setdefault((path.relative_to(PACKAGE).as_posix(), kind), []).append((line, what))
    return found


def test_no_private_lm_eval_or_hydra_modules_and_no_mock_under_harness():
    found = _found()
    new = {f"harness/{f}: {kind}": hits for (f, kind), hits in found.items() if (f, kind) not in ALLOWED}
    assert not new, f"private lm-eval/Hydra modules or unittest.mock in production code (use the public API): {new}"
    stale = sorted(f"harness/{f}: {kind}" for f, kind in ALLOWED if (f, kind) not in found)
    assert not stale, f"no longer offending, remove from ALLOWED: {stale}"


@pytest.mark.parametrize("source, kinds", [
    ("from lm_eval._cli.harness import HarnessCLI", ["private"]),
    ("import lm_eval._cli.utils as u", ["private"]),
    ("from lm_eval.tasks._yaml_loader import load_yaml", ["private"]),
    ("from lm_eval.__main__ import cli_evaluate", ["private"]),
    ("from hydra._internal.utils import get_args", ["private"]),
    ("from hydra import _internal", ["private"]),
    ("import importlib\nimportlib.import_module('hydra._internal.core_plugins')", ["private"]),
    ("from unittest import mock", ["mock"]),
    ("import unittest.mock", ["mock"]),
    ("from unittest.mock import patch", ["mock"]),
    ("import mock", ["mock"]),
    ("mock.patch.object(a, 'b', c)", ["mock"]),
    ("import lm_eval\nfrom lm_eval import simple_evaluate\nfrom lm_eval.tasks import TaskManager", []),
    ("from hydra.core.hydra_config import HydraConfig", []),
    ("import logging\nlogging.getLogger('lm_eval.tasks._index')  # a logger's name, not an import", []),
    ("'''never mock.patch lm_eval._cli'''", []),
    ("from . import _private", []),
    ("from unittest import mock_free_name", []),
])
def test_what_counts_as_an_offence(source, kinds):
    assert sorted(k for _, k, _ in offences(source)) == kinds

