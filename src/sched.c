/* sched.c -- the scheduler's shared terms: the CPU back end's :sched (cpu_sched.c), the GEMM
 * engine's model (gemm_model.c) and the GPU's launch model (cuda_plan.c) each price a plan in
 * seconds from the hardware model (hw.c); the terms they price it with the same way live here:
 * which level of the hierarchy a footprint lives in and at what bandwidth, main memory's
 * bandwidth, the last cache's size, the rounding of tasks into whole waves, the roofline and
 * the time of a kernel that streams its tensors (element-wise, row-wise, reductions). */
#include "config.h"
#include "dyn_int.h"

#include <math.h>

#include <string.h>

int64_t sched_cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

int64_t sched_waves(int64_t tasks, int64_t slots) { return sched_cdiv(tasks, slots > 0 ? slots : 1); }

const HwLevel *sched_level(const HwModel *h, const char *name) {
  for (int i = 0; i < h->nlevels; i++)
    if (!strcmp(h->level[i].name, name)) return &h->level[i];
  return NULL;
}

double sched_mem_bw(const HwModel *h, double dflt) {
  const HwLevel *m = h->nlevels ? &h->level[h->nlevels - 1] : NULL;
  return m && m->gbs > 0 ? m->gbs * 1e9 : dflt;
}

int64_t sched_last_cache_bytes(const HwModel *h) {
  return h->nlevels >= 2 && h->level[h->nlevels - 2].bytes > 0 ? h->level[h->nlevels - 2].bytes : 0;
}

/* The levels are walked from L1 down: a footprint that fits a cache streams at that cache's
 * per-core rate (the hw file's gbs), one that fits none at main memory's. */
double sched_level_bw(const HwModel *h, double F) {
  int nc = hw_ncaches(h);
  for (int i = 0; i < nc; i++) {
    double cap = (double)h->level[i].bytes;
    if (F <= cap && h->level[i].gbs > 0) return h->level[i].gbs * 1e9;
  }
  return sched_mem_bw(h, 10e9);
}

double sched_shared_bw(const HwModel *h, double F, int users) {
  double bw = sched_level_bw(h, F);
  int nc = hw_ncaches(h);
  for (int i = 0; i <= nc && i < h->nlevels; i++)
    if (i == nc || F <= (double)h->level[i].bytes) {
      double tot = h->level[i].total_gbs * 1e9;
      if (tot > 0 && users > 0 && tot / users < bw) bw = tot / users;
      break;
    }
  return bw;
}

/* ---- the roofline and the streaming kernel's time ----
 *
 * Every software constant of the CPU's model, with where it lives and how it was found; the
 * hardware's figures are the hw file's, each with its source (hw/README.md).  This is the
 * index of every software constant of the models: the GEMM engine's own corrections
 * (CALL_CYC, WS_S, SPLIT_LOADS, ...) are gemm_model.c's table (the 16-bit engine, gemm_half.c,
 * takes CALL_CYC and SYNC_S from it and adds DP_PACK_OPS), and the GPU launch model's
 * thresholds (SPLIT_WIN, WARP_RED_MIN, ROW_WARP_MAX, GRID_RED_*, ...) cuda_plan.c's, each
 * with what it guards against; no other file of the models holds one.
 *
 *   name            value    where          what it is; how it was found
 *   SCHED_SYNC_S    0.3 us   sched.c        a fork-join on the CPU pool when a kernel's tasks
 *                                           are shared, where dyn --calibrate did not measure
 *                                           one (sched_sync_s; the GEMM engine's too):
 *                                           measured on 2 threads of Zen 5 (0.16 us with empty
 *                                           tasks, 0.2-0.4 beside small products;
 *                                           gemm_model.c); another Zen 5 guest took 0.7-1.0
 *                                           us beside tasks of 0.15-2.7 us
 *   KERNEL_S        0.07 us  cpu_sched.c    a kernel's start beside its work (cpu_run's
 *                                           dispatch): :time --kernels of matmul 2 x 2 and
 *                                           transpose 1 x 768 on Zen 5, 0.08-0.11 us
 *   CALL_S          0.15 us  cpu_sched.c    a call beside its kernels (sizes, facts, plans):
 *                                           make bench's 2 x 2 x 2 and 13 x 11 x 17 matmul on
 *                                           Zen 5, 0.2 us a call with kernels of 0.01-0.1;
 *                                           both scaled to the call of one empty kernel that
 *                                           dyn --calibrate times (call_us), where it did
 *   lane_ops        table    cost.c         a math function's lane-operations an element:
 *                                           counted in vmath.c's expansions; division and
 *                                           square root 8, Agner Fog's throughput tables
 *                                           (5-10 cycles a 512-bit vdivps, Zen 4 to Skylake-X)
 *   attention       4 + exp  cost.c         an attention score's softmax in lane-operations
 *                                           (scale, maximum, difference, sum; the scale a
 *                                           division's 8 where the program divides), counted
 *                                           in cpu_attn.c's block_update
 *   hoisting        a row    cost.c         what does not vary along a row runs once a row
 *                                           (LICM), read in :code layernorm asm
 *   FOLD_STEP_CYC   5 cyc    cpu_sched.c    a step of a row-wise reduction's fold of its
 *                                           lanes (a shuffle and the operation), log2(lanes)
 *                                           + 2 steps a reduction a row: softmax, layernorm
 *                                           and rmsnorm over rows of 16 to 128, one thread
 *                                           of Zen 5; once for each value of a
 *                                           stage's own axes beside the row's
 *   TAIL_UF         4        cpu_sched.c    the vectors a step of LLVM's vectorised loop
 *                                           takes, after which a loop's tail runs in half
 *                                           vectors, then single elements, each issuing a
 *                                           whole vector's instructions, a cycle at least
 *   TAIL_ENTRY_CYC  2 cyc    cpu_sched.c    and each loop's entry (cpu_tail_ops): exp and
 *                                           X * 2.0 over f32[R, N], N = 16 to 144, one
 *                                           thread of Zen 5
 *   EDGE_CYC        1.5 cyc  cpu_layout.c   an element of a layout change with a side
 *                                           shorter than a tile (the plain loops): f32[7, 8191]
 *                                           on 2 threads of Zen 5
 *   CONV_RUN_CYC    230 cyc  cpu_conv.c     a depthwise plane's run beside its loads and FMAs
 *                                           (a call, its blocks' set-up, the copy's loop):
 *   CONV_OUT_CYC    1.7 cyc  cpu_conv.c     and an output's copies into the padded plane and
 *                                           out of the run; fitted on 1 thread of Emerald
 *                                           Rapids, 3 x 3 taps, 7 x 7, 14 x 14 and 112 x 112
 *                                           maps (cpu_conv.c, the model's comment)
 *   STORE_WAIT_CYC  16 cyc   cpu_reduce.c   a load of places just stored across two stores,
 *                                           which no store forwards (the fold of a short
 *                                           plan's rows, once a block): 10-20 cycles on Intel
 *                                           and AMD cores, Agner Fog's microarchitecture
 *                                           manual
 *   PRESSURE_MAX    1.5x     cpu_layout.c   the most a tile whose rows crowd the L1's sets
 *                                           costs: 512 x 512 and 1024 x 1024 against rows a
 *                                           tile shorter, one thread of Zen 5
 *   OFF_LINE        1.7x     cpu_layout.c   a tile whose result rows are not whole lines
 *                                           apart, where the hw file has no tile_off_line:
 *                                           result rows of 1000, 1001, 1004, 1012 and 1016
 *                                           f32 against 992, 1008, 1040, one thread of
 *                                           Emerald Rapids
 *   write-allocate  2x bus   sched.c        a store to a line no cache holds reads the line
 *                                           first (read for ownership), so each byte written
 *                                           to memory crosses the memory bus twice unless the
 *                                           kernel streams its stores (Intel SDM vol. 3 11.3
 *                                           "write-back"; AMD APM vol. 2 7.4; Arm's cores
 *                                           detect whole-line writes, which the CPU back end
 *                                           only meets with streaming stores anyway); only
 *                                           the fill counts against a core's own rate, the
 *                                           write-back of the dirty line does not (sched.c,
 *                                           the streaming kernel's time)
 *   BUS_BELOW       0.9      sched.c        a memory total below the cores' summed rates by
 *                                           more than the calibration's spread is a bus of its
 *                                           own, which carries the write-back; nearer, the
 *                                           cores' fetches bind: gelu of f32[4096, 4096], 2
 *                                           threads of Zen 5
 *   STREAM_KEEP     0.7      sched.c        a private cache's share of its core's capacity
 *                                           that a streaming set as much written as read
 *                                           keeps between calls while the threads' caches
 *                                           hold it (nothing of a larger set; all of it for
 *                                           a set only read): permutations of 0.5-8 MiB and
 *                                           row sums of 2.8-3.8 MB, 1 and 2 threads of
 *                                           Emerald Rapids (stream_hold)
 *   kept share      C / F    sched.c        a working set F larger than the last cache C
 *                                           finds C of it there on the next call: the caches'
 *                                           replacement resists a stream that cycles through
 *                                           more than they hold (adaptive insertion, Qureshi
 *                                           et al., ISCA 2007; in Intel's L3 since Ivy Bridge
 *                                           and AMD's since Zen), where pure LRU would keep
 *                                           none; rmsnorm over 2048 x 4096 on 2 threads of
 *                                           Zen 5 (33.6 MB read, 32 MiB L3) ran 0.96 ms,
 *                                           1.40 ms with every byte from memory; C is what
 *                                           dyn --calibrate found a guest's share keeps
 *                                           (kept_bytes) for a set only read, the share
 *                                           for one written too (stream_hold)
 *   MOVE_LINES      8        sched.c        lines one core wrote that another reads in a
 *                                           stream move a few at a time: MOVE_LINES for each
 *                                           line_move_ns, the time of one contested line
 *                                           (fitted on a Zen 5 guest, 2 threads, the 16-bit
 *                                           engine's packed panels: 200 x 1000 x 512 took
 *                                           390 us where the model without the moves said
 *                                           255, 128 x 768 x 768 269 us where it said 168;
 *                                           13 x 33 x 385 10.3 us where the caller alone
 *                                           took 4.5) */
#define SCHED_SYNC_S 0.3e-6
double sched_sync_s(const HwModel *h) { return h && h->sync_us > 0 ? h->sync_us * 1e-6 : SCHED_SYNC_S; }
#define MOVE_LINES 8
double sched_line_move_s(const HwModel *h) { return h->line_move_ns > 0 ? h->line_move_ns * 1e-9 : 60e-9; }
double sched_lines_moved_s(const HwModel *h, double lines) { return lines * sched_line_move_s(h) / MOVE_LINES; }

/* The roofline of FLOPs and bytes on `threads` of h: the slower of the FLOPs at the threads'
 * share of the peak and the bytes at main memory's bandwidth for that many cores.  The GPU's
 * launch model passes its SMs as threads. */
double sched_roofline(const HwModel *hw, int threads, double flops, double bytes) {
  int cores = hw->cores > 0 ? hw->cores : 1;
  int t = threads < cores ? threads : cores;
  double peak = hw->peak_gflops_f32 * 1e9 * t / cores;
  const HwLevel *mem = hw->nlevels ? &hw->level[hw->nlevels - 1] : NULL;
  double bw = mem ? (mem->total_gbs > 0 && mem->gbs * t > mem->total_gbs ? mem->total_gbs : mem->gbs * t) * 1e9 : 10e9;
  if (peak <= 0) peak = 1e9;
  if (bw <= 0) bw = 1e9;
  double tf = flops / peak, tb = bytes / bw;
  return tf > tb ? tf : tb;
}

int sched_cache_units(const HwModel *h, int i, int threads) {
  int sb = h->level[i].shared_by > 1 ? h->level[i].shared_by : 1, t = threads > 0 ? threads : 1;
  return sb > 1 ? (t + sb - 1) / sb : t;
}

int64_t sched_line_bytes(const HwModel *h) { return h->nlevels > 1 && h->level[0].line > 0 ? h->level[0].line : 64; }

/* The level a working set of F bytes stays in between calls, on `threads` cores: a private
 * cache holds `threads` times its size, a shared one its size for each group of cores that
 * shares it (a guest's share of it, or what dyn --calibrate found it keeps of a set that
 * fits: kept_bytes); nlevels - 1 (main memory) when no cache holds it. */
static double fit_capacity(const HwModel *h, int i, int threads) {
  const HwLevel *lv = &h->level[i];
  return (double)(lv->kept_bytes > lv->bytes ? lv->kept_bytes : lv->bytes) * sched_cache_units(h, i, threads);
}

/* What level i keeps of a streaming kernel's set of F bytes between calls, on `threads`
 * cores.  A shared cache keeps its capacity for each group of cores that shares it
 * (fit_capacity; of a larger set too, its share, where adaptive insertion resists the
 * stream: the index above).  A private one keeps the set where each core's part fits the
 * share of its cache the set can use (below), else that share while the set fits the
 * threads' caches together, and nothing of a larger set, which cycles through every line
 * before it comes back (LRU).  STREAM_KEEP, not the whole cache, for a set written as much
 * as read: its dirty lines and their write-backs take the rest.  Measured on Emerald Rapids
 * (2 MiB L2 a core), a permutation
 * Y[j, i, k] = X[i, j, k] of 0.5 to 8 MiB read and written, :time minimums: on 1 thread
 * 15 us a MiB up to 1 MiB, 23 at 2 MiB, 34-39 from 3 MiB (L3); on 2 threads 8.5 us a MiB at
 * 2 MiB, 11.7 at 3, 13.7 at 4, 17 at 5 and 8.  Both fit a private share of 0.65-0.72 of one
 * L2 (2 threads at 4 MiB: 0.055 ms measured, 0.023 predicted with the set in the threads'
 * two L2s, 0.057 with this). */
#define STREAM_KEEP 0.7
static double stream_hold(const HwModel *h, int i, int threads, double F, double dirty) {
  if (h->level[i].shared_by > 1) {
    /* what dyn --calibrate's reads found kept holds for a larger set only read; one written
     * as much as read keeps the share (transposes of f32[4096, 4096], 2 threads of the Zen
     * 4 guest at fit_capacity, ran 1.7x the time its 19 MiB kept predicted), and one between
     * the two between them by the written share, as a private cache's */
    double k = fit_capacity(h, i, threads), share = (double)h->level[i].bytes * sched_cache_units(h, i, threads);
    return F <= k ? k : k - (k - share) * fmin(1, 2 * dirty / F);
  }
  /* Each participant's share of the tasks is the same on every call (pool.c), so a set that
   * a kernel only reads stays in the cores' own caches, part by part: row sums of 2.8 to 3.8
   * MB on 2 threads of Emerald Rapids (2 MiB of L2 a core) read 160-250 GB/s, at the L2s'
   * rate, where a 0.7 of one L2 kept priced them at 1.7-2.7 times their times.  A core keeps
   * STREAM_KEEP of its cache where the kernel writes as much as it reads (the dirty lines
   * and their write-backs take the rest: the permutations above), all of it where it only
   * reads, and between the two by the written share. */
  double cap = (double)h->level[i].bytes * (1 - (1 - STREAM_KEEP) * fmin(1, F > 0 ? 2 * dirty / F : 0));
  int t = threads > 0 ? threads : 1;
  if (F <= cap * t) return F;
  return F <= fit_capacity(h, i, threads) ? cap : 0;
}

int sched_fit_level(const HwModel *h, double F, int threads) {
  int nc = hw_ncaches(h);
  for (int i = 0; i < nc; i++)
    if (F <= fit_capacity(h, i, threads) && h->level[i].gbs > 0) return i;
  return h->nlevels - 1;
}

/* Level i's bandwidth for `threads` cores streaming from it: the per-core rate times the cores,
 * at most the level's total. */
double sched_threads_bw(const HwModel *h, int i, int threads) {
  if (i < 0 || i >= h->nlevels || h->level[i].gbs <= 0) return 10e9;
  double bw = h->level[i].gbs * (threads > 0 ? threads : 1);
  if (h->level[i].total_gbs > 0 && bw > h->level[i].total_gbs) bw = h->level[i].total_gbs;
  return bw * 1e9;
}

/* Vector lane-operations per second of `threads` cores on elements of elem_bytes: the lanes of
 * a vector times the vector pipes (vec_units, the pipes that take every floating-point
 * operation; the FMA pipes where the file does not say) times the clock, which is a core's
 * share of the f32 peak over the 2 FLOPs an FMA counts there, at the lanes of elem_bytes.
 * Zen 4's four 256-bit pipes are two at 512 bits, of which one pair does FMAs: at the FMA
 * rate alone the model took gelu, silu and softmax of f32[64, 1024] (in L2, one thread) for
 * 1.66-1.8x their times.  Taken from the peak, it is the measured rate where dyn
 * --calibrate measured one (hw_set_measured_peak): /proc/cpuinfo's clock is often a virtual
 * CPU's base clock, 2.1 GHz on a Zen 5 host whose micro-kernel ran at 3.4 GHz's rate. */
double sched_lane_ops_rate(const HwModel *h, int threads, int elem_bytes) {
  int fma = h->fma_units > 0 ? h->fma_units : 1, pipes = h->vec_units > fma ? h->vec_units : fma;
  double share = h->lane_scale > 0 ? h->lane_scale : 1;      /* dyn --calibrate's (session.c) */
  return sched_fma_lanes_rate(h, threads, elem_bytes) * pipes / fma * share;
}

/* The same on the FMA pipes alone: the lanes of FMAs a second (code that is all FMAs, or as
 * many loads as FMAs, such as attention's dot products). */
double sched_fma_lanes_rate(const HwModel *h, int threads, int elem_bytes) {
  int lanes = h->vector_bits > 0 && elem_bytes > 0 ? h->vector_bits / (8 * elem_bytes) : 1;
  double ghz = h->ghz > 0 ? h->ghz : 1;
  double core = (double)(lanes > 0 ? lanes : 1) * (h->fma_units > 0 ? h->fma_units : 1) * ghz * 1e9;
  if (h->peak_gflops_f32 > 0 && h->cores > 0 && elem_bytes > 0)
    core = h->peak_gflops_f32 * 1e9 / h->cores / 2 * 4.0 / elem_bytes;
  return core * (threads > 0 ? threads : 1);
}

/* The bytes of a streaming kernel come from where its working set stays between calls: the
 * bytes it reads and, unless it streams its stores past the caches, the lines it writes,
 * which a store allocates.  A set that fits a cache streams at that level's rate, and a
 * private cache past L1 takes the dirty lines back from L1 as well: the written bytes cross
 * twice (priced without that at calibrated read rates, L2-resident rows ran 2-5x their
 * prediction: rmsnorm of f32[33, 1000] and layernorm of [100, 768] on Emerald Rapids and
 * Zen 4).  One larger than every cache finds the last cache's capacity of it there (the
 * kept share, in the index above) and the rest in memory; stores that stream go to memory
 * whatever fits.
 *
 * A core's rate from memory (the hw file's per-core dram.gbs, a read loop's) is bound by
 * the lines it can have in flight: it counts what the core fetches, the bytes it reads and
 * the lines its stores fill (read for ownership) or stream, and not the write-back of a
 * dirty line, which the cache hierarchy does after the fact.  Where the threads' fetches
 * could outrun the memory's total (dram.total_gbs), the bus binds instead, and it carries
 * the write-back too: twice the written bytes of a kernel that does not stream them.  (A
 * detected host's total is its usable cores' streams, no bus of its own: there the cores'
 * fetches bind, and so they do where the total is within BUS_BELOW of the cores' rates: dyn
 * --calibrate raises a core's rate to its share of the total, so a total read on two threads
 * of Zen 5 at twice one's rate came out a rounding below it, and the write-back was charged:
 * gelu of f32[4096, 4096] predicted 2.04 ms of memory, 1.63 measured, 1.33 without.)
 * Charging the write-back at the core's rate, the
 * model called silu over 2048 x 5632 on 2 threads of Zen 5 (memory-bound there) 2.9 ms
 * against 1.4 measured.
 *
 * A kernel whose reads all stay in the caches while its stores stream to memory (the
 * result pushes the set past the last cache) moves the two at once: streamed stores go out
 * through the write-combining buffers and hold none of the lines in flight that the reads
 * need.  Added, the model took rmsnorm of f32[1024, 1024] on one thread of Zen 5 (4 MB read
 * from L3, 4 MB streamed) for 0.174 ms against 0.117-0.131 measured; the larger of the two
 * is 0.126.  Reads that come from memory share it with the stores (gelu of f32[4096, 4096]:
 * 2.4 ms measured, 1.9 predicted added, 1.0 overlapped). */
#define BUS_BELOW 0.9
double sched_stream_time(const HwModel *h, int threads, const SchedWork *w, SchedTerms *out) {
  SchedTerms T = {0};
  int t = threads > 0 ? threads : 1;
  if (w->tasks > 0 && w->tasks < t) t = (int)w->tasks;
  if (h->cores > 0 && t > h->cores) t = h->cores;
  T.threads = t;
  /* the threads end with the busiest: its share of what they do at their own rates */
  T.imbalance = w->busiest * t > 1 ? w->busiest * t : 1;
  int last = h->nlevels - 1, nc = hw_ncaches(h);
  double streamed = w->streamed ? w->written : 0, F = w->read + w->written - streamed;
  T.moved = w->read + w->written;
  /* Each cache keeps the share of F its holding allows (stream_hold), the faster levels
   * before it theirs; what none keeps comes from memory.  The level is the first that keeps
   * all of it, else memory (with the share kept). */
  double kept = 0, cached_s = 0, dirty = streamed ? 0 : w->written;
  T.level = last;
  for (int i = 0; i < nc && F > 0; i++) {
    if (h->level[i].gbs <= 0) continue;
    double upto = stream_hold(h, i, t, F, dirty) / F;
    if (upto > 1) upto = 1;
    if (upto <= kept) continue;
    /* a private cache past L1 also takes back the lines the stores dirtied in L1 (a clean
     * line leaves L1 for nothing): the written bytes twice, the read once */
    double wb = i > 0 && h->level[i].shared_by <= 1 ? dirty : 0;
    cached_s += (upto - kept) * (F + wb) / sched_threads_bw(h, i, t);
    kept = upto;
    if (T.level == last && kept >= 1) T.level = i;
  }
  if (!(F > 0)) T.level = 0;
  T.memory = T.level == last && !w->streamed;
  /* the bus carries a written line's fetch and its write-back: 2 bytes a byte written, or
   * what dyn --calibrate's copy found them to cost beside its reads (write_cost) */
  double wcost = h->write_cost > 0 ? h->write_cost : 2;
  double fetched = (1 - kept) * F + streamed, bus = fetched + (!w->streamed ? (1 - kept) * w->written * (wcost - 1) : 0);
  double mem_s = 0;
  if (fetched > 0 && last >= 0) {
    const HwLevel *m = &h->level[last];
    double core = m->gbs > 0 ? m->gbs * 1e9 * t : 10e9, tot = m->total_gbs > 0 ? m->total_gbs * 1e9 : 0;
    mem_s = fetched / core * T.imbalance;
    if (tot > 0 && tot < BUS_BELOW * core) mem_s = bus / tot;
  }
  T.kept = kept;
  /* what it reads all in the caches, its streamed stores drain to memory beside the reads */
  T.mem_s = kept >= 1 ? fmax(cached_s * T.imbalance, mem_s) : cached_s * T.imbalance + mem_s;
  T.comp_s = w->ops / sched_lane_ops_rate(h, t, w->elem_bytes) * T.imbalance;
  T.sync_s = t > 1 ? sched_sync_s(h) : 0;
  T.total = (T.mem_s > T.comp_s ? T.mem_s : T.comp_s) + T.sync_s;
  if (out) *out = T;
  return T.total;
}
