/* dyn.h -- the one header of dyn, a compiler and REPL for tensor programs with symbolic shapes.
 *
 * One section per module, in pipeline order.  Every module is one file whose name is the
 * prefix of what it exports (sched.c -> sched_*).  Ownership: a function that returns a
 * pointer says who frees it; "arena" means the caller's compilation arena owns it.
 */
#ifndef DYN_H
#define DYN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DYN_VERSION_STRING PACKAGE_VERSION
#define DYN_MAX_RANK 8

/* ---- util.c: memory, arenas, growable strings ------------------------------------------- */

void *xmalloc(size_t n);             /* aborts with a message on exhaustion (never NULL) */
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* An arena: bump allocation, freed all at once.  One per compilation (REPL input, file). */
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);           /* zeroed, 16-byte aligned */
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growable string.  buf_free releases it; buf.s is always NUL-terminated. */
typedef struct { char *s; size_t len, cap; } Buf;
void buf_putc(Buf *b, char c);
void buf_puts(Buf *b, const char *s);
void buf_putn(Buf *b, const char *s, size_t n);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(Buf *b, const char *fmt, va_list ap);
void buf_free(Buf *b);

/* Growable arrays of anything: VEC(T) v = {0}; vec_push(v, x); v.n, v.a[i]. */
#define VEC(T) struct { T *a; int n, cap; }
#define vec_push(v, x) do { if ((v).n == (v).cap) { (v).cap = (v).cap ? 2 * (v).cap : 8; \
      (v).a = xrealloc((v).a, (size_t)(v).cap * sizeof *(v).a); } (v).a[(v).n++] = (x); } while (0)
#define vec_free(v) do { free((v).a); (v).a = NULL; (v).n = (v).cap = 0; } while (0)

/* Checked size arithmetic: false on overflow. */
bool size_mul_ok(int64_t a, int64_t b, int64_t *out);

/* ---- element types (lang/elem.def) ------------------------------------------------------ */

typedef enum {
#define X(E, name, ctype, bytes, isf, isi) DYN_##E,
#include "../lang/elem.def"
#undef X
  DYN_NELEM
} DynElem;

const char *elem_name(DynElem e);          /* "f32" */
int elem_size(DynElem e);                  /* bytes */
bool elem_is_float(DynElem e);
bool elem_is_int(DynElem e);
bool elem_from_name(const char *s, size_t n, DynElem *out);

/* ---- tensor.c: tensors with refcounted buffers, printing -------------------------------- */

typedef struct Buffer {
  int refs;
  size_t bytes;
  void *data;                 /* 64-byte aligned */
} Buffer;

typedef struct Tensor {
  int refs;
  DynElem elem;
  int rank;
  int64_t shape[DYN_MAX_RANK];
  int64_t strides[DYN_MAX_RANK];   /* in elements; C order when made by tensor_new */
  Buffer *buf;
  int64_t offset;                  /* in elements */
} Tensor;

/* A new zero-filled C-order tensor.  NULL with a message in err when the shape is negative,
 * the size overflows, or memory cannot be had (never aborts on a huge request). */
Tensor *tensor_new(DynElem elem, int rank, const int64_t *shape, char *err, size_t errlen);
Tensor *tensor_retain(Tensor *t);
void tensor_release(Tensor *t);            /* NULL-safe */
int64_t tensor_numel(const Tensor *t);
void *tensor_data(const Tensor *t);        /* address of element (0, ..., 0) */
bool tensor_contiguous(const Tensor *t);
double tensor_get_f64(const Tensor *t, int64_t flat);   /* flat C-order index, any elem */
int64_t tensor_get_i64(const Tensor *t, int64_t flat);
void tensor_set_f64(Tensor *t, int64_t flat, double v);  /* converts (rounds to f32, truncs) */
void tensor_set_i64(Tensor *t, int64_t flat, int64_t v);
/* "f32[100, 3072]" (rank 0: "f32") */
void tensor_type_str(const Tensor *t, Buf *out);
/* The value as the REPL and print() show it: the type, then the elements NumPy-style, with
 * large tensors summarised (first and last 3 rows/columns, "..."). */
void tensor_format(const Tensor *t, Buf *out);

/* ---- npy.c: NumPy .npy files (format 1.0/2.0/3.0, little-endian, C or Fortran order) --- */

/* Load: NULL with a message naming the file and the problem on any error. */
Tensor *npy_load(const char *path, char *err, size_t errlen);
/* Save: false with a message on error. */
bool npy_save(const Tensor *t, const char *path, char *err, size_t errlen);
/* The same on memory, for tests and fuzzing: parse a whole file image. */
Tensor *npy_parse(const void *data, size_t len, const char *name, char *err, size_t errlen);

/* ---- poly.c: symbolic sizes as canonical polynomials ------------------------------------ */

/* A size is a polynomial with integer coefficients over size variables and opaque atoms
 * (floor division, modulo, min, max of polynomials that do not simplify).  Polynomials are
 * hash-consed in a PolyCtx, so two sizes are equal exactly when their pointers are equal:
 * N + 1 and 1 + N are one object.  A PolyCtx lives as long as the session. */
typedef struct PolyCtx PolyCtx;
typedef struct Poly Poly;

PolyCtx *poly_ctx_new(void);
void poly_ctx_free(PolyCtx *c);

const Poly *poly_const(PolyCtx *c, int64_t v);
const Poly *poly_var(PolyCtx *c, const char *name);    /* the name is copied */
const Poly *poly_add(PolyCtx *c, const Poly *a, const Poly *b);
const Poly *poly_sub(PolyCtx *c, const Poly *a, const Poly *b);
const Poly *poly_mul(PolyCtx *c, const Poly *a, const Poly *b);
const Poly *poly_neg(PolyCtx *c, const Poly *a);
const Poly *poly_div(PolyCtx *c, const Poly *a, const Poly *b);   /* floor division */
const Poly *poly_mod(PolyCtx *c, const Poly *a, const Poly *b);   /* a - b*floor(a/b) */
const Poly *poly_min(PolyCtx *c, const Poly *a, const Poly *b);
const Poly *poly_max(PolyCtx *c, const Poly *a, const Poly *b);

bool poly_is_const(const Poly *p, int64_t *v);      /* v may be NULL */
const char *poly_as_var(const Poly *p);             /* the name if p is a lone variable */
/* Canonical text, readable: "H - R + 1", "2*N + 2", "N*M", "(N + 1)/2", "min(N, 4)". */
void poly_str(const Poly *p, Buf *out);
/* The variables p mentions, each once, in canonical order. */
int poly_vars(const Poly *p, const char **names, int max);
/* Replace variables: lookup returns the replacement or NULL to keep the variable. */
const Poly *poly_subst(PolyCtx *c, const Poly *p,
                       const Poly *(*lookup)(void *env, const char *name), void *env);
/* Evaluate with every variable bound: lookup returns false for an unbound variable.  False
 * also on division by zero or overflow (what names the problem in *why, a static string). */
bool poly_eval(const Poly *p, bool (*lookup)(void *env, const char *name, int64_t *v),
               void *env, int64_t *out, const char **why);
/* Prove p >= 0 when every variable is >= 0 and each poly in facts is >= 0.
 * Sound but incomplete: false means "could not prove". */
bool poly_nonneg(PolyCtx *c, const Poly *p, const Poly *const *facts, int nfacts);
/* The coefficient view used by the bounds prover: p = sum_i coef_i * var_i + rest, where
 * rest does not mention var.  Returns false if p is not affine in var. */
bool poly_affine_in(PolyCtx *c, const Poly *p, const char *var, const Poly **coef,
                    const Poly **rest);

/* ---- hw.c: the hardware model, from hw/ files and host detection ----------------------- */

/* One level of a memory hierarchy.  Every figure comes from an hw file (with its source
 * cited there) or from host detection; no cost-model constant lives in C. */
typedef struct HwLevel {
  char name[16];          /* "L1", "L2", "L3", "DRAM", "smem", "HBM" */
  int64_t bytes;          /* capacity per unit (per core for private caches) */
  int shared_by;          /* cores sharing one unit (1 = private) */
  int line;               /* line size in bytes */
  double gbs;             /* sustained bandwidth per core (CPU) or per device (GPU), GB/s */
} HwLevel;

typedef struct HwModel {
  char name[64];          /* "zen5", "h100", "host" */
  char kind[8];           /* "cpu" or "gpu" */
  char desc[128];         /* one line for the banner and :hw */
  /* CPU */
  int cores;
  double ghz;
  int vector_bits;        /* 128, 256, 512 */
  int vec_regs;           /* architectural vector registers */
  int fma_units;          /* FMA pipes per core */
  int fma_latency;        /* cycles */
  char llvm_cpu[32];      /* "znver4", "skylake-avx512", "generic" */
  char llvm_features[256];
  /* GPU */
  int sm_count, cc_major, cc_minor, warp_size, regs_per_sm, regs_per_thread_max;
  int64_t smem_per_sm, smem_per_block;
  int max_threads_per_block;
  double fp32_tflops, tf32_tflops, bf16_tflops;
  /* both */
  int nlevels;
  HwLevel level[6];       /* fastest first; the last is main memory */
  double peak_gflops_f32; /* derived when absent: cores * ghz * fma_units * 2 * vector_bits/32 */
  char path[256];         /* where it was loaded from ("" for built-in or detected) */
} HwModel;

/* Parse an hw file's text.  False with "FILE:LINE: message" in err on a bad line. */
bool hw_parse(const char *text, const char *fname, HwModel *out, char *err, size_t errlen);
/* Load by name ("zen5": searched in the hw directory) or by path. */
bool hw_load(const char *name_or_path, HwModel *out, char *err, size_t errlen);
/* Fill from this machine: cpuid, sysfs caches, core count. Always succeeds. */
void hw_detect_host(HwModel *out);
/* The text :hw prints. */
void hw_describe(const HwModel *hw, Buf *out);
/* The hw/ directory used by hw_load: $DYN_HW_DIR, else the build tree, else $(pkgdatadir)/hw */
const char *hw_dir(void);

/* ---- lineedit.c: the built-in line editor (used when readline is absent) --------------- */

/* Read one line with the prompt; NULL at end of input (Ctrl-D on an empty line).  The
 * result is malloc'd.  On a terminal: raw mode, editing keys, history; otherwise a plain
 * read with no prompt or escape codes.  Ctrl-C clears the line and returns "" with
 * *interrupted set. */
typedef struct LineEdit LineEdit;
LineEdit *lineedit_new(int in_fd, int out_fd);
void lineedit_free(LineEdit *le);
char *lineedit_read(LineEdit *le, const char *prompt, bool *interrupted);
void lineedit_history_add(LineEdit *le, const char *line);
bool lineedit_history_load(LineEdit *le, const char *path);
bool lineedit_history_save(LineEdit *le, const char *path);
/* Completion: called with the line and cursor; adds candidates for the word ending there. */
typedef void (*LineEditCompleter)(void *env, const char *line, int cursor,
                                  void (*add)(void *cookie, const char *cand), void *cookie);
void lineedit_set_completer(LineEdit *le, LineEditCompleter fn, void *env);

/* ---- (sections for the compiler modules follow) ----------------------------------------- */

/* ---- session.c: a session -- bindings, functions, options -- and running top-level input */

typedef struct Session Session;
typedef enum { RUN_OK, RUN_ERROR, RUN_INCOMPLETE, RUN_QUIT } RunStatus;
/* Run one input: a script, or one REPL entry (possibly several lines).  origin names it in
 * diagnostics ("demo.dyn", "<repl:3>").  RUN_INCOMPLETE: the text ends inside an open
 * bracket, brace or parenthesis or after a binary operator; nothing was run and nothing
 * printed, so the caller may append a line and try again.  Errors are printed to the
 * session's error stream; every binding made before the error is kept. */
RunStatus session_run(Session *s, const char *text, const char *origin);
/* Candidates for completing the word prefix: bound names, functions, commands. */
void session_complete(Session *s, const char *prefix,
                      void (*add)(void *cookie, const char *cand), void *cookie);
/* Async-signal-safe: ask the running computation to stop at its next check. */
void session_interrupt(Session *s);
/* One line: "dyn 0.1.0 -- back end: cpu (LLVM 19), hardware: zen5 (2 cores, AVX-512)" */
void session_banner(Session *s, Buf *out);

/* ---- repl.c: the interactive loop ------------------------------------------------------- */

/* Read, run, print until :quit or end of input.  Uses GNU readline when built with it
 * (history in ~/.dyn_history, completion of names, commands and file names after :load),
 * else lineedit.  When standard input is not a terminal: no prompt, no banner, plain lines.
 * Returns the process exit status. */
int repl_main(Session *s, bool quiet);

#endif
