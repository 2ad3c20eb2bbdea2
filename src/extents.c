/* extents.c -- a call's sizes bound to its program, once for every back end: the value of
 * each size variable, the extent of each axis, the shape and C-order strides of each slot,
 * and the value of each size a kernel reads.  toplevel.c binds them once per call (and keeps
 * them while the sizes stay the same); the CPU and GPU back ends run on them, :sched
 * describes with them, the choice of back end weighs their work, and the reference
 * evaluator (eval.c) runs on them too, so that every back end says a size that does not
 * evaluate in the same words. */
#include "config.h"
#include "dyn_int.h"

#include <stdlib.h>
#include <string.h>

/* Whether x already holds p at sz: the same program, names and values. */
static bool same(const Extents *x, const Program *p, const EvalSizes *sz) {
  if (!x->p || x->p != p || x->sz.n != sz->n) return false;
  for (int i = 0; i < sz->n; i++)
    if (x->sz.names[i] != sz->names[i] || x->sz.vals[i] != sz->vals[i]) return false;
  return true;
}

/* "cannot evaluate the extent N/P of i: division by zero", what every back end says. */
static void extent_error(const Program *p, int axis, const char *why, char *err, size_t errlen) {
  Buf b = {0};
  poly_str(p->axes[axis].extent, &b);
  snprintf(err, errlen, "cannot evaluate the extent %s of %s: %s", b.s, p->axes[axis].name, why ? why : "unbound");
  buf_free(&b);
}

/* The first failure is the one said; later ones leave their values 0. */
static void failed(Extents *x, const char *msg) {
  if (x->ok) snprintf(x->err, sizeof x->err, "%s", msg);
  x->ok = false;
}

bool extents_bind(Extents *x, const Program *p, const EvalSizes *sz) {
  if (same(x, p, sz)) return x->ok;
  int ns = p->nslots, n = sz->n;
  size_t words = (size_t)n + (size_t)p->naxes + 2 * (size_t)ns * DYN_MAX_RANK + (size_t)p->nkx + 4;
  size_t bytes = words * sizeof(int64_t) + ((size_t)n + 1) * sizeof(char *);
  if (bytes > x->cap) {
    free(x->mem);
    x->mem = xmalloc(bytes);
    x->cap = bytes;
  }
  memset(x->mem, 0, bytes);
  int64_t *w = x->mem;
  x->sz.vals = w;
  x->ext = x->sz.vals + n + 1;
  x->shape = x->ext + p->naxes + 1;
  x->strides = x->shape + (size_t)ns * DYN_MAX_RANK;
  x->szv = x->strides + (size_t)ns * DYN_MAX_RANK + 1;
  x->sz.names = (const char **)(w + words);
  x->sz.n = n;
  memcpy(x->sz.names, sz->names, sizeof(char *) * (size_t)n);
  memcpy(x->sz.vals, sz->vals, sizeof(int64_t) * (size_t)n);
  x->p = p;
  x->ok = true;
  x->err[0] = 0;
  const char *why = NULL;
  char msg[sizeof x->err];
  for (int a = 0; a < p->naxes; a++)
    if (!poly_eval(p->axes[a].extent, eval_size_lookup, &x->sz, &x->ext[a], &why)) {
      x->ext[a] = 0;
      extent_error(p, a, why, msg, sizeof msg);
      failed(x, msg);
    }
  Buf reason = {0};
  if (x->ok && !eval_size_values(p, &x->sz, x->szv, &reason)) failed(x, reason.s ? reason.s : "");
  buf_free(&reason);
  for (int i = 0; i < ns; i++) {
    const Slot *s = &p->slots[i];
    int64_t *dims = &x->shape[i * DYN_MAX_RANK], *st = &x->strides[i * DYN_MAX_RANK], stride = 1;
    for (int k = s->type.rank - 1; k >= 0; k--) {
      if (!poly_eval(s->type.dims[k], eval_size_lookup, &x->sz, &dims[k], &why)) {
        dims[k] = 0;
        snprintf(msg, sizeof msg, "cannot evaluate the shape of %s: %s", s->name, why ? why : "unbound");
        failed(x, msg);
      }
      st[k] = stride;
      if (!size_mul_ok(stride, dims[k] > 0 ? dims[k] : 1, &stride)) stride = INT64_MAX;
    }
  }
  return x->ok;
}

double extents_work(const Extents *x) {
  const Program *p = x->p;
  double tot = 0;
  for (int k = 0; k < p->nkernels; k++) {
    const Kernel *kn = &p->kernels[k];
    double iters = 1;
    for (int o = 0; o < kn->nouter; o++) iters *= (double)(x->ext[kn->outer[o]] > 0 ? x->ext[kn->outer[o]] : 1);
    for (int st = 0; st < kn->nstages; st++)
      for (int a = 0; a < kn->stages[st].naxes; a++) {
        int64_t v = x->ext[kn->stages[st].axes[a]];
        iters *= (double)(v > 0 ? v : 1);
      }
    tot += iters;
  }
  return tot;
}

void extents_free(Extents *x) {
  if (!x) return;
  free(x->mem);
  memset(x, 0, sizeof *x);
}
