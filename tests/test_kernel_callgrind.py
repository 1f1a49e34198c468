"""The gate's instruction count (harness/bench/kernel_icount.py: single-stepping under the trap flag) is the count
valgrind's callgrind gives for the same call, repeats exactly, and doubles with twice the work.

callgrind runs the library's avx2 level from a small C driver (valgrind 3.19 cannot run AVX-512 code, and its
CPUID hides AVX-512, which is why the gate single-steps); the two counts differ by the trampoline's own few
instructions (the call's argument moves). Skipped without valgrind, gcc, AVX2 or Linux x86-64, with the reason.
"""
import ctypes
import re
import shutil
import subprocess

import pytest
import torch

from harness.bench import kernel_icount
from harness.bench.kernel_bench import icount_case, inputs
from harness.bench.kernel_spec import ICOUNT_SHAPE
from harness.rope import cpu

pytestmark = pytest.mark.skipif(kernel_icount.unavailable() is not None,
                                reason=f"no instruction counts here: {kernel_icount.unavailable()}")
DRIVER = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef void (*kernel_t)(void *, void *, void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t *,
                         int64_t *, int64_t, int, float, int, int);
int main(int argc, char **argv) {  /* lib symbol T D interleaved sign: one (1, 1, T, D) bf16 tensor */
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  kernel_t fn = (kernel_t)dlsym(lib, argv[2]);
  int64_t T = atoll(argv[3]), D = atoll(argv[4]), st[4] = {T * D, T * D, D, 1};
  uint16_t *x = aligned_alloc(64, T * D * 2 + 64), *y = aligned_alloc(64, T * D * 2 + 64);
  float *c = malloc(T * D * 2), *s = malloc(T * D * 2);
  for (int64_t i = 0; i < T * D; i++) x[i] = (uint16_t)(0x3f00 + i % 251);  /* normal bf16 values */
  for (int64_t i = 0; i < T * D / 2; i++) { c[i] = 0.5f + i * 1e-4f; s[i] = 0.25f - i * 1e-4f; }
  fn(x, y, c, s, 1, 1, T, D, D, st, st, D / 2, atoi(argv[5]), (float)atof(argv[6]), 1, 1);
  return 0;
}
"""


def _levels():
    return kernel_icount.levels()


def _single_step(symbol, t, d, interleaved, sign):
    """The trampoline's count for one call of symbol on a (1, 1, t, d) bf16 tensor of normal values."""
    fn = getattr(cpu.library(), symbol)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    fn.argtypes = [p, p, p, p, i64, i64, i64, i64, i64, ctypes.POINTER(i64), ctypes.POINTER(i64), i64, ctypes.c_int,
                   ctypes.c_float, ctypes.c_int, ctypes.c_int]
    counted = kernel_icount._Counted(fn)
    x = (torch.arange(t * d) % 251 + 0x3F00).to(torch.int16).view(torch.bfloat16)
    y, c, s = torch.empty_like(x), torch.rand(t * d // 2), torch.rand(t * d // 2)
    st = (i64 * 4)(t * d, t * d, d, 1)
    kernel_icount._library().icount_take()
    counted(x.data_ptr(), y.data_ptr(), c.data_ptr(), s.data_ptr(), 1, 1, t, d, d, st, st, d // 2, interleaved, sign,
            1, 1)
    return kernel_icount._library().icount_take()


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
@pytest.mark.skipif("avx2" not in _levels(), reason="this CPU lacks the avx2 level")
@pytest.mark.parametrize("interleaved,sign", [(0, 1.0), (1, -1.0)])
def test_single_step_count_is_callgrinds(tmp_path, interleaved, sign):
    src, exe = tmp_path / "driver.c", tmp_path / "driver"
    src.write_text(DRIVER)
    subprocess.run(["gcc", "-O1", str(src), "-o", str(exe), "-ldl"], check=True)
    t, d, symbol = ICOUNT_SHAPE["t"], ICOUNT_SHAPE["d"], "rope_bf16_avx2"
    out = tmp_path / "callgrind.out"
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--toggle-collect={symbol}", f"--callgrind-out-file={out}",
                          str(exe), cpu.library()._name, symbol, str(t), str(d), str(interleaved), str(sign)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    grind = int(re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)[1])
    step = _single_step(symbol, t, d, interleaved, sign)
    assert grind > t * d / 2  # the kernel ran under callgrind
    assert 0 <= step - grind <= 40, (step, grind)  # the trampoline's argument moves and call, nothing else


@pytest.mark.parametrize("key", ["cpu/bwd/half/bfloat16/prefill", "cpu/fwd/interleaved/float16/prefill"])
def test_count_repeats_exactly_and_doubles_with_twice_the_work(key):
    def twice(k, shape):
        fn, elements = icount_case(k, shape)
        return (lambda: (fn(), fn())), elements

    for level in _levels():
        once = kernel_icount.count(key, level, icount_case)
        assert kernel_icount.count(key, level, icount_case) == once, level
        assert kernel_icount.count(key, level, twice) == pytest.approx(2 * once, rel=1e-3), level


def test_the_level_in_use_is_restored_after_counting():
    before = cpu.isa()
    kernel_icount.count("cpu/fwd/half/float32/prefill", _levels()[0], icount_case)
    assert cpu.isa() == before and torch.get_num_threads() >= 1
    q, k, cos, sin = inputs(ICOUNT_SHAPE, torch.float32)
    out = torch.empty_like(q)
    cpu.launch((q,), (out,), cos, sin, interleaved=False, sign=1.0)  # the real function again, not the trampoline
    assert not any(isinstance(f, kernel_icount._Counted) for f in cpu._FNS.values())
