/* hw_arm.c -- what an Arm64 CPU says of itself, for hw_detect.c's detect_cpu: the core's
 * identity (MIDR: implementer and part) from /proc/cpuinfo's "CPU implementer" and "CPU part",
 * else, on an Arm64 host, from the MIDR_EL1 register that Linux lets user code read, and the
 * vector extensions from the kernel's hardware capabilities (getauxval), which say what the
 * OS enables.  An emulator (QEMU user mode) shows the host's /proc/cpuinfo, so the register is
 * its truth.  The text's reading is built on every host, so tests parse Arm cpuinfo anywhere. */
#include "config.h"
#include "hw_int.h"

#include <stdlib.h>

#if defined(__aarch64__)
#include <sys/auxv.h>

/* The kernel's hwcap bits (asm/hwcap.h), spelled out so that old headers do. */
#define ARM_HWCAP_ASIMD (1UL << 1)
#define ARM_HWCAP_CPUID (1UL << 11)
#define ARM_HWCAP_SVE (1UL << 22)
#define ARM_HWCAP2_SVE2 (1UL << 1)
#define ARM_HWCAP2_I8MM (1UL << 13)
#define ARM_HWCAP2_BF16 (1UL << 14)
#endif

/* Arm Ltd.'s cores that LLVM knows by name, by MIDR part number (Arm's technical reference
 * manuals, "Main ID Register"), with the closest hw file: neoverse-n1 for the NEON-only
 * cores, neoverse-v2 for those with SVE. */
static const struct {
  long part;
  const char *name, *llvm_cpu, *llvm_fallback, *file;
} ARM_PARTS[] = {
  {0xd03, "Cortex-A53", "cortex-a53", "generic", "neoverse-n1"},
  {0xd07, "Cortex-A57", "cortex-a57", "generic", "neoverse-n1"},
  {0xd08, "Cortex-A72", "cortex-a72", "generic", "neoverse-n1"},
  {0xd0b, "Cortex-A76", "cortex-a76", "cortex-a72", "neoverse-n1"},
  {0xd0c, "Neoverse N1", "neoverse-n1", "cortex-a76", "neoverse-n1"},
  {0xd40, "Neoverse V1", "neoverse-v1", "neoverse-n1", "neoverse-v2"},
  {0xd49, "Neoverse N2", "neoverse-n2", "neoverse-n1", "neoverse-v2"},
  {0xd4f, "Neoverse V2", "neoverse-v2", "neoverse-v1", "neoverse-v2"},
};

/* The vector extensions, as the kernel names them in cpuinfo's "Features" and as LLVM does. */
enum { ARM_NEON = 1, ARM_SVE = 2, ARM_SVE2 = 4, ARM_BF16 = 8, ARM_I8MM = 16 };
static const struct { unsigned bit; const char *linux_name, *llvm; } ARM_FEATS[] = {
  {ARM_NEON, "asimd", "+neon"}, {ARM_SVE, "sve", "+sve"}, {ARM_SVE2, "sve2", "+sve2"},
  {ARM_BF16, "bf16", "+bf16"}, {ARM_I8MM, "i8mm", "+i8mm"},
};

/* The first processor's "CPU implementer", "CPU part" and "Features" (-1, -1 and none where
 * absent; an x86 kernel's file has none of them). */
typedef struct { long impl, part; unsigned feats; bool any_feats; } ArmId;

static bool arm_field(const char *key, char *v, void *ctx) {
  ArmId *id = ctx;
  if (!key[0]) return id->impl < 0 && id->part < 0 && !id->any_feats;   /* first processor */
  long *midr = !strcmp(key, "CPU implementer") ? &id->impl : !strcmp(key, "CPU part") ? &id->part
                                                                                       : NULL;
  if (midr) {
    char *end;
    long x = strtol(v, &end, 0);
    if (end != v && !*end && x >= 0 && x <= (midr == &id->impl ? 0xff : 0xfff)) *midr = x;
  } else if (!strcmp(key, "Features")) {
    id->any_feats = true;
    for (char *t = strtok(v, " \t"); t; t = strtok(NULL, " \t"))
      for (size_t i = 0; i < sizeof ARM_FEATS / sizeof ARM_FEATS[0]; i++)
        if (!strcmp(t, ARM_FEATS[i].linux_name)) id->feats |= ARM_FEATS[i].bit;
  }
  return true;
}

static void cpuinfo_arm(const char *root, ArmId *id) {
  *id = (ArmId){-1, -1, 0, false};
  cpuinfo_fields(root, arm_field, id);
}

/* The guess from an identity (impl < 0: none) and the extensions the OS enables. */
static void guess_arm(long impl, long part, unsigned feats, CpuGuess *g) {
  g->closest = feats & ARM_SVE ? "neoverse-v2" : "neoverse-n1";
  copy_str(g->arch, sizeof g->arch, "aarch64");
  copy_str(g->llvm_cpu, 32, "generic");
  copy_str(g->llvm_fallback, 32, "generic");
  if (impl >= 0)
    snprintf(g->uarch, sizeof g->uarch, "unnamed core %02Xh:%03Xh", (unsigned)impl,
             (unsigned)part);
  else
    snprintf(g->uarch, sizeof g->uarch, "unnamed core");
  for (size_t i = 0; impl == 0x41 && i < sizeof ARM_PARTS / sizeof ARM_PARTS[0]; i++)
    if (ARM_PARTS[i].part == part) {
      copy_str(g->uarch, sizeof g->uarch, ARM_PARTS[i].name);
      copy_str(g->llvm_cpu, 32, ARM_PARTS[i].llvm_cpu);
      copy_str(g->llvm_fallback, 32, ARM_PARTS[i].llvm_fallback);
      g->closest = ARM_PARTS[i].file;
    }
  if (impl >= 0)
    snprintf(g->ident, sizeof g->ident, "implementer %02Xh part %03Xh", (unsigned)impl,
             (unsigned)part);
  /* The model line of an emulator's /proc/cpuinfo is its host's: name the ISA instead. */
  copy_str(g->model, sizeof g->model, "Arm64");
  /* Only what the kernel enables, which is also what jit.c checks a model against: "generic"
   * learns SVE here (QEMU's -cpu max, a core this table does not name). */
  Buf f = {0};
  buf_printf(&f, "+fp-armv8");
  for (size_t i = 0; i < sizeof ARM_FEATS / sizeof ARM_FEATS[0]; i++)
    if (feats & ARM_FEATS[i].bit) buf_printf(&f, ",%s", ARM_FEATS[i].llvm);
  copy_str(g->features, sizeof g->features, f.s);
  buf_free(&f);
  /* NEON's 128 bits: SVE's length differs from core to core and the code generator asks for
   * fixed-width vectors, which NEON runs on every Arm64 core. */
  g->vector_bits = 128;
  g->vec_regs = 32;
}

bool arm_guess_text(const char *root, CpuGuess *g) {
  ArmId id;
  cpuinfo_arm(root, &id);
  if (id.impl < 0 || id.part < 0) return false;
  guess_arm(id.impl, id.part, id.any_feats ? id.feats : ARM_NEON, g);
  return true;
}

#if defined(__aarch64__)
void arm_guess(const char *root, CpuGuess *g) {
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  ArmId id;
  cpuinfo_arm(root, &id);
  if ((id.impl < 0 || id.part < 0) && !root[0] && (hw & ARM_HWCAP_CPUID)) {
    unsigned long midr;
    __asm__ volatile("mrs %0, MIDR_EL1" : "=r"(midr));
    id.impl = (long)(midr >> 24 & 0xff);
    id.part = (long)(midr >> 4 & 0xfff);
  }
  if (id.impl < 0 || id.part < 0) id.impl = id.part = -1;
  unsigned feats = (hw & ARM_HWCAP_ASIMD ? ARM_NEON : 0) | (hw & ARM_HWCAP_SVE ? ARM_SVE : 0) |
                   (hw2 & ARM_HWCAP2_SVE2 ? ARM_SVE2 : 0) | (hw2 & ARM_HWCAP2_BF16 ? ARM_BF16 : 0) |
                   (hw2 & ARM_HWCAP2_I8MM ? ARM_I8MM : 0);
  guess_arm(id.impl, id.part, feats, g);
}
#endif
