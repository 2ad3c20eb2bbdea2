/* poly.c -- symbolic sizes as canonical polynomials, for the type checker and the bounds
 * prover.  A polynomial is a sorted list of terms coef*monomial with int64 coefficients; a
 * monomial is a sorted multiset of atoms: size variables and opaque floor divisions, modulos,
 * mins and maxes that did not simplify.  Atoms, monomials and polynomials are hash-consed in
 * the PolyCtx, so a size is canonical once built and equality is pointer equality: the checker
 * never asks "are these equal?" of anything but a pointer.  Nothing here ever wraps an int64.
 */
#include "config.h"
#include "dyn_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- representation ----
 *
 * Text: "H - R + 1", "-N + 3", "M*N + 2*N*N", "(N + 1)/2", "N % 8", "2*(N/2)", "min(N, 4)":
 * coefficient first, " - " for a negative term, a leading "-" only on the first, and
 * parentheses exactly where the language's precedence would regroup the text, so a size in
 * an error message reads back as the same size.
 *
 * Order (what makes the form unique and the text stable): terms by descending degree, then
 * lexicographically by their atoms; the constant term last.  Atoms: variables first, by name,
 * then compound atoms by their printed text (a creation number breaks the rare tie).  Powers
 * are repeated atoms, N*N, which is also how they print: the language has no power operator
 * in dimensions, so "N*N" is the form a user can paste back.
 *
 * Overflow: an add or mul whose coefficients would leave int64 is not folded; it becomes an
 * opaque ADD or MUL atom of its (canonical) operands.  That keeps every operation total and
 * sound (two such sizes are equal only when built the same way), and poly_eval on it reports
 * the overflow.  Sizes that large never describe a real tensor, so losing equalities there
 * costs nothing. */

typedef enum { PA_VAR, PA_DIV, PA_MOD, PA_MIN, PA_MAX, PA_ADD, PA_MUL } PAtomKind;

typedef struct PAtom {
  PAtomKind kind;
  int id;
  const char *name;       /* PA_VAR */
  const Poly *a, *b;      /* operands of the others; for min/max/add/mul a <= b in poly order */
  const char *text;       /* printed form, without surrounding parentheses; the sort key */
} PAtom;

typedef struct PMono {
  int id, deg;
  const PAtom *f[];       /* deg atoms, sorted, a power repeats its atom */
} PMono;

typedef struct { int64_t coef; const PMono *m; } PTerm;
typedef VEC(PTerm) PTermVec;

struct Poly {
  int id, n;
  PTerm t[];              /* sorted, distinct monomials, no zero coefficients; n == 0 is 0 */
};

/* An open-addressing set of pointers, keyed by a hash and a caller-supplied equality. */
typedef struct { uint64_t hash; void *p; } PSlot;
typedef struct { PSlot *s; size_t cap, n; } PTable;

struct PolyCtx {
  Arena *arena;
  PTable atoms, monos, polys;
  int next_id;
  const PMono *unit;      /* the empty monomial, for constant terms */
  const Poly *zero, *one;
};

/* ---- small arithmetic ---- */

static bool add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static bool mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

/* Floor division and modulo, as in Python: -7/2 = -4, -7%2 = 1.  The caller rules out d == 0
 * and the one overflowing pair (INT64_MIN, -1). */
static int64_t floor_div(int64_t x, int64_t d) {
  int64_t q = x / d;
  if (x % d != 0 && ((x < 0) != (d < 0))) q--;
  return q;
}

static int64_t floor_mod(int64_t x, int64_t d) {
  int64_t r = x % d;
  if (r != 0 && ((r < 0) != (d < 0))) r += d;
  return r;
}

static uint64_t magnitude(int64_t k) { return k < 0 ? 0 - (uint64_t)k : (uint64_t)k; }

static uint64_t gcd_u(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 31);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* ---- interning tables ---- */

static void *table_find(const PTable *t, uint64_t h, bool (*eq)(const void *obj, const void *key),
                        const void *key) {
  if (!t->cap) return NULL;
  for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    if (!t->s[i].p) return NULL;
    if (t->s[i].hash == h && eq(t->s[i].p, key)) return t->s[i].p;
  }
}

static void table_put(PTable *t, uint64_t h, void *p) {
  if (2 * (t->n + 1) > t->cap) {       /* keep the load under one half */
    PTable big = {xcalloc(t->cap ? 2 * t->cap : 64, sizeof(PSlot)), t->cap ? 2 * t->cap : 64, 0};
    for (size_t i = 0; i < t->cap; i++)
      if (t->s[i].p) table_put(&big, t->s[i].hash, t->s[i].p);
    free(t->s);
    *t = big;
  }
  size_t i = h & (t->cap - 1);
  while (t->s[i].p) i = (i + 1) & (t->cap - 1);
  t->s[i].hash = h;
  t->s[i].p = p;
  t->n++;
}

/* ---- order ---- */

static int atom_cmp(const PAtom *x, const PAtom *y) {
  if (x == y) return 0;
  if ((x->kind == PA_VAR) != (y->kind == PA_VAR)) return x->kind == PA_VAR ? -1 : 1;
  int r = strcmp(x->text, y->text);
  if (r) return r;
  return x->id < y->id ? -1 : 1;
}

/* Higher degree first; among equal degrees, lexicographic on the sorted atoms, so M*M comes
 * before M*N before N*N.  Zero only for the same (interned) monomial. */
static int mono_cmp(const PMono *x, const PMono *y) {
  if (x == y) return 0;
  if (x->deg != y->deg) return x->deg > y->deg ? -1 : 1;
  for (int i = 0; i < x->deg; i++) {
    int r = atom_cmp(x->f[i], y->f[i]);
    if (r) return r;
  }
  return x->id < y->id ? -1 : 1;       /* unreachable for interned monomials */
}

static int term_cmp(const void *x, const void *y) {
  return mono_cmp(((const PTerm *)x)->m, ((const PTerm *)y)->m);
}

/* A total order on polynomials, used to put the operands of commutative atoms in one order. */
static int poly_cmp(const Poly *a, const Poly *b) {
  if (a == b) return 0;
  for (int i = 0; i < a->n && i < b->n; i++) {
    int r = mono_cmp(a->t[i].m, b->t[i].m);
    if (r) return r;
    if (a->t[i].coef != b->t[i].coef) return a->t[i].coef < b->t[i].coef ? -1 : 1;
  }
  if (a->n != b->n) return a->n < b->n ? -1 : 1;
  return a->id < b->id ? -1 : 1;
}

/* ---- hash-consing ---- */

typedef struct { PAtomKind kind; const char *name; const Poly *a, *b; } PAtomKey;
typedef struct { int deg; const PAtom *const *f; } PMonoKey;
typedef struct { int n; const PTerm *t; } PPolyKey;

static bool atom_eq(const void *obj, const void *key) {
  const PAtom *x = obj;
  const PAtomKey *k = key;
  if (x->kind != k->kind) return false;
  if (x->kind == PA_VAR) return strcmp(x->name, k->name) == 0;
  return x->a == k->a && x->b == k->b;
}

static bool mono_eq(const void *obj, const void *key) {
  const PMono *x = obj;
  const PMonoKey *k = key;
  if (x->deg != k->deg) return false;
  return x->deg == 0 || memcmp(x->f, k->f, (size_t)k->deg * sizeof *k->f) == 0;
}

static bool poly_eq(const void *obj, const void *key) {
  const Poly *x = obj;
  const PPolyKey *k = key;
  if (x->n != k->n) return false;
  for (int i = 0; i < k->n; i++)
    if (x->t[i].coef != k->t[i].coef || x->t[i].m != k->t[i].m) return false;
  return true;
}

static const PMono *mono_get(PolyCtx *c, const PAtom *const *f, int deg) {
  uint64_t h = mix(0x6d6f6e6f, (uint64_t)deg);
  for (int i = 0; i < deg; i++) h = mix(h, (uint64_t)f[i]->id);
  PMonoKey key = {deg, f};
  PMono *m = table_find(&c->monos, h, mono_eq, &key);
  if (m) return m;
  m = arena_alloc(c->arena, sizeof(PMono) + (size_t)deg * sizeof(PAtom *));
  m->id = c->next_id++;
  m->deg = deg;
  if (deg) memcpy(m->f, f, (size_t)deg * sizeof *f);
  table_put(&c->monos, h, m);
  return m;
}

/* The terms must already be canonical: sorted, distinct monomials, no zero coefficient. */
static const Poly *poly_intern(PolyCtx *c, const PTerm *t, int n) {
  uint64_t h = mix(0x706f6c79, (uint64_t)n);
  for (int i = 0; i < n; i++) h = mix(mix(h, (uint64_t)t[i].m->id), (uint64_t)t[i].coef);
  PPolyKey key = {n, t};
  Poly *p = table_find(&c->polys, h, poly_eq, &key);
  if (p) return p;
  p = arena_alloc(c->arena, sizeof(Poly) + (size_t)n * sizeof(PTerm));
  p->id = c->next_id++;
  p->n = n;
  if (n) memcpy(p->t, t, (size_t)n * sizeof *t);
  table_put(&c->polys, h, p);
  return p;
}

/* Sort, combine like terms, drop zeros.  False on coefficient overflow. */
static bool terms_normalize(PTermVec *v) {
  if (v->n) qsort(v->a, (size_t)v->n, sizeof(PTerm), term_cmp);
  int out = 0;
  for (int i = 0; i < v->n; i++) {
    if (out && v->a[out - 1].m == v->a[i].m) {
      if (!add_ok(v->a[out - 1].coef, v->a[i].coef, &v->a[out - 1].coef)) return false;
    } else {
      v->a[out++] = v->a[i];
    }
    if (v->a[out - 1].coef == 0) out--;
  }
  v->n = out;
  return true;
}

/* out = a + kb*b, merging two canonical term lists.  False on overflow. */
static bool terms_merge(const PTerm *a, int na, const PTerm *b, int nb, int64_t kb, PTermVec *out) {
  out->n = 0;
  int i = 0, j = 0;
  while (i < na || j < nb) {
    int r = i == na ? 1 : j == nb ? -1 : mono_cmp(a[i].m, b[j].m);
    PTerm t;
    if (r < 0) {
      t = a[i++];
    } else {
      t.m = b[j].m;
      if (!mul_ok(kb, b[j].coef, &t.coef)) return false;
      if (r == 0 && !add_ok(t.coef, a[i++].coef, &t.coef)) return false;
      j++;
    }
    if (t.coef) vec_push(*out, t);
  }
  return true;
}

static void put_poly(const Poly *p, Buf *out);

/* Operands print bare when they are a plain name, a non-negative number or a call-like atom;
 * anything else is parenthesised so the text reads back as the same tree. */
static bool is_primary(const Poly *p) {
  if (p->n == 0) return true;
  if (p->n != 1) return false;
  const PTerm *t = &p->t[0];
  if (t->m->deg == 0) return t->coef >= 0;
  if (t->coef != 1 || t->m->deg != 1) return false;
  PAtomKind k = t->m->f[0]->kind;
  return k == PA_VAR || k == PA_MIN || k == PA_MAX;
}

static void put_operand(const Poly *p, Buf *out) {
  bool paren = !is_primary(p);
  if (paren) buf_putc(out, '(');
  put_poly(p, out);
  if (paren) buf_putc(out, ')');
}

static const PAtom *atom_get(PolyCtx *c, PAtomKind kind, const char *name, const Poly *a,
                            const Poly *b) {
  uint64_t h = mix(0x61746f6d, (uint64_t)kind);
  if (kind == PA_VAR) h = mix(h, hash_str(name));
  else h = mix(mix(h, (uint64_t)a->id), (uint64_t)b->id);
  PAtomKey key = {kind, name, a, b};
  PAtom *x = table_find(&c->atoms, h, atom_eq, &key);
  if (x) return x;
  x = arena_alloc(c->arena, sizeof(PAtom));
  x->kind = kind;
  x->id = c->next_id++;
  x->a = a;
  x->b = b;
  if (kind == PA_VAR) {
    x->name = x->text = arena_strndup(c->arena, name, strlen(name));
  } else {
    Buf t = {0};
    switch (kind) {
    case PA_DIV: put_operand(a, &t); buf_puts(&t, "/"); put_operand(b, &t); break;
    case PA_MOD: put_operand(a, &t); buf_puts(&t, " % "); put_operand(b, &t); break;
    case PA_ADD: put_operand(a, &t); buf_puts(&t, " + "); put_operand(b, &t); break;
    case PA_MUL: put_operand(a, &t); buf_puts(&t, "*"); put_operand(b, &t); break;
    case PA_MIN: case PA_MAX:
      buf_puts(&t, kind == PA_MIN ? "min(" : "max(");
      put_poly(a, &t);
      buf_puts(&t, ", ");
      put_poly(b, &t);
      buf_puts(&t, ")");
      break;
    case PA_VAR: break;
    }
    x->text = arena_strndup(c->arena, t.s, t.len);
    buf_free(&t);
  }
  table_put(&c->atoms, h, x);
  return x;
}

static const Poly *poly_of_atom(PolyCtx *c, const PAtom *x) {
  PTerm t = {1, mono_get(c, &x, 1)};
  return poly_intern(c, &t, 1);
}

/* An operation kept as it is: commutative ones get their operands in poly order. */
static const Poly *opaque(PolyCtx *c, PAtomKind kind, const Poly *a, const Poly *b) {
  if (kind != PA_DIV && kind != PA_MOD && poly_cmp(a, b) > 0) {
    const Poly *t = a;
    a = b;
    b = t;
  }
  return poly_of_atom(c, atom_get(c, kind, NULL, a, b));
}

static const Poly *poly_from_vec(PolyCtx *c, PTermVec *v) {
  const Poly *p = poly_intern(c, v->a, v->n);
  vec_free(*v);
  return p;
}

/* ---- the context ---- */

PolyCtx *poly_ctx_new(void) {
  PolyCtx *c = xcalloc(1, sizeof *c);
  c->arena = arena_new();
  c->unit = mono_get(c, NULL, 0);
  c->zero = poly_intern(c, NULL, 0);
  PTerm one = {1, c->unit};
  c->one = poly_intern(c, &one, 1);
  return c;
}

void poly_ctx_free(PolyCtx *c) {
  if (!c) return;
  free(c->atoms.s);
  free(c->monos.s);
  free(c->polys.s);
  arena_free(c->arena);
  free(c);
}

/* ---- construction ---- */

const Poly *poly_const(PolyCtx *c, int64_t v) {
  if (v == 0) return c->zero;
  if (v == 1) return c->one;
  PTerm t = {v, c->unit};
  return poly_intern(c, &t, 1);
}

const Poly *poly_var(PolyCtx *c, const char *name) {
  return poly_of_atom(c, atom_get(c, PA_VAR, name, NULL, NULL));
}

const Poly *poly_add(PolyCtx *c, const Poly *a, const Poly *b) {
  if (a->n == 0) return b;
  if (b->n == 0) return a;
  PTermVec v = {0};
  if (!terms_merge(a->t, a->n, b->t, b->n, 1, &v)) {
    vec_free(v);
    return opaque(c, PA_ADD, a, b);
  }
  return poly_from_vec(c, &v);
}

/* Multiply by a constant; INT64_MIN * -1 and the like become an opaque product. */
static const Poly *poly_scale(PolyCtx *c, const Poly *a, int64_t k) {
  if (k == 1) return a;
  PTermVec v = {0};
  if (!terms_merge(NULL, 0, a->t, a->n, k, &v)) {
    vec_free(v);
    return opaque(c, PA_MUL, poly_const(c, k), a);
  }
  return poly_from_vec(c, &v);
}

const Poly *poly_neg(PolyCtx *c, const Poly *a) { return poly_scale(c, a, -1); }

const Poly *poly_sub(PolyCtx *c, const Poly *a, const Poly *b) {
  if (b->n == 0) return a;
  PTermVec v = {0};
  if (!terms_merge(a->t, a->n, b->t, b->n, -1, &v)) {
    vec_free(v);
    return poly_add(c, a, poly_neg(c, b));
  }
  return poly_from_vec(c, &v);
}

static const PMono *mono_mul(PolyCtx *c, const PMono *x, const PMono *y) {
  if (x->deg == 0) return y;
  if (y->deg == 0) return x;
  int deg = x->deg + y->deg, i = 0, j = 0, k = 0;
  const PAtom **f = xmalloc((size_t)deg * sizeof *f);
  while (i < x->deg || j < y->deg)
    f[k++] = (j == y->deg || (i < x->deg && atom_cmp(x->f[i], y->f[j]) <= 0)) ? x->f[i++]
                                                                            : y->f[j++];
  const PMono *m = mono_get(c, f, deg);
  free(f);
  return m;
}

const Poly *poly_mul(PolyCtx *c, const Poly *a, const Poly *b) {
  if (a->n == 0 || b->n == 0) return c->zero;
  if (a == c->one) return b;
  if (b == c->one) return a;
  PTermVec v = {0};
  bool ok = true;
  for (int i = 0; i < a->n && ok; i++)
    for (int j = 0; j < b->n && ok; j++) {
      PTerm t = {0, mono_mul(c, a->t[i].m, b->t[j].m)};
      ok = mul_ok(a->t[i].coef, b->t[j].coef, &t.coef);
      vec_push(v, t);
    }
  if (!ok || !terms_normalize(&v)) {
    vec_free(v);
    return opaque(c, PA_MUL, a, b);
  }
  return poly_from_vec(c, &v);
}

/* ---- division and modulo ---- */

static const PAtom *lone_atom(const Poly *p) {
  return p->n == 1 && p->t[0].coef == 1 && p->t[0].m->deg == 1 ? p->t[0].m->f[0] : NULL;
}

/* floor(a/d) for d >= 2 and a not constant.  Terms whose coefficient d divides come out
 * (floor(d*q + r)/d = q + floor(r/d) for integer q), and so does floor(const/d), leaving a
 * remainder R with a constant in [0, d); a common factor of R and d cancels.  So (2*N + 4)/2
 * = N + 2, (8*K + 3)/8 = K, (2*N)/4 = N/2, and (N + 5)/2 = (N + 1)/2 + 2. */
static const Poly *div_pos(PolyCtx *c, const Poly *a, int64_t d) {
  PTermVec q = {0}, r = {0};
  int nonconst = 0;
  for (int i = 0; i < a->n; i++) {
    PTerm t = a->t[i];
    if (t.m->deg == 0) {
      PTerm tq = {floor_div(t.coef, d), t.m}, tr = {floor_mod(t.coef, d), t.m};
      if (tq.coef) vec_push(q, tq);
      if (tr.coef) vec_push(r, tr);
    } else if (t.coef % d == 0) {
      t.coef /= d;
      vec_push(q, t);
    } else {
      vec_push(r, t);
      nonconst++;
    }
  }
  const Poly *qp = poly_from_vec(c, &q);
  if (!nonconst) {                     /* 0 <= R < d, so floor(R/d) = 0 */
    vec_free(r);
    return qp;
  }
  uint64_t g = (uint64_t)d;
  for (int i = 0; i < r.n; i++) g = gcd_u(g, magnitude(r.a[i].coef));
  for (int i = 0; i < r.n; i++) r.a[i].coef /= (int64_t)g;
  d /= (int64_t)g;
  const Poly *rp = poly_from_vec(c, &r), *inner;
  const PAtom *x = lone_atom(rp);
  int64_t d1, dd;
  /* floor(floor(y/d1)/d) = floor(y/(d1*d)) for positive d1, d */
  if (x && x->kind == PA_DIV && poly_is_const(x->b, &d1) && d1 > 0 && mul_ok(d, d1, &dd))
    inner = poly_div(c, x->a, poly_const(c, dd));
  else
    inner = opaque(c, PA_DIV, rp, poly_const(c, d));
  return poly_add(c, qp, inner);
}

/* a mod d for d >= 2 and a not constant: every coefficient reduces mod d ((8*K + 3) % 8 = 3,
 * (N + 8) % 8 = N % 8), and a common factor g of what is left and d comes out:
 * (2*N) % 4 = 2*(N % 2). */
static const Poly *mod_pos(PolyCtx *c, const Poly *a, int64_t d) {
  PTermVec r = {0};
  int nonconst = 0;
  for (int i = 0; i < a->n; i++) {
    PTerm t = {floor_mod(a->t[i].coef, d), a->t[i].m};
    if (!t.coef) continue;
    vec_push(r, t);
    if (t.m->deg) nonconst++;
  }
  if (!nonconst) return poly_from_vec(c, &r);
  uint64_t g = (uint64_t)d;
  for (int i = 0; i < r.n; i++) g = gcd_u(g, magnitude(r.a[i].coef));
  for (int i = 0; i < r.n; i++) r.a[i].coef /= (int64_t)g;
  d /= (int64_t)g;
  const Poly *rp = poly_from_vec(c, &r), *res;
  const PAtom *x = lone_atom(rp);
  int64_t m;
  /* (y % m) % d is y % d when d divides m, and y % m when m <= d */
  if (x && x->kind == PA_MOD && poly_is_const(x->b, &m) && m > 0 && m % d == 0)
    res = poly_mod(c, x->a, poly_const(c, d));
  else if (x && x->kind == PA_MOD && poly_is_const(x->b, &m) && m > 0 && m <= d)
    res = rp;
  else
    res = opaque(c, PA_MOD, rp, poly_const(c, d));
  return poly_scale(c, res, (int64_t)g);
}

/* 0/b is 0 even for a symbolic b that might be 0: a size that divides by zero fails when it
 * is evaluated, and the simpler form is worth more to the checker than that early error. */
const Poly *poly_div(PolyCtx *c, const Poly *a, const Poly *b) {
  int64_t d, x;
  if (!poly_is_const(b, &d)) return a->n == 0 ? a : opaque(c, PA_DIV, a, b);
  if (d == 0) return opaque(c, PA_DIV, a, b);      /* poly_eval reports it */
  if (poly_is_const(a, &x)) {
    if (x == INT64_MIN && d == -1) return opaque(c, PA_DIV, a, b);
    return poly_const(c, floor_div(x, d));
  }
  if (d == 1) return a;
  if (d < 0) {                                     /* floor(a/-d) = floor(-a/d) */
    if (d == INT64_MIN) return opaque(c, PA_DIV, a, b);
    return poly_div(c, poly_neg(c, a), poly_const(c, -d));
  }
  return div_pos(c, a, d);
}

const Poly *poly_mod(PolyCtx *c, const Poly *a, const Poly *b) {
  int64_t d, x;
  if (!poly_is_const(b, &d)) return a->n == 0 ? a : opaque(c, PA_MOD, a, b);
  if (d == 0) return opaque(c, PA_MOD, a, b);
  if (d == 1 || d == -1) return c->zero;
  if (poly_is_const(a, &x)) return poly_const(c, floor_mod(x, d));
  if (d < 0) {                                     /* a mod -d = -((-a) mod d) */
    if (d == INT64_MIN) return opaque(c, PA_MOD, a, b);
    return poly_neg(c, poly_mod(c, poly_neg(c, a), poly_const(c, -d)));
  }
  return mod_pos(c, a, d);
}

/* a op b for the operators a size may use, + - * / and % (any other is %): the one mapping
 * of the language's operators to polynomials, for the checker and the lowering. */
const Poly *poly_op(PolyCtx *c, OpKind op, const Poly *a, const Poly *b) {
  switch (op) {
  case OP_ADD: return poly_add(c, a, b);
  case OP_SUB: return poly_sub(c, a, b);
  case OP_MUL: return poly_mul(c, a, b);
  case OP_DIV: return poly_div(c, a, b);
  default: return poly_mod(c, a, b);
  }
}

/* ---- min and max ---- */

static const Poly *min_max(PolyCtx *c, bool is_max, const Poly *a, const Poly *b) {
  if (a == b) return a;
  int64_t x, y, k;
  if (poly_is_const(a, &x) && poly_is_const(b, &y)) return (is_max ? x >= y : x <= y) ? a : b;
  /* Sizes a constant apart: min(N + 1, N) = N. */
  if (poly_is_const(poly_sub(c, a, b), &k)) return (is_max ? k >= 0 : k <= 0) ? a : b;
  return opaque(c, is_max ? PA_MAX : PA_MIN, a, b);
}

const Poly *poly_min(PolyCtx *c, const Poly *a, const Poly *b) { return min_max(c, false, a, b); }
const Poly *poly_max(PolyCtx *c, const Poly *a, const Poly *b) { return min_max(c, true, a, b); }

/* ---- inspection and printing ---- */

bool poly_is_const(const Poly *p, int64_t *v) {
  int64_t k;
  if (p->n == 0) k = 0;
  else if (p->n == 1 && p->t[0].m->deg == 0) k = p->t[0].coef;
  else return false;
  if (v) *v = k;
  return true;
}

const char *poly_as_var(const Poly *p) {
  const PAtom *x = lone_atom(p);
  return x && x->kind == PA_VAR ? x->name : NULL;
}

/* A term: coefficient first ("2*N"), magnitude only after the first term (" - N"), and
 * parentheses where the language's precedence would otherwise regroup the text: "2*(N/2)"
 * is not "2*N/2", and a leading "-(N/2)" is not "(-N)/2". */
static void put_term(const PTerm *t, bool first, bool alone, Buf *out) {
  bool neg = t->coef < 0;
  uint64_t mag = magnitude(t->coef);
  if (first) {
    if (neg) buf_putc(out, '-');
  } else {
    buf_puts(out, neg ? " - " : " + ");
  }
  if (t->m->deg == 0) {
    buf_printf(out, "%" PRIu64, mag);
    return;
  }
  bool coef_shown = mag != 1;
  if (coef_shown) buf_printf(out, "%" PRIu64 "*", mag);
  for (int i = 0; i < t->m->deg; i++) {
    const PAtom *x = t->m->f[i];
    bool paren = false;
    if (x->kind == PA_DIV || x->kind == PA_MOD)
      paren = coef_shown || t->m->deg > 1 || (first && neg);
    else if (x->kind == PA_ADD || x->kind == PA_MUL)
      paren = !alone || t->m->deg > 1;
    if (i) buf_putc(out, '*');
    if (paren) buf_putc(out, '(');
    buf_puts(out, x->text);
    if (paren) buf_putc(out, ')');
  }
}

static void put_poly(const Poly *p, Buf *out) {
  if (p->n == 0) {
    buf_putc(out, '0');
    return;
  }
  bool alone = p->n == 1 && p->t[0].coef == 1;
  for (int i = 0; i < p->n; i++) put_term(&p->t[i], i == 0, alone, out);
}

void poly_str(const Poly *p, Buf *out) { put_poly(p, out); }

/* ---- variables and substitution ---- */

typedef VEC(const char *) PNameVec;

static void collect_vars(const Poly *p, PNameVec *v) {
  for (int i = 0; i < p->n; i++)
    for (int j = 0; j < p->t[i].m->deg; j++) {
      const PAtom *x = p->t[i].m->f[j];
      if (x->kind != PA_VAR) {
        collect_vars(x->a, v);
        collect_vars(x->b, v);
        continue;
      }
      bool seen = false;
      for (int k = 0; k < v->n && !seen; k++) seen = strcmp(v->a[k], x->name) == 0;
      if (!seen) vec_push(*v, x->name);
    }
}

static int name_cmp(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Sorted by name; returns how many were stored (at most max).  The names live as long as the
 * PolyCtx. */
int poly_vars(const Poly *p, const char **names, int max) {
  PNameVec v = {0};
  collect_vars(p, &v);
  if (v.n) qsort(v.a, (size_t)v.n, sizeof *v.a, name_cmp);
  int n = v.n < max ? v.n : max;
  for (int i = 0; i < n; i++) names[i] = v.a[i];
  vec_free(v);
  return n < 0 ? 0 : n;
}

typedef const Poly *(*PSubstFn)(void *env, const char *name);

static const Poly *subst(PolyCtx *c, const Poly *p, PSubstFn lookup, void *env);

/* Rebuilding an atom through the public constructors is what re-canonicalises it:
 * (N + 1)/2 with N := 2*M + 1 becomes M + 1. */
static const Poly *subst_atom(PolyCtx *c, const PAtom *x, PSubstFn lookup, void *env) {
  if (x->kind == PA_VAR) {
    const Poly *r = lookup(env, x->name);
    return r ? r : poly_of_atom(c, x);
  }
  const Poly *a = subst(c, x->a, lookup, env), *b = subst(c, x->b, lookup, env);
  switch (x->kind) {
  case PA_DIV: return poly_div(c, a, b);
  case PA_MOD: return poly_mod(c, a, b);
  case PA_MIN: return poly_min(c, a, b);
  case PA_MAX: return poly_max(c, a, b);
  case PA_ADD: return poly_add(c, a, b);
  case PA_MUL: return poly_mul(c, a, b);
  case PA_VAR: break;
  }
  return NULL;
}

static const Poly *subst(PolyCtx *c, const Poly *p, PSubstFn lookup, void *env) {
  const Poly *sum = c->zero;
  for (int i = 0; i < p->n; i++) {
    const Poly *prod = poly_const(c, p->t[i].coef);
    for (int j = 0; j < p->t[i].m->deg; j++)
      prod = poly_mul(c, prod, subst_atom(c, p->t[i].m->f[j], lookup, env));
    sum = poly_add(c, sum, prod);
  }
  return sum;
}

const Poly *poly_subst(PolyCtx *c, const Poly *p,
                       const Poly *(*lookup)(void *env, const char *name), void *env) {
  return subst(c, p, lookup, env);
}

/* ---- evaluation ---- */

typedef struct {
  bool (*lookup)(void *env, const char *name, int64_t *v);
  void *env;
  const char *why;
} PEval;

static bool eval_poly(PEval *e, const Poly *p, int64_t *out);

static bool fail(PEval *e, const char *why) {
  e->why = why;
  return false;
}

static bool eval_atom(PEval *e, const PAtom *x, int64_t *out) {
  int64_t a, b;
  if (x->kind == PA_VAR)
    return e->lookup && e->lookup(e->env, x->name, out) ? true
                                                        : fail(e, "unbound size variable");
  if (!eval_poly(e, x->a, &a) || !eval_poly(e, x->b, &b)) return false;
  switch (x->kind) {
  case PA_DIV:
    if (b == 0) return fail(e, "division by zero");
    if (a == INT64_MIN && b == -1) return fail(e, "integer overflow");
    *out = floor_div(a, b);
    return true;
  case PA_MOD:
    if (b == 0) return fail(e, "modulo by zero");
    *out = b == -1 ? 0 : floor_mod(a, b);
    return true;
  case PA_MIN: *out = a < b ? a : b; return true;
  case PA_MAX: *out = a > b ? a : b; return true;
  case PA_ADD: return add_ok(a, b, out) ? true : fail(e, "integer overflow");
  case PA_MUL: return mul_ok(a, b, out) ? true : fail(e, "integer overflow");
  case PA_VAR: break;
  }
  return fail(e, "internal error: bad atom");
}

static bool eval_poly(PEval *e, const Poly *p, int64_t *out) {
  int64_t sum = 0;
  for (int i = 0; i < p->n; i++) {
    int64_t prod = p->t[i].coef, v;
    for (int j = 0; j < p->t[i].m->deg; j++) {
      if (!eval_atom(e, p->t[i].m->f[j], &v)) return false;
      if (!mul_ok(prod, v, &prod)) return fail(e, "integer overflow");
    }
    if (!add_ok(sum, prod, &sum)) return fail(e, "integer overflow");
  }
  *out = sum;
  return true;
}

bool poly_eval(const Poly *p, bool (*lookup)(void *env, const char *name, int64_t *v),
               void *env, int64_t *out, const char **why) {
  PEval e = {lookup, env, NULL};
  int64_t v;
  bool ok = eval_poly(&e, p, &v);
  if (ok && out) *out = v;
  if (why) *why = ok ? NULL : e.why;
  return ok;
}

/* ---- the affine view ---- */

static bool poly_mentions(const Poly *p, const PAtom *var);

static bool atom_mentions(const PAtom *x, const PAtom *var) {
  if (x == var) return true;
  return x->kind != PA_VAR && (poly_mentions(x->a, var) || poly_mentions(x->b, var));
}

static bool poly_mentions(const Poly *p, const PAtom *var) {
  for (int i = 0; i < p->n; i++)
    for (int j = 0; j < p->t[i].m->deg; j++)
      if (atom_mentions(p->t[i].m->f[j], var)) return true;
  return false;
}

/* coef may itself mention other variables (M*N is affine in N with coefficient M). */
bool poly_affine_in(PolyCtx *c, const Poly *p, const char *var, const Poly **coef,
                    const Poly **rest) {
  const PAtom *v = atom_get(c, PA_VAR, var, NULL, NULL);
  PTermVec cv = {0}, rv = {0};
  const PAtom **f = NULL;
  int fcap = 0;
  bool ok = true;
  for (int i = 0; i < p->n && ok; i++) {
    const PMono *m = p->t[i].m;
    int at = -1;
    for (int j = 0; j < m->deg && ok; j++) {
      if (m->f[j] == v) {
        ok = at < 0;                   /* a second occurrence: degree 2 or more */
        at = j;
      } else if (atom_mentions(m->f[j], v)) {
        ok = false;                    /* inside a division, min, ... */
      }
    }
    if (!ok) break;
    if (at < 0) {
      vec_push(rv, p->t[i]);
      continue;
    }
    if (m->deg > fcap) {
      fcap = m->deg;
      f = xrealloc(f, (size_t)fcap * sizeof *f);
    }
    int k = 0;
    for (int j = 0; j < m->deg; j++)
      if (j != at) f[k++] = m->f[j];
    PTerm t = {p->t[i].coef, mono_get(c, f, k)};
    vec_push(cv, t);
  }
  free(f);
  if (!ok) {
    vec_free(cv);
    vec_free(rv);
    if (coef) *coef = NULL;
    if (rest) *rest = NULL;
    return false;
  }
  /* Dropping the variable can reorder terms; rest keeps p's order, a subsequence. */
  if (cv.n) qsort(cv.a, (size_t)cv.n, sizeof(PTerm), term_cmp);
  const Poly *cp = poly_from_vec(c, &cv), *rp = poly_from_vec(c, &rv);
  if (coef) *coef = cp;
  if (rest) *rest = rp;
  return true;
}

/* ---- proving p >= 0 ----
 *
 * Every variable is >= 0.  The base test is a sign check: a sum of non-negative terms is
 * non-negative, where a term is a positive coefficient times atoms that are each >= 0 (or
 * appear an even number of times).  When a term fails, it may be replaced by a lower bound
 * and the check repeated: -k*min(a, b) >= -k*a, k*max(a, b) >= k*a, -k*(x % d) >= -k*(d - 1),
 * -k*(x/d) >= -(k/d)*x and k*(x/d) >= (k/d)*(x - d + 1) when d divides k.
 *
 * Facts first change variables: a fact v + r >= 0 where v appears alone with coefficient 1
 * (and r does not mention v) means v = v' + (-r) with v' >= 0, so substituting v := v - r
 * keeps "every variable is >= 0" true and loses nothing (N - 1 >= 0 turns N - 1 into N).
 * Then p is tried minus up to three of the remaining facts (with repetition), since
 * p = f1 + ... + fk + s with s >= 0 proves p >= 0. */

enum { RELAX_BUDGET = 4, FACT_DEPTH = 3 };

static bool form_nonneg(PolyCtx *c, const PTerm *t, int n, int budget);

static bool poly_form_nonneg(PolyCtx *c, const Poly *p, int budget) {
  return form_nonneg(c, p->t, p->n, budget);
}

/* b >= 1, so that dividing by it is defined and keeps the sign. */
static bool at_least_one(PolyCtx *c, const Poly *b) {
  int64_t k;
  if (poly_is_const(b, &k)) return k >= 1;
  PTermVec v = {0};
  bool ok = terms_merge(b->t, b->n, c->one->t, 1, -1, &v) && form_nonneg(c, v.a, v.n, 1);
  vec_free(v);
  return ok;
}

static bool atom_nonneg(PolyCtx *c, const PAtom *x) {
  int64_t d;
  switch (x->kind) {
  case PA_VAR: return true;
  case PA_DIV: return poly_form_nonneg(c, x->a, 1) && at_least_one(c, x->b);
  case PA_MOD:
    if (poly_is_const(x->b, &d) && d > 0) return true;
    return poly_form_nonneg(c, x->a, 1) && at_least_one(c, x->b);
  case PA_MIN: case PA_ADD: case PA_MUL:
    return poly_form_nonneg(c, x->a, 1) && poly_form_nonneg(c, x->b, 1);
  case PA_MAX: return poly_form_nonneg(c, x->a, 1) || poly_form_nonneg(c, x->b, 1);
  }
  return false;
}

static bool mono_nonneg(PolyCtx *c, const PMono *m) {
  for (int i = 0; i < m->deg;) {
    int j = i;
    while (j < m->deg && m->f[j] == m->f[i]) j++;
    if ((j - i) % 2 && !atom_nonneg(c, m->f[i])) return false;
    i = j;
  }
  return true;
}

/* t with its term i replaced by k*lower (lower given as terms), checked with what is left of
 * the budget. */
static bool try_bound(PolyCtx *c, const PTerm *t, int n, int i, const PTerm *lt, int ln, int64_t k,
                      int budget) {
  PTermVec without = {0}, with = {0};
  bool ok = terms_merge(t, n, &t[i], 1, -1, &without) &&
            terms_merge(without.a, without.n, lt, ln, k, &with) &&
            form_nonneg(c, with.a, with.n, budget);
  vec_free(without);
  vec_free(with);
  return ok;
}

/* A quotient by a symbolic divisor, q = a/b with b >= 1, satisfies a - b + 1 <= b*q <= a.  When
 * the terms that hold q (once each) add up to k*b*q, replace them by k*a (k < 0) or by
 * k*(a - b + 1) (k > 0): H - K - S*((H - K)/S) >= 0 is how a strided window is proved in bounds. */
static bool relax_quotient(PolyCtx *c, const PTerm *t, int n, const PAtom *q, int budget) {
  const Poly *b = q->b;
  PTermVec coef = {0}, rest = {0}, lower = {0}, out = {0};
  bool ok = false;
  for (int i = 0; i < n; i++) {
    const PMono *m = t[i].m;
    int at = -1, times = 0;
    for (int j = 0; j < m->deg; j++)
      if (m->f[j] == q) at = j, times++;
    if (times == 0) {
      vec_push(rest, t[i]);
      continue;
    }
    if (times > 1 || m->deg > 16) goto done;
    const PAtom *f[16];
    for (int j = 0, o = 0; j < m->deg; j++)
      if (j != at) f[o++] = m->f[j];
    PTerm ct = {t[i].coef, mono_get(c, f, m->deg - 1)};
    vec_push(coef, ct);
  }
  if (!terms_normalize(&coef) || coef.n != b->n || b->n == 0) goto done;
  if (b->t[0].coef == -1 && coef.a[0].coef == INT64_MIN) goto done;
  int64_t k = coef.a[0].coef / b->t[0].coef;
  for (int j = 0; j < b->n; j++) {
    int64_t want;
    if (coef.a[j].m != b->t[j].m || !mul_ok(k, b->t[j].coef, &want) || want != coef.a[j].coef)
      goto done;
  }
  if (k == 0 || !at_least_one(c, b)) goto done;
  PTerm one = {1, c->unit};
  if (k < 0) {
    if (!terms_merge(rest.a, rest.n, q->a->t, q->a->n, k, &out)) goto done;
  } else {
    if (!terms_merge(q->a->t, q->a->n, b->t, b->n, -1, &lower) ||
        !terms_merge(lower.a, lower.n, &one, 1, 1, &coef) ||
        !terms_merge(rest.a, rest.n, coef.a, coef.n, k, &out))
      goto done;
  }
  ok = form_nonneg(c, out.a, out.n, budget);
done:
  vec_free(coef);
  vec_free(rest);
  vec_free(lower);
  vec_free(out);
  return ok;
}

/* Replace term i by each of its lower bounds in turn; false when it has none that proves. */
static bool relax_term(PolyCtx *c, const PTerm *t, int n, int i, int budget) {
  int64_t k = t[i].coef, d;
  for (int j = 0; j < t[i].m->deg; j++) {
    const PAtom *x = t[i].m->f[j];
    if (x->kind == PA_DIV && !poly_is_const(x->b, NULL) && (j == 0 || x != t[i].m->f[j - 1]) &&
        relax_quotient(c, t, n, x, budget))
      return true;
  }
  if (t[i].m->deg != 1) return false;
  const PAtom *x = t[i].m->f[0];
  switch (x->kind) {
  case PA_MIN:                         /* k*min(a, b) >= k*a for k < 0 */
  case PA_MAX:                         /* k*max(a, b) >= k*a for k > 0 */
    if ((x->kind == PA_MIN) != (k < 0)) return false;
    return try_bound(c, t, n, i, x->a->t, x->a->n, k, budget) ||
           try_bound(c, t, n, i, x->b->t, x->b->n, k, budget);
  case PA_MOD: {                       /* k*(y % d) >= k*(d - 1) for k < 0 */
    if (k > 0 || !poly_is_const(x->b, &d) || d <= 0) return false;
    PTerm top = {d - 1, c->unit};
    return try_bound(c, t, n, i, &top, 1, k, budget);
  }
  case PA_DIV: {
    if (!poly_is_const(x->b, &d) || d <= 0 || k % d) return false;
    if (k < 0) return try_bound(c, t, n, i, x->a->t, x->a->n, k / d, budget);
    PTermVec lo = {0};                  /* y - (d - 1) */
    PTerm dm = {1 - d, c->unit};
    bool ok = terms_merge(x->a->t, x->a->n, &dm, 1, 1, &lo) &&
              try_bound(c, t, n, i, lo.a, lo.n, k / d, budget);
    vec_free(lo);
    return ok;
  }
  default:
    return false;
  }
}

static bool form_nonneg(PolyCtx *c, const PTerm *t, int n, int budget) {
  int bad = -1;
  for (int i = 0; i < n && bad < 0; i++) {
    int64_t k = t[i].coef;
    if (!(t[i].m->deg == 0 ? k >= 0 : k > 0 && mono_nonneg(c, t[i].m))) bad = i;
  }
  if (bad < 0) return true;
  if (budget == 0) return false;
  if (relax_term(c, t, n, bad, budget - 1)) return true;
  /* The failing term may be paid for by a lower bound of a positive max or quotient:
   * max(N, M) - M >= M - M. */
  for (int i = 0; i < n; i++)
    if (i != bad && t[i].coef > 0 && relax_term(c, t, n, i, budget - 1)) return true;
  return false;
}

static bool search_facts(PolyCtx *c, const PTerm *g, int ng, const Poly **f, int nf, int from,
                         int depth) {
  if (form_nonneg(c, g, ng, RELAX_BUDGET)) return true;
  if (depth == 0) return false;
  PTermVec v = {0};
  bool ok = false;
  for (int i = from; i < nf && !ok; i++)
    ok = terms_merge(g, ng, f[i]->t, f[i]->n, -1, &v) &&
         search_facts(c, v.a, v.n, f, nf, i, depth - 1);
  vec_free(v);
  return ok;
}

typedef struct { const char *name; const Poly *to; } POneSubst;

static const Poly *one_subst(void *env, const char *name) {
  POneSubst *s = env;
  return strcmp(name, s->name) == 0 ? s->to : NULL;
}

/* A variable v such that fact = v + rest, rest free of v and not already >= 0 (else the fact
 * says nothing new); NULL if none. */
static const char *fact_pivot(PolyCtx *c, const Poly *fact, const Poly **rest) {
  for (int i = 0; i < fact->n; i++) {
    const PMono *m = fact->t[i].m;
    if (fact->t[i].coef != 1 || m->deg != 1 || m->f[0]->kind != PA_VAR) continue;
    const Poly *coef;
    if (poly_affine_in(c, fact, m->f[0]->name, &coef, rest) && coef == c->one &&
        !poly_form_nonneg(c, *rest, RELAX_BUDGET))
      return m->f[0]->name;
  }
  return NULL;
}

bool poly_nonneg(PolyCtx *c, const Poly *p, const Poly *const *facts, int nfacts) {
  if (poly_form_nonneg(c, p, RELAX_BUDGET)) return true;
  if (nfacts <= 0) return false;
  const Poly **f = xmalloc((size_t)nfacts * sizeof *f);
  int nf = 0;
  for (int i = 0; i < nfacts; i++)
    if (facts[i]) f[nf++] = facts[i];
  /* Change variables, one fact at a time; the fact used becomes "v >= 0" and is dropped. */
  for (int i = 0; i < nf;) {
    const Poly *rest;
    const char *v = fact_pivot(c, f[i], &rest);
    if (!v) {
      i++;
      continue;
    }
    POneSubst s = {v, poly_sub(c, poly_var(c, v), rest)};
    p = poly_subst(c, p, one_subst, &s);
    f[i] = f[--nf];
    for (int j = 0; j < nf; j++) f[j] = poly_subst(c, f[j], one_subst, &s);
    i = 0;                             /* earlier facts may have gained a pivot */
  }
  bool ok = search_facts(c, p->t, p->n, f, nf, 0, FACT_DEPTH);
  free(f);
  return ok;
}
