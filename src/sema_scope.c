/* sema_scope.c -- the type checker's scope, below its other files: the names in scope
 * (tensors and sizes, indices), diagnostics with "did you mean", printed forms of types,
 * polynomials and expressions kept in the function's arena, and dimension expressions as
 * polynomials over the sizes.  sema.c, sema_prove.c and sema_view.c all speak through it. */
#include "config.h"
#include "sema_int.h"

#include <stdarg.h>
#include <string.h>

/* ---- printing and reporting ---- */

/* A printed form moved from b (freed) into the function's arena. */
static const char *kept(S *s, Buf *b) {
  const char *r = arena_strndup(s->a, b->s, b->len);
  buf_free(b);
  return r;
}

const char *scope_tstr(S *s, const Type *t) {
  Buf b = {0};
  type_str(t, &b);
  return kept(s, &b);
}

const char *scope_pstr(S *s, const Poly *p) {
  Buf b = {0};
  poly_str(p, &b);
  return kept(s, &b);
}

const char *scope_estr(S *s, const Expr *e) {
  Buf b = {0};
  parse_print_expr(e, &b);
  return kept(s, &b);
}

Diag *scope_err(S *s, Span at, DiagId id, ...) {
  va_list ap;
  va_start(ap, id);
  Diag *dg = diag_reportv(s->d, at, id, ap);
  va_end(ap);
  if (dg->level == DIAG_ERROR) s->err = true;
  return dg;
}

Sym *scope_find_sym(S *s, const char *name) {
  for (int i = s->syms.n - 1; i >= 0; i--)
    if (!strcmp(s->syms.a[i].name, name)) return &s->syms.a[i];
  return NULL;
}

Idx *scope_find_idx(S *s, const char *name) {
  for (int i = s->nidx - 1; i >= 0; i--)
    if (!strcmp(s->idx[i].name, name)) return &s->idx[i];
  return NULL;
}

/* An unknown name, with "did you mean 'NAME'?" when one name is clearly nearest: among the
 * tensors, sizes and indices in scope for a value (E_UNDEFINED), the sizes for a dimension
 * (E_UNBOUND_SIZE), the session's and the math functions for a call (E_UNDEFINED_FN). */
void scope_undefined(S *s, Span at, DiagId id, const char *name) {
  Diag *dg = id == E_UNBOUND_SIZE ? scope_err(s, at, id, name, name) : scope_err(s, at, id, name);
  Suggest sg;
  suggest_init(&sg, name);
  if (id == E_UNDEFINED_FN) {
    for (int i = OP_EXP; i < OP__COUNT; i++) suggest_add(&sg, op_name((OpKind)i));
    if (s->env->each_fn) s->env->each_fn(s->env->env, suggest_add_cb, &sg);
  } else {
    for (int i = 0; i < s->syms.n; i++)
      if (id == E_UNDEFINED || s->syms.a[i].kind == SYM_SIZE) suggest_add(&sg, s->syms.a[i].name);
    for (int i = 0; i < s->nidx && id == E_UNDEFINED; i++) suggest_add(&sg, s->idx[i].name);
    if (id == E_UNDEFINED && s->env->each_var) s->env->each_var(s->env->env, suggest_add_cb, &sg);
  }
  const char *best = suggest_best(&sg);
  if (best) diag_note(dg, (Span){0}, "did you mean '%s'?", best);
}

/* ---- sizes: dimension expressions to polynomials ---- */

/* Convert a size expression.  bind: a lone unknown name becomes a new size variable (only
 * for parameter types in the first pass).  Returns NULL after reporting. */
const Poly *scope_dim_poly(S *s, Expr *e, bool quiet) {
  switch (e->kind) {
  case EX_NUM:
    if (e->is_int) return poly_const(s->pc, e->ival);
    break;
  case EX_NAME: {
    Sym *y = scope_find_sym(s, e->name);
    if (y && y->kind == SYM_SIZE) return poly_var(s->pc, e->name);
    Idx *ix = scope_find_idx(s, e->name);
    if (ix) return poly_var(s->pc, e->name);
    if (!quiet) {
      if (y) scope_err(s, e->span, E_BAD_DIM, arena_printf(s->a, "the tensor '%s'", e->name));
      else scope_undefined(s, e->span, E_UNBOUND_SIZE, e->name);
    }
    return NULL;
  }
  case EX_UNARY:
    if (e->op == OP_NEG) {
      const Poly *x = scope_dim_poly(s, e->args[0], quiet);
      return x ? poly_neg(s->pc, x) : NULL;
    }
    break;
  case EX_BINARY: {
    OpKind op = e->op;
    if (op != OP_ADD && op != OP_SUB && op != OP_MUL && op != OP_DIV && op != OP_MOD) break;
    const Poly *l = scope_dim_poly(s, e->args[0], quiet);
    const Poly *r = l ? scope_dim_poly(s, e->args[1], quiet) : NULL;
    if (!r) return NULL;
    int64_t rv;
    if ((op == OP_DIV || op == OP_MOD) && poly_is_const(r, &rv) && rv == 0) {
      if (!quiet) scope_err(s, e->span, E_BAD_DIM, "a division by zero");
      return NULL;
    }
    return poly_op(s->pc, op, l, r);
  }
  case EX_CALL:
    if ((!strcmp(e->name, "min") || !strcmp(e->name, "max")) && e->nargs == 2) {
      const Poly *l = scope_dim_poly(s, e->args[0], quiet);
      const Poly *r = l ? scope_dim_poly(s, e->args[1], quiet) : NULL;
      if (!r) return NULL;
      return e->name[1] == 'i' ? poly_min(s->pc, l, r) : poly_max(s->pc, l, r);
    }
    break;
  default:
    break;
  }
  if (!quiet) scope_err(s, e->span, E_BAD_DIM, arena_printf(s->a, "'%s'", scope_estr(s, e)));
  return NULL;
}

/* The first name in e that is an index in scope, or NULL. */
const Expr *scope_index_in(S *s, const Expr *e) {
  if (e->kind == EX_NAME && scope_find_idx(s, e->name)) return e;
  for (int i = 0; i < e->nargs; i++) {
    const Expr *x = scope_index_in(s, e->args[i]);
    if (x) return x;
  }
  return NULL;
}
