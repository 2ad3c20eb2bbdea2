/* cuda_plan.c -- the GPU back end's model: for one kernel and one shape, which variant runs
 * and with what launch (grid, block, split of K, workspace), from the hw file or the device
 * only; and the schedule that :sched prints from it.  Pure arithmetic on a CudaProgram from
 * cuda_analyse.c: cuda_run.c launches what it picks, and the tests weigh it with no GPU. */
#include "config.h"
#include "cuda_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model: choosing a variant and a launch per kernel and shape ----------------------- */

/* HBM's bandwidth; 1 TB/s for a model without one. */
static double mem_bw(const HwModel *hw) { return sched_mem_bw(hw, 1e12); }

static double peak_flops(const HwModel *hw) {
  double p = hw->peak_gflops_f32 > 0 ? hw->peak_gflops_f32 * 1e9 : hw->fp32_tflops * 1e12;
  return p > 0 ? p : 1e13;
}

/* The peak of the units a contraction's tiles run on: the CUDA cores, or the tensor cores'
 * dense tf32 or bf16 rate (hw/README.md: tf32_tflops, bf16_tflops).  f16 and bf16 operands
 * as stored run at the 16-bit rate, bf16_tflops: with f32 accumulation f16's is the same on
 * every GPU from 8.0 (the A100, H100, L4 and Ada whitepapers' tensor-core tables). */
static double math_peak(const HwModel *hw, CudaMath m, DynElem et) {
  double t = elem_is_half(et) || m == CUDA_BF16 ? hw->bf16_tflops : m == CUDA_TF32 ? hw->tf32_tflops : 0;
  return t > 0 ? t * 1e12 : peak_flops(hw);
}

/* The padding of a tile's rows, as the prelude's DynGemm and DynMma have it: 4 floats, or on
 * the tensor cores 8 where tf32 reads across rows or bf16 along them (against bank conflicts),
 * and 8 halves either way for 16-bit operands. */
static int gemm_pad(CudaMath m, DynElem et, bool kc) {
  if (elem_is_half(et)) return 8;
  if (m == CUDA_EXACT) return 4;
  return (m == CUDA_BF16) == kc ? 8 : 4;
}

/* Shared memory of a tile shape (two buffers of A and B of et, rows padded). */
static int gemm_smem(const GemmShape *g, CudaMath m, DynElem et, bool a_kc, bool b_kc) {
  bool sb_kc = m == CUDA_EXACT && !elem_is_half(et) ? b_kc && !a_kc : b_kc;
  int a = (a_kc ? g->bm : g->bk) * ((a_kc ? g->bk : g->bm) + gemm_pad(m, et, a_kc));
  int b = (sb_kc ? g->bn : g->bk) * ((sb_kc ? g->bk : g->bn) + gemm_pad(m, et, sb_kc));
  return 2 * (a + b) * elem_size(et);
}

#define GEMM_BLOCK_CYCLES 2000.0    /* a wave's pipeline fill and epilogue */
#define GEMM_SPLIT_CYCLES 6000.0    /* the launch of the split-K sum */

/* Registers per thread: the driver's count once loaded, else what the kernels are compiled
 * to (__launch_bounds__ holds tiles of 64 accumulators to 128; ptxas gives the smaller ones
 * about 80). */
static int gemm_regs_guess(const GemmShape *g) { return g->tm * g->tn >= 64 ? 128 : 80; }

/* Predicted seconds of one tile shape and split on hw, its tiles computing in math on elements
 * et (f16 and bf16 at the 16-bit rate; f64 at the f32 peak: the hw files carry no f64 figure, which makes the times of
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
static double gemm_time(const HwModel *hw, const GemmShape *g, CudaMath math, DynElem et, int regs, int smem, int64_t batch,
                        int64_t m, int64_t n, int64_t k, int splits, CudaGemmPlan *out) {
  int es = elem_size(et);
  int sms = hw->sm_count > 0 ? hw->sm_count : 1;
  int threads = cuana_gemm_threads(g);
  int regs_sm = hw->regs_per_sm > 0 ? hw->regs_per_sm : 65536;
  int64_t smem_sm = hw->smem_per_sm > 0 ? hw->smem_per_sm : 98304;
  int r8 = (regs + 7) / 8 * 8;
  int by_regs = regs_sm / (r8 * threads);
  int by_smem = (int)(smem_sm / (smem > 0 ? smem : 1));
  int by_threads = (regs_sm / 32) / threads;      /* warp slots: 2048 threads where registers are 64K */
  int bps = by_regs < by_smem ? by_regs : by_smem;
  if (by_threads < bps) bps = by_threads;
  if (bps < 1) bps = 1;
  int64_t tiles = sched_cdiv(m, g->bm) * sched_cdiv(n, g->bn) * batch;
  int64_t blocks = tiles * splits;
  int64_t kp = sched_cdiv(sched_cdiv(k, splits), g->bk) * g->bk;
  double flops_block = 2.0 * g->bm * g->bn * (double)kp;
  double peak = math_peak(hw, math, et);
  const HwLevel *sm = sched_level(hw, "smem"), *l2 = sched_level(hw, "L2");
  double rows = g->wm ? g->bm / g->wm : g->tm, cols = g->wn ? g->bn / g->wn : g->tn;
  double intensity = 2.0 * rows * cols / ((rows + cols) * es);
  double eff = sm && sm->gbs > 0 ? sm->gbs * 1e9 * intensity / peak : 1.0;
  if (eff > 1) eff = 1;
  int64_t per_sm = sched_cdiv(blocks, sms);
  int64_t resident = per_sm < bps ? per_sm : bps;
  double occ = (double)resident * threads / 32 / 8.0;
  if (occ > 1) occ = 1;
  double t_compute = (double)per_sm * flops_block / (peak / sms * eff * occ);
  double bytes = (double)es * batch * ((double)m * k + (double)k * n + (double)m * n);
  if (splits > 1) bytes += (elem_is_half(et) ? 4.0 : es) * 2 * splits * batch * m * n;   /* partial tiles: the accumulators' type */
  double t_mem = bytes / mem_bw(hw);
  double l2_bytes = (double)es * batch * ((double)m * k * sched_cdiv(n, g->bn) + (double)k * n * sched_cdiv(m, g->bm));
  double t_l2 = l2 && l2->gbs > 0 ? l2_bytes / (l2->gbs * 1e9) : 0;
  double t = t_compute > t_mem ? t_compute : t_mem;
  if (t_l2 > t) t = t_l2;
  /* fixed costs, in GPU clock cycles (model assumptions, not hw figures): a block's first
   * tiles arrive before its pipeline runs and its epilogue follows it, about one memory
   * round trip per wave of blocks; a split K adds the summing kernel's launch */
  double ghz = hw->ghz > 0 ? hw->ghz : 1.5;
  int64_t waves = sched_waves(blocks, (int64_t)sms * bps);
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
    out->waves = (double)waves;
    out->predicted_s = t;
  }
  return t;
}

static const int SPLITS[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};

/* The launch model's thresholds.  Rules of thumb from the GPU's arithmetic, not fitted to
 * runs (no GPU was at hand to fit them on); each names what it guards against.
 *   SPLIT_WIN            a split K must predict under this share of the best unsplit time:
 *                        it adds a kernel and a pass over the partial tiles, which the model
 *                        prices only roughly
 *   WARP_RED_MIN         a warp per output only for reductions of at least a warp's 32 lanes
 *   WARP_OUTPUTS_PER_SM  ... or when there are fewer outputs than this per SM (two warps'
 *                        worth): a thread per output would leave the SMs idle
 *   ROW_WARP_MAX         a row of up to this many elements is a warp's (32 each for 32 lanes),
 *                        given two rows per SM at least
 *   ROW_BLOCK256_MAX     a longer row takes a block of 256, or of 1024 past this length when
 *                        there are fewer rows than SMs
 *   GRID_RED_MIN         a reduction to one value spreads over the grid from this many
 *                        elements (64 blocks' worth), below which one block is enough
 *   GRID_RED_CHUNK       elements a block of the grid reduction takes at least
 *   GRID_RED_PER_SM      blocks per SM at most: enough in flight, few partial sums */
#define SPLIT_WIN 0.9
#define WARP_RED_MIN 32
#define WARP_OUTPUTS_PER_SM 64
#define ROW_WARP_MAX 1024
#define ROW_BLOCK256_MAX 2048
#define GRID_RED_MIN 65536
#define GRID_RED_CHUNK 1024
#define GRID_RED_PER_SM 4

/* The best tile shape (of those for math and et) and split: the least predicted time; a split
 * must win by more than 10% besides its own costs (it adds a kernel and a pass over the
 * partial tiles). */
static int gemm_choose(const HwModel *hw, CudaMath math, DynElem et, const int *regs, bool a_kc, bool b_kc, int64_t batch, int64_t m,
                       int64_t n, int64_t k, int force_shape, int force_splits, CudaGemmPlan *best) {
  double best_t = INFINITY, best_unsplit = INFINITY;
  int best_g = -1;
  CudaGemmPlan unsplit = {0};
  int unsplit_g = -1, nshapes;
  const GemmShape *shapes = cuana_gemm_shapes(math, et, &nshapes);
  for (int g = 0; g < nshapes; g++) {
    if (force_shape >= 0 && g != force_shape) continue;
    const GemmShape *gs = &shapes[g];
    int r = regs && regs[g] > 0 ? regs[g] : gemm_regs_guess(gs);
    int ns = force_splits > 0 ? 1 : (int)(sizeof SPLITS / sizeof *SPLITS);
    for (int si = 0; si < ns; si++) {
      int s = force_splits > 0 ? force_splits : SPLITS[si];
      if (force_splits <= 0 && s > 1 && (sched_cdiv(k, s) < 2 * gs->bk || s > sched_cdiv(k, gs->bk))) continue;
      CudaGemmPlan pl;
      double t = gemm_time(hw, gs, math, et, r, gemm_smem(gs, math, et, a_kc, b_kc), batch, m, n, k, s, &pl);
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
  if (force_splits <= 0 && unsplit_g >= 0 && best->splits > 1 && !(best_t < SPLIT_WIN * best_unsplit)) {
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
  grid[0] = clamp_grid(sched_cdiv(inner, bx), 1 << 30);
  grid[1] = clamp_grid(sched_cdiv(rows, by), 65535);
  grid[2] = 1;
}

static int64_t prod_ext(const int64_t *ext, const int *ax, int n) {
  int64_t v = 1;
  for (int i = 0; i < n; i++) v *= ext[ax[i]];
  return v;
}

static int64_t slot_stride(const int64_t *strides, int slot, int pos) { return pos < 0 ? 0 : strides[slot * DYN_MAX_RANK + pos]; }

void cuplan_kernel(const CudaProgram *cp, const CK *ck, const int64_t *ext, const int64_t *shape, const int64_t *strides,
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
      bool use = fv >= 0 ? fv == w : red >= WARP_RED_MIN && (ck->r_contig > ck->o_contig || outputs < (int64_t)sms * WARP_OUTPUTS_PER_SM);
      if (use) {
        L->var = w;
        L->block[0] = 32;
        L->block[1] = 8;
        L->block[2] = 1;
        L->grid[0] = clamp_grid(sched_cdiv(outputs, 8), 0x7fffffff);
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
      cuana_find_coop(kn->stages[s].expr, co, &nco, 16);
      for (int i = 0; i < nco && i < 16; i++) {
        int64_t r = prod_ext(ext, co[i]->raxes, co[i]->nraxes);
        if (r > n) n = r;
      }
      if (n > len) len = n;
    }
    /* short rows, many of them: a warp each; else a block each, the larger one when there are
     * fewer rows than SMs (more threads in flight per SM) and the row gives them work */
    int kind = len <= ROW_WARP_MAX && rows >= 2 * (int64_t)sms ? V_WARP
               : rows >= sms || len < ROW_BLOCK256_MAX ? V_BLOCK256 : V_BLOCK1024;
    L->var = fv >= 0 ? fv : find_var(ck, kind, 0);
    const Var *v = &ck->v[L->var];
    L->block[0] = (unsigned)v->lanes;
    L->block[1] = (unsigned)v->rows;
    L->block[2] = 1;
    L->grid[0] = clamp_grid(sched_cdiv(rows, v->rows), 0x7fffffff);
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
    bool use = g >= 0 && (fv >= 0 ? fv == g : red >= GRID_RED_MIN);
    if (use) {
      int64_t blocks = sched_cdiv(red, GRID_RED_CHUNK);
      if (blocks > GRID_RED_PER_SM * (int64_t)sms) blocks = GRID_RED_PER_SM * (int64_t)sms;
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
    const GemmShape *shapes = cuana_gemm_shapes(ck->math, ck->et, &nshapes);
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
    L->block[0] = (unsigned)cuana_gemm_threads(gs);
    L->block[1] = L->block[2] = 1;
    int64_t tiles = sched_cdiv(m, gs->bm) * sched_cdiv(n, gs->bn) * batch;
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
    bool sb_kc = ck->b_kc && (cuana_tc(ck) || !ck->a_kc);
    if (sb_kc) L->bvec = b_sk == 1 && b_sn % V == 0 && b_sb % V == 0;
    else if (!ck->b_kc) L->bvec = b_sn == 1 && b_sk % V == 0 && b_sb % V == 0;
    if (L->splits > 1) {
      /* the partial tiles in the accumulators' type: f32 for 16-bit operands */
      L->ws = (size_t)L->splits * (size_t)batch * (size_t)m * (size_t)n * (size_t)(elem_is_half(ck->et) ? 4 : elem_size(ck->et));
      L->var2 = find_var(ck, V_SPLITK, 0);
      loop_dims(n, batch * m, L->grid2, L->block2);
    }
    snprintf(L->why, sizeof L->why, "%stiles %dx%d, %d threads, K in %d part%s: %lld blocks, %d per SM, %.0f wave%s",
             elem_is_half(ck->et) ? "mma16 " : ck->math == CUDA_EXACT ? "" : ck->math == CUDA_TF32 ? "tf32 " : "bf16 ", gs->bm, gs->bn, (int)L->block[0], L->splits,
             L->splits == 1 ? "" : "s", (long long)L->gp.blocks, L->gp.blocks_per_sm, L->gp.waves, L->gp.waves == 1 ? "" : "s");
    return;
  }
  }
}

/* ---- the schedule, for :sched ------------------------------------------------------------------ */

static void describe_kernel(const CudaProgram *cp, const CK *ck, Buf *out) {
  const Program *p = cp->p;
  const Kernel *kn = ck->kn;
  buf_printf(out, "kernel %s\n", kn->name);
  switch (ck->kind) {
  case CK_GEMM: {
    bool tc = cuana_tc(ck), h16 = elem_is_half(ck->et);
    buf_printf(out, "  contraction over %s: %s (%s) x %s (%s) -> %s%s, ", p->axes[ck->kax].name, p->slots[ck->ga].name,
               ck->a_kc ? "k contiguous" : "m contiguous", p->slots[ck->gb].name, ck->b_kc ? "k contiguous" : "n contiguous",
               p->slots[ck->gc].name, ck->bax >= 0 ? ", batched" : "");
    if (h16) buf_printf(out, "%s operands as stored on the tensor cores, exact products, f32 sums\n", elem_name(ck->et));
    else if (tc) buf_printf(out, "%s on the tensor cores, f32 sums\n", cuda_math_name(ck->math));
    else if (ck->et == DYN_F64) buf_puts(out, "exact f64 on the CUDA cores\n");
    else if (cp->math != CUDA_EXACT)
      buf_printf(out, "exact f32 on the CUDA cores\n  (%s asked for: the tensor cores take it from compute capability 8.0; this GPU is %d.%d)\n",
                 cuda_math_name(cp->math), cp->hw.cc_major, cp->hw.cc_minor);
    else buf_puts(out, "exact f32 on the CUDA cores\n");
    buf_puts(out, "  grid:    a block per tile of the output and batch (groups of 8 tile-rows share B in L2); split K on z\n");
    buf_puts(out, "  block:   A and B tiles in shared memory, two buffers (cp.async from sm_80)\n");
    if (h16)
      buf_printf(out, "  warp:    a tile of the output in mma.sync.m16n8k16 tiles, %s fragments read from shared memory as they are\n"
                      "  thread:  its fragments: four outputs of each mma tile\n  variants:", elem_name(ck->et));
    else if (tc)
      buf_printf(out, "  warp:    a tile of the output in mma.sync.m16n8k%d tiles, operands rounded to %s from shared memory\n"
                      "  thread:  its fragments: four outputs of each mma tile\n  variants:", ck->math == CUDA_BF16 ? 16 : 8,
                 cuda_math_name(ck->math));
    else buf_puts(out, "  thread:  a register tile of outputs\n  variants:");
    int nshapes;
    const GemmShape *shapes = cuana_gemm_shapes(ck->math, ck->et, &nshapes);
    for (int g = 0; g < nshapes; g++) {
      const GemmShape *gs = &shapes[g];
      int vi = find_var(ck, V_GEMM, g);
      if (tc)
        buf_printf(out, " %dx%d (%d warps of %dx%d, k-step %d", gs->bm, gs->bn, gs->wm * gs->wn, gs->bm / gs->wm, gs->bn / gs->wn,
                   gs->bk);
      else
        buf_printf(out, " %dx%d (%d threads, %dx%d each, k-step %d", gs->bm, gs->bn, cuana_gemm_threads(gs), gs->tm, gs->tn, gs->bk);
      if (vi >= 0 && ck->v[vi].regs) buf_printf(out, ", %d registers", ck->v[vi].regs);
      buf_puts(out, g + 1 < nshapes ? ")," : ")\n");
    }
    break;
  }
  case CK_ROW:
    buf_puts(out, "  row-wise over ");
    curender_axes_list(cp, ck->outer, ck->nouter, out);
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
    curender_axes_list(cp, kn->stages[0].axes, kn->stages[0].naxes, out);
    buf_puts(out, ": a thread per element of the last axis, rows on the grid's y");
    if (ck->vec4) buf_puts(out, "; 16-byte accesses when the last axis allows");
    buf_putc(out, '\n');
    if (ck->virt) buf_puts(out, "  reductions: in the thread, or a warp per output when they are long and contiguous\n");
    break;
  }
}

double cuda_describe(const CudaProgram *cp, PolyCtx *pc, const Extents *x, Buf *out) {
  const Program *p = cp->p;
  buf_printf(out, "target %s: %s, %d SMs, compute capability %d.%d\n", cp->hw.name, cp->hw.desc, cp->hw.sm_count, cp->hw.cc_major,
             cp->hw.cc_minor);
  double total = 0;
  /* the sizes bound once (extents.c); sizes that do not evaluate describe every shape */
  bool have = x && x->ok;
  const EvalSizes *sz = x ? &x->sz : NULL;
  for (int k = 0; k < cp->nk; k++) {
    const CK *ck = &cp->k[k];
    describe_kernel(cp, ck, out);
    if (!have) continue;
    Launch L;
    const char *force = cp->be ? cp->be->force : NULL;
    cuplan_kernel(cp, ck, x->ext, x->shape, x->strides, force, cp->be ? cp->be->force_splits : 0, &L);
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
      t = sched_roofline(&cp->hw, cp->hw.sm_count, (double)fv, (double)bv);
    }
    buf_printf(out, "  this shape: %s -> %s, %u x %u x %u blocks of %u x %u threads; predicted %.4f ms\n", L.why, ck->v[L.var].name,
               L.grid[0], L.grid[1], L.grid[2], L.block[0], L.block[1], t * 1e3);
    if (L.var2 >= 0) buf_printf(out, "              then %s sums the %d parts\n", ck->v[L.var2].name, L.splits);
    total += t;
  }
  if (have) buf_printf(out, "predicted total: %.4f ms\n", total * 1e3);
  return total;
}
