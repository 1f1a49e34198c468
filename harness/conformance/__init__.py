"""RoPE conformance suite: golden data from the fp64 oracle, and a runner for anyone's rotation.

    python -m harness.conformance --apply pkg.module:function [--frequencies pkg.module:mapping]
        [--layout half|interleaved] [--dtype fp32|bf16|fp16] [--convention hf|x_cos_sin|complex|positions]
        [--rope-type yarn,...] [--timeout S]
    python -m harness.conformance --generate      # rewrite golden.npz from the oracle

Modules: cases.py (the case grid, sampled positions, seeded inputs, the fp64 oracle), golden.py (golden.npz:
generate, write, load), tolerance.py (per-dtype bounds and their derivation), adapters.py (calling conventions,
import resolution, ready adapters for HF's Llama path and rotary-embedding-torch), bugs.py (known bug classes
simulated from the oracle, to name a failure), run.py (judging, the table; the code under test gets copies of its
inputs and fails as `mutates its inputs` where it changes them), isolate.py (the CLI runs the code under test in
a worker process: a case past --timeout is a FAIL, an exit or crash of the code an error, never the CLI's exit
status). Results and the commands that made them: results/conformance/README.md; the tolerance derivation:
results/conformance/TOLERANCES.md.
Exit status: 0 all checks pass (skips allowed, at least one pass), 1 a failure or error (or no verdict at all),
2 bad arguments (--apply that cannot be imported, or whose import exits or hangs, included).
"""
