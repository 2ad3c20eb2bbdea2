/* cuda.c -- the GPU back end: fused kernels rendered as CUDA C, compiled by NVRTC to PTX,
 * loaded and launched through the CUDA driver API.  Render, compile, load and launch are
 * separate steps: rendering and compiling to PTX need no GPU (only NVRTC), so they are tested
 * everywhere; both libraries are opened with dlopen through the one table in cuda.def.
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
 *     or integer contraction, stay exact.
 * The model ("the model" below) picks a variant per kernel and shape at run time, from the
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
 * no wgmma on sm_90) and stage f32, so bf16 moves as many shared-memory bytes as tf32; rows
 * of a row-wise kernel are not split across blocks, so a few very long rows use few SMs;
 * transposes are not staged through shared memory; inputs must be contiguous.  Test hooks: $DYN_NVRTC and $DYN_CUDA_DRIVER name the libraries
 * to open (tests/cuda/fakecuda.cc runs the generated code on the CPU through them).
 */
#include "config.h"
#include "dyn.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the libraries: stand-in types, the table from cuda.def, dlopen ---------------------- */

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

typedef struct Entry { const char *sym; size_t off; } Entry;

static const Entry DRV_ENTRIES[] = {
#define DRV(ret, name, sym, args) {sym, offsetof(Drv, name)},
#define RTC(ret, name, sym, args)
#include "cuda.def"
#undef DRV
#undef RTC
};

static const Entry RTC_ENTRIES[] = {
#define DRV(ret, name, sym, args)
#define RTC(ret, name, sym, args) {sym, offsetof(Rtc, name)},
#include "cuda.def"
#undef DRV
#undef RTC
};

/* A library opened once per process: its handle and its table never change afterwards. */
typedef struct Lib {
  pthread_once_t once;
  bool ok;
  void *handle;
  char path[512];
  char why[1024];
} Lib;

static Lib drv_lib = {PTHREAD_ONCE_INIT, false, NULL, "", ""};
static Lib rtc_lib = {PTHREAD_ONCE_INIT, false, NULL, "", ""};
static Drv D;
static Rtc R;

/* dlsym every row of a table; a versioned name falls back to the plain one and back. */
static bool bind_table(void *h, const Entry *e, size_t n, void *table, const char *lib, char *why, size_t wl) {
  for (size_t i = 0; i < n; i++) {
    void *f = dlsym(h, e[i].sym);
    if (!f) {
      char alt[96];
      const char *v2 = strstr(e[i].sym, "_v2");
      if (v2) snprintf(alt, sizeof alt, "%.*s", (int)(v2 - e[i].sym), e[i].sym);
      else snprintf(alt, sizeof alt, "%s_v2", e[i].sym);
      f = dlsym(h, alt);
    }
    if (!f) {
      snprintf(why, wl, "%s lacks %s (too old?)", lib, e[i].sym);
      return false;
    }
    memcpy((char *)table + e[i].off, &f, sizeof f);
  }
  return true;
}

static void load_driver(void) {
  const char *env = getenv("DYN_CUDA_DRIVER");
  const char *name = env && *env ? env : "libcuda.so.1";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (env && *env) {
      /* dlerror() starts with the path already: say it once */
      const char *msg = dlerror();
      size_t n = strlen(env);
      if (msg && !strncmp(msg, env, n) && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
      snprintf(drv_lib.why, sizeof drv_lib.why, "no NVIDIA driver (DYN_CUDA_DRIVER=%s: %s)", env, msg ? msg : "cannot be opened");
    } else snprintf(drv_lib.why, sizeof drv_lib.why, "no NVIDIA driver (libcuda.so.1 not found)");
    return;
  }
  if (!bind_table(h, DRV_ENTRIES, sizeof DRV_ENTRIES / sizeof *DRV_ENTRIES, &D, name, drv_lib.why, sizeof drv_lib.why)) {
    dlclose(h);
    return;
  }
  drv_lib.handle = h;
  snprintf(drv_lib.path, sizeof drv_lib.path, "%s", name);
  drv_lib.ok = true;
}

static void *try_open(const char *path, char *tried, size_t tl) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h && tried && strlen(tried) + strlen(path) + 3 < tl) {
    if (*tried) strcat(tried, ", ");
    strcat(tried, path);
  }
  return h;
}

/* NVRTC: $DYN_NVRTC, the loader's search path, then the toolkit's lib64 under $CUDA_HOME,
 * $CUDA_PATH or the default install prefix /usr/local/cuda. */
static void load_nvrtc(void) {
  static const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"};
  char tried[400] = "";
  void *h = NULL;
  char used[512] = "";
  const char *env = getenv("DYN_NVRTC");
  if (env && *env) {
    h = try_open(env, tried, sizeof tried);
    if (h) snprintf(used, sizeof used, "%s", env);
  }
  for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++) {
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) snprintf(used, sizeof used, "%s", names[i]);
  }
  const char *roots[3] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (int r = 0; !h && r < 3; r++) {
    if (!roots[r] || !*roots[r]) continue;
    for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++) {
      char path[512];
      snprintf(path, sizeof path, "%s/lib64/%s", roots[r], names[i]);
      h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) snprintf(used, sizeof used, "%s", path);
    }
  }
  if (!h) {
    snprintf(rtc_lib.why, sizeof rtc_lib.why,
             "NVRTC not found (tried %s%slibnvrtc.so, .so.13, .so.12 on the library path and in lib64 of "
             "$CUDA_HOME, $CUDA_PATH, /usr/local/cuda; set DYN_NVRTC to its path)", tried, *tried ? ", " : "");
    return;
  }
  if (!bind_table(h, RTC_ENTRIES, sizeof RTC_ENTRIES / sizeof *RTC_ENTRIES, &R, used, rtc_lib.why, sizeof rtc_lib.why)) {
    dlclose(h);
    return;
  }
  rtc_lib.handle = h;
  snprintf(rtc_lib.path, sizeof rtc_lib.path, "%s", used);
  rtc_lib.ok = true;
}

static bool have_driver(char *why, size_t wl) {
  pthread_once(&drv_lib.once, load_driver);
  if (!drv_lib.ok && why) snprintf(why, wl, "%s", drv_lib.why);
  return drv_lib.ok;
}

static bool have_nvrtc(char *why, size_t wl) {
  pthread_once(&rtc_lib.once, load_nvrtc);
  if (!rtc_lib.ok && why) snprintf(why, wl, "%s", rtc_lib.why);
  return rtc_lib.ok;
}

bool cuda_nvrtc_available(char *why, size_t whylen) { return have_nvrtc(why, whylen); }

static const char *cu_err(CUresult r) {
  const char *s = NULL;
  if (drv_lib.ok && D.cuGetErrorString(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}

/* ---- the analysis: what each kernel of a Program becomes ---------------------------------- */

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
static const GemmShape GEMM_SHAPES[] = {
  {128, 128, 16, 8, 8, 0, 0}, {128, 64, 16, 8, 8, 0, 0}, {64, 128, 16, 8, 8, 0, 0}, {64, 64, 16, 8, 8, 0, 0},
  {32, 32, 32, 4, 4, 0, 0},
};
/* f64: an accumulator takes two registers, so register tiles of 4 x 4 (the 8 x 8 ones of f32
 * would spill); the same tile code, its quads read as two 16-byte halves. */
static const GemmShape F64_SHAPES[] = {
  {64, 64, 16, 4, 4, 0, 0}, {64, 32, 16, 4, 4, 0, 0}, {32, 32, 16, 4, 4, 0, 0},
};
/* The tensor-core tiles: warp tiles of 64 x 32 (32 x 64) or smaller, so that a warp reads as
 * few shared-memory bytes per mma as its registers allow; k-steps of 16 where 32 would pass
 * the 48 KB of static shared memory (two buffers of f32, rows padded). */
static const GemmShape MMA_SHAPES[] = {
  {128, 128, 16, 8, 8, 2, 4}, {128, 64, 16, 8, 8, 2, 2}, {64, 128, 16, 4, 16, 2, 2}, {64, 64, 32, 4, 8, 2, 2},
  {32, 32, 32, 2, 4, 2, 2},
};
#define NGEMM ((int)(sizeof GEMM_SHAPES / sizeof *GEMM_SHAPES))
#define NMMA ((int)(sizeof MMA_SHAPES / sizeof *MMA_SHAPES))
#define NF64 ((int)(sizeof F64_SHAPES / sizeof *F64_SHAPES))
#define NSHAPES_MAX 5
_Static_assert(NGEMM <= NSHAPES_MAX && NMMA <= NSHAPES_MAX && NF64 <= NSHAPES_MAX, "NSHAPES_MAX bounds every table");

/* The tiles of a contraction of elements et (f32 or f64) computing in m. */
static const GemmShape *gemm_shapes(CudaMath m, DynElem et, int *n) {
  *n = et == DYN_F64 ? NF64 : m == CUDA_EXACT ? NGEMM : NMMA;
  return et == DYN_F64 ? F64_SHAPES : m == CUDA_EXACT ? GEMM_SHAPES : MMA_SHAPES;
}

static int gemm_threads(const GemmShape *g) { return g->wm ? g->wm * g->wn * 32 : (g->bm / g->tm) * (g->bn / g->tn); }

const char *cuda_math_name(CudaMath m) { return m == CUDA_TF32 ? "tf32" : m == CUDA_BF16 ? "bf16" : "exact"; }

/* mma.sync on tf32 and bf16 operands arrived with compute capability 8.0 (Ampere). */
CudaMath cuda_math_on(const HwModel *hw, CudaMath m) { return hw->cc_major >= 8 ? m : CUDA_EXACT; }

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
  DynElem et;                 /* the contraction's elements: f32 or f64 */
  CudaMath math;              /* what the contraction's tiles compute in (f64: exact) */
  Var v[12]; int nv;
} CK;

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

static bool uses_axis(const KExpr *e, int ax) {
  if (e->kind == KX_AXIS && e->axis == ax) return true;
  for (int i = 0; i < e->n; i++)
    if (uses_axis(e->a[i], ax)) return true;
  return false;
}

static int count_reduce(const KExpr *e) {
  int n = e->kind == KX_REDUCE;
  for (int i = 0; i < e->n; i++) n += count_reduce(e->a[i]);
  return n;
}

static const KExpr *first_reduce(const KExpr *e) {
  if (e->kind == KX_REDUCE) return e;
  for (int i = 0; i < e->n; i++) {
    const KExpr *r = first_reduce(e->a[i]);
    if (r) return r;
  }
  return NULL;
}

/* The reductions every thread of a row evaluates with the same value, so that the row's
 * threads can share the work: not inside a branch of where(...), not inside another
 * reduction.  In evaluation order. */
static void find_coop(const KExpr *e, const KExpr **out, int *n, int max) {
  if (e->kind == KX_REDUCE) {
    if (*n < max) out[*n] = e;
    (*n)++;
    return;
  }
  if (e->kind == KX_SELECT) {
    find_coop(e->a[0], out, n, max);
    return;
  }
  for (int i = 0; i < e->n; i++) find_coop(e->a[i], out, n, max);
}

static bool needs_err(const CudaProgram *cp, const KExpr *e) {
  if (e->kind == KX_LOAD && e->checked) return true;
  if (e->kind == KX_LOAD && cp->inl[e->slot] && needs_err(cp, cp->def[e->slot]->expr)) return true;
  if (e->kind == KX_BIN && (e->op == OP_DIV || e->op == OP_MOD) && elem_is_int(e->ty)) return true;
  for (int i = 0; i < e->n; i++)
    if (needs_err(cp, e->a[i])) return true;
  return false;
}

/* A C identifier from a name: letters and digits kept, runs of anything else one '_', and an
 * 'x' before a name that would start with a digit (an implicit index "_0" is "x0"). */
static void sanitize(const char *in, char *out, size_t n) {
  size_t j = 0;
  const char *first = in;
  while (*first && !((*first >= 'A' && *first <= 'Z') || (*first >= 'a' && *first <= 'z') || (*first >= '0' && *first <= '9')))
    first++;
  if (!((*first >= 'A' && *first <= 'Z') || (*first >= 'a' && *first <= 'z')) && j + 1 < n) out[j++] = 'x';
  for (const char *c = in; *c && j + 1 < n; c++) {
    bool ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9');
    if (ok) out[j++] = *c;
    else if (j && out[j - 1] != '_') out[j++] = '_';
  }
  while (j > 1 && out[j - 1] == '_') j--;   /* names ending in '_' belong to the renderer */
  out[j] = 0;
}

/* Words a user's name must not become in the generated code: C++ keywords, the parameter,
 * the types and functions of the prelude.  The renderer's own locals end in '_'. */
static bool reserved(const char *s) {
  static const char *words[] = {
    "a", "i64", "u64", "bool", "char", "int", "float", "double", "long", "short", "unsigned", "signed",
    "void", "const", "static", "struct", "union", "enum", "if", "else", "for", "while", "do", "return",
    "break", "continue", "switch", "case", "default", "goto", "sizeof", "typedef", "auto", "register",
    "volatile", "extern", "inline", "template", "typename", "class", "new", "delete", "this", "true",
    "false", "operator", "namespace", "using", "public", "private", "protected", "virtual", "friend",
    "try", "catch", "throw", "explicit", "mutable", "export", "asm", "constexpr", "decltype", "nullptr",
    "noexcept", "static_assert", "alignas", "alignof", "thread_local", "and", "or", "not", "xor", "bitand",
    "bitor", "compl", "and_eq", "or_eq", "xor_eq", "not_eq", "wchar_t", "char16_t", "char32_t",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "min", "max", "abs", "exp", "log", "sqrt",
    "sin", "cos", "tanh", "erf", "floor", "ceil", "pow", "fabs", "rint", "isnan", "isinf", "float4",
    "int4", "make_float4", "make_int4", "printf", "assert", NULL};
  for (int i = 0; words[i]; i++)
    if (!strcmp(s, words[i])) return true;
  return !strncmp(s, "dyn_", 4) || !strncmp(s, "Dyn", 3) || !strncmp(s, "DYN_", 4) || !strncmp(s, "__", 2) ||
         !strncmp(s, "cuda", 4);
}

static char *name_dup(Arena *ar, const char *base, char **taken, int ntaken) {
  char buf[96];
  sanitize(base, buf, sizeof buf);
  if (!*buf) snprintf(buf, sizeof buf, "x");
  if (reserved(buf)) strncat(buf, "_v", sizeof buf - strlen(buf) - 1);
  char cand[112];
  snprintf(cand, sizeof cand, "%s", buf);
  for (int k = 2;; k++) {
    bool clash = false;
    for (int i = 0; i < ntaken && !clash; i++) clash = taken[i] && !strcmp(taken[i], cand);
    if (!clash) break;
    snprintf(cand, sizeof cand, "%s_%d", buf, k);
  }
  return arena_strndup(ar, cand, strlen(cand));
}

/* Axis names: an axis keeps its source name unless a reduction inside its scope binds
 * another axis of the same name (then both would be one C variable). */
static void name_axes_in(CudaProgram *cp, const KExpr *e, int *bound, int nb, char **names) {
  if (e->kind == KX_REDUCE) {
    int b2[64];
    int n2 = nb < 32 ? nb : 32;
    memcpy(b2, bound, sizeof(int) * (size_t)n2);
    for (int r = 0; r < e->nraxes && n2 < 64; r++) {
      int ax = e->raxes[r];
      for (int i = 0; i < n2; i++)
        if (!strcmp(names[b2[i]], names[ax])) {
          char t[128];
          snprintf(t, sizeof t, "%s_%d", names[ax], ax);
          names[ax] = arena_strndup(cp->ar, t, strlen(t));
        }
      b2[n2++] = ax;
    }
    name_axes_in(cp, e->a[0], b2, n2, names);
    return;
  }
  for (int i = 0; i < e->n; i++) name_axes_in(cp, e->a[i], bound, nb, names);
}

static int pos_in(const KExpr *ld, int axis) {
  int at = -1;
  for (int i = 0; i < ld->n; i++)
    if (ld->a[i]->kind == KX_AXIS && ld->a[i]->axis == axis) {
      if (at >= 0) return -2;            /* the same axis twice (a diagonal) */
      at = i;
    }
  return at;
}

static bool plain_load(const CudaProgram *cp, const KExpr *ld, DynElem et) {
  if (ld->kind != KX_LOAD || ld->checked || !cp->buf[ld->slot] || cp->p->slots[ld->slot].type.elem != et) return false;
  for (int i = 0; i < ld->n; i++)
    if (ld->a[i]->kind != KX_AXIS) return false;
  return true;
}

/* The structural test of cpu.c's match_gemm, widened to an epilogue: the stage is
 * C[b?, m, n] = f(sum[k] A[..] * B[..], ...) with exactly one reduction, A holding m and k
 * (and perhaps the batch), B holding k and n (and perhaps the batch), each a plain layout,
 * all of f32 or all of f64. */
static bool match_contraction(CudaProgram *cp, CK *ck) {
  const Kernel *kn = ck->kn;
  if (kn->nstages != 1 || kn->nouter) return false;
  const Stage *st = &kn->stages[0];
  if (st->naxes < 2 || st->naxes > 3 || count_reduce(st->expr) != 1) return false;
  const KExpr *R = first_reduce(st->expr);
  DynElem et = R->ty;
  if (R->red != RED_SUM || R->nraxes != 1 || (et != DYN_F32 && et != DYN_F64)) return false;
  const KExpr *body = R->a[0];
  if (body->kind != KX_BIN || body->op != OP_MUL || body->ty != et) return false;
  const KExpr *A = body->a[0], *B = body->a[1];
  if (!plain_load(cp, A, et) || !plain_load(cp, B, et)) return false;
  int k = R->raxes[0], batch = st->naxes == 3 ? st->axes[0] : -1;
  int m = st->axes[st->naxes - 2], n = st->axes[st->naxes - 1];
  if (pos_in(A, k) < 0 || pos_in(B, k) < 0) return false;
  if (!(pos_in(A, m) >= 0 && pos_in(A, n) == -1 && pos_in(B, n) >= 0 && pos_in(B, m) == -1)) {
    const KExpr *t = A;
    A = B;
    B = t;
    if (!(pos_in(A, m) >= 0 && pos_in(A, n) == -1 && pos_in(B, n) >= 0 && pos_in(B, m) == -1)) return false;
  }
  int pa = batch >= 0 ? pos_in(A, batch) : -1, pb = batch >= 0 ? pos_in(B, batch) : -1;
  if (pa == -2 || pb == -2) return false;
  if (A->n != 2 + (pa >= 0) || B->n != 2 + (pb >= 0)) return false;
  ck->red = R;
  ck->et = et;
  ck->ga = A->slot;
  ck->gb = B->slot;
  ck->gc = st->out;
  ck->bax = batch;
  ck->max = m;
  ck->nax = n;
  ck->kax = k;
  ck->apos[0] = pa;
  ck->apos[1] = pos_in(A, m);
  ck->apos[2] = pos_in(A, k);
  ck->bpos[0] = pb;
  ck->bpos[1] = pos_in(B, k);
  ck->bpos[2] = pos_in(B, n);
  ck->a_kc = ck->apos[2] == A->n - 1;
  ck->b_kc = ck->bpos[1] == B->n - 1;
  return true;
}

/* A load the loop4 variant reads four at a time: its last subscript is the innermost axis
 * itself, no other subscript moves with it, and its elements are 4 bytes. */
static bool vec_load(const CudaProgram *cp, const KExpr *e, int inner) {
  if (e->kind != KX_LOAD || e->checked || !cp->buf[e->slot] || cp->inl[e->slot] || e->n < 1) return false;
  DynElem t = cp->p->slots[e->slot].type.elem;
  if (t != DYN_F32 && t != DYN_I32) return false;
  const KExpr *last = e->a[e->n - 1];
  if (last->kind != KX_AXIS || last->axis != inner) return false;
  for (int i = 0; i < e->n - 1; i++)
    if (uses_axis(e->a[i], inner)) return false;
  return true;
}

/* Every load in a position evaluated for each element (not in a reduction or a branch). */
static void find_vec(const CudaProgram *cp, const KExpr *e, int inner, CK *ck) {
  if (vec_load(cp, e, inner)) {
    bool seen = false;
    for (int i = 0; i < ck->nvslots; i++) seen = seen || ck->vslots[i] == e->slot;
    if (!seen && ck->nvslots < 16) ck->vslots[ck->nvslots++] = e->slot;
    return;
  }
  if (e->kind == KX_REDUCE) return;
  int n = e->kind == KX_SELECT ? 1 : e->n;
  for (int i = 0; i < n; i++) find_vec(cp, e->a[i], inner, ck);
}

static int count_contig(const KExpr *e, int ax) {
  int n = e->kind == KX_LOAD && e->n && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == ax;
  for (int i = 0; i < e->n; i++) n += count_contig(e->a[i], ax);
  return n;
}

/* What a kernel's code touches: slots read and written, checked slots, extents, sizes. */
typedef struct Uses {
  bool *rd, *wr, *chk, *ext;
  const Poly *sizes[64]; int nsizes;
} Uses;

static void uses_of(const CudaProgram *cp, const KExpr *e, Uses *u) {
  switch (e->kind) {
  case KX_LOAD:
    if (cp->inl[e->slot]) uses_of(cp, cp->def[e->slot]->expr, u);
    else if (cp->buf[e->slot]) {
      u->rd[e->slot] = true;
      if (e->checked) u->chk[e->slot] = true;
    }
    break;
  case KX_SIZE: {
    bool seen = false;
    for (int i = 0; i < u->nsizes; i++) seen = seen || u->sizes[i] == e->size;
    if (!seen && u->nsizes < 64) u->sizes[u->nsizes++] = e->size;
    break;
  }
  case KX_REDUCE:
    for (int i = 0; i < e->nraxes; i++) u->ext[e->raxes[i]] = true;
    break;
  default:
    break;
  }
  for (int i = 0; i < e->n; i++) uses_of(cp, e->a[i], u);
}

static void add_field(CK *ck, int kind, int slot, int dim, int axis, const Poly *size, const char *name) {
  ck->f = xrealloc(ck->f, sizeof(Field) * (size_t)(ck->nf + 1));
  Field *f = &ck->f[ck->nf++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->slot = slot;
  f->dim = dim;
  f->axis = axis;
  f->size = size;
  /* field names only need to differ from each other */
  char cand[100];
  snprintf(cand, sizeof cand, "%.80s", name);
  for (int k = 2;; k++) {
    bool clash = false;
    for (int i = 0; i < ck->nf - 1 && !clash; i++) clash = !strcmp(ck->f[i].name, cand);
    if (!clash) break;
    snprintf(cand, sizeof cand, "%.80s_%d", name, k);
  }
  snprintf(f->name, sizeof f->name, "%s", cand);
}

static void build_fields(CudaProgram *cp, CK *ck) {
  const Program *p = cp->p;
  const Kernel *kn = ck->kn;
  Uses u = {0};
  u.rd = xcalloc((size_t)p->nslots + 1, 1);
  u.wr = xcalloc((size_t)p->nslots + 1, 1);
  u.chk = xcalloc((size_t)p->nslots + 1, 1);
  u.ext = xcalloc((size_t)p->naxes + 1, 1);
  for (int o = 0; o < kn->nouter; o++) u.ext[kn->outer[o]] = true;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    if (cp->inl[st->out]) continue;
    if (cp->buf[st->out]) u.wr[st->out] = true;
    for (int a = 0; a < st->naxes; a++) u.ext[st->axes[a]] = true;
    uses_of(cp, st->expr, &u);
  }
  for (int i = 0; i < p->nslots; i++)
    if (u.rd[i] || u.wr[i]) add_field(ck, F_PTR, i, 0, 0, NULL, cp->sname[i]);
  for (int i = 0; i < p->nslots; i++)
    if (u.rd[i] || u.wr[i])
      for (int d = 0; d + 1 < p->slots[i].type.rank; d++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s_s%d", cp->sname[i], d);
        add_field(ck, F_STRIDE, i, d, 0, NULL, nm);
      }
  for (int i = 0; i < p->nslots; i++)
    if (u.chk[i])
      for (int d = 0; d < p->slots[i].type.rank; d++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s_d%d", cp->sname[i], d);
        add_field(ck, F_DIM, i, d, 0, NULL, nm);
      }
  for (int a = 0; a < p->naxes; a++)
    if (u.ext[a]) {
      /* axes of one extent share its field */
      bool dup = false;
      for (int i = 0; i < ck->nf && !dup; i++) dup = ck->f[i].kind == F_EXT && ck->f[i].size == p->axes[a].extent;
      if (dup) continue;
      char nm[96];
      snprintf(nm, sizeof nm, "ext_%s", cp->aname[a]);
      add_field(ck, F_EXT, 0, 0, a, p->axes[a].extent, nm);
    }
  for (int i = 0; i < u.nsizes; i++) {
    Buf t = {0};
    poly_str(u.sizes[i], &t);
    char nm[96] = "sz_";
    sanitize(t.s, nm + 3, sizeof nm - 3);
    buf_free(&t);
    add_field(ck, F_SIZE, 0, 0, 0, u.sizes[i], nm);
  }
  ck->err = false;
  for (int s = 0; s < kn->nstages; s++)
    if (!cp->inl[kn->stages[s].out]) ck->err = ck->err || needs_err(cp, kn->stages[s].expr);
  if (ck->err) add_field(ck, F_ERR, 0, 0, 0, NULL, "err");
  if (ck->kind == CK_GEMM || (ck->kind == CK_SCALAR && ck->ncoop == 1)) add_field(ck, F_WS, 0, 0, 0, NULL, "ws");
  if (ck->kind == CK_GEMM) {
    add_field(ck, F_SPLITS, 0, 0, 0, NULL, "splits");
    add_field(ck, F_AVEC, 0, 0, 0, NULL, "a_vec");
    add_field(ck, F_BVEC, 0, 0, 0, NULL, "b_vec");
  }
  free(u.rd);
  free(u.wr);
  free(u.chk);
  free(u.ext);
}

static void add_var(CK *ck, int kind, int lanes, int rows, int threads, int gemm) {
  Var *v = &ck->v[ck->nv++];
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->lanes = lanes;
  v->rows = rows;
  v->threads = threads;
  v->gemm = gemm;
  static const char *suffix[] = {"loop", "loop4", "warp", "block256", "block1024", "grid", "gemm", "splitk"};
  int ns;
  const GemmShape *gs = gemm_shapes(ck->math, ck->et, &ns);
  if (kind == V_GEMM)
    snprintf(v->name, sizeof v->name, "%s_%s%dx%d", ck->base, ck->math == CUDA_EXACT ? "gemm" : ck->math == CUDA_TF32 ? "tf32_" : "bf16_",
             gs[gemm].bm, gs[gemm].bn);
  else
    snprintf(v->name, sizeof v->name, "%s_%s", ck->base, suffix[kind]);
}

/* Names, storage, and the kind, variants and arguments of every kernel. */
static void analyse(CudaProgram *cp) {
  const Program *p = cp->p;
  int ns = p->nslots;
  cp->sname = arena_alloc(cp->ar, sizeof(char *) * (size_t)(ns + 1));
  cp->aname = arena_alloc(cp->ar, sizeof(char *) * (size_t)(p->naxes + 1));
  cp->buf = arena_alloc(cp->ar, (size_t)ns + 1);
  cp->inl = arena_alloc(cp->ar, (size_t)ns + 1);
  cp->def = arena_alloc(cp->ar, sizeof(Stage *) * (size_t)(ns + 1));
  for (int i = 0; i < ns; i++) cp->sname[i] = name_dup(cp->ar, p->slots[i].name, cp->sname, i);
  for (int a = 0; a < p->naxes; a++) cp->aname[a] = name_dup(cp->ar, p->axes[a].name, NULL, 0);
  for (int k = 0; k < p->nkernels; k++)
    for (int s = 0; s < p->kernels[k].nstages; s++) cp->def[p->kernels[k].stages[s].out] = &p->kernels[k].stages[s];
  /* per-row arrays: recomputed where read when they hold no reduction and no load of them is
   * checked; per-row scalars: registers; everything else: device memory */
  bool *checked = xcalloc((size_t)ns + 1, 1);
  for (int k = 0; k < p->nkernels; k++)
    for (int s = 0; s < p->kernels[k].nstages; s++) {
      const KExpr *stack[1024];
      int sp = 0;
      stack[sp++] = p->kernels[k].stages[s].expr;
      while (sp) {
        const KExpr *e = stack[--sp];
        if (e->kind == KX_LOAD && e->checked) checked[e->slot] = true;
        for (int i = 0; i < e->n && sp < 1024; i++) stack[sp++] = e->a[i];
      }
    }
  for (int i = 0; i < ns; i++) {
    const Slot *sl = &p->slots[i];
    if (sl->kind == SLOT_INLINED || sl->kind == SLOT_SIZE) continue;
    if (sl->kind == SLOT_LOCAL && cp->def[i]) {
      if (sl->nlocal == 0) continue;                        /* a register */
      if (!count_reduce(cp->def[i]->expr) && !checked[i]) {
        cp->inl[i] = true;
        continue;
      }
    }
    cp->buf[i] = true;
  }
  free(checked);
  cp->nk = p->nkernels;
  cp->k = xcalloc((size_t)cp->nk + 1, sizeof(CK));
  char **bases = xcalloc((size_t)cp->nk + 1, sizeof(char *));
  for (int k = 0; k < cp->nk; k++) {
    CK *ck = &cp->k[k];
    const Kernel *kn = &p->kernels[k];
    ck->kn = kn;
    bases[k] = name_dup(cp->ar, kn->name, bases, k);
    snprintf(ck->base, sizeof ck->base, "%s", bases[k]);
    /* axis names that a nested reduction would shadow */
    for (int s = 0; s < kn->nstages; s++) {
      int bound[64], nb = 0;
      for (int o = 0; o < kn->nouter && nb < 32; o++) bound[nb++] = kn->outer[o];
      for (int a = 0; a < kn->stages[s].naxes && nb < 32; a++) bound[nb++] = kn->stages[s].axes[a];
      name_axes_in(cp, kn->stages[s].expr, bound, nb, cp->aname);
    }
    const Stage *st0 = &kn->stages[0];
    if (kn->nouter) {
      ck->kind = CK_ROW;
      memcpy(ck->outer, kn->outer, sizeof(int) * (size_t)kn->nouter);
      ck->nouter = kn->nouter;
    } else if (match_contraction(cp, ck)) {
      ck->kind = CK_GEMM;
    } else if (st0->naxes == 0) {
      ck->kind = CK_SCALAR;
      const KExpr *co[8];
      find_coop(st0->expr, co, &ck->ncoop, 8);
      ck->coop = ck->ncoop ? co[0] : NULL;
    } else {
      ck->kind = CK_LOOP;
      const KExpr *co[8];
      find_coop(st0->expr, co, &ck->ncoop, 8);
      ck->coop = ck->ncoop ? co[0] : NULL;
      if (ck->ncoop) {
        ck->virt = true;
        memcpy(ck->outer, st0->axes, sizeof(int) * (size_t)st0->naxes);
        ck->nouter = st0->naxes;
        int rin = ck->coop->raxes[ck->coop->nraxes - 1], oin = st0->axes[st0->naxes - 1];
        ck->r_contig = count_contig(ck->coop->a[0], rin);
        ck->o_contig = count_contig(ck->coop->a[0], oin);
      }
      DynElem oe = p->slots[st0->out].type.elem;
      ck->vec4 = cp->buf[st0->out] && (oe == DYN_F32 || oe == DYN_I32) && !count_reduce(st0->expr);
      if (ck->vec4) find_vec(cp, st0->expr, st0->axes[st0->naxes - 1], ck);
    }
    switch (ck->kind) {
    case CK_LOOP:
      add_var(ck, V_LOOP, 0, 0, 256, 0);
      if (ck->vec4) add_var(ck, V_LOOP4, 0, 0, 256, 0);
      if (ck->virt) add_var(ck, V_WARP, 32, 8, 256, 0);
      break;
    case CK_ROW:
      add_var(ck, V_WARP, 32, 8, 256, 0);
      add_var(ck, V_BLOCK256, 256, 1, 256, 0);
      add_var(ck, V_BLOCK1024, 1024, 1, 1024, 0);
      break;
    case CK_SCALAR:
      add_var(ck, V_BLOCK1024, 1024, 1, 1024, 0);
      if (ck->ncoop == 1) add_var(ck, V_GRID, 256, 1, 256, 0);
      break;
    case CK_GEMM: {
      ck->math = ck->et == DYN_F32 ? cuda_math_on(&cp->hw, cp->math) : CUDA_EXACT;
      int ns;
      const GemmShape *gs = gemm_shapes(ck->math, ck->et, &ns);
      for (int g = 0; g < ns; g++) add_var(ck, V_GEMM, 0, 0, gemm_threads(&gs[g]), g);
      add_var(ck, V_SPLITK, 0, 0, 256, 0);
      break;
    }
    }
    build_fields(cp, ck);
  }
  free(bases);
}

/* ---- the prelude: the CUDA C every module starts with (helpers, reductions, the tiles of
 * the contractions); see the comments inside it ---- */
static const char PRELUDE[] =
  "/* ---- prelude: the types and helpers every kernel of this module shares ---- */\n"
  "typedef long long i64;\n"
  "typedef unsigned long long u64;\n"
  "#define DYN_INF_F __int_as_float(0x7f800000)\n"
  "#define DYN_NAN_F __int_as_float(0x7fffffff)\n"
  "#define DYN_INF_D __longlong_as_double(0x7ff0000000000000LL)\n"
  "#define DYN_NAN_D __longlong_as_double(0x7fffffffffffffffLL)\n"
  "#define DYN_I32_MIN (-2147483647 - 1)\n"
  "#define DYN_I32_MAX 2147483647\n"
  "#define DYN_I64_MIN (-9223372036854775807LL - 1)\n"
  "#define DYN_I64_MAX 9223372036854775807LL\n"
  "\n"
  "/* Integers wrap around (two's complement), as the reference evaluator defines them. */\n"
  "__device__ __forceinline__ int dyn_add(int x, int y) { return (int)((unsigned)x + (unsigned)y); }\n"
  "__device__ __forceinline__ i64 dyn_add(i64 x, i64 y) { return (i64)((u64)x + (u64)y); }\n"
  "__device__ __forceinline__ float dyn_add(float x, float y) { return x + y; }\n"
  "__device__ __forceinline__ double dyn_add(double x, double y) { return x + y; }\n"
  "__device__ __forceinline__ int dyn_sub(int x, int y) { return (int)((unsigned)x - (unsigned)y); }\n"
  "__device__ __forceinline__ i64 dyn_sub(i64 x, i64 y) { return (i64)((u64)x - (u64)y); }\n"
  "__device__ __forceinline__ int dyn_mul(int x, int y) { return (int)((unsigned)x * (unsigned)y); }\n"
  "__device__ __forceinline__ i64 dyn_mul(i64 x, i64 y) { return (i64)((u64)x * (u64)y); }\n"
  "__device__ __forceinline__ float dyn_mul(float x, float y) { return x * y; }\n"
  "__device__ __forceinline__ double dyn_mul(double x, double y) { return x * y; }\n"
  "__device__ __forceinline__ int dyn_neg(int x) { return (int)(0u - (unsigned)x); }\n"
  "__device__ __forceinline__ i64 dyn_neg(i64 x) { return (i64)(0ull - (u64)x); }\n"
  "__device__ __forceinline__ int dyn_abs(int x) { return x < 0 ? dyn_neg(x) : x; }\n"
  "__device__ __forceinline__ i64 dyn_abs(i64 x) { return x < 0 ? dyn_neg(x) : x; }\n"
  "\n"
  "/* q / d for q >= 0, d > 0: the index arithmetic of flattened loops, once per row.  32-bit\n"
  " * division when both fit; else long division (64 steps, no call to the 64-bit division\n"
  " * routine, whose saved registers ptxas would report as spills). */\n"
  "__device__ __forceinline__ i64 dyn_udiv(i64 q, i64 d) {\n"
  "  if ((((u64)q | (u64)d) >> 32) == 0) return (i64)((unsigned)q / (unsigned)d);\n"
  "  u64 n = (u64)q, r = 0, quo = 0;\n"
  "  for (int i = 63; i >= 0; i--) {\n"
  "    r = r << 1 | (n >> i & 1);\n"
  "    if (r >= (u64)d) {\n"
  "      r -= (u64)d;\n"
  "      quo |= 1ull << i;\n"
  "    }\n"
  "  }\n"
  "  return (i64)quo;\n"
  "}\n"
  "\n"
  "/* Floor division and modulo, like Python; a zero divisor sets the error flag. */\n"
  "template <typename T> __device__ __forceinline__ T dyn_div(T x, T y, int &bad) {\n"
  "  if (y == 0) { bad = 1; return 0; }\n"
  "  if (y == -1) return dyn_neg(x);\n"
  "  T q = x / y;\n"
  "  if (x % y != 0 && ((x < 0) != (y < 0))) q -= 1;\n"
  "  return q;\n"
  "}\n"
  "template <typename T> __device__ __forceinline__ T dyn_mod(T x, T y, int &bad) {\n"
  "  if (y == 0) { bad = 1; return 0; }\n"
  "  if (y == -1) return 0;\n"
  "  T m = x % y;\n"
  "  if (m != 0 && ((m < 0) != (y < 0))) m += y;\n"
  "  return m;\n"
  "}\n"
  "__device__ __forceinline__ float dyn_fmod(float x, float y) {\n"
  "  float m = fmodf(x, y);\n"
  "  return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;\n"
  "}\n"
  "__device__ __forceinline__ double dyn_fmod(double x, double y) {\n"
  "  double m = fmod(x, y);\n"
  "  return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;\n"
  "}\n"
  "/* Integer power by repeated multiplication, as the reference evaluator computes it. */\n"
  "template <typename T> __device__ T dyn_ipow(T x, T y) {\n"
  "  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y % 2) ? -1 : 1) : 0;\n"
  "  T r = 1;\n"
  "  for (T k = 0; k < y && k < 64; k++) r = dyn_mul(r, x);\n"
  "  return r;\n"
  "}\n"
  "\n"
  "/* max and min propagate NaN (fmaxf would drop it). */\n"
  "__device__ __forceinline__ float dyn_max(float x, float y) { return x != x || y != y ? DYN_NAN_F : x > y ? x : y; }\n"
  "__device__ __forceinline__ float dyn_min(float x, float y) { return x != x || y != y ? DYN_NAN_F : x < y ? x : y; }\n"
  "__device__ __forceinline__ double dyn_max(double x, double y) { return x != x || y != y ? DYN_NAN_D : x > y ? x : y; }\n"
  "__device__ __forceinline__ double dyn_min(double x, double y) { return x != x || y != y ? DYN_NAN_D : x < y ? x : y; }\n"
  "__device__ __forceinline__ int dyn_max(int x, int y) { return x > y ? x : y; }\n"
  "__device__ __forceinline__ int dyn_min(int x, int y) { return x < y ? x : y; }\n"
  "__device__ __forceinline__ i64 dyn_max(i64 x, i64 y) { return x > y ? x : y; }\n"
  "__device__ __forceinline__ i64 dyn_min(i64 x, i64 y) { return x < y ? x : y; }\n"
  "\n"
  "/* Float to integer: toward zero, saturating, NaN to 0 (cvt.rzi saturates). */\n"
  "__device__ __forceinline__ int dyn_f2i32(float x) { return x != x ? 0 : __float2int_rz(x); }\n"
  "__device__ __forceinline__ int dyn_f2i32(double x) { return x != x ? 0 : __double2int_rz(x); }\n"
  "__device__ __forceinline__ i64 dyn_f2i64(float x) { return x != x ? 0 : __float2ll_rz(x); }\n"
  "__device__ __forceinline__ i64 dyn_f2i64(double x) { return x != x ? 0 : __double2ll_rz(x); }\n"
  "\n"
  "/* Lane l of a 16-byte vector (l is a constant once the lane loop is unrolled). */\n"
  "__device__ __forceinline__ float dyn_lane(float4 v, int l) { return l == 0 ? v.x : l == 1 ? v.y : l == 2 ? v.z : v.w; }\n"
  "__device__ __forceinline__ int dyn_lane(int4 v, int l) { return l == 0 ? v.x : l == 1 ? v.y : l == 2 ? v.z : v.w; }\n"
  "\n"
  "/* The reductions' combining steps. */\n"
  "struct DynSum { template <typename T> __device__ static T op(T x, T y) { return dyn_add(x, y); } };\n"
  "struct DynProd { template <typename T> __device__ static T op(T x, T y) { return dyn_mul(x, y); } };\n"
  "struct DynMax { template <typename T> __device__ static T op(T x, T y) { return dyn_max(x, y); } };\n"
  "struct DynMin { template <typename T> __device__ static T op(T x, T y) { return dyn_min(x, y); } };\n"
  "\n"
  "/* Level warp, then block: combine one value per thread over the LANES threads of a row\n"
  " * (threadIdx.x; ROWS rows per block along threadIdx.y).  Butterfly shuffles inside each warp;\n"
  " * with more than one warp per row, one slot per warp in shared memory (buf: ROWS x LANES/32),\n"
  " * read back in the same order by every thread, so all get the same, deterministic result. */\n"
  "template <typename OP, int LANES, int ROWS, typename T>\n"
  "__device__ __forceinline__ T dyn_row_reduce(T v, T *buf) {\n"
  "#pragma unroll\n"
  "  for (int o = (LANES < 32 ? LANES : 32) / 2; o > 0; o /= 2) v = OP::op(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
  "  if (LANES <= 32) return v;\n"
  "  constexpr int W = LANES / 32 > 0 ? LANES / 32 : 1;\n"
  "  T *row = buf + threadIdx.y * W;\n"
  "  __syncthreads();                       /* an earlier reduction has read the buffer */\n"
  "  if ((threadIdx.x & 31) == 0) row[threadIdx.x / 32] = v;\n"
  "  __syncthreads();\n"
  "  T r = row[0];\n"
  "#pragma unroll\n"
  "  for (int w = 1; w < W; w++) r = OP::op(r, row[w]);\n"
  "  return r;\n"
  "}\n"
  "\n"
  "/* Copies from global to shared memory: asynchronous (cp.async, zero-filling past `bytes`)\n"
  " * from sm_80 on, plain loads and stores before.  16 bytes: four f32 or two f64 (the bits\n"
  " * move as f32); one element: 4 or 8 bytes. */\n"
  "__device__ __forceinline__ void dyn_cp16(void *s, const void *g, int bytes) {\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
  "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"((unsigned)__cvta_generic_to_shared(s)), \"l\"(g), \"r\"(bytes));\n"
  "#else\n"
  "  const float *f = (const float *)g;\n"
  "  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);\n"
  "  if (bytes >= 16) v = *(const float4 *)g;\n"
  "  else {\n"
  "    if (bytes >= 4) v.x = f[0];\n"
  "    if (bytes >= 8) v.y = f[1];\n"
  "    if (bytes >= 12) v.z = f[2];\n"
  "  }\n"
  "  *(float4 *)s = v;\n"
  "#endif\n"
  "}\n"
  "__device__ __forceinline__ void dyn_cp4(float *s, const float *g, int bytes) {\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
  "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\"r\"((unsigned)__cvta_generic_to_shared(s)), \"l\"(g), \"r\"(bytes));\n"
  "#else\n"
  "  *s = bytes ? *g : 0.f;\n"
  "#endif\n"
  "}\n"
  "__device__ __forceinline__ void dyn_cp4(double *s, const double *g, int bytes) {\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
  "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\\n\" ::\"r\"((unsigned)__cvta_generic_to_shared(s)), \"l\"(g), \"r\"(bytes));\n"
  "#else\n"
  "  *s = bytes ? *g : 0.0;\n"
  "#endif\n"
  "}\n"
  "__device__ __forceinline__ void dyn_cp_commit() {\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
  "  asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n"
  "#endif\n"
  "}\n"
  "template <int N> __device__ __forceinline__ void dyn_cp_wait() {\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
  "  asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(N) : \"memory\");\n"
  "#endif\n"
  "}\n"
  "\n"
  "/* Stage a ROWS x COLS tile of T (f32 or f64) into shared memory (row pitch LD elements):\n"
  " * element (r, c) is g[r * sr + c * sc] when r < nr and c < nc, else 0 (the edges of any\n"
  " * shape).  With vec (sc == 1, sr and g 16-byte aligned: the host checks) V = 4 (f32) or 2\n"
  " * (f64) columns move per 16-byte copy; else one element per copy, consecutive threads along\n"
  " * the columns, or along the rows when ROW_FAST (the rows are contiguous in memory: a\n"
  " * transpose on the way). */\n"
  "template <int ROWS, int COLS, int LD, int THREADS, bool ROW_FAST, typename T>\n"
  "__device__ __forceinline__ void dyn_tile_load(T *s, const T *g, int nr, i64 nc, i64 sr, i64 sc, bool vec) {\n"
  "  if (!ROW_FAST && vec) {\n"
  "    constexpr int V = 16 / (int)sizeof(T), C4 = COLS / V, N = ROWS * C4;\n"
  "#pragma unroll 1\n"
  "    for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {\n"
  "      const int t = threadIdx.x + i * THREADS;\n"
  "      if (N % THREADS != 0 && t >= N) break;\n"
  "      const int r = t / C4, c = t % C4 * V;\n"
  "      const i64 left = nc - c;\n"
  "      const int bytes = r < nr && left > 0 ? (left >= V ? 16 : (int)left * (int)sizeof(T)) : 0;\n"
  "      dyn_cp16(s + r * LD + c, bytes ? g + r * sr + c : g, bytes);\n"
  "    }\n"
  "  } else {\n"
  "    constexpr int N = ROWS * COLS;\n"
  "#pragma unroll 1\n"
  "    for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {\n"
  "      const int t = threadIdx.x + i * THREADS;\n"
  "      if (N % THREADS != 0 && t >= N) break;\n"
  "      const int r = ROW_FAST ? t % ROWS : t / COLS, c = ROW_FAST ? t / ROWS : t % COLS;\n"
  "      const bool in = r < nr && c < nc;\n"
  "      dyn_cp4(s + r * LD + c, in ? g + r * sr + c * sc : g, in ? (int)sizeof(T) : 0);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "\n"
  "/* Level block of every contraction, whatever its tile type G (DynGemm below: the CUDA cores;\n"
  " * DynMma: the tensor cores): acc += A[m0 .. m0 + BM, k0 .. k1) . B[k0 .. k1, n0 .. n0 + BN)\n"
  " * over k-steps of G::BK.  The A and B tiles of a step sit in shared memory, two buffers: the\n"
  " * copy of step t + 1 runs while step t is computed.  An operand keeps the layout it has in\n"
  " * memory ([BM][BK] when k is contiguous, else [BK][BM]; B likewise, as G::SB_KC says), so\n"
  " * copies move 16 bytes; past the edges of A and B the tiles hold zeros. */\n"
  "template <class G>\n"
  "__device__ __forceinline__ void dyn_gemm_load(typename G::T *sa, typename G::T *sb, const typename G::T *ga, const typename G::T *gb,\n"
  "                                              int ma, int nb, i64 kl, i64 a_sm, i64 a_sk, i64 b_sk, i64 b_sn, bool avec, bool bvec) {\n"
  "  constexpr int BK = G::BK;\n"
  "  if (G::A_KC) dyn_tile_load<G::AR, G::AC, G::ALD, G::THREADS, false>(sa, ga, ma, kl, a_sm, a_sk, avec);\n"
  "  else dyn_tile_load<G::AR, G::AC, G::ALD, G::THREADS, false>(sa, ga, kl < BK ? (int)kl : BK, ma, a_sk, a_sm, avec);\n"
  "  if (G::SB_KC) dyn_tile_load<G::BR, G::BC, G::BLD, G::THREADS, false>(sb, gb, nb, kl, b_sn, b_sk, bvec);\n"
  "  else dyn_tile_load<G::BR, G::BC, G::BLD, G::THREADS, G::B_KC>(sb, gb, kl < BK ? (int)kl : BK, nb, b_sk, b_sn, bvec && !G::B_KC);\n"
  "}\n"
  "/* the tile's origins move by a k-step each time, so only two pointers and the extents left\n"
  " * stay live */\n"
  "template <class G>\n"
  "__device__ __forceinline__ void dyn_gemm_run(typename G::T (&acc)[G::TM][G::TN], typename G::T *sa, typename G::T *sb,\n"
  "                                             const typename G::T *A, const typename G::T *B, i64 m0, i64 n0, i64 k0, i64 k1, i64 M,\n"
  "                                             i64 N, i64 a_sm, i64 a_sk, i64 b_sk, i64 b_sn, bool avec, bool bvec) {\n"
  "  constexpr int BM = G::BM, BN = G::BN, BK = G::BK;\n"
  "  const int tx = G::tx(), ty = G::ty();\n"
  "  const int nt = k1 > k0 ? (int)((k1 - k0 + BK - 1) / BK) : 0;\n"
  "  const int ma = M - m0 < BM ? (int)(M - m0) : BM, nb = N - n0 < BN ? (int)(N - n0) : BN;\n"
  "  const typename G::T *ga = A + m0 * a_sm + k0 * a_sk, *gb = B + k0 * b_sk + n0 * b_sn;\n"
  "  i64 kl = k1 - k0;\n"
  "  if (nt > 0) dyn_gemm_load<G>(sa, sb, ga, gb, ma, nb, kl, a_sm, a_sk, b_sk, b_sn, avec, bvec);\n"
  "  dyn_cp_commit();\n"
  "  for (int t = 0; t < nt; t++) {\n"
  "    if (t + 1 < nt) {\n"
  "      ga += BK * a_sk;\n"
  "      gb += BK * b_sk;\n"
  "      kl -= BK;\n"
  "      dyn_gemm_load<G>(sa + ((t + 1) & 1) * G::ATILE, sb + ((t + 1) & 1) * G::BTILE, ga, gb, ma, nb, kl, a_sm, a_sk, b_sk, b_sn, avec, bvec);\n"
  "    }\n"
  "    dyn_cp_commit();\n"
  "    dyn_cp_wait<1>();\n"
  "    __syncthreads();\n"
  "    G::compute(acc, sa + (t & 1) * G::ATILE, sb + (t & 1) * G::BTILE, tx, ty);\n"
  "    __syncthreads();\n"
  "  }\n"
  "}\n"
  "\n"
  "/* Four consecutive elements from shared memory: one 16-byte read of f32, two of f64. */\n"
  "__device__ __forceinline__ void dyn_ld4(const float *p, float (&q)[4]) {\n"
  "  const float4 v = *(const float4 *)p;\n"
  "  q[0] = v.x; q[1] = v.y; q[2] = v.z; q[3] = v.w;\n"
  "}\n"
  "__device__ __forceinline__ void dyn_ld4(const double *p, double (&q)[4]) {\n"
  "  const double2 v = *(const double2 *)p, w = *(const double2 *)(p + 2);\n"
  "  q[0] = v.x; q[1] = v.y; q[2] = w.x; q[3] = w.y;\n"
  "}\n"
  "__device__ __forceinline__ float dyn_fma(float a, float b, float c) { return fmaf(a, b, c); }\n"
  "__device__ __forceinline__ double dyn_fma(double a, double b, double c) { return fma(a, b, c); }\n"
  "\n"
  "/* The levels below the block of a contraction on the CUDA cores (exact FMA, in T: f32 or\n"
  " * f64):\n"
  " *   block:  THREADS threads; only when both operands keep k contiguous is B transposed on the\n"
  " *           way ([BK][BN]).  Rows are padded by 4 elements: 16-byte aligned, and successive\n"
  " *           rows change banks.\n"
  " *   thread: TM x TN outputs in registers, rows row(ty, i), columns col(tx, j): in runs of four\n"
  " *           where a dyn_ld4 read covers them, interleaved where each is read on its own. */\n"
  "template <int BM_, int BN_, int BK_, int TM_, int TN_, bool A_KC_, bool B_KC_, typename T_ = float>\n"
  "struct DynGemm {\n"
  "  typedef T_ T;\n"
  "  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;\n"
  "  static constexpr bool A_KC = A_KC_, B_KC = B_KC_;\n"
  "  static constexpr int THREADS = (BM / TM) * (BN / TN);\n"
  "  static constexpr bool SB_KC = B_KC && !A_KC;\n"
  "  static constexpr int AR = A_KC ? BM : BK, AC = A_KC ? BK : BM, ALD = AC + 4, ATILE = AR * ALD;\n"
  "  static constexpr int BR = SB_KC ? BN : BK, BC = SB_KC ? BK : BN, BLD = BC + 4, BTILE = BR * BLD;\n"
  "  static __device__ __forceinline__ int tx() { return threadIdx.x % (BN / TN); }\n"
  "  static __device__ __forceinline__ int ty() { return threadIdx.x / (BN / TN); }\n"
  "  static __device__ __forceinline__ int row(int ty, int i) {\n"
  "    return A_KC ? ty + (BM / TM) * i : (i / 4) * (BM * 4 / TM) + ty * 4 + i % 4;\n"
  "  }\n"
  "  static __device__ __forceinline__ int col(int tx, int j) {\n"
  "    return SB_KC ? tx + (BN / TN) * j : (j / 4) * (BN * 4 / TN) + tx * 4 + j % 4;\n"
  "  }\n"
  "  /* One k-step: the operand that keeps k contiguous is read a quad of k at a time (dyn_ld4\n"
  "   * along k), the other one k at a time (dyn_ld4 along m or n). */\n"
  "  static __device__ __forceinline__ void compute(T (&acc)[TM][TN], const T *sa, const T *sb, int tx, int ty) {\n"
  "#pragma unroll\n"
  "    for (int kq = 0; kq < BK; kq += 4) {\n"
  "      T a[TM][4];\n"
  "      if constexpr (A_KC) {\n"
  "#pragma unroll\n"
  "        for (int i = 0; i < TM; i++) dyn_ld4(sa + row(ty, i) * ALD + kq, a[i]);\n"
  "      }\n"
  "      if constexpr (SB_KC) {\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < TN; j++) {\n"
  "          T b[4];\n"
  "          dyn_ld4(sb + col(tx, j) * BLD + kq, b);\n"
  "#pragma unroll\n"
  "          for (int u = 0; u < 4; u++) {\n"
  "            if constexpr (!A_KC) {\n"
  "              if (j == 0) {\n"
  "#pragma unroll\n"
  "                for (int i = 0; i < TM; i += 4) {\n"
  "                  T w[4];\n"
  "                  dyn_ld4(sa + (kq + u) * ALD + row(ty, i), w);\n"
  "                  a[i][u] = w[0]; a[i + 1][u] = w[1]; a[i + 2][u] = w[2]; a[i + 3][u] = w[3];\n"
  "                }\n"
  "              }\n"
  "            }\n"
  "#pragma unroll\n"
  "            for (int i = 0; i < TM; i++) acc[i][j] = dyn_fma(a[i][u], b[u], acc[i][j]);\n"
  "          }\n"
  "        }\n"
  "      } else {\n"
  "#pragma unroll\n"
  "        for (int u = 0; u < 4; u++) {\n"
  "          T b[TN];\n"
  "#pragma unroll\n"
  "          for (int j = 0; j < TN; j += 4) {\n"
  "            T v[4];\n"
  "            dyn_ld4(sb + (kq + u) * BLD + col(tx, j), v);\n"
  "            b[j] = v[0]; b[j + 1] = v[1]; b[j + 2] = v[2]; b[j + 3] = v[3];\n"
  "          }\n"
  "          if constexpr (!A_KC) {\n"
  "#pragma unroll\n"
  "            for (int i = 0; i < TM; i += 4) {\n"
  "              T w[4];\n"
  "              dyn_ld4(sa + (kq + u) * ALD + row(ty, i), w);\n"
  "              a[i][u] = w[0]; a[i + 1][u] = w[1]; a[i + 2][u] = w[2]; a[i + 3][u] = w[3];\n"
  "            }\n"
  "          }\n"
  "#pragma unroll\n"
  "          for (int i = 0; i < TM; i++)\n"
  "#pragma unroll\n"
  "            for (int j = 0; j < TN; j++) acc[i][j] = dyn_fma(a[i][u], b[j], acc[i][j]);\n"
  "        }\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "};\n";

/* The tensor cores' helpers and tile, appended to the prelude of a module whose contractions
 * use them: they exist only from sm_80 on. */
static const char PRELUDE_MMA[] =
  "\n"
  "/* ---- the tensor cores: the f32 contractions of this module run on them, in the precision\n"
  " * its first lines name ---- */\n"
  "\n"
  "/* f32 to the tensor cores' operand formats.  tf32: round to nearest, ties away from zero, to\n"
  " * 10 bits of mantissa (cvt.rna: an f32 bit pattern with the low 13 bits zero).  bf16x2: two\n"
  " * f32 rounded to nearest, ties to even, to 7 bits of mantissa; lo in the low half, the first\n"
  " * of a fragment's pair.  Compiled off the GPU (the tests' CPU emulator, tests/cuda/emu.h),\n"
  " * the dyn_emu_ functions compute the same. */\n"
  "__device__ __forceinline__ unsigned dyn_tf32(float x) {\n"
  "#ifdef __CUDA_ARCH__\n"
  "  unsigned r;\n"
  "  asm(\"cvt.rna.tf32.f32 %0, %1;\\n\" : \"=r\"(r) : \"f\"(x));\n"
  "  return r;\n"
  "#else\n"
  "  return dyn_emu_tf32(x);\n"
  "#endif\n"
  "}\n"
  "__device__ __forceinline__ unsigned dyn_bf16x2(float lo, float hi) {\n"
  "#ifdef __CUDA_ARCH__\n"
  "  unsigned r;\n"
  "  asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\\n\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
  "  return r;\n"
  "#else\n"
  "  return dyn_emu_bf16x2(lo, hi);\n"
  "#endif\n"
  "}\n"
  "\n"
  "/* One warp, one 16 x 8 tile of C: d += a . b over 8 (tf32) or 16 (bf16) of k, the products\n"
  " * summed in f32.  Each lane holds its fragments in the layouts of the PTX ISA (\"Matrix\n"
  " * Fragments for mma.m16n8k8\", \"... for mma.m16n8k16\"): with g = lane / 4 and t = lane % 4,\n"
  " *   tf32  a: A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4];  b: B[t][g], B[t + 4][g]\n"
  " *   bf16  a: A[g][2t, 2t + 1], A[g + 8][2t, 2t + 1], A[g][2t + 8, 2t + 9], A[g + 8][2t + 8, 2t + 9];\n"
  " *         b: B[2t, 2t + 1][g], B[2t + 8, 2t + 9][g]  (pairs packed by dyn_bf16x2)\n"
  " *   d:    C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1] */\n"
  "__device__ __forceinline__ void dyn_mma_tf32(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {\n"
  "#ifdef __CUDA_ARCH__\n"
  "  asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n\"\n"
  "               : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n"
  "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
  "#else\n"
  "  dyn_emu_mma_tf32(d0, d1, d2, d3, a, b);\n"
  "#endif\n"
  "}\n"
  "__device__ __forceinline__ void dyn_mma_bf16(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {\n"
  "#ifdef __CUDA_ARCH__\n"
  "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n\"\n"
  "               : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n"
  "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
  "#else\n"
  "  dyn_emu_mma_bf16(d0, d1, d2, d3, a, b);\n"
  "#endif\n"
  "}\n"
  "\n"
  "/* The levels below the block of a contraction on the tensor cores (dyn_gemm_run stages the\n"
  " * tiles, in f32):\n"
  " *   block:  WM x WN warps.  Rows are padded so that a warp's fragment reads hit 32 different\n"
  " *           banks: lanes step by g = 0..7 across C's rows (columns) and by t = 0..3 along k, so\n"
  " *           tf32 wants rows of 4 mod 32 floats where k is contiguous (4g + t) and 8 mod 32\n"
  " *           where it is not (8t + g); bf16 reads pairs of k, which swaps the two.\n"
  " *   warp:   a WTM x WTN tile of C, MI x NI mma tiles of 16 x 8; per KS of k it reads its A\n"
  " *           and B fragments from shared memory, rounding them to tf32 (bf16) on the way, and\n"
  " *           runs MI x NI mma.sync.\n"
  " *   thread: the four outputs of each mma tile it holds: acc[i][j] is C[row(ty, i)][col(tx, j)],\n"
  " *           ty = the warp's first row + g, tx = its first column + 2t. */\n"
  "template <int BM_, int BN_, int BK_, int WM, int WN, bool A_KC_, bool B_KC_, bool BF16>\n"
  "struct DynMma {\n"
  "  typedef float T;\n"
  "  static constexpr int BM = BM_, BN = BN_, BK = BK_;\n"
  "  static constexpr bool A_KC = A_KC_, B_KC = B_KC_, SB_KC = B_KC_;\n"
  "  static constexpr int THREADS = WM * WN * 32, WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NI = WTN / 8;\n"
  "  static constexpr int TM = 2 * MI, TN = 2 * NI, KS = BF16 ? 16 : 8;\n"
  "  static constexpr int APAD = A_KC ? (BF16 ? 8 : 4) : (BF16 ? 4 : 8), BPAD = SB_KC ? (BF16 ? 8 : 4) : (BF16 ? 4 : 8);\n"
  "  static constexpr int AR = A_KC ? BM : BK, AC = A_KC ? BK : BM, ALD = AC + APAD, ATILE = AR * ALD;\n"
  "  static constexpr int BR = SB_KC ? BN : BK, BC = SB_KC ? BK : BN, BLD = BC + BPAD, BTILE = BR * BLD;\n"
  "  static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % KS == 0, \"a warp tile of whole mma tiles\");\n"
  "  static __device__ __forceinline__ int ty() { return threadIdx.x / 32 / WN * WTM + threadIdx.x % 32 / 4; }\n"
  "  static __device__ __forceinline__ int tx() { return threadIdx.x / 32 % WN * WTN + threadIdx.x % 4 * 2; }\n"
  "  static __device__ __forceinline__ int row(int ty, int i) { return ty + i / 2 * 16 + i % 2 * 8; }\n"
  "  static __device__ __forceinline__ int col(int tx, int j) { return tx + j / 2 * 8 + j % 2; }\n"
  "  /* fragments: A at row r, B at column c, element k (tf32) or the pair k, k + 1 (bf16: one\n"
  "   * 8-byte read where k is contiguous) */\n"
  "  static __device__ __forceinline__ unsigned a_tf32(const float *sa, int r, int k) {\n"
  "    return dyn_tf32(A_KC ? sa[r * ALD + k] : sa[k * ALD + r]);\n"
  "  }\n"
  "  static __device__ __forceinline__ unsigned b_tf32(const float *sb, int k, int c) {\n"
  "    return dyn_tf32(SB_KC ? sb[c * BLD + k] : sb[k * BLD + c]);\n"
  "  }\n"
  "  static __device__ __forceinline__ unsigned a_bf16(const float *sa, int r, int k) {\n"
  "    if constexpr (A_KC) {\n"
  "      const float2 v = *(const float2 *)(sa + r * ALD + k);\n"
  "      return dyn_bf16x2(v.x, v.y);\n"
  "    } else {\n"
  "      return dyn_bf16x2(sa[k * ALD + r], sa[(k + 1) * ALD + r]);\n"
  "    }\n"
  "  }\n"
  "  static __device__ __forceinline__ unsigned b_bf16(const float *sb, int k, int c) {\n"
  "    if constexpr (SB_KC) {\n"
  "      const float2 v = *(const float2 *)(sb + c * BLD + k);\n"
  "      return dyn_bf16x2(v.x, v.y);\n"
  "    } else {\n"
  "      return dyn_bf16x2(sb[k * BLD + c], sb[(k + 1) * BLD + c]);\n"
  "    }\n"
  "  }\n"
  "  /* One k-step of the block: BK / KS rounds of fragments and mma.sync. */\n"
  "  static __device__ __forceinline__ void compute(float (&acc)[TM][TN], const float *sa, const float *sb, int tx, int ty) {\n"
  "    const int t = threadIdx.x % 4;\n"
  "    const int c0 = tx - 2 * t + threadIdx.x % 32 / 4;      /* column g of the warp's first B tile */\n"
  "#pragma unroll\n"
  "    for (int kk = 0; kk < BK; kk += KS) {\n"
  "      unsigned a[MI][4], b[NI][2];\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < MI; i++) {\n"
  "        const int r = ty + 16 * i;\n"
  "        if constexpr (BF16) {\n"
  "          a[i][0] = a_bf16(sa, r, kk + 2 * t);\n"
  "          a[i][1] = a_bf16(sa, r + 8, kk + 2 * t);\n"
  "          a[i][2] = a_bf16(sa, r, kk + 2 * t + 8);\n"
  "          a[i][3] = a_bf16(sa, r + 8, kk + 2 * t + 8);\n"
  "        } else {\n"
  "          a[i][0] = a_tf32(sa, r, kk + t);\n"
  "          a[i][1] = a_tf32(sa, r + 8, kk + t);\n"
  "          a[i][2] = a_tf32(sa, r, kk + t + 4);\n"
  "          a[i][3] = a_tf32(sa, r + 8, kk + t + 4);\n"
  "        }\n"
  "      }\n"
  "#pragma unroll\n"
  "      for (int j = 0; j < NI; j++) {\n"
  "        const int c = c0 + 8 * j;\n"
  "        if constexpr (BF16) {\n"
  "          b[j][0] = b_bf16(sb, kk + 2 * t, c);\n"
  "          b[j][1] = b_bf16(sb, kk + 2 * t + 8, c);\n"
  "        } else {\n"
  "          b[j][0] = b_tf32(sb, kk + t, c);\n"
  "          b[j][1] = b_tf32(sb, kk + t + 4, c);\n"
  "        }\n"
  "      }\n"
  "#pragma unroll\n"
  "      for (int i = 0; i < MI; i++)\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < NI; j++) {\n"
  "          float &d0 = acc[2 * i][2 * j], &d1 = acc[2 * i][2 * j + 1], &d2 = acc[2 * i + 1][2 * j], &d3 = acc[2 * i + 1][2 * j + 1];\n"
  "          if constexpr (BF16) dyn_mma_bf16(d0, d1, d2, d3, a[i], b[j]);\n"
  "          else dyn_mma_tf32(d0, d1, d2, d3, a[i], b[j]);\n"
  "        }\n"
  "    }\n"
  "  }\n"
  "};\n";

/* ---- rendering: expressions ----------------------------------------------------------------- */

typedef struct Rd {
  CudaProgram *cp;
  const Program *p;
  CK *ck;
  Buf *o;
  const char **ax;            /* per axis: the C expression of its value (NULL: unbound) */
  const char **sub;           /* per KExpr id: the text that stands for the node */
  const char **reg;           /* per slot: the register holding its value in this row */
  bool *wr;                   /* per slot: written by this kernel (no read-only cache then) */
} Rd;

static const char *cty(DynElem t) {
  switch (t) {
  case DYN_F32: return "float";
  case DYN_F64: return "double";
  case DYN_I32: return "int";
  case DYN_I64: return "i64";
  default: return "bool";
  }
}

static const char *mty(DynElem t) { return t == DYN_BOOL ? "unsigned char" : cty(t); }

/* A reduction's accumulator: bools accumulate as int. */
static DynElem acc_ty(DynElem t) { return t == DYN_BOOL ? DYN_I32 : t; }

static const char *red_op(RedOp r) {
  return r == RED_SUM ? "DynSum" : r == RED_PROD ? "DynProd" : r == RED_MAX ? "DynMax" : "DynMin";
}

/* A constant as a C literal: floats with the fewest digits that give the same value back. */
static void const_text(Buf *o, DynElem t, double f, int64_t i) {
  if (t == DYN_F32 || t == DYN_F64) {
    bool f32 = t == DYN_F32;
    if (f32) f = (double)(float)f;
    if (isnan(f)) {
      buf_puts(o, f32 ? "DYN_NAN_F" : "DYN_NAN_D");
      return;
    }
    if (isinf(f)) {
      buf_puts(o, f > 0 ? (f32 ? "DYN_INF_F" : "DYN_INF_D") : (f32 ? "(-DYN_INF_F)" : "(-DYN_INF_D)"));
      return;
    }
    char s[64];
    for (int d = f32 ? 6 : 15; d <= 17; d++) {
      snprintf(s, sizeof s, "%.*g", d, f);
      double back = strtod(s, NULL);
      if (f32 ? (float)back == (float)f : back == f) break;
    }
    if (!strpbrk(s, ".en")) strcat(s, ".0");
    buf_printf(o, signbit(f) ? "(%s%s)" : "%s%s", s, f32 ? "f" : "");
    return;
  }
  if (t == DYN_I32) {
    if (i == INT32_MIN) buf_puts(o, "DYN_I32_MIN");
    else buf_printf(o, i < 0 ? "(%d)" : "%d", (int)i);
  } else if (t == DYN_I64) {
    if (i == INT64_MIN) buf_puts(o, "DYN_I64_MIN");
    else buf_printf(o, i < 0 ? "(%lldLL)" : "%lldLL", (long long)i);
  } else {
    buf_puts(o, i ? "true" : "false");
  }
}

static void red_init_text(Buf *o, RedOp r, DynElem t) {
  switch (r) {
  case RED_SUM: const_text(o, t, 0, 0); break;
  case RED_PROD: const_text(o, t, 1, 1); break;
  case RED_MAX:
    if (elem_is_float(t)) const_text(o, t, -INFINITY, 0);
    else buf_puts(o, t == DYN_I64 ? "DYN_I64_MIN" : "DYN_I32_MIN");
    break;
  default:
    if (elem_is_float(t)) const_text(o, t, INFINITY, 0);
    else buf_puts(o, t == DYN_I64 ? "DYN_I64_MAX" : "DYN_I32_MAX");
    break;
  }
}

static void cast_text(Buf *o, DynElem from, DynElem to, const char *x) {
  if (from == to) buf_puts(o, x);
  else if (to == DYN_BOOL) buf_printf(o, "(%s != 0)", x);
  else if (elem_is_float(to)) buf_printf(o, "(%s)(%s)", cty(to), x);
  else if (elem_is_float(from)) buf_printf(o, "dyn_f2%s(%s)", to == DYN_I32 ? "i32" : "i64", x);
  else if (to == DYN_I32) buf_printf(o, "(int)(unsigned)(%s)", x);
  else buf_printf(o, "(i64)(%s)", x);
}

/* An identifier, a field or a number needs no parentheses as an operand. */
static bool simple(const char *s) {
  for (const char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '.'))
      return false;
  return *s != 0;
}

static const char *field_name(const CK *ck, int kind, int slot, int dim, const Poly *size) {
  for (int i = 0; i < ck->nf; i++) {
    const Field *f = &ck->f[i];
    if (f->kind != kind) continue;
    if ((kind == F_PTR && f->slot == slot) || (kind == F_STRIDE && f->slot == slot && f->dim == dim) ||
        (kind == F_DIM && f->slot == slot && f->dim == dim) || (kind == F_EXT && f->size == size) ||
        (kind == F_SIZE && f->size == size) || kind >= F_ERR)
      return f->name;
  }
  return "missing_field_";   /* an internal error: the compile fails with this name */
}

static const char *ext_of(Rd *r, int axis) {
  return arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_EXT, 0, 0, r->p->axes[axis].extent));
}

/* The element offset of slot at the given subscripts: the last stride is 1. */
static void offset_text(Rd *r, int slot, const char *const *subs, int n, Buf *o) {
  if (n == 0) {
    buf_puts(o, "0");
    return;
  }
  for (int k = 0; k < n; k++) {
    if (k) buf_puts(o, " + ");
    bool last = k == n - 1;
    if (last) buf_puts(o, subs[k]);
    else if (simple(subs[k])) buf_printf(o, "%s * a.%s", subs[k], field_name(r->ck, F_STRIDE, slot, k, NULL));
    else buf_printf(o, "(%s) * a.%s", subs[k], field_name(r->ck, F_STRIDE, slot, k, NULL));
  }
}

static void ex(Rd *r, const KExpr *e, Buf *o);

static const char *ex_str(Rd *r, const KExpr *e) {
  Buf b = {0};
  ex(r, e, &b);
  const char *s = arena_strndup(r->cp->ar, b.s ? b.s : "", b.len);
  buf_free(&b);
  return s;
}

/* e converted to type t */
static void ex_as(Rd *r, const KExpr *e, DynElem t, Buf *o) {
  if (e->ty == t) {
    ex(r, e, o);
    return;
  }
  cast_text(o, e->ty, t, ex_str(r, e));
}

static const char *ex_as_str(Rd *r, const KExpr *e, DynElem t) {
  Buf b = {0};
  ex_as(r, e, t, &b);
  const char *s = arena_strndup(r->cp->ar, b.s ? b.s : "", b.len);
  buf_free(&b);
  return s;
}

/* A primary or postfix expression (a name, a call, an index, a parenthesised expression, a
 * cast of one, a lambda called): safe as the operand of any operator. */
static bool primary(const char *s, size_t n) {
  if (n == 0) return false;
  bool id = true;
  for (size_t i = 0; i < n && id; i++)
    id = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
         s[i] == '.' || s[i] == ':';
  if (id) return true;
  if (n >= 3 && !strncmp(s, "[&]", 3) && s[n - 1] == '}') return true;
  char last = s[n - 1];
  if (last != ')' && last != ']') return false;
  int depth = 0;
  size_t j = n;
  while (j > 0) {
    char c = s[--j];
    if (c == ')' || c == ']' || c == '}') depth++;
    else if (c == '(' || c == '[' || c == '{') {
      if (--depth == 0) break;
    }
  }
  if (depth != 0) return false;
  return j == 0 || primary(s, j);
}

static const char *paren(Rd *r, const char *s) { return primary(s, strlen(s)) ? s : arena_printf(r->cp->ar, "(%s)", s); }

/* True when a load's subscripts are the kernel's row axes, in order. */
static bool row_subscripts(const CK *ck, const KExpr *e) {
  if (e->n != ck->nouter) return false;
  for (int i = 0; i < e->n; i++)
    if (e->a[i]->kind != KX_AXIS || e->a[i]->axis != ck->outer[i]) return false;
  return true;
}

static void ex_load(Rd *r, const KExpr *e, Buf *o) {
  CudaProgram *cp = r->cp;
  int s = e->slot;
  const Slot *sl = &r->p->slots[s];
  if (cp->inl[s]) {
    /* a per-row array recomputed here: its axes take this load's subscripts */
    const Stage *st = cp->def[s];
    const char *saved[2 * DYN_MAX_RANK];
    int first = e->n - st->naxes;
    const char *subs[2 * DYN_MAX_RANK];
    for (int k = 0; k < st->naxes; k++) subs[k] = paren(r, ex_str(r, e->a[first + k]));
    for (int k = 0; k < st->naxes; k++) {
      saved[k] = r->ax[st->axes[k]];
      r->ax[st->axes[k]] = subs[k];
    }
    ex_as(r, st->expr, e->ty, o);
    for (int k = 0; k < st->naxes; k++) r->ax[st->axes[k]] = saved[k];
    return;
  }
  if (r->reg[s] && (!cp->buf[s] || row_subscripts(r->ck, e))) {
    cast_text(o, sl->type.elem, e->ty, r->reg[s]);
    return;
  }
  if (!cp->buf[s]) {
    buf_puts(o, "missing_register_");
    return;
  }
  const char *subs[2 * DYN_MAX_RANK];
  for (int k = 0; k < e->n && k < 2 * DYN_MAX_RANK; k++) subs[k] = ex_as_str(r, e->a[k], DYN_I64);
  DynElem t = sl->type.elem;
  const char *ptr = field_name(r->ck, F_PTR, s, 0, NULL);
  Buf val = {0};
  if (e->checked) {
    /* bounds checked: out of range sets the error flag and reads nothing */
    const char *names[2 * DYN_MAX_RANK];
    buf_printf(&val, "[&]() -> %s { const i64 ", mty(t));
    for (int k = 0; k < e->n; k++) {
      names[k] = arena_printf(cp->ar, "s%d_", k);
      buf_printf(&val, "%s%s = %s", k ? ", " : "", names[k], subs[k]);
    }
    buf_puts(&val, "; if (");
    for (int k = 0; k < e->n; k++)
      buf_printf(&val, "%s%s < 0 || %s >= a.%s", k ? " || " : "", names[k], names[k], field_name(r->ck, F_DIM, s, k, NULL));
    buf_printf(&val, ") { bad_ = 1; return 0; } return %sa.%s[", r->wr[s] ? "" : "__ldg(&", ptr);
    offset_text(r, s, names, e->n, &val);
    buf_printf(&val, "]%s; }()", r->wr[s] ? "" : ")");
  } else {
    buf_printf(&val, "%sa.%s[", r->wr[s] ? "" : "__ldg(&", ptr);
    offset_text(r, s, subs, e->n, &val);
    buf_printf(&val, "]%s", r->wr[s] ? "" : ")");
  }
  if (t == DYN_BOOL) {
    char *v = arena_printf(cp->ar, "(%s != 0)", val.s);
    cast_text(o, DYN_BOOL, e->ty, v);
  } else {
    cast_text(o, t, e->ty, val.s);
  }
  buf_free(&val);
}

/* A reduction evaluated by one thread: a lambda, so that it runs only where evaluated (in the
 * chosen branch of a where). */
static void ex_reduce(Rd *r, const KExpr *e, Buf *o) {
  DynElem at = acc_ty(e->ty);
  const char *acc = arena_printf(r->cp->ar, "acc%d_", e->id);
  buf_printf(o, "[&]() -> %s { %s %s = ", cty(at), cty(at), acc);
  red_init_text(o, e->red, at);
  buf_puts(o, "; ");
  for (int i = 0; i < e->nraxes; i++) {
    const char *nm = r->cp->aname[e->raxes[i]];
    buf_printf(o, "for (i64 %s = 0; %s < %s; %s++) ", nm, nm, ext_of(r, e->raxes[i]), nm);
    r->ax[e->raxes[i]] = nm;
  }
  buf_printf(o, "%s = %s::op(%s, ", acc, red_op(e->red), acc);
  ex_as(r, e->a[0], at, o);
  buf_printf(o, "); return %s; }()", acc);
  for (int i = 0; i < e->nraxes; i++) r->ax[e->raxes[i]] = NULL;
}

static const char *fn1(OpKind op, bool f32) {
  switch (op) {
  case OP_EXP: return f32 ? "expf" : "exp";
  case OP_LOG: return f32 ? "logf" : "log";
  case OP_SQRT: return f32 ? "sqrtf" : "sqrt";
  case OP_SIN: return f32 ? "sinf" : "sin";
  case OP_COS: return f32 ? "cosf" : "cos";
  case OP_TANH: return f32 ? "tanhf" : "tanh";
  case OP_ERF: return f32 ? "erff" : "erf";
  case OP_ABS: return f32 ? "fabsf" : "fabs";
  case OP_FLOOR: return f32 ? "floorf" : "floor";
  case OP_CEIL: return f32 ? "ceilf" : "ceil";
  case OP_ROUND: return f32 ? "rintf" : "rint";      /* half to even, as NumPy */
  default: return NULL;
  }
}

static void ex(Rd *r, const KExpr *e, Buf *o) {
  if (r->sub && r->sub[e->id]) {
    buf_puts(o, r->sub[e->id]);
    return;
  }
  switch (e->kind) {
  case KX_CONST:
    const_text(o, e->ty, e->f, e->i);
    return;
  case KX_AXIS:
    buf_puts(o, r->ax[e->axis] ? r->ax[e->axis] : "missing_axis_");
    return;
  case KX_SIZE:
    cast_text(o, DYN_I64, e->ty, arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_SIZE, 0, 0, e->size)));
    return;
  case KX_LOAD:
    ex_load(r, e, o);
    return;
  case KX_CAST:
    cast_text(o, e->a[0]->ty, e->ty, ex_str(r, e->a[0]));
    return;
  case KX_SELECT: {
    const char *c = ex_as_str(r, e->a[0], DYN_BOOL);
    const char *x = ex_as_str(r, e->a[1], e->ty), *y = ex_as_str(r, e->a[2], e->ty);
    buf_printf(o, "(%s ? %s : %s)", c, x, y);
    return;
  }
  case KX_REDUCE:
    if (acc_ty(e->ty) != e->ty) {
      Buf b = {0};
      ex_reduce(r, e, &b);
      cast_text(o, acc_ty(e->ty), e->ty, b.s);
      buf_free(&b);
    } else {
      ex_reduce(r, e, o);
    }
    return;
  case KX_UN: {
    bool fl = elem_is_float(e->ty), f32 = e->ty == DYN_F32;
    const char *x = ex_as_str(r, e->a[0], e->op == OP_NOT ? DYN_BOOL : e->ty);
    switch (e->op) {
    case OP_NOT: buf_printf(o, "(!%s)", paren(r, x)); return;
    case OP_NEG:
      if (fl) buf_printf(o, "(-%s)", paren(r, x));
      else buf_printf(o, "dyn_neg(%s)", x);
      return;
    case OP_RSQRT:
      buf_printf(o, "(%s / %s(%s))", f32 ? "1.0f" : "1.0", f32 ? "sqrtf" : "sqrt", x);
      return;
    case OP_SIGMOID:
      buf_printf(o, "(%s / (%s + %s(-%s)))", f32 ? "1.0f" : "1.0", f32 ? "1.0f" : "1.0", f32 ? "expf" : "exp", paren(r, x));
      return;
    case OP_ABS:
      if (!fl) {
        buf_printf(o, "dyn_abs(%s)", x);
        return;
      }
      break;
    case OP_FLOOR: case OP_CEIL: case OP_ROUND:
      if (!fl) {
        buf_puts(o, x);
        return;
      }
      break;
    default:
      break;
    }
    const char *f = fn1(e->op, f32);
    buf_printf(o, "%s(%s)", f ? f : "missing_function_", x);
    return;
  }
  case KX_BIN: {
    OpClass c = op_class(e->op);
    if (c == OPK_CMP) {
      const char *x = ex_as_str(r, e->a[0], e->opty), *y = ex_as_str(r, e->a[1], e->opty);
      buf_printf(o, "(%s %s %s)", paren(r, x), op_name(e->op), paren(r, y));
      return;
    }
    if (e->op == OP_AND || e->op == OP_OR) {
      /* both sides are evaluated, as in the reference (an error on either side counts) */
      const char *x = ex_as_str(r, e->a[0], DYN_BOOL), *y = ex_as_str(r, e->a[1], DYN_BOOL);
      buf_printf(o, "(bool)(%s %s %s)", paren(r, x), e->op == OP_AND ? "&" : "|", paren(r, y));
      return;
    }
    const char *x = ex_as_str(r, e->a[0], e->ty), *y = ex_as_str(r, e->a[1], e->ty);
    bool f32 = e->ty == DYN_F32;
    if (elem_is_float(e->ty)) {
      switch (e->op) {
      case OP_ADD: buf_printf(o, "%s + %s", paren(r, x), paren(r, y)); break;
      case OP_SUB: buf_printf(o, "%s - %s", paren(r, x), paren(r, y)); break;
      case OP_MUL: buf_printf(o, "%s * %s", paren(r, x), paren(r, y)); break;
      case OP_DIV: buf_printf(o, "%s / %s", paren(r, x), paren(r, y)); break;
      case OP_MOD: buf_printf(o, "dyn_fmod(%s, %s)", x, y); return;
      case OP_POW: case OP_POWF: buf_printf(o, "%s(%s, %s)", f32 ? "powf" : "pow", x, y); return;
      case OP_MAX: buf_printf(o, "dyn_max(%s, %s)", x, y); return;
      case OP_MIN: buf_printf(o, "dyn_min(%s, %s)", x, y); return;
      default: buf_puts(o, "missing_operator_"); return;
      }
      /* infix: parenthesised by the caller's paren() when it is an operand */
      return;
    }
    switch (e->op) {
    case OP_ADD: buf_printf(o, "dyn_add(%s, %s)", x, y); return;
    case OP_SUB: buf_printf(o, "dyn_sub(%s, %s)", x, y); return;
    case OP_MUL: buf_printf(o, "dyn_mul(%s, %s)", x, y); return;
    case OP_DIV: buf_printf(o, "dyn_div(%s, %s, bad_)", x, y); return;
    case OP_MOD: buf_printf(o, "dyn_mod(%s, %s, bad_)", x, y); return;
    case OP_MAX: buf_printf(o, "dyn_max(%s, %s)", x, y); return;
    case OP_MIN: buf_printf(o, "dyn_min(%s, %s)", x, y); return;
    default: buf_printf(o, "dyn_ipow(%s, %s)", x, y); return;
    }
  }
  }
}

/* slot[subs] = val (val of type vt) */
static void store_text(Rd *r, int slot, const char *const *subs, int n, const char *val, DynElem vt, Buf *o) {
  DynElem t = r->p->slots[slot].type.elem;
  buf_printf(o, "a.%s[", field_name(r->ck, F_PTR, slot, 0, NULL));
  offset_text(r, slot, subs, n, o);
  buf_puts(o, "] = ");
  if (t == DYN_BOOL) {
    Buf b = {0};
    cast_text(&b, vt, DYN_BOOL, val);
    buf_printf(o, "(unsigned char)%s;", paren(r, b.s));
    buf_free(&b);
  } else {
    cast_text(o, vt, t, val);
    buf_puts(o, ";");
  }
}

/* ---- rendering: kernels --------------------------------------------------------------------- */

static void indent(Buf *o, int n) { buf_printf(o, "%*s", n, ""); }

/* The axes as text "b, n" */
static void axes_list(const CudaProgram *cp, const int *ax, int n, Buf *o) {
  for (int i = 0; i < n; i++) buf_printf(o, "%s%s", i ? ", " : "", cp->p->axes[ax[i]].name);
}

/* The product of extents of axes, as a C expression ("1" for none). */
static const char *ext_product(Rd *r, const int *ax, int n) {
  if (!n) return "1";
  Buf b = {0};
  for (int i = 0; i < n; i++) buf_printf(&b, "%s%s", i ? " * " : "", ext_of(r, ax[i]));
  const char *s = arena_strndup(r->cp->ar, b.s, b.len);
  buf_free(&b);
  return s;
}

/* Bind axes[0..n) to the flat index `var`, innermost last: divisions once per row. */
static void decompose(Rd *r, const int *ax, int n, const char *var, int ind) {
  Buf *o = r->o;
  if (n == 1) {
    indent(o, ind);
    buf_printf(o, "const i64 %s = %s;\n", r->cp->aname[ax[0]], var);
  } else if (n > 1) {
    indent(o, ind);
    buf_printf(o, "i64 q_ = %s, d_;\n", var);
    for (int i = n - 1; i >= 0; i--) {
      indent(o, ind);
      if (i) {
        const char *e = ext_of(r, ax[i]);
        buf_printf(o, "d_ = dyn_udiv(q_, %s);\n", e);
        indent(o, ind);
        buf_printf(o, "const i64 %s = q_ - d_ * %s;\n", r->cp->aname[ax[i]], e);
        indent(o, ind);
        buf_puts(o, "q_ = d_;\n");
      } else {
        buf_printf(o, "const i64 %s = q_;\n", r->cp->aname[ax[i]]);
      }
    }
  }
  for (int i = 0; i < n; i++) r->ax[ax[i]] = r->cp->aname[ax[i]];
}

static void stage_comment(Rd *r, const Kernel *kn, const Stage *st, int ind, const char *note) {
  const Program *p = r->p;
  Buf b = {0};
  buf_printf(&b, "%s", p->slots[st->out].name);
  int n = kn->nouter + st->naxes;
  if (n) {
    buf_putc(&b, '[');
    axes_list(r->cp, kn->outer, kn->nouter, &b);
    if (kn->nouter && st->naxes) buf_puts(&b, ", ");
    axes_list(r->cp, st->axes, st->naxes, &b);
    buf_putc(&b, ']');
  }
  buf_puts(&b, " = ");
  kx_print(p, st->expr, &b);
  /* no comment terminator inside the text */
  for (char *c = b.s; (c = strstr(c, "*/")); c++) c[1] = '.';
  indent(r->o, ind);
  buf_printf(r->o, "/* %s%s%s */\n", b.s, note ? ": " : "", note ? note : "");
  buf_free(&b);
}

static void render_args(Rd *r) {
  CK *ck = r->ck;
  const Program *p = r->p;
  Buf *o = r->o;
  buf_printf(o, "/* The arguments of %s: 8-byte words in this order (the host fills them). */\nstruct %s_args {\n", ck->base, ck->base);
  for (int i = 0; i < ck->nf; i++) {
    const Field *f = &ck->f[i];
    Buf c = {0};
    const Slot *sl = f->kind <= F_DIM ? &p->slots[f->slot] : NULL;
    switch (f->kind) {
    case F_PTR: {
      static const char *kinds[] = {"input", "size", "temporary", "per-row array", "output", "inlined"};
      buf_printf(&c, "%s %s ", kinds[sl->kind], sl->name);
      type_str(&sl->type, &c);
      buf_printf(o, "  %s%s *%s;", r->wr[f->slot] ? "" : "const ", mty(sl->type.elem), f->name);
      break;
    }
    case F_STRIDE:
      buf_printf(&c, "stride of %s along dimension %d, in elements (the last is 1)", sl->name, f->dim);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_DIM:
      buf_printf(&c, "dimension %d of %s, for the checked accesses", f->dim, sl->name);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_EXT:
      buf_printf(&c, "extent of %s: ", p->axes[f->axis].name);
      poly_str(p->axes[f->axis].extent, &c);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_SIZE:
      buf_puts(&c, "the size ");
      poly_str(f->size, &c);
      buf_printf(o, "  i64 %s;", f->name);
      break;
    case F_ERR:
      buf_puts(&c, "set to 1 on a run-time error (the reference evaluator then explains it)");
      buf_printf(o, "  int *%s;", f->name);
      break;
    case F_WS:
      buf_puts(&c, ck->kind == CK_GEMM ? "workspace: the partial tiles of a split K" : "workspace: a ticket, then the blocks' partial results");
      buf_printf(o, "  void *%s;", f->name);
      break;
    case F_SPLITS:
      buf_puts(&c, "how many parts K is split into (1: none)");
      buf_printf(o, "  i64 %s;", f->name);
      break;
    default:
      buf_printf(&c, "nonzero: %s may be copied 16 bytes at a time", f->kind == F_AVEC ? "A" : "B");
      buf_printf(o, "  i64 %s;", f->name);
      break;
    }
    size_t col = o->len - (size_t)(strrchr(o->s, '\n') - o->s) - 1;
    buf_printf(o, "%*s/* %s */\n", col < 36 ? (int)(36 - col) : 1, "", c.s);
    buf_free(&c);
  }
  buf_puts(o, "};\n\n");
}

/* __launch_bounds__ always names the blocks per SM: with the threads alone, ptxas aims at a
 * register count of its own and spills below it. */
static void kernel_open(Rd *r, const Var *v, int min_blocks) {
  buf_printf(r->o, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(const %s_args a) {\n", v->threads,
             min_blocks > 1 ? min_blocks : 1, v->name, r->ck->base);
  if (r->ck->err) buf_puts(r->o, "  int bad_ = 0;\n");
}

static void kernel_close(Rd *r) {
  if (r->ck->err) buf_puts(r->o, "  if (bad_) *a.err = 1;\n");
  buf_puts(r->o, "}\n\n");
}

static void reset_axes(Rd *r) {
  for (int a = 0; a < r->p->naxes; a++) r->ax[a] = NULL;
}

/* Elementwise and general loop nests: a thread per element of the innermost axis. */
static void render_loop(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Stage *st = &ck->kn->stages[0];
  Buf *o = r->o;
  int na = st->naxes, inner = st->axes[na - 1];
  bool v4 = v->kind == V_LOOP4;
  const char *in = cp->aname[inner];
  DynElem ot = r->p->slots[st->out].type.elem;
  buf_printf(o, "/* %s, variant %s:\n", ck->base, v4 ? "loop4" : "loop");
  if (na > 1) {
    buf_printf(o, " *   grid:   blocks over (rows of ");
    axes_list(cp, st->axes, na - 1, o);
    buf_printf(o, ") x (%s), grid-stride in both\n", r->p->axes[inner].name);
  } else {
    buf_printf(o, " *   grid:   blocks over %s, grid-stride\n", r->p->axes[inner].name);
  }
  buf_printf(o, " *   block:  256 threads, blockDim.x along %s, blockDim.y along the rows (the host fits them to the shape)\n",
             r->p->axes[inner].name);
  if (v4)
    buf_printf(o, " *   thread: four consecutive elements of %s, 16-byte loads and stores where the last axis is\n"
                  " *           contiguous (the host checks the alignment) */\n", r->p->axes[inner].name);
  else
    buf_printf(o, " *   thread: one element of %s; reductions run in the thread */\n", r->p->axes[inner].name);
  kernel_open(r, v, 1);
  reset_axes(r);
  buf_printf(o, "  const i64 nrows_ = %s;\n", ext_product(r, st->axes, na - 1));
  buf_puts(o, "  for (i64 row_ = (i64)blockIdx.y * blockDim.y + threadIdx.y; row_ < nrows_; row_ += (i64)gridDim.y * blockDim.y) {\n");
  decompose(r, st->axes, na - 1, "row_", 4);
  const char *subs[2 * DYN_MAX_RANK];
  for (int k = 0; k < na; k++) subs[k] = cp->aname[st->axes[k]];
  if (!v4) {
    buf_printf(o, "    for (i64 %s = (i64)blockIdx.x * blockDim.x + threadIdx.x; %s < %s; %s += (i64)gridDim.x * blockDim.x) {\n",
               in, in, ext_of(r, inner), in);
    r->ax[inner] = in;
    stage_comment(r, ck->kn, st, 6, NULL);
    const char *val = ex_str(r, st->expr);
    indent(o, 6);
    store_text(r, st->out, subs, na, val, st->expr->ty, o);
    buf_puts(o, "\n    }\n  }\n");
  } else {
    buf_printf(o, "    for (i64 %s4_ = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 4; %s4_ < %s; %s4_ += (i64)gridDim.x * blockDim.x * 4) {\n",
               in, in, ext_of(r, inner), in);
    const char *base = arena_printf(cp->ar, "%s4_", in);
    /* the 16-byte loads, hoisted out of the four lanes */
    r->ax[inner] = base;
    const KExpr *stack[1024];
    int sp = 0, nv = 0;
    const char *keys[64], *names[64];
    stack[sp++] = st->expr;
    while (sp) {
      const KExpr *e = stack[--sp];
      if (vec_load(cp, e, inner)) {
        const char *ss[2 * DYN_MAX_RANK];
        for (int k = 0; k < e->n; k++) ss[k] = ex_as_str(r, e->a[k], DYN_I64);
        Buf off = {0};
        offset_text(r, e->slot, ss, e->n, &off);
        const char *key = arena_printf(cp->ar, "%d:%s", e->slot, off.s);
        int found = -1;
        for (int i = 0; i < nv; i++)
          if (!strcmp(keys[i], key)) found = i;
        if (found < 0 && nv < 64) {
          DynElem t = r->p->slots[e->slot].type.elem;
          const char *vt = t == DYN_F32 ? "float4" : "int4";
          keys[nv] = key;
          names[nv] = arena_printf(cp->ar, "v%d_", nv);
          indent(o, 6);
          buf_printf(o, "const %s %s = __ldg((const %s *)&a.%s[%s]);\n", vt, names[nv], vt, field_name(ck, F_PTR, e->slot, 0, NULL), off.s);
          found = nv++;
        }
        buf_free(&off);
        if (found >= 0) r->sub[e->id] = arena_printf(cp->ar, "dyn_lane(%s, l_)", names[found]);
        continue;
      }
      if (e->kind == KX_REDUCE) continue;
      int n = e->kind == KX_SELECT ? 1 : e->n;
      for (int i = n - 1; i >= 0 && sp < 1024; i--) stack[sp++] = e->a[i];
    }
    indent(o, 6);
    buf_printf(o, "%s y_[4];\n", cty(ot));
    buf_puts(o, "#pragma unroll\n      for (int l_ = 0; l_ < 4; l_++) {\n");
    buf_printf(o, "        const i64 %s = %s + l_;\n", in, base);
    r->ax[inner] = in;
    stage_comment(r, ck->kn, st, 8, NULL);
    indent(o, 8);
    buf_puts(o, "y_[l_] = ");
    cast_text(o, st->expr->ty, ot, ex_str(r, st->expr));
    buf_puts(o, ";\n      }\n");
    subs[na - 1] = base;
    Buf off = {0};
    offset_text(r, st->out, subs, na, &off);
    indent(o, 6);
    buf_printf(o, "*(%s *)&a.%s[%s] = make_%s(y_[0], y_[1], y_[2], y_[3]);\n", ot == DYN_F32 ? "float4" : "int4",
               field_name(ck, F_PTR, st->out, 0, NULL), off.s, ot == DYN_F32 ? "float4" : "int4");
    buf_free(&off);
    buf_puts(o, "    }\n  }\n");
    for (int i = 0; i < cp->p->nkx; i++) r->sub[i] = NULL;
  }
  kernel_close(r);
}

/* A reduction shared by the `lanes` threads of a row: a strided loop per thread, then
 * dyn_row_reduce.  The result is in the register r<id>_. */
static void render_coop(Rd *r, const KExpr *e, int lanes, int rows, const char *lane, const char *stride, int ind) {
  CudaProgram *cp = r->cp;
  Buf *o = r->o;
  DynElem at = acc_ty(e->ty);
  const char *res = arena_printf(cp->ar, "r%d_", e->id), *acc = arena_printf(cp->ar, "acc%d_", e->id);
  indent(o, ind);
  buf_printf(o, "%s %s;\n", cty(at), res);
  indent(o, ind);
  buf_puts(o, "{\n");
  indent(o, ind + 2);
  buf_printf(o, "%s %s = ", cty(at), acc);
  red_init_text(o, e->red, at);
  buf_puts(o, ";\n");
  if (e->nraxes == 1) {
    const char *nm = cp->aname[e->raxes[0]];
    indent(o, ind + 2);
    buf_printf(o, "for (i64 %s = %s; %s < %s; %s += %s)\n", nm, lane, nm, ext_of(r, e->raxes[0]), nm, stride);
    r->ax[e->raxes[0]] = nm;
    indent(o, ind + 4);
    buf_printf(o, "%s = %s::op(%s, %s);\n", acc, red_op(e->red), acc, ex_as_str(r, e->a[0], at));
  } else {
    indent(o, ind + 2);
    buf_printf(o, "for (i64 t_ = %s; t_ < %s; t_ += %s) {\n", lane, ext_product(r, e->raxes, e->nraxes), stride);
    decompose(r, e->raxes, e->nraxes, "t_", ind + 4);
    indent(o, ind + 4);
    buf_printf(o, "%s = %s::op(%s, %s);\n", acc, red_op(e->red), acc, ex_as_str(r, e->a[0], at));
    indent(o, ind + 2);
    buf_puts(o, "}\n");
  }
  for (int i = 0; i < e->nraxes; i++) r->ax[e->raxes[i]] = NULL;
  indent(o, ind + 2);
  if (lanes > 32) buf_printf(o, "%s = dyn_row_reduce<%s, %d, %d>(%s, red_%s_);\n", res, red_op(e->red), lanes, rows, acc, cty(at));
  else buf_printf(o, "%s = dyn_row_reduce<%s, %d, %d>(%s, (%s *)0);\n", res, red_op(e->red), lanes, rows, acc, cty(at));
  indent(o, ind);
  buf_puts(o, "}\n");
  r->sub[e->id] = acc_ty(e->ty) == e->ty ? res : arena_printf(cp->ar, "(%s)%s", cty(e->ty), res);
}

/* Does a stage after `s` read slot `slot` from memory (not from a register)? */
static bool read_later(Rd *r, const Kernel *kn, int s, int slot) {
  for (int t = s + 1; t < kn->nstages; t++) {
    const KExpr *stack[1024];
    int sp = 0;
    stack[sp++] = kn->stages[t].expr;
    while (sp) {
      const KExpr *e = stack[--sp];
      if (e->kind == KX_LOAD && e->slot == slot && !(r->reg[slot] && row_subscripts(r->ck, e))) return true;
      if (e->kind == KX_LOAD && r->cp->inl[e->slot] && sp < 1024) stack[sp++] = r->cp->def[e->slot]->expr;
      for (int i = 0; i < e->n && sp < 1024; i++) stack[sp++] = e->a[i];
    }
  }
  return false;
}

static void collect_coop_types(const KExpr *e, bool *types) {
  const KExpr *co[64];
  int n = 0;
  find_coop(e, co, &n, 64);
  for (int i = 0; i < n && i < 64; i++) types[acc_ty(co[i]->ty)] = true;
}

/* Row-wise kernels and reductions along an axis: LANES threads per row, ROWS rows per block. */
static void render_row(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Kernel *kn = ck->kn;
  Buf *o = r->o;
  int L = v->lanes, RW = v->rows;
  const char *bar = L <= 32 ? "__syncwarp();" : "__syncthreads();";
  buf_printf(o, "/* %s, variant %s:\n *   grid:   blocks over the rows (", ck->base, v->kind == V_WARP ? "warp" : v->kind == V_BLOCK256 ? "block256" : "block1024");
  if (ck->nouter) axes_list(cp, ck->outer, ck->nouter, o);
  else buf_puts(o, "one row");
  buf_puts(o, "), grid-stride\n");
  if (RW > 1) buf_printf(o, " *   block:  %d rows of %d threads (threadIdx.y: the row, threadIdx.x: the lane)\n", RW, L);
  else buf_printf(o, " *   block:  one row of %d threads\n", L);
  buf_printf(o, " *   warp:   reductions by butterfly shuffles%s\n", L > 32 ? ", then one slot per warp in shared memory" : "");
  buf_puts(o, " *   thread: per-row scalars in registers; elements strided by the row's threads */\n");
  kernel_open(r, v, 1);
  reset_axes(r);
  for (int i = 0; i < r->p->nslots; i++) r->reg[i] = NULL;
  bool types[DYN_NELEM] = {0};
  for (int s = 0; s < kn->nstages; s++)
    if (ck->virt || kn->stages[s].naxes == 0) collect_coop_types(kn->stages[s].expr, types);
  if (L > 32)
    for (int t = 0; t < DYN_NELEM; t++)
      if (types[t]) buf_printf(o, "  __shared__ %s red_%s_[%d];\n", cty((DynElem)t), cty((DynElem)t), RW * (L / 32));
  buf_printf(o, "  const i64 nrows_ = %s;\n", ext_product(r, ck->outer, ck->nouter));
  buf_puts(o, "  const int lane_ = threadIdx.x;\n");
  if (RW > 1) {
    buf_printf(o, "  for (i64 g_ = blockIdx.x; g_ * %d < nrows_; g_ += gridDim.x) {\n", RW);
    buf_printf(o, "    const i64 row_ = g_ * %d + threadIdx.y;\n", RW);
    buf_puts(o, "    const bool live_ = row_ < nrows_;   /* the last group's spare rows redo the last row, store nothing */\n");
    if (ck->err) buf_puts(o, "    const int bad0_ = bad_;            /* and report no error */\n");
    if (ck->nouter) decompose(r, ck->outer, ck->nouter, "(live_ ? row_ : nrows_ - 1)", 4);
  } else {
    buf_puts(o, "  for (i64 g_ = blockIdx.x; g_ < nrows_; g_ += gridDim.x) {\n");
    if (ck->nouter) decompose(r, ck->outer, ck->nouter, "g_", 4);
  }
  const char *stride = arena_printf(cp->ar, "%d", L);
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    int naxes = ck->virt ? 0 : st->naxes;
    const char *subs[2 * DYN_MAX_RANK];
    int ns = 0;
    for (int i = 0; i < ck->nouter; i++) subs[ns++] = cp->aname[ck->outer[i]];
    if (!ck->virt)
      for (int i = 0; i < st->naxes; i++) subs[ns++] = cp->aname[st->axes[i]];
    if (cp->inl[st->out]) {
      stage_comment(r, kn, st, 4, "recomputed where it is read");
      continue;
    }
    if (naxes == 0) {
      bool is_reg = !cp->buf[st->out];
      stage_comment(r, kn, st, 4, is_reg ? "a register per row" : "one value per row");
      const KExpr *co[64];
      int nco = 0;
      find_coop(st->expr, co, &nco, 64);
      for (int i = 0; i < nco && i < 64; i++) render_coop(r, co[i], L, RW, "lane_", stride, 4);
      const char *val = ex_str(r, st->expr);
      const char *name = arena_printf(cp->ar, "%s_", cp->sname[st->out]);
      DynElem t = r->p->slots[st->out].type.elem;
      indent(o, 4);
      buf_printf(o, "const %s %s = ", cty(t), name);
      cast_text(o, st->expr->ty, t, val);
      buf_puts(o, ";\n");
      r->reg[st->out] = name;
      if (!is_reg) {
        indent(o, 4);
        buf_printf(o, "if (%slane_ == 0) ", RW > 1 ? "live_ && " : "");
        store_text(r, st->out, subs, ns, name, t, o);
        buf_putc(o, '\n');
        if (read_later(r, kn, s, st->out)) {
          indent(o, 4);
          buf_printf(o, "%s\n", bar);
        }
      }
      for (int i = 0; i < nco && i < 64; i++) r->sub[co[i]->id] = NULL;
    } else {
      stage_comment(r, kn, st, 4, NULL);
      int ind = 4;
      for (int i = 0; i < naxes; i++) {
        const char *nm = cp->aname[st->axes[i]];
        indent(o, ind);
        if (i < naxes - 1) buf_printf(o, "for (i64 %s = 0; %s < %s; %s++)\n", nm, nm, ext_of(r, st->axes[i]), nm);
        else buf_printf(o, "for (i64 %s = lane_; %s < %s; %s += %d) {\n", nm, nm, ext_of(r, st->axes[i]), nm, L);
        r->ax[st->axes[i]] = nm;
        ind += 2;
      }
      const char *val = ex_str(r, st->expr);
      indent(o, ind);
      if (RW > 1) buf_puts(o, "if (live_) ");
      store_text(r, st->out, subs, ns, val, st->expr->ty, o);
      buf_putc(o, '\n');
      indent(o, 4 + 2 * (naxes - 1));
      buf_puts(o, "}\n");
      for (int i = 0; i < naxes; i++) r->ax[st->axes[i]] = NULL;
      if (read_later(r, kn, s, st->out)) {
        indent(o, 4);
        buf_printf(o, "%s\n", bar);
      }
    }
  }
  if (RW > 1 && ck->err) buf_puts(o, "    if (!live_) bad_ = bad0_;\n");
  buf_puts(o, "  }\n");
  kernel_close(r);
}

/* A reduction to one value over the whole grid: partial results per block, the last block
 * (an atomic ticket) combines them in block order and finishes the expression. */
static void render_grid(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Stage *st = &ck->kn->stages[0];
  const KExpr *R = ck->coop;
  Buf *o = r->o;
  DynElem at = acc_ty(R->ty);
  const char *T = cty(at);
  buf_printf(o, "/* %s, variant grid:\n", ck->base);
  buf_puts(o, " *   grid:   every block strides over the whole reduction, writes one partial result; the last block\n"
              " *           to finish (an atomic ticket) combines them in block order: deterministic, one launch\n"
              " *   block:  256 threads, combined by butterfly shuffles, then shared memory */\n");
  kernel_open(r, v, 1);
  reset_axes(r);
  buf_printf(o, "  __shared__ %s red_%s_[8];\n  __shared__ bool last_;\n", T, T);
  buf_printf(o, "  %s acc_ = ", T);
  red_init_text(o, R->red, at);
  buf_puts(o, ";\n");
  stage_comment(r, ck->kn, st, 2, NULL);
  if (R->nraxes == 1) {
    const char *nm = cp->aname[R->raxes[0]];
    buf_printf(o, "  for (i64 %s = (i64)blockIdx.x * 256 + threadIdx.x; %s < %s; %s += (i64)gridDim.x * 256)\n", nm, nm,
               ext_of(r, R->raxes[0]), nm);
    r->ax[R->raxes[0]] = nm;
    buf_printf(o, "    acc_ = %s::op(acc_, %s);\n", red_op(R->red), ex_as_str(r, R->a[0], at));
  } else {
    buf_printf(o, "  for (i64 t_ = (i64)blockIdx.x * 256 + threadIdx.x; t_ < %s; t_ += (i64)gridDim.x * 256) {\n",
               ext_product(r, R->raxes, R->nraxes));
    decompose(r, R->raxes, R->nraxes, "t_", 4);
    buf_printf(o, "    acc_ = %s::op(acc_, %s);\n  }\n", red_op(R->red), ex_as_str(r, R->a[0], at));
  }
  for (int i = 0; i < R->nraxes; i++) r->ax[R->raxes[i]] = NULL;
  buf_printf(o, "  acc_ = dyn_row_reduce<%s, 256, 1>(acc_, red_%s_);\n", red_op(R->red), T);
  buf_printf(o, "  unsigned *ticket_ = (unsigned *)a.ws;\n  %s *part_ = (%s *)((char *)a.ws + 16);\n", T, T);
  buf_puts(o, "  if (threadIdx.x == 0) {\n    part_[blockIdx.x] = acc_;\n    __threadfence();\n"
              "    last_ = atomicAdd(ticket_, 1u) == gridDim.x - 1;\n  }\n  __syncthreads();\n  if (last_) {\n    __threadfence();\n");
  buf_printf(o, "    %s v_ = ", T);
  red_init_text(o, R->red, at);
  buf_puts(o, ";\n");
  buf_printf(o, "    for (unsigned i_ = threadIdx.x; i_ < gridDim.x; i_ += 256) v_ = %s::op(v_, ((volatile %s *)part_)[i_]);\n",
             red_op(R->red), T);
  buf_printf(o, "    v_ = dyn_row_reduce<%s, 256, 1>(v_, red_%s_);\n", red_op(R->red), T);
  buf_puts(o, "    if (threadIdx.x == 0) {\n");
  r->sub[R->id] = at == R->ty ? "v_" : arena_printf(cp->ar, "(%s)v_", cty(R->ty));
  DynElem t = r->p->slots[st->out].type.elem;
  buf_printf(o, "      const %s res_ = ", cty(t));
  cast_text(o, st->expr->ty, t, ex_str(r, st->expr));
  buf_puts(o, ";\n      ");
  store_text(r, st->out, NULL, 0, "res_", t, o);
  buf_puts(o, "\n      *ticket_ = 0;               /* ready for the next launch */\n    }\n  }\n");
  r->sub[R->id] = NULL;
  kernel_close(r);
}

static const char *stride_text(Rd *r, int slot, int pos) {
  if (pos < 0) return "0";
  if (pos == r->p->slots[slot].type.rank - 1) return "1";
  return arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_STRIDE, slot, pos, NULL));
}

/* The epilogue of a contraction at (b, i, j) with the sum in `acc`: the rest of the stage. */
static void gemm_epilogue(Rd *r, const char *acc, int ind) {
  CK *ck = r->ck;
  const Stage *st = &ck->kn->stages[0];
  const char *subs[3];
  int ns = 0;
  for (int k = 0; k < st->naxes; k++) subs[ns++] = r->cp->aname[st->axes[k]];
  r->sub[ck->red->id] = acc;
  const char *val = ex_str(r, st->expr);
  r->sub[ck->red->id] = NULL;
  indent(r->o, ind);
  store_text(r, st->out, subs, ns, val, st->expr->ty, r->o);
  buf_putc(r->o, '\n');
}

static void render_gemm(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  const Program *p = r->p;
  int ns;
  const GemmShape *g = &gemm_shapes(ck->math, ck->et, &ns)[v->gemm];
  Buf *o = r->o;
  int th = v->threads;
  bool tc = ck->math != CUDA_EXACT, bf = ck->math == CUDA_BF16, f64 = ck->et == DYN_F64;
  const char *T = cty(ck->et);
  bool sb_kc = tc ? ck->b_kc : ck->b_kc && !ck->a_kc;
  buf_printf(o, "/* %s, variant %s%dx%d: the contraction over %s of %s (%s) and %s (%s)\n", ck->base, tc ? (bf ? "bf16_" : "tf32_") : "",
             g->bm, g->bn, p->axes[ck->kax].name, p->slots[ck->ga].name, ck->a_kc ? "k contiguous" : "m contiguous",
             p->slots[ck->gb].name, ck->b_kc ? "k contiguous" : "n contiguous");
  buf_printf(o, " *   grid:   a block per %dx%d tile of %s and batch (x), numbered in groups of 8 tile-rows (they\n"
                " *           share B in L2); parts of a split K along z\n", g->bm, g->bn, p->slots[ck->gc].name);
  if (tc) {
    int wtm = g->bm / g->wm, wtn = g->bn / g->wn;
    buf_printf(o, " *   block:  %d threads, %dx%d warps; f32 tiles of A (%s) and B (%s) of depth %d in shared memory,\n"
                  " *           two buffers\n", th, g->wm, g->wn, ck->a_kc ? "m x k" : "k x m", sb_kc ? "n x k" : "k x n", g->bk);
    buf_printf(o, " *   warp:   a %dx%d tile of %s: %dx%d mma.sync.m16n8k%d tiles, operands rounded from f32 to %s\n"
                  " *           (%s) as they are read, f32 accumulators\n", wtm, wtn, p->slots[ck->gc].name, wtm / 16, wtn / 8,
               bf ? 16 : 8, bf ? "bf16" : "tf32", bf ? "nearest even, 7 bits of mantissa" : "nearest, 10 bits of mantissa");
    buf_printf(o, " *   thread: %dx%d outputs in registers, rows g and g + 8, columns 2t and 2t + 1 of each mma tile\n"
                  " *           (g = lane / 4, t = lane %% 4); edges bounds-checked */\n", g->tm, g->tn);
  } else {
    buf_printf(o, " *   block:  %d threads; tiles of A (%s) and B (%s) of depth %d in shared memory, two buffers\n", th,
               ck->a_kc ? "m x k" : "k x m", sb_kc ? "n x k" : "k x n", g->bk);
    buf_printf(o, " *   thread: %dx%d outputs in registers, exact %s FMA; edges bounds-checked */\n", g->tm, g->tn, f64 ? "f64" : "f32");
  }
  int minb = g->tm * g->tn >= 64 ? 65536 / (128 * th) : 1;
  kernel_open(r, v, minb);
  reset_axes(r);
  if (tc)
    buf_printf(o, "  typedef DynMma<%d, %d, %d, %d, %d, %s, %s, %s> G;\n", g->bm, g->bn, g->bk, g->wm, g->wn, ck->a_kc ? "true" : "false",
               ck->b_kc ? "true" : "false", bf ? "true" : "false");
  else
    buf_printf(o, "  typedef DynGemm<%d, %d, %d, %d, %d, %s, %s%s> G;\n", g->bm, g->bn, g->bk, g->tm, g->tn, ck->a_kc ? "true" : "false",
               ck->b_kc ? "true" : "false", f64 ? ", double" : "");
  buf_printf(o, "  __shared__ __align__(16) %s sa_[2 * G::ATILE], sb_[2 * G::BTILE];\n", T);
  buf_printf(o, "  const i64 M_ = %s, N_ = %s, K_ = %s, nb_ = %s;\n", ext_of(r, ck->max), ext_of(r, ck->nax), ext_of(r, ck->kax),
             ck->bax >= 0 ? ext_of(r, ck->bax) : "1");
  buf_printf(o, "  const unsigned tm_ = (unsigned)((M_ + %d) / %d), tn_ = (unsigned)((N_ + %d) / %d);\n", g->bm - 1, g->bm, g->bn - 1, g->bn);
  buf_puts(o, "  const unsigned pid_ = blockIdx.x % (tm_ * tn_), first_ = pid_ / (8 * tn_) * 8;\n"
              "  const unsigned gsz_ = tm_ - first_ < 8 ? tm_ - first_ : 8;\n");
  buf_printf(o, "  const i64 m0_ = (i64)(first_ + pid_ %% gsz_) * %d, n0_ = (i64)(pid_ %% (8 * tn_) / gsz_) * %d;\n", g->bm, g->bn);
  buf_printf(o, "  const i64 kc_ = ((K_ + a.splits - 1) / a.splits + %d) / %d * %d;\n", g->bk - 1, g->bk, g->bk);
  buf_puts(o, "  const i64 k0_ = (i64)blockIdx.z * kc_, k1_ = k0_ + kc_ < K_ ? k0_ + kc_ : K_;\n");
  buf_puts(o, "  const int tx_ = G::tx(), ty_ = G::ty();\n");
  const char *bv = ck->bax >= 0 ? cp->aname[ck->bax] : "bz_";
  if (ck->bax >= 0) r->ax[ck->bax] = bv;
  buf_printf(o, "  {\n    const i64 %s = blockIdx.x / (tm_ * tn_);     /* the batch */\n", bv);
  buf_printf(o, "    %s acc_[%d][%d];\n", T, g->tm, g->tn);
  buf_printf(o, "#pragma unroll\n    for (int ii_ = 0; ii_ < %d; ii_++)\n#pragma unroll\n      for (int jj_ = 0; jj_ < %d; jj_++) acc_[ii_][jj_] = %s;\n",
             g->tm, g->tn, f64 ? "0.0" : "0.0f");
  buf_printf(o, "    dyn_gemm_run<G>(acc_, sa_, sb_, a.%s + %s * %s, a.%s + %s * %s, m0_, n0_, k0_, k1_, M_, N_,\n",
             field_name(ck, F_PTR, ck->ga, 0, NULL), bv, stride_text(r, ck->ga, ck->apos[0]),
             field_name(ck, F_PTR, ck->gb, 0, NULL), bv, stride_text(r, ck->gb, ck->bpos[0]));
  buf_printf(o, "                    %s, %s, %s, %s, a.a_vec != 0, a.b_vec != 0);\n", stride_text(r, ck->ga, ck->apos[1]),
             stride_text(r, ck->ga, ck->apos[2]), stride_text(r, ck->gb, ck->bpos[1]), stride_text(r, ck->gb, ck->bpos[2]));
  const char *mi = cp->aname[ck->max], *nj = cp->aname[ck->nax];
  r->ax[ck->max] = mi;
  r->ax[ck->nax] = nj;
  buf_printf(o, "#pragma unroll\n    for (int ii_ = 0; ii_ < %d; ii_++) {\n", g->tm);
  buf_printf(o, "      const i64 %s = m0_ + G::row(ty_, ii_);\n      if (%s >= M_) continue;\n", mi, mi);
  buf_printf(o, "#pragma unroll\n      for (int jj_ = 0; jj_ < %d; jj_++) {\n", g->tn);
  buf_printf(o, "        const i64 %s = n0_ + G::col(tx_, jj_);\n        if (%s >= N_) continue;\n", nj, nj);
  buf_printf(o, "        if (a.splits > 1)\n          ((%s *)a.ws)[(((i64)blockIdx.z * nb_ + %s) * M_ + %s) * N_ + %s] = acc_[ii_][jj_];\n", T, bv, mi, nj);
  buf_puts(o, "        else\n");
  stage_comment(r, ck->kn, &ck->kn->stages[0], 10, NULL);
  gemm_epilogue(r, "acc_[ii_][jj_]", 10);
  buf_puts(o, "      }\n    }\n  }\n");
  kernel_close(r);
}

/* The sum of a split K's partial tiles, in order, then the epilogue. */
static void render_splitk(Rd *r, const Var *v) {
  CK *ck = r->ck;
  CudaProgram *cp = r->cp;
  Buf *o = r->o;
  buf_printf(o, "/* %s, variant splitk: the partial tiles of a split K summed in order (deterministic), then the\n"
                " * rest of the expression; a thread per element, as the loop kernels */\n", ck->base);
  kernel_open(r, v, 1);
  reset_axes(r);
  const char *bv = ck->bax >= 0 ? cp->aname[ck->bax] : "bz_";
  const char *mi = cp->aname[ck->max], *nj = cp->aname[ck->nax];
  buf_printf(o, "  const i64 M_ = %s, N_ = %s, nb_ = %s;\n", ext_of(r, ck->max), ext_of(r, ck->nax), ck->bax >= 0 ? ext_of(r, ck->bax) : "1");
  const char *T = cty(ck->et);
  buf_printf(o, "  const %s *ws_ = (const %s *)a.ws;\n", T, T);
  buf_puts(o, "  for (i64 row_ = (i64)blockIdx.y * blockDim.y + threadIdx.y; row_ < nb_ * M_; row_ += (i64)gridDim.y * blockDim.y) {\n");
  buf_printf(o, "    const i64 %s = row_ / M_, %s = row_ %% M_;\n", bv, mi);
  buf_printf(o, "    for (i64 %s = (i64)blockIdx.x * blockDim.x + threadIdx.x; %s < N_; %s += (i64)gridDim.x * blockDim.x) {\n", nj, nj, nj);
  buf_printf(o, "      %s s_ = %s;\n", T, ck->et == DYN_F64 ? "0.0" : "0.0f");
  buf_printf(o, "      for (i64 z_ = 0; z_ < a.splits; z_++) s_ += ws_[((z_ * nb_ + %s) * M_ + %s) * N_ + %s];\n", bv, mi, nj);
  if (ck->bax >= 0) r->ax[ck->bax] = bv;
  r->ax[ck->max] = mi;
  r->ax[ck->nax] = nj;
  gemm_epilogue(r, "s_", 6);
  buf_puts(o, "    }\n  }\n");
  kernel_close(r);
}

static void render_program(CudaProgram *cp) {
  const Program *p = cp->p;
  Buf *o = &cp->src;
  buf_printf(o, "/* dyn: CUDA C for %s, rendered for %s (%s: compute capability %d.%d, %d SMs).\n"
                " * Generated by src/cuda.c.  Every size, extent and stride is an argument: one module serves\n"
                " * every shape; the host picks a variant per kernel and shape with the model in cuda.c.",
             p->name, cp->hw.name, cp->hw.desc, cp->hw.cc_major, cp->hw.cc_minor, cp->hw.sm_count);
  CudaMath on = cuda_math_on(&cp->hw, cp->math);
  bool gemm = false;
  for (int k = 0; k < cp->nk; k++) gemm = gemm || cp->k[k].kind == CK_GEMM;
  /* the arithmetic asked for changes only a module with a contraction */
  if (gemm && on != CUDA_EXACT)
    buf_printf(o, "\n * f32 contractions in %s on the tensor cores (mma.sync); everything else exact.", cuda_math_name(on));
  else if (gemm && cp->math != CUDA_EXACT)
    buf_printf(o, "\n * f32 contractions exact: %s was asked for, but the tensor cores take it from compute capability 8.0.",
               cuda_math_name(cp->math));
  buf_puts(o, " */\n\n");
  buf_puts(o, PRELUDE);
  if (gemm && on != CUDA_EXACT) buf_puts(o, PRELUDE_MMA);
  Rd r = {0};
  r.cp = cp;
  r.p = p;
  r.o = o;
  r.ax = xcalloc((size_t)p->naxes + 1, sizeof(char *));
  r.sub = xcalloc((size_t)p->nkx + 1, sizeof(char *));
  r.reg = xcalloc((size_t)p->nslots + 1, sizeof(char *));
  r.wr = xcalloc((size_t)p->nslots + 1, 1);
  static const char *kinds[] = {"a loop nest", "row-wise", "a reduction to one value", "a contraction"};
  for (int k = 0; k < cp->nk; k++) {
    CK *ck = &cp->k[k];
    r.ck = ck;
    memset(r.wr, 0, (size_t)p->nslots + 1);
    for (int s = 0; s < ck->kn->nstages; s++)
      if (cp->buf[ck->kn->stages[s].out]) r.wr[ck->kn->stages[s].out] = true;
    buf_printf(o, "\n/* ==== kernel %s: %s", ck->kn->name, kinds[ck->kind]);
    if (ck->kind == CK_ROW) {
      buf_puts(o, " over ");
      axes_list(cp, ck->outer, ck->nouter, o);
      buf_printf(o, ", %d stages fused", ck->kn->nstages);
    }
    if (ck->kind == CK_LOOP && ck->virt) buf_puts(o, " with a reduction along an axis");
    buf_puts(o, " ==== */\n\n");
    render_args(&r);
    for (int i = 0; i < ck->nv; i++) {
      const Var *v = &ck->v[i];
      switch (v->kind) {
      case V_LOOP: case V_LOOP4: render_loop(&r, v); break;
      case V_WARP: case V_BLOCK256: case V_BLOCK1024: render_row(&r, v); break;
      case V_GRID: render_grid(&r, v); break;
      case V_GEMM: render_gemm(&r, v); break;
      default: render_splitk(&r, v); break;
      }
    }
  }
  free(r.ax);
  free(r.sub);
  free(r.reg);
  free(r.wr);
}

static void program_free(CudaProgram *cp) {
  if (!cp) return;
  for (int k = 0; k < cp->nk; k++) free(cp->k[k].f);
  free(cp->k);
  buf_free(&cp->src);
  free(cp->ptx);
  arena_free(cp->ar);
  free(cp);
}

CudaProgram *cuda_program_new(const Program *p, const HwModel *hw, CudaMath math) {
  CudaProgram *cp = xcalloc(1, sizeof *cp);
  cp->p = p;
  cp->hw = *hw;
  cp->math = math;
  cp->ar = arena_new();
  analyse(cp);
  render_program(cp);
  return cp;
}

void cuda_program_free(CudaProgram *cp) { program_free(cp); }

const char *cuda_program_source(const CudaProgram *cp) { return cp->src.s ? cp->src.s : ""; }

void cuda_render(const Program *p, const HwModel *hw, CudaMath math, Buf *cuda_src) {
  CudaProgram *cp = cuda_program_new(p, hw, math);
  buf_puts(cuda_src, cuda_program_source(cp));
  program_free(cp);
}

/* ---- compiling: NVRTC to PTX ---------------------------------------------------------------- */

/* The newest architecture NVRTC supports that is not newer than cc (the PTX then runs there
 * and on every later GPU); the oldest it supports if cc is older than all of them. */
static int pick_arch(int cc) {
  int n = 0;
  if (R.nvrtcGetNumSupportedArchs(&n) != 0 || n <= 0 || n > 256) return cc;
  int archs[256];
  if (R.nvrtcGetSupportedArchs(archs) != 0) return cc;
  int best = -1, lowest = archs[0];
  for (int i = 0; i < n; i++) {
    if (archs[i] <= cc && archs[i] > best) best = archs[i];
    if (archs[i] < lowest) lowest = archs[i];
  }
  return best > 0 ? best : lowest;
}

bool cuda_compile_ptx(const char *src, int cc_major, int cc_minor, Buf *ptx, char *err, size_t errlen) {
  if (!have_nvrtc(err, errlen)) return false;
  int arch = pick_arch(cc_major * 10 + cc_minor);
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=compute_%d", arch);
  const char *opts[] = {archopt, "-std=c++17"};
  nvrtcProgram prog = NULL;
  nvrtcResult rc = R.nvrtcCreateProgram(&prog, src, "dyn.cu", 0, NULL, NULL);
  if (rc != 0) {
    snprintf(err, errlen, "NVRTC: %s", R.nvrtcGetErrorString(rc));
    return false;
  }
  rc = R.nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
  if (rc != 0) {
    size_t n = 0;
    R.nvrtcGetProgramLogSize(prog, &n);
    char *log = xcalloc(n + 1, 1);
    if (n) R.nvrtcGetProgramLog(prog, log);
    snprintf(err, errlen, "internal error: NVRTC rejected the generated CUDA C (%s): %.1500s", R.nvrtcGetErrorString(rc), log);
    free(log);
    R.nvrtcDestroyProgram(&prog);
    return false;
  }
  size_t n = 0;
  R.nvrtcGetPTXSize(prog, &n);
  char *text = xcalloc(n + 1, 1);
  R.nvrtcGetPTX(prog, text);
  buf_puts(ptx, text);
  free(text);
  R.nvrtcDestroyProgram(&prog);
  return true;
}

/* ---- the model: choosing a variant and a launch per kernel and shape ----------------------- */

static int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

static const HwLevel *gpu_level(const HwModel *hw, const char *name) {
  for (int i = 0; i < hw->nlevels; i++)
    if (!strcmp(hw->level[i].name, name)) return &hw->level[i];
  return NULL;
}

static double mem_bw(const HwModel *hw) {
  const HwLevel *m = hw->nlevels ? &hw->level[hw->nlevels - 1] : NULL;
  return m && m->gbs > 0 ? m->gbs * 1e9 : 1e12;
}

static double peak_flops(const HwModel *hw) {
  double p = hw->peak_gflops_f32 > 0 ? hw->peak_gflops_f32 * 1e9 : hw->fp32_tflops * 1e12;
  return p > 0 ? p : 1e13;
}

/* The peak of the units a contraction's tiles run on: the CUDA cores, or the tensor cores'
 * dense tf32 or bf16 rate (hw/README.md: tf32_tflops, bf16_tflops). */
static double math_peak(const HwModel *hw, CudaMath m) {
  double t = m == CUDA_TF32 ? hw->tf32_tflops : m == CUDA_BF16 ? hw->bf16_tflops : 0;
  return t > 0 ? t * 1e12 : peak_flops(hw);
}

/* The padding of a tile's rows, as the prelude's DynGemm and DynMma have it: 4 floats, or on
 * the tensor cores 8 where tf32 reads across rows or bf16 along them (against bank conflicts). */
static int gemm_pad(CudaMath m, bool kc) {
  if (m == CUDA_EXACT) return 4;
  return (m == CUDA_BF16) == kc ? 8 : 4;
}

/* Shared memory of a tile shape (two buffers of A and B of es-byte elements, rows padded). */
static int gemm_smem(const GemmShape *g, CudaMath m, int es, bool a_kc, bool b_kc) {
  bool sb_kc = m == CUDA_EXACT ? b_kc && !a_kc : b_kc;
  int a = (a_kc ? g->bm : g->bk) * ((a_kc ? g->bk : g->bm) + gemm_pad(m, a_kc));
  int b = (sb_kc ? g->bn : g->bk) * ((sb_kc ? g->bk : g->bn) + gemm_pad(m, sb_kc));
  return 2 * (a + b) * es;
}

#define GEMM_BLOCK_CYCLES 2000.0    /* a wave's pipeline fill and epilogue */
#define GEMM_SPLIT_CYCLES 6000.0    /* the launch of the split-K sum */

/* Registers per thread: the driver's count once loaded, else what the kernels are compiled
 * to (__launch_bounds__ holds tiles of 64 accumulators to 128; ptxas gives the smaller ones
 * about 80). */
static int gemm_regs_guess(const GemmShape *g) { return g->tm * g->tn >= 64 ? 128 : 80; }

/* Predicted seconds of one tile shape and split on hw, its tiles computing in math on es-byte
 * elements (f64 at the f32 peak: the hw files carry no f64 figure, which makes the times of
 * f64 tiles comparable with each other, not with other kernels'):
 *   compute: the busiest SM's blocks x FLOPs per block (padded to whole tiles and k-steps) at
 *            the SM's share of the peak of the CUDA cores or the tensor cores, scaled by the
 *            FLOPs per shared-memory byte (a thread's TM x TN tile on the CUDA cores, a warp's
 *            tile on the tensor cores: its fragments are read from shared memory once per
 *            warp) against the peak's ratio to the shared-memory bandwidth, and by the warps
 *            resident (a main loop of FMAs or mma.sync and shared-memory reads needs about two
 *            per scheduler, four schedulers per SM, to hide its latencies -- an assumption);
 *   memory:  compulsory bytes over HBM bandwidth; each tile's A and B panels over L2's.
 * The time is the largest of the three; waves = ceil(blocks / (SMs x blocks per SM)). */
static double gemm_time(const HwModel *hw, const GemmShape *g, CudaMath math, int es, int regs, int smem, int64_t batch,
                        int64_t m, int64_t n, int64_t k, int splits, CudaGemmPlan *out) {
  int sms = hw->sm_count > 0 ? hw->sm_count : 1;
  int threads = gemm_threads(g);
  int regs_sm = hw->regs_per_sm > 0 ? hw->regs_per_sm : 65536;
  int64_t smem_sm = hw->smem_per_sm > 0 ? hw->smem_per_sm : 98304;
  int r8 = (regs + 7) / 8 * 8;
  int by_regs = regs_sm / (r8 * threads);
  int by_smem = (int)(smem_sm / (smem > 0 ? smem : 1));
  int by_threads = (regs_sm / 32) / threads;      /* warp slots: 2048 threads where registers are 64K */
  int bps = by_regs < by_smem ? by_regs : by_smem;
  if (by_threads < bps) bps = by_threads;
  if (bps < 1) bps = 1;
  int64_t tiles = cdiv(m, g->bm) * cdiv(n, g->bn) * batch;
  int64_t blocks = tiles * splits;
  int64_t kp = cdiv(cdiv(k, splits), g->bk) * g->bk;
  double flops_block = 2.0 * g->bm * g->bn * (double)kp;
  double peak = math_peak(hw, math);
  const HwLevel *sm = gpu_level(hw, "smem"), *l2 = gpu_level(hw, "L2");
  double rows = g->wm ? g->bm / g->wm : g->tm, cols = g->wn ? g->bn / g->wn : g->tn;
  double intensity = 2.0 * rows * cols / ((rows + cols) * es);
  double eff = sm && sm->gbs > 0 ? sm->gbs * 1e9 * intensity / peak : 1.0;
  if (eff > 1) eff = 1;
  int64_t per_sm = cdiv(blocks, sms);
  int64_t resident = per_sm < bps ? per_sm : bps;
  double occ = (double)resident * threads / 32 / 8.0;
  if (occ > 1) occ = 1;
  double t_compute = (double)per_sm * flops_block / (peak / sms * eff * occ);
  double bytes = (double)es * batch * ((double)m * k + (double)k * n + (double)m * n);
  if (splits > 1) bytes += (double)es * 2 * splits * batch * m * n;
  double t_mem = bytes / mem_bw(hw);
  double l2_bytes = (double)es * batch * ((double)m * k * cdiv(n, g->bn) + (double)k * n * cdiv(m, g->bm));
  double t_l2 = l2 && l2->gbs > 0 ? l2_bytes / (l2->gbs * 1e9) : 0;
  double t = t_compute > t_mem ? t_compute : t_mem;
  if (t_l2 > t) t = t_l2;
  /* fixed costs, in GPU clock cycles (model assumptions, not hw figures): a block's first
   * tiles arrive before its pipeline runs and its epilogue follows it, about one memory
   * round trip per wave of blocks; a split K adds the summing kernel's launch */
  double ghz = hw->ghz > 0 ? hw->ghz : 1.5;
  int64_t waves = cdiv(blocks, (int64_t)sms * bps);
  t += (double)waves * GEMM_BLOCK_CYCLES / (ghz * 1e9);
  if (splits > 1) t += GEMM_SPLIT_CYCLES / (ghz * 1e9);
  if (out) {
    out->math = math;
    out->bm = g->bm;
    out->bn = g->bn;
    out->bk = g->bk;
    out->threads = threads;
    out->splits = splits;
    out->blocks = blocks;
    out->blocks_per_sm = bps;
    out->waves = (double)cdiv(blocks, (int64_t)sms * bps);
    out->predicted_s = t;
  }
  return t;
}

static const int SPLITS[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};

/* The best tile shape (of those for math and et) and split: the least predicted time; a split
 * must win by more than 10% besides its own costs (it adds a kernel and a pass over the
 * partial tiles). */
static int gemm_choose(const HwModel *hw, CudaMath math, DynElem et, const int *regs, bool a_kc, bool b_kc, int64_t batch, int64_t m,
                       int64_t n, int64_t k, int force_shape, int force_splits, CudaGemmPlan *best) {
  double best_t = INFINITY, best_unsplit = INFINITY;
  int best_g = -1, es = elem_size(et);
  CudaGemmPlan unsplit = {0};
  int unsplit_g = -1, nshapes;
  const GemmShape *shapes = gemm_shapes(math, et, &nshapes);
  for (int g = 0; g < nshapes; g++) {
    if (force_shape >= 0 && g != force_shape) continue;
    const GemmShape *gs = &shapes[g];
    int r = regs && regs[g] > 0 ? regs[g] : gemm_regs_guess(gs);
    int ns = force_splits > 0 ? 1 : (int)(sizeof SPLITS / sizeof *SPLITS);
    for (int si = 0; si < ns; si++) {
      int s = force_splits > 0 ? force_splits : SPLITS[si];
      if (force_splits <= 0 && s > 1 && (cdiv(k, s) < 2 * gs->bk || s > cdiv(k, gs->bk))) continue;
      CudaGemmPlan pl;
      double t = gemm_time(hw, gs, math, es, r, gemm_smem(gs, math, es, a_kc, b_kc), batch, m, n, k, s, &pl);
      if (s == 1 && t < best_unsplit) {
        best_unsplit = t;
        unsplit = pl;
        unsplit_g = g;
      }
      if (t < best_t) {
        best_t = t;
        *best = pl;
        best_g = g;
      }
    }
  }
  if (force_splits <= 0 && unsplit_g >= 0 && best->splits > 1 && !(best_t < 0.9 * best_unsplit)) {
    *best = unsplit;
    best_g = unsplit_g;
  }
  return best_g;
}

bool cuda_gemm_plan(const HwModel *hw, CudaMath math, int64_t batch, int64_t m, int64_t n, int64_t k, CudaGemmPlan *out) {
  if (batch < 1 || m < 1 || n < 1 || k < 0) return false;
  memset(out, 0, sizeof *out);
  return gemm_choose(hw, cuda_math_on(hw, math), DYN_F32, NULL, true, false, batch, m, n, k, -1, 0, out) >= 0;
}

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

static int find_var(const CK *ck, int kind, int gemm) {
  for (int i = 0; i < ck->nv; i++)
    if (ck->v[i].kind == kind && (kind != V_GEMM || ck->v[i].gemm == gemm)) return i;
  return -1;
}

static bool forced(const char *force, const Var *v) {
  if (!force || !*force) return false;
  size_t a = strlen(v->name), b = strlen(force);
  return a > b && v->name[a - b - 1] == '_' && !strcmp(v->name + a - b, force);
}

static unsigned clamp_grid(int64_t n, int64_t max) { return (unsigned)(n < 1 ? 1 : n > max ? max : n); }

/* A thread per element of `inner`, rows along y: the block is fitted to the shape. */
static void loop_dims(int64_t inner, int64_t rows, unsigned *grid, unsigned *block) {
  int bx = 32;
  while (bx < 256 && bx < inner) bx *= 2;
  int by = 256 / bx;
  block[0] = (unsigned)bx;
  block[1] = (unsigned)by;
  block[2] = 1;
  grid[0] = clamp_grid(cdiv(inner, bx), 1 << 30);
  grid[1] = clamp_grid(cdiv(rows, by), 65535);
  grid[2] = 1;
}

static int64_t prod_ext(const int64_t *ext, const int *ax, int n) {
  int64_t v = 1;
  for (int i = 0; i < n; i++) v *= ext[ax[i]];
  return v;
}

static int64_t slot_stride(const int64_t *strides, int slot, int pos) { return pos < 0 ? 0 : strides[slot * DYN_MAX_RANK + pos]; }

static void plan_kernel(const CudaProgram *cp, const CK *ck, const int64_t *ext, const int64_t *shape, const int64_t *strides,
                        const char *force, int force_splits, Launch *L) {
  const HwModel *hw = &cp->hw;
  int sms = hw->sm_count > 0 ? hw->sm_count : 1;
  const Kernel *kn = ck->kn;
  memset(L, 0, sizeof *L);
  L->var2 = -1;
  L->splits = 1;
  int fv = -1;
  for (int i = 0; i < ck->nv; i++)
    if (forced(force, &ck->v[i])) fv = i;
  switch (ck->kind) {
  case CK_LOOP: {
    const Stage *st = &kn->stages[0];
    int64_t inner = ext[st->axes[st->naxes - 1]], rows = prod_ext(ext, st->axes, st->naxes - 1);
    int64_t outputs = inner * rows;
    if (outputs <= 0) {
      L->skip = true;
      return;
    }
    int w = find_var(ck, V_WARP, 0);
    if (w >= 0) {
      int64_t red = prod_ext(ext, ck->coop->raxes, ck->coop->nraxes);
      bool use = fv >= 0 ? fv == w : red >= 32 && (ck->r_contig > ck->o_contig || outputs < (int64_t)sms * 64);
      if (use) {
        L->var = w;
        L->block[0] = 32;
        L->block[1] = 8;
        L->block[2] = 1;
        L->grid[0] = clamp_grid(cdiv(outputs, 8), 0x7fffffff);
        L->grid[1] = L->grid[2] = 1;
        snprintf(L->why, sizeof L->why, "a warp per output (%lld outputs, reductions of %lld%s)", (long long)outputs,
                 (long long)red, ck->r_contig > ck->o_contig ? ", contiguous along the reduction" : "");
        return;
      }
    }
    int v4 = find_var(ck, V_LOOP4, 0);
    bool ok4 = v4 >= 0 && inner % 4 == 0 && !(fv >= 0 && fv != v4);
    for (int i = 0; ok4 && i < ck->nvslots; i++) {
      const Slot *sl = &cp->p->slots[ck->vslots[i]];
      ok4 = sl->type.rank <= 1 || shape[ck->vslots[i] * DYN_MAX_RANK + sl->type.rank - 1] % 4 == 0;
    }
    L->var = ok4 ? v4 : find_var(ck, V_LOOP, 0);
    loop_dims(ok4 ? inner / 4 : inner, rows, L->grid, L->block);
    snprintf(L->why, sizeof L->why, "a thread per %s (%lld x %lld)", ok4 ? "four elements, 16-byte accesses" : "element",
             (long long)rows, (long long)inner);
    return;
  }
  case CK_ROW: {
    int64_t rows = prod_ext(ext, ck->outer, ck->nouter);
    if (rows <= 0) {
      L->skip = true;
      return;
    }
    int64_t len = 1;
    for (int s = 0; s < kn->nstages; s++) {
      int64_t n = prod_ext(ext, kn->stages[s].axes, kn->stages[s].naxes);
      const KExpr *co[16];
      int nco = 0;
      find_coop(kn->stages[s].expr, co, &nco, 16);
      for (int i = 0; i < nco && i < 16; i++) {
        int64_t r = prod_ext(ext, co[i]->raxes, co[i]->nraxes);
        if (r > n) n = r;
      }
      if (n > len) len = n;
    }
    /* short rows, many of them: a warp each; else a block each, the larger one when there are
     * fewer rows than SMs (more threads in flight per SM) and the row gives them work */
    int kind = len <= 1024 && rows >= 2 * (int64_t)sms ? V_WARP : rows >= sms || len < 2048 ? V_BLOCK256 : V_BLOCK1024;
    L->var = fv >= 0 ? fv : find_var(ck, kind, 0);
    const Var *v = &ck->v[L->var];
    L->block[0] = (unsigned)v->lanes;
    L->block[1] = (unsigned)v->rows;
    L->block[2] = 1;
    L->grid[0] = clamp_grid(cdiv(rows, v->rows), 0x7fffffff);
    L->grid[1] = L->grid[2] = 1;
    snprintf(L->why, sizeof L->why, "%s (%lld rows of %lld)",
             v->kind == V_WARP ? "a warp per row, 8 rows per block" : v->kind == V_BLOCK256 ? "a block of 256 threads per row"
                                                                                          : "a block of 1024 threads per row",
             (long long)rows, (long long)len);
    return;
  }
  case CK_SCALAR: {
    int g = find_var(ck, V_GRID, 0);
    int64_t red = ck->coop ? prod_ext(ext, ck->coop->raxes, ck->coop->nraxes) : 0;
    bool use = g >= 0 && (fv >= 0 ? fv == g : red >= 65536);
    if (use) {
      int64_t blocks = cdiv(red, 1024);
      if (blocks > 4 * (int64_t)sms) blocks = 4 * (int64_t)sms;
      if (blocks < 1) blocks = 1;
      L->var = g;
      L->block[0] = 256;
      L->block[1] = L->block[2] = 1;
      L->grid[0] = (unsigned)blocks;
      L->grid[1] = L->grid[2] = 1;
      L->ws = 16 + (size_t)blocks * 8;
      snprintf(L->why, sizeof L->why, "%lld blocks of 256 threads over %lld elements, combined by the last block", (long long)blocks,
               (long long)red);
    } else {
      L->var = find_var(ck, V_BLOCK1024, 0);
      L->block[0] = 1024;
      L->block[1] = L->block[2] = 1;
      L->grid[0] = L->grid[1] = L->grid[2] = 1;
      snprintf(L->why, sizeof L->why, "one block of 1024 threads (%lld elements)", (long long)red);
    }
    return;
  }
  default: {
    int64_t batch = ck->bax >= 0 ? ext[ck->bax] : 1, m = ext[ck->max], n = ext[ck->nax], k = ext[ck->kax];
    if (batch <= 0 || m <= 0 || n <= 0) {
      L->skip = true;
      return;
    }
    int nshapes;
    const GemmShape *shapes = gemm_shapes(ck->math, ck->et, &nshapes);
    int regs[NSHAPES_MAX];
    for (int g = 0; g < nshapes; g++) {
      int vi = find_var(ck, V_GEMM, g);
      regs[g] = vi >= 0 ? ck->v[vi].regs : 0;
    }
    int fshape = fv >= 0 && ck->v[fv].kind == V_GEMM ? ck->v[fv].gemm : -1;
    int g = gemm_choose(hw, ck->math, ck->et, regs, ck->a_kc, ck->b_kc, batch, m, n, k < 1 ? 1 : k, fshape, force_splits, &L->gp);
    if (g < 0) g = 0;
    const GemmShape *gs = &shapes[g];
    L->var = find_var(ck, V_GEMM, g);
    L->splits = L->gp.splits > 0 ? L->gp.splits : 1;
    L->block[0] = (unsigned)gemm_threads(gs);
    L->block[1] = L->block[2] = 1;
    int64_t tiles = cdiv(m, gs->bm) * cdiv(n, gs->bn) * batch;
    if (tiles > 0x7fffffff) {
      /* 2^31 blocks of at least 32 x 32 outputs: beyond any memory */
      L->skip = true;
      snprintf(L->why, sizeof L->why, "too many tiles (%lld)", (long long)tiles);
      return;
    }
    L->grid[0] = (unsigned)tiles;
    L->grid[1] = 1;
    L->grid[2] = (unsigned)L->splits;
    int64_t a_sb = slot_stride(strides, ck->ga, ck->apos[0]), a_sm = slot_stride(strides, ck->ga, ck->apos[1]),
            a_sk = slot_stride(strides, ck->ga, ck->apos[2]);
    int64_t b_sb = slot_stride(strides, ck->gb, ck->bpos[0]), b_sk = slot_stride(strides, ck->gb, ck->bpos[1]),
            b_sn = slot_stride(strides, ck->gb, ck->bpos[2]);
    int V = 16 / elem_size(ck->et);             /* elements per 16-byte copy */
    if (ck->a_kc) L->avec = a_sk == 1 && a_sm % V == 0 && a_sb % V == 0;
    else L->avec = a_sm == 1 && a_sk % V == 0 && a_sb % V == 0;
    /* B in shared memory keeps k contiguous when it does in memory, except for the CUDA
     * cores' tiles when A does too (they transpose B on the way, 4 bytes at a time) */
    bool sb_kc = ck->b_kc && (ck->math != CUDA_EXACT || !ck->a_kc);
    if (sb_kc) L->bvec = b_sk == 1 && b_sn % V == 0 && b_sb % V == 0;
    else if (!ck->b_kc) L->bvec = b_sn == 1 && b_sk % V == 0 && b_sb % V == 0;
    if (L->splits > 1) {
      L->ws = (size_t)L->splits * (size_t)batch * (size_t)m * (size_t)n * (size_t)elem_size(ck->et);
      L->var2 = find_var(ck, V_SPLITK, 0);
      loop_dims(n, batch * m, L->grid2, L->block2);
    }
    snprintf(L->why, sizeof L->why, "%stiles %dx%d, %d threads, K in %d part%s: %lld blocks, %d per SM, %.0f wave%s",
             ck->math == CUDA_EXACT ? "" : ck->math == CUDA_TF32 ? "tf32 " : "bf16 ", gs->bm, gs->bn, (int)L->block[0], L->splits,
             L->splits == 1 ? "" : "s", (long long)L->gp.blocks, L->gp.blocks_per_sm, L->gp.waves, L->gp.waves == 1 ? "" : "s");
    return;
  }
  }
}

/* ---- the device: context, memory, modules ---------------------------------------------------- */

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

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* A GPU model for the device: the hw file named like it ("NVIDIA H100 80GB HBM3" -> h100,
 * "NVIDIA GeForce RTX 4090" -> rtx4090), else what the device reports. */
static void model_for_device(const char *dname, CUdevice dev, HwModel *hw) {
  char low[256];
  size_t n = 0;
  for (const char *c = dname; *c && n + 1 < sizeof low; c++) low[n++] = (char)((*c >= 'A' && *c <= 'Z') ? *c - 'A' + 'a' : *c);
  low[n] = 0;
  char *tok[32];
  int nt = 0;
  for (char *t = strtok(low, " -_"); t && nt < 32; t = strtok(NULL, " -_")) tok[nt++] = t;
  for (int i = 0; i < nt; i++)
    for (int len = 1; len <= 2 && i + len <= nt; len++) {
      char cand[96] = "";
      for (int j = 0; j < len; j++) strncat(cand, tok[i + j], sizeof cand - strlen(cand) - 1);
      bool word = *cand != 0;
      for (char *c = cand; *c; c++) word = word && ((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'));
      if (!word || !strcmp(cand, "nvidia") || !strcmp(cand, "geforce")) continue;
      char e[256];
      HwModel m;
      if (hw_load(cand, &m, e, sizeof e) && !strcmp(m.kind, "gpu")) {
        *hw = m;
        return;
      }
    }
  /* what the device tells; FP32 lanes per SM by architecture (CUDA C++ Programming Guide,
   * "Arithmetic Instructions"): 64 on compute capability 6.0, 7.x and 8.0, else 128 */
  memset(hw, 0, sizeof *hw);
  int v = 0;
  snprintf(hw->name, sizeof hw->name, "device");
  snprintf(hw->kind, sizeof hw->kind, "gpu");
  snprintf(hw->desc, sizeof hw->desc, "%.80s (figures read from the device; approximate)", dname);
  D.cuDeviceGetAttribute(&hw->sm_count, CU_DEV_SM_COUNT, dev);
  D.cuDeviceGetAttribute(&hw->cc_major, CU_DEV_CC_MAJOR, dev);
  D.cuDeviceGetAttribute(&hw->cc_minor, CU_DEV_CC_MINOR, dev);
  D.cuDeviceGetAttribute(&hw->regs_per_sm, CU_DEV_REGS_PER_SM, dev);
  hw->warp_size = 32;
  hw->regs_per_thread_max = 255;
  hw->max_threads_per_block = 1024;
  D.cuDeviceGetAttribute(&v, CU_DEV_SMEM_PER_SM, dev);
  hw->smem_per_sm = v;
  D.cuDeviceGetAttribute(&v, CU_DEV_SMEM_PER_BLOCK_OPTIN, dev);
  hw->smem_per_block = v;
  D.cuDeviceGetAttribute(&v, CU_DEV_CLOCK_RATE, dev);
  hw->ghz = v / 1e6;
  int cc = hw->cc_major * 10 + hw->cc_minor;
  int lanes = cc == 60 || (cc >= 70 && cc < 80) || cc == 80 ? 64 : 128;
  hw->fp32_tflops = hw->sm_count * lanes * 2 * hw->ghz / 1e3;
  hw->peak_gflops_f32 = hw->fp32_tflops * 1e3;
  /* dense tf32 FLOPs per clock per SM on the tensor cores, bf16 twice that (whitepapers:
   * A100 1024, H100 2048, L4 512; GeForce parts halve them with f32 sums) -- approximate */
  int tc = cc < 80 ? 0 : cc == 80 ? 1024 : cc < 90 ? 512 : 2048;
  hw->tf32_tflops = hw->sm_count * tc * hw->ghz / 1e3;
  hw->bf16_tflops = 2 * hw->tf32_tflops;
  hw->cores = hw->sm_count;
  int memclk = 0, bus = 0, l2 = 0;
  D.cuDeviceGetAttribute(&memclk, CU_DEV_MEM_CLOCK_RATE, dev);
  D.cuDeviceGetAttribute(&bus, CU_DEV_BUS_WIDTH, dev);
  D.cuDeviceGetAttribute(&l2, CU_DEV_L2_SIZE, dev);
  double hbm = memclk * 1e3 * 2 * bus / 8 / 1e9;
  hw->nlevels = 3;
  snprintf(hw->level[0].name, sizeof hw->level[0].name, "smem");
  hw->level[0].bytes = hw->smem_per_sm;
  hw->level[0].line = 128;
  hw->level[0].gbs = hw->level[0].total_gbs = 128.0 * hw->ghz * hw->sm_count;
  snprintf(hw->level[1].name, sizeof hw->level[1].name, "L2");
  hw->level[1].bytes = l2;
  hw->level[1].line = 128;
  hw->level[1].gbs = hw->level[1].total_gbs = 2.5 * hbm;
  snprintf(hw->level[2].name, sizeof hw->level[2].name, "HBM");
  hw->level[2].bytes = 0;
  hw->level[2].line = 128;
  hw->level[2].gbs = hw->level[2].total_gbs = hbm > 0 ? hbm : 500;
}

CudaBackend *cuda_backend_new(const HwModel *hw, char *why, size_t whylen) {
  if (!have_driver(why, whylen)) return NULL;
  CUresult rc = D.cuInit(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    snprintf(why, whylen, "no CUDA device");
    return NULL;
  }
  if (rc != 0) {
    snprintf(why, whylen, "the NVIDIA driver did not start: %s", cu_err(rc));
    return NULL;
  }
  int count = 0;
  if (D.cuDeviceGetCount(&count) != 0 || count < 1) {
    snprintf(why, whylen, "no CUDA device");
    return NULL;
  }
  char nwhy[1024];
  if (!have_nvrtc(nwhy, sizeof nwhy)) {
    snprintf(why, whylen, "%.500s", nwhy);
    return NULL;
  }
  CudaBackend *be = xcalloc(1, sizeof *be);
  char dname[128] = "a CUDA device";
  if ((rc = D.cuDeviceGet(&be->dev, 0)) != 0 || (rc = D.cuDevicePrimaryCtxRetain(&be->ctx, be->dev)) != 0 ||
      (rc = D.cuCtxSetCurrent(be->ctx)) != 0) {
    snprintf(why, whylen, "cannot use the CUDA device: %s", cu_err(rc));
    free(be);
    return NULL;
  }
  D.cuDeviceGetName(dname, sizeof dname, be->dev);
  if (hw && !strcmp(hw->kind, "gpu")) be->hw = *hw;
  else model_for_device(dname, be->dev, &be->hw);
  /* the device's own figures replace the file's where they differ */
  int v = 0;
  if (D.cuDeviceGetAttribute(&v, CU_DEV_SM_COUNT, be->dev) == 0 && v > 0) be->hw.sm_count = be->hw.cores = v;
  if (D.cuDeviceGetAttribute(&v, CU_DEV_CC_MAJOR, be->dev) == 0) be->hw.cc_major = v;
  if (D.cuDeviceGetAttribute(&v, CU_DEV_CC_MINOR, be->dev) == 0) be->hw.cc_minor = v;
  if (D.cuDeviceGetAttribute(&v, CU_DEV_REGS_PER_SM, be->dev) == 0 && v > 0) be->hw.regs_per_sm = v;
  if (D.cuDeviceGetAttribute(&v, CU_DEV_SMEM_PER_SM, be->dev) == 0 && v > 0) be->hw.smem_per_sm = v;
  int drv = 0, rmaj = 0, rmin = 0;
  D.cuDriverGetVersion(&drv);
  R.nvrtcVersion(&rmaj, &rmin);
  snprintf(be->desc, sizeof be->desc, "%s (compute capability %d.%d, %d SMs; driver %d.%d, NVRTC %d.%d)", dname, be->hw.cc_major,
           be->hw.cc_minor, be->hw.sm_count, drv / 1000, drv % 1000 / 10, rmaj, rmin);
  D.cuEventCreate(&be->ev0, 0);
  D.cuEventCreate(&be->ev1, 0);
  return be;
}

void cuda_backend_free(CudaBackend *be) {
  if (!be) return;
  D.cuCtxSetCurrent(be->ctx);
  for (int i = 0; i < be->pool.n; i++) D.cuMemFree(be->pool.a[i].p);
  vec_free(be->pool);
  for (int i = 0; i < be->mods.n; i++) {
    D.cuModuleUnload(be->mods.a[i].mod);
    free(be->mods.a[i].src);
    free(be->mods.a[i].ptx);
  }
  vec_free(be->mods);
  if (be->ev0) D.cuEventDestroy(be->ev0);
  if (be->ev1) D.cuEventDestroy(be->ev1);
  D.cuDevicePrimaryCtxRelease(be->dev);
  free(be);
}

const HwModel *cuda_backend_hw(const CudaBackend *be) { return &be->hw; }
const char *cuda_backend_device(const CudaBackend *be) { return be->desc; }
double cuda_last_ms(const CudaBackend *be) { return be->last_ms; }

void cuda_force(CudaBackend *be, const char *variant, int splits) {
  snprintf(be->force, sizeof be->force, "%s", variant ? variant : "");
  be->force_splits = splits;
}

/* Device memory, reused: a freed buffer waits in the pool for a request of about its size. */
static bool dev_alloc(CudaBackend *be, size_t bytes, CUdeviceptr *p, char *err, size_t errlen) {
  if (bytes < 256) bytes = 256;
  int best = -1;
  for (int i = 0; i < be->pool.n; i++) {
    size_t b = be->pool.a[i].bytes;
    if (b >= bytes && b <= 2 * bytes && (best < 0 || b < be->pool.a[best].bytes)) best = i;
  }
  if (best >= 0) {
    *p = be->pool.a[best].p;
    be->pooled -= be->pool.a[best].bytes;
    be->pool.a[best] = be->pool.a[--be->pool.n];
    return true;
  }
  CUresult rc = D.cuMemAlloc(p, bytes);
  if (rc != 0 && be->pool.n) {
    for (int i = 0; i < be->pool.n; i++) D.cuMemFree(be->pool.a[i].p);
    be->pool.n = 0;
    be->pooled = 0;
    rc = D.cuMemAlloc(p, bytes);
  }
  if (rc != 0) {
    snprintf(err, errlen, "cannot allocate %zu bytes on the GPU: %s", bytes, cu_err(rc));
    return false;
  }
  return true;
}

static void dev_free(CudaBackend *be, CUdeviceptr p, size_t bytes) {
  if (!p) return;
  if (bytes < 256) bytes = 256;
  DevBlock b = {p, bytes};
  vec_push(be->pool, b);
  be->pooled += bytes;
  while (be->pooled > ((size_t)1 << 31) && be->pool.n) {     /* keep at most 2 GiB idle */
    D.cuMemFree(be->pool.a[0].p);
    be->pooled -= be->pool.a[0].bytes;
    be->pool.a[0] = be->pool.a[--be->pool.n];
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

CudaProgram *cuda_compile(CudaBackend *be, const Program *p, CudaMath math, char *err, size_t errlen) {
  double t0 = now_ms();
  D.cuCtxSetCurrent(be->ctx);
  CudaProgram *cp = cuda_program_new(p, &be->hw, math);
  const char *src = cuda_program_source(cp);
  uint64_t h = fnv1a(src);
  Module *m = NULL;
  for (int i = 0; i < be->mods.n && !m; i++)
    if (be->mods.a[i].hash == h && !strcmp(be->mods.a[i].src, src)) m = &be->mods.a[i];
  if (!m) {
    Buf ptx = {0};
    if (!cuda_compile_ptx(src, be->hw.cc_major, be->hw.cc_minor, &ptx, err, errlen)) {
      buf_free(&ptx);
      program_free(cp);
      return NULL;
    }
    char log[4096] = "";
    int opts[2] = {CU_JIT_ERROR_LOG, CU_JIT_ERROR_LOG_SIZE};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUmodule mod = NULL;
    CUresult rc = D.cuModuleLoadDataEx(&mod, ptx.s, 2, opts, vals);
    if (rc != 0) {
      snprintf(err, errlen, "the driver cannot load the PTX of %s: %s %.1000s", p->name, cu_err(rc), log);
      buf_free(&ptx);
      program_free(cp);
      return NULL;
    }
    Module nm = {h, xstrdup(src), mod, ptx.s};
    vec_push(be->mods, nm);
    m = &be->mods.a[be->mods.n - 1];
  }
  for (int k = 0; k < cp->nk; k++)
    for (int i = 0; i < cp->k[k].nv; i++) {
      Var *v = &cp->k[k].v[i];
      CUresult rc = D.cuModuleGetFunction(&v->fn, m->mod, v->name);
      if (rc != 0) {
        snprintf(err, errlen, "internal error: no kernel %s in the module: %s", v->name, cu_err(rc));
        program_free(cp);
        return NULL;
      }
      D.cuFuncGetAttribute(&v->regs, CU_FUNC_NUM_REGS, v->fn);
    }
  cp->ptx = xstrdup(m->ptx);
  cp->be = be;
  cp->compile_ms = now_ms() - t0;
  return cp;
}

double cuda_program_compile_ms(const CudaProgram *cp) { return cp->compile_ms; }

bool cuda_program_code(CudaProgram *cp, const char *what, Buf *out, char *err, size_t errlen) {
  if (!strcmp(what, "cuda")) {
    buf_puts(out, cuda_program_source(cp));
    return true;
  }
  if (strcmp(what, "ptx")) {
    snprintf(err, errlen, "the GPU back end shows cuda or ptx, not %s", what);
    return false;
  }
  if (!cp->ptx) {
    Buf b = {0};
    if (!cuda_compile_ptx(cuda_program_source(cp), cp->hw.cc_major, cp->hw.cc_minor, &b, err, errlen)) {
      buf_free(&b);
      return false;
    }
    cp->ptx = b.s ? b.s : xstrdup("");
  }
  buf_puts(out, cp->ptx);
  return true;
}

/* ---- running ---------------------------------------------------------------------------------- */

/* Extents of every axis, and the shape and C-order strides of every slot. */
static bool bind_shapes(const Program *p, const EvalSizes *sz, int64_t *ext, int64_t *shape, int64_t *strides, char *err,
                        size_t errlen) {
  const char *why = NULL;
  for (int a = 0; a < p->naxes; a++)
    if (!poly_eval(p->axes[a].extent, eval_size_lookup, (void *)sz, &ext[a], &why)) {
      eval_extent_error(p, a, why, err, errlen);
      return false;
    }
  for (int i = 0; i < p->nslots; i++) {
    const Slot *s = &p->slots[i];
    if (s->kind == SLOT_INLINED || s->kind == SLOT_SIZE) continue;
    int64_t st = 1;
    for (int k = s->type.rank - 1; k >= 0; k--) {
      int64_t d = 0;
      if (!poly_eval(s->type.dims[k], eval_size_lookup, (void *)sz, &d, &why)) {
        snprintf(err, errlen, "cannot evaluate the shape of %s: %s", s->name, why ? why : "unbound");
        return false;
      }
      shape[i * DYN_MAX_RANK + k] = d;
      strides[i * DYN_MAX_RANK + k] = st;
      st *= d > 0 ? d : 1;
    }
  }
  return true;
}

static size_t slot_bytes(const Program *p, int slot, const int64_t *shape) {
  const Slot *s = &p->slots[slot];
  size_t n = (size_t)elem_size(s->type.elem);
  for (int k = 0; k < s->type.rank; k++) n *= (size_t)(shape[slot * DYN_MAX_RANK + k] > 0 ? shape[slot * DYN_MAX_RANK + k] : 0);
  return n;
}

int cuda_run(CudaBackend *be, CudaProgram *cp, Tensor **inputs, const EvalSizes *sizes, Tensor **outs, char *err, size_t errlen) {
  const Program *p = cp->p;
  int ns = p->nslots;
  int status = 1;
  CUresult rc;
  D.cuCtxSetCurrent(be->ctx);
  int64_t *ext = xcalloc((size_t)p->naxes + 1, sizeof(int64_t));
  int64_t *shape = xcalloc((size_t)ns * DYN_MAX_RANK + 1, sizeof(int64_t));
  int64_t *strides = xcalloc((size_t)ns * DYN_MAX_RANK + 1, sizeof(int64_t));
  CUdeviceptr *dp = xcalloc((size_t)ns + 1, sizeof(CUdeviceptr));
  size_t *db = xcalloc((size_t)ns + 1, sizeof(size_t));
  Launch *L = xcalloc((size_t)cp->nk + 1, sizeof(Launch));
  uint64_t *words = NULL;
  CUdeviceptr errp = 0, ws = 0;
  size_t ws_bytes = 0;
  if (!bind_shapes(p, sizes, ext, shape, strides, err, errlen)) {
    status = -1;
    goto out;
  }
  for (int i = 0; i < ns && status == 1; i++) {
    if (!cp->buf[i]) continue;
    db[i] = slot_bytes(p, i, shape);
    if (!dev_alloc(be, db[i], &dp[i], err, errlen)) {
      status = -1;
      break;
    }
    const Slot *s = &p->slots[i];
    if (s->kind != SLOT_INPUT) continue;
    Tensor *t = inputs[s->param];
    if (!tensor_contiguous(t)) {
      snprintf(err, errlen, "%s is not contiguous", s->name);
      status = -1;
      break;
    }
    if (db[i] && (rc = D.cuMemcpyHtoD(dp[i], tensor_data(t), db[i])) != 0) {
      snprintf(err, errlen, "cannot copy %s to the GPU: %s", s->name, cu_err(rc));
      status = -1;
    }
  }
  if (status != 1) goto out;
  for (int k = 0; k < cp->nk; k++) {
    plan_kernel(cp, &cp->k[k], ext, shape, strides, be->force, be->force_splits, &L[k]);
    if (L[k].ws > ws_bytes) ws_bytes = L[k].ws;
  }
  if (!dev_alloc(be, 256, &errp, err, errlen) || (ws_bytes && !dev_alloc(be, ws_bytes, &ws, err, errlen))) {
    status = -1;
    goto out;
  }
  D.cuMemsetD32(errp, 0, 1);
  D.cuEventRecord(be->ev0, NULL);
  for (int k = 0; k < cp->nk && status == 1; k++) {
    CK *ck = &cp->k[k];
    if (L[k].skip) continue;
    words = xrealloc(words, sizeof(uint64_t) * (size_t)(ck->nf + 1));
    for (int i = 0; i < ck->nf; i++) {
      const Field *f = &ck->f[i];
      int64_t v = 0;
      switch (f->kind) {
      case F_PTR: v = (int64_t)dp[f->slot]; break;
      case F_STRIDE: v = strides[f->slot * DYN_MAX_RANK + f->dim]; break;
      case F_DIM: v = shape[f->slot * DYN_MAX_RANK + f->dim]; break;
      case F_EXT: v = ext[f->axis]; break;
      case F_SIZE: {
        const char *why = NULL;
        if (!poly_eval(f->size, eval_size_lookup, (void *)sizes, &v, &why)) {
          snprintf(err, errlen, "cannot evaluate a size of %s: %s", ck->kn->name, why ? why : "unbound");
          status = -1;
        }
        break;
      }
      case F_ERR: v = (int64_t)errp; break;
      case F_WS: v = (int64_t)ws; break;
      case F_SPLITS: v = L[k].splits; break;
      case F_AVEC: v = L[k].avec; break;
      default: v = L[k].bvec; break;
      }
      words[i] = (uint64_t)v;
    }
    if (status != 1) break;
    if (ck->kind == CK_SCALAR && ck->v[L[k].var].kind == V_GRID) D.cuMemsetD32(ws, 0, 4);
    void *params[1] = {words};
    for (int pass = 0; pass < 2 && status == 1; pass++) {
      int vi = pass ? L[k].var2 : L[k].var;
      if (vi < 0) continue;
      const unsigned *g = pass ? L[k].grid2 : L[k].grid, *b = pass ? L[k].block2 : L[k].block;
      rc = D.cuLaunchKernel(ck->v[vi].fn, g[0], g[1], g[2], b[0], b[1], b[2], 0, NULL, params, NULL);
      if (rc != 0) {
        snprintf(err, errlen, "cannot launch %s (%ux%ux%u blocks of %ux%u): %s", ck->v[vi].name, g[0], g[1], g[2], b[0], b[1], cu_err(rc));
        status = -1;
      }
    }
  }
  D.cuEventRecord(be->ev1, NULL);
  if ((rc = D.cuCtxSynchronize()) != 0 && status == 1) {
    snprintf(err, errlen, "the GPU failed running %s: %s", p->name, cu_err(rc));
    status = -1;
  }
  float ms = 0;
  if (status == 1 && D.cuEventElapsedTime(&ms, be->ev0, be->ev1) == 0) be->last_ms = ms;
  if (status == 1) {
    int flag = 0;
    D.cuMemcpyDtoH(&flag, errp, sizeof flag);
    if (flag) status = 0;
  }
  for (int i = 0; i < p->nout && status == 1; i++) {
    int s = p->outputs[i];
    const Slot *sl = &p->slots[s];
    int64_t dims[DYN_MAX_RANK];
    for (int k = 0; k < sl->type.rank; k++) dims[k] = shape[s * DYN_MAX_RANK + k];
    outs[i] = tensor_new(sl->type.elem, sl->type.rank, dims, err, errlen);
    if (!outs[i]) {
      status = -1;
      break;
    }
    if (db[s] && (rc = D.cuMemcpyDtoH(tensor_data(outs[i]), dp[s], db[s])) != 0) {
      snprintf(err, errlen, "cannot copy %s from the GPU: %s", sl->name, cu_err(rc));
      status = -1;
    }
  }
  if (status != 1)
    for (int i = 0; i < p->nout; i++) {
      tensor_release(outs[i]);
      outs[i] = NULL;
    }
out:
  for (int i = 0; i < ns; i++) dev_free(be, dp[i], db[i]);
  dev_free(be, errp, 256);
  dev_free(be, ws, ws_bytes);
  free(words);
  free(L);
  free(ext);
  free(shape);
  free(strides);
  free(dp);
  free(db);
  return status;
}

/* ---- the schedule, for :sched ------------------------------------------------------------------ */

static void describe_kernel(const CudaProgram *cp, const CK *ck, Buf *out) {
  const Program *p = cp->p;
  const Kernel *kn = ck->kn;
  buf_printf(out, "kernel %s\n", kn->name);
  switch (ck->kind) {
  case CK_GEMM: {
    bool tc = ck->math != CUDA_EXACT;
    buf_printf(out, "  contraction over %s: %s (%s) x %s (%s) -> %s%s, ", p->axes[ck->kax].name, p->slots[ck->ga].name,
               ck->a_kc ? "k contiguous" : "m contiguous", p->slots[ck->gb].name, ck->b_kc ? "k contiguous" : "n contiguous",
               p->slots[ck->gc].name, ck->bax >= 0 ? ", batched" : "");
    if (tc) buf_printf(out, "%s on the tensor cores, f32 sums\n", cuda_math_name(ck->math));
    else if (ck->et == DYN_F64) buf_puts(out, "exact f64 on the CUDA cores\n");
    else if (cp->math != CUDA_EXACT)
      buf_printf(out, "exact f32 on the CUDA cores\n  (%s asked for: the tensor cores take it from compute capability 8.0; this GPU is %d.%d)\n",
                 cuda_math_name(cp->math), cp->hw.cc_major, cp->hw.cc_minor);
    else buf_puts(out, "exact f32 on the CUDA cores\n");
    buf_puts(out, "  grid:    a block per tile of the output and batch (groups of 8 tile-rows share B in L2); split K on z\n");
    buf_puts(out, "  block:   A and B tiles in shared memory, two buffers (cp.async from sm_80)\n");
    if (tc)
      buf_printf(out, "  warp:    a tile of the output in mma.sync.m16n8k%d tiles, operands rounded to %s from shared memory\n"
                      "  thread:  its fragments: four outputs of each mma tile\n  variants:", ck->math == CUDA_BF16 ? 16 : 8,
                 cuda_math_name(ck->math));
    else buf_puts(out, "  thread:  a register tile of outputs\n  variants:");
    int nshapes;
    const GemmShape *shapes = gemm_shapes(ck->math, ck->et, &nshapes);
    for (int g = 0; g < nshapes; g++) {
      const GemmShape *gs = &shapes[g];
      int vi = find_var(ck, V_GEMM, g);
      if (tc)
        buf_printf(out, " %dx%d (%d warps of %dx%d, k-step %d", gs->bm, gs->bn, gs->wm * gs->wn, gs->bm / gs->wm, gs->bn / gs->wn,
                   gs->bk);
      else
        buf_printf(out, " %dx%d (%d threads, %dx%d each, k-step %d", gs->bm, gs->bn, gemm_threads(gs), gs->tm, gs->tn, gs->bk);
      if (vi >= 0 && ck->v[vi].regs) buf_printf(out, ", %d registers", ck->v[vi].regs);
      buf_puts(out, g + 1 < nshapes ? ")," : ")\n");
    }
    break;
  }
  case CK_ROW:
    buf_puts(out, "  row-wise over ");
    axes_list(cp, ck->outer, ck->nouter, out);
    buf_printf(out, ": %d stages fused\n", kn->nstages);
    for (int s = 0; s < kn->nstages; s++) {
      int o = kn->stages[s].out;
      buf_printf(out, "    %s: %s\n", p->slots[o].name,
                 cp->inl[o] ? "recomputed where it is read" : !cp->buf[o] ? "a register per row" : "stored");
    }
    buf_puts(out, "  grid:    rows over the blocks\n  block:   a warp per row (8 rows per block), or 256 or 1024 threads per row\n"
                  "  warp:    reductions by butterfly shuffles, then shared memory across warps\n");
    break;
  case CK_SCALAR:
    buf_printf(out, "  a reduction to one value: %s\n", ck->ncoop == 1 ? "partials per block, the last block combines them (large), "
                                                                          "or one block of 1024 threads (small)"
                                                                        : "one block of 1024 threads");
    break;
  default:
    buf_puts(out, "  loop nest over ");
    axes_list(cp, kn->stages[0].axes, kn->stages[0].naxes, out);
    buf_puts(out, ": a thread per element of the last axis, rows on the grid's y");
    if (ck->vec4) buf_puts(out, "; 16-byte accesses when the last axis allows");
    buf_putc(out, '\n');
    if (ck->virt) buf_puts(out, "  reductions: in the thread, or a warp per output when they are long and contiguous\n");
    break;
  }
}

double cuda_describe(const CudaProgram *cp, PolyCtx *pc, const EvalSizes *sz, Buf *out) {
  const Program *p = cp->p;
  buf_printf(out, "target %s: %s, %d SMs, compute capability %d.%d\n", cp->hw.name, cp->hw.desc, cp->hw.sm_count, cp->hw.cc_major,
             cp->hw.cc_minor);
  double total = 0;
  int64_t *ext = xcalloc((size_t)p->naxes + 1, sizeof(int64_t));
  int64_t *shape = xcalloc((size_t)p->nslots * DYN_MAX_RANK + 1, sizeof(int64_t));
  int64_t *strides = xcalloc((size_t)p->nslots * DYN_MAX_RANK + 1, sizeof(int64_t));
  char err[256];
  bool have = sz && bind_shapes(p, sz, ext, shape, strides, err, sizeof err);
  for (int k = 0; k < cp->nk; k++) {
    const CK *ck = &cp->k[k];
    describe_kernel(cp, ck, out);
    if (!have) continue;
    Launch L;
    const char *force = cp->be ? cp->be->force : NULL;
    plan_kernel(cp, ck, ext, shape, strides, force, cp->be ? cp->be->force_splits : 0, &L);
    if (L.skip) {
      buf_puts(out, "  this shape: nothing to compute\n");
      continue;
    }
    double t;
    if (ck->kind == CK_GEMM) {
      t = L.gp.predicted_s;
    } else {
      const Poly *fp, *bp;
      cost_kernel(p, ck->kn, pc, &fp, &bp);
      int64_t fv = 0, bv = 0;
      const char *why;
      poly_eval(fp, eval_size_lookup, (void *)sz, &fv, &why);
      poly_eval(bp, eval_size_lookup, (void *)sz, &bv, &why);
      t = cost_roofline(&cp->hw, cp->hw.sm_count, (double)fv, (double)bv);
    }
    buf_printf(out, "  this shape: %s -> %s, %u x %u x %u blocks of %u x %u threads; predicted %.4f ms\n", L.why, ck->v[L.var].name,
               L.grid[0], L.grid[1], L.grid[2], L.block[0], L.block[1], t * 1e3);
    if (L.var2 >= 0) buf_printf(out, "              then %s sums the %d parts\n", ck->v[L.var2].name, L.splits);
    total += t;
  }
  if (have) buf_printf(out, "predicted total: %.4f ms\n", total * 1e3);
  free(ext);
  free(shape);
  free(strides);
  return total;
}
