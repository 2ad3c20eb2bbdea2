/* lineedit.c -- the built-in line editor, used by the REPL when dyn is built without GNU
 * readline.  On a terminal it puts the tty in raw mode for the length of one read and
 * offers the usual Emacs-style keys, history, tab completion and lines that wrap past the
 * terminal width; anywhere else it reads plain lines with no prompt and no escape codes, so
 * piped input behaves like a file.  Only VT100/xterm sequences are emitted (no terminfo).
 */
#include "config.h"
#include "dyn_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define HISTORY_MAX 1000
#define ESC_TIMEOUT_MS 100   /* how long the rest of an escape sequence may take to arrive */

struct LineEdit {
  int in, out;
  bool tty;                   /* in is a terminal: edit; otherwise read plain lines */
  bool dumb;                  /* TERM=dumb: a prompt, but the terminal does the editing */
  char **hist;                /* oldest first */
  int nhist;
  char *kill;                 /* the last text removed by ^K ^U ^W, for ^Y */
  LineEditCompleter comp;
  void *comp_env;
  int intr_fd;                /* readable: stop the read as ^C would (-1: none) */
  unsigned char rbuf[4096];   /* bytes read from in but not yet used */
  size_t rpos, rlen;
};

/* ---- restoring the terminal --------------------------------------------------------------
 * Raw mode must never outlive the read that set it, even when the process ends inside it.
 * The saved settings live in statics because a signal handler and atexit must reach them;
 * only one terminal is raw at a time. */

static int raw_fd = -1;
static struct termios raw_saved;
static const int fatal_sigs[] = {SIGTERM, SIGHUP, SIGQUIT, SIGINT};
#define NFATAL ((int)(sizeof fatal_sigs / sizeof fatal_sigs[0]))
static struct sigaction fatal_old[NFATAL];
static bool fatal_installed[NFATAL];

static void restore_terminal(void) {
  if (raw_fd >= 0) tcsetattr(raw_fd, TCSADRAIN, &raw_saved);
  raw_fd = -1;
}

/* Put the terminal back, then let the signal do what it would have done without us. */
static void on_fatal_signal(int sig) {
  if (raw_fd >= 0) tcsetattr(raw_fd, TCSANOW, &raw_saved);
  for (int i = 0; i < NFATAL; i++)
    if (fatal_sigs[i] == sig) sigaction(sig, &fatal_old[i], NULL);
  raise(sig);
}

static bool raw_on(LineEdit *le) {
  static bool atexit_done;
  struct termios t;
  if (tcgetattr(le->in, &raw_saved) < 0) return false;
  t = raw_saved;
  t.c_iflag &= ~(tcflag_t)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
  t.c_oflag &= ~(tcflag_t)OPOST;        /* so we write "\r\n" and know where the cursor is */
  t.c_cflag |= CS8;
  t.c_lflag &= ~(tcflag_t)(ECHO | ICANON | IEXTEN | ISIG);   /* ^C ^Z arrive as bytes */
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  if (!atexit_done) {
    atexit(restore_terminal);
    atexit_done = true;
  }
  /* Only signals that would kill us get a handler: a caller's own handler stays in charge. */
  for (int i = 0; i < NFATAL; i++) {
    fatal_installed[i] = false;
    if (sigaction(fatal_sigs[i], NULL, &fatal_old[i]) == 0 &&
        !(fatal_old[i].sa_flags & SA_SIGINFO) && fatal_old[i].sa_handler == SIG_DFL) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      sigaction(fatal_sigs[i], &sa, NULL);
      fatal_installed[i] = true;
    }
  }
  raw_fd = le->in;
  /* TCSADRAIN, not TCSAFLUSH: keys typed ahead of the prompt must not be thrown away. */
  if (tcsetattr(le->in, TCSADRAIN, &t) < 0) {
    raw_fd = -1;
    for (int i = 0; i < NFATAL; i++)
      if (fatal_installed[i]) sigaction(fatal_sigs[i], &fatal_old[i], NULL);
    return false;
  }
  return true;
}

static void raw_off(void) {
  restore_terminal();
  for (int i = 0; i < NFATAL; i++)
    if (fatal_installed[i]) {
      sigaction(fatal_sigs[i], &fatal_old[i], NULL);
      fatal_installed[i] = false;
    }
}

/* ---- low-level input and output ---- */

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;                       /* the terminal is gone; the next read will say so */
    }
    s += w;
    n -= (size_t)w;
  }
}

static void write_str(int fd, const char *s) { write_all(fd, s, strlen(s)); }

enum { RB_EOF = -1, RB_TIMEOUT = -2, RB_EINTR = -3, RB_INTR_FD = -4 };

static void drain_intr_fd(LineEdit *le) {
  char tmp[64];
  struct pollfd p = {.fd = le->intr_fd, .events = POLLIN};
  while (poll(&p, 1, 0) > 0 && read(le->intr_fd, tmp, sizeof tmp) > 0) {}
}

/* The next input byte.  timeout_ms < 0 waits for ever.  With stop_on_eintr a signal that
 * interrupts the wait is reported (a dumb terminal's ^C); otherwise it is retried.  The
 * interrupt descriptor is reported but left for the caller to drain, so that a read in the
 * middle of an escape sequence cannot swallow it. */
static int read_byte(LineEdit *le, int timeout_ms, bool stop_on_eintr) {
  if (le->rpos < le->rlen) return le->rbuf[le->rpos++];
  for (;;) {
    if (timeout_ms >= 0 || le->intr_fd >= 0) {
      struct pollfd p[2] = {{.fd = le->in, .events = POLLIN},
                            {.fd = le->intr_fd, .events = POLLIN}};
      int r = poll(p, le->intr_fd >= 0 ? 2 : 1, timeout_ms);
      if (r == 0) return RB_TIMEOUT;
      if (r < 0) {
        if (errno == EINTR && !stop_on_eintr) continue;
        return errno == EINTR ? RB_EINTR : RB_EOF;
      }
      if (le->intr_fd >= 0 && (p[1].revents & POLLIN)) return RB_INTR_FD;
      if (le->intr_fd >= 0 && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)))
        le->intr_fd = -1;                   /* the other end is gone: stop watching */
    }
    ssize_t n = read(le->in, le->rbuf, sizeof le->rbuf);
    if (n > 0) {
      le->rpos = 1;
      le->rlen = (size_t)n;
      return le->rbuf[0];
    }
    if (n < 0 && errno == EINTR) {
      if (stop_on_eintr) return RB_EINTR;
      continue;
    }
    return RB_EOF;
  }
}

/* A plain line of any length: no prompt, no echo, no escape codes.  NULL at end of input
 * with nothing read.  A trailing "\r\n" or "\n" is dropped. */
static char *read_plain(LineEdit *le, bool *interrupted) {
  Buf b = {0};
  bool any = false;
  for (;;) {
    int c = read_byte(le, -1, le->tty);
    if (c == RB_EINTR || c == RB_INTR_FD) {   /* ^C on a dumb terminal, or the caller's fd */
      if (c == RB_INTR_FD) drain_intr_fd(le);
      if (le->tty) {   /* the line is abandoned: what was typed of it must not start the next */
        tcflush(le->in, TCIFLUSH);
        le->rpos = le->rlen = 0;
      }
      if (interrupted) *interrupted = true;
      buf_free(&b);
      return xstrdup("");
    }
    if (c < 0) break;
    any = true;
    if (c == '\n') break;
    buf_putc(&b, (char)c);
  }
  if (!any) return NULL;
  if (b.len > 0 && b.s[b.len - 1] == '\r') b.s[--b.len] = 0;
  char *s = b.s ? b.s : xstrdup("");
  return s;
}

/* ---- UTF-8: a character is a lead byte and its continuation bytes ---- */

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Display width under the one-column-per-character assumption. */
static int text_width(const char *s, size_t n) {
  int w = 0;
  for (size_t i = 0; i < n; i++)
    if (!is_cont((unsigned char)s[i])) w++;
  return w;
}

/* ---- the editing state of one read ---- */

typedef struct {
  LineEdit *le;
  const char *prompt;
  int pwidth;
  char *b;                 /* the line, NUL-terminated */
  size_t len, cap, pos;    /* pos is a byte offset at a character boundary */
  int cols;
  int crow;                /* the cursor's row in the last drawing, counted from the prompt's */
  char **hcopy;            /* edits made to recalled history lines; [nhist] is the new line */
  int hidx;
  bool last_was_tab;
} Ed;

static int term_cols(LineEdit *le) {
  struct winsize ws;
  if (ioctl(le->out, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (ioctl(le->in, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

static void ed_reserve(Ed *e, size_t extra) {
  if (e->len + extra + 1 <= e->cap) return;
  while (e->len + extra + 1 > e->cap) e->cap = e->cap ? 2 * e->cap : 128;
  e->b = xrealloc(e->b, e->cap);
}

static void ed_set(Ed *e, const char *s) {
  e->len = 0;
  size_t n = strlen(s);
  ed_reserve(e, n);
  memcpy(e->b, s, n + 1);
  e->len = e->pos = n;
}

/* The row and column at which byte i of the line starts (the prompt on row 0): characters
 * advance a column and wrap at the margin; a newline (a multi-line entry recalled from
 * history) starts the next row. */
static void ed_rowcol(const Ed *e, size_t i, int *row, int *col) {
  int r = e->pwidth / e->cols, c = e->pwidth % e->cols;
  for (size_t k = 0; k < i; k++) {
    if (e->b[k] == '\n') {
      r++, c = 0;
    } else if (!is_cont((unsigned char)e->b[k]) && ++c == e->cols) {
      r++, c = 0;
    }
  }
  *row = r;
  *col = c;
}

/* Redraw prompt and line from the prompt's first row.  The terminal is left in a known
 * place even when the text ends exactly at the right margin: there terminals keep the
 * cursor in the last column with a wrap pending, so we move to the next row ourselves.
 * A newline in the line is drawn as a new row (the terminal is raw: "\r\n"). */
static void refresh(Ed *e) {
  Buf o = {0};
  e->cols = term_cols(e->le);
  if (e->crow > 0) buf_printf(&o, "\x1b[%dA", e->crow);
  buf_puts(&o, "\r\x1b[J");
  buf_puts(&o, e->prompt);
  for (size_t k = 0; k < e->len; k++)
    if (e->b[k] == '\n') buf_puts(&o, "\r\n");
    else buf_putc(&o, e->b[k]);
  int erow, ecol, crow, ccol;
  ed_rowcol(e, e->len, &erow, &ecol);
  ed_rowcol(e, e->pos, &crow, &ccol);
  if (ecol == 0 && e->len > 0 && e->b[e->len - 1] != '\n') buf_puts(&o, "\r\n");   /* a pending wrap */
  if (erow > crow) buf_printf(&o, "\x1b[%dA", erow - crow);
  buf_putc(&o, '\r');
  if (ccol > 0) buf_printf(&o, "\x1b[%dC", ccol);
  write_all(e->le->out, o.s, o.len);
  buf_free(&o);
  e->crow = crow;
}

static void ed_insert(Ed *e, const char *s, size_t n) {
  ed_reserve(e, n);
  memmove(e->b + e->pos + n, e->b + e->pos, e->len - e->pos + 1);
  memcpy(e->b + e->pos, s, n);
  e->len += n;
  e->pos += n;
  int end = e->pwidth + text_width(e->b, e->len);
  /* Typing at the end of a row needs no redraw: echo the character.  Not when it lands in
   * the last column, where the pending wrap would put our row count off. */
  if (e->pos == e->len && end % e->cols != 0) write_all(e->le->out, s, n);
  else refresh(e);
}

static void ed_delete(Ed *e, size_t from, size_t to) {   /* remove bytes [from, to) */
  if (from >= to) return;
  memmove(e->b + from, e->b + to, e->len - to + 1);
  e->len -= to - from;
  if (e->pos >= to) e->pos -= to - from;
  else if (e->pos > from) e->pos = from;
  refresh(e);
}

static void ed_kill(Ed *e, size_t from, size_t to) {
  if (from >= to) return;
  free(e->le->kill);
  e->le->kill = xstrndup(e->b + from, to - from);
  ed_delete(e, from, to);
}

static size_t prev_char(Ed *e, size_t i) {
  if (i == 0) return 0;
  do i--; while (i > 0 && is_cont((unsigned char)e->b[i]));
  return i;
}

static size_t next_char(Ed *e, size_t i) {
  if (i >= e->len) return e->len;
  do i++; while (i < e->len && is_cont((unsigned char)e->b[i]));
  return i;
}

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '_' || (c & 0x80); }

static size_t word_left(Ed *e, size_t i) {
  while (i > 0 && !word_char(e->b[i - 1])) i--;
  while (i > 0 && word_char(e->b[i - 1])) i--;
  return i;
}

static size_t word_right(Ed *e, size_t i) {
  while (i < e->len && !word_char(e->b[i])) i++;
  while (i < e->len && word_char(e->b[i])) i++;
  return i;
}

static void ed_move(Ed *e, size_t pos) {
  if (pos == e->pos) return;
  e->pos = pos;
  refresh(e);
}

/* Up (dir = -1) and Down (dir = +1) through history.  The line being left is kept in
 * hcopy, so a half-typed line or an edit to an old entry survives a trip through history;
 * the history itself is never changed. */
static void ed_history(Ed *e, int dir) {
  int n = e->le->nhist, to = e->hidx + dir;
  if (to < 0 || to > n) return;
  free(e->hcopy[e->hidx]);
  e->hcopy[e->hidx] = xstrdup(e->b);
  e->hidx = to;
  ed_set(e, e->hcopy[to] ? e->hcopy[to] : e->le->hist[to]);
  refresh(e);
}

/* ---- completion ----
 * The completer adds whole words; the word being completed is the longest text ending at
 * the cursor that a candidate starts with.  So the completer alone decides what a word is
 * (a name, a command with its colon, a path with slashes) and the editor needs no list of
 * word characters that could disagree with it. */

typedef VEC(char *) Cands;

static void add_cand(void *cookie, const char *cand) {
  Cands *c = cookie;
  if (cand && *cand) vec_push(*c, xstrdup(cand));
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* How many bytes before pos equal the start of word. */
static size_t overlap(const char *line, size_t pos, const char *word, size_t wlen) {
  for (size_t k = pos < wlen ? pos : wlen; k > 0; k--)
    if (memcmp(line + pos - k, word, k) == 0) return k;
  return 0;
}

static void list_cands(Ed *e, Cands *c) {
  int w = 0;
  for (int i = 0; i < c->n; i++) {
    int cw = text_width(c->a[i], strlen(c->a[i]));
    if (cw > w) w = cw;
  }
  w += 2;
  int per_row = e->cols / w > 0 ? e->cols / w : 1;
  int rows = (c->n + per_row - 1) / per_row;
  Buf o = {0};
  /* Leave the line being edited intact on screen, then list below it. */
  int end = e->pwidth + text_width(e->b, e->len);
  int erow = end / e->cols;
  if (erow > e->crow) buf_printf(&o, "\x1b[%dB", erow - e->crow);
  /* a line that ends at the margin has its last row empty already */
  buf_puts(&o, end > 0 && end % e->cols == 0 ? "\r" : "\r\n");
  for (int r = 0; r < rows; r++) {          /* down the columns, as ls does */
    for (int k = 0; k < per_row; k++) {
      int i = k * rows + r;
      if (i >= c->n) break;
      buf_puts(&o, c->a[i]);
      if (k + 1 < per_row && (k + 1) * rows + r < c->n)
        for (int p = text_width(c->a[i], strlen(c->a[i])); p < w; p++) buf_putc(&o, ' ');
    }
    buf_puts(&o, "\r\n");
  }
  write_all(e->le->out, o.s, o.len);
  buf_free(&o);
  e->crow = 0;
  refresh(e);
}

static void ed_complete(Ed *e) {
  LineEdit *le = e->le;
  bool second = e->last_was_tab;
  if (!le->comp) {
    write_str(le->out, "\a");
    return;
  }
  Cands c = {0};
  le->comp(le->comp_env, e->b, (int)e->pos, add_cand, &c);
  if (c.n == 0) {
    write_str(le->out, "\a");
    vec_free(c);
    return;
  }
  qsort(c.a, (size_t)c.n, sizeof *c.a, cmp_str);
  int n = 0;                   /* drop duplicates */
  for (int i = 0; i < c.n; i++) {
    if (n > 0 && strcmp(c.a[n - 1], c.a[i]) == 0) free(c.a[i]);
    else c.a[n++] = c.a[i];
  }
  c.n = n;
  size_t plen = strlen(c.a[0]);             /* the common prefix, whole characters only */
  for (int i = 1; i < c.n; i++) {
    size_t k = 0;
    while (k < plen && c.a[i][k] == c.a[0][k]) k++;
    plen = k;
  }
  while (plen > 0 && plen < strlen(c.a[0]) && is_cont((unsigned char)c.a[0][plen])) plen--;
  /* The k bytes before the cursor already spell the candidates' start: add the rest. */
  size_t k = overlap(e->b, e->pos, c.a[0], plen);
  if (plen > k) {
    ed_insert(e, c.a[0] + k, plen - k);
  } else if (c.n > 1) {
    if (second) list_cands(e, &c);
    else write_str(le->out, "\a");
  }
  for (int i = 0; i < c.n; i++) free(c.a[i]);
  vec_free(c);
}

/* ---- keys ---- */

enum {
  K_NONE = -1, K_EOF = -2, K_INTR = -3,
  K_UP = 256, K_DOWN, K_LEFT, K_RIGHT, K_HOME, K_END, K_DEL, K_WLEFT, K_WRIGHT, K_WRUBOUT,
  K_CHAR,
};
#define CTL(c) ((c) & 0x1f)

/* After ESC: CSI "ESC [ params final", SS3 "ESC O x", or Alt plus a key.  Unknown
 * sequences are read to their end and ignored, so their tails never land in the line. */
static int read_escape(LineEdit *le) {
  int c = read_byte(le, ESC_TIMEOUT_MS, false);
  if (c < 0) return c == RB_EOF ? K_EOF : K_NONE;   /* a lone Escape */
  if (c == 'O') {
    c = read_byte(le, ESC_TIMEOUT_MS, false);
    switch (c) {
    case 'A': return K_UP;
    case 'B': return K_DOWN;
    case 'C': return K_RIGHT;
    case 'D': return K_LEFT;
    case 'H': return K_HOME;
    case 'F': return K_END;
    default: return c == RB_EOF ? K_EOF : K_NONE;
    }
  }
  if (c == 'b' || c == 'B') return K_WLEFT;
  if (c == 'f' || c == 'F') return K_WRIGHT;
  if (c == 127 || c == CTL('H')) return K_WRUBOUT;
  if (c != '[') return K_NONE;
  int params[4] = {0}, np = 0;
  for (int guard = 0; guard < 32; guard++) {
    c = read_byte(le, ESC_TIMEOUT_MS, false);
    if (c < 0) return c == RB_EOF ? K_EOF : K_NONE;
    if (c >= '0' && c <= '9') {
      if (np == 0) np = 1;
      if (np <= 4 && params[np - 1] < 10000) params[np - 1] = params[np - 1] * 10 + (c - '0');
    } else if (c == ';') {
      np = np == 0 ? 2 : np + 1;
    } else if (c >= 0x20 && c <= 0x3f) {
      /* other parameter or intermediate bytes: part of a sequence we do not know */
    } else {
      break;
    }
  }
  bool ctrl = np >= 2 && params[1] == 5;    /* xterm's ESC [ 1 ; 5 C is Ctrl-Right */
  switch (c) {
  case 'A': return K_UP;
  case 'B': return K_DOWN;
  case 'C': return ctrl ? K_WRIGHT : K_RIGHT;
  case 'D': return ctrl ? K_WLEFT : K_LEFT;
  case 'H': return K_HOME;
  case 'F': return K_END;
  case '~':
    switch (params[0]) {
    case 1: case 7: return K_HOME;
    case 4: case 8: return K_END;
    case 3: return K_DEL;
    }
  }
  return K_NONE;
}

/* One key: a control byte, a K_ code, or K_CHAR with one whole UTF-8 character in ch. */
static int read_key(LineEdit *le, char ch[4], int *chlen) {
  int c = read_byte(le, -1, false);
  if (c == RB_INTR_FD) return K_INTR;
  if (c < 0) return K_EOF;
  if (c == 27) return read_escape(le);
  if (c < 32 || c == 127) return c;
  int need = c < 0x80 ? 1 : c >= 0xF8 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (need == 0) return K_NONE;             /* a stray continuation byte or an invalid one */
  ch[0] = (char)c;
  for (int i = 1; i < need; i++) {
    int d = read_byte(le, ESC_TIMEOUT_MS, false);
    if (d < 0) return d == RB_EOF ? K_EOF : K_NONE;
    if (!is_cont((unsigned char)d)) {
      le->rpos--;                           /* not ours: the start of the next key */
      return K_NONE;
    }
    ch[i] = (char)d;
  }
  *chlen = need;
  return K_CHAR;
}

/* Put the cursor after the whole line and start a fresh row. */
static void ed_finish(Ed *e, const char *tail) {
  if (e->pos != e->len) {
    e->pos = e->len;
    refresh(e);
  }
  int erow, ecol;
  ed_rowcol(e, e->len, &erow, &ecol);
  write_str(e->le->out, tail);
  /* refresh already started a new row if the line ended at the margin */
  if (!(ecol == 0 && e->len > 0 && e->b[e->len - 1] != '\n') || *tail) write_str(e->le->out, "\r\n");
}

static char *edit(LineEdit *le, const char *prompt, bool *interrupted) {
  Ed e = {.le = le, .prompt = prompt, .pwidth = text_width(prompt, strlen(prompt))};
  e.hcopy = xcalloc((size_t)le->nhist + 1, sizeof *e.hcopy);
  e.hidx = le->nhist;
  ed_set(&e, "");
  refresh(&e);
  char *result = NULL;
  for (;;) {
    char ch[4];
    int chlen = 0;
    int k = read_key(le, ch, &chlen);
    bool tab = false;
    switch (k) {
    case K_EOF:
      goto done;
    case K_CHAR:
      ed_insert(&e, ch, (size_t)chlen);
      break;
    case '\r': case '\n':
      ed_finish(&e, "");
      result = xstrdup(e.b);
      goto done;
    case K_INTR:
      drain_intr_fd(le);
      /* fall through */
    case CTL('C'):
      ed_finish(&e, "^C");
      if (interrupted) *interrupted = true;
      result = xstrdup("");
      goto done;
    case CTL('D'):
      if (e.len == 0) goto done;
      ed_delete(&e, e.pos, next_char(&e, e.pos));
      break;
    case K_DEL:
      ed_delete(&e, e.pos, next_char(&e, e.pos));
      break;
    case 127: case CTL('H'):
      ed_delete(&e, prev_char(&e, e.pos), e.pos);
      break;
    case CTL('A'): case K_HOME: ed_move(&e, 0); break;
    case CTL('E'): case K_END: ed_move(&e, e.len); break;
    case CTL('B'): case K_LEFT: ed_move(&e, prev_char(&e, e.pos)); break;
    case CTL('F'): case K_RIGHT: ed_move(&e, next_char(&e, e.pos)); break;
    case K_WLEFT: ed_move(&e, word_left(&e, e.pos)); break;
    case K_WRIGHT: ed_move(&e, word_right(&e, e.pos)); break;
    case CTL('K'): ed_kill(&e, e.pos, e.len); break;
    case CTL('U'): ed_kill(&e, 0, e.pos); break;
    case CTL('W'): {                 /* back over blanks, then back over the non-blanks */
      size_t i = e.pos;
      while (i > 0 && isspace((unsigned char)e.b[i - 1])) i--;
      while (i > 0 && !isspace((unsigned char)e.b[i - 1])) i--;
      ed_kill(&e, i, e.pos);
      break;
    }
    case K_WRUBOUT: ed_kill(&e, word_left(&e, e.pos), e.pos); break;
    case CTL('Y'):
      if (le->kill) ed_insert(&e, le->kill, strlen(le->kill));
      break;
    case CTL('P'): case K_UP: ed_history(&e, -1); break;
    case CTL('N'): case K_DOWN: ed_history(&e, +1); break;
    case CTL('L'):
      write_str(le->out, "\x1b[H\x1b[2J");
      e.crow = 0;
      refresh(&e);
      break;
    case CTL('Z'):                   /* suspend as the shell would, and redraw on return */
      raw_off();
      kill(getpid(), SIGTSTP);
      if (!raw_on(le)) goto done;   /* the terminal went away while we were stopped */
      e.crow = 0;
      write_str(le->out, "\r\n");
      refresh(&e);
      break;
    case '\t':
      ed_complete(&e);
      tab = true;
      break;
    default:
      break;                          /* other control keys and unknown sequences */
    }
    e.last_was_tab = tab;
  }
done:
  for (int i = 0; i <= le->nhist; i++) free(e.hcopy[i]);
  free(e.hcopy);
  free(e.b);
  return result;
}

/* ---- the API ---- */

LineEdit *lineedit_new(int in_fd, int out_fd) {
  LineEdit *le = xcalloc(1, sizeof *le);
  le->in = in_fd;
  le->out = out_fd;
  le->intr_fd = -1;
  le->tty = isatty(in_fd);
  const char *term = getenv("TERM");
  le->dumb = term && strcmp(term, "dumb") == 0;
  return le;
}

void lineedit_free(LineEdit *le) {
  if (!le) return;
  for (int i = 0; i < le->nhist; i++) free(le->hist[i]);
  free(le->hist);
  free(le->kill);
  free(le);
}

char *lineedit_read(LineEdit *le, const char *prompt, bool *interrupted) {
  if (interrupted) *interrupted = false;
  if (!prompt) prompt = "";
  if (!le->tty) return read_plain(le, interrupted);
  if (le->dumb || !raw_on(le)) {
    write_str(le->out, prompt);
    return read_plain(le, interrupted);
  }
  char *line = edit(le, prompt, interrupted);
  raw_off();
  return line;
}

static void history_add1(LineEdit *le, const char *s, size_t n) {
  if (n == 0) return;
  if (le->nhist > 0) {
    const char *last = le->hist[le->nhist - 1];
    if (strlen(last) == n && memcmp(last, s, n) == 0) return;
  }
  if (le->nhist == HISTORY_MAX) {
    free(le->hist[0]);
    memmove(le->hist, le->hist + 1, (HISTORY_MAX - 1) * sizeof *le->hist);
    le->nhist--;
  }
  if (!le->hist) le->hist = xmalloc(HISTORY_MAX * sizeof *le->hist);
  le->hist[le->nhist++] = xstrndup(s, n);
}

/* An entry is a whole REPL input, newlines included (a definition recalled whole). */
void lineedit_history_add(LineEdit *le, const char *line) {
  if (!line) return;
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
  history_add1(le, line, n);
}

/* The history file is GNU readline's with timestamps, so that either editor reads what the
 * other wrote: a line "#DIGITS" starts each entry, and the lines up to the next such line
 * are the entry's (a multi-line input); a file without them holds an entry a line. */
static bool stamp_line(const char *s) { return s[0] == '#' && isdigit((unsigned char)s[1]); }

bool lineedit_history_load(LineEdit *le, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  Buf entry = {0};
  bool stamped = false, have = false;
  while ((n = getline(&line, &cap, f)) >= 0) {
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (stamp_line(line)) {
      if (have) history_add1(le, entry.s ? entry.s : "", entry.len);
      entry.len = 0;
      stamped = true;
      have = false;
    } else if (stamped) {
      if (have) buf_putc(&entry, '\n');
      buf_putn(&entry, line, (size_t)n);
      have = true;
    } else {
      history_add1(le, line, (size_t)n);
    }
  }
  if (have) history_add1(le, entry.s ? entry.s : "", entry.len);
  buf_free(&entry);
  free(line);
  bool ok = !ferror(f);
  fclose(f);
  return ok;
}

bool lineedit_history_save(LineEdit *le, const char *path) {
  /* 0600: what someone typed is nobody else's business */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    return false;
  }
  long now = (long)time(NULL);
  for (int i = 0; i < le->nhist; i++) fprintf(f, "#%ld\n%s\n", now, le->hist[i]);
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  return ok;
}

void lineedit_set_interrupt_fd(LineEdit *le, int fd) { le->intr_fd = fd; }

void lineedit_set_completer(LineEdit *le, LineEditCompleter fn, void *env) {
  le->comp = fn;
  le->comp_env = env;
}
