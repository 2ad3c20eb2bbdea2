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

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan ---- */

static const KExpr *plain_operand(const Program *p, const Kernel *kn, int s);

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
  /* a plan where the stage's own loops (its axes, then the reduction's, as written) would
   * read in the same order and nothing merges adds nothing; where they would not (sum[b, d]
   * X[a, b, c, d], kept c between reduced b and d: each c's sum read 64 runs of 256 bytes
   * 6 KB apart, at a quarter of the rate in order), the plan's order is the operand's */
  bool reordered = false;
  for (int k = 0; k < all; k++)
    reordered = reordered || pl->ax[k] != (k < st->naxes ? st->axes[k] : e->raxes[k - st->naxes]);
  if (!merged && !reordered) return false;
  /* direct: every reduced run inside every kept one */
  pl->direct = pl->gred[pl->ng - 1];
  for (int g = 0; g < pl->ng; g++) {
    if (pl->gred[g]) seen_red = true;
    else if (seen_red) pl->direct = false;
  }
  int nred = 0;
  for (int g = 0; g < pl->ng; g++) nred += pl->gred[g];
  pl->columns = pl->ng == 2 && pl->gred[0] && !pl->gred[1] && plain_operand(p, kn, s);
  pl->folded = pl->ng > 2 && pl->gred[pl->ng - 1] && !pl->gred[pl->ng - 2] && nred > 1 && plain_operand(p, kn, s);
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

/* ---- short kept runs ----
 * A sum along a middle axis whose kept innermost run is short -- X f32[8, 1021, 7] summed
 * over its middle axis -- ran interchanged (cpu.c): each reduced row added a run of 7 into
 * the result's, a masked or scalar loop of 7 entered 8,168 times, at 12% of a copy's
 * bandwidth.  Where the run's stride is 1 and the reduced axis before it has the run's
 * extent r as its stride, the block [reduced rows x r] of each kept index is one stretch of
 * memory, read here in whole vectors of W lanes (the model's width).  Element t of the
 * block is column t mod r, so a vector's lanes see the same columns again every A = r /
 * gcd(r, W) vectors (W a power of two): A vectors of accumulators taken in turn, lane l of
 * the j-th holding column (j W + l) mod r.  So that the adds keep the pipes busy, the loop
 * takes ceil(chains / A) such sets (as many as fit in amax), C vectors an iteration (C W
 * elements, a multiple of r); the block's last C W elements or fewer go whole vectors then
 * elements into the same places of an array of C W (the same lanes, since C W is a multiple
 * of r); then the sets fold into the first, vector by vector, and its A W / r rows of r
 * places into the first row, W columns at a time in a vector loaded from each row's place
 * (its lanes past the row never stored; one chain a column, in registers: through memory,
 * an element at a time, the fold took 130 of the 200 cycles a block of f32[1024, 63, 5]
 * summed over its middle axis took on a Zen 4 core, 1.5x the whole).  A lane pattern of
 * more than `amax` vectors (r = 17 with 16 lanes) runs the interchanged loops.  Summing
 * order: each lane's chain in order of the rows, then the sets in order, then the rows of
 * the first set in order; it depends on r and the model's width, never on the threads,
 * which split the kept axes (and where the only kept axis is the run, take it whole or run
 * the other loops). */

/* The operand of a kernel's only stage, a reduction of a plain load: its type the stage's,
 * every subscript an axis, each once, each a kept or a reduced axis.  NULL otherwise. */
static const KExpr *plain_operand(const Program *p, const Kernel *kn, int s) {
  const Stage *st = &kn->stages[s];
  const KExpr *e = st->expr, *l;
  if (kn->nouter || kn->nstages != 1 || st->naxes < 1 || e->kind != KX_REDUCE || !combinable(e->ty) ||
      p->slots[st->out].type.elem != e->ty)
    return NULL;
  l = e->a[0];
  if (l->kind != KX_LOAD || l->checked || l->n < 2 || l->n != st->naxes + e->nraxes || p->slots[l->slot].type.elem != e->ty)
    return NULL;
  for (int k = 0; k < l->n; k++) {
    if (l->a[k]->kind != KX_AXIS || place(l->a, k, l->a[k]->axis) >= 0) return NULL;
    bool red = false;
    for (int i = 0; i < e->nraxes; i++) red = red || e->raxes[i] == l->a[k]->axis;
    if (!red && !kept(st, l->a[k]->axis)) return NULL;
  }
  return l;
}

bool cpu_reduce_short_plan(const Program *p, const Kernel *kn, int s, CpuShortPlan *sp) {
  const Stage *st = &kn->stages[s];
  const KExpr *l = plain_operand(p, kn, s);
  if (!l) return false;
  int v = l->a[l->n - 1]->axis, r0 = l->a[l->n - 2]->axis;
  if (v != st->axes[st->naxes - 1] || kept(st, r0)) return false;
  sp->slot = l->slot;
  sp->rank = l->n;
  sp->v = v;
  sp->r0 = r0;
  return true;
}

CpuShortShape cpu_reduce_short_shape(const HwModel *h, DynElem ty) {
  CpuShortShape s;
  s.lanes = cpu_tile_lanes(h->vector_bits, ty);
  s.amax = (h->vec_regs > 0 ? h->vec_regs : 16) / 2;
  if (s.amax > 32) s.amax = 32;   /* short_main's arrays */
  s.chains = (h->fma_units > 0 ? h->fma_units : 2) * (h->fma_latency > 0 ? h->fma_latency : 4);
  if (s.chains > s.amax) s.chains = s.amax;
  return s;
}

/* The accumulator vectors of a lane pattern of a vectors: enough sets for the chains, as
 * many as fit in amax. */
static int sets_of(CpuShortShape s, int64_t a) {
  int64_t u = (s.chains + a - 1) / a, most = s.amax / a;
  return (int)((u < most ? u : most) * a);
}

/* A, the vectors of a run of r's lane pattern: r / gcd(r, W), W a power of two. */
static int64_t pattern_of(CpuShortShape s, int64_t r) {
  int64_t low = r & -r;
  return r / (low < s.lanes ? low : s.lanes);
}

int cpu_reduce_short_accs(CpuShortShape s, int64_t r) {
  if (r < 1) return 0;
  int64_t a = pattern_of(s, r);
  return a > s.amax ? 0 : sets_of(s, a);
}

static LLVMValueRef k64(const CpuRedGen *rg, int64_t v) { return LLVMConstInt(rg->i64, (unsigned long long)v, 1); }

/* x in every lane of a vector of W (the vector type vt's length) */
static LLVMValueRef splat(const CpuRedGen *rg, LLVMValueRef x, LLVMTypeRef vt) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(rg->cx);
  LLVMValueRef zero = LLVMConstInt(i32, 0, 0);
  return LLVMBuildShuffleVector(rg->b, LLVMBuildInsertElement(rg->b, LLVMGetUndef(vt), x, zero, ""), LLVMGetUndef(vt),
                                LLVMConstNull(LLVMVectorType(i32, LLVMGetVectorSize(vt))), "");
}

/* A load or a store of a scalar or a vector, aligned to its element only. */
static LLVMValueRef ld(const CpuRedGen *rg, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef v = LLVMBuildLoad2(rg->b, t, LLVMBuildGEP2(rg->b, rg->ty, base, &i, 1, ""), "");
  LLVMSetAlignment(v, (unsigned)elem_size(rg->st->expr->ty));
  return v;
}
static void st_at(const CpuRedGen *rg, LLVMValueRef x, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef s = LLVMBuildStore(rg->b, x, LLVMBuildGEP2(rg->b, rg->ty, base, &i, 1, ""));
  LLVMSetAlignment(s, (unsigned)elem_size(rg->st->expr->ty));
}
/* buf[i] = buf[i] (op) base[j] */
static void add_at(const CpuRedGen *rg, LLVMTypeRef t, LLVMValueRef buf, LLVMValueRef i, LLVMValueRef base, LLVMValueRef j) {
  st_at(rg, rg->op(rg->g, ld(rg, t, buf, i), ld(rg, t, base, j)), buf, i);
}

/* A loop of n iterations whose c vectors of accumulators, kept in buf (c W elements), stay
 * in registers: step gives each iteration's next values from the current ones, and the
 * final ones go back to buf. */
typedef void (*AccStep)(const CpuRedGen *rg, const void *ctx, LLVMValueRef i, const LLVMValueRef *acc, LLVMValueRef *nxt);
static void acc_loop(const CpuRedGen *rg, int c, LLVMValueRef buf, LLVMValueRef n, AccStep step, const void *ctx) {
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef acc0[64], acc[64], nxt[64], fin[64];
  for (int j = 0; j < c; j++) acc0[j] = ld(rg, vt, buf, k64(rg, (int64_t)j * W));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "acc.loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "acc.done");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, k64(rg, 0), ""), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef i = LLVMBuildPhi(b, rg->i64, "i");
  LLVMAddIncoming(i, (LLVMValueRef[]){k64(rg, 0)}, &pre, 1);
  for (int j = 0; j < c; j++) {
    acc[j] = LLVMBuildPhi(b, vt, "acc");
    LLVMAddIncoming(acc[j], &acc0[j], &pre, 1);
  }
  step(rg, ctx, i, acc, nxt);
  LLVMValueRef i1 = LLVMBuildAdd(b, i, k64(rg, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMAddIncoming(i, &i1, &latch, 1);
  for (int j = 0; j < c; j++) LLVMAddIncoming(acc[j], &nxt[j], &latch, 1);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i1, n, ""), body, done);
  LLVMPositionBuilderAtEnd(b, done);
  for (int j = 0; j < c; j++) {
    LLVMValueRef in[2] = {acc0[j], nxt[j]};
    LLVMBasicBlockRef from[2] = {pre, latch};
    fin[j] = LLVMBuildPhi(b, vt, "");
    LLVMAddIncoming(fin[j], in, from, 2);
  }
  for (int j = 0; j < c; j++) st_at(rg, fin[j], buf, k64(rg, (int64_t)j * W));
}

/* The rows of r places of a short plan's first set into its first, W places of each (from
 * buf on) at a time: iteration i adds row i + 1's. */
typedef struct { LLVMValueRef buf, r; } RowsCtx;
static void rows_fold_step(const CpuRedGen *rg, const void *ctx, LLVMValueRef i, const LLVMValueRef *acc, LLVMValueRef *nxt) {
  const RowsCtx *x = ctx;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)rg->shape.lanes);
  LLVMValueRef at = LLVMBuildMul(rg->b, LLVMBuildAdd(rg->b, i, k64(rg, 1), ""), x->r, "");
  nxt[0] = rg->op(rg->g, acc[0], ld(rg, vt, x->buf, at));
}

/* Short kept runs: iteration i adds the c vectors of the block from i c W on. */
typedef struct { int c; LLVMValueRef base; } ShortCtx;
static void short_step(const CpuRedGen *rg, const void *ctx, LLVMValueRef i, const LLVMValueRef *acc, LLVMValueRef *nxt) {
  const ShortCtx *x = ctx;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef off = LLVMBuildMul(rg->b, i, k64(rg, (int64_t)x->c * W), "");
  for (int j = 0; j < x->c; j++)
    nxt[j] = rg->op(rg->g, acc[j], ld(rg, vt, x->base, LLVMBuildAdd(rg->b, off, k64(rg, (int64_t)j * W), "")));
}

/* The whole iterations of c vectors of the block [0, n) at base into the accumulators kept
 * in buf (c W elements), in registers in the loop. */
static void short_main(const CpuRedGen *rg, int c, LLVMValueRef buf, LLVMValueRef base, LLVMValueRef n) {
  ShortCtx x = {c, base};
  acc_loop(rg, c, buf, LLVMBuildSDiv(rg->b, n, k64(rg, (int64_t)c * rg->shape.lanes), ""), short_step, &x);
}

/* Kept runs in registers.  Where the lane pattern is too long for the accumulators (r = 33
 * with 16 lanes: 33 vectors) or the block is not one stretch (rows a stride apart), the
 * interchanged loops added each reduced row into the result in memory, and each row's adds
 * waited on the last row's stores: column sums of f32[1000, 33] took 4.5 us on one thread of
 * an Emerald Rapids core, 13 cycles a row.  Where the run's stride is 1 and it is at least
 * one vector and at most KEPT_VMAX long, its columns are kept in registers over the reduced
 * rows instead: its whole vectors from the run's start, and the last r mod W columns as the
 * run's last W with the lanes already counted set to the reduction's start, so that no load
 * reads past the run.  Summing order: each column's chain in order of the rows, as the
 * interchanged loops sum. */
#define KEPT_VMAX 8
int cpu_reduce_kept_vectors(CpuShortShape s, int64_t r) {
  return r >= s.lanes && r <= (int64_t)KEPT_VMAX * s.lanes ? (int)(r / s.lanes) + 1 : 0;
}
/* A run of r >= W elements (W: the shape's lanes) as nv = r / W whole vectors and its last
 * W elements, whose lanes from W - r mod W on are new (none where r is a multiple of W):
 * the mask of those lanes; *t: r mod W. */
/* The lanes' numbers, <0, 1, ..., W - 1> as i32. */
static LLVMValueRef lane_numbers(const CpuRedGen *rg) {
  LLVMValueRef iota[64];
  for (int l = 0; l < rg->shape.lanes; l++) iota[l] = LLVMConstInt(LLVMInt32TypeInContext(rg->cx), (unsigned)l, 0);
  return LLVMConstVector(iota, (unsigned)rg->shape.lanes);
}

/* The mask of the lanes numbered below n (an i64, 0 to W). */
static LLVMValueRef lanes_below(const CpuRedGen *rg, LLVMValueRef n) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(rg->cx);
  return LLVMBuildICmp(rg->b, LLVMIntULT, lane_numbers(rg),
                       splat(rg, LLVMBuildTrunc(rg->b, n, i32, ""), LLVMVectorType(i32, (unsigned)rg->shape.lanes)), "");
}

static LLVMValueRef tail_lanes(const CpuRedGen *rg, LLVMValueRef r, LLVMValueRef *nv, LLVMValueRef *t) {
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(rg->cx), vi = LLVMVectorType(i32, (unsigned)W);
  *nv = LLVMBuildSDiv(b, r, k64(rg, W), "");
  *t = LLVMBuildSub(b, r, LLVMBuildMul(b, *nv, k64(rg, W), ""), "");
  LLVMValueRef from = LLVMBuildTrunc(b, LLVMBuildSub(b, k64(rg, W), *t, ""), i32, "");
  return LLVMBuildICmp(b, LLVMIntSGE, lane_numbers(rg), splat(rg, from, vi), "");
}

/* Kept runs in registers: row i adds the run's nv whole vectors and its last one, the lanes
 * already counted set to the start. */
typedef struct { int nv; LLVMValueRef base, s_r, r, tailmask, init; } KeptCtx;
static void kept_step(const CpuRedGen *rg, const void *ctx, LLVMValueRef i, const LLVMValueRef *acc, LLVMValueRef *nxt) {
  const KeptCtx *x = ctx;
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef row = LLVMBuildMul(b, i, x->s_r, "");
  for (int j = 0; j < x->nv; j++)
    nxt[j] = rg->op(rg->g, acc[j], ld(rg, vt, x->base, LLVMBuildAdd(b, row, k64(rg, (int64_t)j * W), "")));
  LLVMValueRef last = ld(rg, vt, x->base, LLVMBuildAdd(b, row, LLVMBuildSub(b, x->r, k64(rg, W), ""), ""));
  nxt[x->nv] = rg->op(rg->g, acc[x->nv], LLVMBuildSelect(b, x->tailmask, last, x->init, ""));
}

static void kept_gen(const CpuRedGen *rg, const CpuShortPlan *sp) {
  LLVMBuilderRef b = rg->b;
  const Stage *st = rg->st;
  const KExpr *e = st->expr;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  bool par = sp->v == rg->par_axis;
  LLVMValueRef v0 = par ? rg->lo : k64(rg, 0), r = par ? LLVMBuildSub(b, rg->hi, rg->lo, "") : rg->ext(rg->g, sp->v);
  LLVMValueRef R = rg->ext(rg->g, sp->r0);
  LLVMValueRef s_v = rg->stride(rg->g, sp->slot, sp->rank - 1, sp->rank);
  LLVMValueRef s_r = rg->stride(rg->g, sp->slot, sp->rank - 2, sp->rank);
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntEQ, s_v, k64(rg, 1), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSGE, r, k64(rg, W), ""), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLE, r, k64(rg, (int64_t)KEPT_VMAX * W), ""), "");
  LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "kept");
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "kept.apart");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "kept.reduced");
  LLVMBuildCondBr(b, ok, fast, slow);
  LLVMPositionBuilderAtEnd(b, slow);
  rg->plain(rg->g);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, fast);
  LLVMValueRef buf = rg->slot(rg->g, LLVMArrayType(rg->ty, (unsigned)((KEPT_VMAX + 1) * W)));
  LLVMValueRef init = rg->init(rg->g);
  LLVMValueRef vinit = splat(rg, init, vt);
  /* whole vectors nv = r / W (the first nv W columns), the tail's lanes W - r mod W and up */
  LLVMValueRef nv, t, tailmask = tail_lanes(rg, r, &nv, &t);
  for (int a = 0; a + 1 < st->naxes; a++) {
    bool pa = st->axes[a] == rg->par_axis;
    rg->set_axis(rg->g, st->axes[a], rg->loop(rg->g, pa ? rg->lo : k64(rg, 0), pa ? rg->hi : rg->ext(rg->g, st->axes[a])));
  }
  for (int j = 0; j <= KEPT_VMAX; j++) st_at(rg, vinit, buf, k64(rg, (int64_t)j * W));
  for (int k = 0; k < e->nraxes; k++)
    if (e->raxes[k] != sp->r0) rg->set_axis(rg->g, e->raxes[k], rg->loop(rg->g, k64(rg, 0), rg->ext(rg->g, e->raxes[k])));
  rg->set_axis(rg->g, sp->v, v0);
  rg->set_axis(rg->g, sp->r0, k64(rg, 0));
  LLVMValueRef base = rg->addr(rg->g);
  LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "kept.next");
  LLVMValueRef sw = LLVMBuildSwitch(b, nv, after, KEPT_VMAX);
  for (int n = 1; n <= KEPT_VMAX; n++) {
    LLVMBasicBlockRef arm = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "kept.vectors");
    LLVMAddCase(sw, k64(rg, n), arm);
    LLVMPositionBuilderAtEnd(b, arm);
    KeptCtx x = {n, base, s_r, r, tailmask, vinit};
    acc_loop(rg, n + 1, buf, R, kept_step, &x);
    LLVMBuildBr(b, after);
  }
  LLVMPositionBuilderAtEnd(b, after);
  for (int k = 0; k + 1 < e->nraxes; k++) rg->end(rg->g);
  /* the whole vectors' columns, then the tail's: column c is lane c - (r - W) of vector nv */
  LLVMValueRef nw = LLVMBuildMul(b, nv, k64(rg, W), "");
  LLVMValueRef c = rg->loop(rg->g, k64(rg, 0), nw);
  rg->set_axis(rg->g, sp->v, LLVMBuildAdd(b, v0, c, ""));
  rg->store(rg->g, ld(rg, rg->ty, buf, c));
  rg->end(rg->g);
  c = rg->loop(rg->g, nw, r);
  rg->set_axis(rg->g, sp->v, LLVMBuildAdd(b, v0, c, ""));
  rg->store(rg->g, ld(rg, rg->ty, buf, LLVMBuildAdd(b, c, LLVMBuildSub(b, k64(rg, W), t, ""), "")));
  rg->end(rg->g);
  for (int a = 0; a + 1 < st->naxes; a++) rg->end(rg->g);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, join);
}

void cpu_reduce_short_gen(const CpuRedGen *rg, const CpuShortPlan *sp) {
  LLVMBuilderRef b = rg->b;
  const Stage *st = rg->st;
  const KExpr *e = st->expr;
  CpuShortShape sh = rg->shape;
  int W = sh.lanes, cmax = 1;
  for (int a = 1; a <= sh.amax; a++) cmax = sets_of(sh, a) > cmax ? sets_of(sh, a) : cmax;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef r = rg->ext(rg->g, sp->v), R = rg->ext(rg->g, sp->r0);
  /* A = r / gcd(r, W) and C (sets_of), computed for r >= 1 */
  LLVMValueRef r1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, r, k64(rg, 1), ""), k64(rg, 1), r, "");
  LLVMValueRef low = LLVMBuildAnd(b, r1, LLVMBuildNeg(b, r1, ""), "");
  low = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, low, k64(rg, W), ""), low, k64(rg, W), "");
  LLVMValueRef A = LLVMBuildUDiv(b, r1, low, "");
  LLVMValueRef U = LLVMBuildUDiv(b, LLVMBuildAdd(b, A, k64(rg, sh.chains - 1), ""), A, "");
  LLVMValueRef most = LLVMBuildUDiv(b, k64(rg, sh.amax), A, "");
  U = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, U, most, ""), U, most, "");
  LLVMValueRef C = LLVMBuildMul(b, U, A, "");
  LLVMValueRef CW = LLVMBuildMul(b, C, k64(rg, W), "");
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntSGE, r, k64(rg, 1), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLE, A, k64(rg, sh.amax), ""), "");
  LLVMValueRef s_v = rg->stride(rg->g, sp->slot, sp->rank - 1, sp->rank);
  LLVMValueRef s_r = rg->stride(rg->g, sp->slot, sp->rank - 2, sp->rank);
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, s_v, k64(rg, 1), ""), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, s_r, r, ""), "");
  if (sp->v == rg->par_axis) {   /* a task takes the run whole */
    ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, rg->lo, k64(rg, 0), ""), "");
    ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, rg->hi, r, ""), "");
  }
  LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "short");
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "short.apart");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "short.reduced");
  LLVMBuildCondBr(b, ok, fast, slow);
  LLVMPositionBuilderAtEnd(b, slow);
  kept_gen(rg, sp);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, fast);
  /* C W places and a vector past them, which the fold of the rows reads (set to the start,
   * never stored) */
  LLVMValueRef buf = rg->slot(rg->g, LLVMArrayType(rg->ty, (unsigned)((cmax + 1) * W)));
  LLVMValueRef init = rg->init(rg->g);
  /* the kept axes but the run, outer to inner */
  for (int a = 0; a + 1 < st->naxes; a++) {
    bool par = st->axes[a] == rg->par_axis;
    rg->set_axis(rg->g, st->axes[a], rg->loop(rg->g, par ? rg->lo : k64(rg, 0), par ? rg->hi : rg->ext(rg->g, st->axes[a])));
  }
  rg->set_axis(rg->g, sp->v, k64(rg, 0));
  rg->set_axis(rg->g, sp->r0, k64(rg, 0));
  LLVMValueRef i = rg->loop(rg->g, k64(rg, 0), LLVMBuildAdd(b, CW, k64(rg, W), ""));
  st_at(rg, init, buf, i);
  rg->end(rg->g);
  /* the reduced axes but r0, then the block */
  for (int k = 0; k < e->nraxes; k++)
    if (e->raxes[k] != sp->r0) rg->set_axis(rg->g, e->raxes[k], rg->loop(rg->g, k64(rg, 0), rg->ext(rg->g, e->raxes[k])));
  LLVMValueRef base = rg->addr(rg->g), n = LLVMBuildMul(b, R, r, "");
  LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "short.tail");
  LLVMValueRef sw = LLVMBuildSwitch(b, A, tail, (unsigned)sh.amax);
  for (int a = 1; a <= sh.amax; a++) {
    LLVMBasicBlockRef arm = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "short.lanes");
    LLVMAddCase(sw, k64(rg, a), arm);
    LLVMPositionBuilderAtEnd(b, arm);
    short_main(rg, sets_of(sh, a), buf, base, n);
    LLVMBuildBr(b, tail);
  }
  LLVMPositionBuilderAtEnd(b, tail);
  /* the rest, less than C W elements from a multiple of C W: whole vectors, then elements */
  LLVMValueRef done = LLVMBuildMul(b, LLVMBuildSDiv(b, n, CW, ""), CW, "");
  LLVMValueRef rest = LLVMBuildSub(b, n, done, ""), nv = LLVMBuildSDiv(b, rest, k64(rg, W), "");
  LLVMValueRef tb = LLVMBuildGEP2(b, rg->ty, base, &done, 1, "");
  i = LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 0), nv), k64(rg, W), "");
  add_at(rg, vt, buf, i, tb, i);
  rg->end(rg->g);
  i = rg->loop(rg->g, LLVMBuildMul(b, nv, k64(rg, W), ""), rest);
  add_at(rg, rg->ty, buf, i, tb, i);
  rg->end(rg->g);
  for (int k = 0; k + 1 < e->nraxes; k++) rg->end(rg->g);
  /* the sets of A vectors into the first, in order, then each row of r places of those A
   * vectors into the first row, in order: the W places from each row's first, one vector
   * in registers whose first r lanes are the columns' sums (the rest past the rows, never
   * stored) */
  LLVMValueRef L = LLVMBuildMul(b, A, k64(rg, W), ""), rows = LLVMBuildUDiv(b, L, r1, "");
  LLVMValueRef u = LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 1), LLVMBuildUDiv(b, C, A, "")), L, "");
  i = LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 0), A), k64(rg, W), "");
  add_at(rg, vt, buf, i, buf, LLVMBuildAdd(b, u, i, ""));
  rg->end(rg->g);
  rg->end(rg->g);
  /* a vector of each row's places at a time (r may pass W: 15 with 8 lanes), in order, so
   * that the lanes past the row which the last one stores were read already */
  LLVMValueRef nvec = LLVMBuildUDiv(b, LLVMBuildAdd(b, r1, k64(rg, W - 1), ""), k64(rg, W), "");
  LLVMValueRef j = LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 0), nvec), k64(rg, W), "");
  RowsCtx rc = {LLVMBuildGEP2(b, rg->ty, buf, &j, 1, ""), r};
  acc_loop(rg, 1, rc.buf, LLVMBuildSub(b, rows, k64(rg, 1), ""), rows_fold_step, &rc);
  rg->end(rg->g);
  LLVMValueRef c = rg->loop(rg->g, k64(rg, 0), r);
  rg->set_axis(rg->g, sp->v, c);
  rg->store(rg->g, ld(rg, rg->ty, buf, c));
  rg->end(rg->g);
  for (int a = 0; a + 1 < st->naxes; a++) rg->end(rg->g);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, join);
}

/* ---- short reduced runs ----
 * Row sums of short rows -- X f32[100000, 7] summed over its last axis -- ran a row at a
 * time: LLVM's vector loop never entered, the row's 7 elements one dependent add after
 * another, at 22-27% of a copy's bandwidth on an Emerald Rapids host.  Where the operand's
 * last subscript is the only reduced axis, the one before it the stage's last kept axis (the
 * row) and the row shorter than a vector, W rows at a time go in the lanes of one vector
 * instead: element c of each is gathered (the hardware's gather, any strides), and the W sums
 * are independent lanes, each in the order of its row.  The last group's missing rows are
 * masked off.  x86 only, where the model has AVX2's gathers or AVX-512's; elsewhere, longer
 * rows, or strides an i32 index cannot reach, the stage's other loops run.  Not rows of a
 * vector or more, which run in vectors (below): a Zen 4 core's 16-lane gather took 22-26
 * cycles, and there rows of 16 to 31 ran 1.5-2.2x faster even in the loops (20000 rows, one
 * thread: 24 0.19-0.24 -> 0.11-0.13 ms, 31 0.25-0.37 -> 0.11-0.18), rows of 15 the same
 * either way; on Emerald Rapids rows of 16-31 were within the noise of the two. */

bool cpu_reduce_rows_plan(const HwModel *h, const Program *p, const Kernel *kn, int s, CpuShortPlan *sp) {
  if (strcmp(h->arch, "aarch64") == 0 || (!strstr(h->llvm_features, "+avx2") && !strstr(h->llvm_features, "+avx512f")))
    return false;
  const Stage *st = &kn->stages[s];
  const KExpr *l = plain_operand(p, kn, s);
  if (!l || st->expr->nraxes != 1) return false;
  int n = l->a[l->n - 1]->axis, v = l->a[l->n - 2]->axis;
  if (n != st->expr->raxes[0] || v != st->axes[st->naxes - 1]) return false;
  sp->slot = l->slot;
  sp->rank = l->n;
  sp->v = v;
  sp->r0 = n;
  return true;
}

/* Rows of a vector to ROWS_VMAX elements, dense along the row, go W at a time too, each
 * row summed in one vector of W partials (its whole vectors, and its last W elements with
 * the lanes already counted set to the reduction's start: no load past the row, no masked
 * load), then the W vectors folded together into one of the W rows' results, log2 W rounds
 * of two-vector shuffles that each halve the partials of every row.  In the loops, each
 * row's sum was blocked (cpu.c's SUM_BLOCK) and its partials folded alone: the sums of
 * f32[13312, 16]'s rows took 21 cycles a row on one thread of a Zen 4 guest (78 us, 6 times
 * its prediction), of f32[13312, 17] 13.  ROWS_VMAX is the block: a term meets at most
 * ROWS_VMAX / W others in its lane before the fold, as in the loops.  Summing order: each
 * lane in order along the row (the last W elements' new lanes last), then the fold's tree;
 * it depends on W, never on the threads. */
#define ROWS_VMAX 256
#define ROW_TAIL_CYC 2
/* Rows of FOLD_SHORT_MIN to W - 1 elements, where the target masks loads (AVX-512), take
 * the same way, each row one masked load from its start (rows_add_short), the other lanes
 * the reduction's start: a gather costs a cycle or more a lane, the masked load and the
 * fold's share a few a row.  Measured outside dyn (C with AVX-512 intrinsics, one thread of
 * Zen 5, sums of f32[100000, B], a row's vector folded alone): gathers 0.29-0.39 ns an
 * element, a masked load and a fold 1.2-1.5 ns a row whatever B: 238 -> 125 us at B = 7,
 * 588 -> 150 at 15, 158 -> 122 at 5, but 57 -> 117 at 2. */
#define FOLD_SHORT_MIN 5
int cpu_reduce_rows_least(const HwModel *h, int W) {
  return cpu_masks_lanes(h->llvm_features) && FOLD_SHORT_MIN < W ? FOLD_SHORT_MIN : W;
}
int cpu_reduce_rows_most(void) { return ROWS_VMAX; }

/* Iteration i: vector i of each of c rows, s_v apart from base, into the row's partials. */
typedef struct { LLVMValueRef base, s_v; int c; } RowCtx;
static void rows_step(const CpuRedGen *rg, const void *ctx, LLVMValueRef i, const LLVMValueRef *acc, LLVMValueRef *nxt) {
  const RowCtx *x = ctx;
  int W = rg->shape.lanes;
  LLVMValueRef at = LLVMBuildMul(rg->b, i, k64(rg, W), "");
  for (int j = 0; j < x->c; j++)
    nxt[j] = rg->op(rg->g, acc[j], ld(rg, LLVMVectorType(rg->ty, (unsigned)W), x->base,
                                     LLVMBuildAdd(rg->b, at, LLVMBuildMul(rg->b, k64(rg, j), x->s_v, ""), "")));
}

/* v[0..W) (W vectors of W lanes) folded into one whose lane l is v[l]'s lanes together: each
 * round pairs the vectors, each holding segments of s lanes (a row's partials), and halves
 * the segments, the first vector's then the second's. */
static LLVMValueRef rows_fold(const CpuRedGen *rg, LLVMValueRef *v, int W) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(rg->cx);
  int n = W;
  for (int s = W; s > 1; s /= 2, n /= 2) {
    LLVMValueRef lo[64], hi[64];
    int m = 0;
    for (int src = 0; src < 2; src++)
      for (int j = 0; j < W / s; j++)
        for (int t = 0; t < s / 2; t++, m++) {
          lo[m] = LLVMConstInt(i32, (unsigned)(src * W + j * s + t), 0);
          hi[m] = LLVMConstInt(i32, (unsigned)(src * W + j * s + s / 2 + t), 0);
        }
    for (int i = 0; i < n / 2; i++) {
      LLVMValueRef a = LLVMBuildShuffleVector(rg->b, v[2 * i], v[2 * i + 1], LLVMConstVector(lo, (unsigned)W), "");
      LLVMValueRef c = LLVMBuildShuffleVector(rg->b, v[2 * i], v[2 * i + 1], LLVMConstVector(hi, (unsigned)W), "");
      v[i] = rg->op(rg->g, a, c);
    }
  }
  return v[0];
}

/* The kept axes but the row, outer to inner, then groups of W rows [q0, q0 + cnt) of the
 * rows this task runs (shared with the gathers' path). */
typedef struct { LLVMValueRef q0, cnt; } RowGroup;
static RowGroup row_groups_open(const CpuRedGen *rg, const CpuShortPlan *sp) {
  LLVMBuilderRef b = rg->b;
  const Stage *st = rg->st;
  int W = rg->shape.lanes;
  for (int a = 0; a + 1 < st->naxes; a++) {
    bool par = st->axes[a] == rg->par_axis;
    rg->set_axis(rg->g, st->axes[a], rg->loop(rg->g, par ? rg->lo : k64(rg, 0), par ? rg->hi : rg->ext(rg->g, st->axes[a])));
  }
  bool par = sp->v == rg->par_axis;
  LLVMValueRef q_lo = par ? rg->lo : k64(rg, 0), q_hi = par ? rg->hi : rg->ext(rg->g, sp->v);
  LLVMValueRef groups = LLVMBuildSDiv(b, LLVMBuildAdd(b, LLVMBuildSub(b, q_hi, q_lo, ""), k64(rg, W - 1), ""), k64(rg, W), "");
  RowGroup q;
  q.q0 = LLVMBuildAdd(b, q_lo, LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 0), groups), k64(rg, W), ""), "");
  q.cnt = LLVMBuildSub(b, q_hi, q.q0, "");
  q.cnt = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, q.cnt, k64(rg, W), ""), q.cnt, k64(rg, W), "");
  return q;
}

/* The group's cnt results, lane l of acc to row q0 + l. */
static void row_results(const CpuRedGen *rg, const CpuShortPlan *sp, RowGroup q, LLVMValueRef acc) {
  LLVMValueRef l = rg->loop(rg->g, k64(rg, 0), q.cnt);
  rg->set_axis(rg->g, sp->v, LLVMBuildAdd(rg->b, q.q0, l, ""));
  rg->store(rg->g, LLVMBuildExtractElement(rg->b, acc, l, ""));
  rg->end(rg->g);
}

/* The loops of row_groups_open closed. */
static void row_groups_close(const CpuRedGen *rg) {
  rg->end(rg->g);
  for (int a = 0; a + 1 < rg->st->naxes; a++) rg->end(rg->g);
}

/* c rows of r >= W elements, s_v apart from base, each added into its vector of partials
 * (acc: c x W elements): its last W elements, the new lanes (mask), then its whole vectors
 * (nv), one chain a row, a vector of each row an iteration. */
static void rows_add(const CpuRedGen *rg, int c, LLVMValueRef acc, LLVMValueRef base, LLVMValueRef s_v, LLVMValueRef r,
                     LLVMValueRef nv, LLVMValueRef mask, LLVMValueRef init) {
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef last = LLVMBuildSub(b, r, k64(rg, W), "");
  for (int i = 0; i < c; i++) {
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, k64(rg, i), s_v, ""), last, ""), at = k64(rg, (int64_t)i * W);
    st_at(rg, rg->op(rg->g, ld(rg, vt, acc, at), LLVMBuildSelect(b, mask, ld(rg, vt, base, off), init, "")), acc, at);
  }
  RowCtx x = {base, s_v, c};
  acc_loop(rg, c, acc, nv, rows_step, &x);
}

/* c rows of r < W elements, s_v apart from base, each into its vector of partials: one load
 * of its r lanes (mask), the others the reduction's start (init), never a lane past the row. */
static void rows_add_short(const CpuRedGen *rg, int c, LLVMValueRef acc, LLVMValueRef base, LLVMValueRef s_v,
                           LLVMValueRef mask, LLVMValueRef init) {
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W), pt = LLVMPointerTypeInContext(rg->cx, 0), ft;
  LLVMTypeRef ov[2] = {vt, pt};
  unsigned id = LLVMLookupIntrinsicID("llvm.masked.load", 16);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(LLVMGetGlobalParent(rg->fn), id, ov, 2);
  ft = LLVMIntrinsicGetType(rg->cx, id, ov, 2);
  for (int i = 0; i < c; i++) {
    LLVMValueRef off = LLVMBuildMul(b, k64(rg, i), s_v, ""), at = k64(rg, (int64_t)i * W);
    LLVMValueRef args[4] = {LLVMBuildGEP2(b, rg->ty, base, &off, 1, ""),
                            LLVMConstInt(LLVMInt32TypeInContext(rg->cx), (unsigned)elem_size(rg->st->expr->ty), 0), mask, init};
    st_at(rg, rg->op(rg->g, ld(rg, vt, acc, at), LLVMBuildCall2(b, ft, fn, args, 4, "")), acc, at);
  }
}

/* Rows of r >= W elements (short: of fewer, on a target that masks loads), dense along the
 * row, s_v apart: W at a time in vectors. */
static void rows_vectors(const CpuRedGen *rg, const CpuShortPlan *sp, LLVMValueRef r, LLVMValueRef s_v, bool short_rows) {
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef nv = NULL, t, tailmask;
  if (short_rows) tailmask = lanes_below(rg, r);   /* the row's r lanes from its start */
  else tailmask = tail_lanes(rg, r, &nv, &t);
  LLVMValueRef init = splat(rg, rg->init(rg->g), vt);
  LLVMValueRef part = rg->slot(rg->g, LLVMArrayType(rg->ty, (unsigned)(W * W)));
  LLVMValueRef mine = rg->slot(rg->g, LLVMArrayType(rg->ty, (unsigned)(W * W)));
  RowGroup q = row_groups_open(rg, sp);
  rg->set_axis(rg->g, sp->v, q.q0);
  rg->set_axis(rg->g, sp->r0, k64(rg, 0));
  LLVMValueRef base = rg->addr(rg->g);
  LLVMBasicBlockRef whole = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "rows.whole");
  LLVMBasicBlockRef cut = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "rows.cut");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "rows.next");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, q.cnt, k64(rg, W), ""), whole, cut);
  /* a whole group: the rows' partials in registers, one chain a row, a vector of each row
   * an iteration; the W results stored as one vector (the result is dense along the rows) */
  LLVMPositionBuilderAtEnd(b, whole);
  LLVMValueRef v[64];
  for (int i = 0; i < W; i++) st_at(rg, init, mine, k64(rg, (int64_t)i * W));
  if (short_rows) rows_add_short(rg, W, mine, base, s_v, tailmask, init);
  else rows_add(rg, W, mine, base, s_v, r, nv, tailmask, init);
  for (int i = 0; i < W; i++) v[i] = ld(rg, vt, mine, k64(rg, (int64_t)i * W));
  LLVMValueRef st = LLVMBuildStore(b, rows_fold(rg, v, W), rg->out_ptr(rg->g));
  LLVMSetAlignment(st, (unsigned)elem_size(rg->st->expr->ty));
  LLVMBuildBr(b, next);
  /* the last group, cut short: its missing rows at the start */
  LLVMPositionBuilderAtEnd(b, cut);
  LLVMValueRef l = rg->loop(rg->g, q.cnt, k64(rg, W));
  st_at(rg, init, part, LLVMBuildMul(b, l, k64(rg, W), ""));
  rg->end(rg->g);
  l = rg->loop(rg->g, k64(rg, 0), q.cnt);
  LLVMValueRef off = LLVMBuildMul(b, l, s_v, "");
  LLVMValueRef at = LLVMBuildGEP2(b, rg->ty, part, (LLVMValueRef[]){LLVMBuildMul(b, l, k64(rg, W), "")}, 1, "");
  st_at(rg, init, at, k64(rg, 0));
  if (short_rows) rows_add_short(rg, 1, at, LLVMBuildGEP2(b, rg->ty, base, &off, 1, ""), k64(rg, 0), tailmask, init);
  else rows_add(rg, 1, at, LLVMBuildGEP2(b, rg->ty, base, &off, 1, ""), k64(rg, 0), r, nv, tailmask, init);
  rg->end(rg->g);
  for (int i = 0; i < W; i++) v[i] = ld(rg, vt, part, k64(rg, (int64_t)i * W));
  row_results(rg, sp, q, rows_fold(rg, v, W));
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  row_groups_close(rg);
}

void cpu_reduce_rows_gen(const CpuRedGen *rg, const CpuShortPlan *sp) {
  LLVMBuilderRef b = rg->b;
  const Stage *st = rg->st;
  int W = rg->shape.lanes;
  LLVMContextRef cx = rg->cx;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(cx);
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W), vi = LLVMVectorType(i32, (unsigned)W);
  LLVMTypeRef pt = LLVMPointerTypeInContext(cx, 0), vp = LLVMVectorType(pt, (unsigned)W);
  LLVMValueRef r = rg->ext(rg->g, sp->r0);
  LLVMValueRef s_n = rg->stride(rg->g, sp->slot, sp->rank - 1, sp->rank);
  LLVMValueRef s_v = rg->stride(rg->g, sp->slot, sp->rank - 2, sp->rank);
  /* short rows, and every index |l s_v + c s_n| < 2^31 */
  LLVMValueRef an = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, s_n, k64(rg, 0), ""), LLVMBuildNeg(b, s_n, ""), s_n, "");
  LLVMValueRef av = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, s_v, k64(rg, 0), ""), LLVMBuildNeg(b, s_v, ""), s_v, "");
  LLVMValueRef lim = k64(rg, ((int64_t)1 << 31) / (3 * W));
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntSLT, r, k64(rg, W), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLT, an, lim, ""), "");
  ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLT, av, lim, ""), "");
  LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows");
  LLVMBasicBlockRef longer = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows.longer");
  LLVMBasicBlockRef vec = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows.vectors");
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows.apart");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows.reduced");
  if (rg->masked_loads) {              /* rows of FOLD_SHORT_MIN or more: a masked load a row */
    LLVMBasicBlockRef folded = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows.folded");
    LLVMBasicBlockRef other = LLVMAppendBasicBlockInContext(cx, rg->fn, "rows.gathered");
    LLVMValueRef okf = LLVMBuildICmp(b, LLVMIntSLT, r, k64(rg, W), "");
    okf = LLVMBuildAnd(b, okf, LLVMBuildICmp(b, LLVMIntSGE, r, k64(rg, FOLD_SHORT_MIN), ""), "");
    okf = LLVMBuildAnd(b, okf, LLVMBuildICmp(b, LLVMIntEQ, s_n, k64(rg, 1), ""), "");
    LLVMBuildCondBr(b, okf, folded, other);
    LLVMPositionBuilderAtEnd(b, folded);
    rows_vectors(rg, sp, r, s_v, true);
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, other);
  }
  LLVMBuildCondBr(b, ok, fast, longer);
  LLVMPositionBuilderAtEnd(b, longer);
  LLVMValueRef ok2 = LLVMBuildICmp(b, LLVMIntSGE, r, k64(rg, W), "");
  ok2 = LLVMBuildAnd(b, ok2, LLVMBuildICmp(b, LLVMIntSLE, r, k64(rg, ROWS_VMAX), ""), "");
  ok2 = LLVMBuildAnd(b, ok2, LLVMBuildICmp(b, LLVMIntEQ, s_n, k64(rg, 1), ""), "");
  LLVMBuildCondBr(b, ok2, vec, slow);
  LLVMPositionBuilderAtEnd(b, slow);
  rg->plain(rg->g);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, vec);
  rows_vectors(rg, sp, r, s_v, false);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, fast);
  LLVMValueRef buf = rg->slot(rg->g, vt);
  LLVMTypeRef ot[2] = {vt, vp};
  LLVMValueRef gather = LLVMGetIntrinsicDeclaration(LLVMGetGlobalParent(rg->fn),
                                                    LLVMLookupIntrinsicID("llvm.masked.gather", 18), ot, 2);
  LLVMTypeRef gty = LLVMIntrinsicGetType(cx, LLVMLookupIntrinsicID("llvm.masked.gather", 18), ot, 2);
  LLVMValueRef lanes = lane_numbers(rg);
  LLVMValueRef step_v = LLVMBuildMul(b, lanes, splat(rg, LLVMBuildTrunc(b, s_v, i32, ""), vi), "");
  LLVMValueRef sn32 = LLVMBuildTrunc(b, s_n, i32, "");
  LLVMValueRef init = splat(rg, rg->init(rg->g), vt);
  /* the kept axes but the row, outer to inner; then groups of W rows */
  RowGroup q = row_groups_open(rg, sp);
  LLVMValueRef q0 = q.q0, cnt = q.cnt;
  LLVMValueRef mask = lanes_below(rg, cnt);
  rg->set_axis(rg->g, sp->v, q0);
  rg->set_axis(rg->g, sp->r0, k64(rg, 0));
  LLVMValueRef base = rg->addr(rg->g);
  LLVMBuildStore(b, init, buf);
  LLVMValueRef c = rg->loop(rg->g, k64(rg, 0), r);
  LLVMValueRef idx = LLVMBuildAdd(b, step_v, splat(rg, LLVMBuildMul(b, LLVMBuildTrunc(b, c, i32, ""), sn32, ""), vi), "");
  LLVMValueRef ptrs = LLVMBuildGEP2(b, rg->ty, base, &idx, 1, "");
  LLVMValueRef args[4] = {ptrs, LLVMConstInt(i32, (unsigned)elem_size(st->expr->ty), 0), mask, init};
  LLVMValueRef x = LLVMBuildCall2(b, gty, gather, args, 4, "");
  LLVMBuildStore(b, rg->op(rg->g, LLVMBuildLoad2(b, vt, buf, ""), x), buf);
  rg->end(rg->g);
  row_results(rg, sp, q, LLVMBuildLoad2(b, vt, buf, ""));
  row_groups_close(rg);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, join);
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

/* Does a folded plan take W results at a time (folded_gen) at an innermost run of k? */
#define FOLD_VMAX 4
static bool fold_fits(int64_t k, int W) { return k >= W && k < (int64_t)FOLD_VMAX * W; }
int cpu_reduce_fold_most(int W) { return FOLD_VMAX * W - 1; }

/* The L1's cycles for n vector loads of W elements of eb bytes from each of rows `row`
 * elements apart (taken as dense): where the rows are not whole lines apart, a vector load
 * crosses a line at most of the offsets they take (a vector of V bytes at V - g of a line's
 * L, g the largest power of two dividing the row's bytes, at most L), and the L1 serves it
 * as two; the L1 moves its bytes a cycle (the model's rate at its clock; a vector a cycle
 * where it has none).  Column sums of f32[2000, C] on one thread of a Zen 4 guest (an L1 of
 * 64 B a cycle), each row's C / 16 + 1 vectors kept in registers: C = 33, 47, 49 and 65,
 * rows off the lines, 7.0, 8.7, 9.2 and 11.9 cycles a row against 5.8, 5.8, 7.8 and 9.7
 * here; 48 and 64, on them, 7.0 and 9.8 (there the L2 binds: 6.4 and 8.5). */
static double l1_load_cycles(const HwModel *h, int64_t eb, int64_t W, int64_t row, double n) {
  int64_t L = sched_line_bytes(h);
  int64_t V = W * eb, g = (row * eb) & -(row * eb);
  if (g > L || g <= 0) g = L;
  double cross = V > g ? fmin(1, (double)(V - g) / (double)L) : 0;
  double bpc = h->nlevels > 1 && h->level[0].gbs > 0 && h->ghz > 0 ? h->level[0].gbs / h->ghz : (double)V;
  return n * (1 + cross) * (double)V / bpc;
}

/* A short plan's kept indices (the stage's axes but the run) and each one's blocks (the
 * reduced axes but r0). */
static double short_kept(const Stage *st, const int64_t *ext) {
  double kept = 1;
  for (int i = 0; i + 1 < st->naxes; i++) kept *= (double)ext[st->axes[i]];
  return kept;
}
static double short_blocks(const Stage *st, const CpuShortPlan *sp, const int64_t *ext) {
  double blocks = 1;
  for (int i = 0; i < st->expr->nraxes; i++)
    if (st->expr->raxes[i] != sp->r0) blocks *= (double)ext[st->expr->raxes[i]];
  return blocks;
}

/* Short kept runs (cpu_reduce_short_gen), their cycles beyond a lane-operation an element at
 * the vector rate, which their whole vectors run at: each block's last elements short of
 * C W, a vector or an element a cycle, and its loop's entry (RUN_CYC); each kept index's
 * fold is cpu_reduce_fold_s's.  -1 where the run takes the other loops (strides are taken
 * as dense: a tensor read in place otherwise is priced as dense). */
static double short_cycles(const HwModel *h, const Stage *st, const CpuShortPlan *sp, const int64_t *ext) {
  CpuShortShape sh = cpu_reduce_short_shape(h, st->expr->ty);
  int64_t r = ext[sp->v], R = ext[sp->r0];
  int c = cpu_reduce_short_accs(sh, r), kv = cpu_reduce_kept_vectors(sh, r);
  double kept = short_kept(st, ext), blocks = short_blocks(st, sp, ext);
  if (c < 1 && kv > 0) {
    /* kept in registers: each row's kv vector loads (l1_load_cycles) and adds, at least
     * the adds' latency a row (each vector's chain takes one add a row); the stores of the
     * run */
    double row = fmax(l1_load_cycles(h, elem_size(st->expr->ty), sh.lanes, r, kv),
                      (double)(h->fma_latency > 0 ? h->fma_latency : 4));
    return kept * (blocks * (double)R * row + (double)(r + RUN_CYC));
  }
  if (c < 1) return -1;
  int64_t W = sh.lanes;
  int64_t rest = R * r % ((int64_t)c * W);
  double block = (double)(rest / W + rest % W + RUN_CYC);
  return kept * blocks * block;
}

/* The fold after each kept index's blocks of a short plan (cpu_reduce_short_gen): its C + 1
 * vectors of places set to the start, the sets into the first (C / A - 1 steps), the rows of
 * the first set into its first row (rows - 1 steps of one vector, each waiting for the last:
 * the adds' latency), the r results stored and the loop's entry, and the rows' first load
 * waiting for the stores of the places it reads across, which no store forwards
 * (STORE_WAIT_CYC: 10-20 cycles on Intel and AMD cores, Agner Fog's microarchitecture
 * manual).  The loads stop meanwhile, so it adds to the stream's time instead of hiding
 * under it, as the row-wise kernels' folds do (cpu_row_folds_s): 1024 blocks of f32[*, 63,
 * 5] summed over the middle axis took 55.7 us on one thread of a Zen 4 guest, 32.2
 * predicted with the fold hidden.  Seconds on the busiest of the threads, 0 for other plans. */
#define STORE_WAIT_CYC 16
double cpu_reduce_fold_s(const HwModel *h, const Program *p, const Kernel *kn, const int64_t *ext, const SchedTerms *T) {
  if (kn->nouter || kn->nstages != 1 || kn->stages[0].expr->kind != KX_REDUCE || h->ghz <= 0) return 0;
  const Stage *st = &kn->stages[0];
  CpuShortPlan sp;
  if (!cpu_reduce_short_plan(p, kn, 0, &sp)) return 0;
  CpuShortShape sh = cpu_reduce_short_shape(h, st->expr->ty);
  int64_t r = ext[sp.v], W = sh.lanes;
  int c = cpu_reduce_short_accs(sh, r);
  if (c < 1 || r < 1) return 0;
  int64_t a = pattern_of(sh, r), rows = a * W / r;
  double kept = short_kept(st, ext), lat = h->fma_latency > 0 ? h->fma_latency : 4;
  double fold = (double)(c + 1) + (double)(c / a - 1) * lat + (double)(rows - 1) * lat + (double)r + RUN_CYC + STORE_WAIT_CYC;
  int t = T->threads > 0 ? T->threads : 1;
  return kept * fold / (h->ghz * 1e9 * t) * T->imbalance;
}

double cpu_reduce_run_ops(const HwModel *h, const Program *p, const Kernel *kn, int par_axis, const int64_t *ext) {
  if (kn->nouter || kn->nstages != 1 || kn->stages[0].expr->kind != KX_REDUCE || h->ghz <= 0) return 0;
  const Stage *st = &kn->stages[0];
  const KExpr *e = st->expr;
  CpuShortPlan sp;
  double sc = cpu_reduce_short_plan(p, kn, 0, &sp) ? short_cycles(h, st, &sp, ext) : -1;
  if (sc >= 0) return sc * sched_lane_ops_rate(h, 1, elem_size(e->ty)) / (h->ghz * 1e9);
  int W = cpu_tile_lanes(h->vector_bits, e->ty), least = cpu_reduce_rows_least(h, W);
  if (cpu_reduce_rows_plan(h, p, kn, 0, &sp) && ext[sp.r0] < least) {
    /* short rows, W at a time: a gather a column of the group, the model's cycles a lane
     * (gather_lane_cycles, else one: an Emerald Rapids core took 12-21 cycles for the 16
     * lanes of f32, a Zen 4 core 22-26), then the W results stored */
    double groups = (double)((ext[sp.v] + W - 1) / W), g = h->gather_lane_cycles > 0 ? h->gather_lane_cycles : 1;
    for (int i = 0; i + 1 < st->naxes; i++) groups *= (double)ext[st->axes[i]];
    double cyc = groups * ((double)ext[sp.r0] * W * g + W + RUN_CYC);
    return cyc * sched_lane_ops_rate(h, 1, elem_size(e->ty)) / (h->ghz * 1e9);
  }
  if (cpu_reduce_rows_plan(h, p, kn, 0, &sp) && ext[sp.r0] >= least && ext[sp.r0] <= ROWS_VMAX) {
    /* rows of a vector or more (or of least, by masked loads), W at a time (rows_vectors):
     * each row's last W elements (a load, often across a line, a select and an operation:
     * ROW_TAIL_CYC; a short row's one masked load and operation, a cycle), and each group's
     * loop entry and fold, W - 1 steps of two shuffles and an operation (about two cycles
     * each); the whole vectors at the vector rate (the lane-ops).  13312 rows of 16, 17,
     * 24 and 33 f32 on one thread of a Zen 4 guest: 4.3-7.0 cycles a row measured, 4.6-5.2
     * here; 50000 rows of 5 to 15, 2.8-3.4 measured, 4.1 at ROW_TAIL_CYC, 3.1 now. */
    double rows = 1, tail = ext[sp.r0] < W ? 1 : ROW_TAIL_CYC;
    for (int i = 0; i < st->naxes; i++) rows *= (double)ext[st->axes[i]];
    double cyc = rows * tail + rows / W * (RUN_CYC + 2 * (W - 1));
    return cyc * sched_lane_ops_rate(h, 1, elem_size(e->ty)) / (h->ghz * 1e9);
  }
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
    double outer = 1, kin = 1;
    for (int o = 0; o < g; o++)
      for (int i = 0; i < pl.glen[o]; i++) {
        double x = (double)ext[pl.ax[pl.gfirst[o] + i]];
        if (pl.gred[o]) outer *= x;
        else if (o == g - 1) kin *= x;
      }
    if (pl.folded && total > 0 && kin >= W && fold_fits((int64_t)k, W)) {
      /* W results at a time (folded_gen): each run's last W elements (ROW_TAIL_CYC), and
       * each group's fold and W stores; or where more, beside which the fold's shuffles
       * run, the group's loads in the L1 (runs k apart, each its k / W whole vectors, which
       * the lane-ops count at the vector rate, and its last W elements: l1_load_cycles);
       * and its loop's entry a step of the outer runs.  Y[b, c] = sum[a, d] X[a, b, c, d]
       * on one thread of a Zen 4 guest: f32[13, 64, 64, 17] 4.8 cycles a run, 2.4
       * predicted at ROW_TAIL_CYC; [1, 256, 256, 17] 5.2 with the fold, 5.1 */
      int eb = elem_size(e->ty);
      double whole = floor(k / W), vec = sched_lane_ops_rate(h, 1, eb) / (h->ghz * 1e9) / W;
      double loads = l1_load_cycles(h, eb, W, (int64_t)k, whole + 1) - whole / vec;
      double runs = total / k, groups = runs / outer / W, each = outer * W;
      double cyc = groups * (fmax(each * loads, each * ROW_TAIL_CYC + 2 * (W - 1) + W) + outer * RUN_CYC);
      return cyc * sched_lane_ops_rate(h, 1, elem_size(e->ty)) / (h->ghz * 1e9);
    }
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

/* ---- a folded plan: W results at a time ----
 * A reduced innermost run sums into a scalar, which LLVM spreads over vector partial sums
 * and folds across each time the run ends; where another reduced run lies outside it, that
 * is once for every step of the outer run and every result: the sums over the first and
 * last axes of f32[13, 64, 64, 17] folded 53,248 runs of 17 into 4,096 results, 15 cycles a
 * run (0.215 ms on one thread of a Zen 4 guest, 3.3 times its prediction).  A folded plan
 * takes the innermost kept run's results W at a time instead, as rows_vectors takes rows:
 * each result's partials in a vector of registers over all its reduced runs (the innermost
 * run's whole vectors and its last W elements, the lanes already counted masked), the W
 * vectors folded together once at the end: 0.215 -> 0.054-0.061 ms there.  Only runs
 * shorter than FOLD_VMAX vectors (fold_fits): LLVM's loop takes that many vectors a step,
 * so a longer run folds once in several steps anyway, and the group's W runs, read for each
 * step of the outer runs, are W x 13 pieces of memory in turn where the plan's loops read
 * it in order (runs of 128 there: 0.55 -> 1.7 ms; of 64: 0.18 -> 0.22).  A task's last
 * group is shifted back to end at the task's last result, recomputing a few of the group
 * before (each result's sum depends on nothing else, so the same values are stored again).
 * Taken at run time where the innermost run fits, is dense, and the task's share of the
 * kept run is at least W results; else the plan's loops.  Summing order: each lane in order
 * of the reduced runs, then the fold's tree; it depends on W, never on the threads. */

/* The range of run g's loop ([lo, hi): the task's share where it is the parallel run). */
static void run_range(const CpuRedGen *rg, int g, LLVMValueRef *lo, LLVMValueRef *hi) {
  if (g == rg->pl->par_group) {
    LLVMValueRef m = run_extent(rg, g, true);
    *lo = LLVMBuildMul(rg->b, rg->lo, m, "");
    *hi = LLVMBuildMul(rg->b, rg->hi, m, "");
  } else {
    *lo = k64(rg, 0);
    *hi = run_extent(rg, g, false);
  }
}

/* Run g's axes at index i of its loop: the index to the last, 0 to the rest. */
static void run_at(const CpuRedGen *rg, int g, LLVMValueRef i) {
  const CpuRedPlan *pl = rg->pl;
  int f = pl->gfirst[g], n = pl->glen[g];
  for (int k = 0; k + 1 < n; k++) rg->set_axis(rg->g, pl->ax[f + k], k64(rg, 0));
  rg->set_axis(rg->g, pl->ax[f + n - 1], i);
}

/* The operand's stride along run g's last axis. */
static LLVMValueRef run_stride(const CpuRedGen *rg, int g) {
  const KExpr *l = rg->st->expr->a[0];
  return rg->stride(rg->g, l->slot, rg->pl->gfirst[g] + rg->pl->glen[g] - 1, l->n);
}

static void folded_gen(const CpuRedGen *rg) {
  const CpuRedPlan *pl = rg->pl;
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes, last = pl->ng - 1, kin = last - 1;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(rg->cx), vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef k = run_extent(rg, last, false), s_v = run_stride(rg, kin);
  LLVMValueRef nv, t, tailmask = tail_lanes(rg, k, &nv, &t);
  LLVMValueRef init = splat(rg, rg->init(rg->g), vt);
  LLVMValueRef mine = rg->slot(rg->g, LLVMArrayType(rg->ty, (unsigned)(W * W)));
  for (int g = 0; g < kin; g++)
    if (!pl->gred[g]) open_run(rg, g);
  LLVMValueRef klo, khi;
  run_range(rg, kin, &klo, &khi);
  LLVMValueRef groups = LLVMBuildSDiv(b, LLVMBuildAdd(b, LLVMBuildSub(b, khi, klo, ""), k64(rg, W - 1), ""), k64(rg, W), "");
  LLVMValueRef q0 = LLVMBuildAdd(b, klo, LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 0), groups), k64(rg, W), ""), "");
  LLVMValueRef back = LLVMBuildSub(b, khi, k64(rg, W), "");
  q0 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, q0, back, ""), back, q0, "");
  for (int i = 0; i < W; i++) st_at(rg, init, mine, k64(rg, (int64_t)i * W));
  for (int g = 0; g < last; g++)
    if (pl->gred[g]) open_run(rg, g);
  run_at(rg, kin, q0);
  run_at(rg, last, k64(rg, 0));
  rows_add(rg, W, mine, rg->addr(rg->g), s_v, k, nv, tailmask, init);
  for (int g = last - 1; g >= 0; g--)
    if (pl->gred[g]) rg->end(rg->g);
  LLVMValueRef v[64];
  for (int i = 0; i < W; i++) v[i] = ld(rg, vt, mine, k64(rg, (int64_t)i * W));
  LLVMValueRef acc = rows_fold(rg, v, W);
  for (int i = 0; i < W; i++) {
    run_at(rg, kin, LLVMBuildAdd(b, q0, k64(rg, i), ""));
    rg->store(rg->g, LLVMBuildExtractElement(b, acc, LLVMConstInt(i32, (unsigned)i, 0), ""));
  }
  rg->end(rg->g);
  for (int g = kin - 1; g >= 0; g--)
    if (!pl->gred[g]) rg->end(rg->g);
}

/* ---- column sums of few rows ----
 * A plan of a reduced run then a kept one (column sums, Y[c] = sum[r] X[r, c], over any
 * leading axes) sets the result to the start, then adds each row into it: a load, an add
 * and a store of the result for every element, the store the bottleneck; the column sums
 * of f32[7, 100000] ran at 2.2 times their prediction (2 threads of a Zen 4 guest, 37 us
 * against 17).  With few rows (COL_ROWS at most), the kept run goes in chunks of COL_VECS
 * vectors instead, each chunk's columns summed in registers over all the rows (as the kept
 * runs in registers do for a short run) and stored once; a task's last chunk shifted back
 * over the one before (its columns summed again in the same order, the same values
 * stored).  More rows would be as many streams read a chunk at a time, where the plan's
 * loops read the rows in order.  Summing order: each column in order of the rows, as in
 * the loops. */
#define COL_ROWS 32
#define COL_VECS 8
int cpu_reduce_col_rows(void) { return COL_ROWS; }
int cpu_reduce_col_vecs(void) { return COL_VECS; }

typedef struct { LLVMValueRef base, s_r; } ColCtx;
static void cols_step(const CpuRedGen *rg, const void *ctx, LLVMValueRef i, const LLVMValueRef *acc, LLVMValueRef *nxt) {
  const ColCtx *x = ctx;
  int W = rg->shape.lanes;
  LLVMValueRef row = LLVMBuildMul(rg->b, i, x->s_r, "");
  for (int j = 0; j < COL_VECS; j++)
    nxt[j] = rg->op(rg->g, acc[j], ld(rg, LLVMVectorType(rg->ty, (unsigned)W), x->base,
                                     LLVMBuildAdd(rg->b, row, k64(rg, (int64_t)j * W), "")));
}

static void columns_gen(const CpuRedGen *rg) {
  LLVMBuilderRef b = rg->b;
  int W = rg->shape.lanes, CH = COL_VECS * W;
  LLVMTypeRef vt = LLVMVectorType(rg->ty, (unsigned)W);
  LLVMValueRef klo, khi, R = run_extent(rg, 0, false), s_r = run_stride(rg, 0);
  run_range(rg, 1, &klo, &khi);
  LLVMValueRef acc = rg->slot(rg->g, LLVMArrayType(rg->ty, (unsigned)CH)), init = splat(rg, rg->init(rg->g), vt);
  LLVMValueRef chunks = LLVMBuildSDiv(b, LLVMBuildAdd(b, LLVMBuildSub(b, khi, klo, ""), k64(rg, CH - 1), ""), k64(rg, CH), "");
  LLVMValueRef q0 = LLVMBuildAdd(b, klo, LLVMBuildMul(b, rg->loop(rg->g, k64(rg, 0), chunks), k64(rg, CH), ""), "");
  LLVMValueRef back = LLVMBuildSub(b, khi, k64(rg, CH), "");
  q0 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, q0, back, ""), back, q0, "");
  run_at(rg, 1, q0);
  run_at(rg, 0, k64(rg, 0));
  for (int j = 0; j < COL_VECS; j++) st_at(rg, init, acc, k64(rg, (int64_t)j * W));
  ColCtx x = {rg->addr(rg->g), s_r};
  acc_loop(rg, COL_VECS, acc, R, cols_step, &x);
  LLVMValueRef out = rg->out_ptr(rg->g);
  for (int j = 0; j < COL_VECS; j++) st_at(rg, ld(rg, vt, acc, k64(rg, (int64_t)j * W)), out, k64(rg, (int64_t)j * W));
  rg->end(rg->g);
}

/* The operand dense along its last axis, and the task's share of kept run g at least n. */
static LLVMValueRef dense_share(const CpuRedGen *rg, int g, int64_t n) {
  const KExpr *l = rg->st->expr->a[0];
  LLVMValueRef lo, hi;
  run_range(rg, g, &lo, &hi);
  LLVMValueRef ok = LLVMBuildICmp(rg->b, LLVMIntEQ, rg->stride(rg->g, l->slot, l->n - 1, l->n), k64(rg, 1), "");
  return LLVMBuildAnd(rg->b, ok, LLVMBuildICmp(rg->b, LLVMIntSGE, LLVMBuildSub(rg->b, hi, lo, ""), k64(rg, n), ""), "");
}

/* Where ok, gen's nest and on to join; the builder then where it is not. */
static void take_if(const CpuRedGen *rg, LLVMValueRef ok, void (*gen)(const CpuRedGen *), LLVMBasicBlockRef join) {
  LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "taken");
  LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(rg->cx, rg->fn, "not.taken");
  LLVMBuildCondBr(rg->b, ok, yes, no);
  LLVMPositionBuilderAtEnd(rg->b, yes);
  gen(rg);
  LLVMBuildBr(rg->b, join);
  LLVMPositionBuilderAtEnd(rg->b, no);
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
  if (pl->columns) {   /* few rows */
    LLVMValueRef ok = LLVMBuildICmp(rg->b, LLVMIntSLE, run_extent(rg, 0, false), k64(rg, COL_ROWS), "");
    take_if(rg, LLVMBuildAnd(rg->b, ok, dense_share(rg, 1, (int64_t)COL_VECS * rg->shape.lanes), ""), columns_gen, join);
  }
  if (pl->folded) {    /* fold_fits at the innermost run's extent */
    LLVMValueRef k = run_extent(rg, pl->ng - 1, false);
    LLVMValueRef ok = LLVMBuildICmp(rg->b, LLVMIntSGE, k, k64(rg, rg->shape.lanes), "");
    ok = LLVMBuildAnd(rg->b, ok, LLVMBuildICmp(rg->b, LLVMIntSLT, k, k64(rg, (int64_t)FOLD_VMAX * rg->shape.lanes), ""), "");
    take_if(rg, LLVMBuildAnd(rg->b, ok, dense_share(rg, pl->ng - 2, rg->shape.lanes), ""), folded_gen, join);
  }
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
