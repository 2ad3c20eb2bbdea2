/* cpu_attn.c -- fused attention on the CPU back end: the chains fuse_attn.c finds run as one
 * kernel that never stores the B x S x T scores (FlashAttention's online softmax).
 *
 * Each task takes one batch index and a block of br query rows; for each block of bc keys it
 * computes the scores with the GEMM engine (Q block . K block^T, on the calling thread),
 * applies the score function and the mask, keeps each row's running max m and sum l, rescales
 * the accumulator of O by exp(m_old - m_new) when the max grows, and adds P . V block with the
 * GEMM engine; the rows are divided by l at the end.  Memory: O(B x S x D) plus, per task,
 * br x bc scores and br x D accumulators sized from the model's L1 and L2.  Key blocks that a
 * mask hides from every row of the query block are skipped, unless V holds an inf or a NaN
 * (0 * inf must still make the NaN the unfused program makes).  Whether to fuse is the
 * model's choice per shape (the scores' traffic against more, smaller GEMM calls);
 * DYN_ATTENTION=fused or =unfused in the environment forces it (tests, measurements).  A few
 * query rows (a decoder's step) take the row path below instead, when the model says so
 * (=tiles or =rows forces the path).
 */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The exponentials and the row statistics of a block of scores, 16 lanes at a time in GCC's
 * vector extension.  The weights are 2^(x c log2(e) - m), m the running max of x c log2(e):
 * the score's scale c (1 / sqrt(D) as a product, never a division) and log2(e) are one
 * constant, so a score's exponent is one FMA and its power of two needs no range reduction
 * by ln 2.  The arguments of exp2 here are never above a rounding of 0 (x c log2(e) - m,
 * m_old - m_new), so one range suffices: below -126 it gives 0 (the unfused code's
 * denormals, at most 1e-38, are dropped), -inf gives 0, NaN stays NaN.  On x86-64 the
 * function is compiled for three instruction sets and the loader picks the host's (the
 * JIT'd kernels follow the model; this one cannot, being C). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTN_CLONES
#endif
/* the helpers are inlined into each clone: their vector arguments never cross a call */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float vf16 __attribute__((vector_size(64), aligned(64)));
typedef int32_t vi16 __attribute__((vector_size(64), aligned(64)));
#define LANES 16

static inline __attribute__((always_inline)) vf16 vsel(vi16 m, vf16 a, vf16 b) {
  return (vf16)(((vi16)a & m) | ((vi16)b & ~m));
}

/* The folds of four vectors at once, each vector's lanes combined by max (no lane is NaN) or
 * by +: lanes 0-3, 8-11, 4-7 and 12-15 hold those of a, b, c and d (13 operations where four
 * horizontal folds take 32, and one chain of latencies where they made four). */
static inline __attribute__((always_inline)) vf16 vmax2(vf16 a, vf16 b) { return vsel(b > a, b, a); }
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
 * polynomial (relative error 2e-7), 2^n in the exponent's bits. */
static inline __attribute__((always_inline)) vf16 vexp2_neg(vf16 x) {
  vi16 low = x < -126.0f;
  vf16 xc = vsel(low, (vf16){0} - 126.0f, x);
  vf16 fx = xc + 0.5f;
  vi16 ni = __builtin_convertvector(fx, vi16);
  vf16 nf = __builtin_convertvector(ni, vf16);
  vi16 over = nf > fx;                  /* truncation rounded a negative up: floor it */
  ni += over;                           /* -1 where over */
  nf = __builtin_convertvector(ni, vf16);
  vf16 r = xc - nf;
  vf16 y = r * 1.535336188319500e-4f + 1.339887440266574e-3f;
  y = y * r + 9.618437357674640e-3f;
  y = y * r + 5.550332471162809e-2f;
  y = y * r + 2.402264791363012e-1f;
  y = y * r + 6.931472028550421e-1f;
  y = y * r + 1.0f;
  vf16 p2 = (vf16)((ni + 127) << 23);
  y = y * p2;
  y = vsel(low, (vf16){0}, y);          /* -inf and below -126: 0 */
  vi16 nan = x != x;
  return vsel(nan, x, y);
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
  float ka = k < 0 ? -k : k, sg = k < 0 ? -1.0f : 1.0f;
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
  for (int64_t j = ja; j < jb; j += LANES)
#pragma GCC unroll 4
    for (int u = 0; u < R; u++) vmax[u] = vmax2(vmax[u], keep_lanes(*(vf16 *)(P + u * ld + j) * sg, j, a[u], b[u], ninf));
  vf16 top = vfold4(vmax[0], vmax[1], vmax[2], vmax[3], true);
  float mnew[4];
  vf16 nm[4], vsum[4] = {zero, zero, zero, zero}, kv = zero + k;
#pragma GCC unroll 4
  for (int u = 0; u < R; u++) {
    float t = top[fold_lane[u]], mx = t == -INFINITY ? -INFINITY : ka * t;
    mnew[u] = m[u] > mx ? m[u] : mx;
    nm[u] = zero - mnew[u];
  }
  for (int64_t j = 0; j < wd; j += LANES)
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

static ATTN_CLONES void block_update(float *P, int64_t ld, int64_t rows, int64_t n, float k, const int64_t *lo,
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

/* ---- the shape of one call ---- */

typedef struct Call {
  const AttnChain *c;
  GemmKernels *g;
  int64_t B, S, T, D, E, br, bc, ld, le;   /* D: Q's and K's rows; E: V's and O's (le: E padded) */
  const float *q, *k, *v;
  float *kt;                            /* K transposed, [B][D][T], so that Q . K^T reads rows */
  float *o;
  int64_t qs[3], ks[3], vs[3], os[3];   /* element strides of (batch, s|t, d|e) */
  float k2;                             /* the score's scale times log2(e) */
  bool div;                             /* the program divides by the scale (its own softmax) */
  bool mask;
  double c0, cs, ct;                    /* the mask: c0 + cs*s + ct*t  op  0 */
  unsigned char *vbad;                  /* per batch: V holds an inf or a NaN */
  volatile int *stop;
  int failed;
  bool on, rows, serial;                /* the model's choice: fused, on which path, one thread */
  double tiles_s, rows_s, unfused_s;    /* its predictions */
} Call;

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* The keys [lo, hi) that row s of the mask lets through, within [0, T). */
static void mask_row(const Call *w, int64_t s, int64_t *lo, int64_t *hi) {
  int64_t c0 = (int64_t)(w->c0 + w->cs * (double)s), ct = (int64_t)w->ct;
  OpKind op = w->c->mask_op;
  *lo = 0, *hi = w->T;
  if (ct == 0) {
    bool ok = op == OP_LT ? c0 < 0 : op == OP_LE ? c0 <= 0 : op == OP_GT ? c0 > 0 : op == OP_GE ? c0 >= 0 : c0 == 0;
    if (!ok) *hi = 0;
    return;
  }
  int64_t R = -c0;                      /* ct * t  op  R */
  if (ct < 0) {
    ct = -ct, R = -R;
    op = op == OP_LT ? OP_GT : op == OP_LE ? OP_GE : op == OP_GT ? OP_LT : op == OP_GE ? OP_LE : op;
  }
  int64_t a = 0, b = w->T;
  switch (op) {
  case OP_LT: b = ceil_div(R, ct); break;
  case OP_LE: b = floor_div(R, ct) + 1; break;
  case OP_GT: a = floor_div(R, ct) + 1; break;
  case OP_GE: a = ceil_div(R, ct); break;
  default: a = ceil_div(R, ct), b = floor_div(R, ct) + 1; break;   /* OP_EQ */
  }
  *lo = a > 0 ? a : 0;
  *hi = b < w->T ? b : w->T;
  if (*hi < *lo) *hi = *lo;
}

/* Rows s0 .. s0 + rows of batch index b of O: each accumulator row times 1 / l, one division
 * a row (E scalar divisions a row were a tenth of a small call's time on the row path), a
 * vector at a time where O's rows are contiguous.  l = 0 (every key masked) still gives the
 * NaN of 0 / 0, and a NaN l a NaN. */
static void store_rows(const Call *w, int64_t b, int64_t s0, int64_t rows, const float *acc, const float *l) {
  for (int64_t i = 0; i < rows; i++) {
    float *restrict o = w->o + b * w->os[0] + (s0 + i) * w->os[1], inv = 1 / l[i];
    const float *restrict a = acc + i * w->le;
    if (w->os[2] == 1)
      for (int64_t k = 0; k < w->E; k++) o[k] = a[k] * inv;
    else
      for (int64_t k = 0; k < w->E; k++) o[k * w->os[2]] = a[k] * inv;
  }
}

static void run_block(void *ctx, int64_t task) {
  Call *w = ctx;
  if (w->failed || (w->stop && *w->stop)) return;
  int64_t nsb = (w->S + w->br - 1) / w->br, b = task / nsb, s0 = task % nsb * w->br;
  int64_t rows = w->S - s0 < w->br ? w->S - s0 : w->br, D = w->D, E = w->E;
  /* the scores, the accumulators, m and l (floats), then four rows of int64 bounds */
  size_t nf = (size_t)(w->br * w->ld + w->br * w->le + 2 * w->br + 1) / 2 * 2;
  float *P = NULL;
  if (posix_memalign((void **)&P, 64, nf * sizeof(float) + 4 * sizeof(int64_t) * (size_t)w->br)) {
    w->failed = 2;
    return;
  }
  float *acc = P + w->br * w->ld, *m = acc + w->br * w->le, *l = m + w->br;
  int64_t *lo = (int64_t *)(P + nf), *hi = lo + w->br, *bl = hi + w->br, *bh = bl + w->br;
  int64_t lo_all = 0, hi_all = w->T;
  if (w->mask) {
    lo_all = w->T, hi_all = 0;
    for (int64_t i = 0; i < rows; i++) {
      mask_row(w, s0 + i, &lo[i], &hi[i]);
      if (lo[i] < hi[i]) {
        lo_all = lo[i] < lo_all ? lo[i] : lo_all;
        hi_all = hi[i] > hi_all ? hi[i] : hi_all;
      }
    }
    if (w->vbad[b]) lo_all = 0, hi_all = w->T;     /* every block, for 0 * inf */
  }
  memset(acc, 0, sizeof(float) * (size_t)(rows * w->le));
  for (int64_t i = 0; i < rows; i++) m[i] = -INFINITY, l[i] = 0;
  const float *q = w->q + b * w->qs[0] + s0 * w->qs[1];
  for (int64_t t0 = lo_all / w->bc * w->bc; t0 < hi_all && !w->failed; t0 += w->bc) {
    int64_t n = w->T - t0 < w->bc ? w->T - t0 : w->bc;
    GemmArgs x = {1, rows, n, D, q, 0, w->qs[1], w->qs[2], w->kt + b * w->D * w->T + t0, 0, w->T, 1, P, 0, w->ld, 1,
                  false, w->stop};
    char err[8];
    if (!gemm_run(w->g, &x, NULL, err, sizeof err)) {
      w->failed = 1;
      break;
    }
    int64_t *rl = NULL, *rh = NULL;
    if (w->mask) {
      for (int64_t i = 0; i < rows; i++) bl[i] = lo[i] - t0, bh[i] = hi[i] - t0;
      rl = bl, rh = bh;
    }
    block_update(P, w->ld, rows, n, w->k2, rl, rh, m, l, acc, w->le);
    GemmArgs y = {1, rows, E, n, P, 0, w->ld, 1, w->v + b * w->vs[0] + t0 * w->vs[1], 0, w->vs[1], w->vs[2],
                  acc, 0, w->le, 1, true, w->stop};
    if (!gemm_run(w->g, &y, NULL, err, sizeof err)) {
      w->failed = 1;
      break;
    }
  }
  store_rows(w, b, s0, rows, acc, l);
  free(P);
}

/* ---- the row path: a few query rows against every key, without the GEMM engine ----
 *
 * A decoder's step (S = 1) or any few rows: each task takes one batch index and up to
 * ROWS_MAX query rows and reads K and V once, row by row as they are stored, so K is never
 * transposed, nothing is packed or planned, and no block of scores is a GEMM call.  The scores
 * of a key are dot products over D (the rows' accumulators in registers, one horizontal sum
 * each), the weights go through block_update as the tiles' do, and P . V adds each key's V row,
 * scaled by its weights, to the rows' accumulators, a 16-lane column strip at a time.  A tail
 * of D or E past the last whole vector is read through a zeroed vector, so no lane reads past
 * a row. */
#define ROWS_MAX 4

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
      float *o = P + i * ld + j;
      o[0] = z[0], o[1] = z[8], o[2] = z[4], o[3] = z[12];
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

static ATTN_CLONES void rows_scores(const float *q, int64_t dp, int r, const float *k, int64_t ks, int64_t n,
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

static ATTN_CLONES void rows_pv(const float *P, int64_t ld, int r, const float *v, int64_t vs, int64_t n, int64_t e,
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
static ATTN_CLONES bool rows_finite(const float *v, int64_t n, int64_t rs, int64_t e) {
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

static void run_rows(void *ctx, int64_t task) {
  Call *w = ctx;
  if (w->failed || (w->stop && *w->stop)) return;
  int64_t nsb = (w->S + ROWS_MAX - 1) / ROWS_MAX, b = task / nsb, s0 = task % nsb * ROWS_MAX;
  int r = (int)(w->S - s0 < ROWS_MAX ? w->S - s0 : ROWS_MAX);
  int64_t D = w->D, E = w->E, dp = (D + LANES - 1) / LANES * LANES;
  /* q rows, scores, accumulators, m and l (floats), then the mask's bounds */
  size_t nf = (size_t)(ROWS_MAX * (dp + w->ld + w->le) + 2 * ROWS_MAX), nb = nf * sizeof(float) + 4 * ROWS_MAX * 8;
  /* on the stack when small (a head of 64: 4 KiB), where a malloc a task was a tenth of a
   * decoder step's time */
  float small[4096] __attribute__((aligned(64))), *q = small;
  if (nb > sizeof small && posix_memalign((void **)&q, 64, nb)) {
    w->failed = 2;
    return;
  }
  float *P = q + ROWS_MAX * dp, *acc = P + ROWS_MAX * w->ld, *m = acc + ROWS_MAX * w->le, *l = m + ROWS_MAX;
  int64_t *lo = (int64_t *)(l + ROWS_MAX), *hi = lo + ROWS_MAX, *bl = hi + ROWS_MAX, *bh = bl + ROWS_MAX;
  memset(q, 0, sizeof(float) * (size_t)(ROWS_MAX * dp));
  memset(acc, 0, sizeof(float) * (size_t)(ROWS_MAX * w->le));
  const float *qb = w->q + b * w->qs[0] + s0 * w->qs[1];
  for (int i = 0; i < r; i++) {
    m[i] = -INFINITY, l[i] = 0;
    if (w->qs[2] == 1) memcpy(q + i * dp, qb + i * w->qs[1], sizeof(float) * (size_t)D);
    else
      for (int64_t x = 0; x < D; x++) q[i * dp + x] = qb[i * w->qs[1] + x * w->qs[2]];
  }
  int64_t lo_all = 0, hi_all = w->T;
  if (w->mask) {
    lo_all = w->T, hi_all = 0;
    for (int i = 0; i < r; i++) {
      mask_row(w, s0 + i, &lo[i], &hi[i]);
      if (lo[i] < hi[i]) lo_all = lo[i] < lo_all ? lo[i] : lo_all, hi_all = hi[i] > hi_all ? hi[i] : hi_all;
    }
    if (w->vbad[b]) lo_all = 0, hi_all = w->T;
    if (hi_all < lo_all) hi_all = lo_all;
  }
  const float *kb = w->k + b * w->ks[0], *vb = w->v + b * w->vs[0];
  for (int64_t t0 = lo_all; t0 < hi_all; t0 += w->bc) {
    int64_t n = hi_all - t0 < w->bc ? hi_all - t0 : w->bc;
    rows_scores(q, dp, r, kb + t0 * w->ks[1], w->ks[1], n, D, P, w->ld);
    int64_t *rl = NULL, *rh = NULL;
    if (w->mask) {
      for (int i = 0; i < r; i++) bl[i] = lo[i] - t0, bh[i] = hi[i] - t0;
      rl = bl, rh = bh;
    }
    block_update(P, w->ld, r, n, w->k2, rl, rh, m, l, acc, w->le);
    rows_pv(P, w->ld, r, vb + t0 * w->vs[1], w->vs[1], n, E, acc, w->le);
  }
  store_rows(w, b, s0, r, acc, l);
  if (q != small) free(q);
}

/* K[b] transposed into kt[b] ([D][T]), 16 keys at a time so that both sides stay in cache. */
static void transpose_k(void *ctx, int64_t b) {
  Call *w = ctx;
  const float *k = w->k + b * w->ks[0];
  float *kt = w->kt + b * w->D * w->T;
  for (int64_t t0 = 0; t0 < w->T; t0 += 16) {
    int64_t t1 = w->T - t0 < 16 ? w->T : t0 + 16;
    for (int64_t d = 0; d < w->D; d++)
      for (int64_t t = t0; t < t1; t++) kt[d * w->T + t] = k[t * w->ks[1] + d * w->ks[2]];
  }
}

/* ---- choosing the blocks and the path ---- */

static int64_t level_bytes(const HwModel *hw, const char *name, int64_t dflt) {
  const HwLevel *lv = sched_level(hw, name);
  return lv && lv->bytes > 0 ? lv->bytes : dflt;
}

/* Square blocks of n query rows and n keys: the scores (n x n), the K and V blocks and the Q
 * block and accumulators (n x D each) fill three quarters of L2, n^2 + 4nD = 3/4 L2 in floats.
 * n is a multiple of the 16 lanes; the blocks shrink to S and T when those are smaller, and
 * the query blocks until there are two tasks a thread when the batch is small. */
static void blocks(const HwModel *hw, int64_t B, int64_t S, int64_t T, int64_t D, int threads, int64_t *br,
                   int64_t *bc) {
  double l2 = (double)level_bytes(hw, "L2", 262144) / 4, dd = D > 0 ? (double)D : 1;
  int64_t n = (int64_t)(sqrt(4 * dd * dd + 0.75 * l2) - 2 * dd);
  n = n < LANES ? LANES : n > 512 ? 512 : n / LANES * LANES;
  *br = S > 0 && S < n ? S : n;
  *bc = T < n ? (T < LANES ? LANES : (T + LANES - 1) / LANES * LANES) : n;
  int64_t want = 2 * (int64_t)threads;
  if (B > 0 && S > 8 && B * ((S + *br - 1) / *br) < want) {
    int64_t r = ceil_div(S, ceil_div(want, B));
    r = r < 8 ? 8 : (r + 7) / 8 * 8;
    if (r < *br) *br = r;
  }
}

/* The chain's sizes and operands for this call (the strides as cpu_run's tables hold them). */
static void call_shape(const AttnChain *c, const int64_t *ext, const int64_t *strides, Call *w) {
  w->c = c;
  w->B = c->batch ? ext[c->ax_b] : 1;
  w->S = ext[c->ax_S], w->T = ext[c->ax_T], w->D = ext[c->ax_D], w->E = ext[c->ax_E];
  const int *pos[3] = {c->qpos, c->kpos, c->vpos};
  int slot[3] = {c->q, c->k, c->v};
  int64_t *out[3] = {w->qs, w->ks, w->vs};
  for (int x = 0; x < 3; x++)
    for (int i = 0; i < 3; i++)
      out[x][i] = pos[x][i] >= 0 ? strides[slot[x] * DYN_MAX_RANK + pos[x][i]] : 0;
  int r = c->batch ? 3 : 2;
  for (int i = 0; i < 3; i++) w->os[i] = 0;
  for (int i = 0; i < r; i++) w->os[3 - r + i] = strides[c->o * DYN_MAX_RANK + i];
}

/* The row path's keys a block: its scores, ROWS_MAX rows of them, take a quarter of L1, in
 * whole vectors, at most 512, and no more than T needs. */
static int64_t rows_keys(const HwModel *hw, int64_t T) {
  int64_t n = level_bytes(hw, "L1", 32768) / 4 / (4 * ROWS_MAX) / LANES * LANES;
  n = n < LANES ? LANES : n > 512 ? 512 : n;
  int64_t t = (T + LANES - 1) / LANES * LANES;
  return t > 0 && t < n ? t : n;
}

double cpu_attn_rows_time(const HwModel *hw, int threads, int64_t B, int64_t S, int64_t T, int64_t D, int64_t E,
                          double kept, bool masked, bool *serial) {
  int64_t groups = B * sched_cdiv(S, ROWS_MAX);
  if (groups <= 0) {
    if (serial) *serial = true;
    return 0;
  }
  double rows = (double)B * S / (double)groups, keys = (double)groups * T * kept;
  /* lane-operations: the FMAs of the scores and of P . V over whole 16-lane vectors, each
   * with (rows + 1) / rows loads (a row of K or V shared by the rows, one operand a row: Q's
   * vector, P's broadcast), as many load ports as FMA pipes on every model, so the loads
   * bound it; and a score's share of vfold4's 13 operations on 16 lanes */
  double fma = (double)(sched_cdiv(D, LANES) * LANES + sched_cdiv(E, LANES) * LANES);
  double ops = keys * rows * (fma * (rows + 1) / rows + 13.0 * LANES / 4);
  /* bytes: K and V of the keys once, Q and O; a group after the first of a batch index reads
   * them again from the level one head's K and V fit */
  double head = 4.0 * T * kept * (D + E), once = head * B + 4.0 * B * S * (D + E);
  if (masked) once += 4.0 * B * T * E;           /* V checked for an inf or a NaN, on one thread */
  double again = head * (double)(groups - B);
  double best = 0;
  for (int pass = 0; pass < 2; pass++) {
    int t = pass ? threads : 1;
    if (t > groups) t = (int)groups;
    if (hw->cores > 0 && t > hw->cores) t = hw->cores;
    if (t < 1) t = 1;
    double mem = once / sched_threads_bw(hw, sched_fit_level(hw, once, t), t) +
                 again / sched_threads_bw(hw, sched_fit_level(hw, head, 1), t);
    double comp = ops / sched_fma_lanes_rate(hw, t, 4) + cost_attn_softmax_time(hw, t, keys * rows, ATTN_SCALE_FOLDED);
    SchedWork fj = {0, 4, 0, 0, false, groups};  /* the fork-join alone */
    double total = (mem > comp ? mem : comp) + sched_stream_time(hw, t, &fj, NULL);
    if (!pass || total < best) {
      best = total;
      if (serial) *serial = !pass;
    }
  }
  return best;
}

/* The model counts the masked keys of row blocks one block at a time, up to MASK_SAMPLES of
 * them; of more, that many spread evenly (mask_sample), their count scaled: the mask is
 * affine in s, so the keys a block keeps move evenly from block to block.  (Counting every
 * block of S = 10^9 took :sched 10 s.) */
#define MASK_SAMPLES 4096

/* How many of n row blocks the model counts, and the j-th of them (the middle of its share). */
static int64_t mask_samples(int64_t n) { return n < MASK_SAMPLES ? n : MASK_SAMPLES; }
static int64_t mask_sample(int64_t j, int64_t n, int64_t ns) {
  return (int64_t)(((double)j + 0.5) * (double)n / (double)ns);
}

/* The keys [*lo, *hi) that rows [s0, s1) keep together under the mask (*hi <= *lo: none). */
static void mask_rows(const Call *w, int64_t s0, int64_t s1, int64_t *lo_all, int64_t *hi_all) {
  *lo_all = w->T, *hi_all = 0;
  for (int64_t s = s0; s < w->S && s < s1; s++) {
    int64_t lo, hi;
    mask_row(w, s, &lo, &hi);
    if (lo < hi) *lo_all = lo < *lo_all ? lo : *lo_all, *hi_all = hi > *hi_all ? hi : *hi_all;
  }
}

/* The share of the keys the row path's groups visit under the mask. */
static double rows_kept(const Call *w) {
  if (!w->mask) return 1;
  double seen = 0;
  int64_t groups = sched_cdiv(w->S, ROWS_MAX), ns = mask_samples(groups);
  for (int64_t j = 0; j < ns; j++) {
    int64_t g = mask_sample(j, groups, ns), lo, hi;
    mask_rows(w, g * ROWS_MAX, (g + 1) * ROWS_MAX, &lo, &hi);
    if (hi > lo) seen += (double)(hi - lo);
  }
  return ns > 0 && w->T > 0 ? seen / ((double)ns * (double)w->T) : 0;
}

/* Predicted seconds fused and unfused, for :sched and the choice. */
static void predict(CpuBackend *be, const Call *w, int threads, double *fused, double *unfused) {
  const HwModel *hw = &be->hw;
  GemmKernels *g = w->g;
  int64_t B = w->B, S = w->S, T = w->T, D = w->D, E = w->E;
  double bst = (double)B * S * T;
  /* the exponentials and the row work (cost.c): the program's row-wise kernel applies the
   * scale as it is written, the fused kernel folds it into the exponent's FMA */
  double ew = cost_attn_softmax_time(hw, threads, bst, w->div ? ATTN_SCALE_DIV : ATTN_SCALE_MUL);
  double ewf = cost_attn_softmax_time(hw, threads, bst, ATTN_SCALE_FOLDED);
  GemmArgs a = {B, S, T, D, NULL, S * D, D, 1, NULL, T * D, 1, D, NULL, S * T, T, 1, false, NULL};
  GemmArgs b = {B, S, E, T, NULL, S * T, T, 1, NULL, T * E, E, 1, NULL, S * E, E, 1, false, NULL};
  /* unfused: the scores written and read back about five times (scores, e, the sum, P . V) */
  double bw = sched_shared_bw(hw, 4 * bst / (threads > 0 ? threads : 1), threads) * (threads > 0 ? threads : 1);
  *unfused = gemm_predict(g, &a, threads) + gemm_predict(g, &b, threads) + ew + 5 * 4 * bst / bw;
  int64_t nsb = (S + w->br - 1) / w->br, ntb = (T + w->bc - 1) / w->bc;
  GemmArgs ta = {1, w->br, w->bc, D, NULL, 0, D, 1, NULL, 0, T, 1, NULL, 0, w->ld, 1, false, NULL};
  GemmArgs tb = {1, w->br, E, w->bc, NULL, 0, w->ld, 1, NULL, 0, E, 1, NULL, 0, E, 1, true, NULL};
  double blk = gemm_predict(g, &ta, 1) + gemm_predict(g, &tb, 1);
  /* blocks the mask leaves: counted row block by row block (MASK_SAMPLES of them at most) */
  double kept = w->mask ? 0 : (double)nsb * (double)ntb;
  int64_t ns = w->mask ? mask_samples(nsb) : 0;
  for (int64_t j = 0; j < ns; j++) {
    int64_t sb = mask_sample(j, nsb, ns), lo, hi;
    mask_rows(w, sb * w->br, (sb + 1) * w->br, &lo, &hi);
    if (hi > lo) kept += (double)((hi + w->bc - 1) / w->bc - lo / w->bc);
  }
  if (ns > 0) kept *= (double)nsb / (double)ns;
  double frac = nsb > 0 && ntb > 0 ? kept / (double)(nsb * ntb) : 0;
  int64_t tasks = B * nsb;
  /* K transposed first, read and written once, a fork-join of B tasks */
  SchedWork kt = {0, 4, 4.0 * B * T * D, 4.0 * B * T * D, false, B};
  *fused = (double)sched_waves(tasks, threads) * (tasks ? kept * (double)B / (double)tasks : 0) * blk +
           ewf * frac + cost_roofline(hw, threads, 0, 4.0 * B * (S * D + S * E + 2 * T * D + T * E)) +
           sched_stream_time(hw, threads, &kt, NULL);
}

/* DYN_ATTENTION: 0 the model's choice, -1 unfused, 1 fused on the model's path, 2 on the
 * tiles, 3 on the row path. */
static int forced(void) {
  const char *e = getenv("DYN_ATTENTION");
  if (!e) return 0;
  return !strcmp(e, "fused") ? 1 : !strcmp(e, "unfused") ? -1 : !strcmp(e, "tiles") ? 2 : !strcmp(e, "rows") ? 3 : 0;
}

/* The model's choice for w on `threads`: fused or not, and on which path.  The row path
 * reads rows of K and V in place, so it needs their d to be the unit stride (a zero stride:
 * not known yet, C order assumed).  When every batch index's rows are one of its tasks, it
 * reads K and V once and stores nothing, the least any path moves, and the other two are
 * priced (the GEMM engine's plans: microseconds a call) only for :sched (all). */
static void plan(CpuBackend *be, Call *w, int threads, int f, bool all) {
  w->rows_s = cpu_attn_rows_time(&be->hw, threads, w->B, w->S, w->T, w->D, w->E, rows_kept(w), w->mask, &w->serial);
  bool unit = (w->ks[2] == 0 || w->ks[2] == 1) && (w->vs[2] == 0 || w->vs[2] == 1);
  if (all || !unit || w->S > ROWS_MAX || f == 2) predict(be, w, threads, &w->tiles_s, &w->unfused_s);
  else w->tiles_s = w->unfused_s = INFINITY;
  w->rows = unit && (f == 3 || (f != 2 && w->rows_s < w->tiles_s));
  double fused = w->rows ? w->rows_s : w->tiles_s;
  w->on = f ? f > 0 : fused < w->unfused_s;
  if (w->rows) {
    w->bc = rows_keys(&be->hw, w->T);
    w->ld = w->bc;
  }
}

/* A chain's last plan for each of the two layouts plan() tells apart (K's and V's rows of
 * unit stride or not): its key (the sizes, the mask's line, the threads, DYN_ATTENTION) and
 * what plan() chose.  Each chain keeps its own, so that two chains of the same sizes, whose
 * masks may send them different ways, never take each other's; a repeated shape skips the
 * model, whose GEMM plans (predict: four a call, from the choice and again from the run)
 * took longer than the work of attention 3 x 61 x 61 x 32. */
#define PLAN_KEY 10
struct AttnPlan {
  bool valid;
  int64_t key[PLAN_KEY];
  bool on, rows, serial;
  int64_t bc, ld;
  double tiles_s, rows_s, unfused_s;
};

/* plan(), or chain i's last plan when its key is w's (f: DYN_ATTENTION, forced()). */
static void plan_kept(CpuBackend *be, CpuProgram *cp, int i, Call *w, int threads, int f) {
  bool unit = (w->ks[2] == 0 || w->ks[2] == 1) && (w->vs[2] == 0 || w->vs[2] == 1);
  struct AttnPlan *ap = &cp->attn_plan[2 * i + unit];
  int64_t key[PLAN_KEY] = {w->B, w->S, w->T, w->D, w->E, threads, 2 * f + w->mask};
  memcpy(&key[7], &w->c0, sizeof w->c0);
  memcpy(&key[8], &w->cs, sizeof w->cs);
  memcpy(&key[9], &w->ct, sizeof w->ct);
  if (ap->valid && !memcmp(ap->key, key, sizeof key)) {
    w->on = ap->on, w->rows = ap->rows, w->serial = ap->serial, w->bc = ap->bc, w->ld = ap->ld;
    w->tiles_s = ap->tiles_s, w->rows_s = ap->rows_s, w->unfused_s = ap->unfused_s;
    return;
  }
  plan(be, w, threads, f, false);
  *ap = (struct AttnPlan){true, {0}, w->on, w->rows, w->serial, w->bc, w->ld, w->tiles_s, w->rows_s, w->unfused_s};
  memcpy(ap->key, key, sizeof key);
}

/* Fill w for chain c; false when the chain cannot run fused here (no GEMM engine). */
static bool prepare(CpuBackend *be, const AttnChain *c, const int64_t *ext, const int64_t *szv,
                    const int64_t *strides, Call *w) {
  memset(w, 0, sizeof *w);
  /* the f32 engine: a kept chain's contractions are f32 ones on it, so cpu_compile has
   * already made it (taken from the back end, below the file that compiles) */
  w->g = be->gemm[0];
  if (!w->g) return false;
  call_shape(c, ext, strides, w);
  blocks(&be->hw, w->B, w->S, w->T, (w->D + w->E + 1) / 2, pool_threads(be->pool), &w->br, &w->bc);
  w->ld = (w->bc + LANES - 1) / LANES * LANES;
  w->le = (w->E + LANES - 1) / LANES * LANES;
  double scale = c->scale ? (double)(float)fuse_attn_value(c->scale, szv, -1, -1, 0, 0) : 1.0;
  w->div = c->scale && c->div;
  w->k2 = (float)((w->div ? 1 / scale : scale) * M_LOG2E);
  if (c->mask_l) {
    w->mask = true;
    double f00 = fuse_attn_value(c->mask_l, szv, c->ax_s, c->ax_t, 0, 0) - fuse_attn_value(c->mask_r, szv, c->ax_s, c->ax_t, 0, 0);
    double f10 = fuse_attn_value(c->mask_l, szv, c->ax_s, c->ax_t, 1, 0) - fuse_attn_value(c->mask_r, szv, c->ax_s, c->ax_t, 1, 0);
    double f01 = fuse_attn_value(c->mask_l, szv, c->ax_s, c->ax_t, 0, 1) - fuse_attn_value(c->mask_r, szv, c->ax_s, c->ax_t, 0, 1);
    w->c0 = f00, w->cs = f10 - f00, w->ct = f01 - f00;
  }
  return true;
}

void cpu_attn_find(CpuProgram *cp) {
  AttnChain found[8];
  int n = fuse_attn_find(cp->p, found, 8), kept = 0;
  cp->attn = n ? xcalloc((size_t)n, sizeof(AttnChain)) : NULL;
  for (int i = 0; i < n; i++)   /* both contractions on the GEMM engine */
    if (cp->k[found[i].k0].gemm && cp->k[found[i].k0 + 2].gemm) cp->attn[kept++] = found[i];
  cp->nattn = kept;
  cp->attn_on = kept ? xcalloc((size_t)kept, sizeof(bool)) : NULL;
  cp->attn_plan = kept ? xcalloc(2 * (size_t)kept, sizeof *cp->attn_plan) : NULL;
  cp->attn_unstored = kept ? xcalloc((size_t)cp->p->nslots + 1, sizeof(bool)) : NULL;
}

const bool *cpu_attn_choose(CpuBackend *be, CpuProgram *cp, const int64_t *ext, const int64_t *szv) {
  if (!cp->nattn) return NULL;
  memset(cp->attn_unstored, 0, (size_t)cp->p->nslots * sizeof(bool));
  int f = forced();
  for (int i = 0; i < cp->nattn; i++) {
    const AttnChain *c = &cp->attn[i];
    bool on = f > 0;
    if (!f) {
      Call w;
      /* the strides do not change the prediction: C order is assumed */
      int64_t *st = xcalloc((size_t)cp->p->nslots * DYN_MAX_RANK + 1, sizeof(int64_t));
      if (prepare(be, c, ext, szv, st, &w)) {
        plan_kept(be, cp, i, &w, pool_threads(be->pool), f);
        on = w.on;
      }
      free(st);
    }
    cp->attn_on[i] = on;
    for (int j = 0; on && j < 6; j++)
      if (c->inner[j] >= 0) cp->attn_unstored[c->inner[j]] = true;
  }
  return cp->attn_unstored;
}

/* The end of a call: 4 (the kernels it ran), or -1 with why. */
static int finish(Call *w, volatile int *interrupt, char *err, size_t errlen) {
  free(w->vbad);
  if (interrupt && *interrupt) {
    snprintf(err, errlen, "interrupted");
    return -1;
  }
  if (w->failed) {
    snprintf(err, errlen, w->failed == 2 ? "cannot allocate the blocks of fused attention" : "the contraction engine failed");
    return -1;
  }
  return 4;
}

int cpu_attn_run(CpuBackend *be, CpuProgram *cp, int k, void **bufs, const int64_t *ext, const int64_t *szv,
                 const int64_t *strides, volatile int *interrupt, char *err, size_t errlen) {
  int i = 0;
  while (i < cp->nattn && cp->attn[i].k0 != k) i++;
  if (i == cp->nattn || !cp->attn_on[i]) return 0;
  const AttnChain *c = &cp->attn[i];
  Call w;
  if (!prepare(be, c, ext, szv, strides, &w)) {
    snprintf(err, errlen, "the contraction engine is not available");
    return -1;
  }
  w.q = bufs[c->q], w.k = bufs[c->k], w.v = bufs[c->v], w.o = bufs[c->o];
  w.stop = interrupt;
  plan_kept(be, cp, i, &w, pool_threads(be->pool), forced());
  int64_t nsb = (w.S + (w.rows ? ROWS_MAX : w.br) - 1) / (w.rows ? ROWS_MAX : w.br), tasks = w.B * nsb;
  if (tasks <= 0) return 4;
  if (w.mask) {   /* blocks are skipped only where V is finite */
    w.vbad = xcalloc((size_t)w.B + 1, 1);
    for (int64_t b = 0; b < w.B; b++)
      if (w.vs[2] == 1) w.vbad[b] = !rows_finite(w.v + b * w.vs[0], w.T, w.vs[1], w.E);
      else
        for (int64_t t = 0; t < w.T && !w.vbad[b]; t++)
          for (int64_t d = 0; d < w.E; d++)
            if (!isfinite(w.v[b * w.vs[0] + t * w.vs[1] + d * w.vs[2]])) {
              w.vbad[b] = 1;
              break;
            }
  }
  if (w.rows) {
    if (tasks == 1 || w.serial)
      for (int64_t t = 0; t < tasks; t++) run_rows(&w, t);
    else dyn_parallel_for(be->pool, tasks, run_rows, &w);
    return finish(&w, interrupt, err, errlen);
  }
  int64_t ktn;
  if (!size_mul_ok(w.B * w.D, w.T, &ktn) || posix_memalign((void **)&w.kt, 64, (size_t)ktn * sizeof(float) + 64)) {
    free(w.vbad);
    snprintf(err, errlen, "cannot allocate the blocks of fused attention");
    return -1;
  }
  if (w.B > 1) dyn_parallel_for(be->pool, w.B, transpose_k, &w);
  else transpose_k(&w, 0);
  if (tasks == 1) run_block(&w, 0);
  else dyn_parallel_for(be->pool, tasks, run_block, &w);
  free(w.kt);
  return finish(&w, interrupt, err, errlen);
}

int cpu_attn_describe(CpuBackend *be, CpuProgram *cp, int k, const int64_t *ext, const EvalSizes *sz, int threads,
                      Buf *out, double *total) {
  int i = 0;
  while (i < cp->nattn && cp->attn[i].k0 != k) i++;
  if (i == cp->nattn) return 0;
  const AttnChain *c = &cp->attn[i];
  const Program *p = cp->p;
  int f = forced();
  buf_printf(out, "kernels %s .. %s: attention, fused when the model prefers it: online softmax over blocks of %s,\n"
                  "  the scores %s[%s%s%s, %s] never stored; %s . %s^T and P . %s on the contraction engine%s\n",
             p->kernels[k].name, p->kernels[k + 3].name, p->axes[c->ax_T].name, p->slots[c->inner[0]].name,
             c->batch ? p->axes[c->ax_b].name : "", c->batch ? ", " : "", p->axes[c->ax_S].name, p->axes[c->ax_T].name,
             p->slots[c->q].name, p->slots[c->k].name, p->slots[c->v].name,
             c->mask_l ? ", masked blocks skipped" : "");
  if (!ext || !sz) return 0;
  Call w;
  int64_t *st = xcalloc((size_t)p->nslots * DYN_MAX_RANK + 1, sizeof(int64_t));
  int64_t *szv = xcalloc((size_t)p->nkx + 1, sizeof(int64_t));
  Buf why = {0};
  bool ok = eval_size_values(p, sz, szv, &why) && prepare(be, c, ext, szv, st, &w);
  buf_free(&why);
  free(st);
  if (!ok) {
    free(szv);
    return 0;
  }
  int64_t br = w.br, bc = w.bc;
  plan(be, &w, threads, f, true);
  free(szv);
  double fu = w.rows ? w.rows_s : w.tiles_s;
  buf_printf(out, "  blocks: %lld query rows x %lld keys per task (L2), %lld tasks; predicted %.3f ms fused,\n"
                  "  %.3f ms unfused (scores stored): %s%s\n",
             (long long)br, (long long)bc, (long long)(w.B * ((w.S + br - 1) / br)), w.tiles_s * 1e3,
             w.unfused_s * 1e3, w.on && !w.rows ? "fused" : w.on ? "fused on rows" : "unfused",
             f ? " (DYN_ATTENTION)" : "");
  buf_printf(out, "  rows: %d query rows a task against keys in blocks of %lld, K and V read in place, %lld tasks%s;\n"
                  "  predicted %.3f ms: %s\n",
             ROWS_MAX, (long long)rows_keys(&be->hw, w.T), (long long)(w.B * sched_cdiv(w.S, ROWS_MAX)),
             w.serial ? " on one thread" : "", w.rows_s * 1e3, w.on && w.rows ? "fused on rows" : "not taken");
  if (!w.on) return 0;
  *total += fu;
  return 4;
}

#endif
