/* util.c -- memory that never returns NULL, compilation arenas, growable strings, and the
 * element-type table.  Everything else in dyn builds on these.  Allocation failure of the
 * compiler's own objects ends the process (a message, exit status 1: there is no state to
 * go back to); user-sized allocations (tensors) go through tensor_new, which reports
 * failure instead. */
#include "config.h"
#include "dyn_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The status is an error's, not a crash's (abort: 134 and perhaps a core dump), and what
 * was printed is kept.  _exit rather than exit: this may be a worker thread, and exit would
 * run LLVM's static destructors under the feet of the others. */
static void oom(size_t n) {
  fprintf(stderr, "dyn: out of memory: could not allocate %zu bytes (the machine's memory, "
                  "or a limit such as ulimit -v, is exhausted); stopping\n", n);
  fflush(stdout);
  _exit(1);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

void *xcalloc(size_t n, size_t m) {
  void *p = calloc(n ? n : 1, m ? m : 1);
  if (!p) oom(n * m);
  return p;
}

void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) oom(n);
  return p;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
void sort_doubles(double *t, size_t n) { qsort(t, n, sizeof *t, cmp_double); }

char *xstrndup(const char *s, size_t n) {
  char *p = xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

bool size_mul_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* ---- arenas: a list of chunks, growing from 2 KiB to 64 KiB ---- */

typedef struct Chunk {
  struct Chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} Chunk;

struct Arena { Chunk *head; };

Arena *arena_new(void) { return xcalloc(1, sizeof(Arena)); }

void arena_free(Arena *a) {
  if (!a) return;
  for (Chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void arena_reset(Arena *a) {
  /* keep the newest (largest) chunk, empty */
  Chunk *keep = a->head;
  if (!keep) return;
  for (Chunk *c = keep->next, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  keep->next = NULL;
  keep->used = 0;
}

void *arena_alloc(Arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  Chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    /* chunks grow from 2 KiB to 64 KiB: most arenas (one call, one statement) stay small,
     * and a 64 KiB malloc per call costs more than the call's work on small shapes */
    size_t cap = c ? (c->cap < 65536 ? c->cap * 2 : 65536) : 2048;
    if (cap < n) cap = n;
    c = xmalloc(sizeof(Chunk) + cap);
    c->used = 0;
    c->cap = cap;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  return p;
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  Buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *p = arena_strndup(a, b.s ? b.s : "", b.len);
  buf_free(&b);
  return p;
}

/* ---- growable strings ---- */

static void buf_grow(Buf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  b->s = xrealloc(b->s, cap);
  b->cap = cap;
}

void buf_putn(Buf *b, const char *s, size_t n) {
  buf_grow(b, n);
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = 0;
}

void buf_putc(Buf *b, char c) { buf_putn(b, &c, 1); }
void buf_puts(Buf *b, const char *s) { buf_putn(b, s, strlen(s)); }

void buf_vprintf(Buf *b, const char *fmt, va_list ap) {
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  if (n < 0) return;
  buf_grow(b, (size_t)n);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

void buf_printf(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(b, fmt, ap);
  va_end(ap);
}

void buf_free(Buf *b) {
  free(b->s);
  b->s = NULL;
  b->len = b->cap = 0;
}

/* ---- element types ---- */

static const struct { const char *name; int bytes; bool isf, isi; } elems[] = {
#define X(E, name, ctype, bytes, isf, isi) {name, bytes, isf, isi},
#include "../lang/elem.def"
#undef X
};

const char *elem_name(DynElem e) { return elems[e].name; }
int elem_size(DynElem e) { return elems[e].bytes; }
bool elem_is_float(DynElem e) { return elems[e].isf; }
bool elem_is_int(DynElem e) { return elems[e].isi; }
bool elem_is_half(DynElem e) { return e == DYN_F16 || e == DYN_BF16; }
DynElem elem_compute(DynElem e) { return elem_is_half(e) ? DYN_F32 : e; }

bool elem_from_name(const char *s, size_t n, DynElem *out) {
  for (int e = 0; e < DYN_NELEM; e++)
    if (strlen(elems[e].name) == n && !memcmp(elems[e].name, s, n)) {
      *out = (DynElem)e;
      return true;
    }
  return false;
}

/* The length of a valid UTF-8 sequence at s, or 0.  Valid excludes overlong forms, UTF-16
 * surrogates and code points above U+10FFFF (RFC 3629), so what is echoed back in a message
 * is always well-formed text. */
int utf8_len(const unsigned char *s, size_t left) {
  int n = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : (s[0] >> 4) == 0xE ? 3
        : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
  if (n == 0 || (size_t)n > left) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) ||
      (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))
    return 0;
  return n;
}
