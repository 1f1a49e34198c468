"""README.md and its pages under docs/ are a user's document that cannot go stale, and DESIGN.md's module map
matches the tree. The README's checks run over the README and every docs/ page together.

A number measured once and typed into prose goes stale the day the code or the machine changes; the README held
sweep times, p-values and claim counts that no test compared with anything. So measured numbers live only in the
blocks generated from committed results (`<!-- name: src -->` ... `<!-- /name -->`, each with its own staleness
test), in the committed reports, and in the diaries results/*/RUN.md. These tests check the prose around the
blocks, and that every command, preset, path and module the README names exists.
"""
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[1]
README = ROOT / "README.md"
DESIGN = ROOT / "DESIGN.md"

# Generated blocks and the code that writes each (the block's own test compares it with a regeneration):
GENERATORS = {
    "pretrained-table": "harness.report.pretrained",  # tests/test_report_pretrained.py
    "kernel-table": "harness.bench.kernel_table",  # tests/test_kernel_table.py
    "reference-summary": "the reference sweep's summary (results/reference)",
    "ladder-summary": "the compute ladder's transfer table (results/budget; harness.report.budget.readme_lines)",
    "encodings-table": "harness.report.encodings_table",  # tests/test_add_encoding.py
}
OPEN = re.compile(r"<!-- ([\w-]+): (\S+) -->")
CLOSE = re.compile(r"<!-- /([\w-]+) -->")
BLOCK = re.compile(r"<!-- ([\w-]+): \S+ -->\n.*?<!-- /\1 -->", re.S)
FENCE = re.compile(r"^ *```.*?^ *```[^\n]*$", re.S | re.M)
SPAN = re.compile(r"`[^`\n]+`")

# Sections owned elsewhere, left out of the number check only, with the reason. Their paths and commands are
# still checked.
EXEMPT_SECTIONS = {
    "lm-eval": "owned by the lm-eval engineer; its task-index build time is theirs to move out",
}

# Numbers that look measured but are definitions, each with why. Keep this short: a new entry needs a reason a
# reviewer accepts, and a measurement never has one.
ALLOWED = {
    "95%": "the confidence level of every interval (harness.stats), a definition",
}

# What a measurement looks like in prose (after code, generated blocks and the allowed strings are removed).
MEASURED = {
    "decimal": r"(?<![\w.\-])\d+\.\d+(?![\w.]*\d)",  # 0.59, 2.5 (versions x.y.z are skipped below)
    "scientific": r"\b\d+(?:\.\d+)?e[+-]?\d+\b",  # 1.02e+03, 2e-6
    "percent": r"\d\s*%",  # 12%, 95 %
    "duration": r"\b\d+(?:\.\d+)?\s*(?:ms|µs|us|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)\b",
    "p-value": r"\bp\s*(?:=|<|>|≤|≥)\s*\d",
    "plus-minus": r"±",
    "interval": r"\[\s*[+-]?\d+(?:\.\d+)?\s*,\s*[+-]?\d+(?:\.\d+)?\s*\]",  # [0.86, 0.93]
    "claim count": r"\b\d+\s+(?:supported|contradicted|inconclusive|passed|failed)\b",
    "size or rate": r"\b\d+(?:\.\d+)?\s*(?:KiB|MiB|GiB|KB|MB|GB|tokens/s|it/s)\b",
    "date": r"\b20\d\d-\d\d-\d\d\b",
    "ratio": r"\b\d+\.\d+\s*[x×]",
}
# Not measurements although they match a pattern: versions (x.y.z), arXiv ids, section numbers (§3.3).
NOT_NUMBERS = re.compile(r"\b\d+\.\d+\.\d+(?:\.\d+)*\b|arXiv[: ]\s*\d{4}\.\d{4,5}|§\s*\d+(?:\.\d+)*")


def _sections(text):
    """[(heading, body)] split at '## ' headings (the text before the first is heading '')."""
    parts = re.split(r"(?m)^(## .*)$", text)
    return [("", parts[0])] + list(zip(parts[1::2], parts[2::2]))


def prose(text):
    """text without fenced code, inline code spans and generated blocks: what a reader takes as prose."""
    text = BLOCK.sub("", text)
    text = FENCE.sub("", text)
    return SPAN.sub("", text)


def measured(text):
    """[(kind, line, match)] for every measurement-looking number in text's prose."""
    found = []
    for heading, body in _sections(text):
        if any(key in heading for key in EXEMPT_SECTIONS):
            continue
        for line in prose(body).splitlines():
            for allowed in ALLOWED:
                line = line.replace(allowed, "")
            line = NOT_NUMBERS.sub("", line)
            for kind, pattern in MEASURED.items():
                found += [(kind, line.strip(), m.group(0)) for m in re.finditer(pattern, line)]
    return found


def code(text):
    """The code of text: fenced blocks and inline spans, generated blocks removed."""
    text = BLOCK.sub("", text)
    return "\n".join(m.group(0) for m in FENCE.finditer(text)) + "\n" + "\n".join(SPAN.findall(FENCE.sub("", text)))


def makefile_targets():
    return set(re.findall(r"(?m)^([a-z][\w-]*):", (ROOT / "Makefile").read_text()))


def repo_paths(text, roots=("harness", "conf", "tests", "tasks", "results")):
    """Repository paths text names under roots, minus placeholders (<name>, *, {a,b}, $(VAR)) and run outputs."""
    out = set()
    for m in re.finditer(r"(?<![\w./-])((?:%s)/[\w./<>*{},$()-]*)" % "|".join(roots), text):
        path = m.group(1).rstrip(".,)")
        if re.search(r"[<>*{}$]", path):
            continue
        if re.match(r"results/(sweeps|runs|bench)(/|$)", path):  # what a command writes, not a committed file
            continue
        out.add(path)
    return out


PAGES = [README] + sorted((ROOT / "docs").glob("*.md"))


@pytest.fixture(scope="module")
def readme():
    """The README and every docs/ page, one text (each page starts with its own headings)."""
    return "\n\n".join(p.read_text() for p in PAGES)


def test_the_readme_is_short_and_links_every_page():
    """The first page a user reads stays one screenful of sections; every docs/ page is reachable from it."""
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for page in PAGES[1:]:
        assert f"](docs/{page.name})" in text, f"the README does not link docs/{page.name}"


def test_relative_links_resolve():
    """Every relative link or image of a page points at a file that exists (anchors left unchecked)."""
    missing = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
    assert not missing, missing


def test_no_measured_numbers_outside_generated_blocks(readme):
    """Results, timings, p-values, ratios, claim counts: in a generated block, a report or a RUN.md, not prose."""
    found = measured(readme)
    assert not found, "measured-looking numbers in README prose (move them to a generated block, a report or " \
        "results/*/RUN.md; a definition goes in ALLOWED with its reason):\n" + "\n".join(
            f"  {kind}: {match!r} in {line!r}" for kind, line, match in found)


def test_the_number_check_catches_measurements():
    """The patterns find what the README used to hold, and leave definitions and code alone."""
    bad = ["`make sweep` took 13 min 11 s once installed", "τ = 0.93 [0.86, 0.93] at 1x",
           "unadjusted p is 0.004", "biased forwards 2.5x faster", "a step 12% faster",
           "10 supported, 0 contradicted, 5 inconclusive", "FoX's count accuracy 0.646 ± 0.088",
           "passes with probability at most 3.1e-3 per key", "measured 2026-11-23 on 2 vCPU",
           "the CPU build, ~190 MB", "(~2 h)", "took 826 s"]
    for line in bad:
        assert measured(line), line
    good = ["trained at 64 bytes, evaluated at 1× to 16×", "rotary-embedding-torch 0.9.1", "arXiv 2104.09864",
            "RoFormer §3.3", "the 95% Student-t interval", "three seeds", "a kernel made 2x slower",
            "`eval.effective_length.relative` (`0.85`)", "```bash\nmake sweep  # 13 min\n```",
            "<!-- kernel-table: x.json -->\n| 1.19 ± 0.2 |\n<!-- /kernel-table -->"]
    for line in good:
        assert not measured(line), line


def test_generated_blocks_are_known_and_closed(readme):
    """Every marker names a registered generator, and every block opened is closed once."""
    opened = [m.group(1) for m in OPEN.finditer(readme)]
    closed = [m.group(1) for m in CLOSE.finditer(readme)]
    assert set(opened) <= set(GENERATORS), f"unknown generated blocks: {set(opened) - set(GENERATORS)}"
    assert sorted(opened) == sorted(closed), "a generated block is not closed (or closed twice)"
    assert len(BLOCK.findall(readme)) == len(opened)
    assert "pretrained-table" in opened and "kernel-table" in opened


def test_make_targets_exist(readme):
    named = set(re.findall(r"\bmake ([a-z][\w-]*)", code(readme)))
    assert named, "no make target found: the extraction broke"
    assert named <= makefile_targets(), f"make targets not in the Makefile: {named - makefile_targets()}"


def test_sweep_presets_exist(readme):
    presets = set(re.findall(r"\bSWEEP=(\w+)", readme)) | set(re.findall(r"\bsweep=(\w+)", code(readme)))
    assert presets, "no preset found: the extraction broke"
    missing = {p for p in presets if not (ROOT / "conf" / "sweep" / f"{p}.yaml").is_file()}
    assert not missing, f"presets without conf/sweep/<name>.yaml: {missing}"


def test_paths_exist(readme):
    paths = repo_paths(BLOCK.sub("", readme))
    assert any(p.startswith("harness/") for p in paths) and any(p.startswith("conf/") for p in paths)
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"paths the README names that do not exist: {missing}"


def test_python_modules_exist(readme):
    """Every `python -m X` is runnable: a harness module (or a package with __main__) or a file under tests/."""
    modules = set(re.findall(r"python -m ([\w.]+)", readme))
    assert "harness" in modules
    missing = []
    for name in sorted(modules):
        if name.split(".")[0] == "tests":
            if not (ROOT / (name.replace(".", "/") + ".py")).is_file():
                missing.append(name)
        elif name.split(".")[0] == "harness":
            spec = importlib.util.find_spec(name)
            if spec is None or (spec.submodule_search_locations and importlib.util.find_spec(name + ".__main__")
                                is None):
                missing.append(name)
    assert not missing, f"python -m modules that cannot run: {missing}"


def test_dotted_names_resolve(readme):
    """Every `harness.x.y` the README names is a module or an attribute of one (`harness.results.load`)."""
    import importlib

    names = set(re.findall(r"\bharness(?:\.\w+)+", BLOCK.sub("", readme)))
    assert "harness.results.load" in names, "the extraction broke"
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            module = ".".join(parts[:cut])
            try:
                spec = importlib.util.find_spec(module)
            except ModuleNotFoundError:  # a prefix is a module, not a package: look at a shorter one
                spec = None
            if spec is not None:
                obj = importlib.import_module(module)
                try:
                    for attr in parts[cut:]:
                        obj = getattr(obj, attr)
                except AttributeError:
                    missing.append(name)
                break
        else:
            missing.append(name)
    assert not missing, f"names the README gives that do not exist: {missing}"


def test_design_paths_exist():
    """DESIGN.md's module map and text name only files and folders that exist."""
    text = DESIGN.read_text()
    paths = repo_paths(text, roots=("harness",))
    assert len(paths) > 20, "DESIGN.md's module map names harness/... paths: the extraction broke"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"paths DESIGN.md names that do not exist: {missing}"


def _module_map():
    """DESIGN.md §1's table: {first cell: second cell} for the rows that name harness paths."""
    rows = re.findall(r"(?m)^\| (`harness/[^|]*?) \| (.*) \|$", DESIGN.read_text())
    return dict(rows)


def test_design_module_map_matches_the_tree():
    """Every subpackage of harness/ has a row, and every file a row names exists in that row's folder or, for a
    cross reference (a report module named in its study's row), elsewhere in the package."""
    rows = _module_map()
    package = ROOT / "harness"
    folders = {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    named = {m for cell in rows for m in re.findall(r"`harness/(\w+)/`", cell)}
    assert folders <= named, f"subpackages without a row in DESIGN.md's module map: {folders - named}"
    everywhere = {p.name for p in package.rglob("*") if p.is_file()}
    missing = []
    for cell, owns in rows.items():
        homes = [ROOT / c for c in re.findall(r"`(harness/[\w/]*)`", cell)]
        for token in re.findall(r"`([\w/]*\w+\.(?:py|npz|txt))`", owns + " " + cell):
            if token.startswith(("tests/", "conf/", "tasks/")):  # outside the package: test_paths covers them
                continue
            if token.startswith("harness/"):
                found = (ROOT / token).exists()
            else:
                name = token.rsplit("/", 1)[-1]
                found = any((h / token).exists() or h.name == name for h in homes) or name in everywhere
            if not found:
                missing.append(f"{cell}: {token}")
    assert not missing, f"files DESIGN.md's module map names that do not exist: {missing}"
