/* gemm_emit.c -- the contraction engine's code generation: the micro-kernels (register
 * tiles, plain, packing B as they go, or fetching the next strip), the packing kernels for
 * A, B and B^T, the row-streaming and the inner-product kernels, as LLVM IR with explicit
 * vectors, spread over modules that compile in parallel (gemm_emit_all) and added to the
 * JIT (gemm_compile_part).  What to emit (the tiles, their heights and accumulator sets) is
 * gemm_model.c's; see gemm.c's note. */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"
#include "irb.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>

/* ---- code generation ---- */

typedef struct CG {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef t_el, t_vec, t_mask, t_i64, t_i32, t_ptr, t_void;
  int W, esize;
  const HwModel *hw;              /* the tiles' L1 (uk_group_rows) */
  LLVMValueRef fma, mload, mstore, prefetch;
  LLVMTypeRef fma_t, mload_t, mstore_t, prefetch_t;
} CG;

static LLVMValueRef intrinsic(CG *g, const char *name, LLVMTypeRef *ov, int nov,
                              LLVMTypeRef *ft) {
  return irb_intrinsic(g->mod, name, ov, nov, ft);
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
  irb_fn_attr(f, "nounwind");
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

/* What a k step of emit_uk's tile needs beside its place in k. */
typedef struct UkStep {
  int h, v;
  bool pack, pfn;
  LLVMValueRef *mask, *roff, *acc;
  LLVMValueRef b_rs, pf, pf_rs, pf_l0, pf_l1, msk, pf_sh;
} UkStep;

/* One k step: k its index, bu B's row, au A's column, ku where the packing kernel stores
 * the row; B's row loaded and, with `extras`, packed, or the row ahead asked for, or a line
 * of the next strip fetched; then the FMAs of rows [r0, r1) into accumulator set `set`. */
static void uk_step(CG *g, const UkStep *e, LLVMValueRef k, LLVMValueRef bu, LLVMValueRef au,
                    LLVMValueRef ku, int set, int r0, int r1, bool extras) {
  LLVMBuilderRef B = g->b;
  int v = e->v;
  LLVMValueRef bv[MAX_V];
  for (int j = 0; j < v; j++) bv[j] = load_vec(g, gep(g, bu, ci64(g, (int64_t)j * g->W)), e->mask[j]);
  if (extras && e->pack) {             /* the row, zeros past n_rem, into the panel */
    for (int j = 0; j < v; j++)
      LLVMSetAlignment(LLVMBuildStore(B, bv[j], gep(g, ku, ci64(g, (int64_t)j * g->W))), (unsigned)(g->W * g->esize));
  }
  if (extras && !e->pfn) {             /* a row ahead asked for, every line it touches */
    LLVMValueRef ahead = gep(g, bu, LLVMBuildMul(B, e->b_rs, ci64(g, PACK_AHEAD), ""));
    int row_el = v * g->W, n = gemm_ahead_lines(row_el * g->esize, e->pack);
    for (int c = 0; c < n; c++) {
      LLVMValueRef args[] = { gep(g, ahead, ci64(g, gemm_ahead_elem(c, row_el, g->esize))), ci32(g, 0), ci32(g, 3),
                              ci32(g, 1) };
      LLVMBuildCall2(B, g->prefetch_t, g->prefetch, args, 4, "");
    }
  }
  if (extras && e->pfn) {              /* line l0 + k>>sh of the next strip, every 2^sh steps */
    LLVMValueRef line = LLVMBuildAdd(B, e->pf_l0, LLVMBuildLShr(B, k, e->pf_sh, ""), "");
    LLVMValueRef go = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, k, e->msk, ""), ci64(g, 0), ""),
                                   LLVMBuildICmp(B, LLVMIntSLT, line, e->pf_l1, ""), "");
    LLVMBasicBlockRef join = if_begin(g, go);
    int lpr = (v * g->W * g->esize + 63) / 64;      /* run_block's count too */
    LLVMValueRef row = LLVMBuildUDiv(B, line, ci64(g, lpr), ""),
                 col = LLVMBuildURem(B, line, ci64(g, lpr), "");
    LLVMValueRef at = gep(g, gep(g, e->pf, LLVMBuildMul(B, row, e->pf_rs, "")),
                          LLVMBuildMul(B, col, ci64(g, 64 / g->esize), ""));
    LLVMValueRef args[] = { at, ci32(g, 0), ci32(g, 2), ci32(g, 1) };
    LLVMBuildCall2(B, g->prefetch_t, g->prefetch, args, 4, "");
    if_end(g, join);
  }
  for (int i = r0; i < r1; i++) {
    LLVMValueRef sv = splat(g, LLVMBuildLoad2(B, g->t_el, gep(g, au, e->roff[i]), ""));
    for (int j = 0; j < v; j++) {
      LLVMValueRef slot = e->acc[(set * e->h + i) * v + j];
      LLVMValueRef args[] = { sv, bv[j], LLVMBuildLoad2(B, g->t_vec, slot, "") };
      LLVMBuildStore(B, LLVMBuildCall2(B, g->fma_t, g->fma, args, 3, ""), slot);
    }
  }
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
 * FMA latency of short tiles; the sets are summed at the end.  Every step asks for the
 * lines of B's row k + PACK_AHEAD: B read in place walks rows far apart, a new page
 * every row or few, where the hardware prefetchers stop.  On Zen 5 that did not help; on
 * an Emerald Rapids guest, 1 thread, f32, the plain kernel with it against without, in
 * one process, alternately 15 times each, minimum: 3 x 768 x 768 1.15-1.21x as fast,
 * 8 x 768 x 768 1.24-1.28x, 3 x 1000 x 1000 1.13-1.17x; 2 threads 1.16x (7 x 768 x 768,
 * 3 x 1000 x 1000); packed B (1024^3, 512 x 768 x 3072, 77 x 4096 x 4096) 0.98-1.02x.
 * The packing variant (pack: one a family, height mr, masked) takes one more argument,
 * ptr packed: it reads B in place (b_rs its row stride) and also stores each row of the
 * strip, zeros past n_rem, to packed[k*nr + j].  run_block gives it the first tile of
 * each strip, so packing B needs no pass of its own and its reads from memory overlap that tile's FMAs (77 x 4096 x 4096 on 2 threads,
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
 * 9.4 -> 8.9 ms.
 * A tile of more rows than one L1 set keeps beside a line of B (14 on an 8-way L1:
 * uk_group_rows), but for the packing variant, also has a grouped loop, run when beta &
 * UK_GROUP_A: A read in place with rows a multiple of
 * 4 KiB apart puts the tile's rows in one set, and a step that reads all 14 of them evicts
 * each line before its next step comes back to it, every broadcast a miss.  The grouped
 * loop takes a line's worth of steps (64 bytes of each row) for the first group of rows,
 * then the same steps for the second, B's rows loaded again from L1, so that one set holds
 * a group's lines and a line of B at a time; the steps past the last whole line go through
 * the main loop.  One core of a Zen 4 guest, a C loop of intrinsics in the two orders, 14
 * x 32 tiles over A's 252 rows 1024 or 1040 floats apart from L2 (kc 256, packed B):
 * plain 92 / 113 GFLOP/s, grouped 116 / 116. */
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
  UkStep st = { h, v, pack, pfn, mask, roff, acc, b_rs, pf, pf_rs, pf_l0, pf_l1, msk, pf_sh };
  /* the grouped loop's rows a group (0: none) and its step counter */
  int gr = kind != UK_PACK && g->hw ? uk_group_rows(g->hw, h, ks) : 0;
  LLVMValueRef uv = gr ? LLVMBuildAlloca(B, g->t_i64, "u") : NULL;
  LLVMBasicBlockRef pick = gr ? LLVMAppendBasicBlockInContext(g->ctx, fn, "group.pick") : mcond;
  /* On request (beta & UK_PREFETCH_C), fetch the C tile for writing now: it is needed after
   * the k loop, by which time a miss to L2 or L3 has been served (C rows a power of two
   * apart never stay in L1).  Prefetches never fault, so rows past m_rem need no care. */
  LLVMValueRef crow[MAX_MR];
  for (int i = 0; i < h; i++) crow[i] = gep(g, c, LLVMBuildMul(B, c_rs, ci64(g, i), ""));
  LLVMBasicBlockRef pfc = LLVMAppendBasicBlockInContext(g->ctx, fn, "prefetch_c");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, beta, ci32(g, UK_PREFETCH_C), ""), ci32(g, 0), ""),
                  pfc, pick);
  LLVMPositionBuilderAtEnd(B, pfc);
  for (int i = 0; i < h; i++)
    for (int l = 0; l < v * g->W * g->esize; l += 64) {
      LLVMValueRef args[] = { gep(g, crow[i], ci64(g, l / g->esize)), ci32(g, 1), ci32(g, 3),
                              ci32(g, 1) };
      LLVMBuildCall2(B, g->prefetch_t, g->prefetch, args, 4, "");
    }
  LLVMBuildBr(B, pick);

  /* On request (beta & UK_GROUP_A), while a line's k steps remain: the rows in groups of
   * gr, each group through all of those steps before the next, B's rows loaded again for
   * each group (from L1, just read).  The rest of k goes through the main loop. */
  if (gr) {
    LLVMBasicBlockRef gcond = LLVMAppendBasicBlockInContext(g->ctx, fn, "group.cond"),
                      gbody = LLVMAppendBasicBlockInContext(g->ctx, fn, "group.body");
    LLVMPositionBuilderAtEnd(B, pick);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, beta, ci32(g, UK_GROUP_A), ""), ci32(g, 0), ""),
                    gcond, mcond);
    LLVMPositionBuilderAtEnd(B, gcond);
    int64_t L = 64 / g->esize;
    LLVMValueRef k = LLVMBuildLoad2(B, g->t_i64, kv, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, k, ci64(g, L), ""), kc, ""), gbody, mcond);
    LLVMPositionBuilderAtEnd(B, gbody);
    LLVMValueRef pb = LLVMBuildLoad2(B, g->t_ptr, pbv, ""), pa = LLVMBuildLoad2(B, g->t_ptr, pav, "");
    for (int r0 = 0; r0 < h; r0 += gr) {
      CgLoop Lu;
      LLVMValueRef u = loop_begin(g, &Lu, uv, ci64(g, 0), ci64(g, L), ci64(g, 1));
      uk_step(g, &st, LLVMBuildAdd(B, k, u, ""), gep(g, pb, LLVMBuildMul(B, b_rs, u, "")),
              gep(g, pa, LLVMBuildMul(B, a_cs, u, "")), NULL, 0, r0, r0 + gr < h ? r0 + gr : h, r0 == 0);
      loop_end(g, &Lu);
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, k, ci64(g, L), ""), kv);
    LLVMBuildStore(B, gep(g, pa, LLVMBuildMul(B, a_cs, ci64(g, L), "")), pav);
    LLVMBuildStore(B, gep(g, pb, LLVMBuildMul(B, b_rs, ci64(g, L), "")), pbv);
    LLVMBuildBr(B, gcond);
  }

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
      LLVMValueRef ku = pack ? gep(g, pkk, ci64(g, (int64_t)u * v * g->W)) : NULL;
      uk_step(g, &st, LLVMBuildAdd(B, k, ci64(g, u), ""), bu, au, ku, u % ks, 0, h, true);
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
  /* C = acc streamed past the caches (beta & UK_STREAM_C without its add bit; c_streamed
   * in gemm_int.h says when), where C and its rows start on 64-byte lines: stores that need no
   * read for ownership.  Unmasked kernels only (the full tiles). */
  LLVMBasicBlockRef pickc = LLVMAppendBasicBlockInContext(g->ctx, fn, "pickc");
  if (!masked) {
    LLVMBasicBlockRef ntb = LLVMAppendBasicBlockInContext(g->ctx, fn, "stream");
    LLVMValueRef want = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, beta, ci32(g, UK_STREAM_C | 1), ""), ci32(g, UK_STREAM_C), "");
    LLVMValueRef odd = LLVMBuildAnd(B, LLVMBuildOr(B, LLVMBuildPtrToInt(B, c, g->t_i64, ""), LLVMBuildMul(B, c_rs, ci64(g, g->esize), ""), ""), ci64(g, 63), "");
    LLVMBuildCondBr(B, LLVMBuildAnd(B, want, LLVMBuildICmp(B, LLVMIntEQ, odd, ci64(g, 0), ""), ""), ntb, pickc);
    LLVMPositionBuilderAtEnd(B, ntb);
    unsigned kind = LLVMGetMDKindIDInContext(g->ctx, "nontemporal", 11);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(g->t_i32, 1, 0));
    for (int i = 0; i < h; i++)
      for (int j = 0; j < v; j++) {
        LLVMValueRef sto = LLVMBuildStore(B, sum[i * v + j], gep(g, crow[i], ci64(g, (int64_t)j * g->W)));
        LLVMSetAlignment(sto, (unsigned)(g->W * g->esize));
        LLVMSetMetadata(sto, kind, LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, &one, 1)));
      }
    LLVMBuildBr(B, ret);
  } else {
    LLVMBuildBr(B, pickc);
  }
  LLVMPositionBuilderAtEnd(B, pickc);
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

/* Emit every function of the set, spread over nmod modules (each in its own context) so
 * they compile in parallel: each function goes to the module with the least work so far,
 * work estimated as the instructions it will have (code generation time follows them).
 * Returns how many functions. */
int gemm_emit_all(GemmKernels *g, LLVMContextRef *ctx, LLVMModuleRef *mod, int nmod, int what) {
  CG cg[MAX_MODS];
  double load[MAX_MODS] = { 0 };
  for (int i = 0; i < nmod; i++) {
    cg_init(&cg[i], ctx[i], mod[i], g->elem, g->W);
    cg[i].hw = &g->hw;
  }
  char name[96];
  int n = 0;
#define LIGHTEST(w) ({ int k_ = 0; for (int i_ = 1; i_ < nmod; i_++) if (load[i_] < load[k_]) k_ = i_; load[k_] += (w); &cg[k_]; })
  for (int fi = 0; fi < g->nfam; fi++) {
    if (!(what & (fi < EAGER_FAM ? EMIT_TILES : EMIT_FAMX))) continue;
    Family *f = &g->fam[fi];
    for (int h = f->mr; h >= 1; h--) {        /* biggest first balances best */
      if (!f->has[h]) continue;
      for (int m = 0; m < (g->cheap_masks ? 1 : 2); m++) {
        bool masked = m == 0;
        if (h == f->mr && !masked) continue;   /* the fetching kernel's */
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
      emit_uk(LIGHTEST(step * (ks + (ks > 1)) * 1.2 + h * f->v * (5 + ks) + 6 * h + 20), name, h, f->v, ks, false, UK_PF);
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
    packbt_name(name, sizeof name, g);
    emit_packbt(LIGHTEST(4.0 * g->W * 4), name);
    n += 3;
  }
  for (int h = 1; h <= ROWS_MAX && (what & EMIT_ROWS); h++, n++) {
    rows_name(name, sizeof name, g, h);
    emit_rows(LIGHTEST(10.0 * h * ROWS_U + 40), name, h);
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

/* Emit the functions `what` names into modules that compile in parallel and add them to
 * the JIT: two modules per CPU (up to MAX_MODS), which jit_add_modules hands to one thread
 * per CPU as each finishes, evening out the estimate's errors.  Returns how many functions,
 * 0 on failure. */
int gemm_compile_part(GemmKernels *g, int what, const char *prefix, char *err, size_t errlen) {
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
  int n = gemm_emit_all(g, ctx, mod, nmod, what);
  bool ok = jit_add_modules(g->jit, mod, nmod, GEMM_PIPELINE, err, errlen);
  for (int i = 0; i < nmod; i++) LLVMContextDispose(ctx[i]);
  return ok ? n : 0;
}
