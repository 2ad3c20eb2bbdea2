/* hw_arm.c -- what an Arm64 host says of itself, for hw_detect.c's detect_cpu: the core's
 * identity (MIDR: implementer and part) from /proc/cpuinfo's "CPU implementer" and "CPU part",
 * else from the MIDR_EL1 register that Linux lets user code read, and the vector extensions
 * from the kernel's hardware capabilities (getauxval), which say what the OS enables.  An
 * emulator (QEMU user mode) shows the host's /proc/cpuinfo, so the register is its truth. */
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

/* Arm Ltd.'s cores that LLVM knows by name, by MIDR part number (Arm's technical reference
 * manuals, "Main ID Register"). */
static const struct { long part; const char *name, *llvm_cpu, *llvm_fallback; } ARM_PARTS[] = {
  {0xd03, "Cortex-A53", "cortex-a53", "generic"},
  {0xd07, "Cortex-A57", "cortex-a57", "generic"},
  {0xd08, "Cortex-A72", "cortex-a72", "generic"},
  {0xd0b, "Cortex-A76", "cortex-a76", "cortex-a72"},
  {0xd0c, "Neoverse N1", "neoverse-n1", "cortex-a76"},
  {0xd40, "Neoverse V1", "neoverse-v1", "neoverse-n1"},
  {0xd49, "Neoverse N2", "neoverse-n2", "neoverse-n1"},
  {0xd4f, "Neoverse V2", "neoverse-v2", "neoverse-v1"},
};

/* "CPU implementer" and "CPU part" of the first core in /proc/cpuinfo; false if absent (not
 * an Arm kernel's file, or an emulator showing its host's). */
static bool cpuinfo_midr(const char *root, long *impl, long *part) {
  char path[512], line[256];
  snprintf(path, sizeof path, "%s/proc/cpuinfo", root);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  *impl = *part = -1;
  while (fgets(line, sizeof line, f) && (*impl < 0 || *part < 0)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    if (!strncmp(line, "CPU implementer", 15)) *impl = strtol(colon + 1, NULL, 0);
    if (!strncmp(line, "CPU part", 8)) *part = strtol(colon + 1, NULL, 0);
  }
  fclose(f);
  return *impl >= 0 && *part >= 0;
}

void arm_guess(const char *root, CpuGuess *g) {
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  long impl = -1, part = -1;
  if (!cpuinfo_midr(root, &impl, &part) && !root[0] && (hw & ARM_HWCAP_CPUID)) {
    unsigned long midr;
    __asm__ volatile("mrs %0, MIDR_EL1" : "=r"(midr));
    impl = (long)(midr >> 24 & 0xff);
    part = (long)(midr >> 4 & 0xfff);
  }
  g->closest = "neoverse-v2";
  copy_str(g->llvm_cpu, 32, "generic");
  copy_str(g->llvm_fallback, 32, "generic");
  if (impl >= 0)
    snprintf(g->uarch, sizeof g->uarch, "unnamed core %02lXh:%03lXh", impl, part);
  else
    snprintf(g->uarch, sizeof g->uarch, "unnamed core");
  for (size_t i = 0; impl == 0x41 && i < sizeof ARM_PARTS / sizeof ARM_PARTS[0]; i++)
    if (ARM_PARTS[i].part == part) {
      copy_str(g->uarch, sizeof g->uarch, ARM_PARTS[i].name);
      copy_str(g->llvm_cpu, 32, ARM_PARTS[i].llvm_cpu);
      copy_str(g->llvm_fallback, 32, ARM_PARTS[i].llvm_fallback);
    }
  if (impl >= 0)
    snprintf(g->ident, sizeof g->ident, "implementer %02lXh part %03lXh", impl, part);
  /* The model line of an emulator's /proc/cpuinfo is its host's: name the ISA instead. */
  copy_str(g->model, sizeof g->model, "Arm64");
  /* Only what the kernel enables, which is also what jit.c checks a model against: "generic"
   * learns SVE here (QEMU's -cpu max, a core this table does not name). */
  Buf f = {0};
  buf_printf(&f, "+fp-armv8%s", hw & ARM_HWCAP_ASIMD ? ",+neon" : "");
  if (hw & ARM_HWCAP_SVE) buf_printf(&f, ",+sve");
  if (hw2 & ARM_HWCAP2_SVE2) buf_printf(&f, ",+sve2");
  if (hw2 & ARM_HWCAP2_BF16) buf_printf(&f, ",+bf16");
  if (hw2 & ARM_HWCAP2_I8MM) buf_printf(&f, ",+i8mm");
  copy_str(g->features, sizeof g->features, f.s);
  buf_free(&f);
  /* NEON's 128 bits: SVE's length differs from core to core and the code generator asks for
   * fixed-width vectors, which NEON runs on every Arm64 core. */
  g->vector_bits = 128;
  g->vec_regs = 32;
}
#endif
