/* op.c -- the operators and built-in math functions of the expression language, and the
 * reductions: their names, arities, typing classes and precedences, all from one table
 * (lang/ops.def).  The parser reads names and precedences from it, the checker the classes,
 * and every back end (eval.c, cpu.c, cuda_render.c, lower.c, cost.c) only this module, so none of
 * them needs the parser. */
#include "config.h"
#include "dyn_int.h"

#include <string.h>

static const struct { const char *s; int arity; OpClass cls; int prec; } opinfo[] = {
#define OP(E, s, arity, kind, prec) {s, arity, OPK_##kind, prec},
#include "../lang/ops.def"
#undef OP
};

const char *op_name(OpKind op) { return opinfo[op].s; }
int op_arity(OpKind op) { return opinfo[op].arity; }
int op_prec(OpKind op) { return opinfo[op].prec; }
OpClass op_class(OpKind op) { return opinfo[op].cls; }

bool op_from_name(const char *s, OpKind *out) {
  for (int i = OP_EXP; i < OP__COUNT; i++)
    if (!strcmp(opinfo[i].s, s)) {
      *out = (OpKind)i;
      return true;
    }
  return false;
}

const char *red_name(RedOp r) {
  static const char *n[] = {"sum", "max", "min", "prod"};
  return n[r];
}
