"""The worked adapter example in docs/conformance.md runs as printed: its code block, executed as a module, passes
every golden case it has (plain RoPE over the whole head) and the shared-state and decode usage cases, and skips
the rest through NotImplementedError."""
import re
import types
from pathlib import Path

from harness.conformance import conventions as C
from harness.conformance import run, usage

DOC = Path(__file__).resolve().parent.parent / "docs" / "conformance.md"


def _example():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    mod = types.ModuleType("myrope")
    exec(compile(code, str(DOC), "exec"), mod.__dict__)
    return mod.rope


def test_docs_example_adapter_passes_what_it_has_and_skips_the_rest():
    rows, _ = run.run(_example(), "positions", "half", "bf16", rope_types=["default", "linear"])
    results = [r["result"] for r in rows]
    assert "FAIL" not in results and "error" not in results
    assert results.count("pass") >= 3 and results.count("skip") >= 1
    rows, _ = usage.run_usage(_example(), C.Calling("positions"), "bf16", kinds=("shared", "decode"),
                              types=("default",))
    assert {r["result"] for r in rows} == {"pass"}, rows
