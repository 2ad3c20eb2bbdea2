/* cpu_rt.c -- the compiled CPU back end's run-time: cpu_run binds a call's tensors and
 * evaluates its tables of strides, shapes and extents (kept from call to call while the
 * sizes repeat), then runs each kernel: loop kernels split into tasks on the thread pool
 * with their per-row locals in each thread's scratch, contractions on the GEMM engine, and
 * convolutions on the micro-kernels: as cpu_conv_gemm.c's implicit GEMM where the model's
 * plan is one of tiles, else as windows gathered into matrices here.  The code it runs is
 * cpu.c's. */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- running ---- */

typedef struct Task {
  const Program *p;
  const CKernel *ck;
  KCtx base;
  CpuSplit split;
  int nlocal;
  int *local_slots;
  int64_t *local_bytes;  /* rounded up to whole 64-byte lines */
  size_t local_total;    /* their sum */
  volatile int *interrupt;
  bool nt;                 /* run the streaming twin */
  bool st;                 /* run the strided variant */
} Task;

/* The per-row locals of a task come from its thread's scratch, kept from call to call (up
 * to SCRATCH_KEEP bytes; a larger one is given back after the task).  Allocating them for
 * each task had glibc's heap grow and shrink by a few hundred KB on every call, and on a
 * virtual machine the page faults of that cost more than the work: softmax over 2 x 50257
 * on one thread took 1.8 ms a call in some processes instead of 25 us. */
#define SCRATCH_KEEP ((size_t)64 << 20)
typedef struct Kept { void *p; size_t bytes; } Kept;
typedef struct Scratch { Kept s[2]; } Scratch;      /* a task's; a whole call's (cpu_int.h) */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static void scratch_drop(void *v) {
  Scratch *sc = v;
  free(sc->s[0].p);
  free(sc->s[1].p);
  free(sc);
}
static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_drop); }

static void *slot_get(int i, size_t bytes) {
  pthread_once(&scratch_once, scratch_init);
  Scratch *sc = pthread_getspecific(scratch_key);
  if (!sc) {
    if (!(sc = calloc(1, sizeof *sc))) return NULL;
    pthread_setspecific(scratch_key, sc);
  }
  Kept *s = &sc->s[i];
  if (s->bytes < bytes) {
    free(s->p);
    s->p = NULL;
    s->bytes = 0;
    if (posix_memalign(&s->p, 64, bytes)) {
      s->p = NULL;
      return NULL;
    }
    s->bytes = bytes;
  }
  return s->p;
}

/* At least `bytes` of 64-byte aligned scratch for this thread, or NULL (cpu_int.h). */
void *cpu_scratch_get(size_t bytes) { return slot_get(0, bytes); }
void *cpu_scratch_call(size_t bytes) { return slot_get(1, bytes); }

/* A scratch larger than SCRATCH_KEEP is not kept past its task (slot 0) or call (1).  The
 * key is made first here too: a task that took no scratch (a window read in place) would
 * otherwise ask an unmade key, whose value is another library's (ASan's, in a sanitised
 * build: a 1 x 1 convolution on the image crashed there). */
static void slot_trim(int i) {
  pthread_once(&scratch_once, scratch_init);
  Scratch *sc = pthread_getspecific(scratch_key);
  if (sc && sc->s[i].bytes > SCRATCH_KEEP) {
    free(sc->s[i].p);
    sc->s[i].p = NULL;
    sc->s[i].bytes = 0;
  }
}
void cpu_scratch_call_done(void) { slot_trim(1); }

static void run_task(void *arg, int64_t t) {
  Task *T = arg;
  if (T->interrupt && *T->interrupt) return;
  int64_t hi, lo = cpu_split_range(&T->split, t, &hi);
  KCtx c = T->base;
  void *bufs_local[256];
  void **bufs = T->p->nslots <= 256 ? bufs_local : xmalloc(sizeof(void *) * (size_t)T->p->nslots);
  memcpy(bufs, T->base.bufs, sizeof(void *) * (size_t)T->p->nslots);
  /* a share of sub_axis: the kernel over all of the parallel axis, on views of its tensors
   * from value lo of sub_axis, hi - lo of them (cpu_sub_axis) */
  int64_t ext[CPU_SUB_SLOTS], shape[CPU_SUB_SLOTS * DYN_MAX_RANK];
  if (T->split.sub) {
    const CKernel *ck = T->ck;
    const Program *p = T->p;
    memcpy(ext, c.ext, sizeof(int64_t) * (size_t)p->naxes);
    memcpy(shape, c.shape, sizeof(int64_t) * DYN_MAX_RANK * (size_t)p->nslots);
    for (int i = 0; i < p->nslots; i++) {
      int d = ck->sub_dim[i];
      if (d < 0 || !bufs[i]) continue;
      bufs[i] = (char *)bufs[i] + lo * c.strides[i * DYN_MAX_RANK + d] * elem_size(p->slots[i].type.elem);
      shape[i * DYN_MAX_RANK + d] = hi - lo;
    }
    for (int a = 0; a < p->naxes; a++)
      if (ck->sub_mask >> a & 1) ext[a] = hi - lo;
    c.ext = ext, c.shape = shape;
    lo = 0, hi = T->base.ext[ck->par_axis];
  }
  char *scratch = T->nlocal ? cpu_scratch_get(T->local_total) : NULL;
  bool ok = !T->nlocal || scratch;
  for (int i = 0; ok && i < T->nlocal; i++) {
    bufs[T->local_slots[i]] = scratch;
    scratch += T->local_bytes[i];
  }
  c.bufs = bufs;
  if (ok) (T->st ? T->ck->fn_st : T->nt ? T->ck->fn_nt : T->ck->fn)(&c, lo, hi);
  else *c.err = 2;
  if (T->nlocal) slot_trim(0);
  if (bufs != bufs_local) free(bufs);
}


/* Work per parallel iteration decides the split: small kernels run on one thread (a
 * reduction's summed axes count too, cpu_reduce_work).  An iteration's work is the sum of
 * its stages' (softmax's max, exp, sum and divide each pass over the row once), held below
 * TASK_WORK_CAP so that it cannot overflow: multiplied, the stages of softmax over rows of
 * 100003 came to 100003^4, which wrapped to a small or negative figure and ran on one
 * thread. */
#define TASK_WORK_CAP ((int64_t)1 << 40)
#define RUN_PAGE 4096
int64_t cpu_task_count(const Kernel *kn, int par_axis, const int64_t *ext, int threads) {
  int64_t n = par_axis >= 0 ? ext[par_axis] : 1, work = 0;
  for (int s = 0; s < kn->nstages && work < TASK_WORK_CAP; s++) {
    int64_t w = cpu_reduce_work(kn, s, par_axis, ext);
    for (int a = 0; a < kn->stages[s].naxes; a++) {
      int64_t e = kn->stages[s].axes[a] != par_axis ? ext[kn->stages[s].axes[a]] : 1;
      w = e <= 1 ? w : e < TASK_WORK_CAP / w ? w * e : TASK_WORK_CAP;
    }
    work += w;
  }
  int64_t tasks = n <= 32767 / (work > 0 ? work : 1) ? 1 : (int64_t)threads * 4;
  /* A parallel axis that is the stage's last (a scan down the columns, Y[i, j] = scan[i]
   * +(X[i, j]), splits j) cuts every row into a run per task: runs shorter than a page
   * leave the prefetchers, which stop at a page's end, too little to follow (the scan of
   * f32[4096, 1024] in 4 tasks, runs of 1 KB: 16-23 GB/s on one thread of Zen 4, with the
   * fused scan of cpu.c's gen_scan_rows in one task 31).  So a run is at least RUN_PAGE
   * bytes, as long as that leaves a task a thread. */
  const Stage *st0 = &kn->stages[0];
  if (par_axis >= 0 && kn->nstages == 1 && st0->naxes > 1 && st0->axes[st0->naxes - 1] == par_axis) {
    int64_t most = n * elem_size(st0->expr->ty) / RUN_PAGE;
    if (most < threads) most = threads;
    if (tasks > most) tasks = most;
  }
  if (tasks > n) tasks = n;
  return tasks > 0 ? tasks : 1;
}

/* Tasks of whole granules, as even as the granules allow: a chunk of ceil(n / tasks) left
 * the rows of softmax over f32[33, 1000] in 7 tasks of 5 (the last 3), 4 of them (20 rows)
 * on one of 2 threads; 8 tasks of 4 or 5 rows share them 16 and 17. */
CpuSplit cpu_task_split(const Kernel *kn, int par_axis, int sub_axis, const int64_t *ext, int vector_bits, int threads) {
  CpuSplit s = {par_axis >= 0 ? ext[par_axis] : 1, 1, 1, 1, false};
  s.gran = cpu_layout_granule(kn, par_axis, vector_bits);
  s.units = s.n > 0 ? (s.n + s.gran - 1) / s.gran : 1;
  s.tasks = cpu_task_count(kn, par_axis, ext, threads);
  if (s.tasks > s.units) s.tasks = s.units;
  if (sub_axis >= 0 && s.tasks < threads && s.n > 0) {
    /* a row's pieces (f32[1, N] element-wise) start on a whole vector of the target's */
    const Stage *st0 = &kn->stages[0];
    int64_t n = ext[sub_axis], gran = 1;
    if (!kn->nouter && st0->axes[st0->naxes - 1] == sub_axis) gran = cpu_tile_lanes(vector_bits, st0->expr->ty);
    int64_t units = (n + gran - 1) / gran, tasks = cpu_task_count(kn, sub_axis, ext, threads);
    if (tasks > units) tasks = units;
    if (tasks > s.tasks) s = (CpuSplit){n, gran, units, tasks, true};
  }
  return s;
}

/* Does e use the axes of `mask` (sub_axis and its fellows) only as whole subscripts of
 * loads, each slot always in the same dimension (dims[slot]: -2 not seen yet, -1 read
 * without them)?  A task's locals are its own scratch, not views: subscripted from 0 within
 * its share, whatever their dimension. */
static bool sub_uses(const Program *p, const KExpr *e, uint64_t mask, int8_t *dims) {
#define IS_SUB(x) ((x)->kind == KX_AXIS && (mask >> (x)->axis & 1))
  if (e->kind == KX_AXIS) return !IS_SUB(e);
  if (e->kind == KX_REDUCE || e->kind == KX_SCAN)
    for (int i = 0; i < e->nraxes; i++)
      if (mask >> e->raxes[i] & 1) return false;
  bool local = e->kind == KX_LOAD && p->slots[e->slot].kind == SLOT_LOCAL;
  int d = -1;
  for (int i = 0; i < e->n; i++) {
    if (e->kind == KX_LOAD && IS_SUB(e->a[i])) {
      if (d >= 0 && !local) return false;     /* X[b, b] */
      d = i;
    } else if (!sub_uses(p, e->a[i], mask, dims)) {
      return false;
    }
  }
#undef IS_SUB
  if (e->kind != KX_LOAD || local) return true;
  if (dims[e->slot] != -2 && dims[e->slot] != d) return false;
  dims[e->slot] = (int8_t)d;
  return true;
}

int cpu_sub_axis(const Program *p, const Kernel *kn, int par_axis, int8_t *dims, uint64_t *mask) {
  if (par_axis < 0 || p->nslots > CPU_SUB_SLOTS || p->naxes > CPU_SUB_SLOTS) return -1;
  const Stage *st0 = &kn->stages[0];
  /* b the second outer axis, shared by the stages; else each stage's axis at pos, its own
   * (the statements of a row-wise chain each have theirs), all of one extent.  A stage's
   * result is subscripted by the outer axes, then the stage's (cpu.c's gen_body). */
  int b = -1, pos = -1;
  if (kn->nouter >= 2 && kn->outer[0] == par_axis) b = kn->outer[1];
  else if (kn->nouter == 1 && kn->outer[0] == par_axis) pos = 0;
  else if (!kn->nouter && kn->nstages == 1 && st0->naxes >= 2 && st0->axes[0] == par_axis && cpu_blocked_axis(kn, st0) < 0 &&
           (st0->naxes >= 3 || st0->expr->kind != KX_REDUCE))
    pos = 1;                 /* a matrix's rows only element-wise: a reduction splits its own way */
  *mask = b >= 0 ? (uint64_t)1 << b : 0;
  for (int s = 0; s < kn->nstages && pos >= 0; s++) {
    const Stage *st = &kn->stages[s];
    if (st->naxes <= pos || p->axes[st->axes[pos]].extent != p->axes[st0->axes[pos]].extent) return -1;
    *mask |= (uint64_t)1 << st->axes[pos];
  }
  if (pos >= 0) b = st0->axes[pos];
  if (b < 0) return -1;
  int d = pos >= 0 ? kn->nouter + pos : 1;
  for (int i = 0; i < p->nslots; i++) dims[i] = -2;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    if (st->expr->kind == KX_SCAN || !sub_uses(p, st->expr, *mask, dims)) return -1;
    if (p->slots[st->out].kind == SLOT_LOCAL) continue;
    if (dims[st->out] != -2 && dims[st->out] != d) return -1;
    dims[st->out] = (int8_t)d;
  }
  for (int i = 0; i < p->nslots; i++)
    if (dims[i] < 0) dims[i] = -1;
  return b;
}

int64_t cpu_split_range(const CpuSplit *s, int64_t t, int64_t *hi) {
  int64_t lo = t * s->units / s->tasks * s->gran, h = (t + 1) * s->units / s->tasks * s->gran;
  *hi = h < s->n ? h : s->n;
  return lo;
}

double cpu_split_busiest(const CpuSplit *s, int threads) {
  int t = threads > 0 ? threads : 1;
  int64_t most = 0, hi;
  if (t > s->tasks) t = (int)s->tasks;
  for (int i = 0; i < t; i++) {
    int64_t lo = cpu_split_range(s, pool_share_start(s->tasks, t, i), &hi);
    cpu_split_range(s, pool_share_start(s->tasks, t, i + 1) - 1, &hi);
    if (hi - lo > most) most = hi - lo;
  }
  return s->n > 0 ? (double)most / (double)s->n : 1;
}

/* The contraction's sizes and element strides; strides[slot * DYN_MAX_RANK + d]. */
/* ---- windowed contractions (convolutions) on the micro-kernels ----
 * Y[P, M, Q] = sum[K] A[M, K] * B[window] (kexpr_window_contraction) runs as GEMMs: for
 * each index of the P axes (conv2d's images) the windows of B are gathered into a K x Q
 * matrix (the classic im2col: rows the taps c, i, j, columns the outputs h, w), and Y[p] =
 * A . col[p] on the packed micro-kernels, A read in place.  B's subscripts are affine in the
 * axes, so the gather is a copy of runs along Q's last axis with offsets found once per
 * call.  Each task is one image, or a part of one along Q's outer axes (parts whose matrix
 * fits L2, as many as the tasks need to share out evenly over the threads): the thread
 * gathers it into its own scratch and runs its GEMM itself, so the GEMM reads what its own
 * core has just written.  (Gathering a few images across both cores and then splitting
 * their GEMM across them, the GEMM read half its lines from the other core: conv2d below
 * took 6.8 ms so, 3.5 ms now.)  A layout that A cannot be read in place from, or a part
 * over WIN_PART_BYTES, runs the loop kernel.
 * conv2d over 8 x 32 x 56 x 56 with 64 3x3 filters: 20 ms as the interchanged loop kernel,
 * 3.5 ms so; with stride 2, 30 -> 1.5 ms; conv1d over 16 x 64 x 1000 with 64 5-tap
 * filters, 8 -> 2.9 ms. */
#define WIN_PART_BYTES ((size_t)64 << 20)

/* Whether axes ord[0..n) (ord NULL: 0..n) of the given strides and extents nest, each
 * stride the next one's times its extent, leaving out axes of extent 1; *inner: the last
 * stride kept (that of one step of the flattened index). */
static bool nested(const int64_t *stride, const int64_t *ext, int n, const int *ord, int64_t *inner) {
  int64_t want = -1;
  for (int j = n - 1; j >= 0; j--) {
    int i = ord ? ord[j] : j;
    if (ext[i] == 1) continue;
    if (want < 0) *inner = stride[i];
    else if (stride[i] != want) return false;
    want = stride[i] * ext[i];
  }
  return true;
}

int64_t cpu_gemm_args(const CKernel *ck, const int64_t *ext, const int64_t *strides, GemmArgs *x) {
  const int64_t *sa = strides + ck->g_a * DYN_MAX_RANK, *sb = strides + ck->g_b * DYN_MAX_RANK;
  const int64_t *sc = strides + ck->g_c * DYN_MAX_RANK;
  const int *pos = ck->g_pos;
  int bx = ck->g_ax[0];
  x->accumulate = false;          /* every field is set: a memset here was a `rep stos` */
  x->a = x->b = NULL;
  x->c = NULL;
  x->stop = NULL;
  x->batch = bx >= 0 ? ext[bx] : 1;
  x->m = ext[ck->g_ax[1]];
  x->n = ext[ck->g_ax[2]];
  x->k = ext[ck->g_ax[3]];
  x->a_sm = sa[pos[0]];
  x->a_sk = sa[pos[1]];
  x->a_sb = pos[2] >= 0 ? sa[pos[2]] : 0;
  x->b_sk = sb[pos[3]];
  x->b_sn = sb[pos[4]];
  x->b_sb = pos[5] >= 0 ? sb[pos[5]] : 0;
  int nax = ck->kn->stages[0].naxes;
  x->c_sm = sc[nax - 2];
  x->c_sn = sc[nax - 1];
  x->c_sb = nax >= 3 ? sc[nax - 3] : 0;
  /* the outer batch axes: one GEMM over them all where they nest with the batch in A, B
   * and C alike, else one an index of them */
  int no = ck->g_nout;
  int64_t outer = 1, ex[DYN_MAX_RANK + 1], st[3][DYN_MAX_RANK + 1], inner[3];
  for (int j = 0; j < no; j++) {
    outer *= ex[j] = ext[ck->g_out[j]];
    st[0][j] = sa[j], st[1][j] = sb[j], st[2][j] = sc[j];
  }
  if (outer <= 1) return outer;
  ex[no] = x->batch, st[0][no] = x->a_sb, st[1][no] = x->b_sb, st[2][no] = x->c_sb;
  for (int o = 0; o < 3; o++)
    if (!nested(st[o], ex, no + 1, NULL, &inner[o])) return outer;
  x->batch *= outer;
  x->a_sb = inner[0], x->b_sb = inner[1], x->c_sb = inner[2];
  return 1;
}

/* A contraction on the engine: one GEMM, or one an index of its outer batch axes, each at
 * that index's offsets in A, B and C. */
static bool run_gemm(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                     const int64_t *strides, volatile int *interrupt, char *err, size_t errlen) {
  GemmArgs x;
  int64_t calls = cpu_gemm_args(ck, ext, strides, &x), es = elem_size(cp->p->slots[ck->g_c].type.elem);
  x.stop = interrupt;
  GemmKernels *gk = cpu_gemm_for(be, cp->p->slots[ck->g_c].type.elem, err, errlen);
  if (!gk) return false;
  const int64_t *sa = strides + ck->g_a * DYN_MAX_RANK, *sb = strides + ck->g_b * DYN_MAX_RANK;
  const int64_t *sc = strides + ck->g_c * DYN_MAX_RANK;
  for (int64_t i = 0; i < calls; i++) {
    int64_t r = i, oa = 0, ob = 0, oc = 0;
    for (int j = calls > 1 ? ck->g_nout - 1 : -1; j >= 0; j--) {
      int64_t e = ext[ck->g_out[j]], v = r % e;
      r /= e, oa += v * sa[j], ob += v * sb[j], oc += v * sc[j];
    }
    x.a = (const char *)bufs[ck->g_a] + oa * es;
    x.b = (const char *)bufs[ck->g_b] + ob * es;
    x.c = (char *)bufs[ck->g_c] + oc * es;
    if (!gemm_run(gk, &x, be->pool, err, errlen)) return false;
  }
  return true;
}

bool cpu_win_shape(const Program *p, const CKernel *ck, const int64_t *ext, const int64_t *strides,
                      const EvalSizes *sz, int threads, double fit_bytes, Win *W) {
  const WinContraction *w = &ck->w;
  if (w->ng) return false;                            /* grouped: cpu_conv.c's */
  const KExpr *r = ck->kn->stages[0].expr, *A = w->a, *B = w->b;
  int64_t es = elem_size(r->ty);
  const int *axes[3] = { w->p, r->raxes, w->q };
  int64_t *tot[3] = { &W->ptot, &W->ktot, &W->qtot };
  W->n[0] = w->np, W->n[1] = r->nraxes, W->n[2] = w->nq;
  W->ptot = W->ktot = W->qtot = W->mtot = 1;
  for (int g = 0; g < 3; g++)
    for (int i = 0; i < W->n[g]; i++) *tot[g] *= W->ext[g][i] = ext[axes[g][i]];
  for (int i = 0; i < w->nm; i++) W->mtot *= W->mext[i] = ext[w->m[i]];
  /* A read in place as an M x K matrix: its M axes nested in Y's order and its reduction
   * axes nested in the order of their strides, largest first, which the gathered rows
   * then follow (a weight stored [r, s, c, m] reads as K x M, column-major).  Axes of
   * extent 1 are left out of the checks. */
  const int64_t *s_a = strides + A->slot * DYN_MAX_RANK;
  int64_t sm[DYN_MAX_RANK] = { 0 }, sk[DYN_MAX_RANK] = { 0 };
  for (int d = 0; d < A->n; d++)
    for (int g = 0; g < 2; g++) {
      const int *ax = g ? r->raxes : w->m;
      for (int i = 0; i < (g ? r->nraxes : w->nm); i++)
        if (ax[i] == A->a[d]->axis) (g ? sk : sm)[i] = s_a[d];
    }
  int perm[DYN_MAX_RANK], nk = W->n[1];
  for (int i = 0; i < nk; i++) {                      /* insertion sort, stable */
    int j = i;
    while (j > 0 && sk[perm[j - 1]] < sk[i]) perm[j] = perm[j - 1], j--;
    perm[j] = i;
  }
  /* Otherwise (the attention's heads projected back, sum[h, e] O[h, s, e] * Wo[o, h * DH +
   * e]: M's axis s between K's h and e) A is gathered into an M x K matrix first, K in the
   * order of its strides as well (run_window); it is the small operand, M x K elements
   * against M x K x Q multiply-adds, where the loop kernel took 19 ms for that projection
   * at S = 512, D = 768 on 2 threads of a Zen 4 guest. */
  int64_t a_sm = 1, a_sk = 1;
  W->a_gather = !nested(sm, W->mext, w->nm, NULL, &a_sm) || !nested(sk, W->ext[1], nk, perm, &a_sk);
  if (W->a_gather) {
    a_sm = W->ktot, a_sk = 1;
    for (int i = 0; i < w->nm; i++) W->a_st[0][i] = sm[i];
    for (int i = 0; i < nk; i++) W->a_st[1][i] = sk[perm[i]];
  }
  /* Y[P..., M..., Q...] written as batches of M x Q matrices: row-major over its axes */
  const Stage *st = &ck->kn->stages[0];
  const int64_t *s_c = strides + st->out * DYN_MAX_RANK;
  int64_t want = 1;
  for (int d = st->naxes - 1; d >= 0; d--) {
    if (s_c[d] != want) return false;
    want *= ext[st->axes[d]];
  }
  /* B's offset, affine in the axes: its value at 0 and along each axis */
  int64_t ax[256] = { 0 };
  if (p->naxes > 256) return false;
  const int64_t *s_b = strides + B->slot * DYN_MAX_RANK;
  W->b0 = 0;
  for (int d = 0; d < B->n; d++) W->b0 += s_b[d] * cpu_affine_at(B->a[d], ax, sz);
  for (int g = 0; g < 3; g++)
    for (int i = 0; i < W->n[g]; i++) {
      ax[axes[g][i]] = 1;
      int64_t o = 0;
      for (int d = 0; d < B->n; d++) o += s_b[d] * cpu_affine_at(B->a[d], ax, sz);
      ax[axes[g][i]] = 0;
      W->coef[g][i] = o - W->b0;
    }
  W->hi = W->b0;                                      /* each axis's coefficient at its end */
  for (int g = 0; g < 3; g++)
    for (int i = 0; i < W->n[g]; i++) W->hi += W->coef[g][i] > 0 ? (W->ext[g][i] - 1) * W->coef[g][i] : 0;
  int64_t kext[DYN_MAX_RANK], kcoef[DYN_MAX_RANK];     /* the reduction axes as A nests them */
  for (int i = 0; i < nk; i++) kext[i] = W->ext[1][perm[i]], kcoef[i] = W->coef[1][perm[i]];
  memcpy(W->ext[1], kext, sizeof kext);
  memcpy(W->coef[1], kcoef, sizeof kcoef);
  memcpy(W->korder, perm, sizeof perm);
  /* parts of whole runs, enough for each part's matrix to fit in fit_bytes (a core's L2:
   * gathered and multiplied while it is there) and for the tasks to share out evenly over
   * the threads (one 64 x 112 x 112 image with 64 3x3 filters on 2 threads: 7.9 ms in 2
   * parts, 4.1-4.7 ms in parts of 0.5-4 MiB; eight 32 x 56 x 56 ones alike either way) */
  W->qlast = W->ext[2][W->n[2] - 1];
  W->qrows = W->qlast ? W->qtot / W->qlast : 0;
  int64_t t = threads > 1 ? threads : 1;
  int64_t fit = (int64_t)((double)W->ktot * (double)W->qtot * (double)es / fit_bytes) + 1;
  W->parts = 1;
  while (W->parts < W->qrows && (W->parts < fit || (W->ptot * W->parts) % t)) W->parts++;
  GemmArgs *x = &W->x;
  memset(x, 0, sizeof *x);
  x->batch = 1;
  x->m = W->mtot, x->n = (W->qrows + W->parts - 1) / W->parts * W->qlast, x->k = W->ktot;
  x->a_sm = a_sm, x->a_sk = a_sk;
  x->b_sk = x->n, x->b_sn = 1;
  /* B's windows a K x Q matrix already, Q's axes one unit-stride run (a 1 x 1 convolution
   * at stride 1, which gathered copied the image): the GEMM reads B in place */
  int64_t b_sk = 0, b_sq = 0;
  W->direct = nested(W->coef[1], W->ext[1], nk, NULL, &b_sk) && nested(W->coef[2], W->ext[2], W->n[2], NULL, &b_sq) &&
              (b_sq == 1 || W->qtot == 1) && b_sk > 0;
  if (W->direct) x->b_sk = b_sk;
  x->c_sm = W->qtot, x->c_sn = 1;
  return W->direct || (double)W->ktot * (double)x->n * (double)es <= (double)WIN_PART_BYTES;
}

/* Runs of n elements, every step-th of src, to d one after another: a run's elements are
 * copied in a plain loop, kept one and vectorised (clones for AVX2 and AVX-512 chosen when
 * the library loads, as cpu_conv.c's).  GCC would otherwise call memcpy for each run, and a
 * 3 x 3 window on an 8 x 8 map gathers runs of 8: 40% of conv 64 64 8 8 64's time went to
 * the gather, most of it in memcpy's calls and in taking the indices apart for every row.
 * A run of step 1 or 2 is written 64 bytes at a time (at step 2, the even lanes of two
 * loads), its last move whole too, the elements past it overwritten by the runs after it,
 * while those lie in this call's runs and the source's in the `avail` elements from src
 * that the caller knows are there: the vectorised loop had left a run of 8 or fewer, and a
 * run's last few, to its scalar tail, and took a step of 2 an element at a time.
 * 2 threads of Zen 5, :time medians in three or four alternating rounds, before -> after:
 * conv2d of f32[64, 64, 8, 8] by 64 3 x 3 filters 1.86-2.23 -> 1.29-1.61 ms; of
 * f32[4, 128, 28, 28] by 128 3 x 3 ones 3.23-3.51 -> 2.86-3.22; of f32[2, 16, 33, 33] by
 * 32 7 x 7 ones 0.55-0.57 -> 0.44-0.47; of f32[1, 64, 56, 56] by 64 3 x 3 ones 0.91-0.96
 * -> 0.87-0.94; at stride 2, four rounds: f32[1, 128, 56, 56] by 128 3 x 3 filters
 * 1.14-1.28 -> 1.05-1.13, f32[1, 3, 224, 224] by 64 7 x 7 ones 1.06-1.22 -> 0.85-0.95,
 * f32[1, 24, 57, 57] by 40 5 x 5 ones 0.30-0.32 -> 0.23-0.24. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define COPY_ATTR                                                                                     \
  __attribute__((optimize("O3", "no-tree-loop-distribute-patterns"), target_clones("avx512f", "avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define COPY_ATTR __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define COPY_ATTR
#endif
#define COPY_RUNS(NAME, T, VT, X)                                                                     \
  COPY_ATTR static void NAME(T *restrict d, const T *restrict src, const int64_t *restrict roff,      \
                             int64_t nrun, int64_t n, int64_t step, int64_t avail) {                  \
    enum { V = 64 / sizeof(T) };                                                                     \
    int64_t r = 0;                                                                                   \
    int64_t span = (n + V - 1) / V * V;                                                              \
    if ((step == 1 || step == 2) && n > 0 && nrun * n >= span)                                       \
      for (int64_t last = (nrun * n - span) / n; r <= last && roff[r] + step * span <= avail; r++, d += n) { \
        const T *s = src + roff[r];                                                                  \
        if (step == 1)                                                                               \
          for (int64_t v = 0; v < span; v += V) memcpy(d + v, s + v, sizeof(T) * V);                 \
        else                                                                                         \
          for (int64_t v = 0; v < span; v += V) {                                                    \
            VT e = CONV_EVEN_##X(CONV_LD(VT, s + 2 * v), CONV_LD(VT, s + 2 * v + V));                \
            memcpy(d + v, &e, sizeof e);                                                             \
          }                                                                                          \
      }                                                                                              \
    for (; r < nrun; r++, d += n) {                                                                  \
      const T *s = src + roff[r];                                                                    \
      if (step == 1)                                                                                 \
        for (int64_t j = 0; j < n; j++) d[j] = s[j];                                                 \
      else                                                                                           \
        for (int64_t j = 0; j < n; j++) d[j] = s[j * step];                                          \
    }                                                                                                \
  }
COPY_RUNS(copy_runs_f32, float, ConvVf, f)
COPY_RUNS(copy_runs_f64, double, ConvVd, d)

/* The next index of an odometer over n axes (extents ext, the last fastest), its offset
 * (coefficients coef) kept in *off. */
static inline void odometer_next(int64_t *idx, const int64_t *ext, const int64_t *coef, int n, int64_t *off) {
  for (int i = n - 1; i >= 0; i--) {
    *off += coef[i];
    if (++idx[i] < ext[i]) return;
    *off -= coef[i] * ext[i];
    idx[i] = 0;
  }
}

/* Index pi of P's matrix, its runs [r0, r1) of Q's last axis, every row of K into dst (rows
 * ld elements apart).  The runs' offsets are the same for every row of K, so they are taken
 * apart once (into roff, r1 - r0 of them), and K's offsets follow an odometer. */
void cpu_win_gather(const Win *W, const char *b, char *dst, int64_t ld, int64_t pi, int64_t r0, int64_t r1,
                    int es, int64_t *roff) {
  int nq = W->n[2], nk = W->n[1];
  int64_t qlast = W->qlast, qstep = W->coef[2][nq - 1], o = W->b0, idx[DYN_MAX_RANK] = { 0 };
  for (int i = W->n[0] - 1; i >= 0; i--) o += (pi % W->ext[0][i]) * W->coef[0][i], pi /= W->ext[0][i];
  int64_t ro = 0;
  for (int64_t r = r0, i = nq - 2; i >= 0; i--) {        /* run r0's index of Q's outer axes */
    idx[i] = r % W->ext[2][i];
    ro += idx[i] * W->coef[2][i];
    r /= W->ext[2][i];
  }
  for (int64_t r = r0; r < r1; r++) {
    if (r > r0) odometer_next(idx, W->ext[2], W->coef[2], nq - 1, &ro);   /* the outer axes' next */
    roff[r - r0] = ro;
  }
  int64_t kidx[DYN_MAX_RANK] = { 0 };
  for (int64_t k = 0; k < W->ktot; k++) {
    if (k > 0) odometer_next(kidx, W->ext[1], W->coef[1], nk, &o);
    if (es == 4)
      copy_runs_f32((float *)dst + k * ld, (const float *)b + o, roff, r1 - r0, qlast, qstep, W->hi + 1 - o);
    else
      copy_runs_f64((double *)dst + k * ld, (const double *)b + o, roff, r1 - r0, qlast, qstep, W->hi + 1 - o);
  }
}

typedef struct WinJob {
  const Win *W;
  GemmKernels *gk;
  const void *a, *b;
  char *c;
  int es;
  volatile int *stop;
  _Atomic int failed;          /* 1: no scratch; 2: the GEMM failed (msg) */
  char msg[256];
  Pool *pool;                  /* the GEMM's threads: NULL, its task's alone */
} WinJob;

/* Task t: part t % parts of index t / parts of P, gathered and multiplied on this thread
 * (J->pool NULL), or, where that is the only task, on every thread (J->pool). */
static void win_task(void *arg, int64_t t) {
  WinJob *J = arg;
  const Win *W = J->W;
  if (atomic_load(&J->failed) || (J->stop && *J->stop)) return;
  int64_t p = t / W->parts, part = t % W->parts;
  int64_t r0 = part * W->qrows / W->parts, r1 = (part + 1) * W->qrows / W->parts, qn = (r1 - r0) * W->qlast;
  GemmArgs x = W->x;
  x.n = qn;
  x.a = J->a;
  if (W->direct) {                /* B's offset at (p, 0, r0's first column) */
    int64_t o = W->b0 + r0 * W->qlast, pi = p;
    for (int i = W->n[0] - 1; i >= 0; i--) o += (pi % W->ext[0][i]) * W->coef[0][i], pi /= W->ext[0][i];
    x.b = (const char *)J->b + (size_t)o * (size_t)J->es;
  } else {
    /* the runs' offsets after the matrix, on an int64_t's alignment (an f32 matrix of an
     * odd count of elements ends 4 bytes past one) */
    size_t colb = ((size_t)(W->ktot * qn * J->es) + sizeof(int64_t) - 1) / sizeof(int64_t) * sizeof(int64_t);
    char *col = cpu_scratch_get(colb + sizeof(int64_t) * (size_t)(r1 - r0));
    if (!col) {
      atomic_store(&J->failed, 1);
      return;
    }
    cpu_win_gather(W, J->b, col, qn, p, r0, r1, J->es, (int64_t *)(col + colb));
    x.b = col;
    x.b_sk = qn;
  }
  x.c = J->c + (size_t)(p * W->mtot * W->qtot + r0 * W->qlast) * (size_t)J->es;
  x.stop = J->stop;
  char err[256];
  if (!gemm_run(J->gk, &x, J->pool, err, sizeof err)) {
    int want = 0;
    if (atomic_compare_exchange_strong(&J->failed, &want, 2)) snprintf(J->msg, sizeof J->msg, "%s", err);
  }
  slot_trim(0);
}

/* A gathered into an M x K matrix (W->a_gather): row m (M's axes in Y's order) holds K in
 * the order of ext[1], the innermost axis copied in a strided run. */
static void win_gather_a(const Win *W, int nm, const char *a, char *dst, int es) {
  int nk = W->n[1];
  int64_t mi[DYN_MAX_RANK] = { 0 }, ki[DYN_MAX_RANK] = { 0 }, om = 0;
  int64_t run = nk ? W->ext[1][nk - 1] : 1, rs = nk ? W->a_st[1][nk - 1] : 0;
  for (int64_t m = 0; m < W->mtot; m++) {
    if (m > 0) odometer_next(mi, W->mext, W->a_st[0], nm, &om);
    int64_t ok = 0;               /* K's outer axes from 0 again; the innermost is the run */
    memset(ki, 0, sizeof ki);
    for (int64_t k = 0; k < W->ktot; k += run) {
      if (k > 0) odometer_next(ki, W->ext[1], W->a_st[1], nk - 1, &ok);
      char *d = dst + (size_t)(m * W->ktot + k) * (size_t)es;
      if (es == 4)
        copy_runs_f32((float *)d, (const float *)a + om + ok, (int64_t[]){ 0 }, 1, run, rs, 0);
      else
        copy_runs_f64((double *)d, (const double *)a + om + ok, (int64_t[]){ 0 }, 1, run, rs, 0);
    }
  }
}

/* 1: ran; 0: this layout takes the loop kernel; -1: failed (err set). */
static int run_window(CpuBackend *be, const CpuProgram *cp, const CKernel *ck, void **bufs, const int64_t *ext,
                      const int64_t *strides, const EvalSizes *sz, volatile int *interrupt, char *err, size_t errlen) {
  if (ck->w.ng) return cpu_conv_run(be, cp, ck, bufs, ext, strides, sz, interrupt, err, errlen);
  Win W;
  if (!cpu_win_shape(cp->p, ck, ext, strides, sz, pool_threads(be->pool), hw_cache_bytes(&be->hw, 1), &W)) return 0;
  if (W.ptot == 0 || W.mtot == 0 || W.qtot == 0) return 1;
  DynElem e = ck->kn->stages[0].expr->ty;
  GemmKernels *gk = cpu_gemm_for(be, e, err, errlen);
  if (!gk) return 0;
  int es = (int)elem_size(e);
  if (W.ktot == 0) {                     /* an empty sum */
    memset(bufs[ck->g_c], 0, (size_t)(W.ptot * W.mtot * W.qtot) * (size_t)es);
    return 1;
  }
  const void *a = bufs[ck->g_a];
  char *ag = NULL;
  if (W.a_gather) {
    if (!(ag = malloc((size_t)(W.mtot * W.ktot) * (size_t)es))) return 0;
    win_gather_a(&W, ck->w.nm, a, ag, es);
    a = ag;
  }
  int r = cpu_conv_gemm_run(be, gk, &W, a, bufs[ck->g_b], bufs[ck->g_c], interrupt, err, errlen);
  if (!r)                                /* else the implicit GEMM (cpu_conv_gemm.c) took it */
    r = cpu_conv_grouped_run(be, gk, &W, a, bufs[ck->g_b], bufs[ck->g_c], interrupt, err, errlen);
  if (!r) {                              /* else the images were gathered together (the same) */
    WinJob J = { &W, gk, a, bufs[ck->g_b], bufs[ck->g_c], es, interrupt, 0, "", NULL };
    if (W.ptot * W.parts == 1) {         /* one matrix in all: its GEMM on every thread */
      J.pool = be->pool;
      win_task(&J, 0);
    } else {
      dyn_parallel_for(be->pool, W.ptot * W.parts, win_task, &J);
    }
    r = J.failed == 1 ? 0 : 1;
    if (J.failed > 1 || (interrupt && *interrupt)) {
      snprintf(err, errlen, "%s", J.failed > 1 ? J.msg : "interrupted");
      r = -1;
    }
  }
  free(ag);
  return r;
}

/* A slot's bytes, INT64_MAX when that overflows (a tensor with no elements is 0 bytes
 * whatever its other dimensions: f32[2^62, 0]). */
static int64_t slot_bytes(const Program *p, int slot, const int64_t *shape) {
  const Slot *sl = &p->slots[slot];
  for (int k = 0; k < sl->type.rank; k++)
    if (shape[slot * DYN_MAX_RANK + k] == 0) return 0;
  int64_t bytes = elem_size(sl->type.elem);
  for (int k = 0; k < sl->type.rank; k++)
    if (!size_mul_ok(bytes, shape[slot * DYN_MAX_RANK + k], &bytes)) return INT64_MAX;
  return bytes;
}

/* Does a kernel compute nothing anyone can see: its results have no elements and nothing in
 * it can fail?  Then its rows need not be walked (layernorm of f32[2^50, 0] has 2^50 of
 * them); the reference evaluator skips the same kernels. */
static bool invisible(const Program *p, const Kernel *kn, const int64_t *shape) {
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    const Slot *sl = &p->slots[st->out];
    if (sl->kind == SLOT_LOCAL) continue;
    bool empty = false;
    for (int k = 0; k < sl->type.rank; k++) empty = empty || shape[st->out * DYN_MAX_RANK + k] == 0;
    if (!empty) return false;
  }
  for (int s = 0; s < kn->nstages; s++)          /* rare: only for empty results */
    if (kexpr_can_fail(kn->stages[s].expr)) return false;
  return true;
}

/* Stream the result (see cpu_compile.c's mark_streaming) when it and the tensors the kernel
 * reads outgrow the last cache: the first lines written are then gone from it before the kernel ends, so
 * keeping them there only costs the read for ownership (softmax over 128 x 50257 writes
 * 26 MB, under a 32 MB cache, but reads as much again). */
static bool streaming(CpuBackend *be, CpuProgram *cp, const CKernel *ck, const int64_t *shape) {
  int64_t llc = sched_last_cache_bytes(&be->hw);
  if (ck->nt_slot < 0 || llc <= 0 || cp->p->slots[ck->nt_slot].type.rank == 0) return false;
  int64_t bytes = 0;
  for (int i = 0; i < ck->nfoot; i++) bytes += slot_bytes(cp->p, ck->foot[i], shape);
  return bytes > llc && cpu_compile_twins(be, cp) && ck->fn_nt;
}

/* Does a loop kernel read an input whose last axis it steps over with a stride other than 1,
 * so that its strided variant must run? */
static bool reads_strided(const Program *p, const CKernel *ck, const int64_t *strides, const int64_t *shape) {
  for (int i = 0; i < ck->nins; i++) {
    int slot = ck->ins[i], last = p->slots[slot].type.rank - 1;
    if (last >= 0 && shape[slot * DYN_MAX_RANK + last] > 1 && strides[slot * DYN_MAX_RANK + last] != 1) return true;
  }
  return false;
}

/* Returns 1 on success, 0 on a run-time error detected by the code (the caller re-runs on
 * the reference evaluator for the message), -1 on a failure described in err. */
int cpu_run(CpuBackend *be, CpuProgram *cp, Tensor **inputs, const Extents *x, Tensor **outs,
            volatile int *interrupt, char *err, size_t errlen) {
  const EvalSizes *sizes = &x->sz;
  if (!jit_can_run(be->jit)) {
    snprintf(err, errlen, "code for %s cannot run on this CPU", be->hw.name);
    return -1;
  }
  const Program *p = cp->p;
  int ns = p->nslots;
  /* one block for the run's tables (a small call is dominated by such fixed costs) */
  size_t n64 = (size_t)ns * DYN_MAX_RANK * 2 + (size_t)p->naxes + (size_t)p->nkx + 4;
  int64_t local[512];
  size_t words = n64 + 2 * ((size_t)ns + 1);
  int64_t *block = words <= 512 ? local : xmalloc(words * sizeof(int64_t));
  int32_t errflag = 0;
  int status = 1;
  /* the sizes as last time: the tables are read where they were kept (nothing writes them
   * during a run), and only the tensors and buffers start empty */
  bool tables_hit = cp->tables && cp->tables_nsizes == sizes->n && cp->tables_words == n64 &&
                  !memcmp(cp->tables, sizes->vals, sizeof(int64_t) * (size_t)sizes->n);
  int64_t *tab = tables_hit ? cp->tables + sizes->n : block;
  int64_t *strides = tab, *shape = strides + (size_t)ns * DYN_MAX_RANK + 1;
  int64_t *ext = shape + (size_t)ns * DYN_MAX_RANK + 1, *szv = ext + p->naxes + 1;
  Tensor **t = (Tensor **)(block + n64);
  void **bufs = (void **)(block + n64 + ns + 1);
  if (tables_hit) {
    memset(block + n64, 0, (words - n64) * sizeof(int64_t));
  } else {
    memset(block, 0, words * sizeof(int64_t));
    memcpy(ext, x->ext, sizeof(int64_t) * (size_t)p->naxes);     /* bound once (extents.c) */
    memcpy(szv, x->szv, sizeof(int64_t) * (size_t)p->nkx);
  }
  /* fused attention (cpu_attn.c) leaves its scores and statistics unallocated */
  const bool *unstored = cpu_attn_choose(be, cp, ext, szv);
  for (int i = 0; i < ns; i++) {
    const Slot *s = &p->slots[i];
    int64_t *dims = &shape[i * DYN_MAX_RANK];
    int skip = s->kind == SLOT_LOCAL ? s->type.rank - s->nlocal : 0;
    int rank = s->type.rank - skip;
    for (int k = 0; k < rank && !tables_hit; k++) dims[k] = x->shape[i * DYN_MAX_RANK + k + skip];
    if (s->kind == SLOT_INPUT) {
      t[i] = tensor_retain(inputs[s->param]);
    } else if ((s->kind == SLOT_TEMP && !(unstored && unstored[i])) || s->kind == SLOT_OUTPUT) {
      /* every element is written by its kernel: no need to zero it first */
      t[i] = tensor_new_uninit(s->type.elem, rank, dims, err, errlen);
      if (!t[i]) {
        status = -1;
        goto out;
      }
    }
    int64_t st = 1;
    for (int k = rank - 1; k >= 0 && !tables_hit; k--) {
      strides[i * DYN_MAX_RANK + k] = st;
      st *= dims[k] > 0 ? dims[k] : 1;
    }
    /* an input is read in place, through its own strides (cpu.c's "strided inputs"): they
     * are written over the table's C-order ones at each call, as the tensors are bound */
    if (s->kind == SLOT_INPUT) memcpy(&strides[i * DYN_MAX_RANK], t[i]->strides, sizeof(int64_t) * (size_t)rank);
    if (t[i]) bufs[i] = (char *)t[i]->buf->data + t[i]->offset * elem_size(s->type.elem);
  }
  if (!tables_hit) {
    size_t words = (size_t)sizes->n + n64;
    if (!cp->tables || (size_t)cp->tables_nsizes + cp->tables_words < words) {
      free(cp->tables);
      cp->tables = xmalloc(words * sizeof(int64_t));
    }
    memcpy(cp->tables, sizes->vals, sizeof(int64_t) * (size_t)sizes->n);
    memcpy(cp->tables + sizes->n, block, n64 * sizeof(int64_t));
    cp->tables_nsizes = sizes->n;
    cp->tables_words = n64;
  }
  KCtx base = {bufs, strides, ext, szv, shape, &errflag};
  int nthreads = pool_threads(be->pool);
  /* :time --kernels: each kernel's time, from its start to the next's (a group's under
   * its first; every path below ends its iteration by going on to the next) */
  double *prow = cp->prof && cp->prof_runs < cp->prof_cap ? cp->prof + (size_t)cp->prof_runs * (size_t)cp->nk : NULL;
  int kprev = -1;
  double tprev = 0;
  if (prow) memset(prow, 0, sizeof(double) * (size_t)cp->nk);
  for (int k = 0; k < cp->nk && status == 1; k++) {
    const CKernel *ck = &cp->k[k];
    if (prow) {
      double tk = now_s();
      if (kprev >= 0) prow[kprev] = tk - tprev;
      kprev = k, tprev = tk;
    }
    if (interrupt && *interrupt) {
      snprintf(err, errlen, "interrupted");
      status = -1;
      break;
    }
    int fused = cpu_attn_run(be, cp, k, bufs, ext, szv, strides, interrupt, err, errlen);
    if (fused < 0) status = -1;
    if (fused > 0) k += fused - 1;
    if (fused) continue;
    int padded = cpu_conv_padded(be, cp, k, bufs, ext, strides, shape, sizes, interrupt, err, errlen);
    if (padded < 0) status = -1;
    if (padded > 0) k += padded - 1;
    if (padded) continue;
    if (ck->gemm) {
      if (!run_gemm(be, cp, ck, bufs, ext, strides, interrupt, err, errlen)) status = -1;
      continue;
    }
    if (ck->win) {
      int r = run_window(be, cp, ck, bufs, ext, strides, sizes, interrupt, err, errlen);
      if (r < 0) status = -1;
      if (r) continue;
    }
    bool st = reads_strided(p, ck, strides, shape);
    if (st && !cpu_compile_strided(be, cp)) {
      snprintf(err, errlen, "cannot compile the strided variant of %s", ck->kn->name);
      status = -1;
      break;
    }
    Task T = {p, ck, base, {1, 1, 1, 1}, 0, NULL, NULL, 0, interrupt, !st && streaming(be, cp, ck, shape), st};
    int64_t n = ck->par_axis >= 0 ? ext[ck->par_axis] : 1;
    if (n <= 0 || invisible(p, ck->kn, shape)) continue;
    /* locals of this kernel: each task's in its thread's scratch (run_task), each on a
     * 64-byte boundary */
    int lslots[64];
    int64_t lbytes[64];
    int nl = 0;
    T.local_total = 0;
    for (int s = 0; s < ck->kn->nstages && nl < 64; s++) {
      const Slot *sl = &p->slots[ck->kn->stages[s].out];
      if (sl->kind != SLOT_LOCAL) continue;
      int64_t bytes = elem_size(sl->type.elem);
      for (int d = 0; d < sl->nlocal; d++) bytes *= shape[ck->kn->stages[s].out * DYN_MAX_RANK + d];
      if (ck->pipe_f >= 0) bytes = 2 * cpu_pipe_copy_bytes(bytes);
      lslots[nl] = ck->kn->stages[s].out;
      lbytes[nl] = bytes ? (bytes + 63) / 64 * 64 : 64;
      T.local_total += (size_t)lbytes[nl++];
    }
    T.nlocal = nl;
    T.local_slots = lslots;
    T.local_bytes = lbytes;
    CpuRedSplit sp;
    T.split = cpu_task_split(ck->kn, ck->par_axis, ck->sub_axis, ext, be->hw.vector_bits, nthreads);
    int64_t tasks = T.split.tasks;
    if (!T.nlocal && !T.nt && cpu_reduce_split(&be->hw, p, ck, ext, strides, shape, &sp)) {
      if (!cpu_reduce_split_run(be->pool, p, ck, T.st ? ck->fn_st : ck->fn, &base, &sp, n, interrupt)) errflag = 2;
    } else if (tasks == 1) run_task(&T, 0);
    else dyn_parallel_for(be->pool, tasks, run_task, &T);
    if (errflag == 2) {
      snprintf(err, errlen, "cannot allocate the per-row buffers of %s", ck->kn->name);
      status = -1;
    } else if (errflag) {
      status = 0;
    }
    if (interrupt && *interrupt) {
      snprintf(err, errlen, "interrupted");
      status = -1;
    }
  }
  if (prow && kprev >= 0) prow[kprev] = now_s() - tprev;
  if (prow && status == 1) cp->prof_runs++;
  if (status == 1)
    for (int i = 0; i < p->nout; i++) outs[i] = tensor_retain(t[p->outputs[i]]);
out:
  for (int i = 0; i < ns; i++) tensor_release(t[i]);
  if (block != local) free(block);
  return status;
}

#else  /* no LLVM: the reference evaluator runs everything (cpu.c) */

int cpu_run(CpuBackend *be, CpuProgram *cp, Tensor **inputs, const Extents *x, Tensor **outs,
            volatile int *interrupt, char *err, size_t errlen) { return -1; }

#endif
