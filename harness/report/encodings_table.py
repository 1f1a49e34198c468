"""The encodings table of docs/encodings.md, generated from the registry: each encoding's file declares its row
(`CARD = (kind, where it acts, reference)` on its class), so a new encoding brings its row with it and a table
typed by hand cannot drift from what is registered.

`python -m harness.report.encodings_table [--check|--write] docs/encodings.md` regenerates the block between
`<!-- encodings-table: harness/encodings -->` and `<!-- /encodings-table -->`; --check exits 1 when it is stale.
"""
import argparse
import re
import sys
from pathlib import Path

BLOCK = re.compile(r"(<!-- encodings-table: (\S+) -->\n)(.*?)(<!-- /encodings-table -->)", re.S)


def table():
    """The Markdown table, one row per registered encoding in name order; ValueError naming any without a CARD."""
    from harness.encodings import ENCODINGS
    bare = [n for n, cls in ENCODINGS.items() if not isinstance(vars(cls).get("CARD"), tuple)
            or len(vars(cls)["CARD"]) != 3]
    if bare:  # a subclass would otherwise show its parent's row under its own name
        raise ValueError(f"encodings without their own CARD = (kind, where it acts, reference): {bare}; declare it "
                         f"on the class in harness/encodings/<name>.py")
    lines = ["| name | kind | where it acts | reference |", "|---|---|---|---|"]
    lines += [f"| `{n}` | " + " | ".join(cls.CARD) + " |" for n, cls in ENCODINGS.items()]
    return "\n".join(lines) + "\n"


def render(text):
    """text with its encodings-table block regenerated; ValueError when it has none."""
    if not BLOCK.search(text):
        raise ValueError("no '<!-- encodings-table: harness/encodings -->' ... '<!-- /encodings-table -->' block")
    return BLOCK.sub(lambda m: m.group(1) + table() + m.group(4), text)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.report.encodings_table", description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the page's table is stale")
    mode.add_argument("--write", action="store_true", help="rewrite the page's table in place")
    ap.add_argument("page", type=Path, nargs="?", default=Path("docs/encodings.md"))
    a = ap.parse_args(argv)
    try:
        text = a.page.read_text()
        new = render(text)
    except (OSError, ValueError) as e:
        print(f"harness.report.encodings_table: error: {a.page}: {e}", file=sys.stderr)
        return 2
    if a.check and new != text:
        print(f"{a.page}: the encodings table is stale; run python -m harness.report.encodings_table --write "
              f"{a.page}", file=sys.stderr)
        return 1
    if a.write:
        a.page.write_text(new)
    elif not a.check:
        print(table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
