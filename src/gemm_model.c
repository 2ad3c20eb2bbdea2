/* gemm_model.c -- the contraction engine's analytical model (the design note is in gemm.c):
 * register and inner-product tiles enumerated from the hardware with their modelled rates,
 * the DP over edges, calibration of every kernel's rate, and at run time the plan: kernel,
 * packing, cache blocks and thread grid, each priced in seconds, the cheapest chosen;
 * gemm_describe shows it for :sched.  The parts a plan may want compiled on first need
 * (gemm_part_ensure) and a call's arguments normalised (gemm_normalise) are here too, below
 * the files that call them.  Its software constants are the table below. */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model's constants ----
 *
 * Every other figure the model uses is the hardware's, from the hw file (HwModel) or from
 * calibration; these are what it charges for software, or corrections fitted where the
 * measured rates and bandwidths fell short.  All were fitted on 2 threads of a Zen 5 host
 * (the commits that set them give the runs).
 *
 *   name          value    what it is                                   how it was fitted
 *   CALL_CYC      20       cycles a kernel call costs beyond its FMAs    whole runs of small
 *                          and C tile (edge DP, tiles, inner products)   products (see below)
 *   sync          0.3 us   a fork-join on a pool whose workers spin      0.16 us with empty
 *                          (sched_sync_s: dyn --calibrate measures it)   tasks, 0.2-0.4 beside
 *                                                                        small products
 *   WS_S          40 ns    a plan's workspace: lock, canaries, packing   2 x 2 x 2: 80 ns
 *                          calls and thread blocks                       packed, 23 in place
 *   SPLIT_LOADS   5%       kernels reading B in place whose vectors      16 x 511 x 511 x 128,
 *                          straddle lines run slower than calibrated     12 x 100 x 100 x 64
 *   CROWDED_L1    7%       ... and when the strip fills most of L1       1000 x 768 x 768
 *   FAR_PIECE     3        lines more a row's piece of a B strip costs   50 x 4000 x 20000,
 *                          read from memory with nothing fetching ahead  8 x 8000 x 8000,
 *                          of it, a wait the FMAs do not hide            one thread of Zen 4
 *   KSPLIT_MAX_C  256 Ki   k is split over threads only for a C of at    16 x 16 x 100000,
 *   KSPLIT_MIN_K  256      most this many elements and a k this long     1 x 1 x 100000
 *   BT_SITU       2.0      B^T packed in a plan over packbt's calibrated 2 x 16 x 5000 against
 *                          time (its rows come from L2 or further)       31 x 16 x 1000
 *   SPLIT_GAIN    0.95     a wide C's last columns run apart as inner    2048 x 33 x 513,
 *   SPLIT_S       0.3 us   products when that beats one plan by this     1000 x 97 x 3,
 *                          factor and this time (the second run's cost)  127 x 65 x 2
 *
 * The cost of a C line that two cores both write (an N split whose edge falls inside a
 * line, and a k split's C and copies at every call) is the hardware's, line_move_ns in the
 * hw file (sched_line_move_s). */

/* CALL_CYC, a software overhead, is in gemm_int.h, and the fork-join sched.c's sched_sync_s
 * (where dyn --calibrate measured one, its figure): the 16-bit engine (gemm_half.c) prices
 * its calls and fork-joins with the same two. */
/* A plan that packs runs through a workspace, where a plan reading both operands in place
 * may call one kernel directly (2 x 2 x 2: 80 ns packed, 23 ns in place). */
#define WS_S 40e-9
/* B read in place: packed B ran 7-10% faster at 16 x 511 x 511 x 128 and in place 4% faster
 * at 12 x 100 x 100 x 64, where packing costs relatively more (SPLIT_LOADS); packed B 3-5%
 * faster at 1000 x 768 x 768, where the strip fills most of L1 (CROWDED_L1).  A B whose rows
 * are whole lines apart but that starts 16 bytes past a line splits as many loads: on one
 * thread of Emerald Rapids, 64 x 3136 x 576 (an im2col'd 3 x 3 layer) read B in place 22%
 * slower than from a line (5 lines a strip's row instead of 4), packed 3-8% slower. */
#define SPLIT_LOADS 0.05
#define CROWDED_L1 0.07
#define FAR_PIECE 3               /* see far_b_s */
#define KSPLIT_MAX_C (256 << 10)
#define KSPLIT_MIN_K 256
#define BT_SITU 2.0               /* see plan_eval_dot */
#define SPLIT_GAIN 0.95           /* see gemm_plan_choose */
#define SPLIT_S 0.3e-6

/* ---- level 0: enumerate register tiles ---- */

static int tile_ksplit(const HwModel *h, int mr, int v) {
  int need = hw_fma_lat(h) * hw_fma_units(h), acc = mr * v;
  int ks = (need + acc - 1) / acc;
  /* each extra set needs its accumulators and the B vectors of its own k step */
  while (ks > 1 && acc * ks + v * ks + 1 > hw_vregs(h)) ks--;
  return ks;
}

/* Cycles per k step of an h-row tile: FMA throughput, or the FMA latency over the
 * accumulator chains when there are too few of them. */
static double tile_cyc(const HwModel *h, int mr, int v, int ks) {
  double thr = (double)mr * v / hw_fma_units(h);
  double lat = (double)hw_fma_lat(h) / ks;
  return thr > lat ? thr : lat;
}

/* DP over edges: the cheapest split of r < 2*mr rows into emitted heights.  A piece of
 * height h covers min(h, rows left) rows and costs, per k step, the larger of its FMA time
 * and the time to read its B strip again (it follows another piece over the same strip):
 * several short pieces can cost more than one padded tall one.  At most MAX_PIECES pieces,
 * so the state counts them: best[k][r] is the cheapest split of r rows into k pieces or
 * fewer.  (It was the cheapest split of r alone, each r's extended by one piece; where the
 * rates measured at start-up made short pieces cheap -- a loaded machine -- every way to
 * extend the split of some r had too many pieces, r got none, and spelling it out never
 * ended: a crash in the start-up of one process in a few hundred under load.) */
void gemm_plan_edges(const GemmKernels *g, Family *f) {
  const HwModel *hm = &g->hw;
  double strip = (double)f->nr * g->esize, line = (double)sched_line_bytes(hm);
  /* a packed strip comes back from L1; one in place from L2, its rows far apart, where a
   * row's piece of s bytes costs as much as s + one line (as from memory, model_block):
   * 16 x 768 x 768 ran its 2-row piece of 14 + 2 at 47 GFLOP/s on Zen 4, its B at 47 GB/s */
  double reload[2] = { strip / sched_level_bw(hm, 1),
                       (strip + line) / sched_level_bw(hm, hw_cache_bytes(hm, 0) + 1) };
  double call = CALL_CYC / 256.0 / (hw_ghz(hm) * 1e9);
  for (int t = 0; t < 2; t++) {
    /* first[k][r]: the first piece of best[k][r]'s split, 0 where it is best[k - 1][r]'s */
    double best[MAX_PIECES + 1][2 * MAX_MR];
    int first[MAX_PIECES + 1][2 * MAX_MR];
    for (int k = 0; k <= MAX_PIECES; k++) {
      best[k][0] = 0;
      first[k][0] = 0;
      for (int r = 1; r < 2 * f->mr; r++) {
        best[k][r] = k ? best[k - 1][r] : INFINITY;
        first[k][r] = 0;
        for (int hgt = 1; k && hgt <= f->mr; hgt++) {
          if (!f->has[hgt]) continue;
          int covered = hgt < r ? hgt : r;
          double piece = f->ksec[hgt] > reload[t] ? f->ksec[hgt] : reload[t];
          double c = best[k - 1][r - covered] + piece + call;
          if (c < best[k][r] * (1 - 1e-9)) {
            best[k][r] = c;
            first[k][r] = hgt;
          }
        }
      }
    }
    /* every family has its full height (gemm_enumerate_tiles), so two pieces cover any r */
    for (int r = 1; r < 2 * f->mr; r++) {
      int j = 0;
      for (int rr = r, k = MAX_PIECES; rr > 0 && k > 0; k--) {
        if (!first[k][rr]) continue;                /* as with one piece fewer */
        f->dec[t][r][j++] = (uint8_t)first[k][rr];
        rr -= first[k][rr] < rr ? first[k][rr] : rr;
      }
      f->dec_n[t][r] = (uint8_t)j;
      f->dec_sec[t][r] = best[MAX_PIECES][r];
    }
  }
}

/* One core's rate in GFLOP/s for a tile of height h, from its seconds per k step. */
static double tile_gflops(const Family *f, int h) {
  return f->ksec[h] > 0 ? 2.0 * h * f->nr / f->ksec[h] * 1e-9 : 0;
}

void gemm_enumerate_tiles(GemmKernels *g) {
  const HwModel *h = &g->hw;
  int regs = hw_vregs(h), need = hw_fma_lat(h) * hw_fma_units(h);
  g->ncand = 0;
  for (int v = 1; v <= MAX_V; v++)
    for (int mr = 1; mr <= MAX_MR; mr++) {
      int used = mr * v + v + 1;
      /* Registers, enough accumulators for the FMA latency, and no more loads (mr
       * broadcasts, v vectors) than FMAs per k step: cores have about as many load ports
       * as FMA pipes, so a 16x16 tile (17 loads, 16 FMAs) runs at half speed on Zen 5. */
      if (used > regs || mr * v < need || mr + v > mr * v || g->ncand == MAX_CAND) continue;
      double nr = (double)v * g->W;
      g->cand[g->ncand++] = (Tile){ .mr = mr, .v = v, .regs = used, .ksplit = 1,
                                    .score = 2.0 * mr * nr / (mr + nr) };
    }
  /* Keep the best tile of each width; then, of those, the best scored, the widest and the
   * narrowest, then the rest by score, up to MAX_FAM.  The run-time model needs the spread
   * more than a second near-equal tile: a narrow tile wastes less on an n-edge, a wide one
   * streams B in place (small M) in longer pieces per row. */
  int best[MAX_V + 1];
  for (int v = 0; v <= MAX_V; v++) best[v] = -1;
  for (int i = 0; i < g->ncand; i++) {
    int v = g->cand[i].v;
    if (best[v] < 0 || g->cand[i].score > g->cand[best[v]].score) best[v] = i;
  }
  int order[MAX_V + 1], no = 0, top = -1, wide = -1, narrow = -1;
  for (int v = 1; v <= MAX_V; v++)
    if (best[v] >= 0) {
      if (top < 0 || g->cand[best[v]].score > g->cand[top].score) top = best[v];
      if (narrow < 0) narrow = best[v];
      wide = best[v];
    }
  if (top >= 0) order[no++] = top;
  if (wide >= 0 && wide != top) order[no++] = wide;
  if (narrow >= 0 && narrow != top && narrow != wide) order[no++] = narrow;
  for (;;) {                     /* the rest, best first */
    int pick = -1;
    for (int v = 1; v <= MAX_V; v++) {
      int c = best[v];
      bool taken = false;
      for (int i = 0; i < no; i++) taken |= order[i] == c;
      if (c >= 0 && !taken && (pick < 0 || g->cand[c].score > g->cand[pick].score)) pick = c;
    }
    if (pick < 0) break;
    order[no++] = pick;
  }
  g->nfam = 0;
  for (int k = 0; k < no && k < MAX_FAM; k++) {
    g->cand[order[k]].kept = true;
    Family *f = &g->fam[g->nfam++];
    memset(f, 0, sizeof *f);
    f->mr = g->cand[order[k]].mr;
    f->v = g->cand[order[k]].v;
    f->nr = f->v * g->W;
    f->score = g->cand[order[k]].score;
  }
  /* Heights per family, their accumulator splits and modelled speeds: mr and the powers
   * of two below it, and every height of the shortest family, so that a C of a few rows
   * (a batch of 3, 5 or 7) runs on tiles of its own height, where a taller tile computed
   * rows it never stores.  One thread of a Zen 4 guest, :time medians, 5 x 768 x 768 on a
   * 6-row tile 63 us, on 5 rows 53 (oneDNN 53); 7 x 768 x 768 on 8 rows of 14x32 88-90,
   * on 3 + 4 rows of 6x64 76 (oneDNN 73).  Every height of every family cost 40 ms more
   * compiling (55 -> 95 ms); these few, two or four functions, a tenth of that. */
  int shortest = 0;
  for (int i = 1; i < g->nfam; i++)
    if (g->fam[i].mr < g->fam[shortest].mr) shortest = i;
  for (int i = 0; i < g->nfam; i++) {
    Family *f = &g->fam[i];
    for (int hgt = 1; hgt <= f->mr; hgt++) {
      if ((hgt & (hgt - 1)) && hgt != f->mr && i != shortest) continue;
      f->has[hgt] = true;
      f->ksplit[hgt] = tile_ksplit(h, hgt, f->v);
      f->ksec[hgt] = tile_cyc(h, hgt, f->v, f->ksplit[hgt]) / (hw_ghz(h) * 1e9);
    }
    gemm_plan_edges(g, f);
  }
}

/* The inner-product tiles: for each width w, the tallest h whose h*w accumulators, w
 * vectors of B^T and one of A fit the registers, the tallest of the widest (several strips
 * of columns take their row pieces together, one height for all, so that A's rows stay in
 * L1 from strip to strip), and the heights 2 and 1 (an edge of r rows runs as the tallest
 * that fit, in turn: each height is a function to compile, and an edge costs little beside
 * the tall tiles); accumulator sets to hide the FMA latency where h*w chains are too few. */
void gemm_dot_setup(GemmKernels *g) {
  const HwModel *hm = &g->hw;
  int regs = hw_vregs(hm), need = hw_fma_lat(hm) * hw_fma_units(hm);
  DotSet *d = &g->dot;
  memset(d, 0, sizeof *d);
  for (int w = DOT_WMAX; w >= 1; w--) {
    int H = DOT_HMAX;
    while (H > 1 && H * w + w + 1 > regs) H--;
    d->hmax[w] = H;
    for (int h = 1; h <= H; h++) {
      if (h != H && h != d->hmax[DOT_WMAX] && h > 1) continue;
      int ks = (need + h * w - 1) / (h * w);
      while (ks > 1 && (h * w + w) * ks + 1 > regs) ks--;
      d->has[w][h] = true;
      d->ks[w][h] = ks;
      /* until calibrated: FMA throughput or latency, loads at two a cycle */
      double cyc = fmax(fmax((double)h * w / hw_fma_units(hm), (double)hw_fma_lat(hm) / ks), (h + w) / 2.0);
      d->vsec[w][h] = cyc / (hw_ghz(hm) * 1e9);
      d->call[w][h] = (CALL_CYC + 8.0 * h * w) / (hw_ghz(hm) * 1e9);
    }
  }
}

/* Calibration, the hybrid part of the model: every kernel timed once on operands that stay
 * in L1 (one column of A and one row of B, a_cs = b_rs = 0), best of CAL_TRIALS runs of
 * about CAL_S seconds each.  It measures the hardware -- e.g. Zen 5 issues about one
 * broadcast load per cycle, which halves a 16x16 tile and no FMA count predicts -- never
 * a shape, and costs a little over a millisecond (1.1-1.4 ms on Zen 5). */
#define CAL_K 512
#define CAL_K0 4
#define CAL_CALLS 1024
#define CAL_TRIALS 5
#define CAL_S 20e-6
void gemm_calibrate(GemmKernels *g, int f0, int f1) {
  size_t es = (size_t)g->esize;
  char *mem = xcalloc(1, (MAX_MR + MAX_V * 16 + MAX_MR * MAX_V * 16) * es * 2 + 256);
  char *a = align64(mem), *b = align64(a + MAX_MR * es), *c = align64(b + MAX_V * 16 * es * 2);
  for (int fi = f0; fi < f1 && fi < g->nfam; fi++) {
    Family *f = &g->fam[fi];
    for (int h = 1; h <= f->mr; h++) {
      if (!f->has[h]) continue;
#define UK(kc, beta) tile_call(g, f, h, h, f->nr, kc, a, 1, 0, b, 0, c, f->nr, beta, NULL)
      int64_t reps = (int64_t)(CAL_S / (f->ksec[h] * CAL_K));
      reps = imax(1, imin(reps, 10000));
      UK(CAL_K, 1);
      double best = 1e30;
      for (int t = 0; t < CAL_TRIALS; t++) {
        double t0 = now_s();
        for (int64_t r = 0; r < reps; r++) UK(CAL_K, 1);
        double dt = (now_s() - t0) / ((double)reps * CAL_K);
        if (dt < best) best = dt;
      }
      /* (a family calibrated after gemm_sustain scaled the others: scaled alike) */
      double step = best > 0 && best < 1 ? best : f->ksec[h] / gemm_slow(g);
      f->ksec[h] = step * gemm_slow(g);
      /* the fixed cost of a call: CAL_CALLS calls over CAL_K0 steps, less those steps.  A
       * tall tile sets up a pointer per row of A (spilled past the registers) and stores
       * more rows: on Zen 5 the 14x32 tile's call costs about 10 ns, the 6x64 one's 3,
       * which the model's formula (20 cycles and a load and store a vector, model_block)
       * called nearly equal; at k = 3 the 6x64 tiles ran 672 x 448 in 9.8 us, the 14x32
       * ones in 12.7.  (C tiles walking across 450 KB, as a block's do, gave about the
       * same figures and took 2 ms of the start-up; these calls take about 0.3 ms.) */
      best = 1e30;
      for (int t = 0; t < CAL_TRIALS; t++) {
        double t0 = now_s();
        for (int r = 0; r < CAL_CALLS; r++) UK(CAL_K0, 0);
        double dt = (now_s() - t0) / CAL_CALLS;
        if (dt < best) best = dt;
      }
#undef UK
      best -= CAL_K0 * step;
      if (best > 0 && best < 1e-3) f->call_s[h] = best;
    }
    f->measured = true;
    gemm_plan_edges(g, f);
  }
  free(mem);
  /* The model's cost of a call (CALL_CYC and the C tile's loads and stores, model_block)
   * was fitted on whole runs, where a call costs several times what it does back to back
   * in L1; what the measurement adds is the difference between tiles: the set-up beyond
   * that of the cheapest family's tallest tile (of the eager ones: a family compiled later
   * leaves the others' prices as they were). */
  if (f0 > 0) return;
  g->call_base = 1e30;
  for (int fi = 0; fi < f1 && fi < g->nfam; fi++) {
    double c = g->fam[fi].call_s[g->fam[fi].mr];
    if (c > 0 && c < g->call_base) g->call_base = c;
  }
}

/* The row-streaming kernels: one row of B over and over (b_sk = 0), C rows in L1. */
void gemm_calibrate_rows(GemmKernels *g) {
  size_t es = (size_t)g->esize;
  enum { RN = 256, RK = 64 };
  char *mem = xcalloc(1, (ROWS_MAX + RN + ROWS_MAX * RN) * es + 256);
  char *a = align64(mem), *b = align64(a + ROWS_MAX * es), *c = align64(b + RN * es);
  for (int h = 1; h <= ROWS_MAX; h++) {
    double best = 1e30;
    for (int t = 0; t < CAL_TRIALS; t++) {
      double t0 = now_s();
      for (int r = 0; r < 8; r++) g->rows[h](RK, RN, a, 1, 0, b, 0, c, RN);
      double dt = (now_s() - t0) / (8.0 * RK * (RN / g->W));
      if (dt < best) best = dt;
    }
    g->rows_sec[h] = (best > 0 && best < 1 ? best : h / (hw_ghz(&g->hw) * 1e9)) * gemm_slow(g);
  }
  free(mem);
}

/* The inner-product kernels: the rows of A and of B^T one vector long each (a_rs = b_rs =
 * 0), long and short reductions, so that the per-vector rate and the cost of a call (its
 * lane sums and C) come apart. */
void gemm_calibrate_dots(GemmKernels *g) {
  size_t es = (size_t)g->esize;
  enum { NV = 64 };
  char *mem = xcalloc(1, (size_t)(2 * NV * g->W + DOT_HMAX * DOT_WMAX) * es + 256);
  char *a = align64(mem), *b = align64(a + (size_t)NV * g->W * es), *c = align64(b + (size_t)NV * g->W * es);
  DotSet *d = &g->dot;
  for (int w = 1; w <= DOT_WMAX; w++)
    for (int h = 1; h <= DOT_HMAX; h++) {
      if (!d->has[w][h]) continue;
      double t[2];
      for (int s = 0; s < 2; s++) {
        int64_t kc = s ? g->W : (int64_t)NV * g->W;
        int reps = s ? 64 : 8;
        t[s] = 1e30;
        for (int tr = 0; tr < CAL_TRIALS; tr++) {
          double t0 = now_s();
          for (int r = 0; r < reps; r++) d->fn[w][h](kc, a, 0, b, 0, c, w, 1, h, w, 1);
          double dt = (now_s() - t0) / reps;
          if (dt < t[s]) t[s] = dt;
        }
      }
      double per = (t[0] - t[1]) / (NV - 1);
      if (per > 0 && per < 1) d->vsec[w][h] = per;
      if (t[1] - d->vsec[w][h] > 0 && t[1] < 1) d->call[w][h] = t[1] - d->vsec[w][h];
      if (per > 0 && per < 1) d->vsec[w][h] *= gemm_slow(g);
    }
  /* B^T of NV rows and W columns, from a B of W columns (b to c, 2 NV W elements apart) */
  d->bt_block = 1e30;
  for (int tr = 0; tr < CAL_TRIALS; tr++) {
    double t0 = now_s();
    for (int r = 0; r < 64; r++) g->packbt(NV, a, g->W, b, g->W);
    double dt = (now_s() - t0) / 64 / (NV / g->W);
    if (dt < d->bt_block) d->bt_block = dt;
  }
  free(mem);
}
/* The functions of a part compiled on first need, found in the JIT. */
static bool bind_rows(GemmKernels *g) {
  char err[256], name[96];
  for (int h = 1; h <= ROWS_MAX; h++) {
    rows_name(name, sizeof name, g, h);
    if (!(g->rows[h] = (RowsFn)jit_lookup(g->jit, name, err, sizeof err))) return false;
  }
  gemm_calibrate_rows(g);
  return true;
}

static bool bind_dots(GemmKernels *g) {
  char err[256], name[96];
  for (int w = 1; w <= DOT_WMAX; w++)
    for (int h = 1; h <= DOT_HMAX; h++) {
      if (!g->dot.has[w][h]) continue;
      dot_name(name, sizeof name, g, h, w);
      if (!(g->dot.fn[w][h] = (DotFn)jit_lookup(g->jit, name, err, sizeof err))) return false;
    }
  gemm_calibrate_dots(g);
  return true;
}

/* Compile and calibrate a part compiled on first need (EMIT_ROWS, EMIT_DOTS) if that has
 * not been done; false if it cannot be had (then no plan uses it). */
static bool bind_famx(GemmKernels *g) {
  char err[256];
  for (int fi = EAGER_FAM; fi < g->nfam; fi++)
    if (!gemm_bind_family(g, &g->fam[fi], err, sizeof err)) return false;
  gemm_calibrate(g, EAGER_FAM, g->nfam);
  return true;
}

bool gemm_part_ensure(GemmKernels *g, int what) {
  bool rows = what == EMIT_ROWS, famx = what == EMIT_FAMX;
  _Atomic int *state = rows ? &g->rows_state : famx ? &g->famx_state : &g->dot_state;
  int st = atomic_load_explicit(state, memory_order_acquire);
  if (st) return st > 0;
  pthread_mutex_lock(&g->part_lock);
  if (!(st = atomic_load(state))) {
    double t0 = now_s();
    char err[256];
    int n = gemm_compile_part(g, what, rows ? "gemm_rows" : famx ? "gemm_famx" : "gemm_dot", err, sizeof err);
    st = n && (rows ? bind_rows(g) : famx ? bind_famx(g) : bind_dots(g)) ? 1 : -1;
    double ms = (now_s() - t0) * 1e3;
    if (rows) g->rows_ms = ms;
    else if (famx) g->famx_ms = ms;
    else g->dot_ms = ms, g->dot_nfuncs = n;
    atomic_store_explicit(state, st, memory_order_release);
  }
  pthread_mutex_unlock(&g->part_lock);
  return st > 0;
}

/* The columns family f's tiles compute for n, in whole strips.  (Counting a last strip of
 * at most DOT_MAXN columns as inner products instead, plan_choose's edge, made 32 + 16
 * columns on 14x32 tiles as good as 48 on 9x48, which ran 0.87x oneDNN against 0.96x.) */
static int64_t fam_cover(const Family *f, int64_t n) { return cdiv(n, f->nr) * f->nr; }

/* Whether a family past the eager ones is worth weighing for p: one whose tiles compute
 * fewer of p's columns than every eager family's (N = 48 on 32- and 64-wide tiles: 64
 * columns computed either way, 48 on a 48-wide one).  512 x 48 x 2048 on 2 threads of a
 * Zen 4 guest, make bench's columns in one run: 0.87x oneDNN on 14x32 tiles (and 16
 * columns as inner products), 0.96x on 9x48; compiling every family at start-up cost 40
 * ms more (67 -> 107 ms), for shapes few programs have. */
static bool famx_wanted(const GemmKernels *g, const Prob *p, int fi) {
  int64_t mine = fam_cover(&g->fam[fi], p->n);
  for (int e = 0; e < EAGER_FAM && e < g->nfam; e++)
    if (fam_cover(&g->fam[e], p->n) <= mine) return false;
  return true;
}

/* ---- the run-time model and plan ---- */

/* Validate and normalise: sizes of 1 get convenient strides, a C with unit row stride is
 * computed transposed (C^T = B^T A^T), a C with no unit stride goes through a tile buffer. */
bool gemm_normalise(const GemmKernels *g, const GemmArgs *x, Prob *p, char *err,
                    size_t errlen) {
  if (x->batch < 0 || x->m < 0 || x->n < 0 || x->k < 0) {
    snprintf(err, errlen, "gemm: negative size (batch %lld, m %lld, n %lld, k %lld)",
             (long long)x->batch, (long long)x->m, (long long)x->n, (long long)x->k);
    return false;
  }
  int es = g->esize;
  /* field by field: a compound literal zeroes the whole Prob first (a `rep stos`) */
  p->batch = x->batch, p->m = x->m, p->n = x->n, p->k = p->k_all = x->k;
  p->a = x->a, p->a_sb = x->a_sb, p->a_sm = x->a_sm, p->a_sk = x->a_sk;
  p->b = x->b, p->b_sb = x->b_sb, p->b_sk = x->b_sk, p->b_sn = x->b_sn;
  p->c = x->c, p->c_sb = x->c_sb, p->c_sm = x->c_sm, p->c_sn = x->c_sn;
  p->acc = x->accumulate, p->stop = x->stop;
  p->swapped = p->ctmp = false;
  if (!p->batch || !p->m || !p->n) return true;
  if (p->batch == 1) p->a_sb = p->b_sb = p->c_sb = 0;
  if (p->n == 1) p->c_sn = p->b_sn = 1;
  if (p->m == 1) p->c_sm = p->a_sm = 0;
  if (p->c_sn != 1 && p->c_sm == 1) {
    Prob q = *p;
    q.m = p->n; q.n = p->m;
    q.a = p->b; q.a_sb = p->b_sb; q.a_sm = p->b_sn; q.a_sk = p->b_sk;
    q.b = p->a; q.b_sb = p->a_sb; q.b_sk = p->a_sk; q.b_sn = p->a_sm;
    q.c_sm = p->c_sn; q.c_sn = 1;
    q.swapped = true;
    *p = q;
    if (p->m == 1) p->a_sm = p->c_sm = 0;
  }
  p->ctmp = p->c_sn != 1;
  (void)es;
  return true;
}


static int64_t balanced(int64_t total, int64_t maxblk, int64_t unit) {
  if (total <= 0) return unit;
  int64_t nblk = cdiv(total, maxblk);
  int64_t blk = cdiv(cdiv(total, nblk), unit) * unit;
  return blk > 0 ? blk : unit;
}

static void block_sizes(const GemmKernels *g, const Family *f, int64_t mt, int64_t nt,
                        int64_t K, Plan *pl) {
  const HwModel *h = &g->hw;
  int es = g->esize;
  /* kc: the kc x nr micro-panel of B may fill L1.  It is read in order, once per row tile,
   * so what L1 cannot keep L2 resends at a fraction of its bandwidth, while a longer k loop
   * amortises each C tile update (the classic "half of L1" measured 5-15% slower). */
  int64_t kc_max = imax(16, (int64_t)(hw_cache_bytes(h, 0) / (f->nr * es)) / 8 * 8);
  pl->kc = imax(1, balanced(K, kc_max, 4));
  if (pl->kc > K) pl->kc = K;
  int64_t mc_max = imax(f->mr, (int64_t)(hw_cache_bytes(h, 1) / 2 / (pl->kc * es)) / f->mr * f->mr);
  pl->mc = balanced(mt, mc_max, f->mr);
  /* nc: the packed kc x nc panel of B in half of this core's share of L3 (BLIS's choice),
   * or, when A is small enough that repacking it per column block is cheap, in half of L2,
   * where writing the panel needs no trip to L3 and the kernels read it from L2. */
  int lvl = pl->nc_l2 ? 1 : 2;
  int64_t nc_max = imax(f->nr, (int64_t)(hw_cache_bytes(h, lvl) / 2 / (pl->kc * es)) / f->nr * f->nr);
  pl->nc = balanced(nt, nc_max, f->nr);
  const GemmForce *fo = &g->force;
  if (fo->kc > 0) pl->kc = imin(fo->kc, imax(K, 1));
  if (fo->mc > 0) pl->mc = fo->mc;
  if (fo->nc > 0) pl->nc = fo->nc;
}

/* Seconds per k step of the row pieces of an m-extent of mt rows, and their count. */
static double rows_sec(const Family *f, int64_t mt, int t, int64_t *ncalls) {
  if (mt <= 0) { *ncalls = 0; return 0; }
  int64_t full = mt / f->mr, r = mt % f->mr;
  if (r && full) { full--; r += f->mr; }
  *ncalls = full + (r ? f->dec_n[t][r] : 0);
  return full * f->ksec[f->mr] + (r ? f->dec_sec[t][r] : 0);
}

/* The wait for `bytes` of B read by strips from memory with nothing fetching ahead: each
 * row's piece of a strip (`strip` bytes) costs FAR_PIECE lines more, at memory's rate for
 * the cores at work.  Fitted on one thread of Zen 4, where it came to 55-60% of the read
 * rate (B in place, time past the compute: 50 x 4000 x 20000 23 ms for 320 MB, 8 x 8000 x
 * 8000 about 17 ms for 256 MB). */
static double far_b_s(const HwModel *h, double strip, double line, double bytes, int users) {
  return bytes / (sched_shared_bw(h, INFINITY, users) * strip / (strip + FAR_PIECE * line));
}

/* A core's rate for a footprint of F bytes split evenly among `users` cores, each streaming
 * its own part: the level that holds it (a private cache a part, a shared one the parts of
 * the cores it serves: sched_fit_level). */
static double split_bw(const HwModel *h, double F, int users) {
  int u = users > 0 ? users : 1;
  return sched_threads_bw(h, sched_fit_level(h, F, u), u) / u;
}

/* Predicted seconds for one thread block of bt x mt x nt (x K) of `users` running at once,
 * filling pl's parts. */
static void model_block(const GemmKernels *g, const Family *f, const Prob *p, int64_t bt,
                        int64_t mt, int64_t nt, int users, Plan *pl) {
  const HwModel *h = &g->hw;
  double hz = hw_ghz(h) * 1e9, es = g->esize, line = (double)sched_line_bytes(h);
  int64_t K = p->k, calls;
  double rs = rows_sec(f, mt, !pl->pack_b, &calls);
  int64_t ntiles = cdiv(nt, f->nr), nkb = cdiv(K, pl->kc);
  int64_t njc = cdiv(nt, pl->nc), nic = cdiv(mt, pl->mc);
  /* a call: its fixed cost and the C tile, loaded and stored once per vector */
  int64_t htop = imin(f->mr, mt), hc = htop;
  while (hc < f->mr && !f->has[hc]) hc++;      /* the tile height that covers htop rows */
  double extra = f->call_s[hc] > g->call_base ? f->call_s[hc] - g->call_base : 0;
  double call_s = (CALL_CYC + 2.0 * htop * f->v) / hz + extra;
  pl->t_comp = (double)bt * ntiles * ((double)K * rs + (double)nkb * calls * call_s);
  /* B read in place costs more than the kernel rates say (they were measured on aligned
   * strips that fit): rows not a whole number of lines apart, or a B that does not start
   * on a line (a caller's array at 16 bytes past one), make most of its vectors straddle
   * two lines, and a strip past 3/4 of L1 (its rows' whole lines, one more a row when
   * misaligned) shares the cache badly with A and C. */
  if (!pl->pack_b && K > 1) {
    bool split = (p->b_sk * g->esize) % (int64_t)line != 0 || (uintptr_t)p->b % (uintptr_t)line != 0;
    int64_t lines = cdiv(f->nr * g->esize, (int64_t)line) + split;
    double extra = split ? SPLIT_LOADS : 0;
    if ((double)imin(pl->kc, K) * lines * line > 0.75 * hw_cache_bytes(h, 0)) extra += CROWDED_L1;
    pl->t_comp *= 1 + extra;
  }
  double bytesA = (double)bt * mt * K * es, bytesB = (double)bt * K * nt * es;
  double bwA = sched_shared_bw(h, (double)p->m * p->k_all * es * (p->a_sb ? p->batch : 1), users);
  double wholeB = (double)p->k_all * p->n * es * (p->b_sb ? p->batch : 1), bwB = sched_shared_bw(h, wholeB, users);
  /* A thread block whose operands all fit a cache of its core's own finds them there from
   * one call to the next, however large the whole operands: 1 x 768 x 768 over 2 threads
   * of Emerald Rapids (2 MiB of L2 a core) ran in 14-20 us, where B priced at the L3's
   * rate (2.4 MB whole) predicted 58; 3 x 1000 x 1000 51-56 us against 101. */
  double own = ((double)mt * K + (double)K * nt + (double)mt * nt) * es * bt, bwOwn = split_bw(h, own * users, users);
  bwA = fmax(bwA, bwOwn);
  bwB = fmax(bwB, bwOwn);
  double bwL2 = sched_level_bw(h, hw_cache_bytes(h, 1) / 2);
  bool farB = wholeB > hw_cache_bytes(h, hw_ncaches(h) - 1) * users && own > hw_cache_bytes(h, 1);
  /* Set pressure in L1 (see lines_per_set).  A in place whose rows alias fills its sets by
   * itself: every broadcast then misses L1, a stall no bandwidth overlaps.  A B strip read
   * in place whose rows alias cannot stay in L1 between row pieces: each piece after the
   * first fetches it again from L2, row by row.  Packed panels are contiguous and stream. */
  int ways = hw_l1_ways(h);
  int64_t kc = pl->kc, hmax = imin(f->mr, mt);
  int64_t a_set = p->a_sm == 1 || hmax == 1 ? lines_per_set(p->a_sk * g->esize, kc)
                  : lines_per_set(p->a_sm * g->esize, hmax) * cdiv(kc * g->esize, SET_SPAN);
  int64_t b_set = lines_per_set(p->b_sk * g->esize, kc) * cdiv(f->nr * g->esize, (int64_t)line);
  double stall = 0;
  /* Operand traffic.  A: once per column block (then reused from L2 across n tiles).
   * B in place: once per row block, in strips of nr columns, which memory serves less
   * well than whole lines in a row (a strip of s bytes costs as much as s + one line);
   * packed B: once, then from the packed panel. */
  double mem = bytesA * njc / bwA;
  if (!pl->pack_b) {
    /* Each row's piece of a strip costs a line more than its bytes.  A B larger than the
     * last cache's share of the cores at work comes from memory with nothing fetching
     * ahead of the pieces, and the FMAs wait for each: FAR_PIECE lines more a piece, and
     * a stall, not hidden by the compute (far_b_s).  One thread of Zen 4, B in place
     * against max(compute, memory), which the model took before: 50 x 4000 x 20000 98 ms
     * against 75 predicted, 8 x 8000 x 8000 29.5 against 51; packed B within 5% of its
     * prediction at 50-200 rows.  The 32 MB L3 that 8 cores share did not keep the 24 MB
     * of 50 x 2000 x 3000 on 2 threads of Zen 5 either (in place 3.4-4.3 ms, packed 1.7-2.0) */
    double strip = f->nr * es;
    if (farB) stall += far_b_s(h, strip, line, bytesB * nic, users);
    else mem += bytesB * nic / (bwB * strip / (strip + line));
    /* A strip that cannot stay in L1 comes back from L2 for each later piece, which the
     * edge DP's in-place table already charges (a piece costs at least its strip's reload
     * from L2), and which a tall piece's FMAs hide.  Rows a multiple of 4 KiB apart alias
     * in L2 as well: then the strip comes back from L3, a stall beyond the DP's figure. */
    if (b_set > ways && (p->b_sk * g->esize) % SET_SPAN == 0)
      stall += bytesB * (double)imax(0, calls - nic) / sched_level_bw(h, hw_cache_bytes(h, 1) + 1);
  }
  /* A's rows a multiple of SET_SPAN apart all fall in one set of L1, beside the packed B
   * panel's lines there (contiguous, spread evenly over the sets): past the set's ways the
   * broadcasts miss as well.  2 threads of an Emerald Rapids guest (48 KiB 12-way L1), the
   * plan with A in place against A packed, GFLOP/s: 1024^3 317 / 341, 512 x 768 x 3072 326 /
   * 367 (6 rows in one set beside 11 of a 44 KB panel); rows 3 KiB apart (K = 768, 2 a set)
   * 336-360 / 331-356, no better packed.
   * Tiles that take such rows in two groups (a_grouped, emit_uk) hold a line of each of a
   * group's rows at a time, one line of B beside them: no miss of either kind, but at each
   * strip they fetch the rows' lines again from L2, a group's lines all in one set, where
   * the L1's own fetching ahead does not bring them: a stall of A's bytes at L2's rate for
   * each strip.  2 threads of a Zen 4 guest (32 KiB 8-way L1), 14x32 tiles, A in place
   * grouped, in place with K = 1040 (rows in 14 sets) and packed, in turn in one process,
   * us: 512 x 32 x 1024 153 / 155 / 186 (oneDNN 150), 512 x 128 x 1024 623-669 / 628-688 /
   * 659-682 (ungrouped in place had taken 193-263 at 512 x 32 x 1024); the medians of 15
   * rounds' packed / in place grouped: one strip, 512 x 32 x 1024 1.13, 2048 x 48 x 1024
   * 1.10, two, 640 x 64 x 8192 1.14; many, 1024^3 0.98, 2048^3 0.97, 64 x 5632 x 2048 0.85,
   * 77 x 4096 x 4096 0.89 (K = 4000 and 2000 there: 0.99-1.01). */
  int64_t panel = pl->pack_b ? cdiv(kc * f->nr * g->esize, SET_SPAN) : 0;
  bool alias = p->a_sm != 1 && hmax > 1 && (p->a_sm * g->esize) % SET_SPAN == 0;
  if (a_grouped(g, f, p->a_sm, p->a_sk, pl->pack_a))
    stall += (double)bt * ntiles * mt * K * es / bwL2;
  else if (!pl->pack_a && (2 * a_set > ways || (alias && a_set + panel > ways)))
    stall += (double)bt * ntiles * mt * K * line / bwL2;
  /* C: written once per k block and read back for each after the first (and for C +=), at
   * the bandwidth of where C lives.  A tile writes its rows nr columns at a time, rows far
   * apart: from memory, as for B's strips, a piece of s bytes costs as much as s + one
   * line.  (4096 x 4096 x 1, where C is all the traffic: 6x64 tiles ran in 1.78 ms, 14x32
   * in 2.6 ms, which this charges as 1.8 and 2.2 ms; without it the model took 14x32.) */
  double bytesC = (double)bt * mt * nt * es, wholeC = (double)p->batch * p->m * p->n * es;
  double stripC = f->nr * es, passes = (double)(2 * nkb - 1) + (p->acc ? 1 : 0);
  bool farC = wholeC > hw_cache_bytes(h, hw_ncaches(h) - 1);
  mem += bytesC * passes / sched_shared_bw(h, wholeC, users) * (farC ? (stripC + line) / stripC : 1);
  pl->t_stall = stall;
  pl->t_mem = mem;
  /* Packing reads the source and writes the panel; strided layouts go through scalar C
   * (but B = K^T, below). */
  double pack = 0;
  if (pl->pack_a) {
    bool fast = p->a_sk == 1 || p->a_sm == 1;
    pack += bytesA * njc * (1 / bwA + 1 / bwL2) * (fast ? 1 : 4);
  }
  if (pl->pack_b) {
    /* the panel is written where it fits; a panel past L2 is written through L3, each
     * line first read for ownership.  It is written whole, nr columns a strip, zeros past
     * the edge: for a narrow B far more than B (2 x 3 x 4096: 48 KB of B, a 512 KB panel;
     * charged as B's bytes, packing was taken for 4 us and ran in 12, B in place in 3) */
    double panel = (double)pl->kc * pl->nc * es, panelB = (double)bt * K * ntiles * f->nr * es;
    double wr = panel <= hw_cache_bytes(h, 1) ? 1 / bwL2 : 2 / sched_shared_bw(h, panel, users);
    pl->fused = fused_packing(f, p, pl, mt);
    if (pl->fused) {
      /* The first tile of each strip reads B in place as it computes: its FMAs hide the
       * reads but for about a line of each row's piece (fitted on 77 x 4096 x 4096, 2
       * threads: packing cost about 0.3 ms beside the writes with 6x64 tiles, pieces of
       * 4 lines, and 0.7 ms with 14x32, pieces of 2).  The full tiles after the first
       * fetch the next strip ahead (emit_uk); with none, a B from memory is read as in
       * place, at least (6 x 8000 x 8000 on one thread of Zen 4, packed by its one tile:
       * 53-57 ms, against 34-38 in place; priced 23 and 30: what else it waits for there
       * is not known). */
      double strip = f->nr * es;
      int64_t rows = imin(pl->mc, mt);
      if (farB && rows / f->mr < 2) pack += far_b_s(h, strip, line, bytesB, users) + panelB * wr;
      else pack += bytesB / bwB * (line < strip ? line / strip : 1) + panelB * wr;
    } else {
      /* a strided B through scalar C, but one whose rows are its unit stride (K^T) a
       * strip at a time in registers (gemm_run.c's pack_b_strided) */
      pack += (bytesB / bwB + panelB * wr) * (p->b_sn == 1 || p->b_sk == 1 ? 1 : 4);
    }
  }
  if (pl->pack_a || pl->pack_b) pack += WS_S;
  pl->t_pack = pack;
}

/* The C lines the busiest block shares with its neighbours along N: one per row at each
 * inner edge whose start is not on a line boundary (a strided C shares every row). */
static int64_t share_lines(const GemmKernels *g, const Prob *p, const Plan *pl, int64_t bt,
                           int64_t mt) {
  if (pl->tn < 2 || pl->nbk >= p->n) return 0;
  int64_t edges = pl->tn > 2 ? 2 : 1, line = 64, es = g->esize, rows = 0;
  if (p->ctmp) return bt * mt * edges;
  int64_t period = imin(mt, line);          /* the offsets repeat within `line` rows */
  for (int64_t i = 0; i < period; i++)
    rows += ((i * p->c_sm + pl->nbk) * es) % line != 0;
  return bt * edges * (rows * (mt / period) + (mt % period ? rows * (mt % period) / period : 0));
}

/* The k split of a plan: k blocks of kb, each thread block's problem q (its share of k),
 * and the cost of adding the copies of C into C (read each, read and write C), a fork-join
 * of its own after the blocks' (gemm_run.c's add_parts).  2 threads of a Zen 4 guest, 16 x
 * 768 x 768 split in two along k: the adding took 2.0-2.6 us, where the bytes alone priced
 * it at 1.3.
 * And the lines of C and of its copies move between the cores at every call: block 0
 * writes C, block t its copy, and task r of the adding (one a thread) reads and writes
 * C's r-th share of rows and reads that share of every copy, so of T shares all but one
 * of C's go to another core and come back for the next call's block 0, and all but one of
 * each copy's are read from another.  Each such line costs what the hardware's figure for
 * a line two cores write says (line_move_ns, as for the lines an N split shares), which a
 * C of a few lines -- the k split's use, a long k beside no rows or columns to split --
 * never notices.  2 threads of a Zen 4 guest, each plan in turn in one process, 9 rounds,
 * oneDNN's time over the plan's: 6x64 tiles split along k against along N, 16 x 768 x 768
 * 0.88 / 0.93, 20 x 768 x 768 0.91 / 0.97, 64 x 768 x 768 0.89 / 0.96; 14x32 tiles 16 x
 * 768 x 768 0.77 / 0.88, 64 x 768 x 768 0.92 / 0.97, where the model had taken the k split
 * for 14x32.  (A stream of moving lines overlaps: they cost 3-7 ns each there, not the 27
 * of one; priced at a whole move, no C that pays to split along N is split along k.) */
static void ksplit_set(const GemmKernels *g, const Prob *p, int tk, Plan *pl, Prob *q) {
  *q = *p;
  pl->tk = tk;
  pl->kb = cdiv(p->k, tk);
  q->k = pl->kb;
  if (tk > 1) {
    double bytes = (double)p->batch * p->m * p->n * g->esize;
    double moved = (double)(tk - 1) / tk * (tk + 1) * ceil(bytes / (double)sched_line_bytes(&g->hw));
    pl->t_red = (tk - 1) * 3 * bytes / sched_level_bw(&g->hw, bytes * tk) + sched_sync_s(&g->hw) +
                moved * sched_line_move_s(&g->hw);
  }
}

static void plan_eval(const GemmKernels *g, const Prob *p0, int fi, bool pa, bool pb, bool l2,
                      int tb, int tm, int tn, int tk, Plan *pl) {
  const Family *f = &g->fam[fi];
  memset(pl, 0, sizeof *pl);
  Prob q;
  ksplit_set(g, p0, tk, pl, &q);
  const Prob *p = &q;
  pl->fam = fi;
  pl->pack_a = pa;
  pl->pack_b = pb;
  pl->nc_l2 = l2;
  pl->tb = tb;
  pl->tm = tm;
  pl->tn = tn;
  pl->bb = cdiv(p->batch, tb);
  pl->mb = cdiv(cdiv(p->m, f->mr), tm) * f->mr;
  pl->nbk = cdiv(cdiv(p->n, f->nr), tn) * f->nr;
  int64_t mt = imin(pl->mb, p->m), nt = imin(pl->nbk, p->n), bt = imin(pl->bb, p->batch);
  block_sizes(g, f, mt, nt, p->k, pl);
  model_block(g, f, p, bt, mt, nt, tb * tm * tn * tk, pl);
  /* The busiest block bounds the time; blocks share the memory bandwidth of the last level
   * only, which per-core figures already reflect. */
  double comp_mem = pl->t_comp > pl->t_mem ? pl->t_comp : pl->t_mem;
  pl->t_sync = tb * tm * tn * tk > 1 ? sched_sync_s(&g->hw) : 0;
  pl->t_share = (double)share_lines(g, p, pl, bt, mt) * cdiv(p->k, pl->kc) * sched_line_move_s(&g->hw);
  pl->t = comp_mem + pl->t_stall + pl->t_pack + pl->t_sync + pl->t_share + pl->t_red;
}

/* The row-streaming plan (emit_rows) over a tb x 1 x tn grid: B read once, row by row, at
 * the bandwidth of the level that holds it, beside the kernel's measured time per row of B
 * and vector of columns; the C rows of a chunk of nc columns stay in half of L1. */
static void plan_eval_rows(const GemmKernels *g, const Prob *p, int tb, int tn, Plan *pl) {
  const HwModel *h = &g->hw;
  double es = g->esize, hz = hw_ghz(h) * 1e9;
  int users = tb * tn;
  memset(pl, 0, sizeof *pl);
  pl->rows = true;
  pl->tb = tb, pl->tm = 1, pl->tn = tn, pl->tk = 1;
  pl->kb = p->k;
  pl->bb = cdiv(p->batch, tb);
  pl->mb = pl->mc = p->m;
  pl->nbk = cdiv(cdiv(p->n, g->W), tn) * g->W;
  pl->kc = p->k;
  pl->nc = imax(g->W, (int64_t)(hw_cache_bytes(h, 0) / 2 / ((double)p->m * es)) / g->W * g->W);
  int64_t bt = imin(pl->bb, p->batch), nt = imin(pl->nbk, p->n), nch = cdiv(nt, pl->nc);
  pl->t_comp = (double)bt * ((double)p->k * cdiv(nt, g->W) * g->rows_sec[p->m] + nch * CALL_CYC / hz);
  /* B and C split among the threads (each its columns), A read by all */
  double bwB = split_bw(h, (double)p->k * p->n * es * (p->b_sb ? p->batch : 1), users);
  double bwA = sched_shared_bw(h, (double)p->m * p->k * es * (p->a_sb ? p->batch : 1), users);
  double bwC = split_bw(h, (double)p->m * p->n * es * p->batch, users);
  pl->t_mem = (double)bt * ((double)p->k * nt * es / bwB + (double)nch * p->m * p->k * es / bwA +
                            (double)p->m * nt * es * (p->acc ? 2 : 1) / bwC);
  pl->t_sync = users > 1 ? sched_sync_s(&g->hw) : 0;
  pl->t_share = (double)share_lines(g, p, pl, bt, p->m) * sched_line_move_s(&g->hw);
  pl->t = (pl->t_comp > pl->t_mem ? pl->t_comp : pl->t_mem) + pl->t_sync + pl->t_share;
}

/* ---- inner products: the model ---- */

/* Seconds per vector of k for mt rows of the plan's strips, and per pass over them (the
 * calls' fixed costs). */
static double dot_rows_sec(const DotSet *d, const Plan *pl, int64_t mt, double *pass_s) {
  double vs = 0, cs = 0;
  /* each height as many times as it fits, as dot_piece hands them out (one piece at a time,
   * :sched matmul M=10^13 took minutes) */
  for (int64_t left = mt; left > 0;) {
    int h = dot_piece(d, dot_hw(pl), left);
    double n = (double)(left / h);
    for (int s = 0; s < DOT_STRIPS && pl->dw[s]; s++) {
      vs += n * d->vsec[pl->dw[s]][h];
      cs += n * d->call[pl->dw[s]][h];
    }
    left %= h;
  }
  *pass_s = cs;
  return vs;
}

/* B^T packed in a plan takes longer than calibrated with B in L1, its rows coming from L2
 * or further: 2 x 16 x 5000 ran in 3.2 us by inner products where the model said 2.5 with
 * the calibrated figure (the tiles, 2.2 us, were the better choice); with twice that
 * figure the model picks the tiles there and still the inner products on 31 x 16 x 1000,
 * 3 x 2 x 513 and 16 x 16 x 100000, where they are faster: BT_SITU, the model's table. */

/* The inner-product plan over a tb x tm (x tk) grid: C's columns in strips of at most
 * DOT_WMAX, of nearly equal widths, the strips of a row piece one after the other (its rows
 * of A stay in L1); kc keeps B^T's rows of a k block in half of L1.  Compute from the
 * measured rates; A read once, from where it lives; B^T packed (pack_bt) when B's columns
 * are not contiguous, for each k block. */
static void plan_eval_dot(const GemmKernels *g, const Prob *p0, int tb, int tm, int tk, Plan *pl) {
  const HwModel *h = &g->hw;
  const DotSet *d = &g->dot;
  double es = g->esize, hz = hw_ghz(h) * 1e9;
  int users = tb * tm * tk;
  memset(pl, 0, sizeof *pl);
  Prob q;
  ksplit_set(g, p0, tk, pl, &q);
  const Prob *p = &q;
  pl->dot = true;
  pl->tb = tb, pl->tm = tm, pl->tn = 1;
  int ns = (int)cdiv(p->n, DOT_WMAX);
  for (int s = 0; s < ns; s++) pl->dw[s] = (int)(p->n / ns + (s < p->n % ns));
  int64_t unit = d->hmax[dot_hw(pl)];
  pl->bb = cdiv(p->batch, tb);
  pl->mb = cdiv(cdiv(p->m, unit), tm) * unit;
  pl->nbk = p->n;
  pl->pack_b = p->b_sk != 1 && p->k > 1;
  int64_t kc_max = imax(g->W, (int64_t)(hw_cache_bytes(h, 0) / 2 / ((double)p->n * es)) / g->W * g->W);
  pl->kc = imin(p->k, balanced(p->k, kc_max, g->W));
  if (g->force.kc > 0) pl->kc = imin(g->force.kc, p->k);
  int64_t mt = imin(pl->mb, p->m), bt = imin(pl->bb, p->batch);
  pl->mc = mt;
  int64_t nkb = cdiv(p->k, pl->kc), nvec = nkb * cdiv(pl->kc, g->W);
  double pass, vs = dot_rows_sec(d, pl, mt, &pass);
  pl->t_comp = (double)bt * ((double)nvec * vs + (double)nkb * (pass + CALL_CYC / hz));
  double bytesA = (double)bt * mt * p->k * es, bytesB = (double)bt * p->n * p->k * es;
  double bwA = sched_shared_bw(h, (double)p->m * p->k_all * es * (p->a_sb ? p->batch : 1), users);
  double bwB = sched_shared_bw(h, (double)p->k_all * p->n * es * (p->b_sb ? p->batch : 1), users);
  pl->t_mem = bytesA / bwA + bytesB / bwB;
  /* B^T: in registers, W rows of B at a time (emit_packbt) at BT_SITU times the rate
   * calibrated in L1, else about 2 cycles an element */
  if (!pl->pack_b) pl->t_pack = 0;
  else if (d->bt_block < 1 && p->b_sn == 1 && pl->kc >= g->W)
    pl->t_pack = (double)bt * cdiv(p->k, g->W) * cdiv(p->n, g->W) * d->bt_block * BT_SITU;
  else pl->t_pack = bytesB / es * 2 / hz;
  pl->t_sync = users > 1 ? sched_sync_s(&g->hw) : 0;
  pl->t = fmax(pl->t_comp, pl->t_mem) + pl->t_pack + pl->t_sync + pl->t_red;
}

/* The plans weighed so far: the best, and each one when cands is given.  A plan replaces
 * the best only when predicted faster by more than PLAN_MARGIN: between plans that near
 * equal, the choice follows their fixed order of weighing rather than the noise in the
 * rates measured at compile time (a few percent from one session to the next), so that a
 * shape gets the same plan in every session.  The plan chosen is within PLAN_MARGIN of the
 * fastest predicted. */
typedef struct Weighed { Plan *best, *cands; int nc, maxc; bool any; } Weighed;
static void weigh(Weighed *w, const Plan *pl) {
  if (w->cands && w->nc < w->maxc) w->cands[w->nc++] = *pl;
  if (!w->any || pl->t < w->best->t * (1 - PLAN_MARGIN)) *w->best = *pl;
  w->any = true;
}

/* Choose a plan; when cands is not NULL, also record every plan weighed.  The grids
 * tried use one thread or all of them, in every factorisation into batch x M x N, those
 * that split the batch more weighed first, then M, so that they win a near tie
 * (PLAN_MARGIN): a thread on its own batches or rows reads its own share of A (and, on its
 * batches, of B), where threads side by side along N all read the whole of A, and that ran
 * slower than the model has it.  2 threads of an Emerald Rapids guest, :time medians, M
 * split against N split: 8192 x 64 x 64 0.16-0.17 against 0.28 ms (predicted 169 and 173
 * us), 8192 x 128 x 64 0.39-0.43 against 0.51-0.86 ms, 2048 x 64 x 64 (all of it in L2) 43
 * against 54-118 us, packing A no help; attention's P . V, 48 x 128 x 64 x 128, batch split
 * against N split (both predicted 317 us) 0.41-0.48 against 0.71-0.73 ms. */
static void plan_weigh(GemmKernels *g, const Prob *p, int nthreads, Plan *best,
                       Plan *cands, int *ncands, int maxc) {
  const GemmForce *fo = &g->force;
  int T = nthreads > 0 ? nthreads : 1;
  int grid[65][4], ng = 0;
  if (fo->tb > 0 || fo->tm > 0 || fo->tn > 0 || fo->tk > 0) {
    grid[0][0] = fo->tb > 0 ? fo->tb : 1;
    grid[0][1] = fo->tm > 0 ? fo->tm : 1;
    grid[0][2] = fo->tn > 0 ? fo->tn : 1;
    grid[0][3] = fo->tk > 0 ? (int)imin(fo->tk, p->k) : 1;
    ng = 1;
  } else {
    for (int used = 1; used <= T; used = used == T ? T + 1 : T)
      for (int tb = used < p->batch ? used : (int)p->batch; tb >= 1; tb--)
        for (int tm = used / tb; used % tb == 0 && tm >= 1; tm--) {
          int tn = used / tb / tm;
          if ((used / tb) % tm || ng == 64) continue;
          grid[ng][0] = tb;
          grid[ng][1] = tm;
          grid[ng][2] = tn;
          grid[ng][3] = 1;
          ng++;
        }
    /* all threads on k, for a small C and a long k */
    if (T > 1 && p->k >= KSPLIT_MIN_K && (double)p->batch * p->m * p->n * g->esize <= KSPLIT_MAX_C) {
      grid[ng][0] = grid[ng][1] = grid[ng][2] = 1;
      grid[ng][3] = T;
      ng++;
    }
  }
  Weighed W = { .best = best, .cands = cands, .maxc = maxc };
  bool tiles_free = fo->fam <= 0 && fo->pack_a <= 0 && fo->pack_b <= 0;   /* nothing tile-only forced */
  /* the row-streaming kernel, for C of a few rows and a B that streams from memory (from a
   * cache the tiles' strips are as fast, and faster with C in registers: 1 x 768 x 768 took
   * 1.4x as long by rows); forcing a family or a packing leaves it out unless forced too */
  const HwModel *hm = &g->hw;
  double llc = hm->nlevels >= 2 ? (double)hm->level[hm->nlevels - 2].bytes : 0;
  bool rows_fit = p->m <= ROWS_MAX && p->b_sn == 1 && !p->ctmp &&
                  (fo->rows == 1 || (double)p->k * p->n * g->esize * (p->b_sb ? p->batch : 1) > llc);
  bool rows = rows_fit && fo->rows != 2 && fo->dot != 1 &&
              (fo->rows == 1 || tiles_free) && gemm_part_ensure(g, EMIT_ROWS);
  for (int i = 0; rows && i < ng; i++) {
    int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2];
    if (tm > 1 || grid[i][3] > 1 || (ng > 1 && tn > 1 && tn > cdiv(p->n, g->W))) continue;
    Plan pl;
    plan_eval_rows(g, p, tb, tn, &pl);
    weigh(&W, &pl);
  }
  /* the inner-product kernels, for a C of a few columns and rows of A in unit stride */
  bool dot_fit = p->n <= DOT_MAXN && (p->a_sk == 1 || p->k == 1);
  bool dot = dot_fit && fo->dot != 2 && fo->rows != 1 &&
             (fo->dot == 1 || tiles_free) && gemm_part_ensure(g, EMIT_DOTS);
  for (int i = 0; dot && i < ng; i++) {
    int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2], tk = grid[i][3];
    if (tn > 1 || (ng > 1 && tm > 1 && tm > cdiv(p->m, g->dot.hmax[DOT_WMAX]))) continue;
    Plan pl;
    plan_eval_dot(g, p, tb, tm, tk, &pl);
    weigh(&W, &pl);
  }
  for (int fi = 0; fi < g->nfam; fi++) {
    if ((fo->rows == 1 || fo->dot == 1) && W.any) break;         /* forced, and it fits */
    if (fo->fam > 0 && fi != fo->fam - 1 && fo->fam <= g->nfam) continue;
    if (fi >= EAGER_FAM && ((fo->fam != fi + 1 && !famx_wanted(g, p, fi)) || !gemm_part_ensure(g, EMIT_FAMX))) continue;
    const Family *f = &g->fam[fi];
    for (int pb = 0; pb < 2; pb++) {
      if (!pb && p->b_sn != 1) continue;            /* kernels read B rows as vectors */
      if (fo->pack_b > 0 && pb != (fo->pack_b == 1) && p->b_sn == 1) continue;
      for (int pa = 0; pa < 2; pa++) {
        if (fo->pack_a > 0 && pa != (fo->pack_a == 1)) continue;
        for (int i = 0; i < ng; i++)
          for (int l2 = 0, l3_nc = 0; l2 <= pb; l2++) {
            int tb = grid[i][0], tm = grid[i][1], tn = grid[i][2], tk = grid[i][3];
            if (ng > 1 && ((tm > 1 && tm > cdiv(p->m, f->mr)) ||
                           (tn > 1 && tn > cdiv(p->n, f->nr))))
              continue;                               /* some thread would get nothing */
            Plan pl;
            plan_eval(g, p, fi, pa, pb, l2, tb, tm, tn, tk, &pl);
            if (l2 && pl.nc == l3_nc) continue;      /* B's panel the same for L2 as for L3 */
            l3_nc = (int)pl.nc;
            weigh(&W, &pl);
          }
      }
    }
  }
  if (ncands) *ncands = W.nc;
}

/* C's last e columns, as a problem of their own (e > 0), and the rest (e < 0: p's first
 * n - |e| columns).  Neither is split again: the rest runs the plan weighed for it, and e
 * columns are fewer than any strip. */
Prob gemm_part_cols(const GemmKernels *g, const Prob *p, int64_t e) {
  Prob q = *p;
  if (e < 0) {
    q.n = p->n + e;
    return q;
  }
  int64_t j0 = p->n - e;
  q.n = e;
  q.b += (size_t)(j0 * p->b_sn) * (size_t)g->esize;
  q.c += (size_t)(j0 * p->c_sn) * (size_t)g->esize;
  return q;
}

/* The plan for p: the best candidate, or -- when C's last strip would be narrow -- that
 * strip apart.  A tile computes all nr columns of a strip whatever its width, so the e =
 * n mod nr columns past the last full strip cost a whole strip: 2048 x 33 x 513 on 14x32
 * tiles spent half its time on one column.  The inner-product kernels take a few columns
 * at their own cost (vectors along k, no broadcasts), so the last e <= DOT_MAXN columns go
 * to them and the rest to its own best plan (the tiles, or inner products again where the
 * rest is narrow enough for them), when the two predictions together beat the best
 * single plan by SPLIT_GAIN and SPLIT_S, the second run's own costs (a near tie stays
 * one run: 1000 x 97 x 3 took 5 us either way; 127 x 65 x 2 took 0.6 us whole and 0.8
 * split, 0.2 more than predicted).  On 2 threads 2048 x 33 x 513 went 263 -> 182 us so,
 * 200 x 33 x 200 10.7 -> 7.0, 129 x 65 x 768 38.6 -> 30.0, 65 x 65 x 65 2.3 -> 1.7. */
void gemm_plan_whole(GemmKernels *g, const Prob *p, int nthreads, Plan *best) {
  plan_weigh(g, p, nthreads, best, NULL, NULL, 0);
}

void gemm_plan_choose(GemmKernels *g, const Prob *p, int nthreads, Plan *best,
                      Plan *cands, int *ncands, int maxc) {
  plan_weigh(g, p, nthreads, best, cands, ncands, maxc);
  const GemmForce *fo = &g->force;
  bool forced = fo->fam > 0 || fo->pack_a > 0 || fo->pack_b > 0 || fo->tb > 0 || fo->tm > 0 ||
                fo->tn > 0 || fo->tk > 0 || fo->kc > 0 || fo->mc > 0 || fo->nc > 0 || fo->rows > 0 ||
                fo->dot > 0;
  if (p->ctmp || best->rows || best->dot || forced || fo->edge == 2 || (p->a_sk != 1 && p->k != 1))
    return;
  for (int fi = 0; fi < g->nfam; fi++) {              /* each family's edge */
    if (!fam_ready(g, fi)) continue;
    int64_t e = p->n % g->fam[fi].nr;
    bool seen = false;
    for (int fj = 0; fj < fi; fj++) seen = seen || p->n % g->fam[fj].nr == e;
    if (seen || e < 1 || e > DOT_MAXN || e == p->n) continue;
    Prob main_ = gemm_part_cols(g, p, -e), edge = gemm_part_cols(g, p, e);
    Plan m, d;
    plan_weigh(g, &main_, nthreads, &m, NULL, NULL, 0);
    plan_weigh(g, &edge, nthreads, &d, NULL, NULL, 0);
    if (fo->edge != 1 && (!d.dot || m.t + d.t + SPLIT_S >= SPLIT_GAIN * best->t)) continue;
    *best = m;
    best->edge = e;
    best->t_edge = d.t;
    best->t = m.t + d.t;
    if (fo->edge == 1) return;                          /* forced: the first family's edge */
  }
}
void gemm_plan_summary(const GemmKernels *g, const Plan *pl, GemmPlanInfo *out) {
  const Family *f = &g->fam[pl->fam];
  out->rows = pl->rows;
  out->dot = pl->dot;
  out->mr = pl->rows ? 0 : pl->dot ? g->dot.hmax[dot_hw(pl)] : f->mr;
  out->nr = pl->rows ? 0 : pl->dot ? pl->dw[0] : f->nr;
  out->pack_a = pl->pack_a;
  out->pack_b = pl->pack_b;
  out->pack_b_fused = pl->fused;
  out->kc = pl->kc;
  out->mc = pl->mc;
  out->nc = pl->nc;
  out->tb = pl->tb;
  out->tm = pl->tm;
  out->tn = pl->tn;
  out->tk = pl->tk;
  out->edge = pl->edge;
  out->predicted_s = pl->t;
}

bool gemm_plan_info(GemmKernels *g, const GemmArgs *x, int nthreads, GemmPlanInfo *out) {
  Prob p;
  char err[8];
  memset(out, 0, sizeof *out);
  if (g->wide || !gemm_normalise(g, x, &p, err, sizeof err)) return false;
  out->swapped = p.swapped;
  out->c_buffered = p.ctmp;
  if (!p.batch || !p.m || !p.n || !p.k) return true;
  Plan pl;
  gemm_plan_choose(g, &p, nthreads, &pl, NULL, NULL, 0);
  gemm_plan_summary(g, &pl, out);
  return true;
}

double gemm_predict(GemmKernels *g, const GemmArgs *x, int nthreads) {
  if (g->wide) return g->half->predict(g, x, nthreads);
  Prob p;
  char err[8];
  if (!gemm_normalise(g, x, &p, err, sizeof err) || !p.batch || !p.m || !p.n || !p.k) return 0;
  Plan pl;
  gemm_plan_choose(g, &p, nthreads, &pl, NULL, NULL, 0);
  return pl.t;
}

double gemm_core_gflops(const GemmKernels *g) {
  if (g->wide) return gemm_core_gflops(g->wide);
  double best = 0;
  for (int fi = 0; fi < g->nfam; fi++) {
    double r = g->fam[fi].measured ? tile_gflops(&g->fam[fi], g->fam[fi].mr) : 0;
    best = r > best ? r : best;
  }
  return best;
}

/* Calibration times each kernel for microseconds on one core, at start-up; dyn --calibrate
 * times the whole machine for a tenth of a second, and its rate is the level the kernels'
 * rates are scaled to, either way, keeping their measured shape (height against height):
 * - under a long load of wide vectors on every core the clock falls (Emerald Rapids guest:
 *   the 14x32 tile calibrated at 143-164 GFLOP/s a core, 123-125 right after 0.2 s of it;
 *   1024^3 on one thread ran 127-131 against 136-157 predicted);
 * - a start-up that falls in a slow spell of a shared host measures every kernel slow, and
 *   its plans then priced the same shapes up to a third longer than the next process's
 *   (the same guest, six starts, :sched matmul M=512 N=768 K=3072: 11.9-17.1 ms predicted;
 *   scaled up as well, 11.87-11.92 ms).
 * A rate over four times the measured one, or under a quarter of it, is no clock's: it is
 * ignored. */
void gemm_sustain(GemmKernels *g, double core_gflops) {
  if (g->wide) return;
  double slow = gemm_slow(g), now = gemm_core_gflops(g), burst = now * slow;
  if (!(core_gflops > 0) || !(now > 0) || core_gflops < burst / 4 || core_gflops > burst * 4) return;
  double k = now / core_gflops;          /* beyond what is applied already */
  if (fabs(k - 1) < 1e-9) return;
  g->slow = slow * k;
  for (int fi = 0; fi < g->nfam; fi++) {
    Family *f = &g->fam[fi];
    for (int h = 1; h <= f->mr; h++) f->ksec[h] *= k;
    gemm_plan_edges(g, f);
  }
  for (int h = 0; h <= ROWS_MAX; h++) g->rows_sec[h] *= k;
  for (int w = 0; w <= DOT_WMAX; w++)
    for (int h = 0; h <= DOT_HMAX; h++) g->dot.vsec[w][h] *= k;
  GemmForce fo = g->force;               /* the plans remembered were priced at the old rates */
  gemm_force(g, &fo);
}

static int cmp_plan(const void *x, const void *y) {
  double a = ((const Plan *)x)->t, b = ((const Plan *)y)->t;
  return a < b ? -1 : a > b;
}

/* "1x2x1", or "1x1x1/k2" for a k split */
static const char *grid_str(const Plan *pl, char *s) {
  if (pl->tk > 1) sprintf(s, "%dx%dx%d/k%d", pl->tb, pl->tm, pl->tn, pl->tk);
  else sprintf(s, "%dx%dx%d   ", pl->tb, pl->tm, pl->tn);
  return s;
}

static void ksplit_line(Buf *out, const Plan *pl, const Prob *p) {
  if (pl->tk > 1)
    buf_printf(out, "    k split %d ways: each block sums k blocks of %lld into its own copy of C, "
               "added to C at the end\n", pl->tk, (long long)imin(pl->kb, p->k));
}

void gemm_describe(GemmKernels *g, const GemmArgs *x, int nthreads, Buf *out) {
  if (g->wide) {
    g->half->describe(g, x, nthreads, out);
    return;
  }
  const HwModel *h = &g->hw;
  /* the plan first: weighing row streaming compiles its kernels, which the header reports */
  Prob p;
  char err[160];
  bool valid = gemm_normalise(g, x, &p, err, sizeof err);
  bool work = valid && p.batch && p.m && p.n && p.k;
  Plan c[512], best;
  int nc = 0;
  if (work) gemm_plan_choose(g, &p, nthreads, &best, c, &nc, 512);
  buf_printf(out, "gemm %s on %s (%s): %d-bit vectors (%d x %s), %d registers, "
             "FMA %d x latency %d, %.2f GHz\n", elem_name(g->elem), h->name,
             jit_cpu_name(g->jit), hw_vbits(h), g->W, elem_name(g->elem), hw_vregs(h),
             hw_fma_units(h), hw_fma_lat(h), hw_ghz(h));
  bool run = jit_can_run(g->jit);
  int rs = atomic_load(&g->rows_state), ds = atomic_load(&g->dot_state), xs = atomic_load(&g->famx_state);
  if (!run) {
    buf_puts(out, "not compiled: this CPU cannot run code for this model, whose rates below are "
                  "its own, not measured (:code builds the kernels)\n");
  } else {
    buf_printf(out, "compiled once: %d functions in %.1f ms (* splits k over accumulator "
               "sets)", g->nfuncs, g->compile_ms);
    buf_printf(out, "; row streaming: %d more, compiled when first weighed", ROWS_MAX);
    if (rs > 0) buf_printf(out, ", in %.1f ms", g->rows_ms);
    if (rs < 0) buf_puts(out, " (failed)");
    buf_printf(out, "; inner products: ");
    if (ds > 0) buf_printf(out, "%d more, compiled when first weighed, in %.1f ms", g->dot_nfuncs, g->dot_ms);
    else buf_printf(out, "compiled when first weighed%s", ds < 0 ? " (failed)" : "");
    for (int fi = EAGER_FAM; fi < g->nfam; fi++)
      buf_printf(out, "; %dx%d tiles: compiled when a shape's columns fit them better%s", g->fam[fi].mr, g->fam[fi].nr,
                 xs > 0 ? "" : xs < 0 ? " (failed)" : " (not yet)");
    if (xs > 0 && g->nfam > EAGER_FAM) buf_printf(out, ", in %.1f ms", g->famx_ms);
    buf_puts(out, "\n");
  }
  buf_printf(out, "level 0 register tiles (h x nr: regs, FLOPs/element loaded):");
  for (int i = 0; i < g->ncand; i++)
    buf_printf(out, "%s%dx%d: %d, %.1f%s", i % 6 ? "  " : "\n  ", g->cand[i].mr,
               g->cand[i].v * g->W, g->cand[i].regs, g->cand[i].score,
               g->cand[i].kept ? " [kept]" : "");
  buf_puts(out, "\n");
  for (int fi = 0; fi < g->nfam; fi++) {
    const Family *f = &g->fam[fi];
    buf_printf(out, "family %d: %dx%d, heights (GFLOP/s per core, %s):", fi, f->mr, f->nr,
               !f->measured ? "FMA model"
               : gemm_slow(g) != 1 ? "measured in L1, scaled to the sustained rate; + ns a call"
                             : "measured in L1; + ns a call");
    for (int hh = 1; hh <= f->mr; hh++)
      if (f->has[hh]) {
        buf_printf(out, " %d%s %.0f", hh, f->ksplit[hh] > 1 ? "*" : "", tile_gflops(f, hh));
        if (f->measured) buf_printf(out, "+%.0f", f->call_s[hh] * 1e9);
      }
    buf_puts(out, "\n");
  }
  if (ds > 0) {
    buf_printf(out, "inner products h x w (GFLOP/s per core, %s; + ns a call):", run ? "measured in L1" : "FMA model");
    for (int w = 1; w <= DOT_WMAX; w++)
      for (int hh = DOT_HMAX; hh >= 1; hh--)
        if (g->dot.has[w][hh])
          buf_printf(out, "%s%dx%d%s %.0f +%.0f", hh == g->dot.hmax[w] ? "\n  " : "  ", hh, w,
                     g->dot.ks[w][hh] > 1 ? "*" : "", 2.0 * hh * w * g->W / g->dot.vsec[w][hh] * 1e-9,
                     g->dot.call[w][hh] * 1e9);
    buf_puts(out, "\n");
  }
  if (!valid) {
    buf_printf(out, "%s\n", err);
    return;
  }
  buf_printf(out, "shape: batch %lld, M %lld, N %lld, K %lld%s%s%s, %d thread%s\n",
             (long long)x->batch, (long long)x->m, (long long)x->n, (long long)x->k,
             x->accumulate ? ", C +=" : "", p.swapped ? ", run as C^T = B^T A^T" : "",
             p.ctmp ? ", C through a tile buffer" : "", nthreads, nthreads == 1 ? "" : "s");
  if (!work) {
    buf_puts(out, "nothing to compute\n");
    return;
  }
  const Family *f = &g->fam[best.fam];
  double flops = 2.0 * p.batch * p.m * p.n * p.k;
  if (best.rows) {
    buf_printf(out, "chosen: row streaming: the %lld row%s of C in L1, B read row by row, %d rows "
               "a step\n", (long long)p.m, p.m == 1 ? "" : "s", ROWS_U);
    buf_printf(out, "  cores: %d x 1 x %d blocks (batch x M x N) of %lld x %lld x %lld\n", best.tb,
               best.tn, (long long)imin(best.bb, p.batch), (long long)p.m,
               (long long)imin(best.nbk, p.n));
    buf_printf(out, "  L1: chunks of %lld columns\n", (long long)best.nc);
  } else if (best.dot) {
    buf_printf(out, "chosen: inner products, vectors along k: %d column%s", best.dw[0], best.dw[0] == 1 ? "" : "s");
    for (int s = 1; s < DOT_STRIPS && best.dw[s]; s++) buf_printf(out, " + %d", best.dw[s]);
    buf_printf(out, " a strip, tiles of %d rows; B^T %s\n", g->dot.hmax[dot_hw(&best)],
               best.pack_b ? "packed" : "in place (B's columns contiguous)");
    buf_printf(out, "  cores: %d x %d x 1 blocks (batch x M x N) of %lld x %lld x %lld\n", best.tb,
               best.tm, (long long)imin(best.bb, p.batch), (long long)imin(best.mb, p.m), (long long)p.n);
    ksplit_line(out, &best, &p);
    buf_printf(out, "  L1: kc = %lld\n", (long long)best.kc);
  } else {
    char grp[64] = "";
    if (a_grouped(g, f, p.a_sm, p.a_sk, best.pack_a))
      snprintf(grp, sizeof grp, " in one L1 set, taken %d at a time", uk_group_rows(&g->hw, f->mr, f->ksplit[f->mr]));
    buf_printf(out, "chosen: tile %dx%d, A %s%s%s, B %s\n", f->mr, f->nr,
               best.pack_a ? "packed" : p.a_sm == 1 || p.m == 1 ? "in place (unit rows" : "in place (strided rows",
               grp, best.pack_a ? "" : ")",
               best.fused ? "packed by each strip's first tile as it computes" : best.pack_b ? "packed" : "in place");
    buf_printf(out, "  cores: %d x %d x %d blocks (batch x M x N) of %lld x %lld x %lld\n",
               best.tb, best.tm, best.tn, (long long)imin(best.bb, p.batch),
               (long long)imin(best.mb, p.m), (long long)imin(best.nbk, p.n));
    ksplit_line(out, &best, &p);
    buf_printf(out, "  %s: nc = %lld   L2: mc = %lld   L1: kc = %lld   registers: %dx%d\n",
               best.nc_l2 ? "L2" : "L3", (long long)best.nc, (long long)best.mc,
               (long long)best.kc, f->mr, f->nr);
    /* the row pieces of the first L2 block: full tiles, then the edge */
    int64_t mt = imin(imin(best.mb, p.m), best.mc), r0;
    int ht, hs, npc = 0, nfull = 0;
    Pieces it;
    pieces_init(&it, f, mt, !best.pack_b);
    buf_printf(out, "  rows of a block: %lld =", (long long)mt);
    while (pieces_next(&it, &r0, &ht, &hs)) {
      if (it.d == 0) { nfull++; continue; }                 /* a full tile */
      if (nfull) buf_printf(out, "%s %d x %d", npc++ ? " +" : "", nfull, f->mr), nfull = 0;
      buf_printf(out, "%s %d", npc++ ? " +" : "", hs);
      if (hs < ht) buf_printf(out, " (on a %d-row tile)", ht);
    }
    if (nfull) buf_printf(out, "%s %d x %d", npc ? " +" : "", nfull, f->mr);
    buf_puts(out, "\n");
    if (best.edge)
      buf_printf(out, "  C's last %lld column%s apart, as inner products (a tile would compute its "
                 "whole strip): predicted %.2f us\n", (long long)best.edge, best.edge == 1 ? "" : "s",
                 best.t_edge * 1e6);
    if (c_streamed(g, &p, best.kc, best.tk > 1 ? best.kb : p.k, p.acc, p.ctmp))
      buf_puts(out, "  C written once, larger than the last cache: streamed past the caches\n");
  }
  buf_printf(out, "  predicted %.2f us (max of compute %.2f and memory %.2f, + stalls %.2f, "
             "packing %.2f, fork-join %.2f", best.t * 1e6, best.t_comp * 1e6,
             best.t_mem * 1e6, best.t_stall * 1e6, best.t_pack * 1e6, best.t_sync * 1e6);
  if (best.t_share > 0) buf_printf(out, ", C lines shared by cores %.2f", best.t_share * 1e6);
  if (best.t_red > 0) buf_printf(out, ", adding the copies of C %.2f", best.t_red * 1e6);
  if (best.edge) buf_printf(out, ", the last columns %.2f", best.t_edge * 1e6);
  buf_printf(out, ") = %.1f GFLOP/s\n", flops / best.t * 1e-9);
  qsort(c, (size_t)nc, sizeof *c, cmp_plan);
  /* the chosen first: it may be up to PLAN_MARGIN slower than the fastest (weigh) */
  for (int i = 1; i < nc; i++)
    if (c[i].t == best.t && c[i].fam == best.fam && c[i].pack_a == best.pack_a && c[i].pack_b == best.pack_b &&
        c[i].rows == best.rows && c[i].dot == best.dot && c[i].tb == best.tb && c[i].tm == best.tm &&
        c[i].tn == best.tn && c[i].tk == best.tk && c[i].kc == best.kc && c[i].mc == best.mc && c[i].nc == best.nc) {
      Plan chosen = c[i];
      memmove(c + 1, c, sizeof *c * (size_t)i);
      c[0] = chosen;
      break;
    }
  buf_printf(out, "candidates (%d weighed; the chosen first, then the fastest):\n", nc);
  char gs[64];
  for (int i = 0; i < nc && i < 8; i++) {
    if (c[i].rows)
      buf_printf(out, "  rows   B streamed by rows  grid %dx%dx%d  chunks of %-5lld       %9.2f us\n",
                 c[i].tb, c[i].tm, c[i].tn, (long long)c[i].nc, c[i].t * 1e6);
    else if (c[i].dot)
      buf_printf(out, "  dot    B^T %-6s          grid %s kc %-4lld                    %9.2f us\n",
                 c[i].pack_b ? "packed" : "direct", grid_str(&c[i], gs), (long long)c[i].kc,
                 c[i].t * 1e6);
    else
      buf_printf(out, "  %dx%-3d A %-6s B %-6s grid %s kc %-4lld mc %-5lld nc %-5lld%9.2f us\n",
                 g->fam[c[i].fam].mr, g->fam[c[i].fam].nr, c[i].pack_a ? "packed" : "direct",
                 c[i].pack_b ? "packed" : "direct", grid_str(&c[i], gs),
                 (long long)c[i].kc, (long long)c[i].mc, (long long)c[i].nc, c[i].t * 1e6);
  }
}

