/* cpu.c -- the compiled CPU back end: fused kernels to LLVM IR, JIT-compiled once per
 * function, run on any shape.
 *
 * Every kernel becomes one function `void k(KCtx *c, int64_t lo, int64_t hi)` that runs the
 * iterations [lo, hi) of its parallel axis (the row of a row-wise kernel, else the first
 * output axis); the runtime splits that axis into tasks on the thread pool.  Extents, sizes
 * and strides are read from the context, so nothing in the code depends on a shape.  The
 * innermost loops are written so that LLVM's vectoriser takes them: unit-stride last axes
 * (dyn's own tensors are C-contiguous; an input, read in place, may have any strides: see
 * "strided inputs" below), branch-free where(...) (both sides
 * are computed with their loads clamped into range, then selected), an inline polynomial
 * exp for f32, and reassociable reductions.  Contractions (a sum of a product of two
 * tensors that each miss one output axis) go to the packed micro-kernel engine of gemm.c.
 *
 * Errors are detected, not explained: a checked access out of range or an integer division
 * by zero sets a flag, and the runtime then re-runs the program on the reference evaluator,
 * which stops at the same place with the exact message.
 *
 * This file is the code generation, up to a module of a program's kernels
 * (cpu_build_module); the back end's life (compile, free, :code, calibration) is
 * cpu_compile.c, the run-time cpu_rt.c, the :sched text cpu_sched.c, and what they share
 * cpu_int.h.
 */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"
#include "cpu_reduce.h"
#include "cpu_scan.h"
#include "gemm.h"
#include "irb.h"
#include "jit.h"
#include "pool.h"
#include "vmath.h"

#include <llvm-c/Core.h>
#include <llvm/Config/llvm-config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- code generation ---- */

typedef struct G {
  LLVMContextRef cx;
  LLVMModuleRef m;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i8, i32, i64, f32, f64, ptr, void_;
  const Program *p;
  const Kernel *kn;
  LLVMValueRef fn, ctx;
  LLVMValueRef bufs, strides, ext, szv, shape;
  LLVMValueRef *axv;     /* current value of each axis */
  LLVMValueRef *memo;    /* values loaded once in the entry block, by memo_key */
  int nmemo;
  LLVMValueRef err_acc;  /* alloca i1 */
  const KExpr *fused_red; /* a reduction already accumulated in the loop before it ... */
  LLVMValueRef fused_val; /* ... and its value */
  LLVMValueRef parity;   /* a row-pipelined kernel (gen_piped): which of the two copies of
                            the per-row locals the code being built uses, else NULL */
  int fn_count;
  const char *prefix;    /* of the module's symbols */
  VMath vm;              /* the math functions (vmath.c) */
  int vector_bits;       /* the kernels' "prefer-vector-width" (the hardware model's) */
  const HwModel *hw;     /* the model the kernels are built for */
  LLVMValueRef *aa_scope, *aa_noalias;  /* per slot (slot_alias), made on first use */
  bool strided;          /* the strided variant: inputs' last strides from the context too */
  bool masked_loads;     /* the target masks a vector load's lanes by mask register (AVX-512):
                            guarded_load */
  const KExpr *fixed_sel; /* a where whose branch is known in the loop being built (split_where) */
  bool fixed_then;       /* ... and which: its first */
} G;

static LLVMTypeRef ty_of(G *g, DynElem e) {
  switch (e) {
  case DYN_F32: case DYN_F16: case DYN_BF16: return g->f32;   /* f16, bf16: computed in f32 */
  case DYN_F64: return g->f64;
  case DYN_I32: return g->i32;
  case DYN_I64: return g->i64;
  default: return g->i1;
  }
}

static LLVMTypeRef mem_ty(G *g, DynElem e) {
  if (e == DYN_F16) return LLVMHalfTypeInContext(g->cx);
  if (e == DYN_BF16) return LLVMInt16TypeInContext(g->cx);   /* irb_widen16 */
  return e == DYN_BOOL ? g->i8 : ty_of(g, e);
}

static LLVMValueRef c64(G *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

/* Loads from the context are made once, in the entry block: stores into tensors could
 * otherwise alias the context arrays as far as LLVM knows, keep the loads in the loops and
 * stop vectorisation ("cannot identify array bounds"). */
static LLVMValueRef entry_load(G *g, LLVMTypeRef t, LLVMValueRef base, int which, int64_t idx) {
  int key = -1;
  if (idx >= 0 && idx < (1 << 20)) key = (int)(idx * 6 + which);
  if (key >= 0 && key < g->nmemo && g->memo[key]) return g->memo[key];
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(g->fn);
  LLVMValueRef term = LLVMGetBasicBlockTerminator(entry);
  if (term) LLVMPositionBuilderBefore(g->b, term);
  else LLVMPositionBuilderAtEnd(g->b, entry);
  LLVMValueRef i = c64(g, idx);
  LLVMValueRef p = LLVMBuildGEP2(g->b, t, base, &i, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(g->b, t, p, "");
  LLVMPositionBuilderAtEnd(g->b, cur);
  if (key >= 0) {
    if (key >= g->nmemo) {
      int n = g->nmemo ? g->nmemo : 256;
      while (n <= key) n *= 2;
      g->memo = xrealloc(g->memo, sizeof(LLVMValueRef) * (size_t)n);
      memset(g->memo + g->nmemo, 0, sizeof(LLVMValueRef) * (size_t)(n - g->nmemo));
      g->nmemo = n;
    }
    g->memo[key] = v;
  }
  return v;
}

static int which_of(G *g, LLVMValueRef base) {
  return base == g->strides ? 1 : base == g->ext ? 2 : base == g->szv ? 3 : base == g->shape ? 4 : 5;
}

static LLVMValueRef load_i64(G *g, LLVMValueRef base, int64_t idx) {
  return entry_load(g, g->i64, base, which_of(g, base), idx);
}

static LLVMValueRef intrinsic(G *g, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n) {
  return irb_call_intrinsic(g->b, g->m, name, t, args, n);
}

/* Reassociation is for a reduction's steps (red_step), which the vectoriser must reorder;
 * an elementwise operation gets contraction and reciprocals (x / s as x * (1/s) when s is
 * invariant) only.  With reassociation InstCombine rewrote T0 * -1.62 + T0 as T0 * -0.62:
 * infinite where the reference evaluator's -inf * -1.62 + -inf is NaN.  NaN and infinity
 * keep their meaning either way. */
static void fast_flags(LLVMValueRef v, bool reassoc) {
  if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v, (reassoc ? LLVMFastMathAllowReassoc : 0) | LLVMFastMathAllowContract |
                              LLVMFastMathNoSignedZeros | LLVMFastMathAllowReciprocal);
}
static void fast(LLVMValueRef v) { fast_flags(v, false); }

static LLVMValueRef fconst(G *g, LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

static LLVMValueRef gen(G *g, const KExpr *e, LLVMValueRef guard, bool in_branch);

static void flag(G *g, LLVMValueRef bad) {
  LLVMValueRef cur = LLVMBuildLoad2(g->b, g->i1, g->err_acc, "");
  LLVMBuildStore(g->b, LLVMBuildOr(g->b, cur, bad, ""), g->err_acc);
}

static LLVMValueRef slot_ptr(G *g, int slot) {
  LLVMValueRef base = entry_load(g, g->ptr, g->bufs, 0, slot);
  const Slot *s = &g->p->slots[slot];
  if (!g->parity || s->kind != SLOT_LOCAL) return base;
  /* the second copy follows the first, cpu_pipe_copy_bytes further on */
  LLVMValueRef bytes = c64(g, elem_size(s->type.elem));
  for (int d = 0; d < s->nlocal; d++) bytes = LLVMBuildMul(g->b, bytes, load_i64(g, g->shape, (int64_t)slot * DYN_MAX_RANK + d), "");
  bytes = LLVMBuildAnd(g->b, LLVMBuildAdd(g->b, bytes, c64(g, 63), ""), c64(g, -64), "");
  bytes = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, bytes, c64(g, PIPE_COPY_MIN), ""), bytes, c64(g, PIPE_COPY_MIN), "");
  return LLVMBuildGEP2(g->b, g->i8, base, (LLVMValueRef[]){LLVMBuildMul(g->b, g->parity, bytes, "")}, 1, "");
}

/* A module's block of zeros, what a clamped load of a tensor with no elements reads. */
static LLVMValueRef zero_block(G *g) {
  LLVMValueRef z = LLVMGetNamedGlobal(g->m, "dyn.zeros");
  if (!z) {
    LLVMTypeRef t = LLVMArrayType(g->i64, 2);
    z = LLVMAddGlobal(g->m, t, "dyn.zeros");
    LLVMSetInitializer(z, LLVMConstNull(t));
    LLVMSetLinkage(z, LLVMPrivateLinkage);
    LLVMSetGlobalConstant(z, 1);
    LLVMSetAlignment(z, 16);
  }
  return z;
}

/* ---- strided inputs ----
 * An input is read where the caller keeps it, through its strides (in elements, from the
 * context like the sizes; negative and zero ones too: X[::-1], broadcast_to).  Each loop
 * kernel is compiled for a last stride of 1 -- a constant, so the innermost loops vectorise
 * with plain vector loads as they would over a copy -- and, the first time a call passes an
 * input whose last axis it would step over with another stride (a transpose, X[:, ::2]),
 * once more as the strided variant, which reads that stride too (cpu_compile_strided; the
 * run-time picks per kernel, cpu_rt.c).  Other strides are read from the context in either,
 * so a row range or a slice of a bigger array takes the plain kernel.  A loop versioned by
 * LLVM on the stride would serve both, but in every kernel kind (tiles, row pipelines,
 * scans) and with a check per input in each loop; the variant keeps the common case's code
 * exactly what it was and costs its compile only where strided inputs come. */

/* The element offset of an access: sum of subscript * stride; the last stride is 1 but for
 * an input in the strided variant. */
static LLVMValueRef offset(G *g, int slot, LLVMValueRef *subs, int first, int n) {
  LLVMValueRef off = c64(g, 0);
  int rank = n - first;
  bool any_last = g->strided && g->p->slots[slot].kind == SLOT_INPUT;
  for (int k = first; k < n; k++) {
    int d = k - first;
    LLVMValueRef st = d == rank - 1 && !any_last ? c64(g, 1) : load_i64(g, g->strides, (int64_t)slot * DYN_MAX_RANK + d);
    off = LLVMBuildAdd(g->b, off, LLVMBuildMul(g->b, subs[k], st, ""), "");
  }
  return off;
}

static void slot_alias(G *g, LLVMValueRef inst, int slot);

/* A loaded element as the kernel computes with it: bool as i1, 16-bit floats widened. */
static LLVMValueRef loaded(G *g, const Slot *s, LLVMValueRef v) {
  if (s->type.elem == DYN_BOOL) v = LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->i8, 0, 0), "");
  if (elem_is_half(s->type.elem)) v = irb_widen16(g->b, v, s->type.elem == DYN_BF16);
  return v;
}

/* A load in a branch of `where` that the checker proved in range where its branch is
 * taken: loaded only under its guard, in a block of its own, so that the vectoriser makes
 * it a masked load of consecutive lanes.  Clamped subscripts (gen_load's other way, for a
 * load that may be out of range) break the lanes' run, which became a gather: a padding,
 * Y[i, j] = where(i >= 1 and ... , X[i - 1, j - 1], 0.0), of f32[2048, 2048] took 3.8 ms
 * on one thread of Zen 4, three times a copy.  Taken where the target has AVX-512, whose
 * masked loads leave the lanes masked off untouched.  AVX2's vmaskmovps does too on the
 * hardware, but under QEMU 7.2 (the AVX2 CPU that make check emulates) it faulted on lanes
 * masked off past the end of a mapping (conv2d's padding); and NEON has no masked load,
 * where the vectoriser then keeps the loop scalar.  Elsewhere the subscripts are clamped. */
static LLVMValueRef guarded_load(G *g, const KExpr *e, const Slot *s, LLVMValueRef *subs, int first, LLVMValueRef guard) {
  LLVMTypeRef mt = mem_ty(g, s->type.elem);
  LLVMValueRef off = offset(g, e->slot, subs, first, e->n);
  LLVMValueRef ptr = LLVMBuildGEP2(g->b, mt, slot_ptr(g, e->slot), &off, 1, "");
  LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b);
  LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(g->cx, g->fn, "ld.taken");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->cx, g->fn, "ld.done");
  LLVMBuildCondBr(g->b, guard, take, done);
  LLVMPositionBuilderAtEnd(g->b, take);
  LLVMValueRef v = LLVMBuildLoad2(g->b, mt, ptr, "");
  slot_alias(g, v, e->slot);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  LLVMValueRef phi = LLVMBuildPhi(g->b, mt, "");
  LLVMValueRef vals[2] = {v, LLVMConstNull(mt)};
  LLVMBasicBlockRef from_bb[2] = {take, from};
  LLVMAddIncoming(phi, vals, from_bb, 2);
  return loaded(g, s, phi);
}

static LLVMValueRef gen_load(G *g, const KExpr *e, LLVMValueRef guard, bool in_branch) {
  const Slot *s = &g->p->slots[e->slot];
  int first = s->kind == SLOT_LOCAL ? g->kn->nouter : 0;
  LLVMValueRef subs[DYN_MAX_RANK];
  for (int k = 0; k < e->n; k++) {
    subs[k] = gen(g, e->a[k], guard, in_branch);
    /* a subscript read from an i32 tensor, or computed in i32: addresses are i64 */
    if (e->a[k]->ty == DYN_I32) subs[k] = LLVMBuildSExt(g->b, subs[k], g->i64, "");
  }
  LLVMValueRef base = slot_ptr(g, e->slot);
  if (g->masked_loads && !e->checked && in_branch && guard)
    return guarded_load(g, e, s, subs, first, guard);
  if (e->checked || in_branch) {
    /* Each subscript is clamped into [0, dim - 1], so that a load that is flagged, or in a
     * branch not taken, stays in the buffer.  A tensor with no elements has no such range:
     * then every subscript is 0 and the load reads a block of zeros instead. */
    LLVMValueRef empty = LLVMConstInt(g->i1, 0, 0);
    for (int k = first; k < e->n; k++) {
      LLVMValueRef dim = load_i64(g, g->shape, (int64_t)e->slot * DYN_MAX_RANK + (k - first));
      empty = LLVMBuildOr(g->b, empty, LLVMBuildICmp(g->b, LLVMIntEQ, dim, c64(g, 0), ""), "");
    }
    for (int k = first; k < e->n; k++) {
      LLVMValueRef dim = load_i64(g, g->shape, (int64_t)e->slot * DYN_MAX_RANK + (k - first));
      if (e->checked) {
        LLVMValueRef bad = LLVMBuildOr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, subs[k], c64(g, 0), ""),
                                       LLVMBuildICmp(g->b, LLVMIntSGE, subs[k], dim, ""), "");
        flag(g, guard ? LLVMBuildAnd(g->b, bad, guard, "") : bad);
      }
      LLVMValueRef top = LLVMBuildSelect(g->b, empty, c64(g, 0), LLVMBuildSub(g->b, dim, c64(g, 1), ""), "");
      LLVMValueRef v = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, subs[k], top, ""), top, subs[k], "");
      subs[k] = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, v, c64(g, 0), ""), c64(g, 0), v, "");
    }
    base = LLVMBuildSelect(g->b, empty, zero_block(g), base, "");
  }
  LLVMValueRef off = offset(g, e->slot, subs, first, e->n);
  LLVMTypeRef mt = mem_ty(g, s->type.elem);
  LLVMValueRef ptr = LLVMBuildGEP2(g->b, mt, base, &off, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(g->b, mt, ptr, "");
  slot_alias(g, v, e->slot);
  return loaded(g, s, v);
}

static LLVMValueRef cast(G *g, LLVMValueRef v, DynElem from, DynElem to) {
  if (from == to) return v;
  if (elem_is_half(to)) {
    /* to the f32 value, rounded to 16 bits (lang/reference.md, "16-bit floats") */
    v = irb_narrow16(g->b, cast(g, v, elem_compute(from), DYN_F32), to == DYN_BF16);
    return irb_widen16(g->b, v, to == DYN_BF16);
  }
  from = elem_compute(from);
  if (from == to) return v;
  LLVMTypeRef t = ty_of(g, to);
  bool ff = elem_is_float(from), tf = elem_is_float(to);
  if (ff && tf) return to == DYN_F64 ? LLVMBuildFPExt(g->b, v, t, "") : LLVMBuildFPTrunc(g->b, v, t, "");
  if (ff && to == DYN_BOOL) return LLVMBuildFCmp(g->b, LLVMRealUNE, v, LLVMConstReal(ty_of(g, from), 0), "");
  if (ff) {
    /* saturating, NaN to 0, as the reference defines it */
    LLVMTypeRef tys[2] = {t, ty_of(g, from)};
    unsigned id = LLVMLookupIntrinsicID("llvm.fptosi.sat", 15);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->m, id, tys, 2);
    return LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->cx, id, tys, 2), f, &v, 1, "");
  }
  if (from == DYN_BOOL) return tf ? LLVMBuildUIToFP(g->b, v, t, "") : LLVMBuildZExt(g->b, v, t, "");
  if (tf) return LLVMBuildSIToFP(g->b, v, t, "");
  if (to == DYN_BOOL) return LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(ty_of(g, from), 0, 0), "");
  return elem_size(to) > elem_size(from) ? LLVMBuildSExt(g->b, v, t, "") : LLVMBuildTrunc(g->b, v, t, "");
}

/* Floor division and modulo, like Python, with division by zero flagged, not trapped. */
static LLVMValueRef int_divmod(G *g, bool div, LLVMValueRef a, LLVMValueRef d, LLVMTypeRef t, LLVMValueRef guard) {
  LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0), m1 = LLVMConstAllOnes(t);
  LLVMValueRef isz = LLVMBuildICmp(g->b, LLVMIntEQ, d, zero, "");
  flag(g, guard ? LLVMBuildAnd(g->b, isz, guard, "") : isz);
  LLVMValueRef ism1 = LLVMBuildICmp(g->b, LLVMIntEQ, d, m1, "");
  LLVMValueRef safe = LLVMBuildSelect(g->b, LLVMBuildOr(g->b, isz, ism1, ""), one, d, "");
  LLVMValueRef q = LLVMBuildSDiv(g->b, a, safe, ""), r = LLVMBuildSRem(g->b, a, safe, "");
  LLVMValueRef adjust = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntNE, r, zero, ""),
                                     LLVMBuildXor(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, r, zero, ""),
                                                  LLVMBuildICmp(g->b, LLVMIntSLT, safe, zero, ""), ""), "");
  if (div) {
    q = LLVMBuildSelect(g->b, adjust, LLVMBuildSub(g->b, q, one, ""), q, "");
    return LLVMBuildSelect(g->b, ism1, LLVMBuildSub(g->b, zero, a, ""), q, "");
  }
  r = LLVMBuildSelect(g->b, adjust, LLVMBuildAdd(g->b, r, safe, ""), r, "");
  return LLVMBuildSelect(g->b, ism1, zero, r, "");
}

static LLVMValueRef gen_reduce(G *g, const KExpr *e, LLVMValueRef guard, bool in_branch);

static LLVMValueRef gen(G *g, const KExpr *e, LLVMValueRef guard, bool in_branch) {
  LLVMTypeRef t = ty_of(g, e->ty);
  switch (e->kind) {
  case KX_CONST:
    if (elem_is_float(e->ty)) return LLVMConstReal(t, half_round(e->ty, e->f));
    return LLVMConstInt(t, (unsigned long long)e->i, 1);
  case KX_AXIS:
    return g->axv[e->axis];
  case KX_SIZE:
    return load_i64(g, g->szv, e->id);
  case KX_LOAD:
    return gen_load(g, e, guard, in_branch);
  case KX_SCAN:                 /* a stage's value: its body is stored, then cpu_scan.c scans */
    return gen(g, e->a[0], guard, in_branch);
  case KX_CAST:
    return cast(g, gen(g, e->a[0], guard, in_branch), e->opty, e->ty);
  case KX_SELECT: {
    if (e == g->fixed_sel) return gen(g, e->a[g->fixed_then ? 1 : 2], guard, in_branch);
    LLVMValueRef c = gen(g, e->a[0], guard, in_branch);
    LLVMValueRef ga = guard ? LLVMBuildAnd(g->b, guard, c, "") : c;
    LLVMValueRef nc = LLVMBuildNot(g->b, c, "");
    LLVMValueRef gb = guard ? LLVMBuildAnd(g->b, guard, nc, "") : nc;
    LLVMValueRef a = gen(g, e->a[1], ga, true), b = gen(g, e->a[2], gb, true);
    return LLVMBuildSelect(g->b, c, a, b, "");
  }
  case KX_REDUCE:
    return gen_reduce(g, e, guard, in_branch);
  case KX_UN: {
    LLVMValueRef x = gen(g, e->a[0], guard, in_branch);
    bool f = elem_is_float(e->ty);
    switch (e->op) {
    case OP_NOT: return LLVMBuildNot(g->b, x, "");
    case OP_NEG: return f ? LLVMBuildFNeg(g->b, x, "") : LLVMBuildSub(g->b, LLVMConstInt(t, 0, 0), x, "");
    case OP_ABS:
      if (f) return intrinsic(g, "llvm.fabs", t, &x, 1);
      return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), ""),
                             LLVMBuildSub(g->b, LLVMConstInt(t, 0, 0), x, ""), x, "");
    case OP_FLOOR: case OP_CEIL: case OP_ROUND:
      if (!f) return x;
      return intrinsic(g, e->op == OP_FLOOR ? "llvm.floor" : e->op == OP_CEIL ? "llvm.ceil" : "llvm.rint", t, &x, 1);
    case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_SIN: case OP_COS: case OP_TANH:
    case OP_SIGMOID: case OP_ERF:
      return vmath_unary(&g->vm, e->op, x);
    default: return x;
    }
  }
  case KX_BIN: {
    LLVMValueRef a = gen(g, e->a[0], guard, in_branch), b = gen(g, e->a[1], guard, in_branch);
    OpClass c = op_class(e->op);
    if (c == OPK_CMP) {
      if (elem_is_float(e->opty)) {
        LLVMRealPredicate pr = e->op == OP_EQ ? LLVMRealOEQ : e->op == OP_NE ? LLVMRealUNE : e->op == OP_LT ? LLVMRealOLT :
                               e->op == OP_LE ? LLVMRealOLE : e->op == OP_GT ? LLVMRealOGT : LLVMRealOGE;
        return LLVMBuildFCmp(g->b, pr, a, b, "");
      }
      LLVMIntPredicate pr = e->op == OP_EQ ? LLVMIntEQ : e->op == OP_NE ? LLVMIntNE : e->op == OP_LT ? LLVMIntSLT :
                            e->op == OP_LE ? LLVMIntSLE : e->op == OP_GT ? LLVMIntSGT : LLVMIntSGE;
      return LLVMBuildICmp(g->b, pr, a, b, "");
    }
    if (e->op == OP_AND) return LLVMBuildAnd(g->b, a, b, "");
    if (e->op == OP_OR) return LLVMBuildOr(g->b, a, b, "");
    LLVMValueRef r;
    if (elem_is_float(e->ty)) {
      switch (e->op) {
      case OP_ADD: r = LLVMBuildFAdd(g->b, a, b, ""); break;
      case OP_SUB: r = LLVMBuildFSub(g->b, a, b, ""); break;
      case OP_MUL: r = LLVMBuildFMul(g->b, a, b, ""); break;
      case OP_DIV: r = LLVMBuildFDiv(g->b, a, b, ""); break;
      case OP_MOD: {
        LLVMValueRef m = LLVMBuildFRem(g->b, a, b, "");
        LLVMValueRef z = fconst(g, t, 0);
        LLVMValueRef adj = LLVMBuildAnd(g->b, LLVMBuildFCmp(g->b, LLVMRealONE, m, z, ""),
                                        LLVMBuildXor(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, m, z, ""),
                                                     LLVMBuildFCmp(g->b, LLVMRealOLT, b, z, ""), ""), "");
        m = LLVMBuildSelect(g->b, adj, LLVMBuildFAdd(g->b, m, b, ""), m, "");
        /* a zero takes the sign of the divisor, as Python */
        LLVMValueRef cs[2] = {z, b};
        LLVMValueRef signed_zero = intrinsic(g, "llvm.copysign", t, cs, 2);
        return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOEQ, m, z, ""), signed_zero, m, "");
      }
      case OP_POW: case OP_POWF: return vmath_pow(&g->vm, a, b);
      case OP_MAX: case OP_MIN: {
        LLVMValueRef args[2] = {a, b};
        return intrinsic(g, e->op == OP_MAX ? "llvm.maximum" : "llvm.minimum", t, args, 2);
      }
      default: r = a;
      }
      fast(r);
      return r;
    }
    switch (e->op) {
    case OP_ADD: return LLVMBuildAdd(g->b, a, b, "");
    case OP_SUB: return LLVMBuildSub(g->b, a, b, "");
    case OP_MUL: return LLVMBuildMul(g->b, a, b, "");
    case OP_DIV: return int_divmod(g, true, a, b, t, guard);
    case OP_MOD: return int_divmod(g, false, a, b, t, guard);
    case OP_MAX: return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, a, b, ""), a, b, "");
    case OP_MIN: return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, a, b, ""), a, b, "");
    default: {
      /* integer power by repeated multiplication: a loop would block vectorisation, and
       * integer ** is rare; go through double and back, exact below 2^53 */
      LLVMValueRef fa = LLVMBuildSIToFP(g->b, a, g->f64, ""), fb = LLVMBuildSIToFP(g->b, b, g->f64, "");
      LLVMValueRef args[2] = {fa, fb};
      return cast(g, intrinsic(g, "llvm.pow", g->f64, args, 2), DYN_F64, e->ty);
    }
    }
  }
  }
  return LLVMConstInt(g->i1, 0, 0);
}

/* ---- loops ---- */

typedef struct Loop { LLVMBasicBlockRef header, body, exit; LLVMValueRef iv, next; LLVMBasicBlockRef pre; } Loop;

static LLVMValueRef loop_begin(G *g, Loop *L, LLVMValueRef lo, LLVMValueRef hi) {
  L->pre = LLVMGetInsertBlock(g->b);
  L->header = LLVMAppendBasicBlockInContext(g->cx, g->fn, "loop");
  L->body = LLVMAppendBasicBlockInContext(g->cx, g->fn, "body");
  L->exit = LLVMAppendBasicBlockInContext(g->cx, g->fn, "done");
  LLVMBuildBr(g->b, L->header);
  LLVMPositionBuilderAtEnd(g->b, L->header);
  L->iv = LLVMBuildPhi(g->b, g->i64, "i");
  LLVMAddIncoming(L->iv, &lo, &L->pre, 1);
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, L->iv, hi, ""), L->body, L->exit);
  LLVMPositionBuilderAtEnd(g->b, L->body);
  return L->iv;
}

/* The end of a loop over [lo, hi) in steps of `step` (loop_end: of 1). */
static void loop_end_by(G *g, Loop *L, int64_t step) {
  LLVMValueRef nx = LLVMBuildAdd(g->b, L->iv, c64(g, step), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
  LLVMBuildBr(g->b, L->header);
  LLVMAddIncoming(L->iv, &nx, &latch, 1);
  LLVMPositionBuilderAtEnd(g->b, L->exit);
}

static void loop_end(G *g, Loop *L) { loop_end_by(g, L, 1); }

static LLVMValueRef entry_alloca(G *g, LLVMTypeRef t) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(g->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(g->b, first);
  else LLVMPositionBuilderAtEnd(g->b, entry);
  LLVMValueRef a = LLVMBuildAlloca(g->b, t, "");
  LLVMPositionBuilderAtEnd(g->b, cur);
  return a;
}

static LLVMValueRef red_init(G *g, const KExpr *e, LLVMTypeRef t) {
  bool f = elem_is_float(e->ty);
  switch (e->red) {
  case RED_SUM: return f ? fconst(g, t, 0) : LLVMConstInt(t, 0, 0);
  case RED_PROD: return f ? fconst(g, t, 1) : LLVMConstInt(t, 1, 0);
  case RED_MAX: return f ? fconst(g, t, -INFINITY) : LLVMConstInt(t, e->ty == DYN_I32 ? (unsigned long long)INT32_MIN : (unsigned long long)INT64_MIN, 1);
  default: return f ? fconst(g, t, INFINITY) : LLVMConstInt(t, e->ty == DYN_I32 ? (unsigned long long)INT32_MAX : (unsigned long long)INT64_MAX, 1);
  }
}

static void red_step(G *g, const KExpr *e, LLVMValueRef acc, LLVMValueRef x);
static LLVMValueRef row_sum_begin(G *g);
static void row_sum_fold(G *g, const KExpr *red, LLVMValueRef row, LLVMValueRef strip);
static LLVMValueRef row_sum_end(G *g, const KExpr *red, LLVMValueRef row);

/* A float sum is blocked: its innermost axis runs in blocks of SUM_BLOCK elements, each
 * summed from zero in the vector partials the vectoriser makes, and each block's total is
 * added to the sum's, kept in f64 (as a fused sum's strips, split_sum).  One accumulator for
 * the whole axis took every term against a partial sum of n / lanes terms, so the error grew
 * with n: layernorm over rows of 3,000,017 f32 was 3.9e-6 off (1.3e-6 at 1,000,003) with 16
 * lanes, 3.8e-5 on NEON's 4; blocked, a term meets at most SUM_BLOCK / lanes others before
 * its block's total goes to f64, whatever n.  Costs the vector partials' horizontal sum and
 * an f64 add per block, and a few cycles a row: with one thread on Zen 5, rows of 1024 f32
 * summed as fast, rows of 20 took 1.7 times as long (0.064 ms for 20000 rows, from 0.037). */
#define SUM_BLOCK 256

static LLVMValueRef gen_reduce(G *g, const KExpr *e, LLVMValueRef guard, bool in_branch) {
  if (e == g->fused_red) return g->fused_val;
  LLVMTypeRef t = ty_of(g, e->ty);
  LLVMValueRef acc = entry_alloca(g, t);
  LLVMBuildStore(g->b, red_init(g, e, t), acc);
  int last = e->red == RED_SUM && elem_is_float(e->ty) ? e->nraxes - 1 : -1;
  LLVMValueRef total = last >= 0 ? row_sum_begin(g) : NULL;
  Loop L[DYN_MAX_RANK * 2], block;
  LLVMValueRef more = NULL;   /* a block follows this one */
  for (int i = 0; i < e->nraxes; i++) {
    LLVMValueRef E = load_i64(g, g->ext, e->raxes[i]);
    if (i == last) {   /* [c0, min(c0 + SUM_BLOCK, E)) for c0 = 0, SUM_BLOCK, ... */
      LLVMValueRef c0 = loop_begin(g, &block, c64(g, 0), E);
      LLVMValueRef c1 = LLVMBuildAdd(g->b, c0, c64(g, SUM_BLOCK), "");
      more = LLVMBuildICmp(g->b, LLVMIntSLT, c1, E, "");
      g->axv[e->raxes[i]] = loop_begin(g, &L[i], c0, LLVMBuildSelect(g->b, more, c1, E, ""));
      continue;
    }
    g->axv[e->raxes[i]] = loop_begin(g, &L[i], c64(g, 0), E);
  }
  red_step(g, e, acc, gen(g, e->a[0], guard, in_branch));
  for (int i = e->nraxes - 1; i >= 0; i--) {
    loop_end(g, &L[i]);
    if (i == last) {   /* the last block stays in acc, so a short axis costs one add */
      LLVMBasicBlockRef fold = LLVMAppendBasicBlockInContext(g->cx, g->fn, "fold"),
                        next = LLVMAppendBasicBlockInContext(g->cx, g->fn, "next_block");
      LLVMBuildCondBr(g->b, more, fold, next);
      LLVMPositionBuilderAtEnd(g->b, fold);
      row_sum_fold(g, e, total, acc);
      LLVMBuildBr(g->b, next);
      LLVMPositionBuilderAtEnd(g->b, next);
      loop_end_by(g, &block, SUM_BLOCK);
    }
  }
  if (last < 0) return LLVMBuildLoad2(g->b, t, acc, "");
  row_sum_fold(g, e, total, acc);
  return row_sum_end(g, e, total);
}

/* cur (op) x for the reduction e, on scalars or vectors of its type */
static LLVMValueRef red_op(G *g, const KExpr *e, LLVMValueRef cur, LLVMValueRef x) {
  bool f = elem_is_float(e->ty);
  LLVMValueRef r;
  switch (e->red) {
  case RED_SUM: r = f ? LLVMBuildFAdd(g->b, cur, x, "") : LLVMBuildAdd(g->b, cur, x, ""); break;
  case RED_PROD: r = f ? LLVMBuildFMul(g->b, cur, x, "") : LLVMBuildMul(g->b, cur, x, ""); break;
  default: {
    bool mx = e->red == RED_MAX;
    if (f) {
      LLVMValueRef args[2] = {cur, x};
      r = intrinsic(g, mx ? "llvm.maximum" : "llvm.minimum", LLVMTypeOf(cur), args, 2);
    } else {
      r = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, mx ? LLVMIntSGT : LLVMIntSLT, x, cur, ""), x, cur, "");
    }
  }
  }
  fast_flags(r, true);
  return r;
}

/* acc = acc (op) x, for the reduction e */
static void red_step(G *g, const KExpr *e, LLVMValueRef acc, LLVMValueRef x) {
  LLVMValueRef cur = LLVMBuildLoad2(g->b, ty_of(g, e->ty), acc, "");
  LLVMBuildStore(g->b, red_op(g, e, cur, x), acc);
}

static LLVMValueRef elem_ptr(G *g, int slot, LLVMValueRef *subs, int n) {
  const Slot *s = &g->p->slots[slot];
  int first = s->kind == SLOT_LOCAL ? g->kn->nouter : 0;
  LLVMValueRef off = offset(g, slot, subs, first, n);
  return LLVMBuildGEP2(g->b, mem_ty(g, s->type.elem), slot_ptr(g, slot), &off, 1, "");
}

/* ---- slots do not alias ----
 * Every slot is its own buffer (outputs and temporaries are fresh; inputs are only read, so
 * two that share memory are no hazard), but LLVM sees pointers loaded from the context.  For
 * affine accesses it versions the loop on run-time bounds checks; for a gather, X[I[m]], it
 * cannot bound the reads of X and gives up ("cannot identify array bounds").  So each slot's
 * loads and stores name it as their alias scope and every other slot as noalias, which lets
 * the loop vectoriser take a gather (with the hardware's gather instructions where its cost
 * model wants them). */
static void slot_alias(G *g, LLVMValueRef inst, int slot) {
  int n = g->p->nslots;
  if (!g->aa_scope) {
    g->aa_scope = calloc((size_t)n, sizeof(LLVMValueRef));
    g->aa_noalias = calloc((size_t)n, sizeof(LLVMValueRef));
    LLVMMetadataRef *sc = malloc((size_t)n * sizeof *sc), *others = malloc((size_t)n * sizeof *others);
    LLVMMetadataRef dname = LLVMMDStringInContext2(g->cx, "dyn.slots", 9);
    LLVMMetadataRef dom = LLVMMDNodeInContext2(g->cx, &dname, 1);
    for (int i = 0; i < n; i++) {
      char name[32];
      int len = snprintf(name, sizeof name, "dyn.slot%d", i);
      LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(g->cx, name, (size_t)len), dom};
      sc[i] = LLVMMDNodeInContext2(g->cx, ops, 2);
    }
    for (int i = 0; i < n; i++) {
      int k = 0;
      for (int j = 0; j < n; j++)
        if (j != i) others[k++] = sc[j];
      g->aa_scope[i] = LLVMMetadataAsValue(g->cx, LLVMMDNodeInContext2(g->cx, &sc[i], 1));
      g->aa_noalias[i] = LLVMMetadataAsValue(g->cx, LLVMMDNodeInContext2(g->cx, others, (size_t)k));
    }
    free(sc);
    free(others);
  }
  LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(g->cx, "alias.scope", 11), g->aa_scope[slot]);
  LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(g->cx, "noalias", 7), g->aa_noalias[slot]);
}

/* A volatile store is never vectorised: the streaming twin's prologue (gen_kernel). */
static void gen_store(G *g, int slot, LLVMValueRef *subs, int n, LLVMValueRef v, DynElem ty, bool vol) {
  LLVMValueRef ptr = elem_ptr(g, slot, subs, n);
  if (ty == DYN_BOOL) v = LLVMBuildZExt(g->b, v, g->i8, "");
  DynElem mt = g->p->slots[slot].type.elem;
  if (elem_is_half(mt)) v = irb_narrow16(g->b, v, mt == DYN_BF16);
  LLVMValueRef st = LLVMBuildStore(g->b, v, ptr);
  slot_alias(g, st, slot);
  if (vol) LLVMSetVolatile(st, 1);
}

/* ---- a reduction fused into the loop before it ----
 * In a row-wise chain, `e[b, n] = exp(...)` is often followed by `s[b] = sum[n] e[b, n]`.
 * The sum can be accumulated in the loop that writes e, saving a pass over the row. */

int cpu_count_reduces(const KExpr *e) {
  int n = e->kind == KX_REDUCE || e->kind == KX_SCAN;
  for (int i = 0; i < e->n; i++) n += cpu_count_reduces(e->a[i]);
  return n;
}

/* Does every load of `slot` in e read it at [outer..., raxes...], the element just written? */
static bool reads_in_step(const KExpr *e, int slot, const Kernel *kn, const KExpr *r) {
  if (e->kind == KX_LOAD && e->slot == slot) {
    if (e->n != kn->nouter + r->nraxes) return false;
    for (int k = 0; k < e->n; k++) {
      int want = k < kn->nouter ? kn->outer[k] : r->raxes[k - kn->nouter];
      if (e->a[k]->kind != KX_AXIS || e->a[k]->axis != want) return false;
    }
    return true;
  }
  for (int i = 0; i < e->n; i++)
    if (!reads_in_step(e->a[i], slot, kn, r)) return false;
  return true;
}

static bool reads_slot(const KExpr *e, int slot);

/* The reduction of a stage's value e: e itself, or the only one inside arithmetic on it
 * (avgpool2d's (sum[i, j] T[...]) / (K * K), a mean), not under a where; else NULL. */
static const KExpr *inner_reduce(const KExpr *e) {
  if (e->kind != KX_REDUCE && cpu_count_reduces(e) != 1) return NULL;
  while (e->kind != KX_REDUCE) {
    if (e->kind == KX_SELECT || e->kind == KX_SCAN) return NULL;
    int k = 0;
    while (k < e->n && !cpu_count_reduces(e->a[k])) k++;
    e = e->a[k];
  }
  return e;
}

/* The reduction of stage s+1 that can be accumulated in stage s's loop, or NULL: stage s+1 is
 * one value per row, holds one reduction (not under a where), whose axes have the extents of
 * stage s's loop and which reads stage s's output only at the element being written. */
static const KExpr *fusable_reduce(const Program *p, const Kernel *kn, int s, int par_axis) {
  if (s + 1 >= kn->nstages) return NULL;
  const Stage *a = &kn->stages[s], *b = &kn->stages[s + 1];
  if (a->naxes == 0 || b->naxes != 0 || cpu_count_reduces(b->expr) != 1) return NULL;
  const KExpr *e = inner_reduce(b->expr);
  if (!e || e->nraxes != a->naxes || cpu_count_reduces(e->a[0])) return NULL;
  for (int i = 0; i < a->naxes; i++)
    if (a->axes[i] == par_axis || p->axes[a->axes[i]].extent != p->axes[e->raxes[i]].extent) return NULL;
  return reads_in_step(e->a[0], a->out, kn, e) ? e : NULL;
}

/* The last vector of a row.  LLVM's vectorised loop of n elements ends in half vectors and
 * single elements (n mod 4 lanes: up to 7 + 7 of them at 16 lanes), each costing about what a
 * whole vector does, so a row of 77 f32 cost twice an element what a row of 64 did (exp
 * over f32[R, N] on one thread of Zen 5: 0.24 against 0.10 ns; 31, 0.59).  Where
 * computing an element twice changes nothing, the loop instead runs over the row's whole
 * steps of 4 vectors, then the rest a vector at a time, each a loop of a constant count that
 * the vectoriser makes one vector of, the last ending at the row's end, [n - lanes, n):
 * the elements it shares with the one before are computed and stored twice, to the same
 * values (exp: 0.10-0.13 ns an element at every N from 16 to 144 but 17 and 24, 0.23 and
 * 0.15 there; 31 five times faster, 77 twice).  Only for a stage that evaluates a
 * transcendental function an element: a cheap one (a scale, a copy) is bound by its loop
 * and stores, not by its instructions, and the extra vector cost it more than it saved (X *
 * 2.0 over rows of 17: 0.066 -> 0.129 ns an element).  And only where computing twice
 * changes nothing: a plain stage (no where split, no strip, no scan) along an axis that is
 * not the parallel one (whose tasks would then write a neighbour's elements), that does not
 * read what it writes, and with no reduction fused into it: a vector at a time, a fused sum
 * or max is folded into its scalar at every vector, a chain of shuffles that cost more
 * than the tail it saved (softmax, whose exp carries the row's sum, over f32[R, 48], 1
 * thread of Zen 5: 0.65-0.84 -> 1.2 ns an element; 72 and 96, 0.56 -> 0.71).  A row
 * shorter than a vector runs a plain loop, which LLVM, knowing it short, makes one masked
 * vector of where the target masks lanes. */
static bool transcendental_along(const KExpr *e, int axis);

bool cpu_stage_overlaps(const HwModel *h, const Program *p, const Kernel *kn, int s, int par_axis) {
  const Stage *st = &kn->stages[s];
  if (!cpu_stage_plain(h, p, kn, s, par_axis) || st->axes[st->naxes - 1] == par_axis || cpu_stage_splits(st) ||
      reads_slot(st->expr, st->out) || !transcendental_along(st->expr, st->axes[st->naxes - 1]))
    return false;
  return !fusable_reduce(p, kn, s, par_axis);
}

/* Software prefetch in row-wise kernels.  A row's first pass (softmax's max, layernorm's
 * mean) waits on memory while the later passes, over the row now in cache, keep the core
 * busy with arithmetic; with the rows processed one after another the two never overlap.
 * So the second pass is cut into strips of PREFETCH_STRIP elements, and each strip first
 * asks for the matching part of the next row.  On Zen 5 with 2 threads this took softmax
 * over 4096 x 4096 from about 33 to 39 GB/s (strips of 64 and 1024 were slower; a burst of
 * prefetches for the whole next row at the start of a row was slower than none). */
#define PREFETCH_STRIP 256

/* Which slots does e read row by row: a load whose first subscripts are the outer axes. */
static void row_reads(const KExpr *e, const Kernel *kn, const Program *p, bool *mark) {
  if (e->kind == KX_LOAD && p->slots[e->slot].kind != SLOT_LOCAL && e->n > kn->nouter) {
    bool rows = true;
    for (int o = 0; o < kn->nouter; o++)
      rows = rows && e->a[o]->kind == KX_AXIS && e->a[o]->axis == kn->outer[o];
    if (rows) mark[e->slot] = true;
  }
  for (int i = 0; i < e->n; i++) row_reads(e->a[i], kn, p, mark);
}

/* The slots a row-wise kernel reads row by row (row_reads over its stages), or NULL when
 * there are none (or no row axis); the caller frees it. */
static bool *row_marks(const Program *p, const Kernel *kn) {
  if (kn->nouter == 0) return NULL;
  bool *mark = xcalloc((size_t)p->nslots + 1, sizeof(bool)), any = false;
  for (int s = 0; s < kn->nstages; s++) row_reads(kn->stages[s].expr, kn, p, mark);
  for (int i = 0; i < p->nslots; i++) any = any || mark[i];
  if (!any) {
    free(mark);
    return NULL;
  }
  return mark;
}

/* A read prefetch into every cache level (locality 3) of the line at `at`. */
static void prefetch(G *g, LLVMValueRef at) {
  LLVMValueRef args[4] = {at, LLVMConstInt(g->i32, 0, 0), LLVMConstInt(g->i32, 3, 0), LLVMConstInt(g->i32, 1, 0)};
  intrinsic(g, "llvm.prefetch", g->ptr, args, 4);
}

/* Prefetch, for each slot in mark, the bytes of the next row that correspond to elements
 * [c0, c1) of a pass over e elements of this row. */
static void prefetch_span(G *g, const Kernel *kn, const bool *mark, LLVMValueRef c0, LLVMValueRef c1, LLVMValueRef e) {
  int no = kn->nouter;
  for (int slot = 0; slot < g->p->nslots; slot++) {
    if (!mark[slot]) continue;
    LLVMValueRef off = c64(g, 0);
    for (int o = 0; o < no; o++)
      off = LLVMBuildAdd(g->b, off, LLVMBuildMul(g->b, g->axv[kn->outer[o]], load_i64(g, g->strides, (int64_t)slot * DYN_MAX_RANK + o), ""), "");
    LLVMValueRef row = load_i64(g, g->strides, (int64_t)slot * DYN_MAX_RANK + no - 1);
    int64_t es = elem_size(g->p->slots[slot].type.elem);
    LLVMValueRef base = LLVMBuildGEP2(g->b, g->i8, slot_ptr(g, slot), (LLVMValueRef[]){LLVMBuildMul(g->b, LLVMBuildAdd(g->b, off, row, ""), c64(g, es), "")}, 1, "");
    LLVMValueRef rb = LLVMBuildMul(g->b, row, c64(g, es), "");
    LLVMValueRef b0 = LLVMBuildSDiv(g->b, LLVMBuildMul(g->b, c0, rb, ""), e, "");
    LLVMValueRef b1 = LLVMBuildSDiv(g->b, LLVMBuildMul(g->b, c1, rb, ""), e, "");
    Loop L;
    LLVMValueRef i = loop_begin(g, &L, LLVMBuildSDiv(g->b, b0, c64(g, 64), ""), LLVMBuildSDiv(g->b, LLVMBuildAdd(g->b, b1, c64(g, 63), ""), c64(g, 64), ""));
    prefetch(g, LLVMBuildGEP2(g->b, g->i8, base, (LLVMValueRef[]){LLVMBuildMul(g->b, i, c64(g, 64), "")}, 1, ""));
    loop_end(g, &L);
  }
}

/* Open the loop over the strips of PREFETCH_STRIP elements of [start, E) (close it with
 * loop_end on *chunk) and set [*c0, *c1) to the current strip. */
static void strip_loop(G *g, Loop *chunk, LLVMValueRef start, LLVMValueRef E, LLVMValueRef *c0, LLVMValueRef *c1) {
  const int CH = PREFETCH_STRIP;
  LLVMValueRef k = loop_begin(g, chunk, c64(g, 0), LLVMBuildSDiv(g->b, LLVMBuildAdd(g->b, LLVMBuildSub(g->b, E, start, ""), c64(g, CH - 1), ""), c64(g, CH), ""));
  *c0 = LLVMBuildAdd(g->b, start, LLVMBuildMul(g->b, k, c64(g, CH), ""), "");
  LLVMValueRef end = LLVMBuildAdd(g->b, *c0, c64(g, CH), "");
  *c1 = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, end, E, ""), E, end, "");
}

/* Open the loop over the strips of PREFETCH_STRIP elements of [start, E) (close it with
 * loop_end on *chunk), set [*c0, *c1) to the current strip, and ask for the matching part
 * of the next row of each slot in mark.  The strip is the last axis of the stage st; where
 * st has axes before it (a 3-D softmax's [S, T] row, one pass over T for each s), the
 * pass over the row is all of them, and the strip's share of it is found from their
 * indices: taken as a share of one T, each s asked for a quarter of the whole next row
 * again (softmax's max and exp over 12 x 77 x 1024 ran 7x slower than over 924 x 1024). */
static void strip_begin(G *g, const Kernel *kn, const Stage *st, const bool *mark, Loop *chunk, LLVMValueRef start,
                        LLVMValueRef E, LLVMValueRef *c0, LLVMValueRef *c1) {
  strip_loop(g, chunk, start, E, c0, c1);
  LLVMValueRef at = c64(g, 0), all = E;        /* the strip's first element in the pass, and the pass's */
  for (int a = 0; a < st->naxes - 1; a++) {
    LLVMValueRef n = load_i64(g, g->ext, st->axes[a]);
    at = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, at, n, ""), g->axv[st->axes[a]], "");
    all = LLVMBuildMul(g->b, all, n, "");
  }
  at = LLVMBuildMul(g->b, at, E, "");
  prefetch_span(g, kn, mark, LLVMBuildAdd(g->b, at, *c0, ""), LLVMBuildAdd(g->b, at, *c1, ""), all);
}

/* Software prefetch in elementwise kernels whose stage computes a transcendental function
 * per element (gelu, silu, sigmoid: bound by their arithmetic in cache, by memory beyond).
 * The hardware's streaming prefetcher follows a run only within a 4 KiB page; a loop that
 * streams fast enough keeps each page's run started in time, but one busy with arithmetic
 * reaches every new page with nothing fetched, and waits a memory latency for it.  So the
 * innermost loop is cut into strips of PREFETCH_STRIP elements, and each strip first asks
 * for the lines its inputs have PREFETCH_AHEAD bytes further on: a page ahead.  2 threads of
 * an Emerald Rapids guest, :time medians, the share of the calibrated memory bandwidth
 * (inputs and results counted once), without -> with, two runs: gelu of f32[4096, 4096]
 * 55-56% -> 118-122%, silu of f32[4096, 6144] 55-56% -> 73-89%, x * sigmoid(x) over
 * f32[16777216] 54-59% -> 131-132%; a quarter, half and twice a page ahead did no better
 * (gelu 65-74%, 88-93%, 77-109%). */
#define PREFETCH_AHEAD 4096

/* The loads of the stage's expression along axis whose subscripts are all plain axes, one a
 * slot (at most 8). */
static void ahead_loads(const KExpr *e, int axis, const KExpr **out, int *n) {
  if (e->kind == KX_LOAD && e->n >= 1 && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == axis && *n < 8) {
    bool plain = true;
    for (int i = 0; i < e->n; i++) plain = plain && e->a[i]->kind == KX_AXIS;
    for (int i = 0; plain && i < *n; i++) plain = out[i]->slot != e->slot;
    if (plain) out[(*n)++] = e;
  }
  for (int i = 0; i < e->n; i++) ahead_loads(e->a[i], axis, out, n);
}

/* Open the loop over the strips of [start, E) (close it with loop_end on *chunk), set
 * [*c0, *c1) to the current strip, and ask for the lines PREFETCH_AHEAD bytes past the
 * strip's first element of each input the stage reads along its innermost axis. */
static void ahead_begin(G *g, const Stage *st, Loop *chunk, LLVMValueRef start, LLVMValueRef E, LLVMValueRef *c0,
                        LLVMValueRef *c1) {
  int ax = st->axes[st->naxes - 1];
  strip_loop(g, chunk, start, E, c0, c1);
  const KExpr *lds[8];
  int n = 0;
  ahead_loads(st->expr, ax, lds, &n);
  for (int i = 0; i < n; i++) {
    if (g->p->slots[lds[i]->slot].kind == SLOT_LOCAL) continue;
    LLVMValueRef subs[DYN_MAX_RANK];
    for (int j = 0; j < lds[i]->n; j++) subs[j] = lds[i]->a[j]->axis == ax ? *c0 : g->axv[lds[i]->a[j]->axis];
    LLVMValueRef at = elem_ptr(g, lds[i]->slot, subs, lds[i]->n);
    int64_t es = elem_size(g->p->slots[lds[i]->slot].type.elem);
    for (int64_t b = 0; b < PREFETCH_STRIP * es; b += 64)
      prefetch(g, LLVMBuildGEP2(g->b, g->i8, at, (LLVMValueRef[]){c64(g, PREFETCH_AHEAD + b)}, 1, ""));
  }
}

/* A float sum fused into a strip-mined pass over a row (strip_begin) sums each strip into
 * a fresh accumulator, which the vectoriser spreads over its lanes, and adds the strip's
 * total at its end into the row's, kept in f64.  With one accumulator for the row every
 * strip's vector loop started from the running total in one lane, which then took each of
 * its terms against a much larger sum: the error grew with the row, to 2e-4 of softmax's
 * result over 9,000,001 elements (1e-5 at 3,000,000).  Costs an f64 add per strip. */
static bool split_sum(const KExpr *red, bool strip) {
  return strip && red && red->red == RED_SUM && elem_is_float(red->ty);
}

/* The row's accumulator of a split sum, zeroed here. */
static LLVMValueRef row_sum_begin(G *g) {
  LLVMValueRef r = entry_alloca(g, g->f64);
  LLVMBuildStore(g->b, fconst(g, g->f64, 0), r);
  return r;
}

/* row += strip, and the strip's accumulator starts again. */
static void row_sum_fold(G *g, const KExpr *red, LLVMValueRef row, LLVMValueRef strip) {
  LLVMTypeRef t = ty_of(g, red->ty);
  LLVMValueRef x = LLVMBuildLoad2(g->b, t, strip, "");
  if (t != g->f64) x = LLVMBuildFPExt(g->b, x, g->f64, "");
  LLVMBuildStore(g->b, LLVMBuildFAdd(g->b, LLVMBuildLoad2(g->b, g->f64, row, ""), x, ""), row);
  LLVMBuildStore(g->b, red_init(g, red, t), strip);
}

/* The row's total in the reduction's type. */
static LLVMValueRef row_sum_end(G *g, const KExpr *red, LLVMValueRef row) {
  LLVMTypeRef t = ty_of(g, red->ty);
  LLVMValueRef x = LLVMBuildLoad2(g->b, g->f64, row, "");
  return t == g->f64 ? x : LLVMBuildFPTrunc(g->b, x, t, "");
}

/* The body of stage st at the current loop indices: its value, stored; a fused reduction
 * (see fusable_reduce) takes a step. */
static void gen_body(G *g, const Kernel *kn, const Stage *st, const KExpr *red, LLVMValueRef acc, bool vol) {
  LLVMValueRef v = gen(g, st->expr, NULL, false);
  LLVMValueRef subs[DYN_MAX_RANK * 2];
  int n = 0;
  for (int o = 0; o < kn->nouter; o++) subs[n++] = g->axv[kn->outer[o]];
  for (int a = 0; a < st->naxes; a++) subs[n++] = g->axv[st->axes[a]];
  gen_store(g, st->out, subs, n, v, st->expr->ty, vol);
  if (red) {
    for (int a = 0; a < st->naxes; a++) g->axv[red->raxes[a]] = g->axv[st->axes[a]];
    red_step(g, red, acc, gen(g, red->a[0], NULL, false));
  }
}

/* The elements before the first 64-byte boundary of the row of stage st's output that the
 * current indices are in (at most E): the streaming twin writes those with plain scalar
 * stores, so that its vector stores start on a line. */
static LLVMValueRef to_line(G *g, const Kernel *kn, const Stage *st, LLVMValueRef E) {
  LLVMValueRef subs[DYN_MAX_RANK * 2];
  int n = 0;
  for (int o = 0; o < kn->nouter; o++) subs[n++] = g->axv[kn->outer[o]];
  for (int a = 0; a + 1 < st->naxes; a++) subs[n++] = g->axv[st->axes[a]];
  subs[n++] = c64(g, 0);
  int64_t es = elem_size(g->p->slots[st->out].type.elem);
  LLVMValueRef addr = LLVMBuildPtrToInt(g->b, elem_ptr(g, st->out, subs, n), g->i64, "");
  LLVMValueRef gap = LLVMBuildAnd(g->b, LLVMBuildSub(g->b, c64(g, 0), addr, ""), c64(g, 63), "");
  LLVMValueRef k = LLVMBuildSDiv(g->b, gap, c64(g, es), "");
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, k, E, ""), k, E, "");
}

static void gen_piped(G *g, const Kernel *kn, int par_axis, bool twin, int F, LLVMValueRef lo, LLVMValueRef hi);

/* Does e load slot? */
static bool reads_slot(const KExpr *e, int slot) {
  if (e->kind == KX_LOAD && e->slot == slot) return true;
  for (int i = 0; i < e->n; i++)
    if (reads_slot(e->a[i], slot)) return true;
  return false;
}

/* Row pipelining.  In softmax the pass that writes a row's result (Y = e / s) only stores:
 * its time is the core's stores to memory, while the pass before it (e = exp(x - m), its
 * sum fused in) is all arithmetic, so each row spends one phase on memory and one on
 * arithmetic.  A pipelined kernel writes row b - 1's result in the same loop as it
 * computes row b's e, so that the stores overlap the arithmetic; the per-row locals are
 * kept twice, by the parity of the row.  It applies to a chain of one row axis (the one
 * split across threads) whose stages are per-row values except two over the row: a stage
 * F with the reduction of stage F+1 fused into its loop, and the last stage, over an axis
 * of the same extent, writing the result, which nothing else in the kernel reads or
 * writes.  Returns F, or -1.
 * Measured on Zen 5 with 2 threads, old and new alternating: softmax over 128 x 50257 went
 * from 1.31-1.36 to 1.24-1.30 ms, 4096 x 4096 unchanged (and to 0.93-1.03 ms once the
 * per-row locals stopped being allocated per task, cpu_rt.c's run_task).  What is left is mostly
 * exp's arithmetic: on data in cache softmax costs about 0.25 ns an element a core, 0.8 ms
 * of a thread's 3.2 M elements there, where a kernel that only streams (X * 2 + 1) takes
 * 0.5 ms over the same shape. */
static bool any_interchanged(const Program *p, const Kernel *kn, int par_axis);

static int piped_stage(const Program *p, const Kernel *kn, int par_axis) {
  if (kn->nouter != 1 || kn->outer[0] != par_axis || kn->nstages < 3) return -1;
  int L = kn->nstages - 1, F = L - 2;
  const Stage *sl = &kn->stages[L], *sf = &kn->stages[F];
  if (sl->naxes != 1 || sf->naxes != 1 || kn->stages[L - 1].naxes != 0 ||
      p->axes[sl->axes[0]].extent != p->axes[sf->axes[0]].extent || sl->axes[0] == par_axis ||
      p->slots[sl->out].kind == SLOT_LOCAL || reads_slot(sl->expr, sl->out) ||
      !fusable_reduce(p, kn, F, par_axis) || any_interchanged(p, kn, par_axis))
    return -1;
  for (int s = 0; s < L; s++)
    if ((s != F && kn->stages[s].naxes != 0) || p->slots[kn->stages[s].out].kind != SLOT_LOCAL ||
        reads_slot(kn->stages[s].expr, sl->out))
      return -1;
  return F;
}

static void gen_stages(G *g, const Kernel *kn, int par_axis, bool twin, LLVMValueRef lo, LLVMValueRef hi);

/* The vector width of a kernel's loops is the hardware model's vector_bits, set as LLVM's
 * "prefer-vector-width", not LLVM's default for the CPU: that default is 256 bits on Intel's
 * AVX-512 cores (Skylake-SP to Sapphire Rapids, for the clock they lose under 512-bit load),
 * which would leave half of each register unused where the model says the cores have
 * full-width units; the model's figures (ghz, fma_units) already count that clock, and a
 * part that does better at 256 is described by a file with vector_bits = 256.  On an AVX2
 * host, 256 bits against 128 ran softmax 1.4x and gelu, silu and sin/cos/log 2x faster,
 * and a copy as fast.  See hw/README.md, "Vector width", for the rule and the figures. */
static void set_vector_width(LLVMValueRef fn, int bits) {
  if (bits <= 0) return;
  char w[16];
  snprintf(w, sizeof w, "%d", bits);
  irb_fn_string_attr(fn, "prefer-vector-width", w);
  /* Divisions may use exact reciprocals (fast: x / s as x * (1/s)), never the targets'
   * estimates: with them 1.0 / sqrt(x) became an rsqrtps estimate, NaN at x = 0. */
  irb_fn_string_attr(fn, "reciprocal-estimates", "none");
}

/* The function of one kernel; twin: the streaming twin (see cpu_compile.c's
 * mark_streaming), whose last stage starts each row's vector loop on a 64-byte boundary;
 * F: piped_stage's answer. */
static void gen_kernel(G *g, const Kernel *kn, const char *sym, int par_axis, bool twin, int F) {
  LLVMTypeRef ps[3] = {g->ptr, g->i64, g->i64};
  LLVMTypeRef ft = LLVMFunctionType(g->void_, ps, 3, 0);
  g->fn = LLVMAddFunction(g->m, sym, ft);
  g->kn = kn;
  set_vector_width(g->fn, g->vector_bits);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->cx, g->fn, "entry");
  LLVMPositionBuilderAtEnd(g->b, entry);
  g->ctx = LLVMGetParam(g->fn, 0);
  LLVMValueRef lo = LLVMGetParam(g->fn, 1), hi = LLVMGetParam(g->fn, 2);
  LLVMValueRef *fields[] = {&g->bufs, &g->strides, &g->ext, &g->szv, &g->shape};
  for (int i = 0; i < 5; i++) {
    LLVMValueRef idx = c64(g, i);
    LLVMValueRef p = LLVMBuildGEP2(g->b, g->ptr, g->ctx, &idx, 1, "");
    *fields[i] = LLVMBuildLoad2(g->b, g->ptr, p, "");
  }
  g->err_acc = LLVMBuildAlloca(g->b, g->i1, "err");
  LLVMBuildStore(g->b, LLVMConstInt(g->i1, 0, 0), g->err_acc);
  /* the entry block only loads the context; the code starts in the next block */
  LLVMBasicBlockRef start = LLVMAppendBasicBlockInContext(g->cx, g->fn, "start");
  LLVMBuildBr(g->b, start);
  LLVMPositionBuilderAtEnd(g->b, start);
  if (g->memo) memset(g->memo, 0, sizeof(LLVMValueRef) * (size_t)g->nmemo);
  if (F >= 0) gen_piped(g, kn, par_axis, twin, F, lo, hi);
  else gen_stages(g, kn, par_axis, twin, lo, hi);
  /* report a detected error */
  LLVMValueRef bad = LLVMBuildLoad2(g->b, g->i1, g->err_acc, "");
  LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->cx, g->fn, "error");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->cx, g->fn, "ret");
  LLVMBuildCondBr(g->b, bad, yes, done);
  LLVMPositionBuilderAtEnd(g->b, yes);
  LLVMValueRef idx = c64(g, 5);
  LLVMValueRef ep = LLVMBuildLoad2(g->b, g->ptr, LLVMBuildGEP2(g->b, g->ptr, g->ctx, &idx, 1, ""), "");
  LLVMBuildStore(g->b, LLVMConstInt(g->i32, 1, 0), ep);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  LLVMBuildRetVoid(g->b);
}

/* ---- a reduction under its vector axis ----
 * A stage whose value is a reduction gets its loops in the order written: the stage's
 * axes, then the reduction's, innermost -- and the innermost loop is the one LLVM
 * vectorises.  Where the reduction walks an operand across rows (column sums, s[n] =
 * sum[b] X[b, n]) or over a short window (a convolution's kernel taps) while the stage's
 * last axis runs along the rows of every operand that depends on it, the loops are
 * interchanged: the result's row is set to the reduction's start, then each step of the
 * reduction updates the whole row, a loop over the stage's last axis that vectorises with
 * unit stride.  With the taps innermost (scalar loops of 3), conv2d over 8 x 32 x 56 x 56
 * with 64 3x3 filters took 545 ms, interchanged 20 ms (with its padding kept as a tensor,
 * see lower.c); conv1d over 16 x 64 x 1000 with 64 5-tap filters 245 ms -> 8 ms, 3x3
 * max pooling 16 -> 2.5 ms, column sums of 512 x 3000 0.85 -> 0.07 ms. */

/* Does every load in e that depends on axis v have v in its last subscript only? */
static bool along_rows(const KExpr *e, int v, int *loads) {
  if (e->kind == KX_LOAD && (e->axmask >> (v % 64) & 1)) {
    for (int i = 0; i + 1 < e->n; i++)
      if (e->a[i]->axmask >> (v % 64) & 1) return false;
    ++*loads;
  }
  for (int i = 0; i < e->n; i++)
    if (!along_rows(e->a[i], v, loads)) return false;
  return true;
}

/* Is stage s of kn built interchanged: its value a reduction over axes other than the
 * stage's last one (or arithmetic on one, applied to the row in a pass after it), which
 * every operand depending on it reads along its rows, and no reduction of the next stage
 * fused into its loop (which needs its elements in order)?  The row holds the partial
 * results, so the reduction's type is the stage's.  (avgpool2d's division kept its 3 x 3
 * windows innermost, in scalar loops of 3: 17 ms over 8 x 64 x 56 x 56 on one thread of a
 * Zen 4 guest, where max pooling, interchanged, took 0.6.) */
bool cpu_interchanged(const Program *p, const Kernel *kn, int s, int par_axis) {
  const Stage *st = &kn->stages[s];
  const KExpr *e = inner_reduce(st->expr);
  if (st->naxes < 1 || !e || e->ty == DYN_BOOL || elem_is_half(e->ty) || p->slots[st->out].type.elem != e->ty ||
      st->expr->ty != e->ty || fusable_reduce(p, kn, s, par_axis))
    return false;
  int v = st->axes[st->naxes - 1], loads = 0;
  for (int i = 0; i < e->nraxes; i++)
    if (e->raxes[i] == v) return false;
  return along_rows(e->a[0], v, &loads) && loads > 0;
}

/* Any stage of kn interchanged? */
static bool any_interchanged(const Program *p, const Kernel *kn, int par_axis) {
  for (int s = 0; s < kn->nstages; s++)
    if (cpu_interchanged(p, kn, s, par_axis)) return true;
  return false;
}

/* Stage st, interchanged, at the current outer indices ([lo, hi) of the parallel axis). */
static void gen_interchanged(G *g, const Kernel *kn, const Stage *st, int par_axis, LLVMValueRef lo, LLVMValueRef hi) {
  const KExpr *e = inner_reduce(st->expr);
  int nv = st->naxes - 1, v = st->axes[nv], no = kn->nouter;
  Loop L[DYN_MAX_RANK], R[DYN_MAX_RANK * 2], V;
  LLVMValueRef subs[DYN_MAX_RANK * 2];
  for (int o = 0; o < no; o++) subs[o] = g->axv[kn->outer[o]];
  for (int a = 0; a < nv; a++) {
    bool par = st->axes[a] == par_axis;
    subs[no + a] = g->axv[st->axes[a]] = loop_begin(g, &L[a], par ? lo : c64(g, 0), par ? hi : load_i64(g, g->ext, st->axes[a]));
  }
  LLVMValueRef v0 = v == par_axis ? lo : c64(g, 0), v1 = v == par_axis ? hi : load_i64(g, g->ext, v);
  int n = no + st->naxes;
  subs[n - 1] = loop_begin(g, &V, v0, v1);
  gen_store(g, st->out, subs, n, red_init(g, e, ty_of(g, e->ty)), e->ty, false);
  loop_end(g, &V);
  for (int i = 0; i < e->nraxes; i++)
    g->axv[e->raxes[i]] = loop_begin(g, &R[i], c64(g, 0), load_i64(g, g->ext, e->raxes[i]));
  subs[n - 1] = g->axv[v] = loop_begin(g, &V, v0, v1);
  red_step(g, e, elem_ptr(g, st->out, subs, n), gen(g, e->a[0], NULL, false));
  loop_end(g, &V);
  for (int i = e->nraxes - 1; i >= 0; i--) loop_end(g, &R[i]);
  if (e != st->expr) {       /* the arithmetic on the reduction, over the row of its results */
    subs[n - 1] = g->axv[v] = loop_begin(g, &V, v0, v1);
    g->fused_red = e;
    g->fused_val = LLVMBuildLoad2(g->b, ty_of(g, e->ty), elem_ptr(g, st->out, subs, n), "");
    gen_store(g, st->out, subs, n, gen(g, st->expr, NULL, false), e->ty, false);
    g->fused_red = NULL;
    loop_end(g, &V);
  }
  for (int a = nv - 1; a >= 0; a--) loop_end(g, &L[a]);
}

/* ---- layout changes, transposed in registers ----
 * A stage that stores along one axis (v: its innermost loop, the result's rows) while it
 * loads a tensor along another (u: that tensor's rows) -- a transpose, a permutation that
 * moves the last axis -- reads one element of each input line per iteration.  Looped
 * plainly, a row of the result touches a line and a page of the input per element, and
 * rows a power of two apart fall into one cache set: T = transpose(W) of 4096 x 4096 f32
 * ran at 2.2 GB/s; blocking the loops alone (tiles of 32 x 64) still ran at a tenth of a
 * copy, the 64 rows of a tile evicting each other from their set.
 * So the stage runs in tiles of W x W elements (W: the vector's lanes at the model's
 * width, at most 16): the first loop computes the tile along u, a whole input line at a
 * time, into a W x W buffer on the stack (loops of a constant trip count, so each row is
 * one vector); then the buffer is transposed in registers, log2(W) rounds of two-vector
 * shuffles that each swap one bit of the row and column index, and stored along v, a whole
 * output line at a time.  Each line of the input and of the output is touched once per
 * tile and used whole.  The tiles are walked in blocks of u and bands of v (cpu_layout.c's
 * cpu_layout_block and cpu_layout_band), so that each input row is read and each result row
 * written in runs of several lines at a time; the task's share of u is whole tiles
 * (cpu_layout_granule, cpu_rt.c's split).  Tiles cut by an edge run whole, shifted back to
 * end at it (gen_blocked).  Measured on
 * 4096 x 4096 f32, 2 threads: 60 ms plainly, 10-13 ms tiled (a copy: 2-3 ms); on a host
 * without transparent huge pages each tile still touches 2W pages.  The streaming twin
 * streams a whole tile's rows where they start on the vector's size (a tile writes each of
 * its result lines whole, so none is read for ownership).  In cache, a tile costs its
 * shuffles, and more when its rows crowd one set of the L1 (cpu_layout.c's model). */

static bool plain_load_of(const KExpr *e, int u, int v) {
  if (e->kind == KX_LOAD && e->n >= 2 && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == u) {
    for (int i = 0; i + 1 < e->n; i++)
      if (e->a[i]->kind == KX_AXIS && e->a[i]->axis == v) return true;
  }
  for (int i = 0; i < e->n; i++)
    if (plain_load_of(e->a[i], u, v)) return true;
  return false;
}

/* Does stage s take gen_stages' last path, a loop nest that LLVM's loop vectoriser
 * vectorises along the stage's last axis (every plan above it declined)? */
bool cpu_stage_plain(const HwModel *h, const Program *p, const Kernel *kn, int s, int par_axis) {
  const Stage *st = &kn->stages[s];
  CpuShortPlan sp;
  CpuRedPlan rp;
  return st->naxes > 0 && st->expr->kind != KX_SCAN && !cpu_reduce_short_plan(p, kn, s, &sp) &&
         !cpu_reduce_rows_plan(h, p, kn, s, &sp) && !cpu_reduce_plan(p, kn, s, par_axis, &rp) &&
         !cpu_interchanged(p, kn, s, par_axis) && cpu_blocked_axis(kn, st) < 0;
}

/* The axis u along which stage st of a kernel without outer loops loads a tensor's rows
 * while it stores along another, or -1 when the stage is not such a layout change (or
 * reduces, which its own loop nests handle, or stores bools or 16-bit floats, or reads what
 * it writes: its tiles cut by an edge compute some elements twice, gen_blocked). */
int cpu_blocked_axis(const Kernel *kn, const Stage *st) {
  if (kn->nouter || st->naxes < 2 || cpu_count_reduces(st->expr) || st->expr->ty == DYN_BOOL || elem_is_half(st->expr->ty) ||
      reads_slot(st->expr, st->out))
    return -1;
  int v = st->axes[st->naxes - 1];
  for (int a = 0; a + 1 < st->naxes; a++)
    if (plain_load_of(st->expr, st->axes[a], v)) return st->axes[a];
  return -1;
}

/* The tile's side: the lanes of a vector of the stage's type at the model's width. */
int cpu_tile_lanes(int vector_bits, DynElem ty) {
  int w = (vector_bits > 0 ? vector_bits : 256) / (8 * elem_size(ty));
  return w > 16 ? 16 : w < 2 ? 2 : w;
}

static LLVMValueRef smin64(G *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, a, b, ""), a, b, "");
}

/* rows[0..w) := their transpose, each round swapping bit b of the row and column index:
 * row i (bit b clear) and row i + b exchange row i's columns with bit b set for row i + b's
 * columns with it clear. */
static void transpose_rows(G *g, LLVMValueRef *rows, int w) {
  LLVMValueRef lo[16], hi[16];
  for (int b = w / 2; b >= 1; b /= 2)
    for (int i = 0; i < w; i++) {
      if (i & b) continue;
      for (int c = 0; c < w; c++) {
        lo[c] = LLVMConstInt(g->i32, (unsigned long long)((c & b) ? w + c - b : c), 0);
        hi[c] = LLVMConstInt(g->i32, (unsigned long long)((c & b) ? w + c : c + b), 0);
      }
      LLVMValueRef a = rows[i], d = rows[i + b];
      rows[i] = LLVMBuildShuffleVector(g->b, a, d, LLVMConstVector(lo, (unsigned)w), "");
      rows[i + b] = LLVMBuildShuffleVector(g->b, a, d, LLVMConstVector(hi, (unsigned)w), "");
    }
}

/* The part [ulo, uhi) x [vlo, vhi) of a layout change by its plain loops, the longer side
 * inside, then a branch to next.  (With v always inside, the 16 x 1 tiles of a 1 x 768
 * matrix paid an inner loop's set-up for every element: 1.8 us for its transpose, 0.57 us
 * for that of a 768 x 1 one.) */
#define THIN 256
static void gen_edge(G *g, const Kernel *kn, const Stage *st, int u, int v, LLVMValueRef ulo, LLVMValueRef uhi,
                     LLVMValueRef vlo, LLVMValueRef vhi, bool twin, LLVMBasicBlockRef next) {
  int eax[2] = {u, v};                                   /* 0: u, 1: v */
  LLVMValueRef elo[2] = {ulo, vlo}, ehi[2] = {uhi, vhi};
  LLVMBasicBlockRef in_blk[2] = {LLVMAppendBasicBlockInContext(g->cx, g->fn, "edge.u"),
                                 LLVMAppendBasicBlockInContext(g->cx, g->fn, "edge.v")};
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, LLVMBuildSub(g->b, vhi, vlo, ""), LLVMBuildSub(g->b, uhi, ulo, ""), ""),
                  in_blk[1], in_blk[0]);
  for (int in = 0; in < 2; in++) {                      /* the inner axis */
    Loop EL[2];
    LLVMPositionBuilderAtEnd(g->b, in_blk[in]);
    g->axv[eax[1 - in]] = loop_begin(g, &EL[1 - in], elo[1 - in], ehi[1 - in]);
    g->axv[eax[in]] = loop_begin(g, &EL[in], elo[in], ehi[in]);
    gen_body(g, kn, st, NULL, NULL, twin);
    loop_end(g, &EL[in]);
    loop_end(g, &EL[1 - in]);
    LLVMBuildBr(g->b, next);
  }
}

/* The load of a tensor along u by its axes alone (X[..., v, ..., u]), whose lines a tile
 * reads from rows a stride apart: the hardware prefetchers, which follow a few long runs,
 * fetch them late.  Prefetching each input line of the tile two tiles ahead along u, T =
 * transpose(W) of f32[4096, 4096] on 2 threads of Zen 5 ran 2.0-2.3 ms against 2.4-3.9
 * (one thread 4.9-5.1 against 5.6-7.4; three rounds, in turn; a copy of the same bytes
 * 0.9-1.0 and 2.3), f32[2048, 768] 82-92 against 95-100 us.  In cache they cost their
 * instructions (f32[512, 512]: 22-27 -> 26-30 us), so only the streaming twin has them. */
#define PREFETCH_TILES 2
static const KExpr *tile_load(const KExpr *e, int u) {
  const KExpr *l = cpu_layout_load(e, u);
  for (int i = 0; l && i < l->n; i++)
    if (l->a[i]->kind != KX_AXIS) return NULL;
  return l;
}

/* A tile's values into buf (buf[v - vb][u - ub], along u; nv rows, at most w, of w), then
 * its rows loaded, transposed in registers, and the address of each result row (at
 * u = ub + r, v = vb).  The loop along u has the constant trip count w, so that each row of
 * the buffer is one vector. */
static void tile_rows(G *g, const Stage *st, int u, int v, LLVMValueRef ub, LLVMValueRef vb, LLVMValueRef nv, LLVMValueRef buf,
                      int w, LLVMValueRef *rows, LLVMValueRef *at_row) {
  DynElem ty = st->expr->ty;
  LLVMTypeRef et = ty_of(g, ty), vt = LLVMVectorType(et, (unsigned)w), bt = LLVMArrayType(et, (unsigned)(w * w));
  Loop U, V;
  LLVMValueRef dv = loop_begin(g, &V, c64(g, 0), nv);
  g->axv[v] = LLVMBuildAdd(g->b, vb, dv, "");
  LLVMValueRef du = loop_begin(g, &U, c64(g, 0), c64(g, w));
  g->axv[u] = LLVMBuildAdd(g->b, ub, du, "");
  LLVMValueRef val = gen(g, st->expr, NULL, false);
  LLVMValueRef at[2] = {c64(g, 0), LLVMBuildAdd(g->b, LLVMBuildMul(g->b, dv, c64(g, w), ""), du, "")};
  LLVMBuildStore(g->b, val, LLVMBuildGEP2(g->b, bt, buf, at, 2, ""));
  loop_end(g, &U);
  loop_end(g, &V);
  for (int r = 0; r < w; r++) {
    LLVMValueRef ix[2] = {c64(g, 0), c64(g, (int64_t)r * w)};
    LLVMValueRef ld = LLVMBuildLoad2(g->b, vt, LLVMBuildGEP2(g->b, bt, buf, ix, 2, ""), "");
    LLVMSetAlignment(ld, (unsigned)elem_size(ty));
    rows[r] = ld;
  }
  transpose_rows(g, rows, w);
  LLVMValueRef subs[DYN_MAX_RANK];
  for (int r = 0; r < w; r++) {
    g->axv[u] = LLVMBuildAdd(g->b, ub, c64(g, r), "");
    g->axv[v] = vb;
    for (int a = 0; a < st->naxes; a++) subs[a] = g->axv[st->axes[a]];
    at_row[r] = elem_ptr(g, st->out, subs, st->naxes);
  }
}

/* A whole tile's rows (transposed) to their result rows, then a branch to next; in the twin
 * (the streaming one: stream not NULL), streamed where stream holds and they start on the
 * vector's size (the result's start and its row stride, checked per tile), else volatile,
 * which mark_streaming leaves alone. */
static void store_tile(G *g, DynElem ty, int w, LLVMValueRef *rows, LLVMValueRef *at_row, LLVMValueRef stream,
                       LLVMBasicBlockRef next) {
  unsigned bytes = (unsigned)(w * elem_size(ty));
  if (stream) {
    LLVMValueRef a0 = LLVMBuildPtrToInt(g->b, at_row[0], g->i64, "");
    LLVMValueRef step = LLVMBuildSub(g->b, LLVMBuildPtrToInt(g->b, at_row[1], g->i64, ""), a0, "");
    LLVMValueRef odd = LLVMBuildAnd(g->b, LLVMBuildOr(g->b, a0, step, ""), c64(g, bytes - 1), "");
    LLVMBasicBlockRef nt = LLVMAppendBasicBlockInContext(g->cx, g->fn, "nt");
    LLVMBasicBlockRef vol = LLVMAppendBasicBlockInContext(g->cx, g->fn, "vol");
    LLVMBuildCondBr(g->b, LLVMBuildAnd(g->b, stream, LLVMBuildICmp(g->b, LLVMIntEQ, odd, c64(g, 0), ""), ""), nt, vol);
    LLVMPositionBuilderAtEnd(g->b, nt);
    unsigned kind = LLVMGetMDKindIDInContext(g->cx, "nontemporal", 11);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(g->i32, 1, 0));
    for (int r = 0; r < w; r++) {
      LLVMValueRef sto = LLVMBuildStore(g->b, rows[r], at_row[r]);
      LLVMSetAlignment(sto, bytes);
      LLVMSetMetadata(sto, kind, LLVMMetadataAsValue(g->cx, LLVMMDNodeInContext2(g->cx, &one, 1)));
    }
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, vol);
  }
  for (int r = 0; r < w; r++) {
    LLVMValueRef sto = LLVMBuildStore(g->b, rows[r], at_row[r]);
    LLVMSetAlignment(sto, (unsigned)elem_size(ty));
    if (stream) LLVMSetVolatile(sto, 1);
  }
  LLVMBuildBr(g->b, next);
}

/* A tile's rows stored where a tile shifted back over its neighbours' elements has new
 * ones: row r where r >= skip, lanes [lo, hi) of it, by masked stores (never streamed), so
 * that no line is written twice (a streamed line written again by a plain store, or the
 * reverse, goes to memory and back). */
static void store_tile_masked(G *g, DynElem ty, int w, LLVMValueRef *rows, LLVMValueRef *at_row, LLVMValueRef skip,
                              LLVMValueRef lo, LLVMValueRef hi) {
  LLVMTypeRef vt = LLVMTypeOf(rows[0]), mt = LLVMVectorType(LLVMInt1TypeInContext(g->cx), (unsigned)w), ov[2] = {vt, g->ptr}, ft;
  LLVMValueRef lane[16], fn = irb_intrinsic(g->m, "llvm.masked.store", ov, 2, &ft);
  for (int c = 0; c < w; c++) lane[c] = LLVMConstInt(g->i64, (unsigned long long)c, 0);
  LLVMValueRef lanes = LLVMConstVector(lane, (unsigned)w), slo = LLVMGetUndef(LLVMVectorType(g->i64, (unsigned)w)), shi = slo;
  for (int c = 0; c < w; c++) {
    slo = LLVMBuildInsertElement(g->b, slo, lo, LLVMConstInt(g->i32, (unsigned long long)c, 0), "");
    shi = LLVMBuildInsertElement(g->b, shi, hi, LLVMConstInt(g->i32, (unsigned long long)c, 0), "");
  }
  LLVMValueRef mask = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, lanes, slo, ""),
                                   LLVMBuildICmp(g->b, LLVMIntSLT, lanes, shi, ""), "");
  for (int r = 0; r < w; r++) {
    LLVMValueRef on = LLVMBuildICmp(g->b, LLVMIntSGE, c64(g, r), skip, "");
    LLVMValueRef args[4] = {rows[r], at_row[r], LLVMConstInt(g->i32, (unsigned long long)elem_size(ty), 0),
                            LLVMBuildSelect(g->b, on, mask, LLVMConstNull(mt), "")};
    LLVMBuildCall2(g->b, ft, fn, args, 4, "");
  }
}

/* twin: the streaming twin's (cpu_compile.c's mark_streaming), whose whole tiles stream
 * their rows where the result's rows are whole vectors and start on the vector's size (the
 * result's start and its row stride, checked per tile; store_tile), and whose other stores
 * are volatile or masked, which mark_streaming leaves alone. */
static void gen_blocked(G *g, const Kernel *kn, const Stage *st, int par_axis, int u, bool twin, LLVMValueRef lo, LLVMValueRef hi) {
  int nv = st->naxes - 1, v = st->axes[nv];
  DynElem ty = st->expr->ty;
  int w = cpu_tile_lanes(g->vector_bits, ty);
  LLVMTypeRef et = ty_of(g, ty);
  LLVMValueRef buf = entry_alloca(g, LLVMArrayType(et, (unsigned)(w * w)));
  LLVMSetAlignment(buf, 64);
  Loop L[DYN_MAX_RANK], UB, VB;
  for (int a = 0; a < nv; a++) {
    int ax = st->axes[a];
    if (ax == u) continue;
    bool par = ax == par_axis;
    g->axv[ax] = loop_begin(g, &L[a], par ? lo : c64(g, 0), par ? hi : load_i64(g, g->ext, ax));
  }
  LLVMValueRef u0 = u == par_axis ? lo : c64(g, 0), u1 = u == par_axis ? hi : load_i64(g, g->ext, u);
  LLVMValueRef v0 = v == par_axis ? lo : c64(g, 0), v1 = v == par_axis ? hi : load_i64(g, g->ext, v);
  /* blocks of u (cpu_layout_block), in each the bands of v (cpu_layout_band tiles wide),
   * and in a band the tiles along u, then along v: the band reads its input rows in runs of
   * the block and writes its result rows in runs of the band (cpu_layout.c) */
  Loop UK, VT;
  int64_t bk = cpu_layout_block(g->hw, ty, w), bw = (int64_t)cpu_layout_band(g->hw, ty, w) * w;
  /* a side shorter than a tile: every tile is cut, and the whole runs as cut tiles THIN
   * long, the longer side inside (a transpose of 1 x 768 is then three loops of 256, not 48
   * of 16), short enough that a strided side's lines stay in L1 (as one cut tile, 1000 long,
   * the transpose of 15 x 1000 took twice as long as in tiles of 16) */
  LLVMValueRef thin = LLVMBuildOr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, LLVMBuildSub(g->b, u1, u0, ""), c64(g, w), ""),
                                  LLVMBuildICmp(g->b, LLVMIntSLT, LLVMBuildSub(g->b, v1, v0, ""), c64(g, w), ""), "");
  LLVMBasicBlockRef thin_b = LLVMAppendBasicBlockInContext(g->cx, g->fn, "thin");
  LLVMBasicBlockRef tiles_b = LLVMAppendBasicBlockInContext(g->cx, g->fn, "tiles");
  LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(g->cx, g->fn, "layout.done");
  LLVMBuildCondBr(g->b, thin, thin_b, tiles_b);
  LLVMPositionBuilderAtEnd(g->b, thin_b);
  {
    Loop TU, TV;
    LLVMBasicBlockRef cut = LLVMAppendBasicBlockInContext(g->cx, g->fn, "thin.next");
    LLVMValueRef tu = loop_begin(g, &TU, u0, u1), tv = loop_begin(g, &TV, v0, v1);
    gen_edge(g, kn, st, u, v, tu, smin64(g, LLVMBuildAdd(g->b, tu, c64(g, THIN), ""), u1), tv,
             smin64(g, LLVMBuildAdd(g->b, tv, c64(g, THIN), ""), v1), twin, cut);
    LLVMPositionBuilderAtEnd(g->b, cut);
    loop_end_by(g, &TV, THIN);
    loop_end_by(g, &TU, THIN);
    LLVMBuildBr(g->b, after);
  }
  LLVMPositionBuilderAtEnd(g->b, tiles_b);
  LLVMValueRef uk = loop_begin(g, &UK, u0, u1);
  LLVMValueRef uke = smin64(g, LLVMBuildAdd(g->b, uk, c64(g, bk), ""), u1);
  /* The twin streams a tile only where the result's rows are whole vectors: the stores of a
   * row's last vector (shifted back, or masked) reach into the line streamed before it, and
   * a streamed line read again for ownership goes out to memory and back.  [A, D, B, C] of
   * f32[64, 56, 56, 64], 2 threads of an Emerald Rapids guest: 8.9-9.3 ms streaming the
   * tiles that started on a vector, 3.6-4.0 streaming none of such a row's. */
  LLVMValueRef stream = twin ? LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildSRem(g->b, LLVMBuildSub(g->b, v1, v0, ""), c64(g, w), ""),
                                             c64(g, 0), "")
                             : NULL;
  /* Where the target masks a store's lanes and the result's rows step by whole vectors
   * along u, the tiles along v start where those rows start on a vector's size, so that each tile stores whole lines, the
   * elements before that first by a tile at v0 whose rows are stored masked: a row of 56
   * elements ([A, D, B, C] of f32[8, 56, 56, 64]) straddled lines at every other start.
   * That permutation, 2 threads of the same guest, three rounds in turn (with the streaming
   * above): 0.47-0.62 ms from v0, 0.34-0.47 aligned; f32[8, 64, 49, 64] 0.50-0.60 and
   * 0.34-0.50; in cache (f32[2, 56, 56, 64]) 64-76 and 59-69 us. */
  LLVMValueRef vs0 = v0;
  if (g->masked_loads) {
    LLVMValueRef subs[DYN_MAX_RANK], at[2];          /* the addresses of rows uk and uk + 1 at v0 */
    g->axv[v] = v0;
    for (int i = 0; i < 2; i++) {
      g->axv[u] = i ? LLVMBuildAdd(g->b, uk, c64(g, 1), "") : uk;
      for (int a = 0; a < st->naxes; a++) subs[a] = g->axv[st->axes[a]];
      at[i] = LLVMBuildPtrToInt(g->b, elem_ptr(g, st->out, subs, st->naxes), g->i64, "");
    }
    LLVMValueRef step = LLVMBuildSub(g->b, at[1], at[0], ""), vec = c64(g, (int64_t)w * elem_size(ty));
    LLVMValueRef mis = LLVMBuildURem(g->b, at[0], vec, "");
    LLVMValueRef skew = LLVMBuildUDiv(g->b, LLVMBuildURem(g->b, LLVMBuildSub(g->b, vec, mis, ""), vec, ""),
                                      c64(g, elem_size(ty)), "");
    LLVMValueRef ok = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildSRem(g->b, step, vec, ""), c64(g, 0), ""),
                                   LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildURem(g->b, mis, c64(g, elem_size(ty)), ""), c64(g, 0), ""), "");
    skew = LLVMBuildSelect(g->b, ok, skew, c64(g, 0), "");
    if (stream) stream = LLVMBuildAnd(g->b, stream, LLVMBuildICmp(g->b, LLVMIntEQ, skew, c64(g, 0), ""), "");
    /* the first tile of each run of u's tiles at v0, whole (u's edge shifted back) */
    LLVMBasicBlockRef headb = LLVMAppendBasicBlockInContext(g->cx, g->fn, "layout.head");
    LLVMBasicBlockRef bands = LLVMAppendBasicBlockInContext(g->cx, g->fn, "layout.bands");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, skew, c64(g, 0), ""), headb, bands);
    LLVMPositionBuilderAtEnd(g->b, headb);
    Loop HU;
    LLVMValueRef hu = loop_begin(g, &HU, uk, uke);
    LLVMValueRef hus = smin64(g, hu, LLVMBuildSub(g->b, uke, c64(g, w), ""));
    LLVMValueRef rows[16], at_row[16];
    LLVMBasicBlockRef hnext = LLVMAppendBasicBlockInContext(g->cx, g->fn, "layout.head.next");
    /* a buffer of its own: sharing the tiles' made every tile of the kernel 2-3x slower
     * (f32[8, 56, 64, 64]: 0.39 -> 1.2 ms), LLVM then keeping the buffer in memory */
    LLVMValueRef hbuf = entry_alloca(g, LLVMArrayType(et, (unsigned)(w * w)));
    LLVMSetAlignment(hbuf, 64);
    tile_rows(g, st, u, v, hus, v0, c64(g, w), hbuf, w, rows, at_row);
    store_tile_masked(g, ty, w, rows, at_row, LLVMBuildSub(g->b, hu, hus, ""), c64(g, 0), skew);
    LLVMBuildBr(g->b, hnext);
    LLVMPositionBuilderAtEnd(g->b, hnext);
    loop_end_by(g, &HU, w);
    LLVMBuildBr(g->b, bands);
    LLVMPositionBuilderAtEnd(g->b, bands);
    vs0 = LLVMBuildAdd(g->b, v0, skew, "");
  }
  LLVMValueRef vband = loop_begin(g, &VB, vs0, v1);
  LLVMValueRef ub = loop_begin(g, &UB, uk, uke);
  LLVMValueRef vb = loop_begin(g, &VT, vband, smin64(g, LLVMBuildAdd(g->b, vband, c64(g, bw), ""), v1));
  LLVMValueRef ve = LLVMBuildAdd(g->b, vb, c64(g, w), "");
  LLVMValueRef ue = LLVMBuildAdd(g->b, ub, c64(g, w), "");
  LLVMValueRef whole = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLE, ue, uke, ""),
                                    LLVMBuildICmp(g->b, LLVMIntSLE, ve, v1, ""), "");
  LLVMBasicBlockRef tile = LLVMAppendBasicBlockInContext(g->cx, g->fn, "tile");
  LLVMBasicBlockRef edge = LLVMAppendBasicBlockInContext(g->cx, g->fn, "edge");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->cx, g->fn, "next");
  LLVMBuildCondBr(g->b, whole, tile, edge);
  /* a whole tile: buf[v - vb][u - ub] = the stage's value, along u; then transposed.  First,
   * in the twin (tensors beyond the last cache), the input lines of the tile PREFETCH_TILES
   * ahead along u (the last of the block's whole tiles at most: no line past the block,
   * whose next use is a band away) */
  LLVMPositionBuilderAtEnd(g->b, tile);
  const KExpr *pl = twin ? tile_load(st->expr, u) : NULL;
  LLVMValueRef pu = smin64(g, LLVMBuildAdd(g->b, ub, c64(g, (int64_t)PREFETCH_TILES * w), ""),
                           LLVMBuildSub(g->b, uke, c64(g, w), ""));
  for (int r = 0; pl && r < w; r++) {
    LLVMValueRef at[DYN_MAX_RANK];
    for (int k = 0; k < pl->n; k++) {
      int ax = pl->a[k]->axis;
      at[k] = ax == u ? pu : ax == v ? LLVMBuildAdd(g->b, vb, c64(g, r), "") : g->axv[ax];
    }
    prefetch(g, elem_ptr(g, pl->slot, at, pl->n));
  }
  LLVMValueRef rows[16], at_row[16];
  tile_rows(g, st, u, v, ub, vb, c64(g, w), buf, w, rows, at_row);
  store_tile(g, ty, w, rows, at_row, stream, next);
  /* A tile cut by an edge: shifted back to end at it, whole, the elements it shares with
   * the tile before it computed again (the same values: the stage does not read what it
   * writes, cpu_blocked_axis); where the target masks a store's lanes, only its new ones are
   * stored.  These ran plain loops (and, cut by v's edge alone, masked stores of a cut
   * tile): an Emerald Rapids guest, :time medians, in turn, one thread, three rounds,
   * transposes of f32[4097, 31] 60-62 -> 42-51 us, [1023, 1025] 1.02-1.04 -> 0.73-0.81 ms,
   * [17, 33] 0.87-0.97 -> 0.48-0.52 us; two threads, four rounds, [1023, 1025] 0.48-0.53 ->
   * 0.38-0.54 ms, [100, 100] 3.4-4.5 -> 2.7-3.9 us, permute 0321 of f32[3, 31, 17, 67]
   * 29-35 -> 24-30 us; [1000, 1000] the same within the noise. */
  LLVMPositionBuilderAtEnd(g->b, edge);
  LLVMValueRef us = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, ue, uke, ""),
                                    LLVMBuildSub(g->b, uke, c64(g, w), ""), ub, "");
  LLVMValueRef vs = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, ve, v1, ""),
                                    LLVMBuildSub(g->b, v1, c64(g, w), ""), vb, "");
  tile_rows(g, st, u, v, us, vs, c64(g, w), buf, w, rows, at_row);
  if (g->masked_loads) {
    store_tile_masked(g, ty, w, rows, at_row, LLVMBuildSub(g->b, ub, us, ""), LLVMBuildSub(g->b, vb, vs, ""), c64(g, w));
    LLVMBuildBr(g->b, next);
  } else {
    store_tile(g, ty, w, rows, at_row, stream, next);
  }
  LLVMPositionBuilderAtEnd(g->b, next);
  loop_end_by(g, &VT, w);
  loop_end_by(g, &UB, w);
  loop_end_by(g, &VB, bw);
  loop_end_by(g, &UK, bk);
  LLVMBuildBr(g->b, after);
  LLVMPositionBuilderAtEnd(g->b, after);
  for (int a = nv - 1; a >= 0; a--)
    if (st->axes[a] != u) loop_end(g, &L[a]);
}

/* The kernel body over iterations [lo, hi) of the parallel axis: the outer loops, and in
 * them each stage's loop nest in turn. */
/* ---- a scan's in-order pass (cpu_scan.c), through these helpers ---- */

typedef struct ScanEnv { G *g; Loop L[DYN_MAX_RANK + 4]; int n; } ScanEnv;
static LLVMValueRef scan_ext(void *v, int axis) { return load_i64(((ScanEnv *)v)->g, ((ScanEnv *)v)->g->ext, axis); }
static LLVMValueRef scan_addr(void *v, LLVMValueRef *subs) {
  G *g = ((ScanEnv *)v)->g;
  const Stage *st = &g->kn->stages[0];
  return elem_ptr(g, st->out, subs, st->naxes);
}
static void scan_mark(void *v, LLVMValueRef x) { slot_alias(((ScanEnv *)v)->g, x, ((ScanEnv *)v)->g->kn->stages[0].out); }
static LLVMValueRef scan_loop(void *v, LLVMValueRef lo, LLVMValueRef hi) {
  ScanEnv *s = v;
  return loop_begin(s->g, &s->L[s->n++], lo, hi);
}
static void scan_end(void *v, int64_t step) { ScanEnv *s = v; loop_end_by(s->g, &s->L[--s->n], step); }
static LLVMValueRef scan_slot(void *v, LLVMTypeRef t) { return entry_alloca(((ScanEnv *)v)->g, t); }
static void scan_transpose(void *v, LLVMValueRef *rows, int w) { transpose_rows(((ScanEnv *)v)->g, rows, w); }

static CpuScanGen scan_gen(G *g, ScanEnv *env, const Stage *st, int par_axis, LLVMValueRef lo, LLVMValueRef hi) {
  env->g = g;
  env->n = 0;
  return (CpuScanGen){
    .cx = g->cx, .b = g->b, .st = st, .ty = ty_of(g, st->expr->ty),
    .lanes = cpu_tile_lanes(g->vector_bits, st->expr->ty), .par_axis = par_axis, .lo = lo, .hi = hi,
    .g = env, .ext = scan_ext, .addr = scan_addr, .mark = scan_mark, .loop = scan_loop,
    .end = scan_end, .slot = scan_slot, .transpose = scan_transpose,
  };
}

static void gen_scan(G *g, const Stage *st, int par_axis, LLVMValueRef lo, LLVMValueRef hi) {
  ScanEnv env;
  CpuScanGen sg = scan_gen(g, &env, st, par_axis, lo, hi);
  cpu_scan_gen(&sg);
}

/* A scan along an axis that is not the last is fused into its body's loops: once the body
 * has stored row j (the loops after the scanned axis closed), row j - 1 is combined into
 * it while both are in cache, instead of a second pass over the whole result.  One thread
 * of Zen 4: Y[a, b, c] = scan[b] max(X[a, b, c]) over f32[64, 256, 256] 20-24 -> 36-37
 * GB/s, Y[i, j] = scan[i] +(X[i, j]) over f32[512, 512] 48-52 -> 70.  Returns the scanned
 * axis's place in the stage, or -1 where the scan runs as a pass of its own. */
static int fused_scan_axis(const Stage *st, bool twin) {
  if (st->expr->kind != KX_SCAN || twin || st->naxes < 2) return -1;
  int si = 0;
  while (si < st->naxes && st->axes[si] != st->expr->raxes[0]) si++;
  return si < st->naxes - 1 ? si : -1;
}

static void gen_scan_rows(G *g, const Stage *st, int si, int par_axis, LLVMValueRef lo, LLVMValueRef hi) {
  ScanEnv env;
  CpuScanGen sg = scan_gen(g, &env, st, par_axis, lo, hi);
  LLVMValueRef subs[DYN_MAX_RANK];
  for (int a = 0; a <= si; a++) subs[a] = g->axv[st->axes[a]];
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(g->cx, g->fn, "scan.row");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->cx, g->fn, "scan.done");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, subs[si], c64(g, 1), ""), go, done);
  LLVMPositionBuilderAtEnd(g->b, go);
  cpu_scan_rows_at(&sg, subs, si);
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
}

/* ---- a where on the innermost axis: its loop split where the condition flips ----
 * A join along the last axis, C[i, j] = where(j < N, A[i, j], B[i, j - N]) (concat), reads
 * A in one part of each row and B in the other; as one loop, each lane's load took its
 * own address (the two loads merged into one from a chosen pointer: a gather), 6.7-7.4
 * GB/s on one thread of Zen 4 for f32[2048, 2 x 2048], against 50 for a join of rows.  So
 * where the stage's value has one where whose condition is an `and` of bounds on the
 * innermost index (j < e, j <= e, j > e, j >= e, either way round) and of conditions that
 * do not vary along it (a padding's i >= 1 and i <= M), all computable once before the
 * loop without an error (flag_free), the loop runs in three parts: before the interval
 * the bounds allow, the interval, after it; each part computes the branch it takes, no
 * other, so its loads are plain vectors on every target.  Not in the streaming twin,
 * whose vector stores must start on a line.  A load that may be out of range is still
 * clamped and flagged. */
static bool uses_axis(const KExpr *e, int axis);

/* Can e be computed once before the loop, even when the loop runs no iteration: no load,
 * no integer division (which flag their errors), nothing but sizes, constants, indices and
 * arithmetic on them. */
static bool flag_free(const KExpr *e) {
  if (e->kind == KX_LOAD || e->kind == KX_REDUCE || e->kind == KX_SCAN) return false;
  if (e->kind == KX_BIN && (e->op == OP_DIV || e->op == OP_MOD) && !elem_is_float(e->ty)) return false;
  for (int i = 0; i < e->n; i++)
    if (!flag_free(e->a[i])) return false;
  return true;
}

/* The conjuncts of a where's condition c (an `and` of them): bounds on the index v (v < e,
 * v <= e, v > e, v >= e, either way round, e flag_free and not along v) and conditions that
 * do not vary along v (flag_free).  False if some conjunct is neither, or none bounds v.
 * With out, collects them: bounds as (conjunct, which side is v), the rest as they are. */
typedef struct Conj { const KExpr *bound[8]; int side[8]; int nb; const KExpr *inv[8]; int ni; } Conj;
static bool conjuncts(const KExpr *c, int v, Conj *out) {
  if (c->kind == KX_BIN && c->op == OP_AND)
    return conjuncts(c->a[0], v, out) && conjuncts(c->a[1], v, out);
  if (c->kind == KX_BIN && (c->op == OP_LT || c->op == OP_LE || c->op == OP_GT || c->op == OP_GE) &&
      c->a[0]->ty == DYN_I64 && c->a[1]->ty == DYN_I64)
    for (int k = 0; k < 2; k++)
      if (c->a[k]->kind == KX_AXIS && c->a[k]->axis == v && !uses_axis(c->a[1 - k], v) && flag_free(c->a[1 - k])) {
        if (out->nb == 8) return false;
        out->bound[out->nb] = c;
        out->side[out->nb++] = k;
        return true;
      }
  if (uses_axis(c, v) || !flag_free(c) || out->ni == 8) return false;
  out->inv[out->ni++] = c;
  return true;
}

/* The wheres in e whose conditions split the loop of v, counted; the last found and its
 * conjuncts in *found and *cj. */
static void where_on(const KExpr *e, int v, int *count, const KExpr **found, Conj *cj) {
  Conj c = {0};
  if (e->kind == KX_SELECT && conjuncts(e->a[0], v, &c) && c.nb > 0) {
    *found = e;
    *cj = c;
    ++*count;
  }
  if (e->kind == KX_REDUCE || e->kind == KX_SCAN) return;   /* their bodies run in loops of their own */
  for (int i = 0; i < e->n; i++) where_on(e->a[i], v, count, found, cj);
}

/* The where to split the innermost loop v of stage st at, and its conjuncts, or NULL:
 * exactly one. */
static const KExpr *split_where(const Stage *st, int v, Conj *cj) {
  int count = 0;
  const KExpr *w = NULL;
  where_on(st->expr, v, &count, &w, cj);
  return count == 1 ? w : NULL;
}

/* Does stage st's innermost loop run in split_where's three parts (cpu_tail_ops)? */
bool cpu_stage_splits(const Stage *st) {
  Conj cj = {0};
  return st->naxes > 0 && st->expr->kind != KX_SCAN && split_where(st, st->axes[st->naxes - 1], &cj);
}

static LLVMValueRef smax64(G *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, a, b, ""), a, b, "");
}

/* One part of the split loop: [from, to) of v computing sel's branch `then`. */
static void split_part(G *g, const Kernel *kn, const Stage *st, const KExpr *sel, bool then, int v, LLVMValueRef from,
                       LLVMValueRef to, Loop *L) {
  g->fixed_sel = sel;
  g->fixed_then = then;
  g->axv[v] = loop_begin(g, L, from, to);
  gen_body(g, kn, st, NULL, NULL, false);
  loop_end(g, L);
  g->fixed_sel = NULL;
}

/* The innermost loop over [start, end) of axis v in three parts: before the interval of v
 * where sel's bounds on v hold, the interval, after it.  The parts outside compute sel's
 * second branch; the interval its first where the conditions that do not vary along v hold
 * (tested once, before its loop), else its second. */
static void gen_split_loop(G *g, const Kernel *kn, const Stage *st, const KExpr *sel, const Conj *cj, int v,
                           LLVMValueRef start, LLVMValueRef end, Loop *L) {
  LLVMValueRef lo = start, hi = end;
  for (int b = 0; b < cj->nb; b++) {
    const KExpr *c = cj->bound[b];
    int k = cj->side[b];
    OpKind op = c->op;
    if (k == 1) op = op == OP_LT ? OP_GT : op == OP_LE ? OP_GE : op == OP_GT ? OP_LT : OP_LE;   /* v on the left */
    LLVMValueRef e = gen(g, c->a[1 - k], NULL, false);
    if (op == OP_LE || op == OP_GT) e = LLVMBuildAdd(g->b, e, c64(g, 1), "");
    if (op == OP_LT || op == OP_LE) hi = smin64(g, hi, e);        /* v < e */
    else lo = smax64(g, lo, e);                                      /* v >= e */
  }
  lo = smin64(g, lo, end);                       /* start <= lo <= hi <= end */
  hi = smax64(g, hi, lo);
  split_part(g, kn, st, sel, false, v, start, lo, L);
  if (cj->ni) {
    LLVMValueRef inv = NULL;
    for (int i = 0; i < cj->ni; i++) {
      LLVMValueRef c = gen(g, cj->inv[i], NULL, false);
      inv = inv ? LLVMBuildAnd(g->b, inv, c, "") : c;
    }
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->cx, g->fn, "where.in");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(g->cx, g->fn, "where.out");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->cx, g->fn, "where.done");
    LLVMBuildCondBr(g->b, inv, yes, no);
    LLVMPositionBuilderAtEnd(g->b, yes);
    split_part(g, kn, st, sel, true, v, lo, hi, L);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, no);
    split_part(g, kn, st, sel, false, v, lo, hi, L);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
  } else {
    split_part(g, kn, st, sel, true, v, lo, hi, L);
  }
  split_part(g, kn, st, sel, false, v, hi, end, L);
}

/* ---- a reduction in merged runs of axes (cpu_reduce.c), through these helpers ---- */

typedef struct RedEnv {
  G *g;
  const Stage *st;
  int par_axis;
  LLVMValueRef lo, hi;
  Loop L[CPU_RED_AXES];
  int n;
} RedEnv;
static LLVMValueRef red_ext(void *v, int axis) { return load_i64(((RedEnv *)v)->g, ((RedEnv *)v)->g->ext, axis); }
static LLVMValueRef red_stride(void *v, int slot, int dim, int rank) {
  G *g = ((RedEnv *)v)->g;
  bool any_last = g->strided && g->p->slots[slot].kind == SLOT_INPUT;   /* as offset() reads it */
  return dim == rank - 1 && !any_last ? c64(g, 1) : load_i64(g, g->strides, (int64_t)slot * DYN_MAX_RANK + dim);
}
static LLVMValueRef red_loop(void *v, LLVMValueRef lo, LLVMValueRef hi) {
  RedEnv *r = v;
  return loop_begin(r->g, &r->L[r->n++], lo, hi);
}
static void red_end(void *v) { RedEnv *r = v; loop_end(r->g, &r->L[--r->n]); }
static void red_set_axis(void *v, int axis, LLVMValueRef x) { ((RedEnv *)v)->g->axv[axis] = x; }
static LLVMValueRef red_value(void *v) { RedEnv *r = v; return gen(r->g, r->st->expr->a[0], NULL, false); }
static void red_subs(RedEnv *r, LLVMValueRef *subs) {
  for (int a = 0; a < r->st->naxes; a++) subs[a] = r->g->axv[r->st->axes[a]];
}
static LLVMValueRef red_out_ptr(void *v) {
  RedEnv *r = v;
  LLVMValueRef subs[DYN_MAX_RANK];
  red_subs(r, subs);
  return elem_ptr(r->g, r->st->out, subs, r->st->naxes);
}
static void red_store(void *v, LLVMValueRef x) {
  RedEnv *r = v;
  LLVMValueRef subs[DYN_MAX_RANK];
  red_subs(r, subs);
  gen_store(r->g, r->st->out, subs, r->st->naxes, x, r->st->expr->ty, false);
}
static void red_step_at(void *v, LLVMValueRef acc, LLVMValueRef x) { RedEnv *r = v; red_step(r->g, r->st->expr, acc, x); }
static LLVMValueRef red_start(void *v) { RedEnv *r = v; return red_init(r->g, r->st->expr, ty_of(r->g, r->st->expr->ty)); }
static LLVMValueRef red_slot(void *v, LLVMTypeRef t) { return entry_alloca(((RedEnv *)v)->g, t); }
static void red_plain(void *v) {
  RedEnv *r = v;
  G *g = r->g;
  if (cpu_interchanged(g->p, g->kn, 0, r->par_axis)) {
    gen_interchanged(g, g->kn, r->st, r->par_axis, r->lo, r->hi);
    return;
  }
  Loop L[DYN_MAX_RANK];
  for (int a = 0; a < r->st->naxes; a++) {
    bool par = r->st->axes[a] == r->par_axis;
    g->axv[r->st->axes[a]] = loop_begin(g, &L[a], par ? r->lo : c64(g, 0), par ? r->hi : load_i64(g, g->ext, r->st->axes[a]));
  }
  gen_body(g, g->kn, r->st, NULL, NULL, false);
  for (int a = r->st->naxes - 1; a >= 0; a--) loop_end(g, &L[a]);
}

static LLVMValueRef red_op_at(void *v, LLVMValueRef a, LLVMValueRef x) { RedEnv *r = v; return red_op(r->g, r->st->expr, a, x); }
static LLVMValueRef red_addr(void *v) {
  RedEnv *r = v;
  const KExpr *l = r->st->expr->a[0];
  LLVMValueRef subs[DYN_MAX_RANK * 2];
  for (int k = 0; k < l->n; k++) subs[k] = r->g->axv[l->a[k]->axis];
  return elem_ptr(r->g, l->slot, subs, l->n);
}
static void gen_reduced(G *g, const Stage *st, const CpuRedPlan *pl, int par_axis, LLVMValueRef lo, LLVMValueRef hi) {
  RedEnv env = {.g = g, .st = st, .par_axis = par_axis, .lo = lo, .hi = hi};
  CpuRedGen rg = {
    .cx = g->cx, .b = g->b, .fn = g->fn, .i64 = g->i64, .ty = ty_of(g, st->expr->ty), .pl = pl, .lo = lo, .hi = hi,
    .g = &env, .ext = red_ext, .stride = red_stride, .loop = red_loop, .end = red_end, .set_axis = red_set_axis,
    .value = red_value, .out_ptr = red_out_ptr, .store = red_store, .step = red_step_at, .init = red_start,
    .slot = red_slot, .plain = red_plain, .st = st, .par_axis = par_axis,
    .shape = {.lanes = cpu_tile_lanes(g->hw->vector_bits, st->expr->ty)}, .op = red_op_at, .addr = red_addr,
  };
  cpu_reduce_gen(&rg);
}

/* ---- a reduction of short kept runs, or of short rows (cpu_reduce.c), the others' loops where it cannot ---- */

static void short_other(void *v) {
  RedEnv *r = v;
  CpuRedPlan rp;
  if (cpu_reduce_plan(r->g->p, r->g->kn, 0, r->par_axis, &rp)) gen_reduced(r->g, r->st, &rp, r->par_axis, r->lo, r->hi);
  else red_plain(v);
}

/* Short kept runs, or (rows) short reduced runs W at a time in a gather's lanes. */
static void gen_short(G *g, const Stage *st, const CpuShortPlan *sp, bool rows, int par_axis, LLVMValueRef lo,
                      LLVMValueRef hi) {
  RedEnv env = {.g = g, .st = st, .par_axis = par_axis, .lo = lo, .hi = hi};
  CpuRedGen rg = {
    .cx = g->cx, .b = g->b, .fn = g->fn, .i64 = g->i64, .ty = ty_of(g, st->expr->ty), .lo = lo, .hi = hi,
    .g = &env, .ext = red_ext, .stride = red_stride, .loop = red_loop, .end = red_end, .set_axis = red_set_axis,
    .store = red_store, .out_ptr = red_out_ptr, .init = red_start, .slot = red_slot, .plain = short_other, .st = st, .par_axis = par_axis,
    .shape = rows ? (CpuShortShape){.lanes = cpu_tile_lanes(g->hw->vector_bits, st->expr->ty)}
                  : cpu_reduce_short_shape(g->hw, st->expr->ty),
    .op = red_op_at, .addr = red_addr, .masked_loads = g->masked_loads,
  };
  if (rows) cpu_reduce_rows_gen(&rg, sp);
  else cpu_reduce_short_gen(&rg, sp);
}

static void gen_stages(G *g, const Kernel *kn, int par_axis, bool twin, LLVMValueRef lo, LLVMValueRef hi) {
  Loop outer[DYN_MAX_RANK];
  int no = kn->nouter;
  for (int o = 0; o < no; o++) {
    bool par = kn->outer[o] == par_axis;
    g->axv[kn->outer[o]] = loop_begin(g, &outer[o], par ? lo : c64(g, 0), par ? hi : load_i64(g, g->ext, kn->outer[o]));
  }
  bool *pf_mark = row_marks(g->p, kn), pf_done = false;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    CpuRedPlan rp;
    CpuShortPlan sp;
    if (cpu_reduce_short_plan(g->p, kn, s, &sp)) {
      gen_short(g, st, &sp, false, par_axis, lo, hi);
      g->fused_red = NULL;
      continue;
    }
    if (cpu_reduce_rows_plan(g->hw, g->p, kn, s, &sp)) {
      gen_short(g, st, &sp, true, par_axis, lo, hi);
      g->fused_red = NULL;
      continue;
    }
    if (cpu_reduce_plan(g->p, kn, s, par_axis, &rp)) {
      gen_reduced(g, st, &rp, par_axis, lo, hi);
      g->fused_red = NULL;
      continue;
    }
    if (cpu_interchanged(g->p, kn, s, par_axis)) {
      gen_interchanged(g, kn, st, par_axis, lo, hi);
      g->fused_red = NULL;
      continue;
    }
    int bu = cpu_blocked_axis(kn, st);
    if (bu >= 0) {
      gen_blocked(g, kn, st, par_axis, bu, twin, lo, hi);
      g->fused_red = NULL;
      continue;
    }
    Loop L[DYN_MAX_RANK];
    const KExpr *red = fusable_reduce(g->p, kn, s, par_axis);
    LLVMValueRef acc = NULL;
    if (red) {   /* its accumulator starts before the loop nest */
      acc = entry_alloca(g, ty_of(g, red->ty));
      LLVMBuildStore(g->b, red_init(g, red, ty_of(g, red->ty)), acc);
    }
    /* the first pass after the first, over the row: strip-mined, asking for the next row's
     * inputs a strip at a time so that the first pass of the next row finds them in cache */
    bool strip = false;
    Loop chunk;
    if (no > 0 && s > 0 && st->naxes > 0 && pf_mark && !pf_done) {
      bool par = false;
      for (int a = 0; a < st->naxes; a++) par = par || st->axes[a] == par_axis;
      strip = !par;
      pf_done = strip;
    }
    /* the twin's last stage: the elements of each row before its first line boundary
     * first, by scalar stores, then the rest from there */
    bool peel = twin && s == kn->nstages - 1 && st->naxes > 0 && st->axes[st->naxes - 1] != par_axis;
    /* an elementwise stage busy with arithmetic: strips, each asking for its inputs a page
     * ahead (ahead_begin) */
    bool ahead = no == 0 && !strip && !peel && !red && st->naxes > 0 && st->expr->kind != KX_SCAN &&
                 !cpu_count_reduces(st->expr) &&
                 transcendental_along(st->expr, st->axes[st->naxes - 1]);
    bool split = split_sum(red, strip);
    LLVMValueRef row_acc = split ? row_sum_begin(g) : NULL;
    /* (not in the streaming twin, whose vector stores must start on a line: a part would
     * start anywhere) */
    Conj cj;
    const KExpr *sel = !twin && !red && !strip && !ahead && st->naxes > 0 && st->expr->kind != KX_SCAN
                       ? split_where(st, st->axes[st->naxes - 1], &cj) : NULL;
    /* the row in whole vectors, the last ending at its end (cpu_stage_overlaps) */
    bool over = !peel && !strip && !ahead && !sel && fused_scan_axis(st, twin) < 0 && cpu_stage_overlaps(g->hw, g->p, kn, s, par_axis);
    int over_w = cpu_tile_lanes(g->hw->vector_bits, st->expr->ty);
    LLVMValueRef over_n = NULL;     /* the row's extent, with over */
    for (int a = 0; a < st->naxes; a++) {
      bool par = st->axes[a] == par_axis;
      LLVMValueRef start = par ? lo : c64(g, 0);
      if (peel && a == st->naxes - 1) {
        LLVMValueRef E = load_i64(g, g->ext, st->axes[a]);
        start = to_line(g, kn, st, E);
        Loop P;
        g->axv[st->axes[a]] = loop_begin(g, &P, c64(g, 0), start);
        gen_body(g, kn, st, red, acc, true);
        loop_end(g, &P);
        if (split) row_sum_fold(g, red, row_acc, acc);
      }
      if (strip && a == st->naxes - 1) {
        LLVMValueRef c0, c1;
        strip_begin(g, kn, st, pf_mark, &chunk, start, load_i64(g, g->ext, st->axes[a]), &c0, &c1);
        g->axv[st->axes[a]] = loop_begin(g, &L[a], c0, c1);
        continue;
      }
      if (ahead && a == st->naxes - 1) {
        LLVMValueRef c0, c1;
        ahead_begin(g, st, &chunk, start, par ? hi : load_i64(g, g->ext, st->axes[a]), &c0, &c1);
        g->axv[st->axes[a]] = loop_begin(g, &L[a], c0, c1);
        continue;
      }
      if (sel && a == st->naxes - 1) {
        gen_split_loop(g, kn, st, sel, &cj, st->axes[a], start, par ? hi : load_i64(g, g->ext, st->axes[a]), &L[a]);
        continue;
      }
      if (over && a == st->naxes - 1) {   /* the row's whole steps of 4 vectors first */
        over_n = load_i64(g, g->ext, st->axes[a]);
        g->axv[st->axes[a]] = loop_begin(g, &L[a], start, LLVMBuildAnd(g->b, over_n, c64(g, -4 * (int64_t)over_w), ""));
        continue;
      }
      g->axv[st->axes[a]] = loop_begin(g, &L[a], start, par ? hi : load_i64(g, g->ext, st->axes[a]));
    }
    if (!sel) gen_body(g, kn, st, red, acc, false);
    int fsi = fused_scan_axis(st, twin);
    for (int a = st->naxes - 1; a >= 0; a--) {
      if (!(sel && a == st->naxes - 1)) loop_end(g, &L[a]);
      if (over && a == st->naxes - 1) {   /* then the rest a vector at a time, the last ending at n */
        int w = over_w;
        LLVMBasicBlockRef vecs = LLVMAppendBasicBlockInContext(g->cx, g->fn, "last_vectors");
        LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(g->cx, g->fn, "short_row");
        LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->cx, g->fn, "last_vectors.done");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, over_n, c64(g, w), ""), vecs, plain);
        LLVMPositionBuilderAtEnd(g->b, vecs);
        Loop V, T;
        LLVMValueRef v0 = loop_begin(g, &V, LLVMBuildAnd(g->b, over_n, c64(g, -4 * (int64_t)w), ""), over_n);
        LLVMValueRef base = smin64(g, v0, LLVMBuildSub(g->b, over_n, c64(g, w), ""));
        LLVMValueRef j = loop_begin(g, &T, c64(g, 0), c64(g, w));
        g->axv[st->axes[a]] = LLVMBuildAdd(g->b, base, j, "");
        gen_body(g, kn, st, red, acc, false);
        loop_end(g, &T);
        loop_end_by(g, &V, w);
        LLVMBuildBr(g->b, done);
        LLVMPositionBuilderAtEnd(g->b, plain);      /* shorter than a vector: a plain loop (known short) */
        Loop P;
        g->axv[st->axes[a]] = loop_begin(g, &P, c64(g, 0), over_n);
        gen_body(g, kn, st, red, acc, false);
        loop_end(g, &P);
        LLVMBuildBr(g->b, done);
        LLVMPositionBuilderAtEnd(g->b, done);
      }
      if (split && a == st->naxes - 1) row_sum_fold(g, red, row_acc, acc);
      if ((strip || ahead) && a == st->naxes - 1) loop_end(g, &chunk);
      if (fsi >= 0 && a == fsi + 1) gen_scan_rows(g, st, fsi, par_axis, lo, hi);
    }
    if (red) {
      g->fused_red = red;
      g->fused_val = split ? row_sum_end(g, red, row_acc) : LLVMBuildLoad2(g->b, ty_of(g, red->ty), acc, "");
    } else {
      g->fused_red = NULL;
    }
    if (st->expr->kind == KX_SCAN && fsi < 0) gen_scan(g, st, par_axis, lo, hi);
  }
  g->fused_red = NULL;
  free(pf_mark);
  for (int o = no - 1; o >= 0; o--) loop_end(g, &outer[o]);
}

/* The kernel body of a row-pipelined kernel (piped_stage) over rows [lo, hi): one more
 * iteration than rows, row b's stages and row b - 1's result in each; the first has no
 * result to write, the last only that.  Stage F keeps the strip-mined prefetch of the next
 * row (gen_kernel); in the twin the result's row starts on a line as there. */
static void gen_piped(G *g, const Kernel *kn, int par_axis, bool twin, int F, LLVMValueRef lo, LLVMValueRef hi) {
  const Program *p = g->p;
  int L = kn->nstages - 1, ob = kn->outer[0];
  const Stage *sf = &kn->stages[F], *sl = &kn->stages[L];
  const KExpr *red = fusable_reduce(p, kn, F, par_axis);
  bool *pf_mark = row_marks(p, kn);
  LLVMValueRef acc = entry_alloca(g, ty_of(g, red->ty));
  bool split = split_sum(red, pf_mark != NULL);
  LLVMValueRef row_acc = split ? entry_alloca(g, g->f64) : NULL;
  LLVMValueRef E = load_i64(g, g->ext, sf->axes[0]);
  Loop rows;
  LLVMValueRef b = loop_begin(g, &rows, lo, LLVMBuildAdd(g->b, hi, c64(g, 1), ""));
  LLVMValueRef prev = LLVMBuildSub(g->b, b, c64(g, 1), "");
  LLVMValueRef par_b = LLVMBuildAnd(g->b, b, c64(g, 1), ""), par_prev = LLVMBuildAnd(g->b, prev, c64(g, 1), "");
  LLVMValueRef has_cur = LLVMBuildICmp(g->b, LLVMIntSLT, b, hi, ""), has_prev = LLVMBuildICmp(g->b, LLVMIntSGT, b, lo, "");
  LLVMBasicBlockRef cur = LLVMAppendBasicBlockInContext(g->cx, g->fn, "row"),
                    last = LLVMAppendBasicBlockInContext(g->cx, g->fn, "last_row"),
                    next = LLVMAppendBasicBlockInContext(g->cx, g->fn, "next_row");
  LLVMBuildCondBr(g->b, has_cur, cur, last);
  /* row b: its per-row stages, then stage F with (when b > lo) row b - 1's result */
  LLVMPositionBuilderAtEnd(g->b, cur);
  g->axv[ob] = b;
  g->parity = par_b;
  for (int s = 0; s < F; s++) gen_body(g, kn, &kn->stages[s], NULL, NULL, false);
  LLVMBasicBlockRef ver[2] = {LLVMAppendBasicBlockInContext(g->cx, g->fn, "alone"),
                              LLVMAppendBasicBlockInContext(g->cx, g->fn, "with_result")};
  LLVMBasicBlockRef joined = LLVMAppendBasicBlockInContext(g->cx, g->fn, "joined");
  LLVMBuildCondBr(g->b, has_prev, ver[1], ver[0]);
  for (int v = 0; v < 2; v++) {
    LLVMPositionBuilderAtEnd(g->b, ver[v]);
    LLVMBuildStore(g->b, red_init(g, red, ty_of(g, red->ty)), acc);
    if (split) LLVMBuildStore(g->b, fconst(g, g->f64, 0), row_acc);
    LLVMValueRef start = c64(g, 0);
    if (v && twin) {      /* row b - 1's elements before its first line boundary */
      g->axv[ob] = prev;
      g->parity = par_prev;
      start = to_line(g, kn, sl, E);
      Loop P;
      LLVMValueRef n = loop_begin(g, &P, c64(g, 0), start);
      g->axv[sl->axes[0]] = n;
      gen_body(g, kn, sl, NULL, NULL, true);
      g->axv[ob] = b;
      g->parity = par_b;
      g->axv[sf->axes[0]] = n;
      gen_body(g, kn, sf, red, acc, false);
      loop_end(g, &P);
      if (split) row_sum_fold(g, red, row_acc, acc);
    }
    Loop chunk, in;
    LLVMValueRef c0 = start, c1 = E;
    if (pf_mark) strip_begin(g, kn, sf, pf_mark, &chunk, start, E, &c0, &c1);
    LLVMValueRef n = loop_begin(g, &in, c0, c1);
    g->axv[sf->axes[0]] = n;
    gen_body(g, kn, sf, red, acc, false);
    if (v) {
      g->axv[ob] = prev;
      g->parity = par_prev;
      g->axv[sl->axes[0]] = n;
      gen_body(g, kn, sl, NULL, NULL, false);
      g->axv[ob] = b;
      g->parity = par_b;
    }
    loop_end(g, &in);
    if (split) row_sum_fold(g, red, row_acc, acc);
    if (pf_mark) loop_end(g, &chunk);
    LLVMBuildBr(g->b, joined);
  }
  LLVMPositionBuilderAtEnd(g->b, joined);
  g->fused_red = red;
  g->fused_val = split ? row_sum_end(g, red, row_acc) : LLVMBuildLoad2(g->b, ty_of(g, red->ty), acc, "");
  for (int s = F + 1; s < L; s++) gen_body(g, kn, &kn->stages[s], NULL, NULL, false);
  g->fused_red = NULL;
  LLVMBuildBr(g->b, next);
  /* past the last row: the last row's result alone */
  LLVMPositionBuilderAtEnd(g->b, last);
  LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(g->cx, g->fn, "last_result");
  LLVMBuildCondBr(g->b, has_prev, tail, next);
  LLVMPositionBuilderAtEnd(g->b, tail);
  g->axv[ob] = prev;
  g->parity = par_prev;
  LLVMValueRef start = c64(g, 0);
  if (twin) {
    start = to_line(g, kn, sl, E);
    Loop P;
    g->axv[sl->axes[0]] = loop_begin(g, &P, c64(g, 0), start);
    gen_body(g, kn, sl, NULL, NULL, true);
    loop_end(g, &P);
  }
  Loop T;
  g->axv[sl->axes[0]] = loop_begin(g, &T, start, E);
  gen_body(g, kn, sl, NULL, NULL, false);
  loop_end(g, &T);
  LLVMBuildBr(g->b, next);
  LLVMPositionBuilderAtEnd(g->b, next);
  g->parity = NULL;
  loop_end(g, &rows);
  free(pf_mark);
}

/* ---- building and running ---- */

static void g_init(G *g, LLVMContextRef cx, LLVMModuleRef m, const Program *p) {
  memset(g, 0, sizeof *g);
  g->cx = cx;
  g->m = m;
  g->b = LLVMCreateBuilderInContext(cx);
  g->i1 = LLVMInt1TypeInContext(cx);
  g->i8 = LLVMInt8TypeInContext(cx);
  g->i32 = LLVMInt32TypeInContext(cx);
  g->i64 = LLVMInt64TypeInContext(cx);
  g->f32 = LLVMFloatTypeInContext(cx);
  g->f64 = LLVMDoubleTypeInContext(cx);
  g->ptr = LLVMPointerTypeInContext(cx, 0);
  g->void_ = LLVMVoidTypeInContext(cx);
  g->p = p;
  g->axv = xcalloc((size_t)p->naxes + 1, sizeof(LLVMValueRef));
}

int cpu_par_axis(const Kernel *kn) {
  if (kn->nouter) return kn->outer[0];
  const Stage *st = &kn->stages[0];
  if (kn->nstages == 1 && st->naxes && st->expr->kind == KX_SCAN)   /* never the scanned axis */
    return st->naxes < 2 ? -1 : st->axes[st->axes[0] == st->expr->raxes[0]];
  if (kn->nstages == 1 && st->naxes) return st->axes[0];
  return -1;
}

/* ---- streaming stores ----
 * A kernel that writes a result much larger than the last cache writes each line twice
 * over the memory bus: the store first reads the line for ownership.  A streaming store
 * (non-temporal: vmovntps) writes it once, which is what lets a row-wise kernel over a
 * 64 MiB tensor approach the bandwidth of memcpy (which streams too): without it the
 * ceiling is two thirds of that.  Such kernels get a twin, run when the result and the
 * kernel's inputs outgrow the last cache (cpu_rt.c's streaming).  A streaming vector store must be
 * aligned to its size, so the twin's last stage first writes the elements of each row
 * before its first 64-byte boundary with scalar stores (volatile: never vectorised); its
 * vector loop then starts on the boundary, and each vector store follows whole vectors
 * from there (the vectorizer does not peel).  The loop vectorizer refuses a loop whose
 * scalar store is marked non-temporal, so the twin is marked after optimisation: its
 * vector stores whose address comes from the result's buffer, but for volatile ones (a
 * layout change's tiles that start off the vector's size, gen_blocked). */

static bool uses_axis(const KExpr *e, int axis) {
  if (e->kind == KX_AXIS && e->axis == axis) return true;
  for (int i = 0; i < e->n; i++)
    if (uses_axis(e->a[i], axis)) return true;
  return false;
}

/* Does e evaluate a transcendental function (kexpr_transcendental) on a value that varies
 * with axis -- once per element, not once per row as layernorm's rsqrt of the variance? */
static bool transcendental_along(const KExpr *e, int axis) {
  if (!uses_axis(e, axis) || !kexpr_transcendental(e)) return false;
  bool below = false;
  for (int i = 0; i < e->n; i++) below = below || kexpr_transcendental(e->a[i]);
  if (!below) return true;                  /* e itself is the transcendental */
  for (int i = 0; i < e->n; i++)
    if (transcendental_along(e->a[i], axis)) return true;
  return false;
}

/* The kernel's result slot if it may get a streaming twin, else -1: only the last stage
 * writes it, an output in floating point, along its rows (the last subscript is the
 * innermost loop), and that loop starts at a row's start -- not at a task's first element,
 * as it does when the innermost axis is the one split across threads.
 * A stage that evaluates a transcendental function per element (along its innermost axis)
 * is bound by its arithmetic, not by memory, and streaming its stores measured slower there
 * (gelu over 4096 x 4096 on 2 threads: 24 against 30 GB/s), so it gets no twin; one per row
 * (layernorm's rsqrt of the variance) does not count. */
static int nt_slot_of(const Program *p, const Kernel *kn, int par_axis) {
  const Stage *st = &kn->stages[kn->nstages - 1];
  const Slot *sl = &p->slots[st->out];
  CpuRedPlan rp;
  if (sl->kind != SLOT_OUTPUT || st->naxes < 1 || !elem_is_float(sl->type.elem) || any_interchanged(p, kn, par_axis) ||
      cpu_reduce_plan(p, kn, kn->nstages - 1, par_axis, &rp) ||
      st->expr->kind == KX_SCAN ||
      st->axes[st->naxes - 1] == par_axis || transcendental_along(st->expr, st->axes[st->naxes - 1]))
    return -1;
  for (int s = 0; s + 1 < kn->nstages; s++)
    if (kn->stages[s].out == st->out) return -1;
  return st->out;
}

/* Build the module of a program's loop kernels; names them with prefix. */
LLVMModuleRef cpu_build_module(CpuBackend *be, LLVMContextRef cx, const Program *p, CKernel *ck, int nk,
                               const char *prefix, bool kernels, bool twins, bool strided) {
  LLVMModuleRef m = jit_module_new(be->jit, cx, prefix);
  G g;
  g_init(&g, cx, m, p);
  g.prefix = prefix;
  g.vector_bits = be->hw.vector_bits;
  g.hw = &be->hw;
  g.masked_loads = cpu_masks_lanes(jit_cpu_features(be->jit));
  vmath_init(&g.vm, cx, m, g.b, prefix, jit_cpu_features(be->jit), g.vector_bits);
  for (int i = 0; i < nk; i++) {
    if (ck[i].gemm) continue;
    if (kernels) {
      snprintf(ck[i].sym, sizeof ck[i].sym, "%s_k%d", prefix, i);
      ck[i].pipe_f = piped_stage(p, ck[i].kn, ck[i].par_axis);
      gen_kernel(&g, ck[i].kn, ck[i].sym, ck[i].par_axis, false, ck[i].pipe_f);
      ck[i].nt_slot = nt_slot_of(p, ck[i].kn, ck[i].par_axis);
    }
    if (twins && ck[i].nt_slot >= 0) {
      char name[80];
      snprintf(name, sizeof name, "%s_nt", ck[i].sym);
      gen_kernel(&g, ck[i].kn, name, ck[i].par_axis, true, ck[i].pipe_f);
    }
    if (strided) {
      char name[80];
      snprintf(name, sizeof name, "%s_st", ck[i].sym);
      g.strided = true;
      gen_kernel(&g, ck[i].kn, name, ck[i].par_axis, false, ck[i].pipe_f);
      g.strided = false;
    }
  }
  LLVMDisposeBuilder(g.b);
  free(g.axv);
  free(g.memo);
  free(g.aa_scope);
  free(g.aa_noalias);
  return m;
}

#endif  /* HAVE_LLVM */
