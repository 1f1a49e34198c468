/* The CPU RoPE kernel: one pass over q (and k) that reads each element once and writes it once.

   Runtime dispatch: rope_body.h is compiled once per level: the portable x86-64 baseline (`generic`),
   AVX2+FMA+F16C (`avx2`) and AVX-512 F/BW/DQ/VL + BF16 (`avx512bf16`: vcvtne2ps2bf16 for bf16, vcvtps2ph on
   zmm for fp16), the last two under `#pragma GCC target`; the library is built without -march=native, so one
   .so runs on every x86-64 CPU and harness/rope/cpu.py calls the widest level rope_isa_supported() reports
   (HARNESS_ROPE_ISA picks a narrower one).

   Every level gives the same bits, NaN payloads included (tests/test_rope_avx512.py). The maths, per pair:
     s' = sign x s,  y = (a x c) - (b x s'),  z = (b x c) + (a x s'),
   each operation rounded to fp32 (-ffp-contract=off: no FMA), then one rounding to the I/O dtype: bf16
   round-to-nearest-even with NaN kept NaN (quiet bit set, sign and upper payload kept), fp16 IEEE
   round-to-nearest-even (F16C's and libgcc's conversions agree, NaN payloads included). The NaN an operation
   gives is pinned by operand order as written above, with x86's rule: the first NaN operand, quieted; else
   (inf - inf, 0 x inf) the default NaN 0xFFC00000. Compilers may swap the operands of a commutative vector
   add or multiply, which changes which NaN comes out; so every vector step checks its results, and a step
   that holds a NaN (or, for vcvtne2ps2bf16, which flushes fp32 denormals to zero, a denormal) is redone by
   the scalar pairs below, whose mul_/sub_/add_ select the NaN explicitly. The check costs one compare or
   class test per vector; NaN and denormal outputs are rare, so the scalar redo is too. */
#include <stdint.h>
#include <string.h>
#include <omp.h>
#include <immintrin.h>

typedef _Float16 f16;
#define QUIET 0x00400000u
#define DEFAULT_NAN 0xFFC00000u  /* x86's result of an invalid operation */
static inline uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
/* the NaN of the x86 operation u op v (when it is NaN): the first NaN operand, quieted, else the default NaN */
static inline float nan_of(float u, float v) {
  return bitsf(u != u ? fbits(u) | QUIET : v != v ? fbits(v) | QUIET : DEFAULT_NAN);
}
static inline float mul_f(float u, float v) { float r = u * v; return r == r ? r : nan_of(u, v); }
static inline float sub_f(float u, float v) { float r = u - v; return r == r ? r : nan_of(u, v); }
static inline float add_f(float u, float v) { float r = u + v; return r == r ? r : nan_of(u, v); }
/* fp64 (gradcheck's dtype, generic level only): plain arithmetic */
static inline double mul_d(double u, double v) { return u * v; }
static inline double sub_d(double u, double v) { return u - v; }
static inline double add_d(double u, double v) { return u + v; }
#define MUL(u, v) _Generic((u), double: mul_d, default: mul_f)(u, v)
#define SUB(u, v) _Generic((u), double: sub_d, default: sub_f)(u, v)
#define ADD(u, v) _Generic((u), double: add_d, default: add_f)(u, v)

static inline float bf16_load(uint16_t h) { return bitsf((uint32_t)h << 16); }
static inline uint16_t bf16_store(float f) {
  uint32_t u = fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 /* round to nearest even */
}
#define ID(v) (v)
#define TO_F32(v) ((float)(v))
#define TO_F16(v) ((f16)(v))
/* The row loop (rope_body.h): LOCK (b, h) blocks in lockstep, every line of a row prefetched PF_BYTES ahead in
   the order rows are done (#ifndef: an experiment may set them with -D). For 16-bit q and k the fp32 table rows
   are twice the bytes of a row of q, read again for every block; in lockstep one read from L2 serves LOCK rows.
   On an AMD EPYC (Zen 4 family, avx512bf16, 1 thread; paired median of 6 alternating rounds at the prefill shape
   B4 H8 T2048 D64) LOCK 4 against one block at a time: R x1.13-1.24 for the bf16 keys, x1.03-1.10 fp16, x1.30-1.41
   fp32; LOCK 8 was better for bf16 half (x1.19 against x1.06 in the same rounds) and worse for fp32 (x1.18 against
   x1.44), 2 between; PF_BYTES 8192 or 16384 moved no key beyond the rounds' spread. */
/* 4K aliasing: a load whose address matches a pending store's in its low 12 bits waits for it (the stores are
   streaming, so many are pending). In lockstep, block k + 1 loads row t just after block k stored row t; with
   contiguous blocks (strides a multiple of 4 KiB) those addresses differ by y - x alone. Past STREAM_MIN, lockstep
   runs only where every block's output is at least ALIAS_FAR bytes from every block's input, modulo 4 KiB (in
   place never): same
   AMD EPYC, fp16 interleaved forward, output at y - x = 768-3840 mod 4096: R x1.22-1.49 against y - x = 0 (paired
   rounds); at 64-512 and 4032: x0.93-1.20. harness/rope/cpu.py places the outputs it allocates 1-3 KiB from
   their input (results/baselines/RUN.md). */
#define ALIAS_FAR 1024
#ifndef LOCK
#define LOCK 4
#endif
#ifndef PF_BYTES
#define PF_BYTES 4096
#endif
/* Out-of-place outputs above this many bytes are streamed (non-temporal stores) where the level has them. */
#define STREAM_MIN (1 << 22)
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, ISA)

/* Pairs [j0, j1) of one row, scalar: pair j is (p1 j, p1 j + p2) (half: 1, half; interleaved: 2, 1), D strides
   xd, yd. The tail of a row the vector steps leave, the strided-D path, and the redo of a flagged vector step. */
#define SCALAR(TAG, T_IO, T_MATH, LOAD, STORE)                                                           \
static __attribute__((noinline)) void FN(CAT(pairs, TAG))(const T_IO *xr, T_IO *o, const T_MATH *cr, const T_MATH *sr,      \
                                       int64_t j0, int64_t j1, T_MATH sign, int64_t p1, int64_t p2,       \
                                       int64_t xd, int64_t yd) {                                          \
  for (int64_t j = j0; j < j1; j++) {                                                                    \
    const int64_t d1 = p1 * j, d2 = p1 * j + p2;                                                         \
    const T_MATH a = LOAD(xr[d1 * xd]), b = LOAD(xr[d2 * xd]), c = cr[j], s = MUL(sign, sr[j]);          \
    o[d1 * yd] = STORE(SUB(MUL(a, c), MUL(b, s)));                                                       \
    o[d2 * yd] = STORE(ADD(MUL(b, c), MUL(a, s)));                                                       \
  }                                                                                                      \
}
#define SCALARS                                           \
  SCALAR(f32, float, float, ID, ID)                       \
  SCALAR(f16, f16, float, TO_F32, TO_F16)                 \
  SCALAR(bf16, uint16_t, float, bf16_load, bf16_store)

/* ---- generic: plain C for the baseline target ---- */
#define ISA generic
#define LINE 0
SCALARS
SCALAR(f64, double, double, ID, ID)
/* vector steps: none; each returns how many pairs it did */
#define VHALF(TAG, xr, o, cr, sr, half, neg, stream) 0
#define VINTER(TAG, xr, o, cr, sr, half, neg, stream) 0
#include "rope_body.h"
#undef ISA
#undef LINE
#undef VHALF
#undef VINTER

/* ---- avx2: 8 floats a vector ---- */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define ISA avx2
#define LINE 32
SCALARS
#include "rope_avx2.h"
#define VHALF(TAG, xr, o, cr, sr, half, neg, stream) FN(CAT(vhalf, TAG))(xr, o, cr, sr, half, neg, stream)
#define VINTER(TAG, xr, o, cr, sr, half, neg, stream) FN(CAT(vinter, TAG))(xr, o, cr, sr, half, neg, stream)
#include "rope_body.h"
#pragma GCC pop_options
#undef ISA
#undef LINE

/* ---- avx512bf16: 16 floats a vector, hardware bf16 rounding ---- */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#define ISA avx512bf16
#define LINE 64
SCALARS
#include "rope_avx512.h"
#include "rope_body.h"
#pragma GCC pop_options

/* 2: avx512bf16, 1: avx2, 0: generic; the widest level this CPU runs */
int rope_isa_supported(void) {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
    return 0;
  return 1 + (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512bf16"));
}

/* The kernel benchmark's cold start (harness/measure/kernel_timing.py): every line of [p, p + n) written back and
   dropped from every cache level, so that a timed call reads its tensors from DRAM while its code stays cached.
   clflush is SSE2, on every x86-64 CPU; about 1 ms for 33 MB here, untimed. */
void rope_evict(const void *p, int64_t n) {
  for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + (uintptr_t)n; a < end; a += 64)
    _mm_clflush((const void *)a);
  _mm_mfence();
}
