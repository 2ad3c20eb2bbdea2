/* gemm.h -- the CPU contraction engine's interface (gemm.c, gemm_emit.c, gemm_model.c,
 * gemm_run.c), for cpu.c, its unit test and the benchmarks.  Private to the compiled CPU
 * path, which is built only with LLVM; the engine's own shared definitions are in
 * gemm_int.h.
 */
#ifndef DYN_GEMM_H
#define DYN_GEMM_H

#include "dyn_int.h"
#include "jit.h"
#include "pool.h"

/* gemm.c: the CPU contraction engine.  C[b,m,n] (+)= sum_k A[b,m,k] * B[b,k,n], every
 * operand addressed by element strides given at run time; compiled once per element type
 * and hardware, any shape and layout at run time (see the design note in gemm.c). */
typedef struct GemmKernels GemmKernels;
typedef struct GemmArgs {
  int64_t batch, m, n, k;                 /* batch >= 1 (0 is a no-op); m, n, k >= 0 */
  const void *a; int64_t a_sb, a_sm, a_sk; /* element strides: batch, row, reduction */
  const void *b; int64_t b_sb, b_sk, b_sn;
  void *c; int64_t c_sb, c_sm, c_sn;      /* must not overlap a or b */
  bool accumulate;                        /* C += A.B instead of C = A.B */
  volatile int *stop;                     /* when set (Ctrl-C), stop early: C is then undefined */
} GemmArgs;
/* Compile every micro-kernel variant and packing routine for elem (DYN_F32 or DYN_F64) on
 * hw (copied), then time each kernel once on L1-resident data (about a millisecond; the
 * model's per-tile rates).  NULL with a message when the type is unsupported or LLVM
 * fails.  The object owns the JIT'd code; free with gemm_free.  Thread-safe to run. */
GemmKernels *gemm_compile(DynElem elem, const HwModel *hw, char *err, size_t errlen);
void gemm_free(GemmKernels *g);                       /* NULL-safe */
/* A 16-bit engine (elem DYN_F16 or DYN_BF16, gemm_half.c) on the f32 engine `wide`, which it
 * borrows (free it after this one): the same entry points take it, with 16-bit operands,
 * summing in f32 and rounding C once.  bf16 runs on vdpbf16ps where the model has
 * AVX512-BF16 (gemm_half_dp), else both widen to f32 as they are copied. */
GemmKernels *gemm_half_compile(DynElem elem, GemmKernels *wide, char *err, size_t errlen);
bool gemm_half_dp(const HwModel *hw, DynElem elem);
double gemm_compile_ms(const GemmKernels *g);         /* wall time gemm_compile took */
/* What compiling the row-streaming and the inner-product kernels took, when a shape first
 * made them candidates (0: not compiled yet). */
void gemm_later_ms(const GemmKernels *g, double *rows_ms, double *dots_ms);
/* Run on pool (NULL: the calling thread only; the plan may use fewer threads than the pool
 * has).  False with a message on invalid sizes or strides (nothing is written then), or
 * with "interrupted" when x->stop was set part-way. */
bool gemm_run(GemmKernels *g, const GemmArgs *x, Pool *pool, char *err, size_t errlen);
/* What gemm_run would do with nthreads threads, for `:sched`: the levels, the tiles, the
 * candidates the model weighed and their predicted times.  Appended to out. */
void gemm_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out);
/* The generated code as text for `:code`: what is "llvm" (optimised IR) or "asm". */
bool gemm_code(GemmKernels *g, const char *what, Buf *out, char *err, size_t errlen);
/* The plan gemm_run would follow, as numbers (tests, :sched).  False if x is invalid. */
typedef struct GemmPlanInfo {
  bool rows;                    /* the row-streaming kernel (then mr, nr are 0) */
  bool dot;                     /* the inner-product kernels (mr: tallest tile, nr: widest) */
  int mr, nr;                   /* the register tile family */
  bool pack_a, pack_b, swapped, c_buffered;
  bool pack_b_fused;            /* B packed by the first tile of each strip as it computes */
  int64_t kc, mc, nc;           /* cache blocks */
  int tb, tm, tn, tk;           /* thread grid over batch, M, N, K */
  int64_t edge;                 /* > 0: C's last `edge` columns by inner products, apart;
                                   the rest of the fields describe the other columns' plan */
  double predicted_s;
} GemmPlanInfo;
bool gemm_plan_info(GemmKernels *g, const GemmArgs *x, int nthreads, GemmPlanInfo *out);
/* The plan the calling thread's last gemm_run on g followed (its sizes, its forcing);
 * false when there is none since g was made or last forced.  swapped and c_buffered: 0. */
bool gemm_last_plan(GemmKernels *g, GemmPlanInfo *out);
/* Override the model (tests, experiments): each field <= 0 leaves that choice to it; fam is
 * 1 + an index into the kept families (1 = best scored), pack_* are 1 (pack) or 2 (in
 * place, if the layout allows).  NULL restores the model.  Not while runs are in flight. */
/* rows: 1 forces the row-streaming kernel (C of at most 4 rows), 2 forbids it; dot: the
 * same for the inner-product kernels (C of at most 16 columns, A with unit k stride) */
/* tk: thread blocks over k (each after the first sums into its own copy of C); edge: 1
 * puts C's last columns apart (GemmPlanInfo.edge) wherever the layout allows it, whatever
 * the model would gain, 2 never does */
typedef struct GemmForce { int fam, pack_a, pack_b, tb, tm, tn; int64_t kc, mc, nc; int rows, dot, tk, edge; } GemmForce;
void gemm_force(GemmKernels *g, const GemmForce *f);
int gemm_families(const GemmKernels *g, int *mr, int *nr, int max);   /* kept tiles */
/* The attainable peak in GFLOP/s on pool's threads: the largest micro-kernel with its
 * operands in L1 and a long reduction, timed for about `seconds`. */
double gemm_peak_gflops(GemmKernels *g, Pool *pool, double seconds);
/* The best rate of one core in GFLOP/s that calibration measured (each family's tallest
 * tile, operands in L1), or 0 when nothing was measured. */
double gemm_core_gflops(const GemmKernels *g);
/* The sustained rate of one core, core_gflops (dyn --calibrate's, all cores at once for a
 * tenth of a second), where it is below the calibrated one: every kernel's modelled time
 * scaled up by their ratio, now and when a part is calibrated later. */
void gemm_sustain(GemmKernels *g, double core_gflops);
/* The model's predicted seconds for x with nthreads (the time :time is held to). */
double gemm_predict(GemmKernels *g, const GemmArgs *x, int nthreads);

#endif
