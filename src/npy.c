/* npy.c -- NumPy .npy files: the way tensors enter and leave dyn (load(), save()).
 * Reads format versions 1.0, 2.0 and 3.0, in C order or Fortran order (transposed into C
 * order on load), of every NumPy integer width, f4, f8 and bool, little- or big-endian
 * (swapped on load): a dtype dyn lacks becomes the dyn type that holds every value (u8 and
 * i16 i32, u32 i64; u64 i64 unless a value is above the i64 range, which is refused with
 * the value and its place).  Writes 1.0, or 2.0 when the header needs it.  Input is untrusted: every length is checked before it is used, the data size is
 * checked against the file (from a pipe, against the machine's memory) and the tensor
 * allocated before any data is read, and each problem becomes one message naming the file.
 * A save replaces the file whole or leaves it as it was (file_out_open). */
#include "config.h"
#include "dyn_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* dyn's tensors are little-endian, as NumPy's '<' files: those the loader copies as is. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.c assumes a little-endian host");

static const char MAGIC[6] = "\x93NUMPY";
/* The fixed part of a file: magic, version (2 bytes), header length (2 or 4 bytes). */
#define PREAMBLE_V1 10
#define PREAMBLE_V2 12

typedef struct {
  DynElem elem;               /* what the tensor holds */
  char kind;                  /* the file's: 'f', 'i', 'u' or 'b' */
  int size;                   /* bytes of one of the file's elements */
  bool swap;                  /* big-endian in the file */
  bool fortran;
  int rank;
  int64_t shape[DYN_MAX_RANK];
} Header;

static void put_err(char *err, size_t errlen, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put_err(char *err, size_t errlen, const char *name, const char *fmt, ...) {
  if (!err || !errlen) return;
  int n = snprintf(err, errlen, "%s: ", name);
  if (n < 0 || (size_t)n >= errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
  va_end(ap);
}

/* ---- the header dictionary ---- */

/* A tiny reader for the one Python literal the format allows: a dict with the keys 'descr'
 * (a string), 'fortran_order' (True/False) and 'shape' (a tuple of ints), in any order,
 * with any spacing and an optional trailing comma.  Text is bounded by `end`, never by a
 * NUL, since the header comes straight from the file. */
typedef struct {
  const char *p, *end;
  const char *name;
  char *err;
  size_t errlen;
} Lexer;

static void skip_space(Lexer *L) {
  while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r'))
    L->p++;
}

static bool eat(Lexer *L, char c) {
  skip_space(L);
  if (L->p < L->end && *L->p == c) {
    L->p++;
    return true;
  }
  return false;
}

/* What is at the cursor, for messages: a few printable characters or "end of header". */
static void describe_here(const Lexer *L, char *s, size_t n) {
  if (L->p >= L->end) {
    snprintf(s, n, "the end of the header");
    return;
  }
  size_t k = 0;
  s[k++] = '\'';
  for (const char *q = L->p; q < L->end && k + 5 < n && q < L->p + 12; q++)
    s[k++] = (*q >= 0x20 && *q < 0x7f) ? *q : '?';
  s[k++] = '\'';
  s[k] = 0;
}

static bool bad(Lexer *L, const char *what) {
  char here[32];
  describe_here(L, here, sizeof here);
  put_err(L->err, L->errlen, L->name, "bad header: expected %s at %s", what, here);
  return false;
}

/* A quoted string, returned as a span of the header (no escapes: keys and dtypes have none). */
static bool read_string(Lexer *L, const char **s, size_t *n) {
  skip_space(L);
  if (L->p >= L->end || (*L->p != '\'' && *L->p != '"')) return bad(L, "a quoted string");
  char q = *L->p++;
  const char *start = L->p;
  while (L->p < L->end && *L->p != q && *L->p != '\n') L->p++;
  if (L->p >= L->end || *L->p != q) return bad(L, "a closing quote");
  *s = start;
  *n = (size_t)(L->p - start);
  L->p++;
  return true;
}

static bool word_is(Lexer *L, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(L->end - L->p) < n || memcmp(L->p, w, n)) return false;
  const char *after = L->p + n;
  if (after < L->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                         (*after >= '0' && *after <= '9') || *after == '_'))
    return false;
  L->p = after;
  return true;
}

static bool read_bool(Lexer *L, bool *v) {
  skip_space(L);
  if (word_is(L, "True") || word_is(L, "1")) {
    *v = true;
    return true;
  }
  if (word_is(L, "False") || word_is(L, "0")) {
    *v = false;
    return true;
  }
  return bad(L, "True or False for 'fortran_order'");
}

/* "(3,)", "(2, 3)", "()"; Python 2 files may write "3L". */
static bool read_shape(Lexer *L, Header *h) {
  if (!eat(L, '(')) return bad(L, "a tuple for 'shape'");
  h->rank = 0;
  for (;;) {
    if (eat(L, ')')) return true;
    skip_space(L);
    if (L->p >= L->end || *L->p < '0' || *L->p > '9')
      return bad(L, "a non-negative integer in 'shape'");
    int64_t v = 0;
    while (L->p < L->end && *L->p >= '0' && *L->p <= '9') {
      if (!size_mul_ok(v, 10, &v) || __builtin_add_overflow(v, *L->p - '0', &v)) {
        put_err(L->err, L->errlen, L->name, "shape is too large: a dimension does not fit in "
                                            "64 bits");
        return false;
      }
      L->p++;
    }
    if (L->p < L->end && (*L->p == 'L' || *L->p == 'l')) L->p++;
    if (h->rank == DYN_MAX_RANK) {
      put_err(L->err, L->errlen, L->name, "rank is more than %d, the most dyn supports",
              DYN_MAX_RANK);
      return false;
    }
    h->shape[h->rank++] = v;
    if (eat(L, ',')) continue;
    if (eat(L, ')')) return true;
    return bad(L, "',' or ')' in 'shape'");
  }
}

/* The dtype string: '<f4', '>i2', '|u1', '|b1', '=f8' ...  The kind and size are the file's;
 * h->elem is the dyn type that holds every value of it: floats and i4/i8 as they are, the
 * narrower integers (i1 i2 u1 u2) in i32, u4 in i64, u8 in i64 when each value fits (checked
 * while converting).  '<' and '=' (this host) are little-endian, '>' big-endian; one-byte
 * types may say '|'.  f2 is NumPy's float16, dyn's f16. */
static bool parse_descr(Lexer *L, const char *s, size_t n, Header *h) {
  static const struct { char kind; int size; DynElem elem; } types[] = {
      {'f', 4, DYN_F32}, {'f', 8, DYN_F64}, {'i', 1, DYN_I32}, {'i', 2, DYN_I32},
      {'i', 4, DYN_I32}, {'i', 8, DYN_I64}, {'u', 1, DYN_I32}, {'u', 2, DYN_I32},
      {'u', 4, DYN_I64}, {'u', 8, DYN_I64}, {'b', 1, DYN_BOOL}, {'f', 2, DYN_F16},
  };
  if (n == 3 && (s[0] == '<' || s[0] == '=' || s[0] == '>' || s[0] == '|')) {
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
      if (s[1] != types[i].kind || s[2] != '0' + types[i].size) continue;
      if (s[0] == '|' && types[i].size != 1) break;
      h->elem = types[i].elem;
      h->kind = types[i].kind;
      h->size = types[i].size;
      h->swap = s[0] == '>' && types[i].size > 1;
      return true;
    }
  }
  char shown[40];
  size_t k = 0;
  for (size_t i = 0; i < n && k + 4 < sizeof shown; i++)
    shown[k++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (k < n) shown[k++] = '.', shown[k++] = '.', shown[k++] = '.';
  shown[k] = 0;
  put_err(L->err, L->errlen, L->name,
          "unsupported dtype '%s' (dyn reads floats f2, f4 and f8, integers i1 to i8 and u1 to "
          "u8, and bool b1, of either byte order)", shown);
  return false;
}

/* True when the file's elements are dyn's, byte for byte. */
static bool as_is(const Header *h) {
  return !h->swap && h->kind != 'u' && h->size == elem_size(h->elem);
}

/* Where the k-th element of the file (in its own order) is, as "[i, j]" in the array. */
static void place(const Header *h, int64_t k, char *s, size_t n) {
  int64_t idx[DYN_MAX_RANK] = {0};
  for (int a = 0; a < h->rank; a++) {
    int i = h->fortran ? a : h->rank - 1 - a;    /* the axis that moves fastest first */
    idx[i] = k % h->shape[i];
    k /= h->shape[i];
  }
  size_t used = (size_t)snprintf(s, n, "[");
  for (int i = 0; i < h->rank && used < n; i++)
    used += (size_t)snprintf(s + used, n - used, "%s%lld", i ? ", " : "", (long long)idx[i]);
  if (used < n) snprintf(s + used, n - used, "]");
}

/* count elements of the file's type at src into dyn's h->elem at dst (both in the file's
 * order).  False, with the value and its place, when a u8 value is above the i64 range. */
static bool convert(const Header *h, const unsigned char *src, int64_t count, unsigned char *dst,
                    const char *name, char *err, size_t errlen) {
  int sz = h->size, es = elem_size(h->elem);
  for (int64_t k = 0; k < count; k++, src += sz, dst += es) {
    unsigned char b[8];
    for (int j = 0; j < sz; j++) b[j] = src[h->swap ? sz - 1 - j : j];
    uint64_t u = 0;
    for (int j = sz - 1; j >= 0; j--) u = u << 8 | b[j];
    if (h->kind == 'f') {
      memcpy(dst, b, (size_t)sz);
      continue;
    }
    if (h->kind == 'b') {
      *dst = u != 0;
      continue;
    }
    int64_t v;
    if (h->kind == 'u') {
      if (u > (uint64_t)INT64_MAX) {
        char at[160];
        place(h, k, at, sizeof at);
        put_err(err, errlen, name, "the u64 value %llu at %s is above the i64 range, the widest "
                "integer dyn has: the array cannot be loaded without changing it",
                (unsigned long long)u, h->rank ? at : "the scalar");
        return false;
      }
      v = (int64_t)u;
    } else {
      int shift = 64 - 8 * sz;       /* sign-extend the file's width */
      v = (int64_t)(u << shift) >> shift;
    }
    if (es == 4) {
      int32_t w = (int32_t)v;
      memcpy(dst, &w, 4);
    } else {
      memcpy(dst, &v, 8);
    }
  }
  return true;
}

static bool parse_header(const char *text, size_t len, const char *name, Header *h, char *err,
                         size_t errlen) {
  Lexer L = {text, text + len, name, err, errlen};
  bool seen_descr = false, seen_order = false, seen_shape = false;
  if (!eat(&L, '{')) return bad(&L, "'{'");
  for (;;) {
    if (eat(&L, '}')) break;
    const char *key;
    size_t klen;
    if (!read_string(&L, &key, &klen)) return false;
    if (!eat(&L, ':')) return bad(&L, "':' after a key");
    bool *seen;
    if (klen == 5 && !memcmp(key, "descr", 5)) {
      seen = &seen_descr;
      skip_space(&L);
      if (L.p < L.end && *L.p == '[') {
        put_err(err, errlen, name, "unsupported dtype: structured arrays (a list of fields) "
                                   "cannot be loaded");
        return false;
      }
      const char *d;
      size_t dlen;
      if (!read_string(&L, &d, &dlen)) return false;
      if (!parse_descr(&L, d, dlen, h)) return false;
    } else if (klen == 13 && !memcmp(key, "fortran_order", 13)) {
      seen = &seen_order;
      if (!read_bool(&L, &h->fortran)) return false;
    } else if (klen == 5 && !memcmp(key, "shape", 5)) {
      seen = &seen_shape;
      if (!read_shape(&L, h)) return false;
    } else {
      put_err(err, errlen, name, "bad header: unexpected key '%.*s'", (int)(klen > 32 ? 32 : klen),
              key);
      return false;
    }
    if (*seen) {
      put_err(err, errlen, name, "bad header: key '%.*s' appears twice", (int)klen, key);
      return false;
    }
    *seen = true;
    if (eat(&L, ',')) continue;
    if (eat(&L, '}')) break;
    return bad(&L, "',' or '}'");
  }
  /* Padding after the dict: spaces and the final newline (some writers pad with NULs). */
  while (L.p < L.end && (*L.p == ' ' || *L.p == '\n' || *L.p == '\r' || *L.p == '\t' ||
                         *L.p == 0))
    L.p++;
  if (L.p < L.end) return bad(&L, "only padding after the dictionary");
  const char *missing = !seen_descr ? "descr" : !seen_order ? "fortran_order"
                        : !seen_shape ? "shape" : NULL;
  if (missing) {
    put_err(err, errlen, name, "bad header: no '%s' key", missing);
    return false;
  }
  return true;
}

/* ---- the fixed preamble ---- */

/* Checks magic and version in the first n bytes; on success *start is where the header text
 * begins (10 for version 1.0, whose length field has 2 bytes; else 12) and *hlen its length. */
static bool parse_preamble(const unsigned char *p, size_t n, const char *name, size_t *start,
                           size_t *hlen, char *err, size_t errlen) {
  if (n < sizeof MAGIC || memcmp(p, MAGIC, sizeof MAGIC)) {
    put_err(err, errlen, name, "not a .npy file (bad magic)");
    return false;
  }
  if (n < 8) {
    put_err(err, errlen, name, "truncated header: the file ends in the format version");
    return false;
  }
  int major = p[6], minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    put_err(err, errlen, name, "unsupported .npy format version %d.%d (dyn reads 1.0, 2.0 "
                               "and 3.0)", major, minor);
    return false;
  }
  size_t pre = major == 1 ? PREAMBLE_V1 : PREAMBLE_V2;
  if (n < pre) {
    put_err(err, errlen, name, "truncated header: the file ends in the header length");
    return false;
  }
  *hlen = major == 1 ? (size_t)p[8] | (size_t)p[9] << 8
                     : (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 |
                           (size_t)p[11] << 24;
  *start = pre;
  return true;
}

/* The data size the header promises, checked; false with "shape is too large". */
static bool data_bytes(const Header *h, const char *name, int64_t *bytes, char *err,
                       size_t errlen) {
  int64_t n = 1;
  bool over = false;
  for (int i = 0; i < h->rank; i++)
    if (h->shape[i] && !size_mul_ok(n, h->shape[i], &n)) over = true;
  for (int i = 0; i < h->rank; i++)
    if (!h->shape[i]) n = 0;
  if (over || !size_mul_ok(n, h->size, bytes)) {
    Buf s = {0};
    for (int i = 0; i < h->rank; i++)
      buf_printf(&s, "%s%lld", i ? ", " : "", (long long)h->shape[i]);
    put_err(err, errlen, name, "shape is too large: (%s%s) overflows 64 bits", s.s,
            h->rank == 1 ? "," : "");
    buf_free(&s);
    return false;
  }
  return true;
}

static void truncated(const char *name, int64_t want, uint64_t have, char *err, size_t errlen) {
  put_err(err, errlen, name, "data is truncated: expected %lld bytes, found %llu",
          (long long)want, (unsigned long long)have);
}

/* Fill t (fresh, C order) from the file's data bytes, transposing Fortran order. */
static void fill(Tensor *t, const Header *h, const unsigned char *src) {
  int64_t n = tensor_numel(t);
  int es = elem_size(t->elem);
  unsigned char *dst = tensor_data(t);
  if (!h->fortran || h->rank < 2) {
    memcpy(dst, src, (size_t)(n * es));
  } else if (n > 0) {
    /* Walk the destination in C order with an odometer over the index, keeping the source
     * offset (Fortran strides: the first axis moves fastest) in step. */
    int64_t fstride[DYN_MAX_RANK], idx[DYN_MAX_RANK] = {0}, off = 0;
    int64_t s = 1;
    for (int i = 0; i < h->rank; i++) fstride[i] = s, s *= h->shape[i];
    for (int64_t k = 0; k < n; k++) {
      memcpy(dst + k * es, src + off * es, (size_t)es);
      for (int i = h->rank - 1; i >= 0; i--) {
        off += fstride[i];
        if (++idx[i] < h->shape[i]) break;
        off -= fstride[i] * h->shape[i];
        idx[i] = 0;
      }
    }
  }
  if (t->elem == DYN_BOOL) /* NumPy stores 0/1, but keep dyn's invariant on any input */
    for (int64_t k = 0; k < n; k++) dst[k] = dst[k] != 0;
}

/* Parse the preamble and header held in `p` (n bytes): on success *data_off is where the
 * data starts. */
static bool parse_front(const unsigned char *p, size_t n, const char *name, Header *h,
                        size_t *data_off, char *err, size_t errlen) {
  size_t start, hlen;
  if (!parse_preamble(p, n, name, &start, &hlen, err, errlen)) return false;
  if (hlen > n - start) {
    put_err(err, errlen, name, "truncated header: expected %zu header bytes, found %zu", hlen,
            n - start);
    return false;
  }
  memset(h, 0, sizeof *h);
  if (!parse_header((const char *)p + start, hlen, name, h, err, errlen)) return false;
  *data_off = start + hlen;
  return true;
}

static Tensor *make(const Header *h, const char *name, char *err, size_t errlen) {
  char why[256];
  Tensor *t = tensor_new(h->elem, h->rank, h->shape, why, sizeof why);
  if (!t) put_err(err, errlen, name, "%s", why);
  return t;
}

Tensor *npy_parse(const void *data, size_t len, const char *name, char *err, size_t errlen) {
  const unsigned char *p = data;
  if (!name) name = "<memory>";
  Header h;
  size_t off;
  int64_t bytes;
  if (!parse_front(p, len, name, &h, &off, err, errlen)) return NULL;
  if (!data_bytes(&h, name, &bytes, err, errlen)) return NULL;
  if ((uint64_t)bytes > len - off) {
    truncated(name, bytes, len - off, err, errlen);
    return NULL;
  }
  Tensor *t = make(&h, name, err, errlen);
  if (!t || as_is(&h)) {
    if (t) fill(t, &h, p + off);
    return t;
  }
  /* another width or byte order: converted in the file's order, then placed */
  Tensor *conv = make(&h, name, err, errlen);
  bool ok = conv && convert(&h, p + off, tensor_numel(t), tensor_data(conv), name, err, errlen);
  if (ok) fill(t, &h, tensor_data(conv));
  tensor_release(conv);
  if (!ok) {
    tensor_release(t);
    return NULL;
  }
  return t;
}

/* ---- files ---- */

/* Data is read and written in pieces of this size, so that an interrupt is seen within a
 * piece's time (a few milliseconds) and a pipe's data lands straight in the tensor. */
#define CHUNK ((size_t)8 << 20)
/* The longest header read from a file.  A header describes at most 8 dimensions in a few
 * hundred bytes; NumPy pads it to 64 (or, for version 2.0, to any length); a length field
 * of 4 GiB on a pipe would otherwise be buffered whole before it could be parsed. */
#define HEADER_MAX ((size_t)1 << 20)

typedef enum { READ_OK, READ_SHORT, READ_ERROR, READ_NOMEM, READ_STOPPED } ReadResult;

/* n bytes into p, in pieces; *got says how many arrived (fewer: READ_SHORT at the end). */
static ReadResult read_full(int fd, void *p, size_t n, volatile int *stop, size_t *got) {
  unsigned char *d = p;
  *got = 0;
  while (*got < n) {
    if (stop && *stop) return READ_STOPPED;
    size_t want = n - *got < CHUNK ? n - *got : CHUNK;
    ssize_t r = read(fd, d + *got, want);
    if (r > 0) *got += (size_t)r;
    else if (r == 0) return READ_SHORT;
    else if (errno != EINTR) return READ_ERROR;
  }
  return READ_OK;
}

/* Bytes of the preamble and header, grown as the file delivers them. */
typedef struct {
  unsigned char *s;
  size_t len;
} Bytes;

static ReadResult read_more(int fd, Bytes *b, size_t n, volatile int *stop) {
  unsigned char *s = realloc(b->s, b->len + n);
  if (!s) return READ_NOMEM;
  b->s = s;
  size_t got;
  ReadResult r = read_full(fd, b->s + b->len, n, stop, &got);
  b->len += got;
  return r;
}

/* The memory of this machine, or 0 when it cannot be told. */
static uint64_t machine_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

static void human(uint64_t b, char *s, size_t n) {
  if (b >= 1000000000) snprintf(s, n, "%.1f GB", (double)b / 1e9);
  else snprintf(s, n, "%.1f MB", (double)b / 1e6);
}

Tensor *npy_load(const char *path, volatile int *stop, char *err, size_t errlen) {
  int fd;
  do {
    fd = open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR && !(stop && *stop));
  if (fd < 0) {
    if (errno == EINTR) put_err(err, errlen, path, "interrupted");
    else put_err(err, errlen, path, "cannot open: %s", strerror(errno));
    return NULL;
  }
  struct stat st;
  bool have_stat = fstat(fd, &st) == 0;
  if (have_stat && S_ISDIR(st.st_mode)) {
    put_err(err, errlen, path, "cannot open: %s", strerror(EISDIR));
    close(fd);
    return NULL;
  }
  /* For a regular file the size is known, so lengths are checked against it before
   * reading; a pipe or a device is read as far as it goes, into memory that was checked
   * first: the whole tensor is allocated before its data is read. */
  bool regular = have_stat && S_ISREG(st.st_mode);
  uint64_t fsize = regular ? (uint64_t)st.st_size : UINT64_MAX;
  Tensor *t = NULL, *staged = NULL;
  unsigned char *raw = NULL;
  Bytes front = {0};
  size_t start, hlen, off, got;
  Header h;
  int64_t bytes;
  ReadResult r;

  /* Magic and version first: the rest of the preamble's length depends on the version. */
  if ((r = read_more(fd, &front, 8, stop)) > READ_SHORT) goto read_failed;
  if (front.len == 8 && (r = read_more(fd, &front, front.s[6] == 1 ? 2 : 4, stop)) > READ_SHORT)
    goto read_failed;
  if (!parse_preamble(front.s, front.len, path, &start, &hlen, err, errlen)) goto out;
  if (hlen > fsize - start) {
    put_err(err, errlen, path, "truncated header: expected %zu header bytes, found %llu", hlen,
            (unsigned long long)(fsize - start));
    goto out;
  }
  if (hlen > HEADER_MAX) {
    put_err(err, errlen, path, "header is too long: %zu bytes (dyn reads headers of up to "
                               "%zu)", hlen, HEADER_MAX);
    goto out;
  }
  if ((r = read_more(fd, &front, hlen, stop)) > READ_SHORT) goto read_failed;
  if (!parse_front(front.s, front.len, path, &h, &off, err, errlen)) goto out;
  if (!data_bytes(&h, path, &bytes, err, errlen)) goto out;
  if ((uint64_t)bytes > fsize - off) {
    truncated(path, bytes, fsize - off, err, errlen);
    goto out;
  }
  uint64_t mem = machine_memory();
  if (!regular && mem && (uint64_t)bytes > mem) {
    char want[32], have[32];
    human((uint64_t)bytes, want, sizeof want);
    human(mem, have, sizeof have);
    put_err(err, errlen, path, "the header declares %s of data, more than this machine's "
                               "memory (%s)", want, have);
    goto out;
  }
  if (!(t = make(&h, path, err, errlen))) goto out;
  /* Fortran order is read into a tensor of its own and transposed from there; another
   * width or byte order is read whole into memory of its own and converted from there. */
  bool transpose = h.fortran && h.rank >= 2;
  if (transpose && !(staged = make(&h, path, err, errlen))) goto fail;
  unsigned char *dst = tensor_data(transpose ? staged : t);
  if (!as_is(&h) && !(raw = malloc(bytes ? (size_t)bytes : 1))) {
    put_err(err, errlen, path, "out of memory while reading");
    goto fail;
  }
  if ((r = read_full(fd, raw ? raw : dst, (size_t)bytes, stop, &got)) > READ_SHORT) goto read_failed;
  if (got < (size_t)bytes) {
    truncated(path, bytes, got, err, errlen);  /* a pipe's end, or a file that shrank */
    goto fail;
  }
  if (raw && !convert(&h, raw, tensor_numel(t), dst, path, err, errlen)) goto fail;
  if (transpose) {
    fill(t, &h, dst);
  } else if (t->elem == DYN_BOOL) {
    for (int64_t k = 0; k < bytes; k++) dst[k] = dst[k] != 0;
  }
  goto out;
read_failed:
  if (r == READ_STOPPED)
    put_err(err, errlen, path, "interrupted");
  else if (r == READ_NOMEM)
    put_err(err, errlen, path, "out of memory while reading");
  else
    put_err(err, errlen, path, "read error: %s", strerror(errno));
fail:
  tensor_release(t);
  t = NULL;
out:
  tensor_release(staged);
  free(raw);
  free(front.s);
  close(fd);
  return t;
}

/* The header text NumPy itself writes, padded with spaces to a multiple of 64 bytes so the
 * data is aligned, and ending in a newline.  NumPy has no bfloat16: a bf16 tensor is written
 * as f4, which holds each of its values exactly (lang/reference.md, "NumPy files"). */
static void build_header(const Tensor *t, Buf *out) {
  static const char *descr[] = {
#define X(E, name, ctype, bytes, isf, isi) [DYN_##E] = isf ? "<f" #bytes : isi ? "<i" #bytes : "|b1",
#include "../lang/elem.def"
#undef X
  };
  Buf d = {0};
  buf_printf(&d, "{'descr': '%s', 'fortran_order': False, 'shape': (", t->elem == DYN_BF16 ? "<f4" : descr[t->elem]);
  for (int i = 0; i < t->rank; i++)
    buf_printf(&d, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  buf_puts(&d, t->rank == 1 ? ",), }" : "), }");
  size_t pre = PREAMBLE_V1, total = (pre + d.len + 1 + 63) / 64 * 64;
  int major = 1;
  if (total - pre > 65535) { /* version 1.0 has a 16-bit header length */
    major = 2;
    pre = PREAMBLE_V2;
    total = (pre + d.len + 1 + 63) / 64 * 64;
  }
  buf_putn(out, MAGIC, sizeof MAGIC);
  size_t hlen = total - pre;
  unsigned char v[6] = {(unsigned char)major, 0, hlen & 0xff, hlen >> 8 & 0xff,
                        hlen >> 16 & 0xff, hlen >> 24 & 0xff};
  buf_putn(out, (const char *)v, major == 1 ? 4 : 6);
  buf_putn(out, d.s, d.len);
  while (out->len < total - 1) buf_putc(out, ' ');
  buf_putc(out, '\n');
  buf_free(&d);
}

/* The header and the data of t, in C order, handed to put in pieces; false as soon as put
 * fails (put has then said why). */
typedef bool (*PutFn)(void *ctx, const void *p, size_t n);

static bool write_npy(const Tensor *t, PutFn put, void *ctx) {
  Buf head = {0};
  build_header(t, &head);
  bool ok = put(ctx, head.s, head.len);
  buf_free(&head);
  int64_t n = tensor_numel(t);
  int es = elem_size(t->elem);
  if (ok && tensor_contiguous(t) && t->elem != DYN_BOOL && t->elem != DYN_BF16) {
    const unsigned char *p = tensor_data(t);
    for (size_t left = (size_t)n * (size_t)es; ok && left > 0;) {
      size_t k = left < CHUNK ? left : CHUNK;
      ok = put(ctx, p, k);
      p += k;
      left -= k;
    }
  } else if (ok) {
    /* A strided view (or bools, written as strict 0/1, or bf16s, as f4): gather through a
     * small buffer. */
    unsigned char chunk[65536];
    size_t used = 0;
    for (int64_t k = 0; k < n && ok; k++) {
      if (t->elem == DYN_BOOL) {
        chunk[used] = tensor_get_i64(t, k) != 0;
      } else if (t->elem == DYN_BF16) {
        float f = (float)tensor_get_f64(t, k);
        memcpy(chunk + used, &f, 4);
        used += 4 - (size_t)es;
      } else {
        int64_t off = t->offset, flat = k;
        for (int i = t->rank - 1; i >= 0; i--) {
          off += (flat % t->shape[i]) * t->strides[i];
          flat /= t->shape[i];
        }
        memcpy(chunk + used, (const char *)t->buf->data + off * es, (size_t)es);
      }
      used += (size_t)es;
      if (used + 8 > sizeof chunk || k == n - 1) {
        ok = put(ctx, chunk, used);
        used = 0;
      }
    }
  }
  return ok;
}

typedef struct {
  FileOut *o;
  volatile int *stop;
  char why[256];
} FilePut;

static bool put_file(void *ctx, const void *p, size_t n) {
  FilePut *f = ctx;
  return file_out_write(f->o, p, n, f->stop, f->why, sizeof f->why);
}

static bool put_buf(void *ctx, const void *p, size_t n) {
  buf_putn(ctx, p, n);
  return true;
}

void npy_encode(const Tensor *t, Buf *out) { write_npy(t, put_buf, out); }

bool npy_save(const Tensor *t, const char *path, volatile int *stop, char *err, size_t errlen) {
  FilePut f = {.stop = stop};
  if (!(f.o = file_out_open(path, stop, f.why, sizeof f.why))) {
    put_err(err, errlen, path, "%s", f.why);
    return false;
  }
  bool ok = write_npy(t, put_file, &f);
  if (ok) ok = file_out_commit(f.o, f.why, sizeof f.why);
  else file_out_abandon(f.o);
  if (!ok) put_err(err, errlen, path, "%s", f.why);
  return ok;
}
