/* cost.c -- the analytical cost of a lowered program: FLOPs and bytes moved as polynomials
 * in the size variables, and a roofline prediction of the time from the hardware model.
 *
 * FLOPs count floating-point operations of the element expressions (a transcendental
 * function counts as one), a reduction step as one more.  Bytes count compulsory traffic:
 * each input read once, each output written once, each temporary written and read back;
 * per-row intermediates of a fused kernel stay in cache and cost nothing.  The prediction
 * is max(FLOPs / peak, bytes / bandwidth) per kernel, with the peak and the bandwidth of
 * the threads in use; contractions are predicted by the micro-kernel model of gemm.c.
 */
#include "config.h"
#include "dyn_int.h"

#include <string.h>

static const Poly *flops_of(PolyCtx *pc, const Program *p, const KExpr *e) {
  const Poly *f = poly_const(pc, 0);
  for (int i = 0; i < e->n; i++) f = poly_add(pc, f, flops_of(pc, p, e->a[i]));
  switch (e->kind) {
  case KX_UN:
  case KX_BIN:
    if (elem_is_float(e->ty) || (e->kind == KX_BIN && op_class(e->op) == OPK_CMP && elem_is_float(e->opty)))
      f = poly_add(pc, f, poly_const(pc, 1));
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

void cost_kernel(const Program *p, const Kernel *kn, PolyCtx *pc, const Poly **flops, const Poly **bytes) {
  const Poly *f = poly_const(pc, 0), *b = poly_const(pc, 0);
  const Poly *outer = poly_const(pc, 1);
  for (int o = 0; o < kn->nouter; o++) outer = poly_mul(pc, outer, p->axes[kn->outer[o]].extent);
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    const Poly *pts = outer;
    for (int a = 0; a < st->naxes; a++) pts = poly_mul(pc, pts, p->axes[st->axes[a]].extent);
    f = poly_add(pc, f, poly_mul(pc, pts, flops_of(pc, p, st->expr)));
  }
  /* traffic: the slots the kernel reads (once) and writes (once), not its per-row ones */
  bool *read = xcalloc((size_t)p->nslots + 1, 1), *written = xcalloc((size_t)p->nslots + 1, 1);
  for (int s = 0; s < kn->nstages; s++) {
    written[kn->stages[s].out] = true;
    kexpr_mark_loads(kn->stages[s].expr, read);
  }
  for (int i = 0; i < p->nslots; i++) {
    const Slot *sl = &p->slots[i];
    if (sl->kind == SLOT_LOCAL || sl->kind == SLOT_INLINED) continue;
    int n = (read[i] && !written[i] ? 1 : 0) + (written[i] ? 1 : 0);
    if (n) b = poly_add(pc, b, poly_mul(pc, poly_const(pc, n * elem_size(sl->type.elem)), numel(pc, &sl->type, 0)));
  }
  free(read);
  free(written);
  *flops = f;
  *bytes = b;
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

/* The roofline of a kernel at concrete FLOPs and bytes, on `threads` of hw: sched.c's term,
 * shared with the GPU's launch model. */
double cost_roofline(const HwModel *hw, int threads, double flops, double bytes) {
  return sched_roofline(hw, threads, flops, bytes);
}
