/* sema_int.h -- what the three files of the type checker share, and nothing else of dyn
 * uses: the checker's state (S: symbols, size variables, index ranges, facts), the scope every
 * part looks names up, reports and prints through (sema_scope.c), the prover of sizes and
 * accesses (sema_prove.c) and the rewriting of views into index notation (sema_view.c).
 * sema.c drives the two passes over a function and calls the others; none calls it back. */
#ifndef DYN_SEMA_INT_H
#define DYN_SEMA_INT_H

#include "dyn_int.h"

typedef enum { SYM_TENSOR, SYM_SIZE } SymKind;
typedef struct Sym {
  const char *name;
  SymKind kind;
  Type type;
  Span span;
} Sym;

typedef struct Idx {
  const char *name;
  Span span;
  const Poly *ext;        /* the range [0, ext), once inferred */
  Span ext_span;          /* where it was inferred */
  const char *ext_what;   /* "dimension 1 of X" */
  const Poly *lo, *hi;    /* bounds used by proofs, narrowed inside where(...) branches */
  bool given;             /* sum[k < N/2]: the range is written, accesses are only checked */
  const char *bare_of;    /* the range is all of dimension bare_dim of this tensor, from */
  int bare_dim;           /* the bare subscript at ext_span (for the hint towards slices) */
} Idx;

#define MAX_IDX 64

typedef VEC(Fact) FactVec;

typedef struct S {
  const SemaEnv *env;
  PolyCtx *pc;
  Arena *a;
  Diags *d;
  const char *fname;
  VEC(Sym) syms;
  VEC(SizeVar) sizes;
  VEC(const Poly *) facts;    /* polynomials known to be >= 0 */
  Fact *ufacts; int nufacts;
  FactVec vfacts;             /* conditions of views, checked at every call (Fact.what) */
  Idx idx[MAX_IDX];
  int nidx;
  bool err;
  const Expr *scan_ok;        /* the scan that is the definition's whole right-hand side */
} S;

/* ---- sema_scope.c: reporting, printing into the arena, names in scope ---- */

/* Report a diagnostic; an error marks the function failed (s->err). */
Diag *scope_err(S *s, Span at, DiagId id, ...);
/* An unknown name (E_UNDEFINED, E_UNBOUND_SIZE, E_UNDEFINED_FN), with "did you mean". */
void scope_undefined(S *s, Span at, DiagId id, const char *name);
/* Printed forms of a type, a polynomial, an expression, allocated in the function's arena. */
const char *scope_tstr(S *s, const Type *t);
const char *scope_pstr(S *s, const Poly *p);
const char *scope_estr(S *s, const Expr *e);
/* The innermost tensor or size, or index, of that name in scope; NULL if none. */
Sym *scope_find_sym(S *s, const char *name);
Idx *scope_find_idx(S *s, const char *name);
/* A dimension expression as a polynomial in the sizes; NULL after reporting (or silently
 * when quiet). */
const Poly *scope_dim_poly(S *s, Expr *e, bool quiet);
/* The first name in e that is an index in scope, or NULL. */
const Expr *scope_index_in(S *s, const Expr *e);

/* ---- sema_prove.c: proofs over the sizes, the facts and the index ranges ---- */

/* p >= 0 wherever the facts in force hold (the stated ones, the views' and the branch's). */
bool prove_nonneg(S *s, const Poly *p);
/* Add l c r to the facts in force, as polynomials >= 0. */
void prove_assume(S *s, const Poly *l, CmpOp c, const Poly *r);
/* Prove the access e to a tensor of type t in bounds; else an error (out whatever the sizes)
 * or a warning and e->checked (checked at run time). */
void prove_access(S *s, Expr *e, const Type *t);
/* Narrow the index ranges in scope by a where(...) condition c, taken or (positive false) not. */
void prove_refine(S *s, Expr *c, bool positive);

/* ---- sema_view.c: slices, reshape, concat and stack as index notation ---- */

/* e is a view: a slice, or reshape/concat/stack not shadowed by a user's function. */
bool sview_form(S *s, const Expr *e);
/* Rewrite the definition st = VIEW into index notation; false after reporting. */
bool sview_rewrite(S *s, Stmt *st);

#endif
