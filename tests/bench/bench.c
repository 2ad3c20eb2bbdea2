/* bench.c -- `make bench`: dyn's compiled functions beside the reference libraries, in one
 * process, on every line of the shape suites (gemm.txt, bmm.txt, rowwise.txt).
 *
 * Every function goes through the same path a user's call takes (session_call: binding the
 * sizes, checking, choosing the variant, running), compiled once before the first line.
 * Columns: our time, oneDNN's and OpenBLAS's for contractions (when configure found them),
 * a plain C loop at -O3 on the same threads for the row-wise ops; speed ratios (their time /
 * ours, so above 1 means dyn is faster), GFLOP/s or GB/s, and the geometric means of the
 * ratios.  Times are medians of repeated runs after a warm-up (calls under 1 ms timed in
 * batches, the same for every column); machines are shared and noisy, which is why ratios
 * from one run are what to read.  The contenders of a line take turns over a few rounds and
 * a ratio is the median of its rounds' ratios (see take_turns), so it may differ a little
 * from the quotient of the two medians printed beside it.  Writes a CSV beside the table.
 *
 * usage: bench [--threads N] [--csv FILE] [--budget SECONDS] BENCH_DIR [MORE_DIR ...]
 * Each further directory's suites (any of the three files it has) follow, labelled by its
 * name: `make bench` adds tests/bench/shapes, shapes the shared suites do not list.
 */
#include "config.h"
#include "dyn.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

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

static double budget = 0.25;
/* The f32 micro-kernel's peak, measured at the start and again beside each large shape. */
static GemmKernels *peak_g;
static Pool *peak_pool;
static double peak_now(double seconds) {
  return peak_g ? gemm_peak_gflops(peak_g, peak_pool, seconds) : 0;
}
static int threads = 2;

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

static Tensor *randt(int rank, const int64_t *shape, unsigned *seed) {
  char err[256];
  Tensor *t = tensor_new(DYN_F32, rank, shape, err, sizeof err);
  if (!t) {
    fprintf(stderr, "bench: %s\n", err);
    exit(1);
  }
  float *p = tensor_data(t);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    p[i] = (float)((*seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
  }
  return t;
}

/* ---- ours ---- */

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
  if (!session_call(c->s, c->fn, c->args, c->nargs, &out, 1, &err)) {
    fprintf(stderr, "bench: %s: %s\n", c->fn, err.s);
    exit(1);
  }
  tensor_release(out);
  buf_free(&err);
}

/* ---- the references ---- */

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

/* Plain C row-wise loops, split over the same number of threads by rows. */
typedef struct {
  int op;                 /* 0 softmax, 1 layernorm */
  int64_t rows, cols;
  const float *x, *g, *b;
  float *y;
  int64_t r0, r1;
} Row;

static void rows_c(Row *r) {
  for (int64_t i = r->r0; i < r->r1; i++) {
    const float *x = r->x + i * r->cols;
    float *y = r->y + i * r->cols;
    if (r->op == 0) {
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

/* Streaming bandwidth: a copy over the same threads, for "share of bandwidth". */
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

/* ---- suites ---- */

typedef struct { double logsum[3]; int n[3]; } Geo;
static void geo_add(Geo *g, int i, double r) {
  if (r > 0) {
    g->logsum[i] += log(r);
    g->n[i]++;
  }
}
static double geo(const Geo *g, int i) { return g->n[i] ? exp(g->logsum[i] / g->n[i]) : 0; }

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

/* Each line runs every library in turn, with a pause after each: OpenMP and thread-pool
 * workers spin for a while after a call, which would otherwise be charged to the next
 * library's time.  Line by line, the times a ratio compares are taken within a second of
 * each other, which is what keeps ratios steady on a machine others share. */
static void pause_between(void) {
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

/* The contenders of a line take turns: ROUNDS rounds, each timing every one of them for
 * a share of the budget, and a ratio is the median over the rounds of the ratio within a
 * round.  A slow spell of the machine (seconds, on a shared host) then falls on every
 * contender of a round alike, where one turn each would hand it to whoever ran then. */
#define ROUNDS 3
typedef struct { void (*fn)(void *); void *ctx; } Contender;

/* times[i]: contender i's median time; ratios[i]: the median of its time over contender
 * 0's, round by round (ratios[0] = 1). */
static void take_turns(const Contender *c, int n, double *times, double *ratios) {
  double t[4][ROUNDS], saved = budget;
  budget = saved / ROUNDS;
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < n; i++) {
      t[i][r] = timeit(c[i].fn, c[i].ctx);
      pause_between();
    }
  budget = saved;
  for (int i = 0; i < n; i++) {
    double q[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) q[r] = t[i][r] / t[0][r];
    ratios[i] = median(q, ROUNDS);
  }
  for (int i = 0; i < n; i++) times[i] = median(t[i], ROUNDS);
}

typedef struct { long long b, m, n, k; Tensor *A, *B; float *c; double t[3], ratio[3], peak; } CLine;

static void contraction_suite(Session *s, const char *dir, const char *file, bool batched, FILE *csv) {
  FILE *f = open_suite(dir, file);
  if (!f) return;
  CLine L[256];
  int nl = 0;
  char line[256];
  unsigned seed = 1;
  while (nl < 256 && next_line(f, line, sizeof line)) {
    CLine *c = &L[nl];
    memset(c, 0, sizeof *c);
    c->b = 1;
    int got = batched ? sscanf(line, "%lld %lld %lld %lld", &c->b, &c->m, &c->n, &c->k)
                      : sscanf(line, "%lld %lld %lld", &c->m, &c->n, &c->k);
    if (got != (batched ? 4 : 3)) continue;
    int64_t sa[3] = {c->b, c->m, c->k}, sb[3] = {c->b, c->k, c->n};
    c->A = batched ? randt(3, sa, &seed) : randt(2, sa + 1, &seed);
    c->B = batched ? randt(3, sb, &seed) : randt(2, sb + 1, &seed);
    c->c = malloc(sizeof(float) * (size_t)(c->b * c->m * c->n) + 64);
    nl++;
  }
  fclose(f);
  for (int i = 0; i < nl; i++) {
    DynCall dc = {s, batched ? "bmm" : "matmul", {L[i].A, L[i].B}, 2};
    Gemm gm = {L[i].b, L[i].m, L[i].n, L[i].k, tensor_data(L[i].A), tensor_data(L[i].B), L[i].c};
    (void)gm;
    if (2.0 * L[i].b * L[i].m * L[i].n * L[i].k >= 1e9) {   /* the peak beside a large shape */
      L[i].peak = peak_now(0.2);
      pause_between();
    }
    Contender c[3] = {{run_dyn, &dc}};
    int nc = 1, slot[3] = {0};
#ifdef HAVE_DNNL
    slot[nc] = 1;
    c[nc++] = (Contender){run_dnnl, &gm};
#endif
#ifdef HAVE_OPENBLAS
    slot[nc] = 2;
    c[nc++] = (Contender){run_openblas, &gm};
#endif
    double t[3], r[3];
    take_turns(c, nc, t, r);
    for (int j = 0; j < nc; j++) {
      L[i].t[slot[j]] = t[j];
      L[i].ratio[slot[j]] = r[j];
    }
  }
  printf("\n%s%s: f32 %s, %d threads; ratio = their time / ours (above 1: dyn is faster; median of %d rounds)\n", label_prefix, file,
         batched ? "C[b] = A[b] B[b] (oneDNN and OpenBLAS: one sgemm per batch)" : "C = A B, row-major", threads, ROUNDS);
  printf("%-22s %10s %9s %10s %9s %10s %9s\n", batched ? "B M N K" : "M N K", "dyn ms", "GFLOP/s", "oneDNN ms", "ratio",
         "OpenBLAS", "ratio");
  Geo g = {0};
  for (int i = 0; i < nl; i++) {
    CLine *c = &L[i];
    double td = c->t[0], t1 = c->t[1], t2 = c->t[2];
    double flops = 2.0 * (double)c->b * (double)c->m * (double)c->n * (double)c->k;
    char shape[64];
    if (batched) snprintf(shape, sizeof shape, "%lld %lld %lld %lld", c->b, c->m, c->n, c->k);
    else snprintf(shape, sizeof shape, "%lld %lld %lld", c->m, c->n, c->k);
    printf("%-22s %10.4f %9.1f", shape, td * 1e3, flops / td * 1e-9);
    if (c->peak > 0) printf(" (%2.0f%% of peak)", 100.0 * flops / td * 1e-9 / c->peak);
    else if (peak_g) printf("              ");
    if (t1 > 0) printf(" %10.4f %9.2f", t1 * 1e3, c->ratio[1]);
    else printf(" %10s %9s", "-", "-");
    if (t2 > 0) printf(" %10.4f %9.2f\n", t2 * 1e3, c->ratio[2]);
    else printf(" %10s %9s\n", "-", "-");
    geo_add(&g, 0, c->ratio[1]);
    geo_add(&g, 1, c->ratio[2]);
    fprintf(csv, "%s%s,%s,%.6f,%.3f,%.6f,%.6f\n", label_prefix, file, shape, td * 1e3, flops / td * 1e-9, t1 * 1e3, t2 * 1e3);
    free(c->c);
    tensor_release(c->A);
    tensor_release(c->B);
  }
  printf("%-22s %10s %9s %10s %9.2f %10s %9.2f   (geometric means)\n", "", "", "", "", geo(&g, 0), "", geo(&g, 1));
}

/* Streaming bandwidth: a 2 x 256 MB copy on the benchmark's threads, in GB/s (bytes read
 * and written). */
static double copy_gbs(const Copy *c) {
  return 2.0 * (double)c->n * 4 / timeit(run_copy, (void *)c) * 1e-9;
}

static void rowwise_suite(Session *s, const char *dir, FILE *csv, const Copy *cp) {
  FILE *f = open_suite(dir, "rowwise.txt");
  if (!f) return;
  printf("\n%srowwise.txt: f32 over the last axis, %d threads; reference: a plain C loop at -O3 on the same threads;\n"
         "of bw: GB/s (bytes read and written once) over the streaming bandwidth of a copy taking turns with them\n", label_prefix, threads);
  printf("%-24s %10s %8s %7s %10s %9s\n", "OP ROWS COLS", "dyn ms", "GB/s", "of bw", "C loop ms", "ratio");
  Geo g = {0};
  char line[256];
  unsigned seed = 2;
  while (next_line(f, line, sizeof line)) {
    char op[32];
    long long r, c;
    if (sscanf(line, "%31s %lld %lld", op, &r, &c) != 3) continue;
    bool ln = !strcmp(op, "layernorm");
    int64_t sx[2] = {r, c}, sg[1] = {c};
    Tensor *X = randt(2, sx, &seed), *G = randt(1, sg, &seed), *B = randt(1, sg, &seed);
    DynCall dc = {s, ln ? "layernorm" : "softmax", {X, G, B}, ln ? 3 : 1};
    pause_between();
    float *y = malloc(sizeof(float) * (size_t)(r * c) + 64);
    Row rw = {ln, r, c, tensor_data(X), tensor_data(G), tensor_data(B), y, 0, 0};
    /* the copy takes its turns beside the two: the machine's load drifts, and one slow
     * copy measured on its own once threw a share of bandwidth off by a factor of ten */
    Contender ct[3] = {{run_dyn, &dc}, {run_rows, &rw}, {run_copy, (void *)cp}};
    double tt[3], ratio[3];
    take_turns(ct, 3, tt, ratio);
    double td = tt[0], tc = tt[1];
    double bytes = 2.0 * (double)r * (double)c * 4;
    /* share of bandwidth = (bytes / our time) / (copy's bytes / copy's time), a median over
     * the rounds like the ratios */
    double share = ratio[2] * bytes / (2.0 * (double)cp->n * 4);
    char shape[64];
    snprintf(shape, sizeof shape, "%s %lld %lld", op, r, c);
    printf("%-24s %10.4f %8.1f %6.0f%% %10.4f %9.2f\n", shape, td * 1e3, bytes / td * 1e-9,
           100.0 * share, tc * 1e3, ratio[1]);
    geo_add(&g, 0, ratio[1]);
    fprintf(csv, "%srowwise.txt,%s,%.6f,%.3f,%.6f,\n", label_prefix, shape, td * 1e3, bytes / td * 1e-9, tc * 1e3);
    free(y);
    tensor_release(X);
    tensor_release(G);
    tensor_release(B);
  }
  fclose(f);
  printf("%-24s %10s %8s %7s %10s %9.2f   (geometric mean)\n", "", "", "", "", "", geo(&g, 0));
}

int main(int argc, char **argv) {
  const char *dirs[16], *csvpath = "bench-results.csv";
  int ndirs = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csvpath = argv[++i];
    else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = atof(argv[++i]);
    else if (ndirs < 16) dirs[ndirs++] = argv[i];
  }
  if (!ndirs || threads < 1) {
    fprintf(stderr, "usage: bench [--threads N] [--csv FILE] [--budget SECONDS] BENCH_DIR [MORE_DIR ...]\n");
    return 2;
  }
  FILE *csv = fopen(csvpath, "w");
  if (!csv) {
    perror(csvpath);
    return 1;
  }
  fprintf(csv, "suite,shape,dyn_ms,dyn_rate,ref1_ms,ref2_ms\n");
  SessionOptions opt = {.target = "cpu", .threads = threads};
  Session *s = session_new(&opt, stdout, stderr);
  if (session_run(s, ":target cpu", "bench") != RUN_OK) {
    fprintf(stderr, "bench: no CPU back end in this build\n");
    return 1;
  }

  printf("dyn %s benchmark: %d threads", PACKAGE_VERSION, threads);
#ifdef HAVE_OPENBLAS
  const char *ct = getenv("OPENBLAS_CORETYPE");
  printf("; OpenBLAS kernel %s (OPENBLAS_CORETYPE)", ct ? ct : "auto-detected");
#endif
  printf("\n");
  /* one-off compile times, each in a fresh session so that nothing is shared.  First a
   * pause: OpenBLAS starts its worker threads when it is loaded, and they spin for a while
   * before they sleep, on the cores the compiler's threads would use (the first compile
   * measured 85-110 ms beside them, 65-70 ms after them). */
  pause_between();
  /* each compiled COMPILE_RUNS times, the median reported: one compile is a single sample
   * of a shared machine (the same matmul took 41 and 68 ms in two runs of this program) */
  enum { COMPILE_RUNS = 3 };
  printf("\ncompile once (ms, median of %d):", COMPILE_RUNS);
  const char *fns[] = {"matmul", "softmax", "layernorm", "gelu"};
  double matmul_ms = 0;
  for (int i = 0; i < 4; i++) {
    double ms[COMPILE_RUNS], wall[COMPILE_RUNS];
    for (int r = 0; r < COMPILE_RUNS; r++) {
      Session *fresh = session_new(&opt, stdout, stderr);
      Buf err = {0};
      double t0 = now();
      ms[r] = session_compile(fresh, fns[i], &err);
      wall[r] = (now() - t0) * 1e3;
      buf_free(&err);
      session_free(fresh);
    }
    double m = median(ms, COMPILE_RUNS);
    printf("  %s %.1f (%.1f with the JIT's start)", fns[i], m, median(wall, COMPILE_RUNS));
    fprintf(csv, "compile,%s,%.3f,,,\n", fns[i], m);
    if (i == 0) matmul_ms = m;
  }
  printf("\n");
  /* dispatch: a call on a shape never seen, for a 1x1x1 product: binding, checks and the
   * choice of a variant, with almost no arithmetic */
  {
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
    fprintf(csv, "dispatch,new shape,%.6f,,,\n", m * 1e3);
  }
  /* the micro-kernel's peak on these threads, measured (as dyn --calibrate does), for the
   * share of peak the large shapes reach */
  {
    HwModel hw;
    hw_detect_host(&hw);
    char err[256];
    peak_g = gemm_compile(DYN_F32, &hw, err, sizeof err);
    peak_pool = pool_new(threads);
    printf("measured peak of the f32 micro-kernel on %d threads: %.1f GFLOP/s (measured again beside "
           "each shape of at least 1 GFLOP for its share of peak)\n", threads, peak_now(0.5));
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
    fprintf(csv, "compile,matmul rows (when first needed),%.3f,,,\ncompile,matmul inner products (when first needed),%.3f,,,\n",
            later[0], later[1]);
  }
  /* streaming bandwidth for the share in the row-wise table (where the copy takes turns
   * with each line's contenders) */
  int64_t ncopy = 64 << 20;
  float *ca = malloc(sizeof(float) * (size_t)ncopy), *cb = malloc(sizeof(float) * (size_t)ncopy);
  memset(ca, 1, sizeof(float) * (size_t)ncopy);
  memset(cb, 0, sizeof(float) * (size_t)ncopy);
  Copy copy = {cb, ca, ncopy};
  printf("streaming bandwidth (memcpy on %d threads): %.1f GB/s\n", threads, copy_gbs(&copy));
  if (session_compiles(s, "bmm") < 0)      /* the stdlib's, else the same written here */
    session_run(s, "fn bmm(A: f32[B, M, K], X: f32[B, K, N]) -> f32[B, M, N] { C[b, i, j] = sum[k] A[b, i, k] * X[b, k, j]; return C }", "bench");
  char prefix[256];
  for (int d = 0; d < ndirs; d++) {
    const char *dir = dirs[d], *base = strrchr(dir, '/');
    snprintf(prefix, sizeof prefix, "%s/", base && base[1] ? base + 1 : dir);
    label_prefix = d ? prefix : "";
    quiet_missing = d > 0;
    contraction_suite(s, dir, "gemm.txt", false, csv);
    contraction_suite(s, dir, "bmm.txt", true, csv);
    rowwise_suite(s, dir, csv, &copy);
  }
  free(ca);
  free(cb);
  pool_free(peak_pool);
  gemm_free(peak_g);
  fclose(csv);
  printf("\nwritten: %s\n", csvpath);
  session_free(s);
  return 0;
}
