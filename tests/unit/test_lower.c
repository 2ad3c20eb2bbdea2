/* test_lower.c -- unit tests for lower.c: the checked AST to fused kernels.  Functions are
 * parsed and checked (sema), lowered with lower_function, and the loop-level IR is compared
 * as lower_print prints it (what :ir shows): which kernels there are, which definitions
 * were inlined into which, which intermediates live per row, and the symbolic extents.
 * Whole printouts are compared for the canonical kernels, fragments for the rest. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static Arena *arena;
static PolyCtx *pc;
static Diags diags;
static Source src;
static Buf out;
static Func *fns[32];
static int nfns;

static void setup(void) {
  arena = arena_new();
  pc = poly_ctx_new();
  memset(&diags, 0, sizeof diags);
  nfns = 0;
}

static void teardown(void) {
  for (int i = 0; i < nfns; i++) lower_free(fns[i]->code.prog);
  diag_clear(&diags);
  arena_free(arena);
  poly_ctx_free(pc);
  buf_free(&out);
}

static Func *lookup(void *env, const char *name) {
  (void)env;
  for (int i = 0; i < nfns; i++)
    if (!strcmp(fns[i]->name, name)) return fns[i];
  return NULL;
}

static const char *STDLIB =
  "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
  "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
  "  return C\n"
  "}\n"
  "fn relu(X: f32[B, N]) -> f32[B, N] {\n"
  "  Y[b, n] = max(X[b, n], 0.0)\n"
  "  return Y\n"
  "}\n"
  "fn softmax(X: f32[B, N]) -> f32[B, N] {\n"
  "  m[b]    = max[n] X[b, n]\n"
  "  e[b, n] = exp(X[b, n] - m[b])\n"
  "  s[b]    = sum[n] e[b, n]\n"
  "  Y[b, n] = e[b, n] / s[b]\n"
  "  return Y\n"
  "}\n"
  "fn layernorm(X: f32[B, N], gamma: f32[N], beta: f32[N]) -> f32[B, N] {\n"
  "  mu[b]   = (sum[n] X[b, n]) / N\n"
  "  d[b, n] = X[b, n] - mu[b]\n"
  "  v[b]    = (sum[n] d[b, n] * d[b, n]) / N\n"
  "  Y[b, n] = d[b, n] * rsqrt(v[b] + 1e-5) * gamma[n] + beta[n]\n"
  "  return Y\n"
  "}\n";

/* Parse and check every function of STDLIB and text (errors fail the test, warnings are
 * allowed), then lower the function named fname and print its IR. */
static const char *ir(const char *text, const char *fname) {
  for (int i = 0; i < nfns; i++) lower_free(fns[i]->code.prog), fns[i]->code.prog = NULL;
  nfns = 0;
  diag_clear(&diags);
  Buf all = {0};
  buf_puts(&all, STDLIB);
  buf_puts(&all, text);
  src.name = "t.dyn";
  src.len = all.len;
  src.text = arena_strndup(arena, all.s, all.len);
  buf_free(&all);
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
  Func *f = lookup(NULL, fname);
  ck_assert_msg(f != NULL, "no function %s", fname);
  f->code.prog = lower_function(f, pc, lookup, NULL);
  buf_free(&out);
  buf_puts(&out, "");
  lower_print(f->code.prog, &out);
  return out.s;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

#define HAS(frag) ck_assert_msg(strstr(out.s, frag) != NULL, "no \"%s\" in:\n%s", frag, out.s)
#define HASNT(frag) ck_assert_msg(strstr(out.s, frag) == NULL, "\"%s\" in:\n%s", frag, out.s)
#define KERNELS(n) ck_assert_msg(count(out.s, "kernel ") == (n), "not %d kernels:\n%s", n, out.s)

START_TEST(test_matmul) {
  ck_assert_str_eq(ir("", "matmul"),
                   "buffers:\n"
                   "  A          f32[M, K]  input\n"
                   "  B          f32[K, N]  input\n"
                   "  C          f32[M, N]  output\n"
                   "kernel matmul_C\n"
                   "  for i < M:   # parallel\n"
                   "    for j < N:\n"
                   "      C[i, j] = sum[k < K] A[i, k] * B[k, j]\n");
}
END_TEST

START_TEST(test_softmax_one_rowwise_kernel) {
  ck_assert_str_eq(ir("", "softmax"),
                   "buffers:\n"
                   "  X          f32[B, N]  input\n"
                   "  m          f32[B]  per row\n"
                   "  e          f32[B, N]  per row\n"
                   "  s          f32[B]  per row\n"
                   "  Y          f32[B, N]  output\n"
                   "kernel softmax_Y: row-wise, 4 stages fused\n"
                   "  for b < B:   # parallel\n"
                   "    m[b] = max[n < N] X[b, n]   # per row\n"
                   "    for n < N:\n"
                   "      e[b, n] = exp(X[b, n] - m[b])   # per row\n"
                   "    s[b] = sum[n < N] e[b, n]   # per row\n"
                   "    for n < N:\n"
                   "      Y[b, n] = e[b, n] / s[b]\n");
}
END_TEST

START_TEST(test_layernorm) {
  ir("", "layernorm");
  KERNELS(1);
  HAS("kernel layernorm_Y: row-wise, 3 stages fused\n");
  HAS("  mu         f32[B]  per row\n");
  HAS("  v          f32[B]  per row\n");
  HAS("  Y          f32[B, N]  output\n");
  /* d = X - mu is cheap: inlined into both its readers, and gone as a buffer */
  HASNT("  d   ");
  HASNT("d[b, n] =");
  HAS("    v[b] = (sum[n < N] (X[b, n] - mu[b]) * (X[b, n] - mu[b])) / f32(N)   # per row\n");
  HAS("      Y[b, n] = (X[b, n] - mu[b]) * rsqrt(v[b] + 1e-05) * gamma[n] + beta[n]\n");
  HAS("    mu[b] = (sum[n < N] X[b, n]) / f32(N)   # per row\n");
}
END_TEST

START_TEST(test_elementwise_chain_inlines) {
  ck_assert_str_eq(ir("fn chain(X: f32[N], Y: f32[N]) -> f32[N] {\n"
                      "  a[i] = X[i] * 2.0\n"
                      "  b[i] = a[i] + Y[i]\n"
                      "  c[i] = max(b[i], 0.0) - a[i]\n"
                      "  return c\n"
                      "}\n", "chain"),
                   "buffers:\n"
                   "  X          f32[N]  input\n"
                   "  Y          f32[N]  input\n"
                   "  c          f32[N]  output\n"
                   "kernel chain_c\n"
                   "  for i < N:\n"
                   "    c[i] = max(X[i] * 2.0 + Y[i], 0.0) - X[i] * 2.0\n");
  /* an elementwise producer is inlined at the consumer's subscripts */
  ir("fn sh(X: f32[N]) -> f32[N - 1] {\n  a[i] = X[i] * X[i]\n  b[j] = a[j + 1] + 1.0\n  return b\n}\n", "sh");
  KERNELS(1);
  HAS("    b[j] = X[j + 1] * X[j + 1] + 1.0\n");
  /* a transposition is elementwise too */
  ir("fn tr(X: f32[M, N]) -> f32[N, M] {\n  a[i, j] = X[i, j] + 1.0\n  T[j, i] = a[i, j]\n  return T\n}\n", "tr");
  KERNELS(1);
  HAS("T[j, i] = X[i, j] + 1.0\n");
}
END_TEST

START_TEST(test_expensive_producers) {
  /* exp read twice: computed once into a buffer, not recomputed at each read */
  ir("fn t(X: f32[N]) -> f32[N] {\n  e[i] = exp(X[i])\n  y[i] = e[i] * e[i]\n  return y\n}\n", "t");
  KERNELS(2);
  HAS("  e          f32[N]  temporary\n");
  HAS("kernel t_e\n  for i < N:\n    e[i] = exp(X[i])\n");
  HAS("kernel t_y\n  for i < N:\n    y[i] = e[i] * e[i]\n");
  /* read once: inlined */
  ir("fn u(X: f32[N]) -> f32[N] {\n  e[i] = exp(X[i])\n  y[i] = e[i] + 1.0\n  return y\n}\n", "u");
  KERNELS(1);
  HAS("    y[i] = exp(X[i]) + 1.0\n");
  /* a cheap producer read twice is inlined twice */
  ir("fn v(X: f32[N]) -> f32[N] {\n  a[i] = X[i] + 1.0\n  y[i] = a[i] * a[i]\n  return y\n}\n", "v");
  KERNELS(1);
  HAS("    y[i] = (X[i] + 1.0) * (X[i] + 1.0)\n");
  /* a producer with a reduction is never inlined */
  ir("fn w(X: f32[M, N]) -> f32[M] {\n  r[i] = sum[j] X[i, j]\n  y[i] = r[i] * r[i] + r[i]\n  return y\n}\n", "w");
  HAS("r[i] = sum[j < N] X[i, j]");
  HAS("y[i] = r[i] * r[i] + r[i]");
  /* nor is a returned tensor, even when another result reads it */
  ir("fn x2(X: f32[N]) -> (f32[N], f32[N]) {\n  a[i] = X[i] + 1.0\n  b[i] = a[i] * 2.0\n  return (a, b)\n}\n", "x2");
  KERNELS(2);
  HAS("  a          f32[N]  output\n");
  HAS("  b          f32[N]  output\n");
  HAS("    b[i] = a[i] * 2.0\n");
  /* and a definition nothing reads disappears */
  ir("fn dead(X: f32[N]) -> f32[N] {\n  a[i] = exp(X[i])\n  y[i] = X[i] * 2.0\n  return y\n}\n", "dead");
  KERNELS(1);
  HASNT("exp");
  HASNT("  a   ");
}
END_TEST

START_TEST(test_calls_are_inlined) {
  ir("fn mlp(X: f32[B, K], W: f32[K, N]) -> f32[B, N] {\n  H = matmul(X, W)\n  Y = relu(H)\n  return Y\n}\n", "mlp");
  /* the callee's sizes become the caller's: M -> B, K -> K, N -> N */
  ck_assert_str_eq(out.s,
                   "buffers:\n"
                   "  X          f32[B, K]  input\n"
                   "  W          f32[K, N]  input\n"
                   "  matmul.C   f32[B, N]  temporary\n"
                   "  relu.Y     f32[B, N]  output\n"
                   "kernel mlp_matmul.C\n"
                   "  for i < B:   # parallel\n"
                   "    for j < N:\n"
                   "      matmul.C[i, j] = sum[k < K] X[i, k] * W[k, j]\n"
                   "kernel mlp_relu.Y\n"
                   "  for b < B:   # parallel\n"
                   "    for n < N:\n"
                   "      relu.Y[b, n] = max(matmul.C[b, n], 0.0)\n");
  /* two calls of one function: every buffer and kernel keeps a name of its own */
  ir("fn mm3(A: f32[P, Q], B: f32[Q, R], C: f32[R, S]) -> f32[P, S] {\n"
     "  T = matmul(A, B)\n  U = matmul(T, C)\n  return U\n}\n", "mm3");
  HAS("  matmul.C   f32[P, R]  temporary\n");
  HAS("  matmul@2.C f32[P, S]  output\n");
  HAS("kernel mm3_matmul.C\n");
  HAS("kernel mm3_matmul@2.C\n");
  HAS("      matmul@2.C[i, j] = sum[k < R] matmul.C[i, k] * C[k, j]\n");
  /* an elementwise callee is inlined and fused like a local definition */
  ir("fn scale(X: f32[N], a: f32) -> f32[N] {\n  Y[i] = X[i] * a\n  return Y\n}\n"
     "fn twice(X: f32[N], a: f32) -> f32[N] {\n  P = scale(X, a)\n  Q = scale(P, a)\n  return Q\n}\n", "twice");
  KERNELS(1);
  HAS("    scale@2.Y[i] = X[i] * a * a\n");
  /* a size argument: pad(X, 2) has H + 2*P = N + 4 elements */
  ir("fn pad(X: f32[H], P: size) -> f32[H + 2*P] {\n"
     "  Y[i] = where(i >= P and i < H + P, X[i - P], 0.0)\n  return Y\n}\n"
     "fn p2(X: f32[N]) -> f32[N + 4] {\n  Y = pad(X, 2)\n  return Y\n}\n", "p2");
  HAS("  pad.Y      f32[N + 4]  output\n");
  HAS("  for i < N + 4:\n");
  HAS("pad.Y[i] = where(i >= 2 and i < N + 2, X[i - 2], 0.0)\n");
  /* tuple results */
  ir("fn mv(X: f32[N]) -> (f32, f32) {\n  m = (sum[i] X[i]) / N\n  v = (sum[i] X[i] * X[i]) / N - m * m\n  return (m, v)\n}\n"
     "fn z(X: f32[N]) -> f32[N] {\n  (m, v) = mv(X)\n  Y[i] = (X[i] - m) * rsqrt(v)\n  return Y\n}\n", "z");
  HAS("mv.m");
  HAS("mv.v");
  HAS("Y[i] = (X[i] - mv.m) * rsqrt(mv.v)\n");
}
END_TEST

START_TEST(test_conv_extents) {
  ir("fn conv(X: f32[N, H], Wt: f32[R]) -> f32[N, H - R + 1] {\n"
     "  O[n, h] = sum[r] X[n, h + r] * Wt[r]\n"
     "  return O\n"
     "}\n", "conv");
  ck_assert_str_eq(out.s,
                   "buffers:\n"
                   "  X          f32[N, H]  input\n"
                   "  Wt         f32[R]  input\n"
                   "  O          f32[N, H - R + 1]  output\n"
                   "kernel conv_O\n"
                   "  for n < N:   # parallel\n"
                   "    for h < H - R + 1:\n"
                   "      O[n, h] = sum[r < R] X[n, h + r] * Wt[r]\n");
}
END_TEST

START_TEST(test_rowwise_grouping_limits) {
  /* a stage that reads another row of the group cannot join it */
  ir("fn nb(X: f32[B, N]) -> f32[B, N] {\n"
     "  s[b] = sum[n] X[b, n]\n"
     "  Y[b, n] = X[b, n] / s[(b + 1) % B]\n"
     "  return Y\n"
     "}\n", "nb");
  KERNELS(2);
  HASNT("row-wise");
  HAS("  s          f32[B]  temporary\n");
  HAS("Y[b, n] = X[b, n] / s[(b + 1) % B]!\n");     /* '!': checked at run time */
  /* rows of different lengths are different loops */
  ir("fn two(X: f32[B, N], Z: f32[C, N]) -> f32[C, N] {\n"
     "  s[b] = sum[n] X[b, n]\n"
     "  t = sum[b] s[b]\n"
     "  Y[c, n] = Z[c, n] * t\n"
     "  return Y\n"
     "}\n", "two");
  KERNELS(3);
  /* a purely elementwise sequence is not a row-wise group */
  ir("fn ew(X: f32[B, N]) -> (f32[B, N], f32[B, N]) {\n"
     "  a[b, n] = exp(X[b, n])\n"
     "  y[b, n] = a[b, n] + 1.0\n"
     "  return (a, y)\n"
     "}\n", "ew");
  KERNELS(2);
  HASNT("row-wise");
}
END_TEST

START_TEST(test_inlining_is_bounded) {
  /* each definition reads the one before twice: inlining all of them would double the
   * expression 30 times over */
  Buf t = {0};
  buf_puts(&t, "fn grow(X: f32[N]) -> f32[N] {\n  Y0[i] = X[i] + X[i]\n");
  for (int k = 1; k <= 30; k++) buf_printf(&t, "  Y%d[i] = Y%d[i] * Y%d[i]\n", k, k - 1, k - 1);
  buf_puts(&t, "  return Y30\n}\n");
  ir(t.s, "grow");
  buf_free(&t);
  ck_assert_int_lt((int)out.len, 20000);
  ck_assert_int_gt(count(out.s, "kernel "), 1);
  HAS("Y30[i] = ");
  /* a long chain of single-use definitions, each a tall expression: inlining stops before
   * the expression is too tall for the passes that recurse on it */
  buf_puts(&t, "fn tall(X: f32[N]) -> f32[N] {\n  Y0[i] = X[i]\n");
  for (int k = 1; k <= 12; k++) {
    buf_printf(&t, "  Y%d[i] = Y%d[i]", k, k - 1);
    for (int j = 0; j < 900; j++) buf_puts(&t, " + 1.0");
    buf_putc(&t, '\n');
  }
  buf_puts(&t, "  return Y12\n}\n");
  ir(t.s, "tall");
  buf_free(&t);
  ck_assert_int_gt(count(out.s, "kernel "), 1);
  ck_assert_int_lt(count(out.s, "kernel "), 12);
}
END_TEST

static Suite *lower_suite(void) {
  Suite *s = suite_create("lower");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_matmul);
  tcase_add_test(tc, test_softmax_one_rowwise_kernel);
  tcase_add_test(tc, test_layernorm);
  tcase_add_test(tc, test_elementwise_chain_inlines);
  tcase_add_test(tc, test_expensive_producers);
  tcase_add_test(tc, test_calls_are_inlined);
  tcase_add_test(tc, test_conv_extents);
  tcase_add_test(tc, test_rowwise_grouping_limits);
  tcase_add_test(tc, test_inlining_is_bounded);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(lower_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
