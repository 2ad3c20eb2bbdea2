/* session.c -- a session: bindings, functions, options, and running top-level input.
 *
 * A script and a REPL session are one sequence of top-level statements.  Each input is
 * parsed into an arena (one compilation); an input that defines functions keeps its arena
 * alive for the session, since the checked functions point into it.  Top-level arithmetic
 * and index notation over concrete tensors are compiled as anonymous functions whose
 * parameters are the tensors they mention, so one checker and one evaluator serve both.
 * Built-in functions and commands each live in one table below.
 */
#include "config.h"
#include "dyn.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef enum { VAL_NONE, VAL_TENSOR, VAL_STR, VAL_SHAPE, VAL_TYPE, VAL_TUPLE } ValKind;

typedef struct Value {
  ValKind kind;
  Tensor *t;                       /* VAL_TENSOR (owned reference) */
  char *s;                         /* VAL_STR (owned) */
  int rank;                        /* VAL_SHAPE, VAL_TYPE */
  int64_t dims[DYN_MAX_RANK];
  DynElem elem;                    /* VAL_TYPE */
  struct Value *items; int n;      /* VAL_TUPLE (owned) */
} Value;

typedef struct Binding { char *name; Value v; } Binding;

struct Session {
  PolyCtx *pc;
  FILE *out, *err;
  bool interactive;
  VEC(Binding) vars;
  int *var_slot;                   /* open-addressed index of vars by name: 1 + index, 0 free */
  int var_cap;                     /* its size, a power of two over twice vars.n */
  VEC(Func *) fns;                 /* live functions, by name (latest wins) */
  VEC(Func *) retired;             /* replaced functions, kept for programs that inlined them */
  VEC(Source *) sources;
  VEC(Arena *) kept;               /* parse arenas that defined functions */
  VEC(char *) imported;
  int nfns_prelude;
  int repl_inputs;
  volatile int interrupt;
  uint64_t rng[4];
  int threads;
  char target[8];
  HwModel hw;                      /* the CPU model in use: --hw, :hw, else the detected host */
  HwModel host_hw;                 /* the detected host, with its calibrated peak */
  bool peak_measured;              /* hw's peak is dyn --calibrate's, for this hardware */
  bool host_peak_measured;         /* and host_hw's */
  bool hw_foreign;                 /* this CPU cannot run code for hw: statements run on code
                                      for host_hw, and :sched and :code show hw's (view) */
  CpuBackend *cpu;                 /* runs statements; made on first use of the CPU target */
  bool cpu_failed;
  char cpu_why[256];
  CpuBackend *view;                /* hw_foreign: compiles for hw and describes, runs nothing */
  bool view_failed;
  char view_why[256];
  CudaBackend *gpu;                /* made on first use of the GPU target */
  bool gpu_failed;
  char gpu_why[256];
  HwModel gpu_hw;                  /* the GPU model for :code cuda and :sched (:hw NAME of a GPU) */
  bool have_gpu_hw;
  bool gpu_hw_chosen;              /* gpu_hw came from :hw or --hw (not the default H100) */
  CudaMath gpu_math;               /* f32 contractions on the GPU: exact, or tf32/bf16 (:target gpu tf32) */
  Func *last_fn;                   /* the last function called, and its sizes (for :time) */
  unsigned last_fn_calls;
  const char *last_names[64];
  int64_t last_vals[64];
  int last_n;
  Diags diags;
  Arena *tmp;                      /* the arena of the input being run */
  Arena *call_tmp;                 /* session_call's, emptied at the start of each call */
  int found;                       /* where find_fn last found a function */
  bool compile_all;                /* :check: compile even the smallest top-level statement */
  unsigned ran_compiled;           /* calls a compiled back end answered (:check counts them) */
  unsigned ran_instead;            /* calls with target cpu or gpu that the evaluator answered */
  char instead_why[300];           /* why, the last time */
  int depth;                       /* nested :load / import */
  int out_errno;                   /* the first failed write to out (0: none) */
};

/* ---- the standard library, embedded at build time (src/stdlib_embed.c) ---- */
typedef struct { const char *name; const char *text; } StdlibModule;
extern const StdlibModule dyn_stdlib[];

/* ---- values ---- */

static void val_free(Value *v) {
  if (v->kind == VAL_TENSOR) tensor_release(v->t);
  if (v->kind == VAL_STR) free(v->s);
  if (v->kind == VAL_TUPLE) {
    for (int i = 0; i < v->n; i++) val_free(&v->items[i]);
    free(v->items);
  }
  v->kind = VAL_NONE;                /* the rest is read only for its kind (see val_tensor) */
  v->rank = 0;
  v->elem = 0;
  v->t = NULL;
  v->s = NULL;
  v->items = NULL;
  v->n = 0;
}

static Value val_copy(const Value *v) {
  Value c = *v;
  if (v->kind == VAL_TENSOR) tensor_retain(v->t);
  if (v->kind == VAL_STR) c.s = xstrdup(v->s);
  if (v->kind == VAL_TUPLE) {
    c.items = xcalloc((size_t)v->n, sizeof(Value));
    for (int i = 0; i < v->n; i++) c.items[i] = val_copy(&v->items[i]);
  }
  return c;
}

/* Only the fields a tensor value reads are set: zeroing all of a Value (its dims make it
 * 120 bytes) compiles to a `rep stos`, whose start-up cost was a tenth of a small call. */
static Value val_tensor(Tensor *t) {
  Value v;
  v.kind = VAL_TENSOR;
  v.t = t;
  v.s = NULL;
  v.rank = 0;
  v.elem = 0;
  v.items = NULL;
  v.n = 0;
  return v;
}

static void shape_str(int rank, const int64_t *dims, Buf *out) {
  buf_putc(out, '[');
  for (int i = 0; i < rank; i++) buf_printf(out, "%s%lld", i ? ", " : "", (long long)dims[i]);
  buf_putc(out, ']');
}

static void val_type_str(const Value *v, Buf *out) {
  switch (v->kind) {
  case VAL_TENSOR: tensor_type_str(v->t, out); break;
  case VAL_STR: buf_puts(out, "string"); break;
  case VAL_SHAPE: buf_puts(out, "shape"); break;
  case VAL_TYPE: buf_puts(out, "type"); break;
  case VAL_TUPLE:
    buf_putc(out, '(');
    for (int i = 0; i < v->n; i++) {
      if (i) buf_puts(out, ", ");
      val_type_str(&v->items[i], out);
    }
    buf_putc(out, ')');
    break;
  case VAL_NONE: buf_puts(out, "nothing"); break;
  }
}

static void val_format(const Value *v, Buf *out) {
  switch (v->kind) {
  case VAL_TENSOR: tensor_format(v->t, out); break;
  case VAL_STR: buf_puts(out, v->s); break;
  case VAL_SHAPE: shape_str(v->rank, v->dims, out); break;
  case VAL_TYPE:
    buf_puts(out, elem_name(v->elem));
    if (v->rank) shape_str(v->rank, v->dims, out);
    break;
  case VAL_TUPLE:
    for (int i = 0; i < v->n; i++) {
      if (i) buf_putc(out, '\n');
      val_format(&v->items[i], out);
    }
    break;
  case VAL_NONE: break;
  }
}

/* ---- bindings and functions ---- */

/* Bindings are found by a hash of the name (a script of 100,000 bindings took 48 s with a
 * linear search). */
static unsigned name_hash(const char *name) {
  unsigned h = 2166136261u;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 16777619u;
  return h;
}

static int *var_probe(Session *s, const char *name) {
  unsigned mask = (unsigned)s->var_cap - 1;
  for (unsigned i = name_hash(name) & mask;; i = (i + 1) & mask) {
    int *slot = &s->var_slot[i];
    if (!*slot || !strcmp(s->vars.a[*slot - 1].name, name)) return slot;
  }
}

static Binding *find_var(Session *s, const char *name) {
  if (!s->var_cap) return NULL;
  int *slot = var_probe(s, name);
  return *slot ? &s->vars.a[*slot - 1] : NULL;
}

static void bind(Session *s, const char *name, Value v) {
  Binding *b = find_var(s, name);
  if (b) {
    val_free(&b->v);
    b->v = v;
    return;
  }
  Binding nb = {xstrdup(name), v};
  vec_push(s->vars, nb);
  if (2 * s->vars.n > s->var_cap) {
    free(s->var_slot);
    s->var_cap = s->var_cap ? 2 * s->var_cap : 64;
    s->var_slot = xcalloc((size_t)s->var_cap, sizeof(int));
    for (int i = 0; i < s->vars.n - 1; i++) *var_probe(s, s->vars.a[i].name) = i + 1;
  }
  *var_probe(s, name) = s->vars.n;
}

/* Where the function was found last time is tried first (a loop calls one function), then
 * the whole list, first letters first: the prelude is long.  Names are unique (a new
 * definition replaces the old in place). */
static Func *find_fn(Session *s, const char *name) {
  if (s->found < s->fns.n && !strcmp(s->fns.a[s->found]->name, name)) return s->fns.a[s->found];
  for (int i = s->fns.n - 1; i >= 0; i--)
    if (s->fns.a[i]->name[0] == name[0] && !strcmp(s->fns.a[i]->name, name)) {
      s->found = i;
      return s->fns.a[i];
    }
  return NULL;
}

static Func *lookup_fn_cb(void *env, const char *name) { return find_fn(env, name); }

/* ---- errors ---- */

static bool failed(Session *s) { return s->diags.nerrors > 0; }

/* Flush what was printed and remember the first write that failed (a full disk, a closed
 * terminal): a script then stops there (run_stmt), and main reports it once. */
static void out_flush(Session *s) {
  if (fflush(s->out) != 0 && !s->out_errno) s->out_errno = errno ? errno : EIO;
  if (ferror(s->out) && !s->out_errno) s->out_errno = EIO;
}

static Diag *error(Session *s, Span at, DiagId id, ...) {
  va_list ap;
  va_start(ap, id);
  Diag *d = diag_reportv(&s->diags, at, id, ap);
  va_end(ap);
  return d;
}

static const char *tmp_printf(Session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *tmp_printf(Session *s, const char *fmt, ...) {
  Buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  const char *r = arena_strndup(s->tmp, b.s ? b.s : "", b.len);
  buf_free(&b);
  return r;
}

static const char *ttype(Session *s, const Tensor *t) {
  Buf b = {0};
  tensor_type_str(t, &b);
  const char *r = arena_strndup(s->tmp, b.s, b.len);
  buf_free(&b);
  return r;
}

/* ---- random numbers: xoshiro256** seeded by splitmix64 ---- */

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void rng_seed(Session *s, uint64_t seed) {
  for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(Session *s) {
  uint64_t *r = s->rng;
  uint64_t res = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
  r[2] ^= r[0];
  r[3] ^= r[1];
  r[1] ^= r[2];
  r[0] ^= r[3];
  r[2] ^= t;
  r[3] = rotl(r[3], 45);
  return res;
}

static double rng_unit(Session *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* ---- evaluation of top-level expressions ---- */

static Value eval_top(Session *s, Expr *e);
static Value call_fn(Session *s, Func *f, Expr *call, Value *args);

/* An integer from a top-level expression (a dimension in a type, a seed, a size argument). */
static bool eval_int(Session *s, Expr *e, int64_t *out) {
  switch (e->kind) {
  case EX_NUM:
    if (e->is_int) {
      *out = e->ival;
      return true;
    }
    break;
  case EX_NAME: {
    Binding *b = find_var(s, e->name);
    if (!b) {
      error(s, e->span, E_UNDEFINED, e->name);
      return false;
    }
    if (b->v.kind == VAL_TENSOR && b->v.t->rank == 0 && elem_is_int(b->v.t->elem)) {
      *out = tensor_get_i64(b->v.t, 0);
      return true;
    }
    break;
  }
  case EX_UNARY:
    if (e->op == OP_NEG && eval_int(s, e->args[0], out)) {
      *out = (int64_t)(0 - (uint64_t)*out);
      return true;
    }
    if (e->op == OP_NEG) return false;
    break;
  case EX_BINARY: {
    int64_t a, b;
    if (e->op > OP_MOD) break;
    if (!eval_int(s, e->args[0], &a) || !eval_int(s, e->args[1], &b)) return false;
    bool ovf = false;
    switch (e->op) {
    case OP_ADD: ovf = __builtin_add_overflow(a, b, out); break;
    case OP_SUB: ovf = __builtin_sub_overflow(a, b, out); break;
    case OP_MUL: ovf = __builtin_mul_overflow(a, b, out); break;
    default:
      if (b == 0) {
        error(s, e->span, E_BUILTIN, "division by zero in a size");
        return false;
      }
      if (b == -1) { *out = e->op == OP_DIV ? -a : 0; return true; }
      *out = a / b;
      if (e->op == OP_DIV) { if ((a % b) && ((a < 0) != (b < 0))) (*out)--; }
      else { *out = a % b; if (*out && ((*out < 0) != (b < 0))) *out += b; }
    }
    if (ovf) {
      error(s, e->span, E_BUILTIN, "integer overflow in a size");
      return false;
    }
    return true;
  }
  default:
    break;
  }
  Buf b = {0};
  parse_print_expr(e, &b);
  error(s, e->span, E_BAD_DIM, tmp_printf(s, "'%s'", b.s));
  buf_free(&b);
  return false;
}

/* A type with concrete dimensions, such as f32[N, 64]. */
static bool eval_type(Session *s, Expr *e, Value *out) {
  if (e->kind != EX_TYPE) {
    Value v = eval_top(s, e);
    if (failed(s)) return false;
    if (v.kind == VAL_TYPE) {
      *out = v;
      return true;
    }
    val_free(&v);
    error(s, e->span, E_BUILTIN, "expected a type such as f32[128, 64]");
    return false;
  }
  memset(out, 0, sizeof *out);
  out->kind = VAL_TYPE;
  out->elem = e->elem;
  out->rank = e->nargs;
  if (e->nargs > DYN_MAX_RANK) {
    error(s, e->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    return false;
  }
  for (int i = 0; i < e->nargs; i++) {
    if (!eval_int(s, e->args[i], &out->dims[i])) return false;
    if (out->dims[i] < 0) {
      error(s, e->args[i]->span, E_NEG_DIM, i, (long long)out->dims[i]);
      return false;
    }
  }
  return true;
}

static Tensor *new_tensor(Session *s, Span at, DynElem el, int rank, const int64_t *dims) {
  char msg[256];
  Tensor *t = tensor_new(el, rank, dims, msg, sizeof msg);
  if (!t) error(s, at, E_BUILTIN, msg);
  return t;
}

/* Tensor literals: nested lists of numbers, rectangular. */
static bool list_shape(Session *s, Expr *e, int depth, int64_t *dims, int *rank) {
  if (e->kind != EX_LIST) {
    if (depth != *rank && *rank >= 0) {
      error(s, e->span, E_BUILTIN, "a tensor literal must be rectangular");
      return false;
    }
    *rank = depth;
    return true;
  }
  if (depth >= DYN_MAX_RANK) {
    error(s, e->span, E_TOO_MANY_DIMS, DYN_MAX_RANK);
    return false;
  }
  if (*rank >= 0 && depth >= *rank) {
    error(s, e->span, E_BUILTIN, "a tensor literal must be rectangular");
    return false;
  }
  if (dims[depth] < 0) dims[depth] = e->nargs;
  else if (dims[depth] != e->nargs) {
    error(s, e->span, E_BUILTIN, tmp_printf(s, "a tensor literal must be rectangular: this row has %d item%s, an earlier one %lld", e->nargs, e->nargs == 1 ? "" : "s", (long long)dims[depth]));
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
    for (int i = 0; i < e->nargs && !failed(s); i++) list_fill(s, e->args[i], t, pos);
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
  error(s, e->span, E_BUILTIN, "a tensor literal holds numbers (or true and false)");
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
          error(s, x->span, E_BUILTIN, "a tensor literal holds numbers or booleans, not both");
          return (Value){0};
        }
      }
    }
  }
  Tensor *t = new_tensor(s, e->span, el, rank, dims);
  if (!t) return (Value){0};
  int64_t pos = 0;
  list_fill(s, e, t, &pos);
  if (failed(s)) {
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
  const char *nm = ok ? tmp_printf(s, "%s", b.s) : tmp_printf(s, "_t%d", an->temps.n);
  buf_free(&b);
  return nm;
}

/* Evaluate the parts that are not element expressions (calls of functions and built-ins,
 * tensor literals) and replace them by names; collect the bindings read. */
static void prepare(Session *s, Expr *e, Anon *an) {
  if (failed(s)) return;
  if ((e->kind == EX_CALL && !op_from_name(e->name, &(OpKind){0})) || e->kind == EX_LIST) {
    /* named before it runs: running may rewrite the expression's arguments in place */
    const char *nm = temp_name(s, an, e);
    Value v = eval_top(s, e);
    if (failed(s)) return;
    if (v.kind != VAL_TENSOR) {
      error(s, e->span, E_BUILTIN, "this value is not a tensor and cannot be used in arithmetic");
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
    return;
  }
  if (e->kind == EX_INDEX && e->base) {
    /* softmax(X)[0, 1]: the call is computed first, then indexed like a binding */
    const char *nm = temp_name(s, an, e->base);
    Value v = eval_top(s, e->base);
    if (!failed(s) && v.kind == VAL_SHAPE) {   /* shape(X)[0] */
      Tensor *t = new_tensor(s, e->base->span, DYN_I64, 1, (int64_t[]){v.rank});
      for (int i = 0; t && i < v.rank; i++) tensor_set_i64(t, i, v.dims[i]);
      val_free(&v);
      v = t ? val_tensor(t) : (Value){0};
    }
    if (failed(s)) return;
    if (v.kind != VAL_TENSOR) {
      error(s, e->base->span, E_BUILTIN, "this call's value is not a tensor and cannot be indexed");
      val_free(&v);
      return;
    }
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
    Binding *b = find_var(s, e->name);
    bool seen = false;
    for (int i = 0; i < an->params.n; i++) seen = seen || !strcmp(an->params.a[i], e->name);
    if (b && !seen) {
      if (b->v.kind != VAL_TENSOR) {
        error(s, e->span, E_BUILTIN, tmp_printf(s, "'%s' is a %s, not a tensor", e->name, b->v.kind == VAL_STR ? "string" : b->v.kind == VAL_SHAPE ? "shape" : "type"));
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
    Binding *b = find_var(s, e->name);
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
  Binding *b = find_var(s, name);
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

static SemaEnv sema_env(Session *s) { return (SemaEnv){s->pc, lookup_fn_cb, s}; }

/* The CPU back end that runs statements, made on first use: for the model in use, or for
 * the detected host when this CPU cannot run the model's code.  NULL (with s->cpu_why) when
 * it cannot be had. */
static CpuBackend *cpu_backend(Session *s) {
  if (!s->cpu && !s->cpu_failed) {
    s->cpu = cpu_backend_new(s->hw_foreign ? &s->host_hw : &s->hw, s->threads, s->cpu_why, sizeof s->cpu_why);
    s->cpu_failed = !s->cpu;
  }
  return s->cpu;
}

/* The model whose code runs: hw, or the host when hw is for looking only. */
static const HwModel *run_hw(Session *s) { return s->hw_foreign ? &s->host_hw : &s->hw; }

/* The CPU back end that shows the model in use (:sched, :code): the one that runs, or one
 * that compiles for a model this CPU cannot run.  NULL with the reason in *why. */
static CpuBackend *model_backend(Session *s, const char **why) {
  if (!s->hw_foreign) {
    *why = s->cpu_why;
    return cpu_backend(s);
  }
  if (!s->view && !s->view_failed) {
    s->view = cpu_backend_new(&s->hw, s->threads, s->view_why, sizeof s->view_why);
    s->view_failed = !s->view;
  }
  *why = s->view_why;
  return s->view;
}

/* Forget every function's code for the CPU back end (view: the model's), and the back end:
 * they are made again, for the new model, on next use. */
static void drop_cpu_code(Session *s, bool view) {
  VEC(Func *) *lists[2] = {(void *)&s->fns, (void *)&s->retired};
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < lists[l]->n; i++) {
      Func *f = lists[l]->a[i];
      void **code = view ? &f->view_backend : &f->backend;
      cpu_program_free(*code);
      *code = NULL;
    }
  if (view) {
    cpu_backend_free(s->view);
    s->view = NULL;
    s->view_failed = false;
  } else {
    cpu_backend_free(s->cpu);
    s->cpu = NULL;
    s->cpu_failed = false;
  }
}

/* Use hw (a CPU model) from now on.  Code already compiled for another model is dropped and
 * made again on next use.  Returns the sentence saying that statements run on the host's
 * code, when this CPU cannot run hw's, else NULL. */
static bool same_model(const HwModel *a, const HwModel *b) {
  return !strcmp(a->name, b->name) && !strcmp(a->path, b->path) && !strcmp(a->llvm_cpu, b->llvm_cpu) &&
         !strcmp(a->llvm_features, b->llvm_features) && a->cores == b->cores && a->vector_bits == b->vector_bits &&
         a->ghz == b->ghz && a->peak_gflops_f32 == b->peak_gflops_f32;
}

static const char *set_cpu_model(Session *s, const HwModel *hw, bool measured) {
  HwModel ran = *run_hw(s);
  s->hw = *hw;
  s->peak_measured = measured;
  static char note[768];
  char why[256];
  s->hw_foreign = !cpu_runnable(hw, why, sizeof why);
  drop_cpu_code(s, true);
  /* the code that runs is kept while it is made for the same model */
  if (!same_model(&ran, run_hw(s))) drop_cpu_code(s, false);
  if (!s->hw_foreign) return NULL;
  snprintf(note, sizeof note, "%s: statements run on code for this CPU (%s); :sched, :cost and :code show %s", why,
           s->host_hw.desc, hw->name);
  return note;
}

/* The GPU back end, made on first use; NULL (with s->gpu_why) without a driver or device. */
static CudaBackend *gpu_backend(Session *s) {
  if (!s->gpu && !s->gpu_failed) {
    s->gpu = cuda_backend_new(s->have_gpu_hw ? &s->gpu_hw : NULL, s->gpu_why, sizeof s->gpu_why);
    s->gpu_failed = !s->gpu;
    if (s->gpu && !s->have_gpu_hw) {
      s->gpu_hw = *cuda_backend_hw(s->gpu);
      s->have_gpu_hw = true;
    }
  }
  return s->gpu;
}

/* The GPU model code is rendered for: the device's, a GPU loaded with :hw or --hw, else H100. */
static const HwModel *gpu_model(Session *s) {
  if (!s->have_gpu_hw) {
    char msg[256];
    if (hw_load("h100", &s->gpu_hw, msg, sizeof msg)) s->have_gpu_hw = true;
  }
  return s->have_gpu_hw ? &s->gpu_hw : NULL;
}

/* Work of a program at these sizes, in loop iterations (to decide whether compiling a
 * one-off top-level statement pays). */
static double program_work(const Program *p, const EvalSizes *sz) {
  double tot = 0;
  for (int k = 0; k < p->nkernels; k++) {
    const Kernel *kn = &p->kernels[k];
    double iters = 1;
    for (int o = 0; o < kn->nouter; o++) {
      int64_t v = 0;
      const char *why;
      poly_eval(p->axes[kn->outer[o]].extent, eval_size_lookup, (void *)sz, &v, &why);
      iters *= (double)(v > 0 ? v : 1);
    }
    for (int st = 0; st < kn->nstages; st++)
      for (int a = 0; a < kn->stages[st].naxes; a++) {
        int64_t v = 0;
        const char *why;
        poly_eval(p->axes[kn->stages[st].axes[a]].extent, eval_size_lookup, (void *)sz, &v, &why);
        iters *= (double)(v > 0 ? v : 1);
      }
    tot += iters;
  }
  return tot;
}

static bool use_cpu(Session *s, Func *f, const EvalSizes *sz) {
  if (memcmp(s->target, "cpu", 4)) return false;     /* targets are short: one compare */
  /* a top-level statement runs once: compiling it pays only for large work */
  if (f->anonymous && !s->compile_all && program_work(f->prog, sz) < 1e6) {
    snprintf(s->instead_why, sizeof s->instead_why, "a small top-level statement runs on the reference evaluator");
    return false;
  }
  if (!cpu_backend(s)) {
    snprintf(s->instead_why, sizeof s->instead_why, "%s", s->cpu_why);
    return false;
  }
  return true;
}

/* Compile f for the CPU once (on first use); false if it cannot be. */
static bool ensure_compiled(Session *s, Func *f) {
  if (f->backend) return true;
  char msg[512];
  f->backend = cpu_compile(s->cpu, f->prog, msg, sizeof msg);
  if (!f->backend) {
    fprintf(s->err, "dyn: %s: compiling for the CPU failed (%s); the reference evaluator runs it\n", f->name, msg);
    snprintf(s->instead_why, sizeof s->instead_why, "compiling %s for the CPU failed", f->name);
    return false;
  }
  f->compiles++;
  return true;
}

/* Compile f for the model in use (on first use), for :sched and :code: the code that runs,
 * or the model's own when this CPU cannot run it.  Its program, or NULL after an error. */
static CpuProgram *model_program(Session *s, Func *f, CpuBackend *be, Span at) {
  if (!s->hw_foreign) return ensure_compiled(s, f) ? f->backend : NULL;
  if (f->view_backend) return f->view_backend;
  char msg[512];
  f->view_backend = cpu_compile(be, f->prog, msg, sizeof msg);
  if (!f->view_backend) error(s, at, E_COMMAND, tmp_printf(s, "%s: compiling for %s failed: %s", f->name, s->hw.name, msg));
  return f->view_backend;
}

/* Run the prepared checked function on values; report run-time errors. */
static bool run_program(Session *s, Func *f, Tensor **inputs, const EvalSizes *sz, Tensor **outs, Span at) {
  s->interrupt = 0;
  /* a compiled back end's answer: 1 done, 0 it found an error (the evaluator then says
   * exactly what and where), negative: it failed as msg says.  Without one, r stays 0. */
  int r = 0;
  char msg[512];
  if (s->target[0] == 'g' && !strcmp(s->target, "gpu") && gpu_backend(s)) {
    if (!f->gpu_backend) {
      f->gpu_backend = cuda_compile(s->gpu, f->prog, s->gpu_math, msg, sizeof msg);
      if (!f->gpu_backend) {
        error(s, at, E_RUNTIME, tmp_printf(s, "%s: compiling for the GPU failed: %s", f->name, msg));
        return false;
      }
      f->compiles++;
    }
    r = cuda_run(s->gpu, f->gpu_backend, inputs, sz, outs, msg, sizeof msg);
  } else if (use_cpu(s, f, sz) && ensure_compiled(s, f)) {
    r = cpu_run(s->cpu, f->backend, inputs, sz, outs, &s->interrupt, msg, sizeof msg);
  }
  if (r == 1) {
    s->ran_compiled++;
    return true;
  }
  if (r < 0) {
    error(s, at, E_RUNTIME, msg);
    return false;
  }
  if (strcmp(s->target, "ref")) s->ran_instead++;
  Buf err = {0};
  Span esp = {0};
  bool ok = eval_program(f->prog, inputs, sz, outs, &s->interrupt, &err, &esp);
  if (!ok) {
    Diag *d = error(s, esp.src ? esp : at, E_RUNTIME, err.s ? err.s : "run-time error");
    if (esp.src && at.src && !f->anonymous) diag_note(d, at, "while running %s", f->name);
  }
  buf_free(&err);
  return ok;
}

/* Compile `def` (a definition statement over concrete tensors) and run it. */
static Value eval_anon_def(Session *s, Stmt *def) {
  Anon an = {0};
  Value result = {0};
  for (int i = 0; i < def->nidx; i++) vec_push(an.idx, def->idx[i]);
  collect_idx(def->expr, &an);
  prepare(s, def->expr, &an);
  if (def->annot)
    for (int k = 0; k < def->annot->ndims; k++) concrete_dim(s, def->annot->dims[k]);
  Arena *fa = NULL;
  Func *f = NULL;
  Tensor **inputs = NULL;
  const char **sz_names = NULL;
  int64_t *sz_vals = NULL;
  if (failed(s)) goto out;
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
  SemaEnv env = sema_env(s);
  f = sema_function(&env, d, fa, &s->diags);
  if (!f) goto out;
  f->anonymous = true;
  f->prog = lower_function(f, s->pc, lookup_fn_cb, s);
  Tensor *outs[1] = {0};
  EvalSizes sz = {sz_names, sz_vals, nsz};
  if (run_program(s, f, inputs, &sz, outs, def->span)) result = val_tensor(outs[0]);
  free(sz_names);
  free(sz_vals);
  sz_names = NULL;
  sz_vals = NULL;
out:
  if (f) {
    cpu_program_free(f->backend);
    lower_free(f->prog);
  }
  arena_free(fa);
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

static Value eval_anon_expr(Session *s, Expr *e, const char *name) {
  Stmt *st = arena_alloc(s->tmp, sizeof *st);
  st->kind = ST_DEF;
  st->span = e->span;
  st->name = name ? name : "_";
  st->name_span = e->span;
  st->expr = e;
  return eval_anon_def(s, st);
}

/* ---- built-in functions ---- */

typedef Value (*BuiltinFn)(Session *s, Expr *call, Value *args);

static bool want_tensor(Session *s, Expr *call, Value *args, int i) {
  if (args[i].kind == VAL_TENSOR) return true;
  error(s, call->args[i]->span, E_ARG_KIND, i + 1, call->name, "a tensor", "another kind of value");
  return false;
}

static Value bi_fill(Session *s, Expr *call, Value *args, int how) {
  if (args[0].kind != VAL_TYPE) {
    error(s, call->args[0]->span, E_ARG_KIND, 1, call->name, "a type such as f32[128, 64]", "another kind of value");
    return (Value){0};
  }
  double fillv = how;
  if (how == 2) {
    Value *v = &args[1];
    if (v->kind != VAL_TENSOR || v->t->rank != 0) {
      error(s, call->args[1]->span, E_ARG_KIND, 2, "full", "a number", "another kind of value");
      return (Value){0};
    }
    fillv = tensor_get_f64(v->t, 0);
    /* A float literal takes the type it fills (full(f64[2], 0.1) is the f64 0.1), not that
     * of the f32 scalar it evaluates to on its own: read it from the source. */
    const Expr *lit = call->args[1];
    bool neg = lit->kind == EX_UNARY && lit->op == OP_NEG && lit->nargs == 1;
    if (neg) lit = lit->args[0];
    if (lit->kind == EX_NUM && !lit->is_int) fillv = neg ? -lit->num : lit->num;
  }
  Tensor *t = new_tensor(s, call->span, args[0].elem, args[0].rank, args[0].dims);
  if (!t) return (Value){0};
  int64_t n = tensor_numel(t);
  if (how == 2 && elem_is_int(t->elem) && args[1].t && elem_is_int(args[1].t->elem)) {
    int64_t iv = tensor_get_i64(args[1].t, 0);
    for (int64_t i = 0; i < n; i++) tensor_set_i64(t, i, iv);
  } else if (how != 0) {
    for (int64_t i = 0; i < n; i++) tensor_set_f64(t, i, fillv);
  }
  return val_tensor(t);
}

static Value bi_zeros(Session *s, Expr *c, Value *a) { return bi_fill(s, c, a, 0); }
static Value bi_ones(Session *s, Expr *c, Value *a) { return bi_fill(s, c, a, 1); }
static Value bi_full(Session *s, Expr *c, Value *a) { return bi_fill(s, c, a, 2); }

static Value bi_random(Session *s, Expr *call, Value *args, bool normal) {
  if (args[0].kind != VAL_TYPE) {
    error(s, call->args[0]->span, E_ARG_KIND, 1, call->name, "a type such as f32[128, 64]", "another kind of value");
    return (Value){0};
  }
  if (!elem_is_float(args[0].elem)) {
    error(s, call->args[0]->span, E_BUILTIN, tmp_printf(s, "%s makes floats: use f32[...] or f64[...]", call->name));
    return (Value){0};
  }
  Tensor *t = new_tensor(s, call->span, args[0].elem, args[0].rank, args[0].dims);
  if (!t) return (Value){0};
  int64_t n = tensor_numel(t);
  bool f32 = t->elem == DYN_F32;
  for (int64_t i = 0; i < n; i++) {
    double v;
    if (!normal) {
      v = f32 ? (double)(rng_next(s) >> 40) * 0x1.0p-24 : rng_unit(s);   /* never rounds to 1 */
    } else {
      double u1 = 1.0 - rng_unit(s), u2 = rng_unit(s);
      v = sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2);
    }
    tensor_set_f64(t, i, v);
  }
  return val_tensor(t);
}

static Value bi_rand(Session *s, Expr *c, Value *a) { return bi_random(s, c, a, false); }
static Value bi_randn(Session *s, Expr *c, Value *a) { return bi_random(s, c, a, true); }

static Value bi_seed(Session *s, Expr *call, Value *args) {
  if (args[0].kind != VAL_TENSOR || args[0].t->rank != 0 || !elem_is_int(args[0].t->elem)) {
    error(s, call->args[0]->span, E_ARG_KIND, 1, "seed", "an integer", "another kind of value");
    return (Value){0};
  }
  rng_seed(s, (uint64_t)tensor_get_i64(args[0].t, 0));
  return (Value){0};
}

static Value bi_shape(Session *s, Expr *call, Value *args) {
  if (!want_tensor(s, call, args, 0)) return (Value){0};
  Value v = {.kind = VAL_SHAPE, .rank = args[0].t->rank};
  memcpy(v.dims, args[0].t->shape, sizeof(int64_t) * (size_t)v.rank);
  return v;
}

static Value bi_print(Session *s, Expr *call, Value *args) {
  Buf b = {0};
  bool prev_multi = false;
  for (int i = 0; i < call->nargs; i++) {
    Buf one = {0};
    val_format(&args[i], &one);
    bool multi = one.s && strchr(one.s, '\n');
    if (i) buf_putc(&b, multi || prev_multi ? '\n' : ' ');   /* a matrix starts on its own line */
    if (one.s) buf_puts(&b, one.s);
    prev_multi = multi;
    buf_free(&one);
  }
  if (!b.s) buf_puts(&b, "");
  buf_putc(&b, '\n');
  fputs(b.s, s->out);
  out_flush(s);
  buf_free(&b);
  return (Value){0};
}

static Value bi_load(Session *s, Expr *call, Value *args) {
  if (args[0].kind != VAL_STR) {
    error(s, call->args[0]->span, E_ARG_KIND, 1, "load", "a file name in quotes", "another kind of value");
    return (Value){0};
  }
  char msg[512];
  s->interrupt = 0;                  /* Ctrl-C stops the read between chunks */
  Tensor *t = npy_load(args[0].s, &s->interrupt, msg, sizeof msg);
  if (!t) {
    error(s, call->span, E_BUILTIN, msg);
    return (Value){0};
  }
  return val_tensor(t);
}

static Value bi_save(Session *s, Expr *call, Value *args) {
  if (!want_tensor(s, call, args, 0)) return (Value){0};
  if (args[1].kind != VAL_STR) {
    error(s, call->args[1]->span, E_ARG_KIND, 2, "save", "a file name in quotes", "another kind of value");
    return (Value){0};
  }
  char msg[512];
  s->interrupt = 0;                  /* Ctrl-C stops the write; the old file stays */
  if (!npy_save(args[0].t, args[1].s, &s->interrupt, msg, sizeof msg)) error(s, call->span, E_BUILTIN, msg);
  return (Value){0};
}

static Value bi_allclose(Session *s, Expr *call, Value *args) {
  if (!want_tensor(s, call, args, 0) || !want_tensor(s, call, args, 1)) return (Value){0};
  Tensor *a = args[0].t, *b = args[1].t;
  double tol[2] = {1e-5, 1e-8};
  for (int i = 2; i < call->nargs; i++) {
    if (args[i].kind != VAL_TENSOR || args[i].t->rank != 0) {
      error(s, call->args[i]->span, E_ARG_KIND, i + 1, "allclose", "a number", "another kind of value");
      return (Value){0};
    }
    tol[i - 2] = tensor_get_f64(args[i].t, 0);
  }
  if (a->rank != b->rank || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank)) {
    error(s, call->span, E_BUILTIN, tmp_printf(s, "allclose: the shapes differ: %s and %s", ttype(s, a), ttype(s, b)));
    return (Value){0};
  }
  bool ok = true;
  int64_t n = tensor_numel(a);
  for (int64_t i = 0; i < n && ok; i++) {
    double x = tensor_get_f64(a, i), y = tensor_get_f64(b, i);
    if (isnan(x) || isnan(y)) ok = false;
    else if (isinf(x) || isinf(y)) ok = x == y;
    else ok = fabs(x - y) <= tol[1] + tol[0] * fabs(y);
  }
  int64_t none[1] = {0};
  Tensor *t = tensor_new(DYN_BOOL, 0, none, NULL, 0);
  tensor_set_i64(t, 0, ok);
  return val_tensor(t);
}

static const struct Builtin {
  const char *name;
  int min, max;
  BuiltinFn fn;
  bool raw_type;               /* argument 1 is a type, evaluated as one */
  const char *help;
} builtins[] = {
  {"zeros", 1, 1, bi_zeros, true, "zeros(T): a tensor of type T filled with 0"},
  {"ones", 1, 1, bi_ones, true, "ones(T): filled with 1"},
  {"full", 2, 2, bi_full, true, "full(T, v): filled with v"},
  {"rand", 1, 1, bi_rand, true, "rand(T): uniform in [0, 1)"},
  {"randn", 1, 1, bi_randn, true, "randn(T): standard normal"},
  {"seed", 1, 1, bi_seed, false, "seed(n): restart the random numbers"},
  {"shape", 1, 1, bi_shape, false, "shape(X): the dimensions of X"},
  {"print", 0, 64, bi_print, false, "print(X, ...): print values"},
  {"load", 1, 1, bi_load, false, "load(\"x.npy\"): read a NumPy file"},
  {"save", 2, 2, bi_save, false, "save(X, \"x.npy\"): write a NumPy file"},
  {"allclose", 2, 4, bi_allclose, false, "allclose(A, B[, rtol, atol]): equal within tolerances"},
};
#define NBUILTINS (int)(sizeof builtins / sizeof builtins[0])

static const struct Builtin *find_builtin(const char *name) {
  for (int i = 0; i < NBUILTINS; i++)
    if (!strcmp(builtins[i].name, name)) return &builtins[i];
  return NULL;
}

static Value eval_call(Session *s, Expr *e) {
  const struct Builtin *bi = find_builtin(e->name);
  Func *f = find_fn(s, e->name);
  if (!bi && !f) {
    OpKind op;
    if (op_from_name(e->name, &op)) return eval_anon_expr(s, e, NULL);
    error(s, e->name_span, E_UNDEFINED_FN, e->name);
    return (Value){0};
  }
  int n = e->nargs;
  if (bi && (n < bi->min || n > bi->max)) {
    if (bi->min == bi->max) error(s, e->span, E_ARG_COUNT, bi->name, bi->min, bi->min == 1 ? "" : "s", n);
    else error(s, e->span, E_BUILTIN, tmp_printf(s, "'%s' takes %d to %d arguments but is given %d", bi->name, bi->min, bi->max, n));
    return (Value){0};
  }
  Value *args = xcalloc((size_t)n + 1, sizeof(Value));
  Value r = {0};
  for (int i = 0; i < n && !failed(s); i++) {
    if (bi && bi->raw_type && i == 0) eval_type(s, e->args[i], &args[i]);
    else args[i] = eval_top(s, e->args[i]);
  }
  if (!failed(s)) r = bi ? bi->fn(s, e, args) : call_fn(s, f, e, args);
  for (int i = 0; i < n; i++) val_free(&args[i]);
  free(args);
  return r;
}


/* Bind f's sizes from the arguments, check the shapes and the facts, run it. */
static Value call_fn(Session *s, Func *f, Expr *call, Value *args) {
  if (call->nargs != f->nparams) {
    Diag *d = error(s, call->span, E_ARG_COUNT, f->name, f->nparams, f->nparams == 1 ? "" : "s", call->nargs);
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
        error(s, call->args[i]->span, E_ARG_KIND, i + 1, f->name, "an integer (a size)", "another kind of value");
        goto out;
      }
      continue;
    }
    if (a->kind != VAL_TENSOR) {
      error(s, call->args[i]->span, E_ARG_KIND, i + 1, f->name, "a tensor", "another kind of value");
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
      Diag *d = error(s, call->args[i]->span, E_ARG_TYPE, f->name, p->name, tmp_printf(s, "%s", pb.s), ttype(s, a->t));
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
      error(s, call->args[sv->param]->span, E_BUILTIN, tmp_printf(s, "%s: the size %s cannot be negative (it is %lld)", f->name, sv->name, (long long)vals[v]));
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
        Diag *d = error(s, call->span, E_SIZE_MISMATCH,
                        tmp_printf(s, "%s: %s is %lld from %s (%s) but %lld from %s (%s)", f->name, var,
                                   (long long)vals[v], f->params[sv->param].name, ttype(s, args[sv->param].t),
                                   (long long)got, p->name, ttype(s, args[i].t)));
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
        error(s, call->span, E_SIZE_MISMATCH, tmp_printf(s, "%s: cannot evaluate dimension %d of %s, %s: %s", f->name, k, p->name, pb.s, why ? why : "unbound"));
        buf_free(&pb);
        goto out;
      }
      int64_t got = args[i].t->shape[k];
      if (want != got) {
        Buf pb = {0};
        poly_str(p->type.dims[k], &pb);
        Diag *d = error(s, call->span, E_SIZE_MISMATCH,
                        tmp_printf(s, "%s: dimension %d of %s must be %s = %lld but it is %lld (%s)", f->name, k,
                                   p->name, pb.s, (long long)want, (long long)got, ttype(s, args[i].t)));
        diag_note(d, p->dim_span[k], "%s is declared %s", p->name, pb.s);
        buf_free(&pb);
        goto out;
      }
    }
  }
  for (int i = 0; i < f->nfacts; i++) {
    Fact *ft = &f->facts[i];
    int64_t l, rr;
    const char *why = NULL;
    bool ok = poly_eval(ft->lhs, eval_size_lookup, &sz, &l, &why) &&
              poly_eval(ft->rhs, eval_size_lookup, &sz, &rr, &why);
    if (!ok || !fact_holds(ft, l, rr)) {
      Buf fb = {0}, vb = {0};
      poly_str(ft->lhs, &fb);
      buf_printf(&fb, " %s ", cmp_name(ft->cmp));
      poly_str(ft->rhs, &fb);
      const char *vars[16];
      int nv = poly_vars(ft->lhs, vars, 16);
      for (int j = 0; j < nv; j++) {
        int64_t x = 0;
        eval_size_lookup(&sz, vars[j], &x);
        buf_printf(&vb, "%s%s is %lld", j ? ", " : "", vars[j], (long long)x);
      }
      Diag *d = error(s, call->span, E_FACT_FAILS, f->name, fb.s, vb.s ? vb.s : "it is false");
      diag_note(d, ft->span, "the fact is stated here");
      buf_free(&fb);
      buf_free(&vb);
      goto out;
    }
  }
  if (nkey > 0) {
    memcpy(f->checked, key, sizeof(int64_t) * (size_t)nkey);
    f->nchecked = nkey;
  }
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

static Value eval_top(Session *s, Expr *e) {
  if (failed(s)) return (Value){0};
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
    Binding *b = find_var(s, e->name);
    if (b) return val_copy(&b->v);
    if (find_fn(s, e->name) || find_builtin(e->name)) {
      error(s, e->span, E_BUILTIN, tmp_printf(s, "'%s' is a function: call it, as %s(...), or see its type with :type %s", e->name, e->name, e->name));
      return (Value){0};
    }
    error(s, e->span, E_UNDEFINED, e->name);
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
  default:
    return eval_anon_expr(s, e, NULL);
  }
}

/* ---- commands ---- */

typedef RunStatus (*CmdFn)(Session *s, const char *arg, Span at);

static RunStatus cmd_help(Session *s, const char *arg, Span at);

static RunStatus cmd_quit(Session *s, const char *arg, Span at) { return RUN_QUIT; }

static RunStatus run_source(Session *s, Source *src);

/* A script file's bytes, at most FILE_SOURCE_MAX of them: an endless file (/dev/zero, a
 * FIFO that never closes) costs that much and is then refused.  NULL with a message. */
static char *read_script(Session *s, const char *path, size_t *len, char *msg, size_t msglen) {
  char *text;
  int e;
  switch (file_read_all(path, -1, FILE_SOURCE_MAX, false, &s->interrupt, &text, len, &e)) {
  case FILE_OK: return text;
  case FILE_OPEN_FAILED: snprintf(msg, msglen, "cannot open %s: %s", path, strerror(e)); break;
  case FILE_READ_FAILED: snprintf(msg, msglen, "cannot read %s: %s", path, strerror(e)); break;
  case FILE_TOO_LARGE:
    snprintf(msg, msglen, "%s is larger than %zu MiB, the most a script may be", path, FILE_SOURCE_MAX >> 20);
    break;
  case FILE_STOPPED: snprintf(msg, msglen, "%s: interrupted", path); break;
  case FILE_NOT_REGULAR: snprintf(msg, msglen, "%s is not a regular file", path); break;
  }
  return NULL;
}

static Source *add_source(Session *s, const char *name, char *text, size_t len) {
  Source *src = xcalloc(1, sizeof *src);
  src->name = xstrdup(name);
  src->text = text;
  src->len = len;
  vec_push(s->sources, src);
  return src;
}

/* A script from a file or standard input as a source (taking text).  A UTF-8 byte-order
 * mark at its start is dropped, as editors that write one expect; a NUL byte anywhere is an
 * error at that byte and nothing of the script runs: such a file is not text (and a C
 * string of it would end there). */
static Source *script_source(Session *s, const char *name, char *text, size_t len) {
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
    memmove(text, text + 3, len - 3 + 1);
    len -= 3;
  }
  Source *src = add_source(s, name, text, len);
  const char *nul = memchr(text, 0, len);
  if (nul) {
    uint32_t at = (uint32_t)(nul - text);
    error(s, (Span){src, at, at + 1}, E_NUL_BYTE);
    return NULL;
  }
  return src;
}

static RunStatus run_file_in(Session *s, const char *path, Span at) {
  if (s->depth > 16) {
    error(s, at, E_IMPORT, tmp_printf(s, "%s: files load each other too deeply (more than 16 levels)", path));
    return RUN_ERROR;
  }
  char msg[512];
  size_t len;
  char *text = read_script(s, path, &len, msg, sizeof msg);
  if (!text) {
    error(s, at, E_IMPORT, msg);
    return RUN_ERROR;
  }
  /* the outer input's diagnostics come first */
  diag_print_all(&s->diags, s->err);
  diag_clear(&s->diags);
  Source *src = script_source(s, path, text, len);
  if (!src) return RUN_ERROR;
  Arena *saved = s->tmp;
  s->depth++;
  RunStatus r = run_source(s, src);
  s->depth--;
  s->tmp = saved;
  return r == RUN_ERROR ? RUN_ERROR : r;
}

static RunStatus cmd_load(Session *s, const char *arg, Span at) {
  if (!*arg) {
    error(s, at, E_COMMAND, ":load needs a file name");
    return RUN_ERROR;
  }
  return run_file_in(s, arg, at);
}

static void print_line(Session *s, const char *text) {
  fputs(text, s->out);
  fputc('\n', s->out);
  out_flush(s);
}

/* A command's argument as a source of its own, placed where it stands in the command's
 * source (at, the command's span): the last copy of its bytes there, since the command's
 * text ends with it (trimmed), and an earlier one may be the command's name (:time t). */
static Source *arg_source(Session *s, const char *arg, Span at, const char *origin) {
  size_t n = strlen(arg);
  Source *src = add_source(s, at.src ? at.src->name : origin, xstrdup(arg), n);
  if (at.src && n && at.hi <= at.src->len && at.hi - at.lo >= n)
    for (size_t p = at.hi - n + 1; p-- > at.lo;)
      if (!memcmp(at.src->text + p, arg, n)) {
        src->parent = at.src;
        src->base = (uint32_t)p;
        break;
      }
  return src;
}

static Expr *parse_arg_expr(Session *s, const char *arg, Span at) {
  return parse_expression(s->tmp, arg_source(s, arg, at, "<command>"), &s->diags);
}

static RunStatus cmd_type(Session *s, const char *arg, Span at) {
  if (!*arg) {
    error(s, at, E_COMMAND, ":type needs a name or an expression");
    return RUN_ERROR;
  }
  Buf b = {0};
  Func *f = find_fn(s, arg);
  Binding *v = find_var(s, arg);
  if (v) {
    buf_printf(&b, "%s: ", arg);
    val_type_str(&v->v, &b);
  } else if (f) {
    func_signature(f, &b);
  } else if (find_builtin(arg)) {
    buf_puts(&b, find_builtin(arg)->help);
  } else {
    Expr *e = parse_arg_expr(s, arg, at);
    if (!e) return RUN_ERROR;
    Value val = eval_top(s, e);
    if (failed(s)) return RUN_ERROR;
    val_type_str(&val, &b);
    val_free(&val);
  }
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static int cmp_binding(const void *a, const void *b) {
  return strcmp(((const Binding *)a)->name, ((const Binding *)b)->name);
}

static RunStatus cmd_vars(Session *s, const char *arg, Span at) {
  if (!s->vars.n) {
    print_line(s, "(no bindings)");
    return RUN_OK;
  }
  Binding *sorted = xmalloc(sizeof(Binding) * (size_t)s->vars.n);
  memcpy(sorted, s->vars.a, sizeof(Binding) * (size_t)s->vars.n);
  qsort(sorted, (size_t)s->vars.n, sizeof(Binding), cmp_binding);
  int w = 0;
  for (int i = 0; i < s->vars.n; i++) {
    int l = (int)strlen(sorted[i].name);
    if (l > w) w = l;
  }
  Buf b = {0};
  for (int i = 0; i < s->vars.n; i++) {
    buf_printf(&b, "%-*s  ", w, sorted[i].name);
    val_type_str(&sorted[i].v, &b);
    if (i + 1 < s->vars.n) buf_putc(&b, '\n');
  }
  print_line(s, b.s);
  buf_free(&b);
  free(sorted);
  return RUN_OK;
}

/* A function replaced by a new definition or forgotten by :reset can no longer be called,
 * so its compiled code goes (about 28 KB a compile); the function itself stays, for the
 * programs that inlined it. */
static void retire(Session *s, Func *f) {
  cpu_program_free(f->backend);
  cpu_program_free(f->view_backend);
  cuda_program_free(f->gpu_backend);
  f->backend = f->view_backend = f->gpu_backend = NULL;
  if (s->last_fn == f) s->last_fn = NULL;
  vec_push(s->retired, f);
}

static void forget_user_fns(Session *s) {
  while (s->fns.n > s->nfns_prelude) retire(s, s->fns.a[--s->fns.n]);
}

static RunStatus cmd_reset(Session *s, const char *arg, Span at) {
  for (int i = 0; i < s->vars.n; i++) {
    free(s->vars.a[i].name);
    val_free(&s->vars.a[i].v);
  }
  s->vars.n = 0;
  if (s->var_cap) memset(s->var_slot, 0, sizeof(int) * (size_t)s->var_cap);
  forget_user_fns(s);
  print_line(s, "all bindings and user functions forgotten");
  return RUN_OK;
}

static Func *want_fn(Session *s, const char *arg, Span at, const char *cmd) {
  char name[128];
  int n = 0;
  while (arg[n] && !isspace((unsigned char)arg[n]) && n < 127) {
    name[n] = arg[n];
    n++;
  }
  name[n] = 0;
  if (!n) {
    error(s, at, E_COMMAND, tmp_printf(s, "%s needs the name of a function", cmd));
    return NULL;
  }
  Func *f = find_fn(s, name);
  if (!f) error(s, at, E_COMMAND, tmp_printf(s, "%s: no function named '%s'", cmd, name));
  return f;
}

static RunStatus cmd_ir(Session *s, const char *arg, Span at) {
  Func *f = want_fn(s, arg, at, ":ir");
  if (!f) return RUN_ERROR;
  Buf b = {0};
  func_signature(f, &b);
  buf_putc(&b, '\n');
  lower_print(f->prog, &b);
  if (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

/* "NAME DIM=VAL ..." after the function name: the sizes, in session memory of this input. */
static bool parse_sizes(Session *s, const char *arg, Func *f, Span at, EvalSizes *out, bool *given) {
  const char *p = arg + strlen(f->name);
  int cap = 16, n = 0;
  const char **names = arena_alloc(s->tmp, sizeof(char *) * (size_t)cap);
  int64_t *vals = arena_alloc(s->tmp, sizeof(int64_t) * (size_t)cap);
  while (*p) {
    while (isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *nb = p;
    while (*p && *p != '=' && !isspace((unsigned char)*p)) p++;
    if (*p != '=' || p == nb || n == cap) {
      error(s, at, E_COMMAND, "sizes are written NAME=VALUE, such as M=100 N=768");
      return false;
    }
    const char *nm = arena_strndup(s->tmp, nb, (size_t)(p - nb));
    char *end;
    errno = 0;
    long long v = strtoll(p + 1, &end, 10);
    if (end == p + 1 || v < 0 || (*end && !isspace((unsigned char)*end))) {
      error(s, at, E_COMMAND, tmp_printf(s, "the size %s needs a value of 0 or more", nm));
      return false;
    }
    if (errno == ERANGE) {
      error(s, at, E_COMMAND, tmp_printf(s, "the size %s=%.*s does not fit in 64 bits", nm, (int)(end - p - 1), p + 1));
      return false;
    }
    bool known = false;
    for (int i = 0; i < f->nsizes; i++) known = known || !strcmp(f->sizes[i].name, nm);
    if (!known) {
      Buf b = {0};
      for (int i = 0; i < f->nsizes; i++) buf_printf(&b, "%s%s", i ? ", " : "", f->sizes[i].name);
      error(s, at, E_COMMAND, tmp_printf(s, "%s has no size %s (its sizes: %s)", f->name, nm, b.s ? b.s : "none"));
      buf_free(&b);
      return false;
    }
    names[n] = nm;
    vals[n++] = v;
    p = end;
  }
  *given = n > 0;
  if (n && n < f->nsizes) {
    for (int i = 0; i < f->nsizes; i++) {
      bool have = false;
      for (int j = 0; j < n; j++) have = have || !strcmp(names[j], f->sizes[i].name);
      if (!have) {
        error(s, at, E_COMMAND, tmp_printf(s, "give every size of %s: %s is missing", f->name, f->sizes[i].name));
        return false;
      }
    }
  }
  *out = (EvalSizes){names, vals, n};
  /* every tensor of the function must be one that could exist at these sizes */
  const Program *prog = f->prog;
  for (int i = 0; n && prog && i < prog->nslots; i++) {
    const Slot *sl = &prog->slots[i];
    int64_t bytes = elem_size(sl->type.elem), d;
    bool ok = true, zero = false;
    const char *why;
    for (int k = 0; k < sl->type.rank && ok; k++) {
      ok = poly_eval(sl->type.dims[k], eval_size_lookup, out, &d, &why);
      zero = zero || (ok && d == 0);
      ok = ok && (zero || size_mul_ok(bytes, d, &bytes));
    }
    if (!ok && !zero) {
      Buf t = {0};
      type_str(&sl->type, &t);
      error(s, at, E_COMMAND, tmp_printf(s, "at these sizes %s (%s) would not fit in memory: its size does not fit in 64 bits",
                                         sl->name, t.s));
      buf_free(&t);
      return false;
    }
  }
  return true;
}

static RunStatus cmd_sched(Session *s, const char *arg, Span at) {
  Func *f = want_fn(s, arg, at, ":sched");
  if (!f) return RUN_ERROR;
  EvalSizes sz;
  bool given;
  if (!parse_sizes(s, arg, f, at, &sz, &given)) return RUN_ERROR;
  Buf b = {0};
  if (!strcmp(s->target, "gpu") || (strcmp(s->target, "cpu") && s->have_gpu_hw)) {
    /* the GPU schedule: on the device, else on the GPU model loaded with :hw */
    CudaProgram *cp = f->gpu_backend;
    bool own = !cp;
    if (own) cp = cuda_program_new(f->prog, gpu_model(s), s->gpu_math);
    buf_printf(&b, "%s: GPU schedule on %s (compiled %d time%s)\n", f->name, s->gpu ? cuda_backend_device(s->gpu) : s->gpu_hw.name,
               f->compiles, f->compiles == 1 ? "" : "s");
    double t = cuda_describe(cp, s->pc, given ? &sz : NULL, &b);
    if (given) buf_printf(&b, "predicted %.3f ms", t * 1e3);
    if (own) cuda_program_free(cp);
  } else if (strcmp(s->target, "cpu") || !model_backend(s, &(const char *){0})) {
    buf_printf(&b, "%s: the reference evaluator interprets the loops that :ir %s shows (target %s);\n"
               ":target cpu compiles them; compiled %d time%s so far", f->name, f->name, s->target, f->compiles,
               f->compiles == 1 ? "" : "s");
  } else {
    const char *why;
    CpuBackend *be = model_backend(s, &why);
    CpuProgram *cp = model_program(s, f, be, at);
    if (!cp) return RUN_ERROR;
    if (s->hw_foreign)
      buf_printf(&b, "%s: compiled for %s (%.1f ms), which this CPU cannot run: statements run on code for this CPU; "
                 "cpu %s, %d thread%s\n", f->name, s->hw.name, cpu_program_compile_ms(cp), cpu_backend_cpu(be),
                 s->threads, s->threads == 1 ? "" : "s");
    else
      buf_printf(&b, "%s: compiled %d time%s, for every shape (%.1f ms); cpu %s, %d thread%s, hardware %s\n", f->name,
                 f->compiles, f->compiles == 1 ? "" : "s", cpu_program_compile_ms(cp), cpu_backend_cpu(be),
                 s->threads, s->threads == 1 ? "" : "s", s->hw.name);
    if (s->gpu_hw_chosen)
      buf_printf(&b, "(the GPU model %s is loaded, and the target is cpu: :target gpu or ref shows its schedule)\n",
                 s->gpu_hw.name);
    double t = cpu_schedule(be, cp, s->pc, given ? &sz : NULL, s->threads, &b);
    if (given) {
      buf_puts(&b, "at");
      for (int i = 0; i < sz.n; i++) buf_printf(&b, " %s=%lld", sz.names[i], (long long)sz.vals[i]);
      buf_printf(&b, ": predicted %.3f ms", t * 1e3);
    }
  }
  while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static RunStatus cmd_cost(Session *s, const char *arg, Span at) {
  Func *f = want_fn(s, arg, at, ":cost");
  if (!f) return RUN_ERROR;
  EvalSizes sz;
  bool given;
  if (!parse_sizes(s, arg, f, at, &sz, &given)) return RUN_ERROR;
  const Poly *fl, *by;
  cost_program(f->prog, s->pc, &fl, &by);
  Buf b = {0};
  buf_printf(&b, "%s:\n  FLOPs      ", f->name);
  poly_str(fl, &b);
  buf_puts(&b, "\n  bytes      ");
  poly_str(by, &b);
  buf_puts(&b, "\n  intensity  (");
  poly_str(fl, &b);
  buf_puts(&b, ") / (");
  poly_str(by, &b);
  buf_puts(&b, ") FLOP/byte");
  if (given) {
    int64_t fv = 0, bv = 0;
    const char *why;
    poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
    poly_eval(by, eval_size_lookup, &sz, &bv, &why);
    buf_puts(&b, "\nat");
    for (int i = 0; i < sz.n; i++) buf_printf(&b, " %s=%lld", sz.names[i], (long long)sz.vals[i]);
    buf_printf(&b, ": %lld FLOPs, %lld bytes, %.3g FLOP/byte", (long long)fv, (long long)bv, bv ? (double)fv / (double)bv : 0.0);
  }
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static RunStatus cmd_code(Session *s, const char *arg, Span at) {
  Func *f = want_fn(s, arg, at, ":code");
  if (!f) return RUN_ERROR;
  const char *what = arg + strlen(f->name);
  while (isspace((unsigned char)*what)) what++;
  if (!*what) what = "llvm";
  if (strcmp(what, "llvm") && strcmp(what, "asm") && strcmp(what, "cuda") && strcmp(what, "ptx")) {
    error(s, at, E_COMMAND, tmp_printf(s, ":code: unknown kind '%s': use llvm, asm, cuda or ptx", what));
    return RUN_ERROR;
  }
  if (!strcmp(what, "cuda") || !strcmp(what, "ptx")) {
    /* rendering and PTX need no GPU: for the device if there is one, else the GPU model */
    CudaProgram *cp = f->gpu_backend;
    bool own = false;
    if (!cp) {
      const HwModel *g = gpu_model(s);
      if (!g) {
        error(s, at, E_COMMAND, ":code: no GPU model (hw/h100.hw is missing)");
        return RUN_ERROR;
      }
      cp = cuda_program_new(f->prog, g, s->gpu_math);
      own = true;
    }
    Buf b = {0};
    char msg[512];
    bool ok = cuda_program_code(cp, what, &b, msg, sizeof msg);
    if (own) cuda_program_free(cp);
    if (!ok) {
      buf_free(&b);
      error(s, at, E_COMMAND, tmp_printf(s, ":code %s: %s", what, msg));
      return RUN_ERROR;
    }
    while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
    print_line(s, b.s ? b.s : "");
    buf_free(&b);
    return RUN_OK;
  }
  const char *why;
  CpuBackend *be = model_backend(s, &why);
  if (!be) {
    error(s, at, E_COMMAND, tmp_printf(s, ":code: %s", why));
    return RUN_ERROR;
  }
  CpuProgram *cp = model_program(s, f, be, at);
  if (!cp) return RUN_ERROR;
  Buf b = {0};
  char msg[512];
  if (!cpu_program_code(be, cp, what, &b, msg, sizeof msg)) {
    buf_free(&b);
    error(s, at, E_COMMAND, tmp_printf(s, ":code: %s", msg));
    return RUN_ERROR;
  }
  while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  print_line(s, b.s ? b.s : "");
  buf_free(&b);
  return RUN_OK;
}

static RunStatus run_arg(Session *s, Source *src, bool quiet_value);

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static RunStatus cmd_time(Session *s, const char *arg, Span at) {
  if (!*arg) {
    error(s, at, E_COMMAND, ":time needs a statement");
    return RUN_ERROR;
  }
  double t[1000];
  int n = 0;
  /* one run first: it compiles what needs compiling, and warms the caches; every run reads
   * the same source (the session keeps each source it is given) */
  Source *src = arg_source(s, arg, at, "<time>");
  RunStatus r0 = run_arg(s, src, true);
  if (r0 != RUN_OK) return r0;
  unsigned last_before = s->last_fn_calls;
  double start = now_s();
  while (n < 1000 && (n < 3 || (now_s() - start < 1.0 && n < 100))) {
    double t0 = now_s();
    RunStatus r = run_arg(s, src, true);
    t[n++] = now_s() - t0;
    if (r != RUN_OK) return r;
  }
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  double med = t[n / 2];
  Buf b = {0};
  buf_printf(&b, "time: median %.3f ms  min %.3f ms  max %.3f ms  runs %d  (%s)", med * 1e3, t[0] * 1e3, t[n - 1] * 1e3, n, s->target);
  Func *f = s->last_fn;
  if (f && last_before != s->last_fn_calls) {
    EvalSizes sz = {s->last_names, s->last_vals, s->last_n};
    const Poly *fl, *by;
    cost_program(f->prog, s->pc, &fl, &by);
    int64_t fv = 0, bv = 0;
    const char *why;
    poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
    poly_eval(by, eval_size_lookup, &sz, &bv, &why);
    const HwModel *hw = run_hw(s);
    bool measured = s->hw_foreign ? s->host_peak_measured : s->peak_measured;
    int cores = hw->cores > 0 ? hw->cores : 1, th = s->threads < cores ? s->threads : cores;
    double peak = hw->peak_gflops_f32 * th / cores;
    /* Without dyn --calibrate the model's peak comes from the clock /proc/cpuinfo reports,
     * often the base clock (a virtual CPU's, say) where the cores run faster: the rate the
     * matmul micro-kernel was measured at when it was compiled is the truer roof then. */
    const char *whose = "";
    double kernel = !measured && s->cpu && !strcmp(s->target, "cpu") ? cpu_core_gflops(s->cpu) * th : 0;
    if (kernel > peak) {
      peak = kernel;
      whose = " (the micro-kernel's rate, measured)";
    }
    buf_printf(&b, "\n%s: %.2f GFLOP/s, %.2f GB/s", f->name, (double)fv / med * 1e-9, (double)bv / med * 1e-9);
    /* the share of whichever roof binds at this intensity: compute or memory bandwidth */
    const HwLevel *mem = hw->nlevels ? &hw->level[hw->nlevels - 1] : NULL;
    double bw = mem ? mem->gbs * th : 0;
    if (mem && mem->total_gbs > 0 && bw > mem->total_gbs) bw = mem->total_gbs;
    bool mem_bound = bw > 0 && peak > 0 && (double)fv / peak < (double)bv / bw;
    if (mem_bound)
      buf_printf(&b, ", %.0f%% of the %.0f GB/s memory bandwidth of %d thread%s", 100.0 * (double)bv / med * 1e-9 / bw, bw,
                 th, th == 1 ? "" : "s");
    else if (peak > 0)
      buf_printf(&b, ", %.0f%% of the %.0f GFLOP/s peak of %d thread%s%s", 100.0 * (double)fv / med * 1e-9 / peak, peak, th,
                 th == 1 ? "" : "s", whose);
    double pred = 0;
    if (!strcmp(s->target, "cpu") && f->backend) {
      Buf junk = {0};
      pred = cpu_schedule(s->cpu, f->backend, s->pc, &sz, s->threads, &junk);
      buf_free(&junk);
    } else {
      pred = cost_roofline(hw, s->threads, (double)fv, (double)bv);
    }
    if (pred > 0) buf_printf(&b, "; predicted %.3f ms", pred * 1e3);
  }
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

/* Compare two results element by element: ints and bools exactly, floats with a tolerance
 * for the element type (the back ends may reassociate sums), or tol for both the relative
 * and the absolute part when tol > 0 (what the tensor cores' rounding allows). */
static bool compare_values(Session *s, const Value *a, const Value *b, double tol, Buf *out) {
  if (a->kind != b->kind) {
    buf_puts(out, "different kinds of value");
    return false;
  }
  if (a->kind == VAL_TUPLE) {
    if (a->n != b->n) {
      buf_printf(out, "%d values against %d", a->n, b->n);
      return false;
    }
    bool ok = true;
    for (int i = 0; i < a->n; i++) {
      buf_printf(out, "%s#%d: ", i ? "; " : "", i + 1);
      ok = compare_values(s, &a->items[i], &b->items[i], tol, out) && ok;
    }
    return ok;
  }
  if (a->kind != VAL_TENSOR) return true;
  Tensor *x = a->t, *y = b->t;
  if (x->elem != y->elem || x->rank != y->rank || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) {
    buf_printf(out, "the types differ: %s and %s", ttype(s, x), ttype(s, y));
    return false;
  }
  int64_t n = tensor_numel(x), bad = 0, worst_i = -1;
  double worst = 0, scale = 0;
  bool fl = elem_is_float(x->elem);
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(tensor_get_f64(y, i));
    if (isfinite(v) && v > scale) scale = v;
  }
  /* an element may differ by rtol of itself plus atol of the largest value: sums reassociated
   * by a back end lose precision relative to their terms, not to their result */
  double rtol = x->elem == DYN_F64 ? 1e-10 : 1e-4, atol = x->elem == DYN_F64 ? 1e-12 : 1e-5;
  if (tol > 0 && x->elem == DYN_F32) rtol = atol = tol;
  for (int64_t i = 0; i < n; i++) {
    double p = tensor_get_f64(x, i), q = tensor_get_f64(y, i);
    bool same;
    if (!fl) same = tensor_get_i64(x, i) == tensor_get_i64(y, i);
    else if (isnan(p) || isnan(q)) same = isnan(p) && isnan(q);
    else if (isinf(p) || isinf(q)) same = p == q;
    else same = fabs(p - q) <= rtol * fabs(q) + atol * scale;
    double d = fl && isfinite(p) && isfinite(q) ? fabs(p - q) : (same ? 0 : INFINITY);
    if (!same) bad++;
    if (d > worst || (!same && worst_i < 0)) {
      worst = d;
      worst_i = i;
    }
  }
  if (fl) buf_printf(out, "max |difference| %.3g, %.3g of the largest value", worst, scale > 0 ? worst / scale : worst);
  else buf_printf(out, "%s", bad ? "values differ" : "identical");
  if (bad) buf_printf(out, "; %lld of %lld elements differ, first at flat index %lld", (long long)bad, (long long)n, (long long)worst_i);
  return bad == 0;
}

/* One run of a :check expression on the current target: a call of a function reuses the
 * arguments evaluated once (so random inputs agree), anything else is evaluated afresh. */
static Value check_run(Session *s, const char *arg, Span at, Expr *e, Func *fn, Value *args) {
  if (fn) return call_fn(s, fn, e, args);
  Expr *again = parse_arg_expr(s, arg, at);
  return again ? eval_top(s, again) : (Value){0};
}

static RunStatus cmd_check(Session *s, const char *arg, Span at) {
  if (!*arg) {
    error(s, at, E_COMMAND, ":check needs an expression");
    return RUN_ERROR;
  }
  char saved[8];
  memcpy(saved, s->target, sizeof saved);
  Value ref = {0};
  Value *args = NULL;
  Buf b = {0};
  bool ok = true;
  snprintf(s->target, sizeof s->target, "ref");
  /* every back end draws the same random numbers: rand() in the expression starts from the
   * same state each time, and the session goes on from where the reference left it */
  uint64_t rng0[4], rng1[4];
  memcpy(rng0, s->rng, sizeof rng0);
  memcpy(rng1, s->rng, sizeof rng1);
  Expr *e = parse_arg_expr(s, arg, at);
  if (!e) goto out;
  Func *fn = e->kind == EX_CALL ? find_fn(s, e->name) : NULL;
  if (fn) {
    args = xcalloc((size_t)e->nargs + 1, sizeof(Value));
    for (int i = 0; i < e->nargs && !failed(s); i++) args[i] = eval_top(s, e->args[i]);
  }
  if (!failed(s)) ref = check_run(s, arg, at, e, fn, args);
  memcpy(rng1, s->rng, sizeof rng1);
  if (failed(s)) goto out;
  val_type_str(&ref, &b);
  buf_puts(&b, ": ref computed");
  /* every other back end, against the reference */
  static const char *targets[] = {"cpu", "gpu"};
  for (int t = 0; t < 2; t++) {
    bool have = t == 0 ? cpu_backend(s) != NULL : gpu_backend(s) != NULL;
    if (!have) {
      buf_printf(&b, "; %s not available (%s)", targets[t], t == 0 ? s->cpu_why : s->gpu_why);
      continue;
    }
    snprintf(s->target, sizeof s->target, "%s", targets[t]);
    memcpy(s->rng, rng0, sizeof rng0);
    unsigned ran = s->ran_compiled, instead = s->ran_instead;
    s->compile_all = true;
    Value v = check_run(s, arg, at, e, fn, args);
    s->compile_all = false;
    if (failed(s)) {
      val_free(&v);
      goto out;
    }
    if (s->ran_instead != instead) {
      /* a back end that did not run is not checked: say so, and why */
      buf_printf(&b, "; %s did not run %s (%s)", targets[t], s->ran_compiled == ran ? "it" : "all of it",
                 s->instead_why);
      ok = false;
      val_free(&v);
      continue;
    }
    /* f32 contractions on the tensor cores round their operands to 10 (tf32) or 7 (bf16)
     * bits: a relative error of a few units of 2^-11 or 2^-8 of the largest value */
    double tol = 0;
    CudaMath m = t == 1 ? cuda_math_on(cuda_backend_hw(s->gpu), s->gpu_math) : CUDA_EXACT;
    if (m != CUDA_EXACT) {
      tol = m == CUDA_TF32 ? 5e-3 : 4e-2;
      buf_printf(&b, "; %s (%s, tolerance %g) vs ref: ", targets[t], cuda_math_name(m), tol);
    } else {
      buf_printf(&b, "; %s vs ref: ", targets[t]);
    }
    bool same = compare_values(s, &v, &ref, tol, &b);
    buf_puts(&b, same ? ": ok" : ": MISMATCH");
    ok = ok && same;
    val_free(&v);
  }
  print_line(s, b.s);
  if (!ok) error(s, at, E_COMMAND, ":check: the back ends disagree");
out:
  buf_free(&b);
  val_free(&ref);
  if (args) {
    for (int i = 0; i < e->nargs; i++) val_free(&args[i]);
    free(args);
  }
  memcpy(s->target, saved, sizeof saved);
  memcpy(s->rng, rng1, sizeof rng1);
  return failed(s) ? RUN_ERROR : RUN_OK;
}

/* :target gpu [exact|tf32|bf16]: the arithmetic of f32 contractions in GPU code, whether or
 * not a GPU is here (:code cuda and :sched render for the GPU model).  Code compiled with the
 * other arithmetic is dropped, to be compiled again on its next use. */
static void set_gpu_math(Session *s, CudaMath m) {
  if (m == s->gpu_math) return;
  s->gpu_math = m;
  for (int i = 0; i < s->fns.n; i++) {
    cuda_program_free(s->fns.a[i]->gpu_backend);
    s->fns.a[i]->gpu_backend = NULL;
  }
  for (int i = 0; i < s->retired.n; i++) {
    cuda_program_free(s->retired.a[i]->gpu_backend);
    s->retired.a[i]->gpu_backend = NULL;
  }
}

/* What f32 contractions compute in on hw: "f32 contractions in tf32 on the tensor cores". */
static const char *gpu_math_text(Session *s, const HwModel *hw) {
  if (s->gpu_math == CUDA_EXACT) return "f32 contractions exact";
  if (hw && cuda_math_on(hw, s->gpu_math) == CUDA_EXACT)
    return tmp_printf(s, "f32 contractions exact: %s needs the tensor cores of compute capability 8.0 (%s has %d.%d)",
                      cuda_math_name(s->gpu_math), hw->name, hw->cc_major, hw->cc_minor);
  return tmp_printf(s, "f32 contractions in %s on the tensor cores", cuda_math_name(s->gpu_math));
}

static RunStatus cmd_target(Session *s, const char *arg, Span at) {
  if (!*arg) {
    if (s->gpu_math == CUDA_EXACT) print_line(s, tmp_printf(s, "target: %s", s->target));
    else if (!strcmp(s->target, "gpu")) print_line(s, tmp_printf(s, "target: gpu %s", cuda_math_name(s->gpu_math)));
    else print_line(s, tmp_printf(s, "target: %s (GPU code: %s)", s->target, gpu_math_text(s, NULL)));
    return RUN_OK;
  }
  /* the first word, and for gpu the arithmetic after it */
  size_t n = strcspn(arg, " \t");
  const char *rest = arg + n;
  while (isspace((unsigned char)*rest)) rest++;
  size_t rn = strlen(rest);
  while (rn && isspace((unsigned char)rest[rn - 1])) rn--;
  if (n == 3 && !strncmp(arg, "gpu", 3)) {
    CudaMath m;
    if (!rn || (rn == 5 && !strncmp(rest, "exact", 5))) m = CUDA_EXACT;
    else if (rn == 4 && !strncmp(rest, "tf32", 4)) m = CUDA_TF32;
    else if (rn == 4 && !strncmp(rest, "bf16", 4)) m = CUDA_BF16;
    else {
      error(s, at, E_COMMAND, tmp_printf(s, "unknown arithmetic '%.*s' for :target gpu: use exact, tf32 or bf16", (int)rn, rest));
      return RUN_ERROR;
    }
    bool changed = m != s->gpu_math;
    set_gpu_math(s, m);
    if (!gpu_backend(s)) {
      print_line(s, tmp_printf(s, "target: %s -- no GPU: %s", s->target, s->gpu_why));
      if (m != CUDA_EXACT || changed) {
        const HwModel *g = gpu_model(s);
        print_line(s, tmp_printf(s, "GPU code for %s (:code cuda, :sched): %s", g ? g->name : "the GPU model", gpu_math_text(s, g)));
      }
    } else {
      snprintf(s->target, sizeof s->target, "gpu");
      if (m != CUDA_EXACT || changed)
        print_line(s, tmp_printf(s, "target: gpu (%s); %s", cuda_backend_device(s->gpu), gpu_math_text(s, cuda_backend_hw(s->gpu))));
      else
        print_line(s, tmp_printf(s, "target: gpu (%s)", cuda_backend_device(s->gpu)));
    }
    return RUN_OK;
  }
  if (!strcmp(arg, "ref")) {
    snprintf(s->target, sizeof s->target, "ref");
    print_line(s, "target: ref (the reference evaluator)");
  } else if (!strcmp(arg, "cpu")) {
    if (!cpu_backend(s)) {
      error(s, at, E_COMMAND, tmp_printf(s, "cannot use the CPU back end: %s", s->cpu_why));
      return RUN_ERROR;
    }
    snprintf(s->target, sizeof s->target, "cpu");
    print_line(s, tmp_printf(s, "target: cpu (LLVM, %s, %d thread%s)", cpu_backend_cpu(s->cpu), s->threads, s->threads == 1 ? "" : "s"));
  } else {
    error(s, at, E_COMMAND, tmp_printf(s, "unknown target '%s': use cpu, gpu or ref", arg));
    return RUN_ERROR;
  }
  return RUN_OK;
}

static RunStatus cmd_hw(Session *s, const char *arg, Span at) {
  const HwModel *show = &s->hw;
  const char *note = NULL;
  if (*arg) {
    char msg[512];
    HwModel hw;
    if (!hw_load(arg, &hw, msg, sizeof msg)) {
      error(s, at, E_COMMAND, msg);
      return RUN_ERROR;
    }
    if (!strcmp(hw.kind, "gpu")) {
      /* a GPU model: what :code cuda renders for and :sched plans on; the CPU's stays */
      s->gpu_hw = hw;
      s->have_gpu_hw = s->gpu_hw_chosen = true;
      show = &s->gpu_hw;

    } else {
      /* `:hw host` is the detected host again, with its calibration */
      bool host = !strcmp(hw.name, "host") && !hw.path[0];
      note = set_cpu_model(s, host ? &s->host_hw : &hw, host && s->host_peak_measured);
    }
  }
  Buf b = {0};
  hw_describe(show, &b);
  if (note) buf_printf(&b, "note: %s\n", note);
  while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static RunStatus cmd_threads(Session *s, const char *arg, Span at) {
  if (*arg) {
    char *end;
    long n = strtol(arg, &end, 10);
    if (*end || n < 1 || n > 1024) {
      error(s, at, E_COMMAND, ":threads needs a number from 1 to 1024");
      return RUN_ERROR;
    }
    s->threads = (int)n;
    if (s->cpu) cpu_backend_set_threads(s->cpu, s->threads);
  }
  print_line(s, tmp_printf(s, "threads: %d%s", s->threads, !strcmp(s->target, "ref") ? " (the reference evaluator uses one)" : ""));
  return RUN_OK;
}

static const struct Command {
  const char *name, *args, *summary, *detail;
  CmdFn fn;
} commands[] = {
  {"help", "[cmd]", "the commands, or one in detail", "With a name, shows how to use that command.", cmd_help},
  {"quit", "", "leave the REPL", "Leaves the REPL (also Ctrl-D on an empty line). In a script, stops it.", cmd_quit},
  {"load", "FILE", "run a script in this session", "Runs FILE as if typed here: its functions and bindings stay.", cmd_load},
  {"type", "EXPR | NAME", "the type, with symbolic dimensions for functions",
   "For a function, its signature over size variables; for a binding, its type; for an\nexpression, the type of its value.", cmd_type},
  {"vars", "", "the names bound in the session, with their types", "Lists every binding, sorted by name.", cmd_vars},
  {"reset", "", "forget all bindings", "Forgets every binding and every function defined in the session (the prelude stays).", cmd_reset},
  {"ir", "NAME", "the loop-level IR of a function after fusion",
   "Shows the buffers and the kernels of a function: loop nests with symbolic extents,\nafter inlining elementwise producers and fusing row-wise chains.", cmd_ir},
  {"sched", "NAME [DIM=VAL ...]", "the schedule: levels, tiles, candidates", "Shows how a function is scheduled and how many times it was compiled.", cmd_sched},
  {"cost", "NAME", "FLOPs, bytes and intensity as formulas", "Shows the cost model of a function in its size variables.", cmd_cost},
  {"code", "NAME [llvm|asm|cuda|ptx]", "the generated code", "Shows the code generated for a function.", cmd_code},
  {"time", "STMT", "run a statement repeatedly and time it",
   "Runs the statement at least 3 times (up to a second) and prints\n  time: median M ms  min ... max ...  runs N", cmd_time},
  {"check", "EXPR", "run on every back end and compare", "Evaluates the expression on every available back end and compares the results.", cmd_check},
  {"target", "cpu|gpu [MATH]|ref", "which back end runs the next statements",
   "Chooses the back end; without an argument shows it.  MATH, after gpu, is the arithmetic of\n"
   "f32 contractions (matmul, bmm, linear, attention's products): exact (f32, the default), or\n"
   "tf32 or bf16: the tensor cores of compute capability 8.0 and later, with the operands\n"
   "rounded to 10 (tf32) or 7 (bf16) bits of mantissa and the sums kept in f32.  It holds for\n"
   ":code NAME cuda|ptx and :sched too, which need no GPU.",
   cmd_target},
  {"hw", "[NAME|FILE]", "the hardware model, or load another", "Shows the hardware model in use; with a name (see hw/) or a file, loads it.", cmd_hw},
  {"threads", "N", "CPU threads", "Sets the number of CPU threads compiled code may use.", cmd_threads},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static RunStatus cmd_help(Session *s, const char *arg, Span at) {
  Buf b = {0};
  if (*arg) {
    const char *nm = arg[0] == ':' ? arg + 1 : arg;
    for (int i = 0; i < NCOMMANDS; i++)
      if (!strcmp(commands[i].name, nm)) {
        buf_printf(&b, ":%s%s%s\n  %s\n%s", commands[i].name, *commands[i].args ? " " : "", commands[i].args,
                   commands[i].summary, commands[i].detail);
        print_line(s, b.s);
        buf_free(&b);
        return RUN_OK;
      }
    error(s, at, E_COMMAND, tmp_printf(s, "no command ':%s' (try :help)", nm));
    return RUN_ERROR;
  }
  buf_puts(&b, "commands:\n");
  for (int i = 0; i < NCOMMANDS; i++) {
    char head[64];
    snprintf(head, sizeof head, ":%s%s%s", commands[i].name, *commands[i].args ? " " : "", commands[i].args);
    buf_printf(&b, "  %-28s %s\n", head, commands[i].summary);
  }
  buf_puts(&b, "built-in functions:\n");
  for (int i = 0; i < NBUILTINS; i++) buf_printf(&b, "  %s\n", builtins[i].help);
  buf_puts(&b, "functions in the session: ");
  for (int i = 0; i < s->fns.n; i++) buf_printf(&b, "%s%s", i ? " " : "", s->fns.a[i]->name);
  print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static RunStatus run_command(Session *s, const char *text, Span at) {
  char name[32];
  int n = 0;
  while (text[n] && !isspace((unsigned char)text[n]) && n < 31) {
    name[n] = text[n];
    n++;
  }
  name[n] = 0;
  const char *arg = text + n;
  while (isspace((unsigned char)*arg)) arg++;
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(commands[i].name, name)) return commands[i].fn(s, arg, at);
  /* suggest the command sharing the longest prefix with what was typed */
  const char *close = NULL;
  size_t best = 0;
  for (int i = 0; i < NCOMMANDS; i++) {
    size_t k = 0;
    while (name[k] && commands[i].name[k] == name[k]) k++;
    if (k > best) {
      best = k;
      close = commands[i].name;
    }
  }
  error(s, at, E_COMMAND, close ? tmp_printf(s, "unknown command ':%s' (did you mean :%s? see :help)", name, close)
                                : tmp_printf(s, "unknown command ':%s' (see :help)", name));
  return RUN_ERROR;
}

/* ---- statements ---- */

static RunStatus import_module(Session *s, const char *name, Span at, bool is_path) {
  const char *key = name;
  for (int i = 0; i < s->imported.n; i++)
    if (!strcmp(s->imported.a[i], key)) return RUN_OK;
  if (is_path) {
    vec_push(s->imported, xstrdup(key));
    return run_file_in(s, name, at);
  }
  for (const StdlibModule *m = dyn_stdlib; m->name; m++) {
    if (strcmp(m->name, name)) continue;
    vec_push(s->imported, xstrdup(key));
    char fname[128];
    snprintf(fname, sizeof fname, "stdlib/%s.dyn", name);
    Source *src = add_source(s, fname, xstrdup(m->text), strlen(m->text));
    Arena *saved = s->tmp;
    s->depth++;
    RunStatus r = run_source(s, src);
    s->depth--;
    s->tmp = saved;
    return r;
  }
  Buf known = {0};
  for (const StdlibModule *m = dyn_stdlib; m->name; m++) buf_printf(&known, "%s%s", known.len ? ", " : "", m->name);
  error(s, at, E_IMPORT, tmp_printf(s, "no standard module '%s' (there are: %s); to import a file, write import \"%s.dyn\"", name, known.s ? known.s : "none", name));
  buf_free(&known);
  return RUN_ERROR;
}

static void define_fn(Session *s, FnDecl *d, Arena *a, bool *keep) {
  if (find_builtin(d->name)) {
    error(s, d->name_span, E_BUILTIN, tmp_printf(s, "'%s' is a built-in function and cannot be redefined", d->name));
    return;
  }
  OpKind op;
  if (op_from_name(d->name, &op)) {
    error(s, d->name_span, E_BUILTIN, tmp_printf(s, "'%s' is a math function and cannot be redefined", d->name));
    return;
  }
  SemaEnv env = sema_env(s);
  Func *f = sema_function(&env, d, a, &s->diags);
  if (!f) return;
  f->arena = NULL;            /* the input's arena is kept by the session instead */
  *keep = true;
  f->prog = lower_function(f, s->pc, lookup_fn_cb, s);
  for (int i = 0; i < s->fns.n; i++)
    if (!strcmp(s->fns.a[i]->name, f->name)) {
      retire(s, s->fns.a[i]);
      s->fns.a[i] = f;
      return;
    }
  vec_push(s->fns, f);
}

static RunStatus run_stmt(Session *s, Stmt *st, bool *keep, bool quiet_value) {
  switch (st->kind) {
  case ST_FN:
    define_fn(s, st->fn, s->tmp, keep);
    break;
  case ST_IMPORT:
    return import_module(s, st->name, st->span, st->is_path);
  case ST_COMMAND:
    return run_command(s, st->text, st->span);
  case ST_RETURN:
    error(s, st->span, E_RETURN_TOP);
    break;
  case ST_DEF: {
    Value v = eval_anon_def(s, st);
    if (!failed(s)) bind(s, st->name, v);
    break;
  }
  case ST_ASSIGN: {
    for (int i = 0; i < st->nnames; i++) {
      DynElem el;
      const char *nm = st->names[i];
      if (!strcmp(nm, "inf") || !strcmp(nm, "nan") || elem_from_name(nm, strlen(nm), &el)) {
        error(s, st->name_spans[i], E_BUILTIN, tmp_printf(s, "'%s' names a %s and cannot be bound", nm,
                                                            nm[0] == 'i' && nm[1] == 'n' ? "constant" : nm[0] == 'n' ? "constant" : "type"));
        return RUN_ERROR;
      }
    }
    Value v = eval_top(s, st->expr);
    if (failed(s)) break;
    if (st->tuple || st->nnames > 1) {
      int have = v.kind == VAL_TUPLE ? v.n : 1;
      if (have != st->nnames) {
        error(s, st->span, E_TUPLE_COUNT, st->expr->kind == EX_CALL ? st->expr->name : "the expression", have,
              have == 1 ? "" : "s", st->nnames, st->nnames == 1 ? " is" : "s are");
        val_free(&v);
        break;
      }
      if (v.kind == VAL_TUPLE) {
        for (int i = 0; i < v.n; i++) bind(s, st->names[i], val_copy(&v.items[i]));
        val_free(&v);
      } else {
        bind(s, st->names[0], v);
      }
      break;
    }
    if (v.kind == VAL_NONE) {
      error(s, st->expr->span, E_BUILTIN, tmp_printf(s, "this gives no value to bind to '%s'", st->names[0]));
      break;
    }
    bind(s, st->names[0], v);
    break;
  }
  case ST_EXPR: {
    Value v = eval_top(s, st->expr);
    if (!failed(s) && s->interactive && !quiet_value && v.kind != VAL_NONE) {
      Buf b = {0};
      val_format(&v, &b);
      print_line(s, b.s);
      buf_free(&b);
    }
    val_free(&v);
    break;
  }
  }
  /* a script whose output is lost stops: what follows would print into the void */
  return failed(s) || (s->out_errno && !s->interactive) ? RUN_ERROR : RUN_OK;
}

/* Parse and run a source; the caller prints what remains in s->diags. */
static RunStatus run_source_ex(Session *s, Source *src, bool allow_incomplete, bool quiet_value) {
  Arena *a = arena_new();
  s->tmp = a;
  int nst;
  bool incomplete = false;
  Diags parse_d = {0};
  Stmt **sts = parse_source(a, src, &parse_d, &nst, &incomplete);
  if (parse_d.nerrors) {
    if (incomplete && allow_incomplete) {
      diag_clear(&parse_d);
      arena_free(a);
      return RUN_INCOMPLETE;
    }
    diag_print_all(&parse_d, s->err);
    diag_clear(&parse_d);
    arena_free(a);
    return RUN_ERROR;
  }
  diag_clear(&parse_d);
  bool keep = false;
  RunStatus r = RUN_OK;
  for (int i = 0; i < nst && r == RUN_OK; i++) {
    s->tmp = a;
    r = run_stmt(s, sts[i], &keep, quiet_value);
    diag_print_all(&s->diags, s->err);
    if (s->diags.nerrors) r = RUN_ERROR;
    diag_clear(&s->diags);
  }
  if (keep) vec_push(s->kept, a);
  else arena_free(a);
  return r;
}

static RunStatus run_source(Session *s, Source *src) { return run_source_ex(s, src, false, false); }

/* A command's argument run as statements (:time STMT); src from arg_source. */
static RunStatus run_arg(Session *s, Source *src, bool quiet_value) {
  Arena *saved = s->tmp;
  RunStatus r = run_source_ex(s, src, false, quiet_value);
  s->tmp = saved;
  return r;
}

RunStatus session_run(Session *s, const char *text, const char *origin) {
  Source *src = add_source(s, origin, xstrdup(text), strlen(text));
  RunStatus r = run_source_ex(s, src, s->interactive, false);
  if (r == RUN_INCOMPLETE) {
    /* nothing ran: forget the source so a retry with more lines starts clean */
    s->sources.n--;
    free(src->name);
    free(src->text);
    free(src);
  }
  return r;
}

static RunStatus run_script(Session *s, char *text, size_t len, const char *origin, bool allow_incomplete) {
  Source *src = script_source(s, origin, text, len);
  if (!src) {
    diag_print_all(&s->diags, s->err);
    diag_clear(&s->diags);
    return RUN_ERROR;
  }
  RunStatus r = run_source_ex(s, src, allow_incomplete, false);
  if (r == RUN_INCOMPLETE) {          /* as session_run: nothing ran, forget the source */
    s->sources.n--;
    free(src->name);
    free(src->text);
    free(src);
  }
  return r;
}

RunStatus session_run_script(Session *s, char *text, size_t len, const char *origin) {
  return run_script(s, text, len, origin, s->interactive);
}

RunStatus session_run_file(Session *s, const char *path) {
  char msg[512];
  size_t len;
  char *text = read_script(s, path, &len, msg, sizeof msg);
  if (!text) {
    fprintf(s->err, "dyn: %s\n", msg);
    return RUN_ERROR;
  }
  return run_script(s, text, len, path, false);
}

/* ---- calibration ---- */

static void fingerprint(const HwModel *hw, Buf *out) {
  buf_printf(out, "%s|%s|%d|%.2f|%d", hw->llvm_cpu, hw->llvm_features, hw->cores, hw->ghz, hw->vector_bits);
}

static char *calibration_path(void) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  Buf b = {0};
  if (xdg && *xdg) buf_printf(&b, "%s/dyn", xdg);
  else if (home && *home) buf_printf(&b, "%s/.cache/dyn", home);
  else return NULL;
  return b.s;
}

/* The cache is a few lines; anything longer is not one of ours. */
#define CALIBRATION_MAX 65536

/* A calibrated peak is believed only near the model's: a measurement cannot beat the
 * hardware by 4x, nor fall below a hundredth of what the threads it ran on can do.  Past
 * either, the file is damaged or from another machine with the same fingerprint. */
static bool plausible_peak(const HwModel *hw, double peak, int threads) {
  double model = hw->peak_gflops_f32;
  if (!isfinite(peak) || peak <= 0) return false;
  if (!(model > 0)) return true;           /* nothing to compare with */
  double share = hw->cores > 0 && threads > 0 && threads < hw->cores ? (double)threads / hw->cores : 1;
  return peak <= 4 * model && peak >= model * share / 100;
}

/* Use a calibration made on this hardware, if there is one.  Only a regular file of a
 * sensible size is read: a FIFO or a link to /dev/zero in its place must not hang or fill
 * every start-up.  A file that cannot be used is ignored with a note. */
static void load_calibration(Session *s) {
  char *dir = calibration_path();
  if (!dir) return;
  Buf path = {0}, fp = {0};
  buf_printf(&path, "%s/calibration.txt", dir);
  fingerprint(&s->host_hw, &fp);
  char *text;
  size_t len;
  int e;
  FileStatus st = file_read_all(path.s, -1, CALIBRATION_MAX, true, NULL, &text, &len, &e);
  if (st == FILE_NOT_REGULAR) {
    fprintf(s->err, "dyn: ignoring %s: not a regular file\n", path.s);
  } else if (st == FILE_TOO_LARGE) {
    fprintf(s->err, "dyn: ignoring %s: larger than %d KiB, not a calibration\n", path.s, CALIBRATION_MAX / 1024);
  } else if (st == FILE_OK) {
    bool match = false;
    double peak = 0;
    int threads = 0;
    char key[64], val[900], *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      if (sscanf(line, "%63s = %899[^\n]", key, val) != 2) continue;
      if (!strcmp(key, "fingerprint")) match = !strcmp(val, fp.s);
      else if (!strcmp(key, "peak_gflops_f32")) peak = strtod(val, NULL);
      else if (!strcmp(key, "threads")) threads = atoi(val);
    }
    free(text);
    if (match && !plausible_peak(&s->host_hw, peak, threads)) {
      fprintf(s->err, "dyn: ignoring %s: a peak of %g GFLOP/s is not plausible for %s (the model says %.1f); run dyn --calibrate again\n",
              path.s, peak, s->host_hw.name, s->host_hw.peak_gflops_f32);
    } else if (match) {
      hw_set_measured_peak(&s->host_hw, peak);
      s->host_peak_measured = true;
    }
  }
  free(dir);
  buf_free(&path);
  buf_free(&fp);
}

int session_calibrate(Session *s) {
  if (s->hw_foreign) {
    fprintf(s->err, "dyn: --calibrate measures this CPU, and %s is a model of another: calibrate without --hw\n", s->hw.name);
    return 1;
  }
  if (!cpu_backend(s)) {
    fprintf(s->err, "dyn: --calibrate: %s\n", s->cpu_why);
    return 1;
  }
  double p1, pall;
  char msg[512];
  fprintf(s->out, "measuring the f32 micro-kernel on %s (%d threads)...\n", s->hw.name, s->threads);
  fflush(s->out);
  if (!cpu_calibrate(s->cpu, &p1, &pall, msg, sizeof msg)) {
    fprintf(s->err, "dyn: --calibrate: %s\n", msg);
    return 1;
  }
  fprintf(s->out, "peak: %.1f GFLOP/s on one thread, %.1f GFLOP/s on %d (the hardware model says %.1f)\n", p1, pall,
          s->threads, s->hw.peak_gflops_f32);
  char *dir = calibration_path();
  if (!dir) {
    fprintf(s->err, "dyn: --calibrate: no $HOME or $XDG_CACHE_HOME to keep the result in\n");
    return 1;
  }
  Buf cmd = {0}, path = {0}, fp = {0};
  /* mkdir -p, one level at a time */
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(dir, 0755);
      *p = '/';
    }
  mkdir(dir, 0755);
  buf_printf(&path, "%s/calibration.txt", dir);
  fingerprint(&s->hw, &fp);
  /* replaced whole, so that a full disk or a kill leaves the last good calibration */
  Buf text = {0};
  buf_printf(&text, "# dyn --calibrate: measured once on this hardware, never per shape\n");
  buf_printf(&text, "fingerprint = %s\npeak_gflops_f32_1 = %.3f\npeak_gflops_f32 = %.3f\nthreads = %d\n", fp.s, p1, pall, s->threads);
  FileOut *f = file_out_open(path.s, NULL, msg, sizeof msg);
  bool ok = f && file_out_write(f, text.s, text.len, NULL, msg, sizeof msg);
  if (f && !ok) file_out_abandon(f);
  if (ok) ok = file_out_commit(f, msg, sizeof msg);
  buf_free(&text);
  int rc = 0;
  if (!ok) {
    fprintf(s->err, "dyn: --calibrate: %s: %s\n", path.s, msg);
    rc = 1;
  } else {
    fprintf(s->out, "kept in %s\n", path.s);
  }
  free(dir);
  buf_free(&cmd);
  buf_free(&path);
  buf_free(&fp);
  return rc;
}

/* ---- calling from C (the benchmark, embedders) ---- */

bool session_call(Session *s, const char *name, Tensor **args, int nargs, Tensor **outs, int maxouts, Buf *err) {
  Func *f = find_fn(s, name);
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
  Value r = call_fn(s, f, &call, vals);
  bool ok = !failed(s);
  if (!ok) {
    for (Diag *d = s->diags.head; d; d = d->next) buf_printf(err, "%s%s", err->len ? "; " : "", d->msg);
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
double session_predict(Session *s, const char *name, Tensor **args, int nargs) {
  Func *f = find_fn(s, name);
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
  if (!strcmp(s->target, "cpu") && f->backend) {
    Buf junk = {0};
    double t = cpu_schedule(s->cpu, f->backend, s->pc, &sz, s->threads, &junk);
    buf_free(&junk);
    return t;
  }
  const Poly *fl, *by;
  int64_t fv = 0, bv = 0;
  const char *why;
  cost_program(f->prog, s->pc, &fl, &by);
  poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
  poly_eval(by, eval_size_lookup, &sz, &bv, &why);
  return cost_roofline(&s->hw, s->threads, (double)fv, (double)bv);
}

double session_compile(Session *s, const char *name, Buf *err) {
  Func *f = find_fn(s, name);
  if (!f) {
    buf_printf(err, "no function named '%s'", name);
    return -1;
  }
  if (!cpu_backend(s)) {
    buf_puts(err, s->cpu_why);
    return -1;
  }
  if (!ensure_compiled(s, f)) {
    buf_puts(err, "compilation failed");
    return -1;
  }
  return cpu_program_compile_ms(f->backend);
}

int session_compiles(Session *s, const char *name) {
  Func *f = find_fn(s, name);
  return f ? f->compiles : -1;
}

/* ---- the session ---- */

Session *session_new(const SessionOptions *opt, FILE *out, FILE *err) {
  Session *s = xcalloc(1, sizeof *s);
  s->pc = poly_ctx_new();
  s->out = out;
  s->err = err;
  rng_seed(s, 0);
#ifdef HAVE_LLVM
  snprintf(s->target, sizeof s->target, "cpu");
#else
  snprintf(s->target, sizeof s->target, "ref");
#endif
  hw_detect_host(&s->host_hw);
  load_calibration(s);
  s->hw = s->host_hw;
  s->peak_measured = s->host_peak_measured;
  s->threads = opt && opt->threads > 0 ? opt->threads : (s->hw.cores > 0 ? s->hw.cores : 1);
  if (opt && opt->hw) {
    char msg[512];
    HwModel hw;
    if (!hw_load(opt->hw, &hw, msg, sizeof msg)) {
      fprintf(err, "dyn: %s; using the detected host\n", msg);
    } else if (!strcmp(hw.kind, "gpu")) {
      s->gpu_hw = hw;
      s->have_gpu_hw = s->gpu_hw_chosen = true;
    } else if (strcmp(hw.name, "host") || hw.path[0]) {
      const char *note = set_cpu_model(s, &hw, false);
      if (note) fprintf(err, "dyn: %s\n", note);
    }
  }
  if (opt && opt->target) {
    const char *t = opt->target;
    if (!strncmp(t, "gpu:", 4)) {       /* --target=gpu:tf32: the GPU, and its arithmetic */
      s->gpu_math = !strcmp(t + 4, "tf32") ? CUDA_TF32 : !strcmp(t + 4, "bf16") ? CUDA_BF16 : CUDA_EXACT;
      t = "gpu";
    }
    if (!strcmp(t, "cpu") && !cpu_backend(s)) fprintf(err, "dyn: %s\n", s->cpu_why);
    else if (!strcmp(t, "gpu") && !gpu_backend(s)) fprintf(err, "dyn: no GPU (%s); using %s\n", s->gpu_why, s->target);
    else snprintf(s->target, sizeof s->target, "%s", t);
  }
  if (!opt || !opt->no_prelude) {
    import_module(s, "linalg", (Span){0}, false);
    import_module(s, "nn", (Span){0}, false);
    diag_print_all(&s->diags, s->err);
    diag_clear(&s->diags);
  }
  s->nfns_prelude = s->fns.n;
  return s;
}

void session_set_interactive(Session *s, bool on) { s->interactive = on; }

void session_interrupt(Session *s) { s->interrupt = 1; }

int session_output_error(Session *s) {
  out_flush(s);
  return s->out_errno;
}

void session_complete(Session *s, const char *prefix, void (*add)(void *cookie, const char *cand), void *cookie) {
  size_t n = strlen(prefix);
  if (prefix[0] == ':') {
    for (int i = 0; i < NCOMMANDS; i++) {
      char c[40];
      snprintf(c, sizeof c, ":%s", commands[i].name);
      if (!strncmp(c, prefix, n)) add(cookie, c);
    }
    return;
  }
  for (int i = 0; i < s->vars.n; i++)
    if (!strncmp(s->vars.a[i].name, prefix, n)) add(cookie, s->vars.a[i].name);
  for (int i = 0; i < s->fns.n; i++)
    if (!strncmp(s->fns.a[i]->name, prefix, n)) add(cookie, s->fns.a[i]->name);
  for (int i = 0; i < NBUILTINS; i++)
    if (!strncmp(builtins[i].name, prefix, n)) add(cookie, builtins[i].name);
}

void session_banner(Session *s, Buf *out) {
  buf_printf(out, "dyn %s -- back end: %s, hardware: %s (%d cores, %d-bit vectors%s) -- :help for help",
             PACKAGE_VERSION, !strcmp(s->target, "ref") ? "reference evaluator" : "cpu (LLVM)", s->hw.name,
             s->hw.cores, s->hw.vector_bits, s->hw_foreign ? "; for looking, statements run on this CPU's code" : "");
}

void session_free(Session *s) {
  if (!s) return;
  arena_free(s->call_tmp);
  for (int i = 0; i < s->vars.n; i++) {
    free(s->vars.a[i].name);
    val_free(&s->vars.a[i].v);
  }
  vec_free(s->vars);
  free(s->var_slot);
  drop_cpu_code(s, true);
  for (int i = 0; i < s->fns.n; i++) {
    cpu_program_free(s->fns.a[i]->backend);
    cuda_program_free(s->fns.a[i]->gpu_backend);
    func_free(s->fns.a[i]);
  }
  for (int i = 0; i < s->retired.n; i++) {
    cpu_program_free(s->retired.a[i]->backend);
    cuda_program_free(s->retired.a[i]->gpu_backend);
    func_free(s->retired.a[i]);
  }
  cpu_backend_free(s->cpu);
  cuda_backend_free(s->gpu);
  vec_free(s->fns);
  vec_free(s->retired);
  for (int i = 0; i < s->kept.n; i++) arena_free(s->kept.a[i]);
  vec_free(s->kept);
  for (int i = 0; i < s->sources.n; i++) {
    free(s->sources.a[i]->name);
    free(s->sources.a[i]->text);
    free(s->sources.a[i]);
  }
  vec_free(s->sources);
  for (int i = 0; i < s->imported.n; i++) free(s->imported.a[i]);
  vec_free(s->imported);
  diag_clear(&s->diags);
  poly_ctx_free(s->pc);
  free(s);
}
