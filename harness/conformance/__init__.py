"""RoPE conformance suite: golden data from the fp64 oracle, and a runner for anyone's rotation.

    python -m harness.conformance (--apply pkg.module:function | --library NAME) [--frequencies pkg.module:mapping]
        [--convention hf|x_cos_sin|angles|complex|positions] [--layout half|interleaved] [--qk-layout bhsd|bshd|sbhd]
        [--width half|full] [--order cos-sin|sin-cos] [--compare outputs|logits] [--positions auto|sampled|dense]
        [--array torch|numpy|jax|mlx] [--dtype fp32|bf16|fp16] [--rope-type yarn,...] [--timeout S]
    python -m harness.conformance --library list  # the shipped adapters, installed or not, what each has
    python -m harness.conformance --generate      # rewrite golden.npz from the oracle
    python -m harness.conformance.field           # every installed adapter x dtype (results/conformance/field.md)

Modules: cases.py (the case grid, sampled positions, seeded inputs, the fp64 oracle), golden.py (golden.npz:
generate, write, load), tolerance.py (per-dtype bounds and their derivation), conventions.py (how the code under
test is called: `Calling`, every call flag), arrays.py (NumPy / JAX / MLX arrays at the boundary), adapters.py
(import resolution, --frequencies), libraries/ (one adapter module per library, `--library`), bugs.py and
faults.py (known bug classes simulated from the oracle, to name a failure), run.py (judging, the table; the code
under test gets copies of its inputs and fails as `mutates its inputs` where it changes them), isolate.py (the
CLI runs the code under test in a worker process: a case past --timeout is a FAIL, an exit or crash of the code
an error, never the CLI's exit status), field.py (the field run). Results and the commands that made them:
results/conformance/README.md, field.md; the tolerance derivation: results/conformance/TOLERANCES.md.
Exit status: 0 all checks pass (skips allowed, at least one pass), 1 a failure or error (or no verdict at all),
2 bad arguments (--apply that cannot be imported, or whose import exits or hangs, included).
"""
