/* gemm.c -- the CPU contraction engine: C[b,m,n] (+)= sum_k A[b,m,k] B[b,k,n] in f32 or f64,
 * every operand addressed by element strides given at run time, compiled once per element
 * type and machine, and run on any shape, layout and thread count with no recompile.
 *
 * Design note.  This follows the sample-free scheduler of Vortex ("A Sample-Free Compilation
 * Framework for Efficient Dynamic Tensor Computation", SC '25, arXiv 2409.01075): kernels
 * are built bottom-up from the hardware (HwModel), never tuned on example shapes, and the
 * choice among the few compiled variants is made per call by an analytical model.
 *  - Level 0, registers.  Register tiles h x nr (nr = v vectors) are enumerated under the
 *    vector register budget (h*v accumulators + v loads of B + 1 broadcast of A <= vec_regs)
 *    with at least fma_latency * fma_units independent accumulators, and scored by FLOPs
 *    per element loaded, 2*h*nr / (h + nr); tiles with more loads than FMAs per k step are
 *    dropped (cores have about as many load ports as FMA pipes).  Kept: the best tile of
 *    each width, then of those the best scored and the widest, then the narrowest, up to
 *    MAX_FAM "families", because the run-time model needs the spread: wide tiles stream B
 *    in place in longer row pieces (small M), narrow ones waste less on an n-edge.  Each family is emitted as LLVM IR with
 *    explicit vectors, llvm.fma and broadcasts, for height mr and the powers of two below
 *    it, with masked loads and stores (llvm.masked.*) for the n-edge and a row mask for the
 *    m-edge (on targets without cheap masks an unmasked twin serves full tiles).  Short
 *    tiles that cannot hide the FMA latency split k over several accumulator sets.  An edge
 *    of r rows is split by a compile-time DP into pieces, the last possibly padded (a
 *    taller tile that stores fewer rows), each charged its FMA time or the time to re-read
 *    its B strip, whichever is larger.  A kernel takes A's row and column strides as
 *    arguments: one kernel reads a packed panel, a column-major or a row-major A in place.
 *  - Hybrid scoring.  After compiling, every kernel is timed once on operands that stay in
 *    L1 (about a millisecond in all): the hardware's real rate per tile height replaces
 *    the FMA count, which cannot see e.g. that Zen 5 issues about one broadcast load per
 *    cycle (a 16x16 tile then runs at half speed).  Hardware, never shapes.
 *  - Cache levels.  kc, mc, nc are formulas of the capacities and the run-time sizes: the
 *    kc x nr micro-panel of B may fill L1 (it is read in order and L2 resends what L1 drops,
 *    while a long k loop amortises each C-tile update), an mc x kc block of A takes half of
 *    L2, a kc x nc panel of B half of this core's share of L3; each balanced so the last
 *    block is not a sliver, and all passed to the kernels as arguments.  Packing is a
 *    choice: A into row-piece panels (generated IR transposes W x W blocks in registers),
 *    B into nr-wide panels (generated IR, read row by row, or, where the first piece of a
 *    block's rows is a full tile, by that tile's kernel as it computes); either may be
 *    read in place.
 *  - Top level.  The (batch, m, n) space is cut into a grid of thread blocks at run time
 *    (and k, below).
 *    The model scores every (family, packing, grid): kernel time from the measured rates
 *    and the DP's edge splits, per-call and C-tile costs, operand bytes from the level
 *    each operand's footprint fits over that level's per-core bandwidth (shared when all
 *    cores stream), B strips read in place costing a line more each (and a few per cent
 *    of kernel time when their vectors straddle lines or the strip crowds L1), L1 set
 *    conflicts of strided operands (power-of-two leading dimensions) as stalls, packing
 *    traffic, load imbalance (the busiest block), C lines two cores both write (an N split
 *    whose edge falls inside a line) and a fork-join; the cheapest runs, and is remembered
 *    per shape (PLAN_CACHE), so a repeated shape skips the model.
 *  - Row streaming.  For a C of at most ROWS_MAX rows (a matrix-vector product) and a B
 *    larger than the last cache, tiles would read B in strips of nr columns down its rows,
 *    a walk across pages that the hardware prefetchers follow badly: B then arrives at half
 *    the bandwidth.  A kernel that reads B row by row and keeps C's rows in L1 (emit_rows)
 *    is one more candidate, scored by its measured rate and B's bandwidth.  Its four
 *    functions are compiled (and timed) the first time a shape makes it a candidate.
 *  - Inner products.  For a C of at most DOT_MAXN columns (a matrix times a vector, or a few
 *    vectors) a tile of nr columns leaves most lanes idle.  Kernels of h x w (w <= 4) keep
 *    one vector accumulator per element of C, along k, and sum the lanes at the end: A is
 *    read once, in rows (a row piece's strips of columns in turn, from L1), and B's
 *    columns, as rows of B^T (in place when contiguous, else packed), stay in L1.  Eight
 *    functions on AVX-512 (heights 6 and 1 of each width: height 2 cost 8 ms of the
 *    part's compile and gained up to a quarter on a C of 2 to 5 rows, 5 x 16 x 257) and
 *    one that packs B^T, compiled and timed like the row-streaming ones, on first need;
 *    the model weighs them beside the tiles.  They
 *    also take a wider C's last n mod nr <= DOT_MAXN columns, as a run of their own,
 *    where a tile would compute a whole strip for them (plan_choose).
 *  - k split.  A small C over a long k gives the grid too few blocks to share: the threads
 *    then split k, each block after the first summing into its own copy of C, which are
 *    added into C at the end, by all threads (a grid dimension like the others, weighed
 *    by the model).
 * Limits: no TLB, no prefetcher and no frequency model; bandwidths are the hw file's;
 * L1 ways are derived as capacity / 4 KiB (true of x86's VIPT L1s); the call and fork-join
 * costs are software constants below.  Calibration runs on whatever the machine is doing at
 * compile time (best of several runs).  C must not overlap A or B; f32 and f64 only; alpha
 * is 1 and beta 0 or 1.
 */
#include "config.h"
#include "dyn.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Core.h>

#define MAX_MR 16        /* rows of a register tile: strided A rows need a pointer or index
                            register each, and x86-64 has 16 general registers */
#define MAX_V 4          /* vectors across a tile */
#define MAX_FAM 2        /* families kept (each costs about 1/3 of compile time) */
#define MAX_PIECES 6     /* pieces in the decomposition of an edge of < 2*mr rows */
#define MAX_ACC 64       /* accumulators (vectors) of one kernel, all sets */
#define MAX_CAND 64      /* enumerated tiles remembered for gemm_describe */
#define MAX_MODS 8       /* modules, compiled by up to one thread per CPU */
#define PLAN_CACHE 64    /* remembered shapes */

/* The pass pipeline for the kernels.  They are written the way the back end wants them
 * (explicit vectors, unrolled register tiles, loop-invariant masks), so the only IR pass
 * they need is SROA to turn their allocas into registers; "default<O3>" would spend most
 * of the compile budget and its unroller only grows the code. */
#define GEMM_PIPELINE "function(sroa)"

/* Software overheads the model charges (not hardware figures): a kernel call costs about
 * CALL_CYC cycles beyond its FMAs and its C tile, and a fork-join on a pool whose workers
 * spin costs about SYNC_S seconds.  Measured on 2 threads of Zen 5: 0.16 us with empty tasks
 * and 0.2-0.4 us beside small products (241 x 31 x 13: 1.05 us on one thread, 0.73 on two;
 * 172 x 20 x 83: 3.8 and 2.4).  It was 2 us, which kept products of up to 4 us on one
 * thread: 64 x 64 x 64 ran in 2.2 us there and in 1.3 on two.  Workers asleep (no call for
 * 100 us) take about 10 us more to wake; a run of calls pays that once. */
#define CALL_CYC 20.0
#define SYNC_S 0.3e-6
/* A plan that packs runs through a workspace: its lock, the canaries armed and checked
 * around it, the packing calls and the thread blocks, where a plan reading both operands in
 * place may call one kernel directly (2 x 2 x 2: 80 ns packed, 23 ns in place). */
#define WS_S 40e-9

/* Cores that split C's columns write the same cache line wherever a block's edge falls
 * inside one; the line then moves between the cores on every pass over k.  Measured
 * around 30-100 ns a line (12 x 100 x 100 x 64 split along N: 1.6-3x the batch split). */
#define SHARE_S 60e-9

/* How much slower kernels reading B in place run than the measured rates say, when the
 * strip's vectors straddle lines (packed B: 7-10% faster at 16 x 511 x 511 x 128, in place
 * 4% faster at 12 x 100 x 100 x 64, where packing costs relatively more) and when the
 * strip fills most of L1 (packed B 3-5% faster at 1000 x 768 x 768). */
#define SPLIT_LOADS 0.05
#define CROWDED_L1 0.07
/* Lines more that each row's piece of a strip costs when B in place comes from memory
 * (see model_block) */
#define FAR_PIECE 12
/* Splitting k over the threads: each block after the first sums its share into its own copy
 * of C, added to C at the end; weighed when C is at most this large and k is long. */
#define KSPLIT_MAX_C (256 << 10)
#define KSPLIT_MIN_K 256

/* A micro-kernel's beta: bit 0 adds to C; UK_PREFETCH_C asks it to fetch the C tile for
 * writing before its k loop.  That pays where C lives beyond L2 or its rows alias in L1
 * (C rows a multiple of 4 KiB apart): 4096 x 4096 x 1 ran in 1.85 ms with it and 3.0
 * without, 1024^3 6-8% faster.  Where C stays in L2 and k is short, the fetches crowd
 * the stores: 672 x 448 x 3 took 30.7 us with them, 12.7 without (14x32 tiles). */
#define UK_PREFETCH_C 2
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
  PackBtFn packbt;
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
                                    by calibrate(), else from the FMA model */
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

/* The plan this thread ran last, for a loop over one shape: found without the hash or the
 * lock (a small call's whole run is a few hundred nanoseconds).  The epoch names the kernel
 * set and its forcing: every set gets a new one, and so does every gemm_force. */
static _Atomic uint64_t epochs;
static _Thread_local struct { uint64_t epoch; int64_t key[KEY_LEN]; Plan plan; } last_plan;
static uint64_t new_epoch(void) { return atomic_fetch_add(&epochs, 1) + 1; }

struct GemmKernels {
  DynElem elem;
  int esize, W;                  /* bytes per element, elements per vector */
  bool cheap_masks;              /* AVX-512: masked loads/stores cost as much as plain ones */
  HwModel hw;
  Jit *jit;
  PackAFn packa;                 /* row-major A -> panels, any height up to the largest mr */
  PackBFn packb;                 /* unit-stride B -> panels of any nr */
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
  GemmForce force;               /* tests and experiments override the model */
  /* Chosen plans by shape (direct-mapped): a repeated shape skips the model. */
  pthread_mutex_t cache_lock;
  struct CacheEntry *cache;
  _Atomic uint64_t epoch;        /* names this set and its forcing for last_plan */
  /* Packing buffers per thread block, reused across calls; a concurrent second caller
   * allocates its own. */
  pthread_mutex_t ws_lock;
  int nws;
  void **ws;
  size_t *ws_bytes;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- hardware figures, with safe floors for an incomplete model ---- */

static int hw_fma_units(const HwModel *h) { return h->fma_units > 0 ? h->fma_units : 1; }
static int hw_fma_lat(const HwModel *h) { return h->fma_latency > 0 ? h->fma_latency : 4; }
static int hw_vregs(const HwModel *h) { return h->vec_regs >= 8 ? h->vec_regs : 16; }
static int hw_vbits(const HwModel *h) { return h->vector_bits >= 128 ? h->vector_bits : 128; }
static double hw_ghz(const HwModel *h) { return h->ghz > 0 ? h->ghz : 2.0; }

/* Bandwidth (bytes/s per core) of the level where a footprint of F bytes lives. */
static double level_bw(const HwModel *h, double F) {
  int nc = hw_ncaches(h);
  for (int i = 0; i < nc; i++) {
    double cap = (double)h->level[i].bytes;
    if (F <= cap && h->level[i].gbs > 0) return h->level[i].gbs * 1e9;
  }
  if (h->nlevels > 0 && h->level[h->nlevels - 1].gbs > 0)
    return h->level[h->nlevels - 1].gbs * 1e9;
  return 10e9;
}

/* ---- level 0: enumerate register tiles ---- */

static int tile_ksplit(const HwModel *h, int mr, int v) {
  int need = hw_fma_lat(h) * hw_fma_units(h), acc = mr * v;
  int ks = (need + acc - 1) / acc;
  /* each extra set needs its accumulators and the B vectors of its own k step */
  while (ks > 1 && acc * ks + v * ks + 1 > hw_vregs(h)) ks--;
  return ks;
}

/* Cycles per k step of an h-row tile: FMA throughput, or the FMA latency over the
 * accumulator chains when there are too few of them. */
static double tile_cyc(const HwModel *h, int mr, int v, int ks) {
  double thr = (double)mr * v / hw_fma_units(h);
  double lat = (double)hw_fma_lat(h) / ks;
  return thr > lat ? thr : lat;
}

/* DP over edges: the cheapest split of r < 2*mr rows into emitted heights.  A piece of
 * height h covers min(h, rows left) rows and costs, per k step, the larger of its FMA time
 * and the time to read its B strip again (it follows another piece over the same strip):
 * several short pieces can cost more than one padded tall one. */
static void plan_edges(const GemmKernels *g, Family *f) {
  const HwModel *hm = &g->hw;
  double strip = (double)f->nr * g->esize;
  double reload[2] = { strip / level_bw(hm, 1), strip / level_bw(hm, hw_cache_bytes(hm, 0) + 1) };
  double call = CALL_CYC / 256.0 / (hw_ghz(hm) * 1e9);
  for (int t = 0; t < 2; t++) {
    double best_c[2 * MAX_MR];
    int first[2 * MAX_MR], cnt[2 * MAX_MR];
    best_c[0] = 0;
    cnt[0] = 0;
    for (int r = 1; r < 2 * f->mr; r++) {
      best_c[r] = 1e30;
      first[r] = 0;
      cnt[r] = 0;
      for (int hgt = 1; hgt <= f->mr; hgt++) {
        int covered = hgt < r ? hgt : r;
        if (!f->has[hgt] || cnt[r - covered] + 1 > MAX_PIECES) continue;
        double piece = f->ksec[hgt] > reload[t] ? f->ksec[hgt] : reload[t];
        double c = best_c[r - covered] + piece + call;
        if (c < best_c[r] * (1 - 1e-9)) {
          best_c[r] = c;
          first[r] = hgt;
          cnt[r] = cnt[r - covered] + 1;
        }
      }
      f->dec_n[t][r] = (uint8_t)cnt[r];
      f->dec_sec[t][r] = best_c[r];
      for (int rr = r, j = 0; rr > 0; rr -= first[rr] < rr ? first[rr] : rr)
        f->dec[t][r][j++] = (uint8_t)first[rr];
    }
  }
}

/* One core's rate in GFLOP/s for a tile of height h, from its seconds per k step. */
static double tile_gflops(const Family *f, int h) {
  return f->ksec[h] > 0 ? 2.0 * h * f->nr / f->ksec[h] * 1e-9 : 0;
}

static void enumerate_tiles(GemmKernels *g) {
  const HwModel *h = &g->hw;
  int regs = hw_vregs(h), need = hw_fma_lat(h) * hw_fma_units(h);
  g->ncand = 0;
  for (int v = 1; v <= MAX_V; v++)
    for (int mr = 1; mr <= MAX_MR; mr++) {
      int used = mr * v + v + 1;
      /* Registers, enough accumulators for the FMA latency, and no more loads (mr
       * broadcasts, v vectors) than FMAs per k step: cores have about as many load ports
       * as FMA pipes, so a 16x16 tile (17 loads, 16 FMAs) runs at half speed on Zen 5. */
      if (used > regs || mr * v < need || mr + v > mr * v || g->ncand == MAX_CAND) continue;
      double nr = (double)v * g->W;
      g->cand[g->ncand++] = (Tile){ .mr = mr, .v = v, .regs = used, .ksplit = 1,
                                    .score = 2.0 * mr * nr / (mr + nr) };
    }
  /* Keep the best tile of each width; then, of those, the best scored, the widest and the
   * narrowest, then the rest by score, up to MAX_FAM.  The run-time model needs the spread
   * more than a second near-equal tile: a narrow tile wastes less on an n-edge, a wide one
   * streams B in place (small M) in longer pieces per row. */
  int best[MAX_V + 1];
  for (int v = 0; v <= MAX_V; v++) best[v] = -1;
  for (int i = 0; i < g->ncand; i++) {
    int v = g->cand[i].v;
    if (best[v] < 0 || g->cand[i].score > g->cand[best[v]].score) best[v] = i;
  }
  int order[MAX_V + 1], no = 0, top = -1, wide = -1, narrow = -1;
  for (int v = 1; v <= MAX_V; v++)
    if (best[v] >= 0) {
      if (top < 0 || g->cand[best[v]].score > g->cand[top].score) top = best[v];
      if (narrow < 0) narrow = best[v];
      wide = best[v];
    }
  if (top >= 0) order[no++] = top;
  if (wide >= 0 && wide != top) order[no++] = wide;
  if (narrow >= 0 && narrow != top && narrow != wide) order[no++] = narrow;
  for (;;) {                     /* the rest, best first */
    int pick = -1;
    for (int v = 1; v <= MAX_V; v++) {
      int c = best[v];
      bool taken = false;
      for (int i = 0; i < no; i++) taken |= order[i] == c;
      if (c >= 0 && !taken && (pick < 0 || g->cand[c].score > g->cand[pick].score)) pick = c;
    }
    if (pick < 0) break;
    order[no++] = pick;
  }
  g->nfam = 0;
  for (int k = 0; k < no && k < MAX_FAM; k++) {
    g->cand[order[k]].kept = true;
    Family *f = &g->fam[g->nfam++];
    memset(f, 0, sizeof *f);
    f->mr = g->cand[order[k]].mr;
    f->v = g->cand[order[k]].v;
    f->nr = f->v * g->W;
    f->score = g->cand[order[k]].score;
  }
  /* Heights per family, their accumulator splits and modelled speeds. */
  for (int i = 0; i < g->nfam; i++) {
    Family *f = &g->fam[i];
    for (int hgt = 1; hgt <= f->mr; hgt++) {
      if ((hgt & (hgt - 1)) && hgt != f->mr) continue;
      f->has[hgt] = true;
      f->ksplit[hgt] = tile_ksplit(h, hgt, f->v);
      f->ksec[hgt] = tile_cyc(h, hgt, f->v, f->ksplit[hgt]) / (hw_ghz(h) * 1e9);
    }
    plan_edges(g, f);
  }
}

/* The inner-product tiles: for each width w, the tallest h whose h*w accumulators, w
 * vectors of B^T and one of A fit the registers, the tallest of the widest (several strips
 * of columns take their row pieces together, one height for all, so that A's rows stay in
 * L1 from strip to strip), and the heights 2 and 1 (an edge of r rows runs as the tallest
 * that fit, in turn: each height is a function to compile, and an edge costs little beside
 * the tall tiles); accumulator sets to hide the FMA latency where h*w chains are too few. */
static void dot_setup(GemmKernels *g) {
  const HwModel *hm = &g->hw;
  int regs = hw_vregs(hm), need = hw_fma_lat(hm) * hw_fma_units(hm);
  DotSet *d = &g->dot;
  memset(d, 0, sizeof *d);
  for (int w = DOT_WMAX; w >= 1; w--) {
    int H = DOT_HMAX;
    while (H > 1 && H * w + w + 1 > regs) H--;
    d->hmax[w] = H;
    for (int h = 1; h <= H; h++) {
      if (h != H && h != d->hmax[DOT_WMAX] && h > 1) continue;
      int ks = (need + h * w - 1) / (h * w);
      while (ks > 1 && (h * w + w) * ks + 1 > regs) ks--;
      d->has[w][h] = true;
      d->ks[w][h] = ks;
      /* until calibrated: FMA throughput or latency, loads at two a cycle */
      double cyc = fmax(fmax((double)h * w / hw_fma_units(hm), (double)hw_fma_lat(hm) / ks), (h + w) / 2.0);
      d->vsec[w][h] = cyc / (hw_ghz(hm) * 1e9);
      d->call[w][h] = (CALL_CYC + 8.0 * h * w) / (hw_ghz(hm) * 1e9);
    }
  }
}

/* ---- code generation ---- */

typedef struct CG {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef t_el, t_vec, t_mask, t_i64, t_i32, t_ptr, t_void;
  int W, esize;
  LLVMValueRef fma, mload, mstore, prefetch;
  LLVMTypeRef fma_t, mload_t, mstore_t, prefetch_t;
} CG;

static LLVMValueRef intrinsic(CG *g, const char *name, LLVMTypeRef *ov, int nov,
                              LLVMTypeRef *ft) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  *ft = LLVMIntrinsicGetType(g->ctx, id, ov, (size_t)nov);
  return LLVMGetIntrinsicDeclaration(g->mod, id, ov, (size_t)nov);
}

static void cg_init(CG *g, LLVMContextRef ctx, LLVMModuleRef mod, DynElem elem, int W) {
  memset(g, 0, sizeof *g);
  g->ctx = ctx;
  g->mod = mod;
  g->b = LLVMCreateBuilderInContext(ctx);
  g->W = W;
  g->esize = elem == DYN_F64 ? 8 : 4;
  g->t_el = elem == DYN_F64 ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
  g->t_vec = LLVMVectorType(g->t_el, (unsigned)W);
  g->t_mask = LLVMVectorType(LLVMInt1TypeInContext(ctx), (unsigned)W);
  g->t_i64 = LLVMInt64TypeInContext(ctx);
  g->t_i32 = LLVMInt32TypeInContext(ctx);
  g->t_ptr = LLVMPointerTypeInContext(ctx, 0);
  g->t_void = LLVMVoidTypeInContext(ctx);
  LLVMTypeRef ov[2] = { g->t_vec, g->t_ptr };
  g->fma = intrinsic(g, "llvm.fma", ov, 1, &g->fma_t);
  g->mload = intrinsic(g, "llvm.masked.load", ov, 2, &g->mload_t);
  g->mstore = intrinsic(g, "llvm.masked.store", ov, 2, &g->mstore_t);
  g->prefetch = intrinsic(g, "llvm.prefetch", &g->t_ptr, 1, &g->prefetch_t);
}

static LLVMValueRef ci64(CG *g, int64_t v) { return LLVMConstInt(g->t_i64, (uint64_t)v, 1); }
static LLVMValueRef ci32(CG *g, int v) { return LLVMConstInt(g->t_i32, (uint64_t)v, 1); }

static LLVMValueRef splat(CG *g, LLVMValueRef x) {
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)g->W);
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetPoison(vt), x, ci32(g, 0), "");
  return LLVMBuildShuffleVector(g->b, v, LLVMGetPoison(vt),
                                LLVMConstNull(LLVMVectorType(g->t_i32, (unsigned)g->W)), "");
}

static LLVMValueRef gep(CG *g, LLVMValueRef p, LLVMValueRef idx) {
  return LLVMBuildGEP2(g->b, g->t_el, p, &idx, 1, "");
}

static LLVMValueRef load_vec(CG *g, LLVMValueRef p, LLVMValueRef mask) {
  if (!mask) {
    LLVMValueRef l = LLVMBuildLoad2(g->b, g->t_vec, p, "");
    LLVMSetAlignment(l, (unsigned)g->esize);
    return l;
  }
  LLVMValueRef args[] = { p, ci32(g, g->esize), mask, LLVMConstNull(g->t_vec) };
  return LLVMBuildCall2(g->b, g->mload_t, g->mload, args, 4, "");
}

static void store_vec(CG *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask) {
  if (!mask) {
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), (unsigned)g->esize);
    return;
  }
  LLVMValueRef args[] = { v, p, ci32(g, g->esize), mask };
  LLVMBuildCall2(g->b, g->mstore_t, g->mstore, args, 4, "");
}

/* Lanes of vector j (0-based) that hold one of the first n columns, as a bit mask:
 * (1 << clamp(n - j*W, 0, W)) - 1, bitcast to <W x i1>.  An integer mask stays one
 * register (a k-register on AVX-512) outside the loop, where a vector compare would be
 * sunk next to its users by the back end and recomputed every iteration. */
static LLVMValueRef lane_mask(CG *g, LLVMValueRef n, int j) {
  LLVMBuilderRef B = g->b;
  LLVMValueRef lim = LLVMBuildSub(B, n, ci64(g, (int64_t)j * g->W), "");
  lim = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, lim, ci64(g, 0), ""), ci64(g, 0), lim, "");
  lim = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, lim, ci64(g, g->W), ""), ci64(g, g->W), lim, "");
  /* W <= 16 for f32 on 512 bits; compute in i64 so 1 << W never overflows */
  LLVMValueRef bits = LLVMBuildSub(B, LLVMBuildShl(B, ci64(g, 1), lim, ""), ci64(g, 1), "");
  LLVMTypeRef ti = LLVMIntTypeInContext(g->ctx, (unsigned)g->W);
  return LLVMBuildBitCast(B, LLVMBuildTrunc(B, bits, ti, ""), g->t_mask, "");
}

static LLVMValueRef new_fn(CG *g, const char *name, LLVMTypeRef *params, int np) {
  LLVMTypeRef ft = LLVMFunctionType(g->t_void, params, (unsigned)np, 0);
  LLVMValueRef f = LLVMAddFunction(g->mod, name, ft);
  unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
  LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(g->ctx, nounwind, 0));
  return f;
}

/* A counted loop, for (i = lo; i < hi; i += step), its counter in `var` (an alloca of the
 * entry block, which SROA makes a register).  loop_begin leaves the builder in the body and
 * returns i; loop_end closes the loop and leaves the builder after it, where L->i holds the
 * value that ended it. */
typedef struct CgLoop { LLVMValueRef var, i, step; LLVMBasicBlockRef cond, exit; } CgLoop;

static LLVMValueRef loop_begin(CG *g, CgLoop *L, LLVMValueRef var, LLVMValueRef lo,
                               LLVMValueRef hi, LLVMValueRef step) {
  LLVMBuilderRef B = g->b;
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(B));
  L->cond = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, fn, "body");
  L->exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "after");
  L->var = var;
  L->step = step;
  LLVMBuildStore(B, lo, var);
  LLVMBuildBr(B, L->cond);
  LLVMPositionBuilderAtEnd(B, L->cond);
  L->i = LLVMBuildLoad2(B, g->t_i64, var, "");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, L->i, hi, ""), body, L->exit);
  LLVMPositionBuilderAtEnd(B, body);
  return L->i;
}

static void loop_end(CG *g, CgLoop *L) {
  LLVMBuildStore(g->b, LLVMBuildAdd(g->b, L->i, L->step, ""), L->var);
  LLVMBuildBr(g->b, L->cond);
  LLVMPositionBuilderAtEnd(g->b, L->exit);
}

/* if (cond) { ...: if_begin leaves the builder in the branch taken; if_end joins. */
static LLVMBasicBlockRef if_begin(CG *g, LLVMValueRef cond) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(g->ctx, fn, "then"),
                    join = LLVMAppendBasicBlockInContext(g->ctx, fn, "join");
  LLVMBuildCondBr(g->b, cond, then, join);
  LLVMPositionBuilderAtEnd(g->b, then);
  return join;
}

static void if_end(CG *g, LLVMBasicBlockRef join) {
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
}

/* The micro-kernel: an h x (v*W) tile of C, over kc steps of the reduction.
 *   void uk(i64 kc, ptr a, i64 a_rs, i64 a_cs, ptr b, i64 b_rs, ptr c, i64 c_rs,
 *           i64 n_rem, i64 m_rem, i32 beta)
 * A[i,k] = a[i*a_rs + k*a_cs], B[k,j] = b[k*b_rs + j], C[i,j] = c[i*c_rs + j]; beta & 1
 * adds to C, and beta & UK_PREFETCH_C fetches the C tile for writing first (see there).
 * Masked kernels touch only columns j < n_rem of B and C, and rows i < m_rem of
 * A and C: rows past m_rem compute on a copy of row m_rem - 1 and are never stored, so an
 * edge of r rows may run as one taller tile instead of several passes over the B strip.
 * One kernel serves packed A (a_rs = 1, a_cs = h), column-major A and row-major A in place.
 * With ks > 1 accumulator sets, consecutive k steps go to different sets, which hides the
 * FMA latency of short tiles; the sets are summed at the end.  (Software prefetch of B
 * rows ahead was tried for B read in place and did not help on Zen 5.)
 * The packing variant (pack: one a family, height mr, masked) takes one more argument,
 * ptr packed: it reads B in place (b_rs its row stride) and also stores each row of the
 * strip, zeros past n_rem, to packed[k*nr + j], asking for row k + PACK_AHEAD's lines as it
 * goes.  run_block gives it the first tile of each strip, so packing B needs no pass of its
 * own and its reads from memory overlap that tile's FMAs (77 x 4096 x 4096 on 2 threads,
 * 6x64 tiles: 9.4 -> 8.3 ms against packing first, the means of 6 alternating runs' medians;
 * a panel packed strip by strip just before its tiles instead, with or without prefetching
 * the next strip during them, gained 0-5%).
 * The fetching variant (kind UK_PF, height mr, full tiles; masked where masks are cheap)
 * takes five more arguments, ptr pf, i64 pf_rs, i64 l0, i64 l1, i64 sh: every 2^sh steps
 * (k % 2^sh == 0) it asks for line l = l0 + k/2^sh of a strip of nr columns at pf, rows
 * pf_rs apart, while l < l1 (line l is row l / L, its (l % L)-th 64 bytes, L = nr
 * elements' bytes / 64 rounded up), into L2.  run_block gives the full tiles after a
 * strip's packing one each a share of the next strip's lines, so that strip is in L2
 * when its packing tile reads it: a few fetches at a time, spread over the FMAs, where a
 * burst of them between tiles took the line buffers that the tiles' own loads need.  That
 * packing tile had taken 3.6x a plain tile's time, reading from memory; 77 x 4096 x 4096
 * on 2 threads went 6.07 -> 5.55 ms (80 -> 87% of the kernel's peak), 128 x 4096 x 4096
 * 9.4 -> 8.9 ms. */
enum { UK_PLAIN, UK_PACK, UK_PF };
static void emit_uk(CG *g, const char *name, int h, int v, int ks, bool masked, int kind) {
  bool pack = kind == UK_PACK, pfn = kind == UK_PF;
  LLVMTypeRef P[] = { g->t_i64, g->t_ptr, g->t_i64, g->t_i64, g->t_ptr, g->t_i64,
                      g->t_ptr, g->t_i64, g->t_i64, g->t_i64, g->t_i32, g->t_ptr,
                      g->t_i64, g->t_i64, g->t_i64, g->t_i64 };
  LLVMValueRef fn = new_fn(g, name, P, pack ? 12 : pfn ? 16 : 11);
  LLVMValueRef pk = pack ? LLVMGetParam(fn, 11) : NULL;
  LLVMValueRef pf = pfn ? LLVMGetParam(fn, 11) : NULL, pf_rs = pfn ? LLVMGetParam(fn, 12) : NULL,
               pf_l0 = pfn ? LLVMGetParam(fn, 13) : NULL, pf_l1 = pfn ? LLVMGetParam(fn, 14) : NULL,
               pf_sh = pfn ? LLVMGetParam(fn, 15) : NULL;
  LLVMValueRef kc = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), a_rs = LLVMGetParam(fn, 2),
               a_cs = LLVMGetParam(fn, 3), b = LLVMGetParam(fn, 4), b_rs = LLVMGetParam(fn, 5),
               c = LLVMGetParam(fn, 6), c_rs = LLVMGetParam(fn, 7), n_rem = LLVMGetParam(fn, 8),
               m_rem = LLVMGetParam(fn, 9), beta = LLVMGetParam(fn, 10);
  LLVMBuilderRef B = g->b;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"),
                    mcond = LLVMAppendBasicBlockInContext(g->ctx, fn, "main.cond"),
                    mbody = LLVMAppendBasicBlockInContext(g->ctx, fn, "main.body"),
                    rcond = ks > 1 ? LLVMAppendBasicBlockInContext(g->ctx, fn, "rem.cond") : NULL,
                    rbody = ks > 1 ? LLVMAppendBasicBlockInContext(g->ctx, fn, "rem.body") : NULL,
                    done = LLVMAppendBasicBlockInContext(g->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(B, entry);
  int nacc = ks * h * v;
  /* Accumulators and loop state live in allocas; SROA turns them into registers. */
  LLVMValueRef acc[MAX_ACC];
  for (int i = 0; i < nacc; i++) {
    acc[i] = LLVMBuildAlloca(B, g->t_vec, "");
    LLVMBuildStore(B, LLVMConstNull(g->t_vec), acc[i]);
  }
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "k"), pbv = LLVMBuildAlloca(B, g->t_ptr, "pb"),
               pav = LLVMBuildAlloca(B, g->t_ptr, "pa"), pkv = LLVMBuildAlloca(B, g->t_ptr, "pk");
  if (pack) LLVMBuildStore(B, pk, pkv);
  /* Row offsets, rows past m_rem clamped to the last real one (masked kernels only). */
  LLVMValueRef roff[MAX_MR], last = LLVMBuildSub(B, m_rem, ci64(g, 1), "");
  for (int i = 0; i < h; i++) {
    LLVMValueRef r = ci64(g, i);
    if (masked && i > 0)
      r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, r, m_rem, ""), r, last, "");
    roff[i] = LLVMBuildMul(B, a_rs, r, "");
  }
  LLVMBuildStore(B, ci64(g, 0), kv);
  LLVMBuildStore(B, b, pbv);
  LLVMBuildStore(B, a, pav);
  LLVMValueRef mask[MAX_V] = { 0 };
  /* the fetching kernel's step mask, 2^sh - 1, once */
  LLVMValueRef msk = pfn ? LLVMBuildSub(B, LLVMBuildShl(B, ci64(g, 1), pf_sh, ""), ci64(g, 1), "") : NULL;
  if (masked)
    for (int j = 0; j < v; j++) mask[j] = lane_mask(g, n_rem, j);
  /* On request (beta & UK_PREFETCH_C), fetch the C tile for writing now: it is needed after
   * the k loop, by which time a miss to L2 or L3 has been served (C rows a power of two
   * apart never stay in L1).  Prefetches never fault, so rows past m_rem need no care. */
  LLVMValueRef crow[MAX_MR];
  for (int i = 0; i < h; i++) crow[i] = gep(g, c, LLVMBuildMul(B, c_rs, ci64(g, i), ""));
  LLVMBasicBlockRef pfc = LLVMAppendBasicBlockInContext(g->ctx, fn, "prefetch_c");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, beta, ci32(g, UK_PREFETCH_C), ""), ci32(g, 0), ""),
                  pfc, mcond);
  LLVMPositionBuilderAtEnd(B, pfc);
  for (int i = 0; i < h; i++)
    for (int l = 0; l < v * g->W * g->esize; l += 64) {
      LLVMValueRef args[] = { gep(g, crow[i], ci64(g, l / g->esize)), ci32(g, 1), ci32(g, 3),
                              ci32(g, 1) };
      LLVMBuildCall2(B, g->prefetch_t, g->prefetch, args, 4, "");
    }
  LLVMBuildBr(B, mcond);

  for (int pass = 0; pass < (ks > 1 ? 2 : 1); pass++) {   /* 0: main loop, 1: remainder */
    int steps = pass == 0 ? ks : 1;
    LLVMBasicBlockRef cblk = pass == 0 ? mcond : rcond, bblk = pass == 0 ? mbody : rbody;
    LLVMBasicBlockRef exit = pass == 0 && ks > 1 ? rcond : done;
    LLVMPositionBuilderAtEnd(B, cblk);
    LLVMValueRef k = LLVMBuildLoad2(B, g->t_i64, kv, "");
    LLVMValueRef cond = LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, k, ci64(g, steps), ""), kc, "");
    LLVMBuildCondBr(B, cond, bblk, exit);
    LLVMPositionBuilderAtEnd(B, bblk);
    LLVMValueRef pb = LLVMBuildLoad2(B, g->t_ptr, pbv, ""), pa = LLVMBuildLoad2(B, g->t_ptr, pav, "");
    LLVMValueRef pkk = pack ? LLVMBuildLoad2(B, g->t_ptr, pkv, "") : NULL;
    for (int u = 0; u < steps; u++) {
      LLVMValueRef bu = u ? gep(g, pb, LLVMBuildMul(B, b_rs, ci64(g, u), "")) : pb;
      LLVMValueRef au = u ? gep(g, pa, LLVMBuildMul(B, a_cs, ci64(g, u), "")) : pa;
      LLVMValueRef bv[MAX_V];
      for (int j = 0; j < v; j++)
        bv[j] = load_vec(g, gep(g, bu, ci64(g, (int64_t)j * g->W)), mask[j]);
      if (pack) {            /* the row, zeros past n_rem, into the panel; a row ahead asked for */
        LLVMValueRef ku = gep(g, pkk, ci64(g, (int64_t)u * v * g->W));
        for (int j = 0; j < v; j++)
          LLVMSetAlignment(LLVMBuildStore(B, bv[j], gep(g, ku, ci64(g, (int64_t)j * g->W))), (unsigned)(g->W * g->esize));
        LLVMValueRef ahead = gep(g, bu, LLVMBuildMul(B, b_rs, ci64(g, PACK_AHEAD), ""));
        for (int l = 0; l < v * g->W * g->esize; l += 64) {
          LLVMValueRef args[] = { gep(g, ahead, ci64(g, l / g->esize)), ci32(g, 0), ci32(g, 3), ci32(g, 1) };
          LLVMBuildCall2(B, g->prefetch_t, g->prefetch, args, 4, "");
        }
      }
      if (pfn) {             /* line l0 + kk>>sh of the next strip, every 2^sh steps */
        LLVMValueRef kk = LLVMBuildAdd(B, k, ci64(g, u), "");
        LLVMValueRef line = LLVMBuildAdd(B, pf_l0, LLVMBuildLShr(B, kk, pf_sh, ""), "");
        LLVMValueRef go = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, kk, msk, ""), ci64(g, 0), ""),
                                       LLVMBuildICmp(B, LLVMIntSLT, line, pf_l1, ""), "");
        LLVMBasicBlockRef join = if_begin(g, go);
        int lpr = (v * g->W * g->esize + 63) / 64;      /* run_block's count too */
        LLVMValueRef row = LLVMBuildUDiv(B, line, ci64(g, lpr), ""),
                     col = LLVMBuildURem(B, line, ci64(g, lpr), "");
        LLVMValueRef at = gep(g, gep(g, pf, LLVMBuildMul(B, row, pf_rs, "")),
                              LLVMBuildMul(B, col, ci64(g, 64 / g->esize), ""));
        LLVMValueRef args[] = { at, ci32(g, 0), ci32(g, 2), ci32(g, 1) };
        LLVMBuildCall2(B, g->prefetch_t, g->prefetch, args, 4, "");
        if_end(g, join);
      }
      for (int i = 0; i < h; i++) {
        LLVMValueRef s = LLVMBuildLoad2(B, g->t_el, gep(g, au, roff[i]), "");
        LLVMValueRef sv = splat(g, s);
        for (int j = 0; j < v; j++) {
          LLVMValueRef slot = acc[((u % ks) * h + i) * v + j];
          LLVMValueRef args[] = { sv, bv[j], LLVMBuildLoad2(B, g->t_vec, slot, "") };
          LLVMBuildStore(B, LLVMBuildCall2(B, g->fma_t, g->fma, args, 3, ""), slot);
        }
      }
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, k, ci64(g, steps), ""), kv);
    LLVMBuildStore(B, gep(g, pa, LLVMBuildMul(B, a_cs, ci64(g, steps), "")), pav);
    LLVMBuildStore(B, gep(g, pb, LLVMBuildMul(B, b_rs, ci64(g, steps), "")), pbv);
    if (pack) LLVMBuildStore(B, gep(g, pkk, ci64(g, (int64_t)steps * v * g->W)), pkv);
    LLVMBuildBr(B, cblk);
  }

  /* C = acc, or C + acc: one straight run of stores for each, the choice made once.  In a
   * masked kernel the rows stop at m_rem: a test before each row after the first leaves
   * the run (rows past m_rem are never touched), and only the column masks, fixed for the
   * call, go on the stores.  (A select of the old C on beta per vector, and a row mask
   * folded into each vector's mask, became a branch and a spilled mask per vector: three
   * times the code, which the back end compiled at length.) */
  LLVMPositionBuilderAtEnd(B, done);
  LLVMValueRef sum[MAX_MR * MAX_V];
  for (int i = 0; i < h; i++)
    for (int j = 0; j < v; j++) {
      LLVMValueRef x = LLVMBuildLoad2(B, g->t_vec, acc[i * v + j], "");
      for (int s = 1; s < ks; s++)
        x = LLVMBuildFAdd(B, x, LLVMBuildLoad2(B, g->t_vec, acc[(s * h + i) * v + j], ""), "");
      sum[i * v + j] = x;
    }
  LLVMBasicBlockRef ret = LLVMAppendBasicBlockInContext(g->ctx, fn, "ret");
  LLVMBasicBlockRef path[2] = { LLVMAppendBasicBlockInContext(g->ctx, fn, "set"),
                                LLVMAppendBasicBlockInContext(g->ctx, fn, "add") };
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, beta, ci32(g, 1), ""), ci32(g, 0), ""),
                  path[1], path[0]);
  for (int add = 0; add < 2; add++) {
    LLVMPositionBuilderAtEnd(B, path[add]);
    for (int i = 0; i < h; i++) {
      if (masked && i > 0) {
        LLVMBasicBlockRef row = LLVMAppendBasicBlockInContext(g->ctx, fn, "row");
        LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, ci64(g, i), m_rem, ""), row, ret);
        LLVMPositionBuilderAtEnd(B, row);
      }
      for (int j = 0; j < v; j++) {
        LLVMValueRef p = gep(g, crow[i], ci64(g, (int64_t)j * g->W));
        LLVMValueRef x = sum[i * v + j];
        if (add) x = LLVMBuildFAdd(B, x, load_vec(g, p, mask[j]), "");
        store_vec(g, x, p, mask[j]);
      }
    }
    LLVMBuildBr(B, ret);
  }
  LLVMPositionBuilderAtEnd(B, ret);
  LLVMBuildRetVoid(B);
}

/* Pack a kc x nc block of a B with unit column stride into nr-wide panels, for any nr
 * that is a multiple of W (one routine serves every family):
 *   out[p*kc*nr + k*nr + j] = b[k*b_rs + p*nr + j], zero past column nc.
 *   void packb(i64 kc, i64 nc, ptr b, i64 b_rs, ptr out, i64 nr)
 * B is read a whole row at a time (k outer), which memory streams well: the row's full
 * panels vector by vector, then the last panel through masks (zeros past nc).  Each vector
 * load of a full panel is preceded by a prefetch of the same columns PACKB_AHEAD rows
 * further down. */
#define PACKB_AHEAD 4        /* rows (77 x 4096 x 4096 runs 1.3x faster than without) */
static void emit_packb(CG *g, const char *name) {
  LLVMTypeRef P[] = { g->t_i64, g->t_i64, g->t_ptr, g->t_i64, g->t_ptr, g->t_i64 };
  LLVMValueRef fn = new_fn(g, name, P, 6);
  LLVMValueRef kc = LLVMGetParam(fn, 0), nc = LLVMGetParam(fn, 1), b = LLVMGetParam(fn, 2),
               b_rs = LLVMGetParam(fn, 3), out = LLVMGetParam(fn, 4), nr = LLVMGetParam(fn, 5);
  LLVMBuilderRef B = g->b;
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "k"), pv = LLVMBuildAlloca(B, g->t_i64, "p"),
               jv = LLVMBuildAlloca(B, g->t_i64, "j");
  /* columns in full panels; panel p0 (a multiple of nr) starts at out + p0*kc */
  LLVMValueRef full_end = LLVMBuildMul(B, LLVMBuildSDiv(B, nc, nr, ""), nr, "");
  LLVMValueRef left = LLVMBuildSub(B, nc, full_end, "");
  LLVMValueRef ahead = LLVMBuildMul(B, b_rs, ci64(g, PACKB_AHEAD), "");
  unsigned align = (unsigned)(g->W * g->esize);                 /* panels are vector-aligned */
  CgLoop Lk, Lp, Lj;
  LLVMValueRef k = loop_begin(g, &Lk, kv, ci64(g, 0), kc, ci64(g, 1));
  LLVMValueRef srow = gep(g, b, LLVMBuildMul(B, k, b_rs, "")),
               drow = gep(g, out, LLVMBuildMul(B, k, nr, ""));
  LLVMValueRef p0 = loop_begin(g, &Lp, pv, ci64(g, 0), full_end, nr);
  LLVMValueRef span = gep(g, srow, p0), dpan = gep(g, drow, LLVMBuildMul(B, p0, kc, ""));
  LLVMValueRef j = loop_begin(g, &Lj, jv, ci64(g, 0), nr, ci64(g, g->W));
  /* Rows of B far apart start a new page each, where the hardware prefetchers stop and
   * must learn the stream again: ask for row k + PACKB_AHEAD's line now. */
  LLVMValueRef pf[] = { gep(g, gep(g, span, ahead), j), ci32(g, 0), ci32(g, 3), ci32(g, 1) };
  LLVMBuildCall2(B, g->prefetch_t, g->prefetch, pf, 4, "");
  LLVMSetAlignment(LLVMBuildStore(B, load_vec(g, gep(g, span, j), NULL), gep(g, dpan, j)), align);
  loop_end(g, &Lj);
  loop_end(g, &Lp);
  /* The last panel, if nc is not a multiple of nr: masked loads, zeros past nc. */
  LLVMBasicBlockRef join = if_begin(g, LLVMBuildICmp(B, LLVMIntSGT, left, ci64(g, 0), ""));
  LLVMValueRef tspan = gep(g, srow, full_end), tpan = gep(g, drow, LLVMBuildMul(B, full_end, kc, ""));
  LLVMValueRef tj = loop_begin(g, &Lj, jv, ci64(g, 0), nr, ci64(g, g->W));
  LLVMValueRef x = load_vec(g, gep(g, tspan, tj), lane_mask(g, LLVMBuildSub(B, left, tj, ""), 0));
  LLVMSetAlignment(LLVMBuildStore(B, x, gep(g, tpan, tj)), align);
  loop_end(g, &Lj);
  if_end(g, join);
  loop_end(g, &Lk);
  LLVMBuildRetVoid(B);
}

/* The row-streaming kernel for a C of at most ROWS_MAX rows (a matrix-vector product and
 * its neighbours), where a register tile would read B in strips of nr columns down the
 * rows -- a walk across memory pages that the hardware prefetchers follow badly, so a B
 * streamed from memory arrives at a fraction of its bandwidth.  Here B is read a row at a
 * time, ROWS_U rows together, from start to end, and the h rows of C (a chunk of columns
 * that stays in L1) are loaded, updated and stored for each:
 *   void rows(i64 k, i64 n, ptr a, i64 a_sm, i64 a_sk, ptr b, i64 b_sk, ptr c, i64 c_sm)
 * computes C[0:h, 0:n] += A[0:h, 0:k] B[0:k, 0:n] with unit column strides for B and C (the
 * caller clears C first for C =). */

/* The loop over the columns of one step of U rows of B: full vectors, then a masked one.
 * (One loop of masked vectors, half the code, ran 1.4x slower on Zen 5.) */
static void rows_cols(CG *g, int h, int U, LLVMValueRef *brow, LLVMValueRef *av, LLVMValueRef *crow,
                      LLVMValueRef j, LLVMValueRef mask) {
  LLVMValueRef bv[ROWS_U];
  for (int u = 0; u < U; u++) bv[u] = load_vec(g, gep(g, brow[u], j), mask);
  for (int i = 0; i < h; i++) {
    LLVMValueRef p = gep(g, crow[i], j), x = load_vec(g, p, mask);
    for (int u = 0; u < U; u++) {
      LLVMValueRef args[] = { av[i * ROWS_U + u], bv[u], x };
      x = LLVMBuildCall2(g->b, g->fma_t, g->fma, args, 3, "");
    }
    store_vec(g, x, p, mask);
  }
}

static void emit_rows(CG *g, const char *name, int h) {
  LLVMTypeRef P[] = { g->t_i64, g->t_i64, g->t_ptr, g->t_i64, g->t_i64, g->t_ptr, g->t_i64,
                      g->t_ptr, g->t_i64 };
  LLVMValueRef fn = new_fn(g, name, P, 9);
  LLVMValueRef k = LLVMGetParam(fn, 0), n = LLVMGetParam(fn, 1), a = LLVMGetParam(fn, 2),
               a_sm = LLVMGetParam(fn, 3), a_sk = LLVMGetParam(fn, 4), b = LLVMGetParam(fn, 5),
               b_sk = LLVMGetParam(fn, 6), c = LLVMGetParam(fn, 7), c_sm = LLVMGetParam(fn, 8);
  LLVMBuilderRef B = g->b;
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "k"), jv = LLVMBuildAlloca(B, g->t_i64, "j");
  LLVMValueRef nfull = LLVMBuildMul(B, LLVMBuildSDiv(B, n, ci64(g, g->W), ""), ci64(g, g->W), "");
  LLVMValueRef tail = LLVMBuildICmp(B, LLVMIntSLT, nfull, n, "");
  LLVMValueRef mask = lane_mask(g, LLVMBuildSub(B, n, nfull, ""), 0);
  LLVMValueRef crow[ROWS_MAX], arow[ROWS_MAX];
  for (int i = 0; i < h; i++) {
    crow[i] = gep(g, c, LLVMBuildMul(B, c_sm, ci64(g, i), ""));
    arow[i] = gep(g, a, LLVMBuildMul(B, a_sm, ci64(g, i), ""));
  }
  /* ROWS_U rows of B a step while that many are left, then the rest one by one */
  LLVMValueRef k0 = ci64(g, 0);
  for (int pass = 0; pass < 2; pass++) {
    int U = pass ? 1 : ROWS_U;
    CgLoop Lk, Lj;
    LLVMValueRef ks = loop_begin(g, &Lk, kv, k0, LLVMBuildSub(B, k, ci64(g, U - 1), ""),
                                 ci64(g, U));
    LLVMValueRef brow[ROWS_U], av[ROWS_MAX * ROWS_U];
    for (int u = 0; u < U; u++) {
      LLVMValueRef ku = LLVMBuildAdd(B, ks, ci64(g, u), "");
      brow[u] = gep(g, b, LLVMBuildMul(B, ku, b_sk, ""));
      for (int i = 0; i < h; i++)
        av[i * ROWS_U + u] = splat(g, LLVMBuildLoad2(B, g->t_el,
                                                     gep(g, arow[i], LLVMBuildMul(B, ku, a_sk, "")), ""));
    }
    LLVMValueRef j = loop_begin(g, &Lj, jv, ci64(g, 0), nfull, ci64(g, g->W));
    rows_cols(g, h, U, brow, av, crow, j, NULL);
    loop_end(g, &Lj);
    LLVMBasicBlockRef join = if_begin(g, tail);
    rows_cols(g, h, U, brow, av, crow, nfull, mask);
    if_end(g, join);
    loop_end(g, &Lk);
    k0 = Lk.i;                                  /* where the steps of ROWS_U stopped */
  }
  LLVMBuildRetVoid(B);
}

/* Transpose W vectors of W lanes in registers: log2(W) butterfly stages, each swapping the
 * off-diagonal halves of 2d x 2d blocks (one two-source shuffle per output vector). */
static void transpose(CG *g, LLVMValueRef *rows) {
  int W = g->W;
  LLVMValueRef mi[64], mj[64];
  for (int d = 1; d < W; d <<= 1) {
    for (int c = 0; c < W; c++) {
      mi[c] = ci32(g, c & d ? W + c - d : c);
      mj[c] = ci32(g, c & d ? W + c : c + d);
    }
    LLVMValueRef Mi = LLVMConstVector(mi, (unsigned)W), Mj = LLVMConstVector(mj, (unsigned)W);
    for (int i = 0; i < W; i++)
      if (!(i & d)) {
        LLVMValueRef a = rows[i], b = rows[i + d];
        rows[i] = LLVMBuildShuffleVector(g->b, a, b, Mi, "");
        rows[i + d] = LLVMBuildShuffleVector(g->b, a, b, Mj, "");
      }
  }
}

/* Pack h <= mr rows of a row-major A (unit k stride) into one panel, out[k*h + i] =
 * a[i*lda + k], for kc >= W:
 *   void packa(i64 kc, ptr a, i64 lda, ptr out, i64 h)
 * W x W blocks are loaded a row per vector, transposed in registers and stored a column
 * per (masked) vector; the last block overlaps the one before instead of going scalar.
 * Rows past h read row h-1 (never out of bounds) and are masked off when stored. */
static void emit_packa(CG *g, const char *name, int mr) {
  LLVMTypeRef P[] = { g->t_i64, g->t_ptr, g->t_i64, g->t_ptr, g->t_i64 };
  LLVMValueRef fn = new_fn(g, name, P, 5);
  LLVMValueRef kc = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), lda = LLVMGetParam(fn, 2),
               out = LLVMGetParam(fn, 3), h = LLVMGetParam(fn, 4);
  LLVMBuilderRef B = g->b;
  int W = g->W, ngrp = (mr + W - 1) / W;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"),
                    cond = LLVMAppendBasicBlockInContext(g->ctx, fn, "k.cond"),
                    body = LLVMAppendBasicBlockInContext(g->ctx, fn, "k.body"),
                    done = LLVMAppendBasicBlockInContext(g->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(B, entry);
  LLVMValueRef hm1 = LLVMBuildSub(B, h, ci64(g, 1), "");
  LLVMValueRef rowp[2 * MAX_MR], mask[MAX_MR];
  for (int i = 0; i < mr; i++) {
    LLVMValueRef r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, ci64(g, i), h, ""),
                                     ci64(g, i), hm1, "");
    rowp[i] = gep(g, a, LLVMBuildMul(B, r, lda, ""));
  }
  for (int q = 0; q < ngrp; q++) mask[q] = lane_mask(g, h, q);
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "k");
  LLVMBuildStore(B, ci64(g, 0), kv);
  LLVMBuildBr(B, cond);
  LLVMPositionBuilderAtEnd(B, cond);
  LLVMValueRef k0 = LLVMBuildLoad2(B, g->t_i64, kv, "");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, k0, kc, ""), body, done);
  LLVMPositionBuilderAtEnd(B, body);
  LLVMValueRef last = LLVMBuildSub(B, kc, ci64(g, W), "");
  LLVMValueRef kk = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, k0, last, ""), last, k0, "");
  for (int q = 0; q < ngrp; q++) {
    LLVMValueRef rows[64];
    for (int r = 0; r < W; r++) {
      int i = q * W + r;
      rows[r] = i < mr ? load_vec(g, gep(g, rowp[i], kk), NULL) : LLVMConstNull(g->t_vec);
    }
    transpose(g, rows);
    for (int r = 0; r < W; r++) {
      LLVMValueRef at = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildAdd(B, kk, ci64(g, r), ""), h, ""),
                                     ci64(g, (int64_t)q * W), "");
      store_vec(g, rows[r], gep(g, out, at), mask[q]);
    }
  }
  LLVMBuildStore(B, LLVMBuildAdd(B, k0, ci64(g, W), ""), kv);
  LLVMBuildBr(B, cond);
  LLVMPositionBuilderAtEnd(B, done);
  LLVMBuildRetVoid(B);
}

/* The lane sums of n vectors, all at once: each level pairs vectors and adds the halves of
 * every group of lanes, so that one vector holds twice the groups at half the width; after
 * log2(W) levels each lane is one vector's whole sum (3 operations a vector in all, where
 * a tree per vector takes 2 log2(W)).  out[i] is the sum of x[i]. */
static void lane_sums(CG *g, LLVMValueRef *x, int n, LLVMValueRef *out) {
  int W = g->W, nv = n;
  LLVMValueRef v[256];
  int id[256][64];                     /* which input each group of lanes belongs to (-1: none) */
  for (int i = 0; i < n; i++) {
    v[i] = x[i];
    id[i][0] = i;
  }
  for (int G = W; G > 1; G /= 2) {     /* G lanes a group now, W / G groups a vector */
    int ng = W / G, half = G / 2, nn = 0;
    LLVMValueRef lo[64], hi[64];
    for (int o = 0; o < 2 * ng; o++)
      for (int t = 0; t < half; t++) {
        int src = (o % 2) * W + (o / 2) * G + t;    /* lane of the pair (u, then v) */
        lo[o * half + t] = ci32(g, src);
        hi[o * half + t] = ci32(g, src + half);
      }
    LLVMValueRef Ml = LLVMConstVector(lo, (unsigned)W), Mh = LLVMConstVector(hi, (unsigned)W);
    for (int p = 0; p < nv; p += 2) {
      LLVMValueRef u = v[p], w = p + 1 < nv ? v[p + 1] : LLVMConstNull(g->t_vec);
      LLVMValueRef s = LLVMBuildFAdd(g->b, LLVMBuildShuffleVector(g->b, u, w, Ml, ""),
                                     LLVMBuildShuffleVector(g->b, u, w, Mh, ""), "");
      int nid[64];
      for (int o = 0; o < 2 * ng; o++) nid[o] = o % 2 == 0 ? id[p][o / 2] : p + 1 < nv ? id[p + 1][o / 2] : -1;
      v[nn] = s;
      memcpy(id[nn], nid, sizeof(int) * (size_t)(2 * ng));
      nn++;
    }
    nv = nn;
  }
  for (int q = 0; q < nv; q++)
    for (int l = 0; l < W; l++)
      if (id[q][l] >= 0) out[id[q][l]] = LLVMBuildExtractElement(g->b, v[q], ci32(g, l), "");
}

static void dot_step(CG *g, int h, int w, LLVMValueRef *arow, LLVMValueRef *bcol,
                     LLVMValueRef off, LLVMValueRef mask, LLVMValueRef *acc) {
  LLVMBuilderRef B = g->b;
  LLVMValueRef bv[DOT_WMAX];
  for (int j = 0; j < w; j++) bv[j] = load_vec(g, gep(g, bcol[j], off), mask);
  for (int i = 0; i < h; i++) {
    LLVMValueRef av = load_vec(g, gep(g, arow[i], off), mask);
    for (int j = 0; j < w; j++) {
      LLVMValueRef args[] = { av, bv[j], LLVMBuildLoad2(B, g->t_vec, acc[i * w + j], "") };
      LLVMBuildStore(B, LLVMBuildCall2(B, g->fma_t, g->fma, args, 3, ""), acc[i * w + j]);
    }
  }
}

/* B^T's rows for an inner-product plan, from a B whose columns are contiguous:
 *   void packbt(i64 kc, ptr b, i64 b_sk, ptr out, i64 n)
 * out[j*kc + k] = b[k*b_sk + j] for j < n <= W and k < kc, kc >= W.  W rows of B at a time
 * (the last block moved back to end at kc, writing some values twice) are loaded, masked
 * to n lanes, transposed in registers and stored as n runs of W.  (Element by element, B^T
 * took 4 of the 6 us of 31 x 16 x 1000.) */
static void emit_packbt(CG *g, const char *name) {
  LLVMTypeRef P[] = { g->t_i64, g->t_ptr, g->t_i64, g->t_ptr, g->t_i64 };
  LLVMValueRef fn = new_fn(g, name, P, 5);
  LLVMValueRef kc = LLVMGetParam(fn, 0), b = LLVMGetParam(fn, 1), b_sk = LLVMGetParam(fn, 2),
               out = LLVMGetParam(fn, 3), n = LLVMGetParam(fn, 4);
  LLVMBuilderRef B = g->b;
  int W = g->W;
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  LLVMValueRef mask = lane_mask(g, n, 0), last = LLVMBuildSub(B, kc, ci64(g, W), "");
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "k");
  CgLoop L;
  LLVMValueRef k0 = loop_begin(g, &L, kv, ci64(g, 0), kc, ci64(g, W));
  LLVMValueRef kk = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, k0, last, ""), last, k0, "");
  LLVMValueRef rows[64];
  for (int r = 0; r < W; r++)
    rows[r] = load_vec(g, gep(g, b, LLVMBuildMul(B, LLVMBuildAdd(B, kk, ci64(g, r), ""), b_sk, "")), mask);
  transpose(g, rows);
  for (int j = 0; j < W; j++) {
    LLVMBasicBlockRef join = j ? if_begin(g, LLVMBuildICmp(B, LLVMIntSLT, ci64(g, j), n, "")) : NULL;
    store_vec(g, rows[j], gep(g, out, LLVMBuildAdd(B, LLVMBuildMul(B, ci64(g, j), kc, ""), kk, "")), NULL);
    if (join) if_end(g, join);
  }
  loop_end(g, &L);
  LLVMBuildRetVoid(B);
}

/* The inner-product kernel, for a C of few columns (a matrix-vector product), where a
 * register tile of nr columns would leave most lanes idle: an h x w tile of C whose
 * accumulators are vectors along k, summed across lanes at the end.  A is read in rows
 * (unit k stride), and the w columns of B, as rows of B^T (in place when B's columns are
 * contiguous, else packed), stay in L1.
 *   void dot(i64 kc, ptr a, i64 a_rs, ptr b, i64 b_rs, ptr c, i64 c_rs, i64 c_cs,
 *            i64 m_rem, i64 n_rem, i32 beta)
 * A[i,k] = a[i*a_rs + k], B^T[j,k] = b[j*b_rs + k], C[i,j] = c[i*c_rs + j*c_cs]; beta != 0
 * adds to C.  Rows past m_rem and columns past n_rem compute on copies of the last real
 * ones and store to them (the same values again).  k runs in whole vectors, ks of them a
 * step into separate accumulator sets (short tiles hide the FMA latency so), then one
 * masked vector. */
static void emit_dot(CG *g, const char *name, int h, int w, int ks) {
  LLVMTypeRef P[] = { g->t_i64, g->t_ptr, g->t_i64, g->t_ptr, g->t_i64, g->t_ptr, g->t_i64,
                      g->t_i64, g->t_i64, g->t_i64, g->t_i32 };
  LLVMValueRef fn = new_fn(g, name, P, 11);
  LLVMValueRef kc = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), a_rs = LLVMGetParam(fn, 2),
               b = LLVMGetParam(fn, 3), b_rs = LLVMGetParam(fn, 4), c = LLVMGetParam(fn, 5),
               c_rs = LLVMGetParam(fn, 6), c_cs = LLVMGetParam(fn, 7), m_rem = LLVMGetParam(fn, 8),
               n_rem = LLVMGetParam(fn, 9), beta = LLVMGetParam(fn, 10);
  LLVMBuilderRef B = g->b;
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
  int nacc = ks * h * w;
  LLVMValueRef acc[DOT_WMAX * DOT_HMAX * 8];
  for (int i = 0; i < nacc; i++) {
    acc[i] = LLVMBuildAlloca(B, g->t_vec, "");
    LLVMBuildStore(B, LLVMConstNull(g->t_vec), acc[i]);
  }
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "v"), rv = LLVMBuildAlloca(B, g->t_i64, "r");
  /* rows and columns clamped to the last real ones; A's rows, B^T's rows and C go by them */
  LLVMValueRef ri[DOT_HMAX], cj[DOT_WMAX], arow[DOT_HMAX], bcol[DOT_WMAX];
  LLVMValueRef mlast = LLVMBuildSub(B, m_rem, ci64(g, 1), ""), nlast = LLVMBuildSub(B, n_rem, ci64(g, 1), "");
  for (int i = 0; i < h; i++) {
    ri[i] = ci64(g, i);
    if (i) ri[i] = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, ri[i], m_rem, ""), ri[i], mlast, "");
    arow[i] = gep(g, a, LLVMBuildMul(B, a_rs, ri[i], ""));
  }
  for (int j = 0; j < w; j++) {
    cj[j] = ci64(g, j);
    if (j) cj[j] = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, cj[j], n_rem, ""), cj[j], nlast, "");
    bcol[j] = gep(g, b, LLVMBuildMul(B, b_rs, cj[j], ""));
  }
  LLVMValueRef nv = LLVMBuildSDiv(B, kc, ci64(g, g->W), "");    /* whole vectors */
  /* ks vectors a step, each into its own set; then single vectors into set 0 */
  CgLoop L;
  LLVMValueRef v = loop_begin(g, &L, kv, ci64(g, 0), LLVMBuildSub(B, nv, ci64(g, ks - 1), ""), ci64(g, ks));
  for (int u = 0; u < ks; u++) {
    LLVMValueRef off = LLVMBuildMul(B, LLVMBuildAdd(B, v, ci64(g, u), ""), ci64(g, g->W), "");
    dot_step(g, h, w, arow, bcol, off, NULL, acc + u * h * w);
  }
  loop_end(g, &L);
  if (ks > 1) {
    CgLoop R;
    LLVMValueRef v1 = loop_begin(g, &R, rv, L.i, nv, ci64(g, 1));
    dot_step(g, h, w, arow, bcol, LLVMBuildMul(B, v1, ci64(g, g->W), ""), NULL, acc);
    loop_end(g, &R);
  }
  LLVMValueRef done = LLVMBuildMul(B, nv, ci64(g, g->W), "");
  LLVMBasicBlockRef join = if_begin(g, LLVMBuildICmp(B, LLVMIntSLT, done, kc, ""));
  dot_step(g, h, w, arow, bcol, done, lane_mask(g, LLVMBuildSub(B, kc, done, ""), 0), acc);
  if_end(g, join);

  LLVMValueRef tot[DOT_HMAX * DOT_WMAX], sum[DOT_HMAX * DOT_WMAX];
  for (int i = 0; i < h * w; i++) {
    tot[i] = LLVMBuildLoad2(B, g->t_vec, acc[i], "");
    for (int s = 1; s < ks; s++) tot[i] = LLVMBuildFAdd(B, tot[i], LLVMBuildLoad2(B, g->t_vec, acc[s * h * w + i], ""), "");
  }
  lane_sums(g, tot, h * w, sum);
  /* C = sums, or C + sums, through the clamped rows and columns: every old value is read
   * before any is written, so a clamped duplicate writes the same value to the same place
   * again (no branch per row or column, and one path for both). */
  LLVMValueRef add = LLVMBuildICmp(B, LLVMIntNE, beta, ci32(g, 0), ""), cp[DOT_HMAX * DOT_WMAX],
               x[DOT_HMAX * DOT_WMAX];
  for (int i = 0; i < h; i++) {
    LLVMValueRef crow = gep(g, c, LLVMBuildMul(B, c_rs, ri[i], ""));
    for (int j = 0; j < w; j++) {
      cp[i * w + j] = gep(g, crow, LLVMBuildMul(B, c_cs, cj[j], ""));
      LLVMValueRef old = LLVMBuildLoad2(B, g->t_el, cp[i * w + j], "");
      x[i * w + j] = LLVMBuildSelect(B, add, LLVMBuildFAdd(B, sum[i * w + j], old, ""), sum[i * w + j], "");
    }
  }
  for (int i = 0; i < h * w; i++) LLVMBuildStore(B, x[i], cp[i]);
  LLVMBuildRetVoid(B);
}


static void rows_name(char *out, size_t n, const GemmKernels *g, int h) {
  snprintf(out, n, "gemm_%s_rows%d", elem_name(g->elem), h);
}

static void packa_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packa", elem_name(g->elem));
}

static void uk_name(char *out, size_t n, const GemmKernels *g, const Family *f, int h,
                    bool masked) {
  snprintf(out, n, "gemm_%s_uk%dx%d_h%d%s", elem_name(g->elem), f->mr, f->nr, h,
           masked ? "_m" : "");
}

static void ukp_name(char *out, size_t n, const GemmKernels *g, const Family *f) {
  snprintf(out, n, "gemm_%s_uk%dx%d_pack", elem_name(g->elem), f->mr, f->nr);
}

static void ukq_name(char *out, size_t n, const GemmKernels *g, const Family *f) {
  snprintf(out, n, "gemm_%s_uk%dx%d_pf", elem_name(g->elem), f->mr, f->nr);
}

static void packbt_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packbt", elem_name(g->elem));
}

static void dot_name(char *out, size_t n, const GemmKernels *g, int h, int w) {
  snprintf(out, n, "gemm_%s_dot%dx%d", elem_name(g->elem), h, w);
}

static void packb_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packb", elem_name(g->elem));
}

/* Emit every function of the set, spread over nmod modules (each in its own context) so
 * they compile in parallel: each function goes to the module with the least work so far,
 * work estimated as the instructions it will have (code generation time follows them).
 * Returns how many functions. */
enum { EMIT_TILES = 1, EMIT_ROWS = 2, EMIT_DOTS = 4 };
static int emit_all(GemmKernels *g, LLVMContextRef *ctx, LLVMModuleRef *mod, int nmod, int what) {
  CG cg[MAX_MODS];
  double load[MAX_MODS] = { 0 };
  for (int i = 0; i < nmod; i++) cg_init(&cg[i], ctx[i], mod[i], g->elem, g->W);
  char name[96];
  int n = 0;
#define LIGHTEST(w) ({ int k_ = 0; for (int i_ = 1; i_ < nmod; i_++) if (load[i_] < load[k_]) k_ = i_; load[k_] += (w); &cg[k_]; })
  for (int fi = 0; fi < g->nfam && (what & EMIT_TILES); fi++) {
    Family *f = &g->fam[fi];
    for (int h = f->mr; h >= 1; h--) {        /* biggest first balances best */
      if (!f->has[h]) continue;
      for (int m = 0; m < (g->cheap_masks ? 1 : 2); m++) {
        bool masked = m == 0;
        if (h == f->mr && (g->cheap_masks || !masked)) continue;   /* the fetching kernel's */
        uk_name(name, sizeof name, g, f, h, masked);
        int ks = f->ksplit[h], step = f->v + 3 * h + h * f->v;
        double w = step * (ks + (ks > 1)) + h * f->v * (5 + ks) + 6 * h + 20;
        emit_uk(LIGHTEST(w), name, h, f->v, ks, masked, UK_PLAIN);
        n++;
      }
    }
    if (f->has[f->mr]) {                 /* the full height, packing B as it goes */
      ukp_name(name, sizeof name, g, f);
      int h = f->mr, ks = f->ksplit[h], step = f->v + 3 * h + h * f->v;
      emit_uk(LIGHTEST(step * (ks + (ks > 1)) * 1.3 + h * f->v * (5 + ks) + 6 * h + 20), name, h, f->v, ks, true, UK_PACK);
      n++;
      ukq_name(name, sizeof name, g, f);
      emit_uk(LIGHTEST(step * (ks + (ks > 1)) * 1.2 + h * f->v * (5 + ks) + 6 * h + 20), name, h, f->v, ks, !!g->cheap_masks, UK_PF);
      n++;
    }
  }
  int mr_max = 1;
  for (int fi = 0; fi < g->nfam; fi++) mr_max = g->fam[fi].mr > mr_max ? g->fam[fi].mr : mr_max;
  if (what & EMIT_TILES) {
    packb_name(name, sizeof name, g);
    emit_packb(LIGHTEST(60.0), name);
    packa_name(name, sizeof name, g);
    /* a transpose's shuffles cost the back end several times an FMA's instructions */
    emit_packa(LIGHTEST(4.0 * g->W * (g->W > 8 ? 4 : 3) * ((mr_max + g->W - 1) / g->W)), name, mr_max);
    n += 2;
  }
  for (int h = 1; h <= ROWS_MAX && (what & EMIT_ROWS); h++, n++) {
    rows_name(name, sizeof name, g, h);
    emit_rows(LIGHTEST(10.0 * h * ROWS_U + 40), name, h);
  }
  if (what & EMIT_DOTS) {
    packbt_name(name, sizeof name, g);
    emit_packbt(LIGHTEST(4.0 * g->W * 4), name);
    n++;
  }
  for (int w = DOT_WMAX; w >= 1 && (what & EMIT_DOTS); w--)
    for (int h = DOT_HMAX; h >= 1; h--) {
      if (!g->dot.has[w][h]) continue;
      dot_name(name, sizeof name, g, h, w);
      int ks = g->dot.ks[w][h];
      emit_dot(LIGHTEST((double)ks * (h * w + h + w) + 3.0 * h * w * 6 + 20), name, h, w, ks);
      n++;
    }
#undef LIGHTEST
  for (int i = 0; i < nmod; i++) LLVMDisposeBuilder(cg[i].b);
  return n;
}

/* Run the kernel for a piece of hs rows on a tile of height h, w columns wide: the
 * unmasked one when the piece fills the tile.  The full height is the fetching kernel's
 * (UK_PF), asking for the lines fe names or none: it is the family's only one where masks
 * are cheap, and serves the full tiles elsewhere (one kernel fewer to compile each: 6 ms
 * of the 40). */
typedef struct Fetch { const void *pf; int64_t pf_rs, l0, l1, sh; } Fetch;
static void tile_call(const GemmKernels *g, const Family *f, int h, int hs, int64_t w, int64_t kc,
                      const void *a, int64_t a_rs, int64_t a_cs, const void *b, int64_t b_rs,
                      void *c, int64_t c_rs, int32_t beta, const Fetch *fe) {
  static const Fetch none = { 0 };
  if (!fe) fe = &none;
  if (h == f->mr && (g->cheap_masks || (hs == h && w == f->nr)))
    f->ukq(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, w, hs, beta, fe->pf, fe->pf_rs, fe->l0, fe->l1, fe->sh);
  else
    (w == f->nr && hs == h ? f->ukf[h] : f->uk[h])(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, w, hs, beta);
}

/* Calibration, the hybrid part of the model: every kernel timed once on operands that stay
 * in L1 (one column of A and one row of B, a_cs = b_rs = 0), best of CAL_TRIALS runs of
 * about CAL_S seconds each.  It measures the hardware -- e.g. Zen 5 issues about one
 * broadcast load per cycle, which halves a 16x16 tile and no FMA count predicts -- never
 * a shape, and costs a little over a millisecond (1.1-1.4 ms on Zen 5). */
#define CAL_K 512
#define CAL_K0 4
#define CAL_CALLS 1024
#define CAL_TRIALS 5
#define CAL_S 20e-6
static void calibrate(GemmKernels *g) {
  size_t es = (size_t)g->esize;
  char *mem = xcalloc(1, (MAX_MR + MAX_V * 16 + MAX_MR * MAX_V * 16) * es * 2 + 256);
  char *a = align64(mem), *b = align64(a + MAX_MR * es), *c = align64(b + MAX_V * 16 * es * 2);
  for (int fi = 0; fi < g->nfam; fi++) {
    Family *f = &g->fam[fi];
    for (int h = 1; h <= f->mr; h++) {
      if (!f->has[h]) continue;
#define UK(kc, beta) tile_call(g, f, h, h, f->nr, kc, a, 1, 0, b, 0, c, f->nr, beta, NULL)
      int64_t reps = (int64_t)(CAL_S / (f->ksec[h] * CAL_K));
      reps = imax(1, imin(reps, 10000));
      UK(CAL_K, 1);
      double best = 1e30;
      for (int t = 0; t < CAL_TRIALS; t++) {
        double t0 = now_s();
        for (int64_t r = 0; r < reps; r++) UK(CAL_K, 1);
        double dt = (now_s() - t0) / ((double)reps * CAL_K);
        if (dt < best) best = dt;
      }
      if (best > 0 && best < 1) f->ksec[h] = best;
      /* the fixed cost of a call: CAL_CALLS calls over CAL_K0 steps, less those steps.  A
       * tall tile sets up a pointer per row of A (spilled past the registers) and stores
       * more rows: on Zen 5 the 14x32 tile's call costs about 10 ns, the 6x64 one's 3,
       * which the model's formula (20 cycles and a load and store a vector, model_block)
       * called nearly equal; at k = 3 the 6x64 tiles ran 672 x 448 in 9.8 us, the 14x32
       * ones in 12.7.  (C tiles walking across 450 KB, as a block's do, gave about the
       * same figures and took 2 ms of the start-up; these calls take about 0.3 ms.) */
      best = 1e30;
      for (int t = 0; t < CAL_TRIALS; t++) {
        double t0 = now_s();
        for (int r = 0; r < CAL_CALLS; r++) UK(CAL_K0, 0);
        double dt = (now_s() - t0) / CAL_CALLS;
        if (dt < best) best = dt;
      }
#undef UK
      best -= CAL_K0 * f->ksec[h];
      if (best > 0 && best < 1e-3) f->call_s[h] = best;
    }
    f->measured = true;
    plan_edges(g, f);
  }
  free(mem);
  /* The model's cost of a call (CALL_CYC and the C tile's loads and stores, model_block)
   * was fitted on whole runs, where a call costs several times what it does back to back
   * in L1; what the measurement adds is the difference between tiles: the set-up beyond
   * that of the cheapest family's tallest tile. */
  g->call_base = 1e30;
  for (int fi = 0; fi < g->nfam; fi++) {
    double c = g->fam[fi].call_s[g->fam[fi].mr];
    if (c > 0 && c < g->call_base) g->call_base = c;
  }
}

/* The row-streaming kernels: one row of B over and over (b_sk = 0), C rows in L1. */
static void calibrate_rows(GemmKernels *g) {
  size_t es = (size_t)g->esize;
  enum { RN = 256, RK = 64 };
  char *mem = xcalloc(1, (ROWS_MAX + RN + ROWS_MAX * RN) * es + 256);
  char *a = align64(mem), *b = align64(a + ROWS_MAX * es), *c = align64(b + RN * es);
  for (int h = 1; h <= ROWS_MAX; h++) {
    double best = 1e30;
    for (int t = 0; t < CAL_TRIALS; t++) {
      double t0 = now_s();
      for (int r = 0; r < 8; r++) g->rows[h](RK, RN, a, 1, 0, b, 0, c, RN);
      double dt = (now_s() - t0) / (8.0 * RK * (RN / g->W));
      if (dt < best) best = dt;
    }
    g->rows_sec[h] = best > 0 && best < 1 ? best : h / (hw_ghz(&g->hw) * 1e9);
  }
  free(mem);
}

/* The inner-product kernels: the rows of A and of B^T one vector long each (a_rs = b_rs =
 * 0), long and short reductions, so that the per-vector rate and the cost of a call (its
 * lane sums and C) come apart. */
static void calibrate_dots(GemmKernels *g) {
  size_t es = (size_t)g->esize;
  enum { NV = 64 };
  char *mem = xcalloc(1, (size_t)(2 * NV * g->W + DOT_HMAX * DOT_WMAX) * es + 256);
  char *a = align64(mem), *b = align64(a + (size_t)NV * g->W * es), *c = align64(b + (size_t)NV * g->W * es);
  DotSet *d = &g->dot;
  for (int w = 1; w <= DOT_WMAX; w++)
    for (int h = 1; h <= DOT_HMAX; h++) {
      if (!d->has[w][h]) continue;
      double t[2];
      for (int s = 0; s < 2; s++) {
        int64_t kc = s ? g->W : (int64_t)NV * g->W;
        int reps = s ? 64 : 8;
        t[s] = 1e30;
        for (int tr = 0; tr < CAL_TRIALS; tr++) {
          double t0 = now_s();
          for (int r = 0; r < reps; r++) d->fn[w][h](kc, a, 0, b, 0, c, w, 1, h, w, 1);
          double dt = (now_s() - t0) / reps;
          if (dt < t[s]) t[s] = dt;
        }
      }
      double per = (t[0] - t[1]) / (NV - 1);
      if (per > 0 && per < 1) d->vsec[w][h] = per;
      if (t[1] - d->vsec[w][h] > 0 && t[1] < 1) d->call[w][h] = t[1] - d->vsec[w][h];
    }
  /* B^T of NV rows and W columns, from a B of W columns (b to c, 2 NV W elements apart) */
  d->bt_block = 1e30;
  for (int tr = 0; tr < CAL_TRIALS; tr++) {
    double t0 = now_s();
    for (int r = 0; r < 64; r++) d->packbt(NV, a, g->W, b, g->W);
    double dt = (now_s() - t0) / 64 / (NV / g->W);
    if (dt < d->bt_block) d->bt_block = dt;
  }
  free(mem);
}

/* Emit the functions `what` names into modules that compile in parallel and add them to
 * the JIT: two modules per CPU (up to MAX_MODS), which jit_add_modules hands to one thread
 * per CPU as each finishes, evening out the estimate's errors.  Returns how many functions,
 * 0 on failure. */
static int compile_part(GemmKernels *g, int what, const char *prefix, char *err, size_t errlen) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int nmod = (int)imax(1, imin(MAX_MODS, 2 * online));
  LLVMContextRef ctx[MAX_MODS];
  LLVMModuleRef mod[MAX_MODS];
  for (int i = 0; i < nmod; i++) {
    char mname[48];
    snprintf(mname, sizeof mname, "%s_%s_%d", prefix, elem_name(g->elem), i);
    ctx[i] = LLVMContextCreate();
    mod[i] = jit_module_new(g->jit, ctx[i], mname);
  }
  int n = emit_all(g, ctx, mod, nmod, what);
  bool ok = jit_add_modules(g->jit, mod, nmod, GEMM_PIPELINE, err, errlen);
  for (int i = 0; i < nmod; i++) LLVMContextDispose(ctx[i]);
  return ok ? n : 0;
}

GemmKernels *gemm_compile(DynElem elem, const HwModel *hw, char *err, size_t errlen) {
  if (elem != DYN_F32 && elem != DYN_F64) {
    snprintf(err, errlen, "gemm: element type %s is not supported (f32, f64)", elem_name(elem));
    return NULL;
  }
  double t0 = now_s();
  GemmKernels *g = xcalloc(1, sizeof *g);
  g->elem = elem;
  g->hw = *hw;
  g->esize = elem_size(elem);
  g->W = hw_vbits(hw) / (8 * g->esize);
  pthread_mutex_init(&g->ws_lock, NULL);
  pthread_mutex_init(&g->cache_lock, NULL);
  pthread_mutex_init(&g->part_lock, NULL);
  g->cache = xcalloc(PLAN_CACHE, sizeof *g->cache);
  atomic_store(&g->epoch, new_epoch());
  g->jit = jit_new(hw, err, errlen);
  if (!g->jit) {
    gemm_free(g);
    return NULL;
  }
  /* Masked vector memory operations are as fast as plain ones only with AVX-512 masks. */
  g->cheap_masks = hw_vbits(hw) >= 512 && strstr(jit_cpu_features(g->jit), "+avx512f");
  enumerate_tiles(g);
  dot_setup(g);
  if (!g->nfam) {
    snprintf(err, errlen, "gemm: no register tile fits %d vector registers", hw_vregs(hw));
    gemm_free(g);
    return NULL;
  }
  if (!jit_can_run(g->jit)) {
    /* A model this CPU cannot run: its kernels are printed (gemm_code) and its plans shown
     * (gemm_describe), never run.  The rates are the model's own (tile_cyc, dot_setup), not
     * measured, and every part counts as ready. */
    for (int fi = 0; fi < g->nfam; fi++) plan_edges(g, &g->fam[fi]);
    for (int h = 1; h <= ROWS_MAX; h++) g->rows_sec[h] = h / (hw_ghz(&g->hw) * 1e9);
    atomic_store(&g->rows_state, 1);
    atomic_store(&g->dot_state, 1);
    g->compile_ms = (now_s() - t0) * 1e3;
    return g;
  }
  g->nfuncs = compile_part(g, EMIT_TILES, "gemm", err, errlen);
  if (!g->nfuncs) {
    gemm_free(g);
    return NULL;
  }
  char name[96];
  for (int fi = 0; fi < g->nfam; fi++) {
    Family *f = &g->fam[fi];
    for (int h = 1; h <= f->mr; h++) {
      if (!f->has[h] || (h == f->mr && g->cheap_masks)) continue;   /* tile_call: ukq */
      uk_name(name, sizeof name, g, f, h, true);
      f->uk[h] = (UkFn)jit_lookup(g->jit, name, err, errlen);
      f->ukf[h] = f->uk[h];
      if (!g->cheap_masks && h < f->mr) {
        uk_name(name, sizeof name, g, f, h, false);
        f->ukf[h] = (UkFn)jit_lookup(g->jit, name, err, errlen);
      }
      if (!f->uk[h] || !f->ukf[h]) {
        gemm_free(g);
        return NULL;
      }
    }
    if (f->has[f->mr]) {
      ukq_name(name, sizeof name, g, f);
      f->ukq = (UkPfFn)jit_lookup(g->jit, name, err, errlen);
      ukp_name(name, sizeof name, g, f);
      if (!f->ukq || !(f->ukp = (UkPackFn)jit_lookup(g->jit, name, err, errlen))) {
        gemm_free(g);
        return NULL;
      }
    }
  }
  packa_name(name, sizeof name, g);
  g->packa = (PackAFn)jit_lookup(g->jit, name, err, errlen);
  packb_name(name, sizeof name, g);
  if (!g->packa || !(g->packb = (PackBFn)jit_lookup(g->jit, name, err, errlen))) {
    gemm_free(g);
    return NULL;
  }
  calibrate(g);
  g->compile_ms = (now_s() - t0) * 1e3;
  return g;
}

void gemm_free(GemmKernels *g) {
  if (!g) return;
  jit_free(g->jit);
  for (int i = 0; i < g->nws; i++) free(g->ws[i]);
  free(g->ws);
  free(g->ws_bytes);
  pthread_mutex_destroy(&g->ws_lock);
  pthread_mutex_destroy(&g->cache_lock);
  pthread_mutex_destroy(&g->part_lock);
  free(g->cache);
  free(g);
}

double gemm_compile_ms(const GemmKernels *g) { return g->compile_ms; }
void gemm_later_ms(const GemmKernels *g, double *rows_ms, double *dots_ms) {
  *rows_ms = atomic_load(&g->rows_state) > 0 ? g->rows_ms : 0;
  *dots_ms = atomic_load(&g->dot_state) > 0 ? g->dot_ms : 0;
}

/* The functions of a part compiled on first need, found in the JIT. */
static bool bind_rows(GemmKernels *g) {
  char err[256], name[96];
  for (int h = 1; h <= ROWS_MAX; h++) {
    rows_name(name, sizeof name, g, h);
    if (!(g->rows[h] = (RowsFn)jit_lookup(g->jit, name, err, sizeof err))) return false;
  }
  calibrate_rows(g);
  return true;
}

static bool bind_dots(GemmKernels *g) {
  char err[256], name[96];
  for (int w = 1; w <= DOT_WMAX; w++)
    for (int h = 1; h <= DOT_HMAX; h++) {
      if (!g->dot.has[w][h]) continue;
      dot_name(name, sizeof name, g, h, w);
      if (!(g->dot.fn[w][h] = (DotFn)jit_lookup(g->jit, name, err, sizeof err))) return false;
    }
  packbt_name(name, sizeof name, g);
  if (!(g->dot.packbt = (PackBtFn)jit_lookup(g->jit, name, err, sizeof err))) return false;
  calibrate_dots(g);
  return true;
}

/* Compile and calibrate a part compiled on first need (EMIT_ROWS, EMIT_DOTS) if that has
 * not been done; false if it cannot be had (then no plan uses it). */
static bool part_ensure(GemmKernels *g, int what) {
  bool rows = what == EMIT_ROWS;
  _Atomic int *state = rows ? &g->rows_state : &g->dot_state;
  int st = atomic_load_explicit(state, memory_order_acquire);
  if (st) return st > 0;
  pthread_mutex_lock(&g->part_lock);
  if (!(st = atomic_load(state))) {
    double t0 = now_s();
    char err[256];
    int n = compile_part(g, what, rows ? "gemm_rows" : "gemm_dot", err, sizeof err);
    st = n && (rows ? bind_rows(g) : bind_dots(g)) ? 1 : -1;
    double ms = (now_s() - t0) * 1e3;
    if (rows) g->rows_ms = ms;
    else g->dot_ms = ms, g->dot_nfuncs = n;
    atomic_store_explicit(state, st, memory_order_release);
  }
  pthread_mutex_unlock(&g->part_lock);
  return st > 0;
}

bool gemm_code(GemmKernels *g, const char *what, Buf *out, char *err, size_t errlen) {
  bool asm_ = !strcmp(what, "asm");
  if (!asm_ && strcmp(what, "llvm")) {
    snprintf(err, errlen, "gemm: no code view '%s' (llvm, asm)", what);
    return false;
  }
  /* Rebuilt in a private context: the JIT owns the module it compiled, and code
   * generation is deterministic, so this is the same code. */
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = jit_module_new(g->jit, ctx, "gemm");
  emit_all(g, &ctx, &mod, 1, EMIT_TILES | EMIT_ROWS | EMIT_DOTS);
  bool ok = jit_optimize(g->jit, mod, GEMM_PIPELINE, err, errlen);
  if (ok) {
    if (asm_) ok = jit_print_asm(g->jit, mod, out, err, errlen);
    else jit_print_ir(mod, out);
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return ok;
}

/* ---- the run-time model and plan ---- */

static void plan_key(const Prob *p, int nthreads, int64_t *key) {
  int64_t k[KEY_LEN] = { p->batch, p->m, p->n, p->k, p->a_sb, p->a_sm, p->a_sk, p->b_sb, p->b_sk,
                         p->b_sn, p->c_sb, p->c_sm, p->c_sn,
                         nthreads * 4 + p->acc * 2 + p->ctmp };
  memcpy(key, k, sizeof k);
}

/* Independent products summed, then mixed: a chain of 14 multiplies took longer. */
static unsigned key_hash(const int64_t *key) {
  uint64_t h = 0;
  for (int i = 0; i < KEY_LEN; i++) h += (uint64_t)key[i] * (0x9E3779B97F4A7C15ull + 2 * (uint64_t)i);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return (unsigned)(h >> 40) % PLAN_CACHE;
}

static int64_t balanced(int64_t total, int64_t maxblk, int64_t unit) {
  if (total <= 0) return unit;
  int64_t nblk = cdiv(total, maxblk);
  int64_t blk = cdiv(cdiv(total, nblk), unit) * unit;
  return blk > 0 ? blk : unit;
}

static void block_sizes(const GemmKernels *g, const Family *f, int64_t mt, int64_t nt,
                        int64_t K, Plan *pl) {
  const HwModel *h = &g->hw;
  int es = g->esize;
  /* kc: the kc x nr micro-panel of B may fill L1.  It is read in order, once per row tile,
   * so what L1 cannot keep L2 resends at a fraction of its bandwidth, while a longer k loop
   * amortises each C tile update (the classic "half of L1" measured 5-15% slower). */
  int64_t kc_max = imax(16, (int64_t)(hw_cache_bytes(h, 0) / (f->nr * es)) / 8 * 8);
  pl->kc = imax(1, balanced(K, kc_max, 4));
  if (pl->kc > K) pl->kc = K;
  int64_t mc_max = imax(f->mr, (int64_t)(hw_cache_bytes(h, 1) / 2 / (pl->kc * es)) / f->mr * f->mr);
  pl->mc = balanced(mt, mc_max, f->mr);
  /* nc: the packed kc x nc panel of B in half of this core's share of L3 (BLIS's choice),
   * or, when A is small enough that repacking it per column block is cheap, in half of L2,
   * where writing the panel needs no trip to L3 and the kernels read it from L2. */
  int lvl = pl->nc_l2 ? 1 : 2;
  int64_t nc_max = imax(f->nr, (int64_t)(hw_cache_bytes(h, lvl) / 2 / (pl->kc * es)) / f->nr * f->nr);
  pl->nc = balanced(nt, nc_max, f->nr);
  const GemmForce *fo = &g->force;
  if (fo->kc > 0) pl->kc = imin(fo->kc, imax(K, 1));
  if (fo->mc > 0) pl->mc = fo->mc;
  if (fo->nc > 0) pl->nc = fo->nc;
}

/* Seconds per k step of the row pieces of an m-extent of mt rows, and their count. */
static double rows_sec(const Family *f, int64_t mt, int t, int64_t *ncalls) {
  if (mt <= 0) { *ncalls = 0; return 0; }
  int64_t full = mt / f->mr, r = mt % f->mr;
  if (r && full) { full--; r += f->mr; }
  *ncalls = full + (r ? f->dec_n[t][r] : 0);
  return full * f->ksec[f->mr] + (r ? f->dec_sec[t][r] : 0);
}

/* L1 associativity: x86 L1 data caches are virtually indexed, physically tagged, so one way
 * spans a 4 KiB page and ways = capacity / 4 KiB (12 for 48 KiB).  The set index repeats
 * every 4 KiB, which is what makes power-of-two leading dimensions collide. */
#define SET_SPAN 4096
static int l1_ways(const HwModel *h) {
  int w = (int)(hw_cache_bytes(h, 0) / SET_SPAN);
  return w >= 2 ? w : 8;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) { int64_t t = a % b; a = b; b = t; }
  return a;
}

/* Lines one L1 set holds from `count` accesses `stride` bytes apart (each within a line). */
static int64_t lines_per_set(int64_t stride, int64_t count) {
  if (count <= 1) return count;
  int64_t s = (stride < 0 ? -stride : stride) % SET_SPAN;
  if (s == 0) return count;
  int64_t pos = SET_SPAN / imax(gcd64(s, SET_SPAN), 64);   /* distinct set positions hit */
  return cdiv(count, imin(pos, count));
}

/* Bandwidth per core of the level holding F bytes, when `users` cores stream at once. */
static double shared_bw(const HwModel *h, double F, int users) {
  double bw = level_bw(h, F);
  int nc = hw_ncaches(h);
  for (int i = 0; i <= nc && i < h->nlevels; i++)
    if (i == nc || F <= (double)h->level[i].bytes) {
      double tot = h->level[i].total_gbs * 1e9;
      if (tot > 0 && users > 0 && tot / users < bw) bw = tot / users;
      break;
    }
  return bw;
}

/* Whether a block of mt rows packs B in its first tiles (ukp) rather than before them: B
 * with unit column stride, and a first piece of full height. */
static bool fused_packing(const Family *f, const Prob *p, const Plan *pl, int64_t mt) {
  int64_t rows = imin(pl->mc, mt);
  return pl->pack_b && p->b_sn == 1 && f->ukp && rows / f->mr > (rows % f->mr ? 1 : 0);
}

/* Predicted seconds for one thread block of bt x mt x nt (x K) of `users` running at once,
 * filling pl's parts. */
static void model_block(const GemmKernels *g, const Family *f, const Prob *p, int64_t bt,
                        int64_t mt, int64_t nt, int users, Plan *pl) {
  const HwModel *h = &g->hw;
  double hz = hw_ghz(h) * 1e9, es = g->esize, line = h->nlevels && h->level[0].line > 0
                                                     ? h->level[0].line : 64;
  int64_t K = p->k, calls;
  double rs = rows_sec(f, mt, !pl->pack_b, &calls);
  int64_t ntiles = cdiv(nt, f->nr), nkb = cdiv(K, pl->kc);
  int64_t njc = cdiv(nt, pl->nc), nic = cdiv(mt, pl->mc);
  /* a call: its fixed cost and the C tile, loaded and stored once per vector */
  int64_t htop = imin(f->mr, mt), hc = htop;
  while (hc < f->mr && !f->has[hc]) hc++;      /* the tile height that covers htop rows */
  double extra = f->call_s[hc] > g->call_base ? f->call_s[hc] - g->call_base : 0;
  double call_s = (CALL_CYC + 2.0 * htop * f->v) / hz + extra;
  pl->t_comp = (double)bt * ntiles * ((double)K * rs + (double)nkb * calls * call_s);
  /* B read in place costs more than the kernel rates say (they were measured on aligned
   * strips that fit): rows not a whole number of lines apart make most of its vectors
   * straddle two lines, and a strip past 3/4 of L1 (its rows' whole lines, one more a row
   * when misaligned) shares the cache badly with A and C. */
  if (!pl->pack_b && K > 1) {
    bool split = (p->b_sk * g->esize) % (int64_t)line != 0;
    int64_t lines = cdiv(f->nr * g->esize, (int64_t)line) + split;
    double extra = split ? SPLIT_LOADS : 0;
    if ((double)imin(pl->kc, K) * lines * line > 0.75 * hw_cache_bytes(h, 0)) extra += CROWDED_L1;
    pl->t_comp *= 1 + extra;
  }
  double bytesA = (double)bt * mt * K * es, bytesB = (double)bt * K * nt * es;
  double bwA = shared_bw(h, (double)p->m * p->k_all * es * (p->a_sb ? p->batch : 1), users);
  double wholeB = (double)p->k_all * p->n * es * (p->b_sb ? p->batch : 1), bwB = shared_bw(h, wholeB, users);
  double bwL2 = level_bw(h, hw_cache_bytes(h, 1) / 2);
  /* Set pressure in L1 (see lines_per_set).  A in place whose rows alias fills its sets by
   * itself: every broadcast then misses L1, a stall no bandwidth overlaps.  A B strip read
   * in place whose rows alias cannot stay in L1 between row pieces: each piece after the
   * first fetches it again from L2, row by row.  Packed panels are contiguous and stream. */
  int ways = l1_ways(h);
  int64_t kc = pl->kc, hmax = imin(f->mr, mt);
  int64_t a_set = p->a_sm == 1 || hmax == 1 ? lines_per_set(p->a_sk * g->esize, kc)
                  : lines_per_set(p->a_sm * g->esize, hmax) * cdiv(kc * g->esize, SET_SPAN);
  int64_t b_set = lines_per_set(p->b_sk * g->esize, kc) * cdiv(f->nr * g->esize, (int64_t)line);
  double stall = 0;
  /* Operand traffic.  A: once per column block (then reused from L2 across n tiles).
   * B in place: once per row block, in strips of nr columns, which memory serves less
   * well than whole lines in a row (a strip of s bytes costs as much as s + one line);
   * packed B: once, then from the packed panel. */
  double mem = bytesA * njc / bwA;
  if (!pl->pack_b) {
    /* Each row's piece of a strip costs a line more than its bytes.  A B larger than the
     * last cache's share of the cores at work comes from memory, where a piece with no
     * prefetch ahead of it costs FAR_PIECE lines more (50 x 2000 x 3000 on 2 threads: B in
     * place 3.4-4.3 ms, packed 1.7-2.0; the model had taken its 24 MB to stay in the 32 MB
     * L3 that 8 cores share) */
    double strip = f->nr * es, piece = line, bw = bwB;
    if (wholeB > hw_cache_bytes(h, hw_ncaches(h) - 1) * users) {
      piece = FAR_PIECE * line;
      bw = shared_bw(h, INFINITY, users);
    }
    mem += bytesB * nic / (bw * strip / (strip + piece));
    /* A strip that cannot stay in L1 comes back from L2 for each later piece, which the
     * edge DP's in-place table already charges (a piece costs at least its strip's reload
     * from L2), and which a tall piece's FMAs hide.  Rows a multiple of 4 KiB apart alias
     * in L2 as well: then the strip comes back from L3, a stall beyond the DP's figure. */
    if (b_set > ways && (p->b_sk * g->esize) % SET_SPAN == 0)
      stall += bytesB * (double)imax(0, calls - nic) / level_bw(h, hw_cache_bytes(h, 1) + 1);
  }
  if (!pl->pack_a && 2 * a_set > ways) stall += (double)bt * ntiles * mt * K * line / bwL2;
  /* C: written once per k block and read back for each after the first (and for C +=), at
   * the bandwidth of where C lives.  A tile writes its rows nr columns at a time, rows far
   * apart: from memory, as for B's strips, a piece of s bytes costs as much as s + one
   * line.  (4096 x 4096 x 1, where C is all the traffic: 6x64 tiles ran in 1.78 ms, 14x32
   * in 2.6 ms, which this charges as 1.8 and 2.2 ms; without it the model took 14x32.) */
  double bytesC = (double)bt * mt * nt * es, wholeC = (double)p->batch * p->m * p->n * es;
  double stripC = f->nr * es, passes = (double)(2 * nkb - 1) + (p->acc ? 1 : 0);
  bool farC = wholeC > hw_cache_bytes(h, hw_ncaches(h) - 1);
  mem += bytesC * passes / shared_bw(h, wholeC, users) * (farC ? (stripC + line) / stripC : 1);
  pl->t_stall = stall;
  pl->t_mem = mem;
  /* Packing reads the source and writes the panel; strided layouts go through scalar C. */
  double pack = 0;
  if (pl->pack_a) {
    bool fast = p->a_sk == 1 || p->a_sm == 1;
    pack += bytesA * njc * (1 / bwA + 1 / bwL2) * (fast ? 1 : 4);
  }
  if (pl->pack_b) {
    /* the panel is written where it fits; a panel past L2 is written through L3, each
     * line first read for ownership.  It is written whole, nr columns a strip, zeros past
     * the edge: for a narrow B far more than B (2 x 3 x 4096: 48 KB of B, a 512 KB panel;
     * charged as B's bytes, packing was taken for 4 us and ran in 12, B in place in 3) */
    double panel = (double)pl->kc * pl->nc * es, panelB = (double)bt * K * ntiles * f->nr * es;
    double wr = panel <= hw_cache_bytes(h, 1) ? 1 / bwL2 : 2 / shared_bw(h, panel, users);
    pl->fused = fused_packing(f, p, pl, mt);
    if (pl->fused) {
      /* The first tile of each strip reads B in place as it computes: its FMAs hide the
       * reads but for about a line of each row's piece (fitted on 77 x 4096 x 4096, 2
       * threads: packing cost about 0.3 ms beside the writes with 6x64 tiles, pieces of
       * 4 lines, and 0.7 ms with 14x32, pieces of 2). */
      double strip = f->nr * es;
      pack += bytesB / bwB * (line < strip ? line / strip : 1) + panelB * wr;
    } else {
      pack += (bytesB / bwB + panelB * wr) * (p->b_sn == 1 ? 1 : 4);
    }
  }
  if (pl->pack_a || pl->pack_b) pack += WS_S;
  pl->t_pack = pack;
}

/* The C lines the busiest block shares with its neighbours along N: one per row at each
 * inner edge whose start is not on a line boundary (a strided C shares every row). */
static int64_t share_lines(const GemmKernels *g, const Prob *p, const Plan *pl, int64_t bt,
                           int64_t mt) {
  if (pl->tn < 2 || pl->nbk >= p->n) return 0;
  int64_t edges = pl->tn > 2 ? 2 : 1, line = 64, es = g->esize, rows = 0;
  if (p->ctmp) return bt * mt * edges;
  int64_t period = imin(mt, line);          /* the offsets repeat within `line` rows */
  for (int64_t i = 0; i < period; i++)
    rows += ((i * p->c_sm + pl->nbk) * es) % line != 0;
  return bt * edges * (rows * (mt / period) + (mt % period ? rows * (mt % period) / period : 0));
}

/* The k split of a plan: k blocks of kb, each thread block's problem q (its share of k),
 * and the cost of adding the copies of C into C (read each, read and write C). */
static void ksplit_set(const GemmKernels *g, const Prob *p, int tk, Plan *pl, Prob *q) {
  *q = *p;
  pl->tk = tk;
  pl->kb = cdiv(p->k, tk);
  q->k = pl->kb;
  if (tk > 1) {
    double bytes = (double)p->batch * p->m * p->n * g->esize;
    pl->t_red = (tk - 1) * 3 * bytes / level_bw(&g->hw, bytes * tk);
  }
}

static void plan_eval(const GemmKernels *g, const Prob *p0, int fi, bool pa, bool pb, bool l2,
                      int tb, int tm, int tn, int tk, Plan *pl) {
  const Family *f = &g->fam[fi];
  memset(pl, 0, sizeof *pl);
  Prob q;
  ksplit_set(g, p0, tk, pl, &q);
  const Prob *p = &q;
  pl->fam = fi;
  pl->pack_a = pa;
  pl->pack_b = pb;
  pl->nc_l2 = l2;
  pl->tb = tb;
  pl->tm = tm;
  pl->tn = tn;
  pl->bb = cdiv(p->batch, tb);
  pl->mb = cdiv(cdiv(p->m, f->mr), tm) * f->mr;
  pl->nbk = cdiv(cdiv(p->n, f->nr), tn) * f->nr;
  int64_t mt = imin(pl->mb, p->m), nt = imin(pl->nbk, p->n), bt = imin(pl->bb, p->batch);
  block_sizes(g, f, mt, nt, p->k, pl);
  model_block(g, f, p, bt, mt, nt, tb * tm * tn * tk, pl);
  /* The busiest block bounds the time; blocks share the memory bandwidth of the last level
   * only, which per-core figures already reflect. */
  double comp_mem = pl->t_comp > pl->t_mem ? pl->t_comp : pl->t_mem;
  pl->t_sync = tb * tm * tn * tk > 1 ? SYNC_S : 0;
  pl->t_share = (double)share_lines(g, p, pl, bt, mt) * cdiv(p->k, pl->kc) * SHARE_S;
  pl->t = comp_mem + pl->t_stall + pl->t_pack + pl->t_sync + pl->t_share + pl->t_red;
}

/* The row-streaming plan (emit_rows) over a tb x 1 x tn grid: B read once, row by row, at
 * the bandwidth of the level that holds it, beside the kernel's measured time per row of B
 * and vector of columns; the C rows of a chunk of nc columns stay in half of L1. */
static void plan_eval_rows(const GemmKernels *g, const Prob *p, int tb, int tn, Plan *pl) {
  const HwModel *h = &g->hw;
  double es = g->esize, hz = hw_ghz(h) * 1e9;
  int users = tb * tn;
  memset(pl, 0, sizeof *pl);
  pl->rows = true;
  pl->tb = tb, pl->tm = 1, pl->tn = tn, pl->tk = 1;
  pl->kb = p->k;
  pl->bb = cdiv(p->batch, tb);
  pl->mb = pl->mc = p->m;
  pl->nbk = cdiv(cdiv(p->n, g->W), tn) * g->W;
  pl->kc = p->k;
  pl->nc = imax(g->W, (int64_t)(hw_cache_bytes(h, 0) / 2 / ((double)p->m * es)) / g->W * g->W);
  int64_t bt = imin(pl->bb, p->batch), nt = imin(pl->nbk, p->n), nch = cdiv(nt, pl->nc);
  pl->t_comp = (double)bt * ((double)p->k * cdiv(nt, g->W) * g->rows_sec[p->m] + nch * CALL_CYC / hz);
  double bwB = shared_bw(h, (double)p->k * p->n * es * (p->b_sb ? p->batch : 1), users);
  double bwA = shared_bw(h, (double)p->m * p->k * es * (p->a_sb ? p->batch : 1), users);
  double bwC = shared_bw(h, (double)p->m * p->n * es * p->batch, users);
  pl->t_mem = (double)bt * ((double)p->k * nt * es / bwB + (double)nch * p->m * p->k * es / bwA +
                            (double)p->m * nt * es * (p->acc ? 2 : 1) / bwC);
  pl->t_sync = users > 1 ? SYNC_S : 0;
  pl->t_share = (double)share_lines(g, p, pl, bt, p->m) * SHARE_S;
  pl->t = (pl->t_comp > pl->t_mem ? pl->t_comp : pl->t_mem) + pl->t_sync + pl->t_share;
}

/* ---- inner products: the model ---- */

/* The height of the next row piece with `left` rows to go: the tallest tile while it fits,
 * then the tallest emitted height that fits the rest.  One strip of width w takes w's
 * heights; several take the widest's (emitted for every width). */
static int dot_piece(const DotSet *d, int w, int64_t left) {
  int h = d->hmax[w];
  while (h > 1 && (h > left || !d->has[w][h])) h--;
  return h;
}

static int dot_hw(const Plan *pl) { return pl->dw[1] ? DOT_WMAX : pl->dw[0]; }

/* Seconds per vector of k for mt rows of the plan's strips, and per pass over them (the
 * calls' fixed costs). */
static double dot_rows_sec(const DotSet *d, const Plan *pl, int64_t mt, double *pass_s) {
  double vs = 0, cs = 0;
  for (int64_t left = mt; left > 0;) {
    int h = dot_piece(d, dot_hw(pl), left);
    for (int s = 0; s < DOT_STRIPS && pl->dw[s]; s++) {
      vs += d->vsec[pl->dw[s]][h];
      cs += d->call[pl->dw[s]][h];
    }
    left -= h;
  }
  *pass_s = cs;
  return vs;
}

/* B^T packed in a plan takes longer than calibrated with B in L1, its rows coming from L2
 * or further: 2 x 16 x 5000 ran in 3.2 us by inner products where the model said 2.5 with
 * the calibrated figure (the tiles, 2.2 us, were the better choice); with twice that
 * figure the model picks the tiles there and still the inner products on 31 x 16 x 1000,
 * 3 x 2 x 513 and 16 x 16 x 100000, where they are faster. */
#define BT_SITU 2.0

/* The inner-product plan over a tb x tm (x tk) grid: C's columns in strips of at most
 * DOT_WMAX, of nearly equal widths, the strips of a row piece one after the other (its rows
 * of A stay in L1); kc keeps B^T's rows of a k block in half of L1.  Compute from the
 * measured rates; A read once, from where it lives; B^T packed (pack_bt) when B's columns
 * are not contiguous, for each k block. */
static void plan_eval_dot(const GemmKernels *g, const Prob *p0, int tb, int tm, int tk, Plan *pl) {
  const HwModel *h = &g->hw;
  const DotSet *d = &g->dot;
  double es = g->esize, hz = hw_ghz(h) * 1e9;
  int users = tb * tm * tk;
  memset(pl, 0, sizeof *pl);
  Prob q;
  ksplit_set(g, p0, tk, pl, &q);
  const Prob *p = &q;
  pl->dot = true;
  pl->tb = tb, pl->tm = tm, pl->tn = 1;
  int ns = (int)cdiv(p->n, DOT_WMAX);
  for (int s = 0; s < ns; s++) pl->dw[s] = (int)(p->n / ns + (s < p->n % ns));
  int64_t unit = d->hmax[dot_hw(pl)];
  pl->bb = cdiv(p->batch, tb);
  pl->mb = cdiv(cdiv(p->m, unit), tm) * unit;
  pl->nbk = p->n;
  pl->pack_b = p->b_sk != 1 && p->k > 1;
  int64_t kc_max = imax(g->W, (int64_t)(hw_cache_bytes(h, 0) / 2 / ((double)p->n * es)) / g->W * g->W);
  pl->kc = imin(p->k, balanced(p->k, kc_max, g->W));
  if (g->force.kc > 0) pl->kc = imin(g->force.kc, p->k);
  int64_t mt = imin(pl->mb, p->m), bt = imin(pl->bb, p->batch);
  pl->mc = mt;
  int64_t nkb = cdiv(p->k, pl->kc), nvec = nkb * cdiv(pl->kc, g->W);
  double pass, vs = dot_rows_sec(d, pl, mt, &pass);
  pl->t_comp = (double)bt * ((double)nvec * vs + (double)nkb * (pass + CALL_CYC / hz));
  double bytesA = (double)bt * mt * p->k * es, bytesB = (double)bt * p->n * p->k * es;
  double bwA = shared_bw(h, (double)p->m * p->k_all * es * (p->a_sb ? p->batch : 1), users);
  double bwB = shared_bw(h, (double)p->k_all * p->n * es * (p->b_sb ? p->batch : 1), users);
  pl->t_mem = bytesA / bwA + bytesB / bwB;
  /* B^T: in registers, W rows of B at a time (emit_packbt) at BT_SITU times the rate
   * calibrated in L1, else about 2 cycles an element */
  if (!pl->pack_b) pl->t_pack = 0;
  else if (d->packbt && d->bt_block < 1 && p->b_sn == 1 && pl->kc >= g->W)
    pl->t_pack = (double)bt * cdiv(p->k, g->W) * cdiv(p->n, g->W) * d->bt_block * BT_SITU;
  else pl->t_pack = bytesB / es * 2 / hz;
  pl->t_sync = users > 1 ? SYNC_S : 0;
  pl->t = fmax(pl->t_comp, pl->t_mem) + pl->t_pack + pl->t_sync + pl->t_red;
}

/* The plans weighed so far: the best, and each one when cands is given. */
typedef struct Weighed { Plan *best, *cands; int nc, maxc; bool any; } Weighed;
static void weigh(Weighed *w, const Plan *pl) {
  if (w->cands && w->nc < w->maxc) w->cands[w->nc++] = *pl;
  if (!w->any || pl->t < w->best->t) *w->best = *pl;
  w->any = true;
}

/* Choose a plan; when cands is not NULL, also record every plan weighed.  The grids
 * tried use one thread or all of them, in every factorisation into batch x M x N. */
static void plan_weigh(GemmKernels *g, const Prob *p, int nthreads, Plan *best,
                       Plan *cands, int *ncands, int maxc) {
  const GemmForce *fo = &g->force;
  int T = nthreads > 0 ? nthreads : 1;
  int grid[65][4], ng = 0;
  if (fo->tb > 0 || fo->tm > 0 || fo->tn > 0 || fo->tk > 0) {
    grid[0][0] = fo->tb > 0 ? fo->tb : 1;
    grid[0][1] = fo->tm > 0 ? fo->tm : 1;
    grid[0][2] = fo->tn > 0 ? fo->tn : 1;
    grid[0][3] = fo->tk > 0 ? (int)imin(fo->tk, p->k) : 1;
    ng = 1;
  } else {
    for (int used = 1; used <= T; used = used == T ? T + 1 : T)
      for (int tb = 1; tb <= used && tb <= p->batch; tb++)
        for (int tm = 1; used % tb == 0 && tm <= used / tb; tm++) {
          int tn = used / tb / tm;
          if ((used / tb) % tm || ng == 64) continue;
          grid[ng][0] = tb;
          grid[ng][1] = tm;
          grid[ng][2] = tn;
          grid[ng][3] = 1;
          ng++;
        }
    /* all threads on k, for a small C and a long k */
    if (T > 1 && p->k >= KSPLIT_MIN_K && (double)p->batch * p->m * p->n * g->esize <= KSPLIT_MAX_C) {
      grid[ng][0] = grid[ng][1] = grid[ng][2] = 1;
      grid[ng][3] = T;
      ng++;
    }
  }
  Weighed W = { .best = best, .cands = cands, .maxc = maxc };
  bool tiles_free = fo->fam <= 0 && fo->pack_a <= 0 && fo->pack_b <= 0;   /* nothing tile-only forced */
  /* the row-streaming kernel, for C of a few rows and a B that streams from memory (from a
   * cache the tiles' strips are as fast, and faster with C in registers: 1 x 768 x 768 took
   * 1.4x as long by rows); forcing a family or a packing leaves it out unless forced too */
  const HwModel *hm = &g->hw;
  double llc = hm->nlevels >= 2 ? (double)hm->level[hm->nlevels - 2].bytes : 0;
  bool rows_fit = p->m <= ROWS_MAX && p->b_sn == 1 && !p->ctmp &&
                  (fo->rows == 1 || (double)p->k * p->n * g->esize * (p->b_sb ? p->batch : 1) > llc);
  bool rows = rows_fit && fo->rows != 2 && fo->dot != 1 &&
              (fo->rows == 1 || tiles_free) && part_ensure(g, EMIT_ROWS);
  for (int i = 0; rows && i < ng; i++) {
    int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2];
    if (tm > 1 || grid[i][3] > 1 || (ng > 1 && tn > 1 && tn > cdiv(p->n, g->W))) continue;
    Plan pl;
    plan_eval_rows(g, p, tb, tn, &pl);
    weigh(&W, &pl);
  }
  /* the inner-product kernels, for a C of a few columns and rows of A in unit stride */
  bool dot_fit = p->n <= DOT_MAXN && (p->a_sk == 1 || p->k == 1);
  bool dot = dot_fit && fo->dot != 2 && fo->rows != 1 &&
             (fo->dot == 1 || tiles_free) && part_ensure(g, EMIT_DOTS);
  for (int i = 0; dot && i < ng; i++) {
    int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2], tk = grid[i][3];
    if (tn > 1 || (ng > 1 && tm > 1 && tm > cdiv(p->m, g->dot.hmax[DOT_WMAX]))) continue;
    Plan pl;
    plan_eval_dot(g, p, tb, tm, tk, &pl);
    weigh(&W, &pl);
  }
  for (int fi = 0; fi < g->nfam; fi++) {
    if ((fo->rows == 1 || fo->dot == 1) && W.any) break;         /* forced, and it fits */
    if (fo->fam > 0 && fi != fo->fam - 1 && fo->fam <= g->nfam) continue;
    const Family *f = &g->fam[fi];
    for (int pb = 0; pb < 2; pb++) {
      if (!pb && p->b_sn != 1) continue;            /* kernels read B rows as vectors */
      if (fo->pack_b > 0 && pb != (fo->pack_b == 1) && p->b_sn == 1) continue;
      for (int pa = 0; pa < 2; pa++) {
        if (fo->pack_a > 0 && pa != (fo->pack_a == 1)) continue;
        for (int i = 0; i < ng; i++)
          for (int l2 = 0, l3_nc = 0; l2 <= pb; l2++) {
            int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2], tk = grid[i][3];
            if (ng > 1 && ((tm > 1 && tm > cdiv(p->m, f->mr)) ||
                           (tn > 1 && tn > cdiv(p->n, f->nr))))
              continue;                               /* some thread would get nothing */
            Plan pl;
            plan_eval(g, p, fi, pa, pb, l2, tb, tm, tn, tk, &pl);
            if (l2 && pl.nc == l3_nc) continue;      /* B's panel the same for L2 as for L3 */
            l3_nc = (int)pl.nc;
            weigh(&W, &pl);
          }
      }
    }
  }
  if (ncands) *ncands = W.nc;
}

/* C's last e columns, as a problem of their own (e > 0), and the rest (e < 0: p's first
 * n - |e| columns).  Neither is split again: the rest runs the plan weighed for it, and e
 * columns are fewer than any strip. */
static Prob part_cols(const GemmKernels *g, const Prob *p, int64_t e) {
  Prob q = *p;
  if (e < 0) {
    q.n = p->n + e;
    return q;
  }
  int64_t j0 = p->n - e;
  q.n = e;
  q.b += (size_t)(j0 * p->b_sn) * (size_t)g->esize;
  q.c += (size_t)(j0 * p->c_sn) * (size_t)g->esize;
  return q;
}

/* The plan for p: the best candidate, or -- when C's last strip would be narrow -- that
 * strip apart.  A tile computes all nr columns of a strip whatever its width, so the e =
 * n mod nr columns past the last full strip cost a whole strip: 2048 x 33 x 513 on 14x32
 * tiles spent half its time on one column.  The inner-product kernels take a few columns
 * at their own cost (vectors along k, no broadcasts), so the last e <= DOT_MAXN columns go
 * to them and the rest to the tiles, when the two predictions together beat the best
 * single plan by SPLIT_GAIN and SPLIT_S, the second run's own costs (a near tie stays
 * one run: 1000 x 97 x 3 took 5 us either way; 127 x 65 x 2 took 0.6 us whole and 0.8
 * split, 0.2 more than predicted).  On 2 threads 2048 x 33 x 513 went 263 -> 182 us so,
 * 200 x 33 x 200 10.7 -> 7.0, 129 x 65 x 768 38.6 -> 30.0, 65 x 65 x 65 2.3 -> 1.7. */
#define SPLIT_GAIN 0.95
#define SPLIT_S 0.3e-6
static void plan_choose(GemmKernels *g, const Prob *p, int nthreads, Plan *best,
                        Plan *cands, int *ncands, int maxc) {
  plan_weigh(g, p, nthreads, best, cands, ncands, maxc);
  const GemmForce *fo = &g->force;
  bool forced = fo->fam > 0 || fo->pack_a > 0 || fo->pack_b > 0 || fo->tb > 0 || fo->tm > 0 ||
                fo->tn > 0 || fo->tk > 0 || fo->kc > 0 || fo->mc > 0 || fo->nc > 0 || fo->rows > 0 ||
                fo->dot > 0;
  if (p->ctmp || best->rows || best->dot || forced || (p->a_sk != 1 && p->k != 1)) return;
  for (int fi = 0; fi < g->nfam; fi++) {              /* each family's edge */
    int64_t e = p->n % g->fam[fi].nr;
    bool seen = false;
    for (int fj = 0; fj < fi; fj++) seen = seen || p->n % g->fam[fj].nr == e;
    if (seen || e < 1 || e > DOT_MAXN || e == p->n) continue;
    Prob main_ = part_cols(g, p, -e), edge = part_cols(g, p, e);
    Plan m, d;
    plan_weigh(g, &main_, nthreads, &m, NULL, NULL, 0);
    plan_weigh(g, &edge, nthreads, &d, NULL, NULL, 0);
    if (!d.dot || m.t + d.t + SPLIT_S >= SPLIT_GAIN * best->t) continue;
    *best = m;
    best->edge = e;
    best->t_edge = d.t;
    best->t = m.t + d.t;
  }
}

/* Validate and normalise: sizes of 1 get convenient strides, a C with unit row stride is
 * computed transposed (C^T = B^T A^T), a C with no unit stride goes through a tile buffer. */
static bool normalise(const GemmKernels *g, const GemmArgs *x, Prob *p, char *err,
                      size_t errlen) {
  if (x->batch < 0 || x->m < 0 || x->n < 0 || x->k < 0) {
    snprintf(err, errlen, "gemm: negative size (batch %lld, m %lld, n %lld, k %lld)",
             (long long)x->batch, (long long)x->m, (long long)x->n, (long long)x->k);
    return false;
  }
  int es = g->esize;
  /* field by field: a compound literal zeroes the whole Prob first (a `rep stos`) */
  p->batch = x->batch, p->m = x->m, p->n = x->n, p->k = p->k_all = x->k;
  p->a = x->a, p->a_sb = x->a_sb, p->a_sm = x->a_sm, p->a_sk = x->a_sk;
  p->b = x->b, p->b_sb = x->b_sb, p->b_sk = x->b_sk, p->b_sn = x->b_sn;
  p->c = x->c, p->c_sb = x->c_sb, p->c_sm = x->c_sm, p->c_sn = x->c_sn;
  p->acc = x->accumulate, p->stop = x->stop;
  p->swapped = p->ctmp = false;
  if (!p->batch || !p->m || !p->n) return true;
  if (p->batch == 1) p->a_sb = p->b_sb = p->c_sb = 0;
  if (p->n == 1) p->c_sn = p->b_sn = 1;
  if (p->m == 1) p->c_sm = p->a_sm = 0;
  if (p->c_sn != 1 && p->c_sm == 1) {
    Prob q = *p;
    q.m = p->n; q.n = p->m;
    q.a = p->b; q.a_sb = p->b_sb; q.a_sm = p->b_sn; q.a_sk = p->b_sk;
    q.b = p->a; q.b_sb = p->a_sb; q.b_sk = p->a_sk; q.b_sn = p->a_sm;
    q.c_sm = p->c_sn; q.c_sn = 1;
    q.swapped = true;
    *p = q;
    if (p->m == 1) p->a_sm = p->c_sm = 0;
  }
  p->ctmp = p->c_sn != 1;
  (void)es;
  return true;
}

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

/* The row pieces of an m-extent of mt rows: full mr-row tiles, then the edge (the last
 * mr + r rows when there is a full tile to borrow from, so 16 = 8 + 8 rather than 14 + 2)
 * split as the compile-time DP said. */
typedef struct Pieces { const Family *f; int64_t full, t, r0, mt; int rem, d, tab; } Pieces;

static void pieces_init(Pieces *it, const Family *f, int64_t mt, int tab) {
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
static bool pieces_next(Pieces *it, int64_t *r0, int *h, int *hs) {
  if (it->t < it->full) *h = it->f->mr, it->t++;
  else if (it->rem && it->d < it->f->dec_n[it->tab][it->rem])
    *h = it->f->dec[it->tab][it->rem][it->d++];
  else return false;
  *r0 = it->r0;
  *hs = (int)imin(*h, it->mt - it->r0);
  it->r0 += *hs;
  return true;
}

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

/* General-stride packing of B (any b_sn): out[p*kc*nr + k*nr + j], zero past nt. */
static void pack_b_strided(const GemmKernels *g, const Family *f, const char *b, int64_t b_sk,
                           int64_t b_sn, int64_t kc, int64_t nt, char *out) {
  int nr = f->nr;
  for (int64_t p0 = 0; p0 < nt; p0 += nr) {
    int64_t w = imin(nr, nt - p0);
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
  int pfc = prefetch_c(g, &bk) ? UK_PREFETCH_C : 0;
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
                  f->ukp(kcur, ap, a_rs, a_cs, bs, p->b_sk, cp, bk.c_sm, w, hs, beta | pfc, (void *)bp);
                } else {
                  f->ukp(kcur, ap, a_rs, a_cs, bs, p->b_sk, wc, nr, w, hs, 0, (void *)bp);
                  merge_tile(g, wc, nr, cp, bk.c_sm, bk.c_sn, hs, w, beta);
                }
              } else if (nx && h == f->mr && hs == h && w == nr) {
                Fetch fe = { nx, p->b_sk, tq * share, imin(nxl, (tq + 1) * share), sh };
                tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, b_rs, cp, bk.c_sm, beta | pfc, &fe);
                tq++;
              } else if (!bk.ctmp) {
                tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, b_rs, cp, bk.c_sm, beta | pfc, NULL);
              } else {
                tile_call(g, f, h, hs, w, kcur, ap, a_rs, a_cs, bp, b_rs, wc, nr, 0, NULL);
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
      g->dot.packbt(kc, b + (size_t)j * es, b_sk, out + (size_t)(j * kc) * es, imin(g->W, n - j));
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
  if (!jit_can_run(g->jit)) {
    snprintf(err, errlen, "gemm: code for %s cannot run on this CPU", g->hw.name);
    return false;
  }
  Prob p;
  if (!normalise(g, x, &p, err, errlen)) return false;
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

/* Find p's plan (this thread's last, the cache, else the model) and run it. */
static bool run_prob(GemmKernels *g, Prob p, Pool *pool, char *err, size_t errlen) {
  Plan pl;
  int64_t key[KEY_LEN];
  plan_key(&p, pool_threads(pool), key);
  uint64_t epoch = atomic_load_explicit(&g->epoch, memory_order_relaxed);
  if (last_plan.epoch == epoch && !memcmp(last_plan.key, key, sizeof key)) {
    pl = last_plan.plan;
  } else {
    unsigned slot = key_hash(key);
    pthread_mutex_lock(&g->cache_lock);
    struct CacheEntry *ce = &g->cache[slot];
    bool hit = ce->used && !memcmp(ce->key, key, sizeof key);
    if (hit) pl = ce->plan;
    pthread_mutex_unlock(&g->cache_lock);
    if (!hit) {
      plan_choose(g, &p, pool_threads(pool), &pl, NULL, NULL, 0);
      pthread_mutex_lock(&g->cache_lock);
      ce->used = true;
      memcpy(ce->key, key, sizeof key);
      ce->plan = pl;
      pthread_mutex_unlock(&g->cache_lock);
    }
    last_plan.epoch = epoch;
    memcpy(last_plan.key, key, sizeof key);
    last_plan.plan = pl;
  }
  if (pl.edge) {     /* the columns before the last edge ones by this plan, then those */
    Plan rest = pl;
    rest.edge = 0;
    bool ok = run_plan(g, part_cols(g, &p, -pl.edge), rest, pool, err, errlen) &&
              run_prob(g, part_cols(g, &p, pl.edge), pool, err, errlen);
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
      tile_call(g, f, h, hs, p.n, p.k, p.a, p.a_sm, p.a_sk, p.b, p.b_sk, p.c, p.c_sm, p.acc, NULL);
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

void gemm_force(GemmKernels *g, const GemmForce *f) {
  if (f) g->force = *f;
  else memset(&g->force, 0, sizeof g->force);
  pthread_mutex_lock(&g->cache_lock);
  memset(g->cache, 0, PLAN_CACHE * sizeof *g->cache);
  atomic_store(&g->epoch, new_epoch());
  pthread_mutex_unlock(&g->cache_lock);
}

int gemm_families(const GemmKernels *g, int *mr, int *nr, int max) {
  for (int i = 0; i < g->nfam && i < max; i++) {
    mr[i] = g->fam[i].mr;
    nr[i] = g->fam[i].nr;
  }
  return g->nfam;
}

static void plan_info(const GemmKernels *g, const Plan *pl, GemmPlanInfo *out) {
  const Family *f = &g->fam[pl->fam];
  out->rows = pl->rows;
  out->dot = pl->dot;
  out->mr = pl->rows ? 0 : pl->dot ? g->dot.hmax[dot_hw(pl)] : f->mr;
  out->nr = pl->rows ? 0 : pl->dot ? pl->dw[0] : f->nr;
  out->pack_a = pl->pack_a;
  out->pack_b = pl->pack_b;
  out->pack_b_fused = pl->fused;
  out->kc = pl->kc;
  out->mc = pl->mc;
  out->nc = pl->nc;
  out->tb = pl->tb;
  out->tm = pl->tm;
  out->tn = pl->tn;
  out->tk = pl->tk;
  out->edge = pl->edge;
  out->predicted_s = pl->t;
}

bool gemm_plan_info(GemmKernels *g, const GemmArgs *x, int nthreads, GemmPlanInfo *out) {
  Prob p;
  char err[8];
  memset(out, 0, sizeof *out);
  if (!normalise(g, x, &p, err, sizeof err)) return false;
  out->swapped = p.swapped;
  out->c_buffered = p.ctmp;
  if (!p.batch || !p.m || !p.n || !p.k) return true;
  Plan pl;
  plan_choose(g, &p, nthreads, &pl, NULL, NULL, 0);
  plan_info(g, &pl, out);
  return true;
}

bool gemm_last_plan(GemmKernels *g, GemmPlanInfo *out) {
  memset(out, 0, sizeof *out);
  if (last_plan.epoch != atomic_load_explicit(&g->epoch, memory_order_relaxed)) return false;
  plan_info(g, &last_plan.plan, out);
  return true;
}

double gemm_predict(GemmKernels *g, const GemmArgs *x, int nthreads) {
  Prob p;
  char err[8];
  if (!normalise(g, x, &p, err, sizeof err) || !p.batch || !p.m || !p.n || !p.k) return 0;
  Plan pl;
  plan_choose(g, &p, nthreads, &pl, NULL, NULL, 0);
  return pl.t;
}

double gemm_core_gflops(const GemmKernels *g) {
  double best = 0;
  for (int fi = 0; fi < g->nfam; fi++) {
    double r = g->fam[fi].measured ? tile_gflops(&g->fam[fi], g->fam[fi].mr) : 0;
    best = r > best ? r : best;
  }
  return best;
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

static int cmp_plan(const void *x, const void *y) {
  double a = ((const Plan *)x)->t, b = ((const Plan *)y)->t;
  return a < b ? -1 : a > b;
}

/* "1x2x1", or "1x1x1/k2" for a k split */
static const char *grid_str(const Plan *pl, char *s) {
  if (pl->tk > 1) sprintf(s, "%dx%dx%d/k%d", pl->tb, pl->tm, pl->tn, pl->tk);
  else sprintf(s, "%dx%dx%d   ", pl->tb, pl->tm, pl->tn);
  return s;
}

static void ksplit_line(Buf *out, const Plan *pl, const Prob *p) {
  if (pl->tk > 1)
    buf_printf(out, "    k split %d ways: each block sums k blocks of %lld into its own copy of C, "
               "added to C at the end\n", pl->tk, (long long)imin(pl->kb, p->k));
}

void gemm_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out) {
  const HwModel *h = &g->hw;
  /* the plan first: weighing row streaming compiles its kernels, which the header reports */
  Prob p;
  char err[160];
  bool valid = normalise(g, x, &p, err, sizeof err);
  bool work = valid && p.batch && p.m && p.n && p.k;
  Plan c[512], best;
  int nc = 0;
  if (work) plan_choose(g, &p, nthreads, &best, c, &nc, 512);
  buf_printf(out, "gemm %s on %s (%s): %d-bit vectors (%d x %s), %d registers, "
             "FMA %d x latency %d, %.2f GHz\n", elem_name(g->elem), h->name,
             jit_cpu_name(g->jit), hw_vbits(h), g->W, elem_name(g->elem), hw_vregs(h),
             hw_fma_units(h), hw_fma_lat(h), hw_ghz(h));
  bool run = jit_can_run(g->jit);
  int rs = atomic_load(&g->rows_state), ds = atomic_load(&g->dot_state);
  if (!run) {
    buf_puts(out, "not compiled: this CPU cannot run code for this model, whose rates below are "
                  "its own, not measured (:code builds the kernels)\n");
  } else {
    buf_printf(out, "compiled once: %d functions in %.1f ms (* splits k over accumulator "
               "sets)", g->nfuncs, g->compile_ms);
    buf_printf(out, "; row streaming: %d more, compiled when first weighed", ROWS_MAX);
    if (rs > 0) buf_printf(out, ", in %.1f ms", g->rows_ms);
    if (rs < 0) buf_puts(out, " (failed)");
    buf_printf(out, "; inner products: ");
    if (ds > 0) buf_printf(out, "%d more, compiled when first weighed, in %.1f ms\n", g->dot_nfuncs, g->dot_ms);
    else buf_printf(out, "compiled when first weighed%s\n", ds < 0 ? " (failed)" : "");
  }
  buf_printf(out, "level 0 register tiles (h x nr: regs, FLOPs/element loaded):");
  for (int i = 0; i < g->ncand; i++)
    buf_printf(out, "%s%dx%d: %d, %.1f%s", i % 6 ? "  " : "\n  ", g->cand[i].mr,
               g->cand[i].v * g->W, g->cand[i].regs, g->cand[i].score,
               g->cand[i].kept ? " [kept]" : "");
  buf_puts(out, "\n");
  for (int fi = 0; fi < g->nfam; fi++) {
    const Family *f = &g->fam[fi];
    buf_printf(out, "family %d: %dx%d, heights (GFLOP/s per core, %s):", fi, f->mr, f->nr,
               f->measured ? "measured in L1; + ns a call" : "FMA model");
    for (int hh = 1; hh <= f->mr; hh++)
      if (f->has[hh]) {
        buf_printf(out, " %d%s %.0f", hh, f->ksplit[hh] > 1 ? "*" : "", tile_gflops(f, hh));
        if (f->measured) buf_printf(out, "+%.0f", f->call_s[hh] * 1e9);
      }
    buf_puts(out, "\n");
  }
  if (ds > 0) {
    buf_printf(out, "inner products h x w (GFLOP/s per core, %s; + ns a call):", run ? "measured in L1" : "FMA model");
    for (int w = 1; w <= DOT_WMAX; w++)
      for (int hh = DOT_HMAX; hh >= 1; hh--)
        if (g->dot.has[w][hh])
          buf_printf(out, "%s%dx%d%s %.0f +%.0f", hh == g->dot.hmax[w] ? "\n  " : "  ", hh, w,
                     g->dot.ks[w][hh] > 1 ? "*" : "", 2.0 * hh * w * g->W / g->dot.vsec[w][hh] * 1e-9,
                     g->dot.call[w][hh] * 1e9);
    buf_puts(out, "\n");
  }
  if (!valid) {
    buf_printf(out, "%s\n", err);
    return;
  }
  buf_printf(out, "shape: batch %lld, M %lld, N %lld, K %lld%s%s%s, %d thread%s\n",
             (long long)x->batch, (long long)x->m, (long long)x->n, (long long)x->k,
             x->accumulate ? ", C +=" : "", p.swapped ? ", run as C^T = B^T A^T" : "",
             p.ctmp ? ", C through a tile buffer" : "", nthreads, nthreads == 1 ? "" : "s");
  if (!work) {
    buf_puts(out, "nothing to compute\n");
    return;
  }
  const Family *f = &g->fam[best.fam];
  double flops = 2.0 * p.batch * p.m * p.n * p.k;
  if (best.rows) {
    buf_printf(out, "chosen: row streaming: the %lld row%s of C in L1, B read row by row, %d rows "
               "a step\n", (long long)p.m, p.m == 1 ? "" : "s", ROWS_U);
    buf_printf(out, "  cores: %d x 1 x %d blocks (batch x M x N) of %lld x %lld x %lld\n", best.tb,
               best.tn, (long long)imin(best.bb, p.batch), (long long)p.m,
               (long long)imin(best.nbk, p.n));
    buf_printf(out, "  L1: chunks of %lld columns\n", (long long)best.nc);
  } else if (best.dot) {
    buf_printf(out, "chosen: inner products, vectors along k: %d column%s", best.dw[0], best.dw[0] == 1 ? "" : "s");
    for (int s = 1; s < DOT_STRIPS && best.dw[s]; s++) buf_printf(out, " + %d", best.dw[s]);
    buf_printf(out, " a strip, tiles of %d rows; B^T %s\n", g->dot.hmax[dot_hw(&best)],
               best.pack_b ? "packed" : "in place (B's columns contiguous)");
    buf_printf(out, "  cores: %d x %d x 1 blocks (batch x M x N) of %lld x %lld x %lld\n", best.tb,
               best.tm, (long long)imin(best.bb, p.batch), (long long)imin(best.mb, p.m), (long long)p.n);
    ksplit_line(out, &best, &p);
    buf_printf(out, "  L1: kc = %lld\n", (long long)best.kc);
  } else {
    buf_printf(out, "chosen: tile %dx%d, A %s, B %s\n", f->mr, f->nr,
               best.pack_a ? "packed" : p.a_sm == 1 || p.m == 1 ? "in place (unit rows)" : "in place (strided rows)",
               best.fused ? "packed by each strip's first tile as it computes" : best.pack_b ? "packed" : "in place");
    buf_printf(out, "  cores: %d x %d x %d blocks (batch x M x N) of %lld x %lld x %lld\n",
               best.tb, best.tm, best.tn, (long long)imin(best.bb, p.batch),
               (long long)imin(best.mb, p.m), (long long)imin(best.nbk, p.n));
    ksplit_line(out, &best, &p);
    buf_printf(out, "  %s: nc = %lld   L2: mc = %lld   L1: kc = %lld   registers: %dx%d\n",
               best.nc_l2 ? "L2" : "L3", (long long)best.nc, (long long)best.mc,
               (long long)best.kc, f->mr, f->nr);
    /* the row pieces of the first L2 block: full tiles, then the edge */
    int64_t mt = imin(imin(best.mb, p.m), best.mc), r0;
    int ht, hs, npc = 0, nfull = 0;
    Pieces it;
    pieces_init(&it, f, mt, !best.pack_b);
    buf_printf(out, "  rows of a block: %lld =", (long long)mt);
    while (pieces_next(&it, &r0, &ht, &hs)) {
      if (it.d == 0) { nfull++; continue; }                 /* a full tile */
      if (nfull) buf_printf(out, "%s %d x %d", npc++ ? " +" : "", nfull, f->mr), nfull = 0;
      buf_printf(out, "%s %d", npc++ ? " +" : "", hs);
      if (hs < ht) buf_printf(out, " (on a %d-row tile)", ht);
    }
    if (nfull) buf_printf(out, "%s %d x %d", npc ? " +" : "", nfull, f->mr);
    buf_puts(out, "\n");
    if (best.edge)
      buf_printf(out, "  C's last %lld column%s apart, as inner products (a tile would compute its "
                 "whole strip): predicted %.2f us\n", (long long)best.edge, best.edge == 1 ? "" : "s",
                 best.t_edge * 1e6);
  }
  buf_printf(out, "  predicted %.2f us (max of compute %.2f and memory %.2f, + stalls %.2f, "
             "packing %.2f, fork-join %.2f", best.t * 1e6, best.t_comp * 1e6,
             best.t_mem * 1e6, best.t_stall * 1e6, best.t_pack * 1e6, best.t_sync * 1e6);
  if (best.t_share > 0) buf_printf(out, ", C lines shared by cores %.2f", best.t_share * 1e6);
  if (best.t_red > 0) buf_printf(out, ", adding the copies of C %.2f", best.t_red * 1e6);
  if (best.edge) buf_printf(out, ", the last columns %.2f", best.t_edge * 1e6);
  buf_printf(out, ") = %.1f GFLOP/s\n", flops / best.t * 1e-9);
  qsort(c, (size_t)nc, sizeof *c, cmp_plan);
  buf_printf(out, "candidates (%d weighed, best first):\n", nc);
  char gs[64];
  for (int i = 0; i < nc && i < 8; i++) {
    if (c[i].rows)
      buf_printf(out, "  rows   B streamed by rows  grid %dx%dx%d  chunks of %-5lld        %9.2f us\n",
                 c[i].tb, c[i].tm, c[i].tn, (long long)c[i].nc, c[i].t * 1e6);
    else if (c[i].dot)
      buf_printf(out, "  dot    B^T %-6s          grid %s  kc %-4lld                    %9.2f us\n",
                 c[i].pack_b ? "packed" : "direct", grid_str(&c[i], gs), (long long)c[i].kc,
                 c[i].t * 1e6);
    else
      buf_printf(out, "  %dx%-3d A %-6s B %-6s grid %s  kc %-4lld mc %-5lld nc %-5lld %9.2f us\n",
                 g->fam[c[i].fam].mr, g->fam[c[i].fam].nr, c[i].pack_a ? "packed" : "direct",
                 c[i].pack_b ? "packed" : "direct", grid_str(&c[i], gs),
                 (long long)c[i].kc, (long long)c[i].mc, (long long)c[i].nc, c[i].t * 1e6);
  }
}
