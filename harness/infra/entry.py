"""The console scripts `harness` and `harness-lm-eval`. The package's core (torch, numpy) is all the conformance suite
needs, so `pip install "harness[conformance]"` leaves out what the benchmark harness runs on (the `run` extra); a
script started without it says so in one line, naming what is missing and the install that brings it, instead of a
traceback from deep inside an import. Imports nothing but the standard library until the check passes."""
import importlib.util
import sys

# import names of the run extra's packages that the two commands import at start (pyproject.toml [run])
RUN_MODULES = ("hydra", "omegaconf", "pandas", "scipy", "statsmodels", "pyarrow", "matplotlib", "wandb", "lm_eval",
               "tqdm", "filelock")


def missing(modules=RUN_MODULES):
    """The modules of `modules` that cannot be imported here, in order."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require_run(command):
    """Exit 2 with one line on stderr where the run extra is not installed."""
    absent = missing()
    if absent:
        sys.stderr.write(f"{command}: the benchmark harness needs the run extra, not installed here (missing: "
                         f"{', '.join(absent)}): pip install \"harness[run]\" (the conformance suite needs only the "
                         f"core: python -m harness.conformance --help)\n")
        raise SystemExit(2)


def harness(argv=None):
    require_run("harness")
    from harness.__main__ import cli
    return cli(argv)


def lm_eval(argv=None):
    require_run("harness-lm-eval")
    from harness.lmeval.cli import main
    return main(argv)
