/* backend.c -- the back ends a session runs programs on, as one table (be_table): the
 * reference evaluator, the CPU (LLVM) and the GPU (CUDA).  Each entry says whether it is
 * here, compiles a function into its Compiled record once, runs it, and shows its schedule
 * (:sched) and its code (:code), wrapping cpu.c, cuda_*.c and eval.c.  The session's target
 * points to one entry; toplevel.c's top_run chooses, compiles, launches and falls back.
 */
#include "config.h"
#include "session_int.h"

#include <string.h>

/* ---- making the back ends: on first use, for the model in use ---- */

/* The CPU back end that runs statements, made on first use: for the model in use, or for
 * the detected host when this CPU cannot run the model's code.  NULL (with s->cpu_why) when
 * it cannot be had. */
CpuBackend *be_cpu(Session *s) {
  if (!s->cpu && !s->cpu_failed) {
    s->cpu = cpu_backend_new(s->hw_foreign ? &s->host_hw : &s->hw, s->threads, s->cpu_why, sizeof s->cpu_why);
    s->cpu_failed = !s->cpu;
  }
  return s->cpu;
}

/* The model whose code runs: hw, or the host when hw is for looking only. */
const HwModel *be_run_hw(Session *s) { return s->hw_foreign ? &s->host_hw : &s->hw; }

/* The CPU back end that shows the model in use (:sched, :code): the one that runs, or one
 * that compiles for a model this CPU cannot run.  NULL with the reason in *why. */
CpuBackend *be_model_cpu(Session *s, const char **why) {
  if (!s->hw_foreign) {
    *why = s->cpu_why;
    return be_cpu(s);
  }
  if (!s->view && !s->view_failed) {
    s->view = cpu_backend_new(&s->hw, s->threads, s->view_why, sizeof s->view_why);
    s->view_failed = !s->view;
  }
  *why = s->view_why;
  return s->view;
}

/* Calls fn on every function the session holds, live or retired. */
static void each_fn(Session *s, void (*fn)(Func *f, bool view), bool view) {
  for (int i = 0; i < s->fns.n; i++) fn(s->fns.a[i], view);
  for (int i = 0; i < s->retired.n; i++) fn(s->retired.a[i], view);
}

static void drop_cpu(Func *f, bool view) {
  void **code = view ? &f->code.view : &f->code.cpu;
  cpu_program_free(*code);
  *code = NULL;
}

/* Forget every function's code for the CPU back end (view: the model's), and the back end:
 * they are made again, for the new model, on next use.  What :time keeps (TopRun) is the
 * caller's to forget first. */
void be_drop_cpu_code(Session *s, bool view) {
  each_fn(s, drop_cpu, view);
  if (view) {
    cpu_backend_free(s->view);
    s->view = NULL;
    s->view_failed = false;
  } else {
    cpu_backend_free(s->cpu);
    s->cpu = NULL;
    s->cpu_failed = false;
  }
}

static bool same_model(const HwModel *a, const HwModel *b) {
  return !strcmp(a->name, b->name) && !strcmp(a->path, b->path) && !strcmp(a->llvm_cpu, b->llvm_cpu) &&
         !strcmp(a->llvm_features, b->llvm_features) && a->cores == b->cores && a->vector_bits == b->vector_bits &&
         a->ghz == b->ghz && a->peak_gflops_f32 == b->peak_gflops_f32;
}

/* Use hw (a CPU model) from now on.  Code already compiled for another model is dropped and
 * made again on next use.  Returns the sentence saying that statements run on the host's
 * code, when this CPU cannot run hw's, else NULL. */
const char *be_set_cpu_model(Session *s, const HwModel *hw, bool measured) {
  HwModel ran = *be_run_hw(s);
  s->hw = *hw;
  s->peak_measured = measured;
  static char note[768];
  char why[256];
  s->hw_foreign = !cpu_runnable(hw, why, sizeof why);
  be_drop_cpu_code(s, true);
  /* the code that runs is kept while it is made for the same model */
  if (!same_model(&ran, be_run_hw(s))) be_drop_cpu_code(s, false);
  if (!s->hw_foreign) return NULL;
  snprintf(note, sizeof note, "%s: statements run on code for this CPU (%s); :sched, :cost and :code show %s", why,
           s->host_hw.desc, hw->name);
  return note;
}

/* The GPU back end, made on first use; NULL (with s->gpu_why) without a driver or device. */
CudaBackend *be_gpu(Session *s) {
  if (!s->gpu && !s->gpu_failed) {
    s->gpu = cuda_backend_new(s->have_gpu_hw ? &s->gpu_hw : NULL, s->gpu_why, sizeof s->gpu_why);
    s->gpu_failed = !s->gpu;
    if (s->gpu && !s->have_gpu_hw) {
      s->gpu_hw = *cuda_backend_hw(s->gpu);
      s->have_gpu_hw = true;
    }
  }
  return s->gpu;
}

/* The GPU model code is rendered for: the device's, a GPU loaded with :hw or --hw, else H100. */
const HwModel *be_gpu_model(Session *s) {
  if (!s->have_gpu_hw) {
    char msg[256];
    if (hw_load("h100", &s->gpu_hw, msg, sizeof msg)) s->have_gpu_hw = true;
  }
  return s->have_gpu_hw ? &s->gpu_hw : NULL;
}

static void gpu_free_code(Func *f) {
  cuda_program_free(f->code.gpu);
  f->code.gpu = NULL;
}

static void drop_gpu(Func *f, bool view) {
  (void)view;
  gpu_free_code(f);
}

/* f32 contractions on the GPU from now on in m: code compiled with other arithmetic is
 * dropped, to be compiled again on its next use. */
void be_set_gpu_math(Session *s, CudaMath m) {
  if (m == s->gpu_math) return;
  s->gpu_math = m;
  each_fn(s, drop_gpu, false);
}

/* ---- compiling: once per function and back end, on first use ---- */

/* Compile f for the CPU once (on first use); false (said on s->err) if it cannot be. */
bool be_cpu_compile(Session *s, Func *f) {
  if (f->code.cpu) return true;
  char msg[512];
  f->code.cpu = cpu_compile(s->cpu, f->code.prog, msg, sizeof msg);
  if (!f->code.cpu) {
    fprintf(s->err, "dyn: %s: compiling for the CPU failed (%s); the reference evaluator runs it\n", f->name, msg);
    snprintf(s->instead_why, sizeof s->instead_why, "compiling %s for the CPU failed", f->name);
    return false;
  }
  f->compiles++;
  return true;
}

/* Compile f for the model in use (on first use), for :sched and :code: the code that runs,
 * or the model's own when this CPU cannot run it.  Its program, or NULL after an error. */
CpuProgram *be_model_program(Session *s, Func *f, CpuBackend *be, Span at) {
  if (!s->hw_foreign) return be_cpu_compile(s, f) ? f->code.cpu : NULL;
  if (f->code.view) return f->code.view;
  char msg[512];
  f->code.view = cpu_compile(be, f->code.prog, msg, sizeof msg);
  if (!f->code.view) state_error(s, at, E_COMMAND, state_tmp_printf(s, "%s: compiling for %s failed: %s", f->name, s->hw.name, msg));
  return f->code.view;
}

/* ---- the entries: ref ---- */

static bool ref_available(Session *s, const char **why) {
  (void)s;
  *why = NULL;
  return true;
}

/* The evaluator has nothing to compile: the program is what it runs. */
static int ref_compile(Session *s, Func *f, Span at) {
  (void)s, (void)f, (void)at;
  return 0;
}

static void ref_free_code(Func *f) { (void)f; }

static bool ref_describe(Session *s, Func *f, const Extents *x, Span at, Buf *b) {
  (void)x, (void)at;
  buf_printf(b, "%s: the reference evaluator interprets the loops that :ir %s shows (target %s);\n"
             ":target cpu compiles them; compiled %d time%s so far", f->name, f->name, s->target->name, f->compiles,
             f->compiles == 1 ? "" : "s");
  return true;
}

/* ---- cpu ---- */

static bool cpu_available(Session *s, const char **why) {
  *why = s->cpu_why;
  return be_cpu(s) != NULL;
}

/* A failed compile is said on s->err and the evaluator runs the call (0). */
static int cpu_compile_fn(Session *s, Func *f, Span at) {
  (void)at;
  return be_cpu_compile(s, f) ? 1 : 0;
}

static int cpu_run_fn(Session *s, Func *f, Tensor **in, const Extents *x, Tensor **outs, char *msg, size_t len) {
  return cpu_run(s->cpu, f->code.cpu, in, x, outs, &s->interrupt, msg, len);
}

static bool cpu_describe(Session *s, Func *f, const Extents *x, Span at, Buf *b) {
  const char *why;
  CpuBackend *be = be_model_cpu(s, &why);
  CpuProgram *cp = be ? be_model_program(s, f, be, at) : NULL;
  if (!cp) return false;
  if (s->hw_foreign)
    buf_printf(b, "%s: compiled for %s (%.1f ms), which this CPU cannot run:\n  statements run on code for this CPU; "
               "cpu %s, %d thread%s\n", f->name, s->hw.name, cpu_program_compile_ms(cp), cpu_backend_cpu(be),
               s->threads, s->threads == 1 ? "" : "s");
  else
    buf_printf(b, "%s: compiled %d time%s, for every shape (%.1f ms)\n  cpu %s, %d thread%s, hardware %s\n", f->name,
               f->compiles, f->compiles == 1 ? "" : "s", cpu_program_compile_ms(cp), cpu_backend_cpu(be),
               s->threads, s->threads == 1 ? "" : "s", s->hw.name);
  if (!s->hw_foreign && f->nshapes > 0) {
    /* what the method saves: a compiler that specialises per shape compiles once a shape */
    double ms = cpu_program_compile_ms(cp);
    buf_printf(b, "  called at %d%s shape%s; a compiler that specialised per shape would have compiled %d%s "
               "time%s: about %.1f s at this compile time\n", f->nshapes, f->nshapes >= FUNC_MAX_SHAPES ? " or more" : "",
               f->nshapes == 1 ? "" : "s", f->nshapes, f->nshapes >= FUNC_MAX_SHAPES ? " or more" : "",
               f->nshapes == 1 ? "" : "s", f->nshapes * ms * 1e-3);
  }
  if (s->gpu_hw_chosen)
    buf_printf(b, "(the GPU model %s is loaded, and the target is cpu: :target gpu or ref shows its schedule)\n",
               s->gpu_hw.name);
  double t = cpu_schedule(be, cp, s->pc, x, s->threads, b);
  const EvalSizes *sz = x ? &x->sz : NULL;
  s->sched.compile_ms = cpu_program_compile_ms(cp);
  s->sched.compiles = f->compiles;
  s->sched.predicted = sz ? t : 0;
  if (sz) {
    buf_puts(b, "at");
    for (int i = 0; i < sz->n; i++) buf_printf(b, " %s=%lld", sz->names[i], (long long)sz->vals[i]);
    buf_printf(b, ": predicted %.3f ms", t * 1e3);
  }
  return true;
}

/* The code that runs and the code shown for a model this CPU cannot run. */
static void cpu_free_code(Func *f) {
  drop_cpu(f, false);
  drop_cpu(f, true);
}

static bool cpu_code(Session *s, Func *f, const char *kind, Span at, Buf *b) {
  const char *why;
  CpuBackend *be = be_model_cpu(s, &why);
  if (!be) {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, ":code: %s", why));
    return false;
  }
  CpuProgram *cp = be_model_program(s, f, be, at);
  if (!cp) return false;
  char msg[512];
  if (!cpu_program_code(be, cp, kind, b, msg, sizeof msg)) {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, ":code: %s", msg));
    return false;
  }
  return true;
}

/* ---- gpu ---- */

static bool gpu_available(Session *s, const char **why) {
  *why = s->gpu_why;
  return be_gpu(s) != NULL;
}

/* A failed compile is an error of the call (-1): the GPU was asked for by name. */
static int gpu_compile_fn(Session *s, Func *f, Span at) {
  if (f->code.gpu) return 1;
  char msg[512];
  f->code.gpu = cuda_compile(s->gpu, f->code.prog, s->gpu_math, msg, sizeof msg);
  if (!f->code.gpu) {
    state_error(s, at, E_RUNTIME, state_tmp_printf(s, "%s: compiling for the GPU failed: %s", f->name, msg));
    return -1;
  }
  f->compiles++;
  return 1;
}

static int gpu_run_fn(Session *s, Func *f, Tensor **in, const Extents *x, Tensor **outs, char *msg, size_t len) {
  return cuda_run(s->gpu, f->code.gpu, in, x, outs, msg, len);
}

/* f's GPU program: the compiled one, else one rendered (not compiled) for the GPU model,
 * which is the caller's (*own) to free.  NULL after an error at `at` (cmd: ":sched", ":code")
 * without a GPU model. */
static CudaProgram *gpu_program(Session *s, Func *f, bool *own, Span at, const char *cmd) {
  *own = !f->code.gpu;
  if (!*own) return f->code.gpu;
  const HwModel *g = be_gpu_model(s);
  if (!g) state_error(s, at, E_COMMAND, state_tmp_printf(s, "%s: no GPU model (hw/h100.hw is missing)", cmd));
  return g ? cuda_program_new(f->code.prog, g, s->gpu_math) : NULL;
}

/* The GPU schedule: on the device, else on the GPU model loaded with :hw (or H100's). */
static bool gpu_describe(Session *s, Func *f, const Extents *x, Span at, Buf *b) {
  bool own;
  CudaProgram *cp = gpu_program(s, f, &own, at, ":sched");
  if (!cp) return false;
  buf_printf(b, "%s: GPU schedule on %s (compiled %d time%s)\n", f->name, s->gpu ? cuda_backend_device(s->gpu) : s->gpu_hw.name,
             f->compiles, f->compiles == 1 ? "" : "s");
  double t = cuda_describe(cp, s->pc, x, b);
  if (x) buf_printf(b, "predicted %.3f ms", t * 1e3);
  s->sched.predicted = x ? t : 0;
  if (own) cuda_program_free(cp);
  return true;
}

/* Rendering and PTX need no GPU: for the device if there is one, else the GPU model. */
static bool gpu_code(Session *s, Func *f, const char *kind, Span at, Buf *b) {
  bool own;
  CudaProgram *cp = gpu_program(s, f, &own, at, ":code");
  if (!cp) return false;
  char msg[512];
  bool ok = cuda_program_code(cp, kind, b, msg, sizeof msg);
  if (own) cuda_program_free(cp);
  if (!ok) state_error(s, at, E_COMMAND, state_tmp_printf(s, ":code %s: %s", kind, msg));
  return ok;
}

/* ---- the table ---- */

const Backend be_table[BE__COUNT] = {
  [BE_REF] = {BE_REF, "ref", false, true, ref_available, ref_compile, NULL, ref_describe, NULL, ref_free_code},
  [BE_CPU] = {BE_CPU, "cpu", true, true, cpu_available, cpu_compile_fn, cpu_run_fn, cpu_describe, cpu_code, cpu_free_code},
  [BE_GPU] = {BE_GPU, "gpu", false, false, gpu_available, gpu_compile_fn, gpu_run_fn, gpu_describe, gpu_code, gpu_free_code},
};

const Backend *be_find(const char *name) {
  for (int i = 0; i < BE__COUNT; i++)
    if (!strcmp(be_table[i].name, name)) return &be_table[i];
  return NULL;
}
