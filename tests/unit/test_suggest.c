/* test_suggest.c -- unit tests for suggest.c: the edit distance, the threshold that grows
 * with the name's length, and that a suggestion is made only when one candidate is clearly
 * the nearest. */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <stdlib.h>

static const char *best_of(const char *name, const char **cands) {
  static Suggest sg;
  suggest_init(&sg, name);
  for (int i = 0; cands[i]; i++) suggest_add(&sg, cands[i]);
  return suggest_best(&sg);
}

START_TEST(test_distance) {
  ck_assert_int_eq(suggest_distance("", ""), 0);
  ck_assert_int_eq(suggest_distance("abc", ""), 3);
  ck_assert_int_eq(suggest_distance("matmul", "matmul"), 0);
  ck_assert_int_eq(suggest_distance("matmul", "matmu"), 1);       /* deletion */
  ck_assert_int_eq(suggest_distance("matmul", "matmull"), 1);     /* insertion */
  ck_assert_int_eq(suggest_distance("matmul", "matmal"), 1);      /* substitution */
  ck_assert_int_eq(suggest_distance("matmul", "mtamul"), 1);      /* a swap is one edit */
  ck_assert_int_eq(suggest_distance("softmax", "sfotmxa"), 2);
  ck_assert_int_eq(suggest_distance("kitten", "sitting"), 3);
}
END_TEST

START_TEST(test_threshold) {
  const char *c[] = {"softmax", "sigmoid", "sum", NULL};
  ck_assert_str_eq(best_of("sofmax", c), "softmax");
  ck_assert_str_eq(best_of("sfotmxa", c), "softmax");             /* two edits in 7 letters */
  ck_assert_ptr_null(best_of("sfotmxq", c));                       /* three is too many */
  const char *d[] = {"N", "M", "x", NULL};
  ck_assert_ptr_null(best_of("K", d));                             /* one letter: no guess */
  const char *e[] = {"ab", NULL};
  ck_assert_ptr_null(best_of("xy", e));                            /* nothing in common */
  ck_assert_str_eq(best_of("ba", e), "ab");
  const char *f[] = {"layernorm", NULL};
  ck_assert_str_eq(best_of("layrenrom", f), "layernorm");
}
END_TEST

START_TEST(test_only_clear_winner) {
  const char *c[] = {"Wq", "Wk", NULL};
  ck_assert_ptr_null(best_of("Wv", c));                            /* a tie */
  const char *d[] = {"Wq", "Wk", "W", NULL};
  ck_assert_str_eq(best_of("Wkk", d), "Wk");
  const char *e[] = {"relu", "relu", NULL};                        /* one name twice */
  ck_assert_str_eq(best_of("rleu", e), "relu");
  const char *f[] = {"exp", NULL};
  ck_assert_ptr_null(best_of("exp", f));                           /* itself is no suggestion */
}
END_TEST

static Suite *suggest_suite(void) {
  Suite *s = suite_create("suggest");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_distance);
  tcase_add_test(tc, test_threshold);
  tcase_add_test(tc, test_only_clear_winner);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suggest_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
