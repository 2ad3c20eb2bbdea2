/* sema_view.c -- views inside functions: a slice, reshape, concat or stack assigned to a name
 * is rewritten by the type checker (sema.c, before the definition is checked) into index
 * notation over new indices _0, _1 ..., and what the view needs of the sizes is proved
 * (sema_prove.c), reported, or left as a fact checked at every call.  Top-level views of
 * values are toplevel.c's. */
#include "config.h"
#include "sema_int.h"

#include <string.h>

/* ---- views: slices, reshape, concat and stack inside functions ----
 *
 * `T = X[a:b:c, i, :]`, `T = reshape(X, [B, H, D])`, `T = concat(A, B, 1)` and
 * `T = stack(A, B, 0)` become index-notation definitions whose subscripts are affine in new
 * indices (`T[_0, _1] = X[a + _0*c, i, _1]`), with the view's shape as the indices' ranges.
 * Fusion inlines such a definition into its readers like any elementwise one, so a slice read
 * by an index expression is an offset and a stride of that read, one loop nest on every back
 * end.  What the view needs of its sizes (0 <= a <= b <= dim, equal element counts) is proved
 * here where it can be, an error where it is false, and otherwise checked at every call as a
 * fact the function did not state (Fact.what).  The accesses it writes are then in bounds by
 * construction and are not proved again (Expr.view). */

static bool view_call(const Expr *e, const char *name) {
  return e->kind == EX_CALL && !strcmp(e->name, name);
}

bool sview_form(S *s, const Expr *e) {
  if (expr_is_slice(e)) return true;
  bool user = e->kind == EX_CALL && s->env->lookup_fn && s->env->lookup_fn(s->env->env, e->name);
  return !user && (view_call(e, "reshape") || view_call(e, "concat") || view_call(e, "stack"));
}

static Expr *view_new(S *s, ExprKind k, Span at, int nargs) {
  Expr *e = arena_alloc(s->a, sizeof *e);
  e->kind = k;
  e->span = e->name_span = at;
  e->nargs = nargs;
  e->args = arena_alloc(s->a, sizeof(Expr *) * (size_t)(nargs + 1));
  return e;
}

/* A size as an expression, already resolved (chk and infer take it as it is). */
static Expr *view_size(S *s, const Poly *p, Span at) {
  int64_t v;
  if (poly_is_const(p, &v)) {
    Expr *e = view_new(s, EX_NUM, at, 0);
    e->is_int = true;
    e->ival = v;
    e->num = (double)v;
    return e;
  }
  Expr *e = view_new(s, EX_NAME, at, 0);
  e->name = scope_pstr(s, p);
  e->res = RES_SIZE;
  e->size = p;
  return e;
}

static Expr *view_index(S *s, const char *name, Span at) {
  Expr *e = view_new(s, EX_NAME, at, 0);
  e->name = name;
  return e;
}

static Expr *view_bin(S *s, OpKind op, Expr *l, Expr *r) {
  Expr *e = view_new(s, EX_BINARY, l->span, 2);
  e->op = op;
  e->args[0] = l;
  e->args[1] = r;
  return e;
}

/* a + i*c, without the + 0 and the *1 */
static Expr *view_affine(S *s, const Poly *a, Expr *i, const Poly *c) {
  int64_t v;
  Expr *e = poly_is_const(c, &v) && v == 1 ? i : view_bin(s, OP_MUL, i, view_size(s, c, i->span));
  return poly_is_const(a, &v) && v == 0 ? e : view_bin(s, OP_ADD, view_size(s, a, i->span), e);
}

static Expr *view_load(S *s, const char *x, Expr **subs, int n, Span at) {
  Expr *e = view_new(s, EX_INDEX, at, n);
  e->name = x;
  e->view = true;
  for (int k = 0; k < n; k++) e->args[k] = subs[k];
  return e;
}

/* The view `what` needs l c r (CMP_LE or CMP_EQ): proved, an error when false whatever the
 * sizes (detail says where the sizes come from), else a fact checked at every call. */
static bool view_need(S *s, const Poly *l, CmpOp c, const Poly *r, Span at, const char *what, const char *detail) {
  const Poly *d = poly_sub(s->pc, r, l);
  if (c == CMP_LT) d = poly_sub(s->pc, d, poly_const(s->pc, 1));
  int64_t v;
  if (poly_is_const(d, &v)) {
    if (c == CMP_EQ ? v == 0 : v >= 0) return true;
    scope_err(s, at, E_VIEW_BOUNDS, what, arena_printf(s->a, "%s %s %s", scope_pstr(s, l), cmp_name(c), scope_pstr(s, r)), detail);
    return false;
  }
  if (c != CMP_EQ && prove_nonneg(s, d)) return true;
  Fact f = {l, c, r, at, what};
  vec_push(s->vfacts, f);
  prove_assume(s, l, c, r);            /* the rest of the function runs only where it holds */
  return true;
}

/* The names of a view's n indices, _0 ... */
static void view_indices(S *s, Stmt *st, int n) {
  st->nidx = n;
  st->idx = arena_alloc(s->a, sizeof(char *) * (size_t)(n + 1));
  st->idx_span = arena_alloc(s->a, sizeof(Span) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) {
    st->idx[k] = arena_printf(s->a, "_%d", k);
    st->idx_span[k] = st->name_span;
  }
}

/* A tensor argument of a view: a name of a tensor in scope. */
static Sym *view_tensor(S *s, Expr *x, const char *view, int argno) {
  bool sliced = x->kind == EX_INDEX && argno == 0;     /* X of X[a:b] */
  Sym *y = x->kind == EX_NAME || sliced ? scope_find_sym(s, x->name) : NULL;
  if (!y && (x->kind == EX_NAME || sliced)) {
    scope_err(s, x->kind == EX_INDEX ? x->name_span : x->span, E_UNDEFINED, x->name);
    return NULL;
  }
  if (!y || y->kind != SYM_TENSOR || (x->kind == EX_NAME && y->type.rank == 0)) {
    scope_err(s, x->span, E_ARG_KIND, argno ? argno : 1, view, "the name of a tensor", arena_printf(s->a, "'%s'", scope_estr(s, x)));
    return NULL;
  }
  return y;
}

static bool view_slice(S *s, Stmt *st) {
  Expr *x = st->expr;
  Sym *y = view_tensor(s, x, "a slice", 0);
  if (!y) return false;
  int r = y->type.rank;
  if (x->nargs != r) {
    scope_err(s, x->span, E_RANK, x->name, r, r == 1 ? "" : "s", x->nargs, x->nargs == 1 ? "" : "s");
    return false;
  }
  const char *what = arena_printf(s->a, "the slice %s", scope_estr(s, x));
  Type *t = arena_alloc(s->a, sizeof *t);
  t->elem = y->type.elem;
  Expr **subs = arena_alloc(s->a, sizeof(Expr *) * (size_t)(r + 1));
  const Poly *zero = poly_const(s->pc, 0), *one = poly_const(s->pc, 1);
  int n = 0;
  for (int k = 0; k < r; k++) {
    Expr *a = x->args[k];
    const Poly *dim = y->type.dims[k];
    const char *detail = arena_printf(s->a, "dimension %d of %s is %s", k, x->name, scope_pstr(s, dim));
    if (a->kind != EX_SLICE) {               /* a fixed subscript drops the dimension */
      const Poly *p = scope_dim_poly(s, a, false);
      if (!p || !view_need(s, zero, CMP_LE, p, a->span, what, detail) ||
          !view_need(s, p, CMP_LT, dim, a->span, what, detail))
        return false;
      subs[k] = view_size(s, p, a->span);
      continue;
    }
    const Poly *part[3] = {zero, dim, one};
    for (int j = 0; j < 3; j++)
      if (slice_part(a, j) && !(part[j] = scope_dim_poly(s, slice_part(a, j), false))) return false;
    Span at[3] = {a->span, a->span, a->span};
    for (int j = 0; j < 3; j++)
      if (slice_part(a, j)) at[j] = slice_part(a, j)->span;
    if (!view_need(s, zero, CMP_LE, part[0], at[0], what, detail) ||
        !view_need(s, part[0], CMP_LE, part[1], a->span, what, "a slice starts at most where it stops") ||
        !view_need(s, part[1], CMP_LE, dim, at[1], what, detail) ||
        !view_need(s, one, CMP_LE, part[2], at[2], what, "a step is at least 1"))
      return false;
    const Poly *len = poly_sub(s->pc, part[1], part[0]);
    if (part[2] != one)                      /* ceil((b - a) / c) */
      len = poly_div(s->pc, poly_add(s->pc, len, poly_sub(s->pc, part[2], one)), part[2]);
    t->dims[n] = len;
    subs[k] = view_affine(s, part[0], view_index(s, arena_printf(s->a, "_%d", n), a->span), part[2]);
    n++;
  }
  t->rank = n;
  view_indices(s, st, n);
  st->shape = t;
  st->expr = view_load(s, x->name, subs, r, x->span);
  return true;
}

static const Poly *view_prod(S *s, const Poly *const *dims, int from, int to) {
  const Poly *p = poly_const(s->pc, 1);
  for (int k = from; k < to; k++) p = poly_mul(s->pc, p, dims[k]);
  return p;
}

/* One group of a reshape: source dimensions [i, i2) of y hold target dimensions [j, j2) of
 * t.  The target indices make one flat position (Horner's rule), which floor division and
 * modulo split into the source subscripts; a group of one dimension needs neither. */
static void view_group(S *s, const Type *y, const Type *t, int i, int i2, int j, int j2, Expr **subs, Span at) {
  Expr *flat = NULL;
  for (int k = j; k < j2; k++) {
    Expr *ix = view_index(s, arena_printf(s->a, "_%d", k), at);
    flat = flat ? view_bin(s, OP_ADD, view_bin(s, OP_MUL, flat, view_size(s, t->dims[k], at)), ix) : ix;
  }
  if (!flat) flat = view_size(s, poly_const(s->pc, 0), at);
  for (int k = i; k < i2; k++) {
    const Poly *inner = view_prod(s, y->dims, k + 1, i2);
    int64_t v;
    Expr *e = poly_is_const(inner, &v) && v == 1 ? flat : view_bin(s, OP_DIV, flat, view_size(s, inner, at));
    subs[k] = k > i ? view_bin(s, OP_MOD, e, view_size(s, y->dims[k], at)) : e;
  }
}

/* T = reshape(X, [D1, ...]): the same elements in C order.  Dimensions equal in both shapes
 * map one to one; the others form groups whose sizes multiply to the same size (N to H, D
 * when N = H*D is written N), or one group of all the rest.  The element counts must be
 * equal. */
static bool view_reshape(S *s, Stmt *st) {
  Expr *c = st->expr;
  if (c->nargs != 2 || c->args[1]->kind != EX_LIST) {
    scope_err(s, c->span, E_VIEW_ARG, "reshape", "write reshape(X, [D1, D2, ...]) with the new dimensions as a list of sizes");
    return false;
  }
  Sym *y = view_tensor(s, c->args[0], "reshape", 1);
  if (!y) return false;
  Expr *list = c->args[1];
  if (list->nargs > DYN_MAX_RANK) {
    scope_err(s, list->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    return false;
  }
  Type *t = arena_alloc(s->a, sizeof *t);
  t->elem = y->type.elem;
  t->rank = list->nargs;
  for (int k = 0; k < t->rank; k++) {
    int64_t v;
    if (!(t->dims[k] = scope_dim_poly(s, list->args[k], false))) return false;
    if (poly_is_const(t->dims[k], &v) && v < 0) {
      scope_err(s, list->args[k]->span, E_NEG_DIM, k, (long long)v);
      return false;
    }
  }
  const Type *x = &y->type;
  if (!view_need(s, view_prod(s, x->dims, 0, x->rank), CMP_EQ, view_prod(s, t->dims, 0, t->rank), c->span,
                 scope_estr(s, c), arena_printf(s->a, "%s is %s", c->args[0]->name, scope_tstr(s, x))))
    return false;
  Expr **subs = arena_alloc(s->a, sizeof(Expr *) * (size_t)(x->rank + 1));
  int i = 0, j = 0;
  while (i < x->rank || j < t->rank) {
    if (i < x->rank && j < t->rank && x->dims[i] == t->dims[j]) {
      subs[i++] = view_index(s, arena_printf(s->a, "_%d", j++), c->span);
      continue;
    }
    int bi = x->rank, bj = t->rank;          /* the smallest group of equal sizes, else the rest */
    for (int i2 = i + 1; i2 <= x->rank; i2++)
      for (int j2 = j + 1; j2 <= t->rank; j2++)
        if (i2 - i + j2 - j < bi - i + bj - j && view_prod(s, x->dims, i, i2) == view_prod(s, t->dims, j, j2))
          bi = i2, bj = j2;
    view_group(s, x, t, i, bi, j, bj, subs, c->span);
    i = bi;
    j = bj;
  }
  view_indices(s, st, t->rank);
  st->shape = t;
  st->expr = view_load(s, c->args[0]->name, subs, x->rank, c->span);
  return true;
}

/* T = concat(A, B, ..., axis) and T = stack(A, B, ..., axis): the axis is an integer literal
 * after the tensors (0 when left out), since it decides the shape the function is checked
 * with.  concat joins along an existing axis, whose size is the sum; stack adds an axis of
 * size the count.  Each element reads one operand, chosen by where(...) on the axis's index,
 * so only the chosen read happens. */
static bool view_join(S *s, Stmt *st, bool stack) {
  Expr *c = st->expr;
  const char *name = stack ? "stack" : "concat";
  int n = c->nargs;
  int64_t axis = 0;
  Expr *last = n ? c->args[n - 1] : NULL;
  if (last && last->kind == EX_NUM && last->is_int) {
    axis = last->ival;
    n--;
  }
  if (n < 1) {
    scope_err(s, c->span, E_VIEW_ARG, name, arena_printf(s->a, "write %s(A, B, ..., axis) with the tensors to join", name));
    return false;
  }
  Sym **ys = arena_alloc(s->a, sizeof(Sym *) * (size_t)n);
  for (int k = 0; k < n; k++)
    if (!(ys[k] = view_tensor(s, c->args[k], name, k + 1))) return false;
  const Type *a = &ys[0]->type;
  const char *an = c->args[0]->name;
  if (axis < 0 || axis >= a->rank + stack) {
    scope_err(s, last->span, E_VIEW_ARG, name, arena_printf(s->a, "axis %lld is not an axis of %s, which has %d", (long long)axis,
                                                      stack ? "the result" : an, a->rank + stack));
    return false;
  }
  const Poly *sum = poly_const(s->pc, 0);
  const Poly **off = arena_alloc(s->a, sizeof(Poly *) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) {
    const Type *b = &ys[k]->type;
    const char *bn = c->args[k]->name;
    if (b->elem != a->elem || b->rank != a->rank) {
      scope_err(s, c->args[k]->span, E_VIEW_ARG, name, arena_printf(s->a, "%s is %s but %s is %s", bn, scope_tstr(s, b), an, scope_tstr(s, a)));
      return false;
    }
    for (int d = 0; d < a->rank; d++)
      if (b->dims[d] != a->dims[d] && (stack || d != axis)) {
        scope_err(s, c->args[k]->span, E_VIEW_ARG, name,
            stack ? arena_printf(s->a, "%s is %s but %s is %s; the tensors stacked have one shape", bn, scope_tstr(s, b), an, scope_tstr(s, a))
                  : arena_printf(s->a, "dimension %d of %s is %s but of %s is %s; only dimension %lld, the axis, may differ", d, bn,
                                 scope_pstr(s, b->dims[d]), an, scope_pstr(s, a->dims[d]), (long long)axis));
        return false;
      }
    off[k] = sum;
    if (!stack) sum = poly_add(s->pc, sum, b->dims[axis]);
  }
  Type *t = arena_alloc(s->a, sizeof *t);
  t->elem = a->elem;
  t->rank = a->rank + stack;
  for (int d = 0; d < t->rank; d++)
    t->dims[d] = d == axis ? (stack ? poly_const(s->pc, n) : sum) : a->dims[d < axis || !stack ? d : d - 1];
  view_indices(s, st, t->rank);
  Expr *ax = view_index(s, st->idx[axis], c->span);
  Expr *e = NULL;
  for (int k = n - 1; k >= 0; k--) {
    Expr **subs = arena_alloc(s->a, sizeof(Expr *) * (size_t)(a->rank + 1));
    for (int d = 0, j = 0; d < t->rank; d++) {
      if (stack && d == axis) continue;
      subs[j++] = d == axis ? view_affine(s, poly_neg(s->pc, off[k]), ax, poly_const(s->pc, 1)) : view_index(s, st->idx[d], c->span);
    }
    Expr *ld = view_load(s, c->args[k]->name, subs, a->rank, c->args[k]->span);
    if (!e) {
      e = ld;
      continue;
    }
    Expr *w = view_new(s, EX_WHERE, c->span, 3);
    w->args[0] = stack ? view_bin(s, OP_EQ, ax, view_size(s, poly_const(s->pc, k), c->span))
                       : view_bin(s, OP_LT, ax, view_size(s, off[k + 1], c->span));
    w->args[1] = ld;
    w->args[2] = e;
    e = w;
  }
  st->shape = t;
  st->expr = e;
  return true;
}

/* View rewrites of `T = X[...]`, reshape, concat and stack: false after reporting. */
bool sview_rewrite(S *s, Stmt *st) {
  if (expr_is_slice(st->expr)) return view_slice(s, st);
  if (view_call(st->expr, "reshape")) return view_reshape(s, st);
  return view_join(s, st, view_call(st->expr, "stack"));
}
