"""Fault cases of the tools around the runs (tests/fault_cases.py collects them): the HF config converter
(python -m harness.hf), the claims CLI's --only, the conformance suite's CLI with implementations that try
to forge a pass (exit 0, mutate their inputs, hang, crash), the C kernel's cache (an unwritable $HOME, a stale or
planted library), and the kernel, flex and pretrained-report CLIs. Bad input: one `<prog>: error:` line naming
what is wrong and the valid choices, exit 2, nothing written; a forged or broken implementation: a FAIL or an
error row and exit 1, never exit 0."""
import hashlib
import json
import os
import shutil
import subprocess

import pandas as pd

from tests.fault_kit import Case, expect, harness, status, the_run

HF = ["-m", "harness.hf"]
HF_ERR = r"^harness\.hf: error: "
CLAIMS = ["-m", "harness.claims", "--sweeps", "{tmp}/sweeps", "--out", "{tmp}/claims"]
CLAIMS_ERR = r"^harness\.claims: error: "
CONFORM = ["-m", "harness.conformance", "--convention", "x_cos_sin", "--rope-type", "default"]
CONFORM_ERR = r"^harness\.conformance: error: "
DIMS = {"hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 128}

# implementations under test for the conformance cases: conformance_plant:<name>, on PYTHONPATH
PLANT = '''
import ctypes, os, sys, time
from harness.rope.rotation import eager


def exits_0(x, c, s):
    raise SystemExit(0)


def hard_exit(x, c, s):
    os._exit(0)


def segfaults(x, c, s):
    ctypes.string_at(0)


def right_then_zeroes_its_input(x, c, s):
    out = eager(x, c, s)
    x.zero_()
    return out


def rotates_in_place(x, c, s):
    x.copy_(eager(x, c, s))
    return x


def hangs(x, c, s):
    while True:
        time.sleep(0.05)


def skips(q, k, positions, *, rope):
    raise NotImplementedError("no case supported")
'''


def hf_file(content):
    """setup: {tmp}/cfg.json holding content (bytes as is, anything else as JSON, NaN written as NaN)."""
    def setup(ctx):
        data = content if isinstance(content, bytes) else json.dumps(content).encode()
        (ctx.tmp / "cfg.json").write_bytes(data)
    return setup


def hf_rejected(name, content, line, argv=("{tmp}/cfg.json",), **kw):
    return Case(f"tools: hf: {name}", [*HF, *argv], rc=2, line=HF_ERR + line,
                setup=kw.pop("setup", hf_file(content)), unchanged=True, **kw)


def run_dir(yaml_text):
    """setup: {tmp}/run/.hydra/config.yaml holding yaml_text (a run dir for --from-run)."""
    def setup(ctx):
        (ctx.tmp / "run" / ".hydra").mkdir(parents=True)
        (ctx.tmp / "run" / ".hydra" / "config.yaml").write_text(yaml_text)
    return setup


def claims_rejected(name, only, line):
    return Case(f"tools: claims: {name}", [*CLAIMS, "--only", *only], rc=2, line=CLAIMS_ERR + line, unchanged=True)


def planted(ctx):
    (ctx.tmp / "conformance_plant.py").write_text(PLANT)
    (ctx.tmp / "conformance_exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    ctx.env = {**ctx.env, "PYTHONPATH": str(ctx.tmp)}


def conform(name, fn, summary, *argv, rc=1, check=None, module="conformance_plant", setup=planted, **kw):
    """A planted implementation through the CLI: judged on its summary line (stdout) and exit status."""
    return Case(f"tools: conformance: {name}", [*CONFORM, "--apply", f"{module}:{fn}", *argv], rc=rc, stream="out",
                line=r"^" + module + ":" + fn + r" \[.*\]: " + summary, setup=setup, check=check, **kw)


def table_says(*needles):
    def check(ctx, procs):
        rows = [line for p in procs for line in p.stdout.splitlines() if line.startswith("default-d")]
        return (expect(len(rows) == 6, f"{len(rows)} table rows, want 6")
                + [f"no table row says {n!r}" for n in needles if not any(n in r for r in rows)])
    return check


def stderr_says(*needles):
    def check(ctx, procs):
        return [f"stderr does not say {n!r}" for n in needles if not any(n in p.stderr for p in procs)]
    return check


def both(*checks):
    return lambda ctx, procs: [p for c in checks for p in c(ctx, procs)]


# --- the C kernel's cache ---

def _cc(ctx):
    return ctx.env.get("HARNESS_CC", "gcc")


def no_compiler(ctx):
    return None if shutil.which(_cc(ctx).split()[0]) else f"no C compiler {_cc(ctx)!r} here"


def unwritable_home(ctx):
    """$HOME under a file (nothing can be created there, root or not); the temp dir the case's own."""
    (ctx.tmp / "afile").write_text("")
    (ctx.tmp / "t").mkdir()
    env = {k: v for k, v in ctx.env.items() if k != "HARNESS_CACHE"}
    ctx.env = {**env, "HOME": str(ctx.tmp / "afile" / "home"), "TMPDIR": str(ctx.tmp / "t")}


def cache_under_a_file(ctx):
    (ctx.tmp / "afile").write_text("")
    (ctx.tmp / "t").mkdir()
    ctx.env = {**ctx.env, "HARNESS_CACHE": str(ctx.tmp / "afile" / "cache"), "TMPDIR": str(ctx.tmp / "t")}


def stale_library(ctx):
    """HARNESS_CACHE holding, where the current code and the code before the sidecar look, a real shared object
    built from other sources (a stale build), and a sidecar whose recorded hash is not that library's."""
    from harness.rope import cpu
    cache, key = ctx.tmp / "cache", cpu._key(_cc(ctx))
    cache.mkdir()
    src = ctx.tmp / "other.c"
    src.write_text("int rope_isa_supported(void) { return 0; }\n")
    other = cache / f"rope_cpu_{key[:16]}_{'0' * 16}.so"
    subprocess.run([*_cc(ctx).split(), "-shared", "-fPIC", str(src), "-o", str(other)], check=True)
    shutil.copy(other, cache / f"rope_cpu_{key[:16]}.so")  # the name the code before the sidecar loads
    (cache / f"rope_cpu_{key[:16]}.json").write_text(json.dumps({"key": key, "library": other.name,
                                                                 "sha256": "0" * 64}))
    ctx.env = {**ctx.env, "HARNESS_CACHE": str(cache)}


def truncated_library(ctx):
    """HARNESS_CACHE holding this code's own build, its library then truncated to half."""
    from harness.rope import cpu
    cache, key = ctx.tmp / "cache", cpu._key(_cc(ctx))
    lib = cpu._build(_cc(ctx), cache, key)
    os.truncate(lib, lib.stat().st_size // 2)
    ctx.env = {**ctx.env, "HARNESS_CACHE": str(cache)}


def kernel_ran(where):
    """check: the run finished and its rope rows record the C kernel (impl cpu, its level), loaded from a library
    that `where(ctx)` (a dir) holds verified; or, where the kernel cannot be built here at all, eager said once."""
    def check(ctx, procs):
        from harness.rope import cpu
        df = pd.read_parquet(the_run(ctx) / "rows.parquet")
        params = {p for p in df.params if p}
        impls = {json.loads(p).get("impl") for p in params}
        problems = expect(status(ctx)["status"] == "ok", f"status {status(ctx)['status']!r}")
        if impls == {"eager"}:
            told = [p for p in procs if "impl='auto' uses 'eager'" in p.stderr]
            return problems + expect(told and ".cache" not in told[0].stderr and "Not a directory" not in
                                     told[0].stderr, "eager ran, for a cache reason (or unsaid)")
        lib, why = cpu._verified(where(ctx), cpu._key(_cc(ctx)))
        return (problems + expect(impls == {"cpu"}, f"rows record impl {sorted(map(str, impls))}, want cpu")
                + expect(all("cpu_isa" in json.loads(p) for p in params), "rows do not record cpu_isa")
                + expect(lib is not None, f"no verified library in {where(ctx)}: {why}"))
    return check


def temp_cache(ctx):
    return ctx.tmp / "t" / f"harness-{os.getuid()}"


def told_fallback(ctx, procs):
    return expect(any("the C kernel cache is not usable" in p.stderr and str(temp_cache(ctx)) in p.stderr
                      for p in procs) or any("impl='auto' uses 'eager'" in p.stderr for p in procs),
                  "the fallback to the temp dir is not said on stderr")


def rebuilt(ctx, procs):
    """check: the planted library is gone from the sidecar, which names a whole build of these sources."""
    from harness.rope import cpu
    lib, _ = cpu._verified(ctx.tmp / "cache", cpu._key(_cc(ctx)))
    planted_lib = ctx.tmp / "cache" / f"rope_cpu_{cpu._key(_cc(ctx))[:16]}_{'0' * 16}.so"
    return expect(lib != planted_lib, "the planted library is still the one the sidecar names")


def golden_unchanged(ctx, procs):
    from harness.conformance import golden
    return expect(hashlib.sha256(golden.PATH.read_bytes()).hexdigest() == ctx.golden_sha,
                  "harness/conformance/golden.npz was rewritten")


def remember_golden(ctx):
    from harness.conformance import golden
    ctx.golden_sha = hashlib.sha256(golden.PATH.read_bytes()).hexdigest()


CASES = [
    # --- the HF config converter: every value checked, the file too, one line naming the key and the file
    hf_rejected("config.json is a JSON list", [1, 2], r".*cfg\.json: an HF config\.json holds a JSON object, got "
                                                      r"\[1, 2\] \(a list\)$"),
    hf_rejected("factor is a string", {**DIMS, "rope_theta": 1e4, "rope_scaling": {"type": "linear", "factor": "abc"}},
                r".*cfg\.json: rope_scaling\.factor must be a finite number >= 1, got 'abc' \(a string\)$"),
    hf_rejected("rope_theta NaN", b'{"hidden_size": 64, "num_attention_heads": 2, "rope_theta": NaN}',
                r".*cfg\.json: rope_theta must be a finite number > 0, got nan \(a number\)$"),
    hf_rejected("empty file", b"", r".*cfg\.json: not a readable JSON file \(it is empty\)$"),
    hf_rejected("binary file", b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\x00\x01", r".*cfg\.json: not a readable "
                                                                                   r"JSON file \(binary, not UTF-8"),
    hf_rejected("missing file", None, r".*nodir/cfg\.json: not a readable JSON file \(no such file or directory\)$",
                argv=["{tmp}/nodir/cfg.json"], setup=None),
    hf_rejected("a directory for config.json", None, r".*adir: not a readable JSON file \(is a directory\)$",
                argv=["{tmp}/adir"], setup=lambda ctx: (ctx.tmp / "adir").mkdir()),
    hf_rejected("nested wrong type in rope_scaling", {**DIMS, "rope_theta": 1e4, "rope_scaling": {
        "type": "longrope", "factor": 2.0, "short_factor": [1.0] * 15 + ["x"], "long_factor": [1.0] * 16}},
        r".*rope_scaling\.short_factor must be a non-empty list of finite numbers > 0, got \[1\.0, "),
    hf_rejected("nested wrong type in per-layer rope_parameters", {**DIMS, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": "8", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
        r".*rope_parameters\.full_attention\.factor must be a finite number >= 1, got '8' \(a string\)$",
        argv=["{tmp}/cfg.json", "--layer-type", "full_attention"]),
    hf_rejected("unknown rope_type", {**DIMS, "rope_theta": 1e4, "rope_scaling": {"type": "xpos", "factor": 2.0}},
                r".*cfg\.json: unknown rope_type 'xpos'; expected one of \['default', 'linear', 'dynamic', 'yarn', "
                r"'longrope', 'llama3', 'proportional'\]$"),
    hf_rejected("--from-run whose config.yaml is not YAML", None,
                r".*config\.yaml: not a readable YAML file \(.* at line \d+\)$", argv=["--from-run", "{tmp}/run"],
                setup=run_dir("encoding: {name: rope\nmodel: [\n")),
    # new: hurried-user inputs found on the way
    hf_rejected("--layer-type on a flat config", {**DIMS, "rope_theta": 1e4},
                r".*cfg\.json: layer_type 'full_attention' given, but this config's rope parameters are not per "
                r"layer type", argv=["{tmp}/cfg.json", "--layer-type", "full_attention"]),
    hf_rejected("negative head_dim", {**DIMS, "head_dim": -64, "rope_theta": 1e4},
                r".*cfg\.json: head_dim must be a positive integer, got -64 \(an integer\)$"),
    hf_rejected("rope_interleave as the string \"false\"", {**DIMS, "rope_theta": 1e4, "rope_interleave": "false"},
                r".*cfg\.json: rope_interleave must be true or false, got 'false' \(a string\)$"),
    hf_rejected("max_position_embeddings \"32k\" with yarn", {**DIMS, "max_position_embeddings": "32k",
                                                              "rope_theta": 1e4, "rope_scaling": {"type": "yarn",
                                                                                                  "factor": 4.0}},
                r".*cfg\.json: max_position_embeddings must be a positive integer, got '32k' \(a string\)$"),
    hf_rejected("per-layer rope_parameters with a number for a layer", {**DIMS, "rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 1e6}, "sliding_attention": 10000.0}},
        r".*rope_parameters is per layer type, so rope_parameters\.sliding_attention must be a JSON object",
        argv=["{tmp}/cfg.json", "--layer-type", "full_attention"]),
    hf_rejected("--from-run whose config.yaml is a list", None,
                r".*config\.yaml: a run config holds a mapping, got \[1, 2\] \(a list\)$",
                argv=["--from-run", "{tmp}/run"], setup=run_dir("- 1\n- 2\n")),
    hf_rejected("--from-run without the model's d_model", None,
                r".*config\.yaml: model needs head_dim, or d_model and n_heads$", argv=["--from-run", "{tmp}/run"],
                setup=run_dir("encoding: {name: rope, base: 10000.0}\nmodel: {n_heads: 2}\n")),
    hf_rejected("two config files", {**DIMS, "rope_theta": 1e4}, r"unrecognized arguments: .*cfg2\.json; see --help$",
                argv=["{tmp}/cfg.json", "{tmp}/cfg2.json"]),
    # --- the claims CLI's --only
    claims_rejected("--only 999", ["999"], r"--only 999: no such claim; the claims are numbered 1 to 24$"),
    claims_rejected("--only abc", ["abc"], r"--only 'abc' is not a claim number; the claims are numbered 1 to 24$"),
    claims_rejected("--only 0", ["0"], r"--only 0: no such claim; the claims are numbered 1 to 24$"),
    claims_rejected("--only -1", ["-1"], r".*-1.*the claims are numbered 1 to 24$"),
    Case("tools: claims: --only with no number", [*CLAIMS, "--only"], rc=2, line=CLAIMS_ERR + r".*--only",
         unchanged=True),
    # --- the conformance CLI: an implementation that tries to forge a pass
    conform("SystemExit(0) in the rotation", "exits_0", r"0 pass, 0 FAIL, 6 error, 0 skip of 6 checks",
            check=table_says("error  SystemExit")),
    conform("right outputs, inputs zeroed in place", "right_then_zeroes_its_input",
            r"0 pass, 6 FAIL, 0 error, 0 skip of 6 checks", check=table_says("FAIL   mutates its inputs (q, k)")),
    conform("a rotation that hangs", "hangs", r"0 pass, 3 FAIL, 3 error, 0 skip of 6 checks", "--timeout", "2",
            check=both(table_says("FAIL   timeout after 2 s", "not run: stopped after 3 timeouts"),
                       stderr_says("default-d64-b1e4-p1-L131072 [half, fp32]: timeout after 2 s"))),
    conform("zero verdicts (every case skipped)", "skips", r"0 pass, 0 FAIL, 0 error, 6 skip of 6 checks",
            "--convention", "positions",
            check=stderr_says("no verdict: every check was skipped, which is not a pass")),
    # new
    conform("os._exit(0) in the rotation", "hard_exit", r"0 pass, 0 FAIL, 6 error, 0 skip of 6 checks",
            check=table_says("error  worker ended: exit code 0", "not run: stopped after 3")),
    conform("a segfaulting rotation", "segfaults", r"0 pass, 0 FAIL, 6 error, 0 skip of 6 checks",
            check=table_says("error  worker ended: killed by SIGSEGV")),
    conform("rotates in place and returns its input", "rotates_in_place",
            r"0 pass, 6 FAIL, 0 error, 0 skip of 6 checks", check=table_says("FAIL   mutates its inputs (q, k)")),
    Case("tools: conformance: an --apply module that exits 0 at import",
         [*CONFORM, "--apply", "conformance_exits_at_import:f"], rc=2, setup=planted, unchanged=True,
         line=CONFORM_ERR + r"--apply 'conformance_exits_at_import:f': cannot import conformance_exits_at_import: "
                            r"SystemExit\(0\): it tried to end the process$"),
    Case("tools: conformance: --rope-type given empty", [*CONFORM[:-1], "", "--apply", "harness.rope.rotation:eager"],
         rc=2, line=CONFORM_ERR + r"unknown --rope-type \[''\]; choose from \['default', ", unchanged=True),
    Case("tools: conformance: --generate with --apply", ["-m", "harness.conformance", "--generate", "--apply",
                                                         "harness.rope.rotation:eager"], rc=2, setup=remember_golden,
         line=CONFORM_ERR + r"--generate rewrites the golden file and runs nothing; drop \['--apply'\]$",
         unchanged=True, check=golden_unchanged),
    Case("tools: conformance: --timeout 0", [*CONFORM, "--apply", "harness.rope.rotation:eager", "--timeout", "0"],
         rc=2, line=CONFORM_ERR + r"--timeout '0': give the seconds one case may take, a number > 0$", unchanged=True),
    Case("tools: conformance: an unknown option", [*CONFORM, "--apply", "harness.rope.rotation:eager", "--dtpye",
                                                    "bf16"], rc=2, unchanged=True,
         line=CONFORM_ERR + r"unrecognized arguments: --dtpye bf16; see --help$"),
    # --- the C kernel's cache: a rope run never fails for it, and never loads a library not built from its sources
    Case("tools: rope run with an unwritable $HOME", harness(), line=r"^ok ", stream="out", setup=unwritable_home,
         rows="base", check=both(kernel_ran(temp_cache), told_fallback), skip=no_compiler),
    Case("tools: rope run with a stale library of other sources in the cache", harness(), line=r"^ok ", stream="out",
         setup=stale_library, rows="base", check=both(kernel_ran(lambda ctx: ctx.tmp / "cache"), rebuilt),
         skip=no_compiler),
    # new
    Case("tools: rope run with a truncated cached library", harness(), line=r"^ok ", stream="out",
         setup=truncated_library, rows="base", check=kernel_ran(lambda ctx: ctx.tmp / "cache"), skip=no_compiler),
    Case("tools: rope run with HARNESS_CACHE under a file", harness(), line=r"^ok ", stream="out",
         setup=cache_under_a_file, rows="base", check=both(kernel_ran(temp_cache), told_fallback),
         skip=no_compiler),
    # --- the kernel, flex and pretrained-report CLIs (owned elsewhere: expectations, and the fix in the report)
    Case("tools: kernel_bench: check against a missing baseline",
         ["-m", "harness.bench.kernel_bench", "check", "--baseline", "{tmp}/none.json"], rc=2, unchanged=True,
         line=r"kernel_bench: error: .*none\.json"),
    Case("tools: kernel_bench: check --keys with an unknown key",
         ["-m", "harness.bench.kernel_bench", "check", "--keys", "nosuch/fwd"], rc=2, unchanged=True,
         line=r"kernel_bench: error: .*'nosuch/fwd'.*"),
    Case("tools: kernel_bench: report of a file that is not JSON",
         ["-m", "harness.bench.kernel_bench", "report", "{tmp}/bench.json"], rc=2, unchanged=True,
         setup=lambda ctx: (ctx.tmp / "bench.json").write_text("garbage"),
         line=r"kernel_bench: error: .*bench\.json"),
    Case("tools: flex_bench: --lens 0", ["-m", "harness.bench.flex_bench", "--lens", "0", "--encodings", "alibi",
                                         "--out", "{tmp}/flex.csv"], rc=2, unchanged=True,
         line=r"flex_bench: error: .*--lens.*0"),
    Case("tools: flex_bench: unknown encoding", ["-m", "harness.bench.flex_bench", "--encodings", "alibl", "--out",
                                                 "{tmp}/flex.csv"], rc=2, unchanged=True,
         line=r"flex_bench: error: .*'alibl'.*'alibi'"),
    Case("tools: report.pretrained: missing dir", ["-m", "harness.report.pretrained", "{tmp}/nope"], rc=2,
         unchanged=True, line=r"^harness\.report\.pretrained: error: no results at .*nope"),
]
