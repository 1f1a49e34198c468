"""The conformance suite in a library's own pytest run, a few lines of its CI:

    pytest -p harness.conformance.pytest_plugin --rope-conformance mylib.rotary:apply_rotary_pos_emb \
        [--rope-convention hf] [--rope-dtype fp32,bf16]

or `pytest_plugins = ["harness.conformance.pytest_plugin"]` in the library's root conftest.py. It is not an
auto-loaded entry point, so it adds nothing to the pytest runs of whoever merely installs the harness.

Each golden case (harness/conformance/golden.npz) in each dtype becomes one test item,
`rope_conformance[<case id>-<dtype>]`: it fails with the suite's table of that case (max error, the ulp-derived
bound, the named bug class) when any check FAILs or errors, is skipped when every check is (the adapter raised
NotImplementedError), and passes otherwise. The options are the CLI's (`python -m harness.conformance --help`
prints the adapter contract): the calling-convention flags map one to one. The code under test runs in the pytest
process, as the library's other tests do; the CLI's worker process, time limit and crash isolation are the CLI's
(run that for a library that may hang or crash).

With `--rope-convention positions` (code that builds its own table from positions) the usage cases come too, one
item per kind and dtype, `rope_usage[<kind>-<dtype>]` (harness/conformance/usage.py): shared state (instances of
other bases in one process), decode (one position at a time against the whole sequence) and, with `--rope-build
MODULE:FUNCTION` (rope dict -> the library's nn.Module, forward(q, k, positions)), the module cast to bf16 / fp16
after it is built in fp32. `--rope-usage` picks the kinds (default all; `none` for the golden cases alone)."""
import dataclasses

import pytest

CALLING = ("convention", "layout", "qk_layout", "width", "order", "compare", "positions", "array")


def pytest_addoption(parser):
    g = parser.getgroup("rope-conformance", "RoPE conformance (harness.conformance)")
    g.addoption("--rope-conformance", metavar="MODULE:FUNCTION", default=None,
                help="the rotation under test: run every golden RoPE case on it (python -m harness.conformance "
                     "--help: the adapter contract)")
    g.addoption("--rope-frequencies", metavar="MODULE:MAPPING", default=None,
                help="a mapping rope_type -> inv_freq function, judged too")
    for name in CALLING:
        g.addoption(f"--rope-{name.replace('_', '-')}", default=None, help=f"the calling convention's {name}")
    g.addoption("--rope-dtype", default="fp32", help="comma-separated dtypes among fp32, bf16, fp16 (default fp32)")
    g.addoption("--rope-type", default=None, help="comma-separated rope_types to run (default: every one)")
    g.addoption("--rope-build", metavar="MODULE:FUNCTION", default=None,
                help="rope dict -> the library's module (forward(q, k, positions)), for the cast usage case")
    g.addoption("--rope-usage", default="cast,shared,decode",
                help="usage kinds to run with --rope-convention positions (default all; none: no usage cases)")


def _spec(config):
    """(fn, freq_fn, calling, dtypes, rope_types) from the options; pytest.UsageError in one line on bad input."""
    from harness.conformance import adapters, golden
    from harness.conformance import conventions as C
    from harness.conformance.tolerance import TORCH_DTYPES
    opt = config.getoption
    try:
        fn = adapters.resolve(opt("rope_conformance"), "--rope-conformance")
        freq = adapters.resolve(opt("rope_frequencies"), "--rope-frequencies") if opt("rope_frequencies") else None
        calling = C.Calling(**{n: opt(f"rope_{n}") for n in CALLING if opt(f"rope_{n}") is not None})
    except (ValueError, TypeError) as e:
        raise pytest.UsageError(str(e)) from None
    dtypes = [d.strip() for d in opt("rope_dtype").split(",")]
    bad = [d for d in dtypes if d not in TORCH_DTYPES]
    if bad:
        raise pytest.UsageError(f"--rope-dtype {bad}: choose from {list(TORCH_DTYPES)}")
    types = [t.strip() for t in opt("rope_type").split(",")] if opt("rope_type") else None
    known = sorted({c["rope_type"] for c in golden.load()[0]})
    if types and set(types) - set(known):
        raise pytest.UsageError(f"--rope-type {sorted(set(types) - set(known))}: choose from {known}")
    return fn, freq, calling, dtypes, types


def _usage(config, calling):
    """(build, kinds) of the usage options; no kinds unless the code builds its own table (positions)."""
    from harness.conformance import adapters, usage
    opt = config.getoption
    kinds = [] if opt("rope_usage") == "none" else [k.strip() for k in opt("rope_usage").split(",")]
    if set(kinds) - set(usage.KINDS):
        raise pytest.UsageError(f"--rope-usage {sorted(set(kinds) - set(usage.KINDS))}: choose from "
                                f"{list(usage.KINDS)} or none")
    try:
        build = adapters.resolve(opt("rope_build"), "--rope-build") if opt("rope_build") else None
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    return build, (kinds if calling.convention == "positions" else [])


class RopeFailure(Exception):
    pass


class RopeCase(pytest.Item):
    """One golden case in one dtype, observed and judged in this process (harness.conformance.run.run_one)."""

    def __init__(self, *, spec, case, data, dtype, **kw):
        super().__init__(**kw)
        self.spec, self.case, self.data, self.dtype = spec, case, data, dtype

    def runtest(self):
        from harness.conformance import run
        fn, freq, calling, _, _ = self.spec
        rows, msgs = run.run_one(fn, calling, self.case, self.data, self.dtype, freq)
        if any(r["result"] in ("FAIL", "error") for r in rows):
            raise RopeFailure("\n".join([run.table(rows), *msgs, run.summary(rows)]))
        if not any(r["result"] == "pass" for r in rows):
            pytest.skip("; ".join(msgs) or "every check skipped")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RopeFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.name


class RopeUsage(RopeCase):
    """One usage kind in one dtype (harness.conformance.usage.run_usage), in this process."""

    def __init__(self, *, spec, kind, build, dtype, **kw):
        pytest.Item.__init__(self, **kw)
        self.spec, self.kind, self.build, self.dtype = spec, kind, build, dtype

    def runtest(self):
        from harness.conformance import cases, run, usage
        fn, _, calling, _, types = self.spec
        rows, msgs = usage.run_usage(fn, calling, self.dtype, kinds=(self.kind,), types=types or cases.ROPE_TYPES,
                                     build=self.build)
        if any(r["result"] in ("FAIL", "error") for r in rows):
            raise RopeFailure("\n".join([run.table(rows), *msgs, run.summary(rows)]))
        if not any(r["result"] == "pass" for r in rows):
            pytest.skip("; ".join(msgs) or "every check skipped")


def pytest_collection_modifyitems(session, config, items):
    if not config.getoption("rope_conformance"):
        return
    from harness.conformance import golden, run
    spec = _spec(config)
    case_list, data = golden.load()
    for dtype in spec[3]:
        for case in run.selected(case_list, spec[4]):
            items.append(RopeCase.from_parent(session, name=f"rope_conformance[{case['id']}-{dtype}]", spec=spec,
                                              case=case, data=data, dtype=dtype))
    build, kinds = _usage(config, spec[2])
    for dtype in spec[3]:
        for kind in kinds:
            items.append(RopeUsage.from_parent(session, name=f"rope_usage[{kind}-{dtype}]", spec=spec, kind=kind,
                                               build=build, dtype=dtype))


def pytest_report_header(config):
    if config.getoption("rope_conformance"):
        fn, _, calling, dtypes, _ = _spec(config)
        how = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(calling).items())
        return f"rope-conformance: {config.getoption('rope_conformance')} [{how}] in {', '.join(dtypes)}"
