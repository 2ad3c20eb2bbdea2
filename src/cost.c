/* cost.c -- the analytical cost of a lowered program: FLOPs, lane-operations and bytes moved
 * as polynomials in the size variables; sched.c turns them into seconds on a hardware model.
 *
 * FLOPs count floating-point operations of the element expressions (a transcendental
 * function counts as one), a reduction step as one more.  Lane-operations count what the
 * CPU's vector code spends per element: a math function its expansion's instructions (the
 * table lane_ops).  Bytes count compulsory traffic: each input read once, each output
 * written once, each temporary written and read back; per-row intermediates of a fused
 * kernel stay in cache and cost nothing.  cost_roofline is sched.c's roofline; contractions
 * are predicted by the micro-kernel model of gemm_model.c.
 */
#include "config.h"
#include "dyn_int.h"

#include <string.h>

/* The lane-operations a vector instruction sequence of the CPU back end spends on one element
 * of each math function (vmath.c, f32, counted in its source: every add, multiply, FMA,
 * compare, select, min, max, shift and integer add of the expansion counts one), and of the
 * operations that are not one pipelined instruction.  f64 runs the same counts on half the
 * lanes (its longer polynomials are left out: a few FMAs).  Division and square root are
 * partly pipelined: a 512-bit vdivps or vsqrtps issues every 5 (Zen 4) to 10 (Skylake-X)
 * cycles (Agner Fog's instruction tables), about 8 slots of two pipes; that figure is a
 * documented middle, not a measurement of each core. */
static int lane_ops(OpKind op, int x) {
  switch (op) {
  case OP_DIV: case OP_SQRT: return 8;
  case OP_RSQRT: return 16;                    /* a square root and a division */
  case OP_EXP: return x;                       /* exp_ops */
  case OP_SIGMOID: return x + 10;              /* exp, add, division */
  case OP_TANH: return x + 22;                 /* poly 8, exp of 2x, mul, division, select 3 */
  case OP_LOG: return 34;                      /* split 12, degree-9 poly 11, specials 11 */
  case OP_SIN: case OP_COS: return 30;         /* reduction 8, two polys 12, quadrant 10 */
  case OP_ERF: return x + 28;                  /* two polys 19, exp, select and sign 9 */
  case OP_POW: case OP_POWF: return 90;        /* double-word log and exp, specials */
  default: return 1;
  }
}

/* An exponential's lane-operations on h's vectors: clamp 2, reduction 4 (n and r), the
 * degree-6 polynomial 6, n's bits 1, and 2^n: one vscalef where the target has AVX-512
 * (vmath.c's exp_of), else 8 (two exponents built and multiplied in, scale2).  Softmax of
 * f32[2048, 768] on 2 threads of Emerald Rapids ran in 0.28-0.43 ms (the host's phases),
 * predicted 0.47 with 20 for every target, 0.40 with 13. */
int cost_exp_ops(const HwModel *h) {
  return h && strstr(h->llvm_features, "+avx512f") ? 13 : 20;
}

/* The FLOPs of e (each operation one, a math function one) or, where xo (the target's
 * cost_exp_ops) is not 0, its lane-operations (lane_ops). */
static const Poly *flops_of(PolyCtx *pc, const Program *p, const KExpr *e, int xo) {
  const Poly *f = poly_const(pc, 0);
  for (int i = 0; i < e->n; i++) f = poly_add(pc, f, flops_of(pc, p, e->a[i], xo));
  switch (e->kind) {
  case KX_UN:
  case KX_BIN:
    if (elem_is_float(e->ty) || (e->kind == KX_BIN && op_class(e->op) == OPK_CMP && elem_is_float(e->opty)))
      f = poly_add(pc, f, poly_const(pc, xo ? lane_ops(e->op, xo) : 1));
    break;
  case KX_REDUCE: {
    const Poly *r = poly_const(pc, 1);
    for (int i = 0; i < e->nraxes; i++) r = poly_mul(pc, r, p->axes[e->raxes[i]].extent);
    /* the body's operations and one accumulation, each step */
    f = poly_mul(pc, r, poly_add(pc, f, poly_const(pc, elem_is_float(e->ty) ? 1 : 0)));
    break;
  }
  case KX_SCAN:                  /* one combination per element */
    if (elem_is_float(e->ty)) f = poly_add(pc, f, poly_const(pc, 1));
    break;
  default:
    break;
  }
  return f;
}

static const Poly *numel(PolyCtx *pc, const Type *t, int skip) {
  const Poly *n = poly_const(pc, 1);
  for (int k = skip; k < t->rank; k++) n = poly_mul(pc, n, t->dims[k]);
  return n;
}

/* The lane-operations of e at each step of its innermost loop, where vary holds the axes of
 * the loops inside a row (the stage's own), outer_r those of the reductions around e's
 * reduction and cur_r that reduction's own.  The compiler hoists a loop-invariant operation
 * out of the loops it does not depend on (LLVM's LICM): a part of e that depends on none of
 * those axes runs once a row (added to *row), one that depends on none of cur_r once a step
 * of the loops outside the reduction (added to *step).  layernorm's rsqrt(v[b] + 1e-5) is one
 * scalar vsqrtss and vdivss a row in its code (:code layernorm asm); charged an element it
 * was 17 of the 26 lane-operations an element was charged, and the model called layernorm
 * 2047 x 1024 compute-bound at 2.4 times its time.  A reduction or scan is never hoisted. */
static const Poly *row_ops(PolyCtx *pc, const Program *p, const KExpr *e, int xo, uint64_t vary,
                           uint64_t outer_r, uint64_t cur_r, const Poly **row, const Poly **step) {
  bool loop = e->kind == KX_REDUCE || e->kind == KX_SCAN;
  uint64_t all = vary | outer_r | cur_r;
  if (all && !loop && !(e->axmask & all)) {
    *row = poly_add(pc, *row, flops_of(pc, p, e, xo));
    return poly_const(pc, 0);
  }
  if (cur_r && !loop && !(e->axmask & cur_r)) {
    *step = poly_add(pc, *step, row_ops(pc, p, e, xo, vary, outer_r, 0, row, step));
    return poly_const(pc, 0);
  }
  if (e->kind == KX_REDUCE) {
    uint64_t in = 0;
    const Poly *r = poly_const(pc, 1), *local = poly_const(pc, 0);
    for (int i = 0; i < e->nraxes; i++) {
      r = poly_mul(pc, r, p->axes[e->raxes[i]].extent);
      in |= 1ull << (e->raxes[i] % 64);
    }
    const Poly *body = row_ops(pc, p, e->a[0], xo, vary, outer_r | cur_r, in, row, &local);
    return poly_add(pc, poly_mul(pc, r, poly_add(pc, body, poly_const(pc, elem_is_float(e->ty) ? 1 : 0))), local);
  }
  const Poly *f = poly_const(pc, 0);
  for (int i = 0; i < e->n; i++) f = poly_add(pc, f, row_ops(pc, p, e->a[i], xo, vary, outer_r, cur_r, row, step));
  if (e->kind == KX_UN || e->kind == KX_BIN || e->kind == KX_SCAN)
    f = poly_add(pc, f, flops_of(pc, p, &(KExpr){.kind = e->kind, .ty = e->ty, .opty = e->opty, .op = e->op}, xo));
  return f;
}

/* The FLOPs (or lane-operations) of a kernel's stages, each over its points; lane-operations
 * that do not vary inside a row once a row (row_ops). */
/* Stage s's FLOPs (ops false) or lane-operations (ops true) over the kernel's outer loops. */
static const Poly *stage_work(const Program *p, const Kernel *kn, int s, PolyCtx *pc, int xo) {
  const Poly *outer = poly_const(pc, 1);
  for (int o = 0; o < kn->nouter; o++) outer = poly_mul(pc, outer, p->axes[kn->outer[o]].extent);
  const Stage *st = &kn->stages[s];
  const Poly *pts = outer;
  uint64_t vary = 0;
  for (int a = 0; a < st->naxes; a++) {
    pts = poly_mul(pc, pts, p->axes[st->axes[a]].extent);
    vary |= 1ull << (st->axes[a] % 64);
  }
  if (!xo) return poly_mul(pc, pts, flops_of(pc, p, st->expr, 0));
  const Poly *row = poly_const(pc, 0), *none = NULL;
  const Poly *each = row_ops(pc, p, st->expr, xo, vary, 0, 0, &row, &none);
  return poly_add(pc, poly_mul(pc, pts, each), poly_mul(pc, outer, row));
}

static const Poly *kernel_work(const Program *p, const Kernel *kn, PolyCtx *pc, int xo) {
  const Poly *f = poly_const(pc, 0);
  for (int s = 0; s < kn->nstages; s++) f = poly_add(pc, f, stage_work(p, kn, s, pc, xo));
  return f;
}

const Poly *cost_stage_ops(const HwModel *h, const Program *p, const Kernel *kn, int s, PolyCtx *pc) {
  return stage_work(p, kn, s, pc, cost_exp_ops(h));
}

const Poly *cost_kernel_ops(const HwModel *h, const Program *p, const Kernel *kn, PolyCtx *pc) {
  return kernel_work(p, kn, pc, cost_exp_ops(h));
}

void cost_kernel(const Program *p, const Kernel *kn, PolyCtx *pc, const Poly **flops, const Poly **bytes) {
  const Poly *rd, *wr;
  cost_kernel_traffic(p, kn, pc, &rd, &wr);
  *flops = kernel_work(p, kn, pc, 0);
  *bytes = poly_add(pc, rd, wr);
}

void cost_kernel_traffic(const Program *p, const Kernel *kn, PolyCtx *pc, const Poly **rd, const Poly **wr) {
  const Poly *r = poly_const(pc, 0), *w = poly_const(pc, 0);
  /* traffic: the slots the kernel reads (once) and writes (once), not its per-row ones */
  bool *read = xcalloc((size_t)p->nslots + 1, 1), *written = xcalloc((size_t)p->nslots + 1, 1);
  for (int s = 0; s < kn->nstages; s++) {
    written[kn->stages[s].out] = true;
    kexpr_mark_loads(kn->stages[s].expr, read);
  }
  for (int i = 0; i < p->nslots; i++) {
    const Slot *sl = &p->slots[i];
    if (sl->kind == SLOT_LOCAL || sl->kind == SLOT_INLINED) continue;
    if (!read[i] && !written[i]) continue;
    const Poly *nb = poly_mul(pc, poly_const(pc, elem_size(sl->type.elem)), numel(pc, &sl->type, 0));
    if (written[i]) w = poly_add(pc, w, nb);
    else r = poly_add(pc, r, nb);
  }
  free(read);
  free(written);
  *rd = r;
  *wr = w;
}

void cost_program(const Program *p, PolyCtx *pc, const Poly **flops, const Poly **bytes) {
  const Poly *f = poly_const(pc, 0), *b = poly_const(pc, 0);
  for (int k = 0; k < p->nkernels; k++) {
    const Poly *kf, *kb;
    cost_kernel(p, &p->kernels[k], pc, &kf, &kb);
    f = poly_add(pc, f, kf);
    b = poly_add(pc, b, kb);
  }
  *flops = f;
  *bytes = b;
}

/* The softmax's work on `scores` f32 scores of an attention on `threads` cores (cpu_attn.c
 * prices both ways with it): a score's running maximum, difference, exponential and sum's
 * step, in lane-operations at the vector pipes' rate, and its scale: a product, or a division
 * where the program divides by it (attention's / sqrt(D): a vdivps a score unfused), or
 * nothing where the fused kernel folds it and log2(e) into the difference's FMA (block_update
 * in cpu_attn.c: exp2(x * c log2(e) - m)).  It was 20 FLOPs a score at the FLOP peak, which
 * counts an FMA twice: under half the 23 to 31 lane-operations of the code. */
double cost_attn_softmax_time(const HwModel *hw, int threads, double scores, AttnScale how) {
  int t = hw->cores > 0 && threads > hw->cores ? hw->cores : threads;
  int ops = lane_ops(OP_EXP, 20) + 3 + (how == ATTN_SCALE_DIV ? lane_ops(OP_DIV, 20) : how == ATTN_SCALE_MUL);
  return scores * ops / sched_lane_ops_rate(hw, t > 0 ? t : 1, 4);
}

/* The roofline of a kernel at concrete FLOPs and bytes, on `threads` of hw: sched.c's term,
 * shared with the GPU's launch model. */
double cost_roofline(const HwModel *hw, int threads, double flops, double bytes) {
  return sched_roofline(hw, threads, flops, bytes);
}
