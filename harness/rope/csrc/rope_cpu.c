/* The CPU RoPE kernel: one pass over q (and k) that reads each element once and writes it once.

   Runtime dispatch: rope_body.h is compiled once per level, for the portable x86-64 baseline (`generic`)
   and for AVX2+FMA+F16C (`avx2`, under `#pragma GCC target`); the library is built without -march=native,
   so one .so runs on every x86-64 CPU and harness/rope/cpu.py calls the widest level rope_isa_supported()
   reports (HARNESS_ROPE_ISA picks a narrower one). There is no AVX-512 level: AVX2 already streams fp32
   at the copy_ bandwidth, and a level no machine here can execute would ship untested.

   Every level computes (a c - b s, b c + a s) with each product rounded to fp32 (-ffp-contract=off), then
   one rounding to the I/O dtype: bf16 round-to-nearest-even with NaN kept NaN (quiet bit set, sign and
   payload kept), fp16 IEEE round-to-nearest-even. So the levels agree bit for bit, and the bf16/fp16
   outputs equal torch's .to(dtype) of the fp32 result (tests/test_rope_isa.py). */
#include <stdint.h>
#include <string.h>
#include <omp.h>
#include <immintrin.h>

typedef _Float16 f16;
static inline float bf16_load(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t bf16_store(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 /* round to nearest even */
}
#define ID(v) (v)
/* Outputs above this many bytes are streamed (non-temporal stores) where the level has them. */
#define STREAM_MIN (1 << 22)
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, ISA)

/* ---- generic: plain C; the compiler vectorizes what it can for the baseline target ---- */
#define ISA generic
#define LINE 0
static inline void stream_row_generic(void *dst, const void *src, int64_t n) { memcpy(dst, src, n); }
/* vector steps: none; each returns how many pairs it did */
#define VHALF(TAG, xr, o, cr, sr, half, sign) 0
#define VINTER(TAG, xr, o, cr, sr, half, sign) 0
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
#include "rope_avx2.h"
static inline void stream_row_avx2(void *dst, const void *src, int64_t n) {
  for (int64_t i = 0; i < n; i += 32)
    _mm256_stream_si256((__m256i *)((char *)dst + i), _mm256_load_si256((const __m256i *)((const char *)src + i))); }
#define VHALF(TAG, xr, o, cr, sr, half, sign) CAT(vhalf, TAG)(xr, o, cr, sr, half, sign)
#define VINTER(TAG, xr, o, cr, sr, half, sign) CAT(vinter, TAG)(xr, o, cr, sr, half, sign)
#include "rope_body.h"
#pragma GCC pop_options

/* 1: avx2, 0: generic; the widest level this CPU runs */
int rope_isa_supported(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
