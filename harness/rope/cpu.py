"""CPU fast path: one C/OpenMP pass over q (and k) that reads each element once and writes it once.

Why C: the eager formula makes ~8 full-size temporaries (slices, products, cat), R ~0.07 of copy
bandwidth on our 2-core CPU; the complex form ~0.47, torch.compile ~0.2-0.33. A single
streaming loop is bounded by the same memory traffic as `copy_`. Built at first use (about a second;
no torch headers) with gcc, or the compiler HARNESS_CC names, cached under ~/.cache/harness
(HARNESS_CACHE overrides; where it cannot be written, a private dir under the temp dir, said once on stderr),
called through ctypes with raw pointers and strides, so any strided (B, H, T, D) view works without a copy.
The C source is csrc/rope_cpu.c. A cached library is loaded only after its sidecar shows it was built from
these sources, compiler and flags and its bytes still have the sha256 recorded at build time (else rebuilt).
Runtime dispatch (`isa`): one library holds a portable level and an AVX2 level with explicit bf16/fp16
conversions (before it, gcc's scalar conversions held bf16 at R ~0.3 and fp16 at ~0.15 where fp32 reached
~1.1); the widest level the CPU has runs (`avx512bf16`: AVX-512 BF16 where the CPU has it), and the levels
agree bit for bit, NaN payloads included.
fp32 math for fp32/bf16/fp16 I/O (bf16 rounds to nearest even like torch); fp64 in fp64 (gradcheck).
Needs x86 (AVX intrinsics), gcc (#pragma GCC target) and OpenMP: where it cannot be built or loaded (no
compiler, macOS clang without -fopenmp, ARM), `unavailable()` says why in one line and impl='auto' falls
back (apply.py).
"""
import ctypes
import errno
import functools
import hashlib
import itertools
import json
import os
import pathlib
import platform
import re
import shlex
import subprocess
import sys
import tempfile

import torch

CSRC = pathlib.Path(__file__).with_name("csrc")
SOURCES = ("rope_cpu.c", "rope_body.h", "rope_avx2.h", "rope_avx512.h")  # rope_cpu.c includes the others
# No -march: one library for every x86-64 CPU; the AVX2 and AVX-512 levels are compiled under
# `#pragma GCC target` and chosen at run time (`isa`). -ffp-contract=off: no level contracts a c - b s
# into an FMA, so all levels round alike (bit-identical outputs).
FLAGS = ["-O3", "-fopenmp", "-ffp-contract=off", "-shared", "-fPIC"]
SYMBOLS = {torch.float32: "rope_f32", torch.float64: "rope_f64", torch.float16: "rope_f16",
           torch.bfloat16: "rope_bf16"}
ISAS = ("generic", "avx2", "avx512bf16")  # rope_isa_supported() returns an index into this
GENERIC_ONLY = (torch.float64,)  # gradcheck's dtype has the portable level only
X86 = ("x86_64", "amd64", "i386", "i686")
_LIB, _FAILED, _ISA = [], [], []  # the loaded library, or the one-line reason it could not be had (never retried)
_WHERE = []  # the loaded library's path
_FNS = {}  # (dtype, level) -> the library function with its signature


class Unavailable(RuntimeError):
    """The kernel cannot be built or loaded on this machine; the message is one line saying why."""


def _key(cc):
    """sha256 (hex) of what the library is built from: every source file, the compiler and the flags."""
    source = "\n".join((CSRC / name).read_text() for name in SOURCES)
    return hashlib.sha256("\n".join([source, cc, *FLAGS]).encode()).hexdigest()


def _meta(cache, key):
    return cache / f"rope_cpu_{key[:16]}.json"


def _verified(cache, key):
    """(the cached library built from exactly these sources, compiler and flags, or None; why not, or None).
    The sidecar rope_cpu_<key>.json names the library (rope_cpu_<key>_<its sha256>.so, never rewritten) and
    holds the full key and the library's sha256; a library of other sources, truncated, or not a shared object
    is refused before it is loaded."""
    meta = _meta(cache, key)
    try:
        record = json.loads(meta.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f"{meta} does not read ({e})"
    if not isinstance(record, dict) or record.get("key") != key:
        return None, f"{meta} records other sources, compiler or flags"
    name = str(record.get("library", ""))
    if not re.fullmatch(r"rope_cpu_[0-9a-f]{16}_[0-9a-f]{16}\.so", name):
        return None, f"{meta} names no library"
    lib = cache / name
    try:
        data = lib.read_bytes()
    except OSError as e:
        return None, f"{lib} does not read ({e.strerror})"
    if data[:4] != b"\x7fELF":
        return None, f"{lib} is not a shared object"
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
        return None, f"{lib} is not the library that was built (truncated or replaced: its sha256 differs)"
    return lib, None


def _writable(cache):
    """Raises OSError (why, in its strerror) unless files can be created in cache (made if missing)."""
    cache.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=cache, prefix=".probe")
    os.close(fd)
    os.unlink(probe)


def _build(cc, cache, key):
    """Compile the sources into cache with cc, then record them (sidecar); the library's path. Raises Unavailable
    (one line; the compiler's output goes to a .log) where the compiler cannot build it, OSError where the
    cache cannot be written."""
    _writable(cache)
    src, log = CSRC / SOURCES[0], cache / f"rope_cpu_{key[:16]}.log"
    tmp = cache / f"rope_cpu_{key[:16]}.{os.getpid()}.tmp"
    try:
        run = subprocess.run([*shlex.split(cc), *FLAGS, str(src), "-o", str(tmp)], capture_output=True, text=True)
    except OSError as e:  # FileNotFoundError: no such compiler; PermissionError: not executable
        raise Unavailable(f"C compiler {cc!r} cannot be run ({e.strerror}); set HARNESS_CC to one that can") from None
    if run.returncode:
        log.write_text(run.stderr)
        first = next((line for line in run.stderr.splitlines() if "error" in line), run.stderr.strip()[:200])
        raise Unavailable(f"{cc} {' '.join(FLAGS)} failed: {first.strip()} (full output: {log})")
    sha = hashlib.sha256(tmp.read_bytes()).hexdigest()
    lib = cache / f"rope_cpu_{key[:16]}_{sha[:16]}.so"
    os.replace(tmp, lib)  # atomic, and named by its content: a parallel build never changes a file being loaded
    record = json.dumps({"key": key, "library": lib.name, "sha256": sha, "cc": cc, "flags": FLAGS})
    meta_tmp = cache / f"rope_cpu_{key[:16]}.{os.getpid()}.json.tmp"
    meta_tmp.write_text(record)
    os.replace(meta_tmp, _meta(cache, key))
    return lib


def _caches():
    """The kernel cache dirs to try, in order: HARNESS_CACHE or ~/.cache/harness, then a private dir under the
    system's temp dir (a read-only or missing $HOME must not stop a run). A dir that cannot be named is a string
    saying why."""
    try:
        first = pathlib.Path(os.environ.get("HARNESS_CACHE") or pathlib.Path.home() / ".cache" / "harness")
    except RuntimeError as e:  # no $HOME and no passwd entry
        first = f"no home dir ({e})"
    uid = getattr(os, "getuid", lambda: "user")()
    return [first, pathlib.Path(tempfile.gettempdir()) / f"harness-{uid}"]


def _private(cache):
    """Raises OSError unless cache (under the shared temp dir) is this user's alone: another user's dir there could
    hold any library."""
    cache.mkdir(mode=0o700, exist_ok=True)
    st = cache.stat()
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        raise PermissionError(errno.EPERM, f"{cache} is not this user's alone (owner {st.st_uid}, mode "
                                           f"{st.st_mode & 0o777:o})")


def _load():
    """Build (or find, verified, in the cache) and load the library; raises Unavailable. Where the cache cannot be
    written (read-only $HOME, HARNESS_CACHE under a file) it builds under the temp dir instead and says so once."""
    if platform.machine().lower() not in X86:
        raise Unavailable(f"the kernel uses x86 AVX intrinsics and this CPU is {platform.machine() or 'unknown'}")
    cc = os.environ.get("HARNESS_CC", "gcc")  # e.g. "gcc-13" or "ccache gcc"; part of the cache key
    key = _key(cc)
    unusable = []
    for i, cache in enumerate(_caches()):
        if isinstance(cache, str):
            unusable.append(cache)
            continue
        try:
            if i:
                _private(cache)
            lib, stale = _verified(cache, key)
            if lib is None:
                lib = _build(cc, cache, key)  # stale: rebuilt (the sidecar then names the new library)
        except OSError as e:
            unusable.append(f"{cache}: {e.strerror or e}")
            continue
        try:
            loaded = ctypes.CDLL(str(lib))
        except OSError as e:
            raise Unavailable(f"loading {lib} failed: {e}") from None
        _WHERE[:] = [lib]
        if unusable:
            print(f"harness.rope: the C kernel cache is not usable ({'; '.join(unusable)}); built it under {cache} "
                  f"instead (set HARNESS_CACHE to a writable dir)", file=sys.stderr, flush=True)
        return loaded
    raise Unavailable(f"no writable dir to build the kernel in ({'; '.join(unusable)}); set HARNESS_CACHE to one")


def where():
    """The path of the library this process loaded (None before the first use or where there is none)."""
    return _WHERE[0] if _WHERE else None


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


STREAM_MIN = 1 << 22  # bytes: csrc/rope_cpu.c's STREAM_MIN, above which outputs are streamed


@functools.lru_cache(maxsize=4096)
def _spot(tables):
    """Where an output starts, in bytes past its input modulo 4 KiB (1024-3072, a multiple of 64), given the table
    tensors' starts in bytes past that input modulo 4 KiB: as far from them as can be. The best spot is opposite
    a table or halfway between two (each way round); the candidates are those, kept inside 1-3 KiB."""
    opposite = [(p + 2048) % 4096 for p in tables]
    halfway = ((u + v + w) // 2 % 4096 for u, v in itertools.combinations(opposite, 2) for w in (0, 4096))
    spots = [2048, *opposite, *halfway]

    def away(d):  # the circular distance to the nearest table, then closeness to 2048
        return min((min((d - p) % 4096, (p - d) % 4096) for p in tables), default=0), -abs(d - 2048)
    return max((min(max(d // 64 * 64, 1024), 3072) for d in spots), key=away)


def empty_like(x, table=()):
    """An uninitialised contiguous tensor shaped like x (contiguous): a view into a storage 4 KiB longer, 64-byte
    aligned, placed against 4K aliasing (a load whose address has the low 12 bits of a pending streaming store
    waits for it; csrc/rope_cpu.c). Its data start 1-3 KiB from x's modulo 4 KiB (the kernel runs (b, h) blocks
    in lockstep only there: ALIAS_FAR) and, within that, as far as can be from the table tensors' (cos, sin: with
    16-bit q and k a table row and an output row have the same bytes, so one distance holds at every row; an
    AMD EPYC read R x0.76-0.90 with cos within 128 B of the output, against 512-1024 B away). torch's allocator
    puts outputs anywhere.
    Outputs of STREAM_MIN bytes or less are torch's own."""
    e, n, base = x.element_size(), x.numel(), x.data_ptr() // 64 * 64
    if n * e <= STREAM_MIN:  # not streamed: few stores pending, and a decode call is ~30 us (this costs ~6)
        return torch.empty_like(x)
    raw = torch.empty(n + 4096 // e, dtype=x.dtype, device=x.device)
    skip = (base + _spot(tuple((t.data_ptr() - base) % 4096 for t in table)) - raw.data_ptr()) % 4096 // e
    return raw.as_strided(x.shape, x.stride(), skip)  # x is contiguous; one call, not a slice and a view


def launch(xs, outs, cos, sin, *, interleaved, sign):
    """Fused-backend entry (see harness/rope/fused.py): xs, outs (B, H, T, D) views; cos, sin (T, R/2)."""
    if cos.stride() != sin.stride():  # one table stride is passed to C; tables are small
        cos, sin = cos.contiguous(), sin.contiguous()
    table = (cos.data_ptr(), sin.data_ptr())
    for x, out in zip(xs, outs):
        if x.device.type != "cpu" or x.dtype not in SYMBOLS:
            raise ValueError(f"the cpu rope kernel takes CPU tensors of dtype {list(SYMBOLS)}; "
                             f"got {x.device} {x.dtype}")
        xp, yp = x.data_ptr(), out.data_ptr()
        _kernel(x.dtype)(xp, yp, *table, *x.shape, 2 * cos.shape[-1], _strides(x.stride()), _strides(out.stride()),
                         cos.stride(0), int(interleaved), sign, int(yp != xp), torch.get_num_threads())


@functools.lru_cache(maxsize=256)
def _strides(strides):
    """A stride tuple as C's int64[4] (read only by C, so one array serves every call with these strides)."""
    return (ctypes.c_int64 * 4)(*strides)
