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
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

/* The bf16 micro-kernel's tile: DP_MR rows by DP_NR columns (two zmm of 16 f32 lanes):
 * 24 accumulators, two vectors of B and a broadcast of A in 32 registers, and 24 independent
 * sums cover vdpbf16ps's latency (6 cycles on Zen 4) at two a cycle.  DP_KC pairs of k a block
 * (DP_MR, DP_NR in gemm_int.h) keep the kernel's B panel (DP_KC x 32 pairs, 24 KiB) in L1; DP_MC rows the A block
 * (96 x 192 pairs, 72 KiB) in L2, and DP_NC columns the task's f32 C block. */
#define DP_KC 192
#define DP_MC (8 * DP_MR)
#define DP_NC (16 * DP_NR)
typedef void (*DpFn)(int64_t kp, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc,
                     int32_t beta);

/* ---- the conversions (C, vectorised by the compiler) ---- */

static inline float bf16_widen(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* To nearest even, NaNs kept quiet with their top payload bits (as half_bf16_from). */
static inline uint16_t bf16_narrow(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* f16 by integer operations the compiler vectorises (without F16C, _Float16's conversions
 * are a library call an element, which made copying cost five times the f32 product).
 * Widening moves the exponent and re-biases it; subnormals are scaled by a float
 * subtraction, infinities and NaNs get the f32 exponent. */
static inline float f16_widen(uint16_t h) {
  uint32_t u = (uint32_t)(h & 0x7fff) << 13, e = u & (0x7c00u << 13);
  float f;
  u += (127 - 15) << 23;
  if (e == 0x7c00u << 13) u += (128 - 16) << 23;        /* infinity or NaN */
  memcpy(&f, &u, 4);
  if (e == 0) {                                          /* zero or subnormal */
    u += 1 << 23;
    memcpy(&f, &u, 4);
    f -= 6.103515625e-05f;                               /* 2^-14 */
  }
  memcpy(&u, &f, 4);
  u |= (uint32_t)(h & 0x8000) << 16;
  memcpy(&f, &u, 4);
  return f;
}

/* To nearest even: above the largest finite f16 an infinity (a NaN stays a quiet NaN),
 * below the smallest normal an addition that lets the FPU round the subnormal, else the
 * mantissa rounded by an addition of half an ulp less one, plus its last kept bit. */
static inline uint16_t f16_narrow(float f) {
  uint32_t u, sign;
  memcpy(&u, &f, 4);
  sign = u & 0x80000000u;
  u ^= sign;
  uint16_t o;
  if (u >= (127u + 16) << 23) {
    o = u > 255u << 23 ? 0x7e00 : 0x7c00;
  } else if (u < 113u << 23) {
    const uint32_t magic = ((127u - 15) + (23 - 10) + 1) << 23;
    float x, m;
    memcpy(&x, &u, 4);
    memcpy(&m, &magic, 4);
    x += m;
    memcpy(&u, &x, 4);
    o = (uint16_t)(u - magic);
  } else {
    uint32_t odd = (u >> 13) & 1;
    u += ((uint32_t)(15 - 127) << 23) + 0xfff + odd;
    o = (uint16_t)(u >> 13);
  }
  return (uint16_t)(o | sign >> 16);
}

static void widen_row(bool bf, const uint16_t *s, int64_t ss, float *d, int64_t n) {
  if (bf)
    for (int64_t i = 0; i < n; i++) d[i] = bf16_widen(s[i * ss]);
  else
    for (int64_t i = 0; i < n; i++) d[i] = f16_widen(s[i * ss]);
}

static void narrow_row(bool bf, const float *s, uint16_t *d, int64_t ds, int64_t n) {
  if (bf)
    for (int64_t i = 0; i < n; i++) d[i * ds] = bf16_narrow(s[i]);
  else
    for (int64_t i = 0; i < n; i++) d[i * ds] = f16_narrow(s[i]);
}

/* ---- the vdpbf16ps micro-kernel ---- */

/* void dp(i64 kp, ptr a, ptr b, ptr c, i64 ldc, i32 beta): c[r][j] (+)= the sum over kp
 * pairs p of a[p][r] . b[p][j], a's pairs DP_MR a step, b's DP_NR; C is a full f32 tile. */
static void emit_dp(LLVMContextRef cx, LLVMModuleRef m, const char *name) {
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
  for (int r = 0; r < DP_MR; r++)
    for (int v = 0; v < 2; v++) {
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
  for (int r = 0; r < DP_MR; r++)
    for (int v = 0; v < 2; v++) acc[r][v] = LLVMBuildPhi(b, vf, "");
  LLVMValueRef bv[2];
  for (int v = 0; v < 2; v++) {
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, p, LLVMConstInt(i64, DP_NR, 0), ""),
                                    LLVMConstInt(i64, (uint64_t)v * 16, 0), "");
    LLVMValueRef l = LLVMBuildLoad2(b, vi, LLVMBuildGEP2(b, i32, pb, &off, 1, ""), "");
    LLVMSetAlignment(l, 64);
    bv[v] = LLVMBuildBitCast(b, l, vbf, "");
  }
  LLVMValueRef next[DP_MR][2];
  for (int r = 0; r < DP_MR; r++) {
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, p, LLVMConstInt(i64, DP_MR, 0), ""),
                                    LLVMConstInt(i64, (uint64_t)r, 0), "");
    LLVMValueRef s = LLVMBuildLoad2(b, i32, LLVMBuildGEP2(b, i32, pa, &off, 1, ""), "");
    LLVMValueRef sv = LLVMBuildInsertElement(b, LLVMGetPoison(vi), s, LLVMConstInt(i32, 0, 0), "");
    sv = LLVMBuildShuffleVector(b, sv, LLVMGetPoison(vi), LLVMConstNull(vi), "");
    LLVMValueRef av = LLVMBuildBitCast(b, sv, vbf, "");
    for (int v = 0; v < 2; v++) {
      LLVMValueRef ca[3] = { acc[r][v], av, bv[v] };
      next[r][v] = LLVMBuildCall2(b, dpt, dp, ca, 3, "");
    }
  }
  LLVMValueRef p1 = LLVMBuildAdd(b, p, LLVMConstInt(i64, 1, 0), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, p1, kp, ""), loop, done);
  LLVMAddIncoming(p, (LLVMValueRef[]){ LLVMConstInt(i64, 0, 0), p1 },
                  (LLVMBasicBlockRef[]){ entry, loop }, 2);
  for (int r = 0; r < DP_MR; r++)
    for (int v = 0; v < 2; v++)
      LLVMAddIncoming(acc[r][v], (LLVMValueRef[]){ init[r][v], next[r][v] },
                      (LLVMBasicBlockRef[]){ entry, loop }, 2);
  LLVMPositionBuilderAtEnd(b, done);
  for (int r = 0; r < DP_MR; r++)
    for (int v = 0; v < 2; v++) LLVMSetAlignment(LLVMBuildStore(b, next[r][v], cptr[r][v]), 4);
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
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
  if (g->dp && jit_can_run(wide->jit)) {
    char name[48];
    snprintf(name, sizeof name, "gemm_bf16_dp%dx%d", DP_MR, DP_NR);
    LLVMContextRef cx = LLVMContextCreate();
    LLVMModuleRef m = jit_module_new(wide->jit, cx, "gemm_bf16");
    emit_dp(cx, m, name);
    bool ok = jit_add_modules(wide->jit, &m, 1, GEMM_PIPELINE, err, errlen);
    LLVMContextDispose(cx);
    if (!ok || !(g->dpk = jit_lookup(wide->jit, name, err, errlen))) {
      gemm_free(g);
      return NULL;
    }
    g->nfuncs = 1;
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
  snprintf(name, sizeof name, "gemm_bf16_dp%dx%d", DP_MR, DP_NR);
  emit_dp(cx, m, name);
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
    narrow_row(w->bf, w->c + t * x->n, C + bi * x->c_sb + i * x->c_sm, x->c_sn, x->n);
    return;
  }
  if (t < w->rows_a) {
    int64_t bi = t / x->m, i = t % x->m;
    widen_row(w->bf, A + bi * x->a_sb + i * x->a_sm, x->a_sk, w->a + t * x->k, x->k);
  } else if ((t -= w->rows_a) < w->rows_b) {
    int64_t bi = t / x->k, kk = t % x->k;
    widen_row(w->bf, B + bi * x->b_sb + kk * x->b_sk, x->b_sn, w->b + t * x->n, x->n);
  } else {
    t -= w->rows_b;
    int64_t bi = t / x->m, i = t % x->m;
    widen_row(w->bf, C + bi * x->c_sb + i * x->c_sm, x->c_sn, w->c + t * x->n, x->n);
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
 * DP_MC x DP_NC of C, each summing in an f32 block of its own over k blocks of DP_KC pairs
 * and rounding it into C at the end. */
typedef struct Dp {
  GemmKernels *g;
  const GemmArgs *x;
  int64_t kp, mp, np;                 /* pairs, row panels, column panels */
  int64_t ba, bb;
  uint32_t *a, *b;                    /* [ba][mp][kp][DP_MR], [bb][np][kp][DP_NR] */
  int64_t mblocks, nblocks;
  int phase;                          /* 0: pack, 1: compute */
  _Atomic int stopped;
} Dp;

/* One panel of w lines (A's rows or B's columns) from line l0 of `lines`, each `ls` apart
 * with k stride sk, as kp pairs of w: o[p][l]; lines past the end are zeros.  Written in
 * order, pair by pair: a B with unit column stride is then read along its rows. */
static void pack_panel(const uint16_t *s, int64_t ls, int64_t sk, int64_t l0, int64_t lines, int w,
                       int64_t kp, int64_t k, uint32_t *o) {
  int have = (int)imax(0, imin(w, lines - l0));
  for (int64_t p = 0; p < kp; p++, o += w) {
    const uint16_t *r = s + l0 * ls + 2 * p * sk;
    if (2 * p + 1 < k)
      for (int l = 0; l < have; l++) o[l] = r[l * ls] | (uint32_t)r[l * ls + sk] << 16;
    else
      for (int l = 0; l < have; l++) o[l] = r[l * ls];
    for (int l = have; l < w; l++) o[l] = 0;
  }
}

static void dp_pack(Dp *d, int64_t t) {
  const GemmArgs *x = d->x;
  if (t < d->ba * d->mp)
    pack_panel((const uint16_t *)x->a + t / d->mp * x->a_sb, x->a_sm, x->a_sk, t % d->mp * DP_MR, x->m,
               DP_MR, d->kp, x->k, d->a + t * d->kp * DP_MR);
  else
    t -= d->ba * d->mp, pack_panel((const uint16_t *)x->b + t / d->np * x->b_sb, x->b_sn, x->b_sk,
                                   t % d->np * DP_NR, x->n, DP_NR, d->kp, x->k, d->b + t * d->kp * DP_NR);
}

static void dp_task(void *ctx, int64_t t) {
  Dp *d = ctx;
  if (d->phase == 0) {
    dp_pack(d, t);
    return;
  }
  const GemmArgs *x = d->x;
  if (atomic_load(&d->stopped) || (x->stop && *x->stop)) {
    atomic_store(&d->stopped, 1);
    return;
  }
  int64_t per = d->mblocks * d->nblocks, bi = t / per, mb = t % per / d->nblocks, nb = t % d->nblocks;
  int64_t ip0 = mb * (DP_MC / DP_MR), ip1 = imin(d->mp, ip0 + DP_MC / DP_MR);
  int64_t jp0 = nb * (DP_NC / DP_NR), jp1 = imin(d->np, jp0 + DP_NC / DP_NR);
  int64_t ldc = (jp1 - jp0) * DP_NR, i0 = ip0 * DP_MR, j0 = jp0 * DP_NR;
  int64_t rows = imin(x->m, ip1 * DP_MR) - i0, cols = imin(x->n, jp1 * DP_NR) - j0;
  float *cw = xmalloc((size_t)((ip1 - ip0) * DP_MR * ldc) * sizeof(float));
  bool bf = true;
  uint16_t *C = (uint16_t *)x->c + bi * x->c_sb;
  if (x->accumulate)
    for (int64_t i = 0; i < rows; i++) widen_row(bf, C + (i0 + i) * x->c_sm + j0 * x->c_sn, x->c_sn, cw + i * ldc, cols);
  const uint32_t *A = d->a + (x->a_sb ? bi : 0) * d->mp * d->kp * DP_MR;
  const uint32_t *B = d->b + (x->b_sb ? bi : 0) * d->np * d->kp * DP_NR;
  DpFn uk = (DpFn)d->g->dpk;
  for (int64_t p0 = 0; p0 < d->kp; p0 += DP_KC) {
    int64_t kc = imin(DP_KC, d->kp - p0);
    int32_t beta = p0 > 0 || x->accumulate;
    for (int64_t jp = jp0; jp < jp1; jp++)
      for (int64_t ip = ip0; ip < ip1; ip++)
        uk(kc, A + (ip * d->kp + p0) * DP_MR, B + (jp * d->kp + p0) * DP_NR,
           cw + (ip - ip0) * DP_MR * ldc + (jp - jp0) * DP_NR, ldc, beta);
  }
  for (int64_t i = 0; i < rows; i++) narrow_row(bf, cw + i * ldc, C + (i0 + i) * x->c_sm + j0 * x->c_sn, x->c_sn, cols);
  free(cw);
}

static bool run_dp(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen) {
  Dp d = { g, x, (x->k + 1) / 2, cdiv(x->m, DP_MR), cdiv(x->n, DP_NR), x->a_sb ? x->batch : 1,
           x->b_sb ? x->batch : 1, NULL, NULL, 0, 0, 0, 0 };
  size_t na = ((size_t)(d.ba * d.mp * d.kp) * DP_MR + 15) & ~(size_t)15;   /* B's panels: aligned loads */
  bool own;
  uint32_t *ws = ws_take(g, (na + (size_t)(d.bb * d.np * d.kp) * DP_NR) * 4, &own);
  if (!ws) {
    snprintf(err, errlen, "gemm: out of memory packing bf16 operands");
    return false;
  }
  d.a = ws, d.b = ws + na;
  dyn_parallel_for(pool, d.ba * d.mp + d.bb * d.np, dp_task, &d);
  d.phase = 1;
  d.mblocks = cdiv(x->m, DP_MC);
  d.nblocks = cdiv(x->n, DP_NC);
  dyn_parallel_for(pool, x->batch * d.mblocks * d.nblocks, dp_task, &d);
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

/* Seconds: the sums at the 16-bit rate of the threads' cores, or the f32 engine's plan on
 * the widened copies, plus the traffic of the copies (16-bit reads, packed or f32 writes,
 * C's f32 block and its rounding) at the roofline's bandwidth. */
static double gemm_half_predict(GemmKernels *g, const GemmArgs *x, int nthreads) {
  if (x->batch <= 0 || x->m <= 0 || x->n <= 0 || x->k <= 0) return 0;
  int T = nthreads > 0 ? nthreads : 1;
  double ba = x->a_sb ? (double)x->batch : 1, bb = x->b_sb ? (double)x->batch : 1;
  double ea = ba * (double)x->m * (double)x->k, eb = bb * (double)x->k * (double)x->n;
  double ec = (double)x->batch * (double)x->m * (double)x->n;
  double flops = 2.0 * ec * (double)x->k;
  if (g->dp) {
    double core = hw_ghz(&g->hw) * 1e9 * hw_fma_units(&g->hw) * 2.0 * (hw_vbits(&g->hw) / 32) *
                  hw_bf16_per_fma(&g->hw);
    double bytes = (ea + eb) * 6 + ec * (4 + 2 + (x->accumulate ? 6 : 0));
    return flops / (core * T) + cost_roofline(&g->hw, T, 0, bytes * 1e-9);
  }
  GemmArgs y = widened(x, NULL, NULL, NULL);
  double bytes = (ea + eb) * 6 + ec * (4 + 2 + (x->accumulate ? 6 : 0));
  return gemm_predict(g->wide, &y, T) + cost_roofline(&g->hw, T, 0, bytes * 1e-9);
}

static void gemm_half_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out) {
  const HwModel *h = &g->hw;
  double peak = hw_ghz(h) * hw_fma_units(h) * 2.0 * (hw_vbits(h) / 32);
  if (g->dp)
    buf_printf(out, "gemm %s on %s: pairs along k summed by vdpbf16ps in %dx%d tiles, k blocks of "
               "%d pairs, C in f32 blocks of %dx%d rounded once to bf16\n"
               "  rate: %.1f GFLOP/s a core (the f32 FMA rate x bf16_per_fma = %.3g)\n",
               elem_name(g->elem), h->name, DP_MR, DP_NR, DP_KC, DP_MC, DP_NC,
               peak * hw_bf16_per_fma(h), hw_bf16_per_fma(h));
  else
    buf_printf(out, "gemm %s on %s: operands widened to f32 as they are copied, the f32 engine "
               "below, C rounded once to %s\n", elem_name(g->elem), h->name, elem_name(g->elem));
  if (x->batch > 0 && x->m > 0 && x->n > 0 && x->k > 0)
    buf_printf(out, "  predicted %.3g ms on %d thread%s\n", gemm_half_predict(g, x, nthreads) * 1e3,
               nthreads, nthreads == 1 ? "" : "s");
  if (!g->dp) {
    GemmArgs y = widened(x, NULL, NULL, NULL);
    gemm_describe(g->wide, &y, nthreads, out);
  }
}
