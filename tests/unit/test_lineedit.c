/* test_lineedit.c -- Check suite for lineedit.c.  Each editing test runs lineedit_read in a
 * child on a pseudo-terminal (forkpty), types keys into it and reads back what it returned,
 * printed by the child as "@@LINE[text]@@", "@@INTR[text]@@" or "@@EOF[]@@".  Where the
 * drawing matters (lines wider than the terminal) a small VT100 screen model replays the
 * child's output and compares it with what a correct display would show.
 */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_PTY_H
#include <pty.h>
#endif
#ifdef HAVE_UTIL_H
#include <util.h>
#endif

#define WAIT_MS 4000

/* ---- the child: read lines until end of input, print each in a recognisable form ---- */

typedef struct {
  int cols;                      /* terminal width; 0 means 80 */
  const char *const *hist;       /* entries added before the first read, NULL-terminated */
  const char *hist_file;         /* loaded before the first read */
  bool completer;
  int intr_fd;                   /* for lineedit_set_interrupt_fd; 0 means none */
  const char *term;              /* TERM; NULL means xterm */
} ChildOpts;

static const char *const words[] = {"alpha", "alpine", "beta", "matmul", NULL};

/* Candidates for the identifier before the cursor, as a session would give them. */
static void test_completer(void *env, const char *line, int cursor,
                           void (*add)(void *cookie, const char *cand), void *cookie) {
  (void)env;
  int i = cursor;
  while (i > 0 && (line[i - 1] == '_' || (line[i - 1] >= 'a' && line[i - 1] <= 'z'))) i--;
  for (int k = 0; words[k]; k++)
    if (strncmp(words[k], line + i, (size_t)(cursor - i)) == 0) add(cookie, words[k]);
}

static void child_main(const ChildOpts *o) {
  /* Check's runner forwards SIGTERM and SIGINT to the test's process group with handlers
   * the child would inherit; lineedit takes only signals left at their default. */
  static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
  setenv("TERM", o->term ? o->term : "xterm", 1);
  LineEdit *le = lineedit_new(STDIN_FILENO, STDOUT_FILENO);
  if (o->completer) lineedit_set_completer(le, test_completer, NULL);
  if (o->intr_fd > 0) lineedit_set_interrupt_fd(le, o->intr_fd);
  if (o->hist_file) lineedit_history_load(le, o->hist_file);
  for (int i = 0; o->hist && o->hist[i]; i++) lineedit_history_add(le, o->hist[i]);
  for (;;) {
    bool intr = false;
    char *line = lineedit_read(le, "> ", &intr);
    if (!line) {
      printf("@@EOF[]@@\n");
      break;
    }
    printf("@@%s[%s]@@\n", intr ? "INTR" : "LINE", line);
    fflush(stdout);
    lineedit_history_add(le, line);
    free(line);
  }
  fflush(stdout);
  lineedit_free(le);
  exit(0);                       /* exit, not _exit: LeakSanitizer runs at exit */
}

/* A new empty file in $TMPDIR (else /tmp); its name goes in path. */
static void temp_file(char *path, size_t n, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, n, "%s/test_lineedit_%s_XXXXXX", dir && *dir ? dir : "/tmp", tag);
  int fd = mkstemp(path);
  ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
  close(fd);
}

/* ---- the parent: a pseudo-terminal and everything the child wrote to it ---- */

typedef struct {
  int fd;
  pid_t pid;
  Buf out;
  size_t mark;                   /* output before mark has been matched already */
  int cols;
} Pty;

static Pty pty_start(ChildOpts o) {
  Pty p = {.fd = -1, .cols = o.cols ? o.cols : 80};
  struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)p.cols};
  fflush(NULL);
  p.pid = forkpty(&p.fd, NULL, NULL, &ws);
  ck_assert_msg(p.pid >= 0, "forkpty: %s", strerror(errno));
  if (p.pid == 0) child_main(&o);
  buf_puts(&p.out, "");
  return p;
}

static bool pty_pump(Pty *p, int ms) {
  struct pollfd pf = {.fd = p->fd, .events = POLLIN};
  if (poll(&pf, 1, ms) <= 0) return false;
  char b[4096];
  ssize_t n = read(p->fd, b, sizeof b);
  if (n <= 0) return false;
  buf_putn(&p->out, b, (size_t)n);
  return true;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Wait until s appears after the mark; move the mark past it. */
static void pty_expect(Pty *p, const char *s) {
  long end = now_ms() + WAIT_MS;
  for (;;) {
    char *hit = strstr(p->out.s + p->mark, s);
    if (hit) {
      p->mark = (size_t)(hit - p->out.s) + strlen(s);
      return;
    }
    long left = end - now_ms();
    if (left <= 0) break;
    pty_pump(p, left > 50 ? 50 : (int)left);
  }
  ck_abort_msg("timed out waiting for \"%s\"; output since the last match: \"%s\"", s,
               p->out.s + p->mark);
}

static void pty_send(Pty *p, const char *keys) {
  size_t n = strlen(keys);
  ck_assert_int_eq(write(p->fd, keys, n), (ssize_t)n);
}

/* The next result the child printed ("LINE:text", "INTR:", "EOF:"); after a line, also
 * wait for the next prompt, so that keys sent next reach the editor in raw mode. */
static char *pty_result(Pty *p) {
  pty_expect(p, "@@");
  size_t kind = p->mark;
  pty_expect(p, "]@@\r\n");
  const char *s = p->out.s + kind;
  const char *br = strchr(s, '[');
  size_t end = p->mark - 5;
  ck_assert_ptr_nonnull(br);
  Buf r = {0};
  buf_putn(&r, s, (size_t)(br - s));
  buf_putc(&r, ':');
  buf_putn(&r, br + 1, end - (size_t)(br + 1 - p->out.s));
  if (strncmp(r.s, "EOF", 3) != 0) pty_expect(p, "> ");
  return r.s;
}

/* Send keys, then check what the child returned. */
static void pty_check(Pty *p, const char *keys, const char *want) {
  pty_send(p, keys);
  char *got = pty_result(p);
  ck_assert_str_eq(got, want);
  free(got);
}

/* End the child with ^D on an empty line and check that it exits cleanly. */
static void pty_finish(Pty *p) {
  pty_check(p, "\x04", "EOF:");
  int st = 0;
  long end = now_ms() + WAIT_MS;
  pid_t w;
  while ((w = waitpid(p->pid, &st, WNOHANG)) == 0 && now_ms() < end) pty_pump(p, 20);
  while (pty_pump(p, 20)) {}
  ck_assert_msg(w == p->pid, "the child did not exit");
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed: \"%s\"",
                p->out.s + p->mark);
  close(p->fd);
  buf_free(&p->out);
}

static Pty start_default(void) {
  Pty p = pty_start((ChildOpts){0});
  pty_expect(&p, "> ");
  return p;
}

/* ---- a VT100 screen model: enough of xterm to replay what lineedit draws ---- */

#define SROWS 24
#define SCOLS 200

typedef struct {
  int rows, cols, r, c;
  bool wrap;                     /* the cursor is past the last column; the next char wraps */
  char cell[SROWS][SCOLS][5];
} Screen;

static void scr_newline(Screen *s) {
  if (s->r + 1 < s->rows) {
    s->r++;
    return;
  }
  memmove(s->cell[0], s->cell[1], sizeof s->cell[0] * (size_t)(s->rows - 1));
  memset(s->cell[s->rows - 1], 0, sizeof s->cell[0]);
}

static void scr_clear_from(Screen *s, int r, int c) {
  for (; r < s->rows; r++, c = 0)
    for (; c < s->cols; c++) s->cell[r][c][0] = 0;
}

static void scr_feed(Screen *s, const char *t, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char ch = (unsigned char)t[i];
    if (ch == 27 && i + 1 < n && t[i + 1] == '[') {
      int par[4] = {0}, np = 0;
      size_t j = i + 2;
      for (; j < n && ((t[j] >= '0' && t[j] <= '9') || t[j] == ';'); j++) {
        if (t[j] == ';') np++;
        else if (np < 4) par[np] = par[np] * 10 + (t[j] - '0');
      }
      int k = par[0] ? par[0] : 1;
      switch (j < n ? t[j] : 0) {
      case 'A': s->r = s->r - k < 0 ? 0 : s->r - k; break;
      case 'B': s->r = s->r + k >= s->rows ? s->rows - 1 : s->r + k; break;
      case 'C': s->c = s->c + k >= s->cols ? s->cols - 1 : s->c + k; break;
      case 'D': s->c = s->c - k < 0 ? 0 : s->c - k; break;
      case 'H': s->r = par[0] ? par[0] - 1 : 0; s->c = par[1] ? par[1] - 1 : 0; break;
      case 'J': if (par[0] == 2) scr_clear_from(s, 0, 0); else scr_clear_from(s, s->r, s->c); break;
      case 'K': for (int c = s->c; c < s->cols; c++) s->cell[s->r][c][0] = 0; break;
      }
      s->wrap = false;
      i = j + 1;
      continue;
    }
    if (ch == 27) {
      i += 2;
      continue;
    }
    if (ch == '\r') s->c = 0, s->wrap = false;
    else if (ch == '\n') scr_newline(s), s->wrap = false;
    else if (ch == '\b') s->c = s->c > 0 ? s->c - 1 : 0, s->wrap = false;
    if (ch < 32 || ch == 127) {
      i++;
      continue;
    }
    size_t len = ch < 0x80 ? 1 : ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2;
    if (i + len > n) len = n - i;
    if (s->wrap) {
      s->c = 0;
      scr_newline(s);
      s->wrap = false;
    }
    memcpy(s->cell[s->r][s->c], t + i, len);
    s->cell[s->r][s->c][len] = 0;
    if (s->c == s->cols - 1) s->wrap = true;
    else s->c++;
    i += len;
  }
}

/* The screen as text: one line a row, blank cells as spaces, trailing blanks dropped. */
static char *scr_text(const char *out, size_t n, int cols) {
  static Screen s;
  memset(&s, 0, sizeof s);
  s.rows = SROWS;
  s.cols = cols;
  scr_feed(&s, out, n);
  Buf b = {0};
  buf_puts(&b, "");
  for (int r = 0; r < s.rows; r++) {
    size_t start = b.len;
    for (int c = 0; c < s.cols; c++) buf_puts(&b, s.cell[r][c][0] ? s.cell[r][c] : " ");
    while (b.len > start && b.s[b.len - 1] == ' ') b.s[--b.len] = 0;
    buf_putc(&b, '\n');
  }
  while (b.len >= 2 && b.s[b.len - 1] == '\n' && b.s[b.len - 2] == '\n') b.s[--b.len] = 0;
  return b.s;
}

/* What the child should have drawn for these lines entered one after another. */
static char *ideal_screen(const char *const *lines, int cols) {
  Buf b = {0};
  for (int i = 0; lines[i]; i++) buf_printf(&b, "> %s\r\n@@LINE[%s]@@\r\n", lines[i], lines[i]);
  buf_puts(&b, "> ");
  char *t = scr_text(b.s, b.len, cols);
  buf_free(&b);
  return t;
}

static void check_screen(Pty *p, const char *const *lines) {
  char *want = ideal_screen(lines, p->cols);
  char *got = scr_text(p->out.s, p->out.len, p->cols);
  ck_assert_str_eq(got, want);
  free(want);
  free(got);
}

/* ---- editing ---- */

START_TEST(test_insert) {
  Pty p = start_default();
  pty_check(&p, "hello\r", "LINE:hello");
  pty_check(&p, "two words\n", "LINE:two words");
  pty_check(&p, "\r", "LINE:");
  const char *lines[] = {"hello", "two words", "", NULL};
  check_screen(&p, lines);
  pty_finish(&p);
}
END_TEST

START_TEST(test_left_right) {
  Pty p = start_default();
  pty_check(&p, "helo\x1b[Dl\x1b[C!\r", "LINE:hello!");
  pty_check(&p, "ac\x02" "b\x06" "d\r", "LINE:abcd");              /* ^B ^F */
  pty_check(&p, "ab\x1bOD\x1bODx\x1bOCy\r", "LINE:xayb");         /* SS3 arrows */
  pty_check(&p, "x\x1b[D\x1b[D\x1b[D" "0\x1b[C\x1b[C\x1b[C" "1\r", "LINE:0x1");  /* clamped */
  pty_finish(&p);
}
END_TEST

START_TEST(test_home_end) {
  Pty p = start_default();
  pty_check(&p, "bc\x1b[Ha\x1b[F" "d\r", "LINE:abcd");
  pty_check(&p, "bc\x1bOHa\x1bOF" "d\r", "LINE:abcd");
  pty_check(&p, "bc\x1b[1~a\x1b[4~" "d\r", "LINE:abcd");
  pty_check(&p, "bc\x1b[7~a\x1b[8~" "d\r", "LINE:abcd");
  pty_check(&p, "bc\x01" "a\x05" "d\r", "LINE:abcd");                /* ^A ^E */
  pty_finish(&p);
}
END_TEST

START_TEST(test_kill_keys) {
  Pty p = start_default();
  pty_check(&p, "hello world\x01\x06\x06\x06\x06\x06\x0b\r", "LINE:hello");     /* ^K */
  pty_check(&p, "hello world\x02\x02\x02\x02\x02\x15\r", "LINE:world");         /* ^U */
  pty_check(&p, "foo bar  baz\x17\r", "LINE:foo bar  ");                          /* ^W */
  pty_check(&p, "foo bar  \x17\r", "LINE:foo ");                    /* ^W over blanks */
  pty_check(&p, "one two\x17x \x19\r", "LINE:one x two");           /* ^Y yanks */
  pty_check(&p, "a b\x01\x0b\x15\x17\r", "LINE:");                  /* nothing to kill */
  pty_finish(&p);
}
END_TEST

START_TEST(test_delete) {
  Pty p = start_default();
  pty_check(&p, "abcd\x7f\x7f" "e\r", "LINE:abe");                  /* Backspace 127 */
  pty_check(&p, "abcd\x08\x08" "e\r", "LINE:abe");                  /* ^H */
  pty_check(&p, "abcd\x01\x1b[3~\x1b[3~\r", "LINE:cd");             /* Delete */
  pty_check(&p, "abcd\x01\x06\x04\r", "LINE:acd");                  /* ^D deletes here */
  pty_check(&p, "ab\x04\x1b[3~\r", "LINE:ab");                      /* nothing at the end */
  pty_check(&p, "\x7f\x01\x7f" "a\r", "LINE:a");                    /* nothing before */
  pty_finish(&p);
}
END_TEST

START_TEST(test_unknown_keys) {
  Pty p = start_default();
  /* Page Up, F5, Ctrl-Up, an Alt key, a stray ^T: none leaves bytes in the line */
  pty_check(&p, "a\x1b[5~\x1b[15~\x1b[1;5A\x1bx\x14" "b\r", "LINE:ab");
  pty_check(&p, "x\x1b[1;5D\x1b[1;5C" "y\r", "LINE:xy");            /* Ctrl-Left/Right */
  pty_check(&p, "ab cd\x1b" "b\x1b" "b_\x1b" "f!\r", "LINE:_ab! cd");  /* Alt-b Alt-f */
  pty_finish(&p);
}
END_TEST

START_TEST(test_utf8) {
  Pty p = start_default();
  pty_check(&p, "x\xc3\xa9y\x1b[D\x7f\r", "LINE:xy");               /* é removed whole */
  pty_check(&p, "\xe2\x88\x91\x1b[D" "a\r", "LINE:a\xe2\x88\x91");  /* before ∑ */
  pty_check(&p, "\xf0\x9f\x99\x82z\x01\x1b[C\x7f\r", "LINE:z");     /* 4-byte char */
  /* a character split across two writes still arrives whole */
  pty_send(&p, "a\xc3");
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  pty_check(&p, "\xa9\x1b[D\x1b[D" "b\r", "LINE:ba\xc3\xa9");
  /* a stray continuation byte is dropped rather than glued to a character */
  pty_check(&p, "q\x80r\r", "LINE:qr");
  pty_finish(&p);
}
END_TEST

/* ---- history ---- */

START_TEST(test_history) {
  static const char *const hist[] = {"one", "two", NULL};
  Pty p = pty_start((ChildOpts){.hist = hist});
  pty_expect(&p, "> ");
  pty_check(&p, "\x1b[A\r", "LINE:two");                            /* [one two] */
  pty_check(&p, "\x1b[A\x1b[A\r", "LINE:one");   /* the repeated "two" was not added */
  pty_check(&p, "cur\x1b[A\x1b[A\x1b[B\x1b[B\r", "LINE:cur");   /* the new line is kept */
  pty_check(&p, "\x10\x10\x0e\r", "LINE:cur");     /* ^P ^P ^N: [one two one cur] */
  /* an edit to a recalled line survives a trip down and up, and history is unchanged */
  pty_check(&p, "\x1b[AX\x1b[B\x1b[A\r", "LINE:curX");
  pty_check(&p, "\x1b[A\x1b[A\r", "LINE:cur");
  pty_check(&p, "\x1b[B\x1b[B\x1b[B" "new\r", "LINE:new");          /* Down at the bottom */
  pty_check(&p, "\x1b[A\x1b[A\x1b[A\x1b[A\x1b[A\x1b[A\x1b[A\x1b[A\x1b[A\r",
            "LINE:one");                                             /* Up stops at the top */
  pty_finish(&p);
}
END_TEST

START_TEST(test_history_file_in_editor) {
  char path[512];
  temp_file(path, sizeof path, "h");
  int fd = open(path, O_WRONLY);
  ck_assert_int_ge(fd, 0);
  const char text[] = "first\nsecond\n";
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  Pty p = pty_start((ChildOpts){.hist_file = path});
  pty_expect(&p, "> ");
  pty_check(&p, "\x1b[A\x1b[A\r", "LINE:first");
  pty_finish(&p);
  unlink(path);
}
END_TEST

/* ---- ^C, ^D, ^L ---- */

START_TEST(test_interrupt_and_eof) {
  Pty p = start_default();
  pty_check(&p, "abc\x03", "INTR:");
  pty_check(&p, "\x03", "INTR:");
  pty_check(&p, "after\r", "LINE:after");
  pty_check(&p, "xy\x04\x04\x01\x04\r", "LINE:y");        /* on a non-empty line ^D deletes */
  pty_finish(&p);                                                   /* ^D on empty: NULL */
}
END_TEST

START_TEST(test_clear_screen) {
  Pty p = start_default();
  pty_check(&p, "before\r", "LINE:before");
  pty_check(&p, "ab\x0c" "c\r", "LINE:abc");
  /* after ^L the screen starts with the line being edited */
  const char *lines[] = {"abc", NULL};
  char *want = ideal_screen(lines, p.cols);
  const char *from = strstr(p.out.s, "\x1b[2J");
  ck_assert_ptr_nonnull(from);
  char *got = scr_text(from, strlen(from), p.cols);
  ck_assert_str_eq(got, want);
  free(want);
  free(got);
  pty_finish(&p);
}
END_TEST

/* A SIGINT handler's self-pipe ends the read as ^C does, in raw mode and on a dumb
 * terminal, where the terminal does the editing and the prompt is all we draw. */
static void check_interrupt_fd(const char *term) {
  int wake[2];
  ck_assert_int_eq(pipe(wake), 0);
  fcntl(wake[0], F_SETFL, O_NONBLOCK);
  Pty p = pty_start((ChildOpts){.intr_fd = wake[0], .term = term});
  close(wake[0]);
  pty_expect(&p, "> ");
  pty_check(&p, "typed\r", "LINE:typed");
  pty_send(&p, "abc");
  pty_expect(&p, "abc");
  ck_assert_int_eq(write(wake[1], "xx", 2), 2);
  char *got = pty_result(&p);
  ck_assert_str_eq(got, "INTR:");
  free(got);
  pty_check(&p, "next\r", "LINE:next");         /* both bytes were drained */
  close(wake[1]);
  pty_finish(&p);
}

START_TEST(test_interrupt_fd) { check_interrupt_fd(NULL); }
END_TEST

START_TEST(test_dumb_terminal) {
  check_interrupt_fd("dumb");
  Pty p = pty_start((ChildOpts){.term = "dumb"});
  pty_expect(&p, "> ");
  pty_check(&p, "x\x1b[Dy\r", "LINE:x\x1b[Dy");  /* no editing of our own */
  ck_assert_ptr_null(strstr(p.out.s, "\x1b[J"));  /* and no escape codes drawn */
  pty_finish(&p);
}
END_TEST

/* Killed at the prompt, the editor puts the terminal back as it found it. */
START_TEST(test_restore_on_signal) {
  Pty p = start_default();
  int slave = open(ptsname(p.fd), O_RDWR | O_NOCTTY);
  ck_assert_int_ge(slave, 0);
  struct termios t;
  ck_assert_int_eq(tcgetattr(slave, &t), 0);
  ck_assert(!(t.c_lflag & ICANON) && !(t.c_lflag & ECHO));          /* raw while reading */
  kill(p.pid, SIGTERM);
  int st = 0;
  ck_assert_int_eq(waitpid(p.pid, &st, 0), p.pid);
  ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);            /* and still dies of it */
  ck_assert_int_eq(tcgetattr(slave, &t), 0);
  ck_assert((t.c_lflag & ICANON) && (t.c_lflag & ECHO) && (t.c_lflag & ISIG));
  close(slave);
  close(p.fd);
  buf_free(&p.out);
}
END_TEST

/* ---- completion ---- */

START_TEST(test_complete_one) {
  Pty p = pty_start((ChildOpts){.completer = true});
  pty_expect(&p, "> ");
  pty_check(&p, "be\t\r", "LINE:beta");
  pty_check(&p, "x = mat\t(1)\r", "LINE:x = matmul(1)");
  pty_check(&p, "mat(1)\x01\x06\x06\x06\t\r", "LINE:matmul(1)");    /* mid-line */
  pty_check(&p, "beta\t\r", "LINE:beta");                           /* already whole */
  pty_check(&p, "zz\t\r", "LINE:zz");                               /* nothing */
  pty_finish(&p);
}
END_TEST

START_TEST(test_complete_several) {
  Pty p = pty_start((ChildOpts){.completer = true});
  pty_expect(&p, "> ");
  pty_send(&p, "al\t");
  pty_expect(&p, "alp");
  pty_send(&p, "\t");                      /* a second Tab lists them */
  pty_expect(&p, "alpha   alpine\r\n");
  pty_expect(&p, "> alp");
  pty_check(&p, "h\t\r", "LINE:alpha");
  /* a Tab with nothing common to add, then another: the list, and the line is kept */
  pty_send(&p, "\t\t");
  pty_expect(&p, "alpha   alpine  beta    matmul\r\n");
  pty_check(&p, "b\t\r", "LINE:beta");
  pty_finish(&p);
}
END_TEST

/* ---- lines wider than the terminal ---- */

START_TEST(test_long_line) {
  Pty p = pty_start((ChildOpts){.cols = 20});
  pty_expect(&p, "> ");
  /* 45 characters: three rows at 20 columns, the prompt included */
  const char *l45 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHI";
  pty_send(&p, l45);
  /* X at the start, Y at the end, then 22 to the left (row 2 to row 1) to replace 'n' */
  Buf keys = {0};
  buf_puts(&keys, "\x01X\x05Y");
  for (int i = 0; i < 22; i++) buf_puts(&keys, "\x1b[D");
  buf_puts(&keys, "-\x7f\x7f\r");
  pty_check(&p, keys.s, "LINE:X0123456789abcdefghijklmopqrstuvwxyzABCDEFGHIY");
  buf_free(&keys);
  /* 18 characters end exactly at the margin; then one more wraps */
  pty_check(&p, "abcdefghijklmnopqr\r", "LINE:abcdefghijklmnopqr");
  pty_check(&p, "abcdefghijklmnopqrs\x7f\x7f\r", "LINE:abcdefghijklmnopq");
  /* shrink from three rows to one, then grow again with history */
  pty_send(&p, l45);
  pty_check(&p, "\x01\x0b" "short\x1b[A\x1b[B\x15\x1b[A\r",
            "LINE:abcdefghijklmnopq");
  const char *lines[] = {"X0123456789abcdefghijklmopqrstuvwxyzABCDEFGHIY",
                         "abcdefghijklmnopqr", "abcdefghijklmnopq", "abcdefghijklmnopq",
                         NULL};
  check_screen(&p, lines);
  pty_finish(&p);
}
END_TEST

START_TEST(test_long_line_edits_redraw) {
  Pty p = pty_start((ChildOpts){.cols = 20});
  pty_expect(&p, "> ");
  Buf keys = {0}, want = {0};
  for (int i = 0; i < 100; i++) buf_putc(&keys, (char)('a' + i % 26));
  buf_puts(&want, keys.s);
  /* insert in the middle of the second row, delete on the first, go back and forth */
  buf_puts(&keys, "\x01");
  for (int i = 0; i < 21; i++) buf_puts(&keys, "\x1b[C");
  buf_puts(&keys, "+++\x01\x1b[3~\x05");
  for (int i = 0; i < 25; i++) buf_puts(&keys, "\x02");
  buf_puts(&keys, "\x06\x06\x06\xc3\xa9\r");
  /* expected: the first char deleted; "+++" after the 21st; "é" 22 back from the end */
  Buf w = {0};
  buf_putn(&w, want.s + 1, 20);
  buf_puts(&w, "+++");
  buf_puts(&w, want.s + 21);
  size_t at = w.len - 22;
  Buf w2 = {0};
  buf_putn(&w2, w.s, at);
  buf_puts(&w2, "\xc3\xa9");
  buf_puts(&w2, w.s + at);
  Buf line = {0};
  buf_printf(&line, "LINE:%s", w2.s);
  pty_check(&p, keys.s, line.s);
  const char *lines[] = {w2.s, NULL};
  check_screen(&p, lines);
  buf_free(&keys);
  buf_free(&want);
  buf_free(&w);
  buf_free(&w2);
  buf_free(&line);
  pty_finish(&p);
}
END_TEST

/* ---- not a terminal ---- */

START_TEST(test_not_a_terminal) {
  char path[512];
  temp_file(path, sizeof path, "p");
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  Buf text = {0};
  buf_puts(&text, "one\ntwo\r\n\n");
  for (int i = 0; i < 100000; i++) buf_putc(&text, (char)('a' + i % 26));
  buf_puts(&text, "\n\x1b[A\x03\x04 keys are plain\ntail");
  ck_assert_int_eq(write(fd, text.s, text.len), (ssize_t)text.len);
  lseek(fd, 0, SEEK_SET);
  int out[2];
  ck_assert_int_eq(pipe(out), 0);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  LineEdit *le = lineedit_new(fd, out[1]);
  lineedit_set_completer(le, test_completer, NULL);
  bool intr = true;
  char *l;
  l = lineedit_read(le, "> ", &intr);
  ck_assert_str_eq(l, "one");
  ck_assert(!intr);
  free(l);
  l = lineedit_read(le, "> ", &intr);
  ck_assert_str_eq(l, "two");
  free(l);
  l = lineedit_read(le, "> ", &intr);
  ck_assert_str_eq(l, "");
  free(l);
  l = lineedit_read(le, "> ", &intr);
  ck_assert_uint_eq(strlen(l), 100000);
  ck_assert(memcmp(l, text.s + 10, 100000) == 0);
  free(l);
  l = lineedit_read(le, "> ", &intr);
  ck_assert_str_eq(l, "\x1b[A\x03\x04 keys are plain");
  ck_assert(!intr);
  free(l);
  l = lineedit_read(le, "> ", &intr);
  ck_assert_str_eq(l, "tail");
  free(l);
  ck_assert_ptr_null(lineedit_read(le, "> ", &intr));
  ck_assert_ptr_null(lineedit_read(le, "> ", NULL));
  char b[16];
  ck_assert_int_eq(read(out[0], b, sizeof b), -1);     /* no prompt, no escape codes */
  ck_assert_int_eq(errno, EAGAIN);
  lineedit_free(le);
  close(fd);
  close(out[0]);
  close(out[1]);
  unlink(path);
  buf_free(&text);
}
END_TEST

START_TEST(test_pipe) {
  int in[2];
  ck_assert_int_eq(pipe(in), 0);
  ck_assert_int_eq(write(in[1], "a\nb", 3), 3);
  close(in[1]);
  LineEdit *le = lineedit_new(in[0], -1);
  char *l = lineedit_read(le, "> ", NULL);
  ck_assert_str_eq(l, "a");
  free(l);
  l = lineedit_read(le, "> ", NULL);
  ck_assert_str_eq(l, "b");
  free(l);
  ck_assert_ptr_null(lineedit_read(le, "> ", NULL));
  lineedit_free(le);
  close(in[0]);
}
END_TEST

/* ---- history files ---- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  Buf b = {0};
  buf_puts(&b, "");
  char tmp[4096];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf_putn(&b, tmp, n);
  fclose(f);
  return b.s;
}

/* The file without its "#TIME" lines, each of which must start an entry; *stamps: their count. */
static char *unstamp(char *s, int *stamps) {
  Buf b = {0};
  buf_puts(&b, "");
  *stamps = 0;
  for (char *p = s; *p;) {
    char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) + 1 : strlen(p);
    if (p[0] == '#' && isdigit((unsigned char)p[1])) (*stamps)++;
    else buf_putn(&b, p, n);
    p += n;
  }
  free(s);
  return b.s;
}

START_TEST(test_history_files) {
  char path[512], path2[512];
  temp_file(path, sizeof path, "f");
  temp_file(path2, sizeof path2, "g");
  int stamps;

  LineEdit *le = lineedit_new(-1, -1);
  lineedit_history_add(le, "a");
  lineedit_history_add(le, "a");          /* a repeat of the last: skipped */
  lineedit_history_add(le, "");           /* empty: skipped */
  lineedit_history_add(le, "b");
  lineedit_history_add(le, "a");          /* not a repeat of the last: kept */
  lineedit_history_add(le, "f(1,\n  2)"); /* a multi-line input: one entry, its lines kept */
  ck_assert(lineedit_history_save(le, path));
  char *s = unstamp(slurp(path), &stamps);
  ck_assert_str_eq(s, "a\nb\na\nf(1,\n  2)\n");
  ck_assert_int_eq(stamps, 4);            /* readline's format: "#TIME" before each entry */
  free(s);
  lineedit_free(le);

  /* load then save gives the same entries: the multi-line one stays one */
  le = lineedit_new(-1, -1);
  ck_assert(lineedit_history_load(le, path));
  ck_assert(lineedit_history_save(le, path2));
  s = unstamp(slurp(path2), &stamps);
  ck_assert_str_eq(s, "a\nb\na\nf(1,\n  2)\n");
  ck_assert_int_eq(stamps, 4);
  free(s);
  lineedit_free(le);

  /* a file from before the timestamps holds an entry a line */
  FILE *old = fopen(path, "w");
  ck_assert_ptr_nonnull(old);
  fputs("x = 1\ny = (2,\n3)\n", old);
  fclose(old);
  le = lineedit_new(-1, -1);
  ck_assert(lineedit_history_load(le, path));
  ck_assert(lineedit_history_save(le, path2));
  s = unstamp(slurp(path2), &stamps);
  ck_assert_str_eq(s, "x = 1\ny = (2,\n3)\n");
  ck_assert_int_eq(stamps, 3);
  free(s);
  lineedit_free(le);

  /* capped at 1000: the oldest go */
  le = lineedit_new(-1, -1);
  char e[32];
  for (int i = 0; i < 1100; i++) {
    snprintf(e, sizeof e, "entry %d", i);
    lineedit_history_add(le, e);
  }
  ck_assert(lineedit_history_save(le, path));
  lineedit_free(le);
  s = unstamp(slurp(path), &stamps);
  int lines = 0;
  for (char *q = s; *q; q++) lines += *q == '\n';
  ck_assert_int_eq(lines, 1000);
  ck_assert_int_eq(stamps, 1000);
  ck_assert(strncmp(s, "entry 100\n", 10) == 0);
  ck_assert_ptr_nonnull(strstr(s, "\nentry 1099\n"));
  free(s);

  /* loading more than the cap keeps the newest */
  le = lineedit_new(-1, -1);
  lineedit_history_add(le, "older");
  ck_assert(lineedit_history_load(le, path));
  ck_assert(lineedit_history_save(le, path2));
  lineedit_free(le);
  s = unstamp(slurp(path2), &stamps);
  ck_assert(strncmp(s, "entry 100\n", 10) == 0);
  free(s);

  /* missing or unwritable files are reported, not fatal */
  le = lineedit_new(-1, -1);
  ck_assert(!lineedit_history_load(le, "/nonexistent-dir/history"));
  ck_assert(!lineedit_history_save(le, "/nonexistent-dir/history"));
  lineedit_free(le);
  unlink(path);
  unlink(path2);
}
END_TEST

static Suite *lineedit_suite(void) {
  Suite *s = suite_create("lineedit");
  TCase *tc = tcase_create("terminal");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_insert);
  tcase_add_test(tc, test_left_right);
  tcase_add_test(tc, test_home_end);
  tcase_add_test(tc, test_kill_keys);
  tcase_add_test(tc, test_delete);
  tcase_add_test(tc, test_unknown_keys);
  tcase_add_test(tc, test_utf8);
  tcase_add_test(tc, test_history);
  tcase_add_test(tc, test_history_file_in_editor);
  tcase_add_test(tc, test_interrupt_and_eof);
  tcase_add_test(tc, test_clear_screen);
  tcase_add_test(tc, test_interrupt_fd);
  tcase_add_test(tc, test_dumb_terminal);
  tcase_add_test(tc, test_restore_on_signal);
  tcase_add_test(tc, test_complete_one);
  tcase_add_test(tc, test_complete_several);
  tcase_add_test(tc, test_long_line);
  tcase_add_test(tc, test_long_line_edits_redraw);
  suite_add_tcase(s, tc);
  TCase *plain = tcase_create("plain");
  tcase_add_test(plain, test_not_a_terminal);
  tcase_add_test(plain, test_pipe);
  tcase_add_test(plain, test_history_files);
  suite_add_tcase(s, plain);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(lineedit_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
