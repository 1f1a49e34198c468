/* One dispatch level of the kernel; included by rope_cpu.c with ISA (the names' suffix), LINE (bytes a
   streaming store writes, 0: none), the level's scalar pairs (SCALARS) and VHALF/VINTER (its vector steps of a
   contiguous row, each returning where it stopped; generic: 0).

   The lean loop: rows of one (b, h) are T consecutive rows, so a thread walks them by adding the row strides to
   its pointers (no index multiply, division or buffer per row; hardware prefetch follows the stream). */

/* n consecutive rows of G (b, h) blocks in lockstep (block k at xr + k xg, yr + k yg), D stride 1 in and out:
   row t of every block, then row t + 1. The blocks share the table, so its row comes from L2 (or further) once
   and G - 1 times from L1. One function per layout x streaming x direction x G (INTER, STREAM, NEG, G: constants;
   G is 1 or LOCK), with no call in it, so that its loops keep their pointers in registers. A row the vector
   steps leave unfinished (a scalar rest, or a step they refused: a NaN, or for vcvtne2ps2bf16 a denormal) ends
   the loop: the rows left, that row first, are returned, stop[1] is the block it stopped in and stop[0] where
   its vector steps stopped, for the caller to finish that row (and the row of the blocks after it) with the
   scalar pairs. Every line of a row is prefetched as many of its rows ahead as PF_BYTES / G of rows make
   (PF_BYTES ahead in the order rows are done), by the row stride: a strided view prefetches its own rows. */
#define ROWS1(TAG, T_IO, T_MATH, NAME, INTER, STREAM, NEG, G)                                             \
static __attribute__((noinline)) int64_t FN(CAT(NAME, TAG))(                                            \
    const T_IO *xr, T_IO *yr, const T_MATH *cr, const T_MATH *sr, int64_t n, int64_t xt, int64_t yt,       \
    int64_t ct, int64_t half, int64_t xg, int64_t yg, int64_t *stop) {                                     \
  const int64_t bytes = 2 * half * (int64_t)sizeof(T_IO);             /* a row's rotated part */           \
  const int64_t rows_ahead = PF_BYTES / G / (bytes > 0 ? bytes : 1);                                      \
  const int64_t ahead = (rows_ahead > 1 ? rows_ahead : 1) * xt * (int64_t)sizeof(T_IO);  /* bytes */     \
  for (; n > 0; n--, xr += xt, yr += yt, cr += ct, sr += ct)                                              \
    for (int64_t k = 0; k < G; k++) {                                                                     \
      const T_IO *const xk = xr + k * xg;                                                                 \
      T_IO *const yk = yr + k * yg;                                                                       \
      (void)yk;                                           /* generic: no vector steps use it */          \
      for (int64_t pb = 0; pb < bytes; pb += 64)                           /* each of its lines */         \
        __builtin_prefetch((const void *)((uintptr_t)xk + ahead + pb));                                   \
      const int64_t j = INTER ? VINTER(TAG, xk, yk, cr, sr, half, NEG, STREAM)                            \
                              : VHALF(TAG, xk, yk, cr, sr, half, NEG, STREAM);                            \
      if (__builtin_expect(j < half, 0)) { stop[0] = j; stop[1] = k; return n; }                          \
    }                                                                                                     \
  return 0;                                                                                               \
}
#define ROWS2(TAG, T_IO, T_MATH, NAME, INTER, STREAM, NEG)                                                \
  ROWS1(TAG, T_IO, T_MATH, NAME, INTER, STREAM, NEG, 1) ROWS1(TAG, T_IO, T_MATH, CAT(NAME, lock), INTER, STREAM, NEG, LOCK)
/* [lockstep][inter][stream][backward] */
#define ROWS(TAG, T_IO, T_MATH)                                                                           \
ROWS2(TAG, T_IO, T_MATH, rows_h, 0, 0, 0) ROWS2(TAG, T_IO, T_MATH, rows_hb, 0, 0, 1)                      \
ROWS2(TAG, T_IO, T_MATH, rows_hs, 0, 1, 0) ROWS2(TAG, T_IO, T_MATH, rows_hsb, 0, 1, 1)                    \
ROWS2(TAG, T_IO, T_MATH, rows_i, 1, 0, 0) ROWS2(TAG, T_IO, T_MATH, rows_ib, 1, 0, 1)                      \
ROWS2(TAG, T_IO, T_MATH, rows_is, 1, 1, 0) ROWS2(TAG, T_IO, T_MATH, rows_isb, 1, 1, 1)                    \
static int64_t (*const FN(CAT(rows, TAG))[2][2][2][2])(const T_IO *, T_IO *, const T_MATH *, const T_MATH *, \
                                                       int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t *) = \
  {{{{FN(CAT(rows_h, TAG)), FN(CAT(rows_hb, TAG))}, {FN(CAT(rows_hs, TAG)), FN(CAT(rows_hsb, TAG))}},      \
    {{FN(CAT(rows_i, TAG)), FN(CAT(rows_ib, TAG))}, {FN(CAT(rows_is, TAG)), FN(CAT(rows_isb, TAG))}}},     \
   {{{FN(CAT(CAT(rows_h, lock), TAG)), FN(CAT(CAT(rows_hb, lock), TAG))},                                  \
     {FN(CAT(CAT(rows_hs, lock), TAG)), FN(CAT(CAT(rows_hsb, lock), TAG))}},                               \
    {{FN(CAT(CAT(rows_i, lock), TAG)), FN(CAT(CAT(rows_ib, lock), TAG))},                                  \
     {FN(CAT(CAT(rows_is, lock), TAG)), FN(CAT(CAT(rows_isb, lock), TAG))}}}};

/* rows [lo, hi) of the B*H*T rows, in (b, h) blocks */
#define RANGE(TAG, T_IO, T_MATH)                                                                          \
static void FN(CAT(range, TAG))(const T_IO *x, T_IO *y, const T_MATH *c, const T_MATH *s, int64_t H,        \
                                int64_t T, int64_t D, int64_t R, const int64_t *xs, const int64_t *ys,    \
                                int64_t ct, int inter, T_MATH sign, int out_of_place, int stream,         \
                                int lock, int64_t lo, int64_t hi) {                                       \
  const int64_t half = R / 2, p1 = inter ? 2 : 1, p2 = inter ? 1 : half;                                  \
  const int contig = xs[3] == 1 && ys[3] == 1, tail = out_of_place && R < D;                              \
  int64_t b = lo / (H * T), h = (lo / T) % H, t = lo % T;                                                 \
  for (int64_t i = lo; i < hi; t = 0) {                                                                   \
    const int64_t n = T - t < hi - i ? T - t : hi - i, whole = (hi - i) / T;                              \
    const int64_t g = lock && t == 0 && whole >= LOCK && H - h >= LOCK ? LOCK : 1;  /* LOCK whole blocks of one b */ \
    int64_t (*const rows)(const T_IO *, T_IO *, const T_MATH *, const T_MATH *, int64_t, int64_t, int64_t, \
                          int64_t, int64_t, int64_t, int64_t, int64_t *) =                                \
        FN(CAT(rows, TAG))[g > 1][!!inter][!!stream][sign < 0];                                           \
    const T_IO *const x0 = x + b * xs[0] + h * xs[1] + t * xs[2], *xr = x0;                               \
    T_IO *const y0 = y + b * ys[0] + h * ys[1] + t * ys[2], *yr = y0;                                     \
    const T_MATH *cr = c + t * ct, *sr = s + t * ct;                                                      \
    i += n * g;                                                                                           \
    if (!contig) {                                        /* any stride along D: scalar */               \
      for (int64_t k = 0; k < g; k++)                                                                     \
        for (int64_t r = 0; r < n; r++)                                                                   \
          FN(CAT(pairs, TAG))(x0 + k * xs[1] + r * xs[2], y0 + k * ys[1] + r * ys[2], cr + r * ct, sr + r * ct, \
                              0, half, sign, p1, p2, xs[3], ys[3]);                                       \
    } else {                                                                                              \
      int64_t stop[2];                                                                                    \
      for (int64_t left = n, rest; left > 0; left = rest - 1) {                                           \
        rest = rows(xr, yr, cr, sr, left, xs[2], ys[2], ct, half, xs[1], ys[1], stop);                 \
        if (rest == 0) break;                                                                             \
        const int64_t done = left - rest;                 /* then the row it stopped in: scalar */       \
        xr += done * xs[2]; yr += done * ys[2]; cr += done * ct; sr += done * ct;                         \
        for (int64_t k = stop[1]; k < g; k++)             /* from where its block stopped, then the next */ \
          FN(CAT(pairs, TAG))(xr + k * xs[1], yr + k * ys[1], cr, sr, k == stop[1] ? stop[0] : 0, half, sign, \
                              p1, p2, 1, 1);                                                              \
        xr += xs[2]; yr += ys[2]; cr += ct; sr += ct;                                                     \
      }                                                                                                   \
    }                                                                                                     \
    if (tail)                                             /* partial rotary: the rest passes through */  \
      for (int64_t k = 0; k < g; k++)                                                                     \
        for (int64_t r = 0; r < n; r++)                                                                   \
          for (int64_t d = R; d < D; d++)                                                                 \
            y0[k * ys[1] + r * ys[2] + d * ys[3]] = x0[k * xs[1] + r * xs[2] + d * xs[3]];                \
    h += g;                                                                                               \
    if (h == H) h = 0, b++;                                                                               \
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
  /* lockstep out of place; past STREAM_MIN (many stores pending) only where no block's loads share their      \
     address mod 4 KiB with another's recent stores (rope_cpu.c, ALIAS_FAR). Every pair is tested, and smaller    \
     calls test none, so a shape's instructions do not depend on the addresses (the gate counts them). */     \
  int lock = out_of_place;                                                                                \
  for (int64_t k = 0; k < LOCK && rows * D * w > STREAM_MIN; k++)                                         \
    for (int64_t kk = 0; kk < LOCK; kk++) {                                                               \
      const uint64_t m = ((uintptr_t)(y + k * ys[1]) - (uintptr_t)(x + kk * xs[1])) % 4096;               \
      lock &= m >= ALIAS_FAR && m <= 4096 - ALIAS_FAR;                                                    \
    }                                                                                                     \
  if (nt == 1) {                                                                                          \
    FN(CAT(range, TAG))(x, y, c, s, H, T, D, R, xs, ys, ct, interleaved, sign, out_of_place, stream, lock, 0, rows); \
    return;                                                                                               \
  }                                                                                                       \
  _Pragma("omp parallel num_threads(nt)")                                                                 \
  {                                                                                                       \
    const int64_t k = omp_get_num_threads(), id = omp_get_thread_num();                                   \
    FN(CAT(range, TAG))(x, y, c, s, H, T, D, R, xs, ys, ct, interleaved, sign, out_of_place, stream, lock, \
                        rows * id / k, rows * (id + 1) / k);                                              \
  }                                                                                                       \
}

KERNEL(f32, float, float)
KERNEL(f16, f16, float)
KERNEL(bf16, uint16_t, float)
#if !LINE
KERNEL(f64, double, double)  /* gradcheck's dtype: the generic level only */
#endif

#undef ROWS1
#undef ROWS2
#undef ROWS
#undef RANGE
#undef KERNEL
