"""Rows -> report.md with tables and figures (`python -m harness.report RESULTS...`).

build (the report), labels (rows -> variants), summary (`## What to use` and the README block), tables and plots
(the pieces every section draws with; figures: cost, training and passkey small multiples; style: curve styles and
axis labels; families: encoding families and the panels of a figure), and one module per section: confidence,
budget, precision, lmeval, longctx, chomsky, flex, pretrained (+ pretrained_plots)."""
from harness.report.build import build, log_summary, main, pick_reference  # noqa: F401 - the package's API
from harness.report.labels import prepare, variants  # noqa: F401
