/* cpu_layout.c -- a layout change on the compiled CPU back end: a stage that cpu.c runs in
 * tiles transposed in registers (cpu_blocked_axis: a transpose, a permutation that moves
 * the last axis).  Here: the walk of its tiles (blocks, bands, whole tiles a task), which
 * cpu.c's gen_blocked and cpu_rt.c's split follow, and its cost, which cpu_sched.c prints
 * for :sched and :time.  Only built where LLVM is (HAVE_LLVM). */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"

/* ---- the walk of the tiles ----
 * The tiles are walked in blocks of u (the result's rows, the input's columns), in each the
 * bands of v (the result's columns, the input's rows), and in a band the tiles along u, then
 * along v: a band reads each of its input rows in a run of the block (RUN_IN lines) and
 * writes each of the block's result rows in a run of the band (RUN_OUT lines).  Measured on
 * T = transpose(W), W f32[4096, 4096], 2 threads of Zen 5 (16 x 16 tiles, streamed stores,
 * minimum of 11 calls each, against a 2-thread memcpy of the same bytes in the same run):
 * bands one tile wide in blocks of 128 rows (the earlier walk: every result row written a
 * line at a time, input rows read 512 B at a time) ran at 46-57% of the copy; blocks of 256
 * and bands of 4 tiles (1 KiB of each input row, 4 lines of each result row) at 72-86%;
 * bands of 8 or 16 tiles and blocks of 512 or 1024 no better (63-97%, within the noise of
 * a shared host), blocks of 128 with bands of 4-16 tiles 63-74%.  So runs of 16 lines read
 * and 4 lines written, in the model's lines: the memory's streams stay long enough for its
 * prefetchers and open pages while a band's input rows (64 KiB here) stay within L2. */
#define RUN_IN 16
#define RUN_OUT 4

int64_t cpu_layout_block(const HwModel *hw, DynElem ty, int w) {
  int64_t bk = RUN_IN * sched_line_bytes(hw) / elem_size(ty);
  return bk < w ? w : bk / w * w;
}

int cpu_layout_band(const HwModel *hw, DynElem ty, int w) {
  int64_t nb = RUN_OUT * sched_line_bytes(hw) / ((int64_t)w * elem_size(ty));
  return nb < 1 ? 1 : (int)nb;
}

/* A task whose share of u is not whole tiles runs the rest in the plain loops: W f32[97, ...]
 * in the runtime's 8 tasks of 13 values of u each had no whole tile at all (33-39% of the
 * copy for permute 201 of 64 x 128 x 97). */
int64_t cpu_layout_granule(const Kernel *kn, int par_axis, int vector_bits) {
  int w = 1;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    int lanes = cpu_blocked_axis(kn, st) == par_axis && par_axis >= 0 ? cpu_tile_lanes(vector_bits, st->expr->ty) : 1;
    if (lanes > w) w = lanes;
  }
  return w;
}

/* The share of the model's L1 that the w rows of a tile, `stride_bytes` apart, may use:
 * rows whose stride is a multiple of a high power of two fall into few of its sets (d sets:
 * one way's span over the largest power of two that divides the stride, at least a line),
 * which hold d * ways lines.  Returns w / (d * ways): over 1, the tile's lines evict each
 * other. */
static double set_pressure(const HwModel *hw, int64_t stride_bytes, int w) {
  const HwLevel *l1 = hw->nlevels > 1 ? &hw->level[0] : NULL;
  if (!l1 || l1->ways <= 0 || l1->bytes <= 0) return 0;
  int64_t span = l1->bytes / l1->ways, line = sched_line_bytes(hw), g = span;
  while (g > line && stride_bytes % g) g /= 2;
  return (double)w / ((double)(span / g) * l1->ways);
}

/* ---- the model ----
 * A tile (w x w elements, w the lanes at the model's width): log2(w) rounds of w two-vector
 * shuffles on one shuffle port, and a load or a store a row beside them, one a cycle:
 * w (log2 w + 1) cycles.  Measured with cpu.c's tiles on Zen 5 (one thread, f32, 16 x 16
 * tiles, in cache): 0.30 cycles an element at 496 x 496, against 0.31 here; a tile cut by
 * an edge, shifted back to end at it, costs the same.  Where a side is shorter than a tile,
 * every element runs the plain loops: EDGE_CYC cycles, measured on Zen 5 with
 * transpose of f32[7, 8191] (no whole tile: every element in the plain loops, 1.3-1.9
 * cycles an element at the file's 2.1 GHz on 2 threads).  When the lines of the input's and
 * the result's rows crowd the L1's sets (pressure: the sum of set_pressure over both), they
 * evict each other: with this walk, one thread, minima of 41 calls, 512 x 512 (pressure 1.3)
 * took 1.5-1.6 times as long an element as 496 x 496, 1024 x 1024 (pressure 2.7) 1.1-1.6
 * times 1008 x 1008, 768 x 768 and 256 x 256 (pressure 0.7) 1.0-1.3 times 752 x 752 and
 * 240 x 240; so a tile costs up to PRESSURE_MAX times more (the earlier walk's blocks of a
 * tile's width lost up to 3.6 times).
 *
 * The tiles and the bytes overlap (the larger of the two) where the set sits in a private
 * cache, or comes from memory in the twin, which prefetches the tiles ahead (cpu.c).  From a
 * shared cache they add: a tile's shuffles wait for its w loads, whose lines come from the
 * shared level's latency, and nothing fetches the next tile's meanwhile.  One thread of
 * Zen 5, :time medians against the two added: transposes of f32[600, 600] to [1000, 1000]
 * and permutations Y[a, c, b] = X[a, b, c] of 8 x 300 x 300, 4 x 500 x 300 and 64 x 128 x
 * 97 (3-8 MB in L3) took 1.5-2.0 times the larger and 0.85-1.15 times the sum; in L2
 * (f32[256, 256]) 1.1 times the larger. */
#define EDGE_CYC 1.5
#define PRESSURE_MAX 1.5

/* Result rows that are not whole lines apart (a transpose of f32[1000, 1000]: rows of 4000
 * bytes) cost a tile the hardware's tile_off_line times its cycles, however far off a line,
 * and OFF_LINE where its file has none: one thread of an Emerald Rapids guest, transposes
 * of f32[M, 1008] (result rows of M, one process, three rounds): M = 992, 1008, 1040
 * 0.40-0.49 ms, M = 1000, 1001, 1004, 1012, 1016 0.64-1.07; two threads, [1000, 1000] 0.30
 * against [1008, 1008] 0.19 ms, [4097, 32] 28 against [4096, 32] 14 us.  Not the stores'
 * straddling lines: stored as two half vectors, none straddling, they took as long.  AMD's
 * cores pay little for it (zen4.hw 1.1, zen5.hw 1). */
#define OFF_LINE 1.7

static double tile_cycles(int w, double pressure) {
  int lg = 0;
  while ((1 << lg) < w) lg++;
  return (double)w * (lg + 1) * (pressure < 1 ? 1 : pressure > PRESSURE_MAX ? PRESSURE_MAX : pressure);
}

/* From a shared cache, a tile's shuffles wait for its lines (the model's note above). */
bool cpu_layout_waits(const HwModel *hw, const SchedTerms *T) {
  return T->level < hw->nlevels - 1 && hw->level[T->level].shared_by > 1;
}

const KExpr *cpu_layout_load(const KExpr *e, int u) {
  if (e->kind == KX_LOAD && e->n >= 1 && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == u) return e;
  for (int i = 0; i < e->n; i++) {
    const KExpr *l = cpu_layout_load(e->a[i], u);
    if (l) return l;
  }
  return NULL;
}

/* The tiles along v of a row of tiles (cpu.c's gen_blocked), those cut by an edge shifted
 * back: ceil(nv / w); or, where the target masks lanes and the result's rows step by whole
 * vectors along u, 1 + ceil((nv - skew) / w) for a row starting skew elements before a
 * vector's start (its first tile at v0, the rest on vectors): averaged over the starts that
 * the other axes' strides (os, the result's) give, multiples of their gcd with w. */
static double row_tiles(const HwModel *hw, const Stage *st, int64_t nv, int w, const int64_t *os, int u) {
  int64_t step = w, all = (nv + w - 1) / w;
  for (int a = 0; a < st->naxes; a++) {
    if (st->axes[a] == u && os[a] % w) return (double)all;
    if (st->axes[a] == u || a == st->naxes - 1) continue;
    for (int64_t x = os[a] % w; x;) {                     /* step = gcd(step, os[a] mod w) */
      int64_t t = step % x;
      step = x, x = t;
    }
  }
  if (!cpu_masks_lanes(hw->llvm_features) || step >= w) return (double)all;
  double sum = 0;
  for (int64_t mis = 0; mis < w; mis += step) sum += mis ? 1 + (nv - (w - mis) + w - 1) / w : all;
  return sum / (double)(w / step);
}

/* The result's rows of a blocked stage: its stride along u. */
static int64_t result_row(const Stage *st, int u, const int64_t *strides) {
  for (int a = 0; a < st->naxes; a++)
    if (st->axes[a] == u) return strides[st->out * DYN_MAX_RANK + a];
  return 0;
}

/* The cycles of one blocked stage over the extents ext (a task's share along the parallel
 * axis, or the whole). */
static double stage_cycles(const HwModel *hw, const Program *p, const Stage *st, int u, const int64_t *ext, const int64_t *strides,
                           bool streamed) {
  int w = cpu_tile_lanes(hw->vector_bits, st->expr->ty), v = st->axes[st->naxes - 1], esize = elem_size(st->expr->ty);
  double n = 1, rest = 1, pressure = 0;
  int64_t row = result_row(st, u, strides);
  for (int a = 0; a < st->naxes; a++) {
    n *= (double)ext[st->axes[a]];
    if (st->axes[a] != u && st->axes[a] != v) rest *= (double)ext[st->axes[a]];
  }
  /* the result's lines crowd the L1 only when they are stored there, not streamed past it;
   * the input's rows are a step of v apart */
  if (!streamed) pressure += set_pressure(hw, row * esize, w);
  const KExpr *ld = cpu_layout_load(st->expr, u);
  for (int k = 0; ld && k + 1 < ld->n; k++)
    if (ld->a[k]->kind == KX_AXIS && ld->a[k]->axis == v) {
      pressure += set_pressure(hw, strides[ld->slot * DYN_MAX_RANK + k] * elem_size(p->slots[ld->slot].type.elem), w);
      break;
    }
  /* tiles cut by an edge cost a whole one's, shifted back to end at it (cpu.c's
   * gen_blocked); where a side is shorter than a tile there is none */
  double tiles = 0, whole = 0;
  if (ext[u] >= w && ext[v] >= w) {
    tiles = (double)((ext[u] + w - 1) / w) * row_tiles(hw, st, ext[v], w, strides + st->out * DYN_MAX_RANK, u) * rest;
    whole = n;
  }
  /* a side of 1: the plain loops are a copy, the other side inside, a vector a cycle */
  double edge = ext[u] == 1 || ext[v] == 1 ? 1.0 / w : EDGE_CYC;
  double off = row * esize % sched_line_bytes(hw) ? (hw->tile_off_line > 0 ? hw->tile_off_line : OFF_LINE) : 1;
  return tiles * tile_cycles(w, pressure) * off + (n - whole) * edge;
}

/* The tiles' cycles on the busiest thread: each thread runs a contiguous share of the
 * tasks (the pool's), and a task whose share of a tile's side is shorter than a tile runs
 * its part in the plain loops (cpu.c's gen_blocked), so the transpose of f32[4097, 31] in
 * tasks of 16 and 15 values of u has a second thread of 15 x 4097 elements at EDGE_CYC:
 * 2 threads of a Zen 4 guest, 18-25 us, where whole tiles shared evenly predicted 9. */
double cpu_layout_time(const HwModel *hw, const Program *p, const Kernel *kn, const int64_t *ext, const int64_t *strides, int threads,
                       double read, double written, bool streamed, const CpuSplit *split, int par_axis, SchedTerms *out) {
  bool any = false;
  int esize = 4;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    int u = cpu_blocked_axis(kn, st);
    if (u < 0) continue;
    any = true;
    int w = cpu_tile_lanes(hw->vector_bits, st->expr->ty), v = st->axes[st->naxes - 1];
    esize = elem_size(st->expr->ty);
    /* the twin streams only the tiles whose result rows start on the vector's size and are
     * whole vectors (cpu.c's gen_blocked); the others' stores read their lines for ownership */
    if (result_row(st, u, strides) % w || ext[v] % w) streamed = false;
  }
  if (!any) return 0;
  /* tasks along another axis than par_axis (a split of the rows' pieces, cpu_task_split's
   * sub): the busiest thread's share of the whole */
  bool own = split && !split->sub && par_axis >= 0;
  int t = threads > 0 ? threads : 1;
  int64_t tasks = own && split->tasks > 0 ? split->tasks : 1;
  if (t > tasks) t = (int)tasks;
  double busiest = 0;
  int64_t *share = xmalloc(sizeof *share * (size_t)(p->naxes > 0 ? p->naxes : 1));
  memcpy(share, ext, sizeof *share * (size_t)p->naxes);
  for (int i = 0; i < t; i++) {
    double cyc = 0;
    for (int64_t k = pool_share_start(tasks, t, i); k < pool_share_start(tasks, t, i + 1); k++) {
      if (tasks > 1) {
        int64_t hi, lo = cpu_split_range(split, k, &hi);
        share[par_axis] = hi - lo;
      }
      for (int s = 0; s < kn->nstages; s++) {
        int u = cpu_blocked_axis(kn, &kn->stages[s]);
        if (u >= 0) cyc += stage_cycles(hw, p, &kn->stages[s], u, share, strides, streamed);
      }
    }
    if (cyc > busiest) busiest = cyc;
  }
  free(share);
  double most = split ? cpu_split_busiest(split, threads) : 1;    /* the busiest thread's share */
  if (split && !own) busiest *= most;
  SchedWork sw = {.ops = 0, .elem_bytes = esize, .read = read, .written = written, .streamed = streamed,
                  .tasks = split ? split->tasks : 1, .busiest = most};
  SchedTerms T;
  sched_stream_time(hw, threads, &sw, &T);
  T.comp_s = busiest / ((hw->ghz > 0 ? hw->ghz : 2.0) * 1e9);
  T.total = (cpu_layout_waits(hw, &T) ? T.comp_s + T.mem_s : T.comp_s > T.mem_s ? T.comp_s : T.mem_s) + T.sync_s;
  if (out) *out = T;
  return T.total;
}

#endif
