"""Instructions per element of the C kernel: the kernel-speed gate's statistic that machine load cannot move.

A key's count is the number of instructions the C kernel (harness/rope/cpu.py) retires in one call of the
benchmark's own callable (kernel_bench.kernel_fn: the forward, or the backward through autograd, of q and k) at
the small shape ICOUNT_SHAPE, divided by the elements rotated. It is counted by single-stepping: a trampoline
compiled here sets the x86 trap flag, calls the kernel and clears the flag, and a SIGTRAP handler adds one per
instruction, the kernel's own and the OpenMP runtime's it calls. It is the same number for the same library
and inputs whatever else the machine runs, on every level the CPU has, AVX-512 included (valgrind's
callgrind counts the same for the levels it can run, tests/test_kernel_callgrind.py, but valgrind 3.19 stops at
the first AVX-512 instruction). The trampoline replaces the library function in harness.rope.cpu's function
table, so whatever runs between the callable and the kernel (a second launch, say) is counted.

The committed baseline keeps, under "instructions", the counts of every level measured and their ceilings
(MARGIN x the count); `kernel_bench check` fails a key whose count on a level this CPU runs exceeds its ceiling.
Linux x86-64 only (ucontext's REG_RIP/REG_EFL); elsewhere `unavailable()` says why and the gate skips counting.
"""
import ctypes
import json
import os
import pathlib
import platform
import subprocess
import tempfile

from harness.bench.kernel_spec import ICOUNT_SHAPE

MARGIN = 1.25  # ceiling = MARGIN x the committed count: a compiler's codegen may differ; 2x the work may not
SOURCE = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
typedef void (*kernel_t)(void *, void *, void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t *,
                         int64_t *, int64_t, int, float, int, int);
static volatile uint64_t steps;
static volatile int on;
static void trap(int sig, siginfo_t *si, void *u) {
  ucontext_t *uc = u;
  (void)sig; (void)si;
  if (on) { steps++; uc->uc_mcontext.gregs[REG_EFL] |= 0x100; }
  else uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x100;
}
int icount_init(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = trap;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGTRAP, &sa, 0);
}
uint64_t icount_take(void) { uint64_t n = steps; steps = 0; return n; }
/* the kernel's signature with its address first: counts every instruction from the call to the return */
void icount_call(kernel_t fn, void *x, void *y, void *c, void *s, int64_t B, int64_t H, int64_t T, int64_t D,
                 int64_t R, int64_t *xs, int64_t *ys, int64_t ct, int inter, float sign, int oop, int nt) {
  on = 1;
  __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
  fn(x, y, c, s, B, H, T, D, R, xs, ys, ct, inter, sign, oop, nt);
  on = 0;
  __asm__ volatile("pushfq; andq $-257, (%%rsp); popfq" ::: "memory", "cc");
}
"""
_LIB = []


def unavailable():
    """None where instructions can be counted here, else why not (one line)."""
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return f"counting instructions needs Linux on x86-64, not {platform.system()} {platform.machine()}"
    from harness.rope import cpu
    return cpu.unavailable()


def _library():
    if not _LIB:
        with tempfile.TemporaryDirectory() as tmp:
            src, so = pathlib.Path(tmp, "icount.c"), pathlib.Path(tmp, "icount.so")
            src.write_text(SOURCE)
            cc = os.environ.get("HARNESS_CC", "gcc")
            subprocess.run([cc, "-O1", "-shared", "-fPIC", str(src), "-o", str(so)], check=True, capture_output=True)
            lib = ctypes.CDLL(str(so))
        if lib.icount_init():
            raise OSError("sigaction(SIGTRAP) failed")
        lib.icount_take.restype = ctypes.c_uint64
        _LIB.append(lib)
    return _LIB[0]


class _Counted:
    """Stands in for a library function in harness.rope.cpu's table: calls it through the trampoline."""

    def __init__(self, fn):
        self.fn, self.address = fn, ctypes.cast(fn, ctypes.c_void_p).value
        self.call = _library().icount_call
        self.call.argtypes = [ctypes.c_void_p, *fn.argtypes]
        self.call.restype = None

    def __call__(self, *args):
        self.call(self.address, *args)


def count(key, level, make):
    """Instructions per element of the C kernel for `key` (provider cpu) at `level`; make(key, shape) gives the
    benchmark's zero-argument callable and the number of elements one call rotates (kernel_bench.icount_case)."""
    import torch

    from harness.rope import cpu
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[key.split("/")[3]]
    saved_isa, saved_fns, threads = list(cpu._ISA), dict(cpu._FNS), torch.get_num_threads()
    try:
        cpu._ISA[:] = [level]
        torch.set_num_threads(1)
        cpu._FNS[(dtype, level)] = _Counted(cpu._kernel(dtype))
        with torch.random.fork_rng():  # the backward's random gradients: the same inputs every time
            torch.manual_seed(0)
            fn, elements = make(key, ICOUNT_SHAPE)
        fn()  # first call: anything lazy happens outside the count
        _library().icount_take()
        fn()
        return _library().icount_take() / elements
    finally:
        cpu._ISA[:] = saved_isa
        torch.set_num_threads(threads)
        cpu._FNS.clear()
        cpu._FNS.update(saved_fns)


def levels():
    """The C kernel's vector levels this CPU runs, narrowest first. Not `generic`: the portable fallback, which no
    machine with AVX2 runs, costs 10-100x the instructions of a vector level (libgcc's fp16 conversions) and so
    minutes to single-step."""
    from harness.rope import cpu
    return [lv for lv in cpu.ISAS[:cpu.library().rope_isa_supported() + 1] if lv != "generic"]


def measure(keys, make, which=None):
    """{level: {key: instructions per element}} for the C kernel's keys among keys, on every level this CPU runs
    (or those in which)."""
    keys = [k for k in keys if k.startswith("cpu/")]
    return {lv: {k: count(k, lv, make) for k in keys} for lv in levels() if which is None or lv in which}


def record(doc, counts, cc):
    """doc["instructions"] with counts (measure()) and their ceilings merged in, levels not measured kept."""
    old = doc.get("instructions", {})
    per = {**old.get("per_element", {}), **{lv: {k: round(v, 4) for k, v in c.items()} for lv, c in counts.items()}}
    shape = "·".join(f"{k.upper()}{v}" for k, v in ICOUNT_SHAPE.items())
    return dict(statistic=f"instructions per element of the C kernel, one call of q and k at {shape}, single-stepped",
                compiler=cc, margin=MARGIN, per_element=per,
                ceiling={lv: {k: round(MARGIN * v, 3) for k, v in c.items()} for lv, c in per.items()})


def compare(counts, ceiling):
    """Failure lines for every (level, key) counted whose count exceeds its ceiling; a level or key counted but
    without a ceiling is a failure too (the baseline must cover what the gate checks)."""
    out = []
    for lv, c in counts.items():
        for key, n in c.items():
            top = ceiling.get(lv, {}).get(key)
            if top is None:
                out.append(f"{key} [{lv}]: no instruction ceiling in the baseline (python -m "
                           f"harness.bench.kernel_bench ceilings)")
            elif n > top:
                out.append(f"{key} [{lv}]: {n:.3f} instructions per element > ceiling {top:.3f}")
    return out


def compiler():
    """The first line of the C compiler's --version (what the counts depend on besides the source)."""
    cc = os.environ.get("HARNESS_CC", "gcc")
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return cc


def check(doc, keys, make):
    """The gate's load-proof half: the C kernel's keys among keys on every vector level this CPU runs against
    doc's ceilings, one line printed per count; the failure lines."""
    why = unavailable()
    if why:
        print(f"instructions: not counted here ({why})")
        return []
    counts = measure(keys, make)
    ceiling = doc.get("instructions", {}).get("ceiling", {})
    for level, per in counts.items():
        for key, n in per.items():
            top = ceiling.get(level, {}).get(key)
            print(f"{key:42s} [{level}] instructions/element {n:.3f}  ceiling {'-' if top is None else f'{top:.3f}'}")
    return compare(counts, ceiling)


def write(path, keys, make):
    """Count the C kernel's keys among keys on every vector level this CPU runs and record counts and ceilings in
    the baseline at path (load cannot move them: no quiet machine needed); levels this CPU lacks keep theirs."""
    doc = json.loads(pathlib.Path(path).read_text())
    doc["instructions"] = record(doc, measure(keys, make), compiler())
    pathlib.Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    return doc["instructions"]
