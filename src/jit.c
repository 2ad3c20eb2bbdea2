/* jit.c -- the CPU back end's last step: LLVM modules in, callable machine code out.
 * A Jit wraps an ORC LLJIT for one target (the host CPU's name and features, or those an
 * HwModel names), runs the new pass manager over modules before they are handed over, looks
 * symbols up, and prints a module's IR or assembly for `:code NAME llvm|asm`.  Code
 * generators (gemm.c, later codegen.c) build modules in jit_context and never touch ORC.
 */
#include "config.h"
#include "dyn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

struct Jit {
  LLVMOrcLLJITRef lljit;
  LLVMOrcThreadSafeContextRef tsctx;
  LLVMContextRef ctx;             /* the context of tsctx: modules for the JIT live here */
  LLVMTargetMachineRef tm;        /* ours, for the pass pipeline and assembly printing */
  char *triple, *cpu, *features;
  char *layout;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool init_ok;

/* LLVM ends the process on an internal error it cannot return from; say what happened in
 * dyn's words first (LLVM then exits, status 1, rather than leave a bare abort). */
static void on_fatal(const char *reason) {
  fprintf(stderr, "dyn: internal error in LLVM's code generation: %s\n"
                  "dyn: this is a bug in dyn; the input that caused it helps to fix it\n", reason);
  fflush(stderr);
}

static void init_llvm(void) {
  init_ok = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
  LLVMInstallFatalErrorHandler(on_fatal);
}

/* Consume an LLVMErrorRef: true when there was none, else its message goes to err. */
static bool take_error(LLVMErrorRef e, const char *what, char *err, size_t errlen) {
  if (!e) return true;
  char *msg = LLVMGetErrorMessage(e);
  if (err && errlen) snprintf(err, errlen, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return false;
}

static LLVMTargetMachineRef make_tm(LLVMTargetRef target, const Jit *j) {
  return LLVMCreateTargetMachine(target, j->triple, j->cpu, j->features,
                                 LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                 LLVMCodeModelSmall);
}

Jit *jit_new(const HwModel *hw, char *err, size_t errlen) {
  pthread_once(&init_once, init_llvm);
  if (!init_ok) {
    snprintf(err, errlen, "LLVM has no native target in this build");
    return NULL;
  }
  Jit *j = xcalloc(1, sizeof *j);
  char *t = LLVMGetDefaultTargetTriple();
  char *norm = LLVMNormalizeTargetTriple(t);
  j->triple = xstrdup(norm);
  LLVMDisposeMessage(norm);
  LLVMDisposeMessage(t);
  /* An HwModel that names a CPU wins (cross-tuning, tests); else the host's own. */
  bool host = !hw || !hw->llvm_cpu[0] || !strcmp(hw->llvm_cpu, "host");
  if (host) {
    char *c = LLVMGetHostCPUName(), *f = LLVMGetHostCPUFeatures();
    j->cpu = xstrdup(c);
    j->features = xstrdup(f);
    LLVMDisposeMessage(c);
    LLVMDisposeMessage(f);
  } else {
    j->cpu = xstrdup(hw->llvm_cpu);
    j->features = xstrdup(hw->llvm_features);
  }
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(j->triple, &target, &msg)) {
    snprintf(err, errlen, "no LLVM target for %s: %s", j->triple, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    jit_free(j);
    return NULL;
  }
  j->tm = make_tm(target, j);
  LLVMTargetMachineRef jtm = make_tm(target, j);   /* owned by the builder below */
  if (!j->tm || !jtm) {
    snprintf(err, errlen, "cannot make a target machine for cpu %s", j->cpu);
    if (jtm) LLVMDisposeTargetMachine(jtm);
    jit_free(j);
    return NULL;
  }
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(j->tm);
  j->layout = LLVMCopyStringRepOfTargetData(td);
  LLVMDisposeTargetData(td);

  LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jtm));
  if (!take_error(LLVMOrcCreateLLJIT(&j->lljit, b), "creating the JIT", err, errlen)) {
    j->lljit = NULL;
    jit_free(j);
    return NULL;
  }
  /* Generated code may call libc (memset/memcpy that LLVM forms) and the runtime's C ABI
   * (dyn_parallel_for): let it see the process's symbols. */
  LLVMOrcDefinitionGeneratorRef gen;
  if (!take_error(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                      &gen, LLVMOrcLLJITGetGlobalPrefix(j->lljit), NULL, NULL),
                  "process symbols", err, errlen)) {
    jit_free(j);
    return NULL;
  }
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j->lljit), gen);
  j->tsctx = LLVMOrcCreateNewThreadSafeContext();
  j->ctx = LLVMOrcThreadSafeContextGetContext(j->tsctx);
  return j;
}

void jit_free(Jit *j) {
  if (!j) return;
  if (j->lljit) LLVMConsumeError(LLVMOrcDisposeLLJIT(j->lljit));
  if (j->tsctx) LLVMOrcDisposeThreadSafeContext(j->tsctx);
  if (j->tm) LLVMDisposeTargetMachine(j->tm);
  if (j->layout) LLVMDisposeMessage(j->layout);
  free(j->triple);
  free(j->cpu);
  free(j->features);
  free(j);
}

struct LLVMOpaqueContext *jit_context(Jit *j) { return j->ctx; }
const char *jit_cpu_name(const Jit *j) { return j->cpu; }
const char *jit_cpu_features(const Jit *j) { return j->features; }

struct LLVMOpaqueModule *jit_module_new(Jit *j, struct LLVMOpaqueContext *ctx,
                                        const char *name) {
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext(name, ctx ? ctx : j->ctx);
  LLVMSetTarget(m, j->triple);
  LLVMSetDataLayout(m, j->layout);
  return m;
}

bool jit_optimize(Jit *j, struct LLVMOpaqueModule *m, const char *pipeline, char *err,
                  size_t errlen) {
  LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(m, pipeline ? pipeline : "default<O3>", j->tm, o);
  LLVMDisposePassBuilderOptions(o);
  return take_error(e, "optimising", err, errlen);
}

bool jit_add_module(Jit *j, struct LLVMOpaqueModule *m, char *err, size_t errlen) {
  char *msg = NULL;
  if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    snprintf(err, errlen, "internal error: generated module is invalid: %s", msg);
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(m);
    return false;
  }
  LLVMDisposeMessage(msg);
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, j->tsctx);
  LLVMErrorRef e = LLVMOrcLLJITAddLLVMIRModule(j->lljit,
                                               LLVMOrcLLJITGetMainJITDylib(j->lljit), tsm);
  if (e) LLVMOrcDisposeThreadSafeModule(tsm);
  return take_error(e, "adding a module to the JIT", err, errlen);
}

/* jit_add_modules: worker threads take modules from a shared counter; each optimises and
 * emits an object file with its own TargetMachine (one is not safe to share). */
typedef struct CompileJob {
  LLVMModuleRef m;
  LLVMMemoryBufferRef obj;
  char err[256];
} CompileJob;

typedef struct CompileQueue {
  Jit *j;
  const char *pipeline;
  CompileJob *jobs;
  int n;
  _Atomic int next;
} CompileQueue;

static void compile_job(CompileQueue *q, LLVMTargetMachineRef tm, CompileJob *cj) {
  char *msg = NULL;
  if (LLVMVerifyModule(cj->m, LLVMReturnStatusAction, &msg)) {
    snprintf(cj->err, sizeof cj->err, "internal error: generated module is invalid: %s", msg);
    LLVMDisposeMessage(msg);
    return;
  }
  LLVMDisposeMessage(msg);
  msg = NULL;
  LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(cj->m, q->pipeline ? q->pipeline : "default<O3>", tm, o);
  LLVMDisposePassBuilderOptions(o);
  if (!take_error(e, "optimising", cj->err, sizeof cj->err)) return;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, cj->m, LLVMObjectFile, &msg, &cj->obj)) {
    snprintf(cj->err, sizeof cj->err, "code generation: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    cj->obj = NULL;
  }
}

static void *compile_worker(void *arg) {
  CompileQueue *q = arg;
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(q->j->triple, &target, &msg)) {
    LLVMDisposeMessage(msg);
    return NULL;                      /* the jobs it would have taken report no object */
  }
  LLVMTargetMachineRef tm = make_tm(target, q->j);
  for (int i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) compile_job(q, tm, &q->jobs[i]);
  LLVMDisposeTargetMachine(tm);
  return NULL;
}

bool jit_add_modules(Jit *j, struct LLVMOpaqueModule **mods, int n, const char *pipeline,
                     char *err, size_t errlen) {
  if (n <= 0) return true;
  CompileQueue q = { .j = j, .pipeline = pipeline, .n = n };
  q.jobs = xcalloc((size_t)n, sizeof *q.jobs);
  for (int i = 0; i < n; i++) {
    q.jobs[i].m = mods[i];
    snprintf(q.jobs[i].err, sizeof q.jobs[i].err, "no code generated");
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nth = (int)(cpus < 1 ? 1 : cpus < n ? cpus : n);
  pthread_t *th = xcalloc((size_t)nth, sizeof *th);
  bool *started = xcalloc((size_t)nth, sizeof *started);
  for (int i = 1; i < nth; i++) started[i] = !pthread_create(&th[i], NULL, compile_worker, &q);
  compile_worker(&q);                 /* the caller's thread works too */
  for (int i = 1; i < nth; i++)
    if (started[i]) pthread_join(th[i], NULL);
  bool ok = true;
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->lljit);
  for (int i = 0; i < n; i++) {
    LLVMDisposeModule(mods[i]);
    if (ok && !q.jobs[i].obj) {
      snprintf(err, errlen, "%s", q.jobs[i].err);
      ok = false;
    }
    if (!q.jobs[i].obj) continue;
    if (!ok) {
      LLVMDisposeMemoryBuffer(q.jobs[i].obj);
      continue;
    }
    /* The JIT owns the buffer from here, on success or failure. */
    ok = take_error(LLVMOrcLLJITAddObjectFile(j->lljit, jd, q.jobs[i].obj), "adding code",
                    err, errlen);
  }
  free(q.jobs);
  free(th);
  free(started);
  return ok;
}

void *jit_lookup(Jit *j, const char *name, char *err, size_t errlen) {
  LLVMOrcExecutorAddress addr = 0;
  if (!take_error(LLVMOrcLLJITLookup(j->lljit, &addr, name), name, err, errlen)) return NULL;
  return (void *)(uintptr_t)addr;
}

bool jit_define_symbol(Jit *j, const char *name, void *addr, char *err, size_t errlen) {
  /* The pair's struct type was renamed across LLVM releases; its pointer typedef was not. */
  __typeof__(*(LLVMOrcCSymbolMapPairs)0) pair = {
    .Name = LLVMOrcLLJITMangleAndIntern(j->lljit, name),
    .Sym = { .Address = (LLVMOrcExecutorAddress)(uintptr_t)addr,
             .Flags = { .GenericFlags = LLVMJITSymbolGenericFlagsExported |
                                        LLVMJITSymbolGenericFlagsCallable } },
  };
  LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(&pair, 1);
  LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j->lljit), mu);
  if (e) LLVMOrcDisposeMaterializationUnit(mu);
  return take_error(e, name, err, errlen);
}

void jit_print_ir(struct LLVMOpaqueModule *m, Buf *out) {
  char *s = LLVMPrintModuleToString(m);
  buf_puts(out, s);
  LLVMDisposeMessage(s);
}

bool jit_print_asm(Jit *j, struct LLVMOpaqueModule *m, Buf *out, char *err, size_t errlen) {
  LLVMMemoryBufferRef mb = NULL;
  char *msg = NULL;
  /* Code generation mutates the module: callers pass one they will not JIT. */
  if (LLVMTargetMachineEmitToMemoryBuffer(j->tm, m, LLVMAssemblyFile, &msg, &mb)) {
    snprintf(err, errlen, "emitting assembly: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return false;
  }
  buf_putn(out, LLVMGetBufferStart(mb), LLVMGetBufferSize(mb));
  LLVMDisposeMemoryBuffer(mb);
  return true;
}
