/* cpu_reduce.h -- what the CPU back end's code generator (cpu.c) lends cpu_reduce.c, which
 * builds a reduction whose axes it walks in merged runs (cpu_reduce_plan in cpu_int.h says
 * which): the loop nest, its accumulators, and the check at run time that the merged axes do
 * lie one after another in memory, else the stage's ordinary loops.  Only included where LLVM
 * is (HAVE_LLVM). */
#ifndef CPU_REDUCE_H
#define CPU_REDUCE_H

#include "cpu_int.h"

#include <llvm-c/Core.h>

typedef struct CpuRedGen {
  LLVMContextRef cx;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMTypeRef i64, ty;          /* ty: the reduction's type */
  const CpuRedPlan *pl;
  LLVMValueRef lo, hi;          /* the iterations of the parallel axis this task runs */
  void *g;                      /* cpu.c's, passed back to each function below */
  LLVMValueRef (*ext)(void *g, int axis);                         /* an axis's extent */
  LLVMValueRef (*stride)(void *g, int slot, int dim, int rank);   /* a slot's element stride */
  LLVMValueRef (*loop)(void *g, LLVMValueRef lo, LLVMValueRef hi); /* opens [lo, hi); the index */
  void (*end)(void *g);                                           /* closes the innermost loop */
  void (*set_axis)(void *g, int axis, LLVMValueRef v);            /* the value gen reads for axis */
  LLVMValueRef (*value)(void *g);        /* the reduction's operand at the axes' values */
  LLVMValueRef (*out_ptr)(void *g);      /* the address of the result at the stage's axes */
  void (*store)(void *g, LLVMValueRef v);                         /* the result := v */
  void (*step)(void *g, LLVMValueRef acc, LLVMValueRef x);        /* *acc = *acc (op) x */
  LLVMValueRef (*init)(void *g);         /* the reduction's start (0 for a sum) */
  LLVMValueRef (*slot)(void *g, LLVMTypeRef t);                   /* an entry-block alloca */
  void (*plain)(void *g);                /* the stage's ordinary loops, for other layouts */
  /* for short kept runs (cpu_reduce_short_gen) */
  const Stage *st;                       /* the stage */
  int par_axis;
  CpuShortShape shape;                   /* its vectors, from the model */
  LLVMValueRef (*op)(void *g, LLVMValueRef a, LLVMValueRef x);   /* a (op) x, scalars or vectors */
  LLVMValueRef (*addr)(void *g);         /* the operand's address at the axes' values */
  bool masked_loads;                     /* the target masks a vector load's lanes (AVX-512) */
} CpuRedGen;

/* Emit the stage at the builder's position. */
void cpu_reduce_gen(const CpuRedGen *rg);
/* Emit a stage of short kept runs (cpu_reduce_short_plan) at the builder's position; plain
 * runs the stage's other loops where the layout or the run's length does not suit. */
void cpu_reduce_short_gen(const CpuRedGen *rg, const CpuShortPlan *sp);
/* Emit a stage of short reduced runs (cpu_reduce_rows_plan), W rows at a time in the lanes
 * of gathers, shape.lanes = W; plain runs the stage's other loops where the rows are long. */
void cpu_reduce_rows_gen(const CpuRedGen *rg, const CpuShortPlan *sp);

#endif
