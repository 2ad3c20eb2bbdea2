/* test_npy.c -- unit tests of npy.c: every element type and ranks 0..4 through a file and
 * back, hand-built headers in the forms NumPy and other writers produce (versions 1.0-3.0,
 * Fortran order, any key order and spacing), corrupt and hostile inputs with the exact
 * message each must give, and file-system errors.  tests/npy-numpy.sh checks interchange
 * with NumPy itself. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/dyn-test-npy.XXXXXX", base && *base ? base : P_tmpdir);
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  Buf cmd = {0};
  buf_printf(&cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd.s), 0);
  buf_free(&cmd);
}

static char *tmp_path(const char *name) {
  static char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return p;
}

/* A file image: magic, version, header length (2 bytes for 1.0, else 4), the header text as
 * given (so tests control padding), then `dlen` data bytes. */
static Buf image(int major, const char *header, const void *data, size_t dlen) {
  Buf b = {0};
  size_t h = strlen(header);
  buf_putn(&b, "\x93NUMPY", 6);
  buf_putc(&b, (char)major);
  buf_putc(&b, 0);
  buf_putc(&b, (char)(h & 0xff));
  buf_putc(&b, (char)(h >> 8 & 0xff));
  if (major != 1) {
    buf_putc(&b, (char)(h >> 16 & 0xff));
    buf_putc(&b, (char)(h >> 24 & 0xff));
  }
  buf_puts(&b, header);
  if (dlen) buf_putn(&b, data, dlen);
  return b;
}

static Tensor *parse(Buf *b, char *err, size_t errlen) {
  Tensor *t = npy_parse(b->s, b->len, "x.npy", err, errlen);
  buf_free(b);
  return t;
}

static void expect_parse_error(Buf b, const char *want) {
  char err[512] = "";
  Tensor *t = parse(&b, err, sizeof err);
  ck_assert_msg(t == NULL, "parsed, but expected \"%s\"", want);
  ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
  ck_assert_msg(!strncmp(err, "x.npy: ", 7), "error \"%s\" does not name the file", err);
}

static void expect_format(const Tensor *t, const char *want) {
  Buf b = {0};
  tensor_format(t, &b);
  ck_assert_str_eq(b.s, want);
  buf_free(&b);
}

/* b parses, and prints as want */
static void expect_loads(Buf b, const char *want) {
  char err[512] = "";
  Tensor *t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, want);
  tensor_release(t);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

/* ---- round trips ---- */

START_TEST(round_trip_all_types_and_ranks) {
  make_tmpdir();
  const int64_t dims[4] = {2, 3, 4, 5};
  for (int e = 0; e < DYN_NELEM; e++) {
    for (int rank = 0; rank <= 4; rank++) {
      char err[512] = "";
      Tensor *t = tensor_new((DynElem)e, rank, dims, err, sizeof err);
      ck_assert_msg(t != NULL, "%s", err);
      int64_t n = tensor_numel(t);
      for (int64_t k = 0; k < n; k++) {
        if (elem_is_float((DynElem)e))
          tensor_set_f64(t, k, (k - 7) * 0.37 + (k == 3 ? 1e30 : 0));
        else if (elem_is_int((DynElem)e))
          tensor_set_i64(t, k, (k - 50) * (e == DYN_I64 ? 123456789012LL : 12345));
        else
          tensor_set_i64(t, k, k % 3 == 0);
      }
      char *path = tmp_path("rt.npy");
      ck_assert_msg(npy_save(t, path, NULL, err, sizeof err), "%s", err);
      Tensor *u = npy_load(path, NULL, err, sizeof err);
      ck_assert_msg(u != NULL, "%s", err);
      ck_assert_int_eq(u->rank, rank);
      for (int i = 0; i < rank; i++) ck_assert_int_eq(u->shape[i], dims[i]);
      ck_assert(tensor_contiguous(u));
      if (e == DYN_BF16) {
        /* NumPy has no bfloat16: saved as f4, every value exactly */
        ck_assert_int_eq(u->elem, DYN_F32);
        for (int64_t k = 0; k < n; k++) ck_assert(tensor_get_f64(u, k) == tensor_get_f64(t, k));
      } else {
        ck_assert_int_eq(u->elem, e);
        ck_assert(!memcmp(tensor_data(t), tensor_data(u), (size_t)(n * elem_size(t->elem))));
      }
      tensor_release(t);
      tensor_release(u);
    }
  }
  remove_tmpdir();
}
END_TEST

START_TEST(round_trip_special_values_and_views) {
  make_tmpdir();
  char err[512] = "";
  int64_t s[1] = {5};
  Tensor *t = tensor_new(DYN_F64, 1, s, err, sizeof err);
  double v[] = {NAN, INFINITY, -INFINITY, -0.0, 4.9e-324};
  for (int i = 0; i < 5; i++) tensor_set_f64(t, i, v[i]);
  char *path = tmp_path("special.npy");
  ck_assert(npy_save(t, path, NULL, err, sizeof err));
  Tensor *u = npy_load(path, NULL, err, sizeof err);
  ck_assert_ptr_nonnull(u);
  ck_assert(!memcmp(tensor_data(t), tensor_data(u), sizeof v));
  tensor_release(t);
  tensor_release(u);

  /* A transposed view is written in its own C order. */
  int64_t s23[2] = {2, 3};
  Tensor *base = tensor_new(DYN_I32, 2, s23, err, sizeof err);
  for (int k = 0; k < 6; k++) tensor_set_i64(base, k, k);
  int64_t ts[2] = {3, 2}, st[2] = {1, 3};
  Tensor *tr = tensor_view(base, 2, ts, st, 0);
  path = tmp_path("view.npy");
  ck_assert(npy_save(tr, path, NULL, err, sizeof err));
  u = npy_load(path, NULL, err, sizeof err);
  ck_assert_ptr_nonnull(u);
  expect_format(u, "i32[3, 2]\n[[0, 3],\n [1, 4],\n [2, 5]]");
  tensor_release(u);
  tensor_release(tr);
  tensor_release(base);

  /* Empty tensors and scalars. */
  int64_t z[2] = {3, 0};
  t = tensor_new(DYN_BOOL, 2, z, err, sizeof err);
  path = tmp_path("empty.npy");
  ck_assert(npy_save(t, path, NULL, err, sizeof err));
  u = npy_load(path, NULL, err, sizeof err);
  ck_assert_ptr_nonnull(u);
  expect_format(u, "bool[3, 0]\n[[], [], []]");
  tensor_release(t);
  tensor_release(u);
  remove_tmpdir();
}
END_TEST

START_TEST(saved_header_is_numpys) {
  make_tmpdir();
  char err[512] = "";
  int64_t s[1] = {3};
  Tensor *t = tensor_new(DYN_F32, 1, s, err, sizeof err);
  char *path = tmp_path("h.npy");
  ck_assert(npy_save(t, path, NULL, err, sizeof err));
  tensor_release(t);
  unsigned char buf[256];
  FILE *f = fopen(path, "rb");
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  /* 128 bytes of preamble and header, the same bytes NumPy writes, then 12 of data. */
  ck_assert_int_eq(n, 128 + 12);
  static const char front[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': "
                              "False, 'shape': (3,), }   ";
  ck_assert(!memcmp(buf, front, sizeof front - 1));
  ck_assert_int_eq(buf[127], '\n');
  ck_assert_int_eq(buf[126], ' ');

  const char *want[] = {"'shape': (), }", "'shape': (2, 3), }", "'descr': '|b1'",
                        "'descr': '<i8'"};
  DynElem el[] = {DYN_F64, DYN_I32, DYN_BOOL, DYN_I64};
  int rank[] = {0, 2, 0, 0};
  int64_t s23[2] = {2, 3};
  for (int i = 0; i < 4; i++) {
    t = tensor_new(el[i], rank[i], s23, err, sizeof err);
    ck_assert(npy_save(t, path, NULL, err, sizeof err));
    tensor_release(t);
    f = fopen(path, "rb");
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    ck_assert_msg(strstr((char *)buf + 10, want[i]), "header lacks %s", want[i]);
  }
  remove_tmpdir();
}
END_TEST

/* ---- hand-built headers ---- */

START_TEST(parse_versions) {
  float d[6] = {0, 1, 2, 3, 4, 5};
  char err[512] = "";
  const char *h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n";
  for (int major = 1; major <= 3; major++) {
    Buf b = image(major, h, d, sizeof d);
    Tensor *t = parse(&b, err, sizeof err);
    ck_assert_msg(t != NULL, "version %d: %s", major, err);
    expect_format(t, "f32[2, 3]\n[[0, 1, 2],\n [3, 4, 5]]");
    tensor_release(t);
  }
  /* A v2 header longer than 64 KiB (the reason v2 exists). */
  Buf big = {0};
  buf_puts(&big, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }");
  while (big.len < 70000) buf_putc(&big, ' ');
  buf_putc(&big, '\n');
  Buf b = image(2, big.s, d, sizeof d);
  buf_free(&big);
  Tensor *t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  ck_assert_int_eq(tensor_numel(t), 6);
  tensor_release(t);
}
END_TEST

START_TEST(parse_fortran_order) {
  char err[512] = "";
  /* F order: element (i, j) of a 2x3 at i + 2*j. */
  int32_t d[6] = {0, 3, 1, 4, 2, 5};
  Buf b = image(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }\n", d, sizeof d);
  Tensor *t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "i32[2, 3]\n[[0, 1, 2],\n [3, 4, 5]]");
  tensor_release(t);
  /* 3-D: (2, 3, 4) in F order: (i, j, k) at i + 2*j + 6*k. */
  int64_t d3[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) d3[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
  b = image(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3, 4), }\n", d3, sizeof d3);
  t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  for (int64_t f = 0; f < 24; f++)
    ck_assert_int_eq(tensor_get_i64(t, f), 100 * (f / 12) + 10 * (f / 4 % 3) + f % 4);
  tensor_release(t);
  /* Rank 1 and 0 in Fortran order are the same bytes as C order. */
  b = image(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (6,), }\n", d, sizeof d);
  t = parse(&b, err, sizeof err);
  ck_assert_int_eq(tensor_get_i64(t, 1), 3);
  tensor_release(t);
}
END_TEST

START_TEST(parse_header_forms) {
  char err[512] = "";
  double d[3] = {1.5, -2, 3};
  const char *forms[] = {
      "{'shape': (3,), 'fortran_order': False, 'descr': '<f8'}",
      "{ 'descr' :'<f8' ,'fortran_order':False,'shape':( 3 , ) , }  \n",
      "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (3,)}\n",
      "{'descr': '=f8', 'fortran_order': False, 'shape': (3L,), }\n",
      "{'fortran_order': False,\n 'descr': '<f8',\n 'shape': (3,)}\x20\x20\n",
      "{'descr': '<f8', 'fortran_order': 0, 'shape': (3,)}\n",
  };
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    Buf b = image(1, forms[i], d, sizeof d);
    Tensor *t = parse(&b, err, sizeof err);
    ck_assert_msg(t != NULL, "form %zu: %s", i, err);
    expect_format(t, "f64[3]\n[1.5,  -2,   3]");
    tensor_release(t);
  }
  /* Scalars: shape (). */
  int64_t x = -42;
  Buf b = image(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }\n", &x, sizeof x);
  Tensor *t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "i64 -42");
  tensor_release(t);
  /* Bools: '|b1'; any non-zero byte reads as true. */
  unsigned char bits[4] = {0, 1, 7, 0};
  b = image(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }\n", bits, 4);
  t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "bool[2, 2]\n[[false,  true],\n [ true, false]]");
  ck_assert_int_eq(((unsigned char *)tensor_data(t))[2], 1);
  tensor_release(t);
  /* Extra bytes after the data are ignored, as NumPy does. */
  double d4[4] = {1, 2, 3, 99};
  b = image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", d4, sizeof d4);
  t = parse(&b, err, sizeof err);
  ck_assert_int_eq(tensor_numel(t), 3);
  tensor_release(t);
  /* An empty array needs no data at all, even with a huge other dim. */
  b = image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 0), }\n",
            NULL, 0);
  t = parse(&b, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  ck_assert_int_eq(tensor_numel(t), 0);
  tensor_release(t);
}
END_TEST

/* ---- corrupt input ---- */

/* Every NumPy integer width and both byte orders become the dyn type that holds the values:
 * sign extension for i1 and i2, unsigned values kept (u1 255 is 255, not -1), u4 in i64, u8
 * in i64 when it fits; big-endian floats swapped. */
START_TEST(parse_widths_and_byte_orders) {
  char err[512] = "";
  signed char i1[3] = {-128, -1, 127};
  expect_loads(image(1, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,)}", i1, 3),
               "i32[3]\n[-128,   -1,  127]");
  unsigned char u1[3] = {0, 128, 255};
  expect_loads(image(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,)}", u1, 3),
               "i32[3]\n[  0, 128, 255]");
  unsigned char i2be[4] = {0x80, 0x00, 0x01, 0x2c};           /* -32768, 300 */
  expect_loads(image(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,)}", i2be, 4),
               "i32[2]\n[-32768,    300]");
  uint16_t u2[2] = {65535, 7};
  expect_loads(image(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,)}", u2, 4),
               "i32[2]\n[65535,     7]");
  unsigned char u4be[4] = {0xff, 0xff, 0xff, 0xff};
  expect_loads(image(1, "{'descr': '>u4', 'fortran_order': False, 'shape': ()}", u4be, 4),
               "i64 4294967295");
  uint64_t u8[2] = {(uint64_t)INT64_MAX, 0};
  expect_loads(image(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2,)}", u8, 16),
               "i64[2]\n[9223372036854775807,                   0]");
  u8[1] = (uint64_t)INT64_MAX + 1;
  Buf b = image(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2,)}", u8, 16);
  ck_assert_ptr_null(parse(&b, err, sizeof err));
  ck_assert_str_eq(err, "x.npy: the u64 value 9223372036854775808 at [1] is above the i64 range, "
                        "the widest integer dyn has: the array cannot be loaded without changing it");
  unsigned char f8be[8] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0};    /* 1.5 */
  expect_loads(image(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,)}", f8be, 8),
               "f64[1]\n[1.5]");
  /* a truncated file of a narrow type: the size is the file's, not dyn's */
  expect_parse_error(image(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,)}", u2, 4),
                     "x.npy: data is truncated: expected 6 bytes, found 4");
}
END_TEST

START_TEST(corrupt_inputs) {
  float d[4] = {0};
  Buf b = {0};
  buf_putn(&b, "", 0);
  expect_parse_error(b, "x.npy: not a .npy file (bad magic)");
  b = (Buf){0};
  buf_puts(&b, "PK\x03\x04 this is a zip");
  expect_parse_error(b, "x.npy: not a .npy file (bad magic)");
  b = (Buf){0};
  buf_putn(&b, "\x93NUMPY\x01", 7);
  expect_parse_error(b, "x.npy: truncated header: the file ends in the format version");
  b = (Buf){0};
  buf_putn(&b, "\x93NUMPY\x01\x00\x50", 9);
  expect_parse_error(b, "x.npy: truncated header: the file ends in the header length");
  b = (Buf){0};
  buf_putn(&b, "\x93NUMPY\x04\x00\x10\x00", 10);
  expect_parse_error(b, "x.npy: unsupported .npy format version 4.0");
  b = (Buf){0};
  buf_putn(&b, "\x93NUMPY\x01\x00\xc8\x00{'descr': '<f4'", 25);
  expect_parse_error(b, "x.npy: truncated header: expected 200 header bytes, found 15");
  expect_parse_error(image(1, "hello", d, 4), "x.npy: bad header: expected '{' at 'hello'");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False}\n", d, 4),
                     "x.npy: bad header: no 'shape' key");
  expect_parse_error(image(1, "{'descr': '<f4', 'foo': 1, 'shape': (1,)}", d, 4),
                     "x.npy: bad header: unexpected key 'foo'");
  expect_parse_error(image(1, "{'descr': '<f4', 'descr': '<f4', 'shape': (1,)}", d, 4),
                     "x.npy: bad header: key 'descr' appears twice");
  expect_parse_error(image(1, "{'descr': '<u3', 'fortran_order': False, 'shape': (1,)}", d, 4),
                     "x.npy: unsupported dtype '<u3'");
  expect_parse_error(image(1, "{'descr': '|i2', 'fortran_order': False, 'shape': (1,)}", d, 4),
                     "x.npy: unsupported dtype '|i2'");
  expect_parse_error(image(1, "{'descr': '|f2', 'fortran_order': False, 'shape': (2,)}", d, 4),
                     "x.npy: unsupported dtype '|f2'");
  expect_parse_error(image(1, "{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", d, 4),
                     "x.npy: unsupported dtype '|f4'");
  expect_parse_error(image(1, "{'descr': '<U10', 'fortran_order': False, 'shape': (1,)}", d, 4),
                     "x.npy: unsupported dtype '<U10'");
  expect_parse_error(image(1, "{'descr': [('a', '<f4')], 'fortran_order': False}", d, 4),
                     "x.npy: unsupported dtype: structured arrays");
  expect_parse_error(image(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", d, 4),
                     "x.npy: bad header: expected ',' or '}' at ''fortran_ord'");
  expect_parse_error(image(1, "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", d, 4),
                     "x.npy: unsupported dtype '<f4, '");
  expect_parse_error(image(1, "{'descr': '<f4", d, 4),
                     "x.npy: bad header: expected a closing quote at the end of the header");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}", d, 4),
                     "x.npy: bad header: expected True or False for 'fortran_order'");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", d, 4),
                     "x.npy: bad header: expected a non-negative integer in 'shape' at '-1,)}'");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", d, 4),
                     "x.npy: bad header: expected a tuple for 'shape' at '[1]}'");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", d, 4),
                     "x.npy: bad header: expected ',' or ')' in 'shape'");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", d, 4),
                     "x.npy: bad header: expected only padding after the dictionary at 'x'");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,", d, 4),
                     "x.npy: bad header: expected a non-negative integer in 'shape' at the end");
  expect_parse_error(
      image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", d, 4),
      "x.npy: rank is more than 8, the most dyn supports");
  expect_parse_error(image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,)}", d, 12),
                     "x.npy: data is truncated: expected 4000 bytes, found 12");
  expect_parse_error(image(3, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2)}", d, 16),
                     "x.npy: data is truncated: expected 32 bytes, found 16");
}
END_TEST

START_TEST(huge_shapes) {
  float d[1] = {0};
  /* Big but representable: refused for want of data, before anything is allocated. */
  expect_parse_error(
      image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000)}", d,
            0),
      "x.npy: data is truncated: expected 4000000000000000 bytes, found 0");
  expect_parse_error(
      image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", d,
            4),
      "x.npy: shape is too large: (4294967296, 4294967296) overflows 64 bits");
  expect_parse_error(
      image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,)}", d, 4),
      "x.npy: shape is too large: (2305843009213693952,) overflows 64 bits");
  expect_parse_error(
      image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", d,
            4),
      "x.npy: shape is too large: a dimension does not fit in 64 bits");
  /* A v2 header length near 4 GiB with a tiny file. */
  Buf b = {0};
  buf_putn(&b, "\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
  expect_parse_error(b, "x.npy: truncated header: expected 4294967295 header bytes, found 1");
}
END_TEST

/* ---- files ---- */

START_TEST(file_errors) {
  make_tmpdir();
  char err[512] = "";
  char want[1024];
  char *path = tmp_path("missing.npy");
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: cannot open: %s", path, strerror(ENOENT));
  ck_assert_str_eq(err, want);

  ck_assert_ptr_null(npy_load(tmpdir, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: cannot open: %s", tmpdir, strerror(EISDIR));
  ck_assert_str_eq(err, want);

  int64_t s[1] = {4};
  Tensor *t = tensor_new(DYN_F32, 1, s, err, sizeof err);
  path = tmp_path("no/such/dir.npy");
  ck_assert(!npy_save(t, path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: cannot open for writing: %s", path, strerror(ENOENT));
  ck_assert_str_eq(err, want);
  if (access("/dev/full", W_OK) == 0) {
    ck_assert(!npy_save(t, "/dev/full", NULL, err, sizeof err));
    snprintf(want, sizeof want, "/dev/full: write error: %s", strerror(ENOSPC));
    ck_assert_str_eq(err, want);
  }

  /* A file cut short: the same messages from the file reader as from npy_parse. */
  path = tmp_path("cut.npy");
  ck_assert(npy_save(t, path, NULL, err, sizeof err));
  tensor_release(t);
  unsigned char buf[256];
  FILE *f = fopen(path, "rb");
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ck_assert_int_eq(n, 128 + 16);
  write_file(path, buf, 128 + 5);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: data is truncated: expected 16 bytes, found 5", path);
  ck_assert_str_eq(err, want);
  write_file(path, buf, 60);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: truncated header: expected 118 header bytes, found 50", path);
  ck_assert_str_eq(err, want);
  write_file(path, buf, 4);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: not a .npy file (bad magic)", path);
  ck_assert_str_eq(err, want);
  write_file(path, "", 0);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  ck_assert_str_eq(err, want);
  /* An endless device is refused after its first bytes, not read to the end. */
  if (access("/dev/zero", R_OK) == 0) {
    ck_assert_ptr_null(npy_load("/dev/zero", NULL, err, sizeof err));
    ck_assert_str_eq(err, "/dev/zero: not a .npy file (bad magic)");
  }
  remove_tmpdir();
}
END_TEST

START_TEST(file_fortran_and_versions) {
  /* The file reader reads data straight into the tensor, except for Fortran order. */
  make_tmpdir();
  char err[512] = "";
  int32_t d[6] = {0, 3, 1, 4, 2, 5};
  Buf b = image(2, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }\n", d, sizeof d);
  char *path = tmp_path("f.npy");
  write_file(path, b.s, b.len);
  buf_free(&b);
  Tensor *t = npy_load(path, NULL, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "i32[2, 3]\n[[0, 1, 2],\n [3, 4, 5]]");
  tensor_release(t);
  unsigned char bits[3] = {2, 0, 1};
  b = image(3, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n", bits, 3);
  write_file(path, b.s, b.len);
  buf_free(&b);
  t = npy_load(path, NULL, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "bool[3]\n[ true, false,  true]");
  ck_assert_int_eq(((unsigned char *)tensor_data(t))[0], 1);
  tensor_release(t);
  b = image(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }\n", d, 24);
  write_file(path, b.s, b.len);
  buf_free(&b);
  /* big-endian i8 in Fortran order, read from a file: swapped, then transposed */
  unsigned char be[48] = {0};
  int64_t vals[6] = {0, 3, -1, 4, 2, -5};
  for (int k = 0; k < 6; k++)
    for (int j = 0; j < 8; j++) be[k * 8 + j] = (unsigned char)((uint64_t)vals[k] >> (56 - 8 * j));
  b = image(1, "{'descr': '>i8', 'fortran_order': True, 'shape': (2, 3), }\n", be, sizeof be);
  write_file(path, b.s, b.len);
  buf_free(&b);
  t = npy_load(path, NULL, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "i64[2, 3]\n[[ 0, -1,  2],\n [ 3,  4, -5]]");
  tensor_release(t);
  /* a u8 value above the i64 range, from a file: refused, with the value and its place */
  uint64_t big[4] = {1, 2, 3, UINT64_MAX};
  b = image(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2, 2), }\n", big, sizeof big);
  write_file(path, b.s, b.len);
  buf_free(&b);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  char want[600];
  snprintf(want, sizeof want, "%s: the u64 value 18446744073709551615 at [1, 1] is above the i64 "
           "range, the widest integer dyn has: the array cannot be loaded without changing it", path);
  ck_assert_str_eq(err, want);
  remove_tmpdir();
}
END_TEST

START_TEST(file_through_pipe) {
  /* Something that is not a regular file (a FIFO, /dev/stdin) is read as far as it goes. */
  make_tmpdir();
  char err[512] = "";
  double d[2] = {1, 2};
  Buf b = image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", d, sizeof d);
  char *path = tmp_path("fifo");
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  pid_t pid = fork();
  if (pid == 0) {
    FILE *f = fopen(path, "wb");
    fwrite(b.s, 1, b.len, f);
    fclose(f);
    _exit(0);
  }
  Tensor *t = npy_load(path, NULL, err, sizeof err);
  ck_assert_msg(t != NULL, "%s", err);
  expect_format(t, "f64[2]\n[1, 2]");
  tensor_release(t);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  buf_free(&b);
  remove_tmpdir();
}
END_TEST

/* A child that writes n bytes of p into the FIFO at path and exits. */
static pid_t feed_fifo(const char *path, const void *p, size_t n) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(p, 1, n, f);
      fclose(f);
    }
    _exit(0);
  }
  return pid;
}

START_TEST(pipe_bounds) {
  /* From a pipe nothing says how much will come: a declared size beyond the machine's
   * memory, and a header length beyond any header, are refused before anything is read
   * or buffered. */
  make_tmpdir();
  char err[512] = "", want[1024];
  char *path = tmp_path("fifo");
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  Buf b = image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (281474976710656,), }\n",
                NULL, 0);
  pid_t pid = feed_fifo(path, b.s, b.len);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: the header declares 1125899.9 GB of data, more than this "
           "machine's memory (", path);
  ck_assert_msg(!strncmp(err, want, strlen(want)), "%s", err);
  int status;
  waitpid(pid, &status, 0);
  buf_free(&b);
  /* version 2.0, a header length of 2 MiB */
  pid = feed_fifo(path, "\x93NUMPY\x02\x00\x00\x00\x20\x00{", 13);
  ck_assert_ptr_null(npy_load(path, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: header is too long: 2097152 bytes (dyn reads headers of up "
           "to 1048576)", path);
  ck_assert_str_eq(err, want);
  waitpid(pid, &status, 0);
  remove_tmpdir();
}
END_TEST

/* The names in tmpdir, sorted, one per line. */
static void listing(Buf *out) {
  Buf cmd = {0};
  buf_printf(&cmd, "ls -A '%s'", tmpdir);
  FILE *p = popen(cmd.s, "r");
  char line[512];
  while (p && fgets(line, sizeof line, p)) buf_puts(out, line);
  if (p) pclose(p);
  buf_free(&cmd);
}

static Buf read_all(const char *path) {
  Buf b = {0};
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_putn(&b, chunk, n);
  fclose(f);
  return b;
}

START_TEST(save_replaces_whole) {
  /* A save that stops leaves the old file as it was and no temporary; one that succeeds
   * leaves the new file alone in the directory, with a new file's permissions, and writes
   * through a symbolic link to its target. */
  make_tmpdir();
  char err[512] = "", want[1024];
  int64_t s3[1] = {3}, s9[2] = {3, 3};
  Tensor *a = tensor_new(DYN_F32, 1, s3, err, sizeof err);
  Tensor *big = tensor_new(DYN_F64, 2, s9, err, sizeof err);
  for (int i = 0; i < 9; i++) tensor_set_f64(big, i, i + 0.5);
  char *path = tmp_path("x.npy");
  ck_assert_msg(npy_save(a, path, NULL, err, sizeof err), "%s", err);
  Buf old = read_all(path);

  volatile int stop = 1;
  ck_assert(!npy_save(big, path, &stop, err, sizeof err));
  snprintf(want, sizeof want, "%s: interrupted", path);
  ck_assert_str_eq(err, want);
  Buf now = read_all(path);
  ck_assert(now.len == old.len && !memcmp(now.s, old.s, old.len));
  buf_free(&now);
  Buf ls = {0};
  listing(&ls);
  ck_assert_str_eq(ls.s, "x.npy\n");
  buf_free(&ls);

  chmod(path, 0600);
  mode_t um = umask(027);
  ck_assert_msg(npy_save(big, path, NULL, err, sizeof err), "%s", err);
  umask(um);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0640);
  listing(&ls);
  ck_assert_str_eq(ls.s, "x.npy\n");
  buf_free(&ls);
  Tensor *u = npy_load(path, NULL, err, sizeof err);
  ck_assert_msg(u != NULL, "%s", err);
  expect_format(u, "f64[3, 3]\n[[0.5, 1.5, 2.5],\n [3.5, 4.5, 5.5],\n [6.5, 7.5, 8.5]]");
  tensor_release(u);

  char *link = xstrdup(tmp_path("link.npy"));
  ck_assert_int_eq(symlink("x.npy", link), 0);
  ck_assert_msg(npy_save(a, link, NULL, err, sizeof err), "%s", err);
  ck_assert_int_eq(lstat(link, &st), 0);
  ck_assert(S_ISLNK(st.st_mode));
  now = read_all(path);
  ck_assert(now.len == old.len && !memcmp(now.s, old.s, old.len));
  buf_free(&now);
  free(link);

  ck_assert(!npy_save(a, tmpdir, NULL, err, sizeof err));
  snprintf(want, sizeof want, "%s: cannot open for writing: %s", tmpdir, strerror(EISDIR));
  ck_assert_str_eq(err, want);
  if (access("/dev/null", W_OK) == 0) /* a device is written in place */
    ck_assert_msg(npy_save(a, "/dev/null", NULL, err, sizeof err), "%s", err);

  /* a load stops too */
  ck_assert_ptr_null(npy_load(path, &stop, err, sizeof err));
  snprintf(want, sizeof want, "%s: interrupted", path);
  ck_assert_str_eq(err, want);
  buf_free(&old);
  tensor_release(a);
  tensor_release(big);
  remove_tmpdir();
}
END_TEST

static Suite *npy_suite(void) {
  Suite *s = suite_create("npy");
  TCase *tc = tcase_create("round trip");
  tcase_add_test(tc, round_trip_all_types_and_ranks);
  tcase_add_test(tc, round_trip_special_values_and_views);
  tcase_add_test(tc, saved_header_is_numpys);
  suite_add_tcase(s, tc);
  tc = tcase_create("parse");
  tcase_add_test(tc, parse_versions);
  tcase_add_test(tc, parse_fortran_order);
  tcase_add_test(tc, parse_header_forms);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, corrupt_inputs);
  tcase_add_test(tc, parse_widths_and_byte_orders);
  tcase_add_test(tc, huge_shapes);
  tcase_add_test(tc, file_errors);
  tcase_add_test(tc, file_fortran_and_versions);
  tcase_add_test(tc, file_through_pipe);
  tcase_add_test(tc, pipe_bounds);
  tcase_add_test(tc, save_replaces_whole);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(npy_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
