/* cpu_attn_kern.h -- the C kernels of fused attention (cpu_attn.c): the online softmax of a
 * block of scores, and the row path's scores, P . V and its check of V, in GCC's vector
 * extension, 16 lanes at a time.  cpu_attn.c includes this file once for each instruction
 * set it may run on, KERN(f) naming each copy's functions, under a `#pragma GCC target` for
 * that set, so that every function here, the inlined helpers included, is compiled for it:
 * under target_clones the helpers were compiled for the baseline and their 16-lane vectors
 * split into SSE registers before they were inlined into the AVX-512 clone (the online
 * softmax of four rows of 61 keys: 718 cycles where the same code compiled for AVX-512
 * throughout takes 288). */

#define vsel KERN(vsel)
#define vmax2 KERN(vmax2)
#define vfold4 KERN(vfold4)
#define fold_lane KERN(fold_lane)
#define vhsum KERN(vhsum)
#define exp2_poly KERN(exp2_poly)
#define vexp2_neg KERN(vexp2_neg)
#define keep_lanes KERN(keep_lanes)
#define update_rows KERN(update_rows)
#define block_update KERN(block_update)
#define vload_part KERN(vload_part)
#define kload KERN(kload)
#define scores_rows KERN(scores_rows)
#define rows_scores KERN(rows_scores)
#define pv_strip KERN(pv_strip)
#define pv_strips KERN(pv_strips)
#define rows_pv KERN(rows_pv)
#define rows_finite KERN(rows_finite)

static inline __attribute__((always_inline)) vf16 vsel(vi16 m, vf16 a, vf16 b) {
  return (vf16)(((vi16)a & m) | ((vi16)b & ~m));
}

/* The folds of four vectors at once, each vector's lanes combined by max (no lane is NaN) or
 * by +: lanes 0-3, 8-11, 4-7 and 12-15 hold those of a, b, c and d (13 operations where four
 * horizontal folds take 32, and one chain of latencies where they made four). */
static inline __attribute__((always_inline)) vf16 vmax2(vf16 a, vf16 b) {
#ifdef __AVX512F__
  return (vf16)_mm512_max_ps((__m512)b, (__m512)a);   /* b > a ? b : a, one instruction */
#else
  return vsel(b > a, b, a);
#endif
}
static inline __attribute__((always_inline)) vf16 vfold4(vf16 a, vf16 b, vf16 c, vf16 d, const bool max) {
#define FOLD(x, y) (max ? vmax2((x), (y)) : (x) + (y))
  vf16 ab = FOLD(__builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                 __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
  vf16 cd = FOLD(__builtin_shufflevector(c, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                 __builtin_shufflevector(c, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
  vf16 y = FOLD(__builtin_shufflevector(ab, cd, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                __builtin_shufflevector(ab, cd, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
  y = FOLD(y, __builtin_shufflevector(y, y, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  return FOLD(y, __builtin_shufflevector(y, y, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
#undef FOLD
}
/* where vfold4 leaves its u-th vector's fold */
static const int fold_lane[4] = {0, 8, 4, 12};

static inline __attribute__((always_inline)) float vhsum(vf16 v) {
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
  v += __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
  return v[0];
}

/* 2^x, x <= 0 up to a rounding: x = n + r, r in [-1/2, 1/2], 2^r by Cephes exp2f's
 * polynomial (relative error 2e-7, exp2_poly), 2^n in the exponent's bits.  n is x rounded
 * to the nearest integer by adding 1.5 * 2^23, which leaves it in the sum's low mantissa
 * bits: two additions where two conversions, a compare and a correction of truncation's
 * rounding took seven operations (the online softmax of four rows of 61 keys: 333 -> 258
 * cycles). */
static inline __attribute__((always_inline)) vf16 exp2_poly(vf16 r) {
  vf16 y = r * 1.535336188319500e-4f + 1.339887440266574e-3f;
  y = y * r + 9.618437357674640e-3f;
  y = y * r + 5.550332471162809e-2f;
  y = y * r + 2.402264791363012e-1f;
  y = y * r + 6.931472028550421e-1f;
  return y * r + 1.0f;
}
static inline __attribute__((always_inline)) vf16 vexp2_neg(vf16 x) {
  const vf16 lim = (vf16){0} - 126.0f, magic = (vf16){0} + 12582912.0f;
#ifdef __AVX512F__
  /* 2^n by vscalef, and the lanes below -126 (-inf among them) zeroed by the compare's mask
   * in the same instruction: 11 operations where the selects took 20.  With vmax2's one
   * instruction and update_rows' loop for whole rows, the online softmax of a block of 320
   * x 320 scores (in L2, one thread of a Zen 5) went from 15.4 to 7.9 cycles a vector of
   * scores.  A NaN is unordered, kept, and stays NaN. */
  __mmask16 keep = _mm512_cmp_ps_mask((__m512)x, (__m512)lim, _CMP_NLT_UQ);
  vf16 n = (x + magic) - magic;
  return (vf16)_mm512_maskz_scalef_ps(keep, (__m512)exp2_poly(x - n), (__m512)n);
#else
  vi16 low = x < lim;
  vf16 xc = vsel(low, lim, x);
  vf16 t = xc + magic;                  /* its bits: those of 1.5 * 2^23, plus n */
  vf16 p2 = (vf16)(((vi16)t + (127 - 0x4B400000)) << 23);
  vf16 y = exp2_poly(xc - (t - magic)) * p2;
  y = vsel(low, (vf16){0}, y);          /* -inf and below -126: 0 */
  vi16 nan = x != x;
  return vsel(nan, x, y);
#endif
}

/* v with its lanes j + i outside [a, b) set to fill, where the vector at j straddles an end */
static inline __attribute__((always_inline)) vf16 keep_lanes(vf16 v, int64_t j, int64_t a, int64_t b, vf16 fill) {
  if (j >= a && j + LANES <= b) return v;
  const vi16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  vi16 at = iota + (int32_t)j;
  return vsel((at >= (int32_t)a) & (at < (int32_t)b), v, fill);
}

/* One block of scores P (rows of ld floats, ld a multiple of LANES, n valid columns): the
 * mask (columns outside [lo[i], hi[i]) weigh 0), then the online update of m, l and the
 * accumulator rows acc (d floats each, d a multiple of LANES); P becomes the weights
 * 2^(x k - m_new), k the scale times log2(e) and m in its units.  The first pass only reads
 * the row: the largest x k is k times the largest x (the smallest where k < 0), so no scaled
 * score is stored; the second makes each weight with one FMA and exp2.  Rows whose max is
 * still -inf add 0 (or the NaN of a NaN score).  R rows (at most 4) go together: their
 * maxima, sums and rescaling factors are each one fold or one exp2 of four lanes, where a
 * row at a time made a chain of latencies each (a row of 61 keys: about 300 cycles a row). */
static inline __attribute__((always_inline)) void update_rows(float *P, int64_t ld, const int R, int64_t n, float k,
                                                              const int64_t *lo, const int64_t *hi, float *m,
                                                              float *l, float *acc, int64_t d) {
  int64_t wd = (n + LANES - 1) / LANES * LANES;   /* the vectors that hold the n scores */
  const vf16 ninf = (vf16){0} - INFINITY, zero = (vf16){0};
  float ka = k < 0 ? -k : k;
  /* each row's keys [a, b), and the vectors [ja, jb) that hold any row's, the lanes outside
   * a row's masked */
  int64_t a[4], b[4], ja = wd, jb = 0;
#pragma GCC unroll 4
  for (int u = 0; u < R; u++) {
    a[u] = lo ? lo[u] : 0, b[u] = hi ? hi[u] : n;
    if (a[u] < 0) a[u] = 0;
    if (b[u] > n) b[u] = n;
    if (b[u] < a[u]) b[u] = a[u];
    if (a[u] < b[u]) {
      int64_t s = a[u] / LANES * LANES, e = (b[u] + LANES - 1) / LANES * LANES;
      ja = s < ja ? s : ja, jb = e > jb ? e : jb;
    }
  }
  vf16 vmax[4] = {ninf, ninf, ninf, ninf};
  if (k < 0)
    for (int64_t j = ja; j < jb; j += LANES)
#pragma GCC unroll 4
      for (int u = 0; u < R; u++) vmax[u] = vmax2(vmax[u], keep_lanes(-*(vf16 *)(P + u * ld + j), j, a[u], b[u], ninf));
  else   /* the scale's usual sign: no operation but the max */
    for (int64_t j = ja; j < jb; j += LANES)
#pragma GCC unroll 4
      for (int u = 0; u < R; u++) vmax[u] = vmax2(vmax[u], keep_lanes(*(vf16 *)(P + u * ld + j), j, a[u], b[u], ninf));
  vf16 top = vfold4(vmax[0], vmax[1], vmax[2], vmax[3], true);
  float mnew[4];
  vf16 nm[4], vsum[4] = {zero, zero, zero, zero}, kv = zero + k;
#pragma GCC unroll 4
  for (int u = 0; u < R; u++) {
    float t = top[fold_lane[u]], mx = t == -INFINITY ? -INFINITY : ka * t;
    mnew[u] = m[u] > mx ? m[u] : mx;
    nm[u] = zero - mnew[u];
  }
  bool plain = true;   /* every row whole and with a finite max: the loop without a branch */
#pragma GCC unroll 4
  for (int u = 0; u < R; u++) plain = plain && a[u] == 0 && b[u] == n && mnew[u] > -INFINITY;
  int64_t j0 = 0;
  if (plain) {
    for (; j0 + LANES <= n; j0 += LANES)
#pragma GCC unroll 4
      for (int u = 0; u < R; u++) {
        float *x = P + u * ld + j0;
        vf16 v = vexp2_neg(*(vf16 *)x * kv + nm[u]);
        *(vf16 *)x = v;
        vsum[u] += v;
      }
  }
  for (int64_t j = j0; j < wd; j += LANES)
#pragma GCC unroll 4
    for (int u = 0; u < R; u++) {
      float *x = P + u * ld + j;
      if (j + LANES <= a[u] || j >= b[u]) {
        *(vf16 *)x = zero;
        continue;
      }
      vf16 v = *(vf16 *)x;
      /* no key seen yet (every score -inf): 0, NaN stays */
      v = mnew[u] == -INFINITY ? vsel(v != v, v, zero) : vexp2_neg(v * kv + nm[u]);
      v = keep_lanes(v, j, a[u], b[u], zero);
      *(vf16 *)x = v;
      vsum[u] += v;
    }
  vf16 s = vfold4(vsum[0], vsum[1], vsum[2], vsum[3], false), dm = zero;
#pragma GCC unroll 4
  for (int u = 0; u < R; u++)
    if (m[u] != mnew[u]) dm[fold_lane[u]] = m[u] - mnew[u];
  vf16 al = vexp2_neg(dm);
#pragma GCC unroll 4
  for (int u = 0; u < R; u++) {
    if (m[u] != mnew[u]) {
      vf16 f = zero + al[fold_lane[u]];
      l[u] *= f[0];
      float *o = acc + u * d;
      for (int64_t c = 0; c < d; c += LANES) *(vf16 *)(o + c) *= f;
      m[u] = mnew[u];
    }
    l[u] += s[fold_lane[u]];
  }
}

static void block_update(float *P, int64_t ld, int64_t rows, int64_t n, float k, const int64_t *lo,
                                     const int64_t *hi, float *m, float *l, float *acc, int64_t d) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4)
    update_rows(P + i * ld, ld, 4, n, k, lo ? lo + i : NULL, hi ? hi + i : NULL, m + i, l + i, acc + i * d, d);
  switch (rows - i) {
  case 1: update_rows(P + i * ld, ld, 1, n, k, lo ? lo + i : NULL, hi ? hi + i : NULL, m + i, l + i, acc + i * d, d); break;
  case 2: update_rows(P + i * ld, ld, 2, n, k, lo ? lo + i : NULL, hi ? hi + i : NULL, m + i, l + i, acc + i * d, d); break;
  case 3: update_rows(P + i * ld, ld, 3, n, k, lo ? lo + i : NULL, hi ? hi + i : NULL, m + i, l + i, acc + i * d, d); break;
  }
}

/* The n floats at p (0 < n <= LANES) in a vector whose other lanes are 0. */
static inline __attribute__((always_inline)) vf16 vload_part(const float *p, int64_t n) {
  vf16 v = (vf16){0};
  memcpy(&v, p, (size_t)n * sizeof(float));
  return v;
}

/* The LANES floats of a row of K at x: a whole vector before dw, the d - x left after it. */
static inline __attribute__((always_inline)) vf16 kload(const float *kr, int64_t x, int64_t dw, int64_t d) {
  typedef float uf16 __attribute__((vector_size(64), aligned(4)));
  return x < dw ? (vf16)*(const uf16 *)(kr + x) : vload_part(kr + x, d - x);
}

/* P[i][j] = q_i . k_j for R rows (q: rows of dp floats, zero past d) and the n keys at k (rows
 * ks floats apart, d floats each): four keys at a time, R x 4 accumulators in registers and
 * their sums four at once, then the keys left one by one. */
static inline __attribute__((always_inline)) void scores_rows(const float *q, int64_t dp, const int R, const float *k,
                                                              int64_t ks, int64_t n, int64_t d, float *P, int64_t ld) {
  int64_t dw = d / LANES * LANES, j = 0;
  for (; j + 4 <= n; j += 4) {
    vf16 a[ROWS_MAX][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) a[i][u] = (vf16){0};
    for (int64_t x = 0; x < dp; x += LANES) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) {
        vf16 kv = kload(k + (j + u) * ks, x, dw, d);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) a[i][u] += *(const vf16 *)(q + i * dp + x) * kv;
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      vf16 z = vfold4(a[i][0], a[i][1], a[i][2], a[i][3], false);
      /* the four sums in the low lanes, one store (four extractions and stores a row were
       * a third of a decoder step's scores) */
      z = __builtin_shufflevector(z, z, 0, 8, 4, 12, 0, 8, 4, 12, 0, 8, 4, 12, 0, 8, 4, 12);
      memcpy(P + i * ld + j, &z, 4 * sizeof(float));
    }
  }
  for (; j < n; j++) {
    vf16 a[ROWS_MAX];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) a[i] = (vf16){0};
    for (int64_t x = 0; x < dp; x += LANES) {
      vf16 kv = kload(k + j * ks, x, dw, d);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) a[i] += *(const vf16 *)(q + i * dp + x) * kv;
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) P[i * ld + j] = vhsum(a[i]);
  }
}

static void rows_scores(const float *q, int64_t dp, int r, const float *k, int64_t ks, int64_t n,
                                    int64_t d, float *P, int64_t ld) {
  switch (r) {
  case 1: scores_rows(q, dp, 1, k, ks, n, d, P, ld); break;
  case 2: scores_rows(q, dp, 2, k, ks, n, d, P, ld); break;
  case 3: scores_rows(q, dp, 3, k, ks, n, d, P, ld); break;
  default: scores_rows(q, dp, 4, k, ks, n, d, P, ld); break;
  }
}

/* acc_i += sum_j P[i][j] v_j for R rows (acc: rows of ep floats) over the n rows of V at v (vs
 * floats apart, e floats each), NS vectors of columns from x at a time: R x NS accumulators in
 * registers, so that the additions of one key do not wait on the previous key's (an FMA's
 * latency is several cycles; one chain a row left the pipes idle). */
static inline __attribute__((always_inline)) void pv_strip(const float *P, int64_t ld, const int R, const int NS,
                                                           const float *v, int64_t vs, int64_t n, int64_t x,
                                                           int64_t e, float *acc, int64_t ep) {
  typedef float uf16 __attribute__((vector_size(64), aligned(4)));
  vf16 a[ROWS_MAX][4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int u = 0; u < NS; u++) a[i][u] = *(vf16 *)(acc + i * ep + x + u * LANES);
  bool whole = x + NS * LANES <= e;   /* else NS is 1 and the vector passes e */
  for (int64_t j = 0; j < n; j++) {
    const float *vr = v + j * vs + x;
#pragma GCC unroll 4
    for (int u = 0; u < NS; u++) {
      vf16 vv = whole ? (vf16)*(const uf16 *)(vr + u * LANES) : vload_part(vr, e - x);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) a[i][u] += P[i * ld + j] * vv;
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int u = 0; u < NS; u++) *(vf16 *)(acc + i * ep + x + u * LANES) = a[i][u];
}

static inline __attribute__((always_inline)) void pv_strips(const float *P, int64_t ld, const int R, const int NS,
                                                            const float *v, int64_t vs, int64_t n, int64_t e,
                                                            float *acc, int64_t ep) {
  int64_t x = 0;
  for (; x + NS * LANES <= e; x += NS * LANES) pv_strip(P, ld, R, NS, v, vs, n, x, e, acc, ep);
  for (; x < ep; x += LANES) pv_strip(P, ld, R, 1, v, vs, n, x, e, acc, ep);
}

static void rows_pv(const float *P, int64_t ld, int r, const float *v, int64_t vs, int64_t n, int64_t e,
                                float *acc, int64_t ep) {
  switch (r) {
  case 1: pv_strips(P, ld, 1, 4, v, vs, n, e, acc, ep); break;
  case 2: pv_strips(P, ld, 2, 4, v, vs, n, e, acc, ep); break;
  case 3: pv_strips(P, ld, 3, 2, v, vs, n, e, acc, ep); break;
  default: pv_strips(P, ld, 4, 2, v, vs, n, e, acc, ep); break;
  }
}

/* Whether the n rows at v (rs floats apart, e floats each, contiguous) are all finite: an inf
 * or a NaN has every exponent bit set, tested a vector at a time (a scalar isfinite an
 * element was most of a masked decoder step's time). */
static bool rows_finite(const float *v, int64_t n, int64_t rs, int64_t e) {
  typedef int32_t ui16 __attribute__((vector_size(64), aligned(4)));
  vi16 bad = (vi16){0}, ex = (vi16){0} + 0x7f800000;
  int64_t ew = e / LANES * LANES;
  for (int64_t j = 0; j < n; j++) {
    const float *r = v + j * rs;
    for (int64_t x = 0; x < ew; x += LANES) bad |= (*(const ui16 *)(r + x) & ex) == ex;
    if (ew < e) bad |= ((vi16)vload_part(r + ew, e - ew) & ex) == ex;
  }
  for (int k = 0; k < LANES; k++)
    if (bad[k]) return false;
  return true;
}

static const AttnKern KERN(kern) = {block_update, rows_scores, rows_pv, rows_finite};

#undef vsel
#undef vmax2
#undef vfold4
#undef fold_lane
#undef vhsum
#undef exp2_poly
#undef vexp2_neg
#undef keep_lanes
#undef update_rows
#undef block_update
#undef vload_part
#undef kload
#undef scores_rows
#undef rows_scores
#undef pv_strip
#undef pv_strips
#undef rows_pv
#undef rows_finite
