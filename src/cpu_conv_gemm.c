/* cpu_conv_gemm.c -- dense windowed contractions (conv2d, conv1d) as an implicit GEMM on the
 * contraction engine's micro-kernels: Y[p] = A . B[p], B's K x Q windows never gathered into
 * a matrix of their own.  A (the filters) is packed once a call and shared by every task
 * (or, where no two tasks read the same filters, by each task a block at a time);
 * each task packs its panels of B straight from the image into the micro-kernel's layout,
 * with the window arithmetic, and runs the tiles on them; on small maps the panels run across
 * the images, the tiles writing into scratch that is copied out to them.  cpu_rt.c's
 * run_window calls it; cpu_sched.c prints its plan and prediction. */
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
  bool span;                           /* panels run across images (below) */
  int64_t tasks;
  double t;                            /* predicted seconds */
} CgPlan;

/* A run of columns of one panel that step evenly through B: columns [j, j + n) of the panel
 * read B at off, off + step, ... (off from B's start, its image's offset included); with the
 * padding fused, at row y and column x of X's plane (the shift and the image's included),
 * in the planes of xpl (its image's table of X's offset of each row's plane). */
typedef struct Seg { int j, n; int64_t off, step, y, x; const int64_t *xpl; bool in; } Seg;

/* With nn's padding fused (cpu_conv.c's Pad), B is the padded tensor, never written: each
 * axis's coefficient in it taken apart into planes, rows and columns of the padded plane
 * (which no sum of them carries over, checked: cg_pad_split), so that a window's element is
 * found in X, or known to be a zero, from the axes' values without a division. */
typedef struct Split { int64_t pl, y, x; } Split;
typedef struct CgPad {
  const Pad *P;
  bool inside;                           /* no padding at all: every window lies in X */
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
  bool apk_own;                        /* A packed by each task, a block at a time (cg_run) */
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
  /* Every panel here is a tile's full width, so the plan is one whose tiles compute every
   * column: with C's last columns apart (edge) they would run as a panel of their own,
   * mostly masked (1024 -> 2048 channels 1 x 1, stride 2, onto 7 x 7 on 2 threads of a Zen
   * 4 guest: 9x48 tiles, predicted 0.96 ms as 48 columns and one, ran 1.92 as two panels
   * of 48; 14x32 1.38). */
  gemm_plan_whole(g, &p, threads, &C->pl);
  if (C->pl.rows || C->pl.dot) return false;
  C->f = &g->fam[C->pl.fam];
  int64_t nr = C->f->nr, es = g->esize;
  /* Small maps: an image's last panel is mostly masked (a 7 x 7 map is 49 columns of a
   * 64-wide panel) and every image streams all of A again.  Panels then run across the
   * images, P Q columns in all, their tiles writing into a scratch C that each task copies
   * out to the images at its end; chosen where that saves at least one panel in sixteen. */
  int64_t all = W->ptot * W->qtot;
  C->span = W->ptot > 1 && W->ptot * cdiv(W->qtot, nr) * 15 > cdiv(all, nr) * 16;
  int64_t imgs = C->span ? 1 : W->ptot;
  C->panels = cdiv(C->span ? all : W->qtot, nr);
  /* chunks of B's columns whose packed panels (kc rows) fit half of L2 beside A's block,
   * and enough of them for the tasks to share out evenly */
  int64_t fit = (int64_t)(hw_cache_bytes(&g->hw, 1) / 2 / (double)(C->pl.kc * nr * es));
  if (fit < 1) fit = 1;
  int64_t t = threads > 1 ? threads : 1;
  /* At least the chunks that fit.  One run of panels (one image, or panels across the
   * images) is the product the GEMM model planned, so its M is split as the model's grid
   * splits it, and its columns into at least the grid's blocks of N: the grid weighs A
   * streamed again by each block of columns against B packed again by each block of rows,
   * which a count of tiles cannot (1024 -> 2048 channels 1 x 1 at stride 2 onto 7 x 7, 2
   * threads of a Zen 5 guest: the grid's 2 runs of rows, 0.72 ms; 2 chunks of columns, one
   * tile fewer on the busier thread but each streaming all of A's 8 MB, 0.91).  Several
   * images: M's rows may be split into parts as well (in whole tiles: whole blocks of mc
   * rows where A is packed, the layout cg_pack_a writes).  Then more chunks, and parts where
   * free, for the tasks to share out evenly: the split whose busiest thread has the fewest
   * tiles, waves of tasks times the largest task's panels and rows (the fewest chunks and
   * parts of those that tie). */
  C->unit = C->pl.pack_a ? C->pl.mc : C->f->mr;
  int64_t units = cdiv(W->mtot, C->unit), cmin = cdiv(C->panels, fit), best = INT64_MAX;
  bool grid = imgs == 1 && C->pl.tk == 1 && C->pl.tm * C->pl.tn > 1;
  int64_t c0 = grid ? imax(cmin, imin(C->pl.tn, C->panels)) : cmin;
  int64_t r0 = grid ? imin(units, C->pl.tm) : 1, r1 = grid ? r0 : imin(units, 4 * t);
  C->chunks = c0, C->parts = r0;
  for (int64_t c = c0; c <= C->panels && c <= c0 + 4 * t; c++)
    for (int64_t r = r0; r <= r1; r++) {
      int64_t busiest = sched_waves(imgs * c * r, t) * cdiv(C->panels, c) * cdiv(units, r);
      if (busiest < best) best = busiest, C->chunks = c, C->parts = r;
    }
  C->tasks = imgs * C->chunks * C->parts;
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
  D->inside = P->d[0] == 0 && P->d[1] == 0 && P->pe[P->rank - 2] == P->h && P->pe[P->rank - 1] == P->w;
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

/* The same from X through the fused padding: row k of the panel (row pc + k of K) reads X's
 * plane in the segment's table at pc + k, at row ky[k] + the segment's, column kx[k] + the
 * segment's (in X's coordinates), stepping st columns; zeros where that falls outside X. */
#define CG_PACK_PAD(NAME, T)                                                                          \
  CG_CLONES static void NAME(T *restrict out, const T *restrict x, int64_t pc,                         \
                             const Split *restrict ks, int64_t kc, const Seg *segs, int ns, int nr,    \
                             int w, const Pad *P) {                                                   \
    int64_t sy = P->xs[P->rank - 2], sx = P->xs[P->rank - 1];                                         \
    for (int64_t k = 0; k < kc; k++) {                                                               \
      T *restrict d = out + k * nr;                                                                  \
      for (int i = 0; i < ns; i++) {                                                                \
        T *restrict dd = d + segs[i].j;                                                              \
        int n = segs[i].n;                                                                           \
        int64_t y = ks[k].y + segs[i].y, xs = ks[k].x + segs[i].x, st = segs[i].step;                \
        int64_t lo = 0, hi = 0;                                                                      \
        if (segs[i].in)                                                                              \
          hi = n;                                                                                    \
        else if (y >= 0 && y < P->h && st > 0) {                                                    \
          lo = xs >= 0 ? 0 : (-xs + st - 1) / st;                                                    \
          hi = xs < P->w ? (P->w - 1 - xs) / st + 1 : 0;                                             \
          if (hi > n) hi = n;                                                                        \
          if (lo > hi) lo = hi;                                                                      \
        } else if (y >= 0 && y < P->h && xs >= 0 && xs < P->w)                                       \
          hi = n;                                                                                    \
        for (int j = 0; j < lo; j++) dd[j] = 0;                                                      \
        const T *restrict s = x + segs[i].xpl[pc + k] + y * sy + xs * sx;                            \
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

/* An image's offsets: B's offset of index p of P (without the padding), or (with it) the
 * image's split in the padded plane, the shift added, and xpl, X's offset of the plane of
 * each row of K for that image. */
typedef struct Img { int64_t boff; Split bs; int64_t *xpl; } Img;

static void cg_image(const Win *W, const CgPad *D, int64_t p, Img *im) {
  int64_t pi = p;
  im->boff = W->b0;
  for (int i = W->n[0] - 1; i >= 0; i--) im->boff += (pi % W->ext[0][i]) * W->coef[0][i], pi /= W->ext[0][i];
  if (!D) return;
  const Pad *P = D->P;
  Split bs = D->b0;
  pi = p;
  for (int i = W->n[0] - 1; i >= 0; i--) {
    int64_t v = pi % W->ext[0][i];
    pi /= W->ext[0][i];
    bs.pl += v * D->ax[0][i].pl, bs.y += v * D->ax[0][i].y, bs.x += v * D->ax[0][i].x;
  }
  for (int64_t k = 0; k < W->ktot; k++) {
    int64_t v = bs.pl + D->k[k].pl, o = 0;
    for (int d = P->rank - 3; d >= 0; d--) o += v % P->pe[d] * P->xs[d], v /= P->pe[d];
    im->xpl[k] = o;
  }
  bs.y += P->d[0], bs.x += P->d[1];
  im->bs = bs;
}

/* The segments of w columns from column g of the task's columns (of one image's Q, or of all
 * P Q when the panels span the images; im holds the images from p0 on). */
static int cg_panel(const Win *W, const CgPad *D, bool span, int64_t p, int64_t p0, const Img *im, int64_t g,
                    int64_t w, Seg *s) {
  int ns = 0;
  for (int64_t j = 0; j < w;) {
    int64_t q = span ? (g + j) % W->qtot : g + j, n = span ? imin(w - j, W->qtot - q) : w - j;
    const Img *m = &im[(span ? (g + j) / W->qtot : p) - p0];
    int k = cg_segs(W, D, q, n, s + ns);
    for (int i = ns; i < ns + k; i++) {
      s[i].j += (int)j;
      if (D) s[i].y += m->bs.y, s[i].x += m->bs.x, s[i].xpl = m->xpl;
      else s[i].off += m->boff;
    }
    ns += k, j += n;
  }
  /* Runs that continue one another in memory merge: without padding every window lies in X,
   * and the taps shift a run and the next alike, so rows of a map that X holds contiguous
   * (a 1 x 1 convolution at stride 1, 7 columns a row) pack as one run, not one a row. */
  const Pad *P = D ? D->P : NULL;
  bool inside = D && D->inside;
  int out = 0;
  for (int i = 0; i < ns; i++) {
    s[i].in = inside;
    if (out > 0) {
      Seg *a = &s[out - 1];
      bool next = a->step == s[i].step && a->xpl == s[i].xpl &&
                  (P ? inside && (s[i].y - a->y) * P->xs[P->rank - 2] + (s[i].x - a->x) * P->xs[P->rank - 1] ==
                                   a->n * a->step * P->xs[P->rank - 1]
                     : s[i].off - a->off == a->n * a->step);
      if (next && a->j + a->n == s[i].j) {
        a->n += s[i].n;
        continue;
      }
    }
    s[out++] = s[i];
  }
  return out;
}

/* Rows [m0, m1) of a scratch C whose columns are [q0, q1) of all P Q (row m0 and column q0
 * first, rows ldc apart) out to C[p, m, q], a run of each image's columns at a time. */
static void cg_copy_out(const Win *W, char *c, const char *ct, int64_t ldc, int64_t q0, int64_t q1, int64_t m0,
                        int64_t m1, int es) {
  for (int64_t q = q0; q < q1;) {
    int64_t pi = q / W->qtot, ql = q % W->qtot, n = imin(q1 - q, W->qtot - ql);
    for (int64_t r = m0; r < m1; r++)
      memcpy(c + (size_t)((pi * W->mtot + r) * W->qtot + ql) * (size_t)es,
             ct + (size_t)((r - m0) * ldc + (q - q0)) * (size_t)es, (size_t)(n * es));
    q += n;
  }
}

/* Task t: the columns of one chunk (of one index of P, or across them), every k block's
 * panels packed from the images into this thread's scratch, then the tiles over its part of
 * M's rows, into C or, where the panels span images, into a scratch C copied out at the
 * end. */
static void cg_task(void *arg, int64_t t) {
  CgJob *J = arg;
  const Win *W = J->W;
  const CgPlan *C = J->C;
  const Plan *pl = &C->pl;
  const Family *f = C->f;
  const GemmKernels *g = J->g;
  if (atomic_load(&J->failed) || (J->stop && *J->stop)) return;
  int64_t per = C->chunks * C->parts, p = C->span ? 0 : t / per, ch = t % per / C->parts, part = t % C->parts;
  int64_t es = J->es, nr = f->nr, units = cdiv(W->mtot, C->unit), cols = C->span ? W->ptot * W->qtot : W->qtot;
  int64_t j0 = ch * C->panels / C->chunks, j1 = (ch + 1) * C->panels / C->chunks;
  int64_t q0 = j0 * nr, q1 = imin(cols, j1 * nr);
  int64_t m0 = part * units / C->parts * C->unit, m1 = imin(W->mtot, (part + 1) * units / C->parts * C->unit);
  if (q0 >= q1 || m0 >= m1) return;
  /* the images this task reads: p alone, or those its columns span */
  int64_t p0 = C->span ? q0 / W->qtot : p, nimg = C->span ? (q1 - 1) / W->qtot - p0 + 1 : 1;
  const CgPad *D = J->pad;
  int64_t ldc = C->span ? (j1 - j0) * nr : W->qtot;
  size_t pkb = (size_t)(pl->kc * (j1 - j0) * nr * es), ctb = C->span ? (size_t)((m1 - m0) * ldc * es) : 0;
  size_t imb = sizeof(Img) * (size_t)nimg, xpb = D ? sizeof(int64_t) * (size_t)(W->ktot * nimg) : 0;
  size_t apb = J->apk_own ? ((size_t)(pl->mc * pl->kc * es) + 63) / 64 * 64 : 0;
  char *pk = cpu_scratch_get(pkb + apb + ctb + imb + xpb);
  if (!pk) {
    atomic_store(&J->failed, 1);
    return;
  }
  char *ap_own = pk + pkb;
  char *ct = pk + pkb + apb;
  Img *im = (Img *)(ct + ctb);
  for (int64_t i = 0; i < nimg; i++) {
    im[i].xpl = D ? (int64_t *)((char *)(im + nimg) + sizeof(int64_t) * (size_t)(i * W->ktot)) : NULL;
    cg_image(W, D, p0 + i, &im[i]);
  }
  /* C's element (row, column) at cbase + (row - cm) * ldc + column - cq */
  char *cbase = C->span ? ct : J->c + (size_t)(p * W->mtot * W->qtot) * (size_t)es;
  int64_t cm = C->span ? m0 : 0, cq = C->span ? q0 : 0;
  Seg segs[MAX_V * 64 + 1];
  for (int64_t pc = 0; pc < W->ktot; pc += pl->kc) {
    if (J->stop && *J->stop) return;
    int64_t kcur = imin(pl->kc, W->ktot - pc);
    for (int64_t q = q0; q < q1; q += nr) {
      int w = (int)imin(nr, q1 - q), ns = cg_panel(W, D, C->span, p, p0, im, q, w, segs);
      char *out = pk + (size_t)((q - q0) * kcur) * (size_t)es;
      if (D) {
        if (es == 4)
          pack_pad_f32((float *)out, (const float *)D->P->x, pc, D->k + pc, kcur, segs, ns, (int)nr, w, D->P);
        else
          pack_pad_f64((double *)out, (const double *)D->P->x, pc, D->k + pc, kcur, segs, ns, (int)nr, w, D->P);
      } else if (es == 4) {
        pack_f32((float *)out, (const float *)J->b, J->koff + pc, kcur, segs, ns, (int)nr, w);
      } else {
        pack_f64((double *)out, (const double *)J->b, J->koff + pc, kcur, segs, ns, (int)nr, w);
      }
    }
    int beta = (pc > 0) | (a_grouped(g, f, W->x.a_sm, W->x.a_sk, pl->pack_a) ? UK_GROUP_A : 0);
    /* the C tiles fetched for writing first where C's rows alias in L1 or outgrow L2, as
     * the engine's blocks do (gemm_run.c's prefetch_c) */
    if ((ldc * es) % SET_SPAN == 0 || (double)((m1 - m0) * (q1 - q0) * es) > hw_cache_bytes(&g->hw, 1))
      beta |= UK_PREFETCH_C;
    for (int64_t ic = m0; ic < m1; ic += pl->mc) {
      int64_t mcur = imin(pl->mc, m1 - ic);
      const char *ablk = J->a + (size_t)(ic * W->x.a_sm + pc * W->x.a_sk) * (size_t)es;
      if (J->apk_own) {
        gemm_pack_a(g, f, ablk, W->x.a_sm, W->x.a_sk, mcur, kcur, 0, ap_own);
        ablk = ap_own;
      } else if (pl->pack_a) {
        ablk = J->apk + (size_t)(pc * W->mtot + ic * kcur) * (size_t)es;
      }
      for (int64_t q = q0; q < q1; q += nr) {
        int64_t w = imin(nr, q1 - q);
        const char *bp = pk + (size_t)((q - q0) * kcur) * (size_t)es;
        char *cb = cbase + (size_t)((ic - cm) * ldc + q - cq) * (size_t)es;
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
          tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, nr, cb + (size_t)(r0 * ldc) * (size_t)es, ldc, beta,
                    NULL);
        }
      }
    }
  }
  if (C->span) cg_copy_out(W, J->c, ct, ldc, q0, q1, m0, m1, (int)es);
}

/* Whether each task packs A itself, a block just before its tiles: where A is packed and no
 * other task reads those rows (one image, or panels across the images, and one chunk of
 * columns), each block is then packed once either way, and in the task's cache, where
 * packing all of A first wrote it out to memory and read it back.  A 1 x 1 convolution at
 * stride 2 of a 14 x 14 map, 2048 filters of 1024 channels, 2 threads of a Zen 4 guest,
 * :time medians: 2.33 ms -> 1.47 (the same product by matmul: 1.38). */
static bool cg_own_a(const CgPlan *C, const Win *W) {
  return C->pl.pack_a && (C->span ? 1 : W->ptot) * C->chunks == 1;
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
  bool own = cg_own_a(&C, W);
  Tensor *apk = NULL;
  if (C.pl.pack_a && !own) {
    int64_t n = W->mtot * W->ktot;
    apk = tensor_new_uninit(es == 4 ? DYN_F32 : DYN_F64, 1, &n, err, errlen);
    if (!apk) {
      free(koff);
      return -1;
    }
  }
  CgJob J = { W, &C, g, a, b, c, apk ? tensor_data(apk) : NULL, own, koff, D, es, interrupt, 0 };
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
  if (!cpu_win_shape(p, ck, ext, strides, sz, threads, hw_cache_bytes(&be->hw, 1), W) || W->a_gather ||
      W->ptot == 0 || W->mtot == 0 || W->qtot == 0 || W->ktot == 0 || !cg_pad_split(W, P, D))
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
  if (out) {
    char parts[64];
    snprintf(parts, sizeof parts, ", each in %lld runs of rows", (long long)C.parts);
    buf_printf(out, "  %s implicit GEMM of M %lld, K %lld, N %lld for each of %lld: B's panels "
               "packed from the windows%s as they are read (no gathered matrix), A %s; tiles %dx%d, "
               "kc %lld, mc %lld; %lld tasks (%lld chunks of columns %s%s): predicted %.3f ms\n",
               padded ? "an" : "run instead as an", (long long)W->mtot, (long long)W->ktot, (long long)W->qtot,
               (long long)W->ptot, padded ? " of X, the padding's zeros filled in" : "", cg_own_a(&C, W) ? "packed by each task, a block before its tiles" : C.pl.pack_a ? "packed once for all tasks" : "read in place", C.f->mr, C.f->nr, (long long)C.pl.kc,
               (long long)C.pl.mc, (long long)C.tasks, (long long)C.chunks,
               C.span ? "across the images, their panels spanning them, C through scratch" : "an image",
               C.parts > 1 ? parts : "", C.t * 1e3);
  }
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

/* ---- the gathered path, images in groups ----
 *
 * Windows of several taps (3 x 3, 7 x 7) are gathered into a K x Q matrix an image and each
 * multiplied by a GEMM on one thread (cpu_rt.c's win_task).  With many filters and channels
 * every image streams all of A again from beyond L2, and on small maps that GEMM is narrow
 * (a 7 x 7 map is 49 columns, most of a second panel masked); here the images of a group
 * are gathered side by side into one K x (G Q) matrix, multiplied by one GEMM on all
 * threads into a scratch M x (G Q) C, and copied out to the images; half the last cache
 * holds the two (so the scratch is never more than the result itself).  Where A does not
 * fit half of L2, the model chooses between the two: the group's GEMM and its gather and
 * copy at the roofline, against the GEMMs an image in waves over the threads. */
typedef struct GgPlan { int64_t group, groups; GemmArgs x; double t, t_each; } GgPlan;

/* DYN_CONV: grouped, the groups wherever half the last cache holds two images' matrices and
 * their results; image, a GEMM an image always (for tests and measurements); else the
 * model's choice. */
static int gg_forced(void) {
  const char *e = getenv("DYN_CONV");
  return !e ? 0 : !strcmp(e, "grouped") ? 1 : !strcmp(e, "image") ? -1 : 0;
}

static bool gg_plan(GemmKernels *g, const Win *W, int threads, GgPlan *G) {
  int force = gg_forced();
  if (force < 0) return false;
  if (W->direct || W->ptot < 2 || W->ktot == 0 || W->qtot == 0 || W->mtot == 0) return false;
  int t = threads > 1 ? threads : 1;
  double es = g->esize, img = (double)W->ktot * (double)W->qtot * es, llc = (double)sched_last_cache_bytes(&g->hw);
  /* Only where an image's GEMM streams A from beyond its core's L2 again: elsewhere the
   * group's matrix, out of L2, cost more than the masked columns saved (DYN_CONV=grouped
   * against =image, :time, three rounds: conv 8 32 28 28 64 5 1 2 6.5-7.4 ms against
   * 3.6-6.2, conv 64 64 8 8 64 3 1 1 2.7-3.1 against 1.8-2.8; conv 4 512 7 7 512 3 1 1, A
   * 9.4 MB, gained). */
  if (!force && (double)W->mtot * (double)W->ktot * es <= hw_cache_bytes(&g->hw, 1) / 2) return false;
  /* the group's matrix and its scratch C together in half the last cache */
  double cimg = (double)W->mtot * (double)W->qtot * es;
  int64_t grp = (int64_t)(llc / 2 / (img + cimg));
  if (grp > W->ptot) grp = W->ptot;
  if (grp < 2) return false;
  G->groups = cdiv(W->ptot, grp);
  G->group = cdiv(W->ptot, G->groups);          /* groups as even as they can be */
  GemmArgs x = W->x;
  x.n = G->group * W->qtot;
  x.b_sk = x.n, x.b_sn = 1;
  x.c_sm = x.n, x.c_sn = 1;
  G->x = x;
  double moved = 2.0 * (double)W->ktot * (double)x.n * es + 2.0 * (double)W->mtot * (double)x.n * es;
  G->t = (double)G->groups * (gemm_predict(g, &x, t) + cost_roofline(&g->hw, t, 0, moved));
  G->t_each = (double)sched_waves(W->ptot * W->parts, t) *       /* W->x: the GEMM of an image's largest part */
              (gemm_predict(g, &W->x, 1) + cost_roofline(&g->hw, 1, 0, 2.0 * (double)W->ktot * (double)W->x.n * es));
  return force > 0 || G->t < G->t_each;
}

typedef struct GgJob {
  const Win *W;
  const char *b;
  char *col, *ct, *c;
  int64_t p0, np, n, rows;               /* the group's first image, its images, columns; rows a task */
  int es;
  _Atomic int failed;
} GgJob;

/* Task t of the gather: image t of the group, every row of K, into its columns. */
static void gg_gather(void *arg, int64_t t) {
  GgJob *J = arg;
  const Win *W = J->W;
  int64_t *roff = cpu_scratch_get(sizeof(int64_t) * (size_t)W->qrows);
  if (!roff) {
    atomic_store(&J->failed, 1);
    return;
  }
  cpu_win_gather(W, J->b, J->col + (size_t)(t * W->qtot) * (size_t)J->es, J->n, J->p0 + t, 0, W->qrows, J->es, roff);
}

/* Task t of the copy out: image t % np of the group, rows [t / np rows, ...) of M. */
static void gg_copy(void *arg, int64_t t) {
  GgJob *J = arg;
  const Win *W = J->W;
  int64_t i = t % J->np, m0 = t / J->np * J->rows, m1 = imin(W->mtot, m0 + J->rows), q0 = (J->p0 + i) * W->qtot;
  if (m0 < m1)
    cg_copy_out(W, J->c, J->ct + (size_t)(m0 * J->n + i * W->qtot) * (size_t)J->es, J->n, q0, q0 + W->qtot, m0, m1,
                J->es);
}

int cpu_conv_grouped_run(CpuBackend *be, GemmKernels *g, const Win *W, const void *a, const void *b, void *c,
                         volatile int *interrupt, char *err, size_t errlen) {
  GgPlan G;
  int threads = pool_threads(be->pool);
  if (!gg_plan(g, W, threads, &G)) return 0;
  int es = g->esize;
  size_t colb = (size_t)(W->ktot * G.x.n) * (size_t)es, ctb = (size_t)(W->mtot * G.x.n) * (size_t)es;
  /* kept from call to call: a new 8-16 MB each call had page faults cost up to a fifth of
   * the call in some processes (REPL :time on 2 threads of a Zen 5 guest, 3 x 3 filters: 4 x
   * 128 x 28 x 28 3.48 -> 3.21 ms, 8 x 512 x 7 x 7 6.75 -> 6.37; the bench's process, where
   * glibc kept its heap, was unchanged) */
  char *buf = cpu_scratch_call(colb + ctb);
  if (!buf) return 0;                    /* a GEMM an image needs less */
  int t = threads > 1 ? threads : 1;
  GgJob J = { W, b, buf, buf + colb, c, 0, 0, G.x.n, 0, es, 0 };
  int rc = 1;
  for (int64_t p0 = 0; p0 < W->ptot && rc == 1; p0 += G.group) {
    J.p0 = p0, J.np = imin(G.group, W->ptot - p0), J.n = J.np * W->qtot;
    dyn_parallel_for(be->pool, J.np, gg_gather, &J);
    if (J.failed) {
      rc = cpu_conv_ended(true, "out of memory for the gathered windows", interrupt, err, errlen);
      break;
    }
    GemmArgs x = G.x;
    x.n = J.n, x.b_sk = J.n, x.c_sm = J.n;
    x.a = a, x.b = J.col, x.c = J.ct;
    x.stop = interrupt;
    if (!gemm_run(g, &x, be->pool, err, errlen)) rc = -1;
    else if (interrupt && *interrupt) rc = cpu_conv_ended(0, "", interrupt, err, errlen);
    if (rc != 1) break;
    J.rows = cdiv(W->mtot, imax(1, 4 * t / J.np));
    dyn_parallel_for(be->pool, J.np * cdiv(W->mtot, J.rows), gg_copy, &J);
  }
  cpu_scratch_call_done();
  return rc;
}

double cpu_conv_grouped_predict(GemmKernels *g, const Win *W, int threads, Buf *out, GemmArgs *x) {
  GgPlan G;
  if (!gg_plan(g, W, threads, &G)) return -1;
  if (out)
    buf_printf(out, "  gathered in %lld groups of up to %lld images: a %lld x %lld matrix each (the last cache "
               "holds it), one GEMM of M %lld, N %lld, K %lld on %d threads, C through scratch copied out "
               "to the images: predicted %.3f ms (a GEMM an image on each thread: %.3f ms):\n",
               (long long)G.groups, (long long)G.group, (long long)W->ktot, (long long)G.x.n, (long long)W->mtot,
               (long long)G.x.n, (long long)W->ktot, threads, G.t * 1e3, G.t_each * 1e3);
  if (x) *x = G.x;
  return G.t;
}

#endif
