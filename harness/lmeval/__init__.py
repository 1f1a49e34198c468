"""lm-eval on harness models: `model` (the lm-eval LM class `harness` over a run's checkpoint), `rows`
(lm-eval results as harness rows, `python -m harness.lmeval.rows`), `cli` (lm-eval's own CLI with the
model registered and tasks/ as --include_path, `harness-lm-eval RUN_DIR --tasks ...` = `python -m harness.lmeval.cli`). Importing this package imports
nothing from lm-eval; each module does."""
