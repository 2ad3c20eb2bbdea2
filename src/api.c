/* api.c -- libdyn's public interface (include/dyn/dyn.h) over the session: the one file whose
 * symbols the shared library exports (dyn_*, marked DYN_API; the rest is built hidden).
 * It turns the caller's DLPack tensors into Tensors over the caller's memory (tensor_wrap:
 * never copied here; the CPU's code reads them through their strides), results into DLManagedTensors that own their Tensor, and the session's
 * diagnostics into records (a sink instead of the error stream).  One of the session's
 * files: it reads its functions through session_int.h.
 */
#include "config.h"
#include "dyn/dyn.h"
#include "session_int.h"

#include <stdatomic.h>
#include <string.h>

/* A diagnostic with the strings it points at, all owned here. */
typedef struct Record {
  dyn_diagnostic d;
  dyn_note *notes;
} Record;

typedef struct SigEntry { const Func *f; char *text; dyn_signature *sig; Arena *a; } SigEntry;

struct dyn_session {
  Session *s;
  FILE *out, *err;               /* out: NULL when print() goes to the caller's stream */
  char *out_buf, *err_buf;       /* open_memstream's buffers: what print() wrote, and text */
  size_t out_len, err_len;       /* that the session wrote to its error stream */
  long err_seen;                 /* how much of err has become records */
  VEC(Record) diags;
  VEC(SigEntry) sigs;
  Buf time_text, sched_text;
  int nruns;
};

static atomic_long live_results;

const char *dyn_version(void) { return PACKAGE_VERSION; }

void dyn_options_init(dyn_options *opt) {
  memset(opt, 0, sizeof *opt);
  opt->size = sizeof *opt;
}

void dyn_free_string(char *p) { free(p); }

long dyn_live_results(void) { return atomic_load(&live_results); }

int64_t dyn_gathered_bytes(const dyn_session *ds) { return ds ? ds->s->gathered_bytes : 0; }

/* ---- diagnostics ---- */

static void clear_diags(dyn_session *ds) {
  for (int i = 0; i < ds->diags.n; i++) {
    Record *r = &ds->diags.a[i];
    free((char *)r->d.file);
    free((char *)r->d.message);
    free((char *)r->d.text);
    for (int k = 0; k < r->d.nnotes; k++) {
      free((char *)r->notes[k].file);
      free((char *)r->notes[k].message);
    }
    free(r->notes);
  }
  ds->diags.n = 0;
}

static void add_record(dyn_session *ds, int is_error, const char *code, const char *message, const char *text) {
  Record r = {{0}, NULL};
  r.d.is_error = is_error;
  r.d.code = code;
  r.d.message = xstrdup(message);
  r.d.text = xstrdup(text);
  vec_push(ds->diags, r);
}

/* The sink the session reports to (session_set_diag_sink). */
static void sink(void *cookie, const Diag *dg) {
  dyn_session *ds = cookie;
  Record r = {{0}, NULL};
  r.d.is_error = dg->level == DIAG_ERROR;
  r.d.code = diag_id_name(dg->id);
  if (dg->span.src) {
    r.d.file = xstrdup(dg->span.src->name);
    span_linecol(dg->span, &r.d.line, &r.d.column);
  }
  r.d.message = xstrdup(dg->msg);
  Buf t = {0};
  diag_format(dg, &t);
  r.d.text = t.s ? t.s : xstrdup("");
  int n = 0;
  for (const DiagNote *x = dg->notes; x; x = x->next) n++;
  r.notes = n ? xcalloc((size_t)n, sizeof *r.notes) : NULL;
  n = 0;
  for (const DiagNote *x = dg->notes; x; x = x->next, n++) {
    if (x->span.src) {
      r.notes[n].file = xstrdup(x->span.src->name);
      span_linecol(x->span, &r.notes[n].line, &r.notes[n].column);
    }
    r.notes[n].message = xstrdup(x->msg);
  }
  r.d.nnotes = n;
  r.d.notes = r.notes;
  vec_push(ds->diags, r);
}

/* What the session wrote to its error stream since last time (a file it could not read, a
 * compilation that fell back to the evaluator): one record per line, "dyn: " taken off. */
static void take_err_text(dyn_session *ds, bool failed) {
  fflush(ds->err);
  long end = ftell(ds->err);
  if (end <= ds->err_seen) return;
  bool any_error = false;
  for (int i = 0; i < ds->diags.n; i++) any_error = any_error || ds->diags.a[i].d.is_error;
  char *p = ds->err_buf + ds->err_seen, *stop = ds->err_buf + end;
  while (p < stop) {
    char *nl = memchr(p, '\n', (size_t)(stop - p));
    char *e = nl ? nl : stop;
    char *line = xstrndup(p, (size_t)(e - p));
    const char *msg = strncmp(line, "dyn: ", 5) ? line : line + 5;
    if (*msg) {
      add_record(ds, failed && !any_error, "", msg, line);
      any_error = any_error || failed;
    }
    free(line);
    p = e + 1;
  }
  /* start the stream again: a long session keeps no old messages */
  fseek(ds->err, 0, SEEK_SET);
  ds->err_seen = 0;
}

static void api_error(dyn_session *ds, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void api_error(dyn_session *ds, const char *fmt, ...) {
  Buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  Buf t = {0};
  buf_printf(&t, "dyn: error: %s\n", b.s);
  add_record(ds, 1, "", b.s, t.s);
  buf_free(&b);
  buf_free(&t);
}

int dyn_diagnostic_count(const dyn_session *ds) { return ds ? ds->diags.n : 0; }

const dyn_diagnostic *dyn_diagnostic_get(const dyn_session *ds, int i) {
  return ds && i >= 0 && i < ds->diags.n ? &ds->diags.a[i].d : NULL;
}

/* ---- sessions ---- */

static bool known_target(const char *t) {
  static const char *const ok[] = {"cpu", "gpu", "gpu:exact", "gpu:tf32", "gpu:bf16", "ref"};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (!strcmp(t, ok[i])) return true;
  return false;
}

dyn_session *dyn_session_new(const dyn_options *opt, char **err) {
  dyn_options o;
  dyn_options_init(&o);
  if (opt) memcpy(&o, opt, opt->size < sizeof o ? opt->size : sizeof o);
  if (err) *err = NULL;
  char msg[600];
  if (o.target && !known_target(o.target)) {
    snprintf(msg, sizeof msg, "unknown target '%s' (cpu, gpu, gpu:tf32, gpu:bf16 or ref)", o.target);
    if (err) *err = xstrdup(msg);
    return NULL;
  }
  if (o.threads < 0) {
    snprintf(msg, sizeof msg, "threads must be 0 (every core) or more, not %d", o.threads);
    if (err) *err = xstrdup(msg);
    return NULL;
  }
  HwModel hw;
  if (o.hw && !hw_load(o.hw, &hw, msg, sizeof msg)) {
    if (err) *err = xstrdup(msg);
    return NULL;
  }
  dyn_session *ds = xcalloc(1, sizeof *ds);
  ds->err = open_memstream(&ds->err_buf, &ds->err_len);
  ds->out = o.out ? NULL : open_memstream(&ds->out_buf, &ds->out_len);
  if (!ds->err || (!o.out && !ds->out)) {
    if (ds->err) fclose(ds->err);
    free(ds->err_buf);
    free(ds);
    if (err) *err = xstrdup("cannot open the session's streams");
    return NULL;
  }
  SessionOptions so = {.target = o.target, .hw = o.hw, .threads = o.threads, .no_prelude = o.no_prelude};
  ds->s = session_new(&so, o.out ? o.out : ds->out, ds->err);
  session_set_diag_sink(ds->s, sink, ds);
  if (o.interactive) session_set_interactive(ds->s, true);
  /* what the prelude or the options said is kept for the first call to show */
  return ds;
}

void dyn_session_free(dyn_session *ds) {
  if (!ds) return;
  session_free(ds->s);
  clear_diags(ds);
  vec_free(ds->diags);
  for (int i = 0; i < ds->sigs.n; i++) {
    free(ds->sigs.a[i].text);
    arena_free(ds->sigs.a[i].a);
  }
  vec_free(ds->sigs);
  buf_free(&ds->time_text);
  buf_free(&ds->sched_text);
  fclose(ds->err);
  free(ds->err_buf);
  if (ds->out) fclose(ds->out);
  free(ds->out_buf);
  free(ds);
}

char *dyn_take_output(dyn_session *ds) {
  if (!ds || !ds->out) return NULL;
  fflush(ds->out);
  long end = ftell(ds->out);
  char *r = xstrndup(ds->out_buf ? ds->out_buf : "", end > 0 ? (size_t)end : 0);
  fseek(ds->out, 0, SEEK_SET);
  return r;
}

/* ---- running source ---- */

static int finish(dyn_session *ds, RunStatus r) {
  bool failed = r == RUN_ERROR || r == RUN_INCOMPLETE;
  take_err_text(ds, failed);
  return failed ? -1 : 0;
}

int dyn_run(dyn_session *ds, const char *text, const char *origin) {
  clear_diags(ds);
  char name[32];
  if (!origin) {
    snprintf(name, sizeof name, "<api:%d>", ++ds->nruns);
    origin = name;
  }
  return finish(ds, session_run(ds->s, text, origin));
}

int dyn_run_file(dyn_session *ds, const char *path) {
  clear_diags(ds);
  return finish(ds, session_run_file(ds->s, path));
}

/* ---- signatures ---- */

static DLDataType dl_type(DynElem e) {
  switch (e) {
  case DYN_F32: return (DLDataType){kDLFloat, 32, 1};
  case DYN_F64: return (DLDataType){kDLFloat, 64, 1};
  case DYN_F16: return (DLDataType){kDLFloat, 16, 1};
  case DYN_BF16: return (DLDataType){kDLBfloat, 16, 1};
  case DYN_I32: return (DLDataType){kDLInt, 32, 1};
  case DYN_I64: return (DLDataType){kDLInt, 64, 1};
  default: return (DLDataType){kDLUInt, 8, 1};      /* bool: a byte, as NumPy and torch keep it */
  }
}

static void describe(Arena *a, dyn_param *p, const char *name, const Type *t, bool is_size) {
  p->name = name;
  p->is_size = is_size;
  DynElem e = is_size ? DYN_I64 : t->elem;
  p->elem = elem_name(e);
  p->dtype = dl_type(e);
  p->rank = is_size ? 0 : t->rank;
  const char **dims = arena_alloc(a, sizeof(char *) * (size_t)(p->rank + 1));
  for (int d = 0; d < p->rank; d++) {
    Buf b = {0};
    poly_str(t->dims[d], &b);
    dims[d] = arena_strndup(a, b.s ? b.s : "", b.len);
    buf_free(&b);
  }
  p->dims = dims;
}

const dyn_signature *dyn_signature_get(dyn_session *ds, const char *name) {
  clear_diags(ds);
  Func *f = state_find_fn(ds->s, name);
  if (!f) {
    api_error(ds, "no function named '%s'", name);
    return NULL;
  }
  Buf text = {0};
  func_signature(f, &text);
  /* a function defined again is another Func; a freed one's address may come back, so the
   * text is compared too */
  for (int i = 0; i < ds->sigs.n; i++)
    if (ds->sigs.a[i].f == f && !strcmp(ds->sigs.a[i].text, text.s)) {
      buf_free(&text);
      return ds->sigs.a[i].sig;
    }
  Arena *a = arena_new();
  dyn_signature *sig = arena_alloc(a, sizeof *sig);
  sig->name = arena_strndup(a, f->name, strlen(f->name));
  sig->text = arena_strndup(a, text.s, text.len);
  sig->nparams = f->nparams;
  dyn_param *ps = arena_alloc(a, sizeof *ps * (size_t)(f->nparams + 1));
  for (int i = 0; i < f->nparams; i++)
    describe(a, &ps[i], arena_strndup(a, f->params[i].name, strlen(f->params[i].name)), &f->params[i].type,
             f->params[i].is_size);
  sig->params = ps;
  sig->nresults = f->nrets;
  dyn_param *rs = arena_alloc(a, sizeof *rs * (size_t)(f->nrets + 1));
  for (int i = 0; i < f->nrets; i++) describe(a, &rs[i], "", &f->rets[i], false);
  sig->results = rs;
  sig->nsizes = f->nsizes;
  const char **sz = arena_alloc(a, sizeof(char *) * (size_t)(f->nsizes + 1));
  for (int i = 0; i < f->nsizes; i++) sz[i] = arena_strndup(a, f->sizes[i].name, strlen(f->sizes[i].name));
  sig->sizes = sz;
  SigEntry e = {f, text.s, sig, a};
  vec_push(ds->sigs, e);
  return sig;
}

/* ---- calls ---- */

static bool elem_of(DLDataType t, DynElem *out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) *out = DYN_F32;
  else if (t.code == kDLFloat && t.bits == 64) *out = DYN_F64;
  else if (t.code == kDLFloat && t.bits == 16) *out = DYN_F16;
  else if (t.code == kDLBfloat && t.bits == 16) *out = DYN_BF16;
  else if (t.code == kDLInt && t.bits == 32) *out = DYN_I32;
  else if (t.code == kDLInt && t.bits == 64) *out = DYN_I64;
  else if ((t.code == kDLUInt || t.code == 6 /* kDLBool, DLPack 0.8 */) && t.bits == 8) *out = DYN_BOOL;
  else return false;
  return true;
}

/* The caller's tensor as a Tensor over its memory, or NULL after an error record. */
static Tensor *wrap_arg(dyn_session *ds, const char *fn, int i, const DLTensor *x) {
  DynElem e;
  if (x->device.device_type != kDLCPU && x->device.device_type != kDLCUDAHost) {
    api_error(ds, "%s: argument %d is not in host memory (DLPack device type %d)", fn, i + 1, (int)x->device.device_type);
    return NULL;
  }
  if (!elem_of(x->dtype, &e)) {
    api_error(ds, "%s: argument %d has an element type dyn does not have (DLPack code %u, %u bits, %u lanes): "
              "f32, f64, f16, bf16, i32, i64 and bool are", fn, i + 1, x->dtype.code, x->dtype.bits, x->dtype.lanes);
    return NULL;
  }
  if (x->ndim < 0 || x->ndim > DYN_MAX_RANK) {
    api_error(ds, "%s: argument %d has rank %d; dyn tensors have rank 0 to %d", fn, i + 1, x->ndim, DYN_MAX_RANK);
    return NULL;
  }
  int64_t strides[DYN_MAX_RANK], st = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    if (x->shape[d] < 0) {
      api_error(ds, "%s: argument %d has a negative dimension", fn, i + 1);
      return NULL;
    }
    strides[d] = x->strides ? x->strides[d] : st;
    st *= x->shape[d] ? x->shape[d] : 1;
  }
  char *data = (char *)x->data + x->byte_offset;
  if ((uintptr_t)data % (uintptr_t)elem_size(e)) {
    api_error(ds, "%s: argument %d is not aligned to its element size (%d bytes)", fn, i + 1, elem_size(e));
    return NULL;
  }
  return tensor_wrap(e, x->ndim, x->shape, strides, data);
}

/* A result's DLManagedTensor and what it owns. */
typedef struct Managed {
  DLManagedTensor m;
  int64_t shape[DYN_MAX_RANK], strides[DYN_MAX_RANK];
  Tensor *t;
} Managed;

static void managed_delete(DLManagedTensor *m) {
  Managed *r = (Managed *)m;
  tensor_release(r->t);
  free(r);
  atomic_fetch_sub(&live_results, 1);
}

static DLManagedTensor *manage(Tensor *t) {
  Managed *r = xcalloc(1, sizeof *r);
  r->t = t;
  r->m.dl_tensor.data = tensor_data(t);
  r->m.dl_tensor.device = (DLDevice){kDLCPU, 0};
  r->m.dl_tensor.ndim = t->rank;
  r->m.dl_tensor.dtype = dl_type(t->elem);
  for (int d = 0; d < t->rank; d++) r->shape[d] = t->shape[d], r->strides[d] = t->strides[d];
  r->m.dl_tensor.shape = r->shape;
  r->m.dl_tensor.strides = r->strides;
  r->m.dl_tensor.byte_offset = 0;
  r->m.manager_ctx = r;
  r->m.deleter = managed_delete;
  atomic_fetch_add(&live_results, 1);
  return &r->m;
}

/* A result that is (a view of) an argument lives in the caller's memory, which may go
 * before the result does: it is copied into dyn's own, the one copy a call ever makes. */
static Tensor *own(Tensor *t) {
  if (!t->buf->borrowed) return t;
  char msg[256];
  Tensor *c = tensor_new_uninit(t->elem, t->rank, t->shape, msg, sizeof msg);
  if (!c) return NULL;
  int64_t n = tensor_numel(t);
  for (int64_t k = 0; k < n; k++) {
    if (elem_is_float(t->elem)) tensor_set_f64(c, k, tensor_get_f64(t, k));
    else tensor_set_i64(c, k, tensor_get_i64(t, k));
  }
  tensor_release(t);
  return c;
}

static int call(dyn_session *ds, const char *name, const DLTensor *args, const DLTensor *const *argv, int nargs,
                DLManagedTensor **results, int maxresults, int *nresults) {
  if (!ds) return -1;            /* a binding's session already ended */
  if (ds->diags.n) clear_diags(ds);
  ds->s->gathered_bytes = 0;
  if (nresults) *nresults = 0;
  Func *f = state_find_fn(ds->s, name);
  if (!f) {
    api_error(ds, "no function named '%s'", name);
    return -1;
  }
  if (nargs < 0 || nargs > 64) {
    api_error(ds, "%s: %d arguments is too many", name, nargs);
    return -1;
  }
  enum { SMALL = 8 };
  Tensor *in_s[SMALL], *out_s[SMALL];
  Tensor **in = nargs <= SMALL ? in_s : xcalloc((size_t)nargs, sizeof(Tensor *));
  int nout = f->nrets;
  Tensor **out = nout <= SMALL ? out_s : xcalloc((size_t)nout, sizeof(Tensor *));
  for (int i = 0; i < nout; i++) out[i] = NULL;
  int status = 0, wrapped = 0;
  for (; wrapped < nargs; wrapped++)
    if (!(in[wrapped] = wrap_arg(ds, name, wrapped, args ? &args[wrapped] : argv[wrapped]))) {
      status = -1;
      break;
    }
  if (status == 0) {
    Buf why = {0};
    if (!session_call(ds->s, name, in, nargs, out, nout, &why)) status = -1;
    buf_free(&why);            /* the records say it, with places */
  }
  for (int i = 0; i < wrapped; i++) tensor_release(in[i]);
  for (int i = 0; i < nout; i++) {
    Tensor *t = out[i] ? own(out[i]) : NULL;
    if (status == 0 && !t) {
      api_error(ds, "%s: cannot allocate its result", name);
      status = -1;
    }
    if (status == 0 && i < maxresults) results[i] = manage(t);
    else tensor_release(t);
  }
  if (status == 0 && nresults) *nresults = nout;
  if (in != in_s) free(in);
  if (out != out_s) free(out);
  take_err_text(ds, status != 0);
  return status;
}

int dyn_call(dyn_session *ds, const char *name, const DLTensor *args, int nargs, DLManagedTensor **results,
             int maxresults, int *nresults) {
  return call(ds, name, args, NULL, nargs, results, maxresults, nresults);
}

int dyn_callv(dyn_session *ds, const char *name, const DLTensor *const *args, int nargs, DLManagedTensor **results,
              int maxresults, int *nresults) {
  return call(ds, name, NULL, args, nargs, results, maxresults, nresults);
}

/* ---- :time and :sched as data ---- */

/* Run the command line cmd with the session's output caught in text. */
static int run_captured(dyn_session *ds, const char *cmd, Buf *text) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    api_error(ds, "cannot open a stream for the command's output");
    return -1;
  }
  FILE *old = session_set_out(ds->s, f);
  int r = finish(ds, session_run(ds->s, cmd, "<api>"));
  session_set_out(ds->s, old);
  fclose(f);
  text->len = 0;
  buf_putn(text, buf ? buf : "", len);
  while (text->len && text->s[text->len - 1] == '\n') text->s[--text->len] = 0;
  free(buf);
  return r;
}

int dyn_time(dyn_session *ds, const char *statement, dyn_timing *out) {
  clear_diags(ds);
  if (strchr(statement, '\n')) {
    api_error(ds, "dyn_time takes one statement on one line");
    return -1;
  }
  Buf cmd = {0};
  buf_printf(&cmd, ":time %s", statement);
  Session *s = ds->s;
  s->timing = (SessionTiming){0};
  int r = run_captured(ds, cmd.s, &ds->time_text);
  buf_free(&cmd);
  if (r) return r;
  const SessionTiming *t = session_last_timing(s);
  *out = (dyn_timing){
    .median_ms = t->median * 1e3, .min_ms = t->min * 1e3, .max_ms = t->max * 1e3, .runs = t->runs,
    .target = session_target(s), .evaluator_runs = (int)t->instead, .function = t->fn,
    .gflops = t->gflops, .gbs = t->gbs, .bound = t->bound, .roof = t->roof, .roof_percent = t->roof_pct,
    .predicted_ms = t->predicted * 1e3, .text = ds->time_text.s ? ds->time_text.s : ""};
  return 0;
}

int dyn_sched(dyn_session *ds, const char *name, const char *const *size_names, const int64_t *size_values,
              int nsizes, dyn_schedule *out) {
  clear_diags(ds);
  Buf cmd = {0};
  buf_printf(&cmd, ":sched %s", name);
  for (int i = 0; i < nsizes; i++) buf_printf(&cmd, " %s=%lld", size_names[i], (long long)size_values[i]);
  Session *s = ds->s;
  s->sched = (SessionSched){0};
  int r = run_captured(ds, cmd.s, &ds->sched_text);
  buf_free(&cmd);
  if (r) return r;
  const SessionSched *sc = session_last_sched(s);
  *out = (dyn_schedule){
    .function = sc->fn, .target = session_target(s), .hardware = session_hw_name(s), .threads = session_threads(s),
    .compiles = sc->compiles, .compile_ms = sc->compile_ms, .predicted_ms = sc->predicted * 1e3,
    .text = ds->sched_text.s ? ds->sched_text.s : ""};
  return 0;
}

int dyn_get(dyn_session *ds, const char *name, DLManagedTensor **out) {
  clear_diags(ds);
  *out = NULL;
  Binding *b = state_find_var(ds->s, name);
  if (!b || b->v.kind != VAL_TENSOR) {
    api_error(ds, b ? "'%s' is not a tensor" : "nothing is bound to '%s'", name);
    return -1;
  }
  *out = manage(tensor_retain(b->v.t));
  return 0;
}
