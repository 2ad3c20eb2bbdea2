/* test_api.c -- unit tests for libdyn's public interface (include/dyn/dyn.h), linked against
 * the shared library as an embedder links it, so only what it exports is reachable.  Results
 * are compared with products worked out here on random data, at awkward sizes (0, 1,
 * primes) and with strided arguments; errors as their records (file, line, column, message,
 * notes); two threads each run their own session at once.
 */
#include "config.h"
#include "dyn/dyn.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static dyn_session *S;

static void setup(void) {
  dyn_options o;
  dyn_options_init(&o);
  o.threads = 2;
  char *err = NULL;
  S = dyn_session_new(&o, &err);
  ck_assert_msg(S != NULL, "%s", err ? err : "?");
}

static void teardown(void) {
  dyn_session_free(S);
  ck_assert_int_eq(dyn_live_results(), 0);
}

static DLTensor f32(float *data, int ndim, int64_t *shape, int64_t *strides) {
  DLTensor t = {data, {kDLCPU, 0}, ndim, {kDLFloat, 32, 1}, shape, strides, 0};
  return t;
}

static void fill(float *x, int64_t n, unsigned *seed) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(rand_r(seed) % 2001 - 1000) / 250.0f;
}

START_TEST(test_version) {
  ck_assert_str_eq(dyn_version(), PACKAGE_VERSION);
  ck_assert_str_eq(DYN_VERSION_STRING, PACKAGE_VERSION);
}
END_TEST

/* matmul of the prelude on sizes with 0, 1 and primes, A given contiguous and B as the
 * transpose of a K-major array (strides (1, K)): read in place either way */
START_TEST(test_matmul_sizes_and_strides) {
  static const int64_t sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {0, 3, 4}, {3, 0, 4}, {17, 1, 31}, {8, 8, 8}};
  unsigned seed = 7;
  for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++) {
    int64_t M = sizes[c][0], K = sizes[c][1], N = sizes[c][2];
    float *A = malloc(sizeof(float) * (size_t)(M * K + 1)), *Bt = malloc(sizeof(float) * (size_t)(K * N + 1));
    fill(A, M * K, &seed);
    fill(Bt, K * N, &seed);
    for (int strided = 0; strided < 2; strided++) {
      int64_t sa[2] = {M, K}, sb[2] = {K, N}, stb[2] = {1, K};
      /* contiguous B: copy Bt's transpose once, here, for the comparison run */
      float *B = malloc(sizeof(float) * (size_t)(K * N + 1));
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) B[k * N + j] = Bt[j * K + k];
      DLTensor args[2] = {f32(A, 2, sa, NULL), strided ? f32(Bt, 2, sb, stb) : f32(B, 2, sb, NULL)};
      DLManagedTensor *r = NULL;
      int nr = -1;
      int st = dyn_call(S, "matmul", args, 2, &r, 1, &nr);
      ck_assert_msg(st == 0, "%s", dyn_diagnostic_count(S) ? dyn_diagnostic_get(S, 0)->text : "?");
      ck_assert_int_eq(nr, 1);
      ck_assert_int_eq(r->dl_tensor.ndim, 2);
      ck_assert_int_eq(r->dl_tensor.shape[0], M);
      ck_assert_int_eq(r->dl_tensor.shape[1], N);
      ck_assert_int_eq(r->dl_tensor.dtype.code, kDLFloat);
      const float *C = (const float *)((char *)r->dl_tensor.data + r->dl_tensor.byte_offset);
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          double want = 0;
          for (int64_t k = 0; k < K; k++) want += (double)A[i * K + k] * Bt[j * K + k];
          double got = C[i * r->dl_tensor.strides[0] + j * r->dl_tensor.strides[1]];
          ck_assert_msg(fabs(got - want) <= 1e-3 * (1 + fabs(want)), "%lldx%lldx%lld (%s) [%lld, %lld]: %g, not %g",
                        (long long)M, (long long)K, (long long)N, strided ? "strided" : "contiguous", (long long)i,
                        (long long)j, got, want);
        }
      r->deleter(r);
      free(B);
    }
    free(A);
    free(Bt);
  }
}
END_TEST

/* The caller's memory is read at each call, not a copy kept from an earlier one. */
START_TEST(test_no_copy) {
  ck_assert_int_eq(dyn_run(S, "fn twice(x: f32[N]) -> f32[N] {\n  y[i] = x[i] * 2.0\n  return y\n}\n", NULL), 0);
  float x[5] = {1, 2, 3, 4, 5};
  int64_t n = 5, st = 2, n2 = 3;
  for (int round = 0; round < 2; round++) {
    DLTensor a = f32(x, 1, &n, NULL);
    DLManagedTensor *r;
    ck_assert_int_eq(dyn_call(S, "twice", &a, 1, &r, 1, NULL), 0);
    const float *y = r->dl_tensor.data;
    for (int i = 0; i < 5; i++) ck_assert_float_eq(y[i], 2 * x[i]);
    r->deleter(r);
    DLTensor b = f32(x, 1, &n2, &st);    /* every other element, in place */
    ck_assert_int_eq(dyn_call(S, "twice", &b, 1, &r, 1, NULL), 0);
    y = r->dl_tensor.data;
    for (int i = 0; i < 3; i++) ck_assert_float_eq(y[i], 2 * x[2 * i]);
    r->deleter(r);
    x[0] = 100, x[2] = -7;              /* written through between calls */
  }
}
END_TEST

/* A window read from the caller's memory, which has no slack after it: X ends where a page
 * that cannot be read begins, and the gathered windows' rows run backwards through it (row
 * H - 3 - h + i), so their first runs lie at X's end, at steps 1 and 2 along a row.  Runs
 * are copied in whole vectors only where the elements past them are X's (cpu_win_gather):
 * a copy past its end would fault here.  The result against sums worked out here. */
START_TEST(test_window_at_page_end) {
  ck_assert_int_eq(dyn_run(S, "fn flip(X: f32[N, C, H, W], Wt: f32[F, C, 3, 3]) -> f32[N, F, H - 2, W - 2] "
                              "where H >= 3, W >= 3 {\n"
                              "  Y[n, f, h, w] = sum[c, i, j] X[n, c, H - 3 - h + i, w + j] * Wt[f, c, i, j]\n"
                              "  return Y\n}\n"
                              "fn flip2(X: f32[N, C, H, W], Wt: f32[F, C, 3, 3]) -> f32[N, F, H - 2, (W - 3) / 2 + 1] "
                              "where H >= 3, W >= 3 {\n"
                              "  Y[n, f, h, w] = sum[c, i, j] X[n, c, H - 3 - h + i, 2 * w + j] * Wt[f, c, i, j]\n"
                              "  return Y\n}\n", NULL), 0);
  enum { N = 2, C = 3, H = 9, F = 5 };
  for (int st = 1; st <= 2; st++)
    for (int W = 5; W <= 41; W += 36) {        /* runs of 3 or 2, and of 39 or 20 */
      int HO = H - 2, WO = (W - 3) / st + 1;
      long page = sysconf(_SC_PAGESIZE);
      size_t xb = sizeof(float) * N * C * H * (size_t)W, span = (xb + (size_t)page - 1) / (size_t)page * (size_t)page;
      char *m = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ck_assert(m != MAP_FAILED);
      ck_assert_int_eq(mprotect(m + span, (size_t)page, PROT_NONE), 0);
      float *x = (float *)(m + span - xb), wt[F * C * 9];
      unsigned seed = 11;
      fill(x, N * C * H * W, &seed);
      fill(wt, F * C * 9, &seed);
      int64_t sx[4] = {N, C, H, W}, sw[4] = {F, C, 3, 3};
      DLTensor args[2] = {f32(x, 4, sx, NULL), f32(wt, 4, sw, NULL)};
      DLManagedTensor *r;
      ck_assert_int_eq(dyn_call(S, st == 1 ? "flip" : "flip2", args, 2, &r, 1, NULL), 0);
      const float *y = r->dl_tensor.data;
      for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++)
          for (int h = 0; h < HO; h++)
            for (int w = 0; w < WO; w++) {
              double want = 0, mag = 0;
              for (int c = 0; c < C; c++)
                for (int i = 0; i < 3; i++)
                  for (int j = 0; j < 3; j++) {
                    double t = (double)x[((n * C + c) * H + H - 3 - h + i) * W + st * w + j] * wt[(f * C + c) * 9 + i * 3 + j];
                    want += t, mag += fabs(t);
                  }
              float got = y[((n * F + f) * HO + h) * WO + w];
              ck_assert_msg(fabs(got - want) <= 1e-5 * mag + 1e-30, "step %d, W = %d: Y[%d, %d, %d, %d] = %g, not %g",
                            st, W, n, f, h, w, got, want);
            }
      r->deleter(r);
      munmap(m, span + (size_t)page);
    }
}
END_TEST

/* Views as NumPy makes them -- X[:, ::2], X.T, X[::-1], X[:, ::-1], a slice of a bigger
 * array, broadcast_to's zero strides -- are read in place: every result as worked out here
 * through the same strides, and no byte gathered on the way in (dyn_gathered_bytes), on the
 * CPU's compiled code and on the evaluator alike. */
START_TEST(test_strided_in_place) {
  static const char *const names[] = {"X[:, ::2]", "X.T", "X[::-1]", "X[:, ::-1]", "X[2:, 3:]", "broadcast row",
                                      "broadcast column"};
  static const char *const defs =
    "fn mix(a: f32[M, N], b: f32[M, N]) -> (f32[M, N], f32[M], f32[M, M]) {\n"
    "  y[i, j] = a[i, j] * 2.0 - b[i, j]\n"
    "  r[i] = sum[j] a[i, j] * b[i, j]\n"
    "  g[i, k] = sum[j] a[i, j] * b[k, j]\n"
    "  return (y, r, g)\n}\n";
  static const int64_t shapes[][2] = {{1, 1}, {0, 5}, {5, 0}, {7, 13}, {17, 33}, {2, 65}};
  const char *targets[] = {"cpu", "ref"};
  unsigned seed = 11;
  for (int tg = 0; tg < 2; tg++) {
    dyn_options o;
    dyn_options_init(&o);
    o.threads = 2;
    o.target = targets[tg];
    dyn_session *s = dyn_session_new(&o, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(dyn_run(s, defs, NULL), 0);
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
      for (int layout = 0; layout < 7; layout++) {
        int64_t m = shapes[c][0], n = shapes[c][1], q = 2 * n + 3, t = m + 1;
        int64_t st[7][2] = {{q, 2}, {1, t}, {-q, 1}, {q, -1}, {q, 1}, {0, 1}, {1, 0}};
        int64_t *sd = st[layout], lo = 4, hi = 4;   /* margins: a read past the view shows */
        for (int d = 0; d < 2; d++) {
          int64_t span = (d ? n : m) > 0 ? ((d ? n : m) - 1) * sd[d] : 0;
          if (span < 0) lo -= span;
          else hi += span;
        }
        int64_t total = lo + hi + 1, shape[2] = {m, n};
        float *buf[2];
        DLTensor args[2];
        for (int i = 0; i < 2; i++) {
          buf[i] = malloc(sizeof(float) * (size_t)total);
          fill(buf[i], total, &seed);
          args[i] = f32(buf[i] + lo, 2, shape, sd);
        }
        const float *a = buf[0] + lo, *b = buf[1] + lo;
#define AT(p, i, j) ((double)(p)[(i) * sd[0] + (j) * sd[1]])
        DLManagedTensor *r[3];
        int nr = 0;
        int status = dyn_call(s, "mix", args, 2, r, 3, &nr);
        ck_assert_msg(status == 0, "%s", dyn_diagnostic_count(s) ? dyn_diagnostic_get(s, 0)->text : "?");
        ck_assert_int_eq(nr, 3);
        ck_assert_msg(dyn_gathered_bytes(s) == 0, "%s on %s: %lld bytes gathered", names[layout], targets[tg],
                      (long long)dyn_gathered_bytes(s));
        const float *y = r[0]->dl_tensor.data, *rs = r[1]->dl_tensor.data, *g = r[2]->dl_tensor.data;
        for (int64_t i = 0; i < m; i++) {
          double want_r = 0;
          for (int64_t j = 0; j < n; j++) {
            double want = 2 * AT(a, i, j) - AT(b, i, j);
            ck_assert_msg(fabs(y[i * n + j] - want) <= 1e-5 * (1 + fabs(want)), "%s %lldx%lld on %s: y[%lld, %lld] is %g, not %g",
                          names[layout], (long long)m, (long long)n, targets[tg], (long long)i, (long long)j, y[i * n + j], want);
            want_r += AT(a, i, j) * AT(b, i, j);
          }
          ck_assert_msg(fabs(rs[i] - want_r) <= 1e-4 * (1 + fabs(want_r)), "%s on %s: r[%lld] is %g, not %g", names[layout],
                        targets[tg], (long long)i, rs[i], want_r);
          for (int64_t k = 0; k < m; k++) {
            double want_g = 0;
            for (int64_t j = 0; j < n; j++) want_g += AT(a, i, j) * AT(b, k, j);
            ck_assert_msg(fabs(g[i * m + k] - want_g) <= 1e-4 * (1 + fabs(want_g)), "%s on %s: g[%lld, %lld] is %g, not %g",
                          names[layout], targets[tg], (long long)i, (long long)k, g[i * m + k], want_g);
          }
        }
#undef AT
        for (int i = 0; i < 3; i++) r[i]->deleter(r[i]);
        free(buf[0]);
        free(buf[1]);
      }
    dyn_session_free(s);
  }
}
END_TEST

START_TEST(test_signature) {
  const dyn_signature *sg = dyn_signature_get(S, "matmul");
  ck_assert_ptr_nonnull(sg);
  ck_assert_str_eq(sg->text, "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N]");
  ck_assert_int_eq(sg->nparams, 2);
  ck_assert_str_eq(sg->params[1].name, "B");
  ck_assert_str_eq(sg->params[1].elem, "f32");
  ck_assert_int_eq(sg->params[1].dtype.bits, 32);
  ck_assert_int_eq(sg->params[1].rank, 2);
  ck_assert_str_eq(sg->params[1].dims[0], "K");
  ck_assert_str_eq(sg->params[1].dims[1], "N");
  ck_assert_int_eq(sg->nresults, 1);
  ck_assert_str_eq(sg->results[0].dims[1], "N");
  ck_assert_int_eq(sg->nsizes, 3);
  ck_assert_int_eq(dyn_run(S, "fn rep(x: i64[N], R: size) -> i64[R, N + 1] {\n  y[r, i] = where(i < N, x[min(i, N - 1)], 0)\n  return y\n}", "pad.dyn"), 0);
  sg = dyn_signature_get(S, "rep");
  ck_assert_ptr_nonnull(sg);
  ck_assert_int_eq(sg->params[1].is_size, 1);
  ck_assert_str_eq(sg->results[0].dims[0], "R");
  ck_assert_str_eq(sg->results[0].dims[1], "N + 1");
  ck_assert_str_eq(sg->results[0].elem, "i64");
  ck_assert_ptr_null(dyn_signature_get(S, "nosuch"));
  ck_assert_int_eq(dyn_diagnostic_count(S), 1);
  ck_assert_str_eq(dyn_diagnostic_get(S, 0)->message, "no function named 'nosuch'");
}
END_TEST

/* Errors are records with their place and notes, never text on stderr. */
START_TEST(test_errors_as_data) {
  ck_assert_int_eq(dyn_run(S, "x = 1\ny = x +* 2\n", "bad.dyn"), -1);
  ck_assert_int_ge(dyn_diagnostic_count(S), 1);
  const dyn_diagnostic *d = dyn_diagnostic_get(S, 0);
  ck_assert_int_eq(d->is_error, 1);
  ck_assert_str_eq(d->file, "bad.dyn");
  ck_assert_int_eq(d->line, 2);
  ck_assert_int_eq(d->column, 8);
  ck_assert_ptr_nonnull(strstr(d->text, "bad.dyn:2:8: error: "));
  /* a call whose argument has the wrong type: the note points at the declaration */
  double z[4] = {0};
  int64_t shape[2] = {2, 2};
  DLTensor a = {z, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, shape, NULL, 0};
  DLTensor args[2] = {a, a};
  DLManagedTensor *r = NULL;
  ck_assert_int_eq(dyn_call(S, "matmul", args, 2, &r, 1, NULL), -1);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(dyn_diagnostic_count(S), 1);
  d = dyn_diagnostic_get(S, 0);
  ck_assert_str_eq(d->code, "E_ARG_TYPE");
  ck_assert_str_eq(d->message, "matmul: parameter A is f32[M, K] but the argument is f64[2, 2]");
  ck_assert_int_eq(d->nnotes, 1);
  ck_assert_str_eq(d->notes[0].file, "stdlib/linalg.dyn");
  ck_assert_int_eq(d->notes[0].line, 4);
  ck_assert_int_eq(d->notes[0].column, 11);
  ck_assert_str_eq(d->notes[0].message, "parameter A of matmul is declared here");
  /* an element type dyn does not have (u16; f16 and bf16 it has) */
  uint16_t h[4];
  DLTensor hb = {h, {kDLCPU, 0}, 2, {kDLUInt, 16, 1}, shape, NULL, 0};
  DLTensor hargs[2] = {hb, hb};
  ck_assert_int_eq(dyn_call(S, "matmul", hargs, 2, &r, 1, NULL), -1);
  ck_assert_ptr_nonnull(strstr(dyn_diagnostic_get(S, 0)->message, "argument 1 has an element type dyn does not have"));
  ck_assert_int_eq(dyn_run_file(S, "/nonexistent/x.dyn"), -1);
  ck_assert_int_eq(dyn_diagnostic_count(S), 1);
  ck_assert_ptr_nonnull(strstr(dyn_diagnostic_get(S, 0)->message, "/nonexistent/x.dyn"));
  char *why = NULL;
  dyn_options o;
  dyn_options_init(&o);
  o.target = "tpu";
  ck_assert_ptr_null(dyn_session_new(&o, &why));
  ck_assert_str_eq(why, "unknown target 'tpu' (cpu, gpu, gpu:tf32, gpu:bf16 or ref)");
  dyn_free_string(why);
}
END_TEST

START_TEST(test_output_and_measures) {
  ck_assert_int_eq(dyn_run(S, "print(1 + 2)", NULL), 0);
  char *out = dyn_take_output(S);
  ck_assert_str_eq(out, "i64 3\n");
  dyn_free_string(out);
  ck_assert_int_eq(dyn_run(S, "A = rand(f32[16, 16])", NULL), 0);
  dyn_timing t;
  ck_assert_int_eq(dyn_time(S, "B = matmul(A, A)", &t), 0);
  ck_assert_int_ge(t.runs, 3);
  ck_assert(t.min_ms <= t.median_ms && t.median_ms <= t.max_ms && t.min_ms > 0);
  ck_assert_str_eq(t.function, "matmul");
  ck_assert(t.gflops > 0);
  ck_assert_ptr_nonnull(strstr(t.text, "time: median"));
  dyn_schedule sc;
  const char *names[] = {"M", "K", "N"};
  int64_t vals[] = {64, 64, 64};
  ck_assert_int_eq(dyn_sched(S, "matmul", names, vals, 3, &sc), 0);
  ck_assert_str_eq(sc.function, "matmul");
  ck_assert_int_eq(sc.threads, 2);
  ck_assert_ptr_nonnull(strstr(sc.text, "matmul"));
  ck_assert_int_eq(dyn_sched(S, "matmul", names, vals, 1, &sc), -1);
  ck_assert_str_eq(dyn_diagnostic_get(S, 0)->message, "give every size of matmul: K is missing");
}
END_TEST

/* Two threads, each with a session of its own, at once: doc/api.md's rule. */
static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  dyn_options o;
  dyn_options_init(&o);
  o.threads = 1;
  dyn_session *s = dyn_session_new(&o, NULL);
  if (!s) return "no session";
  const char *bad = NULL;
  if (dyn_run(s, "fn axpy(a: f32[N], b: f32[N]) -> f32[N] {\n  c[i] = a[i] * 3.0 + b[i]\n  return c\n}", NULL)) bad = "run";
  for (int it = 0; it < 200 && !bad; it++) {
    int64_t n = 1 + rand_r(&seed) % 97, m = 1 + rand_r(&seed) % 13;
    float a[100], b[100], x[13 * 13], y[13 * 13];
    fill(a, n, &seed);
    fill(b, n, &seed);
    fill(x, m * m, &seed);
    fill(y, m * m, &seed);
    DLTensor args[2] = {f32(a, 1, &n, NULL), f32(b, 1, &n, NULL)};
    DLManagedTensor *r;
    if (dyn_call(s, "axpy", args, 2, &r, 1, NULL)) bad = "call axpy";
    for (int64_t i = 0; !bad && i < n; i++)
      if (fabs(((float *)r->dl_tensor.data)[i] - ((double)a[i] * 3 + b[i])) > 1e-5 * (1 + fabs(a[i] * 3 + b[i]))) bad = "axpy result";
    if (!bad) r->deleter(r);
    int64_t sh[2] = {m, m};
    DLTensor margs[2] = {f32(x, 2, sh, NULL), f32(y, 2, sh, NULL)};
    if (!bad && dyn_call(s, "matmul", margs, 2, &r, 1, NULL)) bad = "call matmul";
    for (int64_t i = 0; !bad && i < m * m; i++) {
      double want = 0;
      for (int64_t k = 0; k < m; k++) want += (double)x[i / m * m + k] * y[k * m + i % m];
      if (fabs(((float *)r->dl_tensor.data)[i] - want) > 1e-3 * (1 + fabs(want))) bad = "matmul result";
    }
    if (!bad) r->deleter(r);
  }
  dyn_session_free(s);
  return (void *)bad;
}

START_TEST(test_two_threads) {
  pthread_t th[2];
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)), 0);
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(th[i], &r);
    ck_assert_msg(r == NULL, "thread %d: %s", i, (const char *)r);
  }
}
END_TEST

static Suite *api_suite(void) {
  Suite *s = suite_create("api");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_version);
  tcase_add_test(tc, test_matmul_sizes_and_strides);
  tcase_add_test(tc, test_no_copy);
  tcase_add_test(tc, test_window_at_page_end);
  tcase_add_test(tc, test_strided_in_place);
  tcase_add_test(tc, test_signature);
  tcase_add_test(tc, test_errors_as_data);
  tcase_add_test(tc, test_output_and_measures);
  tcase_add_test(tc, test_two_threads);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(api_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
