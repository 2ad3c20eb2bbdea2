/* npz.c -- NumPy .npz archives: a zip file whose members are .npy files (np.savez,
 * np.savez_compressed), read and written for load("a.npz", "W") and save(W, b, "a.npz").
 * Reading takes members stored or deflated, with zip64 sizes and offsets (NumPy writes
 * zip64 local headers); every size and offset is checked against the file, the inflated
 * size against the declared one and the CRC-32 against the data, so a corrupt archive is one
 * message, never a crash.  Members are then parsed by npy.c.  Writing deflates each member
 * at zlib's fastest level (as np.savez_compressed, which NumPy and zipfile read).  Without
 * zlib (configure did not find it) every .npz is refused with a message saying so. */
#include "config.h"
#include "dyn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

bool npz_is_npz(const char *path) {
  size_t n = strlen(path);
  return n >= 4 && !strcmp(path + n - 4, ".npz");
}

static void put_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put_err(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

#ifndef HAVE_ZLIB

Tensor *npz_load(const char *path, const char *member, volatile int *stop, char *err, size_t errlen) {
  put_err(err, errlen, "%s: .npz files need zlib, which this dyn was built without (save the arrays "
          "as .npy files, or rebuild dyn with zlib1g-dev installed)", path);
  return NULL;
}

bool npz_save(const char *path, Tensor *const *ts, const char *const *names, int n, volatile int *stop,
              char *err, size_t errlen) {
  npz_load(path, NULL, stop, err, errlen);
  return false;
}

#else

/* ---- little-endian fields ---- */

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put_le(Buf *b, uint64_t v, int n) {
  for (int i = 0; i < n; i++) buf_putc(b, (char)(v >> (8 * i) & 0xff));
}

enum { SIG_LOCAL = 0x04034b50, SIG_CENTRAL = 0x02014b50, SIG_END = 0x06054b50,
       SIG_END64 = 0x06064b50, SIG_LOC64 = 0x07064b50 };
#define LOCAL_LEN 30
#define CENTRAL_LEN 46
#define END_LEN 22
/* Deflate expands data by at most about 1032 to 1: an inflated size beyond that is a lie,
 * refused before memory is taken for it. */
#define MAX_RATIO 1100

/* ---- reading ---- */

typedef struct {
  char *name;                  /* the member's name as stored */
  uint64_t csize, usize, off;  /* compressed and inflated sizes, the local header's offset */
  uint32_t crc;
  int method, flags;
} Entry;

typedef struct {
  const unsigned char *p;      /* the whole file */
  uint64_t len;
  const char *path;
  char *err;
  size_t errlen;
  VEC(Entry) e;
} Zip;

static bool corrupt(Zip *z, const char *what) {
  put_err(z->err, z->errlen, "%s: not a valid .npz (zip) file: %s", z->path, what);
  return false;
}

/* Sizes of 0xffffffff come from the zip64 extra field (id 1), in the order usize, csize,
 * offset, each present only when its 32-bit field says so. */
static bool zip64_extra(Zip *z, const unsigned char *x, size_t xlen, Entry *en) {
  uint64_t *fields[3] = {&en->usize, &en->csize, &en->off};
  while (xlen >= 4) {
    size_t id = (size_t)le(x, 2), n = (size_t)le(x + 2, 2);
    if (n > xlen - 4) return corrupt(z, "an extra field runs past its entry");
    if (id == 1) {
      const unsigned char *q = x + 4;
      size_t left = n;
      for (int i = 0; i < 3; i++) {
        if (*fields[i] != 0xffffffffu) continue;
        if (left < 8) return corrupt(z, "a zip64 field is missing");
        *fields[i] = le(q, 8);
        q += 8;
        left -= 8;
      }
    }
    x += 4 + n;
    xlen -= 4 + n;
  }
  return true;
}

/* The end record (and the zip64 one when the counts overflow it), then the central
 * directory: z->e gets every entry. */
static bool read_directory(Zip *z) {
  if (z->len < END_LEN) return corrupt(z, "too short to be a zip archive");
  uint64_t at = z->len - END_LEN, lowest = z->len > END_LEN + 65535 ? z->len - END_LEN - 65535 : 0;
  while (le(z->p + at, 4) != SIG_END) {
    if (at == lowest) return corrupt(z, "no end of central directory record");
    at--;
  }
  const unsigned char *end = z->p + at;
  uint64_t count = le(end + 10, 2), size = le(end + 12, 4), off = le(end + 16, 4);
  if (le(end + 4, 2) != 0 || le(end + 6, 2) != 0) return corrupt(z, "an archive split over several disks");
  if (count == 0xffff || size == 0xffffffffu || off == 0xffffffffu) {
    if (at < 20 || le(end - 20, 4) != SIG_LOC64) return corrupt(z, "no zip64 end record locator");
    uint64_t e64 = le(end - 20 + 8, 8);
    if (e64 > at || at - e64 < 56 || le(z->p + e64, 4) != SIG_END64) return corrupt(z, "a bad zip64 end record");
    count = le(z->p + e64 + 32, 8);
    size = le(z->p + e64 + 40, 8);
    off = le(z->p + e64 + 48, 8);
  }
  if (off > z->len || size > z->len - off) return corrupt(z, "the central directory lies outside the file");
  if (count > size / CENTRAL_LEN) return corrupt(z, "more entries than the central directory holds");
  const unsigned char *p = z->p + off, *stop = p + size;
  for (uint64_t i = 0; i < count; i++) {
    if ((uint64_t)(stop - p) < CENTRAL_LEN || le(p, 4) != SIG_CENTRAL) return corrupt(z, "a bad central directory entry");
    size_t nlen = (size_t)le(p + 28, 2), xlen = (size_t)le(p + 30, 2), clen = (size_t)le(p + 32, 2);
    if ((size_t)(stop - p) - CENTRAL_LEN < nlen + xlen + clen) return corrupt(z, "a central directory entry runs past it");
    Entry en = {.flags = (int)le(p + 8, 2), .method = (int)le(p + 10, 2), .crc = (uint32_t)le(p + 16, 4),
                .csize = le(p + 20, 4), .usize = le(p + 24, 4), .off = le(p + 42, 4)};
    if (!zip64_extra(z, p + CENTRAL_LEN + nlen, xlen, &en)) return false;
    en.name = xstrndup((const char *)p + CENTRAL_LEN, nlen);
    vec_push(z->e, en);
    p += CENTRAL_LEN + nlen + xlen + clen;
  }
  return true;
}

/* "W" names the member "W.npy" or "W" */
static bool name_is(const char *stored, const char *want) {
  size_t n = strlen(want);
  return !strcmp(stored, want) || (!strncmp(stored, want, n) && !strcmp(stored + n, ".npy"));
}

static void list_names(const Zip *z, Buf *b) {
  for (int i = 0; i < z->e.n; i++) {
    const char *nm = z->e.a[i].name;
    size_t n = strlen(nm);
    if (n > 4 && !strcmp(nm + n - 4, ".npy")) n -= 4;
    buf_printf(b, "%s'%.*s'", i ? ", " : "", (int)n, nm);
  }
  if (!z->e.n) buf_puts(b, "none");
}

/* The member's .npy bytes, inflated and checked; NULL with the message. */
static unsigned char *extract(Zip *z, const Entry *en, const char *label, volatile int *stop) {
  if (en->flags & 1) {
    put_err(z->err, z->errlen, "%s: encrypted, which dyn cannot read", label);
    return NULL;
  }
  if (en->method != 0 && en->method != 8) {
    put_err(z->err, z->errlen, "%s: compressed with zip method %d; dyn reads stored (0) and deflated (8) members",
            label, en->method);
    return NULL;
  }
  if (en->off > z->len || z->len - en->off < LOCAL_LEN || le(z->p + en->off, 4) != SIG_LOCAL) {
    put_err(z->err, z->errlen, "%s: not a valid .npz (zip) file: a bad local header", label);
    return NULL;
  }
  uint64_t data = en->off + LOCAL_LEN + le(z->p + en->off + 26, 2) + le(z->p + en->off + 28, 2);
  if (data > z->len || en->csize > z->len - data) {
    put_err(z->err, z->errlen, "%s: truncated: the member's %llu bytes run past the end of the file", label,
            (unsigned long long)en->csize);
    return NULL;
  }
  if ((en->method == 0 && en->usize != en->csize) ||
      (en->method == 8 && en->usize / MAX_RATIO > en->csize + 1)) {
    put_err(z->err, z->errlen, "%s: not a valid .npz (zip) file: %llu bytes cannot inflate to the %llu declared",
            label, (unsigned long long)en->csize, (unsigned long long)en->usize);
    return NULL;
  }
  unsigned char *out = en->usize < SIZE_MAX ? malloc(en->usize ? (size_t)en->usize : 1) : NULL;
  if (!out) {
    put_err(z->err, z->errlen, "%s: cannot allocate %llu bytes for the member", label, (unsigned long long)en->usize);
    return NULL;
  }
  const unsigned char *src = z->p + data;
  bool ok = true;
  if (en->method == 0) {
    memcpy(out, src, (size_t)en->usize);
  } else {
    z_stream zs = {0};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
      free(out);
      put_err(z->err, z->errlen, "%s: zlib could not start", label);
      return NULL;
    }
    uint64_t in_left = en->csize, out_left = en->usize;
    zs.next_in = (unsigned char *)src;
    zs.next_out = out;
    int r = Z_OK;
    while (r == Z_OK) {
      if (stop && *stop) {
        r = Z_ERRNO;
        break;
      }
      if (!zs.avail_in) zs.avail_in = in_left < (1u << 30) ? (uInt)in_left : 1u << 30, in_left -= zs.avail_in;
      if (!zs.avail_out) zs.avail_out = out_left < (1u << 30) ? (uInt)out_left : 1u << 30, out_left -= zs.avail_out;
      uInt before_in = zs.avail_in, before_out = zs.avail_out;
      r = inflate(&zs, Z_NO_FLUSH);
      if (r == Z_BUF_ERROR || (r == Z_OK && before_in == zs.avail_in && before_out == zs.avail_out)) break;
    }
    uint64_t got = en->usize - out_left - zs.avail_out;
    inflateEnd(&zs);
    if (stop && *stop) {
      put_err(z->err, z->errlen, "%s: interrupted", label);
      ok = false;
    } else if (r != Z_STREAM_END || got != en->usize) {
      put_err(z->err, z->errlen, "%s: corrupt compressed data (%s)", label,
              r == Z_STREAM_END ? "shorter than declared" : r == Z_DATA_ERROR ? "invalid deflate stream"
              : "it ends early or is longer than declared");
      ok = false;
    }
  }
  if (ok) {
    uLong crc = crc32(0, NULL, 0);
    for (uint64_t k = 0; k < en->usize;) {
      uInt step = en->usize - k < (1u << 30) ? (uInt)(en->usize - k) : 1u << 30;
      crc = crc32(crc, out + k, step);
      k += step;
    }
    if ((uint32_t)crc != en->crc) {
      put_err(z->err, z->errlen, "%s: the data does not match its CRC-32 (the file is corrupt)", label);
      ok = false;
    }
  }
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

/* The whole file in memory: an archive is read from its end. */
static unsigned char *slurp(const char *path, uint64_t *len, volatile int *stop, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    put_err(err, errlen, "%s: cannot open: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
    if (fd >= 0) close(fd);
    return NULL;
  }
  unsigned char *p = malloc(st.st_size ? (size_t)st.st_size : 1);
  if (!p) {
    put_err(err, errlen, "%s: cannot allocate %lld bytes to read it", path, (long long)st.st_size);
    close(fd);
    return NULL;
  }
  size_t got = 0, want = (size_t)st.st_size;
  while (got < want) {
    if (stop && *stop) {
      put_err(err, errlen, "%s: interrupted", path);
      break;
    }
    ssize_t r = read(fd, p + got, want - got < (8u << 20) ? want - got : 8u << 20);
    if (r > 0) got += (size_t)r;
    else if (r == 0 || errno != EINTR) {
      put_err(err, errlen, "%s: read error: %s", path, r == 0 ? "the file shrank" : strerror(errno));
      break;
    }
  }
  close(fd);
  if (got < want) {
    free(p);
    return NULL;
  }
  *len = got;
  return p;
}

Tensor *npz_load(const char *path, const char *member, volatile int *stop, char *err, size_t errlen) {
  uint64_t len;
  unsigned char *p = slurp(path, &len, stop, err, errlen);
  if (!p) return NULL;
  Zip z = {.p = p, .len = len, .path = path, .err = err, .errlen = errlen};
  Tensor *t = NULL;
  if (read_directory(&z)) {
    int found = -1;
    for (int i = 0; i < z.e.n && found < 0; i++)
      if (member ? name_is(z.e.a[i].name, member) : z.e.n == 1) found = i;
    if (found < 0) {
      Buf names = {0};
      list_names(&z, &names);
      if (member) put_err(err, errlen, "%s: no array '%s' (it holds %s)", path, member, names.s);
      else put_err(err, errlen, "%s: holds %d arrays (%s): name one, as load(\"%s\", \"NAME\")", path, z.e.n,
                   names.s, path);
      buf_free(&names);
    } else {
      Buf label = {0};
      buf_printf(&label, "%s:%s", path, z.e.a[found].name);
      unsigned char *npy = extract(&z, &z.e.a[found], label.s, stop);
      if (npy) t = npy_parse(npy, (size_t)z.e.a[found].usize, label.s, err, errlen);
      free(npy);
      buf_free(&label);
    }
  }
  for (int i = 0; i < z.e.n; i++) free(z.e.a[i].name);
  vec_free(z.e);
  free(p);
  return t;
}

/* ---- writing ---- */

/* One member: its .npy bytes deflated into out; the sizes and CRC for the headers. */
static bool deflate_member(const Buf *npy, Buf *out, uint32_t *crc, volatile int *stop) {
  z_stream zs = {0};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  uLong c = crc32(0, NULL, 0);
  size_t in_done = 0;
  unsigned char chunk[1 << 16];
  int r = Z_OK;
  while (r != Z_STREAM_END) {
    if (stop && *stop) break;
    size_t step = npy->len - in_done < (1u << 20) ? npy->len - in_done : 1u << 20;
    zs.next_in = (unsigned char *)npy->s + in_done;
    zs.avail_in = (uInt)step;
    c = crc32(c, zs.next_in, (uInt)step);
    in_done += step;
    int flush = in_done == npy->len ? Z_FINISH : Z_NO_FLUSH;
    do {
      zs.next_out = chunk;
      zs.avail_out = sizeof chunk;
      r = deflate(&zs, flush);
      buf_putn(out, (const char *)chunk, sizeof chunk - zs.avail_out);
    } while (zs.avail_out == 0 || (flush == Z_FINISH && r != Z_STREAM_END && r == Z_OK));
  }
  deflateEnd(&zs);
  *crc = (uint32_t)c;
  return r == Z_STREAM_END;
}

bool npz_save(const char *path, Tensor *const *ts, const char *const *names, int n, volatile int *stop,
              char *err, size_t errlen) {
  char why[256] = "";
  FileOut *o = file_out_open(path, stop, why, sizeof why);
  if (!o) {
    put_err(err, errlen, "%s: %s", path, why);
    return false;
  }
  Buf central = {0};
  uint64_t at = 0;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    Buf npy = {0}, packed = {0}, local = {0};
    npy_encode(ts[i], &npy);
    uint32_t crc = 0;
    char member[300];
    snprintf(member, sizeof member, "%s.npy", names[i]);
    size_t mlen = strlen(member);
    if (!deflate_member(&npy, &packed, &crc, stop)) {
      snprintf(why, sizeof why, stop && *stop ? "interrupted" : "zlib could not compress '%s'", names[i]);
      ok = false;
    } else if (npy.len > 0xfffffffeu || packed.len > 0xfffffffeu || at > 0xfffffffeu) {
      snprintf(why, sizeof why, "'%s' is 4 GiB or more, which dyn does not write in a .npz yet (save it as .npy)",
               names[i]);
      ok = false;
    }
    if (ok) {
      /* version 2.0 needed, no flags, deflate, no time (1980-01-01), the sizes, the name */
      put_le(&local, SIG_LOCAL, 4);
      put_le(&local, 20, 2), put_le(&local, 0, 2), put_le(&local, 8, 2);
      put_le(&local, 0, 2), put_le(&local, 0x21, 2);
      put_le(&local, crc, 4), put_le(&local, packed.len, 4), put_le(&local, npy.len, 4);
      put_le(&local, mlen, 2), put_le(&local, 0, 2);
      buf_putn(&local, member, mlen);
      put_le(&central, SIG_CENTRAL, 4);
      put_le(&central, 20, 2);                 /* made by: version 2.0, MS-DOS attributes */
      buf_putn(&central, local.s + 4, 26);     /* the local header's fields, from "needed" */
      put_le(&central, 0, 2), put_le(&central, 0, 2), put_le(&central, 0, 2);  /* comment, disk, internal */
      put_le(&central, 0, 4), put_le(&central, at, 4);
      buf_putn(&central, member, mlen);
      ok = file_out_write(o, local.s, local.len, stop, why, sizeof why) &&
           file_out_write(o, packed.s ? packed.s : "", packed.len, stop, why, sizeof why);
      at += local.len + packed.len;
    }
    buf_free(&npy);
    buf_free(&packed);
    buf_free(&local);
  }
  if (ok) {
    Buf end = {0};
    put_le(&end, SIG_END, 4);
    put_le(&end, 0, 2), put_le(&end, 0, 2), put_le(&end, (uint64_t)n, 2), put_le(&end, (uint64_t)n, 2);
    put_le(&end, central.len, 4), put_le(&end, at, 4), put_le(&end, 0, 2);
    ok = file_out_write(o, central.s ? central.s : "", central.len, stop, why, sizeof why) &&
         file_out_write(o, end.s, end.len, stop, why, sizeof why);
    buf_free(&end);
  }
  buf_free(&central);
  if (ok) ok = file_out_commit(o, why, sizeof why);
  else file_out_abandon(o);
  if (!ok) put_err(err, errlen, "%s: %s", path, why);
  return ok;
}

#endif
