/* jit.c -- the CPU back end's last step: LLVM modules in, callable machine code out.
 * A Jit wraps an ORC LLJIT for one target (the host CPU's name and features, or those an
 * HwModel names), runs the new pass manager over modules before they are handed over, looks
 * symbols up, and prints a module's IR or assembly for `:code NAME llvm|asm`.  Code
 * generators (cpu.c, gemm.c) build modules in jit_context and never touch ORC.
 */
#include "config.h"
#include "dyn_int.h"
#include "jit.h"

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

/* Code for another instruction set (an Arm model on an x86 host) is only printed, but its
 * target must be registered: every target this LLVM was built with, once, on first need. */
static pthread_once_t all_once = PTHREAD_ONCE_INIT;
static void init_all_targets(void) {
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
}

static bool is_host(const HwModel *hw) {
  return !hw || !hw->llvm_cpu[0] || !strcmp(hw->llvm_cpu, "host");
}

/* The host's triple (malloc'd), and the length of its architecture part ("x86_64"). */
static char *host_triple(size_t *archlen) {
  char *t = LLVMGetDefaultTargetTriple();
  char *norm = LLVMNormalizeTargetTriple(t);
  char *r = xstrdup(norm);
  LLVMDisposeMessage(norm);
  LLVMDisposeMessage(t);
  *archlen = strcspn(r, "-");
  return r;
}

/* The host's extensions as LLVM names them (malloc'd).  On Arm64 LLVM reads them from
 * /proc/cpuinfo, which QEMU's user mode shows as its own host's (x86) file, so host detection
 * (hw_arm.c), which asks the kernel's hwcaps, says what this core has. */
static char *host_features(void) {
#if defined(__aarch64__)
  HwModel *h = xmalloc(sizeof *h);
  hw_detect_host(h);
  char *r = xstrdup(h->llvm_features);
  free(h);
  return r;
#else
  char *f = LLVMGetHostCPUFeatures(), *r = xstrdup(f);
  LLVMDisposeMessage(f);
  return r;
#endif
}

/* Is feature f (without its sign, n bytes) enabled in an LLVM feature list "+a,-b,..."? */
static bool has_feature(const char *list, const char *f, size_t n) {
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (len == n + 1 && p[0] == '+' && !strncmp(p + 1, f, n)) return true;
    p += len + (p[len] == ',');
  }
  return false;
}

bool jit_runnable(const HwModel *hw, char *why, size_t whylen) {
  if (why && whylen) why[0] = 0;
  if (is_host(hw)) return true;
  if (!strcmp(hw->kind, "gpu")) {
    snprintf(why, whylen, "%s is a GPU", hw->name);
    return false;
  }
  size_t alen;
  char *triple = host_triple(&alen);
  bool same = hw->arch[0] ? strlen(hw->arch) == alen && !strncmp(hw->arch, triple, alen) : true;
  if (!same) {
    snprintf(why, whylen, "%s is an %s CPU and this one is %.*s", hw->name, hw->arch, (int)alen, triple);
    free(triple);
    return false;
  }
  free(triple);
  /* Every extension the model asks for must be one the host has. */
  char *host = host_features();
  Buf miss = {0};
  int nmiss = 0;
  for (const char *p = hw->llvm_features; *p;) {
    size_t len = strcspn(p, ",");
    if (len > 1 && p[0] == '+' && !has_feature(host, p + 1, len - 1)) {
      if (nmiss < 6) buf_printf(&miss, "%s%.*s", nmiss ? ", " : "", (int)len - 1, p + 1);
      nmiss++;
    }
    p += len + (p[len] == ',');
  }
  free(host);
  if (nmiss) snprintf(why, whylen, "%s needs %s%s, which this CPU lacks", hw->name, miss.s, nmiss > 6 ? ", ..." : "");
  buf_free(&miss);
  return nmiss == 0;
}

/* What this LLVM makes of a CPU name and a feature list: LLVM's C API cannot ask whether it
 * knows a CPU, and a name it does not know (a typo in an hw file, znver5 before LLVM 19)
 * leaves an x86 target without 64-bit mode, which ends the process at the first compile.
 * LLVM says so on standard error when a target machine is made, so one is made with that
 * stream caught: an unknown CPU gives way to the model's llvm_cpu_fallback (then
 * "generic"), and unknown features are dropped, once per model and Jit. */
static bool probe_tm(LLVMTargetRef target, const char *triple, const char *cpu, const char *features,
                     Buf *said) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = tmp ? dup(2) : -1;
  if (saved < 0 || dup2(fileno(tmp), 2) < 0) {
    if (saved >= 0) close(saved);
    if (tmp) fclose(tmp);
    return false;
  }
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelAggressive,
                                                    LLVMRelocPIC, LLVMCodeModelSmall);
  if (tm) LLVMDisposeTargetMachine(tm);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  char line[512];
  while (fgets(line, sizeof line, tmp)) buf_puts(said, line);
  fclose(tmp);
  return true;
}

/* cpu and features (malloc'd, replaced) as this LLVM knows them. */
static void known_cpu(LLVMTargetRef target, const char *triple, const HwModel *hw, char **cpu, char **features) {
  Buf said = {0};
  if (!probe_tm(target, triple, *cpu, *features, &said) || !said.s) return;
  if (strstr(said.s, "is not a recognized processor")) {
    const char *fb = hw && hw->llvm_cpu_fallback[0] && strcmp(hw->llvm_cpu_fallback, *cpu) ? hw->llvm_cpu_fallback : "generic";
    free(*cpu);
    *cpu = xstrdup(fb);
    buf_free(&said);
    if (!probe_tm(target, triple, *cpu, *features, &said) || !said.s) return;
    if (strstr(said.s, "is not a recognized processor")) {
      free(*cpu);
      *cpu = xstrdup("generic");
    }
  }
  /* "'+bogus' is not a recognized feature for this target (ignoring feature)" */
  Buf kept = {0};
  for (const char *p = *features; *p;) {
    size_t len = strcspn(p, ",");
    char pat[96];
    snprintf(pat, sizeof pat, "'%.*s' is not a recognized feature", (int)(len < 80 ? len : 80), p);
    if (len && !strstr(said.s, pat)) buf_printf(&kept, "%s%.*s", kept.len ? "," : "", (int)len, p);
    p += len + (p[len] == ',');
  }
  free(*features);
  *features = kept.s ? kept.s : xstrdup("");
  buf_free(&said);
}

Jit *jit_new(const HwModel *hw, char *err, size_t errlen) {
  pthread_once(&init_once, init_llvm);
  if (!init_ok) {
    snprintf(err, errlen, "LLVM has no native target in this build");
    return NULL;
  }
  Jit *j = xcalloc(1, sizeof *j);
  size_t alen;
  j->triple = host_triple(&alen);
  /* An HwModel that names a CPU wins (cross-tuning, tests); else the host's own. */
  bool host = is_host(hw);
  bool run = jit_runnable(hw, NULL, 0);
  if (host) {
    char *c = LLVMGetHostCPUName();
    j->cpu = xstrdup(c);
    j->features = host_features();
    LLVMDisposeMessage(c);
  } else if (run) {
    /* The model's CPU, its extensions, and every extension the host lacks turned off: a
     * CPU name implies extensions of its own (znver5 has AVX512-VP2INTERSECT, which no
     * Sapphire Rapids has), and code that runs here must use none the host lacks. */
    char *f = host_features();
    Buf b = {0};
    buf_puts(&b, hw->llvm_features);
    for (const char *p = f; *p;) {
      size_t len = strcspn(p, ",");
      if (len > 1 && p[0] == '-') buf_printf(&b, "%s%.*s", b.len ? "," : "", (int)len, p);
      p += len + (p[len] == ',');
    }
    free(f);
    j->cpu = xstrdup(hw->llvm_cpu);
    j->features = b.s ? b.s : xstrdup("");
  } else {
    j->cpu = xstrdup(hw->llvm_cpu);
    j->features = xstrdup(hw->llvm_features);
    if (hw->arch[0] && (strlen(hw->arch) != alen || strncmp(hw->arch, j->triple, alen))) {
      /* "aarch64-unknown-linux-gnu" on an x86_64-pc-linux-gnu host: the host's system */
      const char *sys = strchr(j->triple + alen + 1, '-');
      Buf t = {0};
      buf_printf(&t, "%s-unknown%s", hw->arch, sys ? sys : "-linux-gnu");
      free(j->triple);
      j->triple = t.s;
      pthread_once(&all_once, init_all_targets);
    }
  }
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(j->triple, &target, &msg)) {
    snprintf(err, errlen, "no LLVM target for %s: %s", j->triple, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    jit_free(j);
    return NULL;
  }
  if (!host) known_cpu(target, j->triple, hw, &j->cpu, &j->features);
  j->tm = make_tm(target, j);
  if (!j->tm) {
    snprintf(err, errlen, "cannot make a target machine for cpu %s", j->cpu);
    jit_free(j);
    return NULL;
  }
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(j->tm);
  j->layout = LLVMCopyStringRepOfTargetData(td);
  LLVMDisposeTargetData(td);
  j->tsctx = LLVMOrcCreateNewThreadSafeContext();
  j->ctx = LLVMOrcThreadSafeContextGetContext(j->tsctx);
  /* A model this CPU cannot run gets no JIT: its modules are built, optimised and printed,
   * never loaded (jit_add_module and jit_lookup refuse). */
  if (!run) return j;

  LLVMTargetMachineRef jtm = make_tm(target, j);   /* owned by the builder below */
  if (!jtm) {
    snprintf(err, errlen, "cannot make a target machine for cpu %s", j->cpu);
    jit_free(j);
    return NULL;
  }
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
  return j;
}

bool jit_can_run(const Jit *j) { return j->lljit != NULL; }

/* What the loading entry points say on a Jit for a model this CPU cannot run. */
static bool refuse(const Jit *j, char *err, size_t errlen) {
  if (j->lljit) return false;
  snprintf(err, errlen, "code for %s (%s) cannot run on this CPU", j->cpu, j->triple);
  return true;
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

bool jit_add_module(Jit *j, struct LLVMOpaqueModule *m, JitCode **code, char *err, size_t errlen) {
  if (code) *code = NULL;
  if (refuse(j, err, errlen)) {
    LLVMDisposeModule(m);
    return false;
  }
  char *msg = NULL;
  if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    snprintf(err, errlen, "internal error: generated module is invalid: %s", msg);
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(m);
    return false;
  }
  LLVMDisposeMessage(msg);
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, j->tsctx);
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->lljit);
  LLVMErrorRef e;
  if (code) {
    /* a tracker of its own, so that the code can be removed again (jit_code_free) */
    LLVMOrcResourceTrackerRef rt = LLVMOrcJITDylibCreateResourceTracker(jd);
    e = LLVMOrcLLJITAddLLVMIRModuleWithRT(j->lljit, rt, tsm);
    if (e) LLVMOrcReleaseResourceTracker(rt);
    else *code = (JitCode *)rt;
  } else {
    e = LLVMOrcLLJITAddLLVMIRModule(j->lljit, jd, tsm);
  }
  if (e) LLVMOrcDisposeThreadSafeModule(tsm);
  return take_error(e, "adding a module to the JIT", err, errlen);
}

void jit_code_free(JitCode *code) {
  if (!code) return;
  LLVMOrcResourceTrackerRef rt = (LLVMOrcResourceTrackerRef)code;
  LLVMConsumeError(LLVMOrcResourceTrackerRemove(rt));
  LLVMOrcReleaseResourceTracker(rt);
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

typedef struct CompileWorker {
  CompileQueue *q;
  LLVMTargetMachineRef tm;
} CompileWorker;

static void *compile_worker(void *arg) {
  CompileWorker *w = arg;
  for (int i; (i = atomic_fetch_add(&w->q->next, 1)) < w->q->n;) compile_job(w->q, w->tm, &w->q->jobs[i]);
  return NULL;
}

bool jit_add_modules(Jit *j, struct LLVMOpaqueModule **mods, int n, const char *pipeline,
                     char *err, size_t errlen) {
  if (n <= 0) return true;
  if (refuse(j, err, errlen)) {
    for (int i = 0; i < n; i++) LLVMDisposeModule(mods[i]);
    return false;
  }
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
  /* Each worker's target machine is made here, one after another, before any worker starts:
   * the workers then share nothing of LLVM's but the read-only target registry. */
  CompileWorker *w = xcalloc((size_t)nth, sizeof *w);
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(j->triple, &target, &msg)) {
    LLVMDisposeMessage(msg);
    nth = 0;                          /* every job reports no object */
  }
  for (int i = 0; i < nth; i++) w[i] = (CompileWorker){ &q, make_tm(target, j) };
  for (int i = 1; i < nth; i++) started[i] = !pthread_create(&th[i], NULL, compile_worker, &w[i]);
  if (nth > 0) compile_worker(&w[0]);  /* the caller's thread works too */
  for (int i = 1; i < nth; i++)
    if (started[i]) pthread_join(th[i], NULL);
  for (int i = 0; i < nth; i++) LLVMDisposeTargetMachine(w[i].tm);
  free(w);
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
  if (refuse(j, err, errlen)) return NULL;
  LLVMOrcExecutorAddress addr = 0;
  if (!take_error(LLVMOrcLLJITLookup(j->lljit, &addr, name), name, err, errlen)) return NULL;
  return (void *)(uintptr_t)addr;
}

bool jit_define_symbol(Jit *j, const char *name, void *addr, char *err, size_t errlen) {
  if (refuse(j, err, errlen)) return false;
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
