/* session.c -- a session: making and ending it, running its input, imports, calibration,
 * and its entry points from C.  A script and a REPL session are one sequence of top-level
 * statements.  Each input is parsed into an arena (one compilation); an input that defines
 * functions keeps its arena alive for the session, since the checked functions point into
 * it.  It sits on top of the session's files: the statements are evaluated by toplevel.c,
 * commands are in commands.c, bindings and errors in state.c.
 */
#include "config.h"
#include "session_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

/* ---- the standard library, embedded at build time (src/stdlib_embed.c) ---- */
typedef struct { const char *name; const char *text; } StdlibModule;
extern const StdlibModule dyn_stdlib[];

/* ---- errors ---- */

void session_set_diag_sink(Session *s, void (*sink)(void *cookie, const Diag *d), void *cookie) {
  s->diag_sink = sink;
  s->diag_cookie = cookie;
}

/* ---- sources ---- */

static RunStatus run_source(Session *s, Source *src);

/* A script file's bytes, at most FILE_SOURCE_MAX of them: an endless file (/dev/zero, a
 * FIFO that never closes) costs that much and is then refused.  NULL with a message. */
static char *read_script(Session *s, const char *path, size_t *len, char *msg, size_t msglen) {
  char *text;
  int e;
  switch (file_read_all(path, -1, FILE_SOURCE_MAX, false, &s->interrupt, &text, len, &e)) {
  case FILE_OK: return text;
  case FILE_OPEN_FAILED: snprintf(msg, msglen, "cannot open %s: %s", path, strerror(e)); break;
  case FILE_READ_FAILED: snprintf(msg, msglen, "cannot read %s: %s", path, strerror(e)); break;
  case FILE_TOO_LARGE:
    snprintf(msg, msglen, "%s is larger than %zu MiB, the most a script may be", path, FILE_SOURCE_MAX >> 20);
    break;
  case FILE_STOPPED: snprintf(msg, msglen, "%s: interrupted", path); break;
  case FILE_NOT_REGULAR: snprintf(msg, msglen, "%s is not a regular file", path); break;
  }
  return NULL;
}

/* A script from a file or standard input as a source (taking text).  A UTF-8 byte-order
 * mark at its start is dropped, as editors that write one expect; a NUL byte anywhere is an
 * error at that byte and nothing of the script runs: such a file is not text (and a C
 * string of it would end there). */
static Source *script_source(Session *s, const char *name, char *text, size_t len) {
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
    memmove(text, text + 3, len - 3 + 1);
    len -= 3;
  }
  Source *src = state_add_source(s, name, text, len);
  const char *nul = memchr(text, 0, len);
  if (nul) {
    uint32_t at = (uint32_t)(nul - text);
    state_error(s, (Span){src, at, at + 1}, E_NUL_BYTE);
    return NULL;
  }
  return src;
}

RunStatus session_run_file_in(Session *s, const char *path, Span at) {
  if (s->depth > 16) {
    state_error(s, at, E_IMPORT, state_tmp_printf(s, "%s: files load each other too deeply (more than 16 levels)", path));
    return RUN_ERROR;
  }
  char msg[512];
  size_t len;
  char *text = read_script(s, path, &len, msg, sizeof msg);
  if (!text) {
    state_error(s, at, E_IMPORT, msg);
    return RUN_ERROR;
  }
  /* the outer input's diagnostics come first */
  state_emit(s, &s->diags);
  diag_clear(&s->diags);
  Source *src = script_source(s, path, text, len);
  if (!src) return RUN_ERROR;
  Arena *saved = s->tmp;
  s->depth++;
  RunStatus r = run_source(s, src);
  s->depth--;
  s->tmp = saved;
  return r == RUN_ERROR ? RUN_ERROR : r;
}

/* ---- statements ---- */

static RunStatus import_module(Session *s, const char *name, Span at, bool is_path) {
  const char *key = name;
  for (int i = 0; i < s->imported.n; i++)
    if (!strcmp(s->imported.a[i], key)) return RUN_OK;
  if (is_path) {
    vec_push(s->imported, xstrdup(key));
    return session_run_file_in(s, name, at);
  }
  for (const StdlibModule *m = dyn_stdlib; m->name; m++) {
    if (strcmp(m->name, name)) continue;
    vec_push(s->imported, xstrdup(key));
    char fname[128];
    snprintf(fname, sizeof fname, "stdlib/%s.dyn", name);
    Source *src = state_add_source(s, fname, xstrdup(m->text), strlen(m->text));
    Arena *saved = s->tmp;
    s->depth++;
    RunStatus r = run_source(s, src);
    s->depth--;
    s->tmp = saved;
    return r;
  }
  Buf known = {0};
  for (const StdlibModule *m = dyn_stdlib; m->name; m++) buf_printf(&known, "%s%s", known.len ? ", " : "", m->name);
  state_error(s, at, E_IMPORT, state_tmp_printf(s, "no standard module '%s' (there are: %s); to import a file, write import \"%s.dyn\"", name, known.s ? known.s : "none", name));
  buf_free(&known);
  return RUN_ERROR;
}

static void define_fn(Session *s, FnDecl *d, Arena *a, bool *keep) {
  if (builtin_find(d->name)) {
    state_error(s, d->name_span, E_BUILTIN, state_tmp_printf(s, "'%s' is a built-in function and cannot be redefined", d->name));
    return;
  }
  OpKind op;
  if (op_from_name(d->name, &op)) {
    state_error(s, d->name_span, E_BUILTIN, state_tmp_printf(s, "'%s' is a math function and cannot be redefined", d->name));
    return;
  }
  SemaEnv env = state_sema_env(s);
  Func *f = top_define(s, d, a, &env);
  if (!f) return;
  f->arena = NULL;            /* the input's arena is kept by the session instead */
  *keep = true;
  for (int i = 0; i < s->fns.n; i++)
    if (!strcmp(s->fns.a[i]->name, f->name)) {
      state_retire(s, s->fns.a[i]);
      s->fns.a[i] = f;
      return;
    }
  vec_push(s->fns, f);
}

static RunStatus run_stmt(Session *s, Stmt *st, bool *keep, bool quiet_value) {
  /* dyn --check: a definition is checked by defining it, an import by importing it (its
   * statements skipped in turn); the other statements were parsed and are not run */
  if (s->check_only && st->kind != ST_FN && st->kind != ST_IMPORT && st->kind != ST_RETURN) return RUN_OK;
  switch (st->kind) {
  case ST_FN:
    define_fn(s, st->fn, s->tmp, keep);
    break;
  case ST_IMPORT:
    return import_module(s, st->name, st->span, st->is_path);
  case ST_COMMAND:
    return cmd_run(s, st->text, st->span);
  case ST_RETURN:
    state_error(s, st->span, E_RETURN_TOP);
    break;
  case ST_DEF: {
    Value v = top_eval_def(s, st);
    if (!state_failed(s)) state_bind(s, st->name, v);
    break;
  }
  case ST_ASSIGN: {
    for (int i = 0; i < st->nnames; i++) {
      DynElem el;
      const char *nm = st->names[i];
      if (!strcmp(nm, "inf") || !strcmp(nm, "nan") || elem_from_name(nm, strlen(nm), &el)) {
        state_error(s, st->name_spans[i], E_BUILTIN, state_tmp_printf(s, "'%s' names a %s and cannot be bound", nm,
                                                            nm[0] == 'i' && nm[1] == 'n' ? "constant" : nm[0] == 'n' ? "constant" : "type"));
        return RUN_ERROR;
      }
    }
    Value v = top_eval(s, st->expr);
    if (state_failed(s)) break;
    if (st->tuple || st->nnames > 1) {
      int have = v.kind == VAL_TUPLE ? v.n : 1;
      if (have != st->nnames) {
        state_error(s, st->span, E_TUPLE_COUNT, st->expr->kind == EX_CALL ? st->expr->name : "the expression", have,
              have == 1 ? "" : "s", st->nnames, st->nnames == 1 ? " is" : "s are");
        val_free(&v);
        break;
      }
      if (v.kind == VAL_TUPLE) {
        for (int i = 0; i < v.n; i++) state_bind(s, st->names[i], val_copy(&v.items[i]));
        val_free(&v);
      } else {
        state_bind(s, st->names[0], v);
      }
      break;
    }
    if (v.kind == VAL_NONE) {
      state_error(s, st->expr->span, E_BUILTIN, state_tmp_printf(s, "this gives no value to bind to '%s'", st->names[0]));
      break;
    }
    state_bind(s, st->names[0], v);
    break;
  }
  case ST_EXPR: {
    Value v = top_eval(s, st->expr);
    if (!state_failed(s) && s->interactive && !quiet_value && v.kind != VAL_NONE) {
      Buf b = {0};
      val_format(&v, &b);
      state_print_line(s, b.s);
      buf_free(&b);
    }
    val_free(&v);
    break;
  }
  }
  /* a script whose output is lost stops: what follows would print into the void */
  return state_failed(s) || (s->out_errno && !s->interactive) ? RUN_ERROR : RUN_OK;
}

/* Parse and run a source; the caller prints what remains in s->diags. */
static RunStatus run_source_ex(Session *s, Source *src, bool allow_incomplete, bool quiet_value) {
  Arena *a = arena_new();
  s->tmp = a;
  int nst;
  bool incomplete = false;
  Diags parse_d = {0};
  struct timespec t0;
  if (s->stage_hook) clock_gettime(CLOCK_MONOTONIC, &t0);
  Stmt **sts = parse_source(a, src, &parse_d, &nst, &incomplete);   /* lexed and parsed */
  if (s->stage_hook && !parse_d.nerrors) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s->stage_hook(s->stage_cookie, TOP_PARSE, NULL, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
  }
  if (parse_d.nerrors) {
    if (incomplete && allow_incomplete) {
      diag_clear(&parse_d);
      arena_free(a);
      return RUN_INCOMPLETE;
    }
    state_emit(s, &parse_d);
    diag_clear(&parse_d);
    arena_free(a);
    return RUN_ERROR;
  }
  diag_clear(&parse_d);
  bool keep = false;
  RunStatus r = RUN_OK;
  /* a run stops at its first error; a check (dyn --check) reports every one */
  for (int i = 0; i < nst && (r == RUN_OK || s->check_only); i++) {
    s->tmp = a;
    RunStatus ri = run_stmt(s, sts[i], &keep, quiet_value);
    state_emit(s, &s->diags);
    if (s->diags.nerrors) ri = RUN_ERROR;
    diag_clear(&s->diags);
    if (r == RUN_OK) r = ri;
  }
  if (keep) vec_push(s->kept, a);
  else arena_free(a);
  return r;
}

static RunStatus run_source(Session *s, Source *src) { return run_source_ex(s, src, false, false); }

/* A command's argument run as statements (:time STMT); src from arg_source. */
RunStatus session_run_arg(Session *s, Source *src, bool quiet_value) {
  Arena *saved = s->tmp;
  RunStatus r = run_source_ex(s, src, false, quiet_value);
  s->tmp = saved;
  return r;
}

RunStatus session_run(Session *s, const char *text, const char *origin) {
  Source *src = state_add_source(s, origin, xstrdup(text), strlen(text));
  RunStatus r = run_source_ex(s, src, s->interactive, false);
  if (r == RUN_INCOMPLETE) {
    /* nothing ran: forget the source so a retry with more lines starts clean */
    s->sources.n--;
    free(src->name);
    free(src->text);
    free(src);
  }
  return r;
}

static RunStatus run_script(Session *s, char *text, size_t len, const char *origin, bool allow_incomplete) {
  Source *src = script_source(s, origin, text, len);
  if (!src) {
    state_emit(s, &s->diags);
    diag_clear(&s->diags);
    return RUN_ERROR;
  }
  RunStatus r = run_source_ex(s, src, allow_incomplete, false);
  if (r == RUN_INCOMPLETE) {          /* as session_run: nothing ran, forget the source */
    s->sources.n--;
    free(src->name);
    free(src->text);
    free(src);
  }
  return r;
}

RunStatus session_run_script(Session *s, char *text, size_t len, const char *origin) {
  return run_script(s, text, len, origin, s->interactive);
}

RunStatus session_run_file(Session *s, const char *path) {
  char msg[512];
  size_t len;
  char *text = read_script(s, path, &len, msg, sizeof msg);
  if (!text) {
    fprintf(s->err, "dyn: %s\n", msg);
    return RUN_ERROR;
  }
  return run_script(s, text, len, path, false);
}

/* ---- calibration ---- */

/* What identifies the hardware a calibration was made on.  Not the clock: detection times
 * it at each start (hw_clock.c), and it moves by a few percent from one start to the next. */
static void fingerprint(const HwModel *hw, Buf *out) {
  buf_printf(out, "%s|%s|%d|%d", hw->llvm_cpu, hw->llvm_features, hw->cores, hw->vector_bits);
}

static char *calibration_path(void) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  Buf b = {0};
  if (xdg && *xdg) buf_printf(&b, "%s/dyn", xdg);
  else if (home && *home) buf_printf(&b, "%s/.cache/dyn", home);
  else return NULL;
  return b.s;
}

/* The cache is a few lines; anything longer is not one of ours. */
#define CALIBRATION_MAX 65536

/* A calibrated peak is believed only near the model's: a measurement cannot beat the
 * hardware by 4x, nor fall below a hundredth of what the threads it ran on can do.  Past
 * either, the file is damaged or from another machine with the same fingerprint. */
static bool plausible_peak(const HwModel *hw, double peak, int threads) {
  double model = hw->peak_gflops_f32;
  if (!isfinite(peak) || peak <= 0) return false;
  if (!(model > 0)) return true;           /* nothing to compare with */
  double share = hw->cores > 0 && threads > 0 && threads < hw->cores ? (double)threads / hw->cores : 1;
  return peak <= 4 * model && peak >= model * share / 100;
}

/* The level of the model a calibration key names ("l2.gbs", "dram.total_gbs",
 * "l3.kept_bytes": the level's name in lower case), or -1. */
static int calibration_level(const HwModel *hw, const char *key) {
  const char *dot = strchr(key, '.');
  if (!dot || (strcmp(dot, ".gbs") && strcmp(dot, ".total_gbs") && strcmp(dot, ".kept_bytes"))) return -1;
  for (int i = 0; i < hw->nlevels; i++)
    if ((size_t)(dot - key) == strlen(hw->level[i].name) && !strncasecmp(key, hw->level[i].name, (size_t)(dot - key)))
      return i;
  return -1;
}

/* A measured rate is believed within 20x of the model's either way: the files' guesses are
 * not that far off, and a damaged file or another machine's figure may be. */
static bool plausible_gbs(double model, double measured) {
  if (!isfinite(measured) || measured <= 0) return false;
  return !(model > 0) || (measured <= 20 * model && measured >= model / 20);
}

/* Use a calibration made on this hardware, if there is one.  Only a regular file of a
 * sensible size is read: a FIFO or a link to /dev/zero in its place must not hang or fill
 * every start-up.  A file that cannot be used is ignored with a note. */
static void load_calibration(Session *s) {
  char *dir = calibration_path();
  if (!dir) return;
  Buf path = {0}, fp = {0};
  buf_printf(&path, "%s/calibration.txt", dir);
  fingerprint(&s->host_hw, &fp);
  char *text;
  size_t len;
  int e;
  FileStatus st = file_read_all(path.s, -1, CALIBRATION_MAX, true, NULL, &text, &len, &e);
  if (st == FILE_NOT_REGULAR) {
    fprintf(s->err, "dyn: ignoring %s: not a regular file\n", path.s);
  } else if (st == FILE_TOO_LARGE) {
    fprintf(s->err, "dyn: ignoring %s: larger than %d KiB, not a calibration\n", path.s, CALIBRATION_MAX / 1024);
  } else if (st == FILE_OK) {
    bool match = false;
    double peak = 0, gbs[HW_MAX_LEVELS] = {0}, total[HW_MAX_LEVELS] = {0}, kept[HW_MAX_LEVELS] = {0}, sync_us = 0, call_us = 0,
           wcost = 0, lscale = 0;
    int threads = 0;
    char key[64], val[900], *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      if (sscanf(line, "%63s = %899[^\n]", key, val) != 2) continue;
      if (!strcmp(key, "fingerprint")) match = !strcmp(val, fp.s);
      else if (!strcmp(key, "peak_gflops_f32")) peak = strtod(val, NULL);
      else if (!strcmp(key, "threads")) threads = atoi(val);
      else if (!strcmp(key, "sync_us")) sync_us = strtod(val, NULL);
      else if (!strcmp(key, "call_us")) call_us = strtod(val, NULL);
      else if (!strcmp(key, "write_cost")) wcost = strtod(val, NULL);
      else if (!strcmp(key, "lane_scale")) lscale = strtod(val, NULL);
      else {
        int i = calibration_level(&s->host_hw, key);
        if (i >= 0) *(strstr(key, ".total_gbs") ? &total[i] : strstr(key, ".kept_bytes") ? &kept[i] : &gbs[i]) = strtod(val, NULL);
      }
    }
    free(text);
    if (match && !plausible_peak(&s->host_hw, peak, threads)) {
      fprintf(s->err, "dyn: ignoring %s: a peak of %g GFLOP/s is not plausible for %s (the model says %.1f); run dyn --calibrate again\n",
              path.s, peak, s->host_hw.name, s->host_hw.peak_gflops_f32);
    } else if (match) {
      hw_set_measured_peak(&s->host_hw, peak);
      s->host_peak_measured = true;
      /* a fork-join measured on the calibration's threads, believed up to a millisecond */
      if (isfinite(sync_us) && sync_us > 0 && sync_us < 1000) s->host_hw.sync_us = sync_us;
      else if (sync_us != 0)
        fprintf(s->err, "dyn: ignoring %s: a fork-join of %g us is not plausible; run dyn --calibrate again\n", path.s, sync_us);
      /* and a call, believed up to a millisecond too */
      if (isfinite(call_us) && call_us > 0 && call_us < 1000) s->host_hw.call_us = call_us;
      else if (call_us != 0)
        fprintf(s->err, "dyn: ignoring %s: a call of %g us is not plausible; run dyn --calibrate again\n", path.s, call_us);
      /* and a written byte's cost in memory, believed between a tenth and 4 read bytes */
      if (isfinite(wcost) && wcost >= 0.1 && wcost <= 4) s->host_hw.write_cost = wcost;
      else if (wcost != 0)
        fprintf(s->err, "dyn: ignoring %s: a written byte costing %g read bytes is not plausible; run dyn --calibrate again\n",
                path.s, wcost);
      /* and the vector math's share of the pipes' rate, believed between a tenth and 4 */
      if (isfinite(lscale) && lscale >= 0.1 && lscale <= 4) s->host_hw.lane_scale = lscale;
      else if (lscale != 0)
        fprintf(s->err, "dyn: ignoring %s: vector math at %g of its pipes' rate is not plausible; run dyn --calibrate again\n",
                path.s, lscale);
      for (int i = 0; i < s->host_hw.nlevels; i++) {
        const HwLevel *lv = &s->host_hw.level[i];
        /* what a guest's share of a shared cache keeps: from the share to the whole cache */
        if (kept[i] && kept[i] >= (double)lv->bytes && kept[i] <= (double)lv->whole_bytes)
          s->host_hw.level[i].kept_bytes = (int64_t)kept[i];
        else if (kept[i])
          fprintf(s->err, "dyn: ignoring %s's %s capacity: %.0f bytes kept is not plausible for %s (the model counts on %lld of the %lld reported); run dyn --calibrate again\n",
                  path.s, lv->name, kept[i], s->host_hw.name, (long long)lv->bytes, (long long)lv->whole_bytes);
        if (!gbs[i] && !total[i]) continue;
        if (plausible_gbs(lv->gbs, gbs[i]) && plausible_gbs(lv->total_gbs, total[i]) && total[i] >= gbs[i] / 2)
          hw_set_measured_gbs(&s->host_hw, i, gbs[i], total[i]);
        else
          fprintf(s->err, "dyn: ignoring %s's %s bandwidths: %g GB/s a core and %g in all are not plausible for %s (the model says %.0f and %.0f); run dyn --calibrate again\n",
                  path.s, lv->name, gbs[i], total[i], s->host_hw.name, lv->gbs, lv->total_gbs);
      }
    }
  }
  free(dir);
  buf_free(&path);
  buf_free(&fp);
}

/* The time of a call of compiled code through the session (session_call: binding the
 * sizes, checking the facts, finding the plans, allocating the result, starting the kernel)
 * whose one kernel does next to nothing, in microseconds: the fastest of seven rounds' means
 * (a shared host's slow phases last seconds), 0 where it cannot be had. */
#define CALL_ROUNDS 7
#define CALL_RUNS 400
static double calibrate_call(Session *s) {
  if (session_run(s, "fn calibrate_call(X: f32[N]) -> f32[N] {\n  Y = X * 2.0\n  return Y\n}", "dyn --calibrate") != RUN_OK)
    return 0;
  int64_t n = 1;
  char msg[128];
  Tensor *x = tensor_new(DYN_F32, 1, &n, msg, sizeof msg), *out = NULL;
  Buf err = {0};
  double best = 0;
  bool ok = x && session_call(s, "calibrate_call", &x, 1, &out, 1, &err);   /* compiled now */
  tensor_release(out);
  for (int r = 0; r < CALL_ROUNDS && ok; r++) {
    double t0 = now_s();
    for (int i = 0; i < CALL_RUNS && ok; i++) {
      out = NULL;
      ok = session_call(s, "calibrate_call", &x, 1, &out, 1, &err);
      tensor_release(out);
    }
    double us = (now_s() - t0) / CALL_RUNS * 1e6;
    if (ok && (best == 0 || us < best)) best = us;
  }
  tensor_release(x);
  buf_free(&err);
  return ok ? best : 0;
}

/* The share of the lane-operations a second that the model's vector pipes promise which
 * compiled vector math reaches on this machine, measured on a chain of the stdlib's kinds
 * (gelu's sigmoid form, silu, an exponential) over the session's threads: the model's
 * prediction and the time taken, each at two sizes whose operands stay in L2 (96 and 288
 * KiB a thread), so that the fixed costs of a call (its fork-join, the result's allocation)
 * drop out of both differences; both are over 32K elements, so both are split over all the
 * threads (cpu_task_count: a smaller one ran in one task, the larger on two, and the
 * difference measured the split).  The two sizes take turns within each of nine rounds, and
 * the median round's share is kept: a shared host's slow phases last seconds, and each
 * size's best time taken apart moved the share by a third from one calibration to the
 * next.  At the pipes' full rate the model had gelu of f32[256, 1024] at 25 us where it took
 * 31-38 on 2 threads of a Zen 5 guest, silu and softmax in L2 20-30 % under too (0.70
 * measured there: 31 us predicted).  0 where it cannot be had. */
#define LANE_ROUNDS 9
static double calibrate_lanes(Session *s) {
  if (session_run(s, "fn calibrate_lanes(X: f32[N]) -> f32[N] {\n"
                     "  Y[n] = max(X[n], -12.0) * sigmoid(X[n] * (1.5957691216057308 + 0.07135481627260025 * X[n] * X[n]))"
                     " + X[n] * sigmoid(X[n]) + exp(0.5 * X[n])\n  return Y\n}", "dyn --calibrate") != RUN_OK)
    return 0;
  int t = s->threads > 1 ? s->threads : 1;
  int64_t sizes[2] = { (int64_t)t * 24576, (int64_t)t * 73728 };    /* both split over the threads */
  Tensor *x[2] = { NULL, NULL };
  double pred[2] = { 0, 0 }, share[LANE_ROUNDS];
  int got = 0;
  bool ok = true;
  Buf err = {0};
  char msg[128];
  for (int z = 0; z < 2 && ok; z++) {
    Tensor *out = NULL;
    if (!(x[z] = tensor_new(DYN_F32, 1, &sizes[z], msg, sizeof msg))) {
      ok = false;
      break;
    }
    for (int64_t i = 0; i < sizes[z]; i++) tensor_set_f64(x[z], i, (double)(i % 97) / 16.0 - 3.0);
    ok = session_call(s, "calibrate_lanes", &x[z], 1, &out, 1, &err);     /* compiled now */
    tensor_release(out);
    pred[z] = ok ? session_predict(s, "calibrate_lanes", &x[z], 1) : 0;
  }
  double dp = pred[1] - pred[0];
  for (int r = 0; r < LANE_ROUNDS && ok && dp > 0; r++) {
    double sec[2];
    for (int z = 0; z < 2 && ok; z++) {
      int runs = (int)(2e6 / (double)sizes[z]) + 20;
      double t0 = now_s();
      for (int i = 0; i < runs && ok; i++) {
        Tensor *out = NULL;
        ok = session_call(s, "calibrate_lanes", &x[z], 1, &out, 1, &err);
        tensor_release(out);
      }
      sec[z] = (now_s() - t0) / runs;
    }
    if (ok && sec[1] > sec[0]) share[got++] = dp / (sec[1] - sec[0]);
  }
  tensor_release(x[0]);
  tensor_release(x[1]);
  buf_free(&err);
  if (!ok || got < LANE_ROUNDS / 2 + 1) return 0;
  sort_doubles(share, (size_t)got);
  /* the model's rate was already scaled by the share a calibration read at start-up */
  return share[got / 2] * (s->hw.lane_scale > 0 ? s->hw.lane_scale : 1);
}

int session_calibrate(Session *s) {
  if (s->hw_foreign) {
    fprintf(s->err, "dyn: --calibrate measures this CPU, and %s is a model of another: calibrate without --hw\n", s->hw.name);
    return 1;
  }
  if (!be_cpu(s)) {
    fprintf(s->err, "dyn: --calibrate: %s\n", s->cpu_why);
    return 1;
  }
  double p1, pall;
  char msg[512];
  fprintf(s->out, "measuring the f32 micro-kernel on %s (%d threads)...\n", s->hw.name, s->threads);
  fflush(s->out);
  if (!cpu_calibrate(s->cpu, &p1, &pall, msg, sizeof msg)) {
    fprintf(s->err, "dyn: --calibrate: %s\n", msg);
    return 1;
  }
  fprintf(s->out, "measuring the memory's read rates...\n");
  fflush(s->out);
  CalMemory mem;
  if (!cpu_calibrate_memory(s->cpu, &mem, msg, sizeof msg)) {
    fprintf(s->err, "dyn: --calibrate: %s\n", msg);
    return 1;
  }
  /* The kernel again after the memory, the faster of the two kept: a shared host's slow
   * phases last seconds, and one covered the first second of a calibration of Emerald
   * Rapids (210 GFLOP/s on 2 threads stored, where make bench measured 345 a minute later
   * and every prediction was half again too long). */
  double q1, qall;
  if (cpu_calibrate(s->cpu, &q1, &qall, msg, sizeof msg)) {
    p1 = fmax(p1, q1);
    pall = fmax(pall, qall);
  }
  fprintf(s->out, "peak: %.1f GFLOP/s on one thread, %.1f GFLOP/s on %d (the hardware model says %.1f)\n", p1, pall,
          s->threads, s->hw.peak_gflops_f32);
  Buf mline = {0};
  for (int i = 0; i < s->hw.nlevels; i++)
    if (mem.gbs[i] > 0)
      buf_printf(&mline, "%s%s %.1f GB/s a core, %.1f in all (the model says %.0f and %.0f)", mline.len ? "; " : "",
                 s->hw.level[i].name, mem.gbs[i], mem.total_gbs[i], s->hw.level[i].gbs, s->hw.level[i].total_gbs);
  /* rounded to what this and :hw print, and kept so (as sync_us below) */
  mem.write_cost = round(mem.write_cost * 1e2) / 1e2;     /* at least 0.1 (cpu_calibrate_memory) */
  if (mem.write_cost > 0)
    buf_printf(&mline, "; a byte written there costs %.2f read (read for ownership and written back: the model assumed 2)",
               mem.write_cost);
  fprintf(s->out, "memory: %s\n", mline.len ? mline.s : "no level past L1 to measure");
  buf_free(&mline);
  for (int i = 0; i < s->hw.nlevels; i++)
    if (mem.kept_bytes[i] > 0)
      fprintf(s->out, "%s: kept %.1f MiB of a set read again and again (the model's share: %.1f MiB of the %.1f MiB reported)\n",
              s->hw.level[i].name, mem.kept_bytes[i] / (1 << 20), (double)s->hw.level[i].bytes / (1 << 20),
              (double)s->hw.level[i].whole_bytes / (1 << 20));
  double sync_us = 0;
  if (s->threads > 1) {
    if (!cpu_calibrate_sync(s->cpu, &sync_us, msg, sizeof msg)) {
      fprintf(s->err, "dyn: --calibrate: %s\n", msg);
      return 1;
    }
    /* rounded to what this and :sched print, and kept so in calibration.txt, so that the
     * two agree: 0.7749 printed 0.77 here, was kept as 0.775 and read 0.78; kept to three
     * places, 2.455 printed 2.46 here and, read back as 2.4549999... us, 2.45 there */
    sync_us = fmax(round(sync_us * 1e2) / 1e2, 0.01);
    fprintf(s->out, "fork-join: %.2f us on %d threads (the model assumed %.2f)\n", sync_us, s->threads,
            sched_sync_s(NULL) * 1e6);
  }
  double call_us = round(calibrate_call(s) * 1e3) / 1e3;
  if (call_us > 0)
    fprintf(s->out, "call: %.2f us a call of compiled code whose one kernel does next to nothing (the model assumed %.2f)\n",
            call_us, cpu_call_s(NULL) * 1e6);
  /* rounded to what this and :hw print, and kept so */
  double lane_scale = round(calibrate_lanes(s) * 1e2) / 1e2;
  if (lane_scale > 0)
    fprintf(s->out, "vector math: %.2f of the lane-operations a second that %d vector pipes promise (the model "
            "assumed 1)\n", lane_scale, s->hw.vec_units > s->hw.fma_units ? s->hw.vec_units : s->hw.fma_units);
  char *dir = calibration_path();
  if (!dir) {
    fprintf(s->err, "dyn: --calibrate: no $HOME or $XDG_CACHE_HOME to keep the result in\n");
    return 1;
  }
  Buf cmd = {0}, path = {0}, fp = {0};
  /* mkdir -p, one level at a time */
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(dir, 0755);
      *p = '/';
    }
  mkdir(dir, 0755);
  buf_printf(&path, "%s/calibration.txt", dir);
  fingerprint(&s->hw, &fp);
  /* replaced whole, so that a full disk or a kill leaves the last good calibration */
  Buf text = {0};
  buf_printf(&text, "# dyn --calibrate: measured once on this hardware, never per shape\n");
  buf_printf(&text, "fingerprint = %s\npeak_gflops_f32_1 = %.3f\npeak_gflops_f32 = %.3f\nthreads = %d\n", fp.s, p1, pall, s->threads);
  for (int i = 0; i < s->hw.nlevels; i++)
    if (mem.gbs[i] > 0) {
      char lname[16];
      size_t n = 0;
      for (; s->hw.level[i].name[n] && n < sizeof lname - 1; n++) lname[n] = (char)tolower((unsigned char)s->hw.level[i].name[n]);
      lname[n] = 0;
      buf_printf(&text, "%s.gbs = %.3f\n%s.total_gbs = %.3f\n", lname, mem.gbs[i], lname, mem.total_gbs[i]);
      if (mem.kept_bytes[i] > 0) buf_printf(&text, "%s.kept_bytes = %.0f\n", lname, mem.kept_bytes[i]);
    }
  if (sync_us > 0) buf_printf(&text, "sync_us = %.3f\n", sync_us);
  if (call_us > 0) buf_printf(&text, "call_us = %.3f\n", call_us);
  if (mem.write_cost > 0) buf_printf(&text, "write_cost = %.3f\n", mem.write_cost);
  if (lane_scale > 0) buf_printf(&text, "lane_scale = %.3f\n", lane_scale);
  FileOut *f = file_out_open(path.s, NULL, msg, sizeof msg);
  bool ok = f && file_out_write(f, text.s, text.len, NULL, msg, sizeof msg);
  if (f && !ok) file_out_abandon(f);
  if (ok) ok = file_out_commit(f, msg, sizeof msg);
  buf_free(&text);
  int rc = 0;
  if (!ok) {
    fprintf(s->err, "dyn: --calibrate: %s: %s\n", path.s, msg);
    rc = 1;
  } else {
    fprintf(s->out, "kept in %s\n", path.s);
  }
  free(dir);
  buf_free(&cmd);
  buf_free(&path);
  buf_free(&fp);
  return rc;
}

/* ---- calling from C (the benchmark, embedders) ---- */

bool session_call(Session *s, const char *name, Tensor **args, int nargs, Tensor **outs, int maxouts, Buf *err) {
  return top_call_tensors(s, name, args, nargs, outs, maxouts, err);
}

double session_predict(Session *s, const char *name, Tensor **args, int nargs) {
  return top_predict(s, name, args, nargs);
}

double session_compile(Session *s, const char *name, Buf *err) {
  Func *f = state_find_fn(s, name);
  if (!f) {
    buf_printf(err, "no function named '%s'", name);
    return -1;
  }
  if (!be_cpu(s)) {
    buf_puts(err, s->cpu_why);
    return -1;
  }
  if (!be_cpu_compile(s, f)) {
    buf_puts(err, "compilation failed");
    return -1;
  }
  return cpu_program_compile_ms(f->code.cpu);
}

int session_compiles(Session *s, const char *name) {
  Func *f = state_find_fn(s, name);
  return f ? f->compiles : -1;
}

/* ---- the session ---- */

Session *session_new(const SessionOptions *opt, FILE *out, FILE *err) {
  Session *s = xcalloc(1, sizeof *s);
  s->pc = poly_ctx_new();
  s->out = out;
  s->err = err;
  s->diag_json = opt && opt->diag_json;
  builtin_seed(s, 0);
  s->builtins = builtin_table;
  s->nbuiltins = builtin_count;
  s->run_file = session_run_file_in;
  s->run_arg = session_run_arg;
#ifdef HAVE_LLVM
  s->target = &be_table[BE_CPU];
#else
  s->target = &be_table[BE_REF];
#endif
  hw_detect_host(&s->host_hw);
  load_calibration(s);
  s->hw = s->host_hw;
  s->peak_measured = s->host_peak_measured;
  s->threads = opt && opt->threads > 0 ? opt->threads : (s->hw.cores > 0 ? s->hw.cores : 1);
  if (opt && opt->hw) {
    char msg[512];
    HwModel hw;
    if (!hw_load(opt->hw, &hw, msg, sizeof msg)) {
      fprintf(err, "dyn: %s; using the detected host\n", msg);
    } else if (!strcmp(hw.kind, "gpu")) {
      s->gpu_hw = hw;
      s->have_gpu_hw = s->gpu_hw_chosen = true;
    } else if (strcmp(hw.name, "host") || hw.path[0]) {
      const char *note = be_set_cpu_model(s, &hw, false);
      if (note) fprintf(err, "dyn: %s\n", note);
    }
  }
  if (opt && opt->target) {
    const char *t = opt->target;
    if (!strncmp(t, "gpu:", 4)) {       /* --target=gpu:tf32: the GPU, and its arithmetic */
      s->gpu_math = !strcmp(t + 4, "tf32") ? CUDA_TF32 : !strcmp(t + 4, "bf16") ? CUDA_BF16 : CUDA_EXACT;
      t = "gpu";
    }
    const Backend *be = be_find(t);
    const char *why;
    if (!be) {}                 /* main and the library refuse an unknown target first */
    else if (be->id == BE_CPU && !be->available(s, &why)) fprintf(err, "dyn: %s\n", why);
    else if (be->id == BE_GPU && !be->available(s, &why)) fprintf(err, "dyn: no GPU (%s); using %s\n", why, s->target->name);
    else s->target = be;
  }
  if (!opt || !opt->no_prelude) {
    import_module(s, "linalg", (Span){0}, false);
    import_module(s, "nn", (Span){0}, false);
    state_emit(s, &s->diags);
    diag_clear(&s->diags);
  }
  s->nfns_prelude = s->fns.n;
  s->prelude = xmalloc(sizeof(Func *) * (size_t)(s->fns.n + 1));
  memcpy(s->prelude, s->fns.a, sizeof(Func *) * (size_t)s->fns.n);
  s->nimports_prelude = s->imported.n;
  s->check_only = opt && opt->check_only;   /* after the prelude, which runs whole */
  return s;
}

void session_set_interactive(Session *s, bool on) { s->interactive = on; }

FILE *session_set_out(Session *s, FILE *out) {
  FILE *old = s->out;
  s->out = out;
  return old;
}

const SessionTiming *session_last_timing(Session *s) { return &s->timing; }
const SessionSched *session_last_sched(Session *s) { return &s->sched; }
const char *session_target(Session *s) { return s->target->name; }
int session_threads(Session *s) { return s->threads; }
const char *session_hw_name(Session *s) { return s->hw.name; }

void session_interrupt(Session *s) { s->interrupt = 1; }

int session_output_error(Session *s) {
  state_out_flush(s);
  return s->out_errno;
}

void session_complete(Session *s, const char *prefix, void (*add)(void *cookie, const char *cand), void *cookie) {
  if (prefix[0] == ':') {
    cmd_complete(prefix, add, cookie);
    return;
  }
  state_names(s, prefix, add, cookie);
}

void session_banner(Session *s, Buf *out) {
  buf_printf(out, "dyn %s -- back end: %s, hardware: %s (%d cores, %d-bit vectors%s) -- :help for help",
             PACKAGE_VERSION, s->target->id == BE_REF ? "reference evaluator" : "cpu (LLVM)", s->hw.name,
             s->hw.cores, s->hw.vector_bits, s->hw_foreign ? "; for looking, statements run on this CPU's code" : "");
}

void session_free(Session *s) {
  if (!s) return;
  builtin_scratch_remove(s);
  arena_free(s->call_tmp);
  for (int i = 0; i < s->vars.n; i++) {
    free(s->vars.a[i].name);
    val_free(&s->vars.a[i].v);
  }
  vec_free(s->vars);
  free(s->var_slot);
  top_forget_runs(s);
  be_drop_cpu_code(s, true);      /* the code shown for another model goes with its back end */
  for (int i = 0; i < s->fns.n; i++) func_free(s->fns.a[i]);
  for (int i = 0; i < s->retired.n; i++) func_free(s->retired.a[i]);
  cpu_backend_free(s->cpu);
  cuda_backend_free(s->gpu);
  vec_free(s->fns);
  vec_free(s->retired);
  for (int i = 0; i < s->kept.n; i++) arena_free(s->kept.a[i]);
  vec_free(s->kept);
  for (int i = 0; i < s->sources.n; i++) {
    free(s->sources.a[i]->name);
    free(s->sources.a[i]->text);
    free(s->sources.a[i]);
  }
  vec_free(s->sources);
  free(s->prelude);
  for (int i = 0; i < s->imported.n; i++) free(s->imported.a[i]);
  vec_free(s->imported);
  diag_clear(&s->diags);
  poly_ctx_free(s->pc);
  free(s);
}
