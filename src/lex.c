/* lex.c -- the lexer: source text to tokens (lang/tokens.def).
 * Statements end at a newline or ';', except inside ( ) and [ ] and after a line that ends
 * with an operator, where newlines are insignificant.  A top-level line starting with ':' is a command and becomes a single token
 * holding the rest of the line, so commands can take free-form arguments. */
#include "config.h"
#include "dyn_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_names[] = {
#define T(E, s) s,
#define K(E, s) s,
#include "../lang/tokens.def"
#undef T
#undef K
};

static const struct { const char *kw; TokKind kind; } keywords[] = {
#define T(E, s)
#define K(E, s) {s, TK_##E},
#include "../lang/tokens.def"
#undef T
#undef K
};

const char *lex_kind_name(TokKind k) { return kind_names[k]; }

typedef struct {
  Arena *a;
  const Source *src;
  Diags *d;
  const char *t;
  size_t len, pos;
  int depth;          /* open ( and [ */
  int braces;         /* open { */
  bool line_start;
  VEC(Token) toks;
} Lexer;

static Span mk(Lexer *L, size_t lo, size_t hi) {
  const Source *p = L->src->parent;
  if (p) return (Span){p, (uint32_t)lo + L->src->base, (uint32_t)hi + L->src->base};
  return (Span){L->src, (uint32_t)lo, (uint32_t)hi};
}

static void push(Lexer *L, TokKind k, size_t lo, size_t hi) {
  Token t = {0};
  t.kind = k;
  t.span = mk(L, lo, hi);
  vec_push(L->toks, t);
}

static void lex_number(Lexer *L) {
  size_t lo = L->pos, p = lo;
  const char *t = L->t;
  bool isf = false;
  while (p < L->len && isdigit((unsigned char)t[p])) p++;
  if (p < L->len && t[p] == '.') {
    isf = true;
    p++;
    while (p < L->len && isdigit((unsigned char)t[p])) p++;
  }
  bool bad = false;
  if (p < L->len && (t[p] == 'e' || t[p] == 'E')) {
    isf = true;
    p++;
    if (p < L->len && (t[p] == '+' || t[p] == '-')) p++;
    if (p >= L->len || !isdigit((unsigned char)t[p])) bad = true;
    while (p < L->len && isdigit((unsigned char)t[p])) p++;
  }
  while (p < L->len && (isalnum((unsigned char)t[p]) || t[p] == '_')) {
    bad = true;        /* 12abc */
    p++;
  }
  char *s = arena_strndup(L->a, t + lo, p - lo);
  L->pos = p;
  Token tok = {0};
  tok.kind = TK_NUMBER;
  tok.span = mk(L, lo, p);
  tok.text = s;
  if (bad) {
    diag_report(L->d, tok.span, E_BAD_NUMBER, s);
  } else if (isf) {
    tok.num = strtod(s, NULL);
  } else {
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) {
      diag_report(L->d, tok.span, E_INT_RANGE, s);
    } else {
      tok.is_int = true;
      tok.ival = v;
      tok.num = (double)v;
    }
  }
  vec_push(L->toks, tok);
}

static void lex_string(Lexer *L) {
  size_t lo = L->pos, p = lo + 1;
  Buf b = {0};
  buf_puts(&b, "");
  for (;;) {
    if (p >= L->len || L->t[p] == '\n') {
      diag_report(L->d, mk(L, lo, p), E_UNTERMINATED);
      break;
    }
    char c = L->t[p++];
    if (c == '"') break;
    if (c == '\\') {
      if (p >= L->len || L->t[p] == '\n') continue;   /* no escape: the string ends unterminated */
      char e = L->t[p++];
      switch (e) {
      case 'n': buf_putc(&b, '\n'); break;
      case 't': buf_putc(&b, '\t'); break;
      case '"': buf_putc(&b, '"'); break;
      case '\\': buf_putc(&b, '\\'); break;
      default:
        diag_report(L->d, mk(L, p - 2, p), E_BAD_ESCAPE, e);
      }
      continue;
    }
    buf_putc(&b, c);
  }
  Token tok = {0};
  tok.kind = TK_STRING;
  tok.span = mk(L, lo, p);
  tok.text = arena_strndup(L->a, b.s, b.len);
  buf_free(&b);
  L->pos = p;
  vec_push(L->toks, tok);
}

/* A line that ends with an operator, '=', ',' or '->' continues on the next line, so
 * `y = x *` at the end of a REPL line asks for more instead of failing. */
static bool continues(TokKind k) {
  switch (k) {
  case TK_PLUS: case TK_MINUS: case TK_STAR: case TK_SLASH: case TK_PERCENT: case TK_POW:
  case TK_EQ: case TK_NE: case TK_LT: case TK_LE: case TK_GT: case TK_GE:
  case TK_AND: case TK_OR: case TK_NOT: case TK_ASSIGN: case TK_COMMA: case TK_ARROW: case TK_COLON:
    return true;
  default:
    return false;
  }
}

static void newline(Lexer *L, size_t lo, size_t hi) {
  if (L->depth == 0 && L->toks.n && L->toks.a[L->toks.n - 1].kind != TK_NEWLINE &&
      !continues(L->toks.a[L->toks.n - 1].kind))
    push(L, TK_NEWLINE, lo, hi);
}

Token *lex_source(Arena *a, const Source *src, Diags *d, int *ntok) {
  Lexer L = {.a = a, .src = src, .d = d, .t = src->text, .len = src->len, .line_start = true};
  const char *t = L.t;
  while (L.pos < L.len) {
    char c = t[L.pos];
    size_t lo = L.pos;
    if (c == '\n') {
      newline(&L, lo, lo + 1);
      L.pos++;
      L.line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      L.pos++;
      continue;
    }
    if (c == '#') {
      while (L.pos < L.len && t[L.pos] != '\n') L.pos++;
      continue;
    }
    bool at_start = L.line_start;
    L.line_start = false;
    if (c == ':' && at_start && L.depth == 0 && L.braces == 0) {
      size_t p = lo + 1, end;
      bool quoted = false;
      /* the command runs to the end of the line, or to a comment: a '#' after a blank,
       * outside quotes (a file name may contain '#') */
      while (p < L.len && t[p] != '\n') {
        if (t[p] == '"') quoted = !quoted;
        if (t[p] == '#' && !quoted && (t[p - 1] == ' ' || t[p - 1] == '\t')) break;
        p++;
      }
      end = p;
      while (p < L.len && t[p] != '\n') p++;
      Token tok = {0};
      tok.kind = TK_COMMAND;
      tok.span = mk(&L, lo, end);
      size_t e = end;
      while (e > lo + 1 && (t[e - 1] == ' ' || t[e - 1] == '\t' || t[e - 1] == '\r')) e--;
      tok.text = arena_strndup(a, t + lo + 1, e - lo - 1);
      vec_push(L.toks, tok);
      L.pos = p;
      continue;
    }
    if (isdigit((unsigned char)c)) {
      lex_number(&L);
      continue;
    }
    if (isalpha((unsigned char)c) || c == '_') {
      size_t p = lo;
      while (p < L.len && (isalnum((unsigned char)t[p]) || t[p] == '_')) p++;
      Token tok = {0};
      tok.kind = TK_IDENT;
      tok.span = mk(&L, lo, p);
      tok.text = arena_strndup(a, t + lo, p - lo);
      for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
        if (!strcmp(keywords[k].kw, tok.text)) tok.kind = keywords[k].kind;
      vec_push(L.toks, tok);
      L.pos = p;
      continue;
    }
    if (c == '"') {
      lex_string(&L);
      continue;
    }
    char c2 = L.pos + 1 < L.len ? t[L.pos + 1] : 0;
    TokKind k = TK__COUNT;
    int w = 1;
    switch (c) {
    case '(': k = TK_LPAREN; L.depth++; break;
    case ')': k = TK_RPAREN; if (L.depth) L.depth--; break;
    case '[': k = TK_LBRACK; L.depth++; break;
    case ']': k = TK_RBRACK; if (L.depth) L.depth--; break;
    case '{': k = TK_LBRACE; L.braces++; break;
    case '}': k = TK_RBRACE; if (L.braces) L.braces--; break;
    case ',': k = TK_COMMA; break;
    case ':': k = TK_COLON; break;
    case ';':          /* an explicit end: even after an operator */
      if (L.depth > 0) {  /* inside brackets it cannot end anything: the parser names it */
        k = TK_SEMI;
        break;
      }
      if (L.toks.n && L.toks.a[L.toks.n - 1].kind != TK_NEWLINE) push(&L, TK_NEWLINE, lo, lo + 1);
      L.pos++;
      L.line_start = true;
      continue;
    case '+': k = TK_PLUS; break;
    case '-': if (c2 == '>') { k = TK_ARROW; w = 2; } else k = TK_MINUS; break;
    case '*': if (c2 == '*') { k = TK_POW; w = 2; } else k = TK_STAR; break;
    case '/': k = TK_SLASH; break;
    case '%': k = TK_PERCENT; break;
    case '=': if (c2 == '=') { k = TK_EQ; w = 2; } else k = TK_ASSIGN; break;
    case '!': if (c2 == '=') { k = TK_NE; w = 2; } break;
    case '<': if (c2 == '=') { k = TK_LE; w = 2; } else k = TK_LT; break;
    case '>': if (c2 == '=') { k = TK_GE; w = 2; } else k = TK_GT; break;
    }
    if (k == TK__COUNT) {
      int n = utf8_len((const unsigned char *)t + lo, L.len - lo);
      if (n == 0) {        /* one report for a bad lead byte and its continuation bytes */
        n = 1;
        while (n < 4 && lo + (size_t)n < L.len && ((unsigned char)t[lo + (size_t)n] & 0xC0) == 0x80) n++;
        diag_report(d, mk(&L, lo, lo + (size_t)n), E_BAD_UTF8);
      } else {
        char s[8] = {0};
        memcpy(s, t + lo, (size_t)n);
        if (n == 1 && !isprint((unsigned char)c)) snprintf(s, sizeof s, "\\x%02x", (unsigned char)c);
        diag_report(d, mk(&L, lo, lo + (size_t)n), E_BAD_CHAR, s);
      }
      L.pos += (size_t)n;
      continue;
    }
    push(&L, k, lo, lo + (size_t)w);
    L.pos += (size_t)w;
  }
  newline(&L, L.len, L.len);
  push(&L, TK_EOF, L.len, L.len);
  Token *out = arena_alloc(a, sizeof(Token) * (size_t)L.toks.n);
  memcpy(out, L.toks.a, sizeof(Token) * (size_t)L.toks.n);
  *ntok = L.toks.n;
  vec_free(L.toks);
  return out;
}
