"""CPU fast path: one C/OpenMP pass over q (and k) that reads each element once and writes it once.

Why C: the eager formula makes ~8 full-size temporaries (slices, products, cat), R ~0.07 of copy
bandwidth on our 2-core CPU; the complex form ~0.47, torch.compile ~0.2-0.33. A single
streaming loop is bounded by the same memory traffic as `copy_`. Built at first use (about a second;
no torch headers) with gcc, or the compiler HARNESS_CC names, cached under ~/.cache/harness
(HARNESS_CACHE overrides), called through ctypes with raw pointers and strides, so any strided
(B, H, T, D) view works without a copy.
fp32 math for fp32/bf16/fp16 I/O (bf16 rounds to nearest even like torch); fp64 in fp64 (gradcheck).
Needs x86 (AVX intrinsics) and OpenMP: where it cannot be built or loaded (no compiler, macOS clang
without -fopenmp, ARM), `unavailable()` says why in one line and impl='auto' falls back (apply.py).
"""
import ctypes
import hashlib
import os
import pathlib
import platform
import shlex
import subprocess

import torch

SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <omp.h>
#include <immintrin.h>
typedef _Float16 f16;
static inline float bf16_load(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t bf16_store(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16);               /* round to nearest even */
}
/* Non-temporal stores: a plain store first reads the output line (write-allocate), 1.5x the traffic
   of copy_, whose memcpy streams. Rows are built in an L1 buffer and streamed out when aligned. */
#if defined(__AVX512F__)
#define LINE 64
static inline void stream_row(void *dst, const void *src, int64_t n) {
  for (int64_t i = 0; i < n; i += 64) _mm512_stream_si512((__m512i *)((char *)dst + i), _mm512_load_si512((const char *)src + i)); }
#elif defined(__AVX__)
#define LINE 32
static inline void stream_row(void *dst, const void *src, int64_t n) {
  for (int64_t i = 0; i < n; i += 32) _mm256_stream_si256((__m256i *)((char *)dst + i), _mm256_load_si256((const __m256i *)((const char *)src + i))); }
#else
#define LINE 0
static inline void stream_row(void *dst, const void *src, int64_t n) { memcpy(dst, src, n); }
#endif
#define ID(v) (v)
/* x, y: (B, H, T, D) with strides xs[4], ys[4] (elements); c, s: (T, R/2) with row stride ct.
   ivdep: pair j reads and writes only its own two elements, so in place (y == x) is safe.
   out_of_place: y != x, so the pass-through tail D - R is copied and rows may be streamed. */
#define ROPE(NAME, T_IO, T_MATH, LOAD, STORE)                                                         \
void NAME(const T_IO *x, T_IO *y, const T_MATH *c, const T_MATH *s, int64_t B, int64_t H, int64_t T,  \
          int64_t D, int64_t R, const int64_t *xs, const int64_t *ys, int64_t ct, int interleaved,      \
          T_MATH sign, int out_of_place, int nthreads) {                                                \
  const int64_t rows = B * H * T, half = R / 2, bytes = D * (int64_t)sizeof(T_IO);                     \
  const int64_t p1 = interleaved ? 2 : 1, p2 = interleaved ? 1 : half; /* pair j: (p1*j, p1*j+p2) */   \
  if (rows == 0) return;                                                                                \
  const int64_t ahead = bytes >= 8192 ? 1 : 8192 / bytes;  /* prefetch ~8 KB ahead: 1.6x measured */ \
  const int big = LINE && out_of_place && ys[3] == 1 && bytes % LINE == 0 && rows * bytes > (1 << 22); \
  _Pragma("omp parallel num_threads(rows * D > 16384 ? nthreads : 1)")                                 \
  {                                                                                                     \
  T_IO buf[D] __attribute__((aligned(64)));                                                             \
  int nt = omp_get_num_threads(), id = omp_get_thread_num();                                            \
  int64_t lo = rows * id / nt, hi = rows * (id + 1) / nt;  /* contiguous rows; no division per row */ \
  int64_t b = lo / (H * T), h = (lo / T) % H, t = lo % T;                                               \
  for (int64_t i = lo; i < hi; i++) {                                                                   \
    const T_IO *xr = x + b * xs[0] + h * xs[1] + t * xs[2];                                            \
    T_IO *yr = y + b * ys[0] + h * ys[1] + t * ys[2];                                                  \
    for (int64_t pf = 0; pf < bytes; pf += 64) __builtin_prefetch((const char *)(xr + ahead * xs[2]) + pf); \
    const int stream = big && ((uintptr_t)yr % LINE == 0);                                              \
    T_IO *o = stream ? buf : yr;                                                                        \
    const int64_t os = stream ? 1 : ys[3];                                                              \
    const T_MATH *cr = c + t * ct, *sr = s + t * ct;                                                   \
    if (xs[3] == 1 && os == 1 && !interleaved) {        /* the common case: vectorizes */             \
      _Pragma("GCC ivdep") for (int64_t j = 0; j < half; j++) {                                                              \
        T_MATH a = LOAD(xr[j]), bb = LOAD(xr[j + half]), cj = cr[j], sj = sign * sr[j];                \
        o[j] = STORE(a * cj - bb * sj); o[j + half] = STORE(bb * cj + a * sj);                         \
      }                                                                                                 \
    } else if (xs[3] == 1 && os == 1) {                                                                 \
      _Pragma("GCC ivdep") for (int64_t j = 0; j < half; j++) {                                                              \
        T_MATH a = LOAD(xr[2 * j]), bb = LOAD(xr[2 * j + 1]), cj = cr[j], sj = sign * sr[j];           \
        o[2 * j] = STORE(a * cj - bb * sj); o[2 * j + 1] = STORE(bb * cj + a * sj);                    \
      }                                                                                                 \
    } else {                                            /* any stride along D */                       \
      for (int64_t j = 0; j < half; j++) {                                                              \
        const int64_t d1 = p1 * j, d2 = p1 * j + p2;                                                    \
        T_MATH a = LOAD(xr[d1 * xs[3]]), bb = LOAD(xr[d2 * xs[3]]), cj = cr[j], sj = sign * sr[j];     \
        o[d1 * os] = STORE(a * cj - bb * sj); o[d2 * os] = STORE(bb * cj + a * sj);                    \
      }                                                                                                 \
    }                                                                                                   \
    if (out_of_place) for (int64_t d = R; d < D; d++) o[d * os] = xr[d * xs[3]];  /* partial rotary */ \
    if (stream) stream_row(yr, buf, bytes);                                                             \
    if (++t == T) { t = 0; if (++h == H) { h = 0; b++; } }                                              \
  }                                                                                                     \
  _mm_sfence();                                                                                         \
  }                                                                                                     \
}
ROPE(rope_f32, float, float, ID, ID)
ROPE(rope_f64, double, double, ID, ID)
ROPE(rope_f16, f16, float, (float), (f16))
ROPE(rope_bf16, uint16_t, float, bf16_load, bf16_store)
"""
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
SYMBOLS = {torch.float32: "rope_f32", torch.float64: "rope_f64", torch.float16: "rope_f16",
           torch.bfloat16: "rope_bf16"}
X86 = ("x86_64", "amd64", "i386", "i686")
_LIB, _FAILED = [], []  # the loaded library, or the one-line reason it could not be had (never retried)


class Unavailable(RuntimeError):
    """The kernel cannot be built or loaded on this machine; the message is one line saying why."""


def _machine_key():
    """-march=native code is only valid on this CPU: the cache key includes its flags."""
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
        return next((line for line in info.splitlines() if line.startswith("flags")), "")
    except OSError:
        return ""


def _build(cc, so):
    """Compile SOURCE into so with cc; raises Unavailable (one line; the compiler's output goes to a .log)."""
    so.parent.mkdir(parents=True, exist_ok=True)
    src, tmp, log = so.with_suffix(".c"), so.with_suffix(f".{os.getpid()}.tmp"), so.with_suffix(".log")
    src.write_text(SOURCE)
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
    key = hashlib.sha256("\n".join([SOURCE, cc, *FLAGS, _machine_key()]).encode()).hexdigest()[:16]
    cache = pathlib.Path(os.environ.get("HARNESS_CACHE", pathlib.Path.home() / ".cache" / "harness"))
    so = cache / f"rope_cpu_{key}.so"
    if not so.exists():
        _build(cc, so)
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as e:
        raise Unavailable(f"loading {so} failed: {e}") from None
    for fn in SYMBOLS.values():
        getattr(lib, fn).restype = None
    return lib


def library():
    """The compiled kernel library (built once per source x compiler x flags x CPU, then loaded from the
    cache). Raises Unavailable, the same one line each time, where it cannot be had."""
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


def launch(xs, outs, cos, sin, *, interleaved, sign):
    """Fused-backend entry (see harness/rope/fused.py): xs, outs (B, H, T, D) views; cos, sin (T, R/2)."""
    lib, p = library(), ctypes.c_void_p
    if cos.stride() != sin.stride():  # one table stride is passed to C; tables are small
        cos, sin = cos.contiguous(), sin.contiguous()
    math = ctypes.c_double if cos.dtype == torch.float64 else ctypes.c_float
    for x, out in zip(xs, outs):
        if x.device.type != "cpu" or x.dtype not in SYMBOLS:
            raise ValueError(f"the cpu rope kernel takes CPU tensors of dtype {list(SYMBOLS)}; "
                             f"got {x.device} {x.dtype}")
        b, h, t, d = x.shape
        xs_, ys_ = (ctypes.c_int64 * 4)(*x.stride()), (ctypes.c_int64 * 4)(*out.stride())
        getattr(lib, SYMBOLS[x.dtype])(
            p(x.data_ptr()), p(out.data_ptr()), p(cos.data_ptr()), p(sin.data_ptr()),
            ctypes.c_int64(b), ctypes.c_int64(h), ctypes.c_int64(t), ctypes.c_int64(d),
            ctypes.c_int64(2 * cos.shape[-1]), xs_, ys_, ctypes.c_int64(cos.stride(0)),
            ctypes.c_int(interleaved), math(sign), ctypes.c_int(out.data_ptr() != x.data_ptr()),
            ctypes.c_int(torch.get_num_threads()))
