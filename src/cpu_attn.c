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
#ifdef __x86_64__
#include <immintrin.h>   /* cpu_attn_kern.h's AVX-512 exponential, where a copy is built for it */
#endif
#include <stdlib.h>
#include <string.h>

/* The exponentials and the row statistics of a block of scores, 16 lanes at a time in GCC's
 * vector extension (cpu_attn_kern.h).  The weights are 2^(x c log2(e) - m), m the running
 * max of x c log2(e): the score's scale c (1 / sqrt(D) as a product, never a division) and
 * log2(e) are one constant, so a score's exponent is one FMA and its power of two needs no
 * range reduction by ln 2.  The arguments of exp2 here are never above a rounding of 0
 * (x c log2(e) - m, m_old - m_new), so one range suffices: below -126 it gives 0 (the unfused
 * code's denormals, at most 1e-38, are dropped), -inf gives 0, NaN stays NaN.  On x86-64 with
 * GCC the kernels are compiled for three instruction sets and the first call picks the
 * host's (the JIT'd kernels follow the model; these cannot, being C). */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float vf16 __attribute__((vector_size(64), aligned(64)));
typedef int32_t vi16 __attribute__((vector_size(64), aligned(64)));
#define LANES 16
#define ROWS_MAX 4   /* the row path's query rows a task (below) */

typedef struct AttnKern {
  void (*block_update)(float *P, int64_t ld, int64_t rows, int64_t n, float k, const int64_t *lo, const int64_t *hi,
                       float *m, float *l, float *acc, int64_t d);
  void (*rows_scores)(const float *q, int64_t dp, int r, const float *k, int64_t ks, int64_t n, int64_t d, float *P,
                      int64_t ld);
  void (*rows_pv)(const float *P, int64_t ld, int r, const float *v, int64_t vs, int64_t n, int64_t e, float *acc,
                  int64_t ep);
  bool (*rows_finite)(const float *v, int64_t n, int64_t rs, int64_t e);
} AttnKern;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTN_ISAS 1
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define KERN(f) f##_v4
#include "cpu_attn_kern.h"
#undef KERN
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define KERN(f) f##_v3
#include "cpu_attn_kern.h"
#undef KERN
#pragma GCC pop_options
#endif
#define KERN(f) f##_base
#include "cpu_attn_kern.h"
#undef KERN

/* The kernels for the host's instruction set. */
static const AttnKern *attn_kern(void) {
#ifdef ATTN_ISAS
  if (__builtin_cpu_supports("x86-64-v4")) return &kern_v4;
  if (__builtin_cpu_supports("x86-64-v3")) return &kern_v3;
#endif
  return &kern_base;
}

/* ---- the shape of one call ---- */

typedef struct Call {
  const AttnChain *c;
  GemmKernels *g;
  const AttnKern *kern;                 /* the C kernels for the host */
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
    w->kern->block_update(P, w->ld, rows, n, w->k2, rl, rh, m, l, acc, w->le);
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
    w->kern->rows_scores(q, dp, r, kb + t0 * w->ks[1], w->ks[1], n, D, P, w->ld);
    int64_t *rl = NULL, *rh = NULL;
    if (w->mask) {
      for (int i = 0; i < r; i++) bl[i] = lo[i] - t0, bh[i] = hi[i] - t0;
      rl = bl, rh = bh;
    }
    w->kern->block_update(P, w->ld, r, n, w->k2, rl, rh, m, l, acc, w->le);
    w->kern->rows_pv(P, w->ld, r, vb + t0 * w->vs[1], w->vs[1], n, E, acc, w->le);
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

/* The cycles of a row-path task beyond its dot products and softmax: its rows of Q copied,
 * its accumulators cleared, the mask's bounds, the rows divided by l and stored (measured
 * with rdtsc around the phases, one thread of a Zen 5 guest: 130-210 cycles at 2.7 GHz for
 * 4 rows of 32 to 64 values a task). */
#define ROW_TASK_CYC 200

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
    double dots = ops / sched_fma_lanes_rate(hw, t, 4);
    /* a task's online softmax runs between its phases that stream K and V, so it adds to
     * them, as does its setting up and storing (ROW_TASK_CYC) */
    double soft = cost_attn_softmax_time(hw, t, keys * rows, ATTN_SCALE_FOLDED);
    double setup = (double)sched_cdiv(groups, t) * ROW_TASK_CYC / ((hw->ghz > 0 ? hw->ghz : 1) * 1e9);
    SchedWork fj = {0, 4, 0, 0, false, groups};  /* the fork-join alone */
    double total = (mem > dots ? mem : dots) + soft + setup + sched_stream_time(hw, t, &fj, NULL);
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
  /* and, while the threads' shares fit in their private caches, the scores' lines move
   * between the cores twice: the products' tasks write them and the softmax's, split by
   * batch index, read them; its weights go to P . V's tasks, split another way ((t - 1) / t
   * of the lines each time; 2 threads of a Zen 5, 7 x 97 x 131 x 80: P . V took 0.11 ms
   * after the softmax, 0.06 alone).  Larger, they come from a shared level (bw, above). */
  int lv = sched_fit_level(hw, 4 * bst, threads);
  if (threads > 1 && lv < hw_ncaches(hw) && hw->level[lv].shared_by <= 1)
    *unfused += 2 * (threads - 1.0) / threads * sched_lines_moved_s(hw, ceil(4 * bst / (double)sched_line_bytes(hw)));
  int64_t nsb = (S + w->br - 1) / w->br, ntb = (T + w->bc - 1) / w->bc;
  /* a block's two GEMM calls on one thread, averaged over a batch index's blocks: whole
   * ones and those of the last rows and the last keys (priced at full size, they made
   * attention 16 x 512 x 512 x 64, two blocks of 320 and 192 each way, 56 % more work) */
  int64_t rb[2] = {w->br, S - (nsb - 1) * w->br}, cb[2] = {w->bc, T - (ntb - 1) * w->bc};
  double blk = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      double n = (double)(i ? 1 : nsb - 1) * (double)(j ? 1 : ntb - 1);
      if (n <= 0) continue;
      GemmArgs ta = {1, rb[i], cb[j], D, NULL, 0, D, 1, NULL, 0, T, 1, NULL, 0, w->ld, 1, false, NULL};
      GemmArgs tb = {1, rb[i], E, cb[j], NULL, 0, w->ld, 1, NULL, 0, E, 1, NULL, 0, E, 1, true, NULL};
      blk += n * (gemm_predict(g, &ta, 1) + gemm_predict(g, &tb, 1));
    }
  blk = nsb > 0 && ntb > 0 ? blk / (double)(nsb * ntb) : 0;
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
  w.kern = attn_kern();
  plan_kept(be, cp, i, &w, pool_threads(be->pool), forced());
  int64_t nsb = (w.S + (w.rows ? ROWS_MAX : w.br) - 1) / (w.rows ? ROWS_MAX : w.br), tasks = w.B * nsb;
  if (tasks <= 0) return 4;
  if (w.mask) {   /* blocks are skipped only where V is finite */
    w.vbad = xcalloc((size_t)w.B + 1, 1);
    for (int64_t b = 0; b < w.B; b++)
      if (w.vs[2] == 1) w.vbad[b] = !w.kern->rows_finite(w.v + b * w.vs[0], w.T, w.vs[1], w.E);
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
