/* test_hpack.c -- Check suite for gemm_hpack.c, the 16-bit engine's copies: every f16 and
 * bf16 pattern widened, and f32 values rounded (ties, overflow, subnormals, infinities,
 * NaNs, random bits), in unit stride (the vector and F16C loops) and in other strides (the
 * scalar ones), against the reference conversions of half.c; bf16 panels packed as pairs
 * along k from each layout (lines in unit stride, k in unit stride, neither) against a plain
 * loop, at widths and lengths around the vector steps and an odd k.
 */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng = 12345;
static uint32_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Widening is exact: each of the 65536 patterns, NaNs as NaNs. */
START_TEST(test_widen_all) {
  for (int bf = 0; bf < 2; bf++) {
    int64_t n = 65536;
    uint16_t *s = malloc((size_t)n * 3 * sizeof *s);
    float *unit = malloc((size_t)n * sizeof *unit), *strided = malloc((size_t)n * sizeof *strided);
    for (int64_t i = 0; i < n; i++) s[i] = (uint16_t)i, s[n + 2 * i] = (uint16_t)i;
    hpack_widen(bf, s, 1, unit, n);
    hpack_widen(bf, s + n, 2, strided, n);
    for (int64_t i = 0; i < n; i++) {
      double want = bf ? half_bf16_to((uint16_t)i) : half_f16_to((uint16_t)i);
      if (isnan(want)) {
        ck_assert_msg(isnan(unit[i]) && isnan(strided[i]), "%s %04llx: not a NaN", bf ? "bf16" : "f16",
                      (unsigned long long)i);
      } else {
        ck_assert_msg(unit[i] == want && strided[i] == want && !signbit(unit[i]) == !signbit(want) &&
                      !signbit(strided[i]) == !signbit(want),
                      "%s %04llx: %g and %g, want %g", bf ? "bf16" : "f16", (unsigned long long)i,
                      unit[i], strided[i], want);
      }
    }
    free(s), free(unit), free(strided);
  }
}
END_TEST

/* Rounding to nearest even, as half.c rounds (the f32 value is exact in double): values
 * halfway between neighbours, just above and below, the largest finite values and past
 * them, subnormals, zeros, infinities, NaNs, and random bit patterns; n not a multiple of
 * any vector step. */
START_TEST(test_narrow) {
  enum { N = 200003 };
  float *x = malloc(N * sizeof *x);
  uint16_t *unit = malloc(N * sizeof *unit), *strided = malloc(3 * N * sizeof *strided);
  const uint32_t special[] = { 0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                               0x7f800001u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu,
                               0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, 0x7f7fffffu,
                               0x33800000u, 0x33000000u, 0x33000001u, 0x38800000u, 0x387fc000u,
                               0x00000001u, 0x80400000u, 0x3f800000u, 0x3f801000u, 0x3f803000u };
  int ns = (int)(sizeof special / sizeof special[0]);
  for (int i = 0; i < N; i++) {
    uint32_t u = i < ns ? special[i] : next();
    if (i >= ns && i % 3 == 0) u = (u & 0x8fffffffu) | 0x30000000u;   /* f16's range */
    if (i >= ns && i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u;        /* bf16's ties */
    if (i >= ns && i % 11 == 0) u = (u & 0xffffe000u) | 0x1000u;       /* f16's ties */
    x[i] = bits_f(u);
  }
  for (int bf = 0; bf < 2; bf++) {
    hpack_narrow(bf, x, unit, 1, N);
    hpack_narrow(bf, x, strided, 3, N);
    for (int i = 0; i < N; i++) {
      uint16_t want = bf ? half_bf16_from((double)x[i]) : half_f16_from((double)x[i]);
      double w = bf ? half_bf16_to(want) : half_f16_to(want);
      uint16_t got[2] = { unit[i], strided[3 * i] };
      for (int v = 0; v < 2; v++) {
        double g = bf ? half_bf16_to(got[v]) : half_f16_to(got[v]);
        if (isnan(w))
          ck_assert_msg(isnan(g), "%s of %08x (%s): %04x, want a NaN", bf ? "bf16" : "f16",
                        (unsigned)(i < ns ? special[i] : 0), v ? "strided" : "unit", got[v]);
        else
          ck_assert_msg(got[v] == want, "%s of %.9g (%s): %04x, want %04x", bf ? "bf16" : "f16",
                        (double)x[i], v ? "strided" : "unit", got[v], want);
      }
    }
  }
  free(x), free(unit), free(strided);
}
END_TEST

/* A panel of w lines from line l0 of `lines` (ls apart, k stride sk) as kp pairs. */
static void pairs_ref(const uint16_t *s, int64_t ls, int64_t sk, int64_t l0, int64_t lines, int w,
                      int64_t kp, int64_t k, uint32_t *o) {
  for (int64_t p = 0; p < kp; p++)
    for (int l = 0; l < w; l++) {
      uint32_t v = 0;
      if (l0 + l < lines) {
        const uint16_t *e = s + (l0 + l) * ls;
        v = e[2 * p * sk];
        if (2 * p + 1 < k) v |= (uint32_t)e[(2 * p + 1) * sk] << 16;
      }
      o[p * w + l] = v;
    }
}

START_TEST(test_pairs) {
  const int64_t ks[] = { 1, 2, 7, 8, 9, 16, 17, 33 };
  const int64_t lines_[] = { 1, 3, 4, 5, 12, 13, 16, 17, 31, 32, 33, 47 };
  const int ws[] = { DP_MR, DP_NR };
  for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
    for (size_t li = 0; li < sizeof lines_ / sizeof lines_[0]; li++)
      for (int layout = 0; layout < 3; layout++) {
        int64_t k = ks[ki], lines = lines_[li], kp = (k + 1) / 2;
        /* 0: lines in unit stride (B row-major), 1: k in unit stride, 2: neither */
        int64_t ls = layout == 0 ? 1 : layout == 1 ? k + 3 : 2;
        int64_t sk = layout == 0 ? lines + 5 : layout == 1 ? 1 : 2 * lines + 1;
        size_t len = (size_t)((lines - 1) * ls + (k - 1) * sk + 1);
        uint16_t *s = malloc(len * sizeof *s);
        for (size_t i = 0; i < len; i++) s[i] = (uint16_t)next();
        for (int wi = 0; wi < 2; wi++)
          for (int64_t l0 = 0; l0 < lines; l0 += ws[wi]) {
            int w = ws[wi];
            uint32_t *got = malloc((size_t)(kp * w) * 4), *want = malloc((size_t)(kp * w) * 4);
            memset(got, 0xa5, (size_t)(kp * w) * 4);
            hpack_pairs(s, ls, sk, l0, lines, w, kp, k, got);
            pairs_ref(s, ls, sk, l0, lines, w, kp, k, want);
            for (int64_t i = 0; i < kp * w; i++)
              ck_assert_msg(got[i] == want[i], "k %lld, %lld lines from %lld, width %d, layout %d: "
                            "pair %lld line %lld is %08x, want %08x", (long long)k, (long long)lines,
                            (long long)l0, w, layout, (long long)(i / w), (long long)(i % w), got[i], want[i]);
            free(got), free(want);
          }
        free(s);
      }
}
END_TEST

int main(void) {
  Suite *s = suite_create("hpack");
  TCase *tc = tcase_create("hpack");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_widen_all);
  tcase_add_test(tc, test_narrow);
  tcase_add_test(tc, test_pairs);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
