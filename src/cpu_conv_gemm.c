/* cpu_conv_gemm.c -- dense windowed contractions (conv2d, conv1d) as an implicit GEMM on the
 * contraction engine's micro-kernels: Y[p] = A . B[p], B's K x Q windows never gathered into
 * a matrix of their own.  A (the filters) is packed once a call and shared by every task;
 * each task packs its panels of B straight from the image into the micro-kernel's layout,
 * with the window arithmetic, and runs the tiles on them.  cpu_rt.c's run_window calls it;
 * cpu_sched.c prints its plan and prediction. */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"
#include "gemm_int.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The copies of B's runs into panels are plain C loops; built for the baseline, they would
 * move 16 bytes at a time, so where the compiler can, they get AVX2 and AVX-512 clones
 * chosen when the library loads (as cpu_conv.c's row kernels do). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#pragma GCC optimize("O3")
#define CG_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CG_CLONES
#endif

/* One call's plan: the engine's tile family, blocks and whether A is packed, as the GEMM
 * model chose them for the whole M x K x (P Q) product, and the tasks: each index of P in
 * `chunks` runs of whole panels of Q's columns, each of those in `parts` runs of M's rows
 * (more than one only where the images and their chunks are fewer than the threads: a
 * 1 x 1 convolution of one 7 x 7 map has a single panel of columns). */
typedef struct CgPlan {
  const Family *f;
  Plan pl;
  int64_t chunks, panels;              /* chunks per index of P; nr-wide panels of Q */
  int64_t parts, unit;                 /* runs of M's rows per chunk; their rows, a multiple of */
  int64_t tasks;
  double t;                            /* predicted seconds */
} CgPlan;

/* A run of columns of one panel that step evenly through B: columns [j, j + n) of the panel
 * read B at off, off + step, ... */
typedef struct Seg { int j, n; int64_t off, step, y, x; } Seg;

/* With nn's padding fused (cpu_conv.c's Pad), B is the padded tensor, never written: each
 * axis's coefficient in it taken apart into planes, rows and columns of the padded plane
 * (which no sum of them carries over, checked: cg_pad_split), so that a window's element is
 * found in X, or known to be a zero, from the axes' values without a division. */
typedef struct Split { int64_t pl, y, x; } Split;
typedef struct CgPad {
  const Pad *P;
  Split b0, ax[3][DYN_MAX_RANK];         /* B's offset at 0, and each axis of P, K, Q */
  Split *k;                              /* each row of K */
} CgPad;

typedef struct CgJob {
  const Win *W;
  const CgPlan *C;
  const GemmKernels *g;
  const char *a, *b;
  char *c;
  const char *apk;                     /* A packed (pl.pack_a), by k block and mc block */
  const int64_t *koff;                 /* B's offset of each row of K */
  const CgPad *pad;                    /* the padding fused, or NULL */
  int es;
  volatile int *stop;
  _Atomic int failed;
} CgJob;

/* The GEMM model's plan for the product as if B were gathered (M x K by K x P Q, unit
 * strides), on `threads`; false where its plan is not one of tiles (C of a few rows or
 * columns: the gathered path's engine has kernels for those). */
/* A window's taps: K's extent over that of the reduction axis with B's largest step (the
 * channels), 1 for a 1 x 1 convolution. */
static int64_t cg_taps(const Win *W) {
  int big = -1;
  for (int i = 0; i < W->n[1]; i++)
    if (W->ext[1][i] > 1 && (big < 0 || llabs(W->coef[1][i]) > llabs(W->coef[1][big]))) big = i;
  return big < 0 ? 1 : W->ktot / W->ext[1][big];
}

static bool cg_plan(GemmKernels *g, const Win *W, bool padded, int threads, CgPlan *C) {
  /* B already a matrix in place (a 1 x 1 convolution at stride 1): the engine's own plans,
   * which pack B as their first tiles read it, serve it as they are */
  if (g->wide || (W->direct && !padded) || W->mtot <= ROWS_MAX) return false;
  /* Windows of more than one tap (3 x 3, 7 x 7) take the gathered path: X's elements are
   * packed once a tap either way, and the gathered matrix packed by the engine's own packer
   * ran faster on the whole (tests/bench/compare-builds.sh on the conv suite, 3 rounds: this
   * path took 0.88-1.57x the gathered path's time on 3 x 3 to 7 x 7 layers, worst where
   * images are small and their last panel of columns mostly masked).  One tap a window
   * gains from packing X in place, nn's padded copy dropped: 0.47-0.54x on 1 x 1 layers. */
  if (cg_taps(W) > 1) return false;
  GemmArgs x = W->x;
  x.batch = 1;
  x.n = W->ptot * W->qtot;
  x.b_sk = x.n, x.b_sn = 1;
  x.c_sm = x.n, x.c_sn = 1;
  x.accumulate = false;
  Prob p;
  char err[64];
  if (!gemm_normalise(g, &x, &p, err, sizeof err) || p.swapped || p.ctmp) return false;
  gemm_plan_choose(g, &p, threads, &C->pl, NULL, NULL, 0);
  if (C->pl.rows || C->pl.dot) return false;
  C->f = &g->fam[C->pl.fam];
  int64_t nr = C->f->nr, es = g->esize;
  C->panels = cdiv(W->qtot, nr);
  /* chunks of B's columns whose packed panels (kc rows) fit half of L2 beside A's block,
   * and enough of them for the tasks to share out evenly */
  int64_t fit = (int64_t)(hw_cache_bytes(&g->hw, 1) / 2 / (double)(C->pl.kc * nr * es));
  if (fit < 1) fit = 1;
  int64_t t = threads > 1 ? threads : 1;
  C->chunks = cdiv(C->panels, fit);
  while (C->chunks < C->panels && (W->ptot * C->chunks) % t && W->ptot * C->chunks < 4 * t) C->chunks++;
  /* Too few tasks for the threads: M's rows split as well, in whole tiles (whole blocks of
   * mc rows where A is packed, the layout cg_pack_a writes).  Each part packs the same
   * panels of B again, K x nr elements beside its mc x K x nr FLOPs. */
  C->unit = C->pl.pack_a ? C->pl.mc : C->f->mr;
  C->parts = 1;
  int64_t units = cdiv(W->mtot, C->unit);
  while (W->ptot * C->chunks * C->parts < t && C->parts < units) C->parts++;
  C->tasks = W->ptot * C->chunks * C->parts;
  /* the tasks in waves over the threads: the plan's time for the whole product, by the
   * share of the busiest thread */
  double waves = (double)sched_waves(C->tasks, t);
  C->t = C->pl.t * waves * (double)t / (double)C->tasks;
  if (C->t < C->pl.t) C->t = C->pl.t;
  return true;
}

/* The segments of the panel of columns [q0, q0 + w) of Q: runs within one row of Q's last
 * axis, B's offsets (less b0 and the index of P) stepping by that axis's coefficient; with
 * the padding fused (D), also their row and column in the padded plane, the step then
 * along its columns. */
static int cg_segs(const Win *W, const CgPad *D, int64_t q0, int64_t w, Seg *s) {
  int nq = W->n[2], ns = 0;
  int64_t qlast = W->qlast, step = W->coef[2][nq - 1];
  for (int64_t j = 0; j < w;) {
    int64_t q = q0 + j, r = q / qlast, col = q % qlast, off = col * step, y = 0, x = 0;
    if (D) y = col * D->ax[2][nq - 1].y, x = col * D->ax[2][nq - 1].x;
    for (int i = nq - 2; i >= 0; i--) {
      int64_t v = r % W->ext[2][i];
      off += v * W->coef[2][i], r /= W->ext[2][i];
      if (D) y += v * D->ax[2][i].y, x += v * D->ax[2][i].x;
    }
    int64_t n = qlast - col < w - j ? qlast - col : w - j;
    s[ns++] = (Seg){ (int)j, (int)n, off, D ? D->ax[2][nq - 1].x : step, y, x };
    j += n;
  }
  return ns;
}

/* c taken apart into planes, rows and columns of the padded plane; false when negative. */
static bool split(const Pad *P, int64_t c, Split *s) {
  int64_t wp = P->pe[P->rank - 1];
  if (c < 0) return false;
  s->pl = c / P->plane, s->y = c % P->plane / wp, s->x = c % wp;
  return true;
}

/* Each axis's coefficient taken apart (D), and whether their sums stay inside the padded
 * plane: the largest row and column any window reaches, from b0 and every axis at its
 * largest index, under the plane's rows and columns.  Q's last axis must step along a
 * row. */
static bool cg_pad_split(const Win *W, const Pad *P, CgPad *D) {
  D->P = P;
  if (!split(P, W->b0, &D->b0)) return false;
  int64_t ymax = D->b0.y, xmax = D->b0.x;
  for (int g = 0; g < 3; g++)
    for (int i = 0; i < W->n[g]; i++) {
      if (!split(P, W->coef[g][i], &D->ax[g][i])) return false;
      ymax += (W->ext[g][i] - 1) * D->ax[g][i].y, xmax += (W->ext[g][i] - 1) * D->ax[g][i].x;
    }
  const Split *last = &D->ax[2][W->n[2] - 1];
  return ymax < P->pe[P->rank - 2] && xmax < P->pe[P->rank - 1] && last->pl == 0 && last->y == 0 &&
         (last->x > 0 || W->qlast == 1);
}

/* Pack rows [0, kc) of a panel of nr columns from B: out[k * nr + j], zeros past the
 * segments' columns. */
#define CG_PACK(NAME, T)                                                                              \
  CG_CLONES static void NAME(T *restrict out, const T *restrict b, const int64_t *restrict koff,     \
                             int64_t kc, const Seg *segs, int ns, int nr, int w) {                    \
    for (int64_t k = 0; k < kc; k++) {                                                               \
      T *restrict d = out + k * nr;                                                                  \
      const T *restrict s0 = b + koff[k];                                                           \
      for (int i = 0; i < ns; i++) {                                                                \
        const T *restrict s = s0 + segs[i].off;                                                     \
        T *restrict dd = d + segs[i].j;                                                              \
        int n = segs[i].n;                                                                           \
        if (segs[i].step == 1)                                                                       \
          for (int j = 0; j < n; j++) dd[j] = s[j];                                                  \
        else if (segs[i].step == 2)                                                                  \
          for (int j = 0; j < n; j++) dd[j] = s[2 * j];                                              \
        else                                                                                         \
          for (int j = 0; j < n; j++) dd[j] = s[j * segs[i].step];                                   \
      }                                                                                              \
      for (int j = w; j < nr; j++) d[j] = 0;                                                         \
    }                                                                                                \
  }
CG_PACK(pack_f32, float)
CG_PACK(pack_f64, double)

/* The same from X through the fused padding: row k of the panel reads X's plane xpl[k] at
 * row y0 + ky[k] + the segment's, column x0 + kx[k] + the segment's (in X's coordinates:
 * the shift added), stepping st columns; zeros where that falls outside X. */
#define CG_PACK_PAD(NAME, T)                                                                          \
  CG_CLONES static void NAME(T *restrict out, const T *restrict x, const int64_t *restrict xpl,      \
                             const Split *restrict ks, int64_t kc, const Seg *segs, int ns, int nr,    \
                             int w, int64_t y0, int64_t x0, const Pad *P) {                           \
    int64_t sy = P->xs[P->rank - 2], sx = P->xs[P->rank - 1];                                         \
    for (int64_t k = 0; k < kc; k++) {                                                               \
      T *restrict d = out + k * nr;                                                                  \
      for (int i = 0; i < ns; i++) {                                                                \
        T *restrict dd = d + segs[i].j;                                                              \
        int n = segs[i].n;                                                                           \
        int64_t y = y0 + ks[k].y + segs[i].y, xs = x0 + ks[k].x + segs[i].x, st = segs[i].step;      \
        int64_t lo = 0, hi = 0;                                                                      \
        if (y >= 0 && y < P->h && st > 0) {                                                         \
          lo = xs >= 0 ? 0 : (-xs + st - 1) / st;                                                    \
          hi = xs < P->w ? (P->w - 1 - xs) / st + 1 : 0;                                             \
          if (hi > n) hi = n;                                                                        \
          if (lo > hi) lo = hi;                                                                      \
        } else if (y >= 0 && y < P->h && xs >= 0 && xs < P->w)                                       \
          hi = n;                                                                                    \
        for (int j = 0; j < lo; j++) dd[j] = 0;                                                      \
        const T *restrict s = x + xpl[k] + y * sy + xs * sx;                                         \
        int64_t ss = st * sx;                                                                        \
        if (ss == 1)                                                                                 \
          for (int64_t j = lo; j < hi; j++) dd[j] = s[j];                                            \
        else                                                                                         \
          for (int64_t j = lo; j < hi; j++) dd[j] = s[j * ss];                                       \
        for (int64_t j = hi; j < n; j++) dd[j] = 0;                                                  \
      }                                                                                              \
      for (int j = w; j < nr; j++) d[j] = 0;                                                         \
    }                                                                                                \
  }
CG_PACK_PAD(pack_pad_f32, float)
CG_PACK_PAD(pack_pad_f64, double)

/* A packed: block (k block pc, rows from ic) at pc * M + ic * kcur elements, its pieces as
 * gemm_pack_a lays them out.  Task t packs k block t. */
static void cg_pack_a(void *arg, int64_t t) {
  CgJob *J = arg;
  const Win *W = J->W;
  const Plan *pl = &J->C->pl;
  int64_t pc = t * pl->kc, kcur = imin(pl->kc, W->ktot - pc), es = J->es;
  for (int64_t ic = 0; ic < W->mtot; ic += pl->mc) {
    int64_t mcur = imin(pl->mc, W->mtot - ic);
    gemm_pack_a(J->g, J->C->f, J->a + (size_t)(ic * W->x.a_sm + pc * W->x.a_sk) * (size_t)es, W->x.a_sm,
                W->x.a_sk, mcur, kcur, 0, (char *)J->apk + (size_t)(pc * W->mtot + ic * kcur) * (size_t)es);
  }
}

/* Task t: the columns of one chunk of one index of P, every k block's panels packed from
 * the image into this thread's scratch, then the tiles over its part of M's rows. */
static void cg_task(void *arg, int64_t t) {
  CgJob *J = arg;
  const Win *W = J->W;
  const CgPlan *C = J->C;
  const Plan *pl = &C->pl;
  const Family *f = C->f;
  const GemmKernels *g = J->g;
  if (atomic_load(&J->failed) || (J->stop && *J->stop)) return;
  int64_t per = C->chunks * C->parts, p = t / per, ch = t % per / C->parts, part = t % C->parts;
  int64_t es = J->es, nr = f->nr, units = cdiv(W->mtot, C->unit);
  int64_t j0 = ch * C->panels / C->chunks, j1 = (ch + 1) * C->panels / C->chunks;
  int64_t q0 = j0 * nr, q1 = imin(W->qtot, j1 * nr);
  int64_t m0 = part * units / C->parts * C->unit, m1 = imin(W->mtot, (part + 1) * units / C->parts * C->unit);
  if (q0 >= q1 || m0 >= m1) return;
  char *pk = cpu_scratch_get((size_t)(pl->kc * (j1 - j0) * nr * es) + (J->pad ? sizeof(int64_t) * (size_t)W->ktot : 0));
  if (!pk) {
    atomic_store(&J->failed, 1);
    return;
  }
  int64_t boff = W->b0, pi = p;
  for (int i = W->n[0] - 1; i >= 0; i--) boff += (pi % W->ext[0][i]) * W->coef[0][i], pi /= W->ext[0][i];
  const char *b = J->b ? J->b + (size_t)boff * (size_t)es : NULL;   /* none with the padding fused */
  char *cimg = J->c + (size_t)(p * W->mtot * W->qtot) * (size_t)es;
  Seg segs[MAX_V * 64 + 1];
  const CgPad *D = J->pad;
  Split bs = { 0, 0, 0 };                /* with the padding: this image's offset, apart */
  int64_t *xpl = NULL;                   /* ... and X's offset of each row's plane */
  if (D) {
    bs = D->b0;
    pi = p;
    for (int i = W->n[0] - 1; i >= 0; i--) {
      int64_t v = pi % W->ext[0][i];
      pi /= W->ext[0][i];
      bs.pl += v * D->ax[0][i].pl, bs.y += v * D->ax[0][i].y, bs.x += v * D->ax[0][i].x;
    }
    xpl = (int64_t *)(pk + (size_t)(pl->kc * (j1 - j0) * nr * es));
    const Pad *P = D->P;
    for (int64_t k = 0; k < W->ktot; k++) {
      int64_t v = bs.pl + D->k[k].pl, o = 0;
      for (int d = P->rank - 3; d >= 0; d--) o += v % P->pe[d] * P->xs[d], v /= P->pe[d];
      xpl[k] = o;
    }
  }
  for (int64_t pc = 0; pc < W->ktot; pc += pl->kc) {
    if (J->stop && *J->stop) return;
    int64_t kcur = imin(pl->kc, W->ktot - pc);
    for (int64_t q = q0; q < q1; q += nr) {
      int w = (int)imin(nr, q1 - q), ns = cg_segs(W, D, q, w, segs);
      char *out = pk + (size_t)((q - q0) * kcur) * (size_t)es;
      if (D) {
        const Pad *P = D->P;
        int64_t y0 = bs.y + P->d[0], x0 = bs.x + P->d[1];
        if (es == 4)
          pack_pad_f32((float *)out, (const float *)P->x, xpl + pc, D->k + pc, kcur, segs, ns, (int)nr, w, y0, x0, P);
        else
          pack_pad_f64((double *)out, (const double *)P->x, xpl + pc, D->k + pc, kcur, segs, ns, (int)nr, w, y0, x0, P);
      } else if (es == 4) {
        pack_f32((float *)out, (const float *)b, J->koff + pc, kcur, segs, ns, (int)nr, w);
      } else {
        pack_f64((double *)out, (const double *)b, J->koff + pc, kcur, segs, ns, (int)nr, w);
      }
    }
    int beta = pc > 0;
    /* the C tiles fetched for writing first where C's rows alias in L1 or outgrow L2, as
     * the engine's blocks do (gemm_run.c's prefetch_c) */
    if ((W->qtot * es) % SET_SPAN == 0 || (double)((m1 - m0) * (q1 - q0) * es) > hw_cache_bytes(&g->hw, 1))
      beta |= UK_PREFETCH_C;
    for (int64_t ic = m0; ic < m1; ic += pl->mc) {
      int64_t mcur = imin(pl->mc, m1 - ic);
      const char *ablk = pl->pack_a ? J->apk + (size_t)(pc * W->mtot + ic * kcur) * (size_t)es
                                    : J->a + (size_t)(ic * W->x.a_sm + pc * W->x.a_sk) * (size_t)es;
      for (int64_t q = q0; q < q1; q += nr) {
        int64_t w = imin(nr, q1 - q);
        const char *bp = pk + (size_t)((q - q0) * kcur) * (size_t)es;
        char *cb = cimg + (size_t)(ic * W->qtot + q) * (size_t)es;
        Pieces it;
        pieces_init(&it, f, mcur, 0);
        int64_t r0;
        int h, hs;
        size_t aoff = 0;
        while (pieces_next(&it, &r0, &h, &hs)) {
          const char *ap;
          int64_t a_rs, a_cs;
          if (pl->pack_a) {
            ap = ablk + aoff * (size_t)es, a_rs = 1, a_cs = hs;
            aoff += (size_t)hs * (size_t)kcur;
          } else {
            ap = ablk + (size_t)(r0 * W->x.a_sm) * (size_t)es, a_rs = W->x.a_sm, a_cs = W->x.a_sk;
          }
          tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, nr, cb + (size_t)(r0 * W->qtot) * (size_t)es, W->qtot,
                    beta, NULL);
        }
      }
    }
  }
}

/* Run W's product, with the padding D fused or not. */
static int cg_run(CpuBackend *be, GemmKernels *g, const Win *W, CgPad *D, const void *a, const void *b, void *c,
                  volatile int *interrupt, char *err, size_t errlen) {
  CgPlan C;
  int threads = pool_threads(be->pool);
  if (!cg_plan(g, W, D != NULL, threads, &C) || C.f->nr > MAX_V * 64) return 0;
  int es = g->esize;
  int64_t *koff = malloc((sizeof(int64_t) + (D ? sizeof(Split) : 0)) * (size_t)W->ktot);
  if (!koff) return 0;
  if (D) D->k = (Split *)(koff + W->ktot);
  for (int64_t k = 0; k < W->ktot; k++) {         /* rows of K in A's order (cpu_win_shape) */
    int64_t o = 0, ki = k;
    Split s = { 0, 0, 0 };
    for (int i = W->n[1] - 1; i >= 0; i--) {
      int64_t v = ki % W->ext[1][i];
      ki /= W->ext[1][i];
      o += v * W->coef[1][i];
      if (D) s.pl += v * D->ax[1][i].pl, s.y += v * D->ax[1][i].y, s.x += v * D->ax[1][i].x;
    }
    koff[k] = o;
    if (D) D->k[k] = s;
  }
  Tensor *apk = NULL;
  if (C.pl.pack_a) {
    int64_t n = W->mtot * W->ktot;
    apk = tensor_new_uninit(es == 4 ? DYN_F32 : DYN_F64, 1, &n, err, errlen);
    if (!apk) {
      free(koff);
      return -1;
    }
  }
  CgJob J = { W, &C, g, a, b, c, apk ? tensor_data(apk) : NULL, koff, D, es, interrupt, 0 };
  if (apk) dyn_parallel_for(be->pool, cdiv(W->ktot, C.pl.kc), cg_pack_a, &J);
  dyn_parallel_for(be->pool, C.tasks, cg_task, &J);
  tensor_release(apk);
  free(koff);
  return cpu_conv_ended(J.failed, "out of memory for the convolution's packed panels", interrupt, err, errlen);
}

int cpu_conv_gemm_run(CpuBackend *be, GemmKernels *g, const Win *W, const void *a, const void *b, void *c,
                      volatile int *interrupt, char *err, size_t errlen) {
  return cg_run(be, g, W, NULL, a, b, c, interrupt, err, errlen);
}

/* The shape, the engine and the split of the padded tensor's coefficients for ck reading
 * the padding P; false when the fused path cannot take them. */
static bool cg_padded_shape(CpuBackend *be, const Program *p, const CKernel *ck, const int64_t *ext,
                            const int64_t *strides, const EvalSizes *sz, const Pad *P, int threads, Win *W,
                            CgPad *D, GemmKernels **g) {
  if (!cpu_win_shape(p, ck, ext, strides, sz, threads, hw_cache_bytes(&be->hw, 1), W) || W->ptot == 0 ||
      W->mtot == 0 || W->qtot == 0 || W->ktot == 0 || !cg_pad_split(W, P, D))
    return false;
  *g = cpu_gemm_for(be, ck->kn->stages[0].expr->ty, NULL, 0);
  return *g != NULL;
}

int cpu_conv_gemm_padded(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                         const int64_t *strides, const EvalSizes *sz, const Pad *P, volatile int *interrupt,
                         char *err, size_t errlen) {
  Win W;
  CgPad D;
  GemmKernels *g;
  if (!cg_padded_shape(be, cp->p, ck, ext, strides, sz, P, pool_threads(be->pool), &W, &D, &g)) return 0;
  return cg_run(be, g, &W, &D, bufs[ck->g_a], NULL, bufs[ck->g_c], interrupt, err, errlen);
}

static double cg_predict(GemmKernels *g, const Win *W, bool padded, int threads, Buf *out) {
  CgPlan C;
  if (!cg_plan(g, W, padded, threads, &C)) return -1;
  char parts[64];
  snprintf(parts, sizeof parts, ", each in %lld runs of rows", (long long)C.parts);
  if (out)
    buf_printf(out, "  %s implicit GEMM of M %lld, K %lld, N %lld for each of %lld: B's panels "
               "packed from the windows%s as they are read (no gathered matrix), A %s; tiles %dx%d, "
               "kc %lld, mc %lld; %lld tasks (%lld chunks of columns an image%s): predicted %.3f ms\n",
               padded ? "an" : "run instead as an", (long long)W->mtot, (long long)W->ktot, (long long)W->qtot,
               (long long)W->ptot, padded ? " of X, the padding's zeros filled in" : "", C.pl.pack_a ? "packed once for all tasks" : "read in place", C.f->mr, C.f->nr, (long long)C.pl.kc,
               (long long)C.pl.mc, (long long)C.tasks, (long long)C.chunks, C.parts > 1 ? parts : "", C.t * 1e3);
  return C.t;
}

double cpu_conv_gemm_predict(GemmKernels *g, const Win *W, int threads, Buf *out) {
  return cg_predict(g, W, false, threads, out);
}

double cpu_conv_gemm_padded_predict(CpuBackend *be, const Program *p, const CKernel *ck, const int64_t *ext,
                                    const int64_t *strides, const EvalSizes *sz, const Pad *P, int threads, Buf *out) {
  Win W;
  CgPad D;
  GemmKernels *g;
  if (!cg_padded_shape(be, p, ck, ext, strides, sz, P, threads, &W, &D, &g)) return -1;
  return cg_predict(g, &W, true, threads, out);
}

#endif
