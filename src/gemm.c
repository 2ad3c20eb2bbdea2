/* gemm.c -- the CPU contraction engine: C[b,m,n] (+)= sum_k A[b,m,k] B[b,k,n] in f32 or f64,
 * every operand addressed by element strides given at run time, compiled once per element
 * type and machine, and run on any shape, layout and thread count with no recompile.
 *
 * Design note.  This follows the sample-free scheduler of Vortex ("A Sample-Free Compilation
 * Framework for Efficient Dynamic Tensor Computation", SC '25, arXiv 2409.01075): the
 * kernel is built bottom-up from the hardware (HwModel), never from example shapes.
 *  - Level 0, registers: register tiles h x nr (nr = v vectors) are enumerated under the
 *    vector register budget (h*v accumulators + v loads of B + 1 broadcast of A <= vec_regs)
 *    with at least fma_latency * fma_units independent accumulators, and scored by their
 *    arithmetic intensity 2*h*nr / (h + nr) (FLOPs per element loaded).  The best few
 *    (mr, v) "families" are kept.  Each family is emitted as LLVM IR with explicit vectors,
 *    llvm.fma and broadcasts, for the height mr and the powers of two below it, and with
 *    masked loads and stores for the n-tail (llvm.masked.*; on targets without cheap masks
 *    an unmasked twin serves full tiles).  An edge of r < mr rows is a sum of those heights,
 *    split by a tiny compile-time DP, so no row is computed twice or out of bounds; and
 *    since short tiles that cannot hide the FMA latency split the reduction over several
 *    accumulator sets, a 7-row edge as 4 + 2 + 1 costs the FMAs of 7 rows, not of 8 or 14.
 *    Each kernel takes the A row and column strides as arguments, so one kernel reads a
 *    packed panel, a column-major A or a row-major A in place.
 *  - Cache levels: kc, mc, nc are formulas of the cache capacities and the run-time sizes
 *    (a kc x nr micro-panel of B fills half of L1, an mc x kc block of A half of L2, a kc x nc
 *    panel of B half of this core's share of L3), balanced so the last block is not a
 *    sliver, and passed to the kernels as arguments.  Packing A (by row pieces) and B
 *    (nr-wide panels, B's unit-stride case in generated IR) is a choice, not a rule.
 *  - Top level: the (batch, m, n) iteration space is cut into a grid of thread blocks at
 *    run time.  An analytical model -- kernel cycles from the tile shape (FMA throughput
 *    and latency), padding waste of partial tiles, bytes moved from the level where each
 *    operand lives over that level's bandwidth, packing traffic, load imbalance and the
 *    cost of a fork-join -- scores every (family, packing, grid) and the cheapest runs.
 * Limits: the model knows no TLB, no cache associativity, no prefetcher and no frequency
 * change under load; it takes bandwidths from the hw file as given.  The fork-join cost is
 * a software constant below.  Operands are not reordered in memory beyond packing, and C
 * must not overlap A or B.  Only f32 and f64; alpha is 1 and beta 0 or 1.
 */
#include "config.h"
#include "dyn.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Core.h>

#define MAX_MR 16        /* rows of a register tile: strided A rows need a pointer or index
                            register each, and x86-64 has 16 general registers */
#define MAX_V 4          /* vectors across a tile */
#define MAX_FAM 1        /* families kept */
#define MAX_PIECES 6     /* pieces in the decomposition of an edge of < 2*mr rows */
#define MAX_ACC 64       /* accumulators (vectors) of one kernel, all sets */
#define MAX_CAND 64
#define MAX_MODS 4       /* modules compiled in parallel */

/* The pass pipeline for the kernels.  They are written the way the back end wants them
 * (explicit vectors, unrolled register tiles, loop-invariant masks), so the only IR pass
 * they need is SROA to turn their allocas into registers; "default<O3>" would spend most
 * of the compile budget and its unroller only grows the code.  GEMM_PIPE overrides it. */
#define GEMM_PIPELINE (getenv("GEMM_PIPE") ? getenv("GEMM_PIPE") : "function(sroa)")      /* enumerated tiles remembered for gemm_describe */

/* Software overheads the model charges (not hardware figures): a kernel call with its C
 * tile update costs about CALL_CYC cycles beyond its FMAs, and a fork-join on a pool whose
 * workers spin costs about SYNC_S seconds. */
#define CALL_CYC 24.0
#define SYNC_S 2e-6

typedef void (*UkFn)(int64_t kc, const void *a, int64_t a_rs, int64_t a_cs, const void *b,
                     int64_t b_rs, void *c, int64_t c_rs, int64_t n_rem, int32_t beta);
typedef void (*PackBFn)(int64_t kc, int64_t nc, const void *b, int64_t b_rs, void *out,
                        int64_t nr);
typedef void (*PackAFn)(int64_t kc, const void *a, int64_t lda, void *out, int64_t h);


typedef struct Tile { int mr, v, regs, ksplit; double score; bool kept; } Tile;

typedef struct Family {
  int mr, v, nr;
  UkFn uk[MAX_MR + 1];           /* by height, masked: any n_rem in 1..nr */
  UkFn ukf[MAX_MR + 1];          /* by height, full tiles only (== uk with AVX-512) */
  bool has[MAX_MR + 1];          /* heights emitted */
  int ksplit[MAX_MR + 1];
  double cyc[MAX_MR + 1];        /* model: cycles per k step of a tile of this height */
  /* The best split of an edge of r rows (r < 2*mr) into emitted heights. */
  uint8_t dec_n[2 * MAX_MR];
  uint8_t dec[2 * MAX_MR][MAX_PIECES];
  double dec_cyc[2 * MAX_MR];
  double score;
} Family;

struct GemmKernels {
  DynElem elem;
  int esize, W;                  /* bytes per element, elements per vector */
  bool cheap_masks;              /* AVX-512: masked loads/stores cost as much as plain ones */
  HwModel hw;
  Jit *jit;
  PackAFn packa;                 /* row-major A -> panels, any height up to the largest mr */
  PackBFn packb;                 /* unit-stride B -> panels of any nr */
  int nfam;
  Family fam[MAX_FAM];
  int ncand;
  Tile cand[MAX_CAND];
  double compile_ms;
  int nfuncs;
  GemmForce force;               /* tests and experiments override the model */
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
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- hardware figures, with safe floors for an incomplete model ---- */

static int hw_fma_units(const HwModel *h) { return h->fma_units > 0 ? h->fma_units : 1; }
static int hw_fma_lat(const HwModel *h) { return h->fma_latency > 0 ? h->fma_latency : 4; }
static int hw_vregs(const HwModel *h) { return h->vec_regs >= 8 ? h->vec_regs : 16; }
static int hw_vbits(const HwModel *h) { return h->vector_bits >= 128 ? h->vector_bits : 128; }
static double hw_ghz(const HwModel *h) { return h->ghz > 0 ? h->ghz : 2.0; }
static int hw_ncaches(const HwModel *h) { return h->nlevels > 1 ? h->nlevels - 1 : 0; }

/* Capacity of cache level i (0 = L1) usable by one core, with a floor if unknown. */
static double cache_bytes(const HwModel *h, int i) {
  static const double dflt[] = { 32768, 524288, 2097152 };
  if (i < hw_ncaches(h) && h->level[i].bytes > 0)
    return (double)h->level[i].bytes / (h->level[i].shared_by > 1 ? h->level[i].shared_by : 1);
  if (i < hw_ncaches(h) || i > 2) return dflt[i > 2 ? 2 : i];
  /* no such level: the block that would live there lives in the last cache */
  return hw_ncaches(h) ? cache_bytes(h, hw_ncaches(h) - 1) : dflt[i];
}

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

static void enumerate_tiles(GemmKernels *g) {
  const HwModel *h = &g->hw;
  int regs = hw_vregs(h), need = hw_fma_lat(h) * hw_fma_units(h);
  g->ncand = 0;
  for (int v = 1; v <= MAX_V; v++)
    for (int mr = 1; mr <= MAX_MR; mr++) {
      int used = mr * v + v + 1;
      if (used > regs || mr * v < need || g->ncand == MAX_CAND) continue;
      double nr = (double)v * g->W;
      g->cand[g->ncand++] = (Tile){ .mr = mr, .v = v, .regs = used, .ksplit = 1,
                                    .score = 2.0 * mr * nr / (mr + nr) };
    }
  /* Keep the best tile of each width, then the best MAX_FAM widths: different widths
   * waste different amounts on the n-tail, which the run-time model weighs. */
  int best[MAX_V + 1];
  for (int v = 0; v <= MAX_V; v++) best[v] = -1;
  for (int i = 0; i < g->ncand; i++) {
    int v = g->cand[i].v;
    if (best[v] < 0 || g->cand[i].score > g->cand[best[v]].score) best[v] = i;
  }
  g->nfam = 0;
  for (int k = 0; k < MAX_FAM; k++) {
    int pick = -1;
    for (int v = 1; v <= MAX_V; v++)
      if (best[v] >= 0 && !g->cand[best[v]].kept &&
          (pick < 0 || g->cand[best[v]].score > g->cand[pick].score))
        pick = best[v];
    if (pick < 0) break;
    g->cand[pick].kept = true;
    Family *f = &g->fam[g->nfam++];
    memset(f, 0, sizeof *f);
    f->mr = g->cand[pick].mr;
    f->v = g->cand[pick].v;
    f->nr = f->v * g->W;
    f->score = g->cand[pick].score;
  }
  /* Heights per family, their accumulator splits and modelled speeds. */
  for (int i = 0; i < g->nfam; i++) {
    Family *f = &g->fam[i];
    for (int hgt = 1; hgt <= f->mr; hgt++) {
      if ((hgt & (hgt - 1)) && hgt != f->mr) continue;
      f->has[hgt] = true;
      f->ksplit[hgt] = tile_ksplit(h, hgt, f->v);
      f->cyc[hgt] = tile_cyc(h, hgt, f->v, f->ksplit[hgt]);
    }
    /* DP over edges: the cheapest split of r rows into emitted heights. */
    double best_c[2 * MAX_MR];
    int first[2 * MAX_MR], cnt[2 * MAX_MR];
    best_c[0] = 0;
    cnt[0] = 0;
    for (int r = 1; r < 2 * f->mr; r++) {
      best_c[r] = 1e30;
      first[r] = 0;
      cnt[r] = 0;
      for (int hgt = 1; hgt <= f->mr && hgt <= r; hgt++) {
        if (!f->has[hgt] || cnt[r - hgt] + 1 > MAX_PIECES) continue;
        double c = best_c[r - hgt] + f->cyc[hgt] + CALL_CYC / 256.0;
        if (c < best_c[r]) {
          best_c[r] = c;
          first[r] = hgt;
          cnt[r] = cnt[r - hgt] + 1;
        }
      }
      f->dec_n[r] = (uint8_t)cnt[r];
      f->dec_cyc[r] = best_c[r];
      for (int rr = r, j = 0; rr > 0; rr -= first[rr]) f->dec[r][j++] = (uint8_t)first[rr];
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

/* The micro-kernel: an h x (v*W) tile of C, over kc steps of the reduction.
 *   void uk(i64 kc, ptr a, i64 a_rs, i64 a_cs, ptr b, i64 b_rs, ptr c, i64 c_rs,
 *           i64 n_rem, i32 beta)
 * A[i,k] = a[i*a_rs + k*a_cs], B[k,j] = b[k*b_rs + j], C[i,j] = c[i*c_rs + j]; masked
 * kernels touch only columns j < n_rem of B and C; beta != 0 adds to C.
 * One kernel serves packed A (a_rs = 1, a_cs = h), column-major A and row-major A in place:
 * rows are addressed in groups of four from a base pointer each (base + {0,1,2,3}*a_rs
 * fits x86's base + index*scale forms with a_rs and 3*a_rs in registers), so the bases
 * advance independently instead of through one long chain of pointer additions.
 * With ks > 1 accumulator sets, consecutive k steps go to different sets, which hides the
 * FMA latency of short tiles; the sets are summed at the end. */
#define ROW_GROUP 4
static void emit_uk(CG *g, const char *name, int h, int v, int ks, bool masked) {
  LLVMTypeRef P[] = { g->t_i64, g->t_ptr, g->t_i64, g->t_i64, g->t_ptr,
                      g->t_i64, g->t_ptr, g->t_i64, g->t_i64, g->t_i32 };
  LLVMValueRef fn = new_fn(g, name, P, 10);
  LLVMValueRef kc = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), a_rs = LLVMGetParam(fn, 2),
               a_cs = LLVMGetParam(fn, 3), b = LLVMGetParam(fn, 4), b_rs = LLVMGetParam(fn, 5),
               c = LLVMGetParam(fn, 6), c_rs = LLVMGetParam(fn, 7), n_rem = LLVMGetParam(fn, 8),
               beta = LLVMGetParam(fn, 9);
  LLVMBuilderRef B = g->b;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"),
                    mcond = LLVMAppendBasicBlockInContext(g->ctx, fn, "main.cond"),
                    mbody = LLVMAppendBasicBlockInContext(g->ctx, fn, "main.body"),
                    rcond = ks > 1 ? LLVMAppendBasicBlockInContext(g->ctx, fn, "rem.cond") : NULL,
                    rbody = ks > 1 ? LLVMAppendBasicBlockInContext(g->ctx, fn, "rem.body") : NULL,
                    done = LLVMAppendBasicBlockInContext(g->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(B, entry);
  int ngrp = (h + ROW_GROUP - 1) / ROW_GROUP, nacc = ks * h * v;
  /* Accumulators and loop state live in allocas; SROA turns them into registers. */
  LLVMValueRef acc[MAX_ACC];
  for (int i = 0; i < nacc; i++) {
    acc[i] = LLVMBuildAlloca(B, g->t_vec, "");
    LLVMBuildStore(B, LLVMConstNull(g->t_vec), acc[i]);
  }
  LLVMValueRef kv = LLVMBuildAlloca(B, g->t_i64, "k"), pbv = LLVMBuildAlloca(B, g->t_ptr, "pb");
  LLVMValueRef pav[(MAX_MR + ROW_GROUP - 1) / ROW_GROUP], goff[ROW_GROUP];
  for (int r = 0; r < ROW_GROUP; r++) goff[r] = LLVMBuildMul(B, a_rs, ci64(g, r), "");
  for (int q = 0; q < ngrp; q++) {
    pav[q] = LLVMBuildAlloca(B, g->t_ptr, "pa");
    LLVMBuildStore(B, gep(g, a, LLVMBuildMul(B, a_rs, ci64(g, q * ROW_GROUP), "")), pav[q]);
  }
  LLVMBuildStore(B, ci64(g, 0), kv);
  LLVMBuildStore(B, b, pbv);
  LLVMValueRef mask[MAX_V] = { 0 };
  if (masked)
    for (int j = 0; j < v; j++) mask[j] = lane_mask(g, n_rem, j);
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
    LLVMValueRef pb = LLVMBuildLoad2(B, g->t_ptr, pbv, ""), pa[(MAX_MR + ROW_GROUP - 1) / ROW_GROUP];
    for (int q = 0; q < ngrp; q++) pa[q] = LLVMBuildLoad2(B, g->t_ptr, pav[q], "");
    for (int u = 0; u < steps; u++) {
      LLVMValueRef bu = u ? gep(g, pb, LLVMBuildMul(B, b_rs, ci64(g, u), "")) : pb;
      LLVMValueRef bv[MAX_V];
      for (int j = 0; j < v; j++)
        bv[j] = load_vec(g, gep(g, bu, ci64(g, (int64_t)j * g->W)), mask[j]);
      for (int i = 0; i < h; i++) {
        LLVMValueRef base = pa[i / ROW_GROUP];
        if (u) base = gep(g, base, LLVMBuildMul(B, a_cs, ci64(g, u), ""));
        LLVMValueRef s = LLVMBuildLoad2(B, g->t_el, gep(g, base, goff[i % ROW_GROUP]), "");
        LLVMValueRef sv = splat(g, s);
        for (int j = 0; j < v; j++) {
          LLVMValueRef slot = acc[((u % ks) * h + i) * v + j];
          LLVMValueRef args[] = { sv, bv[j], LLVMBuildLoad2(B, g->t_vec, slot, "") };
          LLVMBuildStore(B, LLVMBuildCall2(B, g->fma_t, g->fma, args, 3, ""), slot);
        }
      }
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, k, ci64(g, steps), ""), kv);
    for (int q = 0; q < ngrp; q++)
      LLVMBuildStore(B, gep(g, pa[q], LLVMBuildMul(B, a_cs, ci64(g, steps), "")), pav[q]);
    LLVMBuildStore(B, gep(g, pb, LLVMBuildMul(B, b_rs, ci64(g, steps), "")), pbv);
    LLVMBuildBr(B, cblk);
  }

  /* C = acc, or C + acc: C is loaded either way (its lines are about to be written, so
   * they come into the cache regardless) and a select drops it, which keeps one copy of
   * the update code. */
  LLVMPositionBuilderAtEnd(B, done);
  LLVMValueRef add = LLVMBuildICmp(B, LLVMIntNE, beta, ci32(g, 0), "");
  for (int i = 0; i < h; i++) {
    LLVMValueRef crow = gep(g, c, LLVMBuildMul(B, c_rs, ci64(g, i), ""));
    for (int j = 0; j < v; j++) {
      LLVMValueRef x = LLVMBuildLoad2(B, g->t_vec, acc[i * v + j], "");
      for (int s = 1; s < ks; s++)
        x = LLVMBuildFAdd(B, x, LLVMBuildLoad2(B, g->t_vec, acc[(s * h + i) * v + j], ""), "");
      LLVMValueRef p = gep(g, crow, ci64(g, (int64_t)j * g->W));
      LLVMValueRef old = LLVMBuildSelect(B, add, load_vec(g, p, mask[j]), LLVMConstNull(g->t_vec), "");
      store_vec(g, LLVMBuildFAdd(B, x, old, ""), p, mask[j]);
    }
  }
  LLVMBuildRetVoid(B);
}

/* Pack a kc x nc block of a B with unit column stride into nr-wide panels, for any nr
 * that is a multiple of W (one routine serves every family):
 *   out[p*kc*nr + k*nr + j] = b[k*b_rs + p*nr + j], zero past column nc.
 *   void packb(i64 kc, i64 nc, ptr b, i64 b_rs, ptr out, i64 nr)
 * Rows are copied a vector at a time, masked at the edge; memory bound, so the few integer
 * operations per vector for its mask cost nothing. */
static void emit_packb(CG *g, const char *name) {
  LLVMTypeRef P[] = { g->t_i64, g->t_i64, g->t_ptr, g->t_i64, g->t_ptr, g->t_i64 };
  LLVMValueRef fn = new_fn(g, name, P, 6);
  LLVMValueRef kc = LLVMGetParam(fn, 0), nc = LLVMGetParam(fn, 1), b = LLVMGetParam(fn, 2),
               b_rs = LLVMGetParam(fn, 3), out = LLVMGetParam(fn, 4), nr = LLVMGetParam(fn, 5);
  LLVMBuilderRef B = g->b;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"),
                    pcond = LLVMAppendBasicBlockInContext(g->ctx, fn, "p.cond"),
                    pbody = LLVMAppendBasicBlockInContext(g->ctx, fn, "p.body"),
                    kcond = LLVMAppendBasicBlockInContext(g->ctx, fn, "k.cond"),
                    kbody = LLVMAppendBasicBlockInContext(g->ctx, fn, "k.body"),
                    jcond = LLVMAppendBasicBlockInContext(g->ctx, fn, "j.cond"),
                    jbody = LLVMAppendBasicBlockInContext(g->ctx, fn, "j.body"),
                    knext = LLVMAppendBasicBlockInContext(g->ctx, fn, "k.next"),
                    pnext = LLVMAppendBasicBlockInContext(g->ctx, fn, "p.next"),
                    ret = LLVMAppendBasicBlockInContext(g->ctx, fn, "ret");
  LLVMPositionBuilderAtEnd(B, entry);
  LLVMValueRef pv = LLVMBuildAlloca(B, g->t_i64, "p0"), kv = LLVMBuildAlloca(B, g->t_i64, "k"),
               jv = LLVMBuildAlloca(B, g->t_i64, "j");
  LLVMBuildStore(B, ci64(g, 0), pv);
  LLVMBuildBr(B, pcond);
  LLVMPositionBuilderAtEnd(B, pcond);
  LLVMValueRef p0 = LLVMBuildLoad2(B, g->t_i64, pv, "");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, p0, nc, ""), pbody, ret);
  LLVMPositionBuilderAtEnd(B, pbody);
  LLVMValueRef rem = LLVMBuildSub(B, nc, p0, "");
  LLVMValueRef src = gep(g, b, p0), dst = gep(g, out, LLVMBuildMul(B, p0, kc, ""));
  LLVMBuildStore(B, ci64(g, 0), kv);
  LLVMBuildBr(B, kcond);
  LLVMPositionBuilderAtEnd(B, kcond);
  LLVMValueRef k = LLVMBuildLoad2(B, g->t_i64, kv, "");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, k, kc, ""), kbody, pnext);
  LLVMPositionBuilderAtEnd(B, kbody);
  LLVMValueRef srow = gep(g, src, LLVMBuildMul(B, k, b_rs, "")),
               drow = gep(g, dst, LLVMBuildMul(B, k, nr, ""));
  LLVMBuildStore(B, ci64(g, 0), jv);
  LLVMBuildBr(B, jcond);
  LLVMPositionBuilderAtEnd(B, jcond);
  LLVMValueRef j = LLVMBuildLoad2(B, g->t_i64, jv, "");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, j, nr, ""), jbody, knext);
  LLVMPositionBuilderAtEnd(B, jbody);
  LLVMValueRef x = load_vec(g, gep(g, srow, j), lane_mask(g, LLVMBuildSub(B, rem, j, ""), 0));
  LLVMValueRef st = LLVMBuildStore(B, x, gep(g, drow, j));
  LLVMSetAlignment(st, (unsigned)(g->W * g->esize));       /* panels are vector-aligned */
  LLVMBuildStore(B, LLVMBuildAdd(B, j, ci64(g, g->W), ""), jv);
  LLVMBuildBr(B, jcond);
  LLVMPositionBuilderAtEnd(B, knext);
  LLVMBuildStore(B, LLVMBuildAdd(B, k, ci64(g, 1), ""), kv);
  LLVMBuildBr(B, kcond);
  LLVMPositionBuilderAtEnd(B, pnext);
  LLVMBuildStore(B, LLVMBuildAdd(B, p0, nr, ""), pv);
  LLVMBuildBr(B, pcond);
  LLVMPositionBuilderAtEnd(B, ret);
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

static void packa_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packa", elem_name(g->elem));
}

static void uk_name(char *out, size_t n, const GemmKernels *g, const Family *f, int h,
                    bool masked) {
  snprintf(out, n, "gemm_%s_uk%dx%d_h%d%s", elem_name(g->elem), f->mr, f->nr, h,
           masked ? "_m" : "");
}

static void packb_name(char *out, size_t n, const GemmKernels *g) {
  snprintf(out, n, "gemm_%s_packb", elem_name(g->elem));
}

/* Emit every function of the set, spread over nmod modules (each in its own context) so
 * they compile in parallel: each function goes to the module with the least work so far,
 * work counted in FMAs of its loop body.  Returns how many functions. */
static int emit_all(GemmKernels *g, LLVMContextRef *ctx, LLVMModuleRef *mod, int nmod) {
  CG cg[MAX_MODS];
  double load[MAX_MODS] = { 0 };
  for (int i = 0; i < nmod; i++) cg_init(&cg[i], ctx[i], mod[i], g->elem, g->W);
  char name[96];
  int n = 0;
#define LIGHTEST(w) ({ int k_ = 0; for (int i_ = 1; i_ < nmod; i_++) if (load[i_] < load[k_]) k_ = i_; load[k_] += (w); &cg[k_]; })
  for (int fi = 0; fi < g->nfam; fi++) {
    Family *f = &g->fam[fi];
    for (int h = f->mr; h >= 1; h--) {        /* biggest first balances best */
      if (!f->has[h]) continue;
      for (int m = 0; m < (g->cheap_masks ? 1 : 2); m++) {
        bool masked = m == 0;
        uk_name(name, sizeof name, g, f, h, masked);
        emit_uk(LIGHTEST(h * f->v * f->ksplit[h] + 8.0), name, h, f->v, f->ksplit[h], masked);
        n++;
      }
    }
  }
  int mr_max = 1;
  for (int fi = 0; fi < g->nfam; fi++) mr_max = g->fam[fi].mr > mr_max ? g->fam[fi].mr : mr_max;
  packb_name(name, sizeof name, g);
  emit_packb(LIGHTEST(4.0), name);
  packa_name(name, sizeof name, g);
  emit_packa(LIGHTEST(8.0), name, mr_max);
  n += 2;
#undef LIGHTEST
  for (int i = 0; i < nmod; i++) LLVMDisposeBuilder(cg[i].b);
  return n;
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
  g->jit = jit_new(hw, err, errlen);
  if (!g->jit) {
    gemm_free(g);
    return NULL;
  }
  /* Masked vector memory operations are as fast as plain ones only with AVX-512 masks. */
  g->cheap_masks = hw_vbits(hw) >= 512 && strstr(jit_cpu_features(g->jit), "+avx512f");
  enumerate_tiles(g);
  if (!g->nfam) {
    snprintf(err, errlen, "gemm: no register tile fits %d vector registers", hw_vregs(hw));
    gemm_free(g);
    return NULL;
  }
  /* Compile threads: the cores this process may use, up to MAX_MODS. */
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int nmod = (int)imax(1, imin(MAX_MODS, online));
  LLVMContextRef ctx[MAX_MODS];
  LLVMModuleRef mod[MAX_MODS];
  for (int i = 0; i < nmod; i++) {
    char mname[32];
    snprintf(mname, sizeof mname, "gemm_%s_%d", elem_name(elem), i);
    ctx[i] = LLVMContextCreate();
    mod[i] = jit_module_new(g->jit, ctx[i], mname);
  }
  g->nfuncs = emit_all(g, ctx, mod, nmod);
  double t1 = now_s();
  bool ok = jit_add_modules(g->jit, mod, nmod, GEMM_PIPELINE, err, errlen);
  for (int i = 0; i < nmod; i++) LLVMContextDispose(ctx[i]);
  if (!ok) {
    gemm_free(g);
    return NULL;
  }
  double t2 = now_s();
  char name[96];
  for (int fi = 0; fi < g->nfam; fi++) {
    Family *f = &g->fam[fi];
    for (int h = 1; h <= f->mr; h++) {
      if (!f->has[h]) continue;
      uk_name(name, sizeof name, g, f, h, true);
      f->uk[h] = (UkFn)jit_lookup(g->jit, name, err, errlen);
      f->ukf[h] = f->uk[h];
      if (!g->cheap_masks) {
        uk_name(name, sizeof name, g, f, h, false);
        f->ukf[h] = (UkFn)jit_lookup(g->jit, name, err, errlen);
      }
      if (!f->uk[h] || !f->ukf[h]) {
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
  g->compile_ms = (now_s() - t0) * 1e3;
  if (getenv("GEMM_TIMING")) { struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); fprintf(stderr, "build %.1f opt %.1f codegen %.1f ms; thread cpu total %.1f ms\n", (t1-t0)*1e3, (t2-t1)*1e3, (now_s()-t2)*1e3, (ts.tv_sec+ts.tv_nsec*1e-9)*1e3); }
  return g;
}

void gemm_free(GemmKernels *g) {
  if (!g) return;
  jit_free(g->jit);
  for (int i = 0; i < g->nws; i++) free(g->ws[i]);
  free(g->ws);
  free(g->ws_bytes);
  pthread_mutex_destroy(&g->ws_lock);
  free(g);
}

double gemm_compile_ms(const GemmKernels *g) { return g->compile_ms; }

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
  emit_all(g, &ctx, &mod, 1);
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

/* A problem after normalisation: C has unit column stride (or ctmp), sizes > 0. */
typedef struct Prob {
  int64_t batch, m, n, k;
  const char *a; int64_t a_sb, a_sm, a_sk;
  const char *b; int64_t b_sb, b_sk, b_sn;
  char *c; int64_t c_sb, c_sm, c_sn;
  bool acc;
  bool swapped, ctmp;
} Prob;

typedef struct Plan {
  int fam;
  bool pack_a, pack_b;
  int64_t kc, mc, nc;
  int tb, tm, tn;                 /* thread grid over batch, m, n */
  int64_t bb, mb, nbk;            /* per-block extents: batches, rows, columns */
  double t_comp, t_mem, t_pack, t_sync, t;
} Plan;

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
  int64_t kc_max = imax(16, (int64_t)(cache_bytes(h, 0) / 2 / (f->nr * es)) / 8 * 8);
  pl->kc = imax(1, balanced(K, kc_max, 4));
  if (pl->kc > K) pl->kc = K;
  int64_t mc_max = imax(f->mr, (int64_t)(cache_bytes(h, 1) / 2 / (pl->kc * es)) / f->mr * f->mr);
  pl->mc = balanced(mt, mc_max, f->mr);
  int64_t nc_max = imax(f->nr, (int64_t)(cache_bytes(h, 2) / 2 / (pl->kc * es)) / f->nr * f->nr);
  pl->nc = balanced(nt, nc_max, f->nr);
  const GemmForce *fo = &g->force;
  if (fo->kc > 0) pl->kc = imin(fo->kc, imax(K, 1));
  if (fo->mc > 0) pl->mc = fo->mc;
  if (fo->nc > 0) pl->nc = fo->nc;
}

/* Cycles of the row pieces of an m-extent of mt rows, per k step, and their count. */
static double rows_cyc(const Family *f, int64_t mt, int64_t *ncalls) {
  if (mt <= 0) { *ncalls = 0; return 0; }
  int64_t full = mt / f->mr, r = mt % f->mr;
  if (r && full) { full--; r += f->mr; }
  *ncalls = full + (r ? f->dec_n[r] : 0);
  return full * f->cyc[f->mr] + (r ? f->dec_cyc[r] : 0);
}

/* Predicted seconds for one thread block of bt x mt x nt (x K), filling pl's parts. */
static void model_block(const GemmKernels *g, const Family *f, const Prob *p, int64_t bt,
                        int64_t mt, int64_t nt, Plan *pl) {
  const HwModel *h = &g->hw;
  double hz = hw_ghz(h) * 1e9, es = g->esize;
  int64_t K = p->k, calls;
  double rc = rows_cyc(f, mt, &calls);
  int64_t ntiles = cdiv(nt, f->nr), nkb = cdiv(K, pl->kc);
  int64_t njc = cdiv(nt, pl->nc), nic = cdiv(mt, pl->mc);
  double cyc = (double)bt * ntiles * ((double)K * rc + (double)nkb * calls * CALL_CYC);
  pl->t_comp = cyc / hz;
  /* Operand traffic.  A: read once per column block (reused from L2 across n tiles);
   * B: once per row block unless packed (then once, and reused from the packed panel). */
  double bytesA = (double)bt * mt * K * es, bytesB = (double)bt * K * nt * es;
  double bwA = level_bw(h, (double)p->m * K * es * (p->a_sb ? p->batch : 1));
  double bwB = level_bw(h, (double)K * p->n * es * (p->b_sb ? p->batch : 1));
  double bwL2 = level_bw(h, cache_bytes(h, 1) / 2);
  double mem = bytesA * njc / bwA;
  mem += pl->pack_b ? 0 : bytesB * nic / bwB;
  /* Unpacked B panels are re-read from L2 by every row tile when not L1-resident: charge
   * the re-reads of strided panels beyond the first at L2 bandwidth. */
  if (!pl->pack_b && calls > 1) mem += bytesB * (double)(calls - 1) / bwL2 * 0.25;
  pl->t_mem = mem;
  double pack = 0;
  if (pl->pack_a) pack += bytesA * njc * (1 / bwA + 1 / bwL2);
  if (pl->pack_b) pack += bytesB * (1 / bwB + 1 / bwL2);
  pl->t_pack = pack;
}

static void plan_eval(const GemmKernels *g, const Prob *p, int fi, bool pa, bool pb, int tb,
                      int tm, int tn, int nthreads, Plan *pl) {
  const Family *f = &g->fam[fi];
  memset(pl, 0, sizeof *pl);
  pl->fam = fi;
  pl->pack_a = pa;
  pl->pack_b = pb;
  pl->tb = tb;
  pl->tm = tm;
  pl->tn = tn;
  pl->bb = cdiv(p->batch, tb);
  pl->mb = cdiv(cdiv(p->m, f->mr), tm) * f->mr;
  pl->nbk = cdiv(cdiv(p->n, f->nr), tn) * f->nr;
  int64_t mt = imin(pl->mb, p->m), nt = imin(pl->nbk, p->n), bt = imin(pl->bb, p->batch);
  block_sizes(g, f, mt, nt, p->k, pl);
  model_block(g, f, p, bt, mt, nt, pl);
  /* The busiest block bounds the time; blocks share the memory bandwidth of the last level
   * only, which per-core figures already reflect. */
  double comp_mem = pl->t_comp > pl->t_mem ? pl->t_comp : pl->t_mem;
  pl->t_sync = tb * tm * tn > 1 ? SYNC_S : 0;
  pl->t = comp_mem + pl->t_pack + pl->t_sync;
  (void)nthreads;
}

/* Choose a plan; when cands is not NULL, also record every plan weighed.  The grids
 * tried use one thread or all of them, in every factorisation into batch x M x N. */
static void plan_choose(const GemmKernels *g, const Prob *p, int nthreads, Plan *best,
                        Plan *cands, int *ncands, int maxc) {
  const GemmForce *fo = &g->force;
  int T = nthreads > 0 ? nthreads : 1;
  int grid[64][3], ng = 0;
  if (fo->tb > 0 || fo->tm > 0 || fo->tn > 0) {
    grid[0][0] = fo->tb > 0 ? fo->tb : 1;
    grid[0][1] = fo->tm > 0 ? fo->tm : 1;
    grid[0][2] = fo->tn > 0 ? fo->tn : 1;
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
          ng++;
        }
  }
  bool first = true;
  int nc = 0;
  for (int fi = 0; fi < g->nfam; fi++) {
    if (fo->fam > 0 && fi != fo->fam - 1 && fo->fam <= g->nfam) continue;
    const Family *f = &g->fam[fi];
    for (int pb = 0; pb < 2; pb++) {
      if (!pb && p->b_sn != 1) continue;            /* kernels read B rows as vectors */
      if (fo->pack_b > 0 && pb != (fo->pack_b == 1) && p->b_sn == 1) continue;
      for (int pa = 0; pa < 2; pa++) {
        if (fo->pack_a > 0 && pa != (fo->pack_a == 1)) continue;
        for (int i = 0; i < ng; i++) {
          int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2];
          if (ng > 1 && ((tm > 1 && tm > cdiv(p->m, f->mr)) || (tn > 1 && tn > cdiv(p->n, f->nr))))
            continue;                                 /* some thread would get nothing */
          Plan pl;
          plan_eval(g, p, fi, pa, pb, tb, tm, tn, T, &pl);
          if (cands && nc < maxc) cands[nc++] = pl;
          if (first || pl.t < best->t) *best = pl;
          first = false;
        }
      }
    }
  }
  if (ncands) *ncands = nc;
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
  *p = (Prob){ .batch = x->batch, .m = x->m, .n = x->n, .k = x->k,
               .a = x->a, .a_sb = x->a_sb, .a_sm = x->a_sm, .a_sk = x->a_sk,
               .b = x->b, .b_sb = x->b_sb, .b_sk = x->b_sk, .b_sn = x->b_sn,
               .c = x->c, .c_sb = x->c_sb, .c_sm = x->c_sm, .c_sn = x->c_sn,
               .acc = x->accumulate };
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

typedef struct Job {
  const GemmKernels *g;
  const Family *f;
  const Prob *p;
  const Plan *pl;
  void **ws;                     /* per block: packed A, then packed B, then a C tile */
} Job;

static size_t ws_bytes(const GemmKernels *g, const Family *f, const Plan *pl) {
  size_t a = (size_t)pl->mc * pl->kc, b = (size_t)pl->kc * (size_t)cdiv(pl->nc, f->nr) * f->nr;
  size_t c = (size_t)f->mr * f->nr;
  return (a + b + c) * g->esize + 3 * 64;
}

/* The row pieces of an m-extent of mt rows: full mr-row tiles, then the edge (the last
 * mr + r rows when there is a full tile to borrow from, so 16 = 8 + 8 rather than 14 + 2)
 * split as the compile-time DP said. */
typedef struct Pieces { const Family *f; int64_t full, t, r0; int rem, d; } Pieces;

static void pieces_init(Pieces *it, const Family *f, int64_t mt) {
  it->f = f;
  it->full = mt / f->mr;
  it->rem = (int)(mt % f->mr);
  if (it->rem && it->full) { it->full--; it->rem += f->mr; }
  it->t = 0;
  it->d = 0;
  it->r0 = 0;
}

static bool pieces_next(Pieces *it, int64_t *r0, int *h) {
  if (it->t < it->full) *h = it->f->mr, it->t++;
  else if (it->rem && it->d < it->f->dec_n[it->rem]) *h = it->f->dec[it->rem][it->d++];
  else return false;
  *r0 = it->r0;
  it->r0 += *h;
  return true;
}

/* General-stride packing of A rows [0, mt) x [0, kc) by pieces: piece (r0, h) becomes a
 * panel out[k*h + i]. */
static void pack_a(const GemmKernels *g, const Family *f, const char *a, int64_t a_sm,
                   int64_t a_sk, int64_t mt, int64_t kc, char *out) {
  size_t es = (size_t)g->esize;
  size_t off = 0;
  Pieces it;
  pieces_init(&it, f, mt);
  int64_t r0;
  int h;
  while (pieces_next(&it, &r0, &h)) {
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

/* C tile (through the buffer) += or = tmp, for a C with no unit stride. */
static void merge_tile(const GemmKernels *g, const char *tmp, int nr, char *c, int64_t c_sm,
                       int64_t c_sn, int h, int64_t w, bool add) {
  for (int i = 0; i < h; i++)
    for (int64_t j = 0; j < w; j++) {
      if (g->esize == 4) {
        float *d = (float *)c + i * c_sm + j * c_sn;
        float s = ((const float *)tmp)[i * nr + j];
        *d = add ? *d + s : s;
      } else {
        double *d = (double *)c + i * c_sm + j * c_sn;
        double s = ((const double *)tmp)[i * nr + j];
        *d = add ? *d + s : s;
      }
    }
}

static void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* One thread block: batches, rows and columns given by the task's place in the grid. */
static void run_block(void *ctx, int64_t task) {
  const Job *J = ctx;
  const GemmKernels *g = J->g;
  const Family *f = J->f;
  const Prob *p = J->p;
  const Plan *pl = J->pl;
  int64_t tn = task % pl->tn, tm = task / pl->tn % pl->tm, tb = task / pl->tn / pl->tm;
  int64_t b0 = tb * pl->bb, b1 = imin(p->batch, b0 + pl->bb);
  int64_t m0 = tm * pl->mb, m1 = imin(p->m, m0 + pl->mb);
  int64_t n0 = tn * pl->nbk, n1 = imin(p->n, n0 + pl->nbk);
  if (b0 >= b1 || m0 >= m1 || n0 >= n1) return;
  size_t es = (size_t)g->esize;
  char *wa = align64(J->ws[task]);
  char *wb = align64(wa + (size_t)pl->mc * pl->kc * es);
  char *wc = align64(wb + (size_t)pl->kc * cdiv(pl->nc, f->nr) * f->nr * es);
  int nr = f->nr;
  for (int64_t bi = b0; bi < b1; bi++) {
    const char *A = p->a + (size_t)(bi * p->a_sb) * es, *Bm = p->b + (size_t)(bi * p->b_sb) * es;
    char *C = p->c + (size_t)(bi * p->c_sb) * es;
    for (int64_t jc = n0; jc < n1; jc += pl->nc) {
      int64_t ncur = imin(pl->nc, n1 - jc);
      for (int64_t pc = 0; pc < p->k; pc += pl->kc) {
        int64_t kcur = imin(pl->kc, p->k - pc);
        int beta = p->acc || pc > 0;
        const char *bsrc = Bm + (size_t)(pc * p->b_sk + jc * p->b_sn) * es;
        const char *bpan;
        int64_t b_rs, b_pstride;                  /* elements */
        if (pl->pack_b) {
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
          if (pl->pack_a) pack_a(g, f, asrc, p->a_sm, p->a_sk, mcur, kcur, wa);
          for (int64_t jr = 0; jr < ncur; jr += nr) {
            int64_t w = imin(nr, ncur - jr);
            const char *bp = bpan + (size_t)((jr / nr) * b_pstride) * es;
            char *cb = C + (size_t)(ic * p->c_sm + (jc + jr) * p->c_sn) * es;
            size_t aoff = 0;
            Pieces it;
            pieces_init(&it, f, mcur);
            int64_t r0;
            int h;
            while (pieces_next(&it, &r0, &h)) {
              const char *ap;
              int64_t a_rs, a_cs;
              if (pl->pack_a) {
                ap = wa + aoff * es; a_rs = 1; a_cs = h;
                aoff += (size_t)h * kcur;
              } else {
                ap = asrc + (size_t)(r0 * p->a_sm) * es; a_rs = p->a_sm; a_cs = p->a_sk;
              }
              UkFn uk = w == nr ? f->ukf[h] : f->uk[h];
              char *cp = cb + (size_t)(r0 * p->c_sm) * es;
              if (!p->ctmp) {
                uk(kcur, ap, a_rs, a_cs, bp, b_rs, cp, p->c_sm, w, beta);
              } else {
                uk(kcur, ap, a_rs, a_cs, bp, b_rs, wc, nr, w, 0);
                merge_tile(g, wc, nr, cp, p->c_sm, p->c_sn, h, w, beta);
              }
            }
          }
        }
      }
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

bool gemm_run(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen) {
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
  Plan pl;
  plan_choose(g, &p, pool_threads(pool), &pl, NULL, NULL, 0);
  const Family *f = &g->fam[pl.fam];
  int nblk = pl.tb * pl.tm * pl.tn;
  size_t need = ws_bytes(g, f, &pl);
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
  Job J = { .g = g, .f = f, .p = &p, .pl = &pl, .ws = ws };
  dyn_parallel_for(nblk > 1 ? pool : NULL, nblk, run_block, &J);
  if (locked) {
    pthread_mutex_unlock(&g->ws_lock);
  } else {
    for (int i = 0; i < nblk; i++) free(ws[i]);
    if (ws != mine) free(ws);
  }
  return true;
}

void gemm_force(GemmKernels *g, const GemmForce *f) {
  if (f) g->force = *f;
  else memset(&g->force, 0, sizeof g->force);
}

int gemm_families(const GemmKernels *g, int *mr, int *nr, int max) {
  for (int i = 0; i < g->nfam && i < max; i++) {
    mr[i] = g->fam[i].mr;
    nr[i] = g->fam[i].nr;
  }
  return g->nfam;
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
  const Family *f = &g->fam[pl.fam];
  out->mr = f->mr;
  out->nr = f->nr;
  out->pack_a = pl.pack_a;
  out->pack_b = pl.pack_b;
  out->kc = pl.kc;
  out->mc = pl.mc;
  out->nc = pl.nc;
  out->tb = pl.tb;
  out->tm = pl.tm;
  out->tn = pl.tn;
  out->predicted_s = pl.t;
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

/* The machine's attainable peak: every thread runs the largest register tile of the first
 * family with a_cs = b_rs = 0 (one column of A and one row of B, in L1) and a long k, so
 * only the FMA pipes are measured. */
typedef struct PeakJob { const GemmKernels *g; int64_t a_rs, reps; } PeakJob;

static void peak_task(void *ctx, int64_t t) {
  const PeakJob *pj = ctx;
  const Family *f = &pj->g->fam[0];
  size_t es = (size_t)pj->g->esize;
  char *mem = xcalloc(1, (size_t)(f->mr * pj->a_rs + f->nr + f->mr * f->nr) * es + 256);
  char *a = align64(mem), *b = align64(a + (size_t)f->mr * pj->a_rs * es);
  char *c = align64(b + (size_t)f->nr * es);
  for (int64_t r = 0; r < pj->reps; r++)
    f->ukf[f->mr](4096, a, pj->a_rs, 0, b, 0, c, f->nr, f->nr, 1);
  free(mem);
  (void)t;
}

double gemm_peak_gflops(GemmKernels *g, Pool *pool, double seconds) {
  const Family *f = &g->fam[0];
  int T = pool_threads(pool);
  int64_t a_rs = getenv("GEMM_PEAK_ARS") ? atoll(getenv("GEMM_PEAK_ARS")) : 1;
  PeakJob pj = { g, a_rs, 16 };
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

void gemm_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out) {
  const HwModel *h = &g->hw;
  buf_printf(out, "gemm %s on %s (%s): %d-bit vectors (%d x %s), %d registers, "
             "FMA %d x latency %d, %.2f GHz\n", elem_name(g->elem), h->name,
             jit_cpu_name(g->jit), hw_vbits(h), g->W, elem_name(g->elem), hw_vregs(h),
             hw_fma_units(h), hw_fma_lat(h), hw_ghz(h));
  buf_printf(out, "compiled once: %d functions in %.1f ms\n", g->nfuncs, g->compile_ms);
  buf_printf(out, "level 0 register tiles (h x nr: regs, FLOPs/element loaded):");
  for (int i = 0; i < g->ncand; i++)
    buf_printf(out, "%s%dx%d: %d, %.1f%s", i % 6 ? "  " : "\n  ", g->cand[i].mr,
               g->cand[i].v * g->W, g->cand[i].regs, g->cand[i].score,
               g->cand[i].kept ? " [kept]" : "");
  buf_puts(out, "\n");
  for (int fi = 0; fi < g->nfam; fi++) {
    const Family *f = &g->fam[fi];
    buf_printf(out, "family %d: %dx%d, heights", fi, f->mr, f->nr);
    for (int hh = 1; hh <= f->mr; hh++)
      if (f->has[hh]) buf_printf(out, " %d%s", hh, f->ksplit[hh] > 1 ? "*" : "");
    buf_puts(out, " (* splits k over accumulator sets)\n");
  }
  Prob p;
  char err[160];
  if (!normalise(g, x, &p, err, sizeof err)) {
    buf_printf(out, "%s\n", err);
    return;
  }
  buf_printf(out, "shape: batch %lld, M %lld, N %lld, K %lld%s%s%s, %d thread%s\n",
             (long long)x->batch, (long long)x->m, (long long)x->n, (long long)x->k,
             x->accumulate ? ", C +=" : "", p.swapped ? ", run as C^T = B^T A^T" : "",
             p.ctmp ? ", C through a tile buffer" : "", nthreads, nthreads == 1 ? "" : "s");
  if (!p.batch || !p.m || !p.n || !p.k) {
    buf_puts(out, "nothing to compute\n");
    return;
  }
  Plan c[512], best;
  int nc = 0;
  plan_choose(g, &p, nthreads, &best, c, &nc, 512);
  const Family *f = &g->fam[best.fam];
  double flops = 2.0 * p.batch * p.m * p.n * p.k;
  buf_printf(out, "chosen: tile %dx%d, A %s, B %s\n", f->mr, f->nr,
             best.pack_a ? "packed" : p.a_sm == 1 || p.m == 1 ? "in place (unit rows)" : "in place (strided rows)",
             best.pack_b ? "packed" : "in place");
  buf_printf(out, "  cores: %d x %d x %d blocks (batch x M x N) of %lld x %lld x %lld\n",
             best.tb, best.tm, best.tn, (long long)imin(best.bb, p.batch),
             (long long)imin(best.mb, p.m), (long long)imin(best.nbk, p.n));
  buf_printf(out, "  L3: nc = %lld   L2: mc = %lld   L1: kc = %lld   registers: %dx%d\n",
             (long long)best.nc, (long long)best.mc, (long long)best.kc, f->mr, f->nr);
  buf_printf(out, "  predicted %.2f us (compute %.2f, memory %.2f, packing %.2f, fork-join %.2f)"
             " = %.1f GFLOP/s\n", best.t * 1e6, best.t_comp * 1e6, best.t_mem * 1e6,
             best.t_pack * 1e6, best.t_sync * 1e6, flops / best.t * 1e-9);
  qsort(c, (size_t)nc, sizeof *c, cmp_plan);
  buf_printf(out, "candidates (%d weighed, best first):\n", nc);
  for (int i = 0; i < nc && i < 8; i++)
    buf_printf(out, "  %dx%-3d A %-6s B %-6s grid %dx%dx%d  kc %-4lld mc %-5lld nc %-5lld %9.2f us\n",
               g->fam[c[i].fam].mr, g->fam[c[i].fam].nr, c[i].pack_a ? "packed" : "direct",
               c[i].pack_b ? "packed" : "direct", c[i].tb, c[i].tm, c[i].tn,
               (long long)c[i].kc, (long long)c[i].mc, (long long)c[i].nc, c[i].t * 1e6);
}
