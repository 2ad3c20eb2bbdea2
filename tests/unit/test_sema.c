/* test_sema.c -- unit tests for sema.c, the type checker.  A small harness parses a source,
 * runs sema_function on each fn in order (a function sees the ones before it, as in a
 * session) and prints, per function, its signature (func_signature) or "error"; the
 * diagnostics are compared exactly as diag_format prints them.  So the tests pin types,
 * canonical sizes, range inference, bounds proofs and messages as users see them. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static Arena *arena;
static PolyCtx *pc;
static Diags diags;
static Source src;
static Buf out, msgs;
static Func *fns[32];
static int nfns;

static void setup(void) {
  arena = arena_new();
  pc = poly_ctx_new();
  memset(&diags, 0, sizeof diags);
  nfns = 0;
}

/* Every function lives in the one arena of the test, freed here (never with func_free). */
static void teardown(void) {
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

/* Check every function of text: one line per function, its signature or "NAME: error".
 * The diagnostics (errors and warnings) are left in msgs. */
static const char *check(const char *text) {
  diag_clear(&diags);
  nfns = 0;
  src.name = "t.dyn";
  src.len = strlen(text);
  src.text = arena_strndup(arena, text, src.len);
  int n = 0;
  bool inc = false;
  Stmt **st = parse_source(arena, &src, &diags, &n, &inc);
  ck_assert_msg(diags.nerrors == 0, "the test program does not parse");
  buf_free(&out);
  buf_puts(&out, "");
  SemaEnv env = {pc, lookup, NULL};
  for (int i = 0; i < n; i++) {
    if (st[i]->kind != ST_FN) continue;
    Func *f = sema_function(&env, st[i]->fn, arena, &diags);
    if (out.len) buf_putc(&out, '\n');
    if (f) {
      func_signature(f, &out);
      ck_assert_int_lt(nfns, 32);
      fns[nfns++] = f;
    } else {
      buf_printf(&out, "%s: error", st[i]->fn->name);
    }
  }
  buf_free(&msgs);
  buf_puts(&msgs, "");
  for (Diag *d = diags.head; d; d = d->next) diag_format(d, &msgs);
  return out.s;
}

#define CHECKS(text, sig) do { ck_assert_str_eq(check(text), sig); ck_assert_str_eq(msgs.s, ""); } while (0)
#define FAILS(text, sig, diag) do { ck_assert_str_eq(check(text), sig); ck_assert_str_eq(msgs.s, diag); } while (0)

static const char *MATMUL =
  "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
  "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
  "  return C\n"
  "}\n";

/* ---- signatures and sizes ---- */

START_TEST(test_signatures) {
  CHECKS(MATMUL, "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N]");
  CHECKS("fn softmax(X: f32[B, N]) -> f32[B, N] {\n"
         "  m[b]    = max[n] X[b, n]\n"
         "  e[b, n] = exp(X[b, n] - m[b])\n"
         "  s[b]    = sum[n] e[b, n]\n"
         "  Y[b, n] = e[b, n] / s[b]\n"
         "  return Y\n"
         "}",
         "fn softmax(X: f32[B, N]) -> f32[B, N]");
  /* tuple returns, scalar parameters, facts, a size parameter, an inferred return type */
  CHECKS("fn stats(X: f32[N], eps: f32) -> (f32, f32) where N >= 1 {\n"
         "  m = (sum[i] X[i]) / N\n"
         "  v = (sum[i] (X[i] - m) * (X[i] - m)) / N + eps\n"
         "  return (m, v)\n"
         "}",
         "fn stats(X: f32[N], eps: f32) -> (f32, f32) where N >= 1");
  CHECKS("fn pad(X: f32[H, W], P: size) -> f32[H + 2*P, W + 2*P] {\n"
         "  Y[i, j] = where(i >= P and i < H + P and j >= P and j < W + P, X[i - P, j - P], 0.0)\n"
         "  return Y\n"
         "}",
         "fn pad(X: f32[H, W], P: size) -> f32[H + 2*P, 2*P + W]");
  CHECKS("fn twice(X: f64[N, 3]) {\n  Y[i, j] = 2 * X[i, j]\n  return Y\n}",
         "fn twice(X: f64[N, 3]) -> f64[N, 3]");
  CHECKS("fn col(X: i32[R, C]) -> i64[R] {\n  Y[r] = sum[c] i64(X[r, c])\n  return Y\n}",
         "fn col(X: i32[R, C]) -> i64[R]");
  CHECKS("fn scalar(a: f32, b: f32) -> f32 {\n  c = a * b + 1\n  return c\n}",
         "fn scalar(a: f32, b: f32) -> f32");
  CHECKS("fn flag(X: f32[N]) -> bool[N] {\n  Y[i] = X[i] > 0.0 and not X[i] > 1.0\n  return Y\n}",
         "fn flag(X: f32[N]) -> bool[N]");
}
END_TEST

START_TEST(test_canonical_sizes) {
  /* dimensions compare in canonical form: N + 1 is 1 + N, 2 * (N + 1) is 2 * N + 2 */
  CHECKS("fn f(X: f32[N], Y: f32[N + 1]) -> f32[1 + N] {\n  Z[i] = Y[i]\n  return Z\n}",
         "fn f(X: f32[N], Y: f32[N + 1]) -> f32[N + 1]");
  CHECKS("fn g(X: f32[N], Y: f32[2 * (N + 1)]) -> f32[2*N + 2] {\n  Z[i] = Y[i]\n  return Z\n}",
         "fn g(X: f32[N], Y: f32[2*N + 2]) -> f32[2*N + 2]");
  CHECKS("fn h(A: f32[M, K], B: f32[K * M]) -> f32[M * K] {\n  Z[i] = B[i]\n  return Z\n}",
         "fn h(A: f32[M, K], B: f32[K*M]) -> f32[K*M]");
  /* N + 1 is not N + 2 */
  FAILS("fn f(X: f32[N], Y: f32[N + 1]) -> f32[N + 2] {\n  Z[i] = Y[i]\n  return Z\n}",
        "f: error",
        "t.dyn:3:10: error: 'Z' is f32[N + 1] but the function returns f32[N + 2]\n"
        "  3 |   return Z\n"
        "    |          ^\n"
        "t.dyn:1:35: note: the return type is declared here\n");
  /* a size used alone binds it; the same name elsewhere must agree */
  CHECKS("fn sq(A: f32[N, N]) -> f32[N] {\n  d[i] = A[i, i]\n  return d\n}",
         "fn sq(A: f32[N, N]) -> f32[N]");
}
END_TEST

/* ---- names ---- */

START_TEST(test_names) {
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i] + Z[i]\n  return Y\n}",
        "f: error",
        "t.dyn:2:17: error: undefined name 'Z'\n"
        "  2 |   Y[i] = X[i] + Z[i]\n"
        "    |                 ^\n");
  FAILS("fn f(X: f32[N]) -> f32 {\n  s = q * 2.0\n  return s\n}",
        "f: error",
        "t.dyn:2:7: error: undefined name 'q'\n"
        "  2 |   s = q * 2.0\n"
        "    |       ^\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  Y[i] = X[i] * 2.0\n  return Y\n}",
        "f: error",
        "t.dyn:3:3: error: 'Y' is already defined\n"
        "  3 |   Y[i] = X[i] * 2.0\n"
        "    |   ^\n"
        "t.dyn:2:3: note: 'Y' was defined here\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  X[i] = 1.0\n  return X\n}",
        "f: error",
        "t.dyn:2:3: error: 'X' is already defined\n"
        "  2 |   X[i] = 1.0\n"
        "    |   ^\n"
        "t.dyn:1:6: note: 'X' was defined here\n");
  FAILS("fn f(X: f32[N], X: f32[N]) -> f32[N] {\n  return X\n}",
        "f: error",
        "t.dyn:1:17: error: parameter 'X' appears twice\n"
        "  1 | fn f(X: f32[N], X: f32[N]) -> f32[N] {\n"
        "    |                 ^\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[N] = X[N]\n  return Y\n}",
        "f: error",
        "t.dyn:2:5: error: index 'N' has the name of a size; choose another name\n"
        "  2 |   Y[N] = X[N]\n"
        "    |     ^\n");
  FAILS("fn f(X: f32[N, N]) -> f32[N, N] {\n  Y[i, i] = X[i, i]\n  return Y\n}",
        "f: error",
        "t.dyn:2:8: error: index 'i' appears twice\n"
        "  2 |   Y[i, i] = X[i, i]\n"
        "    |        ^\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n}",
        "f: error",
        "t.dyn:1:4: error: function 'f' has no return statement\n"
        "  1 | fn f(X: f32[N]) -> f32[N] {\n"
        "    |    ^\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  return X\n  Y[i] = X[i]\n}",
        "f: error",
        "t.dyn:2:3: error: return must be the last statement of a function\n"
        "  2 |   return X\n"
        "    |   ^~~~~~~~\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  X[0]\n  return X\n}",
        "f: error",
        "t.dyn:2:3: error: an expression statement (define a tensor: T[i] = ...) is not allowed in a function body\n"
        "  2 |   X[0]\n"
        "    |   ^~~~\n");
}
END_TEST

START_TEST(test_undefined_before_range) {
  /* an undefined tensor is named as such, even when it was the only source of a range */
  FAILS("fn f(X: f32[N]) -> f32 {\n  T[i] = Z[i]\n  s = sum[i] T[i]\n  return s\n}",
        "f: error",
        "t.dyn:2:10: error: undefined name 'Z'\n"
        "  2 |   T[i] = Z[i]\n"
        "    |          ^\n");
  FAILS("fn f(X: f32[N]) -> f32 {\n  T[i] = q\n  s = sum[i] T[i]\n  return s\n}",
        "f: error",
        "t.dyn:2:10: error: undefined name 'q'\n"
        "  2 |   T[i] = q\n"
        "    |          ^\n");
  /* a function's name is not a value */
  FAILS("fn g(X: f32[N]) -> f32[N] {\n  return X\n}\nfn f(X: f32[N]) -> f32[N] {\n  T[i] = g\n  return T\n}",
        "fn g(X: f32[N]) -> f32[N]\nf: error",
        "t.dyn:5:10: error: 'g' is a function, not a tensor\n"
        "  5 |   T[i] = g\n"
        "    |          ^\n");
}
END_TEST

/* ---- shapes and ranges ---- */

START_TEST(test_rank) {
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i, i]\n  return Y\n}",
        "f: error",
        "t.dyn:2:10: error: 'X' has 1 dimension but is indexed with 2 subscripts\n"
        "  2 |   Y[i] = X[i, i]\n"
        "    |          ^~~~~~~\n");
  FAILS("fn f(X: f32[N, M]) -> f32[N] {\n  Y[i] = X[i]\n  return Y\n}",
        "f: error",
        "t.dyn:2:10: error: 'X' has 2 dimensions but is indexed with 1 subscript\n"
        "  2 |   Y[i] = X[i]\n"
        "    |          ^~~~\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X * 2.0\n  return Y\n}",
        "f: error",
        "t.dyn:2:10: error: 'X' has 1 dimension but is indexed with 0 subscripts\n"
        "  2 |   Y[i] = X * 2.0\n"
        "    |          ^\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i]: f32[N, N] = X[i]\n  return Y\n}",
        "f: error",
        "t.dyn:2:9: error: 'Y' is defined with 1 index but annotated with 2 dimensions\n"
        "  2 |   Y[i]: f32[N, N] = X[i]\n"
        "    |         ^~~~~~~~~\n");
}
END_TEST

START_TEST(test_range_conflict) {
  FAILS("fn f(A: f32[M], B: f32[N]) -> f32[M] {\n  C[i] = A[i] + B[i]\n  return C\n}",
        "f: error",
        "t.dyn:2:19: error: index 'i' ranges over N (dimension 0 of B) here but over M (dimension 0 of A) at t.dyn:2:12\n"
        "  2 |   C[i] = A[i] + B[i]\n"
        "    |                   ^\n"
        "t.dyn:2:12: note: 'i' first ranges over M here\n");
  /* the same in a reduction, and against an annotation */
  FAILS("fn g(A: f32[M, K], B: f32[N, K]) -> f32[M, K] {\n  C[i, j] = sum[k] A[i, k] * B[k, j]\n  return C\n}",
        "g: error",
        "t.dyn:2:32: error: index 'k' ranges over N (dimension 0 of B) here but over K (dimension 1 of A) at t.dyn:2:25\n"
        "  2 |   C[i, j] = sum[k] A[i, k] * B[k, j]\n"
        "    |                                ^\n"
        "t.dyn:2:25: note: 'k' first ranges over K here\n");
  FAILS("fn h(A: f32[M]) -> f32[M] {\n  C[i]: f32[M + 1] = A[i]\n  return C\n}",
        "h: error",
        "t.dyn:2:24: error: index 'i' ranges over M (dimension 0 of A) here but over M + 1 (the annotation of C) at t.dyn:2:13\n"
        "  2 |   C[i]: f32[M + 1] = A[i]\n"
        "    |                        ^\n"
        "t.dyn:2:13: note: 'i' first ranges over M + 1 here\n");
}
END_TEST

START_TEST(test_range_unknown) {
  static const char *conv =
    "fn conv(X: f32[N, H], Wt: f32[R]) -> f32 {\n"
    "  O[n, h] = sum[r] X[n, h + r] * Wt[r]\n"
    "  s = sum[n, h] O[n, h]\n"
    "  return s\n"
    "}";
  FAILS(conv, "conv: error",
        "t.dyn:2:8: error: cannot infer the range of 'h'; annotate the shape of 'O'\n"
        "  2 |   O[n, h] = sum[r] X[n, h + r] * Wt[r]\n"
        "    |        ^\n");
  /* the annotation fixes it, and the bounds proof then uses it: h + r < H */
  CHECKS("fn conv(X: f32[N, H], Wt: f32[R]) -> f32[N, H - R + 1] {\n"
         "  O[n, h]: f32[N, H - R + 1] = sum[r] X[n, h + r] * Wt[r]\n"
         "  return O\n"
         "}",
         "fn conv(X: f32[N, H], Wt: f32[R]) -> f32[N, H - R + 1]");
  /* so does the declared return type, for the returned tensor */
  CHECKS("fn conv2(X: f32[N, H], Wt: f32[R]) -> f32[N, H - R + 1] {\n"
         "  O[n, h] = sum[r] X[n, h + r] * Wt[r]\n"
         "  return O\n"
         "}",
         "fn conv2(X: f32[N, H], Wt: f32[R]) -> f32[N, H - R + 1]");
  FAILS("fn f(X: f32[N]) -> f32 {\n  s = sum[k] X[k + 1]\n  return s\n}",
        "f: error",
        "t.dyn:2:11: error: cannot infer the range of reduction index 'k'; use it as a plain subscript\n"
        "  2 |   s = sum[k] X[k + 1]\n"
        "    |           ^\n");
}
END_TEST

/* ---- bounds ---- */

START_TEST(test_bounds) {
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i + 1]\n  return Y\n}",
        "f: error",
        "t.dyn:2:10: error: X[i + 1] is out of bounds: subscript 0 can reach N but dimension 0 of 'X' is N\n"
        "  2 |   Y[i] = X[i + 1]\n"
        "    |          ^~~~~~~~\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i - 1]\n  return Y\n}",
        "f: error",
        "t.dyn:2:10: error: X[i - 1] is out of bounds: subscript 0 can reach -1 but dimension 0 of 'X' is N\n"
        "  2 |   Y[i] = X[i - 1]\n"
        "    |          ^~~~~~~~\n");
  /* not provable either way: a warning, and a run-time check */
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i * i]\n  return Y\n}",
        "fn f(X: f32[N]) -> f32[N]",
        "t.dyn:2:10: warning: cannot prove X[i * i] is in bounds; it is checked at run time\n"
        "  2 |   Y[i] = X[i * i]\n"
        "    |          ^~~~~~~~\n");
  /* a gather: an element of a tensor as a subscript is checked at run time, by design,
   * without a warning; an expression of one is warned about like any unproven subscript */
  CHECKS("fn g(X: f32[N], I: i64[M]) -> f32[M] {\n  Y[j] = X[I[j]]\n  return Y\n}",
         "fn g(X: f32[N], I: i64[M]) -> f32[M]");
  CHECKS("fn g(X: f32[N, D], I: i32[M]) -> f32[M, D] {\n  Y[j, d] = X[I[j], d]\n  return Y\n}",
         "fn g(X: f32[N, D], I: i32[M]) -> f32[M, D]");
  FAILS("fn g(X: f32[N], I: i64[M]) -> f32[M] {\n  Y[j] = X[I[j] + 1]\n  return Y\n}",
        "fn g(X: f32[N], I: i64[M]) -> f32[M]",
        "t.dyn:2:10: warning: cannot prove X[I[j] + 1] is in bounds; it is checked at run time\n"
        "  2 |   Y[j] = X[I[j] + 1]\n"
        "    |          ^~~~~~~~~~~\n");
  /* proven from ranges: a shifted window, the last element, a reversal, a stride */
  CHECKS("fn w(X: f32[N], K: f32[R]) -> f32[N - R + 1] {\n  Y[i] = sum[r] X[i + r] * K[r]\n  return Y\n}",
         "fn w(X: f32[N], K: f32[R]) -> f32[N - R + 1]");
  CHECKS("fn rev(X: f32[N]) -> f32[N] {\n  Y[i] = X[N - 1 - i]\n  return Y\n}",
         "fn rev(X: f32[N]) -> f32[N]");
  CHECKS("fn ds(X: f32[M], Z: f32[N]) -> f32[N] where M >= 2 * N {\n  Y[i] = X[2 * i + 1]\n  return Y\n}",
         "fn ds(X: f32[M], Z: f32[N]) -> f32[N] where M >= 2*N");
  /* a size that only a compound dimension mentions is not bound */
  FAILS("fn ds(X: f32[2 * N]) -> f32[N] {\n  Y[i] = X[2 * i + 1]\n  return Y\n}",
        "ds: error",
        "t.dyn:1:18: error: size 'N' is not bound by any parameter; use it alone as a dimension of a parameter, or declare it 'N: size'\n"
        "  1 | fn ds(X: f32[2 * N]) -> f32[N] {\n"
        "    |                  ^\n");
}
END_TEST

START_TEST(test_bounds_in_where) {
  /* lang/reference.md section 6: the chosen branch of a where knows its condition */
  CHECKS("fn pad(X: f32[H], P: size) -> f32[H + 2*P] {\n"
         "  Y[i] = where(i >= P and i < H + P, X[i - P], 0.0)\n"
         "  return Y\n"
         "}",
         "fn pad(X: f32[H], P: size) -> f32[H + 2*P]");
  /* the else branch knows the negation: not (i < P) is i >= P; nested wheres add up */
  CHECKS("fn shift(X: f32[H], P: size) -> f32[H + P] {\n"
         "  Y[i] = where(i < P, 0.0, X[i - P])\n"
         "  return Y\n"
         "}",
         "fn shift(X: f32[H], P: size) -> f32[H + P]");
  CHECKS("fn pad3(X: f32[H], P: size) -> f32[H + 2*P] {\n"
         "  Y[i] = where(i < P, 0.0, where(i < H + P, X[i - P], 0.0))\n"
         "  return Y\n"
         "}",
         "fn pad3(X: f32[H], P: size) -> f32[H + 2*P]");
  CHECKS("fn pad4(X: f32[H], P: size) -> f32[H + 2*P] {\n"
         "  Y[i] = where(not (i < P or i >= H + P), X[i - P], 0.0)\n"
         "  return Y\n"
         "}",
         "fn pad4(X: f32[H], P: size) -> f32[H + 2*P]");
  /* a bare subscript decides the range: here i < H, so Y is not f32[H + P] */
  FAILS("fn clamp(X: f32[H], P: size) -> f32[H + P] {\n"
        "  Y[i] = where(i < H, X[i], 0.0)\n"
        "  return Y\n"
        "}",
        "clamp: error",
        "t.dyn:3:10: error: 'Y' is f32[H] but the function returns f32[H + P]\n"
        "  3 |   return Y\n"
        "    |          ^\n"
        "t.dyn:1:33: note: the return type is declared here\n");
  /* half a condition proves half the bounds: the upper one is checked at run time */
  FAILS("fn pad1(X: f32[H], P: size) -> f32[H + 2*P] {\n"
        "  Y[i] = where(i >= P, X[i - P], 0.0)\n"
        "  return Y\n"
        "}",
        "fn pad1(X: f32[H], P: size) -> f32[H + 2*P]",
        "t.dyn:2:24: warning: cannot prove X[i - P] is in bounds; it is checked at run time\n"
        "  2 |   Y[i] = where(i >= P, X[i - P], 0.0)\n"
        "    |                        ^~~~~~~~\n");
  /* a condition looser than the range does not widen it: i <= N holds for every i < N */
  CHECKS("fn loose(X: f32[N]) -> f32[N] {\n"
         "  Y[i] = where(i <= N, X[i], 0.0) + where(i > N + 3, 0.0, X[i]) + where(i >= 0 - 2, X[i], 0.0)\n"
         "  return Y\n"
         "}",
         "fn loose(X: f32[N]) -> f32[N]");
  /* a scalar tensor as a subscript is data too: checked, not warned about */
  CHECKS("fn sc(X: f32[N], K: i64) -> f32[N] {\n  Y[i] = where(i > N, X[K], X[i])\n  return Y\n}",
         "fn sc(X: f32[N], K: i64) -> f32[N]");
  /* outside the branch the condition does not hold */
  FAILS("fn pad2(X: f32[H], P: size) -> f32[H + 2*P] {\n"
        "  Y[i] = where(i >= P and i < H + P, 0.0, X[i - P])\n"
        "  return Y\n"
        "}",
        "fn pad2(X: f32[H], P: size) -> f32[H + 2*P]",
        "t.dyn:2:43: warning: cannot prove X[i - P] is in bounds; it is checked at run time\n"
        "  2 |   Y[i] = where(i >= P and i < H + P, 0.0, X[i - P])\n"
        "    |                                           ^~~~~~~~\n");
}
END_TEST

START_TEST(test_where_facts) {
  CHECKS("fn f(X: f32[K]) -> f32[K] where K % 8 == 0, K >= 8 {\n  Y[i] = X[i]\n  return Y\n}",
         "fn f(X: f32[K]) -> f32[K] where K % 8 == 0, K >= 8");
  /* a fact proves an access: with N >= 7, X[i + 3] for i < 4 stays below N */
  CHECKS("fn g(X: f32[N]) -> f32[4] where N >= 7 {\n  Y[i] = X[i + 3]\n  return Y\n}",
         "fn g(X: f32[N]) -> f32[4] where N >= 7");
  FAILS("fn g(X: f32[N]) -> f32[4] {\n  Y[i] = X[i + 3]\n  return Y\n}",
        "fn g(X: f32[N]) -> f32[4]",
        "t.dyn:2:10: warning: cannot prove X[i + 3] is in bounds; it is checked at run time\n"
        "  2 |   Y[i] = X[i + 3]\n"
        "    |          ^~~~~~~~\n");
  CHECKS("fn h(X: f32[N]) -> f32[4] where N > 6 and 2 <= N {\n  Y[i] = X[i + 3]\n  return Y\n}",
         "fn h(X: f32[N]) -> f32[4] where N > 6, 2 <= N");
  FAILS("fn b(X: f32[N]) -> f32[N] where N {\n  return X\n}",
        "b: error",
        "t.dyn:1:33: error: a where fact compares sizes, such as 'K % 8 == 0' or 'N >= 1'\n"
        "  1 | fn b(X: f32[N]) -> f32[N] where N {\n"
        "    |                                 ^\n");
  FAILS("fn b(X: f32[N]) -> f32[N] where X > 1 {\n  return X\n}",
        "b: error",
        "t.dyn:1:33: error: a dimension must be an integer expression of sizes, found the tensor 'X'\n"
        "  1 | fn b(X: f32[N]) -> f32[N] where X > 1 {\n"
        "    |                                 ^\n");
}
END_TEST

/* ---- types ---- */

START_TEST(test_element_types) {
  FAILS("fn f(A: f32[N], B: f64[N]) -> f64[N] {\n  C[i] = A[i] + B[i]\n  return C\n}",
        "f: error",
        "t.dyn:2:10: error: cannot combine f32 and f64; convert one with f64(...)\n"
        "  2 |   C[i] = A[i] + B[i]\n"
        "    |          ^~~~~~~~~~~\n");
  CHECKS("fn f(A: f32[N], B: f64[N]) -> f64[N] {\n  C[i] = f64(A[i]) + B[i]\n  return C\n}",
         "fn f(A: f32[N], B: f64[N]) -> f64[N]");
  FAILS("fn g(A: i32[N], B: i64[N]) {\n  C[i] = A[i] * B[i]\n  return C\n}",
        "g: error",
        "t.dyn:2:10: error: cannot combine i32 and i64; convert one with i64(...)\n"
        "  2 |   C[i] = A[i] * B[i]\n"
        "    |          ^~~~~~~~~~~\n");
  FAILS("fn g(A: i32[N], B: f32[N]) {\n  C[i] = A[i] * B[i]\n  return C\n}",
        "g: error",
        "t.dyn:2:10: error: cannot combine i32 and f32; convert one with f32(...)\n"
        "  2 |   C[i] = A[i] * B[i]\n"
        "    |          ^~~~~~~~~~~\n");
  /* weak literals take the type around them */
  CHECKS("fn h(A: f64[N]) {\n  C[i] = A[i] * 0.5\n  return C\n}", "fn h(A: f64[N]) -> f64[N]");
  CHECKS("fn h(A: i32[N]) {\n  C[i] = A[i] * 2 + 1\n  return C\n}", "fn h(A: i32[N]) -> i32[N]");
  CHECKS("fn h(A: f64[N]) {\n  C[i] = A[i] * i + N\n  return C\n}", "fn h(A: f64[N]) -> f64[N]");
  CHECKS("fn h(A: f32[N]) {\n  C[i] = 0.5 + A[i] * 0\n  return C\n}", "fn h(A: f32[N]) -> f32[N]");
  FAILS("fn h(A: i32[N]) {\n  C[i] = A[i] * 0.5\n  return C\n}",
        "h: error",
        "t.dyn:2:10: error: cannot combine i32 and a float literal; convert one with f32(...)\n"
        "  2 |   C[i] = A[i] * 0.5\n"
        "    |          ^~~~~~~~~~\n");
  /* what stays weak defaults to f32 (floats) or i64 (integers) */
  CHECKS("fn d(A: f64[N]) {\n  C = 0.5 * N\n  D = N * 2\n  return (C, D)\n}",
         "fn d(A: f64[N]) -> (f32, i64)");
  /* ... or takes the declared return type */
  CHECKS("fn r(A: f64[N]) -> f64[N] {\n  C[i] = 0.5 * i\n  return C\n}", "fn r(A: f64[N]) -> f64[N]");
  CHECKS("fn r(A: f64[N]) -> i32 {\n  C = N * 2\n  return C\n}", "fn r(A: f64[N]) -> i32");
  /* float-only functions and operators */
  FAILS("fn e(A: i32[N]) {\n  C[i] = exp(A[i])\n  return C\n}",
        "e: error",
        "t.dyn:2:14: error: 'exp' needs a float (convert with f32(...) or f64(...)), found i32\n"
        "  2 |   C[i] = exp(A[i])\n"
        "    |              ^~~~\n");
  CHECKS("fn e(A: i32[N]) {\n  C[i] = exp(f64(A[i])) + sqrt(2)\n  return C\n}", "fn e(A: i32[N]) -> f64[N]");
  FAILS("fn p(A: i64[N]) {\n  C[i] = A[i] ** 2\n  return C\n}",
        "p: error",
        "t.dyn:2:10: error: '**' needs floats, found i64\n"
        "  2 |   C[i] = A[i] ** 2\n"
        "    |          ^~~~~~~~~\n");
  FAILS("fn b(A: f32[N]) {\n  C[i] = (A[i] > 0.0) + 1.0\n  return C\n}",
        "b: error",
        "t.dyn:2:10: error: '+' needs numbers, found bool\n"
        "  2 |   C[i] = (A[i] > 0.0) + 1.0\n"
        "    |          ^~~~~~~~~~~~\n");
  FAILS("fn s(A: f32[N]) {\n  C[i] = A[i] + A[i * 0.5]\n  return C\n}",
        "s: error",
        "t.dyn:2:19: error: a subscript must be an integer, found a float literal\n"
        "  2 |   C[i] = A[i] + A[i * 0.5]\n"
        "    |                   ^~~~~~~\n");
  FAILS("fn r(A: bool[N]) -> bool {\n  c = sum[i] A[i]\n  return c\n}",
        "r: error",
        "t.dyn:2:7: error: cannot sum values of type bool\n"
        "  2 |   c = sum[i] A[i]\n"
        "    |       ^~~~~~~~~~~\n");
  FAILS("fn f(A: f32[N]) -> f64[N] {\n  C[i] = A[i]\n  return C\n}",
        "f: error",
        "t.dyn:3:10: error: 'C' is f32[N] but the function returns f64[N]\n"
        "  3 |   return C\n"
        "    |          ^\n"
        "t.dyn:1:20: note: the return type is declared here\n");
  FAILS("fn f(A: f32[N]) -> f64[N] {\n  C[i]: f64[N] = A[i]\n  return C\n}",
        "f: error",
        "t.dyn:2:18: error: cannot combine f64 and f32; convert one with f64(...)\n"
        "  2 |   C[i]: f64[N] = A[i]\n"
        "    |                  ^~~~\n");
}
END_TEST

START_TEST(test_sizes) {
  FAILS("fn f(X: f32[N + 1]) -> f32[N + 1] {\n  return X\n}",
        "f: error",
        "t.dyn:1:13: error: size 'N' is not bound by any parameter; use it alone as a dimension of a parameter, or declare it 'N: size'\n"
        "  1 | fn f(X: f32[N + 1]) -> f32[N + 1] {\n"
        "    |             ^\n");
  FAILS("fn f(X: f32[N]) -> f32[M] {\n  return X\n}",
        "f: error",
        "t.dyn:1:24: error: size 'M' is not bound by any parameter; use it alone as a dimension of a parameter, or declare it 'M: size'\n"
        "  1 | fn f(X: f32[N]) -> f32[M] {\n"
        "    |                        ^\n");
  /* a size parameter binds it; sizes are usable as values */
  CHECKS("fn f(X: f32[N + 1], N: size) -> f32[N] {\n  Y[i] = X[i + 1] * N\n  return Y\n}",
         "fn f(X: f32[N + 1], N: size) -> f32[N]");
  FAILS("fn f(X: f32[Y], Y: f32[N]) -> f32[N] {\n  return Y\n}",
        "f: error",
        "t.dyn:1:13: error: a dimension must be an integer expression of sizes, found the parameter 'Y'\n"
        "  1 | fn f(X: f32[Y], Y: f32[N]) -> f32[N] {\n"
        "    |             ^\n");
  FAILS("fn f(X: f32[N, -2]) -> f32[N] {\n  return X\n}",
        "f: error",
        "t.dyn:1:16: error: dimension 1 of the type is -2; sizes cannot be negative\n"
        "  1 | fn f(X: f32[N, -2]) -> f32[N] {\n"
        "    |                ^~\n");
  FAILS("fn f(X: f32[N], Y: f32[N / 0]) -> f32 {\n  s = 1.0\n  return s\n}",
        "f: error",
        "t.dyn:1:24: error: a dimension must be an integer expression of sizes, found a division by zero\n"
        "  1 | fn f(X: f32[N], Y: f32[N / 0]) -> f32 {\n"
        "    |                        ^~~~~\n");
}
END_TEST

/* ---- calls between functions ---- */

START_TEST(test_calls) {
  static const char *both =
    "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
    "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
    "  return C\n"
    "}\n"
    "fn mm3(A: f32[P, Q], B: f32[Q, R], C: f32[R, S]) -> f32[P, S] {\n"
    "  T = matmul(A, B)\n"
    "  U = matmul(T, C)\n"
    "  return U\n"
    "}\n";
  CHECKS(both, "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N]\n"
               "fn mm3(A: f32[P, Q], B: f32[Q, R], C: f32[R, S]) -> f32[P, S]");
  /* the inner dimensions do not match */
  FAILS("fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
        "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
        "  return C\n"
        "}\n"
        "fn bad(A: f32[P, Q], B: f32[R, Q]) -> f32[P, Q] {\n"
        "  T = matmul(A, B)\n"
        "  return T\n"
        "}\n",
        "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N]\nbad: error",
        "t.dyn:6:7: error: matmul: K is Q from A (f32[P, Q]) but R from B (f32[R, Q])\n"
        "  6 |   T = matmul(A, B)\n"
        "    |       ^~~~~~~~~~~~\n"
        "t.dyn:1:21: note: K is bound by parameter A of matmul\n");
}
END_TEST

START_TEST(test_calls_sizes_and_tuples) {
  static const char *lib =
    "fn pad(X: f32[H], P: size) -> f32[H + 2*P] {\n"
    "  Y[i] = where(i >= P and i < H + P, X[i - P], 0.0)\n"
    "  return Y\n"
    "}\n"
    "fn stats(X: f32[N]) -> (f32, f32) {\n"
    "  m = (sum[i] X[i]) / N\n"
    "  v = (sum[i] (X[i] - m) * (X[i] - m)) / N\n"
    "  return (m, v)\n"
    "}\n";
  char text[2048];
  /* a size argument and a compound result size: N + 4 is H + 2*P with H = N, P = 2 */
  snprintf(text, sizeof text, "%s%s", lib,
           "fn use(X: f32[N]) -> f32[N + 4] {\n  Y = pad(X, 2)\n  Z = pad(X, N)\n  return Y\n}\n");
  CHECKS(text, "fn pad(X: f32[H], P: size) -> f32[H + 2*P]\n"
               "fn stats(X: f32[N]) -> (f32, f32)\n"
               "fn use(X: f32[N]) -> f32[N + 4]");
  /* the result's size is the callee's, in the caller's sizes */
  snprintf(text, sizeof text, "%s%s", lib,
           "fn use(X: f32[N]) -> f32[N + 4] {\n  Y = pad(X, 3)\n  return Y\n}\n");
  ck_assert_str_eq(check(text), "fn pad(X: f32[H], P: size) -> f32[H + 2*P]\n"
                                "fn stats(X: f32[N]) -> (f32, f32)\n"
                                "use: error");
  ck_assert_ptr_nonnull(strstr(msgs.s, "t.dyn:12:10: error: 'Y' is f32[N + 6] but the function returns f32[N + 4]\n"));
  /* tuples */
  snprintf(text, sizeof text, "%s%s", lib,
           "fn z(X: f32[N]) -> f32[N] {\n  (m, v) = stats(X)\n  Y[i] = (X[i] - m) / v\n  return Y\n}\n");
  ck_assert_str_eq(check(text), "fn pad(X: f32[H], P: size) -> f32[H + 2*P]\n"
                                "fn stats(X: f32[N]) -> (f32, f32)\n"
                                "fn z(X: f32[N]) -> f32[N]");
  ck_assert_str_eq(msgs.s, "");
  snprintf(text, sizeof text, "%s%s", lib, "fn z(X: f32[N]) -> f32 {\n  m = stats(X)\n  return m\n}\n");
  check(text);
  ck_assert_str_eq(msgs.s, "t.dyn:11:3: error: 'stats' returns 2 values but 1 name is bound\n"
                           "  11 |   m = stats(X)\n"
                           "     |   ^~~~~~~~~~~~\n");
  snprintf(text, sizeof text, "%s%s", lib, "fn z(X: f32[N]) -> f32 {\n  (a, b, c) = stats(X)\n  return a\n}\n");
  check(text);
  ck_assert_ptr_nonnull(strstr(msgs.s, "error: 'stats' returns 2 values but 3 names are bound\n"));
}
END_TEST

START_TEST(test_call_errors) {
  char text[2048];
  /* an argument of the wrong type */
  snprintf(text, sizeof text, "%s%s", MATMUL,
           "fn g(A: f64[M, K], B: f32[K, N]) -> f32[M, N] {\n  C = matmul(A, B)\n  return C\n}\n");
  check(text);
  ck_assert_str_eq(msgs.s, "t.dyn:6:14: error: matmul: parameter A is f32[M, K] but the argument is f64[M, K]\n"
                           "  6 |   C = matmul(A, B)\n"
                           "    |              ^\n");
  /* the wrong number of arguments */
  snprintf(text, sizeof text, "%s%s", MATMUL, "fn g(A: f32[M, K]) -> f32[M, M] {\n  C = matmul(A)\n  return C\n}\n");
  check(text);
  ck_assert_str_eq(msgs.s, "t.dyn:6:7: error: 'matmul' takes 2 arguments but is given 1\n"
                           "  6 |   C = matmul(A)\n"
                           "    |       ^~~~~~~~~\n");
  /* a call inside an expression, an unknown function, recursion */
  snprintf(text, sizeof text, "%s%s", MATMUL,
           "fn g(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n  C[i, j] = matmul(A, B) + 1.0\n  return C\n}\n");
  check(text);
  ck_assert_ptr_nonnull(strstr(msgs.s, "t.dyn:6:13: error: a call of 'matmul' inside an expression (bind it first: T = matmul(...)) is not allowed in a function body\n"));
  FAILS("fn g(A: f32[N]) -> f32[N] {\n  C = nosuch(A)\n  return C\n}",
        "g: error",
        "t.dyn:2:7: error: undefined function 'nosuch'\n"
        "  2 |   C = nosuch(A)\n"
        "    |       ^~~~~~\n");
  FAILS("fn r(A: f32[N]) -> f32[N] {\n  C = r(A)\n  return C\n}",
        "r: error",
        "t.dyn:2:7: error: 'r' calls itself; dyn functions cannot recurse\n"
        "  2 |   C = r(A)\n"
        "    |       ^\n");
  /* a fact of the callee must follow from the caller's facts */
  static const char *needs8 =
    "fn needs8(X: f32[K]) -> f32[K] where K % 8 == 0 {\n  Y[i] = X[i]\n  return Y\n}\n";
  snprintf(text, sizeof text, "%s%s", needs8, "fn c(X: f32[N]) -> f32[N] {\n  Y = needs8(X)\n  return Y\n}\n");
  check(text);
  ck_assert_str_eq(msgs.s, "t.dyn:6:7: error: needs8: the fact N % 8 == 0 does not hold: it cannot be proved here; state it in this function's where clause\n"
                           "  6 |   Y = needs8(X)\n"
                           "    |       ^~~~~~~~~\n"
                           "t.dyn:1:38: note: the fact is required by needs8\n");
  snprintf(text, sizeof text, "%s%s", needs8,
           "fn c(X: f32[N]) -> f32[N] where N % 8 == 0 {\n  Y = needs8(X)\n  return Y\n}\n");
  ck_assert_str_eq(check(text), "fn needs8(X: f32[K]) -> f32[K] where K % 8 == 0\n"
                                "fn c(X: f32[N]) -> f32[N] where N % 8 == 0");
  ck_assert_str_eq(msgs.s, "");
  /* a fact that holds for the concrete sizes of the call */
  snprintf(text, sizeof text, "%s%s", needs8, "fn c(X: f32[N]) -> f32[16] {\n  Z[i]: f32[16] = 1.0\n  Y = needs8(Z)\n  return Y\n}\n");
  check(text);
  ck_assert_str_eq(msgs.s, "");
}
END_TEST

START_TEST(test_return_errors) {
  FAILS("fn f(X: f32[N]) -> (f32[N], f32[N]) {\n  Y[i] = X[i]\n  return Y\n}",
        "f: error",
        "t.dyn:3:3: error: the function returns 2 values but the return statement names 1\n"
        "  3 |   return Y\n"
        "    |   ^~~~~~~~\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  return Q\n}",
        "f: error",
        "t.dyn:2:10: error: undefined name 'Q'\n"
        "  2 |   return Q\n"
        "    |          ^\n");
  FAILS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  return N\n}",
        "f: error",
        "t.dyn:3:10: error: 'N' is a size, not a tensor\n"
        "  3 |   return N\n"
        "    |          ^\n");
}
END_TEST

static Suite *sema_suite(void) {
  Suite *s = suite_create("sema");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_signatures);
  tcase_add_test(tc, test_canonical_sizes);
  tcase_add_test(tc, test_names);
  tcase_add_test(tc, test_undefined_before_range);
  tcase_add_test(tc, test_rank);
  tcase_add_test(tc, test_range_conflict);
  tcase_add_test(tc, test_range_unknown);
  tcase_add_test(tc, test_bounds);
  tcase_add_test(tc, test_bounds_in_where);
  tcase_add_test(tc, test_where_facts);
  tcase_add_test(tc, test_element_types);
  tcase_add_test(tc, test_sizes);
  tcase_add_test(tc, test_calls);
  tcase_add_test(tc, test_calls_sizes_and_tuples);
  tcase_add_test(tc, test_call_errors);
  tcase_add_test(tc, test_return_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(sema_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
