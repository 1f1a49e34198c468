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


@pytest.mark.parametrize("package", ["harness.rope", "harness.measure"])
def test_no_import_cycle(package):
    graph = _graph(package)
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


def test_rope_layering():
    """The formulas import no other rope module; no kernel imports the dispatcher or the front end; the
    benchmark's constants import no other measure module and the report does not import the benchmark."""
    g = _graph("harness.rope")
    assert g["harness.rope.rotation"] == set()
    for kernel in ("cpu", "triton_rope", "compiled"):
        assert not g[f"harness.rope.{kernel}"] & {"harness.rope", "harness.rope.apply", "harness.rope.fused"}
    m = _graph("harness.measure")
    assert m["harness.measure.kernel_spec"] == set() and "harness.measure.kernel_bench" not in m["harness.measure.kernel_report"]


def test_each_module_imports_first():
    """A cycle shows as an ImportError of a partly initialised module when its other end is imported first."""
    names = [f"harness.rope.{p.stem}" for p in sorted((ROOT / "harness/rope").glob("*.py")) if p.stem != "__init__"]
    names += ["harness.measure.kernel_bench", "harness.measure.kernel_report", "harness.measure.kernel_spec"]
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
