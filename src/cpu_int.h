/* cpu_int.h -- what the files of the compiled CPU back end share: the context generated
 * code reads, a compiled kernel and program, the back end object, the windowed contraction's
 * shape at run time, and the few functions one file lends another.  cpu.c generates the
 * code, cpu_compile.c compiles it, cpu_rt.c runs it (binding tensors, the parallel dispatch,
 * the convolution gather), cpu_sched.c describes it for :sched.  Only included where LLVM
 * is (HAVE_LLVM). */
#ifndef DYN_CPU_INT_H
#define DYN_CPU_INT_H

#include "dyn_int.h"
#include "gemm.h"
#include "jit.h"
#include "pool.h"

#include <string.h>

/* What generated code reads; the layout is mirrored by GEP indices below. */
typedef struct KCtx {
  void **bufs;          /* 0: per slot, the address of element 0 */
  int64_t *strides;     /* 1: per slot, DYN_MAX_RANK element strides */
  int64_t *ext;         /* 2: per axis */
  int64_t *szv;         /* 3: per KExpr id, the value of a size */
  int64_t *shape;       /* 4: per slot, DYN_MAX_RANK dims */
  int32_t *err;         /* 5: set to 1 on a detected run-time error */
} KCtx;

typedef void (*KernelFn)(KCtx *c, int64_t lo, int64_t hi);

#define CPU_SUB_SLOTS 64       /* the slots and axes of a kernel that may split sub_axis */

typedef struct CKernel {
  const Kernel *kn;
  KernelFn fn;
  KernelFn fn_nt;        /* the same with streaming stores to nt_slot, or NULL */
  KernelFn fn_st;        /* the strided variant (cpu.c's "strided inputs"), once compiled */
  int *ins, nins;        /* the input slots it reads */
  int nt_slot;
  int *foot, nfoot;      /* nt_slot and the tensors the kernel reads (cpu_rt.c's streaming) */
  char sym[64];
  int par_axis;          /* -1: one task */
  int sub_axis;          /* the axis split instead where par_axis has too few values (cpu_sub_axis), or -1 */
  uint64_t sub_mask;     /* sub_axis and its fellows, one a stage where the stages have their own */
  int8_t sub_dim[CPU_SUB_SLOTS];   /* per slot, its dimension that those subscript, or -1 */
  bool gemm;
  int pipe_f;            /* row-pipelined (cpu.c's gen_piped): its stage F (piped_stage), else -1;
                            its per-row locals are kept twice */
  int g_a, g_b, g_c;     /* slots */
  int g_ax[4];           /* batch (-1: none), m, n, k axes */
  bool win;              /* a windowed contraction (cpu_rt.c's run_window), its loop kernel kept for
                            layouts the micro-kernels cannot take */
  WinContraction w;
  int g_pos[6];          /* their subscript places: A's m, k, batch; B's k, n, batch (-1) */
  int g_nout;            /* outer batch axes (Contraction's), subscripts 0.. of A, B and C */
  int g_out[DYN_MAX_RANK];
} CKernel;

struct CpuProgram {
  const Program *p;
  CKernel *k;
  int nk;
  char *ir;              /* optimised IR, for :code llvm */
  double compile_ms;
  /* The last call's size values and the tables cpu_run evaluated from them (strides,
   * shapes, extents, size values): a loop over one shape evaluates them once. */
  int64_t *tables;
  int tables_nsizes;
  size_t tables_words;
  JitCode *code, *twins_code;   /* the machine code of the loop kernels and of their twins */
  bool twins_tried, twins_ok;   /* streaming twins (cpu_compile_twins) */
  JitCode *strided_code;        /* the strided variants (cpu_compile_strided) */
  bool strided_tried, strided_ok;
  double twins_ms;
  AttnChain *attn;              /* attention chains that may run fused (cpu_attn.c) */
  int nattn;
  bool *attn_on;                /* per chain: fused in the current call */
  struct AttnPlan *attn_plan;   /* per chain: its last plans (cpu_attn.c) */
  bool *attn_unstored;          /* per slot: a temporary the current call never stores */
  /* :time --kernels (cpu_profile): while prof is set, each call that succeeds writes the
   * seconds of each kernel (a fused group's under its first) to row prof_runs of prof
   * (nk doubles a row), until prof_cap rows */
  double *prof;
  int prof_cap, prof_runs;
};

struct CpuBackend {
  Jit *jit;
  Pool *pool;
  HwModel hw;
  GemmKernels *gemm[4]; /* f32, f64, f16, bf16 (the last two on the f32 one) */
  int modules;
};

/* A windowed contraction's shape at run time: its parts, the GEMM of the largest, and B's
 * offsets. */
typedef struct Win {
  int64_t ptot, mtot, qtot, ktot;
  int64_t b0, coef[3][DYN_MAX_RANK];     /* B's element offset: b0 + coef . (P, K, Q) */
  int64_t hi;                            /* the furthest element of B any window reads */
  int64_t ext[3][DYN_MAX_RANK], mext[DYN_MAX_RANK];
  int n[3];                              /* axes of P, K and Q (K in A's order) */
  int korder[DYN_MAX_RANK];              /* that order: indices into the reduction's axes */
  int64_t qlast, qrows;                  /* Q's last extent, and the runs of it in Q */
  int64_t parts;                         /* each index of P's matrix in parts along Q */
  bool direct;                           /* B's windows already form that matrix (a 1 x 1
                                            convolution at stride 1): read in place */
  bool a_gather;                         /* A is not an M x K matrix in place (O[h, s, e] read
                                            as s x (h, e)): gathered into one first */
  int64_t a_st[2][DYN_MAX_RANK];         /* then A's strides along M's axes and K's (K in A's
                                            gathered order, as ext[1]) */
  GemmArgs x;                            /* the GEMM of the largest part */
} Win;

/* cpu_compile.c: the contraction engine of an element type, compiled on first use (NULL
 * with a message, err may be NULL). */
GemmKernels *cpu_gemm_for(CpuBackend *be, DynElem e, char *err, size_t errlen);
/* cpu_compile.c: compile a program's streaming twins on the first call that needs one;
 * false when they cannot be had (the plain kernels serve). */
bool cpu_compile_twins(CpuBackend *be, CpuProgram *cp);
/* cpu_compile.c: compile a program's strided variants on the first call that passes an
 * input whose last stride is not 1; false when they cannot be had. */
bool cpu_compile_strided(CpuBackend *be, CpuProgram *cp);
/* cpu.c: the module of a program's loop kernels, its symbols named with prefix: the plain
 * kernels (naming each CKernel's sym and deciding its pipelining and streaming slot), their
 * streaming twins (SYM_nt) or their strided variants (SYM_st). */
struct LLVMOpaqueModule *cpu_build_module(CpuBackend *be, struct LLVMOpaqueContext *cx, const Program *p, CKernel *ck,
                                          int nk, const char *prefix, bool kernels, bool twins, bool strided);
/* cpu.c: how a kernel is run: the axis split across tasks (-1: one task).  (Whether it is a
 * contraction for the GEMM engine, or a windowed one, is cpu_compile.c's match_gemm and
 * match_window.) */
int cpu_par_axis(const Kernel *kn);
/* The reductions and scans in an expression. */
int cpu_count_reduces(const KExpr *e);
/* cpu.c: how code generation builds a stage, for :sched's text: interchanged (each step of
 * the reduction updates the row), a layout change in tiles (the axis it reads along, or
 * -1), and the lanes of such a tile. */
bool cpu_interchanged(const Program *p, const Kernel *kn, int s, int par_axis);
int cpu_blocked_axis(const Kernel *kn, const Stage *st);
bool cpu_stage_plain(const HwModel *h, const Program *p, const Kernel *kn, int s, int par_axis);
bool cpu_stage_splits(const Stage *st);
bool cpu_stage_overlaps(const HwModel *h, const Program *p, const Kernel *kn, int s, int par_axis);
int cpu_tile_lanes(int vector_bits, DynElem ty);
/* cpu_layout.c: the walk of a layout change's tiles of w lanes of ty (cpu.c's gen_blocked):
 * the values of u a block spans (a multiple of w), the tiles a band of v spans, and the
 * granule of a task's share of the parallel axis: whole tiles (w) when that axis is a tiled
 * stage's u, else 1 (vector_bits: the model's). */
int64_t cpu_layout_block(const HwModel *hw, DynElem ty, int w);
int cpu_layout_band(const HwModel *hw, DynElem ty, int w);
int64_t cpu_layout_granule(const Kernel *kn, int par_axis, int vector_bits);
/* cpu_layout.c: the load by which a layout change reads along u: its last subscript is u
 * (NULL: none). */
const KExpr *cpu_layout_load(const KExpr *e, int u);
/* A row-pipelined kernel (cpu.c's gen_piped) keeps each per-row local twice, the second
 * copy this many bytes after the first (a row's bytes, `row`, on 64-byte lines, at least
 * PIPE_COPY_MIN): the loop that reads one copy and writes the other is vectorised under a
 * run-time check that they lie a vector loop's step apart (16 lanes, 4 at once: 256 bytes
 * of f32, 512 of f64), else it runs scalar.  One row's bytes apart, softmax over rows of
 * 16 to 63 f32 ran scalar: f32[32768, 32] took 60 ns a row on one thread of Zen 5, twice
 * f32[16384, 64]'s 31 (its rows 256 bytes apart). */
#define PIPE_COPY_MIN 1024

/* Whether code for these LLVM features masks a vector load's or store's lanes, a lane masked
 * off neither read, written nor faulting (AVX-512): the masked edges of a layout change's
 * tiles (cpu.c's gen_blocked) and the masked short rows of a row sum (cpu_reduce.c) take it, the
 * code generator from the JIT's features, the models from the hardware model's. */
static inline bool cpu_masks_lanes(const char *features) { return strstr(features, "+avx512f") != NULL; }
static inline int64_t cpu_pipe_copy_bytes(int64_t row) {
  int64_t b = (row + 63) / 64 * 64;
  return b > PIPE_COPY_MIN ? b : PIPE_COPY_MIN;
}

/* cpu_layout.c: the seconds a kernel with layout changes (cpu_blocked_axis) takes on
 * `threads` of hw at these extents and element strides (strides[slot * DYN_MAX_RANK + d]),
 * reading `read` and writing `written` bytes (streamed: with streaming stores) in the tasks
 * of split along par_axis (NULL or -1: one): the larger of the busiest thread's bytes
 * (sched_stream_time's: the level they fit in, the reads for ownership of unstreamed lines
 * from memory) and its tasks' tiles' shuffles and edges' elements (their sum where
 * cpu_layout_waits), plus the fork-join; the terms in *T (comp_s: the tiles').  0 for a
 * kernel without a layout change. */
struct CpuSplit;
double cpu_layout_time(const HwModel *hw, const Program *p, const Kernel *kn, const int64_t *ext, const int64_t *strides, int threads,
                       double read, double written, bool streamed, const struct CpuSplit *split, int par_axis, SchedTerms *T);
/* cpu_sched.c: the seconds a row-wise kernel spends folding each reduction's lanes into
 * one value, once a row, on T's threads (sched_stream_time's terms). */
double cpu_row_folds_s(const HwModel *h, const Kernel *kn, const int64_t *ext, const SchedTerms *T);
/* Whether its tiles and bytes add (from a shared cache) rather than overlap. */
bool cpu_layout_waits(const HwModel *hw, const SchedTerms *T);

/* cpu_rt.c: a contraction kernel's sizes and element strides as the GEMM engine takes them
 * (strides[slot * DYN_MAX_RANK + d]), and the GEMMs it runs: 1, or with outer batch axes
 * (ck->g_nout) that do not nest with the batch in A, B and C alike, one an index of them, x
 * then the problem at their first index (where they nest, x is one GEMM over them all). */
int64_t cpu_gemm_args(const CKernel *ck, const int64_t *ext, const int64_t *strides, GemmArgs *x);
/* cpu_rt.c: a windowed contraction's shape for these extents and strides, split in parts
 * of at most fit_bytes for `threads` threads; false when the micro-kernels cannot take its
 * layout (the loop kernel runs it). */
bool cpu_win_shape(const Program *p, const CKernel *ck, const int64_t *ext, const int64_t *strides,
                   const EvalSizes *sz, int threads, double fit_bytes, Win *W);
/* cpu_conv.c: nn's zero padding of X (Xp[..., y, x] = X[..., y + d[0], x + d[1]] inside X,
 * 0 outside), fused into the convolution that alone reads it: X's data and strides, the
 * padded tensor's strides and extents (row-major), the shift and X's plane. */
typedef struct Pad {
  const char *x;                         /* X's data */
  int rank;
  int64_t xs[DYN_MAX_RANK];              /* X's strides */
  int64_t ps[DYN_MAX_RANK], pe[DYN_MAX_RANK];   /* the padded tensor's strides and extents */
  int64_t d[2], h, w;                    /* the plane's shift (y + d[0], x + d[1] in X) and X's plane */
  int64_t plane;                         /* the padded plane's elements */
} Pad;
/* cpu_conv_gemm.c: the dense convolution ck reading the padding P as an implicit GEMM on X
 * itself (the padding kernel then does not run): 1 ran, 0 not this way (both kernels run
 * as they are), -1 failed; and its prediction, described into out (-1: not this way). */
int cpu_conv_gemm_padded(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                         const int64_t *strides, const EvalSizes *sz, const Pad *P, volatile int *interrupt,
                         char *err, size_t errlen);
double cpu_conv_gemm_padded_predict(CpuBackend *be, const Program *p, const CKernel *ck, const int64_t *ext,
                                    const int64_t *strides, const EvalSizes *sz, const Pad *P, int threads, Buf *out);
/* cpu_rt.c: at least `bytes` of 64-byte aligned scratch for the calling thread, kept for its
 * next task (NULL when it cannot be had). */
void *cpu_scratch_get(size_t bytes);
/* The same for a whole call's buffers on the thread that makes it (a slot of its own, so
 * the tasks it runs itself keep theirs), kept for its next call up to 64 MB: given back by
 * cpu_scratch_call_done when larger. */
void *cpu_scratch_call(size_t bytes);
void cpu_scratch_call_done(void);
/* cpu_conv_gemm.c: run a dense windowed contraction of shape W as an implicit GEMM on g (B's
 * panels packed from the windows, A packed once): 1 ran; 0 the model's plan is not one of
 * tiles (the gathered path runs it); -1 failed (err set).  Its prediction for `threads`
 * (-1 where it would not run), described into out when out is not NULL. */
int cpu_conv_gemm_run(CpuBackend *be, GemmKernels *g, const Win *W, const void *a, const void *b, void *c,
                      volatile int *interrupt, char *err, size_t errlen);
double cpu_conv_gemm_predict(GemmKernels *g, const Win *W, int threads, Buf *out);
/* cpu_conv_gemm.c: the gathered path with the images taken in groups, each group's windows
 * gathered into one K x (G Q) matrix and multiplied by one GEMM on all threads, where the
 * model says that beats a GEMM an image on each thread: 1 ran, 0 not this way, -1 failed;
 * and its prediction (-1 where it would not run), described into out, its GEMM into x. */
int cpu_conv_grouped_run(CpuBackend *be, GemmKernels *g, const Win *W, const void *a, const void *b, void *c,
                         volatile int *interrupt, char *err, size_t errlen);
double cpu_conv_grouped_predict(GemmKernels *g, const Win *W, int threads, Buf *out, GemmArgs *x);
/* cpu_rt.c: index pi of a gathered window matrix, Q's runs [r0, r1), every row of K into dst
 * (rows ld elements apart); roff: room for r1 - r0 offsets. */
void cpu_win_gather(const Win *W, const char *b, char *dst, int64_t ld, int64_t pi, int64_t r0, int64_t r1, int es,
                    int64_t *roff);
/* Vectors of 64 bytes in GCC's and Clang's extensions (one zmm, two ymm or four xmm as the
 * compiler's target has them), a load of one from any address, and the even lanes of two
 * (a step of 2): cpu_conv.c's row kernels and cpu_rt.c's gathered runs. */
typedef float ConvVf __attribute__((vector_size(64)));
typedef double ConvVd __attribute__((vector_size(64)));
typedef int32_t ConvIf __attribute__((vector_size(64)));
typedef int64_t ConvId __attribute__((vector_size(64)));
#define CONV_LD(VT, p) ({ VT v_; memcpy(&v_, (p), sizeof v_); v_; })
#if defined(__clang__)
#define CONV_EVEN_f(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define CONV_EVEN_d(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#else
#define CONV_EVEN_f(a, b) __builtin_shuffle(a, b, (ConvIf){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#define CONV_EVEN_d(a, b) __builtin_shuffle(a, b, (ConvId){0, 2, 4, 6, 8, 10, 12, 14})
#endif

/* cpu_conv.c: an affine index expression (a window's subscript) at the axis values ax,
 * its sizes from sz. */
int64_t cpu_affine_at(const KExpr *e, const int64_t *ax, const EvalSizes *sz);
/* cpu_conv.c: how a convolution's parallel run ended: -1 with err set to why (it failed)
 * or "interrupted", else 1. */
int cpu_conv_ended(bool failed, const char *why, volatile int *interrupt, char *err, size_t errlen);
/* cpu_conv.c: run a grouped windowed contraction (a depthwise convolution: ck->w.ng > 0)
 * plane by plane.  1: ran; 0: this layout takes the loop kernel; -1: failed (err set). */
int cpu_conv_run(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                 const int64_t *strides, const EvalSizes *sz, volatile int *interrupt, char *err, size_t errlen);
/* cpu_conv.c: kernel k a zero padding that only kernel k + 1, a convolution, reads (nn's
 * Xp): run the convolution on planes it pads itself (grouped) or on panels it packs through
 * the padding (dense), and not the padding.  2: both ran; 1: no padding at these sizes, the
 * padding not run and the convolution's B in bufs made X itself (run kernel k + 1 as it
 * is); 0: not such a pair (run them as they are); -1: failed (err set). */
int cpu_conv_padded(CpuBackend *be, const CpuProgram *cp, int k, void **bufs, const int64_t *ext,
                    const int64_t *strides, const int64_t *shape, const EvalSizes *sz, volatile int *interrupt,
                    char *err, size_t errlen);
/* cpu_conv.c: the same pair for :sched: its lines and predicted time (added to *total);
 * 2: described; 1: the padding described as not run (describe kernel k + 1 as it is, its B
 * X's layout); 0: not such a pair with these sizes. */
int cpu_conv_describe_padded(CpuBackend *be, const CpuProgram *cp, int k, const Extents *x, int threads, Buf *out,
                             double *total);
/* cpu_conv.c: its predicted seconds on `threads` threads, with a line for :sched appended
 * to out (NULL: none); -1 when the loop kernel would run it. */
double cpu_conv_predict(const CpuBackend *be, const Program *p, const CKernel *ck, const int64_t *ext,
                        const int64_t *strides, const EvalSizes *sz, int threads, Buf *out);

/* cpu_attn.c: fused attention.  cpu_attn_find keeps the program's attention chains whose
 * contractions run on the GEMM engine.  cpu_attn_choose decides, per chain and shape, fused
 * or not (the model, or DYN_ATTENTION=fused|unfused), and returns per slot whether the call
 * leaves that temporary unallocated (NULL: no chain).  cpu_attn_run runs the chain that
 * starts at kernel k when it is fused: the kernels it stands for (4), 0 when none, -1 with
 * a message.  cpu_attn_describe: :sched's lines for such a chain, the kernels its text
 * stands for (0: describe them one by one too); adds the predicted seconds to *total. */
void cpu_attn_find(CpuProgram *cp);
const bool *cpu_attn_choose(CpuBackend *be, CpuProgram *cp, const int64_t *ext, const int64_t *szv);
int cpu_attn_run(CpuBackend *be, CpuProgram *cp, int k, void **bufs, const int64_t *ext, const int64_t *szv,
                 const int64_t *strides, volatile int *interrupt, char *err, size_t errlen);
int cpu_attn_describe(CpuBackend *be, CpuProgram *cp, int k, const int64_t *ext, const EvalSizes *sz, int threads,
                      Buf *out, double *total);
/* cpu_sched.c: a row-wise kernel's seconds with each row's stages in turn, the first
 * against the reads and the last (or, pipelined, stage pipe_f with it) against the writes,
 * from w and the streaming model's terms T of it; 0 where it has one stage. */
double cpu_rows_in_turn(const HwModel *h, const Program *p, const Kernel *kn, PolyCtx *pc, const EvalSizes *sz,
                        const int64_t *ext, int pipe_f, const SchedWork *w, const SchedTerms *T, const double *tails);
/* cpu_sched.c: the lane-operations the loops' entries and tails add to the stages that
 * LLVM's loop vectoriser vectorises (cpu_stage_plain), each stage's in tails[s] (NULL: not
 * wanted), the sum returned; tasks: the kernel's tasks (a stage along the parallel axis has
 * its share). */
double cpu_tail_ops(const HwModel *h, const Program *p, const Kernel *kn, PolyCtx *pc, const EvalSizes *sz,
                    const int64_t *ext, int par_axis, int64_t tasks, double *tails);
/* The vectors and elements a loop of n elements takes as LLVM's loop vectoriser builds it
 * in vectors of vf lanes: whole, then half, then single. */
double cpu_tail_units(int64_t n, int vf);
double cpu_overlap_units(int64_t n, int vf, bool masks);

/* The predicted seconds of the row path (a few query rows a task, K and V read in place) on
 * Q[B, S, D], K[B, T, D], V[B, T, E], of whose keys a mask (masked) leaves the share `kept`,
 * on `threads` of hw or on one (*serial, when that is faster: a fork-join costs more than it
 * saves). */
double cpu_attn_rows_time(const HwModel *hw, int threads, int64_t B, int64_t S, int64_t T, int64_t D, int64_t E,
                          double kept, bool masked, bool *serial);

/* cpu_reduce.c: a reduction whose kept innermost run is short (cpu_reduce_short_plan): the
 * operand a single load X[..., r0, v] whose last subscript v is the stage's last axis and
 * whose one before it, r0, is reduced, so that where v's stride is 1 and r0's is v's extent
 * each block X[..., :, :] is one stretch of memory, read in whole vectors. */
typedef struct CpuShortPlan {
  int slot, rank;                  /* the operand's slot and rank */
  int v, r0;                       /* the kept run's axis and the reduced one before it */
} CpuShortPlan;
bool cpu_reduce_short_plan(const Program *p, const Kernel *kn, int s, CpuShortPlan *sp);
/* The vectors of such a kernel's accumulators: its lanes at the model's width, the most
 * vectors a lane pattern may take (A = r / gcd(r, lanes)), and the chains of adds that keep
 * the pipes busy; the accumulators of a run of r are ceil(chains / A) sets of A vectors, as
 * many sets as fit in amax vectors. */
typedef struct CpuShortShape {
  int lanes, amax, chains;
} CpuShortShape;
CpuShortShape cpu_reduce_short_shape(const HwModel *h, DynElem ty);
/* The accumulator vectors of a run of r under shape s, or 0 when r takes the stage's other
 * loops (r < 1, or its lane pattern needs more than s.amax vectors). */
int cpu_reduce_short_accs(CpuShortShape s, int64_t r);
/* Where it is 0, a run of r with stride 1, from one vector to 8 vectors long, is kept in
 * that many whole vectors of registers and one for its tail over the reduced rows: their
 * count, else 0 (the interchanged loops). */
int cpu_reduce_kept_vectors(CpuShortShape s, int64_t r);
/* The most rows a plan of column sums takes in registers, and the vectors of its chunks
 * (cpu_reduce.c's columns_gen). */
int cpu_reduce_col_rows(void);
int cpu_reduce_col_vecs(void);
/* The longest innermost run a folded plan takes W results at a time (cpu_reduce.c). */
int cpu_reduce_fold_most(int W);
/* The longest rows the rows plan takes in vectors (cpu_reduce.c's ROWS_VMAX). */
int cpu_reduce_rows_most(void);
/* The shortest rows it takes in vectors on h, rows of W lanes: FOLD_SHORT_MIN where h masks
 * loads (AVX-512), else W (shorter rows go in the lanes of gathers). */
int cpu_reduce_rows_least(const HwModel *h, int W);
/* A reduction over the operand's last subscript alone, the row before it the stage's last
 * kept axis (X[..., b, n] summed over n), on a model with gathers (x86 with AVX2 or
 * AVX-512): rows run a vector of lanes (cpu_tile_lanes) at a time, those shorter than a
 * vector one in each lane of a gather, those of a vector to cpu_reduce_rows_most (dense)
 * each in a vector of partials, folded together.  v: the row's axis, r0: the reduced one. */
bool cpu_reduce_rows_plan(const HwModel *h, const Program *p, const Kernel *kn, int s, CpuShortPlan *sp);

/* cpu_reduce.c: a reduction stage walked in runs of axes that lie one after another in
 * memory, each run one loop (its design note says when and why).  The plan, from the program
 * alone; the stage's code checks at run time that the strides do join each run. */
#define CPU_RED_AXES (DYN_MAX_RANK * 2)
#define CPU_RED_CHECKS 32
typedef struct CpuRedPlan {
  int nax, ax[CPU_RED_AXES];       /* the axes as the operand's first full load lays them out */
  int ng, gfirst[CPU_RED_AXES], glen[CPU_RED_AXES];   /* runs of ax: first place, length */
  bool gred[CPU_RED_AXES];         /* the run's axes are reduced (else kept) */
  int par_group;                   /* the run led by the parallel axis, or -1 */
  bool direct;                     /* no reduced run outside a kept one: each result is
                                      reduced whole and stored once */
  bool columns;                    /* a plain load's reduced run, then its kept one (column
                                      sums): few rows may take their columns in registers */
  bool folded;                     /* a plain load's innermost run reduced, another reduced
                                      run outside: W results at a time in vectors of partials,
                                      folded once (cpu_reduce.c), where the extents allow */
  int nchk, chk_slot[CPU_RED_CHECKS], chk_dim[CPU_RED_CHECKS], chk_rank[CPU_RED_CHECKS],
      chk_group[CPU_RED_CHECKS];   /* a slot whose dims from chk_dim hold a run of two or more */
} CpuRedPlan;
/* The plan of stage s (the kernel's only one), or false when it is no such reduction or no
 * two of its axes merge (the stage's ordinary loops serve). */
bool cpu_reduce_plan(const Program *p, const Kernel *kn, int s, int par_axis, CpuRedPlan *pl);
/* The work of each iteration of stage s's axes: the product of its reduction's extents (at
 * most 2^30), or 1 where the reduction runs along the parallel axis, whose tasks would then
 * read short pieces of every row; cpu_rt.c weighs a kernel's split by it. */
int64_t cpu_reduce_work(const Kernel *kn, int s, int par_axis, const int64_t *ext);
/* :sched's words for a plan: its runs, outer to inner. */
void cpu_reduce_text(const Program *p, const CpuRedPlan *pl, Buf *out);
/* A reduction whose kept extent leaves cores idle, its reduced extent split instead: each
 * piece of `axis` a task that reduces into a partial result of its own (piece 0 into the
 * result), the partials combined in piece order.  The pieces depend on the shape and the
 * model's cores alone, never on the threads that run them, so the result does not either. */
typedef struct CpuRedSplit {
  int axis;                        /* the reduced axis split (the operand's outermost reduced) */
  int64_t pieces, kept;            /* its pieces; the results (the kept extents' product) */
  int nmove, move_slot[16], move_dim[16];   /* the loads' slots that take axis, at dim */
  double t_now, t_split;           /* the model's seconds without and with the split */
} CpuRedSplit;
/* Whether ck's kernel at these extents (strides and shape per slot, as cpu_rt.c has them;
 * shape NULL: the result is taken as dense) runs split, by the model of h: its plan in *sp. */
bool cpu_reduce_split(const HwModel *h, const Program *p, const CKernel *ck, const int64_t *ext,
                      const int64_t *strides, const int64_t *shape, CpuRedSplit *sp);
/* Run it with fn over the kernel's n iterations of its parallel axis on pool; false when the
 * partial results cannot be allocated. */
bool cpu_reduce_split_run(void *pool, const Program *p, const CKernel *ck, KernelFn fn, const KCtx *base,
                          const CpuRedSplit *sp, int64_t n, volatile int *interrupt);
/* The model's seconds for the partials' combination (the partials written by the pieces,
 * read again, and the result written, on one thread). */
double cpu_reduce_combine_time(const HwModel *h, const CpuRedSplit *sp, int elem_bytes);
/* The lane-operations the innermost loop's runs of a reduction kernel cost beyond one an
 * element at the vector rate: its elements past the last whole vector and each run's entry
 * and exit, in cycles of h's clock at its vector pipes' rate (0 for other kernels). */
double cpu_reduce_run_ops(const HwModel *h, const Program *p, const Kernel *kn, int par_axis, const int64_t *ext);
/* The seconds a short plan's folds add on the busiest thread (its kept indices, T's threads
 * and imbalance), after the stream; 0 for other plans. */
double cpu_reduce_fold_s(const HwModel *h, const Program *p, const Kernel *kn, const int64_t *ext, const SchedTerms *T);
/* The tasks cpu_rt.c splits a kernel's parallel axis into on `threads` (cpu_rt.c): one
 * where the kernel is small. */
int64_t cpu_task_count(const Kernel *kn, int par_axis, const int64_t *ext, int threads);
/* cpu_rt.c: the split of a parallel axis of n values into tasks of whole granules (units of
 * gran values, cpu_layout_granule): task t takes units [t units / tasks, (t + 1) units /
 * tasks), so the tasks differ by a unit at most.  cpu_split_range gives task t's values
 * [lo, *hi); cpu_split_busiest the share of n that the busiest of `threads` takes, each
 * owning a contiguous share of the tasks as the pool hands them out (pool.c). */
typedef struct CpuSplit { int64_t n, gran, units, tasks; bool sub; } CpuSplit;
/* sub_axis (cpu_sub_axis, or -1): split instead where it gives more tasks than par_axis and
 * those are fewer than the threads (sub set); each task then runs the whole parallel axis
 * over its share of sub_axis's values. */
CpuSplit cpu_task_split(const Kernel *kn, int par_axis, int sub_axis, const int64_t *ext, int vector_bits, int threads);
/* The axis a kernel's tasks may split where its parallel axis has too few values (tensors of
 * one image, f32[1, C, H, W]), or -1: the next axis out (an element-wise statement over a
 * matrix: its rows' axis), which every stage loops over, none reduces or scans, and every
 * access subscripts by itself alone, so that a task is the kernel run on views of its
 * tensors, each offset to the task's first value of it (cpu_rt.c's run_task); dims[slot]:
 * the dimension of the slot that axis subscripts, -1 where none; *mask: the axis and, where
 * each stage has its own (a row-wise chain's statements), theirs, which a task shrinks alike. */
int cpu_sub_axis(const Program *p, const Kernel *kn, int par_axis, int8_t *dims, uint64_t *mask);
int64_t cpu_split_range(const CpuSplit *s, int64_t t, int64_t *hi);
double cpu_split_busiest(const CpuSplit *s, int threads);

#endif
