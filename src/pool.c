/* pool.c -- the runtime's thread pool and the tiny C ABI that generated code calls.
 * dyn_parallel_for(pool, ntasks, fn, ctx) runs fn(ctx, 0..ntasks-1) on the pool's workers and
 * the calling thread, and returns when all are done.  A job is a fork-join: every worker
 * acknowledges every job, so the caller may reuse the job's fields as soon as the count of
 * pending workers reaches zero.  Idle workers spin briefly (back-to-back kernels pay no
 * wake-up) and then sleep on a condition variable (an idle REPL burns no CPU).
 */
#include "config.h"
#include "dyn.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long an idle worker spins before it sleeps.  Long enough to cover the gap between the
 * kernels of one statement (and between the repetitions of a benchmark), short enough that
 * a worker never competes for long with another library's threads or an idle session. */
#define SPIN_NS 200000

typedef void (*PoolFn)(void *ctx, int64_t task);

struct Pool {
  int nthreads;                      /* participants, the caller included */
  int nworkers;                      /* threads we own: nthreads - 1 */
  pthread_t *th;
  uint32_t spawn_gen;                /* gen when the workers were started */
  /* The current job: written by the caller only while no worker reads it. */
  PoolFn fn;
  void *ctx;
  int64_t ntasks;
  _Alignas(64) _Atomic int64_t next; /* next task to hand out */
  _Alignas(64) _Atomic int pending;  /* workers that have not finished the job */
  _Alignas(64) _Atomic uint32_t gen; /* bumped once per job (and to quit) */
  _Atomic int sleepers;
  _Atomic bool quit;
  pthread_mutex_t mu;                /* guards sleeping */
  pthread_cond_t cv;
  pthread_mutex_t call;              /* one job at a time per pool */
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

static void run_tasks(Pool *p) {
  PoolFn fn = p->fn;
  void *ctx = p->ctx;
  int64_t n = p->ntasks;
  for (int64_t t; (t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < n;)
    fn(ctx, t);
}

static void *worker(void *arg) {
  Pool *p = arg;
  uint32_t seen = p->spawn_gen;
  in_pool = true;
  for (;;) {
    uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g == seen) {
      int64_t until = now_ns() + SPIN_NS;
      for (int i = 1; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen; i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() > until) break;
      }
      if (g == seen) {
        /* Sleep.  sleepers is raised before gen is read again, and the caller bumps gen
         * before it reads sleepers, so one of the two always sees the other. */
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->sleepers, 1);
        while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
        atomic_fetch_sub(&p->sleepers, 1);
        pthread_mutex_unlock(&p->mu);
      }
    }
    seen = g;
    if (atomic_load(&p->quit)) break;
    run_tasks(p);
    atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
  }
  return NULL;
}

/* Publish a new generation (a job or quit) and wake whoever sleeps. */
static void bump(Pool *p) {
  atomic_fetch_add(&p->gen, 1);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

static void start_workers(Pool *p, int nthreads) {
  p->nthreads = nthreads;
  p->nworkers = 0;
  p->spawn_gen = atomic_load(&p->gen);
  atomic_store(&p->quit, false);
  p->th = nthreads > 1 ? xcalloc((size_t)nthreads - 1, sizeof *p->th) : NULL;
  for (int i = 0; i < nthreads - 1; i++) {
    if (pthread_create(&p->th[i], NULL, worker, p)) break;   /* run with fewer */
    p->nworkers++;
  }
  p->nthreads = p->nworkers + 1;
}

static void stop_workers(Pool *p) {
  atomic_store(&p->quit, true);
  bump(p);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->th[i], NULL);
  free(p->th);
  p->th = NULL;
  p->nworkers = 0;
}

Pool *pool_new(int nthreads) {
  if (nthreads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = n > 0 ? (int)n : 1;
  }
  Pool *p = xcalloc(1, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  pthread_mutex_init(&p->call, NULL);
  start_workers(p, nthreads);
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
  if (nthreads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = n > 0 ? (int)n : 1;
  }
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
  p->fn = fn;
  p->ctx = ctx;
  p->ntasks = ntasks;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->pending, p->nworkers, memory_order_relaxed);
  bump(p);                                  /* seq_cst: publishes the fields above */
  in_pool = true;
  run_tasks(p);
  in_pool = false;
  /* The others are finishing their last task, or waking up to find none left. */
  for (int i = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
    cpu_relax();
    if (i % 4096 == 0) sched_yield();
  }
  pthread_mutex_unlock(&p->call);
}
