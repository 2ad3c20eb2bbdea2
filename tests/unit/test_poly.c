/* test_poly.c -- unit tests for poly.c, the symbolic sizes.  Sizes are written as text and
 * read by a small parser here (the grammar of a dimension: + - * / % min max, parentheses,
 * unary minus), built through the public constructors, and compared as printed text or, for
 * canonical equality, as pointers -- never through struct internals. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static PolyCtx *ctx;

static void setup(void) { ctx = poly_ctx_new(); }
static void teardown(void) {
  poly_ctx_free(ctx);
  ctx = NULL;
}

/* ---- a parser for dimension text ---- */

static const char *src;

static void skip(void) {
  while (*src == ' ') src++;
}

static bool eat(char ch) {
  skip();
  if (*src != ch) return false;
  src++;
  return true;
}

static const Poly *parse_sum(void);

static const Poly *parse_atom(void) {
  skip();
  if (eat('(')) {
    const Poly *p = parse_sum();
    ck_assert_msg(eat(')'), "expected ) at '%s'", src);
    return p;
  }
  if (eat('-')) return poly_neg(ctx, parse_atom());
  if (*src >= '0' && *src <= '9') {
    int64_t v = 0;
    while (*src >= '0' && *src <= '9') {
      ck_assert(!__builtin_mul_overflow(v, 10, &v));
      ck_assert(!__builtin_add_overflow(v, *src++ - '0', &v));
    }
    return poly_const(ctx, v);
  }
  const char *start = src;
  while ((*src >= 'a' && *src <= 'z') || (*src >= 'A' && *src <= 'Z') || *src == '_' ||
         (src > start && *src >= '0' && *src <= '9'))
    src++;
  ck_assert_msg(src > start, "unexpected '%s'", src);
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)(src - start), start);
  if (!strcmp(name, "min") || !strcmp(name, "max")) {
    ck_assert(eat('('));
    const Poly *a = parse_sum();
    ck_assert(eat(','));
    const Poly *b = parse_sum();
    ck_assert(eat(')'));
    return name[1] == 'i' ? poly_min(ctx, a, b) : poly_max(ctx, a, b);
  }
  return poly_var(ctx, name);
}

static const Poly *parse_product(void) {
  const Poly *p = parse_atom();
  for (;;) {
    if (eat('*')) p = poly_mul(ctx, p, parse_atom());
    else if (eat('/')) p = poly_div(ctx, p, parse_atom());
    else if (eat('%')) p = poly_mod(ctx, p, parse_atom());
    else return p;
  }
}

static const Poly *parse_sum(void) {
  const Poly *p = parse_product();
  for (;;) {
    if (eat('+')) p = poly_add(ctx, p, parse_product());
    else if (eat('-')) p = poly_sub(ctx, p, parse_product());
    else return p;
  }
}

static const Poly *P(const char *text) {
  src = text;
  const Poly *p = parse_sum();
  skip();
  ck_assert_msg(*src == 0, "trailing '%s' in '%s'", src, text);
  return p;
}

/* The printed form, in one of a few rotating buffers so two can be compared in one call. */
static const char *S(const Poly *p) {
  static char out[8][512];
  static int next;
  Buf b = {0};
  poly_str(p, &b);
  char *r = out[next++ % 8];
  snprintf(r, sizeof out[0], "%s", b.s);
  buf_free(&b);
  return r;
}

#define CANON(text, want) ck_assert_str_eq(S(P(text)), want)

/* ---- canonical form ---- */

START_TEST(test_equal_forms) {
  ck_assert_ptr_eq(P("N + 1"), P("1 + N"));
  ck_assert_ptr_eq(P("2*(N + 1)"), P("2*N + 2"));
  ck_assert_ptr_eq(P("(N + 1)*(N - 1)"), P("N*N - 1"));
  ck_assert_ptr_eq(P("M*N"), P("N*M"));
  ck_assert_ptr_eq(P("H - R + 1"), P("1 + H - R"));
  ck_assert_ptr_eq(P("N - N"), poly_const(ctx, 0));
  ck_assert_ptr_eq(P("(A + B)*(A - B)"), P("A*A - B*B"));
  ck_assert_ptr_eq(P("min(N, 4)"), P("min(4, N)"));
  ck_assert_ptr_eq(P("(N + 1)/2"), P("(1 + N)/2"));
  ck_assert_ptr_eq(P("N"), poly_var(ctx, "N"));
  ck_assert_ptr_ne(P("N + 1"), P("N + 2"));
  ck_assert_ptr_ne(P("N/2*2"), P("N"));
}
END_TEST

START_TEST(test_is_const_as_var) {
  int64_t v = -1;
  ck_assert(poly_is_const(P("3*N - 3*N + 7"), &v));
  ck_assert_int_eq(v, 7);
  ck_assert(poly_is_const(P("N - N"), &v));
  ck_assert_int_eq(v, 0);
  ck_assert(poly_is_const(P("5"), NULL));
  ck_assert(!poly_is_const(P("N + 1"), &v));
  ck_assert_str_eq(poly_as_var(P("(N + 3) - 3")), "N");
  ck_assert_ptr_null(poly_as_var(P("2*N")));
  ck_assert_ptr_null(poly_as_var(P("N + 1")));
  ck_assert_ptr_null(poly_as_var(P("N/2")));
  ck_assert_ptr_null(poly_as_var(P("4")));
}
END_TEST

/* ---- printing ---- */

START_TEST(test_print) {
  CANON("0", "0");
  CANON("-5", "-5");
  CANON("1 + H - R", "H - R + 1");
  CANON("3 - N", "-N + 3");
  CANON("N*2", "2*N");
  CANON("N*M", "M*N");
  CANON("N*N*3 + M*N - N + 2 + M*M", "M*M + M*N + 3*N*N - N + 2");
  CANON("B*A*C - 2*A*A", "A*B*C - 2*A*A");
  CANON("0 - 2*A*A + B", "-2*A*A + B");
  CANON("(N + 1)*(N + 1)", "N*N + 2*N + 1");
  CANON("(N + 1)/2", "(N + 1)/2");
  CANON("N/2", "N/2");
  CANON("N % 8", "N % 8");
  CANON("(N + 1) % 8", "(N + 1) % 8");
  CANON("min(N, 4)", "min(N, 4)");
  CANON("max(B, A)", "max(A, B)");
  CANON("N/M", "N/M");
  CANON("N/(M + 1)", "N/(M + 1)");
  CANON("(3*N)/2", "(3*N)/2");
  /* precedence-sensitive products of atoms stay readable and re-parse to the same size */
  CANON("2*(N/2)", "2*(N/2)");
  CANON("M*(N/2)", "M*(N/2)");
  CANON("0 - N/2", "-(N/2)");
  CANON("M - N/2", "M - N/2");
  CANON("3*(N % 4) + 1", "3*(N % 4) + 1");
  CANON("N + min(N, 4)*2", "N + 2*min(N, 4)");
  CANON("(N/2) / M", "(N/2)/M");
  CANON("(-N) / M", "(-N)/M");
  CANON("-9223372036854775807 - 1", "-9223372036854775808");
}
END_TEST

START_TEST(test_print_round_trip) {
  static const char *cases[] = {
      "H - R + 1", "2*N + 2", "(N + 1)/2", "N % 8", "min(N, 4)", "max(A, B)", "2*(N/2)",
      "-(N/2)", "M*(N % 3)", "(N*N - 1) % 7", "min(N/2, M) + max(N, M*M)", "-N + 3",
      "(2*N + 1)/(M + 3)", "(N - 1)/M - N % (M + 1)", "min(-N, 3)", "(0 - N)/M",
      "9223372036854775807 + N", "-(N % 4)", "(N % 4) % M",
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const Poly *p = P(cases[i]);
    char text[512];
    snprintf(text, sizeof text, "%s", S(p));
    ck_assert_msg(P(text) == p, "'%s' printed as '%s' reads back as '%s'", cases[i], text,
                  S(P(text)));
  }
}
END_TEST

/* ---- division, modulo, min, max ---- */

START_TEST(test_const_fold_floor) {
  CANON("7/2", "3");
  CANON("(0 - 7)/2", "-4");
  CANON("(0 - 7) % 2", "1");
  CANON("7/(0 - 2)", "-4");
  CANON("7 % (0 - 2)", "-1");
  CANON("(0 - 7)/(0 - 2)", "3");
  CANON("(0 - 7) % (0 - 2)", "-1");
  CANON("(0 - 8)/2", "-4");
  CANON("(0 - 8) % 2", "0");
  CANON("2*3 + 4 - 10", "0");
  CANON("min(3, 5)", "3");
  CANON("max(3, 5)", "5");
  CANON("min(0 - 3, 5)", "-3");
}
END_TEST

START_TEST(test_div_mod_simplify) {
  CANON("N/1", "N");
  CANON("N % 1", "0");
  CANON("0/N", "0");
  CANON("0 % N", "0");
  CANON("(2*N + 4)/2", "N + 2");
  CANON("(8*K) % 8", "0");
  CANON("(8*K + 3) % 8", "3");
  CANON("(8*K + 3)/8", "K");
  CANON("(8*K - 1)/8", "K - 1");
  CANON("(8*K - 1) % 8", "7");
  CANON("(N + 8) % 8", "N % 8");
  CANON("(N + 5)/2", "(N + 1)/2 + 2");
  CANON("(2*N + M)/2", "N + M/2");
  CANON("(2*N)/4", "N/2");
  CANON("(2*N) % 4", "2*(N % 2)");
  CANON("(N/2)/3", "N/6");
  CANON("(N % 16) % 8", "N % 8");
  CANON("(N % 8) % 16", "N % 8");
  CANON("(N % 8) % 6", "(N % 8) % 6");
  CANON("N/(0 - 1)", "-N");
  CANON("N % (0 - 1)", "0");
  CANON("N/(0 - 2)", "(-N)/2");
  ck_assert_ptr_eq(P("(N + 4)/2"), P("N/2 + 2"));
  ck_assert_ptr_eq(P("(3*N + 1) % 3"), P("1"));
  /* by zero stays symbolic; evaluation reports it */
  CANON("N/0", "N/0");
  CANON("N % 0", "N % 0");
  CANON("5/0", "5/0");
}
END_TEST

START_TEST(test_min_max) {
  CANON("min(N, N)", "N");
  CANON("max(N, N)", "N");
  CANON("min(N + 1, N)", "N");
  CANON("max(N + 1, N)", "N + 1");
  CANON("min(N - 3, N)", "N - 3");
  CANON("max(2*N + 1, 2*N - 1)", "2*N + 1");
  CANON("min(N, M)", "min(M, N)");
  CANON("max(N, 4)", "max(N, 4)");
  /* not simplified: N >= 0 is a fact of the prover, not an identity */
  CANON("min(2*N, N)", "min(N, 2*N)");
}
END_TEST

/* ---- substitution ---- */

static const Poly *const *subst_table;
static const char *const *subst_names;

static const Poly *lookup_table(void *env, const char *name) {
  int n = *(int *)env;
  for (int i = 0; i < n; i++)
    if (!strcmp(subst_names[i], name)) return subst_table[i];
  return NULL;
}

static const Poly *subst1(const char *p, const char *var, const char *to) {
  const Poly *tos[1] = {P(to)};
  const char *names[1] = {var};
  int n = 1;
  subst_table = tos;
  subst_names = names;
  return poly_subst(ctx, P(p), lookup_table, &n);
}

START_TEST(test_subst) {
  ck_assert_str_eq(S(subst1("N + 1", "N", "M*2")), "2*M + 1");
  ck_assert_str_eq(S(subst1("N*N", "N", "M + 1")), "M*M + 2*M + 1");
  ck_assert_str_eq(S(subst1("H - R + 1", "R", "H")), "1");
  ck_assert_str_eq(S(subst1("(N + 1)/2", "N", "2*M + 1")), "M + 1");
  ck_assert_str_eq(S(subst1("N % 8 + M", "N", "8*K + 3")), "M + 3");
  ck_assert_str_eq(S(subst1("min(N, 4)", "N", "7")), "4");
  ck_assert_str_eq(S(subst1("max(N, M)", "N", "M + 2")), "M + 2");
  ck_assert_str_eq(S(subst1("N*M + 1", "X", "5")), "M*N + 1");
  ck_assert_str_eq(S(subst1("(N/M) % 4", "M", "2")), "(N/2) % 4");
  /* an identity substitution gives back the very same size */
  const Poly *p = P("(N + 1)/2 + min(N, M % 3)*N - (2*N) % 4");
  int zero = 0;
  ck_assert_ptr_eq(poly_subst(ctx, p, lookup_table, &zero), p);
  /* two variables at once, simultaneously */
  const Poly *tos[2] = {P("M"), P("N")};
  const char *names[2] = {"N", "M"};
  int two = 2;
  subst_table = tos;
  subst_names = names;
  ck_assert_ptr_eq(poly_subst(ctx, P("N - 2*M"), lookup_table, &two), P("M - 2*N"));
}
END_TEST

START_TEST(test_vars) {
  const char *names[8];
  int n = poly_vars(P("N*M + B/(K + 1) - min(A, N)"), names, 8);
  ck_assert_int_eq(n, 5);
  ck_assert_str_eq(names[0], "A");
  ck_assert_str_eq(names[1], "B");
  ck_assert_str_eq(names[2], "K");
  ck_assert_str_eq(names[3], "M");
  ck_assert_str_eq(names[4], "N");
  ck_assert_int_eq(poly_vars(P("7"), names, 8), 0);
  ck_assert_int_eq(poly_vars(P("N*N + N"), names, 8), 1);
  ck_assert_int_eq(poly_vars(P("C + B + A"), names, 2), 2);   /* truncated to max */
  ck_assert_str_eq(names[0], "A");
  ck_assert_str_eq(names[1], "B");
}
END_TEST

/* ---- evaluation ---- */

static bool lookup_env(void *env, const char *name, int64_t *v) {
  /* env: "N=5,M=3" */
  size_t len = strlen(name);
  for (const char *s = env; *s;) {
    if (!strncmp(s, name, len) && s[len] == '=') {
      *v = strtoll(s + len + 1, NULL, 10);
      return true;
    }
    s = strchr(s, ',');
    if (!s) break;
    s++;
  }
  return false;
}

static bool ev(const char *text, const char *env, int64_t *out, const char **why) {
  return poly_eval(P(text), lookup_env, (void *)env, out, why);
}

START_TEST(test_eval) {
  int64_t v;
  const char *why = "unset";
  ck_assert(ev("H - R + 1", "H=10,R=3", &v, &why));
  ck_assert_int_eq(v, 8);
  ck_assert_ptr_null(why);
  ck_assert(ev("N*N*2 + N/2 + N % 3", "N=7", &v, NULL));
  ck_assert_int_eq(v, 98 + 3 + 1);
  ck_assert(ev("(N - 10)/4", "N=3", &v, NULL));
  ck_assert_int_eq(v, -2);
  ck_assert(ev("(N - 10) % 4", "N=3", &v, NULL));
  ck_assert_int_eq(v, 1);
  ck_assert(ev("min(N, M) + max(N, M)", "N=3,M=9", &v, NULL));
  ck_assert_int_eq(v, 12);
  ck_assert(ev("N/M", "N=7,M=-2", &v, NULL));
  ck_assert_int_eq(v, -4);
  ck_assert(ev("N % M", "N=7,M=-2", &v, NULL));
  ck_assert_int_eq(v, -1);
  ck_assert(ev("42", "", &v, NULL));
  ck_assert_int_eq(v, 42);

  ck_assert(!ev("N + M", "N=1", &v, &why));
  ck_assert_str_eq(why, "unbound size variable");
  ck_assert(!ev("N/M", "N=1,M=0", &v, &why));
  ck_assert_str_eq(why, "division by zero");
  ck_assert(!ev("N % M", "N=1,M=0", &v, &why));
  ck_assert_str_eq(why, "modulo by zero");
  ck_assert(!ev("5/0", "", &v, &why));
  ck_assert_str_eq(why, "division by zero");
  ck_assert(!ev("N*N", "N=4000000000", &v, &why));
  ck_assert_str_eq(why, "integer overflow");
  ck_assert(!ev("N + 9223372036854775807", "N=1", &v, &why));
  ck_assert_str_eq(why, "integer overflow");
  ck_assert(!ev("N/M", "N=-9223372036854775808,M=-1", &v, &why));
  ck_assert_str_eq(why, "integer overflow");
  ck_assert(ev("N % M", "N=-9223372036854775808,M=-1", &v, NULL));
  ck_assert_int_eq(v, 0);
  ck_assert(!poly_eval(P("N"), NULL, NULL, &v, &why));
  ck_assert_str_eq(why, "unbound size variable");
}
END_TEST

/* ---- the affine view ---- */

static bool affine(const char *p, const char *var, const char *coef, const char *rest) {
  const Poly *c, *r;
  if (!poly_affine_in(ctx, P(p), var, &c, &r)) return false;
  ck_assert_str_eq(S(c), coef);
  ck_assert_str_eq(S(r), rest);
  return true;
}

START_TEST(test_affine_in) {
  ck_assert(affine("H - R + 1", "R", "-1", "H + 1"));
  ck_assert(affine("2*i + 3*j + 1", "i", "2", "3*j + 1"));
  ck_assert(affine("M*N + N + M*M", "N", "M + 1", "M*M"));
  ck_assert(affine("M*K*N + K", "N", "K*M", "K"));
  ck_assert(affine("H + 1", "R", "0", "H + 1"));
  ck_assert(affine("i + N/2", "i", "1", "N/2"));
  ck_assert(!affine("N*N + 1", "N", "", ""));
  ck_assert(!affine("i + N/2", "N", "", ""));
  ck_assert(!affine("min(N, 4) + N", "N", "", ""));
  ck_assert(!affine("M*N*N", "N", "", ""));
  const Poly *c = P("1"), *r = P("1");
  ck_assert(!poly_affine_in(ctx, P("N % 8"), "N", &c, &r));
  ck_assert_ptr_null(c);
  ck_assert_ptr_null(r);
}
END_TEST

/* ---- proving p >= 0 ---- */

static bool nonneg(const char *p, const char *const *facts, int n) {
  const Poly *f[8];
  ck_assert(n <= 8);
  for (int i = 0; i < n; i++) f[i] = P(facts[i]);
  return poly_nonneg(ctx, P(p), f, n);
}

START_TEST(test_nonneg_plain) {
  ck_assert(nonneg("0", NULL, 0));
  ck_assert(nonneg("N", NULL, 0));
  ck_assert(nonneg("2*N*M + N + 3", NULL, 0));
  ck_assert(nonneg("H - (H - R + 1 - 1) - (R - 1) - 1", NULL, 0));
  ck_assert(nonneg("N/2 + N % 8", NULL, 0));
  ck_assert(nonneg("min(N, M) + max(N - 5, M)", NULL, 0));
  ck_assert(nonneg("(N - 3) % 4", NULL, 0));
  ck_assert(nonneg("7 - N % 8", NULL, 0));
  ck_assert(nonneg("N - min(N, M)", NULL, 0));
  ck_assert(nonneg("max(N, M) - M", NULL, 0));
  ck_assert(nonneg("N - 2*(N/2)", NULL, 0));
  ck_assert(nonneg("(N - 1)*(N - 1)", NULL, 0) == false);   /* sound, not complete */
  ck_assert(!nonneg("-1", NULL, 0));
  ck_assert(!nonneg("N - 1", NULL, 0));
  ck_assert(!nonneg("N - M", NULL, 0));
  ck_assert(!nonneg("6 - N % 8", NULL, 0));
  ck_assert(!nonneg("(N - 3)/4", NULL, 0));
  ck_assert(!nonneg("min(N - 1, M)", NULL, 0));
  ck_assert(!nonneg("N/M", NULL, 0));
  ck_assert(!nonneg("M - max(N, M)", NULL, 0));
}
END_TEST

START_TEST(test_nonneg_facts) {
  const char *f1[] = {"N - 1"};
  ck_assert(nonneg("N - 1", f1, 1));
  ck_assert(!nonneg("N - 2", f1, 1));
  ck_assert(nonneg("N*N - 1", f1, 1));
  ck_assert(nonneg("(N - 1)/2", f1, 1));
  const char *f2[] = {"H - R"};
  ck_assert(nonneg("H - R + 1", f2, 1));
  ck_assert(!nonneg("H - R - 1", f2, 1));
  /* h < H - R + 1 and r < R give h + r < H */
  const char *f3[] = {"H - R - h", "R - 1 - r"};
  ck_assert(nonneg("H - 1 - (h + r)", f3, 2));
  ck_assert(!nonneg("H - 2 - (h + r)", f3, 2));
  /* facts that are not lower bounds on a variable are used by subtraction */
  const char *f4[] = {"8 - 2*K"};
  ck_assert(nonneg("9 - 2*K", f4, 1));
  ck_assert(nonneg("16 - 4*K", f4, 1));
  ck_assert(!nonneg("8 - 3*K", f4, 1));
  /* i < N/2 gives 2*i + 1 < N */
  const char *f5[] = {"N/2 - 1 - i"};
  ck_assert(nonneg("N - 2*i - 2", f5, 1));
  ck_assert(!nonneg("N - 2*i - 3", f5, 1));
  /* i < min(N, 4) gives i < 4 */
  const char *f6[] = {"min(N, 4) - 1 - i"};
  ck_assert(nonneg("3 - i", f6, 1));
  ck_assert(nonneg("N - 1 - i", f6, 1));
  ck_assert(!nonneg("2 - i", f6, 1));
  /* a chain: K >= 8 and N >= K */
  const char *f7[] = {"N - K", "K - 8"};
  ck_assert(nonneg("N - 8", f7, 2));
  ck_assert(!nonneg("N - 9", f7, 2));
}
END_TEST

/* ---- overflow ---- */

START_TEST(test_overflow) {
  const Poly *big = P("9223372036854775807");
  /* folding would overflow: the sum stays opaque, printed whole, and is not a constant */
  const Poly *s = poly_add(ctx, big, poly_const(ctx, 1));
  ck_assert(!poly_is_const(s, NULL));
  ck_assert_str_eq(S(s), "1 + 9223372036854775807");
  ck_assert_ptr_eq(s, poly_add(ctx, poly_const(ctx, 1), big));
  ck_assert_str_eq(S(poly_add(ctx, s, P("N"))), "N + (1 + 9223372036854775807)");
  int64_t v;
  const char *why;
  ck_assert(!poly_eval(s, lookup_env, (void *)"", &v, &why));
  ck_assert_str_eq(why, "integer overflow");

  const Poly *n2 = P("4611686018427387904*N");
  const Poly *m = poly_mul(ctx, n2, poly_const(ctx, 2));
  ck_assert_str_eq(S(m), "(4611686018427387904*N)*2");
  ck_assert(ev("4611686018427387904*N*2", "N=0", &v, NULL));
  ck_assert_int_eq(v, 0);
  ck_assert(!ev("4611686018427387904*N*2", "N=1", &v, &why));
  ck_assert_str_eq(why, "integer overflow");

  const Poly *min64 = poly_sub(ctx, poly_const(ctx, -9223372036854775807LL), poly_const(ctx, 1));
  ck_assert_str_eq(S(min64), "-9223372036854775808");
  ck_assert_str_eq(S(poly_neg(ctx, min64)), "(-9223372036854775808)*(-1)");
  ck_assert_str_eq(S(poly_div(ctx, min64, poly_const(ctx, -1))), "(-9223372036854775808)/(-1)");
  ck_assert_str_eq(S(poly_mod(ctx, min64, poly_const(ctx, -1))), "0");
  ck_assert_str_eq(S(poly_div(ctx, P("N"), min64)), "N/(-9223372036854775808)");
  ck_assert_str_eq(S(poly_sub(ctx, P("N"), min64)), "N + ((-9223372036854775808)*(-1))");
  /* cancelling back into range is exact again */
  ck_assert_ptr_eq(poly_sub(ctx, P("9223372036854775807 + N"), P("N + 1")),
                   P("9223372036854775806"));
  /* differences that overflow keep min/max opaque rather than wrong */
  ck_assert_str_eq(S(poly_min(ctx, big, min64)), "-9223372036854775808");
  ck_assert(!nonneg("4611686018427387904*N*4 - 1", NULL, 0));
}
END_TEST

START_TEST(test_many) {
  /* interning survives table growth: build many sizes twice, compare pointers */
  const Poly *first[300];
  char text[64];
  for (int i = 0; i < 300; i++) {
    snprintf(text, sizeof text, "(N + %d)*(M - %d) / %d", i, i, i % 7 + 1);
    first[i] = P(text);
  }
  for (int i = 0; i < 300; i++) {
    snprintf(text, sizeof text, "(M - %d)*(%d + N) / %d", i, i, i % 7 + 1);
    ck_assert_ptr_eq(P(text), first[i]);
  }
}
END_TEST

/* Every rewrite must keep the value: random size expressions, evaluated directly (floor
 * semantics, as in Python) and through their canonical form, at random points. */
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int64_t pt[3];
static const char *const pt_names[3] = {"A", "B", "N"};

static bool lookup_pt(void *env, const char *name, int64_t *v) {
  for (int i = 0; i < 3; i++)
    if (!strcmp(name, pt_names[i])) {
      *v = pt[i];
      return true;
    }
  return false;
}

static int64_t ref_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
static int64_t ref_mod(int64_t a, int64_t b) { return a - b * ref_div(a, b); }

/* Returns the size; *val its value at pt, *ok false where the direct value is undefined. */
static const Poly *random_size(int depth, int64_t *val, bool *ok) {
  int k = depth <= 0 ? (int)(rnd() % 2) : (int)(rnd() % 9);
  if (k == 0) {
    *val = (int64_t)(rnd() % 21) - 10;
    return poly_const(ctx, *val);
  }
  if (k == 1) {
    int i = (int)(rnd() % 3);
    *val = pt[i];
    return poly_var(ctx, pt_names[i]);
  }
  int64_t a, b;
  const Poly *pa = random_size(depth - 1, &a, ok), *pb = random_size(depth - 1, &b, ok);
  switch (k) {
  case 2: *val = a + b; return poly_add(ctx, pa, pb);
  case 3: *val = a - b; return poly_sub(ctx, pa, pb);
  case 4: *val = a * b; return poly_mul(ctx, pa, pb);
  case 5: *ok = *ok && b; *val = b ? ref_div(a, b) : 0; return poly_div(ctx, pa, pb);
  case 6: *ok = *ok && b; *val = b ? ref_mod(a, b) : 0; return poly_mod(ctx, pa, pb);
  case 7: *val = a < b ? a : b; return poly_min(ctx, pa, pb);
  default: *val = a > b ? a : b; return poly_max(ctx, pa, pb);
  }
}

START_TEST(test_random_eval) {
  for (int it = 0; it < 5000; it++) {
    for (int i = 0; i < 3; i++) pt[i] = (int64_t)(rnd() % 31) - 15;
    int64_t want, got;
    bool ok = true;
    const Poly *p = random_size(4, &want, &ok);
    if (!ok) continue;
    const char *why = NULL;
    ck_assert_msg(poly_eval(p, lookup_pt, NULL, &got, &why) && got == want,
                  "%s at A=%lld B=%lld N=%lld: %lld, not %lld (%s)", S(p), (long long)pt[0],
                  (long long)pt[1], (long long)pt[2], (long long)got, (long long)want,
                  why ? why : "");
  }
}
END_TEST

static Suite *poly_suite(void) {
  Suite *s = suite_create("poly");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_equal_forms);
  tcase_add_test(tc, test_is_const_as_var);
  tcase_add_test(tc, test_print);
  tcase_add_test(tc, test_print_round_trip);
  tcase_add_test(tc, test_const_fold_floor);
  tcase_add_test(tc, test_div_mod_simplify);
  tcase_add_test(tc, test_min_max);
  tcase_add_test(tc, test_subst);
  tcase_add_test(tc, test_vars);
  tcase_add_test(tc, test_eval);
  tcase_add_test(tc, test_affine_in);
  tcase_add_test(tc, test_nonneg_plain);
  tcase_add_test(tc, test_nonneg_facts);
  tcase_add_test(tc, test_overflow);
  tcase_add_test(tc, test_many);
  tcase_add_test(tc, test_random_eval);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(poly_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
