/* bench.c -- `make bench`: dyn's compiled functions beside the reference libraries on every
 * line of the shape suites (gemm.txt, bmm.txt, rowwise.txt), each contender in a process of
 * its own, with the model's predicted time beside each of dyn's.
 *
 * Every function goes through the same path a user's call takes (session_call: binding the
 * sizes, checking, choosing the variant, running), compiled once before the first line.
 * Columns: our time, the model's prediction for it (what :sched and :time print) and its
 * error (predicted / measured - 1), oneDNN's and OpenBLAS's times for contractions (when
 * configure found them), a plain C loop on the same threads for the row-wise ops and the
 * transpose; speed ratios (their time / ours, so above 1 means dyn is faster), GFLOP/s or
 * GB/s, the geometric means of the ratios and each suite's mean absolute model error.
 * Times are medians of repeated runs after a warm-up (calls under 1 ms timed in batches, the
 * same for every column).  Writes a CSV beside the table.
 *
 * Each contender runs in a process of its own.  The bench re-executes itself once per
 * contender (--worker NAME: dyn, onednn, openblas, c, copy) and drives them over pipes,
 * line by line: while one takes its turn, every other one is stopped (SIGSTOP, and waitpid
 * until the stop is complete), so no other pool spins, sleeps or wakes on the cores it
 * uses, whatever the threading runtime: dyn's pool, oneDNN's OpenMP (GNU libgomp in the
 * Debian build, whose threads spin up to GOMP_SPINCOUNT before they sleep), OpenBLAS's
 * pthreads (which spin with sched_yield for about 2^28 cycles).  In one process they did
 * not run as they would alone: on a 2-core Intel host oneDNN read 14.1 ms for 1x768x768,
 * against about 0.03 ms in a process of its own, and the geometric mean of 4.51x over
 * oneDNN was an artefact.  Quiescing the pools instead (OMP_WAIT_POLICY=passive, pauses
 * after each turn) changes how a library runs and depends on knowing every runtime's
 * spinning; a stopped process takes no CPU time, so a turn here is a turn alone, and
 * `--only NAME[,NAME]` runs just those contenders to check it.  Workers other than
 * OpenBLAS's run with OPENBLAS_NUM_THREADS=1, so that OpenBLAS, linked into every process,
 * starts no idle threads there.
 *
 * Separate processes are not enough on a shared machine: with other processes taking
 * 67-84% of both cores of this 2-core host (others' compiles), oneDNN alone in its
 * process read 12-24 ms for 1x768x768 and 8-16 ms for 7x768x768 -- whole scheduler ticks:
 * each call's OpenMP barrier waits for a thread that is not running -- while dyn's pool,
 * whose caller runs the tasks of a worker that is not scheduled, lost far less.  So each
 * turn also measures the CPU time other processes ran meanwhile (from /proc/stat, less the
 * worker's own), beyond the cores the bench leaves free, as a share of the cores it uses:
 * the `others` column, and a line beyond FLAG_OTHERS is flagged.
 *
 * The contenders of a line take turns over ROUNDS rounds, each timing every one for a share
 * of the budget, and a ratio is the median over the rounds of the ratio within a round: a
 * slow spell of the shared machine (seconds) then falls on every contender of a round
 * alike, where one turn each would hand it to whoever ran then.  A ratio may differ a
 * little from the quotient of the two medians printed beside it.  A line whose rounds
 * disagree -- its rounds' ratios spread (max / min - 1) over FLAG_SPREAD -- is flagged too:
 * marked `!` in the table and in the CSV, counted in the summary, and left out of the
 * second row of geometric means.
 *
 * usage: bench [--threads N] [--csv FILE] [--budget SECONDS] [--rounds R] [--only NAMES]
 *              BENCH_DIR [MORE_DIR ...]
 * Each further directory's suites (any of the three files it has) follow, labelled by its
 * name: `make bench` adds tests/bench/shapes, shapes the shared suites do not list.
 */
#include "config.h"
#include "dyn_int.h"
#include "gemm.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

/* A line whose rounds' ratios spread more than this (max / min - 1) is flagged: beyond the
 * few percent between a line's rounds when nothing else runs, well below the errors the
 * flag is there to catch (the factors of a contender that lost its cores for a round). */
#define FLAG_SPREAD 0.20
/* A line during which other processes took more than this share of the cores the bench
 * uses is flagged: its times are not those of the contenders alone. */
#define FLAG_OTHERS 0.10
/* The project's goal for the model's mean absolute error on every host. */
#define MODEL_GOAL 0.25

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of x[0..n), which it sorts. */
static double median(double *x, int n) {
  qsort(x, (size_t)n, sizeof(double), cmpd);
  return x[n / 2];
}

static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static double budget = 0.25;
enum { MAX_ROUNDS = 64 };
static int threads = 2, rounds = 3;

/* Median seconds of fn(ctx) after warm-up runs, within the time budget (3..200 samples).
 * A call under SAMPLE_S is timed in batches of calls that together take about that long
 * (each sample is a batch's time over its count), so that the samples of every line span
 * most of the budget: 200 single samples of a 50 us call span 10 ms, which one pause of a
 * virtual CPU by its host covers entirely (a two-thread call then takes twice as long). */
#define SAMPLE_S 1e-3
static double timeit(void (*fn)(void *), void *ctx) {
  /* warm-up: up to 3 calls within a quarter of the budget.  On this kind of virtual
   * machine the first pass over a large buffer after touching other large buffers runs at
   * a third of the bandwidth of the next ones (the host's page tables, presumably), and one
   * warm-up call did not always cover it */
  double t0 = now(), first = 0;
  for (int w = 0; w < 3 && (w == 0 || now() - t0 < budget / 4); w++) {
    double t1 = now();
    fn(ctx);
    first = now() - t1;
  }
  int reps = 1;
  if (first < SAMPLE_S) {                /* measure a warm call to size the batches */
    t0 = now();
    for (int i = 0; i < 10; i++) fn(ctx);
    double one = (now() - t0) / 10;
    reps = one > 0 ? (int)(SAMPLE_S / one) : 10000;
    reps = reps < 1 ? 1 : reps > 10000 ? 10000 : reps;
  }
  double t[200];
  int n = 0;
  double start = now();
  while (n < 200 && (n < 3 || now() - start < budget)) {
    t0 = now();
    for (int i = 0; i < reps; i++) fn(ctx);
    t[n++] = (now() - t0) / reps;
  }
  return median(t, n);
}

/* CPU seconds that every process of the machine has run, from /proc/stat's first line
 * (user, nice, system, irq, softirq and steal: a virtual CPU's host taking it counts too);
 * negative where there is no /proc/stat. */
static double machine_cpu_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n < 8) return -1;
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static double own_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same pseudo-random data in every process: each line's inputs start from one seed. */
static void fill(float *p, int64_t n, unsigned *seed) {
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    p[i] = (float)((*seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
  }
}

static float *randf(int64_t n, unsigned *seed) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1) + 64);
  if (!p) die("out of memory");
  fill(p, n, seed);
  return p;
}

static Tensor *randt(int rank, const int64_t *shape, unsigned *seed) {
  char err[256];
  Tensor *t = tensor_new(DYN_F32, rank, shape, err, sizeof err);
  if (!t) die("%s", err);
  fill(tensor_data(t), tensor_numel(t), seed);
  return t;
}

/* ---- the contenders ---- */

enum { DYN, ONEDNN, OPENBLAS, CLOOP, COPY, NWHO };
static const char *const who_name[NWHO] = {"dyn", "onednn", "openblas", "c", "copy"};

static bool who_built(int w) {
#ifndef HAVE_DNNL
  if (w == ONEDNN) return false;
#endif
#ifndef HAVE_OPENBLAS
  if (w == OPENBLAS) return false;
#endif
  return true;
}

typedef struct {
  Session *s;
  const char *fn;
  Tensor *args[4];
  int nargs;
} DynCall;

static void run_dyn(void *p) {
  DynCall *c = p;
  Tensor *out = NULL;
  Buf err = {0};
  if (!session_call(c->s, c->fn, c->args, c->nargs, &out, 1, &err)) die("%s: %s", c->fn, err.s);
  tensor_release(out);
  buf_free(&err);
}

typedef struct {
  int64_t b, m, n, k;
  const float *a, *bm;
  float *c;
} Gemm;

#ifdef HAVE_DNNL
static void run_dnnl(void *p) {
  Gemm *g = p;
  for (int64_t i = 0; i < g->b; i++)
    dnnl_sgemm('N', 'N', g->m, g->n, g->k, 1.0f, g->a + i * g->m * g->k, g->k, g->bm + i * g->k * g->n, g->n, 0.0f,
               g->c + i * g->m * g->n, g->n);
}
#endif

#ifdef HAVE_OPENBLAS
static void run_openblas(void *p) {
  Gemm *g = p;
  for (int64_t i = 0; i < g->b; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f,
                g->a + i * g->m * g->k, (int)g->k, g->bm + i * g->k * g->n, (int)g->n, 0.0f, g->c + i * g->m * g->n,
                (int)g->n);
}
#endif

/* Plain C loops, split over the same number of threads by rows of X. */
enum { OP_SOFTMAX, OP_LAYERNORM, OP_TRANSPOSE };
typedef struct {
  int op;
  int64_t rows, cols;
  const float *x, *g, *b;
  float *y;
  int64_t r0, r1;
} Row;

/* The transpose in square blocks, so that both sides move whole cache lines. */
#define TB 16
static void rows_c(Row *r) {
  if (r->op == OP_TRANSPOSE) {
    for (int64_t i0 = r->r0; i0 < r->r1; i0 += TB)
      for (int64_t j0 = 0; j0 < r->cols; j0 += TB)
        for (int64_t i = i0; i < i0 + TB && i < r->r1; i++)
          for (int64_t j = j0; j < j0 + TB && j < r->cols; j++) r->y[j * r->rows + i] = r->x[i * r->cols + j];
    return;
  }
  for (int64_t i = r->r0; i < r->r1; i++) {
    const float *x = r->x + i * r->cols;
    float *y = r->y + i * r->cols;
    if (r->op == OP_SOFTMAX) {
      float m = -INFINITY, s = 0;
      for (int64_t j = 0; j < r->cols; j++) m = x[j] > m ? x[j] : m;
      for (int64_t j = 0; j < r->cols; j++) s += (y[j] = expf(x[j] - m));
      float inv = 1.0f / s;
      for (int64_t j = 0; j < r->cols; j++) y[j] *= inv;
    } else {
      float mu = 0, v = 0;
      for (int64_t j = 0; j < r->cols; j++) mu += x[j];
      mu /= (float)r->cols;
      for (int64_t j = 0; j < r->cols; j++) v += (x[j] - mu) * (x[j] - mu);
      float rs = 1.0f / sqrtf(v / (float)r->cols + 1e-5f);
      for (int64_t j = 0; j < r->cols; j++) y[j] = (x[j] - mu) * rs * r->g[j] + r->b[j];
    }
  }
}

static void *rows_thread(void *p) {
  rows_c(p);
  return NULL;
}

static void run_rows(void *p) {
  Row *r = p;
  pthread_t th[64];
  Row part[64];
  int t = threads < 64 ? threads : 64;
  if (r->rows < t) t = (int)(r->rows > 0 ? r->rows : 1);
  for (int i = 0; i < t; i++) {
    part[i] = *r;
    part[i].r0 = r->rows * i / t;
    part[i].r1 = r->rows * (i + 1) / t;
    if (i) pthread_create(&th[i], NULL, rows_thread, &part[i]);
  }
  rows_c(&part[0]);
  for (int i = 1; i < t; i++) pthread_join(th[i], NULL);
}

/* Streaming bandwidth: a 2 x 256 MB copy over the same threads, for "share of bandwidth". */
#define NCOPY ((int64_t)64 << 20)
typedef struct { float *dst; const float *src; int64_t n; } Copy;
static void *copy_thread(void *p) {
  Copy *c = p;
  memcpy(c->dst, c->src, (size_t)c->n * sizeof(float));
  return NULL;
}
static void run_copy(void *p) {
  Copy *c = p;
  pthread_t th[64];
  Copy part[64];
  int t = threads < 64 ? threads : 64;
  for (int i = 0; i < t; i++) {
    part[i] = (Copy){c->dst + c->n * i / t, c->src + c->n * i / t, c->n * (i + 1) / t - c->n * i / t};
    if (i) pthread_create(&th[i], NULL, copy_thread, &part[i]);
  }
  copy_thread(&part[0]);
  for (int i = 1; i < t; i++) pthread_join(th[i], NULL);
}

/* ---- a worker: one contender's process, answering the bench's commands ----
 * Commands, one a line on standard input; each answer ends with a line "ok [VALUE]" on
 * descriptor 3, after any "csv ROW" lines for the CSV.  Text for the reader goes to
 * standard output, flushed before the answer, while the bench waits.
 *   hello                    ok DESCRIPTION
 *   intro                    the one-off figures (dyn: compile, dispatch, peak; copy: bandwidth)
 *   matmul M N K | bmm B M N K | softmax R C | layernorm R C | transpose R C
 *                            prepare the line's data; ok PREDICTED_SECONDS (dyn), ok 0 (others)
 *   peak SECONDS             dyn: ok GFLOP/s of the f32 micro-kernel, measured now
 *   time BUDGET              ok S O W: median seconds of the line's call; CPU seconds other
 *                            processes ran meanwhile (-1: unknown); the seconds it all took
 *   free                     ok, the line's data freed */

static FILE *answers;

static void answer(const char *fmt, ...) {
  fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  fputs("ok ", answers);
  vfprintf(answers, fmt, ap);
  fputc('\n', answers);
  va_end(ap);
  fflush(answers);
}

/* A CSV row of the one-off figures, padded to the table's columns. */
static void csv_row(const char *suite, const char *what, double v) {
  fprintf(answers, "csv %s,%s,%.6f,,,,,,,,,,\n", suite, what, v);
}

typedef struct {
  void (*fn)(void *);
  void *ctx;
  DynCall dc;
  Gemm gm;
  Row rw;
  Tensor *t[3];
  float *f[4];
} Line;

static Line cur;
static Copy copy;
static GemmKernels *peak_g;             /* dyn: the f32 micro-kernels, for the peak */
static Pool *peak_pool;

static void line_free(void) {
  for (int i = 0; i < 3; i++) tensor_release(cur.t[i]);
  for (int i = 0; i < 4; i++) free(cur.f[i]);
  memset(&cur, 0, sizeof cur);
}

static void copy_alloc(void) {
  if (copy.dst) return;
  float *a = malloc(sizeof(float) * (size_t)NCOPY), *b = malloc(sizeof(float) * (size_t)NCOPY);
  if (!a || !b) die("out of memory");
  memset(a, 1, sizeof(float) * (size_t)NCOPY);
  memset(b, 0, sizeof(float) * (size_t)NCOPY);
  copy = (Copy){b, a, NCOPY};
}

/* Prepare a line's data for contender who; for dyn, the model's predicted seconds. */
static double line_prepare(int who, Session *s, const char *op, const long long *d) {
  unsigned seed = 1;
  line_free();
  if (!strcmp(op, "matmul") || !strcmp(op, "bmm")) {
    bool batched = op[0] == 'b';
    int64_t b = batched ? d[0] : 1, m = d[batched], n = d[batched + 1], k = d[batched + 2];
    if (who == DYN) {
      int64_t sa[3] = {b, m, k}, sb[3] = {b, k, n};
      cur.t[0] = batched ? randt(3, sa, &seed) : randt(2, sa + 1, &seed);
      cur.t[1] = batched ? randt(3, sb, &seed) : randt(2, sb + 1, &seed);
      cur.dc = (DynCall){s, batched ? "bmm" : "matmul", {cur.t[0], cur.t[1]}, 2};
      cur.fn = run_dyn;
      cur.ctx = &cur.dc;
    } else {
      cur.f[0] = randf(b * m * k, &seed);
      cur.f[1] = randf(b * k * n, &seed);
      cur.f[2] = randf(b * m * n, &seed);
      cur.gm = (Gemm){b, m, n, k, cur.f[0], cur.f[1], cur.f[2]};
      cur.ctx = &cur.gm;
#ifdef HAVE_DNNL
      if (who == ONEDNN) cur.fn = run_dnnl;
#endif
#ifdef HAVE_OPENBLAS
      if (who == OPENBLAS) cur.fn = run_openblas;
#endif
    }
  } else {
    static const char *const names[] = {[OP_SOFTMAX] = "softmax", [OP_LAYERNORM] = "layernorm", [OP_TRANSPOSE] = "transpose"};
    int kind = !strcmp(op, "softmax") ? OP_SOFTMAX : !strcmp(op, "layernorm") ? OP_LAYERNORM : OP_TRANSPOSE;
    int64_t r = d[0], c = d[1], sx[2] = {r, c}, sg[1] = {c};
    if (who == DYN) {
      for (int i = 0; i < 3; i++) cur.t[i] = i ? randt(1, sg, &seed) : randt(2, sx, &seed);
      cur.dc = (DynCall){s, names[kind], {cur.t[0], cur.t[1], cur.t[2]}, kind == OP_LAYERNORM ? 3 : 1};
      cur.fn = run_dyn;
      cur.ctx = &cur.dc;
    } else if (who == CLOOP) {
      cur.f[0] = randf(r * c, &seed);
      cur.f[1] = randf(c, &seed);
      cur.f[2] = randf(c, &seed);
      cur.f[3] = randf(r * c, &seed);
      cur.rw = (Row){kind, r, c, cur.f[0], cur.f[1], cur.f[2], cur.f[3], 0, 0};
      cur.fn = run_rows;
      cur.ctx = &cur.rw;
    } else if (who == COPY) {
      copy_alloc();
      cur.fn = run_copy;
      cur.ctx = &copy;
    }
  }
  if (!cur.fn) die("%s cannot run %s", who_name[who], op);
  if (who != DYN) return 0;
  run_dyn(&cur.dc);                     /* compiles on the first line: the prediction is then the schedule's */
  return session_predict(s, cur.dc.fn, cur.dc.args, cur.dc.nargs);
}

/* dyn's one-off figures: compile times, a call on a new shape, the micro-kernel's peak and
 * the kernels compiled when first needed. */
static void intro_dyn(const SessionOptions *opt, Session *s) {
  /* each compiled COMPILE_RUNS times, the median reported: one compile is a single sample
   * of a shared machine (the same matmul took 41 and 68 ms in two runs of this program) */
  enum { COMPILE_RUNS = 3 };
  printf("\ncompile once (ms, median of %d):", COMPILE_RUNS);
  const char *fns[] = {"matmul", "softmax", "layernorm", "gelu"};
  double matmul_ms = 0;
  for (int i = 0; i < 4; i++) {
    double ms[COMPILE_RUNS], wall[COMPILE_RUNS];
    for (int r = 0; r < COMPILE_RUNS; r++) {
      Session *fresh = session_new(opt, stdout, stderr);
      Buf err = {0};
      double t0 = now();
      ms[r] = session_compile(fresh, fns[i], &err);
      wall[r] = (now() - t0) * 1e3;
      buf_free(&err);
      session_free(fresh);
    }
    double m = median(ms, COMPILE_RUNS);
    printf("  %s %.1f (%.1f with the JIT's start)", fns[i], m, median(wall, COMPILE_RUNS));
    csv_row("compile", fns[i], m);
    if (i == 0) matmul_ms = m;
  }
  printf("\n");
  /* dispatch: a call on a shape never seen, for a 1x1x1 product: binding, checks and the
   * choice of a variant, with almost no arithmetic */
  unsigned seed = 3;
  double t[64];
  for (int i = 0; i < 64; i++) {
    int64_t sa[2] = {1 + i, 1}, sb[2] = {1, 1 + (i * 7) % 13};
    Tensor *A = randt(2, sa, &seed), *B = randt(2, sb, &seed);
    DynCall dc = {s, "matmul", {A, B}, 2};
    double t0 = now();
    run_dyn(&dc);
    t[i] = now() - t0;
    tensor_release(A);
    tensor_release(B);
  }
  double m = median(t, 64);
  printf("a call on a new shape (tiny matmul, whole path: bind, check, choose, run): median %.1f us\n", m * 1e6);
  csv_row("dispatch", "new shape", m * 1e3);
  /* the micro-kernel's peak on these threads, measured (as dyn --calibrate does), for the
   * share of peak the large shapes reach */
  HwModel hw;
  hw_detect_host(&hw);
  char err[256];
  peak_g = gemm_compile(DYN_F32, &hw, err, sizeof err);
  peak_pool = pool_new(threads);
  printf("measured peak of the f32 micro-kernel on %d threads: %.1f GFLOP/s (measured again beside "
         "each shape of at least 1 GFLOP for its share of peak)\n", threads,
         peak_g ? gemm_peak_gflops(peak_g, peak_pool, 0.5) : 0);
  /* matmul's kernels for few rows and for few columns are compiled the first time a shape
   * makes them candidates: planning two such shapes compiles them here */
  GemmArgs few_rows = {.batch = 1, .m = 1, .n = 8192, .k = 4096, .a_sm = 4096, .a_sk = 1, .b_sk = 8192,
                       .b_sn = 1, .c_sm = 8192, .c_sn = 1};
  GemmArgs few_cols = {.batch = 1, .m = 64, .n = 1, .k = 64, .a_sm = 64, .a_sk = 1, .b_sk = 1, .b_sn = 1,
                       .c_sm = 1, .c_sn = 1};
  GemmPlanInfo pi;
  double rows[COMPILE_RUNS] = {0}, dots[COMPILE_RUNS] = {0};
  for (int r = 0; r < COMPILE_RUNS && peak_g; r++) {
    GemmKernels *g = r ? gemm_compile(DYN_F32, &hw, err, sizeof err) : peak_g;
    if (g && gemm_plan_info(g, &few_rows, threads, &pi) && gemm_plan_info(g, &few_cols, threads, &pi))
      gemm_later_ms(g, &rows[r], &dots[r]);
    if (g != peak_g) gemm_free(g);
  }
  double later[2] = {median(rows, COMPILE_RUNS), median(dots, COMPILE_RUNS)};
  printf("matmul's kernels for a C of 1-4 rows (row streaming) and of 1-16 columns (inner products) are "
         "compiled the first time a shape needs them: %.1f and %.1f ms more (medians of %d); all of "
         "matmul's variants: %.1f ms\n", later[0], later[1], COMPILE_RUNS, matmul_ms + later[0] + later[1]);
  csv_row("compile", "matmul rows (when first needed)", later[0]);
  csv_row("compile", "matmul inner products (when first needed)", later[1]);
}

static int worker_main(int who) {
  answers = fdopen(3, "w");
  if (!answers) die("%s: no answer channel (descriptor 3): run as bench, not --worker", who_name[who]);
  SessionOptions opt = {.target = "cpu", .threads = threads};
  Session *s = NULL;
  if (who == DYN) {
    s = session_new(&opt, stdout, stderr);
    if (session_run(s, ":target cpu", "bench") != RUN_OK) die("no CPU back end in this build");
    if (session_compiles(s, "bmm") < 0)      /* the stdlib's, else the same written here */
      session_run(s, "fn bmm(A: f32[B, M, K], X: f32[B, K, N]) -> f32[B, M, N] { C[b, i, j] = sum[k] A[b, i, k] * X[b, k, j]; return C }", "bench");
  }
#ifdef HAVE_OPENBLAS
  if (who == OPENBLAS) openblas_set_num_threads(threads);
#endif
  char cmd[512], op[32];
  long long d[4];
  double x;
  while (fgets(cmd, sizeof cmd, stdin)) {
    if (!strncmp(cmd, "hello", 5)) {
      Buf b = {0};
#ifdef HAVE_DNNL
      if (who == ONEDNN) {
        const dnnl_version_t *v = dnnl_version();
        buf_printf(&b, "oneDNN %d.%d.%d, CPU runtime %s", v->major, v->minor, v->patch,
                   v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                   : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential" : "other");
      }
#endif
#ifdef HAVE_OPENBLAS
      if (who == OPENBLAS) {
        const char *ct = getenv("OPENBLAS_CORETYPE");
        buf_printf(&b, "OpenBLAS kernel %s (OPENBLAS_CORETYPE %s)", openblas_get_corename(), ct ? ct : "unset");
      }
#endif
      answer("%s", b.s ? b.s : who_name[who]);
      buf_free(&b);
    } else if (!strncmp(cmd, "intro", 5)) {
      if (who == DYN) intro_dyn(&opt, s);
      if (who == COPY) {
        copy_alloc();
        printf("streaming bandwidth (memcpy on %d threads): %.1f GB/s\n", threads,
               2.0 * (double)NCOPY * 4 / timeit(run_copy, &copy) * 1e-9);
      }
      answer("");
    } else if (sscanf(cmd, "peak %lf", &x) == 1) {
      answer("%.6g", peak_g ? gemm_peak_gflops(peak_g, peak_pool, x) : 0);
    } else if (sscanf(cmd, "time %lf", &x) == 1) {
      if (!cur.fn) die("time before a line");
      budget = x;
      double m0 = machine_cpu_s(), c0 = own_cpu_s(), w0 = now();
      double t = timeit(cur.fn, cur.ctx);
      double m1 = machine_cpu_s(), c1 = own_cpu_s(), w1 = now();
      answer("%.9g %.6g %.6g", t, m0 < 0 || m1 < 0 ? -1 : m1 - m0 - (c1 - c0), w1 - w0);
    } else if (!strncmp(cmd, "free", 4)) {
      line_free();
      answer("");
    } else if (sscanf(cmd, "%31s", op) == 1 && (!strcmp(op, "matmul") || !strcmp(op, "bmm") || !strcmp(op, "softmax") ||
                                                 !strcmp(op, "layernorm") || !strcmp(op, "transpose"))) {
      int want = !strcmp(op, "bmm") ? 4 : !strcmp(op, "matmul") ? 3 : 2;
      if (sscanf(cmd, "%*s %lld %lld %lld %lld", &d[0], &d[1], &d[2], &d[3]) != want) die("%s: bad line: %s", who_name[who], cmd);
      answer("%.9g", line_prepare(who, s, op, d));
    } else {
      die("%s: unknown command: %s", who_name[who], cmd);
    }
  }
  line_free();
  pool_free(peak_pool);
  gemm_free(peak_g);
  if (s) session_free(s);
  return 0;
}

/* ---- the bench: starts the workers and gives them their turns ---- */

typedef struct { pid_t pid; FILE *to, *from; char desc[256]; } Worker;
static Worker wk[NWHO];
static FILE *csv;

/* Stop w and wait until all its threads are stopped. */
static void worker_stop(int w) {
  int st;
  if (kill(wk[w].pid, SIGSTOP)) die("cannot stop the %s process: %s", who_name[w], strerror(errno));
  while (waitpid(wk[w].pid, &st, WUNTRACED) < 0)
    if (errno != EINTR) die("waiting for the %s process: %s", who_name[w], strerror(errno));
  if (!WIFSTOPPED(st)) die("the %s process ended", who_name[w]);
}

/* Give w a turn: continue it, send the command, read its answer (CSV rows go to the CSV),
 * stop it again.  Returns the answer's text (until the next call). */
static const char *ask(int w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *ask(int w, const char *fmt, ...) {
  static char line[4096];
  fflush(stdout);
  if (kill(wk[w].pid, SIGCONT)) die("cannot continue the %s process: %s", who_name[w], strerror(errno));
  va_list ap;
  va_start(ap, fmt);
  vfprintf(wk[w].to, fmt, ap);
  va_end(ap);
  fputc('\n', wk[w].to);
  fflush(wk[w].to);
  for (;;) {
    if (!fgets(line, sizeof line, wk[w].from)) die("the %s process ended", who_name[w]);
    line[strcspn(line, "\n")] = 0;
    if (!strncmp(line, "csv ", 4)) fprintf(csv, "%s\n", line + 4);
    else if (!strncmp(line, "ok", 2)) break;
    else die("the %s process answered: %s", who_name[w], line);
  }
  worker_stop(w);
  return line[2] ? line + 3 : line + 2;
}

/* Start contender w's process, then stop it until its first turn. */
static void worker_start(int w, const char *self) {
  int cmd[2], ans[2];
  if (pipe2(cmd, O_CLOEXEC) || pipe2(ans, O_CLOEXEC)) die("pipe: %s", strerror(errno));
  char th[16], bu[32];
  snprintf(th, sizeof th, "%d", threads);
  snprintf(bu, sizeof bu, "%.6g", budget);
  /* the same threads for every library; OpenBLAS starts its threads when it is loaded,
   * which it is in every worker: only its own worker lets it have more than one */
  setenv("OMP_NUM_THREADS", th, 1);
  setenv("OPENBLAS_NUM_THREADS", w == OPENBLAS ? th : "1", 1);
  fflush(stdout);
  fflush(csv);
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (!pid) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a stopped worker must not outlive the bench */
#endif
    /* descriptors 0 and 3 without close-on-exec; dup2 onto itself would keep the flag */
    if (cmd[0] == 0) fcntl(0, F_SETFD, 0);
    else dup2(cmd[0], 0);
    if (ans[1] == 3) fcntl(3, F_SETFD, 0);
    else dup2(ans[1], 3);
    execl(self, self, "--worker", who_name[w], "--threads", th, "--budget", bu, (char *)NULL);
    _exit(127);
  }
  close(cmd[0]);
  close(ans[1]);
  wk[w].pid = pid;
  wk[w].to = fdopen(cmd[1], "w");
  wk[w].from = fdopen(ans[0], "r");
  snprintf(wk[w].desc, sizeof wk[w].desc, "%s", ask(w, "hello"));
}

static void workers_end(void) {
  for (int w = 0; w < NWHO; w++)
    if (wk[w].pid) {
      fclose(wk[w].to);                 /* end of input: the worker returns */
      kill(wk[w].pid, SIGCONT);
      fclose(wk[w].from);
      waitpid(wk[w].pid, NULL, 0);
      wk[w].pid = 0;
    }
}

/* ---- the suites ---- */

typedef struct {
  double t[NWHO];              /* each contender's median seconds; 0: not run */
  double ratio[NWHO];          /* median over the rounds of t / dyn's t; 0: not run */
  double spread;               /* of the rounds' ratios (of the times when dyn runs alone) */
  double others;               /* the most any contender's turns lost to other processes, as a
                                  share of the cores used; negative: unknown */
  double pred;                 /* the model's seconds for dyn's call; 0: none */
  double peak;                 /* dyn's micro-kernel's GFLOP/s beside this line; 0: not taken */
} Result;

/* Run one line (the prepare command cmd) on the contenders who[0..n) that were started. */
static void measure(const char *cmd, const int *who0, int n0, bool large, Result *res) {
  int who[NWHO], n = 0;
  for (int i = 0; i < n0; i++)
    if (wk[who0[i]].pid) who[n++] = who0[i];
  memset(res, 0, sizeof *res);
  for (int i = 0; i < n; i++) {
    double p = atof(ask(who[i], "%s", cmd));
    if (who[i] == DYN) res->pred = p;
  }
  if (large && wk[DYN].pid) res->peak = atof(ask(DYN, "peak 0.2"));
  double t[NWHO][MAX_ROUNDS], other[NWHO] = {0}, wall[NWHO] = {0};
  int R = rounds;
  for (int r = 0; r < R; r++)
    for (int i = 0; i < n; i++) {
      double o = -1, w = 0;
      if (sscanf(ask(who[i], "time %.6g", budget / R), "%lf %lf %lf", &t[i][r], &o, &w) != 3) die("bad answer to time");
      other[i] = o < 0 || other[i] < 0 ? -1 : other[i] + o;
      wall[i] += w;
    }
  for (int i = 0; i < n; i++) ask(who[i], "free");
  /* the cores the bench leaves free may run others without disturbing it */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int free_cpus = cpus > threads ? (int)cpus - threads : 0;
  for (int i = 0; i < n; i++) {
    if (other[i] < 0 || wall[i] <= 0) {
      res->others = -1;
      break;
    }
    double lost = (other[i] - free_cpus * wall[i]) / (threads * wall[i]);
    res->others = lost > res->others ? lost : res->others;
  }
  bool dyn = n && who[0] == DYN;
  for (int i = 0; i < n; i++) {
    double q[MAX_ROUNDS], lo = INFINITY, hi = 0;
    for (int r = 0; r < R; r++) {
      q[r] = dyn && i ? t[i][r] / t[0][r] : t[i][r];
      lo = q[r] < lo ? q[r] : lo;
      hi = q[r] > hi ? q[r] : hi;
    }
    if ((!dyn || i || n == 1) && lo > 0 && hi / lo - 1 > res->spread) res->spread = hi / lo - 1;
    if (dyn) res->ratio[who[i]] = i ? median(q, R) : 1;
    res->t[who[i]] = median(t[i], R);
  }
}

/* Geometric means of up to two ratio columns: [0] over every line, [1] over the unflagged. */
typedef struct { double logsum[2][2]; int n[2][2]; } Geo;
static void geo_add(Geo *g, int col, double r, bool flag) {
  for (int k = 0; k < 2 - flag && r > 0; k++) {
    g->logsum[k][col] += log(r);
    g->n[k][col]++;
  }
}
/* As printed: "-" where no line had the ratio. */
static const char *geo(const Geo *g, int k, int col, char *buf) {
  if (!g->n[k][col]) return "-";
  sprintf(buf, "%.2f", exp(g->logsum[k][col] / g->n[k][col]));
  return buf;
}

/* The model's record: every line's error, each suite's mean absolute error. */
typedef struct { char what[200]; double err; } ModelLine;
static ModelLine mlines[1024];
static int nmlines;
typedef struct { char suite[128]; double sum; int n, over; } SuiteErr;
static SuiteErr suites[64];
static int nsuites, nlines, nspread, nbusy, nflagged;

static SuiteErr *suite_begin(const char *name) {
  SuiteErr *e = nsuites < 64 ? &suites[nsuites++] : &suites[63];
  memset(e, 0, sizeof *e);
  snprintf(e->suite, sizeof e->suite, "%s", name);
  return e;
}

/* Record a line's model error; its text for the table ("-" with no prediction). */
static const char *model_err(SuiteErr *e, const char *shape, const Result *r, char *buf, size_t n) {
  if (r->pred <= 0 || r->t[DYN] <= 0) return "-";
  double err = r->pred / r->t[DYN] - 1;
  e->sum += fabs(err);
  e->n++;
  e->over += fabs(err) > MODEL_GOAL;
  if (nmlines < 1024) {
    snprintf(mlines[nmlines].what, sizeof mlines[nmlines].what, "%s %s", e->suite, shape);
    mlines[nmlines++].err = err;
  }
  snprintf(buf, n, "%+.0f%%", 100 * err);
  return buf;
}

static void suite_end(const SuiteErr *e) {
  if (e->n)
    printf("model: mean |predicted / measured - 1| %.0f%% over %d lines, %d beyond %.0f%%\n", 100 * e->sum / e->n, e->n,
           e->over, 100 * MODEL_GOAL);
}

static bool flagged(const Result *r) { return r->spread > FLAG_SPREAD || r->others > FLAG_OTHERS; }

/* The rounds' spread and the others' share as printed, with the flag; counts the line. */
static const char *flag_str(const Result *r, char *buf, size_t n) {
  nlines++;
  nspread += r->spread > FLAG_SPREAD;
  nbusy += r->others > FLAG_OTHERS;
  nflagged += flagged(r);
  char o[16] = "-";
  if (r->others >= 0) snprintf(o, sizeof o, "%.0f%%", 100 * r->others);
  snprintf(buf, n, "%5.0f%% %6s%s", 100 * r->spread, o, flagged(r) ? " !" : "");
  return buf;
}

static void csv_line(const char *suite, const char *shape, const Result *r, double rate, double ref1, double ref2,
                     double ratio1, double ratio2) {
  fprintf(csv, "%s,%s,", suite, shape);
  double v[] = {r->t[DYN] * 1e3, rate, ref1 * 1e3, ref2 * 1e3, ratio1, ratio2, r->pred * 1e3,
                r->pred > 0 && r->t[DYN] > 0 ? r->pred / r->t[DYN] - 1 : 0};
  bool have[] = {r->t[DYN] > 0, r->t[DYN] > 0, ref1 > 0, ref2 > 0, ratio1 > 0, ratio2 > 0, r->pred > 0,
                 r->pred > 0 && r->t[DYN] > 0};
  for (int i = 0; i < 8; i++)
    if (have[i]) fprintf(csv, i == 1 ? "%.3f," : "%.6f,", v[i]);
    else fputc(',', csv);
  fprintf(csv, "%.4f,", r->spread);
  if (r->others >= 0) fprintf(csv, "%.4f", r->others);
  fprintf(csv, ",%d\n", flagged(r));
}

/* A suite file of dir; a missing one is skipped, and said so for the first directory (the
 * shared suites), where every file is expected. */
static const char *label_prefix = "";
static bool quiet_missing;
static FILE *open_suite(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f && !quiet_missing) fprintf(stderr, "bench: cannot read %s; skipping it\n", path);
  return f;
}

static bool next_line(FILE *f, char *line, size_t n) {
  while (fgets(line, (int)n, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p && *p != '#' && *p != '\n') return true;
  }
  return false;
}

static void flag_note(void) {
  printf("rounds: spread of the rounds' ratios (max / min - 1); others: the share of the cores in use that other\n"
         "processes took during a contender's turns (the most of any); ! flags a line beyond %.0f%% or %.0f%%\n",
         100 * FLAG_SPREAD, 100 * FLAG_OTHERS);
}

/* Whether any of the contenders who[0..n) was started. */
static bool any_started(const int *who, int n) {
  for (int i = 0; i < n; i++)
    if (wk[who[i]].pid) return true;
  return false;
}

static void contraction_suite(const char *dir, const char *file, bool batched) {
  static const int who[] = {DYN, ONEDNN, OPENBLAS};
  if (!any_started(who, 3)) return;
  FILE *f = open_suite(dir, file);
  if (!f) return;
  char suite[128];
  snprintf(suite, sizeof suite, "%s%s", label_prefix, file);
  printf("\n%s: f32 %s, %d threads; ratio = their time / ours (above 1: dyn is faster; median of %d rounds);\n"
         "model: dyn's predicted time (:sched, :time) and its error, predicted / measured - 1\n", suite,
         batched ? "C[b] = A[b] B[b] (oneDNN and OpenBLAS: one sgemm per batch)" : "C = A B, row-major", threads, rounds);
  flag_note();
  printf("%-22s %10s %10s %6s %9s%s %10s %7s %10s %7s %6s %6s\n", batched ? "B M N K" : "M N K", "dyn ms", "model ms", "err",
         "GFLOP/s", wk[DYN].pid ? "              " : "", "oneDNN ms", "ratio", "OpenBLAS", "ratio", "rounds", "others");
  Geo g = {0};
  SuiteErr *e = suite_begin(suite);
  char line[256];
  while (next_line(f, line, sizeof line)) {
    long long b = 1, m, n, k;
    int got = batched ? sscanf(line, "%lld %lld %lld %lld", &b, &m, &n, &k) : sscanf(line, "%lld %lld %lld", &m, &n, &k);
    if (got != (batched ? 4 : 3)) continue;
    char shape[64], cmd[128];
    if (batched) snprintf(shape, sizeof shape, "%lld %lld %lld %lld", b, m, n, k);
    else snprintf(shape, sizeof shape, "%lld %lld %lld", m, n, k);
    snprintf(cmd, sizeof cmd, "%s %s", batched ? "bmm" : "matmul", shape);
    double flops = 2.0 * (double)b * (double)m * (double)n * (double)k;
    Result r;
    measure(cmd, who, 3, flops >= 1e9, &r);
    char eb[16], sb[48];
    printf("%-22s", shape);
    if (r.t[DYN] > 0) {
      printf(" %10.4f", r.t[DYN] * 1e3);
      if (r.pred > 0) printf(" %10.4f", r.pred * 1e3);
      else printf(" %10s", "-");
      printf(" %6s %9.1f", model_err(e, shape, &r, eb, sizeof eb), flops / r.t[DYN] * 1e-9);
      if (r.peak > 0) printf(" (%2.0f%% of peak)", 100.0 * flops / r.t[DYN] * 1e-9 / r.peak);
      else printf("              ");
    } else {
      printf(" %10s %10s %6s %9s", "-", "-", "-", "-");
    }
    for (int l = ONEDNN; l <= OPENBLAS; l++) {
      if (r.t[l] > 0) printf(" %10.4f", r.t[l] * 1e3);
      else printf(" %10s", "-");
      if (r.ratio[l] > 0) printf(" %7.2f", r.ratio[l]);
      else printf(" %7s", "-");
      geo_add(&g, l - ONEDNN, r.ratio[l], flagged(&r));
    }
    printf(" %s\n", flag_str(&r, sb, sizeof sb));
    csv_line(suite, shape, &r, r.t[DYN] > 0 ? flops / r.t[DYN] * 1e-9 : 0, r.t[ONEDNN], r.t[OPENBLAS], r.ratio[ONEDNN],
             r.ratio[OPENBLAS]);
  }
  fclose(f);
  char g0[32], g1[32];
  for (int k = 0; k < 2; k++)
    printf("%-22s %10s %10s %6s %9s%s %10s %7s %10s %7s   (geometric means%s)\n", "", "", "", "", "",
           wk[DYN].pid ? "              " : "", "", geo(&g, k, 0, g0), "", geo(&g, k, 1, g1), k ? " of the unflagged lines" : "");
  suite_end(e);
}

static void rowwise_suite(const char *dir) {
  static const int who[] = {DYN, CLOOP, COPY};
  if (!any_started(who, 3)) return;
  FILE *f = open_suite(dir, "rowwise.txt");
  if (!f) return;
  char suite[128];
  snprintf(suite, sizeof suite, "%srowwise.txt", label_prefix);
  printf("\n%s: f32 softmax and layernorm over the last axis, transpose of [ROWS, COLS]; %d threads;\n"
         "reference: a plain C loop on the same threads; model: as above;\n"
         "of bw: GB/s (bytes read and written once) over the streaming bandwidth of a copy taking turns with them\n",
         suite, threads);
  flag_note();
  printf("%-24s %10s %10s %6s %8s %7s %10s %7s %6s %6s\n", "OP ROWS COLS", "dyn ms", "model ms", "err", "GB/s", "of bw",
         "C loop ms", "ratio", "rounds", "others");
  Geo g = {0};
  SuiteErr *e = suite_begin(suite);
  char line[256];
  while (next_line(f, line, sizeof line)) {
    char op[32];
    long long rows, cols;
    if (sscanf(line, "%31s %lld %lld", op, &rows, &cols) != 3) continue;
    if (strcmp(op, "softmax") && strcmp(op, "layernorm") && strcmp(op, "transpose")) {
      fprintf(stderr, "bench: %s: unknown op %s; skipping the line\n", suite, op);
      continue;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%s %lld %lld", op, rows, cols);
    /* the copy takes its turns beside the two: the machine's load drifts, and one slow
     * copy measured on its own once threw a share of bandwidth off by a factor of ten */
    Result r;
    measure(shape, who, 3, false, &r);
    double bytes = 2.0 * (double)rows * (double)cols * 4;
    char eb[16], sb[48];
    printf("%-24s", shape);
    if (r.t[DYN] > 0) {
      printf(" %10.4f", r.t[DYN] * 1e3);
      if (r.pred > 0) printf(" %10.4f", r.pred * 1e3);
      else printf(" %10s", "-");
      printf(" %6s %8.1f", model_err(e, shape, &r, eb, sizeof eb), bytes / r.t[DYN] * 1e-9);
    } else {
      printf(" %10s %10s %6s %8s", "-", "-", "-", "-");
    }
    /* share of bandwidth = (bytes / our time) / (copy's bytes / copy's time), a median over
     * the rounds like the ratios */
    if (r.ratio[COPY] > 0) printf(" %6.0f%%", 100.0 * r.ratio[COPY] * bytes / (2.0 * (double)NCOPY * 4));
    else printf(" %7s", "-");
    if (r.t[CLOOP] > 0) printf(" %10.4f", r.t[CLOOP] * 1e3);
    else printf(" %10s", "-");
    if (r.ratio[CLOOP] > 0) printf(" %7.2f", r.ratio[CLOOP]);
    else printf(" %7s", "-");
    printf(" %s\n", flag_str(&r, sb, sizeof sb));
    geo_add(&g, 0, r.ratio[CLOOP], flagged(&r));
    csv_line(suite, shape, &r, r.t[DYN] > 0 ? bytes / r.t[DYN] * 1e-9 : 0, r.t[CLOOP], 0, r.ratio[CLOOP], 0);
  }
  fclose(f);
  char g0[32];
  for (int k = 0; k < 2; k++)
    printf("%-24s %10s %10s %6s %8s %7s %10s %7s   (geometric mean%s)\n", "", "", "", "", "", "", "", geo(&g, k, 0, g0),
           k ? " of the unflagged lines" : "");
  suite_end(e);
}

static int cmp_abs_err(const void *a, const void *b) {
  double x = fabs(((const ModelLine *)a)->err), y = fabs(((const ModelLine *)b)->err);
  return x > y ? -1 : x < y;
}

static void summary(void) {
  printf("\nsummary: %d lines, %d flagged (!): %d whose rounds' ratios spread over %.0f%%, %d during which other processes\n"
         "took over %.0f%% of the cores in use\n", nlines, nflagged, nspread, 100 * FLAG_SPREAD, nbusy, 100 * FLAG_OTHERS);
  if (!nmlines) return;
  double sum = 0;
  for (int i = 0; i < nmlines; i++) sum += fabs(mlines[i].err);
  printf("model: mean |predicted / measured - 1| %.0f%% over %d lines (goal: under %.0f%% on every suite);", 100 * sum / nmlines,
         nmlines, 100 * MODEL_GOAL);
  for (int i = 0; i < nsuites; i++)
    if (suites[i].n) printf(" %s %.0f%%", suites[i].suite, 100 * suites[i].sum / suites[i].n);
  qsort(mlines, (size_t)nmlines, sizeof *mlines, cmp_abs_err);
  printf("\nmodel's worst lines:");
  for (int i = 0; i < nmlines && i < 8; i++) printf("%s %s %+.0f%%", i ? ";" : "", mlines[i].what, 100 * mlines[i].err);
  printf("\n");
}

static _Noreturn void usage(void) {
  fprintf(stderr, "usage: bench [--threads N] [--csv FILE] [--budget SECONDS] [--rounds R] [--only NAME[,NAME...]] "
                  "BENCH_DIR [MORE_DIR ...]\n  NAME: dyn, onednn, openblas, c, copy\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *dirs[16], *csvpath = "bench-results.csv", *only = NULL, *worker = NULL;
  int ndirs = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csvpath = argv[++i];
    else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = atof(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strncmp(argv[i], "--only=", 7)) only = argv[i] + 7;
    else if (!strcmp(argv[i], "--worker") && i + 1 < argc) worker = argv[++i];
    else if (argv[i][0] == '-') usage();
    else if (ndirs < 16) dirs[ndirs++] = argv[i];
  }
  if (threads < 1 || rounds < 1 || rounds > MAX_ROUNDS) usage();
  for (int w = 0; w < NWHO && worker; w++)
    if (!strcmp(worker, who_name[w])) {
      if (!who_built(w)) die("%s is not in this build", worker);
      return worker_main(w);
    }
  if (worker) die("unknown worker %s", worker);
  bool want[NWHO];
  for (int w = 0; w < NWHO; w++) want[w] = !only;
  for (const char *p = only; p && *p;) {
    size_t k = strcspn(p, ",");
    int w = 0;
    while (w < NWHO && (strlen(who_name[w]) != k || strncmp(p, who_name[w], k))) w++;
    if (w == NWHO) usage();
    want[w] = true;
    p += k + (p[k] == ',');
  }
  if (!ndirs) usage();
  csv = fopen(csvpath, "w");
  if (!csv) die("%s: %s", csvpath, strerror(errno));
  fprintf(csv, "suite,shape,dyn_ms,dyn_rate,ref1_ms,ref2_ms,ratio1,ratio2,model_ms,model_err,spread,others,flagged\n");
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) self[len] = 0;
  else snprintf(self, sizeof self, "%s", argv[0]);

  printf("dyn %s benchmark: %d threads, each contender in a process of its own, the others stopped during its turns\n",
         PACKAGE_VERSION, threads);
  /* OpenBLAS, linked into this process too, started its threads when it was loaded; they
   * spin about 2^28 cycles before they sleep.  Let them before the workers start. */
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  int started = 0;
  for (int w = 0; w < NWHO; w++)
    if (want[w] && who_built(w)) {
      worker_start(w, self);
      if (w == ONEDNN || w == OPENBLAS) printf("%s\n", wk[w].desc);
      started++;
    }
  if (!started) die("--only %s names no contender of this build", only);
  if (wk[DYN].pid) ask(DYN, "intro");
  if (wk[COPY].pid) ask(COPY, "intro");
  char prefix[256];
  for (int d = 0; d < ndirs; d++) {
    const char *dir = dirs[d], *base = strrchr(dir, '/');
    snprintf(prefix, sizeof prefix, "%s/", base && base[1] ? base + 1 : dir);
    label_prefix = d ? prefix : "";
    quiet_missing = d > 0;
    contraction_suite(dir, "gemm.txt", false);
    contraction_suite(dir, "bmm.txt", true);
    rowwise_suite(dir);
  }
  summary();
  workers_end();
  fclose(csv);
  printf("\nwritten: %s\n", csvpath);
  return 0;
}
