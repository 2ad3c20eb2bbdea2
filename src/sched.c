/* sched.c -- the scheduler's shared terms: the CPU back end's :sched (cpu_sched.c), the GEMM
 * engine's model (gemm_model.c) and the GPU's launch model (cuda_plan.c) each price a plan in
 * seconds from the hardware model (hw.c); the terms they price it with the same way live here:
 * which level of the hierarchy a footprint lives in and at what bandwidth, main memory's
 * bandwidth, the last cache's size, the rounding of tasks into whole waves, and the roofline. */
#include "config.h"
#include "dyn_int.h"

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
