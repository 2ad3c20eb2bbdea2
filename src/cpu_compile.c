/* cpu_compile.c -- the compiled CPU back end's life: making and freeing it, compiling a
 * program (its contractions to the GEMM engine, its loop kernels through cpu.c's module into
 * the JIT), the streaming twins and strided variants compiled on first need, :code, and the
 * calibration of the micro-kernel.  cpu.c generates the code this file compiles; cpu_rt.c
 * runs it.
 */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "cpu_int.h"
#include "gemm.h"
#include "jit.h"
#include "pool.h"
#include "vmath.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm/Config/llvm-config.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* InstCombine in a pipeline of our own: since LLVM 18 a bare "instcombine" checks that one
 * iteration reached a fixpoint and ends the process when it did not (a where() over a
 * reduction beside inlined sigmoids did); the standard pipelines turn that check off. */
#if LLVM_VERSION_MAJOR >= 18
#define INSTCOMBINE "instcombine<no-verify-fixpoint>"
#else
#define INSTCOMBINE "instcombine"
#endif

/* The slots whose bytes decide whether a kernel with a twin streams: its result and the
 * tensors it reads (not its per-row locals).  Found once, at compile time. */
static void stream_footprint(const Program *p, CKernel *ck) {
  if (ck->nt_slot < 0) return;
  bool *mark = xcalloc((size_t)p->nslots + 1, sizeof(bool));
  for (int s = 0; s < ck->kn->nstages; s++) kexpr_mark_loads(ck->kn->stages[s].expr, mark);
  mark[ck->nt_slot] = true;
  ck->foot = xmalloc(sizeof(int) * ((size_t)p->nslots + 1));
  for (int i = 0; i < p->nslots; i++)
    if (mark[i] && p->slots[i].kind != SLOT_LOCAL) ck->foot[ck->nfoot++] = i;
  free(mark);
}

/* The inputs a loop kernel reads (cpu_rt.c picks its strided variant by their strides). */
static void input_reads(const Program *p, CKernel *ck) {
  bool *mark = xcalloc((size_t)p->nslots + 1, sizeof(bool));
  for (int s = 0; s < ck->kn->nstages; s++) kexpr_mark_loads(ck->kn->stages[s].expr, mark);
  ck->ins = xmalloc(sizeof(int) * ((size_t)p->nslots + 1));
  for (int i = 0; i < p->nslots; i++)
    if (mark[i] && p->slots[i].kind == SLOT_INPUT) ck->ins[ck->nins++] = i;
  free(mark);
}

/* Does ptr come from bufs[slot]: a GEP chain over `load (gep bufs, slot)` with bufs loaded
 * from field 0 of the kernel's context? */
static bool ptr_of_slot(LLVMValueRef fn, LLVMValueRef ptr, int slot) {
  while (LLVMIsAGetElementPtrInst(ptr)) ptr = LLVMGetOperand(ptr, 0);
  if (!LLVMIsALoadInst(ptr)) return false;
  LLVMValueRef at = LLVMGetOperand(ptr, 0), ctx = LLVMGetParam(fn, 0);
  long long off = 0;                      /* bytes: optimisation rewrites GEPs over i8 */
  if (LLVMIsAGetElementPtrInst(at)) {
    LLVMTypeRef et = LLVMGetGEPSourceElementType(at);
    int size = LLVMGetTypeKind(et) == LLVMPointerTypeKind ? (int)sizeof(void *)
               : LLVMGetTypeKind(et) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(et) == 8 ? 1 : 0;
    if (!size || LLVMGetNumOperands(at) != 2 || !LLVMIsAConstantInt(LLVMGetOperand(at, 1))) return false;
    off = LLVMConstIntGetSExtValue(LLVMGetOperand(at, 1)) * size;
    at = LLVMGetOperand(at, 0);
  }
  return off == (long long)slot * (long long)sizeof(void *) && LLVMIsALoadInst(at) && LLVMGetOperand(at, 0) == ctx;
}

/* Mark the twins' vector stores to their result as streaming (after optimisation). */
static void mark_streaming(LLVMModuleRef m, const CKernel *ck, int nk) {
  LLVMContextRef cx = LLVMGetModuleContext(m);
  unsigned kind = LLVMGetMDKindIDInContext(cx, "nontemporal", 11);
  LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(cx), 1, 0));
  LLVMValueRef md = LLVMMetadataAsValue(cx, LLVMMDNodeInContext2(cx, &one, 1));
  for (int i = 0; i < nk; i++) {
    if (ck[i].gemm || ck[i].nt_slot < 0) continue;
    char name[80];
    snprintf(name, sizeof name, "%s_nt", ck[i].sym);
    LLVMValueRef fn = LLVMGetNamedFunction(m, name);
    if (!fn) continue;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
        if (!LLVMIsAStoreInst(in) || LLVMGetVolatile(in)) continue;
        LLVMTypeRef t = LLVMTypeOf(LLVMGetOperand(in, 0));
        if (LLVMGetTypeKind(t) != LLVMVectorTypeKind || !ptr_of_slot(fn, LLVMGetOperand(in, 1), ck[i].nt_slot)) continue;
        unsigned bytes = LLVMGetVectorSize(t) * (LLVMGetTypeKind(LLVMGetElementType(t)) == LLVMDoubleTypeKind ? 8 : 4);
        if (bytes < 16 || bytes > 64 || (bytes & (bytes - 1))) continue;
        LLVMSetAlignment(in, bytes);
        LLVMSetMetadata(in, kind, md);
      }
  }
}
/* Optimise a module of kernels built with prefix, then inline the math helpers that the
 * vectoriser has seen as calls (vmath.c's AVX-512 exp), and drop them. */
static bool optimize(CpuBackend *be, LLVMModuleRef m, const char *prefix, char *err, size_t errlen) {
  if (!jit_optimize(be->jit, m, NULL, err, errlen)) return false;
  return !vmath_release(m, prefix) ||
         jit_optimize(be->jit, m, "always-inline,globaldce,function(" INSTCOMBINE ",simplifycfg)", err, errlen);
}
CpuBackend *cpu_backend_new(const HwModel *hw, int threads, char *err, size_t errlen) {
  CpuBackend *be = xcalloc(1, sizeof *be);
  be->hw = *hw;
  be->jit = jit_new(hw, err, errlen);
  if (!be->jit) {
    free(be);
    return NULL;
  }
  be->pool = pool_new(threads);
  return be;
}

void cpu_backend_free(CpuBackend *be) {
  if (!be) return;
  gemm_free(be->gemm[3]);
  gemm_free(be->gemm[2]);
  gemm_free(be->gemm[0]);
  gemm_free(be->gemm[1]);
  pool_free(be->pool);
  jit_free(be->jit);
  free(be);
}

void cpu_backend_set_threads(CpuBackend *be, int threads) { pool_set_threads(be->pool, threads); }
Pool *cpu_backend_pool(CpuBackend *be) { return be->pool; }
const char *cpu_backend_cpu(CpuBackend *be) { return jit_cpu_name(be->jit); }
bool cpu_runnable(const HwModel *hw, char *why, size_t whylen) { return jit_runnable(hw, why, whylen); }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

GemmKernels *cpu_gemm_for(CpuBackend *be, DynElem e, char *err, size_t errlen) {
  int i = e == DYN_F64 ? 1 : e == DYN_F16 ? 2 : e == DYN_BF16 ? 3 : 0;
  if (be->gemm[i]) return be->gemm[i];
  if (i < 2) {
    be->gemm[i] = gemm_compile(e, &be->hw, err, errlen);
    /* dyn --calibrate's sustained rate of all cores at once, a core's share of it (f64 at
     * half the f32 rate), where the model's peak is that measurement */
    if (be->gemm[i] && be->hw.prov[HW_F_PEAK] == HW_MEASURED && be->hw.cores > 0)
      gemm_sustain(be->gemm[i], be->hw.peak_gflops_f32 / be->hw.cores / (i == 1 ? 2 : 1));
    return be->gemm[i];
  }
  GemmKernels *wide = cpu_gemm_for(be, DYN_F32, err, errlen);
  return be->gemm[i] = wide ? gemm_half_compile(e, wide, err, errlen) : NULL;
}

/* ---- contractions: what the GEMM engine runs instead of loops ---- */

/* A contraction the middle end recognised (contract.c) with nothing around the sum, its
 * operands tensors in memory: the GEMM engine runs it whole. */
static bool match_gemm(const Program *p, const Kernel *kn, CKernel *ck) {
  const Contraction *c = kn->con;
  if (!c || c->epilogue) return false;
  if (p->slots[c->a_slot].kind == SLOT_LOCAL || p->slots[c->b_slot].kind == SLOT_LOCAL) return false;
  ck->gemm = true;
  ck->g_a = c->a_slot;
  ck->g_b = c->b_slot;
  ck->g_c = c->c_slot;
  ck->g_ax[0] = c->batch;
  ck->g_ax[1] = c->m;
  ck->g_ax[2] = c->n;
  ck->g_ax[3] = c->k;
  ck->g_nout = c->nouter;
  memcpy(ck->g_out, c->outer, sizeof c->outer);
  int pos[6] = { c->apos[1], c->apos[2], c->apos[0], c->bpos[1], c->bpos[2], c->bpos[0] };
  memcpy(ck->g_pos, pos, sizeof pos);
  return true;
}

/* A windowed contraction (a convolution) that cpu_rt.c can run as gathered GEMMs
 * (kexpr_window_contraction), its operands and result tensors in memory of its element type. */
static bool match_window(const Program *p, const Kernel *kn, CKernel *ck) {
  if (kn->nstages != 1 || kn->nouter) return false;
  const Stage *st = &kn->stages[0];
  WinContraction w;
  if (!kexpr_window_contraction(st->expr, st->axes, st->naxes, &w)) return false;
  DynElem e = st->expr->ty;
  const Slot *sa = &p->slots[w.a->slot], *sb = &p->slots[w.b->slot], *sc = &p->slots[st->out];
  if (sa->kind == SLOT_LOCAL || sb->kind == SLOT_LOCAL || sc->kind == SLOT_LOCAL ||
      sa->type.elem != e || sb->type.elem != e || sc->type.elem != e)
    return false;
  ck->win = true;
  ck->w = w;
  ck->g_a = w.a->slot;
  ck->g_b = w.b->slot;
  ck->g_c = st->out;
  return true;
}

CpuProgram *cpu_compile(CpuBackend *be, const Program *p, char *err, size_t errlen) {
  double t0 = now_ms();
  CpuProgram *cp = xcalloc(1, sizeof *cp);
  cp->p = p;
  cp->nk = p->nkernels;
  cp->k = xcalloc((size_t)cp->nk + 1, sizeof(CKernel));
  bool any_loop = false;
  for (int i = 0; i < cp->nk; i++) {
    cp->k[i].kn = &p->kernels[i];
    cp->k[i].par_axis = cpu_par_axis(&p->kernels[i]);
    cp->k[i].sub_axis = cpu_sub_axis(p, &p->kernels[i], cp->k[i].par_axis, cp->k[i].sub_dim, &cp->k[i].sub_mask);
    if (match_gemm(p, &p->kernels[i], &cp->k[i])) {
      if (!cpu_gemm_for(be, p->slots[cp->k[i].g_c].type.elem, err, errlen)) goto fail;
    } else {
      any_loop = true;
      match_window(p, &p->kernels[i], &cp->k[i]);
    }
  }
  cpu_attn_find(cp);   /* attention chains, which may run fused (cpu_attn.c) */
  if (any_loop) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dyn%d_%s", be->modules++, p->name);
    for (char *c = prefix; *c; c++)
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) *c = '_';
    LLVMContextRef cx = jit_context(be->jit);
    double t1 = now_ms();
    LLVMModuleRef m = cpu_build_module(be, cx, p, cp->k, cp->nk, prefix, true, false, false);
    char *verr = NULL;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &verr)) {
      snprintf(err, errlen, "internal error: generated code for %s does not verify: %.300s", p->name, verr ? verr : "");
      LLVMDisposeMessage(verr);
      LLVMDisposeModule(m);
      goto fail;
    }
    LLVMDisposeMessage(verr);
    double t2 = now_ms();
    if (!optimize(be, m, prefix, err, errlen)) {
      LLVMDisposeModule(m);
      goto fail;
    }
    double t3 = now_ms();
    if (!jit_can_run(be->jit)) {
      /* a model this CPU cannot run: built and optimised as for running (what :sched and
       * :code show), never loaded */
      LLVMDisposeModule(m);
      cp->compile_ms = now_ms() - t0;
      return cp;
    }
    if (!jit_add_module(be->jit, m, &cp->code, err, errlen)) goto fail;
    for (int i = 0; i < cp->nk; i++) {
      if (cp->k[i].gemm) continue;
      cp->k[i].fn = (KernelFn)jit_lookup(be->jit, cp->k[i].sym, err, errlen);
      if (!cp->k[i].fn) goto fail;
      stream_footprint(p, &cp->k[i]);
      input_reads(p, &cp->k[i]);
    }
    double t4 = now_ms();
    if (getenv("DYN_COMPILE_TIMES"))
      fprintf(stderr, "dyn: %s: build %.1f ms, optimise %.1f ms, code generation %.1f ms\n", p->name, t2 - t1, t3 - t2, t4 - t3);
  }
  cp->compile_ms = now_ms() - t0;
  return cp;
fail:
  cpu_program_free(cp);
  return NULL;
}

void cpu_program_free(CpuProgram *cp) {
  if (!cp) return;
  jit_code_free(cp->twins_code);
  jit_code_free(cp->code);
  jit_code_free(cp->strided_code);
  for (int i = 0; i < cp->nk; i++) free(cp->k[i].foot), free(cp->k[i].ins);
  free(cp->k);
  free(cp->attn);
  free(cp->attn_on);
  free(cp->attn_plan);
  free(cp->attn_unstored);
  free(cp->ir);
  free(cp->tables);
  free(cp);
}

double cpu_program_compile_ms(const CpuProgram *cp) { return cp->compile_ms; }

int cpu_profile(CpuProgram *cp, double *rows, int cap) {
  int n = cp->prof_runs;
  cp->prof = rows, cp->prof_cap = rows ? cap : 0, cp->prof_runs = 0;
  return n;
}

int cpu_program_kernels(const CpuProgram *cp) { return cp->nk; }

const char *cpu_kernel_name(const CpuProgram *cp, int k) { return cp->k[k].kn->name; }

bool cpu_program_code(CpuBackend *be, CpuProgram *cp, const char *what, Buf *out, char *err, size_t errlen) {
  bool any = false;
  for (int i = 0; i < cp->nk; i++) {
    if (!cp->k[i].gemm) continue;
    const Kernel *kn = cp->k[i].kn;
    buf_printf(out, "; kernel %s: a contraction, run by the packed micro-kernels below\n", kn->name);
    if (!any) {
      GemmKernels *gk = cpu_gemm_for(be, cp->p->slots[cp->k[i].g_c].type.elem, err, errlen);
      if (!gk || !gemm_code(gk, what, out, err, errlen)) return false;
      any = true;
    }
  }
  /* the module is built again: compiled code keeps no text, and printing assembly
   * consumes a module */
  bool loops = false;
  for (int i = 0; i < cp->nk; i++) loops = loops || !cp->k[i].gemm;
  if (!loops) return true;
  LLVMContextRef cx = LLVMContextCreate();
  CKernel *copy = xcalloc((size_t)cp->nk + 1, sizeof(CKernel));
  memcpy(copy, cp->k, sizeof(CKernel) * (size_t)cp->nk);
  LLVMModuleRef m = cpu_build_module(be, cx, cp->p, copy, cp->nk, "asm", true, true, false);
  bool ok = optimize(be, m, "asm", err, errlen);
  if (ok) mark_streaming(m, copy, cp->nk);
  if (ok && !strcmp(what, "llvm")) jit_print_ir(m, out);
  else if (ok) ok = jit_print_asm(be->jit, m, out, err, errlen);
  LLVMDisposeModule(m);
  LLVMContextDispose(cx);
  free(copy);
  return ok;
}

/* A program's loop kernels once more, named SYM_nt (the streaming twins, of the kernels that
 * have them) or SYM_st (the strided variants), into *code; false when they cannot be had. */
static bool compile_variants(CpuBackend *be, CpuProgram *cp, bool strided, JitCode **code) {
  char err[512], prefix[80];
  snprintf(prefix, sizeof prefix, "%s_%s", strided ? "strided" : "twins", cp->k[0].kn->name);
  LLVMModuleRef m = cpu_build_module(be, jit_context(be->jit), cp->p, cp->k, cp->nk, prefix, false, !strided, strided);
  if (!optimize(be, m, prefix, err, sizeof err)) {
    LLVMDisposeModule(m);
    return false;
  }
  if (!strided) mark_streaming(m, cp->k, cp->nk);
  if (!jit_add_module(be->jit, m, code, err, sizeof err)) return false;
  KernelFn fn[256];
  for (int i = 0; i < cp->nk && i < 256; i++) {
    fn[i] = NULL;
    if (cp->k[i].gemm || (!strided && cp->k[i].nt_slot < 0)) continue;
    char name[80];
    snprintf(name, sizeof name, "%s_%s", cp->k[i].sym, strided ? "st" : "nt");
    if (!(fn[i] = (KernelFn)jit_lookup(be->jit, name, err, sizeof err))) return false;
  }
  for (int i = 0; i < cp->nk && i < 256; i++) *(strided ? &cp->k[i].fn_st : &cp->k[i].fn_nt) = fn[i];
  return true;
}

/* The streaming twins of a program's kernels, compiled the first time a call needs one: a
 * result that outgrows the last cache is rarer than a compile, and twins double the code
 * generation time of the kernels that have them.  On failure the plain kernels serve. */
bool cpu_compile_twins(CpuBackend *be, CpuProgram *cp) {
  if (cp->twins_tried) return cp->twins_ok;
  cp->twins_tried = true;
  double t0 = now_ms();
  if (!compile_variants(be, cp, false, &cp->twins_code)) return false;
  cp->twins_ms = now_ms() - t0;
  return cp->twins_ok = true;
}

/* The strided variants (see "strided inputs"), compiled the first time a call passes an
 * input with a last stride other than 1. */
bool cpu_compile_strided(CpuBackend *be, CpuProgram *cp) {
  if (cp->strided_tried) return cp->strided_ok;
  cp->strided_tried = true;
  return cp->strided_ok = compile_variants(be, cp, true, &cp->strided_code);
}

/* ---- calibration: the micro-kernel's throughput, measured once per machine ---- */

double cpu_core_gflops(const CpuBackend *be) {
  return be->gemm[0] ? gemm_core_gflops(be->gemm[0]) : 0;
}

bool cpu_calibrate(CpuBackend *be, double *peak1, double *peak_all, char *err, size_t errlen) {
  if (!jit_can_run(be->jit)) {
    snprintf(err, errlen, "%s is not this CPU: calibration measures the host", be->hw.name);
    return false;
  }
  GemmKernels *g = cpu_gemm_for(be, DYN_F32, err, errlen);
  if (!g) return false;
  /* The fastest of five runs of 0.1 s each: on a busy machine a single run of 0.3 s kept
   * whatever share of the cores the others left it (41 and 47 GFLOP/s were stored on cores
   * that reach 400), and every later session believed it. */
  *peak1 = *peak_all = 0;
  for (int r = 0; r < 5; r++) {
    double p1 = gemm_peak_gflops(g, NULL, 0.1), pa = gemm_peak_gflops(g, be->pool, 0.1);
    if (p1 > *peak1) *peak1 = p1;
    if (pa > *peak_all) *peak_all = pa;
  }
  return true;
}

#else  /* no LLVM: the reference evaluator runs everything */

CpuBackend *cpu_backend_new(const HwModel *hw, int threads, char *err, size_t errlen) {
  snprintf(err, errlen, "this dyn was built without LLVM; the reference evaluator runs the code");
  return NULL;
}
void cpu_backend_free(CpuBackend *be) { (void)be; }
void cpu_backend_set_threads(CpuBackend *be, int threads) {}
Pool *cpu_backend_pool(CpuBackend *be) { return NULL; }
const char *cpu_backend_cpu(CpuBackend *be) { return ""; }
bool cpu_runnable(const HwModel *hw, char *why, size_t whylen) { return true; }
CpuProgram *cpu_compile(CpuBackend *be, const Program *p, char *err, size_t errlen) { return NULL; }
void cpu_program_free(CpuProgram *cp) {}
double cpu_program_compile_ms(const CpuProgram *cp) { return 0; }
int cpu_profile(CpuProgram *cp, double *rows, int cap) { return 0; }
int cpu_program_kernels(const CpuProgram *cp) { return 0; }
const char *cpu_kernel_name(const CpuProgram *cp, int k) { return ""; }
bool cpu_program_code(CpuBackend *be, CpuProgram *cp, const char *what, Buf *out, char *err, size_t errlen) { return false; }
double cpu_core_gflops(const CpuBackend *be) { return 0; }
bool cpu_calibrate(CpuBackend *be, double *peak1, double *peak_all, char *err, size_t errlen) {
  snprintf(err, errlen, "this dyn was built without LLVM");
  return false;
}
bool cpu_calibrate_memory(CpuBackend *be, CalMemory *out, char *err, size_t errlen) {
  snprintf(err, errlen, "this dyn was built without LLVM");
  return false;
}
bool cpu_calibrate_sync(CpuBackend *be, double *us, char *err, size_t errlen) {
  snprintf(err, errlen, "this dyn was built without LLVM");
  return false;
}

#endif
