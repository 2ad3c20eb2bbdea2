/* cuda.c -- the GPU back end: fused kernels rendered as CUDA C, compiled by NVRTC to PTX,
 * loaded and launched through the CUDA driver API.  Render, compile, load and launch are
 * separate steps: rendering and compiling to PTX need no GPU (only NVRTC), so they are tested
 * everywhere; both libraries are opened with dlopen through the one table in cuda.def.
 *
 * Design note.  The GPU is a hierarchy -- thread registers, warp, block with its shared
 * memory, grid of blocks over the SMs -- and every kernel of a Program is mapped top-down onto
 * it, once, with every extent, size and stride an argument: one module serves every shape.
 *   - Elementwise and general loop nests: a thread per element of the innermost axis (x), the
 *     other axes flattened into rows (y); both grid-stride.  Where the innermost axis is
 *     contiguous a second variant moves four elements per thread with 16-byte loads and stores.
 *     Index math is 64-bit, but only a 64-bit add per element: divisions happen once per row.
 *   - Row-wise kernels (softmax, layernorm: Kernel.nouter > 0) and reductions along an axis:
 *     one warp per row (8 rows per block) or one block of 256 or 1024 threads per row.  Per-row
 *     scalars live in registers; per-row arrays without a reduction are recomputed where they
 *     are read (exp(x - m) costs less than a round trip to memory); a reduction is a strided
 *     loop per thread, butterfly shuffles (__shfl_xor_sync) inside each warp, then one slot per
 *     warp in shared memory, read back in one order by every thread.
 *   - Reductions to a scalar: a grid of blocks writes partial results, the last block to
 *     finish (an atomic ticket) combines them in a fixed order: deterministic, one launch.
 *   - Contractions (sum over k of a product of two plain loads, optionally batched, with any
 *     elementwise epilogue around the sum): block tiles of C with A and B staged through
 *     shared memory in k-steps, two buffers filled by cp.async from sm_80 on (plain loads
 *     before), 8x8 (or 4x4) outputs per thread in registers, bounds-checked edges, exact f32
 *     FMA.  A few tile shapes are compiled; at run time a model picks one, and a split of K
 *     (partial tiles summed in order by a second kernel) for shapes with few tiles.
 * The model (section "the model") reads only the hw file (or the device): FLOPs over the
 * SMs' peak scaled by the tile's FLOPs per shared-memory byte, bytes over L2 and HBM
 * bandwidth, padding of partial tiles, and waves: ceil(blocks / (SMs x blocks per SM)).
 *
 * Semantics follow eval.c: f32 arithmetic in f32 (FMA contraction allowed), integers wrap,
 * floor division and modulo like Python, saturating float-to-int casts, NaN-propagating max
 * and min, where(...) evaluates only the chosen branch, `and`/`or` evaluate both sides.  A
 * checked access out of range or an integer division by zero sets an error word; the caller
 * then re-runs the reference evaluator for the exact message, as with the CPU back end.
 *
 * Limits: f32 contractions only (f64 ones run as loop kernels); no tensor cores (tf32 would
 * be an opt-in); rows of a row-wise kernel are not split across blocks, so a few very long
 * rows use few SMs; transposes are not staged through shared memory; inputs must be
 * contiguous.  Test hooks: $DYN_NVRTC and $DYN_CUDA_DRIVER name the libraries to open.
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
  char why[512];
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
    if (env && *env) snprintf(drv_lib.why, sizeof drv_lib.why, "no NVIDIA driver (%s: %s)", env, dlerror());
    else snprintf(drv_lib.why, sizeof drv_lib.why, "no NVIDIA driver (libcuda.so.1 not found)");
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
typedef struct Field { int kind, slot, dim, axis; const Poly *size; char name[80]; } Field;

/* The compiled variants of a kernel. */
enum { V_LOOP, V_LOOP4, V_WARP, V_BLOCK256, V_BLOCK1024, V_GRID, V_GEMM, V_SPLITK };

/* The block tiles of the contraction variants: BM x BN outputs per block, k-steps of BK,
 * TM x TN outputs per thread. */
typedef struct GemmShape { int bm, bn, bk, tm, tn; } GemmShape;
static const GemmShape GEMM_SHAPES[] = {
  {128, 128, 16, 8, 8}, {128, 64, 16, 8, 8}, {64, 128, 16, 8, 8}, {64, 64, 16, 8, 8}, {32, 32, 32, 4, 4},
};
#define NGEMM ((int)(sizeof GEMM_SHAPES / sizeof *GEMM_SHAPES))

typedef struct Var {
  int kind;
  int lanes, rows, threads;   /* threads per row and rows per block (row variants), per block */
  int gemm;                   /* V_GEMM: index in GEMM_SHAPES */
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
  Var v[12]; int nv;
} CK;

struct CudaProgram {
  const Program *p;
  HwModel hw;
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

static void sanitize(const char *in, char *out, size_t n) {
  size_t j = 0;
  if (!(*in >= 'A' && *in <= 'Z') && !(*in >= 'a' && *in <= 'z') && *in != '_' && j + 1 < n) out[j++] = 'x';
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
        if (!strcmp(names[bound[i]], names[ax])) {
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

static bool plain_load(const CudaProgram *cp, const KExpr *ld) {
  if (ld->kind != KX_LOAD || ld->checked || !cp->buf[ld->slot] || cp->p->slots[ld->slot].type.elem != DYN_F32) return false;
  for (int i = 0; i < ld->n; i++)
    if (ld->a[i]->kind != KX_AXIS) return false;
  return true;
}

/* The structural test of cpu.c's match_gemm, widened to an epilogue: the stage is
 * C[b?, m, n] = f(sum[k] A[..] * B[..], ...) with exactly one reduction, A holding m and k
 * (and perhaps the batch), B holding k and n (and perhaps the batch), each a plain layout. */
static bool match_contraction(CudaProgram *cp, CK *ck) {
  const Kernel *kn = ck->kn;
  if (kn->nstages != 1 || kn->nouter) return false;
  const Stage *st = &kn->stages[0];
  if (st->naxes < 2 || st->naxes > 3 || count_reduce(st->expr) != 1) return false;
  const KExpr *R = first_reduce(st->expr);
  if (R->red != RED_SUM || R->nraxes != 1 || R->ty != DYN_F32) return false;
  const KExpr *body = R->a[0];
  if (body->kind != KX_BIN || body->op != OP_MUL || body->ty != DYN_F32) return false;
  const KExpr *A = body->a[0], *B = body->a[1];
  if (!plain_load(cp, A) || !plain_load(cp, B)) return false;
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

static void add_field(CudaProgram *cp, CK *ck, int kind, int slot, int dim, int axis, const Poly *size, const char *name) {
  ck->f = xrealloc(ck->f, sizeof(Field) * (size_t)(ck->nf + 1));
  Field *f = &ck->f[ck->nf++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->slot = slot;
  f->dim = dim;
  f->axis = axis;
  f->size = size;
  /* field names only need to differ from each other */
  char cand[96];
  snprintf(cand, sizeof cand, "%s", name);
  for (int k = 2;; k++) {
    bool clash = false;
    for (int i = 0; i < ck->nf - 1 && !clash; i++) clash = !strcmp(ck->f[i].name, cand);
    if (!clash) break;
    snprintf(cand, sizeof cand, "%s_%d", name, k);
  }
  snprintf(f->name, sizeof f->name, "%s", cand);
  (void)cp;
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
    if (u.rd[i] || u.wr[i]) add_field(cp, ck, F_PTR, i, 0, 0, NULL, cp->sname[i]);
  for (int i = 0; i < p->nslots; i++)
    if (u.rd[i] || u.wr[i])
      for (int d = 0; d + 1 < p->slots[i].type.rank; d++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s_s%d", cp->sname[i], d);
        add_field(cp, ck, F_STRIDE, i, d, 0, NULL, nm);
      }
  for (int i = 0; i < p->nslots; i++)
    if (u.chk[i])
      for (int d = 0; d < p->slots[i].type.rank; d++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s_d%d", cp->sname[i], d);
        add_field(cp, ck, F_DIM, i, d, 0, NULL, nm);
      }
  for (int a = 0; a < p->naxes; a++)
    if (u.ext[a]) {
      char nm[96];
      snprintf(nm, sizeof nm, "ext_%s", cp->aname[a]);
      add_field(cp, ck, F_EXT, 0, 0, a, NULL, nm);
    }
  for (int i = 0; i < u.nsizes; i++) {
    Buf t = {0};
    poly_str(u.sizes[i], &t);
    char nm[96] = "sz_";
    sanitize(t.s, nm + 3, sizeof nm - 3);
    buf_free(&t);
    add_field(cp, ck, F_SIZE, 0, 0, 0, u.sizes[i], nm);
  }
  ck->err = false;
  for (int s = 0; s < kn->nstages; s++)
    if (!cp->inl[kn->stages[s].out]) ck->err = ck->err || needs_err(cp, kn->stages[s].expr);
  if (ck->err) add_field(cp, ck, F_ERR, 0, 0, 0, NULL, "err");
  if (ck->kind == CK_GEMM || (ck->kind == CK_SCALAR && ck->ncoop == 1)) add_field(cp, ck, F_WS, 0, 0, 0, NULL, "ws");
  if (ck->kind == CK_GEMM) {
    add_field(cp, ck, F_SPLITS, 0, 0, 0, NULL, "splits");
    add_field(cp, ck, F_AVEC, 0, 0, 0, NULL, "a_vec");
    add_field(cp, ck, F_BVEC, 0, 0, 0, NULL, "b_vec");
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
  if (kind == V_GEMM)
    snprintf(v->name, sizeof v->name, "%s_gemm%dx%d", ck->base, GEMM_SHAPES[gemm].bm, GEMM_SHAPES[gemm].bn);
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
      ck->vec4 = cp->buf[st0->out] && (oe == DYN_F32 || oe == DYN_I32);
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
    case CK_GEMM:
      for (int g = 0; g < NGEMM; g++) {
        const GemmShape *gs = &GEMM_SHAPES[g];
        add_var(ck, V_GEMM, 0, 0, (gs->bm / gs->tm) * (gs->bn / gs->tn), g);
      }
      add_var(ck, V_SPLITK, 0, 0, 256, 0);
      break;
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
  " * from sm_80 on, plain loads and stores before. */\n"
  "__device__ __forceinline__ void dyn_cp16(float *s, const float *g, int bytes) {\n"
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
  "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"((unsigned)__cvta_generic_to_shared(s)), \"l\"(g), \"r\"(bytes));\n"
  "#else\n"
  "  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);\n"
  "  if (bytes >= 16) v = *(const float4 *)g;\n"
  "  else {\n"
  "    if (bytes >= 4) v.x = g[0];\n"
  "    if (bytes >= 8) v.y = g[1];\n"
  "    if (bytes >= 12) v.z = g[2];\n"
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
  "/* Stage a ROWS x COLS tile into shared memory (row pitch LD floats): element (r, c) is\n"
  " * g[(r0 + r) * sr + (c0 + c) * sc] when r0 + r < nr and c0 + c < nc, else 0 (the edges of\n"
  " * any shape).  With vec (sc == 1, sr and the base 16-byte aligned: the host checks) four\n"
  " * columns move per 16-byte copy; else one float per copy, consecutive threads along the\n"
  " * columns, or along the rows when ROW_FAST (the rows are contiguous in memory: a transpose). */\n"
  "template <int ROWS, int COLS, int LD, int THREADS, bool ROW_FAST>\n"
  "__device__ __forceinline__ void dyn_tile_load(float *s, const float *g, i64 r0, i64 c0, i64 nr, i64 nc, i64 sr, i64 sc, bool vec) {\n"
  "  if (!ROW_FAST && vec) {\n"
  "    constexpr int C4 = COLS / 4, N = ROWS * C4;\n"
  "#pragma unroll 1\n"
  "    for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {\n"
  "      const int t = threadIdx.x + i * THREADS;\n"
  "      if (N % THREADS != 0 && t >= N) break;\n"
  "      const int r = t / C4, c = t % C4 * 4;\n"
  "      const i64 gr = r0 + r, gc = c0 + c, left = nc - gc;\n"
  "      const int bytes = gr < nr && left > 0 ? (left >= 4 ? 16 : (int)left * 4) : 0;\n"
  "      dyn_cp16(s + r * LD + c, bytes ? g + gr * sr + gc : g, bytes);\n"
  "    }\n"
  "  } else {\n"
  "    constexpr int N = ROWS * COLS;\n"
  "#pragma unroll 1\n"
  "    for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {\n"
  "      const int t = threadIdx.x + i * THREADS;\n"
  "      if (N % THREADS != 0 && t >= N) break;\n"
  "      const int r = ROW_FAST ? t % ROWS : t / COLS, c = ROW_FAST ? t / ROWS : t % COLS;\n"
  "      const i64 gr = r0 + r, gc = c0 + c;\n"
  "      const bool in = gr < nr && gc < nc;\n"
  "      dyn_cp4(s + r * LD + c, in ? g + gr * sr + gc * sc : g, in ? 4 : 0);\n"
  "    }\n"
  "  }\n"
  "}\n"
  "\n"
  "/* The levels below the grid of a contraction C += A.B for one BM x BN block tile.\n"
  " *   block:  THREADS threads; A and B tiles of k-depth BK in shared memory, two buffers: the\n"
  " *           copy of step t + 1 runs while step t is computed.  An operand keeps the layout it\n"
  " *           has in memory ([BM][BK] when k is contiguous, else [BK][BM]), so copies move 16\n"
  " *           bytes; only when both keep k contiguous is B transposed on the way ([BK][BN]).\n"
  " *           Rows are padded by 4 floats: 16-byte aligned, and successive rows change banks.\n"
  " *   thread: TM x TN outputs in registers, rows row(ty, i), columns col(tx, j): in runs of four\n"
  " *           where a float4 read covers them, interleaved where each is read on its own. */\n"
  "template <int BM, int BN, int BK, int TM, int TN, bool A_KC, bool B_KC>\n"
  "struct DynGemm {\n"
  "  static constexpr int THREADS = (BM / TM) * (BN / TN);\n"
  "  static constexpr bool SB_KC = B_KC && !A_KC;\n"
  "  static constexpr int AR = A_KC ? BM : BK, AC = A_KC ? BK : BM, ALD = AC + 4, ATILE = AR * ALD;\n"
  "  static constexpr int BR = SB_KC ? BN : BK, BC = SB_KC ? BK : BN, BLD = BC + 4, BTILE = BR * BLD;\n"
  "  static __device__ __forceinline__ int row(int ty, int i) {\n"
  "    return A_KC ? ty + (BM / TM) * i : (i / 4) * (BM * 4 / TM) + ty * 4 + i % 4;\n"
  "  }\n"
  "  static __device__ __forceinline__ int col(int tx, int j) {\n"
  "    return SB_KC ? tx + (BN / TN) * j : (j / 4) * (BN * 4 / TN) + tx * 4 + j % 4;\n"
  "  }\n"
  "  static __device__ __forceinline__ void load(float *sa, float *sb, const float *A, const float *B, i64 m0, i64 n0, i64 k0,\n"
  "                                              i64 k1, i64 M, i64 N, i64 a_sm, i64 a_sk, i64 b_sk, i64 b_sn, bool avec, bool bvec) {\n"
  "    if (A_KC) dyn_tile_load<AR, AC, ALD, THREADS, false>(sa, A, m0, k0, M, k1, a_sm, a_sk, avec);\n"
  "    else dyn_tile_load<AR, AC, ALD, THREADS, false>(sa, A, k0, m0, k1, M, a_sk, a_sm, avec);\n"
  "    if (SB_KC) dyn_tile_load<BR, BC, BLD, THREADS, false>(sb, B, n0, k0, N, k1, b_sn, b_sk, bvec);\n"
  "    else dyn_tile_load<BR, BC, BLD, THREADS, B_KC>(sb, B, k0, n0, k1, N, b_sk, b_sn, bvec && !B_KC);\n"
  "  }\n"
  "  /* One k-step: the operand that keeps k contiguous is read a quad of k at a time (float4\n"
  "   * along k), the other one k at a time (float4 along m or n). */\n"
  "  static __device__ __forceinline__ void compute(float (&acc)[TM][TN], const float *sa, const float *sb, int tx, int ty) {\n"
  "#pragma unroll\n"
  "    for (int kq = 0; kq < BK; kq += 4) {\n"
  "      float a[TM][4];\n"
  "      if constexpr (A_KC) {\n"
  "#pragma unroll\n"
  "        for (int i = 0; i < TM; i++) {\n"
  "          const float4 v = *(const float4 *)(sa + row(ty, i) * ALD + kq);\n"
  "          a[i][0] = v.x; a[i][1] = v.y; a[i][2] = v.z; a[i][3] = v.w;\n"
  "        }\n"
  "      }\n"
  "      if constexpr (SB_KC) {\n"
  "#pragma unroll\n"
  "        for (int j = 0; j < TN; j++) {\n"
  "          const float4 v = *(const float4 *)(sb + col(tx, j) * BLD + kq);\n"
  "          const float b[4] = {v.x, v.y, v.z, v.w};\n"
  "#pragma unroll\n"
  "          for (int u = 0; u < 4; u++) {\n"
  "            if constexpr (!A_KC) {\n"
  "              if (j == 0) {\n"
  "#pragma unroll\n"
  "                for (int i = 0; i < TM; i += 4) {\n"
  "                  const float4 w = *(const float4 *)(sa + (kq + u) * ALD + row(ty, i));\n"
  "                  a[i][u] = w.x; a[i + 1][u] = w.y; a[i + 2][u] = w.z; a[i + 3][u] = w.w;\n"
  "                }\n"
  "              }\n"
  "            }\n"
  "#pragma unroll\n"
  "            for (int i = 0; i < TM; i++) acc[i][j] = fmaf(a[i][u], b[u], acc[i][j]);\n"
  "          }\n"
  "        }\n"
  "      } else {\n"
  "#pragma unroll\n"
  "        for (int u = 0; u < 4; u++) {\n"
  "          float b[TN];\n"
  "#pragma unroll\n"
  "          for (int j = 0; j < TN; j += 4) {\n"
  "            const float4 v = *(const float4 *)(sb + (kq + u) * BLD + col(tx, j));\n"
  "            b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;\n"
  "          }\n"
  "          if constexpr (!A_KC) {\n"
  "#pragma unroll\n"
  "            for (int i = 0; i < TM; i += 4) {\n"
  "              const float4 w = *(const float4 *)(sa + (kq + u) * ALD + row(ty, i));\n"
  "              a[i][u] = w.x; a[i + 1][u] = w.y; a[i + 2][u] = w.z; a[i + 3][u] = w.w;\n"
  "            }\n"
  "          }\n"
  "#pragma unroll\n"
  "          for (int i = 0; i < TM; i++)\n"
  "#pragma unroll\n"
  "            for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i][u], b[j], acc[i][j]);\n"
  "        }\n"
  "      }\n"
  "    }\n"
  "  }\n"
  "  /* acc += A[m0 .. m0 + BM, k0 .. k1) . B[k0 .. k1, n0 .. n0 + BN) */\n"
  "  static __device__ __forceinline__ void run(float (&acc)[TM][TN], float *sa, float *sb, const float *A, const float *B, i64 m0,\n"
  "                                             i64 n0, i64 k0, i64 k1, i64 M, i64 N, i64 a_sm, i64 a_sk, i64 b_sk, i64 b_sn,\n"
  "                                             bool avec, bool bvec) {\n"
  "    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);\n"
  "    const int nt = k1 > k0 ? (int)((k1 - k0 + BK - 1) / BK) : 0;\n"
  "    if (nt > 0) load(sa, sb, A, B, m0, n0, k0, k1, M, N, a_sm, a_sk, b_sk, b_sn, avec, bvec);\n"
  "    dyn_cp_commit();\n"
  "    for (int t = 0; t < nt; t++) {\n"
  "      if (t + 1 < nt)\n"
  "        load(sa + ((t + 1) & 1) * ATILE, sb + ((t + 1) & 1) * BTILE, A, B, m0, n0, k0 + (i64)(t + 1) * BK, k1, M, N, a_sm,\n"
  "             a_sk, b_sk, b_sn, avec, bvec);\n"
  "      dyn_cp_commit();\n"
  "      dyn_cp_wait<1>();\n"
  "      __syncthreads();\n"
  "      compute(acc, sa + (t & 1) * ATILE, sb + (t & 1) * BTILE, tx, ty);\n"
  "      __syncthreads();\n"
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

static const char *field_name(const CK *ck, int kind, int slot, int dim, int axis, const Poly *size) {
  for (int i = 0; i < ck->nf; i++) {
    const Field *f = &ck->f[i];
    if (f->kind != kind) continue;
    if ((kind == F_PTR && f->slot == slot) || (kind == F_STRIDE && f->slot == slot && f->dim == dim) ||
        (kind == F_DIM && f->slot == slot && f->dim == dim) || (kind == F_EXT && f->axis == axis) ||
        (kind == F_SIZE && f->size == size) || kind >= F_ERR)
      return f->name;
  }
  return "missing_field_";   /* an internal error: the compile fails with this name */
}

static const char *ext_of(Rd *r, int axis) {
  return arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_EXT, 0, 0, axis, NULL));
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
    else if (simple(subs[k])) buf_printf(o, "%s * a.%s", subs[k], field_name(r->ck, F_STRIDE, slot, k, 0, NULL));
    else buf_printf(o, "(%s) * a.%s", subs[k], field_name(r->ck, F_STRIDE, slot, k, 0, NULL));
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

static const char *paren(Rd *r, const char *s) { return simple(s) ? s : arena_printf(r->cp->ar, "(%s)", s); }

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
  const char *ptr = field_name(r->ck, F_PTR, s, 0, 0, NULL);
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
      buf_printf(&val, "%s%s < 0 || %s >= a.%s", k ? " || " : "", names[k], names[k], field_name(r->ck, F_DIM, s, k, 0, NULL));
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
  if (at != e->ty) {
    /* bool results of a max or min over bools */
    (void)0;
  }
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
    cast_text(o, DYN_I64, e->ty, arena_printf(r->cp->ar, "a.%s", field_name(r->ck, F_SIZE, 0, 0, 0, e->size)));
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
    const char *one = f32 ? "1.0f" : "1.0";
    switch (e->op) {
    case OP_NOT: buf_printf(o, "(!%s)", paren(r, x)); return;
    case OP_NEG:
      if (fl) buf_printf(o, "(-%s)", paren(r, x));
      else buf_printf(o, "dyn_neg(%s)", x);
      return;
    case OP_RSQRT: buf_printf(o, "(%s / %s(%s))", one, f32 ? "sqrtf" : "sqrt", x); return;
    case OP_SIGMOID: buf_printf(o, "(%s / (%s + %s(-%s)))", one, one, f32 ? "expf" : "exp", paren(r, x)); return;
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
  buf_printf(o, "a.%s[", field_name(r->ck, F_PTR, slot, 0, 0, NULL));
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
