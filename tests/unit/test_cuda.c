/* test_cuda.c -- unit tests for cuda_*.c, the GPU back end, on any machine, GPU or not:
 *   - the loader: with no driver, a reason and no crash;
 *   - golden CUDA C: relu (elementwise), softmax (row-wise), matmul (contraction; exact, and
 *     on the tensor cores in tf32) rendered for h100.hw and compared with the files
 *     tests/cuda/NAME.cu; the prelude every module shares must be rendered exactly as its
 *     files src/cuda/prelude.cu and prelude_mma.cu hold it (the build embeds them).  After
 *     a deliberate change to the renderer, run with DYN_UPDATE_GOLDEN=1 to rewrite the golden
 *     files, and review the diff;
 *   - every stdlib function compiles with NVRTC for sm_80 and sm_90, and `ptxas -v` reports no
 *     spills for any kernel; so do the tf32 and bf16 variants of every stdlib function with a
 *     contraction, and the tiles of f16 and bf16 contractions, whose registers it prints
 *     (skipped when NVRTC or ptxas is absent);
 *   - the generated code runs against the reference evaluator, every variant forced in turn,
 *     on the CPU: tests/cuda/fakecuda.cc (built here with the C++ compiler) stands in for the
 *     driver and NVRTC, and compiles the CUDA C with tests/cuda/emu.h (skipped without c++).
 *     The tensor-core variants run there too (emu.h emulates mma.sync warp by warp), within
 *     the error their rounding allows, on shapes of 1, primes and the tiles' sizes +-1, and so
 *     do the f16 and bf16 contractions' m16n8k16 tiles on their stored operands; exact
 *     stays exact; the roundings are checked bit for bit on chosen values;
 *   - scans render as a thread per line walking the axis in order, compile, and run emulated;
 *   - the contraction model's choices and :sched's text. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { const char *name; const char *text; } StdlibModule;
extern const StdlibModule dyn_stdlib[];

#define SRCDIR DYN_SRCDIR "/tests/cuda"

/* Functions for the emulated runs, beside the stdlib: layouts and semantics the stdlib does
 * not exercise (transposed operands, integers, bools, f64, checked accesses, where around a
 * reduction, casts that saturate). */
static const char *EXTRA =
  "fn tmm(A: f32[K, M], B: f32[K, N]) -> f32[M, N] {\n"
  "  C[i, j] = sum[k] A[k, i] * B[k, j]\n"
  "  return C\n"
  "}\n"
  "fn ttm(A: f32[K, M], B: f32[N, K]) -> f32[M, N] {\n"
  "  C[i, j] = 2.0 * (sum[k] A[k, i] * B[j, k]) - 1.0\n"
  "  return C\n"
  "}\n"
  "fn bmm1(X: f32[M, K], Y: f32[B, K, N]) -> f32[B, M, N] {\n"
  "  Z[b, i, j] = sum[k] X[i, k] * Y[b, k, j]\n"
  "  return Z\n"
  "}\n"
  "fn colsum(X: f32[B, N]) -> f32[N] {\n"
  "  c[n] = sum[b] X[b, n]\n"
  "  return c\n"
  "}\n"
  "fn idiv(X: i32[N], Y: i32[N]) -> i32[N] {\n"
  "  Z[i] = X[i] / Y[i] + X[i] % Y[i] * 7\n"
  "  return Z\n"
  "}\n"
  "fn iops(X: i32[N], Y: i64[N]) -> i64[N] {\n"
  "  Z[i] = i64(X[i]) * Y[i] - max(Y[i], 3) + abs(i64(X[i])) + i64(X[i] * 300000000)\n"
  "  return Z\n"
  "}\n"
  "fn isum(X: i64[B, N]) -> i64[B] {\n"
  "  s[b] = sum[n] X[b, n] * X[b, n]\n"
  "  return s\n"
  "}\n"
  "fn shift(X: f32[N], P: size) -> f32[N] {\n"
  "  Z[i] = X[i + P]\n"
  "  return Z\n"
  "}\n"
  "fn pos(X: f32[N]) -> bool[N] {\n"
  "  Z[i] = X[i] > 0.0 and not (X[i] > 0.5)\n"
  "  return Z\n"
  "}\n"
  "fn casts(X: f32[N]) -> i32[N] {\n"
  "  Z[i] = i32(X[i] * 3e9) + i32(floor(X[i] * 10.0))\n"
  "  return Z\n"
  "}\n"
  "fn wred(X: f32[B, N]) -> f32[B] {\n"
  "  y[b] = where(X[b, 0] > 0.0, sum[n] X[b, n], max[n] X[b, n] - 1.0)\n"
  "  return y\n"
  "}\n"
  "fn soft64(X: f64[B, N]) -> f64[B, N] {\n"
  "  m[b]    = max[n] X[b, n]\n"
  "  e[b, n] = exp(X[b, n] - m[b])\n"
  "  s[b]    = sum[n] e[b, n]\n"
  "  Y[b, n] = e[b, n] / s[b]\n"
  "  return Y\n"
  "}\n"
  "fn gath(E: f32[V, D], I: i32[T]) -> f32[T, D] {\n"
  "  Y[t, d] = E[I[t], d]\n"
  "  return Y\n"
  "}\n"
  "fn gathm(E: f32[V, D], I: i64[T]) -> f32[T, D] {\n"
  "  Y[t, d] = E[I[t] % V, d] + E[V - 1 - I[t] % V, d]\n"
  "  return Y\n"
  "}\n"
  "fn along(X: f64[B, N], I: i32[B, K]) -> (f64[B, K], f64[B]) {\n"
  "  Y[b, k] = X[b, I[b, k] % N]\n"
  "  s[b] = sum[k] X[b, I[b, k] % N] * f64(k)\n"
  "  return (Y, s)\n"
  "}\n"
  "fn gsum(X: f32[A, N]) -> f32 {\n"
  "  s = (sum[a, n] X[a, n] * 0.5) + 1.0\n"
  "  return s\n"
  "}\n"
  "fn imax(X: i32[N]) -> i32 {\n"
  "  s = max[n] X[n]\n"
  "  return s\n"
  "}\n"
  "fn both(X: f32[B, N]) -> (f32[B, N], f32[B]) {\n"
  "  m[b] = max[n] X[b, n]\n"
  "  Y[b, n] = X[b, n] - m[b]\n"
  "  return (Y, m)\n"
  "}\n";

/* f64 contractions (the stdlib has none): the four layouts of A and B, and a batch. */
static const char *F64 =
  "fn mm64(A: f64[M, K], B: f64[K, N]) -> f64[M, N] {\n"
  "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
  "  return C\n"
  "}\n"
  "fn lin64(X: f64[B, I], W: f64[O, I], b: f64[O]) -> f64[B, O] {\n"
  "  Y[n, o] = (sum[i] X[n, i] * W[o, i]) + b[o]\n"
  "  return Y\n"
  "}\n"
  "fn tmm64(A: f64[K, M], B: f64[K, N]) -> f64[M, N] {\n"
  "  C[i, j] = sum[k] A[k, i] * B[k, j]\n"
  "  return C\n"
  "}\n"
  "fn ttm64(A: f64[K, M], B: f64[N, K]) -> f64[M, N] {\n"
  "  C[i, j] = sum[k] A[k, i] * B[j, k]\n"
  "  return C\n"
  "}\n"
  "fn bmm64(X: f64[B, M, K], Y: f64[B, K, N]) -> f64[B, M, N] {\n"
  "  Z[b, i, j] = sum[k] X[b, i, k] * Y[b, k, j]\n"
  "  return Z\n"
  "}\n"
  /* whole-tensor arithmetic: implicit indices, named _0 and _1 (once rendered as `0`) */
  "fn twice(X: f32[N, M]) -> f32[N, M] {\n"
  "  Y = X * 2\n"
  "  return Y\n"
  "}\n";

/* Views (lang/reference.md, "Views"): slices, rewritten by the checker into index notation
 * whose reads are affine in the view's indices, render as offsets and strides of the reads. */
/* f16 and bf16: stored as their bit patterns, computed in f32, rounded where stored (and
 * where an inlined definition is read). */
static const char *HALVES =
  "fn h_ew(X: f16[B, N], W: bf16[B, N]) -> f16[B, N] {\n"
  "  T[b, n] = X[b, n] * f16(f32(W[b, n])) + 0.1\n"
  "  Y[b, n] = T[b, n] - X[b, n]\n"
  "  return Y\n"
  "}\n"
  "fn h_norm(X: f16[B, N]) -> f16[B, N] {\n"
  "  m[b] = (sum[n] X[b, n]) / N\n"
  "  d[b, n] = X[b, n] - m[b]\n"
  "  v[b] = (sum[n] d[b, n] * d[b, n]) / N\n"
  "  Y[b, n] = d[b, n] * rsqrt(v[b] + 0.001)\n"
  "  return Y\n"
  "}\n"
  "fn h_mm(A: bf16[M, K], B: bf16[K, N]) -> bf16[M, N] {\n"
  "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
  "  return C\n"
  "}\n";

/* 16-bit contractions on the tensor cores (m16n8k16 on the stored operands): f16 (names in
 * _h) and bf16 (_b) on the four layouts of A and B, an epilogue, a batch. */
#define H16_FNS(T, S)                                                                          \
  "fn mm" S "(A: " T "[M, K], B: " T "[K, N]) -> " T "[M, N] {\n"                             \
  "  C[i, j] = sum[k] A[i, k] * B[k, j]\n"                                                    \
  "  return C\n"                                                                              \
  "}\n"                                                                                       \
  "fn lin" S "(X: " T "[B, I], W: " T "[O, I], c: " T "[O]) -> " T "[B, O] {\n"               \
  "  Y[b, o] = max((sum[i] X[b, i] * W[o, i]) + c[o], 0.0)\n"                                 \
  "  return Y\n"                                                                              \
  "}\n"                                                                                       \
  "fn tmm" S "(A: " T "[K, M], B: " T "[K, N]) -> " T "[M, N] {\n"                            \
  "  C[i, j] = sum[k] A[k, i] * B[k, j]\n"                                                    \
  "  return C\n"                                                                              \
  "}\n"                                                                                       \
  "fn ttm" S "(A: " T "[K, M], B: " T "[N, K]) -> " T "[M, N] {\n"                            \
  "  C[i, j] = 2.0 * (sum[k] A[k, i] * B[j, k]) - 1.0\n"                                      \
  "  return C\n"                                                                              \
  "}\n"                                                                                       \
  "fn bmm" S "(X: " T "[B, M, K], Y: " T "[B, K, N]) -> " T "[B, M, N] {\n"                   \
  "  Z[b, i, j] = sum[k] X[b, i, k] * Y[b, k, j]\n"                                           \
  "  return Z\n"                                                                              \
  "}\n"
static const char *H16 = H16_FNS("f16", "_h") H16_FNS("bf16", "_b");

static const char *VIEWS =
  "fn v_heads(X: f32[B, N], D: size) -> f32[B, D] {\n"
  "  K = X[:, D:2*D]\n"
  "  return K\n"
  "}\n"
  "fn v_strided(X: f32[B, N], W: f32[(N + 1)/2]) -> f32[(B + 1)/3] {\n"
  "  S = X[1::3, ::2]\n"
  "  s[b] = sum[n] S[b, n] * W[n]\n"
  "  return s\n"
  "}\n"
  "fn v_merge(X: f32[B, H, D]) -> f32[B, H * D] {\n"
  "  Y = reshape(X, [B, H * D])\n"
  "  return Y\n"
  "}\n"
  "fn v_split(X: f32[B, N], H: size) -> f32[B, H, N / H] where N % H == 0 {\n"
  "  Y = reshape(X, [B, H, N / H])\n"
  "  return Y\n"
  "}\n"
  "fn v_cat(A: f32[M, N], B: f32[M, K]) -> f32[M, N + K] {\n"
  "  C = concat(A, B, 1)\n"
  "  return C\n"
  "}\n"
  "fn v_stack(A: f32[M, N], B: f32[M, N]) -> f32[M, 2, N] {\n"
  "  S = stack(A, B, 1)\n"
  "  return S\n"
  "}\n";

/* Scans along the last axis, the first, a middle one; integers; a reduction in the body. */
static const char *SCANS =
  "fn s_rows(X: f32[B, N]) -> f32[B, N] {\n"
  "  Y[b, n] = scan[n] +(X[b, n] * 2.0)\n"
  "  return Y\n"
  "}\n"
  "fn s_cols(X: f32[B, N]) -> f32[B, N] {\n"
  "  Y[b, n] = scan[b] max(X[b, n])\n"
  "  return Y\n"
  "}\n"
  "fn s_mid(X: f32[A, B, N]) -> f32[A, B, N] {\n"
  "  Y[a, b, n] = scan[b] *(X[a, b, n] + 1.0)\n"
  "  return Y\n"
  "}\n"
  "fn s_int(X: i32[N], Z: i64[M, N]) -> (i32[N], i64[M, N]) {\n"
  "  Y[n] = scan[n] min(X[n])\n"
  "  W[m, n] = scan[n] +(sum[k < 3] Z[m, n] * k)\n"
  "  return (Y, W)\n"
  "}\n";

static PolyCtx *pc;
static Func *fns[128];
static int nfns;
static Diags diags;

static Func *lookup(void *env, const char *name) {
  (void)env;
  for (int i = nfns - 1; i >= 0; i--)
    if (!strcmp(fns[i]->name, name)) return fns[i];
  return NULL;
}

static void check_source(const char *name, const char *text) {
  Source *src = xcalloc(1, sizeof *src);
  src->name = xstrdup(name);
  src->text = xstrdup(text);
  src->len = strlen(text);
  Arena *ar = arena_new();
  int n = 0;
  bool inc = false;
  Stmt **st = parse_source(ar, src, &diags, &n, &inc);
  SemaEnv env = {pc, lookup, NULL};
  for (int i = 0; i < n; i++) {
    if (st[i]->kind != ST_FN) continue;
    Func *f = sema_function(&env, st[i]->fn, ar, &diags);
    if (f && nfns < 128) fns[nfns++] = f;
  }
  if (diags.nerrors) {
    Buf m = {0};
    for (Diag *d = diags.head; d; d = d->next) diag_format(d, &m);
    ck_abort_msg("%s does not check:\n%s", name, m.s);
  }
}

/* Every stdlib module and F64 (then EXTRA, for the emulated runs). */
static void setup(void) {
  pc = poly_ctx_new();
  memset(&diags, 0, sizeof diags);
  nfns = 0;
  for (const StdlibModule *m = dyn_stdlib; m->name; m++) check_source(m->name, m->text);
  check_source("f64.dyn", F64);
}

static void teardown(void) {
  diag_clear(&diags);
  poly_ctx_free(pc);
}

static Program *program(const char *fname) {
  Func *f = lookup(NULL, fname);
  ck_assert_msg(f != NULL, "no function %s", fname);
  if (!f->code.prog) f->code.prog = lower_function(f, pc, lookup, NULL);
  return f->code.prog;
}

static HwModel gpu_model(const char *name) {
  HwModel hw;
  char err[512];
  ck_assert_msg(hw_load(name, &hw, err, sizeof err), "%s", err);
  return hw;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  Buf b = {0};
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_putn(&b, chunk, n);
  fclose(f);
  return b.s ? b.s : xstrdup("");
}

/* ---- the loader ---- */

START_TEST(test_no_driver) {
  setenv("DYN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  char why[512] = "";
  CudaBackend *be = cuda_backend_new(NULL, why, sizeof why);
  ck_assert_ptr_null(be);
  ck_assert_msg(!strncmp(why, "no NVIDIA driver (DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1: ", 61), "reason: %s", why);
  ck_assert_msg(strstr(strstr(why, "/nonexistent/") + 1, "/nonexistent/") == NULL, "the path twice: %s", why);
}
END_TEST

START_TEST(test_no_driver_default) {
  /* on a machine without a GPU: the reason names the library; with one, a backend */
  unsetenv("DYN_CUDA_DRIVER");
  char why[512] = "";
  CudaBackend *be = cuda_backend_new(NULL, why, sizeof why);
  if (be) {
    ck_assert(cuda_backend_device(be)[0] != 0);
    cuda_backend_free(be);
  } else {
    ck_assert_msg(strstr(why, "no NVIDIA driver") || strstr(why, "no CUDA device") || strstr(why, "NVRTC") ||
                      strstr(why, "driver did not start"),
                  "reason: %s", why);
  }
}
END_TEST

START_TEST(test_nvrtc_bad_source) {
  char why[512];
  if (!cuda_nvrtc_available(why, sizeof why)) return;
  Buf ptx = {0};
  char err[2048] = "";
  ck_assert(!cuda_compile_ptx("this is not CUDA", 8, 0, &ptx, err, sizeof err));
  ck_assert_msg(strstr(err, "NVRTC") != NULL, "%s", err);
  buf_free(&ptx);
}
END_TEST

/* ---- golden CUDA C ---- */

/* text against the file at path, which a golden file's name (fix) says how to update. */
static void compare_file(const char *what, const char *text, const char *path, const char *fix) {
  char *want = read_file(path);
  ck_assert_msg(want != NULL, "no %s (%s)", path, fix);
  if (strcmp(want, text)) {
    size_t i = 0;
    while (want[i] && want[i] == text[i]) i++;
    size_t from = i > 200 ? i - 200 : 0;
    ck_abort_msg("%s differs from %s at byte %zu (%s):\n--- expected ...%.400s\n--- got ...%.400s", what, path, i, fix,
                 want + from, text + from);
  }
  free(want);
}

/* text against the golden file SRCDIR/file (DYN_UPDATE_GOLDEN=1 rewrites the file). */
static void compare_golden(const char *what, const char *text, const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", SRCDIR, file);
  const char *upd = getenv("DYN_UPDATE_GOLDEN");
  if (upd && *upd && strcmp(upd, "0")) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
  }
  compare_file(what, text, path, "DYN_UPDATE_GOLDEN=1 rewrites it");
}

/* The text from `from` to `to` against the prelude file src/cuda/NAME, which the build embeds
 * in cuda_render.c: the renderer must write it whole, byte for byte. */
static void compare_prelude(const char *what, const char *from, const char *to, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/src/cuda/%s", DYN_SRCDIR, name);
  char *text = xstrndup(from, (size_t)(to - from));
  compare_file(what, text, path, "the prelude is not rendered as its file is");
  free(text);
}

/* A module's CUDA C against its golden file.  Every module starts with the prelude of
 * src/cuda/prelude.cu, and one whose contractions run on the tensor cores goes on with
 * src/cuda/prelude_mma.cu: each rendering must hold them as they are, and the module's own
 * file holds the rest, with a line in their place. */
static void golden(const char *fname, CudaMath math, const char *file) {
  HwModel hw = gpu_model("h100");
  Buf src = {0};
  cuda_render(program(fname), &hw, math, &src);
  const char *p0 = strstr(src.s, "/* ---- prelude:");
  ck_assert_msg(p0 != NULL, "%s: no prelude", fname);
  const char *k = strstr(p0, "\n/* ==== kernel "), *t = strstr(p0, "\n/* ---- the tensor cores");
  ck_assert_msg(k != NULL, "%s: nothing after the prelude", fname);
  if (t && t > k) t = NULL;
  compare_prelude(fname, p0, t ? t : k, "prelude.cu");
  if (t) compare_prelude(fname, t + 1, k, "prelude_mma.cu");
  Buf own = {0};
  buf_printf(&own, "%.*s/* ---- prelude: src/cuda/prelude.cu%s ---- */\n\n%s", (int)(p0 - src.s), src.s,
             t ? " and prelude_mma.cu" : "", k + 1);
  compare_golden(fname, own.s, file);
  buf_free(&own);
  buf_free(&src);
}

START_TEST(test_golden_relu) { golden("relu", CUDA_EXACT, "relu.cu"); }
END_TEST
START_TEST(test_golden_softmax) { golden("softmax", CUDA_EXACT, "softmax.cu"); }
END_TEST
START_TEST(test_golden_matmul) { golden("matmul", CUDA_EXACT, "matmul.cu"); }
END_TEST
START_TEST(test_golden_matmul_tf32) { golden("matmul", CUDA_TF32, "matmul_tf32.cu"); }
END_TEST

/* The rendering is a pure function of the program and the hardware: no addresses, no state. */
START_TEST(test_render_stable) {
  HwModel hw = gpu_model("a100");
  Buf a = {0}, b = {0};
  cuda_render(program("attention"), &hw, CUDA_EXACT, &a);
  cuda_render(program("attention"), &hw, CUDA_EXACT, &b);
  ck_assert_str_eq(a.s, b.s);
  ck_assert(strstr(a.s, "compute capability 8.0") != NULL);
  /* the contractions of attention (Q.K^T, e.V) and its row-wise part */
  ck_assert(strstr(a.s, "_gemm128x128(") != NULL);
  ck_assert(strstr(a.s, "_gemm32x32(") != NULL);
  ck_assert(strstr(a.s, "_warp(") != NULL);
  ck_assert(strstr(a.s, "mma.sync") == NULL);
  buf_free(&a);
  buf_free(&b);
  /* tf32: the contractions' tiles are the tensor cores', the row-wise part is unchanged */
  cuda_render(program("attention"), &hw, CUDA_TF32, &a);
  ck_assert(strstr(a.s, "_tf32_128x128(") != NULL && strstr(a.s, "_gemm128x128(") == NULL);
  ck_assert(strstr(a.s, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != NULL);
  ck_assert(strstr(a.s, "_warp(") != NULL);
  buf_free(&a);
  cuda_render(program("attention"), &hw, CUDA_BF16, &a);
  ck_assert(strstr(a.s, "_bf16_32x32(") != NULL);
  ck_assert(strstr(a.s, "\"mma.sync.aligned.m16n8k16.row.col.f32.\" T \".\" T \".f32 ") != NULL && strstr(a.s, "DYN_MMA_K16(\"bf16\")") != NULL);
  buf_free(&a);
  /* no tensor cores for tf32 before compute capability 8.0: exact, and the header says why */
  hw.cc_major = 7;
  hw.cc_minor = 5;
  cuda_render(program("matmul"), &hw, CUDA_TF32, &a);
  ck_assert(strstr(a.s, "_gemm128x128(") != NULL && strstr(a.s, "mma.sync") == NULL);
  ck_assert(strstr(a.s, "f32 contractions exact: tf32 was asked for") != NULL);
  buf_free(&a);
  /* f64: the tiles of the contractions, with 4x4 outputs per thread; exact whatever is asked */
  cuda_render(program("mm64"), &hw, CUDA_TF32, &a);
  ck_assert(strstr(a.s, "typedef DynGemm<64, 64, 16, 4, 4, true, false, double> G;") != NULL);
  ck_assert(strstr(a.s, "mma.sync") == NULL && strstr(a.s, "_loop(") == NULL);
  buf_free(&a);
  /* a program without a contraction is the same whatever the arithmetic */
  hw = gpu_model("a100");
  cuda_render(program("softmax"), &hw, CUDA_EXACT, &a);
  cuda_render(program("softmax"), &hw, CUDA_BF16, &b);
  ck_assert_str_eq(a.s, b.s);
  buf_free(&a);
  buf_free(&b);
}
END_TEST

/* ---- every stdlib function through NVRTC and ptxas ---- */

static const char *find_ptxas(char *buf, size_t n) {
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (int i = 0; i < 3; i++) {
    if (!roots[i] || !*roots[i]) continue;
    snprintf(buf, n, "%s/bin/ptxas", roots[i]);
    if (access(buf, X_OK) == 0) return buf;
  }
  FILE *p = popen("command -v ptxas 2>/dev/null", "r");
  if (!p) return NULL;
  bool ok = fgets(buf, (int)n, p) != NULL;
  pclose(p);
  if (!ok) return NULL;
  buf[strcspn(buf, "\n")] = 0;
  return *buf ? buf : NULL;
}

/* One module with the kernels of every stdlib function and of F64's (one prelude); with the
 * tensor cores, of the stdlib's with a contraction (the others do not change); with `only`,
 * of the functions of that source.  Returns how many functions. */
static int all_stdlib(const HwModel *hw, CudaMath math, const char *only, Buf *all) {
  int n = 0;
  for (int i = 0; i < nfns; i++) {
    Func *f = fns[i];
    bool std = false;
    for (const StdlibModule *m = dyn_stdlib; m->name && !std; m++) std = f->span.src && !strcmp(f->span.src->name, m->name);
    if (only) std = f->span.src && !strcmp(f->span.src->name, only);
    else if (!std && !(math == CUDA_EXACT && f->span.src && !strcmp(f->span.src->name, "f64.dyn"))) continue;
    if (!std) continue;
    Buf src = {0};
    cuda_render(program(f->name), hw, math, &src);
    if (math != CUDA_EXACT && !strstr(src.s, "typedef DynMma<")) {
      buf_free(&src);
      continue;
    }
    const char *from = all->len ? strstr(src.s, "\n/* ==== kernel") : src.s;
    ck_assert(from != NULL);
    buf_puts(all, from);
    buf_free(&src);
    n++;
  }
  return n;
}

/* Compile the module of all_stdlib for sm_MAJOR MINOR with NVRTC, then ptxas -v it: no
 * spills, and a register count for every kernel (printed with `only`). */
static void ptx_check(int major, int minor, CudaMath math, const char *only) {
  char why[512];
  if (!cuda_nvrtc_available(why, sizeof why)) {
    fprintf(stderr, "test_cuda: skipped the NVRTC test: %s\n", why);
    return;
  }
  HwModel hw = gpu_model(major == 9 ? "h100" : "a100");
  Buf all = {0}, ptx = {0};
  int nf = all_stdlib(&hw, math, only, &all);
  /* matmul, bmm, linear, attention, causal_attention, mlp */
  if (math != CUDA_EXACT && !only) ck_assert_msg(nf >= 6, "only %d stdlib functions with a tensor-core contraction", nf);
  if (only) ck_assert_msg(nf >= 1, "no function of %s", only);
  char err[4096] = "";
  ck_assert_msg(cuda_compile_ptx(all.s, major, minor, &ptx, err, sizeof err), "%s", err);
  ck_assert(strstr(ptx.s, ".entry") != NULL);
  char target[32];
  snprintf(target, sizeof target, ".target sm_%d%d", major, minor);
  ck_assert_msg(strstr(ptx.s, target) != NULL, "no %s in the PTX", target);
  char pbuf[1024];
  const char *ptxas = find_ptxas(pbuf, sizeof pbuf);
  if (!ptxas) {
    fprintf(stderr, "test_cuda: no ptxas; skipped the spill check\n");
    buf_free(&all);
    buf_free(&ptx);
    return;
  }
  char dir[] = "/tmp/dyncudaXXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  char path[256], cmd[2048];
  snprintf(path, sizeof path, "%s/all.ptx", dir);
  FILE *f = fopen(path, "wb");
  fwrite(ptx.s, 1, ptx.len, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "'%s' -v --gpu-name sm_%d%d -o /dev/null '%s' 2>&1", ptxas, major, minor, path);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  char line[1024], kernel[256] = "?";
  int kernels = 0, spills = 0, counted = 0;
  Buf report = {0}, regs = {0};
  while (fgets(line, sizeof line, p)) {
    char *u = strstr(line, "Used ");
    if (u && strstr(u, " registers")) {
      counted++;
      buf_printf(&regs, "  sm_%d%d %s: %d registers\n", major, minor, kernel, atoi(u + 5));
    }
    char *q = strstr(line, "Compiling entry function '");
    if (q) {
      snprintf(kernel, sizeof kernel, "%s", q + 26);
      kernel[strcspn(kernel, "'")] = 0;
      kernels++;
    }
    q = strstr(line, "bytes spill stores");
    if (q) {
      char *s = q;
      while (s > line && s[-1] == ' ') s--;
      while (s > line && s[-1] >= '0' && s[-1] <= '9') s--;
      if (atoi(s) != 0) {
        spills++;
        buf_printf(&report, "  %s: %s", kernel, line);
      }
    }
    if (strstr(line, "error")) buf_printf(&report, "  %s", line);
  }
  int rc = pclose(p);
  unlink(path);
  rmdir(dir);
  ck_assert_msg(rc == 0, "ptxas failed for sm_%d%d:\n%s", major, minor, report.s ? report.s : "");
  ck_assert_msg(kernels > (math == CUDA_EXACT && !only ? 50 : 5 * nf), "only %d kernels", kernels);
  ck_assert_msg(spills == 0, "spills on sm_%d%d (%s):\n%s", major, minor, cuda_math_name(math), report.s);
  ck_assert_msg(counted == kernels, "ptxas reported registers for %d of %d kernels", counted, kernels);
  if (only) fprintf(stderr, "test_cuda: ptxas -v, %s:\n%s", only, regs.s);
  buf_free(&report);
  buf_free(&regs);
  buf_free(&all);
  buf_free(&ptx);
}

/* Render each function fns[i] for h100: its CUDA C must hold texts[i] and `also` (when not
 * NULL), and compile where NVRTC is. */
typedef struct { const char *fn, *text; } Want;
static void renders(const Want *want, size_t n, const char *also) {
  HwModel hw = gpu_model("h100");
  char why[512];
  bool nvrtc = cuda_nvrtc_available(why, sizeof why);
  for (size_t i = 0; i < n; i++) {
    Buf src = {0}, ptx = {0};
    cuda_render(program(want[i].fn), &hw, CUDA_EXACT, &src);
    ck_assert_msg(strstr(src.s, want[i].text) != NULL, "%s: no %s in\n%s", want[i].fn, want[i].text, src.s);
    ck_assert_msg(!also || strstr(src.s, also) != NULL, "%s: no %s in\n%s", want[i].fn, also, src.s);
    char err[4096] = "";
    if (nvrtc) ck_assert_msg(cuda_compile_ptx(src.s, 9, 0, &ptx, err, sizeof err), "%s: %s", want[i].fn, err);
    buf_free(&src);
    buf_free(&ptx);
  }
}

/* Each view renders as the affine read it becomes, and the CUDA C compiles where NVRTC is. */
START_TEST(test_views_render) {
  check_source("views.dyn", VIEWS);
  static const Want want[] = {
    {"v_heads", "a.X[x_0 * a.X_s0 + dyn_add(a.sz_D, x_1)]"},
    {"v_strided", "a.X[(dyn_add(1LL, dyn_mul(b, 3LL))) * a.X_s0 + dyn_mul(n, 2LL)]"},
    {"v_merge", "/* Y[_0, _1] = X[_0, _1 / D, _1 % D] */"},
    {"v_split", "/* Y[_0, _1, _2] = X[_0, _1 * (N/H) + _2] */"},
    {"v_cat", "/* C[_0, _1] = where(_1 < N, A[_0, _1], B[_0, -N + _1]) */"},
    {"v_stack", "/* S[_0, _1, _2] = where(_1 == 0, A[_0, _2], B[_0, _2]) */"},
  };
  renders(want, sizeof want / sizeof want[0], NULL);
}
END_TEST

/* A scan renders as a thread per line walking the axis in order (its step below), over a
 * grid-stride loop of the lines, and compiles where NVRTC is. */
START_TEST(test_scans_render) {
  check_source("scans.dyn", SCANS);
  static const Want want[] = {
    {"s_rows", "run_ = n == 0 ? x_ : DynSum::op(run_, x_);"},
    {"s_cols", "run_ = b == 0 ? x_ : DynMax::op(run_, x_);"},
    {"s_mid", "run_ = b == 0 ? x_ : DynProd::op(run_, x_);"},
    {"s_int", "run_ = n == 0 ? x_ : DynMin::op(run_, x_);"},
  };
  renders(want, sizeof want / sizeof want[0], "line_ += nthreads_");
}
END_TEST

/* The 16-bit types render as unsigned short storage with the prelude's conversions, and the
 * CUDA C compiles where NVRTC is. */
START_TEST(test_halves_render) {
  check_source("halves.dyn", HALVES);
  HwModel hw = gpu_model("h100");
  static const struct { const char *fn, *a, *b; } want[] = {
    {"h_ew", "const unsigned short *W;", "dyn_f16_f32(dyn_f32_f16("},
    {"h_norm", "dyn_f16_f32(", "dyn_f32_f16("},
    {"h_mm", "dyn_bf16_f32(", "dyn_f32_bf16("},
  };
  char why[512];
  bool nvrtc = cuda_nvrtc_available(why, sizeof why);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    Buf src = {0}, ptx = {0};
    cuda_render(program(want[i].fn), &hw, CUDA_EXACT, &src);
    ck_assert_msg(strstr(src.s, want[i].a) && strstr(src.s, want[i].b), "%s: no %s or %s in\n%s", want[i].fn,
                  want[i].a, want[i].b, src.s);
    char err[4096] = "";
    if (nvrtc) ck_assert_msg(cuda_compile_ptx(src.s, 9, 0, &ptx, err, sizeof err), "%s: %s", want[i].fn, err);
    buf_free(&src);
    buf_free(&ptx);
  }
}
END_TEST

START_TEST(test_ptx_sm80) { ptx_check(8, 0, CUDA_EXACT, NULL); }
END_TEST
START_TEST(test_ptx_sm90) { ptx_check(9, 0, CUDA_EXACT, NULL); }
END_TEST
START_TEST(test_ptx_tensor_cores) {
  ptx_check(8, 0, CUDA_TF32, NULL);
  ptx_check(9, 0, CUDA_TF32, NULL);
  ptx_check(8, 0, CUDA_BF16, NULL);
  ptx_check(9, 0, CUDA_BF16, NULL);
}
END_TEST

/* The 16-bit contractions: every tile shape of both types and four layouts, with the f16 and
 * bf16 mma.sync in the PTX, compiled for sm_80 and sm_90 without spills. */
START_TEST(test_ptx_mma16) {
  check_source("h16.dyn", H16);
  HwModel hw = gpu_model("h100");
  Buf src = {0};
  cuda_render(program("mm_h"), &hw, CUDA_EXACT, &src);
  ck_assert_msg(strstr(src.s, "typedef DynMma<128, 128, 32, 2, 4, true, false, false, 1> G;") != NULL, "%s", src.s);
  ck_assert_msg(strstr(src.s, "__shared__ __align__(16) unsigned short sa_[2 * G::ATILE]") != NULL, "%s", src.s);
  ck_assert_msg(strstr(src.s, "a.C[i * a.C_s0 + j] = dyn_f32_f16(acc_[ii_][jj_]);") != NULL, "%s", src.s);
  buf_free(&src);
  cuda_render(program("ttm_b"), &hw, CUDA_EXACT, &src);
  ck_assert_msg(strstr(src.s, "typedef DynMma<32, 32, 32, 2, 2, false, true, true, 2> G;") != NULL, "%s", src.s);
  buf_free(&src);
  /* before 8.0: the general kernels */
  hw.cc_major = 7;
  hw.cc_minor = 5;
  cuda_render(program("mm_h"), &hw, CUDA_EXACT, &src);
  ck_assert_msg(strstr(src.s, "typedef DynMma") == NULL && strstr(src.s, "a contraction ====") == NULL, "mm_h on 7.5 renders a contraction");
  buf_free(&src);
  char why[512];
  if (!cuda_nvrtc_available(why, sizeof why)) {
    fprintf(stderr, "test_cuda: skipped the NVRTC test: %s\n", why);
    return;
  }
  HwModel h100 = gpu_model("h100");
  Buf all = {0}, ptx = {0};
  all_stdlib(&h100, CUDA_EXACT, "h16.dyn", &all);
  char err[4096] = "";
  ck_assert_msg(cuda_compile_ptx(all.s, 8, 0, &ptx, err, sizeof err), "%s", err);
  ck_assert(strstr(ptx.s, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != NULL);
  ck_assert(strstr(ptx.s, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL);
  buf_free(&all);
  buf_free(&ptx);
  ptx_check(8, 0, CUDA_EXACT, "h16.dyn");
  ptx_check(9, 0, CUDA_EXACT, "h16.dyn");
}
END_TEST

/* ---- the model ---- */

START_TEST(test_gemm_model) {
  HwModel hw = gpu_model("h100");
  CudaGemmPlan pl;
  /* large and square: the largest tile, a few waves, no split */
  ck_assert(cuda_gemm_plan(&hw, CUDA_EXACT, 1, 4096, 4096, 4096, &pl));
  ck_assert_int_eq(pl.bm * pl.bn, 128 * 128);
  ck_assert_int_eq(pl.splits, 1);
  ck_assert_int_eq(pl.blocks, 32 * 32);
  ck_assert(pl.waves >= 1 && pl.blocks_per_sm >= 1);
  /* 2 * 4096^3 FLOPs at 66.9 TFLOP/s: about 2 ms; the model is within reason */
  ck_assert_msg(pl.predicted_s > 1.5e-3 && pl.predicted_s < 4e-3, "predicted %g s", pl.predicted_s);
  /* a vector times a matrix: few tiles, so K is split to fill the SMs */
  ck_assert(cuda_gemm_plan(&hw, CUDA_EXACT, 1, 1, 768, 768, &pl));
  ck_assert_msg(pl.splits > 1 || pl.bm == 32, "1x768x768: %dx%d split %d", pl.bm, pl.bn, pl.splits);
  /* tiny: the smallest tile */
  ck_assert(cuda_gemm_plan(&hw, CUDA_EXACT, 1, 13, 11, 17, &pl));
  ck_assert_int_eq(pl.bm, 32);
  ck_assert_int_eq(pl.blocks, 1);
  /* batched: the batch multiplies the blocks */
  ck_assert(cuda_gemm_plan(&hw, CUDA_EXACT, 12, 384, 384, 64, &pl));
  ck_assert(pl.blocks >= 12 * (384 / pl.bm) * (384 / pl.bn));
  /* empty shapes are refused */
  ck_assert(!cuda_gemm_plan(&hw, CUDA_EXACT, 1, 0, 5, 5, &pl));
  ck_assert_int_eq(pl.math, CUDA_EXACT);
}
END_TEST

/* The tensor cores: their peak in the model, their tiles, and no tensor cores before 8.0. */
START_TEST(test_gemm_model_tensor_cores) {
  HwModel hw = gpu_model("h100");
  CudaGemmPlan ex, tf, bf;
  ck_assert(cuda_gemm_plan(&hw, CUDA_EXACT, 1, 4096, 4096, 4096, &ex));
  ck_assert(cuda_gemm_plan(&hw, CUDA_TF32, 1, 4096, 4096, 4096, &tf));
  ck_assert(cuda_gemm_plan(&hw, CUDA_BF16, 1, 4096, 4096, 4096, &bf));
  ck_assert_int_eq(tf.math, CUDA_TF32);
  ck_assert_int_eq(bf.math, CUDA_BF16);
  ck_assert_int_eq(tf.bm * tf.bn, 128 * 128);
  ck_assert_int_eq(tf.threads, 256);
  /* 2 * 4096^3 FLOPs: under the 494.7 TFLOP/s of tf32 the tiles' shared-memory reads bound
   * it, but well ahead of the CUDA cores' 66.9; bf16 no slower */
  ck_assert_msg(tf.predicted_s > 2 * 4096.0 * 4096 * 4096 / 494.7e12 && tf.predicted_s < ex.predicted_s / 3, "tf32 %g s, exact %g s",
                tf.predicted_s, ex.predicted_s);
  ck_assert(bf.predicted_s <= tf.predicted_s);
  /* tiny: the smallest tile */
  ck_assert(cuda_gemm_plan(&hw, CUDA_TF32, 1, 13, 11, 17, &tf));
  ck_assert_int_eq(tf.bm, 32);
  ck_assert_int_eq(tf.threads, 128);
  /* a GPU of compute capability 7.5: exact whatever is asked */
  hw.cc_major = 7;
  hw.cc_minor = 5;
  ck_assert_int_eq(cuda_math_on(&hw, CUDA_TF32), CUDA_EXACT);
  ck_assert(cuda_gemm_plan(&hw, CUDA_TF32, 1, 4096, 4096, 4096, &tf));
  ck_assert_int_eq(tf.math, CUDA_EXACT);
  ck_assert(fabs(tf.predicted_s - ex.predicted_s) < 1e-12);
}
END_TEST

/* The contraction record (contract.c), which both back ends read: each kernel of a program
 * printed as contract_print gives it, or "-" when it is none.  The operands are named in
 * their roles whichever way round the source multiplies them; a batch only one operand holds,
 * f64, and the shapes that are none (a diagonal, a reduction over two axes) are among them.
 * Fusion splits an epilogue off into a kernel of its own (lower.c's hoist), so the record of
 * the contraction it leaves has none. */
static const char *records(const char *text, const char *fname) {
  check_source("records.dyn", text);
  const Program *p = program(fname);
  static Buf out;
  buf_free(&out);
  buf_puts(&out, "");
  for (int i = 0; i < p->nkernels; i++) {
    if (p->kernels[i].con) contract_print(p, p->kernels[i].con, &out);
    else buf_printf(&out, "%s: -\n", p->kernels[i].name);
  }
  return out.s;
}

START_TEST(test_contraction_record) {
  ck_assert_str_eq(records("", "matmul"), "C: batch -, m i, n j, k k; A A[i, k] (k contiguous), B B[k, j]; f32 alone\n");
  ck_assert_str_eq(records("", "ttm64"),
                   "C: batch -, m i, n j, k k; A A[k, i], B B[j, k] (k contiguous); f64 alone\n");
  ck_assert_str_eq(records("fn sw(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
                           "  C[i, j] = sum[k] B[k, j] * A[i, k]\n  return C\n}\n", "sw"),
                   "C: batch -, m i, n j, k k; A A[i, k] (k contiguous), B B[k, j]; f32 alone\n");
  ck_assert_str_eq(records("", "bmm"), "Z: batch b, m i, n j, k k; A X[b, i, k] (k contiguous), B Y[b, k, j]; f32 alone\n");
  ck_assert_str_eq(records("fn bm1(X: f32[M, K], Y: f32[B, K, N]) -> f32[B, M, N] {\n"
                           "  Z[b, i, j] = sum[k] X[i, k] * Y[b, k, j]\n  return Z\n}\n", "bm1"),
                   "Z: batch b, m i, n j, k k; A X[i, k] (k contiguous), B Y[b, k, j]; f32 alone\n");
  ck_assert_str_eq(records("fn ep(A: f32[M, K], B: f32[K, N]) -> f32[M, N] {\n"
                           "  C[i, j] = 2.0 * (sum[k] A[i, k] * B[k, j]) - 1.0\n  return C\n}\n", "ep"),
                   "C.c: batch -, m i, n j, k k; A A[i, k] (k contiguous), B B[k, j]; f32 alone\n"
                   "ep_C: -\n");
  ck_assert_str_eq(records("fn diag(A: f32[M, M], B: f32[M, N]) -> f32[M, N] {\n"
                           "  C[i, j] = sum[k] A[k, k] * B[k, j]\n  return C\n}\n", "diag"),
                   "diag_C: -\n");
  ck_assert_str_eq(records("fn two(A: f32[M, K, L], B: f32[K, L, N]) -> f32[M, N] {\n"
                           "  C[i, j] = sum[k, l] A[i, k, l] * B[k, l, j]\n  return C\n}\n", "two"),
                   "two_C: -\n");
  ck_assert_str_eq(records("", "softmax"), "softmax_Y: -\n");
}
END_TEST

/* The scheduler's shared terms (sched.c), on a GPU model, a CPU model and an empty one: the
 * level walk finds the first cache a footprint fits, main memory past the last; waves round
 * up; a model without levels falls back to the stated defaults rather than dividing by 0. */
START_TEST(test_sched_terms) {
  HwModel g = gpu_model("h100"), c = gpu_model("zen4"), none;
  memset(&none, 0, sizeof none);
  ck_assert_ptr_nonnull(sched_level(&g, "L2"));
  ck_assert_ptr_null(sched_level(&g, "L9"));
  ck_assert(sched_mem_bw(&g, 1) == g.level[g.nlevels - 1].gbs * 1e9);
  ck_assert(sched_mem_bw(&none, 1e12) == 1e12);
  ck_assert_int_eq(sched_waves(0, 132), 0);
  ck_assert_int_eq(sched_waves(1, 132), 1);
  ck_assert_int_eq(sched_waves(132, 132), 1);
  ck_assert_int_eq(sched_waves(133, 132), 2);
  ck_assert_int_eq(sched_waves(7, 0), 7);
  ck_assert_int_eq(sched_cdiv(7, 2), 4);
  ck_assert_int_eq(sched_cdiv(7, 0), 0);
  int nc = hw_ncaches(&c);
  ck_assert_int_ge(nc, 2);
  ck_assert(sched_level_bw(&c, 1) == c.level[0].gbs * 1e9);
  ck_assert(sched_level_bw(&c, (double)c.level[0].bytes + 1) == c.level[1].gbs * 1e9);
  ck_assert(sched_level_bw(&c, INFINITY) == sched_mem_bw(&c, 0));
  ck_assert(sched_level_bw(&none, 1) == 10e9);
  ck_assert_int_eq(sched_last_cache_bytes(&c), c.level[nc - 1].bytes);
  ck_assert_int_eq(sched_last_cache_bytes(&none), 0);
  /* main memory shared by every core: no more than its total each */
  const HwLevel *m = &c.level[c.nlevels - 1];
  double each = sched_shared_bw(&c, INFINITY, c.cores);
  ck_assert(each <= sched_level_bw(&c, INFINITY));
  if (m->total_gbs > 0) ck_assert(each <= m->total_gbs * 1e9 / c.cores * (1 + 1e-12));
}
END_TEST

/* cuda_describe at sizes bound to p as the session binds them (extents.c). */
static double describe_at(const CudaProgram *cp, const Program *p, const EvalSizes *sz, Buf *out) {
  Extents x = {0};
  ck_assert(extents_bind(&x, p, sz));
  double t = cuda_describe(cp, pc, &x, out);
  extents_free(&x);
  return t;
}

START_TEST(test_describe) {
  HwModel hw = gpu_model("h100");
  CudaProgram *cp = cuda_program_new(program("softmax"), &hw, CUDA_EXACT);
  Buf out = {0};
  const char *names[] = {"B", "N"};
  int64_t vals[] = {2048, 768};
  EvalSizes sz = {names, vals, 2};
  double t = describe_at(cp, program("softmax"), &sz, &out);
  ck_assert_msg(strstr(out.s, "softmax_Y_warp") != NULL, "%s", out.s);
  ck_assert_msg(strstr(out.s, "e: recomputed where it is read") != NULL, "%s", out.s);
  ck_assert(t > 0 && t < 1e-3);
  cuda_program_free(cp);
  buf_free(&out);
  cp = cuda_program_new(program("matmul"), &hw, CUDA_EXACT);
  const char *mn[] = {"M", "N", "K"};
  int64_t mv[] = {1024, 1024, 1024};
  EvalSizes msz = {mn, mv, 3};
  t = describe_at(cp, program("matmul"), &msz, &out);
  ck_assert_msg(strstr(out.s, "contraction over k") != NULL && strstr(out.s, "this shape: tiles") != NULL, "%s", out.s);
  ck_assert_msg(strstr(out.s, "exact f32 on the CUDA cores\n") != NULL, "%s", out.s);
  ck_assert(t > 0);
  cuda_program_free(cp);
  buf_free(&out);
  /* tf32: the tensor cores' tiles, chosen with their peak */
  cp = cuda_program_new(program("matmul"), &hw, CUDA_TF32);
  double t32 = describe_at(cp, program("matmul"), &msz, &out);
  ck_assert_msg(strstr(out.s, "tf32 on the tensor cores, f32 sums") != NULL, "%s", out.s);
  ck_assert_msg(strstr(out.s, "mma.sync.m16n8k8") != NULL && strstr(out.s, "this shape: tf32 tiles") != NULL, "%s", out.s);
  ck_assert_msg(strstr(out.s, "-> matmul_C_tf32_") != NULL, "%s", out.s);
  ck_assert(t32 > 0 && t32 < t);
  cuda_program_free(cp);
  buf_free(&out);
  /* compute capability 7.5: exact, and :sched says why */
  hw.cc_major = 7;
  hw.cc_minor = 5;
  cp = cuda_program_new(program("matmul"), &hw, CUDA_BF16);
  describe_at(cp, program("matmul"), &msz, &out);
  ck_assert_msg(strstr(out.s, "(bf16 asked for: the tensor cores take it from compute capability 8.0; this GPU is 7.5)") != NULL, "%s",
                out.s);
  ck_assert_msg(strstr(out.s, "-> matmul_C_gemm") != NULL, "%s", out.s);
  cuda_program_free(cp);
  buf_free(&out);
}
END_TEST

/* The 16-bit tiles in the model: at the 16-bit rate of the hw file (bf16_tflops, which f16
 * with f32 sums shares), well ahead of exact f32 on the CUDA cores, and slower when the file
 * says the rate is lower. */
START_TEST(test_gemm_model_mma16) {
  check_source("h16.dyn", H16);
  HwModel hw = gpu_model("h100");
  const char *mn[] = {"M", "N", "K"};
  int64_t mv[] = {4096, 4096, 4096};
  EvalSizes sz = {mn, mv, 3};
  Buf out = {0};
  CudaProgram *cp = cuda_program_new(program("mm_h"), &hw, CUDA_EXACT);
  double t16 = describe_at(cp, program("mm_h"), &sz, &out);
  ck_assert_msg(strstr(out.s, "f16 operands as stored on the tensor cores, exact products, f32 sums") != NULL, "%s", out.s);
  ck_assert_msg(strstr(out.s, "mma.sync.m16n8k16 tiles, f16 fragments") != NULL, "%s", out.s);
  ck_assert_msg(strstr(out.s, "this shape: mma16 tiles 128x128") != NULL && strstr(out.s, "-> mm_h_C_mma16_128x128") != NULL, "%s",
                out.s);
  cuda_program_free(cp);
  buf_free(&out);
  cp = cuda_program_new(program("matmul"), &hw, CUDA_EXACT);
  double t32 = describe_at(cp, program("matmul"), &sz, &out);
  cuda_program_free(cp);
  buf_free(&out);
  ck_assert_msg(t16 > 2 * 4096.0 * 4096 * 4096 / (hw.bf16_tflops * 1e12) && t16 < t32 / 4, "f16 %g s, exact f32 %g s", t16, t32);
  hw.bf16_tflops /= 4;
  cp = cuda_program_new(program("mm_b"), &hw, CUDA_TF32);
  double tq = describe_at(cp, program("mm_b"), &sz, &out);
  ck_assert_msg(strstr(out.s, "bf16 operands as stored") != NULL, "%s", out.s);
  ck_assert_msg(tq > 1.5 * t16, "a quarter of the rate: %g s against %g s", tq, t16);
  cuda_program_free(cp);
  buf_free(&out);
}
END_TEST

/* ---- running, on the emulator ---- */

static char emu_so[512];
static CudaBackend *emu_be;

/* cuda_run at sizes bound to p as the session binds them (extents.c). */
static int run_at(CudaProgram *cp, const Program *p, Tensor **in, const EvalSizes *sz, Tensor **out, char *err, size_t len) {
  Extents x = {0};
  ck_assert_msg(extents_bind(&x, p, sz), "%s", x.err);
  int st = cuda_run(emu_be, cp, in, &x, out, err, len);
  extents_free(&x);
  return st;
}

/* Build the stand-in driver and point the loader at it; false (the test skips) without c++. */
static bool emulator(void) {
  if (emu_be) return true;
  const char *cxx = getenv("DYN_EMU_CXX") ? getenv("DYN_EMU_CXX") : "g++";
  char dir[] = "/tmp/dynemuXXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  snprintf(emu_so, sizeof emu_so, "%s/fakecuda.so", dir);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -fPIC -shared -o '%s' '%s/fakecuda.cc' -ldl 2>&1", cxx, emu_so, SRCDIR);
  if (system(cmd) != 0) {
    fprintf(stderr, "test_cuda: no C++ compiler (%s); skipped the emulated runs\n", cxx);
    return false;
  }
  setenv("DYN_CUDA_DRIVER", emu_so, 1);
  setenv("DYN_NVRTC", emu_so, 1);
  setenv("DYN_EMU_DIR", SRCDIR, 1);
  HwModel hw = gpu_model("a100");
  hw.sm_count = 4;
  char why[512];
  emu_be = cuda_backend_new(&hw, why, sizeof why);
  unlink(emu_so);              /* loaded: the file can go */
  rmdir(dir);
  ck_assert_msg(emu_be != NULL, "%s", why);
  ck_assert_int_eq(cuda_backend_hw(emu_be)->sm_count, 4);
  return true;
}

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static bool size_lookup(void *env, const char *name, int64_t *v) {
  const EvalSizes *s = env;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name)) {
      *v = s->vals[i];
      return true;
    }
  return false;
}

/* x (the GPU's) against y (the reference): floats within rtol of the element plus atol of
 * the largest |y| (tol > 0 sets both: the error the tensor cores' rounding allows); *worst
 * gets the largest |x - y| over that largest |y|. */
static bool same(const Tensor *x, const Tensor *y, double tol, double *worst, Buf *why) {
  *worst = 0;
  if (x->elem != y->elem || x->rank != y->rank || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) {
    buf_puts(why, "types differ");
    return false;
  }
  int64_t n = tensor_numel(x);
  double scale = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(tensor_get_f64(y, i));
    if (isfinite(v) && v > scale) scale = v;
  }
  double rtol = x->elem == DYN_F64 ? 1e-10 : 1e-4, atol = x->elem == DYN_F64 ? 1e-12 : 1e-5;
  if (tol > 0) rtol = atol = tol;
  bool all = true;
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    double p = tensor_get_f64(x, i), q = tensor_get_f64(y, i);
    if (!elem_is_float(x->elem)) ok = tensor_get_i64(x, i) == tensor_get_i64(y, i);
    else if (isnan(p) || isnan(q)) ok = isnan(p) && isnan(q);
    else if (isinf(p) || isinf(q)) ok = p == q;
    else ok = fabs(p - q) <= rtol * fabs(q) + atol * scale;
    if (isfinite(p) && isfinite(q) && scale > 0 && fabs(p - q) / scale > *worst) *worst = fabs(p - q) / scale;
    if (!ok && all) buf_printf(why, "element %lld: gpu %.9g, ref %.9g", (long long)i, p, q);
    all = all && ok;
  }
  return all;
}

/* Programs compiled for the emulator with the tensor cores, per arithmetic and function
 * (exact ones live in Func.code.gpu). */
static CudaProgram *tc_progs[3][128];

/* Run fname on random inputs of the given sizes ("M=3 N=4") on the emulator with f32
 * contractions in math, a forced variant and split, and on the reference evaluator; they must
 * agree within tol (0: exact f32's tolerance): both fail, or both succeed with the same
 * values.  Returns the largest difference over the largest value (see same). */
static double run_math(const char *fname, const char *sizes, const char *force, int splits, CudaMath math, double tol) {
  Func *f = lookup(NULL, fname);
  ck_assert_msg(f != NULL, "no %s", fname);
  Program *p = program(fname);
  int fi = 0;
  while (fns[fi] != f) fi++;
  CudaProgram *cp = math == CUDA_EXACT ? f->code.gpu : tc_progs[math][fi];
  if (!cp) {
    char err[4096];
    cp = cuda_compile(emu_be, p, math, err, sizeof err);
    ck_assert_msg(cp != NULL, "%s: %s", fname, err);
    if (math == CUDA_EXACT) f->code.gpu = cp;
    else tc_progs[math][fi] = cp;
  }
  const char *names[16];
  int64_t vals[16];
  int ns = 0;
  char copy[256];
  snprintf(copy, sizeof copy, "%s", sizes);
  for (char *t = strtok(copy, " "); t && ns < 16; t = strtok(NULL, " ")) {
    char *eq = strchr(t, '=');
    *eq = 0;
    names[ns] = xstrdup(t);
    vals[ns++] = atoll(eq + 1);
  }
  EvalSizes sz = {names, vals, ns};
  Tensor *in[16] = {0};
  for (int i = 0; i < f->nparams; i++) {
    if (f->params[i].is_size) continue;
    const Type *t = &f->params[i].type;
    int64_t dims[DYN_MAX_RANK];
    const char *why;
    for (int k = 0; k < t->rank; k++) ck_assert(poly_eval(t->dims[k], size_lookup, &sz, &dims[k], &why));
    char err[256];
    in[i] = tensor_new(t->elem, t->rank, dims, err, sizeof err);
    ck_assert_msg(in[i] != NULL, "%s", err);
    int64_t n = tensor_numel(in[i]);
    for (int64_t j = 0; j < n; j++) {
      double u = urand();
      if (t->elem == DYN_I32 || t->elem == DYN_I64) tensor_set_i64(in[i], j, (int64_t)(u * 21) - 10);
      else tensor_set_f64(in[i], j, 2 * u - 1);
    }
  }
  Tensor *ref[4] = {0}, *gpu[4] = {0};
  Buf rerr = {0};
  Extents x = {0};
  extents_bind(&x, p, &sz);
  bool rok = eval_program(p, in, &x, ref, NULL, &rerr, NULL);
  extents_free(&x);
  char err[4096] = "";
  const char *what = force ? force : "model";
  cuda_force(emu_be, force, splits);
  int st = run_at(cp, p, in, &sz, gpu, err, sizeof err);
  cuda_force(emu_be, NULL, 0);
  ck_assert_msg(st >= 0, "%s [%s] %s %s: %s", fname, sizes, cuda_math_name(math), what, err);
  double worst = 0;
  if (!rok) {
    ck_assert_msg(st == 0, "%s [%s] %s %s: the reference fails (%s), the GPU does not", fname, sizes, cuda_math_name(math), what, rerr.s);
  } else {
    ck_assert_msg(st == 1, "%s [%s] %s %s: the GPU reports an error, the reference does not", fname, sizes, cuda_math_name(math), what);
    for (int i = 0; i < p->nout; i++) {
      Buf why = {0};
      double w;
      bool ok = same(gpu[i], ref[i], tol, &w, &why);
      ck_assert_msg(ok, "%s [%s] %s %s, output %d: %s", fname, sizes, cuda_math_name(math), what, i, why.s);
      if (w > worst) worst = w;
      buf_free(&why);
    }
  }
  for (int i = 0; i < 4; i++) {
    tensor_release(ref[i]);
    tensor_release(gpu[i]);
  }
  for (int i = 0; i < 16; i++) tensor_release(in[i]);
  for (int i = 0; i < ns; i++) free((char *)names[i]);
  buf_free(&rerr);
  return worst;
}

static void run_case(const char *fname, const char *sizes, const char *force, int splits) {
  run_math(fname, sizes, force, splits, CUDA_EXACT, 0);
}

static void emu_setup(void) {
  setup();
  check_source("extra.dyn", EXTRA);
}

START_TEST(test_run_views) {
  if (!emulator()) return;
  check_source("views.dyn", VIEWS);
  static const char *const cases[][3] = {
    {"v_heads", "B=3 N=11 D=4", NULL}, {"v_heads", "B=1 N=1 D=0", NULL},
    {"v_strided", "B=7 N=13", NULL}, {"v_strided", "B=2 N=1", "loop"},
    {"v_merge", "B=3 H=5 D=7", NULL}, {"v_merge", "B=2 H=0 D=3", NULL},
    {"v_split", "B=3 N=12 H=4", NULL}, {"v_split", "B=1 N=13 H=13", "loop"},
    {"v_cat", "M=5 N=3 K=7", NULL}, {"v_cat", "M=2 N=0 K=1", NULL},
    {"v_stack", "M=3 N=17", NULL}, {"v_stack", "M=1 N=1", "loop"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i][0], cases[i][1], cases[i][2], 0);
}
END_TEST

START_TEST(test_run_scans) {
  if (!emulator()) return;
  check_source("scans.dyn", SCANS);
  static const char *const cases[][2] = {
    {"s_rows", "B=3 N=37"}, {"s_rows", "B=1 N=1"}, {"s_rows", "B=0 N=5"}, {"s_rows", "B=5 N=0"},
    {"s_rows", "B=300 N=2"}, {"s_cols", "B=17 N=13"}, {"s_cols", "B=1 N=64"}, {"s_mid", "A=2 B=7 N=5"},
    {"s_mid", "A=3 B=1 N=1"}, {"s_int", "N=31 M=3"}, {"s_int", "N=1 M=0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i][0], cases[i][1], NULL, 0);
}
END_TEST

/* Against the reference evaluator within a few of the 16-bit type's ulps (the device's exp
 * is not the C library's); awkward sizes, empty ones included. */
START_TEST(test_run_halves) {
  if (!emulator()) return;
  check_source("halves.dyn", HALVES);
  run_math("h_ew", "B=3 N=37", NULL, 0, CUDA_EXACT, 4e-3);
  run_math("h_ew", "B=0 N=5", NULL, 0, CUDA_EXACT, 4e-3);
  run_math("h_norm", "B=5 N=33", NULL, 0, CUDA_EXACT, 4e-3);
  run_math("h_norm", "B=1 N=1", NULL, 0, CUDA_EXACT, 4e-3);
  run_math("h_mm", "M=7 N=13 K=31", NULL, 0, CUDA_EXACT, 3e-2);
  run_math("h_mm", "M=1 N=1 K=1", NULL, 0, CUDA_EXACT, 3e-2);
}
END_TEST

START_TEST(test_run_loops) {
  if (!emulator()) return;
  run_case("relu", "B=3 N=37", NULL, 0);
  run_case("relu", "B=4 N=64", "loop4", 0);
  run_case("relu", "B=4 N=64", "loop", 0);
  run_case("gelu", "B=5 N=33", NULL, 0);
  run_case("gelu", "B=2 N=40", "loop4", 0);
  run_case("gelu_erf", "B=5 N=33", NULL, 0);
  run_case("silu", "B=1 N=300", NULL, 0);
  run_case("outer", "M=7 N=12", "loop4", 0);
  run_case("outer", "M=7 N=13", NULL, 0);
  run_case("transpose", "M=9 N=17", NULL, 0);
  run_case("relu", "B=0 N=5", NULL, 0);
}
END_TEST

START_TEST(test_run_reductions) {
  if (!emulator()) return;
  run_case("matvec", "M=70 K=300", NULL, 0);
  run_case("matvec", "M=70 K=300", "loop", 0);
  run_case("matvec", "M=5 K=3", "warp", 0);
  run_case("colsum", "B=50 N=33", NULL, 0);
  run_case("colsum", "B=50 N=33", "warp", 0);
  run_case("dot", "N=1000", NULL, 0);
  run_case("dot", "N=70000", NULL, 0);
  run_case("dot", "N=3000", "grid", 0);
  run_case("dot", "N=0", NULL, 0);
  run_case("gsum", "A=30 N=70", "grid", 0);
  run_case("gsum", "A=30 N=70", "block1024", 0);
  run_case("imax", "N=5000", "grid", 0);
  run_case("maxpool2d", "N=1 C=2 H=8 W=9 K=2 S=2", NULL, 0);
  run_case("maxpool2d", "N=1 C=2 H=8 W=9 K=3 S=1", "warp", 0);
  run_case("avgpool2d", "N=2 C=1 H=7 W=7 K=3 S=2", NULL, 0);
  run_case("conv1d", "N=2 C=3 L=20 F=4 K=3 S=2 P=1", NULL, 0);
  run_case("conv1d", "N=2 C=3 L=20 F=4 K=3 S=1 P=0", "loop", 0);
  run_case("conv2d", "N=1 C=2 H=9 W=8 F=3 KH=3 KW=2 S=1 P=1", NULL, 0);
  run_case("conv2d", "N=1 C=2 H=9 W=8 F=3 KH=3 KW=2 S=2 P=0", "loop", 0);
}
END_TEST

START_TEST(test_run_rowwise) {
  if (!emulator()) return;
  static const char *vars[] = {NULL, "warp", "block256", "block1024"};
  for (int v = 0; v < 4; v++) {
    run_case("softmax", "B=5 N=300", vars[v], 0);
    run_case("softmax", "B=9 N=7", vars[v], 0);
    run_case("log_softmax", "B=3 N=70", vars[v], 0);
    run_case("layernorm", "B=9 N=130", vars[v], 0);
    run_case("rmsnorm", "B=4 N=33", vars[v], 0);
    run_case("var", "B=6 N=77", vars[v], 0);
    run_case("std", "B=6 N=77", vars[v], 0);
    run_case("argmax", "B=10 N=50", vars[v], 0);
    run_case("both", "B=10 N=40", vars[v], 0);
  }
  run_case("softmax", "B=2 N=5000", NULL, 0);
  run_case("sum", "B=6 N=77", NULL, 0);
  run_case("mean", "B=17 N=3", NULL, 0);
  run_case("amax", "B=6 N=77", NULL, 0);
  run_case("soft64", "B=5 N=40", NULL, 0);
  run_case("soft64", "B=20 N=40", "warp", 0);
  run_case("isum", "B=4 N=9", NULL, 0);
  run_case("softmax", "B=0 N=5", NULL, 0);
}
END_TEST

START_TEST(test_run_contractions) {
  if (!emulator()) return;
  static const char *shapes[] = {"gemm128x128", "gemm128x64", "gemm64x128", "gemm64x64", "gemm32x32"};
  for (int g = 0; g < 5; g++) {
    run_case("matmul", "M=130 N=70 K=50", shapes[g], 0);
    run_case("matmul", "M=33 N=36 K=40", shapes[g], 1);
    run_case("linear", "B=33 I=40 O=50", shapes[g], 0);
    run_case("tmm", "M=37 N=44 K=21", shapes[g], 0);
    run_case("ttm", "M=36 N=20 K=19", shapes[g], 0);
  }
  run_case("matmul", "M=1 N=33 K=17", NULL, 0);
  run_case("matmul", "M=64 N=64 K=64", NULL, 0);
  run_case("matmul", "M=20 N=24 K=100", "gemm32x32", 3);
  run_case("matmul", "M=20 N=24 K=100", "gemm64x64", 7);
  run_case("matmul", "M=5 N=6 K=0", NULL, 0);
  run_case("linear", "B=3 I=200 O=5", NULL, 4);
  run_case("bmm", "B=3 M=20 N=36 K=40", NULL, 0);
  run_case("bmm", "B=3 M=20 N=36 K=40", "gemm64x128", 2);
  run_case("bmm1", "B=2 M=9 N=12 K=8", NULL, 0);
  run_case("attention", "B=2 S=9 T=11 D=8", NULL, 0);
  run_case("causal_attention", "B=2 S=9 T=9 D=4", NULL, 0);
  run_case("mlp", "B=5 I=12 H=20 O=7", NULL, 0);
}
END_TEST

/* The tensor-core tiles on the emulator, within what their rounding allows: an operand's
 * relative error is at most 2^-11 in tf32 and 2^-8 in bf16, and over K products of random
 * sign the error of a sum grows like sqrt(K), as its value does: 1e-3 (1e-2) of the largest
 * output covers it.  Every tile shape on the four layouts of A and B (the fragments are read
 * differently from each), then shapes of 1, primes and the tiles' sizes -1, 0, +1. */
static void tensor_core_cases(CudaMath m) {
  double tol = m == CUDA_TF32 ? 1e-3 : 1e-2;
  const char *pre = m == CUDA_TF32 ? "tf32_" : "bf16_";
  static const char *shapes[] = {"128x128", "128x64", "64x128", "64x64", "32x32"};
  char force[32];
  for (int g = 0; g < 5; g++) {
    snprintf(force, sizeof force, "%s%s", pre, shapes[g]);
    run_math("matmul", "M=129 N=65 K=33", force, 0, m, tol);    /* A k contiguous, B n contiguous */
    run_math("linear", "B=31 I=37 O=17", force, 0, m, tol);      /* both k contiguous */
    run_math("tmm", "M=37 N=44 K=21", force, 0, m, tol);         /* A m contiguous */
    run_math("ttm", "M=36 N=20 K=19", force, 0, m, tol);         /* A m, B k contiguous */
  }
  snprintf(force, sizeof force, "%s128x64", pre);
  run_math("matmul", "M=127 N=63 K=31", force, 0, m, tol);
  run_math("matmul", "M=128 N=64 K=32", force, 0, m, tol);
  run_math("matmul", "M=1 N=1 K=1", NULL, 0, m, tol);
  run_math("matmul", "M=13 N=7 K=5", NULL, 0, m, tol);
  run_math("matmul", "M=1 N=33 K=17", NULL, 0, m, tol);
  run_math("matmul", "M=5 N=6 K=0", NULL, 0, m, tol);
  snprintf(force, sizeof force, "%s32x32", pre);
  run_math("matmul", "M=31 N=33 K=17", force, 0, m, tol);
  run_math("matmul", "M=20 N=24 K=100", force, 3, m, tol);      /* K split in 3 */
  run_math("bmm", "B=3 M=17 N=31 K=19", NULL, 0, m, tol);
  snprintf(force, sizeof force, "%s64x64", pre);
  run_math("bmm", "B=2 M=65 N=33 K=64", force, 2, m, tol);
  run_math("bmm1", "B=2 M=9 N=12 K=8", NULL, 0, m, tol);
  run_math("attention", "B=2 S=9 T=11 D=8", NULL, 0, m, tol);
  run_math("mlp", "B=5 I=12 H=20 O=7", NULL, 0, m, tol);
}

START_TEST(test_run_tf32) {
  if (!emulator()) return;
  tensor_core_cases(CUDA_TF32);
}
END_TEST

START_TEST(test_run_bf16) {
  if (!emulator()) return;
  tensor_core_cases(CUDA_BF16);
}
END_TEST

/* 16-bit contractions on the emulated tensor cores (m16n8k16 with the PTX ISA's fragment
 * layouts, so that a fragment in the wrong place gives a wrong product): every tile shape on
 * the four layouts of A and B and a batch, then shapes of 0, 1, primes, the tiles' sizes -1,
 * 0, +1 and a split K.  The products are exact and summed in f32, so the results differ from
 * the reference's (summed in f64) by the final rounding: a few of the type's units in the last
 * place (4e-3 for f16, 3e-2 for bf16, as :check allows); the arithmetic asked for for f32
 * contractions does not change them. */
static void mma16_cases(const char *s, double tol) {
  static const char *shapes[] = {"128x128", "128x64", "64x128", "64x64", "32x32"};
  char fn[5][16], force[32];
  const char *base[] = {"mm", "lin", "tmm", "ttm", "bmm"};
  for (int i = 0; i < 5; i++) snprintf(fn[i], sizeof fn[i], "%s%s", base[i], s);
  for (int g = 0; g < 5; g++) {
    snprintf(force, sizeof force, "mma16_%s", shapes[g]);
    run_math(fn[0], "M=129 N=65 K=33", force, 0, CUDA_EXACT, tol);    /* A k contiguous, B n contiguous */
    run_math(fn[1], "B=31 I=37 O=17", force, 0, CUDA_EXACT, tol);      /* both k contiguous */
    run_math(fn[2], "M=37 N=44 K=21", force, 0, CUDA_EXACT, tol);      /* A m contiguous */
    run_math(fn[3], "M=36 N=20 K=19", force, 0, CUDA_EXACT, tol);      /* A m, B k contiguous */
    run_math(fn[4], "B=2 M=33 N=17 K=40", force, 0, CUDA_EXACT, tol);
  }
  run_math(fn[0], "M=127 N=63 K=31", "mma16_128x64", 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=128 N=64 K=32", "mma16_128x64", 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=129 N=65 K=33", "mma16_128x64", 0, CUDA_TF32, tol);
  run_math(fn[0], "M=1 N=1 K=1", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=13 N=7 K=5", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=1 N=33 K=17", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=5 N=6 K=0", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=0 N=6 K=3", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[1], "B=1 I=1 O=1", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[2], "M=31 N=33 K=17", "mma16_32x32", 0, CUDA_EXACT, tol);
  run_math(fn[3], "M=31 N=33 K=33", "mma16_32x32", 0, CUDA_EXACT, tol);
  run_math(fn[0], "M=20 N=24 K=100", "mma16_32x32", 3, CUDA_EXACT, tol);      /* K split in 3 */
  run_math(fn[4], "B=3 M=17 N=31 K=19", NULL, 0, CUDA_EXACT, tol);
  run_math(fn[4], "B=2 M=65 N=33 K=64", "mma16_64x64", 2, CUDA_EXACT, tol);
}

START_TEST(test_run_mma16) {
  if (!emulator()) return;
  check_source("h16.dyn", H16);
  mma16_cases("_h", 4e-3);
  mma16_cases("_b", 3e-2);
  ck_assert(strstr(cuda_program_source(lookup(NULL, "mm_h")->code.gpu), "DynMma<") != NULL);
}
END_TEST

/* Exact stays exact: the default's error is f32's, far under what tf32 makes of the same
 * contraction (which shows the tolerance tells them apart). */
START_TEST(test_run_exact_stays_exact) {
  if (!emulator()) return;
  double e = run_math("matmul", "M=70 N=40 K=200", NULL, 0, CUDA_EXACT, 1e-5);
  double e2 = run_math("linear", "B=33 I=150 O=50", NULL, 0, CUDA_EXACT, 1e-5);
  double t = run_math("matmul", "M=70 N=40 K=200", NULL, 0, CUDA_TF32, 1e-3);
  ck_assert_msg(e < 1e-6 && e2 < 1e-6, "exact: %g, %g of the largest value", e, e2);
  ck_assert_msg(t > 1e-5, "tf32 as close as exact (%g): are the operands rounded?", t);
  ck_assert(strstr(cuda_program_source(lookup(NULL, "matmul")->code.gpu), "mma.sync") == NULL);
}
END_TEST

/* The roundings, written differently from emu.h's bit tricks: keep 11 (tf32) or 8 (bf16)
 * significant bits; round() breaks ties away from zero, rint() to even. */
static float round_tf32(float x) {
  int e;
  double m = frexp(x, &e);
  return (float)ldexp(round(ldexp(m, 11)), e - 11);
}
static float round_bf16(float x) {
  int e;
  double m = frexp(x, &e);
  return (float)ldexp(rint(ldexp(m, 8)), e - 8);
}

/* Bit for bit: with K = 2 each output is two products of rounded operands, each exact in
 * f32, summed once: C is known exactly.  The values include ties of both roundings. */
START_TEST(test_run_tensor_rounding) {
  if (!emulator()) return;
  ck_assert(round_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);
  ck_assert(round_tf32(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f));
  ck_assert(round_bf16(1.0f + 0x1p-8f) == 1.0f);
  ck_assert(round_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
  static const float vals[] = {1.0f + 0x1p-11f, -(1.0f + 0x1p-11f), 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                               -(1.0f + 0x1p-8f), 0.1f, -0.3f, 3.14159265f, 1e-3f, 65504.0f, 1.0f + 0x1p-12f, -7.77e-2f};
  enum { NV = sizeof vals / sizeof *vals, M = 13, N = 11, K = 2 };
  const char *names[] = {"M", "N", "K"};
  int64_t sv[] = {M, N, K};
  EvalSizes sz = {names, sv, 3};
  char err[4096];
  int64_t da[] = {M, K}, db[] = {K, N};
  Tensor *in[2] = {tensor_new(DYN_F32, 2, da, err, sizeof err), tensor_new(DYN_F32, 2, db, err, sizeof err)};
  float *A = tensor_data(in[0]), *B = tensor_data(in[1]);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) A[i * K + k] = vals[(i + 5 * k) % NV];
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) B[k * N + j] = vals[(j + 7 * k + 3) % NV];
  Func *f = lookup(NULL, "matmul");
  int fi = 0;
  while (fns[fi] != f) fi++;
  for (CudaMath m = CUDA_TF32; m <= CUDA_BF16; m++) {
    float (*rnd)(float) = m == CUDA_TF32 ? round_tf32 : round_bf16;
    if (!tc_progs[m][fi]) tc_progs[m][fi] = cuda_compile(emu_be, program("matmul"), m, err, sizeof err);
    ck_assert_msg(tc_progs[m][fi] != NULL, "%s", err);
    Tensor *out[1] = {0};
    ck_assert_int_eq(run_at(tc_progs[m][fi], program("matmul"), in, &sz, out, err, sizeof err), 1);
    const float *C = tensor_data(out[0]);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double p0 = (double)rnd(A[i * K]) * rnd(B[j]), p1 = (double)rnd(A[i * K + 1]) * rnd(B[N + j]);
        float want = (float)(p0 + p1);
        ck_assert_msg(C[i * N + j] == want, "%s: C[%d][%d] = %a, want %a (A %a %a, B %a %a)", cuda_math_name(m), i, j, C[i * N + j], want,
                      A[i * K], A[i * K + 1], B[j], B[N + j]);
      }
    tensor_release(out[0]);
  }
  tensor_release(in[0]);
  tensor_release(in[1]);
}
END_TEST

/* f64 contractions on the tiles: every shape on the four layouts, edges, a split K, a batch,
 * within f64's tolerance. */
START_TEST(test_run_f64_contractions) {
  if (!emulator()) return;
  static const char *shapes[] = {"gemm64x64", "gemm64x32", "gemm32x32"};
  for (int g = 0; g < 3; g++) {
    run_case("mm64", "M=65 N=33 K=17", shapes[g], 0);
    run_case("lin64", "B=31 I=37 O=17", shapes[g], 0);
    run_case("tmm64", "M=37 N=44 K=21", shapes[g], 0);
    run_case("ttm64", "M=36 N=20 K=19", shapes[g], 3);
  }
  run_case("mm64", "M=1 N=1 K=1", NULL, 0);
  run_case("mm64", "M=63 N=31 K=15", NULL, 0);
  run_case("mm64", "M=64 N=32 K=16", NULL, 0);
  run_case("mm64", "M=20 N=24 K=100", "gemm32x32", 4);
  run_case("mm64", "M=5 N=6 K=0", NULL, 0);
  run_case("bmm64", "B=3 M=17 N=31 K=19", NULL, 0);
  ck_assert(strstr(cuda_program_source(lookup(NULL, "mm64")->code.gpu), "DynGemm<64, 64, 16, 4, 4, true, false, double>") != NULL);
}
END_TEST

/* A session on the reference target whose output and errors go to one text, for the
 * session tests below; session_text closes it and returns that text (the caller frees it). */
typedef struct { char *text; size_t len; FILE *out; Session *se; } EmuSession;

static void emu_session(EmuSession *e) {
  e->text = NULL;
  e->len = 0;
  e->out = open_memstream(&e->text, &e->len);
  SessionOptions opt = {.target = "ref"};
  e->se = session_new(&opt, e->out, e->out);
}

static char *session_text(EmuSession *e) {
  session_free(e->se);
  fclose(e->out);
  return e->text;
}

/* :check in a session on the emulated GPU: with tf32 it says so and allows for the rounding;
 * exact f32 is held to the usual tolerance. */
START_TEST(test_session_check_math) {
  if (!emulator()) return;
  EmuSession es;
  emu_session(&es);
  Session *se = es.se;
  ck_assert_int_eq(session_run(se, "seed(3)\nA = randn(f32[33, 70])\nB = randn(f32[70, 17])", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":target gpu tf32", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":check matmul(A, B)", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":target gpu bf16", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":check matmul(A, B)", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":target gpu", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":check matmul(A, B)", "t"), RUN_OK);
  char *text = session_text(&es);
  ck_assert_msg(strstr(text, "gpu (tf32, tolerance 0.005) vs ref: max |difference|") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "gpu (bf16, tolerance 0.04) vs ref: max |difference|") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "; gpu vs ref: max |difference|") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "MISMATCH") == NULL, "%s", text);
  free(text);
}
END_TEST

/* In a session on the emulated GPU: a gather's index out of range is reported with the
 * index, its value and the axis (the device's error word, then the evaluator for the
 * message), and :check holds a 16-bit contraction, run on the m16n8k16 tiles, to the f16
 * tolerance. */
START_TEST(test_session_gpu_gather_halves) {
  if (!emulator()) return;
  EmuSession es;
  emu_session(&es);
  Session *se = es.se;
  ck_assert_int_eq(session_run(se, ":target gpu", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, "fn gath(E: f32[V, D], I: i32[T]) -> f32[T, D] {\n  Y[t, d] = E[I[t], d]\n  return Y\n}\n"
                                   "fn hm(A: f16[M, K], B: f16[K, N]) -> f16[M, N] {\n  C[i, j] = sum[k] A[i, k] * B[k, j]\n"
                                   "  return C\n}\nseed(5)\nE = randn(f32[5, 3])\nA = f16(randn(f32[37, 70]))\n"
                                   "B = f16(randn(f32[70, 19]))", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, "Y = gath(E, i32([0, 4, 1]))", "t"), RUN_OK);
  ck_assert_int_ne(session_run(se, "Y = gath(E, i32([0, 4, 7, 1]))", "t"), RUN_OK);
  ck_assert_int_eq(session_run(se, ":check hm(A, B)", "t"), RUN_OK);
  char *text = session_text(&es);
  ck_assert_msg(strstr(text, "I[2] = 7 is out of range for axis 0 of E (size 5)") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "f16[37, 19]: ref computed;") != NULL && strstr(text, "gpu vs ref: max |difference|") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "MISMATCH") == NULL, "%s", text);
  free(text);
}
END_TEST

START_TEST(test_run_semantics) {
  if (!emulator()) return;
  run_case("idiv", "N=300", NULL, 0);          /* zero divisors among the inputs: an error */
  run_case("iops", "N=100", NULL, 0);
  run_case("iops", "N=100", "loop", 0);
  run_case("shift", "N=20 P=0", NULL, 0);
  run_case("shift", "N=20 P=3", NULL, 0);      /* out of bounds: an error, as the reference */
  run_case("pos", "N=50", NULL, 0);
  run_case("casts", "N=64", NULL, 0);
  run_case("casts", "N=64", "loop", 0);
  run_case("wred", "B=8 N=5", NULL, 0);
  run_case("wred", "B=8 N=0", NULL, 0);        /* X[b, 0] out of bounds */
}
END_TEST

/* Gathers: an element of an integer tensor as a subscript.  The inputs' integers are in
 * [-10, 10], so E[I[t], d] goes out of range (an error on both), and I[t] % V stays in. */
START_TEST(test_run_gather) {
  if (!emulator()) return;
  run_case("gath", "V=7 D=33 T=20", NULL, 0);
  run_case("gath", "V=7 D=33 T=0", NULL, 0);
  run_case("gathm", "V=7 D=33 T=20", NULL, 0);
  run_case("gathm", "V=1 D=130 T=3", NULL, 0);
  run_case("gathm", "V=13 D=1 T=65", "loop", 0);
  run_case("along", "B=5 N=11 K=40", NULL, 0);
  run_case("along", "B=1 N=3 K=257", NULL, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cuda");
  TCase *tc = tcase_create("render");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_no_driver);
  tcase_add_test(tc, test_no_driver_default);
  tcase_add_test(tc, test_nvrtc_bad_source);
  tcase_add_test(tc, test_golden_relu);
  tcase_add_test(tc, test_golden_softmax);
  tcase_add_test(tc, test_golden_matmul);
  tcase_add_test(tc, test_golden_matmul_tf32);
  tcase_add_test(tc, test_render_stable);
  tcase_add_test(tc, test_gemm_model);
  tcase_add_test(tc, test_gemm_model_tensor_cores);
  tcase_add_test(tc, test_gemm_model_mma16);
  tcase_add_test(tc, test_describe);
  tcase_add_test(tc, test_contraction_record);
  tcase_add_test(tc, test_sched_terms);
  tcase_add_test(tc, test_views_render);
  tcase_add_test(tc, test_scans_render);
  tcase_add_test(tc, test_halves_render);
  tcase_add_test(tc, test_ptx_sm80);
  tcase_add_test(tc, test_ptx_sm90);
  tcase_add_test(tc, test_ptx_tensor_cores);
  tcase_add_test(tc, test_ptx_mma16);
  suite_add_tcase(s, tc);
  TCase *run = tcase_create("emulated");
  tcase_add_checked_fixture(run, emu_setup, teardown);
  tcase_set_timeout(run, 900);
  tcase_add_test(run, test_run_views);
  tcase_add_test(run, test_run_scans);
  tcase_add_test(run, test_run_halves);
  tcase_add_test(run, test_run_loops);
  tcase_add_test(run, test_run_reductions);
  tcase_add_test(run, test_run_rowwise);
  tcase_add_test(run, test_run_contractions);
  tcase_add_test(run, test_run_semantics);
  tcase_add_test(run, test_run_gather);
  tcase_add_test(run, test_run_tf32);
  tcase_add_test(run, test_run_bf16);
  tcase_add_test(run, test_run_mma16);
  tcase_add_test(run, test_run_exact_stays_exact);
  tcase_add_test(run, test_run_tensor_rounding);
  tcase_add_test(run, test_run_f64_contractions);
  tcase_add_test(run, test_session_check_math);
  tcase_add_test(run, test_session_gpu_gather_halves);
  suite_add_tcase(s, run);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
