"""lm-eval on harness models: `model` (the lm-eval LM class `harness` over a run's checkpoint), `rows`
(lm-eval results as harness rows, `python -m harness.lmeval.rows`), `cli` (`harness-lm-eval RUN_DIR --tasks ...`
= `python -m harness.lmeval.cli`: lm-eval's simple_evaluate on the model, tasks/ as the default --include_path).
Importing this package imports nothing from lm-eval; each module does."""
