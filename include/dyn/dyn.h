/* dyn.h -- the public interface of libdyn: compile and run dyn programs from C.
 *
 * A session holds definitions, imports and bindings, as a REPL does; a program calls the
 * session's functions on its own tensors, given as DLPack DLTensors and read in place, and
 * receives results as DLManagedTensors it frees.  Errors come back as data.  Every name here
 * starts with dyn_ (or DYN_); DLPack's own names come from dyn/dlpack.h.  doc/api.md is the
 * manual: ownership, threads, and the ABI policy.
 */
#ifndef DYN_DYN_H
#define DYN_DYN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header describes.  MAJOR changes when the ABI breaks (and with it the
 * soname's number, libdyn.so.MAJOR); MINOR when something is added. */
#define DYN_VERSION_MAJOR 0
#define DYN_VERSION_MINOR 1
#define DYN_VERSION_PATCH 0
#define DYN_VERSION_STRING "0.1.0"
#define DYN_VERSION_NUMBER (DYN_VERSION_MAJOR * 10000 + DYN_VERSION_MINOR * 100 + DYN_VERSION_PATCH)

#if defined(__GNUC__) && !defined(DYN_STATIC_NO_VISIBILITY)
#define DYN_API __attribute__((visibility("default")))
#else
#define DYN_API
#endif

/* The version of the library loaded, "0.1.0": may be newer than DYN_VERSION_STRING. */
DYN_API const char *dyn_version(void);

/* ---- sessions ---- */

typedef struct dyn_session dyn_session;

/* Options of a new session.  Set size to sizeof(dyn_options) and the rest to zero (or use
 * dyn_options_init), then set what you need: a later version adds fields only at the end
 * and reads only the first size bytes. */
typedef struct dyn_options {
  size_t size;
  int threads;            /* 0: every core */
  const char *target;     /* "cpu", "gpu", "gpu:tf32", "gpu:bf16", "ref"; NULL: the default */
  const char *hw;         /* a hardware model by name (hw/NAME.hw) or file; NULL: the host */
  int no_prelude;         /* nonzero: do not import linalg and nn */
  FILE *out;              /* where print() and bare expressions write; NULL: nowhere */
  int interactive;        /* nonzero: a bare expression prints its value, as in the REPL
                             (a notebook's cells); zero: evaluated silently, as in a script */
} dyn_options;

DYN_API void dyn_options_init(dyn_options *opt);

/* A new session, or NULL with the reason in *err (NULL-safe; free it with dyn_free_string)
 * when an option is unusable: an unknown target or hardware model. */
DYN_API dyn_session *dyn_session_new(const dyn_options *opt, char **err);
DYN_API void dyn_session_free(dyn_session *s);            /* NULL-safe */
DYN_API void dyn_free_string(char *p);                    /* NULL-safe */

/* With options.out NULL, what print() and bare expressions wrote since the last take, as a
 * string the caller frees with dyn_free_string; NULL when out was given. */
DYN_API char *dyn_take_output(dyn_session *s);

/* ---- diagnostics: the errors and warnings of the last run, lookup or call ---- */

typedef struct dyn_note {
  const char *file;       /* NULL when the note points nowhere */
  int line, column;       /* 1-based; 0 without a file */
  const char *message;
} dyn_note;

typedef struct dyn_diagnostic {
  int is_error;           /* 1 an error, 0 a warning */
  const char *code;       /* "E_UNDEFINED", lang/reference.md's list */
  const char *file;       /* the source ("prog.dyn", "<api:1>"); NULL: none */
  int line, column;
  const char *message;
  const char *text;       /* the whole diagnostic as dyn prints it, with the source line */
  int nnotes;
  const dyn_note *notes;
} dyn_diagnostic;

/* What the last dyn_run, dyn_run_file, dyn_signature or dyn_call reported; every call of
 * those four forgets the diagnostics before it.  The pointers live until that next call. */
DYN_API int dyn_diagnostic_count(const dyn_session *s);
DYN_API const dyn_diagnostic *dyn_diagnostic_get(const dyn_session *s, int i);

/* ---- running source ---- */

/* Run dyn source text (definitions, imports, statements): 0, or -1 after an error (the
 * diagnostics say which; definitions made before it stay).  origin names the text in
 * diagnostics; NULL: "<api:N>". */
DYN_API int dyn_run(dyn_session *s, const char *text, const char *origin);
/* The same for a file. */
DYN_API int dyn_run_file(dyn_session *s, const char *path);

/* ---- functions ---- */

/* Element types, as DLPack codes them: f32, f64, i32, i64, bool. */
typedef struct dyn_param {
  const char *name;       /* the parameter's name; "" for a result */
  const char *elem;       /* "f32" */
  DLDataType dtype;       /* {kDLFloat, 32, 1} */
  int is_size;            /* a size parameter (N: size), passed as a rank-0 i64 tensor */
  int rank;
  const char *const *dims;   /* rank texts, as the source writes them: "M", "N + 1", "4" */
} dyn_param;

typedef struct dyn_signature {
  const char *name;
  const char *text;       /* "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N]" */
  int nparams;
  const dyn_param *params;
  int nresults;
  const dyn_param *results;
  int nsizes;
  const char *const *sizes;   /* the size variables the arguments bind: "M", "K", "N" */
} dyn_signature;

/* The signature of the session's function name, or NULL (a diagnostic says why).  The
 * session owns it; it lives until the session ends. */
DYN_API const dyn_signature *dyn_signature_get(dyn_session *s, const char *name);

/* Call name on nargs tensors in host memory (kDLCPU), of any strides (in elements, negative
 * and zero ones too): read in place by the CPU's compiled code and by the evaluator, gathered
 * into a C-ordered copy for the length of the call only for the GPU (dyn_gathered_bytes
 * counts such copies); the caller keeps them alive and unchanged meanwhile.  Results go
 * to results[0..maxresults): new DLManagedTensors, C-contiguous, that the caller frees with
 * their deleter (DLPack's rule); *nresults (may be NULL) gets how many the function returns.
 * 0, or -1 with diagnostics (a shape that does not match, a fact that does not hold, a
 * run-time error). */
DYN_API int dyn_call(dyn_session *s, const char *name, const DLTensor *args, int nargs,
                     DLManagedTensor **results, int maxresults, int *nresults);

/* The same with the arguments given by address (a binding that holds DLManagedTensors, as
 * Python's __dlpack__ capsules do, passes &m->dl_tensor). */
DYN_API int dyn_callv(dyn_session *s, const char *name, const DLTensor *const *args, int nargs,
                      DLManagedTensor **results, int maxresults, int *nresults);

/* The tensor bound to name at top level, as a result of dyn_call is: a DLManagedTensor the
 * caller frees with its deleter.  It shares the binding's memory (no copy): read it, do not
 * write it.  0, or -1 with a diagnostic (nothing bound to name, or not a tensor). */
DYN_API int dyn_get(dyn_session *s, const char *name, DLManagedTensor **out);

/* How many results dyn_call has handed out and their deleters not yet freed, in every session
 * of the process: for tests of ownership across language boundaries. */
DYN_API long dyn_live_results(void);

/* The bytes of arguments that the session's last dyn_call (or dyn_callv) copied into C order
 * on the way in: 0 where the code reads them in place, as the CPU's does whatever their
 * strides; for tests that prove it, and for callers who want to know what a layout costs. */
DYN_API int64_t dyn_gathered_bytes(const dyn_session *s);

/* ---- measuring ---- */

/* What :time computes for one statement (run as :time runs it: once to compile, then again
 * for about a second, at most 100 runs). */
typedef struct dyn_timing {
  double median_ms, min_ms, max_ms;
  int runs;
  const char *target;         /* "cpu", "gpu", "ref" */
  int evaluator_runs;         /* runs the reference evaluator answered instead of the target */
  const char *function;       /* the function the statement called last, or NULL */
  double gflops, gbs;         /* its rates at the median time (0 without a function) */
  const char *bound;          /* "compute" or "memory": the roof that binds, or NULL */
  double roof;                /* that roof: GFLOP/s or GB/s for the threads used */
  double roof_percent;        /* the rate as a share of the roof */
  double predicted_ms;        /* the model's prediction (0: none) */
  const char *text;           /* what :time prints */
} dyn_timing;
/* 0 and *out filled (its strings the session's, until the next dyn_time), or -1 with
 * diagnostics. */
DYN_API int dyn_time(dyn_session *s, const char *statement, dyn_timing *out);

/* What :sched computes for a function, at sizes if given (names[i] = values[i]). */
typedef struct dyn_schedule {
  const char *function;
  const char *target;         /* "cpu", "gpu", "ref" */
  const char *hardware;       /* the hardware model's name */
  int threads;
  int compiles;               /* how many times the function was compiled */
  double compile_ms;          /* the CPU compilation's time (0: not compiled) */
  double predicted_ms;        /* at the sizes given (0: none given) */
  const char *text;           /* what :sched prints: the kernels, their loops and choices */
} dyn_schedule;
DYN_API int dyn_sched(dyn_session *s, const char *name, const char *const *size_names,
                      const int64_t *size_values, int nsizes, dyn_schedule *out);

#ifdef __cplusplus
}
#endif
#endif
