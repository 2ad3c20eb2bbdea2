/* gemm.c -- the CPU contraction engine: C[b,m,n] (+)= sum_k A[b,m,k] B[b,k,n] in f32 or f64,
 * every operand addressed by element strides given at run time, compiled once per element
 * type and machine, and run on any shape, layout and thread count with no recompile.
 * This file holds the design note and the engine's life (compile, bind, free, force); the
 * code generation and its compilation into the JIT is gemm_emit.c, the model (with the
 * parts compiled on first need) gemm_model.c, the execution gemm_run.c, and what they share
 * gemm_int.h.
 *
 * Design note.  This follows the sample-free scheduler of Vortex ("A Sample-Free Compilation
 * Framework for Efficient Dynamic Tensor Computation", SC '25, arXiv 2409.01075): kernels
 * are built bottom-up from the hardware (HwModel), never tuned on example shapes, and the
 * choice among the few compiled variants is made per call by an analytical model.
 *  - Level 0, registers.  Register tiles h x nr (nr = v vectors) are enumerated under the
 *    vector register budget (h*v accumulators + v loads of B + 1 broadcast of A <= vec_regs)
 *    with at least fma_latency * fma_units independent accumulators, and scored by FLOPs
 *    per element loaded, 2*h*nr / (h + nr); tiles with more loads than FMAs per k step are
 *    dropped (cores have about as many load ports as FMA pipes).  Kept: the best tile of
 *    each width, then of those the best scored and the widest, then the narrowest, up to
 *    MAX_FAM "families", because the run-time model needs the spread: wide tiles stream B
 *    in place in longer row pieces (small M), narrow ones waste less on an n-edge.  The
 *    first EAGER_FAM are compiled with the engine; the others the first time a problem's
 *    columns fit one of them in fewer whole strips than those (famx_wanted).  Each
 *    family is emitted as LLVM IR with explicit vectors, llvm.fma and broadcasts, for
 *    height mr and the powers of two below it (the shortest family for every height: a C
 *    of 3, 5 or 7 rows), with masked loads and stores (llvm.masked.*) for the n-edge and a
 *    row mask for the m-edge (on targets without cheap masks an unmasked twin serves full
 *    tiles).  Short
 *    tiles that cannot hide the FMA latency split k over several accumulator sets.  An edge
 *    of r rows is split by a compile-time DP into pieces, the last possibly padded (a
 *    taller tile that stores fewer rows), each charged its FMA time or the time to re-read
 *    its B strip, whichever is larger.  A kernel takes A's row and column strides as
 *    arguments: one kernel reads a packed panel, a column-major or a row-major A in place.
 *  - Hybrid scoring.  After compiling, every kernel is timed once on operands that stay in
 *    L1 (about a millisecond in all): the hardware's real rate per tile height replaces
 *    the FMA count, which cannot see e.g. that Zen 5 issues about one broadcast load per
 *    cycle (a 16x16 tile then runs at half speed).  Hardware, never shapes.
 *  - Cache levels.  kc, mc, nc are formulas of the capacities and the run-time sizes: the
 *    kc x nr micro-panel of B may fill L1 (it is read in order and L2 resends what L1 drops,
 *    while a long k loop amortises each C-tile update), an mc x kc block of A takes half of
 *    L2, a kc x nc panel of B half of this core's share of L3; each balanced so the last
 *    block is not a sliver, and all passed to the kernels as arguments.  Packing is a
 *    choice: A into row-piece panels (generated IR transposes W x W blocks in registers),
 *    B into nr-wide panels (generated IR, read row by row, or, where the first piece of a
 *    block's rows is a full tile, by that tile's kernel as it computes); either may be
 *    read in place.
 *  - Top level.  The (batch, m, n) space is cut into a grid of thread blocks at run time
 *    (and k, below).
 *    The model scores every (family, packing, grid): kernel time from the measured rates
 *    and the DP's edge splits, per-call and C-tile costs, operand bytes from the level
 *    each operand's footprint fits over that level's per-core bandwidth (shared when all
 *    cores stream), B strips read in place costing a line more each (and a few per cent
 *    of kernel time when their vectors straddle lines or the strip crowds L1), L1 set
 *    conflicts of strided operands (power-of-two leading dimensions) as stalls, packing
 *    traffic, load imbalance (the busiest block), C lines two cores both write (an N split
 *    whose edge falls inside a line) and a fork-join; the cheapest runs, and is remembered
 *    per shape (PLAN_CACHE), so a repeated shape skips the model.
 *  - Row streaming.  For a C of at most ROWS_MAX rows (a matrix-vector product) and a B
 *    larger than the last cache, tiles would read B in strips of nr columns down its rows,
 *    a walk across pages that the hardware prefetchers follow badly: B then arrives at half
 *    the bandwidth.  A kernel that reads B row by row and keeps C's rows in L1 (emit_rows)
 *    is one more candidate, scored by its measured rate and B's bandwidth.  Its four
 *    functions are compiled (and timed) the first time a shape makes it a candidate.
 *  - Inner products.  For a C of at most DOT_MAXN columns (a matrix times a vector, or a few
 *    vectors) a tile of nr columns leaves most lanes idle.  Kernels of h x w (w <= 4) keep
 *    one vector accumulator per element of C, along k, and sum the lanes at the end: A is
 *    read once, in rows (a row piece's strips of columns in turn, from L1), and B's
 *    columns, as rows of B^T (in place when contiguous, else packed), stay in L1.  Eight
 *    functions on AVX-512 (heights 6 and 1 of each width: height 2 cost 8 ms of the
 *    part's compile and gained up to a quarter on a C of 2 to 5 rows, 5 x 16 x 257) and
 *    one that packs B^T, compiled and timed like the row-streaming ones, on first need;
 *    the model weighs them beside the tiles.  They
 *    also take a wider C's last n mod nr <= DOT_MAXN columns, as a run of their own,
 *    where a tile would compute a whole strip for them (plan_choose).
 *  - k split.  A small C over a long k gives the grid too few blocks to share: the threads
 *    then split k, each block after the first summing into its own copy of C, which are
 *    added into C at the end, by all threads (a grid dimension like the others, weighed
 *    by the model).
 * Limits: no TLB, no prefetcher and no frequency model; bandwidths are the hw file's;
 * L1 ways are the hw file's (capacity / 4 KiB, x86's VIPT rule, where it has none), but the
 * set index is taken to repeat every 4 KiB (SET_SPAN) on every CPU; the call and fork-join
 * costs are software constants (gemm_model.c's table).  Calibration runs on whatever the machine is doing at
 * compile time (best of several runs).  C must not overlap A or B; f32 and f64 here (f16 and
 * bf16 are gemm_half.c's, on the f32 engine or vdpbf16ps, summing in f32); alpha
 * is 1 and beta 0 or 1.
 */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

/* The epoch names a kernel set and its forcing for the plan each thread ran last (gemm_run.c):
 * every set gets a new one, and so does every gemm_force. */
static _Atomic uint64_t epochs;
static uint64_t new_epoch(void) { return atomic_fetch_add(&epochs, 1) + 1; }

GemmKernels *gemm_compile(DynElem elem, const HwModel *hw, char *err, size_t errlen) {
  if (elem != DYN_F32 && elem != DYN_F64) {
    snprintf(err, errlen, "gemm: element type %s is not supported (f32, f64)", elem_name(elem));
    return NULL;
  }
  double t0 = now_s();
  GemmKernels *g = xcalloc(1, sizeof *g);
  g->elem = elem;
  g->hw = *hw;
  g->esize = elem_size(elem);
  g->W = hw_vbits(hw) / (8 * g->esize);
  pthread_mutex_init(&g->ws_lock, NULL);
  pthread_mutex_init(&g->cache_lock, NULL);
  pthread_mutex_init(&g->part_lock, NULL);
  g->cache = xcalloc(PLAN_CACHE, sizeof *g->cache);
  atomic_store(&g->epoch, new_epoch());
  g->jit = jit_new(hw, err, errlen);
  if (!g->jit) {
    gemm_free(g);
    return NULL;
  }
  /* Masked vector memory operations cost about as much as plain ones only with AVX-512
   * masks, and even then not nothing: the 6x64 step (4 loads of B, 6 broadcasts, 24 FMAs)
   * in a loop of its own ran 7% slower with its loads masked on one core of Emerald Rapids
   * (140.6 against 150.6 GFLOP/s, three rounds each alike).  So the full height's full
   * tiles, nearly every step of a large product, have an unmasked kernel everywhere, and
   * only the other heights rely on this (one kernel each instead of two). */
  g->cheap_masks = hw_vbits(hw) >= 512 && strstr(jit_cpu_features(g->jit), "+avx512f");
  gemm_enumerate_tiles(g);
  gemm_dot_setup(g);
  if (!g->nfam) {
    snprintf(err, errlen, "gemm: no register tile fits %d vector registers", hw_vregs(hw));
    gemm_free(g);
    return NULL;
  }
  if (!jit_can_run(g->jit)) {
    /* A model this CPU cannot run: its kernels are printed (gemm_code) and its plans shown
     * (gemm_describe), never run.  The rates are the model's own (tile_cyc, dot_setup), not
     * measured, and every part counts as ready. */
    for (int fi = 0; fi < g->nfam; fi++) gemm_plan_edges(g, &g->fam[fi]);
    for (int h = 1; h <= ROWS_MAX; h++) g->rows_sec[h] = h / (hw_ghz(&g->hw) * 1e9);
    atomic_store(&g->rows_state, 1);
    atomic_store(&g->dot_state, 1);
    atomic_store(&g->famx_state, 1);
    g->compile_ms = (now_s() - t0) * 1e3;
    return g;
  }
  g->nfuncs = gemm_compile_part(g, EMIT_TILES, "gemm", err, errlen);
  if (!g->nfuncs) {
    gemm_free(g);
    return NULL;
  }
  char name[96];
  for (int fi = 0; fi < g->nfam && fi < EAGER_FAM; fi++)
    if (!gemm_bind_family(g, &g->fam[fi], err, errlen)) {
      gemm_free(g);
      return NULL;
    }
  packa_name(name, sizeof name, g);
  g->packa = (PackAFn)jit_lookup(g->jit, name, err, errlen);
  packb_name(name, sizeof name, g);
  g->packb = g->packa ? (PackBFn)jit_lookup(g->jit, name, err, errlen) : NULL;
  packbt_name(name, sizeof name, g);
  g->packbt = g->packb ? (PackBtFn)jit_lookup(g->jit, name, err, errlen) : NULL;
  if (!g->packbt) {
    gemm_free(g);
    return NULL;
  }
  gemm_calibrate(g, 0, EAGER_FAM);
  g->compile_ms = (now_s() - t0) * 1e3;
  return g;
}

bool gemm_bind_family(GemmKernels *g, Family *f, char *err, size_t errlen) {
  char name[96];
  for (int h = 1; h <= f->mr; h++) {
    if (!f->has[h]) continue;
    uk_name(name, sizeof name, g, f, h, true);
    f->uk[h] = (UkFn)jit_lookup(g->jit, name, err, errlen);
    f->ukf[h] = f->uk[h];                    /* at h = mr, tile_call's full tiles take ukq */
    if (!g->cheap_masks && h < f->mr) {
      uk_name(name, sizeof name, g, f, h, false);
      f->ukf[h] = (UkFn)jit_lookup(g->jit, name, err, errlen);
    }
    if (!f->uk[h] || !f->ukf[h]) return false;
  }
  if (f->has[f->mr]) {
    ukq_name(name, sizeof name, g, f);
    f->ukq = (UkPfFn)jit_lookup(g->jit, name, err, errlen);
    ukp_name(name, sizeof name, g, f);
    if (!f->ukq || !(f->ukp = (UkPackFn)jit_lookup(g->jit, name, err, errlen))) return false;
  }
  return true;
}

void gemm_free(GemmKernels *g) {
  if (!g) return;
  if (g->wide) {                 /* a 16-bit engine: its code lives in the f32 engine's JIT */
    gemm_half_free_memo(g);
    free(g->ws[0]);
    free(g->ws);
    free(g->ws_bytes);
    pthread_mutex_destroy(&g->ws_lock);
    free(g);
    return;
  }
  jit_free(g->jit);
  for (int i = 0; i < g->nws; i++) free(g->ws[i]);
  free(g->ws);
  free(g->ws_bytes);
  pthread_mutex_destroy(&g->ws_lock);
  pthread_mutex_destroy(&g->cache_lock);
  pthread_mutex_destroy(&g->part_lock);
  free(g->cache);
  free(g);
}

double gemm_compile_ms(const GemmKernels *g) { return g->compile_ms; }
void gemm_later_ms(const GemmKernels *g, double *rows_ms, double *dots_ms) {
  *rows_ms = atomic_load(&g->rows_state) > 0 ? g->rows_ms : 0;
  *dots_ms = atomic_load(&g->dot_state) > 0 ? g->dot_ms : 0;
}

bool gemm_code(GemmKernels *g, const char *what, Buf *out, char *err, size_t errlen) {
  if (g->wide) return g->half->code(g, what, out, err, errlen);
  bool asm_ = !strcmp(what, "asm");
  if (!asm_ && strcmp(what, "llvm")) {
    snprintf(err, errlen, "gemm: no code view '%s' (llvm, asm)", what);
    return false;
  }
  /* Rebuilt in a private context: the JIT owns the module it compiled, and code
   * generation is deterministic, so this is the same code. */
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = jit_module_new(g->jit, ctx, "gemm");
  gemm_emit_all(g, &ctx, &mod, 1, EMIT_TILES | EMIT_ROWS | EMIT_DOTS | EMIT_FAMX);
  bool ok = jit_optimize(g->jit, mod, GEMM_PIPELINE, err, errlen);
  if (ok) {
    if (asm_) ok = jit_print_asm(g->jit, mod, out, err, errlen);
    else jit_print_ir(mod, out);
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return ok;
}
void gemm_force(GemmKernels *g, const GemmForce *f) {
  if (f) g->force = *f;
  else memset(&g->force, 0, sizeof g->force);
  pthread_mutex_lock(&g->cache_lock);
  memset(g->cache, 0, PLAN_CACHE * sizeof *g->cache);
  atomic_store(&g->epoch, new_epoch());
  pthread_mutex_unlock(&g->cache_lock);
}

int gemm_families(const GemmKernels *g, int *mr, int *nr, int max) {
  if (g->wide && !g->dp) return gemm_families(g->wide, mr, nr, max);
  if (g->wide) {
    if (max > 0) mr[0] = DP_MR, nr[0] = DP_NR;
    return 1;
  }
  for (int i = 0; i < g->nfam && i < max; i++) {
    mr[i] = g->fam[i].mr;
    nr[i] = g->fam[i].nr;
  }
  return g->nfam;
}

