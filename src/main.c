/* main.c -- the command line: `dyn` (the REPL), `dyn FILE.dyn` (batch), `dyn -e CODE`,
 * `dyn -i FILE` (run, then the REPL), and the options of lang/reference.md section 13.
 * Exit status: 0 success, 1 an error in the program (or output that could not be written),
 * 2 a usage error. */
#include "config.h"
#include "dyn.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* The exit status once standard output is closed: a write that failed (a full disk, a
 * closed pipe's reader gone without SIGPIPE) is said once and makes the status 1, so that
 * `dyn x.dyn > file` never looks like a success when the file lacks the output.  err_seen:
 * what the session saw while it ran (0: nothing). */
static int close_stdout(int status, int err_seen) {
  int e = err_seen;
  if (fflush(stdout) != 0 && !e) e = errno ? errno : EIO;
  if (ferror(stdout) && !e) e = EIO;
  if (fclose(stdout) != 0 && !e) e = errno ? errno : EIO;
  if (e) {
    fprintf(stderr, "dyn: standard output: %s\n", strerror(e));
    return 1;
  }
  return status;
}

static void usage(FILE *f) {
  fputs("usage: dyn [options] [FILE.dyn]\n"
        "       dyn [options] -e CODE\n"
        "       dyn [options] -i FILE.dyn\n"
        "\n"
        "With no file, dyn starts the REPL (or, when standard input is not a terminal, runs\n"
        "the script it reads from there).\n"
        "\n"
        "options:\n"
        "  -e CODE           run CODE and exit\n"
        "  -i FILE           run FILE, then start the REPL (-i -: the REPL even when\n"
        "                    standard input is not a terminal, echoing each input)\n"
        "  -q                no banner in the REPL\n"
        "  --target=T        cpu, gpu or ref: the back end that runs the code; gpu:tf32 or\n"
        "                    gpu:bf16 puts f32 contractions on the tensor cores (:target)\n"
        "  --hw=NAME|FILE    the hardware model (see hw/); default: this machine\n"
        "  --threads=N       CPU threads\n"
        "  --calibrate       measure this machine's micro-kernel throughput once and keep it\n"
        "  --version         print the version and exit\n"
        "  --help            print this help and exit\n", f);
}

int main(int argc, char **argv) {
  SessionOptions opt = {0};
  const char *code = NULL, *file = NULL;
  bool then_repl = false, quiet = false, calibrate = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return close_stdout(0, 0);
    } else if (!strcmp(a, "--version")) {
      printf("dyn %s\n", PACKAGE_VERSION);
      return close_stdout(0, 0);
    } else if (!strcmp(a, "-e") || !strcmp(a, "-i")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "dyn: %s needs an argument\n", a);
        usage(stderr);
        return 2;
      }
      if (a[1] == 'e') code = argv[++i];
      else {
        file = argv[++i];
        then_repl = true;
        if (!strcmp(file, "-")) file = NULL;     /* -i -: the REPL, even on a pipe */
      }
    } else if (!strcmp(a, "--calibrate")) {
      calibrate = true;
    } else if (!strcmp(a, "-q")) {
      quiet = true;
    } else if (!strncmp(a, "--target=", 9)) {
      opt.target = a + 9;
      static const char *ok[] = {"cpu", "gpu", "ref", "gpu:exact", "gpu:tf32", "gpu:bf16"};
      bool known = false;
      for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) known = known || !strcmp(opt.target, ok[k]);
      if (!known) {
        fprintf(stderr, "dyn: unknown target '%s': use cpu, gpu (gpu:tf32, gpu:bf16) or ref\n", opt.target);
        return 2;
      }
    } else if (!strncmp(a, "--hw=", 5)) {
      opt.hw = a + 5;
    } else if (!strncmp(a, "--threads=", 10)) {
      char *end;
      long n = strtol(a + 10, &end, 10);
      if (*end || n < 1 || n > 1024) {
        fprintf(stderr, "dyn: --threads needs a number from 1 to 1024\n");
        return 2;
      }
      opt.threads = (int)n;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "dyn: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    } else if (!file) {
      file = a;
    } else {
      fprintf(stderr, "dyn: only one script at a time ('%s' and '%s')\n", file, a);
      return 2;
    }
  }
  if (code && file) {
    fprintf(stderr, "dyn: -e and a script file cannot be combined\n");
    return 2;
  }
  Session *s = session_new(&opt, stdout, stderr);
  int status = 0;
  if (calibrate) {
    status = session_calibrate(s);
  } else if (code) {
    status = session_run(s, code, "-e") == RUN_ERROR ? 1 : 0;
  } else if (file) {
    RunStatus r = session_run_file(s, file);
    if (r == RUN_ERROR) status = 1;
    if (then_repl && r != RUN_QUIT) status = repl_main(s, quiet, true);
  } else {
    status = repl_main(s, quiet, then_repl);
  }
  status = close_stdout(status, session_output_error(s));
  session_free(s);
  return status;
}
