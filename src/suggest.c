/* suggest.c -- "did you mean NAME?": the nearest of a set of names to one that is unknown.
 *
 * Names are compared by Damerau-Levenshtein distance (insertion, deletion, substitution and
 * the swap of two neighbours each cost 1, the optimal-string-alignment form), and a name is
 * suggested only when it is near enough for its length and nearer than every other: a wrong
 * guess is worse than none, so a tie, or a one-letter name (any other is one edit away),
 * suggests nothing.  Used by the checker, the session and the REPL's commands. */
#include "config.h"
#include "dyn_int.h"

#include <string.h>

int suggest_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 64 || m > 64) return 1000;        /* far apart, and no name is that long by mistake */
  int d[65][65];
  for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
        c = d[i - 2][j - 2] + 1;
      d[i][j] = c;
    }
  return d[n][m];
}

void suggest_init(Suggest *sg, const char *name) {
  memset(sg, 0, sizeof *sg);
  sg->name = name;
  size_t n = strlen(name);
  /* one edit for up to 5 letters, two up to 8, three beyond: a third of the name */
  sg->limit = n < 2 ? 0 : n < 6 ? 1 : (int)(n / 3 < 3 ? n / 3 : 3);
  sg->best_d = sg->second_d = 1000;
}

void suggest_add(Suggest *sg, const char *cand) {
  if (!cand || !*cand || !strcmp(cand, sg->name)) return;
  if (sg->best && !strcmp(cand, sg->best)) return;      /* the same name from two tables */
  int d = suggest_distance(sg->name, cand);
  if (d > sg->limit || d >= (int)strlen(cand)) return;  /* nothing of it is kept */
  if (d < sg->best_d) {
    sg->second_d = sg->best_d;
    sg->best_d = d;
    sg->best = cand;
  } else if (d < sg->second_d) {
    sg->second_d = d;
  }
}

void suggest_add_cb(void *sg, const char *cand) { suggest_add(sg, cand); }

const char *suggest_best(const Suggest *sg) {
  return sg->best && sg->best_d < sg->second_d ? sg->best : NULL;
}
