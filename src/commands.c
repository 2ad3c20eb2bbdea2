/* commands.c -- the REPL's commands (:help, :type, :vars, :reset, :ir, :sched, :cost, :code,
 * :time, :check, :target, :hw, :threads, :load, :quit): one table of names, arguments and
 * help, and cmd_run, which a statement `:name arg` reaches from session.c.  Commands show
 * the session's functions as each stage of the pipeline sees them (IR, schedule, cost,
 * code), run statements through toplevel.c, and set the session's options (target, threads,
 * hardware) in place.
 */
#include "config.h"
#include "session_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <unistd.h>
#include <time.h>

typedef RunStatus (*CmdFn)(Session *s, const char *arg, Span at);

static RunStatus cmd_help(Session *s, const char *arg, Span at);

static RunStatus cmd_quit(Session *s, const char *arg, Span at) { return RUN_QUIT; }

static RunStatus cmd_load(Session *s, const char *arg, Span at) {
  if (!*arg) {
    state_error(s, at, E_COMMAND, ":load needs a file name");
    return RUN_ERROR;
  }
  return s->run_file(s, arg, at);
}

/* A command's argument as a source of its own, placed where it stands in the command's
 * source (at, the command's span): the last copy of its bytes there, since the command's
 * text ends with it (trimmed), and an earlier one may be the command's name (:time t). */
static Source *arg_source(Session *s, const char *arg, Span at, const char *origin) {
  size_t n = strlen(arg);
  Source *src = state_add_source(s, at.src ? at.src->name : origin, xstrdup(arg), n);
  if (at.src && n && at.hi <= at.src->len && at.hi - at.lo >= n)
    for (size_t p = at.hi - n + 1; p-- > at.lo;)
      if (!memcmp(at.src->text + p, arg, n)) {
        src->parent = at.src;
        src->base = (uint32_t)p;
        break;
      }
  return src;
}

static Expr *parse_arg_expr(Session *s, const char *arg, Span at) {
  return parse_expression(s->tmp, arg_source(s, arg, at, "<command>"), &s->diags);
}

static RunStatus cmd_type(Session *s, const char *arg, Span at) {
  if (!*arg) {
    state_error(s, at, E_COMMAND, ":type needs a name or an expression");
    return RUN_ERROR;
  }
  Buf b = {0};
  Func *f = state_find_fn(s, arg);
  Binding *v = state_find_var(s, arg);
  if (v) {
    buf_printf(&b, "%s: ", arg);
    val_type_str(&v->v, &b);
  } else if (f) {
    func_signature(f, &b);
  } else if (builtin_find(arg)) {
    buf_puts(&b, builtin_find(arg)->help);
  } else {
    Expr *e = parse_arg_expr(s, arg, at);
    if (!e) return RUN_ERROR;
    Value val = top_eval(s, e);
    if (state_failed(s)) return RUN_ERROR;
    val_type_str(&val, &b);
    val_free(&val);
  }
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static int cmp_binding(const void *a, const void *b) {
  return strcmp(((const Binding *)a)->name, ((const Binding *)b)->name);
}

static RunStatus cmd_vars(Session *s, const char *arg, Span at) {
  if (!s->vars.n) {
    state_print_line(s, "(no bindings)");
    return RUN_OK;
  }
  Binding *sorted = xmalloc(sizeof(Binding) * (size_t)s->vars.n);
  memcpy(sorted, s->vars.a, sizeof(Binding) * (size_t)s->vars.n);
  qsort(sorted, (size_t)s->vars.n, sizeof(Binding), cmp_binding);
  int w = 0;
  for (int i = 0; i < s->vars.n; i++) {
    int l = (int)strlen(sorted[i].name);
    if (l > w) w = l;
  }
  Buf b = {0};
  for (int i = 0; i < s->vars.n; i++) {
    buf_printf(&b, "%-*s  ", w, sorted[i].name);
    val_type_str(&sorted[i].v, &b);
    if (i + 1 < s->vars.n) buf_putc(&b, '\n');
  }
  state_print_line(s, b.s);
  buf_free(&b);
  free(sorted);
  return RUN_OK;
}

static RunStatus cmd_reset(Session *s, const char *arg, Span at) {
  state_reset(s);
  state_print_line(s, "all bindings and user functions forgotten");
  return RUN_OK;
}

/* The first word of text in out (at most size - 1 bytes of it); its length. */
static int first_word(const char *text, char *out, int size) {
  int n = 0;
  while (text[n] && !isspace((unsigned char)text[n]) && n < size - 1) {
    out[n] = text[n];
    n++;
  }
  out[n] = 0;
  return n;
}

static Func *want_fn(Session *s, const char *arg, Span at, const char *cmd) {
  char name[128];
  int n = first_word(arg, name, sizeof name);
  if (!n) {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, "%s needs the name of a function", cmd));
    return NULL;
  }
  Func *f = state_find_fn(s, name);
  if (!f) state_error(s, at, E_COMMAND, state_tmp_printf(s, "%s: no function named '%s'", cmd, name));
  return f;
}

/* :ir NAME [unfused]: the program kept, or the program as lowered before fusion (each
 * statement, and each inlined call's, a kernel of its own), which the define hook sees. */
static RunStatus cmd_ir(Session *s, const char *arg, Span at) {
  Func *f = want_fn(s, arg, at, ":ir");
  if (!f) return RUN_ERROR;
  const char *rest = arg + first_word(arg, (char[128]){0}, 128);
  while (isspace((unsigned char)*rest)) rest++;
  size_t n = strlen(rest);
  while (n && isspace((unsigned char)rest[n - 1])) n--;
  bool unfused = n == 7 && !strncmp(rest, "unfused", 7);
  if (n && !unfused) {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, ":ir: '%.*s' is not a stage (:ir NAME, or :ir NAME unfused)", (int)n, rest));
    return RUN_ERROR;
  }
  Program *p = unfused ? lower_program(f, s->pc, state_lookup_fn, s, false) : f->code.prog;
  Buf b = {0};
  func_signature(f, &b);
  buf_putc(&b, '\n');
  lower_print(p, &b);
  if (unfused) lower_free(p);
  if (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

/* "NAME DIM=VAL ..." after the function name: the sizes, in session memory of this input. */
static bool parse_sizes(Session *s, const char *arg, Func *f, Span at, EvalSizes *out, bool *given) {
  const char *p = arg + strlen(f->name);
  int cap = 16, n = 0;
  const char **names = arena_alloc(s->tmp, sizeof(char *) * (size_t)cap);
  int64_t *vals = arena_alloc(s->tmp, sizeof(int64_t) * (size_t)cap);
  while (*p) {
    while (isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *nb = p;
    while (*p && *p != '=' && !isspace((unsigned char)*p)) p++;
    if (*p != '=' || p == nb || n == cap) {
      state_error(s, at, E_COMMAND, "sizes are written NAME=VALUE, such as M=100 N=768");
      return false;
    }
    const char *nm = arena_strndup(s->tmp, nb, (size_t)(p - nb));
    char *end;
    errno = 0;
    long long v = strtoll(p + 1, &end, 10);
    if (end == p + 1 || v < 0 || (*end && !isspace((unsigned char)*end))) {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, "the size %s needs a value of 0 or more", nm));
      return false;
    }
    if (errno == ERANGE) {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, "the size %s=%.*s does not fit in 64 bits", nm, (int)(end - p - 1), p + 1));
      return false;
    }
    bool known = false;
    for (int i = 0; i < f->nsizes; i++) known = known || !strcmp(f->sizes[i].name, nm);
    if (!known) {
      Buf b = {0};
      for (int i = 0; i < f->nsizes; i++) buf_printf(&b, "%s%s", i ? ", " : "", f->sizes[i].name);
      state_error(s, at, E_COMMAND, state_tmp_printf(s, "%s has no size %s (its sizes: %s)", f->name, nm, b.s ? b.s : "none"));
      buf_free(&b);
      return false;
    }
    names[n] = nm;
    vals[n++] = v;
    p = end;
  }
  *given = n > 0;
  if (n && n < f->nsizes) {
    for (int i = 0; i < f->nsizes; i++) {
      bool have = false;
      for (int j = 0; j < n; j++) have = have || !strcmp(names[j], f->sizes[i].name);
      if (!have) {
        state_error(s, at, E_COMMAND, state_tmp_printf(s, "give every size of %s: %s is missing", f->name, f->sizes[i].name));
        return false;
      }
    }
  }
  *out = (EvalSizes){names, vals, n};
  /* every tensor of the function must be one that could exist at these sizes */
  const Program *prog = f->code.prog;
  for (int i = 0; n && prog && i < prog->nslots; i++) {
    const Slot *sl = &prog->slots[i];
    int64_t bytes = elem_size(sl->type.elem), d;
    bool ok = true, zero = false;
    const char *why;
    for (int k = 0; k < sl->type.rank && ok; k++) {
      ok = poly_eval(sl->type.dims[k], eval_size_lookup, out, &d, &why);
      zero = zero || (ok && d == 0);
      ok = ok && (zero || size_mul_ok(bytes, d, &bytes));
    }
    if (!ok && !zero) {
      Buf t = {0};
      type_str(&sl->type, &t);
      state_error(s, at, E_COMMAND, state_tmp_printf(s, "at these sizes %s (%s) would not fit in memory: its size does not fit in 64 bits",
                                         sl->name, t.s));
      buf_free(&t);
      return false;
    }
  }
  return true;
}

/* "NAME [DIM=VAL ...]": the function and the sizes given (*given: any), or NULL after an error. */
static Func *want_fn_sizes(Session *s, const char *arg, Span at, const char *cmd, EvalSizes *sz, bool *given) {
  Func *f = want_fn(s, arg, at, cmd);
  return f && parse_sizes(s, arg, f, at, sz, given) ? f : NULL;
}

/* Lines of :sched longer than width broken at the last "; ", double space or space
 * that fits, each continuation indented past its line's own indent, so that the plan reads
 * in an 80-column terminal; a table row that fits is left as it is. */
static void wrap_lines(Buf *b, int width) {
  Buf out = {0};
  for (const char *p = b->s ? b->s : ""; *p;) {
    const char *e = strchr(p, '\n');
    int n = e ? (int)(e - p) : (int)strlen(p), indent = 0;
    while (indent < n && p[indent] == ' ') indent++;
    int first = 1;
    while (n > width - (first ? 0 : indent + 4)) {
      int room = width - (first ? 0 : indent + 4), cut = -1, skip = 0;
      static const char *const seps[] = {"; ", "  ", " "};
      for (int k = 0; k < 3 && cut < 0; k++) {
        int sl = (int)strlen(seps[k]);
        for (int i = room - sl; i > (first ? indent : 0) + room / 3; i--)
          if (!strncmp(p + i, seps[k], (size_t)sl)) {
            cut = k == 0 ? i + 1 : i;            /* a "; " stays on the first line */
            skip = k == 0 ? 1 : sl;
            break;
          }
      }
      if (cut < 0) break;                         /* one long word: leave it */
      buf_printf(&out, "%*s%.*s\n", first ? 0 : indent + 4, "", cut, p);
      p += cut + skip;
      n -= cut + skip;
      while (n > 0 && *p == ' ') p++, n--;
      first = 0;
    }
    buf_printf(&out, "%*s%.*s\n", first ? 0 : indent + 4, "", n, p);
    p += n + (e != NULL);
  }
  buf_free(b);
  *b = out;
}

/* :sched --explain: what the words of a schedule mean, in the order :sched prints them. */
static const char *const sched_glossary[][2] = {
  {"compiled N times", "how often the function was compiled: 1 for every shape it met"},
  {"kernel NAME_OUT", "one fused loop nest, named by its function and the tensor it writes (:ir NAME shows the loops)"},
  {"contraction over k", "a kernel with a reduction axis whose two inputs each miss one output axis (matmul's shape): run by the GEMM engine below"},
  {"gemm f32 on ...", "the vector unit the micro-kernels were built for: lanes, registers, FMA units x latency, clock"},
  {"compiled once: ...", "the micro-kernels made when the function was compiled; * marks those that split k over several accumulator sets"},
  {"level 0 register tiles", "h x nr tiles of C kept in registers: registers used, FLOPs per element loaded; [kept] the ones that stay, one a family"},
  {"family, heights", "a kept tile width and the row counts built for it, each with the GFLOP/s per core measured in L1 at compile time and ns a call"},
  {"inner products h x w", "kernels for a C too narrow for a tile: dot products along k"},
  {"shape", "the sizes given, as batch x M x N x K, and the threads"},
  {"chosen", "the variant the model predicts fastest for this shape"},
  {"A in place / packed", "whether A is read where it lies (strided or unit rows) or first copied into the tile's order; the same for B. `in one L1 set, taken N at a time`: A's rows are a multiple of 4 KiB apart, so a tile's rows share one set of L1, and the tile reads them N rows at a time over each cache line of the reduction"},
  {"cores: b x m x n", "how the blocks of C are split between the cores"},
  {"L3: nc, L2: mc, L1: kc", "the block sizes kept in each cache: columns of B, rows of A, depth of k; formulas of the sizes and capacities of the levels"},
  {"k split N ways", "blocks of k summed into copies of C, added at the end (deep K)"},
  {"C ... streamed", "C written by streaming stores that bypass the caches: written once, larger than the last cache, rows whole lines apart"},
  {"predicted", "max(compute, memory) plus stalls, packing and fork-join, from the measured micro-kernel rates and the levels' bandwidths"},
  {"candidates", "other variants weighed for this shape, best first: tile, A and B direct or packed, grid b x m x n (/kN: k split), block sizes"},
  {"dot, rows", "inner products along k; B streamed by rows (M = 1)"},
  {"row-wise: stages", "a kernel whose reductions run along rows: each stage is one loop over a row, intermediates of a row kept in cache"},
  {"pipelined", "two stages of neighbouring rows run in one loop"},
  {"vectorised along n", "the axis the vector lanes run over"},
  {"a reduction in runs of axes", "a reduction walked in the order its operand lies in memory, axes that lie together (c d) as one loop; each run kept or reduced"},
  {"short kept runs", "a reduction whose kept last axis is short: each block read in whole vectors whose lanes keep to their columns"},
  {"short reduced runs", "row sums of short rows, W rows at a time: shorter than a vector, a row in each lane of a gather (with AVX-512, only rows shorter than 5; longer ones by a masked load); up to 256 elements, each row in a vector of partials, the W vectors folded into one"},
  {"a layout change", "reads along one axis, writes along another: done in W x W tiles transposed in registers"},
  {"tasks over b", "the rows split into tasks for the cores; where b has too few values, the next axis instead (each task all of b on views of its share)"},
  {"streaming stores", "stores that bypass the caches, for outputs larger than the last cache (a second compiled copy, made on first use)"},
  {"model: roofline", "FLOPs / peak or bytes / bandwidth, whichever is larger"},
  {"call", "the fixed cost of a call outside the kernels"},
  {"at SIZES: predicted", "the whole function's predicted time at those sizes"},
};

static void sched_explain(Session *s) {
  enum { TERM = 23, WIDTH = 80 };
  Buf b = {0};
  buf_puts(&b, "The words of :sched, in the order it prints them:\n");
  for (size_t i = 0; i < sizeof sched_glossary / sizeof sched_glossary[0]; i++)
    buf_printf(&b, "%-*s%s\n", TERM, sched_glossary[i][0], sched_glossary[i][1]);
  /* the definitions wrap under their own column */
  Buf w = {0};
  for (const char *p = b.s; *p;) {
    const char *e = strchr(p, '\n');
    int n = (int)(e - p), col = 0;
    while (n > WIDTH - col) {
      int cut = WIDTH - col;
      while (cut > TERM && p[cut] != ' ') cut--;
      buf_printf(&w, "%*s%.*s\n", col, "", cut, p);
      p += cut + 1;
      n -= cut + 1;
      col = TERM;
    }
    buf_printf(&w, "%*s%.*s\n", col, "", n, p);
    p = e + 1;
  }
  w.s[--w.len] = 0;
  state_print_line(s, w.s);
  buf_free(&w);
  buf_free(&b);
}

static RunStatus cmd_sched(Session *s, const char *arg, Span at) {
  if (!strcmp(arg, "--explain")) {
    sched_explain(s);
    return RUN_OK;
  }
  EvalSizes sz;
  bool given;
  Func *f = want_fn_sizes(s, arg, at, ":sched", &sz, &given);
  if (!f) return RUN_ERROR;
  Buf b = {0};
  s->sched = (SessionSched){f->name, f->compiles, 0, 0};
  /* the target's schedule; with the target ref, a GPU model's when one is loaded (:hw) */
  const Backend *be = s->target;
  if (be->id == BE_REF && s->have_gpu_hw) be = &be_table[BE_GPU];
  else if (be->id == BE_CPU && !be_model_cpu(s, &(const char *){0})) be = &be_table[BE_REF];
  if (!be->describe(s, f, given ? top_extents(f, &sz) : NULL, at, &b)) {
    buf_free(&b);
    return RUN_ERROR;
  }
  wrap_lines(&b, 80);
  while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static RunStatus cmd_cost(Session *s, const char *arg, Span at) {
  EvalSizes sz;
  bool given;
  Func *f = want_fn_sizes(s, arg, at, ":cost", &sz, &given);
  if (!f) return RUN_ERROR;
  const Poly *fl, *by;
  cost_program(f->code.prog, s->pc, &fl, &by);
  Buf b = {0};
  buf_printf(&b, "%s:\n  FLOPs      ", f->name);
  poly_str(fl, &b);
  buf_puts(&b, "\n  bytes      ");
  poly_str(by, &b);
  buf_puts(&b, "\n  intensity  (");
  poly_str(fl, &b);
  buf_puts(&b, ") / (");
  poly_str(by, &b);
  buf_puts(&b, ") FLOP/byte");
  if (given) {
    int64_t fv = 0, bv = 0;
    const char *why;
    poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
    poly_eval(by, eval_size_lookup, &sz, &bv, &why);
    buf_puts(&b, "\nat");
    for (int i = 0; i < sz.n; i++) buf_printf(&b, " %s=%lld", sz.names[i], (long long)sz.vals[i]);
    buf_printf(&b, ": %lld FLOPs, %lld bytes, %.3g FLOP/byte", (long long)fv, (long long)bv, bv ? (double)fv / (double)bv : 0.0);
  }
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

/* The name of the function a line of generated code starts, or NULL: "define ... @NAME(" in
 * LLVM IR, "NAME:" at the margin in assembly (not a local ".L" label), "__global__ ... NAME("
 * in CUDA C, ".entry NAME(" in PTX.  Its length in *n. */
static const char *code_fn_start(const char *line, size_t len, bool asm_text, size_t *n) {
  const char *p = NULL, *e = line + len;
  if (len > 7 && !strncmp(line, "define ", 7)) {
    p = memchr(line, '@', len);
    if (p) p++;
  } else if ((p = memmem(line, len, ".entry ", 7))) {
    p += 7;
  } else if (memmem(line, len, "__global__", 10)) {
    const char *paren = memchr(line, '(', len);
    if (!paren) return NULL;
    /* the identifier before the parenthesis (skipping __launch_bounds__(...)) */
    const char *q = memmem(line, len, ") ", 2);
    const char *from = q && q < e ? q + 2 : line;
    paren = memchr(from, '(', (size_t)(e - from));
    if (!paren) return NULL;
    p = paren;
    while (p > from && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) p--;
    *n = (size_t)(paren - p);
    return *n ? p : NULL;
  } else if (asm_text && len > 1 && line[len - 1] == ':' && (isalpha((unsigned char)line[0]) || line[0] == '_')) {
    *n = len - 1;
    return line;
  }
  if (!p) return NULL;
  const char *q = p;
  while (q < e && (isalnum((unsigned char)*q) || *q == '_' || *q == '.')) q++;
  *n = (size_t)(q - p);
  return *n ? p : NULL;
}

/* Keep, of the generated code in b, the functions whose name contains want (the kernel
 * names of :sched -- matmul_C, softmax_Y -- stand for the CPU back end's kernel functions,
 * which are numbered: their "_kI" names).  A function runs from its start to the next
 * one's, less the module text between.  false when none matches, with the names in *names. */
static bool code_filter(Buf *b, bool asm_text, const char *want, const char *alias, Buf *names) {
  Buf out = {0};
  bool keep = false, any = false;
  for (const char *p = b->s ? b->s : ""; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p), n;
    const char *fn = code_fn_start(p, len, asm_text, &n);
    if (fn) {
      keep = memmem(fn, n, want, strlen(want)) || (alias && memmem(fn, n, alias, strlen(alias)));
      any = any || keep;
      buf_printf(names, "%s%.*s", names->len ? ", " : "", (int)n, fn);
    }
    if (keep) buf_printf(&out, "%.*s\n", (int)len, p);
    /* the end of a function: "}" at the margin (IR, CUDA C, PTX), ".Lfunc_end" (assembly) */
    if (keep && ((len == 1 && *p == '}') || !strncmp(p, ".Lfunc_end", 10))) {
      keep = false;
      buf_putc(&out, '\n');
    }
    p += len + (e != NULL);
  }
  if (any) {
    buf_free(b);
    *b = out;
  } else {
    buf_free(&out);
  }
  return any;
}

/* Text longer than the terminal goes through $PAGER (else "less -FRX"), as git does, when the
 * session is interactive and its output is a terminal; else it is printed. */
static void print_paged(Session *s, const char *text) {
  struct winsize ws;
  int fd = fileno(s->out), lines = 0;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  const char *pager = getenv("PAGER");
  if (!pager || !*pager) pager = "less -FRX";
  if (!s->interactive || !isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) != 0 || lines < ws.ws_row - 1 || !strcmp(pager, "cat")) {
    state_print_line(s, text);
    return;
  }
  fflush(s->out);
  FILE *pg = popen(pager, "w");
  if (!pg) {
    state_print_line(s, text);
    return;
  }
  void (*old)(int) = signal(SIGPIPE, SIG_IGN);        /* the reader may quit early */
  fputs(text, pg);
  fputc('\n', pg);
  pclose(pg);
  signal(SIGPIPE, old);
}

/* Print :code's text (b, freed), only the functions matching `only` when given, through the
 * pager when long. */
static RunStatus code_print(Session *s, Func *f, Buf *b, const char *what, const char *only, Span at) {
  if (only) {
    /* a kernel's name as :sched prints it stands for the CPU back end's numbered function */
    const char *alias = NULL;
    for (int k = 0; f->code.prog && k < f->code.prog->nkernels; k++)
      if (!strcmp(f->code.prog->kernels[k].name, only)) alias = state_tmp_printf(s, "_k%d", k);
    Buf names = {0};
    if (!code_filter(b, !strcmp(what, "asm"), only, alias, &names)) {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, ":code: no function of %s's %s code is named like '%s'; its functions: %s",
                                                         f->name, what, only, names.s ? names.s : "none"));
      buf_free(&names);
      buf_free(b);
      return RUN_ERROR;
    }
    buf_free(&names);
  }
  while (b->len && b->s[b->len - 1] == '\n') b->s[--b->len] = 0;
  print_paged(s, b->s ? b->s : "");
  buf_free(b);
  return RUN_OK;
}

static RunStatus cmd_code(Session *s, const char *arg, Span at) {
  Func *f = want_fn(s, arg, at, ":code");
  if (!f) return RUN_ERROR;
  /* ":code NAME [KIND] [FUNCTION]" */
  const char *rest = arg + strlen(f->name), *what = "llvm", *only = NULL;
  char words[2][128];
  int nw = 0;
  while (nw < 3) {
    while (isspace((unsigned char)*rest)) rest++;
    if (!*rest) break;
    if (nw == 2) {
      state_error(s, at, E_COMMAND, ":code takes a function, a kind and a name to pick: :code NAME [llvm|asm|cuda|ptx] [FUNCTION]");
      return RUN_ERROR;
    }
    int n = first_word(rest, words[nw], sizeof words[nw]);
    rest += n;
    nw++;
  }
  if (nw >= 1) {
    bool kind = !strcmp(words[0], "llvm") || !strcmp(words[0], "asm") || !strcmp(words[0], "cuda") || !strcmp(words[0], "ptx");
    if (kind) what = words[0];
    if (nw == 2 && !kind) what = words[0];      /* reported as an unknown kind below */
    if (nw == 2 || !kind) only = words[nw - 1];
  }
  if (strcmp(what, "llvm") && strcmp(what, "asm") && strcmp(what, "cuda") && strcmp(what, "ptx")) {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, ":code: unknown kind '%s': use llvm, asm, cuda or ptx", what));
    return RUN_ERROR;
  }
  const Backend *be = &be_table[!strcmp(what, "cuda") || !strcmp(what, "ptx") ? BE_GPU : BE_CPU];
  Buf b = {0};
  if (!be->code(s, f, what, at, &b)) {
    buf_free(&b);
    return RUN_ERROR;
  }
  return code_print(s, f, &b, what, only, at);
}

/* The roofs a call on the session's threads meets: the compute peak in GFLOP/s (returned)
 * and the memory bandwidth in GB/s, for *threads of them (at most the model's cores). */
static double roofs(Session *s, int *threads, double *bw, const char **whose) {
  const HwModel *hw = be_run_hw(s);
  bool measured = s->hw_foreign ? s->host_peak_measured : s->peak_measured;
  int cores = hw->cores > 0 ? hw->cores : 1, th = s->threads < cores ? s->threads : cores;
  double peak = hw->peak_gflops_f32 * th / cores;
  /* Without dyn --calibrate the model's peak comes from a clock: /proc/cpuinfo's, often
   * the base clock (a virtual CPU's, say) where the cores run faster, or one timed on a
   * scalar chain, which a core may not keep at full vector width.  The rate the matmul
   * micro-kernel was measured at when it was compiled is the truer roof then. */
  *whose = "";
  double kernel = !measured && s->cpu && s->target->id == BE_CPU ? cpu_core_gflops(s->cpu) * th : 0;
  if (kernel > 0) {
    peak = kernel;
    *whose = " (the micro-kernel's rate, measured)";
  }
  const HwLevel *mem = hw->nlevels ? &hw->level[hw->nlevels - 1] : NULL;
  *bw = mem ? mem->gbs * th : 0;
  if (mem && mem->total_gbs > 0 && *bw > mem->total_gbs) *bw = mem->total_gbs;
  *threads = th;
  return peak;
}

/* :time --kernels: under the call's line, each kernel's median time beside the model's
 * prediction for it (cpu_schedule_kernels) and the error, then what the call spent beside
 * them: where a prediction that misses the whole misses. */
static void time_kernels(Session *s, Func *f, const Extents *x, const double *rows, int nr, double med, bool us,
                         Buf *b) {
  CpuProgram *cp = f->code.cpu;
  int nk = cpu_program_kernels(cp);
  double *kpred = xcalloc((size_t)nk + 1, sizeof(double)), *col = xmalloc(sizeof(double) * ((size_t)nr + 1));
  int *kspan = xcalloc((size_t)nk + 1, sizeof(int));
  Buf junk = {0};
  double pred = cpu_schedule_kernels(s->cpu, cp, s->pc, x, s->threads, &junk, kpred, kspan);
  buf_free(&junk);
  double u = us ? 1e6 : 1e3, msum = 0, psum = 0;
  const char *un = us ? "us" : "ms";
  int dp = us ? 2 : 3, width = (int)strlen("beside the kernels");
  /* a line a kernel that ran or that the model weighed (not one inside a group above) */
  Buf *names = xcalloc((size_t)nk + 1, sizeof(Buf));
  for (int k = 0; k < nk; k++) {
    bool ran = false;
    for (int r = 0; r < nr; r++) ran = ran || rows[(size_t)r * (size_t)nk + k] > 0;
    if (!ran && !kspan[k]) continue;
    buf_puts(&names[k], cpu_kernel_name(cp, k));
    if (kspan[k] > 1) buf_printf(&names[k], " .. %s", cpu_kernel_name(cp, k + kspan[k] - 1));
    if ((int)names[k].len > width) width = (int)names[k].len;
  }
  buf_printf(b, "\nkernels (medians of %d runs; the model's prediction and its error):", nr);
  for (int k = 0; k < nk; k++) {
    if (!names[k].s) continue;
    for (int r = 0; r < nr; r++) col[r] = rows[(size_t)r * (size_t)nk + k];
    sort_doubles(col, (size_t)nr);
    double m = nr ? col[nr / 2] : 0;
    msum += m;
    buf_printf(b, "\n  %-*s %9.*f %s", width, names[k].s, dp, m * u, un);
    buf_free(&names[k]);
    if (kspan[k]) {
      psum += kpred[k];
      buf_printf(b, "  predicted %9.*f %s", dp, kpred[k] * u, un);
      if (m > 0) buf_printf(b, "  %+4.0f%%", 100 * (kpred[k] / m - 1));
    } else {
      buf_puts(b, "  (the model weighed it in a group above)");
    }
  }
  buf_printf(b, "\n  %-*s %9.*f %s  predicted %9.*f %s", width, "beside the kernels", dp, (med - msum) * u, un, dp,
             (pred - psum) * u, un);
  free(kpred), free(col), free(kspan), free(names);
}

static RunStatus cmd_time(Session *s, const char *arg, Span at) {
  bool kernels = !strncmp(arg, "--kernels", 9) && (!arg[9] || arg[9] == ' ' || arg[9] == '\t');
  if (kernels)
    for (arg += 9; *arg == ' ' || *arg == '\t'; arg++) {}
  if (!*arg) {
    state_error(s, at, E_COMMAND, ":time needs a statement");
    return RUN_ERROR;
  }
  double t[1000];
  int n = 0;
  /* A call of a function, bound or not (C = matmul(rand(...), B)): its arguments are
   * evaluated once, outside the timed runs, and only the call is timed -- what the function
   * costs, not the making of its random inputs, nor reading the statement again at every
   * run (about a microsecond of lexing and parsing, as much as a small kernel's call). */
  const char *bind = NULL, *call_text = arg;
  {
    const char *p = arg;
    while (isalnum((unsigned char)*p) || *p == '_') p++;
    const char *q = p;
    while (*q == ' ' || *q == '\t') q++;
    if (p > arg && !isdigit((unsigned char)*arg) && q[0] == '=' && q[1] != '=') {
      bind = arena_strndup(s->tmp, arg, (size_t)(p - arg));
      for (call_text = q + 1; *call_text == ' ' || *call_text == '\t'; call_text++) {}
    }
  }
  Func *fn = NULL;
  Expr *call = NULL;
  const char *cp = call_text;
  while (isalnum((unsigned char)*cp) || *cp == '_') cp++;
  if (cp > call_text && *cp == '(' && state_find_fn(s, arena_strndup(s->tmp, call_text, (size_t)(cp - call_text))))
    call = parse_arg_expr(s, call_text, at);
  if (state_failed(s)) return RUN_ERROR;
  if (kernels && (!call || call->kind != EX_CALL || s->target->id != BE_CPU)) {
    state_error(s, at, E_COMMAND, ":time --kernels times the kernels of a function's call on the cpu target, such as "
                                  ":time --kernels f(X)");
    return RUN_ERROR;
  }
  bool built = false;
  if (call && call->kind == EX_CALL && (fn = state_find_fn(s, call->name)))
    for (int i = 0; i < call->nargs; i++) built = built || call->args[i]->kind != EX_NAME;
  Value *args = NULL, result = {0};
  if (fn) {
    args = arena_alloc(s->tmp, sizeof(Value) * (size_t)(call->nargs + 1));
    for (int i = 0; i < call->nargs; i++) args[i] = (Value){0};
    for (int i = 0; i < call->nargs && !state_failed(s); i++) args[i] = top_eval(s, call->args[i]);
    if (!state_failed(s)) result = top_call(s, fn, call, args);     /* compiles, warms */
  }
  /* one run first: it compiles what needs compiling, and warms the caches; every run reads
   * the same source (the session keeps each source it is given) */
  Source *src = fn ? NULL : arg_source(s, arg, at, "<time>");
  s->keep_runs = !fn;           /* its top-level statements are checked and compiled once */
  RunStatus r0 = fn ? (state_failed(s) ? RUN_ERROR : RUN_OK) : s->run_arg(s, src, true);
  unsigned last_before = s->last_fn_calls, instead_before = s->ran_instead;
  /* the kernels' times of the runs below (the warm-up run compiled the function) */
  CpuProgram *prof_cp = kernels && fn && r0 == RUN_OK ? fn->code.cpu : NULL;
  double *rows = prof_cp ? xmalloc(sizeof(double) * 1000 * (size_t)cpu_program_kernels(prof_cp)) : NULL;
  if (prof_cp) cpu_profile(prof_cp, rows, 1000);
  double start = now_s();
  RunStatus r = r0;
  while (r == RUN_OK && n < 1000 && (n < 3 || (now_s() - start < 1.0 && n < 100))) {
    double t0 = now_s();
    if (fn) {
      val_free(&result);
      result = top_call(s, fn, call, args);
      r = state_failed(s) ? RUN_ERROR : RUN_OK;
    } else {
      r = s->run_arg(s, src, true);
    }
    t[n++] = now_s() - t0;
  }
  s->keep_runs = false;
  int prof_rows = prof_cp ? cpu_profile(prof_cp, NULL, 0) : 0;
  top_forget_runs(s);
  if (fn) {
    for (int i = 0; i < call->nargs; i++) val_free(&args[i]);
    if (r == RUN_OK && bind) state_bind(s, bind, result);
    else val_free(&result);
  }
  if (r != RUN_OK) {
    free(rows);
    return r;
  }
  sort_doubles(t, (size_t)n);
  double med = t[n / 2];
  s->timing = (SessionTiming){.median = med, .min = t[0], .max = t[n - 1], .runs = n,
                              .instead = s->ran_instead - instead_before};
  Buf b = {0};
  /* in microseconds where the median is under 0.1 ms, where milliseconds to three places
   * read a call of a small kernel as 0.000 */
  bool us = med < 1e-4;
  double u = us ? 1e6 : 1e3;
  int dp = us ? 2 : 3;
  const char *un = us ? "us" : "ms";
  buf_printf(&b, "time: median %.*f %s  min %.*f %s  max %.*f %s  runs %d  (%s)", dp, med * u, un, dp, t[0] * u, un, dp,
             t[n - 1] * u, un, n, s->target->name);
  /* a target whose code did not run every time says so: the times are the evaluator's */
  if (s->ran_instead != instead_before)
    buf_printf(&b, "\n(the reference evaluator ran %u of the %d runs: %s)", s->ran_instead - instead_before, n, s->instead_why);
  if (fn && built) buf_printf(&b, "\n(the call of %s alone: its arguments were built once, before the timed runs)", fn->name);
  Func *f = s->last_fn;
  if (f && last_before != s->last_fn_calls) {
    EvalSizes sz = {s->last_names, s->last_vals, s->last_n};
    const Poly *fl, *by;
    cost_program(f->code.prog, s->pc, &fl, &by);
    int64_t fv = 0, bv = 0;
    const char *why;
    poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
    poly_eval(by, eval_size_lookup, &sz, &bv, &why);
    int th;
    double bw;
    const char *whose;
    double peak = roofs(s, &th, &bw, &whose);
    buf_printf(&b, "\n%s: %.2f GFLOP/s, %.2f GB/s", f->name, (double)fv / med * 1e-9, (double)bv / med * 1e-9);
    s->timing.fn = f->name;
    s->timing.gflops = (double)fv / med * 1e-9;
    s->timing.gbs = (double)bv / med * 1e-9;
    /* the share of whichever roof binds at this intensity: compute or memory bandwidth */
    bool mem_bound = bw > 0 && peak > 0 && (double)fv / peak < (double)bv / bw;
    if (mem_bound) {
      s->timing.bound = "memory";
      s->timing.roof = bw;
      s->timing.roof_pct = 100.0 * s->timing.gbs / bw;
    } else if (peak > 0) {
      s->timing.bound = "compute";
      s->timing.roof = peak;
      s->timing.roof_pct = 100.0 * s->timing.gflops / peak;
    }
    if (mem_bound)
      buf_printf(&b, ", %.0f%% of the %.0f GB/s memory bandwidth of %d thread%s", 100.0 * (double)bv / med * 1e-9 / bw, bw,
                 th, th == 1 ? "" : "s");
    else if (peak > 0)
      buf_printf(&b, ", %.0f%% of the %.0f GFLOP/s peak of %d thread%s%s", 100.0 * (double)fv / med * 1e-9 / peak, peak, th,
                 th == 1 ? "" : "s", whose);
    double pred = 0;
    if (s->target->id == BE_CPU && f->code.cpu) {
      Buf junk = {0};
      pred = cpu_schedule(s->cpu, f->code.cpu, s->pc, top_extents(f, &sz), s->threads, &junk);
      buf_free(&junk);
    } else {
      pred = cost_roofline(be_run_hw(s), s->threads, (double)fv, (double)bv);
    }
    if (pred > 0) buf_printf(&b, "; predicted %.*f %s", dp, pred * u, un);
    s->timing.predicted = pred;
    if (prof_cp && prof_cp == f->code.cpu && prof_rows == n)
      time_kernels(s, f, top_extents(f, &sz), rows, prof_rows, med, us, &b);
    else if (prof_cp)
      buf_printf(&b, "\n(the kernels: %d of the %d runs ran the compiled code)", prof_rows, n);
  }
  free(rows);
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

/* ---- :plot NAME DIM=lo..hi [DIM=v ...] [> file.svg] ---- */

enum { PLOT_POINTS = 12 };

/* Arguments for f at sizes sz: tensors of its parameters' shapes holding values in [0, 1)
 * (integers 0, a valid index everywhere), and each size parameter's value.  false after
 * an error, reported. */
static bool plot_args(Session *s, Func *f, EvalSizes *sz, Span at, Tensor **args) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < f->nparams; i++) {
    const FnParam *p = &f->params[i];
    int64_t shape[DYN_MAX_RANK];
    const char *why;
    for (int k = 0; k < p->type.rank; k++)
      if (!poly_eval(p->type.dims[k], eval_size_lookup, sz, &shape[k], &why) || shape[k] < 0) {
        state_error(s, at, E_COMMAND, state_tmp_printf(s, ":plot: the argument %s has no shape at these sizes", p->name));
        return false;
      }
    char msg[256];
    args[i] = tensor_new(p->type.elem, p->type.rank, shape, msg, sizeof msg);
    if (!args[i]) {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, ":plot: the argument %s: %s", p->name, msg));
      return false;
    }
    if (p->is_size) {
      for (int v = 0; v < sz->n; v++)
        if (!strcmp(sz->names[v], p->name)) tensor_set_i64(args[i], 0, sz->vals[v]);
    } else if (elem_is_float(p->type.elem)) {
      int64_t n = tensor_numel(args[i]);
      for (int64_t e = 0; e < n; e++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tensor_set_f64(args[i], e, (double)(x >> 40) * 0x1.0p-24);
      }
    }
  }
  return true;
}

/* The median seconds of calls of f on args: at least 3, then up to 0.2 s or 50 calls. */
static bool plot_measure(Session *s, Func *f, Tensor **args, Span at, double *secs) {
  double t[50];
  int n = 0;
  double start = now_s();
  Tensor *outs[8] = {0};
  Buf err = {0};
  bool ok = top_call_tensors(s, f->name, args, f->nparams, outs, 8, &err);   /* compiles, warms */
  for (int i = 0; i < 8; i++) tensor_release(outs[i]), outs[i] = NULL;
  start = now_s();
  while (ok && (n < 3 || (n < 50 && now_s() - start < 0.2))) {
    double t0 = now_s();
    ok = top_call_tensors(s, f->name, args, f->nparams, outs, 8, &err);
    t[n++] = now_s() - t0;
    for (int i = 0; i < 8; i++) tensor_release(outs[i]), outs[i] = NULL;
  }
  if (!ok) state_error(s, at, E_COMMAND, state_tmp_printf(s, ":plot: %s: %s", f->name, err.s ? err.s : "the call failed"));
  buf_free(&err);
  if (!ok) return false;
  sort_doubles(t, (size_t)n);
  *secs = t[n / 2];
  return true;
}

/* The schedule the CPU back end chooses at sz, as the "chosen:" lines :sched prints (one a
 * kernel that chooses), else words saying that nothing is chosen by shape. */
static const char *plot_variant(Session *s, Func *f, EvalSizes *sz) {
  if (s->target->id != BE_CPU || !f->code.cpu) return state_tmp_printf(s, "the %s target's code at every size", s->target->name);
  Buf b = {0}, v = {0};
  cpu_schedule(s->cpu, f->code.cpu, s->pc, top_extents(f, sz), s->threads, &b);
  for (const char *p = b.s ? b.s : ""; *p;) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    const char *c = memmem(p, n, "chosen: ", 8);
    if (c) buf_printf(&v, "%s%.*s", v.len ? "; " : "", (int)(n - (size_t)(c + 8 - p)), c + 8);
    p += n + (e != NULL);
  }
  const char *r = v.s ? arena_strndup(s->tmp, v.s, v.len) : "the same code at every size";
  buf_free(&b);
  buf_free(&v);
  return r;
}

static RunStatus cmd_plot(Session *s, const char *arg, Span at) {
  /* the swept size: its token becomes NAME=hi for parse_sizes, which checks every name */
  char *text = arena_strndup(s->tmp, arg, strlen(arg)), *svg = strchr(text, '>');
  if (svg) {
    *svg++ = 0;
    while (isspace((unsigned char)*svg)) svg++;
    for (char *e = svg + strlen(svg); e > svg && isspace((unsigned char)e[-1]);) *--e = 0;
    if (!*svg) {
      state_error(s, at, E_COMMAND, ":plot: '>' needs a file name, such as > plot.svg");
      return RUN_ERROR;
    }
  }
  char *dots = strstr(text, "..");
  char *eq = dots ? dots : NULL;
  while (eq && eq > text && eq[-1] != '=') eq--;
  long long lo = 0, hi = 0;
  char *end = NULL;
  if (dots) {
    lo = strtoll(eq, &end, 10);
    if (end == dots) hi = strtoll(dots + 2, &end, 10);
  }
  if (!dots || eq == text || end == dots || end == dots + 2 || (*end && !isspace((unsigned char)*end)) || lo < 1 || hi <= lo) {
    state_error(s, at, E_COMMAND, ":plot sweeps one size from lo to hi: :plot NAME DIM=lo..hi [DIM=v ...] [> file.svg], with 1 <= lo < hi");
    return RUN_ERROR;
  }
  char *name_end = eq - 1, *name = name_end;
  while (name > text && !isspace((unsigned char)name[-1])) name--;
  const char *xname = arena_strndup(s->tmp, name, (size_t)(name_end - name));
  memmove(eq + snprintf(eq, (size_t)(end - eq + 1), "%lld", hi), end, strlen(end) + 1);
  EvalSizes sz;
  bool given;
  Func *f = want_fn_sizes(s, text, at, ":plot", &sz, &given);
  if (!f) return RUN_ERROR;
  int xi = -1;
  for (int i = 0; i < sz.n; i++)
    if (!strcmp(sz.names[i], xname)) xi = i;
  /* points: geometric over a wide range, even otherwise, distinct integers */
  PlotPoint pt[PLOT_POINTS];
  const char *variants[PLOT_POINTS];
  int n = 0, nv = 0;
  bool geo = hi >= 8 * lo, every = hi - lo < PLOT_POINTS;   /* every integer of a short range */
  for (int i = 0; i < PLOT_POINTS; i++) {
    double u = (double)i / (PLOT_POINTS - 1);
    int64_t x = every ? lo + i : geo ? llround(lo * pow((double)hi / (double)lo, u)) : llround(lo + (double)(hi - lo) * u);
    if (x > hi) break;
    if (n && x <= pt[n - 1].x) continue;
    pt[n++] = (PlotPoint){.x = x};
  }
  /* the arguments at hi must fit in half the memory: each is filled, so every page is touched */
  double need = 0, have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < f->nparams; i++) {
    double bytes = (double)elem_size(f->params[i].type.elem);
    int64_t d;
    const char *why;
    for (int k = 0; k < f->params[i].type.rank; k++)
      bytes *= poly_eval(f->params[i].type.dims[k], eval_size_lookup, &sz, &d, &why) ? (double)d : 0;
    need += bytes;
  }
  if (have > 0 && need > have / 2) {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, ":plot: the arguments at %s=%lld take %.1f GiB, over half of this machine's %.1f GiB",
                                                       xname, hi, need / (1 << 30), have / (1 << 30)));
    return RUN_ERROR;
  }
  const Poly *fl, *by;
  cost_program(f->code.prog, s->pc, &fl, &by);
  Tensor **args = arena_alloc(s->tmp, sizeof(Tensor *) * (size_t)(f->nparams ? f->nparams : 1));
  for (int i = 0; i < n; i++) {
    sz.vals[xi] = pt[i].x;
    memset(args, 0, sizeof(Tensor *) * (size_t)f->nparams);
    bool ok = plot_args(s, f, &sz, at, args) && plot_measure(s, f, args, at, &pt[i].measured_s);
    if (ok) pt[i].predicted_s = top_predict(s, f->name, args, f->nparams);
    for (int k = 0; k < f->nparams; k++) tensor_release(args[k]);
    if (!ok) return RUN_ERROR;
    int64_t fv = 0, bv = 0;
    const char *why;
    poly_eval(fl, eval_size_lookup, &sz, &fv, &why);
    poly_eval(by, eval_size_lookup, &sz, &bv, &why);
    pt[i].flops = (double)fv;
    pt[i].bytes = (double)bv;
    const char *v = plot_variant(s, f, &sz);
    int k = 0;
    while (k < nv && strcmp(variants[k], v)) k++;
    if (k == nv) variants[nv++] = v;
    pt[i].variant = k;
  }
  Buf title = {0};
  buf_printf(&title, "%s on %s, %d thread%s:", f->name, s->target->name, s->threads, s->threads == 1 ? "" : "s");
  for (int i = 0; i < sz.n; i++)
    if (i == xi) buf_printf(&title, " %s=%lld..%lld", xname, lo, hi);
    else buf_printf(&title, " %s=%lld", sz.names[i], (long long)sz.vals[i]);
  int th;
  const char *whose;
  PlotData d = {title.s, xname, pt, n, variants, nv, 0, 0};
  d.peak_gflops = roofs(s, &th, &d.bw_gbs, &whose);
  Buf b = {0};
  RunStatus r = RUN_OK;
  if (svg) {
    plot_svg(&d, &b);
    char msg[512];
    s->interrupt = 0;
    FileOut *o = file_out_open(svg, &s->interrupt, msg, sizeof msg);
    bool ok = o && file_out_write(o, b.s, b.len, &s->interrupt, msg, sizeof msg);
    if (o && !ok) file_out_abandon(o);
    else if (o) ok = file_out_commit(o, msg, sizeof msg);
    if (!ok) {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, ":plot: %s: %s", svg, msg));
      r = RUN_ERROR;
    } else {
      buf_free(&b);
      buf_printf(&b, "wrote %s (%d points, %d variant%s)", svg, n, nv, nv == 1 ? "" : "s");
      state_print_line(s, b.s);
    }
  } else {
    plot_text(&d, 64, 16, &b);
    while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
    state_print_line(s, b.s);
  }
  buf_free(&b);
  buf_free(&title);
  return r;
}

/* One run of a :check expression on the current target: a call of a function reuses the
 * arguments evaluated once (so random inputs agree), anything else is evaluated afresh. */
static Value check_run(Session *s, const char *arg, Span at, Expr *e, Func *fn, Value *args) {
  if (fn) return top_call(s, fn, e, args);
  Expr *again = parse_arg_expr(s, arg, at);
  return again ? top_eval(s, again) : (Value){0};
}

static RunStatus cmd_check(Session *s, const char *arg, Span at) {
  if (!*arg) {
    state_error(s, at, E_COMMAND, ":check needs an expression");
    return RUN_ERROR;
  }
  const Backend *saved = s->target;
  Value ref = {0};
  Value *args = NULL;
  Buf b = {0};
  bool ok = true;
  s->target = &be_table[BE_REF];
  /* every back end draws the same random numbers: rand() in the expression starts from the
   * same state each time, and the session goes on from where the reference left it */
  uint64_t rng0[4], rng1[4];
  memcpy(rng0, s->rng, sizeof rng0);
  memcpy(rng1, s->rng, sizeof rng1);
  Expr *e = parse_arg_expr(s, arg, at);
  if (!e) goto out;
  Func *fn = e->kind == EX_CALL ? state_find_fn(s, e->name) : NULL;
  if (fn) {
    args = xcalloc((size_t)e->nargs + 1, sizeof(Value));
    for (int i = 0; i < e->nargs && !state_failed(s); i++) args[i] = top_eval(s, e->args[i]);
  }
  if (!state_failed(s)) ref = check_run(s, arg, at, e, fn, args);
  memcpy(rng1, s->rng, sizeof rng1);
  if (state_failed(s)) goto out;
  val_type_str(&ref, &b);
  buf_puts(&b, ": ref computed");
  /* every other back end of the table, against the reference */
  for (const Backend *be = be_table + 1; be < be_table + BE__COUNT; be++) {
    const char *why;
    if (!be->available(s, &why)) {
      buf_printf(&b, "; %s not available (%s)", be->name, why);
      continue;
    }
    s->target = be;
    memcpy(s->rng, rng0, sizeof rng0);
    unsigned ran = s->ran_compiled, instead = s->ran_instead;
    s->compile_all = true;
    Value v = check_run(s, arg, at, e, fn, args);
    s->compile_all = false;
    if (state_failed(s)) {
      val_free(&v);
      goto out;
    }
    if (s->ran_instead != instead) {
      /* a back end that did not run is not checked: say so, and why */
      buf_printf(&b, "; %s did not run %s (%s)", be->name, s->ran_compiled == ran ? "it" : "all of it",
                 s->instead_why);
      ok = false;
      val_free(&v);
      continue;
    }
    /* f32 contractions on the tensor cores round their operands to 10 (tf32) or 7 (bf16)
     * bits: a relative error of a few units of 2^-11 or 2^-8 of the largest value */
    double tol = 0;
    CudaMath m = be->id == BE_GPU ? cuda_math_on(cuda_backend_hw(s->gpu), s->gpu_math) : CUDA_EXACT;
    if (m != CUDA_EXACT) {
      tol = m == CUDA_TF32 ? 5e-3 : 4e-2;
      buf_printf(&b, "; %s (%s, tolerance %g) vs ref: ", be->name, cuda_math_name(m), tol);
    } else {
      buf_printf(&b, "; %s vs ref: ", be->name);
    }
    bool same = val_compare(&v, &ref, tol, &b);
    buf_puts(&b, same ? ": ok" : ": MISMATCH");
    ok = ok && same;
    val_free(&v);
  }
  state_print_line(s, b.s);
  if (!ok) state_error(s, at, E_COMMAND, ":check: the back ends disagree");
out:
  buf_free(&b);
  val_free(&ref);
  if (args) {
    for (int i = 0; i < e->nargs; i++) val_free(&args[i]);
    free(args);
  }
  s->target = saved;
  memcpy(s->rng, rng1, sizeof rng1);
  return state_failed(s) ? RUN_ERROR : RUN_OK;
}

/* What f32 contractions compute in on hw: "f32 contractions in tf32 on the tensor cores". */
static const char *gpu_math_text(Session *s, const HwModel *hw) {
  if (s->gpu_math == CUDA_EXACT) return "f32 contractions exact";
  if (hw && cuda_math_on(hw, s->gpu_math) == CUDA_EXACT)
    return state_tmp_printf(s, "f32 contractions exact: %s needs the tensor cores of compute capability 8.0 (%s has %d.%d)",
                      cuda_math_name(s->gpu_math), hw->name, hw->cc_major, hw->cc_minor);
  return state_tmp_printf(s, "f32 contractions in %s on the tensor cores", cuda_math_name(s->gpu_math));
}

static RunStatus cmd_target(Session *s, const char *arg, Span at) {
  if (!*arg) {
    if (s->gpu_math == CUDA_EXACT) state_print_line(s, state_tmp_printf(s, "target: %s", s->target->name));
    else if (s->target->id == BE_GPU) state_print_line(s, state_tmp_printf(s, "target: gpu %s", cuda_math_name(s->gpu_math)));
    else state_print_line(s, state_tmp_printf(s, "target: %s (GPU code: %s)", s->target->name, gpu_math_text(s, NULL)));
    return RUN_OK;
  }
  /* the first word, and for gpu the arithmetic after it */
  size_t n = strcspn(arg, " \t");
  const char *rest = arg + n;
  while (isspace((unsigned char)*rest)) rest++;
  size_t rn = strlen(rest);
  while (rn && isspace((unsigned char)rest[rn - 1])) rn--;
  if (n == 3 && !strncmp(arg, "gpu", 3)) {
    CudaMath m;
    if (!rn || (rn == 5 && !strncmp(rest, "exact", 5))) m = CUDA_EXACT;
    else if (rn == 4 && !strncmp(rest, "tf32", 4)) m = CUDA_TF32;
    else if (rn == 4 && !strncmp(rest, "bf16", 4)) m = CUDA_BF16;
    else {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, "unknown arithmetic '%.*s' for :target gpu: use exact, tf32 or bf16", (int)rn, rest));
      return RUN_ERROR;
    }
    bool changed = m != s->gpu_math;
    be_set_gpu_math(s, m);
    if (!be_gpu(s)) {
      state_print_line(s, state_tmp_printf(s, "target: %s -- no GPU: %s", s->target->name, s->gpu_why));
      if (m != CUDA_EXACT || changed) {
        const HwModel *g = be_gpu_model(s);
        state_print_line(s, state_tmp_printf(s, "GPU code for %s (:code cuda, :sched): %s", g ? g->name : "the GPU model", gpu_math_text(s, g)));
      }
    } else {
      s->target = &be_table[BE_GPU];
      if (m != CUDA_EXACT || changed)
        state_print_line(s, state_tmp_printf(s, "target: gpu (%s); %s", cuda_backend_device(s->gpu), gpu_math_text(s, cuda_backend_hw(s->gpu))));
      else
        state_print_line(s, state_tmp_printf(s, "target: gpu (%s)", cuda_backend_device(s->gpu)));
    }
    return RUN_OK;
  }
  if (!strcmp(arg, "ref")) {
    s->target = &be_table[BE_REF];
    state_print_line(s, "target: ref (the reference evaluator)");
  } else if (!strcmp(arg, "cpu")) {
    if (!be_cpu(s)) {
      state_error(s, at, E_COMMAND, state_tmp_printf(s, "cannot use the CPU back end: %s", s->cpu_why));
      return RUN_ERROR;
    }
    s->target = &be_table[BE_CPU];
    state_print_line(s, state_tmp_printf(s, "target: cpu (LLVM, %s, %d thread%s)", cpu_backend_cpu(s->cpu), s->threads, s->threads == 1 ? "" : "s"));
  } else {
    state_error(s, at, E_COMMAND, state_tmp_printf(s, "unknown target '%s': use cpu, gpu or ref", arg));
    return RUN_ERROR;
  }
  return RUN_OK;
}

static RunStatus cmd_hw(Session *s, const char *arg, Span at) {
  const HwModel *show = &s->hw;
  const char *note = NULL;
  if (*arg) {
    char msg[512];
    HwModel hw;
    if (!hw_load(arg, &hw, msg, sizeof msg)) {
      state_error(s, at, E_COMMAND, msg);
      return RUN_ERROR;
    }
    if (!strcmp(hw.kind, "gpu")) {
      /* a GPU model: what :code cuda renders for and :sched plans on; the CPU's stays */
      s->gpu_hw = hw;
      s->have_gpu_hw = s->gpu_hw_chosen = true;
      show = &s->gpu_hw;

    } else {
      /* `:hw host` is the detected host again, with its calibration */
      bool host = !strcmp(hw.name, "host") && !hw.path[0];
      top_forget_runs(s);          /* what :time kept was compiled for the old model */
      note = be_set_cpu_model(s, host ? &s->host_hw : &hw, host && s->host_peak_measured);
    }
  }
  Buf b = {0};
  hw_describe(show, &b);
  if (note) buf_printf(&b, "note: %s\n", note);
  while (b.len && b.s[b.len - 1] == '\n') b.s[--b.len] = 0;
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

static RunStatus cmd_threads(Session *s, const char *arg, Span at) {
  if (*arg) {
    char *end;
    long n = strtol(arg, &end, 10);
    if (*end || n < 1 || n > 1024) {
      state_error(s, at, E_COMMAND, ":threads needs a number from 1 to 1024");
      return RUN_ERROR;
    }
    s->threads = (int)n;
    if (s->cpu) cpu_backend_set_threads(s->cpu, s->threads);
  }
  state_print_line(s, state_tmp_printf(s, "threads: %d%s", s->threads, s->target->id == BE_REF ? " (the reference evaluator uses one)" : ""));
  return RUN_OK;
}

static const struct Command {
  const char *name, *args, *summary, *detail;
  CmdFn fn;
} commands[] = {
  {"help", "[cmd]", "the commands, or one in detail", "With a name, shows how to use that command.", cmd_help},
  {"quit", "", "leave the REPL", "Leaves the REPL (also Ctrl-D on an empty line). In a script, stops it.", cmd_quit},
  {"load", "FILE", "run a script in this session", "Runs FILE as if typed here: its functions and bindings stay.", cmd_load},
  {"type", "EXPR | NAME", "the type, with symbolic dimensions for functions",
   "For a function, its signature over size variables; for a binding, its type; for an\nexpression, the type of its value.", cmd_type},
  {"vars", "", "the names bound in the session, with their types", "Lists every binding, sorted by name.", cmd_vars},
  {"reset", "", "forget all bindings", "Forgets every binding and every function defined in the session (the prelude stays).", cmd_reset},
  {"ir", "NAME [unfused]", "the loop-level IR of a function after fusion",
   "Shows the buffers and the kernels of a function: loop nests with symbolic extents,\nafter inlining elementwise producers and fusing row-wise chains.  With unfused, the\nprogram as lowered, before fusion: each statement a kernel of its own.", cmd_ir},
  {"sched", "NAME [DIM=VAL ...] | --explain", "the schedule: levels, tiles, candidates", "Shows how a function is scheduled and how many times it was compiled; with sizes, the\n  variant chosen for them and its predicted time.  :sched --explain says what its words mean.", cmd_sched},
  {"cost", "NAME", "FLOPs, bytes and intensity as formulas", "Shows the cost model of a function in its size variables.", cmd_cost},
  {"code", "NAME [llvm|asm|cuda|ptx] [FUNCTION]", "the generated code",
   "Shows the code generated for a function; with FUNCTION, only the generated functions whose\n"
   "  name contains it (a kernel's name from :sched picks its code).  Long output goes through\n"
   "  $PAGER (else less) on a terminal.", cmd_code},
  {"time", "[--kernels] STMT", "run a statement repeatedly and time it (--kernels: each kernel's time)",
   "Runs the statement at least 3 times (up to a second) and prints\n  time: median M ms  min ... max ...  runs N\n"
   "With --kernels, a call of a function: each kernel's median time beside the model's prediction", cmd_time},
  {"plot", "NAME DIM=lo..hi [DIM=v ...] [> FILE.svg]", "measured and predicted speed over a range of sizes",
   "Sweeps one size over 12 points (geometric when hi >= 8 lo), calls the function on values\n"
   "  in [0, 1) at each and draws the measured and the predicted GFLOP/s (GB/s for a function\n"
   "  that computes nothing) against the roofline, marking where the chosen schedule changes;\n"
   "  > FILE.svg writes the chart as an SVG picture instead.", cmd_plot},
  {"check", "EXPR", "run on every back end and compare", "Evaluates the expression on every available back end and compares the results.", cmd_check},
  {"target", "cpu|gpu [MATH]|ref", "which back end runs the next statements",
   "Chooses the back end; without an argument shows it.  MATH, after gpu, is the arithmetic of\n"
   "f32 contractions (matmul, bmm, linear, attention's products): exact (f32, the default), or\n"
   "tf32 or bf16: the tensor cores of compute capability 8.0 and later, with the operands\n"
   "rounded to 10 (tf32) or 7 (bf16) bits of mantissa and the sums kept in f32.  It holds for\n"
   ":code NAME cuda|ptx and :sched too, which need no GPU.",
   cmd_target},
  {"hw", "[NAME|FILE]", "the hardware model, or load another", "Shows the hardware model in use; with a name (see hw/) or a file, loads it.", cmd_hw},
  {"threads", "N", "CPU threads", "Sets the number of CPU threads compiled code may use.", cmd_threads},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static RunStatus cmd_help(Session *s, const char *arg, Span at) {
  Buf b = {0};
  if (*arg) {
    const char *nm = arg[0] == ':' ? arg + 1 : arg;
    for (int i = 0; i < NCOMMANDS; i++)
      if (!strcmp(commands[i].name, nm)) {
        buf_printf(&b, ":%s%s%s\n  %s\n%s", commands[i].name, *commands[i].args ? " " : "", commands[i].args,
                   commands[i].summary, commands[i].detail);
        state_print_line(s, b.s);
        buf_free(&b);
        return RUN_OK;
      }
    state_error(s, at, E_COMMAND, state_tmp_printf(s, "no command ':%s' (try :help)", nm));
    return RUN_ERROR;
  }
  buf_puts(&b, "commands:\n");
  for (int i = 0; i < NCOMMANDS; i++) {
    char head[64];
    snprintf(head, sizeof head, ":%s%s%s", commands[i].name, *commands[i].args ? " " : "", commands[i].args);
    buf_printf(&b, "  %-28s %s\n", head, commands[i].summary);
  }
  buf_puts(&b, "built-in functions:\n");
  for (int i = 0; i < builtin_count; i++) buf_printf(&b, "  %s\n", builtin_table[i].help);
  buf_puts(&b, "math functions, elementwise (lang/reference.md, Math functions):\n ");
  for (int i = OP_EXP; i < OP__COUNT; i++) buf_printf(&b, " %s", op_name((OpKind)i));
  buf_puts(&b, "\n");
  buf_puts(&b, "functions in the session: ");
  for (int i = 0; i < s->fns.n; i++) buf_printf(&b, "%s%s", i ? " " : "", s->fns.a[i]->name);
  state_print_line(s, b.s);
  buf_free(&b);
  return RUN_OK;
}

RunStatus cmd_run(Session *s, const char *text, Span at) {
  char name[32];
  int n = first_word(text, name, sizeof name);
  const char *arg = text + n;
  while (isspace((unsigned char)*arg)) arg++;
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(commands[i].name, name)) return commands[i].fn(s, arg, at);
  Diag *dg = state_error(s, at, E_COMMAND, state_tmp_printf(s, "unknown command ':%s' (see :help)", name));
  Suggest sg;
  suggest_init(&sg, name);
  const char *only = NULL;       /* the one command that starts with what was typed */
  int nstart = 0;
  for (int i = 0; i < NCOMMANDS; i++) {
    suggest_add(&sg, commands[i].name);
    if (*name && !strncmp(commands[i].name, name, strlen(name))) only = commands[i].name, nstart++;
  }
  const char *best = suggest_best(&sg) ? suggest_best(&sg) : nstart == 1 ? only : NULL;
  if (best) diag_note(dg, (Span){0}, "did you mean ':%s'?", best);
  return RUN_ERROR;
}

void cmd_complete(const char *prefix, void (*add)(void *cookie, const char *cand), void *cookie) {
  size_t n = strlen(prefix);
  for (int i = 0; i < NCOMMANDS; i++) {
    char c[40];
    snprintf(c, sizeof c, ":%s", commands[i].name);
    if (!strncmp(c, prefix, n)) add(cookie, c);
  }
}
