/* sema.c -- the type checker: element types, symbolic sizes, index ranges, bounds.
 *
 * A function is checked once, over its size variables.  Parameters bind sizes (a lone size
 * variable binds, compound dimensions are checked); each definition infers the range of its
 * indices from their bare uses as subscripts (all uses must agree); every access is then
 * proved in bounds from the index ranges, the where facts and the conditions of enclosing
 * where(...) branches, or marked for a run-time check with a warning.
 *
 * Element types never mix silently.  Literals, sizes and indices are "weak": they take the
 * type of the other operand (an integer converts to a float where a float is needed); what
 * stays weak defaults to f32 (floats) or i64 (integers) at the end of a definition.
 *
 * This file drives the two passes; the proofs are sema_prove.c's, the rewriting of views
 * sema_view.c's, the names in scope and the reports sema_scope.c's, and the state they share
 * is in sema_int.h.
 */
#include "config.h"
#include "sema_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

static const char *where_str(S *s, Span sp) {
  int l, c;
  span_linecol(sp, &l, &c);
  return arena_printf(s->a, "%s:%d:%d", sp.src ? sp.src->name : "?", l, c);
}

static bool type_from_expr(S *s, TypeExpr *te, Type *out) {
  if (te->kind != TY_TENSOR) {
    scope_err(s, te->span, E_BAD_TYPE, te->kind == TY_SIZE ? "'size'" : "a tuple");
    return false;
  }
  memset(out, 0, sizeof *out);
  out->elem = te->elem;
  out->rank = te->ndims;
  for (int i = 0; i < te->ndims; i++) {
    out->dims[i] = scope_dim_poly(s, te->dims[i], false);
    if (!out->dims[i]) return false;
    int64_t v;
    if (poly_is_const(out->dims[i], &v) && v < 0) {
      scope_err(s, te->dims[i]->span, E_NEG_DIM, i, (long long)v);
      return false;
    }
  }
  return true;
}

/* ---- typing ---- */

static DynElem default_of(const Expr *e) { return elem_is_float(e->ty) ? DYN_F32 : e->ty; }

static Expr *wrap_cast(S *s, Expr *e, DynElem to) {
  Expr *c = arena_alloc(s->a, sizeof *c);
  c->kind = EX_CAST;
  c->span = e->span;
  c->elem = to;
  c->has_elem = true;
  c->ty = to;
  c->args = arena_alloc(s->a, sizeof(Expr *));
  c->args[0] = e;
  c->nargs = 1;
  return c;
}

/* Give a weak expression its final type.  Weak floats take the type all the way down;
 * a weak integer computation converts as a whole (i / 2 stays an integer division). */
static Expr *coerce(S *s, Expr *e, DynElem to) {
  if (!e->weak) return e;
  if (e->kind == EX_NUM) {
    /* a literal must fit the integer type it takes: every back end would wrap it its own way */
    if (e->is_int && to == DYN_I32 && (e->ival > INT32_MAX || e->ival < INT32_MIN)) {
      char lit[32];
      snprintf(lit, sizeof lit, "%lld", (long long)e->ival);
      scope_err(s, e->span, E_INT_TYPE_RANGE, lit, elem_name(to));
    }
    e->ty = to;
    e->weak = false;
    return e;
  }
  if (elem_is_int(e->ty)) {
    if (to != DYN_I64) return wrap_cast(s, coerce(s, e, DYN_I64), to);
    e->weak = false;
    e->ty = DYN_I64;
    if (e->kind == EX_BINARY || e->kind == EX_UNARY || e->kind == EX_REDUCE || e->kind == EX_SCAN ||
        (e->kind == EX_CALL && e->is_math))
      for (int i = 0; i < e->nargs; i++) e->args[i] = coerce(s, e->args[i], DYN_I64);
    if (e->kind == EX_WHERE) {
      e->args[1] = coerce(s, e->args[1], DYN_I64);
      e->args[2] = coerce(s, e->args[2], DYN_I64);
    }
    return e;
  }
  /* weak float */
  e->weak = false;
  e->ty = to;
  if (e->kind == EX_WHERE) {
    e->args[1] = coerce(s, e->args[1], to);
    e->args[2] = coerce(s, e->args[2], to);
  } else if (e->kind == EX_BINARY || e->kind == EX_UNARY || e->kind == EX_REDUCE || e->kind == EX_SCAN ||
             (e->kind == EX_CALL && e->is_math)) {
    for (int i = 0; i < e->nargs; i++) e->args[i] = coerce(s, e->args[i], to);
  }
  return e;
}

static Expr *finalize(S *s, Expr *e) { return e->weak ? coerce(s, e, default_of(e)) : e; }

static const char *tyname(const Expr *e) {
  if (!e->weak) return elem_name(e->ty);
  return elem_is_float(e->ty) ? "a float literal" : "an integer";
}

/* Unify two operands of an arithmetic operator; coerces them in place. */
static bool unify(S *s, Expr *op, Expr **l, Expr **r, bool want_float) {
  Expr *a = *l, *b = *r;
  if (a->ty == DYN_BOOL || b->ty == DYN_BOOL) {
    Expr *bad = a->ty == DYN_BOOL ? a : b;
    scope_err(s, bad->span, E_TYPE_EXPECTED, arena_printf(s->a, "'%s'", op_name(op->op)), "numbers", "bool");
    return false;
  }
  if (!a->weak && !b->weak) {
    if (a->ty != b->ty) {
      DynElem wide = elem_size(a->ty) >= elem_size(b->ty) ? a->ty : b->ty;
      if (elem_is_float(a->ty) != elem_is_float(b->ty)) wide = elem_is_float(a->ty) ? a->ty : b->ty;
      scope_err(s, op->span, E_TYPE_MIX, elem_name(a->ty), elem_name(b->ty), elem_name(wide));
      return false;
    }
    op->ty = a->ty;
    op->weak = false;
  } else if (a->weak && b->weak) {
    op->weak = true;
    op->ty = (elem_is_float(a->ty) || elem_is_float(b->ty)) ? DYN_F32 : DYN_I64;
  } else {
    Expr *strong = a->weak ? b : a, *weak = a->weak ? a : b;
    if (elem_is_float(weak->ty) && !elem_is_float(strong->ty)) {
      scope_err(s, op->span, E_TYPE_MIX, elem_name(strong->ty), "a float literal", "f32");
      return false;
    }
    op->ty = strong->ty;
    op->weak = false;
  }
  if (want_float && !elem_is_float(op->ty)) {
    if (op->weak) {
      op->ty = DYN_F32;               /* 2 ** i: weak ints become a weak float */
    } else {
      scope_err(s, op->span, E_TYPE_EXPECTED, arena_printf(s->a, "'%s'", op_name(op->op)), "floats",
          elem_name(op->ty));
      return false;
    }
  }
  if (!op->weak) {
    *l = coerce(s, a, op->ty);
    *r = coerce(s, b, op->ty);
  }
  return true;
}

/* ---- range inference (first pass over a definition) ---- */

static bool push_idx(S *s, const char *name, Span sp) {
  Sym *y = scope_find_sym(s, name);
  if (y) {
    scope_err(s, sp, E_INDEX_SHADOWS, name, y->kind == SYM_SIZE ? "size" : "tensor");
    return false;
  }
  if (scope_find_idx(s, name)) {
    scope_err(s, sp, E_DUP_INDEX, name);
    return false;
  }
  if (s->nidx == MAX_IDX) {
    scope_err(s, sp, E_TOO_DEEP);
    return false;
  }
  Idx *ix = &s->idx[s->nidx++];
  memset(ix, 0, sizeof *ix);
  ix->name = name;
  ix->span = sp;
  ix->lo = poly_const(s->pc, 0);
  return true;
}

static void set_ext(S *s, Idx *ix, const Poly *ext, Span at, const char *what) {
  if (ix->given) return;
  if (!ix->ext) {
    ix->ext = ext;
    ix->hi = ext;
    ix->ext_span = at;
    ix->ext_what = what;
  } else if (ix->ext != ext && ix->name[0] == '_' && ix->name[1] && strspn(ix->name + 1, "0123456789") == strlen(ix->name + 1)) {
    /* an index the REPL made up for a whole-tensor statement (z: f32[3] = x * 2): speak of
     * dimensions, not of '_0' */
    Diag *dg = scope_err(s, at, E_SIZE_MISMATCH,
                   arena_printf(s->a, "the shapes disagree: %s is %s but %s says %s", what, scope_pstr(s, ext), ix->ext_what, scope_pstr(s, ix->ext)));
    diag_note(dg, ix->ext_span, "%s", ix->ext_what);
  } else if (ix->ext != ext) {
    Diag *dg = scope_err(s, at, E_RANGE_CONFLICT, ix->name,
                   arena_printf(s->a, "%s (%s)", scope_pstr(s, ext), what),
                   arena_printf(s->a, "%s (%s)", scope_pstr(s, ix->ext), ix->ext_what),
                   where_str(s, ix->ext_span));
    diag_note(dg, ix->ext_span, "'%s' first ranges over %s here", ix->name, scope_pstr(s, ix->ext));
  }
}

static void infer(S *s, Expr *e) {
  if (!e) return;
  /* An undefined name is reported here, as chk would: otherwise the range it could not give
   * would be reported instead ("cannot infer the range of 'i'" for T[i] = Z[i]). */
  if (e->kind == EX_INDEX && e->base) {   /* softmax(X)[0, 1]: a top-level convenience */
    if (!s->err) scope_err(s, e->span, E_STMT_IN_FN, "indexing the result of a call");
    return;
  }
  if (e->kind == EX_NAME && e->res == RES_SIZE && e->size) return;   /* view_size */
  if (expr_is_slice(e)) {
    if (!s->err) scope_err(s, e->span, E_SLICE_PLACE, scope_estr(s, e), scope_estr(s, e));
    return;
  }
  if ((e->kind == EX_INDEX || e->kind == EX_NAME) && !scope_find_sym(s, e->name) &&
      !(e->kind == EX_NAME && scope_find_idx(s, e->name)) &&
      !(e->kind == EX_NAME && s->env->lookup_fn && s->env->lookup_fn(s->env->env, e->name))) {
    if (!s->err) scope_undefined(s, e->kind == EX_INDEX ? e->name_span : e->span, E_UNDEFINED, e->name);
    return;
  }
  if (e->kind == EX_INDEX) {
    Sym *y = scope_find_sym(s, e->name);
    if (y && y->kind == SYM_TENSOR) {
      for (int k = 0; k < e->nargs && k < y->type.rank; k++) {
        Expr *sub = e->args[k];
        if (sub->kind == EX_NAME) {
          Idx *ix = scope_find_idx(s, sub->name);
          if (ix) set_ext(s, ix, y->type.dims[k], sub->span,
                          arena_printf(s->a, "dimension %d of %s", k, e->name));
          if (ix && !ix->bare_of && ix->ext_span.src == sub->span.src && ix->ext_span.lo == sub->span.lo) {
            ix->bare_of = e->name;
            ix->bare_dim = k;
          }
        }
      }
    }
  }
  if (e->kind == EX_SCAN && e != s->scan_ok) {
    if (!s->err) scope_err(s, e->span, E_SCAN_PLACE);
    return;
  }
  if (e->kind == EX_REDUCE) {
    int base = s->nidx;
    for (int i = 0; i < e->nridx; i++)
      if (!push_idx(s, e->ridx[i], e->ridx_span[i])) {
        s->nidx = base;
        return;
      }
    for (int i = 0; i < e->nridx && e->rbound; i++) {
      if (!e->rbound[i]) continue;
      /* the bound is a size expression: sizes and constants, not indices */
      Idx *ix = &s->idx[base + i];
      const Expr *inx = scope_index_in(s, e->rbound[i]);
      if (inx) {
        scope_err(s, inx->span, E_BAD_DIM, arena_printf(s->a, "the index '%s'", inx->name));
        return;
      }
      int saved = s->nidx;
      s->nidx = 0;                   /* no index is visible to the bound */
      const Poly *b = scope_dim_poly(s, e->rbound[i], false);
      s->nidx = saved;
      if (!b) return;
      ix->ext = ix->hi = b;
      ix->ext_span = e->rbound[i]->span;
      ix->ext_what = arena_printf(s->a, "the bound of %s", ix->name);
      ix->given = true;
    }
    infer(s, e->args[0]);
    e->rext = arena_alloc(s->a, sizeof(Poly *) * (size_t)e->nridx);
    for (int i = 0; i < e->nridx; i++) {
      if (!s->idx[base + i].ext) {
        if (!s->err) scope_err(s, e->ridx_span[i], E_RANGE_UNUSED, e->ridx[i]);
      } else {
        e->rext[i] = s->idx[base + i].ext;
      }
    }
    s->nidx = base;
    return;
  }
  for (int i = 0; i < e->nargs; i++) infer(s, e->args[i]);
}

/* ---- sum[k] A[i, k] + b[i]: a term the sum repeats ---- */

/* The body of a reduction takes everything to its right (lang/reference.md, section 8), so
 * sum[k] A[i, k] + b[i] adds b[i] once per k, where a reader of NumPy code means it once.
 * Such a term, one that uses none of the sum's indices, is warned about at the term, with
 * the parenthesised form in a note.  Only sums: max and min give the same either way. */
typedef struct Term { Expr *e; bool neg; } Term;

static int sum_terms(Expr *e, bool neg, Term *t, int n) {
  if (e->kind == EX_BINARY && (e->op == OP_ADD || e->op == OP_SUB)) {
    n = sum_terms(e->args[0], neg, t, n);
    return sum_terms(e->args[1], e->op == OP_SUB ? !neg : neg, t, n);
  }
  if (n < 64) t[n] = (Term){e, neg};
  return n + 1;
}

static bool uses_name(const Expr *e, const char *name) {
  if (!e) return false;
  if (e->kind == EX_NAME && !strcmp(e->name, name)) return true;
  if (e->kind == EX_REDUCE && e->rbound)
    for (int i = 0; i < e->nridx; i++)
      if (uses_name(e->rbound[i], name)) return true;
  for (int i = 0; i < e->nargs; i++)
    if (uses_name(e->args[i], name)) return true;
  return uses_name(e->base, name);
}

static bool uses_any(const Expr *e, const Expr *red) {
  for (int i = 0; i < red->nridx; i++)
    if (uses_name(e, red->ridx[i])) return true;
  return false;
}

static Expr *binary(S *s, OpKind op, Expr *l, Expr *r) {
  Expr *x = arena_alloc(s->a, sizeof *x);
  x->kind = op == OP_NEG ? EX_UNARY : EX_BINARY;
  x->op = op;
  x->nargs = op == OP_NEG ? 1 : 2;
  x->args = arena_alloc(s->a, 2 * sizeof(Expr *));
  x->args[0] = l;
  x->args[1] = r;
  return x;
}

/* Called on the body as written, before it is checked (checking may wrap terms in casts);
 * the warnings go out only if the sum checks. */
typedef struct SumWarn { Span at[64]; const char *term[64]; int n; const char *fix; } SumWarn;

static void sum_warn_find(S *s, const Expr *red, SumWarn *w) {
  w->n = 0;
  if (red->red != RED_SUM) return;
  Term t[64];
  int n = sum_terms(red->args[0], false, t, 0);
  if (n < 2 || n > 64) return;
  Expr *in = NULL, *out = NULL;
  for (int i = 0; i < n; i++) {
    if (!uses_any(t[i].e, red)) continue;
    Expr *x = in || !t[i].neg ? t[i].e : binary(s, OP_NEG, t[i].e, NULL);
    in = in ? binary(s, t[i].neg ? OP_SUB : OP_ADD, in, x) : x;
  }
  if (!in) return;                        /* nothing uses the index: E_RANGE_UNUSED's case */
  Expr *r = arena_alloc(s->a, sizeof *r);
  *r = *red;
  r->args = arena_alloc(s->a, sizeof(Expr *));
  r->args[0] = in;
  out = r;
  for (int i = 0; i < n; i++) {
    if (uses_any(t[i].e, red)) continue;
    out = binary(s, t[i].neg ? OP_SUB : OP_ADD, out, t[i].e);
    w->at[w->n] = t[i].e->span;
    w->term[w->n++] = scope_estr(s, t[i].e);
  }
  w->fix = scope_estr(s, out);
}

static void sum_warn_report(S *s, const Expr *red, const SumWarn *w) {
  if (!w->n) return;
  Buf names = {0};
  const Poly *times = poly_const(s->pc, 1);
  for (int i = 0; i < red->nridx; i++) {
    buf_printf(&names, "%s'%s'", i == 0 ? "" : i == red->nridx - 1 ? " or " : ", ", red->ridx[i]);
    times = poly_mul(s->pc, times, red->rext[i]);
  }
  for (int i = 0; i < w->n; i++) {
    Diag *dg = scope_err(s, w->at[i], W_SUM_TERM, w->term[i], names.s, scope_pstr(s, times));
    diag_note(dg, (Span){0}, "the body of a sum extends to the end of the expression; to add %s once, end the sum first: %s",
              w->n == 1 ? w->term[i] : "such terms", w->fix);
  }
  buf_free(&names);
}

/* ---- checking (second pass) ---- */

static Expr *chk(S *s, Expr *e);

static Expr *chk_index(S *s, Expr *e) {
  Sym *y = scope_find_sym(s, e->name);
  if (!y) {
    scope_undefined(s, e->name_span, E_UNDEFINED, e->name);
    return NULL;
  }
  if (y->kind != SYM_TENSOR) {
    scope_err(s, e->name_span, E_NOT_TENSOR, e->name, "a size");
    return NULL;
  }
  if (e->nargs != y->type.rank) {
    int r = y->type.rank;
    scope_err(s, e->span, E_RANK, e->name, r, r == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "" : "s");
    return NULL;
  }
  for (int k = 0; k < e->nargs; k++) {
    Expr *sub = chk(s, e->args[k]);
    if (!sub) return NULL;
    if (!elem_is_int(sub->ty) || (sub->weak && elem_is_float(sub->ty))) {
      scope_err(s, sub->span, E_SUBSCRIPT_TYPE, tyname(sub));
      return NULL;
    }
    e->args[k] = coerce(s, sub, DYN_I64);
  }
  e->res = RES_TENSOR;
  e->ty = y->type.elem;
  e->weak = false;
  if (!e->view) prove_access(s, e, &y->type);
  return e;
}

static Expr *chk(S *s, Expr *e) {
  switch (e->kind) {
  case EX_NUM:
    e->weak = true;
    e->ty = e->is_int ? DYN_I64 : DYN_F32;
    return e;
  case EX_BOOL:
    e->ty = DYN_BOOL;
    return e;
  case EX_STR:
    scope_err(s, e->span, E_TYPE_EXPECTED, "an expression", "a number or a tensor element", "a string");
    return NULL;
  case EX_NAME: {
    if (e->res == RES_SIZE && e->size) {     /* a size a view wrote (view_size) */
      e->ty = DYN_I64;
      e->weak = true;
      return e;
    }
    Idx *ix = scope_find_idx(s, e->name);
    if (ix) {
      e->res = RES_INDEX;
      e->ty = DYN_I64;
      e->weak = true;
      return e;
    }
    Sym *y = scope_find_sym(s, e->name);
    if (!y) {
      Func *f = s->env->lookup_fn ? s->env->lookup_fn(s->env->env, e->name) : NULL;
      if (f) scope_err(s, e->span, E_NOT_TENSOR, e->name, "a function");
      else scope_undefined(s, e->span, E_UNDEFINED, e->name);
      return NULL;
    }
    if (y->kind == SYM_SIZE) {
      e->res = RES_SIZE;
      e->size = poly_var(s->pc, e->name);
      e->ty = DYN_I64;
      e->weak = true;
      return e;
    }
    if (y->type.rank != 0) {
      scope_err(s, e->span, E_RANK, e->name, y->type.rank, y->type.rank == 1 ? "" : "s", 0, "s");
      return NULL;
    }
    /* a scalar: an access with no subscripts */
    e->kind = EX_INDEX;
    e->name_span = e->span;
    return chk_index(s, e);
  }
  case EX_INDEX:
    return chk_index(s, e);
  case EX_SLICE:
    scope_err(s, e->span, E_SLICE_PLACE, scope_estr(s, e), scope_estr(s, e));
    return NULL;
  case EX_CAST: {
    Expr *a = chk(s, e->args[0]);
    if (!a) return NULL;
    if (a->weak && (elem_is_int(a->ty) || elem_is_float(e->elem))) a = coerce(s, a, e->elem);
    e->args[0] = finalize(s, a);
    e->ty = e->elem;
    e->weak = false;
    return e;
  }
  case EX_UNARY: {
    Expr *a = chk(s, e->args[0]);
    if (!a) return NULL;
    e->args[0] = a;
    if (e->op == OP_NOT) {
      if (a->ty != DYN_BOOL) {
        scope_err(s, a->span, E_TYPE_EXPECTED, "'not'", "bool", tyname(a));
        return NULL;
      }
      e->ty = DYN_BOOL;
      return e;
    }
    if (a->ty == DYN_BOOL) {
      scope_err(s, a->span, E_TYPE_EXPECTED, "'-'", "a number", "bool");
      return NULL;
    }
    e->ty = a->ty;
    e->weak = a->weak;
    return e;
  }
  case EX_BINARY: {
    Expr *l = chk(s, e->args[0]), *r = l ? chk(s, e->args[1]) : NULL;
    if (!r) return NULL;
    e->args[0] = l;
    e->args[1] = r;
    OpClass cls = op_class(e->op);
    if (cls == OPK_LOGIC) {
      for (int i = 0; i < 2; i++)
        if (e->args[i]->ty != DYN_BOOL) {
          scope_err(s, e->args[i]->span, E_TYPE_EXPECTED, arena_printf(s->a, "'%s'", op_name(e->op)),
              "bool operands", tyname(e->args[i]));
          return NULL;
        }
      e->ty = DYN_BOOL;
      return e;
    }
    if (cls == OPK_CMP) {
      if (l->ty == DYN_BOOL && r->ty == DYN_BOOL && (e->op == OP_EQ || e->op == OP_NE)) {
        e->opty = DYN_BOOL;
        e->ty = DYN_BOOL;
        return e;
      }
      if (!unify(s, e, &e->args[0], &e->args[1], false)) return NULL;
      if (e->weak) {
        DynElem t = default_of(e);
        e->args[0] = coerce(s, e->args[0], t);
        e->args[1] = coerce(s, e->args[1], t);
        e->weak = false;
        e->opty = t;
      } else {
        e->opty = e->ty;
      }
      e->ty = DYN_BOOL;
      return e;
    }
    if (!unify(s, e, &e->args[0], &e->args[1], cls == OPK_FLOAT)) return NULL;
    return e;
  }
  case EX_CALL: {
    OpKind op;
    if (!op_from_name(e->name, &op)) {
      Func *f = s->env->lookup_fn ? s->env->lookup_fn(s->env->env, e->name) : NULL;
      if (f) scope_err(s, e->span, E_STMT_IN_FN, arena_printf(s->a, "a call of '%s' inside an expression (bind it first: T = %s(...))", e->name, e->name));
      else scope_undefined(s, e->name_span, E_UNDEFINED_FN, e->name);
      return NULL;
    }
    if (e->nargs != op_arity(op)) {
      int n = op_arity(op);
      scope_err(s, e->span, E_ARG_COUNT, e->name, n, n == 1 ? "" : "s", e->nargs);
      return NULL;
    }
    e->is_math = true;
    e->op = op;
    for (int i = 0; i < e->nargs; i++) {
      e->args[i] = chk(s, e->args[i]);
      if (!e->args[i]) return NULL;
    }
    OpClass cls = op_class(op);
    if (e->nargs == 2) return unify(s, e, &e->args[0], &e->args[1], cls == OPK_FLOAT) ? e : NULL;
    Expr *a = e->args[0];
    if (a->ty == DYN_BOOL) {
      scope_err(s, a->span, E_TYPE_EXPECTED, arena_printf(s->a, "'%s'", e->name), "a number", "bool");
      return NULL;
    }
    if (cls == OPK_FLOAT && !elem_is_float(a->ty)) {
      if (!a->weak) {
        scope_err(s, a->span, E_TYPE_EXPECTED, arena_printf(s->a, "'%s'", e->name),
            arena_printf(s->a, "a float (convert with f32(...) or f64(...))"), elem_name(a->ty));
        return NULL;
      }
      e->ty = DYN_F32;
      e->weak = true;
      return e;
    }
    e->ty = a->ty;
    e->weak = a->weak;
    return e;
  }
  case EX_WHERE: {
    Expr *c = chk(s, e->args[0]);
    if (!c) return NULL;
    if (c->ty != DYN_BOOL) {
      scope_err(s, c->span, E_TYPE_EXPECTED, "the condition of where", "bool", tyname(c));
      return NULL;
    }
    e->args[0] = c;
    /* the saved ranges live on the heap: chk recurses as deep as the expression is tall */
    Idx *saved = xmalloc(sizeof(Idx) * (size_t)(s->nidx + 1));
    memcpy(saved, s->idx, sizeof(Idx) * (size_t)s->nidx);
    prove_refine(s, c, true);
    Expr *a = chk(s, e->args[1]);
    memcpy(s->idx, saved, sizeof(Idx) * (size_t)s->nidx);
    Expr *b = NULL;
    if (a) {
      prove_refine(s, c, false);
      b = chk(s, e->args[2]);
      memcpy(s->idx, saved, sizeof(Idx) * (size_t)s->nidx);
    }
    free(saved);
    if (!a || !b) return NULL;
    e->args[1] = a;
    e->args[2] = b;
    if (a->ty == DYN_BOOL && b->ty == DYN_BOOL) {
      e->ty = DYN_BOOL;
      return e;
    }
    Expr fake = *e;
    fake.op = OP_ADD;
    if (!unify(s, &fake, &e->args[1], &e->args[2], false)) return NULL;
    e->ty = fake.ty;
    e->weak = fake.weak;
    return e;
  }
  case EX_REDUCE: {
    int base = s->nidx;
    for (int i = 0; i < e->nridx; i++) {
      push_idx(s, e->ridx[i], e->ridx_span[i]);
      s->idx[base + i].ext = e->rext ? e->rext[i] : NULL;
      s->idx[base + i].hi = s->idx[base + i].ext;
    }
    SumWarn w;
    sum_warn_find(s, e, &w);
    Expr *b = chk(s, e->args[0]);
    s->nidx = base;
    if (!b) return NULL;
    if (b->ty == DYN_BOOL) {
      scope_err(s, e->span, E_REDUCE_BOOL, red_name(e->red));
      return NULL;
    }
    if (e->rext) sum_warn_report(s, e, &w);
    e->args[0] = b;
    e->ty = b->ty;
    e->weak = b->weak;
    return e;
  }
  case EX_SCAN: {
    if (e != s->scan_ok) {          /* only the whole right-hand side of a definition */
      scope_err(s, e->span, E_SCAN_PLACE);
      return NULL;
    }
    Expr *b = chk(s, e->args[0]);
    if (!b) return NULL;
    if (b->ty == DYN_BOOL) {
      scope_err(s, e->span, E_REDUCE_BOOL, "scan");
      return NULL;
    }
    e->args[0] = b;
    e->ty = b->ty;
    e->weak = b->weak;
    return e;
  }
  case EX_LIST:
    scope_err(s, e->span, E_TYPE_EXPECTED, "an element expression", "a number or a tensor element", "a tensor literal");
    return NULL;
  case EX_TYPE:
    scope_err(s, e->span, E_TYPE_EXPECTED, "an element expression", "a number or a tensor element", "a type");
    return NULL;
  }
  return NULL;
}

/* ---- statements ---- */

static bool defined(S *s, const char *name, Span sp) {
  Sym *y = scope_find_sym(s, name);
  if (y) {
    Diag *dg = scope_err(s, sp, E_REDEFINED, name);
    diag_note(dg, y->span, "'%s' was defined here", name);
    return true;
  }
  return false;
}

/* T = A * 2 + B over tensors of one shape: rewrite to T[_0, _1] = A[_0, _1] * 2 + B[_0, _1]. */
static bool bare_tensors(S *s, Expr *e, Type **shape, Expr **first) {
  if (e->kind == EX_REDUCE) return true;
  if (e->kind == EX_NAME) {
    Sym *y = scope_find_sym(s, e->name);
    if (y && y->kind == SYM_TENSOR && y->type.rank > 0 && !scope_find_idx(s, e->name)) {
      if (!*shape) {
        *shape = &y->type;
        *first = e;
      } else if ((*shape)->rank != y->type.rank || memcmp((*shape)->dims, y->type.dims, sizeof(Poly *) * (size_t)y->type.rank)) {
        scope_err(s, e->span, E_SHAPE_MISMATCH, (*first)->name, scope_tstr(s, *shape), e->name, scope_tstr(s, &y->type));
        return false;
      }
    }
    return true;
  }
  if (e->kind == EX_INDEX) return true;       /* subscripted: not elementwise */
  for (int i = 0; i < e->nargs; i++)
    if (!bare_tensors(s, e->args[i], shape, first)) return false;
  return true;
}

static void add_subscripts(S *s, Expr *e, int rank, const char **names) {
  if (e->kind == EX_REDUCE || e->kind == EX_INDEX) return;
  if (e->kind == EX_NAME) {
    Sym *y = scope_find_sym(s, e->name);
    if (y && y->kind == SYM_TENSOR && y->type.rank == rank && rank > 0) {
      e->kind = EX_INDEX;
      e->name_span = e->span;
      e->args = arena_alloc(s->a, sizeof(Expr *) * (size_t)rank);
      e->nargs = rank;
      for (int k = 0; k < rank; k++) {
        Expr *x = arena_alloc(s->a, sizeof *x);
        x->kind = EX_NAME;
        x->name = names[k];
        x->span = e->span;
        x->name_span = e->span;
        e->args[k] = x;
      }
    }
    return;
  }
  for (int i = 0; i < e->nargs; i++) add_subscripts(s, e->args[i], rank, names);
}

static bool elementwise_rewrite(S *s, Stmt *st) {
  Type *shape = NULL;
  Expr *first = NULL;
  if (!bare_tensors(s, st->expr, &shape, &first)) return false;
  if (!shape) return true;
  int r = shape->rank;
  st->idx = arena_alloc(s->a, sizeof(char *) * (size_t)r);
  st->idx_span = arena_alloc(s->a, sizeof(Span) * (size_t)r);
  for (int k = 0; k < r; k++) {
    st->idx[k] = arena_printf(s->a, "_%d", k);
    st->idx_span[k] = st->name_span;
  }
  st->nidx = r;
  add_subscripts(s, st->expr, r, st->idx);
  return true;
}

/* Y[i, j] = scan[j] +(...): the scan runs along one of the left indices, and is the whole
 * right-hand side (infer() reports one anywhere else).  False after an error. */
static bool scan_def(S *s, Stmt *st) {
  Expr *e = st->expr;
  s->scan_ok = NULL;
  if (e->kind != EX_SCAN) return true;
  if (st->nidx == 0) {
    scope_err(s, e->span, E_SCAN_PLACE);
    return false;
  }
  for (int i = 0; i < st->nidx; i++)
    if (!strcmp(st->idx[i], e->ridx[0])) {
      s->scan_ok = e;
      return true;
    }
  Buf b = {0};
  for (int i = 0; i < st->nidx; i++) buf_printf(&b, "%s%s", i ? ", " : "", st->idx[i]);
  scope_err(s, e->ridx_span[0], E_SCAN_INDEX, e->ridx[0], st->name, arena_printf(s->a, "%s[%s]", st->name, b.s));
  buf_free(&b);
  return false;
}

static void check_def(S *s, Stmt *st, const Type *ret_hint) {
  if (defined(s, st->name, st->name_span)) return;
  if (!scan_def(s, st)) return;
  if (st->nidx == 0 && sview_form(s, st->expr) && !sview_rewrite(s, st)) return;
  if (st->nidx == 0 && !elementwise_rewrite(s, st)) return;
  int base = s->nidx;
  for (int i = 0; i < st->nidx; i++)
    if (!push_idx(s, st->idx[i], st->idx_span[i])) {
      s->nidx = base;
      return;
    }
  for (int i = 0; st->shape && i < st->nidx; i++) {   /* a view: its shape gives the ranges */
    Idx *ix = &s->idx[base + i];
    ix->ext = ix->hi = st->shape->dims[i];
    ix->ext_span = st->span;
    ix->ext_what = "the view";
    ix->given = true;
  }
  Type annot;
  bool has_annot = false;
  if (st->annot) {
    if (!type_from_expr(s, st->annot, &annot)) goto out;
    if (annot.rank != st->nidx) {
      scope_err(s, st->annot->span, E_ANNOT_RANK, st->name, st->nidx, st->nidx == 1 ? "ex" : "ices",
          annot.rank, annot.rank == 1 ? "" : "s");
      goto out;
    }
    has_annot = true;
    for (int i = 0; i < st->nidx; i++)
      set_ext(s, &s->idx[base + i], annot.dims[i], st->annot->dims[i]->span,
              arena_printf(s->a, "the annotation of %s", st->name));
  }
  infer(s, st->expr);
  if (s->err) goto out;
  for (int i = 0; i < st->nidx; i++) {
    Idx *ix = &s->idx[base + i];
    if (!ix->ext && ret_hint && ret_hint->rank == st->nidx) {
      ix->ext = ix->hi = ret_hint->dims[i];
    }
    if (!ix->ext) {
      scope_err(s, ix->span, E_RANGE_UNKNOWN, ix->name, st->name);
      goto out;
    }
  }
  Expr *e = chk(s, st->expr);
  if (!e) goto out;
  if (has_annot) {
    if (!e->weak && e->ty != annot.elem) {
      scope_err(s, e->span, E_TYPE_MIX, elem_name(annot.elem), elem_name(e->ty), elem_name(annot.elem));
      goto out;
    }
    if (e->weak && elem_is_float(e->ty) && !elem_is_float(annot.elem)) {
      scope_err(s, e->span, E_TYPE_MIX, elem_name(annot.elem), "a float literal", "f32");
      goto out;
    }
    e = coerce(s, e, annot.elem);
  } else if (e->weak && ret_hint && elem_is_float(ret_hint->elem) >= elem_is_float(e->ty)) {
    e = coerce(s, e, ret_hint->elem);
  } else {
    e = finalize(s, e);
  }
  st->expr = e;
  Sym y = {.name = st->name, .kind = SYM_TENSOR, .span = st->name_span};
  y.type.elem = e->ty;
  y.type.rank = st->nidx;
  for (int i = 0; i < st->nidx; i++) y.type.dims[i] = s->idx[base + i].ext;
  vec_push(s->syms, y);
  Type *tp = arena_alloc(s->a, sizeof *tp);
  *tp = y.type;
  st->type = tp;
out:
  s->nidx = base;
  s->scan_ok = NULL;
}

/* Bind a callee's sizes from argument types; used for calls inside functions.  On success
 * fills sub[] with the callee's size variables as caller polynomials. */
typedef struct { const char **names; const Poly **vals; int n; } Subst;
static const Poly *subst_lookup(void *env, const char *name) {
  Subst *sb = env;
  for (int i = 0; i < sb->n; i++)
    if (!strcmp(sb->names[i], name)) return sb->vals[i];
  return NULL;
}

static void check_call(S *s, Stmt *st) {
  Expr *call = st->expr;
  Func *g = s->env->lookup_fn(s->env->env, call->name);
  if (!strcmp(call->name, s->fname)) {
    scope_err(s, call->name_span, E_RECURSION, call->name);
    return;
  }
  if (call->nargs != g->nparams) {
    scope_err(s, call->span, E_ARG_COUNT, g->name, g->nparams, g->nparams == 1 ? "" : "s", call->nargs);
    return;
  }
  Subst sb = {arena_alloc(s->a, sizeof(char *) * (size_t)(g->nsizes + 1)),
              arena_alloc(s->a, sizeof(Poly *) * (size_t)(g->nsizes + 1)), 0};
  Type *argt = arena_alloc(s->a, sizeof(Type) * (size_t)(g->nparams + 1));
  for (int i = 0; i < g->nparams; i++) {
    Expr *a = call->args[i];
    if (g->params[i].is_size) {
      const Poly *p = scope_dim_poly(s, a, false);
      if (!p) return;
      argt[i].rank = -1;
      argt[i].dims[0] = p;
      continue;
    }
    Sym *y = a->kind == EX_NAME ? scope_find_sym(s, a->name) : NULL;
    if (!y || y->kind != SYM_TENSOR) {
      if (a->kind == EX_NAME && !y) scope_undefined(s, a->span, E_UNDEFINED, a->name);
      else scope_err(s, a->span, E_ARG_KIND, i + 1, g->name, "the name of a tensor", arena_printf(s->a, "'%s'", scope_estr(s, a)));
      return;
    }
    argt[i] = y->type;
  }
  for (int v = 0; v < g->nsizes; v++) {
    SizeVar *sv = &g->sizes[v];
    sb.names[sb.n] = sv->name;
    sb.vals[sb.n++] = sv->dim < 0 ? argt[sv->param].dims[0] : NULL;
  }
  for (int i = 0; i < g->nparams; i++) {
    FnParam *p = &g->params[i];
    if (p->is_size) continue;
    Expr *a = call->args[i];
    if (p->type.rank != argt[i].rank || p->type.elem != argt[i].elem) {
      Buf pb = {0};
      type_str(&p->type, &pb);
      scope_err(s, a->span, E_ARG_TYPE, g->name, p->name, pb.s, scope_tstr(s, &argt[i]));
      buf_free(&pb);
      return;
    }
    for (int k = 0; k < p->type.rank; k++) {
      const char *v = poly_as_var(p->type.dims[k]);
      for (int j = 0; v && j < sb.n; j++)
        if (!strcmp(sb.names[j], v) && !sb.vals[j]) sb.vals[j] = argt[i].dims[k];
    }
  }
  for (int i = 0; i < g->nparams; i++) {
    FnParam *p = &g->params[i];
    if (p->is_size) continue;
    for (int k = 0; k < p->type.rank; k++) {
      const Poly *want = poly_subst(s->pc, p->type.dims[k], subst_lookup, &sb);
      if (want != argt[i].dims[k]) {
        const char *v = poly_as_var(p->type.dims[k]);
        int bound = -1;
        for (int j = 0; v && j < g->nsizes; j++)
          if (!strcmp(g->sizes[j].name, v)) bound = j;
        Diag *dg;
        if (bound >= 0 && g->sizes[bound].dim >= 0) {
          SizeVar *sv = &g->sizes[bound];
          dg = scope_err(s, call->span, E_DIM_MISMATCH, g->name,
                   arena_printf(s->a, "%s is %s from %s (%s) but %s from %s (%s)", v, scope_pstr(s, want),
                                g->params[sv->param].name, scope_tstr(s, &argt[sv->param]),
                                scope_pstr(s, argt[i].dims[k]), p->name, scope_tstr(s, &argt[i])));
          diag_note(dg, sv->span, "%s is bound by parameter %s of %s", v, g->params[sv->param].name, g->name);
        } else {
          Buf pd = {0};
          poly_str(p->type.dims[k], &pd);
          dg = scope_err(s, call->args[i]->span, E_DIM_MISMATCH, g->name,
                   arena_printf(s->a, "dimension %d of %s must be %s, here %s, but %s is %s",
                                k, p->name, pd.s, scope_pstr(s, want), scope_estr(s, call->args[i]), scope_tstr(s, &argt[i])));
          diag_note(dg, p->dim_span[k], "%s is declared %s in %s", p->name, pd.s, g->name);
          buf_free(&pd);
        }
        return;
      }
    }
  }
  for (int f = 0; f < g->nfacts; f++) {
    Fact *ft = &g->facts[f];
    const Poly *l = poly_subst(s->pc, ft->lhs, subst_lookup, &sb);
    const Poly *r = poly_subst(s->pc, ft->rhs, subst_lookup, &sb);
    bool ok = false;
    const Poly *d = poly_sub(s->pc, l, r);
    int64_t dv;
    if (poly_is_const(d, &dv)) ok = fact_holds(ft, dv, 0);
    else if (ft->cmp == CMP_GE) ok = prove_nonneg(s, d);
    else if (ft->cmp == CMP_GT) ok = prove_nonneg(s, poly_sub(s->pc, d, poly_const(s->pc, 1)));
    else if (ft->cmp == CMP_LE) ok = prove_nonneg(s, poly_neg(s->pc, d));
    else if (ft->cmp == CMP_LT) ok = prove_nonneg(s, poly_sub(s->pc, poly_neg(s->pc, d), poly_const(s->pc, 1)));
    for (int j = 0; !ok && j < s->nufacts; j++)
      ok = s->ufacts[j].lhs == l && s->ufacts[j].rhs == r && s->ufacts[j].cmp == ft->cmp;
    if (!ok && ft->what) {         /* a view's condition: checked at the caller's calls too */
      Fact vf = {l, ft->cmp, r, ft->span, arena_printf(s->a, "%s (in %s)", ft->what, g->name)};
      vec_push(s->vfacts, vf);
      continue;
    }
    if (!ok) {
      Diag *dg = scope_err(s, call->span, E_FACT_FAILS, g->name,
                     arena_printf(s->a, "%s %s %s", scope_pstr(s, l), cmp_name(ft->cmp), scope_pstr(s, r)),
                     "it cannot be proved here; state it in this function's where clause");
      diag_note(dg, ft->span, "the fact is required by %s", g->name);
      return;
    }
  }
  int nn = st->nnames;
  if (nn != g->nrets) {
    scope_err(s, st->span, E_TUPLE_COUNT, g->name, g->nrets, g->nrets == 1 ? "" : "s", nn, nn == 1 ? " is" : "s are");
    return;
  }
  for (int i = 0; i < nn; i++) {
    if (defined(s, st->names[i], st->name_spans[i])) return;
    Sym y = {.name = st->names[i], .kind = SYM_TENSOR, .span = st->name_spans[i]};
    y.type = g->rets[i];
    for (int k = 0; k < y.type.rank; k++) y.type.dims[k] = poly_subst(s->pc, y.type.dims[k], subst_lookup, &sb);
    vec_push(s->syms, y);
  }
}

static void check_fact_expr(S *s, Expr *e, FactVec *out) {
  if (e->kind != EX_BINARY || op_class(e->op) != OPK_CMP) {
    if (e->kind == EX_BINARY && e->op == OP_AND) {
      check_fact_expr(s, e->args[0], out);
      check_fact_expr(s, e->args[1], out);
      return;
    }
    scope_err(s, e->span, E_BAD_FACT);
    return;
  }
  const Poly *l = scope_dim_poly(s, e->args[0], false);
  const Poly *r = l ? scope_dim_poly(s, e->args[1], false) : NULL;
  if (!r) return;
  CmpOp c = e->op == OP_EQ ? CMP_EQ : e->op == OP_NE ? CMP_NE : e->op == OP_LT ? CMP_LT :
            e->op == OP_LE ? CMP_LE : e->op == OP_GT ? CMP_GT : CMP_GE;
  Fact f = {l, c, r, e->span, NULL};
  vec_push(*out, f);
  prove_assume(s, l, c, r);
}

Func *sema_function(const SemaEnv *env, FnDecl *decl, Arena *arena, Diags *d) {
  S s = {.env = env, .pc = env->pc, .a = arena, .d = d, .fname = decl->name};
  Func *fn = arena_alloc(arena, sizeof *fn);
  fn->name = decl->name;
  fn->span = decl->name_span;
  fn->decl = decl;
  fn->nparams = decl->nparams;
  fn->params = arena_alloc(arena, sizeof(FnParam) * (size_t)(decl->nparams + 1));

  /* 1. parameters: lone size variables bind (first occurrence), then all dims convert */
  for (int i = 0; i < decl->nparams; i++) {
    Param *p = &decl->params[i];
    for (int j = 0; j < i; j++)
      if (!strcmp(decl->params[j].name, p->name)) scope_err(&s, p->span, E_DUP_PARAM, p->name);
    fn->params[i].name = p->name;
    fn->params[i].span = p->span;
    if (p->type->kind == TY_SIZE) {
      fn->params[i].is_size = true;
      if (scope_find_sym(&s, p->name)) {
        scope_err(&s, p->span, E_REDEFINED, p->name);
        continue;
      }
      Sym y = {.name = p->name, .kind = SYM_SIZE, .span = p->span};
      vec_push(s.syms, y);
      SizeVar sv = {p->name, i, -1, p->span};
      vec_push(s.sizes, sv);
    }
  }
  for (int i = 0; i < decl->nparams; i++) {
    TypeExpr *te = decl->params[i].type;
    if (te->kind != TY_TENSOR) continue;
    for (int k = 0; k < te->ndims; k++) {
      Expr *de = te->dims[k];
      if (de->kind != EX_NAME || scope_find_sym(&s, de->name)) continue;
      bool is_param = false;
      for (int j = 0; j < decl->nparams; j++)
        if (!strcmp(decl->params[j].name, de->name)) is_param = true;
      if (is_param) {
        scope_err(&s, de->span, E_BAD_DIM, arena_printf(arena, "the parameter '%s'", de->name));
        continue;
      }
      Sym y = {.name = de->name, .kind = SYM_SIZE, .span = de->span};
      vec_push(s.syms, y);
      SizeVar sv = {de->name, i, k, de->span};
      vec_push(s.sizes, sv);
    }
  }
  FactVec facts = {0};
  for (int i = 0; i < decl->nparams && !s.err; i++) {
    Param *p = &decl->params[i];
    if (p->type->kind == TY_SIZE) continue;
    if (!type_from_expr(&s, p->type, &fn->params[i].type)) continue;
    for (int k = 0; k < p->type->ndims; k++) {
      fn->params[i].dim_span[k] = p->type->dims[k]->span;
      const Poly *dp = fn->params[i].type.dims[k];
      if (!poly_as_var(dp) && !poly_is_const(dp, NULL)) vec_push(s.facts, dp);   /* a shape is >= 0 */
    }
    if (scope_find_sym(&s, p->name)) {
      scope_err(&s, p->span, E_REDEFINED, p->name);
      continue;
    }
    Sym y = {.name = p->name, .kind = SYM_TENSOR, .type = fn->params[i].type, .span = p->span};
    vec_push(s.syms, y);
  }
  /* 2. facts */
  for (int i = 0; i < decl->nfacts && !s.err; i++) check_fact_expr(&s, decl->facts[i], &facts);
  s.ufacts = facts.a;
  s.nufacts = facts.n;
  /* 3. return type */
  Type *rets = NULL;
  int nrets = -1;
  if (decl->ret && !s.err) {
    TypeExpr *rt = decl->ret;
    nrets = rt->kind == TY_TUPLE ? rt->nparts : 1;
    rets = arena_alloc(arena, sizeof(Type) * (size_t)(nrets + 1));
    for (int i = 0; i < nrets; i++)
      type_from_expr(&s, rt->kind == TY_TUPLE ? rt->parts[i] : rt, &rets[i]);
  }
  /* 4. the body */
  Stmt *ret = NULL;
  for (int i = 0; i < decl->nbody && !s.err; i++) {
    Stmt *st = decl->body[i];
    if (ret) {
      scope_err(&s, ret->span, E_RETURN_NOT_LAST);
      break;
    }
    const Type *hint = NULL;
    if (st->kind == ST_DEF || st->kind == ST_ASSIGN) {
      /* the returned tensor may take its ranges from the declared return type */
      Stmt *last = decl->body[decl->nbody - 1];
      if (rets && last->kind == ST_RETURN)
        for (int j = 0; j < last->nnames && j < nrets; j++)
          if (!strcmp(last->names[j], st->kind == ST_DEF ? st->name : st->names[0])) hint = &rets[j];
    }
    switch (st->kind) {
    case ST_DEF:
      check_def(&s, st, hint);
      break;
    case ST_ASSIGN: {
      Expr *e = st->expr;
      Func *g = e->kind == EX_CALL && env->lookup_fn ? env->lookup_fn(env->env, e->name) : NULL;
      OpKind op;
      if (e->kind == EX_CALL && !strcmp(e->name, decl->name)) {
        scope_err(&s, e->name_span, E_RECURSION, e->name);
      } else if (g && !op_from_name(e->name, &op)) {
        check_call(&s, st);
      } else if (st->tuple || st->nnames != 1) {
        scope_err(&s, st->span, E_BAD_TARGET);
      } else {
        st->kind = ST_DEF;         /* T = EXPR: a scalar or elementwise definition */
        st->name = st->names[0];
        st->name_span = st->name_spans[0];
        check_def(&s, st, hint);
      }
      break;
    }
    case ST_RETURN:
      ret = st;
      break;
    case ST_FN:
      scope_err(&s, st->span, E_NESTED_FN);
      break;
    case ST_IMPORT:
      scope_err(&s, st->span, E_STMT_IN_FN, "import");
      break;
    case ST_COMMAND:
      scope_err(&s, st->span, E_STMT_IN_FN, "a command");
      break;
    case ST_EXPR:
      scope_err(&s, st->span, E_STMT_IN_FN, "an expression statement (define a tensor: T[i] = ...)");
      break;
    }
  }
  if (!s.err && !ret) scope_err(&s, decl->name_span, E_NO_RETURN, decl->name);
  if (!s.err) {
    if (nrets >= 0 && ret->nnames != nrets)
      scope_err(&s, ret->span, E_RETURN_COUNT, nrets, nrets == 1 ? "" : "s", ret->nnames);
    if (nrets < 0) {
      nrets = ret->nnames;
      rets = arena_alloc(arena, sizeof(Type) * (size_t)(nrets + 1));
    }
    for (int i = 0; i < ret->nnames && !s.err; i++) {
      Sym *y = scope_find_sym(&s, ret->names[i]);
      if (!y || y->kind != SYM_TENSOR) {
        if (y) scope_err(&s, ret->name_spans[i], E_NOT_TENSOR, ret->names[i], "a size");
        else scope_undefined(&s, ret->name_spans[i], E_UNDEFINED, ret->names[i]);
        break;
      }
      if (decl->ret) {
        if (!type_equal(&y->type, &rets[i])) {
          Diag *dg = scope_err(&s, ret->name_spans[i], E_RETURN_SHAPE, ret->names[i], scope_tstr(&s, &y->type), scope_tstr(&s, &rets[i]));
          diag_note(dg, decl->ret->span, "the return type is declared here");
        }
      } else {
        rets[i] = y->type;
      }
    }
  }
  /* The definitions the function becomes with every call inlined: its own, and each callee's
   * per call.  Two calls a level double it, so a chain of such functions grows as 2^depth;
   * beyond FN_MAX_EXPANDED the compile would take minutes and gigabytes, so it is refused. */
  int64_t expanded = 0;
  const Stmt *biggest = NULL;
  int64_t most = 0;
  for (int i = 0; i < decl->nbody && !s.err; i++) {
    const Stmt *st = decl->body[i];
    int64_t add = st->kind == ST_DEF ? 1 : 0;
    Func *g = st->kind == ST_ASSIGN && st->expr->kind == EX_CALL && env->lookup_fn ? env->lookup_fn(env->env, st->expr->name) : NULL;
    if (g) add = g->expanded;
    if (add > most) most = add, biggest = st;
    expanded = expanded + add > FN_MAX_EXPANDED ? FN_MAX_EXPANDED + 1 : expanded + add;
  }
  fn->expanded = expanded;
  if (!s.err && expanded > FN_MAX_EXPANDED) {
    Diag *dg = scope_err(&s, decl->name_span, E_TOO_LARGE, decl->name, FN_MAX_EXPANDED);
    if (biggest && biggest->kind == ST_ASSIGN)
      diag_note(dg, biggest->expr->span, "each call of %s brings %lld definitions", biggest->expr->name, (long long)most);
  }
  if (s.err) {
    vec_free(s.syms);
    vec_free(s.sizes);
    vec_free(s.facts);
    vec_free(s.vfacts);
    vec_free(facts);
    return NULL;
  }
  for (int i = 0; i < s.vfacts.n; i++) vec_push(facts, s.vfacts.a[i]);
  fn->rets = rets;
  fn->nrets = nrets;
  fn->facts = arena_alloc(arena, sizeof(Fact) * (size_t)(facts.n + 1));
  if (facts.n) memcpy(fn->facts, facts.a, sizeof(Fact) * (size_t)facts.n);
  fn->nfacts = facts.n;
  fn->sizes = arena_alloc(arena, sizeof(SizeVar) * (size_t)(s.sizes.n + 1));
  if (s.sizes.n) memcpy(fn->sizes, s.sizes.a, sizeof(SizeVar) * (size_t)s.sizes.n);
  fn->nsizes = s.sizes.n;
  /* the polynomials' own copy of each name: binding a call then matches by pointer */
  for (int v = 0; v < fn->nsizes; v++) fn->sizes[v].name = poly_as_var(poly_var(s.pc, fn->sizes[v].name));
  fn->arena = arena;
  vec_free(s.syms);
  vec_free(s.sizes);
  vec_free(s.facts);
  vec_free(s.vfacts);
  vec_free(facts);
  return fn;
}
