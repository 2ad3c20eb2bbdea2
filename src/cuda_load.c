/* cuda_load.c -- the first step of the GPU back end: opens the CUDA driver (libcuda.so.1) and
 * NVRTC with dlopen, once per process, and fills the tables of entry points that cuda.def
 * lists, so that building needs no CUDA toolkit and a machine without a GPU still renders
 * and tests.  Test hooks: $DYN_NVRTC and $DYN_CUDA_DRIVER name the libraries to open
 * (tests/cuda/fakecuda.cc runs the generated code on the CPU through them). */
#include "config.h"
#include "cuda_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct Entry { const char *sym; size_t off; } Entry;

static const Entry DRV_ENTRIES[] = {
#define DRV(ret, name, sym, args) {sym, offsetof(Drv, name)},
#define RTC(ret, name, sym, args)
#include "cuda.def"
#undef DRV
#undef RTC
};

static const Entry RTC_ENTRIES[] = {
#define DRV(ret, name, sym, args)
#define RTC(ret, name, sym, args) {sym, offsetof(Rtc, name)},
#include "cuda.def"
#undef DRV
#undef RTC
};

/* A library opened once per process: its handle and its table never change afterwards. */
typedef struct Lib {
  pthread_once_t once;
  bool ok;
  void *handle;
  char path[512];
  char why[1024];
} Lib;

static Lib drv_lib = {PTHREAD_ONCE_INIT, false, NULL, "", ""};
static Lib rtc_lib = {PTHREAD_ONCE_INIT, false, NULL, "", ""};
Drv cuload_drv;
Rtc cuload_rtc;

/* dlsym every row of a table; a versioned name falls back to the plain one and back. */
static bool bind_table(void *h, const Entry *e, size_t n, void *table, const char *lib, char *why, size_t wl) {
  for (size_t i = 0; i < n; i++) {
    void *f = dlsym(h, e[i].sym);
    if (!f) {
      char alt[96];
      const char *v2 = strstr(e[i].sym, "_v2");
      if (v2) snprintf(alt, sizeof alt, "%.*s", (int)(v2 - e[i].sym), e[i].sym);
      else snprintf(alt, sizeof alt, "%s_v2", e[i].sym);
      f = dlsym(h, alt);
    }
    if (!f) {
      snprintf(why, wl, "%s lacks %s (too old?)", lib, e[i].sym);
      return false;
    }
    memcpy((char *)table + e[i].off, &f, sizeof f);
  }
  return true;
}

static void load_driver(void) {
  const char *env = getenv("DYN_CUDA_DRIVER");
  const char *name = env && *env ? env : "libcuda.so.1";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (env && *env) {
      /* dlerror() starts with the path already: say it once */
      const char *msg = dlerror();
      size_t n = strlen(env);
      if (msg && !strncmp(msg, env, n) && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
      snprintf(drv_lib.why, sizeof drv_lib.why, "no NVIDIA driver (DYN_CUDA_DRIVER=%s: %s)", env, msg ? msg : "cannot be opened");
    } else snprintf(drv_lib.why, sizeof drv_lib.why, "no NVIDIA driver (libcuda.so.1 not found)");
    return;
  }
  if (!bind_table(h, DRV_ENTRIES, sizeof DRV_ENTRIES / sizeof *DRV_ENTRIES, &cuload_drv, name, drv_lib.why, sizeof drv_lib.why)) {
    dlclose(h);
    return;
  }
  drv_lib.handle = h;
  snprintf(drv_lib.path, sizeof drv_lib.path, "%s", name);
  drv_lib.ok = true;
}

static void *try_open(const char *path, char *tried, size_t tl) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h && tried && strlen(tried) + strlen(path) + 3 < tl) {
    if (*tried) strcat(tried, ", ");
    strcat(tried, path);
  }
  return h;
}

/* NVRTC: $DYN_NVRTC, the loader's search path, then the toolkit's lib64 under $CUDA_HOME,
 * $CUDA_PATH or the default install prefix /usr/local/cuda. */
static void load_nvrtc(void) {
  static const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"};
  char tried[400] = "";
  void *h = NULL;
  char used[512] = "";
  const char *env = getenv("DYN_NVRTC");
  if (env && *env) {
    h = try_open(env, tried, sizeof tried);
    if (h) snprintf(used, sizeof used, "%s", env);
  }
  for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++) {
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) snprintf(used, sizeof used, "%s", names[i]);
  }
  const char *roots[3] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (int r = 0; !h && r < 3; r++) {
    if (!roots[r] || !*roots[r]) continue;
    for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++) {
      char path[512];
      snprintf(path, sizeof path, "%s/lib64/%s", roots[r], names[i]);
      h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) snprintf(used, sizeof used, "%s", path);
    }
  }
  if (!h) {
    snprintf(rtc_lib.why, sizeof rtc_lib.why,
             "NVRTC not found (tried %s%slibnvrtc.so, .so.13, .so.12 on the library path and in lib64 of "
             "$CUDA_HOME, $CUDA_PATH, /usr/local/cuda; set DYN_NVRTC to its path)", tried, *tried ? ", " : "");
    return;
  }
  if (!bind_table(h, RTC_ENTRIES, sizeof RTC_ENTRIES / sizeof *RTC_ENTRIES, &cuload_rtc, used, rtc_lib.why, sizeof rtc_lib.why)) {
    dlclose(h);
    return;
  }
  rtc_lib.handle = h;
  snprintf(rtc_lib.path, sizeof rtc_lib.path, "%s", used);
  rtc_lib.ok = true;
}

bool cuload_have_driver(char *why, size_t wl) {
  pthread_once(&drv_lib.once, load_driver);
  if (!drv_lib.ok && why) snprintf(why, wl, "%s", drv_lib.why);
  return drv_lib.ok;
}

bool cuload_have_nvrtc(char *why, size_t wl) {
  pthread_once(&rtc_lib.once, load_nvrtc);
  if (!rtc_lib.ok && why) snprintf(why, wl, "%s", rtc_lib.why);
  return rtc_lib.ok;
}

bool cuda_nvrtc_available(char *why, size_t whylen) { return cuload_have_nvrtc(why, whylen); }

const char *cuload_err(CUresult r) {
  const char *s = NULL;
  if (drv_lib.ok && cuload_drv.cuGetErrorString(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}
