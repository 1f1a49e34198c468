"""CPU fast path: one C/OpenMP pass over q (and k) that reads each element once and writes it once.

Why C: the eager formula makes ~8 full-size temporaries (slices, products, cat), R ~0.07 of copy
bandwidth on our 2-core CPU; the complex form ~0.47, torch.compile ~0.2-0.33. A single
streaming loop is bounded by the same memory traffic as `copy_`. Built at first use (about a second;
no torch headers) with gcc, or the compiler HARNESS_CC names, cached under ~/.cache/harness
(HARNESS_CACHE overrides), called through ctypes with raw pointers and strides, so any strided
(B, H, T, D) view works without a copy. The C source is csrc/rope_cpu.c.
Runtime dispatch (`isa`): one library holds a portable level and an AVX2 level with explicit bf16/fp16
conversions (before it, gcc's scalar conversions held bf16 at R ~0.3 and fp16 at ~0.15 where fp32 reached
~1.1); the widest level the CPU has runs, and the levels agree bit for bit (NaN payloads aside in fp32/fp16).
fp32 math for fp32/bf16/fp16 I/O (bf16 rounds to nearest even like torch); fp64 in fp64 (gradcheck).
Needs x86 (AVX intrinsics), gcc (#pragma GCC target) and OpenMP: where it cannot be built or loaded (no
compiler, macOS clang without -fopenmp, ARM), `unavailable()` says why in one line and impl='auto' falls
back (apply.py).
"""
import ctypes
import hashlib
import os
import pathlib
import platform
import shlex
import subprocess

import torch

CSRC = pathlib.Path(__file__).with_name("csrc")
SOURCES = ("rope_cpu.c", "rope_body.h", "rope_avx2.h")  # rope_cpu.c includes the others
# No -march: one library for every x86-64 CPU; the AVX2 and AVX-512 levels are compiled under
# `#pragma GCC target` and chosen at run time (`isa`). -ffp-contract=off: no level contracts a c - b s
# into an FMA, so all levels round alike (bit-identical outputs).
FLAGS = ["-O3", "-fopenmp", "-ffp-contract=off", "-shared", "-fPIC"]
SYMBOLS = {torch.float32: "rope_f32", torch.float64: "rope_f64", torch.float16: "rope_f16",
           torch.bfloat16: "rope_bf16"}
ISAS = ("generic", "avx2")  # rope_isa_supported() returns an index into this
GENERIC_ONLY = (torch.float64,)  # gradcheck's dtype has the portable level only
X86 = ("x86_64", "amd64", "i386", "i686")
_LIB, _FAILED, _ISA = [], [], []  # the loaded library, or the one-line reason it could not be had (never retried)
_FNS = {}  # (dtype, level) -> the library function with its signature


class Unavailable(RuntimeError):
    """The kernel cannot be built or loaded on this machine; the message is one line saying why."""


def _build(cc, so):
    """Compile SOURCE into so with cc; raises Unavailable (one line; the compiler's output goes to a .log)."""
    so.parent.mkdir(parents=True, exist_ok=True)
    src, tmp, log = CSRC / SOURCES[0], so.with_suffix(f".{os.getpid()}.tmp"), so.with_suffix(".log")
    try:
        run = subprocess.run([*shlex.split(cc), *FLAGS, str(src), "-o", str(tmp)], capture_output=True, text=True)
    except OSError as e:  # FileNotFoundError: no such compiler; PermissionError: not executable
        raise Unavailable(f"C compiler {cc!r} cannot be run ({e.strerror}); set HARNESS_CC to one that can") from None
    if run.returncode:
        log.write_text(run.stderr)
        first = next((line for line in run.stderr.splitlines() if "error" in line), run.stderr.strip()[:200])
        raise Unavailable(f"{cc} {' '.join(FLAGS)} failed: {first.strip()} (full output: {log})")
    os.replace(tmp, so)  # atomic: parallel first uses never load a half-written file


def _load():
    """Build (or find in the cache) and load the library; raises Unavailable."""
    if platform.machine().lower() not in X86:
        raise Unavailable(f"the kernel uses x86 AVX intrinsics and this CPU is {platform.machine() or 'unknown'}")
    cc = os.environ.get("HARNESS_CC", "gcc")  # e.g. "gcc-13" or "ccache gcc"; part of the cache key
    source = "\n".join((CSRC / name).read_text() for name in SOURCES)
    key = hashlib.sha256("\n".join([source, cc, *FLAGS]).encode()).hexdigest()[:16]
    cache = pathlib.Path(os.environ.get("HARNESS_CACHE", pathlib.Path.home() / ".cache" / "harness"))
    so = cache / f"rope_cpu_{key}.so"
    if not so.exists():
        _build(cc, so)
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as e:
        raise Unavailable(f"loading {so} failed: {e}") from None
    return lib


def library():
    """The compiled kernel library (built once per source x compiler x flags, then loaded from the
    cache; one library runs on every x86-64 CPU). Raises Unavailable, the same one line each time, where it
    cannot be had."""
    if _LIB:
        return _LIB[0]
    if _FAILED:
        raise Unavailable(_FAILED[0])
    try:
        _LIB.append(_load())
    except Unavailable as e:
        _FAILED.append(str(e))
        raise
    return _LIB[0]


def unavailable():
    """None where the kernel builds and loads here; else the one-line reason (tries once per process)."""
    try:
        library()
    except Unavailable as e:
        return str(e)
    return None


def isa():
    """The dispatch level the kernel runs at here: the widest of ISAS this CPU supports, or the level
    HARNESS_ROPE_ISA names (to measure or test a narrower one). Raises ValueError (one line, the choices)
    for an unknown level or one this CPU lacks; Unavailable where there is no kernel."""
    if _ISA:
        return _ISA[0]
    want = os.environ.get("HARNESS_ROPE_ISA")
    if want is not None and want not in ISAS:  # checked before any build: no compiler needed to say so
        raise ValueError(f"HARNESS_ROPE_ISA={want!r}: unknown level; choose one of {list(ISAS)}")
    best = ISAS[library().rope_isa_supported()]
    runnable = list(ISAS[:ISAS.index(best) + 1])
    if want is not None and want not in runnable:
        raise ValueError(f"HARNESS_ROPE_ISA={want!r}: this CPU runs only {runnable}")
    _ISA.append(want or best)
    return _ISA[0]


def _kernel(dtype):
    """The library's function for dtype at this process's level, with its C signature declared (so ctypes
    converts plain ints and floats itself: a decode-sized call is launch-bound)."""
    level = "generic" if dtype in GENERIC_ONLY else isa()
    fn = _FNS.get((dtype, level))
    if fn is None:
        fn = getattr(library(), f"{SYMBOLS[dtype]}_{level}")
        p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        math = ctypes.c_double if dtype == torch.float64 else ctypes.c_float
        fn.argtypes = [p, p, p, p, i64, i64, i64, i64, i64, ctypes.POINTER(i64), ctypes.POINTER(i64), i64, i32, math,
                       i32, i32]
        fn.restype = None
        _FNS[(dtype, level)] = fn
    return fn


def launch(xs, outs, cos, sin, *, interleaved, sign):
    """Fused-backend entry (see harness/rope/fused.py): xs, outs (B, H, T, D) views; cos, sin (T, R/2)."""
    if cos.stride() != sin.stride():  # one table stride is passed to C; tables are small
        cos, sin = cos.contiguous(), sin.contiguous()
    strides = ctypes.c_int64 * 4
    for x, out in zip(xs, outs):
        if x.device.type != "cpu" or x.dtype not in SYMBOLS:
            raise ValueError(f"the cpu rope kernel takes CPU tensors of dtype {list(SYMBOLS)}; "
                             f"got {x.device} {x.dtype}")
        b, h, t, d = x.shape
        xp, yp = x.data_ptr(), out.data_ptr()
        _kernel(x.dtype)(xp, yp, cos.data_ptr(), sin.data_ptr(), b, h, t, d, 2 * cos.shape[-1], strides(*x.stride()),
                         strides(*out.stride()), cos.stride(0), int(interleaved), sign, int(yp != xp),
                         torch.get_num_threads())
