/* type.c -- the static type of a tensor value: an element type and symbolic dimensions, as
 * the checker infers them and every later stage (lowering, the back ends, the session's
 * messages) prints and compares them.  It sits below sema.c and lower.c, which both print
 * types, so that neither needs the other for it. */
#include "config.h"
#include "dyn_int.h"

void type_str(const Type *t, Buf *out) {
  buf_puts(out, elem_name(t->elem));
  if (t->rank == 0) return;
  buf_putc(out, '[');
  for (int i = 0; i < t->rank; i++) {
    if (i) buf_puts(out, ", ");
    poly_str(t->dims[i], out);
  }
  buf_putc(out, ']');
}

bool type_equal(const Type *a, const Type *b) {
  if (a->elem != b->elem || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}
