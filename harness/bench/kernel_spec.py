"""What the RoPE kernel benchmark measures and what it is held to: shapes, dtypes, target R, the CI gate.

Shared by harness/bench/kernel_bench.py (timing, gate, CLI) and harness/bench/kernel_report.py
(CSV, table, plot); imports torch only, so neither of those imports the other for its constants.
R = (rope bytes / kernel time) / (copy bytes / copy time): see kernel_bench.
"""
import pathlib

import torch

# Prefill: the reference CPU shape, T*H*D = 2^20 per tensor. Decode: one new token, GQA 32q/8kv.
# prefill_large (GPU): Llama-3-8B's heads (32 q / 8 kv, D 128) at 4096 tokens, batch 8: q is 268 MB in
# bf16, far past the 50 MB L2 of an H100, so kernel and copy both stream from HBM.
SHAPES = {"prefill": dict(b=4, hq=8, hk=8, t=2048, d=64), "decode": dict(b=16, hq=32, hk=8, t=1, d=128),
          "prefill_large": dict(b=8, hq=32, hk=8, t=4096, d=128)}
DEVICE_SHAPES = {"cpu": ("prefill", "decode"), "cuda": ("prefill", "prefill_large", "decode")}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Target R per (device, provider, mode): the CPU's best path at T*H*D >= 2^20; GPU triton fwd/bwd and
# torch.compile. A fused kernel that moves each byte once should come close to copy_ (R = 1).
TARGETS = {("cpu", "cpu", "fwd"): 0.8, ("cpu", "cpu", "bwd"): 0.8, ("cuda", "triton", "fwd"): 0.9,
           ("cuda", "triton", "bwd"): 0.85, ("cuda", "compiled", "fwd"): 0.6}
# Where the targets apply: memory-bound from DRAM. On a GPU the CPU's prefill (q+k+outputs 64 MB fp32)
# partly stays in the 50 MB L2 (R reads > 1 there) and decode is launch-bound: only prefill_large counts.
TARGET_SHAPES = {"cpu": ("prefill",), "cuda": ("prefill_large",)}
# Shapes timed from cold data on the CPU: after every timed call, kernel and copy_ alike, the tensors it read and
# returned are evicted from every cache level (clflush; kernel_timing.cold_start), so each call reads its inputs from
# DRAM, as triton.testing.do_bench clears the L2 before every rep (github.com/triton-lang/triton,
# python/triton/testing.py). Prefill's q, k and outputs (33.6 MB in fp16) are about one L3 of a server CPU, so
# warm, each call started from what the call before it left: copy_ of the same bytes took 1.13 ms after the fp16
# interleaved forward (whose streaming stores left q and k in L3) and 1.40 ms after its backward
# (results/baselines/RUN.md). Code stays cached: emptying the whole L3 instead (a read of FLUSH_LLC x its size,
# the fallback without the C library) also made the host work before the backward kernel (the autograd engine and
# Python) take 0.29-0.32 ms instead of 0.08-0.11 (0.12 warm). Decode (one token) stays warm: its question is time
# per call.
COLD_SHAPES = {"cpu": ("prefill",), "cuda": ()}
FLUSH_LLC = 4
# The C kernel's every dtype x layout x direction (fwd and bwd are separate loops: the sign is folded into the
# add and subtract). The CPU baseline measures R for all of them (the README's table) and the gate counts their
# instructions on every vector level (cheap: no timing).
C_KEYS = tuple(f"cpu/{m}/{lay}/{dt}/prefill" for dt in DTYPES for lay in ("half", "interleaved") for m in ("fwd", "bwd"))
# R gated in CI (`make bench-check`): cheap to run, each a different code path. compiled is left out
# of the gate: its first call compiles for ~10 s, which the 2-minute budget cannot carry.
# Every CPU dtype and layout, forward or backward, at most 8 keys so the gate stays near a minute.
GATED = ("cpu/fwd/half/float32/prefill", "cpu/bwd/half/float32/prefill", "cpu/fwd/interleaved/bfloat16/prefill",
         "cpu/bwd/half/bfloat16/prefill", "cpu/fwd/half/float16/prefill", "cpu/bwd/interleaved/float16/prefill",
         "complex/fwd/half/float32/prefill", "eager/fwd/half/float32/prefill")
CPU_BASELINE = (*C_KEYS, "complex/fwd/half/float32/prefill", "eager/fwd/half/float32/prefill")
DROP = 0.30  # GPU baselines (no instruction counts): fail when R < (1 - DROP) * baseline
# CPU baselines: R's floor is LOOSE x the committed R (a kernel several times slower, or broken), and a count
# of instructions per element, which load cannot move, gates the C kernel's keys (kernel_icount.py) at this
# shape: D as in prefill, q and k of 5 heads over 32 positions (small: it is single-stepped), so both row loops
# run: 4 heads in lockstep (LOCK in harness/rope/csrc/rope_cpu.c) and one alone.
LOOSE = 0.30
ICOUNT_SHAPE = dict(b=1, hq=5, hk=5, t=32, d=64)
BASELINE = pathlib.Path("results/baselines/kernels-cpu.json")


def target(provider, mode, shape, device="cpu"):
    """The target R for this row, or None where it does not apply (TARGET_SHAPES)."""
    if shape not in TARGET_SHAPES[device]:
        return None
    return TARGETS.get((device, provider, mode))
