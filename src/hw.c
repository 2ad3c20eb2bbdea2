/* hw.c -- the hardware model: everything the scheduler knows about a machine.  It parses
 * hw/NAME.hw files (key = value; the keys are documented in hw/README.md), finds them in the
 * hw directory, makes the host's model from what hw_detect.c finds (cpuid, sysfs caches,
 * usable cores) and takes what detection cannot see (bandwidths, FMA pipes, latency) from
 * the closest file, and prints the model for :hw.  No cost-model figure lives here: every
 * number comes from a file, from the machine, or from arithmetic on those two.
 */
#include "config.h"
#include "hw_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifndef DYN_PKGDATADIR
#error "DYN_PKGDATADIR must be defined by the build (see Makefile.am)"
#endif

/* ---- the key table ----------------------------------------------------------------------- */

enum { FOR_CPU = 1, FOR_GPU = 2, FOR_BOTH = 3 };
typedef enum { V_STR, V_INT, V_SIZE, V_NUM, V_KIND, V_CC } VType;

typedef struct {
  const char *key;
  VType type;
  unsigned kinds;
  bool required;
  size_t off, cap;       /* where the value goes in HwModel (V_CC: cc_major and cc_minor) */
  int fig;               /* its HW_F_* in HwModel.prov[]; -1 for words and text */
} KeyDef;

#define AT(f) offsetof(HwModel, f), sizeof(((HwModel *)0)->f)

static const KeyDef KEYS[] = {
  {"name", V_STR, FOR_BOTH, true, AT(name), -1},
  {"kind", V_KIND, FOR_BOTH, true, AT(kind), -1},
  {"desc", V_STR, FOR_BOTH, true, AT(desc), -1},
  {"ghz", V_NUM, FOR_BOTH, true, AT(ghz), HW_F_GHZ},
  {"peak_gflops_f32", V_NUM, FOR_BOTH, false, AT(peak_gflops_f32), HW_F_PEAK},
  {"cores", V_INT, FOR_CPU, true, AT(cores), HW_F_CORES},
  {"vector_bits", V_INT, FOR_CPU, true, AT(vector_bits), HW_F_VECTOR_BITS},
  {"vec_regs", V_INT, FOR_CPU, true, AT(vec_regs), HW_F_VEC_REGS},
  {"fma_units", V_INT, FOR_CPU, true, AT(fma_units), HW_F_FMA_UNITS},
  {"fma_latency", V_INT, FOR_CPU, true, AT(fma_latency), HW_F_FMA_LATENCY},
  {"vec_units", V_INT, FOR_CPU, false, AT(vec_units), HW_F_VEC_UNITS},
  {"gather_lane_cycles", V_NUM, FOR_CPU, false, AT(gather_lane_cycles), HW_F_GATHER_LANE_CYCLES},
  {"line_move_ns", V_NUM, FOR_CPU, false, AT(line_move_ns), HW_F_LINE_MOVE_NS},
  {"bf16_per_fma", V_NUM, FOR_CPU, false, AT(bf16_per_fma), HW_F_BF16_PER_FMA},
  {"tile_off_line", V_NUM, FOR_CPU, false, AT(tile_off_line), HW_F_TILE_OFF_LINE},
  {"arch", V_STR, FOR_CPU, false, AT(arch), -1},
  {"llvm_cpu", V_STR, FOR_CPU, true, AT(llvm_cpu), -1},
  {"llvm_cpu_fallback", V_STR, FOR_CPU, false, AT(llvm_cpu_fallback), -1},
  {"llvm_features", V_STR, FOR_CPU, true, AT(llvm_features), -1},
  {"sm_count", V_INT, FOR_GPU, true, AT(sm_count), HW_F_SM_COUNT},
  {"cc", V_CC, FOR_GPU, true, 0, 0, HW_F_CC},
  {"warp_size", V_INT, FOR_GPU, true, AT(warp_size), HW_F_WARP_SIZE},
  {"regs_per_sm", V_INT, FOR_GPU, true, AT(regs_per_sm), HW_F_REGS_PER_SM},
  {"regs_per_thread_max", V_INT, FOR_GPU, true, AT(regs_per_thread_max),
   HW_F_REGS_PER_THREAD_MAX},
  {"smem_per_sm", V_SIZE, FOR_GPU, true, AT(smem_per_sm), HW_F_SMEM_PER_SM},
  {"smem_per_block", V_SIZE, FOR_GPU, true, AT(smem_per_block), HW_F_SMEM_PER_BLOCK},
  {"max_threads_per_block", V_INT, FOR_GPU, true, AT(max_threads_per_block),
   HW_F_MAX_THREADS_PER_BLOCK},
  {"fp32_tflops", V_NUM, FOR_GPU, true, AT(fp32_tflops), HW_F_FP32_TFLOPS},
  {"tf32_tflops", V_NUM, FOR_GPU, true, AT(tf32_tflops), HW_F_TF32_TFLOPS},
  {"bf16_tflops", V_NUM, FOR_GPU, true, AT(bf16_tflops), HW_F_BF16_TFLOPS},
};
#define NKEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

/* Memory levels, in the order they take in HwModel.level[] (fastest first).  A level is in a
 * model when its file sets any of its keys; "main" marks main memory, which must be last.
 * Registers are not a level: vec_regs and regs_per_sm describe them, because micro-kernels
 * are enumerated from register counts, not bytes. */
typedef struct { const char *prefix, *name; unsigned kinds; bool main; } LevelDef;
static const LevelDef LEVELS[] = {
  {"l1", "L1", FOR_CPU, false},
  {"smem", "smem", FOR_GPU, false},
  {"l2", "L2", FOR_BOTH, false},
  {"l3", "L3", FOR_CPU, false},
  {"dram", "DRAM", FOR_CPU, true},
  {"hbm", "HBM", FOR_GPU, true},
  {"gddr", "GDDR", FOR_GPU, true},
};
#define NLEVELS ((int)(sizeof LEVELS / sizeof LEVELS[0]))

enum { LF_BYTES, LF_LINE, LF_GBS, LF_TOTAL, LF_SHARED, LF_WAYS, NLF };
static const char *const LFIELDS[NLF] = {"bytes", "line", "gbs", "total_gbs", "shared_by",
                                           "ways"};

_Static_assert(sizeof(((HwModel *)0)->level) / sizeof(HwLevel) >= 4,
               "level[] must hold L1, L2, L3 and main memory");

/* What a name (the file's and the one hw_load looks up) may be made of. */
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

/* ---- small helpers ------------------------------------------------------------------------ */

int hw_ncaches(const HwModel *h) { return h->nlevels > 1 ? h->nlevels - 1 : 0; }

double hw_cache_bytes(const HwModel *h, int i) {
  static const double dflt[] = { 32768, 524288, 2097152 };
  if (i < hw_ncaches(h) && h->level[i].bytes > 0)
    return (double)h->level[i].bytes / (h->level[i].shared_by > 1 ? h->level[i].shared_by : 1);
  if (i < hw_ncaches(h) || i > 2) return dflt[i > 2 ? 2 : i];
  /* no such level: the block that would live there lives in the last cache */
  return hw_ncaches(h) ? hw_cache_bytes(h, hw_ncaches(h) - 1) : dflt[i];
}

static void fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* A positive finite decimal number ("1.98", "19.5", "2e3").  strtod alone would also take
 * "inf", "nan" and hex, which have no place in a hardware figure. */
static bool parse_num(const char *s, double *out) {
  if (!*s) return false;
  for (const char *p = s; *p; p++)
    if (!isdigit((unsigned char)*p) && !strchr(".eE+-", *p)) return false;
  if (!isdigit((unsigned char)s[0]) && s[0] != '.') return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v) || v <= 0) return false;
  *out = v;
  return true;
}

/* "48 KiB", "1 MiB", "38.5 MiB", "80 GiB", "512 B" */
static void fmt_bytes(int64_t b, char *dst, size_t cap) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = (double)b;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (v == floor(v)) snprintf(dst, cap, "%.0f %s", v, unit[u]);
  else snprintf(dst, cap, "%.*f %s", v < 10 ? 2 : 1, v, unit[u]);
}

/* ---- hw_parse ------------------------------------------------------------------------------ */

/* One line split into key and value.  Returns 0 for a blank or comment line, 1 for an entry,
 * -1 with *why for a malformed line.  '#' starts a comment outside double quotes; a quoted
 * value keeps '#' and surrounding spaces.  An entry's comment, if it has one, is left in
 * *cmt and *cmtlen (the text after '#'; both may be NULL). */
static int split_line(const char *s, size_t n, char *key, size_t keycap, char *val,
                      size_t valcap, const char **why, const char **cmt, size_t *cmtlen) {
  if (cmt) *cmt = NULL;
  if (cmtlen) *cmtlen = 0;
  size_t i = 0;
  while (i < n && is_blank(s[i])) i++;
  if (i == n || s[i] == '#') return 0;
  size_t k0 = i;
  while (i < n && s[i] != '=' && s[i] != '#') i++;
  if (i == n || s[i] != '=') {
    *why = "expected 'key = value'";
    return -1;
  }
  size_t k1 = i;
  while (k1 > k0 && is_blank(s[k1 - 1])) k1--;
  if (k1 == k0) {
    *why = "expected 'key = value'";
    return -1;
  }
  if (k1 - k0 >= keycap) {
    *why = "key too long";
    return -1;
  }
  memcpy(key, s + k0, k1 - k0);
  key[k1 - k0] = 0;
  i++;
  while (i < n && is_blank(s[i])) i++;
  size_t v0 = i, v1;
  if (i < n && s[i] == '"') {
    v0 = ++i;
    while (i < n && s[i] != '"') i++;
    if (i == n) {
      *why = "unterminated quote";
      return -1;
    }
    v1 = i++;
    while (i < n && is_blank(s[i])) i++;
    if (i < n && s[i] != '#') {
      *why = "text after the closing quote";
      return -1;
    }
  } else {
    while (i < n && s[i] != '#') i++;
    v1 = i;
    while (v1 > v0 && is_blank(s[v1 - 1])) v1--;
  }
  if (i < n && cmt && cmtlen) {
    *cmt = s + i + 1;
    *cmtlen = n - i - 1;
  }
  if (v1 - v0 >= valcap) {
    *why = "value too long";
    return -1;
  }
  memcpy(val, s + v0, v1 - v0);
  val[v1 - v0] = 0;
  return 1;
}

/* What a parse has seen so far: the line each key was set on, and the level fields. */
typedef struct {
  int key_line[NKEYS];
  int lvl_line[NLEVELS][NLF];
  int64_t lvl_bytes[NLEVELS];
  int lvl_linesz[NLEVELS];
  double lvl_gbs[NLEVELS], lvl_total[NLEVELS];
  int lvl_shared[NLEVELS];        /* 0 = "all" (or unset): the whole chip or device */
  int lvl_ways[NLEVELS];
  HwProv lvl_prov[NLEVELS][NLF];
} ParseState;

/* ---- where figures come from --------------------------------------------------------------- */

/* What the comments that stand for a figure say (hw/README.md, "Where figures come from"):
 * any text at all, a word of estimation, a word of measurement. */
typedef struct { bool any, guess, measured; } Said;

/* Does s[0..n) hold w (lower case), in any case? */
static bool says(const char *s, size_t n, const char *w) {
  size_t wl = strlen(w);
  for (size_t i = 0; i + wl <= n; i++) {
    size_t j = 0;
    while (j < wl && tolower((unsigned char)s[i + j]) == w[j]) j++;
    if (j == wl) return true;
  }
  return false;
}

static void said_add(Said *c, const char *s, size_t n) {
  size_t i = 0;
  while (i < n && (is_blank(s[i]) || s[i] == '#')) i++;
  if (i == n) return;                 /* an empty comment says nothing */
  c->any = true;
  c->guess |= says(s, n, "approximat") || says(s, n, "estimat");
  c->measured |= says(s, n, "measured");
}

static HwProv said_prov(const Said *c) {
  return !c->any ? HW_UNSOURCED : c->guess ? HW_GUESSED : c->measured ? HW_MEASURED : HW_SOURCED;
}

/* A figure derived from others is as good as the weakest of them. */
static HwProv weakest(HwProv a, HwProv b) { return a < b ? a : b; }

static int find_key(const char *key) {
  for (int i = 0; i < NKEYS; i++)
    if (!strcmp(KEYS[i].key, key)) return i;
  return -1;
}

/* "l2.bytes" -> level 2 (index in LEVELS), field LF_BYTES; false if not a level key. */
static bool find_level_key(const char *key, int *lv, int *field) {
  const char *dot = strchr(key, '.');
  if (!dot) return false;
  for (int l = 0; l < NLEVELS; l++) {
    size_t pl = strlen(LEVELS[l].prefix);
    if ((size_t)(dot - key) != pl || strncmp(key, LEVELS[l].prefix, pl)) continue;
    for (int f = 0; f < NLF; f++)
      if (!strcmp(dot + 1, LFIELDS[f])) {
        *lv = l;
        *field = f;
        return true;
      }
  }
  return false;
}

static const char *kind_word(unsigned k) { return k == FOR_CPU ? "a CPU" : "a GPU"; }

/* Store one scalar key's value; false with a message (without FILE:LINE) in why. */
static bool set_scalar(const KeyDef *k, const char *val, HwModel *out, char *why, size_t wl) {
  char *dst = (char *)out + k->off;
  switch (k->type) {
  case V_STR:
    if (strlen(val) >= k->cap) {
      snprintf(why, wl, "value too long for '%s' (at most %zu characters)", k->key, k->cap - 1);
      return false;
    }
    if (!*val) {
      snprintf(why, wl, "empty value for '%s'", k->key);
      return false;
    }
    /* A name is what :hw NAME and --hw=NAME take, so it must be a plain word. */
    if (!strcmp(k->key, "name") && strspn(val, NAME_CHARS) != strlen(val)) {
      snprintf(why, wl, "'name' may hold only letters, digits, '.', '_' and '-', not '%s'",
               val);
      return false;
    }
    if (!strcmp(k->key, "arch") && strcmp(val, "x86_64") && strcmp(val, "aarch64")) {
      snprintf(why, wl, "'arch' must be x86_64 or aarch64, not '%s'", val);
      return false;
    }
    memcpy(dst, val, strlen(val) + 1);
    return true;
  case V_KIND:
    if (strcmp(val, "cpu") && strcmp(val, "gpu")) {
      snprintf(why, wl, "'kind' must be cpu or gpu, not '%s'", val);
      return false;
    }
    memcpy(dst, val, 4);
    return true;
  case V_INT: {
    int v;
    if (!parse_int(val, &v)) {
      snprintf(why, wl, "bad number '%s' for '%s' (expected a positive integer)", val, k->key);
      return false;
    }
    if (!strcmp(k->key, "vector_bits") && v != 128 && v != 256 && v != 512) {
      snprintf(why, wl, "'vector_bits' must be 128, 256 or 512, not %d", v);
      return false;
    }
    memcpy(dst, &v, sizeof v);
    return true;
  }
  case V_SIZE: {
    int64_t v;
    if (!parse_size(val, &v)) {
      snprintf(why, wl, "bad size '%s' for '%s' (expected bytes, e.g. 48K, 2M, 32MiB)", val,
               k->key);
      return false;
    }
    memcpy(dst, &v, sizeof v);
    return true;
  }
  case V_NUM: {
    double v;
    if (!parse_num(val, &v)) {
      snprintf(why, wl, "bad number '%s' for '%s' (expected a positive number)", val, k->key);
      return false;
    }
    memcpy(dst, &v, sizeof v);
    return true;
  }
  case V_CC: {
    int ma = 0, mi = 0, n = 0;
    if (sscanf(val, "%3d.%2d%n", &ma, &mi, &n) != 2 || val[n] || ma <= 0 || mi < 0 ||
        !isdigit((unsigned char)val[0]) || !isdigit((unsigned char)val[strlen(val) - 1])) {
      snprintf(why, wl, "bad compute capability '%s' (expected MAJOR.MINOR, e.g. 9.0)", val);
      return false;
    }
    out->cc_major = ma;
    out->cc_minor = mi;
    return true;
  }
  }
  return false;
}

static bool set_level(ParseState *st, int l, int f, const char *key, const char *val, char *why,
                      size_t wl) {
  switch (f) {
  case LF_BYTES:
  case LF_LINE: {
    int64_t v;
    if (!parse_size(val, &v)) {
      snprintf(why, wl, "bad size '%s' for '%s' (expected bytes, e.g. 48K, 2M, 32MiB)", val,
               key);
      return false;
    }
    if (f == LF_BYTES) {
      st->lvl_bytes[l] = v;
      return true;
    }
    if (v > 65536 || (v & (v - 1))) {
      snprintf(why, wl, "'%s' must be a power of two up to 64K, not '%s'", key, val);
      return false;
    }
    st->lvl_linesz[l] = (int)v;
    return true;
  }
  case LF_GBS:
  case LF_TOTAL: {
    double v;
    if (!parse_num(val, &v)) {
      snprintf(why, wl, "bad number '%s' for '%s' (expected a positive number)", val, key);
      return false;
    }
    *(f == LF_GBS ? &st->lvl_gbs[l] : &st->lvl_total[l]) = v;
    return true;
  }
  case LF_SHARED:
    if (!strcmp(val, "all")) {
      st->lvl_shared[l] = 0;
      return true;
    }
    if (!parse_int(val, &st->lvl_shared[l])) {
      snprintf(why, wl, "bad number '%s' for '%s' (expected a positive integer or 'all')", val,
               key);
      return false;
    }
    return true;
  case LF_WAYS:
    if (LEVELS[l].main || !strcmp(LEVELS[l].prefix, "smem")) {
      snprintf(why, wl, "'%s': only a cache has ways", key);
      return false;
    }
    if (!parse_int(val, &st->lvl_ways[l])) {
      snprintf(why, wl, "bad number '%s' for '%s' (expected a positive integer)", val, key);
      return false;
    }
    return true;
  }
  return false;
}

/* Append "'key'" to a list of missing keys. */
static void add_missing(Buf *b, int *n, const char *key) {
  buf_printf(b, "%s'%s'", *n ? ", " : "", key);
  (*n)++;
}

/* The checks and derivations that need the whole file: required keys, levels, order. */
static bool finish_model(ParseState *st, const char *fname, HwModel *out, char *err,
                         size_t errlen) {
  unsigned kind = !strcmp(out->kind, "gpu") ? FOR_GPU : FOR_CPU;
  bool gpu = kind == FOR_GPU;
  Buf miss = {0};
  int nmiss = 0;
  for (int i = 0; i < NKEYS; i++)
    if (KEYS[i].required && (KEYS[i].kinds & kind) && !st->key_line[i])
      add_missing(&miss, &nmiss, KEYS[i].key);

  /* Which levels are present, and is each complete? */
  bool present[NLEVELS] = {false};
  int nmain = 0, second = 0;   /* second: the first line of a second main memory's keys */
  for (int l = 0; l < NLEVELS; l++) {
    int first = 0;
    for (int f = 0; f < NLF; f++)
      if (st->lvl_line[l][f] && (!first || st->lvl_line[l][f] < first))
        first = st->lvl_line[l][f];
    present[l] = first > 0;
    if (!present[l] || !LEVELS[l].main) continue;
    if (++nmain > 1 && first > second) second = first;
  }
  if (nmain > 1) {
    fail(err, errlen, "%s:%d: a GPU has one main memory: set either hbm.* or gddr.*", fname,
         second);
    buf_free(&miss);
    return false;
  }
  char key[32];
  for (int l = 0; l < NLEVELS; l++) {
    const LevelDef *ld = &LEVELS[l];
    if (!(ld->kinds & kind)) continue;
    bool need_level = ld->main ? (nmain == 0 && !strcmp(ld->prefix, gpu ? "hbm" : "dram"))
                               : (!strcmp(ld->prefix, "l1") || !strcmp(ld->prefix, "smem") ||
                                  !strcmp(ld->prefix, "l2"));
    if (!present[l] && !need_level) continue;
    /* bytes: caches always (smem takes smem_per_sm), GPU main memory (its capacity) */
    bool need_bytes = ld->main ? gpu : strcmp(ld->prefix, "smem") != 0;
    bool need_line = !ld->main;
    bool need_total = ld->main && !gpu;
    if (need_bytes && !st->lvl_line[l][LF_BYTES])
      add_missing(&miss, &nmiss, (snprintf(key, sizeof key, "%s.bytes", ld->prefix), key));
    if (need_line && !st->lvl_line[l][LF_LINE])
      add_missing(&miss, &nmiss, (snprintf(key, sizeof key, "%s.line", ld->prefix), key));
    if (!st->lvl_line[l][LF_GBS])
      add_missing(&miss, &nmiss, (snprintf(key, sizeof key, "%s.gbs", ld->prefix), key));
    if (need_total && !st->lvl_line[l][LF_TOTAL])
      add_missing(&miss, &nmiss, (snprintf(key, sizeof key, "%s.total_gbs", ld->prefix), key));
  }
  if (nmiss) {
    fail(err, errlen, "%s: missing key%s %s", fname, nmiss > 1 ? "s" : "", miss.s);
    buf_free(&miss);
    return false;
  }
  buf_free(&miss);

  if (gpu) {
    out->cores = out->sm_count;         /* a GPU's units of parallelism are its SMs */
    out->prov[HW_F_CORES] = out->prov[HW_F_SM_COUNT];
  }
  if (!out->llvm_cpu_fallback[0] && !gpu)
    copy_str(out->llvm_cpu_fallback, sizeof out->llvm_cpu_fallback, "generic");
  if (!out->arch[0] && !gpu) copy_str(out->arch, sizeof out->arch, "x86_64");

  if (gpu && out->smem_per_block > out->smem_per_sm) {
    fail(err, errlen, "%s:%d: 'smem_per_block' (%lld) exceeds 'smem_per_sm' (%lld)", fname,
         st->key_line[find_key("smem_per_block")], (long long)out->smem_per_block,
         (long long)out->smem_per_sm);
    return false;
  }

  /* Assemble the levels, fastest first. */
  out->nlevels = 0;
  for (int l = 0; l < NLEVELS; l++) {
    if (!present[l] || !(LEVELS[l].kinds & kind)) continue;
    HwLevel *lv = &out->level[out->nlevels];
    copy_str(lv->name, sizeof lv->name, LEVELS[l].name);
    lv->bytes = !strcmp(LEVELS[l].prefix, "smem") ? out->smem_per_sm : st->lvl_bytes[l];
    lv->line = st->lvl_linesz[l] ? st->lvl_linesz[l]
               : out->nlevels ? out->level[out->nlevels - 1].line : 64;
    lv->gbs = st->lvl_gbs[l];
    const HwProv *pv = st->lvl_prov[l];
    lv->prov_bytes = !strcmp(LEVELS[l].prefix, "smem") ? out->prov[HW_F_SMEM_PER_SM]
                                                        : pv[LF_BYTES];
    lv->prov_line = st->lvl_linesz[l] ? pv[LF_LINE]
                    : out->nlevels ? out->level[out->nlevels - 1].prov_line : HW_GUESSED;
    lv->prov_gbs = pv[LF_GBS];
    /* Unset, a cache is private and main memory the chip's: what its size's comment says. */
    lv->prov_shared = st->lvl_line[l][LF_SHARED] ? pv[LF_SHARED]
                      : lv->prov_bytes ? lv->prov_bytes : lv->prov_gbs;
    /* Unset, a CPU's L1 is taken for x86's: virtually indexed and physically tagged, one way
     * spanning a 4 KiB page (12 ways for 48 KiB), a default. */
    bool l1 = !gpu && !strcmp(LEVELS[l].prefix, "l1");
    lv->ways = st->lvl_line[l][LF_WAYS] ? st->lvl_ways[l] : l1 ? (int)(lv->bytes / 4096) : 0;
    lv->prov_ways = st->lvl_line[l][LF_WAYS] ? pv[LF_WAYS] : l1 ? HW_GUESSED : HW_NOT_TRACKED;
    int all = gpu ? out->sm_count : out->cores;
    bool whole = LEVELS[l].main || (gpu && !strcmp(LEVELS[l].prefix, "l2"));
    lv->shared_by = st->lvl_line[l][LF_SHARED] ? (st->lvl_shared[l] ? st->lvl_shared[l] : all)
                    : whole ? all : 1;
    if (lv->shared_by > all) {
      fail(err, errlen, "%s:%d: '%s.shared_by' (%d) exceeds the %d %s", fname,
           st->lvl_line[l][LF_SHARED], LEVELS[l].prefix, lv->shared_by, all,
           gpu ? "SMs" : "cores");
      return false;
    }
    if (gpu) {
      if (st->lvl_line[l][LF_TOTAL]) {
        fail(err, errlen, "%s:%d: a GPU's '%s.gbs' is already the whole device's; remove "
             "'%s.total_gbs'", fname, st->lvl_line[l][LF_TOTAL], LEVELS[l].prefix,
             LEVELS[l].prefix);
        return false;
      }
      if (!strcmp(LEVELS[l].prefix, "smem") && st->lvl_line[l][LF_BYTES]) {
        fail(err, errlen, "%s:%d: shared memory's size is 'smem_per_sm'; remove 'smem.bytes'",
             fname, st->lvl_line[l][LF_BYTES]);
        return false;
      }
      lv->total_gbs = lv->gbs;
      lv->prov_total = lv->prov_gbs;
    } else {
      /* Private caches scale with cores; a file may state the chip's figure instead.  For a
       * shared cache the product assumes it feeds all its cores at once: a default. */
      lv->total_gbs = st->lvl_total[l] ? st->lvl_total[l] : lv->gbs * out->cores;
      lv->prov_total = st->lvl_total[l] ? pv[LF_TOTAL]
                       : lv->shared_by == 1 ? weakest(lv->prov_gbs, out->prov[HW_F_CORES])
                                            : HW_GUESSED;
    }
    if (out->nlevels > 0 && lv->bytes && out->level[out->nlevels - 1].bytes >= lv->bytes) {
      char a[32], b[32];
      fmt_bytes(lv->bytes, a, sizeof a);
      fmt_bytes(out->level[out->nlevels - 1].bytes, b, sizeof b);
      int line = st->lvl_line[l][LF_BYTES] ? st->lvl_line[l][LF_BYTES]
                                           : st->key_line[find_key("smem_per_sm")];
      fail(err, errlen, "%s:%d: %s (%s) must be larger than %s (%s)", fname, line, lv->name, a,
           out->level[out->nlevels - 1].name, b);
      return false;
    }
    out->nlevels++;
  }
  if (!gpu && out->vec_units && out->vec_units < out->fma_units) {
    fail(err, errlen, "%s:%d: 'vec_units' (%d) is fewer than 'fma_units' (%d): the FMA pipes are "
         "vector pipes too", fname, st->key_line[find_key("vec_units")], out->vec_units, out->fma_units);
    return false;
  }
  if (!out->peak_gflops_f32) {
    out->peak_gflops_f32 = gpu ? out->fp32_tflops * 1000.0
                               : out->cores * out->ghz * out->fma_units * 2.0 *
                                     (out->vector_bits / 32);
    const HwProv *f = out->prov;
    out->prov[HW_F_PEAK] =
        gpu ? f[HW_F_FP32_TFLOPS]
            : weakest(weakest(f[HW_F_CORES], f[HW_F_GHZ]),
                      weakest(f[HW_F_FMA_UNITS], f[HW_F_VECTOR_BITS]));
  }
  return true;
}

bool hw_parse(const char *text, const char *fname, HwModel *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!fname) fname = "<hw>";
  ParseState *st = xcalloc(1, sizeof *st);
  char key[64], val[512], why[1200];
  const char *reason;
  bool ok = false;

  /* First pass: only the kind, so keys of the other kind are reported where they stand. */
  unsigned kind = 0;
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (split_line(p, n, key, sizeof key, val, sizeof val, &reason, NULL, NULL) == 1 &&
        !strcmp(key, "kind"))
      kind = !strcmp(val, "cpu") ? FOR_CPU : !strcmp(val, "gpu") ? FOR_GPU : 0;
    p += n + (nl != NULL);
  }

  /* A figure's comment is the one on its own line, else the nearest run of comment lines
   * above it in its paragraph (hw/README.md): `block` is that run, `in_block` whether the
   * line before was one of its lines. */
  Said block = {0};
  bool in_block = false;
  int lineno = 0;
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n'), *ln = p;
    size_t n = nl ? (size_t)(nl - p) : strlen(p), i0 = 0;
    lineno++;
    p += n + (nl != NULL);
    while (i0 < n && is_blank(ln[i0])) i0++;
    if (i0 == n || ln[i0] == '#') {
      if (i0 == n) block = (Said){0};
      else {
        if (!in_block) block = (Said){0};
        said_add(&block, ln + i0 + 1, n - i0 - 1);
      }
      in_block = i0 < n;
      continue;
    }
    in_block = false;
    const char *cmt;
    size_t cmtlen;
    int r = split_line(ln, n, key, sizeof key, val, sizeof val, &reason, &cmt, &cmtlen);
    if (r < 0) {
      fail(err, errlen, "%s:%d: %s", fname, lineno, reason);
      goto done;
    }
    int ki = find_key(key), lv = -1, lf = -1;
    int *seen;
    unsigned kinds;
    if (ki >= 0) {
      seen = &st->key_line[ki];
      kinds = KEYS[ki].kinds;
    } else if (find_level_key(key, &lv, &lf)) {
      seen = &st->lvl_line[lv][lf];
      kinds = LEVELS[lv].kinds;
    } else {
      fail(err, errlen, "%s:%d: unknown key '%s'", fname, lineno, key);
      goto done;
    }
    if (*seen) {
      fail(err, errlen, "%s:%d: '%s' is set twice (first on line %d)", fname, lineno, key,
           *seen);
      goto done;
    }
    if (kind && !(kinds & kind)) {
      fail(err, errlen, "%s:%d: '%s' is for %s, but this file has kind = %s", fname, lineno,
           key, kind_word(kinds), kind == FOR_CPU ? "cpu" : "gpu");
      goto done;
    }
    *seen = lineno;
    if (!(ki >= 0 ? set_scalar(&KEYS[ki], val, out, why, sizeof why)
                  : set_level(st, lv, lf, key, val, why, sizeof why))) {
      fail(err, errlen, "%s:%d: %s", fname, lineno, why);
      goto done;
    }
    Said own = {0};
    if (cmt) said_add(&own, cmt, cmtlen);
    HwProv prov = said_prov(own.any ? &own : &block);
    if (ki >= 0 && KEYS[ki].fig >= 0) out->prov[KEYS[ki].fig] = prov;
    else if (ki < 0) st->lvl_prov[lv][lf] = prov;
  }
  if (!st->key_line[find_key("kind")]) {
    fail(err, errlen, "%s: missing key 'kind' (cpu or gpu)", fname);
    goto done;
  }
  ok = finish_model(st, fname, out, err, errlen);
done:
  free(st);
  if (!ok) memset(out, 0, sizeof *out);   /* no half-filled model to use by mistake */
  return ok;
}

int hw_prov(const HwModel *h, const char *key) {
  unsigned kind = !strcmp(h->kind, "gpu") ? FOR_GPU : FOR_CPU;
  int ki = find_key(key), l, f;
  if (ki >= 0)
    return KEYS[ki].fig >= 0 && (KEYS[ki].kinds & kind) ? (int)h->prov[KEYS[ki].fig] : -1;
  if (!find_level_key(key, &l, &f) || !(LEVELS[l].kinds & kind)) return -1;
  for (int i = 0; i < h->nlevels; i++) {
    const HwLevel *lv = &h->level[i];
    if (strcmp(lv->name, LEVELS[l].name)) continue;
    if (f == LF_BYTES && !lv->bytes) return -1;      /* main memory of unstated size */
    if (f == LF_WAYS && !lv->ways) return -1;        /* a cache of unstated ways */
    const HwProv by_field[NLF] = {lv->prov_bytes, lv->prov_line, lv->prov_gbs, lv->prov_total,
                                  lv->prov_shared, lv->prov_ways};
    return (int)by_field[f];
  }
  return -1;
}

void hw_set_measured_peak(HwModel *h, double gflops) {
  h->peak_gflops_f32 = gflops;
  h->prov[HW_F_PEAK] = HW_MEASURED;
}

void hw_set_measured_gbs(HwModel *h, int i, double gbs, double total_gbs) {
  if (i < 0 || i >= h->nlevels) return;
  h->level[i].gbs = gbs;
  h->level[i].total_gbs = total_gbs;
  h->level[i].prov_gbs = h->level[i].prov_total = HW_MEASURED;
}

/* ---- hw_dir and hw_load ------------------------------------------------------------------ */

/* The hw/ beside the running program when it runs in its own source tree (./dyn after make:
 * the README's tour), found from /proc/self/exe and recognised by the tree's Makefile.am and
 * the generic model; NULL elsewhere.  An installed program has no hw/ beside it, so it never
 * reads a build tree, and no path of the build tree is compiled in. */
static const char *tree_hw_dir(void) {
  static char dir[PATH_MAX];
  static int found = -1;
  if (found >= 0) return found ? dir : NULL;
  found = 0;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0;
  char probe[PATH_MAX + 32];
  snprintf(probe, sizeof probe, "%s/Makefile.am", exe);
  if (access(probe, R_OK)) return NULL;
  snprintf(probe, sizeof probe, "%s/hw/generic-avx2.hw", exe);
  if (access(probe, R_OK) || (size_t)snprintf(dir, sizeof dir, "%s/hw", exe) >= sizeof dir) return NULL;
  found = 1;
  return dir;
}

/* $DYN_HW_DIR, else the source tree's hw/ when the program runs from its tree, else the
 * installed models: an installed dyn reads what was installed with it, whatever is left
 * where it was built. */
const char *hw_dir(void) {
  const char *env = getenv("DYN_HW_DIR");
  if (env && *env) return env;
  const char *tree = tree_hw_dir();
  return tree ? tree : DYN_PKGDATADIR "/hw";
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "a100, generic-avx2, ..." (the NAME.hw files in dir, sorted), or false if dir is unreadable */
static bool list_known(const char *dir, Buf *out) {
  DIR *d = opendir(dir);
  if (!d) return false;
  VEC(char *) names = {0};
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n > 3 && !strcmp(e->d_name + n - 3, ".hw") && e->d_name[0] != '.')
      vec_push(names, xstrndup(e->d_name, n - 3));
  }
  closedir(d);
  qsort(names.a, (size_t)names.n, sizeof(char *), cmp_str);
  for (int i = 0; i < names.n; i++) {
    buf_printf(out, "%s%s", i ? ", " : "", names.a[i]);
    free(names.a[i]);
  }
  if (!names.n) buf_puts(out, "none");
  vec_free(names);
  return true;
}

/* Read a whole (small) file; NULL with a message. */
static char *read_text(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  Buf b = {0};
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    buf_putn(&b, chunk, n);
    if (b.len > (1u << 20)) {   /* an hw file is a page of text; this is something else */
      fail(err, errlen, "%s: too large for a hardware description", path);
      fclose(f);
      buf_free(&b);
      return NULL;
    }
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    fail(err, errlen, "cannot read %s", path);
    buf_free(&b);
    return NULL;
  }
  if (b.s && strlen(b.s) != b.len) {
    fail(err, errlen, "%s: not a text file", path);
    buf_free(&b);
    return NULL;
  }
  return b.s ? b.s : xstrdup("");
}

static bool load_path(const char *path, HwModel *out, char *err, size_t errlen) {
  char *text = read_text(path, err, errlen);
  if (!text) {
    memset(out, 0, sizeof *out);
    return false;
  }
  bool ok = hw_parse(text, path, out, err, errlen);
  free(text);
  if (ok) copy_str(out->path, sizeof out->path, path);
  return ok;
}

bool hw_load(const char *name_or_path, HwModel *out, char *err, size_t errlen) {
  const char *s = name_or_path ? name_or_path : "";
  size_t n = strlen(s);
  if (strchr(s, '/') || (n > 3 && !strcmp(s + n - 3, ".hw")))
    return load_path(s, out, err, errlen);
  if (!strcmp(s, "host")) {
    hw_detect_host(out);
    return true;
  }
  bool plain = n > 0 && strspn(s, NAME_CHARS) == n;
  const char *dir = hw_dir();
  if (plain) {
    Buf path = {0};
    buf_printf(&path, "%s/%s.hw", dir, s);
    if (access(path.s, F_OK) == 0) {
      bool ok = load_path(path.s, out, err, errlen);
      buf_free(&path);
      return ok;
    }
    buf_free(&path);
  }
  memset(out, 0, sizeof *out);
  Buf known = {0};
  if (list_known(dir, &known))
    fail(err, errlen, "no hardware description '%s' (known: %s)", s, known.s);
  else
    fail(err, errlen, "no hardware description '%s' (cannot read the hardware directory %s: "
         "%s)", s, dir, strerror(errno));
  buf_free(&known);
  return false;
}

/* ---- the host's model: what hw_detect.c finds, over the closest file ------------------------ */

/* The figures of hw/generic-avx2.hw, for when no hw directory can be read at all (a binary
 * moved away from its data).  Detection must always succeed, and these are the safest
 * figures we have; test_hw checks that they still match the file. */
static const char BUILTIN_GENERIC[] =
    "# approximate: the figures of generic-avx2.hw, whose sources are in that file\n"
    "name = generic-avx2\nkind = cpu\n"
    "desc = generic x86-64 core with AVX2 and FMA (built-in copy of generic-avx2.hw)\n"
    "cores = 4\nghz = 3.0\nvector_bits = 256\nvec_regs = 16\nfma_units = 2\nfma_latency = 5\n"
    "llvm_cpu = x86-64-v3\nllvm_features = +avx,+avx2,+fma,+f16c,+bmi,+bmi2\n"
    "l1.bytes = 32K\nl1.line = 64\nl1.gbs = 192\n"
    "l2.bytes = 256K\nl2.line = 64\nl2.gbs = 87\n"
    "l3.bytes = 8M\nl3.line = 64\nl3.shared_by = 4\nl3.gbs = 54\n"
    "dram.gbs = 20\ndram.total_gbs = 40\n";

void hw_detect_host(HwModel *out) { hw_detect_host_in("", out); }

void hw_detect_host_in(const char *root, HwModel *out) {
  if (!root) root = "";
  CpuGuess g;
  detect_cpu(root, &g);

  /* The closest file gives what cannot be detected; the generic one, or the built-in copy of
   * it, stands in when that file is missing. */
  HwModel base;
  char err[512];
  const char *from = g.closest;
  if (!hw_load(g.closest, &base, err, sizeof err) || strcmp(base.kind, "cpu")) {
    from = "generic-avx2";
    if (!hw_load(from, &base, err, sizeof err) || strcmp(base.kind, "cpu")) {
      from = "built-in generic-avx2 figures";
      bool ok = hw_parse(BUILTIN_GENERIC, "<built-in>", &base, err, sizeof err);
      if (!ok) {
        fprintf(stderr, "dyn: internal error: %s (%s:%d)\n", err, __FILE__, __LINE__);
        abort();
      }
    }
  }
  *out = base;
  copy_str(out->name, sizeof out->name, "host");
#if defined(__aarch64__)
  copy_str(out->arch, sizeof out->arch, "aarch64");
#elif defined(__x86_64__)
  copy_str(out->arch, sizeof out->arch, "x86_64");
#endif
  if (g.arch[0]) copy_str(out->arch, sizeof out->arch, g.arch);   /* a fake tree's Arm64 */
  out->path[0] = 0;
  HwProv *prov = out->prov;

  /* Vector width and registers from the ISA; FMA pipes keep the file's total datapath width
   * (Zen 4's two 256-bit pipes are one 512-bit unit), so peak stays right when the width
   * differs from the file's (an OS without AVX-512 state, a client AVX-512 part). */
  if (g.vector_bits && g.vector_bits != base.vector_bits) {
    int width = base.fma_units * base.vector_bits, vwidth = base.vec_units * base.vector_bits;
    out->fma_units = width / g.vector_bits > 0 ? width / g.vector_bits : 1;
    out->vec_units = vwidth / g.vector_bits;
    out->vector_bits = g.vector_bits;
  }
  if (g.vector_bits) prov[HW_F_VECTOR_BITS] = HW_MEASURED;
  if (g.fma_units) {
    out->fma_units = g.fma_units;
    prov[HW_F_FMA_UNITS] = HW_MEASURED;
  }
  if (g.vec_regs) {
    out->vec_regs = g.vec_regs;
    prov[HW_F_VEC_REGS] = HW_MEASURED;
  }
  if (g.llvm_cpu[0]) copy_str(out->llvm_cpu, sizeof out->llvm_cpu, g.llvm_cpu);
  if (g.llvm_fallback[0])
    copy_str(out->llvm_cpu_fallback, sizeof out->llvm_cpu_fallback, g.llvm_fallback);
  if (g.features[0]) copy_str(out->llvm_features, sizeof out->llvm_features, g.features);

  out->cores = detect_cores(root);
  prov[HW_F_CORES] = HW_MEASURED;
  char model[128] = "";
  double ghz = detect_ghz(root, model, sizeof model);
  if (!g.model[0]) copy_str(g.model, sizeof g.model, model);
  /* The clock timed on this machine, when it is one (not a fake tree): believed over
   * /proc/cpuinfo's within 0.5-2.5x of it (an emulator runs the chain at no clock of the
   * host's), or alone within what a core can run at. */
  double timed = root[0] ? 0 : detect_clock_ghz();
  bool clock_timed = timed >= 0.4 && timed <= 8 && (ghz <= 0 || (timed >= 0.5 * ghz && timed <= 2.5 * ghz));
  if (clock_timed) ghz = timed;
  if (ghz > 0) {
    out->ghz = ghz;
    prov[HW_F_GHZ] = HW_MEASURED;
  }

  /* Caches: sysfs, else cpuid (when the identity is this machine's), else the file's.
   * Bandwidths always come from the file, by level name; a level the file lacks takes main
   * memory's (a cache is no slower), a default. */
  CacheInfo ci[3];
  const char *cache_src;
  Buf guest = {0};                /* the shares of shared caches a guest counts on */
  int nc = detect_caches(root, g.cpuid, ci, &cache_src);
  HwLevel mem = base.level[base.nlevels - 1];
  if (nc) {
    int n = 0;
    for (int l = 0; l < nc; l++) {
      if (!ci[l].level || ci[l].bytes <= (n ? out->level[n - 1].bytes : 0)) continue;
      HwLevel *lv = &out->level[n++];
      memset(lv, 0, sizeof *lv);
      snprintf(lv->name, sizeof lv->name, "L%d", l + 1);
      lv->bytes = ci[l].bytes;
      lv->line = ci[l].line;
      lv->shared_by = ci[l].shared_by;
      lv->prov_bytes = lv->prov_line = lv->prov_shared = HW_MEASURED;
      lv->gbs = mem.gbs;
      lv->prov_gbs = HW_GUESSED;
      /* Ways: the file's for a level of its size, else the x86 default for an L1 (hw_parse) */
      lv->ways = l == 0 ? (int)(lv->bytes / 4096) : 0;
      lv->prov_ways = l == 0 ? HW_GUESSED : HW_NOT_TRACKED;
      for (int j = 0; j < base.nlevels - 1; j++)
        if (!strcmp(base.level[j].name, lv->name)) {
          const HwLevel *fl = &base.level[j];
          lv->gbs = fl->gbs;
          lv->prov_gbs = fl->prov_gbs;
          if (fl->ways && fl->bytes == lv->bytes) {
            lv->ways = fl->ways;
            lv->prov_ways = fl->prov_ways;
          }
          /* A virtual machine's system reports the whole chip's shared cache as shared by
           * the guest's cores alone, but the host's other cores use it too: the model counts
           * on the guest's share of it at the file's capacity a core.  A 2-core guest of an
           * Emerald Rapids reported its 260 MiB L3; taking it whole, the model never sent
           * a 64 MiB result past the cache with streaming stores, and softmax, rmsnorm and
           * transpose of f32[4096, 4096] ran at 2-4x the time they take with them. */
          int64_t share = fl->shared_by > lv->shared_by ? fl->bytes / fl->shared_by * lv->shared_by : 0;
          if (g.guest && share > 0 && share < lv->bytes && n > 1 && share > out->level[n - 2].bytes) {
            buf_printf(&guest, "%s%s: %lld MiB of the %lld MiB reported", guest.len ? ", " : "",
                       lv->name, (long long)(share >> 20), (long long)(lv->bytes >> 20));
            lv->whole_bytes = lv->bytes;
            lv->bytes = share;
            lv->prov_bytes = fl->prov_bytes;
          }
        }
    }
    out->level[n++] = mem;
    out->nlevels = n;
  } else {
    cache_src = NULL;
  }
  /* A private cache moves a number of bytes a cycle (the files' figures are those widths
   * times the file's clock): at a clock timed on this machine, it moves them at that clock.
   * A shared level (an Intel L3 on the mesh's clock) and memory keep the file's figures, no
   * faster than the level above.  Zen 4 (zen4.hw: 32 B a cycle at 2.4 GHz, 77 GB/s) timed at
   * 3.69 GHz: L2 118 GB/s, and dyn --calibrate read it at 114. */
  double clock_ratio = clock_timed && base.ghz > 0 ? out->ghz / base.ghz : 1;
  for (int i = 0; i + 1 < out->nlevels && clock_ratio != 1; i++) {
    HwLevel *lv = &out->level[i];
    if (lv->shared_by <= 1) lv->gbs *= clock_ratio;
    else if (i > 0 && lv->gbs > out->level[i - 1].gbs) lv->gbs = out->level[i - 1].gbs;
  }
  for (int i = 0; i < out->nlevels; i++) {
    HwLevel *lv = &out->level[i];
    if (i == out->nlevels - 1) {
      /* Main memory: this machine's cores can draw at most their own streams' worth, and
       * never more than the chip the file describes. */
      lv->shared_by = out->cores;
      lv->prov_shared = HW_MEASURED;
      double streams = lv->gbs * out->cores;
      lv->total_gbs = mem.total_gbs < streams ? mem.total_gbs : streams;
      lv->prov_total = mem.total_gbs < streams ? mem.prov_total : lv->prov_gbs;
    } else {
      /* As in a file without .total_gbs: exact for a private cache, a default for a shared
       * one (it assumes the cache feeds all its cores at once). */
      lv->total_gbs = lv->gbs * out->cores;
      lv->prov_total = lv->shared_by == 1 ? lv->prov_gbs : HW_GUESSED;
    }
  }
  out->peak_gflops_f32 = out->cores * out->ghz * out->fma_units * 2.0 * (out->vector_bits / 32);
  prov[HW_F_PEAK] = weakest(weakest(prov[HW_F_CORES], prov[HW_F_GHZ]),
                            weakest(prov[HW_F_FMA_UNITS], prov[HW_F_VECTOR_BITS]));

  snprintf(out->desc, sizeof out->desc, "%.72s%s%.40s, detected", g.model[0] ? g.model : "CPU",
           g.uarch[0] ? ", " : "", g.uarch);
  Buf src = {0};
  buf_printf(&src, "detected: %s%sISA (%s), %d usable core%s, clock %s, caches %s%s%s%s; bandwidths%s, "
             "FMA pipes and latency from %s%s", g.ident, g.ident[0] ? ", " : "", out->llvm_cpu,
             out->cores, out->cores == 1 ? "" : "s",
             clock_timed ? "timed" : ghz > 0 ? "from /proc/cpuinfo" : "from the file",
             !cache_src ? "from the file (none detected)"
             : strcmp(cache_src, "sysfs") ? "from cpuid" : "from sysfs",
             guest.len ? " (a virtual machine's share, " : "", guest.len ? guest.s : "",
             guest.len ? ")" : "", clock_ratio != 1 ? " (the private caches' at the timed clock)" : "",
             base.path[0] ? base.name : from, base.path[0] ? ".hw" : "");
  copy_str(out->source, sizeof out->source, src.s);
  buf_free(&src);
  buf_free(&guest);
}

/* ---- hw_describe ---------------------------------------------------------------------------- */

/* " [m]" after a figure: where it comes from (nothing for a model made without hw_parse). */
static const char *tag(HwProv p, unsigned *seen) {
  static const char *const tags[] = {"", " [?]", " [g]", " [s]", " [m]"};
  *seen |= 1u << p;
  return tags[p];
}

void hw_describe(const HwModel *hw, Buf *out) {
  bool gpu = !strcmp(hw->kind, "gpu");
  const HwProv *f = hw->prov;
  unsigned seen = 0;
  char a[48], b[48];
  buf_printf(out, "%s: %s\n", hw->name, hw->desc);
  if (gpu) {
    buf_printf(out, "  gpu:     %d SMs%s, compute capability %d.%d%s, %.2f GHz%s, warps of %d%s\n",
               hw->sm_count, tag(f[HW_F_SM_COUNT], &seen), hw->cc_major, hw->cc_minor,
               tag(f[HW_F_CC], &seen), hw->ghz, tag(f[HW_F_GHZ], &seen), hw->warp_size,
               tag(f[HW_F_WARP_SIZE], &seen));
    fmt_bytes(hw->smem_per_sm, a, sizeof a);
    fmt_bytes(hw->smem_per_block, b, sizeof b);
    buf_printf(out, "  per SM:  %d registers%s (up to %d per thread%s), %s shared memory%s (up to "
               "%s per block%s), up to %d threads per block%s\n", hw->regs_per_sm,
               tag(f[HW_F_REGS_PER_SM], &seen), hw->regs_per_thread_max,
               tag(f[HW_F_REGS_PER_THREAD_MAX], &seen), a, tag(f[HW_F_SMEM_PER_SM], &seen), b,
               tag(f[HW_F_SMEM_PER_BLOCK], &seen), hw->max_threads_per_block,
               tag(f[HW_F_MAX_THREADS_PER_BLOCK], &seen));
    buf_printf(out, "  peak:    %.1f TFLOP/s f32%s, %.1f tf32%s, %.1f bf16%s (tensor cores, "
               "dense)\n", hw->fp32_tflops, tag(f[HW_F_FP32_TFLOPS], &seen), hw->tf32_tflops,
               tag(f[HW_F_TF32_TFLOPS], &seen), hw->bf16_tflops,
               tag(f[HW_F_BF16_TFLOPS], &seen));
  } else {
    buf_printf(out, "  cpu:     %d core%s%s at %.2f GHz%s, %d-bit vectors%s (%d registers%s), %d "
               "FMA unit%s%s of latency %d%s\n", hw->cores, hw->cores == 1 ? "" : "s",
               tag(f[HW_F_CORES], &seen), hw->ghz, tag(f[HW_F_GHZ], &seen), hw->vector_bits,
               tag(f[HW_F_VECTOR_BITS], &seen), hw->vec_regs, tag(f[HW_F_VEC_REGS], &seen),
               hw->fma_units, hw->fma_units == 1 ? "" : "s", tag(f[HW_F_FMA_UNITS], &seen),
               hw->fma_latency, tag(f[HW_F_FMA_LATENCY], &seen));
    if (hw->vec_units > hw->fma_units)
      buf_printf(out, "  vector:  %d units%s for floating-point operations, the FMA units among them\n",
                 hw->vec_units, tag(f[HW_F_VEC_UNITS], &seen));
    if (hw->lane_scale > 0)
      buf_printf(out, "  math:    %.2f%s of the lane-operations a second the vector units promise (dyn --calibrate)\n",
                 hw->lane_scale, tag(HW_MEASURED, &seen));
    if (hw->gather_lane_cycles > 0)
      buf_printf(out, "  gather:  %.3g cycles a lane%s\n", hw->gather_lane_cycles,
                 tag(f[HW_F_GATHER_LANE_CYCLES], &seen));
    buf_printf(out, "  peak:    %.0f GFLOP/s f32%s\n", hw->peak_gflops_f32,
               tag(f[HW_F_PEAK], &seen));
    if (hw->tile_off_line > 0)
      buf_printf(out, "  tiles:   %.3g x the cycles of a transpose's tile whose result rows are not whole lines apart%s\n",
                 hw->tile_off_line, tag(f[HW_F_TILE_OFF_LINE], &seen));
    if (hw->bf16_per_fma > 0)
      buf_printf(out, "  bf16:    %.3g x the f32 rate%s where contractions use vdpbf16ps\n",
                 hw->bf16_per_fma, tag(f[HW_F_BF16_PER_FMA], &seen));
    buf_printf(out, "  llvm:    %s (fallback %s), %s\n", hw->llvm_cpu,
               hw->llvm_cpu_fallback[0] ? hw->llvm_cpu_fallback : "generic",
               hw->llvm_features[0] ? hw->llvm_features : "no extra features");
  }
  for (int i = 0; i < hw->nlevels; i++) {
    const HwLevel *lv = &hw->level[i];
    bool last = i == hw->nlevels - 1;
    char size[64] = "", share[48] = "";
    if (lv->bytes) {
      fmt_bytes(lv->bytes, a, sizeof a);
      snprintf(size, sizeof size, "%s%s", a, tag(lv->prov_bytes, &seen));
    } else {
      copy_str(size, sizeof size, "-");
    }
    if (gpu) copy_str(share, sizeof share, last || lv->shared_by > 1 ? "per device" : "per SM");
    else if (last) copy_str(share, sizeof share, "");
    else if (lv->shared_by == 1) copy_str(share, sizeof share, "per core");
    else snprintf(share, sizeof share, "per %d cores", lv->shared_by);
    buf_printf(out, "  %-5s    %-14s %-13s", lv->name, size, share);
    if (!last) buf_printf(out, " %4d B lines", lv->line);
    else buf_printf(out, " %12s", "");
    if (gpu) buf_printf(out, "  %.0f GB/s%s\n", lv->gbs, tag(lv->prov_gbs, &seen));
    else
      buf_printf(out, "  %.0f GB/s%s per core, %.0f GB/s%s in all\n", lv->gbs,
                 tag(lv->prov_gbs, &seen), lv->total_gbs, tag(lv->prov_total, &seen));
    if (lv->kept_bytes > lv->bytes) {
      fmt_bytes(lv->kept_bytes, a, sizeof a);
      buf_printf(out, "           kept %s%s of a set read again and again (dyn --calibrate)\n", a, tag(HW_MEASURED, &seen));
    }
    if (last && !gpu && hw->write_cost > 0)
      buf_printf(out, "           a byte written costs %.2f%s read (read for ownership and written back; dyn --calibrate)\n",
                 hw->write_cost, tag(HW_MEASURED, &seen));
  }
  /* The legend names the tags that appear, best first. */
  static const char *const legend[] = {
    [HW_MEASURED] = "[m] measured (on this machine, or as its file says)",
    [HW_SOURCED] = "[s] from a source its file cites",
    [HW_GUESSED] = "[g] guessed (approximate, or a default)",
    [HW_UNSOURCED] = "[?] no source given",
  };
  int n = 0;
  for (int p = HW_MEASURED; p > HW_NOT_TRACKED; p--)
    if (seen & (1u << p)) buf_printf(out, "%s%s", n++ ? ", " : "  tags:    ", legend[p]);
  if (n) buf_puts(out, "\n");
  if (hw->path[0]) buf_printf(out, "  from:    %s\n", hw->path);
  else if (hw->source[0]) buf_printf(out, "  from:    %s\n", hw->source);
}
