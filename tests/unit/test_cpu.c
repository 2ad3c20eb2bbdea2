/* test_cpu.c -- Check suite for cpu*.c, the compiled CPU back end, through its functions in
 * dyn_int.h: a small function is parsed, checked and lowered, compiled with cpu_compile, run with
 * cpu_run, and its outputs compared with what the reference evaluator (eval_program) gives
 * on the same inputs, over awkward sizes (0, 1, primes, 17, 33, 65).  Run-time errors, empty
 * kernels, the schedule (:sched) and the generated code (:code) are compared as the text a
 * user sees; the vector width expected there comes from the hardware model, not the host.
 */
#include "config.h"
#include "dyn_int.h"
#include "cpu_int.h"

#include <check.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

static const int64_t SIZES[] = {0, 1, 2, 3, 7, 17, 33, 65};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

static HwModel hw;
static CpuBackend *be;
static Arena *arena;
static PolyCtx *pc;
static Diags diags;
static Source src;
static Func *fns[8];
static int nfns;

static void setup(void) {
  char err[256];
  hw_detect_host(&hw);
  be = cpu_backend_new(&hw, 2, err, sizeof err);
  ck_assert_msg(be != NULL, "cpu_backend_new: %s", err);
  arena = arena_new();
  pc = poly_ctx_new();
  memset(&diags, 0, sizeof diags);
  nfns = 0;
}

static void teardown(void) {
  for (int i = 0; i < nfns; i++) {
    cpu_program_free(fns[i]->code.cpu);
    lower_free(fns[i]->code.prog);
  }
  diag_clear(&diags);
  arena_free(arena);
  poly_ctx_free(pc);
  cpu_backend_free(be);
}

static Func *lookup(void *env, const char *name) {
  (void)env;
  for (int i = 0; i < nfns; i++)
    if (!strcmp(fns[i]->name, name)) return fns[i];
  return NULL;
}

/* Check every function of text; lower the last one and compile it for the back end b.
 * The program is the Func's (fns[nfns - 1]), its compiled form in ->code.cpu. */
static Func *compile_on(CpuBackend *b, const char *text) {
  diag_clear(&diags);
  size_t len = strlen(text);
  src = (Source){.name = "t.dyn", .text = arena_strndup(arena, text, len), .len = len};
  int nst = 0;
  bool incomplete = false;
  Stmt **st = parse_source(arena, &src, &diags, &nst, &incomplete);
  SemaEnv env = {pc, lookup, NULL};
  for (Stmt **s = st; s < st + nst && !diags.nerrors; s++) {
    Func *f = (*s)->kind == ST_FN ? sema_function(&env, (*s)->fn, arena, &diags) : NULL;
    if (f && nfns < 8) fns[nfns++] = f;
  }
  if (diags.nerrors) {
    Buf m = {0};
    for (Diag *d = diags.head; d; d = d->next) diag_format(d, &m);
    ck_abort_msg("the test program does not check:\n%s", m.s);
  }
  diag_clear(&diags);
  Func *f = fns[nfns - 1];
  f->code.prog = lower_function(f, pc, lookup, NULL);
  char err[256];
  f->code.cpu = cpu_compile(b, f->code.prog, err, sizeof err);
  ck_assert_msg(f->code.cpu != NULL, "cpu_compile: %s", err);
  return f;
}

static Func *compile(const char *text) { return compile_on(be, text); }

/* ---- inputs: values with short exact forms, so any order of summing gives one answer ---- */

static Tensor *input(DynElem el, int rank, const int64_t *shape, int seed) {
  char err[128];
  Tensor *t = tensor_new(el, rank, shape, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  uint32_t x = 2463534242u + (uint32_t)seed * 7919u;
  for (int64_t i = 0; i < tensor_numel(t); i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    int v = (int)(x % 13) - 6;                     /* -6 .. 6 */
    if (elem_is_float(el)) tensor_set_f64(t, i, v * 0.5);
    else tensor_set_i64(t, i, v);
  }
  return t;
}

/* The sizes of f bound from its arguments (a size parameter from a scalar argument), and
 * its program at them as the session binds it (extents.c); unbind frees that. */
typedef struct Bound { const char *names[16]; int64_t vals[16]; EvalSizes sz; Extents x; } Bound;

static void bind(const Func *f, Tensor **args, Bound *b) {
  ck_assert_int_le(f->nsizes, 16);
  for (int v = 0; v < f->nsizes; v++) {
    const SizeVar *sv = &f->sizes[v];
    b->names[v] = sv->name;
    b->vals[v] = sv->dim < 0 ? tensor_get_i64(args[sv->param], 0) : args[sv->param]->shape[sv->dim];
  }
  b->sz = (EvalSizes){b->names, b->vals, f->nsizes};
  b->x = (Extents){0};
  ck_assert_msg(extents_bind(&b->x, f->code.prog, &b->sz), "%s", b->x.err);
}

static void unbind(Bound *b) { extents_free(&b->x); }

/* ---- comparing with the reference evaluator ---- */

/* Do a (the back end's) and r (the reference's) agree: same type and shape, integers and
 * booleans equal, floats within a few units in the last place of f32 (exp, division). */
static void same(const Tensor *a, const Tensor *r, const char *what) {
  Buf ta = {0}, tr = {0};
  tensor_type_str(a, &ta);
  tensor_type_str(r, &tr);
  ck_assert_msg(!strcmp(ta.s, tr.s), "%s: cpu gives %s, the reference %s", what, ta.s, tr.s);
  buf_free(&ta);
  buf_free(&tr);
  for (int64_t i = 0; i < tensor_numel(r); i++) {
    if (!elem_is_float(r->elem)) {
      long long x = tensor_get_i64(a, i), y = tensor_get_i64(r, i);
      ck_assert_msg(x == y, "%s: element %lld is %lld, the reference %lld", what, (long long)i, x, y);
      continue;
    }
    double x = tensor_get_f64(a, i), y = tensor_get_f64(r, i);
    bool ok = (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= 1e-6 * fmax(1.0, fabs(y));
    ck_assert_msg(ok, "%s: element %lld is %.9g, the reference %.9g", what, (long long)i, x, y);
  }
}

/* Run f on args on the CPU and with the reference evaluator; both must succeed and agree.
 * what names the case in messages. */
static void agree(Func *f, Tensor **args, const char *what) {
  Bound b;
  bind(f, args, &b);
  Tensor *got[8] = {0}, *ref[8] = {0};
  char err[256] = "";
  int st = cpu_run(be, f->code.cpu, args, &b.x, got, NULL, err, sizeof err);
  ck_assert_msg(st == 1, "%s: cpu_run gives %d: %s", what, st, err);
  Buf rerr = {0};
  Span sp = {0};
  ck_assert_msg(eval_program(f->code.prog, args, &b.x, ref, NULL, &rerr, &sp), "%s: reference: %s", what,
                rerr.s);
  unbind(&b);
  for (int i = 0; i < f->nrets; i++) {
    same(got[i], ref[i], what);
    tensor_release(got[i]);
    tensor_release(ref[i]);
  }
  buf_free(&rerr);
}

static void release(Tensor **t, int n) {
  for (int i = 0; i < n; i++) tensor_release(t[i]);
}

/* ---- the kinds of kernel, on awkward shapes ---- */

/* Run f on every shape of the given rank with sizes from SIZES, its nargs arguments all of
 * that shape and element type el, and compare with the reference. */
static void on_all_shapes(Func *f, DynElem el, int rank, int nargs) {
  int n = rank == 1 ? NSIZES : NSIZES * NSIZES;
  for (int c = 0; c < n; c++) {
    int64_t sh[2] = {SIZES[c % NSIZES], SIZES[c / NSIZES]};
    Tensor *args[4];
    for (int i = 0; i < nargs; i++) args[i] = input(el, rank, sh, c + i);
    char what[96];
    snprintf(what, sizeof what, "%s on %lld x %lld", f->name, (long long)sh[0], (long long)sh[1]);
    agree(f, args, what);
    release(args, nargs);
  }
}

/* A function, the element type of its arguments, their rank and how many there are. */
typedef struct Case { const char *text; DynElem el; int rank, nargs; } Case;

static const Case ELEMENTWISE[] = {
  {"fn ew(X: f32[N, M], Y: f32[N, M]) -> f32[N, M] {"
   " Z[i, j] = X[i, j] * 2.0 + Y[i, j] - abs(X[i, j]) + max(X[i, j], Y[i, j]); return Z }", DYN_F32, 2, 2},
  /* integers: floor division and modulo by a constant, as the reference rounds them */
  {"fn idiv(X: i64[N]) -> (i64[N], i32[N]) {"
   " Q[i] = X[i] / 4 + X[i] % 3 * i; R[i] = i32(X[i]) % 5 - i32(i); return (Q, R) }", DYN_I64, 1, 1},
};

static const Case REDUCTIONS[] = {
  {"fn red(X: f32[N, M]) -> (f32[N], f32[M], f32) {"
   " R[i] = sum[j] X[i, j] * X[i, j]; C[j] = max[i] X[i, j]; T = sum[i, j] X[i, j]; return (R, C, T) }",
   DYN_F32, 2, 1},
  /* an empty product is 1, an empty sum 0 */
  {"fn ired(X: i64[N]) -> (i64, i64) { P = prod[i] (X[i] % 3 + 2); S = sum[i] X[i] * i; return (P, S) }",
   DYN_I64, 1, 1},
};

/* Scans along the last and the first axis (tiles of rows, rows combined a vector at a time),
 * f32 and i32, against the evaluator on every shape */
static const Case SCANS[] = {
  {"fn sc(X: f32[N, M]) -> (f32[N, M], f32[N, M], f32[N, M]) {"
   " R[i, j] = scan[j] +(X[i, j]); D[i, j] = scan[i] max(X[i, j] * 2.0); P[i, j] = scan[j] *(X[i, j] + 1.0);"
   " return (R, D, P) }", DYN_F32, 2, 1},
  {"fn isc(X: i32[N, M]) -> (i32[N, M], i32[N, M]) {"
   " R[i, j] = scan[j] min(X[i, j]); D[i, j] = scan[i] +(X[i, j] * 3); return (R, D) }", DYN_I32, 2, 1},
};

/* Row-wise chains, each one kernel per row: a softmax and a layernorm */
static const Case ROWS[] = {
  {"fn sm(X: f32[B, N]) -> f32[B, N] {\n"
   "  m[b] = max[n] X[b, n]\n"
   "  e[b, n] = exp(X[b, n] - m[b])\n"
   "  s[b] = sum[n] e[b, n]\n"
   "  Y[b, n] = e[b, n] / s[b]\n"
   "  return Y\n}", DYN_F32, 2, 1},
  {"fn ln(X: f64[B, N]) -> f64[B, N] {\n"
   "  mu[b] = sum[n] X[b, n] / f64(N)\n"
   "  d[b, n] = X[b, n] - mu[b]\n"
   "  v[b] = sum[n] d[b, n] * d[b, n] / f64(N)\n"
   "  Y[b, n] = d[b, n] * rsqrt(v[b] + 0.00001)\n"
   "  return Y\n}", DYN_F64, 2, 1},
};

static void all_cases(const Case *c, int n) {
  for (int i = 0; i < n; i++) on_all_shapes(compile(c[i].text), c[i].el, c[i].rank, c[i].nargs);
}

START_TEST(test_elementwise) { all_cases(ELEMENTWISE, 2); }
END_TEST

START_TEST(test_reductions) { all_cases(REDUCTIONS, 2); }
END_TEST

START_TEST(test_scans) { all_cases(SCANS, 2); }
END_TEST

START_TEST(test_row_kernels) { all_cases(ROWS, 2); }
END_TEST

START_TEST(test_contraction) {
  Func *f = compile("fn mm(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
                    "  C[i, j] = sum[k] A[i, k] * B[k, j]\n  return C\n}");
  for (int a = 0; a < NSIZES; a++)
    for (int b = 0; b < NSIZES; b++)
      for (int c = 0; c < NSIZES; c += 2 + (a + b) % 2) {
        int64_t sa[2] = {SIZES[a], SIZES[c]}, sb[2] = {SIZES[c], SIZES[b]};
        Tensor *args[2] = {input(DYN_F32, 2, sa, a), input(DYN_F32, 2, sb, b)};
        char what[64];
        snprintf(what, sizeof what, "matmul %lld x %lld x %lld", (long long)sa[0], (long long)sa[1],
                 (long long)sb[1]);
        agree(f, args, what);
        release(args, 2);
      }
  /* batched, f64, B transposed */
  f = compile("fn bmm(A: f64[P, M, K], B: f64[P, N, K]) -> f64[P, M, N] {\n"
              "  C[p, i, j] = sum[k] A[p, i, k] * B[p, j, k]\n  return C\n}");
  for (int a = 0; a < NSIZES; a += 3) {
    int64_t sa[3] = {3, SIZES[a], 17}, sb[3] = {3, 33, 17};
    Tensor *args[2] = {input(DYN_F64, 3, sa, 8), input(DYN_F64, 3, sb, 9)};
    agree(f, args, "bmm");
    release(args, 2);
  }
}
END_TEST

/* ---- inputs read through their strides ----
 * The caller's arrays as NumPy makes them: a view of a bigger buffer with any strides, in
 * elements.  Each layout's strides for a view of shape (n0, n1); a rank-1 view takes the
 * last.  The compiled code must read them in place (cpu_run answers 1, no evaluator) and
 * agree with the evaluator on a C-ordered copy. */
enum { L_STEP, L_T, L_REVROWS, L_REVCOLS, L_SLICE, L_BROW, L_BCOL, L_REVT, NLAYOUTS };
static const char *const LAYOUT_NAMES[] = {"X[:, ::2]", "X.T", "X[::-1]", "X[:, ::-1]", "X[2:, 3:]",
                                           "broadcast row", "broadcast column", "X.T[::-1, ::-1]"};

static void layout_strides(int layout, const int64_t *n, int64_t *st) {
  int64_t q = 2 * n[1] + 3, t = n[0] + 1;        /* row pitches of the bigger buffers */
  static const int sign[NLAYOUTS][2] = {{1, 1}, {1, 1}, {-1, 1}, {1, -1}, {1, 1}, {0, 1}, {1, 0}, {-1, -1}};
  int64_t a[NLAYOUTS][2] = {{2 * q, 2}, {1, t}, {q, 1}, {q, 1}, {q, 1}, {0, 1}, {1, 0}, {1, t}};
  st[0] = sign[layout][0] * a[layout][0];
  st[1] = sign[layout][1] * a[layout][1];
}

/* A view of the given layout over a new buffer of values (*base: the caller releases it
 * after the view). */
static Tensor *strided_input(DynElem el, int rank, const int64_t *shape, int layout, int seed, Tensor **base) {
  int64_t n[2] = {shape[0], rank == 2 ? shape[1] : 1}, st2[2], st[2];
  layout_strides(layout, n, st2);
  if (rank == 1) st[0] = st2[1];
  else st[0] = st2[0], st[1] = st2[1];
  int64_t lo = 3, hi = 3;                         /* a margin each side: an edge read shows */
  for (int d = 0; d < rank; d++) {
    int64_t span = shape[d] > 0 ? (shape[d] - 1) * st[d] : 0;
    if (span < 0) lo -= span;
    else hi += span;
  }
  int64_t total = lo + hi + 1;
  *base = input(el, 1, &total, seed);
  return tensor_wrap(el, rank, shape, st, (char *)tensor_data(*base) + lo * elem_size(el));
}

/* f on views of every layout and shape: compiled, in place, as the evaluator on copies. */
static void strided_agree(Func *f, DynElem el, int rank, int nargs, const int *layouts, int nlayouts) {
  for (int li = 0; li < nlayouts; li++)
    for (int c = 0; c < (rank == 1 ? NSIZES : NSIZES * NSIZES); c += rank == 1 ? 1 : 3) {
      int64_t sh[2] = {SIZES[c % NSIZES], SIZES[c / NSIZES]};
      Tensor *args[4], *bases[4], *copies[4];
      char err[256] = "";
      for (int i = 0; i < nargs; i++) {
        args[i] = strided_input(el, rank, sh, layouts[(li + i) % nlayouts], c + i, &bases[i]);
        copies[i] = tensor_contiguous_copy(args[i], err, sizeof err);
      }
      char what[128];
      snprintf(what, sizeof what, "%s on %s, %lld x %lld", f->name, LAYOUT_NAMES[layouts[li]], (long long)sh[0],
               (long long)sh[1]);
      Bound b;
      bind(f, args, &b);
      Tensor *got[8] = {0}, *ref[8] = {0};
      int st = cpu_run(be, f->code.cpu, args, &b.x, got, NULL, err, sizeof err);
      ck_assert_msg(st == 1, "%s: cpu_run gives %d: %s", what, st, err);
      Buf rerr = {0};
      Span sp = {0};
      ck_assert_msg(eval_program(f->code.prog, copies, &b.x, ref, NULL, &rerr, &sp), "%s: %s", what, rerr.s);
      for (int i = 0; i < f->nrets; i++) {
        same(got[i], ref[i], what);
        tensor_release(got[i]);
        tensor_release(ref[i]);
      }
      buf_free(&rerr);
      release(args, nargs);
      release(copies, nargs);
      release(bases, nargs);
      unbind(&b);
    }
}

START_TEST(test_strided_inputs) {
  static const int all[] = {L_STEP, L_T, L_REVROWS, L_REVCOLS, L_SLICE, L_BROW, L_BCOL, L_REVT};
  static const int last[] = {L_STEP, L_REVCOLS, L_BROW, L_BCOL, L_T};      /* rank 1: 2, -1, 1, 0, t */
  const Case *kinds[] = {&ELEMENTWISE[0], &REDUCTIONS[0], &SCANS[0], &ROWS[0], &ROWS[1]};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
    strided_agree(compile(kinds[k]->text), kinds[k]->el, kinds[k]->rank, kinds[k]->nargs, all, NLAYOUTS);
  strided_agree(compile(ELEMENTWISE[1].text), DYN_I64, 1, 1, last, 5);
  /* a layout change (tiles transposed in registers) and a contraction on the GEMM engine */
  strided_agree(compile("fn tr(X: f32[N, M]) -> f32[M, N] { Y[j, i] = X[i, j] * 3.0; return Y }"), DYN_F32, 2, 1,
                all, NLAYOUTS);
  strided_agree(compile("fn mmt(A: f32[M, K], B: f32[N, K]) -> f32[M, N] {\n"
                        "  C[i, j] = sum[k] A[i, k] * B[j, k]\n  return C\n}"), DYN_F32, 2, 2, all, NLAYOUTS);
}
END_TEST

/* Inputs whose last axis has stride 1 -- C order, a slice of a bigger array, reversed or
 * broadcast rows -- run the kernels compiled for it: the strided variant is compiled only when
 * a call brings a last stride other than 1, and then serves that call. */
START_TEST(test_strided_variant_on_demand) {
  static const int unit_last[] = {L_SLICE, L_REVROWS, L_BROW};
  Func *f = compile(ROWS[0].text);
  strided_agree(f, DYN_F32, 2, 1, unit_last, 3);
  on_all_shapes(f, DYN_F32, 2, 1);
  ck_assert_msg(!((CpuProgram *)f->code.cpu)->strided_tried, "a strided variant was compiled for inputs with unit last strides");
  static const int step[] = {L_STEP};
  strided_agree(f, DYN_F32, 2, 1, step, 1);
  const CpuProgram *cp = f->code.cpu;
  ck_assert(cp->strided_tried && cp->strided_ok);
}
END_TEST

/* ---- errors at run time ---- */

/* Run f on args on the CPU expecting status want; with want 0 (the code found an error), the
 * reference's message, which the session then prints, must be msg. */
static void fails(Func *f, Tensor **args, int want, const char *msg) {
  Bound b;
  bind(f, args, &b);
  Tensor *got[8] = {0};
  char err[256] = "";
  int st = cpu_run(be, f->code.cpu, args, &b.x, got, NULL, err, sizeof err);
  ck_assert_msg(st == want, "cpu_run gives %d (%s), not %d", st, err, want);
  if (want == -1) {
    unbind(&b);
    ck_assert_str_eq(err, msg);
    return;
  }
  Tensor *ref[8] = {0};
  Buf rerr = {0};
  Span sp = {0};
  ck_assert(!eval_program(f->code.prog, args, &b.x, ref, NULL, &rerr, &sp));
  unbind(&b);
  ck_assert_str_eq(rerr.s, msg);
  ck_assert(sp.src != NULL);                     /* located at the access */
  buf_free(&rerr);
}

START_TEST(test_bounds_check) {
  Func *f = compile("fn gather(X: f32[N], I: i64[M]) -> f32[M] {\n"
                    "  Y[j] = X[I[j]] * 2.0\n  return Y\n}");
  int64_t n = 17, m = 33;
  Tensor *args[2] = {input(DYN_F32, 1, &n, 1), input(DYN_I64, 1, &m, 2)};
  for (int64_t j = 0; j < m; j++) tensor_set_i64(args[1], j, (j * 5) % n);
  agree(f, args, "gather in bounds");
  tensor_set_i64(args[1], 32, 17);
  fails(f, args, 0, "I[32] = 17 is out of range for axis 0 of X (size 17)");
  tensor_set_i64(args[1], 32, -1);
  fails(f, args, 0, "I[32] = -1 is out of range for axis 0 of X (size 17)");
  release(args, 2);

  f = compile("fn dv(X: i64[N], d: i64) -> i64[N] {\n  Y[i] = X[i] / d\n  return Y\n}");
  Tensor *dargs[2] = {input(DYN_I64, 1, &n, 3), input(DYN_I64, 0, NULL, 0)};
  tensor_set_i64(dargs[1], 0, 0);
  fails(f, dargs, 0, "integer division by zero in X[i] / d");
  release(dargs, 2);
}
END_TEST

/* A kernel whose results have no elements, and which cannot fail, does not run: 2^50 rows of
 * nothing take no time (the test's timeout would end a walk over them). */
START_TEST(test_empty) {
  Func *f = compile(ROWS[0].text);
  int64_t sh[2] = {(int64_t)1 << 50, 0};
  Tensor *args[1] = {input(DYN_F32, 2, sh, 1)};
  agree(f, args, "softmax of 2^50 x 0");
  release(args, 1);
  f = compile("fn colmax(X: f32[N, M]) -> f32[M] {\n  C[j] = max[i] X[i, j]\n  return C\n}");
  int64_t sh2[2] = {(int64_t)1 << 50, 0};
  args[0] = input(DYN_F32, 2, sh2, 1);
  agree(f, args, "column maxima of 2^50 x 0");
  release(args, 1);
}
END_TEST

/* ---- what :sched and :code show, for the model in use ---- */

/* The vector width the model gives the kernels, as :sched and :code name it. */
static int model_bits(const HwModel *h) { return h->vector_bits >= 128 ? h->vector_bits : 128; }

static void sched_and_code(CpuBackend *b, const HwModel *h) {
  int bits = model_bits(h);
  char want[128];

  Func *f = compile_on(b, "fn mm(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
                          "  C[i, j] = sum[k] A[i, k] * B[k, j]\n  return C\n}");
  const char *names[3] = {"M", "K", "N"};
  int64_t vals[3] = {65, 33, 17};
  EvalSizes sz = {names, vals, 3};
  Buf out = {0};
  Extents x = {0};
  ck_assert(extents_bind(&x, f->code.prog, &sz));
  double t = cpu_schedule(b, f->code.cpu, pc, &x, 2, &out);
  extents_free(&x);
  ck_assert_msg(strstr(out.s, "kernel mm_C\n") == out.s, "%s", out.s);
  snprintf(want, sizeof want, "on %s (", h->name);
  ck_assert_msg(strstr(out.s, want), "the schedule does not name %s:\n%s", h->name, out.s);
  snprintf(want, sizeof want, ": %d-bit vectors (%d x f32)", bits, bits / 32);
  ck_assert_msg(strstr(out.s, want), "no \"%s\" in the schedule:\n%s", want, out.s);
  ck_assert(t > 0);
  buf_free(&out);

  f = compile_on(b, "fn ew(X: f32[N]) -> f32[N] {\n  Y[i] = X[i] * 3.0 + 1.0\n  return Y\n}");
  cpu_schedule(b, f->code.cpu, pc, NULL, 2, &out);
  ck_assert_str_eq(out.s, "kernel ew_Y\n  stage Y: vectorised along i\n  cores: tasks over i\n");
  buf_free(&out);
  char err[256];
  ck_assert_msg(cpu_program_code(b, f->code.cpu, "llvm", &out, err, sizeof err), "%s", err);
  snprintf(want, sizeof want, "<%d x float>", bits / 32);
  ck_assert_msg(strstr(out.s, want), "no %s in the code for %s", want, h->name);
  buf_free(&out);
  if (!strcmp(h->arch, "x86_64") || !h->arch[0]) {
    ck_assert_msg(cpu_program_code(b, f->code.cpu, "asm", &out, err, sizeof err), "%s", err);
    const char *reg = bits >= 512 ? "%zmm" : bits >= 256 ? "%ymm" : "%xmm";
    ck_assert_msg(strstr(out.s, reg), "no %s in the assembly for %s", reg, h->name);
    buf_free(&out);
  }
}

START_TEST(test_schedule_and_code_host) {
  sched_and_code(be, &hw);
}
END_TEST

/* Free back end b and the programs compiled on it (before it). */
static void free_backend(CpuBackend *b) {
  for (int i = 0; i < nfns; i++) {
    cpu_program_free(fns[i]->code.cpu);
    fns[i]->code.cpu = NULL;
  }
  cpu_backend_free(b);
}

/* A back end for the named model, whatever this CPU has: for code that is only looked at. */
static CpuBackend *model_backend(const char *name, HwModel *m) {
  char err[256];
  ck_assert_msg(hw_load(name, m, err, sizeof err), "%s", err);
  CpuBackend *b = cpu_backend_new(m, 2, err, sizeof err);   /* any x86-64 host */
  ck_assert_msg(b, "no back end for %s: %s", name, err);
  return b;
}

/* A model other than the host's: its own width, whatever this CPU has. */
START_TEST(test_schedule_and_code_model) {
  HwModel m;
  char err[256];
  ck_assert_msg(hw_load("generic-avx2", &m, err, sizeof err), "%s", err);
  ck_assert_int_eq(m.vector_bits, 256);
  CpuBackend *b = cpu_backend_new(&m, 2, err, sizeof err);
  if (!b) {
    fprintf(stderr, "test_cpu: no back end for generic-avx2 here (%s): skipped\n", err);
    return;
  }
  sched_and_code(b, &m);
  free_backend(b);
}
END_TEST

/* A gather, X[I[j]], is vectorised: the slots' alias scopes let the loop vectoriser bound
 * its reads, and on a model whose gathers LLVM's cost model takes (AVX-512) it uses them.
 * The model is named, not the host's: the code is only looked at. */
START_TEST(test_gather_code) {
  HwModel m;
  char err[256];
  CpuBackend *b = model_backend("skylake-avx512", &m);
  Func *f = compile_on(b, "fn gat(X: f32[N], I: i32[M]) -> f32[M] {\n  Y[j] = X[I[j]] * 2.0\n  return Y\n}");
  Buf out = {0};
  ck_assert_msg(cpu_program_code(b, f->code.cpu, "llvm", &out, err, sizeof err), "%s", err);
  ck_assert_msg(strstr(out.s, "@llvm.masked.gather.v16f32"), "no 16-lane gather in:\n%s", out.s);
  buf_free(&out);
  free_backend(b);
}
END_TEST

/* A scan's in-order pass is vectorised across the other axis at the model's width: a scan
 * along the last axis a vector of rows at a time, one along the first a vector along the
 * rows.  Each kernel's code must hold the combining step, named "scan", on vectors of
 * vector_bits / 32 floats (at most 16) -- for two models, never the host's width. */
START_TEST(test_scan_code) {
  static const char *const models[] = {"skylake-avx512", "zen3"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    HwModel m;
    char err[256], want[64];
    CpuBackend *b = model_backend(models[i], &m);
    Func *f = compile_on(b, "fn sc(X: f32[B, N]) -> (f32[B, N], f32[B, N]) {\n"
                            "  R[b, n] = scan[n] +(X[b, n])\n  D[b, n] = scan[b] +(X[b, n])\n  return (R, D)\n}");
    Buf out = {0};
    ck_assert_msg(cpu_program_code(b, f->code.cpu, "llvm", &out, err, sizeof err), "%s", err);
    int w = m.vector_bits / 32 > 16 ? 16 : m.vector_bits / 32;
    snprintf(want, sizeof want, " = fadd <%d x float>", w);
    int vectorised = 0;
    for (char *k = strstr(out.s, "\ndefine "); k; ) {
      char *next = strstr(k + 1, "\ndefine "), *at = k, *hit = NULL;
      while ((at = strstr(at + 1, want)) && (!next || at < next) && !hit) {
        char *line = at;
        while (line > out.s && line[-1] != '\n') line--;
        if (strncmp(line, "  %scan", 7) == 0) hit = at;
      }
      vectorised += hit != NULL;
      k = next;
    }
    ck_assert_msg(vectorised == 2, "%s: %d of 2 scan kernels combine%s in:\n%s", models[i], vectorised, want, out.s);
    buf_free(&out);
    free_backend(b);
  }
}
END_TEST

/* A transpose runs in tiles transposed in registers at the model's width: W x W elements, W
 * the lanes of a vector (16 f32 or 8 f64 on a 512-bit model, 8 and 4 on a 256-bit one), each
 * tile log2(W) rounds of W two-vector shuffles and W whole-vector stores; the assembly
 * shuffles registers of that width.  For two models, never the host's; the code is only
 * looked at.  The model prices such a tile more when its rows crowd the L1's sets: a
 * power-of-two row length costs more an element than one a line shorter where the tile has
 * more rows than the L1 has ways (cpu_layout.c: up to 1.5 times).  The streaming twin
 * prefetches each tile's input lines ahead (cpu.c's tile_load). */
START_TEST(test_layout_code) {
  static const char *const models[] = {"skylake-avx512", "zen3"};
  static const char *const types[][2] = {{"f32", "float"}, {"f64", "double"}};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    for (size_t t = 0; t < 2; t++) {
      HwModel m;
      char err[256], src[256], want[64];
      CpuBackend *b = model_backend(models[i], &m);
      snprintf(src, sizeof src, "fn tr(A: %s[M, N]) -> %s[N, M] {\n  T[j, i] = A[i, j]\n  return T\n}", types[t][0], types[t][0]);
      Func *f = compile_on(b, src);
      int w = m.vector_bits / (t ? 64 : 32), lg = 0;
      while ((1 << lg) < w) lg++;
      Buf out = {0};
      ck_assert_msg(cpu_program_code(b, f->code.cpu, "llvm", &out, err, sizeof err), "%s", err);
      snprintf(want, sizeof want, "shufflevector <%d x %s>", w, types[t][1]);
      int shuffles = 0, stores = 0;
      for (const char *at = out.s; (at = strstr(at, want)); at++) shuffles++;
      snprintf(want, sizeof want, "store <%d x %s>", w, types[t][1]);
      for (const char *at = out.s; (at = strstr(at, want)); at++) stores++;
      ck_assert_msg(shuffles >= w * lg && shuffles % (w * lg) == 0 && stores >= w,
                    "%s %s: %d shuffles of %d lanes (tiles of %d x %d need %d each), %d stores in:\n%s",
                    models[i], types[t][0], shuffles, w, w, w, w * lg, stores, out.s);
      /* the streaming twin's tile prefetches a line of each of its w input rows (a tile
       * ahead); the kernel for tensors in cache none */
      int prefetches = 0;
      for (const char *at = out.s; (at = strstr(at, "call void @llvm.prefetch")); at++) prefetches++;
      ck_assert_msg(prefetches == w, "%s %s: %d prefetches, tiles of %d rows", models[i], types[t][0], prefetches, w);
      buf_free(&out);
      ck_assert_msg(cpu_program_code(b, f->code.cpu, "asm", &out, err, sizeof err), "%s", err);
      const char *reg = m.vector_bits >= 512 ? "%zmm" : "%ymm";
      bool shuf = false;
      for (char *line = out.s; line && !shuf; line = strchr(line + 1, '\n'))
        shuf = (strncmp(line, "\n\tvperm", 6) == 0 || strncmp(line, "\n\tvshuf", 6) == 0 ||
                strncmp(line, "\n\tvunpck", 7) == 0) && strstr(line, reg) && strstr(line, reg) < strchr(line + 1, '\n');
      ck_assert_msg(shuf, "%s %s: no shuffle of %s registers in the assembly", models[i], types[t][0], reg);
      buf_free(&out);
      /* the model: rows of 1024 elements (4 or 8 KiB) fall into one set of the L1, rows of 1008
       * into many; a tile whose rows outnumber the set's ways costs more an element (up to 1.5
       * times), one whose rows fit costs the same */
      double per[2];
      int64_t n[2] = {1008, 1024};
      for (int k = 0; k < 2; k++) {
        const char *names[2] = {"M", "N"};
        int64_t vals[2] = {32, n[k]};
        EvalSizes sz = {names, vals, 2};
        Extents x = {0};
        ck_assert(extents_bind(&x, f->code.prog, &sz));
        per[k] = cpu_schedule(b, f->code.cpu, pc, &x, 1, &out) / (double)(32 * n[k]);
        extents_free(&x);
        ck_assert_msg(strstr(out.s, "model: a layout change: "), "%s", out.s);
        buf_free(&out);
      }
      int ways = m.level[0].ways;
      ck_assert_msg(ways > 0 && (w > ways ? per[1] > 1.3 * per[0] : per[1] < 1.1 * per[0]),
                    "%s %s: tiles of %d rows, %d ways: %g s an element at 32 x 1024, %g at 32 x 1008",
                    models[i], types[t][0], w, ways, per[1], per[0]);
      free_backend(b);
    }
}
END_TEST

/* Softmax's quotient e[b, n] / s[b] divides once a row: its division may use a reciprocal
 * (cpu.c's fast_flags), which LLVM's LICM takes out of the row's loops, so the vector loops
 * multiply by 1 / s[b] and every fdiv left is that scalar reciprocal.  A division of each
 * element (an fdiv of a vector) is 8 lane-operations where the multiply is one. */
START_TEST(test_softmax_reciprocal) {
  static const char *const models[] = {"skylake-avx512", "zen3", "zen5", "generic-avx2"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    HwModel m;
    char err[256], vmul[64];
    CpuBackend *b = model_backend(models[i], &m);
    Func *f = compile_on(b, ROWS[0].text);
    Buf out = {0};
    ck_assert_msg(cpu_program_code(b, f->code.cpu, "llvm", &out, err, sizeof err), "%s", err);
    int recips = 0;
    for (const char *l = out.s; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
      const char *d = strstr(l, " fdiv "), *eol = strchr(l, '\n');
      if (!d || (eol && d > eol)) continue;
      const char *ty = strstr(d, "float 1.000000e+00, ");
      ck_assert_msg(ty && (!eol || ty < eol), "%s: a division that is not a row's reciprocal: %.*s", models[i],
                    (int)(eol ? eol - l : (long)strlen(l)), l);
      recips++;
    }
    snprintf(vmul, sizeof vmul, "fmul nsz arcp contract <%d x float>", m.vector_bits / 32);
    ck_assert_msg(recips > 0 && strstr(out.s, vmul), "%s: %d reciprocals, no %s in:\n%s", models[i], recips, vmul, out.s);
    buf_free(&out);
    free_backend(b);
  }
}
END_TEST

/* A reduction over several axes, or a middle one, walks the axes that lie together in
 * memory as one loop, in the operand's order (cpu_reduce.c): batch norm's statistics sum
 * (h w) as one run inside n, the middle axis b of X[a, b, c, d] adds whole (c d) runs of the
 * result.  :sched names the runs; the code sums in vectors of the model's width (16 f32 on
 * AVX-512, 8 on zen3's 256 bits), for two models, never the host's; the code is only looked
 * at. */
START_TEST(test_reduce_code) {
  static const char *const models[] = {"skylake-avx512", "zen3"};
  static const char *const srcs[][2] = {
      {"fn bn(X: f32[N, C, H, W]) -> f32[C] {\n  Y[c] = sum[n, h, w] X[n, c, h, w]\n  return Y\n}",
       "  stage Y: a reduction in runs of axes, outer to inner: n reduced, c kept, (h w) reduced\n"},
      {"fn mid(X: f32[A, B, C, D]) -> f32[A, C, D] {\n  Y[a, c, d] = sum[b] X[a, b, c, d]\n  return Y\n}",
       "  stage Y: a reduction in runs of axes, outer to inner: a kept, b reduced, (c d) kept\n"}};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    for (size_t k = 0; k < 2; k++) {
      HwModel m;
      char err[256], want[80];
      CpuBackend *b = model_backend(models[i], &m);
      Func *f = compile_on(b, srcs[k][0]);
      Buf out = {0};
      cpu_schedule(b, f->code.cpu, pc, NULL, 2, &out);
      ck_assert_msg(strstr(out.s, srcs[k][1]), "%s: no \"%s\" in:\n%s", models[i], srcs[k][1], out.s);
      buf_free(&out);
      ck_assert_msg(cpu_program_code(b, f->code.cpu, "llvm", &out, err, sizeof err), "%s", err);
      snprintf(want, sizeof want, "fadd reassoc nsz arcp contract <%d x float>", m.vector_bits / 32);
      ck_assert_msg(strstr(out.s, want), "%s: no %s in:\n%s", models[i], want, out.s);
      buf_free(&out);
      free_backend(b);
    }
}
END_TEST

/* A thread's scratch (cpu_rt.c): a call's buffer and its tasks' are apart, so the tasks the
 * calling thread runs itself (the grouped convolution's gathers) never move the call's; each
 * is kept from one use to the next while it is large enough, 64-byte aligned, and a call's
 * over 64 MB is given back when the call is done. */
START_TEST(test_scratch_slots) {
  char *call = cpu_scratch_call(1000);
  ck_assert_ptr_nonnull(call);
  ck_assert_uint_eq((uintptr_t)call % 64, 0);
  memset(call, 7, 1000);
  char *task = cpu_scratch_get((size_t)4 << 20);       /* larger than it was: a new one */
  ck_assert_ptr_nonnull(task);
  ck_assert_uint_eq((uintptr_t)task % 64, 0);
  memset(task, 1, (size_t)4 << 20);
  ck_assert_ptr_eq(cpu_scratch_call(500), call);          /* kept, and untouched */
  for (int i = 0; i < 1000; i++) ck_assert_int_eq(call[i], 7);
  ck_assert_ptr_eq(cpu_scratch_get(100), task);
  cpu_scratch_call_done();                                 /* small: kept */
  ck_assert_ptr_eq(cpu_scratch_call(1000), call);
  size_t mb65 = (size_t)65 << 20;
#ifdef __GLIBC__
  size_t mapped0 = mallinfo2().hblkhd;                     /* glibc maps a block that large */
#endif
  char *big = cpu_scratch_call(mb65);
  ck_assert_ptr_nonnull(big);
  big[mb65 - 1] = 1;
#ifdef __GLIBC__
  size_t mapped1 = mallinfo2().hblkhd;
  ck_assert_uint_ge(mapped1, mapped0 + mb65);
#endif
  cpu_scratch_call_done();                                 /* over 64 MB: given back */
#ifdef __GLIBC__
  ck_assert_uint_le(mallinfo2().hblkhd + mb65, mapped1);
#endif
  ck_assert_ptr_nonnull(cpu_scratch_call(64));
  ck_assert_ptr_eq(cpu_scratch_get(100), task);
}
END_TEST

int main(void) {
  __typeof__(test_elementwise) tests[] = {
    test_elementwise, test_reductions, test_scans, test_row_kernels, test_contraction, test_bounds_check,
    test_empty, test_schedule_and_code_host, test_schedule_and_code_model, test_gather_code, test_scan_code,
    test_layout_code, test_reduce_code, test_softmax_reciprocal,
    test_strided_inputs, test_strided_variant_on_demand, test_scratch_slots,
  };
  Suite *s = suite_create("cpu");
  TCase *tc = tcase_create("core");
  suite_add_tcase(s, tc);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) tcase_add_test(tc, tests[i]);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
