/* dyn_int.h -- the internal header of dyn, a compiler and REPL for tensor programs with symbolic shapes.
 *
 * One section per module, in pipeline order.  Every module is one file whose name is the
 * prefix of what it exports (parse.c -> parse_*).  Ownership: a function that returns a
 * pointer says who frees it; "arena" means the caller's compilation arena owns it.
 */
#ifndef DYN_INT_H
#define DYN_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DYN_MAX_RANK 8

/* ---- util.c: memory, arenas, growable strings ------------------------------------------- */

void *xmalloc(size_t n);             /* exits (status 1) with a message on exhaustion */
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void sort_doubles(double *t, size_t n);  /* ascending, in place (timings for medians) */
/* Seconds on the monotonic clock (timings). */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An arena: bump allocation, freed all at once.  One per compilation (REPL input, file). */
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void arena_reset(Arena *a);                       /* free all but one chunk, and empty it */
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
/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), at most left bytes long; 0 if there is none. */
int utf8_len(const unsigned char *s, size_t left);

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
/* f16 or bf16: stored in 16 bits, computed in f32 (a value of the type is held as an f32
 * between a load and a store) */
bool elem_is_half(DynElem e);
/* The type whose arithmetic computes e: f32 for f16 and bf16, else e itself. */
DynElem elem_compute(DynElem e);

/* ---- half.c: the 16-bit float types' conversions (round to nearest, ties to even) ------- */

uint16_t half_f16_from(double x);           /* IEEE binary16; overflow gives inf, NaN a quiet NaN */
double half_f16_to(uint16_t h);             /* exact */
uint16_t half_bf16_from(double x);          /* bfloat16 */
double half_bf16_to(uint16_t h);            /* exact */
/* x rounded to e's precision (f16, bf16, f32; any other type: x itself) */
double half_round(DynElem e, double x);

/* ---- tensor.c: tensors with refcounted buffers, printing -------------------------------- */

typedef struct Tensor Tensor;
typedef struct Buffer {
  int refs;
  size_t bytes;
  void *data;                 /* 64-byte aligned */
  Tensor *home;               /* the tensor whose block holds this buffer, or NULL */
  bool borrowed;              /* data is someone else's (tensor_wrap): never freed here */
} Buffer;

struct Tensor {
  int refs;
  DynElem elem;
  int rank;
  int64_t shape[DYN_MAX_RANK];
  int64_t strides[DYN_MAX_RANK];   /* in elements; C order when made by tensor_new */
  Buffer *buf;
  int64_t offset;                  /* in elements */
};

/* A new zero-filled C-order tensor.  NULL with a message in err when the shape is negative,
 * the size overflows, or memory cannot be had (never aborts on a huge request). */
Tensor *tensor_new(DynElem elem, int rank, const int64_t *shape, char *err, size_t errlen);
/* A new Tensor over base's buffer (which it retains) with the given shape, strides and offset,
 * all in elements; the caller keeps them inside the buffer.  Release it like any tensor. */
Tensor *tensor_view(Tensor *base, int rank, const int64_t *shape, const int64_t *strides,
                    int64_t offset);
/* The same without zeroing (for outputs a back end writes whole); large buffers may be
 * reused from a small cache of freed ones. */
Tensor *tensor_new_uninit(DynElem elem, int rank, const int64_t *shape, char *err, size_t errlen);
/* A tensor over memory the caller owns and keeps alive longer (the library's arguments):
 * data is element (0, ..., 0); strides in elements, any sign.  Releasing it frees only the
 * headers.  Its buffer's bytes is 0: nothing may assume the memory is dyn's (aligned to 64,
 * readable past its end). */
Tensor *tensor_wrap(DynElem elem, int rank, const int64_t *shape, const int64_t *strides, void *data);
Tensor *tensor_retain(Tensor *t);
void tensor_release(Tensor *t);            /* NULL-safe */
int64_t tensor_numel(const Tensor *t);
void *tensor_data(const Tensor *t);        /* address of element (0, ..., 0) */
bool tensor_contiguous(const Tensor *t);
/* t itself (a new reference) when it is C-contiguous, else a C-order copy of a view (a
 * slice); NULL with a message when memory cannot be had. */
Tensor *tensor_contiguous_copy(Tensor *t, char *err, size_t errlen);
double tensor_get_f64(const Tensor *t, int64_t flat);   /* flat C-order index, any elem */
int64_t tensor_get_i64(const Tensor *t, int64_t flat);
void tensor_set_f64(Tensor *t, int64_t flat, double v);  /* converts (rounds to f32, truncs) */
void tensor_set_i64(Tensor *t, int64_t flat, int64_t v);
/* "f32[100, 3072]" (rank 0: "f32") */
void tensor_type_str(const Tensor *t, Buf *out);
/* The value as the REPL and print() show it: the type, then the elements NumPy-style, with
 * large tensors summarised (first and last 3 rows/columns, "..."). */
void tensor_format(const Tensor *t, Buf *out);

/* ---- file.c: reading with a limit, replacing a file whole or not at all ----------------- */

/* The most a script may be (a file, standard input, :load, import): lang/reference.md. */
#define FILE_SOURCE_MAX ((size_t)64 << 20)

typedef enum {
  FILE_OK,
  FILE_OPEN_FAILED,            /* *err: errno */
  FILE_READ_FAILED,            /* *err: errno (EISDIR for a directory, ENOMEM) */
  FILE_TOO_LARGE,              /* more than max bytes */
  FILE_NOT_REGULAR,            /* regular_only, and it is a FIFO, a device, ... */
  FILE_STOPPED,                /* *stop was set while a read waited */
} FileStatus;
/* All of the file at path (or, with path NULL, of descriptor fd, left open), at most max
 * bytes: *text is malloc'd and NUL-terminated after its *len bytes (which may hold NULs).
 * regular_only: anything but a regular file is refused before a byte is read, and opening
 * does not wait on a FIFO. */
FileStatus file_read_all(const char *path, int fd, size_t max, bool regular_only,
                         volatile int *stop, char **text, size_t *len, int *err);

/* A file being replaced: open, write, then commit (the destination becomes the new file)
 * or abandon (the destination is as it was).  Until then a temporary beside the destination
 * holds the data, and SIGINT, SIGTERM and SIGHUP (those not handled by someone else) remove
 * it before they end the process.  An existing device or FIFO is written in place.  The new
 * file has the permissions a new file gets (0666 less the umask).  Messages in err carry no
 * file name; "interrupted" when *stop was set. */
typedef struct FileOut FileOut;
FileOut *file_out_open(const char *path, volatile int *stop, char *err, size_t errlen);
bool file_out_write(FileOut *o, const void *data, size_t n, volatile int *stop, char *err,
                    size_t errlen);               /* false: call file_out_abandon */
bool file_out_commit(FileOut *o, char *err, size_t errlen);   /* frees o, either way */
void file_out_abandon(FileOut *o);                            /* frees o; NULL-safe */

/* ---- npy.c: NumPy .npy files (format 1.0/2.0/3.0, little-endian, C or Fortran order) --- */

/* Load: NULL with a message naming the file and the problem on any error.  stop (may be
 * NULL): the session's interrupt flag, checked between chunks; then "interrupted". */
Tensor *npy_load(const char *path, volatile int *stop, char *err, size_t errlen);
/* Save, replacing the file whole (file_out_open): false with a message on error, and then
 * the old file, if any, is untouched. */
bool npy_save(const Tensor *t, const char *path, volatile int *stop, char *err, size_t errlen);
/* The same on memory, for tests and fuzzing: parse a whole file image. */
Tensor *npy_parse(const void *data, size_t len, const char *name, char *err, size_t errlen);
/* The whole .npy file of t appended to out (npz.c stores it in an archive). */
void npy_encode(const Tensor *t, Buf *out);

/* ---- npz.c: NumPy .npz archives (zip, stored or deflated, zip64 read) ------------------ */

/* The array `member` ("W", or "W.npy") of the archive, or with member NULL its only one;
 * NULL with a message naming the file, the member and the problem.  Without zlib, every
 * .npz is refused with a message that says so. */
Tensor *npz_load(const char *path, const char *member, volatile int *stop, char *err, size_t errlen);
/* Save n tensors as members names[i].npy, deflated, replacing the file whole. */
bool npz_save(const char *path, Tensor *const *ts, const char *const *names, int n, volatile int *stop,
              char *err, size_t errlen);
/* True if path ends in .npz (load and save choose the format by the name). */
bool npz_is_npz(const char *path);

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

/* Where a figure of a model comes from, worst first (hw/README.md, "Where figures come
 * from").  A model made in C without hw_parse leaves them HW_NOT_TRACKED, and :hw tags none. */
typedef enum {
  HW_NOT_TRACKED = 0,
  HW_UNSOURCED,           /* a file line without a comment */
  HW_GUESSED,             /* its comment says "approximate" or "estimate", or a default */
  HW_SOURCED,             /* its comment cites a manual, datasheet or derivation */
  HW_MEASURED,            /* read from this machine, dyn --calibrate's, or "measured" in its file */
} HwProv;

/* The figures of HwModel.prov[], one per numeric key of an hw file. */
enum {
  HW_F_CORES, HW_F_GHZ, HW_F_PEAK, HW_F_VECTOR_BITS, HW_F_VEC_REGS, HW_F_FMA_UNITS,
  HW_F_FMA_LATENCY, HW_F_VEC_UNITS, HW_F_GATHER_LANE_CYCLES, HW_F_SM_COUNT, HW_F_CC, HW_F_WARP_SIZE, HW_F_REGS_PER_SM,
  HW_F_REGS_PER_THREAD_MAX, HW_F_SMEM_PER_SM, HW_F_SMEM_PER_BLOCK, HW_F_MAX_THREADS_PER_BLOCK,
  HW_F_FP32_TFLOPS, HW_F_TF32_TFLOPS, HW_F_BF16_TFLOPS, HW_F_LINE_MOVE_NS, HW_F_BF16_PER_FMA,
  HW_F_TILE_OFF_LINE, HW_NFIGURES
};

/* One level of a memory hierarchy.  Every figure comes from an hw file (with its source
 * cited there) or from host detection; no cost-model constant lives in C. */
typedef struct HwLevel {
  char name[16];          /* "L1", "L2", "L3", "DRAM", "smem", "HBM" */
  int64_t bytes;          /* capacity per unit (per core for private caches) */
  int shared_by;          /* cores sharing one unit (1 = private) */
  int line;               /* line size in bytes */
  double gbs;             /* sustained bandwidth per core (CPU) or per device (GPU), GB/s */
  double total_gbs;       /* the whole chip's (CPU; derived as gbs * cores for caches when a
                           * file omits it) or the device's (GPU: equal to gbs), GB/s */
  int ways;               /* associativity of a cache; a CPU's L1 without it in its file has
                           * bytes / 4 KiB (an x86 L1 is VIPT: one way spans a page); 0: unknown */
  int64_t whole_bytes;    /* a guest's shared cache: the capacity its system reports, of which
                           * bytes is the share the model counts on (hw.c); 0 otherwise */
  int64_t kept_bytes;     /* the most of a set read again and again that such a cache kept for
                           * the cores when dyn --calibrate measured it, bytes to whole_bytes
                           * (sched.c's fit_capacity); 0: not measured */
  HwProv prov_bytes, prov_line, prov_shared, prov_gbs, prov_total, prov_ways;
} HwLevel;

/* The most levels a memory hierarchy has in a model. */
#define HW_MAX_LEVELS 6

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
  int vec_units;          /* vector pipes per core, each vector_bits wide, that take floating-point
                           * adds, multiplies, compares and blends, the FMA pipes among them
                           * (0: fma_units); streaming kernels' lane-operations issue on them */
  double gather_lane_cycles; /* a vector gather's cycles a lane at throughput (0: 1) */
  double line_move_ns;    /* a cache line two cores both write, moving from one to the other
                           * (0: not stated) */
  double tile_off_line;   /* a layout change's tile whose result rows are not whole lines apart,
                           * over one whose rows are (0: cpu_layout.c's OFF_LINE) */
  double sync_us;         /* a fork-join of the CPU pool on its threads, as dyn --calibrate
                           * measured it (0: not measured; sched_sync_s's constant) */
  double call_us;         /* a call of compiled code through the session whose one kernel does
                           * next to nothing, as dyn --calibrate measured it (0: not measured;
                           * cpu_sched.c's CALL_S and KERNEL_S as they are) */
  double write_cost;      /* memory's traffic for a byte a kernel writes, in bytes read at its
                           * rate: read for ownership and written back, as dyn --calibrate's
                           * copy measured it against its reads (0: not measured; 2) */
  double lane_scale;      /* the share of the lane-operations a second that vec_units promise
                           * which compiled vector math reaches, as dyn --calibrate measured it
                           * (0: not measured; 1) */
  char arch[16];          /* the instruction set: "x86_64" (the default) or "aarch64" */
  char llvm_cpu[32];      /* "znver4", "skylake-avx512", "generic" */
  char llvm_features[256];
  /* GPU */
  int sm_count, cc_major, cc_minor, warp_size, regs_per_sm, regs_per_thread_max;
  int64_t smem_per_sm, smem_per_block;
  int max_threads_per_block;
  double fp32_tflops, tf32_tflops, bf16_tflops;
  /* both */
  int nlevels;
  HwLevel level[HW_MAX_LEVELS]; /* fastest first; the last is main memory */
  double peak_gflops_f32; /* derived when absent: cores * ghz * fma_units * 2 * vector_bits/32 */
  double bf16_per_fma;    /* CPU: a core's bf16 contraction rate over its f32 FMA rate (0: 1, the
                             operands widened to f32; 2 where vdpbf16ps issues as an FMA does) */
  char path[256];         /* where it was loaded from ("" for built-in or detected) */
  char llvm_cpu_fallback[32]; /* for an LLVM that does not know llvm_cpu ("generic" if unset) */
  char source[384];       /* detected models: what was detected, what came from which file */
  HwProv prov[HW_NFIGURES]; /* where each scalar figure comes from (HW_F_*) */
} HwModel;

/* Parse an hw file's text.  False with "FILE:LINE: message" in err on a bad line. */
bool hw_parse(const char *text, const char *fname, HwModel *out, char *err, size_t errlen);
/* Load by name ("zen5": searched in the hw directory) or by path. */
bool hw_load(const char *name_or_path, HwModel *out, char *err, size_t errlen);
/* Fill from this machine: cpuid, sysfs caches, core count. Always succeeds. */
void hw_detect_host(HwModel *out);
/* The text :hw prints. */
void hw_describe(const HwModel *hw, Buf *out);
/* The hw/ directory used by hw_load: $DYN_HW_DIR, else the source tree's when the program runs
 * from it (found from /proc/self/exe), else $(pkgdatadir)/hw */
const char *hw_dir(void);
/* hw_detect_host reading /proc and /sys under root ("" is the real ones; tests pass a fake
 * tree).  hw_load("host") is hw_detect_host.  For GPUs, cores is the SM count. */
void hw_detect_host_in(const char *root, HwModel *out);
/* Cache levels (all but the last level, main memory), and the capacity of cache level i
 * (0 = L1) one core may use: its share of a shared level, a floor when unknown, and a level
 * the model lacks taken as its last cache. */
int hw_ncaches(const HwModel *h);
double hw_cache_bytes(const HwModel *h, int i);
/* Where the figure an hw file sets with `key` ("ghz", "l2.gbs") comes from in this model, or
 * -1 when the model has no such figure (a level it lacks, a key of the other kind). */
int hw_prov(const HwModel *h, const char *key);
/* Use a measured f32 peak of the whole chip (dyn --calibrate's) in place of the model's. */
void hw_set_measured_peak(HwModel *h, double gflops);
/* Use measured read rates of level i (dyn --calibrate's): a core's and all the cores'. */
void hw_set_measured_gbs(HwModel *h, int i, double gbs, double total_gbs);

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
/* A non-blocking descriptor (a self-pipe written by a SIGINT handler) whose turning readable
 * ends a read as ^C does; lineedit drains it.  -1 (the default): none. */
void lineedit_set_interrupt_fd(LineEdit *le, int fd);

/* ---- diag.c: sources, spans and diagnostics (lang/diag.def) ----------------------------- */

/* A source text: a file, a REPL input, an -e string, a stdlib module.  Sources live as long
 * as the session, so spans into them stay valid for notes that point at old definitions. */
typedef struct Source {
  char *name;                 /* "demo.dyn", "<repl:3>", "stdlib/linalg.dyn" */
  char *text;
  size_t len;
  /* A command's argument parsed on its own (`:check EXPR`) is a copy of the bytes at base
   * in parent: its tokens' spans point into parent, so messages give the line and column
   * where the user typed it. */
  const struct Source *parent;
  uint32_t base;
} Source;

/* A byte range in a source; line and column are computed only when printed. */
typedef struct Span {
  const Source *src;
  uint32_t lo, hi;
} Span;

typedef enum { DIAG_ERROR, DIAG_WARNING } DiagLevel;
typedef enum {
#define D(ID, level, fmt) ID,
#include "../lang/diag.def"
#undef D
  D__COUNT
} DiagId;

typedef struct DiagNote { Span span; char *msg; struct DiagNote *next; } DiagNote;
typedef struct Diag {
  DiagId id;
  DiagLevel level;
  Span span;
  char *msg;
  DiagNote *notes, *last_note;
  struct Diag *next;
} Diag;
/* A sink: diagnostics are collected, never fatal; the caller prints and clears. */
typedef struct Diags { Diag *head, *tail; int nerrors, nwarnings; } Diags;

Span span_join(Span a, Span b);
void span_linecol(Span s, int *line, int *col);
/* Report with the message format of lang/diag.def row `id`.  Returns the diagnostic so
 * notes can be added. */
Diag *diag_report(Diags *d, Span at, DiagId id, ...);
Diag *diag_reportv(Diags *d, Span at, DiagId id, va_list ap);
/* A note; if at.src is set, it prints as FILE:LINE:COL: note: TEXT, else note: TEXT. */
void diag_note(Diag *dg, Span at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "FILE:LINE:COL: error: MSG", the source line, a caret under the span, then the notes. */
void diag_format(const Diag *dg, Buf *out);
/* The same as one line of JSON (dyn --diagnostics=json; the fields in lang/diagnostics.md). */
void diag_format_json(const Diag *dg, Buf *out);
void diag_print_all(const Diags *d, FILE *f, bool json);
void diag_clear(Diags *d);
const char *diag_id_name(DiagId id);     /* "E_UNDEFINED" for the reference's list */
const char *diag_id_format(DiagId id);

/* ---- suggest.c: "did you mean NAME?" ---------------------------------------------------- */

/* Feed candidates to a Suggest made for an unknown name; suggest_best is the one clearly
 * nearest (by Damerau-Levenshtein distance, within a third of the name's length), or NULL
 * when none is near or two are equally near.  Candidates must outlive the Suggest. */
typedef struct Suggest {
  const char *name, *best;
  int limit, best_d, second_d;
} Suggest;
void suggest_init(Suggest *sg, const char *name);
void suggest_add(Suggest *sg, const char *cand);
void suggest_add_cb(void *sg, const char *cand);     /* for callbacks taking (void *, name) */
const char *suggest_best(const Suggest *sg);
int suggest_distance(const char *a, const char *b);

/* ---- lex.c: tokens (lang/tokens.def) ---------------------------------------------------- */

typedef enum {
#define T(E, s) TK_##E,
#define K(E, s) TK_##E,
#include "../lang/tokens.def"
#undef T
#undef K
  TK__COUNT
} TokKind;

typedef struct Token {
  TokKind kind;
  Span span;
  const char *text;           /* IDENT: the name; STRING: decoded; COMMAND: the line */
  double num;                 /* NUMBER */
  int64_t ival;               /* NUMBER with is_int */
  bool is_int;
} Token;

const char *lex_kind_name(TokKind k);
/* Tokenise a whole source into an arena array ending with TK_EOF.  Newlines inside ( ) and
 * [ ] are dropped; elsewhere a newline or ';' is TK_NEWLINE.  A top-level line whose first
 * non-blank character is ':' becomes one TK_COMMAND.  A line ending with an operator
 * continues on the next.  Errors go to d. */
Token *lex_source(Arena *a, const Source *src, Diags *d, int *ntok);

/* ---- op.c: operators, math functions and reductions (lang/ops.def) ---------------------- */

typedef enum {
#define OP(E, s, arity, kind, prec) OP_##E,
#include "../lang/ops.def"
#undef OP
  OP__COUNT
} OpKind;
typedef enum { OPK_ARITH, OPK_CMP, OPK_LOGIC, OPK_FLOAT, OPK_NUM } OpClass;
const char *op_name(OpKind op);
int op_arity(OpKind op);
int op_prec(OpKind op);                    /* binding strength, for printing (ops.def) */
OpClass op_class(OpKind op);
bool op_from_name(const char *s, OpKind *out);        /* math functions by name */
/* (poly.c) a op b as a polynomial, for op among + - * / % (any other is taken as %). */
const Poly *poly_op(PolyCtx *c, OpKind op, const Poly *a, const Poly *b);

typedef enum { RED_SUM, RED_MAX, RED_MIN, RED_PROD } RedOp;
const char *red_name(RedOp r);                        /* "sum" */

/* ---- parse.c: the AST -------------------------------------------------------------------- */

typedef enum {
  EX_NUM, EX_BOOL, EX_STR, EX_NAME, EX_INDEX, EX_CALL, EX_UNARY, EX_BINARY, EX_REDUCE,
  EX_WHERE, EX_LIST, EX_TYPE, EX_CAST,
  EX_SLICE,                   /* a subscript start:stop:step, each part optional (slice_part) */
  EX_SCAN                     /* scan[j] +(body): red the operator, ridx[0] the index, args[0] */
} ExprKind;

/* What a name in an expression turned out to be (set by sema). */
typedef enum { RES_NONE, RES_INDEX, RES_TENSOR, RES_SIZE } ResKind;

typedef struct TypeExpr TypeExpr;
typedef struct Expr Expr;
struct Expr {
  ExprKind kind;
  Span span;
  /* syntax */
  double num; int64_t ival; bool is_int;   /* EX_NUM, EX_BOOL (ival) */
  const char *name; Span name_span;        /* EX_NAME, EX_INDEX base, EX_CALL callee, EX_STR */
  Expr **args; int nargs;                  /* subscripts, arguments, operands, list items */
  OpKind op;                               /* EX_UNARY, EX_BINARY, EX_CALL of a math fn */
  RedOp red; const char **ridx; Span *ridx_span; int nridx;  /* EX_REDUCE: args[0] is body */
  Expr **rbound;                           /* EX_REDUCE: `k < N/2`'s N/2 per index, or NULL */
  Expr *base;                              /* EX_INDEX: softmax(X)[0, 1]'s call, or NULL */
  DynElem elem; bool has_elem;             /* EX_TYPE, EX_CAST, typed EX_LIST */
  /* semantics (sema) */
  DynElem ty; bool weak;                   /* value type; weak = a literal or size/index */
  DynElem opty;                            /* comparisons: the operands' type */
  ResKind res; const Poly *size;           /* EX_NAME as size: its polynomial */
  bool is_math;                            /* EX_CALL of a math function (op) */
  const Poly **rext;                       /* EX_REDUCE: the extent of each index */
  bool checked;                            /* EX_INDEX: bounds not proven, checked at run time */
  bool view;                               /* EX_INDEX made from a view (slice, reshape, concat,
                                              stack): in bounds by the view's own checks */
};

/* An EX_SLICE's start (0), stop (1) or step (2), or NULL where it is left out: its args hold
 * the parts written, ival the bit (1 << part) of each. */
Expr *slice_part(const Expr *e, int part);
/* Does an EX_INDEX have an EX_SLICE among its subscripts? */
bool expr_is_slice(const Expr *e);

struct TypeExpr {
  enum { TY_TENSOR, TY_SIZE, TY_TUPLE } kind;
  Span span;
  DynElem elem;
  Expr **dims; int ndims;
  TypeExpr **parts; int nparts;
};

typedef struct Param { const char *name; Span span; TypeExpr *type; } Param;

typedef struct Stmt Stmt;
typedef struct FnDecl {
  const char *name; Span name_span, span;
  Param *params; int nparams;
  TypeExpr *ret;              /* NULL: inferred from the return statement */
  Expr **facts; int nfacts;
  Stmt **body; int nbody;
} FnDecl;

typedef enum { ST_FN, ST_DEF, ST_ASSIGN, ST_RETURN, ST_IMPORT, ST_COMMAND, ST_EXPR } StmtKind;
struct Stmt {
  StmtKind kind;
  Span span;
  const char *name; Span name_span;       /* ST_DEF target; ST_IMPORT module or path */
  const char **idx; Span *idx_span; int nidx;   /* ST_DEF left-hand indices */
  TypeExpr *annot;                        /* ST_DEF optional annotation */
  Expr *expr;                             /* ST_DEF, ST_ASSIGN, ST_EXPR */
  const char **names; Span *name_spans; int nnames; bool tuple;  /* ST_ASSIGN, ST_RETURN */
  bool is_path;                           /* ST_IMPORT "file.dyn" */
  const char *text;                       /* ST_COMMAND: the line after ':' */
  FnDecl *fn;                             /* ST_FN */
  const struct Type *type;                /* ST_DEF: the defined tensor's type (sema) */
  const struct Type *shape;               /* ST_DEF made from a view: its shape, which gives the
                                             indices their ranges (sema) */
};

/* Parse a whole source.  Errors go to d, with recovery at statement boundaries.
 * *incomplete is set when the text ended where more input was expected (inside brackets
 * or a body, after an operator): the REPL then reads another line instead of reporting. */
Stmt **parse_source(Arena *a, const Source *src, Diags *d, int *nstmt, bool *incomplete);
/* Parse just an expression (for :type EXPR and -e); NULL on error. */
Expr *parse_expression(Arena *a, const Source *src, Diags *d);
void parse_print_expr(const Expr *e, Buf *out);     /* back to source-like text */

/* ---- type.c: the type of a tensor value ------------------------------------------------- */

typedef struct Type {
  DynElem elem;
  int rank;
  const Poly *dims[DYN_MAX_RANK];
} Type;
void type_str(const Type *t, Buf *out);              /* "f32[M, K]", "f32" */
bool type_equal(const Type *a, const Type *b);       /* dims compared as (hash-consed) polys */

/* ---- sema.c: types, sizes, index ranges, bounds ------------------------------------------ */

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } CmpOp;

/* A fact about sizes.  what: NULL for a `where` fact; for a condition a view needs that the
 * checker could not prove ("the slice X[:, D:2*D]"), that view: checked at every call like a
 * where fact, but not part of the signature. */
typedef struct Fact { const Poly *lhs; CmpOp cmp; const Poly *rhs; Span span; const char *what; } Fact;

typedef struct FnParam {
  const char *name; Span span;
  bool is_size;                 /* P: size */
  Type type;                    /* tensors (scalars are rank 0) */
  Span dim_span[DYN_MAX_RANK];
} FnParam;

/* Where a size variable is bound: parameter `param`, dimension `dim` (-1: a size param). */
typedef struct SizeVar { const char *name; int param, dim; Span span; } SizeVar;

typedef struct Program Program;

/* What a checked function becomes: its lowered program and each back end's compiled code,
 * made on first use and owned here, so that func_free (func.c) ends them all.  The session's
 * back ends (backend.c) fill it; the reference evaluator runs prog itself. */
typedef struct Compiled {
  Program *prog;                /* lowered once, on first use (lower.c) */
  void *cpu;                    /* the CPU back end's compiled program (CpuProgram) */
  void *gpu;                    /* the GPU back end's (CudaProgram) */
  void *view;                   /* the CPU back end's for a model this CPU cannot run, which
                                   :sched and :code show (CpuProgram) */
  struct Extents *bound;        /* the last call's sizes bound to prog (extents.c), kept
                                   while they repeat */
} Compiled;

typedef struct Func {
  const char *name; Span span;
  FnParam *params; int nparams;
  Type *rets; int nrets;
  Fact *facts; int nfacts;
  SizeVar *sizes; int nsizes;
  FnDecl *decl;                 /* the checked, annotated AST */
  Arena *arena;                 /* owns everything above; freed with the function */
  Compiled code;                /* the lowered program and the compiled code */
  int64_t expanded;             /* definitions with every call inlined (at most FN_MAX_EXPANDED) */
  int compiles;                 /* how many times it was compiled: 1 after any number of shapes */
  int64_t checked[16];          /* the shapes and size values of the last call whose */
  int nchecked;                 /* checks passed, nchecked of them (0: none yet) */
  bool anonymous;               /* a top-level statement compiled as a function */
  uint64_t *shapes;             /* hashes of the size values it was called with (func_note_shape): */
  int nshapes, shapes_cap;      /* an open-addressed set, so :sched can say how many shapes */
} Func;

/* What sema needs from its surroundings. */
typedef struct SemaEnv {
  PolyCtx *pc;
  Func *(*lookup_fn)(void *env, const char *name);
  void *env;
  /* "Did you mean" candidates, to add(cookie, name) (either may be NULL): every function's
   * name; and the variables a top-level statement checked as a function could have named. */
  void (*each_fn)(void *env, void (*add)(void *cookie, const char *name), void *cookie);
  void (*each_var)(void *env, void (*add)(void *cookie, const char *name), void *cookie);
} SemaEnv;

/* The most definitions a function may become once its calls are inlined. */
#define FN_MAX_EXPANDED 1024
/* Check a function definition.  On success returns a Func that owns `arena` (the arena the
 * declaration was parsed into); on error returns NULL and the arena stays the caller's. */
Func *sema_function(const SemaEnv *env, FnDecl *decl, Arena *arena, Diags *d);
/* (sema_prove.c) Whether a fact holds at these values of its sides; its operator printed. */
bool fact_holds(const Fact *f, int64_t lhs, int64_t rhs);
const char *cmp_name(CmpOp c);

/* ---- lower.c: tensor graph -> fused kernels (loop nests with symbolic extents) ---------- */

typedef enum {
  KX_CONST, KX_AXIS, KX_SIZE, KX_LOAD, KX_UN, KX_BIN, KX_CAST, KX_SELECT, KX_REDUCE,
  KX_SCAN                       /* a stage's whole value only: the running red of a[0] along
                                   raxes[0], one of the stage's axes, in order (nraxes 1) */
} KxKind;

typedef struct KExpr KExpr;
struct KExpr {
  KxKind kind;
  DynElem ty;                   /* the value's type */
  DynElem opty;                 /* KX_BIN comparisons, KX_CAST: the operand type */
  OpKind op;
  double f; int64_t i;          /* KX_CONST (f for floats, i for ints and bools) */
  int axis;                     /* KX_AXIS */
  const Poly *size;             /* KX_SIZE */
  int slot;                     /* KX_LOAD */
  KExpr **a; int n;             /* operands, subscripts; KX_SELECT: cond, then, else */
  RedOp red; int *raxes; int nraxes;   /* KX_REDUCE, KX_SCAN: body is a[0] */
  bool checked;                 /* KX_LOAD: not proven in bounds */
  Span span;                    /* KX_LOAD, KX_BIN: the access or operation, for run-time errors */
  int id;                       /* unique in its program: 0 .. Program.nkx - 1 */
  uint64_t axmask;              /* bit (axis % 64) for every axis it depends on */
};

typedef struct Axis { const char *name; const Poly *extent; } Axis;

typedef enum { SLOT_INPUT, SLOT_SIZE, SLOT_TEMP, SLOT_LOCAL, SLOT_OUTPUT, SLOT_INLINED } SlotKind;
typedef struct Slot {
  const char *name;
  SlotKind kind;
  Type type;                    /* SLOT_LOCAL: the dims inside one outer iteration */
  int param;                    /* SLOT_INPUT: parameter index */
  int nlocal;                   /* SLOT_LOCAL: how many trailing dims live per iteration */
} Slot;

/* One definition computed inside a kernel: slot[out][outer..., axes...] = expr */
typedef struct Stage { int out; int *axes; int naxes; KExpr *expr; } Stage;

typedef struct Contraction Contraction;

/* A loop nest: the outer axes are shared by every stage (a row of a row-wise chain). */
typedef struct Kernel {
  const char *name;
  int *outer; int nouter;
  Stage *stages; int nstages;
  const Contraction *con;       /* contract.c's record when the kernel is a contraction, else NULL */
} Kernel;

struct Program {
  Arena *arena;
  Slot *slots; int nslots;
  Axis *axes; int naxes;
  Kernel *kernels; int nkernels;
  int *outputs; int nout;       /* slot of each returned value */
  int nkx;                      /* KExpr nodes, numbered by id */
  const char *name;
};

/* Lower a checked function (and every function it calls, inlined) and fuse.  Never fails
 * on a checked function. */
Program *lower_function(const Func *f, PolyCtx *pc,
                        Func *(*lookup_fn)(void *env, const char *name), void *env);
/* The same, fused or not: unfused, every statement (and every inlined call's) stays a
 * kernel of its own, which :ir NAME unfused prints and the define hook sees after lowering. */
Program *lower_program(const Func *f, PolyCtx *pc,
                       Func *(*lookup_fn)(void *env, const char *name), void *env, bool fuse);
void lower_free(Program *p);
/* Can evaluating e stop with a run-time error: a load checked at run time, or an integer
 * division or modulo by something other than a non-zero constant? */
bool kexpr_can_fail(const KExpr *e);
/* Does e evaluate a transcendental function (exp log sqrt rsqrt sin cos tanh sigmoid erf pow)? */
bool kexpr_transcendental(const KExpr *e);
/* A windowed contraction (a convolution): Y[P..., M..., Q...] = sum[K...] A[M..., K...] *
 * B[...], A's subscripts exactly those axes, each once, in any order (a weight stored
 * [r, s, c, m] too), and each of B's an affine function of axes, such as X[n, c, h*S + i,
 * w*S + j].  P and Q are the output axes only B reads (P before the M axes, Q after them),
 * M those only A reads; M, Q and K are not empty.  A grouped one (a depthwise convolution,
 * Y[n, c, h, w] = sum[i, j] Xp[n, c, h*S + i, w*S + j] * Wt[c, i, j]) has G axes that both
 * read in M's place, and no M axes.  A plain one-index contraction may be one too (a 1 x 1
 * convolution, Y[n, f, h, w] = sum[c] X[n, c, h, w] * Wt[f, c]): the back ends take it as
 * a plain contraction first where they can (contract_find), as a window where not. */
typedef struct WinContraction {
  const KExpr *a, *b;
  int np, nm, nq, ng;
  int p[DYN_MAX_RANK], m[DYN_MAX_RANK], q[DYN_MAX_RANK], g[DYN_MAX_RANK];
} WinContraction;
bool kexpr_window_contraction(const KExpr *r, const int *axes, int naxes, WinContraction *w);
/* Set mark[slot] for every slot e loads from. */
void kexpr_mark_loads(const KExpr *e, bool *mark);
/* The loop-level IR as :ir prints it. */
void lower_print(const Program *p, Buf *out);
void kx_print(const Program *p, const KExpr *e, Buf *out);

/* ---- contract.c: the contraction, recognised once for every back end ------------------- */

/* C[b?, m, n] = f(sum[k] A[..] * B[..]): one kernel of one stage over 2 or 3 axes (the batch
 * first), one reduction, a sum over k of a product of two plain loads of f32 or f64 (every
 * subscript an axis, none twice), A holding m and k, B holding k and n, each perhaps the
 * batch.  Each back end takes the cases it runs: the CPU's GEMM engine those with no
 * epilogue, the GPU's tiles all. */
struct Contraction {
  const KExpr *red;             /* the sum; the rest of the stage is the epilogue */
  const KExpr *a, *b;           /* the loads in the roles of A (m, k) and B (k, n) */
  DynElem et;
  int a_slot, b_slot, c_slot;
  int batch, m, n, k;           /* axes; batch -1: none */
  int nouter;                   /* outer batch axes, before batch: the first nouter subscripts of */
  int outer[DYN_MAX_RANK];      /* A, B and C alike (a multi-head [B, H, S, D] product), or 0 */
  int apos[3], bpos[3];         /* places in A of batch, m, k; in B of batch, k, n (-1: none) */
  bool a_kc, b_kc;              /* A (B) keeps k contiguous: k is its last subscript */
  bool epilogue;                /* the sum is not the stage's whole expression */
};
/* The structural test fusion keeps whole: sum over one index of a product of two plain
 * loads, each bringing an output axis the other lacks. */
bool contract_expr(const KExpr *r);
/* The record of kernel kn of p, in p's arena, or NULL when it is no contraction. */
const Contraction *contract_find(const Program *p, const Kernel *kn);
/* One line: "C: batch b, m i, n j, k k; A A[b, i, k] (k contiguous), B B[b, k, j]; f32 alone" */
void contract_print(const Program *p, const Contraction *c, Buf *out);

/* ---- fuse_attn.c: attention chains, recognised for the back ends that fuse them ---------- */

/* O[b?, s, d] = (sum[t] e * V) / z with e = exp(a - max[t] a), z = sum[t] e and a = score(sum[d]
 * Q * K): four consecutive kernels (the scores, the row-wise softmax, the contraction with V,
 * the division), f32, the batch (if any) leading every intermediate.  score(x) is x, x * c,
 * c * x or x / c with c fixed for the call, perhaps inside where(l op r, ..., -inf) with l and
 * r integers affine in s and t. */
typedef struct AttnChain {
  int k0;                       /* the first of its four kernels */
  int q, k, v, o;               /* slots */
  bool batch;                   /* a batch axis leads */
  int qpos[3], kpos[3], vpos[3];  /* places of (batch, s, d) in Q, (batch, t, d) in K, (batch, t, e) in V */
  int inner[6];                 /* what fusing never stores: scores, a (-1: none), m, e, z, O.c */
  int ax_b, ax_S, ax_T, ax_D, ax_E;  /* axes whose extents are B (-1: none), S, T, D (Q's and
                                   K's last) and E (V's and O's last) */
  const KExpr *scale;           /* NULL: none; else the score is x * scale, or x / scale (div) */
  bool div;
  const KExpr *mask_l, *mask_r; /* NULL: no mask; else where(mask_l mask_op mask_r, ..., -inf) */
  OpKind mask_op;               /* OP_LT, OP_LE, OP_GT, OP_GE or OP_EQ */
  int ax_s, ax_t;               /* the mask's axes s and t */
} AttnChain;
/* The chains of p, at most max, into out; how many. */
int fuse_attn_find(const Program *p, AttnChain *out, int max);
/* The value of a scale or a mask's side at (s, t) (szv as eval_size_values makes it). */
double fuse_attn_value(const KExpr *e, const int64_t *szv, int ax_s, int ax_t, int64_t s, int64_t t);

/* ---- func.c: a checked function's signature, its code and its end -------------------------- */

/* Free f, its arena and its Compiled record: the lowered program and the code (NULL-safe). */
void func_free(Func *f);
/* Free every back end's code for f (made again on next use); the program stays. */
void func_free_code(Func *f);
/* The signature as :type shows it: "fn matmul(A: f32[M, K], B: f32[K, N]) -> f32[M, N]" */
void func_signature(const Func *f, Buf *out);
/* Count the size values of a call (vals[0..n), in f->sizes' order) among the shapes f met:
 * what a compiler that specialised per shape would have compiled for.  The count stops at
 * FUNC_MAX_SHAPES. */
#define FUNC_MAX_SHAPES 65536
void func_note_shape(Func *f, const int64_t *vals, int n);

/* ---- eval.c: the reference evaluator ----------------------------------------------------- */

/* The size variables of one call, by name (a function's names are its polynomials' own
 * strings, which the lookup tries first). */
typedef struct EvalSizes { const char **names; int64_t *vals; int n; } EvalSizes;
/* The lookup poly_eval takes, over an EvalSizes (env). */
bool eval_size_lookup(void *env, const char *name, int64_t *v);
/* The value of every size a program's kernels read, into szv[KExpr id] (every back end
 * passes these to its code).  False with the reason appended to why. */
bool eval_size_values(const Program *p, const EvalSizes *sizes, int64_t *szv, Buf *why);
/* Run a program on concrete tensors at x, the call's sizes bound to p (extents.c), as every
 * back end runs.  outs receives new tensors (owned by the caller).  False with a message
 * naming the access and the values on a run-time error (out-of-bounds access, allocation
 * failure, interrupt), or with x->err when x did not bind. */
struct Extents;
bool eval_program(const Program *p, Tensor **inputs, const struct Extents *x, Tensor **outs,
                  volatile int *interrupt, Buf *err, Span *err_span);

/* ---- extents.c: a call's sizes bound to its program, once for every back end ------------- */

/* What a program is at one set of sizes.  The arrays live in mem, which the record owns. */
typedef struct Extents {
  const Program *p;
  EvalSizes sz;                 /* the size variables (names and values, copied) */
  int64_t *ext;                 /* per axis, its extent */
  int64_t *shape;               /* per slot, DYN_MAX_RANK: every dimension of its type */
  int64_t *strides;             /* per slot, DYN_MAX_RANK: C order over shape (saturating) */
  int64_t *szv;                 /* per KExpr id, the value of a size a kernel reads */
  bool ok;                      /* all of it evaluated; else err says the first that did not
                                   (what failed is 0) */
  char err[512];                /* as long as any message the evaluator gave itself */
  void *mem; size_t cap;
} Extents;
/* Bind p at sz into x (zeroed at first, then reused): nothing is evaluated again when p,
 * the names and the values are those x holds.  Returns x->ok. */
bool extents_bind(Extents *x, const Program *p, const EvalSizes *sz);
/* The program's work at these extents, in loop iterations (an empty axis counts 1). */
double extents_work(const Extents *x);
void extents_free(Extents *x);                  /* its storage; x is zeroed (NULL-safe) */

/* ---- cpu.c, cpu_rt.c, cpu_sched.c: the compiled CPU back end (LLVM) ---------------------- */

/* One per session: the JIT, the thread pool, the contraction engines.  NULL with a message
 * when LLVM is absent or cannot target the machine.  A back end for a model this CPU cannot
 * run (cpu_runnable false: another instruction set, or extensions the host lacks) compiles
 * programs and describes them (:sched, :code) for that model, and runs nothing: cpu_run
 * returns -1 and says why. */
typedef struct Pool Pool;
typedef struct CpuBackend CpuBackend;
typedef struct CpuProgram CpuProgram;
CpuBackend *cpu_backend_new(const HwModel *hw, int threads, char *err, size_t errlen);
void cpu_backend_free(CpuBackend *be);
void cpu_backend_set_threads(CpuBackend *be, int threads);
Pool *cpu_backend_pool(CpuBackend *be);
const char *cpu_backend_cpu(CpuBackend *be);
/* Can this CPU run code made for hw?  False with the reason (jit_runnable). */
bool cpu_runnable(const HwModel *hw, char *why, size_t whylen);
/* Compile a program once, for every shape.  NULL with a message on failure. */
CpuProgram *cpu_compile(CpuBackend *be, const Program *p, char *err, size_t errlen);
void cpu_program_free(CpuProgram *cp);
double cpu_program_compile_ms(const CpuProgram *cp);
/* :code NAME llvm|asm */
bool cpu_program_code(CpuBackend *be, CpuProgram *cp, const char *what, Buf *out, char *err, size_t errlen);
/* Run at the sizes bound in x (x->ok: the caller says a binding that failed): 1 done; 0 the
 * code detected a run-time error (out-of-bounds access, division by zero) -- the caller
 * re-runs the reference evaluator for the exact message; -1 a failure described in err
 * (allocation, interrupt). */
int cpu_run(CpuBackend *be, CpuProgram *cp, Tensor **inputs, const Extents *x, Tensor **outs,
            volatile int *interrupt, char *err, size_t errlen);

/* The schedule of each kernel as :sched shows it; with sizes (x non-NULL, bound by
 * extents.c) the choices for that shape and the predicted seconds, which are returned. */
double cpu_schedule(CpuBackend *be, CpuProgram *cp, PolyCtx *pc, const Extents *x, int threads, Buf *out);
/* The same, with each kernel's predicted seconds in kpred[k] and the kernels it covers in
 * kspan[k] (a fused group's under its first; kspan untouched for the others). */
double cpu_schedule_kernels(CpuBackend *be, CpuProgram *cp, PolyCtx *pc, const Extents *x, int threads, Buf *out,
                            double *kpred, int *kspan);
/* :time --kernels: from now on each call that succeeds writes each kernel's seconds (a
 * group's under its first, 0 for the rest) to the next row of rows, nk doubles a row,
 * until cap rows; rows NULL stops.  Returns the rows the calls wrote since the last call. */
int cpu_profile(CpuProgram *cp, double *rows, int cap);
int cpu_program_kernels(const CpuProgram *cp);
const char *cpu_kernel_name(const CpuProgram *cp, int k);

/* Measure the f32 micro-kernel's peak GFLOP/s on one thread and on all (dyn --calibrate). */
bool cpu_calibrate(CpuBackend *be, double *peak1, double *peak_all, char *err, size_t errlen);
/* Measure each memory level's read rate past L1, GB/s, for one core (gbs) and for all the
 * backend's threads at once (total_gbs), indexed as HwModel.level; 0 where a level has no
 * set of its own to measure (cpu_calibrate.c). */
typedef struct CalMemory {
  double gbs[HW_MAX_LEVELS], total_gbs[HW_MAX_LEVELS], kept_bytes[HW_MAX_LEVELS];
  double write_cost;          /* memory's: a written byte's traffic in read bytes (HwModel's) */
} CalMemory;
bool cpu_calibrate_memory(CpuBackend *be, CalMemory *out, char *err, size_t errlen);
/* The microseconds a fork-join of the backend's pool costs on its threads (0 on one). */
bool cpu_calibrate_sync(CpuBackend *be, double *us, char *err, size_t errlen);
/* One core's f32 rate in GFLOP/s as the matmul micro-kernel measured it when compiled, or 0
 * when it is not compiled (compiling nothing). */
double cpu_core_gflops(const CpuBackend *be);

/* ---- sched.c: the terms the CPU and GPU planners share ------------------------------------
 * The walk down a HwModel's levels to the one a footprint lives in, their bandwidths, and the
 * quantisation of tasks into waves; cpu_sched.c, gemm_model.c and cuda_plan.c price plans with them.
 * (Declared here, not in a sched.h: that name would hide the system's <sched.h>.) */

/* ceil(a / b) for b > 0; 0 when b <= 0. */
int64_t sched_cdiv(int64_t a, int64_t b);
/* The rounds in which `tasks` run on `slots` units at once (threads, or an SM's resident
 * blocks times the SMs): ceil(tasks / slots), a partial round costing a whole one. */
int64_t sched_waves(int64_t tasks, int64_t slots);
/* The level of h named name ("L2", "smem", "hbm"), or NULL. */
const HwLevel *sched_level(const HwModel *h, const char *name);
/* Main memory's bandwidth in bytes/s (the last level's gbs), or dflt when the model has none. */
double sched_mem_bw(const HwModel *h, double dflt);
/* The last cache's capacity in bytes (the level above main memory), 0 when there is none. */
int64_t sched_last_cache_bytes(const HwModel *h);
/* Bandwidth (bytes/s per core) of the first cache that holds a footprint of F bytes, else
 * main memory's (10 GB/s when the model has none). */
double sched_level_bw(const HwModel *h, double F);
/* sched_level_bw, capped by the level's total bandwidth shared among `users` cores streaming
 * at once (total_gbs in the hw file). */
double sched_shared_bw(const HwModel *h, double F, int users);
/* The roofline of FLOPs and bytes on `threads` of h (cost_roofline; the GPU passes its SMs):
 * the slower of the FLOPs at that share of the peak and the bytes at main memory's rate. */
double sched_roofline(const HwModel *hw, int threads, double flops, double bytes);
/* The level (0 = L1, nlevels - 1 = main memory) a working set of F bytes stays in between
 * calls on `threads` cores, and that level's bandwidth in bytes/s for them. */
int sched_fit_level(const HwModel *h, double F, int threads);
/* The units of cache level i that `threads` cores use: one a core of a private cache, one a
 * group of shared_by cores of a shared one. */
int sched_cache_units(const HwModel *h, int i, int threads);
/* The bytes of a line of the L1 (64 where the model has no cache or does not say). */
int64_t sched_line_bytes(const HwModel *h);
double sched_threads_bw(const HwModel *h, int i, int threads);
/* Vector lane-operations per second of `threads` cores on elements of elem_bytes: the FMA
 * lanes' rate times vec_units / fma_units, times the share dyn --calibrate measured. */
double sched_lane_ops_rate(const HwModel *h, int threads, int elem_bytes);
double sched_fma_lanes_rate(const HwModel *h, int threads, int elem_bytes);
/* A streaming kernel (element-wise, row-wise, a reduction): its lane-operations, compulsory
 * bytes read and written, whether it streams its stores past the caches, its tasks and the
 * share of the work the busiest thread takes (0: an even share). */
typedef struct SchedWork {
  double ops;
  int elem_bytes;
  double read, written;
  bool streamed;
  int64_t tasks;
  double busiest;
} SchedWork;
/* The terms of its time: the threads that take part, the level its data lives in, whether
 * the written lines are read for ownership (memory), the bytes moved, the share of the
 * working set a cache keeps between calls (1 where it fits one, the last cache's share where
 * it fits none), the busiest thread's work over an even share (1 or more), compute, memory
 * and fork-join seconds and the total, max(compute, memory) + fork-join. */
typedef struct SchedTerms {
  int threads, level;
  bool memory;
  double moved, kept, imbalance, comp_s, mem_s, sync_s, total;
} SchedTerms;
/* The predicted seconds of w on `threads` of h; the terms in *out when out is not NULL. */
double sched_stream_time(const HwModel *h, int threads, const SchedWork *w, SchedTerms *out);
/* cpu_sched.c: seconds of a call of one kernel that does nothing, the model's fixed costs
 * (scaled to the calibrated call_us; h NULL: the constants). */
double cpu_call_s(const HwModel *h);
/* Seconds of a fork-join on the CPU pool: the calibrated figure (sync_us), else 0.3 us. */
double sched_sync_s(const HwModel *h);
/* Seconds a line two cores write takes to move between them (line_move_ns; 60 ns, Zen 5's,
 * where the file does not say), and for `lines` lines that one core wrote to reach another
 * that reads them in a stream (MOVE_LINES at a time). */
double sched_line_move_s(const HwModel *h);
double sched_lines_moved_s(const HwModel *h, double lines);

/* ---- cost.c: FLOPs and bytes as formulas, the roofline ------------------------------------ */

void cost_kernel(const Program *p, const Kernel *kn, PolyCtx *pc, const Poly **flops, const Poly **bytes);
/* A kernel's compulsory bytes read (slots it only reads) and written (each written slot once). */
void cost_kernel_traffic(const Program *p, const Kernel *kn, PolyCtx *pc, const Poly **rd, const Poly **wr);
/* A kernel's vector lane-operations: each operation one, a math function what its vector
 * expansion spends per element (the table in cost.c). */
const Poly *cost_kernel_ops(const HwModel *h, const Program *p, const Kernel *kn, PolyCtx *pc);
/* Stage s's share of them. */
const Poly *cost_stage_ops(const HwModel *h, const Program *p, const Kernel *kn, int s, PolyCtx *pc);
/* An exponential's lane-operations an element on h's vectors (with or without vscalef). */
int cost_exp_ops(const HwModel *h);
/* How an attention's softmax applies its scale: folded into the exponent's FMA (the fused
 * kernel), a product or a division of each score (the program's own row-wise kernel). */
typedef enum { ATTN_SCALE_FOLDED, ATTN_SCALE_MUL, ATTN_SCALE_DIV } AttnScale;
/* Seconds of an attention's softmax on `scores` f32 scores: their lane-operations (the
 * exponential's expansion, the scale as `how` applies it, and three more a score) at the
 * vector pipes' rate of `threads`. */
double cost_attn_softmax_time(const HwModel *hw, int threads, double scores, AttnScale how);
void cost_program(const Program *p, PolyCtx *pc, const Poly **flops, const Poly **bytes);
/* Seconds for flops and bytes on `threads` cores of hw: max(compute, memory). */
double cost_roofline(const HwModel *hw, int threads, double flops, double bytes);

/* ---- cuda_*.c: the GPU back end (CUDA C -> NVRTC -> PTX -> the driver API) --------------- */

/* Rendering CUDA C and compiling it to PTX need only NVRTC; running needs the driver and a
 * device.  Both are opened at run time (dlopen through the table in cuda.def), so building
 * needs no CUDA toolkit and dyn runs where there is no GPU.  What its files share is in
 * cuda_int.h. */
typedef struct CudaBackend CudaBackend;
typedef struct CudaProgram CudaProgram;
/* The arithmetic of f32 contractions (:target gpu [exact|tf32|bf16]): exact f32 on the CUDA
 * cores, the default; or the tensor cores (mma.sync) with the operands rounded to tf32 or bf16
 * and the sums kept in f32, on compute capability 8.0 and later (older GPUs stay exact).
 * Every other kernel, and every f64 or integer contraction, is exact whatever is chosen. */
typedef enum { CUDA_EXACT, CUDA_TF32, CUDA_BF16 } CudaMath;
/* "exact", "tf32", "bf16" */
const char *cuda_math_name(CudaMath m);
/* What f32 contractions compute in on hw when m is asked for: m, or CUDA_EXACT where the GPU
 * has no tensor cores for it (compute capability below 8.0). */
CudaMath cuda_math_on(const HwModel *hw, CudaMath m);
/* Whether NVRTC can be opened; false with the reason. */
bool cuda_nvrtc_available(char *why, size_t whylen);
/* The first GPU, with the driver's primary context.  hw: the GPU model the scheduler uses
 * (the device's SM count and compute capability replace its own); NULL or a CPU model: the
 * hw file named like the device, else figures read from the device.  NULL with the reason:
 * "no NVIDIA driver (libcuda.so.1 not found)", "no CUDA device", NVRTC missing, ... */
CudaBackend *cuda_backend_new(const HwModel *hw, char *why, size_t whylen);
void cuda_backend_free(CudaBackend *be);                          /* NULL-safe */
const HwModel *cuda_backend_hw(const CudaBackend *be);
/* One line: "NVIDIA H200 (compute capability 9.0, 132 SMs; driver 12.8, NVRTC 13.0)" */
const char *cuda_backend_device(const CudaBackend *be);
/* The CUDA C of a program for the GPU that hw describes, with f32 contractions in math,
 * appended to cuda_src. */
void cuda_render(const Program *p, const HwModel *hw, CudaMath math, Buf *cuda_src);
/* CUDA C to PTX for compute capability cc_major.cc_minor (or the newest older one NVRTC
 * knows).  Needs only NVRTC.  False with a message in err. */
bool cuda_compile_ptx(const char *src, int cc_major, int cc_minor, Buf *ptx, char *err, size_t errlen);
/* The analysis and CUDA C of a program, nothing compiled (:code cuda, :sched without a
 * device).  p must outlive it; free with cuda_program_free. */
CudaProgram *cuda_program_new(const Program *p, const HwModel *hw, CudaMath math);
/* Render, compile to PTX (a module cache keyed by the source text) and load: once, for every
 * shape.  NULL with a message. */
CudaProgram *cuda_compile(CudaBackend *be, const Program *p, CudaMath math, char *err, size_t errlen);
void cuda_program_free(CudaProgram *cp);                          /* NULL-safe */
const char *cuda_program_source(const CudaProgram *cp);
double cuda_program_compile_ms(const CudaProgram *cp);
/* :code NAME cuda|ptx; ptx is compiled with NVRTC when needed (no device needed). */
bool cuda_program_code(CudaProgram *cp, const char *what, Buf *out, char *err, size_t errlen);
/* Run on host tensors at the sizes bound in x (x->ok), copied to the device and back; outs
 * receives new tensors.  1 done; 0
 * the code detected a run-time error (out-of-bounds access, division by zero): the caller
 * re-runs the reference evaluator for the message; -1 a failure described in err. */
int cuda_run(CudaBackend *be, CudaProgram *cp, Tensor **inputs, const Extents *x, Tensor **outs,
             char *err, size_t errlen);
/* Milliseconds the kernels of the last cuda_run took on the device (CUDA events). */
double cuda_last_ms(const CudaBackend *be);
/* The schedule as :sched shows it: per kernel the levels, tiles and variants; with sizes (x
 * non-NULL) the variant each kernel runs, its launch, and the predicted seconds (returned).
 * pc gives the cost formulas of the kernels that are not contractions. */
double cuda_describe(const CudaProgram *cp, PolyCtx *pc, const Extents *x, Buf *out);
/* The contraction model on hw, for tests and :sched: the tile, split of K and predicted time
 * it picks for `batch` products of m x k by k x n with math asked for. */
typedef struct CudaGemmPlan {
  CudaMath math;                /* what the tiles compute in: cuda_math_on(hw, math asked for) */
  int bm, bn, bk, threads, splits;
  int64_t blocks;               /* blocks launched (tiles x splits x batch) */
  int blocks_per_sm;            /* resident at once, from registers, shared memory, threads */
  double waves;                 /* ceil(blocks / (SMs x blocks_per_sm)) */
  double predicted_s;
} CudaGemmPlan;
bool cuda_gemm_plan(const HwModel *hw, CudaMath math, int64_t batch, int64_t m, int64_t n, int64_t k, CudaGemmPlan *out);
/* Tests: cuda_run uses this variant ("loop", "loop4", "warp", "block256", "block1024",
 * "grid", "gemm64x64", "tf32_128x128", "bf16_32x32", ...) where a kernel has it and its
 * conditions hold, and splits K in `splits` parts (0: the model's choice).  NULL and 0
 * restore the model. */
void cuda_force(CudaBackend *be, const char *variant, int splits);

/* ---- png.c: a tensor saved as a PNG picture ---------------------------------------------- */

/* Save a 2-D tensor as a grey image, a 3-D one of 3 or 4 channels last as RGB(A): floats in
 * [0, 1] as they are, anything else scaled from its least (black) to its greatest (white).
 * false with "PATH: why" in err (not an image's shape, no libpng, the disk); the old file
 * stays then. */
bool png_save(const Tensor *t, const char *path, volatile int *stop, char *err, size_t errlen);
bool png_path(const char *path);             /* the name ends in .png: save() writes a picture */

/* ---- plot.c: the pictures of :plot -- a text chart or an SVG of one size swept ----------- */

typedef struct PlotPoint {
  int64_t x;                    /* the swept size */
  double measured_s, predicted_s;
  double flops, bytes;          /* the function's work at this point (cost.c) */
  int variant;                  /* index into PlotData.variants: the schedule chosen here */
} PlotPoint;
typedef struct PlotData {
  const char *title, *xname;
  const PlotPoint *pt; int n;   /* x increasing */
  const char *const *variants; int nvariants;
  double peak_gflops, bw_gbs;   /* the roofs for the threads the calls used */
} PlotData;
/* GFLOP/s (GB/s when no point computes) measured and predicted, against the roofline, in a
 * chart width x height characters, then a table of the points and the variants. */
void plot_text(const PlotData *d, int width, int height, Buf *out);
/* The same as an SVG document. */
void plot_svg(const PlotData *d, Buf *out);

/* ---- session.c: a session -- bindings, functions, options -- and running top-level input
 * (with value.c, backend.c, state.c, toplevel.c, builtins.c and commands.c; their shared
 * parts, the back-end table among them: session_int.h) */

typedef struct Session Session;
typedef enum { RUN_OK, RUN_ERROR, RUN_INCOMPLETE, RUN_QUIT } RunStatus;

/* Options fixed when the session starts (the command line). */
typedef struct SessionOptions {
  const char *target;         /* "cpu", "gpu", "ref" or NULL for the default */
  const char *hw;             /* a name or file for --hw, or NULL for the host */
  int threads;                /* 0: all cores */
  bool no_prelude;            /* do not import linalg and nn */
  bool check_only;            /* dyn --check: define functions and import, run no statement */
  bool diag_json;             /* --diagnostics=json: diagnostics as JSON lines on err */
} SessionOptions;

/* A new session writing values to out and diagnostics to err.  Never fails; an unusable
 * option (an unknown --hw) is reported on err and the default used. */
Session *session_new(const SessionOptions *opt, FILE *out, FILE *err);
void session_free(Session *s);
/* Interactive sessions print the value of a bare expression; scripts evaluate it silently. */
void session_set_interactive(Session *s, bool on);
/* Call a session function on tensors from C (the benchmark, embedders): binds the sizes,
 * checks shapes and facts, runs on the current target.  outs receives new references (up
 * to maxouts); false with the diagnostics' text in err. */
bool session_call(Session *s, const char *name, Tensor **args, int nargs, Tensor **outs, int maxouts, Buf *err);
/* The model's predicted seconds for session_call(s, name, args, nargs), as :time prints it
 * (the CPU schedule's once compiled, else the roofline); 0 if args do not bind the sizes. */
double session_predict(Session *s, const char *name, Tensor **args, int nargs);
/* Compile a function for the CPU now (if not yet); its compile time in ms, or -1. */
double session_compile(Session *s, const char *name, Buf *err);
int session_compiles(Session *s, const char *name);        /* -1: no such function */
/* dyn --calibrate: measure the micro-kernels' throughput on this machine once and keep it,
 * keyed by a fingerprint of the hardware, in $XDG_CACHE_HOME/dyn (else ~/.cache/dyn); later
 * sessions on the same hardware use it as the peak.  Never per shape.  Exit status. */
int session_calibrate(Session *s);
/* Run a whole script file (batch mode): stops at the first error.  A script is at most
 * FILE_SOURCE_MAX bytes; a leading UTF-8 byte-order mark is skipped, and a NUL byte is an
 * error at the byte (E_NUL_BYTE), before anything runs. */
RunStatus session_run_file(Session *s, const char *path);
/* The same for a script already read (standard input): takes text, malloc'd, len bytes
 * and a NUL after them.  RUN_INCOMPLETE as session_run. */
RunStatus session_run_script(Session *s, char *text, size_t len, const char *origin);
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
/* The errno of the first write to the session's output that failed, or 0 (after flushing
 * it).  A script stops at the statement whose output failed, with no diagnostic of its
 * own: the caller says it once (main: "dyn: standard output: REASON", exit status 1). */
int session_output_error(Session *s);
/* Diagnostics to sink (the library collects them as data) instead of printed to the error
 * stream; NULL: printed again.  The Diag lives only for the call. */
void session_set_diag_sink(Session *s, void (*sink)(void *cookie, const Diag *d), void *cookie);
/* Where values and print() go from now on; returns the stream used before. */
FILE *session_set_out(Session *s, FILE *out);
/* What :time computed the last time it ran (runs 0: never), and :sched. */
typedef struct SessionTiming {
  double median, min, max;      /* seconds */
  int runs;
  unsigned instead;             /* runs the reference evaluator answered */
  const char *fn;               /* the function called last, or NULL; then: */
  double gflops, gbs;           /* its rates at the median */
  const char *bound;            /* "compute" or "memory", or NULL */
  double roof, roof_pct;        /* GFLOP/s or GB/s of the bound, and the share reached */
  double predicted;             /* seconds, 0: none */
} SessionTiming;
typedef struct SessionSched {
  const char *fn;
  int compiles;
  double compile_ms, predicted; /* predicted seconds at the sizes given; 0: none given */
} SessionSched;
const SessionTiming *session_last_timing(Session *s);
const SessionSched *session_last_sched(Session *s);
const char *session_target(Session *s);
int session_threads(Session *s);
const char *session_hw_name(Session *s);
/* One line: "dyn 0.1.0 -- back end: cpu (LLVM 19), hardware: zen5 (2 cores, AVX-512)" */
void session_banner(Session *s, Buf *out);

/* ---- repl.c: the interactive loop ------------------------------------------------------- */

/* Read, run, print until :quit or end of input.  force: REPL semantics even when standard
 * input is not a terminal (`dyn -i -`), echoing each input after its prompt.  Uses GNU readline when built with it
 * (history in ~/.dyn_history, completion of names, commands and file names after :load),
 * else lineedit.  When standard input is not a terminal: no prompt, no banner, plain lines.
 * Returns the process exit status. */
int repl_main(Session *s, bool quiet, bool force);
/* Standard input as a script, whether or not it is a terminal (`dyn -`, and repl_main on a
 * pipe): read whole, run as "<stdin>"; the exit status. */
int repl_run_stdin(Session *s);

#endif
