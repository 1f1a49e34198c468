"""Module structure and portability of the rotary implementations.

Imports: no cycle among harness.rope's modules (nor among harness.measure's), counting imports inside
functions and module names handed to importlib, so a lazy import cannot hide one; every module imports
first in a fresh interpreter. Portability: where the C kernel cannot be built (no compiler, a compile
error, not x86), impl='auto' on CPU runs `eager`, says so in one stderr line per process, and rows
record 'eager'; impl='cpu' fails with one line naming the reason and the valid choices.
"""
import ast
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys

import pytest
import torch

import harness.rope.cpu as cpu
from harness.rope.apply import IMPLS, apply_rotary_qk, resolved_params, rotary_table
from harness.rope.frequencies import frequencies

ROOT = pathlib.Path(__file__).resolve().parents[1]
X86 = platform.machine().lower() in cpu.X86


def _graph(package):
    """{module: set of modules of `package` it imports} from the source, by statement or by name string."""
    folder = ROOT / package.replace(".", "/")
    modules = {package: folder / "__init__.py",
               **{f"{package}.{p.stem}": p for p in folder.glob("*.py") if p.stem != "__init__"}}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importing module's package
                    pkg = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
                    base = ".".join([*pkg.split(".")[: len(pkg.split(".")) - node.level + 1], *filter(None, [base])])
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value]  # importlib.import_module("harness.rope.cpu")
            else:
                continue
            found |= {n for n in names if n in modules and n != name}
        graph[name] = found
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt, path + [nxt])):
                return found
        state[node] = "done"
        return None

    return next((c for node in sorted(graph) if node not in state and (c := visit(node, [node]))), None)


@pytest.mark.parametrize("package", ["harness.rope", "harness.measure", "harness.bench"])
def test_no_import_cycle(package):
    graph = _graph(package)
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


def test_rope_layering():
    """The formulas import no other rope module; no kernel imports the dispatcher or the front end; the
    benchmark's constants import no other bench module and the report does not import the benchmark; the run-level
    measurements never import the kernel lab."""
    g = _graph("harness.rope")
    assert g["harness.rope.rotation"] == set()
    for kernel in ("cpu", "triton_rope", "compiled"):
        assert not g[f"harness.rope.{kernel}"] & {"harness.rope", "harness.rope.apply", "harness.rope.fused"}
    b = _graph("harness.bench")
    assert b["harness.bench.kernel_spec"] == set() and "harness.bench.kernel_bench" not in b["harness.bench.kernel_report"]
    lab = [p.name for p in (ROOT / "harness/measure").glob("*.py") for node in ast.walk(ast.parse(p.read_text()))
           if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
               n.startswith("harness.bench") for n in [getattr(node, "module", None) or ""]
               + [a.name for a in node.names] + [f"{getattr(node, 'module', '')}.{a.name}" for a in node.names])]
    assert not lab, f"run-level measurements that import the kernel lab: {lab}"


def test_each_module_imports_first():
    """A cycle shows as an ImportError of a partly initialised module when its other end is imported first."""
    names = [f"harness.rope.{p.stem}" for p in sorted((ROOT / "harness/rope").glob("*.py")) if p.stem != "__init__"]
    names += ["harness.bench.kernel_bench", "harness.bench.kernel_report", "harness.bench.kernel_spec"]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    for m in [m for m in sys.modules if m == 'harness' or m.startswith('harness.')]:\n"
            "        del sys.modules[m]\n"
            "    importlib.import_module(name)\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_build_failures_are_one_line(tmp_path, monkeypatch):
    """No compiler, a compile error, a non-x86 CPU: each is one line (the compiler's output goes to a log)."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    if X86:
        monkeypatch.setenv("HARNESS_CC", str(tmp_path / "no-such-cc"))
        with pytest.raises(cpu.Unavailable, match=r"C compiler '.*no-such-cc' cannot be run \(No such file"):
            cpu._load()
        monkeypatch.setenv("HARNESS_CC", "gcc -include /no/such/header.h")
        with pytest.raises(cpu.Unavailable, match=r"failed: .*error.*no/such/header\.h.*\(full output: ") as e:
            cpu._load()
        assert "\n" not in str(e.value) and "header.h" in next(tmp_path.glob("*.log")).read_text()
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    with pytest.raises(cpu.Unavailable, match="x86 AVX intrinsics and this CPU is arm64"):
        cpu._load()
    assert not list(tmp_path.glob("*.so"))


# Run in a fresh interpreter with no usable compiler and an empty cache, so no built kernel is reused and
# the once-per-process message is observable: the Rope encoding's rotate (apply_rotary_qk, auto), xpos
# (apply_rotary, auto), backward, the row params, and impl='cpu'.
NO_CC = r"""
import json, sys, torch
from harness.encodings import build
from harness.rope.apply import apply_rotary_qk, resolved_params
inputs = torch.load(sys.argv[1])
q, k = inputs["q"].requires_grad_(), inputs["k"].requires_grad_()
rq, rk = build("rope", head_dim=32, layout="interleaved").rotate(q, k, torch.arange(q.shape[-2]))
(rq.sum() + rk.sum()).backward()
out = dict(rq=rq.detach(), rk=rk.detach(), auto=apply_rotary_qk(inputs["q"], inputs["k"], inputs["cos"], inputs["sin"]))
build("xpos", head_dim=32).rotate(inputs["q"], inputs["k"], torch.arange(q.shape[-2]))
torch.save(out, sys.argv[2])
try:
    apply_rotary_qk(inputs["q"], inputs["k"], inputs["cos"], inputs["sin"], impl="cpu")
    error = None
except RuntimeError as e:
    error = str(e)
print(json.dumps(dict(params=resolved_params({"impl": "auto", "base": 10000.0}, "cpu"), error=error)))
"""


def test_auto_falls_back_to_eager_without_a_compiler(tmp_path):
    pos = torch.arange(64)
    inv_freq, _ = frequencies("default", 32, 10000.0)
    cos, sin = rotary_table(inv_freq, pos)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 64, 32, generator=g), torch.randn(2, 1, 64, 32, generator=g)
    torch.save(dict(q=q, k=k, cos=cos, sin=sin), tmp_path / "in.pt")
    env = dict(os.environ, HARNESS_CC=str(tmp_path / "no-such-cc"), HARNESS_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", NO_CC, str(tmp_path / "in.pt"), str(tmp_path / "out.pt")],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    told = [line for line in run.stderr.splitlines() if line.startswith("harness.rope:")]
    reason = f"C compiler '{tmp_path / 'no-such-cc'}' cannot be run" if X86 else "x86 AVX intrinsics"
    assert len(told) == 1 and told[0].startswith("harness.rope: impl='auto' uses 'eager' on this CPU, not the "
                                                 "C kernel 'cpu': ") and reason in told[0], run.stderr
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["params"] == {"impl": "eager", "base": 10000.0}  # what a row records
    assert got["error"].startswith("rope impl 'cpu' cannot run here: ") and reason in got["error"]
    assert got["error"].endswith("valid choices here: ['auto', 'reference', 'eager', 'complex', 'compiled', "
                                 "'triton', 'fastest']") and "\n" not in got["error"]
    assert not list((tmp_path / "cache").glob("*.so"))
    # The fallback is the eager implementation bit for bit; the C kernel (this process, where it builds)
    # agrees with it only to the documented bound, 2 eps(fp32) (|a| + |b|) per pair each from the exact
    # rotation (tests/test_rope_kernels.py): gcc contracts a*c - b*s into an FMA, eager rounds each product.
    out = torch.load(tmp_path / "out.pt")
    enc = IMPLS["eager"]
    c2, s2 = rotary_table(frequencies("default", 32, 10000.0)[0], pos)
    assert torch.equal(out["rq"], enc(q, c2, s2, "interleaved")) and torch.equal(out["rk"], enc(k, c2, s2, "interleaved"))
    assert all(torch.equal(a, enc(x, cos, sin)) for a, x in zip(out["auto"], (q, k)))
    if cpu.unavailable() is None:
        for a, x in zip(out["auto"], (q, k)):
            kernel = IMPLS["cpu"](x, cos, sin)
            mag = (x[..., :16].abs() + x[..., 16:].abs()).repeat(1, 1, 1, 2).double()
            assert ((kernel.double() - a.double()).abs() <= 4 * torch.finfo(torch.float32).eps * mag).all()


def test_rows_record_the_resolved_impl():
    """impl='auto' in a row is what ran on the device (the C kernel with its dispatch level); explicit names
    and other params are left alone."""
    auto = {"impl": "cpu", "cpu_isa": cpu.isa()} if cpu.unavailable() is None else {"impl": "eager"}
    assert resolved_params({"impl": "auto", "layout": "half"}, "cpu") == {**auto, "layout": "half"}
    assert resolved_params({"impl": "fastest"}, "cpu") == auto
    assert resolved_params({"impl": "complex"}, "cpu") == {"impl": "complex"}
    assert resolved_params({"alpha": 1.0}, "cpu") == {"alpha": 1.0}


def test_explicit_cpu_works_where_it_builds():
    if cpu.unavailable() is not None:
        pytest.skip(f"the C kernel cannot be built here: {cpu.unavailable()}")
    x = torch.randn(1, 2, 8, 16)
    cos, sin = rotary_table(frequencies("default", 16, 10000.0)[0], torch.arange(8))
    assert torch.equal(apply_rotary_qk(x, x, cos, sin, impl="cpu")[0], IMPLS["cpu"](x, cos, sin))


# --- the kernel cache: verified before loading, and a fallback where it cannot be written ---

needs_kernel = pytest.mark.skipif(cpu.unavailable() is not None, reason=f"no C kernel here: {cpu.unavailable()}")


def _cached(cache):
    """(the library the sidecar names, its recorded sha256) in cache."""
    meta = json.loads(next(cache.glob("rope_cpu_*.json")).read_text())
    return cache / meta["library"], meta["sha256"]


def _sha(path):
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _plant_other_library(tmp_path, at):
    """A real shared object built from other sources, written over `at`."""
    src = tmp_path / "other.c"
    src.write_text("int rope_isa_supported(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(at)], check=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache dir holding the kernel built from these sources (once for the module), with its sidecar."""
    cache = tmp_path_factory.mktemp("built")
    cc = os.environ.get("HARNESS_CC", "gcc")
    cpu._build(cc, cache, cpu._key(cc))
    return cache


@needs_kernel
@pytest.mark.parametrize("fault, says", [
    ("truncated", "is not the library that was built (truncated or replaced"),
    ("other sources", "is not the library that was built (truncated or replaced"),
    ("not a shared object", "is not a shared object"),
    ("sidecar of other sources", "records other sources, compiler or flags"),
    ("garbage sidecar", "does not read"),
    ("sidecar naming a path", "names no library"),
])
def test_a_cached_library_not_built_from_these_sources_is_rebuilt(built, tmp_path, monkeypatch, fault, says):
    cache = tmp_path / "cache"
    shutil.copytree(built, cache)  # built, never loaded: a loaded file must not change under the process
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    monkeypatch.setattr(cpu, "_WHERE", [])
    key = cpu._key(os.environ.get("HARNESS_CC", "gcc"))
    lib, sha = _cached(cache)
    assert cpu._verified(cache, key) == (lib, None) and _sha(lib) == sha and lib.read_bytes()[:4] == b"\x7fELF"
    meta = next(cache.glob("rope_cpu_*.json"))
    record = json.loads(meta.read_text())
    if fault == "truncated":
        os.truncate(lib, lib.stat().st_size // 2)
    elif fault == "other sources":
        _plant_other_library(tmp_path, lib)
    elif fault == "not a shared object":
        lib.write_text("not a library")
        meta.write_text(json.dumps({**record, "sha256": _sha(lib)}))  # even with a matching hash
    elif fault == "sidecar of other sources":
        meta.write_text(json.dumps({**record, "key": "0" * 64}))
    elif fault == "garbage sidecar":
        meta.write_text("{\"key\": ")
    else:
        meta.write_text(json.dumps({**record, "library": "../../etc/passwd"}))
    assert cpu._verified(cache, key)[0] is None and says in cpu._verified(cache, key)[1]
    loaded = cpu._load()
    lib2, sha2 = _cached(cache)
    assert cpu.where() == lib2 and _sha(lib2) == sha2 and loaded.rope_isa_supported() >= 0
    assert cpu._verified(cache, key) == (lib2, None)


@needs_kernel
def test_a_library_cached_by_older_code_without_a_sidecar_is_not_loaded(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    monkeypatch.setattr(cpu, "_WHERE", [])
    key = cpu._key("gcc")
    (cache / f"rope_cpu_{key[:16]}.so").write_text("old, unverifiable")  # the old cache's name
    cpu._load()
    assert cpu.where() != cache / f"rope_cpu_{key[:16]}.so" and cpu._verified(cache, key)[0] == cpu.where()


def _unwritable_home(tmp_path):
    """A $HOME under which nothing can be created: read-only where permissions hold, else (root ignores them) a
    path under a file."""
    if os.geteuid() != 0:
        home = tmp_path / "home"
        home.mkdir(mode=0o555)
        return home
    (tmp_path / "afile").write_text("")
    return tmp_path / "afile" / "home"


READ_ONLY_HOME = r"""
import json
from harness.encodings import build
import torch
from harness.rope import cpu
from harness.rope.apply import resolved_params
q = torch.randn(1, 2, 8, 16)
build("rope", head_dim=16).rotate(q, q, torch.arange(8))
print(json.dumps(dict(params=resolved_params({"impl": "auto"}, "cpu"), where=str(cpu.where()))))
"""


@needs_kernel
def test_an_unwritable_home_builds_the_kernel_under_the_temp_dir(tmp_path):
    """A read-only $HOME (or one under a file) does not fail a rope run: the kernel is built under a private dir in
    the temp dir, said once on stderr, and rows record the C kernel that ran."""
    home, tmp = _unwritable_home(tmp_path), tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_CACHE"}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    run = subprocess.run([sys.executable, "-c", READ_ONLY_HOME], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["params"]["impl"] == "cpu" and got["params"]["cpu_isa"] in cpu.ISAS
    assert got["where"].startswith(str(tmp / f"harness-{os.getuid()}" / "rope_cpu_"))
    told = [line for line in run.stderr.splitlines() if line.startswith("harness.rope:")]
    assert len(told) == 1 and str(home / ".cache" / "harness") in told[0] and f"built it under {tmp}" in told[0]
    assert (tmp / f"harness-{os.getuid()}").stat().st_mode & 0o777 == 0o700


def test_no_writable_dir_at_all_is_unavailable_in_one_line(tmp_path, monkeypatch):
    if not X86:
        pytest.skip("the kernel is x86 only: unavailable for that reason first")
    (tmp_path / "afile").write_text("")
    monkeypatch.setattr(cpu, "_caches", lambda: [tmp_path / "afile" / "a", tmp_path / "afile" / "b"])
    with pytest.raises(cpu.Unavailable, match=r"^no writable dir to build the kernel in \(.*afile/a: Not a "
                                              r"directory; .*afile/b: Not a directory\); set HARNESS_CACHE") as e:
        cpu._load()
    assert "\n" not in str(e.value)


def test_a_shared_temp_dir_someone_else_owns_is_not_used(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a dir another user owns")
    other = tmp_path / "harness-other"
    other.mkdir(mode=0o777)
    other.chmod(0o777)
    with pytest.raises(PermissionError, match="is not this user's alone"):
        cpu._private(other)
    os.chown(other, 12345, 12345)
    other.chmod(0o700)
    with pytest.raises(PermissionError, match=r"is not this user's alone \(owner 12345"):
        cpu._private(other)
