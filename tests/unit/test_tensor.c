/* test_tensor.c -- unit tests of tensor.c: the printed form (golden strings in NumPy's
 * layout with dyn's literal syntax), tensor_new's refusals of bad or impossible shapes, and
 * element access through strides, offsets and conversions.  tests/npy-numpy.sh checks the
 * same printer against NumPy itself on random data. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static Tensor *make(DynElem e, int rank, const int64_t *shape) {
  char err[256] = "";
  Tensor *t = tensor_new(e, rank, shape, err, sizeof err);
  ck_assert_msg(t != NULL, "tensor_new: %s", err);
  return t;
}

static Tensor *vec_f64(DynElem e, int n, const double *v) {
  int64_t shape[1] = {n};
  Tensor *t = make(e, 1, shape);
  for (int i = 0; i < n; i++) tensor_set_f64(t, i, v[i]);
  return t;
}

/* A tensor of the given shape holding 0, 1, 2, ... in C order. */
static Tensor *arange(DynElem e, int rank, const int64_t *shape) {
  Tensor *t = make(e, rank, shape);
  for (int64_t k = 0, n = tensor_numel(t); k < n; k++) tensor_set_i64(t, k, k);
  return t;
}

static void expect_format(Tensor *t, const char *want) {
  Buf b = {0};
  tensor_format(t, &b);
  ck_assert_str_eq(b.s, want);
  buf_free(&b);
  tensor_release(t);
}

static void expect_new_fails(DynElem e, int rank, const int64_t *shape, const char *want) {
  char err[256] = "";
  Tensor *t = tensor_new(e, rank, shape, err, sizeof err);
  ck_assert_ptr_null(t);
  ck_assert_str_eq(err, want);
}

/* ---- printing ---- */

START_TEST(format_scalars) {
  Tensor *t = make(DYN_F32, 0, NULL);
  tensor_set_f64(t, 0, 3.5);
  expect_format(t, "f32 3.5");
  t = make(DYN_I64, 0, NULL);
  tensor_set_i64(t, 0, -7);
  expect_format(t, "i64 -7");
  t = make(DYN_BOOL, 0, NULL);
  tensor_set_i64(t, 0, 1);
  expect_format(t, "bool true");
  t = make(DYN_F64, 0, NULL);
  tensor_set_f64(t, 0, NAN);
  expect_format(t, "f64 nan");
  t = make(DYN_F64, 0, NULL);
  tensor_set_f64(t, 0, -INFINITY);
  expect_format(t, "f64 -inf");
  t = make(DYN_F32, 0, NULL);
  tensor_set_f64(t, 0, 0.1); /* rounded to f32, still shown as 0.1 */
  expect_format(t, "f32 0.1");
}
END_TEST

START_TEST(format_vectors) {
  int64_t three[1] = {3};
  expect_format(arange(DYN_F32, 1, three), "f32[3]\n[0, 1, 2]");
  expect_format(arange(DYN_I32, 1, three), "i32[3]\n[0, 1, 2]");
  expect_format(arange(DYN_BOOL, 1, three), "bool[3]\n[false,  true,  true]");
  double mixed[] = {1, 2.5, -0.001234, 1.5e10};
  expect_format(vec_f64(DYN_F64, 4, mixed), "f64[4]\n[        1,       2.5, -0.001234,   1.5e+10]");
  double neg[] = {-1, 10, -100};
  expect_format(vec_f64(DYN_I64, 3, neg), "i64[3]\n[  -1,   10, -100]");
  double special[] = {INFINITY, -INFINITY, NAN, 0, -0.0};
  expect_format(vec_f64(DYN_F32, 5, special), "f32[5]\n[ inf, -inf,  nan,    0,   -0]");
  double small[] = {1.0 / 3, 1e-7, 123456789, 0.5};
  expect_format(vec_f64(DYN_F64, 4, small),
                "f64[4]\n[   0.333333,       1e-07, 1.23457e+08,         0.5]");
  double one[] = {42};
  expect_format(vec_f64(DYN_F32, 1, one), "f32[1]\n[42]");
}
END_TEST

START_TEST(format_matrices) {
  int64_t s22[2] = {2, 2};
  Tensor *t = make(DYN_F32, 2, s22);
  double v[] = {1, 2, 3, 4};
  for (int i = 0; i < 4; i++) tensor_set_f64(t, i, v[i]);
  expect_format(t, "f32[2, 2]\n[[1, 2],\n [3, 4]]");
  int64_t s23[2] = {2, 3};
  t = arange(DYN_I32, 2, s23);
  tensor_set_i64(t, 4, -1000);
  expect_format(t, "i32[2, 3]\n[[    0,     1,     2],\n [    3, -1000,     5]]");
  int64_t s13[2] = {1, 3};
  expect_format(arange(DYN_BOOL, 2, s13), "bool[1, 3]\n[[false,  true,  true]]");
}
END_TEST

START_TEST(format_3d_4d) {
  int64_t s[3] = {2, 2, 3};
  expect_format(arange(DYN_I64, 3, s), "i64[2, 2, 3]\n"
                                       "[[[ 0,  1,  2],\n"
                                       "  [ 3,  4,  5]],\n"
                                       "\n"
                                       " [[ 6,  7,  8],\n"
                                       "  [ 9, 10, 11]]]");
  /* Each axis above the third adds one more blank line between blocks, as NumPy does. */
  int64_t s4[4] = {2, 1, 1, 2};
  expect_format(arange(DYN_F64, 4, s4), "f64[2, 1, 1, 2]\n"
                                        "[[[[0, 1]]],\n"
                                        "\n"
                                        "\n"
                                        " [[[2, 3]]]]");
}
END_TEST

START_TEST(format_wraps_long_rows) {
  /* Rows wrap to stay within 75 columns, continuation lines under the first element. */
  int64_t n[1] = {30};
  expect_format(arange(DYN_I64, 1, n),
                "i64[30]\n"
                "[ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
                " 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]");
  int64_t m[2] = {2, 20};
  expect_format(arange(DYN_I64, 2, m),
                "i64[2, 20]\n"
                "[[ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
                "  18, 19],\n"
                " [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37,\n"
                "  38, 39]]");
}
END_TEST

START_TEST(format_summarised) {
  int64_t n[1] = {2000};
  Tensor *t = make(DYN_F32, 1, n);
  for (int i = 0; i < 2000; i++) tensor_set_f64(t, i, i / 10.0);
  expect_format(t, "f32[2000]\n[    0,   0.1,   0.2, ..., 199.7, 199.8, 199.9]");

  int64_t m[2] = {100, 100};
  expect_format(arange(DYN_I32, 2, m), "i32[100, 100]\n"
                                       "[[   0,    1,    2, ...,   97,   98,   99],\n"
                                       " [ 100,  101,  102, ...,  197,  198,  199],\n"
                                       " [ 200,  201,  202, ...,  297,  298,  299],\n"
                                       " ...,\n"
                                       " [9700, 9701, 9702, ..., 9797, 9798, 9799],\n"
                                       " [9800, 9801, 9802, ..., 9897, 9898, 9899],\n"
                                       " [9900, 9901, 9902, ..., 9997, 9998, 9999]]");

  /* Only long axes are cut; the short one is shown whole. */
  int64_t w[2] = {2, 600};
  expect_format(arange(DYN_I64, 2, w), "i64[2, 600]\n"
                                       "[[   0,    1,    2, ...,  597,  598,  599],\n"
                                       " [ 600,  601,  602, ..., 1197, 1198, 1199]]");

  int64_t c[3] = {11, 10, 10};
  Buf b = {0};
  t = arange(DYN_I64, 3, c);
  tensor_format(t, &b);
  /* A blank line on each side of the "..." between 2-D slices. */
  ck_assert_ptr_nonnull(strstr(b.s, "  [ 290,  291,  292, ...,  297,  298,  299]],\n"
                                    "\n"
                                    " ...,\n"
                                    "\n"
                                    " [[ 800,  801,  802, ...,  807,  808,  809],\n"));
  ck_assert_ptr_nonnull(strstr(b.s, "  [ 990,  991,  992, ...,  997,  998,  999]],\n"
                                    "\n"
                                    " [[1000, 1001, 1002, ..., 1007, 1008, 1009],\n"));
  buf_free(&b);
  tensor_release(t);
}
END_TEST

START_TEST(format_threshold) {
  /* 1000 elements are all shown (wrapped); 1001 are summarised. */
  Buf b = {0};
  int64_t n[1] = {1000};
  Tensor *t = arange(DYN_I32, 1, n);
  tensor_format(t, &b);
  ck_assert_ptr_null(strstr(b.s, "..."));
  ck_assert_ptr_nonnull(strstr(b.s, "999]"));
  for (char *p = b.s; (p = strchr(p, '\n')); p++) {
    char *q = strchr(p + 1, '\n');
    ck_assert_int_le(q ? q - p - 1 : (long)strlen(p + 1), 75);
  }
  buf_free(&b);
  tensor_release(t);
  n[0] = 1001;
  expect_format(arange(DYN_I32, 1, n), "i32[1001]\n[   0,    1,    2, ...,  998,  999, 1000]");
}
END_TEST

START_TEST(format_empty) {
  int64_t z[1] = {0};
  expect_format(make(DYN_F32, 1, z), "f32[0]\n[]");
  int64_t z2[2] = {2, 0};
  expect_format(make(DYN_I32, 2, z2), "i32[2, 0]\n[[], []]");
  int64_t z3[2] = {0, 3};
  expect_format(make(DYN_F64, 2, z3), "f64[0, 3]\n[]");
  int64_t z4[3] = {2, 3, 0};
  expect_format(make(DYN_BOOL, 3, z4), "bool[2, 3, 0]\n[[[], [], []], [[], [], []]]");
  int64_t z5[2] = {5000, 0};
  expect_format(make(DYN_F32, 2, z5), "f32[5000, 0]\n[[], [], [], ..., [], [], []]");
}
END_TEST

START_TEST(format_type_str) {
  int64_t s[2] = {100, 3072};
  Tensor *t = make(DYN_F32, 2, s);
  Buf b = {0};
  tensor_type_str(t, &b);
  ck_assert_str_eq(b.s, "f32[100, 3072]");
  buf_free(&b);
  tensor_release(t);
  t = make(DYN_BOOL, 0, NULL);
  tensor_type_str(t, &b);
  ck_assert_str_eq(b.s, "bool");
  buf_free(&b);
  tensor_release(t);
}
END_TEST

START_TEST(format_strided_view) {
  /* A transposed view prints in its own C order. */
  int64_t s[2] = {2, 3};
  Tensor *base = arange(DYN_I32, 2, s);
  int64_t ts[2] = {3, 2}, st[2] = {1, 3};
  Tensor *v = tensor_view(base, 2, ts, st, 0);
  tensor_release(base);
  expect_format(v, "i32[3, 2]\n[[0, 3],\n [1, 4],\n [2, 5]]");
}
END_TEST

/* ---- tensor_new ---- */

START_TEST(new_failures) {
  int64_t huge[3] = {1000000, 1000000, 1000};
  expect_new_fails(DYN_F32, 3, huge, "cannot allocate f32[1000000, 1000000, 1000] (4000000 GB)");
  int64_t neg[2] = {2, -1};
  expect_new_fails(DYN_F32, 2, neg, "negative dimension -1 in f32[2, -1]");
  int64_t over[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
  expect_new_fails(DYN_I64, 2, over, "cannot allocate i64[4294967296, 4294967296]: its number "
                                     "of elements does not fit in 64 bits");
  int64_t bytes[1] = {(int64_t)1 << 61};
  expect_new_fails(DYN_F64, 1, bytes, "cannot allocate f64[2305843009213693952]: its size in "
                                      "bytes does not fit in 64 bits");
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_new_fails(DYN_F32, 9, nine, "rank 9 is out of range (dyn tensors have rank 0 to 8)");
  /* A zero dim makes any other dim harmless. */
  int64_t zero[2] = {(int64_t)1 << 62, 0};
  Tensor *t = make(DYN_F64, 2, zero);
  ck_assert_int_eq(tensor_numel(t), 0);
  tensor_release(t);
}
END_TEST

START_TEST(new_aligned_zeroed) {
  int64_t sizes[] = {0, 1, 3, 1000, (1 << 20) / 4 + 5};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    Tensor *t = make(DYN_F32, 1, &sizes[i]);
    ck_assert_ptr_nonnull(t->buf->data);
    ck_assert_int_eq((uintptr_t)tensor_data(t) % 64, 0);
    ck_assert_int_eq(t->buf->bytes, sizes[i] * 4);
    for (int64_t k = 0; k < sizes[i]; k += 997) ck_assert(tensor_get_f64(t, k) == 0);
    tensor_release(t);
  }
  int64_t s[3] = {2, 3, 4};
  Tensor *t = make(DYN_I32, 3, s);
  ck_assert_int_eq(t->strides[0], 12);
  ck_assert_int_eq(t->strides[1], 4);
  ck_assert_int_eq(t->strides[2], 1);
  ck_assert(tensor_contiguous(t));
  ck_assert_int_eq(tensor_numel(t), 24);
  tensor_release(t);
}
END_TEST

/* Every buffer is followed by at least 64 readable bytes, so that a vector loaded from its
 * last element with the rest masked off stays in mapped memory (AVX2's vmaskmovps may fault
 * on masked-off elements).  Sizes that end a small block's rounding or a mapping's page
 * exactly: reading past them faulted when a large buffer ended on a page boundary. */
START_TEST(new_readable_tail) {
  int64_t sizes[] = {0, 1, 16, 1000, 1024, (1 << 20) / 4, (1 << 20) / 4 + 1024, 2048 * 513};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    for (int rep = 0; rep < 2; rep++) {        /* the second gets a reused large buffer */
      Tensor *t = make(DYN_F32, 1, &sizes[i]);
      volatile const unsigned char *tail = (const unsigned char *)tensor_data(t) + sizes[i] * 4;
      unsigned sum = 0;
      for (int k = 0; k < 64; k++) sum += tail[k];
      (void)sum;
      tensor_release(t);
    }
  }
}
END_TEST

/* ---- access ---- */

START_TEST(access_strides_and_offset) {
  int64_t s[2] = {3, 4};
  Tensor *base = arange(DYN_F32, 2, s);
  /* Transpose: [4, 3] with strides [1, 4]. */
  int64_t ts[2] = {4, 3}, tst[2] = {1, 4};
  Tensor *tr = tensor_view(base, 2, ts, tst, 0);
  ck_assert(!tensor_contiguous(tr));
  ck_assert(tensor_get_f64(tr, 1) == 4);   /* tr[0][1] = base[1][0] */
  ck_assert(tensor_get_f64(tr, 3) == 1);   /* tr[1][0] = base[0][1] */
  tensor_set_f64(tr, 5, -2.5);             /* tr[1][2] = base[2][1] */
  ck_assert(tensor_get_f64(base, 9) == -2.5);
  /* Row 1 as a vector: offset 4, contiguous, and data points at its first element. */
  int64_t rs[1] = {4}, rst[1] = {1};
  Tensor *row = tensor_view(base, 1, rs, rst, 4);
  ck_assert(tensor_contiguous(row));
  ck_assert(*(float *)tensor_data(row) == 4);
  ck_assert_int_eq(tensor_get_i64(row, 3), 7);
  /* Column 2 with a unit dim whose stride is arbitrary: still the same elements. */
  int64_t cs[2] = {3, 1}, cst[2] = {4, 999};
  Tensor *col = tensor_view(base, 2, cs, cst, 2);
  ck_assert(!tensor_contiguous(col));
  ck_assert_int_eq(tensor_get_i64(col, 2), 10);
  int64_t us[2] = {1, 4}, ust[2] = {12345, 1};
  Tensor *one = tensor_view(base, 2, us, ust, 8);
  ck_assert(tensor_contiguous(one));
  ck_assert_int_eq(tensor_get_i64(one, 0), 8);
  /* The views keep the buffer alive after the base is gone. */
  ck_assert_int_eq(base->buf->refs, 5);
  tensor_release(base);
  ck_assert_int_eq(tensor_get_i64(row, 0), 4);
  tensor_release(tr);
  tensor_release(row);
  tensor_release(col);
  ck_assert_ptr_eq(tensor_retain(one), one);
  tensor_release(one);
  tensor_release(one);
  tensor_release(NULL);
}
END_TEST

/* f16 and bf16 (half.c): every finite pattern widens and narrows back to itself, ties round
 * to even (also in the subnormals), overflow gives infinity; printing is the shortest text
 * that reads back as the same value. */
START_TEST(access_half) {
  for (unsigned h = 0; h < 0x10000; h++) {
    double f = half_f16_to((uint16_t)h), b = half_bf16_to((uint16_t)h);
    if (!isnan(f)) ck_assert_msg(half_f16_from(f) == h, "f16 %04x", h);
    else ck_assert(isnan(half_f16_to(half_f16_from(f))));
    if (!isnan(b)) ck_assert_msg(half_bf16_from(b) == h, "bf16 %04x", h);
    else ck_assert(isnan(half_bf16_to(half_bf16_from(b))));
  }
  ck_assert_int_eq(half_f16_from(1 + 0x1p-11), 0x3C00);          /* a tie, to even */
  ck_assert_int_eq(half_f16_from(1 + 3 * 0x1p-11), 0x3C02);
  ck_assert_int_eq(half_f16_from(1 + 0x1p-11 + 0x1p-40), 0x3C01); /* not a tie: one rounding from f64 */
  ck_assert_int_eq(half_f16_from(65519.99), 0x7BFF);
  ck_assert_int_eq(half_f16_from(65520), 0x7C00);
  ck_assert_int_eq(half_f16_from(-1e10), 0xFC00);
  ck_assert_int_eq(half_f16_from(0x1p-25), 0x0000);                /* half the least subnormal */
  ck_assert_int_eq(half_f16_from(3 * 0x1p-25), 0x0002);
  ck_assert_int_eq(half_f16_from(0x1p-14 - 0x1p-26), 0x0400);      /* up to the least normal */
  ck_assert_int_eq(half_f16_from(-0.0), 0x8000);
  ck_assert_int_eq(half_bf16_from(1 + 0x1p-8), 0x3F80);
  ck_assert_int_eq(half_bf16_from(1 + 3 * 0x1p-8), 0x3F82);
  ck_assert_int_eq(half_bf16_from(3.4e38), 0x7F80);
  ck_assert_int_eq(half_bf16_from(0x1p-134), 0x0000);
  ck_assert_int_eq(half_bf16_from(0x1p-133), 0x0001);
  ck_assert(half_round(DYN_F16, 0.1) == 0.0999755859375);
  int64_t s[1] = {4};
  Tensor *t = make(DYN_F16, 1, s);
  tensor_set_f64(t, 0, 0.1);
  tensor_set_f64(t, 1, 65504);
  tensor_set_f64(t, 2, 1e5);
  tensor_set_i64(t, 3, -3);
  expect_format(t, "f16[4]\n[  0.1, 65500,   inf,    -3]");
  tensor_release(t);
  Tensor *b = make(DYN_BF16, 1, s);
  tensor_set_f64(b, 0, 3.14159);
  tensor_set_f64(b, 1, 257);
  tensor_set_f64(b, 2, 1e-3);
  tensor_set_f64(b, 3, NAN);
  expect_format(b, "bf16[4]\n[ 3.14,   256, 0.001,   nan]");
  tensor_release(b);
}
END_TEST

START_TEST(access_conversions) {
  int64_t s[1] = {8};
  Tensor *i = make(DYN_I32, 1, s);
  tensor_set_f64(i, 0, 2.7);
  tensor_set_f64(i, 1, -2.7);
  tensor_set_f64(i, 2, NAN);
  tensor_set_f64(i, 3, 1e20);
  tensor_set_f64(i, 4, -1e20);
  tensor_set_i64(i, 5, ((int64_t)1 << 32) + 5); /* wraps like NumPy's astype */
  ck_assert_int_eq(tensor_get_i64(i, 0), 2);
  ck_assert_int_eq(tensor_get_i64(i, 1), -2);
  ck_assert_int_eq(tensor_get_i64(i, 2), 0);
  ck_assert_int_eq(tensor_get_i64(i, 3), INT32_MAX);
  ck_assert_int_eq(tensor_get_i64(i, 4), INT32_MIN);
  ck_assert_int_eq(tensor_get_i64(i, 5), 5);
  ck_assert(tensor_get_f64(i, 1) == -2);
  tensor_release(i);

  Tensor *f = make(DYN_F32, 1, s);
  tensor_set_f64(f, 0, 0.1);
  ck_assert(tensor_get_f64(f, 0) == (double)0.1f);
  tensor_set_i64(f, 1, 16777217); /* not representable in f32 */
  ck_assert(tensor_get_f64(f, 1) == 16777216);
  tensor_set_f64(f, 2, -3.9);
  ck_assert_int_eq(tensor_get_i64(f, 2), -3);
  tensor_set_f64(f, 3, INFINITY);
  ck_assert_int_eq(tensor_get_i64(f, 3), INT64_MAX);
  tensor_release(f);

  Tensor *l = make(DYN_I64, 1, s);
  tensor_set_i64(l, 0, INT64_MIN);
  ck_assert(tensor_get_i64(l, 0) == INT64_MIN);
  tensor_set_f64(l, 1, 1e300);
  ck_assert(tensor_get_i64(l, 1) == INT64_MAX);
  tensor_release(l);

  Tensor *b = make(DYN_BOOL, 1, s);
  tensor_set_i64(b, 0, 5);
  tensor_set_f64(b, 1, 0.0);
  tensor_set_f64(b, 2, -0.5);
  ck_assert_int_eq(tensor_get_i64(b, 0), 1);
  ck_assert_int_eq(tensor_get_i64(b, 1), 0);
  ck_assert(tensor_get_f64(b, 2) == 1);
  ck_assert_int_eq(((uint8_t *)tensor_data(b))[0], 1);
  tensor_release(b);

  Tensor *d = make(DYN_F64, 1, s);
  tensor_set_f64(d, 0, 0.1);
  ck_assert(tensor_get_f64(d, 0) == 0.1);
  tensor_release(d);
}
END_TEST

static Suite *tensor_suite(void) {
  Suite *s = suite_create("tensor");
  TCase *tc = tcase_create("format");
  tcase_add_test(tc, format_scalars);
  tcase_add_test(tc, format_vectors);
  tcase_add_test(tc, format_matrices);
  tcase_add_test(tc, format_3d_4d);
  tcase_add_test(tc, format_wraps_long_rows);
  tcase_add_test(tc, format_summarised);
  tcase_add_test(tc, format_threshold);
  tcase_add_test(tc, format_empty);
  tcase_add_test(tc, format_type_str);
  tcase_add_test(tc, format_strided_view);
  suite_add_tcase(s, tc);
  tc = tcase_create("new");
  tcase_add_test(tc, new_failures);
  tcase_add_test(tc, new_aligned_zeroed);
  tcase_add_test(tc, new_readable_tail);
  suite_add_tcase(s, tc);
  tc = tcase_create("access");
  tcase_add_test(tc, access_strides_and_offset);
  tcase_add_test(tc, access_conversions);
  tcase_add_test(tc, access_half);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(tensor_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
