/* irb.h -- the LLVM IR-building helpers that the CPU back end (cpu.c), its math functions
 * (vmath.c) and the contraction engine's code generation (gemm_emit.c) share: intrinsics
 * declared and called by name, and function attributes.  Each file keeps its own builder
 * state; these take plain LLVM handles.  Built only with LLVM.
 */
#ifndef DYN_IRB_H
#define DYN_IRB_H

#include <stdbool.h>
#include <llvm-c/Core.h>

/* The declaration of intrinsic `name` (e.g. "llvm.fma") in m, overloaded on ov[0..nov), and
 * its function type in *fn_type. */
LLVMValueRef irb_intrinsic(LLVMModuleRef m, const char *name, LLVMTypeRef *ov, int nov,
                           LLVMTypeRef *fn_type);
/* A call of intrinsic `name` overloaded on the one type t, at b's position. */
LLVMValueRef irb_call_intrinsic(LLVMBuilderRef b, LLVMModuleRef m, const char *name, LLVMTypeRef t,
                                LLVMValueRef *args, int n);
/* Function attributes: an enum attribute by name ("nounwind"), a string one by key and value. */
void irb_fn_attr(LLVMValueRef fn, const char *name);
void irb_fn_string_attr(LLVMValueRef fn, const char *key, const char *value);
/* The 16-bit float types in memory: f16 as LLVM's half, bf16 as an i16 (its bit pattern).
 * widen16 makes the f32 value of one (exact); narrow16 rounds an f32 to one, to nearest,
 * ties to even. */
LLVMValueRef irb_widen16(LLVMBuilderRef b, LLVMValueRef v, bool bf16);
LLVMValueRef irb_narrow16(LLVMBuilderRef b, LLVMValueRef v, bool bf16);

#endif
