/* view.c -- views of tensor values at top level: slices, reshape, concat and stack.
 *
 * A slice of a value (X[1:3, :, ::2]) is a tensor_view of its buffer: new shape, strides and
 * offset, no copy; reshape of a contiguous value is one too.  concat, stack and reshape of a
 * strided view compute a new tensor through an anonymous function, which the checker
 * rewrites into index notation exactly as it does these views inside functions (sema.c), so
 * one rewrite serves both and every back end runs it.
 */
#include "config.h"
#include "session_int.h"

#include <string.h>

bool view_is_form(const Expr *e) {
  return expr_is_slice(e) ||
         (e->kind == EX_CALL && (!strcmp(e->name, "reshape") || !strcmp(e->name, "concat") || !strcmp(e->name, "stack")));
}

/* The tensor a view reads: a binding or a call's value (softmax(X)[0:2]).  VAL_NONE after
 * an error. */
static Value view_base(Session *s, Expr *e) {
  if (e->kind == EX_INDEX && e->base) return top_eval(s, e->base);
  Expr nm = *e;
  nm.kind = EX_NAME;
  nm.span = e->kind == EX_INDEX ? e->name_span : e->span;
  nm.nargs = 0;
  Value v = top_eval(s, &nm);
  if (!session_failed(s) && v.kind != VAL_TENSOR) {
    session_error(s, nm.span, E_BUILTIN, session_tmp_printf(s, "'%s' is not a tensor and cannot be sliced", e->name));
    val_free(&v);
    return (Value){0};
  }
  return v;
}

/* lo <= hi (lt: lo < hi), or a located error naming the view and where the numbers come
 * from, worded as the checker words it inside functions. */
static bool view_cmp(Session *s, Span at, const char *what, int64_t lo, bool lt, int64_t hi, const char *detail) {
  if (lt ? lo < hi : lo <= hi) return true;
  session_error(s, at, E_VIEW_BOUNDS, what, session_tmp_printf(s, "%lld %s %lld", (long long)lo, lt ? "<" : "<=", (long long)hi), detail);
  return false;
}

static bool view_le(Session *s, Span at, const char *what, int64_t lo, int64_t hi, const char *detail) {
  return view_cmp(s, at, what, lo, false, hi, detail);
}

Value view_slice(Session *s, Expr *e) {
  Value v = view_base(s, e);
  if (session_failed(s)) return (Value){0};
  Tensor *t = v.t;
  Buf w = {0};
  parse_print_expr(e, &w);
  const char *what = session_tmp_printf(s, "the slice %s", w.s);
  const char *xname = e->base ? "the value" : e->name;
  buf_free(&w);
  if (e->nargs != t->rank) {
    session_error(s, e->span, E_RANK, e->base ? "the value" : e->name, t->rank, t->rank == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "" : "s");
    val_free(&v);
    return (Value){0};
  }
  int64_t shape[DYN_MAX_RANK], strides[DYN_MAX_RANK], off = t->offset;
  int n = 0;
  for (int k = 0; k < t->rank; k++) {
    Expr *a = e->args[k];
    int64_t dim = t->shape[k];
    const char *detail = session_tmp_printf(s, "dimension %d of %s is %lld", k, xname, (long long)dim);
    int64_t part[3] = {0, dim, 1};
    bool ok = true;
    if (a->kind != EX_SLICE) {               /* a fixed subscript drops the dimension */
      ok = top_eval_int(s, a, &part[0]) && view_le(s, a->span, what, 0, part[0], detail) &&
           view_cmp(s, a->span, what, part[0], true, dim, detail);
      off += ok ? part[0] * t->strides[k] : 0;
    } else {
      for (int j = 0; j < 3 && ok; j++)
        if (slice_part(a, j)) ok = top_eval_int(s, slice_part(a, j), &part[j]);
      Span at0 = slice_part(a, 0) ? slice_part(a, 0)->span : a->span;
      Span at1 = slice_part(a, 1) ? slice_part(a, 1)->span : a->span;
      Span at2 = slice_part(a, 2) ? slice_part(a, 2)->span : a->span;
      ok = ok && view_le(s, at0, what, 0, part[0], detail) && view_le(s, a->span, what, part[0], part[1], "a slice starts at most where it stops") &&
           view_le(s, at1, what, part[1], dim, detail) && view_le(s, at2, what, 1, part[2], "a step is at least 1");
      if (ok) {
        shape[n] = (part[1] - part[0] + part[2] - 1) / part[2];
        strides[n++] = t->strides[k] * part[2];
        off += part[0] * t->strides[k];
      }
    }
    if (!ok) {
      val_free(&v);
      return (Value){0};
    }
  }
  Tensor *r = tensor_view(t, n, shape, strides, off);
  val_free(&v);
  return val_tensor(r);
}

Value view_reshape(Session *s, Expr *call, Value *args) {
  (void)args;
  if (call->nargs != 2 || call->args[1]->kind != EX_LIST) {
    session_error(s, call->span, E_VIEW_ARG, "reshape", "write reshape(X, [D1, D2, ...]) with the new dimensions as a list of sizes");
    return (Value){0};
  }
  Expr *x = call->args[0], *list = call->args[1];
  Value v = top_eval(s, x);
  if (session_failed(s)) return (Value){0};
  if (v.kind != VAL_TENSOR) {
    session_error(s, x->span, E_ARG_KIND, 1, "reshape", "a tensor", "another kind of value");
    val_free(&v);
    return (Value){0};
  }
  if (list->nargs > DYN_MAX_RANK) {
    session_error(s, list->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    val_free(&v);
    return (Value){0};
  }
  int64_t shape[DYN_MAX_RANK], strides[DYN_MAX_RANK], n = 1;
  bool ok = true;
  for (int k = 0; k < list->nargs && ok; k++) {
    ok = top_eval_int(s, list->args[k], &shape[k]);
    if (ok && shape[k] < 0) {
      session_error(s, list->args[k]->span, E_NEG_DIM, k, (long long)shape[k]);
      ok = false;
    }
    if (ok && !size_mul_ok(n, shape[k], &n)) n = -1;
  }
  if (ok && n != tensor_numel(v.t)) {
    Buf b = {0};
    parse_print_expr(call, &b);
    session_error(s, call->span, E_VIEW_BOUNDS, b.s,
                  session_tmp_printf(s, "%lld == %s", (long long)tensor_numel(v.t), n < 0 ? "more than 2^63" : session_tmp_printf(s, "%lld", (long long)n)),
                  session_tmp_printf(s, "%s is %s", x->kind == EX_NAME ? x->name : "its argument", session_ttype(s, v.t)));
    buf_free(&b);
    ok = false;
  }
  if (!ok) {
    val_free(&v);
    return (Value){0};
  }
  if (!tensor_contiguous(v.t)) {      /* a strided view: gathered by an anonymous function */
    val_free(&v);
    return top_eval_anon(s, call, NULL);
  }
  int64_t st = 1;
  for (int k = list->nargs - 1; k >= 0; k--) {
    strides[k] = st;
    st *= shape[k] ? shape[k] : 1;
  }
  Tensor *r = tensor_view(v.t, list->nargs, shape, strides, v.t->offset);
  val_free(&v);
  return val_tensor(r);
}

Value view_concat(Session *s, Expr *call, Value *args) {
  (void)args;
  return top_eval_anon(s, call, NULL);
}
