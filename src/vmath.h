/* vmath.h -- the math functions of the expression language as LLVM IR, for the CPU back end
 * (cpu.c) alone: each builds the function's code for a scalar or vector f32/f64 value at the
 * builder's position.  The design note is at the top of vmath.c.
 */
#ifndef DYN_VMATH_H
#define DYN_VMATH_H

#include <llvm-c/Core.h>
#include <stdbool.h>

typedef struct VMath {
  LLVMContextRef cx;
  LLVMModuleRef m;
  LLVMBuilderRef b;
  const char *prefix;     /* of the module's symbols; NULL: no out-of-line helper is made */
  char width[16];         /* "prefer-vector-width" of the helpers, "" for none */
  unsigned scalef;        /* vector widths in bits (128 | 256 | 512) where vscalefps/pd exist */
  LLVMValueRef exp_fn[2]; /* the out-of-line exp (f32, f64) once made, see vmath.c */
  char exp_variant[2][400]; /* the vector variants its calls carry */
} VMath;

/* features: the target's LLVM feature string (it decides the AVX-512 form of exp);
 * vector_bits: the width the kernels prefer, given to the helpers too (0: none). */
void vmath_init(VMath *vm, LLVMContextRef cx, LLVMModuleRef m, LLVMBuilderRef b, const char *prefix,
                const char *features, int vector_bits);
/* op: OP_EXP, OP_LOG, OP_SQRT, OP_RSQRT, OP_SIN, OP_COS, OP_TANH, OP_SIGMOID or OP_ERF */
LLVMValueRef vmath_unary(VMath *vm, int op, LLVMValueRef x);
LLVMValueRef vmath_pow(VMath *vm, LLVMValueRef a, LLVMValueRef b);
/* After vectorisation: let the out-of-line helpers of the module made with prefix be
 * inlined; true when there are any (then run an inliner). */
bool vmath_release(LLVMModuleRef m, const char *prefix);

#endif
