/* hw_detect.c -- host detection: what the machine says of itself.  cpuid (or a fake tree's
 * /proc/cpuinfo) names the CPU and the closest hw file, sysfs or cpuid the caches, the
 * affinity mask and the cgroup quota the usable cores, /proc/cpuinfo the clock.  It reads no
 * model: hw.c's hw_detect_host_in puts these findings over the closest file's figures. */
#include "config.h"
#include "hw_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HW_X86 1
#endif


/* Read a small /proc or /sys file under root into buf; false if absent. */
static bool read_small(const char *root, const char *path, char *buf, size_t cap) {
  char full[512];
  snprintf(full, sizeof full, "%s%s", root, path);
  FILE *f = fopen(full, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
  return n > 0;
}

/* A Linux CPU list ("0-3,8,10-11") into cpus[]; returns how many (at most max), -1 if bad. */
static int parse_cpu_list(const char *s, int *cpus, int max) {
  int n = 0;
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10), b;
    if (end == s || a < 0 || a > 1 << 20) return -1;
    b = a;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1 || b < a || b > 1 << 20) return -1;
      s = end;
    }
    for (long c = a; c <= b && n < max; c++) cpus[n++] = (int)c;
    if (*s == ',') s++;
    else if (*s && !isspace((unsigned char)*s)) return -1;
    else if (*s) break;
  }
  return n;
}

/* How many physical cores the given logical CPUs make: SMT siblings share an FMA pipe, so a
 * core counts once.  A CPU whose topology cannot be read counts as its own core. */
static int count_cores(const char *root, const int *cpus, int n) {
  int *rep = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  int nrep = 0;
  for (int i = 0; i < n; i++) {
    char path[128], buf[256];
    int r = cpus[i], sib[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             cpus[i]);
    if (read_small(root, path, buf, sizeof buf)) {
      int ns = parse_cpu_list(buf, sib, 64);
      for (int j = 0; j < ns; j++)
        if (sib[j] < r) r = sib[j];
    }
    bool dup = false;
    for (int j = 0; j < nrep && !dup; j++) dup = rep[j] == r;
    if (!dup) rep[nrep++] = r;
  }
  free(rep);
  return nrep;
}

/* The cores this process may run on: its affinity mask (a container or taskset may allow
 * fewer CPUs than are online), folded to physical cores. */
int detect_cores(const char *root) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1) online = 1;
  int *cpus = NULL, n = 0;
  for (int cap = 1024; cap <= 1 << 16 && !cpus; cap *= 4) {
    cpu_set_t *set = CPU_ALLOC(cap);
    size_t sz = CPU_ALLOC_SIZE(cap);
    if (!set) break;
    CPU_ZERO_S(sz, set);
    int r = sched_getaffinity(0, sz, set), e = errno;
    if (r == 0) {
      cpus = xmalloc(sizeof(int) * (size_t)cap);
      for (int c = 0; c < cap; c++)
        if (CPU_ISSET_S(c, sz, set)) cpus[n++] = c;
    }
    CPU_FREE(set);
    if (!cpus && e != EINVAL) break;   /* EINVAL: the mask is larger than cap; try wider */
  }
  int cores;
  if (cpus && n > 0) {
    cores = count_cores(root, cpus, n);
  } else {
    cores = (int)(online < INT_MAX ? online : INT_MAX);
  }
  free(cpus);
  return cores > 0 ? cores : 1;
}


/* Data and unified caches of cpu0 from sysfs, by level 1..3; returns how many levels. */
static int sysfs_caches(const char *root, CacheInfo c[3]) {
  int found = 0;
  memset(c, 0, 3 * sizeof *c);
  for (int i = 0; i < 16; i++) {
    char dir[96], path[160], buf[512];
    snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu0/cache/index%d", i);
    snprintf(path, sizeof path, "%s/level", dir);
    if (!read_small(root, path, buf, sizeof buf)) continue;
    int level = atoi(buf);
    if (level < 1 || level > 3) continue;
    snprintf(path, sizeof path, "%s/type", dir);
    if (!read_small(root, path, buf, sizeof buf) || !strcmp(buf, "Instruction")) continue;
    snprintf(path, sizeof path, "%s/size", dir);
    int64_t bytes;
    if (!read_small(root, path, buf, sizeof buf) || !parse_size(buf, &bytes)) continue;
    CacheInfo *ci = &c[level - 1];
    ci->level = level;
    ci->bytes = bytes;
    snprintf(path, sizeof path, "%s/coherency_line_size", dir);
    int line = 64;
    if (read_small(root, path, buf, sizeof buf) && parse_int(buf, &line) && !(line & (line - 1)))
      ci->line = line;
    else
      ci->line = 64;
    snprintf(path, sizeof path, "%s/shared_cpu_list", dir);
    ci->shared_by = 1;
    if (read_small(root, path, buf, sizeof buf)) {
      int cpus[4096];
      int n = parse_cpu_list(buf, cpus, 4096);
      if (n > 0) ci->shared_by = count_cores(root, cpus, n);
    }
  }
  for (int l = 0; l < 3; l++)
    if (c[l].level) found = l + 1;
  return c[0].level && c[1].level ? found : 0;
}

/* The "key : value" lines of root's /proc/cpuinfo, in order, to each(key, value, ctx), both
 * without their surrounding blanks; a line without a colon (the blank line that ends a
 * processor's lines) comes as key "".  Stops when each returns false; false if there is no
 * file.  Lines longer than the buffer (a flags line of thousands of features) go in pieces,
 * the later ones without a colon in them.  One reader for x86's, Arm's and the clock's
 * fields. */
bool cpuinfo_fields(const char *root, bool (*each)(const char *key, char *value, void *ctx),
                    void *ctx) {
  char path[512], line[4096];
  snprintf(path, sizeof path, "%s/proc/cpuinfo", root);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':'), *v = colon ? colon + 1 : line + strlen(line);
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = 0;
    size_t kl = colon ? (size_t)(colon - line) : 0;
    while (kl && (line[kl - 1] == ' ' || line[kl - 1] == '\t')) kl--;
    line[kl] = 0;
    if (!each(line, v, ctx)) break;
  }
  fclose(f);
  return true;
}

/* What an x86 CPU says of itself: vendor, family and model (cpuid's display family and
 * model, extended fields folded in) and the features the OS lets us use.  Read from cpuid,
 * or from a fake tree's /proc/cpuinfo (cpuinfo_x86) so tests can stand for any CPU. */
typedef struct {
  char vendor[13], brand[49];
  int family, model;
  bool avx, avx2, fma, f16c, bmi, bmi2, avx512f, avx512dq, avx512cd, avx512bw, avx512vl,
      avx512vnni, avx512bf16, avx512fp16, topoext;
  bool hypervisor;          /* a virtual machine's guest (cpuid 1, ecx bit 31) */
} X86Id;

/* The identity of the first processor in root's /proc/cpuinfo, as Linux prints it on x86
 * ("vendor_id", "cpu family", "model", "model name", "flags"); false without a vendor, a
 * family and flags.  Linux lists only the features the OS has enabled, as XGETBV would tell. */
typedef struct { X86Id *id; bool fam, flags; } X86Read;

static bool x86_field(const char *key, char *v, void *ctx) {
  X86Read *r = ctx;
  X86Id *id = r->id;
  if (!key[0]) return !(r->fam || r->flags);     /* the blank line after the first processor */
  if (!strcmp(key, "vendor_id")) {
    copy_str(id->vendor, sizeof id->vendor, v);
  } else if (!strcmp(key, "cpu family")) {
    id->family = atoi(v);
    r->fam = true;
  } else if (!strcmp(key, "model")) {
    id->model = atoi(v);
  } else if (!strcmp(key, "model name")) {
    copy_str(id->brand, sizeof id->brand, v);
  } else if (!strcmp(key, "flags")) {
    r->flags = true;
    struct { const char *flag; bool *on; } map[] = {
      {"avx", &id->avx}, {"avx2", &id->avx2}, {"fma", &id->fma}, {"f16c", &id->f16c},
      {"bmi1", &id->bmi}, {"bmi2", &id->bmi2}, {"avx512f", &id->avx512f},
      {"avx512dq", &id->avx512dq}, {"avx512cd", &id->avx512cd}, {"avx512bw", &id->avx512bw},
      {"avx512vl", &id->avx512vl}, {"avx512_vnni", &id->avx512vnni},
      {"avx512_bf16", &id->avx512bf16}, {"avx512_fp16", &id->avx512fp16},
      {"topoext", &id->topoext}, {"hypervisor", &id->hypervisor},
    };
    for (char *t = strtok(v, " \t"); t; t = strtok(NULL, " \t"))
      for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(t, map[i].flag)) *map[i].on = true;
  }
  return true;
}

static bool cpuinfo_x86(const char *root, X86Id *id) {
  memset(id, 0, sizeof *id);
  X86Read r = {id, false, false};
  return cpuinfo_fields(root, x86_field, &r) && id->vendor[0] && r.fam && r.flags;
}

#ifdef HW_X86
static void x86_identify(X86Id *id) {
  unsigned a = 0, b = 0, c = 0, d = 0, maxleaf = 0, maxext = 0;
  memset(id, 0, sizeof *id);
  if (!__get_cpuid(0, &maxleaf, &b, &c, &d)) return;
  memcpy(id->vendor, &b, 4);
  memcpy(id->vendor + 4, &d, 4);
  memcpy(id->vendor + 8, &c, 4);
  __get_cpuid(1, &a, &b, &c, &d);
  int base = (a >> 8) & 0xf, ext = (a >> 20) & 0xff;
  id->family = base == 0xf ? base + ext : base;
  id->model = (int)((a >> 4) & 0xf);
  if (base == 0x6 || base == 0xf) id->model |= (int)((a >> 12) & 0xf0);
  bool osxsave = (c >> 27) & 1, cpu_avx = (c >> 28) & 1;
  id->hypervisor = (c >> 31) & 1;
  id->fma = (c >> 12) & 1;
  id->f16c = (c >> 29) & 1;
  /* The CPU may have AVX and AVX-512 while the OS does not save their registers; XCR0 says
   * which register states the OS manages (bits 1-2: XMM/YMM; 5-7: opmask and ZMM). */
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = ((unsigned long long)hi << 32) | lo;
  }
  bool os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xe6) == 0xe6;
  id->avx = cpu_avx && os_avx;
  if (!id->avx) id->fma = id->f16c = false;
  if (maxleaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    id->bmi = (b >> 3) & 1;
    id->bmi2 = (b >> 8) & 1;
    id->avx2 = id->avx && ((b >> 5) & 1);
    if (id->avx && os_avx512) {
      id->avx512f = (b >> 16) & 1;
      id->avx512dq = id->avx512f && ((b >> 17) & 1);
      id->avx512cd = id->avx512f && ((b >> 28) & 1);
      id->avx512bw = id->avx512f && ((b >> 30) & 1);
      id->avx512vl = id->avx512f && ((b >> 31) & 1);
      id->avx512vnni = id->avx512f && ((c >> 11) & 1);
      id->avx512fp16 = id->avx512f && ((d >> 23) & 1);
      __cpuid_count(7, 1, a, b, c, d);
      id->avx512bf16 = id->avx512f && ((a >> 5) & 1);
    }
  }
  __get_cpuid(0x80000000, &maxext, &b, &c, &d);
  if (maxext >= 0x80000001) {
    __get_cpuid(0x80000001, &a, &b, &c, &d);
    id->topoext = (c >> 22) & 1;
  }
  if (maxext >= 0x80000004) {
    unsigned r[12];
    for (unsigned i = 0; i < 3; i++)
      __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    memcpy(id->brand, r, 48);
    id->brand[48] = 0;
    /* Brand strings are padded with spaces at either end. */
    char *p = id->brand;
    while (*p == ' ') p++;
    memmove(id->brand, p, strlen(p) + 1);
    size_t n = strlen(id->brand);
    while (n && id->brand[n - 1] == ' ') id->brand[--n] = 0;
  }
}

/* Caches from cpuid's deterministic cache leaves (Intel leaf 4, AMD 0x8000001D), for when
 * sysfs has none (some containers and VMs).  Sharing counts logical processors, so it is
 * divided by the threads per core. */
static int cpuid_caches(const X86Id *id, CacheInfo c[3]) {
  unsigned leaf = !strcmp(id->vendor, "GenuineIntel") ? 4
                  : id->topoext ? 0x8000001d : 0;
  memset(c, 0, 3 * sizeof *c);
  if (!leaf) return 0;
  unsigned a = 0, b = 0, cc = 0, d = 0, max = 0;
  __get_cpuid(leaf & 0x80000000, &max, &b, &cc, &d);
  if (max < leaf) return 0;
  int l1share = 0;
  for (unsigned i = 0; i < 16; i++) {
    __cpuid_count(leaf, i, a, b, cc, d);
    unsigned type = a & 31, level = (a >> 5) & 7;
    if (!type) break;
    if (type == 2 || level < 1 || level > 3) continue;
    int64_t line = (b & 0xfff) + 1, parts = ((b >> 12) & 0x3ff) + 1, ways = ((b >> 22) & 0x3ff) + 1,
            sets = (int64_t)cc + 1;
    CacheInfo *ci = &c[level - 1];
    ci->level = (int)level;
    ci->bytes = line * parts * ways * sets;
    ci->line = line <= 4096 && !(line & (line - 1)) ? (int)line : 64;
    ci->shared_by = (int)((a >> 14) & 0xfff) + 1;
    if (level == 1) l1share = ci->shared_by;
  }
  if (!c[0].level || !c[1].level) return 0;
  /* The L1 data cache is private to a core, so its sharing count is the SMT width. */
  int smt = l1share > 0 ? l1share : 1, n = 0;
  for (int l = 0; l < 3; l++)
    if (c[l].level) {
      c[l].shared_by = c[l].shared_by / smt > 0 ? c[l].shared_by / smt : 1;
      n = l + 1;
    }
  return n;
}
#endif

/* The highest "cpu MHz" in /proc/cpuinfo (the core running us is awake; idle ones may report
 * a low clock), or 0. */
typedef struct { double best; char *model; size_t cap; } GhzRead;

static bool ghz_field(const char *key, char *v, void *ctx) {
  GhzRead *r = ctx;
  if (!strcmp(key, "cpu MHz")) {
    double mhz = strtod(v, NULL);
    if (mhz > r->best) r->best = mhz;
  } else if (r->model && !r->model[0] && !strcmp(key, "model name")) {
    snprintf(r->model, r->cap, "%s", v);
  }
  return true;
}

double detect_ghz(const char *root, char *model, size_t modelcap) {
  GhzRead r = {0, model, modelcap};
  cpuinfo_fields(root, ghz_field, &r);
  /* Outside this range it is not a clock a core runs at (a VM may report 0 or nonsense). */
  return r.best >= 400 && r.best <= 8000 ? r.best / 1000.0 : 0;
}

/* The x86 CPUs that have a closer file than their ISA's, or an LLVM name of their own: one
 * row per core, with its vendor, family range and model ranges (the first row that matches
 * wins).  Intel's family 6 model numbers are those of Linux's
 * arch/x86/include/asm/intel-family.h; AMD's model ranges per family are the Zen generations
 * of Linux's arch/x86/kernel/cpu/amd.c (bsp_init_amd).  `isa` is what llvm_cpu implies: on a
 * host whose OS enables less (no AVX-512 state in a VM, say), the row's file still describes
 * the core but llvm_cpu is the ISA level's name.  Client cores with AVX-512 (Cannon Lake to
 * Rocket Lake) have one 512-bit FMA unit, which the generic file's two 256-bit pipes
 * describe once folded to 512-bit width. */
typedef enum { ISA_X86_64, ISA_AVX, ISA_V3, ISA_V4 } IsaLevel;
typedef struct {
  const char *vendor;              /* "GenuineIntel", "AuthenticAMD" (HygonGenuine counts) */
  int family_lo, family_hi;
  const char *models;              /* hex model ranges, "30-4f 60-7f", or one model, "55" */
  IsaLevel isa;
  const char *file, *llvm_cpu, *llvm_fallback, *uarch;
} CpuRow;

#define INTEL "GenuineIntel", 6, 6
#define AMD "AuthenticAMD"
static const CpuRow CPU_ROWS[] = {
  {INTEL, "55", ISA_V4, "skylake-avx512", "skylake-avx512", "skylake-avx512", "Skylake-SP/Cascade Lake/Cooper Lake"},
  {INTEL, "6a", ISA_V4, "icelake-server", "icelake-server", "skylake-avx512", "Ice Lake-SP"},
  {INTEL, "6c", ISA_V4, "icelake-server", "icelake-server", "skylake-avx512", "Ice Lake-D"},
  {INTEL, "8f", ISA_V4, "sapphirerapids", "sapphirerapids", "icelake-server", "Sapphire Rapids"},
  {INTEL, "cf", ISA_V4, "emeraldrapids", "emeraldrapids", "sapphirerapids", "Emerald Rapids"},
  {INTEL, "ad", ISA_V4, "graniterapids", "graniterapids", "sapphirerapids", "Granite Rapids"},
  {INTEL, "ae", ISA_V4, "graniterapids", "graniterapids-d", "sapphirerapids", "Granite Rapids-D"},
  {INTEL, "66", ISA_V4, "generic-avx2", "cannonlake", "skylake-avx512", "Cannon Lake"},
  {INTEL, "7d-7e", ISA_V4, "generic-avx2", "icelake-client", "skylake-avx512", "Ice Lake (client)"},
  {INTEL, "8c-8d", ISA_V4, "generic-avx2", "tigerlake", "icelake-client", "Tiger Lake"},
  {INTEL, "a7", ISA_V4, "generic-avx2", "rocketlake", "icelake-client", "Rocket Lake"},
  {AMD, 0x17, 0x17, "00-2f 50-5f", ISA_V3, "generic-avx2", "znver1", "generic", "Zen or Zen+"},
  {AMD, 0x17, 0x17, "30-4f 60-7f 90-91 a0-af", ISA_V3, "generic-avx2", "znver2", "znver1", "Zen 2"},
  {AMD, 0x18, 0x18, "00-ff", ISA_V3, "generic-avx2", "znver1", "generic", "Hygon Dhyana (Zen)"},
  {AMD, 0x19, 0x19, "00-0f 20-5f", ISA_V3, "zen3", "znver3", "znver2", "Zen 3"},
  {AMD, 0x19, 0x19, "10-1f 60-af", ISA_V4, "zen4", "znver4", "znver3", "Zen 4"},
  {AMD, 0x1a, 0x1a, "00-2f 40-4f 70-7f", ISA_V4, "zen5", "znver5", "znver3", "Zen 5"},
  {AMD, 0x1a, 0xff, "00-ff", ISA_V4, "zen5", "znver5", "znver3", "Zen 5 or later"},
};
#undef INTEL
#undef AMD

/* Whether model is in a row's ranges ("30-4f 60-7f", "55"). */
static bool model_in(const char *ranges, unsigned model) {
  for (const char *c = ranges; *c;) {
    char *end;
    unsigned long lo = strtoul(c, &end, 16), hi = lo;
    if (*end == '-') hi = strtoul(end + 1, &end, 16);
    if (model >= lo && model <= hi) return true;
    c = end + strspn(end, " ");
  }
  return false;
}

/* Every other x86 CPU, by the ISA its OS enables: LLVM's x86-64 levels (v2 stands for AVX
 * without AVX2, as the generic file's widths need), all with the generic file. */
static const struct { IsaLevel isa; const char *llvm_cpu, *uarch, *what; } ISA_ROWS[] = {
  {ISA_X86_64, "x86-64", "x86-64 without AVX", "SSE2"},
  {ISA_AVX, "x86-64-v2", "x86-64 without AVX2", "AVX"},
  {ISA_V3, "x86-64-v3", "x86-64 with AVX2+FMA", "AVX2"},
  {ISA_V4, "x86-64-v4", "x86-64 with AVX-512", "AVX-512"},
};


static void guess_x86(const X86Id *id, CpuGuess *g) {
  bool v3 = id->avx2 && id->fma, v4 = v3 && id->avx512f && id->avx512bw && id->avx512dq &&
                                      id->avx512vl && id->avx512cd;
  IsaLevel isa = v4 ? ISA_V4 : v3 ? ISA_V3 : id->avx ? ISA_AVX : ISA_X86_64;
  const char *vendor = !strcmp(id->vendor, "HygonGenuine") ? "AuthenticAMD" : id->vendor;
  copy_str(g->model, sizeof g->model, id->brand);
  g->guest = id->hypervisor;
  snprintf(g->ident, sizeof g->ident, "%s family %Xh model %02Xh",
           !strcmp(vendor, "GenuineIntel") ? "Intel" : !strcmp(vendor, "AuthenticAMD") ? "AMD"
                                                                                      : "x86",
           (unsigned)id->family, (unsigned)id->model);
  g->closest = "generic-avx2";
  copy_str(g->llvm_cpu, 32, ISA_ROWS[isa].llvm_cpu);
  copy_str(g->llvm_fallback, 32, "generic");
  copy_str(g->uarch, sizeof g->uarch, ISA_ROWS[isa].uarch);
  for (size_t i = 0; i < sizeof CPU_ROWS / sizeof CPU_ROWS[0]; i++) {
    const CpuRow *r = &CPU_ROWS[i];
    if (strcmp(vendor, r->vendor) || id->family < r->family_lo || id->family > r->family_hi ||
        !model_in(r->models, (unsigned)id->model))
      continue;
    g->closest = r->file;
    if (isa >= r->isa) {
      copy_str(g->llvm_cpu, 32, r->llvm_cpu);
      copy_str(g->llvm_fallback, 32, r->llvm_fallback);
      copy_str(g->uarch, sizeof g->uarch, r->uarch);
    } else {
      snprintf(g->uarch, sizeof g->uarch, "%s without %s", r->uarch, ISA_ROWS[r->isa].what);
    }
    break;
  }
  Buf f = {0};
  struct { bool on; const char *name; } feats[] = {
    {id->avx, "+avx"}, {id->avx2, "+avx2"}, {id->fma, "+fma"}, {id->f16c, "+f16c"},
    {id->bmi, "+bmi"}, {id->bmi2, "+bmi2"}, {id->avx512f, "+avx512f"},
    {id->avx512dq, "+avx512dq"}, {id->avx512cd, "+avx512cd"}, {id->avx512bw, "+avx512bw"},
    {id->avx512vl, "+avx512vl"}, {id->avx512vnni, "+avx512vnni"},
    {id->avx512bf16, "+avx512bf16"}, {id->avx512fp16, "+avx512fp16"},
  };
  for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
    if (feats[i].on) buf_printf(&f, "%s%s", f.len ? "," : "", feats[i].name);
  copy_str(g->features, sizeof g->features, f.s ? f.s : "");
  buf_free(&f);
  g->vector_bits = v4 ? 512 : id->avx ? 256 : 128;
  g->vec_regs = v4 ? 32 : 16;
  /* Without FMA, x86 cores have one multiply and one add pipe: the peak of one FMA unit. */
  g->fma_units = id->fma ? 0 : 1;
}

/* The CPU: a fake tree's /proc/cpuinfo when it describes an x86 or an Arm64 CPU (tests, on
 * any host), else what this machine tells (cpuid on x86, hw_arm.c on Arm64). */
void detect_cpu(const char *root, CpuGuess *g) {
  memset(g, 0, sizeof *g);
  X86Id id;
  if (root[0] && cpuinfo_x86(root, &id)) {
    guess_x86(&id, g);
    return;
  }
  if (root[0] && arm_guess_text(root, g)) return;
#ifdef HW_X86
  x86_identify(&id);
  guess_x86(&id, g);
  g->cpuid = true;
  g->guest = g->guest && !root[0];      /* a fake tree's machine is no guest of this one's host */
#elif defined(__aarch64__)
  arm_guess(root, g);
#else
  g->closest = "generic-avx2";
  copy_str(g->uarch, sizeof g->uarch, "unidentified architecture");
  copy_str(g->llvm_cpu, 32, "generic");
  copy_str(g->llvm_fallback, 32, "generic");
  g->vector_bits = 128;
  g->vec_regs = 16;
#endif
}

int detect_caches(const char *root, bool cpuid, CacheInfo c[3], const char **src) {
  *src = "sysfs";
  int n = sysfs_caches(root, c);
#ifdef HW_X86
  if (!n && cpuid) {
    X86Id id;
    x86_identify(&id);
    n = cpuid_caches(&id, c);
    *src = "cpuid";
  }
#endif
  if (!n) *src = NULL;
  return n;
}
