/* cpu_int.h -- what the files of the compiled CPU back end share: the context generated
 * code reads, a compiled kernel and program, the back end object, the windowed contraction's
 * shape at run time, and the few functions one file lends another.  cpu.c generates and
 * compiles the code, cpu_rt.c runs it (binding tensors, the parallel dispatch, the
 * convolution gather), cpu_sched.c describes it for :sched.  Only included where LLVM is
 * (HAVE_LLVM). */
#ifndef DYN_CPU_INT_H
#define DYN_CPU_INT_H

#include "dyn_int.h"
#include "gemm.h"
#include "jit.h"
#include "pool.h"

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

typedef struct CKernel {
  const Kernel *kn;
  KernelFn fn;
  KernelFn fn_nt;        /* the same with streaming stores to nt_slot, or NULL */
  int nt_slot;
  int *foot, nfoot;      /* nt_slot and the tensors the kernel reads (cpu_rt.c's streaming) */
  char sym[64];
  int par_axis;          /* -1: one task */
  bool gemm;
  int pipe_f;            /* row-pipelined (cpu.c's gen_piped): its stage F (piped_stage), else -1;
                            its per-row locals are kept twice */
  int g_a, g_b, g_c;     /* slots */
  int g_ax[4];           /* batch (-1: none), m, n, k axes */
  bool win;              /* a windowed contraction (cpu_rt.c's run_window), its loop kernel kept for
                            layouts the micro-kernels cannot take */
  WinContraction w;
  int g_pos[6];          /* their subscript places: A's m, k, batch; B's k, n, batch (-1) */
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
  double twins_ms;
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
  int64_t ext[3][DYN_MAX_RANK], mext[DYN_MAX_RANK];
  int n[3];                              /* axes of P, K and Q (K in A's order) */
  int korder[DYN_MAX_RANK];              /* that order: indices into the reduction's axes */
  int64_t qlast, qrows;                  /* Q's last extent, and the runs of it in Q */
  int64_t parts;                         /* each index of P's matrix in parts along Q */
  GemmArgs x;                            /* the GEMM of the largest part */
} Win;

/* cpu.c: the contraction engine of an element type, compiled on first use (NULL with a
 * message, err may be NULL). */
GemmKernels *cpu_gemm_for(CpuBackend *be, DynElem e, char *err, size_t errlen);
/* cpu.c: compile a program's streaming twins on the first call that needs one; false when
 * they cannot be had (the plain kernels serve). */
bool cpu_compile_twins(CpuBackend *be, CpuProgram *cp);
/* cpu.c: how code generation builds a stage, for :sched's text: interchanged (each step of
 * the reduction updates the row), a layout change in tiles (the axis it reads along, or
 * -1), and the lanes of such a tile. */
bool cpu_interchanged(const Program *p, const Kernel *kn, int s, int par_axis);
int cpu_blocked_axis(const Kernel *kn, const Stage *st);
int cpu_tile_lanes(int vector_bits, DynElem ty);

/* cpu_rt.c: a contraction kernel's sizes and element strides as the GEMM engine takes them
 * (strides[slot * DYN_MAX_RANK + d]). */
void cpu_gemm_args(const CKernel *ck, const int64_t *ext, const int64_t *strides, GemmArgs *x);
/* cpu_rt.c: a windowed contraction's shape for these extents and strides, split in parts
 * of at most fit_bytes for `threads` threads; false when the micro-kernels cannot take its
 * layout (the loop kernel runs it). */
bool cpu_win_shape(const Program *p, const CKernel *ck, const int64_t *ext, const int64_t *strides,
                   const EvalSizes *sz, int threads, double fit_bytes, Win *W);

#endif
