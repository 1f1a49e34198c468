/* One dispatch level of the kernel; included by rope_cpu.c with ISA (the names' suffix), LINE (bytes a
   streaming store writes, 0: none), the level's scalar pairs (SCALARS) and VHALF/VINTER (its vector steps of a
   contiguous row, each returning where it stopped; generic: 0).

   The lean loop: rows of one (b, h) are T consecutive rows, so a thread walks them by adding the row strides to
   its pointers (no index multiply, division or buffer per row; hardware prefetch follows the stream). */

/* n consecutive rows of one (b, h), D stride 1 in and out: the vector steps of each row. One function per
   layout x streaming x direction (INTER, STREAM, NEG: constants), with no call in it, so that its loops keep
   their pointers in registers. A row the vector steps leave unfinished (a scalar rest, or a step they refused: a NaN, or for
   vcvtne2ps2bf16 a denormal) ends the loop: the rows left, that row first, are returned and *stop is where
   its vector steps stopped, for the caller to finish the row with the scalar pairs. Every line of a row is
   prefetched as many rows ahead as PF_BYTES of rows make (by the row stride: a strided view prefetches its own
   rows). Hardware prefetch alone left the 16-bit kernels about 3% slower (R 0.82 against 0.85, Intel Xeon,
   avx512bf16, 1 thread); on an AMD EPYC (avx512bf16, 1 thread, 6 alternating rounds each) 8 rows ahead (1 KiB of
   16-bit rows) read R 0.63-0.75 (16-bit keys) and 0.86-0.94 (fp32), 4 KiB 0.64-0.82 and 0.94-1.05, 2 KiB between. */
#define PF_BYTES 4096
#define ROWS1(TAG, T_IO, T_MATH, NAME, INTER, STREAM, NEG)                                                \
static __attribute__((noinline)) int64_t FN(CAT(NAME, TAG))(                                            \
    const T_IO *xr, T_IO *yr, const T_MATH *cr, const T_MATH *sr, int64_t n, int64_t xt, int64_t yt,       \
    int64_t ct, int64_t half, int64_t *stop) {                                                             \
  const int64_t bytes = 2 * half * (int64_t)sizeof(T_IO);             /* a row's rotated part */           \
  const int64_t ahead = (PF_BYTES / (bytes > 0 ? bytes : 1)) * xt * (int64_t)sizeof(T_IO);  /* by rows */  \
  for (; n > 0; n--, xr += xt, yr += yt, cr += ct, sr += ct) {                                            \
    for (int64_t pb = 0; pb < bytes; pb += 64)                             /* each of its lines */         \
      __builtin_prefetch((const void *)((uintptr_t)xr + ahead + pb));                                     \
    const int64_t j = INTER ? VINTER(TAG, xr, yr, cr, sr, half, NEG, STREAM)                              \
                            : VHALF(TAG, xr, yr, cr, sr, half, NEG, STREAM);                              \
    if (__builtin_expect(j < half, 0)) { *stop = j; return n; }                                           \
  }                                                                                                       \
  return 0;                                                                                               \
}
/* [inter][stream][backward] */
#define ROWS(TAG, T_IO, T_MATH)                                                                           \
ROWS1(TAG, T_IO, T_MATH, rows_h, 0, 0, 0) ROWS1(TAG, T_IO, T_MATH, rows_hb, 0, 0, 1)                      \
ROWS1(TAG, T_IO, T_MATH, rows_hs, 0, 1, 0) ROWS1(TAG, T_IO, T_MATH, rows_hsb, 0, 1, 1)                    \
ROWS1(TAG, T_IO, T_MATH, rows_i, 1, 0, 0) ROWS1(TAG, T_IO, T_MATH, rows_ib, 1, 0, 1)                      \
ROWS1(TAG, T_IO, T_MATH, rows_is, 1, 1, 0) ROWS1(TAG, T_IO, T_MATH, rows_isb, 1, 1, 1)                    \
static int64_t (*const FN(CAT(rows, TAG))[2][2][2])(const T_IO *, T_IO *, const T_MATH *, const T_MATH *,  \
                                                    int64_t, int64_t, int64_t, int64_t, int64_t, int64_t *) = \
  {{{FN(CAT(rows_h, TAG)), FN(CAT(rows_hb, TAG))}, {FN(CAT(rows_hs, TAG)), FN(CAT(rows_hsb, TAG))}},       \
   {{FN(CAT(rows_i, TAG)), FN(CAT(rows_ib, TAG))}, {FN(CAT(rows_is, TAG)), FN(CAT(rows_isb, TAG))}}};

/* rows [lo, hi) of the B*H*T rows, in (b, h) blocks */
#define RANGE(TAG, T_IO, T_MATH)                                                                          \
static void FN(CAT(range, TAG))(const T_IO *x, T_IO *y, const T_MATH *c, const T_MATH *s, int64_t H,        \
                                int64_t T, int64_t D, int64_t R, const int64_t *xs, const int64_t *ys,    \
                                int64_t ct, int inter, T_MATH sign, int out_of_place, int stream,         \
                                int64_t lo, int64_t hi) {                                                 \
  const int64_t half = R / 2, p1 = inter ? 2 : 1, p2 = inter ? 1 : half;                                  \
  const int contig = xs[3] == 1 && ys[3] == 1, tail = out_of_place && R < D;                              \
  int64_t (*const rows)(const T_IO *, T_IO *, const T_MATH *, const T_MATH *, int64_t, int64_t, int64_t,   \
                        int64_t, int64_t, int64_t *) = FN(CAT(rows, TAG))[!!inter][!!stream][sign < 0];     \
  int64_t b = lo / (H * T), h = (lo / T) % H, t = lo % T;                                                 \
  for (int64_t i = lo; i < hi; t = 0, h = h + 1 == H ? 0 : h + 1, b += h == 0) {                         \
    const int64_t n = T - t < hi - i ? T - t : hi - i;                                                    \
    const T_IO *const x0 = x + b * xs[0] + h * xs[1] + t * xs[2], *xr = x0;                               \
    T_IO *const y0 = y + b * ys[0] + h * ys[1] + t * ys[2], *yr = y0;                                     \
    const T_MATH *cr = c + t * ct, *sr = s + t * ct;                                                      \
    i += n;                                                                                               \
    if (!contig) {                                        /* any stride along D: scalar */               \
      for (int64_t r = 0; r < n; r++, xr += xs[2], yr += ys[2], cr += ct, sr += ct)                      \
        FN(CAT(pairs, TAG))(xr, yr, cr, sr, 0, half, sign, p1, p2, xs[3], ys[3]);                         \
    } else {                                                                                              \
      for (int64_t left = n, stop = 0, rest; left > 0; left = rest - 1) {                                 \
        rest = rows(xr, yr, cr, sr, left, xs[2], ys[2], ct, half, &stop);                                 \
        if (rest == 0) break;                                                                             \
        const int64_t done = left - rest;                 /* then the row it stopped in: scalar */       \
        xr += done * xs[2]; yr += done * ys[2]; cr += done * ct; sr += done * ct;                         \
        FN(CAT(pairs, TAG))(xr, yr, cr, sr, stop, half, sign, p1, p2, 1, 1);                              \
        xr += xs[2]; yr += ys[2]; cr += ct; sr += ct;                                                     \
      }                                                                                                   \
    }                                                                                                     \
    if (tail)                                             /* partial rotary: the rest passes through */  \
      for (int64_t r = 0; r < n; r++)                                                                     \
        for (int64_t d = R; d < D; d++) y0[r * ys[2] + d * ys[3]] = x0[r * xs[2] + d * xs[3]];           \
  }                                                                                                       \
  if (LINE && stream) _mm_sfence();                                                                       \
}

/* x, y: (B, H, T, D) with strides xs[4], ys[4] (elements); c, s: (T, R/2) with row stride ct; sign: 1 (forward)
   or -1 (backward, the rotation by -phase). A step reads all its pairs before it writes them, and a pair is
   read and written only by its own step, so in place (y == x) is safe.
   out_of_place: y != x, so the pass-through tail D - R is copied and stores may stream: a plain store first
   reads the output line (write-allocate), 1.5x the traffic of copy_, whose memcpy streams. Streaming needs
   every vector store aligned: y, its row strides and the half row (interleaved: the row) in whole lines. */
#define KERNEL(TAG, T_IO, T_MATH)                                                                         \
ROWS(TAG, T_IO, T_MATH)                                                                                   \
RANGE(TAG, T_IO, T_MATH)                                                                                  \
void FN(CAT(rope, TAG))(const T_IO *x, T_IO *y, const T_MATH *c, const T_MATH *s, int64_t B, int64_t H,    \
                        int64_t T, int64_t D, int64_t R, const int64_t *xs, const int64_t *ys, int64_t ct, \
                        int interleaved, T_MATH sign, int out_of_place, int nthreads) {                  \
  const int64_t rows = B * H * T, w = (int64_t)sizeof(T_IO);                                              \
  if (rows == 0) return;                                                                                  \
  const int64_t line = LINE ? LINE : 1, unit = (interleaved ? D : R / 2) * w;                             \
  const int stream = LINE && out_of_place && xs[3] == 1 && ys[3] == 1 && (uintptr_t)y % line == 0 &&     \
                     (ys[0] * w) % line == 0 && (ys[1] * w) % line == 0 && (ys[2] * w) % line == 0 &&     \
                     unit % line == 0 && rows * D * w > STREAM_MIN;                                       \
  const int nt = rows * D > 16384 && nthreads > 1 ? nthreads : 1;                                         \
  if (nt == 1) {                                                                                          \
    FN(CAT(range, TAG))(x, y, c, s, H, T, D, R, xs, ys, ct, interleaved, sign, out_of_place, stream, 0, rows); \
    return;                                                                                               \
  }                                                                                                       \
  _Pragma("omp parallel num_threads(nt)")                                                                 \
  {                                                                                                       \
    const int64_t k = omp_get_num_threads(), id = omp_get_thread_num();                                   \
    FN(CAT(range, TAG))(x, y, c, s, H, T, D, R, xs, ys, ct, interleaved, sign, out_of_place, stream,      \
                        rows * id / k, rows * (id + 1) / k);                                              \
  }                                                                                                       \
}

KERNEL(f32, float, float)
KERNEL(f16, f16, float)
KERNEL(bf16, uint16_t, float)
#if !LINE
KERNEL(f64, double, double)  /* gradcheck's dtype: the generic level only */
#endif

#undef PF_BYTES
#undef ROWS1
#undef ROWS
#undef RANGE
#undef KERNEL
