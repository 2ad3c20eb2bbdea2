/* gemm_run.c -- the contraction engine's execution: a call's arguments validated and
 * normalised (gemm_model.c's gemm_normalise), its plan found (the thread's last, the
 * per-shape cache, else the model), the workspaces, the thread blocks of tiles, row
 * streams and inner products with their packing, the k split's copies of C added back, and
 * the peak measurement.  These are dyn's hottest paths; the model that chose the plan is
 * gemm_model.c, the design note gemm.c. */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The plan this thread ran last, for a loop over one shape: found without the hash or the
 * lock (a small call's whole run is a few hundred nanoseconds).  Its epoch names the kernel
 * set and its forcing (gemm.c). */
static _Thread_local struct { uint64_t epoch; int64_t key[KEY_LEN]; Plan plan; } last_plan;

/* ---- execution ---- */

/* A thread block's workspace: packed A, packed B and a C tile, each 64-byte aligned and
 * followed by a 64-byte canary.  Builds without NDEBUG check the canaries after every run,
 * so generated code that writes past its panel stops with an internal error. */
#define CANARY 64
typedef struct WsLayout { size_t a, b, c, d, end[4], total; } WsLayout;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static void ws_layout(const GemmKernels *g, const Family *f, const Prob *p, const Plan *pl, WsLayout *L) {
  size_t es = (size_t)g->esize;
  size_t a = (size_t)pl->mc * pl->kc * es;
  size_t b = (size_t)pl->kc * (size_t)cdiv(pl->nc, f->nr) * f->nr * es;
  size_t c = (size_t)f->mr * f->nr * es;
  if (pl->dot) a = c = 0, b = (size_t)pl->kc * (size_t)pl->nbk * es;  /* B^T */
  L->a = 0;
  L->end[0] = a;
  L->b = round64(a) + CANARY;
  L->end[1] = L->b + b;
  L->c = round64(L->end[1]) + CANARY;
  L->end[2] = L->c + c;
  /* a block's own copy of C when k is split (the whole C: blocks write where C would be) */
  size_t d = pl->tk > 1 ? (size_t)(p->batch * p->m * p->n) * es : 0;
  L->d = round64(L->end[2]) + CANARY;
  L->end[3] = L->d + d;
  L->total = round64(L->end[3]) + CANARY + 64;      /* + slack to align the base */
}

static void ws_arm(void *ws, const WsLayout *L) {
#ifndef NDEBUG
  for (int i = 0; i < 4; i++) memset((char *)align64(ws) + L->end[i], 0xA5, CANARY);
#else
  (void)ws, (void)L;
#endif
}

static void ws_check(void *ws, const WsLayout *L) {
#ifndef NDEBUG
  static const unsigned char armed[CANARY] = { [0 ... CANARY - 1] = 0xA5 };
  for (int i = 0; i < 4; i++)
    if (memcmp((char *)align64(ws) + L->end[i], armed, CANARY)) {
      fprintf(stderr, "dyn: internal error: gemm workspace %d overrun (%s:%d)\n", i, __FILE__,
              __LINE__);
      abort();
    }
#else
  (void)ws, (void)L;
#endif
}

typedef struct Job {
  const GemmKernels *g;
  const Family *f;
  const Prob *p;
  const Plan *pl;
  void **ws;                     /* per block: packed A, then packed B, then a C tile */
  WsLayout lay;
} Job;

/* General-stride packing of A rows [0, mt) x [0, kc) by pieces: piece (r0, h) becomes a
 * panel out[k*h + i]. */
static void pack_a(const GemmKernels *g, const Family *f, const char *a, int64_t a_sm,
                   int64_t a_sk, int64_t mt, int64_t kc, int tab, char *out) {
  size_t es = (size_t)g->esize;
  size_t off = 0;
  Pieces it;
  pieces_init(&it, f, mt, tab);
  int64_t r0;
  int ht, h;
  while (pieces_next(&it, &r0, &ht, &h)) {   /* pack the h rows stored; ht reads them clamped */
    if (a_sk == 1 && kc >= g->W) {
      g->packa(kc, a + (size_t)(r0 * a_sm) * es, a_sm, out + off * es, h);
    } else if (es == 4) {
      const float *src = (const float *)a + r0 * a_sm;
      float *dst = (float *)out + off;
      if (a_sm == 1)
        for (int64_t k = 0; k < kc; k++) memcpy(dst + k * h, src + k * a_sk, (size_t)h * 4);
      else
        for (int i = 0; i < h; i++)
          for (int64_t k = 0; k < kc; k++) dst[k * h + i] = src[i * a_sm + k * a_sk];
    } else {
      const double *src = (const double *)a + r0 * a_sm;
      double *dst = (double *)out + off;
      if (a_sm == 1)
        for (int64_t k = 0; k < kc; k++) memcpy(dst + k * h, src + k * a_sk, (size_t)h * 8);
      else
        for (int i = 0; i < h; i++)
          for (int64_t k = 0; k < kc; k++) dst[k * h + i] = src[i * a_sm + k * a_sk];
    }
    off += (size_t)h * kc;
  }
}

/* The same, for callers outside the engine that pack A once for many products
 * (cpu_conv_gemm.c). */
void gemm_pack_a(const GemmKernels *g, const Family *f, const char *a, int64_t a_sm, int64_t a_sk, int64_t mt,
                 int64_t kc, int tab, char *out) {
  pack_a(g, f, a, a_sm, a_sk, mt, kc, tab, out);
}

/* General-stride packing of B (any b_sn): out[p*kc*nr + k*nr + j], zero past nt.  Where B's
 * rows are its unit stride (B = K^T of a row-major K: attention's Q . K^T), a whole strip is
 * B^T's block transposed W rows of k at a time in registers (packbt: nr columns of B, each
 * W contiguous values, to W rows of the strip); element by element, the strided reads took
 * a third of Q . K^T of f32[48, 128, 64] (2 threads of an Emerald Rapids guest: 0.60 ms,
 * against 0.41 for the same product with K^T given). */
static void pack_b_strided(const GemmKernels *g, const Family *f, const char *b, int64_t b_sk,
                           int64_t b_sn, int64_t kc, int64_t nt, char *out) {
  int nr = f->nr;
  size_t es = (size_t)g->esize;
  for (int64_t p0 = 0; p0 < nt; p0 += nr) {
    int64_t w = imin(nr, nt - p0);
    if (b_sk == 1 && w == nr) {                  /* nr is whole vectors, as packbt needs */
      for (int64_t k0 = 0; k0 < kc; k0 += g->W)
        g->packbt(nr, b + (size_t)(p0 * b_sn + k0) * es, b_sn, out + (size_t)(p0 * kc + k0 * nr) * es,
                      imin(g->W, kc - k0));
      continue;
    }
    if (g->esize == 4) {
      float *dst = (float *)out + p0 * kc;
      const float *src = (const float *)b + p0 * b_sn;
      for (int64_t k = 0; k < kc; k++) {
        for (int64_t j = 0; j < w; j++) dst[k * nr + j] = src[k * b_sk + j * b_sn];
        for (int64_t j = w; j < nr; j++) dst[k * nr + j] = 0;
      }
    } else {
      double *dst = (double *)out + p0 * kc;
      const double *src = (const double *)b + p0 * b_sn;
      for (int64_t k = 0; k < kc; k++) {
        for (int64_t j = 0; j < w; j++) dst[k * nr + j] = src[k * b_sk + j * b_sn];
        for (int64_t j = w; j < nr; j++) dst[k * nr + j] = 0;
      }
    }
  }
}

/* dst[j*d_sn] = src[j], or += (add), for j < n: in vectors where dst's columns are
 * contiguous.  A tile buffer's rows into C (merge_tile) and a k split's copies of C into C
 * (add_parts) both go through it. */
typedef float VF __attribute__((vector_size(32)));
typedef double VD __attribute__((vector_size(32)));
#define MERGE_ROW(T, V)                                                                   \
  do {                                                                                    \
    T *x = (T *)dst;                                                                      \
    const T *y = (const T *)src;                                                          \
    int64_t j = 0, L = (int64_t)(sizeof(V) / sizeof(T));                                  \
    if (d_sn == 1)                                                                        \
      for (V a, b; j + L <= n; j += L) {                                                  \
        memcpy(&b, y + j, sizeof b);                                                      \
        if (add) memcpy(&a, x + j, sizeof a), b += a;                                     \
        memcpy(x + j, &b, sizeof b);                                                      \
      }                                                                                   \
    for (; j < n; j++) x[j * d_sn] = add ? x[j * d_sn] + y[j] : y[j];                     \
  } while (0)
static void merge_row(const GemmKernels *g, char *dst, int64_t d_sn, const char *src, int64_t n,
                      bool add) {
  if (g->esize == 4) MERGE_ROW(float, VF);
  else MERGE_ROW(double, VD);
}
#undef MERGE_ROW

/* C tile (through the buffer) += or = tmp, for a C with no unit stride. */
static void merge_tile(const GemmKernels *g, const char *tmp, int nr, char *c, int64_t c_sm,
                       int64_t c_sn, int h, int64_t w, bool add) {
  for (int i = 0; i < h; i++)
    merge_row(g, c + (size_t)(i * c_sm) * g->esize, c_sn, tmp + (size_t)i * nr * g->esize, w, add);
}

/* A thread block's place in the grid (k outermost) and where it writes: C itself, or for a
 * block past the first in k its own copy of C (unit strides, C =), added in at the end.
 * False when the block has nothing to do. */
typedef struct Block {
  int64_t b0, b1, m0, m1, n0, n1, k0, k1;
  char *c;
  int64_t c_sb, c_sm, c_sn;
  bool acc, ctmp;
} Block;

static bool block_of(const Job *J, int64_t task, Block *k) {
  const Prob *p = J->p;
  const Plan *pl = J->pl;
  int64_t per = (int64_t)pl->tb * pl->tm * pl->tn, whole = task, tk = 0, tn = 0, tm = 0, tb = 0;
  if (task) {                   /* (the divisions were a tenth of a one-block call's C time) */
    tk = task / per;
    task %= per;
    tn = task % pl->tn, tm = task / pl->tn % pl->tm, tb = task / pl->tn / pl->tm;
  }
  k->b0 = tb * pl->bb, k->b1 = imin(p->batch, k->b0 + pl->bb);
  k->m0 = tm * pl->mb, k->m1 = imin(p->m, k->m0 + pl->mb);
  k->n0 = tn * pl->nbk, k->n1 = imin(p->n, k->n0 + pl->nbk);
  k->k0 = tk * pl->kb, k->k1 = imin(p->k, k->k0 + pl->kb);
  if (k->b0 >= k->b1 || k->m0 >= k->m1 || k->n0 >= k->n1 || k->k0 >= k->k1) return false;
  if (tk == 0) {
    k->c = p->c, k->c_sb = p->c_sb, k->c_sm = p->c_sm, k->c_sn = p->c_sn;
    k->acc = p->acc, k->ctmp = p->ctmp;
  } else {
    k->c = (char *)align64(J->ws[whole]) + J->lay.d;
    k->c_sb = p->m * p->n, k->c_sm = p->n, k->c_sn = 1;
    k->acc = false, k->ctmp = false;
  }
  return true;
}

/* One thread block of a row-streaming plan: batches and columns by the task's place. */
static void run_rows(void *ctx, int64_t task) {
  const Job *J = ctx;
  const GemmKernels *g = J->g;
  const Prob *p = J->p;
  const Plan *pl = J->pl;
  int64_t tn = task % pl->tn, tb = task / pl->tn;
  int64_t b0 = tb * pl->bb, b1 = imin(p->batch, b0 + pl->bb);
  int64_t n0 = tn * pl->nbk, n1 = imin(p->n, n0 + pl->nbk);
  size_t es = (size_t)g->esize;
  RowsFn fn = g->rows[p->m];
  for (int64_t bi = b0; bi < b1; bi++) {
    const char *A = p->a + (size_t)(bi * p->a_sb) * es, *Bm = p->b + (size_t)(bi * p->b_sb) * es;
    char *C = p->c + (size_t)(bi * p->c_sb) * es;
    for (int64_t j = n0; j < n1; j += pl->nc) {
      if (p->stop && *p->stop) return;
      int64_t w = imin(pl->nc, n1 - j);
      if (!p->acc)                      /* C = : clear the chunk, which then stays in L1 */
        for (int64_t i = 0; i < p->m; i++) memset(C + (size_t)(i * p->c_sm + j) * es, 0, (size_t)w * es);
      fn(p->k, w, A, p->a_sm, p->a_sk, Bm + (size_t)j * es, p->b_sk, C + (size_t)j * es, p->c_sm);
    }
  }
}

/* Should the kernels of block bk fetch their C tiles first (UK_PREFETCH_C): when the
 * block's C outgrows L2 or its rows alias in L1. */
static bool prefetch_c(const GemmKernels *g, const Block *bk) {
  double bytes = (double)(bk->b1 - bk->b0) * (double)(bk->m1 - bk->m0) * (double)(bk->n1 - bk->n0) * g->esize;
  return !bk->ctmp && (bytes > (double)hw_cache_bytes(&g->hw, 1) || (bk->c_sm * g->esize) % SET_SPAN == 0);
}

/* One thread block: batches, rows and columns given by the task's place in the grid. */
static void run_block(void *ctx, int64_t task) {
  const Job *J = ctx;
  const GemmKernels *g = J->g;
  const Family *f = J->f;
  const Prob *p = J->p;
  const Plan *pl = J->pl;
  Block bk;
  if (!block_of(J, task, &bk)) return;
  int64_t b0 = bk.b0, b1 = bk.b1, m0 = bk.m0, m1 = bk.m1, n0 = bk.n0, n1 = bk.n1;
  size_t es = (size_t)g->esize;
  char *wa = NULL, *wb = NULL, *wc = NULL;             /* no workspace when nothing is packed */
  if (J->ws) {
    char *base = align64(J->ws[task]);
    wa = base + J->lay.a, wb = base + J->lay.b, wc = base + J->lay.c;
  }
  int nr = f->nr, tab = !pl->pack_b;
  /* the kernels' flags beside beta's bit 0: the C tile fetched first (or streamed), A's
   * rows in groups */
  int uf = (prefetch_c(g, &bk) ? UK_PREFETCH_C : 0) | (a_grouped(g, f, p->a_sm, p->a_sk, pl->pack_a) ? UK_GROUP_A : 0);
  if (c_streamed(g, p, pl->kc, bk.k1 - bk.k0, bk.acc, bk.ctmp)) uf = (uf & ~UK_PREFETCH_C) | UK_STREAM_C;
  /* B packed by the first tile of each strip (ukp), as it reads B for its own sums, when
   * the first piece of the first rows is a full tile */
  bool fuse = fused_packing(f, p, pl, m1 - m0);
  for (int64_t bi = b0; bi < b1; bi++) {
    const char *A = p->a + (size_t)(bi * p->a_sb) * es, *Bm = p->b + (size_t)(bi * p->b_sb) * es;
    char *C = bk.c + (size_t)(bi * bk.c_sb) * es;
    for (int64_t jc = n0; jc < n1; jc += pl->nc) {
      int64_t ncur = imin(pl->nc, n1 - jc);
      for (int64_t pc = bk.k0; pc < bk.k1; pc += pl->kc) {
        if (p->stop && *p->stop) return;     /* an interrupt is seen within a panel's time */
        int64_t kcur = imin(pl->kc, bk.k1 - pc);
        int beta = bk.acc || pc > bk.k0;
        const char *bsrc = Bm + (size_t)(pc * p->b_sk + jc * p->b_sn) * es;
        const char *bpan;
        int64_t b_rs, b_pstride;                  /* elements */
        if (fuse) {
          bpan = wb;
          b_rs = nr;
          b_pstride = kcur * nr;
        } else if (pl->pack_b) {
          if (p->b_sn == 1) g->packb(kcur, ncur, bsrc, p->b_sk, wb, nr);
          else pack_b_strided(g, f, bsrc, p->b_sk, p->b_sn, kcur, ncur, wb);
          bpan = wb;
          b_rs = nr;
          b_pstride = kcur * nr;
        } else {
          bpan = bsrc;
          b_rs = p->b_sk;
          b_pstride = nr;
        }
        for (int64_t ic = m0; ic < m1; ic += pl->mc) {
          int64_t mcur = imin(pl->mc, m1 - ic);
          const char *asrc = A + (size_t)(ic * p->a_sm + pc * p->a_sk) * es;
          if (pl->pack_a) pack_a(g, f, asrc, p->a_sm, p->a_sk, mcur, kcur, tab, wa);
          for (int64_t jr = 0; jr < ncur; jr += nr) {
            int64_t w = imin(nr, ncur - jr);
            const char *bp = bpan + (size_t)((jr / nr) * b_pstride) * es;
            char *cb = C + (size_t)(ic * bk.c_sm + (jc + jr) * bk.c_sn) * es;
            size_t aoff = 0;
            Pieces it;
            pieces_init(&it, f, mcur, tab);
            /* the next strip this thread packs, fetched into L2 by the full tiles after
             * the packing one, a few lines each, spread over their k steps */
            const char *nx = NULL;
            int64_t nxl = 0, share = 0, sh = 0, tq = 0;
            if (fuse && ic == m0 && it.full > 1 && !bk.ctmp) {
              int64_t lpr = cdiv(nr * (int64_t)es, 64);   /* lines a row, as emit_uk's */
              if (jr + nr < ncur) nx = bsrc + (size_t)(jr + nr) * es, nxl = kcur * lpr;
              else if (mcur == m1 - m0 && pc + pl->kc < bk.k1)
                nx = Bm + (size_t)((pc + pl->kc) * p->b_sk + jc * p->b_sn) * es,
                nxl = imin(pl->kc, bk.k1 - pc - pl->kc) * lpr;
              else if (mcur == m1 - m0 && jc + pl->nc < n1)
                nx = Bm + (size_t)(bk.k0 * p->b_sk + (jc + pl->nc) * p->b_sn) * es,
                nxl = imin(pl->kc, bk.k1 - bk.k0) * lpr;
              if (nx) {
                share = cdiv(nxl, it.full - 1);
                while ((share << (sh + 1)) <= kcur) sh++;
              }
            }
            int64_t r0;
            int h, hs;
            while (pieces_next(&it, &r0, &h, &hs)) {
              const char *ap;
              int64_t a_rs, a_cs;
              if (pl->pack_a) {
                ap = wa + aoff * es; a_rs = 1; a_cs = hs;
                aoff += (size_t)hs * kcur;
              } else {
                ap = asrc + (size_t)(r0 * p->a_sm) * es; a_rs = p->a_sm; a_cs = p->a_sk;
              }
              char *cp = cb + (size_t)(r0 * bk.c_sm) * es;
              if (fuse && ic == m0 && r0 == 0) {
                const char *bs = bsrc + (size_t)jr * es;
                if (!bk.ctmp) {
                  f->ukp(kcur, ap, a_rs, a_cs, bs, p->b_sk, cp, bk.c_sm, w, hs, beta | uf, (void *)bp);
                } else {
                  f->ukp(kcur, ap, a_rs, a_cs, bs, p->b_sk, wc, nr, w, hs, 0, (void *)bp);
                  merge_tile(g, wc, nr, cp, bk.c_sm, bk.c_sn, hs, w, beta);
                }
              } else if (nx && h == f->mr && hs == h && w == nr) {
                Fetch fe = { nx, p->b_sk, tq * share, imin(nxl, (tq + 1) * share), sh };
                tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, b_rs, cp, bk.c_sm, beta | uf, &fe);
                tq++;
              } else if (!bk.ctmp) {
                tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, b_rs, cp, bk.c_sm, beta | uf, NULL);
              } else {
                tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, b_rs, wc, nr, uf & UK_GROUP_A, NULL);
                merge_tile(g, wc, nr, cp, bk.c_sm, bk.c_sn, hs, w, beta);
              }
            }
          }
        }
      }
    }
  }
}

/* B^T's rows for k in [0, kc): out[j*kc + k] = b[k*b_sk + j*b_sn], for the n <= DOT_MAXN
 * columns of an inner-product plan: by packbt where B's columns are unit-stride and kc at
 * least a vector, else element by element. */
static void pack_bt(const GemmKernels *g, const char *b, int64_t b_sk, int64_t b_sn, int64_t kc,
                    int64_t n, char *out) {
  size_t es = (size_t)g->esize;
  if (b_sn == 1 && kc >= g->W) {             /* W columns at a time, transposed in registers */
    for (int64_t j = 0; j < n; j += g->W)
      g->packbt(kc, b + (size_t)j * es, b_sk, out + (size_t)(j * kc) * es, imin(g->W, n - j));
    return;
  }
  /* row by row of B, so that each of its lines is read once */
  if (es == 4) {
    const float *s = (const float *)b;
    float *o = (float *)out;
    for (int64_t k = 0; k < kc; k++)
      for (int64_t j = 0; j < n; j++) o[j * kc + k] = s[k * b_sk + j * b_sn];
  } else {
    const double *s = (const double *)b;
    double *o = (double *)out;
    for (int64_t k = 0; k < kc; k++)
      for (int64_t j = 0; j < n; j++) o[j * kc + k] = s[k * b_sk + j * b_sn];
  }
}

/* Whether an inner-product plan's packed B^T fits run_dot's stack buffer: then a small call
 * takes no workspace (no lock, no canaries). */
#define DOT_LOCAL_BT 4096
static bool dot_local(const GemmKernels *g, const Plan *pl) {
  return pl->dot && (size_t)pl->kc * (size_t)pl->nbk * (size_t)g->esize <= DOT_LOCAL_BT;
}

/* One thread block of an inner-product plan: batches and rows by the task's place; per k
 * block, B^T's rows (packed or in place), then per mc rows each strip of columns in row
 * pieces.  C is written in place through both of its strides. */
static void run_dot(void *ctx, int64_t task) {
  const Job *J = ctx;
  const GemmKernels *g = J->g;
  const DotSet *d = &g->dot;
  const Prob *p = J->p;
  const Plan *pl = J->pl;
  Block bk;
  if (!block_of(J, task, &bk)) return;
  int64_t b0 = bk.b0, b1 = bk.b1, m0 = bk.m0, m1 = bk.m1;
  size_t es = (size_t)g->esize;
  _Alignas(64) char local[DOT_LOCAL_BT];    /* a small B^T needs no workspace (dot_local) */
  char *wb = J->ws ? (char *)align64(J->ws[task]) + J->lay.b : local;
  for (int64_t bi = b0; bi < b1; bi++) {
    const char *A = p->a + (size_t)(bi * p->a_sb) * es, *Bm = p->b + (size_t)(bi * p->b_sb) * es;
    char *C = bk.c + (size_t)(bi * bk.c_sb) * es;
    for (int64_t pc = bk.k0; pc < bk.k1; pc += pl->kc) {
      if (p->stop && *p->stop) return;
      int64_t kcur = imin(pl->kc, bk.k1 - pc);
      int beta = bk.acc || pc > bk.k0;
      const char *bt = Bm + (size_t)(pc * p->b_sk) * es;
      int64_t bt_rs = p->b_sn;
      if (pl->pack_b) {
        pack_bt(g, bt, p->b_sk, p->b_sn, kcur, p->n, wb);
        bt = wb;
        bt_rs = kcur;
      }
      const char *ak = A + (size_t)(pc * p->a_sk) * es;
      for (int64_t i = m0; i < m1;) {
        int h = dot_piece(d, dot_hw(pl), m1 - i);
        for (int s = 0, j0 = 0; s < DOT_STRIPS && pl->dw[s]; j0 += pl->dw[s++]) {
          int w = pl->dw[s];
          d->fn[w][h](kcur, ak + (size_t)(i * p->a_sm) * es, p->a_sm, bt + (size_t)(j0 * bt_rs) * es,
                      bt_rs, C + (size_t)(i * bk.c_sm + j0 * bk.c_sn) * es, bk.c_sm, bk.c_sn, h, w, beta);
        }
        i += h;
      }
    }
  }
}

/* C += each k block's copy, after the blocks have run (C is small when k is split): task r
 * of R adds the r-th share of every block's rows, all its copies (the same rows of C for
 * the same r, so no two tasks meet), in vectors along a row where C's columns are
 * contiguous.  (One thread adding scalars took 20 of 145 us of 127 x 511 x 384 split in
 * two.) */
typedef struct AddJob { const Job *J; int nblk; int64_t R; } AddJob;

static void add_parts(void *ctx, int64_t r) {
  const AddJob *A = ctx;
  const Job *J = A->J;
  const Prob *p = J->p;
  size_t es = (size_t)J->g->esize;
  int64_t per = (int64_t)J->pl->tb * J->pl->tm * J->pl->tn;
  for (int64_t t = per; t < A->nblk; t++) {
    Block bk;
    if (!block_of(J, t, &bk)) continue;
    int64_t mt = bk.m1 - bk.m0, rows = (bk.b1 - bk.b0) * mt;
    for (int64_t q = rows * r / A->R; q < rows * (r + 1) / A->R; q++) {
      int64_t b = bk.b0 + q / mt, i = bk.m0 + q % mt;
      merge_row(J->g, (char *)p->c + (size_t)(b * p->c_sb + i * p->c_sm + bk.n0 * p->c_sn) * es, p->c_sn,
                bk.c + (size_t)(b * bk.c_sb + i * bk.c_sm + bk.n0) * es, bk.n1 - bk.n0, true);
    }
  }
}

/* C = 0 for K = 0 (a no-op when accumulating). */
static void zero_c(const GemmKernels *g, const Prob *p) {
  size_t es = (size_t)g->esize;
  for (int64_t bi = 0; bi < p->batch; bi++)
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t j = 0; j < p->n; j++)
        memset(p->c + (size_t)(bi * p->c_sb + i * p->c_sm + j * p->c_sn) * es, 0, es);
}

static bool stopped(const Prob *p, char *err, size_t errlen) {
  if (!(p->stop && *p->stop)) return true;
  snprintf(err, errlen, "interrupted");
  return false;
}

static bool run_prob(GemmKernels *g, Prob p, Pool *pool, char *err, size_t errlen);
static bool run_plan(GemmKernels *g, Prob p, Plan pl, Pool *pool, char *err, size_t errlen);

bool gemm_run(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen) {
  if (g->wide) return g->half->run(g, x, pool, err, errlen);
  if (!jit_can_run(g->jit)) {
    snprintf(err, errlen, "gemm: code for %s cannot run on this CPU", g->hw.name);
    return false;
  }
  Prob p;
  if (!gemm_normalise(g, x, &p, err, errlen)) return false;
  if (!p.batch || !p.m || !p.n) return true;
  if (!p.c || (p.k && (!p.a || !p.b))) {
    snprintf(err, errlen, "gemm: null operand");
    return false;
  }
  if (!p.k) {
    if (!p.acc) zero_c(g, &p);
    return true;
  }
  return run_prob(g, p, pool, err, errlen);
}

/* A set of the plan cache with way w moved to the front, the ways before it one back: the
 * front is the most recently used. */
static void cache_front(struct CacheEntry *set, int w) {
  if (w <= 0) return;
  struct CacheEntry e = set[w];
  memmove(set + 1, set, (size_t)w * sizeof *set);
  set[0] = e;
}

/* Find p's plan (this thread's last, the cache, else the model) and run it. */
static bool run_prob(GemmKernels *g, Prob p, Pool *pool, char *err, size_t errlen) {
  Plan pl;
  int64_t key[KEY_LEN];
  plan_key(&p, pool_threads(pool), key);
  uint64_t epoch = atomic_load_explicit(&g->epoch, memory_order_relaxed);
  if (last_plan.epoch == epoch && !memcmp(last_plan.key, key, sizeof key)) {
    pl = last_plan.plan;
  } else {
    struct CacheEntry *set = &g->cache[key_hash(key) * PLAN_WAYS];
    pthread_mutex_lock(&g->cache_lock);
    int w = 0;
    while (w < PLAN_WAYS && !(set[w].used && !memcmp(set[w].key, key, sizeof key))) w++;
    bool hit = w < PLAN_WAYS;
    if (hit) {
      pl = set[w].plan;
      cache_front(set, w);
    }
    pthread_mutex_unlock(&g->cache_lock);
    if (!hit) {
      gemm_plan_choose(g, &p, pool_threads(pool), &pl, NULL, NULL, 0);
      atomic_fetch_add_explicit(&g->weighed, 1, memory_order_relaxed);
      pthread_mutex_lock(&g->cache_lock);
      cache_front(set, PLAN_WAYS - 1);         /* the least recently used way, replaced */
      set[0].used = true;
      memcpy(set[0].key, key, sizeof key);
      set[0].plan = pl;
      pthread_mutex_unlock(&g->cache_lock);
    }
    last_plan.epoch = epoch;
    memcpy(last_plan.key, key, sizeof key);
    last_plan.plan = pl;
  }
  if (pl.edge) {     /* the columns before the last edge ones by this plan, then those */
    Plan rest = pl;
    rest.edge = 0;
    bool ok = run_plan(g, gemm_part_cols(g, &p, -pl.edge), rest, pool, err, errlen) &&
              run_prob(g, gemm_part_cols(g, &p, pl.edge), pool, err, errlen);
    last_plan.epoch = epoch;  /* this problem's, for the next call and gemm_last_plan */
    memcpy(last_plan.key, key, sizeof key);
    last_plan.plan = pl;
    return ok;
  }
  return run_plan(g, p, pl, pool, err, errlen);
}

/* Run p by plan pl. */
static bool run_plan(GemmKernels *g, Prob p, Plan pl, Pool *pool, char *err, size_t errlen) {
  const Family *f = &g->fam[pl.fam];
  int nblk = pl.tb * pl.tm * pl.tn * pl.tk;
  if (pl.rows) {
    Job J = { .g = g, .p = &p, .pl = &pl };
    dyn_parallel_for(nblk > 1 ? pool : NULL, nblk, run_rows, &J);
    return stopped(&p, err, errlen);
  }
  /* A problem one piece of one tile covers, its B in place: the kernel straight from here,
   * without the job and the block (a third of such a call's time went there). */
  if (nblk == 1 && !pl.dot && !pl.pack_a && !pl.pack_b && !p.ctmp && p.batch == 1 &&
      p.n <= f->nr && p.k <= pl.kc && p.m <= f->mr) {
    Pieces it;
    int64_t r0;
    int h, hs;
    pieces_init(&it, f, p.m, 1);
    if (pieces_next(&it, &r0, &h, &hs) && hs == p.m) {
      tile_call(g, f, h, hs, p.n, p.k, p.a, p.a_sm, p.a_sk, p.b, p.b_sk, p.c, p.c_sm,
                p.acc | (a_grouped(g, f, p.a_sm, p.a_sk, false) ? UK_GROUP_A : 0), NULL);
      return true;
    }
  }
  void (*run)(void *, int64_t) = pl.dot ? run_dot : run_block;
  if (!pl.pack_a && (!pl.pack_b || dot_local(g, &pl)) && (pl.dot || !p.ctmp) && pl.tk == 1) {
    Job J = { .g = g, .f = f, .p = &p, .pl = &pl, .ws = NULL };
    dyn_parallel_for(nblk > 1 ? pool : NULL, nblk, run, &J);
    return stopped(&p, err, errlen);
  }
  WsLayout lay;
  ws_layout(g, f, &p, &pl, &lay);
  size_t need = lay.total;
  void *mine[64], **ws;
  bool locked = pthread_mutex_trylock(&g->ws_lock) == 0;
  if (locked) {
    if (g->nws < nblk) {
      g->ws = xrealloc(g->ws, (size_t)nblk * sizeof *g->ws);
      g->ws_bytes = xrealloc(g->ws_bytes, (size_t)nblk * sizeof *g->ws_bytes);
      for (int i = g->nws; i < nblk; i++) { g->ws[i] = NULL; g->ws_bytes[i] = 0; }
      g->nws = nblk;
    }
    for (int i = 0; i < nblk; i++)
      if (g->ws_bytes[i] < need) {
        free(g->ws[i]);
        g->ws[i] = xmalloc(need);
        g->ws_bytes[i] = need;
      }
    ws = g->ws;
  } else {
    ws = nblk <= 64 ? mine : xmalloc((size_t)nblk * sizeof *ws);
    for (int i = 0; i < nblk; i++) ws[i] = xmalloc(need);
  }
  Job J = { .g = g, .f = f, .p = &p, .pl = &pl, .ws = ws, .lay = lay };
  for (int i = 0; i < nblk; i++) ws_arm(ws[i], &lay);
  dyn_parallel_for(nblk > 1 ? pool : NULL, nblk, run, &J);
  if (pl.tk > 1 && !(p.stop && *p.stop)) {
    AddJob A = { .J = &J, .nblk = nblk, .R = pool ? imin(nblk, pool_threads(pool)) : 1 };
    dyn_parallel_for(A.R > 1 ? pool : NULL, A.R, add_parts, &A);
  }
  for (int i = 0; i < nblk; i++) ws_check(ws[i], &lay);
  if (locked) {
    pthread_mutex_unlock(&g->ws_lock);
  } else {
    for (int i = 0; i < nblk; i++) free(ws[i]);
    if (ws != mine) free(ws);
  }
  return stopped(&p, err, errlen);
}

bool gemm_last_plan(GemmKernels *g, GemmPlanInfo *out) {
  memset(out, 0, sizeof *out);
  if (g->wide) return false;     /* a 16-bit engine's runs have no plan of their own */
  if (last_plan.epoch != atomic_load_explicit(&g->epoch, memory_order_relaxed)) return false;
  gemm_plan_summary(g, &last_plan.plan, out);
  return true;
}

/* The machine's attainable peak: every thread runs the largest register tile of the first
 * family with a_cs = b_rs = 0 (one column of A and one row of B, in L1) and a long k, so
 * only the FMA pipes are measured. */
typedef struct PeakJob { const GemmKernels *g; int64_t reps; } PeakJob;

static void peak_task(void *ctx, int64_t t) {
  const PeakJob *pj = ctx;
  const Family *f = &pj->g->fam[0];
  size_t es = (size_t)pj->g->esize;
  char *mem = xcalloc(1, (size_t)(f->mr + f->nr + f->mr * f->nr) * es + 256);
  char *a = align64(mem), *b = align64(a + (size_t)f->mr * es);
  char *c = align64(b + (size_t)f->nr * es);
  for (int64_t r = 0; r < pj->reps; r++)
    tile_call(pj->g, f, f->mr, f->mr, f->nr, 4096, a, 1, 0, b, 0, c, f->nr, 1, NULL);
  free(mem);
  (void)t;
}

double gemm_peak_gflops(GemmKernels *g, Pool *pool, double seconds) {
  if (g->wide) return gemm_peak_gflops(g->wide, pool, seconds);
  if (!jit_can_run(g->jit)) return 0;
  const Family *f = &g->fam[0];
  int T = pool_threads(pool);
  PeakJob pj = { g, 16 };
  double t = 0;
  for (;;) {            /* grow the count until one run lasts long enough to time */
    double t0 = now_s();
    dyn_parallel_for(pool, T, peak_task, &pj);
    t = now_s() - t0;
    if (t >= seconds || pj.reps > ((int64_t)1 << 40)) break;
    pj.reps *= t > 0 ? imax(2, (int64_t)(seconds / t * 1.2)) : 16;
  }
  return (double)T * pj.reps * 2.0 * f->mr * f->nr * 4096 / t * 1e-9;
}

