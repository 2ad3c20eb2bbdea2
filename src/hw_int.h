/* hw_int.h -- what the two files of the hardware model share: hw.c reads hw/ files and makes
 * the host's model, hw_detect.c asks the machine (cpuid, /proc/cpuinfo, sysfs caches, usable
 * cores) and returns what it found, knowing nothing of models or files.  The figures' syntax
 * ("32K", a positive integer) is one for the files and for sysfs, so its parsers live here. */
#ifndef DYN_HW_INT_H
#define DYN_HW_INT_H

#include "dyn_int.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct { int level; int64_t bytes; int line, shared_by; } CacheInfo;

/* What detection decided about the CPU before any file is read. */
typedef struct {
  const char *closest;        /* the hw file whose unmeasurable figures we take */
  char uarch[64];             /* "Zen 5", "Sapphire Rapids", "x86-64 with AVX2+FMA" */
  char ident[48];             /* "family 19h model 01h" (x86), "" */
  char llvm_cpu[32], llvm_fallback[32];
  char features[256];
  int vector_bits, vec_regs;  /* 0: keep the file's */
  int fma_units;              /* 0: derive from the file's datapath width */
  char model[128];
  char arch[16];              /* "aarch64" for an Arm64 guess, else "": the build's own */
  bool cpuid;                 /* the identity is this machine's cpuid (its cache leaves apply) */
  bool guest;                 /* a virtual machine's guest (x86's hypervisor flag) */
} CpuGuess;

/* ---- the figures' syntax ---- */

/* Copy with truncation; always terminated. */
static inline void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src);
}

/* A positive decimal integer that fits an int, nothing else. */
static inline bool parse_int(const char *s, int *out) {
  if (!*s) return false;
  long long v = 0;
  for (const char *p = s; *p; p++) {
    if (!isdigit((unsigned char)*p)) return false;
    v = v * 10 + (*p - '0');
    if (v > INT_MAX) return false;
  }
  if (v <= 0) return false;
  *out = (int)v;
  return true;
}

/* A byte count: a number, optionally with a fraction, then an optional binary suffix
 * (K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB, any case; B alone is bytes).  Every suffix
 * is a power of 1024, because that is what vendors mean by a cache's "MB"; the result must
 * be a whole positive number of bytes ("1.375M" is, "1.3K" is not). */
static inline bool parse_size(const char *s, int64_t *out) {
  const char *p = s;
  int64_t ip = 0, frac = 0, den = 1;
  if (!isdigit((unsigned char)*p)) return false;
  for (; isdigit((unsigned char)*p); p++)
    if (__builtin_mul_overflow(ip, 10, &ip) || __builtin_add_overflow(ip, *p - '0', &ip))
      return false;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return false;
    for (; isdigit((unsigned char)*p); p++) {
      if (den >= 1000000000) return false;   /* more precision than any hardware figure */
      frac = frac * 10 + (*p - '0');
      den *= 10;
    }
  }
  while (*p == ' ') p++;
  static const char units[] = "kmgt";
  const char *u = *p ? strchr(units, tolower((unsigned char)*p)) : NULL;
  int shift = -1;
  if (!*p || !strcasecmp(p, "b")) shift = 0;
  else if (u && (!p[1] || !strcasecmp(p + 1, "b") || !strcasecmp(p + 1, "ib")))
    shift = 10 * (int)(u - units + 1);
  if (shift < 0) return false;
  int64_t mult = (int64_t)1 << shift, whole, part;
  if (__builtin_mul_overflow(ip, mult, &whole)) return false;
  if (__builtin_mul_overflow(frac, mult, &part) || part % den) return false;
  if (__builtin_add_overflow(whole, part / den, &whole) || whole <= 0) return false;
  *out = whole;
  return true;
}

/* ---- hw_detect.c: what the machine says of itself; root ("" for this machine) prefixes
 * every /proc and /sys path, so that tests stand a fake tree for any CPU ---- */

/* The CPU's identity and the closest hw file (cpuid on x86, "CPU part" on Arm64, a fake
 * tree's /proc/cpuinfo when it describes an x86 CPU). */
void detect_cpu(const char *root, CpuGuess *g);
/* The cores this process may run on (affinity, cgroup quota), whole cores, at least 1. */
int detect_cores(const char *root);
/* The clock in GHz from /proc/cpuinfo (0 if none) and its model name into model. */
double detect_ghz(const char *root, char *model, size_t modelcap);
/* Data caches by level 1..3 from sysfs, else (cpuid: the identity is this machine's) from
 * cpuid's cache leaves; the count of levels, with *src "sysfs", "cpuid", or NULL for none. */
int detect_caches(const char *root, bool cpuid, CacheInfo c[3], const char **src);

/* Each "key : value" line of root's /proc/cpuinfo to each(key, value, ctx), key "" for a line
 * without a colon, until each returns false; false without the file. */
bool cpuinfo_fields(const char *root, bool (*each)(const char *key, char *value, void *ctx),
                    void *ctx);

/* ---- hw_clock.c: the clock this thread's core runs at, timed on a dependent chain (GHz; 0
 * where the ISA has no chain known here) ---- */
double detect_clock_ghz(void);

/* ---- hw_arm.c: an Arm64 CPU's identity (MIDR from /proc/cpuinfo or the register) and the
 * vector extensions its kernel enables (hwcaps, or cpuinfo's "Features") ---- */
/* From root's /proc/cpuinfo alone, on any host; false when it names no Arm core. */
bool arm_guess_text(const char *root, CpuGuess *g);
#if defined(__aarch64__)
/* This Arm64 host: cpuinfo, else the MIDR_EL1 register; extensions from the hwcaps. */
void arm_guess(const char *root, CpuGuess *g);
#endif

#endif
