/* parse.c -- recursive-descent parser: tokens to the AST of dyn_int.h.
 * Errors are reported and the parser resumes at the next statement boundary, so one run
 * shows every syntax error.  An error at the end of input means the text stopped early
 * (an open bracket, a body, a trailing operator): the parser then sets *incomplete, which
 * the REPL uses to ask for a continuation line instead of reporting. */
#include "config.h"
#include "dyn_int.h"

#include <math.h>
#include <string.h>

#define MAX_DEPTH 200       /* nesting: parentheses, brackets, unary operators, ** */
#define MAX_HEIGHT 1000     /* the height of an expression's tree, chains of operators included */

typedef struct {
  Arena *a;
  Diags *d;
  Token *t;
  int n, i;
  bool failed;          /* an error in the current statement: stop and resynchronise */
  bool incomplete;
  int depth;
  uint32_t stmt_lo;     /* where the statement being parsed starts */
  const uint32_t *lex_errs; int nlex_errs;   /* offsets of the lexer's errors */
} Parser;

static Token *peek(Parser *P) { return &P->t[P->i]; }
static Token *peek2(Parser *P) { return &P->t[P->i + 1 < P->n ? P->i + 1 : P->n - 1]; }
static bool at(Parser *P, TokKind k) { return P->t[P->i].kind == k; }
static Token *next(Parser *P) {
  Token *t = &P->t[P->i];
  if (t->kind != TK_EOF) P->i++;
  return t;
}
static bool accept(Parser *P, TokKind k) {
  if (!at(P, k)) return false;
  next(P);
  return true;
}

static const char *describe(Parser *P, Token *t) {
  switch (t->kind) {
  case TK_IDENT: return arena_printf(P->a, "'%s'", t->text);
  case TK_NUMBER: return arena_printf(P->a, "'%s'", t->text);
  case TK_STRING: return "a string";
  case TK_EOF: return "end of input";
  case TK_NEWLINE: return "end of line";
  case TK_COMMAND: return "a command";
  default: return arena_printf(P->a, "'%s'", lex_kind_name(t->kind));
  }
}

/* Report at the current token (once per statement). */
static void fail(Parser *P, DiagId id, const char *what) {
  if (P->failed) return;
  P->failed = true;
  Token *t = peek(P);
  /* A statement with a lexical error already has its diagnostic: what the parser makes of
   * the remains would only be noise. */
  for (int i = 0; i < P->nlex_errs; i++)
    if (P->lex_errs[i] >= P->stmt_lo && P->lex_errs[i] <= t->span.hi) return;
  if (t->kind == TK_EOF) P->incomplete = true;
  if (id == E_EXPECTED)
    diag_report(P->d, t->span, id, what, describe(P, t));
  else
    diag_report(P->d, t->span, id, describe(P, t));
}

static bool expect(Parser *P, TokKind k) {
  if (accept(P, k)) return true;
  fail(P, E_EXPECTED, arena_printf(P->a, "'%s'", lex_kind_name(k)));
  return false;
}

static Expr *new_expr(Parser *P, ExprKind k, Span s) {
  Expr *e = arena_alloc(P->a, sizeof *e);
  e->kind = k;
  e->span = s;
  return e;
}

static Expr *parse_expr(Parser *P);

/* ExprList ::= ( Expr ( ',' Expr )* ','? )?   and then `close`, ')' or ']'.
 * Newlines are already gone inside ( and [. */
static Expr **parse_items(Parser *P, TokKind close, int *n, Expr *(*item)(Parser *));
static Expr **parse_list(Parser *P, TokKind close, int *n) { return parse_items(P, close, n, parse_expr); }

/* The same with `item` parsing each item (a subscript may be a slice). */
static Expr **parse_items(Parser *P, TokKind close, int *n, Expr *(*item)(Parser *)) {
  VEC(Expr *) v = {0};
  if (!at(P, close)) {
    do {
      if (at(P, close)) break;            /* trailing comma */
      Expr *e = item(P);
      if (!e) break;
      vec_push(v, e);
    } while (accept(P, TK_COMMA));
  }
  expect(P, close);
  Expr **out = arena_alloc(P->a, sizeof(Expr *) * (size_t)(v.n ? v.n : 1));
  if (v.n) memcpy(out, v.a, sizeof(Expr *) * (size_t)v.n);
  *n = v.n;
  vec_free(v);
  return out;
}

static Span prev_span(Parser *P) { return P->t[P->i > 0 ? P->i - 1 : 0].span; }

/* Give an untyped tensor literal the element type el when its numbers can be written in it
 * directly (any number in a float type; integers only in an integer type).  True if done. */
static bool literal_leaves_fit(const Expr *e, DynElem el) {
  if (e->kind == EX_LIST) {
    for (int i = 0; i < e->nargs; i++)
      if (!literal_leaves_fit(e->args[i], el)) return false;
    return true;
  }
  if (e->kind == EX_NUM) return elem_is_float(el) || (elem_is_int(el) && e->is_int);
  return e->kind == EX_BOOL && el == DYN_BOOL;
}

static bool type_literal(Expr *e, DynElem el) {
  if (e->kind != EX_LIST || e->has_elem || !e->nargs || !literal_leaves_fit(e, el)) return false;
  e->elem = el;
  e->has_elem = true;
  return true;
}

/* Scan ::= 'scan' '[' IDENT ']' ( '+' | '*' | 'max' | 'min' ) '(' Expr ')'
 * scan[j] +(body): the running combination of body along the left index j.  The operator
 * is + * max or min, and the body is parenthesised, so that where it ends is never in doubt
 * (a reduction's body extends to the right).  Whether j is a left index, and whether the
 * scan is the whole right-hand side, is the checker's (sema.c). */
static Expr *parse_scan(Parser *P, Token *t) {
  next(P);                                      /* '[' */
  Token *it = peek(P);
  if (it->kind != TK_IDENT) {
    fail(P, E_EXPECTED, "the index to scan along");
    return NULL;
  }
  next(P);
  if (!expect(P, TK_RBRACK)) return NULL;
  Expr *e = new_expr(P, EX_SCAN, t->span);
  Token *o = peek(P);
  if (o->kind == TK_PLUS) e->red = RED_SUM;
  else if (o->kind == TK_STAR) e->red = RED_PROD;
  else if (o->kind == TK_IDENT && !strcmp(o->text, "max")) e->red = RED_MAX;
  else if (o->kind == TK_IDENT && !strcmp(o->text, "min")) e->red = RED_MIN;
  else {
    fail(P, E_EXPECTED, "'+', '*', max or min after scan[...]");
    return NULL;
  }
  next(P);
  if (!expect(P, TK_LPAREN)) return NULL;
  Expr *body = parse_expr(P);
  if (!body || !expect(P, TK_RPAREN)) return NULL;
  e->nridx = 1;
  e->ridx = arena_alloc(P->a, sizeof(char *));
  e->ridx_span = arena_alloc(P->a, sizeof(Span));
  e->ridx[0] = it->text;
  e->ridx_span[0] = it->span;
  e->args = arena_alloc(P->a, sizeof(Expr *));
  e->args[0] = body;
  e->nargs = 1;
  e->span = span_join(t->span, prev_span(P));
  return e;
}

/* Primary   ::= NUMBER | STRING | 'true' | 'false' | 'inf' | 'nan' | '(' Expr ')' | List
 *             | Where | Reduction | Scan | Cast | TypedList | TypeValue | IDENT
 * List      ::= '[' ExprList ']'
 * Where     ::= 'where' '(' ExprList ')'                  (3 items)
 * Reduction ::= RedOp '[' RedIndex ( ',' RedIndex )* ']' Expr
 * RedIndex  ::= IDENT ( '<' Expr )?
 * Cast      ::= ElemType '(' ExprList ')'                 (1 item)
 * TypedList ::= ElemType List                             (when '[' '[' follows)
 * TypeValue ::= ElemType ( '[' ExprList ']' )?
 * RedOp, ElemType, inf and nan are IDENTs, told apart here by their text. */
static Expr *parse_primary(Parser *P) {
  Token *t = peek(P);
  Expr *e;
  switch (t->kind) {
  case TK_NUMBER:
    next(P);
    e = new_expr(P, EX_NUM, t->span);
    e->num = t->num;
    e->ival = t->ival;
    e->is_int = t->is_int;
    return e;
  case TK_STRING:
    next(P);
    e = new_expr(P, EX_STR, t->span);
    e->name = t->text;
    return e;
  case TK_TRUE:
  case TK_FALSE:
    next(P);
    e = new_expr(P, EX_BOOL, t->span);
    e->ival = t->kind == TK_TRUE;
    return e;
  case TK_LPAREN: {
    next(P);
    Expr *in = parse_expr(P);
    if (!in) return NULL;
    if (!expect(P, TK_RPAREN)) return NULL;
    in->span = span_join(t->span, prev_span(P));
    return in;
  }
  case TK_LBRACK: {
    next(P);
    e = new_expr(P, EX_LIST, t->span);
    e->args = parse_list(P, TK_RBRACK, &e->nargs);
    e->span = span_join(t->span, prev_span(P));
    return P->failed ? NULL : e;
  }
  case TK_WHERE: {
    next(P);
    e = new_expr(P, EX_WHERE, t->span);
    if (!expect(P, TK_LPAREN)) return NULL;
    e->args = parse_list(P, TK_RPAREN, &e->nargs);
    e->span = span_join(t->span, prev_span(P));
    if (!P->failed && e->nargs != 3) {
      diag_report(P->d, e->span, E_ARG_COUNT, "where", 3, "s", e->nargs);
      P->failed = true;
    }
    return P->failed ? NULL : e;
  }
  case TK_IDENT: {
    next(P);
    const char *nm = t->text;
    DynElem el;
    if (!strcmp(nm, "scan") && at(P, TK_LBRACK)) return parse_scan(P, t);
    bool isred = !strcmp(nm, "sum") || !strcmp(nm, "max") || !strcmp(nm, "min") || !strcmp(nm, "prod");
    if (isred && at(P, TK_LBRACK)) {
      /* sum[k, l] body -- the body extends as far right as possible */
      next(P);
      e = new_expr(P, EX_REDUCE, t->span);
      e->red = nm[0] == 's' ? RED_SUM : nm[0] == 'p' ? RED_PROD : nm[1] == 'a' ? RED_MAX : RED_MIN;
      VEC(const char *) names = {0};
      VEC(Span) spans = {0};
      VEC(Expr *) bounds = {0};
      bool any_bound = false;
      do {
        Token *it = peek(P);
        if (it->kind != TK_IDENT) {
          fail(P, E_EXPECTED, "a reduction index");
          break;
        }
        next(P);
        vec_push(names, it->text);
        vec_push(spans, it->span);
        Expr *bound = NULL;
        if (accept(P, TK_LT)) {               /* sum[k < N/2]: the range given, not inferred */
          bound = parse_expr(P);
          if (!bound) break;
          any_bound = true;
        }
        vec_push(bounds, bound);
      } while (accept(P, TK_COMMA));
      if (!P->failed) expect(P, TK_RBRACK);
      e->nridx = names.n;
      e->ridx = arena_alloc(P->a, sizeof(char *) * (size_t)(names.n + 1));
      e->ridx_span = arena_alloc(P->a, sizeof(Span) * (size_t)(names.n + 1));
      if (names.n) {
        memcpy(e->ridx, names.a, sizeof(char *) * (size_t)names.n);
        memcpy(e->ridx_span, spans.a, sizeof(Span) * (size_t)names.n);
      }
      if (any_bound && bounds.n == names.n) {
        e->rbound = arena_alloc(P->a, sizeof(Expr *) * (size_t)(names.n + 1));
        memcpy(e->rbound, bounds.a, sizeof(Expr *) * (size_t)names.n);
      }
      vec_free(names);
      vec_free(spans);
      vec_free(bounds);
      if (P->failed) return NULL;
      Expr *body = parse_expr(P);
      if (!body) return NULL;
      e->args = arena_alloc(P->a, sizeof(Expr *));
      e->args[0] = body;
      e->nargs = 1;
      e->span = span_join(t->span, body->span);
      return e;
    }
    if (elem_from_name(nm, strlen(nm), &el)) {
      if (at(P, TK_LPAREN)) {                     /* a cast: f64(x) */
        next(P);
        e = new_expr(P, EX_CAST, t->span);
        e->elem = el;
        e->has_elem = true;
        e->args = parse_list(P, TK_RPAREN, &e->nargs);
        e->span = span_join(t->span, prev_span(P));
        if (!P->failed && e->nargs != 1) {
          diag_report(P->d, e->span, E_ARG_COUNT, nm, 1, "", e->nargs);
          P->failed = true;
        }
        /* f64([0.1, 0.2]) is a literal made in f64, not one made in f32 and converted */
        if (!P->failed && type_literal(e->args[0], el)) {
          e->args[0]->span = e->span;
          return e->args[0];
        }
        return P->failed ? NULL : e;
      }
      if (at(P, TK_LBRACK) && peek2(P)->kind == TK_LBRACK) {   /* f64[[1, 2], [3, 4]] */
        next(P);
        e = new_expr(P, EX_LIST, t->span);
        e->elem = el;
        e->has_elem = true;
        e->args = parse_list(P, TK_RBRACK, &e->nargs);
        e->span = span_join(t->span, prev_span(P));
        return P->failed ? NULL : e;
      }
      e = new_expr(P, EX_TYPE, t->span);                       /* f32[M, K] or f32 */
      e->elem = el;
      e->has_elem = true;
      if (accept(P, TK_LBRACK)) {
        e->args = parse_list(P, TK_RBRACK, &e->nargs);
        e->span = span_join(t->span, prev_span(P));
      }
      return P->failed ? NULL : e;
    }
    if (!strcmp(nm, "inf") || !strcmp(nm, "nan")) {
      e = new_expr(P, EX_NUM, t->span);
      e->num = nm[0] == 'i' ? INFINITY : NAN;
      return e;
    }
    e = new_expr(P, EX_NAME, t->span);
    e->name = nm;
    e->name_span = t->span;
    return e;
  }
  default:
    fail(P, E_EXPECTED_EXPR, NULL);
    return NULL;
  }
}

Expr *slice_part(const Expr *e, int part) {
  int k = 0;
  for (int i = 0; i < part; i++) k += (int)(e->ival >> i) & 1;
  return (e->ival >> part) & 1 ? e->args[k] : NULL;
}

bool expr_is_slice(const Expr *e) {
  if (e->kind != EX_INDEX) return false;
  for (int i = 0; i < e->nargs; i++)
    if (e->args[i]->kind == EX_SLICE) return true;
  return false;
}

/* Subscript ::= Expr | Expr? ':' Expr? ( ':' Expr? )?     X[1:N-1, :, ::2] */
static Expr *parse_subscript(Parser *P) {
  Token *t = peek(P);
  Expr *parts[3] = {0};
  if (!at(P, TK_COLON)) {
    parts[0] = parse_expr(P);
    if (!parts[0] || !at(P, TK_COLON)) return parts[0];
  }
  next(P);
  for (int k = 1; k < 3; k++) {
    if (!at(P, TK_COMMA) && !at(P, TK_RBRACK) && !at(P, TK_COLON)) {
      parts[k] = parse_expr(P);
      if (!parts[k]) return NULL;
    }
    if (k == 1 && !accept(P, TK_COLON)) break;
  }
  Expr *e = new_expr(P, EX_SLICE, span_join(t->span, prev_span(P)));
  e->args = arena_alloc(P->a, 3 * sizeof(Expr *));
  for (int k = 0; k < 3; k++)
    if (parts[k]) {
      e->args[e->nargs++] = parts[k];
      e->ival |= 1 << k;
    }
  return e;
}

/* Postfix ::= IDENT '[' ExprList ']'
 *           | IDENT '(' ExprList ')' ( '[' ExprList ']' )?    softmax(X)[0, 1]
 *           | Primary */
static Expr *parse_postfix(Parser *P) {
  Expr *e = parse_primary(P);
  while (e && (at(P, TK_LBRACK) || at(P, TK_LPAREN))) {
    bool call = at(P, TK_LPAREN);
    /* name(...), name[...], and a call's result indexed: softmax(X)[0, 1] */
    if (e->kind != EX_NAME && !(e->kind == EX_CALL && !call)) break;
    next(P);
    Expr *x = new_expr(P, call ? EX_CALL : EX_INDEX, e->span);
    x->name = e->name;
    x->name_span = e->kind == EX_CALL ? e->name_span : e->span;
    if (e->kind == EX_CALL) x->base = e;
    x->args = call ? parse_list(P, TK_RPAREN, &x->nargs) : parse_items(P, TK_RBRACK, &x->nargs, parse_subscript);
    x->span = span_join(e->span, prev_span(P));
    if (P->failed) return NULL;
    e = x;
  }
  return e;
}

static Expr *binary(Parser *P, OpKind op, Expr *l, Expr *r) {
  Expr *e = new_expr(P, EX_BINARY, span_join(l->span, r->span));
  e->op = op;
  e->args = arena_alloc(P->a, 2 * sizeof(Expr *));
  e->args[0] = l;
  e->args[1] = r;
  e->nargs = 2;
  return e;
}

static Expr *unary(Parser *P, OpKind op, Span at_, Expr *x) {
  Expr *e = new_expr(P, EX_UNARY, span_join(at_, x->span));
  e->op = op;
  e->args = arena_alloc(P->a, sizeof(Expr *));
  e->args[0] = x;
  e->nargs = 1;
  return e;
}

static Expr *parse_unary(Parser *P);

/* One level deeper into the nesting, which MAX_DEPTH bounds (E_TOO_DEEP past it, and false
 * with the depth as it was). */
static bool deeper(Parser *P) {
  if (++P->depth <= MAX_DEPTH) return true;
  fail(P, E_TOO_DEEP, NULL);
  P->depth--;
  return false;
}

/* rule(P) one level deeper; NULL after an error. */
static Expr *nested(Parser *P, Expr *(*rule)(Parser *)) {
  if (!deeper(P)) return NULL;
  Expr *x = rule(P);
  P->depth--;
  return x;
}

/* Power ::= Postfix ( '**' Unary )?      right-associative, and 2 ** -1 parses */
static Expr *parse_pow(Parser *P) {
  Expr *l = parse_postfix(P);
  if (!l) return NULL;
  if (accept(P, TK_POW)) {
    Expr *r = nested(P, parse_unary);  /* a ** b ** c ... nests to the right, and 2 ** -1 works */
    if (!r) return NULL;
    return binary(P, OP_POW, l, r);
  }
  return l;
}

/* Unary ::= '-' Unary | Power            -NUMBER folds into the literal */
static Expr *parse_unary(Parser *P) {
  if (at(P, TK_MINUS)) {
    Span s = next(P)->span;
    Expr *x = nested(P, parse_unary);
    if (!x) return NULL;
    if (x->kind == EX_NUM) {             /* fold -3 into the literal */
      x->num = -x->num;
      x->ival = -x->ival;
      x->span = span_join(s, x->span);
      return x;
    }
    return unary(P, OP_NEG, s, x);
  }
  return parse_pow(P);
}

/* A binary operator of one level of the grammar: its token and the operator it makes. */
typedef struct { TokKind tok; OpKind op; } BinTok;

/* Level ::= Operand ( Op Operand )*, left-associative, with the level's operators in ops
 * (n of them).  NULL after an error. */
static Expr *left_assoc(Parser *P, Expr *(*operand)(Parser *), const BinTok *ops, int n) {
  Expr *l = operand(P);
  while (l) {
    int k = 0;
    while (k < n && !at(P, ops[k].tok)) k++;
    if (k == n) break;
    next(P);
    Expr *r = operand(P);
    if (!r) return NULL;
    l = binary(P, ops[k].op, l, r);
  }
  return l;
}

/* MulExpr ::= Unary ( ( '*' | '/' | '%' ) Unary )* */
static Expr *parse_mul(Parser *P) {
  static const BinTok ops[] = {{TK_STAR, OP_MUL}, {TK_SLASH, OP_DIV}, {TK_PERCENT, OP_MOD}};
  return left_assoc(P, parse_unary, ops, 3);
}

/* AddExpr ::= MulExpr ( ( '+' | '-' ) MulExpr )* */
static Expr *parse_add(Parser *P) {
  static const BinTok ops[] = {{TK_PLUS, OP_ADD}, {TK_MINUS, OP_SUB}};
  return left_assoc(P, parse_mul, ops, 2);
}

/* CmpExpr ::= AddExpr ( CmpOp AddExpr )*
 * CmpOp   ::= '==' | '!=' | '<' | '<=' | '>' | '>=' */
static Expr *parse_cmp(Parser *P) {
  static const BinTok ops[] = {{TK_EQ, OP_EQ}, {TK_NE, OP_NE}, {TK_LT, OP_LT},
                               {TK_LE, OP_LE}, {TK_GT, OP_GT}, {TK_GE, OP_GE}};
  return left_assoc(P, parse_add, ops, 6);
}

/* NotExpr ::= 'not' NotExpr | CmpExpr */
static Expr *parse_not(Parser *P) {
  if (at(P, TK_NOT)) {
    Span s = next(P)->span;
    Expr *x = nested(P, parse_not);
    return x ? unary(P, OP_NOT, s, x) : NULL;
  }
  return parse_cmp(P);
}

/* AndExpr ::= NotExpr ( 'and' NotExpr )* */
static Expr *parse_and(Parser *P) {
  static const BinTok ops[] = {{TK_AND, OP_AND}};
  return left_assoc(P, parse_not, ops, 1);
}

/* Is e's tree taller than MAX_HEIGHT?  A chain a + b + c + ... is built by the loops above
 * without recursion but is as tall as it is long, and every later pass (sema, lowering, the
 * evaluator) recurses on the tree, so the height is bounded here, without recursion. */
static bool too_tall(const Expr *e) {
  typedef struct { const Expr *e; int h; } Item;
  VEC(Item) st = {0};
  Item top = {e, 1};
  vec_push(st, top);
  bool tall = false;
  while (st.n && !tall) {
    Item it = st.a[--st.n];
    if (it.h > MAX_HEIGHT) tall = true;
    for (int i = 0; i < it.e->nargs; i++) {
      Item c = {it.e->args[i], it.h + 1};
      vec_push(st, c);
    }
  }
  vec_free(st);
  return tall;
}

/* Expr ::= AndExpr ( 'or' AndExpr )*
 * The entry to every expression: it bounds the nesting (MAX_DEPTH) and, at the outermost
 * level, the height of the tree (MAX_HEIGHT). */
static Expr *parse_expr(Parser *P) {
  if (!deeper(P)) return NULL;
  Expr *l = parse_and(P);
  while (l && accept(P, TK_OR)) {
    Expr *r = parse_and(P);
    if (!r) {
      l = NULL;
      break;
    }
    l = binary(P, OP_OR, l, r);
  }
  P->depth--;
  if (l && P->depth == 0 && too_tall(l)) {
    if (!P->failed) diag_report(P->d, l->span, E_TOO_DEEP);
    P->failed = true;
    return NULL;
  }
  return l;
}

/* ---- types ---- */

/* Type     ::= ElemType ( '[' ExprList ']' )? | 'size' | '(' Type ( ',' Type )* ')'
 * ElemType ::= 'f32' | 'f64' | 'i32' | 'i64' | 'bool'     (IDENTs, as 'size' is) */
static TypeExpr *parse_type(Parser *P) {
  Token *t = peek(P);
  TypeExpr *ty = arena_alloc(P->a, sizeof *ty);
  ty->span = t->span;
  if (t->kind == TK_LPAREN) {                   /* (f32[N], f32[N]) */
    next(P);
    ty->kind = TY_TUPLE;
    if (!deeper(P)) return NULL;
    VEC(TypeExpr *) v = {0};
    do {
      TypeExpr *p = parse_type(P);
      if (!p) break;
      vec_push(v, p);
    } while (accept(P, TK_COMMA));
    P->depth--;
    expect(P, TK_RPAREN);
    ty->parts = arena_alloc(P->a, sizeof(TypeExpr *) * (size_t)(v.n + 1));
    if (v.n) memcpy(ty->parts, v.a, sizeof(TypeExpr *) * (size_t)v.n);
    ty->nparts = v.n;
    vec_free(v);
    ty->span = span_join(t->span, prev_span(P));
    return P->failed ? NULL : ty;
  }
  DynElem el;
  if (t->kind == TK_IDENT && !strcmp(t->text, "size")) {
    next(P);
    ty->kind = TY_SIZE;
    return ty;
  }
  if (t->kind != TK_IDENT || !elem_from_name(t->text, strlen(t->text), &el)) {
    fail(P, E_BAD_TYPE, NULL);
    return NULL;
  }
  next(P);
  ty->kind = TY_TENSOR;
  ty->elem = el;
  if (accept(P, TK_LBRACK)) {
    ty->dims = parse_list(P, TK_RBRACK, &ty->ndims);
    ty->span = span_join(t->span, prev_span(P));
    if (!P->failed && ty->ndims > DYN_MAX_RANK) {
      diag_report(P->d, ty->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
      P->failed = true;
    }
  }
  return P->failed ? NULL : ty;
}

/* ---- statements ---- */

static Stmt *new_stmt(Parser *P, StmtKind k, Span s) {
  Stmt *st = arena_alloc(P->a, sizeof *st);
  st->kind = k;
  st->span = s;
  return st;
}

static void skip_newlines(Parser *P) {
  while (at(P, TK_NEWLINE)) next(P);
}

static Stmt *parse_stmt(Parser *P, bool in_fn);

/* Skip to the end of the statement: the next newline outside braces, or a closing brace
 * of the body being parsed. */
static void sync(Parser *P, bool in_fn) {
  int braces = 0;
  while (!at(P, TK_EOF)) {
    TokKind k = peek(P)->kind;
    if (k == TK_LBRACE) braces++;
    if (k == TK_RBRACE) {
      if (braces == 0 && in_fn) return;
      if (braces > 0) braces--;
    }
    if (k == TK_NEWLINE && braces == 0) return;
    next(P);
  }
  if (braces > 0) P->incomplete = true;
}

/* Skip the newlines before the next token when that token is k. */
static void newlines_before(Parser *P, TokKind k) {
  int j = P->i;
  while (j < P->n && P->t[j].kind == TK_NEWLINE) j++;
  if (j < P->n && P->t[j].kind == k) P->i = j;
}

/* FnDef  ::= 'fn' IDENT '(' Params? ')' ( END* '->' Type )? ( END* Facts )?
 *            END* '{' Body '}'
 * Params ::= Param ( ',' Param )* ','?
 * Param  ::= IDENT ':' Type
 * Facts  ::= 'where' Expr ( ',' Expr )*
 * Body   ::= END* ( Statement ( END+ Statement )* END* )?
 * Called after 'fn' (at start); a statement in the body with an error is dropped and the
 * body goes on after it. */
static FnDecl *parse_fn(Parser *P, Span start) {
  FnDecl *f = arena_alloc(P->a, sizeof *f);
  Token *nm = peek(P);
  if (nm->kind != TK_IDENT) {
    fail(P, E_EXPECTED, "a function name");
    return NULL;
  }
  next(P);
  f->name = nm->text;
  f->name_span = nm->span;
  if (!expect(P, TK_LPAREN)) return NULL;
  VEC(Param) ps = {0};
  if (!at(P, TK_RPAREN)) {
    do {
      if (at(P, TK_RPAREN)) break;
      Token *pn = peek(P);
      if (pn->kind != TK_IDENT) {
        fail(P, E_EXPECTED, "a parameter name");
        break;
      }
      next(P);
      if (!expect(P, TK_COLON)) break;
      TypeExpr *ty = parse_type(P);
      if (!ty) break;
      Param p = {pn->text, pn->span, ty};
      vec_push(ps, p);
    } while (accept(P, TK_COMMA));
  }
  if (!P->failed) expect(P, TK_RPAREN);
  f->params = arena_alloc(P->a, sizeof(Param) * (size_t)(ps.n + 1));
  if (ps.n) memcpy(f->params, ps.a, sizeof(Param) * (size_t)ps.n);
  f->nparams = ps.n;
  vec_free(ps);
  if (P->failed) return NULL;
  /* a header may go on over lines: `-> T`, `where ...` and `{` may each start a line */
  newlines_before(P, TK_ARROW);
  if (accept(P, TK_ARROW)) {
    f->ret = parse_type(P);
    if (!f->ret) return NULL;
  }
  newlines_before(P, TK_WHERE);
  if (accept(P, TK_WHERE)) {
    VEC(Expr *) fs = {0};
    do {
      Expr *e = parse_expr(P);
      if (!e) break;
      vec_push(fs, e);
    } while (accept(P, TK_COMMA));
    f->facts = arena_alloc(P->a, sizeof(Expr *) * (size_t)(fs.n + 1));
    if (fs.n) memcpy(f->facts, fs.a, sizeof(Expr *) * (size_t)fs.n);
    f->nfacts = fs.n;
    vec_free(fs);
    if (P->failed) return NULL;
  }
  skip_newlines(P);
  if (!expect(P, TK_LBRACE)) return NULL;
  VEC(Stmt *) body = {0};
  for (;;) {
    skip_newlines(P);
    if (at(P, TK_RBRACE) || at(P, TK_EOF)) break;
    Stmt *s = parse_stmt(P, true);
    if (!P->failed && !at(P, TK_RBRACE) && !at(P, TK_EOF) && !accept(P, TK_NEWLINE))
      fail(P, E_EXPECTED, "end of line");
    if (P->failed) {                  /* a statement with an error is dropped */
      sync(P, true);
      P->failed = false;
      continue;
    }
    if (s) vec_push(body, s);
  }
  f->body = arena_alloc(P->a, sizeof(Stmt *) * (size_t)(body.n + 1));
  if (body.n) memcpy(f->body, body.a, sizeof(Stmt *) * (size_t)body.n);
  f->nbody = body.n;
  vec_free(body);
  if (!expect(P, TK_RBRACE)) return NULL;
  f->span = span_join(start, prev_span(P));
  return f;
}

/* Names ::= IDENT | '(' IDENT ( ',' IDENT )* ')'
 * for Return, and for TupleAssign's left side */
static bool parse_names(Parser *P, Stmt *st) {
  VEC(const char *) ns = {0};
  VEC(Span) ss = {0};
  bool paren = accept(P, TK_LPAREN);
  do {
    Token *t = peek(P);
    if (t->kind != TK_IDENT) {
      fail(P, E_EXPECTED, "a name");
      break;
    }
    next(P);
    vec_push(ns, t->text);
    vec_push(ss, t->span);
  } while (paren && accept(P, TK_COMMA));
  if (paren && !P->failed) expect(P, TK_RPAREN);
  st->names = arena_alloc(P->a, sizeof(char *) * (size_t)(ns.n + 1));
  st->name_spans = arena_alloc(P->a, sizeof(Span) * (size_t)(ns.n + 1));
  if (ns.n) {
    memcpy(st->names, ns.a, sizeof(char *) * (size_t)ns.n);
    memcpy(st->name_spans, ss.a, sizeof(Span) * (size_t)ns.n);
  }
  st->nnames = ns.n;
  st->tuple = paren;
  vec_free(ns);
  vec_free(ss);
  return !P->failed;
}

/* Is the text at the cursor `(a, b, ...) =`?  Decides TupleAssign without backtracking
 * the diagnostics. */
static bool looks_like_tuple_assign(Parser *P) {
  int i = P->i;
  if (P->t[i].kind != TK_LPAREN) return false;
  i++;
  for (;;) {
    if (P->t[i].kind != TK_IDENT) return false;
    i++;
    if (P->t[i].kind == TK_COMMA) {
      i++;
      if (P->t[i].kind == TK_EOF) return true;    /* `(a, b` typed so far: more to come */
      continue;
    }
    if (P->t[i].kind == TK_RPAREN) return P->t[i + 1].kind == TK_ASSIGN;
    return P->t[i].kind == TK_EOF;                 /* `(a, b` so far */
  }
}

/* Is the text at the cursor `NAME[i, j] =` or `NAME[i, j]:`, i.e. a Definition? */
static bool looks_like_def(Parser *P) {
  int i = P->i;
  if (P->t[i].kind != TK_IDENT || P->t[i + 1].kind != TK_LBRACK) return false;
  int depth = 0;
  for (i = i + 1; i < P->n; i++) {
    TokKind k = P->t[i].kind;
    if (k == TK_LBRACK) depth++;
    else if (k == TK_RBRACK && --depth == 0) break;
    else if (k == TK_EOF || k == TK_NEWLINE) return false;
  }
  if (i >= P->n - 1) return false;
  TokKind after = P->t[i + 1].kind;
  return after == TK_ASSIGN || after == TK_COLON;
}

/* Definition ::= IDENT ( '[' Indices? ']' )? ( ':' Type )? '=' Expr
 * Indices    ::= IDENT ( ',' IDENT )* */
static Stmt *parse_def(Parser *P) {
  Token *nm = next(P);
  Stmt *st = new_stmt(P, ST_DEF, nm->span);
  st->name = nm->text;
  st->name_span = nm->span;
  VEC(const char *) ix = {0};
  VEC(Span) sp = {0};
  if (accept(P, TK_LBRACK)) {
    if (!at(P, TK_RBRACK)) {
      do {
        Token *t = peek(P);
        if (t->kind != TK_IDENT) {
          if (!P->failed) {
            P->failed = true;
            diag_report(P->d, t->span, E_BAD_INDEX_VAR, describe(P, t));
          }
          break;
        }
        next(P);
        vec_push(ix, t->text);
        vec_push(sp, t->span);
      } while (accept(P, TK_COMMA));
    }
    if (!P->failed) expect(P, TK_RBRACK);
  }
  st->idx = arena_alloc(P->a, sizeof(char *) * (size_t)(ix.n + 1));
  st->idx_span = arena_alloc(P->a, sizeof(Span) * (size_t)(ix.n + 1));
  if (ix.n) {
    memcpy(st->idx, ix.a, sizeof(char *) * (size_t)ix.n);
    memcpy(st->idx_span, sp.a, sizeof(Span) * (size_t)ix.n);
  }
  st->nidx = ix.n;
  vec_free(ix);
  vec_free(sp);
  if (P->failed) return NULL;
  if (accept(P, TK_COLON)) {
    st->annot = parse_type(P);
    if (!st->annot) return NULL;
  }
  if (!expect(P, TK_ASSIGN)) return NULL;
  st->expr = parse_expr(P);
  if (!st->expr) return NULL;
  /* x: f64[2] = [0.1, 0.2] makes the literal in f64 */
  if (st->annot && st->annot->kind == TY_TENSOR && st->nidx == 0) type_literal(st->expr, st->annot->elem);
  st->span = span_join(st->span, st->expr->span);
  return st;
}

/* Statement   ::= FnDef | Import | COMMAND | Return | TupleAssign | Definition
 *               | Assignment | Expr
 * Import      ::= 'import' ( IDENT | STRING )
 * Return      ::= 'return' Names
 * TupleAssign ::= '(' IDENT ( ',' IDENT )* ')' '=' Expr
 * Assignment  ::= IDENT '=' Expr
 * The first token decides, but for TupleAssign and Definition, which look further ahead
 * (looks_like_tuple_assign, looks_like_def).  in_fn: a function body, where FnDef is an
 * error; what else only a body or only the top level allows is checked later (sema.c,
 * session.c). */
static Stmt *parse_stmt(Parser *P, bool in_fn) {
  Token *t = peek(P);
  Stmt *st;
  switch (t->kind) {
  case TK_FN: {
    next(P);
    if (in_fn) {
      diag_report(P->d, t->span, E_NESTED_FN);
      P->failed = true;
      return NULL;
    }
    FnDecl *f = parse_fn(P, t->span);
    if (!f) return NULL;
    st = new_stmt(P, ST_FN, f->span);
    st->fn = f;
    st->name = f->name;
    return st;
  }
  case TK_IMPORT: {
    next(P);
    Token *m = peek(P);
    if (m->kind != TK_IDENT && m->kind != TK_STRING) {
      fail(P, E_EXPECTED, "a module name or a file name in quotes");
      return NULL;
    }
    next(P);
    st = new_stmt(P, ST_IMPORT, span_join(t->span, m->span));
    st->name = m->text;
    st->name_span = m->span;
    st->is_path = m->kind == TK_STRING;
    return st;
  }
  case TK_COMMAND:
    next(P);
    st = new_stmt(P, ST_COMMAND, t->span);
    st->text = t->text;
    return st;
  case TK_RETURN:
    next(P);
    st = new_stmt(P, ST_RETURN, t->span);
    if (!parse_names(P, st)) return NULL;
    st->span = span_join(t->span, prev_span(P));
    return st;
  default:
    break;
  }
  if (looks_like_tuple_assign(P)) {
    st = new_stmt(P, ST_ASSIGN, t->span);
    if (!parse_names(P, st)) return NULL;
    expect(P, TK_ASSIGN);
    st->expr = P->failed ? NULL : parse_expr(P);
    if (!st->expr) return NULL;
    st->span = span_join(t->span, st->expr->span);
    return st;
  }
  if (looks_like_def(P)) return parse_def(P);
  if (t->kind == TK_IDENT && peek2(P)->kind == TK_COLON) return parse_def(P);  /* s: f32 = .. */
  if (t->kind == TK_IDENT && peek2(P)->kind == TK_ASSIGN) {
    next(P);
    next(P);
    st = new_stmt(P, ST_ASSIGN, t->span);
    st->names = arena_alloc(P->a, sizeof(char *));
    st->name_spans = arena_alloc(P->a, sizeof(Span));
    st->names[0] = t->text;
    st->name_spans[0] = t->span;
    st->nnames = 1;
    st->name = t->text;
    st->name_span = t->span;
    st->expr = parse_expr(P);
    if (!st->expr) return NULL;
    st->span = span_join(t->span, st->expr->span);
    return st;
  }
  if (t->kind == TK_RBRACE || t->kind == TK_ARROW || t->kind == TK_ASSIGN || t->kind == TK_COLON) {
    fail(P, E_EXPECTED_STMT, NULL);
    return NULL;
  }
  Expr *e = parse_expr(P);
  if (!e) return NULL;
  if (at(P, TK_ASSIGN)) {
    diag_report(P->d, e->span, E_BAD_TARGET);
    P->failed = true;
    return NULL;
  }
  st = new_stmt(P, ST_EXPR, e->span);
  st->expr = e;
  return st;
}

/* Program ::= END* ( Statement ( END+ Statement )* END* )?
 * A statement with an error is dropped, and parsing goes on at the next END (sync). */
Stmt **parse_source(Arena *a, const Source *src, Diags *d, int *nstmt, bool *incomplete) {
  Parser P = {.a = a, .d = d};
  Diag *last = d->tail;
  int before = d->nerrors;
  P.t = lex_source(a, src, d, &P.n);
  bool lex_failed = d->nerrors > before;
  VEC(uint32_t) lerr = {0};
  for (Diag *dg = last ? last->next : d->head; dg; dg = dg->next) vec_push(lerr, dg->span.lo);
  P.lex_errs = lerr.a;
  P.nlex_errs = lerr.n;
  VEC(Stmt *) v = {0};
  for (;;) {
    skip_newlines(&P);
    if (at(&P, TK_EOF)) break;
    P.stmt_lo = peek(&P)->span.lo;
    Stmt *s = parse_stmt(&P, false);
    if (!P.failed && !at(&P, TK_EOF) && !accept(&P, TK_NEWLINE)) fail(&P, E_EXPECTED, "end of line");
    if (s && !P.failed) vec_push(v, s);
    if (P.failed) {
      sync(&P, false);
      if (at(&P, TK_RBRACE)) next(&P);
      P.failed = false;
    }
  }
  /* Lexer errors are real errors even at the end of input (an unterminated string). */
  *incomplete = P.incomplete && !lex_failed;
  vec_free(lerr);
  Stmt **out = arena_alloc(a, sizeof(Stmt *) * (size_t)(v.n + 1));
  if (v.n) memcpy(out, v.a, sizeof(Stmt *) * (size_t)v.n);
  *nstmt = v.n;
  vec_free(v);
  return out;
}

/* END* Expr END*, the whole input: not a rule of the grammar, the argument of :type and -e */
Expr *parse_expression(Arena *a, const Source *src, Diags *d) {
  Parser P = {.a = a, .d = d};
  P.t = lex_source(a, src, d, &P.n);
  skip_newlines(&P);
  Expr *e = parse_expr(&P);
  skip_newlines(&P);
  if (e && !P.failed && !at(&P, TK_EOF)) fail(&P, E_EXPECTED, "end of input");
  return P.failed ? NULL : e;
}

/* ---- printing an expression back as source text (for messages and :ir) ---- */

static int prec(const Expr *e) {
  if (e->kind == EX_BINARY || e->kind == EX_UNARY) return op_prec(e->op);
  if (e->kind == EX_NUM && signbit(e->num)) return op_prec(OP_NEG);   /* a folded -2 prints like -x */
  if (e->kind == EX_REDUCE) return 0;
  return 10;
}

static void print_sub(const Expr *e, int min, Buf *out) {
  bool par = prec(e) < min;
  if (par) buf_putc(out, '(');
  parse_print_expr(e, out);
  if (par) buf_putc(out, ')');
}

static void print_args(Expr **a, int n, Buf *out) {
  for (int i = 0; i < n; i++) {
    if (i) buf_puts(out, ", ");
    parse_print_expr(a[i], out);
  }
}

void parse_print_expr(const Expr *e, Buf *out) {
  switch (e->kind) {
  case EX_NUM:
    if (e->is_int) buf_printf(out, "%lld", (long long)e->ival);
    else if (isinf(e->num)) buf_puts(out, e->num > 0 ? "inf" : "-inf");
    else if (isnan(e->num)) buf_puts(out, "nan");
    else {
      char s[64];
      snprintf(s, sizeof s, "%.9g", e->num);
      if (!strpbrk(s, ".e")) strcat(s, ".0");
      buf_puts(out, s);
    }
    break;
  case EX_BOOL: buf_puts(out, e->ival ? "true" : "false"); break;
  case EX_STR: buf_printf(out, "\"%s\"", e->name); break;
  case EX_NAME: buf_puts(out, e->name); break;
  case EX_INDEX:                         /* a scalar is an access with no subscripts */
    if (e->base) parse_print_expr(e->base, out);
    else buf_puts(out, e->name);
    if (e->nargs) {
      buf_putc(out, '[');
      print_args(e->args, e->nargs, out);
      buf_putc(out, ']');
    }
    break;
  case EX_CALL:
    buf_printf(out, "%s(", e->name);
    print_args(e->args, e->nargs, out);
    buf_putc(out, ')');
    break;
  case EX_CAST:
    buf_printf(out, "%s(", elem_name(e->elem));
    print_args(e->args, e->nargs, out);
    buf_putc(out, ')');
    break;
  case EX_UNARY:
    buf_puts(out, e->op == OP_NOT ? "not " : "-");
    print_sub(e->args[0], prec(e), out);
    break;
  case EX_BINARY: {
    int p = prec(e);
    /* left-associative: the right operand needs parentheses at equal precedence;
     * ** is right-associative, so the other way round */
    print_sub(e->args[0], e->op == OP_POW ? p + 1 : p, out);
    buf_printf(out, " %s ", op_name(e->op));
    print_sub(e->args[1], e->op == OP_POW ? p : p + 1, out);
    break;
  }
  case EX_REDUCE:
    buf_printf(out, "%s[", red_name(e->red));
    for (int i = 0; i < e->nridx; i++) {
      buf_printf(out, "%s%s", i ? ", " : "", e->ridx[i]);
      if (e->rbound && e->rbound[i]) {
        buf_puts(out, " < ");
        parse_print_expr(e->rbound[i], out);
      }
    }
    buf_puts(out, "] ");
    parse_print_expr(e->args[0], out);
    break;
  case EX_SCAN: {
    static const char *sym[] = {"+", "max", "min", "*"};
    buf_printf(out, "scan[%s] %s(", e->ridx[0], sym[e->red]);
    parse_print_expr(e->args[0], out);
    buf_putc(out, ')');
    break;
  }
  case EX_WHERE:
    buf_puts(out, "where(");
    print_args(e->args, e->nargs, out);
    buf_putc(out, ')');
    break;
  case EX_LIST: {
    /* a typed literal of rank 1 is written f64([...]): f64[...] would be a type */
    bool conv = e->has_elem && !(e->nargs && e->args[0]->kind == EX_LIST);
    if (e->has_elem) buf_printf(out, "%s%s", elem_name(e->elem), conv ? "(" : "");
    buf_putc(out, '[');
    print_args(e->args, e->nargs, out);
    buf_putc(out, ']');
    if (conv) buf_putc(out, ')');
    break;
  }
  case EX_SLICE:
    for (int k = 0; k < 3; k++) {
      if (k == 2 && !slice_part(e, 2)) break;
      if (k) buf_putc(out, ':');
      if (slice_part(e, k)) parse_print_expr(slice_part(e, k), out);
    }
    break;
  case EX_TYPE:
    buf_puts(out, elem_name(e->elem));
    if (e->nargs) {
      buf_putc(out, '[');
      print_args(e->args, e->nargs, out);
      buf_putc(out, ']');
    }
    break;
  }
}
