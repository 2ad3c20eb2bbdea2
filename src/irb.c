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
