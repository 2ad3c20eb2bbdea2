/* pool.c -- the runtime's thread pool and the tiny C ABI that generated code calls.
 * dyn_parallel_for(pool, ntasks, fn, ctx) runs fn(ctx, 0..ntasks-1) on the pool's workers and
 * the calling thread, and returns when all are done.  Each participant (the caller 0, worker
 * i the i-th) owns a fixed, contiguous share of the tasks, the same share on every call of
 * the same count, and claims its own first; then it takes what is left of the others'.  So
 * the rows a thread wrote on one call are its own again on the next, still in its core's
 * caches (the streaming model's kept share assumes so), where claiming from one shared
 * counter handed them to whichever thread came first (8 tasks updating 132 KB in place on 2
 * threads of an Emerald Rapids guest: median 9.5 -> 8.1 us over three runs, noisy; the
 * minima alike).  A claim is a compare-and-swap on the
 * owner's word (job generation, next task), so a worker that wakes late can never run a task
 * of a job that has moved on, and the caller waits only for tasks actually claimed: on a
 * busy machine where a worker is not scheduled, the caller simply runs its share too.
 * Idle workers spin briefly (back-to-back kernels pay no wake-up), then sleep on a condition
 * variable (an idle REPL burns no CPU).
 */
#include "config.h"
#include "dyn_int.h"
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long an idle worker spins before it sleeps: long enough to cover the gap between the
 * kernels of one statement (and the repetitions of a benchmark), short enough that a worker
 * does not compete for long with other threads or keep an idle session busy. */
#define SPIN_NS 100000

/* The round word: generation (24 bits) | unused (20) | task count (20).  A job of more
 * tasks runs as several rounds.  A participant's claim word: generation (24) | its next
 * task (40). */
#define CNT_BITS 20
#define MAX_ROUND ((int64_t)1 << CNT_BITS)
#define W_GEN(w) ((w) >> (2 * CNT_BITS))
#define W_CNT(w) ((w) & (MAX_ROUND - 1))
#define W_MAKE(g, next, n) (((uint64_t)(g) << (2 * CNT_BITS)) | ((uint64_t)(next) << CNT_BITS) | \
                            (uint64_t)(n))

#define S_GEN(w) ((w) >> 40)
#define S_NEXT(w) ((int64_t)((w) & (((uint64_t)1 << 40) - 1)))
#define S_MAKE(g, next) (((uint64_t)(g) << 40) | (uint64_t)(next))

typedef void (*PoolFn)(void *ctx, int64_t task);

/* A participant's claim word, a line of its own. */
typedef struct Claim { _Alignas(64) _Atomic uint64_t w; } Claim;

struct Pool {
  int nthreads;                        /* participants, the caller included */
  int nworkers;                        /* threads we own: nthreads - 1 */
  pthread_t *th;
  /* The current round.  The fields are atomics because a late worker may read them while
   * the caller writes the next round's; it then fails to claim, as the word has changed. */
  _Atomic(PoolFn) fn;
  _Atomic(void *) ctx;
  _Atomic int64_t base;                /* task number of the round's first task */
  _Alignas(64) _Atomic uint64_t word;  /* generation | - | count */
  Claim *slot;                         /* each participant's claims, nthreads of them */
  struct Worker { Pool *p; int self; } *who;
  _Alignas(64) _Atomic int64_t done;   /* tasks of the round finished */
  _Alignas(64) _Atomic int sleepers;
  _Atomic bool quit;
  pthread_mutex_t mu;                  /* guards sleeping */
  pthread_cond_t cv;
  pthread_mutex_t call;                /* one job at a time per pool */
};

/* Set while a thread runs tasks of a pool: a nested dyn_parallel_for then runs serially
 * instead of waiting for itself. */
static _Thread_local bool in_pool;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}


/* Claim and run tasks of the round with generation gen until none is left: participant
 * self's own share first, then the others' in turn. */
static void run_tasks(Pool *p, uint64_t gen, int self) {
  uint64_t rw = atomic_load_explicit(&p->word, memory_order_acquire);
  if (W_GEN(rw) != gen) return;
  int64_t n = (int64_t)W_CNT(rw);
  int np = p->nthreads;
  for (int k = 0; k < np; k++) {
    int i = (self + k) % np;
    int64_t end = pool_share_start(n, np, i + 1);
    uint64_t w = atomic_load_explicit(&p->slot[i].w, memory_order_acquire);
    while (S_GEN(w) == gen && S_NEXT(w) < end) {
      PoolFn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
      void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
      int64_t base = atomic_load_explicit(&p->base, memory_order_relaxed);
      /* Success proves the round was still current, so fn, ctx and base belonged to it. */
      if (atomic_compare_exchange_weak_explicit(&p->slot[i].w, &w, w + 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        fn(ctx, base + S_NEXT(w));
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        w = atomic_load_explicit(&p->slot[i].w, memory_order_acquire);
      }
    }
  }
}

static void *worker(void *arg) {
  Pool *p = ((struct Worker *)arg)->p;
  int self = ((struct Worker *)arg)->self;
  uint64_t seen = W_GEN(atomic_load(&p->word));
  in_pool = true;
  for (;;) {
    uint64_t g = W_GEN(atomic_load_explicit(&p->word, memory_order_acquire));
    if (g == seen) {
      int64_t until = now_ns() + SPIN_NS;
      for (int i = 1; (g = W_GEN(atomic_load_explicit(&p->word, memory_order_acquire))) == seen;
           i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() > until) break;
      }
      if (g == seen) {
        /* Sleep.  sleepers is raised before the word is read again, and the caller changes
         * the word before it reads sleepers, so one of the two always sees the other. */
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->sleepers, 1);
        while ((g = W_GEN(atomic_load(&p->word))) == seen && !atomic_load(&p->quit))
          pthread_cond_wait(&p->cv, &p->mu);
        atomic_fetch_sub(&p->sleepers, 1);
        pthread_mutex_unlock(&p->mu);
      }
    }
    seen = g;
    if (atomic_load(&p->quit)) break;
    run_tasks(p, g, self);
  }
  return NULL;
}

static void wake_all(Pool *p) {
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

static void start_workers(Pool *p, int nthreads) {
  p->nworkers = 0;
  atomic_store(&p->quit, false);
  p->th = nthreads > 1 ? xcalloc((size_t)nthreads - 1, sizeof *p->th) : NULL;
  p->who = nthreads > 1 ? xcalloc((size_t)nthreads - 1, sizeof *p->who) : NULL;
  p->slot = aligned_alloc(64, (size_t)nthreads * sizeof *p->slot);
  if (!p->slot) nthreads = 1, p->slot = aligned_alloc(64, sizeof *p->slot);
  if (!p->slot) {
    fprintf(stderr, "dyn: out of memory\n");
    abort();
  }
  for (int i = 0; i < nthreads; i++) atomic_init(&p->slot[i].w, 0);
  /* the slots and who are written before the threads start, which publishes them */
  for (int i = 0; i < nthreads - 1; i++) {
    p->who[i] = (struct Worker){p, i + 1};
    if (pthread_create(&p->th[i], NULL, worker, &p->who[i])) break;   /* run with fewer */
    p->nworkers++;
  }
  p->nthreads = p->nworkers + 1;
}

static void stop_workers(Pool *p) {
  atomic_store(&p->quit, true);
  uint64_t w = atomic_load(&p->word);
  atomic_store(&p->word, W_MAKE((W_GEN(w) + 1) & 0xffffff, 0, 0));
  wake_all(p);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->th[i], NULL);
  free(p->th);
  free(p->who);
  free(p->slot);
  p->th = NULL;
  p->who = NULL;
  p->slot = NULL;
  p->nworkers = 0;
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

Pool *pool_new(int nthreads) {
  Pool *p = xcalloc(1, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  pthread_mutex_init(&p->call, NULL);
  start_workers(p, nthreads > 0 ? nthreads : online_cpus());
  return p;
}

void pool_free(Pool *p) {
  if (!p) return;
  stop_workers(p);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->call);
  free(p);
}

void pool_set_threads(Pool *p, int nthreads) {
  if (nthreads <= 0) nthreads = online_cpus();
  pthread_mutex_lock(&p->call);
  if (nthreads != p->nthreads) {
    stop_workers(p);
    start_workers(p, nthreads);
  }
  pthread_mutex_unlock(&p->call);
}

int pool_threads(const Pool *p) { return p ? p->nthreads : 1; }

void dyn_parallel_for(void *pool, int64_t ntasks, void (*fn)(void *ctx, int64_t task),
                      void *ctx) {
  Pool *p = pool;
  if (ntasks <= 0) return;
  if (!p || p->nworkers == 0 || ntasks == 1 || in_pool) {
    for (int64_t t = 0; t < ntasks; t++) fn(ctx, t);
    return;
  }
  pthread_mutex_lock(&p->call);
  in_pool = true;
  for (int64_t base = 0; base < ntasks; base += MAX_ROUND) {
    int64_t n = ntasks - base < MAX_ROUND ? ntasks - base : MAX_ROUND;
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->base, base, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint64_t gen = (W_GEN(atomic_load(&p->word)) + 1) & 0xffffff;
    for (int i = 0; i < p->nthreads; i++)
      atomic_store_explicit(&p->slot[i].w, S_MAKE(gen, pool_share_start(n, p->nthreads, i)), memory_order_relaxed);
    atomic_store(&p->word, W_MAKE(gen, 0, n));       /* seq_cst: publishes the fields */
    wake_all(p);
    run_tasks(p, gen, 0);
    /* Wait for the tasks other threads claimed; they are running. */
    for (int i = 1; atomic_load_explicit(&p->done, memory_order_acquire) < n; i++) {
      cpu_relax();
      if (i % 256 == 0) sched_yield();
    }
  }
  in_pool = false;
  pthread_mutex_unlock(&p->call);
}
