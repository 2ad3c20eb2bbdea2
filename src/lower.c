/* lower.c -- from the checked AST to fused kernels: the middle of the pipeline.
 *
 * Lowering turns each definition into a graph node (output axes, reduction axes, one
 * expression) and inlines called functions, so the whole computation is visible.  Fusion
 * then (1) inlines elementwise producers into their consumers when that costs no
 * transcendental recomputation, and (2) groups a row-wise chain -- consecutive nodes that
 * share their first axis and read each other's results only in the same row (softmax,
 * layernorm) -- into one kernel whose intermediates live per row.  What comes out is a list
 * of loop nests with symbolic extents: the input of the scheduler and of the evaluator.
 */
#include "config.h"
#include "dyn_int.h"

#include <math.h>
#include <string.h>

typedef struct Node {
  int slot;
  int *axes; int naxes;
  KExpr *expr;
  bool has_reduce;
  bool dead;               /* inlined away */
} Node;

typedef struct Binding { const char *name; int slot; } Binding;

typedef struct L {
  Program *p;
  Arena *a;
  PolyCtx *pc;
  Func *(*lookup_fn)(void *env, const char *name);
  void *env;
  VEC(Slot) slots;
  VEC(Axis) axes;
  VEC(Node) nodes;
  VEC(Kernel) kernels;
  int depth;
  VEC(const char *) called;   /* the function of every call inlined so far */
} L;

/* One function instance being lowered: its names and the values of its sizes. */
typedef struct Inst {
  const char *label;          /* names this instance's tensors (label.T); NULL at top level */
  VEC(Binding) names;
  const char **sz_names; const Poly **sz_vals; int nsz;   /* NULL vals: identity */
  const char *ix_names[64]; int ix_axes[64]; int nix;      /* index scope */
} Inst;

static const Poly *sz_lookup(void *env, const char *name) {
  Inst *in = env;
  for (int i = 0; i < in->nsz; i++)
    if (!strcmp(in->sz_names[i], name)) return in->sz_vals[i];
  return NULL;
}

static const Poly *sub(L *l, Inst *in, const Poly *p) {
  return in->nsz ? poly_subst(l->pc, p, sz_lookup, in) : p;
}

static int find_name(Inst *in, const char *name) {
  for (int i = in->names.n - 1; i >= 0; i--)
    if (!strcmp(in->names.a[i].name, name)) return in->names.a[i].slot;
  return -1;
}

static int new_axis(L *l, const char *name, const Poly *ext) {
  Axis ax = {name, ext};
  vec_push(l->axes, ax);
  return l->axes.n - 1;
}

static int new_slot(L *l, const char *name, SlotKind k, const Type *t) {
  Slot s = {0};
  s.name = name;
  s.kind = k;
  s.type = *t;
  vec_push(l->slots, s);
  return l->slots.n - 1;
}

static KExpr *kx_new(L *l, KxKind k, DynElem ty) {
  KExpr *e = arena_alloc(l->a, sizeof *e);
  e->kind = k;
  e->ty = ty;
  return e;
}

static KExpr *kx_args(L *l, KExpr *e, int n) {
  e->a = arena_alloc(l->a, sizeof(KExpr *) * (size_t)(n ? n : 1));
  e->n = n;
  return e;
}

static int scope_axis(Inst *in, const char *name) {
  for (int i = in->nix - 1; i >= 0; i--)
    if (!strcmp(in->ix_names[i], name)) return in->ix_axes[i];
  return -1;
}

static KExpr *kx_from(L *l, Inst *in, const Expr *e) {
  KExpr *k;
  switch (e->kind) {
  case EX_NUM:
    k = kx_new(l, KX_CONST, e->ty);
    if (elem_is_float(e->ty)) k->f = e->is_int ? (double)e->ival : e->num;
    else k->i = e->is_int ? e->ival : (int64_t)e->num;
    return k;
  case EX_BOOL:
    k = kx_new(l, KX_CONST, DYN_BOOL);
    k->i = e->ival;
    return k;
  case EX_NAME:
    if (e->res == RES_INDEX) {
      k = kx_new(l, KX_AXIS, DYN_I64);
      k->axis = scope_axis(in, e->name);
      return k;
    }
    k = kx_new(l, KX_SIZE, DYN_I64);
    k->size = sub(l, in, e->size);
    return k;
  case EX_INDEX:
    k = kx_args(l, kx_new(l, KX_LOAD, e->ty), e->nargs);
    k->slot = find_name(in, e->name);
    k->checked = e->checked;
    k->span = e->span;
    for (int i = 0; i < e->nargs; i++) k->a[i] = kx_from(l, in, e->args[i]);
    return k;
  case EX_CAST: {
    KExpr *x = kx_from(l, in, e->args[0]);
    /* f32(f32(D)) is f32(D); but f16(e) of an f16 e rounds e's f32 value to 16 bits (a
     * loaded or constant one already is) */
    bool rounds = elem_is_half(x->ty) && x->kind != KX_LOAD && x->kind != KX_CONST;
    if (x->ty == e->ty && !rounds) return x;
    k = kx_args(l, kx_new(l, KX_CAST, e->ty), 1);
    k->a[0] = x;
    k->opty = x->ty == e->ty ? DYN_F32 : x->ty;
    return k;
  }
  case EX_UNARY:
  case EX_BINARY:
  case EX_CALL:
    k = kx_args(l, kx_new(l, e->nargs == 1 ? KX_UN : KX_BIN, e->ty), e->nargs);
    k->op = e->op;
    k->span = e->span;   /* where an integer division by zero is reported */
    k->opty = e->kind == EX_BINARY && op_class(e->op) == OPK_CMP ? e->opty : e->ty;
    for (int i = 0; i < e->nargs; i++) k->a[i] = kx_from(l, in, e->args[i]);
    return k;
  case EX_WHERE:
    k = kx_args(l, kx_new(l, KX_SELECT, e->ty), 3);
    for (int i = 0; i < 3; i++) k->a[i] = kx_from(l, in, e->args[i]);
    return k;
  case EX_REDUCE: {
    k = kx_args(l, kx_new(l, KX_REDUCE, e->ty), 1);
    k->red = e->red;
    k->nraxes = e->nridx;
    k->raxes = arena_alloc(l->a, sizeof(int) * (size_t)e->nridx);
    int saved = in->nix;
    for (int i = 0; i < e->nridx; i++) {
      k->raxes[i] = new_axis(l, e->ridx[i], sub(l, in, e->rext[i]));
      in->ix_names[in->nix] = e->ridx[i];
      in->ix_axes[in->nix++] = k->raxes[i];
    }
    k->a[0] = kx_from(l, in, e->args[0]);
    in->nix = saved;
    return k;
  }
  case EX_SCAN:                           /* along the definition's own axis of that name */
    k = kx_args(l, kx_new(l, KX_SCAN, e->ty), 1);
    k->red = e->red;
    k->nraxes = 1;
    k->raxes = arena_alloc(l->a, sizeof(int));
    k->raxes[0] = scope_axis(in, e->ridx[0]);
    k->a[0] = kx_from(l, in, e->args[0]);
    return k;
  default:
    return kx_new(l, KX_CONST, DYN_F32);      /* unreachable for checked input */
  }
}

/* A scan counts as a reduction: its stage is never inlined into its readers. */
static bool has_reduce(const KExpr *e) {
  if (e->kind == KX_REDUCE || e->kind == KX_SCAN) return true;
  for (int i = 0; i < e->n; i++)
    if (has_reduce(e->a[i])) return true;
  return false;
}

static void lower_body(L *l, const Func *f, Inst *in, int *outs);

/* A size expression of the caller (an argument for a `size` parameter) as a polynomial. */
static const Poly *expr_poly(L *l, Inst *in, const Expr *x) {
  switch (x->kind) {
  case EX_NUM: return poly_const(l->pc, x->ival);
  case EX_NAME: return sub(l, in, poly_var(l->pc, x->name));
  case EX_UNARY: return poly_neg(l->pc, expr_poly(l, in, x->args[0]));
  case EX_BINARY: {
    const Poly *a = expr_poly(l, in, x->args[0]), *b = expr_poly(l, in, x->args[1]);
    return poly_op(l->pc, x->op, a, b);
  }
  case EX_CALL: {
    const Poly *a = expr_poly(l, in, x->args[0]), *b = expr_poly(l, in, x->args[1]);
    return x->name[1] == 'i' ? poly_min(l->pc, a, b) : poly_max(l->pc, a, b);
  }
  default:
    return poly_const(l->pc, 0);     /* unreachable: sema accepted it as a size */
  }
}

static void lower_call(L *l, Inst *in, const Stmt *st) {
  const Expr *call = st->expr;
  Func *g = l->lookup_fn(l->env, call->name);
  Inst sub_in = {0};
  /* The first call of g names its tensors g.T, later ones g@2.T, g@3.T: every buffer and
   * kernel of the program has a name of its own. */
  int nth = 1;
  for (int i = 0; i < l->called.n; i++) nth += !strcmp(l->called.a[i], g->name);
  vec_push(l->called, g->name);
  sub_in.label = nth == 1 ? g->name : arena_printf(l->a, "%s@%d", g->name, nth);
  sub_in.nsz = g->nsizes;
  sub_in.sz_names = arena_alloc(l->a, sizeof(char *) * (size_t)(g->nsizes + 1));
  sub_in.sz_vals = arena_alloc(l->a, sizeof(Poly *) * (size_t)(g->nsizes + 1));
  for (int v = 0; v < g->nsizes; v++) {
    SizeVar *sv = &g->sizes[v];
    const Expr *a = call->args[sv->param];
    sub_in.sz_names[v] = sv->name;
    sub_in.sz_vals[v] = sv->dim < 0 ? expr_poly(l, in, a)
                                    : l->slots.a[find_name(in, a->name)].type.dims[sv->dim];
  }
  for (int i = 0; i < g->nparams; i++) {
    if (g->params[i].is_size) continue;
    Binding b = {g->params[i].name, find_name(in, call->args[i]->name)};
    vec_push(sub_in.names, b);
  }
  int *outs = arena_alloc(l->a, sizeof(int) * (size_t)(g->nrets + 1));
  lower_body(l, g, &sub_in, outs);
  vec_free(sub_in.names);
  for (int i = 0; i < st->nnames; i++) {
    Binding b = {st->names[i], outs[i]};
    vec_push(in->names, b);
  }
}

static void lower_body(L *l, const Func *f, Inst *in, int *outs) {
  const FnDecl *d = f->decl;
  for (int i = 0; i < d->nbody; i++) {
    const Stmt *st = d->body[i];
    if (st->kind == ST_DEF) {
      Type t = *st->type;
      for (int k = 0; k < t.rank; k++) t.dims[k] = sub(l, in, t.dims[k]);
      const char *nm = in->label ? arena_printf(l->a, "%s.%s", in->label, st->name) : st->name;
      int slot = new_slot(l, nm, SLOT_TEMP, &t);
      Node n = {0};
      n.slot = slot;
      n.naxes = st->nidx;
      n.axes = arena_alloc(l->a, sizeof(int) * (size_t)(st->nidx + 1));
      int saved = in->nix;
      for (int k = 0; k < st->nidx; k++) {
        n.axes[k] = new_axis(l, st->idx[k], t.dims[k]);
        in->ix_names[in->nix] = st->idx[k];
        in->ix_axes[in->nix++] = n.axes[k];
      }
      n.expr = kx_from(l, in, st->expr);
      in->nix = saved;
      n.has_reduce = has_reduce(n.expr);
      vec_push(l->nodes, n);
      Binding b = {st->name, slot};
      vec_push(in->names, b);
    } else if (st->kind == ST_ASSIGN) {
      l->depth++;
      lower_call(l, in, st);
      l->depth--;
    } else if (st->kind == ST_RETURN) {
      for (int k = 0; k < st->nnames; k++) outs[k] = find_name(in, st->names[k]);
    }
  }
}

/* ---- fusion ---- */

void kexpr_mark_loads(const KExpr *e, bool *mark) {
  if (e->kind == KX_LOAD) mark[e->slot] = true;
  for (int i = 0; i < e->n; i++) kexpr_mark_loads(e->a[i], mark);
}

bool kexpr_transcendental(const KExpr *e) {
  if (e->kind == KX_UN || e->kind == KX_BIN) {
    switch (e->op) {
    case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_SIN: case OP_COS:
    case OP_TANH: case OP_SIGMOID: case OP_ERF: case OP_POW: case OP_POWF:
      return true;
    default:
      break;
    }
  }
  for (int i = 0; i < e->n; i++)
    if (kexpr_transcendental(e->a[i])) return true;
  return false;
}

/* Count loads of slot in e; *in_reduce counts those inside a reduction. */
static void count_loads(const KExpr *e, int slot, bool red, int *n, int *in_reduce) {
  if (e->kind == KX_LOAD && e->slot == slot) {
    (*n)++;
    if (red) (*in_reduce)++;
  }
  for (int i = 0; i < e->n; i++) count_loads(e->a[i], slot, red || e->kind == KX_REDUCE, n, in_reduce);
}

/* A copy of e with axes replaced by expressions (axis_of[i] -> with[i]).  Each replacement
 * is a copy of its own: the result stays a tree, as the evaluator (one buffer per node)
 * and the numbering of nodes require. */
static KExpr *kx_subst(L *l, const KExpr *e, const int *axis_of, KExpr **with, int n) {
  if (e->kind == KX_AXIS)
    for (int i = 0; i < n; i++)
      if (axis_of[i] == e->axis) return kx_subst(l, with[i], NULL, NULL, 0);
  KExpr *c = arena_alloc(l->a, sizeof *c);
  *c = *e;
  if (e->n) {
    c->a = arena_alloc(l->a, sizeof(KExpr *) * (size_t)e->n);
    for (int i = 0; i < e->n; i++) c->a[i] = kx_subst(l, e->a[i], axis_of, with, n);
  }
  return c;
}

/* Replace every load of node p's slot in e by p's expression at the load's subscripts.  An
 * f16 or bf16 definition's value is the f32 one rounded to 16 bits as it is stored: inlined,
 * it is rounded where it is read (a cast from its f32 value), so that fusion does not change
 * a result. */
static KExpr *inline_into(L *l, KExpr *e, const Node *p) {
  for (int i = 0; i < e->n; i++) e->a[i] = inline_into(l, e->a[i], p);
  if (e->kind != KX_LOAD || e->slot != p->slot) return e;
  KExpr *v = kx_subst(l, p->expr, p->axes, e->a, p->naxes);
  if (!elem_is_half(v->ty)) return v;
  KExpr *c = kx_args(l, kx_new(l, KX_CAST, v->ty), 1);
  c->opty = DYN_F32;
  c->a[0] = v;
  return c;
}

bool kexpr_can_fail(const KExpr *e) {
  if (e->kind == KX_LOAD && e->checked) return true;
  if (e->kind == KX_BIN && (e->op == OP_DIV || e->op == OP_MOD) && !elem_is_float(e->ty) &&
      !(e->a[1]->kind == KX_CONST && e->a[1]->i != 0))
    return true;
  for (int i = 0; i < e->n; i++)
    if (kexpr_can_fail(e->a[i])) return true;
  return false;
}

/* Inlining p must not change which errors a program reports.  A load of p is replaced by
 * p's expression at the load's subscripts, and a subscript p does not use disappears with
 * it, and so would its check or its division (E[I[i], i] of an E that reads only its second
 * index; E[i % P, i]): such a load keeps p materialised.  And if p itself can fail, every
 * element of p must still be computed: each load must read all of p, outside any branch of
 * a where(), so that inlining computes each element at least once.  Counts into *ok. */
static void inline_safe(L *l, const KExpr *e, const Node *p, bool fails, bool in_branch, bool *ok) {
  if (!*ok) return;
  if (e->kind == KX_LOAD && e->slot == p->slot) {
    if (e->checked) *ok = false;
    for (int k = 0; k < e->n && *ok; k++)
      if (kexpr_can_fail(e->a[k])) *ok = false;
    if (fails && *ok) {
      uint64_t seen = 0;
      const Slot *ps = &l->slots.a[p->slot];
      if (in_branch || e->n != ps->type.rank) *ok = false;
      for (int k = 0; k < e->n && *ok; k++) {
        const KExpr *x = e->a[k];
        if (x->kind != KX_AXIS || (seen >> (x->axis % 64) & 1) || l->axes.a[x->axis].extent != ps->type.dims[k])
          *ok = false;
        else
          seen |= 1ull << (x->axis % 64);
      }
    }
  }
  for (int i = 0; i < e->n; i++) inline_safe(l, e->a[i], p, fails, in_branch || (e->kind == KX_SELECT && i > 0), ok);
}

static bool is_output(L *l, int slot, const int *outs, int nout) {
  for (int i = 0; i < nout; i++)
    if (outs[i] == slot) return true;
  (void)l;
  return false;
}

/* Bounds on inlining.  A cheap producer read more than once is recomputed at each read, so
 * only a small one is inlined then (and chains of them cannot grow exponentially); and no
 * expression may grow past the size and height that the passes after this one (which
 * recurse on it) and the evaluator handle comfortably. */
#define INLINE_DUP_NODES 32
#define KX_MAX_NODES 20000
#define KX_MAX_HEIGHT 4000

static long kx_nodes(const KExpr *e) {
  long n = 1;
  for (int i = 0; i < e->n; i++) n += kx_nodes(e->a[i]);
  return n;
}

static int kx_height(const KExpr *e) {
  int h = 0;
  for (int i = 0; i < e->n; i++) {
    int c = kx_height(e->a[i]);
    if (c > h) h = c;
  }
  return h + 1;
}

/* How many times axis ax occurs in e. */
static long axis_uses(const KExpr *e, int ax) {
  long n = e->kind == KX_AXIS && e->axis == ax;
  for (int i = 0; i < e->n; i++) n += axis_uses(e->a[i], ax);
  return n;
}

/* The size and height e would have with p inlined (sizes saturate past KX_MAX_NODES). */
static void inlined_shape(const KExpr *e, const Node *p, const long *occ, long base, int ph,
                          long *size, int *height) {
  long sz[DYN_MAX_RANK + 1];
  long s = 1;
  int h = 0;
  for (int i = 0; i < e->n; i++) {
    long cs;
    int ch;
    inlined_shape(e->a[i], p, occ, base, ph, &cs, &ch);
    if (i < DYN_MAX_RANK) sz[i] = cs;
    s += cs;
    if (ch > h) h = ch;
    if (s > KX_MAX_NODES) s = KX_MAX_NODES + 1;
  }
  if (e->kind == KX_LOAD && e->slot == p->slot) {
    s = base;                     /* p's nodes, each use of an axis replaced by a subscript */
    for (int k = 0; k < p->naxes && k < e->n && k < DYN_MAX_RANK; k++) {
      s += occ[k] * sz[k];
      if (s > KX_MAX_NODES) s = KX_MAX_NODES + 1;
    }
    h += ph;
  } else {
    h += 1;
  }
  *size = s;
  *height = h;
}

/* The nodes of kind k in e. */
static int kind_nodes(const KExpr *e, KxKind k) {
  int n = e->kind == k;
  for (int i = 0; i < e->n; i++) n += kind_nodes(e->a[i], k);
  return n;
}

/* An integer expression affine in the axes: axes, constants and sizes under + and -, and *
 * with one side free of axes. */
static bool affine(const KExpr *e) {
  switch (e->kind) {
  case KX_AXIS: case KX_SIZE: return true;
  case KX_CONST: return !elem_is_float(e->ty);
  case KX_BIN:
    if (e->op == OP_ADD || e->op == OP_SUB) return affine(e->a[0]) && affine(e->a[1]);
    if (e->op == OP_MUL)
      return affine(e->a[0]) && affine(e->a[1]) &&
             !(kind_nodes(e->a[0], KX_AXIS) && kind_nodes(e->a[1], KX_AXIS));
    return false;
  default: return false;
  }
}

bool kexpr_window_contraction(const KExpr *r, const int *axes, int naxes, WinContraction *w) {
  if (r->kind != KX_REDUCE || r->red != RED_SUM || !elem_is_float(r->ty)) return false;
  const KExpr *body = r->a[0];
  if (body->kind != KX_BIN || body->op != OP_MUL || r->nraxes > DYN_MAX_RANK) return false;
  for (int side = 0; side < 2; side++) {
    const KExpr *A = body->a[side], *B = body->a[1 - side];
    if (A->kind != KX_LOAD || B->kind != KX_LOAD || A->checked || B->checked) continue;
    if (A->ty != r->ty || B->ty != r->ty) continue;
    WinContraction c = {.a = A, .b = B};
    bool ok = true;
    int stage = 0;                      /* 0: P axes, 1: M (or G) axes, 2: Q axes */
    for (int i = 0; i < naxes && ok; i++) {
      bool in_a = axis_uses(A, axes[i]) > 0, in_b = axis_uses(B, axes[i]) > 0;
      if (!in_a && !in_b) ok = false;
      else if (in_a) {
        if (stage == 2) ok = false;
        stage = 1;
        if (in_b) c.g[c.ng++] = axes[i];
        else c.m[c.nm++] = axes[i];
      } else if (stage == 0) {
        c.p[c.np++] = axes[i];
      } else {
        stage = 2;
        c.q[c.nq++] = axes[i];
      }
    }
    /* a plain one (M axes) or a grouped one (G axes: a depthwise convolution), not both */
    if (!ok || !(c.nm || c.ng) || (c.nm && c.ng) || !c.nq || A->n != c.nm + c.ng + r->nraxes) continue;
    /* A's subscripts: each M axis and each reduction axis once, plain, in any order (the
     * back end reads A as an M x K matrix where its strides allow) */
    for (int i = 0; i < A->n && ok; i++) {
      int ax = A->a[i]->kind == KX_AXIS ? A->a[i]->axis : -1, found = 0;
      for (int j = 0; j < c.nm; j++) found += c.m[j] == ax;
      for (int j = 0; j < c.ng; j++) found += c.g[j] == ax;
      for (int j = 0; j < r->nraxes; j++) found += r->raxes[j] == ax;
      ok = found == 1 && axis_uses(A, ax) == 1;
    }
    for (int i = 0; i < B->n && ok; i++) ok = affine(B->a[i]);
    if (!ok) continue;
    if (w) *w = c;
    return true;
  }
  return false;
}

/* A guarded producer (a `where`, such as the zero padding of conv2d) read inside a
 * reduction through a window -- a subscript that combines axes, Xp[n, c, h*S + i, w*S + j]
 * -- stays a tensor of its own: inlined, every read of every tap evaluated the guard again
 * and the loop that reads it could not be vectorised (a load under a condition): conv2d over
 * 8 x 32 x 56 x 56 with 64 3x3 filters took 390 ms so, 20 ms with the padded copy (both
 * with cpu.c's interchanged loops). */
static bool windowed_read(const KExpr *e, int slot, bool red) {
  if (red && e->kind == KX_LOAD && e->slot == slot)
    for (int i = 0; i < e->n; i++)
      if (kind_nodes(e->a[i], KX_AXIS) > 1) return true;
  for (int i = 0; i < e->n; i++)
    if (windowed_read(e->a[i], slot, red || e->kind == KX_REDUCE)) return true;
  return false;
}

/* A contraction (contract_expr) runs on the CPU's packed micro-kernels, so fusion keeps it
 * in that shape: no producer is inlined into one, and an epilogue around one is split off. */
static bool feeds_contraction(const KExpr *e, int slot) {
  if (contract_expr(e))
    for (int i = 0; i < 2; i++)
      if (e->a[0]->a[i]->slot == slot) return true;
  for (int i = 0; i < e->n; i++)
    if (feeds_contraction(e->a[i], slot)) return true;
  return false;
}

/* Does node n, a contraction of either kind, read slot as an operand?  Inlined there, a
 * producer would turn the operand's load into an expression and the contraction into a
 * loop kernel (conv2d of a weight scaled first ran 3x slower so). */
static bool feeds(const Node *n, int slot) {
  WinContraction w;
  return feeds_contraction(n->expr, slot) ||
         (kexpr_window_contraction(n->expr, n->axes, n->naxes, &w) && (w.a->slot == slot || w.b->slot == slot));
}

static void fuse_inline(L *l, const int *outs, int nout) {
  for (int i = 0; i < l->nodes.n; i++) {
    Node *p = &l->nodes.a[i];
    /* A node a first pass inlined has no buffer any more: its readers compute it (and
     * report its errors), so the second pass must not take it for an unused one. */
    if (p->dead || p->has_reduce || is_output(l, p->slot, outs, nout)) continue;
    int uses = 0, in_red = 0;
    for (int j = i + 1; j < l->nodes.n; j++)
      if (!l->nodes.a[j].dead) count_loads(l->nodes.a[j].expr, p->slot, false, &uses, &in_red);
    bool fails = kexpr_can_fail(p->expr);
    if (uses == 0) {
      p->dead = !fails;            /* unused: nothing reads it (but its errors are still errors) */
      continue;
    }
    bool safe = true;
    for (int j = i + 1; j < l->nodes.n && safe; j++)
      if (!l->nodes.a[j].dead) inline_safe(l, l->nodes.a[j].expr, p, fails, false, &safe);
    if (!safe) continue;
    bool cheap = !kexpr_transcendental(p->expr);
    if (!cheap && !(uses == 1 && in_red == 0)) continue;
    bool operand = false;
    for (int j = i + 1; j < l->nodes.n && !operand; j++)
      if (!l->nodes.a[j].dead) operand = feeds(&l->nodes.a[j], p->slot);
    if (operand) continue;
    bool window = false;
    if (in_red && kind_nodes(p->expr, KX_SELECT))
      for (int j = i + 1; j < l->nodes.n && !window; j++)
        if (!l->nodes.a[j].dead) window = windowed_read(l->nodes.a[j].expr, p->slot, false);
    if (window) continue;
    long pn = kx_nodes(p->expr);
    if (uses > 1 && pn > INLINE_DUP_NODES) continue;
    long occ[DYN_MAX_RANK] = {0}, base = pn;
    for (int k = 0; k < p->naxes && k < DYN_MAX_RANK; k++) {
      occ[k] = axis_uses(p->expr, p->axes[k]);
      base -= occ[k];
    }
    int ph = kx_height(p->expr);
    bool fits = true;
    for (int j = i + 1; j < l->nodes.n && fits; j++)
      if (!l->nodes.a[j].dead) {
        long cs;
        int chh;
        inlined_shape(l->nodes.a[j].expr, p, occ, base, ph, &cs, &chh);
        fits = cs <= KX_MAX_NODES && chh <= KX_MAX_HEIGHT;
      }
    if (!fits) continue;
    for (int j = i + 1; j < l->nodes.n; j++)
      if (!l->nodes.a[j].dead) {
        Node *c = &l->nodes.a[j];
        c->expr = inline_into(l, c->expr, p);
        c->has_reduce = has_reduce(c->expr);
      }
    p->dead = true;
  }
  for (int i = 0; i < l->nodes.n; i++)
    if (l->nodes.a[i].dead) l->slots.a[l->nodes.a[i].slot].kind = SLOT_INLINED;
}


/* Hoist a contraction out of the expression around it (alpha * sum[k] A * B + bias, a
 * convolution plus its bias or under a relu): the contraction becomes its own node over the
 * output axes its operands use, and the rest reads its result.  One more buffer, but the
 * contraction then runs as one.  (A 3 x 3 convolution with its bias added in the same
 * statement ran as a loop kernel: 137 ms over 4 x 64 x 30 x 30 by 64 filters on one thread
 * of a Zen 4 guest, where the convolution alone took 2.5.) */
typedef VEC(Node) NodeVec;

static KExpr *hoist(L *l, KExpr *e, const Node *n, bool root, NodeVec *added) {
  if (!root && n->naxes >= 2 && e->kind == KX_REDUCE) {
    int axes[DYN_MAX_RANK], na = 0;
    for (int a = 0; a < n->naxes; a++)
      if (axis_uses(e, n->axes[a])) axes[na++] = n->axes[a];
    if (na >= 2 && (contract_expr(e) || kexpr_window_contraction(e, axes, na, NULL))) {
      Type t = {0};
      t.elem = e->ty;
      t.rank = na;
      for (int a = 0; a < na; a++) t.dims[a] = l->axes.a[axes[a]].extent;
      int slot = new_slot(l, arena_printf(l->a, "%s.c", l->slots.a[n->slot].name), SLOT_TEMP, &t);
      Node c = {0};
      c.slot = slot;
      c.naxes = na;
      c.axes = arena_alloc(l->a, sizeof(int) * (size_t)na);
      /* the new node gets its own axes, standing for the same ranges */
      KExpr *with[DYN_MAX_RANK];
      for (int a = 0; a < na; a++) {
        c.axes[a] = new_axis(l, l->axes.a[axes[a]].name, l->axes.a[axes[a]].extent);
        with[a] = kx_new(l, KX_AXIS, DYN_I64);
        with[a]->axis = c.axes[a];
      }
      c.expr = kx_subst(l, e, axes, with, na);
      c.has_reduce = true;
      vec_push(*added, c);
      KExpr *ld = kx_args(l, kx_new(l, KX_LOAD, e->ty), na);
      ld->slot = slot;
      for (int a = 0; a < na; a++) {
        ld->a[a] = kx_new(l, KX_AXIS, DYN_I64);
        ld->a[a]->axis = axes[a];
      }
      return ld;
    }
  }
  if (e->kind == KX_REDUCE) return e;     /* not inside another reduction's body */
  for (int i = 0; i < e->n; i++) e->a[i] = hoist(l, e->a[i], n, false, added);
  return e;
}

static void split_contractions(L *l) {
  NodeVec out = {0};
  for (int i = 0; i < l->nodes.n; i++) {
    Node n = l->nodes.a[i];
    if (!n.dead && n.has_reduce) {
      NodeVec added = {0};
      n.expr = hoist(l, n.expr, &n, true, &added);
      for (int j = 0; j < added.n; j++) vec_push(out, added.a[j]);
      vec_free(added);
      n.has_reduce = has_reduce(n.expr);
    }
    vec_push(out, n);
  }
  vec_free(l->nodes);
  l->nodes.a = out.a;
  l->nodes.n = out.n;
  l->nodes.cap = out.cap;
}

/* Does every load in e of a slot in group[] use the row axis as its first subscript? */
static bool row_local(const KExpr *e, const int *slots, int ns, int row_axis) {
  if (e->kind == KX_LOAD)
    for (int i = 0; i < ns; i++)
      if (e->slot == slots[i] && !(e->n >= 1 && e->a[0]->kind == KX_AXIS && e->a[0]->axis == row_axis))
        return false;
  for (int i = 0; i < e->n; i++)
    if (!row_local(e->a[i], slots, ns, row_axis)) return false;
  return true;
}

/* Does e read a tensor of two or more axes along the row axis, its last subscript: a
 * "row" that runs down the columns of memory?  Grouped per row, each row's reductions read
 * one element a line (softmax over axis 0 of f32[2048, 2048]: m[j] = max[i] X[i, j] and
 * s[j] = sum[i] exp(X[i, j] - m[j]) grouped per j took 22 ms on one thread of Zen 4); kept
 * apart, each is a column reduction with its loops interchanged, vectorised along j (0.3
 * and 0.8 ms). */
static bool row_across(const KExpr *e, int row_axis) {
  if (e->kind == KX_LOAD && e->n >= 2 && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == row_axis)
    return true;
  for (int i = 0; i < e->n; i++)
    if (row_across(e->a[i], row_axis)) return true;
  return false;
}

static bool reads_any(const KExpr *e, const int *slots, int ns) {
  if (e->kind == KX_LOAD)
    for (int i = 0; i < ns; i++)
      if (e->slot == slots[i]) return true;
  for (int i = 0; i < e->n; i++)
    if (reads_any(e->a[i], slots, ns)) return true;
  return false;
}

/* Contractions stay kernels of their own: plain ones and windowed ones (convolutions),
 * which the CPU back end runs on its micro-kernels. */
static bool contraction(const Node *n) {
  return contract_expr(n->expr) || kexpr_window_contraction(n->expr, n->axes, n->naxes, NULL);
}

static void number(Program *p, KExpr *e, int *next) {
  e->id = (*next)++;
  e->axmask = 0;
  if (e->kind == KX_AXIS) e->axmask = 1ull << (e->axis % 64);
  for (int i = 0; i < e->n; i++) {
    number(p, e->a[i], next);
    e->axmask |= e->a[i]->axmask;
  }
  /* a reduction depends on its axes only inside its body; a scan on its axis whatever
   * its body reads */
  if (e->kind == KX_SCAN) e->axmask |= 1ull << (e->raxes[0] % 64);
  (void)p;
}

static void build_kernels(L *l, const int *outs, int nout, const char *fname, bool group) {
  VEC(int) live = {0};
  for (int i = 0; i < l->nodes.n; i++)
    if (!l->nodes.a[i].dead) vec_push(live, i);
  int k = 0;
  while (k < live.n) {
    Node *first = &l->nodes.a[live.a[k]];
    int end = k + 1;
    int row_axis = first->naxes ? first->axes[0] : -1;
    int gslots[64], ng = 1;
    gslots[0] = first->slot;
    /* a scan is a kernel of its own: its sequential axis may be any of its axes */
    if (group && row_axis >= 0 && !contraction(first) && first->expr->kind != KX_SCAN && !row_across(first->expr, row_axis)) {
      const Poly *ext = l->axes.a[row_axis].extent;
      while (end < live.n && ng < 64) {
        Node *n = &l->nodes.a[live.a[end]];
        if (!n->naxes || contraction(n) || n->expr->kind == KX_SCAN || l->axes.a[n->axes[0]].extent != ext) break;
        /* the candidate must read the group, and only within its own row */
        KExpr *renamed = n->expr;
        int from = n->axes[0];
        KExpr *ax = kx_new(l, KX_AXIS, DYN_I64);
        ax->axis = row_axis;
        renamed = kx_subst(l, n->expr, &from, &ax, 1);
        if (!reads_any(renamed, gslots, ng) || !row_local(renamed, gslots, ng, row_axis) || row_across(renamed, row_axis)) break;
        bool any_reduce = first->has_reduce || n->has_reduce;
        for (int j = k; j < end && !any_reduce; j++) any_reduce = l->nodes.a[live.a[j]].has_reduce;
        if (!any_reduce) break;
        n->expr = renamed;
        n->axes[0] = row_axis;
        gslots[ng++] = n->slot;
        end++;
      }
    }
    Kernel kn = {0};
    int nst = end - k;
    kn.stages = arena_alloc(l->a, sizeof(Stage) * (size_t)nst);
    kn.nstages = nst;
    bool grouped = nst > 1;
    if (grouped) {
      kn.outer = arena_alloc(l->a, sizeof(int));
      kn.outer[0] = row_axis;
      kn.nouter = 1;
    }
    for (int j = 0; j < nst; j++) {
      Node *n = &l->nodes.a[live.a[k + j]];
      Stage *st = &kn.stages[j];
      st->out = n->slot;
      st->expr = n->expr;
      st->axes = n->axes + (grouped ? 1 : 0);
      st->naxes = n->naxes - (grouped ? 1 : 0);
      /* an intermediate read only inside this kernel lives per row */
      if (grouped && !is_output(l, n->slot, outs, nout)) {
        bool outside = false;
        for (int m = 0; m < live.n && !outside; m++) {
          if (m >= k && m < end) continue;
          int u = 0, r = 0;
          count_loads(l->nodes.a[live.a[m]].expr, n->slot, false, &u, &r);
          outside = u > 0;
        }
        if (!outside) {
          l->slots.a[n->slot].kind = SLOT_LOCAL;
          l->slots.a[n->slot].nlocal = st->naxes;
        }
      }
    }
    Slot *last = &l->slots.a[kn.stages[nst - 1].out];
    kn.name = arena_printf(l->a, "%s_%s", fname, last->name);
    vec_push(l->kernels, kn);
    k = end;
  }
  vec_free(live);
}

Program *lower_function(const Func *f, PolyCtx *pc,
                        Func *(*lookup_fn)(void *env, const char *name), void *env) {
  return lower_program(f, pc, lookup_fn, env, true);
}

Program *lower_program(const Func *f, PolyCtx *pc,
                       Func *(*lookup_fn)(void *env, const char *name), void *env, bool fuse) {
  Arena *a = arena_new();
  Program *p = arena_alloc(a, sizeof *p);
  p->arena = a;
  p->name = arena_strndup(a, f->name, strlen(f->name));
  L l = {.p = p, .a = a, .pc = pc, .lookup_fn = lookup_fn, .env = env};
  Inst in = {0};
  for (int i = 0; i < f->nparams; i++) {
    if (f->params[i].is_size) continue;
    int s = new_slot(&l, f->params[i].name, SLOT_INPUT, &f->params[i].type);
    l.slots.a[s].param = i;
    Binding b = {f->params[i].name, s};
    vec_push(in.names, b);
  }
  int *outs = arena_alloc(a, sizeof(int) * (size_t)(f->nrets + 1));
  lower_body(&l, f, &in, outs);
  vec_free(in.names);
  for (int i = 0; i < f->nrets; i++)
    if (l.slots.a[outs[i]].kind == SLOT_TEMP) l.slots.a[outs[i]].kind = SLOT_OUTPUT;
  if (fuse) {
    fuse_inline(&l, outs, f->nrets);
    split_contractions(&l);
    fuse_inline(&l, outs, f->nrets);    /* what the split left elementwise */
  }
  build_kernels(&l, outs, f->nrets, f->name, fuse);
  int next = 0;
  for (int i = 0; i < l.kernels.n; i++)
    for (int j = 0; j < l.kernels.a[i].nstages; j++) number(p, l.kernels.a[i].stages[j].expr, &next);
  p->nkx = next;
#define COPY(field, vec) do { p->field = arena_alloc(a, sizeof(*vec.a) * (size_t)(vec.n + 1)); \
    if (vec.n) memcpy(p->field, vec.a, sizeof(*vec.a) * (size_t)vec.n); } while (0)
  COPY(slots, l.slots);
  p->nslots = l.slots.n;
  COPY(axes, l.axes);
  p->naxes = l.axes.n;
  COPY(kernels, l.kernels);
  p->nkernels = l.kernels.n;
#undef COPY
  for (int i = 0; i < p->nkernels; i++) p->kernels[i].con = contract_find(p, &p->kernels[i]);
  p->outputs = outs;
  p->nout = f->nrets;
  vec_free(l.slots);
  vec_free(l.axes);
  vec_free(l.nodes);
  vec_free(l.kernels);
  vec_free(l.called);
  return p;
}

void lower_free(Program *p) {
  if (p) arena_free(p->arena);
}

/* ---- printing ---- */

static int kprec(const KExpr *e) {
  if (e->kind == KX_BIN && e->op != OP_MAX && e->op != OP_MIN && e->op != OP_POWF) return op_prec(e->op);
  if (e->kind == KX_UN && (e->op == OP_NEG || e->op == OP_NOT)) return op_prec(e->op);
  if (e->kind == KX_REDUCE) return 0;
  if (e->kind == KX_SCAN) return 10;
  if (e->kind == KX_SIZE) {
    int64_t v;
    return poly_is_const(e->size, &v) || poly_as_var(e->size) ? 10 : 5;
  }
  return 10;
}

static void kx_sub(const Program *p, const KExpr *e, int min, Buf *out) {
  bool par = kprec(e) < min;
  if (par) buf_putc(out, '(');
  kx_print(p, e, out);
  if (par) buf_putc(out, ')');
}

void kx_print(const Program *p, const KExpr *e, Buf *out) {
  switch (e->kind) {
  case KX_CONST:
    if (e->ty == DYN_BOOL) buf_puts(out, e->i ? "true" : "false");
    else if (elem_is_float(e->ty)) {
      if (isinf(e->f)) buf_puts(out, e->f > 0 ? "inf" : "-inf");
      else if (isnan(e->f)) buf_puts(out, "nan");
      else {
        char s[64];
        snprintf(s, sizeof s, "%.9g", e->f);
        if (!strpbrk(s, ".en")) strcat(s, ".0");
        buf_puts(out, s);
      }
    } else buf_printf(out, "%lld", (long long)e->i);
    break;
  case KX_AXIS: buf_puts(out, p->axes[e->axis].name); break;
  case KX_SIZE: poly_str(e->size, out); break;
  case KX_LOAD:
    buf_puts(out, p->slots[e->slot].name);
    if (e->n) {
      buf_putc(out, '[');
      for (int i = 0; i < e->n; i++) {
        if (i) buf_puts(out, ", ");
        kx_print(p, e->a[i], out);
      }
      buf_putc(out, ']');
    }
    if (e->checked) buf_puts(out, "!");
    break;
  case KX_CAST:
    buf_printf(out, "%s(", elem_name(e->ty));
    kx_print(p, e->a[0], out);
    buf_putc(out, ')');
    break;
  case KX_UN:
    if (e->op == OP_NEG) { buf_putc(out, '-'); kx_sub(p, e->a[0], op_prec(OP_NEG), out); }
    else if (e->op == OP_NOT) { buf_puts(out, "not "); kx_sub(p, e->a[0], op_prec(OP_NOT), out); }
    else { buf_printf(out, "%s(", op_name(e->op)); kx_print(p, e->a[0], out); buf_putc(out, ')'); }
    break;
  case KX_BIN:
    if (e->op == OP_MAX || e->op == OP_MIN || e->op == OP_POWF) {
      buf_printf(out, "%s(", op_name(e->op));
      kx_print(p, e->a[0], out);
      buf_puts(out, ", ");
      kx_print(p, e->a[1], out);
      buf_putc(out, ')');
    } else {
      int pr = kprec(e);
      kx_sub(p, e->a[0], e->op == OP_POW ? pr + 1 : pr, out);
      buf_printf(out, " %s ", op_name(e->op));
      kx_sub(p, e->a[1], e->op == OP_POW ? pr : pr + 1, out);
    }
    break;
  case KX_SELECT:
    buf_puts(out, "where(");
    for (int i = 0; i < 3; i++) {
      if (i) buf_puts(out, ", ");
      kx_print(p, e->a[i], out);
    }
    buf_putc(out, ')');
    break;
  case KX_REDUCE:
    buf_printf(out, "%s[", red_name(e->red));
    for (int i = 0; i < e->nraxes; i++) {
      const Axis *ax = &p->axes[e->raxes[i]];
      if (i) buf_puts(out, ", ");
      buf_printf(out, "%s < ", ax->name);
      poly_str(ax->extent, out);
    }
    buf_puts(out, "] ");
    kx_print(p, e->a[0], out);
    break;
  case KX_SCAN: {
    static const char *sym[] = {"+", "max", "min", "*"};
    buf_printf(out, "scan[%s < ", p->axes[e->raxes[0]].name);
    poly_str(p->axes[e->raxes[0]].extent, out);
    buf_printf(out, "] %s(", sym[e->red]);
    kx_print(p, e->a[0], out);
    buf_putc(out, ')');
    break;
  }
  }
}

static const char *slot_kind_name(SlotKind k) {
  static const char *n[] = {"input", "size", "temporary", "per row", "output", "inlined"};
  return n[k];
}

void lower_print(const Program *p, Buf *out) {
  buf_puts(out, "buffers:\n");
  for (int i = 0; i < p->nslots; i++) {
    const Slot *s = &p->slots[i];
    if (s->kind == SLOT_INLINED) continue;
    buf_printf(out, "  %-10s ", s->name);
    type_str(&s->type, out);
    buf_printf(out, "  %s\n", slot_kind_name(s->kind));
  }
  for (int k = 0; k < p->nkernels; k++) {
    const Kernel *kn = &p->kernels[k];
    int ind = 2;
    buf_printf(out, "kernel %s", kn->name);
    if (kn->nouter) buf_printf(out, ": row-wise, %d stages fused", kn->nstages);
    buf_putc(out, '\n');
    for (int o = 0; o < kn->nouter; o++) {
      const Axis *ax = &p->axes[kn->outer[o]];
      buf_printf(out, "%*sfor %s < ", ind, "", ax->name);
      poly_str(ax->extent, out);
      buf_puts(out, ":   # parallel\n");
      ind += 2;
    }
    for (int s = 0; s < kn->nstages; s++) {
      const Stage *st = &kn->stages[s];
      int in2 = ind;
      /* a scan runs in order along its axis, in parallel over the first of the others */
      int sax = st->expr->kind == KX_SCAN ? st->expr->raxes[0] : -1;
      int par = !kn->nouter && st->naxes > 1 ? st->axes[st->axes[0] == sax] : -1;
      for (int a = 0; a < st->naxes; a++) {
        const Axis *ax = &p->axes[st->axes[a]];
        buf_printf(out, "%*sfor %s < ", in2, "", ax->name);
        poly_str(ax->extent, out);
        buf_puts(out, st->axes[a] == par ? ":   # parallel\n" : st->axes[a] == sax ? ":   # in order\n" : ":\n");
        in2 += 2;
      }
      const Slot *os = &p->slots[st->out];
      buf_printf(out, "%*s%s", in2, "", os->name);
      int nsub = kn->nouter + st->naxes;
      if (nsub) {
        buf_putc(out, '[');
        for (int o = 0; o < kn->nouter; o++) buf_printf(out, "%s%s", o ? ", " : "", p->axes[kn->outer[o]].name);
        for (int a = 0; a < st->naxes; a++)
          buf_printf(out, "%s%s", (a || kn->nouter) ? ", " : "", p->axes[st->axes[a]].name);
        buf_putc(out, ']');
      }
      buf_puts(out, " = ");
      kx_print(p, st->expr, out);
      if (os->kind == SLOT_LOCAL) buf_puts(out, "   # per row");
      buf_putc(out, '\n');
    }
  }
}
