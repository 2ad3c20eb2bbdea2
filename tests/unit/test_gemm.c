/* test_gemm.c -- Check suite for jit.c, pool.c and gemm.c: the contraction engine against a
 * plain double-precision loop on random data, over shapes chosen around every tile and
 * block size (mr, nr, kc, mc each -1/+0/+1), primes, 1s, transposed and general strides,
 * batches, C += and f64, on one and two threads and through every forced plan.  Operands sit
 * against PROT_NONE guard pages, so a stray read or write by generated code faults (ASan
 * cannot see into JIT'd code); C's padding is checked to be untouched.
 */
#include "config.h"
#include "dyn_int.h"
#include "gemm.h"
#include "gemm_int.h"

#include <check.h>
#include <pthread.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Core.h>

static HwModel hw;
static GemmKernels *g32, *g64;

static void setup_once(void) {
  char err[256];
  hw_detect_host(&hw);
  g32 = gemm_compile(DYN_F32, &hw, err, sizeof err);
  if (!g32) fprintf(stderr, "gemm_compile f32: %s\n", err);
  g64 = gemm_compile(DYN_F64, &hw, err, sizeof err);
  if (!g64) fprintf(stderr, "gemm_compile f64: %s\n", err);
}

static void teardown_once(void) {
  gemm_free(g32);
  gemm_free(g64);
}

/* ---- guarded buffers: data flush against an inaccessible page, at the end or start ---- */

typedef struct Guarded { char *map; size_t maplen; void *p; } Guarded;

static void *guarded(Guarded *gd, size_t bytes, bool at_end) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t body = (bytes + pg - 1) / pg * pg;
  gd->maplen = body + 2 * pg;
  gd->map = mmap(NULL, gd->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(gd->map != MAP_FAILED);
  ck_assert_int_eq(mprotect(gd->map, pg, PROT_NONE), 0);
  ck_assert_int_eq(mprotect(gd->map + pg + body, pg, PROT_NONE), 0);
  gd->p = at_end ? gd->map + pg + body - bytes : gd->map + pg;
  return gd->p;
}

static void unguard(Guarded *gd) { munmap(gd->map, gd->maplen); }

/* ---- one checked run ---- */

typedef struct Case {
  int64_t batch, m, n, k;
  char la, lb, lc;          /* 'r' row-major, 'c' column-major, 'g' general (both strides
                               padded), 'a' rows a multiple of 1024 elements apart, 'e'
                               rows exactly their length apart, for
                               A [m,k], B [k,n], C [m,n] */
  bool acc, bcast_a;        /* C +=; A shared by every batch (batch stride 0) */
  int threads;
  bool at_end;
} Case;

static uint64_t rng = 88172645463325252ull;
static double rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ull << 53) * 2 - 1;
}

/* Strides for a rows x cols matrix in layout l; returns the elements one matrix spans. */
static int64_t layout(char l, int64_t rows, int64_t cols, int64_t *sr, int64_t *sc) {
  switch (l) {
  case 'r': *sr = cols + 3; *sc = 1; break;                  /* padded rows */
  case 'c': *sr = 1; *sc = rows + 2; break;
  case 'a': *sr = (cols + 1023) / 1024 * 1024; *sc = 1; break;  /* rows 4 KiB apart (f32) */
  case 'e': *sr = cols; *sc = 1; break;                      /* rows exactly a row apart */
  default:  *sr = 2 * cols + 1; *sc = 2; break;              /* no unit stride at all */
  }
  if (rows == 0 || cols == 0) return 0;
  return (rows - 1) * *sr + (cols - 1) * *sc + 1;
}

static int run_case(GemmKernels *g, const Case *cs) {
  bool f64 = g == g64;
  size_t es = f64 ? 8 : 4;
  int64_t asr, asc, bsr, bsc, csr, csc;
  int64_t na = layout(cs->la, cs->m, cs->k, &asr, &asc);
  int64_t nb = layout(cs->lb, cs->k, cs->n, &bsr, &bsc);
  int64_t nc = layout(cs->lc, cs->m, cs->n, &csr, &csc);
  int64_t ba = cs->bcast_a ? 0 : na, bb = nb, bc = nc;
  int64_t ta = cs->bcast_a ? na : na * cs->batch, tb = nb * cs->batch, tc = nc * cs->batch;
  Guarded GA, GB, GC;
  char *A = guarded(&GA, (size_t)(ta ? ta : 1) * es, cs->at_end);
  char *B = guarded(&GB, (size_t)(tb ? tb : 1) * es, cs->at_end);
  char *C = guarded(&GC, (size_t)(tc ? tc : 1) * es, cs->at_end);
  double *C0 = malloc((size_t)(tc ? tc : 1) * sizeof(double));
#define GET(P, i) (f64 ? ((double *)(P))[i] : (double)((float *)(P))[i])
#define PUT(P, i, v) do { if (f64) ((double *)(P))[i] = (v); else ((float *)(P))[i] = (float)(v); } while (0)
  for (int64_t i = 0; i < ta; i++) PUT(A, i, rnd());
  for (int64_t i = 0; i < tb; i++) PUT(B, i, rnd());
  for (int64_t i = 0; i < tc; i++) {
    C0[i] = rnd();
    PUT(C, i, C0[i]);          /* padding keeps these values; C += starts from them */
  }
  GemmArgs x = { .batch = cs->batch, .m = cs->m, .n = cs->n, .k = cs->k,
                 .a = A, .a_sb = ba, .a_sm = asr, .a_sk = asc,
                 .b = B, .b_sb = bb, .b_sk = bsr, .b_sn = bsc,
                 .c = C, .c_sb = bc, .c_sm = csr, .c_sn = csc, .accumulate = cs->acc };
  Pool *pool = cs->threads > 1 ? pool_new(cs->threads) : NULL;
  char err[256];
  ck_assert_msg(gemm_run(g, &x, pool, err, sizeof err), "%s", err);
  pool_free(pool);
  /* every element of C: the logical ones against the reference, the rest untouched */
  bool *logical = calloc((size_t)(tc ? tc : 1), 1);
  int bad = 0;
  double eps = f64 ? 2.3e-16 : 1.2e-7;
  for (int64_t b = 0; b < cs->batch; b++)
    for (int64_t i = 0; i < cs->m; i++)
      for (int64_t j = 0; j < cs->n; j++) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < cs->k; k++) {
          double p = GET(A, b * ba + i * asr + k * asc) * GET(B, b * bb + k * bsr + j * bsc);
          s += p;
          mag += fabs(p);
        }
        int64_t ci = b * bc + i * csr + j * csc;
        logical[ci] = true;
        double ref = (cs->acc ? C0[ci] : 0) + s, got = GET(C, ci);
        double tol = 4 * eps * (double)(cs->k + 2) * (mag + fabs(C0[ci])) + 1e-30;
        if (!(fabs(got - ref) <= tol) && bad++ < 3)
          fprintf(stderr, "  [%lld,%lld,%lld] got %.9g want %.9g\n", (long long)b, (long long)i,
                  (long long)j, got, ref);
      }
  for (int64_t i = 0; i < tc; i++)
    if (!logical[i] && GET(C, i) != (f64 ? C0[i] : (double)(float)C0[i]) && bad++ < 3)
      fprintf(stderr, "  padding C[%lld] overwritten\n", (long long)i);
  if (bad)
    fprintf(stderr, "FAILED %s batch %lld m %lld n %lld k %lld layouts %c%c%c acc %d threads %d\n",
            f64 ? "f64" : "f32", (long long)cs->batch, (long long)cs->m, (long long)cs->n,
            (long long)cs->k, cs->la, cs->lb, cs->lc, cs->acc, cs->threads);
  free(logical);
  free(C0);
  unguard(&GA);
  unguard(&GB);
  unguard(&GC);
  return bad;
#undef GET
#undef PUT
}

static int64_t imin64(int64_t a, int64_t b) { return a < b ? a : b; }

static int run_shape(GemmKernels *g, int64_t m, int64_t n, int64_t k, int threads) {
  int bad = 0;
  for (int e = 0; e < 2; e++) {
    Case cs = { .batch = 1, .m = m, .n = n, .k = k, .la = 'r', .lb = 'r', .lc = 'r',
                .threads = threads, .at_end = e };
    bad += run_case(g, &cs);
  }
  return bad;
}

/* ---- tests ---- */

START_TEST(test_compiles) {
  ck_assert_ptr_nonnull(g32);
  ck_assert_ptr_nonnull(g64);
  int mr[4], nr[4];
  int nf = gemm_families(g32, mr, nr, 4);
  ck_assert_int_ge(nf, 1);
  for (int i = 0; i < nf && i < 4; i++) {
    ck_assert_int_ge(mr[i], 1);
    ck_assert_int_eq(nr[i] % (hw.vector_bits / 32), 0);
  }
  ck_assert(gemm_compile_ms(g32) > 0);
  ck_assert(gemm_core_gflops(g32) > 0);       /* calibrated at compile time (:time's roof) */
  char err[128];
  ck_assert_ptr_null(gemm_compile(DYN_I32, &hw, err, sizeof err));
  ck_assert(strstr(err, "i32"));
}
END_TEST

START_TEST(test_small_shapes) {
  static const int64_t sz[] = { 1, 2, 3, 5, 7, 13, 17, 31 };
  int bad = 0;
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++)
      for (int l = 0; l < 8; l += 3)
        bad += run_shape(g32, sz[i], sz[j], sz[l], 1);
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* Around every register tile of every family, and around the cache blocks the model picks. */
START_TEST(test_tile_edges) {
  int mr[4], nr[4], bad = 0;
  int nf = gemm_families(g32, mr, nr, 4);
  for (int f = 0; f < nf && f < 4; f++) {
    GemmForce fo = { .fam = f + 1 };
    gemm_force(g32, &fo);
    int64_t ms[] = { mr[f] - 1, mr[f], mr[f] + 1, 2 * mr[f] - 1, 2 * mr[f] + 1, 3 * mr[f] + 5 };
    int64_t ns[] = { nr[f] - 1, nr[f], nr[f] + 1, 2 * nr[f] + 3 };
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 4; j++)
        if (ms[i] > 0 && ns[j] > 0) bad += run_shape(g32, ms[i], ns[j], 37, 1);
  }
  gemm_force(g32, NULL);
  /* kc and mc as the model sets them for a large problem, then K and M around them */
  GemmArgs x = { .batch = 1, .m = 1000, .n = 300, .k = 3000, .a_sm = 3000, .a_sk = 1,
                 .b_sk = 300, .b_sn = 1, .c_sm = 300, .c_sn = 1 };
  GemmPlanInfo pi;
  ck_assert(gemm_plan_info(g32, &x, 1, &pi));
  ck_assert_int_gt(pi.kc, 0);
  ck_assert_int_gt(pi.mc, 0);
  for (int64_t d = -1; d <= 1; d++) {
    bad += run_shape(g32, 9, 40, pi.kc + d, 1);
    bad += run_shape(g32, 9, 40, 2 * pi.kc + d, 1);
  }
  GemmForce fo = { .pack_a = 1, .pack_b = 1, .kc = 16, .mc = 2 * mr[0], .nc = 2 * nr[0] };
  gemm_force(g32, &fo);
  for (int64_t d = -1; d <= 1; d++) {
    bad += run_shape(g32, 2 * mr[0] + d, 2 * nr[0] + d, 16 + d, 1);
    bad += run_shape(g32, 4 * mr[0] + d, 4 * nr[0] + d, 48 + d, 1);
  }
  gemm_force(g32, NULL);
  ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_layouts) {
  static const char L[] = "rcg";
  static const int64_t shapes[][3] = { { 1, 1, 1 }, { 7, 33, 19 }, { 33, 7, 64 }, { 50, 70, 3 } };
  int bad = 0;
  for (int s = 0; s < 4; s++)
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        for (int c = 0; c < 3; c++) {
          Case cs = { .batch = 1, .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                      .la = L[a], .lb = L[b], .lc = L[c], .threads = 1, .at_end = (a + b + c) & 1 };
          bad += run_case(g32, &cs);
        }
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* A problem one tile covers, B in place: gemm_run calls the kernel itself (no job, block or
 * pieces).  Each family, heights and widths at and below the tile, C = and C +=, A by rows,
 * by columns and with no unit stride, guard pages after each operand. */
/* cases(mr, nr) with each kept f32 family forced in turn (the rest of fo as given), then
 * no force: the failures. */
static int per_family(GemmForce fo, int (*cases)(int mr, int nr)) {
  int mr[4], nr[4], bad = 0;
  int nf = gemm_families(g32, mr, nr, 4);
  for (int f = 0; f < nf && f < 4; f++) {
    fo.fam = f + 1;
    gemm_force(g32, &fo);
    bad += cases(mr[f], nr[f]);
  }
  gemm_force(g32, NULL);
  return bad;
}

static int one_tile_cases(int mr, int nr) {
  int bad = 0;
  int64_t ms[] = { 1, 2, mr - 1, mr }, ns[] = { 1, nr - 1, nr }, ks[] = { 1, 17 };
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      for (int l = 0; l < 2; l++)
        for (int v = 0; v < 6; v++) {
          Case cs = { .batch = 1, .m = ms[i], .n = ns[j], .k = ks[l], .la = "rcg"[v % 3],
                      .lb = 'r', .lc = 'r', .acc = v >= 3, .threads = 1, .at_end = true };
          if (cs.m > 0) bad += run_case(g32, &cs);
        }
  return bad;
}

/* B packed from a layout whose rows are its unit stride (B = K^T, as attention's Q . K^T
 * has it): whole strips transposed W values of k at a time (packbt), a last strip cut short
 * element by element; strips of one, two and a cut one, k around the vector's width and
 * over the forced k block, each family, f32 and f64, B against a guard page. */
START_TEST(test_packed_bt) {
  int bad = 0;
  GemmKernels *gs[2] = { g32, g64 };
  for (int e = 0; e < 2; e++) {
    int mr[4], nr[4], W = e ? 8 : 16;
    int nf = gemm_families(gs[e], mr, nr, 4);
    for (int f = 0; f < nf && f < 4; f++) {
      gemm_force(gs[e], &(GemmForce){ .fam = f + 1, .pack_b = 1, .kc = 4 * W });
      int64_t ns[] = { nr[f], 2 * nr[f], 2 * nr[f] + 5, nr[f] - 1 }, ks[] = { 1, W - 1, W, W + 3, 5 * W + 7 };
      for (int j = 0; j < 4; j++)
        for (int l = 0; l < 5; l++) {
          Case cs = { .batch = 1 + (j + l) % 2, .m = mr[f] + 1, .n = ns[j], .k = ks[l], .la = 'r', .lb = 'c',
                      .lc = 'r', .acc = l % 2, .threads = 1 + (j == 1), .at_end = true };
          bad += run_case(gs[e], &cs);
        }
    }
    gemm_force(gs[e], NULL);
  }
  ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_one_tile) {
  ck_assert_int_eq(per_family((GemmForce){ .pack_a = 2, .pack_b = 2 }, one_tile_cases), 0);
}
END_TEST

/* The kernels fetch their C tile first where C's rows alias in L1 (4 KiB apart) or the
 * block's C outgrows L2 (beta's UK_PREFETCH_C bit, beside its "add" bit): C = and C +=
 * stay exact both ways, over one k block and several, for every family. */
static int prefetch_c_cases(int mr, int nr) {
  int bad = 0;
  for (int acc = 0; acc < 2; acc++)
    for (int t = 1; t <= 2; t++) {
      int64_t ks[] = { 1, 5, 700 };
      for (int l = 0; l < 3; l++) {
        Case cs = { .batch = 1, .m = 2 * mr + 3, .n = nr + 5, .k = ks[l], .la = 'r',
                    .lb = 'r', .lc = 'a', .acc = acc, .threads = t, .at_end = true };
        bad += run_case(g32, &cs);
      }
      Case big = { .batch = 1, .m = 600, .n = 509, .k = 3, .la = 'r', .lb = 'r', .lc = 'r',
                   .acc = acc, .threads = t, .at_end = false };   /* C of 1.2 MB */
      bad += run_case(g32, &big);
    }
  return bad;
}

START_TEST(test_prefetch_c) {
  ck_assert_int_eq(per_family((GemmForce){ 0 }, prefetch_c_cases), 0);
}
END_TEST

/* C larger than the model's last cache, written once (one k block, C =): the full tiles
 * stream it (UK_STREAM_C) where its rows are whole vectors apart and aligned, the rest as
 * before; C += and several k blocks (kc 7 forced) never stream.  Rows a multiple of 16
 * floats apart from the start of a page or flush against its end (aligned both ways) and
 * 3 more (not), k of 1 and 20, C = and C +=, 1 and 2 threads, every family: exact against
 * the reference, nothing written past C (guard pages either side). */
START_TEST(test_stream_c) {
  int mr[4], nr[4], nf = gemm_families(g32, mr, nr, 4), bad = 0;
  for (int f = 0; f < nf && f < 4; f++) {
    int64_t n = 16 * nr[f], m = (int64_t)(1.25 * (double)sched_last_cache_bytes(&hw) / (4.0 * (double)n)) + mr[f] + 1;
    for (int i = 0; i < 8; i++) {
      gemm_force(g32, &(GemmForce){ .fam = f + 1, .kc = i == 6 ? 7 : 0 });
      Case cs = { .batch = 1, .m = m, .n = n + (i == 2 || i == 5) * 3, .k = i % 3 ? 20 : 1, .la = 'r', .lb = 'r',
                  .lc = 'e', .acc = i == 4, .threads = 1 + i % 2, .at_end = i == 3 || i == 7 };
      bad += run_case(g32, &cs);
    }
  }
  gemm_force(g32, NULL);
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* A problem whose time is writing C (64 MB of it over k = 1, or twice the model's last cache
 * where that is larger): the model counts C's traffic, rows written a tile's width at a
 * time, so it takes the widest tile, and predicts at least the time to write C once at the
 * memory's whole bandwidth.  Only planned, never run. */
START_TEST(test_c_traffic) {
  int mr[4], nr[4], widest = 0;
  int nf = gemm_families(g32, mr, nr, 4);
  for (int f = 0; f < nf && f < 4; f++) widest = nr[f] > widest ? nr[f] : widest;
  int64_t n = 4096;
  while (4096.0 * n * 4 < 2.0 * hw.level[hw.nlevels - 2].bytes) n *= 2;
  GemmArgs x = { .batch = 1, .m = 4096, .n = n, .k = 1, .a_sm = 1, .a_sk = 1, .b_sk = n,
                 .b_sn = 1, .c_sm = n, .c_sn = 1 };
  GemmPlanInfo pi;
  ck_assert(gemm_plan_info(g32, &x, 2, &pi));
  ck_assert_msg(!pi.rows && !pi.dot && pi.nr == widest, "tile %dx%d, widest %d", pi.mr, pi.nr, widest);
  const HwLevel *mem = &hw.level[hw.nlevels - 1];
  double all = mem->total_gbs > 0 ? mem->total_gbs : 2 * mem->gbs;
  ck_assert_msg(pi.predicted_s >= 4096.0 * n * 4 / (all * 1e9), "%g s", pi.predicted_s);
}
END_TEST

/* A thread block whose operands all fit its core's own cache finds them there from one call
 * to the next: a 1-row product whose B is 1.5 times one core's L2 (within the last cache),
 * its columns split over 2 threads, has its memory priced under what each half would take
 * at the last cache's rate.  Where L2 is shared, or no faster than the next level, there
 * is nothing to tell apart.  The memory term, as :sched prints it: the whole prediction
 * holds the compute too, from rates measured at start-up, which a loaded host slows. */
START_TEST(test_own_cache) {
  int nc = hw_ncaches(&hw);
  if (nc < 3 || hw.level[1].shared_by > 1) return;
  int64_t n = (int64_t)sqrt(1.5 * (double)hw.level[1].bytes / 4) / 16 * 16;
  const HwLevel *last = &hw.level[nc - 1];
  if ((double)n * n * 4 > (double)last->bytes || hw.level[1].gbs < 1.5 * last->gbs) return;
  GemmArgs x = { .batch = 1, .m = 1, .n = n, .k = n, .a_sm = n, .a_sk = 1, .b_sk = n,
                 .b_sn = 1, .c_sm = n, .c_sn = 1 };
  double far = (double)n * n * 4 / 2 / (sched_threads_bw(&hw, nc - 1, 2) / 2), mem = 0;
  Buf out = { 0 };
  gemm_describe(g32, &x, 2, &out);
  const char *at = strstr(out.s, " and memory ");
  ck_assert_msg(at && sscanf(at, " and memory %lf", &mem) == 1, "%s", out.s);
  ck_assert_msg(mem * 1e-6 < far, "1 x %lld x %lld on 2 threads: memory %g s predicted, %g s at %s's rate\n%s",
                (long long)n, (long long)n, mem * 1e-6, far, last->name, out.s);
  buf_free(&out);
}
END_TEST

/* Between plans priced within PLAN_MARGIN of each other, one that splits the batch wins,
 * then one that splits M, then N (plan_weigh weighs them in that order): products of
 * narrow C, tall or batched, for each family with A and B in place, on 2 threads; a later
 * one only where priced faster by more than that. */
START_TEST(test_split_order) {
  int mr[4], nr[4];
  int nf = gemm_families(g32, mr, nr, 4);
  static const int64_t shapes[][3] = { { 1, 8192, 64 }, { 1, 2048, 64 }, { 1, 1024, 7 }, { 48, 128, 128 } };
  static const int grids[3][3] = { { 2, 1, 1 }, { 1, 2, 1 }, { 1, 1, 2 } };
  for (int f = 0; f < nf && f < 4; f++)
    for (int s = 0; s < 4; s++) {
      int64_t bt = shapes[s][0], m = shapes[s][1], n = 2 * nr[f], k = shapes[s][2];
      GemmArgs x = { .batch = bt, .m = m, .n = n, .k = k, .a_sb = m * k, .a_sm = k, .a_sk = 1, .b_sb = k * n,
                     .b_sk = n, .b_sn = 1, .c_sb = m * n, .c_sm = n, .c_sn = 1 };
      double t[3];
      int want = -1;
      for (int i = bt > 1 ? 0 : 1; i < 3; i++) {
        GemmForce fo = { .fam = f + 1, .pack_a = 2, .pack_b = 2, .tb = grids[i][0], .tm = grids[i][1],
                         .tn = grids[i][2] };
        gemm_force(g32, &fo);
        t[i] = gemm_predict(g32, &x, 2);
        if (want < 0 || t[i] < t[want] * (1 - PLAN_MARGIN)) want = i;
      }
      gemm_force(g32, &(GemmForce){ .fam = f + 1, .pack_a = 2, .pack_b = 2 });
      GemmPlanInfo pi;
      ck_assert(gemm_plan_info(g32, &x, 2, &pi));
      ck_assert_msg(pi.tb == grids[want][0] && pi.tm == grids[want][1] && pi.tn == grids[want][2],
                    "%lld x %lld x %lld x %lld on %dx%d: batch, M, N split %g, %g, %g s, chose %d x %d x %d",
                    (long long)bt, (long long)m, (long long)n, (long long)k, mr[f], nr[f], bt > 1 ? t[0] : 0, t[1], t[2],
                    pi.tb, pi.tm, pi.tn);
    }
  gemm_force(g32, NULL);
}
END_TEST

/* A in place whose rows are a multiple of 4 KiB apart puts a tile's rows in one L1 set,
 * beside the packed B panel's lines there: where the two pass the set's ways (from the
 * host's model and the plan's kc and tile), A in place is priced with its misses, well
 * above the same plan on rows 4 KiB + 64 bytes apart -- unless the family's full tile
 * takes such rows in two groups (uk_group_rows), which misses neither: priced as the rows
 * 4 KiB + 64 apart and A's bytes fetched from L2 again at each strip, a stall.  The
 * model's own choice packs A there (32 strips) where no family groups them, or where A is
 * packed cheaper than that stall. */
START_TEST(test_aliased_a) {
  int ways = hw_l1_ways(&hw);
  int mr[4], nr[4], nf = gemm_families(g32, mr, nr, 4), crowded = 0, grouped = 0;
  for (int f = 1; f <= nf && f <= 4; f++) {
    double per[2];
    GemmPlanInfo pi = {0};
    for (int i = 0; i < 2; i++) {
      int64_t k = 1024 + 16 * i;
      GemmArgs x = { .batch = 1, .m = 512, .n = 1024, .k = k, .a_sm = k, .a_sk = 1, .b_sk = 1024,
                     .b_sn = 1, .c_sm = 1024, .c_sn = 1 };
      GemmForce fo = { .fam = f, .pack_a = 2, .pack_b = 1 };
      gemm_force(g32, &fo);
      ck_assert(gemm_plan_info(g32, &x, 1, &pi) && !pi.pack_a && pi.pack_b);
      per[i] = gemm_predict(g32, &x, 1) / (double)k;
    }
    const Family *fam = &g32->fam[f - 1];
    if (uk_group_rows(&hw, fam->mr, fam->ksplit[fam->mr])) {
      grouped++;
      double stall = (double)((1024 + pi.nr - 1) / pi.nr) * 512 * 1024 * 4 / sched_level_bw(&hw, hw_cache_bytes(&hw, 1) / 2);
      ck_assert_msg(fabs(per[0] * 1024 / (per[1] * 1024 + stall) - 1) < 0.03,
                    "%dx%d grouped: rows 4 KiB apart %g s, 4 KiB + 64 %g s and %g s of A from L2 again",
                    pi.mr, pi.nr, per[0] * 1024, per[1] * 1024, stall);
      continue;
    }
    int64_t a_set = pi.mr * ((pi.kc * 4 + 4095) / 4096), panel = (pi.kc * pi.nr * 4 + 4095) / 4096;
    if (a_set + panel <= ways) continue;      /* this L1 holds both */
    crowded++;
    ck_assert_msg(per[0] > 1.2 * per[1], "%dx%d, kc %lld: rows 4 KiB apart %g s a step of k, 4 KiB + 64 %g",
                  pi.mr, pi.nr, (long long)pi.kc, per[0], per[1]);
  }
  gemm_force(g32, NULL);
  if (crowded + grouped < nf) return;
  GemmArgs x = { .batch = 1, .m = 512, .n = 1024, .k = 1024, .a_sm = 1024, .a_sk = 1, .b_sk = 1024,
                 .b_sn = 1, .c_sm = 1024, .c_sn = 1 };
  GemmPlanInfo pi;
  ck_assert(gemm_plan_info(g32, &x, 1, &pi) && pi.pack_a);
}
END_TEST

/* Tiles that take A's rows in groups (UK_GROUP_A: rows in place a multiple of 4 KiB
 * apart) against the reference: every family with A in place and B either way, rows
 * around the tile's height and its groups', k below a line's steps, at a line's, and past
 * it by a remainder (the main loop's), a few k blocks (kc 7 forced: blocks that end inside
 * a line), C = and C +=, one and two threads, f32 and f64 (rows 8 KiB apart). */
START_TEST(test_grouped_a) {
  int bad = 0, runs = 0;
  static const int64_t ms[] = { 1, 7, 8, 13, 14, 15, 29 }, ns[] = { 17, 32, 33 }, ks[] = { 5, 16, 37, 300 };
  for (int e = 0; e < 2; e++) {
    GemmKernels *g = e ? g64 : g32;
    int mr[4], nr[4], nf = gemm_families(g, mr, nr, 4);
    for (int f = 1; f <= nf && f <= 4; f++)
      for (int pb = 1; pb <= 2; pb++)
        for (int mi = 0; mi < 7; mi++)
          for (int ki = 0; ki < 4; ki++) {
            int ni = (mi + ki) % 3;
            bool blocks = (mi + ki + pb) % 4 == 0;
            gemm_force(g, &(GemmForce){ .fam = f, .pack_a = 2, .pack_b = pb, .kc = blocks ? 7 : 0 });
            Case cs = { .batch = 1, .m = ms[mi], .n = ns[ni], .k = ks[ki], .la = 'a', .lb = 'r', .lc = 'r',
                        .acc = (mi + ki) % 2, .threads = 1 + (mi + pb) % 2, .at_end = ki % 2 };
            bad += run_case(g, &cs);
            GemmPlanInfo pi;
            ck_assert(gemm_last_plan(g, &pi));
            runs += !pi.rows && !pi.dot && !pi.pack_a;
          }
    gemm_force(g, NULL);
  }
  ck_assert_int_gt(runs, 0);
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* dyn --calibrate's sustained rate sets the level of the model's kernels' rates, either
 * way: half the rate calibrated at compile time doubles the compute of a product that fits
 * the caches (its prediction 1.5 to 2 times what it was), twice it halves it (a start-up
 * in a slow spell), and the same rate twice is applied once; a rate over four times the
 * one measured, or under a quarter of it (no clock's), changes nothing.  Plans remembered
 * at the old rates are forgotten.  Only planned, never run. */
START_TEST(test_sustained_rate) {
  char err[256];
  GemmKernels *g = gemm_compile(DYN_F32, &hw, err, sizeof err);
  ck_assert_msg(g != NULL, "%s", err);
  GemmArgs x = { .batch = 1, .m = 384, .n = 384, .k = 384, .a_sm = 384, .a_sk = 1, .b_sk = 384,
                 .b_sn = 1, .c_sm = 384, .c_sn = 1 };
  double burst = gemm_core_gflops(g), t0 = gemm_predict(g, &x, 1);
  ck_assert(burst > 0 && t0 > 0);
  gemm_sustain(g, burst * 8);
  ck_assert(gemm_predict(g, &x, 1) == t0 && gemm_core_gflops(g) == burst);
  gemm_sustain(g, burst / 8);
  ck_assert(gemm_predict(g, &x, 1) == t0 && gemm_core_gflops(g) == burst);
  gemm_sustain(g, burst / 2);
  double t1 = gemm_predict(g, &x, 1);
  ck_assert_msg(fabs(gemm_core_gflops(g) / (burst / 2) - 1) < 1e-9, "%g against %g", gemm_core_gflops(g), burst / 2);
  ck_assert_msg(t1 >= 1.5 * t0 && t1 <= 2.0 * t0 * 1.001, "%g s, was %g s", t1, t0);
  gemm_sustain(g, burst / 2);
  ck_assert(gemm_predict(g, &x, 1) == t1);
  /* the bounds are the measured rate's, not the last level's: 3x what was measured goes */
  gemm_sustain(g, burst * 3);
  double t2 = gemm_predict(g, &x, 1);
  ck_assert_msg(fabs(gemm_core_gflops(g) / (burst * 3) - 1) < 1e-9, "%g against %g", gemm_core_gflops(g), burst * 3);
  ck_assert_msg(t2 >= t0 / 3 * 0.999 && t2 <= t0 / 1.5, "%g s, was %g s", t2, t0);
  gemm_free(g);
}
END_TEST

/* The split of a tile's edge rows into heights, on start-up rates drawn at random up to
 * two decades either way of the measured ones (a loaded machine's): every row count gets a
 * split of at most MAX_PIECES pieces of emitted heights that covers its rows.  (Rates that
 * made short pieces cheap left some row counts without a split of few enough pieces, and
 * the planner never finished spelling one out: a crash at start-up.) */
START_TEST(test_edge_splits) {
  ck_assert_ptr_nonnull(g32);
  unsigned seed = 7;
  for (int fi = 0; fi < g32->nfam; fi++)
    for (int round = 0; round < 200; round++) {
      Family f = g32->fam[fi];
      for (int h = 1; h <= f.mr; h++)
        if (f.has[h]) f.ksec[h] = g32->fam[fi].ksec[h] * pow(10, 4.0 * rand_r(&seed) / RAND_MAX - 2);
      gemm_plan_edges(g32, &f);
      for (int t = 0; t < 2; t++)
        for (int r = 1; r < 2 * f.mr; r++) {
          int n = f.dec_n[t][r], covered = 0;
          ck_assert_msg(n >= 1 && n <= MAX_PIECES, "family %d, %d rows: %d pieces", fi, r, n);
          for (int i = 0; i < n; i++) {
            int h = f.dec[t][r][i];
            ck_assert_msg(h >= 1 && h <= f.mr && f.has[h], "family %d, %d rows: a piece of %d", fi, r, h);
            covered += h < r - covered ? h : r - covered;
          }
          ck_assert_msg(covered == r, "family %d: %d rows split into pieces covering %d", fi, r, covered);
          ck_assert_msg(f.dec_sec[t][r] > 0 && f.dec_sec[t][r] < 1, "family %d, %d rows: %g s", fi, r, f.dec_sec[t][r]);
        }
    }
}
END_TEST

/* The shortest family has a kernel of every height (gemm_enumerate_tiles: a C of 3, 5 or 7
 * rows on a tile of its own height), and each computes its rows exactly: called directly,
 * h rows of A in place against a strip of B, full and cut at the n-edge, C = and C +=, k
 * past the accumulator sets' unroll; the rows after h never written. */
START_TEST(test_every_height) {
  const Family *f = &g32->fam[0];
  for (int fi = 1; fi < g32->nfam; fi++)
    if (g32->fam[fi].mr < f->mr) f = &g32->fam[fi];
  enum { K = 37 };
  int64_t nr = f->nr, crs = nr + 5;
  float *a = malloc(sizeof(float) * (MAX_MR + 1) * K), *b = malloc(sizeof(float) * K * nr),
        *c = malloc(sizeof(float) * (MAX_MR + 1) * crs);
  for (int i = 0; i < (MAX_MR + 1) * K; i++) a[i] = (float)rnd();
  for (int i = 0; i < K * nr; i++) b[i] = (float)rnd();
  int bad = 0;
  for (int h = 1; h <= f->mr; h++) {
    ck_assert_msg(f->has[h] && f->uk[h] && f->ukf[h], "%dx%d: no kernel of height %d", f->mr, (int)nr, h);
    for (int cut = 0; cut < 2; cut++)
      for (int beta = 0; beta < 2; beta++) {
        int64_t w = cut ? nr - 3 : nr;
        for (int i = 0; i < (MAX_MR + 1) * crs; i++) c[i] = 0.5f;
        tile_call(g32, f, h, h, w, K, a, K, 1, b, nr, c, crs, beta, NULL);
        for (int i = 0; i <= h && i < MAX_MR + 1; i++)
          for (int j = 0; j < crs; j++) {
            double want = 0.5, size = 0.5;
            if (i < h && j < w) {
              want = beta ? 0.5 : 0;
              for (int l = 0; l < K; l++) want += (double)a[i * K + l] * b[l * nr + j], size += fabs(a[i * K + l] * b[l * nr + j]);
            }
            if (fabs(c[i * crs + j] - want) > 1e-5 * size) {
              if (bad++ < 5) fprintf(stderr, "height %d, w %lld, beta %d: C[%d, %d] = %g, want %g\n", h, (long long)w, beta, i, j, c[i * crs + j], want);
            }
          }
      }
  }
  free(a);
  free(b);
  free(c);
  ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_batched_accumulate) {
  int bad = 0;
  for (int acc = 0; acc < 2; acc++)
    for (int bc = 0; bc < 2; bc++)
      for (int t = 1; t <= 2; t++) {
        Case cs = { .batch = 3, .m = 17, .n = 45, .k = 29, .la = 'r', .lb = 'c', .lc = 'r',
                    .acc = acc, .bcast_a = bc, .threads = t, .at_end = true };
        bad += run_case(g32, &cs);
        cs.batch = 5; cs.m = 1; cs.n = 64; cs.k = 64; cs.lb = 'r';
        bad += run_case(g32, &cs);
      }
  ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_f64) {
  int bad = 0;
  static const int64_t shapes[][3] = { { 1, 1, 1 }, { 3, 1000, 50 }, { 13, 11, 17 },
                                       { 129, 129, 129 }, { 40, 9, 300 } };
  for (int s = 0; s < 5; s++)
    for (int t = 1; t <= 2; t++) bad += run_shape(g64, shapes[s][0], shapes[s][1], shapes[s][2], t);
  Case cs = { .batch = 2, .m = 9, .n = 17, .k = 10, .la = 'c', .lb = 'g', .lc = 'c',
              .acc = true, .threads = 2 };
  bad += run_case(g64, &cs);
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* The benchmark's awkward shapes and a few larger ones, on two threads. */
START_TEST(test_two_threads) {
  static const int64_t shapes[][3] = { { 1, 768, 768 }, { 7, 768, 77 }, { 33, 200, 768 },
                                       { 13, 11, 17 }, { 3, 1000, 100 }, { 129, 129, 129 },
                                       { 255, 300, 200 } };
  int bad = 0;
  for (int s = 0; s < 7; s++) bad += run_shape(g32, shapes[s][0], shapes[s][1], shapes[s][2], 2);
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* B packed by the first tile of each strip as it computes (the model's "packed by each
 * strip's first tile"): for each family, rows around one and two tiles (the first piece
 * full or not), five tiles (the full ones after the first fetch the next strip, see
 * emit_uk) and several row blocks (mc forced: later blocks read the panel the first
 * wrote), widths around a strip (a masked last strip), k around the forced k block (the
 * accumulator-split remainder, several k blocks), A packed and in place, C = and C +=,
 * C with unit column stride and not (a tile written through a buffer), one and two
 * threads, f32 and f64; the plan that ran says whether it fused, and must whenever its
 * first piece is a full tile. */
static int fused_cases(GemmKernels *g, int *fused) {
  int mr[4], nr[4], bad = 0;
  int nf = gemm_families(g, mr, nr, 4);
  for (int f = 0; f < nf && f < 4; f++) {
    int64_t ms[] = { mr[f] - 1, mr[f], mr[f] + 1, 2 * mr[f], 2 * mr[f] + 1, 3 * mr[f] + 5, 5 * mr[f] };
    int64_t ns[] = { nr[f] - 1, nr[f], nr[f] + 1, 3 * nr[f] + 7 };
    int64_t ks[] = { 1, 15, 16, 17, 35 };
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 4; j++)
        for (int l = 0; l < 5; l++) {
          int v = i + j + l;
          GemmForce fo = { .fam = f + 1, .pack_a = 1 + v % 2, .pack_b = 1, .kc = 16,
                           .mc = v % 3 ? 0 : 2 * mr[f], .tn = 1 + (j == 3 && v % 2) };
          gemm_force(g, &fo);
          Case cs = { .batch = 1 + (v % 5 == 0), .m = ms[i], .n = ns[j], .k = ks[l], .la = "rc"[v % 2],
                      .lb = 'r', .lc = "rg"[(v / 2) % 2], .acc = (v / 3) % 2, .threads = 1 + (v % 4 == 1),
                      .at_end = v & 1 };
          if (cs.m < 1) continue;
          bad += run_case(g, &cs);
          GemmPlanInfo pi;
          ck_assert(gemm_last_plan(g, &pi));
          int64_t rows = fo.mc ? imin64(fo.mc, cs.m) : cs.m;
          bool full = rows / mr[f] > (rows % mr[f] ? 1 : 0);
          if (!pi.dot && !pi.rows && pi.tm == 1) {
            ck_assert_msg(pi.pack_b_fused == full, "%lld x %lld x %lld on %dx%d: fused %d", (long long)cs.m,
                          (long long)cs.n, (long long)cs.k, mr[f], nr[f], pi.pack_b_fused);
            *fused += pi.pack_b_fused;
          }
        }
  }
  gemm_force(g, NULL);
  return bad;
}

START_TEST(test_fused_packing) {
  int fused32 = 0, fused64 = 0;
  ck_assert_int_eq(fused_cases(g32, &fused32), 0);
  ck_assert_int_eq(fused_cases(g64, &fused64), 0);
  ck_assert_int_gt(fused32, 20);
  ck_assert_int_gt(fused64, 20);
}
END_TEST

/* A B far larger than any last cache, read by a few rows of A: in place, each strip's row
 * pieces would come from memory with nothing fetching ahead of them (50 x 2000 x 3000 ran
 * 2x slower so), so the model packs it.  Only the plan is asked for: nothing is allocated. */
START_TEST(test_far_b_packed) {
  GemmArgs x = { .batch = 1, .m = 50, .n = 4000, .k = 20000, .a_sm = 20000, .a_sk = 1,
                 .b_sk = 4000, .b_sn = 1, .c_sm = 4000, .c_sn = 1 };
  for (int t = 1; t <= 2; t++) {
    GemmPlanInfo pi;
    ck_assert(gemm_plan_info(g32, &x, t, &pi));
    ck_assert_msg(pi.pack_b && !pi.rows && !pi.dot, "%d threads: %dx%d pack_b %d", t, pi.mr, pi.nr, pi.pack_b);
  }
}
END_TEST

/* A narrow B over a long k is read in place: packed, it would become panels nr columns wide,
 * mostly zeros (2 x 3 x 4096: 48 KB of B, a 512 KB panel; the model charged B's bytes, took
 * packing for 4 us, and it ran in 12 against 3 in place). */
START_TEST(test_narrow_b_in_place) {
  static const int64_t shapes[][3] = { { 2, 3, 4096 }, { 2, 8, 4096 }, { 5, 8, 4096 } };
  for (int i = 0; i < 3; i++)
    for (int t = 1; t <= 2; t++) {
      int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
      GemmArgs x = { .batch = 1, .m = m, .n = n, .k = k, .a_sm = k, .a_sk = 1, .b_sk = n, .b_sn = 1,
                     .c_sm = n, .c_sn = 1 };
      GemmPlanInfo pi;
      ck_assert(gemm_plan_info(g32, &x, t, &pi));
      ck_assert_msg(!pi.pack_b || pi.dot || pi.rows, "%lldx%lldx%lld on %d threads: %dx%d tiles pack B",
                    (long long)m, (long long)n, (long long)k, t, pi.mr, pi.nr);
    }
}
END_TEST

/* B read in place from an address that is not on a line (a caller's array 16 bytes past
 * one) makes its vectors straddle two lines: the model charges it as it does rows a
 * fraction of a line apart, and the plan cache keeps the two apart, so that an aligned call
 * does not hand its plan to a misaligned one of the same shape (or the reverse). */
START_TEST(test_misaligned_b) {
  int64_t m = 24, n = 256, k = 64;          /* rows of B a whole number of lines apart */
  float *a = aligned_alloc(64, (size_t)(m * k) * 4), *b = aligned_alloc(64, (size_t)(k * n + 16) * 4),
        *c = aligned_alloc(64, (size_t)(m * n) * 4);
  for (int64_t i = 0; i < m * k; i++) a[i] = (float)rnd();
  for (int64_t i = 0; i < k * n + 16; i++) b[i] = (float)rnd();
  GemmForce fo = { .fam = 1, .pack_a = 2, .pack_b = 2 };
  gemm_force(g32, &fo);
  double want[2];
  char err[256];
  for (int r = 0; r < 2; r++)
    for (int off = 0; off < 2; off++) {      /* in turn, so that a cached plan would be reused */
      GemmArgs x = { .batch = 1, .m = m, .n = n, .k = k, .a = a, .a_sm = k, .a_sk = 1, .b = b + 4 * off,
                     .b_sk = n, .b_sn = 1, .c = c, .c_sm = n, .c_sn = 1 };
      GemmPlanInfo pi, ran;
      ck_assert(gemm_plan_info(g32, &x, 1, &pi));
      ck_assert(!pi.pack_b);
      want[off] = pi.predicted_s;
      ck_assert_msg(gemm_run(g32, &x, NULL, err, sizeof err), "%s", err);
      ck_assert(gemm_last_plan(g32, &ran));
      ck_assert_msg(ran.predicted_s == pi.predicted_s, "B %s a line: ran the plan of %.3g us, its own is %.3g us",
                    off ? "16 bytes past" : "on", ran.predicted_s * 1e6, pi.predicted_s * 1e6);
      for (int64_t i = 0; i < m; i++)    /* and it is right: one row of C against a plain sum */
        if (i % 7 == 0)
          for (int64_t j = 0; j < n; j++) {
            const float *bo = b + 4 * off;
            double s = 0, mag = 0;
            for (int64_t q = 0; q < k; q++) {
              s += (double)a[i * k + q] * bo[q * n + j];
              mag += fabs((double)a[i * k + q] * bo[q * n + j]);
            }
            ck_assert_msg(fabs(c[i * n + j] - s) <= 1e-6 * mag + 1e-30, "C[%lld, %lld]", (long long)i, (long long)j);
          }
    }
  ck_assert_msg(want[1] > want[0] * 1.01, "B in place 16 bytes past a line: %.3g us, on one: %.3g us", want[1] * 1e6,
                want[0] * 1e6);
  gemm_force(g32, NULL);
  free(a), free(b), free(c);
}
END_TEST

/* The packing tile asks for every line that B's row PACK_AHEAD rows ahead touches, wherever
 * it starts (gemm_ahead_lines: rows off the lines touch one more); the other kernels for no
 * more lines than a row's bytes fill.  Every family, f32 and f64, the requests as the
 * kernels make them (gemm_ahead_elem), rows from every start within a line, seven strides. */
START_TEST(test_ahead_lines) {
  for (int e = 0; e < 2; e++) {
    GemmKernels *g = e ? g64 : g32;
    int es = e ? 8 : 4, mr[4], nr[4], nf = gemm_families(g, mr, nr, 4);
    ck_assert_int_gt(nf, 0);
    for (int f = 0; f < nf && f < 4; f++) {
      int bytes = nr[f] * es;
      ck_assert_int_eq(gemm_ahead_lines(bytes, false), (bytes + 63) / 64);
      const int64_t strides[] = { bytes, bytes + es, 2704, 4096, 4096 + es, 1000 * es, 1001 * es };
      for (int s = 0; s < 64; s += es)
        for (int si = 0; si < 7; si++)
          for (int64_t r = 0; r < 16; r++) {
            int64_t start = s + r * strides[si], first = start / 64, last = (start + bytes - 1) / 64;
            bool got[16] = { false };
            ck_assert(last - first < 16);
            for (int c = 0; c < gemm_ahead_lines(bytes, true); c++) {
              int64_t line = (start + gemm_ahead_elem(c, nr[f], es) * es) / 64;
              ck_assert(line >= first && line <= last);
              got[line - first] = true;
            }
            for (int64_t l = first; l <= last; l++)
              ck_assert_msg(got[l - first], "%dx%d %s: a row %lld bytes past a line: line %d of its %d not asked for",
                            mr[f], nr[f], e ? "f64" : "f32", (long long)(start % 64), (int)(l - first),
                            (int)(last - first + 1));
          }
    }
  }
}
END_TEST

/* Every plan the model could choose, forced: families, packing, grids, odd blocks. */
START_TEST(test_forced_plans) {
  int mr[4], nr[4], bad = 0;
  int nf = gemm_families(g32, mr, nr, 4);
  static const int grids[][3] = { { 1, 1, 1 }, { 1, 1, 2 }, { 1, 2, 1 }, { 2, 1, 1 }, { 1, 3, 2 } };
  for (int f = 1; f <= nf; f++)
    for (int pa = 1; pa <= 2; pa++)
      for (int pb = 1; pb <= 2; pb++)
        for (int gi = 0; gi < 5; gi++) {
          GemmForce fo = { .fam = f, .pack_a = pa, .pack_b = pb, .tb = grids[gi][0],
                           .tm = grids[gi][1], .tn = grids[gi][2], .kc = gi == 4 ? 7 : 0,
                           .mc = gi == 4 ? 5 : 0, .nc = gi == 4 ? 19 : 0 };
          gemm_force(g32, &fo);
          Case cs = { .batch = 2, .m = 23, .n = 41, .k = 30, .la = 'r', .lb = 'r', .lc = 'r',
                      .threads = 2, .at_end = gi & 1 };
          bad += run_case(g32, &cs);
          /* the plan that ran is the one forced, not the one before it on this shape */
          GemmPlanInfo pi;
          ck_assert(gemm_last_plan(g32, &pi));
          ck_assert_msg(pi.mr == mr[f - 1] && pi.nr == nr[f - 1] && pi.pack_a == (pa == 1) &&
                        pi.pack_b == (pb == 1) && pi.tb == grids[gi][0] && pi.tm == grids[gi][1] &&
                        pi.tn == grids[gi][2], "forced %d %d %d grid %d: ran %dx%d %d %d %d %d %d",
                        f, pa, pb, gi, pi.mr, pi.nr, pi.pack_a, pi.pack_b, pi.tb, pi.tm, pi.tn);
          cs.la = 'c';
          cs.lb = 'g';
          bad += run_case(g32, &cs);
        }
  gemm_force(g32, NULL);
  GemmPlanInfo none;
  ck_assert(!gemm_last_plan(g32, &none));            /* a new forcing forgets the last plan */
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* The model's description of x on two threads contains each of the strings want. */
static void expect_plan(const GemmArgs *x, const char *want1, const char *want2) {
  Buf d = { 0 };
  gemm_describe(g32, x, 2, &d);
  ck_assert_msg(strstr(d.s, want1), "%s", d.s);
  if (want2) ck_assert_msg(strstr(d.s, want2), "%s", d.s);
  buf_free(&d);
}

/* C's last few columns apart, as inner products (plan_choose): shapes one to DOT_MAXN (16)
 * columns past a multiple of each family's nr, in every layout the split allows (A's rows
 * contiguous after C is made row-major: with a column-major C, B's columns) and some it
 * does not, C = and C +=, a batch, one and two threads, f32 and f64.  Each runs three
 * times: split wherever the layout allows (forced), never split (forced), and as the model
 * chooses; the forced split puts apart the columns past some family's multiple of nr
 * (unless the whole is inner products or rows already).  Whether the model splits one of
 * these depends on the kernels' rates calibrated at start-up (2048 x 33 x 513 went apart
 * on one run and to whole 9x48 tiles on the next), so the model's own choice is held to a
 * model that is never run (test_foreign_model). */
START_TEST(test_edge_columns) {
  int split = 0, splittable = 0, bad = 0;
  for (int gi = 0; gi < 2; gi++) {
    GemmKernels *g = gi ? g64 : g32;
    int mr[4], nr[4];
    int nf = gemm_families(g, mr, nr, 4);
    for (int f = 0; f < nf && f < 4; f++)
      for (int e = 1; e <= 16; e += e < 2 ? 1 : 7) {        /* 1, 2, 9, 16 */
        int v = f + e;
        Case cs = { .batch = 1 + (v % 3 == 0), .m = 97 + 60 * (v % 2), .n = nr[f] * (1 + v % 2) + e,
                    .k = 100 + 31 * (v % 3), .la = v % 5 == 4 ? 'c' : 'r', .lb = "rc"[v % 2],
                    .lc = v % 4 == 3 ? 'c' : 'r', .acc = v % 2, .threads = 1 + (v % 4 != 1),
                    .at_end = v & 1 };
        /* as gemm_normalise sees it: a column-major C swaps the operands */
        bool swap = cs.lc == 'c';
        int64_t n = swap ? cs.m : cs.n;
        bool unit_k = swap ? cs.lb == 'c' : cs.la == 'r';
        for (int q = 0; q < 3; q++) {
          GemmForce fo = { .edge = q == 0 ? 1 : 2 };
          gemm_force(g, q < 2 ? &fo : NULL);
          bad += run_case(g, &cs);
          GemmPlanInfo pi;
          ck_assert(gemm_last_plan(g, &pi));
          /* fits: the columns apart are those past some family's multiple of nr; can: some
           * family leaves 1 to 16 past one */
          bool fits = false, can = false;
          for (int h = 0; h < nf && h < 4; h++) {
            int64_t past = n % nr[h];
            fits = fits || (past == pi.edge && past != n);
            can = can || (past >= 1 && past <= 16 && past != n);
          }
          ck_assert_msg(!pi.edge || (q != 1 && unit_k && pi.edge <= 16 && fits && !pi.rows &&
                                     (!pi.dot || n - pi.edge <= 16)),
                        "%s %lld x %lld x %lld, layouts %c%c%c, force %d: %lld columns apart",
                        gi ? "f64" : "f32", (long long)cs.m, (long long)cs.n, (long long)cs.k,
                        cs.la, cs.lb, cs.lc, q, (long long)pi.edge);
          can = can && unit_k && !(pi.dot && pi.edge == 0) && !pi.rows;
          if (q == 0) {
            splittable += can;
            split += pi.edge > 0;
            ck_assert_msg(!can || pi.edge, "%s %lld x %lld x %lld, layouts %c%c%c: not split",
                          gi ? "f64" : "f32", (long long)cs.m, (long long)cs.n, (long long)cs.k,
                          cs.la, cs.lb, cs.lc);
          }
        }
      }
  }
  ck_assert_int_eq(bad, 0);
  ck_assert_int_eq(split, splittable);
  ck_assert_int_gt(split, 4);                  /* the cases above reach the split */
}
END_TEST

/* The row-streaming kernel (C of 1 to 4 rows), forced: widths around a vector (W = 16 f32
 * lanes on AVX-512, 8 on AVX2; 8 and 4 for f64), reductions around its 4-row step, A in
 * both layouts, C = and C +=, split over columns and over the batch. */
START_TEST(test_rows) {
  static const int64_t ns[] = { 1, 7, 8, 9, 15, 16, 17, 35 }, ks[] = { 1, 3, 4, 5, 9 };
  static const int grids[][4] = { { 1, 1, 1, 1 }, { 1, 1, 2, 2 }, { 3, 2, 1, 2 } };  /* batch, tb, tn, threads */
  int bad = 0;
  for (int gi = 0; gi < 2; gi++) {
    GemmKernels *g = gi ? g64 : g32;
    for (int q = 0; q < 3; q++) {
      GemmForce fo = { .rows = 1, .tb = grids[q][1], .tm = 1, .tn = grids[q][2] };
      gemm_force(g, &fo);
      for (int64_t m = 1; m <= 4; m++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
          for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
            for (int v = 0; v < 4; v++) {
              Case cs = { .batch = grids[q][0], .m = m, .n = ns[ni], .k = ks[ki],
                          .la = v & 1 ? 'c' : 'r', .lb = 'r', .lc = 'r', .acc = v >> 1,
                          .threads = grids[q][3], .at_end = (ni + ki) & 1 };
              bad += run_case(g, &cs);
              GemmPlanInfo pi;                /* and the row-streaming kernel is what ran */
              ck_assert(gemm_last_plan(g, &pi));
              ck_assert_msg(pi.rows && pi.mr == 0 && pi.tn == grids[q][2],
                            "m %lld n %lld k %lld layout %d: not row streaming", (long long)m,
                            (long long)ns[ni], (long long)ks[ki], v);
            }
    }
    gemm_force(g, NULL);
  }
  ck_assert_int_eq(bad, 0);
  /* the model takes it for a few rows of C and a B from memory, not for a B in cache */
  GemmArgs big = { .batch = 1, .m = 1, .n = 65536, .k = 4096, .a_sm = 4096, .a_sk = 1,
                   .b_sk = 65536, .b_sn = 1, .c_sm = 65536, .c_sn = 1 };
  expect_plan(&big, "chosen: row streaming: the 1 row of C in L1", NULL);
  GemmArgs small = { .batch = 1, .m = 3, .n = 256, .k = 256, .a_sm = 256, .a_sk = 1,
                     .b_sk = 256, .b_sn = 1, .c_sm = 256, .c_sn = 1 };
  expect_plan(&small, "chosen: tile", NULL);
}
END_TEST

/* The inner-product kernels (C of 1 to 16 columns), forced: heights around each tile's
 * (8 and 6 rows on AVX-512) and one to four strips of columns, reductions around a vector
 * and around a forced k block (several blocks, a masked tail in each), B packed (row-major,
 * general) and in place (column-major: B^T's rows contiguous), C row-major and with no unit
 * stride (written in place through both; a column-major C is computed transposed), C = and
 * C +=, the rows over two threads and the batch over three. */
START_TEST(test_dot) {
  static const int64_t ms[] = { 1, 2, 5, 7, 8, 9, 13, 17 }, ks[] = { 1, 15, 16, 17, 100 };
  static const char lay[] = "rcg";
  int bad = 0;
  for (int gi = 0; gi < 2; gi++) {
    GemmKernels *g = gi ? g64 : g32;
    for (int q = 0; q < 3; q++) {
      GemmForce fo = { .dot = 1, .tm = q == 1 ? 2 : 1, .tb = q == 2 ? 3 : 1, .kc = q == 0 ? 0 : 32 };
      gemm_force(g, &fo);
      for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (int64_t n = 1; n <= 16; n += 1 + (n >= 8))
          for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            int v = (int)(mi + n + ki + q);
            Case cs = { .batch = q == 2 ? 3 : 1, .m = ms[mi], .n = n, .k = ks[ki], .la = 'r',
                        .lb = lay[v % 3], .lc = lay[(v / 3) % 2 * 2], .acc = (v / 6) & 1,
                        .threads = q == 0 ? 1 : 2, .at_end = v & 1 };
            bad += run_case(g, &cs);
            GemmPlanInfo pi;                   /* and the inner products are what ran */
            ck_assert(gemm_last_plan(g, &pi));
            int64_t ns = (n + 3) / 4;          /* strips of at most 4, widest first */
            ck_assert_msg(pi.dot && pi.nr == (n + ns - 1) / ns,
                          "m %lld n %lld k %lld: not inner products (strip %d)", (long long)ms[mi],
                          (long long)n, (long long)ks[ki], pi.nr);
          }
    }
    gemm_force(g, NULL);
  }
  ck_assert_int_eq(bad, 0);
  /* the model takes them for a matrix-vector product, not for a C of many columns */
  GemmArgs mv = { .batch = 1, .m = 4096, .n = 1, .k = 4096, .a_sm = 4096, .a_sk = 1,
                  .b_sk = 1, .b_sn = 1, .c_sm = 1, .c_sn = 1 };
  GemmPlanInfo pi;
  ck_assert(gemm_plan_info(g32, &mv, 2, &pi) && pi.dot && pi.tm * pi.tk == 2);
  double rows_ms, dots_ms;                   /* weighing them compiled them, and said how long */
  gemm_later_ms(g32, &rows_ms, &dots_ms);
  ck_assert(dots_ms > 0);
  GemmArgs sq = { .batch = 1, .m = 512, .n = 512, .k = 512, .a_sm = 512, .a_sk = 1,
                  .b_sk = 512, .b_sn = 1, .c_sm = 512, .c_sn = 1 };
  ck_assert(gemm_plan_info(g32, &sq, 2, &pi) && !pi.dot);
}
END_TEST

/* The families past the eager ones are compiled the first time a problem's columns fit one
 * of them in fewer whole strips than the eager families: not for columns that are a
 * multiple of every eager width, then for the later family's own width; and its tiles then
 * compute right, forced (fails if weighing a plan compiles it regardless, or never). */
START_TEST(test_later_family) {
  char err[256];
  GemmKernels *g = gemm_compile(DYN_F32, &hw, err, sizeof err);
  ck_assert_msg(g != NULL, "%s", err);
  int mr[4], nr[4], nf = gemm_families(g, mr, nr, 4);
  ck_assert_int_eq(atomic_load(&g->famx_state), 0);
  if (nf > EAGER_FAM) {
    int64_t all = 1;
    for (int f = 0; f < EAGER_FAM; f++) all = all / gcd64(all, nr[f]) * nr[f];
    GemmArgs x = { .batch = 1, .m = 300, .n = 2 * all, .k = 200, .a_sm = 200, .a_sk = 1,
                   .b_sk = 2 * all, .b_sn = 1, .c_sm = 2 * all, .c_sn = 1 };
    GemmPlanInfo pi;
    ck_assert(gemm_plan_info(g, &x, 2, &pi) && pi.nr != nr[EAGER_FAM]);
    ck_assert_int_eq(atomic_load(&g->famx_state), 0);
    bool fits = true;                        /* its width, where the eager ones take more */
    for (int f = 0; f < EAGER_FAM; f++) fits = fits && nr[EAGER_FAM] % nr[f] != 0;
    if (fits) {
      x.n = x.b_sk = x.c_sm = nr[EAGER_FAM];
      ck_assert(gemm_plan_info(g, &x, 2, &pi));
      ck_assert_int_eq(atomic_load(&g->famx_state), 1);
    }
    int bad = 0;
    gemm_force(g, &(GemmForce){ .fam = EAGER_FAM + 1 });
    for (int64_t n = nr[EAGER_FAM] - 1; n <= nr[EAGER_FAM] + 1; n++) {
      Case cs = { .batch = 1, .m = 3 * mr[EAGER_FAM] + 2, .n = n, .k = 77, .la = 'r', .lb = 'r', .lc = 'r',
                  .threads = 2 };
      bad += run_case(g, &cs);
      ck_assert(gemm_last_plan(g, &pi) && pi.nr == nr[EAGER_FAM]);
    }
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(atomic_load(&g->famx_state), 1);
  }
  gemm_free(g);
}
END_TEST

/* The plan cache keeps PLAN_WAYS problems whose keys share a set, and replaces the least
 * recently used: problems run in turn are weighed once each (fails direct-mapped, where
 * two of them evict each other at every call, or with the most recent replaced). */
START_TEST(test_plan_cache) {
  enum { K = 16, N = 24, MMAX = 4000 };
  float *A = calloc((size_t)MMAX * K, sizeof *A), *B = calloc((size_t)K * N, sizeof *B),
        *C = calloc((size_t)MMAX * N, sizeof *C);
  int64_t ms[PLAN_WAYS + 1];
  int found = 0;
  unsigned want = 0;
  char err[128];
  for (int64_t m = 1; m <= MMAX && found <= PLAN_WAYS; m++) {
    GemmArgs x = { .batch = 1, .m = m, .n = N, .k = K, .a = A, .a_sm = K, .a_sk = 1, .b = B, .b_sk = N, .b_sn = 1,
                   .c = C, .c_sm = N, .c_sn = 1 };
    Prob p;
    int64_t key[KEY_LEN];
    ck_assert(gemm_normalise(g32, &x, &p, err, sizeof err));
    plan_key(&p, 1, key);
    if (!found) want = key_hash(key);
    if (key_hash(key) == want) ms[found++] = m;
  }
  ck_assert_int_eq(found, PLAN_WAYS + 1);
  gemm_force(g32, NULL);                     /* an empty cache */
  long base = atomic_load(&g32->weighed);
  /* runs: each of the first PLAN_WAYS (weighed), them again and the first once more
   * (cached), the last (weighed, replacing the second, now the least recently used), the
   * others again (cached), the second (weighed) */
  int order[3 * PLAN_WAYS + 3], no = 0;
  long want_weighed[3 * PLAN_WAYS + 3];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < PLAN_WAYS; i++) order[no] = i, want_weighed[no++] = r ? PLAN_WAYS : i + 1;
  order[no] = 0, want_weighed[no++] = PLAN_WAYS;
  order[no] = PLAN_WAYS, want_weighed[no++] = PLAN_WAYS + 1;
  for (int i = 0; i <= PLAN_WAYS; i++)
    if (i != 1) order[no] = i, want_weighed[no++] = PLAN_WAYS + 1;
  order[no] = 1, want_weighed[no++] = PLAN_WAYS + 2;
  for (int i = 0; i < no; i++) {
    GemmArgs x = { .batch = 1, .m = ms[order[i]], .n = N, .k = K, .a = A, .a_sm = K, .a_sk = 1, .b = B, .b_sk = N,
                   .b_sn = 1, .c = C, .c_sm = N, .c_sn = 1 };
    ck_assert(gemm_run(g32, &x, NULL, err, sizeof err));
    ck_assert_msg(atomic_load(&g32->weighed) - base == want_weighed[i], "run %d (m %lld): %ld weighed, want %ld", i,
                  (long long)x.m, atomic_load(&g32->weighed) - base, want_weighed[i]);
  }
  free(A);
  free(B);
  free(C);
}
END_TEST

/* k split over thread blocks, forced: tiles and inner products, with 2 and 3 blocks in k
 * (more blocks than threads), alone and beside a split of N or M, k not a multiple of the
 * blocks (the last one shorter, or empty: 5 over 4 blocks of 2), C = and C +=, a C with no
 * unit stride, batches.  And the model takes it for a small C over a long k. */
START_TEST(test_ksplit) {
  static const int64_t shapes[][3] = { { 16, 16, 1000 }, { 1, 1, 517 }, { 13, 33, 301 },
                                       { 7, 3, 5 }, { 29, 70, 64 }, { 2, 5, 1000 } };
  static const int grids[][3] = { { 2, 1, 1 }, { 3, 1, 1 }, { 4, 1, 1 }, { 2, 2, 1 }, { 2, 1, 2 } };  /* tk, tm, tn */
  int bad = 0;
  for (int gi = 0; gi < 2; gi++) {
    GemmKernels *g = gi ? g64 : g32;
    for (int q = 0; q < 5; q++)
      for (int dot = 1; dot <= 2; dot++) {
        GemmForce fo = { .tk = grids[q][0], .tm = grids[q][1], .tn = dot == 1 ? 1 : grids[q][2],
                         .dot = dot };
        gemm_force(g, &fo);
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
          int v = (int)si + q;
          Case cs = { .batch = 1 + (v % 3 == 2), .m = shapes[si][0], .n = shapes[si][1],
                      .k = shapes[si][2], .la = 'r', .lb = v & 1 ? 'c' : 'r',
                      .lc = v % 4 == 3 ? 'g' : 'r', .acc = (v / 2) & 1, .threads = 2,
                      .at_end = v & 1 };
          bad += run_case(g, &cs);
          GemmPlanInfo pi;
          ck_assert(gemm_last_plan(g, &pi));
          ck_assert_msg(pi.tk == (int)(shapes[si][2] < grids[q][0] ? shapes[si][2] : grids[q][0]),
                        "shape %zu grid %d: k split %d", si, q, pi.tk);
        }
      }
    gemm_force(g, NULL);
  }
  ck_assert_int_eq(bad, 0);
  GemmArgs lk = { .batch = 1, .m = 16, .n = 16, .k = 100000, .a_sm = 100000, .a_sk = 1,
                  .b_sk = 16, .b_sn = 1, .c_sm = 16, .c_sn = 1 };
  expect_plan(&lk, "k split 2 ways", "adding the copies of C");
  /* the adding is a fork-join of its own after the blocks': it costs at least the blocks' */
  Buf d = { 0 };
  gemm_describe(g32, &lk, 2, &d);
  const char *fj = strstr(d.s, "fork-join "), *add = strstr(d.s, "adding the copies of C ");
  ck_assert_msg(fj && add, "%s", d.s);
  double fj_us = strtod(fj + strlen("fork-join "), NULL), add_us = strtod(add + strlen("adding the copies of C "), NULL);
  ck_assert_msg(fj_us > 0 && add_us >= fj_us, "fork-join %g us, adding %g us:\n%s", fj_us, add_us, d.s);
  buf_free(&d);
  /* and the lines of C and of its copy that move between the two cores at every call: of
   * two shares of rows, C's second goes to the other core and back, the copy's first comes
   * from it (1.5 times C's lines), each at the hardware's line_move_ns */
  GemmArgs mid = { .batch = 1, .m = 16, .n = 768, .k = 768, .a_sm = 768, .a_sk = 1, .b_sk = 768, .b_sn = 1,
                   .c_sm = 768, .c_sn = 1 };
  gemm_force(g32, &(GemmForce){ .tk = 2, .tm = 1, .tn = 1, .tb = 1 });
  Buf e = { 0 };
  gemm_describe(g32, &mid, 2, &e);
  gemm_force(g32, NULL);
  add = strstr(e.s, "adding the copies of C ");
  ck_assert_msg(add, "%s", e.s);
  int line = hw.nlevels && hw.level[0].line > 0 ? hw.level[0].line : 64;
  double move_us = 1.5 * (16.0 * 768 * 4 / line) * (hw.line_move_ns > 0 ? hw.line_move_ns : 60) * 1e-3;
  add_us = strtod(add + strlen("adding the copies of C "), NULL);
  ck_assert_msg(add_us >= move_us, "adding %g us, the moving lines alone %g:\n%s", add_us, move_us, e.s);
  buf_free(&e);
  /* which a plan splitting C's rows or columns never pays */
  GemmPlanInfo pi;
  ck_assert(gemm_plan_info(g32, &mid, 2, &pi));
  ck_assert_msg(pi.tk == 1, "16 x 768 x 768 on 2 threads: grid %d x %d x %d, k split %d", pi.tb, pi.tm, pi.tn, pi.tk);
}
END_TEST

START_TEST(test_degenerate) {
  char err[256];
  float a[4] = { 1, 2, 3, 4 }, b[4] = { 1, 1, 1, 1 }, c[4] = { 9, 9, 9, 9 };
  GemmArgs x = { .batch = 1, .m = 2, .n = 2, .k = 0, .a = a, .a_sm = 2, .a_sk = 1,
                 .b = b, .b_sk = 2, .b_sn = 1, .c = c, .c_sm = 2, .c_sn = 1 };
  ck_assert(gemm_run(g32, &x, NULL, err, sizeof err));      /* K = 0: C = 0 */
  for (int i = 0; i < 4; i++) ck_assert(c[i] == 0);
  c[0] = 5;
  x.accumulate = true;
  ck_assert(gemm_run(g32, &x, NULL, err, sizeof err));      /* K = 0, C +=: untouched */
  ck_assert(c[0] == 5);
  x.m = 0;
  x.k = 2;
  ck_assert(gemm_run(g32, &x, NULL, err, sizeof err));      /* M = 0: nothing */
  ck_assert(c[0] == 5);
  x.m = -1;
  ck_assert(!gemm_run(g32, &x, NULL, err, sizeof err));
  ck_assert(strstr(err, "negative"));
  x.m = 2;
  x.a = NULL;
  ck_assert(!gemm_run(g32, &x, NULL, err, sizeof err));
}
END_TEST

/* Ctrl-C sets the flag a compiled matmul watches: it stops between panels and says so, and
 * the same call without the flag gives the right answer. */
START_TEST(test_stop) {
  char err[256];
  int64_t m = 64, n = 48, k = 700;
  float *a = calloc((size_t)(m * k), 4), *b = calloc((size_t)(k * n), 4), *c = calloc((size_t)(m * n), 4);
  for (int64_t i = 0; i < m * k; i++) a[i] = 1;
  for (int64_t i = 0; i < k * n; i++) b[i] = 2;
  volatile int stop = 1;
  GemmArgs x = { .batch = 1, .m = m, .n = n, .k = k, .a = a, .a_sm = k, .a_sk = 1,
                 .b = b, .b_sk = n, .b_sn = 1, .c = c, .c_sm = n, .c_sn = 1, .stop = &stop };
  ck_assert(!gemm_run(g32, &x, NULL, err, sizeof err));
  ck_assert_str_eq(err, "interrupted");
  stop = 0;
  ck_assert_msg(gemm_run(g32, &x, NULL, err, sizeof err), "%s", err);
  for (int64_t i = 0; i < m * n; i++) ck_assert(c[i] == 2.0f * (float)k);
  free(a);
  free(b);
  free(c);
}
END_TEST

START_TEST(test_describe_and_code) {
  GemmArgs x = { .batch = 1, .m = 7, .n = 768, .k = 768, .a_sm = 768, .a_sk = 1,
                 .b_sk = 768, .b_sn = 1, .c_sm = 768, .c_sn = 1 };
  Buf d = { 0 };
  gemm_describe(g32, &x, 2, &d);
  ck_assert(strstr(d.s, "register tiles"));
  ck_assert(strstr(d.s, "chosen: tile"));
  ck_assert(strstr(d.s, "kc ="));
  ck_assert(strstr(d.s, "predicted"));
  ck_assert(strstr(d.s, "candidates"));
  ck_assert(strstr(d.s, "row streaming: 4 more, compiled when first weighed"));
  buf_free(&d);
  ck_assert(gemm_predict(g32, &x, 2) > 0);
  /* the row-streaming kernels are compiled when a plan first weighs them, and said so */
  GemmForce rows = { .rows = 1 };
  gemm_force(g32, &rows);
  GemmArgs rx = { .batch = 1, .m = 2, .n = 64, .k = 64, .a_sm = 64, .a_sk = 1,
                  .b_sk = 64, .b_sn = 1, .c_sm = 64, .c_sn = 1 };
  expect_plan(&rx, "chosen: row streaming", NULL);
  gemm_force(g32, NULL);
  expect_plan(&x, "row streaming: 4 more, compiled when first weighed, in ", NULL);
  /* Splitting 100 columns across two cores would have both write the line that holds
   * columns 64..79 of most rows (rows are 400 bytes), so the batch is split instead. */
  GemmArgs bx = { .batch = 12, .m = 100, .n = 100, .k = 64, .a_sb = 6400, .a_sm = 64,
                  .a_sk = 1, .b_sb = 6400, .b_sk = 100, .b_sn = 1, .c_sb = 10000,
                  .c_sm = 100, .c_sn = 1 };
  expect_plan(&bx, "cores: 2 x 1 x 1 blocks", NULL);
  /* With three rows and a short k there is nothing else to split: the model charges the
   * shared lines. */
  GemmArgs nx = { .batch = 1, .m = 3, .n = 1000, .k = 250, .a_sm = 250, .a_sk = 1,
                  .b_sk = 1000, .b_sn = 1, .c_sm = 1000, .c_sn = 1 };
  expect_plan(&nx, "cores: 1 x 1 x 2 blocks", "C lines shared by cores");
  char err[256];
  Buf ir = { 0 }, as = { 0 };
  ck_assert_msg(gemm_code(g32, "llvm", &ir, err, sizeof err), "%s", err);
  ck_assert(strstr(ir.s, "llvm.fma.v"));
  ck_assert(strstr(ir.s, "llvm.masked.store"));
  ck_assert_msg(gemm_code(g32, "asm", &as, err, sizeof err), "%s", err);
#if defined(__x86_64__)
  ck_assert(strstr(as.s, "vfmadd"));
#endif
  ck_assert(!gemm_code(g32, "ptx", &as, err, sizeof err));
  buf_free(&ir);
  buf_free(&as);
}
END_TEST

/* ---- pool ---- */

typedef struct Count { _Atomic int hits[1000]; Pool *pool; _Atomic int nested; } Count;

static void count_task(void *ctx, int64_t t) { atomic_fetch_add(&((Count *)ctx)->hits[t], 1); }

static void nested_task(void *ctx, int64_t t) {
  Count *c = ctx;
  dyn_parallel_for(c->pool, 4, count_task, c);     /* runs serially inside a task */
  atomic_fetch_add(&c->nested, 1);
  (void)t;
}

/* Each thread's share of a job: the calling thread's tasks wait (up to 2 s) until a worker
 * has run one, so that the worker comes while its share is untouched; the first task it
 * runs must then be the first of its share (tasks n/2.. of n on two threads), the same rows
 * on every call.  One shared counter gave it the caller's next task instead. */
typedef struct Share { pthread_t caller; _Atomic int64_t worker_first; _Atomic int worker_ran; } Share;

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void share_task(void *ctx, int64_t t) {
  Share *sh = ctx;
  if (pthread_equal(pthread_self(), sh->caller)) {
    for (double end = mono_s() + 2; !atomic_load(&sh->worker_ran) && mono_s() < end;) {}
  } else {
    int64_t none = -1;
    atomic_compare_exchange_strong(&sh->worker_first, &none, t);
    atomic_store(&sh->worker_ran, 1);
  }
}

START_TEST(test_pool_shares) {
  Pool *p = pool_new(2);
  int checked = 0;
  for (int rep = 0; rep < 20; rep++) {
    int64_t n = 8 + 2 * rep;
    Share sh = {.caller = pthread_self(), .worker_first = -1};
    dyn_parallel_for(p, n, share_task, &sh);
    if (!atomic_load(&sh.worker_ran)) continue;      /* the worker never came: nothing to say */
    ck_assert_msg(atomic_load(&sh.worker_first) == n / 2, "%lld tasks: the worker began at task %lld",
                  (long long)n, (long long)atomic_load(&sh.worker_first));
    checked++;
  }
  ck_assert_int_gt(checked, 0);
  pool_free(p);
}
END_TEST

START_TEST(test_pool) {
  static Count c;
  for (int threads = 1; threads <= 3; threads++) {
    Pool *p = pool_new(threads);
    ck_assert_int_eq(pool_threads(p), threads);
    for (int rep = 0; rep < 50; rep++) {
      memset(&c, 0, sizeof c);
      int64_t n = rep % 7 == 0 ? 1000 : rep % 5;
      dyn_parallel_for(p, n, count_task, &c);
      for (int64_t i = 0; i < 1000; i++) ck_assert_int_eq(c.hits[i], i < n);
    }
    memset(&c, 0, sizeof c);
    c.pool = p;
    dyn_parallel_for(p, 6, nested_task, &c);
    ck_assert_int_eq(c.nested, 6);
    ck_assert_int_eq(c.hits[0], 6);
    pool_set_threads(p, 2);
    ck_assert_int_eq(pool_threads(p), 2);
    memset(&c, 0, sizeof c);
    dyn_parallel_for(p, 100, count_task, &c);
    for (int i = 0; i < 100; i++) ck_assert_int_eq(c.hits[i], 1);
    usleep(1000);             /* let the workers go to sleep, then wake them */
    memset(&c, 0, sizeof c);
    dyn_parallel_for(p, 100, count_task, &c);
    for (int i = 0; i < 100; i++) ck_assert_int_eq(c.hits[i], 1);
    pool_free(p);
  }
  memset(&c, 0, sizeof c);
  dyn_parallel_for(NULL, 3, count_task, &c);
  ck_assert_int_eq(c.hits[2], 1);
  ck_assert_int_eq(pool_threads(NULL), 1);
  pool_free(NULL);
}
END_TEST

/* ---- jit ---- */

static int64_t host_twice(int64_t x) { return 2 * x; }

START_TEST(test_jit) {
  char err[256];
  Jit *j = jit_new(NULL, err, sizeof err);
  ck_assert_msg(j != NULL, "%s", err);
  ck_assert(strlen(jit_cpu_name(j)) > 0);
  ck_assert_msg(jit_define_symbol(j, "host_twice", (void *)host_twice, err, sizeof err), "%s", err);
  LLVMContextRef ctx = jit_context(j);
  LLVMModuleRef m = jit_module_new(j, NULL, "t");
  LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef ft = LLVMFunctionType(i64, &i64, 1, 0);
  LLVMValueRef hostf = LLVMAddFunction(m, "host_twice", ft);
  LLVMValueRef f = LLVMAddFunction(m, "add3", ft);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, f, "e"));
  LLVMValueRef arg = LLVMGetParam(f, 0);
  LLVMValueRef t = LLVMBuildCall2(b, ft, hostf, &arg, 1, "");
  LLVMBuildRet(b, LLVMBuildAdd(b, t, LLVMConstInt(i64, 3, 0), ""));
  LLVMDisposeBuilder(b);
  ck_assert_msg(jit_optimize(j, m, NULL, err, sizeof err), "%s", err);
  Buf ir = { 0 };
  jit_print_ir(m, &ir);
  ck_assert(strstr(ir.s, "define"));
  buf_free(&ir);
  JitCode *code;
  ck_assert_msg(jit_add_module(j, m, &code, err, sizeof err), "%s", err);
  int64_t (*add3)(int64_t) = (int64_t (*)(int64_t))jit_lookup(j, "add3", err, sizeof err);
  ck_assert_msg(add3 != NULL, "%s", err);
  ck_assert_int_eq(add3(20), 43);
  ck_assert_ptr_null(jit_lookup(j, "no_such_symbol", err, sizeof err));
  /* code removed from the JIT is gone: its symbols are no longer found */
  jit_code_free(code);
  ck_assert_ptr_null(jit_lookup(j, "add3", err, sizeof err));
  /* assembly of a module that will not be JIT'd, and parallel compilation */
  LLVMContextRef c2[2];
  LLVMModuleRef m2[2];
  for (int i = 0; i < 2; i++) {
    c2[i] = LLVMContextCreate();
    char name[16];
    snprintf(name, sizeof name, "p%d", i);
    m2[i] = jit_module_new(j, c2[i], name);
    LLVMTypeRef t64 = LLVMInt64TypeInContext(c2[i]);
    LLVMValueRef fn = LLVMAddFunction(m2[i], i ? "one" : "zero", LLVMFunctionType(t64, NULL, 0, 0));
    LLVMBuilderRef bb = LLVMCreateBuilderInContext(c2[i]);
    LLVMPositionBuilderAtEnd(bb, LLVMAppendBasicBlockInContext(c2[i], fn, "e"));
    LLVMBuildRet(bb, LLVMConstInt(t64, (unsigned)i, 0));
    LLVMDisposeBuilder(bb);
  }
  ck_assert_msg(jit_add_modules(j, m2, 2, NULL, err, sizeof err), "%s", err);
  for (int i = 0; i < 2; i++) LLVMContextDispose(c2[i]);
  int64_t (*one)(void) = (int64_t (*)(void))jit_lookup(j, "one", err, sizeof err);
  ck_assert_msg(one && one() == 1, "%s", err);
  LLVMContextRef c3 = LLVMContextCreate();
  LLVMModuleRef m3 = jit_module_new(j, c3, "asm");
  LLVMTypeRef v = LLVMVoidTypeInContext(c3);
  LLVMValueRef fn = LLVMAddFunction(m3, "nothing", LLVMFunctionType(v, NULL, 0, 0));
  LLVMBuilderRef bb = LLVMCreateBuilderInContext(c3);
  LLVMPositionBuilderAtEnd(bb, LLVMAppendBasicBlockInContext(c3, fn, "e"));
  LLVMBuildRetVoid(bb);
  LLVMDisposeBuilder(bb);
  Buf as = { 0 };
  ck_assert_msg(jit_print_asm(j, m3, &as, err, sizeof err), "%s", err);
  ck_assert(strstr(as.s, "nothing"));
  buf_free(&as);
  LLVMDisposeModule(m3);
  LLVMContextDispose(c3);
  jit_free(j);
  jit_free(NULL);
}
END_TEST

/* The bf16 engine's plan (gemm_half.c's dp_plan) shares C evenly over the threads: the
 * busiest thread's share of the tasks (the pool's contiguous shares, each task its block of
 * rows and columns, the last ones cut at C's edges) stays within a tenth of an even share.  Its blocks were the largest split until the threads had tasks,
 * which gave C of 128 x 768 on 2 threads blocks of 72 and 56 rows, both of a thread's
 * tasks of one: 1.125 times an even share.  Described from zen5's model file (vdpbf16ps),
 * never run, so it holds on any host: tests/emulated.sh runs it on an AVX2-only CPU. */
START_TEST(test_dp_plan_even) {
  char err[256];
  HwModel z;
  ck_assert_msg(hw_load("zen5", &z, err, sizeof err), "%s", err);
  GemmKernels *w = gemm_compile(DYN_F32, &z, err, sizeof err);
  ck_assert_msg(w != NULL, "%s", err);
  GemmKernels *g = gemm_half_compile(DYN_BF16, w, err, sizeof err);
  ck_assert_msg(g != NULL && gemm_half_dp(&z, DYN_BF16), "%s", err);
  const int64_t shapes[][3] = {{128, 768, 768}, {97, 511, 1023}, {200, 1000, 512}, {1024, 1024, 1024}, {4096, 768, 768}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
    GemmArgs x = { .batch = 1, .m = M, .n = N, .k = K, .a_sm = K, .a_sk = 1, .b_sk = N, .b_sn = 1, .c_sm = N, .c_sn = 1 };
    Buf out = { 0 };
    gemm_describe(g, &x, 2, &out);
    long long tasks, rows, cols;
    int threads;
    const char *at = strstr(out.s, " tasks of up to ");
    ck_assert_msg(at, "%s", out.s);
    while (at > out.s && at[-1] != ' ') at--;
    ck_assert_msg(sscanf(at, "%lld tasks of up to %lldx%lld, k blocks of %*d pairs, on %d thread", &tasks, &rows, &cols,
                         &threads) == 4, "%s", out.s);
    /* the tasks in order, the column blocks fastest, each thread a contiguous share (pool.c) */
    int64_t nblocks = (N + cols - 1) / cols;
    double busiest = 0;
    for (int th = 0; th < threads; th++) {
      double c = 0;
      for (long long t = tasks * th / threads; t < tasks * (th + 1) / threads; t++) {
        int64_t r0 = t / nblocks * rows, c0 = t % nblocks * cols;
        c += (double)(M - r0 < rows ? M - r0 : rows) * (double)(N - c0 < cols ? N - c0 : cols);
      }
      busiest = c > busiest ? c : busiest;
    }
    ck_assert_msg(threads == 2 && busiest <= 1.1 * (double)M * (double)N / 2,
                  "%lld x %lld x %lld: %lld tasks of %lld x %lld on %d threads: %.0f of C on the busiest, an even share %.0f",
                  (long long)M, (long long)N, (long long)K, tasks, rows, cols, threads, busiest, (double)M * N / 2);
    buf_free(&out);
  }
  gemm_free(g);
  gemm_free(w);
}
END_TEST

/* A model of another instruction set is for looking: its Jit builds, optimises and prints
 * AArch64 code and refuses to load any; its contraction engine describes plans from the
 * model's own rates and refuses to run.  Nothing here executes code for it. */
START_TEST(test_foreign_model) {
  char err[256];
  HwModel arm;
  ck_assert_msg(hw_load("neoverse-v2", &arm, err, sizeof err), "%s", err);
  ck_assert_str_eq(arm.arch, "aarch64");
  char why[256];
  bool here = jit_runnable(&arm, why, sizeof why);
#if defined(__aarch64__)
  ck_assert(here);
  return;
#endif
  ck_assert(!here);
  ck_assert_msg(strstr(why, "neoverse-v2 is an aarch64 CPU"), "%s", why);
  Jit *j = jit_new(&arm, err, sizeof err);
  ck_assert_msg(j != NULL, "%s", err);
  ck_assert(!jit_can_run(j));
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = jit_module_new(j, ctx, "arm");
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx), v4 = LLVMVectorType(f32, 4);
  LLVMTypeRef ps[3] = { v4, v4, v4 };
  LLVMValueRef f = LLVMAddFunction(m, "fma4", LLVMFunctionType(v4, ps, 3, 0));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, f, "e"));
  LLVMTypeRef tys[1] = { v4 };
  unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
  LLVMValueRef args[3] = { LLVMGetParam(f, 0), LLVMGetParam(f, 1), LLVMGetParam(f, 2) };
  LLVMBuildRet(b, LLVMBuildCall2(b, LLVMIntrinsicGetType(ctx, id, tys, 1), LLVMGetIntrinsicDeclaration(m, id, tys, 1),
                                 args, 3, ""));
  LLVMDisposeBuilder(b);
  ck_assert_msg(jit_optimize(j, m, NULL, err, sizeof err), "%s", err);
  Buf as = { 0 };
  ck_assert_msg(jit_print_asm(j, m, &as, err, sizeof err), "%s", err);
  ck_assert_msg(strstr(as.s, "fmla"), "%s", as.s);
  buf_free(&as);
  ck_assert(!jit_add_module(j, m, NULL, err, sizeof err));       /* disposes m */
  ck_assert_msg(strstr(err, "cannot run on this CPU"), "%s", err);
  ck_assert_ptr_null(jit_lookup(j, "fma4", err, sizeof err));
  LLVMContextDispose(ctx);
  jit_free(j);

  GemmKernels *ga = gemm_compile(DYN_F32, &arm, err, sizeof err);
  ck_assert_msg(ga != NULL, "%s", err);
  GemmArgs x = { .batch = 1, .m = 300, .n = 200, .k = 100, .a_sm = 100, .a_sk = 1, .b_sk = 200, .b_sn = 1,
                 .c_sm = 200, .c_sn = 1 };
  GemmPlanInfo pi;
  ck_assert(gemm_plan_info(ga, &x, 4, &pi));
  ck_assert(pi.predicted_s > 0);
  /* the model's own peak: 128-bit vectors, 4 FMA pipes at 3.1 GHz = 99.2 GFLOP/s a core */
  double flops = 2.0 * 300 * 200 * 100;
  ck_assert_msg(flops / pi.predicted_s / 4 < 99.3e9, "%.3g GFLOP/s a core", flops / pi.predicted_s / 4 * 1e-9);
  ck_assert(gemm_peak_gflops(ga, NULL, 0.01) == 0);
  /* its plans are its own rates' (test_edge_columns cannot hold the host's to a choice):
   * 2048 x 17 x 513 puts C's last columns past a tile's multiple apart, as inner products
   * (on 9x12 tiles the last 5, which would cost a tile a whole strip of 12) */
  int mr[4], nr[4], nf = gemm_families(ga, mr, nr, 4);
  GemmArgs ed = { .batch = 1, .m = 2048, .n = 17, .k = 513, .a_sm = 513, .a_sk = 1, .b_sk = 17,
                  .b_sn = 1, .c_sm = 17, .c_sn = 1 };
  ck_assert(gemm_plan_info(ga, &ed, 2, &pi));
  bool past = false;
  for (int h = 0; h < nf && h < 4; h++) past = past || pi.edge == 17 % nr[h];
  ck_assert_msg(pi.edge > 0 && past && !pi.dot && !pi.rows, "%lld columns apart", (long long)pi.edge);
  Buf d = { 0 };
  gemm_describe(ga, &ed, 2, &d);
  ck_assert_msg(strstr(d.s, "columns apart, as inner products") && strstr(d.s, "the last columns"), "%s", d.s);
  buf_free(&d);
  float a[1] = { 0 }, bb[1] = { 0 }, c[1] = { 0 };
  GemmArgs one = { .batch = 1, .m = 1, .n = 1, .k = 1, .a = a, .a_sm = 1, .a_sk = 1, .b = bb, .b_sk = 1, .b_sn = 1,
                   .c = c, .c_sm = 1, .c_sn = 1 };
  ck_assert(!gemm_run(ga, &one, NULL, err, sizeof err));
  ck_assert_msg(strstr(err, "cannot run on this CPU"), "%s", err);
  Buf code = { 0 };
  ck_assert_msg(gemm_code(ga, "asm", &code, err, sizeof err), "%s", err);
  ck_assert(strstr(code.s, "fmla"));
  buf_free(&code);
  gemm_free(ga);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gemm");
  TCase *tc = tcase_create("gemm");
  tcase_add_unchecked_fixture(tc, setup_once, teardown_once);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_compiles);
  tcase_add_test(tc, test_small_shapes);
  tcase_add_test(tc, test_tile_edges);
  tcase_add_test(tc, test_layouts);
  tcase_add_test(tc, test_one_tile);
  tcase_add_test(tc, test_c_traffic);
  tcase_add_test(tc, test_own_cache);
  tcase_add_test(tc, test_packed_bt);
  tcase_add_test(tc, test_split_order);
  tcase_add_test(tc, test_aliased_a);
  tcase_add_test(tc, test_grouped_a);
  tcase_add_test(tc, test_sustained_rate);
  tcase_add_test(tc, test_edge_splits);
  tcase_add_test(tc, test_every_height);
  tcase_add_test(tc, test_prefetch_c);
  tcase_add_test(tc, test_stream_c);
  tcase_add_test(tc, test_batched_accumulate);
  tcase_add_test(tc, test_f64);
  tcase_add_test(tc, test_two_threads);
  tcase_add_test(tc, test_fused_packing);
  tcase_add_test(tc, test_edge_columns);
  tcase_add_test(tc, test_far_b_packed);
  tcase_add_test(tc, test_narrow_b_in_place);
  tcase_add_test(tc, test_misaligned_b);
  tcase_add_test(tc, test_ahead_lines);
  tcase_add_test(tc, test_forced_plans);
  tcase_add_test(tc, test_rows);
  tcase_add_test(tc, test_dot);
  tcase_add_test(tc, test_later_family);
  tcase_add_test(tc, test_plan_cache);
  tcase_add_test(tc, test_ksplit);
  tcase_add_test(tc, test_degenerate);
  tcase_add_test(tc, test_stop);
  tcase_add_test(tc, test_describe_and_code);
  suite_add_tcase(s, tc);
  TCase *tp = tcase_create("pool");
  tcase_set_timeout(tp, 60);
  tcase_add_test(tp, test_pool);
  tcase_add_test(tp, test_pool_shares);
  suite_add_tcase(s, tp);
  TCase *tj = tcase_create("jit");
  tcase_add_test(tj, test_jit);
  tcase_add_test(tj, test_foreign_model);
  tcase_add_test(tj, test_dp_plan_even);
  suite_add_tcase(s, tj);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
