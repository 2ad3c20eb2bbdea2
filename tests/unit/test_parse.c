/* test_parse.c -- unit tests for parse.c, the parser.  Expressions are parsed and printed
 * back with parse_print_expr, which adds only the parentheses the tree needs, so a printed
 * form shows how the text was grouped; statements are printed back as source by a small
 * printer here.  Errors are compared exactly as diag_format prints them, and the incomplete
 * flag (the REPL's "read another line") is checked for texts that stop early and for texts
 * that are complete but wrong. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static Arena *arena;
static Diags diags;
static Source src;
static Buf out, msgs;
static bool incomplete;
static int nstmt;

static void setup(void) {
  arena = arena_new();
  memset(&diags, 0, sizeof diags);
}

static void teardown(void) {
  diag_clear(&diags);
  arena_free(arena);
  buf_free(&out);
  buf_free(&msgs);
}

static void set_source(const char *text) {
  diag_clear(&diags);
  src.name = "t.dyn";
  src.len = strlen(text);
  src.text = arena_strndup(arena, text, src.len);
}

static void format_diags(void) {
  buf_free(&msgs);
  buf_puts(&msgs, "");
  for (Diag *d = diags.head; d; d = d->next) diag_format(d, &msgs);
}

/* ---- printing statements back as source ---- */

static void print_type(const TypeExpr *t, Buf *b) {
  switch (t->kind) {
  case TY_SIZE: buf_puts(b, "size"); break;
  case TY_TUPLE:
    buf_putc(b, '(');
    for (int i = 0; i < t->nparts; i++) {
      if (i) buf_puts(b, ", ");
      print_type(t->parts[i], b);
    }
    buf_putc(b, ')');
    break;
  case TY_TENSOR:
    buf_puts(b, elem_name(t->elem));
    if (t->ndims) {
      buf_putc(b, '[');
      for (int i = 0; i < t->ndims; i++) {
        if (i) buf_puts(b, ", ");
        parse_print_expr(t->dims[i], b);
      }
      buf_putc(b, ']');
    }
    break;
  }
}

static void print_names(const Stmt *s, Buf *b) {
  if (s->tuple) buf_putc(b, '(');
  for (int i = 0; i < s->nnames; i++) buf_printf(b, "%s%s", i ? ", " : "", s->names[i]);
  if (s->tuple) buf_putc(b, ')');
}

static void print_stmt(const Stmt *s, Buf *b) {
  switch (s->kind) {
  case ST_FN: {
    const FnDecl *f = s->fn;
    buf_printf(b, "fn %s(", f->name);
    for (int i = 0; i < f->nparams; i++) {
      buf_printf(b, "%s%s: ", i ? ", " : "", f->params[i].name);
      print_type(f->params[i].type, b);
    }
    buf_putc(b, ')');
    if (f->ret) {
      buf_puts(b, " -> ");
      print_type(f->ret, b);
    }
    for (int i = 0; i < f->nfacts; i++) {
      buf_puts(b, i ? ", " : " where ");
      parse_print_expr(f->facts[i], b);
    }
    buf_puts(b, " {");
    for (int i = 0; i < f->nbody; i++) {
      buf_puts(b, i ? "; " : " ");
      print_stmt(f->body[i], b);
    }
    buf_puts(b, " }");
    break;
  }
  case ST_DEF:
    buf_puts(b, s->name);
    if (s->nidx) {
      buf_putc(b, '[');
      for (int i = 0; i < s->nidx; i++) buf_printf(b, "%s%s", i ? ", " : "", s->idx[i]);
      buf_putc(b, ']');
    }
    if (s->annot) {
      buf_puts(b, ": ");
      print_type(s->annot, b);
    }
    buf_puts(b, " = ");
    parse_print_expr(s->expr, b);
    break;
  case ST_ASSIGN:
    print_names(s, b);
    buf_puts(b, " = ");
    parse_print_expr(s->expr, b);
    break;
  case ST_RETURN:
    buf_puts(b, "return ");
    print_names(s, b);
    break;
  case ST_IMPORT:
    buf_printf(b, s->is_path ? "import \"%s\"" : "import %s", s->name);
    break;
  case ST_COMMAND:
    buf_printf(b, ":%s", s->text);
    break;
  case ST_EXPR:
    parse_print_expr(s->expr, b);
    break;
  }
}

/* Parse a whole source: its statements printed one per line; diagnostics in msgs. */
static const char *parse(const char *text) {
  set_source(text);
  incomplete = false;
  Stmt **st = parse_source(arena, &src, &diags, &nstmt, &incomplete);
  buf_free(&out);
  buf_puts(&out, "");
  for (int i = 0; i < nstmt; i++) {
    if (i) buf_putc(&out, '\n');
    print_stmt(st[i], &out);
  }
  format_diags();
  return out.s;
}

/* Parse one expression and print it back; "ERROR" (diagnostics in msgs) if it fails. */
static const char *pe(const char *text) {
  set_source(text);
  Expr *e = parse_expression(arena, &src, &diags);
  buf_free(&out);
  buf_puts(&out, "");
  format_diags();
  if (!e) {
    buf_puts(&out, "ERROR");
    return out.s;
  }
  parse_print_expr(e, &out);
  return out.s;
}

#define PE(text, want) do { ck_assert_str_eq(pe(text), want); ck_assert_str_eq(msgs.s, ""); } while (0)
#define SAME(text) PE(text, text)
#define PARSES(text, want) do { ck_assert_str_eq(parse(text), want); \
    ck_assert_msg(diags.head == NULL, "unexpected diagnostics:\n%s", msgs.s); ck_assert(!incomplete); } while (0)

/* ---- expressions ---- */

START_TEST(test_precedence_levels) {
  /* or < and < not < comparisons < + - < * / % < unary - < **: the printer adds parentheses
   * exactly where the tree goes against these levels, so redundant ones disappear */
  SAME("a or b and c");
  SAME("(a or b) and c");
  PE("a or (b and c)", "a or b and c");
  SAME("not a and b");
  SAME("not (a and b)");
  PE("not (a == b)", "not a == b");
  SAME("(not a) == b");
  SAME("a == b + c");
  SAME("(a == b) + c");
  PE("a < (b + c)", "a < b + c");
  SAME("a + b * c");
  SAME("(a + b) * c");
  PE("(a * b) + c", "a * b + c");
  SAME("a + b % c");
  SAME("a * -b");
  SAME("-a * b");
  SAME("-(a * b)");
  SAME("-a ** 2");                      /* -(a ** 2) */
  SAME("(-a) ** 2");
  PE("-(a ** 2)", "-a ** 2");
  SAME("--x");
  SAME("a <= b and b >= c or not c != d");
  SAME("a > b or a < b");
}
END_TEST

START_TEST(test_associativity) {
  SAME("a - b - c");
  PE("(a - b) - c", "a - b - c");
  SAME("a - (b - c)");
  SAME("a / b * c");
  SAME("a / (b * c)");
  SAME("a % b % c");
  SAME("a % (b % c)");
  SAME("a == b == c");                  /* left to right */
  SAME("a == (b == c)");
  SAME("a and b and c");
  SAME("a and (b and c)");
  /* ** is right-associative */
  SAME("2 ** 3 ** 2");
  PE("2 ** (3 ** 2)", "2 ** 3 ** 2");
  SAME("(2 ** 3) ** 2");
  PE("x ** -y", "x ** (-y)");
}
END_TEST

START_TEST(test_negative_literals) {
  /* -3 folds into the literal, which must still print as it groups */
  PE("-3", "-3");
  PE("- 2.5", "-2.5");
  PE("-(-4)", "4");
  PE("a - -1", "a - -1");
  PE("x * -2", "x * -2");
  SAME("-2 ** 2");                      /* -(2 ** 2) = -4 */
  SAME("(-2) ** 2");                    /* 4: the parentheses must survive the round trip */
  PE("2 ** -1", "2 ** (-1)");
  PE("(-2.5) ** 2 + 1", "(-2.5) ** 2 + 1");
}
END_TEST

START_TEST(test_reductions) {
  SAME("sum[k] A[i, k] * B[k, j]");
  SAME("(sum[k] A[i, k] * B[k, j]) + bias[j]");
  SAME("sum[k] A[i, k] * B[k, j] + bias[j]");     /* the body extends right: bias is inside */
  SAME("sum[k, l] X[k, l]");
  SAME("sum[k < N / 2, l] X[2 * k, l]");          /* a written range */
  SAME("max[k < min(N, 3)] X[k]");
  SAME("max[n] X[b, n]");
  SAME("min[n] X[b, n] - 1");
  SAME("prod[i] v[i]");
  PE("1 + sum[k] x[k] * 2", "1 + (sum[k] x[k] * 2)");
  PE("2 * sum[k] x[k] + 1", "2 * (sum[k] x[k] + 1)");
  SAME("sum[k] x[k] + (sum[l] y[l])");
  SAME("sum[k] max[l] X[k, l]");
  SAME("(max[n] X[b, n]) / (sum[n] X[b, n])");
  /* max(a, b) with parentheses is the elementwise maximum, not a reduction */
  SAME("max(a, b)");
  SAME("max(X[i], 0.0) + 1");
  SAME("min(a, b) * 2");
  /* reduction errors */
  ck_assert_str_eq(pe("sum[1] x"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:5: error: expected a reduction index, found '1'\n"
                           "  1 | sum[1] x\n"
                           "    |     ^\n");
  ck_assert_str_eq(pe("sum[k x"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:7: error: expected ']', found 'x'\n"
                           "  1 | sum[k x\n"
                           "    |       ^\n");
  /* sum used as a plain name is just a name */
  SAME("sum + 1");
  SAME("sum(x)");
}
END_TEST

START_TEST(test_primaries) {
  SAME("X[i, k + 1]");
  SAME("matmul(A, W)");
  SAME("f()");
  PE("f(a, b,)", "f(a, b)");
  SAME("exp(-x)");
  SAME("where(c, a, b)");
  SAME("where(x > 0.0, x, 0.0) * 2");
  SAME("where(i >= P and i < H + P, X[i - P], 0.0)");
  SAME("f64(x)");
  SAME("i32(x + 1) % 3");
  SAME("bool(x)");
  SAME("f64[[1, 2], [3, 4]]");
  SAME("[[1, 2], [3, 4]]");
  SAME("i32[1, 2, 3]");                 /* a type with dimensions 1, 2, 3, not a literal */
  SAME("[]");
  SAME("f32[M, K]");
  SAME("f32");
  SAME("f32[N + 1, 2 * D]");
  SAME("zeros(f32[N, 64])");
  PE("f32[]", "f32");
  SAME("3.5");
  PE("1e-5", "1e-05");
  PE("2.5e3", "2500.0");
  PE("2.0", "2.0");
  SAME("42");
  SAME("inf");
  SAME("-inf");
  SAME("nan");
  SAME("true and not false");
  SAME("\"p.npy\"");
  PE("((x))", "x");
  PE("(\n a +\n b\n)", "a + b");        /* newlines inside parentheses */
  PE("  x  \n", "x");
}
END_TEST

START_TEST(test_expression_errors) {
  ck_assert_str_eq(pe("where(a, b)"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:1: error: 'where' takes 3 arguments but is given 2\n"
                           "  1 | where(a, b)\n"
                           "    | ^~~~~~~~~~~\n");
  ck_assert_str_eq(pe("f64(a, b)"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:1: error: 'f64' takes 1 argument but is given 2\n"
                           "  1 | f64(a, b)\n"
                           "    | ^~~~~~~~~\n");
  ck_assert_str_eq(pe("a +"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:4: error: expected an expression, found end of input\n"
                           "  1 | a +\n"
                           "    |    ^\n");
  ck_assert_str_eq(pe("a b"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:3: error: expected end of input, found 'b'\n"
                           "  1 | a b\n"
                           "    |   ^\n");
  PE("(a)[0]", "a[0]");
  ck_assert_str_eq(pe("(a + b)[0]"), "ERROR");      /* only a name can be indexed */
  ck_assert_str_eq(msgs.s, "t.dyn:1:8: error: expected end of input, found '['\n"
                           "  1 | (a + b)[0]\n"
                           "    |        ^\n");
  ck_assert_str_eq(pe("f(a b)"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:5: error: expected ')', found 'b'\n"
                           "  1 | f(a b)\n"
                           "    |     ^\n");
  ck_assert_str_eq(pe("x * )"), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:5: error: expected an expression, found ')'\n"
                           "  1 | x * )\n"
                           "    |     ^\n");
}
END_TEST

/* ---- statements ---- */

START_TEST(test_functions) {
  PARSES("fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
         "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
         "  return C\n"
         "}",
         "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N] { C[i, j] = sum[k] A[i, k] * B[k, j]; return C }");
  /* where facts, tuple returns, scalar and size parameters */
  PARSES("fn stats(X: f32[N], eps: f32) -> (f32, f32) where N >= 1, N % 2 == 0 {\n"
         "  m = (sum[i] X[i]) / N\n"
         "  v = (sum[i] (X[i] - m) ** 2) / N + eps\n"
         "  return (m, v)\n"
         "}",
         "fn stats(X: f32[N], eps: f32) -> (f32, f32) where N >= 1, N % 2 == 0 "
         "{ m = (sum[i] X[i]) / N; v = (sum[i] (X[i] - m) ** 2) / N + eps; return (m, v) }");
  PARSES("fn pad(X: f32[H, W], P: size) -> f32[H + 2*P, W + 2*P] {\n"
         "  Y[i, j] = where(i >= P and i < H + P and j >= P and j < W + P, X[i - P, j - P], 0.0)\n"
         "  return Y\n"
         "}",
         "fn pad(X: f32[H, W], P: size) -> f32[H + 2 * P, W + 2 * P] "
         "{ Y[i, j] = where(i >= P and i < H + P and j >= P and j < W + P, X[i - P, j - P], 0.0); return Y }");
  /* no return type, an empty parameter list, a body on several lines with blank lines and
   * comments, the brace on the next line, ';' between statements */
  PARSES("fn one()\n{\n\n  # the value\n  Y = 1.0   # a scalar\n\n  return Y\n}",
         "fn one() { Y = 1.0; return Y }");
  PARSES("fn g(X: f32[N]) -> f32[N] { Y[i] = X[i]; return Y }",
         "fn g(X: f32[N]) -> f32[N] { Y[i] = X[i]; return Y }");
  /* a call with a tuple result inside a body */
  PARSES("fn h(X: f32[N]) -> f32 {\n  (m, v) = stats(X, 0.5)\n  s = m + v\n  return s\n}",
         "fn h(X: f32[N]) -> f32 { (m, v) = stats(X, 0.5); s = m + v; return s }");
  PARSES("fn t(X: f32[], P: size) -> ((f32[P], f32), i64) where P > 0 and P < 8 { return X }",
         "fn t(X: f32, P: size) -> ((f32[P], f32), i64) where P > 0 and P < 8 { return X }");
  ck_assert_int_eq(nstmt, 1);
}
END_TEST

START_TEST(test_definitions) {
  PARSES("O[n, h]: f32[N, H - R + 1] = sum[r] X[n, h + r] * Wt[r]",
         "O[n, h]: f32[N, H - R + 1] = sum[r] X[n, h + r] * Wt[r]");
  PARSES("R[n, c]: f32[9, 2] = X[n, c]", "R[n, c]: f32[9, 2] = X[n, c]");
  PARSES("s: f64 = 1", "s: f64 = 1");
  PARSES("T[i] = A[i] * 2", "T[i] = A[i] * 2");
  PARSES("T[] = 1", "T = 1");
  /* definition or expression: decided by what follows the brackets */
  PARSES("T[i] == 1", "T[i] == 1");
  ck_assert_str_eq(parse("T[f(i)] = 1"), "");
  ck_assert_str_eq(msgs.s, "t.dyn:1:4: error: expected ']', found '('\n"
                           "  1 | T[f(i)] = 1\n"
                           "    |    ^\n");
}
END_TEST

START_TEST(test_top_level) {
  PARSES("A = rand(f32[100, 768])\nH = matmul(A, W)\n(Q, R) = qr(H)\nprint(shape(P))",
         "A = rand(f32[100, 768])\nH = matmul(A, W)\n(Q, R) = qr(H)\nprint(shape(P))");
  PARSES("import nn\nimport \"lib/my.dyn\"", "import nn\nimport \"lib/my.dyn\"");
  PARSES(":ir softmax\nx = 1; :type x\n  :sched matmul M=64", ":ir softmax\nx = 1\n:type x\n:sched matmul M=64");
  PARSES("x = 1; y = 2;; z = x + y", "x = 1\ny = 2\nz = x + y");
  PARSES("C = A + 2 * B", "C = A + 2 * B");
  PARSES("(A) = f(x)", "(A) = f(x)");
  PARSES("return x", "return x");
  PARSES("return (a, b)", "return (a, b)");
  PARSES("", "");
  PARSES("\n# nothing\n\n", "");
  PARSES("A = [[1, 2],\n     [3, 4]]", "A = [[1, 2], [3, 4]]");
  PARSES("B = f64[[1.5, 2],\n  [3, 4]]", "B = f64[[1.5, 2], [3, 4]]");
}
END_TEST

/* ---- errors and recovery ---- */

START_TEST(test_recovery) {
  /* every broken statement is reported; the good ones are kept */
  ck_assert_str_eq(parse("x = (1 + )\ny = * 2\nz = 3 4\nw = 5"), "w = 5");
  ck_assert_str_eq(msgs.s,
                   "t.dyn:1:10: error: expected an expression, found ')'\n"
                   "  1 | x = (1 + )\n"
                   "    |          ^\n"
                   "t.dyn:2:5: error: expected an expression, found '*'\n"
                   "  2 | y = * 2\n"
                   "    |     ^\n"
                   "t.dyn:3:7: error: expected end of line, found '4'\n"
                   "  3 | z = 3 4\n"
                   "    |       ^\n");
  ck_assert(!incomplete);
  /* inside a body: the body goes on after each error and the function is kept */
  ck_assert_str_eq(parse("fn f(X: f32[N]) -> f32[N] {\n"
                         "  Y[i] = X[i] + * 2\n"
                         "  Z[i] = ) X[i]\n"
                         "  return Y\n"
                         "}\n"
                         "w = 1"),
                   "fn f(X: f32[N]) -> f32[N] { return Y }\nw = 1");
  ck_assert_str_eq(msgs.s,
                   "t.dyn:2:17: error: expected an expression, found '*'\n"
                   "  2 |   Y[i] = X[i] + * 2\n"
                   "    |                 ^\n"
                   "t.dyn:3:10: error: expected an expression, found ')'\n"
                   "  3 |   Z[i] = ) X[i]\n"
                   "    |          ^\n");
  ck_assert(!incomplete);
  /* errors in a header skip the whole function, braces included */
  ck_assert_str_eq(parse("fn f(X f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  return Y\n}\nfn g(X: f32[N]) -> g32 {\n}\nv = 2"),
                   "v = 2");
  ck_assert_str_eq(msgs.s,
                   "t.dyn:1:8: error: expected ':', found 'f32'\n"
                   "  1 | fn f(X f32[N]) -> f32[N] {\n"
                   "    |        ^~~\n"
                   "t.dyn:5:20: error: expected a type such as f32[N, K], found 'g32'\n"
                   "  5 | fn g(X: f32[N]) -> g32 {\n"
                   "    |                    ^~~\n");
  ck_assert(!incomplete);
}
END_TEST

START_TEST(test_statement_errors) {
  parse("f(x) = 3\nA[1] = 2\n-> x\nfn = 2\nimport 3");
  ck_assert_str_eq(msgs.s,
                   "t.dyn:1:1: error: the left side of '=' must be a name, a name with indices, or a tuple of names\n"
                   "  1 | f(x) = 3\n"
                   "    | ^~~~\n"
                   "t.dyn:2:3: error: an index on the left of a definition must be a name, found '1'\n"
                   "  2 | A[1] = 2\n"
                   "    |   ^\n"
                   "t.dyn:3:1: error: expected a statement, found '->'\n"
                   "  3 | -> x\n"
                   "    | ^~\n"
                   "t.dyn:4:4: error: expected a function name, found '='\n"
                   "  4 | fn = 2\n"
                   "    |    ^\n"
                   "t.dyn:5:8: error: expected a module name or a file name in quotes, found '3'\n"
                   "  5 | import 3\n"
                   "    |        ^\n");
  ck_assert_int_eq(nstmt, 0);
  parse("fn f() {\n  fn g() {\n  }\n  return x\n}\ny = 1");
  ck_assert_str_eq(msgs.s,
                   "t.dyn:2:3: error: functions are defined at top level only\n"
                   "  2 |   fn g() {\n"
                   "    |   ^~\n");
  ck_assert_str_eq(out.s, "fn f() { return x }\ny = 1");
  parse("fn f(X: f32[a, b, c, d, e, f, g, h, i]) -> f32 {\n}");
  ck_assert_str_eq(msgs.s,
                   "t.dyn:1:9: error: a tensor has at most 8 dimensions\n"
                   "  1 | fn f(X: f32[a, b, c, d, e, f, g, h, i]) -> f32 {\n"
                   "    |         ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n");
  ck_assert(!incomplete);
}
END_TEST

START_TEST(test_lexer_errors_not_doubled) {
  /* a statement with a lexical error gets that error only, not a parse error on top */
  ck_assert_str_eq(parse("x = 1 $ 2\ny = 3"), "y = 3");
  ck_assert_str_eq(msgs.s, "t.dyn:1:7: error: unexpected character '$'\n"
                           "  1 | x = 1 $ 2\n"
                           "    |       ^\n");
  ck_assert(!incomplete);
  /* an unterminated string at the end is an error, not a request for more input */
  parse("save(X, \"p.npy");
  ck_assert_int_eq(diags.nerrors, 1);
  ck_assert(!incomplete);
}
END_TEST

START_TEST(test_incomplete) {
  /* the input stops where more is expected: the REPL asks for another line */
  const char *early[] = {
    "fn f(",
    "x = 1 +",
    "x = 1 +\n",
    "t = not",
    "u = 2 **",
    "(a, b) =",
    "x = -",
    "y =",
    "fn f(X: f32[N]) ->",
    "fn f(X: f32[N],",
    "z = a and",
    "A = [1, 2",
    "fn f(X: f32[N]) -> f32[N] {",
    "fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  return Y",
    "fn f(X: f32[N]) -> f32[N]",
    "y = matmul(A,\n  B",
    "z = where(a,",
    "s = sum[k",
    "T[i]: f32[N",
  };
  for (size_t i = 0; i < sizeof early / sizeof early[0]; i++) {
    parse(early[i]);
    ck_assert_msg(incomplete, "'%s' is not incomplete", early[i]);
  }
  /* complete but wrong: an error now, not a continuation */
  const char *wrong[] = {
    "x = 1 + * 2",
    "x = )",
    "A = [1, 2]]",
    "fn f(X) {}",
    "fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  return Y\n}\n}",
    "x = 3 4",
    "f(x) = 1",
    "x = \"abc",
  };
  for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    parse(wrong[i]);
    ck_assert_msg(!incomplete, "'%s' is incomplete", wrong[i]);
    ck_assert_msg(diags.nerrors > 0, "'%s' gave no error", wrong[i]);
  }
  /* what the next line brings completes it */
  ck_assert_str_eq(parse("x = 1 +\n  2\ny = a and\n not b"), "x = 1 + 2\ny = a and not b");
  ck_assert(!incomplete);
  ck_assert_int_eq(diags.nerrors, 0);
  /* complete and right */
  parse("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  return Y\n}");
  ck_assert(!incomplete);
  ck_assert_int_eq(diags.nerrors, 0);
}
END_TEST

START_TEST(test_too_deep) {
  /* 10000 '(' must be an error, not a stack overflow; the text did not stop early in a way
   * more input could fix, so it is not incomplete either */
  enum { N = 10000 };
  char *t = malloc(4 * N + 16);
  strcpy(t, "x = ");
  memset(t + 4, '(', N);
  strcpy(t + 4 + N, "1");
  parse(t);
  ck_assert_int_eq(diags.nerrors, 1);
  ck_assert_ptr_nonnull(strstr(msgs.s, "error: expression nested too deeply"));
  ck_assert(!incomplete);
  /* the same with brackets, unary operators, not, ** chains, calls and tuple types */
  const char *unit[] = {"[", "-", "not ", "2 ** ", "f(", "sum[k] "};
  for (size_t u = 0; u < sizeof unit / sizeof unit[0]; u++) {
    size_t w = strlen(unit[u]);
    strcpy(t, "x = ");
    for (int i = 0; i < N / 2; i++) memcpy(t + 4 + i * w, unit[u], w);
    strcpy(t + 4 + (N / 2) * w, "1");
    parse(t);
    ck_assert_msg(diags.nerrors == 1 && strstr(msgs.s, "expression nested too deeply"), "'%s': %s", unit[u], msgs.s);
  }
  strcpy(t, "fn f() -> ");
  memset(t + 10, '(', N);
  t[10 + N] = 0;
  parse(t);
  ck_assert_msg(diags.nerrors == 1 && strstr(msgs.s, "nested too deeply"), "%s", msgs.s);
  /* a long flat chain builds as tall a tree as deep nesting does */
  strcpy(t, "x = 1");
  for (int i = 0; i < N / 4; i++) strcat(t + 5 + (size_t)i * 4, " + 1");
  parse(t);
  ck_assert_int_eq(diags.nerrors, 1);
  ck_assert_ptr_nonnull(strstr(msgs.s, "t.dyn:1:5: error: expression nested too deeply"));
  free(t);
  /* but ordinary nesting and long-ish chains are fine */
  char ok[4096] = "x = ";
  for (int i = 0; i < 150; i++) strcat(ok, "(");
  strcat(ok, "1");
  for (int i = 0; i < 150; i++) strcat(ok, ")");
  for (int i = 0; i < 300; i++) strcat(ok, "+1");
  parse(ok);
  ck_assert_int_eq(diags.nerrors, 0);
}
END_TEST

START_TEST(test_parse_expression_entry) {
  /* parse_expression is what :type EXPR uses: one expression and nothing else */
  SAME("matmul(A, B)");
  ck_assert_str_eq(pe(""), "ERROR");
  ck_assert_str_eq(msgs.s, "t.dyn:1:1: error: expected an expression, found end of input\n"
                           "  1 | \n"
                           "    | ^\n");
  ck_assert_str_eq(pe("x = 1"), "ERROR");
  ck_assert_ptr_nonnull(strstr(msgs.s, "expected end of input, found '='"));
}
END_TEST

static Suite *parse_suite(void) {
  Suite *s = suite_create("parse");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_precedence_levels);
  tcase_add_test(tc, test_associativity);
  tcase_add_test(tc, test_negative_literals);
  tcase_add_test(tc, test_reductions);
  tcase_add_test(tc, test_primaries);
  tcase_add_test(tc, test_expression_errors);
  tcase_add_test(tc, test_functions);
  tcase_add_test(tc, test_definitions);
  tcase_add_test(tc, test_top_level);
  tcase_add_test(tc, test_recovery);
  tcase_add_test(tc, test_statement_errors);
  tcase_add_test(tc, test_lexer_errors_not_doubled);
  tcase_add_test(tc, test_incomplete);
  tcase_add_test(tc, test_too_deep);
  tcase_add_test(tc, test_parse_expression_entry);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(parse_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
