/* diag.c -- diagnostics: collected into a sink, never fatal, printed with the source line
 * and a caret.  Messages come from one table (lang/diag.def) so the reference can list
 * them all.  Line and column are computed here, only when a diagnostic is printed; the rest
 * of the compiler carries byte spans. */
#include "config.h"
#include "dyn_int.h"

#include <stdlib.h>
#include <string.h>

static const struct { const char *name; DiagLevel level; const char *fmt; } table[] = {
#define D(ID, level, fmt) {#ID, level, fmt},
#include "../lang/diag.def"
#undef D
};

const char *diag_id_name(DiagId id) { return table[id].name; }
const char *diag_id_format(DiagId id) { return table[id].fmt; }

Span span_join(Span a, Span b) {
  if (!a.src) return b;
  if (!b.src || a.src != b.src) return a;
  Span s = a;
  if (b.lo < s.lo) s.lo = b.lo;
  if (b.hi > s.hi) s.hi = b.hi;
  return s;
}

void span_linecol(Span s, int *line, int *col) {
  int l = 1, c = 1;
  if (s.src) {
    const char *t = s.src->text;
    for (uint32_t i = 0; i < s.lo && i < s.src->len; i++) {
      if (t[i] == '\n') {
        l++;
        c = 1;
      } else if (((unsigned char)t[i] & 0xC0) != 0x80) {
        c++;        /* count characters, not UTF-8 continuation bytes */
      }
    }
  }
  *line = l;
  *col = c;
}

Diag *diag_report(Diags *d, Span at, DiagId id, ...) {
  va_list ap;
  va_start(ap, id);
  Diag *dg = diag_reportv(d, at, id, ap);
  va_end(ap);
  return dg;
}

Diag *diag_reportv(Diags *d, Span at, DiagId id, va_list ap) {
  Diag *dg = xcalloc(1, sizeof *dg);
  dg->id = id;
  dg->level = table[id].level;
  dg->span = at;
  Buf b = {0};
  buf_vprintf(&b, table[id].fmt, ap);
  dg->msg = b.s ? b.s : xstrdup("");
  if (d->tail) d->tail->next = dg;
  else d->head = dg;
  d->tail = dg;
  if (dg->level == DIAG_ERROR) d->nerrors++;
  else d->nwarnings++;
  return dg;
}

void diag_note(Diag *dg, Span at, const char *fmt, ...) {
  DiagNote *n = xcalloc(1, sizeof *n);
  Buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  n->span = at;
  n->msg = b.s ? b.s : xstrdup("");
  if (dg->last_note) dg->last_note->next = n;
  else dg->notes = n;
  dg->last_note = n;
}

/* The source line of a span, with a caret and tildes under it (the first line only when a
 * span covers several). */
static void show_line(Span s, int line, int col, Buf *out) {
  const char *t = s.src->text;
  size_t len = s.src->len, lo = s.lo < len ? s.lo : len;
  size_t b = lo, e = lo;
  while (b > 0 && t[b - 1] != '\n') b--;
  while (e < len && t[e] != '\n') e++;
  char num[16];
  int w = snprintf(num, sizeof num, "%d", line);
  buf_printf(out, "  %s | ", num);
  /* A NUL is shown as \0: written as it is, it would end the message (E_NUL_BYTE, the only
   * diagnostic of a line that holds one, points at the first) */
  for (size_t i = b; i < e; i++) {
    if (t[i] == 0) buf_puts(out, "\\0");
    else buf_putc(out, t[i] == '\t' ? ' ' : t[i]);
  }
  buf_printf(out, "\n  %*s | ", w, "");
  for (int i = 1; i < col; i++) buf_putc(out, ' ');
  buf_putc(out, '^');
  size_t hi = s.hi < e ? s.hi : e;
  for (size_t i = lo + 1; i < hi; i++)
    if (((unsigned char)t[i] & 0xC0) != 0x80) buf_putc(out, '~');
  buf_putc(out, '\n');
}

void diag_format(const Diag *dg, Buf *out) {
  const char *lv = dg->level == DIAG_ERROR ? "error" : "warning";
  if (dg->span.src) {
    int l, c;
    span_linecol(dg->span, &l, &c);
    buf_printf(out, "%s:%d:%d: %s: %s\n", dg->span.src->name, l, c, lv, dg->msg);
    show_line(dg->span, l, c, out);
  } else {
    buf_printf(out, "dyn: %s: %s\n", lv, dg->msg);
  }
  /* a note starts with its place, as the error does, so that an editor that parses
   * FILE:LINE:COL: lines takes every one; a note of no place of its own ("did you mean")
   * has its diagnostic's */
  for (DiagNote *n = dg->notes; n; n = n->next) {
    Span at = n->span.src ? n->span : dg->span;
    if (at.src) {
      int l, c;
      span_linecol(at, &l, &c);
      buf_printf(out, "%s:%d:%d: note: %s\n", at.src->name, l, c, n->msg);
    } else {
      buf_printf(out, "dyn: note: %s\n", n->msg);
    }
  }
}

/* ---- --diagnostics=json: one object a line, for editors and CI ----
 * The fields are those of the text form, each in one place: severity, code (the row of
 * lang/diag.def), file, line, column, span (start and end; the end is the position just
 * after the span's last character, as LSP's ranges), message and notes.  Lines and columns
 * count from 1 and columns count characters, as the text form does; a diagnostic without a
 * place has null for file, line, column and span.  Strings are escaped as RFC 8259 asks;
 * a byte that is not part of well-formed UTF-8 (a file name can hold one) becomes U+FFFD,
 * so every line is valid JSON. */

static void json_string(Buf *out, const char *s) {
  buf_putc(out, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    if (*p == '"' || *p == '\\') {
      buf_putc(out, '\\');
      buf_putc(out, (char)*p++);
    } else if (*p < 0x20) {
      const char *short_esc = *p == '\n' ? "\\n" : *p == '\t' ? "\\t" : *p == '\r' ? "\\r"
                            : *p == '\b' ? "\\b" : *p == '\f' ? "\\f" : NULL;
      if (short_esc) buf_puts(out, short_esc);
      else buf_printf(out, "\\u%04x", *p);
      p++;
    } else {
      int n = utf8_len(p, strlen((const char *)p));
      if (n) buf_putn(out, (const char *)p, (size_t)n);
      else buf_puts(out, "\\ufffd");
      p += n ? n : 1;
    }
  }
  buf_putc(out, '"');
}

/* "file": ..., "line": L, "column": C of a span's start; nulls without a place */
static void json_place(Buf *out, Span s) {
  if (!s.src) {
    buf_puts(out, "\"file\":null,\"line\":null,\"column\":null");
    return;
  }
  int l, c;
  span_linecol(s, &l, &c);
  buf_puts(out, "\"file\":");
  json_string(out, s.src->name);
  buf_printf(out, ",\"line\":%d,\"column\":%d", l, c);
}

void diag_format_json(const Diag *dg, Buf *out) {
  buf_printf(out, "{\"severity\":\"%s\",\"code\":\"%s\",", dg->level == DIAG_ERROR ? "error" : "warning",
             diag_id_name(dg->id));
  json_place(out, dg->span);
  if (dg->span.src) {
    int l0, c0, l1, c1;
    Span end = dg->span;
    end.lo = end.hi > end.lo ? end.hi : end.lo;
    span_linecol(dg->span, &l0, &c0);
    span_linecol(end, &l1, &c1);
    buf_printf(out, ",\"span\":{\"start\":{\"line\":%d,\"column\":%d},\"end\":{\"line\":%d,\"column\":%d}}",
               l0, c0, l1, c1);
  } else {
    buf_puts(out, ",\"span\":null");
  }
  buf_puts(out, ",\"message\":");
  json_string(out, dg->msg);
  buf_puts(out, ",\"notes\":[");
  for (DiagNote *n = dg->notes; n; n = n->next) {
    buf_putc(out, '{');
    json_place(out, n->span.src ? n->span : dg->span);   /* as the text form places it */
    buf_puts(out, ",\"message\":");
    json_string(out, n->msg);
    buf_puts(out, n->next ? "}," : "}");
  }
  buf_puts(out, "]}\n");
}

void diag_print_all(const Diags *d, FILE *f, bool json) {
  Buf b = {0};
  for (Diag *dg = d->head; dg; dg = dg->next) {
    if (json) diag_format_json(dg, &b);
    else diag_format(dg, &b);
  }
  if (b.len) fputs(b.s, f);
  fflush(f);
  buf_free(&b);
}

void diag_clear(Diags *d) {
  for (Diag *dg = d->head, *n; dg; dg = n) {
    n = dg->next;
    for (DiagNote *x = dg->notes, *y; x; x = y) {
      y = x->next;
      free(x->msg);
      free(x);
    }
    free(dg->msg);
    free(dg);
  }
  memset(d, 0, sizeof *d);
}
