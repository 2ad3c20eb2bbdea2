/* cpu_conv.c -- grouped windowed contractions on the CPU back end: the depthwise convolution
 * Y[P..., G..., Q...] = sum[K...] A[G..., K...] * B[window] (kexpr_window_contraction with G
 * axes), each group's own filter slid over its own plane.  There is no matrix product to
 * hand to the micro-kernels (one filter a plane), so each plane is computed directly: a row
 * of Q's last axis at a time, every tap adding its weight times a run of B to the row.  The
 * work is a few multiply-adds per element read, so the kernel is bound by memory and the
 * model predicts it by the roofline.  cpu_rt.c's run_window calls it; cpu_sched.c says so. */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The inner loops are plain C left to the compiler's vectoriser; where the compiler can
 * build a function for several x86 levels and pick one when the library loads (ifunc), the
 * row kernels get AVX2 and AVX-512 clones, since the library itself is built for the
 * baseline.  Without clones (another compiler, another CPU family) they run at the
 * baseline's width.  (dwconv over 64 x 1024 x 7 x 7 ran at about 1 GFLOP/s as the
 * interchanged loop kernel, whose vector loop along a row of 7 never started.) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#pragma GCC optimize("O3")
#define CONV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CONV_CLONES
#endif

/* A grouped contraction's shape at run time. */
typedef struct Grp {
  int64_t ptot, gtot, qtot, ktot;
  int64_t qlast, qrows, qstep;           /* Q's last extent, the rows of it, and B's step along it */
  int64_t rowc;                          /* B's step between rows when Q has two axes (flat rows) */
  int64_t band;                          /* rows computed as one run (below); 1: a row at a time */
  int64_t lo, hi;                        /* the least and greatest offset of B read */
  int64_t kmin, kmax;                    /* the least and greatest of koff */
  int64_t *boff;                         /* per task (p, g): B's offset; per row; per tap */
  int64_t *roff, *koff;
  int64_t *aoff, *akoff;                 /* A's offset per g, per tap */
} Grp;

/* A run y[0..n) = sum over taps t of w[t] * b[koff[t] + j*step], for f32 and f64.  The
 * vector form (step 1 or 2) computes whole lines of outputs, so it writes up to a line past
 * n and reads as far past the run: the caller gives it room (grp_task).  It takes 8, 4, 2
 * lines at a time while they last, then one: each line's sum is a chain of one FMA a tap,
 * and a chain waits the FMA's latency at every step, so one line at a time ran at a
 * quarter of the FMA rate or less (dwconv 1 32 112 112 3 1 1, 9 taps: 0.17-0.23 ms, the
 * model's compute 0.04).  The lines are GCC's and Clang's vectors of 64 bytes (one zmm, two
 * ymm or four xmm as the clone's target has them), written out because the vectoriser
 * made of eight lines' arrays a loop that spilled them; a step of 2 takes the even lanes of
 * two loads (cpu_int.h's ConvV and CONV_EVEN).  The exact form runs anywhere. */
#define CONV_BLOCK(T, VT, X, NL, S)                                                                 \
  for (; n - j0 >= (NL) * L || ((NL) == 1 && j0 < n); j0 += (NL) * L) {                             \
    VT acc[NL];                                                                                     \
    for (int q = 0; q < (NL); q++) acc[q] = (VT){0};                                                \
    for (int64_t t = 0; t < nk; t++) {                                                              \
      const T *s = b + koff[t] + (S) * j0;                                                          \
      VT wt = (VT){0} + w[t];                                                                       \
      for (int q = 0; q < (NL); q++)                                                                \
        acc[q] += wt * ((S) == 1 ? CONV_LD(VT, s + q * L)                                           \
                                 : CONV_EVEN_##X(CONV_LD(VT, s + 2 * q * L), CONV_LD(VT, s + 2 * q * L + L))); \
    }                                                                                               \
    memcpy(y + j0, acc, sizeof acc);                                                                \
  }
#define CONV_RUN(NAME, EXACT, T, VT, X)                                                             \
  CONV_CLONES static void NAME(T *restrict y, const T *restrict b, const int64_t *restrict koff,   \
                               const T *restrict w, int64_t nk, int64_t n, int64_t step) {         \
    enum { L = 64 / sizeof(T) };                                                                    \
    int64_t j0 = 0;                                                                                 \
    if (step == 1) {                                                                                \
      CONV_BLOCK(T, VT, X, 8, 1) CONV_BLOCK(T, VT, X, 4, 1) CONV_BLOCK(T, VT, X, 2, 1)              \
      CONV_BLOCK(T, VT, X, 1, 1)                                                                    \
    } else {                                                                                        \
      CONV_BLOCK(T, VT, X, 8, 2) CONV_BLOCK(T, VT, X, 4, 2) CONV_BLOCK(T, VT, X, 2, 2)              \
      CONV_BLOCK(T, VT, X, 1, 2)                                                                    \
    }                                                                                               \
  }                                                                                                 \
  static void EXACT(T *y, const T *b, const int64_t *koff, const T *w, int64_t nk, int64_t n, int64_t step) { \
    for (int64_t j = 0; j < n; j++) {                                                               \
      T acc = 0;                                                                                    \
      for (int64_t t = 0; t < nk; t++) acc += w[t] * b[koff[t] + j * step];                         \
      y[j] = acc;                                                                                   \
    }                                                                                               \
  }
CONV_RUN(run_f32, exact_f32, float, ConvVf, f)
CONV_RUN(run_f64, exact_f64, double, ConvVd, d)

typedef struct GrpJob {
  const Grp *G;
  const char *a, *b;
  char *c;
  int es;
  int64_t chunk, ntask;                  /* planes a task computes, and all of them */
  const struct Pad *pad;                 /* B is the zero padding of another tensor (below), or NULL */
  volatile int *stop;
  _Atomic int failed;
} GrpJob;

/* The longest run a flat plane computes at once, in elements (its scratch row). */
#define FLAT_MAX 2048

/* n bytes from s to d (apart): whole moves of 64, 32, 16, 8 or 4 bytes, the last one
 * overlapping the one before it where n is not a multiple, so that a row of seven floats
 * is two moves of 16 bytes, not a call of memcpy nor seven moves of one (on 7 x 7 maps the
 * rows' copies took longer than their taps). */
static inline void copy_bytes(char *restrict d, const char *restrict s, size_t n) {
  if (n >= 64) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) memcpy(d + i, s + i, 64);
    if (i < n) memcpy(d + n - 64, s + n - 64, 64);
  } else if (n >= 32) {
    memcpy(d, s, 32), memcpy(d + n - 32, s + n - 32, 32);
  } else if (n >= 16) {
    memcpy(d, s, 16), memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    memcpy(d, s, 8), memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    memcpy(d, s, 4), memcpy(d + n - 4, s + n - 4, 4);
  } else {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
  }
}

/* Rows of a run into Y: n rows of len elements, from src every step elements. */
static void copy_rows(char *restrict y, const char *restrict src, int64_t n, int64_t len, int64_t step, int es) {
  for (int64_t q = 0; q < n; q++)
    copy_bytes(y + (size_t)(q * len * es), src + (size_t)(q * step * es), (size_t)(len * es));
}

/* The rows of Q a run computes at once: a plane whose rows lie close together in B (a step
 * of one along Q's last axis, rows rowc apart with rowc under twice the row) is computed in
 * bands of rows, each one run over rowc * (rows - 1) + qlast elements into scratch, the
 * elements between rows computed and dropped, as many rows as FLAT_MAX holds: rows of a
 * small map (7 x 7) are too short for the vector loop, and one run of 61 fills it; rows of
 * a large one (112 x 112, 9 taps) went one at a time through blocks of 4, 2 and 1 lines,
 * half of each row in blocks too short to keep the FMAs busy, and a band of 17 rows runs
 * in blocks of 8 (dwconv 1 32 112 112 3 1 1 on 1 thread: 0.42 -> 0.30 ms).  Others go a
 * row at a time, into Y directly where the vector form cannot run. */
static int64_t conv_band(int nq, int64_t qstep, int64_t rowc, int64_t qlast, int64_t qrows) {
  if (nq != 2 || qstep != 1 || rowc < qlast || rowc >= 2 * qlast || qrows < 2 || qlast + rowc > FLAT_MAX) return 1;
  int64_t band = (FLAT_MAX - qlast) / rowc + 1;
  return band < qrows ? band : qrows;
}

static void grp_plane(const GrpJob *J, int64_t t, const void *w, double *run, const char *b, int64_t at0,
                      int64_t lo, int64_t hi) {
  const Grp *G = J->G;
  int64_t es = J->es;
  char *y = J->c + (size_t)(t * G->qtot) * (size_t)es;
  /* a run reads B from koff's least to its greatest plus the run's span, rounded up to
   * whole lines of outputs; the vector form runs where that stays inside what the
   * convolution as a whole reads */
  int64_t line = 64 / es, step = G->band > 1 ? 1 : G->qstep;
  for (int64_t r = 0; r < G->qrows; r += G->band) {
    int64_t nb = G->qrows - r < G->band ? G->qrows - r : G->band;
    int64_t len = G->rowc * (nb - 1) + G->qlast, pad = (len + line - 1) / line * line;
    int64_t at = at0 + G->roff[r];
    bool vec = (step == 1 || step == 2) && pad <= FLAT_MAX && at + G->kmin >= lo && at + G->kmax + step * (pad - 1) <= hi;
    char *dst = nb > 1 || vec ? (char *)run : y + (size_t)(r * G->qlast * es);
    const char *src = b + (size_t)at * (size_t)es;
    if (es == 4) (vec ? run_f32 : exact_f32)((float *)dst, (const float *)src, G->koff, w, G->ktot, vec ? pad : len, step);
    else (vec ? run_f64 : exact_f64)((double *)dst, (const double *)src, G->koff, w, G->ktot, vec ? pad : len, step);
    if (nb > 1 || vec) copy_rows(y + (size_t)(r * G->qlast * es), (char *)run, nb, G->qlast, G->rowc, (int)es);
  }
}

/* ---- the zero padding, fused ----
 * nn's convolutions pad the image first, Xp[n, c, y, x] = where(y >= P and y < H + P and
 * x >= P and x < W + P, X[n, c, y - P, x - P], 0.0), a kernel of its own (lower.c's
 * windowed_read).  Before a grouped convolution that padded tensor cost more than the taps:
 * written out whole and read again from memory (64 x 1024 planes of 9 x 9 for 7 x 7 maps).
 * When only the convolution reads it, the convolution builds each padded plane itself in
 * a buffer of its task's (in L1 or L2 as it is read) and the padding kernel does not run.
 * Which elements are zero is never assumed from the expression's form: the condition is
 * evaluated over the plane once a call and must equal "the load is inside X". */

/* Elements past a padded plane that a vector run may read (zeros). */
#define PAD_MARGIN 256

/* The padded plane holding offset o of the padded tensor, built in buf (rows of pe[rank-1]
 * elements, zeros outside X); returns o's place in buf.  Every plane has its zeros in the
 * same places, so only X's rows are copied: buf's zeros stay from its allocation. */
static int64_t pad_plane(const Pad *P, int64_t o, char *buf, int es) {
  int R = P->rank;
  int64_t src = 0, rem = o;
  for (int d = 0; d < R - 2; d++) {
    int64_t i = rem / P->ps[d];
    rem -= i * P->ps[d];
    src += i * P->xs[d];
  }
  int64_t hp = P->pe[R - 2], wp = P->pe[R - 1], sy = P->xs[R - 2], sx = P->xs[R - 1];
  int64_t y0 = -P->d[0] > 0 ? -P->d[0] : 0, y1 = P->h - P->d[0] < hp ? P->h - P->d[0] : hp;
  int64_t x0 = -P->d[1] > 0 ? -P->d[1] : 0, x1 = P->w - P->d[1] < wp ? P->w - P->d[1] : wp;
  for (int64_t y = y0; y < y1; y++) {
    const char *s = P->x + (size_t)(src + (y + P->d[0]) * sy + (x0 + P->d[1]) * sx) * (size_t)es;
    char *d = buf + (size_t)(y * wp + x0) * (size_t)es;
    if (sx == 1) copy_bytes(d, s, (size_t)((x1 - x0) * es));
    else if (es == 4)
      for (int64_t x = 0; x < x1 - x0; x++) ((float *)d)[x] = ((const float *)s)[x * sx];
    else
      for (int64_t x = 0; x < x1 - x0; x++) ((double *)d)[x] = ((const double *)s)[x * sx];
  }
  return rem;
}

/* Is e affine in the axes: axes, constants, sizes, sums, and products of which one side has
 * no axis?  (cpu_affine_at evaluates those.) */
static bool affine(const KExpr *e) {
  switch (e->kind) {
  case KX_AXIS: case KX_CONST: case KX_SIZE: return true;
  case KX_BIN:
    if (e->op == OP_ADD || e->op == OP_SUB) return affine(e->a[0]) && affine(e->a[1]);
    return e->op == OP_MUL && affine(e->a[0]) && affine(e->a[1]) && !(e->a[0]->axmask && e->a[1]->axmask);
  default: return false;
  }
}

/* The padding's condition, taken apart: comparisons of affine terms (its leaves), each of at
 * most one of the plane's axes, joined by and, or, not.  Each leaf is lhs - rhs = c0 + c1 *
 * v compared with 0, v the plane's row (on 0) or column (on 1), so that the condition is
 * checked over the whole plane without evaluating the sizes again at every element. */
#define MAX_LEAVES 32
typedef struct Cond {
  const KExpr *leaf[MAX_LEAVES];
  int on[MAX_LEAVES];                    /* 0: the row, 1: the column, 2: neither */
  int64_t c0[MAX_LEAVES], c1[MAX_LEAVES];
  int n;
} Cond;

/* Collect e's leaves into C; false for another form. */
static bool cond_leaves(const KExpr *e, const int *axes, const EvalSizes *sz, Cond *C) {
  if (e->kind == KX_CONST && e->ty == DYN_BOOL) return true;
  if (e->kind == KX_UN && e->op == OP_NOT) return cond_leaves(e->a[0], axes, sz, C);
  if (e->kind != KX_BIN) return false;
  if (e->op == OP_AND || e->op == OP_OR) return cond_leaves(e->a[0], axes, sz, C) && cond_leaves(e->a[1], axes, sz, C);
  if (e->op != OP_LT && e->op != OP_LE && e->op != OP_GT && e->op != OP_GE && e->op != OP_EQ && e->op != OP_NE)
    return false;
  if (C->n == MAX_LEAVES || !affine(e->a[0]) || !affine(e->a[1]) || e->opty == DYN_F32 || e->opty == DYN_F64)
    return false;
  uint64_t m = e->axmask, my = 1ull << (axes[0] % 64), mx = 1ull << (axes[1] % 64);
  int on = !m ? 2 : m == my ? 0 : m == mx ? 1 : -1;
  if (on < 0) return false;
  int64_t ax[256] = { 0 };
  int64_t d0 = cpu_affine_at(e->a[0], ax, sz) - cpu_affine_at(e->a[1], ax, sz);
  if (on < 2) ax[axes[on]] = 1;
  int64_t d1 = cpu_affine_at(e->a[0], ax, sz) - cpu_affine_at(e->a[1], ax, sz);
  C->leaf[C->n] = e, C->on[C->n] = on, C->c0[C->n] = d0, C->c1[C->n] = d1 - d0;
  C->n++;
  return true;
}

/* Leaf i at v (its axis's value). */
static bool leaf_at(const Cond *C, int i, int64_t v) {
  int64_t d = C->c0[i] + C->c1[i] * v;
  switch (C->leaf[i]->op) {
  case OP_LT: return d < 0;
  case OP_LE: return d <= 0;
  case OP_GT: return d > 0;
  case OP_GE: return d >= 0;
  case OP_EQ: return d == 0;
  default: return d != 0;
  }
}

/* e with its leaves' truths in bits (bit i: leaf i). */
static bool cond_eval(const KExpr *e, const Cond *C, uint64_t bits) {
  if (e->kind == KX_CONST) return e->i != 0;
  if (e->kind == KX_UN) return !cond_eval(e->a[0], C, bits);
  if (e->op == OP_AND) return cond_eval(e->a[0], C, bits) && cond_eval(e->a[1], C, bits);
  if (e->op == OP_OR) return cond_eval(e->a[0], C, bits) || cond_eval(e->a[1], C, bits);
  for (int i = 0; i < C->n; i++)
    if (C->leaf[i] == e) return bits >> i & 1;
  return false;
}

/* The kinds of v in [0, n) along one axis (on): the truths of that axis's leaves and, in
 * bit 63, whether v + d lies in [0, lim).  Distinct ones into kinds; false past 64 kinds. */
static bool axis_kinds(const Cond *C, int on, int64_t n, int64_t d, int64_t lim, uint64_t *kinds, int *nk) {
  *nk = 0;
  for (int64_t v = 0; v < n; v++) {
    uint64_t b = (uint64_t)(v + d >= 0 && v + d < lim) << 63;
    for (int i = 0; i < C->n; i++)
      if (C->on[i] == on && leaf_at(C, i, v)) b |= 1ull << i;
    int k = 0;
    while (k < *nk && kinds[k] != b) k++;
    if (k == *nk) {
      if (*nk == 64) return false;
      kinds[(*nk)++] = b;
    }
  }
  return true;
}

/* Is the condition e true exactly where the load is inside X over the padded plane? */
static bool pads_exactly(const KExpr *e, const int *axes, const EvalSizes *sz, const Pad *P) {
  Cond C = { .n = 0 };
  if (!cond_leaves(e, axes, sz, &C)) return false;
  uint64_t ky[64], kx[64], fixed = 0;
  int ny, nx, R = P->rank;
  for (int i = 0; i < C.n; i++)
    if (C.on[i] == 2 && leaf_at(&C, i, 0)) fixed |= 1ull << i;
  if (!axis_kinds(&C, 0, P->pe[R - 2], P->d[0], P->h, ky, &ny) || !axis_kinds(&C, 1, P->pe[R - 1], P->d[1], P->w, kx, &nx))
    return false;
  uint64_t leaves = C.n == 64 ? ~0ull : (1ull << C.n) - 1;
  for (int a = 0; a < ny; a++)
    for (int b = 0; b < nx; b++) {
      bool in = ky[a] >> 63 && kx[b] >> 63;
      if (cond_eval(e, &C, ((ky[a] | kx[b]) & leaves) | fixed) != in) return false;
    }
  return true;
}

/* Is kernel k of cp the zero padding (above) of a tensor X that only kernel k + 1, a windowed
 * contraction (grouped, or dense for cpu_conv_gemm.c), reads, with these sizes?  Then P
 * describes it. */
static bool pad_fusable(const CpuProgram *cp, int k, void **bufs, const int64_t *ext, const int64_t *strides,
                        const int64_t *shape, const EvalSizes *sz, Pad *P) {
  const Program *p = cp->p;
  if (k + 1 >= cp->nk || p->naxes > 64) return false;   /* axmask: one bit an axis */
  const CKernel *ck = &cp->k[k], *cv = &cp->k[k + 1];
  if (ck->gemm || ck->win || ck->kn->nstages != 1 || !cv->win) return false;
  const Stage *st = &ck->kn->stages[0];
  const KExpr *e = st->expr;
  int slot = st->out, R = st->naxes;
  if (p->slots[slot].kind != SLOT_TEMP || cv->w.b->slot != slot || cv->w.a->slot == slot || R < 2 ||
      R > DYN_MAX_RANK || p->slots[slot].type.rank != R)
    return false;
  if (e->kind != KX_SELECT || e->a[2]->kind != KX_CONST || e->a[2]->f != 0.0 || e->a[2]->i != 0 ||
      e->a[1]->kind != KX_LOAD || e->a[1]->n != R || e->a[1]->ty != e->ty || kexpr_can_fail(e))
    return false;
  const KExpr *L = e->a[1];
  if (L->slot == slot || p->slots[L->slot].type.rank != R) return false;
  for (int j = 0; j < cp->nk; j++) {      /* nothing else reads the padded tensor */
    if (j == k) continue;
    bool mark[p->nslots];
    memset(mark, 0, sizeof mark);
    for (int s2 = 0; s2 < cp->k[j].kn->nstages; s2++)
      if (j != k + 1 || s2 > 0) kexpr_mark_loads(cp->k[j].kn->stages[s2].expr, mark);
    if (j == k + 1) {
      const KExpr *r = cv->kn->stages[0].expr;
      if (cv->kn->nstages != 1 || r->kind != KX_REDUCE) return false;
      kexpr_mark_loads(cv->w.a, mark);
    }
    if (mark[slot]) return false;
  }
  /* the padded tensor written row-major; subscript d of X is axis d plus a shift, none
   * before the plane's two axes */
  int64_t ax[256] = { 0 }, want = 1;
  const int64_t *sp = strides + slot * DYN_MAX_RANK;
  for (int d = R - 1; d >= 0; d--) {
    P->pe[d] = ext[st->axes[d]];
    P->ps[d] = sp[d];
    if (P->pe[d] != shape[slot * DYN_MAX_RANK + d] || (P->pe[d] > 1 && sp[d] != want)) return false;
    want *= P->pe[d];
    if (P->pe[d] == 0) return false;
  }
  for (int d = 0; d < R; d++) {
    const KExpr *a = L->a[d];
    if (!affine(a) || (a->axmask & ~(1ull << (st->axes[d] % 64)))) return false;
    int64_t v0 = cpu_affine_at(a, ax, sz);
    ax[st->axes[d]] = 1;
    int64_t v1 = cpu_affine_at(a, ax, sz);
    ax[st->axes[d]] = 0;
    if (v1 - v0 != 1 || (d < R - 2 && (v0 != 0 || shape[L->slot * DYN_MAX_RANK + d] != P->pe[d]))) return false;
    if (d >= R - 2) P->d[d - (R - 2)] = v0;
    P->xs[d] = strides[L->slot * DYN_MAX_RANK + d];
  }
  P->h = shape[L->slot * DYN_MAX_RANK + R - 2], P->w = shape[L->slot * DYN_MAX_RANK + R - 1];
  P->plane = P->pe[R - 2] * P->pe[R - 1];
  if (P->plane * (int64_t)elem_size(e->ty) > ((int64_t)16 << 20)) return false;
  P->rank = R;
  if (!pads_exactly(e->a[0], st->axes + R - 2, sz, P)) return false;
  P->x = bufs ? bufs[L->slot] : NULL;
  return true;
}

/* Task t: planes [t * chunk, (t + 1) * chunk), each with its group's weights gathered
 * first (as f64 or f32; few taps in place, more on the heap once a task).  Several planes a
 * task: one a task, the claims of 65536 planes of 7 x 7 cost more than their taps. */
static void grp_task(void *arg, int64_t t) {
  GrpJob *J = arg;
  const Grp *G = J->G;
  if (atomic_load(&J->failed) || (J->stop && *J->stop)) return;
  int64_t es = J->es;
  double wbuf[64], run[FLAT_MAX + 8];
  void *w = wbuf, *heap = NULL;
  if (G->ktot * es > (int64_t)sizeof wbuf && !(w = heap = malloc((size_t)(G->ktot * es)))) {
    atomic_store(&J->failed, 1);
    return;
  }
  const Pad *P = J->pad;
  char *plane = NULL;                    /* a padded plane, and a zeroed margin the vector runs read */
  if (P && !(plane = calloc((size_t)(P->plane + PAD_MARGIN), (size_t)es))) {
    free(heap);
    atomic_store(&J->failed, 1);
    return;
  }
  int64_t t1 = (t + 1) * J->chunk < J->ntask ? (t + 1) * J->chunk : J->ntask;
  for (int64_t pl = t * J->chunk; pl < t1; pl++) {
    const char *a = J->a + (size_t)G->aoff[pl % G->gtot] * (size_t)es;
    for (int64_t k = 0; k < G->ktot; k++) {
      if (es == 4) ((float *)w)[k] = ((const float *)a)[G->akoff[k]];
      else ((double *)w)[k] = ((const double *)a)[G->akoff[k]];
    }
    if (P) {
      int64_t at = pad_plane(P, G->boff[pl], plane, (int)es);
      grp_plane(J, pl, w, run, plane, at, 0, P->plane + PAD_MARGIN - 1);
    } else {
      grp_plane(J, pl, w, run, J->b, G->boff[pl], G->lo, G->hi);
    }
  }
  free(plane);
  free(heap);
}

/* An affine index expression (a window's subscript) at the axis values ax (cpu_int.h). */
int64_t cpu_affine_at(const KExpr *e, const int64_t *ax, const EvalSizes *sz) {
  switch (e->kind) {
  case KX_AXIS: return ax[e->axis];
  case KX_CONST: return e->i;
  case KX_SIZE: {
    int64_t v = 0;
    const char *why;
    return poly_eval(e->size, eval_size_lookup, (void *)sz, &v, &why) ? v : 0;
  }
  case KX_BIN: {
    int64_t a = cpu_affine_at(e->a[0], ax, sz), b = cpu_affine_at(e->a[1], ax, sz);
    return e->op == OP_ADD ? a + b : e->op == OP_SUB ? a - b : a * b;
  }
  default: return 0;
  }
}

/* The offset of a load at axis values ax, in elements, by its slot's strides. */
static int64_t load_offset(const KExpr *L, const int64_t *ax, const int64_t *strides, const EvalSizes *sz) {
  int64_t o = 0;
  for (int d = 0; d < L->n; d++) o += strides[L->slot * DYN_MAX_RANK + d] * cpu_affine_at(L->a[d], ax, sz);
  return o;
}

/* The flat index of axes ax[0..n) (extents ext) at position i, written into vals. */
static void unflatten(int64_t i, const int *axes, const int64_t *ext, int n, int64_t *vals) {
  for (int d = n - 1; d >= 0; d--) {
    int64_t e = ext[axes[d]];
    vals[axes[d]] = e ? i % e : 0;
    i = e ? i / e : 0;
  }
}

static int64_t product(const int *axes, int n, const int64_t *ext) {
  int64_t v = 1;
  for (int i = 0; i < n; i++) v *= ext[axes[i]];
  return v;
}

/* The planes' counts, false when Y is not laid out row-major over its axes (the loop kernel
 * then runs). */
static bool conv_shape(const Program *p, const CKernel *ck, const int64_t *ext, const int64_t *strides,
                    int64_t *ptot, int64_t *gtot, int64_t *qtot, int64_t *ktot) {
  const WinContraction *w = &ck->w;
  const Stage *st = &ck->kn->stages[0];
  const KExpr *r = st->expr;
  *ptot = product(w->p, w->np, ext), *gtot = product(w->g, w->ng, ext);
  *qtot = product(w->q, w->nq, ext), *ktot = product(r->raxes, r->nraxes, ext);
  /* Y written row-major over its axes (P, G, Q), as the tasks lay out their planes */
  const int64_t *s_c = strides + st->out * DYN_MAX_RANK;
  int64_t want = 1;
  for (int d = st->naxes - 1; d >= 0; d--) {
    if (ext[st->axes[d]] != 1 && s_c[d] != want) return false;
    want *= ext[st->axes[d]];
  }
  (void)p;
  return true;
}

static int conv_run(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                    const int64_t *strides, const EvalSizes *sz, const Pad *pad, volatile int *interrupt, char *err,
                    size_t errlen) {
  const Program *p = cp->p;
  const WinContraction *w = &ck->w;
  const KExpr *r = ck->kn->stages[0].expr;
  Grp G = {0};
  if (!conv_shape(p, ck, ext, strides, &G.ptot, &G.gtot, &G.qtot, &G.ktot)) return 0;
  int es = (int)elem_size(r->ty);
  if (G.ptot == 0 || G.gtot == 0 || G.qtot == 0) return 1;
  if (G.ktot == 0) {
    memset(bufs[ck->g_c], 0, (size_t)(G.ptot * G.gtot * G.qtot) * (size_t)es);
    return 1;
  }
  if (p->naxes > 256) return 0;
  int64_t ax[256] = {0};
  G.qlast = ext[w->q[w->nq - 1]];
  G.qrows = G.qtot / G.qlast;
  int64_t b0 = load_offset(w->b, ax, strides, sz);
  ax[w->q[w->nq - 1]] = 1;
  G.qstep = load_offset(w->b, ax, strides, sz) - b0;
  ax[w->q[w->nq - 1]] = 0;
  if (w->nq == 2) {
    ax[w->q[0]] = 1;
    G.rowc = load_offset(w->b, ax, strides, sz) - b0;
    ax[w->q[0]] = 0;
  }
  G.band = conv_band(w->nq, G.qstep, G.rowc, G.qlast, G.qrows);
  int64_t ntask = G.ptot * G.gtot;
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)(ntask + G.qrows + 2 * G.ktot + G.gtot));
  if (!tab) {
    snprintf(err, errlen, "out of memory for the convolution's offsets");
    return -1;
  }
  G.boff = tab, G.roff = tab + ntask, G.koff = G.roff + G.qrows, G.akoff = G.koff + G.ktot, G.aoff = G.akoff + G.ktot;
  /* every offset is affine in the axes, so each family is found with the others at 0 */
  for (int64_t i = 0; i < G.gtot; i++) {           /* the G part, then each P part added */
    unflatten(i, w->g, ext, w->ng, ax);
    G.boff[i] = load_offset(w->b, ax, strides, sz);
  }
  memset(ax, 0, sizeof ax);
  for (int64_t i = G.ptot - 1; i >= 0; i--) {
    unflatten(i, w->p, ext, w->np, ax);
    int64_t o = load_offset(w->b, ax, strides, sz) - b0;
    for (int64_t j = 0; j < G.gtot; j++) G.boff[i * G.gtot + j] = G.boff[j] + o;
  }
  memset(ax, 0, sizeof ax);
  for (int64_t i = 0; i < G.qrows; i++) {
    unflatten(i, w->q, ext, w->nq - 1, ax);
    G.roff[i] = load_offset(w->b, ax, strides, sz) - b0;
  }
  memset(ax, 0, sizeof ax);
  for (int64_t i = 0; i < G.ktot; i++) {
    unflatten(i, r->raxes, ext, r->nraxes, ax);
    G.koff[i] = load_offset(w->b, ax, strides, sz) - b0;
    G.akoff[i] = load_offset(w->a, ax, strides, sz);
  }
  memset(ax, 0, sizeof ax);
  for (int64_t i = 0; i < G.gtot; i++) {
    unflatten(i, w->g, ext, w->ng, ax);
    G.aoff[i] = load_offset(w->a, ax, strides, sz);
  }
  G.kmin = G.kmax = G.koff[0];
  for (int64_t i = 1; i < G.ktot; i++) {
    if (G.koff[i] < G.kmin) G.kmin = G.koff[i];
    if (G.koff[i] > G.kmax) G.kmax = G.koff[i];
  }
  /* what the whole convolution reads: each axis's coefficient at its ends */
  memset(ax, 0, sizeof ax);
  G.lo = G.hi = b0;
  const int *fam[4] = { w->p, w->g, w->q, r->raxes };
  int nfam[4] = { w->np, w->ng, w->nq, r->nraxes };
  for (int f = 0; f < 4; f++)
    for (int i = 0; i < nfam[f]; i++) {
      ax[fam[f][i]] = 1;
      int64_t c = (load_offset(w->b, ax, strides, sz) - b0) * (ext[fam[f][i]] - 1);
      ax[fam[f][i]] = 0;
      if (c < 0) G.lo += c;
      else G.hi += c;
    }
  /* a few tasks a thread, for the shares to even out, and no more */
  int64_t want = 8 * (int64_t)pool_threads(be->pool), chunk = (ntask + want - 1) / want;
  GrpJob J = {&G, bufs[ck->g_a], bufs[ck->g_b], bufs[ck->g_c], es, chunk, ntask, pad, interrupt, 0};
  dyn_parallel_for(be->pool, (ntask + chunk - 1) / chunk, grp_task, &J);
  free(tab);
  return cpu_conv_ended(J.failed, "out of memory for the convolution's weights", interrupt, err, errlen);
}

int cpu_conv_ended(bool failed, const char *why, volatile int *interrupt, char *err, size_t errlen) {
  if (failed || (interrupt && *interrupt)) {
    snprintf(err, errlen, "%s", failed ? why : "interrupted");
    return -1;
  }
  return 1;
}

int cpu_conv_run(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                 const int64_t *strides, const EvalSizes *sz, volatile int *interrupt, char *err, size_t errlen) {
  return conv_run(be, cp, ck, bufs, ext, strides, sz, NULL, interrupt, err, errlen);
}

/* No padding at these sizes (conv2d's P = 0): the padded tensor is X itself, element for
 * element and stride for stride, so the convolution reads X in place as it would a tensor
 * it was never padded from (a 1 x 1 convolution at stride 1 is then GEMMs on the image:
 * 64 x 256 onto 56 x 56, 2 threads of a Zen 5 guest, 0.40 -> 0.27 ms, against the implicit
 * GEMM packing its panels through the padding's arithmetic). */
static bool pad_empty(const Pad *P) {
  int R = P->rank;
  if (P->d[0] || P->d[1] || P->pe[R - 2] != P->h || P->pe[R - 1] != P->w) return false;
  for (int d = 0; d < R; d++)
    if (P->pe[d] > 1 && P->xs[d] != P->ps[d]) return false;
  return true;
}

int cpu_conv_padded(CpuBackend *be, const CpuProgram *cp, int k, void **bufs, const int64_t *ext,
                    const int64_t *strides, const int64_t *shape, const EvalSizes *sz, volatile int *interrupt,
                    char *err, size_t errlen) {
  Pad P;
  if (!pad_fusable(cp, k, bufs, ext, strides, shape, sz, &P)) return 0;
  if (pad_empty(&P)) {                 /* the padding not run; the convolution reads X */
    bufs[cp->k[k + 1].w.b->slot] = (void *)P.x;
    return 1;
  }
  if (!cp->k[k + 1].w.ng) {            /* dense: the implicit GEMM packs X's windows itself */
    int r = cpu_conv_gemm_padded(be, cp, &cp->k[k + 1], bufs, ext, strides, sz, &P, interrupt, err, errlen);
    return r > 0 ? 2 : r;
  }
  int r = conv_run(be, cp, &cp->k[k + 1], bufs, ext, strides, sz, &P, interrupt, err, errlen);
  return r > 0 ? 2 : r;
}

/* The model: each plane's runs in cycles, converted to the lane-operations of the
 * streaming kernels' time (sched.c), against the bytes each plane reads (X's plane when
 * padded here, else the span its windows cover in B: a 7 x 7 output with 3 x 3 taps reads
 * a 9 x 9 plane) and Y written once: bound by whichever takes longer, in the level the data
 * fits, and the fork-join.  A run costs the larger of its loads and FMAs (a tap and a line of
 * outputs each; two loads at a step of 2) and its chains (run_f32's blocks of 8, 4, 2 and 1
 * lines, each a chain of one FMA a tap at the FMA's latency), and CONV_RUN_CYC beside them;
 * every output CONV_OUT_CYC for its copies (into a padded plane, out of a run).  Both were
 * fitted on one thread of an Emerald Rapids guest in model cycles, 3 x 3 taps: 7 x 7 and
 * 14 x 14 maps (one run a plane: 114 and 228 ns a plane) and 112 x 112 at stride 2 (a row
 * at a time: 8.1 us a plane); 112 x 112 at stride 1, in bands, came out 19% under.  (The
 * roofline at the peak FLOP rate predicted dwconv over 1 x 512 x 14 x 14 at 8% of its time,
 * and loads and FMAs alone at 10-20% of it.) */
#define CONV_RUN_CYC 230.0
#define CONV_OUT_CYC 1.7

/* A run's cycles: `lines` lines of outputs over nk taps at a step of `step`. */
static double run_cycles(const HwModel *h, int64_t lines, int64_t nk, int64_t step) {
  double work = (double)lines * (double)nk * (step == 2 ? 2 : 1), chain = 0;
  for (int64_t nl = 8, left = lines; nl >= 1; nl /= 2) {
    chain += (double)(left / nl) * (double)nk * (h->fma_latency > 0 ? h->fma_latency : 4);
    left %= nl;
  }
  return CONV_RUN_CYC + (work > chain ? work : chain);
}

static double conv_model(const CpuBackend *be, const Program *p, const CKernel *ck, const int64_t *ext,
                         const int64_t *strides, const EvalSizes *sz, int threads, const Pad *P, Buf *out) {
  int64_t ptot, gtot, qtot, ktot;
  if (!conv_shape(p, ck, ext, strides, &ptot, &gtot, &qtot, &ktot) || p->naxes > 256) return -1;
  const WinContraction *w = &ck->w;
  const KExpr *r = ck->kn->stages[0].expr;
  int es = (int)elem_size(r->ty);
  double planes = (double)ptot * (double)gtot, lanes = (double)(64 / es);
  int64_t ax[256] = {0};
  int64_t b0 = load_offset(w->b, ax, strides, sz);
  for (int i = 0; i < w->nq; i++) ax[w->q[i]] = ext[w->q[i]] ? ext[w->q[i]] - 1 : 0;
  for (int i = 0; i < r->nraxes; i++) ax[r->raxes[i]] = ext[r->raxes[i]] ? ext[r->raxes[i]] - 1 : 0;
  int64_t span = load_offset(w->b, ax, strides, sz) - b0 + 1;
  if (span < 1) span = 1;
  memset(ax, 0, sizeof ax);
  /* the runs a plane computes, as grp_plane does */
  int64_t qlast = ext[w->q[w->nq - 1]], qrows = qlast ? qtot / qlast : 0, rowc = 0, qstep = 0;
  ax[w->q[w->nq - 1]] = 1;
  qstep = load_offset(w->b, ax, strides, sz) - b0;
  ax[w->q[w->nq - 1]] = 0;
  if (w->nq == 2) {
    ax[w->q[0]] = 1;
    rowc = load_offset(w->b, ax, strides, sz) - b0;
  }
  int64_t band = conv_band(w->nq, qstep, rowc, qlast, qrows), full = qrows / band, last = qrows % band;
  int64_t step = band > 1 ? 1 : qstep, L = (int64_t)lanes;
  int64_t lfull = (rowc * (band - 1) + qlast + L - 1) / L, llast = last ? (rowc * (last - 1) + qlast + L - 1) / L : 0;
  double vecs = planes * ((double)full * (double)lfull + (double)llast);
  double cyc = (double)full * run_cycles(&be->hw, lfull, ktot, step) + (last ? run_cycles(&be->hw, llast, ktot, step) : 0) +
               CONV_OUT_CYC * (double)qtot;
  double lane_ops = planes * cyc * sched_lane_ops_rate(&be->hw, 1, es) / ((be->hw.ghz > 0 ? be->hw.ghz : 1) * 1e9);
  double read = planes * (double)(P ? P->h * P->w : span) * es;
  SchedWork W = {.ops = lane_ops,
                 .elem_bytes = es, .read = read, .written = planes * (double)qtot * es,
                 .tasks = (int64_t)planes < 8 * (int64_t)threads ? (int64_t)planes : 8 * (int64_t)threads};
  SchedTerms T;
  double t = sched_stream_time(&be->hw, threads, &W, &T);
  if (out)
    buf_printf(out, "  grouped (depthwise): %lld planes of %lld outputs from %lld taps each, computed\n"
               "      directly %s%s; %.0f vector loads and FMAs, %.0f bytes read, %.0f written, from %s:\n"
               "      compute %.3f ms, memory %.3f ms: predicted %.3f ms\n",
               (long long)(ptot * gtot), (long long)qtot, (long long)ktot, band >= qrows ? "in one run" : band > 1 ? "in bands of rows" : "a row at a time",
               P ? ", each padded as it is computed" : "", vecs * (double)ktot, W.read, W.written,
               be->hw.level[T.level].name, T.comp_s * 1e3, T.mem_s * 1e3, t * 1e3);
  return t;
}

double cpu_conv_predict(const CpuBackend *be, const Program *p, const CKernel *ck, const int64_t *ext,
                        const int64_t *strides, const EvalSizes *sz, int threads, Buf *out) {
  return conv_model(be, p, ck, ext, strides, sz, threads, NULL, out);
}

int cpu_conv_describe_padded(CpuBackend *be, const CpuProgram *cp, int k, const Extents *x, int threads, Buf *out,
                             double *total) {
  Pad P;
  if (!x || !x->ok || !pad_fusable(cp, k, NULL, x->ext, x->strides, x->shape, &x->sz, &P)) return 0;
  const CKernel *cv = &cp->k[k + 1];
  if (pad_empty(&P)) {
    buf_printf(out, "kernel %s\n  no padding at these sizes: not run; %s reads %s in place\n", cp->k[k].kn->name,
               cv->kn->name, cp->p->slots[cp->k[k].kn->stages[0].expr->a[1]->slot].name);
    return 1;
  }
  Buf d = {0};
  double t = cv->w.ng ? conv_model(be, cp->p, cv, x->ext, x->strides, &x->sz, threads, &P, &d)
                      : cpu_conv_gemm_padded_predict(be, cp->p, cv, x->ext, x->strides, &x->sz, &P, threads, &d);
  if (t >= 0) {
    buf_printf(out, "kernel %s (and %s, the padding it reads, fused)\n", cv->kn->name, cp->k[k].kn->name);
    buf_puts(out, d.s ? d.s : "");
  }
  buf_free(&d);
  if (t < 0) return 0;
  *total += t;
  return 2;
}

#endif
