/* value.c -- the values of top-level statements: tensors, strings, shapes, types and the
 * tuples functions return.  A binding holds one, a built-in takes and returns them, and the
 * REPL prints them in the forms below (val_format, val_type_str); :check compares two
 * element by element (val_compare).  The reference counts of tensors are the only sharing.
 */
#include "config.h"
#include "session_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void val_free(Value *v) {
  if (v->kind == VAL_TENSOR) tensor_release(v->t);
  if (v->kind == VAL_STR) free(v->s);
  if (v->kind == VAL_TUPLE) {
    for (int i = 0; i < v->n; i++) val_free(&v->items[i]);
    free(v->items);
  }
  v->kind = VAL_NONE;                /* the rest is read only for its kind (see val_tensor) */
  v->rank = 0;
  v->elem = 0;
  v->t = NULL;
  v->s = NULL;
  v->items = NULL;
  v->n = 0;
}

Value val_copy(const Value *v) {
  Value c = *v;
  if (v->kind == VAL_TENSOR) tensor_retain(v->t);
  if (v->kind == VAL_STR) c.s = xstrdup(v->s);
  if (v->kind == VAL_TUPLE) {
    c.items = xcalloc((size_t)v->n, sizeof(Value));
    for (int i = 0; i < v->n; i++) c.items[i] = val_copy(&v->items[i]);
  }
  return c;
}

static void shape_str(int rank, const int64_t *dims, Buf *out) {
  buf_putc(out, '[');
  for (int i = 0; i < rank; i++) buf_printf(out, "%s%lld", i ? ", " : "", (long long)dims[i]);
  buf_putc(out, ']');
}

void val_type_str(const Value *v, Buf *out) {
  switch (v->kind) {
  case VAL_TENSOR: tensor_type_str(v->t, out); break;
  case VAL_STR: buf_puts(out, "string"); break;
  case VAL_SHAPE: buf_puts(out, "shape"); break;
  case VAL_TYPE: buf_puts(out, "type"); break;
  case VAL_TUPLE:
    buf_putc(out, '(');
    for (int i = 0; i < v->n; i++) {
      if (i) buf_puts(out, ", ");
      val_type_str(&v->items[i], out);
    }
    buf_putc(out, ')');
    break;
  case VAL_NONE: buf_puts(out, "nothing"); break;
  }
}

void val_format(const Value *v, Buf *out) {
  switch (v->kind) {
  case VAL_TENSOR: tensor_format(v->t, out); break;
  case VAL_STR: buf_puts(out, v->s); break;
  case VAL_SHAPE: shape_str(v->rank, v->dims, out); break;
  case VAL_TYPE:
    buf_puts(out, elem_name(v->elem));
    if (v->rank) shape_str(v->rank, v->dims, out);
    break;
  case VAL_TUPLE:
    for (int i = 0; i < v->n; i++) {
      if (i) buf_putc(out, '\n');
      val_format(&v->items[i], out);
    }
    break;
  case VAL_NONE: break;
  }
}

/* Compare two results element by element: ints and bools exactly, floats with a tolerance
 * for the element type (the back ends may reassociate sums), or tol for both the relative
 * and the absolute part when tol > 0 (what the tensor cores' rounding allows). */
bool val_compare(const Value *a, const Value *b, double tol, Buf *out) {
  if (a->kind != b->kind) {
    buf_puts(out, "different kinds of value");
    return false;
  }
  if (a->kind == VAL_TUPLE) {
    if (a->n != b->n) {
      buf_printf(out, "%d values against %d", a->n, b->n);
      return false;
    }
    bool ok = true;
    for (int i = 0; i < a->n; i++) {
      buf_printf(out, "%s#%d: ", i ? "; " : "", i + 1);
      ok = val_compare(&a->items[i], &b->items[i], tol, out) && ok;
    }
    return ok;
  }
  if (a->kind != VAL_TENSOR) return true;
  Tensor *x = a->t, *y = b->t;
  if (x->elem != y->elem || x->rank != y->rank || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) {
    buf_puts(out, "the types differ: ");
    tensor_type_str(x, out);
    buf_puts(out, " and ");
    tensor_type_str(y, out);
    return false;
  }
  int64_t n = tensor_numel(x), bad = 0, worst_i = -1;
  double worst = 0, scale = 0;
  bool fl = elem_is_float(x->elem);
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(tensor_get_f64(y, i));
    if (isfinite(v) && v > scale) scale = v;
  }
  /* an element may differ by rtol of itself plus atol of the largest value: sums reassociated
   * by a back end lose precision relative to their terms, not to their result */
  double rtol = x->elem == DYN_F64 ? 1e-10 : 1e-4, atol = x->elem == DYN_F64 ? 1e-12 : 1e-5;
  /* f16 and bf16: a few of their ulps (2^-10, 2^-7 of a value), as two back ends' f32 values
   * on either side of a rounding boundary, carried through stored intermediates, differ */
  if (elem_is_half(x->elem)) rtol = x->elem == DYN_F16 ? 4e-3 : 3e-2, atol = rtol / 4;
  if (tol > 0 && x->elem == DYN_F32) rtol = atol = tol;
  for (int64_t i = 0; i < n; i++) {
    double p = tensor_get_f64(x, i), q = tensor_get_f64(y, i);
    bool same;
    if (!fl) same = tensor_get_i64(x, i) == tensor_get_i64(y, i);
    else if (isnan(p) || isnan(q)) same = isnan(p) && isnan(q);
    else if (isinf(p) || isinf(q)) same = p == q;
    else same = fabs(p - q) <= rtol * fabs(q) + atol * scale;
    double d = fl && isfinite(p) && isfinite(q) ? fabs(p - q) : (same ? 0 : INFINITY);
    if (!same) bad++;
    if (d > worst || (!same && worst_i < 0)) {
      worst = d;
      worst_i = i;
    }
  }
  if (fl) buf_printf(out, "max |difference| %.3g, %.3g of the largest value", worst, scale > 0 ? worst / scale : worst);
  else buf_printf(out, "%s", bad ? "values differ" : "identical");
  if (bad) buf_printf(out, "; %lld of %lld elements differ, first at flat index %lld", (long long)bad, (long long)n, (long long)worst_i);
  return bad == 0;
}
