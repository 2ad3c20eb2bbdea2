/* func.c -- a checked function (Func) as the session holds it: its signature as :type shows
 * it, and its end.  A Func is made by sema.c and lowered on first use by lower.c; freeing it
 * frees its lowered program too, so this sits above both and neither calls the other back. */
#include "config.h"
#include "dyn_int.h"

void func_free(Func *f) {
  if (!f) return;
  lower_free(f->prog);
  arena_free(f->arena);          /* the Func itself lives in its arena */
}

void func_signature(const Func *f, Buf *out) {
  buf_printf(out, "fn %s(", f->name);
  for (int i = 0; i < f->nparams; i++) {
    if (i) buf_puts(out, ", ");
    buf_printf(out, "%s: ", f->params[i].name);
    if (f->params[i].is_size) buf_puts(out, "size");
    else type_str(&f->params[i].type, out);
  }
  buf_puts(out, ") -> ");
  if (f->nrets != 1) buf_putc(out, '(');
  for (int i = 0; i < f->nrets; i++) {
    if (i) buf_puts(out, ", ");
    type_str(&f->rets[i], out);
  }
  if (f->nrets != 1) buf_putc(out, ')');
  for (int i = 0, shown = 0; i < f->nfacts; i++) {
    if (f->facts[i].what) continue;          /* a view's condition, not the user's */
    buf_puts(out, shown++ ? ", " : " where ");
    poly_str(f->facts[i].lhs, out);
    buf_printf(out, " %s ", cmp_name(f->facts[i].cmp));
    poly_str(f->facts[i].rhs, out);
  }
}
