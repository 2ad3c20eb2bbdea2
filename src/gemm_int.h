/* gemm_int.h -- what the files of the CPU contraction engine share: the limits, the kernels'
 * signatures, the families, problems and plans, the engine object, the symbol names the
 * emitter gives and the binder looks up, and the small helpers the hot paths call (kept
 * static inline, as they were in one file).  gemm.c holds the design note; gemm_emit.c the
 * code generation, gemm_model.c the model, gemm_run.c the execution. */
#ifndef DYN_GEMM_INT_H
#define DYN_GEMM_INT_H

#include "gemm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Core.h>

#define MAX_MR 16        /* rows of a register tile: strided A rows need a pointer or index
                            register each, and x86-64 has 16 general registers */
#define MAX_V 4          /* vectors across a tile */
#define MAX_FAM 3        /* families kept (an eager one costs about 1/3 of the compile time) */
#define EAGER_FAM 2      /* families compiled with the engine; the rest when first weighed */
#define MAX_PIECES 6     /* pieces in the decomposition of an edge of < 2*mr rows */
#define MAX_ACC 64       /* accumulators (vectors) of one kernel, all sets */
#define MAX_CAND 64      /* enumerated tiles remembered for gemm_describe */
#define MAX_MODS 8       /* modules, compiled by up to one thread per CPU */
/* Remembered shapes: PLAN_SETS sets of PLAN_WAYS, the least recently used way replaced.
 * Direct-mapped (64 slots), two problems that one program runs in turn could share a slot,
 * and each call then weighed its plan again (tens of microseconds, where a convolution's
 * gathered parts or a model's layers are GEMMs of a few microseconds to a millisecond). */
#define PLAN_SETS 64
#define PLAN_WAYS 4
#define PLAN_CACHE (PLAN_SETS * PLAN_WAYS)
#define PLAN_MARGIN 0.03 /* how much faster a plan weighed later must be to win (gemm_model.c) */

/* A micro-kernel's beta: bit 0 adds to C; UK_PREFETCH_C asks it to fetch the C tile for
 * writing before its k loop.  That pays where C lives beyond L2 or its rows alias in L1
 * (C rows a multiple of 4 KiB apart): 4096 x 4096 x 1 ran in 1.85 ms with it and 3.0
 * without, 1024^3 6-8% faster.  Where C stays in L2 and k is short, the fetches crowd
 * the stores: 672 x 448 x 3 took 30.7 us with them, 12.7 without (14x32 tiles). */
#define UK_PREFETCH_C 2
/* UK_GROUP_A asks a tile that reads A in place, its rows crowding one set of L1, to take
 * them in two groups over each line's k steps (emit_uk; a_grouped below says when);
 * kernels emitted without that loop ignore it. */
#define UK_GROUP_A 4
/* UK_STREAM_C asks a full tile to write C = with streaming stores where C and its rows
 * start on lines (c_streamed below says when); others ignore it. */
#define UK_STREAM_C 8
typedef void (*UkFn)(int64_t kc, const void *a, int64_t a_rs, int64_t a_cs, const void *b,
                     int64_t b_rs, void *c, int64_t c_rs, int64_t n_rem, int64_t m_rem,
                     int32_t beta);
typedef void (*UkPackFn)(int64_t kc, const void *a, int64_t a_rs, int64_t a_cs, const void *b,
                         int64_t b_rs, void *c, int64_t c_rs, int64_t n_rem, int64_t m_rem,
                         int32_t beta, void *packed);
typedef void (*UkPfFn)(int64_t kc, const void *a, int64_t a_rs, int64_t a_cs, const void *b,
                       int64_t b_rs, void *c, int64_t c_rs, int64_t n_rem, int64_t m_rem,
                       int32_t beta, const void *pf, int64_t pf_rs, int64_t l0, int64_t l1, int64_t sh);
#define PACK_AHEAD 16       /* rows (77 x 4096 x 4096: 4 rows 2% slower, 32 1% slower) */
typedef void (*PackBFn)(int64_t kc, int64_t nc, const void *b, int64_t b_rs, void *out,
                        int64_t nr);
typedef void (*PackAFn)(int64_t kc, const void *a, int64_t lda, void *out, int64_t h);
/* The row-streaming kernel (emit_rows) for C of up to ROWS_MAX rows, ROWS_U rows of B a step. */
#define ROWS_MAX 4
#define ROWS_U 4
typedef void (*RowsFn)(int64_t k, int64_t n, const void *a, int64_t a_sm, int64_t a_sk,
                       const void *b, int64_t b_sk, void *c, int64_t c_sm);

/* The inner-product kernels (emit_dot), for a C of at most DOT_MAXN columns: a tile of h
 * rows and w <= DOT_WMAX columns, vectors along k. */
#define DOT_WMAX 4
#define DOT_STRIPS 4
#define DOT_MAXN (DOT_STRIPS * DOT_WMAX)
/* Tiles of 8 rows ran at the speed of 6 (8x1 240 against 6x1 233 GFLOP/s a core in L1, 8x2
 * 271 against 270, 8x3 266 against 267 on Zen 5) and were three more functions: compiling
 * the inner products took 37-41 ms with them, 32-34 without. */
#define DOT_HMAX 6
typedef void (*DotFn)(int64_t kc, const void *a, int64_t a_rs, const void *b, int64_t b_rs,
                      void *c, int64_t c_rs, int64_t c_cs, int64_t m_rem, int64_t n_rem,
                      int32_t beta);
/* B^T's rows from a B with unit column stride, W columns at most (emit_packbt). */
typedef void (*PackBtFn)(int64_t kc, const void *b, int64_t b_sk, void *out, int64_t n);
typedef struct DotSet {
  int hmax[DOT_WMAX + 1];                     /* the tallest height of each width */
  bool has[DOT_WMAX + 1][DOT_HMAX + 1];       /* heights emitted (dot_setup) */
  int ks[DOT_WMAX + 1][DOT_HMAX + 1];         /* accumulator sets */
  DotFn fn[DOT_WMAX + 1][DOT_HMAX + 1];
  double bt_block;                            /* seconds packbt takes for W rows (measured) */
  double vsec[DOT_WMAX + 1][DOT_HMAX + 1];    /* seconds per vector of k (measured) */
  double call[DOT_WMAX + 1][DOT_HMAX + 1];    /* seconds per call besides: lane sums, C */
} DotSet;

typedef struct Tile { int mr, v, regs, ksplit; double score; bool kept; } Tile;

typedef struct Family {
  int mr, v, nr;
  UkFn uk[MAX_MR + 1];           /* by height, masked: any n_rem in 1..nr, m_rem in 1..h */
  UkFn ukf[MAX_MR + 1];          /* by height, full tiles only (== uk with AVX-512); height
                                    mr is ukq's (tile_call), and uk[mr] only without cheap masks */
  UkPackFn ukp;                  /* height mr, masked, reading B in place and packing it */
  UkPfFn ukq;                    /* height mr (full tiles; all where masks are cheap), fetching
                                    lines of the next strip into L2 when asked */
  bool has[MAX_MR + 1];          /* heights emitted */
  int ksplit[MAX_MR + 1];
  double ksec[MAX_MR + 1];       /* seconds per k step of a tile of this height: measured
                                    by gemm_calibrate(), else from the FMA model */
  double call_s[MAX_MR + 1];     /* seconds a call costs beyond its k steps (its set-up, the
                                    C tile's stores), measured (0: not measured) */
  bool measured;
  /* The best split of an edge of r rows (r < 2*mr) into emitted heights, the last piece
   * possibly taller than the rows it stores: [0] when B is packed (a piece re-reads its
   * strip from L1), [1] when B is read in place (a piece re-reads it from L2). */
  uint8_t dec_n[2][2 * MAX_MR];
  uint8_t dec[2][2 * MAX_MR][MAX_PIECES];
  double dec_sec[2][2 * MAX_MR];
  double score;
} Family;

/* gemm_half.c's vdpbf16ps tile: rows by columns (two 512-bit vectors of f32); the edges
 * take DP_NH heights (DP_MR, 8, 4, 2, 1: any count of rows is a sum of them) by one or two
 * vectors. */
#define DP_MR 12
#define DP_NR 32
#define DP_NH 5

/* A problem after normalisation: C has unit column stride (or ctmp), sizes > 0. */
typedef struct Prob {
  int64_t batch, m, n, k;
  int64_t k_all;                  /* k of the whole problem (k: a thread block's share) */
  const char *a; int64_t a_sb, a_sm, a_sk;
  const char *b; int64_t b_sb, b_sk, b_sn;
  char *c; int64_t c_sb, c_sm, c_sn;
  bool acc;
  bool swapped, ctmp;
  volatile int *stop;
} Prob;

typedef struct Plan {
  int fam;
  bool pack_a, pack_b;
  int64_t kc, mc, nc;
  int tb, tm, tn, tk;             /* thread grid over batch, m, n and k */
  int64_t bb, mb, nbk, kb;        /* per-block extents: batches, rows, columns, k */
  bool nc_l2;                     /* nc sized for the packed B panel to stay in L2 */
  bool rows;                      /* the row-streaming kernel (m <= ROWS_MAX); nc: its chunk */
  bool dot;                       /* inner products (n <= DOT_MAXN); pack_b: B^T packed */
  bool fused;                     /* B packed by the first tiles (the busiest block's) */
  int dw[DOT_STRIPS];             /* ... their strips' widths (0 past the last) */
  int64_t edge;                   /* > 0: C's last `edge` columns are a problem of their own
                                     (inner products); the rest is this plan (plan_choose) */
  double t_comp, t_mem, t_stall, t_pack, t_sync, t_share, t_red, t_edge, t;
} Plan;

/* A remembered choice: the normalised problem's sizes, strides and flags, and its plan. */
#define KEY_LEN 14
struct CacheEntry { bool used; int64_t key[KEY_LEN]; Plan plan; };

struct GemmKernels {
  DynElem elem;
  int esize, W;                  /* bytes per element, elements per vector */
  bool cheap_masks;              /* AVX-512: masked loads/stores cost about as much as plain
                                    ones (heights under mr get masked kernels only) */
  HwModel hw;
  Jit *jit;
  PackAFn packa;                 /* row-major A -> panels, any height up to the largest mr */
  PackBFn packb;                 /* unit-stride B -> panels of any nr */
  PackBtFn packbt;               /* B^T's rows: inner products' B, and panels of B = K^T */
  RowsFn rows[ROWS_MAX + 1];     /* by rows of C: the row-streaming kernels */
  double rows_sec[ROWS_MAX + 1]; /* their seconds per step of one row of B, one vector wide */
  int nfam;
  Family fam[MAX_FAM];
  int ncand;
  Tile cand[MAX_CAND];
  double compile_ms;
  int nfuncs;
  double call_base;               /* the cheapest family's tallest tile's call_s (calibrate): the
                                     model charges a tile its call_s beyond this */
  double slow;                    /* the kernels' sustained time over their calibrated time
                                     (gemm_sustain; 0 or 1: the same; gemm_slow) */
  /* The row-streaming kernels are compiled the first time a plan would weigh them (B larger
   * than the last cache): most programs never need them, and they are a tenth of the
   * compile.  rows_state: 0 not yet, 1 ready, -1 failed (plans then leave them out). */
  pthread_mutex_t part_lock;       /* compiling a part on first need */
  _Atomic int rows_state;
  double rows_ms;
  /* The inner-product kernels, compiled the same way, the first time a C of at most
   * DOT_MAXN columns is weighed. */
  DotSet dot;
  _Atomic int dot_state;
  double dot_ms;
  int dot_nfuncs;
  /* The families past EAGER_FAM, compiled the same way, the first time a problem's columns
   * fit one of them in fewer whole strips than the eager ones (famx_wanted). */
  _Atomic int famx_state;
  double famx_ms;
  GemmForce force;               /* tests and experiments override the model */
  /* Chosen plans by shape (direct-mapped): a repeated shape skips the model. */
  pthread_mutex_t cache_lock;
  struct CacheEntry *cache;
  _Atomic long weighed;           /* plans run_prob had to weigh (not cached) */
  _Atomic uint64_t epoch;        /* names this set and its forcing for last_plan */
  /* Packing buffers per thread block, reused across calls; a concurrent second caller
   * allocates its own. */
  pthread_mutex_t ws_lock;
  int nws;
  void **ws;
  size_t *ws_bytes;
  /* A 16-bit engine (gemm_half.c): the f32 engine it borrows, its own entry points, whether
   * bf16 pairs go to vdpbf16ps, and that kernel (NULL where the model's code cannot run
   * here). */
  GemmKernels *wide;
  const struct GemmHalfOps *half;
  bool dp;
  void *dpk[DP_NH][2];
  struct DpMemo *dp_memo;        /* the plans of the shapes run last (gemm_half.c) */
  double dpsec[DP_NH][2];        /* seconds a pair of k of each, calibrated (0: not measured) */
};

/* The factor gemm_sustain put on the kernels' calibrated times (1 where it put none). */
static inline double gemm_slow(const GemmKernels *g) { return g->slow > 0 ? g->slow : 1; }
/* Whether family fi's kernels are compiled and measured (or, for a model this CPU cannot
 * run, stand as modelled). */
static inline bool fam_ready(const GemmKernels *g, int fi) {
  return fi < EAGER_FAM || atomic_load_explicit(&((GemmKernels *)g)->famx_state, memory_order_acquire) > 0;
}

static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* The span after which L1's set index repeats: x86 L1 data caches are virtually indexed,
 * physically tagged, so one way spans a 4 KiB page (12 ways for 48 KiB), and operands a
 * multiple of 4 KiB apart collide.  Taken for every CPU (Neoverse V2's 4 ways of 64 KiB
 * span 16 KiB); the ways themselves are the hw file's (hw_l1_ways, below). */
#define SET_SPAN 4096

static inline int64_t gcd64(int64_t a, int64_t b) {
  while (b) { int64_t t = a % b; a = b; b = t; }
  return a;
}

/* Lines one L1 set holds from `count` accesses `stride` bytes apart (each within a line);
 * a stride of 0 reads one line over and over. */
static inline int64_t lines_per_set(int64_t stride, int64_t count) {
  if (count <= 1 || stride == 0) return count < 1 ? count : 1;
  int64_t s = (stride < 0 ? -stride : stride) % SET_SPAN;
  if (s == 0) return count;
  int64_t pos = SET_SPAN / imax(gcd64(s, SET_SPAN), 64);   /* distinct set positions hit */
  return cdiv(count, imin(pos, count));
}

/* ---- hardware figures, with safe floors for an incomplete model ---- */

static inline int hw_fma_units(const HwModel *h) { return h->fma_units > 0 ? h->fma_units : 1; }
static inline int hw_fma_lat(const HwModel *h) { return h->fma_latency > 0 ? h->fma_latency : 4; }
static inline int hw_vregs(const HwModel *h) { return h->vec_regs >= 8 ? h->vec_regs : 16; }
static inline int hw_vbits(const HwModel *h) { return h->vector_bits >= 128 ? h->vector_bits : 128; }
static inline double hw_bf16_per_fma(const HwModel *h) { return h->bf16_per_fma > 0 ? h->bf16_per_fma : 1; }
static inline double hw_ghz(const HwModel *h) { return h->ghz > 0 ? h->ghz : 2.0; }
/* L1 associativity, the hw file's (l1.ways; hw.c gives an L1 without it capacity / 4 KiB,
 * x86's rule), or capacity / SET_SPAN for a model made without a file. */
static inline int hw_l1_ways(const HwModel *h) {
  int w = hw_ncaches(h) > 0 && h->level[0].ways > 0 ? h->level[0].ways
                                                    : (int)(hw_cache_bytes(h, 0) / SET_SPAN);
  return w >= 2 ? w : 8;
}

/* The plan cache's key for a problem on nthreads, and its slot (gemm_run's lookup, on every
 * call that misses the thread's last plan).  B's offset in a line is part of it: the model
 * prices B read in place by whether its vectors straddle lines (model_block). */
static inline void plan_key(const Prob *p, int nthreads, int64_t *key) {
  int64_t k[KEY_LEN] = { p->batch, p->m, p->n, p->k, p->a_sb, p->a_sm, p->a_sk, p->b_sb, p->b_sk,
                         p->b_sn, p->c_sb, p->c_sm, p->c_sn,
                         (int64_t)(nthreads * 4 + p->acc * 2 + p->ctmp) << 6 | (int64_t)((uintptr_t)p->b & 63) };
  memcpy(key, k, sizeof k);
}

/* The key's set.  Independent products summed, then mixed: a chain of 14 multiplies took
 * longer. */
static inline unsigned key_hash(const int64_t *key) {
  uint64_t h = 0;
  for (int i = 0; i < KEY_LEN; i++) h += (uint64_t)key[i] * (0x9E3779B97F4A7C15ull + 2 * (uint64_t)i);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return (unsigned)(h >> 40) % PLAN_SETS;
}

/* The names of the generated functions, which gemm_emit.c gives and gemm.c looks up. */
static inline void rows_name(char *out, size_t n, const GemmKernels *g, int h) {
  snprintf(out, n, "gemm_%s_rows%d", elem_name(g->elem), h);
}

static inline void packa_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packa", elem_name(g->elem));
}

static inline void uk_name(char *out, size_t n, const GemmKernels *g, const Family *f, int h,
                    bool masked) {
  snprintf(out, n, "gemm_%s_uk%dx%d_h%d%s", elem_name(g->elem), f->mr, f->nr, h,
           masked ? "_m" : "");
}

static inline void ukp_name(char *out, size_t n, const GemmKernels *g, const Family *f) {
  snprintf(out, n, "gemm_%s_uk%dx%d_pack", elem_name(g->elem), f->mr, f->nr);
}

static inline void ukq_name(char *out, size_t n, const GemmKernels *g, const Family *f) {
  snprintf(out, n, "gemm_%s_uk%dx%d_pf", elem_name(g->elem), f->mr, f->nr);
}

static inline void packbt_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packbt", elem_name(g->elem));
}

static inline void dot_name(char *out, size_t n, const GemmKernels *g, int h, int w) {
  snprintf(out, n, "gemm_%s_dot%dx%d", elem_name(g->elem), h, w);
}

static inline void packb_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packb", elem_name(g->elem));
}
/* The lines a kernel reading B in place asks for of the row PACK_AHEAD rows ahead, and the
 * element of the row that its c-th request names: 64 bytes apart, and for the packing
 * kernel one more at the row's last element.  A row of nr elements that does not start on
 * a line touches one line more than its bytes fill (B's rows 676 floats apart start 16
 * bytes further along a line each), and the strip the fetching tiles bring to L2 for the
 * packing tile is asked for a row's lines as if it started on one (two of a row's three):
 * the third of most rows was read from memory as the packing tile reached it (192 x 676 x
 * 2304 on one thread at 69% of the kernel's peak, against 91% with 672 columns).  The other
 * kernels (the plain ones, every tile reading B in place) keep to the lines its bytes fill. */
static inline int gemm_ahead_lines(int bytes, bool pack) { return (int)cdiv(bytes, 64) + pack; }
static inline int gemm_ahead_elem(int c, int row_el, int es) { return (int)imin(c * (64 / es), row_el - 1); }

/* Run the kernel for a piece of hs rows on a tile of height h, w columns wide: the
 * unmasked one when the piece fills the tile.  A full tile of the full height is the
 * fetching kernel's (UK_PF, unmasked), asking for the lines fe names or none; a piece of it
 * the masked plain kernel's.  With AVX-512 the other heights' kernels are masked only
 * (cheap_masks); the full height's, which runs nearly every step of a large product, is
 * not: masked loads took 7% of an Emerald Rapids core's rate (gemm.c, cheap_masks). */
typedef struct Fetch { const void *pf; int64_t pf_rs, l0, l1, sh; } Fetch;
static inline void tile_call(const GemmKernels *g, const Family *f, int h, int hs, int64_t w, int64_t kc,
                      const void *a, int64_t a_rs, int64_t a_cs, const void *b, int64_t b_rs,
                      void *c, int64_t c_rs, int32_t beta, const Fetch *fe) {
  static const Fetch none = { 0 };
  if (!fe) fe = &none;
  if (h == f->mr && hs == h && w == f->nr)
    f->ukq(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, w, hs, beta, fe->pf, fe->pf_rs, fe->l0, fe->l1, fe->sh);
  else
    (w == f->nr && hs == h ? f->ukf[h] : f->uk[h])(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, w, hs, beta);
}
/* The row pieces of an m-extent of mt rows: full mr-row tiles, then the edge (the last
 * mr + r rows when there is a full tile to borrow from, so 16 = 8 + 8 rather than 14 + 2)
 * split as the compile-time DP said. */
typedef struct Pieces { const Family *f; int64_t full, t, r0, mt; int rem, d, tab; } Pieces;

static inline void pieces_init(Pieces *it, const Family *f, int64_t mt, int tab) {
  it->f = f;
  it->mt = mt;
  it->full = mt / f->mr;
  it->rem = (int)(mt % f->mr);
  if (it->rem && it->full) { it->full--; it->rem += f->mr; }
  it->t = 0;
  it->d = 0;
  it->r0 = 0;
  it->tab = tab;
}

/* The next piece: rows [r0, r0 + hs) computed by a tile of height h >= hs. */
static inline bool pieces_next(Pieces *it, int64_t *r0, int *h, int *hs) {
  if (it->t < it->full) *h = it->f->mr, it->t++;
  else if (it->rem && it->d < it->f->dec_n[it->tab][it->rem])
    *h = it->f->dec[it->tab][it->rem][it->d++];
  else return false;
  *r0 = it->r0;
  *hs = (int)imin(*h, it->mt - it->r0);
  it->r0 += *hs;
  return true;
}

/* The rows of A a tile of height h takes at a time in its grouped loop (UK_GROUP_A), or 0
 * where it has none: a tile of more rows than one L1 set keeps beside a line of B (its ways
 * less one) takes them in two groups that fit; only tiles without accumulator sets (short
 * tiles never crowd a set). */
static inline int uk_group_rows(const HwModel *hw, int h, int ks) {
  int fit = hw_l1_ways(hw) - 1;
  return ks == 1 && h > fit && h <= 2 * fit ? (h + 1) / 2 : 0;
}

/* Whether a plan's full tiles read A in place in groups of rows (UK_GROUP_A): A row-major,
 * its rows spaced so that a full tile's crowd one set of L1 (rows a multiple of 4 KiB
 * apart), and the family's full tile has the grouped loop. */
static inline bool a_grouped(const GemmKernels *g, const Family *f, int64_t a_sm, int64_t a_sk, bool pack_a) {
  return !pack_a && a_sk == 1 && uk_group_rows(&g->hw, f->mr, f->ksplit[f->mr]) &&
         lines_per_set(a_sm * g->esize, f->mr) >= hw_l1_ways(&g->hw);
}

/* Whether the full tiles write C with streaming stores (UK_STREAM_C) rather than fetch it
 * first: C = (not +=, not through scratch), each tile written once (kc covering the k
 * range of a thread block, `krange`), into a C larger than the last cache whose rows are
 * whole lines apart (the kernel checks that C itself starts on one), whose lines would
 * otherwise each be read for ownership from memory and evicted again.  2 threads of a Zen
 * 4 guest, best of 15 rounds, fetched / streamed in two processes back to back (oneDNN's
 * time steady beside them), ms: 4096 x 4096 x 1 on 6x64 tiles 2.47 / 2.03, on 14x32 4.86 /
 * 3.08; x 16 3.70 / 3.02 and 7.28 / 3.68; x 64 10.5 / 9.9 and 20.1 / 18.0; x 256 41.8 /
 * 41.2; batches 8 x 1024 x 1024 x 64 5.25 / 4.98 (6x64), 16 x 512 x 512 x 128 5.27 / 5.04. */
static inline bool c_streamed(const GemmKernels *g, const Prob *p, int64_t kc, int64_t krange, bool acc, bool ctmp) {
  double whole = (double)p->batch * (double)p->m * (double)p->n * g->esize;
  return !acc && !ctmp && kc >= krange && (p->c_sm * g->esize) % 64 == 0 &&
         whole > (double)sched_last_cache_bytes(&g->hw);
}

/* Whether a block of mt rows packs B in its first tiles (ukp) rather than before them: B
 * with unit column stride, and a first piece of full height. */
static inline bool fused_packing(const Family *f, const Prob *p, const Plan *pl, int64_t mt) {
  int64_t rows = imin(pl->mc, mt);
  return pl->pack_b && p->b_sn == 1 && f->ukp && rows / f->mr > (rows % f->mr ? 1 : 0);
}
/* The height of the next row piece with `left` rows to go: the tallest tile while it fits,
 * then the tallest emitted height that fits the rest.  One strip of width w takes w's
 * heights; several take the widest's (emitted for every width). */
static inline int dot_piece(const DotSet *d, int w, int64_t left) {
  int h = d->hmax[w];
  while (h > 1 && (h > left || !d->has[w][h])) h--;
  return h;
}

static inline int dot_hw(const Plan *pl) { return pl->dw[1] ? DOT_WMAX : pl->dw[0]; }

/* ---- what crosses the files ---- */

/* gemm_emit.c: emit the functions `what` names (EMIT_*) into nmod modules, one context
 * each, balanced by estimated work; returns how many functions. */
enum { EMIT_TILES = 1, EMIT_ROWS = 2, EMIT_DOTS = 4, EMIT_FAMX = 8 };   /* EMIT_TILES: the eager families' */
int gemm_emit_all(GemmKernels *g, LLVMContextRef *ctx, LLVMModuleRef *mod, int nmod, int what);
/* The pass pipeline for the kernels.  They are written the way the back end wants them
 * (explicit vectors, unrolled register tiles, loop-invariant masks), so the only IR pass
 * they need is SROA to turn their allocas into registers; "default<O3>" would spend most
 * of the compile budget and its unroller only grows the code. */
#define GEMM_PIPELINE "function(sroa)"
/* gemm_emit.c: emit the functions `what` names and add them to the JIT, compiled in
 * parallel; how many functions, 0 on failure. */
int gemm_compile_part(GemmKernels *g, int what, const char *prefix, char *err, size_t errlen);


/* gemm_run.c: rows [0, mt) x [0, kc) of A (any strides) packed as the tiles of f read them:
 * its row pieces (pieces_init with tab) one after another, each a panel out[k * h + i]. */
void gemm_pack_a(const GemmKernels *g, const Family *f, const char *a, int64_t a_sm, int64_t a_sk, int64_t mt,
                 int64_t kc, int tab, char *out);

/* gemm_model.c: the register tiles and inner-product tiles with their modelled rates, the
 * edge DP, calibration, and the choice of a plan. */
void gemm_enumerate_tiles(GemmKernels *g);
void gemm_dot_setup(GemmKernels *g);
void gemm_plan_edges(const GemmKernels *g, Family *f);
void gemm_calibrate(GemmKernels *g, int f0, int f1);
void gemm_calibrate_rows(GemmKernels *g);
void gemm_calibrate_dots(GemmKernels *g);
/* The plan gemm_plan_choose weighs before it considers C's last columns apart (edge):
 * one whose tiles compute every column. */
void gemm_plan_whole(GemmKernels *g, const Prob *p, int nthreads, Plan *best);
void gemm_plan_choose(GemmKernels *g, const Prob *p, int nthreads, Plan *best, Plan *cands, int *ncands,
                      int maxc);
Prob gemm_part_cols(const GemmKernels *g, const Prob *p, int64_t e);
void gemm_plan_summary(const GemmKernels *g, const Plan *pl, GemmPlanInfo *out);
/* gemm_model.c: compile and calibrate a part compiled on first need (EMIT_ROWS, EMIT_DOTS);
 * false when it cannot be had. */
bool gemm_part_ensure(GemmKernels *g, int what);
/* gemm.c: find family f's kernels in the JIT; false (err) when one is missing. */
bool gemm_bind_family(GemmKernels *g, Family *f, char *err, size_t errlen);
/* gemm_model.c: validate and normalise a call's arguments into a problem (gemm_run.c runs
 * it, the model prices it). */
bool gemm_normalise(const GemmKernels *g, const GemmArgs *x, Prob *p, char *err, size_t errlen);

/* gemm_half.c: free a 16-bit engine's memo of plans (gemm_free). */
void gemm_half_free_memo(GemmKernels *g);

/* A 16-bit engine's (g->wide set) run, code, plan text and prediction, which gemm_run,
 * gemm_code, gemm_describe and gemm_predict hand over to.  gemm_half.c sets them when it
 * makes the engine: it sits above the f32 engine's files and calls them, so they reach it
 * through these pointers, never by name. */
/* gemm_hpack.c: the 16-bit engine's copies.  n elements widened to f32 from s (stride ss)
 * into d, or rounded from s into d (stride ds), bf16 or f16; a panel of w lines (from line
 * l0 of `lines`, ls apart, k stride sk) packed as kp bf16 pairs along k, o[p][l], lines
 * past the end and an odd k's last half zero. */
void hpack_widen(bool bf, const uint16_t *s, int64_t ss, float *d, int64_t n);
void hpack_narrow(bool bf, const float *s, uint16_t *d, int64_t ds, int64_t n);
void hpack_pairs(const uint16_t *s, int64_t ls, int64_t sk, int64_t l0, int64_t lines, int w,
                 int64_t kp, int64_t k, uint32_t *o);

typedef struct GemmHalfOps {
  bool (*run)(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen);
  bool (*code)(GemmKernels *g, const char *what, Buf *out, char *err, size_t errlen);
  void (*describe)(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out);
  double (*predict)(GemmKernels *g, const GemmArgs *x, int nthreads);
} GemmHalfOps;

/* The GEMM engines' software overheads (gemm_model.c's table; gemm_half.c uses them too):
 * CALL_CYC cycles a kernel call costs beyond its sums and C tile; a fork-join is
 * sched_sync_s's (sched.c: dyn --calibrate's figure, else 0.3 us).
 * Measured on 2 threads of Zen 5, a fork-join took 0.16 us with empty tasks and 0.2-0.4 us
 * beside small products (241 x 31 x 13: 1.05 us on one thread, 0.73 on two; 172 x 20 x 83:
 * 3.8 and 2.4).  It was 2 us, which kept products of up to 4 us on one thread: 64 x 64 x 64
 * ran in 2.2 us there and in 1.3 on two.  Workers asleep (no call for 100 us) take about
 * 10 us more to wake; a run of calls pays that once. */
#define CALL_CYC 20.0

#endif
