/* test_eval.c -- unit tests for eval.c, the reference evaluator.  Small functions are
 * parsed, checked, lowered and run with eval_program on tensors made here; each result is
 * printed as its type and its elements ("i64[4]: 3 -4 -4 3") and compared with values
 * worked out by hand (or, for long inputs, by a plain loop here).  Run-time errors are
 * compared as the message, and where it has one, as the diagnostic at the access. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define ASAN 1
#else
#define ASAN 0
#endif

static Arena *arena;
static PolyCtx *pc;
static Diags diags;
static Source src;
static Buf out, msgs;
static Func *fns[32];
static int nfns;
static Tensor *args[8];
static int nargs;

static void setup(void) {
  arena = arena_new();
  pc = poly_ctx_new();
  memset(&diags, 0, sizeof diags);
  nfns = nargs = 0;
}

static void clear_args(void) {
  for (int i = 0; i < nargs; i++) tensor_release(args[i]);
  nargs = 0;
}

static void teardown(void) {
  clear_args();
  for (int i = 0; i < nfns; i++) lower_free(fns[i]->code.prog);
  diag_clear(&diags);
  arena_free(arena);
  poly_ctx_free(pc);
  buf_free(&out);
  buf_free(&msgs);
}

static Func *lookup(void *env, const char *name) {
  (void)env;
  for (int i = 0; i < nfns; i++)
    if (!strcmp(fns[i]->name, name)) return fns[i];
  return NULL;
}

/* ---- making inputs ---- */

/* A tensor of type ty ("f32[2, 3]", "i64", "bool[4]") holding the numbers in vals, in C
 * order; integer types read them as integers. */
static Tensor *mk(const char *ty, const char *vals) {
  size_t n = strcspn(ty, "[");
  DynElem el;
  ck_assert_msg(elem_from_name(ty, n, &el), "bad type %s", ty);
  int64_t shape[DYN_MAX_RANK];
  int rank = 0;
  for (const char *p = ty + n; *p == '[' || *p == ','; ) {
    char *end;
    shape[rank++] = strtoll(p + 1, &end, 10);
    p = end;
  }
  char err[128];
  Tensor *t = tensor_new(el, rank, shape, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  const char *p = vals;
  for (int64_t i = 0; i < tensor_numel(t); i++) {
    char *end;
    if (elem_is_float(el)) tensor_set_f64(t, i, strtod(p, &end));
    else tensor_set_i64(t, i, strtoll(p, &end, 10));
    ck_assert_msg(end != p, "too few values for %s", ty);
    p = end;
  }
  return t;
}

/* Add an argument (the next parameter of the function run next). */
static void arg(const char *ty, const char *vals) {
  ck_assert_int_lt(nargs, 8);
  args[nargs++] = mk(ty, vals);
}

/* ---- running ---- */

static void fmt_tensor(const Tensor *t, Buf *b) {
  tensor_type_str(t, b);
  buf_putc(b, ':');
  for (int64_t i = 0; i < tensor_numel(t); i++) {
    if (elem_is_float(t->elem) && isnan(tensor_get_f64(t, i))) buf_puts(b, " nan");  /* any sign */
    else if (t->elem == DYN_F64) buf_printf(b, " %.17g", tensor_get_f64(t, i));
    else if (t->elem == DYN_F32) buf_printf(b, " %.9g", tensor_get_f64(t, i));
    else buf_printf(b, " %lld", (long long)tensor_get_i64(t, i));
  }
}

/* Check every function of text and run the last one on args (a size parameter takes the
 * value of the scalar argument at its place).  Returns the outputs, one per line, or
 * "error: MESSAGE"; with a location, the formatted diagnostic is left in msgs. */
static const char *run_ex(const char *text, volatile int *interrupt) {
  for (int i = 0; i < nfns; i++) lower_free(fns[i]->code.prog), fns[i]->code.prog = NULL;
  nfns = 0;
  diag_clear(&diags);
  src.name = "t.dyn";
  src.len = strlen(text);
  src.text = arena_strndup(arena, text, src.len);
  int n = 0;
  bool inc = false;
  Stmt **st = parse_source(arena, &src, &diags, &n, &inc);
  SemaEnv env = {pc, lookup, NULL};
  for (int i = 0; i < n && diags.nerrors == 0; i++) {
    if (st[i]->kind != ST_FN) continue;
    Func *f = sema_function(&env, st[i]->fn, arena, &diags);
    if (f) fns[nfns++] = f;
  }
  if (diags.nerrors) {
    Buf m = {0};
    for (Diag *d = diags.head; d; d = d->next) diag_format(d, &m);
    ck_abort_msg("the test program does not check:\n%s", m.s);
  }
  diag_clear(&diags);                  /* warnings: not what these tests are about */
  Func *f = fns[nfns - 1];
  ck_assert_int_eq(f->nparams, nargs);
  f->code.prog = lower_function(f, pc, lookup, NULL);
  const char *names[16];
  int64_t vals[16];
  ck_assert_int_le(f->nsizes, 16);
  for (int v = 0; v < f->nsizes; v++) {
    const SizeVar *sv = &f->sizes[v];
    names[v] = sv->name;
    vals[v] = sv->dim < 0 ? tensor_get_i64(args[sv->param], 0) : args[sv->param]->shape[sv->dim];
  }
  EvalSizes sz = {names, vals, f->nsizes};
  Tensor *outs[8] = {0};
  Buf err = {0};
  Span esp = {0};
  Extents x = {0};
  extents_bind(&x, f->code.prog, &sz);            /* what did not bind, eval_program says */
  bool ok = eval_program(f->code.prog, args, &x, outs, interrupt, &err, &esp);
  extents_free(&x);
  buf_free(&out);
  buf_puts(&out, "");
  buf_free(&msgs);
  buf_puts(&msgs, "");
  if (ok) {
    for (int i = 0; i < f->nrets; i++) {
      if (i) buf_putc(&out, '\n');
      fmt_tensor(outs[i], &out);
      tensor_release(outs[i]);
    }
  } else {
    buf_printf(&out, "error: %s", err.s ? err.s : "");
    if (esp.src) {
      Diag *d = diag_report(&diags, esp, E_RUNTIME, err.s);
      diag_format(d, &msgs);
    }
  }
  buf_free(&err);
  clear_args();
  return out.s;
}

static const char *run(const char *text) { return run_ex(text, NULL); }

#define RUNS(text, want) ck_assert_str_eq(run(text), want)

/* ---- element types ---- */

START_TEST(test_element_types) {
  arg("f32[3]", "1 2 3");
  RUNS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i] * 0.1\n  return Y\n}",
       "f32[3]: 0.100000001 0.200000003 0.300000012");       /* rounded to f32 when stored */
  arg("f64[3]", "1 2 3");
  RUNS("fn f(X: f64[N]) -> f64[N] {\n  Y[i] = X[i] * 0.1\n  return Y\n}",
       "f64[3]: 0.10000000000000001 0.20000000000000001 0.30000000000000004");
  arg("i32[4]", "2147483647 -2147483648 5 -5");
  RUNS("fn f(X: i32[N]) -> i32[N] {\n  Y[i] = X[i] + 1\n  return Y\n}",
       "i32[4]: -2147483648 -2147483647 6 -4");               /* wraps like two's complement */
  arg("i64[3]", "9223372036854775807 -1 40");
  RUNS("fn f(X: i64[N]) -> i64[N] {\n  Y[i] = X[i] * 2 + i\n  return Y\n}",
       "i64[3]: -2 -1 82");
  arg("f32[4]", "-1 0 0.5 2");
  RUNS("fn f(X: f32[N]) -> bool[N] {\n  Y[i] = X[i] > 0.0 and not X[i] == 2.0\n  return Y\n}",
       "bool[4]: 0 0 1 0");
  arg("bool[4]", "1 0 1 0");
  arg("bool[4]", "1 1 0 0");
  RUNS("fn f(A: bool[N], B: bool[N]) -> (bool[N], bool[N], bool[N]) {\n"
       "  O[i] = A[i] or B[i]\n  X[i] = A[i] != B[i]\n  E[i] = A[i] == B[i] and A[i]\n  return (O, X, E)\n}",
       "bool[4]: 1 1 1 0\nbool[4]: 0 1 1 0\nbool[4]: 1 0 0 0");
  /* sizes and indices as values are i64 and convert to the float type around them */
  arg("f64[3]", "0 0 0");
  RUNS("fn f(X: f64[N]) -> f64[N] {\n  Y[i] = X[i] + i / N\n  return Y\n}",
       "f64[3]: 0 0 0");                                      /* i / N is integer division */
  arg("f64[3]", "0 0 0");
  RUNS("fn f(X: f64[N]) -> f64[N] {\n  Y[i] = X[i] + f64(i) / N\n  return Y\n}",
       "f64[3]: 0 0.33333333333333331 0.66666666666666663");
  arg("f32", "2.5");
  arg("f32", "4");
  RUNS("fn f(a: f32, b: f32) -> f32 {\n  c = a * b + 1\n  return c\n}", "f32: 11");
}
END_TEST

START_TEST(test_integer_division) {
  /* floor division and modulo, as in Python: the remainder has the divisor's sign */
  arg("i64[4]", "7 -7 7 -7");
  arg("i64[4]", "2 2 -2 -2");
  RUNS("fn f(A: i64[N], B: i64[N]) -> (i64[N], i64[N]) {\n  Q[i] = A[i] / B[i]\n  R[i] = A[i] % B[i]\n  return (Q, R)\n}",
       "i64[4]: 3 -4 -4 3\ni64[4]: 1 1 -1 -1");
  arg("i32[5]", "6 -6 1 -1 0");
  arg("i32[5]", "3 3 -3 -3 5");
  RUNS("fn f(A: i32[N], B: i32[N]) -> (i32[N], i32[N]) {\n  Q[i] = A[i] / B[i]\n  R[i] = A[i] % B[i]\n  return (Q, R)\n}",
       "i32[5]: 2 -2 -1 0 0\ni32[5]: 0 0 -2 -1 0");
  /* the most negative integer over -1 wraps instead of trapping */
  arg("i64[2]", "-9223372036854775808 -9223372036854775808");
  arg("i64[2]", "-1 1");
  RUNS("fn f(A: i64[N], B: i64[N]) -> (i64[N], i64[N]) {\n  Q[i] = A[i] / B[i]\n  R[i] = A[i] % B[i]\n  return (Q, R)\n}",
       "i64[2]: -9223372036854775808 -9223372036854775808\ni64[2]: 0 0");
  /* floats: / is true division, % is floored like Python's */
  arg("f64[4]", "-7.5 7.5 -7 7");
  arg("f64[4]", "2 -2 2 2");
  RUNS("fn f(A: f64[N], B: f64[N]) -> (f64[N], f64[N]) {\n  Q[i] = A[i] / B[i]\n  R[i] = A[i] % B[i]\n  return (Q, R)\n}",
       "f64[4]: -3.75 -3.75 -3.5 3.5\nf64[4]: 0.5 -0.5 1 1");
  /* a size expression divides the same way */
  arg("f32[7]", "0 0 0 0 0 0 0");
  RUNS("fn f(X: f32[N]) -> i64[N] {\n  Y[i] = (i - 3) / 2 + (i - 3) % 2 * 10\n  return Y\n}",
       "i64[7]: 8 -1 9 0 10 1 11");
}
END_TEST

START_TEST(test_division_by_zero) {
  arg("i64[3]", "1 2 3");
  arg("i64[3]", "1 0 1");
  ck_assert_str_eq(run("fn f(A: i64[N], B: i64[N]) -> i64[N] {\n  Q[i] = A[i] / B[i]\n  return Q\n}"),
                   "error: integer division by zero in A[i] / B[i]");
  arg("i32[2]", "1 2");
  arg("i32[2]", "3 0");
  ck_assert_str_eq(run("fn f(A: i32[N], B: i32[N]) -> i32[N] {\n  Q[i] = A[i] % B[i] + 1\n  return Q\n}"),
                   "error: integer modulo by zero in A[i] % B[i]");
  /* floats divide by zero to inf and nan, without an error */
  arg("f64[3]", "1 -1 0");
  RUNS("fn f(A: f64[N]) -> f64[N] {\n  Q[i] = A[i] / 0.0\n  return Q\n}", "f64[3]: inf -inf nan");
  /* a division in a branch no element takes is not evaluated */
  arg("i64[3]", "6 7 8");
  arg("i64[3]", "2 0 4");
  RUNS("fn f(A: i64[N], B: i64[N]) -> i64[N] {\n  Q[i] = where(B[i] != 0, A[i] / B[i], -1)\n  return Q\n}",
       "i64[3]: 3 -1 2");
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_reductions) {
  const char *prog =
    "fn r(X: f32[M, N]) -> (f32[M], f32[M], f32[N], f32[N], f32, f32) {\n"
    "  s[i]  = sum[j] X[i, j]\n"
    "  mx[i] = max[j] X[i, j]\n"
    "  mn[j] = min[i] X[i, j]\n"
    "  p[j]  = prod[i] X[i, j]\n"
    "  t     = sum[i, j] X[i, j] * X[i, j]\n"
    "  q     = (max[i, j] X[i, j]) - (min[i, j] X[i, j])\n"
    "  return (s, mx, mn, p, t, q)\n"
    "}";
  arg("f32[2, 3]", "1 -2 3  4 5 -6");
  RUNS(prog, "f32[2]: 2 3\nf32[2]: 3 5\nf32[3]: 1 -2 -6\nf32[3]: 4 -10 -18\nf32: 91\nf32: 11");
  /* over no elements: the identities */
  arg("f32[0, 3]", "");
  RUNS(prog, "f32[0]:\nf32[0]:\nf32[3]: inf inf inf\nf32[3]: 1 1 1\nf32: 0\nf32: -inf");
  /* integer reductions, and their identities */
  const char *iprog =
    "fn r(X: i32[N]) -> (i32, i32, i32, i32) {\n"
    "  s = sum[i] X[i]\n  a = max[i] X[i]\n  b = min[i] X[i]\n  p = prod[i] X[i]\n"
    "  return (s, a, b, p)\n}";
  arg("i32[4]", "3 -7 2 5");
  RUNS(iprog, "i32: 3\ni32: 5\ni32: -7\ni32: -210");
  arg("i32[0]", "");
  RUNS(iprog, "i32: 0\ni32: -2147483648\ni32: 2147483647\ni32: 1");
  /* a nan wins max and min */
  arg("f64[3]", "1 nan 3");
  RUNS("fn r(X: f64[N]) -> (f64, f64) {\n  a = max[i] X[i]\n  b = min[i] X[i]\n  return (a, b)\n}",
       "f64: nan\nf64: nan");
  /* a reduction nested in a reduction, over a triangle */
  arg("f64[3, 3]", "1 2 3  4 5 6  7 8 9");
  RUNS("fn r(X: f64[N, N]) -> f64 {\n  t = sum[i] max[j] where(j <= i, X[i, j], 0.0)\n  return t\n}",
       "f64: 15");
}
END_TEST

START_TEST(test_long_rows) {
  /* more elements than one strip of the evaluator, and a prime count of them */
  enum { N = 1031 };
  Buf v = {0};
  for (int i = 0; i < N; i++) buf_printf(&v, "%d ", i % 7 - 3);
  arg("i64[1031]", v.s);
  int64_t s = 0, mx = -100;
  Buf w = {0};
  buf_puts(&w, "i64[1031]:");
  for (int i = 0; i < N; i++) {
    int64_t x = i % 7 - 3;
    s += x * i;
    if (x * i > mx) mx = x * i;
    buf_printf(&w, " %lld", (long long)(x * i));
  }
  buf_printf(&w, "\ni64: %lld\ni64: %lld", (long long)s, (long long)mx);
  RUNS("fn f(X: i64[N]) -> (i64[N], i64, i64) {\n  Y[i] = X[i] * i\n  s = sum[i] X[i] * i\n  m = max[i] Y[i]\n  return (Y, s, m)\n}", w.s);
  buf_free(&v);
  buf_free(&w);
}
END_TEST

/* ---- where ---- */

START_TEST(test_where_chosen_branch_only) {
  /* an index that is out of bounds only where the other branch is taken */
  arg("f32[3]", "10 20 30");
  arg("i64[5]", "2 7 0 -1 1");
  RUNS("fn g(X: f32[N], I: i64[M]) -> f32[M] {\n"
       "  Y[j] = where(I[j] >= 0 and I[j] < N, X[I[j]], -1.0)\n"
       "  return Y\n}",
       "f32[5]: 30 -1 10 -1 20");
  /* the same with a subscript that does not vary along the row */
  arg("f32[3]", "10 20 30");
  arg("i64", "99");
  RUNS("fn g(X: f32[N], K: i64) -> f32[N] {\n  Y[i] = where(i > N, X[K], X[i])\n  return Y\n}",
       "f32[3]: 10 20 30");
  /* a uniform condition picks one branch for the whole row */
  arg("f32[3]", "1 2 3");
  arg("i64", "5");
  RUNS("fn g(X: f32[N], K: i64) -> f32[N] {\n  Y[i] = where(K > 3, X[i], X[K])\n  return Y\n}",
       "f32[3]: 1 2 3");
  /* nested wheres */
  arg("f64[6]", "-3 -1 0 1 3 9");
  RUNS("fn c(X: f64[N]) -> f64[N] {\n  Y[i] = where(X[i] < -2.0, -2.0, where(X[i] > 2.0, 2.0, X[i]))\n  return Y\n}",
       "f64[6]: -2 -1 0 1 2 2");
  /* the padding example of lang/reference.md section 6 */
  arg("f32[3]", "1 2 3");
  arg("i64", "2");
  RUNS("fn pad(X: f32[H], P: size) -> f32[H + 2*P] {\n"
       "  Y[i] = where(i >= P and i < H + P, X[i - P], 0.0)\n  return Y\n}",
       "f32[7]: 0 0 1 2 3 0 0");
}
END_TEST

START_TEST(test_inlined_subscripts) {
  /* a producer inlined at a subscript used several times: each use computes the same value */
  arg("f32[5]", "1 -1 1 1 -1");
  RUNS("fn f(X: f32[N]) -> i64[N - 1] {\n"
       "  P[i] = where(X[i] > 0.0, i, i * 2)\n"
       "  C[j] = P[j + 1]\n"
       "  return C\n}",
       "i64[4]: 2 2 3 8");
}
END_TEST

/* ---- casts ---- */

START_TEST(test_casts) {
  arg("f64[9]", "2.7 -2.7 3e9 -3e9 nan inf -inf 2147483647.5 -0.5");
  RUNS("fn c(X: f64[N]) -> (i32[N], i64[N], bool[N]) {\n"
       "  A[i] = i32(X[i])\n  B[i] = i64(X[i])\n  C[i] = bool(X[i])\n  return (A, B, C)\n}",
       "i32[9]: 2 -2 2147483647 -2147483648 0 2147483647 -2147483648 2147483647 0\n"
       "i64[9]: 2 -2 3000000000 -3000000000 0 9223372036854775807 -9223372036854775808 2147483647 0\n"
       "bool[9]: 1 1 1 1 1 1 1 1 1");
  arg("f64[3]", "9.2e18 9.3e18 -9.3e18");
  RUNS("fn c(X: f64[N]) -> i64[N] {\n  A[i] = i64(X[i])\n  return A\n}",
       "i64[3]: 9200000000000000000 9223372036854775807 -9223372036854775808");
  /* integer to integer wraps; integer to float rounds; float to float rounds */
  arg("i64[3]", "4294967297 -1 16777217");
  RUNS("fn c(X: i64[N]) -> (i32[N], f32[N], bool[N]) {\n"
       "  A[i] = i32(X[i])\n  B[i] = f32(X[i])\n  C[i] = bool(X[i] - 16777217)\n  return (A, B, C)\n}",
       "i32[3]: 1 -1 16777217\nf32[3]: 4.2949673e+09 -1 16777216\nbool[3]: 1 1 0");
  arg("f64[2]", "0.1 1e40");
  RUNS("fn c(X: f64[N]) -> f64[N] {\n  A[i] = f64(f32(X[i]))\n  return A\n}",
       "f64[2]: 0.10000000149011612 inf");
  arg("bool[2]", "1 0");
  RUNS("fn c(X: bool[N]) -> (f32[N], i32[N]) {\n  A[i] = f32(X[i]) * 2.5\n  B[i] = i32(X[i]) - 1\n  return (A, B)\n}",
       "f32[2]: 2.5 0\ni32[2]: 0 -1");
}
END_TEST

/* ---- math functions (lang/ops.def) ---- */

/* The value of every function of lang/ops.def at a few points where it is known exactly. */
static const struct { const char *name; const char *args; const char *want; } math[] = {
  {"exp",     "0 1 -inf",        "f64[3]: 1 2.7182818284590451 0"},
  {"log",     "1 0 -1",          "f64[3]: 0 -inf nan"},
  {"sqrt",    "4 2.25 -1",       "f64[3]: 2 1.5 nan"},
  {"rsqrt",   "4 0.25 0",        "f64[3]: 0.5 2 inf"},
  {"abs",     "-3 2.5 -0",       "f64[3]: 3 2.5 0"},
  {"sin",     "0 -0 1.5707963267948966", "f64[3]: 0 -0 1"},
  {"cos",     "0 3.141592653589793 -0", "f64[3]: 1 -1 1"},
  {"tanh",    "0 inf -inf",      "f64[3]: 0 1 -1"},
  {"sigmoid", "0 inf -inf",      "f64[3]: 0.5 1 0"},
  {"erf",     "0 inf -inf",      "f64[3]: 0 1 -1"},
  {"floor",   "-2.5 2.5 3",      "f64[3]: -3 2 3"},
  {"ceil",    "-2.5 2.5 3",      "f64[3]: -2 3 3"},
  {"round",   "2.5 3.5 -2.5",    "f64[3]: 2 4 -2"},       /* half to even, as NumPy */
  {"max",     "1 -2 nan",        "f64[3]: 1 0.5 nan"},    /* with 0.5 */
  {"min",     "1 -2 nan",        "f64[3]: 0.5 -2 nan"},
  {"pow",     "2 4 -8",          "f64[3]: 1.4142135623730951 2 nan"},
};

START_TEST(test_math_functions) {
  /* every function row of lang/ops.def has its expectations above */
  static const struct { const char *s; int arity; } ops[] = {
#define OP(E, s, arity, kind, prec) {s, arity},
#include "../../lang/ops.def"
#undef OP
  };
  int tested = 0;
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    const char *nm = ops[o].s;
    if (!((nm[0] >= 'a' && nm[0] <= 'z')) || !strcmp(nm, "and") || !strcmp(nm, "or") || !strcmp(nm, "not"))
      continue;                                /* operators: tested elsewhere */
    size_t m = 0;
    while (m < sizeof math / sizeof math[0] && strcmp(math[m].name, nm)) m++;
    ck_assert_msg(m < sizeof math / sizeof math[0], "no test for the math function %s", nm);
    char prog[256];
    if (ops[o].arity == 1)
      snprintf(prog, sizeof prog, "fn f(X: f64[N]) -> f64[N] {\n  Y[i] = %s(X[i])\n  return Y\n}", nm);
    else
      snprintf(prog, sizeof prog, "fn f(X: f64[N]) -> f64[N] {\n  Y[i] = %s(X[i], 0.5)\n  return Y\n}", nm);
    arg("f64[3]", math[m].args);
    ck_assert_msg(!strcmp(run(prog), math[m].want), "%s: %s, not %s", nm, out.s, math[m].want);
    tested++;
  }
  ck_assert_int_eq(tested, (int)(sizeof math / sizeof math[0]));
  /* on integers: abs, max, min, floor, ceil, round keep the type */
  arg("i64[3]", "-3 0 7");
  RUNS("fn f(X: i64[N]) -> (i64[N], i64[N], i64[N], i64[N]) {\n"
       "  A[i] = abs(X[i])\n  B[i] = max(X[i], 1)\n  C[i] = min(X[i], 1)\n  D[i] = floor(X[i]) + ceil(X[i]) + round(X[i])\n"
       "  return (A, B, C, D)\n}",
       "i64[3]: 3 0 7\ni64[3]: 1 1 7\ni64[3]: -3 0 1\ni64[3]: -9 0 21");
  /* f32 results are rounded to f32 */
  arg("f32[2]", "1 2");
  RUNS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = exp(X[i]) + sqrt(X[i])\n  return Y\n}",
       "f32[2]: 3.71828175 8.80326939");
}
END_TEST

START_TEST(test_operators) {
  arg("f64[4]", "2 -3 0.5 9");
  RUNS("fn f(X: f64[N]) -> (f64[N], f64[N], f64[N], bool[N]) {\n"
       "  P[i] = X[i] ** 2 - -X[i]\n"
       "  Q[i] = 2.0 ** 3.0 ** 2.0 + X[i] * 0\n"
       "  R[i] = (X[i] + 1) * (X[i] - 1) / 4 % 2\n"
       "  S[i] = X[i] >= 0.5 and X[i] != 9.0 or X[i] < -2.0\n"
       "  return (P, Q, R, S)\n}",
       "f64[4]: 6 6 0.75 90\nf64[4]: 512 512 512 512\nf64[4]: 0.75 0 1.8125 0\nbool[4]: 1 1 1 0");
}
END_TEST

/* ---- run-time errors ---- */

START_TEST(test_out_of_bounds) {
  const char *prog = "fn g(X: f32[N], I: i64[M]) -> f32[M] {\n  Y[j] = X[I[j]] * 2.0\n  return Y\n}";
  arg("f32[3]", "1 2 3");
  arg("i64[4]", "0 2 5 1");
  ck_assert_str_eq(run(prog), "error: I[2] = 5 is out of range for axis 0 of X (size 3)");
  ck_assert_str_eq(msgs.s, "t.dyn:2:10: error: I[2] = 5 is out of range for axis 0 of X (size 3)\n"
                           "  2 |   Y[j] = X[I[j]] * 2.0\n"
                           "    |          ^~~~~~~\n");
  arg("f32[3]", "1 2 3");
  arg("i64[2]", "-1 0");
  ck_assert_str_eq(run(prog), "error: I[0] = -1 is out of range for axis 0 of X (size 3)");
  /* an index computed from data is named as the access, with the subscript's value */
  arg("f32[3]", "1 2 3");
  arg("i64[2]", "0 2");
  ck_assert_str_eq(run("fn g1(X: f32[N], I: i64[M]) -> f32[M] {\n  Y[j] = X[I[j] + 1]\n  return Y\n}"),
                   "error: X[I[j] + 1] is out of bounds: subscript 0 is 3 but dimension 0 of X is 3");
  /* in range: no error */
  arg("f32[3]", "1 2 3");
  arg("i64[2]", "2 0");
  RUNS(prog, "f32[2]: 6 2");
  /* a checked access with a second subscript, inside a reduction */
  arg("f64[2, 3]", "1 2 3 4 5 6");
  ck_assert_str_eq(run("fn h(X: f64[R, C]) -> f64[R] {\n  Y[r] = sum[c] X[r, c] * X[r, c * c]\n  return Y\n}"),
                   "error: X[r, c * c] is out of bounds: subscript 1 is 4 but dimension 1 of X is 3");
  ck_assert_ptr_nonnull(strstr(msgs.s, "t.dyn:2:27: error: X[r, c * c] is out of bounds"));
}
END_TEST

START_TEST(test_interrupt) {
  volatile int stop = 1;
  arg("f32[4, 4]", "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1");
  ck_assert_str_eq(run_ex("fn s(X: f32[M, N]) -> f32[M] {\n  Y[i] = sum[j] X[i, j]\n  return Y\n}", &stop),
                   "error: interrupted");
  stop = 1;
  Buf ones = {0};
  for (int i = 0; i < 600; i++) buf_puts(&ones, "1 ");
  arg("f32[600]", ones.s);
  buf_free(&ones);
  ck_assert_str_eq(run_ex("fn e(X: f32[N]) -> f32[N] {\n  Y[i] = X[i] + 1.0\n  return Y\n}", &stop),
                   "error: interrupted");
  stop = 0;
  arg("f32[2]", "1 2");
  ck_assert_str_eq(run_ex("fn e(X: f32[N]) -> f32[N] {\n  Y[i] = X[i] + 1.0\n  return Y\n}", &stop), "f32[2]: 2 3");
}
END_TEST

/* ---- shapes ---- */

START_TEST(test_shapes) {
  const char *mm =
    "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n  C[i, j] = sum[k] A[i, k] * B[k, j]\n  return C\n}";
  /* a zero dimension: empty results, or sums of nothing */
  arg("f32[0, 3]", "");
  arg("f32[3, 2]", "1 2 3 4 5 6");
  RUNS(mm, "f32[0, 2]:");
  arg("f32[2, 0]", "");
  arg("f32[0, 2]", "");
  RUNS(mm, "f32[2, 2]: 0 0 0 0");
  /* sizes of 1 */
  arg("f32[1, 1]", "3");
  arg("f32[1, 1]", "-2");
  RUNS(mm, "f32[1, 1]: -6");
  /* primes: 2 x 3 times 3 x 5 */
  arg("f32[2, 3]", "1 2 3  4 5 6");
  arg("f32[3, 5]", "1 0 0 1 2  0 1 0 1 3  0 0 1 1 5");
  RUNS(mm, "f32[2, 5]: 1 2 3 6 23 4 5 6 15 53");
  /* softmax of one element, of a row of 7 equal ones, and of a 1 x 3 row */
  const char *sm =
    "fn softmax(X: f32[B, N]) -> f32[B, N] {\n"
    "  m[b]    = max[n] X[b, n]\n  e[b, n] = exp(X[b, n] - m[b])\n"
    "  s[b]    = sum[n] e[b, n]\n  Y[b, n] = e[b, n] / s[b]\n  return Y\n}";
  arg("f32[1, 1]", "42");
  RUNS(sm, "f32[1, 1]: 1");
  arg("f32[2, 7]", "3 3 3 3 3 3 3  -1 -1 -1 -1 -1 -1 -1");
  RUNS(sm, "f32[2, 7]: 0.142857149 0.142857149 0.142857149 0.142857149 0.142857149 0.142857149 0.142857149 "
           "0.142857149 0.142857149 0.142857149 0.142857149 0.142857149 0.142857149 0.142857149");
  arg("f32[1, 2]", "1000 1000");       /* stable: the row maximum is subtracted first */
  RUNS(sm, "f32[1, 2]: 0.5 0.5");
  arg("f32[0, 4]", "");
  RUNS(sm, "f32[0, 4]:");
  /* a conv over H - R + 1 with H = R: one output */
  arg("f32[3]", "1 2 3");
  arg("f32[3]", "1 0 -1");
  RUNS("fn conv(X: f32[H], Wt: f32[R]) -> f32[H - R + 1] {\n  O[h] = sum[r] X[h + r] * Wt[r]\n  return O\n}",
       "f32[1]: -2");
  arg("f32[5]", "1 2 3 4 5");
  arg("f32[2]", "1 -1");
  RUNS("fn conv(X: f32[H], Wt: f32[R]) -> f32[H - R + 1] {\n  O[h] = sum[r] X[h + r] * Wt[r]\n  return O\n}",
       "f32[4]: -1 -1 -1 -1");
}
END_TEST

START_TEST(test_calls_and_tall_expressions) {
  /* a function calling another, twice: the two results must stay apart */
  arg("f32[2, 2]", "1 2 3 4");
  arg("f32[2, 2]", "0 1 1 0");
  arg("f32[2, 2]", "2 0 0 3");
  RUNS("fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n  C[i, j] = sum[k] A[i, k] * B[k, j]\n  return C\n}\n"
       "fn mm3(A: f32[P, Q], B: f32[Q, R], C: f32[R, S]) -> f32[P, S] {\n"
       "  T = matmul(A, B)\n  U = matmul(T, C)\n  return U\n}",
       "f32[2, 2]: 4 3 8 9");
  /* a chain of definitions as tall as the parser allows each: evaluated, no overflow */
  Buf t = {0};
  buf_puts(&t, "fn tall(X: i64[N]) -> i64[N] {\n  Y0[i] = X[i]\n");
  for (int k = 1; k <= 8; k++) {
    buf_printf(&t, "  Y%d[i] = Y%d[i]", k, k - 1);
    for (int j = 0; j < 900; j++) buf_puts(&t, " + 1");
    buf_putc(&t, '\n');
  }
  buf_puts(&t, "  return Y8\n}");
  arg("i64[3]", "0 1 2");
  RUNS(t.s, "i64[3]: 7200 7201 7202");
  buf_free(&t);
}
END_TEST

/* session_call, the embedders' entry: the function by name, found again after another was
 * called and after it was redefined; an unknown name and a wrong shape are errors. */
static double call1(Session *s, const char *name, Tensor *x, Buf *err) {
  Tensor *out = NULL;
  buf_free(err);
  if (!session_call(s, name, &x, 1, &out, 1, err)) return NAN;
  double v = tensor_get_f64(out, 0);
  tensor_release(out);
  return v;
}

START_TEST(test_session_call) {
  SessionOptions opt = { .target = "ref", .threads = 1, .no_prelude = true };
  FILE *sink = fopen("/dev/null", "w");
  Session *s = session_new(&opt, sink, sink);
  ck_assert_int_eq(session_run(s, "fn twice(X: f32[N]) -> f32[N] { Y[i] = X[i] * 2.0; return Y }", "t"), RUN_OK);
  ck_assert_int_eq(session_run(s, "fn plus(X: f32[N]) -> f32[N] { Y[i] = X[i] + 1.0; return Y }", "t"), RUN_OK);
  char e[128];
  int64_t n = 3;
  Tensor *x = tensor_new(DYN_F32, 1, &n, e, sizeof e), *m = tensor_new(DYN_F32, 0, NULL, e, sizeof e);
  tensor_set_f64(x, 0, 5);
  Buf err = { 0 };
  ck_assert(call1(s, "twice", x, &err) == 10);
  ck_assert(call1(s, "twice", x, &err) == 10);
  ck_assert(call1(s, "plus", x, &err) == 6);
  ck_assert_int_eq(session_run(s, "fn twice(X: f32[N]) -> f32[N] { Y[i] = X[i] * 3.0; return Y }", "t"), RUN_OK);
  ck_assert(call1(s, "twice", x, &err) == 15);      /* the new definition */
  ck_assert(isnan(call1(s, "thrice", x, &err)));
  ck_assert_str_eq(err.s, "no function named 'thrice'");
  ck_assert(isnan(call1(s, "twic", x, &err)));
  ck_assert(isnan(call1(s, "twice", m, &err)));      /* a scalar for f32[N] */
  ck_assert_msg(strstr(err.s, "parameter X is f32[N]"), "%s", err.s);
  ck_assert(call1(s, "plus", x, &err) == 6);
  buf_free(&err);
  tensor_release(x);
  tensor_release(m);
  session_free(s);
  fclose(sink);
}
END_TEST

/* A compiled row-wise kernel's per-row locals come from a scratch that its threads keep
 * between calls, so calls on one shape after the first take no page faults for them.  They
 * were allocated for each task, and glibc's heap then grew and shrank by a few hundred KB
 * on every call: softmax over 2 x 50257 took 180 faults and 1.8 ms a call in most
 * processes (25 us otherwise).  Without the CPU back end there is nothing to check. */
START_TEST(test_row_scratch) {
  SessionOptions opt = { .target = "cpu", .threads = 2 };
  FILE *sink = fopen("/dev/null", "w");
  Session *s = session_new(&opt, sink, sink);
  if (session_run(s, ":target cpu", "t") == RUN_OK) {
    char e[128];
    int64_t shape[2] = { 2, 50257 };
    Tensor *x = tensor_new(DYN_F32, 2, shape, e, sizeof e);
    float *px = tensor_data(x);
    for (int64_t i = 0; i < shape[0] * shape[1]; i++) px[i] = (float)(i % 7) * 0.1f;
    struct rusage r0, r1;
    int calls = 40;
    for (int i = 0; i < 5 + calls; i++) {
      if (i == 5) getrusage(RUSAGE_SELF, &r0);
      Tensor *y = NULL;
      Buf err = { 0 };
      ck_assert_msg(session_call(s, "softmax", &x, 1, &y, 1, &err), "%s", err.s);
      /* every row sums to 1 */
      const float *py = tensor_data(y);
      double sum = 0;
      for (int64_t j = 0; j < shape[1]; j++) sum += py[shape[1] + j];
      ck_assert_msg(fabs(sum - 1) < 1e-4, "row sum %g", sum);
      tensor_release(y);
      buf_free(&err);
    }
    getrusage(RUSAGE_SELF, &r1);
    long faults = r1.ru_minflt - r0.ru_minflt;
#if !ASAN                            /* AddressSanitizer's allocator quarantines freed memory,
                                         so every result lands on fresh pages there */
    ck_assert_msg(faults < 10L * calls, "%ld page faults in %d calls", faults, calls);
#else
    (void)faults;
#endif
    tensor_release(x);
  }
  session_free(s);
  fclose(sink);
}
END_TEST

/* Long rows on the compiled CPU path against sums taken in f64 here: softmax and
 * layernorm over one row of 3,000,017 elements (a prime) and log_softmax over 2 rows.
 * Their fused sums once carried the row's running total in one lane of every strip's
 * vector loop, and softmax's result was then 8e-6 off (2e-4 at 9,000,001 elements); the
 * bound here is 1e-6 of each element.  Layernorm's mean is a plain vectorised sum, each of
 * its 64 lanes a sequential sum of n / 64 elements (2e-6 off here), so its bound is 1e-5.
 * Without the CPU back end there is nothing to check. */
static double worst_rel(const float *y, const double *ref, int64_t n) {
  double w = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)y[i] - ref[i]) / fmax(fabs(ref[i]), 1e-30);
    if (d > w) w = d;
  }
  return w;
}

START_TEST(test_long_row_sums) {
  SessionOptions opt = { .target = "cpu", .threads = 2 };
  FILE *sink = fopen("/dev/null", "w");
  Session *s = session_new(&opt, sink, sink);
  if (session_run(s, ":target cpu", "t") == RUN_OK) {
    enum { N = 3000017 };
    char e[128];
    int64_t shape[2] = { 2, N }, one = N;
    Tensor *x = tensor_new(DYN_F32, 2, shape, e, sizeof e);
    Tensor *g = tensor_new(DYN_F32, 1, &one, e, sizeof e), *bt = tensor_new(DYN_F32, 1, &one, e, sizeof e);
    float *px = tensor_data(x), *pg = tensor_data(g), *pb = tensor_data(bt);
    uint32_t seed = 12345;
    for (int64_t i = 0; i < 2 * (int64_t)N; i++) {
      seed = seed * 1103515245u + 12345u;
      px[i] = (float)((seed >> 8) & 0xFFFF) / 65536.0f;
    }
    for (int64_t i = 0; i < N; i++) pg[i] = 1, pb[i] = 0;
    double *ref = malloc(sizeof(double) * 2 * N);
    for (int r = 0; r < 2; r++) {          /* softmax and log_softmax of row r, in f64 */
      const float *row = px + (int64_t)r * N;
      double m = -INFINITY, sum = 0, mean = 0, var = 0;
      for (int64_t i = 0; i < N; i++) m = fmax(m, row[i]);
      for (int64_t i = 0; i < N; i++) sum += exp(row[i] - m), mean += row[i];
      mean /= N;
      for (int64_t i = 0; i < N; i++) var += (row[i] - mean) * (row[i] - mean);
      var /= N;
      double *out = ref + (int64_t)r * N;
      Tensor *y = NULL;
      Buf err = { 0 };
      if (r == 0) {                        /* softmax and layernorm of the first row alone */
        int64_t s1[2] = { 1, N };
        Tensor *x1 = tensor_new(DYN_F32, 2, s1, e, sizeof e);
        memcpy(tensor_data(x1), row, sizeof(float) * N);
        for (int64_t i = 0; i < N; i++) out[i] = exp(row[i] - m) / sum;
        ck_assert_msg(session_call(s, "softmax", &x1, 1, &y, 1, &err), "%s", err.s);
        double w = worst_rel(tensor_data(y), out, N);
        ck_assert_msg(w < 1e-6, "softmax over %d elements: %g of an element off", N, w);
        tensor_release(y);
        for (int64_t i = 0; i < N; i++) out[i] = (row[i] - mean) / sqrt(var + 1e-5);
        Tensor *args[3] = { x1, g, bt };
        ck_assert_msg(session_call(s, "layernorm", args, 3, &y, 1, &err), "%s", err.s);
        const float *py = tensor_data(y);
        double wl = 0;            /* against the largest, as elements near the mean are 0 */
        for (int64_t i = 0; i < N; i++) wl = fmax(wl, fabs(py[i] - out[i]) / sqrt(3.0));
        ck_assert_msg(wl < 1e-5, "layernorm over %d elements: %g off", N, wl);
        tensor_release(y);
        tensor_release(x1);
      }
      for (int64_t i = 0; i < N; i++) out[i] = row[i] - m - log(sum);
    }
    Tensor *y = NULL;
    Buf err = { 0 };
    ck_assert_msg(session_call(s, "log_softmax", &x, 1, &y, 1, &err), "%s", err.s);
    const float *py = tensor_data(y);
    double w = 0;                      /* log_softmax: against its magnitude, about 15 */
    for (int64_t i = 0; i < 2 * (int64_t)N; i++) w = fmax(w, fabs(py[i] - ref[i]) / 15);
    ck_assert_msg(w < 1e-6, "log_softmax over 2 x %d elements: %g off", N, w);
    tensor_release(y);
    buf_free(&err);
    free(ref);
    tensor_release(x);
    tensor_release(g);
    tensor_release(bt);
  }
  session_free(s);
  fclose(sink);
}
END_TEST

static Suite *eval_suite(void) {
  Suite *s = suite_create("eval");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_element_types);
  tcase_add_test(tc, test_integer_division);
  tcase_add_test(tc, test_division_by_zero);
  tcase_add_test(tc, test_reductions);
  tcase_add_test(tc, test_long_rows);
  tcase_add_test(tc, test_where_chosen_branch_only);
  tcase_add_test(tc, test_inlined_subscripts);
  tcase_add_test(tc, test_casts);
  tcase_add_test(tc, test_math_functions);
  tcase_add_test(tc, test_operators);
  tcase_add_test(tc, test_out_of_bounds);
  tcase_add_test(tc, test_interrupt);
  tcase_add_test(tc, test_shapes);
  tcase_add_test(tc, test_calls_and_tall_expressions);
  tcase_add_test(tc, test_session_call);
  tcase_add_test(tc, test_row_scratch);
  tcase_add_test(tc, test_long_row_sums);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(eval_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
