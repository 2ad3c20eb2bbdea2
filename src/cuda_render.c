/* cuda_render.c -- the GPU back end's renderer: the CUDA C of a Program, one module for every
 * shape.  It writes the prelude (src/cuda/prelude.cu, and prelude_mma.cu where contractions
 * run on the tensor cores; embedded at build time), then each kernel that cuda_analyse.c
 * decided on, in every variant, with every extent, size and stride an argument.  It needs no
 * GPU and no NVRTC: cuda_run.c compiles and launches what it writes. */
#include "config.h"
#include "cuda_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The prelude: the CUDA C every module starts with (helpers, reductions, the tiles of the
 * contractions); and the tensor cores' helpers and tile, appended to the prelude of a module
 * whose contractions use them: they exist only from sm_80 on.  See the comments inside them;
 * build-aux/embed.sh makes them strings (src/cuda_prelude.c). */
extern const char curender_prelude[], curender_prelude_mma[];

/* ---- rendering: expressions ----------------------------------------------------------------- */

typedef struct Rd {
  CudaProgram *cp;
  const Program *p;
  CK *ck;
  Buf *o;
  const char **ax;            /* per axis: the C expression of its value (NULL: unbound) */
  const char **sub;           /* per KExpr id: the text that stands for the node */
  const char **reg;           /* per slot: the register holding its value in this row */
  bool *wr;                   /* per slot: written by this kernel (no read-only cache then) */
} Rd;

static const char *cty(DynElem t) {
  switch (t) {
  case DYN_F32: case DYN_F16: case DYN_BF16: return "float";   /* f16, bf16: computed in f32 */
  case DYN_F64: return "double";
  case DYN_I32: return "int";
  case DYN_I64: return "i64";
  default: return "bool";
  }
}

/* In memory: bools as bytes, f16 and bf16 as their bit patterns (dyn_f16_f32 in the prelude). */
static const char *mty(DynElem t) { return t == DYN_BOOL ? "unsigned char" : elem_is_half(t) ? "unsigned short" : cty(t); }

/* A reduction's accumulator: bools accumulate as int, f16 and bf16 as f32. */
static DynElem acc_ty(DynElem t) { return t == DYN_BOOL ? DYN_I32 : elem_compute(t); }

static const char *red_op(RedOp r) {
  return r == RED_SUM ? "DynSum" : r == RED_PROD ? "DynProd" : r == RED_MAX ? "DynMax" : "DynMin";
}

/* A constant as a C literal: floats with the fewest digits that give the same value back. */
static void const_text(Buf *o, DynElem t, double f, int64_t i) {
  if (elem_is_float(t)) {
    bool f32 = t != DYN_F64;
    f = half_round(t, f);
    if (isnan(f)) {
      buf_puts(o, f32 ? "DYN_NAN_F" : "DYN_NAN_D");
      return;
    }
    if (isinf(f)) {
      buf_puts(o, f > 0 ? (f32 ? "DYN_INF_F" : "DYN_INF_D") : (f32 ? "(-DYN_INF_F)" : "(-DYN_INF_D)"));
      return;
    }
    char s[64];
    for (int d = f32 ? 6 : 15; d <= 17; d++) {
      snprintf(s, sizeof s, "%.*g", d, f);
      double back = strtod(s, NULL);
      if (f32 ? (float)back == (float)f : back == f) break;
    }
    if (!strpbrk(s, ".en")) strcat(s, ".0");
    buf_printf(o, signbit(f) ? "(%s%s)" : "%s%s", s, f32 ? "f" : "");
    return;
  }
  if (t == DYN_I32) {
    if (i == INT32_MIN) buf_puts(o, "DYN_I32_MIN");
    else buf_printf(o, i < 0 ? "(%d)" : "%d", (int)i);
  } else if (t == DYN_I64) {
    if (i == INT64_MIN) buf_puts(o, "DYN_I64_MIN");
    else buf_printf(o, i < 0 ? "(%lldLL)" : "%lldLL", (long long)i);
  } else {
    buf_puts(o, i ? "true" : "false");
  }
}

static void red_init_text(Buf *o, RedOp r, DynElem t) {
  switch (r) {
  case RED_SUM: const_text(o, t, 0, 0); break;
  case RED_PROD: const_text(o, t, 1, 1); break;
  case RED_MAX:
    if (elem_is_float(t)) const_text(o, t, -INFINITY, 0);
    else buf_puts(o, t == DYN_I64 ? "DYN_I64_MIN" : "DYN_I32_MIN");
    break;
  default:
    if (elem_is_float(t)) const_text(o, t, INFINITY, 0);
    else buf_puts(o, t == DYN_I64 ? "DYN_I64_MAX" : "DYN_I32_MAX");
    break;
  }
}

static void cast_text(Buf *o, DynElem from, DynElem to, const char *x) {
  if (from != to && elem_is_half(to)) {
    /* the f32 value, rounded to 16 bits and widened again (lang/reference.md) */
    Buf f = {0};
    cast_text(&f, elem_compute(from), DYN_F32, x);
    const char *h = to == DYN_F16 ? "f16" : "bf16";
    buf_printf(o, "dyn_%s_f32(dyn_f32_%s(%s))", h, h, f.s);
    buf_free(&f);
    return;
  }
  if (from != to) from = elem_compute(from);
  if (from == to) buf_puts(o, x);
  else if (to == DYN_BOOL) buf_printf(o, "(%s != 0)", x);
  else if (elem_is_float(to)) buf_printf(o, "(%s)(%s)", cty(to), x);
  else if (elem_is_float(from)) buf_printf(o, "dyn_f2%s(%s)", to == DYN_I32 ? "i32" : "i64", x);
  else if (to == DYN_I32) buf_printf(o, "(int)(unsigned)(%s)", x);
  else buf_printf(o, "(i64)(%s)", x);
}

/* An identifier, a field or a number needs no parentheses as an operand. */
static bool simple(const char *s) {
  for (const char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '.'))
      return false;
  return *s != 0;
}

static const char *field_name(const CK *ck, int kind, int slot, int dim, const Poly *size) {
  for (int i = 0; i < ck->nf; i++) {
    const Field *f = &ck->f[i];
    if (f->kind != kind) continue;
    if ((kind == F_PTR && f->slot == slot) || (kind == F_STRIDE && f->slot == slot && f->dim == dim) ||
        (kind == F_DIM && f->slot == slot && f->dim == dim) || (kind == F_EXT && f->size == size) ||
        (kind == F_SIZE && f->size == size) || kind >= F_ERR)
      return f->name;
  }
  return "missing_field_";   /* an internal error: the compile fails with this name */
}

static const char *ext_of(Rd *r, int axis) {
  return arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_EXT, 0, 0, r->p->axes[axis].extent));
}

/* The element offset of slot at the given subscripts: the last stride is 1. */
static void offset_text(Rd *r, int slot, const char *const *subs, int n, Buf *o) {
  if (n == 0) {
    buf_puts(o, "0");
    return;
  }
  for (int k = 0; k < n; k++) {
    if (k) buf_puts(o, " + ");
    bool last = k == n - 1;
    if (last) buf_puts(o, subs[k]);
    else if (simple(subs[k])) buf_printf(o, "%s * a.%s", subs[k], field_name(r->ck, F_STRIDE, slot, k, NULL));
    else buf_printf(o, "(%s) * a.%s", subs[k], field_name(r->ck, F_STRIDE, slot, k, NULL));
  }
}

static void ex(Rd *r, const KExpr *e, Buf *o);

static const char *ex_str(Rd *r, const KExpr *e) {
  Buf b = {0};
  ex(r, e, &b);
  const char *s = arena_strndup(r->cp->ar, b.s ? b.s : "", b.len);
  buf_free(&b);
  return s;
}

/* e converted to type t */
static void ex_as(Rd *r, const KExpr *e, DynElem t, Buf *o) {
  if (e->ty == t) {
    ex(r, e, o);
    return;
  }
  cast_text(o, e->ty, t, ex_str(r, e));
}

static const char *ex_as_str(Rd *r, const KExpr *e, DynElem t) {
  Buf b = {0};
  ex_as(r, e, t, &b);
  const char *s = arena_strndup(r->cp->ar, b.s ? b.s : "", b.len);
  buf_free(&b);
  return s;
}

/* A primary or postfix expression (a name, a call, an index, a parenthesised expression, a
 * cast of one, a lambda called): safe as the operand of any operator. */
static bool primary(const char *s, size_t n) {
  if (n == 0) return false;
  bool id = true;
  for (size_t i = 0; i < n && id; i++)
    id = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
         s[i] == '.' || s[i] == ':';
  if (id) return true;
  if (n >= 3 && !strncmp(s, "[&]", 3) && s[n - 1] == '}') return true;
  char last = s[n - 1];
  if (last != ')' && last != ']') return false;
  int depth = 0;
  size_t j = n;
  while (j > 0) {
    char c = s[--j];
    if (c == ')' || c == ']' || c == '}') depth++;
    else if (c == '(' || c == '[' || c == '{') {
      if (--depth == 0) break;
    }
  }
  if (depth != 0) return false;
  return j == 0 || primary(s, j);
}

static const char *paren(Rd *r, const char *s) { return primary(s, strlen(s)) ? s : arena_printf(r->cp->ar, "(%s)", s); }

/* True when a load's subscripts are the kernel's row axes, in order. */
static bool row_subscripts(const CK *ck, const KExpr *e) {
  if (e->n != ck->nouter) return false;
  for (int i = 0; i < e->n; i++)
    if (e->a[i]->kind != KX_AXIS || e->a[i]->axis != ck->outer[i]) return false;
  return true;
}

static void ex_load(Rd *r, const KExpr *e, Buf *o) {
  CudaProgram *cp = r->cp;
  int s = e->slot;
  const Slot *sl = &r->p->slots[s];
  if (cp->inl[s]) {
    /* a per-row array recomputed here: its axes take this load's subscripts */
    const Stage *st = cp->def[s];
    const char *saved[2 * DYN_MAX_RANK];
    int first = e->n - st->naxes;
    const char *subs[2 * DYN_MAX_RANK];
    for (int k = 0; k < st->naxes; k++) subs[k] = paren(r, ex_str(r, e->a[first + k]));
    for (int k = 0; k < st->naxes; k++) {
      saved[k] = r->ax[st->axes[k]];
      r->ax[st->axes[k]] = subs[k];
    }
    ex_as(r, st->expr, e->ty, o);
    for (int k = 0; k < st->naxes; k++) r->ax[st->axes[k]] = saved[k];
    return;
  }
  if (r->reg[s] && (!cp->buf[s] || row_subscripts(r->ck, e))) {
    cast_text(o, sl->type.elem, e->ty, r->reg[s]);
    return;
  }
  if (!cp->buf[s]) {
    buf_puts(o, "missing_register_");
    return;
  }
  const char *subs[2 * DYN_MAX_RANK];
  for (int k = 0; k < e->n && k < 2 * DYN_MAX_RANK; k++) subs[k] = ex_as_str(r, e->a[k], DYN_I64);
  DynElem t = sl->type.elem;
  const char *ptr = field_name(r->ck, F_PTR, s, 0, NULL);
  Buf val = {0};
  if (e->checked) {
    /* bounds checked: out of range sets the error flag and reads nothing */
    const char *names[2 * DYN_MAX_RANK];
    buf_printf(&val, "[&]() -> %s { const i64 ", mty(t));
    for (int k = 0; k < e->n; k++) {
      names[k] = arena_printf(cp->ar, "s%d_", k);
      buf_printf(&val, "%s%s = %s", k ? ", " : "", names[k], subs[k]);
    }
    buf_puts(&val, "; if (");
    for (int k = 0; k < e->n; k++)
      buf_printf(&val, "%s%s < 0 || %s >= a.%s", k ? " || " : "", names[k], names[k], field_name(r->ck, F_DIM, s, k, NULL));
    buf_printf(&val, ") { bad_ = 1; return 0; } return %sa.%s[", r->wr[s] ? "" : "__ldg(&", ptr);
    offset_text(r, s, names, e->n, &val);
    buf_printf(&val, "]%s; }()", r->wr[s] ? "" : ")");
  } else {
    buf_printf(&val, "%sa.%s[", r->wr[s] ? "" : "__ldg(&", ptr);
    offset_text(r, s, subs, e->n, &val);
    buf_printf(&val, "]%s", r->wr[s] ? "" : ")");
  }
  if (t == DYN_BOOL) {
    char *v = arena_printf(cp->ar, "(%s != 0)", val.s);
    cast_text(o, DYN_BOOL, e->ty, v);
  } else if (elem_is_half(t)) {
    char *v = arena_printf(cp->ar, "dyn_%s_f32(%s)", t == DYN_F16 ? "f16" : "bf16", val.s);
    cast_text(o, t, e->ty, v);
  } else {
    cast_text(o, t, e->ty, val.s);
  }
  buf_free(&val);
}

/* A reduction evaluated by one thread: a lambda, so that it runs only where evaluated (in the
 * chosen branch of a where). */
static void ex_reduce(Rd *r, const KExpr *e, Buf *o) {
  DynElem at = acc_ty(e->ty);
  const char *acc = arena_printf(r->cp->ar, "acc%d_", e->id);
  buf_printf(o, "[&]() -> %s { %s %s = ", cty(at), cty(at), acc);
  red_init_text(o, e->red, at);
  buf_puts(o, "; ");
  for (int i = 0; i < e->nraxes; i++) {
    const char *nm = r->cp->aname[e->raxes[i]];
    buf_printf(o, "for (i64 %s = 0; %s < %s; %s++) ", nm, nm, ext_of(r, e->raxes[i]), nm);
    r->ax[e->raxes[i]] = nm;
  }
  buf_printf(o, "%s = %s::op(%s, ", acc, red_op(e->red), acc);
  ex_as(r, e->a[0], at, o);
  buf_printf(o, "); return %s; }()", acc);
  for (int i = 0; i < e->nraxes; i++) r->ax[e->raxes[i]] = NULL;
}

static const char *fn1(OpKind op, bool f32) {
  switch (op) {
  case OP_EXP: return f32 ? "expf" : "exp";
  case OP_LOG: return f32 ? "logf" : "log";
  case OP_SQRT: return f32 ? "sqrtf" : "sqrt";
  case OP_SIN: return f32 ? "sinf" : "sin";
  case OP_COS: return f32 ? "cosf" : "cos";
  case OP_TANH: return f32 ? "tanhf" : "tanh";
  case OP_ERF: return f32 ? "erff" : "erf";
  case OP_ABS: return f32 ? "fabsf" : "fabs";
  case OP_FLOOR: return f32 ? "floorf" : "floor";
  case OP_CEIL: return f32 ? "ceilf" : "ceil";
  case OP_ROUND: return f32 ? "rintf" : "rint";      /* half to even, as NumPy */
  default: return NULL;
  }
}

static void ex(Rd *r, const KExpr *e, Buf *o) {
  if (r->sub && r->sub[e->id]) {
    buf_puts(o, r->sub[e->id]);
    return;
  }
  switch (e->kind) {
  case KX_CONST:
    const_text(o, e->ty, e->f, e->i);
    return;
  case KX_AXIS:
    buf_puts(o, r->ax[e->axis] ? r->ax[e->axis] : "missing_axis_");
    return;
  case KX_SIZE:
    cast_text(o, DYN_I64, e->ty, arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_SIZE, 0, 0, e->size)));
    return;
  case KX_LOAD:
    ex_load(r, e, o);
    return;
  case KX_CAST:
    cast_text(o, e->a[0]->ty, e->ty, ex_str(r, e->a[0]));
    return;
  case KX_SELECT: {
    const char *c = ex_as_str(r, e->a[0], DYN_BOOL);
    const char *x = ex_as_str(r, e->a[1], e->ty), *y = ex_as_str(r, e->a[2], e->ty);
    buf_printf(o, "(%s ? %s : %s)", c, x, y);
    return;
  }
  case KX_SCAN:                 /* a stage's value: render_scan writes its steps, this the body */
    ex(r, e->a[0], o);
    return;
  case KX_REDUCE:
    if (acc_ty(e->ty) != e->ty) {
      Buf b = {0};
      ex_reduce(r, e, &b);
      cast_text(o, acc_ty(e->ty), e->ty, b.s);
      buf_free(&b);
    } else {
      ex_reduce(r, e, o);
    }
    return;
  case KX_UN: {
    bool fl = elem_is_float(e->ty), f32 = e->ty == DYN_F32;
    const char *x = ex_as_str(r, e->a[0], e->op == OP_NOT ? DYN_BOOL : e->ty);
    switch (e->op) {
    case OP_NOT: buf_printf(o, "(!%s)", paren(r, x)); return;
    case OP_NEG:
      if (fl) buf_printf(o, "(-%s)", paren(r, x));
      else buf_printf(o, "dyn_neg(%s)", x);
      return;
    case OP_RSQRT:
      buf_printf(o, "(%s / %s(%s))", f32 ? "1.0f" : "1.0", f32 ? "sqrtf" : "sqrt", x);
      return;
    case OP_SIGMOID:
      buf_printf(o, "(%s / (%s + %s(-%s)))", f32 ? "1.0f" : "1.0", f32 ? "1.0f" : "1.0", f32 ? "expf" : "exp", paren(r, x));
      return;
    case OP_ABS:
      if (!fl) {
        buf_printf(o, "dyn_abs(%s)", x);
        return;
      }
      break;
    case OP_FLOOR: case OP_CEIL: case OP_ROUND:
      if (!fl) {
        buf_puts(o, x);
        return;
      }
      break;
    default:
      break;
    }
    const char *f = fn1(e->op, f32);
    buf_printf(o, "%s(%s)", f ? f : "missing_function_", x);
    return;
  }
  case KX_BIN: {
    OpClass c = op_class(e->op);
    if (c == OPK_CMP) {
      const char *x = ex_as_str(r, e->a[0], e->opty), *y = ex_as_str(r, e->a[1], e->opty);
      buf_printf(o, "(%s %s %s)", paren(r, x), op_name(e->op), paren(r, y));
      return;
    }
    if (e->op == OP_AND || e->op == OP_OR) {
      /* both sides are evaluated, as in the reference (an error on either side counts) */
      const char *x = ex_as_str(r, e->a[0], DYN_BOOL), *y = ex_as_str(r, e->a[1], DYN_BOOL);
      buf_printf(o, "(bool)(%s %s %s)", paren(r, x), e->op == OP_AND ? "&" : "|", paren(r, y));
      return;
    }
    const char *x = ex_as_str(r, e->a[0], e->ty), *y = ex_as_str(r, e->a[1], e->ty);
    bool f32 = e->ty == DYN_F32;
    if (elem_is_float(e->ty)) {
      switch (e->op) {
      case OP_ADD: buf_printf(o, "%s + %s", paren(r, x), paren(r, y)); break;
      case OP_SUB: buf_printf(o, "%s - %s", paren(r, x), paren(r, y)); break;
      case OP_MUL: buf_printf(o, "%s * %s", paren(r, x), paren(r, y)); break;
      case OP_DIV: buf_printf(o, "%s / %s", paren(r, x), paren(r, y)); break;
      case OP_MOD: buf_printf(o, "dyn_fmod(%s, %s)", x, y); return;
      case OP_POW: case OP_POWF: buf_printf(o, "%s(%s, %s)", f32 ? "powf" : "pow", x, y); return;
      case OP_MAX: buf_printf(o, "dyn_max(%s, %s)", x, y); return;
      case OP_MIN: buf_printf(o, "dyn_min(%s, %s)", x, y); return;
      default: buf_puts(o, "missing_operator_"); return;
      }
      /* infix: parenthesised by the caller's paren() when it is an operand */
      return;
    }
    switch (e->op) {
    case OP_ADD: buf_printf(o, "dyn_add(%s, %s)", x, y); return;
    case OP_SUB: buf_printf(o, "dyn_sub(%s, %s)", x, y); return;
    case OP_MUL: buf_printf(o, "dyn_mul(%s, %s)", x, y); return;
    case OP_DIV: buf_printf(o, "dyn_div(%s, %s, bad_)", x, y); return;
    case OP_MOD: buf_printf(o, "dyn_mod(%s, %s, bad_)", x, y); return;
    case OP_MAX: buf_printf(o, "dyn_max(%s, %s)", x, y); return;
    case OP_MIN: buf_printf(o, "dyn_min(%s, %s)", x, y); return;
    default: buf_printf(o, "dyn_ipow(%s, %s)", x, y); return;
    }
  }
  }
}

/* slot[subs] = val (val of type vt) */
static void store_text(Rd *r, int slot, const char *const *subs, int n, const char *val, DynElem vt, Buf *o) {
  DynElem t = r->p->slots[slot].type.elem;
  buf_printf(o, "a.%s[", field_name(r->ck, F_PTR, slot, 0, NULL));
  offset_text(r, slot, subs, n, o);
  buf_puts(o, "] = ");
  if (t == DYN_BOOL) {
    Buf b = {0};
    cast_text(&b, vt, DYN_BOOL, val);
    buf_printf(o, "(unsigned char)%s;", paren(r, b.s));
    buf_free(&b);
  } else if (elem_is_half(t)) {
    Buf b = {0};
    cast_text(&b, vt, t, val);
    buf_printf(o, "dyn_f32_%s(%s);", t == DYN_F16 ? "f16" : "bf16", b.s);
    buf_free(&b);
  } else {
    cast_text(o, vt, t, val);
    buf_puts(o, ";");
  }
}

/* ---- rendering: kernels --------------------------------------------------------------------- */

static void indent(Buf *o, int n) { buf_printf(o, "%*s", n, ""); }

/* The axes as text "b, n" */
void curender_axes_list(const CudaProgram *cp, const int *ax, int n, Buf *o) {
  for (int i = 0; i < n; i++) buf_printf(o, "%s%s", i ? ", " : "", cp->p->axes[ax[i]].name);
}

/* The product of extents of axes, as a C expression ("1" for none). */
static const char *ext_product(Rd *r, const int *ax, int n) {
  if (!n) return "1";
  Buf b = {0};
  for (int i = 0; i < n; i++) buf_printf(&b, "%s%s", i ? " * " : "", ext_of(r, ax[i]));
  const char *s = arena_strndup(r->cp->ar, b.s, b.len);
  buf_free(&b);
  return s;
}

/* Bind axes[0..n) to the flat index `var`, innermost last: divisions once per row. */
static void decompose(Rd *r, const int *ax, int n, const char *var, int ind) {
  Buf *o = r->o;
  if (n == 1) {
    indent(o, ind);
    buf_printf(o, "const i64 %s = %s;\n", r->cp->aname[ax[0]], var);
  } else if (n > 1) {
    indent(o, ind);
    buf_printf(o, "i64 q_ = %s, d_;\n", var);
    for (int i = n - 1; i >= 0; i--) {
      indent(o, ind);
      if (i) {
        const char *e = ext_of(r, ax[i]);
        buf_printf(o, "d_ = dyn_udiv(q_, %s);\n", e);
        indent(o, ind);
        buf_printf(o, "const i64 %s = q_ - d_ * %s;\n", r->cp->aname[ax[i]], e);
        indent(o, ind);
        buf_puts(o, "q_ = d_;\n");
      } else {
        buf_printf(o, "const i64 %s = q_;\n", r->cp->aname[ax[i]]);
      }
    }
  }
  for (int i = 0; i < n; i++) r->ax[ax[i]] = r->cp->aname[ax[i]];
}

static void stage_comment(Rd *r, const Kernel *kn, const Stage *st, int ind, const char *note) {
  const Program *p = r->p;
  Buf b = {0};
  buf_printf(&b, "%s", p->slots[st->out].name);
  int n = kn->nouter + st->naxes;
  if (n) {
    buf_putc(&b, '[');
    curender_axes_list(r->cp, kn->outer, kn->nouter, &b);
    if (kn->nouter && st->naxes) buf_puts(&b, ", ");
    curender_axes_list(r->cp, st->axes, st->naxes, &b);
    buf_putc(&b, ']');
  }
  buf_puts(&b, " = ");
  kx_print(p, st->expr, &b);
  /* no comment terminator inside the text */
  for (char *c = b.s; (c = strstr(c, "*/")); c++) c[1] = '.';
  indent(r->o, ind);
  buf_printf(r->o, "/* %s%s%s */\n", b.s, note ? ": " : "", note ? note : "");
  buf_free(&b);
}

static void render_args(Rd *r) {
  CK *ck = r->ck;
  const Program *p = r->p;
  Buf *o = r->o;
  buf_printf(o, "/* The arguments of %s: 8-byte words in this order (the host fills them). */\nstruct %s_args {\n", ck->base, ck->base);
  for (int i = 0; i < ck->nf; i++) {
    const Field *f = &ck->f[i];
    Buf c = {0};
    const Slot *sl = f->kind <= F_DIM ? &p->slots[f->slot] : NULL;
    switch (f->kind) {
    case F_PTR: {
      static const char *kinds[] = {"input", "size", "temporary", "per-row array", "output", "inlined"};
      buf_printf(&c, "%s %s ", kinds[sl->kind], sl->name);
      type_str(&sl->type, &c);
      buf_printf(o, "  %s%s *%s;", r->wr[f->slot] ? "" : "const ", mty(sl->type.elem), f->name);
      break;
    }
    case F_STRIDE:
      buf_printf(&c, "stride of %s along dimension %d, in elements (the last is 1)", sl->name, f->dim);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_DIM:
      buf_printf(&c, "dimension %d of %s, for the checked accesses", f->dim, sl->name);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_EXT:
      buf_printf(&c, "extent of %s: ", p->axes[f->axis].name);
      poly_str(p->axes[f->axis].extent, &c);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_SIZE:
      buf_puts(&c, "the size ");
      poly_str(f->size, &c);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_ERR:
      buf_puts(&c, "set to 1 on a run-time error (the reference evaluator then explains it)");
      buf_printf(o, "  int *%s;", f->name);
      break;
    case F_WS:
      buf_puts(&c, ck->kind == CK_GEMM ? "workspace: the partial tiles of a split K" : "workspace: a ticket, then the blocks' partial results");
      buf_printf(o, "  void *%s;", f->name);
      break;
    case F_SPLITS:
      buf_puts(&c, "how many parts K is split into (1: none)");
      buf_printf(o, "  i64 %s;", f->name);
      break;
    default:
      buf_printf(&c, "nonzero: %s may be copied 16 bytes at a time", f->kind == F_AVEC ? "A" : "B");
      buf_printf(o, "  i64 %s;", f->name);
      break;
    }
    size_t col = o->len - (size_t)(strrchr(o->s, '\n') - o->s) - 1;
    buf_printf(o, "%*s/* %s */\n", col < 36 ? (int)(36 - col) : 1, "", c.s);
    buf_free(&c);
  }
  buf_puts(o, "};\n\n");
}

/* __launch_bounds__ always names the blocks per SM: with the threads alone, ptxas aims at a
 * register count of its own and spills below it. */
static void kernel_open(Rd *r, const Var *v, int min_blocks) {
  buf_printf(r->o, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(const %s_args a) {\n", v->threads,
             min_blocks > 1 ? min_blocks : 1, v->name, r->ck->base);
  if (r->ck->err) buf_puts(r->o, "  int bad_ = 0;\n");
}

static void kernel_close(Rd *r) {
  if (r->ck->err) buf_puts(r->o, "  if (bad_) *a.err = 1;\n");
  buf_puts(r->o, "}\n\n");
}

static void reset_axes(Rd *r) {
  for (int a = 0; a < r->p->naxes; a++) r->ax[a] = NULL;
}

/* A scan, Y[..., j, ...] = scan[j] op(body): a thread per line of the other axes, walking j
 * in order with the running value in a register, combined by the prelude's operators as
 * reductions are.  It takes the launch of a loop kernel (any grid), numbering its threads
 * flat, so the host's launch code needs nothing of its own. */
static void render_scan(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Stage *st = &ck->kn->stages[0];
  const KExpr *e = st->expr;
  Buf *o = r->o;
  int na = st->naxes, other[DYN_MAX_RANK], no = 0, s = e->raxes[0];
  for (int a = 0; a < na; a++)
    if (st->axes[a] != s) other[no++] = st->axes[a];
  DynElem t = acc_ty(e->ty);
  buf_printf(o, "/* %s, variant loop: a scan along %s, in order\n", ck->base, r->p->axes[s].name);
  buf_puts(o, " *   grid:   the loop kernels' launch, its threads numbered flat, grid-stride over the lines\n");
  buf_printf(o, " *   thread: one line of (");
  curender_axes_list(cp, other, no, o);
  buf_printf(o, "), all of %s in order, the running value in a register */\n", r->p->axes[s].name);
  kernel_open(r, v, 1);
  reset_axes(r);
  buf_printf(o, "  const i64 nlines_ = %s;\n", ext_product(r, other, no));
  buf_puts(o, "  const i64 nthreads_ = (i64)gridDim.x * blockDim.x * gridDim.y * blockDim.y;\n");
  buf_puts(o, "  for (i64 line_ = ((i64)blockIdx.y * blockDim.y + threadIdx.y) * ((i64)gridDim.x * blockDim.x) +\n"
              "                   (i64)blockIdx.x * blockDim.x + threadIdx.x; line_ < nlines_; line_ += nthreads_) {\n");
  decompose(r, other, no, "line_", 4);
  const char *in = cp->aname[s];
  buf_printf(o, "    %s run_ = %s(0);\n", cty(t), cty(t));
  buf_printf(o, "    for (i64 %s = 0; %s < %s; %s++) {\n", in, in, ext_of(r, s), in);
  r->ax[s] = in;
  stage_comment(r, ck->kn, st, 6, NULL);
  buf_printf(o, "      const %s x_ = %s;\n", cty(t), ex_as_str(r, e->a[0], t));
  buf_printf(o, "      run_ = %s == 0 ? x_ : %s::op(run_, x_);\n", in, red_op(e->red));
  const char *subs[DYN_MAX_RANK];
  for (int k = 0; k < na; k++) subs[k] = cp->aname[st->axes[k]];
  indent(o, 6);
  store_text(r, st->out, subs, na, "run_", t, o);
  buf_puts(o, "\n    }\n  }\n");
  kernel_close(r);
}


/* Elementwise and general loop nests: a thread per element of the innermost axis. */
static void render_loop(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Stage *st = &ck->kn->stages[0];
  Buf *o = r->o;
  if (st->expr->kind == KX_SCAN) {
    render_scan(r, v);
    return;
  }
  int na = st->naxes, inner = st->axes[na - 1];
  bool v4 = v->kind == V_LOOP4;
  const char *in = cp->aname[inner];
  DynElem ot = r->p->slots[st->out].type.elem;
  buf_printf(o, "/* %s, variant %s:\n", ck->base, v4 ? "loop4" : "loop");
  if (na > 1) {
    buf_printf(o, " *   grid:   blocks over (rows of ");
    curender_axes_list(cp, st->axes, na - 1, o);
    buf_printf(o, ") x (%s), grid-stride in both\n", r->p->axes[inner].name);
  } else {
    buf_printf(o, " *   grid:   blocks over %s, grid-stride\n", r->p->axes[inner].name);
  }
  buf_printf(o, " *   block:  256 threads, blockDim.x along %s, blockDim.y along the rows (the host fits them to the shape)\n",
             r->p->axes[inner].name);
  if (v4)
    buf_printf(o, " *   thread: four consecutive elements of %s, 16-byte loads and stores where the last axis is\n"
                  " *           contiguous (the host checks the alignment) */\n", r->p->axes[inner].name);
  else
    buf_printf(o, " *   thread: one element of %s; reductions run in the thread */\n", r->p->axes[inner].name);
  kernel_open(r, v, 1);
  reset_axes(r);
  buf_printf(o, "  const i64 nrows_ = %s;\n", ext_product(r, st->axes, na - 1));
  buf_puts(o, "  for (i64 row_ = (i64)blockIdx.y * blockDim.y + threadIdx.y; row_ < nrows_; row_ += (i64)gridDim.y * blockDim.y) {\n");
  decompose(r, st->axes, na - 1, "row_", 4);
  const char *subs[2 * DYN_MAX_RANK];
  for (int k = 0; k < na; k++) subs[k] = cp->aname[st->axes[k]];
  if (!v4) {
    buf_printf(o, "    for (i64 %s = (i64)blockIdx.x * blockDim.x + threadIdx.x; %s < %s; %s += (i64)gridDim.x * blockDim.x) {\n",
               in, in, ext_of(r, inner), in);
    r->ax[inner] = in;
    stage_comment(r, ck->kn, st, 6, NULL);
    const char *val = ex_str(r, st->expr);
    indent(o, 6);
    store_text(r, st->out, subs, na, val, st->expr->ty, o);
    buf_puts(o, "\n    }\n  }\n");
  } else {
    buf_printf(o, "    for (i64 %s4_ = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 4; %s4_ < %s; %s4_ += (i64)gridDim.x * blockDim.x * 4) {\n",
               in, in, ext_of(r, inner), in);
    const char *base = arena_printf(cp->ar, "%s4_", in);
    /* the 16-byte loads, hoisted out of the four lanes */
    r->ax[inner] = base;
    const KExpr *stack[1024];
    int sp = 0, nv = 0;
    const char *keys[64], *names[64];
    stack[sp++] = st->expr;
    while (sp) {
      const KExpr *e = stack[--sp];
      if (cuana_vec_load(cp, e, inner)) {
        const char *ss[2 * DYN_MAX_RANK];
        for (int k = 0; k < e->n; k++) ss[k] = ex_as_str(r, e->a[k], DYN_I64);
        Buf off = {0};
        offset_text(r, e->slot, ss, e->n, &off);
        const char *key = arena_printf(cp->ar, "%d:%s", e->slot, off.s);
        int found = -1;
        for (int i = 0; i < nv; i++)
          if (!strcmp(keys[i], key)) found = i;
        if (found < 0 && nv < 64) {
          DynElem t = r->p->slots[e->slot].type.elem;
          const char *vt = t == DYN_F32 ? "float4" : "int4";
          keys[nv] = key;
          names[nv] = arena_printf(cp->ar, "v%d_", nv);
          indent(o, 6);
          buf_printf(o, "const %s %s = __ldg((const %s *)&a.%s[%s]);\n", vt, names[nv], vt, field_name(ck, F_PTR, e->slot, 0, NULL), off.s);
          found = nv++;
        }
        buf_free(&off);
        if (found >= 0) r->sub[e->id] = arena_printf(cp->ar, "dyn_lane(%s, l_)", names[found]);
        continue;
      }
      if (e->kind == KX_REDUCE) continue;
      int n = e->kind == KX_SELECT ? 1 : e->n;
      for (int i = n - 1; i >= 0 && sp < 1024; i--) stack[sp++] = e->a[i];
    }
    indent(o, 6);
    buf_printf(o, "%s y_[4];\n", cty(ot));
    buf_puts(o, "#pragma unroll\n      for (int l_ = 0; l_ < 4; l_++) {\n");
    buf_printf(o, "        const i64 %s = %s + l_;\n", in, base);
    r->ax[inner] = in;
    stage_comment(r, ck->kn, st, 8, NULL);
    indent(o, 8);
    buf_puts(o, "y_[l_] = ");
    cast_text(o, st->expr->ty, ot, ex_str(r, st->expr));
    buf_puts(o, ";\n      }\n");
    subs[na - 1] = base;
    Buf off = {0};
    offset_text(r, st->out, subs, na, &off);
    indent(o, 6);
    buf_printf(o, "*(%s *)&a.%s[%s] = make_%s(y_[0], y_[1], y_[2], y_[3]);\n", ot == DYN_F32 ? "float4" : "int4",
               field_name(ck, F_PTR, st->out, 0, NULL), off.s, ot == DYN_F32 ? "float4" : "int4");
    buf_free(&off);
    buf_puts(o, "    }\n  }\n");
    for (int i = 0; i < cp->p->nkx; i++) r->sub[i] = NULL;
  }
  kernel_close(r);
}

/* A reduction shared by the `lanes` threads of a row: a strided loop per thread, then
 * dyn_row_reduce.  The result is in the register r<id>_. */
static void render_coop(Rd *r, const KExpr *e, int lanes, int rows, const char *lane, const char *stride, int ind) {
  CudaProgram *cp = r->cp;
  Buf *o = r->o;
  DynElem at = acc_ty(e->ty);
  const char *res = arena_printf(cp->ar, "r%d_", e->id), *acc = arena_printf(cp->ar, "acc%d_", e->id);
  indent(o, ind);
  buf_printf(o, "%s %s;\n", cty(at), res);
  indent(o, ind);
  buf_puts(o, "{\n");
  indent(o, ind + 2);
  buf_printf(o, "%s %s = ", cty(at), acc);
  red_init_text(o, e->red, at);
  buf_puts(o, ";\n");
  if (e->nraxes == 1) {
    const char *nm = cp->aname[e->raxes[0]];
    indent(o, ind + 2);
    buf_printf(o, "for (i64 %s = %s; %s < %s; %s += %s)\n", nm, lane, nm, ext_of(r, e->raxes[0]), nm, stride);
    r->ax[e->raxes[0]] = nm;
    indent(o, ind + 4);
    buf_printf(o, "%s = %s::op(%s, %s);\n", acc, red_op(e->red), acc, ex_as_str(r, e->a[0], at));
  } else {
    indent(o, ind + 2);
    buf_printf(o, "for (i64 t_ = %s; t_ < %s; t_ += %s) {\n", lane, ext_product(r, e->raxes, e->nraxes), stride);
    decompose(r, e->raxes, e->nraxes, "t_", ind + 4);
    indent(o, ind + 4);
    buf_printf(o, "%s = %s::op(%s, %s);\n", acc, red_op(e->red), acc, ex_as_str(r, e->a[0], at));
    indent(o, ind + 2);
    buf_puts(o, "}\n");
  }
  for (int i = 0; i < e->nraxes; i++) r->ax[e->raxes[i]] = NULL;
  indent(o, ind + 2);
  if (lanes > 32) buf_printf(o, "%s = dyn_row_reduce<%s, %d, %d>(%s, red_%s_);\n", res, red_op(e->red), lanes, rows, acc, cty(at));
  else buf_printf(o, "%s = dyn_row_reduce<%s, %d, %d>(%s, (%s *)0);\n", res, red_op(e->red), lanes, rows, acc, cty(at));
  indent(o, ind);
  buf_puts(o, "}\n");
  r->sub[e->id] = acc_ty(e->ty) == e->ty ? res : arena_printf(cp->ar, "(%s)%s", cty(e->ty), res);
}

/* Does a stage after `s` read slot `slot` from memory (not from a register)? */
static bool read_later(Rd *r, const Kernel *kn, int s, int slot) {
  for (int t = s + 1; t < kn->nstages; t++) {
    const KExpr *stack[1024];
    int sp = 0;
    stack[sp++] = kn->stages[t].expr;
    while (sp) {
      const KExpr *e = stack[--sp];
      if (e->kind == KX_LOAD && e->slot == slot && !(r->reg[slot] && row_subscripts(r->ck, e))) return true;
      if (e->kind == KX_LOAD && r->cp->inl[e->slot] && sp < 1024) stack[sp++] = r->cp->def[e->slot]->expr;
      for (int i = 0; i < e->n && sp < 1024; i++) stack[sp++] = e->a[i];
    }
  }
  return false;
}

static void collect_coop_types(const KExpr *e, bool *types) {
  const KExpr *co[64];
  int n = 0;
  cuana_find_coop(e, co, &n, 64);
  for (int i = 0; i < n && i < 64; i++) types[acc_ty(co[i]->ty)] = true;
}

/* Row-wise kernels and reductions along an axis: LANES threads per row, ROWS rows per block. */
static void render_row(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Kernel *kn = ck->kn;
  Buf *o = r->o;
  int L = v->lanes, RW = v->rows;
  const char *bar = L <= 32 ? "__syncwarp();" : "__syncthreads();";
  buf_printf(o, "/* %s, variant %s:\n *   grid:   blocks over the rows (", ck->base, v->kind == V_WARP ? "warp" : v->kind == V_BLOCK256 ? "block256" : "block1024");
  if (ck->nouter) curender_axes_list(cp, ck->outer, ck->nouter, o);
  else buf_puts(o, "one row");
  buf_puts(o, "), grid-stride\n");
  if (RW > 1) buf_printf(o, " *   block:  %d rows of %d threads (threadIdx.y: the row, threadIdx.x: the lane)\n", RW, L);
  else buf_printf(o, " *   block:  one row of %d threads\n", L);
  buf_printf(o, " *   warp:   reductions by butterfly shuffles%s\n", L > 32 ? ", then one slot per warp in shared memory" : "");
  buf_puts(o, " *   thread: per-row scalars in registers; elements strided by the row's threads */\n");
  kernel_open(r, v, 1);
  reset_axes(r);
  for (int i = 0; i < r->p->nslots; i++) r->reg[i] = NULL;
  bool types[DYN_NELEM] = {0};
  for (int s = 0; s < kn->nstages; s++)
    if (ck->virt || kn->stages[s].naxes == 0) collect_coop_types(kn->stages[s].expr, types);
  if (L > 32)
    for (int t = 0; t < DYN_NELEM; t++)
      if (types[t]) buf_printf(o, "  __shared__ %s red_%s_[%d];\n", cty((DynElem)t), cty((DynElem)t), RW * (L / 32));
  buf_printf(o, "  const i64 nrows_ = %s;\n", ext_product(r, ck->outer, ck->nouter));
  buf_puts(o, "  const int lane_ = threadIdx.x;\n");
  if (RW > 1) {
    buf_printf(o, "  for (i64 g_ = blockIdx.x; g_ * %d < nrows_; g_ += gridDim.x) {\n", RW);
    buf_printf(o, "    const i64 row_ = g_ * %d + threadIdx.y;\n", RW);
    buf_puts(o, "    const bool live_ = row_ < nrows_;   /* the last group's spare rows redo the last row, store nothing */\n");
    if (ck->err) buf_puts(o, "    const int bad0_ = bad_;            /* and report no error */\n");
    if (ck->nouter) decompose(r, ck->outer, ck->nouter, "(live_ ? row_ : nrows_ - 1)", 4);
  } else {
    buf_puts(o, "  for (i64 g_ = blockIdx.x; g_ < nrows_; g_ += gridDim.x) {\n");
    if (ck->nouter) decompose(r, ck->outer, ck->nouter, "g_", 4);
  }
  const char *stride = arena_printf(cp->ar, "%d", L);
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    int naxes = ck->virt ? 0 : st->naxes;
    const char *subs[2 * DYN_MAX_RANK];
    int ns = 0;
    for (int i = 0; i < ck->nouter; i++) subs[ns++] = cp->aname[ck->outer[i]];
    if (!ck->virt)
      for (int i = 0; i < st->naxes; i++) subs[ns++] = cp->aname[st->axes[i]];
    if (cp->inl[st->out]) {
      stage_comment(r, kn, st, 4, "recomputed where it is read");
      continue;
    }
    if (naxes == 0) {
      bool is_reg = !cp->buf[st->out];
      stage_comment(r, kn, st, 4, is_reg ? "a register per row" : "one value per row");
      const KExpr *co[64];
      int nco = 0;
      cuana_find_coop(st->expr, co, &nco, 64);
      for (int i = 0; i < nco && i < 64; i++) render_coop(r, co[i], L, RW, "lane_", stride, 4);
      const char *val = ex_str(r, st->expr);
      const char *name = arena_printf(cp->ar, "%s_", cp->sname[st->out]);
      DynElem t = r->p->slots[st->out].type.elem;
      indent(o, 4);
      buf_printf(o, "const %s %s = ", cty(t), name);
      cast_text(o, st->expr->ty, t, val);
      buf_puts(o, ";\n");
      r->reg[st->out] = name;
      if (!is_reg) {
        indent(o, 4);
        buf_printf(o, "if (%slane_ == 0) ", RW > 1 ? "live_ && " : "");
        store_text(r, st->out, subs, ns, name, t, o);
        buf_putc(o, '\n');
        if (read_later(r, kn, s, st->out)) {
          indent(o, 4);
          buf_printf(o, "%s\n", bar);
        }
      }
      for (int i = 0; i < nco && i < 64; i++) r->sub[co[i]->id] = NULL;
    } else {
      stage_comment(r, kn, st, 4, NULL);
      int ind = 4;
      for (int i = 0; i < naxes; i++) {
        const char *nm = cp->aname[st->axes[i]];
        indent(o, ind);
        if (i < naxes - 1) buf_printf(o, "for (i64 %s = 0; %s < %s; %s++)\n", nm, nm, ext_of(r, st->axes[i]), nm);
        else buf_printf(o, "for (i64 %s = lane_; %s < %s; %s += %d) {\n", nm, nm, ext_of(r, st->axes[i]), nm, L);
        r->ax[st->axes[i]] = nm;
        ind += 2;
      }
      const char *val = ex_str(r, st->expr);
      indent(o, ind);
      if (RW > 1) buf_puts(o, "if (live_) ");
      store_text(r, st->out, subs, ns, val, st->expr->ty, o);
      buf_putc(o, '\n');
      indent(o, 4 + 2 * (naxes - 1));
      buf_puts(o, "}\n");
      for (int i = 0; i < naxes; i++) r->ax[st->axes[i]] = NULL;
      if (read_later(r, kn, s, st->out)) {
        indent(o, 4);
        buf_printf(o, "%s\n", bar);
      }
    }
  }
  if (RW > 1 && ck->err) buf_puts(o, "    if (!live_) bad_ = bad0_;\n");
  buf_puts(o, "  }\n");
  kernel_close(r);
}

/* A reduction to one value over the whole grid: partial results per block, the last block
 * (an atomic ticket) combines them in block order and finishes the expression. */
static void render_grid(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Stage *st = &ck->kn->stages[0];
  const KExpr *R = ck->coop;
  Buf *o = r->o;
  DynElem at = acc_ty(R->ty);
  const char *T = cty(at);
  buf_printf(o, "/* %s, variant grid:\n", ck->base);
  buf_puts(o, " *   grid:   every block strides over the whole reduction, writes one partial result; the last block\n"
              " *           to finish (an atomic ticket) combines them in block order: deterministic, one launch\n"
              " *   block:  256 threads, combined by butterfly shuffles, then shared memory */\n");
  kernel_open(r, v, 1);
  reset_axes(r);
  buf_printf(o, "  __shared__ %s red_%s_[8];\n  __shared__ bool last_;\n", T, T);
  buf_printf(o, "  %s acc_ = ", T);
  red_init_text(o, R->red, at);
  buf_puts(o, ";\n");
  stage_comment(r, ck->kn, st, 2, NULL);
  if (R->nraxes == 1) {
    const char *nm = cp->aname[R->raxes[0]];
    buf_printf(o, "  for (i64 %s = (i64)blockIdx.x * 256 + threadIdx.x; %s < %s; %s += (i64)gridDim.x * 256)\n", nm, nm,
               ext_of(r, R->raxes[0]), nm);
    r->ax[R->raxes[0]] = nm;
    buf_printf(o, "    acc_ = %s::op(acc_, %s);\n", red_op(R->red), ex_as_str(r, R->a[0], at));
  } else {
    buf_printf(o, "  for (i64 t_ = (i64)blockIdx.x * 256 + threadIdx.x; t_ < %s; t_ += (i64)gridDim.x * 256) {\n",
               ext_product(r, R->raxes, R->nraxes));
    decompose(r, R->raxes, R->nraxes, "t_", 4);
    buf_printf(o, "    acc_ = %s::op(acc_, %s);\n  }\n", red_op(R->red), ex_as_str(r, R->a[0], at));
  }
  for (int i = 0; i < R->nraxes; i++) r->ax[R->raxes[i]] = NULL;
  buf_printf(o, "  acc_ = dyn_row_reduce<%s, 256, 1>(acc_, red_%s_);\n", red_op(R->red), T);
  buf_printf(o, "  unsigned *ticket_ = (unsigned *)a.ws;\n  %s *part_ = (%s *)((char *)a.ws + 16);\n", T, T);
  buf_puts(o, "  if (threadIdx.x == 0) {\n    part_[blockIdx.x] = acc_;\n    __threadfence();\n"
              "    last_ = atomicAdd(ticket_, 1u) == gridDim.x - 1;\n  }\n  __syncthreads();\n  if (last_) {\n    __threadfence();\n");
  buf_printf(o, "    %s v_ = ", T);
  red_init_text(o, R->red, at);
  buf_puts(o, ";\n");
  buf_printf(o, "    for (unsigned i_ = threadIdx.x; i_ < gridDim.x; i_ += 256) v_ = %s::op(v_, ((volatile %s *)part_)[i_]);\n",
             red_op(R->red), T);
  buf_printf(o, "    v_ = dyn_row_reduce<%s, 256, 1>(v_, red_%s_);\n", red_op(R->red), T);
  buf_puts(o, "    if (threadIdx.x == 0) {\n");
  r->sub[R->id] = at == R->ty ? "v_" : arena_printf(cp->ar, "(%s)v_", cty(R->ty));
  DynElem t = r->p->slots[st->out].type.elem;
  buf_printf(o, "      const %s res_ = ", cty(t));
  cast_text(o, st->expr->ty, t, ex_str(r, st->expr));
  buf_puts(o, ";\n      ");
  store_text(r, st->out, NULL, 0, "res_", t, o);
  buf_puts(o, "\n      *ticket_ = 0;               /* ready for the next launch */\n    }\n  }\n");
  r->sub[R->id] = NULL;
  kernel_close(r);
}

static const char *stride_text(Rd *r, int slot, int pos) {
  if (pos < 0) return "0";
  if (pos == r->p->slots[slot].type.rank - 1) return "1";
  return arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_STRIDE, slot, pos, NULL));
}

/* The epilogue of a contraction at (b, i, j) with the sum in `acc`: the rest of the stage. */
static void gemm_epilogue(Rd *r, const char *acc, int ind) {
  CK *ck = r->ck;
  const Stage *st = &ck->kn->stages[0];
  const char *subs[3];
  int ns = 0;
  for (int k = 0; k < st->naxes; k++) subs[ns++] = r->cp->aname[st->axes[k]];
  r->sub[ck->red->id] = acc;
  const char *val = ex_str(r, st->expr);
  r->sub[ck->red->id] = NULL;
  indent(r->o, ind);
  store_text(r, st->out, subs, ns, val, st->expr->ty, r->o);
  buf_putc(r->o, '\n');
}

static void render_gemm(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Program *p = r->p;
  int ns;
  const GemmShape *g = &cuana_gemm_shapes(ck->math, ck->et, &ns)[v->gemm];
  Buf *o = r->o;
  int th = v->threads;
  bool tc = cuana_tc(ck), h16 = elem_is_half(ck->et), bf = ck->math == CUDA_BF16, f64 = ck->et == DYN_F64;
  const char *T = cty(ck->et);
  bool sb_kc = tc ? ck->b_kc : ck->b_kc && !ck->a_kc;
  buf_printf(o, "/* %s, variant %s%dx%d: the contraction over %s of %s (%s) and %s (%s)\n", ck->base,
             h16 ? "mma16_" : tc ? (bf ? "bf16_" : "tf32_") : "", g->bm, g->bn, p->axes[ck->kax].name, p->slots[ck->ga].name, ck->a_kc ? "k contiguous" : "m contiguous",
             p->slots[ck->gb].name, ck->b_kc ? "k contiguous" : "n contiguous");
  buf_printf(o, " *   grid:   a block per %dx%d tile of %s and batch (x), numbered in groups of 8 tile-rows (they\n"
                " *           share B in L2); parts of a split K along z\n", g->bm, g->bn, p->slots[ck->gc].name);
  if (h16) {
    const char *h = ck->et == DYN_F16 ? "f16" : "bf16";
    int wtm = g->bm / g->wm, wtn = g->bn / g->wn;
    buf_printf(o, " *   block:  %d threads, %dx%d warps; %s tiles of A (%s) and B (%s) of depth %d in shared memory, as\n"
                  " *           stored, two buffers\n", th, g->wm, g->wn, h, ck->a_kc ? "m x k" : "k x m", sb_kc ? "n x k" : "k x n", g->bk);
    buf_printf(o, " *   warp:   a %dx%d tile of %s: %dx%d mma.sync.m16n8k16 tiles on the %s operands as they are, exact\n"
                  " *           products summed in f32; the result rounded to %s once, where it is stored\n", wtm, wtn,
               p->slots[ck->gc].name, wtm / 16, wtn / 8, h, elem_name(p->slots[ck->gc].type.elem));
    buf_printf(o, " *   thread: %dx%d outputs in registers, rows g and g + 8, columns 2t and 2t + 1 of each mma tile\n"
                  " *           (g = lane / 4, t = lane %% 4); edges bounds-checked */\n", g->tm, g->tn);
  } else if (tc) {
    int wtm = g->bm / g->wm, wtn = g->bn / g->wn;
    buf_printf(o, " *   block:  %d threads, %dx%d warps; f32 tiles of A (%s) and B (%s) of depth %d in shared memory,\n"
                  " *           two buffers\n", th, g->wm, g->wn, ck->a_kc ? "m x k" : "k x m", sb_kc ? "n x k" : "k x n", g->bk);
    buf_printf(o, " *   warp:   a %dx%d tile of %s: %dx%d mma.sync.m16n8k%d tiles, operands rounded from f32 to %s\n"
                  " *           (%s) as they are read, f32 accumulators\n", wtm, wtn, p->slots[ck->gc].name, wtm / 16, wtn / 8,
               bf ? 16 : 8, bf ? "bf16" : "tf32", bf ? "nearest even, 7 bits of mantissa" : "nearest, 10 bits of mantissa");
    buf_printf(o, " *   thread: %dx%d outputs in registers, rows g and g + 8, columns 2t and 2t + 1 of each mma tile\n"
                  " *           (g = lane / 4, t = lane %% 4); edges bounds-checked */\n", g->tm, g->tn);
  } else {
    buf_printf(o, " *   block:  %d threads; tiles of A (%s) and B (%s) of depth %d in shared memory, two buffers\n", th,
               ck->a_kc ? "m x k" : "k x m", sb_kc ? "n x k" : "k x n", g->bk);
    buf_printf(o, " *   thread: %dx%d outputs in registers, exact %s FMA; edges bounds-checked */\n", g->tm, g->tn, f64 ? "f64" : "f32");
  }
  int minb = g->tm * g->tn >= 64 ? 65536 / (128 * th) : 1;
  kernel_open(r, v, minb);
  reset_axes(r);
  if (h16)
    buf_printf(o, "  typedef DynMma<%d, %d, %d, %d, %d, %s, %s, %s, %d> G;\n", g->bm, g->bn, g->bk, g->wm, g->wn,
               ck->a_kc ? "true" : "false", ck->b_kc ? "true" : "false", ck->et == DYN_BF16 ? "true" : "false",
               ck->et == DYN_F16 ? 1 : 2);
  else if (tc)
    buf_printf(o, "  typedef DynMma<%d, %d, %d, %d, %d, %s, %s, %s> G;\n", g->bm, g->bn, g->bk, g->wm, g->wn, ck->a_kc ? "true" : "false",
               ck->b_kc ? "true" : "false", bf ? "true" : "false");
  else
    buf_printf(o, "  typedef DynGemm<%d, %d, %d, %d, %d, %s, %s%s> G;\n", g->bm, g->bn, g->bk, g->tm, g->tn, ck->a_kc ? "true" : "false",
               ck->b_kc ? "true" : "false", f64 ? ", double" : "");
  buf_printf(o, "  __shared__ __align__(16) %s sa_[2 * G::ATILE], sb_[2 * G::BTILE];\n", mty(ck->et));
  buf_printf(o, "  const i64 M_ = %s, N_ = %s, K_ = %s, nb_ = %s;\n", ext_of(r, ck->max), ext_of(r, ck->nax), ext_of(r, ck->kax),
             ck->bax >= 0 ? ext_of(r, ck->bax) : "1");
  buf_printf(o, "  const unsigned tm_ = (unsigned)((M_ + %d) / %d), tn_ = (unsigned)((N_ + %d) / %d);\n", g->bm - 1, g->bm, g->bn - 1, g->bn);
  buf_puts(o, "  const unsigned pid_ = blockIdx.x % (tm_ * tn_), first_ = pid_ / (8 * tn_) * 8;\n"
              "  const unsigned gsz_ = tm_ - first_ < 8 ? tm_ - first_ : 8;\n");
  buf_printf(o, "  const i64 m0_ = (i64)(first_ + pid_ %% gsz_) * %d, n0_ = (i64)(pid_ %% (8 * tn_) / gsz_) * %d;\n", g->bm, g->bn);
  buf_printf(o, "  const i64 kc_ = ((K_ + a.splits - 1) / a.splits + %d) / %d * %d;\n", g->bk - 1, g->bk, g->bk);
  buf_puts(o, "  const i64 k0_ = (i64)blockIdx.z * kc_, k1_ = k0_ + kc_ < K_ ? k0_ + kc_ : K_;\n");
  buf_puts(o, "  const int tx_ = G::tx(), ty_ = G::ty();\n");
  const char *bv = ck->bax >= 0 ? cp->aname[ck->bax] : "bz_";
  if (ck->bax >= 0) r->ax[ck->bax] = bv;
  buf_printf(o, "  {\n    const i64 %s = blockIdx.x / (tm_ * tn_);     /* the batch */\n", bv);
  buf_printf(o, "    %s acc_[%d][%d];\n", T, g->tm, g->tn);
  buf_printf(o, "#pragma unroll\n    for (int ii_ = 0; ii_ < %d; ii_++)\n#pragma unroll\n      for (int jj_ = 0; jj_ < %d; jj_++) acc_[ii_][jj_] = %s;\n",
             g->tm, g->tn, f64 ? "0.0" : "0.0f");
  buf_printf(o, "    dyn_gemm_run<G>(acc_, sa_, sb_, a.%s + %s * %s, a.%s + %s * %s, m0_, n0_, k0_, k1_, M_, N_,\n",
             field_name(ck, F_PTR, ck->ga, 0, NULL), bv, stride_text(r, ck->ga, ck->apos[0]),
             field_name(ck, F_PTR, ck->gb, 0, NULL), bv, stride_text(r, ck->gb, ck->bpos[0]));
  buf_printf(o, "                    %s, %s, %s, %s, a.a_vec != 0, a.b_vec != 0);\n", stride_text(r, ck->ga, ck->apos[1]),
             stride_text(r, ck->ga, ck->apos[2]), stride_text(r, ck->gb, ck->bpos[1]), stride_text(r, ck->gb, ck->bpos[2]));
  const char *mi = cp->aname[ck->max], *nj = cp->aname[ck->nax];
  r->ax[ck->max] = mi;
  r->ax[ck->nax] = nj;
  buf_printf(o, "#pragma unroll\n    for (int ii_ = 0; ii_ < %d; ii_++) {\n", g->tm);
  buf_printf(o, "      const i64 %s = m0_ + G::row(ty_, ii_);\n      if (%s >= M_) continue;\n", mi, mi);
  buf_printf(o, "#pragma unroll\n      for (int jj_ = 0; jj_ < %d; jj_++) {\n", g->tn);
  buf_printf(o, "        const i64 %s = n0_ + G::col(tx_, jj_);\n        if (%s >= N_) continue;\n", nj, nj);
  buf_printf(o, "        if (a.splits > 1)\n          ((%s *)a.ws)[(((i64)blockIdx.z * nb_ + %s) * M_ + %s) * N_ + %s] = acc_[ii_][jj_];\n", T, bv, mi, nj);
  buf_puts(o, "        else\n");
  stage_comment(r, ck->kn, &ck->kn->stages[0], 10, NULL);
  gemm_epilogue(r, "acc_[ii_][jj_]", 10);
  buf_puts(o, "      }\n    }\n  }\n");
  kernel_close(r);
}

/* The sum of a split K's partial tiles, in order, then the epilogue. */
static void render_splitk(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  Buf *o = r->o;
  buf_printf(o, "/* %s, variant splitk: the partial tiles of a split K summed in order (deterministic), then the\n"
                " * rest of the expression; a thread per element, as the loop kernels */\n", ck->base);
  kernel_open(r, v, 1);
  reset_axes(r);
  const char *bv = ck->bax >= 0 ? cp->aname[ck->bax] : "bz_";
  const char *mi = cp->aname[ck->max], *nj = cp->aname[ck->nax];
  buf_printf(o, "  const i64 M_ = %s, N_ = %s, nb_ = %s;\n", ext_of(r, ck->max), ext_of(r, ck->nax), ck->bax >= 0 ? ext_of(r, ck->bax) : "1");
  const char *T = cty(ck->et);
  buf_printf(o, "  const %s *ws_ = (const %s *)a.ws;\n", T, T);
  buf_puts(o, "  for (i64 row_ = (i64)blockIdx.y * blockDim.y + threadIdx.y; row_ < nb_ * M_; row_ += (i64)gridDim.y * blockDim.y) {\n");
  buf_printf(o, "    const i64 %s = row_ / M_, %s = row_ %% M_;\n", bv, mi);
  buf_printf(o, "    for (i64 %s = (i64)blockIdx.x * blockDim.x + threadIdx.x; %s < N_; %s += (i64)gridDim.x * blockDim.x) {\n", nj, nj, nj);
  buf_printf(o, "      %s s_ = %s;\n", T, ck->et == DYN_F64 ? "0.0" : "0.0f");
  buf_printf(o, "      for (i64 z_ = 0; z_ < a.splits; z_++) s_ += ws_[((z_ * nb_ + %s) * M_ + %s) * N_ + %s];\n", bv, mi, nj);
  if (ck->bax >= 0) r->ax[ck->bax] = bv;
  r->ax[ck->max] = mi;
  r->ax[ck->nax] = nj;
  gemm_epilogue(r, "s_", 6);
  buf_puts(o, "    }\n  }\n");
  kernel_close(r);
}

static void render_program(CudaProgram *cp) {
  const Program *p = cp->p;
  Buf *o = &cp->src;
  buf_printf(o, "/* dyn: CUDA C for %s, rendered for %s (%s: compute capability %d.%d, %d SMs).\n"
                " * Generated by src/cuda_render.c.  Every size, extent and stride is an argument: one module serves\n"
                " * every shape; the host picks a variant per kernel and shape with the model in cuda_plan.c.",
             p->name, cp->hw.name, cp->hw.desc, cp->hw.cc_major, cp->hw.cc_minor, cp->hw.sm_count);
  CudaMath on = cuda_math_on(&cp->hw, cp->math);
  bool gemm = false, h16 = false;
  for (int k = 0; k < cp->nk; k++) gemm = gemm || (cp->k[k].kind == CK_GEMM && !elem_is_half(cp->k[k].et));
  for (int k = 0; k < cp->nk; k++) h16 = h16 || (cp->k[k].kind == CK_GEMM && elem_is_half(cp->k[k].et));
  /* the arithmetic asked for changes only a module with a contraction */
  if (gemm && on != CUDA_EXACT)
    buf_printf(o, "\n * f32 contractions in %s on the tensor cores (mma.sync); everything else exact.", cuda_math_name(on));
  else if (gemm && cp->math != CUDA_EXACT)
    buf_printf(o, "\n * f32 contractions exact: %s was asked for, but the tensor cores take it from compute capability 8.0.",
               cuda_math_name(cp->math));
  if (h16) buf_puts(o, "\n * f16 and bf16 contractions on the tensor cores (mma.sync m16n8k16), exact products summed in f32.");
  buf_puts(o, " */\n\n");
  buf_puts(o, curender_prelude);
  if ((gemm && on != CUDA_EXACT) || h16) {
    buf_puts(o, "\n");
    buf_puts(o, curender_prelude_mma);
  }
  Rd r = {0};
  r.cp = cp;
  r.p = p;
  r.o = o;
  r.ax = xcalloc((size_t)p->naxes + 1, sizeof(char *));
  r.sub = xcalloc((size_t)p->nkx + 1, sizeof(char *));
  r.reg = xcalloc((size_t)p->nslots + 1, sizeof(char *));
  r.wr = xcalloc((size_t)p->nslots + 1, 1);
  static const char *kinds[] = {"a loop nest", "row-wise", "a reduction to one value", "a contraction"};
  for (int k = 0; k < cp->nk; k++) {
    CK *ck = &cp->k[k];
    r.ck = ck;
    memset(r.wr, 0, (size_t)p->nslots + 1);
    for (int s = 0; s < ck->kn->nstages; s++)
      if (cp->buf[ck->kn->stages[s].out]) r.wr[ck->kn->stages[s].out] = true;
    buf_printf(o, "\n/* ==== kernel %s: %s", ck->kn->name, kinds[ck->kind]);
    if (ck->kind == CK_ROW) {
      buf_puts(o, " over ");
      curender_axes_list(cp, ck->outer, ck->nouter, o);
      buf_printf(o, ", %d stages fused", ck->kn->nstages);
    }
    if (ck->kind == CK_LOOP && ck->virt) buf_puts(o, " with a reduction along an axis");
    buf_puts(o, " ==== */\n\n");
    render_args(&r);
    for (int i = 0; i < ck->nv; i++) {
      const Var *v = &ck->v[i];
      switch (v->kind) {
      case V_LOOP: case V_LOOP4: render_loop(&r, v); break;
      case V_WARP: case V_BLOCK256: case V_BLOCK1024: render_row(&r, v); break;
      case V_GRID: render_grid(&r, v); break;
      case V_GEMM: render_gemm(&r, v); break;
      default: render_splitk(&r, v); break;
      }
    }
  }
  free(r.ax);
  free(r.sub);
  free(r.reg);
  free(r.wr);
}

void cuda_program_free(CudaProgram *cp) {
  if (!cp) return;
  for (int k = 0; k < cp->nk; k++) free(cp->k[k].f);
  free(cp->k);
  buf_free(&cp->src);
  free(cp->ptx);
  arena_free(cp->ar);
  free(cp);
}

CudaProgram *cuda_program_new(const Program *p, const HwModel *hw, CudaMath math) {
  CudaProgram *cp = xcalloc(1, sizeof *cp);
  cp->p = p;
  cp->hw = *hw;
  cp->math = math;
  cp->ar = arena_new();
  cuana_analyse(cp);
  render_program(cp);
  return cp;
}

const char *cuda_program_source(const CudaProgram *cp) { return cp->src.s ? cp->src.s : ""; }

void cuda_render(const Program *p, const HwModel *hw, CudaMath math, Buf *cuda_src) {
  CudaProgram *cp = cuda_program_new(p, hw, math);
  buf_puts(cuda_src, cuda_program_source(cp));
  cuda_program_free(cp);
}
