/* test_session.c -- unit tests for the session (session.c, toplevel.c, builtins.c,
 * commands.c, value.c, backend.c) through its public entry points: session_new with an
 * output and an error stream, session_run, session_call, session_predict, session_free; and
 * the table of back ends (be_table), which the session's target points into.  Results are
 * compared as the text the session prints or as elements read back, against values worked
 * out here; errors as their exact located message.  The calibration cache is read from a
 * directory of the test's own, named by XDG_CACHE_HOME or HOME. */
#include "config.h"
#include "session_int.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A stream the session writes to, read back a piece at a time: news() is what was written
 * since the last call (valid until the next). */
typedef struct {
  FILE *f;
  char *buf;
  size_t len, seen;
  char *last;
} Stream;

static Stream out, err;
static char cache[256];             /* the test's own cache directory (XDG_CACHE_HOME) */

static void stream_open(Stream *st) {
  memset(st, 0, sizeof *st);
  st->f = open_memstream(&st->buf, &st->len);
  ck_assert_ptr_nonnull(st->f);
}

static void stream_close(Stream *st) {
  fclose(st->f);
  free(st->buf);
  free(st->last);
}

static const char *news(Stream *st) {
  fflush(st->f);
  free(st->last);
  st->last = strndup(st->buf + st->seen, st->len - st->seen);
  st->seen = st->len;
  return st->last;
}

static void rm_rf(const char *path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  ck_assert_int_eq(system(cmd), 0);
}

static void setup(void) {
  stream_open(&out);
  stream_open(&err);
  snprintf(cache, sizeof cache, "%s/test_session.%d", P_tmpdir, (int)getpid());
  rm_rf(cache);
  ck_assert_int_eq(mkdir(cache, 0755), 0);
  setenv("XDG_CACHE_HOME", cache, 1);    /* no calibration of the user's is read */
}

static void teardown(void) {
  stream_close(&out);
  stream_close(&err);
  rm_rf(cache);
}

static Session *new_session(const char *target) {
  SessionOptions opt = {.target = target, .threads = 1};
  Session *s = session_new(&opt, out.f, err.f);
  session_set_interactive(s, true);       /* bare expressions print their value */
  return s;
}

/* Run text; its output, with RUN_OK expected and nothing on the error stream. */
static const char *run_ok(Session *s, const char *text) {
  RunStatus r = session_run(s, text, "t.dyn");
  const char *e = news(&err);
  ck_assert_msg(r == RUN_OK && !*e, "%s: status %d, error %s", text, (int)r, e);
  return news(&out);
}

/* Run text that fails; its error stream. */
static const char *run_error(Session *s, const char *text, const char *origin) {
  ck_assert_int_eq(session_run(s, text, origin), RUN_ERROR);
  return news(&err);
}

static Tensor *vec_f32(int64_t n, const double *v) {
  char msg[128];
  Tensor *t = tensor_new(DYN_F32, 1, &n, msg, sizeof msg);
  ck_assert_ptr_nonnull(t);
  for (int64_t i = 0; i < n; i++) tensor_set_f64(t, i, v[i]);
  return t;
}

static Tensor *mat_f32(int64_t m, int64_t n, double (*f)(int64_t, int64_t)) {
  char msg[128];
  int64_t dims[2] = {m, n};
  Tensor *t = tensor_new(DYN_F32, 2, dims, msg, sizeof msg);
  ck_assert_ptr_nonnull(t);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) tensor_set_f64(t, i * n + j, f(i, j));
  return t;
}

static double cell(int64_t i, int64_t j) { return (double)(i * 10 + j) / 4; }

/* Definitions, then calls: from source (the printed value) and from C (the elements). */
START_TEST(test_define_and_call) {
  Session *s = new_session("ref");
  ck_assert_str_eq(run_ok(s, "fn axpy(A: f32[N], B: f32[N]) -> f32[N] { Y[i] = 2.0 * A[i] + B[i]; return Y }\n"
                             "fn rows(X: f32[M, N]) -> f32[M] { r[m] = sum[n] X[m, n]; return r }"), "");
  ck_assert_str_eq(run_ok(s, "axpy([1.0, 2.0, 3.0], [0.5, 0.25, -1.0])"), "f32[3]\n[ 2.5, 4.25,    5]\n");
  ck_assert_str_eq(run_ok(s, "A = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.5]]\nr = rows(A)\nprint(r)"), "f32[3]\n[   3,    7, 11.5]\n");
  ck_assert_str_eq(run_ok(s, ":type axpy"), "fn axpy(A: f32[N], B: f32[N]) -> f32[N]\n");
  ck_assert_str_eq(run_ok(s, ":vars"), "A  f32[3, 2]\nr  f32[3]\n");

  /* from C, on a matrix whose sums are worked out here */
  Tensor *x = mat_f32(4, 6, cell), *y = NULL;
  Buf e = {0};
  ck_assert_msg(session_call(s, "rows", &x, 1, &y, 1, &e), "%s", e.s);
  ck_assert_int_eq(y->rank, 1);
  ck_assert_int_eq(y->shape[0], 4);
  for (int64_t i = 0; i < 4; i++) {
    double want = 0;
    for (int64_t j = 0; j < 6; j++) want += cell(i, j);
    ck_assert_double_eq_tol(tensor_get_f64(y, i), want, 1e-4);
  }
  tensor_release(y);
  Tensor *ab[2] = {vec_f32(2, (double[]){1, -3}), vec_f32(2, (double[]){10, 0.5})};
  ck_assert_msg(session_call(s, "axpy", ab, 2, &y, 1, &e), "%s", e.s);
  ck_assert(tensor_get_f64(y, 0) == 12 && tensor_get_f64(y, 1) == -5.5);
  tensor_release(y);
  /* the model's time for a call whose arguments bind the sizes, and 0 where they do not */
  ck_assert(session_predict(s, "rows", &x, 1) > 0);
  ck_assert(session_predict(s, "rows", ab, 1) == 0);
  ck_assert(session_predict(s, "nothing", &x, 1) == 0);
  for (int i = 0; i < 2; i++) tensor_release(ab[i]);
  tensor_release(x);
  buf_free(&e);
  session_free(s);
}
END_TEST

/* An error is said once, at its place in the input, and every binding made before it stays
 * (session_run's promise), in this input and in earlier ones. */
START_TEST(test_located_error_keeps_bindings) {
  Session *s = new_session("ref");
  run_ok(s, "x = 1");
  ck_assert_str_eq(run_error(s, "y = 2\nz = y + w\nv = 3", "in.dyn"),
                   "in.dyn:2:9: error: undefined name 'w'\n"
                   "  2 | z = y + w\n"
                   "    |         ^\n");
  ck_assert_str_eq(news(&out), "");
  ck_assert_str_eq(run_ok(s, ":vars"), "x  i64\ny  i64\n");
  ck_assert_str_eq(run_ok(s, "x + y"), "i64 3\n");
  /* an error inside a function, at the argument the call gives it */
  run_ok(s, "fn two(A: f32[N], B: f32[N]) -> f32[N] { C[i] = A[i] + B[i]; return C }");
  const char *e = run_error(s, "two([1.0, 2.0], [1.0])", "<repl:2>");
  ck_assert_msg(!strncmp(e, "<repl:2>:1:1: error: two: N is 2 from A (f32[2]) but 1 from B (f32[1])\n", 70), "%s", e);
  ck_assert_str_eq(run_ok(s, "x"), "i64 1\n");
  session_free(s);
}
END_TEST

/* :reset forgets every binding and every user function; the prelude stays. */
START_TEST(test_reset) {
  Session *s = new_session("ref");
  run_ok(s, "fn inc(X: f32[N]) -> f32[N] { Y[i] = X[i] + 1.0; return Y }\nk = 4\nv = inc([1.0])");
  ck_assert_str_eq(run_ok(s, ":reset"), "all bindings and user functions forgotten\n");
  ck_assert_str_eq(run_ok(s, ":vars"), "(no bindings)\n");
  ck_assert_str_eq(run_error(s, "k", "r"), "r:1:1: error: undefined name 'k'\n  1 | k\n    | ^\n");
  const char *e = run_error(s, "inc([1.0])", "r");
  ck_assert_msg(strstr(e, "r:1:1: error: ") && strstr(e, "'inc'"), "%s", e);
  /* the prelude (linalg, nn) is still there, and new bindings work as before */
  ck_assert_str_eq(run_ok(s, "print(transpose([[1.0, 2.0]]))"), "f32[2, 1]\n[[1],\n [2]]\n");
  ck_assert_str_eq(run_ok(s, "k = 5\nk"), "i64 5\n");
  session_free(s);
}
END_TEST

/* A new definition of a name replaces the function, for source and for C. */
START_TEST(test_redefinition) {
  Session *s = new_session("ref");
  run_ok(s, "fn f(X: f32[N]) -> f32[N] { Y[i] = X[i] * 2.0; return Y }");
  ck_assert_str_eq(run_ok(s, "f([3.0])"), "f32[1]\n[6]\n");
  run_ok(s, "fn f(X: f32[N]) -> f32[N] { Y[i] = X[i] - 1.0; return Y }");
  ck_assert_str_eq(run_ok(s, "f([3.0])"), "f32[1]\n[2]\n");
  Tensor *x = vec_f32(1, (double[]){10}), *y = NULL;
  Buf e = {0};
  ck_assert(session_call(s, "f", &x, 1, &y, 1, &e));
  ck_assert(tensor_get_f64(y, 0) == 9);
  tensor_release(y);
  /* a redefinition with another signature: calls are checked against the new one */
  run_ok(s, "fn f(X: f32[M, N]) -> f32[M] { r[m] = sum[n] X[m, n]; return r }");
  ck_assert(!session_call(s, "f", &x, 1, &y, 1, &e));
  ck_assert_str_eq(e.s, "f: parameter X is f32[M, N] but the argument is f32[1]");
  ck_assert_str_eq(run_ok(s, ":type f"), "fn f(X: f32[M, N]) -> f32[M]\n");
  tensor_release(x);
  buf_free(&e);
  session_free(s);
}
END_TEST

/* session_call with arguments that do not fit: false, and the message in err; the session
 * goes on. */
START_TEST(test_call_wrong_shapes) {
  Session *s = new_session("ref");
  run_ok(s, "fn two(A: f32[N], B: f32[N]) -> f32[N] { C[i] = A[i] + B[i]; return C }");
  Tensor *a = vec_f32(3, (double[]){1, 2, 3}), *b = vec_f32(2, (double[]){1, 2}), *y = NULL;
  Tensor *ab[2] = {a, b};
  Buf e = {0};
  ck_assert(!session_call(s, "two", ab, 2, &y, 1, &e));
  ck_assert_str_eq(e.s, "two: N is 3 from A (f32[3]) but 2 from B (f32[2])");
  ck_assert_ptr_null(y);
  buf_free(&e);
  ck_assert(!session_call(s, "two", ab, 1, &y, 1, &e));
  ck_assert_str_eq(e.s, "'two' takes 2 arguments but is given 1");
  buf_free(&e);
  ck_assert(!session_call(s, "three", ab, 2, &y, 1, &e));
  ck_assert_str_eq(e.s, "no function named 'three'");
  buf_free(&e);
  ab[1] = a;
  ck_assert_msg(session_call(s, "two", ab, 2, &y, 1, &e), "%s", e.s);
  ck_assert(tensor_get_f64(y, 2) == 6);
  tensor_release(y);
  ck_assert_str_eq(news(&err), "");       /* C callers get the message, not the stream */
  tensor_release(a);
  tensor_release(b);
  session_free(s);
}
END_TEST

/* ---- the calibration cache ---- */

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* This machine's fingerprint, as session.c writes it, and the model's peak. */
static void host_fingerprint(char *fp, size_t n, double *peak) {
  HwModel hw;
  hw_detect_host(&hw);
  snprintf(fp, n, "%s|%s|%d|%d", hw.llvm_cpu, hw.llvm_features, hw.cores, hw.vector_bits);
  *peak = hw.peak_gflops_f32;
}

/* The peak line :hw prints. */
static char *peak_line(Session *s) {
  const char *t = run_ok(s, ":hw");
  const char *p = strstr(t, "  peak:");
  ck_assert_ptr_nonnull(p);
  return strndup(p, strcspn(p, "\n"));
}

/* Is the :hw peak line the model's own, not a calibration of twice or 1000 times it?  The
 * detected clock is timed at each start (hw_clock.c), so the figure moves a little. */
static bool model_peak(const char *line, double model) {
  double v = 0;
  return sscanf(line, "  peak: %lf", &v) == 1 && v > 0.5 * model && v < 1.5 * model;
}

/* A session started with a cache directory dir holding calibration.txt as text (NULL: none). */
static Session *start_with(const char *dir, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/dyn", dir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/dyn/calibration.txt", dir);
  if (text) write_file(path, text);
  return new_session("ref");
}

/* dyn --calibrate's read rates of the memory levels: believed near the model's, with [m] in
 * :hw; one far from it is ignored with a note and that level keeps its file's figures; a key
 * for a level this model lacks is no level's.  Figures from the host's own model. */
START_TEST(test_calibration_bandwidth) {
  HwModel hw;
  hw_detect_host(&hw);
  char fp[600], text[1600], want[200];
  double model;
  host_fingerprint(fp, sizeof fp, &model);
  int last = hw.nlevels - 1;
  ck_assert_int_ge(last, 1);
  const HwLevel *mem = &hw.level[last], *l1 = &hw.level[0];
  char mname[16], cname[16];
  size_t n;
  for (n = 0; mem->name[n]; n++) mname[n] = (char)tolower((unsigned char)mem->name[n]);
  mname[n] = 0;
  for (n = 0; l1->name[n]; n++) cname[n] = (char)tolower((unsigned char)l1->name[n]);
  cname[n] = 0;
  double g = 3 * mem->gbs, t = 3 * mem->total_gbs;
  snprintf(text, sizeof text,
           "fingerprint = %s\npeak_gflops_f32 = %.3f\nthreads = 1\n%s.gbs = %.3f\n%s.total_gbs = %.3f\n"
           "%s.gbs = %.3f\n%s.total_gbs = %.3f\nl9.gbs = 5\nbogus = 1\n",
           fp, model > 0 ? model : 100, mname, g, mname, t, cname, 1000 * l1->gbs, cname, 1000 * l1->total_gbs);
  Session *s = start_with(cache, text);
  snprintf(want, sizeof want, "dyn: ignoring %s/dyn/calibration.txt's %s bandwidths: ", cache, l1->name);
  const char *e = news(&err);
  ck_assert_msg(!strncmp(e, want, strlen(want)) && strstr(e, "are not plausible") && !strchr(e, '\n')[1], "%s", e);
  const char *o = run_ok(s, ":hw");
  snprintf(want, sizeof want, "%.0f GB/s [m] per core, %.0f GB/s [m] in all", g, t);
  ck_assert_msg(strstr(o, want), "%s: %s", want, o);
  snprintf(want, sizeof want, "%.0f GB/s [m] per core", 1000 * l1->gbs);
  ck_assert_msg(!strstr(o, want), "%s", o);
  session_free(s);
  /* a level's rate for all its cores below half of one core's is not a measurement */
  snprintf(text, sizeof text, "fingerprint = %s\npeak_gflops_f32 = %.3f\nthreads = 1\n%s.gbs = %.3f\n%s.total_gbs = %.3f\n",
           fp, model > 0 ? model : 100, mname, g, mname, g / 3);
  s = start_with(cache, text);
  ck_assert_msg(strstr(news(&err), "are not plausible"), "a total below a core's taken");
  session_free(s);
}
END_TEST

/* What dyn --calibrate found a guest's share of a shared cache keeps: believed from the share
 * to the whole cache the system reports, and shown by :hw; past it (or on a host that counts
 * on the whole cache) ignored with a note.  The host's own last cache. */
START_TEST(test_calibration_kept) {
  HwModel hw;
  hw_detect_host(&hw);
  char fp[600], text[1600], want[600], lname[16];
  double model;
  host_fingerprint(fp, sizeof fp, &model);
  int i = hw_ncaches(&hw) - 1;
  ck_assert_int_ge(i, 0);
  const HwLevel *lv = &hw.level[i];
  size_t n;
  for (n = 0; lv->name[n]; n++) lname[n] = (char)tolower((unsigned char)lv->name[n]);
  lname[n] = 0;
  const char *head = "fingerprint = %s\npeak_gflops_f32 = %.3f\nthreads = 1\n%s.kept_bytes = %lld\n";
  if (lv->whole_bytes > lv->bytes) {
    long long kept = (lv->bytes + lv->whole_bytes) / 2 >> 20 << 20;     /* whole MiB: :hw prints "20 MiB" */
    snprintf(text, sizeof text, head, fp, model > 0 ? model : 100, lname, kept);
    Session *s = start_with(cache, text);
    ck_assert_str_eq(news(&err), "");
    const char *o = run_ok(s, ":hw");
    snprintf(want, sizeof want, "\n           kept %lld MiB [m] of a set read again and again (dyn --calibrate)\n", kept >> 20);
    ck_assert_msg(strstr(o, want), "%s: %s", want, o);
    session_free(s);
  }
  /* past the whole cache (the share, where there is no guest's share) */
  long long past = (long long)(lv->whole_bytes > lv->bytes ? lv->whole_bytes : lv->bytes) + 65536;
  snprintf(text, sizeof text, head, fp, model > 0 ? model : 100, lname, past);
  Session *s = start_with(cache, text);
  snprintf(want, sizeof want, "dyn: ignoring %s/dyn/calibration.txt's %s capacity: %lld bytes kept is not plausible for ", cache,
           lv->name, past);
  const char *e = news(&err);
  ck_assert_msg(!strncmp(e, want, strlen(want)), "%s", e);
  ck_assert_msg(!strstr(run_ok(s, ":hw"), "of a set read again"), "an implausible capacity shown");
  session_free(s);
}
END_TEST

START_TEST(test_calibration_cache) {
  char fp[600], text[900], path[512], want[400];
  double model;
  host_fingerprint(fp, sizeof fp, &model);
  if (!(model > 0)) model = 100;          /* a model without a peak believes any */
  Session *s = new_session("ref");
  ck_assert_str_eq(news(&err), "");
  char *uncalibrated = peak_line(s);
  session_free(s);

  /* a plausible peak for this fingerprint is used */
  snprintf(text, sizeof text, "# dyn --calibrate\nfingerprint = %s\npeak_gflops_f32 = %.3f\nthreads = 1\n", fp, 2 * model);
  s = start_with(cache, text);
  ck_assert_str_eq(news(&err), "");
  char *got = peak_line(s);
  snprintf(want, sizeof want, "  peak:    %.0f GFLOP/s f32", 2 * model);
  ck_assert_msg(!strncmp(got, want, strlen(want)), "%s", got);
  free(got);
  session_free(s);

  /* another machine's is not */
  snprintf(text, sizeof text, "fingerprint = other|cpu|1|128\npeak_gflops_f32 = %.3f\nthreads = 1\n", 2 * model);
  s = start_with(cache, text);
  ck_assert_str_eq(news(&err), "");
  got = peak_line(s);
  ck_assert_msg(model_peak(got, model), "%s, uncalibrated %s", got, uncalibrated);
  free(got);
  session_free(s);

  /* an absurd peak is ignored, with a note */
  snprintf(text, sizeof text, "fingerprint = %s\npeak_gflops_f32 = %.3f\nthreads = 1\n", fp, 1000 * model);
  s = start_with(cache, text);
  snprintf(path, sizeof path, "dyn: ignoring %s/dyn/calibration.txt: a peak of ", cache);
  const char *e = news(&err);
  ck_assert_msg(!strncmp(e, path, strlen(path)) && strstr(e, "is not plausible"), "%s", e);
  got = peak_line(s);
  ck_assert_msg(model_peak(got, model), "%s, uncalibrated %s", got, uncalibrated);
  free(got);
  session_free(s);

  /* a directory in the file's place is not read, and not worth a note */
  snprintf(path, sizeof path, "%s/dyn/calibration.txt", cache);
  unlink(path);
  ck_assert_int_eq(mkdir(path, 0755), 0);
  s = start_with(cache, NULL);
  ck_assert_str_eq(news(&err), "");
  got = peak_line(s);
  ck_assert_msg(model_peak(got, model), "%s, uncalibrated %s", got, uncalibrated);
  free(got);
  session_free(s);
  rmdir(path);

  /* nor a FIFO (reading it would wait for a writer): that is said */
  ck_assert_int_eq(mkfifo(path, 0644), 0);
  snprintf(text, sizeof text, "dyn: ignoring %s: not a regular file\n", path);
  s = start_with(cache, NULL);
  ck_assert_str_eq(news(&err), text);
  session_free(s);
  unlink(path);

  /* nor a file too large to be a calibration */
  char *big = malloc(70000);
  memset(big, '#', 69999);
  big[69999] = 0;
  s = start_with(cache, big);
  free(big);
  snprintf(text, sizeof text, "dyn: ignoring %s: larger than 64 KiB, not a calibration\n", path);
  ck_assert_str_eq(news(&err), text);
  session_free(s);
  unlink(path);

  /* without XDG_CACHE_HOME (or with it empty) the cache is under $HOME/.cache */
  char home[300];
  snprintf(home, sizeof home, "%s/home", cache);
  ck_assert_int_eq(mkdir(home, 0755), 0);
  snprintf(path, sizeof path, "%s/.cache", home);
  ck_assert_int_eq(mkdir(path, 0755), 0);
  char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  setenv("HOME", home, 1);
  setenv("XDG_CACHE_HOME", "", 1);
  snprintf(text, sizeof text, "fingerprint = %s\npeak_gflops_f32 = %.3f\nthreads = 1\n", fp, 1000 * model);
  s = start_with(path, text);
  snprintf(want, sizeof want, "dyn: ignoring %s", home);
  e = news(&err);
  ck_assert_msg(!strncmp(e, want, strlen(want)) && strstr(e, "/.cache/dyn/calibration.txt: a peak of "), "%s", e);
  session_free(s);
  unsetenv("XDG_CACHE_HOME");
  s = new_session("ref");
  ck_assert_msg(strstr(news(&err), "/.cache/dyn/calibration.txt: a peak of "), "HOME is not used");
  session_free(s);
  if (saved_home) setenv("HOME", saved_home, 1);
  free(saved_home);
  setenv("XDG_CACHE_HOME", cache, 1);
  free(uncalibrated);
}
END_TEST

/* The reference evaluator and the CPU back end print the same values for the same input. */
START_TEST(test_targets_agree) {
#ifdef HAVE_LLVM
  static const char *program =
      "fn affine(X: f32[M, K], W: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
      "  Y[m, n] = (sum[k] X[m, k] * W[k, n]) + b[n]\n"
      "  return Y\n"
      "}\n"
      "fn halves(X: i64[N]) -> i64[N] { H[i] = X[i] / 2; return H }\n";
  static const char *inputs[] = {
      "print(affine([[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0, 2.0], [1.5, 0.0, 0.25]], [1.0, 2.0, 3.0]))",
      "print(halves(i64([7, -7, 0, 9])))",
      "print(softmax([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))",
  };
  char *printed[2][3];
  const char *targets[2] = {"ref", "cpu"};
  for (int t = 0; t < 2; t++) {
    Session *s = new_session(targets[t]);
    ck_assert_str_eq(news(&err), "");
    run_ok(s, program);
    for (int i = 0; i < 3; i++) printed[t][i] = strdup(run_ok(s, inputs[i]));
    /* the CPU target compiled what it ran */
    ck_assert_int_eq(session_compiles(s, "affine"), t);
    session_free(s);
  }
  for (int i = 0; i < 3; i++) {
    ck_assert_str_eq(printed[0][i], printed[1][i]);
    free(printed[0][i]);
    free(printed[1][i]);
  }
#endif
}
END_TEST

/* The table holds the three back ends, each at its id, each found by its name, each with
 * every function the session calls; the evaluator is always here, and a back end that is
 * not says why. */
START_TEST(test_backend_table) {
  static const char *names[BE__COUNT] = {"ref", "cpu", "gpu"};
  Session *s = new_session("ref");
  for (int i = 0; i < BE__COUNT; i++) {
    const Backend *be = &be_table[i];
    ck_assert_int_eq(be->id, i);
    ck_assert_str_eq(be->name, names[i]);
    ck_assert_ptr_eq(be_find(names[i]), be);
    ck_assert(be->available && be->compile && be->describe && be->free_code);
    /* ref runs through eval_program and has no code of its own to show */
    ck_assert(i == BE_REF ? !be->run && !be->code : be->run && be->code);
    const char *why = NULL;
    if (!be->available(s, &why)) ck_assert_msg(why && *why, "%s: unavailable without a reason", be->name);
  }
  ck_assert_ptr_null(be_find("tpu"));
  ck_assert_ptr_null(be_find(""));
  const char *why = "unset";
  ck_assert(be_table[BE_REF].available(s, &why));
#ifdef HAVE_LLVM
  ck_assert(be_table[BE_CPU].available(s, &why));
#else
  ck_assert(!be_table[BE_CPU].available(s, &why));
#endif
  session_free(s);
}
END_TEST

/* :target points the session at one entry of the table: the next call runs there (the CPU
 * compiles, the evaluator does not), and an unknown name leaves the target as it was. */
START_TEST(test_target_switching) {
  Session *s = new_session("ref");
  ck_assert_str_eq(session_target(s), "ref");
  run_ok(s, "fn twice(X: f32[N]) -> f32[N] { Y[i] = 2.0 * X[i]; return Y }");
  ck_assert_str_eq(run_ok(s, ":target"), "target: ref\n");
  ck_assert_str_eq(run_ok(s, "twice([1.0, -2.5])"), "f32[2]\n[ 2, -5]\n");
  ck_assert_int_eq(session_compiles(s, "twice"), 0);
  ck_assert_str_eq(run_error(s, ":target tpu", "t.dyn"),
                   "t.dyn:1:1: error: unknown target 'tpu': use cpu, gpu or ref\n  1 | :target tpu\n    | ^~~~~~~~~~~\n");
  ck_assert_str_eq(session_target(s), "ref");
#ifdef HAVE_LLVM
  const char *said = run_ok(s, ":target cpu");
  ck_assert_msg(!strncmp(said, "target: cpu (LLVM, ", 19), "%s", said);
  ck_assert_str_eq(session_target(s), "cpu");
  ck_assert_str_eq(run_ok(s, "twice([1.0, -2.5])"), "f32[2]\n[ 2, -5]\n");
  ck_assert_int_eq(session_compiles(s, "twice"), 1);
  ck_assert_str_eq(run_ok(s, "twice([3.0])"), "f32[1]\n[6]\n");
  ck_assert_int_eq(session_compiles(s, "twice"), 1);        /* once, for every shape */
#endif
  ck_assert_str_eq(run_ok(s, ":target ref"), "target: ref (the reference evaluator)\n");
  ck_assert_str_eq(session_target(s), "ref");
  session_free(s);
}
END_TEST

/* :check runs the expression on every back end of the table after the evaluator: each one
 * here is compared with it, each one not here is named with its reason; the target stays. */
START_TEST(test_check_walks_table) {
  Session *s = new_session("ref");
  run_ok(s, "fn axpy(A: f32[N], B: f32[N]) -> f32[N] { Y[i] = 2.0 * A[i] + B[i]; return Y }");
  const char *said = run_ok(s, ":check axpy(rand(f32[7]), rand(f32[7]))");
  ck_assert_msg(!strncmp(said, "f32[7]: ref computed; ", 22), "%s", said);
  for (int i = BE_REF + 1; i < BE__COUNT; i++) {
    const Backend *be = &be_table[i];
    const char *why;
    char want[600];
    if (be->available(s, &why)) snprintf(want, sizeof want, "; %s vs ref: ", be->name);
    else snprintf(want, sizeof want, "; %s not available (%s)", be->name, why);
    const char *at = strstr(said, want);
    ck_assert_msg(at, "no '%s' in: %s", want, said);
    if (be->available(s, &why)) {
      const char *end = strchr(at + 2, ';');
      const char *ok = strstr(at, ": ok");
      ck_assert_msg(ok && (!end || ok < end), "%s disagrees: %s", be->name, said);
    }
  }
  ck_assert_str_eq(session_target(s), "ref");
  ck_assert_str_eq(run_ok(s, ":target"), "target: ref\n");
  session_free(s);
}
END_TEST

/* Defining a function runs its stages in order, and the hook sees each: the input once
 * parsed, the checked function after sema, its program as lowered (a kernel a statement)
 * and as fused, with times that are never negative; a definition that fails to check stops
 * before lowering. */
typedef struct { int n; int stage[8]; bool prog[8]; int nkernels[8]; double ms[8]; } Stages;

static void note_stage(void *cookie, int stage, const Func *f, double ms) {
  Stages *st = cookie;
  if (st->n < 8) {
    st->stage[st->n] = stage;
    st->prog[st->n] = f && f->code.prog;
    st->nkernels[st->n] = f && f->code.prog ? f->code.prog->nkernels : 0;
    st->ms[st->n++] = ms;
  }
}

START_TEST(test_define_stages) {
  Session *s = new_session("ref");
  Stages st = {0};
  s->stage_hook = note_stage;
  s->stage_cookie = &st;
  run_ok(s, "fn inc(X: f32[N]) -> f32[N] { T[i] = X[i] + 1.0; Y[i] = T[i] * 2.0; return Y }");
  ck_assert_int_eq(st.n, 4);
  ck_assert_int_eq(st.stage[0], TOP_PARSE);
  ck_assert(!st.prog[0]);
  ck_assert_int_eq(st.stage[1], TOP_SEMA);
  ck_assert(!st.prog[1]);
  ck_assert_int_eq(st.stage[2], TOP_LOWER);
  ck_assert(st.prog[2]);
  ck_assert_int_eq(st.nkernels[2], 2);   /* as lowered: a kernel a statement */
  ck_assert_int_eq(st.stage[3], TOP_FUSE);
  ck_assert(st.prog[3]);
  ck_assert_int_eq(st.nkernels[3], 1);   /* fused: T inlined into Y */
  for (int i = 0; i < 4; i++) ck_assert(st.ms[i] >= 0);
  /* :ir shows either program */
  const char *ir = run_ok(s, ":ir inc unfused");
  ck_assert_msg(strstr(ir, "kernel inc_T") && strstr(ir, "kernel inc_Y"), "%s", ir);
  ir = run_ok(s, ":ir inc");
  ck_assert_msg(!strstr(ir, "kernel inc_T") && strstr(ir, "kernel inc_Y"), "%s", ir);
  const char *e = run_error(s, ":ir inc fused", "t.dyn");
  ck_assert_msg(strstr(e, ":ir: 'fused' is not a stage (:ir NAME, or :ir NAME unfused)"), "%s", e);
  /* a top-level statement is defined as an anonymous function the same way */
  st.n = 0;
  ck_assert_str_eq(run_ok(s, "inc([1.0, 2.0]) * 2.0"), "f32[2]\n[ 8, 12]\n");
  ck_assert_int_eq(st.n, 4);
  st.n = 0;
  run_error(s, "fn bad(X: f32[N]) -> f32[N] { Y[i] = X[i + 1]; return Y }", "t.dyn");
  ck_assert_int_eq(st.n, 1);   /* parsed, then stopped by the checker */
  ck_assert_int_eq(st.stage[0], TOP_PARSE);
  session_free(s);
}
END_TEST

static Suite *session_suite(void) {
  Suite *s = suite_create("session");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_define_and_call);
  tcase_add_test(tc, test_located_error_keeps_bindings);
  tcase_add_test(tc, test_reset);
  tcase_add_test(tc, test_redefinition);
  tcase_add_test(tc, test_call_wrong_shapes);
  tcase_add_test(tc, test_calibration_cache);
  tcase_add_test(tc, test_calibration_bandwidth);
  tcase_add_test(tc, test_calibration_kept);
  tcase_add_test(tc, test_targets_agree);
  tcase_add_test(tc, test_backend_table);
  tcase_add_test(tc, test_target_switching);
  tcase_add_test(tc, test_check_walks_table);
  tcase_add_test(tc, test_define_stages);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(session_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
