/* repl.c -- the interactive loop: read a line, run it in the session, repeat.  An input
 * that ends inside brackets or after an operator (RUN_INCOMPLETE) gets a "...> " prompt and
 * the lines are joined and run again.  Lines come from GNU readline when dyn is built with
 * it, else from lineedit.c; both give history in ~/.dyn_history and completion of commands,
 * names and, after :load, file names.  Input that is not a terminal is run as a script.
 */
#include "config.h"
#include "dyn_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#define PROMPT "dyn> "
#define PROMPT_MORE "...> "
#define HISTORY_FILE ".dyn_history"
#define HISTORY_MAX 1000

/* ---- Ctrl-C ------------------------------------------------------------------------------
 * While the session computes, SIGINT asks it to stop (session_interrupt is
 * async-signal-safe).  At a prompt it abandons the line: the handler only sets a flag and
 * writes to a pipe, which wakes whoever waits for keys -- our poll under readline, lineedit
 * through its interrupt fd on a dumb terminal (in raw mode lineedit reads ^C as a byte).
 * Installed without SA_RESTART so that blocking calls return. */

static Session *sig_session;
static volatile sig_atomic_t sig_computing, sig_caught;
static int sig_pipe[2] = {-1, -1};

static void on_sigint(int sig) {
  (void)sig;
  int saved = errno;
  sig_caught = 1;
  if (sig_computing && sig_session) session_interrupt(sig_session);
  if (sig_pipe[1] >= 0) {
    ssize_t w = write(sig_pipe[1], "", 1);    /* full pipe: a wake-up is already pending */
    (void)w;
  }
  errno = saved;
}

static void sigint_install(Session *s, struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sig_session = s;
  sigaction(SIGINT, &sa, old);
}

static void sigint_restore(const struct sigaction *old) { sigaction(SIGINT, old, NULL); }

/* Forget a ^C that arrived while no one was asking (between inputs). */
static void sigint_clear(void) {
  char tmp[64];
  if (sig_pipe[0] >= 0)
    while (read(sig_pipe[0], tmp, sizeof tmp) > 0) {}
  sig_caught = 0;
}

static RunStatus run_input(Session *s, const char *text, int n) {
  char origin[32];
  snprintf(origin, sizeof origin, "<repl:%d>", n);
  sig_computing = 1;
  RunStatus st = session_run(s, text, origin);
  sig_computing = 0;
  fflush(stdout);
  fflush(stderr);
  return st;
}

static bool blank(const char *s) {
  while (isspace((unsigned char)*s)) s++;
  return *s == 0;
}

static void buf_clear(Buf *b) {
  b->len = 0;
  if (b->s) b->s[0] = 0;
}

/* ---- completion: what the word at the cursor is, and what may complete it ---- */

typedef enum { CX_NAME, CX_COMMAND, CX_FILE } CompleteCtx;

/* Characters that end a name in an expression.  ':' and '.' are not among them, so
 * ":lo" and a qualified "nn.re" each reach session_complete whole. */
static char name_breaks[] = " \t\n\"'`@$><=;|&{}()[],+-*/%^!~?";
static char file_breaks[] = " \t\n";

/* When the line is ":load ARGS", where ARGS start. */
static bool load_args(const char *line, size_t *at) {
  size_t i = 0;
  while (line[i] == ' ' || line[i] == '\t') i++;
  if (strncmp(line + i, ":load", 5) != 0 || (line[i + 5] != ' ' && line[i + 5] != '\t'))
    return false;
  i += 5;
  while (line[i] == ' ' || line[i] == '\t') i++;
  *at = i;
  return true;
}

static CompleteCtx classify(const char *line, size_t start) {
  size_t at;
  if (load_args(line, &at) && start >= at) return CX_FILE;
  if (line[start] == ':') {
    for (size_t i = 0; i < start; i++)
      if (!isspace((unsigned char)line[i])) return CX_NAME;
    return CX_COMMAND;
  }
  return CX_NAME;
}

/* Commands are the session's candidates that start with ':' (the session offers them with
 * their colon); they are offered only at the start of a line, and names everywhere else.
 * With space_after, a command comes with the blank before its argument, as readline's
 * append character gives it. */
typedef struct {
  CompleteCtx cx;
  const char *word;
  size_t wlen;
  bool space_after;
  void (*add)(void *cookie, const char *cand);
  void *cookie;
} Filter;

static void filter_add(void *f_, const char *cand) {
  Filter *f = f_;
  if (!cand || (cand[0] == ':') != (f->cx == CX_COMMAND)) return;
  if (strncmp(cand, f->word, f->wlen) != 0) return;
  if (f->cx == CX_COMMAND && f->space_after) {
    Buf b = {0};
    buf_printf(&b, "%s ", cand);
    f->add(f->cookie, b.s);
    buf_free(&b);
  } else {
    f->add(f->cookie, cand);
  }
}

static void complete_session(Session *s, CompleteCtx cx, const char *word, bool space_after,
                             void (*add)(void *cookie, const char *cand), void *cookie) {
  Filter f = {cx, word, strlen(word), space_after, add, cookie};
  session_complete(s, word, filter_add, &f);
}

static char *history_path(void) {
  const char *home = getenv("HOME");
  if (!home || !*home) return NULL;
  Buf b = {0};
  buf_printf(&b, "%s/%s", home, HISTORY_FILE);
  return b.s;
}

typedef struct {
  bool use_rl;              /* GNU readline, else lineedit */
  LineEdit *le;
  Session *s;
  char *hist_path;
} Reader;

/* ---- reading lines: readline ---- */

#ifdef HAVE_READLINE

/* readline's callbacks take no argument, so the session they complete in is a static. */
static Session *rl_session;
static VEC(char *) rl_cands;
static int rl_next;
static CompleteCtx rl_cx;
static char *rl_line;
static bool rl_have_line;

static void rl_cands_add(void *cookie, const char *cand) {
  (void)cookie;
  vec_push(rl_cands, xstrdup(cand));
}

static char *rl_cands_next(const char *text, int state) {
  if (state == 0) {
    for (int i = 0; i < rl_cands.n; i++) free(rl_cands.a[i]);
    rl_cands.n = 0;
    rl_next = 0;
    complete_session(rl_session, rl_cx, text, false, rl_cands_add, NULL);
  }
  if (rl_next >= rl_cands.n) return NULL;
  return xstrdup(rl_cands.a[rl_next++]);    /* readline frees it */
}

static char **rl_attempt(const char *text, int start, int end) {
  (void)end;
  rl_attempted_completion_over = 1;         /* no fallback to file names for names */
  rl_cx = classify(rl_line_buffer, (size_t)start);
  if (rl_cx == CX_FILE) return rl_completion_matches(text, rl_filename_completion_function);
  /* "matmul" then "(" is the common case: no space after a name; a command takes one */
  rl_completion_append_character = rl_cx == CX_COMMAND ? ' ' : '\0';
  return rl_completion_matches(text, rl_cands_next);
}

/* Paths contain '/', '-' and '.', which end a name: after :load only blanks break words. */
static char *rl_word_breaks(void) {
  size_t at;
  if (load_args(rl_line_buffer, &at) && (size_t)rl_point >= at) return file_breaks;
  return name_breaks;
}

static void rl_on_line(char *line) {
  rl_line = line;
  rl_have_line = true;
  rl_callback_handler_remove();             /* else readline prompts again at once */
}

static void rl_reader_open(Reader *r, Session *s) {
  rl_session = s;
  rl_readline_name = "dyn";
  rl_attempted_completion_function = rl_attempt;
  rl_completion_word_break_hook = rl_word_breaks;
  rl_basic_word_break_characters = name_breaks;
  using_history();
  stifle_history(HISTORY_MAX);
  /* a multi-line input is one entry, kept whole in the file between timestamp lines */
  history_comment_char = '#';
  history_write_timestamps = 1;
  history_multiline_entries = 1;
  r->hist_path = history_path();
  if (r->hist_path) read_history(r->hist_path);     /* none yet is fine */
}

static void rl_reader_close(Reader *r) {
  if (r->hist_path) write_history(r->hist_path);    /* unwritable: silently no history */
  free(r->hist_path);
  for (int i = 0; i < rl_cands.n; i++) free(rl_cands.a[i]);
  vec_free(rl_cands);
}

static void rl_reader_history_add(Reader *r, const char *line) {
  (void)r;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last && strcmp(last->line, line) == 0) return;
  add_history(line);
}

/* readline's callback interface, so that a ^C at the prompt can abandon the line: we wait
 * for keys ourselves and see the signal's pipe.  readline()'s own SIGINT handling would
 * pass the signal on and carry on reading the same line. */
static char *rl_reader_read(Reader *r, const char *prompt, bool *interrupted) {
  (void)r;
  *interrupted = false;
  rl_have_line = false;
  rl_line = NULL;
  rl_callback_handler_install(prompt, rl_on_line);
  while (!rl_have_line) {
    if (sig_caught) {
      sig_caught = 0;
      rl_free_line_state();
      rl_callback_sigcleanup();
      rl_cleanup_after_signal();
      rl_callback_handler_remove();
      fputs("^C\n", stdout);
      fflush(stdout);
      *interrupted = true;
      return xstrdup("");
    }
    struct pollfd p[2] = {{.fd = fileno(rl_instream), .events = POLLIN},
                          {.fd = sig_pipe[0], .events = POLLIN}};
    int n = poll(p, sig_pipe[0] >= 0 ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      rl_callback_handler_remove();
      return NULL;
    }
    if (p[1].revents & POLLIN) {
      char tmp[64];
      while (read(sig_pipe[0], tmp, sizeof tmp) > 0) {}
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) rl_callback_read_char();
  }
  return rl_line;
}

#endif

/* ---- reading lines: lineedit (always built: $DYN_LINE_EDITOR=builtin selects it where
 * readline is also present, so one binary can test both) ---- */

static void add_file_cands(const char *word, void (*add)(void *cookie, const char *cand),
                           void *cookie) {
  const char *slash = strrchr(word, '/');
  size_t dlen = slash ? (size_t)(slash - word) + 1 : 0;   /* "dir/" as typed */
  const char *base = word + dlen;
  Buf dir = {0};
  const char *home = getenv("HOME");
  if (dlen == 0) buf_puts(&dir, ".");
  else if (word[0] == '~' && word[1] == '/' && home) {
    buf_puts(&dir, home);
    buf_putn(&dir, word + 1, dlen - 1);
  } else buf_putn(&dir, word, dlen);
  DIR *d = opendir(dir.s);
  if (d) {
    struct dirent *de;
    size_t blen = strlen(base);
    while ((de = readdir(d))) {
      const char *nm = de->d_name;
      if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0) continue;
      if (nm[0] == '.' && base[0] != '.') continue;      /* hidden unless asked for */
      if (strncmp(nm, base, blen) != 0) continue;
      Buf path = {0}, cand = {0};
      buf_printf(&path, "%s/%s", dir.s, nm);
      struct stat st;
      bool isdir = stat(path.s, &st) == 0 && S_ISDIR(st.st_mode);
      buf_putn(&cand, word, dlen);
      buf_puts(&cand, nm);
      if (isdir) buf_putc(&cand, '/');
      add(cookie, cand.s);
      buf_free(&path);
      buf_free(&cand);
    }
    closedir(d);
  }
  buf_free(&dir);
}

/* The word at the cursor: after :load it runs back to a blank (a path), else to one of
 * name_breaks.  lineedit replaces whatever text a candidate starts with. */
static void le_complete(void *env, const char *line, int cursor,
                        void (*add)(void *cookie, const char *cand), void *cookie) {
  Reader *r = env;
  size_t cur = (size_t)cursor, at, i = cur;
  bool file = load_args(line, &at) && cur >= at;
  const char *breaks = file ? file_breaks : name_breaks;
  while (i > 0 && !strchr(breaks, line[i - 1])) i--;
  char *word = xstrndup(line + i, cur - i);
  CompleteCtx cx = classify(line, i);
  if (cx == CX_FILE) add_file_cands(word, add, cookie);
  else complete_session(r->s, cx, word, true, add, cookie);
  free(word);
}

static void le_reader_open(Reader *r, Session *s) {
  r->s = s;
  r->le = lineedit_new(STDIN_FILENO, STDOUT_FILENO);
  lineedit_set_completer(r->le, le_complete, r);
  lineedit_set_interrupt_fd(r->le, sig_pipe[0]);     /* for ^C on a dumb terminal */
  r->hist_path = history_path();
  if (r->hist_path) lineedit_history_load(r->le, r->hist_path);
}

static void le_reader_close(Reader *r) {
  if (r->hist_path) lineedit_history_save(r->le, r->hist_path);
  free(r->hist_path);
  lineedit_free(r->le);
}

static void le_reader_history_add(Reader *r, const char *line) {
  lineedit_history_add(r->le, line);
}

static char *le_reader_read(Reader *r, const char *prompt, bool *interrupted) {
  return lineedit_read(r->le, prompt, interrupted);
}

/* ---- the reader in use ---- */

static void reader_open(Reader *r, Session *s) {
#ifdef HAVE_READLINE
  const char *ed = getenv("DYN_LINE_EDITOR");
  r->use_rl = !(ed && !strcmp(ed, "builtin"));
  if (r->use_rl) {
    rl_reader_open(r, s);
    return;
  }
#endif
  le_reader_open(r, s);
}

static void reader_close(Reader *r) {
#ifdef HAVE_READLINE
  if (r->use_rl) {
    rl_reader_close(r);
    return;
  }
#endif
  le_reader_close(r);
}

static void reader_history_add(Reader *r, const char *line) {
#ifdef HAVE_READLINE
  if (r->use_rl) {
    rl_reader_history_add(r, line);
    return;
  }
#endif
  le_reader_history_add(r, line);
}

static char *reader_read(Reader *r, const char *prompt, bool *interrupted) {
#ifdef HAVE_READLINE
  if (r->use_rl) return rl_reader_read(r, prompt, interrupted);
#endif
  return le_reader_read(r, prompt, interrupted);
}

/* ---- the loops ---- */

static int repl_interactive(Session *s, bool quiet, bool echo) {
  /* values of bare expressions are printed, and unfinished input is reported as such */
  session_set_interactive(s, true);
  if (!quiet) {
    Buf b = {0};
    session_banner(s, &b);
    if (b.len) {
      fputs(b.s, stdout);
      if (b.s[b.len - 1] != '\n') fputc('\n', stdout);
    }
    buf_free(&b);
  }
  if (pipe(sig_pipe) == 0) {
    for (int i = 0; i < 2; i++) {
      fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
      fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    }
  } else {
    sig_pipe[0] = sig_pipe[1] = -1;
  }
  /* For the whole loop, not only around session_run: a ^C between two inputs must not kill
   * the REPL, and readline needs it at the prompt. */
  struct sigaction old;
  sigint_install(s, &old);
  Reader r = {0};
  reader_open(&r, s);
  Buf pending = {0};
  bool more = false;
  int n = 1;
  for (;;) {
    fflush(stdout);
    fflush(stderr);
    sigint_clear();
    bool intr = false;
    char *line = reader_read(&r, more ? PROMPT_MORE : PROMPT, &intr);
    if (!line) {                          /* ^D on an empty line, or the terminal closed */
      if (!echo) fputc('\n', stdout);
      break;
    }
    if (echo) {                           /* a transcript: the input after its prompt */
      printf("%s%s\n", more ? PROMPT_MORE : PROMPT, line);
      fflush(stdout);
    }
    if (intr) {                           /* ^C: drop the line and any unfinished input */
      free(line);
      buf_clear(&pending);
      more = false;
      continue;
    }
    if (!more && blank(line)) {
      free(line);
      continue;
    }
    if (more) buf_putc(&pending, '\n');
    buf_puts(&pending, line);
    free(line);
    RunStatus st = run_input(s, pending.s, n);
    if (st == RUN_INCOMPLETE) {
      more = true;
      continue;
    }
    reader_history_add(&r, pending.s);    /* the whole input: Up recalls a definition whole */
    more = false;
    buf_clear(&pending);
    n++;
    if (st == RUN_QUIT) break;
  }
  fflush(stdout);
  reader_close(&r);
  sigint_restore(&old);
  for (int i = 0; i < 2; i++) {
    if (sig_pipe[i] >= 0) close(sig_pipe[i]);
    sig_pipe[i] = -1;
  }
  buf_free(&pending);
  return 0;
}

/* Input that is not a terminal is a script (lang/reference.md section 13), and runs exactly as
 * batch mode runs a file: all of it at once, named "<stdin>", with no prompt and no banner;
 * bare expressions are evaluated silently and the first error ends it with exit status 1
 * (section 9 there).  Feeding it line by line instead would need the incomplete-input protocol,
 * which the session offers only when interactive (and then prints values), and diagnostics
 * would count lines per input rather than through the script. */
int repl_run_stdin(Session *s) {
  char *text;
  size_t len;
  int e;
  switch (file_read_all(NULL, STDIN_FILENO, FILE_SOURCE_MAX, false, NULL, &text, &len, &e)) {
  case FILE_OK: break;
  case FILE_TOO_LARGE:
    fprintf(stderr, "dyn: standard input is larger than %zu MiB, the most a script may be\n", FILE_SOURCE_MAX >> 20);
    return 1;
  default:
    fprintf(stderr, "dyn: cannot read standard input: %s\n", strerror(e));
    return 1;
  }
  /* counted before the run, which takes the text */
  int lines = 1, col = 1;
  for (size_t i = 0; i < len; i++) {
    if (text[i] == '\n') lines++, col = 1;
    else col++;
  }
  struct sigaction old;
  sigint_install(s, &old);
  sig_computing = 1;
  RunStatus st = session_run_script(s, text, len, "<stdin>");
  sig_computing = 0;
  sigint_restore(&old);
  fflush(stdout);
  if (st == RUN_INCOMPLETE) {
    /* only if the caller made the session interactive: then nothing ran or was said */
    fprintf(stderr, "<stdin>:%d:%d: error: unexpected end of input\n", lines, col);
  }
  fflush(stderr);
  return st == RUN_ERROR || st == RUN_INCOMPLETE ? 1 : 0;
}

int repl_main(Session *s, bool quiet, bool force) {
  bool tty = isatty(STDIN_FILENO);
  if (!tty && !force) return repl_run_stdin(s);
  if (!tty) {
    /* `dyn -i -` on a pipe: REPL semantics (values printed, errors reported and survived)
     * with each input echoed after its prompt, so the output reads as a transcript */
    setenv("DYN_LINE_EDITOR", "builtin", 1);
    return repl_interactive(s, true, true);
  }
  return repl_interactive(s, quiet, false);
}
