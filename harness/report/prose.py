"""The prose checker: a sentence in the README, docs/ or a results folder's RUN.md that orders encodings (names one and
says better, worse, flips, ranks, established, ...) must cite the generated finding it rests on by its id, as
`(finding order/lm@16x/512/rope-t5)`, or the claim whose generated verdict it reports (`claim 7`); the finding must exist in a committed findings.md (harness.report.findings),
and a sentence citing one that is not established must say "not established". Generated blocks
(`<!-- name: ... -->` ... `<!-- /name -->`) and code are left out: their words come from the rows.

`python -m harness.report.prose` prints each offending sentence with its file and line; tests/test_findings_prose.py
runs it over DOCS in `make test`."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the user's documents and every committed study's diary; the findings of every committed report
DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").glob("*/RUN.md")))
FINDINGS = tuple(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").glob("*/findings.md")))

ORDER = re.compile(r"\b(better|worse|beats?|beaten|ahead|behind|(?<![-_])flip(?:s|ped)?(?![-_])|established|"
                   r"significant(?:ly)?|rises|rising|falls|falling|ranks?|ranked|best|worst|overtakes?|"
                   r"outperforms?|lower than|higher than|\d+(?:st|nd|rd|th))\b", re.I)
CITE = re.compile(r"\b((?:order|flip|change|rank)/[^\s`),;:]+)")
CLAIM = re.compile(r"\bclaims? \d+")  # a verdict of results/claims/claims.md, generated from committed rows too
PATHS = re.compile(r"`[^`]*[/.][^`]*`")  # code spans naming files or modules (`harness/rope/...`) name no encoding
BLOCK = re.compile(r"<!-- ([\w-]+): .*?-->.*?<!-- /\1 -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(*\[])")
# registry names that are also English words: only as `name` or in their authors' spelling
WORDS = {"learned": "`learned`", "hope": "HoPE", "fire": "FIRE", "fox": "FoX", "shaw": "Shaw", "cope": "CoPE"}


def encoding_names():
    from harness.encodings import ENCODINGS
    return sorted(ENCODINGS, key=len, reverse=True)


def _names_pattern(names):
    plain = [re.escape(n) for n in names if n not in WORDS]
    strict = [re.escape(s) for n, s in WORDS.items() if n in names]
    strict += [rf"`{re.escape(n)}`" for n in WORDS if n in names]
    parts = [rf"(?i:\b(?:{'|'.join(plain)})\b)"] * bool(plain) + [rf"(?:{'|'.join(strict)})"] * bool(strict)
    return re.compile("|".join(parts) or r"(?!x)x")  # no names: matches nothing


def findings_ids(paths=FINDINGS, root=ROOT):
    """{id: established} from committed findings.md files (the first two columns of their tables)."""
    out = {}
    for p in paths:
        for line in (root / p).read_text().splitlines():
            m = re.match(r"\| `([^`]+)` \| (.*?) \|", line)
            if m:
                out[m.group(1)] = m.group(2).rstrip().endswith("; established")
    return out


def sentences(text):
    """(line number, sentence) of text without generated blocks and code fences; a table row or list item is its
    own unit, a paragraph's lines are joined before splitting."""
    for rx in (BLOCK, FENCE):
        text = rx.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    unit, start = [], 0
    lines = text.splitlines() + [""]
    for k, line in enumerate(lines, 1):
        new = not line.strip() or line.lstrip().startswith(("- ", "* ", "|", "#")) or re.match(r"\s*\d+\. ", line)
        if new and unit:
            for s in SPLIT.split(" ".join(unit)):
                yield start, s
            unit = []
        if line.strip():
            if not unit:
                start = k
            unit.append(line.strip())
            if line.lstrip().startswith(("|", "#")):
                yield start, " ".join(unit)
                unit = []


def problems(paths=DOCS, root=ROOT, ids=None, names=None):
    """[(file, line, sentence, what is wrong)] of every ordering sentence without a valid citation."""
    ids = findings_ids(root=root) if ids is None else ids
    pattern = _names_pattern(encoding_names() if names is None else names)
    out = []
    for p in paths:
        for line, s in sentences((root / p).read_text()):
            if not (pattern.search(PATHS.sub("", s)) and ORDER.search(s)):
                continue
            cited = [c.rstrip(".") for c in CITE.findall(s)]
            if not cited and CLAIM.search(s):
                continue
            if not cited:
                out.append((p, line, s, "orders encodings without citing a finding"))
                continue
            unknown = [c for c in cited if c not in ids]
            if unknown:
                out.append((p, line, s, f"cites no committed finding: {', '.join(unknown)}"))
            elif not all(ids[c] for c in cited) and "not established" not in s:
                out.append((p, line, s, "cites a finding that is not established without saying so"))
    return out


def main(argv=None):
    found = problems()
    for p, line, s, why in found:
        print(f"{p}:{line}: {why}: {s}")
    print(f"{len(found)} sentence(s) to fix" if found else "prose: every ordering sentence cites its finding")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
