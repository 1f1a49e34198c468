/* One dispatch level of the kernel; included by rope_cpu.c with ISA (the names' suffix), LINE (bytes a
   streaming store writes, 0: none) and VHALF/VINTER (the level's vector steps of a contiguous row). */

/* One contiguous row (D stride 1 in and out): the vector steps, then the scalar rest. */
#define ROW(TAG, T_IO, T_MATH, LOAD, STORE)                                                           \
static inline void FN(CAT(row, TAG))(const T_IO *xr, T_IO *o, const T_MATH *cr, const T_MATH *sr,     \
                                     int64_t half, T_MATH sign, int interleaved) {                     \
  if (!interleaved) {                                                                                 \
    for (int64_t j = VHALF(TAG, xr, o, cr, sr, half, sign); j < half; j++) {                         \
      T_MATH a = LOAD(xr[j]), b = LOAD(xr[j + half]), c = cr[j], s = sign * sr[j];                    \
      o[j] = STORE(a * c - b * s); o[j + half] = STORE(b * c + a * s);                                \
    }                                                                                                 \
  } else {                                                                                            \
    for (int64_t j = VINTER(TAG, xr, o, cr, sr, half, sign); j < half; j++) {                        \
      T_MATH a = LOAD(xr[2 * j]), b = LOAD(xr[2 * j + 1]), c = cr[j], s = sign * sr[j];               \
      o[2 * j] = STORE(a * c - b * s); o[2 * j + 1] = STORE(b * c + a * s);                           \
    }                                                                                                 \
  }                                                                                                   \
}

/* x, y: (B, H, T, D) with strides xs[4], ys[4] (elements); c, s: (T, R/2) with row stride ct.
   Pair j reads and writes only its own two elements, so in place (y == x) is safe.
   out_of_place: y != x, so the pass-through tail D - R is copied and rows may be streamed.
   Non-temporal stores: a plain store first reads the output line (write-allocate), 1.5x the traffic of
   copy_, whose memcpy streams; rows are built in an L1 buffer and streamed out when aligned. */
#define KERNEL(TAG, T_IO, T_MATH, LOAD, STORE)                                                          \
ROW(TAG, T_IO, T_MATH, LOAD, STORE)                                                                   \
void FN(CAT(rope, TAG))(const T_IO *x, T_IO *y, const T_MATH *c, const T_MATH *s, int64_t B, int64_t H,  \
                      int64_t T, int64_t D, int64_t R, const int64_t *xs, const int64_t *ys, int64_t ct, \
                      int interleaved, T_MATH sign, int out_of_place, int nthreads) {                  \
  const int64_t rows = B * H * T, half = R / 2, bytes = D * (int64_t)sizeof(T_IO);                     \
  const int64_t p1 = interleaved ? 2 : 1, p2 = interleaved ? 1 : half; /* pair j: (p1*j, p1*j+p2) */   \
  if (rows == 0) return;                                                                              \
  const int64_t ahead = bytes >= 8192 ? 1 : 8192 / bytes;  /* prefetch ~8 KB ahead: 1.6x measured */ \
  const int big = LINE && out_of_place && ys[3] == 1 && bytes % (LINE ? LINE : 1) == 0 && rows * bytes > STREAM_MIN; \
  _Pragma("omp parallel num_threads(rows * D > 16384 ? nthreads : 1)")                                 \
  {                                                                                                   \
  T_IO buf[D] __attribute__((aligned(64)));                                                           \
  int nt = omp_get_num_threads(), id = omp_get_thread_num();                                          \
  int64_t lo = rows * id / nt, hi = rows * (id + 1) / nt;  /* contiguous rows; no division per row */ \
  int64_t b = lo / (H * T), h = (lo / T) % H, t = lo % T;                                             \
  for (int64_t i = lo; i < hi; i++) {                                                                 \
    const T_IO *xr = x + b * xs[0] + h * xs[1] + t * xs[2];                                          \
    T_IO *yr = y + b * ys[0] + h * ys[1] + t * ys[2];                                                \
    for (int64_t pf = 0; pf < bytes; pf += 64) __builtin_prefetch((const char *)(xr + ahead * xs[2]) + pf); \
    const int stream = big && LINE && ((uintptr_t)yr % (LINE ? LINE : 1) == 0);                       \
    T_IO *o = stream ? buf : yr;                                                                      \
    const int64_t os = stream ? 1 : ys[3];                                                            \
    const T_MATH *cr = c + t * ct, *sr = s + t * ct;                                                 \
    if (xs[3] == 1 && os == 1) {                                                                      \
      FN(CAT(row, TAG))(xr, o, cr, sr, half, sign, interleaved);                                        \
    } else {                                            /* any stride along D */                     \
      for (int64_t j = 0; j < half; j++) {                                                            \
        const int64_t d1 = p1 * j, d2 = p1 * j + p2;                                                  \
        T_MATH a = LOAD(xr[d1 * xs[3]]), bb = LOAD(xr[d2 * xs[3]]), cj = cr[j], sj = sign * sr[j];   \
        o[d1 * os] = STORE(a * cj - bb * sj); o[d2 * os] = STORE(bb * cj + a * sj);                  \
      }                                                                                               \
    }                                                                                                 \
    if (out_of_place) for (int64_t d = R; d < D; d++) o[d * os] = xr[d * xs[3]];  /* partial rotary */ \
    if (stream) FN(stream_row)(yr, buf, bytes);                                                       \
    if (++t == T) { t = 0; if (++h == H) { h = 0; b++; } }                                            \
  }                                                                                                   \
  if (LINE) _mm_sfence();                                                                             \
  }                                                                                                   \
}

KERNEL(f32, float, float, ID, ID)
KERNEL(f16, f16, float, (float), (f16))
KERNEL(bf16, uint16_t, float, bf16_load, bf16_store)
#if !LINE
KERNEL(f64, double, double, ID, ID)  /* gradcheck's dtype: the generic level only */
#endif

#undef ROW
#undef KERNEL
