/* fake_session.c -- a stand-in for the session (session.c and the files beside it), so that
 * repl.c can be driven through a terminal (tests/pty/ptydrive) before and apart from the
 * real compiler.  Linked with repl.c, lineedit.c and util.c it makes a program
 * `fake_repl [-q]` whose "language" is: unbalanced ( [ { or a trailing + - * / = , is
 * incomplete (when interactive); ":quit" quits; input starting with "error" fails; "spin"
 * runs until interrupted; anything else is echoed as "ORIGIN = TEXT" with newlines shown
 * as " | ".
 */
#include "config.h"
#include "dyn_int.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct Session {
  volatile sig_atomic_t stop;
  bool interactive;
};

RunStatus session_run(Session *s, const char *text, const char *origin) {
  int depth = 0;
  for (const char *p = text; *p; p++) {
    if (strchr("([{", *p)) depth++;
    if (strchr(")]}", *p)) depth--;
  }
  size_t n = strlen(text);
  while (n > 0 && strchr(" \t\n", text[n - 1])) n--;
  if (s->interactive && (depth > 0 || (n > 0 && strchr("+-*/=,", text[n - 1]))))
    return RUN_INCOMPLETE;
  if (strcmp(text, ":quit") == 0) return RUN_QUIT;
  if (strncmp(text, "error", 5) == 0) {
    fprintf(stderr, "%s:1:1: error: %s\n", origin, text);
    return RUN_ERROR;
  }
  if (strcmp(text, "spin") == 0) {
    s->stop = 0;
    printf("spinning\n");
    fflush(stdout);
    for (int i = 0; i < 1000 && !s->stop; i++) nanosleep(&(struct timespec){0, 10000000}, NULL);
    if (s->stop) {
      fprintf(stderr, "%s: error: interrupted\n", origin);
      return RUN_ERROR;
    }
    return RUN_OK;
  }
  printf("%s = ", origin);
  for (const char *p = text; *p; p++) {
    if (*p == '\n') fputs(" | ", stdout);
    else putchar(*p);
  }
  putchar('\n');
  return RUN_OK;
}

void session_complete(Session *s, const char *prefix,
                      void (*add)(void *cookie, const char *cand), void *cookie) {
  (void)s;
  static const char *const names[] = {"alpha", "alpine", "beta", "matmul", ":load", ":quit",
                                      ":help", ":hw", ":threads", ":time", ":type"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strncmp(names[i], prefix, strlen(prefix)) == 0) add(cookie, names[i]);
}

void session_interrupt(Session *s) { s->stop = 1; }

void session_set_interactive(Session *s, bool on) { s->interactive = on; }

void session_banner(Session *s, Buf *out) {
  (void)s;
  buf_puts(out, "fake dyn session -- for tests");
}

int main(int argc, char **argv) {
  Session s = {0};
  bool quiet = argc > 1 && strcmp(argv[1], "-q") == 0;
  return repl_main(&s, quiet, false);
}
