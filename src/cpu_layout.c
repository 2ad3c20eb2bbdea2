/* cpu_layout.c -- the cost of a layout change on the compiled CPU back end: a stage that
 * cpu.c runs in tiles transposed in registers (cpu_blocked_axis: a transpose, a permutation
 * that moves the last axis).  cpu_sched.c asks it for the time :sched and :time print.
 * Such a kernel moves the bytes of a copy, but a copy does one load and one store a vector
 * while a tile also pays the shuffles that transpose it, and the lines of a tile lie a row
 * apart, where a copy's follow each other.  Only built where LLVM is (HAVE_LLVM). */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"

/* The load by which a layout change reads along u: its last subscript is u (NULL: none). */
static const KExpr *load_along(const KExpr *e, int u) {
  if (e->kind == KX_LOAD && e->n >= 1 && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == u) return e;
  for (int i = 0; i < e->n; i++) {
    const KExpr *l = load_along(e->a[i], u);
    if (l) return l;
  }
  return NULL;
}

/* The share of the model's L1 that the w rows of a tile, `stride_bytes` apart, may use:
 * rows whose stride is a multiple of a high power of two fall into few of its sets (d sets:
 * one way's span over the largest power of two that divides the stride, at least a line),
 * which hold d * ways lines.  Returns w / (d * ways): over 1, the tile's lines evict each
 * other. */
static double set_pressure(const HwModel *hw, int64_t stride_bytes, int w) {
  const HwLevel *l1 = hw->nlevels > 1 ? &hw->level[0] : NULL;
  if (!l1 || l1->ways <= 0 || l1->bytes <= 0) return 0;
  int64_t span = l1->bytes / l1->ways, line = l1->line > 0 ? l1->line : 64, g = span;
  while (g > line && stride_bytes % g) g /= 2;
  return (double)w / ((double)(span / g) * l1->ways);
}

/* The model of a tile (w x w elements, w the lanes at the model's width): log2(w) rounds of
 * w two-vector shuffles on one shuffle port, and a load or a store a row beside them, one a
 * cycle: w (log2 w + 1) cycles.  Measured with cpu.c's tiles on Zen 5 (one thread, f32,
 * 16 x 16 tiles, in cache): 0.30 cycles an element at 496 x 496, against 0.31 here.  When
 * the lines of the input's and the result's rows crowd the L1's sets (pressure: the sum of
 * set_pressure over both), they evict each other: 512 x 512 (pressure 2) took 2.3 times as
 * long as 496 x 496, 1024 x 1024 (pressure 4) 3.6 times as long as 1008 x 1008, 768 x 768
 * (pressure 1) 1.1 times what this predicts; so a tile costs that many times more (up to 4). */
static double tile_cycles(int w, double pressure) {
  int lg = 0;
  while ((1 << lg) < w) lg++;
  double f = pressure < 1 ? 1 : pressure > 4 ? 4 : pressure;
  return (double)w * (lg + 1) * f;
}

double cpu_layout_time(const HwModel *hw, const Program *p, const Kernel *kn, const int64_t *ext,
                       const int64_t *strides, int threads, double bytes) {
  int cores = hw->cores > 0 ? hw->cores : 1, t = threads < cores ? threads : cores;
  if (t < 1) t = 1;
  double cycles = 0;
  bool any = false;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    int u = cpu_blocked_axis(kn, st);
    if (u < 0) continue;
    any = true;
    int w = cpu_tile_lanes(hw->vector_bits, st->expr->ty), esize = elem_size(st->expr->ty);
    double n = 1;
    for (int a = 0; a < st->naxes; a++) n *= (double)ext[st->axes[a]];
    /* a tile's rows: the result's a step of u apart, the input's a step of v (the stage's
     * innermost axis) */
    int v = st->axes[st->naxes - 1];
    /* the result's lines crowd the L1 only when they are stored there: a result that with
     * its input outgrows the last cache is streamed past it (cpu_rt.c's streaming) */
    double pressure = 0;
    int64_t llc = sched_last_cache_bytes(hw);
    for (int a = 0; a < st->naxes; a++)
      if (st->axes[a] == u && !(llc > 0 && bytes > (double)llc))
        pressure += set_pressure(hw, strides[st->out * DYN_MAX_RANK + a] * esize, w);
    const KExpr *ld = load_along(st->expr, u);
    for (int k = 0; ld && k + 1 < ld->n; k++)
      if (ld->a[k]->kind == KX_AXIS && ld->a[k]->axis == v) {
        pressure += set_pressure(hw, strides[ld->slot * DYN_MAX_RANK + k] * elem_size(p->slots[ld->slot].type.elem), w);
        break;
      }
    cycles += n / ((double)w * w) * tile_cycles(w, pressure);
  }
  if (!any) return 0;
  /* the bytes at the rate of the level each thread's share fits in (a transpose in cache runs
   * at the cache's rate, where the roofline of cost.c takes main memory's) */
  double bw = sched_shared_bw(hw, bytes / t, t) * t;
  double mem = bytes / (bw > 0 ? bw : 1e9);
  double shuffle = cycles / ((hw->ghz > 0 ? hw->ghz : 2.0) * 1e9 * t);
  return shuffle > mem ? shuffle : mem;
}

#endif
