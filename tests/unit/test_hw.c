/* test_hw.c -- unit tests for hw.c, the hardware model.  Every file in hw/ must parse, hold
 * figures that agree with each other (capacities grow and bandwidths fall down the levels,
 * GPU peaks match SMs x lanes x clock) and say where each figure comes from; malformed files
 * must give exact "FILE:LINE: message" errors; sizes take binary suffixes; comments give each
 * figure its tag; unknown names list the known ones; host detection must give sane values on
 * whatever machine runs the tests, parse a fake sysfs tree exactly, and choose the file and
 * LLVM name of fake CPUs (Intel and AMD, by family and model) from a fake /proc/cpuinfo.
 */
#include "config.h"
#include "dyn_int.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

static bool load(const char *name, HwModel *m) {
  char err[1024];
  bool ok = hw_load(name, m, err, sizeof err);
  ck_assert_msg(ok, "%s: %s", name, err);
  return ok;
}

static const HwLevel *level(const HwModel *m, const char *name) {
  for (int i = 0; i < m->nlevels; i++)
    if (!strcmp(m->level[i].name, name)) return &m->level[i];
  return NULL;
}

static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

/* Checks that hold for any model, loaded or detected. */
static void check_sane(const HwModel *m) {
  const char *n = m->name;
  ck_assert_msg(m->name[0] && m->desc[0], "%s: name and desc", n);
  ck_assert_msg(m->nlevels >= 3 && m->nlevels <= 6, "%s: %d levels", n, m->nlevels);
  for (int i = 0; i < m->nlevels; i++) {
    const HwLevel *lv = &m->level[i];
    bool last = i == m->nlevels - 1;
    ck_assert_msg(lv->name[0], "%s: level %d has no name", n, i);
    ck_assert_msg(lv->line >= 32 && lv->line <= 256 && !(lv->line & (lv->line - 1)),
                  "%s: %s line %d", n, lv->name, lv->line);
    ck_assert_msg(lv->gbs > 0 && lv->total_gbs >= lv->gbs - 1e-9, "%s: %s bandwidth", n,
                  lv->name);
    ck_assert_msg(lv->shared_by >= 1, "%s: %s shared_by %d", n, lv->name, lv->shared_by);
    ck_assert_msg(last || lv->bytes > 0, "%s: cache %s without a size", n, lv->name);
    if (i > 0) {
      const HwLevel *up = &m->level[i - 1];
      ck_assert_msg(!lv->bytes || lv->bytes > up->bytes, "%s: %s not larger than %s", n,
                    lv->name, up->name);
      ck_assert_msg(lv->gbs <= up->gbs, "%s: %s faster than %s", n, lv->name, up->name);
    }
  }
  ck_assert_msg(m->ghz > 0.3 && m->ghz < 8, "%s: ghz %g", n, m->ghz);
  ck_assert_msg(m->peak_gflops_f32 > 0, "%s: peak", n);
  if (!strcmp(m->kind, "cpu")) {
    ck_assert_msg(m->vector_bits == 128 || m->vector_bits == 256 || m->vector_bits == 512,
                  "%s: vector_bits %d", n, m->vector_bits);
    ck_assert_msg(m->vec_regs == 16 || m->vec_regs == 32, "%s: vec_regs %d", n, m->vec_regs);
    ck_assert_msg(m->fma_units >= 1 && m->fma_units <= 4, "%s: fma_units", n);
    ck_assert_msg(m->vec_units == 0 || (m->vec_units >= m->fma_units && m->vec_units <= 8), "%s: vec_units", n);
    ck_assert_msg(m->gather_lane_cycles == 0 || (m->gather_lane_cycles >= 0.25 && m->gather_lane_cycles <= 8),
                  "%s: gather_lane_cycles", n);
    ck_assert_msg(m->tile_off_line == 0 || (m->tile_off_line >= 1 && m->tile_off_line <= 4), "%s: tile_off_line", n);
    ck_assert_msg(m->fma_latency >= 2 && m->fma_latency <= 8, "%s: fma_latency", n);
    ck_assert_msg(m->cores >= 1 && m->cores <= 4096, "%s: cores %d", n, m->cores);
    ck_assert_msg(m->llvm_cpu[0] && m->llvm_cpu_fallback[0], "%s: llvm_cpu", n);
    ck_assert_msg(!m->llvm_features[0] || m->llvm_features[0] == '+', "%s: llvm_features", n);
    ck_assert_str_eq(m->level[0].name, "L1");
    ck_assert_str_eq(m->level[m->nlevels - 1].name, "DRAM");
    ck_assert_int_eq(m->level[0].shared_by, 1);
    double peak = m->cores * m->ghz * m->fma_units * 2.0 * (m->vector_bits / 32);
    ck_assert_msg(near(m->peak_gflops_f32, peak, 1e-9), "%s: peak %g, derived %g", n,
                  m->peak_gflops_f32, peak);
  } else {
    ck_assert_str_eq(m->kind, "gpu");
    ck_assert_msg(m->sm_count >= 1 && m->sm_count <= 1024, "%s: sm_count", n);
    ck_assert_int_eq(m->cores, m->sm_count);
    ck_assert_msg(m->cc_major >= 7 && m->cc_major <= 12, "%s: cc %d", n, m->cc_major);
    ck_assert_int_eq(m->warp_size, 32);
    ck_assert_int_eq(m->regs_per_sm, 65536);
    ck_assert_int_eq(m->regs_per_thread_max, 255);
    ck_assert_int_eq(m->max_threads_per_block, 1024);
    ck_assert_msg(m->smem_per_block <= m->smem_per_sm && m->smem_per_block >= 48 * 1024,
                  "%s: smem", n);
    ck_assert_msg(m->fp32_tflops <= m->tf32_tflops && m->tf32_tflops <= m->bf16_tflops,
                  "%s: fp32 <= tf32 <= bf16", n);
    ck_assert_msg(near(m->peak_gflops_f32, m->fp32_tflops * 1000, 1e-9), "%s: peak", n);
    ck_assert_str_eq(m->level[0].name, "smem");
    ck_assert_int_eq(m->level[0].bytes, m->smem_per_sm);
    const char *mem = m->level[m->nlevels - 1].name;
    ck_assert_msg(!strcmp(mem, "HBM") || !strcmp(mem, "GDDR"), "%s: main memory %s", n, mem);
    ck_assert_msg(m->level[m->nlevels - 1].bytes >= (int64_t)8 << 30, "%s: memory size", n);
    /* The figures must agree with each other: FP32 peak = SMs x FP32 lanes x 2 x clock, with
     * 64 lanes per SM on compute capability 8.0 and 128 on 8.6 to 9.0 (CUDA C++ Programming
     * Guide, arithmetic instruction throughput); shared memory = SMs x 128 B x clock. */
    int lanes = m->cc_major == 8 && m->cc_minor == 0 ? 64 : 128;
    ck_assert_msg(near(m->fp32_tflops, m->sm_count * lanes * 2 * m->ghz / 1000, 0.01),
                  "%s: fp32_tflops %g disagrees with SMs and clock", n, m->fp32_tflops);
    ck_assert_msg(near(m->level[0].gbs, m->sm_count * 128 * m->ghz, 0.01),
                  "%s: smem.gbs disagrees with SMs and clock", n);
  }
}

/* Every figure a file sets, and every one derived from them. */
static const char *const FIGURES[] = {
  "cores", "ghz", "peak_gflops_f32", "vector_bits", "vec_regs", "fma_units", "fma_latency",
  "sm_count", "cc", "warp_size", "regs_per_sm", "regs_per_thread_max", "smem_per_sm",
  "smem_per_block", "max_threads_per_block", "fp32_tflops", "tf32_tflops", "bf16_tflops",
  "line_move_ns",
};
static const char *const LEVEL_PREFIXES[] = {"l1", "smem", "l2", "l3", "dram", "hbm", "gddr"};
static const char *const LEVEL_FIELDS[] = {"bytes", "line", "gbs", "total_gbs", "shared_by",
                                           "ways"};

/* Each figure of a file in hw/ has a comment that says where it comes from (hw/README.md,
 * "Where figures come from"): none is untagged or unsourced. */
static void check_sourced(const HwModel *m) {
  int n = 0;
  for (size_t i = 0; i < sizeof FIGURES / sizeof FIGURES[0]; i++) {
    int p = hw_prov(m, FIGURES[i]);
    if (p < 0) continue;
    ck_assert_msg(p > HW_UNSOURCED, "%s: '%s' has no comment saying where it comes from",
                  m->name, FIGURES[i]);
    n++;
  }
  if (m->vec_units) ck_assert_msg(hw_prov(m, "vec_units") > HW_UNSOURCED, "%s: vec_units unsourced", m->name);
  if (m->gather_lane_cycles > 0)
    ck_assert_msg(hw_prov(m, "gather_lane_cycles") > HW_UNSOURCED, "%s: gather_lane_cycles unsourced", m->name);
  if (m->tile_off_line > 0)
    ck_assert_msg(hw_prov(m, "tile_off_line") > HW_UNSOURCED, "%s: tile_off_line unsourced", m->name);
  for (size_t l = 0; l < sizeof LEVEL_PREFIXES / sizeof LEVEL_PREFIXES[0]; l++)
    for (size_t f = 0; f < sizeof LEVEL_FIELDS / sizeof LEVEL_FIELDS[0]; f++) {
      char key[32];
      snprintf(key, sizeof key, "%s.%s", LEVEL_PREFIXES[l], LEVEL_FIELDS[f]);
      int p = hw_prov(m, key);
      if (p < 0) continue;
      ck_assert_msg(p > HW_UNSOURCED, "%s: '%s' has no comment saying where it comes from",
                    m->name, key);
      n++;
    }
  ck_assert_msg(n >= 20, "%s: only %d figures tagged", m->name, n);
}

/* A valid CPU file, one line per entry, so tests can replace line k (1-based). */
static const char *CPU_LINES[] = {
  "name = t",                  /* 1 */
  "kind = cpu",                /* 2 */
  "desc = a test core",        /* 3 */
  "cores = 8",                 /* 4 */
  "ghz = 3.5",                 /* 5 */
  "vector_bits = 256",         /* 6 */
  "vec_regs = 16",             /* 7 */
  "fma_units = 2",             /* 8 */
  "fma_latency = 4",           /* 9 */
  "llvm_cpu = x86-64-v3",      /* 10 */
  "llvm_features = +avx2,+fma",/* 11 */
  "l1.bytes = 32K",            /* 12 */
  "l1.line = 64",              /* 13 */
  "l1.gbs = 200",              /* 14 */
  "l2.bytes = 1M",             /* 15 */
  "l2.line = 64",              /* 16 */
  "l2.gbs = 100",              /* 17 */
  "dram.gbs = 20",             /* 18 */
  "dram.total_gbs = 60",       /* 19 */
};
#define NCPU ((int)(sizeof CPU_LINES / sizeof CPU_LINES[0]))

/* The CPU file with line `at` replaced by `with` (NULL: deleted, leaving a blank line so the
 * numbering stays) and `extra` appended. */
static char *cpu_text(int at, const char *with, const char *extra) {
  Buf b = {0};
  for (int i = 1; i <= NCPU; i++)
    buf_printf(&b, "%s\n", i == at ? (with ? with : "") : CPU_LINES[i - 1]);
  if (extra) buf_puts(&b, extra);
  return b.s;
}

static const char *GPU_TEXT =
    "name = g\nkind = gpu\ndesc = a test gpu\nsm_count = 100\ncc = 9.0\nghz = 1.5\n"
    "warp_size = 32\nregs_per_sm = 65536\nregs_per_thread_max = 255\n"
    "max_threads_per_block = 1024\nsmem_per_sm = 228K\nsmem_per_block = 227K\n"
    "fp32_tflops = 38.4\ntf32_tflops = 300\nbf16_tflops = 600\n"
    "smem.line = 128\nsmem.gbs = 19200\n"
    "l2.bytes = 50M\nl2.line = 128\nl2.gbs = 8000\n";   /* 20 lines, no main memory */

/* Parse text; expect failure with exactly `want`. */
static void expect_error(const char *text, const char *want) {
  HwModel m;
  char err[1024] = "";
  bool ok = hw_parse(text, "t.hw", &m, err, sizeof err);
  ck_assert_msg(!ok, "parsed, but expected: %s", want);
  ck_assert_str_eq(err, want);
}

static HwModel parse_ok(const char *text) {
  HwModel m;
  char err[1024] = "";
  bool ok = hw_parse(text, "t.hw", &m, err, sizeof err);
  ck_assert_msg(ok, "%s", err);
  return m;
}

/* ---- every file in hw/ ---- */

START_TEST(test_all_files) {
  static const char *const required[] = {"generic-avx2", "skylake-avx512", "icelake-server",
                                         "sapphirerapids", "emeraldrapids", "graniterapids",
                                         "zen3", "zen4", "zen5", "neoverse-v2", "neoverse-n1",
                                         "a100", "h100", "h200", "l4", "rtx4090"};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    HwModel m;
    if (!load(required[i], &m)) continue;
    ck_assert_str_eq(m.name, required[i]);
  }
  DIR *d = opendir(hw_dir());
  ck_assert_msg(d != NULL, "cannot open %s", hw_dir());
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".hw")) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 3), e->d_name);
    HwModel m;
    if (!load(name, &m)) continue;
    /* A file's name is the name :hw takes, so it must be its own. */
    ck_assert_str_eq(m.name, name);
    ck_assert_msg(strstr(m.path, e->d_name) != NULL, "%s: path %s", name, m.path);
    check_sane(&m);
    check_sourced(&m);
    n++;
  }
  closedir(d);
  ck_assert_int_ge(n, 15);
}
END_TEST

START_TEST(test_file_figures) {
  HwModel m;
  load("zen5", &m);
  ck_assert_int_eq(m.level[0].bytes, 48 * 1024);
  ck_assert_int_eq(level(&m, "L3")->bytes, 32 << 20);
  ck_assert_int_eq(level(&m, "L3")->shared_by, 8);
  ck_assert_int_eq(level(&m, "DRAM")->shared_by, m.cores);
  ck_assert(near(m.peak_gflops_f32, 128 * 2.7 * 2 * 2 * 16, 1e-9));
  ck_assert_int_eq(m.level[0].ways, 12);
  load("neoverse-v2", &m);                          /* not capacity / 4 KiB, x86's rule */
  ck_assert_int_eq(m.level[0].bytes, 64 * 1024);
  ck_assert_int_eq(m.level[0].ways, 4);
  ck_assert_int_eq(hw_prov(&m, "l1.ways"), HW_SOURCED);
  load("skylake-avx512", &m);
  ck_assert_int_eq(level(&m, "L3")->bytes, 38 * 1048576 + 524288);
  load("h100", &m);
  ck_assert_int_eq(m.cc_major, 9);
  ck_assert_int_eq(m.cc_minor, 0);
  ck_assert_int_eq(m.smem_per_sm, 228 * 1024);
  ck_assert_int_eq(level(&m, "L2")->shared_by, 132);
  ck_assert_int_eq(level(&m, "HBM")->bytes, (int64_t)80 << 30);
  load("l4", &m);
  ck_assert(level(&m, "GDDR") != NULL);
  ck_assert(level(&m, "HBM") == NULL);
}
END_TEST

/* ---- parsing ---- */

START_TEST(test_parse_valid) {
  char *t = cpu_text(3, "desc = \"a # quoted\"   # and a comment", "\n# comment\n  \n");
  HwModel m = parse_ok(t);
  free(t);
  ck_assert_str_eq(m.desc, "a # quoted");
  ck_assert_str_eq(m.llvm_features, "+avx2,+fma");
  ck_assert_str_eq(m.llvm_cpu_fallback, "generic");
  ck_assert_int_eq(m.nlevels, 3);
  ck_assert_str_eq(m.level[2].name, "DRAM");
  ck_assert_int_eq(m.level[2].shared_by, 8);      /* main memory: the whole chip */
  ck_assert_int_eq(m.level[2].line, 64);          /* inherited from the cache above */
  ck_assert(near(m.level[0].total_gbs, 200 * 8, 1e-12));   /* derived: gbs x cores */
  ck_assert_int_eq(m.level[0].ways, 8);           /* derived: 32 KiB / 4 KiB, a guess */
  ck_assert_int_eq(hw_prov(&m, "l1.ways"), HW_GUESSED);
  ck_assert_int_eq(m.level[1].ways, 0);           /* unknown beyond L1 */
  ck_assert_int_eq(hw_prov(&m, "dram.ways"), -1);
  ck_assert(near(m.level[2].total_gbs, 60, 1e-12));
  ck_assert(near(m.peak_gflops_f32, 8 * 3.5 * 2 * 2 * 8, 1e-12));
  ck_assert_str_eq(m.path, "");

  /* CRLF line ends, tabs, a trailing comment after a number, no final newline. */
  t = cpu_text(5, "ghz\t=\t3.5   # base clock\r", "l3.bytes = 16M\r\nl3.line = 64\r\n"
               "l3.shared_by = all\r\nl3.gbs = 50\r\nl3.total_gbs = 300");
  m = parse_ok(t);
  free(t);
  ck_assert(near(m.ghz, 3.5, 1e-12));
  ck_assert_int_eq(m.nlevels, 4);
  ck_assert_str_eq(m.level[2].name, "L3");
  ck_assert_int_eq(m.level[2].shared_by, 8);
  ck_assert(near(m.level[2].total_gbs, 300, 1e-12));

  /* A stated peak is kept. */
  t = cpu_text(0, NULL, "peak_gflops_f32 = 1234.5\n");
  m = parse_ok(t);
  free(t);
  ck_assert(near(m.peak_gflops_f32, 1234.5, 1e-12));

  /* GPU: cores is the SM count; main memory may be HBM or GDDR. */
  Buf b = {0};
  buf_printf(&b, "%shbm.bytes = 80G\nhbm.gbs = 3000\n", GPU_TEXT);
  m = parse_ok(b.s);
  buf_free(&b);
  ck_assert_int_eq(m.cores, 100);
  ck_assert_str_eq(m.level[2].name, "HBM");
  ck_assert_int_eq(m.level[1].shared_by, 100);
  ck_assert(near(m.level[2].total_gbs, 3000, 1e-12));
  ck_assert(near(m.peak_gflops_f32, 38400, 1e-12));
}
END_TEST

START_TEST(test_parse_errors) {
  char *t;
  struct { int at; const char *with, *extra, *want; } cases[] = {
    {0, NULL, "foo = 1\n", "t.hw:20: unknown key 'foo'"},
    {0, NULL, "l9.bytes = 1\n", "t.hw:20: unknown key 'l9.bytes'"},
    {0, NULL, "l1.size = 1\n", "t.hw:20: unknown key 'l1.size'"},
    {0, NULL, "l1.ways = 0\n", "t.hw:20: bad number '0' for 'l1.ways' (expected a positive integer)"},
    {0, NULL, "dram.ways = 4\n", "t.hw:20: 'dram.ways': only a cache has ways"},
    {4, "cores = abc", NULL, "t.hw:4: bad number 'abc' for 'cores' (expected a positive integer)"},
    {4, "cores = 0", NULL, "t.hw:4: bad number '0' for 'cores' (expected a positive integer)"},
    {4, "cores = 4.5", NULL, "t.hw:4: bad number '4.5' for 'cores' (expected a positive integer)"},
    {4, "cores = 99999999999", NULL,
     "t.hw:4: bad number '99999999999' for 'cores' (expected a positive integer)"},
    {5, "ghz = fast", NULL, "t.hw:5: bad number 'fast' for 'ghz' (expected a positive number)"},
    {5, "ghz = inf", NULL, "t.hw:5: bad number 'inf' for 'ghz' (expected a positive number)"},
    {5, "ghz = nan", NULL, "t.hw:5: bad number 'nan' for 'ghz' (expected a positive number)"},
    {5, "ghz = -3", NULL, "t.hw:5: bad number '-3' for 'ghz' (expected a positive number)"},
    {5, "ghz = 3.5 GHz", NULL,
     "t.hw:5: bad number '3.5 GHz' for 'ghz' (expected a positive number)"},
    {5, "ghz =", NULL, "t.hw:5: bad number '' for 'ghz' (expected a positive number)"},
    {7, "just some words", NULL, "t.hw:7: expected 'key = value'"},
    {7, "= 16", NULL, "t.hw:7: expected 'key = value'"},
    {3, "desc = \"unterminated", NULL, "t.hw:3: unterminated quote"},
    {3, "desc = \"a\" b", NULL, "t.hw:3: text after the closing quote"},
    {0, NULL, "cores = 4\n", "t.hw:20: 'cores' is set twice (first on line 4)"},
    {2, "kind = tpu", NULL, "t.hw:2: 'kind' must be cpu or gpu, not 'tpu'"},
    {6, "vector_bits = 384", NULL, "t.hw:6: 'vector_bits' must be 128, 256 or 512, not 384"},
    {0, NULL, "sm_count = 4\n", "t.hw:20: 'sm_count' is for a GPU, but this file has kind = cpu"},
    {0, NULL, "hbm.gbs = 4\n", "t.hw:20: 'hbm.gbs' is for a GPU, but this file has kind = cpu"},
    {5, NULL, NULL, "t.hw: missing key 'ghz'"},
    {2, NULL, NULL, "t.hw: missing key 'kind' (cpu or gpu)"},
    {17, "l2.line = 64", NULL, "t.hw:17: 'l2.line' is set twice (first on line 16)"},
    {15, "l1.bytes = 1M", NULL, "t.hw:15: 'l1.bytes' is set twice (first on line 12)"},
    {15, "l2.bytes = 16K", NULL, "t.hw:15: L2 (16 KiB) must be larger than L1 (32 KiB)"},
    {12, "l1.bytes = 48Q", NULL,
     "t.hw:12: bad size '48Q' for 'l1.bytes' (expected bytes, e.g. 48K, 2M, 32MiB)"},
    {13, "l1.line = 96", NULL, "t.hw:13: 'l1.line' must be a power of two up to 64K, not '96'"},
    {19, NULL, NULL, "t.hw: missing key 'dram.total_gbs'"},
    {0, NULL, "l3.shared_by = 16\nl3.bytes = 8M\nl3.line = 64\nl3.gbs = 40\n",
     "t.hw:20: 'l3.shared_by' (16) exceeds the 8 cores"},
    {0, NULL, "l3.shared_by = some\n",
     "t.hw:20: bad number 'some' for 'l3.shared_by' (expected a positive integer or 'all')"},
    {10, "llvm_cpu = \"\"", NULL, "t.hw:10: empty value for 'llvm_cpu'"},
    {0, NULL, "vec_units = 1\n",
     "t.hw:20: 'vec_units' (1) is fewer than 'fma_units' (2): the FMA pipes are vector pipes too"},
    {1, "name = my cpu", NULL,
     "t.hw:1: 'name' may hold only letters, digits, '.', '_' and '-', not 'my cpu'"},
    {6, "vector_bits = 1024", NULL, "t.hw:6: 'vector_bits' must be 128, 256 or 512, not 1024"},
    {3, "desc = 0123456789012345678901234567890123456789012345678901234567890123456789"
        "012345678901234567890123456789012345678901234567890123456789", NULL,
     "t.hw:3: value too long for 'desc' (at most 127 characters)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t = cpu_text(cases[i].at, cases[i].with, cases[i].extra);
    expect_error(t, cases[i].want);
    free(t);
  }
  /* Several missing keys are named together, in the order of hw/README.md. */
  Buf b = {0};
  for (int i = 1; i <= NCPU; i++)
    if (i != 5 && i != 17 && i != 8) buf_printf(&b, "%s\n", CPU_LINES[i - 1]);
  expect_error(b.s, "t.hw: missing keys 'ghz', 'fma_units', 'l2.gbs'");
  buf_free(&b);
  /* A missing level is reported by its keys. */
  b = (Buf){0};
  for (int i = 1; i <= NCPU; i++)
    if (i < 15 || i > 17) buf_printf(&b, "%s\n", CPU_LINES[i - 1]);
  expect_error(b.s, "t.hw: missing keys 'l2.bytes', 'l2.line', 'l2.gbs'");
  buf_free(&b);

  /* GPU files. */
  expect_error(GPU_TEXT, "t.hw: missing keys 'hbm.bytes', 'hbm.gbs'");
  struct { const char *extra, *want; } gcases[] = {
    {"hbm.bytes = 80G\nhbm.gbs = 3000\ngddr.bytes = 24G\ngddr.gbs = 1000\n",
     "t.hw:23: a GPU has one main memory: set either hbm.* or gddr.*"},
    {"hbm.bytes = 80G\nhbm.gbs = 3000\nhbm.total_gbs = 3000\n",
     "t.hw:23: a GPU's 'hbm.gbs' is already the whole device's; remove 'hbm.total_gbs'"},
    {"hbm.bytes = 80G\nhbm.gbs = 3000\nsmem.bytes = 228K\n",
     "t.hw:23: shared memory's size is 'smem_per_sm'; remove 'smem.bytes'"},
    {"hbm.bytes = 80G\nhbm.gbs = 3000\ncores = 4\n",
     "t.hw:23: 'cores' is for a CPU, but this file has kind = gpu"},
    {"hbm.bytes = 80G\nhbm.gbs = 3000\nl1.bytes = 4\n",
     "t.hw:23: 'l1.bytes' is for a CPU, but this file has kind = gpu"},
    {"hbm.bytes = 80G\nhbm.gbs = 3000\ncc = 9\n", "t.hw:23: 'cc' is set twice (first on line 5)"},
    {"hbm.bytes = 40M\nhbm.gbs = 3000\n", "t.hw:21: HBM (40 MiB) must be larger than L2 (50 MiB)"},
  };
  for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++) {
    b = (Buf){0};
    buf_printf(&b, "%s%s", GPU_TEXT, gcases[i].extra);
    expect_error(b.s, gcases[i].want);
    buf_free(&b);
  }
  b = (Buf){0};
  buf_puts(&b, GPU_TEXT);
  char *cc = strstr(b.s, "cc = 9.0");
  ck_assert(cc != NULL);
  memcpy(cc, "cc = 9.x", 8);
  buf_puts(&b, "hbm.bytes = 80G\nhbm.gbs = 3000\n");
  expect_error(b.s, "t.hw:5: bad compute capability '9.x' (expected MAJOR.MINOR, e.g. 9.0)");
  buf_free(&b);

  /* An empty text names its file. */
  expect_error("", "t.hw: missing key 'kind' (cpu or gpu)");
  HwModel m;
  char err[256];
  ck_assert(!hw_parse("x", NULL, &m, err, sizeof err));
  ck_assert_str_eq(err, "<hw>:1: expected 'key = value'");
  ck_assert(!hw_parse("x", "t.hw", &m, NULL, 0));   /* no room for a message is fine */
}
END_TEST

START_TEST(test_sizes) {
  struct { const char *text; int64_t bytes; } ok[] = {
    {"4096", 4096}, {"512B", 512}, {"48K", 48 << 10}, {"48k", 48 << 10}, {"48KB", 48 << 10},
    {"48KiB", 48 << 10}, {"48 KiB", 48 << 10}, {"2M", 2 << 20}, {"32MiB", 32 << 20},
    {"1.375M", 1441792}, {"38.5M", 40370176}, {"80GiB", (int64_t)80 << 30},
    {"1T", (int64_t)1 << 40},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char line[64];
    snprintf(line, sizeof line, "l2.bytes = %s", ok[i].text);
    /* l2 must stay above the 32K L1 for the file to be valid; L1 is set to 1 byte then. */
    char *t = cpu_text(15, line, NULL);
    char *l1 = strstr(t, "l1.bytes = 32K");
    memcpy(l1, "l1.bytes =   1", 14);
    HwModel m = parse_ok(t);
    free(t);
    ck_assert_msg(m.level[1].bytes == ok[i].bytes, "%s: %lld", ok[i].text,
                  (long long)m.level[1].bytes);
  }
  static const char *const bad[] = {"1.3K", "K", "-1K", "0", "0K", "1e3K", "12Q", "1KK",
                                    "99999999999T", "1.", ".5K", "48 K B", "0x10"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char line[64], want[160];
    snprintf(line, sizeof line, "l2.bytes = %s", bad[i]);
    snprintf(want, sizeof want,
             "t.hw:15: bad size '%s' for 'l2.bytes' (expected bytes, e.g. 48K, 2M, 32MiB)",
             bad[i]);
    char *t = cpu_text(15, line, NULL);
    expect_error(t, want);
    free(t);
  }
}
END_TEST

/* ---- where figures come from ---- */

START_TEST(test_provenance) {
  const char *text =
      "# a header, in a paragraph of its own: it stands for no figure\n"
      "\n"
      "name = t\nkind = cpu\ndesc = a test core\n"
      "cores = 8\n"                                   /* no comment in its paragraph */
      "\n"
      "# From the vendor's datasheet.\n"
      "ghz = 3.5\n"
      "vector_bits = 256\n"                           /* the same block stands for it */
      "# Approximate, as the clock is.\n"
      "vec_regs = 16\n"                               /* the nearest block wins */
      "fma_units = 2   # measured with a loop of FMAs\n"   /* its own comment wins */
      "fma_latency = 4 #\n"                           /* an empty comment says nothing */
      "llvm_cpu = x86-64-v3\nllvm_features = +avx2,+fma\n"
      "\n"
      "# L1 sizes, measured with cpuid on the part;\n"
      "# the bandwidth is an ESTIMATE.\n"             /* any line of a block counts */
      "l1.bytes = 32K\nl1.line = 64\nl1.gbs = 200\n"
      "\n"
      "# L2: measured with a read loop.\n"
      "l2.bytes = 1M\nl2.line = 64\nl2.gbs = 100\n"
      "# Shared by 4 (manual).\n"
      "l3.bytes = 8M\nl3.line = 64\nl3.shared_by = 4\nl3.gbs = 50\n"
      "\n"
      "# Measured with STREAM.\n"
      "dram.gbs = 20\n"
      "dram.total_gbs = 60  # datasheet\n";
  HwModel m = parse_ok(text);
  ck_assert_int_eq(hw_prov(&m, "cores"), HW_UNSOURCED);
  ck_assert_int_eq(hw_prov(&m, "ghz"), HW_SOURCED);
  ck_assert_int_eq(hw_prov(&m, "vector_bits"), HW_SOURCED);
  ck_assert_int_eq(hw_prov(&m, "vec_regs"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "fma_units"), HW_MEASURED);
  ck_assert_int_eq(hw_prov(&m, "fma_latency"), HW_GUESSED);
  /* "approximate" or "estimate" anywhere in the block outweighs "measured" */
  ck_assert_int_eq(hw_prov(&m, "l1.bytes"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "l1.gbs"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "l2.bytes"), HW_MEASURED);
  ck_assert_int_eq(hw_prov(&m, "l2.gbs"), HW_MEASURED);
  ck_assert_int_eq(hw_prov(&m, "l3.shared_by"), HW_SOURCED);
  ck_assert_int_eq(hw_prov(&m, "l3.gbs"), HW_SOURCED);
  ck_assert_int_eq(hw_prov(&m, "dram.gbs"), HW_MEASURED);
  ck_assert_int_eq(hw_prov(&m, "dram.total_gbs"), HW_SOURCED);
  /* Derived: the weakest of what they come from; a shared cache's total is a default. */
  ck_assert_int_eq(hw_prov(&m, "peak_gflops_f32"), HW_UNSOURCED);        /* cores */
  ck_assert_int_eq(hw_prov(&m, "l1.shared_by"), HW_GUESSED);             /* as l1.bytes */
  ck_assert_int_eq(hw_prov(&m, "l2.total_gbs"), HW_UNSOURCED);           /* l2.gbs x cores */
  ck_assert_int_eq(hw_prov(&m, "l3.total_gbs"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "dram.line"), HW_SOURCED);                /* from L3 */
  ck_assert_int_eq(hw_prov(&m, "dram.bytes"), -1);                       /* not stated */
  /* Keys that are no figure of this model. */
  ck_assert_int_eq(hw_prov(&m, "name"), -1);
  ck_assert_int_eq(hw_prov(&m, "llvm_cpu"), -1);
  ck_assert_int_eq(hw_prov(&m, "sm_count"), -1);
  ck_assert_int_eq(hw_prov(&m, "hbm.gbs"), -1);
  ck_assert_int_eq(hw_prov(&m, "l9.gbs"), -1);
  ck_assert_int_eq(hw_prov(&m, "nonsense"), -1);

  Buf b = {0};
  hw_describe(&m, &b);
  ck_assert_msg(strstr(b.s, "  cpu:     8 cores [?] at 3.50 GHz [s], 256-bit vectors [s] (16 "
                            "registers [g]), 2 FMA units [m] of latency 4 [g]\n"), "%s", b.s);
  ck_assert_msg(strstr(b.s, "  peak:    896 GFLOP/s f32 [?]\n"), "%s", b.s);
  ck_assert_msg(strstr(b.s, "20 GB/s [m] per core, 60 GB/s [s] in all\n"), "%s", b.s);
  ck_assert_msg(strstr(b.s, "\n  tags:    [m] measured (on this machine, or as its file says), "
                            "[s] from a source its file cites, [g] guessed (approximate, or a "
                            "default), [?] no source given\n"), "%s", b.s);
  buf_free(&b);

  /* A stated peak has its own tag; a measured one replaces it. */
  char *t = cpu_text(0, NULL, "peak_gflops_f32 = 900  # approximate\n");
  m = parse_ok(t);
  free(t);
  ck_assert_int_eq(hw_prov(&m, "peak_gflops_f32"), HW_GUESSED);
  hw_set_measured_peak(&m, 123.4);
  ck_assert(near(m.peak_gflops_f32, 123.4, 1e-12));
  ck_assert_int_eq(hw_prov(&m, "peak_gflops_f32"), HW_MEASURED);
  hw_describe(&m, &b);
  ck_assert_msg(strstr(b.s, "  peak:    123 GFLOP/s f32 [m]\n"), "%s", b.s);
  buf_free(&b);

  /* GPU: cores follow the SM count's tag; a level's total is its bandwidth's. */
  b = (Buf){0};
  buf_printf(&b, "%s# estimated\nhbm.bytes = 80G\nhbm.gbs = 3000\n", GPU_TEXT);
  m = parse_ok(b.s);
  buf_free(&b);
  ck_assert_int_eq(hw_prov(&m, "sm_count"), HW_UNSOURCED);
  ck_assert_int_eq(hw_prov(&m, "cores"), -1);
  ck_assert_int_eq(m.prov[HW_F_CORES], HW_UNSOURCED);
  ck_assert_int_eq(hw_prov(&m, "hbm.gbs"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "hbm.total_gbs"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "l1.bytes"), -1);
}
END_TEST

/* ---- loading and the hw directory ---- */

START_TEST(test_load_unknown) {
  HwModel m;
  char err[1024];
  ck_assert(!hw_load("nosuch", &m, err, sizeof err));
  ck_assert_msg(!strncmp(err, "no hardware description 'nosuch' (known: a100, emeraldrapids, ",
                         62),
                "%s", err);
  /* Every required file is listed, in order. */
  const char *p = err;
  static const char *const names[] = {"a100", "emeraldrapids", "generic-avx2", "graniterapids",
                                      "h100", "h200", "icelake-server", "l4", "neoverse-n1",
                                      "neoverse-v2", "rtx4090", "sapphirerapids",
                                      "skylake-avx512", "zen3", "zen4", "zen5"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *q = strstr(p, names[i]);
    ck_assert_msg(q != NULL, "%s missing from: %s", names[i], err);
    p = q;
  }
  ck_assert(err[strlen(err) - 1] == ')');
  /* Odd names are not looked up as files. */
  ck_assert(!hw_load("../zen5", &m, err, sizeof err));   /* a path: relative to the cwd */
  ck_assert(!hw_load("", &m, err, sizeof err));
  ck_assert_msg(!strncmp(err, "no hardware description '' (known: ", 35), "%s", err);
  ck_assert(!hw_load("a b", &m, err, sizeof err));
  ck_assert_msg(!strncmp(err, "no hardware description 'a b' (known: ", 38), "%s", err);
  ck_assert(!hw_load("/nonexistent/x.hw", &m, err, sizeof err));
  ck_assert_str_eq(err, "cannot open /nonexistent/x.hw: No such file or directory");
}
END_TEST

START_TEST(test_load_path) {
  char dir[] = "/tmp/test_hw_XXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  char path[256], err[1024];
  snprintf(path, sizeof path, "%s/mine.hw", dir);
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  char *t = cpu_text(1, "name = mine", NULL);
  fputs(t, f);
  fclose(f);
  free(t);
  HwModel m;
  ck_assert_msg(hw_load(path, &m, err, sizeof err), "%s", err);
  ck_assert_str_eq(m.name, "mine");
  ck_assert_str_eq(m.path, path);

  /* By name through $DYN_HW_DIR, and errors carry the path and line. */
  const char *old = getenv("DYN_HW_DIR");
  char *saved = old ? xstrdup(old) : NULL;
  setenv("DYN_HW_DIR", dir, 1);
  ck_assert_str_eq(hw_dir(), dir);
  ck_assert_msg(hw_load("mine", &m, err, sizeof err), "%s", err);
  ck_assert_str_eq(m.path, path);
  ck_assert(!hw_load("zen5", &m, err, sizeof err));
  ck_assert_str_eq(err, "no hardware description 'zen5' (known: mine)");
  f = fopen(path, "w");
  t = cpu_text(9, "fma_latency = soon", NULL);
  fputs(t, f);
  fclose(f);
  free(t);
  ck_assert(!hw_load("mine", &m, err, sizeof err));
  char want[512];
  snprintf(want, sizeof want,
           "%s:9: bad number 'soon' for 'fma_latency' (expected a positive integer)", path);
  ck_assert_str_eq(err, want);
  remove(path);
  rmdir(dir);
  ck_assert(!hw_load("zen5", &m, err, sizeof err));
  ck_assert_msg(strstr(err, "cannot read the hardware directory") != NULL, "%s", err);

  /* Unset, the installed models (an installed dyn never reads the build tree), whether or
   * not they are installed yet. */
  unsetenv("DYN_HW_DIR");
  ck_assert_str_eq(hw_dir(), DYN_PKGDATADIR "/hw");
  if (!hw_load("zen5", &m, err, sizeof err))
    ck_assert_msg(strstr(err, "cannot read the hardware directory " DYN_PKGDATADIR "/hw") != NULL, "%s", err);
  else
    ck_assert_str_eq(m.path, DYN_PKGDATADIR "/hw/zen5.hw");
  if (saved) setenv("DYN_HW_DIR", saved, 1);
  free(saved);
}
END_TEST

/* ---- describing ---- */

START_TEST(test_describe) {
  HwModel m;
  Buf b = {0};
  load("zen5", &m);
  hw_describe(&m, &b);
  ck_assert_msg(!strncmp(b.s, "zen5: AMD Zen 5", 15), "%s", b.s);
  ck_assert_msg(strstr(b.s, "128 cores [s] at 2.70 GHz [s], 512-bit vectors [s] (32 registers "
                            "[s]), 2 FMA units [s] of latency 4 [s]") != NULL, "%s", b.s);
  ck_assert_msg(strstr(b.s, "22118 GFLOP/s f32 [s]\n") != NULL, "%s", b.s);
  ck_assert_msg(strstr(b.s, "L3       32 MiB [s]     per 8 cores     64 B lines  65 GB/s [m] "
                            "per core, 8320 GB/s [g] in all") != NULL, "%s", b.s);
  /* The legend names the tags that appear, and only those. */
  ck_assert_msg(strstr(b.s, "\n  tags:    [m] measured (on this machine, or as its file says), "
                            "[s] from a source its file cites, [g] guessed (approximate, or a "
                            "default)\n") != NULL, "%s", b.s);
  ck_assert_msg(strstr(b.s, "from:    ") && strstr(b.s, "zen5.hw"), "%s", b.s);
  buf_free(&b);
  load("h100", &m);
  hw_describe(&m, &b);
  ck_assert_msg(strstr(b.s, "132 SMs [s], compute capability 9.0 [s], 1.98 GHz [s]") != NULL,
                "%s", b.s);
  ck_assert_msg(strstr(b.s, "66.9 TFLOP/s f32 [s], 494.7 tf32 [s], 989.4 bf16 [s]") != NULL,
                "%s", b.s);
  ck_assert_msg(strstr(b.s, "228 KiB shared memory [s] (up to 227 KiB per block [s])") != NULL,
                "%s", b.s);
  ck_assert_msg(strstr(b.s, "HBM      80 GiB [s]") != NULL, "%s", b.s);
  ck_assert_msg(strstr(b.s, "L2       50 MiB [s]     per device     128 B lines  12390 GB/s [g]\n")
                != NULL, "%s", b.s);
  buf_free(&b);
  /* A model made without hw_parse has no tags and no legend. */
  memset(m.prov, 0, sizeof m.prov);
  for (int i = 0; i < m.nlevels; i++)
    m.level[i].prov_bytes = m.level[i].prov_gbs = m.level[i].prov_total = HW_NOT_TRACKED;
  hw_describe(&m, &b);
  ck_assert_msg(!strchr(b.s, '[') && !strstr(b.s, "tags:"), "%s", b.s);
  ck_assert_msg(strstr(b.s, "132 SMs, compute capability 9.0, 1.98 GHz, warps of 32\n"), "%s", b.s);
  buf_free(&b);
}
END_TEST

/* ---- host detection ---- */

START_TEST(test_detect_host) {
  HwModel m;
  hw_detect_host(&m);
  ck_assert_str_eq(m.name, "host");
  ck_assert_str_eq(m.kind, "cpu");
  ck_assert_str_eq(m.path, "");
  ck_assert_msg(!strncmp(m.source, "detected: ", 10), "%s", m.source);
  ck_assert_msg(strstr(m.desc, "detected") != NULL, "%s", m.desc);
  check_sane(&m);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  ck_assert_msg(m.cores <= online, "%d cores of %ld online", m.cores, online);
  ck_assert_int_eq(m.level[m.nlevels - 1].shared_by, m.cores);
  ck_assert_int_eq(hw_prov(&m, "cores"), HW_MEASURED);
  ck_assert_int_eq(hw_prov(&m, "vector_bits"), HW_MEASURED);
  check_sourced(&m);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) ck_assert_int_eq(m.vector_bits, 512);
  else if (__builtin_cpu_supports("avx")) ck_assert_int_eq(m.vector_bits, 256);
  ck_assert(!!strstr(m.llvm_features, "+avx2") == !!__builtin_cpu_supports("avx2"));
  ck_assert(!!strstr(m.llvm_features, "+fma") == !!__builtin_cpu_supports("fma"));
#endif
  /* hw_load("host") is detection. */
  HwModel h;
  char err[256];
  ck_assert(hw_load("host", &h, err, sizeof err));
  ck_assert_str_eq(h.name, "host");
  ck_assert_int_eq(h.cores, m.cores);
  Buf b = {0};
  hw_describe(&m, &b);
  ck_assert_msg(!strncmp(b.s, "host: ", 6) && strstr(b.s, "from:    detected: "), "%s", b.s);
  buf_free(&b);
  /* The private caches' bandwidths are the file's bytes a cycle at the clock timed here;
   * shared levels and memory keep the file's figures (at most the level above's). */
  const char *from = strrchr(m.source, ' '), *dot = from ? strstr(from, ".hw") : NULL;
  if (dot) {
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(dot - from - 1), from + 1);
    HwModel f;
    ck_assert_msg(hw_load(name, &f, err, sizeof err), "%s", err);
    double ratio = strstr(m.source, "clock timed") ? m.ghz / f.ghz : 1;
    ck_assert(!!strstr(m.source, "at the timed clock") == (ratio != 1));
    for (int i = 0; i + 1 < m.nlevels; i++)
      for (int j = 0; j + 1 < f.nlevels; j++)
        if (!strcmp(m.level[i].name, f.level[j].name)) {
          double want = m.level[i].shared_by <= 1 ? f.level[j].gbs * ratio : f.level[j].gbs;
          if (m.level[i].shared_by > 1 && i > 0 && want > m.level[i - 1].gbs) want = m.level[i - 1].gbs;
          ck_assert_msg(near(m.level[i].gbs, want, 1e-9), "%s: %g GB/s, want %g (%s at %g GHz)",
                        m.level[i].name, m.level[i].gbs, want, name, f.ghz);
        }
    ck_assert(near(m.level[m.nlevels - 1].gbs, f.level[f.nlevels - 1].gbs, 1e-9));
  }
}
END_TEST

/* With no hw directory at all, detection still succeeds, on figures that are those of
 * generic-avx2.hw (hw.c keeps a copy; this keeps the copy honest). */
START_TEST(test_detect_without_files) {
  HwModel gen, m;
  load("generic-avx2", &gen);
  const char *old = getenv("DYN_HW_DIR");
  char *saved = old ? xstrdup(old) : NULL;
  setenv("DYN_HW_DIR", "/nonexistent-hw-dir", 1);
  hw_detect_host_in("/nonexistent-root", &m);
  if (saved) setenv("DYN_HW_DIR", saved, 1);
  else unsetenv("DYN_HW_DIR");
  free(saved);
  check_sane(&m);
  ck_assert_msg(strstr(m.source, "built-in generic-avx2") != NULL, "%s", m.source);
  ck_assert_int_eq(m.fma_latency, gen.fma_latency);
  /* The copy has none of the file's sources, so its figures are guessed. */
  ck_assert_int_eq(hw_prov(&m, "fma_latency"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "dram.gbs"), HW_GUESSED);
  ck_assert_int_eq(hw_prov(&m, "cores"), HW_MEASURED);
  ck_assert(near(m.level[m.nlevels - 1].gbs, gen.level[gen.nlevels - 1].gbs, 1e-12));
  for (int i = 0; i < m.nlevels - 1; i++) {
    const HwLevel *g = level(&gen, m.level[i].name);
    if (g) ck_assert_msg(near(m.level[i].gbs, g->gbs, 1e-12), "%s", m.level[i].name);
  }
  /* The copy's FMA datapath (units x bits) is the file's, refolded to the host's width. */
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("fma"))
    ck_assert_int_eq(m.fma_units * m.vector_bits, gen.fma_units * gen.vector_bits);
#endif
  /* Where no cache was detected, the copy's caches are the file's. */
  if (strstr(m.source, "caches from the file")) {
    ck_assert_int_eq(m.nlevels, gen.nlevels);
    for (int i = 0; i < m.nlevels; i++) {
      ck_assert_str_eq(m.level[i].name, gen.level[i].name);
      ck_assert_int_eq(m.level[i].bytes, gen.level[i].bytes);
      ck_assert_int_eq(m.level[i].line, gen.level[i].line);
    }
    ck_assert_int_eq(m.level[2].shared_by, gen.level[2].shared_by);
  }
}
END_TEST

static void put(const char *root, const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s%s", root, rel);
  /* mkdir -p of the parent */
  for (char *p = path + strlen(root) + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(path, 0755);
      *p = '/';
    }
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "%s", path);
  fputs(text, f);
  fclose(f);
}

/* A fake /sys and /proc: cpu0 and cpu2 are SMT siblings, as are cpu1 and cpu3. */
START_TEST(test_detect_fake_sysfs) {
  char root[] = "/tmp/test_hw_root_XXXXXX";
  ck_assert(mkdtemp(root) != NULL);
  const char *c = "/sys/devices/system/cpu";
  char rel[256];
#define PUT(fmt, arg, text) (snprintf(rel, sizeof rel, fmt, c, arg), put(root, rel, text))
  PUT("%s/cpu%d/topology/thread_siblings_list", 0, "0,2\n");
  PUT("%s/cpu%d/topology/thread_siblings_list", 2, "0,2\n");
  PUT("%s/cpu%d/topology/thread_siblings_list", 1, "1,3\n");
  PUT("%s/cpu%d/topology/thread_siblings_list", 3, "1,3\n");
  static const char *const idx[][5] = {
    /* level, type, size, shared_cpu_list, line */
    {"1", "Data", "48K", "0,2", "64"},
    {"1", "Instruction", "32K", "0,2", "64"},
    {"2", "Unified", "1024K", "0,2", "64"},
    {"3", "Unified", "32768K", "0-3", "64"},
  };
  static const char *const files[] = {"level", "type", "size", "shared_cpu_list",
                                      "coherency_line_size"};
  for (int i = 0; i < 4; i++)
    for (int f = 0; f < 5; f++) {
      char sub[64], text[64];
      snprintf(sub, sizeof sub, "%d/%s", i, files[f]);
      snprintf(text, sizeof text, "%s\n", idx[i][f]);
      PUT("%s/cpu0/cache/index%s", sub, text);
    }
  put(root, "/proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake CPU\ncpu MHz\t\t: 3456.000\n\n"
                             "processor\t: 1\ncpu MHz\t\t: 1200.000\n");
#undef PUT
  HwModel m;
  hw_detect_host_in(root, &m);
  check_sane(&m);
  ck_assert(near(m.ghz, 3.456, 1e-12));
  ck_assert_int_eq(m.nlevels, 4);
  ck_assert_str_eq(m.level[0].name, "L1");
  ck_assert_int_eq(m.level[0].bytes, 48 << 10);
  ck_assert_int_eq(m.level[0].shared_by, 1);       /* two SMT threads, one core */
  ck_assert_int_eq(m.level[1].bytes, 1 << 20);
  ck_assert_int_eq(m.level[1].shared_by, 1);
  ck_assert_str_eq(m.level[2].name, "L3");
  ck_assert_int_eq(m.level[2].bytes, 32 << 20);
  ck_assert_int_eq(m.level[2].shared_by, 2);       /* four threads, two cores */
  ck_assert_int_eq(m.level[2].line, 64);
  ck_assert_msg(strstr(m.source, "caches from sysfs") != NULL, "%s", m.source);
  ck_assert_msg(strstr(m.source, "clock from /proc/cpuinfo") != NULL, "%s", m.source);
  ck_assert(near(m.peak_gflops_f32, m.cores * 3.456 * m.fma_units * 2 * (m.vector_bits / 32),
                 1e-12));
  /* Bandwidths come from the closest file, by level name. */
  char err[256];
  HwModel base;
  const char *closest = strstr(m.source, "from ");
  ck_assert(closest != NULL);
  closest = strrchr(m.source, ' ') + 1;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)(strlen(closest) - 3), closest);
  if (hw_load(name, &base, err, sizeof err)) {
    const HwLevel *l1 = level(&base, "L1");
    ck_assert(near(m.level[0].gbs, l1->gbs, 1e-12));
  }
  /* A broken cpuinfo clock falls back to the file's. */
  put(root, "/proc/cpuinfo", "cpu MHz : 0.000\n");
  HwModel z;
  hw_detect_host_in(root, &z);
  ck_assert_msg(strstr(z.source, "clock from the file") != NULL, "%s", z.source);
  ck_assert(z.ghz > 0.3);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The model detected from a fake tree whose /proc/cpuinfo is text, sane, and the file it
 * should start from. */
static void detect_text(const char *root, const char *text, const char *file, HwModel *m,
                        HwModel *f) {
  put(root, "/proc/cpuinfo", text);
  hw_detect_host_in(root, m);
  load(file, f);
  check_sane(m);
}

/* Fake x86 CPUs: a /proc/cpuinfo as Linux prints it on x86 (vendor, family and model in
 * decimal, flags) and caches in sysfs.  Detection must choose the file and the LLVM name by
 * vendor, family and model, and tag what it took from the machine as measured and the rest
 * as the file has it. */
#define AVX2_FLAGS "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 fma"
#define AVX512_FLAGS AVX2_FLAGS " avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni"
/* The caches of cpu0 in a fake sysfs, as a 2-core virtual machine shows them: a 48 KiB L1 and
 * a 2 MiB L2 per core, and an L3 of l3_size (sysfs's "16384K") shared by both cores. */
static void put_vm_caches(const char *root, const char *l3_size) {
  const char *const idx[][5] = {
    /* level, type, size, shared_cpu_list, line */
    {"1", "Data", "48K", "0", "64"},
    {"2", "Unified", "2048K", "0", "64"},
    {"3", "Unified", l3_size, "0-1", "64"},
  };
  static const char *const files[] = {"level", "type", "size", "shared_cpu_list",
                                      "coherency_line_size"};
  char rel[256], text[64];
  for (int i = 0; i < 3; i++)
    for (int f = 0; f < 5; f++) {
      snprintf(rel, sizeof rel, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, files[f]);
      snprintf(text, sizeof text, "%s\n", idx[i][f]);
      put(root, rel, text);
    }
}

/* A virtual machine's guest (x86's hypervisor flag) sees the whole chip's shared L3 as shared
 * by its own cores: 260 MiB for 2 cores of an Emerald Rapids.  The model counts on their
 * share at the file's capacity a core; the same caches on a machine that is no guest, and a
 * private L2, are taken as reported. */
START_TEST(test_detect_guest_share) {
  for (int guest = 0; guest <= 1; guest++) {
    char root[] = "/tmp/test_hw_vm_XXXXXX", text[1024];
    ck_assert(mkdtemp(root) != NULL);
    put_vm_caches(root, "266240K");
    snprintf(text, sizeof text,
             "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
             "model name\t: Fake Xeon\ncpu MHz\t\t: 2100.000\nflags\t\t: %s%s\n\n"
             "processor\t: 1\nvendor_id\t: GenuineIntel\n",
             AVX512_FLAGS " avx512_bf16 avx512_fp16", guest ? " hypervisor" : "");
    HwModel m, file;
    detect_text(root, text, "emeraldrapids", &m, &file);
    const HwLevel *l3 = level(&m, "L3"), *fl3 = level(&file, "L3"), *l2 = level(&m, "L2");
    ck_assert(l3 && fl3 && l2);
    ck_assert_int_eq(l2->bytes, 2 << 20);
    ck_assert_int_eq(hw_prov(&m, "l2.bytes"), HW_MEASURED);
    ck_assert_int_eq(l3->shared_by, 2);
    if (guest) {
      ck_assert_int_eq(l3->bytes, fl3->bytes / fl3->shared_by * 2);
      ck_assert_int_eq(hw_prov(&m, "l3.bytes"), hw_prov(&file, "l3.bytes"));
      ck_assert_msg(strstr(m.source, "(a virtual machine's share, L3: 10 MiB of the 260 MiB reported)"),
                    "%s", m.source);
    } else {
      ck_assert_int_eq(l3->bytes, (int64_t)266240 << 10);
      ck_assert_int_eq(hw_prov(&m, "l3.bytes"), HW_MEASURED);
      ck_assert_msg(!strstr(m.source, "virtual machine"), "%s", m.source);
    }
    ck_assert_msg(strstr(m.source, "from emeraldrapids.hw") != NULL, "%s", m.source);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
  }
}
END_TEST

START_TEST(test_detect_fake_cpus) {
  static const struct {
    const char *vendor;
    int family, model;
    const char *flags, *file, *llvm_cpu, *uarch;
    int bits;
  } cpus[] = {
    {"GenuineIntel", 6, 0x8f, AVX512_FLAGS " avx512_bf16 avx512_fp16", "sapphirerapids",
     "sapphirerapids", "Sapphire Rapids", 512},
    {"GenuineIntel", 6, 0xcf, AVX512_FLAGS " avx512_bf16 avx512_fp16", "emeraldrapids",
     "emeraldrapids", "Emerald Rapids", 512},
    {"GenuineIntel", 6, 0xad, AVX512_FLAGS " avx512_bf16 avx512_fp16", "graniterapids",
     "graniterapids", "Granite Rapids", 512},
    {"GenuineIntel", 6, 0x6a, AVX512_FLAGS, "icelake-server", "icelake-server", "Ice Lake-SP",
     512},
    {"GenuineIntel", 6, 0x55, AVX512_FLAGS, "skylake-avx512", "skylake-avx512",
     "Skylake-SP/Cascade Lake/Cooper Lake", 512},
    {"AuthenticAMD", 0x19, 0x01, AVX2_FLAGS, "zen3", "znver3", "Zen 3", 256},
    {"AuthenticAMD", 0x19, 0x21, AVX2_FLAGS, "zen3", "znver3", "Zen 3", 256},
    {"AuthenticAMD", 0x19, 0x11, AVX512_FLAGS " avx512_bf16", "zen4", "znver4", "Zen 4", 512},
    {"AuthenticAMD", 0x19, 0xa0, AVX512_FLAGS " avx512_bf16", "zen4", "znver4", "Zen 4", 512},
    {"AuthenticAMD", 0x1a, 0x02, AVX512_FLAGS " avx512_bf16", "zen5", "znver5", "Zen 5", 512},
    /* by ISA: an Intel model with AVX-512 that no row names, an AVX2-only Intel (Alder Lake) */
    {"GenuineIntel", 6, 0xfe, AVX512_FLAGS, "generic-avx2", "x86-64-v4", "x86-64 with AVX-512",
     512},
    {"GenuineIntel", 6, 0x97, AVX2_FLAGS, "generic-avx2", "x86-64-v3", "x86-64 with AVX2+FMA",
     256},
    /* a Zen 4 whose OS enables no AVX-512: Zen 4's file, an LLVM name without AVX-512 */
    {"AuthenticAMD", 0x19, 0x11, AVX2_FLAGS, "zen4", "x86-64-v3", "Zen 4 without AVX-512", 256},
  };
  for (size_t k = 0; k < sizeof cpus / sizeof cpus[0]; k++) {
    char root[] = "/tmp/test_hw_cpu_XXXXXX", text[1024];
    ck_assert(mkdtemp(root) != NULL);
    put_vm_caches(root, "16384K");
    snprintf(text, sizeof text,
             "processor\t: 0\nvendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\n"
             "model name\t: Fake %s\nstepping\t: 1\ncpu MHz\t\t: 2100.000\nflags\t\t: %s\n\n"
             "processor\t: 1\nvendor_id\t: %s\n", cpus[k].vendor, cpus[k].family,
             cpus[k].model, cpus[k].uarch, cpus[k].flags, cpus[k].vendor);
    HwModel m, file;
    detect_text(root, text, cpus[k].file, &m, &file);
    const char *what = cpus[k].uarch;
    check_sourced(&m);
    char want[256];
    snprintf(want, sizeof want, "from %s.hw", cpus[k].file);
    ck_assert_msg(strstr(m.source, want) != NULL, "%s: %s", what, m.source);
    snprintf(want, sizeof want, "family %Xh model %02Xh", cpus[k].family, cpus[k].model);
    ck_assert_msg(strstr(m.source, want) != NULL, "%s: %s", what, m.source);
    ck_assert_str_eq(m.llvm_cpu, cpus[k].llvm_cpu);
    snprintf(want, sizeof want, "Fake %s, %s, detected", what, what);
    ck_assert_str_eq(m.desc, want);
    ck_assert_int_eq(m.vector_bits, cpus[k].bits);
    ck_assert(!!strstr(m.llvm_features, "+avx512f") == (cpus[k].bits == 512));
    ck_assert(!!strstr(m.llvm_features, "+avx512fp16") == !!strstr(cpus[k].flags, "fp16"));
    /* the machine's figures */
    ck_assert(near(m.ghz, 2.1, 1e-12));
    ck_assert_int_eq(m.level[0].bytes, 48 << 10);
    ck_assert_int_eq(m.level[1].bytes, 2 << 20);
    ck_assert_int_eq(m.level[2].bytes, 16 << 20);
    static const char *const measured[] = {"cores", "ghz", "vector_bits", "vec_regs",
                                           "l1.bytes", "l1.line", "l2.bytes", "l3.bytes",
                                           "l3.shared_by", "dram.shared_by"};
    for (size_t i = 0; i < sizeof measured / sizeof measured[0]; i++)
      ck_assert_msg(hw_prov(&m, measured[i]) == HW_MEASURED, "%s: %s tagged %d", what,
                    measured[i], hw_prov(&m, measured[i]));
    /* the file's figures, with the file's tags */
    static const char *const fromfile[] = {"fma_latency", "l1.gbs", "l2.gbs", "l3.gbs",
                                           "dram.gbs"};
    for (size_t i = 0; i < sizeof fromfile / sizeof fromfile[0]; i++) {
      int want_tag = hw_prov(&file, fromfile[i]);
      ck_assert_msg(want_tag > HW_UNSOURCED && hw_prov(&m, fromfile[i]) == want_tag,
                    "%s: %s tagged %d, the file's %d", what, fromfile[i],
                    hw_prov(&m, fromfile[i]), want_tag);
    }
    ck_assert_int_eq(m.fma_latency, file.fma_latency);
    ck_assert(near(m.level[1].gbs, level(&file, "L2")->gbs, 1e-12));
    /* FMA pipes: the file's datapath at the host's width, with the file's tag */
    ck_assert_int_eq(m.fma_units * m.vector_bits, file.fma_units * file.vector_bits);
    ck_assert_int_eq(hw_prov(&m, "fma_units"), hw_prov(&file, "fma_units"));
    /* derived: the peak is as good as its weakest input; a shared L3's total is a default */
    int weakest = HW_MEASURED;
    if (hw_prov(&m, "fma_units") < weakest) weakest = hw_prov(&m, "fma_units");
    ck_assert_int_eq(hw_prov(&m, "peak_gflops_f32"), weakest);
    ck_assert_int_eq(hw_prov(&m, "l1.total_gbs"), hw_prov(&file, "l1.gbs"));
    ck_assert_int_eq(hw_prov(&m, "l3.total_gbs"), HW_GUESSED);

    /* Without a clock in cpuinfo, the file's, with its tag. */
    snprintf(text, sizeof text, "vendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\n"
             "flags\t\t: %s\n", cpus[k].vendor, cpus[k].family, cpus[k].model, cpus[k].flags);
    put(root, "/proc/cpuinfo", text);
    hw_detect_host_in(root, &m);
    ck_assert_str_eq(m.llvm_cpu, cpus[k].llvm_cpu);
    ck_assert(near(m.ghz, file.ghz, 1e-12));
    ck_assert_int_eq(hw_prov(&m, "ghz"), hw_prov(&file, "ghz"));

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
  }
}
END_TEST

/* Fake Arm64 CPUs: a /proc/cpuinfo as Linux prints it on Arm64 ("CPU implementer", "CPU
 * part", "Features"), read on whatever host runs the test, without executing Arm code.  The
 * MIDR part chooses the file and the LLVM name; "Features" the extensions.  Text that names
 * no Arm core (a malformed or missing field) is not taken for one. */
#define N1_FEATS "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid " \
                 "asimdrdm lrcpc dcpop asimddp ssbs"
START_TEST(test_detect_fake_arm) {
  static const struct {
    const char *impl, *part, *feats, *file, *llvm_cpu, *uarch, *ident;
    bool sve;
  } cpus[] = {
    {"0x41", "0xd4f", N1_FEATS " sve sve2 bf16 i8mm", "neoverse-v2", "neoverse-v2",
     "Neoverse V2", "implementer 41h part D4Fh", true},
    {"0x41", "0xd0c", N1_FEATS, "neoverse-n1", "neoverse-n1", "Neoverse N1",
     "implementer 41h part D0Ch", false},
    {"0x41", "0xd08", "fp asimd evtstrm crc32 cpuid", "neoverse-n1", "cortex-a72",
     "Cortex-A72", "implementer 41h part D08h", false},
    /* cores the table does not name: generic, the file by SVE */
    {"0x61", "0x022", "fp asimd", "neoverse-n1", "generic", "unnamed core 61h:022h",
     "implementer 61h part 022h", false},
    {"0x41", "0xfff", "fp asimd sve", "neoverse-v2", "generic", "unnamed core 41h:FFFh",
     "implementer 41h part FFFh", true},
    /* no Features line: NEON, which every Arm64 core has */
    {"65", "3340", NULL, "neoverse-n1", "neoverse-n1", "Neoverse N1",
     "implementer 41h part D0Ch", false},
  };
  for (size_t k = 0; k < sizeof cpus / sizeof cpus[0]; k++) {
    char root[] = "/tmp/test_hw_arm_XXXXXX", text[1024], want[256];
    ck_assert(mkdtemp(root) != NULL);
    int n = snprintf(text, sizeof text, "processor\t: 0\nBogoMIPS\t: 50.00\n");
    if (cpus[k].feats) n += snprintf(text + n, sizeof text - (size_t)n, "Features\t: %s\n",
                                     cpus[k].feats);
    snprintf(text + n, sizeof text - (size_t)n,
             "CPU implementer\t: %s\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: %s\n"
             "CPU revision\t: 1\n\nprocessor\t: 1\nCPU implementer\t: 0x42\nCPU part\t: 0x001\n",
             cpus[k].impl, cpus[k].part);
    HwModel m, file;
    detect_text(root, text, cpus[k].file, &m, &file);
    const char *what = cpus[k].uarch;
    snprintf(want, sizeof want, "from %s.hw", cpus[k].file);
    ck_assert_msg(strstr(m.source, want) != NULL, "%s: %s", what, m.source);
    ck_assert_msg(strstr(m.source, cpus[k].ident) != NULL, "%s: %s", what, m.source);
    ck_assert_str_eq(m.llvm_cpu, cpus[k].llvm_cpu);
    ck_assert_str_eq(m.arch, "aarch64");
    snprintf(want, sizeof want, "Arm64, %s, detected", what);
    ck_assert_str_eq(m.desc, want);
    ck_assert_int_eq(m.vector_bits, 128);
    ck_assert_int_eq(m.vec_regs, 32);
    ck_assert_msg(strstr(m.llvm_features, "+neon") != NULL, "%s: %s", what, m.llvm_features);
    ck_assert(!!strstr(m.llvm_features, "+sve") == cpus[k].sve);
    ck_assert(!!strstr(m.llvm_features, "+sve2") == !!strstr(cpus[k].feats ? cpus[k].feats : "",
                                                              "sve2"));
    /* the file's figures: FMA pipes at its width (both 128 bits), latency, bandwidths */
    ck_assert_int_eq(m.fma_units, file.fma_units);
    ck_assert_int_eq(m.fma_latency, file.fma_latency);
    ck_assert(near(level(&m, "L1")->gbs, level(&file, "L1")->gbs, 1e-12));
    ck_assert(m.ghz == file.ghz);                      /* no "cpu MHz" on Arm64 */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
  }
  /* Text that names no core: detection goes on as for a file without Arm fields (this
   * host's own way, for this build's ISA), takes no Arm identity from it, and nothing
   * crashes. */
  static const char *const bad[] = {
    "CPU implementer\t: zz\nCPU part\t: 0xd0c\n",
    "CPU implementer\t: 0x41\nCPU part\t: 0xd0c junk\n",
    "CPU implementer\t: 0x41\n",
    "CPU part\t: 0xd0c\n",
    "CPU implementer\t: 0x141\nCPU part\t: 0xd0c\n",
    "CPU implementer : 0x41\nCPU part : 0x10000\n",
    "CPU implementer\t:\nCPU part\t:\n",
    ":\n::\nCPU\n",
    "",
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char root[] = "/tmp/test_hw_arm_XXXXXX";
    ck_assert(mkdtemp(root) != NULL);
    put(root, "/proc/cpuinfo", bad[k]);
    HwModel m, own;
    hw_detect_host_in(root, &m);
    check_sane(&m);
    hw_detect_host_in("", &own);
    ck_assert_str_eq(m.arch, own.arch);
    ck_assert_msg(strstr(m.source, "implementer") == NULL, "%s: %s", bad[k], m.source);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
  }
}
END_TEST

static Suite *hw_suite(void) {
  Suite *s = suite_create("hw");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_all_files);
  tcase_add_test(tc, test_file_figures);
  tcase_add_test(tc, test_parse_valid);
  tcase_add_test(tc, test_parse_errors);
  tcase_add_test(tc, test_sizes);
  tcase_add_test(tc, test_provenance);
  tcase_add_test(tc, test_load_unknown);
  tcase_add_test(tc, test_load_path);
  tcase_add_test(tc, test_describe);
  tcase_add_test(tc, test_detect_host);
  tcase_add_test(tc, test_detect_without_files);
  tcase_add_test(tc, test_detect_fake_sysfs);
  tcase_add_test(tc, test_detect_fake_cpus);
  tcase_add_test(tc, test_detect_guest_share);
  tcase_add_test(tc, test_detect_fake_arm);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(hw_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
