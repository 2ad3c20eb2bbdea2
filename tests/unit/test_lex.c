/* test_lex.c -- unit tests for lex.c, the lexer.  Each test tokenises a text and compares a
 * printed form of the token stream ("id:x = int:1 NL EOF") and of the diagnostics (exactly
 * as diag_format prints them, with file:line:col and the caret line), so the tests pin the
 * behaviour users see, not the layout of Token.  The punctuation and keyword tests are
 * driven by lang/tokens.def, so a new token row is tested as soon as it is added. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static Arena *arena;
static Diags diags;
static Source src;
static Buf toks, msgs;

static void setup(void) {
  arena = arena_new();
  memset(&diags, 0, sizeof diags);
}

static void teardown(void) {
  diag_clear(&diags);
  arena_free(arena);
  buf_free(&toks);
  buf_free(&msgs);
}

static void put_escaped(Buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\n') buf_puts(b, "\\n");
    else if (*s == '\t') buf_puts(b, "\\t");
    else if (*s == '"') buf_puts(b, "\\\"");
    else if (*s == '\\') buf_puts(b, "\\\\");
    else buf_putc(b, *s);
  }
}

/* Tokenise n bytes of text (n < 0: strlen) as the file "t.dyn".  Returns the tokens printed
 * one after the other; the formatted diagnostics are left in msgs. */
static Token *lex_n(const char *text, int n, int *ntok) {
  diag_clear(&diags);
  src.name = "t.dyn";
  src.len = n < 0 ? strlen(text) : (size_t)n;
  src.text = arena_strndup(arena, text, src.len);
  return lex_source(arena, &src, &diags, ntok);
}

static const char *lexn(const char *text, int n) {
  int nt = 0;
  Token *t = lex_n(text, n, &nt);
  buf_free(&toks);
  buf_puts(&toks, "");
  for (int i = 0; i < nt; i++) {
    if (i) buf_putc(&toks, ' ');
    switch (t[i].kind) {
    case TK_IDENT: buf_printf(&toks, "id:%s", t[i].text); break;
    case TK_NUMBER:
      if (t[i].is_int) buf_printf(&toks, "int:%lld", (long long)t[i].ival);
      else buf_printf(&toks, "num:%.9g", t[i].num);
      break;
    case TK_STRING:
      buf_puts(&toks, "str:\"");
      put_escaped(&toks, t[i].text);
      buf_putc(&toks, '"');
      break;
    case TK_COMMAND:
      buf_puts(&toks, "cmd:\"");
      put_escaped(&toks, t[i].text);
      buf_putc(&toks, '"');
      break;
    case TK_NEWLINE: buf_puts(&toks, "NL"); break;
    case TK_EOF: buf_puts(&toks, "EOF"); break;
    default: buf_puts(&toks, lex_kind_name(t[i].kind)); break;
    }
  }
  buf_free(&msgs);
  buf_puts(&msgs, "");
  for (Diag *d = diags.head; d; d = d->next) diag_format(d, &msgs);
  return toks.s;
}

static const char *lex(const char *text) { return lexn(text, -1); }

/* The byte spans of the tokens, "lo-hi lo-hi ...". */
static const char *spans(const char *text) {
  int nt = 0;
  Token *t = lex_n(text, -1, &nt);
  buf_free(&toks);
  buf_puts(&toks, "");
  for (int i = 0; i < nt; i++) buf_printf(&toks, "%s%u-%u", i ? " " : "", t[i].span.lo, t[i].span.hi);
  return toks.s;
}

#define LEX_IS(text, want) ck_assert_str_eq(lex(text), want)
#define NO_DIAGS() ck_assert_msg(diags.head == NULL, "unexpected diagnostics:\n%s", msgs.s)
#define DIAGS_ARE(want) ck_assert_str_eq(msgs.s, want)

/* ---- every punctuation token and keyword of lang/tokens.def ---- */

static const struct { TokKind kind; const char *spelling; bool kw; } table[] = {
#define T(E, s) {TK_##E, s, false},
#define K(E, s) {TK_##E, s, true},
#include "../../lang/tokens.def"
#undef T
#undef K
};

START_TEST(test_every_token) {
  int tested = 0;
  for (size_t r = 0; r < sizeof table / sizeof table[0]; r++) {
    TokKind k = table[r].kind;
    const char *s = table[r].spelling;
    ck_assert_str_eq(lex_kind_name(k), s);
    if (k == TK_EOF || k == TK_NEWLINE || k == TK_IDENT || k == TK_NUMBER || k == TK_STRING ||
        k == TK_COMMAND || k == TK_SEMI)
      continue;
    /* alone, between names and glued to names: always exactly one token of that kind */
    const char *forms[] = {"%s", "a %s b", "a%sb"};
    for (int f = 0; f < 3; f++) {
      if (f == 2 && table[r].kw) continue;        /* "afnb" is a name */
      if (f == 0 && k == TK_COLON) continue;      /* a line starting with ':' is a command */
      char text[64];
      snprintf(text, sizeof text, forms[f], s);
      int nt = 0;
      Token *t = lex_n(text, -1, &nt);
      ck_assert_msg(diags.head == NULL, "'%s' gave a diagnostic", text);
      int at = f == 0 ? 0 : 1;
      ck_assert_msg(nt > at && t[at].kind == k, "'%s': token %d is not %s", text, at, s);
      ck_assert_uint_eq(t[at].span.hi - t[at].span.lo, strlen(s));
      ck_assert_uint_eq(t[at].span.lo, f == 0 ? 0 : f == 1 ? 2 : 1);
      if (f) ck_assert(t[0].kind == TK_IDENT && t[2].kind == TK_IDENT);
    }
    tested++;
  }
  ck_assert_int_ge(tested, 30);
}
END_TEST

START_TEST(test_keywords_exact) {
  /* keywords are whole, case-sensitive words */
  LEX_IS("fn return where import and or not true false",
         "fn return where import and or not true false NL EOF");
  LEX_IS("fnx Fn _fn return2 notx WHERE", "id:fnx id:Fn id:_fn id:return2 id:notx id:WHERE NL EOF");
  LEX_IS("f32 sum max inf nan size", "id:f32 id:sum id:max id:inf id:nan id:size NL EOF");
  NO_DIAGS();
}
END_TEST

START_TEST(test_longest_match) {
  LEX_IS("a->b**c<=d>=e==f!=g<h>i=j", "id:a -> id:b ** id:c <= id:d >= id:e == id:f != id:g < id:h > id:i = id:j NL EOF");
  LEX_IS("*** x", "** * id:x NL EOF");
  LEX_IS("a--b", "id:a - - id:b NL EOF");
  LEX_IS("x=-1", "id:x = - int:1 NL EOF");
  LEX_IS("=== x", "== = id:x NL EOF");
  LEX_IS("- > x", "- > id:x NL EOF");
  NO_DIAGS();
  ck_assert_str_eq(spans("ab <= 10"), "0-2 3-5 6-8 8-8 8-8");
}
END_TEST

START_TEST(test_identifiers) {
  LEX_IS("_ a1 A_b_2 __x", "id:_ id:a1 id:A_b_2 id:__x NL EOF");
  LEX_IS("1a", "num:0 NL EOF");        /* a malformed number, not a number and a name */
  ck_assert_ptr_nonnull(strstr(msgs.s, "malformed number '1a'"));
}
END_TEST

/* ---- numbers ---- */

START_TEST(test_numbers) {
  LEX_IS("42", "int:42 NL EOF");
  LEX_IS("0 007", "int:0 int:7 NL EOF");
  LEX_IS("3.5", "num:3.5 NL EOF");
  LEX_IS("1e-5", "num:1e-05 NL EOF");
  LEX_IS("2.5e3", "num:2500 NL EOF");
  LEX_IS("1E+2 4e0 3.", "num:100 num:4 num:3 NL EOF");
  LEX_IS("9223372036854775807", "int:9223372036854775807 NL EOF");
  NO_DIAGS();
  /* a float never becomes an integer, even when it is whole */
  int nt;
  Token *t = lex_n("2.0 2", -1, &nt);
  ck_assert(!t[0].is_int && t[0].num == 2.0);
  ck_assert(t[1].is_int && t[1].ival == 2);
  ck_assert_str_eq(t[0].text, "2.0");
  /* a second dot is not part of the number */
  LEX_IS("1.2.3", "num:1.2 int:3 NL EOF");
  DIAGS_ARE("t.dyn:1:4: error: unexpected character '.'\n"
            "  1 | 1.2.3\n"
            "    |    ^\n");
}
END_TEST

START_TEST(test_bad_numbers) {
  LEX_IS("x = 1e + 2", "id:x = num:0 + int:2 NL EOF");
  DIAGS_ARE("t.dyn:1:5: error: malformed number '1e'\n"
            "  1 | x = 1e + 2\n"
            "    |     ^~\n");
  lex("12abc");
  DIAGS_ARE("t.dyn:1:1: error: malformed number '12abc'\n"
            "  1 | 12abc\n"
            "    | ^~~~~\n");
  lex("y = 1e+");
  DIAGS_ARE("t.dyn:1:5: error: malformed number '1e+'\n"
            "  1 | y = 1e+\n"
            "    |     ^~~\n");
  lex("2.5e3x");
  DIAGS_ARE("t.dyn:1:1: error: malformed number '2.5e3x'\n"
            "  1 | 2.5e3x\n"
            "    | ^~~~~~\n");
  /* one past the largest i64 */
  LEX_IS("n = 9223372036854775808", "id:n = num:0 NL EOF");
  DIAGS_ARE("t.dyn:1:5: error: the integer 9223372036854775808 does not fit in 64 bits\n"
            "  1 | n = 9223372036854775808\n"
            "    |     ^~~~~~~~~~~~~~~~~~~\n");
  lex("99999999999999999999999999");
  ck_assert_int_eq(diags.nerrors, 1);
  /* each malformed number is reported, on its own line */
  lex("a = 1e\nb = 2x\nc = 3");
  DIAGS_ARE("t.dyn:1:5: error: malformed number '1e'\n"
            "  1 | a = 1e\n"
            "    |     ^~\n"
            "t.dyn:2:5: error: malformed number '2x'\n"
            "  2 | b = 2x\n"
            "    |     ^~\n");
}
END_TEST

/* ---- strings ---- */

START_TEST(test_strings) {
  LEX_IS("\"p.npy\"", "str:\"p.npy\" NL EOF");
  LEX_IS("\"\"", "str:\"\" NL EOF");
  LEX_IS("\"a\\tb\\nc\\\"d\\\\e\"", "str:\"a\\tb\\nc\\\"d\\\\e\" NL EOF");
  LEX_IS("\"# not a comment\" x", "str:\"# not a comment\" id:x NL EOF");
  LEX_IS("\"(\" \"[\"\nx", "str:\"(\" str:\"[\" NL id:x NL EOF");   /* brackets in strings do not count */
  NO_DIAGS();
  int nt;
  Token *t = lex_n("save(X, \"a\\nb\")", -1, &nt);
  ck_assert_int_eq(t[4].kind, TK_STRING);
  ck_assert_str_eq(t[4].text, "a\nb");                 /* decoded */
  ck_assert_uint_eq(t[4].span.lo, 8);
  ck_assert_uint_eq(t[4].span.hi, 14);                  /* the source text, quotes included */
  t = lex_n("\"caf\xc3\xa9\"", -1, &nt);
  ck_assert_str_eq(t[0].text, "caf\xc3\xa9");
}
END_TEST

START_TEST(test_string_errors) {
  LEX_IS("x = \"abc", "id:x = str:\"abc\" NL EOF");
  DIAGS_ARE("t.dyn:1:5: error: unterminated string\n"
            "  1 | x = \"abc\n"
            "    |     ^~~~\n");
  /* the string stops at the end of its line; the next line lexes normally */
  LEX_IS("x = \"abc\ny = 2", "id:x = str:\"abc\" NL id:y = int:2 NL EOF");
  ck_assert_int_eq(diags.nerrors, 1);
  LEX_IS("\"a\\qb\" + 1", "str:\"ab\" + int:1 NL EOF");
  DIAGS_ARE("t.dyn:1:3: error: unknown escape '\\q' in string\n"
            "  1 | \"a\\qb\" + 1\n"
            "    |   ^~\n");
  lex("\"\\x\\'\"");
  ck_assert_int_eq(diags.nerrors, 2);
  /* a backslash at the end of a line is no escape: the string is unterminated there and
   * the next line is not swallowed */
  LEX_IS("x = \"ab\\\ny = 2", "id:x = str:\"ab\" NL id:y = int:2 NL EOF");
  DIAGS_ARE("t.dyn:1:5: error: unterminated string\n"
            "  1 | x = \"ab\\\n"
            "    |     ^~~~\n");
  lex("x = \"ab\\");
  DIAGS_ARE("t.dyn:1:5: error: unterminated string\n"
            "  1 | x = \"ab\\\n"
            "    |     ^~~~\n");
}
END_TEST

/* ---- comments, newlines, ';' ---- */

START_TEST(test_comments) {
  LEX_IS("x # the input\n# a whole line\ny # end", "id:x NL id:y NL EOF");
  LEX_IS("# only a comment", "EOF");
  LEX_IS("f(a, # first\n  b)", "id:f ( id:a , id:b ) NL EOF");
  LEX_IS("x #\xff\xfe not checked inside comments", "id:x NL EOF");
  NO_DIAGS();
}
END_TEST

START_TEST(test_newlines) {
  LEX_IS("a\n\n\nb\n", "id:a NL id:b NL EOF");            /* blank lines collapse */
  LEX_IS("\n\n  a", "id:a NL EOF");                        /* no leading NL */
  LEX_IS("", "EOF");
  LEX_IS("a\r\nb\r\n", "id:a NL id:b NL EOF");
  LEX_IS("\ta\t=\t1", "id:a = int:1 NL EOF");
  /* inside ( ) and [ ] a newline is insignificant ... */
  LEX_IS("f(a,\n  b)\nc", "id:f ( id:a , id:b ) NL id:c NL EOF");
  LEX_IS("A = [[1, 2],\n     [3, 4]]\nB", "id:A = [ [ int:1 , int:2 ] , [ int:3 , int:4 ] ] NL id:B NL EOF");
  LEX_IS("g([\n1\n])\nx", "id:g ( [ int:1 ] ) NL id:x NL EOF");
  /* ... but not inside { }: a function body has one statement per line */
  LEX_IS("{\na\n}", "{ NL id:a NL } NL EOF");
  LEX_IS("fn f(X: f32[N]) -> f32[N] {\n  Y[i] = X[i]\n  return Y\n}",
         "fn id:f ( id:X : id:f32 [ id:N ] ) -> id:f32 [ id:N ] { NL "
         "id:Y [ id:i ] = id:X [ id:i ] NL return id:Y NL } NL EOF");
  /* a stray closing bracket does not swallow the newlines after it */
  LEX_IS(")\na\nb", ") NL id:a NL id:b NL EOF");
  NO_DIAGS();
}
END_TEST

START_TEST(test_continuation) {
  /* a line that ends with an operator, '=', ',', ':' or '->' goes on at the next line */
  LEX_IS("y = x *\n  2", "id:y = id:x * int:2 NL EOF");
  LEX_IS("y =\n  2", "id:y = int:2 NL EOF");
  LEX_IS("a = 1 +   # more below\n\n  2", "id:a = int:1 + int:2 NL EOF");
  LEX_IS("c = a and\nnot\nb", "id:c = id:a and not id:b NL EOF");
  LEX_IS("u = a <=\nb ** \n2 %\n3", "id:u = id:a <= id:b ** int:2 % int:3 NL EOF");
  LEX_IS("fn f(X: f32[N]) ->\n  f32[N]", "fn id:f ( id:X : id:f32 [ id:N ] ) -> id:f32 [ id:N ] NL EOF");
  LEX_IS("A, B,\nC", "id:A , id:B , id:C NL EOF");
  /* a line that starts with an operator does not continue the one before */
  LEX_IS("x = 1\n- 2", "id:x = int:1 NL - int:2 NL EOF");
  /* at the end of the text there is no newline after an operator: the parser sees the
   * end of the input there, which is what makes the REPL ask for another line */
  LEX_IS("x = 1 +", "id:x = int:1 + EOF");
  LEX_IS("x = 1 +\n", "id:x = int:1 + EOF");
  /* names and closing brackets end a line as usual */
  LEX_IS("x = f(1)\ny = a\nz = b[0]", "id:x = id:f ( int:1 ) NL id:y = id:a NL id:z = id:b [ int:0 ] NL EOF");
  NO_DIAGS();
}
END_TEST

START_TEST(test_semicolon) {
  LEX_IS("a = 1; b = 2", "id:a = int:1 NL id:b = int:2 NL EOF");
  LEX_IS("a;;b;", "id:a NL id:b NL EOF");
  LEX_IS("; a", "id:a NL EOF");
  LEX_IS("{ a; b }", "{ id:a NL id:b } NL EOF");
  NO_DIAGS();
  ck_assert_str_eq(spans("a;b"), "0-1 1-2 2-3 3-3 3-3");
}
END_TEST

/* ---- commands ---- */

START_TEST(test_commands) {
  LEX_IS(":help", "cmd:\"help\" NL EOF");
  LEX_IS("  :ir softmax  \nx", "cmd:\"ir softmax\" NL id:x NL EOF");
  LEX_IS("x = 1\n:vars\n:time y = f(x, \"a # b\")", "id:x = int:1 NL cmd:\"vars\" NL cmd:\"time y = f(x, \\\"a # b\\\")\" NL EOF");
  LEX_IS(":", "cmd:\"\" NL EOF");
  LEX_IS("# comment\n:reset", "cmd:\"reset\" NL EOF");
  LEX_IS("x = 1; :type x", "id:x = int:1 NL cmd:\"type x\" NL EOF");   /* ';' starts a statement */
  NO_DIAGS();
  ck_assert_str_eq(spans("  :ir f \n"), "2-8 8-9 9-9");
  /* ':' elsewhere is punctuation: in a line, inside braces, inside brackets */
  LEX_IS("a : b", "id:a : id:b NL EOF");
  LEX_IS("fn f() {\n:x\n}", "fn id:f ( ) { NL : id:x NL } NL EOF");
  LEX_IS("f(\n:x)", "id:f ( : id:x ) NL EOF");
  LEX_IS("O[n]: f32[N] = 1", "id:O [ id:n ] : id:f32 [ id:N ] = int:1 NL EOF");
  /* after a body closes, commands work again */
  LEX_IS("fn f() {\n}\n:vars", "fn id:f ( ) { NL } NL cmd:\"vars\" NL EOF");
  NO_DIAGS();
}
END_TEST

/* ---- bad characters and bad UTF-8 ---- */

START_TEST(test_bad_characters) {
  LEX_IS("x = 1 $", "id:x = int:1 NL EOF");
  DIAGS_ARE("t.dyn:1:7: error: unexpected character '$'\n"
            "  1 | x = 1 $\n"
            "    |       ^\n");
  LEX_IS("a ! b", "id:a id:b NL EOF");
  DIAGS_ARE("t.dyn:1:3: error: unexpected character '!'\n"
            "  1 | a ! b\n"
            "    |   ^\n");
  lex("x\n  y = @ + ?");
  DIAGS_ARE("t.dyn:2:7: error: unexpected character '@'\n"
            "  2 |   y = @ + ?\n"
            "    |       ^\n"
            "t.dyn:2:11: error: unexpected character '?'\n"
            "  2 |   y = @ + ?\n"
            "    |           ^\n");
  lex("a\x01");
  DIAGS_ARE("t.dyn:1:2: error: unexpected character '\\x01'\n"
            "  1 | a\x01\n"
            "    |  ^\n");
  /* a tab is shown as a space so the caret lines up */
  lex("\tz = `");
  DIAGS_ARE("t.dyn:1:6: error: unexpected character '`'\n"
            "  1 |  z = `\n"
            "    |      ^\n");
  /* a valid multi-byte character is named whole and counts as one column */
  lex("x = \xc3\xa9 + $");
  DIAGS_ARE("t.dyn:1:5: error: unexpected character '\xc3\xa9'\n"
            "  1 | x = \xc3\xa9 + $\n"
            "    |     ^\n"
            "t.dyn:1:9: error: unexpected character '$'\n"
            "  1 | x = \xc3\xa9 + $\n"
            "    |         ^\n");
  lex("\xe2\x88\x91[k] x");         /* U+2211 N-ARY SUMMATION */
  DIAGS_ARE("t.dyn:1:1: error: unexpected character '\xe2\x88\x91'\n"
            "  1 | \xe2\x88\x91[k] x\n"
            "    | ^\n");
}
END_TEST

START_TEST(test_bad_utf8) {
  LEX_IS("x = \xff 1", "id:x = int:1 NL EOF");
  ck_assert_str_eq(msgs.s, "t.dyn:1:5: error: invalid UTF-8 in source\n"
                           "  1 | x = \xff 1\n"
                           "    |     ^\n");
  /* a sequence cut short at the end of the input */
  lexn("ab\xc3", 3);
  ck_assert_int_eq(diags.nerrors, 1);
  ck_assert_ptr_nonnull(strstr(msgs.s, "t.dyn:1:3: error: invalid UTF-8 in source"));
  /* a lead byte followed by a non-continuation byte */
  LEX_IS("\xe2(x)", "( id:x ) NL EOF");
  ck_assert_ptr_nonnull(strstr(msgs.s, "t.dyn:1:1: error: invalid UTF-8 in source"));
  /* overlong forms, surrogates and code points past U+10FFFF are invalid, each reported
   * once for the whole sequence and never echoed as a character */
  const char *bad[] = {"\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x80\x80\xaf",
                       "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\x80", "\x80\x80\x80"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[32];
    snprintf(text, sizeof text, "a %s b", bad[i]);
    ck_assert_str_eq(lex(text), "id:a id:b NL EOF");
    ck_assert_msg(diags.nerrors == 1 && strstr(msgs.s, "t.dyn:1:3: error: invalid UTF-8 in source"),
                  "sequence %zu:\n%s", i, msgs.s);
  }
  /* the largest valid code point and a 4-byte character are characters, not bad UTF-8 */
  lex("\xf4\x8f\xbf\xbf \xf0\x9f\x98\x80");
  ck_assert_int_eq(diags.nerrors, 2);
  ck_assert_ptr_null(strstr(msgs.s, "invalid UTF-8"));
  /* a NUL byte inside the text is a bad character, not the end of the input */
  ck_assert_str_eq(lexn("a\0b", 3), "id:a id:b NL EOF");
  ck_assert_ptr_nonnull(strstr(msgs.s, "unexpected character '\\x00'"));
}
END_TEST

START_TEST(test_spans_and_lines) {
  /* line and column come from the span, and count characters, not bytes */
  int nt;
  Token *t = lex_n("a = 1\n  bb = 22\n", -1, &nt);
  const char *pos[] = {"1:1", "1:3", "1:5", "1:6", "2:3", "2:6", "2:8", "2:10", "3:1"};
  ck_assert_int_eq(nt, 9);
  for (int i = 0; i < nt; i++) {
    int l, c;
    span_linecol(t[i].span, &l, &c);
    char got[16];
    snprintf(got, sizeof got, "%d:%d", l, c);
    ck_assert_msg(!strcmp(got, pos[i]), "token %d at %s, not %s", i, got, pos[i]);
  }
}
END_TEST

static Suite *lex_suite(void) {
  Suite *s = suite_create("lex");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_every_token);
  tcase_add_test(tc, test_keywords_exact);
  tcase_add_test(tc, test_longest_match);
  tcase_add_test(tc, test_identifiers);
  tcase_add_test(tc, test_numbers);
  tcase_add_test(tc, test_bad_numbers);
  tcase_add_test(tc, test_strings);
  tcase_add_test(tc, test_string_errors);
  tcase_add_test(tc, test_comments);
  tcase_add_test(tc, test_newlines);
  tcase_add_test(tc, test_continuation);
  tcase_add_test(tc, test_semicolon);
  tcase_add_test(tc, test_commands);
  tcase_add_test(tc, test_bad_characters);
  tcase_add_test(tc, test_bad_utf8);
  tcase_add_test(tc, test_spans_and_lines);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(lex_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
