/* AVX-512 vector steps of one contiguous row, 16 floats a vector; included by rope_cpu.c under
   #pragma GCC target(... avx512f, avx512bw, avx512vl, avx512dq, avx512bf16). vhalf_T: pairs (j, j + half);
   vinter_T: pairs (2j, 2j + 1). Each returns where it stopped, and takes neg (the backward) and stream, as the
   AVX2 steps do (rope_avx2.h).

   Conversions in hardware: fp16 by vcvtph2ps / vcvtps2ph (AVX512F, round to nearest even, denormals kept,
   the same bits as F16C), bf16 by vcvtne2ps2bf16 (round to nearest even). vcvtne2ps2bf16 flushes fp32
   denormals to zero, where the other levels round them, so a bf16 step stops where its results hold a
   denormal or a NaN (one vfpclassps per vector finds both); fp32 and fp16 steps stop where a NaN is. The
   scalar pairs redo the rest of such a row. */

#define ST512(p, v, stream) \
  ((stream) ? _mm512_stream_si512((void *)(p), (v)) : _mm512_storeu_si512((void *)(p), (v)))
#define ST256(p, v, stream) \
  ((stream) ? _mm256_stream_si256((__m256i *)(p), (v)) : _mm256_storeu_si256((__m256i *)(p), (v)))
/* y, z of pairs (a, b) by (c, s) */
#define Y16(a, b, c, s, neg) ((neg) ? _mm512_add_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)) \
                                 : _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)))
#define Z16(a, b, c, s, neg) ((neg) ? _mm512_sub_ps(_mm512_mul_ps(b, c), _mm512_mul_ps(a, s)) \
                                 : _mm512_add_ps(_mm512_mul_ps(b, c), _mm512_mul_ps(a, s)))
#define LD_f32(p) _mm512_loadu_ps(p)
#define ST_f32(p, v, stream) ST512(p, _mm512_castps_si512(v), stream)
#define LD_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define ST_f16(p, v, stream) ST256(p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT), stream)
/* 16 bf16 -> 16 floats: zero-extend each to 32 bits (one vpmovzxwd, straight from memory), shift up */
#define LD_bf16(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
/* a NaN (quiet; results are never signalling) or a denormal: the lanes vcvtne2ps2bf16 does not round alike */
#define ODD 0x21
#define ODD2(v, w) _kor_mask16(_mm512_fpclass_ps_mask(v, ODD), _mm512_fpclass_ps_mask(w, ODD))
#define BF16x32(lo, hi) ((__m512i)_mm512_cvtne2ps_pbh(hi, lo))  /* 32 bf16: lo's 16, then hi's 16 */
#define BF16x16(v) ((__m256i)_mm512_cvtneps_pbh(v))

#define VHALF_STEP(T, T_IO)                                                                                \
static inline __attribute__((always_inline)) int64_t vhalf_##T##_avx512bf16(const T_IO *xr, T_IO *o,      \
    const float *cr, const float *sr, int64_t half, int neg, int stream) {                                \
  int64_t j = 0;                                                                                          \
  for (const int64_t end = half - half % 16; j < end; j += 16) {                                          \
    const __m512 a = LD_##T(xr + j), b = LD_##T(xr + half + j), c = _mm512_loadu_ps(cr + j);             \
    const __m512 s = _mm512_loadu_ps(sr + j), y = Y16(a, b, c, s, neg), z = Z16(a, b, c, s, neg);         \
    if (__builtin_expect(_mm512_cmp_ps_mask(y, z, _CMP_UNORD_Q) != 0, 0)) return j;                       \
    ST_##T(o + j, y, stream); ST_##T(o + half + j, z, stream);                                            \
  }                                                                                                       \
  return j;                                                                                               \
}
/* fp32: 16 pairs a step from two vectors of 8 pairs, split by shuffle_ps into a = (a0 a1 a8 a9 | a2 a3 a10 a11 |
   ..) and b alike, the table permuted to match, and unpack lo/hi of y and z restore element order (as AVX2) */
#define VINTER_STEP(T, T_IO)                                                                                  \
static inline __attribute__((always_inline)) int64_t vinter_##T##_avx512bf16(const T_IO *xr, T_IO *o,     \
    const float *cr, const float *sr, int64_t half, int neg, int stream) {                                \
  const __m512i order = _mm512_setr_epi32(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);          \
  int64_t j = 0;                                                                                          \
  for (const int64_t end = half - half % 16; j < end; j += 16) {                                          \
    const __m512 x0 = LD_##T(xr + 2 * j), x1 = LD_##T(xr + 2 * j + 16);                                   \
    const __m512 a = _mm512_shuffle_ps(x0, x1, 0x88), b = _mm512_shuffle_ps(x0, x1, 0xDD);                \
    const __m512 c = _mm512_permutexvar_ps(order, _mm512_loadu_ps(cr + j));                               \
    const __m512 s = _mm512_permutexvar_ps(order, _mm512_loadu_ps(sr + j));                               \
    const __m512 y = Y16(a, b, c, s, neg), z = Z16(a, b, c, s, neg);                                      \
    if (__builtin_expect(_mm512_cmp_ps_mask(y, z, _CMP_UNORD_Q) != 0, 0)) return j;                       \
    ST_##T(o + 2 * j, _mm512_unpacklo_ps(y, z), stream);                                                  \
    ST_##T(o + 2 * j + 16, _mm512_unpackhi_ps(y, z), stream);                                             \
  }                                                                                                       \
  return j;                                                                                               \
}
VHALF_STEP(f32, float)
VHALF_STEP(f16, f16)
VINTER_STEP(f32, float)

/* fp16, interleaved layout, 16 pairs a step: one vpermw gathers the 32 halves into a's 16 then b's 16 (each
   converts in order, so the table needs no permute); y's and z's 16 halves go back in pair order with one
   two-source vpermt2w, one 64-byte store */
static inline __attribute__((always_inline)) int64_t vinter_f16_avx512bf16(const f16 *xr, f16 *o, const float *cr,
    const float *sr, int64_t half, int neg, int stream) {
  const __m512i split = _mm512_set_epi16(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1,
                                         30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i zip = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);  /* word 2i: y_i, 2i + 1: z_i */
  int64_t j = 0;
  for (const int64_t end = half - half % 16; j < end; j += 16) {
    const __m512i x = _mm512_permutexvar_epi16(split, _mm512_loadu_si512((const void *)(xr + 2 * j)));
    const __m512 a = _mm512_cvtph_ps(_mm512_castsi512_si256(x)), b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1));
    const __m512 c = _mm512_loadu_ps(cr + j), s = _mm512_loadu_ps(sr + j);
    const __m512 y = Y16(a, b, c, s, neg), z = Z16(a, b, c, s, neg);
    if (__builtin_expect(_mm512_cmp_ps_mask(y, z, _CMP_UNORD_Q) != 0, 0)) return j;
    const __m512i yz = _mm512_permutex2var_epi16(_mm512_castsi256_si512(_mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT)), zip,
                                                 _mm512_castsi256_si512(_mm512_cvtps_ph(z, _MM_FROUND_TO_NEAREST_INT)));
    ST512(o + 2 * j, yz, stream);
  }
  return j;
}

/* bf16, half layout: 32 pairs a step (two vectors each of a, b, c, s; one 64-byte store each of y and z),
   then one step of 16 pairs for a half row of 16 mod 32 */
static inline __attribute__((always_inline)) int64_t vhalf_bf16_avx512bf16(const uint16_t *xr, uint16_t *o,
    const float *cr, const float *sr, int64_t half, int neg, int stream) {
  int64_t j = 0;
  for (const int64_t end = half - half % 32; j < end; j += 32) {
    const __m512 a0 = LD_bf16(xr + j), a1 = LD_bf16(xr + j + 16), b0 = LD_bf16(xr + half + j);
    const __m512 b1 = LD_bf16(xr + half + j + 16), c0 = _mm512_loadu_ps(cr + j), c1 = _mm512_loadu_ps(cr + j + 16);
    const __m512 s0 = _mm512_loadu_ps(sr + j), s1 = _mm512_loadu_ps(sr + j + 16);
    const __m512 y0 = Y16(a0, b0, c0, s0, neg), y1 = Y16(a1, b1, c1, s1, neg);
    const __m512 z0 = Z16(a0, b0, c0, s0, neg), z1 = Z16(a1, b1, c1, s1, neg);
    if (__builtin_expect(!_kortestz_mask16_u8(ODD2(y0, y1), ODD2(z0, z1)), 0)) return j;
    ST512(o + j, BF16x32(y0, y1), stream);
    ST512(o + half + j, BF16x32(z0, z1), stream);
  }
  if (__builtin_expect(j + 16 <= half, 0)) {
    const __m512 a = LD_bf16(xr + j), b = LD_bf16(xr + half + j), c = _mm512_loadu_ps(cr + j);
    const __m512 s = _mm512_loadu_ps(sr + j), y = Y16(a, b, c, s, neg), z = Z16(a, b, c, s, neg);
    if (__builtin_expect(!_kortestz_mask16_u8(ODD2(y, z), 0), 0)) return j;
    ST256(o + j, BF16x16(y), stream);
    ST256(o + half + j, BF16x16(z), stream);
    j += 16;
  }
  return j;
}
/* bf16, interleaved layout, 16 pairs a step: a 32-bit lane holds one pair, a in its low and b in its high
   half, so a = lane << 16, b = lane & 0xffff0000; y and z convert together and one vpermw interleaves them */
static inline __attribute__((always_inline)) int64_t vinter_bf16_avx512bf16(const uint16_t *xr, uint16_t *o,
    const float *cr, const float *sr, int64_t half, int neg, int stream) {
  const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);
  const __m512i zip = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);  /* word 2i: y_i, 2i + 1: z_i */
  int64_t j = 0;
  for (const int64_t end = half - half % 16; j < end; j += 16) {
    const __m512i x = _mm512_loadu_si512((const void *)(xr + 2 * j));
    const __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)), b = _mm512_castsi512_ps(_mm512_and_si512(x, hi16));
    const __m512 c = _mm512_loadu_ps(cr + j), s = _mm512_loadu_ps(sr + j);
    const __m512 y = Y16(a, b, c, s, neg), z = Z16(a, b, c, s, neg);
    if (__builtin_expect(!_kortestz_mask16_u8(ODD2(y, z), 0), 0)) return j;
    ST512(o + 2 * j, _mm512_permutexvar_epi16(zip, BF16x32(y, z)), stream);
  }
  return j;
}
#undef VHALF_STEP
#undef VINTER_STEP
#undef ST512
#undef ST256
#undef Y16
#undef Z16
#undef LD_f32
#undef ST_f32
#undef LD_f16
#undef ST_f16
#undef LD_bf16
#undef ODD
#undef ODD2
#undef BF16x32
#undef BF16x16
