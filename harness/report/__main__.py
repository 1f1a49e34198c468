"""`python -m harness.report RESULTS... [--out DIR]`: see harness.report.build."""
import sys

from harness.report.build import main

sys.exit(main())
