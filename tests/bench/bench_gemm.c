/* bench_gemm.c -- the contraction benchmark: every "M N K" line of a shape file (f32,
 * row-major C[M,N] = A[M,K] B[K,N]) timed with dyn's engine, oneDNN (dnnl_sgemm) and
 * OpenBLAS (cblas_sgemm) side by side in one process, with the same thread count: median
 * GFLOP/s over rounds of warmed-up repetitions (the best run goes to the CSV too), the
 * ratios and their geometric means, the one-off compile time, the dispatch time for a new
 * shape and the machine's measured peak.  run-gemm.sh sets the libraries' thread
 * environment and builds this file.
 */
#include "config.h"
#include "dyn_int.h"
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_DNNL_H
#include <dnnl.h>
#endif
#ifdef HAVE_CBLAS_H
#include <cblas.h>
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorts v. */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct Shape { int64_t m, n, k; } Shape;
typedef enum { OURS, ONEDNN, OPENBLAS, NLIB } Lib;

typedef struct Ctx {
  GemmKernels *g;
  Pool *pool;
  const Shape *s;
  float *a, *b, *c;
} Ctx;

static bool call(Lib lib, Ctx *x) {
  const Shape *s = x->s;
  switch (lib) {
  case OURS: {
    GemmArgs args = { .batch = 1, .m = s->m, .n = s->n, .k = s->k,
                      .a = x->a, .a_sm = s->k, .a_sk = 1,
                      .b = x->b, .b_sk = s->n, .b_sn = 1,
                      .c = x->c, .c_sm = s->n, .c_sn = 1 };
    char err[256];
    if (!gemm_run(x->g, &args, x->pool, err, sizeof err)) {
      fprintf(stderr, "bench_gemm: %s\n", err);
      exit(1);
    }
    return true;
  }
  case ONEDNN:
#ifdef HAVE_DNNL_H
    dnnl_sgemm('N', 'N', s->m, s->n, s->k, 1.0f, x->a, s->k, x->b, s->n, 0.0f, x->c, s->n);
    return true;
#else
    return false;
#endif
  case OPENBLAS:
#ifdef HAVE_CBLAS_H
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->m, (int)s->n, (int)s->k,
                1.0f, x->a, (int)s->k, x->b, (int)s->n, 0.0f, x->c, (int)s->n);
    return true;
#else
    return false;
#endif
  default:
    return false;
  }
}

/* Samples of one call's seconds, appended at t: a warm-up call, then repetitions for about
 * `budget` seconds (at least 3).  Each library runs its repetitions as one block and the
 * block ends with a pause, so one library's spinning threads never steal the next one's
 * cores.  Returns how many samples. */
static int time_block(Lib lib, Ctx *x, double budget, double *t, int room) {
  if (!call(lib, x)) return 0;
  double t0 = now();
  call(lib, x);
  double one = now() - t0;
  int reps = one > 0 ? (int)(budget / one) : room;
  if (reps < 3) reps = 3;
  if (reps > room) reps = room;
  for (int r = 0; r < reps; r++) {
    t0 = now();
    call(lib, x);
    t[r] = now() - t0;
  }
  usleep(20000);
  return reps;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_gemm [--threads N] [--csv FILE] [--budget SECONDS] "
                  "[--rounds R] SHAPES.txt\n");
  exit(2);
}

int main(int argc, char **argv) {
  int threads = 2, rounds = 3;
  const char *csv = NULL, *path = NULL;
  double budget = 0.3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = atof(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (argv[i][0] == '-') usage();
    else path = argv[i];
  }
  if (!path || threads < 1 || rounds < 1) usage();
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return 1;
  }
  Shape shapes[256];
  int ns = 0;
  char line[256];
  while (fgets(line, sizeof line, f) && ns < 256) {
    char *h = strchr(line, '#');
    if (h) *h = 0;
    long long m, n, k;
    if (sscanf(line, "%lld %lld %lld", &m, &n, &k) == 3 && m > 0 && n > 0 && k > 0)
      shapes[ns++] = (Shape){ m, n, k };
  }
  fclose(f);

  HwModel hw;
  hw_detect_host(&hw);
  char err[256];
  double t0 = now();
  GemmKernels *g = gemm_compile(DYN_F32, &hw, err, sizeof err);
  double compile_ms = (now() - t0) * 1e3;
  if (!g) {
    fprintf(stderr, "bench_gemm: %s\n", err);
    return 1;
  }
  /* Compile time again, a few times: the first includes LLVM's one-off initialisation. */
  double ct[5];
  for (int i = 0; i < 5; i++) {
    GemmKernels *g2 = gemm_compile(DYN_F32, &hw, err, sizeof err);
    ct[i] = g2 ? gemm_compile_ms(g2) : 0;
    gemm_free(g2);
  }
  double compile_med = median(ct, 5), compile_min = ct[0];
  Pool *pool = pool_new(threads);
  double peak = gemm_peak_gflops(g, pool, 0.5);
  double peak1 = gemm_peak_gflops(g, NULL, 0.3);

  printf("dyn gemm benchmark: %s, %d thread%s, f32 row-major\n", hw.desc[0] ? hw.desc : hw.name,
         threads, threads == 1 ? "" : "s");
  printf("compile (all variants, f32): %.1f ms first; then median %.1f, best %.1f of 5\n",
         compile_ms, compile_med, compile_min);
  printf("measured peak (own micro-kernel, L1-resident, long K): %.1f GFLOP/s on %d threads "
         "(%.1f on one)\n", peak, threads, peak1);
#ifdef HAVE_CBLAS_H
  printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n", openblas_get_corename(),
         getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
  openblas_set_num_threads(threads);
#endif
  printf("median of %d rounds x %.2f s per library and shape\n", rounds, budget);

  FILE *out = csv ? fopen(csv, "w") : NULL;
  if (csv && !out) perror(csv);
  if (out) fprintf(out, "M,N,K,ours_gflops,onednn_gflops,openblas_gflops,ours_over_onednn,"
                        "ours_over_openblas,pct_peak,predicted_gflops,max_rel_diff,ours_best,"
                        "onednn_best,openblas_best\n");
  printf("\n%6s %6s %6s | %9s %9s %9s | %8s %8s | %6s %9s\n", "M", "N", "K", "ours", "onednn",
         "openblas", "/onednn", "/openblas", "%peak", "model");
  double lr[2] = { 0, 0 }, lb[2] = { 0, 0 };
  int nratio[2] = { 0, 0 }, nbest[2] = { 0, 0 };
  double big_pct = 0, big_flops = 0;
  enum { ROOM = 4000 };
  double *t[NLIB];
  for (int l = 0; l < NLIB; l++) t[l] = malloc(ROOM * sizeof(double));
  for (int i = 0; i < ns; i++) {
    Shape *s = &shapes[i];
    float *a = malloc(sizeof(float) * (size_t)(s->m * s->k));
    float *b = malloc(sizeof(float) * (size_t)(s->k * s->n));
    float *c = malloc(sizeof(float) * (size_t)(s->m * s->n));
    float *ref = malloc(sizeof(float) * (size_t)(s->m * s->n));
    srand(7);
    for (int64_t j = 0; j < s->m * s->k; j++) a[j] = (float)rand() / RAND_MAX - 0.5f;
    for (int64_t j = 0; j < s->k * s->n; j++) b[j] = (float)rand() / RAND_MAX - 0.5f;
    Ctx x = { g, pool, s, a, b, c };
    double flops = 2.0 * s->m * s->n * s->k;
    double gf[NLIB] = { 0 }, best[NLIB] = { 0 }, maxdiff = -1;
    int nt[NLIB] = { 0 };
    /* Rounds of one block per library: a load that comes and goes hits all of them. */
    for (int r = 0; r < rounds; r++)
      for (int l = 0; l < NLIB; l++) {
        int got = time_block((Lib)l, &x, budget / rounds, t[l] + nt[l], ROOM - nt[l]);
        nt[l] += got;
        if (r || !got) continue;
        if (l == OURS) {
          memcpy(ref, c, sizeof(float) * (size_t)(s->m * s->n));
        } else {              /* the libraries agree with us (a sanity check, not a test) */
          double md = 0;
          for (int64_t j = 0; j < s->m * s->n; j++) {
            double d = fabs((double)c[j] - ref[j]) / (1 + fabs((double)c[j]));
            if (d > md) md = d;
          }
          if (md > maxdiff) maxdiff = md;
        }
      }
    for (int l = 0; l < NLIB; l++)
      if (nt[l]) {
        gf[l] = flops / median(t[l], nt[l]) * 1e-9;
        best[l] = flops / t[l][0] * 1e-9;               /* median() sorted them */
      }
    GemmArgs args = { .batch = 1, .m = s->m, .n = s->n, .k = s->k, .a_sm = s->k, .a_sk = 1,
                      .b_sk = s->n, .b_sn = 1, .c_sm = s->n, .c_sn = 1 };
    double pred = flops / gemm_predict(g, &args, threads) * 1e-9;
    double r1 = gf[ONEDNN] > 0 ? gf[OURS] / gf[ONEDNN] : 0;
    double r2 = gf[OPENBLAS] > 0 ? gf[OURS] / gf[OPENBLAS] : 0;
    if (r1 > 0) { lr[0] += log(r1); nratio[0]++; }
    if (r2 > 0) { lr[1] += log(r2); nratio[1]++; }
    for (int l = 0; l < 2; l++)       /* the same over each library's best run */
      if (best[OURS] > 0 && best[l + 1] > 0) { lb[l] += log(best[OURS] / best[l + 1]); nbest[l]++; }
    double pct = 100 * gf[OURS] / peak;
    if (flops > big_flops) { big_flops = flops; big_pct = pct; }
    printf("%6lld %6lld %6lld | %9.1f %9.1f %9.1f | %8.2f %8.2f | %5.1f%% %9.1f%s\n",
           (long long)s->m, (long long)s->n, (long long)s->k, gf[OURS], gf[ONEDNN],
           gf[OPENBLAS], r1, r2, pct, pred, maxdiff > 1e-3 ? "  MISMATCH" : "");
    fflush(stdout);
    if (out)
      fprintf(out, "%lld,%lld,%lld,%.2f,%.2f,%.2f,%.3f,%.3f,%.1f,%.1f,%.2g,%.2f,%.2f,%.2f\n",
              (long long)s->m, (long long)s->n, (long long)s->k, gf[OURS], gf[ONEDNN],
              gf[OPENBLAS], r1, r2, pct, pred, maxdiff, best[OURS], best[ONEDNN],
              best[OPENBLAS]);
    free(a);
    free(b);
    free(c);
    free(ref);
  }
  for (int l = 0; l < NLIB; l++) free(t[l]);
  printf("\ngeometric mean over %d shapes: ours/onednn %.2fx, ours/openblas %.2fx\n", ns,
         nratio[0] ? exp(lr[0] / nratio[0]) : 0, nratio[1] ? exp(lr[1] / nratio[1]) : 0);
  printf("(best run of each instead of the median: ours/onednn %.2fx, ours/openblas %.2fx)\n",
         nbest[0] ? exp(lb[0] / nbest[0]) : 0, nbest[1] ? exp(lb[1] / nbest[1]) : 0);
  printf("largest shape: %.1f%% of the measured peak\n", big_pct);

  /* Dispatch for a new shape: the model's choice alone, then a whole 1x1x1 call. */
  double d[200];
  for (int i = 0; i < 200; i++) {
    GemmArgs args = { .batch = 1, .m = 1001 + i, .n = 777 + 3 * i, .k = 513 + 7 * i,
                      .a_sm = 513 + 7 * i, .a_sk = 1, .b_sk = 777 + 3 * i, .b_sn = 1,
                      .c_sm = 777 + 3 * i, .c_sn = 1 };
    GemmPlanInfo pi;
    double t1 = now();
    gemm_plan_info(g, &args, threads, &pi);
    d[i] = now() - t1;
  }
  double plan_us = median(d, 200) * 1e6;
  float one_a = 1, one_b = 2, one_c = 0;
  Shape s1 = { 1, 1, 1 };
  Ctx x1 = { g, pool, &s1, &one_a, &one_b, &one_c };
  for (int i = 0; i < 200; i++) {
    double t1 = now();
    call(OURS, &x1);
    d[i] = now() - t1;
  }
  printf("dispatch for a new shape: %.2f us (model over all candidates); a repeated 1x1x1 "
         "call %.2f us in all\n", plan_us, median(d, 200) * 1e6);
  if (out) {
    fprintf(out, "# compile_ms,%.1f,%.1f\n# peak_gflops,%.1f\n# dispatch_us,%.2f\n", compile_ms,
            compile_med, peak, plan_us);
    fclose(out);
  }
  pool_free(pool);
  gemm_free(g);
  return 0;
}
