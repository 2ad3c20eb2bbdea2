/* cpu_scan.h -- what the CPU back end's code generator (cpu.c) lends cpu_scan.c, which
 * builds the in-order pass of a scan stage.  cpu.c computes the stage's body into the
 * result as for any other stage (its loops vectorised by LLVM); cpu_scan_gen then emits the
 * pass that combines each element with the one before it along the scanned axis.  Only
 * included where LLVM is (HAVE_LLVM). */
#ifndef CPU_SCAN_H
#define CPU_SCAN_H

#include "dyn_int.h"

#include <llvm-c/Core.h>

typedef struct CpuScanGen {
  LLVMContextRef cx;
  LLVMBuilderRef b;
  const Stage *st;              /* its expr is the KX_SCAN */
  LLVMTypeRef ty;               /* the element type */
  int lanes;                    /* elements of a vector at the model's width (a power of 2) */
  int par_axis;                 /* the axis whose iterations [lo, hi) this task runs, or -1 */
  LLVMValueRef lo, hi;
  void *g;                      /* cpu.c's, passed back to each function below */
  LLVMValueRef (*ext)(void *g, int axis);                 /* the extent of an axis */
  LLVMValueRef (*addr)(void *g, LLVMValueRef *subs);      /* &T[subs], one per stage axis */
  void (*mark)(void *g, LLVMValueRef access);             /* a load or store of T: alias scope */
  LLVMValueRef (*loop)(void *g, LLVMValueRef lo, LLVMValueRef hi);   /* opens [lo, hi); the index */
  void (*end)(void *g, int64_t step);                     /* closes the innermost loop open */
  LLVMValueRef (*slot)(void *g, LLVMTypeRef t);           /* a variable (an entry-block alloca) */
  void (*transpose)(void *g, LLVMValueRef *rows, int w);  /* w vectors of w lanes, in registers */
} CpuScanGen;

/* Emit the scan pass of sg->st at the builder's position. */
void cpu_scan_gen(const CpuScanGen *sg);
/* For a scan along axis si that is not the last: combine row subs[si] - 1 into row subs[si]
 * (>= 1), subs[0..si] set, the axes after si in loops of their own. */
void cpu_scan_rows_at(const CpuScanGen *sg, LLVMValueRef *subs, int si);

#endif
