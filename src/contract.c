/* contract.c -- the contraction, recognised once, in the middle of the pipeline.
 *
 * Fusion (lower.c) keeps a sum of products of two plain loads in a node of its own; once the
 * kernels are built, each one that is such a contraction gets a record (Contraction): which
 * axes are M, N, K and the batch, where each sits in A's and B's subscripts, and whether an
 * epilogue surrounds the sum.  The CPU back end (cpu.c) and the GPU's analysis
 * (cuda_analyse.c) read that record rather than each deciding the question again.
 */
#include "config.h"
#include "dyn_int.h"

#include <string.h>

/* The shape fusion protects: sum over one index of a product of two loads whose subscripts
 * are plain axes, each operand bringing an output axis the other lacks (d[n] * d[n] is not
 * a product of two matrices). */
bool contract_expr(const KExpr *r) {
  if (r->kind != KX_REDUCE || r->red != RED_SUM || r->nraxes != 1 || !elem_is_float(r->ty)) return false;
  const KExpr *b = r->a[0];
  if (b->kind != KX_BIN || b->op != OP_MUL) return false;
  uint64_t free_axes[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    const KExpr *ld = b->a[i];
    if (ld->kind != KX_LOAD || ld->checked) return false;
    for (int k = 0; k < ld->n; k++) {
      if (ld->a[k]->kind != KX_AXIS) return false;
      if (ld->a[k]->axis != r->raxes[0]) free_axes[i] |= 1ull << (ld->a[k]->axis % 64);
    }
  }
  return (free_axes[0] & ~free_axes[1]) && (free_axes[1] & ~free_axes[0]);
}

/* How many reductions e holds; *first becomes the first met, depth first. */
static int reductions(const KExpr *e, const KExpr **first) {
  int n = 0;
  if (e->kind == KX_REDUCE) {
    if (!*first) *first = e;
    n++;
  }
  for (int i = 0; i < e->n; i++) n += reductions(e->a[i], first);
  return n;
}

/* A load of a slot of element type et, checked at compile time, every subscript an axis. */
static bool plain_load(const Program *p, const KExpr *ld, DynElem et) {
  if (ld->kind != KX_LOAD || ld->checked || p->slots[ld->slot].type.elem != et) return false;
  for (int i = 0; i < ld->n; i++)
    if (ld->a[i]->kind != KX_AXIS) return false;
  return true;
}

/* Where axis sits among ld's subscripts: -1 absent, -2 twice (a diagonal, no plain layout). */
static int pos_in(const KExpr *ld, int axis) {
  int at = -1;
  for (int i = 0; i < ld->n; i++)
    if (ld->a[i]->kind == KX_AXIS && ld->a[i]->axis == axis) {
      if (at >= 0) return -2;
      at = i;
    }
  return at;
}

/* Does A hold m and not n, and B n and not m? */
static bool roles(const KExpr *A, const KExpr *B, int m, int n) {
  return pos_in(A, m) >= 0 && pos_in(A, n) == -1 && pos_in(B, n) >= 0 && pos_in(B, m) == -1;
}

/* The kernel's stage is C[o..., b?, m, n] = f(sum[k] A[..] * B[..]) with exactly one
 * reduction, A holding m and k (and perhaps the batch), B holding k and n (and perhaps the
 * batch), each a plain layout of f32, f64, f16 or bf16 like the sum.  The operands may be
 * written either way round.  Axes o... before the batch (outer batch axes: the heads of a
 * [B, H, S, D] attention's scores) lead A, B and C alike, in the same order. */
const Contraction *contract_find(const Program *p, const Kernel *kn) {
  if (kn->nstages != 1 || kn->nouter) return NULL;
  const Stage *st = &kn->stages[0];
  const KExpr *R = NULL;
  if (st->naxes < 2 || reductions(st->expr, &R) != 1) return NULL;
  int nout = st->naxes > 3 ? st->naxes - 3 : 0;
  DynElem et = R->ty;
  if (R->red != RED_SUM || R->nraxes != 1 || (et != DYN_F32 && et != DYN_F64 && !elem_is_half(et))) return NULL;
  const KExpr *body = R->a[0];
  if (body->kind != KX_BIN || body->op != OP_MUL) return NULL;
  const KExpr *A = body->a[0], *B = body->a[1];
  if (!plain_load(p, A, et) || !plain_load(p, B, et)) return NULL;
  int k = R->raxes[0], batch = st->naxes >= 3 ? st->axes[nout] : -1;
  int m = st->axes[st->naxes - 2], n = st->axes[st->naxes - 1];
  if (pos_in(A, k) < 0 || pos_in(B, k) < 0) return NULL;
  if (!roles(A, B, m, n)) {
    const KExpr *t = A;
    A = B;
    B = t;
    if (!roles(A, B, m, n)) return NULL;
  }
  for (int i = 0; i < nout; i++)
    if (pos_in(A, st->axes[i]) != i || pos_in(B, st->axes[i]) != i) return NULL;
  int pa = batch >= 0 ? pos_in(A, batch) : -1, pb = batch >= 0 ? pos_in(B, batch) : -1;
  if (pa == -2 || pb == -2) return NULL;
  if (A->n != nout + 2 + (pa >= 0) || B->n != nout + 2 + (pb >= 0)) return NULL;
  Contraction *c = arena_alloc(p->arena, sizeof *c);
  memset(c, 0, sizeof *c);
  c->red = R;
  c->a = A;
  c->b = B;
  c->et = et;
  c->a_slot = A->slot;
  c->b_slot = B->slot;
  c->c_slot = st->out;
  c->batch = batch;
  c->nouter = nout;
  for (int i = 0; i < nout; i++) c->outer[i] = st->axes[i];
  c->m = m;
  c->n = n;
  c->k = k;
  c->apos[0] = pa;
  c->apos[1] = pos_in(A, m);
  c->apos[2] = pos_in(A, k);
  c->bpos[0] = pb;
  c->bpos[1] = pos_in(B, k);
  c->bpos[2] = pos_in(B, n);
  c->a_kc = c->apos[2] == A->n - 1;
  c->b_kc = c->bpos[1] == B->n - 1;
  c->epilogue = R != st->expr;
  return c;
}

static void axis_name(const Program *p, int ax, Buf *out) {
  buf_printf(out, "%s", ax >= 0 ? p->axes[ax].name : "-");
}

static void operand(const Program *p, const KExpr *ld, bool kc, Buf *out) {
  buf_printf(out, "%s[", p->slots[ld->slot].name);
  for (int i = 0; i < ld->n; i++) {
    if (i) buf_printf(out, ", ");
    axis_name(p, ld->a[i]->axis, out);
  }
  buf_printf(out, "]%s", kc ? " (k contiguous)" : "");
}

void contract_print(const Program *p, const Contraction *c, Buf *out) {
  buf_printf(out, "%s: batch ", p->slots[c->c_slot].name);
  for (int i = 0; i < c->nouter; i++) {
    axis_name(p, c->outer[i], out);
    buf_puts(out, " x ");
  }
  axis_name(p, c->batch, out);
  buf_printf(out, ", m ");
  axis_name(p, c->m, out);
  buf_printf(out, ", n ");
  axis_name(p, c->n, out);
  buf_printf(out, ", k ");
  axis_name(p, c->k, out);
  buf_printf(out, "; A ");
  operand(p, c->a, c->a_kc, out);
  buf_printf(out, ", B ");
  operand(p, c->b, c->b_kc, out);
  buf_printf(out, "; %s %s\n", elem_name(c->et), c->epilogue ? "with an epilogue" : "alone");
}
