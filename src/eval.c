/* eval.c -- the reference evaluator: runs a lowered program directly, simply and exactly.
 *
 * It is the oracle of every differential test and the back end when LLVM is absent, so it
 * favours obviousness: every f32 operation is rounded to f32 as the language says (only
 * the accumulators of reductions are kept in double, which makes sums more accurate),
 * integers wrap like two's complement, every access is bounds-checked, where(...) evaluates
 * only the chosen branch.  To be usable on real sizes it interprets one expression over a
 * strip of up to CH points of the innermost axis at a time (values that do not depend on
 * that axis are computed once), so the interpretive overhead is paid per strip, not per
 * element.  A stage with no axis of its own vectorises its reductions instead.
 */
#include "config.h"
#include "dyn_int.h"

#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#define CH 512

typedef struct V {
  bool u;              /* uniform: one value for every lane */
  double fu; int64_t iu;
  double *f; int64_t *i;
} V;

typedef struct E {
  const Program *p;
  Tensor **t;          /* per slot */
  const int64_t *ext;  /* per axis (the call's Extents record) */
  int64_t *ax;         /* current value of each axis (the strip's first for the vector axis) */
  int vax, n;          /* vector axis (-1: none) and lanes */
  const int64_t *szv;  /* KX_SIZE values by node id (the call's Extents record) */
  double **bf; int64_t **bi;      /* per node lane buffers */
  int nouter;          /* outer axes of the current kernel (skipped for per-row slots) */
  volatile int *interrupt;
  jmp_buf jb;
  Buf *err;
  Span *err_span;
} E;

static _Noreturn void fail(E *E, Span sp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(E->err, fmt, ap);
  va_end(ap);
  if (E->err_span) *E->err_span = sp;
  longjmp(E->jb, 1);
}

static bool isf(DynElem t) { return elem_is_float(t); }

/* An operation's result at its type's working precision: f32 for f32, f16 and bf16 (whose
 * values are held as f32 between a load and a store), the double itself for f64. */
static double rnd(DynElem t, double x) { return elem_compute(t) == DYN_F32 ? (double)(float)x : x; }

/* A conversion (a cast) to t: a 16-bit type gets the f32 value rounded to 16 bits, as the
 * back ends convert it (lang/reference.md, "16-bit floats"). */
static double conv(DynElem t, double x) { return half_round(t, elem_is_half(t) ? (double)(float)x : x); }

static V ev(E *E, const KExpr *e, const uint8_t *mask);

static double fl(const V *v, int k) { return v->u ? v->fu : v->f[k]; }
static int64_t in(const V *v, int k) { return v->u ? v->iu : v->i[k]; }

static V lanes(E *E, const KExpr *e) {
  V v = {0};
  v.f = E->bf[e->id];
  v.i = E->bi[e->id];
  return v;
}

static bool varies(E *E, const KExpr *e) {
  return E->vax >= 0 && (e->axmask >> (E->vax % 64) & 1);
}

/* Wrap-around integer arithmetic without undefined behaviour. */
static int64_t wrap(DynElem t, uint64_t v) {
  if (t == DYN_I32) return (int32_t)(uint32_t)v;
  if (t == DYN_BOOL) return v != 0;
  return (int64_t)v;
}

static int64_t floordiv(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

static int64_t floormod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

static double fmodfloor(double a, double b) {
  double m = fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  if (m == 0) m = copysign(0.0, b);       /* the sign of the divisor, as Python */
  return m;
}

static double un_f(OpKind op, double x) {
  switch (op) {
  case OP_NEG: return -x;
  case OP_EXP: return exp(x);
  case OP_LOG: return log(x);
  case OP_SQRT: return sqrt(x);
  case OP_RSQRT: return 1.0 / sqrt(x);
  case OP_ABS: return fabs(x);
  case OP_SIN: return sin(x);
  case OP_COS: return cos(x);
  case OP_TANH: return tanh(x);
  case OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case OP_ERF: return erf(x);
  case OP_FLOOR: return floor(x);
  case OP_CEIL: return ceil(x);
  case OP_ROUND: return nearbyint(x);      /* half to even, as NumPy */
  default: return x;
  }
}

static double bin_f(OpKind op, double a, double b) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_MOD: return fmodfloor(a, b);
  case OP_POW: case OP_POWF: return pow(a, b);
  case OP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case OP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  default: return 0;
  }
}

/* A comparison from its operands' order: lt, eq and gt are all false for a NaN, so that
 * every comparison but != is false then, as IEEE says. */
static bool cmp(OpKind op, bool lt, bool eq, bool gt) {
  switch (op) {
  case OP_EQ: return eq;
  case OP_NE: return !eq;
  case OP_LT: return lt;
  case OP_LE: return lt || eq;
  case OP_GT: return gt;
  default: return gt || eq;
  }
}

static int64_t bin_i(E *E, const KExpr *e, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (e->op) {
  case OP_ADD: return wrap(e->ty, ua + ub);
  case OP_SUB: return wrap(e->ty, ua - ub);
  case OP_MUL: return wrap(e->ty, ua * ub);
  case OP_DIV:
  case OP_MOD: {
    if (b == 0) {
      Buf t = {0};
      kx_print(E->p, e, &t);
      buf_printf(E->err, "integer %s by zero in %s", e->op == OP_DIV ? "division" : "modulo", t.s);
      buf_free(&t);
      fail(E, e->span, "%s", "");
    }
    return wrap(e->ty, (uint64_t)(e->op == OP_DIV ? floordiv(a, b) : floormod(a, b)));
  }
  case OP_MAX: return a > b ? a : b;
  case OP_MIN: return a < b ? a : b;
  case OP_AND: return a && b;
  case OP_OR: return a || b;
  case OP_POW: case OP_POWF: {
    int64_t r = 1;
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    for (int64_t k = 0; k < b && k < 64; k++) r = (int64_t)((uint64_t)r * (uint64_t)a);
    return wrap(e->ty, (uint64_t)r);
  }
  default: return 0;
  }
}

static int64_t un_i(const KExpr *e, int64_t x) {
  switch (e->op) {
  case OP_NEG: return wrap(e->ty, 0 - (uint64_t)x);
  case OP_NOT: return !x;
  case OP_ABS: return wrap(e->ty, x < 0 ? 0 - (uint64_t)x : (uint64_t)x);
  default: return x;       /* floor, ceil, round of an integer */
  }
}

/* A float to an integer type: truncation toward zero, saturating, NaN to 0 (C leaves
 * out-of-range conversions undefined; dyn defines them). */
static int64_t f2i(DynElem t, double x) {
  if (isnan(x)) return 0;
  double lo = t == DYN_I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = t == DYN_I32 ? 2147483647.0 : 9223372036854775807.0;
  if (x <= lo) return (int64_t)lo;
  if (x >= hi) return t == DYN_I32 ? 2147483647 : INT64_MAX;
  return (int64_t)x;
}

static double load_f(const Tensor *t, int64_t off) {
  const char *base = (const char *)t->buf->data;
  switch (t->elem) {
  case DYN_F32: return ((const float *)base)[off];
  case DYN_F64: return ((const double *)base)[off];
  case DYN_F16: return half_f16_to(((const uint16_t *)base)[off]);
  case DYN_BF16: return half_bf16_to(((const uint16_t *)base)[off]);
  case DYN_I32: return ((const int32_t *)base)[off];
  case DYN_I64: return (double)((const int64_t *)base)[off];
  default: return ((const uint8_t *)base)[off];
  }
}

static int64_t load_i(const Tensor *t, int64_t off) {
  const char *base = (const char *)t->buf->data;
  switch (t->elem) {
  case DYN_F32: return (int64_t)((const float *)base)[off];
  case DYN_F64: return (int64_t)((const double *)base)[off];
  case DYN_F16: return (int64_t)half_f16_to(((const uint16_t *)base)[off]);
  case DYN_BF16: return (int64_t)half_bf16_to(((const uint16_t *)base)[off]);
  case DYN_I32: return ((const int32_t *)base)[off];
  case DYN_I64: return ((const int64_t *)base)[off];
  default: return ((const uint8_t *)base)[off];
  }
}

static void store(Tensor *t, int64_t off, double f, int64_t i, bool from_float) {
  char *base = (char *)t->buf->data;
  switch (t->elem) {
  case DYN_F32: ((float *)base)[off] = (float)(from_float ? f : (double)i); break;
  case DYN_F64: ((double *)base)[off] = from_float ? f : (double)i; break;
  case DYN_F16: ((uint16_t *)base)[off] = half_f16_from(from_float ? f : (double)i); break;
  case DYN_BF16: ((uint16_t *)base)[off] = half_bf16_from(from_float ? f : (double)i); break;
  case DYN_I32: ((int32_t *)base)[off] = (int32_t)(from_float ? f2i(DYN_I32, f) : i); break;
  case DYN_I64: ((int64_t *)base)[off] = from_float ? f2i(DYN_I64, f) : i; break;
  default: ((uint8_t *)base)[off] = from_float ? f != 0 : i != 0; break;
  }
}

/* A subscript that is an element of an integer tensor (a gather, E[tok[t], d]) is named
 * with its position and value, "tok[2] = 7 is out of range for axis 0 of E (size 3)": the
 * user fixes the data, not the expression.  Lane j of the subscripts, evaluated under mask. */
static bool oob_data(E *E, const KExpr *e, int k, int64_t v, int64_t dim, int j, const uint8_t *mask) {
  const KExpr *x = e->a[k];
  while (x->kind == KX_CAST && elem_is_int(x->a[0]->ty)) x = x->a[0];
  if (x->kind != KX_LOAD) return false;
  int skip = E->p->slots[e->slot].kind == SLOT_LOCAL ? E->nouter : 0;
  buf_printf(E->err, "%s", E->p->slots[x->slot].name);
  for (int m = 0; m < x->n; m++) {
    V sub = ev(E, x->a[m], mask);
    buf_printf(E->err, "%s%lld", m ? ", " : "[", (long long)in(&sub, j));
  }
  buf_printf(E->err, "%s = %lld is out of range for axis %d of %s (size %lld)", x->n ? "]" : "", (long long)v,
             k - skip, E->p->slots[e->slot].name, (long long)dim);
  return true;
}

static _Noreturn void oob(E *E, const KExpr *e, int k, int64_t v, int64_t dim, int j, const uint8_t *mask) {
  if (oob_data(E, e, k, v, dim, j, mask)) fail(E, e->span, "%s", "");
  Buf t = {0};
  kx_print(E->p, e, &t);
  if (t.len && t.s[t.len - 1] == '!') t.s[--t.len] = 0;
  const Slot *s = &E->p->slots[e->slot];
  buf_printf(E->err, "%s is out of bounds: subscript %d is %lld but dimension %d of %s is %lld",
             t.s, k, (long long)v, k, s->name, (long long)dim);
  buf_free(&t);
  fail(E, e->span, "%s", "");
}

static V ev_load(E *E, const KExpr *e, const uint8_t *mask) {
  Tensor *t = E->t[e->slot];
  int skip = E->p->slots[e->slot].kind == SLOT_LOCAL ? E->nouter : 0;
  V subs[DYN_MAX_RANK];
  bool uni = true;
  for (int k = 0; k < e->n; k++) {
    subs[k] = ev(E, e->a[k], mask);
    uni = uni && subs[k].u;
  }
  bool fo = isf(e->ty);
  V r = uni ? (V){.u = true} : lanes(E, e);
  int n = uni ? 1 : E->n;
  for (int j = 0; j < n; j++) {
    if (mask && !uni && !mask[j]) {
      r.f[j] = 0;
      r.i[j] = 0;
      continue;
    }
    int64_t off = t->offset;
    for (int k = skip; k < e->n; k++) {
      int64_t v = in(&subs[k], j), dim = t->shape[k - skip];
      if (v < 0 || v >= dim) oob(E, e, k, v, dim, j, uni ? NULL : mask);
      off += v * t->strides[k - skip];
    }
    if (uni) {
      if (fo) r.fu = load_f(t, off);
      else r.iu = load_i(t, off);
    } else if (fo) {
      r.f[j] = load_f(t, off);
    } else {
      r.i[j] = load_i(t, off);
    }
  }
  return r;
}

static void red_init(const KExpr *e, double *f, int64_t *i) {
  bool fo = isf(e->ty);
  switch (e->red) {
  case RED_SUM: *f = 0; *i = 0; break;
  case RED_PROD: *f = 1; *i = 1; break;
  case RED_MAX: *f = -INFINITY; *i = e->ty == DYN_I32 ? INT32_MIN : INT64_MIN; break;
  case RED_MIN: *f = INFINITY; *i = e->ty == DYN_I32 ? INT32_MAX : INT64_MAX; break;
  }
  (void)fo;
}

static void red_step_f(RedOp r, double *acc, double x) {
  switch (r) {
  case RED_SUM: *acc += x; break;
  case RED_PROD: *acc *= x; break;
  case RED_MAX: if (isnan(x) || x > *acc) *acc = isnan(*acc) ? *acc : x; break;
  case RED_MIN: if (isnan(x) || x < *acc) *acc = isnan(*acc) ? *acc : x; break;
  }
}

static void red_step_i(const KExpr *e, int64_t *acc, int64_t x) {
  switch (e->red) {
  case RED_SUM: *acc = wrap(e->ty, (uint64_t)*acc + (uint64_t)x); break;
  case RED_PROD: *acc = wrap(e->ty, (uint64_t)*acc * (uint64_t)x); break;
  case RED_MAX: if (x > *acc) *acc = x; break;
  case RED_MIN: if (x < *acc) *acc = x; break;
  }
}

static void poll(E *E) {
  if (E->interrupt && *E->interrupt) fail(E, (Span){0}, "interrupted");
}

static V ev_reduce(E *E, const KExpr *e, const uint8_t *mask) {
  const KExpr *body = e->a[0];
  int nr = e->nraxes;
  bool fo = isf(e->ty);
  for (int k = 0; k < nr; k++)
    if (E->ext[e->raxes[k]] <= 0) {
      V r = {.u = true};
      red_init(e, &r.fu, &r.iu);
      return r;
    }
  if (E->vax < 0) {
    /* No lanes outside: vectorise along the innermost reduction axis. */
    int last = e->raxes[nr - 1];
    int64_t len = E->ext[last];
    double af = 0; int64_t ai = 0;
    red_init(e, &af, &ai);
    for (int k = 0; k < nr - 1; k++) E->ax[e->raxes[k]] = 0;
    for (;;) {
      for (int64_t c = 0; c < len; c += CH) {
        E->vax = last;
        E->n = (int)(len - c < CH ? len - c : CH);
        E->ax[last] = c;
        V b = ev(E, body, NULL);
        int n = E->n;
        E->vax = -1;
        E->n = 1;
        if (b.u) {
          for (int j = 0; j < n; j++) {
            if (fo) red_step_f(e->red, &af, b.fu);
            else red_step_i(e, &ai, b.iu);
          }
        } else if (fo) {
          for (int j = 0; j < n; j++) red_step_f(e->red, &af, b.f[j]);
        } else {
          for (int j = 0; j < n; j++) red_step_i(e, &ai, b.i[j]);
        }
      }
      poll(E);
      int k = nr - 2;
      while (k >= 0 && ++E->ax[e->raxes[k]] == E->ext[e->raxes[k]]) E->ax[e->raxes[k--]] = 0;
      if (k < 0) break;
    }
    return (V){.u = true, .fu = rnd(e->ty, af), .iu = ai};
  }
  bool vec = varies(E, e);
  V r = vec ? lanes(E, e) : (V){.u = true};
  int n = vec ? E->n : 1;
  double f0; int64_t i0;
  red_init(e, &f0, &i0);
  if (vec)
    for (int j = 0; j < n; j++) { r.f[j] = f0; r.i[j] = i0; }
  else { r.fu = f0; r.iu = i0; }
  for (int k = 0; k < nr; k++) E->ax[e->raxes[k]] = 0;
  int64_t count = 0;
  for (;;) {
    V b = ev(E, body, mask);
    if (!vec) {
      if (fo) red_step_f(e->red, &r.fu, fl(&b, 0));
      else red_step_i(e, &r.iu, in(&b, 0));
    } else if (fo) {
      for (int j = 0; j < n; j++) red_step_f(e->red, &r.f[j], fl(&b, j));
    } else {
      for (int j = 0; j < n; j++) red_step_i(e, &r.i[j], in(&b, j));
    }
    if ((++count & 1023) == 0) poll(E);
    int k = nr - 1;
    while (k >= 0 && ++E->ax[e->raxes[k]] == E->ext[e->raxes[k]]) E->ax[e->raxes[k--]] = 0;
    if (k < 0) break;
  }
  if (elem_compute(e->ty) == DYN_F32) {
    if (!vec) r.fu = rnd(e->ty, r.fu);
    else
      for (int j = 0; j < n; j++) r.f[j] = rnd(e->ty, r.f[j]);
  }
  return r;
}

static V ev(E *E, const KExpr *e, const uint8_t *mask) {
  bool vec = varies(E, e);
  int n = vec ? E->n : 1;
  V r;
  switch (e->kind) {
  case KX_CONST:
    return (V){.u = true, .fu = half_round(e->ty, e->f), .iu = e->i};
  case KX_SIZE:
    return (V){.u = true, .fu = (double)E->szv[e->id], .iu = E->szv[e->id]};
  case KX_AXIS:
    if (e->axis != E->vax) return (V){.u = true, .iu = E->ax[e->axis]};
    r = lanes(E, e);
    for (int j = 0; j < n; j++) r.i[j] = E->ax[e->axis] + j;
    return r;
  case KX_LOAD:
    return ev_load(E, e, mask);
  case KX_REDUCE:
    return ev_reduce(E, e, mask);
  case KX_SCAN:                 /* a stage's value: run_stage evaluates its body, then scans */
    return ev(E, e->a[0], mask);
  case KX_CAST: {
    V a = ev(E, e->a[0], mask);
    r = a.u ? (V){.u = true} : lanes(E, e);
    n = a.u ? 1 : E->n;
    bool from_f = isf(e->opty), to_f = isf(e->ty);
    for (int j = 0; j < n; j++) {
      double f = 0; int64_t i = 0;
      if (from_f && to_f) f = conv(e->ty, fl(&a, j));
      else if (from_f) i = e->ty == DYN_BOOL ? fl(&a, j) != 0 : f2i(e->ty, fl(&a, j));
      else if (to_f) f = elem_compute(e->ty) == DYN_F32 ? conv(e->ty, (double)(float)in(&a, j)) : (double)in(&a, j);
      else i = wrap(e->ty, (uint64_t)in(&a, j));
      if (a.u) { r.fu = f; r.iu = i; }
      else { r.f[j] = f; r.i[j] = i; }
    }
    return r;
  }
  case KX_UN: {
    V a = ev(E, e->a[0], mask);
    r = a.u ? (V){.u = true} : lanes(E, e);
    n = a.u ? 1 : E->n;
    for (int j = 0; j < n; j++) {
      double f = 0; int64_t i = 0;
      if (isf(e->ty)) {
        f = un_f(e->op, fl(&a, j));
        f = rnd(e->ty, f);
      } else {
        i = un_i(e, in(&a, j));
      }
      if (a.u) { r.fu = f; r.iu = i; }
      else { r.f[j] = f; r.i[j] = i; }
    }
    return r;
  }
  case KX_BIN: {
    V a = ev(E, e->a[0], mask), b = ev(E, e->a[1], mask);
    bool u = a.u && b.u;
    r = u ? (V){.u = true} : lanes(E, e);
    n = u ? 1 : E->n;
    OpClass c = op_class(e->op);
    for (int j = 0; j < n; j++) {
      if (!u && mask && !mask[j]) { r.f[j] = 0; r.i[j] = 0; continue; }
      double f = 0; int64_t i = 0;
      if (c == OPK_CMP) {
        if (isf(e->opty)) {
          double x = fl(&a, j), y = fl(&b, j);
          i = cmp(e->op, x < y, x == y, x > y);
        } else {
          int64_t x = in(&a, j), y = in(&b, j);
          i = cmp(e->op, x < y, x == y, x > y);
        }
      }
      else if (isf(e->ty)) {
        f = bin_f(e->op, fl(&a, j), fl(&b, j));
        f = rnd(e->ty, f);
      }
      else i = bin_i(E, e, in(&a, j), in(&b, j));
      if (u) { r.fu = f; r.iu = i; }
      else { r.f[j] = f; r.i[j] = i; }
    }
    return r;
  }
  case KX_SELECT: {
    V c = ev(E, e->a[0], mask);
    if (c.u) return ev(E, e->a[c.iu ? 1 : 2], mask);
    /* The branch masks live in this node's float lanes, which are written only below, after
     * both branches are done: ev recurses as deep as the expression is tall, so its frame
     * stays small. */
    uint8_t *m1 = (uint8_t *)E->bf[e->id], *m2 = m1 + CH;
    bool any1 = false, any2 = false;
    for (int j = 0; j < E->n; j++) {
      bool on = !mask || mask[j];
      m1[j] = on && c.i[j];
      m2[j] = on && !c.i[j];
      any1 = any1 || m1[j];
      any2 = any2 || m2[j];
    }
    /* A branch no lane takes is not evaluated at all: its uniform parts (a load at a
     * subscript that does not vary, a division of sizes) would otherwise run and could
     * fail although the program never chose them. */
    V a = any1 ? ev(E, e->a[1], m1) : (V){.u = true};
    V b = any2 ? ev(E, e->a[2], m2) : (V){.u = true};
    r = lanes(E, e);
    for (int j = 0; j < E->n; j++) {
      r.f[j] = c.i[j] ? fl(&a, j) : fl(&b, j);
      r.i[j] = c.i[j] ? in(&a, j) : in(&b, j);
    }
    return r;
  }
  }
  return (V){.u = true};
}

/* A scan stage after its body's values are stored: T[..., j, ...] = T[..., j - 1, ...] (op)
 * T[..., j, ...] for j = 1, 2, ... in order, so each step combines its left neighbour's
 * final value, rounded to the element type as every element of T is (no wider
 * accumulator: the CPU and GPU back ends compute exactly this).  base and first as in
 * run_stage. */
static void scan_pass(E *E, const Stage *st, Tensor *t, int64_t base, int first) {
  const KExpr *e = st->expr;
  int na = st->naxes, s = 0;
  while (st->axes[s] != e->raxes[0]) s++;
  int64_t len = E->ext[st->axes[s]], step = t->strides[first + s], at[DYN_MAX_RANK] = {0};
  bool fo = isf(e->ty);
  for (;;) {
    int64_t off = base;
    for (int a = 0; a < na; a++) off += at[a] * t->strides[first + a];
    for (int64_t j = 1; j < len; j++) {
      int64_t o = off + j * step;
      if (fo) {
        double acc = load_f(t, o - step);
        red_step_f(e->red, &acc, load_f(t, o));
        store(t, o, acc, 0, true);
      } else {
        int64_t acc = load_i(t, o - step);
        red_step_i(e, &acc, load_i(t, o));
        store(t, o, 0, acc, false);
      }
    }
    poll(E);
    int a = na - 1;
    while (a >= 0 && (a == s || ++at[a] == E->ext[st->axes[a]])) at[a--] = 0;
    if (a < 0) break;
  }
}

/* Run one stage at the current outer point. */
static void run_stage(E *E, const Kernel *kn, const Stage *st) {
  Tensor *t = E->t[st->out];
  bool local = E->p->slots[st->out].kind == SLOT_LOCAL;
  int na = st->naxes;
  for (int a = 0; a < na; a++)
    if (E->ext[st->axes[a]] <= 0) return;
  /* offset of the outer point */
  int64_t base = t->offset;
  if (!local)
    for (int o = 0; o < kn->nouter; o++) base += E->ax[kn->outer[o]] * t->strides[o];
  int first = local ? 0 : kn->nouter;
  bool fo = isf(st->expr->ty);
  const KExpr *body = st->expr->kind == KX_SCAN ? st->expr->a[0] : st->expr;
  if (na == 0) {
    E->vax = -1;
    E->n = 1;
    V v = ev(E, st->expr, NULL);
    store(t, base, fl(&v, 0), in(&v, 0), fo);
    return;
  }
  int last = st->axes[na - 1];
  for (int a = 0; a < na; a++) E->ax[st->axes[a]] = 0;
  for (;;) {
    int64_t off = base;
    for (int a = 0; a < na - 1; a++) off += E->ax[st->axes[a]] * t->strides[first + a];
    int64_t len = E->ext[last], stride = t->strides[first + na - 1];
    for (int64_t c = 0; c < len; c += CH) {
      E->vax = last;
      E->n = (int)(len - c < CH ? len - c : CH);
      E->ax[last] = c;
      V v = ev(E, body, NULL);
      for (int j = 0; j < E->n; j++) store(t, off + (c + j) * stride, fl(&v, j), in(&v, j), fo);
    }
    poll(E);
    E->ax[last] = 0;
    int a = na - 2;
    while (a >= 0 && ++E->ax[st->axes[a]] == E->ext[st->axes[a]]) E->ax[st->axes[a--]] = 0;
    if (a < 0) break;
  }
  if (body != st->expr) scan_pass(E, st, t, base, first);
}

bool eval_size_lookup(void *env, const char *name, int64_t *v) {
  const EvalSizes *s = env;
  for (int i = 0; i < s->n; i++)      /* a function's names are its polynomials' own strings */
    if (s->names[i] == name) {
      *v = s->vals[i];
      return true;
    }
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name)) {
      *v = s->vals[i];
      return true;
    }
  return false;
}

static bool sizes_in(const KExpr *e, const EvalSizes *sizes, int64_t *szv, Buf *why) {
  if (e->kind == KX_SIZE) {
    const char *w = NULL;
    if (!poly_eval(e->size, eval_size_lookup, (void *)sizes, &szv[e->id], &w)) {
      buf_puts(why, "cannot evaluate the size ");
      poly_str(e->size, why);
      buf_printf(why, ": %s", w ? w : "unbound");
      return false;
    }
  }
  for (int i = 0; i < e->n; i++)
    if (!sizes_in(e->a[i], sizes, szv, why)) return false;
  return true;
}

bool eval_size_values(const Program *p, const EvalSizes *sizes, int64_t *szv, Buf *why) {
  for (int k = 0; k < p->nkernels; k++)
    for (int s = 0; s < p->kernels[k].nstages; s++)
      if (!sizes_in(p->kernels[k].stages[s].expr, sizes, szv, why)) return false;
  return true;
}

bool eval_program(const Program *p, Tensor **inputs, const Extents *x, Tensor **outs,
                  volatile int *interrupt, Buf *err, Span *err_span) {
  E ctx = {0};
  E *E = &ctx;
  E->p = p;
  E->interrupt = interrupt;
  E->err = err;
  E->err_span = err_span;
  E->t = xcalloc((size_t)p->nslots + 1, sizeof(Tensor *));
  E->ax = xcalloc((size_t)p->naxes + 1, sizeof(int64_t));
  E->bf = xcalloc((size_t)p->nkx + 1, sizeof(double *));
  E->bi = xcalloc((size_t)p->nkx + 1, sizeof(int64_t *));
  double *fpool = xmalloc(sizeof(double) * CH * ((size_t)p->nkx + 1));
  int64_t *ipool = xmalloc(sizeof(int64_t) * CH * ((size_t)p->nkx + 1));
  for (int i = 0; i < p->nkx; i++) {
    E->bf[i] = fpool + (size_t)i * CH;
    E->bi[i] = ipool + (size_t)i * CH;
  }
  bool ok = true;
  if (setjmp(E->jb)) {
    ok = false;
    goto done;
  }
  /* the sizes were bound once for every back end (extents.c); what did not evaluate is said
   * as the compiled back ends say it */
  if (x->p != p) fail(E, (Span){0}, "%s", "internal error: the extents are not this program's");
  if (!x->ok) fail(E, (Span){0}, "%s", x->err);
  E->ext = x->ext;
  E->szv = x->szv;
  /* buffers: inputs as given, temporaries and outputs whole, per-row slots per kernel */
  char msg[256];
  for (int i = 0; i < p->nslots; i++) {
    const Slot *s = &p->slots[i];
    if (s->kind == SLOT_INPUT) {
      E->t[i] = tensor_retain(inputs[s->param]);
      continue;
    }
    if (s->kind == SLOT_INLINED) continue;
    int skip = s->kind == SLOT_LOCAL ? s->type.rank - s->nlocal : 0;
    E->t[i] = tensor_new(s->type.elem, s->type.rank - skip, &x->shape[i * DYN_MAX_RANK + skip], msg, sizeof msg);
    if (!E->t[i]) fail(E, (Span){0}, "%s: %s", s->name, msg);
  }
  for (int k = 0; k < p->nkernels; k++) {
    const Kernel *kn = &p->kernels[k];
    E->nouter = kn->nouter;
    bool empty = false;
    for (int o = 0; o < kn->nouter; o++) {
      E->ax[kn->outer[o]] = 0;
      empty = empty || E->ext[kn->outer[o]] <= 0;
    }
    /* A kernel whose results have no elements computes nothing anyone can see, and when
     * nothing in it can fail, its rows need not be walked: softmax of f32[2^63 - 1, 0] has
     * 2^63 - 1 of them. */
    bool seen = false, fails = false;
    for (int s = 0; s < kn->nstages; s++) {
      const Stage *st = &kn->stages[s];
      seen = seen || (p->slots[st->out].kind != SLOT_LOCAL && tensor_numel(E->t[st->out]) > 0);
      fails = fails || kexpr_can_fail(st->expr);
    }
    if (empty || (!seen && !fails)) continue;
    for (;;) {
      for (int s = 0; s < kn->nstages; s++) run_stage(E, kn, &kn->stages[s]);
      int o = kn->nouter - 1;
      while (o >= 0 && ++E->ax[kn->outer[o]] == E->ext[kn->outer[o]]) E->ax[kn->outer[o--]] = 0;
      if (o < 0) break;
    }
  }
  for (int i = 0; i < p->nout; i++) outs[i] = tensor_retain(E->t[p->outputs[i]]);
done:
  for (int i = 0; i < p->nslots; i++) tensor_release(E->t[i]);
  free(E->t);
  free(E->ax);
  free(E->bf);
  free(E->bi);
  free(fpool);
  free(ipool);
  return ok;
}
