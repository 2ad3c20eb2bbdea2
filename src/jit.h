/* jit.h -- the JIT (jit.c) for the CPU back end alone: cpu.c and the contraction engine
 * (gemm*.c) build LLVM modules for one target and load their code through it.  dyn_int.h keeps
 * what crosses the subsystems; this header is private to the compiled CPU path, which is
 * built only with LLVM.
 */
#ifndef DYN_JIT_H
#define DYN_JIT_H

#include "dyn_int.h"

/* jit.c: ORC LLJIT for one target.  LLVM types appear only as opaque struct pointers (the
 * same types as LLVMContextRef / LLVMModuleRef), so this header needs no LLVM headers. */
struct LLVMOpaqueContext;
struct LLVMOpaqueModule;
typedef struct Jit Jit;
/* A JIT for hw's llvm_cpu and llvm_features, or the host CPU's when hw is NULL or names
 * "" or "host".  NULL with a message when LLVM cannot target it.  Free with jit_free.
 * For a model this CPU cannot run (jit_runnable), the Jit builds, optimises and prints
 * modules for that model's instruction set and CPU, and never loads code: jit_add_module(s),
 * jit_lookup and jit_define_symbol fail.  Code a runnable model's Jit makes uses no
 * extension the host lacks, whatever its CPU name implies. */
Jit *jit_new(const HwModel *hw, char *err, size_t errlen);
/* Can this CPU run code for hw (same instruction set, every extension in llvm_features)?
 * False with the reason ("zen5 needs avx512f, avx512dq, ..., which this CPU lacks"). */
bool jit_runnable(const HwModel *hw, char *why, size_t whylen);
bool jit_can_run(const Jit *j);           /* was it made for a runnable model? */
void jit_free(Jit *j);                                /* NULL-safe; frees all JIT'd code */
const char *jit_cpu_name(const Jit *j);
const char *jit_cpu_features(const Jit *j);
/* The context modules for this JIT are built in (not thread-safe: one builder at a time). */
struct LLVMOpaqueContext *jit_context(Jit *j);
/* A module with the JIT's triple and data layout, in ctx (NULL: jit_context). */
struct LLVMOpaqueModule *jit_module_new(Jit *j, struct LLVMOpaqueContext *ctx,
                                        const char *name);
/* Run a new-pass-manager pipeline (NULL: "default<O3>") with the JIT's target machine. */
bool jit_optimize(Jit *j, struct LLVMOpaqueModule *m, const char *pipeline, char *err,
                  size_t errlen);
/* Verify and hand over a module built in jit_context; the JIT owns it even on failure.
 * With code non-NULL, *code names the module's machine code, which jit_code_free removes
 * from the JIT (before jit_free, and once nothing runs it); with NULL it stays until jit_free. */
typedef struct JitCode JitCode;
bool jit_add_module(Jit *j, struct LLVMOpaqueModule *m, JitCode **code, char *err, size_t errlen);
void jit_code_free(JitCode *code);                    /* NULL-safe */
/* Optimise (pipeline as above) and compile n modules in parallel (up to one thread per
 * CPU, the caller's included), and add the code.  Each module must be in its own context
 * (LLVMContextCreate), which the caller disposes afterwards; the modules are disposed
 * here, on success or failure. */
bool jit_add_modules(Jit *j, struct LLVMOpaqueModule **mods, int n, const char *pipeline,
                     char *err, size_t errlen);
/* The address of a symbol (compiles its module on first use); NULL with a message. */
void *jit_lookup(Jit *j, const char *name, char *err, size_t errlen);
/* Make a C function or datum visible to generated code under name. */
bool jit_define_symbol(Jit *j, const char *name, void *addr, char *err, size_t errlen);
/* Text of a module: its IR, or its assembly for the JIT's CPU (code generation mutates the
 * module, so pass one that will not be JIT'd).  Appended to out. */
void jit_print_ir(struct LLVMOpaqueModule *m, Buf *out);
bool jit_print_asm(Jit *j, struct LLVMOpaqueModule *m, Buf *out, char *err, size_t errlen);

#endif
