"""DESIGN.md §1 is the house's plan, and this test holds the package to it: every module of harness/ is in the
module table and in exactly one import group, and every import of a harness module, lazy ones included, points to
its own group or an earlier one, but for the lazy exceptions DESIGN lists by name."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "harness"
DESIGN = (ROOT / "DESIGN.md").read_text()
MODULES = sorted(p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py"))
ENTRY = {"__init__.py", "__main__.py"}  # the package's face and entry: above every group


def _groups():
    """{module: group} from the numbered list after 'Imports point one way': a module named exactly (`x.py`, `x`)
    takes that group; a package named (`x/`, `x/*`, `x`) gives its group to the modules it holds no exact mention
    of. `not `x``-phrases are left out."""
    text = DESIGN[DESIGN.index("Imports point one way"):DESIGN.index("Lazy exceptions")]
    exact, inside = {}, {}
    for num, body in re.findall(r"^(\d)\. (.*?)(?=^\d\. |\Z)", text, re.S | re.M):
        for name in re.findall(r"`([^`]+)`", re.sub(r"not `[^`]+`", "", body)):
            name = name.split(" ")[0].rstrip("*").rstrip("/")
            for m in MODULES:
                if m in (name, name + ".py"):
                    assert m not in exact or exact[m] == int(num), f"{m} named in groups {exact[m]} and {num}"
                    exact[m] = int(num)
                elif (PKG / name).is_dir() and m.startswith(name + "/"):
                    inside.setdefault(m, int(num))
    return {**inside, **exact}


GROUPS = _groups()
LAZY = set(re.findall(r"`([\w/.]+\.py)` -> `([\w/.]+\.py)`", DESIGN[DESIGN.index("Lazy exceptions"):]))


def _module_file(dotted):
    """'harness.report.budget' -> 'report/budget.py' (or a package's __init__.py); None when not a module."""
    p = "/".join(dotted.split(".")[1:])
    for c in (f"{p}.py", f"{p}/__init__.py"):
        if (PKG / c).exists():
            return c
    return None


def _imports(module):
    """[(imported module file, line, lazy)] of every harness import in module, inside functions too."""
    tree = ast.parse((PKG / module).read_text())
    lazy_lines = {n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            subs = [f"{node.module}.{a.name}" for a in node.names if _module_file(f"{node.module}.{a.name}")]
            names = subs or [node.module]  # `from pkg import mod`: the module is what is used
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == \
                "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            names = [node.args[0].value]
        for n in names:
            f = _module_file(n) if str(n).startswith("harness.") else None
            if f:
                out.append((f, node.lineno, node.lineno in lazy_lines or isinstance(node, ast.Call)))
    return out


def test_every_module_has_a_group():
    missing = [m for m in MODULES if m not in GROUPS and m not in ENTRY]
    assert not missing, f"DESIGN.md §1's import groups do not name {missing}: add each to its group"


def test_every_package_and_top_module_is_in_the_module_table():
    table = set(re.findall(r"^\| `harness/([\w/.]+?)/?`", DESIGN, re.M))
    table |= set(re.findall(r"^\| `harness/[\w.]+`, `harness/([\w.]+)`", DESIGN, re.M))  # a row naming two
    units = {m.split("/")[0] for m in MODULES if "/" in m} | {m for m in MODULES if "/" not in m} - ENTRY
    rows = {t.rstrip("/") for t in table}
    assert units - rows == set(), f"DESIGN.md's module table has no row for {sorted(units - rows)}"
    gone = sorted(r for r in rows if not (PKG / r).exists())
    assert not gone, f"DESIGN.md's module table names what harness/ does not hold: {gone}"


@pytest.mark.parametrize("module", [m for m in MODULES if m not in ENTRY])
def test_imports_follow_the_groups(module):
    up = [(t, line) for t, line, lazy in _imports(module)
          if t in GROUPS and GROUPS[t] > GROUPS[module] and not (lazy and (module, t) in LAZY)]
    assert not up, (f"{module} (group {GROUPS[module]}) imports from later groups: "
                    + ", ".join(f"{t} (group {GROUPS[t]}, line {line})" for t, line in up)
                    + "; DESIGN.md §1 lists the only lazy exceptions")


def test_the_lazy_exceptions_are_lazy_and_used():
    for module, target in LAZY:
        found = [lazy for t, _, lazy in _imports(module) if t == target]
        assert found and all(found), f"DESIGN.md lists {module} -> {target} as a lazy import; it is not one"
