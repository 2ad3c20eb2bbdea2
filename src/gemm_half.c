/* gemm_half.c -- 16-bit contractions (f16, bf16) on the GEMM engine.  The products sum in
 * f32 and C is rounded once, on store, as lang/reference.md says of every 16-bit definition.
 * Two ways, chosen per engine from the model's llvm_features:
 *  - bf16 where the model has AVX512-BF16: A and B are packed as pairs of bf16 along k (k
 *    padded to even with zeros) and a 12 x 32 micro-kernel sums with vdpbf16ps
 *    (llvm.x86.avx512bf16.dpbf16ps.512), two products per f32 lane per instruction;
 *  - otherwise (f16 everywhere, bf16 elsewhere) the operands are widened to f32 as they are
 *    copied and the f32 engine (gemm.c) runs on the copies.  f16 is widened on AVX512-FP16
 *    too: its FMAs (vfmadd*ph) accumulate in f16, which the language's f32 sum forbids, and
 *    its dot products into f32 (vdpphps) are AVX10.2's, which no model has yet.
 * The engine object is a GemmKernels of elem f16 or bf16 whose `wide` is the session's f32
 * engine; gemm.c, gemm_run.c and gemm_model.c hand their entry points here for it. */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"
#include "irb.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

/* The bf16 micro-kernel's tile: DP_MR rows by DP_NR columns (two zmm of 16 f32 lanes):
 * 24 accumulators, two vectors of B and a broadcast of A in 32 registers, and 24 independent
 * sums cover vdpbf16ps's latency (6 cycles on Zen 4) at two a cycle.  DP_KC pairs of k a block
 * (DP_MR, DP_NR in gemm_int.h) keep the kernel's B panel (DP_KC x 32 pairs, 24 KiB) in L1; up
 * to 1.5 DP_MC rows (dp_plan) the A block (144 x 192 pairs, 108 KiB) in L2, and up to DP_NC
 * columns the task's f32 C block. */
#define DP_KC 192
#define DP_MC (8 * DP_MR)
#define DP_NC (16 * DP_NR)
typedef void (*DpFn)(int64_t kp, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc,
                     int32_t beta);

/* ---- the vdpbf16ps micro-kernel ---- */

/* The heights of the kernels, the first DP_MR: an edge of h rows runs as the fewest of them
 * that add up to h (a binary decomposition below 8), each reading its rows of the panel. */
static const int dp_heights[DP_NH] = { DP_MR, 8, 4, 2, 1 };

/* void dp(i64 kp, ptr a, ptr b, ptr c, i64 ldc, i32 beta): c[r][j] (+)= the sum over kp
 * pairs p of a[p][r] . b[p][j] for r < h and j < 16 nv, a's pairs DP_MR a step, b's DP_NR;
 * C is f32. */
static void emit_dp(LLVMContextRef cx, LLVMModuleRef m, const char *name, int h, int nv) {
  LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(cx), i32 = LLVMInt32TypeInContext(cx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(cx), ptr = LLVMPointerTypeInContext(cx, 0);
  LLVMTypeRef vf = LLVMVectorType(f32, 16), vi = LLVMVectorType(i32, 16);
  LLVMTypeRef vbf = LLVMVectorType(LLVMBFloatTypeInContext(cx), 32);
  LLVMTypeRef args[6] = { i64, ptr, ptr, ptr, i64, i32 };
  LLVMValueRef fn = LLVMAddFunction(m, name, LLVMFunctionType(LLVMVoidTypeInContext(cx), args, 6, 0));
  LLVMTypeRef dpt;
  LLVMValueRef dp = irb_intrinsic(m, "llvm.x86.avx512bf16.dpbf16ps.512", NULL, 0, &dpt);
  LLVMValueRef kp = LLVMGetParam(fn, 0), pa = LLVMGetParam(fn, 1), pb = LLVMGetParam(fn, 2);
  LLVMValueRef pc = LLVMGetParam(fn, 3), ldc = LLVMGetParam(fn, 4), beta = LLVMGetParam(fn, 5);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(cx, fn, "entry");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(cx, fn, "loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cx, fn, "done");
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef add = LLVMBuildICmp(b, LLVMIntNE, beta, LLVMConstInt(i32, 0, 0), "");
  LLVMValueRef init[DP_MR][2], acc[DP_MR][2], cptr[DP_MR][2];
  for (int r = 0; r < h; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMConstInt(i64, (uint64_t)r, 0), ldc, ""),
                                      LLVMConstInt(i64, (uint64_t)v * 16, 0), "");
      cptr[r][v] = LLVMBuildGEP2(b, f32, pc, &off, 1, "");
      LLVMValueRef old = LLVMBuildLoad2(b, vf, cptr[r][v], "");
      LLVMSetAlignment(old, 4);
      init[r][v] = LLVMBuildSelect(b, add, old, LLVMConstNull(vf), "");
    }
  LLVMBuildBr(b, loop);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef p = LLVMBuildPhi(b, i64, "p");
  for (int r = 0; r < h; r++)
    for (int v = 0; v < nv; v++) acc[r][v] = LLVMBuildPhi(b, vf, "");
  LLVMValueRef bv[2];
  for (int v = 0; v < nv; v++) {
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, p, LLVMConstInt(i64, DP_NR, 0), ""),
                                    LLVMConstInt(i64, (uint64_t)v * 16, 0), "");
    LLVMValueRef l = LLVMBuildLoad2(b, vi, LLVMBuildGEP2(b, i32, pb, &off, 1, ""), "");
    LLVMSetAlignment(l, 64);
    bv[v] = LLVMBuildBitCast(b, l, vbf, "");
  }
  LLVMValueRef next[DP_MR][2];
  for (int r = 0; r < h; r++) {
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, p, LLVMConstInt(i64, DP_MR, 0), ""),
                                    LLVMConstInt(i64, (uint64_t)r, 0), "");
    LLVMValueRef s = LLVMBuildLoad2(b, i32, LLVMBuildGEP2(b, i32, pa, &off, 1, ""), "");
    LLVMValueRef sv = LLVMBuildInsertElement(b, LLVMGetPoison(vi), s, LLVMConstInt(i32, 0, 0), "");
    sv = LLVMBuildShuffleVector(b, sv, LLVMGetPoison(vi), LLVMConstNull(vi), "");
    LLVMValueRef av = LLVMBuildBitCast(b, sv, vbf, "");
    for (int v = 0; v < nv; v++) {
      LLVMValueRef ca[3] = { acc[r][v], av, bv[v] };
      next[r][v] = LLVMBuildCall2(b, dpt, dp, ca, 3, "");
    }
  }
  LLVMValueRef p1 = LLVMBuildAdd(b, p, LLVMConstInt(i64, 1, 0), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, p1, kp, ""), loop, done);
  LLVMAddIncoming(p, (LLVMValueRef[]){ LLVMConstInt(i64, 0, 0), p1 },
                  (LLVMBasicBlockRef[]){ entry, loop }, 2);
  for (int r = 0; r < h; r++)
    for (int v = 0; v < nv; v++)
      LLVMAddIncoming(acc[r][v], (LLVMValueRef[]){ init[r][v], next[r][v] },
                      (LLVMBasicBlockRef[]){ entry, loop }, 2);
  LLVMPositionBuilderAtEnd(b, done);
  for (int r = 0; r < h; r++)
    for (int v = 0; v < nv; v++) LLVMSetAlignment(LLVMBuildStore(b, next[r][v], cptr[r][v]), 4);
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
}

static void dp_name(char *name, size_t n, int hi, int nv) {
  snprintf(name, n, "gemm_bf16_dp%dx%d", dp_heights[hi], 16 * nv);
}

/* Every kernel into m, the full tile first (what :code shows). */
static void emit_dps(LLVMContextRef cx, LLVMModuleRef m) {
  char name[48];
  for (int hi = 0; hi < DP_NH; hi++)
    for (int nv = 2; nv >= 1; nv--) {
      dp_name(name, sizeof name, hi, nv);
      emit_dp(cx, m, name, dp_heights[hi], nv);
    }
}

/* Each kernel timed once on panels that stay in L1 (as gemm_calibrate times the f32 tiles):
 * the best of CAL_TRIALS runs of about CAL_S seconds.  It measures the hardware -- the
 * clock the model's file cannot know, how vdpbf16ps issues beside the broadcasts -- never a
 * shape, in about a millisecond. */
#define CAL_KP 128
#define CAL_TRIALS 5
#define CAL_S 20e-6
static void dp_calibrate(GemmKernels *g) {
  uint32_t *mem = aligned_alloc(64, (size_t)(CAL_KP * (DP_MR + DP_NR) + DP_MR * DP_NR) * 4);
  if (!mem) return;
  memset(mem, 0, (size_t)(CAL_KP * (DP_MR + DP_NR) + DP_MR * DP_NR) * 4);
  uint32_t *a = mem, *b = a + CAL_KP * DP_MR;
  float *c = (float *)(b + CAL_KP * DP_NR);
  for (int hi = 0; hi < DP_NH; hi++)
    for (int nv = 1; nv <= 2; nv++) {
      DpFn uk = (DpFn)g->dpk[hi][nv - 1];
      double guess = fmax(dp_heights[hi] * nv / (hw_fma_units(&g->hw) * hw_bf16_per_fma(&g->hw) / 2),
                          hw_fma_lat(&g->hw)) / (hw_ghz(&g->hw) * 1e9);
      int64_t reps = imax(1, imin((int64_t)(CAL_S / (guess * CAL_KP)), 10000));
      uk(CAL_KP, a, b, c, DP_NR, 1);
      double best = 1e30;
      for (int t = 0; t < CAL_TRIALS; t++) {
        double t0 = now_s();
        for (int64_t r = 0; r < reps; r++) uk(CAL_KP, a, b, c, DP_NR, 1);
        best = fmin(best, (now_s() - t0) / ((double)reps * CAL_KP));
      }
      if (best > 0 && best < 1) g->dpsec[hi][nv - 1] = best;
    }
  free(mem);
}

static bool model_has(const HwModel *hw, const char *feature) {
  const char *s = hw->llvm_features;
  size_t n = strlen(feature);
  for (const char *q = strstr(s, feature); q; q = strstr(q + 1, feature))
    if (q > s && q[-1] == '+' && (q[n] == ',' || q[n] == 0)) return true;
  return false;
}

bool gemm_half_dp(const HwModel *hw, DynElem elem) {
  return elem == DYN_BF16 && hw_vbits(hw) >= 512 && model_has(hw, "avx512bf16");
}

static bool gemm_half_run(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen);
static struct DpMemo *dp_memo_new(void);
static bool gemm_half_code(GemmKernels *g, const char *what, Buf *out, char *err, size_t errlen);
static void gemm_half_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out);
static double gemm_half_predict(GemmKernels *g, const GemmArgs *x, int nthreads);
static const GemmHalfOps half_ops = {gemm_half_run, gemm_half_code, gemm_half_describe, gemm_half_predict};

GemmKernels *gemm_half_compile(DynElem elem, GemmKernels *wide, char *err, size_t errlen) {
  if (!elem_is_half(elem) || !wide || wide->elem != DYN_F32) {
    snprintf(err, errlen, "gemm: a 16-bit engine needs the f32 engine");
    return NULL;
  }
  double t0 = now_s();
  GemmKernels *g = xcalloc(1, sizeof *g);
  g->elem = elem;
  g->hw = wide->hw;
  g->esize = 2;
  g->W = wide->W;
  g->wide = wide;
  g->half = &half_ops;
  pthread_mutex_init(&g->ws_lock, NULL);
  g->nws = 1;
  g->ws = xcalloc(1, sizeof *g->ws);
  g->ws_bytes = xcalloc(1, sizeof *g->ws_bytes);
  g->dp = gemm_half_dp(&g->hw, elem);
  if (g->dp) g->dp_memo = dp_memo_new();
  if (g->dp && jit_can_run(wide->jit)) {
    LLVMContextRef cx = LLVMContextCreate();
    LLVMModuleRef m = jit_module_new(wide->jit, cx, "gemm_bf16");
    emit_dps(cx, m);
    bool ok = jit_add_modules(wide->jit, &m, 1, GEMM_PIPELINE, err, errlen);
    LLVMContextDispose(cx);
    for (int hi = 0; ok && hi < DP_NH; hi++)
      for (int nv = 1; ok && nv <= 2; nv++) {
        char name[48];
        dp_name(name, sizeof name, hi, nv);
        ok = (g->dpk[hi][nv - 1] = jit_lookup(wide->jit, name, err, errlen)) != NULL;
      }
    if (!ok) {
      gemm_free(g);
      return NULL;
    }
    g->nfuncs = 2 * DP_NH;
    dp_calibrate(g);
    /* Timed for microseconds, as the f32 tiles are: under a long load of wide vectors the
     * clock falls alike for both (gemm_sustain), so the rate the f32 engine sustains over
     * its calibrated one scales these too.  2 threads of Zen 5: 97 x 511 x 1023 and 128 x 768
     * x 768 in bf16 ran at 266-290 GFLOP/s a core against the 12x32 tile's 440-455
     * calibrated, the model 23-32% short. */
    for (int hi = 0; hi < DP_NH; hi++)
      for (int nv = 0; nv < 2; nv++) g->dpsec[hi][nv] *= gemm_slow(wide);
  }
  g->compile_ms = (now_s() - t0) * 1e3;
  return g;
}

static bool gemm_half_code(GemmKernels *g, const char *what, Buf *out, char *err, size_t errlen) {
  if (!g->dp) {
    buf_printf(out, "; %s operands are widened to f32 as they are copied; the f32 engine's kernels:\n",
               elem_name(g->elem));
    return gemm_code(g->wide, what, out, err, errlen);
  }
  bool asm_ = !strcmp(what, "asm");
  if (!asm_ && strcmp(what, "llvm")) {
    snprintf(err, errlen, "gemm: no code view '%s' (llvm, asm)", what);
    return false;
  }
  buf_printf(out, "; bf16 pairs packed along k, summed in f32 by vdpbf16ps; C rounded to bf16 once\n");
  LLVMContextRef cx = LLVMContextCreate();
  LLVMModuleRef m = jit_module_new(g->wide->jit, cx, "gemm_bf16");
  char name[48];
  dp_name(name, sizeof name, 0, 2);
  emit_dp(cx, m, name, DP_MR, 2);     /* the edges' kernels are this one with fewer rows or columns */
  bool ok = jit_optimize(g->wide->jit, m, GEMM_PIPELINE, err, errlen);
  if (ok && asm_) ok = jit_print_asm(g->wide->jit, m, out, err, errlen);
  else if (ok) jit_print_ir(m, out);
  LLVMDisposeModule(m);
  LLVMContextDispose(cx);
  return ok;
}

/* ---- running ---- */

/* The copies' memory, kept by the engine between calls (fresh pages cost more than the
 * copying); a caller that finds it in use by another thread gets its own.  64-byte aligned. */
static void *ws_take(GemmKernels *g, size_t bytes, bool *own) {
  bytes = (bytes + 127) & ~(size_t)63;
  *own = pthread_mutex_trylock(&g->ws_lock) != 0;
  if (*own) return aligned_alloc(64, bytes);
  if (g->ws_bytes[0] < bytes) {
    free(g->ws[0]);
    g->ws[0] = aligned_alloc(64, bytes);
    g->ws_bytes[0] = g->ws[0] ? bytes : 0;
  }
  if (!g->ws[0]) pthread_mutex_unlock(&g->ws_lock);
  return g->ws[0];
}

static void ws_give(GemmKernels *g, void *p, bool own) {
  if (own) free(p);
  else if (p) pthread_mutex_unlock(&g->ws_lock);
}

static bool check_args(const GemmArgs *x, char *err, size_t errlen) {
  if (x->batch < 0 || x->m < 0 || x->n < 0 || x->k < 0) {
    snprintf(err, errlen, "gemm: negative size");
    return false;
  }
  if (x->batch && x->m && x->n && (!x->c || (x->k && (!x->a || !x->b)))) {
    snprintf(err, errlen, "gemm: null operand");
    return false;
  }
  return true;
}

/* The widening path: A, B (and C when accumulating) copied to f32, the f32 engine on the
 * copies, C rounded back.  Copies are split over the pool by rows. */
typedef struct Widen {
  bool bf;
  const GemmArgs *x;
  int64_t ba, bb;                     /* batches of A and B held (1 when broadcast) */
  float *a, *b, *c;
  int64_t rows_a, rows_b, rows_c;     /* ba * m, bb * k, batch * m */
  int phase;                          /* 0: widen, 1: narrow C */
} Widen;

/* The f32 engine's call on the copies: each operand dense, one batch of A or B when the
 * call broadcasts it. */
static GemmArgs widened(const GemmArgs *x, float *a, float *b, float *c) {
  GemmArgs y = *x;
  y.a = a, y.a_sb = x->a_sb ? x->m * x->k : 0, y.a_sm = x->k, y.a_sk = 1;
  y.b = b, y.b_sb = x->b_sb ? x->k * x->n : 0, y.b_sk = x->n, y.b_sn = 1;
  y.c = c, y.c_sb = x->m * x->n, y.c_sm = x->n, y.c_sn = 1;
  return y;
}

static void widen_task(void *ctx, int64_t t) {
  Widen *w = ctx;
  const GemmArgs *x = w->x;
  const uint16_t *A = x->a, *B = x->b;
  uint16_t *C = x->c;
  if (w->phase == 1) {
    int64_t bi = t / x->m, i = t % x->m;
    hpack_narrow(w->bf, w->c + t * x->n, C + bi * x->c_sb + i * x->c_sm, x->c_sn, x->n);
    return;
  }
  if (t < w->rows_a) {
    int64_t bi = t / x->m, i = t % x->m;
    hpack_widen(w->bf, A + bi * x->a_sb + i * x->a_sm, x->a_sk, w->a + t * x->k, x->k);
  } else if ((t -= w->rows_a) < w->rows_b) {
    int64_t bi = t / x->k, kk = t % x->k;
    hpack_widen(w->bf, B + bi * x->b_sb + kk * x->b_sk, x->b_sn, w->b + t * x->n, x->n);
  } else {
    t -= w->rows_b;
    int64_t bi = t / x->m, i = t % x->m;
    hpack_widen(w->bf, C + bi * x->c_sb + i * x->c_sm, x->c_sn, w->c + t * x->n, x->n);
  }
}

static bool run_widened(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen) {
  Widen w = { g->elem == DYN_BF16, x, x->a_sb ? x->batch : 1, x->b_sb ? x->batch : 1, 0, 0, 0, 0, 0, 0, 0 };
  w.rows_a = w.ba * x->m;
  w.rows_b = w.bb * x->k;
  w.rows_c = x->batch * x->m;
  size_t na = (size_t)(w.rows_a * x->k + 16) & ~(size_t)15, nb = (size_t)(w.rows_b * x->n + 16) & ~(size_t)15;
  bool own;
  float *ws = ws_take(g, (na + nb + (size_t)(w.rows_c * x->n)) * sizeof(float), &own);
  if (!ws) {
    snprintf(err, errlen, "gemm: out of memory widening %s operands", elem_name(g->elem));
    return false;
  }
  w.a = ws, w.b = ws + na, w.c = ws + na + nb;
  dyn_parallel_for(pool, w.rows_a + w.rows_b + (x->accumulate ? w.rows_c : 0), widen_task, &w);
  GemmArgs y = widened(x, w.a, w.b, w.c);
  bool ok = gemm_run(g->wide, &y, pool, err, errlen);
  if (ok) {
    w.phase = 1;
    dyn_parallel_for(pool, w.rows_c, widen_task, &w);
  }
  ws_give(g, ws, own);
  return ok;
}

/* The vdpbf16ps path: A packed in panels of DP_MR rows, B of DP_NR columns, each as pairs
 * along k (a pair's first element in the low half, as vdpbf16ps pairs them); then tasks of
 * up to DP_MC x DP_NC of C, each summing in an f32 block over k blocks of at most DP_KC
 * pairs and rounding it into C at the end.  The blocks are even shares of the panels (k's
 * too: 193 pairs are blocks of 97 and 96, not 192 and 1, whose C round trip cost more
 * than its sums), split further while the threads outnumber them or a round of tasks would
 * leave threads idle.  A call whose predicted time on the threads beats the caller alone by
 * less than the fork-joins runs on the caller alone: 13 x 33 x 385 is 2 us of work.  The
 * operands are packed all first, shared by the tasks, or each task packs the blocks it
 * reads into its slot's buffers (the slot a thread took last, so that they stay in its
 * core's caches), whichever the model (dp_time) prefers: packed first, the panels that one
 * thread packed and another reads move between their cores on every call. */
typedef struct DpPlan {
  int64_t kp, mp, np;                 /* pairs, row panels, column panels */
  int64_t kc, nkb;                    /* pairs a k block, k blocks */
  int64_t mcp, ncp;                   /* panels of a task's block */
  int64_t mblocks, nblocks, tasks;
  int threads;                        /* that take part; 1: the caller alone */
  bool priv;                          /* each task packs its own blocks (else all first) */
  double pack_s, comp_s, sync_s, move_s, total;   /* the model's terms (dp_time) */
} DpPlan;

/* A fork-join of the pool whose workers spin, and the cycles a kernel call costs beyond its
 * sums and its C tile: the f32 engine's (sched_sync_s, CALL_CYC in gemm_int.h).  Packing is priced
 * as a streaming kernel (sched_stream_time) of PACK_OPS lane-operations an element: one
 * conversion or shuffle a lane, as gemm_hpack.c's loops do. */
#define DP_CALL_CYC CALL_CYC
#define DP_PACK_OPS 1.0

/* Seconds for `rows` rows of one column panel of nv vectors over kc pairs: the heights that
 * add up to them, each at its calibrated rate, or else the slower of its vdpbf16ps issue
 * and the latency of one sum's chain, plus each call's overhead and C tile. */
static double dp_rows_s(const GemmKernels *g, int64_t rows, int nv, int64_t kc) {
  const HwModel *h = &g->hw;
  double rate = hw_fma_units(h) * hw_bf16_per_fma(h) / 2, hz = hw_ghz(h) * 1e9;   /* vdpbf16ps a cycle */
  double s = 0;
  for (int hi = 0; hi < DP_NH && rows > 0; hi++)
    for (int hh = dp_heights[hi]; rows >= hh; rows -= hh) {
      double pair = g->dpsec[hi][nv - 1] > 0 ? g->dpsec[hi][nv - 1] : fmax(hh * nv / rate, hw_fma_lat(h)) / hz;
      s += pair * (double)kc + (DP_CALL_CYC + 4.0 * hh * nv) / hz;
    }
  return s;
}

/* Seconds of a task of `rows` x `cols` of C: every k block's column panels by its rows,
 * and the rounding of its f32 block into C (and widening, when accumulating) at L2's rate. */
static double dp_task_s(const GemmKernels *g, const GemmArgs *x, const DpPlan *pl, int64_t rows, int64_t cols) {
  const HwModel *h = &g->hw;
  int64_t full = cols / DP_NR, e = cols % DP_NR;
  double s = 0;
  for (int64_t b = 0; b < pl->nkb; b++) {
    int64_t kc = imin(pl->kc, pl->kp - b * pl->kc);
    s += (double)full * dp_rows_s(g, rows, 2, kc) + (e ? dp_rows_s(g, rows, e > 16 ? 2 : 1, kc) : 0);
  }
  double bytes = (double)rows * (double)cols * (6 + (x->accumulate ? 6 : 0));
  return s + bytes / sched_threads_bw(h, h->nlevels > 1 ? 1 : 0, 1);
}

static int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0;
}

/* The most rows of panels (A's DP_MR a panel, B's DP_NR) that a thread reads, packed first,
 * and another thread packed.  The packing's
 * tasks (A's panels, batch by batch, then B's) and the sums' tasks (batch, row block, column
 * block, the last fastest) are each shared among the threads in contiguous runs (pool.c):
 * a thread reads the A panels of its run's row blocks and the B panels of its column blocks
 * (all of a batch's once its run is as long as a row of blocks). */
static int64_t dp_remote_rows(const GemmArgs *x, const DpPlan *pl, int threads) {
  int64_t ba = x->a_sb ? x->batch : 1, bb = x->b_sb ? x->batch : 1, P = ba * pl->mp + bb * pl->np;
  int64_t per = pl->mblocks * pl->nblocks, most = 0;
  for (int i = 0; i < threads; i++) {
    int64_t t0 = pl->tasks * i / threads, t1 = pl->tasks * (i + 1) / threads, p0 = P * i / threads, p1 = P * (i + 1) / threads;
    if (t1 <= t0) continue;
    int64_t b0 = t0 / per, b1 = (t1 - 1) / per;            /* its batch indices */
    int64_t r0 = t0 % per / pl->nblocks, r1 = (t1 - 1) % per / pl->nblocks;
    /* A: from its first row block's first panel to its last's end, in the packing's order */
    int64_t a0 = (x->a_sb ? b0 : 0) * pl->mp + r0 * pl->mcp, a1 = (x->a_sb ? b1 : 0) * pl->mp + imin(pl->mp, (r1 + 1) * pl->mcp);
    if (!x->a_sb && b1 > b0) a0 = 0, a1 = pl->mp;
    /* B: its column blocks, all of them when its run wraps a row of blocks */
    int64_t c0 = t0 % pl->nblocks, c1 = (t1 - 1) % pl->nblocks;
    if (t1 - t0 >= pl->nblocks || c1 < c0) c0 = 0, c1 = pl->nblocks - 1;
    int64_t q0 = ba * pl->mp + (x->b_sb ? b0 : 0) * pl->np, q1 = ba * pl->mp + (x->b_sb ? b1 : 0) * pl->np;
    int64_t s0 = q0 + c0 * pl->ncp, s1 = q1 + imin(pl->np, (c1 + 1) * pl->ncp);
    int64_t ra = (a1 - a0) - overlap(a0, a1, p0, p1), rb = (s1 - s0) - overlap(s0, s1, p0, p1);
    int64_t r = ra * DP_MR + rb * DP_NR;
    most = r > most ? r : most;
  }
  return most;
}

/* The plan's terms on `threads`, rounds of tasks each as long as the first (the largest).
 * Packed first: the packing streamed over the threads, a fork-join for each phase, and the
 * panels a thread reads that another packed (dp_remote_rows), each line fetched from the
 * packer's cache and taken back when the next call packs it again.  Packed by each task:
 * its blocks on its own thread, again whenever its thread's previous task had another (a
 * thread's tasks are consecutive, the column blocks fastest), one fork-join. */
static void dp_time(const GemmKernels *g, const GemmArgs *x, DpPlan *pl, int threads) {
  const HwModel *h = &g->hw;
  int64_t rounds = cdiv(pl->tasks, threads), rows = imin(x->m, pl->mcp * DP_MR), cols = imin(x->n, pl->ncp * DP_NR);
  pl->comp_s = (double)rounds * dp_task_s(g, x, pl, rows, cols);
  pl->move_s = 0;
  if (pl->priv) {
    /* the elements its thread packs: A's block whenever it changes (every nblocks tasks),
     * B's for every task (or whenever the batch index changes, with one column block) */
    double a_packs = pl->nblocks > 1 ? (double)cdiv(rounds, pl->nblocks) : (double)rounds;
    double b_packs = pl->nblocks > 1 ? (double)rounds : x->b_sb ? (double)cdiv(rounds, pl->mblocks) : 1;
    double e = a_packs * (double)rows * (double)x->k + b_packs * (double)x->k * (double)cols;
    double bytes = ((double)pl->mcp * DP_MR + (double)pl->ncp * DP_NR) * (double)pl->kp * 4;
    SchedWork w = { e * DP_PACK_OPS, 2, e * 2, bytes, false, 1 };
    pl->pack_s = sched_stream_time(h, 1, &w, NULL);
    pl->sync_s = threads > 1 ? sched_sync_s(h) : 0;
    /* Not where a thread would pack more than all of B: its column panels, read a line a
     * row of k from B in memory, cost more than a stream (2048^3 on 2 threads, B packed 9.5
     * times a thread in panels of 32 columns: 25.8 ms, packed first 22.2). */
    if (b_packs * (double)cols > (double)x->n * (x->b_sb ? (double)x->batch : 1)) pl->pack_s = INFINITY;
  } else {
    double ba = x->a_sb ? (double)x->batch : 1, bb = x->b_sb ? (double)x->batch : 1;
    double ea = ba * (double)x->m * (double)x->k, eb = bb * (double)x->k * (double)x->n;
    double packed = (ba * (double)pl->mp * DP_MR + bb * (double)pl->np * DP_NR) * (double)pl->kp * 4;
    SchedWork w = { (ea + eb) * DP_PACK_OPS, 2, (ea + eb) * 2, packed, false, threads > 1 ? (int64_t)(ba * pl->mp + bb * pl->np) : 1 };
    pl->pack_s = sched_stream_time(h, threads, &w, NULL);
    pl->sync_s = threads > 1 ? 2 * sched_sync_s(h) : 0;
    if (threads > 1) {
      double lines = (double)dp_remote_rows(x, pl, threads) * (double)pl->kp * 4 / 64;
      pl->move_s = 2 * sched_lines_moved_s(h, lines);   /* packed panels another core wrote */
    }
  }
  pl->total = pl->pack_s + pl->comp_s + pl->sync_s + pl->move_s;
}

/* The plan: of the even shares of the row panels in blocks of at most DP_MC_MAX panels and of
 * the column panels in blocks of at most DP_NC / DP_NR (each count of blocks giving its own
 * size), the one the model (dp_time) says is fastest on the threads, or on the caller alone.
 * The blocks' sizes were found by splitting the largest (DP_MC rows) until the tasks
 * filled the threads, which left C of 128 x 768 in blocks of 72 and 56 rows, a thread's two
 * tasks both of one: 1.125 times an even share (0.331 ms on 2 threads of Zen 5; 0.265 with
 * one block of the 128 rows and half the columns each). */
#define DP_MC_MAX (DP_MC / DP_MR * 3 / 2)
static void dp_plan(const GemmKernels *g, const GemmArgs *x, int T, DpPlan *pl) {
  DpPlan c = {0};
  c.kp = (x->k + 1) / 2;
  c.mp = cdiv(x->m, DP_MR);
  c.np = cdiv(x->n, DP_NR);
  c.nkb = cdiv(c.kp, DP_KC);
  c.kc = cdiv(c.kp, c.nkb);
  *pl = c;
  pl->total = -1;
  for (int64_t mb = cdiv(c.mp, DP_MC_MAX); mb <= c.mp; mb = cdiv(c.mp, c.mcp - 1)) {
    c.mcp = cdiv(c.mp, mb);
    c.mblocks = cdiv(c.mp, c.mcp);
    for (int64_t nb = cdiv(c.np, DP_NC / DP_NR); nb <= c.np; nb = cdiv(c.np, c.ncp - 1)) {
      c.ncp = cdiv(c.np, nb);
      c.nblocks = cdiv(c.np, c.ncp);
      c.tasks = x->batch * c.mblocks * c.nblocks;
      for (int t = 1; t <= 2; t++) {          /* the caller alone, then the threads */
        c.threads = t == 1 ? 1 : (int)imin(T, c.tasks);
        if (t == 2 && c.threads <= 1) break;
        for (int priv = 0; priv < 2; priv++) {
          c.priv = priv;
          dp_time(g, x, &c, c.threads);
          if (pl->total < 0 || c.total < pl->total) *pl = c;
        }
      }
      if (c.ncp == 1) break;
    }
    if (c.mcp == 1) break;
  }
}

/* The plans of the shapes run last, DP_MEMO of them by a hash of what dp_plan reads, so that
 * a shape run again skips the model (as the f32 engine's plan cache does): on 2 threads of
 * Zen 5, 13 x 33 x 385 spent about 0.6 us of its 5 in dp_plan, sampled by perf. */
#define DP_MEMO 16
typedef struct DpMemo {
  pthread_mutex_t lock;
  struct { int64_t key[8]; DpPlan pl; bool used; } e[DP_MEMO];
} DpMemo;

static DpMemo *dp_memo_new(void) {
  DpMemo *m = xcalloc(1, sizeof *m);
  pthread_mutex_init(&m->lock, NULL);
  return m;
}

void gemm_half_free_memo(GemmKernels *g) {
  if (!g->dp_memo) return;
  pthread_mutex_destroy(&g->dp_memo->lock);
  free(g->dp_memo);
  g->dp_memo = NULL;
}

static void dp_plan_memo(GemmKernels *g, const GemmArgs *x, int T, DpPlan *pl) {
  int64_t key[8] = { x->batch, x->m, x->n, x->k, x->a_sb != 0, x->b_sb != 0, x->accumulate, T };
  uint64_t h = 0;
  for (int i = 0; i < 8; i++) h = (h ^ (uint64_t)key[i]) * 0x9E3779B97F4A7C15ull;
  DpMemo *mm = g->dp_memo;
  int slot = (int)((h >> 32) % DP_MEMO);
  pthread_mutex_lock(&mm->lock);
  bool hit = mm->e[slot].used && !memcmp(mm->e[slot].key, key, sizeof key);
  if (hit) *pl = mm->e[slot].pl;
  pthread_mutex_unlock(&mm->lock);
  if (hit) return;
  dp_plan(g, x, T, pl);
  pthread_mutex_lock(&mm->lock);
  memcpy(mm->e[slot].key, key, sizeof key);
  mm->e[slot].pl = *pl;
  mm->e[slot].used = true;
  pthread_mutex_unlock(&mm->lock);
}

/* A slot's state, a line of its own (two threads' flags and tags on one line moved it at
 * every task): whether a task holds it, and the A and B blocks its buffers hold (-1: none). */
typedef struct DpSlot {
  _Alignas(64) _Atomic int busy;
  int64_t tag[2];
} DpSlot;

typedef struct Dp {
  GemmKernels *g;
  const GemmArgs *x;
  DpPlan pl;
  int64_t ba, bb;
  uint32_t *a, *b;                    /* [ba][mp][kp][DP_MR], [bb][np][kp][DP_NR] */
  float *cw;                          /* pl.threads blocks of f32 C, each cw_len */
  int64_t cw_len;
  uint32_t *pk;                       /* pl.priv: pl.threads pairs of packed blocks, each pk_len */
  int64_t pk_len, pk_a;               /* pk_a: where B's block starts */
  struct DpSlot *slot;                /* pl.threads of them */
  int phase;                          /* 0: pack, 1: compute */
  _Atomic int stopped;
} Dp;

/* Row panel ip of A (column panel of B) of batch index bi, packed at o. */
static void dp_pack_a(const Dp *d, int64_t bi, int64_t ip, uint32_t *o) {
  const GemmArgs *x = d->x;
  hpack_pairs((const uint16_t *)x->a + bi * x->a_sb, x->a_sm, x->a_sk, ip * DP_MR, x->m, DP_MR, d->pl.kp, x->k, o);
}
static void dp_pack_b(const Dp *d, int64_t bi, int64_t jp, uint32_t *o) {
  const GemmArgs *x = d->x;
  hpack_pairs((const uint16_t *)x->b + bi * x->b_sb, x->b_sn, x->b_sk, jp * DP_NR, x->n, DP_NR, d->pl.kp, x->k, o);
}

static void dp_pack(Dp *d, int64_t t) {
  int64_t mp = d->pl.mp, np = d->pl.np, kp = d->pl.kp;
  if (t < d->ba * mp) dp_pack_a(d, t / mp, t % mp, d->a + t * kp * DP_MR);
  else t -= d->ba * mp, dp_pack_b(d, t / np, t % np, d->b + t * kp * DP_NR);
}

/* The kernels over `rows` rows of a column panel: the heights that add up to them. */
static void dp_rows(const GemmKernels *g, int64_t rows, int nv, int64_t kc, const uint32_t *a,
                    const uint32_t *b, float *c, int64_t ldc, int32_t beta) {
  for (int hi = 0; hi < DP_NH && rows > 0; hi++)
    for (int h = dp_heights[hi]; rows >= h; rows -= h) {
      ((DpFn)g->dpk[hi][nv - 1])(kc, a, b, c, ldc, beta);
      a += h, c += h * ldc;
    }
}

static void dp_task(void *ctx, int64_t t) {
  Dp *d = ctx;
  if (d->phase == 0) {
    dp_pack(d, t);
    return;
  }
  const GemmArgs *x = d->x;
  const DpPlan *pl = &d->pl;
  if (atomic_load(&d->stopped) || (x->stop && *x->stop)) {
    atomic_store(&d->stopped, 1);
    return;
  }
  int64_t per = pl->mblocks * pl->nblocks, bi = t / per, mb = t % per / pl->nblocks, nb = t % pl->nblocks;
  int64_t ip0 = mb * pl->mcp, ip1 = imin(pl->mp, ip0 + pl->mcp);
  int64_t jp0 = nb * pl->ncp, jp1 = imin(pl->np, jp0 + pl->ncp);
  int64_t i0 = ip0 * DP_MR, j0 = jp0 * DP_NR;
  int64_t rows = imin(x->m, ip1 * DP_MR) - i0, cols = imin(x->n, jp1 * DP_NR) - j0;
  int64_t ldc = (jp1 - jp0) * DP_NR + 16;      /* not a power of two: rows in other sets */
  /* the slot this thread took last, if free: its buffers are in this core's caches (taken
   * in turn, the threads swapped slots from call to call, and each call moved them) */
  static _Thread_local int last;
  int slot = last < pl->threads ? last : 0;
  while (atomic_exchange(&d->slot[slot].busy, 1)) slot = (slot + 1) % pl->threads;
  last = slot;
  float *cw = d->cw + slot * d->cw_len;
  uint16_t *C = (uint16_t *)x->c + bi * x->c_sb;
  if (x->accumulate)
    for (int64_t i = 0; i < rows; i++)
      hpack_widen(true, C + (i0 + i) * x->c_sm + j0 * x->c_sn, x->c_sn, cw + i * ldc, cols);
  /* the panels: all of a batch index's, or (pl->priv) the task's block's, ia and jb the
   * first of them */
  int64_t ia = 0, jb = 0;
  const uint32_t *A = d->a + (x->a_sb ? bi : 0) * pl->mp * pl->kp * DP_MR;
  const uint32_t *B = d->b + (x->b_sb ? bi : 0) * pl->np * pl->kp * DP_NR;
  if (pl->priv) {   /* the blocks in the slot's own buffers, packed unless already there */
    uint32_t *pa = d->pk + slot * d->pk_len, *pb = pa + d->pk_a;
    int64_t ta = (x->a_sb ? bi : 0) * pl->mblocks + mb, tb = (x->b_sb ? bi : 0) * pl->nblocks + nb;
    int64_t *tag = d->slot[slot].tag;
    if (tag[0] != ta)
      for (int64_t ip = ip0; ip < ip1; ip++) dp_pack_a(d, x->a_sb ? bi : 0, ip, pa + (ip - ip0) * pl->kp * DP_MR);
    if (tag[1] != tb)
      for (int64_t jp = jp0; jp < jp1; jp++) dp_pack_b(d, x->b_sb ? bi : 0, jp, pb + (jp - jp0) * pl->kp * DP_NR);
    tag[0] = ta, tag[1] = tb;
    A = pa, B = pb, ia = ip0, jb = jp0;
  }
  for (int64_t p0 = 0; p0 < pl->kp; p0 += pl->kc) {
    int64_t kc = imin(pl->kc, pl->kp - p0);
    int32_t beta = p0 > 0 || x->accumulate;
    for (int64_t jp = jp0; jp < jp1; jp++) {
      int nv = imin(x->n - jp * DP_NR, DP_NR) > 16 ? 2 : 1;
      for (int64_t ip = ip0; ip < ip1; ip++)
        dp_rows(d->g, imin(DP_MR, x->m - ip * DP_MR), nv, kc, A + ((ip - ia) * pl->kp + p0) * DP_MR,
                B + ((jp - jb) * pl->kp + p0) * DP_NR, cw + (ip - ip0) * DP_MR * ldc + (jp - jp0) * DP_NR, ldc, beta);
    }
  }
  for (int64_t i = 0; i < rows; i++)
    hpack_narrow(true, cw + i * ldc, C + (i0 + i) * x->c_sm + j0 * x->c_sn, x->c_sn, cols);
  atomic_store(&d->slot[slot].busy, 0);
}

static bool run_dp(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen) {
  Dp d = { .g = g, .x = x, .ba = x->a_sb ? x->batch : 1, .bb = x->b_sb ? x->batch : 1 };
  dp_plan_memo(g, x, pool_threads(pool), &d.pl);
  const DpPlan *pl = &d.pl;
  /* B's panels: aligned loads */
  size_t na = pl->priv ? 0 : ((size_t)(d.ba * pl->mp * pl->kp) * DP_MR + 15) & ~(size_t)15;
  size_t nb = pl->priv ? 0 : ((size_t)(d.bb * pl->np * pl->kp) * DP_NR + 15) & ~(size_t)15;
  d.cw_len = ((pl->mcp * DP_MR * (pl->ncp * DP_NR + 16)) + 15) & ~(int64_t)15;
  d.pk_a = (pl->mcp * DP_MR * pl->kp + 15) & ~(int64_t)15;                    /* B's block aligned too */
  d.pk_len = pl->priv ? d.pk_a + pl->ncp * DP_NR * pl->kp : 0;
  size_t slots = (size_t)pl->threads * (size_t)(d.cw_len + d.pk_len);
  bool own;
  uint32_t *ws = ws_take(g, (na + nb + slots) * 4 + (size_t)pl->threads * sizeof(DpSlot), &own);
  if (!ws) {
    snprintf(err, errlen, "gemm: out of memory packing bf16 operands");
    return false;
  }
  d.a = ws, d.b = ws + na, d.cw = (float *)(ws + na + nb);
  d.pk = (uint32_t *)(d.cw + pl->threads * d.cw_len);
  d.slot = (DpSlot *)(d.pk + pl->threads * d.pk_len);   /* 64-byte aligned: every part is */
  for (int i = 0; i < pl->threads; i++) atomic_init(&d.slot[i].busy, 0), d.slot[i].tag[0] = d.slot[i].tag[1] = -1;
  Pool *on = pl->threads > 1 ? pool : NULL;
  if (!pl->priv) dyn_parallel_for(on, d.ba * pl->mp + d.bb * pl->np, dp_task, &d);
  d.phase = 1;
  dyn_parallel_for(on, pl->tasks, dp_task, &d);
  ws_give(g, ws, own);
  if (atomic_load(&d.stopped)) {
    snprintf(err, errlen, "interrupted");
    return false;
  }
  return true;
}

static bool gemm_half_run(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen) {
  if (!jit_can_run(g->wide->jit)) {
    snprintf(err, errlen, "gemm: code for %s cannot run on this CPU", g->hw.name);
    return false;
  }
  if (!check_args(x, err, errlen)) return false;
  if (!x->batch || !x->m || !x->n) return true;
  if (!x->k) {
    if (!x->accumulate)
      for (int64_t bi = 0; bi < x->batch; bi++)
        for (int64_t i = 0; i < x->m; i++)
          for (int64_t j = 0; j < x->n; j++) ((uint16_t *)x->c)[bi * x->c_sb + i * x->c_sm + j * x->c_sn] = 0;
    return true;
  }
  return g->dp ? run_dp(g, x, pool, err, errlen) : run_widened(g, x, pool, err, errlen);
}

/* ---- the model ---- */

/* Seconds: the vdpbf16ps path's plan (dp_plan: packing, rounds of tasks, fork-joins), or
 * the f32 engine's plan on the widened copies plus the traffic of the copies (16-bit reads,
 * f32 writes, C's rounding) at the roofline's bandwidth. */
static double gemm_half_predict(GemmKernels *g, const GemmArgs *x, int nthreads) {
  if (x->batch <= 0 || x->m <= 0 || x->n <= 0 || x->k <= 0) return 0;
  int T = nthreads > 0 ? nthreads : 1;
  if (g->dp) {
    DpPlan pl;
    dp_plan(g, x, T, &pl);
    return pl.total;
  }
  double ba = x->a_sb ? (double)x->batch : 1, bb = x->b_sb ? (double)x->batch : 1;
  double ea = ba * (double)x->m * (double)x->k, eb = bb * (double)x->k * (double)x->n;
  double ec = (double)x->batch * (double)x->m * (double)x->n;
  GemmArgs y = widened(x, NULL, NULL, NULL);
  double bytes = (ea + eb) * 6 + ec * (4 + 2 + (x->accumulate ? 6 : 0));
  return gemm_predict(g->wide, &y, T) + cost_roofline(&g->hw, T, 0, bytes * 1e-9);
}

static void gemm_half_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out) {
  const HwModel *h = &g->hw;
  double peak = hw_ghz(h) * hw_fma_units(h) * 2.0 * (hw_vbits(h) / 32);
  if (g->dp)
    buf_printf(out, "gemm %s on %s: pairs along k summed by vdpbf16ps in %dx%d tiles, k blocks of "
               "%d pairs, C in f32 blocks of up to %dx%d rounded once to bf16\n"
               "  rate: %.1f GFLOP/s a core (the f32 FMA rate x bf16_per_fma = %.3g)\n",
               elem_name(g->elem), h->name, DP_MR, DP_NR, DP_KC, DP_MC_MAX * DP_MR, DP_NC,
               peak * hw_bf16_per_fma(h), hw_bf16_per_fma(h));
  if (g->dp && g->dpsec[0][1] > 0)
    buf_printf(out, "  calibrated: %.1f GFLOP/s a core for the %dx%d tile%s\n",
               4.0 * DP_MR * DP_NR / g->dpsec[0][1] * 1e-9, DP_MR, DP_NR,
               gemm_slow(g->wide) != 1 ? " (measured in L1, scaled to the f32 engine's sustained rate)" : "");
  if (!g->dp)
    buf_printf(out, "gemm %s on %s: operands widened to f32 as they are copied, the f32 engine "
               "below, C rounded once to %s\n", elem_name(g->elem), h->name, elem_name(g->elem));
  if (g->dp && x->batch > 0 && x->m > 0 && x->n > 0 && x->k > 0) {
    DpPlan pl;
    dp_plan(g, x, nthreads > 0 ? nthreads : 1, &pl);
    buf_printf(out, "  %lld tasks of up to %lldx%lld, k blocks of %lld pairs, on %d thread%s, %s: packing %.3g us, "
               "sums %.3g us, fork-joins %.3g us", (long long)pl.tasks, (long long)(pl.mcp * DP_MR),
               (long long)(pl.ncp * DP_NR), (long long)pl.kc, pl.threads, pl.threads == 1 ? "" : "s",
               pl.priv ? "each packing its blocks" : "packed first", pl.pack_s * 1e6, pl.comp_s * 1e6, pl.sync_s * 1e6);
    if (pl.move_s > 0) buf_printf(out, ", panels moving between cores %.3g us", pl.move_s * 1e6);
    buf_printf(out, "\n");
  }
  if (x->batch > 0 && x->m > 0 && x->n > 0 && x->k > 0)
    buf_printf(out, "  predicted %.3g ms on %d thread%s\n", gemm_half_predict(g, x, nthreads) * 1e3,
               nthreads, nthreads == 1 ? "" : "s");
  if (!g->dp) {
    GemmArgs y = widened(x, NULL, NULL, NULL);
    gemm_describe(g->wide, &y, nthreads, out);
  }
}
