/* fuzz_dyn.c -- a libFuzzer entry point over the whole of dyn: the front end, the reference
 * evaluator and, when dyn is built with LLVM, the compiled CPU back end.  Any text, run as a
 * script in a session on target cpu (ref without LLVM), must give values or located
 * diagnostics, never a crash, a hang or undefined behaviour; then every tensor it bound must
 * survive a save/load round trip through the session: save(X, a.npy), load it back, save that
 * to b.npy, and the two files and the two printed tensors must be identical.
 *
 * Sizes are capped so that nothing legitimate runs long: an input with an integer literal
 * over 4096, or whose three largest literals multiply past 2^20, is skipped (the lines of
 * :sched, :cost, :code, :ir and :help, which run nothing, are not counted); each input has a
 * budget of DYN_FUZZ_BUDGET_MS (default 1000) after which the session is interrupted, and
 * allocations are capped by the sanitizer (max_allocation_size_mb).  Commands that touch the
 * file system or the machine's settings, or that take long by design, are left out (:load,
 * save, load, import "...", :time, :hw, :calibrate, :threads over 16).  The session is reset
 * after each input, so every crash reproduces from its input alone.
 *
 * Build and run: `make fuzz` (tests/fuzz/run.sh) builds this harness and fuzz_npy.c with
 * clang's libFuzzer and runs each for FUZZ_SECONDS (default 60), skipping when clang cannot
 * build a fuzzer.  By hand, from the build tree after ./configure and make:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I. -DDYN_SRCDIR='"."' \
 *     -DDYN_PKGDATADIR='"."' $(llvm-config-19 --cflags) src/[a-z]*.c (less main.c, repl.c's
 *     readline needs -lreadline) tests/fuzz/fuzz_dyn.c $(llvm-config-19 --libs) -lm -lpthread \
 *     -lreadline -o fuzz_dyn
 *   ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=256 ./fuzz_dyn \
 *     -max_total_time=60 -max_len=2048 -timeout=30 CORPUS_DIR tests/fuzz/corpus/dyn tests/golden tests/errors
 * A crash leaves crash-HASH; `./fuzz_dyn crash-HASH` runs it again. */
#include "config.h"
#include "dyn_int.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static Session *session;
static FILE *out;                  /* the session's values, read back for the round trip */
static int out_fd = -1;
static char dir[64];               /* where the round trip's files go */
static long budget_ms = 1000;

/* ---- the per-input budget: a thread interrupts the session past the deadline ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct timespec deadline;
static bool running;

static void *watchdog(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec now, nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&mu);
    bool late = running && (now.tv_sec > deadline.tv_sec ||
                            (now.tv_sec == deadline.tv_sec && now.tv_nsec > deadline.tv_nsec));
    pthread_mutex_unlock(&mu);
    /* the flag is cleared when each statement starts: keep setting it until the input ends */
    if (late) session_interrupt(session);
  }
  return NULL;
}

static void arm(bool on) {
  pthread_mutex_lock(&mu);
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += budget_ms / 1000;
  deadline.tv_nsec += (budget_ms % 1000) * 1000000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000;
  }
  running = on;
  pthread_mutex_unlock(&mu);
}

/* ---- what is run and what is skipped ---- */
static bool starts(const char *line, const char *cmd) {
  while (*line == ' ' || *line == '\t') line++;
  return !strncmp(line, cmd, strlen(cmd));
}

/* An input whose literals could make a legitimate program run long. */
static bool too_big(const char *text) {
  long top[3] = {1, 1, 1};
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    bool quiet = starts(line, ":sched") || starts(line, ":cost") || starts(line, ":code") ||
                 starts(line, ":ir") || starts(line, ":help");
    if (starts(line, ":threads") && atol(strchr(line, 's') + 1) > 16) return true;
    for (const char *p = line; !quiet && p < end; p++) {
      if (!isdigit((unsigned char)*p) || (p > line && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.')))
        continue;
      long v = 0;
      while (p < end && isdigit((unsigned char)*p)) {
        if (v > 4096) return true;
        v = v * 10 + (*p++ - '0');
      }
      if (v > 4096) return true;
      if (v > top[0]) {                        /* keep the three largest */
        top[2] = top[1];
        top[1] = top[0];
        top[0] = v;
      } else if (v > top[1]) {
        top[2] = top[1];
        top[1] = v;
      } else if (v > top[2]) {
        top[2] = v;
      }
    }
    line = *end ? end + 1 : end;
  }
  return top[0] * top[1] * top[2] > (1L << 20);
}

static bool skipped(const char *text) {
  return strstr(text, ":load") || strstr(text, "save") || strstr(text, "load(") || strstr(text, "import \"") ||
         strstr(text, ":time") || strstr(text, ":hw") || strstr(text, ":calibrate") || too_big(text);
}

/* ---- the session's output ---- */
static void out_clear(void) {
  fflush(out);
  if (ftruncate(out_fd, 0) != 0) __builtin_trap();
  rewind(out);
}

/* What the session printed since out_clear, NUL-terminated, in a new string. */
static char *out_text(void) {
  fflush(out);
  off_t n = lseek(out_fd, 0, SEEK_END);
  char *s = xmalloc((size_t)n + 1);
  if (pread(out_fd, s, (size_t)n, 0) != n) __builtin_trap();
  s[n] = 0;
  return s;
}

static char *run_capture(const char *text, RunStatus *st) {
  out_clear();
  *st = session_run(session, text, "fuzz");
  return out_text();
}

static char *file_bytes(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *len = ftell(f);
  rewind(f);
  char *b = xmalloc((size_t)*len + 1);
  if (fread(b, 1, (size_t)*len, f) != (size_t)*len) __builtin_trap();
  fclose(f);
  return b;
}

/* save(NAME), load it back, save that: files and printed values must agree. */
static void round_trip(const char *name) {
  char cmd[512], a[96], b[96];
  RunStatus st;
  snprintf(a, sizeof a, "%s/a.npy", dir);
  snprintf(b, sizeof b, "%s/b.npy", dir);
  snprintf(cmd, sizeof cmd, "save(%s, \"%s\")\n__rt = load(\"%s\")\nsave(__rt, \"%s\")", name, a, a, b);
  free(run_capture(cmd, &st));
  if (st != RUN_OK) {
    /* a tensor too large for the cap cannot be written or read: not a fault of the format */
    if (getenv("DYN_FUZZ_STRICT")) __builtin_trap();
    return;
  }
  snprintf(cmd, sizeof cmd, "print(%s)", name);
  char *pa = run_capture(cmd, &st);
  char *pb = run_capture("print(__rt)", &st);
  if (strcmp(pa, pb)) __builtin_trap();          /* the value changed on the way */
  long la = 0, lb = 0;
  char *fa = file_bytes(a, &la), *fb = file_bytes(b, &lb);
  if (!fa || !fb || la != lb || memcmp(fa, fb, (size_t)la)) __builtin_trap();
  free(fa);
  free(fb);
  free(pa);
  free(pb);
  unlink(a);
  unlink(b);
}

/* The tensors the input bound, from :vars ("NAME  f32[2, 3]"), each round-tripped. */
static void round_trips(void) {
  static const char *el[] = {"f32", "f64", "i32", "i64", "bool"};
  RunStatus st;
  char *vars = run_capture(":vars", &st), *save = NULL;
  char names[64][128];
  int n = 0;
  for (char *line = strtok_r(vars, "\n", &save); line && n < 64; line = strtok_r(NULL, "\n", &save)) {
    char type[64];
    if (sscanf(line, "%127s %63s", names[n], type) != 2 || !strcmp(names[n], "__rt")) continue;
    for (int i = 0; i < 5; i++) {
      size_t k = strlen(el[i]);
      if (!strncmp(type, el[i], k) && (type[k] == '[' || !type[k])) {
        n++;
        break;
      }
    }
  }
  free(vars);
  for (int i = 0; i < n; i++) round_trip(names[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("DYN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);   /* no GPU, the same everywhere */
  if (getenv("DYN_FUZZ_BUDGET_MS")) budget_ms = atol(getenv("DYN_FUZZ_BUDGET_MS"));
  snprintf(dir, sizeof dir, "%s/dyn-fuzz-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) __builtin_trap();
  out_fd = memfd_create("out", 0);
  out = fdopen(out_fd, "w+");
  FILE *null = fopen("/dev/null", "w");
#if HAVE_LLVM
  SessionOptions opt = {.target = "cpu", .threads = 2};
#else
  SessionOptions opt = {.target = "ref", .threads = 1};
#endif
  session = session_new(&opt, out, null);
  pthread_t t;
  pthread_create(&t, NULL, watchdog, NULL);
  pthread_detach(t);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = xstrndup((const char *)data, size);
  if (!memchr(data, 0, size) && !skipped(text)) {
    arm(true);
    RunStatus st;
    free(run_capture(text, &st));
    if (st == RUN_OK) round_trips();
    arm(false);
#if HAVE_LLVM
    free(run_capture(":reset\n:target cpu\n:threads 2", &st));
#else
    free(run_capture(":reset\n:target ref", &st));
#endif
  }
  free(text);
  return 0;
}
