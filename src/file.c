/* file.c -- files in and out, for whoever reads scripts and writes results.
 * Reading takes a whole file (or descriptor) into memory up to a limit, so an endless input
 * (/dev/zero, a FIFO that never closes) costs at most the limit.  Writing replaces a file
 * whole or not at all: the data goes to a temporary file in the destination's directory,
 * which is flushed to disk and renamed over the destination; on an error, an interrupt, or
 * a SIGINT/SIGTERM/SIGHUP that would end the process, the temporary is removed and the old
 * file stays as it was.  One file is written at a time (the signal handlers keep its name
 * in a static). */
#include "config.h"
#include "dyn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- reading ---- */

FileStatus file_read_all(const char *path, int fd, size_t max, bool regular_only,
                         volatile int *stop, char **text, size_t *len, int *err) {
  *text = NULL;
  *len = 0;
  *err = 0;
  bool mine = path != NULL;
  if (mine) {
    /* O_NONBLOCK when only a regular file will do: opening a FIFO would wait for a writer */
    fd = open(path, O_RDONLY | O_CLOEXEC | (regular_only ? O_NONBLOCK : 0));
    if (fd < 0) {
      *err = errno;
      return errno == EINTR && stop && *stop ? FILE_STOPPED : FILE_OPEN_FAILED;
    }
  }
  FileStatus st = FILE_OK;
  struct stat sb;
  if (fstat(fd, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) {
      *err = EISDIR;
      st = FILE_READ_FAILED;
    } else if (regular_only && !S_ISREG(sb.st_mode)) {
      st = FILE_NOT_REGULAR;
    }
  }
  size_t cap = 0, n = 0;
  char *s = NULL;
  while (st == FILE_OK) {
    if (n + 1 >= cap) {
      /* grow by doubling, but never past the limit and one byte more (the byte that tells
       * a file of exactly max bytes from a longer one) and the NUL */
      size_t want = cap ? 2 * cap : 65536;
      if (want > max + 2) want = max + 2;
      if (want <= cap) {
        st = FILE_TOO_LARGE;
        break;
      }
      char *t = realloc(s, want);
      if (!t) {
        *err = ENOMEM;
        st = FILE_READ_FAILED;
        break;
      }
      s = t;
      cap = want;
    }
    size_t room = cap - 1 - n;
    ssize_t got = read(fd, s + n, room);
    if (got > 0) {
      n += (size_t)got;
      if (n > max) st = FILE_TOO_LARGE;
    } else if (got == 0) {
      break;
    } else if (errno == EINTR) {
      if (stop && *stop) st = FILE_STOPPED;
    } else {
      *err = errno;
      st = FILE_READ_FAILED;
    }
  }
  if (mine) close(fd);
  if (st != FILE_OK) {
    free(s);
    return st;
  }
  if (!s && !(s = malloc(1))) {
    *err = ENOMEM;
    return FILE_READ_FAILED;
  }
  s[n] = 0;
  *text = s;
  *len = n;
  return FILE_OK;
}

/* ---- writing ---- */

struct FileOut {
  int fd;
  bool direct;                 /* a device or FIFO: written in place, nothing to rename */
  char *dest;                  /* what is replaced (a symbolic link's target) */
  char *tmp;                   /* the temporary, while it exists */
  struct sigaction old[4];
  bool caught[4];
};

/* The signals that end a process by default and are caught while a temporary exists, so
 * that it can be removed first.  SIGXFSZ (a file size limit) is ignored instead, so that
 * the write fails with EFBIG and is reported. */
static const int fatal_sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};

static char live_tmp[PATH_MAX + 1];
static volatile sig_atomic_t live;

static void on_fatal(int sig) {
  if (live) unlink(live_tmp);           /* async-signal-safe */
  raise(sig);                           /* SA_RESETHAND: the default action, on return */
}

static void catch_signals(FileOut *o) {
  for (int i = 0; i < 4; i++) {
    struct sigaction cur;
    o->caught[i] = false;
    if (sigaction(fatal_sigs[i], NULL, &cur) != 0 || cur.sa_handler != SIG_DFL) continue;
    /* a handler someone installed (the REPL's for SIGINT) is theirs: they see the signal
     * and ask the writer to stop through its flag */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fatal_sigs[i] == SIGXFSZ ? SIG_IGN : on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    if (sigaction(fatal_sigs[i], &sa, &o->old[i]) == 0) o->caught[i] = true;
  }
}

static void release_signals(FileOut *o) {
  for (int i = 0; i < 4; i++)
    if (o->caught[i]) sigaction(fatal_sigs[i], &o->old[i], NULL);
}

static void block_signals(sigset_t *old) {
  sigset_t set;
  sigemptyset(&set);
  for (int i = 0; i < 4; i++) sigaddset(&set, fatal_sigs[i]);
  sigprocmask(SIG_BLOCK, &set, old);
}

static void put(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* Six letters that no other writer in the directory is likely to pick at the same moment. */
static void tmp_suffix(char out[7], unsigned attempt) {
  static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 16 ^ attempt;
  for (int i = 0; i < 6; i++) {
    x = x * 6364136223846793005u + 1442695040888963407u;   /* an LCG step mixes the bits */
    out[i] = al[(x >> 33) % 36];
  }
  out[6] = 0;
}

static void free_out(FileOut *o) {
  free(o->dest);
  free(o->tmp);
  free(o);
}

FileOut *file_out_open(const char *path, volatile int *stop, char *err, size_t errlen) {
  FileOut *o = xcalloc(1, sizeof *o);
  o->fd = -1;
  /* Replace what a symbolic link points to, not the link: fopen("w") wrote through it. */
  char *real = NULL;
  struct stat sb;
  if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) real = realpath(path, NULL);
  o->dest = real ? real : xstrdup(path);
  bool exists = stat(o->dest, &sb) == 0;
  if (exists && S_ISDIR(sb.st_mode)) {
    put(err, errlen, "cannot open for writing: %s", strerror(EISDIR));
    free_out(o);
    return NULL;
  }
  if (exists && S_ISREG(sb.st_mode) && access(o->dest, W_OK) != 0) {
    /* a rename needs only the directory's permission: a read-only file stays so */
    put(err, errlen, "cannot open for writing: %s", strerror(errno));
    free_out(o);
    return NULL;
  }
  if (exists && !S_ISREG(sb.st_mode)) {
    /* /dev/null, a FIFO, a terminal: there is no old file to keep, and no directory to
     * put a temporary in (nor should one be renamed over a device) */
    o->direct = true;
    do {
      o->fd = open(o->dest, O_WRONLY | O_TRUNC | O_CLOEXEC);
    } while (o->fd < 0 && errno == EINTR && !(stop && *stop));
    if (o->fd < 0) {
      if (errno == EINTR) put(err, errlen, "interrupted");
      else put(err, errlen, "cannot open for writing: %s", strerror(errno));
      free_out(o);
      return NULL;
    }
    return o;
  }
  /* The temporary: ".NAME.tmpXXXXXX" beside the destination (rename works only within a
   * file system), or ".dyn.tmpXXXXXX" when NAME is too long to take the extra letters. */
  const char *slash = strrchr(o->dest, '/');
  size_t dirlen = slash ? (size_t)(slash - o->dest) + 1 : 0;
  const char *base = o->dest + dirlen;
  if (strlen(base) > 200) base = "dyn";
  size_t cap = dirlen + strlen(base) + 16;
  if (cap > sizeof live_tmp) {
    put(err, errlen, "cannot open for writing: %s", strerror(ENAMETOOLONG));
    free_out(o);
    return NULL;
  }
  o->tmp = xmalloc(cap);
  catch_signals(o);
  int e = 0;
  for (unsigned attempt = 0; attempt < 100 && o->fd < 0; attempt++) {
    char suf[7];
    tmp_suffix(suf, attempt);
    snprintf(o->tmp, cap, "%.*s.%s.tmp%s", (int)dirlen, o->dest, base, suf);
    /* the name is the handlers' only while the file is surely ours */
    sigset_t old;
    block_signals(&old);
    /* 0666 and the umask: the permissions a new file gets */
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    e = errno;
    if (o->fd >= 0) {
      memcpy(live_tmp, o->tmp, strlen(o->tmp) + 1);
      live = 1;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (o->fd < 0 && e != EEXIST) break;
  }
  if (o->fd < 0) {
    release_signals(o);
    if (exists) /* the file may well be writable: its directory is not */
      put(err, errlen, "cannot create a temporary file beside it: %s", strerror(e));
    else
      put(err, errlen, "cannot open for writing: %s", strerror(e));
    free_out(o);
    return NULL;
  }
  return o;
}

bool file_out_write(FileOut *o, const void *data, size_t n, volatile int *stop, char *err,
                    size_t errlen) {
  const char *p = data;
  while (n > 0) {
    if (stop && *stop) {
      put(err, errlen, "interrupted");
      return false;
    }
    ssize_t w = write(o->fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;        /* the loop's test sees a stop */
      put(err, errlen, "write error: %s", strerror(errno));
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

void file_out_abandon(FileOut *o) {
  if (!o) return;
  if (o->fd >= 0) close(o->fd);
  if (o->tmp && live) {
    unlink(o->tmp);
    live = 0;
  }
  if (!o->direct) release_signals(o);
  free_out(o);
}

bool file_out_commit(FileOut *o, char *err, size_t errlen) {
  int e = 0;
  const char *what = "write error";
  if (!o->direct && fsync(o->fd) != 0) e = errno;
  if (close(o->fd) != 0 && !e) e = errno;
  o->fd = -1;
  if (!e && !o->direct && rename(o->tmp, o->dest) != 0) {
    e = errno;
    what = "cannot replace the file";
  }
  if (e) {
    put(err, errlen, "%s: %s", what, strerror(e));
    file_out_abandon(o);
    return false;
  }
  if (!o->direct) {
    live = 0;
    /* the rename itself reaches the disk when the directory does */
    const char *slash = strrchr(o->dest, '/');
    char *dir = slash ? xstrndup(o->dest, slash == o->dest ? 1 : (size_t)(slash - o->dest)) : xstrdup(".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
    free(dir);
    release_signals(o);
  }
  free_out(o);
  return true;
}
