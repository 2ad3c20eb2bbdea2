/* func.c -- a checked function (Func) as the session holds it: its signature as :type shows
 * it, the shapes it was called at, and its end.  A Func is made by sema.c, lowered by lower.c
 * and compiled by the back ends into its Compiled record; freeing it frees all of that, so
 * this sits above them and none of them calls it back. */
#include "config.h"
#include "dyn_int.h"

#include <stdlib.h>

void func_free_code(Func *f) {
  cpu_program_free(f->code.cpu);
  cpu_program_free(f->code.view);
  cuda_program_free(f->code.gpu);
  f->code.cpu = f->code.view = f->code.gpu = NULL;
}

void func_free(Func *f) {
  if (!f) return;
  func_free_code(f);
  extents_free(f->code.bound);
  free(f->code.bound);
  lower_free(f->code.prog);
  free(f->shapes);
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

void func_note_shape(Func *f, const int64_t *vals, int n) {
  uint64_t h = 0xcbf29ce484222325ull;                 /* FNV-1a over the values' bytes */
  for (int i = 0; i < n; i++)
    for (int b = 0; b < 64; b += 8) h = (h ^ (uint8_t)((uint64_t)vals[i] >> b)) * 0x100000001b3ull;
  h |= 1;                                              /* 0 marks a free slot */
  if (f->nshapes >= FUNC_MAX_SHAPES) return;
  if (2 * (f->nshapes + 1) > f->shapes_cap) {          /* grow, at most half full */
    int cap = f->shapes_cap ? 2 * f->shapes_cap : 64;
    uint64_t *t = xcalloc((size_t)cap, sizeof *t);
    for (int i = 0; i < f->shapes_cap; i++)
      if (f->shapes[i]) {
        size_t j = f->shapes[i] & (size_t)(cap - 1);
        while (t[j]) j = (j + 1) & (size_t)(cap - 1);
        t[j] = f->shapes[i];
      }
    free(f->shapes);
    f->shapes = t;
    f->shapes_cap = cap;
  }
  size_t j = h & (size_t)(f->shapes_cap - 1);
  while (f->shapes[j] && f->shapes[j] != h) j = (j + 1) & (size_t)(f->shapes_cap - 1);
  if (!f->shapes[j]) {
    f->shapes[j] = h;
    f->nshapes++;
  }
}
