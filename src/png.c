/* png.c -- a tensor saved as a PNG picture: save(X, "x.png") for a convolution's feature
 * map or an attention matrix.  A 2-D tensor is a grey image (rows top to bottom), a 3-D one
 * of 3 or 4 channels last an RGB or RGBA image.  Values become 8-bit levels: a float image
 * whose values all lie in [0, 1] is written as is (0 black, 1 white), any other is scaled so
 * that its least value is black and its greatest white.  Debian's libpng encodes; the file
 * is written through file.c, so that a failed or interrupted save leaves the old file.
 */
#include "config.h"
#include "dyn_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_PNG
#include <png.h>
#endif

static bool fail(char *err, size_t errlen, const char *path, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(err, errlen, "%s: %s", path, msg);
  return false;
}

/* The shape check and the levels, separate from the encoder so that both builds say the
 * same about a tensor that is not an image. */
static bool image_shape(const Tensor *t, const char *path, int64_t *h, int64_t *w, int *ch, char *err, size_t errlen) {
  if (t->rank == 2) *ch = 1;
  else if (t->rank == 3 && (t->shape[2] == 3 || t->shape[2] == 4)) *ch = (int)t->shape[2];
  else
    return fail(err, errlen, path, "a PNG image is a 2-D tensor (grey) or a 3-D one with 3 or 4 channels last (RGB, RGBA), not a %d-D one%s",
                t->rank, t->rank == 3 ? " of that many channels" : "");
  *h = t->shape[0];
  *w = t->shape[1];
  if (*h == 0 || *w == 0) return fail(err, errlen, path, "an image needs at least one row and one column, not %lld x %lld", (long long)*h, (long long)*w);
  if (*h > 1000000 || *w > 1000000) return fail(err, errlen, path, "an image of %lld x %lld pixels is over the 1000000 a side PNG readers accept", (long long)*h, (long long)*w);
  return true;
}

#ifdef HAVE_PNG
typedef struct Sink { FileOut *o; volatile int *stop; char why[256]; bool failed; } Sink;

static void sink_write(png_structp png, png_bytep data, png_size_t n) {
  Sink *k = png_get_io_ptr(png);
  if (!k->failed && !file_out_write(k->o, data, n, k->stop, k->why, sizeof k->why)) k->failed = true;
}
static void sink_flush(png_structp png) { (void)png; }

static void png_warn(png_structp png, png_const_charp msg) { (void)png, (void)msg; }
static void png_err(png_structp png, png_const_charp msg) {
  Sink *k = png_get_io_ptr(png);
  if (k && !k->failed) snprintf(k->why, sizeof k->why, "%s", msg);
  png_longjmp(png, 1);
}

/* Encode into k's file; false on an error (k->why says it).  The only frame libpng's
 * longjmp leaves, so that nothing of png_save's is clobbered. */
static bool encode(Sink *k, const Tensor *t, int64_t h, int64_t w, int ch, double base, double scale) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, k, png_err, png_warn);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  png_bytep row = xmalloc((size_t)w * (size_t)ch);
  volatile bool ok = png && info;
  if (ok && setjmp(png_jmpbuf(png)) == 0) {
    png_set_write_fn(png, k, sink_write, sink_flush);
    int type = ch == 1 ? PNG_COLOR_TYPE_GRAY : ch == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA;
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int64_t y = 0; y < h && !k->failed; y++) {
      for (int64_t x = 0; x < w * ch; x++) {
        double v = tensor_get_f64(t, y * w * ch + x);
        double l = isfinite(v) ? (v - base) * scale : v > 0 ? 255 : 0;   /* NaN: black */
        row[x] = (png_byte)(l <= 0 ? 0 : l >= 255 ? 255 : lround(l));
      }
      png_write_row(png, row);
    }
    png_write_end(png, NULL);
  } else {
    ok = false;
  }
  png_destroy_write_struct(png ? &png : NULL, info ? &info : NULL);
  free(row);
  return ok && !k->failed;
}

bool png_save(const Tensor *t, const char *path, volatile int *stop, char *err, size_t errlen) {
  int64_t h = 0, w = 0;
  int ch = 1;
  if (!image_shape(t, path, &h, &w, &ch, err, errlen)) return false;
  /* the range of the values, for the scale */
  int64_t n = tensor_numel(t);
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double v = tensor_get_f64(t, i);
    if (isfinite(v)) lo = v < lo ? v : lo, hi = v > hi ? v : hi;
  }
  bool unit = elem_is_float(t->elem) && lo >= 0 && hi <= 1;
  if (t->elem == DYN_BOOL) lo = 0, hi = 1, unit = true;
  double scale = unit ? 255.0 : hi > lo ? 255.0 / (hi - lo) : 0, base = unit ? 0 : lo;
  Sink k = {.stop = stop};
  k.o = file_out_open(path, stop, k.why, sizeof k.why);
  if (!k.o) return fail(err, errlen, path, "%s", k.why);
  bool ok = encode(&k, t, h, w, ch, base, scale);
  if (ok) ok = file_out_commit(k.o, k.why, sizeof k.why);
  else file_out_abandon(k.o);
  if (!ok) return fail(err, errlen, path, "%s", k.why[0] ? k.why : "the PNG encoder failed");
  return true;
}
#else
bool png_save(const Tensor *t, const char *path, volatile int *stop, char *err, size_t errlen) {
  (void)stop;
  int64_t h = 0, w = 0;
  int ch = 1;
  if (!image_shape(t, path, &h, &w, &ch, err, errlen)) return false;
  return fail(err, errlen, path, "this dyn was built without libpng, which saving a PNG image needs");
}
#endif

bool png_path(const char *path) {
  size_t n = strlen(path);
  return n > 4 && (!strcmp(path + n - 4, ".png") || !strcmp(path + n - 4, ".PNG"));
}
