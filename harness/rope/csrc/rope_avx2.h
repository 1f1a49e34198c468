/* AVX2 vector steps of one contiguous row, 8 floats a vector; included by rope_cpu.c under
   #pragma GCC target("avx2,fma,f16c"). vhalf_T: pairs (j, j + half); vinter_T: pairs (2j, 2j + 1).
   Each does what whole vectors cover and returns the number of pairs done; the row's scalar loop does the
   rest with the same arithmetic. */

/* fp32 and fp16 (F16C converts 8 at a time, round-to-nearest-even): the table in element order */
#define LD_f32(p) _mm256_loadu_ps(p)
#define ST_f32(p, v) _mm256_storeu_ps(p, v)
#define LD_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define ST_f16(p, v) _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT))
/* (c0 c1 c2 c3) -> (c0 c0 c1 c1 c2 c2 c3 c3): one table value per element of the interleaved layout */
#define DUP(p) _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3))
#define VSTEPS(T, T_IO)                                                                               \
static inline int64_t vhalf_##T(const T_IO *xr, T_IO *o, const float *cr, const float *sr, int64_t half, float sign) { \
  int64_t j = 0;                                                                                      \
  for (__m256 sg = _mm256_set1_ps(sign); j + 8 <= half; j += 8) {                                     \
    __m256 a = LD_##T(xr + j), b = LD_##T(xr + half + j), c = _mm256_loadu_ps(cr + j);                \
    __m256 s = _mm256_mul_ps(sg, _mm256_loadu_ps(sr + j));                                            \
    ST_##T(o + j, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));                           \
    ST_##T(o + half + j, _mm256_add_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s)));                    \
  }                                                                                                   \
  return j;                                                                                           \
}                                                                                                     \
/* in element order: y = x (c0 c0 c1 c1 ..) + swap(x) (-s0 s0 -s1 s1 ..), i.e. a c - b s, b c + a s */ \
static inline int64_t vinter_##T(const T_IO *xr, T_IO *o, const float *cr, const float *sr, int64_t half, float sign) { \
  int64_t j = 0;                                                                                      \
  __m256 alt = _mm256_mul_ps(_mm256_set1_ps(sign), _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1));       \
  for (; j + 4 <= half; j += 4) {                                                                     \
    __m256 x = LD_##T(xr + 2 * j), c = DUP(cr + j), s = _mm256_mul_ps(alt, DUP(sr + j));             \
    ST_##T(o + 2 * j, _mm256_add_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(_mm256_permute_ps(x, 0xB1), s))); \
  }                                                                                                   \
  return j;                                                                                           \
}
VSTEPS(f32, float)
VSTEPS(f16, f16)

/* bf16: no conversion instruction, so rounding is integer work, kept to the fewest operations.
   rne_hi: round-to-nearest-even bf16 bits in the high 16 bits of each lane; nan_fix: NaN lanes
   (u | quiet bit), taken only when a vector holds a NaN. */
static inline __m256i rne_hi(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
}
static inline int any_nan(__m256 v, __m256 w) {  /* unordered: v or w is NaN, one compare for both */
  return _mm256_movemask_ps(_mm256_cmp_ps(v, w, _CMP_UNORD_Q));
}
static inline __m256i nan_fix(__m256 v, __m256i r) {
  __m256i quiet = _mm256_or_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x400000));
  return _mm256_blendv_epi8(r, quiet, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}
/* half layout, 16 pairs a step. unpack lo/hi of 16 bf16 give floats in the lane order
   (0-3, 8-11) and (4-7, 12-15); the table is permuted to match, and packus of the two results' high
   halves restores element order, so no cross-lane shuffle touches the data. */
static inline int64_t vhalf_bf16(const uint16_t *xr, uint16_t *o, const float *cr, const float *sr, int64_t half,
                                 float sign) {
  const __m256i zero = _mm256_setzero_si256();
  int64_t j = 0;
  for (__m256 sg = _mm256_set1_ps(sign); j + 16 <= half; j += 16) {
    __m256i xa = _mm256_loadu_si256((const __m256i *)(xr + j)), xb = _mm256_loadu_si256((const __m256i *)(xr + half + j));
    __m256 c0 = _mm256_loadu_ps(cr + j), c1 = _mm256_loadu_ps(cr + j + 8);
    __m256 s0 = _mm256_mul_ps(sg, _mm256_loadu_ps(sr + j)), s1 = _mm256_mul_ps(sg, _mm256_loadu_ps(sr + j + 8));
    __m256 clo = _mm256_permute2f128_ps(c0, c1, 0x20), chi = _mm256_permute2f128_ps(c0, c1, 0x31);
    __m256 slo = _mm256_permute2f128_ps(s0, s1, 0x20), shi = _mm256_permute2f128_ps(s0, s1, 0x31);
    __m256 alo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, xa)), ahi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, xa));
    __m256 blo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, xb)), bhi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, xb));
    __m256 ylo = _mm256_sub_ps(_mm256_mul_ps(alo, clo), _mm256_mul_ps(blo, slo));
    __m256 yhi = _mm256_sub_ps(_mm256_mul_ps(ahi, chi), _mm256_mul_ps(bhi, shi));
    __m256 zlo = _mm256_add_ps(_mm256_mul_ps(blo, clo), _mm256_mul_ps(alo, slo));
    __m256 zhi = _mm256_add_ps(_mm256_mul_ps(bhi, chi), _mm256_mul_ps(ahi, shi));
    __m256i ry0 = rne_hi(ylo), ry1 = rne_hi(yhi), rz0 = rne_hi(zlo), rz1 = rne_hi(zhi);
    if (any_nan(ylo, yhi) | any_nan(zlo, zhi)) {
      ry0 = nan_fix(ylo, ry0); ry1 = nan_fix(yhi, ry1); rz0 = nan_fix(zlo, rz0); rz1 = nan_fix(zhi, rz1);
    }
    _mm256_storeu_si256((__m256i *)(o + j), _mm256_packus_epi32(_mm256_srli_epi32(ry0, 16), _mm256_srli_epi32(ry1, 16)));
    _mm256_storeu_si256((__m256i *)(o + half + j), _mm256_packus_epi32(_mm256_srli_epi32(rz0, 16), _mm256_srli_epi32(rz1, 16)));
  }
  return j;
}
/* interleaved layout, 8 pairs a step: a 32-bit lane holds one pair, a in its low and b in its high half,
   so a = lane << 16 and b = lane & 0xffff0000; the results go back by one 16-bit blend. */
static inline int64_t vinter_bf16(const uint16_t *xr, uint16_t *o, const float *cr, const float *sr, int64_t half,
                                  float sign) {
  const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
  int64_t j = 0;
  for (__m256 sg = _mm256_set1_ps(sign); j + 8 <= half; j += 8) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(xr + 2 * j));
    __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)), b = _mm256_castsi256_ps(_mm256_and_si256(x, hi16));
    __m256 c = _mm256_loadu_ps(cr + j), s = _mm256_mul_ps(sg, _mm256_loadu_ps(sr + j));
    __m256 y = _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s));
    __m256 z = _mm256_add_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s));
    __m256i ry = rne_hi(y), rz = rne_hi(z);
    if (any_nan(y, z)) { ry = nan_fix(y, ry); rz = nan_fix(z, rz); }
    _mm256_storeu_si256((__m256i *)(o + 2 * j), _mm256_blend_epi16(_mm256_srli_epi32(ry, 16), rz, 0xAA));
  }
  return j;
}
