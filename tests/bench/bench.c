/* bench.c -- `make bench`: dyn's compiled functions beside their peers on every line of the
 * shape suites, a section a file: gemm.txt, bmm.txt (matmul), rowwise.txt (softmax,
 * layernorm, transpose), layout.txt (transposes and permutations of any rank), reduce.txt
 * (sums over any axes), eltwise.txt (gelu, silu, rmsnorm, softmax, layernorm, a user's
 * chain), conv.txt (conv2d and depthwise), attention.txt (attention, causal_attention) and
 * gemm_bf16.txt (bf16 matmul beside oneDNN's bf16 matmul primitive); each line is one op and its sizes (op_parse), each contender in a process of its own.
 *
 * Every function goes through the same path a user's call takes (session_call: binding the
 * sizes, checking, choosing the variant, running), compiled once before the first line:
 * the stdlib's (nn, linalg), the few the bench writes as a user would (bench_fns), and for
 * a permutation or a sum one written in index notation for its axes.  Columns: our time,
 * the model's prediction for it (what :sched and :time print) and its error (predicted /
 * measured - 1); the peers a section names: oneDNN (sgemm; its convolution primitive,
 * NCHW in and out; reorder, reduction, eltwise, softmax, layer normalisation), OpenBLAS, a plain C loop on the same threads, PyTorch (its worker is
 * bench_torch.py, each statement as a user writes it: A @ B, torch.softmax(x, -1),
 * x.permute(...).contiguous(), F.conv2d, ...); speed ratios (their time / ours, so above 1
 * means dyn is faster), GFLOP/s or GB/s, and for data movement and row-wise work the share
 * of the bandwidth of a copy that takes its turns beside them; the geometric means of the
 * ratios and each suite's mean absolute model error (over every line, and over the lines not
 * flagged, whose rounds agreed).  Times are medians of repeated runs
 * after a warm-up (calls under 1 ms timed in batches, the same for every column).  Writes a
 * CSV beside the table.
 *
 * Every line's result is checked once, after its timing: dyn's and each peer's are written
 * to a directory of the bench's own and compared (max |difference| over the peer's largest
 * element or the size its terms add up to, within a tolerance that grows with the terms
 * each element adds up: check_line), so that a fast wrong kernel cannot look good: the
 * line is marked WRONG, said on standard error, and the bench exits with status 1.
 *
 * Each contender runs in a process of its own.  The bench re-executes itself once per
 * contender (--worker NAME: dyn, onednn, openblas, c, copy), runs bench_torch.py under the
 * first Python that imports torch (without one, the PyTorch column is skipped, said in one
 * line; torch.set_num_threads gives it the bench's threads), and drives them over pipes,
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
 *              [--sections SECTIONS] [--torch SCRIPT] [--python PYTHON] BENCH_DIR [MORE_DIR ...]
 * Each further directory's suites (any of the files it has) follow, labelled by its name:
 * `make bench` adds tests/bench/shapes, shapes the shared suites do not list and the
 * sections they lack; the sections after gemm, bmm and rowwise time each line for half the
 * budget.  --sections runs only those named (gemm,bmm,...,attention), --torch
 * names bench_torch.py (by default beside the program), --python a Python to try first.
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

/* ---- the lines: one op and its sizes, as the suites write them ---- */

/* Every op a suite's line may name, with the count of its sizes (0: as many as the axes of
 * its spec).  permute and sum carry a spec before the sizes: permute's is the order of the
 * input's axes in the output (0213: [A, B, C, D] -> [A, C, B, D], as torch's permute takes
 * it), sum's the axes summed over (02: the first and third). */
#define OPS(X) \
  X(MATMUL, "matmul", 3) X(BMM, "bmm", 4) X(SOFTMAX, "softmax", 2) X(LAYERNORM, "layernorm", 2) \
  X(RMSNORM, "rmsnorm", 2) X(GELU, "gelu", 2) X(SILU, "silu", 2) X(CHAIN, "chain", 2)         \
  X(TRANSPOSE, "transpose", 2) X(PERMUTE, "permute", 0) X(SUM, "sum", 0) X(CONV, "conv", 8)   \
  X(DWCONV, "dwconv", 7) X(ATTENTION, "attention", 4) X(CAUSAL, "causal", 4)                 \
  X(MATMUL_BF16, "matmul_bf16", 3)
#define X(E, name, nd) OP_##E,
enum { OPS(X) NOPS };
#undef X
#define X(E, name, nd) name,
static const char *const line_op_name[NOPS] = {OPS(X)};
#undef X
#define X(E, name, nd) nd,
static const int line_op_nd[NOPS] = {OPS(X)};
#undef X

enum { MAX_ND = 8 };
typedef struct {
  int op;
  char spec[8];              /* permute, sum: one digit an axis */
  int64_t d[MAX_ND];
  int nd;
} Op;

/* Parse "OP [SPEC] SIZE..."; false with the reason in why. */
static bool op_parse(const char *text, Op *o, char *why, size_t n) {
  char name[32];
  int at = 0;
  memset(o, 0, sizeof *o);
  if (sscanf(text, "%31s%n", name, &at) != 1) return snprintf(why, n, "an empty line"), false;
  for (o->op = 0; o->op < NOPS && strcmp(name, line_op_name[o->op]); o->op++) {}
  if (o->op == NOPS) return snprintf(why, n, "unknown op %s", name), false;
  text += at;
  bool spec = o->op == OP_PERMUTE || o->op == OP_SUM;
  if (spec && (sscanf(text, "%7s%n", o->spec, &at) != 1 || strspn(o->spec, "0123456789") != strlen(o->spec)))
    return snprintf(why, n, "%s: the axes first (permute 0213 A B C D, sum 02 A B C)", name), false;
  if (spec) text += at;
  for (char *end;; text = end) {
    long long v = strtoll(text, &end, 10);
    if (end == text) break;
    if (v < 0 || o->nd == MAX_ND) return snprintf(why, n, "%s: a negative size or too many", name), false;
    o->d[o->nd++] = v;
  }
  while (*text == ' ' || *text == '\t' || *text == '\n') text++;
  int want = spec ? (o->op == OP_PERMUTE ? (int)strlen(o->spec) : o->nd) : line_op_nd[o->op];
  if (*text || o->nd != want || (spec && (o->nd < 2 || o->nd > 6)))
    return snprintf(why, n, "%s takes %s", name, spec ? "2 to 6 sizes, one an axis of its spec" : "other sizes"), false;
  if (spec) {
    unsigned seen = 0;
    int prev = -1, k = (int)strlen(o->spec);
    for (int i = 0; i < k; i++) {
      int a = o->spec[i] - '0';
      if (a >= o->nd || (seen >> a & 1) || (o->op == OP_SUM && a < prev))
        return snprintf(why, n, "%s: bad axes %s", name, o->spec), false;
      seen |= 1u << a;
      prev = a;
    }
    if (o->op == OP_SUM && (k == 0 || k == o->nd)) return snprintf(why, n, "sum: some axes, not all"), false;
  }
  if (o->op == OP_CONV || o->op == OP_DWCONV) {
    const int64_t *d = o->d, k = d[o->op == OP_CONV ? 5 : 4], s = d[o->op == OP_CONV ? 6 : 5], p = d[o->op == OP_CONV ? 7 : 6];
    if (!d[0] || !d[1] || !d[2] || !d[3] || !k || !s || d[2] + 2 * p < k || d[3] + 2 * p < k || (o->op == OP_CONV && !d[4]))
      return snprintf(why, n, "%s: sizes, the kernel and the stride at least 1, the padded image no smaller than the kernel", name), false;
  }
  return true;
}

/* The line as the table and the CSV show it. */
static void op_text(const Op *o, bool with_op, char *buf, size_t n) {
  int at = with_op ? snprintf(buf, n, "%s%s%s", line_op_name[o->op], o->spec[0] ? " " : "", o->spec) : 0;
  for (int i = 0; i < o->nd && at < (int)n; i++) at += snprintf(buf + at, n - (size_t)at, "%s%lld", at ? " " : "", (long long)o->d[i]);
}

/* A convolution's output height and width. */
static int64_t conv_out(const Op *o, int axis) {
  bool dw = o->op == OP_DWCONV;
  int64_t k = o->d[dw ? 4 : 5], s = o->d[dw ? 5 : 6], p = o->d[dw ? 6 : 7];
  return (o->d[axis] + 2 * p - k) / s + 1;
}

/* The line's inputs, in the order every contender makes them from one seed. */
static int op_inputs(const Op *o, int rank[4], int64_t shape[4][MAX_ND]) {
  const int64_t *d = o->d;
#define IN(i, ...) do { int64_t s_[] = {__VA_ARGS__}; rank[i] = (int)(sizeof s_ / sizeof *s_); memcpy(shape[i], s_, sizeof s_); } while (0)
  switch (o->op) {
  case OP_MATMUL: case OP_MATMUL_BF16: IN(0, d[0], d[2]); IN(1, d[2], d[1]); return 2;
  case OP_BMM: IN(0, d[0], d[1], d[3]); IN(1, d[0], d[3], d[2]); return 2;
  case OP_LAYERNORM: IN(0, d[0], d[1]); IN(1, d[1]); IN(2, d[1]); return 3;
  case OP_RMSNORM: IN(0, d[0], d[1]); IN(1, d[1]); return 2;
  case OP_CHAIN: IN(0, d[0], d[1]); IN(1, d[1]); IN(2, d[0], d[1]); return 3;
  case OP_PERMUTE: case OP_SUM: rank[0] = o->nd; memcpy(shape[0], d, sizeof(int64_t) * (size_t)o->nd); return 1;
  case OP_CONV: IN(0, d[0], d[1], d[2], d[3]); IN(1, d[4], d[1], d[5], d[5]); return 2;
  case OP_DWCONV: IN(0, d[0], d[1], d[2], d[3]); IN(1, d[1], d[4], d[4]); return 2;
  case OP_ATTENTION: case OP_CAUSAL: IN(0, d[0], d[1], d[3]); IN(1, d[0], d[2], d[3]); IN(2, d[0], d[2], d[3]); return 3;
  default: IN(0, d[0], d[1]); return 1;
  }
#undef IN
}

/* What a line does: bytes read and written once, FLOPs (0 for data movement), elements of its
 * result, and the terms that each element of the result adds up (for the check's tolerance). */
typedef struct { double bytes, flops, terms; int64_t nout; } Work;
static Work op_work(const Op *o) {
  int rank[4];
  int64_t shape[4][MAX_ND];
  int nin = op_inputs(o, rank, shape);
  Work w = {0, 0, 1, 0};
  const int64_t *d = o->d;
  for (int i = 0; i < nin; i++) {
    double n = 1;
    for (int k = 0; k < rank[i]; k++) n *= (double)shape[i][k];
    w.bytes += 4 * n;
  }
  switch (o->op) {
  case OP_MATMUL: case OP_MATMUL_BF16: w.nout = d[0] * d[1]; w.flops = 2.0 * (double)w.nout * (double)d[2]; w.terms = (double)d[2]; break;
  case OP_BMM: w.nout = d[0] * d[1] * d[2]; w.flops = 2.0 * (double)w.nout * (double)d[3]; w.terms = (double)d[3]; break;
  case OP_SUM: {
    w.nout = 1;
    for (int k = 0; k < o->nd; k++)
      if (!strchr(o->spec, '0' + k)) w.nout *= d[k];
    w.terms = w.nout ? w.bytes / 4 / (double)w.nout : 1;
    break;
  }
  case OP_CONV: case OP_DWCONV: {
    bool dw = o->op == OP_DWCONV;
    int64_t f = dw ? d[1] : d[4], k = dw ? d[4] : d[5];
    w.nout = d[0] * f * conv_out(o, 2) * conv_out(o, 3);
    w.terms = (double)(k * k * (dw ? 1 : d[1]));
    w.flops = 2.0 * (double)w.nout * w.terms;
    break;
  }
  case OP_ATTENTION: case OP_CAUSAL: {
    /* 4 D + 5 FLOPs a (query, key) pair that counts: all S x T of them, or causal's t <= s
     * (nn's mask, aligned at the top left): min(s + 1, T) keys for query s, the masked
     * scores needing no products nor exponentials */
    double S = (double)d[1], T = (double)d[2], pairs = S * T;
    if (o->op == OP_CAUSAL) pairs = S <= T ? S * (S + 1) / 2 : T * (T + 1) / 2 + (S - T) * T;
    w.nout = d[0] * d[1] * d[3];
    w.flops = (double)d[0] * pairs * (4.0 * (double)d[3] + 5.0);
    w.terms = (double)(d[2] + d[3]);
    break;
  }
  default:                              /* the same shape out as its first input in */
    w.nout = 1;
    for (int k = 0; k < rank[0]; k++) w.nout *= shape[0][k];
    if (o->op == OP_SOFTMAX || o->op == OP_LAYERNORM || o->op == OP_RMSNORM) w.terms = (double)d[1];
  }
  w.bytes += 4 * (double)w.nout;
  return w;
}

/* ---- the contenders ---- */

enum { DYN, ONEDNN, OPENBLAS, CLOOP, COPY, TORCH, NWHO };
static const char *const who_name[NWHO] = {"dyn", "onednn", "openblas", "c", "copy", "torch"};
static const char *const who_title[NWHO] = {"dyn", "oneDNN", "OpenBLAS", "C loop", "copy", "PyTorch"};

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

/* oneDNN's convolution primitive on NCHW tensors, as a caller holding NCHW data gets it: in
 * the layouts oneDNN chooses for the shape (format "any"), the input reordered into its
 * layout and the output back on every call, the weights reordered once (constants). */
typedef struct {
  dnnl_primitive_t conv, to_src, to_dst;        /* the reorders: NULL when NCHW is its choice */
  dnnl_memory_t src, wei, dst, src_i, wei_i, dst_i;
} Conv;
static dnnl_engine_t dnnl_eng;
static dnnl_stream_t dnnl_st;

#define DNNL_OK(x) do { dnnl_status_t st_ = (x); if (st_ != dnnl_success) die("oneDNN: %s: status %d", #x, (int)st_); } while (0)

static void dnnl_init(void) {
  if (dnnl_eng) return;
  DNNL_OK(dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0));
  DNNL_OK(dnnl_stream_create(&dnnl_st, dnnl_eng, dnnl_stream_default_flags));
}

static void dnnl_run(dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args) {
  DNNL_OK(dnnl_primitive_execute(p, dnnl_st, n, args));
}

/* oneDNN's matmul primitive on bf16 A, B and C, row-major, summing in f32 as dyn does; the
 * result is widened into `out` only for the check (wide set), not in the timed calls. */
typedef struct {
  dnnl_primitive_t p;
  dnnl_memory_t mem[3];                 /* A, B, C */
  uint16_t *ab, *bb, *cb;
  float *out;
  int64_t nout;
  bool wide;
} MatBf;

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static void run_dnnl_bf16(void *p) {
  MatBf *q = p;
  DNNL_OK(dnnl_primitive_execute(q->p, dnnl_st, 3, (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, q->mem[0]},
          {DNNL_ARG_WEIGHTS, q->mem[1]}, {DNNL_ARG_DST, q->mem[2]}}));
  DNNL_OK(dnnl_stream_wait(dnnl_st));
  if (q->wide)
    for (int64_t i = 0; i < q->nout; i++) {
      uint32_t u = (uint32_t)q->cb[i] << 16;
      memcpy(&q->out[i], &u, 4);
    }
}

static void matbf_prepare(MatBf *q, int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *out) {
  dnnl_init();
  q->ab = malloc(2 * (size_t)(m * k) + 64);
  q->bb = malloc(2 * (size_t)(k * n) + 64);
  q->cb = malloc(2 * (size_t)(m * n) + 64);
  if (!q->ab || !q->bb || !q->cb) die("out of memory");
  for (int64_t i = 0; i < m * k; i++) q->ab[i] = to_bf16(a[i]);
  for (int64_t i = 0; i < k * n; i++) q->bb[i] = to_bf16(b[i]);
  dnnl_memory_desc_t ma, mb, mc;
  DNNL_OK(dnnl_memory_desc_init_by_tag(&ma, 2, (dnnl_dims_t){m, k}, dnnl_bf16, dnnl_ab));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&mb, 2, (dnnl_dims_t){k, n}, dnnl_bf16, dnnl_ab));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&mc, 2, (dnnl_dims_t){m, n}, dnnl_bf16, dnnl_ab));
  dnnl_matmul_desc_t md;
  DNNL_OK(dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc));
  dnnl_primitive_desc_t pd;
  DNNL_OK(dnnl_primitive_desc_create(&pd, &md, NULL, dnnl_eng, NULL));
  DNNL_OK(dnnl_primitive_create(&q->p, pd));
  DNNL_OK(dnnl_primitive_desc_destroy(pd));
  DNNL_OK(dnnl_memory_create(&q->mem[0], &ma, dnnl_eng, q->ab));
  DNNL_OK(dnnl_memory_create(&q->mem[1], &mb, dnnl_eng, q->bb));
  DNNL_OK(dnnl_memory_create(&q->mem[2], &mc, dnnl_eng, q->cb));
  q->out = out;
  q->nout = m * n;
}

static void matbf_free(MatBf *q) {
  dnnl_primitive_destroy(q->p);
  for (int i = 0; i < 3; i++) dnnl_memory_destroy(q->mem[i]);
  free(q->ab), free(q->bb), free(q->cb);
}

static void run_dnnl_conv(void *p) {
  Conv *c = p;
  if (c->to_src) dnnl_run(c->to_src, 2, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, c->src}, {DNNL_ARG_TO, c->src_i}});
  dnnl_run(c->conv, 3, (dnnl_exec_arg_t[]){{DNNL_ARG_SRC, c->src_i}, {DNNL_ARG_WEIGHTS, c->wei_i}, {DNNL_ARG_DST, c->dst_i}});
  if (c->to_dst) dnnl_run(c->to_dst, 2, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, c->dst_i}, {DNNL_ARG_TO, c->dst}});
  DNNL_OK(dnnl_stream_wait(dnnl_st));
}

/* The primitive's memory for the caller's user: user itself when the layouts agree, else new
 * memory and the reorder between them (into it when in, out of it otherwise). */
static dnnl_memory_t conv_mem(const dnnl_memory_desc_t *want, dnnl_memory_t user, bool in, dnnl_primitive_t *reorder) {
  const dnnl_memory_desc_t *have;
  DNNL_OK(dnnl_memory_get_memory_desc(user, &have));
  *reorder = NULL;
  if (dnnl_memory_desc_equal(want, have)) return user;
  dnnl_memory_t m;
  dnnl_primitive_desc_t pd;
  DNNL_OK(dnnl_memory_create(&m, want, dnnl_eng, DNNL_MEMORY_ALLOCATE));
  DNNL_OK(dnnl_reorder_primitive_desc_create(&pd, in ? have : want, dnnl_eng, in ? want : have, dnnl_eng, NULL));
  DNNL_OK(dnnl_primitive_create(reorder, pd));
  DNNL_OK(dnnl_primitive_desc_destroy(pd));
  return m;
}

static void conv_prepare(Conv *c, const Op *o, float *x, float *w, float *y) {
  bool dw = o->op == OP_DWCONV;
  const int64_t *d = o->d;
  int64_t f = dw ? d[1] : d[4], k = dw ? d[4] : d[5], s = dw ? d[5] : d[6], p = dw ? d[6] : d[7];
  dnnl_init();
  dnnl_dims_t xs = {d[0], d[1], d[2], d[3]}, ys = {d[0], f, conv_out(o, 2), conv_out(o, 3)}, ws = {f, d[1], k, k},
              gws = {d[1], 1, 1, k, k}, strides = {s, s}, pad = {p, p};
  dnnl_memory_desc_t xu, wu, yu, xa, wa, ya;
  DNNL_OK(dnnl_memory_desc_init_by_tag(&xu, 4, xs, dnnl_f32, dnnl_nchw));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&yu, 4, ys, dnnl_f32, dnnl_nchw));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&wu, dw ? 5 : 4, dw ? gws : ws, dnnl_f32, dw ? dnnl_goihw : dnnl_oihw));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&xa, 4, xs, dnnl_f32, dnnl_format_tag_any));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&ya, 4, ys, dnnl_f32, dnnl_format_tag_any));
  DNNL_OK(dnnl_memory_desc_init_by_tag(&wa, dw ? 5 : 4, dw ? gws : ws, dnnl_f32, dnnl_format_tag_any));
  dnnl_convolution_desc_t cd;
  DNNL_OK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &xa, &wa, NULL, &ya,
                                             strides, pad, pad));
  dnnl_primitive_desc_t pd;
  DNNL_OK(dnnl_primitive_desc_create(&pd, &cd, NULL, dnnl_eng, NULL));
  DNNL_OK(dnnl_primitive_create(&c->conv, pd));
  DNNL_OK(dnnl_memory_create(&c->src, &xu, dnnl_eng, x));
  DNNL_OK(dnnl_memory_create(&c->wei, &wu, dnnl_eng, w));
  DNNL_OK(dnnl_memory_create(&c->dst, &yu, dnnl_eng, y));
  c->src_i = conv_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), c->src, true, &c->to_src);
  c->dst_i = conv_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), c->dst, false, &c->to_dst);
  dnnl_primitive_t to_wei;
  c->wei_i = conv_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), c->wei, true, &to_wei);
  if (to_wei) {
    dnnl_run(to_wei, 2, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, c->wei}, {DNNL_ARG_TO, c->wei_i}});
    DNNL_OK(dnnl_stream_wait(dnnl_st));
    dnnl_primitive_destroy(to_wei);
  }
  DNNL_OK(dnnl_primitive_desc_destroy(pd));
}

static void conv_free(Conv *c) {
  dnnl_primitive_t prims[] = {c->conv, c->to_src, c->to_dst};
  for (int i = 0; i < 3; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t mine[] = {c->src, c->wei, c->dst}, theirs[] = {c->src_i, c->wei_i, c->dst_i};
  for (int i = 0; i < 3; i++) {
    if (theirs[i] && theirs[i] != mine[i]) dnnl_memory_destroy(theirs[i]);
    if (mine[i]) dnnl_memory_destroy(mine[i]);
  }
  memset(c, 0, sizeof *c);
}

/* oneDNN's other primitives on the line's plain C-order tensors: reorder (a permutation),
 * reduction (sums), eltwise (gelu_tanh, swish), softmax and layer normalisation.  rmsnorm
 * and the chain have none in this version, and oneDNN sits those lines out. */
typedef struct {
  dnnl_primitive_t p;
  int n;
  dnnl_exec_arg_t args[5];
} Prim;

static void run_dnnl_prim(void *p) {
  Prim *q = p;
  dnnl_run(q->p, q->n, q->args);
  DNNL_OK(dnnl_stream_wait(dnnl_st));
}

static void prim_arg(Prim *q, int arg, const dnnl_memory_desc_t *md, void *data) {
  dnnl_memory_t m;
  DNNL_OK(dnnl_memory_create(&m, md, dnnl_eng, data));
  q->args[q->n++] = (dnnl_exec_arg_t){arg, m};
}

/* A plain C-order descriptor of dims[0..rank). */
static dnnl_memory_desc_t plain_md(int rank, const int64_t *dims) {
  static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  dnnl_memory_desc_t md;
  dnnl_dims_t d;
  for (int i = 0; i < rank; i++) d[i] = dims[i];
  DNNL_OK(dnnl_memory_desc_init_by_tag(&md, rank, d, dnnl_f32, tags[rank - 1]));
  return md;
}

/* Make the primitive for o on x (and gamma, beta for layernorm) into y; false when oneDNN
 * has none for o. */
static bool prim_prepare(Prim *q, const Op *o, float *const *in, float *y) {
  int rank[4];
  int64_t shape[4][MAX_ND];
  op_inputs(o, rank, shape);
  dnnl_init();
  dnnl_memory_desc_t src = plain_md(rank[0], shape[0]), dst = src;
  dnnl_primitive_desc_t pd = NULL;
  union { dnnl_eltwise_desc_t e; dnnl_softmax_desc_t s; dnnl_layer_normalization_desc_t l; dnnl_reduction_desc_t r; } d;
  if (o->op == OP_TRANSPOSE || o->op == OP_PERMUTE) {
    /* the output, plain in its own axes, seen in the input's: axis k of the output is the
     * input's axis spec[k] */
    int perm[MAX_ND];
    int64_t od[MAX_ND];
    const char *spec = o->op == OP_TRANSPOSE ? "10" : o->spec;
    for (int k = 0; k < rank[0]; k++) {
      perm[k] = spec[k] - '0';
      od[k] = shape[0][perm[k]];
    }
    dnnl_memory_desc_t out = plain_md(rank[0], od);
    DNNL_OK(dnnl_memory_desc_permute_axes(&dst, &out, perm));
    DNNL_OK(dnnl_reorder_primitive_desc_create(&pd, &src, dnnl_eng, &dst, dnnl_eng, NULL));
  } else if (o->op == OP_SUM) {
    int64_t od[MAX_ND];
    for (int k = 0; k < rank[0]; k++) od[k] = strchr(o->spec, '0' + k) ? 1 : shape[0][k];
    dst = plain_md(rank[0], od);
    DNNL_OK(dnnl_reduction_desc_init(&d.r, dnnl_reduction_sum, &src, &dst, 0, 0));
  } else if (o->op == OP_GELU || o->op == OP_SILU) {
    DNNL_OK(dnnl_eltwise_forward_desc_init(&d.e, dnnl_forward_inference, o->op == OP_GELU ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_swish,
                                           &src, 1.0f, 0.0f));
  } else if (o->op == OP_SOFTMAX) {
    DNNL_OK(dnnl_softmax_forward_desc_init(&d.s, dnnl_forward_inference, &src, 1));
  } else if (o->op == OP_LAYERNORM) {
    DNNL_OK(dnnl_layer_normalization_forward_desc_init(&d.l, dnnl_forward_inference, &src, NULL, 1e-5f,
                                                       dnnl_use_scale | dnnl_use_shift));
  } else {
    return false;
  }
  if (!pd) DNNL_OK(dnnl_primitive_desc_create(&pd, &d, NULL, dnnl_eng, NULL));
  DNNL_OK(dnnl_primitive_create(&q->p, pd));
  DNNL_OK(dnnl_primitive_desc_destroy(pd));
  bool reorder = o->op == OP_TRANSPOSE || o->op == OP_PERMUTE;
  prim_arg(q, reorder ? DNNL_ARG_FROM : DNNL_ARG_SRC, &src, in[0]);
  prim_arg(q, reorder ? DNNL_ARG_TO : DNNL_ARG_DST, &dst, y);
  if (o->op == OP_LAYERNORM) {
    dnnl_memory_desc_t g = plain_md(1, shape[1]);
    prim_arg(q, DNNL_ARG_SCALE, &g, in[1]);
    prim_arg(q, DNNL_ARG_SHIFT, &g, in[2]);
  }
  return true;
}

static void prim_free(Prim *q) {
  if (q->p) dnnl_primitive_destroy(q->p);
  for (int i = 0; i < q->n; i++) dnnl_memory_destroy(q->args[i].memory);
  memset(q, 0, sizeof *q);
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

/* body(ctx, t, nt) for every t in [0, nt) on nt threads, the caller's among them. */
typedef struct { void (*body)(void *, int, int); void *ctx; int t, nt; } Part;
static void *part_thread(void *p) {
  Part *q = p;
  q->body(q->ctx, q->t, q->nt);
  return NULL;
}
static void parallel(void (*body)(void *, int, int), void *ctx, int nt) {
  pthread_t th[64];
  Part part[64];
  nt = nt < 1 ? 1 : nt > 64 ? 64 : nt;
  for (int i = 0; i < nt; i++) {
    part[i] = (Part){body, ctx, i, nt};
    if (i) pthread_create(&th[i], NULL, part_thread, &part[i]);
  }
  part_thread(&part[0]);
  for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
}

/* Plain C loops, split over the same number of threads by rows of X. */
typedef struct {
  int op;
  int64_t rows, cols;
  const float *x, *g, *b;      /* chain: b is the residual, g the bias */
  float *y;
  int64_t r0, r1;
} Row;

static float gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))); }
static float silu(float x) { return x / (1.0f + expf(-x)); }

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
    } else if (r->op == OP_LAYERNORM) {
      float mu = 0, v = 0;
      for (int64_t j = 0; j < r->cols; j++) mu += x[j];
      mu /= (float)r->cols;
      for (int64_t j = 0; j < r->cols; j++) v += (x[j] - mu) * (x[j] - mu);
      float rs = 1.0f / sqrtf(v / (float)r->cols + 1e-5f);
      for (int64_t j = 0; j < r->cols; j++) y[j] = (x[j] - mu) * rs * r->g[j] + r->b[j];
    } else if (r->op == OP_RMSNORM) {
      float ms = 0;
      for (int64_t j = 0; j < r->cols; j++) ms += x[j] * x[j];
      float rs = 1.0f / sqrtf(ms / (float)r->cols + 1e-5f);
      for (int64_t j = 0; j < r->cols; j++) y[j] = x[j] * rs * r->g[j];
    } else if (r->op == OP_GELU) {
      for (int64_t j = 0; j < r->cols; j++) y[j] = gelu_tanh(x[j]);
    } else if (r->op == OP_SILU) {
      for (int64_t j = 0; j < r->cols; j++) y[j] = silu(x[j]);
    } else {                          /* chain: silu(x + bias) + residual */
      const float *res = r->b + i * r->cols;
      for (int64_t j = 0; j < r->cols; j++) y[j] = silu(x[j] + r->g[j]) + res[j];
    }
  }
}

static void rows_part(void *p, int t, int nt) {
  Row r = *(Row *)p;
  r.r0 = r.rows * t / nt;
  r.r1 = r.rows * (t + 1) / nt;
  rows_c(&r);
}

static void run_rows(void *p) {
  Row *r = p;
  parallel(rows_part, r, r->rows < threads ? (int)(r->rows > 0 ? r->rows : 1) : threads);
}

/* Permutations and sums of any rank in plain C: the output's rows (its last axis) split over
 * the threads for a permutation; for a sum, the input's rows, each thread adding into an
 * output of its own, added up after. */
typedef struct {
  Op o;
  const float *x;
  float *y, *part;
  int64_t nout;
} Nd;

static void permute_part(void *p, int t, int nt) {
  Nd *d = p;
  int r = d->o.nd;
  int64_t is[MAX_ND], os[MAX_ND], st[MAX_ND];
  is[r - 1] = 1;
  for (int k = r - 2; k >= 0; k--) is[k] = is[k + 1] * d->o.d[k + 1];
  for (int k = 0; k < r; k++) {
    int a = d->o.spec[k] - '0';
    os[k] = d->o.d[a];
    st[k] = is[a];
  }
  int64_t inner = os[r - 1], rows = inner ? d->nout / inner : 0;
  for (int64_t row = rows * t / nt; row < rows * (t + 1) / nt; row++) {
    int64_t rem = row, off = 0;
    for (int k = r - 2; k >= 0; k--) {
      off += rem % os[k] * st[k];
      rem /= os[k];
    }
    const float *x = d->x + off;
    float *y = d->y + row * inner;
    for (int64_t j = 0; j < inner; j++) y[j] = x[j * st[r - 1]];
  }
}

static void sum_part(void *p, int t, int nt) {
  Nd *d = p;
  int r = d->o.nd;
  int64_t ostr[MAX_ND], s = 1, numel = 1;
  for (int k = r - 1; k >= 0; k--) {
    bool red = strchr(d->o.spec, '0' + k) != NULL;
    ostr[k] = red ? 0 : s;
    s *= red ? 1 : d->o.d[k];
    numel *= d->o.d[k];
  }
  float *y = d->part + (int64_t)t * d->nout;
  memset(y, 0, sizeof(float) * (size_t)d->nout);
  int64_t inner = d->o.d[r - 1], rows = inner ? numel / inner : 0;
  for (int64_t row = rows * t / nt; row < rows * (t + 1) / nt; row++) {
    int64_t rem = row, off = 0;
    for (int k = r - 2; k >= 0; k--) {
      off += rem % d->o.d[k] * ostr[k];
      rem /= d->o.d[k];
    }
    const float *x = d->x + row * inner;
    if (!ostr[r - 1]) {
      float a = 0;
      for (int64_t j = 0; j < inner; j++) a += x[j];
      y[off] += a;
    } else {
      for (int64_t j = 0; j < inner; j++) y[off + j] += x[j];
    }
  }
}

static void run_nd(void *p) {
  Nd *d = p;
  if (d->o.op == OP_PERMUTE) {
    parallel(permute_part, d, threads);
    return;
  }
  int nt = threads < 64 ? threads : 64;
  parallel(sum_part, d, nt);
  for (int64_t i = 0; i < d->nout; i++) {
    float a = 0;
    for (int t = 0; t < nt; t++) a += d->part[(int64_t)t * d->nout + i];
    d->y[i] = a;
  }
}

/* Streaming bandwidth: a 2 x 256 MB copy over the same threads, for "share of bandwidth". */
#define NCOPY ((int64_t)64 << 20)
typedef struct { float *dst; const float *src; int64_t n; } Copy;
static void copy_part(void *p, int t, int nt) {
  Copy *c = p;
  int64_t lo = c->n * t / nt, hi = c->n * (t + 1) / nt;
  memcpy(c->dst + lo, c->src + lo, (size_t)(hi - lo) * sizeof(float));
}
static void run_copy(void *p) { parallel(copy_part, p, threads); }

/* ---- a worker: one contender's process, answering the bench's commands ----
 * Commands, one a line on standard input; each answer ends with a line "ok [VALUE]" on
 * descriptor 3, after any "csv ROW" lines for the CSV.  Text for the reader goes to
 * standard output, flushed before the answer, while the bench waits.  bench_torch.py
 * answers the same commands for PyTorch.
 *   hello                    ok DESCRIPTION
 *   intro                    the one-off figures (dyn: compile, dispatch, peak; copy: bandwidth)
 *   OP [SPEC] SIZE...        a suite's line (op_parse): prepare its data; ok PREDICTED_SECONDS
 *                            (dyn), ok 0 (others; the copy copies whatever the line), ok -1:
 *                            the contender has nothing to run it with and sits it out
 *   peak SECONDS             dyn: ok GFLOP/s of the f32 micro-kernel, measured now
 *   time BUDGET              ok S O W: median seconds of the line's call; CPU seconds other
 *                            processes ran meanwhile (-1: unknown); the seconds it all took
 *   dump FILE                run the line's call once more and write its result to FILE, as
 *                            raw f32 in C order; ok COUNT (of elements)
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
  fprintf(answers, "csv %s,%s,%.6f,,,,,,,,,,,,,,\n", suite, what, v);
}

typedef struct {
  void (*fn)(void *);
  void *ctx;
  DynCall dc;
  Gemm gm;
  Row rw;
  Nd nd;
#ifdef HAVE_DNNL
  Conv cv;
  Prim pr;
  MatBf mb;
#endif
  Tensor *t[4];
  float *f[5];
  float *out;                  /* the result of the others' call, of nout elements */
  int64_t nout;
  char fname[64];              /* dyn's function, when written for the line */
} Line;

static Line cur;
static Copy copy;
static GemmKernels *peak_g;             /* dyn: the f32 micro-kernels, for the peak */
static Pool *peak_pool;

static void line_free(void) {
#ifdef HAVE_DNNL
  if (cur.cv.conv) conv_free(&cur.cv);
  if (cur.pr.p) prim_free(&cur.pr);
  if (cur.mb.p) matbf_free(&cur.mb);
#endif
  for (int i = 0; i < 4; i++) tensor_release(cur.t[i]);
  for (int i = 0; i < 5; i++) free(cur.f[i]);
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

/* The functions of the bench's own that the stdlib lacks, as a user would write them. */
static const char bench_fns[] =
    "fn bmm(A: f32[B, M, K], X: f32[B, K, N]) -> f32[B, M, N] { C[b, i, j] = sum[k] A[b, i, k] * X[b, k, j]; return C }\n"
    "fn matmul_bf16(A: bf16[M, K], B: bf16[K, N]) -> bf16[M, N] { C[i, j] = sum[k] A[i, k] * B[k, j]; return C }\n"
    "# a user's chain: a bias, SiLU and a residual\n"
    "fn bias_silu_residual(X: f32[B, N], bias: f32[N], R: f32[B, N]) -> f32[B, N] {\n"
    "  Z[b, n] = X[b, n] + bias[n]\n"
    "  Y[b, n] = Z[b, n] * sigmoid(Z[b, n]) + R[b, n]\n"
    "  return Y\n"
    "}\n"
    "# depthwise convolution, NCHW, one K x K filter a channel, as nn's conv2d is written\n"
    "fn dwconv2d(X: f32[N, C, H, W], Wt: f32[C, KH, KW], S: size, P: size) -> f32[N, C, (H + 2*P - KH) / S + 1, (W + 2*P - KW) / S + 1] where S >= 1, H + 2*P >= KH, W + 2*P >= KW {\n"
    "  Xp[n, c, y, x]: f32[N, C, H + 2*P, W + 2*P] = where(y >= P and y < H + P and x >= P and x < W + P, X[n, c, y - P, x - P], 0.0)\n"
    "  Y[n, c, h, w] = sum[i, j] Xp[n, c, h * S + i, w * S + j] * Wt[c, i, j]\n"
    "  return Y\n"
    "}\n";

/* dyn's function for a line: the stdlib's, the bench's own, or for a permutation or a sum
 * one written for its axes (permute_4_0213: Y[i0, i2, i1, i3] = X[i0, i1, i2, i3]),
 * defined the first time a line needs it. */
static const char *dyn_fn(Session *s, const Op *o, char *name, size_t n) {
  static const char *const fixed[NOPS] = {
      [OP_MATMUL] = "matmul", [OP_BMM] = "bmm", [OP_SOFTMAX] = "softmax", [OP_LAYERNORM] = "layernorm",
      [OP_RMSNORM] = "rmsnorm", [OP_GELU] = "gelu", [OP_SILU] = "silu", [OP_CHAIN] = "bias_silu_residual",
      [OP_TRANSPOSE] = "transpose", [OP_CONV] = "conv2d", [OP_DWCONV] = "dwconv2d", [OP_ATTENTION] = "attention",
      [OP_CAUSAL] = "causal_attention", [OP_MATMUL_BF16] = "matmul_bf16"};
  if (fixed[o->op]) return fixed[o->op];
  bool perm = o->op == OP_PERMUTE;
  if (perm && !strcmp(o->spec, "10")) return "transpose";       /* as a user writes it */
  snprintf(name, n, "%s_%d_%s", line_op_name[o->op], o->nd, o->spec);
  if (session_compiles(s, name) >= 0) return name;
  Buf b = {0};
  int r = o->nd;
  buf_printf(&b, "fn %s(X: f32[", name);
  for (int i = 0; i < r; i++) buf_printf(&b, "%sD%d", i ? ", " : "", i);
  buf_printf(&b, "]) -> f32[");
  for (int i = 0, k = 0; i < r; i++)
    if (perm) buf_printf(&b, "%sD%c", i ? ", " : "", o->spec[i]);
    else if (!strchr(o->spec, '0' + i)) buf_printf(&b, "%sD%d", k++ ? ", " : "", i);
  buf_printf(&b, "] {\n  Y[");
  for (int i = 0, k = 0; i < r; i++)
    if (perm) buf_printf(&b, "%si%c", i ? ", " : "", o->spec[i]);
    else if (!strchr(o->spec, '0' + i)) buf_printf(&b, "%si%d", k++ ? ", " : "", i);
  buf_printf(&b, "] = ");
  if (!perm) {
    buf_printf(&b, "sum[");
    for (int i = 0; o->spec[i]; i++) buf_printf(&b, "%si%c", i ? ", " : "", o->spec[i]);
    buf_printf(&b, "] ");
  }
  buf_printf(&b, "X[");
  for (int i = 0; i < r; i++) buf_printf(&b, "%si%d", i ? ", " : "", i);
  buf_printf(&b, "]\n  return Y\n}\n");
  if (session_run(s, b.s, "bench") != RUN_OK) die("cannot define %s:\n%s", name, b.s);
  buf_free(&b);
  return name;
}

static Tensor *size_arg(int64_t v) {
  char err[256];
  Tensor *t = tensor_new(DYN_I64, 0, NULL, err, sizeof err);
  if (!t) die("%s", err);
  tensor_set_i64(t, 0, v);
  return t;
}

/* Prepare a line's data for contender who; for dyn, the model's predicted seconds; -1 when
 * who has nothing to run it with (oneDNN's rmsnorm): who sits the line out. */
static double line_prepare(int who, Session *s, const Op *o) {
  unsigned seed = 1;
  int rank[4];
  int64_t shape[4][MAX_ND];
  line_free();
  int nin = op_inputs(o, rank, shape);
  Work w = op_work(o);
  if (who == DYN) {
    cur.dc = (DynCall){s, dyn_fn(s, o, cur.fname, sizeof cur.fname), {0}, nin};
    for (int i = 0; i < nin; i++) cur.dc.args[i] = cur.t[i] = randt(rank[i], shape[i], &seed);
    if (o->op == OP_MATMUL_BF16)        /* the same data, rounded to bf16 as oneDNN's is */
      for (int i = 0; i < nin; i++) {
        char e[256];
        Tensor *h = tensor_new(DYN_BF16, rank[i], shape[i], e, sizeof e);
        if (!h) die("%s", e);
        for (int64_t j = 0; j < tensor_numel(h); j++) tensor_set_f64(h, j, ((float *)tensor_data(cur.t[i]))[j]);
        tensor_release(cur.t[i]);
        cur.dc.args[i] = cur.t[i] = h;
      }
    if (o->op == OP_CONV || o->op == OP_DWCONV) {            /* the stride and the padding */
      int at = o->op == OP_CONV ? 6 : 5;
      cur.dc.args[2] = cur.t[2] = size_arg(o->d[at]);
      cur.dc.args[3] = cur.t[3] = size_arg(o->d[at + 1]);
      cur.dc.nargs = 4;
    }
    cur.fn = run_dyn;
    cur.ctx = &cur.dc;
    run_dyn(&cur.dc);                   /* compiles on the first line: the prediction is then the schedule's */
    return session_predict(s, cur.dc.fn, cur.dc.args, cur.dc.nargs);
  }
  if (who == COPY) {
    copy_alloc();
    cur.fn = run_copy;
    cur.ctx = &copy;
    return 0;
  }
  for (int i = 0; i < nin; i++) {
    int64_t n = 1;
    for (int k = 0; k < rank[i]; k++) n *= shape[i][k];
    cur.f[i] = randf(n, &seed);
  }
  cur.nout = w.nout;
  cur.out = cur.f[4] = randf(w.nout, &seed);
  if (o->op == OP_MATMUL || o->op == OP_BMM) {
    bool batched = o->op == OP_BMM;
    const int64_t *d = o->d;
    cur.gm = (Gemm){batched ? d[0] : 1, d[batched], d[batched + 1], d[batched + 2], cur.f[0], cur.f[1], cur.out};
    cur.ctx = &cur.gm;
#ifdef HAVE_DNNL
    if (who == ONEDNN) cur.fn = run_dnnl;
#endif
#ifdef HAVE_OPENBLAS
    if (who == OPENBLAS) cur.fn = run_openblas;
#endif
  } else if (o->op == OP_MATMUL_BF16) {
#ifdef HAVE_DNNL
    if (who == ONEDNN) {
      matbf_prepare(&cur.mb, o->d[0], o->d[1], o->d[2], cur.f[0], cur.f[1], cur.out);
      cur.fn = run_dnnl_bf16;
      cur.ctx = &cur.mb;
    }
#endif
  } else if (o->op == OP_CONV || o->op == OP_DWCONV) {
#ifdef HAVE_DNNL
    if (who == ONEDNN) {
      conv_prepare(&cur.cv, o, cur.f[0], cur.f[1], cur.out);
      cur.fn = run_dnnl_conv;
      cur.ctx = &cur.cv;
    }
#endif
  } else if (who == ONEDNN) {
#ifdef HAVE_DNNL
    if (!prim_prepare(&cur.pr, o, cur.f, cur.out)) return -1;
    cur.fn = run_dnnl_prim;
    cur.ctx = &cur.pr;
#endif
  } else if (who == CLOOP && (o->op == OP_PERMUTE || o->op == OP_SUM) && strcmp(o->spec, "10")) {
    if (o->op == OP_SUM) cur.f[3] = malloc(sizeof(float) * (size_t)(w.nout * (threads < 64 ? threads : 64) + 1));
    cur.nd = (Nd){*o, cur.f[0], cur.out, cur.f[3], w.nout};
    cur.fn = run_nd;
    cur.ctx = &cur.nd;
  } else if (who == CLOOP && o->op != OP_ATTENTION && o->op != OP_CAUSAL) {
    int op = o->op == OP_PERMUTE ? OP_TRANSPOSE : o->op;
    cur.rw = (Row){op, o->d[0], o->d[1], cur.f[0], cur.f[1], cur.f[2], cur.out, 0, 0};
    cur.fn = run_rows;
    cur.ctx = &cur.rw;
  }
  if (!cur.fn) die("%s cannot run %s", who_name[who], line_op_name[o->op]);
  return 0;
}

/* Write the result of one more call to path; its count of elements. */
static int64_t line_dump(int who, const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) die("%s: %s", path, strerror(errno));
  int64_t n = 0;
  if (who == DYN) {
    Tensor *out = NULL, *c;
    Buf err = {0};
    char e[256];
    if (!session_call(cur.dc.s, cur.dc.fn, cur.dc.args, cur.dc.nargs, &out, 1, &err)) die("%s: %s", cur.dc.fn, err.s);
    if (!(c = tensor_contiguous_copy(out, e, sizeof e))) die("%s", e);
    n = tensor_numel(c);
    if (c->elem == DYN_BF16) {          /* widened, exactly, for the check */
      Tensor *w = tensor_new(DYN_F32, c->rank, c->shape, e, sizeof e);
      if (!w) die("%s", e);
      for (int64_t i = 0; i < n; i++) tensor_set_f64(w, i, tensor_get_f64(c, i));
      tensor_release(c);
      c = w;
    }
    if (c->elem != DYN_F32) die("%s returned %s, not f32", cur.dc.fn, elem_name(c->elem));
    if (n && fwrite(tensor_data(c), sizeof(float), (size_t)n, f) != (size_t)n) die("%s: %s", path, strerror(errno));
    tensor_release(c);
    tensor_release(out);
    buf_free(&err);
  } else {
    if (!cur.out) die("%s computes no result to check", who_name[who]);
#ifdef HAVE_DNNL
    cur.mb.wide = true;
#endif
    cur.fn(cur.ctx);
    n = cur.nout;
    if (n && fwrite(cur.out, sizeof(float), (size_t)n, f) != (size_t)n) die("%s: %s", path, strerror(errno));
  }
  if (fclose(f)) die("%s: %s", path, strerror(errno));
  return n;
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
    /* the stdlib's bmm, else the one written here; then the bench's own functions */
    const char *own = session_compiles(s, "bmm") < 0 ? bench_fns : strchr(bench_fns, '\n') + 1;
    if (session_run(s, own, "bench") != RUN_OK) die("the bench's own functions do not compile");
  }
#ifdef HAVE_OPENBLAS
  if (who == OPENBLAS) openblas_set_num_threads(threads);
#endif
  char cmd[512], why[256], path[4096];
  double x;
  Op o;
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
    } else if (sscanf(cmd, "dump %4095s", path) == 1) {
      if (!cur.fn) die("dump before a line");
      answer("%lld", (long long)line_dump(who, path));
    } else if (!strncmp(cmd, "free", 4)) {
      line_free();
      answer("");
    } else if (op_parse(cmd, &o, why, sizeof why)) {
      answer("%.9g", line_prepare(who, s, &o));
    } else {
      die("%s: %s: %s", who_name[who], why, cmd);
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

/* The PyTorch worker: its script, and the Python that runs it. */
static const char *torch_script, *torch_python;

/* Start contender w's process (PyTorch's: torch_python running torch_script), then stop it
 * until its first turn. */
static void worker_start(int w, const char *self) {
  int cmd[2], ans[2];
  if (pipe2(cmd, O_CLOEXEC) || pipe2(ans, O_CLOEXEC)) die("pipe: %s", strerror(errno));
  char th[16], bu[32];
  snprintf(th, sizeof th, "%d", threads);
  snprintf(bu, sizeof bu, "%.6g", budget);
  /* the same threads for every library; OpenBLAS starts its threads when it is loaded,
   * which it is in every worker: only its own worker lets it have more than one */
  setenv("OMP_NUM_THREADS", th, 1);
  setenv("OPENBLAS_NUM_THREADS", w == OPENBLAS || w == TORCH ? th : "1", 1);
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
    if (w == TORCH) execlp(torch_python, torch_python, torch_script, "--threads", th, "--budget", bu, (char *)NULL);
    else execl(self, self, "--worker", who_name[w], "--threads", th, "--budget", bu, (char *)NULL);
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
  double check, tol;           /* the check's worst error against a peer; negative: not checked */
  int check_who;               /* the peer of that error */
} Result;

/* Where the workers write their results for the check: a directory of the bench's own. */
static char check_dir[64];
static int nchecked, nwrong;

/* At exit, an error's included: the directory and any result left in it. */
static void check_dir_remove(void) {
  char path[128];
  if (!check_dir[0]) return;
  for (int w = 0; w < NWHO; w++) {
    snprintf(path, sizeof path, "%s/%s.f32", check_dir, who_name[w]);
    unlink(path);
  }
  rmdir(check_dir);
}

static float *read_f32(const char *path, int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  FILE *f = fopen(path, "rb");
  if (!p || !f) die("%s: %s", path, p ? strerror(errno) : "out of memory");
  if (n && fread(p, sizeof(float), (size_t)n, f) != (size_t)n) die("%s: short", path);
  fclose(f);
  unlink(path);
  return p;
}

/* Max |ours - theirs| over the larger of max |theirs| and floor: an error relative to the
 * result's scale, or to that of the terms it adds up where they cancel (the column sums of
 * 4096 x 4096 of the bench's data are under 0.5, sums of terms up to 0.5 whose partial sums
 * reach 30, and a sum in f32 in another order differs by 0.04).  Infinite when a NaN or an
 * infinity stands on one side only. */
static double rel_err(const float *ours, const float *theirs, int64_t n, double floor) {
  double worst = 0, scale = floor;
  for (int64_t i = 0; i < n; i++) {
    double a = ours[i], b = theirs[i];
    if (a == b || (isnan(a) && isnan(b))) continue;
    if (!isfinite(a) || !isfinite(b)) return INFINITY;
    worst = fabs(a - b) > worst ? fabs(a - b) : worst;
  }
  for (int64_t i = 0; i < n; i++)
    if (isfinite(theirs[i]) && fabs(theirs[i]) > scale) scale = fabs(theirs[i]);
  return worst ? worst / (scale > 0 ? scale : 1e-30) : 0;
}

/* Every peer's result against dyn's, once: a fast wrong kernel must not look good.  The
 * data are in [-0.5, 0.5), so a sum of T terms reaches about sqrt(T) / 2, the floor of the
 * scale; f32 rounding in another order grows with T (about T times its epsilon relative to
 * that scale, where the sum runs in sequence), and so does the tolerance.  A wrong kernel's
 * error is of the order of the result itself. */
static void check_line(const int *who, int n, double terms, double floor, Result *res) {
  res->check = -1;
  res->tol = (floor > 0 ? floor : 8e-5) + 5e-7 * terms;
  if (!check_dir[0] || !n || who[0] != DYN) return;
  char path[128];
  snprintf(path, sizeof path, "%s/dyn.f32", check_dir);
  long long nours = atoll(ask(DYN, "dump %s", path));
  float *ours = read_f32(path, nours);
  for (int i = 1; i < n; i++) {
    if (who[i] == COPY) continue;
    snprintf(path, sizeof path, "%s/%s.f32", check_dir, who_name[who[i]]);
    long long ntheirs = atoll(ask(who[i], "dump %s", path));
    float *theirs = read_f32(path, ntheirs);
    double e = ntheirs != nours ? INFINITY : rel_err(ours, theirs, nours, sqrt(terms) / 2);
    free(theirs);
    if (e > res->check) {
      res->check = e;
      res->check_who = who[i];
    }
  }
  free(ours);
}

/* Run one line (the prepare command cmd) on the contenders who[0..n) that were started. */
static void measure(const char *cmd, const int *who0, int n0, bool large, double terms, double floor, double line_budget,
                    Result *res) {
  int who[NWHO], n = 0;
  for (int i = 0; i < n0; i++)
    if (wk[who0[i]].pid) who[n++] = who0[i];
  memset(res, 0, sizeof *res);
  for (int i = 0; i < n; i++) {
    double p = atof(ask(who[i], "%s", cmd));
    if (who[i] == DYN) res->pred = p;
    else if (p < 0) {                   /* it sits the line out */
      memmove(&who[i], &who[i + 1], sizeof *who * (size_t)(n - i - 1));
      n--, i--;
    }
  }
  if (large && wk[DYN].pid) res->peak = atof(ask(DYN, "peak 0.2"));
  double t[NWHO][MAX_ROUNDS], other[NWHO] = {0}, wall[NWHO] = {0};
  int R = rounds;
  for (int r = 0; r < R; r++)
    for (int i = 0; i < n; i++) {
      double o = -1, w = 0;
      if (sscanf(ask(who[i], "time %.6g", line_budget / R), "%lf %lf %lf", &t[i][r], &o, &w) != 3) die("bad answer to time");
      other[i] = o < 0 || other[i] < 0 ? -1 : other[i] + o;
      wall[i] += w;
    }
  check_line(who, n, terms, floor, res);
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

/* Geometric means of up to three ratio columns: [0] over every line, [1] over the unflagged. */
enum { MAX_PEERS = 3 };
typedef struct { double logsum[2][MAX_PEERS]; int n[2][MAX_PEERS]; } Geo;
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

/* A line whose rounds disagree, or during which other processes took a share of the cores. */
static bool flagged(const Result *r) { return r->spread > FLAG_SPREAD || r->others > FLAG_OTHERS; }

/* The model's record: every line's error, each suite's mean absolute error. */
typedef struct { char what[272]; double err; bool flag; } ModelLine;
static ModelLine mlines[1024];
static int nmlines;
typedef struct { char suite[128]; double sum, sum_calm; int n, over, n_calm; } SuiteErr;
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
  if (!flagged(r)) e->sum_calm += fabs(err), e->n_calm++;
  if (nmlines < 1024) {
    snprintf(mlines[nmlines].what, sizeof mlines[nmlines].what, "%s %s", e->suite, shape);
    mlines[nmlines].flag = flagged(r);
    mlines[nmlines++].err = err;
  }
  snprintf(buf, n, "%+.0f%%", 100 * err);
  return buf;
}

/* The model's mean error over a suite's lines, and over those not flagged: a line measured
 * while the host's speed moved (its rounds disagree) holds the model to a time that was not
 * the machine's alone. */
static void suite_end(const SuiteErr *e) {
  if (!e->n) return;
  printf("model: mean |predicted / measured - 1| %.0f%% over %d lines, %d beyond %.0f%%", 100 * e->sum / e->n, e->n,
         e->over, 100 * MODEL_GOAL);
  if (e->n_calm < e->n) {
    if (e->n_calm) printf("; %.0f%% over the %d unflagged", 100 * e->sum_calm / e->n_calm, e->n_calm);
    else printf("; every line flagged");
  }
  printf("\n");
}

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

/* The check as printed: the worst relative error, WRONG beyond the tolerance; counts it. */
static const char *check_str(const char *suite, const char *shape, const Result *r, char *buf, size_t n) {
  if (r->check < 0) return "-";
  nchecked++;
  bool wrong = !(r->check <= r->tol);
  nwrong += wrong;
  if (wrong)
    fprintf(stderr, "bench: %s %s: dyn's result differs from %s's by %.3g of its largest element (tolerance %.3g)\n",
            suite, shape, who_title[r->check_who], r->check, r->tol);
  snprintf(buf, n, "%.0e%s", r->check, wrong ? " WRONG" : "");
  return buf;
}

/* refs: the contenders in the CSV's ref1 and ref2 columns (NWHO: none); bw: the share of the
 * copy's bandwidth, 0 where not measured. */
static void csv_line(const char *suite, const char *shape, const Result *r, double rate, const int refs[2], double bw) {
  fprintf(csv, "%s,%s,", suite, shape);
  double ref[2] = {refs[0] < NWHO ? r->t[refs[0]] : 0, refs[1] < NWHO ? r->t[refs[1]] : 0},
         ratio[2] = {refs[0] < NWHO ? r->ratio[refs[0]] : 0, refs[1] < NWHO ? r->ratio[refs[1]] : 0};
  double v[] = {r->t[DYN] * 1e3, rate, ref[0] * 1e3, ref[1] * 1e3, ratio[0], ratio[1], r->pred * 1e3,
                r->pred > 0 && r->t[DYN] > 0 ? r->pred / r->t[DYN] - 1 : 0};
  bool have[] = {r->t[DYN] > 0, r->t[DYN] > 0, ref[0] > 0, ref[1] > 0, ratio[0] > 0, ratio[1] > 0, r->pred > 0,
                 r->pred > 0 && r->t[DYN] > 0};
  for (int i = 0; i < 8; i++)
    if (have[i]) fprintf(csv, i == 1 ? "%.3f," : "%.6f,", v[i]);
    else fputc(',', csv);
  fprintf(csv, "%.4f,", r->spread);
  if (r->others >= 0) fprintf(csv, "%.4f", r->others);
  fprintf(csv, ",%d,", flagged(r));
  if (r->t[TORCH] > 0) fprintf(csv, "%.6f", r->t[TORCH] * 1e3);
  fputc(',', csv);
  if (r->ratio[TORCH] > 0) fprintf(csv, "%.6f", r->ratio[TORCH]);
  fputc(',', csv);
  if (bw > 0) fprintf(csv, "%.4f", bw);
  fputc(',', csv);
  if (r->check >= 0) fprintf(csv, "%.3g", r->check);
  fputc('\n', csv);
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

/* A section: a suite file NAME.txt in each directory, its lines' ops and the contenders
 * beside dyn.  The shared directory holds gemm, bmm and rowwise (said when one is missing);
 * tests/bench/shapes adds to them and holds the rest. */
typedef struct {
  const char *name;
  const char *ops;           /* the ops its lines may name */
  bool implied;              /* the lines give only sizes, of the first op (gemm.txt: M N K) */
  const char *head;          /* the first column's heading */
  int peers[MAX_PEERS + 1];  /* beside dyn, in column order; NWHO ends */
  bool bw;                   /* a share of the copy's bandwidth, which takes turns with them */
  bool gflops;               /* the rate in GFLOP/s and the share of peak (else GB/s) */
  double share;              /* of --budget for each line: the sections after the first three
                                take half, so that make bench stays within minutes */
  const char *what;
  double tol;                /* the check's tolerance before the terms' share (0: f32's 8e-5) */
} Section;

static const Section sections[] = {
    {"gemm", "matmul", true, "M N K", {ONEDNN, OPENBLAS, TORCH, NWHO}, false, true, 1.0,
     "f32 C = A B, row-major; PyTorch: A @ B"},
    {"bmm", "bmm", true, "B M N K", {ONEDNN, OPENBLAS, TORCH, NWHO}, false, true, 1.0,
     "f32 C[b] = A[b] B[b] (oneDNN and OpenBLAS: one sgemm per batch; PyTorch: torch.bmm)"},
    {"rowwise", "softmax layernorm transpose", false, "OP ROWS COLS", {CLOOP, ONEDNN, TORCH, NWHO}, true, false, 1.0,
     "f32 softmax and layernorm over the last axis, transpose of [ROWS, COLS]; oneDNN: its softmax, layer "
     "normalisation and reorder primitives; PyTorch: torch.softmax(x, -1), F.layer_norm, x.t().contiguous()"},
    {"layout", "transpose permute", false, "OP [AXES] SIZES", {CLOOP, ONEDNN, TORCH, NWHO}, true, false, 0.5,
     "f32 layout changes: transpose(W), and Y[...] = X[...] with the axes permuted (permute 0213 A B C D: "
     "[A, B, C, D] -> [A, C, B, D]); oneDNN: its reorder primitive; PyTorch: x.t() or x.permute(...), then .contiguous()"},
    {"reduce", "sum", false, "sum AXES SIZES", {CLOOP, ONEDNN, TORCH, NWHO}, true, false, 0.5,
     "f32 sums over the axes named (sum 0 R C: column sums); oneDNN: its reduction primitive; PyTorch: x.sum(dim=AXES)"},
    {"eltwise", "gelu silu rmsnorm softmax layernorm chain", false, "OP ROWS COLS", {CLOOP, ONEDNN, TORCH, NWHO}, true, false, 0.5,
     "f32 elementwise and row-wise layers of the stdlib's nn (gelu: the tanh form) and a user's chain, "
     "silu(X + bias) + R; oneDNN: its eltwise (gelu_tanh, swish), softmax and layer normalisation primitives "
     "(none for rmsnorm and the chain); PyTorch: F.gelu(x, approximate='tanh'), F.silu, torch.softmax, F.layer_norm, "
     "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g"},
    {"conv", "conv dwconv", false, "OP N C H W [F] K S P", {ONEDNN, TORCH, NWHO}, false, true, 0.5,
     "f32 conv2d (nn) of X[N, C, H, W] by F K x K filters, stride S, padding P, NCHW; dwconv: depthwise, one "
     "filter a channel; oneDNN: its convolution primitive, NCHW in and out (its own layouts inside); "
     "PyTorch: F.conv2d"},
    {"attention", "attention causal", false, "OP B S T D", {TORCH, NWHO}, false, true, 0.5,
     "f32 attention and causal_attention (nn) of Q[B, S, D], K and V [B, T, D]; PyTorch: "
     "torch.softmax(Q @ K.transpose(-2, -1) / sqrt(D), -1) @ V (causal: masked_fill with -inf); GFLOP/s of 4 D + 5 "
     "FLOPs a pair of query and key, causal's the pairs t <= s it keeps"},
    /* both round C to bf16 once: results a unit in bf16's last place apart (2^-8 of the
     * largest) are both right */
    {"gemm_bf16", "matmul_bf16", true, "M N K", {ONEDNN, NWHO}, false, true, 0.5,
     "bf16 C = A B, row-major, summed in f32 and rounded once to bf16; oneDNN: its matmul primitive on bf16",
     1.0 / 128},
};
enum { NSECTIONS = sizeof sections / sizeof *sections };
static bool section_on[NSECTIONS];

/* Whether the space-separated words hold word. */
static bool has_word(const char *words, const char *word) {
  size_t n = strlen(word);
  for (const char *p = words; (p = strstr(p, word)); p += n)
    if ((p == words || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return true;
  return false;
}

/* The label of the suites of a directory after the first ("shapes/"). */
static const char *label_prefix = "";

static void run_section(const Section *sec, const char *dir, bool shared) {
  int who[MAX_PEERS + 2] = {DYN}, n = 1, npeers = 0;
  for (const int *p = sec->peers; *p != NWHO; p++, npeers++) who[n++] = *p;
  if (sec->bw) who[n++] = COPY;
  bool any = false;
  for (int i = 0; i < n; i++) any |= wk[who[i]].pid != 0;
  if (!any) return;
  char path[4096], suite[128];
  snprintf(path, sizeof path, "%s/%s.txt", dir, sec->name);
  FILE *f = fopen(path, "r");
  if (!f) {
    if (shared && (!strcmp(sec->name, "gemm") || !strcmp(sec->name, "bmm") || !strcmp(sec->name, "rowwise")))
      fprintf(stderr, "bench: cannot read %s; skipping it\n", path);
    return;
  }
  snprintf(suite, sizeof suite, "%s%s.txt", label_prefix, sec->name);
  printf("\n%s: %s; %d threads;\n"
         "ratio = their time / ours (above 1: dyn is faster; median of %d rounds); model: dyn's predicted time "
         "(:sched, :time) and its error, predicted / measured - 1;\n", suite, sec->what, threads, rounds);
  if (sec->bw) printf("of bw: GB/s (bytes read and written once) over the streaming bandwidth of a copy taking turns with them;\n");
  printf("check: max |dyn's result - a peer's| over the peer's largest element (at least sqrt(terms) / 2), the worst of the peers\n");
  flag_note();
  bool peak = sec->gflops && wk[DYN].pid;
  printf("%-28s %10s %10s %6s %9s%s", sec->head, "dyn ms", "model ms", "err", sec->gflops ? "GFLOP/s" : "GB/s",
         peak ? "              " : "");
  if (sec->bw) printf(" %7s", "of bw");
  for (int p = 0; p < npeers; p++) printf(" %10.10s %7s", who_title[sec->peers[p]], "ratio");
  printf(" %8s %6s %6s\n", "check", "rounds", "others");
  Geo g = {0};
  SuiteErr *e = suite_begin(suite);
  char line[512], why[256], shape[128], cmd[640];
  while (next_line(f, line, sizeof line)) {
    Op o;
    char *text = line;
    if (sec->implied) {               /* the op of the whole suite first */
      snprintf(cmd, sizeof cmd, "%s %s", sec->ops, line);
      text = cmd;
    }
    bool ok = op_parse(text, &o, why, sizeof why);
    if (ok && !has_word(sec->ops, line_op_name[o.op])) {
      snprintf(why, sizeof why, "%s is not an op of this section (%s)", line_op_name[o.op], sec->ops);
      ok = false;
    }
    if (!ok) {
      line[strcspn(line, "\n")] = 0;
      fprintf(stderr, "bench: %s: %s; skipping the line: %s\n", suite, why, line);
      continue;
    }
    op_text(&o, !sec->implied, shape, sizeof shape);
    op_text(&o, true, cmd, sizeof cmd);
    Work w = op_work(&o);
    Result r;
    measure(cmd, who, n, w.flops >= 1e9 && sec->gflops, w.terms, sec->tol, budget * sec->share, &r);
    double rate = r.t[DYN] > 0 ? (sec->gflops ? w.flops : w.bytes) / r.t[DYN] * 1e-9 : 0;
    /* share of bandwidth = (bytes / our time) / (copy's bytes / copy's time), a median over
     * the rounds like the ratios */
    double bw = sec->bw && r.ratio[COPY] > 0 ? r.ratio[COPY] * w.bytes / (2.0 * (double)NCOPY * 4) : 0;
    char eb[16], sb[48], cb[32];
    printf("%-28s", shape);
    if (r.t[DYN] > 0) {
      printf(" %10.4f", r.t[DYN] * 1e3);
      if (r.pred > 0) printf(" %10.4f", r.pred * 1e3);
      else printf(" %10s", "-");
      printf(" %6s %9.1f", model_err(e, shape, &r, eb, sizeof eb), rate);
      if (r.peak > 0) printf(" (%2.0f%% of peak)", 100.0 * w.flops / r.t[DYN] * 1e-9 / r.peak);
      else if (peak) printf("              ");
    } else {
      printf(" %10s %10s %6s %9s", "-", "-", "-", "-");
    }
    if (sec->bw) {
      if (bw > 0) printf(" %6.0f%%", 100.0 * bw);
      else printf(" %7s", "-");
    }
    for (int p = 0; p < npeers; p++) {
      int l = sec->peers[p];
      if (r.t[l] > 0) printf(" %10.4f", r.t[l] * 1e3);
      else printf(" %10s", "-");
      if (r.ratio[l] > 0) printf(" %7.2f", r.ratio[l]);
      else printf(" %7s", "-");
      geo_add(&g, p, r.ratio[l], flagged(&r));
    }
    printf(" %8s %s\n", check_str(suite, shape, &r, cb, sizeof cb), flag_str(&r, sb, sizeof sb));
    int refs[2] = {NWHO, NWHO};
    for (int p = 0, k = 0; p < npeers && k < 2; p++)
      if (sec->peers[p] != TORCH) refs[k++] = sec->peers[p];
    csv_line(suite, shape, &r, rate, refs, bw);
  }
  fclose(f);
  char gb[MAX_PEERS][32];
  for (int k = 0; k < 2; k++) {
    printf("%-28s %10s %10s %6s %9s%s", "", "", "", "", "", peak ? "              " : "");
    if (sec->bw) printf(" %7s", "");
    for (int p = 0; p < npeers; p++) printf(" %10s %7s", "", geo(&g, k, p, gb[p]));
    printf("   (geometric means%s)\n", k ? " of the unflagged lines" : "");
  }
  suite_end(e);
}

static int cmp_abs_err(const void *a, const void *b) {
  double x = fabs(((const ModelLine *)a)->err), y = fabs(((const ModelLine *)b)->err);
  return x > y ? -1 : x < y;
}

static void summary(void) {
  printf("\nsummary: %d lines, %d flagged (!): %d whose rounds' ratios spread over %.0f%%, %d during which other processes\n"
         "took over %.0f%% of the cores in use\n", nlines, nflagged, nspread, 100 * FLAG_SPREAD, nbusy, 100 * FLAG_OTHERS);
  printf("check: %d lines' results compared with a peer's, %d beyond the tolerance\n", nchecked, nwrong);
  if (!nmlines) return;
  double sum = 0, calm = 0;
  int ncalm = 0;
  for (int i = 0; i < nmlines; i++) {
    sum += fabs(mlines[i].err);
    if (!mlines[i].flag) calm += fabs(mlines[i].err), ncalm++;
  }
  printf("model: mean |predicted / measured - 1| %.0f%% over %d lines (goal: under %.0f%% on every suite);", 100 * sum / nmlines,
         nmlines, 100 * MODEL_GOAL);
  for (int i = 0; i < nsuites; i++)
    if (suites[i].n) printf(" %s %.0f%%", suites[i].suite, 100 * suites[i].sum / suites[i].n);
  if (ncalm && ncalm < nmlines) {
    printf("\nmodel over the %d unflagged lines: %.0f%%;", ncalm, 100 * calm / ncalm);
    for (int i = 0; i < nsuites; i++)
      if (suites[i].n_calm) printf(" %s %.0f%%", suites[i].suite, 100 * suites[i].sum_calm / suites[i].n_calm);
  } else if (!ncalm) {
    printf("\nmodel: every line flagged");
  }
  qsort(mlines, (size_t)nmlines, sizeof *mlines, cmp_abs_err);
  printf("\nmodel's worst lines:");
  for (int i = 0; i < nmlines && i < 8; i++)
    printf("%s %s %+.0f%%%s", i ? ";" : "", mlines[i].what, 100 * mlines[i].err, mlines[i].flag ? " (flagged)" : "");
  printf("\n");
}

static _Noreturn void usage(void) {
  fprintf(stderr, "usage: bench [--threads N] [--csv FILE] [--budget SECONDS] [--rounds R] [--only NAME[,NAME...]]\n"
                  "             [--sections SECTION[,SECTION...]] [--torch SCRIPT] [--python PYTHON] BENCH_DIR [MORE_DIR ...]\n"
                  "  NAME: dyn, onednn, openblas, c, copy, torch\n  SECTION:");
  for (int i = 0; i < NSECTIONS; i++) fprintf(stderr, " %s", sections[i].name);
  fputc('\n', stderr);
  exit(2);
}

/* One line on the PyTorch that the column measures: its version and the BLAS its build
 * says it was linked with, so that a reader knows what its products were against (Debian's
 * python3-torch 1.13: BLAS_INFO=generic, the system's libblas.so.3; its torch.bmm of 16 x
 * 1024 x 64 by 64 x 1024 ran at 8-10 GFLOP/s on 1 or 2 threads of a Zen 5 guest, whatever
 * OpenBLAS's threads and kernel, so its attention takes over 500 ms at 16 x 1024 x 1024). */
static void torch_build(const char *python) {
  char cmd[512], line[256] = "";
  snprintf(cmd, sizeof cmd,
           "'%s' -c \"import torch, re; m = re.search(r'BLAS_INFO=([^,]*)', torch.__config__.show()); "
           "print(torch.__version__, m.group(1) if m else 'not-said')\" 2>/dev/null", python);
  fflush(stdout);
  FILE *f = popen(cmd, "r");
  if (!f) return;
  bool got = fgets(line, sizeof line, f) != NULL;
  pclose(f);
  char ver[64], blas[128];
  if (got && sscanf(line, "%63s %127s", ver, blas) == 2)
    printf("torch: PyTorch %s (%s), built with BLAS_INFO=%s\n", ver, python, blas);
}

/* Whether python imports torch (quietly). */
static bool python_has_torch(const char *python) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (!pid) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execlp(python, python, "-c", "import torch", (char *)NULL);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Mark the names of list (comma-separated) in on[0..n) by names[i]; false on one unknown. */
static bool pick(const char *list, const char *(*name)(int), int n, bool *on) {
  for (int i = 0; i < n; i++) on[i] = false;
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, ",");
    int i = 0;
    while (i < n && (strlen(name(i)) != k || strncmp(p, name(i), k))) i++;
    if (i == n) return false;
    on[i] = true;
    p += k + (p[k] == ',');
  }
  return true;
}
static const char *who_at(int i) { return who_name[i]; }
static const char *section_at(int i) { return sections[i].name; }

int main(int argc, char **argv) {
  const char *dirs[16], *csvpath = "bench-results.csv", *only = NULL, *worker = NULL, *secs = NULL, *python = NULL;
  int ndirs = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csvpath = argv[++i];
    else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = atof(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strncmp(argv[i], "--only=", 7)) only = argv[i] + 7;
    else if (!strcmp(argv[i], "--sections") && i + 1 < argc) secs = argv[++i];
    else if (!strncmp(argv[i], "--sections=", 11)) secs = argv[i] + 11;
    else if (!strcmp(argv[i], "--torch") && i + 1 < argc) torch_script = argv[++i];
    else if (!strcmp(argv[i], "--python") && i + 1 < argc) python = argv[++i];
    else if (!strcmp(argv[i], "--worker") && i + 1 < argc) worker = argv[++i];
    else if (argv[i][0] == '-') usage();
    else if (ndirs < 16) dirs[ndirs++] = argv[i];
  }
  if (threads < 1 || rounds < 1 || rounds > MAX_ROUNDS) usage();
  for (int w = 0; w < NWHO && worker; w++)
    if (!strcmp(worker, who_name[w]) && w != TORCH) {
      if (!who_built(w)) die("%s is not in this build", worker);
      return worker_main(w);
    }
  if (worker) die("unknown worker %s", worker);
  bool want[NWHO];
  for (int w = 0; w < NWHO; w++) want[w] = true;
  if (only && !pick(only, who_at, NWHO, want)) usage();
  for (int i = 0; i < NSECTIONS; i++) section_on[i] = true;
  if (secs && !pick(secs, section_at, NSECTIONS, section_on)) usage();
  if (!ndirs) usage();
  csv = fopen(csvpath, "w");
  if (!csv) die("%s: %s", csvpath, strerror(errno));
  fprintf(csv, "suite,shape,dyn_ms,dyn_rate,ref1_ms,ref2_ms,ratio1,ratio2,model_ms,model_err,spread,others,flagged,"
               "torch_ms,torch_ratio,bw_share,check_err\n");
  char self[4096], script[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) self[len] = 0;
  else snprintf(self, sizeof self, "%s", argv[0]);
  if (!torch_script) {                  /* beside the program, as in a build in the source tree */
    snprintf(script, sizeof script, "%s", self);
    char *slash = strrchr(script, '/');
    snprintf(slash ? slash + 1 : script, sizeof script - (size_t)(slash ? slash + 1 - script : 0), "bench_torch.py");
    torch_script = script;
  }

  printf("dyn %s benchmark: %d threads, each contender in a process of its own, the others stopped during its turns\n",
         PACKAGE_VERSION, threads);
  if (want[TORCH]) {
    /* the first Python that imports torch: the one on the path, then the system's (Debian's
     * python3-torch is for /usr/bin/python3) */
    const char *tried[] = {python, "python3", "/usr/bin/python3"};
    want[TORCH] = false;
    if (access(torch_script, R_OK)) printf("torch: %s is missing: the PyTorch column is skipped\n", torch_script);
    else
      for (int i = 0; i < 3 && !want[TORCH]; i++)
        if (tried[i] && python_has_torch(tried[i])) {
          want[TORCH] = true;
          torch_python = tried[i];
        }
    if (!want[TORCH] && !access(torch_script, R_OK))
      printf("torch: no Python here imports torch (tried %s%s/usr/bin/python3): the PyTorch column is skipped\n",
             python ? python : "", python ? ", python3, " : "python3, ");
    if (want[TORCH]) torch_build(torch_python);
  }
  snprintf(check_dir, sizeof check_dir, "bench-check-XXXXXX");
  if (!mkdtemp(check_dir)) {
    fprintf(stderr, "bench: cannot make a directory for the check (%s): results are not compared\n", strerror(errno));
    check_dir[0] = 0;
  }
  atexit(check_dir_remove);
  /* OpenBLAS, linked into this process too, started its threads when it was loaded; they
   * spin about 2^28 cycles before they sleep.  Let them before the workers start. */
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  int started = 0;
  for (int w = 0; w < NWHO; w++)
    if (want[w] && who_built(w)) {
      worker_start(w, self);
      if (w == ONEDNN || w == OPENBLAS || w == TORCH) printf("%s\n", wk[w].desc);
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
    for (int i = 0; i < NSECTIONS; i++)
      if (section_on[i]) run_section(&sections[i], dir, d == 0);
  }
  summary();
  workers_end();
  fclose(csv);
  printf("\nwritten: %s\n", csvpath);
  if (nwrong) fprintf(stderr, "bench: %d lines where dyn's result disagrees with a peer's\n", nwrong);
  return nwrong ? 1 : 0;
}
