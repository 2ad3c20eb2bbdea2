/* cpu_scan.c -- the CPU back end's code for a scan, Y[i, j] = scan[j] +(body): the pass that
 * runs in order along the scanned axis after cpu.c has stored the body's values in Y.
 *
 * Each step is Y[.., j, ..] = Y[.., j - 1, ..] (op) Y[.., j, ..], in the order of j and with
 * no reassociation (the reference evaluator computes exactly this), so the sequential axis
 * cannot be vectorised; the others can, and that is where the vectors go:
 *   - scanned along an axis that is not the last: for each j, the whole row j - 1 is
 *     combined into row j with vectors of `lanes` elements along the last axis (unit stride);
 *   - scanned along the last axis (cumsum of rows): `lanes` rows at a time, in tiles of
 *     lanes x lanes loaded along the rows, transposed in registers so that each vector holds
 *     one column of the tile across the rows, combined column after column with a running
 *     vector carried from tile to tile, transposed back and stored.  Ragged edges (the rows
 *     and columns short of a tile) take the scalar steps;
 *   - a scan of rank 1 has nothing beside it and runs scalar.
 * Threads split the first axis that is not scanned (cpu.c's cpu_par_axis).
 */
#include "config.h"

#ifdef HAVE_LLVM

#include "cpu_scan.h"

static LLVMValueRef k64(const CpuScanGen *sg, int64_t v) {
  return LLVMConstInt(LLVMInt64TypeInContext(sg->cx), (unsigned long long)v, 1);
}

/* earlier (op) later, on scalars or vectors alike; max and min keep a NaN as eval.c does */
static LLVMValueRef combine(const CpuScanGen *sg, LLVMValueRef a, LLVMValueRef x) {
  LLVMBuilderRef b = sg->b;
  const KExpr *e = sg->st->expr;
  bool f = elem_is_float(e->ty);
  switch (e->red) {
  case RED_SUM: return f ? LLVMBuildFAdd(b, a, x, "scan") : LLVMBuildAdd(b, a, x, "scan");
  case RED_PROD: return f ? LLVMBuildFMul(b, a, x, "scan") : LLVMBuildMul(b, a, x, "scan");
  default: {
    bool mx = e->red == RED_MAX;
    if (!f) return LLVMBuildSelect(b, LLVMBuildICmp(b, mx ? LLVMIntSGT : LLVMIntSLT, x, a, ""), x, a, "scan");
    LLVMValueRef take = LLVMBuildFCmp(b, mx ? LLVMRealUGT : LLVMRealULT, x, a, "");   /* or x is NaN */
    LLVMValueRef r = LLVMBuildSelect(b, take, x, a, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, a, a, ""), a, r, "scan");
  }
  }
}

/* A load of T (a scalar or a vector of t), aligned to its element only. */
static LLVMValueRef load(const CpuScanGen *sg, LLVMTypeRef t, LLVMValueRef ptr) {
  LLVMValueRef v = LLVMBuildLoad2(sg->b, t, ptr, "");
  LLVMSetAlignment(v, (unsigned)elem_size(sg->st->expr->ty));
  sg->mark(sg->g, v);
  return v;
}

static void store(const CpuScanGen *sg, LLVMValueRef v, LLVMValueRef ptr) {
  LLVMValueRef s = LLVMBuildStore(sg->b, v, ptr);
  LLVMSetAlignment(s, (unsigned)elem_size(sg->st->expr->ty));
  sg->mark(sg->g, s);
}

/* One scalar step at subs, whose entry si is the scanned index j >= 1. */
static void step(const CpuScanGen *sg, LLVMValueRef *subs, int si) {
  LLVMValueRef j = subs[si];
  LLVMValueRef cur = sg->addr(sg->g, subs);
  subs[si] = LLVMBuildSub(sg->b, j, k64(sg, 1), "");
  LLVMValueRef prev = load(sg, sg->ty, sg->addr(sg->g, subs));
  subs[si] = j;
  store(sg, combine(sg, prev, load(sg, sg->ty, cur)), cur);
}

/* The steps of one line, j in [from, extent of the scanned axis), the other subs fixed. */
static void line(const CpuScanGen *sg, LLVMValueRef *subs, int si, LLVMValueRef from) {
  subs[si] = sg->loop(sg->g, from, sg->ext(sg->g, sg->st->axes[si]));
  step(sg, subs, si);
  sg->end(sg->g, 1);
}

/* The range of stage axis a in this task. */
static void range(const CpuScanGen *sg, int a, LLVMValueRef *lo, LLVMValueRef *hi) {
  int ax = sg->st->axes[a];
  *lo = ax == sg->par_axis ? sg->lo : k64(sg, 0);
  *hi = ax == sg->par_axis ? sg->hi : sg->ext(sg->g, ax);
}

/* lo + the part of [lo, hi) that whole vectors of w cover */
static LLVMValueRef whole(const CpuScanGen *sg, LLVMValueRef lo, LLVMValueRef hi, int w) {
  LLVMValueRef n = LLVMBuildSub(sg->b, hi, lo, "");
  return LLVMBuildAdd(sg->b, lo, LLVMBuildSub(sg->b, n, LLVMBuildSRem(sg->b, n, k64(sg, w), ""), ""), "");
}

/* Scanned along axis si, not the last: row j - 1 into row j (subs[0..si] set, j >= 1), the
 * axes after si in loops, a vector along the last axis at a time. */
void cpu_scan_rows_at(const CpuScanGen *sg, LLVMValueRef *subs, int si) {
  int v = sg->st->naxes - 1, w = sg->lanes, open = 0;
  LLVMTypeRef vt = LLVMVectorType(sg->ty, (unsigned)w);
  for (int a = si + 1; a < v; a++) {
    LLVMValueRef lo, hi;
    range(sg, a, &lo, &hi);
    subs[a] = sg->loop(sg->g, lo, hi);
    open++;
  }
  LLVMValueRef v0, v1;
  range(sg, v, &v0, &v1);
  LLVMValueRef vt1 = whole(sg, v0, v1, w);
  subs[v] = sg->loop(sg->g, v0, vt1);
  LLVMValueRef j = subs[si];
  LLVMValueRef cur = sg->addr(sg->g, subs);
  subs[si] = LLVMBuildSub(sg->b, j, k64(sg, 1), "");
  LLVMValueRef prev = load(sg, vt, sg->addr(sg->g, subs));
  subs[si] = j;
  LLVMValueRef r = combine(sg, prev, load(sg, vt, cur));
  store(sg, r, cur);
  sg->end(sg->g, w);
  subs[v] = sg->loop(sg->g, vt1, v1);
  step(sg, subs, si);
  sg->end(sg->g, 1);
  while (open--) sg->end(sg->g, 1);
}

/* Scanned along the last axis si: w rows (axis si - 1) at a time, in w x w tiles. */
static void gen_cols(const CpuScanGen *sg, LLVMValueRef *subs, int si) {
  LLVMBuilderRef b = sg->b;
  int v = si - 1, w = sg->lanes;
  LLVMTypeRef vt = LLVMVectorType(sg->ty, (unsigned)w);
  LLVMValueRef v0, v1;
  range(sg, v, &v0, &v1);
  LLVMValueRef n = sg->ext(sg->g, sg->st->axes[si]);
  LLVMValueRef vt1 = whole(sg, v0, v1, w), nt = whole(sg, k64(sg, 0), n, w);
  LLVMValueRef carry = sg->slot(sg->g, vt);
  LLVMValueRef r0 = sg->loop(sg->g, v0, vt1);
  LLVMValueRef n0 = sg->loop(sg->g, k64(sg, 0), nt);
  LLVMValueRef rows[16], ptrs[16];
  subs[si] = n0;
  for (int k = 0; k < w; k++) {
    subs[v] = LLVMBuildAdd(b, r0, k64(sg, k), "");
    ptrs[k] = sg->addr(sg->g, subs);
    rows[k] = load(sg, vt, ptrs[k]);
  }
  sg->transpose(sg->g, rows, w);               /* rows[j]: column n0 + j of the w rows */
  /* the first column of a line has nothing before it: the carry counts from the second tile */
  LLVMValueRef first = LLVMBuildICmp(b, LLVMIntEQ, n0, k64(sg, 0), "");
  LLVMValueRef c = LLVMBuildLoad2(b, vt, carry, "carry");
  rows[0] = LLVMBuildSelect(b, first, rows[0], combine(sg, c, rows[0]), "");
  for (int j = 1; j < w; j++) rows[j] = combine(sg, rows[j - 1], rows[j]);
  LLVMBuildStore(b, rows[w - 1], carry);
  sg->transpose(sg->g, rows, w);
  for (int k = 0; k < w; k++) store(sg, rows[k], ptrs[k]);
  sg->end(sg->g, w);
  /* the columns after the last whole tile, row by row */
  LLVMValueRef from = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, nt, k64(sg, 1), ""), nt, k64(sg, 1), "");
  LLVMValueRef k = sg->loop(sg->g, k64(sg, 0), k64(sg, w));
  subs[v] = LLVMBuildAdd(b, r0, k, "");
  line(sg, subs, si, from);
  sg->end(sg->g, 1);
  sg->end(sg->g, w);
  /* the rows after the last whole tile */
  subs[v] = sg->loop(sg->g, vt1, v1);
  line(sg, subs, si, k64(sg, 1));
  sg->end(sg->g, 1);
}

void cpu_scan_gen(const CpuScanGen *sg) {
  const Stage *st = sg->st;
  int na = st->naxes, si = 0, open = 0;
  while (st->axes[si] != st->expr->raxes[0]) si++;
  LLVMValueRef subs[DYN_MAX_RANK];
  /* the axes that neither run in order nor carry the vectors: plain loops outside (those
   * after a scanned axis that is not the last: inside it, cpu_scan_rows_at's) */
  int vec = na < 2 ? -1 : si == na - 1 ? na - 2 : na - 1;
  for (int a = 0; a < (vec == na - 1 ? si : na); a++) {
    if (a == si || a == vec) continue;
    LLVMValueRef lo, hi;
    range(sg, a, &lo, &hi);
    subs[a] = sg->loop(sg->g, lo, hi);
    open++;
  }
  if (vec < 0) line(sg, subs, si, k64(sg, 1));
  else if (vec == na - 1) {
    subs[si] = sg->loop(sg->g, k64(sg, 1), sg->ext(sg->g, st->axes[si]));
    cpu_scan_rows_at(sg, subs, si);
    sg->end(sg->g, 1);
  } else gen_cols(sg, subs, si);
  while (open--) sg->end(sg->g, 1);
}

#endif
