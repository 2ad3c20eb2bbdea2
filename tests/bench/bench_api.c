/* bench_api.c -- what a call through libdyn's C interface costs on small shapes, where the
 * fixed cost of a call is all there is: matmul 8x8x8 and an elementwise function on 64
 * elements, contiguous and strided (every other element of 128, and 64 reversed: read in
 * place like the others), each call with its result freed.  tests/bench/bench_api.py runs the same calls
 * from Python (and NumPy's own) and holds the Python binding to at most 5 us more than
 * this; it runs this program and reads its lines, "NAME US" (the best of 5 rounds).
 * Usage: bench_api [SECONDS_PER_ROUND]
 */
#include "dyn/dyn.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Microseconds per call of fn on args, the best of 5 rounds of about secs each. */
static double per_call(dyn_session *s, const char *fn, DLTensor *args, int nargs, double secs) {
  double best = 1e30;
  for (int round = 0; round < 5; round++) {
    long n = 0;
    double t0 = now(), t;
    do {
      for (int k = 0; k < 100; k++, n++) {
        DLManagedTensor *r;
        if (dyn_call(s, fn, args, nargs, &r, 1, NULL)) {
          fprintf(stderr, "bench_api: %s: %s", fn, dyn_diagnostic_get(s, 0)->text);
          exit(1);
        }
        r->deleter(r);
      }
      t = now() - t0;
    } while (t < secs);
    if (t / (double)n < best) best = t / (double)n;
  }
  return best * 1e6;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 0.2;
  dyn_options o;
  dyn_options_init(&o);
  o.threads = 1;
  char *why;
  dyn_session *s = dyn_session_new(&o, &why);
  if (!s || dyn_run(s, "fn axpy(x: f32[N], y: f32[N]) -> f32[N] {\n  z[i] = x[i] * 2.0 + y[i]\n  return z\n}", NULL)) {
    fprintf(stderr, "bench_api: no session\n");
    return 1;
  }
  static float a[128], b[64];
  for (int i = 0; i < 64; i++) a[i] = (float)i, b[i] = (float)(64 - i);
  for (int i = 64; i < 128; i++) a[i] = (float)i;
  int64_t mat[2] = {8, 8}, vec[1] = {64}, step2[1] = {2}, back[1] = {-1};
  DLTensor m2[2] = {{a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, mat, NULL, 0}, {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, mat, NULL, 0}};
  DLTensor v2[2] = {{a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, vec, NULL, 0}, {b, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, vec, NULL, 0}};
  printf("matmul-8x8x8 %.3f\n", per_call(s, "matmul", m2, 2, secs));
  printf("axpy-64 %.3f\n", per_call(s, "axpy", v2, 2, secs));
  DLTensor s2[2] = {{a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, vec, step2, 0}, {b + 63, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, vec, back, 0}};
  printf("axpy-64-strided %.3f\n", per_call(s, "axpy", s2, 2, secs));
  dyn_session_free(s);
  return 0;
}
