/* main.c -- the command line: `dyn` (the REPL), `dyn FILE.dyn` (batch), `dyn -e CODE`,
 * `dyn -i FILE` (run, then the REPL), NAME=INTEGER bindings after the script, and the
 * options of lang/reference.md section 13 (--diagnostics=json among them), parsed by
 * getopt_long as other tools parse theirs.
 * Exit status: 0 success, 1 an error in the program (or output that could not be written),
 * 2 a usage error. */
#include "config.h"
#include "dyn_int.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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
  fputs("usage: dyn [options] [FILE.dyn] [NAME=INTEGER ...]\n"
        "       dyn [options] -e CODE [NAME=INTEGER ...]\n"
        "       dyn [options] -i FILE.dyn [NAME=INTEGER ...]\n"
        "       dyn [options] --check FILE.dyn ...\n"
        "\n"
        "With no file, dyn starts the REPL (or, when standard input is not a terminal, runs\n"
        "the script it reads from there); the file - is standard input, read as a script.\n"
        "NAME=INTEGER after the script binds NAME before it runs, as `NAME = INTEGER` would.\n"
        "Options and their arguments may be written --opt ARG or --opt=ARG; -- ends them.\n"
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
        "  --check           type-check the files (or -e CODE) without running a statement:\n"
        "                    functions and imports are checked; status 1 if any error\n"
        "  --diagnostics=FMT text (the default: FILE:LINE:COL: error: ..., the line, a caret)\n"
        "                    or json (one object a line on standard error, for tools)\n"
        "  --calibrate       measure this machine's micro-kernel throughput once and keep it\n"
        "  --version         print the version and exit\n"
        "  -h, --help        print this help and exit\n", f);
}

/* An argument after the script: NAME=INTEGER, a name as the language spells one (a letter
 * or underscore, then letters, digits and underscores; not a keyword) and a decimal integer
 * that fits in an i64.  True if arg has that form. */
static bool binding_ok(const char *arg) {
  static const char *keywords[] = {"fn", "return", "where", "import", "and", "or", "not", "true", "false"};
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !(isalpha((unsigned char)arg[0]) || arg[0] == '_')) return false;
  for (const char *p = arg; p < eq; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_')) return false;
  for (size_t k = 0; k < sizeof keywords / sizeof *keywords; k++)
    if (strlen(keywords[k]) == (size_t)(eq - arg) && !strncmp(arg, keywords[k], (size_t)(eq - arg))) return false;
  const char *v = eq + 1 + (eq[1] == '-');
  if (!isdigit((unsigned char)*v)) return false;
  char *end;
  errno = 0;
  (void)strtoll(eq + 1, &end, 10);
  return !*end && errno != ERANGE;
}

/* dyn --check: each file (- is standard input), or the -e code, in a session of its own
 * that defines functions and imports but runs no statement (SessionOptions.check_only).
 * The exit status: 1 if any error was reported, 0 otherwise, 2 if there is nothing to check. */
static int check_files(const SessionOptions *opt, const char *code, char **files, int nfiles) {
  if (!code && nfiles == 0) {
    fprintf(stderr, "dyn: --check needs a file (or -e CODE)\n");
    return 2;
  }
  if (code && nfiles) {
    fprintf(stderr, "dyn: -e and a script file cannot be combined\n");
    return 2;
  }
  int status = 0;
  for (int i = 0; i < (code ? 1 : nfiles); i++) {
    Session *s = session_new(opt, stdout, stderr);
    RunStatus r = code ? session_run(s, code, "-e")
                : !strcmp(files[i], "-") ? (repl_run_stdin(s) ? RUN_ERROR : RUN_OK)
                : session_run_file(s, files[i]);
    if (r == RUN_ERROR) status = 1;
    session_free(s);
  }
  return close_stdout(status, 0);
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
  /* Every call allocates its results and temporaries afresh.  With glibc's default and
   * dynamic thresholds, blocks of a few hundred KiB to a few MiB can go back to the system
   * at each free and come back as fresh pages at the next call, zeroed by page faults:
   * conv2d of 1 x 64 x 56 x 56 by 64 3 x 3 filters took 6.5 ms a call that way, and 1.0 ms
   * with the heap kept (its model says 1.0).  The program keeps blocks of up to 32 MiB on
   * its heap and up to 64 MiB free at its top; larger tensors still come and go by mmap.  A
   * program that embeds libdyn keeps its own malloc settings. */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
  enum { OPT_TARGET = 256, OPT_HW, OPT_THREADS, OPT_CALIBRATE, OPT_VERSION, OPT_CHECK, OPT_DIAGNOSTICS };
  static const struct option longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"calibrate", no_argument, NULL, OPT_CALIBRATE},
    {"check", no_argument, NULL, OPT_CHECK},
    {"diagnostics", required_argument, NULL, OPT_DIAGNOSTICS},
    {"target", required_argument, NULL, OPT_TARGET},
    {"hw", required_argument, NULL, OPT_HW},
    {"threads", required_argument, NULL, OPT_THREADS},
    {NULL, 0, NULL, 0},
  };
  SessionOptions opt = {0};
  const char *code = NULL, *file = NULL;
  bool then_repl = false, quiet = false, calibrate = false, std_in = false;
  int c;
  opterr = 0;                /* the messages below are dyn's own */
  while ((c = getopt_long(argc, argv, ":he:i:q", longopts, NULL)) != -1) {
    switch (c) {
    case 'h':
      usage(stdout);
      return close_stdout(0, 0);
    case OPT_VERSION:
      printf("dyn %s\n", PACKAGE_VERSION);
      return close_stdout(0, 0);
    case 'e':
      code = optarg;
      break;
    case 'i':
      file = optarg;
      then_repl = true;
      if (!strcmp(file, "-")) file = NULL;     /* -i -: the REPL, even on a pipe */
      break;
    case 'q':
      quiet = true;
      break;
    case OPT_CALIBRATE:
      calibrate = true;
      break;
    case OPT_CHECK:
      opt.check_only = true;
      break;
    case OPT_TARGET: {
      opt.target = optarg;
      static const char *ok[] = {"cpu", "gpu", "ref", "gpu:exact", "gpu:tf32", "gpu:bf16"};
      bool known = false;
      for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) known = known || !strcmp(opt.target, ok[k]);
      if (!known) {
        fprintf(stderr, "dyn: unknown target '%s': use cpu, gpu (gpu:tf32, gpu:bf16) or ref\n", opt.target);
        return 2;
      }
      break;
    }
    case OPT_DIAGNOSTICS:
      if (strcmp(optarg, "text") && strcmp(optarg, "json")) {
        fprintf(stderr, "dyn: unknown diagnostics format '%s': use text or json\n", optarg);
        return 2;
      }
      opt.diag_json = !strcmp(optarg, "json");
      break;
    case OPT_HW:
      opt.hw = optarg;
      break;
    case OPT_THREADS: {
      char *end;
      long n = strtol(optarg, &end, 10);
      if (!*optarg || *end || n < 1 || n > 1024) {
        fprintf(stderr, "dyn: --threads needs a number from 1 to 1024\n");
        return 2;
      }
      opt.threads = (int)n;
      break;
    }
    case ':':                /* the option (argv[optind - 1]) lacks its argument */
      fprintf(stderr, "dyn: %s needs an argument\n", argv[optind - 1]);
      usage(stderr);
      return 2;
    default:                 /* '?': a long option is argv[optind - 1]; a short one, optopt */
      if (!strncmp(argv[optind - 1], "--", 2) || !optopt)
        fprintf(stderr, "dyn: unknown option '%s'\n", argv[optind - 1]);
      else
        fprintf(stderr, "dyn: unknown option '-%c'\n", optopt);
      usage(stderr);
      return 2;
    }
  }
  if (opt.check_only) return check_files(&opt, code, argv + optind, argc - optind);
  /* The operands: the script (unless -e or -i gave the code), then NAME=INTEGER bindings. */
  int first_binding = optind;
  if (!code && !then_repl && optind < argc) {
    file = argv[optind++];
    first_binding = optind;
    if (!strcmp(file, "-")) file = NULL, std_in = true;
  } else if (code && optind < argc && !strchr(argv[optind], '=')) {
    fprintf(stderr, "dyn: -e and a script file cannot be combined\n");
    return 2;
  }
  for (int i = first_binding; i < argc; i++) {
    if (binding_ok(argv[i])) continue;
    if (!strchr(argv[i], '=') && (file || std_in)) {
      fprintf(stderr, "dyn: only one script at a time ('%s' and '%s')\n", file ? file : "-", argv[i]);
      return 2;
    }
    fprintf(stderr, "dyn: '%s': an argument after the script binds a size, as NAME=INTEGER (N=128)\n", argv[i]);
    return 2;
  }
  if (code && file) {
    fprintf(stderr, "dyn: -e and a script file cannot be combined\n");
    return 2;
  }
  Session *s = session_new(&opt, stdout, stderr);
  int status = 0;
  /* the bindings, each run as the statement NAME = INTEGER before the script */
  for (int i = first_binding; i < argc && !calibrate; i++) {
    Buf stmt = {0};
    const char *eq = strchr(argv[i], '=');
    buf_printf(&stmt, "%.*s = %s", (int)(eq - argv[i]), argv[i], eq + 1);
    RunStatus r = session_run(s, stmt.s, "<command line>");
    buf_free(&stmt);
    if (r != RUN_OK) {
      session_free(s);
      return 2;
    }
  }
  if (calibrate) {
    status = session_calibrate(s);
  } else if (code) {
    status = session_run(s, code, "-e") == RUN_ERROR ? 1 : 0;
  } else if (file) {
    RunStatus r = session_run_file(s, file);
    if (r == RUN_ERROR) status = 1;
    if (then_repl && r != RUN_QUIT) status = repl_main(s, quiet, true);
  } else if (std_in) {
    status = repl_run_stdin(s);
  } else {
    status = repl_main(s, quiet, then_repl);
  }
  status = close_stdout(status, session_output_error(s));
  session_free(s);
  return status;
}
