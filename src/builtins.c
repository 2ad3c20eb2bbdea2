/* builtins.c -- the built-in functions of top-level statements (zeros, rand, print, load,
 * save, allclose, ...), one table of them with their arity and help, and the session's
 * random numbers.  toplevel.c evaluates a call's arguments and calls the entry here; the
 * table also feeds :help, :type and completion.  Built-ins take and return whole values
 * (value.c), never the elements a lowered program computes.
 */
#include "config.h"
#include "session_int.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- random numbers: xoshiro256** seeded by splitmix64 ---- */

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void builtin_seed(Session *s, uint64_t seed) {
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

/* ---- the built-in functions ---- */

static bool want_tensor(Session *s, Expr *call, Value *args, int i) {
  if (args[i].kind == VAL_TENSOR) return true;
  state_error(s, call->args[i]->span, E_ARG_KIND, i + 1, call->name, "a tensor", "another kind of value");
  return false;
}

static Value bi_fill(Session *s, Expr *call, Value *args, int how) {
  if (args[0].kind != VAL_TYPE) {
    state_error(s, call->args[0]->span, E_ARG_KIND, 1, call->name, "a type such as f32[128, 64]", "another kind of value");
    return (Value){0};
  }
  double fillv = how;
  if (how == 2) {
    Value *v = &args[1];
    if (v->kind != VAL_TENSOR || v->t->rank != 0) {
      state_error(s, call->args[1]->span, E_ARG_KIND, 2, "full", "a number", "another kind of value");
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
  Tensor *t = top_new_tensor(s, call->span, args[0].elem, args[0].rank, args[0].dims);
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
    state_error(s, call->args[0]->span, E_ARG_KIND, 1, call->name, "a type such as f32[128, 64]", "another kind of value");
    return (Value){0};
  }
  if (!elem_is_float(args[0].elem)) {
    state_error(s, call->args[0]->span, E_BUILTIN, state_tmp_printf(s, "%s makes floats: use f32[...], f64[...], f16[...] or bf16[...]", call->name));
    return (Value){0};
  }
  Tensor *t = top_new_tensor(s, call->span, args[0].elem, args[0].rank, args[0].dims);
  if (!t) return (Value){0};
  int64_t n = tensor_numel(t);
  /* a uniform value has as many random bits as the type's significand, so that it never
   * rounds to 1: 24 for f32, 11 for f16, 8 for bf16, 53 for f64 */
  int bits = t->elem == DYN_F32 ? 24 : t->elem == DYN_F16 ? 11 : t->elem == DYN_BF16 ? 8 : 53;
  for (int64_t i = 0; i < n; i++) {
    double v;
    if (!normal) {
      v = bits < 53 ? ldexp((double)(rng_next(s) >> (64 - bits)), -bits) : rng_unit(s);
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
    state_error(s, call->args[0]->span, E_ARG_KIND, 1, "seed", "an integer", "another kind of value");
    return (Value){0};
  }
  builtin_seed(s, (uint64_t)tensor_get_i64(args[0].t, 0));
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
  state_out_flush(s);
  buf_free(&b);
  return (Value){0};
}

/* load("x.npy"), load("a.npz") (an archive of one array), load("a.npz", "W") */
static Value bi_load(Session *s, Expr *call, Value *args) {
  for (int i = 0; i < call->nargs; i++)
    if (args[i].kind != VAL_STR) {
      state_error(s, call->args[i]->span, E_ARG_KIND, i + 1, "load", i ? "an array's name in quotes" : "a file name in quotes",
                    "another kind of value");
      return (Value){0};
    }
  char msg[512];
  s->interrupt = 0;                  /* Ctrl-C stops the read between chunks */
  const char *path = args[0].s, *member = call->nargs > 1 ? args[1].s : NULL;
  if (member && !npz_is_npz(path)) {
    state_error(s, call->args[1]->span, E_BUILTIN, state_tmp_printf(s, "load: an array's name is for a .npz file, and %s is not one", path));
    return (Value){0};
  }
  Tensor *t = npz_is_npz(path) ? npz_load(path, member, &s->interrupt, msg, sizeof msg)
                               : npy_load(path, &s->interrupt, msg, sizeof msg);
  if (!t) {
    state_error(s, call->span, E_BUILTIN, msg);
    return (Value){0};
  }
  return val_tensor(t);
}

/* save(X, "x.npy"); save(W, b, ..., "a.npz"): each tensor a member named as the variable
 * passed (np.savez(f, W=W, b=b)), or arr_K for an expression (np.savez's positional name) */
static Value bi_save(Session *s, Expr *call, Value *args) {
  int n = call->nargs - 1;
  for (int i = 0; i < n; i++)
    if (!want_tensor(s, call, args, i)) return (Value){0};
  if (args[n].kind != VAL_STR) {
    state_error(s, call->args[n]->span, E_ARG_KIND, n + 1, "save", "a file name in quotes", "another kind of value");
    return (Value){0};
  }
  const char *path = args[n].s;
  char msg[512];
  s->interrupt = 0;                  /* Ctrl-C stops the write; the old file stays */
  if (!npz_is_npz(path)) {
    if (n != 1) {
      state_error(s, call->args[1]->span, E_BUILTIN, state_tmp_printf(s, "save: a .npy or .png file holds one array; "
                    "save several in a .npz file (save(W, b, \"model.npz\"))"));
      return (Value){0};
    }
    bool (*saver)(const Tensor *, const char *, volatile int *, char *, size_t) = png_path(path) ? png_save : npy_save;
    if (!saver(args[0].t, path, &s->interrupt, msg, sizeof msg)) state_error(s, call->span, E_BUILTIN, msg);
    return (Value){0};
  }
  Tensor *ts[64];
  const char *names[64];
  for (int i = 0; i < n; i++) {
    Expr *a = call->args[i];
    ts[i] = args[i].t;
    names[i] = a->kind == EX_NAME ? a->name : state_tmp_printf(s, "arr_%d", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(names[i], names[j])) {
        state_error(s, a->span, E_BUILTIN, state_tmp_printf(s, "save: two arrays named '%s' in %s", names[i], path));
        return (Value){0};
      }
  }
  if (!npz_save(path, ts, names, n, &s->interrupt, msg, sizeof msg)) state_error(s, call->span, E_BUILTIN, msg);
  return (Value){0};
}

/* scratch("x.npy"): a path in a directory of this session's own, made on first use under
 * $TMPDIR (else /tmp) and removed with what it holds when the session ends, so that
 * examples and the tour can save and load without writing where they were run from. */
static char *path_join(const char *dir, const char *name) {
  Buf b = {0};
  buf_printf(&b, "%s/%s", dir, name);
  return b.s;                        /* malloc'd: the caller owns it */
}

static Value bi_scratch(Session *s, Expr *call, Value *args) {
  const char *name = args[0].kind == VAL_STR ? args[0].s : NULL;
  if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
    state_error(s, call->args[0]->span, E_ARG_KIND, 1, "scratch", "a file name in quotes, without '/'", name ? "another name" : "another kind of value");
    return (Value){0};
  }
  if (!s->scratch_dir) {
    const char *tmp = getenv("TMPDIR");
    char *dir = path_join(tmp && *tmp ? tmp : "/tmp", "dyn-scratch.XXXXXX");
    if (!mkdtemp(dir)) {
      state_error(s, call->span, E_BUILTIN, state_tmp_printf(s, "scratch: cannot make a directory in %s: %s", tmp && *tmp ? tmp : "/tmp", strerror(errno)));
      free(dir);
      return (Value){0};
    }
    s->scratch_dir = dir;
  }
  return (Value){.kind = VAL_STR, .s = path_join(s->scratch_dir, name)};
}

void builtin_scratch_remove(Session *s) {
  if (!s->scratch_dir) return;
  DIR *d = opendir(s->scratch_dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char *p = path_join(s->scratch_dir, e->d_name);
      unlink(p);
      free(p);
    }
    closedir(d);
  }
  rmdir(s->scratch_dir);
  free(s->scratch_dir);
  s->scratch_dir = NULL;
}

static Value bi_allclose(Session *s, Expr *call, Value *args) {
  if (!want_tensor(s, call, args, 0) || !want_tensor(s, call, args, 1)) return (Value){0};
  Tensor *a = args[0].t, *b = args[1].t;
  double tol[2] = {1e-5, 1e-8};
  for (int i = 2; i < call->nargs; i++) {
    if (args[i].kind != VAL_TENSOR || args[i].t->rank != 0) {
      state_error(s, call->args[i]->span, E_ARG_KIND, i + 1, "allclose", "a number", "another kind of value");
      return (Value){0};
    }
    tol[i - 2] = tensor_get_f64(args[i].t, 0);
  }
  if (a->rank != b->rank || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank)) {
    state_error(s, call->span, E_BUILTIN, state_tmp_printf(s, "allclose: the shapes differ: %s and %s", state_ttype(s, a), state_ttype(s, b)));
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

/* One row a built-in: its name, arity, entry, and help. */
const Builtin builtin_table[] = {
  {"zeros", 1, 1, bi_zeros, true, "zeros(T): a tensor of type T filled with 0"},
  {"ones", 1, 1, bi_ones, true, "ones(T): filled with 1"},
  {"full", 2, 2, bi_full, true, "full(T, v): filled with v"},
  {"rand", 1, 1, bi_rand, true, "rand(T): uniform in [0, 1)"},
  {"randn", 1, 1, bi_randn, true, "randn(T): standard normal"},
  {"seed", 1, 1, bi_seed, false, "seed(n): restart the random numbers"},
  {"shape", 1, 1, bi_shape, false, "shape(X): the dimensions of X"},
  {"print", 0, 64, bi_print, false, "print(X, ...): print values"},
  {"load", 1, 2, bi_load, false, "load(\"x.npy\"), load(\"a.npz\", \"W\"): read a NumPy file"},
  {"save", 2, 64, bi_save, false, "save(X, \"x.npy\"), save(W, b, \"a.npz\"): write a NumPy file; save(X, \"x.png\"): a picture of a 2-D X"},
  {"scratch", 1, 1, bi_scratch, false, "scratch(\"x.npy\"): a file name in a directory removed when the session ends"},
  {"allclose", 2, 4, bi_allclose, false, "allclose(A, B[, rtol, atol]): equal within tolerances"},
  {"reshape", 2, 2, top_view_reshape, false, "reshape(X, [D1, ...]): X with new dimensions, the same elements in order", true},
  {"concat", 1, 64, top_view_concat, false, "concat(A, B, ..., axis): A, B, ... joined along axis (default 0)", true},
  {"stack", 1, 64, top_view_concat, false, "stack(A, B, ..., axis): A, B, ... of one shape along a new axis (default 0)", true},
};
const int builtin_count = (int)(sizeof builtin_table / sizeof builtin_table[0]);

const Builtin *builtin_find(const char *name) {
  for (int i = 0; i < builtin_count; i++)
    if (!strcmp(builtin_table[i].name, name)) return &builtin_table[i];
  return NULL;
}
