"""The layout of tests/: no test module (test_*.py) imports another one (shared fixtures live in tests/conftest.py,
shared constants and functions in modules not named test_*.py, e.g. tests/tiny_runs.py), and the modules under
tests/ do not import each other in a cycle. Read with `ast`, nothing is imported."""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def modules(root):
    """{dotted name relative to root: path} of every .py file under root."""
    return {".".join(p.relative_to(root).with_suffix("").parts): p for p in sorted(root.rglob("*.py"))}


def imports(root):
    """{module: set of the modules under root it imports}, at any depth of its code (a function's import counts).
    `tests.x`, `from tests import x`, a relative import and a bare `x` that names a module beside the importer
    (pytest puts a test file's folder on sys.path) all count."""
    mods, prefix = modules(root), root.name
    graph = {}
    for name, path in mods.items():
        package = name.split(".")[:-1]
        found = set()

        def absolute(parts):
            """`tests.x.y` is x.y under root; a bare `x.y` is beside the importer (its folder is on sys.path)."""
            return parts[1:] if parts[:1] == [prefix] else package + parts

        def add(base, names):
            """base (a module path as parts under root) and each base.name, where such a module exists."""
            for target in [".".join(base)] + [".".join(base + [n]) for n in names]:
                if target in mods and target != name:
                    found.add(target)

        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(absolute(alias.name.split(".")), ())
            elif isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names]
                tail = node.module.split(".") if node.module else []
                if node.level:  # relative: from the importer's package, level - 1 packages up
                    add(package[:len(package) - node.level + 1] + tail, names)
                else:
                    add(absolute(tail), names)
        graph[name] = found
    return graph


def _is_test(module):
    return module.rsplit(".", 1)[-1].startswith("test_")


def cross_test_imports(root):
    """["a imports b"] for each test module a under root that imports a test module b."""
    return [f"{a} imports {b}" for a, bs in sorted(imports(root).items()) if _is_test(a)
            for b in sorted(bs) if _is_test(b)]


def cycle(graph):
    """One import cycle [a, b, ..., a] in graph, or None."""
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n, path + [n])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def test_no_test_module_imports_another():
    assert cross_test_imports(TESTS) == [], (
        "a test module imports another: move what it shares into tests/conftest.py (fixtures) or a module not "
        "named test_*.py (constants, functions)")


def test_the_modules_under_tests_import_no_cycle():
    assert cycle(imports(TESTS)) is None


def test_the_checks_see_every_form_of_import(tmp_path):
    root = tmp_path / "tests"
    (root / "sub").mkdir(parents=True)
    files = {
        "helpers.py": "import os\nfrom tests.support import X\n",
        "support.py": "X = 1\n",
        "test_a.py": "def f():\n    from tests.test_b import y\n",  # inside a function
        "test_b.py": "from tests import test_c as other\nimport helpers\n",
        "test_c.py": "import tests.test_d\n",
        "test_d.py": "from test_e import z\n",  # bare, as pytest's sys.path allows
        "test_e.py": "from tests.helpers import X\n",
        "sub/test_f.py": "from . import test_g\nfrom ..support import X\n",
        "sub/test_g.py": "",
        "cyc_one.py": "from tests import cyc_two\n",
        "cyc_two.py": "import tests.cyc_one\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    assert cross_test_imports(root) == ["sub.test_f imports sub.test_g", "test_a imports test_b",
                                         "test_b imports test_c", "test_c imports test_d", "test_d imports test_e"]
    graph = imports(root)
    assert graph["helpers"] == {"support"} and graph["test_b"] == {"test_c", "helpers"}
    assert graph["sub.test_f"] == {"sub.test_g", "support"}
    assert cycle(graph) == ["cyc_one", "cyc_two", "cyc_one"]
    (root / "cyc_two.py").write_text("")
    assert cycle(imports(root)) is None
