/* toplevel.c -- evaluating top-level statements: literals, names, calls of built-ins and of
 * session functions, and arithmetic and index notation over concrete tensors, which become
 * anonymous functions checked and lowered like any other (so one checker and one evaluator
 * serve both).  The two straight pipelines live here: top_define (check, lower and fuse a
 * definition, with a hook after each stage) and a call (top_call binds the sizes and checks
 * shapes and facts, run_program chooses a back end from backend.c's table and falls back).
 */
#include "config.h"
#include "session_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- evaluation of top-level expressions ---- */

/* An integer from a top-level expression (a dimension in a type, a seed, a size argument). */
bool top_eval_int(Session *s, Expr *e, int64_t *out) {
  switch (e->kind) {
  case EX_NUM:
    if (e->is_int) {
      *out = e->ival;
      return true;
    }
    break;
  case EX_NAME: {
    Binding *b = state_find_var(s, e->name);
    if (!b) {
      state_undefined(s, e->span, E_UNDEFINED, e->name);
      return false;
    }
    if (b->v.kind == VAL_TENSOR && b->v.t->rank == 0 && elem_is_int(b->v.t->elem)) {
      *out = tensor_get_i64(b->v.t, 0);
      return true;
    }
    break;
  }
  case EX_UNARY:
    if (e->op == OP_NEG && top_eval_int(s, e->args[0], out)) {
      *out = (int64_t)(0 - (uint64_t)*out);
      return true;
    }
    if (e->op == OP_NEG) return false;
    break;
  case EX_BINARY: {
    int64_t a, b;
    if (e->op > OP_MOD) break;
    if (!top_eval_int(s, e->args[0], &a) || !top_eval_int(s, e->args[1], &b)) return false;
    bool ovf = false;
    switch (e->op) {
    case OP_ADD: ovf = __builtin_add_overflow(a, b, out); break;
    case OP_SUB: ovf = __builtin_sub_overflow(a, b, out); break;
    case OP_MUL: ovf = __builtin_mul_overflow(a, b, out); break;
    default:
      if (b == 0) {
        state_error(s, e->span, E_BUILTIN, "division by zero in a size");
        return false;
      }
      if (b == -1) { *out = e->op == OP_DIV ? -a : 0; return true; }
      *out = a / b;
      if (e->op == OP_DIV) { if ((a % b) && ((a < 0) != (b < 0))) (*out)--; }
      else { *out = a % b; if (*out && ((*out < 0) != (b < 0))) *out += b; }
    }
    if (ovf) {
      state_error(s, e->span, E_BUILTIN, "integer overflow in a size");
      return false;
    }
    return true;
  }
  default:
    break;
  }
  Buf b = {0};
  parse_print_expr(e, &b);
  state_error(s, e->span, E_BAD_DIM, state_tmp_printf(s, "'%s'", b.s));
  buf_free(&b);
  return false;
}

/* A type with concrete dimensions, such as f32[N, 64]. */
static bool eval_type(Session *s, Expr *e, Value *out) {
  if (e->kind != EX_TYPE) {
    Value v = top_eval(s, e);
    if (state_failed(s)) return false;
    if (v.kind == VAL_TYPE) {
      *out = v;
      return true;
    }
    val_free(&v);
    state_error(s, e->span, E_BUILTIN, "expected a type such as f32[128, 64]");
    return false;
  }
  memset(out, 0, sizeof *out);
  out->kind = VAL_TYPE;
  out->elem = e->elem;
  out->rank = e->nargs;
  if (e->nargs > DYN_MAX_RANK) {
    state_error(s, e->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    return false;
  }
  for (int i = 0; i < e->nargs; i++) {
    if (!top_eval_int(s, e->args[i], &out->dims[i])) return false;
    if (out->dims[i] < 0) {
      state_error(s, e->args[i]->span, E_NEG_DIM, i, (long long)out->dims[i]);
      return false;
    }
  }
  return true;
}

Tensor *top_new_tensor(Session *s, Span at, DynElem el, int rank, const int64_t *dims) {
  char msg[256];
  Tensor *t = tensor_new(el, rank, dims, msg, sizeof msg);
  if (!t) state_error(s, at, E_BUILTIN, msg);
  return t;
}

/* Tensor literals: nested lists of numbers, rectangular. */
static bool list_shape(Session *s, Expr *e, int depth, int64_t *dims, int *rank) {
  if (e->kind != EX_LIST) {
    if (depth != *rank && *rank >= 0) {
      state_error(s, e->span, E_BUILTIN, "a tensor literal must be rectangular");
      return false;
    }
    *rank = depth;
    return true;
  }
  if (depth >= DYN_MAX_RANK) {
    state_error(s, e->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    return false;
  }
  if (*rank >= 0 && depth >= *rank) {
    state_error(s, e->span, E_BUILTIN, "a tensor literal must be rectangular");
    return false;
  }
  if (dims[depth] < 0) dims[depth] = e->nargs;
  else if (dims[depth] != e->nargs) {
    state_error(s, e->span, E_BUILTIN, state_tmp_printf(s, "a tensor literal must be rectangular: this row has %d item%s, an earlier one %lld", e->nargs, e->nargs == 1 ? "" : "s", (long long)dims[depth]));
    return false;
  }
  if (e->nargs == 0) {
    if (*rank < 0) *rank = depth + 1;
    return true;
  }
  for (int i = 0; i < e->nargs; i++)
    if (!list_shape(s, e->args[i], depth + 1, dims, rank)) return false;
  return true;
}

static void list_fill(Session *s, Expr *e, Tensor *t, int64_t *pos) {
  if (e->kind == EX_LIST) {
    for (int i = 0; i < e->nargs && !state_failed(s); i++) list_fill(s, e->args[i], t, pos);
    return;
  }
  if (e->kind == EX_NUM) {
    if (elem_is_float(t->elem) || !e->is_int) tensor_set_f64(t, (*pos)++, e->is_int ? (double)e->ival : e->num);
    else tensor_set_i64(t, (*pos)++, e->ival);
    return;
  }
  if (e->kind == EX_BOOL) {
    tensor_set_i64(t, (*pos)++, e->ival);
    return;
  }
  state_error(s, e->span, E_BUILTIN, "a tensor literal holds numbers (or true and false)");
}

static Value eval_list(Session *s, Expr *e) {
  int64_t dims[DYN_MAX_RANK];
  for (int i = 0; i < DYN_MAX_RANK; i++) dims[i] = -1;
  int rank = -1;
  if (!list_shape(s, e, 0, dims, &rank)) return (Value){0};
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) dims[i] = 0;
  DynElem el = e->has_elem ? e->elem : DYN_F32;
  if (!e->has_elem) {
    /* all true/false: bool */
    bool allbool = true;
    Expr *stack[64];
    int sp = 0;
    stack[sp++] = e;
    bool any = false;
    while (sp && allbool) {
      Expr *x = stack[--sp];
      if (x->kind == EX_LIST) {
        for (int i = 0; i < x->nargs && sp < 64; i++) stack[sp++] = x->args[i];
      } else {
        any = true;
        allbool = x->kind == EX_BOOL;
      }
    }
    if (allbool && any) el = DYN_BOOL;
    else if (any) {
      /* true and false only in an all-bool literal */
      sp = 0;
      stack[sp++] = e;
      while (sp) {
        Expr *x = stack[--sp];
        if (x->kind == EX_LIST) {
          for (int i = 0; i < x->nargs && sp < 64; i++) stack[sp++] = x->args[i];
        } else if (x->kind == EX_BOOL) {
          state_error(s, x->span, E_BUILTIN, "a tensor literal holds numbers or booleans, not both");
          return (Value){0};
        }
      }
    }
  }
  Tensor *t = top_new_tensor(s, e->span, el, rank, dims);
  if (!t) return (Value){0};
  int64_t pos = 0;
  list_fill(s, e, t, &pos);
  if (state_failed(s)) {
    tensor_release(t);
    return (Value){0};
  }
  return val_tensor(t);
}

/* ---- anonymous functions: top-level arithmetic and index notation ---- */

static bool is_index_name(const char **names, int n, const char *x) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], x)) return true;
  return false;
}

typedef struct Anon {
  VEC(const char *) idx;          /* index names used in the statement */
  VEC(const char *) params;       /* bindings it reads, in order of first use */
  VEC(Span) spans;
  VEC(Value) temps;               /* values computed first (calls, literals) */
  VEC(const char *) temp_names;
} Anon;

static void collect_idx(Expr *e, Anon *an) {
  if (e->kind == EX_REDUCE)
    for (int i = 0; i < e->nridx; i++) vec_push(an->idx, e->ridx[i]);
  for (int i = 0; i < e->nargs; i++) collect_idx(e->args[i], an);
}

/* The name of a value computed first: its source text, so that messages speak of
 * `softmax(X)` and `[1, 2, 3]`; `_tN` when that is long or already taken. */
static const char *temp_name(Session *s, Anon *an, Expr *e) {
  Buf b = {0};
  parse_print_expr(e, &b);
  bool ok = b.s && b.len <= 40;
  for (int i = 0; ok && i < an->params.n; i++) ok = strcmp(an->params.a[i], b.s) != 0;
  const char *nm = ok ? state_tmp_printf(s, "%s", b.s) : state_tmp_printf(s, "_t%d", an->temps.n);
  buf_free(&b);
  return nm;
}

/* Compute e (a call, a literal, a slice) first and read it as a parameter named by its text. */
static void temp_value(Session *s, Expr *e, Anon *an) {
  /* named before it runs: running may rewrite the expression's arguments in place */
  const char *nm = temp_name(s, an, e);
  Value v = top_eval(s, e);
  if (state_failed(s)) return;
  if (v.kind != VAL_TENSOR) {
    state_error(s, e->span, E_BUILTIN, "this value is not a tensor and cannot be used in arithmetic");
    val_free(&v);
    return;
  }
  vec_push(an->temps, v);
  vec_push(an->temp_names, nm);
  Span sp = e->span;
  memset(e, 0, sizeof *e);
  e->kind = EX_NAME;
  e->name = nm;
  e->span = e->name_span = sp;
  vec_push(an->params, nm);
  vec_push(an->spans, sp);
}


/* The value of a call that a statement indexes or slices at top level, as a tensor: a shape
 * (shape(X)[0], shape(X)[1:]) as an i64 vector of its sizes; another value that is not a
 * tensor (a string, a type, a tuple) is a located error.  A slice of shape(X) dereferenced
 * the missing tensor of the shape value (a crash that make fuzz found). */
static Value call_tensor(Session *s, Expr *call, const char *verb) {
  Value v = top_eval(s, call);
  if (!state_failed(s) && v.kind == VAL_SHAPE) {
    Tensor *t = top_new_tensor(s, call->span, DYN_I64, 1, (int64_t[]){v.rank});
    for (int i = 0; t && i < v.rank; i++) tensor_set_i64(t, i, v.dims[i]);
    val_free(&v);
    v = t ? val_tensor(t) : (Value){0};
  }
  if (state_failed(s)) return (Value){0};
  if (v.kind != VAL_TENSOR) {
    state_error(s, call->span, E_BUILTIN,
                state_tmp_printf(s, "this call's value is not a tensor and cannot be %s", verb));
    val_free(&v);
    return (Value){0};
  }
  return v;
}

/* Evaluate the parts that are not element expressions (calls of functions and built-ins,
 * tensor literals) and replace them by names; collect the bindings read. */
static void prepare(Session *s, Expr *e, Anon *an) {
  if (state_failed(s)) return;
  if ((e->kind == EX_CALL && !op_from_name(e->name, &(OpKind){0})) || e->kind == EX_LIST || expr_is_slice(e)) {
    temp_value(s, e, an);
    return;
  }
  if (e->kind == EX_INDEX && e->base) {
    /* softmax(X)[0, 1]: the call is computed first, then indexed like a binding */
    const char *nm = temp_name(s, an, e->base);
    Value v = call_tensor(s, e->base, "indexed");
    if (state_failed(s)) return;
    vec_push(an->temps, v);
    vec_push(an->temp_names, nm);
    vec_push(an->params, nm);
    vec_push(an->spans, e->base->span);
    e->name = nm;
    e->base = NULL;
    for (int i = 0; i < e->nargs; i++) prepare(s, e->args[i], an);
    return;
  }
  if ((e->kind == EX_NAME || e->kind == EX_INDEX) && !is_index_name(an->idx.a, an->idx.n, e->name)) {
    Binding *b = state_find_var(s, e->name);
    bool seen = false;
    for (int i = 0; i < an->params.n; i++) seen = seen || !strcmp(an->params.a[i], e->name);
    if (b && !seen) {
      if (b->v.kind != VAL_TENSOR) {
        state_error(s, e->span, E_BUILTIN, state_tmp_printf(s, "'%s' is a %s, not a tensor", e->name, b->v.kind == VAL_STR ? "string" : b->v.kind == VAL_SHAPE ? "shape" : "type"));
        return;
      }
      vec_push(an->params, e->name);
      vec_push(an->spans, e->span);
    }
  }
  for (int i = 0; i < e->nargs; i++) prepare(s, e->args[i], an);
  for (int i = 0; i < e->nridx && e->rbound; i++)
    if (e->rbound[i]) prepare(s, e->rbound[i], an);   /* sum[k < N] at top level reads N */
}

/* In the annotation of a top-level definition, a name bound to an integer (N = 128) is
 * that number, as in rand(f32[N, 64]), so that R[i]: f32[N] agrees with the concrete shapes
 * of the tensors the definition reads. */
static void concrete_dim(Session *s, Expr *e) {
  if (e->kind == EX_NAME) {
    Binding *b = state_find_var(s, e->name);
    if (b && b->v.kind == VAL_TENSOR && b->v.t->rank == 0 && b->v.t->elem == DYN_I64) {
      int64_t v = tensor_get_i64(b->v.t, 0);
      e->kind = EX_NUM;
      e->is_int = true;
      e->ival = v;
      e->num = (double)v;
    }
    return;
  }
  for (int i = 0; i < e->nargs; i++) concrete_dim(s, e->args[i]);
}

static Value *anon_value(Session *s, Anon *an, const char *name) {
  for (int i = 0; i < an->temps.n; i++)
    if (!strcmp(an->temp_names.a[i], name)) return &an->temps.a[i];
  Binding *b = state_find_var(s, name);
  return b ? &b->v : NULL;
}

static TypeExpr *concrete_type(Arena *a, const Tensor *t, Span sp) {
  TypeExpr *te = arena_alloc(a, sizeof *te);
  te->kind = TY_TENSOR;
  te->span = sp;
  te->elem = t->elem;
  te->ndims = t->rank;
  te->dims = arena_alloc(a, sizeof(Expr *) * (size_t)(t->rank + 1));
  for (int k = 0; k < t->rank; k++) {
    Expr *d = arena_alloc(a, sizeof *d);
    d->kind = EX_NUM;
    d->is_int = true;
    d->ival = t->shape[k];
    d->num = (double)t->shape[k];
    d->span = sp;
    te->dims[k] = d;
  }
  return te;
}

/* ---- defining a function: the stages, in order ---- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* After each stage, the session's hook (if any) sees the function as the stage left it and
 * the stage's time: what :ir prints is the lowered program it is shown. */
static void stage_done(Session *s, TopStage st, const Func *f, double t0) {
  if (s->stage_hook) s->stage_hook(s->stage_cookie, st, f, now_ms() - t0);
}

Func *top_define(Session *s, FnDecl *d, Arena *a, const SemaEnv *env) {
  /* lexing and parsing were done once for the whole input (session.c), which may hold
   * several definitions and statements: the hook saw them there (TOP_PARSE) */
  double t0 = s->stage_hook ? now_ms() : 0;
  Func *f = sema_function(env, d, a, &s->diags);     /* types, sizes, facts, bounds */
  if (!f) return NULL;
  stage_done(s, TOP_SEMA, f, t0);
  if (s->stage_hook) {
    /* the program as lowered, each statement a kernel, built for the hook alone */
    t0 = now_ms();
    f->code.prog = lower_program(f, s->pc, state_lookup_fn, s, false);
    stage_done(s, TOP_LOWER, f, t0);
    lower_free(f->code.prog);
    f->code.prog = NULL;
  }
  t0 = s->stage_hook ? now_ms() : 0;
  f->code.prog = lower_program(f, s->pc, state_lookup_fn, s, true);   /* lowered and fused */
  stage_done(s, TOP_FUSE, f, t0);
  return f;
}

/* ---- running a call: choose the back end, compile once, launch, fall back ---- */

/* The call's sizes bound to f's program (extents.c), once for every back end: kept in f's
 * Compiled record, so that a loop over one shape binds them once. */
const Extents *top_extents(Func *f, const EvalSizes *sz) {
  if (!f->code.bound) f->code.bound = xcalloc(1, sizeof(Extents));
  extents_bind(f->code.bound, f->code.prog, sz);
  return f->code.bound;
}

/* The inputs in C order for a back end whose code needs them so (the GPU's): a view that is
 * not (a slice with a step, a column range, a caller's strided array through the library)
 * is gathered, counted in s->gathered_bytes.  The CPU's code and the evaluator read every
 * input through its strides and get them as they are.  inputs itself when every one is in
 * C order; NULL after an error at `at`; otherwise n new references, which the caller
 * releases and frees. */
static Tensor **gather_inputs(Session *s, int n, Tensor **inputs, Span at) {
  int copies = 0;
  for (int i = 0; i < n; i++) copies += inputs[i] && !tensor_contiguous(inputs[i]);
  if (!copies) return inputs;
  Tensor **in = xcalloc((size_t)n + 1, sizeof(Tensor *));
  char msg[256];
  for (int i = 0; i < n; i++) {
    if (!inputs[i]) continue;
    if (!tensor_contiguous(inputs[i])) s->gathered_bytes += tensor_numel(inputs[i]) * elem_size(inputs[i]->elem);
    if (!(in[i] = tensor_contiguous_copy(inputs[i], msg, sizeof msg))) {
      state_error(s, at, E_RUNTIME, msg);
      for (int k = 0; k < i; k++) tensor_release(in[k]);
      free(in);
      return NULL;
    }
  }
  return in;
}

/* The back end that runs this call: the target, when it is here and the call is worth
 * compiling; NULL for the evaluator, with the reason in s->instead_why. */
static const Backend *choose(Session *s, Func *f, const Extents *x) {
  const Backend *be = s->target;
  if (be->id == BE_REF) return NULL;
  /* a top-level statement runs once: compiling it pays only for large work */
  if (be->small_on_ref && f->anonymous && !s->compile_all && !s->rerun && extents_work(x) < 1e6) {
    snprintf(s->instead_why, sizeof s->instead_why, "a small top-level statement runs on the reference evaluator");
    return NULL;
  }
  const char *why;
  if (!be->available(s, &why)) {
    snprintf(s->instead_why, sizeof s->instead_why, "%s", why ? why : "");
    return NULL;
  }
  return be;
}

/* Run the prepared checked function on values; report run-time errors. */
static bool run_program(Session *s, Func *f, Tensor **inputs, const EvalSizes *sz, Tensor **outs, Span at) {
  s->interrupt = 0;
  /* a compiled back end's answer: 1 done, 0 it found an error (the evaluator then says
   * exactly what and where), negative: it failed as msg says.  Without one, r stays 0. */
  int r = 0;
  char msg[512];
  /* the sizes are bound once for every back end, the evaluator included, and sizes that do
   * not evaluate are said in the same words whichever runs */
  const Extents *x = top_extents(f, sz);
  const Backend *be = choose(s, f, x);
  if (be) {
    int c = be->compile(s, f, at);
    if (c < 0) return false;
    if (c > 0 && !x->ok) {
      snprintf(msg, sizeof msg, "%s", x->err);
      r = -1;
    } else if (c > 0) {
      int n = f->nparams;
      Tensor **in = be->strided_in ? inputs : gather_inputs(s, n, inputs, at);
      if (!in) return false;
      r = be->run(s, f, in, x, outs, msg, sizeof msg);
      if (in != inputs) {
        for (int i = 0; i < n; i++) tensor_release(in[i]);
        free(in);
      }
    }
  }
  if (r == 1) {
    s->ran_compiled++;
    return true;
  }
  if (r < 0) {
    state_error(s, at, E_RUNTIME, msg);
    return false;
  }
  if (s->target->id != BE_REF) s->ran_instead++;
  Buf err = {0};
  Span esp = {0};
  bool ok = eval_program(f->code.prog, inputs, x, outs, &s->interrupt, &err, &esp);
  if (!ok) {
    Diag *d = state_error(s, esp.src ? esp : at, E_RUNTIME, err.s ? err.s : "run-time error");
    if (esp.src && at.src && !f->anonymous) diag_note(d, at, "while running %s", f->name);
  }
  buf_free(&err);
  return ok;
}

/* ---- anonymous functions, compiled and run ---- */

/* A top-level statement that :time runs again: the function made of it, found by the
 * statement's place in its source (the session keeps every source, so a place names one
 * statement) and its operands' names and types (concrete shapes are part of its types). */
typedef struct TopRun {
  Span at;
  char *key;
  Arena *fa;              /* owns f (sema allocates it there) */
  Func *f;
} TopRun;

enum { MAX_RUNS = 8 };

static void run_free(TopRun *r) {
  func_free(r->f);                 /* and r->fa, f's arena */
  free(r->key);
}

void top_forget_runs(Session *s) {
  for (int i = 0; i < s->nruns; i++) run_free(&s->runs[i]);
  free(s->runs);
  s->runs = NULL;
  s->nruns = 0;
}

static TopRun *find_run(Session *s, Span at, const char *key) {
  for (int i = 0; i < s->nruns; i++) {
    TopRun *r = &s->runs[i];
    if (r->at.src == at.src && r->at.lo == at.lo && r->at.hi == at.hi && !strcmp(r->key, key)) return r;
  }
  return NULL;
}

/* Keep f (with its arena) for the statement at `at`; false when there is no room. */
static bool keep_run(Session *s, Span at, const char *key, Arena *fa, Func *f) {
  if (s->nruns >= MAX_RUNS) return false;
  if (!s->runs) s->runs = xcalloc(MAX_RUNS, sizeof *s->runs);
  f->name = arena_strndup(fa, f->name, strlen(f->name));   /* the statement's tree goes */
  s->runs[s->nruns++] = (TopRun){at, xstrdup(key), fa, f};
  return true;
}

/* Compile `def` (a definition statement over concrete tensors) and run it. */
static bool top_check_facts(Session *s, Func *f, const EvalSizes *sz, Span at);

Value top_eval_def(Session *s, Stmt *def) {
  Anon an = {0};
  Value result = {0};
  for (int i = 0; i < def->nidx; i++) vec_push(an.idx, def->idx[i]);
  collect_idx(def->expr, &an);
  if (def->expr->kind == EX_CALL && top_view_is_form(def->expr)) {
    /* concat(A, f(B), 1) itself: its operands are read or computed first, its dimensions
     * ([N, 4]) and axis stay sizes for the checker's rewrite */
    bool dims = !strcmp(def->expr->name, "reshape");
    for (int i = 0; i < def->expr->nargs; i++) {
      Expr *a = def->expr->args[i];
      if (a->kind == EX_NAME) prepare(s, a, &an);
      else if (dims && i == 1 && a->kind == EX_LIST)
        for (int j = 0; j < a->nargs; j++) prepare(s, a->args[j], &an);
      else if (!(a->kind == EX_NUM && a->is_int)) temp_value(s, a, &an);
    }
  } else {
    prepare(s, def->expr, &an);
  }
  if (def->annot)
    for (int k = 0; k < def->annot->ndims; k++) concrete_dim(s, def->annot->dims[k]);
  Arena *fa = NULL;
  Func *f = NULL;
  Tensor **inputs = NULL;
  const char **sz_names = NULL;
  int64_t *sz_vals = NULL;
  Buf key = {0};
  if (state_failed(s)) goto out;
  fa = arena_new();
  FnDecl *d = arena_alloc(fa, sizeof *d);
  d->name = def->name;
  d->name_span = def->span;
  d->span = def->span;
  d->nparams = an.params.n;
  d->params = arena_alloc(fa, sizeof(Param) * (size_t)(an.params.n + 1));
  inputs = xcalloc((size_t)an.params.n + 1, sizeof(Tensor *));
  /* An integer scalar bound at top level (N = 128) is a size: weak in arithmetic, usable
   * in annotations.  Everything else is a tensor parameter of concrete shape. */
  sz_names = xcalloc((size_t)an.params.n + 1, sizeof(char *));
  sz_vals = xcalloc((size_t)an.params.n + 1, sizeof(int64_t));
  int nsz = 0;
  for (int i = 0; i < an.params.n; i++) {
    Value *v = anon_value(s, &an, an.params.a[i]);
    d->params[i].name = an.params.a[i];
    d->params[i].span = an.spans.a[i];
    if (v->t->rank == 0 && v->t->elem == DYN_I64) {
      TypeExpr *te = arena_alloc(fa, sizeof *te);
      te->kind = TY_SIZE;
      te->span = an.spans.a[i];
      d->params[i].type = te;
      sz_names[nsz] = an.params.a[i];
      sz_vals[nsz++] = tensor_get_i64(v->t, 0);
      continue;
    }
    d->params[i].type = concrete_type(fa, v->t, an.spans.a[i]);
    inputs[i] = v->t;
  }
  if (s->keep_runs) {
    for (int i = 0; i < an.params.n; i++) {
      buf_printf(&key, "%s:", an.params.a[i]);
      if (inputs[i]) tensor_type_str(inputs[i], &key);
      buf_putc(&key, ';');
    }
    TopRun *r = find_run(s, def->span, key.s ? key.s : "");
    if (r) {   /* run again: no checking, lowering or compiling */
      Tensor *outs[1] = {0};
      EvalSizes sz = {sz_names, sz_vals, nsz};
      s->rerun = true;
      if (top_check_facts(s, r->f, &sz, def->span) && run_program(s, r->f, inputs, &sz, outs, def->span))
        result = val_tensor(outs[0]);
      s->rerun = false;
      goto out;
    }
  }
  Stmt *ret = arena_alloc(fa, sizeof *ret);
  ret->kind = ST_RETURN;
  ret->span = def->span;
  ret->names = arena_alloc(fa, sizeof(char *));
  ret->names[0] = def->name;
  ret->name_spans = arena_alloc(fa, sizeof(Span));
  ret->name_spans[0] = def->name_span;
  ret->nnames = 1;
  d->nbody = 2;
  d->body = arena_alloc(fa, 2 * sizeof(Stmt *));
  d->body[0] = def;
  d->body[1] = ret;
  SemaEnv env = state_sema_env(s);
  env.each_var = state_each_var;
  f = top_define(s, d, fa, &env);
  if (!f) goto out;
  f->anonymous = true;
  Tensor *outs[1] = {0};
  EvalSizes sz = {sz_names, sz_vals, nsz};
  if (top_check_facts(s, f, &sz, def->span) && run_program(s, f, inputs, &sz, outs, def->span))
    result = val_tensor(outs[0]);
  if (s->keep_runs && !state_failed(s) && keep_run(s, def->span, key.s ? key.s : "", fa, f)) f = NULL, fa = NULL;
out:
  buf_free(&key);
  if (f) func_free(f);             /* and fa, f's arena */
  else arena_free(fa);
  free(inputs);
  free(sz_names);
  free(sz_vals);
  for (int i = 0; i < an.temps.n; i++) val_free(&an.temps.a[i]);
  vec_free(an.temps);
  vec_free(an.temp_names);
  vec_free(an.idx);
  vec_free(an.params);
  vec_free(an.spans);
  return result;
}

Value top_eval_anon(Session *s, Expr *e, const char *name) {
  Stmt *st = arena_alloc(s->tmp, sizeof *st);
  st->kind = ST_DEF;
  st->span = e->span;
  st->name = name ? name : "_";
  st->name_span = e->span;
  st->expr = e;
  return top_eval_def(s, st);
}

/* ---- calls, and the value of an expression ---- */

static Value eval_call(Session *s, Expr *e) {
  const Builtin *bi = state_builtin(s, e->name);
  Func *f = state_find_fn(s, e->name);
  if (!bi && !f) {
    OpKind op;
    if (op_from_name(e->name, &op)) return top_eval_anon(s, e, NULL);
    state_undefined(s, e->name_span, E_UNDEFINED_FN, e->name);
    return (Value){0};
  }
  int n = e->nargs;
  if (bi && (n < bi->min || n > bi->max)) {
    if (bi->min == bi->max) state_error(s, e->span, E_ARG_COUNT, bi->name, bi->min, bi->min == 1 ? "" : "s", n);
    else state_error(s, e->span, E_BUILTIN, state_tmp_printf(s, "'%s' takes %d to %d arguments but is given %d", bi->name, bi->min, bi->max, n));
    return (Value){0};
  }
  if (bi && bi->raw) return bi->fn(s, e, NULL);
  Value *args = xcalloc((size_t)n + 1, sizeof(Value));
  Value r = {0};
  for (int i = 0; i < n && !state_failed(s); i++) {
    if (bi && bi->raw_type && i == 0) eval_type(s, e->args[i], &args[i]);
    else args[i] = top_eval(s, e->args[i]);
  }
  if (!state_failed(s)) r = bi ? bi->fn(s, e, args) : top_call(s, f, e, args);
  for (int i = 0; i < n; i++) val_free(&args[i]);
  free(args);
  return r;
}

/* Check f's facts for the sizes in sz: its where facts, and what its views need (Fact.what).
 * False after reporting the first that does not hold, at `at`. */
static bool top_check_facts(Session *s, Func *f, const EvalSizes *sz, Span at) {
  for (int i = 0; i < f->nfacts; i++) {
    Fact *ft = &f->facts[i];
    int64_t l, rr;
    const char *why = NULL;
    bool ok = poly_eval(ft->lhs, eval_size_lookup, (void *)sz, &l, &why) &&
              poly_eval(ft->rhs, eval_size_lookup, (void *)sz, &rr, &why);
    if (ok && fact_holds(ft, l, rr)) continue;
    Buf fb = {0}, vb = {0};
    poly_str(ft->lhs, &fb);
    buf_printf(&fb, " %s ", cmp_name(ft->cmp));
    poly_str(ft->rhs, &fb);
    const char *vars[16];
    int nv = poly_vars(ft->lhs, vars, 16);
    if (ft->what) nv += poly_vars(ft->rhs, vars + nv, 16 - nv);   /* a view's: both sides */
    for (int j = 0; j < nv; j++) {
      bool seen = false;
      for (int k = 0; k < j; k++) seen = seen || !strcmp(vars[k], vars[j]);
      int64_t x = 0;
      if (seen || !eval_size_lookup((void *)sz, vars[j], &x)) continue;
      buf_printf(&vb, "%s%s is %lld", vb.len ? ", " : "", vars[j], (long long)x);
    }
    Diag *d;
    if (ft->what) {
      d = state_error(s, at, E_VIEW_CHECK, f->anonymous ? "" : state_tmp_printf(s, "%s: ", f->name), ft->what, fb.s, vb.s ? vb.s : "it is false");
      diag_note(d, ft->span, "%s is here", ft->what);
    } else {
      d = state_error(s, at, E_FACT_FAILS, f->name, fb.s, vb.s ? vb.s : "it is false");
      diag_note(d, ft->span, "the fact is stated here");
    }
    buf_free(&fb);
    buf_free(&vb);
    return false;
  }
  return true;
}

/* Bind f's sizes from the arguments, check the shapes and the facts, run it. */
Value top_call(Session *s, Func *f, Expr *call, Value *args) {
  if (call->nargs != f->nparams) {
    Diag *d = state_error(s, call->span, E_ARG_COUNT, f->name, f->nparams, f->nparams == 1 ? "" : "s", call->nargs);
    Buf b = {0};
    func_signature(f, &b);
    diag_note(d, f->span, "%s", b.s);
    buf_free(&b);
    return (Value){0};
  }
  int nsz = f->nsizes;
  /* the tables of a call live on the stack when small: a small call is all fixed cost */
  enum { SMALL = 16 };
  const char *names_s[SMALL];
  int64_t vals_s[SMALL];
  Tensor *inputs_s[SMALL], *outs_s[SMALL];
  const char **names = nsz < SMALL ? names_s : xcalloc((size_t)nsz + 1, sizeof(char *));
  int64_t *vals = nsz < SMALL ? vals_s : xcalloc((size_t)nsz + 1, sizeof(int64_t));
  Tensor **inputs = f->nparams < SMALL ? inputs_s : xcalloc((size_t)f->nparams + 1, sizeof(Tensor *));
  for (int i = 0; i < f->nparams; i++) inputs[i] = NULL;
  Value r = val_tensor(NULL);
  r.kind = VAL_NONE;
  for (int i = 0; i < f->nparams; i++) {
    FnParam *p = &f->params[i];
    Value *a = &args[i];
    if (p->is_size) {
      if (a->kind != VAL_TENSOR || a->t->rank != 0 || !elem_is_int(a->t->elem)) {
        state_error(s, call->args[i]->span, E_ARG_KIND, i + 1, f->name, "an integer (a size)", "another kind of value");
        goto out;
      }
      continue;
    }
    if (a->kind != VAL_TENSOR) {
      state_error(s, call->args[i]->span, E_ARG_KIND, i + 1, f->name, "a tensor", "another kind of value");
      goto out;
    }
    if (a->t->rank == 0 && p->type.rank == 0 && a->t->elem != p->type.elem && call->args[i]->kind == EX_NUM &&
        (elem_is_float(p->type.elem) || call->args[i]->is_int)) {
      /* a number written in the call takes the parameter's type, as literals do */
      Tensor *c = tensor_new(p->type.elem, 0, NULL, NULL, 0);
      if (elem_is_float(p->type.elem)) tensor_set_f64(c, 0, call->args[i]->is_int ? (double)call->args[i]->ival : call->args[i]->num);
      else tensor_set_i64(c, 0, call->args[i]->ival);
      tensor_release(a->t);
      a->t = c;
    }
    if (a->t->rank != p->type.rank || a->t->elem != p->type.elem) {
      Buf pb = {0};
      type_str(&p->type, &pb);
      Diag *d = state_error(s, call->args[i]->span, E_ARG_TYPE, f->name, p->name, state_tmp_printf(s, "%s", pb.s), state_ttype(s, a->t));
      diag_note(d, p->span, "parameter %s of %s is declared here", p->name, f->name);
      buf_free(&pb);
      goto out;
    }
    inputs[i] = a->t;
  }
  for (int v = 0; v < nsz; v++) {
    SizeVar *sv = &f->sizes[v];
    names[v] = sv->name;
    vals[v] = sv->dim < 0 ? tensor_get_i64(args[sv->param].t, 0) : args[sv->param].t->shape[sv->dim];
    if (sv->dim < 0 && vals[v] < 0) {
      state_error(s, call->args[sv->param]->span, E_BUILTIN, state_tmp_printf(s, "%s: the size %s cannot be negative (it is %lld)", f->name, sv->name, (long long)vals[v]));
      goto out;
    }
  }
  EvalSizes sz = {names, vals, nsz};
  s->last_fn = f;
  s->last_fn_calls++;
  s->last_n = nsz < 64 ? nsz : 64;
  for (int v = 0; v < s->last_n; v++) {
    s->last_names[v] = names[v];
    s->last_vals[v] = vals[v];
  }
  /* The checks below read only the arguments' shapes and size values: a call with the same
   * ones as the last call that passed them skips them (a loop over one shape). */
  enum { KEY = (int)(sizeof f->checked / sizeof f->checked[0]) };
  int64_t key[KEY];
  int nkey = 0;
  bool same = true;           /* compared as built (a plain copy loop became a `rep movs`) */
  for (int i = 0; i < f->nparams && nkey >= 0; i++) {
    int n = f->params[i].is_size ? 1 : args[i].t->rank;
    if (nkey + n > KEY) {
      nkey = -1;
      break;
    }
    for (int k = 0; k < n; k++, nkey++) {
      key[nkey] = f->params[i].is_size ? tensor_get_i64(args[i].t, 0) : args[i].t->shape[k];
      same = same && nkey < f->nchecked && f->checked[nkey] == key[nkey];
    }
  }
  if (nkey > 0 && f->nchecked == nkey && same) goto run;
  /* every dimension: a lone variable must agree with its binding, a compound one evaluate */
  for (int i = 0; i < f->nparams; i++) {
    FnParam *p = &f->params[i];
    if (p->is_size) continue;
    for (int k = 0; k < p->type.rank; k++) {
      int64_t got = args[i].t->shape[k];
      const char *var = poly_as_var(p->type.dims[k]);
      if (var) {
        int v = 0;
        while (v < nsz && names[v] != var) v++;
        if (v == nsz)
          for (v = 0; v < nsz && strcmp(names[v], var); v++) {}
        if (vals[v] == got) continue;
        SizeVar *sv = &f->sizes[v];
        Diag *d = state_error(s, call->span, E_SIZE_MISMATCH,
                        state_tmp_printf(s, "%s: %s is %lld from %s (%s) but %lld from %s (%s)", f->name, var,
                                   (long long)vals[v], f->params[sv->param].name, state_ttype(s, args[sv->param].t),
                                   (long long)got, p->name, state_ttype(s, args[i].t)));
        if (sv->dim >= 0) diag_note(d, sv->span, "%s is bound by parameter %s of %s", var, f->params[sv->param].name, f->name);
        else diag_note(d, sv->span, "%s is the size parameter of %s", var, f->name);
        goto out;
      }
    }
  }
  for (int i = 0; i < f->nparams; i++) {
    FnParam *p = &f->params[i];
    if (p->is_size) continue;
    for (int k = 0; k < p->type.rank; k++) {
      if (poly_as_var(p->type.dims[k])) continue;
      int64_t want;
      const char *why = NULL;
      if (!poly_eval(p->type.dims[k], eval_size_lookup, &sz, &want, &why)) {
        Buf pb = {0};
        poly_str(p->type.dims[k], &pb);
        state_error(s, call->span, E_SIZE_MISMATCH, state_tmp_printf(s, "%s: cannot evaluate dimension %d of %s, %s: %s", f->name, k, p->name, pb.s, why ? why : "unbound"));
        buf_free(&pb);
        goto out;
      }
      int64_t got = args[i].t->shape[k];
      if (want != got) {
        Buf pb = {0};
        poly_str(p->type.dims[k], &pb);
        Diag *d = state_error(s, call->span, E_SIZE_MISMATCH,
                        state_tmp_printf(s, "%s: dimension %d of %s must be %s = %lld but it is %lld (%s)", f->name, k,
                                   p->name, pb.s, (long long)want, (long long)got, state_ttype(s, args[i].t)));
        diag_note(d, p->dim_span[k], "%s is declared %s", p->name, pb.s);
        buf_free(&pb);
        goto out;
      }
    }
  }
  if (!top_check_facts(s, f, &sz, call->span)) goto out;
  if (nkey > 0) {
    memcpy(f->checked, key, sizeof(int64_t) * (size_t)nkey);
    f->nchecked = nkey;
  }
  func_note_shape(f, vals, nsz);     /* a new shape, or one met before the last */
run: {
    Tensor **outs = f->nrets < SMALL ? outs_s : xcalloc((size_t)f->nrets + 1, sizeof(Tensor *));
    for (int i = 0; i < f->nrets; i++) outs[i] = NULL;
    if (run_program(s, f, inputs, &sz, outs, call->span)) {
      if (f->nrets == 1) {
        r = val_tensor(outs[0]);
      } else {
        r.kind = VAL_TUPLE;
        r.n = f->nrets;
        r.items = xcalloc((size_t)f->nrets, sizeof(Value));
        for (int i = 0; i < f->nrets; i++) r.items[i] = val_tensor(outs[i]);
      }
    }
    if (outs != outs_s) free(outs);
  }
out:
  if (names != names_s) free(names);
  if (vals != vals_s) free(vals);
  if (inputs != inputs_s) free(inputs);
  return r;
}

Value top_eval(Session *s, Expr *e) {
  if (state_failed(s)) return (Value){0};
  switch (e->kind) {
  case EX_NUM: {
    Tensor *t = tensor_new(e->is_int ? DYN_I64 : DYN_F32, 0, NULL, NULL, 0);
    if (e->is_int) tensor_set_i64(t, 0, e->ival);
    else tensor_set_f64(t, 0, e->num);
    return val_tensor(t);
  }
  case EX_BOOL: {
    Tensor *t = tensor_new(DYN_BOOL, 0, NULL, NULL, 0);
    tensor_set_i64(t, 0, e->ival);
    return val_tensor(t);
  }
  case EX_STR:
    return (Value){.kind = VAL_STR, .s = xstrdup(e->name)};
  case EX_NAME: {
    Binding *b = state_find_var(s, e->name);
    if (b) return val_copy(&b->v);
    if (state_find_fn(s, e->name) || state_builtin(s, e->name)) {
      state_error(s, e->span, E_BUILTIN, state_tmp_printf(s, "'%s' is a function: call it, as %s(...), or see its type with :type %s", e->name, e->name, e->name));
      return (Value){0};
    }
    state_undefined(s, e->span, E_UNDEFINED, e->name);
    return (Value){0};
  }
  case EX_LIST:
    return eval_list(s, e);
  case EX_TYPE: {
    Value v;
    return eval_type(s, e, &v) ? v : (Value){0};
  }
  case EX_CALL:
    return eval_call(s, e);
  case EX_INDEX:
    if (expr_is_slice(e)) return top_view_slice(s, e);
    return top_eval_anon(s, e, NULL);
  default:
    return top_eval_anon(s, e, NULL);
  }
}

/* ---- views of tensor values: slices, reshape, concat and stack ----
 *
 * A slice of a value (X[1:3, :, ::2]) is a tensor_view of its buffer: new shape, strides and
 * offset, no copy; reshape of a contiguous value is one too.  concat, stack and reshape of a
 * strided view compute a new tensor through an anonymous function, which the checker
 * rewrites into index notation exactly as it does these views inside functions (sema.c), so
 * one rewrite serves both and every back end runs it.  (They evaluate their operands with
 * top_eval, and top_eval evaluates a slice with them: one module.)
 */

bool top_view_is_form(const Expr *e) {
  return expr_is_slice(e) ||
         (e->kind == EX_CALL && (!strcmp(e->name, "reshape") || !strcmp(e->name, "concat") || !strcmp(e->name, "stack")));
}

/* The tensor a view reads: a binding or a call's value (softmax(X)[0:2]).  VAL_NONE after
 * an error. */
static Value view_base(Session *s, Expr *e) {
  if (e->kind == EX_INDEX && e->base) return call_tensor(s, e->base, "sliced");
  Expr nm = *e;
  nm.kind = EX_NAME;
  nm.span = e->kind == EX_INDEX ? e->name_span : e->span;
  nm.nargs = 0;
  Value v = top_eval(s, &nm);
  if (!state_failed(s) && v.kind != VAL_TENSOR) {
    state_error(s, nm.span, E_BUILTIN, state_tmp_printf(s, "'%s' is not a tensor and cannot be sliced", e->name));
    val_free(&v);
    return (Value){0};
  }
  return v;
}

/* lo <= hi (lt: lo < hi), or a located error naming the view and where the numbers come
 * from, worded as the checker words it inside functions. */
static bool view_cmp(Session *s, Span at, const char *what, int64_t lo, bool lt, int64_t hi, const char *detail) {
  if (lt ? lo < hi : lo <= hi) return true;
  state_error(s, at, E_VIEW_BOUNDS, what, state_tmp_printf(s, "%lld %s %lld", (long long)lo, lt ? "<" : "<=", (long long)hi), detail);
  return false;
}

static bool view_le(Session *s, Span at, const char *what, int64_t lo, int64_t hi, const char *detail) {
  return view_cmp(s, at, what, lo, false, hi, detail);
}

Value top_view_slice(Session *s, Expr *e) {
  Value v = view_base(s, e);
  if (state_failed(s)) return (Value){0};
  Tensor *t = v.t;
  Buf w = {0};
  parse_print_expr(e, &w);
  const char *what = state_tmp_printf(s, "the slice %s", w.s);
  const char *xname = e->base ? "the value" : e->name;
  buf_free(&w);
  if (e->nargs != t->rank) {
    state_error(s, e->span, E_RANK, e->base ? "the value" : e->name, t->rank, t->rank == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "" : "s");
    val_free(&v);
    return (Value){0};
  }
  int64_t shape[DYN_MAX_RANK], strides[DYN_MAX_RANK], off = t->offset;
  int n = 0;
  for (int k = 0; k < t->rank; k++) {
    Expr *a = e->args[k];
    int64_t dim = t->shape[k];
    const char *detail = state_tmp_printf(s, "dimension %d of %s is %lld", k, xname, (long long)dim);
    int64_t part[3] = {0, dim, 1};
    bool ok = true;
    if (a->kind != EX_SLICE) {               /* a fixed subscript drops the dimension */
      ok = top_eval_int(s, a, &part[0]) && view_le(s, a->span, what, 0, part[0], detail) &&
           view_cmp(s, a->span, what, part[0], true, dim, detail);
      off += ok ? part[0] * t->strides[k] : 0;
    } else {
      for (int j = 0; j < 3 && ok; j++)
        if (slice_part(a, j)) ok = top_eval_int(s, slice_part(a, j), &part[j]);
      Span at0 = slice_part(a, 0) ? slice_part(a, 0)->span : a->span;
      Span at1 = slice_part(a, 1) ? slice_part(a, 1)->span : a->span;
      Span at2 = slice_part(a, 2) ? slice_part(a, 2)->span : a->span;
      ok = ok && view_le(s, at0, what, 0, part[0], detail) && view_le(s, a->span, what, part[0], part[1], "a slice starts at most where it stops") &&
           view_le(s, at1, what, part[1], dim, detail) && view_le(s, at2, what, 1, part[2], "a step is at least 1");
      if (ok) {
        shape[n] = (part[1] - part[0] + part[2] - 1) / part[2];
        strides[n++] = t->strides[k] * part[2];
        off += part[0] * t->strides[k];
      }
    }
    if (!ok) {
      val_free(&v);
      return (Value){0};
    }
  }
  Tensor *r = tensor_view(t, n, shape, strides, off);
  val_free(&v);
  return val_tensor(r);
}

Value top_view_reshape(Session *s, Expr *call, Value *args) {
  (void)args;
  if (call->nargs != 2 || call->args[1]->kind != EX_LIST) {
    state_error(s, call->span, E_VIEW_ARG, "reshape", "write reshape(X, [D1, D2, ...]) with the new dimensions as a list of sizes");
    return (Value){0};
  }
  Expr *x = call->args[0], *list = call->args[1];
  Value v = top_eval(s, x);
  if (state_failed(s)) return (Value){0};
  if (v.kind != VAL_TENSOR) {
    state_error(s, x->span, E_ARG_KIND, 1, "reshape", "a tensor", "another kind of value");
    val_free(&v);
    return (Value){0};
  }
  if (list->nargs > DYN_MAX_RANK) {
    state_error(s, list->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    val_free(&v);
    return (Value){0};
  }
  int64_t shape[DYN_MAX_RANK], strides[DYN_MAX_RANK], n = 1;
  bool ok = true;
  for (int k = 0; k < list->nargs && ok; k++) {
    ok = top_eval_int(s, list->args[k], &shape[k]);
    if (ok && shape[k] < 0) {
      state_error(s, list->args[k]->span, E_NEG_DIM, k, (long long)shape[k]);
      ok = false;
    }
    if (ok && !size_mul_ok(n, shape[k], &n)) n = -1;
  }
  if (ok && n != tensor_numel(v.t)) {
    Buf b = {0};
    parse_print_expr(call, &b);
    state_error(s, call->span, E_VIEW_BOUNDS, b.s,
                  state_tmp_printf(s, "%lld == %s", (long long)tensor_numel(v.t), n < 0 ? "more than 2^63" : state_tmp_printf(s, "%lld", (long long)n)),
                  state_tmp_printf(s, "%s is %s", x->kind == EX_NAME ? x->name : "its argument", state_ttype(s, v.t)));
    buf_free(&b);
    ok = false;
  }
  if (!ok) {
    val_free(&v);
    return (Value){0};
  }
  if (!tensor_contiguous(v.t)) {      /* a strided view: gathered by an anonymous function */
    val_free(&v);
    return top_eval_anon(s, call, NULL);
  }
  int64_t st = 1;
  for (int k = list->nargs - 1; k >= 0; k--) {
    strides[k] = st;
    st *= shape[k] ? shape[k] : 1;
  }
  Tensor *r = tensor_view(v.t, list->nargs, shape, strides, v.t->offset);
  val_free(&v);
  return val_tensor(r);
}

Value top_view_concat(Session *s, Expr *call, Value *args) {
  (void)args;
  return top_eval_anon(s, call, NULL);
}

/* ---- calls from C (session_call, session_predict) ---- */

bool top_call_tensors(Session *s, const char *name, Tensor **args, int nargs, Tensor **outs, int maxouts, Buf *err) {
  Func *f = state_find_fn(s, name);
  if (!f) {
    buf_printf(err, "no function named '%s'", name);
    return false;
  }
  /* one arena for every call, emptied rather than freed: a small call costs about a
   * microsecond, and a fresh arena's malloc and free were a fifth of it */
  if (!s->call_tmp) s->call_tmp = arena_new();
  Arena *a = s->call_tmp;
  arena_reset(a);
  Arena *saved = s->tmp;
  s->tmp = a;
  /* The call as an expression, for call_fn and its messages: every argument is the same
   * placeholder name, so one node serves them all and nothing is built per call. */
  enum { SMALL = 8 };
  static const Expr argument = {.kind = EX_NAME, .name = "argument"};
  Expr *argv_s[SMALL];
  Value vals_s[SMALL];
  Expr **argv = nargs <= SMALL ? argv_s : arena_alloc(a, sizeof(Expr *) * (size_t)nargs);
  Value *vals = nargs <= SMALL ? vals_s : arena_alloc(a, sizeof(Value) * (size_t)nargs);
  Expr call;                 /* the fields call_fn reads; zeroing all of an Expr cost more */
  call.kind = EX_CALL;
  call.span = (Span){0};
  call.name = f->name;
  call.nargs = nargs;
  call.args = argv;
  for (int i = 0; i < nargs; i++) {
    argv[i] = (Expr *)&argument;
    vals[i] = val_tensor(args[i]);
  }
  Value r = top_call(s, f, &call, vals);
  bool ok = !state_failed(s);
  if (!ok) {
    for (Diag *d = s->diags.head; d; d = d->next) buf_printf(err, "%s%s", err->len ? "; " : "", d->msg);
    if (s->diag_sink) state_emit(s, &s->diags);
    diag_clear(&s->diags);
  } else if (r.kind == VAL_TENSOR && maxouts >= 1) {
    outs[0] = tensor_retain(r.t);
  } else if (r.kind == VAL_TUPLE) {
    for (int i = 0; i < r.n && i < maxouts; i++) outs[i] = tensor_retain(r.items[i].t);
  }
  val_free(&r);                    /* vals are the arena's; the arguments stay the caller's */
  s->tmp = saved;
  return ok;
}

/* The model's time for a call of name on args, what :time prints beside the measured one: the
 * CPU schedule's prediction once the function is compiled for the CPU, else the roofline of
 * its work.  0 when name is unknown or args do not bind its sizes. */
double top_predict(Session *s, const char *name, Tensor **args, int nargs) {
  Func *f = state_find_fn(s, name);
  enum { MAXSZ = 64 };
  if (!f || nargs != f->nparams || f->nsizes > MAXSZ) return 0;
  const char *names[MAXSZ];
  int64_t vals[MAXSZ];
  for (int v = 0; v < f->nsizes; v++) {
    const SizeVar *sv = &f->sizes[v];
    const Tensor *t = args[sv->param];
    if (sv->dim >= t->rank || (sv->dim < 0 && (t->rank != 0 || !elem_is_int(t->elem)))) return 0;
    names[v] = sv->name;
    vals[v] = sv->dim < 0 ? tensor_get_i64(t, 0) : t->shape[sv->dim];
  }
  EvalSizes sz = {names, vals, f->nsizes};
  if (s->target->id == BE_CPU && f->code.cpu) {
    Buf junk = {0};
    double t = cpu_schedule(s->cpu, f->code.cpu, s->pc, top_extents(f, &sz), s->threads, &junk);
    buf_free(&junk);
    return t;
  }
  const Poly *fl, *by;
  int64_t fv = 0, bv = 0;
  const char *why;
  cost_program(f->code.prog, s->pc, &fl, &by);
  poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
  poly_eval(by, eval_size_lookup, &sz, &bv, &why);
  return cost_roofline(&s->hw, s->threads, (double)fv, (double)bv);
}
