"""`python -m harness.hf`: the HF-config CLI (harness.hf.cli)."""
from harness.hf.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
