/* ptydrive.c -- run a program on a pseudo-terminal and play a script of keystrokes and
 * expected output against it, for REPL transcript tests that need a real terminal (line
 * editing, prompts, ^C, ^D).  Usage: ptydrive [-w COLS] [-T TERM] [-v] SCRIPT -- CMD ARGS...
 * Exit status: 0 when every step passed and CMD exited as expected, 1 on a failed step,
 * 2 on a usage error.  The script format is described at usage() below.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_PTY_H
#include <pty.h>
#endif
#ifdef HAVE_UTIL_H
#include <util.h>
#endif

#define TIMEOUT_MS 5000

static void usage(void) {
  fputs("usage: ptydrive [-w COLS] [-T TERM] [-v] SCRIPT -- CMD [ARGS...]\n"
        "Runs CMD on a pseudo-terminal (COLS wide, default 80; TERM default xterm) and\n"
        "plays SCRIPT ('-' for standard input), one step a line:\n"
        "  send TEXT     write TEXT to the terminal\n"
        "  expect TEXT   wait up to 5 s until the output since the last match contains TEXT\n"
        "  sleep MS      pause\n"
        "  status N      CMD must exit with status N (default 0)\n"
        "TEXT takes C escapes (\\r \\n \\t \\e \\xHH \\\\ \\\") and may be put in double\n"
        "quotes to keep blanks at its ends.  Output is matched with terminal escape\n"
        "sequences (ESC [ ... and the like) removed.  Blank lines and '#' lines are skipped.\n"
        "After the script, CMD must exit within 5 s.  -v copies all output to stderr.\n",
        stderr);
  exit(2);
}

/* ---- text ---- */

typedef struct {
  char *s;
  size_t len, cap;
} Text;

static void text_add(Text *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    while (t->len + n + 1 > t->cap) t->cap = t->cap ? 2 * t->cap : 4096;
    t->s = realloc(t->s, t->cap);
    if (!t->s) {
      perror("ptydrive");
      exit(2);
    }
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = 0;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decode an argument: optional surrounding quotes, C escapes.  Returns false on a bad one. */
static bool unescape(const char *in, Text *out) {
  size_t n = strlen(in);
  if (n >= 2 && in[0] == '"' && in[n - 1] == '"') {
    in++;
    n -= 2;
  }
  for (size_t i = 0; i < n; i++) {
    char c = in[i];
    if (c != '\\') {
      text_add(out, &c, 1);
      continue;
    }
    if (++i >= n) return false;
    switch (in[i]) {
    case 'r': c = '\r'; break;
    case 'n': c = '\n'; break;
    case 't': c = '\t'; break;
    case 'e': c = 27; break;
    case 'a': c = 7; break;
    case 'b': c = 8; break;
    case '0': c = 0; break;
    case '\\': c = '\\'; break;
    case '"': c = '"'; break;
    case 'x': {
      int h1 = i + 1 < n ? hexval(in[i + 1]) : -1, h2 = i + 2 < n ? hexval(in[i + 2]) : -1;
      if (h1 < 0) return false;
      if (h2 < 0) {
        c = (char)h1;
        i += 1;
      } else {
        c = (char)(h1 * 16 + h2);
        i += 2;
      }
      break;
    }
    default: return false;
    }
    text_add(out, &c, 1);
  }
  return true;
}

/* What the output says once terminal control sequences are taken out: CSI (ESC [ params
 * final), OSC (ESC ] ... BEL or ESC \), SS3 and other two-byte ESC sequences.  Works from
 * *done on; an unfinished sequence at the end of raw stays there until the rest arrives, so
 * text already in out never changes and offsets into it stay valid. */
static void strip_escapes(const Text *raw, size_t *done, Text *out) {
  size_t i = *done;
  while (i < raw->len) {
    const unsigned char *r = (const unsigned char *)raw->s;
    if (r[i] != 27) {
      size_t j = i;
      while (j < raw->len && r[j] != 27) j++;
      text_add(out, raw->s + i, j - i);
      i = j;
      continue;
    }
    size_t j = i + 2;                          /* the end of the sequence, once known */
    if (i + 1 >= raw->len) break;
    if (r[i + 1] == '[') {
      while (j < raw->len && !(r[j] >= 0x40 && r[j] <= 0x7e)) j++;
      if (j >= raw->len) break;
      j++;
    } else if (r[i + 1] == ']') {
      while (j < raw->len && r[j] != 7 && !(r[j] == 27 && j + 1 < raw->len && r[j + 1] == '\\'))
        j++;
      if (j >= raw->len || (r[j] == 27 && j + 1 >= raw->len)) break;
      j += r[j] == 7 ? 1 : 2;
    } else if (r[i + 1] == 'O' || r[i + 1] == '(' || r[i + 1] == ')') {
      if (i + 2 >= raw->len) break;
      j = i + 3;
    }
    i = j;
  }
  *done = i;
}

static void show(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') fputs("\\n\n", f);
    else if (c == '\r') fputs("\\r", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c == '\\') fputs("\\\\", f);
    else if (c < 32 || c == 127) fprintf(f, "\\x%02x", c);
    else fputc(c, f);
  }
  fputc('\n', f);
}

/* ---- the terminal ---- */

enum { STEP_SEND, STEP_EXPECT, STEP_SLEEP, STEP_STATUS };
typedef struct {
  int kind, line;
  Text arg;
} Step;
#define MAX_STEPS 10000
static Step steps[MAX_STEPS];
static int nsteps;
static int master = -1;
static pid_t child = -1;
static bool child_eof, verbose;
static Text raw, clean;
static size_t raw_done;            /* raw before this is in clean */
static size_t mark;                /* where the next expect starts looking, in clean */

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Read whatever output arrives within ms milliseconds.  On Linux a read from the master
 * fails with EIO once the child has closed the terminal: that is its end of output. */
static void pump(int ms) {
  if (child_eof) {
    if (ms > 0) nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
    return;
  }
  struct pollfd p = {.fd = master, .events = POLLIN};
  int r = poll(&p, 1, ms);
  if (r <= 0) return;
  char buf[4096];
  ssize_t n = read(master, buf, sizeof buf);
  if (n > 0) {
    if (verbose) fwrite(buf, 1, (size_t)n, stderr);
    text_add(&raw, buf, (size_t)n);
    strip_escapes(&raw, &raw_done, &clean);
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    child_eof = true;
  }
}

static bool send_text(const Text *t) {
  size_t off = 0;
  while (off < t->len) {
    ssize_t w = write(master, t->s + off, t->len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pump(10);               /* the child is not reading; let its output drain */
        continue;
      }
      return false;
    }
    off += (size_t)w;
  }
  return true;
}

static bool expect_text(const Text *t) {
  long deadline = now_ms() + TIMEOUT_MS;
  for (;;) {
    if (clean.len >= mark) {
      char *hit = memmem(clean.s + mark, clean.len - mark, t->s, t->len);
      if (hit) {
        mark = (size_t)(hit - clean.s) + t->len;
        return true;
      }
    }
    long left = deadline - now_ms();
    if (left <= 0 || child_eof) return false;      /* out of time, or no more will come */
    pump(left > 100 ? 100 : (int)left);
  }
}

static void cleanup(void) {
  for (int k = 0; k < nsteps; k++) free(steps[k].arg.s);
  free(raw.s);
  free(clean.s);
  if (master >= 0) close(master);
}

static int fail(int line, const char *what, const Text *arg) {
  fprintf(stderr, "ptydrive: script line %d: %s", line, what);
  if (arg) {
    fputs(" \"", stderr);
    for (size_t i = 0; i < arg->len; i++) {
      unsigned char c = (unsigned char)arg->s[i];
      if (c < 32 || c == 127) fprintf(stderr, "\\x%02x", c);
      else fputc(c, stderr);
    }
    fputc('"', stderr);
  }
  fputs("\nptydrive: output since the last match (escape sequences removed):\n", stderr);
  if (clean.len > mark) show(stderr, clean.s + mark, clean.len - mark);
  else fputs("(nothing)\n", stderr);
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
  }
  cleanup();
  return 1;
}

int main(int argc, char **argv) {
  int cols = 80;
  const char *term = "xterm";
  int i = 1;
  for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
    if (strcmp(argv[i], "--") == 0) break;
    if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) cols = atoi(argv[++i]);
    else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) term = argv[++i];
    else if (strcmp(argv[i], "-v") == 0) verbose = true;
    else usage();
  }
  if (i + 2 >= argc || strcmp(argv[i + 1], "--") != 0 || cols <= 0) usage();
  const char *script = argv[i];
  char **cmd = argv + i + 2;

  FILE *sf = strcmp(script, "-") == 0 ? stdin : fopen(script, "r");
  if (!sf) {
    fprintf(stderr, "ptydrive: cannot open %s: %s\n", script, strerror(errno));
    return 2;
  }
  /* Parse the whole script first: a bad line is a usage error before anything runs. */
  char *ln = NULL;
  size_t cap = 0;
  ssize_t n;
  int lineno = 0, bad = 0, want_status = 0;
  while ((n = getline(&ln, &cap, sf)) >= 0) {
    lineno++;
    while (n > 0 && (ln[n - 1] == '\n' || ln[n - 1] == '\r')) ln[--n] = 0;
    char *l = ln;
    while (*l == ' ' || *l == '\t') l++;
    if (!*l || *l == '#') continue;
    char *arg = strchr(l, ' ');
    size_t vlen = arg ? (size_t)(arg - l) : strlen(l);
    arg = arg ? arg + 1 : l + strlen(l);
    Step st = {.line = lineno};
    static const char *const kinds[] = {"send", "expect", "sleep", "status"};
    st.kind = -1;
    for (int k = 0; k < 4; k++)
      if (strlen(kinds[k]) == vlen && strncmp(l, kinds[k], vlen) == 0) st.kind = k;
    text_add(&st.arg, "", 0);
    if (st.kind < 0) {
      fprintf(stderr, "ptydrive: %s:%d: unknown step: %s\n", script, lineno, l);
      bad = 1;
    } else if (!unescape(arg, &st.arg)) {
      fprintf(stderr, "ptydrive: %s:%d: bad escape: %s\n", script, lineno, arg);
      bad = 1;
    } else if (nsteps == MAX_STEPS) {
      fprintf(stderr, "ptydrive: %s: more than %d steps\n", script, MAX_STEPS);
      bad = 1;
    }
    if (st.kind == STEP_STATUS) want_status = atoi(st.arg.s);
    if (bad) {
      free(st.arg.s);
      break;
    }
    steps[nsteps++] = st;
  }
  free(ln);
  if (sf != stdin) fclose(sf);
  if (bad) {
    cleanup();
    return 2;
  }

  struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
  child = forkpty(&master, NULL, NULL, &ws);
  if (child < 0) {
    perror("ptydrive: forkpty");
    cleanup();
    return 2;
  }
  if (child == 0) {
    setenv("TERM", term, 1);
    execvp(cmd[0], cmd);
    fprintf(stderr, "ptydrive: cannot run %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
  }
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  text_add(&raw, "", 0);
  text_add(&clean, "", 0);

  for (int k = 0; k < nsteps; k++) {
    Step *st = &steps[k];
    switch (st->kind) {
    case STEP_SEND:
      pump(0);
      if (!send_text(&st->arg)) return fail(st->line, "cannot send", &st->arg);
      break;
    case STEP_EXPECT:
      if (!expect_text(&st->arg)) return fail(st->line, "timed out waiting for", &st->arg);
      break;
    case STEP_SLEEP: {
      long end = now_ms() + atol(st->arg.s);
      for (long left; (left = end - now_ms()) > 0;) pump((int)left);
      break;
    }
    }
  }

  /* The child must finish by itself; keep reading so that it never blocks on output. */
  long deadline = now_ms() + TIMEOUT_MS;
  int st = 0;
  pid_t w;
  while ((w = waitpid(child, &st, WNOHANG)) == 0 && now_ms() < deadline) pump(20);
  if (w == 0) {
    child_eof = true;
    return fail(lineno, "the program did not exit within 5 s after the script", NULL);
  }
  child = -1;
  for (int k = 0; k < 20 && !child_eof; k++) pump(5);
  int rc = 0;
  if (WIFSIGNALED(st)) {
    fprintf(stderr, "ptydrive: the program was killed by signal %d\n", WTERMSIG(st));
    rc = 1;
  } else if (WEXITSTATUS(st) != want_status) {
    fprintf(stderr, "ptydrive: the program exited with status %d, not %d\n", WEXITSTATUS(st),
            want_status);
    rc = 1;
  }
  cleanup();
  return rc;
}
