/* cpu_calibrate.c -- what dyn --calibrate measures of the memory hierarchy (the micro-kernel's
 * peak is cpu_compile.c's cpu_calibrate): each level's read rate for one core and for all
 * the threads at once, so that the streaming models price bytes at this machine's rates
 * instead of the hw file's, whose bandwidths are often guesses; what a byte written to
 * memory costs beside the reads (a copy on all the threads against their reads:
 * write_cost); and on a guest what its share of a shared cache keeps (measure_kept).
 * session.c keeps them in the calibration
 * file beside the peak.
 *
 * A level's rate is that of a loop reading a set that fits it and not the level above:
 * halfway between the two capacities a core may use (hw_cache_bytes), and for memory four
 * times the last cache of all the cores, at least 64 MiB and at most 256 MiB.  The fastest
 * of seven timed runs of about 20 ms each: a run that shares the cores with other work only
 * reads slower, never faster.  L1 keeps its file's figure: a plain loop does not reach it.
 */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"
#include "pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The read loop is plain C; built for the baseline it would read 16 bytes at a time, slower
 * than the vector code it stands for where a cache serves 64 a cycle, so where the compiler
 * can it gets AVX2 and AVX-512 clones chosen when the library loads (as cpu_conv.c's). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#pragma GCC optimize("O3")
#define CAL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CAL_CLONES
#endif

/* Integers, so that the sum vectorises without reassociating floating point. */
CAL_CLONES static uint32_t read_words(const uint32_t *p, size_t n) {
  uint32_t s = 0;
  for (size_t i = 0; i < n; i++) s += p[i];
  return s;
}

/* Each element read, one added, written beside: every line of dst read for ownership and
 * written back, as a kernel's result is (pass_rate with dst). */
CAL_CLONES static void copy_words(uint32_t *dst, const uint32_t *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = src[i] + 1;
}

typedef struct ReadJob {
  uint32_t *buf, *dst;         /* dst: copy_task's */
  size_t words;                /* each task's part */
  int64_t reps;
  _Atomic uint32_t sink;
} ReadJob;

static void read_task(void *ctx, int64_t t) {
  ReadJob *j = ctx;
  uint32_t s = 0;
  for (int64_t r = 0; r < j->reps; r++) s += read_words(j->buf + (size_t)t * j->words, j->words);
  atomic_fetch_add_explicit(&j->sink, s, memory_order_relaxed);
}

static void copy_task(void *ctx, int64_t t) {
  ReadJob *j = ctx;
  for (int64_t r = 0; r < j->reps; r++) copy_words(j->dst + (size_t)t * j->words, j->buf + (size_t)t * j->words, j->words);
}

/* GB/s of `threads` tasks each reading its own `words` of buf (threads 1: the caller alone),
 * passes enough for about 20 ms; with dst, each writing as many words of dst beside (the
 * bytes read a second). */
static double pass_rate(Pool *pool, int threads, uint32_t *buf, uint32_t *dst, size_t words) {
  ReadJob j = { .buf = buf, .dst = dst, .words = words, .reps = 1 };
  Pool *use = threads > 1 ? pool : NULL;
  void (*task)(void *, int64_t) = dst ? copy_task : read_task;
  double t = now_s();            /* one pass warms the level and says how many make 20 ms */
  dyn_parallel_for(use, threads, task, &j);
  t = now_s() - t;
  j.reps = t > 0 ? (int64_t)(0.02 / t) + 1 : 1;
  t = now_s();
  dyn_parallel_for(use, threads, task, &j);
  t = now_s() - t;
  return t > 0 ? (double)words * 4 * (double)threads * (double)j.reps / t * 1e-9 : 0;
}

static double read_rate(Pool *pool, int threads, uint32_t *buf, size_t words) {
  return pass_rate(pool, threads, buf, NULL, words);
}

/* A fork-join's cost on the pool: a task a thread, each SYNC_ITERS steps of a dependent
 * multiply-add chain (about a microsecond), against one such task on the caller alone; the
 * median of SYNC_RUNS of each, in turn.  The model charged the GEMM engine's 0.3 us,
 * measured on one Zen 5 guest, where another took 0.7-1.0 us beside tasks of 0.15-2.7 us:
 * softmax of f32[33, 1000] and its like on 2 threads then ran 1.5-2x their prediction. */
#define SYNC_ITERS 1000
#define SYNC_RUNS 2001

static void chain_task(void *ctx, int64_t t) {
  volatile double *s = (volatile double *)ctx + t * 8;   /* a line a task: no line shared */
  double x = *s;
  for (int i = 0; i < SYNC_ITERS; i++) x = x * 0.999999 + 1e-9;
  *s = x;
}

bool cpu_calibrate_sync(CpuBackend *be, double *us, char *err, size_t errlen) {
  Pool *pool = cpu_backend_pool(be);
  int threads = pool_threads(pool);
  *us = 0;
  if (threads <= 1) return true;
  double *par = malloc(2 * SYNC_RUNS * sizeof *par), *one = par + SYNC_RUNS;
  volatile double *s = calloc((size_t)threads * 8, sizeof *s);
  if (!par || !s) {
    free(par);
    free((void *)s);
    snprintf(err, errlen, "could not allocate the fork-join's measurement");
    return false;
  }
  for (int r = 0; r < SYNC_RUNS; r++) {
    double t = now_s();
    dyn_parallel_for(pool, threads, chain_task, (void *)s);
    par[r] = now_s() - t;
    t = now_s();
    chain_task((void *)s, 0);
    one[r] = now_s() - t;
  }
  sort_doubles(par, SYNC_RUNS);
  sort_doubles(one, SYNC_RUNS);
  double d = (par[SYNC_RUNS / 2] - one[SYNC_RUNS / 2]) * 1e6;
  *us = d > 0.01 ? d : 0.01;
  free(par);
  free((void *)s);
  return true;
}

/* What a guest's shared cache keeps.  Its share of the cache the system reports is a guess
 * (hw.c): the host's other guests may leave it more, and did: on a 2-core guest of a Zen 4
 * host (a share of 8 MiB of 32) two threads read sets of 4 to 16 MiB at 182-188 GB/s, 24
 * MiB at 121, 32 at 101, 64 at 52.  Sets from 1.5 times the share up to the whole cache
 * (at most MAX_KEPT), each read by all the threads (the fastest of KEPT_ROUNDS), are each
 * taken as C of it from the cache at its rate measured above (c) and the rest from memory at
 * memory's (m): C = S (1/m - 1/r) / (1/m - 1/c) from a rate r, at most S.  The largest C of
 * any set, not below the share, is what the cache keeps (the sets above: 20-24 MiB). */
#define KEPT_ROUNDS 3
#define MAX_KEPT (256.0 * (1 << 20))
static void measure_kept(Pool *pool, const HwModel *h, CalMemory *out) {
  int threads = pool_threads(pool), i = hw_ncaches(h) - 1, last = h->nlevels - 1;
  const HwLevel *lv = &h->level[i];
  double c = out->total_gbs[i], m = out->total_gbs[last];
  if (i < 1 || lv->whole_bytes <= lv->bytes || !(c > m) || !(m > 0)) return;
  int groups = sched_cache_units(h, i, threads);
  double share = (double)lv->bytes * groups, whole = fmin((double)lv->whole_bytes * groups, MAX_KEPT);
  double size[16], rate[16] = {0};
  int n = 0;
  for (double S = 1.5 * share; n < 15 && S < whole; S *= 1.5) size[n++] = S;
  size[n++] = whole;
  size_t most = (size_t)(whole / 4) / 16 * 16 + 16 * (size_t)threads;
  uint32_t *buf = aligned_alloc(64, most * 4);
  if (!buf) return;
  memset(buf, 1, most * 4);
  for (int r = 0; r < KEPT_ROUNDS; r++)
    for (int k = 0; k < n; k++) {
      size_t words = (size_t)(size[k] / 4) / (size_t)threads / 16 * 16;
      double g = read_rate(pool, threads, buf, words);
      if (g > rate[k]) rate[k] = g;
    }
  free(buf);
  double kept = share;
  for (int k = 0; k < n; k++)
    if (rate[k] > 0) kept = fmax(kept, fmin(size[k], size[k] * (1 / m - 1 / rate[k]) / (1 / m - 1 / c)));
  out->kept_bytes[i] = floor(kept / groups / 65536) * 65536;
}

/* The rounds: each level once a round, one thread and then all, the fastest of each kept.
 * A shared host's speed moves in phases of seconds; rounds spread each level's runs over
 * the whole measurement, where five runs in a row fell in one phase (two threads read
 * memory at 26 GB/s in some processes, 47 in others). */
#define ROUNDS 7

bool cpu_calibrate_memory(CpuBackend *be, CalMemory *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  const HwModel *h = &be->hw;
  Pool *pool = cpu_backend_pool(be);
  int threads = pool_threads(pool), nc = hw_ncaches(h), last = h->nlevels - 1;
  if (last < 1 || nc < 1) {
    snprintf(err, errlen, "%s has no memory hierarchy to measure", h->name);
    return false;
  }
  uint32_t *buf[HW_MAX_LEVELS] = {0};
  size_t words[HW_MAX_LEVELS] = {0}, all[HW_MAX_LEVELS] = {0};   /* one thread's words; each thread's, all at once */
  bool ok = true;
  for (int i = 1; i <= last && ok; i++) {
    double bytes;
    if (i < last) {
      if (i >= nc) continue;
      double below = hw_cache_bytes(h, i - 1), cap = hw_cache_bytes(h, i);
      if (cap < 2 * below) continue;      /* no set fits it and not the level above */
      bytes = (below + cap) / 2;
    } else {
      bytes = hw_cache_bytes(h, nc - 1) * (h->cores > 0 ? h->cores : 1) * 4;
      bytes = bytes < 64.0 * (1 << 20) ? 64.0 * (1 << 20) : bytes > 256.0 * (1 << 20) ? 256.0 * (1 << 20) : bytes;
    }
    words[i] = (size_t)(bytes / 4) / 16 * 16;
    /* a cache's set is each core's; memory's is shared out */
    all[i] = i < last ? words[i] : words[i] / (size_t)threads / 16 * 16;
    size_t n = i < last ? words[i] * (size_t)threads : words[i];
    if (!(buf[i] = aligned_alloc(64, n * 4))) {
      snprintf(err, errlen, "could not allocate %zu MiB to measure %s", n * 4 >> 20, h->level[i].name);
      ok = false;
      break;
    }
    memset(buf[i], 1, n * 4);            /* every page present */
  }
  uint32_t *dst = ok && buf[last] ? aligned_alloc(64, all[last] * (size_t)threads * 4) : NULL;
  if (dst) memset(dst, 1, all[last] * (size_t)threads * 4);
  double copy = 0;
  for (int r = 0; r < ROUNDS && ok; r++)
    for (int i = 1; i <= last; i++) {
      if (!buf[i]) continue;
      double one = read_rate(pool, 1, buf[i], words[i]);
      double every = threads > 1 ? read_rate(pool, threads, buf[i], all[i]) : one;
      if (one > out->gbs[i]) out->gbs[i] = one;
      if (every > out->total_gbs[i]) out->total_gbs[i] = every;
      if (i == last && dst) copy = fmax(copy, pass_rate(pool, threads, buf[i], dst, all[i]));
    }
  free(dst);
  /* memory's bytes a written byte costs beside a read one, from the threads' copy against
   * their reads: a line read for ownership and written back costs 2 on a bus that carries
   * both, less where the write-backs go out beside the reads */
  if (copy > 0 && out->total_gbs[last] > 0) out->write_cost = fmax(out->total_gbs[last] / copy - 1, 0.1);
  for (int i = 0; i < HW_MAX_LEVELS; i++) {
    free(buf[i]);
    /* a core reads at least its share of what all of them read at once: one below it was
     * measured in a slow phase (13.9 GB/s alone, 43.4 for two, in one run) */
    if (threads > 1 && out->gbs[i] < out->total_gbs[i] / threads) out->gbs[i] = out->total_gbs[i] / threads;
  }
  if (ok) measure_kept(pool, h, out);
  return ok;
}

#endif
