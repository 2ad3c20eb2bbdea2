/* sema_prove.c -- the type checker's prover: whether a size polynomial is >= 0 under the facts
 * in force, the least and greatest value of a subscript over the index ranges, and with them
 * every access proved in bounds, reported out of bounds, or left to a run-time check.  A
 * where(...) condition narrows the ranges inside its branches.  Called by sema.c's checking
 * pass and by the views (sema_view.c); the polynomials themselves are poly.c's. */
#include "config.h"
#include "sema_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- facts ---- */

const char *cmp_name(CmpOp c) {
  static const char *n[] = {"==", "!=", "<", "<=", ">", ">="};
  return n[c];
}

bool fact_holds(const Fact *f, int64_t l, int64_t r) {
  switch (f->cmp) {
  case CMP_EQ: return l == r;
  case CMP_NE: return l != r;
  case CMP_LT: return l < r;
  case CMP_LE: return l <= r;
  case CMP_GT: return l > r;
  case CMP_GE: return l >= r;
  }
  return false;
}

bool prove_nonneg(S *s, const Poly *p) {
  return poly_nonneg(s->pc, p, s->facts.a, s->facts.n);
}

/* l c r as >= 0 facts for the prover. */
void prove_assume(S *s, const Poly *l, CmpOp c, const Poly *r) {
  const Poly *d = poly_sub(s->pc, l, r), *one = poly_const(s->pc, 1);
  switch (c) {
  case CMP_GE: vec_push(s->facts, d); break;
  case CMP_GT: vec_push(s->facts, poly_sub(s->pc, d, one)); break;
  case CMP_LE: vec_push(s->facts, poly_neg(s->pc, d)); break;
  case CMP_LT: vec_push(s->facts, poly_sub(s->pc, poly_neg(s->pc, d), one)); break;
  case CMP_EQ: vec_push(s->facts, d); vec_push(s->facts, poly_neg(s->pc, d)); break;
  case CMP_NE: break;
  }
}

/* ---- bounds ---- */

/* A subscript as a polynomial in sizes and indices, or NULL if it is not one. */
static const Poly *sub_poly(S *s, Expr *e) {
  switch (e->kind) {
  case EX_NUM:
    return e->is_int ? poly_const(s->pc, e->ival) : NULL;
  case EX_NAME:
    return (e->res == RES_INDEX || e->res == RES_SIZE) ? poly_var(s->pc, e->name) : NULL;
  case EX_CAST:
    return NULL;
  case EX_UNARY:
    if (e->op == OP_NEG) {
      const Poly *x = sub_poly(s, e->args[0]);
      return x ? poly_neg(s->pc, x) : NULL;
    }
    return NULL;
  case EX_BINARY: {
    if (e->op != OP_ADD && e->op != OP_SUB && e->op != OP_MUL && e->op != OP_DIV && e->op != OP_MOD)
      return NULL;
    const Poly *l = sub_poly(s, e->args[0]), *r = l ? sub_poly(s, e->args[1]) : NULL;
    if (!r) return NULL;
    int64_t v;
    if ((e->op == OP_DIV || e->op == OP_MOD) && (!poly_is_const(r, &v) || v <= 0)) return NULL;
    return poly_op(s->pc, e->op, l, r);
  }
  default:
    return NULL;
  }
}

/* The least and greatest value of p over the index ranges in scope.  False if p is not
 * affine in the indices (or a coefficient's sign is unknown). */
static bool extremes(S *s, const Poly *p, const Poly **lo, const Poly **hi) {
  const Poly *pl = p, *ph = p;
  for (int i = s->nidx - 1; i >= 0; i--) {
    Idx *ix = &s->idx[i];
    if (scope_find_idx(s, ix->name) != ix || !ix->ext) continue;   /* shadowed */
    const char *v = ix->name;
    const Poly *cl, *rl, *ch, *rh;
    if (!poly_affine_in(s->pc, pl, v, &cl, &rl) || !poly_affine_in(s->pc, ph, v, &ch, &rh))
      return false;
    const Poly *one = poly_const(s->pc, 1);
    const Poly *ilo = ix->lo, *ihi = poly_sub(s->pc, ix->hi, one);
    int64_t c;
    bool cl_pos, ch_pos;
    if (poly_is_const(cl, &c)) cl_pos = c >= 0;
    else if (prove_nonneg(s, cl)) cl_pos = true;
    else if (prove_nonneg(s, poly_neg(s->pc, cl))) cl_pos = false;
    else return false;
    if (poly_is_const(ch, &c)) ch_pos = c >= 0;
    else if (prove_nonneg(s, ch)) ch_pos = true;
    else if (prove_nonneg(s, poly_neg(s->pc, ch))) ch_pos = false;
    else return false;
    pl = poly_add(s->pc, poly_mul(s->pc, cl, cl_pos ? ilo : ihi), rl);
    ph = poly_add(s->pc, poly_mul(s->pc, ch, ch_pos ? ihi : ilo), rh);
  }
  *lo = pl;
  *hi = ph;
  return true;
}

/* Prove an access in bounds, else report (definitely out: error; unknown: warning and a
 * run-time check). */
/* After "X[i + 1] is out of bounds" where a bare subscript Z[i] gave i all of an axis: the
 * user meant part of it, and a slice of Z says so (`X[i + 0]` once did, unexplained).  over:
 * how far past the last element the access reaches (> 0), or under: how far before 0. */

static void slice_hint(S *s, Diag *dg, const Expr *sub, int64_t over, int64_t under) {
  const Expr *iname = scope_index_in(s, sub);
  Idx *ix = iname ? scope_find_idx(s, iname->name) : NULL;
  Sym *z = ix && ix->bare_of ? scope_find_sym(s, ix->bare_of) : NULL;
  if (!z || z->kind != SYM_TENSOR || ix->bare_dim >= z->type.rank) return;
  diag_note(dg, ix->ext_span, "'%s' ranges over all of dimension %d of %s (%s) because it is a whole subscript here",
            ix->name, ix->bare_dim, z->name, scope_pstr(s, ix->ext));
  Buf b = {0};
  buf_printf(&b, "%s[", z->name);
  for (int d = 0; d < z->type.rank; d++) {
    const Poly *lo = poly_const(s->pc, 0), *hi = z->type.dims[d];
    if (d == ix->bare_dim) {
      if (over > 0) hi = poly_sub(s->pc, hi, poly_const(s->pc, over));
      else lo = poly_const(s->pc, under);
    }
    buf_printf(&b, "%s%s:%s", d ? ", " : "", scope_pstr(s, lo), scope_pstr(s, hi));
  }
  diag_note(dg, (Span){0}, "to use part of the axis, index a slice of %s instead, such as %s]", z->name, b.s);
  buf_free(&b);
}

/* A subscript that is an element of an integer tensor, X[I[m]]: a gather, checked at run
 * time by design (the value is data, which no proof can know), so without W_RUNTIME_CHECK. */
static bool data_subscript(const Expr *sub) {
  while (sub->kind == EX_CAST && sub->nargs == 1) sub = sub->args[0];
  return sub->kind == EX_INDEX;
}

void prove_access(S *s, Expr *e, const Type *t) {
  bool checked = false, warn = false;
  for (int k = 0; k < e->nargs && k < t->rank; k++) {
    Expr *sub = e->args[k];
    if (sub->kind == EX_NAME && sub->res == RES_INDEX) {
      Idx *ix = scope_find_idx(s, sub->name);
      if (ix && ix->ext == t->dims[k] && ix->lo == poly_const(s->pc, 0) && ix->hi == ix->ext)
        continue;
    }
    const Poly *p = sub_poly(s, sub), *lo, *hi;
    /* x % c with a constant c > 0 and x >= 0 lies in [0, c - 1], whatever x is */
    if (sub->kind == EX_BINARY && sub->op == OP_MOD && sub->args[1]->kind == EX_NUM && sub->args[1]->is_int &&
        sub->args[1]->ival > 0) {
      const Poly *xp = sub_poly(s, sub->args[0]), *xl, *xh;
      if (xp && extremes(s, xp, &xl, &xh) && prove_nonneg(s, xl)) {
        lo = poly_const(s->pc, 0);
        hi = poly_const(s->pc, sub->args[1]->ival - 1);
        p = NULL;
        const Poly *room = poly_sub(s->pc, poly_sub(s->pc, t->dims[k], poly_const(s->pc, 1)), hi);
        if (prove_nonneg(s, room)) continue;
      }
    }
    if (!p || !extremes(s, p, &lo, &hi)) {
      checked = true;
      warn = warn || !data_subscript(sub);
      continue;
    }
    /* The access happens only when every range in scope is non-empty. */
    int saved = s->facts.n;
    const Poly *one = poly_const(s->pc, 1);
    for (int i = 0; i < s->nidx; i++) {
      Idx *ix = &s->idx[i];
      if (!ix->ext) continue;
      vec_push(s->facts, poly_sub(s->pc, poly_sub(s->pc, ix->hi, ix->lo), one));
      if (ix->hi != ix->ext)           /* narrowed by a where: its whole range is non-empty too */
        vec_push(s->facts, poly_sub(s->pc, ix->ext, one));
    }
    const Poly *room = poly_sub(s->pc, poly_sub(s->pc, t->dims[k], one), hi);
    bool ok_lo = prove_nonneg(s, lo), ok_hi = prove_nonneg(s, room);
    s->facts.n = saved;
    if (ok_lo && ok_hi) continue;
    int64_t v;
    if (!ok_hi && poly_is_const(room, &v) && v < 0) {
      Diag *dg = scope_err(s, e->span, E_OUT_OF_BOUNDS, scope_estr(s, e), k, scope_pstr(s, hi), k, e->name, scope_pstr(s, t->dims[k]));
      slice_hint(s, dg, sub, -v, 0);
      return;
    }
    if (!ok_lo && poly_is_const(lo, &v) && v < 0) {
      Diag *dg = scope_err(s, e->span, E_OUT_OF_BOUNDS, scope_estr(s, e), k, scope_pstr(s, lo), k, e->name, scope_pstr(s, t->dims[k]));
      slice_hint(s, dg, sub, 0, -v);
      return;
    }
    checked = warn = true;
  }
  e->checked = checked;
  if (warn) scope_err(s, e->span, W_RUNTIME_CHECK, scope_estr(s, e));
}

/* Narrow index bounds from a condition (taken when `positive`, else its negation). */
void prove_refine(S *s, Expr *c, bool positive) {
  if (c->kind == EX_BINARY && c->op == OP_AND && positive) {
    prove_refine(s, c->args[0], true);
    prove_refine(s, c->args[1], true);
    return;
  }
  if (c->kind == EX_BINARY && c->op == OP_OR && !positive) {
    prove_refine(s, c->args[0], false);
    prove_refine(s, c->args[1], false);
    return;
  }
  if (c->kind == EX_UNARY && c->op == OP_NOT) {
    prove_refine(s, c->args[0], !positive);
    return;
  }
  if (c->kind != EX_BINARY) return;
  OpKind op = c->op;
  if (op != OP_LT && op != OP_LE && op != OP_GT && op != OP_GE) return;
  Expr *l = c->args[0], *r = c->args[1];
  if (!(l->kind == EX_NAME && l->res == RES_INDEX)) {
    if (!(r->kind == EX_NAME && r->res == RES_INDEX)) return;
    Expr *t = l; l = r; r = t;          /* E < i  is  i > E */
    op = op == OP_LT ? OP_GT : op == OP_LE ? OP_GE : op == OP_GT ? OP_LT : OP_LE;
  }
  if (!positive) op = op == OP_LT ? OP_GE : op == OP_LE ? OP_GT : op == OP_GT ? OP_LE : OP_LT;
  Idx *ix = scope_find_idx(s, l->name);
  const Poly *b = sub_poly(s, r);
  if (!ix || !b) return;
  const char *vars[16];
  int nv = poly_vars(b, vars, 16);
  for (int i = 0; i < nv; i++)
    if (scope_find_idx(s, vars[i])) return;      /* bounds in terms of other indices: not used */
  const Poly *one = poly_const(s->pc, 1);
  /* Both the range and the condition hold in the branch.  A condition provably looser
   * than the bound in force (i <= N over i < N) must not replace it, or an access the
   * range keeps in bounds would be "proved" out of bounds; otherwise the condition's
   * bound is taken (when the two cannot be compared, both are true: either will do). */
  const Poly *nb;
  switch (op) {
  case OP_LT:
  case OP_LE:
    nb = op == OP_LT ? b : poly_add(s->pc, b, one);
    if (!prove_nonneg(s, poly_sub(s->pc, nb, ix->hi))) ix->hi = nb;
    break;
  default:
    nb = op == OP_GE ? b : poly_add(s->pc, b, one);
    if (!prove_nonneg(s, poly_sub(s->pc, ix->lo, nb))) ix->lo = nb;
    break;
  }
}
