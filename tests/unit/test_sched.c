/* test_sched.c -- Check suite for the model's streaming terms: sched.c's roofline, the level a
 * working set lives in, and the time of an element-wise or row-wise kernel, with cost.c's
 * lane-operations and traffic of lowered programs.  Every expectation is derived from the
 * figures of the hardware model loaded (every CPU model in hw/, or one named where a test
 * works an example through), never from the host: bytes over the level's bandwidth for the threads, lane-operations over the
 * vector pipes' rate, the larger of the two plus the fork-join.
 */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The CPU models of hw/ (every NAME.hw whose kind is cpu, sorted), read once by main before
 * the tests fork: a file added there is checked as those before it were, and no list here
 * can fall behind the directory. */
#define MAX_MODELS 64
static char *MODELS[MAX_MODELS];
static int NMODELS;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void find_models(void) {
  DIR *d = opendir(hw_dir());
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) && NMODELS < MAX_MODELS) {
    size_t len = strlen(e->d_name);
    if (len < 4 || e->d_name[0] == '.' || strcmp(e->d_name + len - 3, ".hw")) continue;
    char *name = xstrndup(e->d_name, len - 3);
    HwModel h;
    char err[1024];
    if (hw_load(name, &h, err, sizeof err) && !strcmp(h.kind, "cpu")) MODELS[NMODELS++] = name;
    else free(name);
  }
  closedir(d);
  qsort(MODELS, (size_t)NMODELS, sizeof MODELS[0], by_name);
}
#define SYNC_S 0.3e-6          /* sched.c's SCHED_SYNC_S, the documented fork-join */

static HwModel model(const char *name) {
  HwModel h;
  char err[1024];
  ck_assert_msg(hw_load(name, &h, err, sizeof err), "%s: %s", name, err);
  return h;
}

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-15; }

/* A working set's level, walked from the file's capacities: a private cache holds its size
 * per thread, a shared one its size per group of cores sharing it. */
/* What cache i keeps of a streaming set of F bytes on t threads, `dirty` of them written
 * (not streamed), derived from the file's figures: a shared cache its capacity for each
 * group of cores that shares it; a private one all of the set where each core's part fits
 * the share of its capacity the set can use -- all of it for a set only read, 0.7 for one
 * written as much as read, in between by the written share -- else that share of one
 * core's capacity while the set fits the threads' caches together, and nothing of a larger
 * set (sched.c, stream_hold). */
static double hold_of(const HwModel *h, int i, double F, double dirty, int t) {
  const HwLevel *l = &h->level[i];
  if (l->shared_by > 1) return (double)l->bytes * ceil((double)t / l->shared_by);
  double w = F > 0 ? fmin(1, 2 * dirty / F) : 0, cap = (double)l->bytes * (1 - 0.3 * w);
  if (F <= cap * t) return F;
  return F <= (double)l->bytes * t ? cap : 0;
}

/* The first level whose capacity for t threads holds F bytes (sched_fit_level: what a
 * kernel reads again within a call finds there), else main memory. */
static int fit_of(const HwModel *h, double F, int t) {
  for (int i = 0; i < hw_ncaches(h); i++) {
    const HwLevel *l = &h->level[i];
    double units = l->shared_by > 1 ? ceil((double)t / l->shared_by) : t;
    if (F <= (double)l->bytes * units) return i;
  }
  return h->nlevels - 1;
}

/* The level that keeps all of a streaming set of F bytes (dirty of them written) between
 * calls, else main memory. */
static int level_of(const HwModel *h, double F, double dirty, int t) {
  for (int i = 0; i < hw_ncaches(h); i++)
    if (F <= hold_of(h, i, F, dirty, t)) return i;
  return h->nlevels - 1;
}

static double bw_of(const HwModel *h, int i, int t) {
  double bw = h->level[i].gbs * t;
  return (h->level[i].total_gbs > 0 && bw > h->level[i].total_gbs ? h->level[i].total_gbs : bw) * 1e9;
}

/* A streaming kernel's memory seconds, derived from the file's figures: its working set F
 * (what it reads and, unless its stores stream, what it writes), each cache's share of it
 * (hold_of, beyond what the faster ones keep) at that cache's rate, a private cache past L1
 * taking the written lines back from L1 as well (its share of them twice); what none keeps, and the
 * streamed stores, from memory at the threads' per-core rate -- or, where that rate outruns
 * the memory's total by more than a tenth, across the bus at the total, the write-back of
 * the lines it did not stream beside the fetches.  Where the caches keep all it reads, its
 * streamed stores go to memory at once with the reads: the larger of the two.  The caches'
 * part and the per-core rate's times imb, the busiest thread's work over an even share. */
static double mem_time_of(const HwModel *h, double read, double written, bool streamed, int t, double imb) {
  int last = h->nlevels - 1;
  double nt = streamed ? written : 0, F = read + written - nt, kept = 0, s = 0;
  for (int i = 0; i < hw_ncaches(h) && F > 0; i++) {
    double up = fmin(1, hold_of(h, i, F, written - nt, t) / F);
    double wb = i > 0 && h->level[i].shared_by <= 1 ? written - nt : 0;
    if (up > kept) s += (up - kept) * (F + wb) / bw_of(h, i, t), kept = up;
  }
  s *= imb;
  const HwLevel *m = &h->level[last];
  double fetched = (1 - kept) * F + nt, core = m->gbs * 1e9 * t, tot = m->total_gbs * 1e9;
  if (!(fetched > 0)) return s;
  double from_mem = tot > 0 && tot < 0.9 * core ? (fetched + (streamed ? 0 : (1 - kept) * written)) / tot : fetched / core * imb;
  return kept >= 1 ? fmax(s, from_mem) : s + from_mem;     /* reads all cached: beside the stores */
}
/* ... with the threads' work even */
static double mem_time(const HwModel *h, double read, double written, bool streamed, int t) {
  return mem_time_of(h, read, written, streamed, t, 1);
}

/* The FMA pipes' lanes a second, and the vector pipes' (vec_units where a file gives more
 * than its FMA pipes, zen4.hw). */
static double fma_rate(const HwModel *h, int t, int elem) {
  return (double)(h->vector_bits / (8 * elem)) * h->fma_units * h->ghz * 1e9 * t;
}
static double lanes_rate(const HwModel *h, int t, int elem) {
  int pipes = h->vec_units > h->fma_units ? h->vec_units : h->fma_units;
  return (double)(h->vector_bits / (8 * elem)) * pipes * h->ghz * 1e9 * t;
}

START_TEST(test_roofline) {
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    const HwLevel *mem = &h.level[h.nlevels - 1];
    for (int t = 1; t <= 4; t++) {
      double flops = 1e9, bytes = 3e8;
      double peak = h.peak_gflops_f32 * 1e9 * t / h.cores;
      double bw = (mem->total_gbs > 0 && mem->gbs * t > mem->total_gbs ? mem->total_gbs : mem->gbs * t) * 1e9;
      double want = fmax(flops / peak, bytes / bw);
      ck_assert_msg(close_to(sched_roofline(&h, t, flops, bytes), want), "%s, %d threads", MODELS[m], t);
      /* cost.c's roofline is sched.c's */
      ck_assert(sched_roofline(&h, t, flops, bytes) == cost_roofline(&h, t, flops, bytes));
    }
  }
}
END_TEST

START_TEST(test_fit_level) {
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int nc = hw_ncaches(&h);
    ck_assert_int_ge(nc, 2);
    for (int t = 1; t <= 2; t++) {
      /* just inside and just outside each cache's capacity for t threads */
      for (int i = 0; i < nc; i++) {
        const HwLevel *l = &h.level[i];
        double cap = (double)l->bytes * (l->shared_by > 1 ? ceil((double)t / l->shared_by) : t);
        ck_assert_int_eq(sched_fit_level(&h, cap, t), fit_of(&h, cap, t));
        ck_assert_int_eq(sched_fit_level(&h, cap + 64, t), fit_of(&h, cap + 64, t));
        ck_assert_int_gt(fit_of(&h, cap + 64, t), i);
      }
      ck_assert_int_eq(sched_fit_level(&h, 1e12, t), h.nlevels - 1);
      ck_assert_int_eq(sched_fit_level(&h, 64, t), 0);
    }
    /* two threads hold twice a private L1 */
    ck_assert_int_eq(sched_fit_level(&h, 1.5 * (double)h.level[0].bytes, 2), 0);
    ck_assert_int_eq(sched_fit_level(&h, 1.5 * (double)h.level[0].bytes, 1), 1);
  }
}
END_TEST

/* What dyn --calibrate found a guest's share of a shared cache keeps (kept_bytes): a set up
 * to it stays there; past it, a set only read keeps that much of itself (as the reads that
 * measured it did) and a set written too keeps the share. */
START_TEST(test_kept_capacity) {
  int checked = 0;
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int i = hw_ncaches(&h) - 1, last = h.nlevels - 1, t = 2;
    HwLevel *lv = &h.level[i];
    if (lv->shared_by <= 1) continue;
    double share = (double)lv->bytes * ceil((double)t / lv->shared_by);
    SchedTerms T;
    SchedWork fits = {.ops = 0, .elem_bytes = 4, .read = 2 * share, .tasks = 8};
    SchedWork past = {.ops = 0, .elem_bytes = 4, .read = 6 * share, .tasks = 8};
    SchedWork written = {.ops = 0, .elem_bytes = 4, .read = 3 * share, .written = 3 * share, .tasks = 8};
    /* the share alone */
    ck_assert_int_eq(sched_fit_level(&h, 2 * share, t), last);
    sched_stream_time(&h, t, &fits, &T);
    ck_assert_msg(T.level == last && close_to(T.kept, 0.5), "%s: %g kept", MODELS[m], T.kept);
    /* three times the share kept */
    lv->whole_bytes = 4 * lv->bytes;
    lv->kept_bytes = 3 * lv->bytes;
    ck_assert_int_eq(sched_fit_level(&h, 2 * share, t), i);
    ck_assert_int_eq(sched_fit_level(&h, 3 * share + 64, t), last);
    sched_stream_time(&h, t, &fits, &T);
    ck_assert_msg(T.level == i && close_to(T.kept, 1), "%s: %g kept", MODELS[m], T.kept);
    ck_assert(close_to(T.mem_s, 2 * share / sched_threads_bw(&h, i, t)));
    sched_stream_time(&h, t, &past, &T);
    ck_assert_msg(T.level == last && close_to(T.kept, 0.5), "%s: %g kept", MODELS[m], T.kept);
    sched_stream_time(&h, t, &written, &T);
    ck_assert_msg(T.level == last && close_to(T.kept, 1.0 / 6), "%s: %g kept", MODELS[m], T.kept);
    checked++;
  }
  ck_assert_int_gt(checked, 0);
}
END_TEST

/* ---- lowered programs: lane-operations and bytes ---- */

static PolyCtx *pc;
static Arena *arena;
static Func *fn;

static Func *no_fns(void *env, const char *name) {
  (void)env, (void)name;
  return NULL;
}

/* Check and lower one function; its kernels in fn->code.prog. */
static const Program *lowered(const char *text) {
  Diags d = {0};
  size_t len = strlen(text);
  Source *src = arena_alloc(arena, sizeof *src);
  *src = (Source){.name = "t.dyn", .text = arena_strndup(arena, text, len), .len = len};
  int nst = 0;
  bool more = false;
  Stmt **st = parse_source(arena, src, &d, &nst, &more);
  SemaEnv env = {pc, no_fns, NULL};
  fn = nst == 1 && !d.nerrors ? sema_function(&env, st[0]->fn, arena, &d) : NULL;
  ck_assert_msg(fn && !d.nerrors, "the test program does not check");
  diag_clear(&d);
  fn->code.prog = lower_function(fn, pc, no_fns, NULL);
  ck_assert(fn->code.prog && fn->code.prog->nkernels == 1);
  return fn->code.prog;
}

static void setup(void) {
  pc = poly_ctx_new();
  arena = arena_new();
  fn = NULL;
}

static void teardown(void) {
  if (fn && fn->code.prog) lower_free(fn->code.prog);
  arena_free(arena);
  poly_ctx_free(pc);
}

static int64_t at(const Poly *p, int64_t B, int64_t N) {
  const char *names[2] = {"B", "N"};
  int64_t vals[2] = {B, N}, v = -1;
  EvalSizes sz = {names, vals, 2};
  const char *why;
  ck_assert(poly_eval(p, eval_size_lookup, &sz, &v, &why));
  return v;
}

/* The lane-operations of vmath.c's f32 exp, counted in its source: the clamp (2), the
 * reduction (4), the degree-6 polynomial (6), n's bits (1), and the scaling by 2^n: one
 * vscalefps where the model's ISA has AVX-512, else 8. */
static int exp_ops(const HwModel *h) { return strstr(h->llvm_features, "+avx512f") ? 13 : 20; }

/* The kernel of text at B x N on model h and t threads: its predicted time, and the time
 * derived here from ops lane-operations per element and the bytes of `tensors` f32 tensors
 * read and one written, each B x N. */
static void check_stream(const char *text, int ops, int tensors, const HwModel *h, int64_t B, int64_t N, int t,
                         bool streamed) {
  const Program *p = lowered(text);
  const Kernel *kn = &p->kernels[0];
  const Poly *rd, *wr;
  cost_kernel_traffic(p, kn, pc, &rd, &wr);
  double n = (double)B * (double)N;
  ck_assert_int_eq(at(cost_kernel_ops(h, p, kn, pc), B, N), (int64_t)(ops * n));
  ck_assert_int_eq(at(rd, B, N), (int64_t)(4 * tensors * n));
  ck_assert_int_eq(at(wr, B, N), (int64_t)(4 * n));
  SchedWork w = {.ops = ops * n, .elem_bytes = 4, .read = 4 * tensors * n, .written = 4 * n, .streamed = streamed,
                 .tasks = B < 4 * t ? B : 4 * t};
  int tt = B < t ? (int)B : t;
  int lv = level_of(h, w.read + (streamed ? 0 : w.written), streamed ? 0 : w.written, tt);
  bool rfo = lv == h->nlevels - 1 && !streamed;
  double mem = mem_time(h, w.read, w.written, streamed, tt);
  double comp = w.ops / lanes_rate(h, tt, 4);
  double want = fmax(mem, comp) + (tt > 1 ? SYNC_S : 0);
  SchedTerms T;
  double got = sched_stream_time(h, t, &w, &T);
  ck_assert_msg(close_to(got, want), "%s on %s: %g s, derived %g", text, h->name, got, want);
  ck_assert_int_eq(T.level, lv);
  ck_assert(T.memory == rfo);
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
}

START_TEST(test_elementwise) {
  /* two operations an element, one tensor in, one out */
  const char *axpb = "fn f(X: f32[B, N]) -> f32[B, N] {\n  Y[b, n] = X[b, n] * 3.0 + 1.0\n  return Y\n}";
  /* exp's expansion (exp_ops), then one multiply */
  const char *ex = "fn f(X: f32[B, N]) -> f32[B, N] {\n  Y[b, n] = exp(X[b, n]) * 2.0\n  return Y\n}";
  /* two tensors in: the sum of a residual */
  const char *res = "fn f(X: f32[B, N], R: f32[B, N]) -> f32[B, N] {\n  Y[b, n] = X[b, n] + R[b, n]\n  return Y\n}";
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    /* in L1 of one thread, in L2 of two, in the last cache, in memory (with and without
     * streaming stores), a single row and a prime */
    const int64_t shapes[][2] = {{1, 256}, {2, 1000}, {64, 1021}, {1024, 1024}, {4096, 4096}, {1, 7}, {97, 13}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 1; t <= 2; t++) {
        check_stream(axpb, 2, 1, &h, shapes[s][0], shapes[s][1], t, false);
        check_stream(ex, exp_ops(&h) + 1, 1, &h, shapes[s][0], shapes[s][1], t, false);
        check_stream(res, 1, 2, &h, shapes[s][0], shapes[s][1], t, s == 4);
      }
  }
}
END_TEST

static const char SOFTMAX[] = "fn softmax(X: f32[B, N]) -> f32[B, N] {\n"
                              "  m[b] = max[n] X[b, n]\n"
                              "  e[b, n] = exp(X[b, n] - m[b])\n"
                              "  s[b] = sum[n] e[b, n]\n"
                              "  Y[b, n] = e[b, n] / s[b]\n"
                              "  return Y\n}";

/* A row-wise kernel (softmax): its per-row intermediates stay in cache and cost no bytes; its
 * lane-operations are the max, the exp and its sum, and the division of each element. */
START_TEST(test_rowwise) {
  const char *sm = SOFTMAX;
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    /* max: its step (1); exp of a difference (1 + exp_ops); sum: its step (1); the division (8) */
    check_stream(sm, 1 + 1 + exp_ops(&h) + 1 + 8, 1, &h, 33, 1000, 2, false);
    check_stream(sm, 1 + 1 + exp_ops(&h) + 1 + 8, 1, &h, 4096, 4096, 2, true);
    /* compute-bound where the data sits in a cache: the exp dominates the bytes */
    const Program *p = lowered(sm);
    double ops = (double)at(cost_kernel_ops(&h, p, &p->kernels[0], pc), 64, 1000);
    SchedWork w = {.ops = ops, .elem_bytes = 4, .read = 4 * 64e3, .written = 4 * 64e3, .tasks = 8};
    SchedTerms T;
    sched_stream_time(&h, 2, &w, &T);
    ck_assert_msg(T.level < h.nlevels - 1 && T.comp_s > T.mem_s, "%s: compute %g, memory %g", h.name, T.comp_s, T.mem_s);
  }
}
END_TEST

/* Memory, term by term, on zen5's figures (2 threads: 48 GB/s from DRAM, 130 from the
 * 32 MiB L3 they share).  Each check fails if its term is dropped:
 *   - the write-back of a line a store allocated is not a core's fetch: silu's 46 MB read
 *     and 46 MB written are 92 MB at the cores' rate, not 138;
 *   - a working set the L3 cannot hold finds the L3's capacity of itself there;
 *   - streamed stores leave the caches to what is read: rmsnorm over 2048 x 4096 reads
 *     33.6 MB, the L3's capacity of it kept, and writes 33.5 MB to memory;
 *   - where the caches keep all it reads, the streamed stores go beside the reads (the
 *     larger of the two, not their sum);
 *   - where the threads' fetches outrun the memory's total, the bus binds, and carries
 *     the write-backs too, a written byte at dyn --calibrate's cost where it measured one. */
START_TEST(test_memory_terms) {
  HwModel h = model("zen5");
  double L3 = (double)h.level[2].bytes, dram = h.level[3].gbs * 2e9, l3bw = h.level[2].gbs * 2e9;
  SchedTerms T;
  double rd = 4.0 * 2048 * 5632;
  SchedWork silu = {.ops = 0, .elem_bytes = 4, .read = rd, .written = rd, .tasks = 8};
  sched_stream_time(&h, 2, &silu, &T);
  double kept = L3 / (2 * rd);
  ck_assert(close_to(T.kept, kept));
  ck_assert_msg(close_to(T.mem_s, kept * 2 * rd / l3bw + (1 - kept) * 2 * rd / dram), "silu: %g s", T.mem_s);
  ck_assert(T.memory && T.level == 3);
  /* rmsnorm, streamed: its reads alone outgrow the L3 by gamma's 16 KiB */
  SchedWork rms = {.ops = 0, .elem_bytes = 4, .read = 4.0 * 2048 * 4096 + 4 * 4096, .written = 4.0 * 2048 * 4096,
                   .streamed = true, .tasks = 8};
  sched_stream_time(&h, 2, &rms, &T);
  kept = L3 / rms.read;
  ck_assert(!T.memory && T.level == 3 && close_to(T.kept, kept));
  ck_assert(close_to(T.mem_s, kept * rms.read / l3bw + ((1 - kept) * rms.read + rms.written) / dram));
  /* streamed, its reads in L2: the stores still go to memory, beside the reads */
  SchedWork small = {.ops = 0, .elem_bytes = 4, .read = 512e3, .written = 512e3, .streamed = true, .tasks = 8};
  sched_stream_time(&h, 2, &small, &T);
  ck_assert(T.level == 1 && close_to(T.mem_s, fmax(512e3 / (h.level[1].gbs * 2e9), 512e3 / dram)));
  /* all 128 cores: 128 x 24 GB/s outruns the 460 in all; the bus carries fetches and
   * write-backs */
  SchedWork big = {.ops = 0, .elem_bytes = 4, .read = 4e9, .written = 4e9, .tasks = 1024};
  sched_stream_time(&h, 128, &big, &T);
  double cap = L3 * 16, k = cap / 8e9, tot = h.level[3].total_gbs * 1e9;
  ck_assert_msg(close_to(T.mem_s, k * 8e9 / bw_of(&h, 2, 128) + (1 - k) * 12e9 / tot), "bus: %g s", T.mem_s);
  /* dyn --calibrate on 2 threads: the total twice a core's rate, a rounding below it, is no
   * bus of its own: silu's fetches at the cores' rate, its write-backs not charged (they
   * were: 1.5x the time) ... */
  HwModel c = h;
  c.level[3].gbs = 47.315, c.level[3].total_gbs = 94.629;
  sched_stream_time(&c, 2, &silu, &T);
  kept = L3 / (2 * rd);
  ck_assert_msg(close_to(T.mem_s, kept * 2 * rd / l3bw + (1 - kept) * 2 * rd / 94.63e9), "calibrated: %g s", T.mem_s);
  /* ... a fifth below it is: fetches and write-backs across the bus */
  c.level[3].total_gbs = 0.8 * 94.63;
  sched_stream_time(&c, 2, &silu, &T);
  ck_assert(close_to(T.mem_s, kept * 2 * rd / l3bw + (1 - kept) * 3 * rd / (0.8 * 94.63e9)));
  /* ... each written byte at what dyn --calibrate's copy found it to cost in read bytes
   * (its fetch and write-back: 2 where not measured), more or less than 2 */
  for (double wc = 0.5; wc <= 3; wc += 1.25) {
    c.write_cost = wc;
    sched_stream_time(&c, 2, &silu, &T);
    ck_assert_msg(close_to(T.mem_s, kept * 2 * rd / l3bw + (1 - kept) * (1 + wc) * rd / (0.8 * 94.63e9)), "write cost %g: %g s",
                  wc, T.mem_s);
  }
  c.write_cost = 0;
  /* the busiest of 2 threads doing 0.6 of the work: each term 1.2x the even share's */
  SchedTerms E;
  SchedWork even = {.ops = 1e8, .elem_bytes = 4, .read = 4e5, .written = 4e5, .tasks = 8}, odd = even;
  odd.busiest = 0.6;
  sched_stream_time(&h, 2, &even, &E);
  sched_stream_time(&h, 2, &odd, &T);
  ck_assert(close_to(T.imbalance, 1.2) && E.imbalance == 1);
  ck_assert(close_to(T.comp_s, 1.2 * E.comp_s) && close_to(T.mem_s, 1.2 * E.mem_s));
  /* A private L2 keeps 0.7 of one core's capacity of a set the threads' L2s hold, the
   * rest coming from L3; nothing of a larger set.  Each check fails with the set taken
   * whole from where it fits, as the model did: on 1 thread, a set of exactly L2 ... */
  double L2 = (double)h.level[1].bytes, l2bw1 = h.level[1].gbs * 1e9, l3bw1 = h.level[2].gbs * 1e9;
  SchedWork edge = {.ops = 0, .elem_bytes = 4, .read = L2 / 2, .written = L2 / 2, .tasks = 8};
  sched_stream_time(&h, 1, &edge, &T);
  ck_assert_msg(T.level == 2 && close_to(T.mem_s, 0.7 * 1.5 * L2 / l2bw1 + 0.3 * L2 / l3bw1), "L2's edge: %g s", T.mem_s);
  /* ... a set 0.7 of it, all from L2, its written half twice (L1's dirty lines back) ... */
  edge.read = edge.written = 0.35 * L2;
  sched_stream_time(&h, 1, &edge, &T);
  ck_assert(T.level == 1 && close_to(T.mem_s, 0.7 * 1.5 * L2 / l2bw1));
  /* ... a line past it, all from L3; on 2 threads the same set is in their two L2s, each
   * core's half within 0.7 of its L2 (each thread's share of the tasks is its own on every
   * call) ... */
  edge.read = edge.written = L2 / 2 + 64;
  sched_stream_time(&h, 1, &edge, &T);
  ck_assert(T.level == 2 && close_to(T.mem_s, (L2 + 128) / l3bw1));
  sched_stream_time(&h, 2, &edge, &T);
  ck_assert(T.level == 1 && close_to(T.mem_s, 1.5 * (L2 + 128) / (2 * l2bw1)));
  /* ... where a half is past 0.7 of an L2, 0.7 of one L2 of it, the rest from L3 ... */
  edge.read = edge.written = L2;
  sched_stream_time(&h, 2, &edge, &T);
  double in2 = 0.7 * L2 / (2 * L2);
  ck_assert(T.level == 2 && close_to(T.mem_s, in2 * 1.5 * (2 * L2) / (2 * l2bw1) + (1 - in2) * (2 * L2) / (2 * l3bw1)));
  /* ... and a set only read, each core's half within its whole L2, all from the L2s */
  SchedWork ro = {.ops = 0, .elem_bytes = 4, .read = 1.9 * L2, .written = 0, .tasks = 8};
  sched_stream_time(&h, 2, &ro, &T);
  ck_assert_msg(T.level == 1 && close_to(T.mem_s, 1.9 * L2 / (2 * l2bw1)), "a read set of 1.9 L2: %g s", T.mem_s);
}
END_TEST

/* layernorm as the stdlib writes it, in three stages over a row (test_hoisted, test_rows_in_turn) */
static const char LAYERNORM[] = "fn layernorm(X: f32[B, N], g: f32[N], be: f32[N]) -> f32[B, N] {\n"
                                "  mu[b] = (sum[n] X[b, n]) / N\n"
                                "  d[b, n] = X[b, n] - mu[b]\n"
                                "  v[b] = (sum[n] d[b, n] * d[b, n]) / N\n"
                                "  Y[b, n] = d[b, n] * rsqrt(v[b] + 1e-5) * g[n] + be[n]\n"
                                "  return Y\n}";

/* Operations that do not vary along a row run once a row: the compiler hoists them out of
 * the row's loops.  layernorm's lane-operations, counted by hand from its stages:
 *   mu[b]   = (sum[n] X[b, n]) / N          the sum's step (1) an element; a division (8) a row
 *   v[b]    = (sum[n] d * d) / N            d = X - mu twice (2), the product (1) and the step (1)
 *                                           an element; a division (8) a row
 *   Y[b, n] = d * rsqrt(v + 1e-5) * g + be  the difference (1), two products and a sum (3) an
 *                                           element; rsqrt(v + 1e-5) (16 + 1) a row
 * 9 an element and 33 a row.  Charged an element, the rsqrt made it 26 an element. */
START_TEST(test_hoisted) {
  const Program *p = lowered(LAYERNORM);
  const int64_t shapes[][2] = {{1, 1}, {1, 768}, {2047, 1024}, {13, 7}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t B = shapes[s][0], N = shapes[s][1];
    ck_assert_int_eq(at(cost_kernel_ops(NULL, p, &p->kernels[0], pc), B, N), 9 * B * N + 33 * B);
  }
  /* inside a reduction too: exp(c[b]) does not vary along n, so it runs once a row */
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
  const char *rd = "fn f(X: f32[B, N], c: f32[B]) -> f32[B] {\n"
                   "  Y[b] = sum[n] X[b, n] * exp(c[b])\n"
                   "  return Y\n}";
  p = lowered(rd);
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    ck_assert_int_eq(at(cost_kernel_ops(&h, p, &p->kernels[0], pc), 33, 1000), 2 * 33 * 1000 + exp_ops(&h) * 33);
  }
}
END_TEST

/* The vector pipes' rate is a core's share of the f32 peak, so a peak that dyn --calibrate
 * measured (hw_set_measured_peak) sets it: at 1.6 times the file's peak, an element-wise
 * kernel in L1 computes in 1 / 1.6 of the time. */
START_TEST(test_measured_peak) {
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    for (int e = 2; e <= 8; e *= 2)
      ck_assert(close_to(sched_lane_ops_rate(&h, 2, e), lanes_rate(&h, 2, e)));
    SchedWork w = {.ops = 21 * 1000.0, .elem_bytes = 4, .read = 4000, .written = 4000, .tasks = 1};
    SchedTerms a, b;
    sched_stream_time(&h, 1, &w, &a);
    hw_set_measured_peak(&h, 1.6 * h.peak_gflops_f32);
    sched_stream_time(&h, 1, &w, &b);
    ck_assert_msg(close_to(b.comp_s, a.comp_s / 1.6), "%s: %g s, was %g", h.name, b.comp_s, a.comp_s);
    ck_assert(close_to(sched_lane_ops_rate(&h, 2, 8), 1.6 * lanes_rate(&h, 2, 8)));
    /* More vector pipes than FMA pipes: a compute-bound stream's time falls by their ratio,
     * the calibrated peak (FMAs) unchanged. */
    int fma = h.fma_units, was = h.vec_units > fma ? h.vec_units : fma;
    h.vec_units = 2 * was;
    sched_stream_time(&h, 1, &w, &a);
    ck_assert_msg(close_to(a.comp_s, b.comp_s / 2), "%s: %g s with %d vector pipes, was %g", h.name,
                  a.comp_s, h.vec_units, b.comp_s);
    h.vec_units = fma - 1;                  /* fewer than the FMA pipes: the FMA pipes' rate */
    sched_stream_time(&h, 1, &w, &a);
    ck_assert(close_to(a.comp_s, b.comp_s * was / fma));
  }
}
END_TEST

/* An attention's softmax: 23 lane-operations a score where the fused kernel folds the scale
 * into the exponent's FMA (the exponential's 20, the maximum, the FMA and the sum's step), 24
 * with the scale's product, 31 where the scale is a division (8), at the vector pipes' rate,
 * threads beyond the model's cores adding nothing. */
START_TEST(test_attn_softmax) {
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    const double scores[] = {1, 77 * 77 * 12, 16.0 * 512 * 512};
    for (size_t i = 0; i < sizeof scores / sizeof scores[0]; i++)
      for (int t = 1; t <= 2; t++) {
        ck_assert(close_to(cost_attn_softmax_time(&h, t, scores[i], ATTN_SCALE_FOLDED),
                           23 * scores[i] / lanes_rate(&h, t, 4)));
        ck_assert(close_to(cost_attn_softmax_time(&h, t, scores[i], ATTN_SCALE_MUL), 24 * scores[i] / lanes_rate(&h, t, 4)));
        ck_assert(close_to(cost_attn_softmax_time(&h, t, scores[i], ATTN_SCALE_DIV), 31 * scores[i] / lanes_rate(&h, t, 4)));
      }
    ck_assert(close_to(cost_attn_softmax_time(&h, 4 * h.cores, 1e6, ATTN_SCALE_MUL), 24e6 / lanes_rate(&h, h.cores, 4)));
  }
}
END_TEST

#ifdef HAVE_LLVM
#include "cpu_int.h"

/* Does the model's CPU mask vector lanes (AVX-512's masked loads and stores, which some
 * kernels take): read from its file's features, never from the host (test_masks_lanes
 * checks the predicate on feature strings of each kind). */
static bool masks_lanes(const HwModel *h) { return cpu_masks_lanes(h->llvm_features); }

START_TEST(test_masks_lanes) {
  ck_assert(cpu_masks_lanes("+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl"));
  ck_assert(!cpu_masks_lanes("+avx,+avx2,+fma,+f16c"));
  ck_assert(!cpu_masks_lanes("+neon,+sve,+sve2"));
  ck_assert(!cpu_masks_lanes(""));
}
END_TEST

/* The streaming time of f32 work on t threads and `tasks` tasks, from the file's figures. */
static double stream_want(const HwModel *h, int t, int64_t tasks, double ops, double rd, double wr) {
  int tt = tasks < t ? (int)tasks : t;
  if (tt > h->cores) tt = h->cores;
  double mem = mem_time(h, rd, wr, false, tt), comp = ops / lanes_rate(h, tt, 4);
  return fmax(mem, comp) + (tt > 1 ? SYNC_S : 0);
}

/* A column sum's reduced extent split over the threads (cpu_reduce_split): where its kept
 * extent makes one task (under 32768 elements, cpu_rt.c's rule), the R rows go in twice the
 * model's cores pieces, priced as the same bytes on those pieces plus the partials combined
 * (each piece's row of K read again, the result written, on one thread), against the kernel
 * on one task; it splits where that is shorter.  Kept extents that fill the cores, a single
 * row and no rows keep the kernel's own tasks. */
START_TEST(test_reduce_split) {
  const Program *p = lowered("fn cs(X: f32[R, K]) -> f32[K] {\n  Y[k] = sum[r] X[r, k]\n  return Y\n}");
  const Kernel *kn = &p->kernels[0];
  int ar = -1, ak = -1;
  for (int a = 0; a < p->naxes; a++) {
    if (!strcmp(p->axes[a].name, "r")) ar = a;
    if (!strcmp(p->axes[a].name, "k")) ak = a;
  }
  ck_assert(ar >= 0 && ak >= 0 && kn->nstages == 1);
  CKernel ck = {.kn = kn, .par_axis = ak};
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    const int64_t shapes[][2] = {{4096, 4096}, {6007, 17}, {1000, 33}, {100000, 1}, {7, 100000}, {1, 4096}, {0, 4096},
                                 {2 * (int64_t)h.cores - 1, 4099}, {2 * (int64_t)h.cores + 1, 4099}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      int64_t R = shapes[s][0], K = shapes[s][1], ext[64] = {0};
      ext[ar] = R;
      ext[ak] = K;
      CpuRedSplit sp;
      bool got = cpu_reduce_split(&h, p, &ck, ext, NULL, NULL, &sp);
      int64_t pieces = R < 2 * h.cores ? R : 2 * h.cores, tasks = K < 32768 ? 1 : (K < 4 * h.cores ? K : 4 * h.cores);
      double n = (double)R * K;
      bool want = false;
      if (R >= 2 && tasks < h.cores) {
        double now = stream_want(&h, h.cores, tasks, n, 4 * n, 4.0 * K);
        double split = stream_want(&h, h.cores, pieces, n, 4 * n, 4.0 * K) +
                       stream_want(&h, 1, 1, (double)K * (pieces - 1), 4.0 * K * pieces, 4.0 * K);
        want = split < now;
        if (got) {
          ck_assert_int_eq(sp.axis, ar);
          ck_assert_int_eq(sp.pieces, pieces);
          ck_assert_int_eq(sp.kept, K);
          ck_assert_msg(close_to(sp.t_now, now) && close_to(sp.t_split, split), "%s %lld x %lld: %g / %g s, derived %g / %g",
                        h.name, (long long)R, (long long)K, sp.t_now, sp.t_split, now, split);
        }
      }
      ck_assert_msg(got == want, "%s %lld x %lld: split %d, derived %d", h.name, (long long)R, (long long)K, got, want);
      /* the column sums: memory-bound, the split's cores beat one core's bandwidth */
      if (s == 0) ck_assert_msg(got, "%s: 4096 x 4096 column sums not split", h.name);
    }
  }
}
END_TEST

/* The tasks of softmax's fused row kernel (cpu_task_count): a row's work is the sum of its
 * stages' (each of max, exp, sum and divide passes over the N elements once), and the rows
 * split into four tasks a thread, or one a row, once the rows' work reaches 32768.  Rows of
 * 100003 ran on one thread where the stages' work was multiplied: 100003^4 overflowed. */
START_TEST(test_task_count) {
  const Program *p = lowered("fn softmax(X: f32[B, N]) -> f32[B, N] {\n"
                             "  m[b] = max[n] X[b, n]\n"
                             "  e[b, n] = exp(X[b, n] - m[b])\n"
                             "  s[b] = sum[n] e[b, n]\n"
                             "  Y[b, n] = e[b, n] / s[b]\n"
                             "  return Y\n}");
  const Kernel *kn = &p->kernels[0];
  int par = cpu_par_axis(kn);       /* the rows; each statement has its own b and n axes */
  ck_assert(par >= 0 && !strcmp(p->axes[par].name, "b") && kn->nstages == 4);
  const int64_t shapes[][2] = {{7, 100003}, {7, 1170}, {7, 1171}, {1000, 7}, {1000, 9}, {3, 1LL << 40}, {1, 100003},
                               {0, 100003}, {100003, 0}};
  for (int threads = 1; threads <= 16; threads *= 2)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      int64_t B = shapes[s][0], N = shapes[s][1], ext[64] = {0};
      for (int a = 0; a < p->naxes; a++) ext[a] = strcmp(p->axes[a].name, "b") ? N : B;
      double work = 4.0 * (N > 1 ? N : 1);
      int64_t want = (double)B * work < 32768 ? 1 : B < 4 * threads ? B : 4 * threads;
      int64_t got = cpu_task_count(kn, par, ext, threads);
      ck_assert_msg(got == (want > 0 ? want : 1), "%lld x %lld on %d threads: %lld tasks, derived %lld", (long long)B,
                    (long long)N, threads, (long long)got, (long long)want);
    }
  /* the shape: seven rows of 100003 on two threads run on all of them */
  int64_t ext[64] = {0};
  for (int a = 0; a < p->naxes; a++) ext[a] = strcmp(p->axes[a].name, "b") ? 100003 : 7;
  ck_assert_int_gt(cpu_task_count(kn, par, ext, 2), 1);
}
END_TEST

/* The split of the parallel axis (cpu_task_split): the tasks cover the axis once, in order,
 * each starting on a whole granule (a tile's rows for a transpose, one row else), their
 * sizes a granule apart at most; the busiest thread's share is what the pool's contiguous
 * shares of tasks give it (pool.c), at most a granule or a task past an even share.
 * Softmax over f32[33, 1000] on 2 threads: 8 tasks, 17 rows the most (chunks of
 * ceil(33 / 8) gave 7 tasks, 20 rows on one thread). */
START_TEST(test_task_split) {
  const char *texts[] = {"fn softmax(X: f32[B, N]) -> f32[B, N] {\n"
                         "  m[b] = max[n] X[b, n]\n"
                         "  e[b, n] = exp(X[b, n] - m[b])\n"
                         "  s[b] = sum[n] e[b, n]\n"
                         "  Y[b, n] = e[b, n] / s[b]\n"
                         "  return Y\n}",
                         "fn t(X: f32[B, N]) -> f32[N, B] {\n  Y[n, b] = X[b, n]\n  return Y\n}"};
  const int64_t shapes[][2] = {{33, 1000}, {1000, 33}, {97, 1021}, {4096, 4096}, {1, 100003}, {100003, 1}, {17, 17}};
  for (size_t k = 0; k < 2; k++) {
    const Program *p = lowered(texts[k]);
    const Kernel *kn = &p->kernels[0];
    int par = cpu_par_axis(kn);
    ck_assert(par >= 0);
    for (int vb = 256; vb <= 512; vb *= 2)
      for (int threads = 1; threads <= 16; threads++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
          int64_t ext[64] = {0};
          for (int a = 0; a < p->naxes; a++) ext[a] = p->axes[a].name[0] == 'b' ? shapes[s][0] : shapes[s][1];
          CpuSplit sp = cpu_task_split(kn, par, -1, ext, vb, threads);
          int64_t n = ext[par], g = sp.gran, want = cpu_task_count(kn, par, ext, threads), units = (n + g - 1) / g;
          ck_assert_int_eq(g, k == 1 && kn->nstages == 1 && cpu_blocked_axis(kn, &kn->stages[0]) == par ? vb / 32 : 1);
          ck_assert_int_eq(sp.tasks, want < units ? want : units);
          int64_t next = 0, lo, hi, least = n, most = 0;
          for (int64_t t = 0; t < sp.tasks; t++) {
            lo = cpu_split_range(&sp, t, &hi);
            ck_assert_msg(lo == next && hi > lo && lo % g == 0, "task %lld of %lld: [%lld, %lld)", (long long)t,
                          (long long)sp.tasks, (long long)lo, (long long)hi);
            if (hi < n) least = hi - lo < least ? hi - lo : least;
            most = hi - lo > most ? hi - lo : most;
            next = hi;
          }
          ck_assert_int_eq(next, n);
          ck_assert_msg(most - least <= g, "%lld x %lld: tasks of %lld to %lld", (long long)shapes[s][0],
                        (long long)shapes[s][1], (long long)least, (long long)most);
          /* the busiest participant: its contiguous share of the tasks, as the pool deals them */
          int tt = threads < sp.tasks ? threads : (int)sp.tasks;
          int64_t busiest = 0;
          for (int i = 0; i < tt; i++) {
            int64_t a = sp.tasks * i / tt, b = sp.tasks * (i + 1) / tt, rows = 0;
            for (int64_t t = a; t < b; t++) rows += (lo = cpu_split_range(&sp, t, &hi), hi - lo);
            busiest = rows > busiest ? rows : busiest;
          }
          ck_assert(close_to(cpu_split_busiest(&sp, threads), (double)busiest / (double)n));
        }
  }
  const Program *p = lowered(texts[0]);
  int64_t ext[64] = {0};
  for (int a = 0; a < p->naxes; a++) ext[a] = p->axes[a].name[0] == 'b' ? 33 : 1000;
  CpuSplit sp = cpu_task_split(&p->kernels[0], cpu_par_axis(&p->kernels[0]), -1, ext, 512, 2);
  ck_assert_int_eq(sp.tasks, 8);
  ck_assert(close_to(cpu_split_busiest(&sp, 2), 17.0 / 33));
}
END_TEST

/* A scan down the columns splits its last axis among the tasks (cpu_par_axis never takes
 * the scanned one): each task's run of a row is at least a page (4 KiB), unless that would
 * leave a thread without a task, and never more tasks than columns. */
/* The axis split where the parallel one has too few values (cpu_sub_axis): the next outer
 * one, where every access subscripts it by itself alone, in one dimension a slot; and the
 * split takes it where the parallel axis leaves threads idle and it gives more tasks.
 * f32[1, 1024, 1024] element-wise ran on one of two threads. */
static int slot_named(const Program *p, const char *name) {
  for (int i = 0; i < p->nslots; i++)
    if (!strcmp(p->slots[i].name, name)) return i;
  ck_abort_msg("no slot %s", name);
  return -1;
}

START_TEST(test_sub_axis) {
  static const struct { const char *text, *sub, *dims; } cases[] = {
    /* element-wise, a broadcast operand subscripted by b in its first dimension, and one
     * that b does not subscript */
    {"fn f(X: f32[A, B, C], v: f32[B], u: f32[C]) -> f32[A, B, C] {\n"
     "  Y[a, b, c] = exp(X[a, b, c]) * v[b] + u[c]\n  return Y\n}", "b", "X1 v0 u- Y1"},
    /* rows of a 3-D softmax: the outer axes a, b, its per-row locals never subscripted by b */
    {"fn f(X: f32[A, B, N]) -> f32[A, B, N] {\n  m[a, b] = max[n] X[a, b, n]\n"
     "  e[a, b, n] = exp(X[a, b, n] - m[a, b])\n  s[a, b] = sum[n] e[a, b, n]\n"
     "  Y[a, b, n] = e[a, b, n] / s[a, b]\n  return Y\n}", "b", "X1 Y1"},
    /* nn's padding: y and x in its conditions, c only a subscript */
    {"fn f(X: f32[N, C, H, W]) -> f32[N, C, H + 2, W + 2] {\n"
     "  Xp[n, c, y, x]: f32[N, C, H + 2, W + 2] = where(y >= 1 and y < H + 1 and x >= 1 and x < W + 1, "
     "X[n, c, y - 1, x - 1], 0.0)\n  return Xp\n}", "c", "X1 Xp1"},
    /* a matrix's rows, element-wise: pieces of each row */
    {"fn f(X: f32[A, B]) -> f32[A, B] {\n  Y[a, b] = exp(X[a, b])\n  return Y\n}", "b", "X1 Y1"},
    {"fn f(X: f32[A, B, C]) -> f32[A, B] {\n  Y[a, b] = sum[c] X[a, b, c]\n  return Y\n}", NULL, NULL},
    /* b's value in the arithmetic, in a compound subscript, twice in one load, in two
     * dimensions of one slot, and summed */
    {"fn f(X: f32[A, B, C]) -> f32[A, B, C] {\n  Y[a, b, c] = X[a, b, c] * b\n  return Y\n}", NULL, NULL},
    {"fn f(X: f32[A, B, C], B1: size) -> f32[A, B1, C] where B1 + 1 <= B {\n  Y[a, b, c] = X[a, b + 1, c]\n"
     "  return Y\n}", NULL, NULL},
    {"fn f(X: f32[A, B, B], C: size) -> f32[A, B, C] {\n  Y[a, b, c] = X[a, b, b]\n  return Y\n}", NULL, NULL},
    {"fn f(X: f32[A, B, C, D], Z: f32[C, B, D]) -> f32[A, B, C, D] {\n"
     "  Y[a, b, c, d] = X[a, b, c, d] + Z[c, b, d]\n  return Y\n}", "b", "X1 Z1 Y1"},
    /* a layout change keeps its tiles */
    {"fn f(X: f32[A, B, C], Z: f32[A, C, B]) -> f32[A, B, C] {\n  Y[a, b, c] = X[a, b, c] + Z[a, c, b]\n"
     "  return Y\n}", NULL, NULL},
    {"fn f(X: f32[A, B, C], Z: f32[B, B]) -> f32[A, B, C] {\n  Y[a, b, c] = X[a, b, c] + Z[b, 0]\n"
     "  return Y\n}", "b", "X1 Z0 Y1"},
    /* a slot read both with b and without it */
    {"fn f(X: f32[A, B, C]) -> f32[A, B, C] {\n  Y[a, b, c] = X[a, b, c] + X[a, 0, c]\n  return Y\n}", NULL, NULL},
    {"fn f(X: f32[A, B, C]) -> f32[A, C] {\n  Y[a, c] = sum[b] X[a, b, c]\n  return Y\n}", NULL, NULL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const Program *p = lowered(cases[k].text);
    const Kernel *kn = &p->kernels[p->nkernels - 1];
    int8_t dims[CPU_SUB_SLOTS];
    uint64_t mask;
    int par = cpu_par_axis(kn), sub = cpu_sub_axis(p, kn, par, dims, &mask);
    if (!cases[k].sub) {
      ck_assert_msg(sub < 0, "case %zu: split %s", k, sub >= 0 ? p->axes[sub].name : "");
      continue;
    }
    ck_assert_msg(sub >= 0 && !strcmp(p->axes[sub].name, cases[k].sub), "case %zu: %s", k, sub >= 0 ? p->axes[sub].name : "none");
    char want[64], *save = NULL;
    snprintf(want, sizeof want, "%s", cases[k].dims);
    for (char *w = strtok_r(want, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
      size_t n = strlen(w);
      char name[16];
      snprintf(name, sizeof name, "%.*s", (int)(n - 1), w);
      int d = dims[slot_named(p, name)];
      ck_assert_msg(w[n - 1] == '-' ? d == -1 : d == w[n - 1] - '0', "case %zu: %s in dimension %d", k, name, d);
    }
    /* the split: at A = 1 over b on every thread count where b gives more tasks; never where
     * a alone gives each thread a task */
    for (int vb = 256; vb <= 512; vb *= 2)
      for (int threads = 1; threads <= 16; threads *= 2) {
        const int64_t shapes[][2] = {{1, 1024}, {1, 1}, {3, 1024}, {16, 1024}, {1, 7}, {1, 12}, {1, 100003}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
          int64_t ext[64] = {0};
          for (int a = 0; a < p->naxes; a++) ext[a] = a == par ? shapes[s][0] : shapes[s][1];
          CpuSplit whole = cpu_task_split(kn, par, -1, ext, vb, threads), sp = cpu_task_split(kn, par, sub, ext, vb, threads);
          /* a row's pieces start on a whole vector of the target's f32 (vb / 32 lanes) */
          int64_t g = kn->stages[0].axes[kn->stages[0].naxes - 1] == sub && !kn->nouter ? vb / 32 : 1;
          int64_t more = cpu_task_count(kn, sub, ext, threads), units = (ext[sub] + g - 1) / g;
          bool want_sub = whole.tasks < threads && (more < units ? more : units) > whole.tasks;
          ck_assert_msg(sp.sub == want_sub, "case %zu, %lld x %lld on %d threads", k, (long long)shapes[s][0],
                        (long long)shapes[s][1], threads);
          if (want_sub) {
            ck_assert_int_eq(sp.n, ext[sub]);
            ck_assert_int_eq(sp.gran, g);
            for (int64_t t = 0, hi; t < sp.tasks; t++) ck_assert_int_eq(cpu_split_range(&sp, t, &hi) % g, 0);
          }
        }
      }
  }
  /* the shape: element-wise f32[1, 1024, 1024] on 2 threads in 8 tasks */
  const Program *p = lowered(cases[0].text);
  const Kernel *kn = &p->kernels[0];
  int8_t dims[CPU_SUB_SLOTS];
  uint64_t mask;
    int par = cpu_par_axis(kn), sub = cpu_sub_axis(p, kn, par, dims, &mask);
  int64_t ext[64] = {0};
  for (int a = 0; a < p->naxes; a++) ext[a] = a == par ? 1 : 1024;
  CpuSplit sp = cpu_task_split(kn, par, sub, ext, 512, 2);
  ck_assert(sp.sub && sp.tasks == 8);
}
END_TEST

START_TEST(test_task_count_runs) {
  const Program *p = lowered("fn down(X: f32[M, N]) -> f32[M, N] {\n"
                             "  Y[i, j] = scan[i] +(X[i, j])\n"
                             "  return Y\n}");
  const Kernel *kn = &p->kernels[0];
  int par = cpu_par_axis(kn);
  ck_assert(par >= 0 && !strcmp(p->axes[par].name, "j"));
  const int64_t shapes[][2] = {{2048, 2048}, {4096, 1024}, {100000, 3}, {64, 100003}, {9000, 1024}, {1, 1 << 20}};
  for (int threads = 1; threads <= 16; threads *= 2)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      int64_t M = shapes[s][0], N = shapes[s][1], ext[64] = {0};
      for (int a = 0; a < p->naxes; a++) ext[a] = strcmp(p->axes[a].name, "j") ? M : N;
      int64_t got = cpu_task_count(kn, par, ext, threads);
      ck_assert_msg(got >= 1 && got <= N, "%lld x %lld: %lld tasks", (long long)M, (long long)N, (long long)got);
      if (got > 1)
        ck_assert_msg(got <= threads || N * 4 / got >= 4096, "%lld x %lld on %d threads: %lld tasks, runs of %lld bytes",
                      (long long)M, (long long)N, threads, (long long)got, (long long)(N * 4 / got));
      if (M * N >= 32768 && N >= threads && N * 4 / threads >= 4096)
        ck_assert_msg(got >= threads, "%lld x %lld on %d threads: %lld tasks", (long long)M, (long long)N, threads, (long long)got);
    }
}
END_TEST

/* A reduction's innermost runs past their last whole vector (cpu_reduce_run_ops): sums over
 * a last axis of k cost a cycle for each of the k mod lanes elements past the last vector and
 * 3 more a run, in lane-operations at the vector pipes' rate of one core; a kept innermost
 * run (column sums, its result loaded and stored again) two cycles an element.  Runs as
 * long as a whole number of vectors cost only the 3.  Rows shorter than a vector (than 5
 * with AVX-512's masked loads) on a model with gathers (x86 with AVX2 or AVX-512) go
 * `lanes` at a time, a row in each lane:
 * a gather of the model's cycles a lane (one unless it says) for each of the k columns, the
 * lanes' stores and the 3; rows of a vector to 256 elements `lanes` at a time as well, each
 * row's last vector 2 cycles (a row shorter than a vector, one masked load, 1) and each
 * group 3 and 2 for each of its lanes - 1 fold steps
 * (beside the whole vectors' lane-operations, which cost.c counts). */
START_TEST(test_reduce_runs) {
  const Program *p = lowered("fn rs(X: f32[R, K]) -> f32[R] {\n  Y[r] = sum[k] X[r, k]\n  return Y\n}");
  int ar = p->axes[0].name[0] == 'r' ? 0 : 1, ak = 1 - ar;
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int lanes = h.vector_bits / 32;
    const int64_t ks[] = {1, 4, 5, 7, lanes - 1, lanes, lanes + 1, 3 * lanes, 256, 257, 1000};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
      int64_t ext[2];
      ext[ar] = 100000;
      ext[ak] = ks[i];
      /* the file's CPU has AVX2's gathers or AVX-512's (x86); the Arm ones have none */
      bool gathers = strcmp(h.arch, "aarch64") != 0 &&
                     (strstr(h.llvm_features, "+avx2") != NULL || strstr(h.llvm_features, "+avx512f") != NULL);
      CpuShortPlan rp;
      ck_assert_msg(cpu_reduce_rows_plan(&h, p, &p->kernels[0], 0, &rp) == gathers, "%s: rows plan", h.name);
      double g = h.gather_lane_cycles > 0 ? h.gather_lane_cycles : 1;
      /* with AVX-512's masked loads, rows of 5 and more go in vectors too */
      int64_t least = masks_lanes(&h) && lanes > 5 ? 5 : lanes;
      double cyc = gathers && ks[i] < least ? (double)((100000 + lanes - 1) / lanes) * (ks[i] * lanes * g + lanes + 3)
                 : gathers && ks[i] <= 256    ? 100000.0 * (ks[i] < lanes ? 1 : 2) + 100000.0 / lanes * (3 + 2 * (lanes - 1))
                                              : 100000.0 * ((double)(ks[i] % lanes) + 3);
      double want = cyc * lanes_rate(&h, 1, 4) / (h.ghz * 1e9);
      double got = cpu_reduce_run_ops(&h, p, &p->kernels[0], ar, ext);
      ck_assert_msg(close_to(got, want), "%s: 100000 x %lld: %g lane-ops, derived %g", h.name, (long long)ks[i], got, want);
    }
  }
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
  p = lowered("fn cs(X: f32[R, K]) -> f32[K] {\n  Y[k] = sum[r] X[r, k]\n  return Y\n}");
  ar = p->axes[0].name[0] == 'r' ? 0 : 1, ak = 1 - ar;
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int lanes = h.vector_bits / 32;
    int64_t ext[2];
    ext[ar] = 1021;
    ext[ak] = (int64_t)lanes * h.vec_regs + 7;   /* a lane pattern of more vectors than short runs take */
    double want = 1021.0 * (2.0 * (7 % lanes) + 3) * lanes_rate(&h, 1, 4) / (h.ghz * 1e9);
    ck_assert(close_to(cpu_reduce_run_ops(&h, p, &p->kernels[0], ak, ext), want));
  }
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
  /* a folded plan, [a reduced][b kept][d reduced]: innermost runs of a vector to 4 vectors
   * go `lanes` results at a time, each run's last vector 2 cycles and each group 2 for each
   * of its lanes - 1 fold steps and a cycle for each of its stores, or where more, its runs'
   * loads in the L1 (d / lanes + 1 vectors a run at the L1's bytes a cycle, one crossing a
   * line twice, less its whole vectors at the vector rate), and 3 a step of a; runs of 4
   * vectors or more the loops' 3 a run */
  p = lowered("fn fo(X: f32[A, B, D]) -> f32[B] {\n  Y[b] = sum[a, d] X[a, b, d]\n  return Y\n}");
  int xa = -1, xb = -1, xd = -1;
  for (int a = 0; a < p->naxes; a++) {
    if (!strcmp(p->axes[a].name, "a")) xa = a;
    if (!strcmp(p->axes[a].name, "b")) xb = a;
    if (!strcmp(p->axes[a].name, "d")) xd = a;
  }
  ck_assert(xa >= 0 && xb >= 0 && xd >= 0);
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int lanes = h.vector_bits / 32 > 16 ? 16 : h.vector_bits / 32;
    const int64_t ds[] = {lanes, lanes + 1, 4 * lanes};
    for (int i = 0; i < 3; i++) {
      int64_t d = ds[i], ext[3];
      ext[xa] = 13;
      ext[xb] = 100;
      ext[xd] = d;
      int64_t V = lanes * 4, L = h.level[0].line, on = (d * 4) & -(d * 4);
      if (on > L) on = L;
      double cross = V > on ? fmin(1, (double)(V - on) / (double)L) : 0, whole = (double)(d / lanes);
      double loads = (whole + 1) * (1 + cross) * (double)V / (h.level[0].gbs / h.ghz) -
                     whole / (lanes_rate(&h, 1, 4) / (h.ghz * 1e9) / lanes);
      double runs = 13.0 * 100, groups = 100.0 / lanes, each = 13.0 * lanes;
      double cyc = d < 4 * lanes ? groups * (fmax(each * loads, each * 2 + 2 * (lanes - 1) + lanes) + 13 * 3) : runs * 3;
      double want = cyc * lanes_rate(&h, 1, 4) / (h.ghz * 1e9), got = cpu_reduce_run_ops(&h, p, &p->kernels[0], xb, ext);
      ck_assert_msg(close_to(got, want), "%s: 13 x 100 x %lld: %g lane-ops, derived %g", h.name, (long long)d, got, want);
    }
  }
}
END_TEST

/* Short kept runs (cpu_reduce.c): Y[b, k] = sum[r] X[b, r, k] with k short reads each block
 * [r x k] in whole vectors of the model's lanes (16 at most) into C vectors of
 * accumulators: a = k / gcd(k, lanes) vectors a set, ceil(chains / a) sets (chains: the FMA
 * pipes times their latency) as many as fit in half the vector registers.  Beyond a
 * lane-operation an element at the vector rate, each block costs a cycle for each vector and
 * element of its last R k mod C lanes and 3 for its loop; each result row's fold, after the
 * stream (cpu_reduce_fold_s), C + 1 cycles to start its places, the adds' latency a step of
 * the sets' fold (C / a - 1) and of the rows' (a lanes / k - 1), a cycle a result, 3 for
 * the loop and 16 for the stores the rows' loads wait for.  Patterns of more than half the
 * registers keep a run of one to 8 vectors in registers (k / lanes + 1 vectors, the last its
 * tail) over the
 * rows: each row the larger of its vectors at the L1's bytes a cycle (one crossing a line
 * twice) and the adds' latency, and the run's k
 * stores and 3 more; longer ones run the interchanged loops, two cycles an element past the
 * last vector and 3 a run. */
START_TEST(test_reduce_short) {
  const Program *p = lowered("fn sr(X: f32[B, R, K]) -> f32[B, K] {\n  Y[b, k] = sum[r] X[b, r, k]\n  return Y\n}");
  int ab = -1, ar = -1, ak = -1;
  for (int a = 0; a < p->naxes; a++) {
    if (!strcmp(p->axes[a].name, "b")) ab = a;
    if (!strcmp(p->axes[a].name, "r")) ar = a;
    if (!strcmp(p->axes[a].name, "k")) ak = a;
  }
  ck_assert(ab >= 0 && ar >= 0 && ak >= 0);
  CpuShortPlan sp;
  ck_assert(cpu_reduce_short_plan(p, &p->kernels[0], 0, &sp) && sp.v == ak && sp.r0 == ar);
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int64_t lanes = h.vector_bits / 32 > 16 ? 16 : h.vector_bits / 32, amax = h.vec_regs / 2;
    int64_t chains = h.fma_units * h.fma_latency < amax ? h.fma_units * h.fma_latency : amax;
    const int64_t ks[] = {1, 2, 3, 5, 7, lanes - 1, lanes, lanes + 1, 2 * lanes + 1, 8 * lanes + 1};
    const int64_t rs[] = {0, 1, 1021, 4096};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
      for (size_t j = 0; j < sizeof rs / sizeof rs[0]; j++) {
        int64_t K = ks[i], R = rs[j], ext[3], g = 1;
        ext[ab] = 8;
        ext[ar] = R;
        ext[ak] = K;
        while (K % (g * 2) == 0 && g * 2 <= lanes) g *= 2;
        int64_t a = K / g, u = (chains + a - 1) / a, c = (u < amax / a ? u : amax / a) * a;
        int64_t rest = R * K % (c * lanes);
        int64_t kv = K / lanes + 1, lat = h.fma_latency;
        /* rows of K floats: a vector load crosses a line at V - g of its L offsets */
        int64_t V = lanes * 4, L = h.level[0].line, on = (K * 4) & -(K * 4);
        if (on > L) on = L;
        double cross = V > on ? fmin(1, (double)(V - on) / (double)L) : 0;
        double row = fmax((double)kv * (1 + cross) * (double)V / (h.level[0].gbs / h.ghz), (double)lat);
        double cyc = a <= amax ? (double)(rest / lanes + rest % lanes + 3)
                     : K >= lanes && K <= 8 * lanes ? (double)R * row + (double)(K + 3)
                                                    : (double)R * (2.0 * (double)(K % lanes) + 3);
        double want = 8 * cyc * lanes_rate(&h, 1, 4) / (h.ghz * 1e9);
        double got = cpu_reduce_run_ops(&h, p, &p->kernels[0], ab, ext);
        ck_assert_msg(close_to(got, want), "%s: 8 x %lld x %lld: %g lane-ops, derived %g", h.name, (long long)R,
                      (long long)K, got, want);
        /* the folds, on 2 threads of which the busiest takes 1.25 of its share */
        double fold = (double)(c + 1 + (c / a - 1) * lat + (a * lanes / K - 1) * lat + K + 3 + 16);
        SchedTerms T = {.threads = 2, .imbalance = 1.25};
        want = a <= amax ? 8 * fold / (h.ghz * 1e9 * 2) * 1.25 : 0;
        got = cpu_reduce_fold_s(&h, p, &p->kernels[0], ext, &T);
        ck_assert_msg(close_to(got, want), "%s: 8 x %lld x %lld: folds %g s, derived %g", h.name, (long long)R,
                      (long long)K, got, want);
      }
  }
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
}
END_TEST

/* A layout change in tiles (cpu_layout.c), T[j, i] = X[i, j] of X f32[A, B] (u = j, v = i):
 * its bytes as an element-wise kernel's (mem_time) -- streamed where they outgrow the last
 * cache and the result's rows start on a vector (A a multiple of the lanes w), else read
 * for ownership where they come from memory -- against its tiles, w (log2 w + 1)
 * cycles each at the file's clock (a tile cut by an edge too, shifted back to end at it,
 * since T does not read itself; the model's tile_off_line (else OFF_LINE) times that where
 * T's rows of A are not whole lines apart), and EDGE_CYC an element where a side is shorter than a tile
 * (a vector a cycle where a side is 1: a copy), the larger of the two (their sum from a shared
 * cache) plus the fork-join.  The shapes keep the rows' strides off high powers
 * of two, where crowded L1 sets would cost the tiles more (test_cpu's test_layout_code). */
#define EDGE_CYC 1.5            /* cpu_layout.c's, measured there */
#define OFF_LINE 1.7            /* and a tile's cost where the result's rows are not whole lines apart,
                                   where the hw file does not say (its tile_off_line) */
static double off_line(const HwModel *h) { return h->tile_off_line > 0 ? h->tile_off_line : OFF_LINE; }

static void check_layout(const HwModel *h, int64_t A, int64_t B, int t, bool whole_tiles_only) {
  const Program *p = lowered("fn f(X: f32[A, B]) -> f32[B, A] {\n  T[j, i] = X[i, j]\n  return T\n}");
  const Kernel *kn = &p->kernels[0];
  ck_assert_int_eq(cpu_blocked_axis(kn, &kn->stages[0]), kn->stages[0].axes[0]);
  int64_t ext[8] = {0}, strides[8 * DYN_MAX_RANK] = {0};
  ck_assert(p->naxes <= 8 && p->nslots <= 8);
  for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "i") ? A : B;
  for (int s = 0; s < p->nslots; s++) {
    strides[s * DYN_MAX_RANK] = p->slots[s].kind == SLOT_INPUT ? B : A;
    strides[s * DYN_MAX_RANK + 1] = 1;
  }
  double bytes = 4.0 * A * B, llc = (double)sched_last_cache_bytes(h);
  int w = h->vector_bits / 32 > 16 ? 16 : h->vector_bits / 32, lg = 0;
  while ((1 << lg) < w) lg++;
  /* the runtime's tasks along j (u, of B), each of the nt threads at work a contiguous
   * share of them: a task whose share of j is shorter than a tile runs the plain loops; the
   * busiest thread's */
  int par = kn->stages[0].axes[0];
  CpuSplit sp = cpu_task_split(kn, par, -1, ext, h->vector_bits, t);
  int nt = sp.tasks < t ? (int)sp.tasks : t;
  bool streamed = 2 * bytes > llc && A % w == 0;
  int lv = level_of(h, streamed ? bytes : 2 * bytes, streamed ? 0 : bytes, nt);
  bool rfo = lv == h->nlevels - 1 && !streamed;
  int64_t line = h->nlevels > 1 && h->level[0].line > 0 ? h->level[0].line : 64;
  double off = 4 * A % line ? off_line(h) : 1, busiest = 0;
  for (int th = 0; th < nt; th++) {
    double cyc = 0;
    for (int64_t k = sp.tasks * th / nt; k < sp.tasks * (th + 1) / nt; k++) {
      int64_t hi, lo = cpu_split_range(&sp, k, &hi), r = hi - lo;
      double ntiles = 0, whole = 0;
      if (A >= w && r >= w) {        /* tiles cut by an edge shifted back to end at it: whole */
        ntiles = (double)((r + w - 1) / w) * (double)((A + w - 1) / w);
        whole = (double)A * r;
      }
      double edge = A == 1 || r == 1 ? 1.0 / w : EDGE_CYC;
      cyc += ntiles * w * (lg + 1) * off + ((double)A * r - whole) * edge;
    }
    busiest = cyc > busiest ? cyc : busiest;
  }
  double tiles = busiest / (h->ghz * 1e9), share = cpu_split_busiest(&sp, t);
  double mem = mem_time_of(h, bytes, bytes, streamed, nt, share * nt > 1 ? share * nt : 1);
  SchedTerms T;
  double got = cpu_layout_time(h, p, kn, ext, strides, t, bytes, bytes, 2 * bytes > llc, &sp, par, &T);
  bool waits = lv < h->nlevels - 1 && h->level[lv].shared_by > 1;     /* a shared cache: they add */
  double want = (waits ? mem + tiles : fmax(mem, tiles)) + (nt > 1 ? SYNC_S : 0);
  ck_assert_msg(close_to(T.mem_s, mem) && T.memory == rfo, "%s %lld x %lld: memory %g s, derived %g (%s)", h->name,
                (long long)A, (long long)B, T.mem_s, mem, rfo ? "read for ownership" : "no reads for ownership");
  if (whole_tiles_only || mem < tiles)
    ck_assert_msg(close_to(T.comp_s, tiles), "%s %lld x %lld: tiles %g s, derived %g", h->name, (long long)A, (long long)B,
                  T.comp_s, tiles);
  ck_assert_msg(close_to(got, want), "%s %lld x %lld on %d: %g s, derived %g", h->name, (long long)A, (long long)B, t, got,
                want);
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
}

/* Tiles cut by an edge are shifted whole (cpu.c's gen_blocked); where the target masks
 * lanes and the result's rows are whole vectors apart but start off a vector, a row's tiles
 * start where its row meets a vector, after one at v0 (cpu_layout.c's row_tiles).  Y[a, d, b,
 * c] = X[a, b, c, d] of X f32[1, 4, C, 2w], C = w + 3w/4 (rows C apart, 4 C a multiple of w):
 * the tiles of each row b, counted from its start, b C mod w past a vector, one thread in
 * L1, against the model's tile time (off_line times, where rows of B C are not whole lines). */
static void check_row_tiles(const HwModel *h) {
  const Program *p = lowered("fn f(X: f32[A, B, C, D]) -> f32[A, D, B, C] {\n  Y[a, d, b, c] = X[a, b, c, d]\n  return Y\n}");
  const Kernel *kn = &p->kernels[0];
  int w = h->vector_bits / 32 > 16 ? 16 : h->vector_bits / 32, lg = 0;
  while ((1 << lg) < w) lg++;
  int64_t A = 1, B = 4, C = w + 3 * w / 4, D = 2 * w;
  int64_t ext[8] = {0}, strides[8 * DYN_MAX_RANK] = {0};
  ck_assert(p->naxes <= 8 && p->nslots <= 8);
  for (int a = 0; a < p->naxes; a++) {
    const char *n = p->axes[a].name;
    ext[a] = !strcmp(n, "a") ? A : !strcmp(n, "b") ? B : !strcmp(n, "c") ? C : D;
  }
  for (int s = 0; s < p->nslots; s++) {
    int64_t *st = strides + s * DYN_MAX_RANK;
    bool in = p->slots[s].kind == SLOT_INPUT;
    st[0] = B * C * D, st[1] = in ? C * D : B * C, st[2] = in ? D : C, st[3] = 1;
  }
  double rows = 0;
  for (int64_t b = 0; b < B; b++) {
    int64_t skew = (w - b * C % w) % w;
    rows += masks_lanes(h) && skew ? 1 + (C - skew + w - 1) / w : (C + w - 1) / w;
  }
  double tiles = (double)(D / w) * rows * A, bytes = 4.0 * A * B * C * D;
  SchedTerms T;
  cpu_layout_time(h, p, kn, ext, strides, 1, bytes, bytes, false, NULL, -1, &T);
  int64_t line = h->nlevels > 1 && h->level[0].line > 0 ? h->level[0].line : 64;
  double want = tiles * w * (lg + 1) * (4 * B * C % line ? off_line(h) : 1) / (h->ghz * 1e9);
  ck_assert_msg(close_to(T.comp_s, want), "%s: tiles %g s, derived %g (%g tiles)", h->name, T.comp_s, want, tiles);
  lower_free(fn->code.prog);
  fn->code.prog = NULL;
}

START_TEST(test_layout) {
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    check_layout(&h, 48, 80, 1, true);         /* in L1, whole tiles: the shuffles */
    check_layout(&h, 37, 53, 1, true);         /* tiles and edges */
    check_layout(&h, 7, 8191, 2, true);        /* no whole tile: the plain loops */
    check_layout(&h, 4001, 31, 2, true);       /* a task of 15 values of u: the plain loops */
    check_layout(&h, 1, 30011, 2, true);       /* a side of 1: a copy */
    check_layout(&h, 30011, 1, 2, true);
    check_layout(&h, 4112, 4104, 2, false);    /* streamed: the bytes once */
    check_layout(&h, 4099, 4104, 2, false);    /* rows off the vector: read for ownership */
    check_layout(&h, 720, 400, 2, false);      /* in a cache of two cores */
    check_row_tiles(&h);
  }
}
END_TEST
#endif

#ifdef HAVE_LLVM
/* Fused attention's row path (cpu_attn.c): a group of up to 4 query rows a task reads K and V
 * once (bytes at the level the call's data fits, again for each further group of a batch
 * index at the level one head's fits), lane-operations for the FMAs of both products over
 * 16-lane vectors with their loads ((rows + 1) / rows a FMA) and 13 / 4 vectors a score to
 * sum at the FMA pipes' rate, overlapping the bytes; then the softmax's at the vector pipes'
 * and each task's setting up, which do not; and the fork-join where it runs on more than one
 * thread, which it does only when that is faster. */
static double rows_want(const HwModel *h, int threads, int64_t B, int64_t S, int64_t T, int64_t D, int64_t E,
                        bool *serial) {
  int64_t groups = B * ((S + 3) / 4);
  double rows = (double)B * S / groups, keys = (double)groups * T;
  double ops = keys * rows * ((double)(((D + 15) / 16 + (E + 15) / 16) * 16) * (rows + 1) / rows + 13 * 16 / 4.0);
  double head = 4.0 * T * (D + E), once = head * B + 4.0 * B * S * (D + E), again = head * (groups - B);
  double best = 0;
  for (int t = 1; t <= threads; t += threads > 1 ? threads - 1 : 1) {
    int u = t < groups ? t : (int)groups;
    u = u < h->cores ? u : h->cores;
    double mem = once / bw_of(h, fit_of(h, once, u), u) + again / bw_of(h, fit_of(h, head, 1), u);
    /* the softmax, and each task's 200 cycles of setting up and storing, between the phases
     * that stream K and V */
    double dots = ops / fma_rate(h, u, 4), soft = 23 * keys * rows / lanes_rate(h, u, 4);
    double setup = (double)((groups + u - 1) / u) * 200 / (h->ghz * 1e9);
    double total = fmax(mem, dots) + soft + setup + (u > 1 ? SYNC_S : 0);
    if (t == 1 || total < best) best = total, *serial = t == 1;
  }
  return best;
}

START_TEST(test_attn_rows) {
  const int64_t shapes[][5] = {{12, 1, 128, 64, 64}, {16, 1, 4096, 80, 80}, {12, 77, 77, 64, 64},
                               {1, 1, 1, 3, 3},      {3, 5, 61, 96, 32},    {64, 1, 2048, 128, 128}};
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      for (int t = 1; t <= 2; t++) {
        const int64_t *x = shapes[i];
        bool s1, s2;
        double got = cpu_attn_rows_time(&h, t, x[0], x[1], x[2], x[3], x[4], 1.0, false, &s1);
        double want = rows_want(&h, t, x[0], x[1], x[2], x[3], x[4], &s2);
        ck_assert_msg(close_to(got, want), "%s %lld x %lld x %lld x %lld, %d threads: %g s, want %g", MODELS[m],
                      (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], t, got, want);
        ck_assert(s1 == s2);
      }
    /* half the keys masked: the key terms halve, Q's and O's bytes stay, and V is read once
     * more for its infinities (8 x 4096 x 64 floats at the level the call's data fits) */
    bool s;
    double full = cpu_attn_rows_time(&h, 1, 8, 1, 4096, 64, 64, 1.0, false, &s);
    double half = cpu_attn_rows_time(&h, 1, 8, 1, 4096, 64, 64, 0.5, false, &s);
    ck_assert(half < full && half > 0.45 * full);
    double once = 4.0 * 8 * (4096 * 128 + 128), v = 4.0 * 8 * 4096 * 64;
    double vmem = (once + v) / bw_of(&h, level_of(&h, once + v, 0, 1), 1);
    double masked = cpu_attn_rows_time(&h, 1, 8, 1, 4096, 64, 64, 1.0, true, &s);
    ck_assert_msg(masked > full && (close_to(masked, vmem) || masked > vmem), "%s: %g s masked", MODELS[m], masked);
  }
}
END_TEST

/* A row-wise kernel's rows go through their stages in turn (cpu_sched.c): layernorm's mean
 * (1 lane-operation an element, 8 a row) against the reads, its variance (4 and 8) alone,
 * its result (4 and 17) against the writes.  Fails with the stages' compute overlapped with
 * all the bytes (max(compute, memory)), or with a stage's share taken by its elements only. */
/* Each reduction over a row ends in a fold of the lanes and of the loop's accumulators
 * (cpu_sched.c): log2(lanes) + 2 steps of 5 cycles, once a row for each reduction, shared
 * by the threads.  Layernorm folds twice a row (mean and variance), rmsnorm once; an
 * element-wise kernel never. */
START_TEST(test_row_folds) {
  const char *rms = "fn rmsnorm(X: f32[B, N]) -> f32[B, N] {\n  ms[b] = (sum[n] X[b, n] * X[b, n]) / N\n"
                    "  Y[b, n] = X[b, n] * rsqrt(ms[b] + 1e-5)\n  return Y\n}";
  const char *ew = "fn f(X: f32[B, N]) -> f32[B, N] {\n  Y[b, n] = X[b, n] * 3.0\n  return Y\n}";
  const char *texts[3] = {LAYERNORM, rms, ew};
  const int folds[3] = {2, 1, 0};
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int lanes = h.vector_bits / 32, steps = 2;
    while ((1 << (steps - 2)) < lanes) steps++;
    for (int k = 0; k < 3; k++)
      for (int t = 1; t <= 2; t++) {
        const Program *p = lowered(texts[k]);
        const Kernel *kn = &p->kernels[0];
        int64_t ext[8] = {0};
        ck_assert(p->naxes <= 8);
        for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "b") ? 12288 : 128;
        SchedWork w = {.ops = 1e6, .elem_bytes = 4, .read = 4e6, .written = 4e6, .tasks = 8};
        SchedTerms T;
        sched_stream_time(&h, t, &w, &T);
        double want = 12288.0 * folds[k] * steps * 5 / (h.ghz * 1e9 * T.threads) * T.imbalance;
        double got = cpu_row_folds_s(&h, kn, ext, &T);
        ck_assert_msg(folds[k] ? close_to(got, want) : got == 0, "%s, %s, %d threads: %g s, want %g", MODELS[m], texts[k], t,
                      got, want);
        lower_free(fn->code.prog);
        fn->code.prog = NULL;
      }
  }
}
END_TEST

/* A row-wise kernel whose reductions keep an axis beside the row's (attention's softmax over
 * rows of b: m[b, s] = max[t] ...) folds once for each of its values, S times a row. */
START_TEST(test_row_folds_inner) {
  const char *sm3 = "fn f(A: f32[B, S, T]) -> f32[B, S, T] {\n  m[b, s] = max[t] A[b, s, t]\n"
                    "  e[b, s, t] = exp(A[b, s, t] - m[b, s])\n  z[b, s] = sum[t] e[b, s, t]\n"
                    "  Y[b, s, t] = e[b, s, t] / z[b, s]\n  return Y\n}";
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int lanes = h.vector_bits / 32, steps = 2;
    while ((1 << (steps - 2)) < lanes) steps++;
    const Program *p = lowered(sm3);
    const Kernel *kn = &p->kernels[0];
    ck_assert(kn->nouter == 1 && !strcmp(p->axes[kn->outer[0]].name, "b"));
    int64_t ext[8] = {0};
    for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "b") ? 12 : !strcmp(p->axes[a].name, "s") ? 77 : 131;
    SchedWork w = {.ops = 1e6, .elem_bytes = 4, .read = 4e6, .written = 4e6, .tasks = 8};
    SchedTerms T;
    sched_stream_time(&h, 2, &w, &T);
    double want = 12.0 * 77 * 2 * steps * 5 / (h.ghz * 1e9 * T.threads) * T.imbalance;
    ck_assert_msg(close_to(cpu_row_folds_s(&h, kn, ext, &T), want), "%s", MODELS[m]);
    lower_free(fn->code.prog);
    fn->code.prog = NULL;
  }
}
END_TEST

/* The loops' tails (cpu_tail_ops).  A loop LLVM's vectoriser builds alone (a cheap stage:
 * X * 3.0 + 1.0) runs steps of 4 vectors, then half vectors, then single elements; a stage
 * that evaluates a transcendental an element (exp(X) * 2.0: cpu_stage_overlaps) runs the
 * steps of 4, then whole vectors, the last ending at the row's end, and a row shorter than
 * a vector as one masked vector where the target masks lanes, else as the cheap one
 * (counted here by walking the loops).  Each of those issues the stage's instructions over
 * the vector pipes (its lane-operations, a load, a store) and takes a cycle at least, and
 * each loop's entry 2 cycles, against the N / vf vectors of lane-operations the model
 * counts already.  The cheap stage costs more an element at 77 than at 80, at 80 than at
 * 64, at 31 than at 77; the transcendental one less at 31 and 77 than it would with the
 * vectoriser's own tail; a column sum's runs none (not a plain loop); a 1-D stage along the
 * parallel axis has each task's share. */
static double walked_units(int64_t n, int vf, bool over, bool masks) {
  double u = 0;
  if (over && n < vf && masks) return 1;
  over = over && n >= vf;
  for (; n >= 4 * vf; n -= 4 * vf) u += 4;
  if (over) return u + (double)((n + vf - 1) / vf);
  for (; n >= vf / 2; n -= vf / 2) u++;
  return u + (double)n;
}

START_TEST(test_tail_ops) {
  const char *texts[2] = {"fn f(X: f32[B, N]) -> f32[B, N] {\n  Y[b, n] = X[b, n] * 3.0 + 1.0\n  return Y\n}",
                          "fn f(X: f32[B, N]) -> f32[B, N] {\n  Y[b, n] = exp(X[b, n]) * 2.0\n  return Y\n}"};
  const char *col = "fn f(X: f32[B, N]) -> f32[N] {\n  Y[n] = sum[b] X[b, n]\n  return Y\n}";
  const char *one = "fn f(X: f32[N]) -> f32[N] {\n  Y[n] = exp(X[n]) * 2.0\n  return Y\n}";
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);
    int vf = h.vector_bits / 32, pipes = h.vec_units > h.fma_units ? h.vec_units : h.fma_units;
    bool masks = masks_lanes(&h);
    const double ops[2] = {2, exp_ops(&h) + 1};
    const char *names[2] = {"B", "N"};
    double per[2][200] = {{0}};
    const int64_t more[] = {31, 63, 64, 65, 77, 79, 80, 127, 128, 9 * vf};
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 2 * vf + 10; i++) {
        int64_t N = i < 2 * vf ? i + 1 : more[i - 2 * vf];
        int64_t vals[2] = {100, N}, ext[8] = {0};
        EvalSizes sz = {names, vals, 2};
        const Program *p = lowered(texts[k]);
        const Kernel *kn = &p->kernels[0];
        for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "b") ? 100 : N;
        double each = fmax((ops[k] + 2) / pipes, 1), ideal = (double)N / vf * ops[k] / pipes;
        double want = fmax(walked_units(N, vf, k == 1, masks) * each + 2 - ideal, 0) * 100 * vf * pipes, tails[4];
        double got = cpu_tail_ops(&h, p, kn, pc, &sz, ext, cpu_par_axis(kn), 8, tails);
        ck_assert_msg(fabs(got - want) <= 1e-9 * want + 1e-6 && tails[0] == got, "%s, %s, N=%lld: %g, want %g",
                      MODELS[m], k ? "exp" : "axpb", (long long)N, got, want);
        double own = fmax(walked_units(N, vf, false, masks) * each + 2 - ideal, 0) * 100 * vf * pipes;
        if (k == 1)                /* the vectoriser's own tail would cost as much or more */
          ck_assert(got <= own && (vf != 16 || (N != 31 && N != 77) || got < own));
        if (N < 200) per[k][N] = got / (100.0 * N);
        lower_free(fn->code.prog);
        fn->code.prog = NULL;
        p = lowered(col);
        for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "b") ? 100 : N;
        ck_assert(cpu_tail_ops(&h, p, &p->kernels[0], pc, &sz, ext, -1, 1, NULL) == 0);
        lower_free(fn->code.prog);
        fn->code.prog = NULL;
      }
    if (vf == 16) ck_assert(per[0][77] > per[0][80] && per[0][80] > per[0][64] && per[0][31] > per[0][77]);
    /* a row-wise kernel (softmax, rows of b): its exp stage, which carries the row's sum,
     * keeps the vectoriser's loop, once a row; its instructions: exp's and the difference's,
     * loads of X and m, a store */
    for (int i = 0; i < 2 * vf + 10; i++) {
      int64_t N = i < 2 * vf ? i + 1 : more[i - 2 * vf];
      int64_t vals[2] = {100, N}, ext[8] = {0};
      EvalSizes sz = {names, vals, 2};
      const Program *p = lowered(SOFTMAX);
      const Kernel *kn = &p->kernels[0];
      for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "b") ? 100 : N;
      int e = 1;
      ck_assert(!strcmp(p->slots[kn->stages[e].out].name, "e"));
      double ops = (double)at(cost_stage_ops(&h, p, kn, e, pc), 100, N) / (100.0 * N), each = fmax((ops + 3) / pipes, 1);
      double want = fmax(walked_units(N, vf, false, masks) * each + 2 - (double)N / vf * ops / pipes, 0) * 100 * vf * pipes;
      double tails[8];
      cpu_tail_ops(&h, p, kn, pc, &sz, ext, cpu_par_axis(kn), 8, tails);
      ck_assert_msg(fabs(tails[e] - want) <= 1e-9 * want + 1e-6, "%s softmax N=%lld: %g, want %g", MODELS[m],
                    (long long)N, tails[e], want);
      lower_free(fn->code.prog);
      fn->code.prog = NULL;
    }
    /* 1-D, 8 tasks of 4 vf + 1 each: one step and a single element a task (the parallel
     * axis: no overlapped vector, whose tasks would write their neighbours' elements) */
    const char *n1[1] = {"N"};
    int64_t v1[1] = {8 * (4 * vf + 1)}, ext[8] = {0};
    EvalSizes sz = {n1, v1, 1};
    const Program *p = lowered(one);
    ext[0] = v1[0];
    double want = 8 * ((4 + 1) * fmax((ops[1] + 2) / pipes, 1) + 2 - (4.0 * vf + 1) / vf * ops[1] / pipes) * vf * pipes;
    ck_assert(fabs(cpu_tail_ops(&h, p, &p->kernels[0], pc, &sz, ext, cpu_par_axis(&p->kernels[0]), 8, NULL) - want) <=
              1e-9 * want);
    lower_free(fn->code.prog);
    fn->code.prog = NULL;
  }
}
END_TEST

START_TEST(test_rows_in_turn) {
  const Program *p = lowered(LAYERNORM);
  const Kernel *kn = &p->kernels[0];
  ck_assert_int_eq(kn->nstages, 3);
  for (int m = 0; m < NMODELS; m++) {
    HwModel h = model(MODELS[m]);     /* the files' figures, whatever the host */
    ck_assert(hw_ncaches(&h) >= 2);
    /* rows whose 16 N bytes (X, g, be and Y) fit L1, and rows whose 4 N bytes do not (each
     * stage's pass over X misses it) while 16 N fit L2 */
    int64_t l1 = h.level[0].bytes, fits = l1 / 32, over = l1 / 4 + 64;
    const int64_t shapes[][2] = {{101, fits}, {4096, fits}, {33, over}, {101, over}, {4096, over}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      for (int t = 1; t <= 2; t++) {
        int64_t B = shapes[i][0], N = shapes[i][1], ext[8] = {0};
        const char *names[2] = {"B", "N"};
        int64_t vals[2] = {B, N};
        EvalSizes sz = {names, vals, 2};
        ck_assert(p->naxes <= 8);
        for (int a = 0; a < p->naxes; a++) ext[a] = !strcmp(p->axes[a].name, "b") ? B : N;
        double n = (double)B * N;
        SchedWork w = {.ops = 9 * n + 33.0 * B, .elem_bytes = 4, .read = 4 * n + 8.0 * N, .written = 4 * n, .tasks = B};
        SchedTerms T;
        sched_stream_time(&h, t, &w, &T);
        ck_assert(16.0 * N <= (double)h.level[1].bytes * sched_cache_units(&h, 1, T.threads) / T.threads);
        double per = T.comp_s / w.ops, rd = T.mem_s * w.read / (w.read + w.written), wr = T.mem_s - rd;
        /* read again from L2 where the rows miss L1: X and mu by the variance, X, mu, v, g
         * and be by the result; beside the first reads and the writes from a cache, and
         * overlapped with them from memory */
        double l2 = N == over ? B / sched_threads_bw(&h, 1, T.threads) * T.imbalance : 0;
        double r1 = (4.0 * N + 4) * l2, r2 = (12.0 * N + 8) * l2;
        bool dram = T.level == h.nlevels - 1;
        double want = fmax(rd, (n + 8.0 * B) * per) + fmax(r1, (4 * n + 8.0 * B) * per) +
                      fmax(dram ? fmax(wr, r2) : wr + r2, (4 * n + 17.0 * B) * per) + T.sync_s;
        double got = cpu_rows_in_turn(&h, p, kn, pc, &sz, ext, -1, &w, &T, NULL);
        ck_assert_msg(close_to(got, want), "%s %lld x %lld, %d threads: %g s, want %g", MODELS[m], (long long)B, (long long)N, t,
                      got, want);
        ck_assert(got >= T.total * (1 - 1e-12));   /* in turn is never shorter than overlapped */
        /* pipelined: the result's stage runs in the variance's loop, against the writes */
        want = fmax(rd, (n + 8.0 * B) * per) + fmax(dram ? fmax(wr, r1 + r2) : wr + r1 + r2, (8 * n + 25.0 * B) * per) + T.sync_s;
        ck_assert_msg(close_to(cpu_rows_in_turn(&h, p, kn, pc, &sz, ext, 1, &w, &T, NULL), want), "%s %lld x %lld pipelined",
                      MODELS[m], (long long)B, (long long)N);
      }
  }
}
END_TEST
#endif

static Suite *sched_suite(void) {
  Suite *s = suite_create("sched");
  TCase *tc = tcase_create("model");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_roofline);
  tcase_add_test(tc, test_fit_level);
  tcase_add_test(tc, test_kept_capacity);
  tcase_add_test(tc, test_elementwise);
  tcase_add_test(tc, test_rowwise);
  tcase_add_test(tc, test_memory_terms);
  tcase_add_test(tc, test_hoisted);
  tcase_add_test(tc, test_measured_peak);
  tcase_add_test(tc, test_attn_softmax);
#ifdef HAVE_LLVM
  tcase_add_test(tc, test_reduce_split);
  tcase_add_test(tc, test_task_count);
  tcase_add_test(tc, test_task_split);
  tcase_add_test(tc, test_sub_axis);
  tcase_add_test(tc, test_task_count_runs);
  tcase_add_test(tc, test_reduce_runs);
  tcase_add_test(tc, test_reduce_short);
  tcase_add_test(tc, test_attn_rows);
  tcase_add_test(tc, test_rows_in_turn);
  tcase_add_test(tc, test_row_folds);
  tcase_add_test(tc, test_row_folds_inner);
  tcase_add_test(tc, test_masks_lanes);
  tcase_add_test(tc, test_tail_ops);
  tcase_add_test(tc, test_layout);
#endif
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  find_models();
  if (NMODELS < 2) {
    fprintf(stderr, "test_sched: fewer than two CPU models in %s\n", hw_dir());
    return EXIT_FAILURE;
  }
  SRunner *sr = srunner_create(sched_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
