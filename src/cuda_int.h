/* cuda_int.h -- what the files of the GPU back end share, and nothing the rest of dyn uses
 * (that is in dyn_int.h).  The back end is five files, one step each: cuda_load.c opens the
 * driver and NVRTC, cuda_analyse.c decides what each kernel of a Program becomes,
 * cuda_render.c writes it as CUDA C (after the prelude in src/cuda/), cuda_plan.c picks a
 * variant and a launch per kernel and shape, and cuda_run.c compiles, loads and launches.
 * Rendering and compiling to PTX need no GPU (only NVRTC), so they are tested everywhere;
 * both libraries are opened with dlopen through the one table in cuda.def.
 *
 * Design note.  The GPU is a hierarchy -- thread registers, warp, block with its shared
 * memory, grid of blocks over the SMs -- and every kernel of a Program is mapped top-down onto
 * it, once, with every extent, size and stride an argument: one module serves every shape.
 *   - Elementwise and general loop nests: a thread per element of the innermost axis (x), the
 *     other axes flattened into rows (y), both grid-stride; the host fits the block's shape to
 *     the extents.  Where the innermost axis is contiguous a variant moves four elements per
 *     thread with 16-byte loads and stores.  Index math is 64-bit but costs one add per
 *     element: the divisions that unflatten a row happen once per row.
 *   - Row-wise kernels (softmax, layernorm: Kernel.nouter > 0) and reductions along an axis:
 *     a warp per row (8 rows per block), or a block of 256 or 1024 threads per row.  Per-row
 *     scalars live in registers; per-row arrays without a reduction are recomputed where they
 *     are read (exp(x - m) costs less than a round trip to memory); a reduction is a strided
 *     loop per thread, butterfly shuffles (__shfl_xor_sync) inside each warp, then one slot per
 *     warp in shared memory, read back in one order by every thread (deterministic).
 *   - Reductions to one value: the blocks write partial results and the last block to finish
 *     (an atomic ticket) combines them in block order: deterministic, one launch.
 *   - Contractions (cpu.c's structural test, widened to any epilogue around the sum): a block
 *     per tile of C and batch, A and B tiles staged through shared memory in k-steps, two
 *     buffers filled by cp.async from sm_80 on (plain loads before), 8x8 (or 4x4) outputs per
 *     thread in registers, bounds-checked edges, exact f32 FMA.  The k-loop is one template in
 *     the prelude (dyn_gemm_run) over a tile type; five tile shapes are compiled, and a split
 *     of K (partial tiles summed in order by a second kernel) serves shapes with few tiles.
 *     f64 contractions take the same tiles with 4x4 outputs per thread (an f64 accumulator
 *     holds two registers), three shapes.
 *   - Tensor cores, only when asked for (CudaMath: :target gpu tf32 or bf16) and only from
 *     compute capability 8.0: the same k-loop and staging (f32 in shared memory), but a warp
 *     computes a tile of C with mma.sync (m16n8k8 on tf32, m16n8k16 on bf16), rounding the
 *     operands as it reads its fragments and accumulating in f32.  Older GPUs, and every f64
 *     or integer contraction, stay exact.  An f16 or bf16 contraction is always on them from
 *     8.0 (before, on the general kernels): its tiles stage the stored 16 bits and a warp
 *     reads its m16n8k16 fragments straight from them, exact products summed in f32, C
 *     rounded once where the epilogue stores it, as on the CPU.
 * The model (cuda_plan.c) picks a variant per kernel and shape at run time, from the
 * hw file or the device only: FLOPs over the SMs' peak scaled by the tile's FLOPs per
 * shared-memory byte and by the warps resident, bytes over L2 and HBM bandwidth, the padding
 * of partial tiles, and waves = ceil(blocks / (SMs x blocks per SM)); two fixed costs (a
 * wave's pipeline fill, the split's extra launch) are assumptions stated where they are.
 *
 * Semantics follow eval.c: f32 arithmetic in f32 (FMA contraction allowed), integers wrap,
 * floor division and modulo like Python, saturating float-to-int casts, NaN-propagating max
 * and min, where(...) evaluates only the chosen branch, `and`/`or` evaluate both sides.  A
 * checked access out of range or an integer division by zero sets an error word; the caller
 * then re-runs the reference evaluator for the exact message, as with the CPU back end.
 *
 * Every kernel names its blocks per SM in __launch_bounds__ (ptxas otherwise picks a register
 * target of its own and spills below it), and index division avoids the 64-bit division
 * routine: ptxas -v reports no spills for any stdlib kernel on sm_80 and sm_90.
 *
 * Limits: the model times f64 tiles at the f32 peak (no hw file has an f64 figure); the
 * tensor-core tiles read their fragments with 4- and 8-byte shared-memory loads (no ldmatrix,
 * no wgmma on sm_90) and stage f32, so bf16 moves as many shared-memory bytes as tf32 (the
 * tiles of f16 and bf16 operands stage 16 bits, but where k is not contiguous build each
 * fragment word from two 2-byte reads, which ldmatrix.trans would do at once); rows
 * of a row-wise kernel are not split across blocks, so a few very long rows use few SMs;
 * transposes are not staged through shared memory; inputs must be contiguous.  Test hooks
 * for the libraries: see cuda_load.c.
 */
#ifndef DYN_CUDA_INT_H
#define DYN_CUDA_INT_H

#include "dyn_int.h"

/* ---- cuda_load.c: stand-in types, the table from cuda.def, dlopen ------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;
typedef int nvrtcResult;
typedef void *nvrtcProgram;

enum {
  CU_DEV_CLOCK_RATE = 13, CU_DEV_SM_COUNT = 16, CU_DEV_MEM_CLOCK_RATE = 36, CU_DEV_BUS_WIDTH = 37,
  CU_DEV_L2_SIZE = 38, CU_DEV_THREADS_PER_SM = 39, CU_DEV_CC_MAJOR = 75, CU_DEV_CC_MINOR = 76,
  CU_DEV_SMEM_PER_SM = 81, CU_DEV_REGS_PER_SM = 82, CU_DEV_SMEM_PER_BLOCK_OPTIN = 97,
  CU_FUNC_NUM_REGS = 4, CU_FUNC_LOCAL_BYTES = 3, CU_JIT_ERROR_LOG = 5, CU_JIT_ERROR_LOG_SIZE = 6,
  CUDA_ERROR_NO_DEVICE = 100
};

typedef struct Drv {
#define DRV(ret, name, sym, args) ret (*name) args;
#define RTC(ret, name, sym, args)
#include "cuda.def"
#undef DRV
#undef RTC
} Drv;

typedef struct Rtc {
#define DRV(ret, name, sym, args)
#define RTC(ret, name, sym, args) ret (*name) args;
#include "cuda.def"
#undef DRV
#undef RTC
} Rtc;

/* The entry points, filled once the library is open (cuload_have_driver, cuload_have_nvrtc);
 * never changed afterwards. */
extern Drv cuload_drv;
extern Rtc cuload_rtc;
/* Opens the library once per process; false with the reason in why (when not NULL). */
bool cuload_have_driver(char *why, size_t wl);
bool cuload_have_nvrtc(char *why, size_t wl);
/* The driver's words for r (a static string). */
const char *cuload_err(CUresult r);

/* ---- cuda_analyse.c: what each kernel of a Program becomes -------------------------------- */

/* The arguments of a kernel: one 8-byte word each (a pointer or an i64), in this order. */
enum { F_PTR, F_STRIDE, F_DIM, F_EXT, F_SIZE, F_ERR, F_WS, F_SPLITS, F_AVEC, F_BVEC };
typedef struct Field { int kind, slot, dim, axis; const Poly *size; char name[112]; } Field;

/* The compiled variants of a kernel. */
enum { V_LOOP, V_LOOP4, V_WARP, V_BLOCK256, V_BLOCK1024, V_GRID, V_GEMM, V_SPLITK };

/* The block tiles of the contraction variants: BM x BN outputs per block, k-steps of BK,
 * TM x TN outputs per thread; on the tensor cores, WM x WN warps, each with a (BM / WM) x
 * (BN / WN) tile of C in mma tiles of 16 x 8, of which a thread holds TM x TN outputs
 * (TM = 2 BM / WM / 16, TN = 2 BN / WN / 8: two rows and two columns of each mma tile). */
typedef struct GemmShape { int bm, bn, bk, tm, tn, wm, wn; } GemmShape;
/* The most tile shapes of one element type and arithmetic (cuda_analyse.c checks it). */
#define NSHAPES_MAX 5

/* The tiles of a contraction of elements et (f32 or f64) computing in m; *n of them. */
const GemmShape *cuana_gemm_shapes(CudaMath m, DynElem et, int *n);
int cuana_gemm_threads(const GemmShape *g);

typedef struct Var {
  int kind;
  int lanes, rows, threads;   /* threads per row and rows per block (row variants), per block */
  int gemm;                   /* V_GEMM: index in the shapes of gemm_shapes() */
  char name[160];
  CUfunction fn;
  int regs;                   /* registers per thread, from the driver once loaded (0: unknown) */
} Var;

enum { CK_LOOP, CK_ROW, CK_SCALAR, CK_GEMM };

typedef struct CK {
  const Kernel *kn;
  int kind;
  char base[96];              /* C name of the kernel; variants append _loop, _warp, ... */
  Field *f; int nf;
  bool err;                   /* may detect a run-time error (checked loads, integer division) */
  int outer[2 * DYN_MAX_RANK]; int nouter;    /* the rows of the row variants */
  bool virt;                  /* a one-stage reduction seen as rows of its output */
  bool vec4;                  /* has the loop4 variant */
  int vslots[16]; int nvslots;                /* slots it reads with 16-byte loads */
  int ncoop;                  /* reductions computed by all threads of a row together */
  const KExpr *coop;          /* the first of them */
  int r_contig, o_contig;     /* loads contiguous along the reduction, along the output */
  /* contractions */
  const KExpr *red;           /* the sum; the rest of the stage is the epilogue */
  int ga, gb, gc, bax, max, nax, kax;         /* slots A, B, C; axes (bax -1: no batch) */
  int apos[3], bpos[3];       /* positions in A of batch, m, k; in B of batch, k, n (-1: none) */
  bool a_kc, b_kc;            /* A (B) keeps k contiguous in memory */
  DynElem et;                 /* the contraction's elements: f32, f64, f16 or bf16 */
  CudaMath math;              /* what the contraction's tiles compute in (f64, f16, bf16: exact) */
  Var v[12]; int nv;
} CK;

/* Does contraction ck run on the tensor cores: f32 in tf32 or bf16, or f16 and bf16 operands
 * as stored (exact products, f32 sums: CK.math stays exact)? */
static inline bool cuana_tc(const CK *ck) { return ck->math != CUDA_EXACT || elem_is_half(ck->et); }

struct CudaProgram {
  const Program *p;
  HwModel hw;
  CudaMath math;              /* asked for; each contraction's CK.math is what it gets */
  CK *k; int nk;
  char **sname;               /* per slot: its C name */
  char **aname;               /* per axis: its C name */
  bool *buf;                  /* per slot: lives in device memory */
  bool *inl;                  /* per slot: a per-row array recomputed where it is read */
  const Stage **def;          /* per slot: the stage that defines it */
  Arena *ar;                  /* names and the strings of rendering */
  Buf src;
  char *ptx;
  CudaBackend *be;            /* set by cuda_compile */
  double compile_ms;
};

/* Fills cp->k: the kernels of cp->p with their arguments, variants and C names. */
void cuana_analyse(CudaProgram *cp);
/* The reductions every thread of a row evaluates with the same value, so that the row's
 * threads can share the work: not inside a branch of where(...), not inside another
 * reduction.  In evaluation order; *n counts them all, out keeps the first max. */
void cuana_find_coop(const KExpr *e, const KExpr **out, int *n, int max);
/* A load the loop4 variant reads four at a time (innermost axis `inner`). */
bool cuana_vec_load(const CudaProgram *cp, const KExpr *e, int inner);

/* ---- cuda_render.c: the CUDA C of a Program ------------------------------------------------ */

/* The axes as text "b, n" (their names in the source), appended to o. */
void curender_axes_list(const CudaProgram *cp, const int *ax, int n, Buf *o);

/* ---- cuda_plan.c: the model, choosing a variant and a launch per kernel and shape ---------- */

/* What one kernel runs for one shape. */
typedef struct Launch {
  bool skip;                 /* nothing to compute */
  int var;                   /* index in CK.v */
  unsigned grid[3], block[3];
  int var2;                  /* a second kernel (the split-K sum), -1: none */
  unsigned grid2[3], block2[3];
  int splits;
  bool avec, bvec;
  size_t ws;                 /* workspace bytes */
  CudaGemmPlan gp;
  char why[256];
} Launch;

/* The launch of kernel ck for the shape bound in ext, shape and strides; force names a
 * variant to take where it has one (tests), force_splits a split of K (0: the model's). */
void cuplan_kernel(const CudaProgram *cp, const CK *ck, const int64_t *ext, const int64_t *shape, const int64_t *strides,
                   const char *force, int force_splits, Launch *L);

/* ---- cuda_run.c: the device -------------------------------------------------------------- */

typedef struct DevBlock { CUdeviceptr p; size_t bytes; } DevBlock;
typedef struct Module { uint64_t hash; char *src; CUmodule mod; char *ptx; } Module;

struct CudaBackend {
  HwModel hw;
  CUdevice dev;
  CUcontext ctx;
  char desc[256];
  VEC(DevBlock) pool;         /* freed device buffers kept for reuse */
  size_t pooled;
  VEC(Module) mods;           /* compiled modules, by source text */
  CUevent ev0, ev1;
  double last_ms;
  char force[32];
  int force_splits;
};

#endif
