/* fuse_attn.c -- attention chains, recognised in the lowered program for the back ends that
 * fuse them.
 *
 * After lowering and contract.c, softmax(Q.K^T * c) . V written in index notation is four
 * kernels: the scores (a contraction over d), a row-wise kernel (score function, max over t,
 * exp of the difference, sum over t), the contraction over t of the exponentials with V, and
 * the division by the sum.  This file matches that structure -- never a function's name --
 * and records where Q, K and V sit, the scale and a mask of the form where(affine(s, t) op
 * affine(s, t), score, -inf); the CPU back end (cpu_attn.c) runs such a chain as one kernel.
 */
#include "config.h"
#include "dyn_int.h"

#include <math.h>
#include <string.h>

/* The kernel's full index of stage st: its outer axes, then the stage's own. */
static int full_axes(const Kernel *kn, const Stage *st, int *ax) {
  int n = 0;
  for (int i = 0; i < kn->nouter && n < DYN_MAX_RANK; i++) ax[n++] = kn->outer[i];
  for (int i = 0; i < st->naxes && n < DYN_MAX_RANK; i++) ax[n++] = st->axes[i];
  return n;
}

/* A load of slot `slot`, checked at compile time, whose subscripts are the axes ax[0..n). */
static bool ident_load(const KExpr *e, int slot, const int *ax, int n) {
  if (e->kind != KX_LOAD || e->slot != slot || e->checked || e->n != n || e->ty != DYN_F32) return false;
  for (int i = 0; i < n; i++)
    if (e->a[i]->kind != KX_AXIS || e->a[i]->axis != ax[i]) return false;
  return true;
}

/* No axis and no load: a value fixed for the whole call (sqrt(f32(D)), 0.125). */
static bool call_constant(const KExpr *e) {
  if (e->axmask || e->kind == KX_LOAD || e->kind == KX_REDUCE || e->kind == KX_SCAN || e->kind == KX_AXIS)
    return false;
  for (int i = 0; i < e->n; i++)
    if (!call_constant(e->a[i])) return false;
  switch (e->kind) {
  case KX_CONST: case KX_SIZE: case KX_CAST: return true;
  case KX_UN:
    return e->op == OP_NEG || e->op == OP_SQRT || e->op == OP_RSQRT || e->op == OP_EXP || e->op == OP_LOG ||
           e->op == OP_ABS;
  case KX_BIN:   /* what fuse_attn_value computes; an integer division could fail: refused */
    return e->op == OP_ADD || e->op == OP_SUB || e->op == OP_MUL || (e->op == OP_DIV && elem_is_float(e->ty)) ||
           e->op == OP_MAX || e->op == OP_MIN || e->op == OP_POWF || e->op == OP_POW;
  default: return false;
  }
}

/* An integer expression affine in axes s and t: the mask's sides. */
static bool affine(const KExpr *e, int s, int t) {
  if (!elem_is_int(e->ty)) return false;
  switch (e->kind) {
  case KX_AXIS: return e->axis == s || e->axis == t;
  case KX_CONST: case KX_SIZE: return true;
  case KX_UN: return e->op == OP_NEG && affine(e->a[0], s, t);
  case KX_BIN:
    if (e->op == OP_ADD || e->op == OP_SUB) return affine(e->a[0], s, t) && affine(e->a[1], s, t);
    if (e->op == OP_MUL)
      return (call_constant(e->a[0]) && affine(e->a[1], s, t)) || (call_constant(e->a[1]) && affine(e->a[0], s, t));
    return false;
  default: return false;
  }
}

/* score = dot, dot * c, c * dot or dot / c, with c a call constant; dot the load ld. */
static bool score_fn(const KExpr *e, int slot, const int *ax, int n, AttnChain *c) {
  if (ident_load(e, slot, ax, n)) return true;
  if (e->kind != KX_BIN || e->ty != DYN_F32) return false;
  if (e->op == OP_MUL && ident_load(e->a[0], slot, ax, n) && call_constant(e->a[1])) c->scale = e->a[1];
  else if (e->op == OP_MUL && ident_load(e->a[1], slot, ax, n) && call_constant(e->a[0])) c->scale = e->a[0];
  else if (e->op == OP_DIV && ident_load(e->a[0], slot, ax, n) && call_constant(e->a[1])) c->scale = e->a[1], c->div = true;
  else return false;
  return true;
}

static bool is_neg_inf(const KExpr *e) {
  return e->kind == KX_CONST && elem_is_float(e->ty) && isinf(e->f) && e->f < 0;
}

/* score(dot), perhaps masked: where(l op r, score(dot), -inf), over the full index fa of r
 * axes (s and t the last two). */
static bool score_expr(const KExpr *x, int slot, const int *fa, int r, AttnChain *c) {
  if (x->kind == KX_SELECT) {
    const KExpr *cond = x->a[0];
    if (!is_neg_inf(x->a[2]) || cond->kind != KX_BIN) return false;
    if (cond->op != OP_LT && cond->op != OP_LE && cond->op != OP_GT && cond->op != OP_GE && cond->op != OP_EQ)
      return false;
    if (!affine(cond->a[0], fa[r - 2], fa[r - 1]) || !affine(cond->a[1], fa[r - 2], fa[r - 1])) return false;
    c->mask_l = cond->a[0];
    c->mask_r = cond->a[1];
    c->mask_op = cond->op;
    c->ax_s = fa[r - 2];
    c->ax_t = fa[r - 1];
    x = x->a[1];
  }
  return score_fn(x, slot, fa, r, c);
}

/* Does any kernel outside [k0, k0 + 4) load slot, or is it returned? */
static bool seen_outside(const Program *p, int k0, int slot, bool *mark) {
  for (int i = 0; i < p->nout; i++)
    if (p->outputs[i] == slot) return true;
  for (int k = 0; k < p->nkernels; k++) {
    if (k >= k0 && k < k0 + 4) continue;
    memset(mark, 0, (size_t)p->nslots * sizeof *mark);
    for (int s = 0; s < p->kernels[k].nstages; s++) kexpr_mark_loads(p->kernels[k].stages[s].expr, mark);
    if (mark[slot]) return true;
  }
  return false;
}

/* The chain starting at kernel k0, into *c; false when it is none. */
static bool match_at(const Program *p, int k0, AttnChain *c) {
  if (k0 + 4 > p->nkernels) return false;
  const Kernel *K0 = &p->kernels[k0], *K1 = K0 + 1, *K2 = K0 + 2, *K3 = K0 + 3;
  const Contraction *c0 = K0->con, *c2 = K2->con;
  if (!c0 || !c2 || c0->epilogue || c2->epilogue || c0->et != DYN_F32 || c2->et != DYN_F32) return false;
  if (K0->nstages != 1 || K2->nstages != 1 || K3->nstages != 1 || K1->nstages < 3 || K1->nstages > 4) return false;
  memset(c, 0, sizeof *c);
  c->k0 = k0;
  int f0[DYN_MAX_RANK], n = full_axes(K0, &K0->stages[0], f0);
  int r = (c0->batch >= 0) + 2;
  if (n != r || (c0->batch >= 0 && f0[0] != c0->batch) || (c2->batch >= 0) != (c0->batch >= 0)) return false;
  int sc = c0->c_slot;
  /* the scores' rows are s, their columns t: Q is the operand holding s */
  bool q_is_a;
  if (f0[r - 2] == c0->m && f0[r - 1] == c0->n) q_is_a = true;
  else if (f0[r - 2] == c0->n && f0[r - 1] == c0->m) q_is_a = false;
  else return false;
  const int *ap = c0->apos, *bp = c0->bpos;
  c->q = q_is_a ? c0->a_slot : c0->b_slot;
  c->k = q_is_a ? c0->b_slot : c0->a_slot;
  for (int i = 0; i < 3; i++) {
    c->qpos[i] = q_is_a ? ap[i] : (int[]){bp[0], bp[2], bp[1]}[i];
    c->kpos[i] = q_is_a ? (int[]){bp[0], bp[2], bp[1]}[i] : ap[i];
  }
  c->ax_b = c0->batch;
  c->ax_S = f0[r - 2];
  c->ax_T = f0[r - 1];
  c->ax_D = c0->k;
  c->batch = c0->batch >= 0;

  /* the row-wise kernel: [a = score(scores)], m = max[t] a, e = exp(a - m), z = sum[t] e; the
   * score stored as a (batched chains), or written out in both m and e (lowering inlines a
   * cheap one) */
  int st = 0, fa[DYN_MAX_RANK], aslot = sc;
  c->inner[0] = sc;
  c->inner[1] = -1;
  if (K1->nstages == 4) {
    const Stage *sa = &K1->stages[st++];
    if (full_axes(K1, sa, fa) != r || !score_expr(sa->expr, sc, fa, r, c)) return false;
    aslot = sa->out;
    c->inner[1] = aslot;
  }
  const Stage *sm = &K1->stages[st++], *se = &K1->stages[st++], *sz = &K1->stages[st++];
  int fm[DYN_MAX_RANK], fe[DYN_MAX_RANK], fz[DYN_MAX_RANK];
  if (full_axes(K1, sm, fm) != r - 1 || full_axes(K1, se, fe) != r || full_axes(K1, sz, fz) != r - 1) return false;
  const KExpr *mx = sm->expr, *ex = se->expr, *zx = sz->expr;
  if (mx->kind != KX_REDUCE || mx->red != RED_MAX || mx->nraxes != 1) return false;
  fm[r - 1] = mx->raxes[0];
  if (ex->kind != KX_UN || ex->op != OP_EXP || ex->a[0]->kind != KX_BIN || ex->a[0]->op != OP_SUB) return false;
  if (!ident_load(ex->a[0]->a[1], sm->out, fe, r - 1)) return false;
  if (K1->nstages == 4) {
    if (!ident_load(mx->a[0], aslot, fm, r) || !ident_load(ex->a[0]->a[0], aslot, fe, r)) return false;
  } else {
    /* the same score in both places: the same text, each parsed over its own axes */
    AttnChain in_m = *c;
    if (!score_expr(mx->a[0], sc, fm, r, &in_m) || !score_expr(ex->a[0]->a[0], sc, fe, r, c)) return false;
    Buf t1 = {0}, t2 = {0};
    kx_print(p, mx->a[0], &t1);
    kx_print(p, ex->a[0]->a[0], &t2);
    bool same = t1.s && t2.s && !strcmp(t1.s, t2.s) && (in_m.mask_l != NULL) == (c->mask_l != NULL);
    buf_free(&t1);
    buf_free(&t2);
    if (!same) return false;
  }
  if (zx->kind != KX_REDUCE || zx->red != RED_SUM || zx->nraxes != 1) return false;
  fz[r - 1] = zx->raxes[0];
  if (!ident_load(zx->a[0], se->out, fz, r)) return false;
  int eslot = se->out;

  /* O.c = sum[t] e * V, laid out (batch, s, d) */
  int f2[DYN_MAX_RANK];
  if (full_axes(K2, &K2->stages[0], f2) != r || (c2->batch >= 0 && f2[0] != c2->batch)) return false;
  const int *ap2 = c2->apos, *bp2 = c2->bpos;
  if (c2->a_slot == eslot && c2->b_slot != eslot) {
    if ((c->batch && ap2[0] != 0) || ap2[1] != r - 2 || ap2[2] != r - 1 || f2[r - 2] != c2->m || f2[r - 1] != c2->n)
      return false;
    c->v = c2->b_slot;
    c->vpos[0] = bp2[0], c->vpos[1] = bp2[1], c->vpos[2] = bp2[2];
    c->ax_E = c2->n;
  } else if (c2->b_slot == eslot && c2->a_slot != eslot) {
    if ((c->batch && bp2[0] != 0) || bp2[2] != r - 2 || bp2[1] != r - 1 || f2[r - 2] != c2->n || f2[r - 1] != c2->m)
      return false;
    c->v = c2->a_slot;
    c->vpos[0] = ap2[0], c->vpos[1] = ap2[2], c->vpos[2] = ap2[1];
    c->ax_E = c2->m;
  } else {
    return false;
  }
  /* O = O.c / z */
  int f3[DYN_MAX_RANK];
  const KExpr *ox = K3->stages[0].expr;
  if (full_axes(K3, &K3->stages[0], f3) != r || ox->kind != KX_BIN || ox->op != OP_DIV) return false;
  if (!ident_load(ox->a[0], c2->c_slot, f3, r) || !ident_load(ox->a[1], sz->out, f3, r - 1)) return false;
  c->o = K3->stages[0].out;
  if (p->slots[c->o].type.elem != DYN_F32) return false;
  c->inner[2] = sm->out, c->inner[3] = eslot, c->inner[4] = sz->out, c->inner[5] = c2->c_slot;

  /* nothing else reads what the fused kernel never stores */
  bool *mark = xcalloc((size_t)p->nslots + 1, sizeof *mark);
  bool alone = true;
  for (int i = 0; i < 6 && alone; i++)
    if (c->inner[i] >= 0 && seen_outside(p, k0, c->inner[i], mark)) alone = false;
  free(mark);
  /* V, Q and K are read as the fused kernel runs: none of them may be what it never stores */
  for (int i = 0; i < 6; i++)
    if (c->inner[i] >= 0 && (c->inner[i] == c->q || c->inner[i] == c->k || c->inner[i] == c->v)) alone = false;
  return alone;
}

int fuse_attn_find(const Program *p, AttnChain *out, int max) {
  int n = 0;
  for (int k = 0; k + 4 <= p->nkernels && n < max; k++)
    if (match_at(p, k, &out[n])) {
      n++;
      k += 3;
    }
  return n;
}

/* The value of a call constant or of a mask's side at (s, t); szv as eval_size_values made it. */
double fuse_attn_value(const KExpr *e, const int64_t *szv, int ax_s, int ax_t, int64_t s, int64_t t) {
  double x, y;
  switch (e->kind) {
  case KX_CONST: return elem_is_float(e->ty) ? e->f : (double)e->i;
  case KX_SIZE: return (double)szv[e->id];
  case KX_AXIS: return e->axis == ax_s ? (double)s : e->axis == ax_t ? (double)t : 0;
  case KX_CAST:
    x = fuse_attn_value(e->a[0], szv, ax_s, ax_t, s, t);
    return e->ty == DYN_F32 ? (double)(float)x : elem_is_int(e->ty) ? trunc(x) : x;
  case KX_UN:
    x = fuse_attn_value(e->a[0], szv, ax_s, ax_t, s, t);
    switch (e->op) {
    case OP_NEG: y = -x; break;
    case OP_SQRT: y = sqrt(x); break;
    case OP_RSQRT: y = 1 / sqrt(x); break;
    case OP_EXP: y = exp(x); break;
    case OP_LOG: y = log(x); break;
    case OP_ABS: y = fabs(x); break;
    default: y = NAN; break;
    }
    return e->ty == DYN_F32 ? (double)(float)y : y;
  case KX_BIN:
    x = fuse_attn_value(e->a[0], szv, ax_s, ax_t, s, t);
    y = fuse_attn_value(e->a[1], szv, ax_s, ax_t, s, t);
    switch (e->op) {
    case OP_ADD: x += y; break;
    case OP_SUB: x -= y; break;
    case OP_MUL: x *= y; break;
    case OP_DIV: x /= y; break;
    case OP_MAX: x = x > y ? x : y; break;
    case OP_MIN: x = x < y ? x : y; break;
    case OP_POWF: case OP_POW: x = pow(x, y); break;
    default: x = NAN; break;
    }
    return e->ty == DYN_F32 ? (double)(float)x : x;
  default: return NAN;
  }
}
