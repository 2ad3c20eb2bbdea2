/* cuda_analyse.c -- the GPU back end's analysis: what each kernel of a Program becomes.  It
 * classifies every kernel (a loop nest, row-wise, a reduction to one value, a contraction
 * found by match_contraction), lists its arguments and the variants to compile (loop, loop4,
 * warp, block, grid, the contraction's tile shapes, split K), and names every slot and axis
 * in C.  cuda_render.c writes what it decides; cuda_plan.c picks among the variants. */
#include "config.h"
#include "cuda_int.h"

#include <stdlib.h>
#include <string.h>

static const GemmShape GEMM_SHAPES[] = {
  {128, 128, 16, 8, 8, 0, 0}, {128, 64, 16, 8, 8, 0, 0}, {64, 128, 16, 8, 8, 0, 0}, {64, 64, 16, 8, 8, 0, 0},
  {32, 32, 32, 4, 4, 0, 0},
};
/* f64: an accumulator takes two registers, so register tiles of 4 x 4 (the 8 x 8 ones of f32
 * would spill); the same tile code, its quads read as two 16-byte halves. */
static const GemmShape F64_SHAPES[] = {
  {64, 64, 16, 4, 4, 0, 0}, {64, 32, 16, 4, 4, 0, 0}, {32, 32, 16, 4, 4, 0, 0},
};
/* The tensor-core tiles: warp tiles of 64 x 32 (32 x 64) or smaller, so that a warp reads as
 * few shared-memory bytes per mma as its registers allow; k-steps of 16 where 32 would pass
 * the 48 KB of static shared memory (two buffers of f32, rows padded). */
static const GemmShape MMA_SHAPES[] = {
  {128, 128, 16, 8, 8, 2, 4}, {128, 64, 16, 8, 8, 2, 2}, {64, 128, 16, 4, 16, 2, 2}, {64, 64, 32, 4, 8, 2, 2},
  {32, 32, 32, 2, 4, 2, 2},
};
/* f16 and bf16 operands as stored: the warp tiles of MMA_SHAPES, k-steps of 32 (a 16-byte
 * copy moves 8 of k; two buffers of 128 x 40 halves and 32 x 136, or 128 x 40, stay under
 * the 48 KB of static shared memory). */
static const GemmShape MMA16_SHAPES[] = {
  {128, 128, 32, 8, 8, 2, 4}, {128, 64, 32, 8, 8, 2, 2}, {64, 128, 32, 4, 16, 2, 2}, {64, 64, 32, 4, 8, 2, 2},
  {32, 32, 32, 2, 4, 2, 2},
};
#define NMMA16 ((int)(sizeof MMA16_SHAPES / sizeof *MMA16_SHAPES))
#define NGEMM ((int)(sizeof GEMM_SHAPES / sizeof *GEMM_SHAPES))
#define NMMA ((int)(sizeof MMA_SHAPES / sizeof *MMA_SHAPES))
#define NF64 ((int)(sizeof F64_SHAPES / sizeof *F64_SHAPES))
_Static_assert(NGEMM <= NSHAPES_MAX && NMMA <= NSHAPES_MAX && NF64 <= NSHAPES_MAX && NMMA16 <= NSHAPES_MAX,
               "NSHAPES_MAX bounds every table");

const GemmShape *cuana_gemm_shapes(CudaMath m, DynElem et, int *n) {
  if (elem_is_half(et)) {
    *n = NMMA16;
    return MMA16_SHAPES;
  }
  *n = et == DYN_F64 ? NF64 : m == CUDA_EXACT ? NGEMM : NMMA;
  return et == DYN_F64 ? F64_SHAPES : m == CUDA_EXACT ? GEMM_SHAPES : MMA_SHAPES;
}

int cuana_gemm_threads(const GemmShape *g) { return g->wm ? g->wm * g->wn * 32 : (g->bm / g->tm) * (g->bn / g->tn); }

const char *cuda_math_name(CudaMath m) { return m == CUDA_TF32 ? "tf32" : m == CUDA_BF16 ? "bf16" : "exact"; }

/* mma.sync on tf32 and bf16 operands arrived with compute capability 8.0 (Ampere). */
CudaMath cuda_math_on(const HwModel *hw, CudaMath m) { return hw->cc_major >= 8 ? m : CUDA_EXACT; }

static bool uses_axis(const KExpr *e, int ax) {
  if (e->kind == KX_AXIS && e->axis == ax) return true;
  for (int i = 0; i < e->n; i++)
    if (uses_axis(e->a[i], ax)) return true;
  return false;
}

static int count_reduce(const KExpr *e) {
  int n = e->kind == KX_REDUCE;
  for (int i = 0; i < e->n; i++) n += count_reduce(e->a[i]);
  return n;
}

/* The reductions every thread of a row evaluates with the same value, so that the row's
 * threads can share the work: not inside a branch of where(...), not inside another
 * reduction.  In evaluation order. */
void cuana_find_coop(const KExpr *e, const KExpr **out, int *n, int max) {
  if (e->kind == KX_REDUCE) {
    if (*n < max) out[*n] = e;
    (*n)++;
    return;
  }
  if (e->kind == KX_SELECT) {
    cuana_find_coop(e->a[0], out, n, max);
    return;
  }
  for (int i = 0; i < e->n; i++) cuana_find_coop(e->a[i], out, n, max);
}

static bool needs_err(const CudaProgram *cp, const KExpr *e) {
  if (e->kind == KX_LOAD && e->checked) return true;
  if (e->kind == KX_LOAD && cp->inl[e->slot] && needs_err(cp, cp->def[e->slot]->expr)) return true;
  if (e->kind == KX_BIN && (e->op == OP_DIV || e->op == OP_MOD) && elem_is_int(e->ty)) return true;
  for (int i = 0; i < e->n; i++)
    if (needs_err(cp, e->a[i])) return true;
  return false;
}

/* A C identifier from a name: letters and digits kept, runs of anything else one '_', and an
 * 'x' before a name that would start with a digit (an implicit index "_0" is "x0"). */
static void sanitize(const char *in, char *out, size_t n) {
  size_t j = 0;
  const char *first = in;
  while (*first && !((*first >= 'A' && *first <= 'Z') || (*first >= 'a' && *first <= 'z') || (*first >= '0' && *first <= '9')))
    first++;
  if (!((*first >= 'A' && *first <= 'Z') || (*first >= 'a' && *first <= 'z')) && j + 1 < n) out[j++] = 'x';
  for (const char *c = in; *c && j + 1 < n; c++) {
    bool ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9');
    if (ok) out[j++] = *c;
    else if (j && out[j - 1] != '_') out[j++] = '_';
  }
  while (j > 1 && out[j - 1] == '_') j--;   /* names ending in '_' belong to the renderer */
  out[j] = 0;
}

/* Words a user's name must not become in the generated code: C++ keywords, the parameter,
 * the types and functions of the prelude.  The renderer's own locals end in '_'. */
static bool reserved(const char *s) {
  static const char *words[] = {
    "a", "i64", "u64", "bool", "char", "int", "float", "double", "long", "short", "unsigned", "signed",
    "void", "const", "static", "struct", "union", "enum", "if", "else", "for", "while", "do", "return",
    "break", "continue", "switch", "case", "default", "goto", "sizeof", "typedef", "auto", "register",
    "volatile", "extern", "inline", "template", "typename", "class", "new", "delete", "this", "true",
    "false", "operator", "namespace", "using", "public", "private", "protected", "virtual", "friend",
    "try", "catch", "throw", "explicit", "mutable", "export", "asm", "constexpr", "decltype", "nullptr",
    "noexcept", "static_assert", "alignas", "alignof", "thread_local", "and", "or", "not", "xor", "bitand",
    "bitor", "compl", "and_eq", "or_eq", "xor_eq", "not_eq", "wchar_t", "char16_t", "char32_t",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "min", "max", "abs", "exp", "log", "sqrt",
    "sin", "cos", "tanh", "erf", "floor", "ceil", "pow", "fabs", "rint", "isnan", "isinf", "float4",
    "int4", "make_float4", "make_int4", "printf", "assert", NULL};
  for (int i = 0; words[i]; i++)
    if (!strcmp(s, words[i])) return true;
  return !strncmp(s, "dyn_", 4) || !strncmp(s, "Dyn", 3) || !strncmp(s, "DYN_", 4) || !strncmp(s, "__", 2) ||
         !strncmp(s, "cuda", 4);
}

static char *name_dup(Arena *ar, const char *base, char **taken, int ntaken) {
  char buf[96];
  sanitize(base, buf, sizeof buf);
  if (!*buf) snprintf(buf, sizeof buf, "x");
  if (reserved(buf)) strncat(buf, "_v", sizeof buf - strlen(buf) - 1);
  char cand[112];
  snprintf(cand, sizeof cand, "%s", buf);
  for (int k = 2;; k++) {
    bool clash = false;
    for (int i = 0; i < ntaken && !clash; i++) clash = taken[i] && !strcmp(taken[i], cand);
    if (!clash) break;
    snprintf(cand, sizeof cand, "%s_%d", buf, k);
  }
  return arena_strndup(ar, cand, strlen(cand));
}

/* Axis names: an axis keeps its source name unless a reduction inside its scope binds
 * another axis of the same name (then both would be one C variable). */
static void name_axes_in(CudaProgram *cp, const KExpr *e, int *bound, int nb, char **names) {
  if (e->kind == KX_REDUCE) {
    int b2[64];
    int n2 = nb < 32 ? nb : 32;
    memcpy(b2, bound, sizeof(int) * (size_t)n2);
    for (int r = 0; r < e->nraxes && n2 < 64; r++) {
      int ax = e->raxes[r];
      for (int i = 0; i < n2; i++)
        if (!strcmp(names[b2[i]], names[ax])) {
          char t[128];
          snprintf(t, sizeof t, "%s_%d", names[ax], ax);
          names[ax] = arena_strndup(cp->ar, t, strlen(t));
        }
      b2[n2++] = ax;
    }
    name_axes_in(cp, e->a[0], b2, n2, names);
    return;
  }
  for (int i = 0; i < e->n; i++) name_axes_in(cp, e->a[i], bound, nb, names);
}

/* A contraction the middle end recognised (contract.c), epilogue and all, whose operands are
 * tensors in memory.  One of f16 or bf16 runs on the tensor cores (m16n8k16 on its stored
 * operands), which take both from compute capability 8.0; before, the general kernels run it. */
static bool match_contraction(CudaProgram *cp, CK *ck) {
  const Contraction *c = ck->kn->con;
  if (!c || c->nouter || c->red->a[0]->ty != c->et || !cp->buf[c->a_slot] || !cp->buf[c->b_slot]) return false;
  if (elem_is_half(c->et) && cp->hw.cc_major < 8) return false;
  ck->red = c->red;
  ck->et = c->et;
  ck->ga = c->a_slot;
  ck->gb = c->b_slot;
  ck->gc = c->c_slot;
  ck->bax = c->batch;
  ck->max = c->m;
  ck->nax = c->n;
  ck->kax = c->k;
  memcpy(ck->apos, c->apos, sizeof ck->apos);
  memcpy(ck->bpos, c->bpos, sizeof ck->bpos);
  ck->a_kc = c->a_kc;
  ck->b_kc = c->b_kc;
  return true;
}

/* A load the loop4 variant reads four at a time: its last subscript is the innermost axis
 * itself, no other subscript moves with it, and its elements are 4 bytes. */
bool cuana_vec_load(const CudaProgram *cp, const KExpr *e, int inner) {
  if (e->kind != KX_LOAD || e->checked || !cp->buf[e->slot] || cp->inl[e->slot] || e->n < 1) return false;
  DynElem t = cp->p->slots[e->slot].type.elem;
  if (t != DYN_F32 && t != DYN_I32) return false;
  const KExpr *last = e->a[e->n - 1];
  if (last->kind != KX_AXIS || last->axis != inner) return false;
  for (int i = 0; i < e->n - 1; i++)
    if (uses_axis(e->a[i], inner)) return false;
  return true;
}

/* Every load in a position evaluated for each element (not in a reduction or a branch). */
static void find_vec(const CudaProgram *cp, const KExpr *e, int inner, CK *ck) {
  if (cuana_vec_load(cp, e, inner)) {
    bool seen = false;
    for (int i = 0; i < ck->nvslots; i++) seen = seen || ck->vslots[i] == e->slot;
    if (!seen && ck->nvslots < 16) ck->vslots[ck->nvslots++] = e->slot;
    return;
  }
  if (e->kind == KX_REDUCE) return;
  int n = e->kind == KX_SELECT ? 1 : e->n;
  for (int i = 0; i < n; i++) find_vec(cp, e->a[i], inner, ck);
}

static int count_contig(const KExpr *e, int ax) {
  int n = e->kind == KX_LOAD && e->n && e->a[e->n - 1]->kind == KX_AXIS && e->a[e->n - 1]->axis == ax;
  for (int i = 0; i < e->n; i++) n += count_contig(e->a[i], ax);
  return n;
}

/* What a kernel's code touches: slots read and written, checked slots, extents, sizes. */
typedef struct Uses {
  bool *rd, *wr, *chk, *ext;
  const Poly *sizes[64]; int nsizes;
} Uses;

static void uses_of(const CudaProgram *cp, const KExpr *e, Uses *u) {
  switch (e->kind) {
  case KX_LOAD:
    if (cp->inl[e->slot]) uses_of(cp, cp->def[e->slot]->expr, u);
    else if (cp->buf[e->slot]) {
      u->rd[e->slot] = true;
      if (e->checked) u->chk[e->slot] = true;
    }
    break;
  case KX_SIZE: {
    bool seen = false;
    for (int i = 0; i < u->nsizes; i++) seen = seen || u->sizes[i] == e->size;
    if (!seen && u->nsizes < 64) u->sizes[u->nsizes++] = e->size;
    break;
  }
  case KX_REDUCE:
    for (int i = 0; i < e->nraxes; i++) u->ext[e->raxes[i]] = true;
    break;
  default:
    break;
  }
  for (int i = 0; i < e->n; i++) uses_of(cp, e->a[i], u);
}

static void add_field(CK *ck, int kind, int slot, int dim, int axis, const Poly *size, const char *name) {
  ck->f = xrealloc(ck->f, sizeof(Field) * (size_t)(ck->nf + 1));
  Field *f = &ck->f[ck->nf++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->slot = slot;
  f->dim = dim;
  f->axis = axis;
  f->size = size;
  /* field names only need to differ from each other */
  char cand[100];
  snprintf(cand, sizeof cand, "%.80s", name);
  for (int k = 2;; k++) {
    bool clash = false;
    for (int i = 0; i < ck->nf - 1 && !clash; i++) clash = !strcmp(ck->f[i].name, cand);
    if (!clash) break;
    snprintf(cand, sizeof cand, "%.80s_%d", name, k);
  }
  snprintf(f->name, sizeof f->name, "%s", cand);
}

static void build_fields(CudaProgram *cp, CK *ck) {
  const Program *p = cp->p;
  const Kernel *kn = ck->kn;
  Uses u = {0};
  u.rd = xcalloc((size_t)p->nslots + 1, 1);
  u.wr = xcalloc((size_t)p->nslots + 1, 1);
  u.chk = xcalloc((size_t)p->nslots + 1, 1);
  u.ext = xcalloc((size_t)p->naxes + 1, 1);
  for (int o = 0; o < kn->nouter; o++) u.ext[kn->outer[o]] = true;
  for (int s = 0; s < kn->nstages; s++) {
    const Stage *st = &kn->stages[s];
    if (cp->inl[st->out]) continue;
    if (cp->buf[st->out]) u.wr[st->out] = true;
    for (int a = 0; a < st->naxes; a++) u.ext[st->axes[a]] = true;
    uses_of(cp, st->expr, &u);
  }
  for (int i = 0; i < p->nslots; i++)
    if (u.rd[i] || u.wr[i]) add_field(ck, F_PTR, i, 0, 0, NULL, cp->sname[i]);
  for (int i = 0; i < p->nslots; i++)
    if (u.rd[i] || u.wr[i])
      for (int d = 0; d + 1 < p->slots[i].type.rank; d++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s_s%d", cp->sname[i], d);
        add_field(ck, F_STRIDE, i, d, 0, NULL, nm);
      }
  for (int i = 0; i < p->nslots; i++)
    if (u.chk[i])
      for (int d = 0; d < p->slots[i].type.rank; d++) {
        char nm[96];
        snprintf(nm, sizeof nm, "%s_d%d", cp->sname[i], d);
        add_field(ck, F_DIM, i, d, 0, NULL, nm);
      }
  for (int a = 0; a < p->naxes; a++)
    if (u.ext[a]) {
      /* axes of one extent share its field */
      bool dup = false;
      for (int i = 0; i < ck->nf && !dup; i++) dup = ck->f[i].kind == F_EXT && ck->f[i].size == p->axes[a].extent;
      if (dup) continue;
      char nm[96];
      snprintf(nm, sizeof nm, "ext_%s", cp->aname[a]);
      add_field(ck, F_EXT, 0, 0, a, p->axes[a].extent, nm);
    }
  for (int i = 0; i < u.nsizes; i++) {
    Buf t = {0};
    poly_str(u.sizes[i], &t);
    char nm[96] = "sz_";
    sanitize(t.s, nm + 3, sizeof nm - 3);
    buf_free(&t);
    add_field(ck, F_SIZE, 0, 0, 0, u.sizes[i], nm);
  }
  ck->err = false;
  for (int s = 0; s < kn->nstages; s++)
    if (!cp->inl[kn->stages[s].out]) ck->err = ck->err || needs_err(cp, kn->stages[s].expr);
  if (ck->err) add_field(ck, F_ERR, 0, 0, 0, NULL, "err");
  if (ck->kind == CK_GEMM || (ck->kind == CK_SCALAR && ck->ncoop == 1)) add_field(ck, F_WS, 0, 0, 0, NULL, "ws");
  if (ck->kind == CK_GEMM) {
    add_field(ck, F_SPLITS, 0, 0, 0, NULL, "splits");
    add_field(ck, F_AVEC, 0, 0, 0, NULL, "a_vec");
    add_field(ck, F_BVEC, 0, 0, 0, NULL, "b_vec");
  }
  free(u.rd);
  free(u.wr);
  free(u.chk);
  free(u.ext);
}

static void add_var(CK *ck, int kind, int lanes, int rows, int threads, int gemm) {
  Var *v = &ck->v[ck->nv++];
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->lanes = lanes;
  v->rows = rows;
  v->threads = threads;
  v->gemm = gemm;
  static const char *suffix[] = {"loop", "loop4", "warp", "block256", "block1024", "grid", "gemm", "splitk"};
  int ns;
  const GemmShape *gs = cuana_gemm_shapes(ck->math, ck->et, &ns);
  if (kind == V_GEMM)
    snprintf(v->name, sizeof v->name, "%s_%s%dx%d", ck->base,
             elem_is_half(ck->et) ? "mma16_" : ck->math == CUDA_EXACT ? "gemm" : ck->math == CUDA_TF32 ? "tf32_" : "bf16_", gs[gemm].bm,
             gs[gemm].bn);
  else
    snprintf(v->name, sizeof v->name, "%s_%s", ck->base, suffix[kind]);
}

/* Names, storage, and the kind, variants and arguments of every kernel. */
void cuana_analyse(CudaProgram *cp) {
  const Program *p = cp->p;
  int ns = p->nslots;
  cp->sname = arena_alloc(cp->ar, sizeof(char *) * (size_t)(ns + 1));
  cp->aname = arena_alloc(cp->ar, sizeof(char *) * (size_t)(p->naxes + 1));
  cp->buf = arena_alloc(cp->ar, (size_t)ns + 1);
  cp->inl = arena_alloc(cp->ar, (size_t)ns + 1);
  cp->def = arena_alloc(cp->ar, sizeof(Stage *) * (size_t)(ns + 1));
  for (int i = 0; i < ns; i++) cp->sname[i] = name_dup(cp->ar, p->slots[i].name, cp->sname, i);
  for (int a = 0; a < p->naxes; a++) cp->aname[a] = name_dup(cp->ar, p->axes[a].name, NULL, 0);
  for (int k = 0; k < p->nkernels; k++)
    for (int s = 0; s < p->kernels[k].nstages; s++) cp->def[p->kernels[k].stages[s].out] = &p->kernels[k].stages[s];
  /* per-row arrays: recomputed where read when they hold no reduction and no load of them is
   * checked; per-row scalars: registers; everything else: device memory */
  bool *checked = xcalloc((size_t)ns + 1, 1);
  for (int k = 0; k < p->nkernels; k++)
    for (int s = 0; s < p->kernels[k].nstages; s++) {
      const KExpr *stack[1024];
      int sp = 0;
      stack[sp++] = p->kernels[k].stages[s].expr;
      while (sp) {
        const KExpr *e = stack[--sp];
        if (e->kind == KX_LOAD && e->checked) checked[e->slot] = true;
        for (int i = 0; i < e->n && sp < 1024; i++) stack[sp++] = e->a[i];
      }
    }
  for (int i = 0; i < ns; i++) {
    const Slot *sl = &p->slots[i];
    if (sl->kind == SLOT_INLINED || sl->kind == SLOT_SIZE) continue;
    if (sl->kind == SLOT_LOCAL && cp->def[i]) {
      if (sl->nlocal == 0) continue;                        /* a register */
      if (!count_reduce(cp->def[i]->expr) && !checked[i]) {
        cp->inl[i] = true;
        continue;
      }
    }
    cp->buf[i] = true;
  }
  free(checked);
  cp->nk = p->nkernels;
  cp->k = xcalloc((size_t)cp->nk + 1, sizeof(CK));
  char **bases = xcalloc((size_t)cp->nk + 1, sizeof(char *));
  for (int k = 0; k < cp->nk; k++) {
    CK *ck = &cp->k[k];
    const Kernel *kn = &p->kernels[k];
    ck->kn = kn;
    bases[k] = name_dup(cp->ar, kn->name, bases, k);
    snprintf(ck->base, sizeof ck->base, "%s", bases[k]);
    /* axis names that a nested reduction would shadow */
    for (int s = 0; s < kn->nstages; s++) {
      int bound[64], nb = 0;
      for (int o = 0; o < kn->nouter && nb < 32; o++) bound[nb++] = kn->outer[o];
      for (int a = 0; a < kn->stages[s].naxes && nb < 32; a++) bound[nb++] = kn->stages[s].axes[a];
      name_axes_in(cp, kn->stages[s].expr, bound, nb, cp->aname);
    }
    const Stage *st0 = &kn->stages[0];
    if (kn->nouter) {
      ck->kind = CK_ROW;
      memcpy(ck->outer, kn->outer, sizeof(int) * (size_t)kn->nouter);
      ck->nouter = kn->nouter;
    } else if (match_contraction(cp, ck)) {
      ck->kind = CK_GEMM;
    } else if (st0->naxes == 0) {
      ck->kind = CK_SCALAR;
      const KExpr *co[8];
      cuana_find_coop(st0->expr, co, &ck->ncoop, 8);
      ck->coop = ck->ncoop ? co[0] : NULL;
    } else {
      ck->kind = CK_LOOP;
      const KExpr *co[8];
      /* a scan: one thread per line along its axis (render_scan), its reductions its own */
      if (st0->expr->kind != KX_SCAN) cuana_find_coop(st0->expr, co, &ck->ncoop, 8);
      ck->coop = ck->ncoop ? co[0] : NULL;
      if (ck->ncoop) {
        ck->virt = true;
        memcpy(ck->outer, st0->axes, sizeof(int) * (size_t)st0->naxes);
        ck->nouter = st0->naxes;
        int rin = ck->coop->raxes[ck->coop->nraxes - 1], oin = st0->axes[st0->naxes - 1];
        ck->r_contig = count_contig(ck->coop->a[0], rin);
        ck->o_contig = count_contig(ck->coop->a[0], oin);
      }
      DynElem oe = p->slots[st0->out].type.elem;
      ck->vec4 = cp->buf[st0->out] && (oe == DYN_F32 || oe == DYN_I32) && !count_reduce(st0->expr) &&
                 st0->expr->kind != KX_SCAN;
      if (ck->vec4) find_vec(cp, st0->expr, st0->axes[st0->naxes - 1], ck);
    }
    switch (ck->kind) {
    case CK_LOOP:
      add_var(ck, V_LOOP, 0, 0, 256, 0);
      if (ck->vec4) add_var(ck, V_LOOP4, 0, 0, 256, 0);
      if (ck->virt) add_var(ck, V_WARP, 32, 8, 256, 0);
      break;
    case CK_ROW:
      add_var(ck, V_WARP, 32, 8, 256, 0);
      add_var(ck, V_BLOCK256, 256, 1, 256, 0);
      add_var(ck, V_BLOCK1024, 1024, 1, 1024, 0);
      break;
    case CK_SCALAR:
      add_var(ck, V_BLOCK1024, 1024, 1, 1024, 0);
      if (ck->ncoop == 1) add_var(ck, V_GRID, 256, 1, 256, 0);
      break;
    case CK_GEMM: {
      /* 16-bit operands: exact products summed in f32 whatever was asked for (cuana_tc) */
      ck->math = ck->et == DYN_F32 ? cuda_math_on(&cp->hw, cp->math) : CUDA_EXACT;
      int ns;
      const GemmShape *gs = cuana_gemm_shapes(ck->math, ck->et, &ns);
      for (int g = 0; g < ns; g++) add_var(ck, V_GEMM, 0, 0, cuana_gemm_threads(&gs[g]), g);
      add_var(ck, V_SPLITK, 0, 0, 256, 0);
      break;
    }
    }
    build_fields(cp, ck);
  }
  free(bases);
}
