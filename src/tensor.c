/* tensor.c -- runtime tensors: a shape and strides over a refcounted, 64-byte aligned buffer,
 * element access by flat C-order index, and the printed form the REPL and print() show.
 * tensor_new is the one place user-sized memory is requested, so it reports a failed or
 * absurd request as a message instead of aborting.  Printing follows NumPy's layout (edge
 * items, "...", line wrapping at 75 columns) with dyn's literal syntax, so it can be pasted
 * back as a tensor literal. */
#include "config.h"
#include "dyn_int.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* Buffers this large come straight from mmap: the kernel hands out zeroed pages lazily, so
 * zeros(f32[N, N]) costs nothing until touched, and an impossible request fails with ENOMEM
 * rather than tripping a sanitizer's allocation limit.  The free path picks the same way
 * from buf->bytes, so Buffer needs no extra field.  The bound is malloc's own default mmap
 * threshold (glibc's 128 KiB): a buffer malloc would map goes through the cache below
 * instead, so a call's fresh results reuse pages already mapped.  With 1 MiB here, a
 * conv2d of 1 x 64 x 56 x 56 by 64 3 x 3 filters, whose padded image and result are just
 * under 1 MiB, took 6.5 ms a call in page faults and 1.0 ms with its buffers cached (its
 * model says 1.0). */
#define BIG_BUFFER ((size_t)128 << 10)
#define ALIGN 64

/* Every buffer has at least ALIGN readable bytes past its data, small ones by rounding (see
 * buffer_new), large ones by mapping them: a vector that starts at the last element and
 * loads the rest masked off then stays in mapped memory.  Intel and AMD suppress faults on
 * masked-off elements of AVX-512 loads, but AVX2's vmaskmovps leaves it to the
 * implementation on AMD, and QEMU 7.2 faults there, so code compiled for AVX2 read the
 * unmapped page after a tensor whose bytes ended on a page boundary (A of 2048 x 513 f32). */
static size_t mapped_bytes(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + ALIGN + page - 1) / page * page;
}

/* ---- creation and lifetime ---- */

static void put_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static void shape_str(DynElem elem, int rank, const int64_t *shape, Buf *out) {
  buf_puts(out, elem_name(elem));
  if (rank == 0) return;
  buf_putc(out, '[');
  for (int i = 0; i < rank; i++) buf_printf(out, "%s%lld", i ? ", " : "", (long long)shape[i]);
  buf_putc(out, ']');
}

/* "4000000 GB", "1.5 GB", "12 MB": decimal units, as a person reads a memory size. */
static void human_bytes(double b, char *s, size_t n) {
  static const char *unit[] = {"bytes", "KB", "MB", "GB"};
  int u = 0;
  while (u < 3 && b >= 1000) b /= 1000, u++;
  if (u == 0 || b >= 100)
    snprintf(s, n, "%.0f %s", b, unit[u]);
  else
    snprintf(s, n, "%.1f %s", b, unit[u]);
}

/* Freed large buffers are kept for reuse (a few, up to 1 GiB): a program run again on the
 * same shapes then gets memory whose pages are already mapped, instead of paying a page
 * fault per 4 KiB again -- on a virtual machine that costs more than the kernel itself for
 * outputs of a few MiB.  Only exact sizes are reused. */
#define CACHE_SLOTS 8
#define CACHE_MAX_BYTES ((size_t)1 << 30)
static struct { void *p; size_t bytes; } cache[CACHE_SLOTS];
static size_t cache_bytes;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void *cache_take(size_t bytes) {
  void *p = NULL;
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (cache[i].p && cache[i].bytes == bytes) {
      p = cache[i].p;
      cache[i].p = NULL;
      cache_bytes -= bytes;
      break;
    }
  pthread_mutex_unlock(&cache_lock);
  return p;
}

static void unmap(void *p, size_t bytes);

/* Keep p; the oldest kept buffers make room (slot 0 is the oldest). */
static bool cache_give(void *p, size_t bytes) {
  if (bytes > CACHE_MAX_BYTES) return false;
  void *evict[CACHE_SLOTS];
  size_t evict_bytes[CACHE_SLOTS];
  int ne = 0;
  pthread_mutex_lock(&cache_lock);
  int n = 0;
  for (int i = 0; i < CACHE_SLOTS; i++)     /* compact: the live entries first, oldest first */
    if (cache[i].p) cache[n++] = cache[i];
  for (int i = n; i < CACHE_SLOTS; i++) cache[i].p = NULL;
  while (n > 0 && (n == CACHE_SLOTS || cache_bytes + bytes > CACHE_MAX_BYTES)) {
    evict[ne] = cache[0].p;
    evict_bytes[ne++] = cache[0].bytes;
    cache_bytes -= cache[0].bytes;
    memmove(cache, cache + 1, sizeof cache[0] * (size_t)(n - 1));
    cache[--n].p = NULL;
  }
  cache[n].p = p;
  cache[n].bytes = bytes;
  cache_bytes += bytes;
  pthread_mutex_unlock(&cache_lock);
  for (int i = 0; i < ne; i++) unmap(evict[i], evict_bytes[i]);
  return true;
}

/* Under a limit on the address space (ulimit -v), where malloc fails rather than the
 * kernel's OOM killer acting, a tensor may not take the last HEADROOM bytes of it: LLVM
 * compiles on a function's first call and ends the process when it runs out (its C API
 * has no way to report it), so the user's data must fail first, as a message.  Without a
 * limit the kernel overcommits and nothing here helps or hinders. */
#define HEADROOM ((uint64_t)128 << 20)

static bool leaves_headroom(size_t bytes) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return true;
  unsigned long long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");     /* the first field: the address space used */
  if (!f) return true;
  bool got = fscanf(f, "%llu", &pages) == 1;
  fclose(f);
  if (!got) return true;
  uint64_t used = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
  return used + bytes + HEADROOM <= (uint64_t)rl.rlim_cur;
}

static void *alloc_big(size_t bytes, bool zero) {
  void *reused = cache_take(bytes);
  if (reused) {
    if (zero) memset(reused, 0, bytes);
    return reused;
  }
  if (!leaves_headroom(bytes)) return NULL;
  /* Large buffers start on a 2 MiB boundary and ask for huge pages: a fresh 64 MiB
   * tensor then costs 32 page faults instead of 16384, which dominates memory-bound
   * kernels on their first touch.  The slack around the aligned block is given back. */
  const size_t huge = (size_t)2 << 20;
  size_t len = mapped_bytes(bytes) + huge;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
  size_t used = mapped_bytes(bytes);
  if (a > p) munmap(p, (size_t)(a - p));
  if (p + len > a + used) munmap(a + used, (size_t)(p + len - (a + used)));
#ifdef MADV_HUGEPAGE
  madvise(a, used, MADV_HUGEPAGE);
#endif
  return a;
}

/* A buffer and its header, after `before` bytes for the caller (a tensor's header: see
 * make).  A small buffer shares one block with its header and those bytes: a small call's
 * result then costs one malloc, where separate blocks and posix_memalign's aligned one cost
 * three and the work of splitting off the alignment.  The data is rounded up, and ALIGN
 * bytes follow it (see mapped_bytes).  A large buffer is mapped on its own
 * (NULL block: the caller allocates its header). */
static Buffer *buffer_new(size_t bytes, bool zero, size_t before, void **block) {
  Buffer *b;
  *block = NULL;
  if (bytes >= BIG_BUFFER) {
    void *data = alloc_big(bytes, zero);
    if (!data) return NULL;
    b = xmalloc(sizeof *b);
    b->data = data;
  } else {
    size_t n = (bytes + ALIGN - 1) / ALIGN * ALIGN + ALIGN;     /* ALIGN bytes past the data */
    char *blk = malloc(before + sizeof *b + ALIGN + n);
    if (!blk) return NULL;
    *block = blk;
    b = (Buffer *)(blk + before);
    b->data = (void *)(((uintptr_t)(b + 1) + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    if (zero) memset(b->data, 0, n);
  }
  b->refs = 1;
  b->bytes = bytes;
  b->home = NULL;
  b->borrowed = false;
  return b;
}

static void unmap(void *p, size_t bytes) {
  munmap(p, mapped_bytes(bytes));
}

static void buffer_free(Buffer *b) {
  if (b->borrowed) {                     /* the caller's memory: only the header is ours */
    free(b);
    return;
  }
  if (b->bytes >= BIG_BUFFER && !cache_give(b->data, b->bytes)) unmap(b->data, b->bytes);
  if (b->home) free(b->home);            /* the block starts with that tensor */
  else free(b);
}

static Tensor *make(DynElem elem, int rank, const int64_t *shape, bool zero, char *err, size_t errlen);

Tensor *tensor_new(DynElem elem, int rank, const int64_t *shape, char *err, size_t errlen) {
  return make(elem, rank, shape, true, err, errlen);
}

Tensor *tensor_new_uninit(DynElem elem, int rank, const int64_t *shape, char *err, size_t errlen) {
  return make(elem, rank, shape, false, err, errlen);
}

static Tensor *make(DynElem elem, int rank, const int64_t *shape, bool zero, char *err, size_t errlen) {
  if (rank < 0 || rank > DYN_MAX_RANK) {
    put_err(err, errlen, "rank %d is out of range (dyn tensors have rank 0 to %d)", rank,
            DYN_MAX_RANK);
    return NULL;
  }
  Buf ty = {0};   /* the type, written only for a message */
  Tensor *t = NULL;
  int64_t n = 1, bytes = 0;
  bool overflow = false;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) {
      shape_str(elem, rank, shape, &ty);
      put_err(err, errlen, "negative dimension %lld in %s", (long long)shape[i], ty.s);
      goto out;
    }
    /* Zero dims are left out of the product: the strides are built from it, so it must
     * fit even when a zero dim makes the tensor empty. */
    if (shape[i] && !size_mul_ok(n, shape[i], &n)) overflow = true;
  }
  if (overflow) {
    shape_str(elem, rank, shape, &ty);
    put_err(err, errlen, "cannot allocate %s: its number of elements does not fit in 64 bits",
            ty.s);
    goto out;
  }
  for (int i = 0; i < rank; i++)
    if (!shape[i]) n = 0;
  if (!size_mul_ok(n, elem_size(elem), &bytes) || bytes > PTRDIFF_MAX - ALIGN) {
    shape_str(elem, rank, shape, &ty);
    put_err(err, errlen, "cannot allocate %s: its size in bytes does not fit in 64 bits",
            ty.s);
    goto out;
  }
  /* the header goes first in the buffer's block when it has one (a small buffer) */
  void *block;
  Buffer *b = buffer_new((size_t)bytes, zero, sizeof *t, &block);
  if (!b) {
    char hb[32];
    human_bytes((double)bytes, hb, sizeof hb);
    shape_str(elem, rank, shape, &ty);
    put_err(err, errlen, "cannot allocate %s (%s)", ty.s, hb);
    goto out;
  }
  if (block) {              /* every field is set below: no memset of the whole header */
    t = block;
    b->home = t;
  } else {
    t = xmalloc(sizeof *t);
  }
  t->refs = 1;
  t->elem = elem;
  t->rank = rank;
  t->buf = b;
  t->offset = 0;
  memset(t->shape, 0, sizeof t->shape);     /* two small fixed sizes: plain vector stores */
  memset(t->strides, 0, sizeof t->strides);
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->strides[i] = stride;
    stride *= shape[i] ? shape[i] : 1; /* cannot overflow: bounded by the checked product */
  }
out:
  buf_free(&ty);
  return t;
}

Tensor *tensor_view(Tensor *base, int rank, const int64_t *shape, const int64_t *strides,
                    int64_t offset) {
  assert(rank >= 0 && rank <= DYN_MAX_RANK);
  Tensor *t = xcalloc(1, sizeof *t);
  t->refs = 1;
  t->elem = base->elem;
  t->rank = rank;
  for (int i = 0; i < rank; i++) t->shape[i] = shape[i], t->strides[i] = strides[i];
  t->offset = offset;
  t->buf = base->buf;
  t->buf->refs++;
  return t;
}

Tensor *tensor_wrap(DynElem elem, int rank, const int64_t *shape, const int64_t *strides, void *data) {
  assert(rank >= 0 && rank <= DYN_MAX_RANK);
  Buffer *b = xmalloc(sizeof *b);
  *b = (Buffer){.refs = 1, .bytes = 0, .data = data, .home = NULL, .borrowed = true};
  Tensor *t = xcalloc(1, sizeof *t);
  t->refs = 1;
  t->elem = elem;
  t->rank = rank;
  for (int i = 0; i < rank; i++) t->shape[i] = shape[i], t->strides[i] = strides[i];
  t->buf = b;
  return t;
}

Tensor *tensor_retain(Tensor *t) {
  if (t) t->refs++;
  return t;
}

/* A tensor made with its buffer shares the buffer's block: its header then lives until the
 * buffer goes (views may hold the buffer longer), and buffer_free frees the block. */
void tensor_release(Tensor *t) {
  if (!t || --t->refs > 0) return;
  Buffer *b = t->buf;
  bool home = b && b->home == t;
  if (b && --b->refs == 0) buffer_free(b);
  if (!home) free(t);
}

/* ---- access ---- */

int64_t tensor_numel(const Tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->shape[i];
  return n;
}

void *tensor_data(const Tensor *t) {
  return (char *)t->buf->data + t->offset * elem_size(t->elem);
}

bool tensor_contiguous(const Tensor *t) {
  if (tensor_numel(t) == 0) return true;
  int64_t want = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    /* A dim of extent 1 is never stepped over, so its stride does not matter. */
    if (t->shape[i] != 1 && t->strides[i] != want) return false;
    want *= t->shape[i];
  }
  return true;
}

/* Address of the element at flat C-order index `flat`, through the strides. */
static void *flat_ptr(const Tensor *t, int64_t flat) {
  assert(flat >= 0 && flat < tensor_numel(t));
  int64_t off = t->offset;
  for (int i = t->rank - 1; i >= 0; i--) {
    int64_t n = t->shape[i];
    off += (flat % n) * t->strides[i];
    flat /= n;
  }
  return (char *)t->buf->data + off * elem_size(t->elem);
}

Tensor *tensor_contiguous_copy(Tensor *t, char *err, size_t errlen) {
  if (tensor_contiguous(t)) return tensor_retain(t);
  Tensor *c = tensor_new_uninit(t->elem, t->rank, t->shape, err, errlen);
  if (!c) return NULL;
  int64_t n = tensor_numel(t);
  size_t es = (size_t)elem_size(t->elem);
  char *dst = tensor_data(c);
  for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, flat_ptr(t, i), es);
  return c;
}

/* Float to integer: truncate toward zero, NaN to 0, saturate out-of-range values (a plain C
 * cast would be undefined behaviour there). */
static int64_t f64_to_i64(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static int32_t f64_to_i32(double v) {
  if (isnan(v)) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return (int32_t)v;
}

static double load_f64(DynElem e, const void *p) {
  switch (e) {
  case DYN_F32: return *(const float *)p;
  case DYN_F64: return *(const double *)p;
  case DYN_F16: return half_f16_to(*(const uint16_t *)p);
  case DYN_BF16: return half_bf16_to(*(const uint16_t *)p);
  case DYN_I32: return *(const int32_t *)p;
  case DYN_I64: return (double)*(const int64_t *)p;
  case DYN_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

static int64_t load_i64(DynElem e, const void *p) {
  switch (e) {
  case DYN_F32: return f64_to_i64(*(const float *)p);
  case DYN_F64: return f64_to_i64(*(const double *)p);
  case DYN_F16: return f64_to_i64(half_f16_to(*(const uint16_t *)p));
  case DYN_BF16: return f64_to_i64(half_bf16_to(*(const uint16_t *)p));
  case DYN_I32: return *(const int32_t *)p;
  case DYN_I64: return *(const int64_t *)p;
  case DYN_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

double tensor_get_f64(const Tensor *t, int64_t flat) { return load_f64(t->elem, flat_ptr(t, flat)); }

int64_t tensor_get_i64(const Tensor *t, int64_t flat) {
  return load_i64(t->elem, flat_ptr(t, flat));
}

void tensor_set_f64(Tensor *t, int64_t flat, double v) {
  void *p = flat_ptr(t, flat);
  switch (t->elem) {
  case DYN_F32: *(float *)p = (float)v; break;
  case DYN_F64: *(double *)p = v; break;
  case DYN_F16: *(uint16_t *)p = half_f16_from(v); break;
  case DYN_BF16: *(uint16_t *)p = half_bf16_from(v); break;
  case DYN_I32: *(int32_t *)p = f64_to_i32(v); break;
  case DYN_I64: *(int64_t *)p = f64_to_i64(v); break;
  case DYN_BOOL: *(uint8_t *)p = v != 0; break; /* NaN is true, as in NumPy */
  default: break;
  }
}

void tensor_set_i64(Tensor *t, int64_t flat, int64_t v) {
  void *p = flat_ptr(t, flat);
  switch (t->elem) {
  case DYN_F32: *(float *)p = (float)v; break;
  case DYN_F64: *(double *)p = (double)v; break;
  case DYN_F16: *(uint16_t *)p = half_f16_from((double)v); break;
  case DYN_BF16: *(uint16_t *)p = half_bf16_from((double)v); break;
  case DYN_I32: *(int32_t *)p = (int32_t)(uint32_t)v; break; /* wraps, as NumPy's astype */
  case DYN_I64: *(int64_t *)p = v; break;
  case DYN_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}

/* ---- printing ---- */

void tensor_type_str(const Tensor *t, Buf *out) { shape_str(t->elem, t->rank, t->shape, out); }

/* NumPy's print options, fixed: summarise above 1000 elements, keep 3 edge items per axis,
 * wrap rows at 75 columns. */
#define SUMMARY_OVER 1000
#define EDGE 3
#define LINE_WIDTH 75

typedef struct {
  const Tensor *t;
  Buf *out;
  bool summary;   /* long axes show EDGE items, "...", EDGE items */
  int width;      /* every element is right-aligned to this */
} Fmt;

/* One element as text: floats as %.6g (1, 2.5, -0.001234, 1.5e+10, inf, nan), so the
 * output reads back as a dyn literal; f16 and bf16 in their shortest such form.  Returns the length. */
static int elem_text(DynElem e, const void *p, char *s, size_t n) {
  if (e == DYN_BOOL) return snprintf(s, n, "%s", *(const uint8_t *)p ? "true" : "false");
  if (elem_is_int(e)) return snprintf(s, n, "%lld", (long long)load_i64(e, p));
  double v = load_f64(e, p);
  if (isnan(v)) return snprintf(s, n, "nan"); /* never "-nan" */
  if (isinf(v)) return snprintf(s, n, "%s", v < 0 ? "-inf" : "inf");
  if (elem_is_half(e))
    /* the shortest that reads back as the same 16-bit value (f16 0.1 is 0.1, not
     * 0.0999756), as NumPy shows them; at most 5 digits */
    for (int d = 1; d < 6; d++) {
      int w = snprintf(s, n, "%.*g", d, v);
      double back = strtod(s, NULL);
      if (half_round(e, back) != v) continue;
      /* 65500, not 6.55e+04: whole numbers below a million in full, as %.6g writes them */
      return strchr(s, 'e') && fabs(back) >= 1 && fabs(back) < 1e6 ? snprintf(s, n, "%.0f", back) : w;
    }
  return snprintf(s, n, "%.6g", v);
}

static bool axis_cut(const Fmt *f, int axis) {
  return f->summary && f->t->shape[axis] > 2 * EDGE;
}

/* The k-th shown position along an axis of extent n: an index, or -1 for the "..." slot. */
static int shown_count(const Fmt *f, int axis) {
  return axis_cut(f, axis) ? 2 * EDGE + 1 : (int)f->t->shape[axis];
}

static int64_t shown_index(const Fmt *f, int axis, int k) {
  if (!axis_cut(f, axis)) return k;
  if (k < EDGE) return k;
  if (k == EDGE) return -1;
  return f->t->shape[axis] - (2 * EDGE + 1 - k);
}

static const void *elem_at(const Fmt *f, int64_t off) {
  return (const char *)f->t->buf->data + off * elem_size(f->t->elem);
}

/* The widest element among those that will be shown. */
static void measure(Fmt *f, int axis, int64_t off) {
  const Tensor *t = f->t;
  if (axis == t->rank) {
    char s[64];
    int w = elem_text(t->elem, elem_at(f, off), s, sizeof s);
    if (w > f->width) f->width = w;
    return;
  }
  int m = shown_count(f, axis);
  for (int k = 0; k < m; k++) {
    int64_t i = shown_index(f, axis, k);
    if (i >= 0) measure(f, axis + 1, off + i * t->strides[axis]);
  }
}

static void put_spaces(Buf *b, int n) {
  while (n-- > 0) buf_putc(b, ' ');
}

/* One axis, NumPy's layout: the innermost axis is a row of elements wrapped before the line
 * would pass the width (less one column per nesting level, for the closing brackets); outer
 * axes put each sub-block on its own line, with one blank line per axis below the second
 * (so 3-D slices are separated by a blank line).  Continuation lines are indented to sit
 * under the first element after the opening brackets. */
static void render(Fmt *f, int axis, int64_t off) {
  const Tensor *t = f->t;
  Buf *b = f->out;
  int left = t->rank - axis, indent = axis + 1, m = shown_count(f, axis);
  buf_putc(b, '[');
  if (left == 1) {
    int limit = LINE_WIDTH - 1 - axis, col = indent;
    for (int k = 0; k < m; k++) {
      int64_t i = shown_index(f, axis, k);
      char s[64];
      int w = 3;
      if (i < 0) {
        strcpy(s, "...");
      } else {
        char e[64];
        elem_text(t->elem, elem_at(f, off + i * t->strides[axis]), e, sizeof e);
        w = snprintf(s, sizeof s, "%*s", f->width, e);
      }
      if (k > 0) {
        buf_putc(b, ',');
        /* col + 2 counts the comma and the space that would follow it. */
        if (col + 2 + w > limit) {
          buf_putc(b, '\n');
          put_spaces(b, indent);
          col = indent;
        } else {
          buf_putc(b, ' ');
          col += 2;
        }
      }
      buf_puts(b, s);
      col += w;
    }
  } else {
    for (int k = 0; k < m; k++) {
      int64_t i = shown_index(f, axis, k);
      if (k > 0) {
        buf_putc(b, ',');
        for (int j = 1; j < left; j++) buf_putc(b, '\n');
        put_spaces(b, indent);
      }
      if (i < 0)
        buf_puts(b, "...");
      else
        render(f, axis + 1, off + i * t->strides[axis]);
    }
  }
  buf_putc(b, ']');
}

/* An empty tensor: brackets nested down to the first zero dim, on one line ("[[], []]"). */
static void render_empty(Fmt *f, int axis) {
  Buf *b = f->out;
  int m = shown_count(f, axis);
  buf_putc(b, '[');
  for (int k = 0; k < m; k++) {
    if (k > 0) buf_puts(b, ", ");
    if (shown_index(f, axis, k) < 0)
      buf_puts(b, "...");
    else
      render_empty(f, axis + 1);
  }
  buf_putc(b, ']');
}

void tensor_format(const Tensor *t, Buf *out) {
  tensor_type_str(t, out);
  Fmt f = {.t = t, .out = out};
  if (t->rank == 0) {
    char s[64];
    elem_text(t->elem, elem_at(&f, t->offset), s, sizeof s);
    buf_printf(out, " %s", s);
    return;
  }
  buf_putc(out, '\n');
  int64_t n = tensor_numel(t);
  if (n == 0) {
    /* Count the "[]" leaves: the product of the dims before the first zero. */
    int64_t leaves = 1;
    for (int i = 0; i < t->rank && t->shape[i]; i++)
      if (!size_mul_ok(leaves, t->shape[i], &leaves)) leaves = INT64_MAX;
    f.summary = leaves > SUMMARY_OVER;
    render_empty(&f, 0);
    return;
  }
  f.summary = n > SUMMARY_OVER;
  measure(&f, 0, t->offset);
  render(&f, 0, t->offset);
}
