/* cpu_reduce.c -- reductions over several axes, or a middle one, on the compiled CPU back
 * end: the plan (which axes run together in one loop), the loop nest cpu.c has built
 * through cpu_reduce.h, a reduction's weight in the run-time's split over threads, and the
 * split of its reduced extent where the kept one leaves cores idle.  cpu.c asks for a plan
 * for a kernel's only stage when it reduces; the stage then runs here, cpu_sched.c prints
 * the plan and prices the split, cpu_rt.c weighs the tasks and runs the split through
 * cpu_reduce_split_run.  Only built where LLVM is (HAVE_LLVM).
 *
 * Why.  A stage loops over its own axes, then the reduction's, in the order written, and
 * LLVM vectorises the innermost loop: batch norm's statistics, Y[c] = sum[n, h, w]
 * X[n, c, h, w] over 32 x 64 x 28 x 28, ran a vector loop of 28 and its horizontal sum
 * 28,672 times, at 7% of a copy's bandwidth; the spatial sums of 64 x 256 x 14 x 14 at 6%.
 * Axes that lie one after another in memory are one loop here: h and w above are one loop
 * of 784, and the stage's loops follow the operand's layout, outer to inner, so that it is
 * read in order.  Where the innermost run is reduced, its loop sums into a scalar that LLVM
 * spreads over vector accumulators, added once into the result; where it is kept, each step
 * of the outer reduced runs adds a whole run of the result, vertical vector adds (the
 * result set to the reduction's start first).  The axes of a run are merged when every
 * access takes them together, in order, as plain subscripts (a load that reads one of them
 * alone, or the axis's value in arithmetic, keeps them apart); their strides are only known
 * at run time (an input is read in place), so the code checks that each run's strides join
 * (stride = the next axis's extent x its stride) and otherwise runs the stage's own loops.
 * A merged run's loop index is the last axis's subscript, the others' 0: the address is
 * then the run's offset from its start.  The parallel axis leads its run (its tasks'
 * ranges scaled by the rest of the run).
 * Summing order: each innermost reduced run is summed in vector partial sums, the outer
 * reduced runs one after another into the result, as the column sums always were. */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_reduce.h"

#include <stdlib.h>
#include <string.h>

/* ---- the plan ---- */

typedef struct Scan {
  const KExpr *load[64];       /* the operand's loads */
  int nload;
  uint64_t loose;              /* axes read other than as a load's plain subscript */
  bool bad;                    /* a where, a nested reduction, a load checked at run time */
} Scan;

static void scan(const KExpr *e, Scan *sc, bool subscript) {
  switch (e->kind) {
  case KX_AXIS:
    if (!subscript) sc->loose |= 1ull << (e->axis % 64);
    return;
  case KX_SELECT: case KX_REDUCE: case KX_SCAN:
    sc->bad = true;
    return;
  case KX_LOAD:
    if (e->checked || sc->nload == 64) {
      sc->bad = true;
      return;
    }
    sc->load[sc->nload++] = e;
    for (int i = 0; i < e->n; i++) scan(e->a[i], sc, e->a[i]->kind == KX_AXIS);
    return;
  default:
    for (int i = 0; i < e->n; i++) scan(e->a[i], sc, false);
  }
}

/* The place of axis a among the plain subscripts of an access (n subscripts), or -1. */
static int place(KExpr *const *sub, int n, int a) {
  for (int i = 0; i < n; i++)
    if (sub[i]->kind == KX_AXIS && sub[i]->axis == a) return i;
  return -1;
}

/* May axis b follow axis a in one run: every access that takes either takes both, b as the
 * subscript right after a's, and the result (for kept axes) too. */
static bool joins(const Scan *sc, const Stage *st, int a, int b) {
  if ((sc->loose >> (a % 64) & 1) || (sc->loose >> (b % 64) & 1)) return false;
  for (int i = 0; i < sc->nload; i++) {
    const KExpr *l = sc->load[i];
    int pa = place(l->a, l->n, a), pb = place(l->a, l->n, b);
    bool ua = l->axmask >> (a % 64) & 1, ub = l->axmask >> (b % 64) & 1;
    if (!ua && !ub) continue;
    if (pa < 0 || pb != pa + 1) return false;
  }
  int pa = -1, pb = -1;
  for (int i = 0; i < st->naxes; i++) {
    if (st->axes[i] == a) pa = i;
    if (st->axes[i] == b) pb = i;
  }
  return (pa < 0 && pb < 0) || (pa >= 0 && pb == pa + 1);
}

static bool kept(const Stage *st, int a) {
  for (int i = 0; i < st->naxes; i++)
    if (st->axes[i] == a) return true;
  return false;
}

/* Ask that the strides of `slot` (an access of rank `rank` whose dims from `dim` hold run g)
 * be checked, once per slot and place. */
static bool check(CpuRedPlan *pl, int slot, int dim, int rank, int g) {
  for (int i = 0; i < pl->nchk; i++)
    if (pl->chk_slot[i] == slot && pl->chk_dim[i] == dim && pl->chk_group[i] == g) return true;
  if (pl->nchk == CPU_RED_CHECKS) return false;
  pl->chk_slot[pl->nchk] = slot;
  pl->chk_dim[pl->nchk] = dim;
  pl->chk_rank[pl->nchk] = rank;
  pl->chk_group[pl->nchk++] = g;
  return true;
}

bool cpu_reduce_plan(const Program *p, const Kernel *kn, int s, int par_axis, CpuRedPlan *pl) {
  const Stage *st = &kn->stages[s];
  const KExpr *e = st->expr;
  if (kn->nouter || kn->nstages != 1 || st->naxes < 1 || e->kind != KX_REDUCE || e->ty == DYN_BOOL ||
      elem_is_half(e->ty) || p->slots[st->out].type.elem != e->ty || par_axis != st->axes[0])
    return false;
  Scan sc = {0};
  scan(e->a[0], &sc, false);
  int all = st->naxes + e->nraxes;
  if (sc.bad || all > CPU_RED_AXES) return false;
  /* the layout: the first load that takes every axis as a plain subscript */
  const KExpr *full = NULL;
  for (int i = 0; i < sc.nload && !full; i++) {
    const KExpr *l = sc.load[i];
    bool ok = l->n == all;
    for (int k = 0; ok && k < l->n; k++) ok = l->a[k]->kind == KX_AXIS && place(l->a, k, l->a[k]->axis) < 0;
    if (ok) full = l;
  }
  if (!full) return false;
  memset(pl, 0, sizeof *pl);
  pl->nax = all;
  for (int k = 0; k < all; k++) pl->ax[k] = full->a[k]->axis;
  for (int k = 0; k < all; k++)       /* the load's axes are the stage's and the reduction's */
    if (!kept(st, pl->ax[k])) {
      bool r = false;
      for (int i = 0; i < e->nraxes; i++) r = r || e->raxes[i] == pl->ax[k];
      if (!r) return false;
    }
  pl->par_group = -1;
  bool merged = false, seen_red = false;
  for (int k = 0; k < all; k++) {
    int a = pl->ax[k];
    bool red = !kept(st, a);
    int g = pl->ng - 1;
    if (g >= 0 && pl->gred[g] == red && a != par_axis && joins(&sc, st, pl->ax[k - 1], a)) {
      pl->glen[g]++;
      merged = true;
      continue;
    }
    g = pl->ng++;
    pl->gfirst[g] = k;
    pl->glen[g] = 1;
    pl->gred[g] = red;
    if (a == par_axis) pl->par_group = g;
  }
  if (!merged) return false;
  /* direct: every reduced run inside every kept one */
  pl->direct = pl->gred[pl->ng - 1];
  for (int g = 0; g < pl->ng; g++) {
    if (pl->gred[g]) seen_red = true;
    else if (seen_red) pl->direct = false;
  }
  /* the strides to check: each access of a merged run, and the result's for a kept one */
  for (int g = 0; g < pl->ng; g++) {
    if (pl->glen[g] < 2) continue;
    int a0 = pl->ax[pl->gfirst[g]];
    for (int i = 0; i < sc.nload; i++) {
      const KExpr *l = sc.load[i];
      int pa = place(l->a, l->n, a0);
      if (pa >= 0 && !check(pl, l->slot, pa, l->n, g)) return false;
    }
    if (!pl->gred[g]) {
      int pa = 0;
      while (st->axes[pa] != a0) pa++;
      if (!check(pl, st->out, pa, st->naxes, g)) return false;
    }
  }
  return true;
}

/* Does e load a tensor along axis a (a its last subscript)? */
static bool along(const KExpr *e, int a) {
  if (e->kind == KX_LOAD && e->n && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == a) return true;
  for (int i = 0; i < e->n; i++)
    if (along(e->a[i], a)) return true;
  return false;
}

/* A reduction's results each sum many elements: counted by its results alone, batch norm's
 * statistics over 32 x 64 x 28 x 28 (64 results) and the row sums of 4096 x 4096 ran on one
 * thread.  But where the parallel axis is the operand's rows (column sums, s[n] =
 * sum[b] X[b, n]), each task would read a short piece of every row, which measured slower
 * on two threads than the whole rows on one (4096 x 4096: 3.3 against 1.8 ms); those keep
 * the old count, and cpu_reduce_split splits their reduced extent instead. */
int64_t cpu_reduce_work(const Kernel *kn, int s, int par_axis, const int64_t *ext) {
  const KExpr *e = kn->stages[s].expr;
  if (e->kind != KX_REDUCE || par_axis < 0 || along(e->a[0], par_axis)) return 1;
  int64_t w = 1;
  for (int i = 0; i < e->nraxes && w < (1 << 30); i++) w *= ext[e->raxes[i]] > 0 ? ext[e->raxes[i]] : 1;
  return w;
}

void cpu_reduce_text(const Program *p, const CpuRedPlan *pl, Buf *out) {
  for (int g = 0; g < pl->ng; g++) {
    buf_puts(out, g ? ", " : "");
    if (pl->glen[g] > 1) buf_putc(out, '(');
    for (int k = 0; k < pl->glen[g]; k++) buf_printf(out, "%s%s", k ? " " : "", p->axes[pl->ax[pl->gfirst[g] + k]].name);
    if (pl->glen[g] > 1) buf_putc(out, ')');
    buf_puts(out, pl->gred[g] ? " reduced" : " kept");
  }
}

/* ---- the reduced extent split over threads ---- */

/* Column sums, c[j] = sum[i] W[i, j] over 4096 x 4096, ran on one thread: their tasks split
 * the kept extent, and a task that reads a short piece of every row measured slower than one
 * that reads whole rows (cpu_reduce_work).  Where the kept extent leaves cores idle, the
 * reduced one is split instead: each piece of the operand's outermost reduced axis is the
 * same kernel run with that axis's extent cut to the piece and the loads that take it moved
 * to its start, into a partial result of its own; the partials are then combined in piece
 * order.  The pieces are twice the model's cores (or the axis's extent), so results are the
 * same on any number of threads; a sum's rounding differs from the unsplit order's by the
 * few partial sums.  Whether to split is the model's: the streaming time of the kernel on
 * the tasks it would have, against the split's plus the partials written and combined. */

#define SPLIT_SLOTS 16

/* The partial results' combination, one type and operation. */
#define COMBINE(T)                                                        \
  static void combine_##T(T *y, const T *x, int64_t n, RedOp op) {        \
    switch (op) {                                                         \
    case RED_SUM: for (int64_t i = 0; i < n; i++) y[i] += x[i]; break;    \
    case RED_PROD: for (int64_t i = 0; i < n; i++) y[i] *= x[i]; break;   \
    case RED_MAX: for (int64_t i = 0; i < n; i++) y[i] = x[i] > y[i] || x[i] != x[i] ? x[i] : y[i]; break; \
    case RED_MIN: for (int64_t i = 0; i < n; i++) y[i] = x[i] < y[i] || x[i] != x[i] ? x[i] : y[i]; break; \
    }                                                                     \
  }
COMBINE(float)
COMBINE(double)
COMBINE(int32_t)
COMBINE(int64_t)

static bool combinable(DynElem e) { return e == DYN_F32 || e == DYN_F64 || e == DYN_I32 || e == DYN_I64; }

double cpu_reduce_combine_time(const HwModel *h, const CpuRedSplit *sp, int elem_bytes) {
  double k = (double)sp->kept * elem_bytes;
  SchedWork c = {.ops = (double)sp->kept * (double)(sp->pieces - 1), .elem_bytes = elem_bytes,
                 .read = k * (double)sp->pieces, .written = k, .tasks = 1};
  return sched_stream_time(h, 1, &c, NULL);
}

bool cpu_reduce_split(const HwModel *h, const Program *p, const CKernel *ck, const int64_t *ext,
                      const int64_t *strides, const int64_t *shape, CpuRedSplit *sp) {
  const Kernel *kn = ck->kn;
  if (kn->nouter || kn->nstages != 1 || ck->gemm || ck->win) return false;
  const Stage *st = &kn->stages[0];
  const KExpr *e = st->expr;
  int out = st->out;
  if (e->kind != KX_REDUCE || !combinable(e->ty) || p->slots[out].type.elem != e->ty) return false;
  Scan sc = {0};
  scan(e->a[0], &sc, false);
  if (sc.bad || !sc.nload) return false;
  /* the axis: the first reduced subscript of the first load that has one */
  int a = -1;
  for (int i = 0; i < sc.nload && a < 0; i++)
    for (int k = 0; k < sc.load[i]->n && a < 0; k++)
      if (sc.load[i]->a[k]->kind == KX_AXIS && !kept(st, sc.load[i]->a[k]->axis)) a = sc.load[i]->a[k]->axis;
  if (a < 0 || (sc.loose >> (a % 64) & 1) || ext[a] < 2) return false;
  memset(sp, 0, sizeof *sp);
  sp->axis = a;
  /* every load that takes it takes it once, as a plain subscript, at one dim per slot */
  for (int i = 0; i < sc.nload; i++) {
    const KExpr *l = sc.load[i];
    if (!(l->axmask >> (a % 64) & 1)) continue;
    int d = place(l->a, l->n, a), m = 0;
    if (d < 0) return false;
    for (int k = 0; k < l->n; k++)
      if (k != d && (l->a[k]->axmask >> (a % 64) & 1)) return false;
    while (m < sp->nmove && sp->move_slot[m] != l->slot) m++;
    if (m < sp->nmove) {
      if (sp->move_dim[m] != d) return false;
      continue;
    }
    if (sp->nmove == SPLIT_SLOTS || l->slot == out) return false;
    sp->move_slot[sp->nmove] = l->slot;
    sp->move_dim[sp->nmove++] = d;
  }
  /* the result dense, so that its partials are plain arrays */
  int64_t kept_n = 1, dense = 1;
  for (int d = st->naxes - 1; d >= 0; d--) {
    int64_t x = shape ? shape[out * DYN_MAX_RANK + d] : ext[st->axes[d]];
    if (shape && x > 1 && strides[out * DYN_MAX_RANK + d] != dense) return false;
    dense *= x;
    kept_n *= x;
  }
  if (kept_n < 1) return false;
  sp->kept = kept_n;
  /* the model: the kernel's bytes and an operation an element, on its tasks or on the pieces */
  int cores = h->cores > 0 ? h->cores : 1, eb = elem_size(e->ty);
  double elems = (double)kept_n, rd = 0;
  for (int i = 0; i < e->nraxes; i++) elems *= (double)(ext[e->raxes[i]] > 0 ? ext[e->raxes[i]] : 0);
  for (int i = 0; i < sc.nload; i++) rd += elems * elem_size(p->slots[sc.load[i]->slot].type.elem);
  int64_t pieces = ext[a] < 2 * cores ? ext[a] : 2 * cores;
  SchedWork w = {.ops = elems, .elem_bytes = eb, .read = rd, .written = (double)kept_n * eb,
                 .tasks = cpu_task_count(kn, ck->par_axis, ext, cores)};
  if (w.tasks >= cores || pieces < 2) return false;
  sp->t_now = sched_stream_time(h, cores, &w, NULL);
  w.tasks = pieces;
  sp->pieces = pieces;
  sp->t_split = sched_stream_time(h, cores, &w, NULL) + cpu_reduce_combine_time(h, sp, eb);
  return sp->t_split < sp->t_now;
}

typedef struct SplitRun {
  const Program *p;
  const CKernel *ck;
  KernelFn fn;
  const KCtx *base;
  const CpuRedSplit *sp;
  char *part;                      /* pieces - 1 partial results, `bytes` apart */
  size_t bytes;
  int64_t n;
  volatile int *interrupt;
} SplitRun;

static void split_task(void *arg, int64_t t) {
  SplitRun *r = arg;
  if (r->interrupt && *r->interrupt) return;
  const CpuRedSplit *sp = r->sp;
  const Program *p = r->p;
  int64_t R = r->base->ext[sp->axis], lo = R * t / sp->pieces, hi = R * (t + 1) / sp->pieces;
  int64_t ext_local[64], *ext = p->naxes <= 64 ? ext_local : xmalloc(sizeof(int64_t) * (size_t)p->naxes);
  void *bufs_local[256], **bufs = p->nslots <= 256 ? bufs_local : xmalloc(sizeof(void *) * (size_t)p->nslots);
  memcpy(ext, r->base->ext, sizeof(int64_t) * (size_t)p->naxes);
  memcpy(bufs, r->base->bufs, sizeof(void *) * (size_t)p->nslots);
  ext[sp->axis] = hi - lo;
  for (int m = 0; m < sp->nmove; m++) {
    int s = sp->move_slot[m];
    bufs[s] = (char *)bufs[s] + lo * r->base->strides[s * DYN_MAX_RANK + sp->move_dim[m]] * elem_size(p->slots[s].type.elem);
  }
  if (t > 0) bufs[r->ck->kn->stages[0].out] = r->part + (size_t)(t - 1) * r->bytes;
  KCtx c = *r->base;
  c.ext = ext;
  c.bufs = bufs;
  r->fn(&c, 0, r->n);
  if (ext != ext_local) free(ext);
  if (bufs != bufs_local) free(bufs);
}

bool cpu_reduce_split_run(void *pool, const Program *p, const CKernel *ck, KernelFn fn, const KCtx *base,
                          const CpuRedSplit *sp, int64_t n, volatile int *interrupt) {
  const Stage *st = &ck->kn->stages[0];
  DynElem ty = st->expr->ty;
  size_t bytes = ((size_t)sp->kept * (size_t)elem_size(ty) + 63) / 64 * 64;
  char *part = aligned_alloc(64, bytes * (size_t)(sp->pieces - 1));
  if (!part) return false;
  SplitRun r = {p, ck, fn, base, sp, part, bytes, n, interrupt};
  dyn_parallel_for(pool, sp->pieces, split_task, &r);
  void *y = base->bufs[st->out];
  RedOp op = st->expr->red;
  for (int64_t t = 1; t < sp->pieces; t++) {
    const void *x = part + (size_t)(t - 1) * bytes;
    switch (ty) {
    case DYN_F32: combine_float(y, x, sp->kept, op); break;
    case DYN_F64: combine_double(y, x, sp->kept, op); break;
    case DYN_I32: combine_int32_t(y, x, sp->kept, op); break;
    default: combine_int64_t(y, x, sp->kept, op); break;
    }
  }
  free(part);
  return true;
}

/* ---- the innermost loop's short runs, for the model ---- */

/* A reduction's innermost loop runs whole vectors, and the elements of a run past the last
 * whole vector one at a time; each run also enters and leaves its loop and (where reduced)
 * adds its vector partials across.  The lane-operations count (cost.c) prices every element
 * at the vector rate, which holds for long runs; a sum over the last axis of 7 (100000 x 7)
 * ran at 12% of its bytes' rate, since every element there is such a one.  Charged here: a
 * cycle for each element past the last whole vector (a load and an add; two where the run is
 * kept, whose result is loaded and stored again) and RUN_CYC for each run. */
#define RUN_CYC 3

double cpu_reduce_run_ops(const HwModel *h, const Program *p, const Kernel *kn, int par_axis, const int64_t *ext) {
  if (kn->nouter || kn->nstages != 1 || kn->stages[0].expr->kind != KX_REDUCE || h->ghz <= 0) return 0;
  const Stage *st = &kn->stages[0];
  const KExpr *e = st->expr;
  double total = 1, k;
  for (int i = 0; i < st->naxes; i++) total *= (double)ext[st->axes[i]];
  for (int i = 0; i < e->nraxes; i++) total *= (double)ext[e->raxes[i]];
  bool keep;
  CpuRedPlan pl;
  if (cpu_reduce_plan(p, kn, 0, par_axis, &pl)) {
    int g = pl.ng - 1;
    k = 1;
    for (int i = 0; i < pl.glen[g]; i++) k *= (double)ext[pl.ax[pl.gfirst[g] + i]];
    keep = !pl.gred[g];
  } else if (st->naxes && cpu_interchanged(p, kn, 0, par_axis)) {
    k = (double)ext[st->axes[st->naxes - 1]];
    keep = true;
  } else {
    k = (double)ext[e->raxes[e->nraxes - 1]];
    keep = false;
  }
  int eb = elem_size(e->ty), vf = h->vector_bits > 0 ? h->vector_bits / (8 * eb) : 1;
  if (total <= 0 || k <= 0) return 0;
  double runs = total / k, rest = (double)((int64_t)k % (vf > 0 ? vf : 1));
  double cycles = runs * (rest * (keep ? 2 : 1) + RUN_CYC);
  return cycles * sched_lane_ops_rate(h, 1, eb) / (h->ghz * 1e9);
}

/* ---- the loop nest ---- */

/* The extent of run g (its axes' product); lead: of those after the first. */
static LLVMValueRef run_extent(const CpuRedGen *rg, int g, bool lead) {
  const CpuRedPlan *pl = rg->pl;
  LLVMValueRef n = LLVMConstInt(rg->i64, 1, 0);
  for (int k = lead ? 1 : 0; k < pl->glen[g]; k++) n = LLVMBuildMul(rg->b, n, rg->ext(rg->g, pl->ax[pl->gfirst[g] + k]), "");
  return n;
}

/* Open run g's loop and give its axes their values: the index to the last, 0 to the rest. */
static void open_run(const CpuRedGen *rg, int g) {
  const CpuRedPlan *pl = rg->pl;
  LLVMValueRef lo = LLVMConstInt(rg->i64, 0, 0), hi;
  if (g == pl->par_group) {
    LLVMValueRef m = run_extent(rg, g, true);
    lo = LLVMBuildMul(rg->b, rg->lo, m, "");
    hi = LLVMBuildMul(rg->b, rg->hi, m, "");
  } else {
    hi = run_extent(rg, g, false);
  }
  LLVMValueRef i = rg->loop(rg->g, lo, hi);
  int f = pl->gfirst[g], n = pl->glen[g];
  for (int k = 0; k + 1 < n; k++) rg->set_axis(rg->g, pl->ax[f + k], LLVMConstInt(rg->i64, 0, 0));
  rg->set_axis(rg->g, pl->ax[f + n - 1], i);
}

/* Do the strides join every merged run? */
static LLVMValueRef runs_join(const CpuRedGen *rg) {
  const CpuRedPlan *pl = rg->pl;
  LLVMValueRef ok = LLVMConstInt(LLVMInt1TypeInContext(rg->cx), 1, 0);
  for (int c = 0; c < pl->nchk; c++) {
    int g = pl->chk_group[c], f = pl->gfirst[g];
    for (int k = 0; k + 1 < pl->glen[g]; k++) {
      LLVMValueRef s0 = rg->stride(rg->g, pl->chk_slot[c], pl->chk_dim[c] + k, pl->chk_rank[c]);
      LLVMValueRef s1 = rg->stride(rg->g, pl->chk_slot[c], pl->chk_dim[c] + k + 1, pl->chk_rank[c]);
      LLVMValueRef want = LLVMBuildMul(rg->b, rg->ext(rg->g, pl->ax[f + k + 1]), s1, "");
      ok = LLVMBuildAnd(rg->b, ok, LLVMBuildICmp(rg->b, LLVMIntEQ, s0, want, ""), "");
    }
  }
  return ok;
}

void cpu_reduce_gen(const CpuRedGen *rg) {
  const CpuRedPlan *pl = rg->pl;
  LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "runs");
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "apart");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "reduced");
  LLVMBuildCondBr(rg->b, runs_join(rg), fast, slow);
  LLVMPositionBuilderAtEnd(rg->b, slow);
  rg->plain(rg->g);
  LLVMBuildBr(rg->b, join);
  LLVMPositionBuilderAtEnd(rg->b, fast);
  /* the innermost runs of one kind, and the runs outside them */
  int in = pl->ng - 1;
  while (in > 0 && pl->gred[in - 1] == pl->gred[pl->ng - 1]) in--;
  if (!pl->direct) {     /* the result starts at the reduction's start */
    int open = 0;
    for (int g = 0; g < pl->ng; g++)
      if (!pl->gred[g]) open_run(rg, g), open++;
    rg->store(rg->g, rg->init(rg->g));
    while (open--) rg->end(rg->g);
  }
  for (int g = 0; g < in; g++) open_run(rg, g);
  if (pl->gred[pl->ng - 1]) {
    LLVMValueRef acc = rg->slot(rg->g, rg->ty);
    LLVMBuildStore(rg->b, rg->init(rg->g), acc);
    for (int g = in; g < pl->ng; g++) open_run(rg, g);
    rg->step(rg->g, acc, rg->value(rg->g));
    for (int g = in; g < pl->ng; g++) rg->end(rg->g);
    LLVMValueRef v = LLVMBuildLoad2(rg->b, rg->ty, acc, "");
    if (pl->direct) rg->store(rg->g, v);
    else rg->step(rg->g, rg->out_ptr(rg->g), v);
  } else {
    for (int g = in; g < pl->ng; g++) open_run(rg, g);
    rg->step(rg->g, rg->out_ptr(rg->g), rg->value(rg->g));
    for (int g = in; g < pl->ng; g++) rg->end(rg->g);
  }
  for (int g = 0; g < in; g++) rg->end(rg->g);
  LLVMBuildBr(rg->b, join);
  LLVMPositionBuilderAtEnd(rg->b, join);
}

#endif
