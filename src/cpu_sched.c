/* cpu_sched.c -- the compiled CPU back end's schedule as :sched and :time show it: for each
 * kernel of a program what cpu.c made of it (a contraction on the GEMM engine and that
 * engine's plan, a convolution's gather, row-wise stages, vectorised and interchanged loops,
 * the tasks, streaming stores) and, given sizes, the time the model predicts (gemm_model.c
 * for contractions, sched.c's streaming model for the rest). */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"

#include <math.h>
#include <string.h>

/* ---- the schedule, for :sched and :time ---- */

static void axes_text(const Program *p, const int *ax, int n, Buf *out) {
  for (int i = 0; i < n; i++) buf_printf(out, "%s%s", i ? ", " : "", p->axes[ax[i]].name);
}

/* The GEMM engine's own description (lines of text, consumed), each line after pad. */
static void put_indented(Buf *out, char *text, const char *pad) {
  for (char *line = text, *nl; line && *line; line = nl) {
    nl = strchr(line, '\n');
    if (nl) *nl++ = 0;
    buf_printf(out, "%s%s\n", pad, line);
  }
}

/* The fixed cost of a call of compiled code through the session, beside its kernels:
 * binding the sizes, checking the facts, finding the plans chosen for the shape, allocating
 * the results.  0.15-0.2 us in make bench on Zen 5 (2 x 2 x 2 and 13 x 11 x 17 matmul:
 * 0.2 us a call, their kernels 0.01-0.1); without it the model called those calls 50-90%
 * shorter than they are.  A software cost, about a constant count of cycles. */
#define CALL_S 0.15e-6

/* And each kernel's own start beside its work: cpu_run's dispatch (the checks of its plans,
 * its tasks' split and locals, the call into its code).  :time --kernels on 2 threads of
 * Zen 5: matmul 2 x 2 0.08 us a kernel and transpose 1 x 768 0.11, 0.01 predicted without;
 * make bench's 1 x 768 transpose, layernorm and softmax ran 0.08-0.1 us over their
 * predictions.  Part of what the clock reads there is its own reading. */
#define KERNEL_S 0.07e-6

/* Both are software's, a count of cycles and of cache misses that a slower core or a
 * virtual machine's scheduling stretches: where dyn --calibrate timed a call of one kernel
 * that does next to nothing (call_us), the two are scaled to it.  2 threads of an Emerald
 * Rapids guest: 0.3-0.7 us a call of transpose(f32[1, 16]) over a session's minutes, where
 * the constants say 0.22; make bench's 1 x 768 transpose, softmax and layernorm ran 0.7-1.3
 * us, predicted 0.2-0.7 (-44% to -70%). */
static double call_scale(const HwModel *h) {
  return h && h->call_us > 0 ? h->call_us * 1e-6 / (CALL_S + KERNEL_S) : 1;
}

double cpu_call_s(const HwModel *h) { return (CALL_S + KERNEL_S) * call_scale(h); }

/* What a row of a row-wise kernel touches: each slot once, with the bytes of it the row
 * covers (its element's size times the extents of the axes its access varies along inside
 * the row; a slot read at several spans counts its largest). */
#define ROW_TOUCH_MAX 32
typedef struct RowTouch {
  int n, slot[ROW_TOUCH_MAX];
  double bytes[ROW_TOUCH_MAX];
  bool by_row[ROW_TOUCH_MAX];        /* some access varies from row to row */
} RowTouch;

static void touch_add(RowTouch *t, int slot, double bytes, bool by_row) {
  for (int i = 0; i < t->n; i++)
    if (t->slot[i] == slot) {
      if (bytes > t->bytes[i]) t->bytes[i] = bytes;
      t->by_row[i] |= by_row;
      return;
    }
  if (t->n < ROW_TOUCH_MAX) t->slot[t->n] = slot, t->bytes[t->n] = bytes, t->by_row[t->n++] = by_row;
}

static double row_span(uint64_t mask, uint64_t outer, const int64_t *ext, int naxes, DynElem ty) {
  double b = elem_size(ty);
  for (int a = 0; a < naxes; a++)
    if ((mask >> a & 1) && !(outer >> a & 1)) b *= (double)ext[a];
  return b;
}

static void row_loads(const KExpr *e, uint64_t outer, const int64_t *ext, int naxes, RowTouch *t) {
  if (e->kind == KX_LOAD) touch_add(t, e->slot, row_span(e->axmask, outer, ext, naxes, e->ty), (e->axmask & outer) != 0);
  for (int i = 0; i < e->n; i++) row_loads(e->a[i], outer, ext, naxes, t);
}

static double touch_bytes(const RowTouch *t) {
  double b = 0;
  for (int i = 0; i < t->n; i++) b += t->bytes[i];
  return b;
}

static int touch_find(const RowTouch *t, int slot) {
  for (int i = 0; i < t->n; i++)
    if (t->slot[i] == slot) return i;
  return -1;
}

/* The share of a stage's pass over a row whose reads miss a cache of `cap` bytes, where the
 * reuse distance of what it reads grows along the pass from d0 to d1 (LRU: a read misses
 * when more than the cache was touched since the read before it). */
static double miss_share(double d0, double d1, double cap) {
  if (d0 <= cap && d1 <= cap) return 0;
  if (d0 > cap && d1 > cap) return 1;
  return d1 > d0 ? (d1 - cap) / (d1 - d0) : (d0 - cap) / (d0 - d1);
}

/* The seconds each stage of a row-wise kernel spends reading again what an earlier stage of
 * the row brought in (layernorm's X, read by all three), or what every row reads (its gamma
 * and beta), in r[s]; false where the kernel is not one to price so.  The streaming model
 * counts each tensor once; such a read is free while it hits L1, and otherwise comes from
 * the first cache that holds it, at that cache's rate.  Whether it hits is a matter of its
 * reuse distance, the bytes touched since the read before it, at a stage's grain: each
 * stage walks the row once, all it touches side by side.  Read again at the same point of
 * the next stage, element i of the row has the rest of the earlier stage's row and the
 * start of the later one's between (d0 at the row's start, d1 at its end, and the stages
 * between whole); read by every row, the whole row's bytes.  Layernorm of f32[101, N] on 2
 * threads of a Zen 4 guest (32 KiB of L1), :time minimums over several runs: N = 1024 10.2
 * us (predicted 10.1 without these reads, 16 KB a row, all in L1), 4096 57.4 (35.0
 * without, 45.8 with: gamma and beta, and 2/3 of X in the last stage, from L2), 16384 282
 * (216 without, 308 with); rmsnorm 40.2, 20.2 and 29.4 at N = 4096. */
static bool row_rereads(const HwModel *h, const Program *p, const Kernel *kn, const int64_t *ext, int threads,
                        double *r) {
  int ns = kn->nstages;
  if (p->naxes > 64 || ns > 64 || !ext) return false;
  uint64_t outer = 0;
  double rows = 1;
  for (int o = 0; o < kn->nouter; o++) outer |= (uint64_t)1 << kn->outer[o], rows *= (double)ext[kn->outer[o]];
  RowTouch st[64], all = {0};
  double fp[64];
  for (int s = 0; s < ns; s++) {
    const Stage *g = &kn->stages[s];
    st[s].n = 0;
    row_loads(g->expr, outer, ext, p->naxes, &st[s]);
    uint64_t m = 0;
    for (int a = 0; a < g->naxes; a++) m |= (uint64_t)1 << g->axes[a];
    touch_add(&st[s], g->out, row_span(m, outer, ext, p->naxes, g->expr->ty), true);
    for (int i = 0; i < st[s].n; i++) touch_add(&all, st[s].slot[i], st[s].bytes[i], true);
    fp[s] = touch_bytes(&st[s]);
  }
  int nc = hw_ncaches(h), t = threads > 0 ? threads : 1;
  for (int s = 0; s < ns; s++) {
    r[s] = 0;
    RowTouch rd = {0};
    row_loads(kn->stages[s].expr, outer, ext, p->naxes, &rd);
    for (int i = 0; i < rd.n; i++) {
      int slot = rd.slot[i], prev = s - 1;
      while (prev >= 0 && touch_find(&st[prev], slot) < 0) prev--;
      double d0, d1;
      if (prev >= 0) {
        RowTouch u = {0};                   /* what the stages between touch beside */
        for (int q = prev + 1; q < s; q++)
          for (int j = 0; j < st[q].n; j++)
            if (touch_find(&st[prev], st[q].slot[j]) < 0 && touch_find(&st[s], st[q].slot[j]) < 0)
              touch_add(&u, st[q].slot[j], st[q].bytes[j], true);
        d0 = fp[prev] + touch_bytes(&u), d1 = touch_bytes(&u) + fp[s];
      } else if (!rd.by_row[i]) {
        d0 = d1 = touch_bytes(&all);
      } else {
        continue;                           /* the row's first read: the streaming model's */
      }
      /* from each level, what misses the ones before and not it; the rest from memory */
      double missed = miss_share(d0, d1, (double)h->level[0].bytes);
      for (int lv = 1; lv < h->nlevels && missed > 0; lv++) {
        double m = lv < nc ? miss_share(d0, d1, (double)h->level[lv].bytes * sched_cache_units(h, lv, t) / t) : 0;
        r[s] += (missed - m) * rows * rd.bytes[i] / sched_threads_bw(h, lv, t);
        missed = m;
      }
    }
  }
  return true;
}

/* A row-wise kernel's rows go through their stages in turn: the first reads the row from
 * where it lives, the later ones read it again from L1 or, past it, from the cache that
 * holds it (row_rereads: a stage's compute against them), the last writes the row's
 * result; reads again in a stage that also reads or writes a cache's lines go through the
 * same path from L2 (added), beside memory's lines they overlap (the larger).  The
 * hardware prefetchers follow the addresses a loop walks, so while the middle stages
 * compute nothing fetches the next row: only a stage that moves bytes overlaps them.  The
 * time is then the first stage's compute against the reads, the middle stages' compute, and
 * the last stage's against the writes (with a pipelined kernel, the last stage of one row
 * runs in the loop of stage pipe_f of the next, against the writes too).  Against the
 * compute and memory of the whole kernel overlapped: layernorm over 101 x 4096 on 1 thread
 * of Emerald Rapids ran 0.16-0.17 ms, where overlapped predicted 0.12 ms and in turn 0.14. */
double cpu_rows_in_turn(const HwModel *h, const Program *p, const Kernel *kn, PolyCtx *pc, const EvalSizes *sz,
                        const int64_t *ext, int pipe_f, const SchedWork *w, const SchedTerms *T, const double *tails) {
  int ns = kn->nstages;
  double c[64], r[64], sum = 0;
  if (ns < 2 || ns > 64 || !(w->ops > 0)) return 0;
  bool priced = row_rereads(h, p, kn, ext, T->threads, r);
  for (int s = 0; s < ns; s++) r[s] = priced ? r[s] * T->imbalance : 0;
  for (int s = 0; s < ns; s++) {
    int64_t v = 0;
    const char *why;
    if (!poly_eval(cost_stage_ops(h, p, kn, s, pc), eval_size_lookup, (void *)sz, &v, &why)) return 0;
    c[s] = (double)v + (tails ? tails[s] : 0);
    sum += c[s];
  }
  /* lane-operations beyond the stages' (the runs of a reduction) go with the first */
  c[0] += w->ops - sum;
  for (int s = 0; s < ns; s++) c[s] *= T->comp_s / w->ops;
  double moved = w->read + w->written, rd = moved > 0 ? T->mem_s * w->read / moved : 0, wr = T->mem_s - rd;
  int f = pipe_f >= 0 && pipe_f < ns - 1 ? pipe_f : -1;
  double t = 0;
  /* the reads again come through the core's path from L2 (rd and wr too, from a cache:
   * added) or beside a stream from memory, which binds (the larger) */
  bool dram = T->level == h->nlevels - 1;
  for (int s = 0; s < ns - 1; s++) {
    double comp = c[s] + (s == f ? c[ns - 1] : 0), first = (s == 0 ? rd : 0) + (s == f ? wr : 0);
    double again = r[s] + (s == f ? r[ns - 1] : 0), mem = dram ? fmax(first, again) : first + again;
    t += comp > mem ? comp : mem;
  }
  if (f < 0) t += fmax(c[ns - 1], dram ? fmax(wr, r[ns - 1]) : wr + r[ns - 1]);
  return t + T->sync_s;
}

/* A row-wise kernel's reductions over the row each end in a fold of the vector's lanes and
 * of the loop's accumulators into one value, which the stage after waits for: log2(lanes)
 * + 2 steps of a shuffle and the operation, FOLD_STEP_CYC cycles each, once a row for each
 * reduction, beside which little else of the row runs.  Softmax (two reductions) on one
 * thread of Zen 5, :time medians of f32[B, N] with B N = 2^20: 18.1, 24.3, 31.6 and 43.2 ns
 * a row at N = 16, 32, 64 and 128 where the lanes' work came to 3.0, 6.1, 12.1 and 24.3
 * (15-20 ns, 50-67 cycles, more a row); rmsnorm (one) 11, 10.5 and 5 more at N = 16 to
 * 64, layernorm (two) 20, 20 and 15. */
#define FOLD_STEP_CYC 5
double cpu_row_folds_s(const HwModel *h, const Kernel *kn, const int64_t *ext, const SchedTerms *T) {
  double rows = 1, folds = 0;
  int lanes = 1, steps = 2;
  for (int o = 0; o < kn->nouter; o++) rows *= (double)ext[kn->outer[o]];
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    int n = cpu_count_reduces(st->expr);
    int l = h->vector_bits / (8 * elem_size(st->expr->ty));
    /* a stage with axes of its own beside the row's folds once for each of their values
     * (attention's m[b, s] = max[t] a[b, s, t], rows of b: S folds a row) */
    double each = 1;
    for (int a = 0; a < st->naxes; a++) {
      bool outer = false;
      for (int o = 0; o < kn->nouter; o++) outer = outer || kn->outer[o] == st->axes[a];
      if (!outer) each *= (double)ext[st->axes[a]];
    }
    folds += n * each;
    if (n && l > lanes) lanes = l;
  }
  while ((1 << (steps - 2)) < lanes) steps++;
  if (!kn->nouter || !folds) return 0;
  return rows * folds * steps * FOLD_STEP_CYC / ((h->ghz > 0 ? h->ghz : 2.0) * 1e9 * T->threads) * T->imbalance;
}

/* LLVM's loop vectoriser builds a loop of n elements as steps of TAIL_UF vectors of vf lanes
 * (interleaved), then an epilogue in vectors of vf / 2 lanes, then one element at a time
 * (cpu_tail_units: the vectors and elements the loop takes, halves and singles each one).
 * Each of those issues the stage's vector instructions (its lane-operations an element,
 * its loads and its store) over the vector pipes, and takes at least a cycle (an iteration
 * of its loop), and each loop's entry TAIL_ENTRY_CYC more; the model's lane-operations
 * count n / vf of it, at full width, so a stage's tails add the difference a loop.  On one
 * thread of Zen 5, over f32[R, N] with R N = 2^16, ns an element: exp 0.10 at N = 64 and
 * 128, 0.12-0.14 at 80 to 144, 0.20-0.22 at 16, 32, 48, 0.24 at 77, 0.39 at 63, 0.59 at
 * 31 (here 0.11, 0.13-0.15, 0.20-0.23, 0.20, 0.45, 0.51); X * 2.0 0.037 at 64, 0.055-0.10
 * at 16, 0.07-0.13 at 17, 0.10 at 31, 0.07 at 63 (0.034, 0.07, 0.05, 0.09, 0.07). */
#define TAIL_UF 4
#define TAIL_ENTRY_CYC 2
double cpu_tail_units(int64_t n, int vf) {
  if (n <= 0 || vf <= 1) return n > 0 ? (double)n : 0;
  int64_t half = vf / 2, r = n % ((int64_t)vf * TAIL_UF);
  return (double)(n - r) / vf + (double)(r / half) + (double)(r % half);
}

/* The same for a loop that ends in whole vectors, the last ending at n (cpu.c's
 * cpu_stage_overlaps): a row shorter than a vector is one masked vector where the target masks
 * lanes (LLVM folds a loop it knows to be short into one: exp over rows of 3, 7 and 15 on
 * Zen 5, 0.77, 0.31 and 0.13 ns an element, from 2.9, 2.8 and 1.6), else the plain loop. */
double cpu_overlap_units(int64_t n, int vf, bool masks) {
  if (n <= 0 || vf <= 1) return n > 0 ? (double)n : 0;
  if (n < vf) return masks ? 1 : cpu_tail_units(n, vf);
  int64_t r = n % ((int64_t)vf * TAIL_UF);
  return (double)(n - r) / vf + (double)((r + vf - 1) / vf);
}

static int count_loads(const KExpr *e) {
  int n = e->kind == KX_LOAD;
  for (int i = 0; i < e->n; i++) n += count_loads(e->a[i]);
  return n;
}

double cpu_tail_ops(const HwModel *h, const Program *p, const Kernel *kn, PolyCtx *pc, const EvalSizes *sz,
                    const int64_t *ext, int par_axis, int64_t tasks, double *tails) {
  double sum = 0;
  int fma = h->fma_units > 0 ? h->fma_units : 1, pipes = h->vec_units > fma ? h->vec_units : fma;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    if (tails) tails[s] = 0;
    if (!cpu_stage_plain(h, p, kn, s, par_axis)) continue;
    int last = st->axes[st->naxes - 1], vf = cpu_tile_lanes(h->vector_bits, st->expr->ty);
    double elems = 1;                    /* the stage's elements in all rows of the kernel */
    for (int o = 0; o < kn->nouter; o++) elems *= (double)ext[kn->outer[o]];
    for (int a = 0; a < st->naxes; a++) elems *= (double)ext[st->axes[a]];
    int64_t n = ext[last], v = 0;
    if (last == par_axis && tasks > 1) n = (n + tasks - 1) / tasks;
    const char *why;
    if (!(elems > 0) || n <= 0 || !poly_eval(cost_stage_ops(h, p, kn, s, pc), eval_size_lookup, (void *)sz, &v, &why)) continue;
    double ops = (double)v / elems, insts = ops + count_loads(st->expr) + 1;   /* and its store */
    bool split = cpu_stage_splits(st);
    double units = cpu_stage_overlaps(h, p, kn, s, par_axis) ? cpu_overlap_units(n, vf, cpu_masks_lanes(h->llvm_features))
                                                             : cpu_tail_units(n, vf) + (split ? 2 : 0);
    double cyc = units * fmax(insts / pipes, 1) + (split ? 3 : 1) * TAIL_ENTRY_CYC, ideal = (double)n / vf * ops / pipes;
    double extra = cyc > ideal ? (cyc - ideal) * (elems / (double)n) * vf * pipes : 0;
    if (tails) tails[s] = extra;
    sum += extra;
  }
  return sum;
}

/* The model of a kernel that streams its tensors (element-wise, row-wise, a reduction), from
 * sched.c: its lane-operations at the vector pipes' rate against its bytes at the rate of the
 * level they live in, plus the fork-join; its line of :sched.  Streaming stores (nt) are
 * taken when the kernel's tensors outgrow the last cache, as cpu_rt.c decides.  A layout
 * change in tiles is priced by cpu_layout.c instead, from the same bytes. */
static double stream_model(CpuBackend *be, const Program *p, const Kernel *kn, PolyCtx *pc, const Extents *x,
                           int threads, bool nt, int par_axis, const CpuSplit *split, const CpuRedSplit *sp, int pipe_f,
                           Buf *out) {
  const EvalSizes *sz = &x->sz;
  const Poly *rp, *wp;
  cost_kernel_traffic(p, kn, pc, &rp, &wp);
  int64_t ov = 0, rv = 0, wv = 0;
  const char *why;
  poly_eval(rp, eval_size_lookup, (void *)sz, &rv, &why);
  poly_eval(wp, eval_size_lookup, (void *)sz, &wv, &why);
  double llc = (double)sched_last_cache_bytes(&be->hw);
  bool streamed = nt && llc > 0 && (double)(rv + wv) > llc;
  SchedTerms T;
  /* a layout change in tiles has its own cost (cpu_layout.c) */
  int64_t tasks = split->tasks;
  double busiest = cpu_split_busiest(split, threads);
  double lt = cpu_layout_time(&be->hw, p, kn, x->ext, x->strides, threads, (double)rv, (double)wv, streamed, split, par_axis, &T);
  if (lt > 0) {
    buf_printf(out, "  model: a layout change: %lld bytes read, %lld written%s, from %s: tiles %.3f ms, memory %.3f ms",
               (long long)rv, (long long)wv, T.memory ? " (and read for ownership)" : "", be->hw.level[T.level].name,
               T.comp_s * 1e3, T.mem_s * 1e3);
    if (cpu_layout_waits(&be->hw, &T)) buf_puts(out, " (tiles and memory added: a shared cache)");
    if (T.sync_s > 0) buf_printf(out, ", fork-join %.2f us", T.sync_s * 1e6);
    buf_printf(out, ": predicted %.3f ms\n", lt * 1e3);
    return lt;
  }
  poly_eval(cost_kernel_ops(&be->hw, p, kn, pc), eval_size_lookup, (void *)sz, &ov, &why);
  SchedWork w = {.ops = (double)ov, .elem_bytes = elem_size(kn->stages[kn->nstages - 1].expr->ty),
                 .read = (double)rv, .written = (double)wv, .streamed = streamed,
                 .tasks = tasks, .busiest = busiest};
  double runs = cpu_reduce_run_ops(&be->hw, p, kn, par_axis, x->ext), tails[64];
  double tail = kn->nstages <= 64 ? cpu_tail_ops(&be->hw, p, kn, pc, sz, x->ext, par_axis, tasks, tails) : 0;
  w.ops += runs + tail;
  if (sp) w.tasks = sp->pieces, w.busiest = 0;
  double t = sched_stream_time(&be->hw, threads, &w, &T), comb = sp ? cpu_reduce_combine_time(&be->hw, sp, w.elem_bytes) : 0;
  double turn = kn->nouter && !sp ? cpu_rows_in_turn(&be->hw, p, kn, pc, sz, x->ext, pipe_f, &w, &T, tail > 0 ? tails : NULL) : 0;
  bool in_turn = turn > t;
  if (in_turn) t = turn;
  double folds = sp ? 0 : cpu_row_folds_s(&be->hw, kn, x->ext, &T), bfolds = sp ? 0 : cpu_reduce_fold_s(&be->hw, p, kn, x->ext, &T);
  t += folds + bfolds;
  buf_printf(out, "  model: %lld lane-ops", (long long)(ov + (int64_t)runs + (int64_t)tail));
  if (tail >= 0.05 * (double)ov) buf_printf(out, " (%lld of them the loops' entries and tails)", (long long)tail);
  buf_printf(out, ", %lld bytes read, %lld written%s, from %s", (long long)rv, (long long)wv,
             T.memory ? " (and read for ownership)" : "", be->hw.level[T.level].name);
  if (T.level == be->hw.nlevels - 1 && T.kept > 0)
    buf_printf(out, " (%.0f%% kept in %s)", 100 * T.kept, be->hw.level[T.level - 1].name);
  buf_printf(out, ": compute %.3f ms, memory %.3f ms", T.comp_s * 1e3, T.mem_s * 1e3);
  if (T.sync_s > 0) buf_printf(out, ", fork-join %.2f us", T.sync_s * 1e6);
  if (in_turn) buf_puts(out, ", the rows' stages in turn");
  if (folds > 0) buf_printf(out, ", the rows' folds %.3f ms", folds * 1e3);
  if (bfolds > 0) buf_printf(out, ", the blocks' folds %.3f ms", bfolds * 1e3);
  if (sp) buf_printf(out, ", partials combined %.3f ms", comb * 1e3);
  buf_printf(out, ": predicted %.3f ms\n", (t + comb) * 1e3);
  return t + comb;
}

double cpu_schedule(CpuBackend *be, CpuProgram *cp, PolyCtx *pc, const Extents *x, int threads, Buf *out) {
  return cpu_schedule_kernels(be, cp, pc, x, threads, out, NULL, NULL);
}

double cpu_schedule_kernels(CpuBackend *be, CpuProgram *cp, PolyCtx *pc, const Extents *x, int threads, Buf *out,
                            double *kpred, int *kspan) {
  const Program *p = cp->p;
  double total = 0;
  /* each kernel's share: what the total gained since the last kernel began (a kernel
   * group, fused attention or a padding fused into its convolution, under its first) */
  int kprev = -1;
  double tprev = 0;
#define KERNEL_DONE(next)                                                                    \
  do {                                                                                       \
    if (kprev >= 0 && kpred) kpred[kprev] = total - tprev, kspan[kprev] = (next) - kprev;     \
  } while (0)
  /* the sizes bound once (extents.c); sizes that do not evaluate describe every shape */
  bool have = x && x->ok;
  const EvalSizes *sz = x ? &x->sz : NULL;
  const int64_t *ext = have ? x->ext : NULL, *strides = have ? x->strides : NULL;
  for (int k = 0; k < cp->nk; k++) {
    const CKernel *ck = &cp->k[k];
    const Kernel *kn = ck->kn;
    KERNEL_DONE(k);
    kprev = k, tprev = total;
    if (have) total += KERNEL_S * call_scale(&be->hw);
    int fused = cpu_attn_describe(be, cp, k, have ? ext : NULL, sz, threads, out, &total);
    if (fused) {
      k += fused - 1;
      continue;
    }
    if ((fused = cpu_conv_describe_padded(be, cp, k, x, threads, out, &total))) {
      k += fused - 1;
      continue;
    }
    buf_printf(out, "kernel %s\n", kn->name);
    if (ck->gemm) {
      buf_printf(out, "  contraction over %s (%s%s x %s -> %s): packed micro-kernels,\n    sizes chosen at run time\n",
                 p->axes[ck->g_ax[3]].name, p->slots[ck->g_a].name, ck->g_ax[0] >= 0 ? ", batched" : "",
                 p->slots[ck->g_b].name, p->slots[ck->g_c].name);
      GemmKernels *gk = cpu_gemm_for(be, p->slots[ck->g_c].type.elem, NULL, 0);
      if (gk && !have) {
        int mr[8], nr[8];
        int nf = gemm_families(gk, mr, nr, 8);
        buf_puts(out, "  level 0, registers: micro-kernel candidates (mr x nr):");
        for (int f = 0; f < nf; f++) buf_printf(out, " %dx%d", mr[f], nr[f]);
        buf_puts(out, "\n  levels 1-3, caches: kc, mc, nc: formulas of the sizes and the capacities\n"
                      "  cores: batch, M and N split per shape (give sizes to see it)\n");
      }
      if (gk && have) {
        GemmArgs x;
        int64_t calls = cpu_gemm_args(ck, ext, strides, &x);
        if (ck->g_nout && calls > 1)
          buf_printf(out, "  batch axes that do not nest: a GEMM for each of the %lld indices of the outer ones\n",
                     (long long)calls);
        else if (ck->g_nout)
          buf_puts(out, "  batch axes that nest: one GEMM over them all\n");
        Buf d = {0};
        gemm_describe(gk, &x, threads, &d);
        if (d.s) {
          put_indented(out, d.s, "  ");
        }
        buf_free(&d);
        total += (double)calls * gemm_predict(gk, &x, threads);
      }
      continue;
    }
    if (ck->win && ck->w.ng) {
      double t = have ? cpu_conv_predict(be, p, ck, ext, strides, sz, threads, out) : -1;
      if (t >= 0) {
        total += t;
        continue;
      }
      if (!have) {
        buf_puts(out, "  grouped (depthwise): each plane computed directly, a row at a time\n");
        continue;
      }
    }
    if (ck->win && !ck->w.ng) {
      const KExpr *r = kn->stages[0].expr;
      buf_puts(out, "  contraction over ");
      axes_text(p, r->raxes, r->nraxes, out);
      buf_printf(out, " (%s x windows of %s -> %s): the windows gathered into a (", p->slots[ck->g_a].name,
                 p->slots[ck->g_b].name, p->slots[ck->g_c].name);
      axes_text(p, r->raxes, r->nraxes, out);
      buf_puts(out, ") x (");
      axes_text(p, ck->w.q, ck->w.nq, out);
      buf_puts(out, ") matrix");
      if (ck->w.np) {
        buf_puts(out, " for each ");
        axes_text(p, ck->w.p, ck->w.np, out);
      }
      buf_puts(out, ", then packed micro-kernels (a layout they cannot take runs the loop kernel below)\n");
      Win W;
      GemmKernels *gk = have ? cpu_gemm_for(be, r->ty, NULL, 0) : NULL;
      if (gk && cpu_win_shape(p, ck, ext, strides, sz, threads, hw_cache_bytes(&be->hw, 1), &W)) {
        if (W.a_gather) {              /* A's layout is not a matrix: gathered into one first */
          double tga = cost_roofline(&be->hw, 1, 0, 2.0 * (double)W.mtot * (double)W.ktot * (double)elem_size(r->ty));
          buf_printf(out, "  %s gathered first into a %lld x %lld matrix (its layout is not one): predicted %.3f ms\n",
                     p->slots[ck->w.a->slot].name, (long long)W.mtot, (long long)W.ktot, tga * 1e3);
          total += tga;
        }
        double tg = cpu_conv_gemm_predict(gk, &W, threads, out);
        if (tg >= 0) {                 /* the implicit GEMM takes it (cpu_conv_gemm.c) */
          total += tg;
          continue;
        }
        GemmArgs gx;
        double tgr = cpu_conv_grouped_predict(gk, &W, threads, out, &gx);
        if (tgr >= 0) {                /* the images gathered in groups (cpu_conv_gemm.c) */
          Buf d = {0};
          gemm_describe(gk, &gx, threads, &d);
          put_indented(out, d.s, "    ");
          buf_free(&d);
          total += tgr;
          continue;
        }
        buf_printf(out, "  gathered: %lld x %lld for each of %lld", (long long)W.ktot, (long long)W.qtot, (long long)W.ptot);
        bool moved = false;
        for (int i = 0; i < r->nraxes; i++) moved |= W.korder[i] != i;
        if (moved) {                   /* the weight's layout set the order of the taps */
          int ord[DYN_MAX_RANK];
          for (int i = 0; i < r->nraxes; i++) ord[i] = r->raxes[W.korder[i]];
          buf_puts(out, " (rows ");
          axes_text(p, ord, r->nraxes, out);
          buf_puts(out, ")");
        }
        if (W.parts > 1) buf_printf(out, ", in %lld parts of up to %lld columns", (long long)W.parts, (long long)W.x.n);
        if (W.direct) buf_puts(out, " (read in place: the windows are the image itself)");
        /* one matrix in all (run_window): its GEMM on every thread */
        int gt = W.ptot * W.parts == 1 ? threads : 1;
        buf_printf(out, ", %s: a GEMM of M %lld, N %lld, K %lld each:\n",
                   gt > 1 ? "one GEMM on every thread" : "on the thread that multiplies it",
                   (long long)W.mtot, (long long)W.x.n, (long long)W.ktot);
        Buf d = {0};
        gemm_describe(gk, &W.x, gt, &d);
        put_indented(out, d.s, "    ");
        buf_free(&d);
        /* the tasks shared over the threads, each a gather (the windows read and the matrix
         * written, at the roofline's rate) and its GEMM */
        int64_t rounds = sched_waves(W.ptot * W.parts, threads);
        double gbytes = W.direct ? 0 : 2.0 * (double)W.ktot * (double)W.x.n * (double)elem_size(r->ty);
        total += (double)rounds * (gemm_predict(gk, &W.x, gt) + cost_roofline(&be->hw, 1, 0, gbytes));
        continue;
      }
    }
    const char *par = ck->par_axis >= 0 ? p->axes[ck->par_axis].name : NULL;
    if (kn->nouter) {
      buf_printf(out, "  row-wise: %d stages per row of ", kn->nstages);
      axes_text(p, kn->outer, kn->nouter, out);
      buf_puts(out, ", per-row intermediates in cache\n");
      if (ck->pipe_f >= 0)
        buf_printf(out, "  pipelined: row %s's stage %s runs in one loop with row %s - 1's stage %s\n",
                   p->axes[kn->outer[0]].name, p->slots[kn->stages[ck->pipe_f].out].name,
                   p->axes[kn->outer[0]].name, p->slots[kn->stages[kn->nstages - 1].out].name);
    }
    for (int s2 = 0; s2 < kn->nstages; s2++) {
      const Stage *st = &kn->stages[s2];
      if (!st->naxes) continue;
      CpuRedPlan rp;
      CpuShortPlan sh;
      if (cpu_reduce_short_plan(p, kn, s2, &sh)) {
        CpuShortShape ss = cpu_reduce_short_shape(&be->hw, st->expr->ty);
        int c = have ? cpu_reduce_short_accs(ss, ext[sh.v]) : 0;
        buf_printf(out, "  stage %s: short kept runs of %s, each block [%s x %s] read in vectors of %d lanes",
                   p->slots[st->out].name, p->axes[sh.v].name, p->axes[sh.r0].name, p->axes[sh.v].name, ss.lanes);
        int kv = have ? cpu_reduce_kept_vectors(ss, ext[sh.v]) : 0;
        if (have && c) buf_printf(out, " into %d vectors of accumulators (%s = %lld)", c, p->axes[sh.v].name, (long long)ext[sh.v]);
        else if (kv)
          buf_printf(out, " (not at %s = %lld, too long a lane pattern: the run's columns kept in %d vectors of registers "
                          "over the rows instead)", p->axes[sh.v].name, (long long)ext[sh.v], kv);
        else if (have) buf_printf(out, " (not at %s = %lld: the loops below)", p->axes[sh.v].name, (long long)ext[sh.v]);
        buf_puts(out, ",\n    where the run's stride is 1 and the reduced axis's the run's extent, else:\n");
      }
      if (cpu_reduce_rows_plan(&be->hw, p, kn, s2, &sh)) {
        int W = cpu_tile_lanes(be->hw.vector_bits, st->expr->ty), least = cpu_reduce_rows_least(&be->hw, W);
        buf_printf(out, "  stage %s: short reduced runs of %s, %d rows of %s at a time: rows shorter than %d one in each "
                   "lane of a gather; rows of %d to %d, dense, each in a vector of partials, the %d vectors folded into one",
                   p->slots[st->out].name, p->axes[sh.r0].name, W, p->axes[sh.v].name, least, least, cpu_reduce_rows_most(), W);
        if (least < W) buf_printf(out, " (a row shorter than %d by one masked load)", W);
        if (have && ext[sh.r0] > cpu_reduce_rows_most())
          buf_printf(out, " (not at %s = %lld: the loops below)", p->axes[sh.r0].name, (long long)ext[sh.r0]);
        buf_puts(out, ",\n    else:\n");
      }
      if (cpu_reduce_plan(p, kn, s2, ck->par_axis, &rp)) {
        buf_printf(out, "  stage %s: a reduction in runs of axes, outer to inner: ", p->slots[st->out].name);
        cpu_reduce_text(p, &rp, out);
        buf_puts(out, "\n    (each run one loop where its strides join; the innermost vectorised)\n");
        if (rp.columns)
          buf_printf(out, "    where there are %d rows or fewer: the columns in chunks of %d vectors, each summed in "
                     "registers over the rows\n", cpu_reduce_col_rows(), cpu_reduce_col_vecs());
        if (rp.folded) {
          int W = cpu_tile_lanes(be->hw.vector_bits, st->expr->ty);
          buf_printf(out, "    where the innermost run is %d to %d long and dense: %d results at a time, each in a vector of "
                     "partials over its runs, the %d folded together once\n", W, cpu_reduce_fold_most(W), W, W);
        }
        continue;
      }
      const KExpr *re = st->expr;
      if (re->kind == KX_REDUCE && re->nraxes && !cpu_interchanged(p, kn, s2, ck->par_axis))
        buf_printf(out, "  stage %s: vectorised along %s, each %s its own reduction in vector partial sums\n",
                   p->slots[st->out].name, p->axes[re->raxes[re->nraxes - 1]].name, p->axes[st->axes[st->naxes - 1]].name);
      else
        buf_printf(out, "  stage %s: vectorised along %s%s\n", p->slots[st->out].name, p->axes[st->axes[st->naxes - 1]].name,
                   cpu_interchanged(p, kn, s2, ck->par_axis) ? ", inside the reduction's loops (each step updates the row)"
                   : cpu_stage_overlaps(&be->hw, p, kn, s2, ck->par_axis) ? ", in whole vectors, the last ending at the row's end"
                   : "");
      int bu = cpu_blocked_axis(kn, st);
      if (bu >= 0) {
        int w = cpu_tile_lanes(be->hw.vector_bits, st->expr->ty);
        buf_printf(out, "  stage %s: a layout change (it reads along %s, writes along %s), in tiles of %d x %d "
                   "transposed in registers, those cut by an edge shifted back to end at it\n", p->slots[st->out].name,
                   p->axes[bu].name, p->axes[st->axes[st->naxes - 1]].name, w, w);
      }
    }
    /* the tasks cpu_rt.c runs (cpu_task_split) */
    CpuSplit tasks = have ? cpu_task_split(kn, par ? ck->par_axis : -1, par ? ck->sub_axis : -1, ext, be->hw.vector_bits, threads) : (CpuSplit){0};
    buf_printf(out, "  cores: %s\n", par ? "" : "one task (no parallel axis)");
    if (par) {
      out->len -= 1;
      out->s[out->len] = 0;
      buf_printf(out, "tasks over %s", par);
      if (have && tasks.sub)
        buf_printf(out, " = %lld: too few; over %s = %lld instead, in %lld tasks, each all of %s on its share of %s",
                   (long long)ext[ck->par_axis], p->axes[ck->sub_axis].name, (long long)tasks.n, (long long)tasks.tasks,
                   par, p->axes[ck->sub_axis].name);
      else if (have)
        buf_printf(out, " = %lld in %lld task%s", (long long)tasks.n, (long long)tasks.tasks, tasks.tasks == 1 ? "" : "s");
      buf_putc(out, '\n');
    }
    CpuRedSplit sp;
    bool split = have && cpu_reduce_split(&be->hw, p, ck, ext, strides, NULL, &sp);
    if (split)
      buf_printf(out, "  split: %s in %lld pieces over the threads instead, each into partial results of its own, "
                 "combined in order (the model: %.3f against %.3f ms)\n", p->axes[sp.axis].name, (long long)sp.pieces,
                 sp.t_split * 1e3, sp.t_now * 1e3);
    if (ck->nt_slot >= 0) {
      double llc = (double)sched_last_cache_bytes(&be->hw);
      bool mib = llc >= (1 << 20);
      buf_printf(out, "  streaming stores to %s when it and the kernel's inputs are over %.0f %s (the last cache): ",
                 p->slots[ck->nt_slot].name, llc / (mib ? 1 << 20 : 1 << 10), mib ? "MiB" : "KiB");
      if (cp->twins_ok) buf_printf(out, "twin compiled on first use (%.1f ms)\n", cp->twins_ms);
      else buf_puts(out, cp->twins_tried ? "twin failed to compile, plain stores\n" : "twin compiled on first use (not yet)\n");
    }
    if (have) {
      total += stream_model(be, p, kn, pc, x, threads, ck->nt_slot >= 0, ck->par_axis, &tasks, split ? &sp : NULL,
                            ck->pipe_f, out);
    }
  }
  KERNEL_DONE(cp->nk);
#undef KERNEL_DONE
  if (have) {
    double r = call_scale(&be->hw);
    buf_printf(out, "  call: %.2f us beside the kernels (binding the sizes, checking the facts, finding the plans), "
               "and %.2f us a kernel to start it%s\n", CALL_S * r * 1e6, KERNEL_S * r * 1e6,
               be->hw.call_us > 0 ? " (scaled to the call dyn --calibrate timed)" : "");
    total += CALL_S * r;
  }
  return total;
}

#else  /* no LLVM: the reference evaluator runs everything (cpu.c) */

double cpu_call_s(const HwModel *h) { (void)h; return 0; }

double cpu_schedule(CpuBackend *be, CpuProgram *cp, PolyCtx *pc, const Extents *x, int threads, Buf *out) { return 0; }
double cpu_schedule_kernels(CpuBackend *be, CpuProgram *cp, PolyCtx *pc, const Extents *x, int threads, Buf *out,
                            double *kpred, int *kspan) { return 0; }

#endif
