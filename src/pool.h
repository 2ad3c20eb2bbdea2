/* pool.h -- the thread pool (pool.c) that compiled CPU code and the contraction engine run
 * on, for cpu_rt.c, gemm_run.c and the benchmarks (generated code calls dyn_parallel_for).
 * Private to the compiled CPU path, which is built only with LLVM.
 */
#ifndef DYN_POOL_H
#define DYN_POOL_H

#include "dyn_int.h"

/* pool.c: a pthread pool.  nthreads counts the calling thread (<= 0: one per online CPU). */
typedef struct Pool Pool;
Pool *pool_new(int nthreads);
void pool_free(Pool *p);                              /* NULL-safe; joins the workers */
void pool_set_threads(Pool *p, int nthreads);         /* not while a job runs on p */
int pool_threads(const Pool *p);                      /* 1 for NULL */
/* The C ABI generated code calls: run fn(ctx, t) for t in [0, ntasks) on the pool's threads
 * and the caller, return when all are done.  pool NULL, or a nested call from inside a
 * task, runs serially on the calling thread.  Concurrent callers take turns. */
void dyn_parallel_for(void *pool, int64_t ntasks, void (*fn)(void *ctx, int64_t task),
                      void *ctx);
/* The first task of participant i's share of n tasks among np: each takes a contiguous
 * run, [pool_share_start(n, np, i), pool_share_start(n, np, i + 1)) (the models price it). */
static inline int64_t pool_share_start(int64_t n, int np, int i) { return n * i / np; }

#endif
