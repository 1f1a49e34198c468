/* AVX2 vector steps of one contiguous row, 8 floats a vector; included by rope_cpu.c under
   #pragma GCC target("avx2,fma,f16c"). vhalf_T: pairs (j, j + half); vinter_T: pairs (2j, 2j + 1).
   Each does the steps whole vectors cover and returns where it stopped: the end of those, or the first pair
   of a step whose results hold a NaN, which it leaves unstored (in place stays safe) for the scalar pairs to
   redo with the NaN pinned by operand order (rope_cpu.c). stream: non-temporal stores (every store aligned).
   neg (the backward, sign -1): y = a c + b s, z = b c - a s, which are the bits of a c - b (-s), b c + a (-s)
   (negation is exact; only a NaN's bits could differ, and a step with a NaN is redone), so no step multiplies
   the table by the sign. neg and stream are constants wherever a step is inlined. */

#define ST256(p, v, stream) \
  ((stream) ? _mm256_stream_si256((__m256i *)(p), (v)) : _mm256_storeu_si256((__m256i *)(p), (v)))
#define ST128(p, v, stream) \
  ((stream) ? _mm_stream_si128((__m128i *)(p), (v)) : _mm_storeu_si128((__m128i *)(p), (v)))
/* y, z of pairs (a, b) by (c, s) */
#define Y8(a, b, c, s, neg) ((neg) ? _mm256_add_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)) \
                                 : _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)))
#define Z8(a, b, c, s, neg) ((neg) ? _mm256_sub_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s)) \
                                 : _mm256_add_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s)))
/* fp32 and fp16 (F16C converts 8 at a time, round-to-nearest-even): the table in element order */
#define LD_f32(p) _mm256_loadu_ps(p)
#define ST_f32(p, v, stream) ST256(p, _mm256_castps_si256(v), stream)
#define LD_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define ST_f16(p, v, stream) ST128(p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT), stream)
/* nonzero where v or w holds a NaN: one compare for both */
#define ANY_NAN(v, w) _mm256_movemask_ps(_mm256_cmp_ps(v, w, _CMP_UNORD_Q))
#define VSTEPS(T, T_IO)                                                                                   \
static inline __attribute__((always_inline)) int64_t vhalf_##T##_avx2(const T_IO *xr, T_IO *o, const float *cr, \
    const float *sr, int64_t half, int neg, int stream) {                                                 \
  int64_t j = 0;                                                                                          \
  for (const int64_t end = half - half % 8; j < end; j += 8) {                                            \
    const __m256 a = LD_##T(xr + j), b = LD_##T(xr + half + j), c = _mm256_loadu_ps(cr + j);              \
    const __m256 s = _mm256_loadu_ps(sr + j), y = Y8(a, b, c, s, neg), z = Z8(a, b, c, s, neg);           \
    if (__builtin_expect(ANY_NAN(y, z), 0)) return j;                                                     \
    ST_##T(o + j, y, stream); ST_##T(o + half + j, z, stream);                                            \
  }                                                                                                       \
  return j;                                                                                               \
}                                                                                                         \
/* 8 pairs a step from two vectors x0, x1 of 4 pairs each: shuffle_ps splits them into a = (a0 a1 a4 a5 | a2 a3   \
   a6 a7) and b alike, the table is permuted to match (one 64-bit permute), and unpack lo/hi of y and z give   \
   (y0 z0 y1 z1 | y2 z2 y3 z3) and (y4 z4 ...): the pairs back in element order */                          \
static inline __attribute__((always_inline)) int64_t vinter_##T##_avx2(const T_IO *xr, T_IO *o, const float *cr, \
    const float *sr, int64_t half, int neg, int stream) {                                                 \
  int64_t j = 0;                                                                                          \
  for (const int64_t end = half - half % 8; j < end; j += 8) {                                            \
    const __m256 x0 = LD_##T(xr + 2 * j), x1 = LD_##T(xr + 2 * j + 8);                                    \
    const __m256 a = _mm256_shuffle_ps(x0, x1, 0x88), b = _mm256_shuffle_ps(x0, x1, 0xDD);                \
    const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(cr + j)), 0xD8)); \
    const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(sr + j)), 0xD8)); \
    const __m256 y = Y8(a, b, c, s, neg), z = Z8(a, b, c, s, neg);                                        \
    if (__builtin_expect(ANY_NAN(y, z), 0)) return j;                                                     \
    ST_##T(o + 2 * j, _mm256_unpacklo_ps(y, z), stream); ST_##T(o + 2 * j + 8, _mm256_unpackhi_ps(y, z), stream); \
  }                                                                                                       \
  return j;                                                                                               \
}
VSTEPS(f32, float)
VSTEPS(f16, f16)

/* bf16: no conversion instruction, so rounding is integer work, kept to the fewest operations.
   rne_hi: round-to-nearest-even bf16 bits in the high 16 bits of each lane (NaN lanes are redone). */
static inline __m256i rne_hi(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
}
/* half layout, 16 pairs a step. unpack lo/hi of 16 bf16 give floats in the lane order
   (0-3, 8-11) and (4-7, 12-15); the table is permuted to match, and packus of the two results' high
   halves restores element order, so no cross-lane shuffle touches the data. */
static inline __attribute__((always_inline)) int64_t vhalf_bf16_avx2(const uint16_t *xr, uint16_t *o, const float *cr,
                                                                     const float *sr, int64_t half, int neg, int stream) {
  const __m256i zero = _mm256_setzero_si256();
  int64_t j = 0;
  for (const int64_t end = half - half % 16; j < end; j += 16) {
    __m256i xa = _mm256_loadu_si256((const __m256i *)(xr + j)), xb = _mm256_loadu_si256((const __m256i *)(xr + half + j));
    __m256 c0 = _mm256_loadu_ps(cr + j), c1 = _mm256_loadu_ps(cr + j + 8);
    __m256 s0 = _mm256_loadu_ps(sr + j), s1 = _mm256_loadu_ps(sr + j + 8);
    __m256 clo = _mm256_permute2f128_ps(c0, c1, 0x20), chi = _mm256_permute2f128_ps(c0, c1, 0x31);
    __m256 slo = _mm256_permute2f128_ps(s0, s1, 0x20), shi = _mm256_permute2f128_ps(s0, s1, 0x31);
    __m256 alo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, xa)), ahi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, xa));
    __m256 blo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, xb)), bhi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, xb));
    __m256 ylo = Y8(alo, blo, clo, slo, neg), yhi = Y8(ahi, bhi, chi, shi, neg);
    __m256 zlo = Z8(alo, blo, clo, slo, neg), zhi = Z8(ahi, bhi, chi, shi, neg);
    if (__builtin_expect(ANY_NAN(ylo, yhi) | ANY_NAN(zlo, zhi), 0)) return j;
    __m256i ry0 = rne_hi(ylo), ry1 = rne_hi(yhi), rz0 = rne_hi(zlo), rz1 = rne_hi(zhi);
    ST256(o + j, _mm256_packus_epi32(_mm256_srli_epi32(ry0, 16), _mm256_srli_epi32(ry1, 16)), stream);
    ST256(o + half + j, _mm256_packus_epi32(_mm256_srli_epi32(rz0, 16), _mm256_srli_epi32(rz1, 16)), stream);
  }
  return j;
}
/* interleaved layout, 8 pairs a step: a 32-bit lane holds one pair, a in its low and b in its high half,
   so a = lane << 16 and b = lane & 0xffff0000; the results go back by one 16-bit blend. */
static inline __attribute__((always_inline)) int64_t vinter_bf16_avx2(const uint16_t *xr, uint16_t *o, const float *cr,
                                                                      const float *sr, int64_t half, int neg, int stream) {
  const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
  int64_t j = 0;
  for (const int64_t end = half - half % 8; j < end; j += 8) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(xr + 2 * j));
    __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)), b = _mm256_castsi256_ps(_mm256_and_si256(x, hi16));
    __m256 c = _mm256_loadu_ps(cr + j), s = _mm256_loadu_ps(sr + j);
    __m256 y = Y8(a, b, c, s, neg), z = Z8(a, b, c, s, neg);
    if (__builtin_expect(ANY_NAN(y, z), 0)) return j;
    ST256(o + 2 * j, _mm256_blend_epi16(_mm256_srli_epi32(rne_hi(y), 16), rne_hi(z), 0xAA), stream);
  }
  return j;
}
#undef VSTEPS
#undef ST256
#undef ST128
#undef Y8
#undef Z8
#undef LD_f32
#undef ST_f32
#undef LD_f16
#undef ST_f16
#undef ANY_NAN
