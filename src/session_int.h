/* session_int.h -- what the files of the session share, and no one else sees: the Session
 * itself, the values of top-level statements, and the entry points each of value.c,
 * backend.c, state.c, toplevel.c, builtins.c, commands.c and session.c gives the others, one
 * section per file, lowest first.  Input flows session.c (a statement) -> toplevel.c (its
 * value, run by a back end of backend.c) or commands.c (`:name`); each file calls only the
 * ones below it, and every one of them reads the state (state.c) and holds values (value.c).
 */
#ifndef DYN_SESSION_INT_H
#define DYN_SESSION_INT_H

#include "dyn_int.h"

/* ---- value.c: the values of top-level statements ---- */

typedef enum { VAL_NONE, VAL_TENSOR, VAL_STR, VAL_SHAPE, VAL_TYPE, VAL_TUPLE } ValKind;

typedef struct Value {
  ValKind kind;
  Tensor *t;                       /* VAL_TENSOR (owned reference) */
  char *s;                         /* VAL_STR (owned) */
  int rank;                        /* VAL_SHAPE, VAL_TYPE */
  int64_t dims[DYN_MAX_RANK];
  DynElem elem;                    /* VAL_TYPE */
  struct Value *items; int n;      /* VAL_TUPLE (owned) */
} Value;

void val_free(Value *v);
Value val_copy(const Value *v);                  /* deep: a new reference, string, tuple */
void val_type_str(const Value *v, Buf *out);     /* "f32[2, 3]", "string", "(f32, i64)" */
void val_format(const Value *v, Buf *out);       /* the value as the REPL prints it */
/* Compare two results element by element: ints and bools exactly, floats within the element
 * type's tolerance, or tol (> 0) for f32; says how they differ in out.  True if they agree. */
bool val_compare(const Value *a, const Value *b, double tol, Buf *out);

/* Only the fields a tensor value reads are set: zeroing all of a Value (its dims make it
 * 120 bytes) compiles to a `rep stos`, whose start-up cost was a tenth of a small call.
 * Inline, as it was beside the calls it serves. */
static inline Value val_tensor(Tensor *t) {
  Value v;
  v.kind = VAL_TENSOR;
  v.t = t;
  v.s = NULL;
  v.rank = 0;
  v.elem = 0;
  v.items = NULL;
  v.n = 0;
  return v;
}

/* ---- backend.c: the back ends, one table ---- */

typedef enum { BE_REF, BE_CPU, BE_GPU, BE__COUNT } BackendId;

/* One back end: what the session asks of each.  The reference evaluator (ref) is always
 * here and compiles nothing; its run is eval_program, which top_run calls for every back
 * end that declines or finds an error, so that errors are located alike on all of them. */
typedef struct Backend {
  BackendId id;
  const char *name;                /* "ref", "cpu", "gpu": what :target takes and prints */
  bool small_on_ref;               /* a one-off top-level statement of little work runs on
                                      the evaluator: compiling it would cost more than it saves */
  bool strided_in;                 /* its code reads inputs through their strides (any sign,
                                      zero too); else run_program gathers them in C order */
  /* Is it here?  Made on first use; false with the reason in *why. */
  bool (*available)(Session *s, const char **why);
  /* f's code, compiled once, on first use: 1 ready, 0 the evaluator is to run it (said on
   * s->err), -1 an error of the call, reported at `at`. */
  int (*compile)(Session *s, Func *f, Span at);
  /* Run f's code: 1 done, 0 it found an error (the evaluator then says exactly what and
   * where), negative it failed as msg says.  NULL for ref. */
  int (*run)(Session *s, Func *f, Tensor **in, const Extents *x, Tensor **outs, char *msg, size_t len);
  /* :sched: how f runs at the sizes bound in x (NULL: at every size), appended to out; false
   * after an error at `at`.  Fills s->sched. */
  bool (*describe)(Session *s, Func *f, const Extents *x, Span at, Buf *out);
  /* :code: f's code of a kind (llvm, asm; cuda, ptx) in out; false after an error at `at`.
   * NULL for ref. */
  bool (*code)(Session *s, Func *f, const char *kind, Span at, Buf *out);
  void (*free_code)(Func *f);      /* its code for f, freed (made again on next use) */
} Backend;

extern const Backend be_table[BE__COUNT];
const Backend *be_find(const char *name);             /* NULL: no such back end */

/* The CPU back end that runs statements, made on first use; NULL with s->cpu_why. */
CpuBackend *be_cpu(Session *s);
/* The CPU model whose code runs: s->hw, or the host when this CPU cannot run hw's code. */
const HwModel *be_run_hw(Session *s);
/* The CPU back end that shows the model in use (:sched, :code); NULL with the reason in *why. */
CpuBackend *be_model_cpu(Session *s, const char **why);
/* f compiled for the model in use (:sched, :code), or NULL after an error at `at`. */
CpuProgram *be_model_program(Session *s, Func *f, CpuBackend *be, Span at);
/* Compile f for the CPU once (on first use); false (said on s->err) if it cannot be. */
bool be_cpu_compile(Session *s, Func *f);
/* Forget every function's code for the CPU (view: for the model shown), and the back end. */
void be_drop_cpu_code(Session *s, bool view);
/* Use the CPU model hw from now on; the note to print when this CPU cannot run its code. */
const char *be_set_cpu_model(Session *s, const HwModel *hw, bool measured);
/* The GPU back end, made on first use; NULL (with s->gpu_why) without a driver or device. */
CudaBackend *be_gpu(Session *s);
/* The GPU model code is rendered for: the device's, one loaded with :hw or --hw, else H100. */
const HwModel *be_gpu_model(Session *s);
/* f32 contractions in GPU code from now on in m; code made with another is dropped. */
void be_set_gpu_math(Session *s, CudaMath m);

/* ---- the Session (session.c makes and frees it), its bindings and functions ---- */

typedef struct Binding { char *name; Value v; } Binding;

struct Session {
  PolyCtx *pc;
  FILE *out, *err;
  bool interactive;
  bool check_only;                 /* SessionOptions.check_only: run_stmt checks, never runs */
  bool diag_json;                  /* SessionOptions.diag_json: diagnostics as JSON lines */
  char *scratch_dir;               /* scratch(): made on first use, removed by session_free */
  VEC(Binding) vars;
  int *var_slot;                   /* open-addressed index of vars by name: 1 + index, 0 free */
  int var_cap;                     /* its size, a power of two over twice vars.n */
  VEC(Func *) fns;                 /* live functions, by name (latest wins) */
  VEC(Func *) retired;             /* replaced functions, kept for programs that inlined them */
  VEC(Source *) sources;
  VEC(Arena *) kept;               /* parse arenas that defined functions */
  VEC(char *) imported;
  int nfns_prelude;
  Func **prelude;                  /* the prelude's functions as it defined them, nfns_prelude of
                                      them, and its imports (nimports_prelude): :reset brings
                                      both back after the session redefined or added to them */
  int nimports_prelude;
  int repl_inputs;
  volatile int interrupt;
  uint64_t rng[4];
  int threads;
  const Backend *target;           /* the back end statements run on (be_table) */
  HwModel hw;                      /* the CPU model in use: --hw, :hw, else the detected host */
  HwModel host_hw;                 /* the detected host, with its calibrated peak */
  bool peak_measured;              /* hw's peak is dyn --calibrate's, for this hardware */
  bool host_peak_measured;         /* and host_hw's */
  bool hw_foreign;                 /* this CPU cannot run code for hw: statements run on code
                                      for host_hw, and :sched and :code show hw's (view) */
  CpuBackend *cpu;                 /* runs statements; made on first use of the CPU target */
  bool cpu_failed;
  char cpu_why[256];
  CpuBackend *view;                /* hw_foreign: compiles for hw and describes, runs nothing */
  bool view_failed;
  char view_why[256];
  CudaBackend *gpu;                /* made on first use of the GPU target */
  bool gpu_failed;
  char gpu_why[256];
  HwModel gpu_hw;                  /* the GPU model for :code cuda and :sched (:hw NAME of a GPU) */
  bool have_gpu_hw;
  bool gpu_hw_chosen;              /* gpu_hw came from :hw or --hw (not the default H100) */
  CudaMath gpu_math;               /* f32 contractions on the GPU: exact, or tf32/bf16 (:target gpu tf32) */
  Func *last_fn;                   /* the last function called, and its sizes (for :time) */
  unsigned last_fn_calls;
  const char *last_names[64];
  int64_t last_vals[64];
  int last_n;
  Diags diags;
  Arena *tmp;                      /* the arena of the input being run */
  Arena *call_tmp;                 /* session_call's, emptied at the start of each call */
  int found;                       /* where find_fn last found a function */
  bool compile_all;                /* :check: compile even the smallest top-level statement */
  /* :time runs one statement again and again: while it does (keep_runs), each top-level
   * statement it runs keeps its checked, lowered and compiled function (TopRun, toplevel.c),
   * found again by its place in the source and its operands' types; a run found again
   * compiles whatever its size (rerun), as a function called twice is compiled */
  struct TopRun *runs;
  int nruns;
  bool keep_runs, rerun;
  unsigned ran_compiled;           /* calls a compiled back end answered (:check counts them) */
  unsigned ran_instead;            /* calls with target cpu or gpu that the evaluator answered */
  int64_t gathered_bytes;          /* inputs copied into C order for a back end since it was
                                      last set to 0 (the library's dyn_gathered_bytes) */
  char instead_why[300];           /* why, the last time */
  int depth;                       /* nested :load / import */
  int out_errno;                   /* the first failed write to out (0: none) */
  void (*diag_sink)(void *cookie, const Diag *d);   /* set: diagnostics go there, not to err */
  void *diag_cookie;
  SessionTiming timing;            /* what :time and :sched computed last (the library's */
  SessionSched sched;              /* dyn_time and dyn_sched read them) */
  /* called after each stage of defining a function: to print, verify or time it; NULL:
   * none.  TOP_PARSE (f NULL) once an input is lexed and parsed (session.c); then, for each
   * definition, TOP_SEMA (f checked, no program), TOP_LOWER (f's program as lowered, each
   * statement a kernel; built for the hook and freed after it) and TOP_FUSE (the program
   * kept) in top_define */
  void (*stage_hook)(void *cookie, int stage, const Func *f, double ms);
  void *stage_cookie;
  const struct Builtin *builtins;  /* the built-in functions (builtins.c's table), for the */
  int nbuiltins;                   /* files below it: set by session_new */
  /* Running statements, for :load and :time (commands.c): session.c's, set by session_new,
   * so that the commands it dispatches do not call back into the file above them */
  RunStatus (*run_file)(Session *s, const char *path, Span at);
  RunStatus (*run_arg)(Session *s, Source *src, bool quiet_value);
};

/* ---- state.c: bindings and functions by name, errors, output and sources ---- */

/* The diagnostics in d to the sink if there is one, else printed to err; d is left as it was. */
void state_emit(Session *s, const Diags *d);

Binding *state_find_var(Session *s, const char *name);            /* NULL: unbound */
void state_bind(Session *s, const char *name, Value v);            /* takes v */
Func *state_find_fn(Session *s, const char *name);                 /* NULL: none */
Func *state_lookup_fn(void *env, const char *name);                /* find_fn for sema and lower */
/* Every function's name, for "did you mean" (SemaEnv.each_fn). */
void state_each_fn(void *env, void (*add)(void *cookie, const char *name), void *cookie);
/* Every variable's name (SemaEnv.each_var of a top-level statement). */
void state_each_var(void *env, void (*add)(void *cookie, const char *name), void *cookie);
static inline SemaEnv state_sema_env(Session *s) {
  return (SemaEnv){.pc = s->pc, .lookup_fn = state_lookup_fn, .each_fn = state_each_fn, .env = s};
}
/* Report an unknown name at top level (E_UNDEFINED, E_UNDEFINED_FN), with "did you mean"
 * the nearest name the session knows when one is clearly nearest. */
Diag *state_undefined(Session *s, Span at, DiagId id, const char *name);
/* :reset: forget every binding and every function defined after the prelude. */
void state_reset(Session *s);
/* f is replaced or forgotten: its code goes, f stays (retired) for programs that inlined it. */
void state_retire(Session *s, Func *f);
/* Every variable, function, built-in and math function whose name starts with prefix. */
void state_names(Session *s, const char *prefix, void (*add)(void *cookie, const char *cand), void *cookie);
/* The built-in function called name, or NULL. */
const struct Builtin *state_builtin(Session *s, const char *name);

/* Errors go to s->diags; the statement that made one stops, and run_source prints them. */
static inline bool state_failed(Session *s) { return s->diags.nerrors > 0; }
Diag *state_error(Session *s, Span at, DiagId id, ...);
/* Text in the arena of the input being run (s->tmp), for messages and names. */
const char *state_tmp_printf(Session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *state_ttype(Session *s, const Tensor *t);              /* "f32[2, 3]", in s->tmp */
/* Output: a line to s->out, flushed; a write that fails is remembered (s->out_errno). */
void state_print_line(Session *s, const char *text);
void state_out_flush(Session *s);

/* A source the session keeps (it takes text) until it ends: diagnostics point into it. */
Source *state_add_source(Session *s, const char *name, char *text, size_t len);

/* ---- session.c: running input, imports, calibration, the C entry points ---- */

/* Run the script at path within the current input (:load, import "file"), nested at most
 * 16 deep; errors located at `at` when the file cannot be read. */
RunStatus session_run_file_in(Session *s, const char *path, Span at);
/* Run src, a command's argument (:time STMT), as statements, keeping the caller's s->tmp. */
RunStatus session_run_arg(Session *s, Source *src, bool quiet_value);

/* ---- toplevel.c: evaluating top-level statements: defining and running functions ---- */

/* The stages of defining a function (top_define), as its hook sees them. */
typedef enum { TOP_PARSE, TOP_SEMA, TOP_LOWER, TOP_FUSE } TopStage;
/* Define the function d (parsed into a): check it (sema.c), then lower it and fuse it into
 * its program (lower.c), calling s->stage_hook after each stage.  The Func, owning a, or NULL
 * after errors in s->diags (a stays the caller's). */
Func *top_define(Session *s, FnDecl *d, Arena *a, const SemaEnv *env);

Value top_eval(Session *s, Expr *e);                  /* VAL_NONE after an error */
/* Compile the definition statement def (over concrete tensors) and run it. */
Value top_eval_def(Session *s, Stmt *def);
void top_forget_runs(Session *s);       /* frees what :time kept (TopRun) */
/* A call, in order: bind f's sizes from args once, for every back end; check the shapes
 * and the facts (skipped for the shapes of the last call that passed them); choose the back
 * end (the target, when it is here and the call is worth compiling); compile once; launch;
 * fall back to the evaluator, which also locates any error the compiled code finds.  The
 * call's result, VAL_NONE after an error. */
Value top_call(Session *s, Func *f, Expr *call, Value *args);
/* f's program at these sizes, bound once for every back end (extents.c) and kept in f's
 * Compiled record until the sizes change: what run, :sched, :time and :plot read. */
const Extents *top_extents(Func *f, const EvalSizes *sz);
Tensor *top_new_tensor(Session *s, Span at, DynElem el, int rank, const int64_t *dims);  /* NULL: reported */
/* An integer from a top-level size expression (N, 2*N + 1); false after reporting. */
bool top_eval_int(Session *s, Expr *e, int64_t *out);
/* The value of e computed as an anonymous function over the bindings it reads (name: the
 * defined name, or NULL). */
Value top_eval_anon(Session *s, Expr *e, const char *name);
/* session_call and session_predict (dyn_int.h), which commands.c uses too. */
bool top_call_tensors(Session *s, const char *name, Tensor **args, int nargs, Tensor **outs, int maxouts, Buf *err);
double top_predict(Session *s, const char *name, Tensor **args, int nargs);
/* Views of tensor values at top level. */
/* X[a:b:c, i, :] of a binding or a call's result: a tensor_view of its buffer, no copy.
 * VAL_NONE after a located error (a bound outside the dimension, a step below 1). */
Value top_view_slice(Session *s, Expr *e);
/* The built-ins reshape(X, [d, ...]) (a view when X is contiguous), concat(A, B, ..., axis)
 * and stack(A, B, ..., axis) (new tensors, computed as anonymous functions).  They take their
 * arguments unevaluated (Builtin.raw). */
Value top_view_reshape(Session *s, Expr *call, Value *args);
Value top_view_concat(Session *s, Expr *call, Value *args);
/* Is e a call of reshape, concat or stack, or a slice: a view the checker rewrites? */
bool top_view_is_form(const Expr *e);


/* ---- builtins.c: the built-in functions and the random numbers ---- */

typedef Value (*BuiltinFn)(Session *s, Expr *call, Value *args);
typedef struct Builtin {
  const char *name;
  int min, max;                /* how many arguments */
  BuiltinFn fn;
  bool raw_type;               /* argument 1 is a type, evaluated as one */
  const char *help;            /* one line, for :help and :type */
  bool raw;                    /* no argument is evaluated first: the function does it */
} Builtin;
extern const Builtin builtin_table[];
extern const int builtin_count;
const Builtin *builtin_find(const char *name);        /* NULL: no such built-in */
void builtin_seed(Session *s, uint64_t seed);         /* restart the random numbers */
void builtin_scratch_remove(Session *s);              /* the scratch() directory, if made */

/* ---- commands.c: the REPL's commands ---- */

/* Run the command in text (after the colon: "sched f M=4"), located at `at`. */
RunStatus cmd_run(Session *s, const char *text, Span at);
/* Every command name (with its colon) that starts with prefix. */
void cmd_complete(const char *prefix, void (*add)(void *cookie, const char *cand), void *cookie);

#endif
