/* state.c -- what every file of the session reads and writes: the bindings and functions
 * by name, the names for "did you mean", errors and the text of messages, the output, and
 * the sources diagnostics point into.  It sits below toplevel.c, backend.c, builtins.c,
 * commands.c and session.c, and calls none of them, so that the session's files form no
 * circle: session.c, which runs input, is on top.
 */
#include "config.h"
#include "session_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- bindings and functions ---- */

/* Bindings are found by a hash of the name (a script of 100,000 bindings took 48 s with a
 * linear search). */
static unsigned name_hash(const char *name) {
  unsigned h = 2166136261u;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 16777619u;
  return h;
}

static int *var_probe(Session *s, const char *name) {
  unsigned mask = (unsigned)s->var_cap - 1;
  for (unsigned i = name_hash(name) & mask;; i = (i + 1) & mask) {
    int *slot = &s->var_slot[i];
    if (!*slot || !strcmp(s->vars.a[*slot - 1].name, name)) return slot;
  }
}

Binding *state_find_var(Session *s, const char *name) {
  if (!s->var_cap) return NULL;
  int *slot = var_probe(s, name);
  return *slot ? &s->vars.a[*slot - 1] : NULL;
}

void state_bind(Session *s, const char *name, Value v) {
  Binding *b = state_find_var(s, name);
  if (b) {
    val_free(&b->v);
    b->v = v;
    return;
  }
  Binding nb = {xstrdup(name), v};
  vec_push(s->vars, nb);
  if (2 * s->vars.n > s->var_cap) {
    free(s->var_slot);
    s->var_cap = s->var_cap ? 2 * s->var_cap : 64;
    s->var_slot = xcalloc((size_t)s->var_cap, sizeof(int));
    for (int i = 0; i < s->vars.n - 1; i++) *var_probe(s, s->vars.a[i].name) = i + 1;
  }
  *var_probe(s, name) = s->vars.n;
}

/* Where the function was found last time is tried first (a loop calls one function), then
 * the whole list, first letters first: the prelude is long.  Names are unique (a new
 * definition replaces the old in place). */
Func *state_find_fn(Session *s, const char *name) {
  if (s->found < s->fns.n && !strcmp(s->fns.a[s->found]->name, name)) return s->fns.a[s->found];
  for (int i = s->fns.n - 1; i >= 0; i--)
    if (s->fns.a[i]->name[0] == name[0] && !strcmp(s->fns.a[i]->name, name)) {
      s->found = i;
      return s->fns.a[i];
    }
  return NULL;
}

Func *state_lookup_fn(void *env, const char *name) { return state_find_fn(env, name); }

void state_each_fn(void *env, void (*add)(void *cookie, const char *name), void *cookie) {
  Session *s = env;
  for (int i = 0; i < s->fns.n; i++) add(cookie, s->fns.a[i]->name);
}

void state_each_var(void *env, void (*add)(void *cookie, const char *name), void *cookie) {
  Session *s = env;
  for (int i = 0; i < s->vars.n; i++) add(cookie, s->vars.a[i].name);
}

Diag *state_undefined(Session *s, Span at, DiagId id, const char *name) {
  Diag *dg = state_error(s, at, id, name);
  Suggest sg;
  suggest_init(&sg, name);
  state_names(s, "", suggest_add_cb, &sg);
  const char *best = suggest_best(&sg);
  if (best) diag_note(dg, (Span){0}, "did you mean '%s'?", best);
  return dg;
}

/* A function replaced by a new definition or forgotten by :reset can no longer be called,
 * so its compiled code goes (about 28 KB a compile); the function itself stays, for the
 * programs that inlined it. */
void state_retire(Session *s, Func *f) {
  func_free_code(f);
  if (s->last_fn == f) s->last_fn = NULL;
  vec_push(s->retired, f);
}

/* Forget every function the session defined, and bring back a prelude function it
 * redefined (the prelude's own is live again: out of the retired list, compiled again on
 * use); the prelude's imports stay done, the session's are forgotten, so that they can be
 * imported again. */
static void forget_user_fns(Session *s) {
  while (s->fns.n > s->nfns_prelude) state_retire(s, s->fns.a[--s->fns.n]);
  for (int i = 0; i < s->nfns_prelude; i++) {
    if (s->fns.a[i] == s->prelude[i]) continue;
    state_retire(s, s->fns.a[i]);
    for (int r = 0; r < s->retired.n; r++)
      if (s->retired.a[r] == s->prelude[i]) {
        s->retired.a[r] = s->retired.a[--s->retired.n];
        break;
      }
    s->fns.a[i] = s->prelude[i];
  }
  while (s->imported.n > s->nimports_prelude) free(s->imported.a[--s->imported.n]);
}

/* :reset: every binding and every function defined after the prelude goes. */
void state_reset(Session *s) {
  for (int i = 0; i < s->vars.n; i++) {
    free(s->vars.a[i].name);
    val_free(&s->vars.a[i].v);
  }
  s->vars.n = 0;
  if (s->var_cap) memset(s->var_slot, 0, sizeof(int) * (size_t)s->var_cap);
  forget_user_fns(s);
}

/* ---- errors ---- */

/* Flush what was printed and remember the first write that failed (a full disk, a closed
 * terminal): a script then stops there (run_stmt), and main reports it once. */
void state_emit(Session *s, const Diags *d) {
  if (!s->diag_sink) diag_print_all(d, s->err, s->diag_json);
  else
    for (const Diag *dg = d->head; dg; dg = dg->next) s->diag_sink(s->diag_cookie, dg);
}

void state_out_flush(Session *s) {
  if (fflush(s->out) != 0 && !s->out_errno) s->out_errno = errno ? errno : EIO;
  if (ferror(s->out) && !s->out_errno) s->out_errno = EIO;
}

Diag *state_error(Session *s, Span at, DiagId id, ...) {
  va_list ap;
  va_start(ap, id);
  Diag *d = diag_reportv(&s->diags, at, id, ap);
  va_end(ap);
  return d;
}

const char *state_tmp_printf(Session *s, const char *fmt, ...) {
  Buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  const char *r = arena_strndup(s->tmp, b.s ? b.s : "", b.len);
  buf_free(&b);
  return r;
}

const char *state_ttype(Session *s, const Tensor *t) {
  Buf b = {0};
  tensor_type_str(t, &b);
  const char *r = arena_strndup(s->tmp, b.s, b.len);
  buf_free(&b);
  return r;
}

void state_print_line(Session *s, const char *text) {
  fputs(text, s->out);
  fputc('\n', s->out);
  state_out_flush(s);
}

/* ---- sources ---- */

Source *state_add_source(Session *s, const char *name, char *text, size_t len) {
  Source *src = xcalloc(1, sizeof *src);
  src->name = xstrdup(name);
  src->text = text;
  src->len = len;
  vec_push(s->sources, src);
  return src;
}

/* ---- names ---- */

void state_names(Session *s, const char *prefix, void (*add)(void *cookie, const char *cand), void *cookie) {
  size_t n = strlen(prefix);
  for (int i = 0; i < s->vars.n; i++)
    if (!strncmp(s->vars.a[i].name, prefix, n)) add(cookie, s->vars.a[i].name);
  for (int i = 0; i < s->fns.n; i++)
    if (!strncmp(s->fns.a[i]->name, prefix, n)) add(cookie, s->fns.a[i]->name);
  for (int i = 0; i < s->nbuiltins; i++)
    if (!strncmp(s->builtins[i].name, prefix, n)) add(cookie, s->builtins[i].name);
  for (int i = OP_EXP; i < OP__COUNT; i++)
    if (!strncmp(op_name((OpKind)i), prefix, n)) add(cookie, op_name((OpKind)i));
}

const Builtin *state_builtin(Session *s, const char *name) {
  for (int i = 0; i < s->nbuiltins; i++)
    if (!strcmp(s->builtins[i].name, name)) return &s->builtins[i];
  return NULL;
}
