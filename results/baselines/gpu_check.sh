#!/usr/bin/env bash
# The GPU checks of the kernel work in one go, for a lent GPU machine (run from the repo root; about 6 minutes on
# an H200). Outputs go to $OUT (or /tmp/gpu_check). Optional outside kernels: put liger-kernel's wheel in .whl/ and
# flash-attn's two rotary files under .whl/fa/flash_attn/ (layers/rotary.py, ops/triton/rotary.py); the image
# has torch and triton but no Hydra or W&B, which these commands do not need.
set -u
OUT=${OUT:-/tmp/gpu_check}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/.whl/fa:$PWD PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
# correctness on the GPU, the stream-sync check of the RoPE table included
HARNESS_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q --noconftest -p no:cacheprovider tests/test_rope_kernels.py \
  > "$OUT/tests.txt" 2>&1; tail -3 "$OUT/tests.txt"
# training-step overhead against NoPE (the 2% target), both sizes of gpu-h200.md
for d in 1024 2048; do
  timeout 120 python3 -m harness.measure.overhead --device cuda --layers 8 --d-model $d --heads 16 --seq-len 2048 \
    --batch 8 --autocast bf16 --rounds 7 2>&1 | tee "$OUT/overhead$d.txt"
done
# where a step's overhead goes (table, copies, rotation), then the kernel baseline (R against copy_)
timeout 150 python3 results/baselines/h200_probe/probe4.py variants 1024 > "$OUT/variants1024.txt" 2>&1
grep d_model "$OUT/variants1024.txt"
timeout 300 python3 -m harness.measure.kernel_bench baseline --device cuda --runs 3 --baseline "$OUT/kernels-gpu.json" \
  > "$OUT/baseline.txt" 2>&1; tail -30 "$OUT/baseline.txt"
