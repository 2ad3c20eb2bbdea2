/* irb.c -- LLVM IR-building helpers shared by the generators of CPU code: cpu.c's kernels,
 * vmath.c's math functions and gemm_emit.c's micro-kernels.  They look intrinsics up by
 * name and set function attributes, on the module or function they are given, so each
 * generator keeps its own builder state and the IR is what it built by hand before.
 */
#include "config.h"
#include "irb.h"

#include <string.h>

LLVMValueRef irb_intrinsic(LLVMModuleRef m, const char *name, LLVMTypeRef *ov, int nov,
                           LLVMTypeRef *fn_type) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  *fn_type = LLVMIntrinsicGetType(LLVMGetModuleContext(m), id, ov, (size_t)nov);
  return LLVMGetIntrinsicDeclaration(m, id, ov, (size_t)nov);
}

LLVMValueRef irb_call_intrinsic(LLVMBuilderRef b, LLVMModuleRef m, const char *name, LLVMTypeRef t,
                                LLVMValueRef *args, int n) {
  LLVMTypeRef ft;
  LLVMValueRef f = irb_intrinsic(m, name, &t, 1, &ft);
  return LLVMBuildCall2(b, ft, f, args, (unsigned)n, "");
}

void irb_fn_attr(LLVMValueRef fn, const char *name) {
  LLVMContextRef cx = LLVMGetModuleContext(LLVMGetGlobalParent(fn));
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cx, kind, 0));
}

void irb_fn_string_attr(LLVMValueRef fn, const char *key, const char *value) {
  LLVMContextRef cx = LLVMGetModuleContext(LLVMGetGlobalParent(fn));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(cx, key, (unsigned)strlen(key), value,
                                                    (unsigned)strlen(value)));
}

/* bf16 is the top half of an f32, so it widens by a shift and narrows by rounding the low
 * half away (ties to even; a NaN stays a quiet NaN), in integer operations that vectorise on
 * any host: LLVM's own bfloat conversions call a run-time library function where the target
 * lacks AVX512-BF16.  f16 uses LLVM's half, native with F16C (every x86-64 model dyn has)
 * and on AArch64. */
LLVMValueRef irb_widen16(LLVMBuilderRef b, LLVMValueRef v, bool bf16) {
  LLVMContextRef cx = LLVMGetTypeContext(LLVMTypeOf(v));
  if (!bf16) return LLVMBuildFPExt(b, v, LLVMFloatTypeInContext(cx), "");
  LLVMTypeRef i32 = LLVMInt32TypeInContext(cx);
  LLVMValueRef u = LLVMBuildShl(b, LLVMBuildZExt(b, v, i32, ""), LLVMConstInt(i32, 16, 0), "");
  return LLVMBuildBitCast(b, u, LLVMFloatTypeInContext(cx), "");
}

LLVMValueRef irb_narrow16(LLVMBuilderRef b, LLVMValueRef v, bool bf16) {
  LLVMContextRef cx = LLVMGetTypeContext(LLVMTypeOf(v));
  if (!bf16) return LLVMBuildFPTrunc(b, v, LLVMHalfTypeInContext(cx), "");
  LLVMTypeRef i32 = LLVMInt32TypeInContext(cx);
  LLVMValueRef u = LLVMBuildBitCast(b, v, i32, "");
  LLVMValueRef hi = LLVMBuildLShr(b, u, LLVMConstInt(i32, 16, 0), "");
  LLVMValueRef odd = LLVMBuildAnd(b, hi, LLVMConstInt(i32, 1, 0), "");
  LLVMValueRef up = LLVMBuildAdd(b, u, LLVMBuildAdd(b, odd, LLVMConstInt(i32, 0x7fff, 0), ""), "");
  LLVMValueRef r = LLVMBuildLShr(b, up, LLVMConstInt(i32, 16, 0), "");
  LLVMValueRef nan = LLVMBuildOr(b, hi, LLVMConstInt(i32, 0x40, 0), "");
  r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), nan, r, "");
  return LLVMBuildTrunc(b, r, LLVMInt16TypeInContext(cx), "");
}
