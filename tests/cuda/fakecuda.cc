/* fakecuda.cc -- a stand-in for libcuda.so.1 and libnvrtc, for testing the GPU back end's host
 * side and its generated code on a machine without a GPU (test_cuda sets DYN_CUDA_DRIVER and
 * DYN_NVRTC to this library).
 *
 * "NVRTC" compiles the CUDA C with g++ and emu.h into a shared object and returns its path as
 * the "PTX"; the "driver" loads it, keeps device memory in host memory, and launches kernels
 * through emu.h's launcher.  The entry points have the signatures of cuda.def.  Environment:
 * DYN_EMU_DIR (the directory of emu.h), DYN_EMU_CXX (the compiler, default g++). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

struct FakeFunction;
struct FakeModule {
  void *so;
  std::vector<FakeFunction *> fns;      /* handed out by cuModuleGetFunction; the module owns them */
  std::map<std::string, int> nwords;    /* kernel -> words of its argument structure */
  int (*launch)(void *, const void *, int, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned);
};
struct FakeFunction { FakeModule *mod; void *fn; int nwords; };
struct FakeProgram { std::string src, log, ptx; };

extern "C" {

/* ---- the driver ---- */
CUresult cuInit(unsigned) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == 0 ? "no error" : r == 200 ? "invalid image" : r == 500 ? "not found" : r == 2 ? "out of memory" : "launch failed";
  return 0;
}
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice *d, int) { *d = 0; return 0; }
CUresult cuDeviceGetName(char *name, int len, CUdevice) { snprintf(name, (size_t)len, "dyn emulator"); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice) {
  switch (attr) {
  case 16: *v = 4; break;            /* SMs */
  case 75: *v = 8; break;            /* compute capability */
  case 76: *v = 0; break;
  case 82: *v = 65536; break;        /* registers per SM */
  case 81: *v = 167936; break;       /* shared memory per SM */
  case 97: *v = 166912; break;
  case 13: *v = 1410000; break;      /* kHz */
  case 36: *v = 1593000; break;
  case 37: *v = 5120; break;
  case 38: *v = 41943040; break;
  case 39: *v = 2048; break;
  default: *v = 0;
  }
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice) { *b = (size_t)1 << 34; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice) { *ctx = (void *)1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return 0; }
CUresult cuCtxSetCurrent(void *) { return 0; }
CUresult cuCtxSynchronize(void) { return 0; }

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned, int *, void **) {
  const char *text = (const char *)image;
  if (strncmp(text, "DYNEMU ", 7)) return 200;
  const char *nl = strchr(text, '\n');
  std::string path(text + 7, nl ? (size_t)(nl - text - 7) : strlen(text + 7));
  void *so = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    fprintf(stderr, "fakecuda: %s\n", dlerror());
    return 200;
  }
  /* loaded: the file and its directory can go */
  unlink(path.c_str());
  std::string dir = path.substr(0, path.rfind('/'));
  rmdir(dir.c_str());
  FakeModule *m = new FakeModule;
  m->so = so;
  m->launch = (int (*)(void *, const void *, int, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned))dlsym(so, "dyn_emu_launch");
  for (const char *p = nl; p && *p; p = strchr(p + 1, '\n')) {
    char name[256];
    int n;
    if (sscanf(p + 1, "%255s %d", name, &n) == 2) m->nwords[name] = n;
  }
  *mod = m;
  return m->launch ? 0 : 200;
}
CUresult cuModuleUnload(void *mod) {
  FakeModule *m = (FakeModule *)mod;
  dlclose(m->so);
  for (FakeFunction *f : m->fns) delete f;
  delete m;
  return 0;
}
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
  FakeModule *m = (FakeModule *)mod;
  void *f = dlsym(m->so, name);
  if (!f || !m->nwords.count(name)) return 500;
  FakeFunction *ff = new FakeFunction{m, f, m->nwords[name]};
  m->fns.push_back(ff);
  *fn = ff;
  return 0;
}
CUresult cuFuncGetAttribute(int *v, int attr, void *) { *v = attr == 4 ? 128 : 0; return 0; }
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned, void *,
                        void **params, void **) {
  FakeFunction *f = (FakeFunction *)fn;
  if (gx < 1 || gy < 1 || gz < 1 || gy > 65535 || gz > 65535 || bx * by * bz > 1024) return 1;
  return f->mod->launch(f->fn, params[0], f->nwords, gx, gy, gz, bx, by, bz) ? 1 : 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m) return 2;
  memset(m, 0xA5, bytes);      /* garbage, as fresh device memory may hold */
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
  for (size_t i = 0; i < n; i++) ((unsigned *)(uintptr_t)d)[i] = v;
  return 0;
}
CUresult cuEventCreate(void **e, unsigned) { *e = (void *)1; return 0; }
CUresult cuEventDestroy_v2(void *) { return 0; }
CUresult cuEventRecord(void *, void *) { return 0; }
CUresult cuEventSynchronize(void *) { return 0; }
CUresult cuEventElapsedTime(float *ms, void *, void *) { *ms = 0; return 0; }

/* ---- NVRTC ---- */
int nvrtcVersion(int *a, int *b) { *a = 0; *b = 0; return 0; }
int nvrtcGetNumSupportedArchs(int *n) { *n = 3; return 0; }
int nvrtcGetSupportedArchs(int *a) { a[0] = 75; a[1] = 80; a[2] = 90; return 0; }
const char *nvrtcGetErrorString(int r) { return r ? "compilation failed" : "success"; }
int nvrtcCreateProgram(void **prog, const char *src, const char *, int, const char *const *, const char *const *) {
  FakeProgram *p = new FakeProgram;
  p->src = src;
  *prog = p;
  return 0;
}
int nvrtcDestroyProgram(void **prog) {
  delete (FakeProgram *)*prog;
  *prog = NULL;
  return 0;
}

/* The words of each kernel's argument structure: the fields of `struct NAME_args`. */
static std::string kernel_table(const std::string &src) {
  std::map<std::string, int> words;
  std::string out;
  size_t at = 0;
  while ((at = src.find("\nstruct ", at)) != std::string::npos) {
    size_t name_end = src.find(" {", at);
    std::string name = src.substr(at + 8, name_end - at - 8);
    if (name.size() < 5 || name.compare(name.size() - 5, 5, "_args") != 0) {
      at = name_end;
      continue;
    }
    size_t end = src.find("\n};", name_end);
    int n = 0;
    for (size_t p = name_end; p < end; p = src.find('\n', p + 1))
      if (src.compare(p, 3, "\n  ") == 0 && src.find(';', p) < src.find('\n', p + 1)) n++;
    words[name] = n;
    at = end;
  }
  at = 0;
  while ((at = src.find("extern \"C\" __global__ void ", at)) != std::string::npos) {
    size_t open = src.find("(const ", at), close = src.find(" a)", open);
    size_t name_start = src.rfind(' ', open) + 1;
    std::string kname = src.substr(name_start, open - name_start), args = src.substr(open + 7, close - open - 7);
    out += kname + " " + std::to_string(words[args]) + "\n";
    at = close;
  }
  return out;
}

int nvrtcCompileProgram(void *prog, int, const char *const *) {
  FakeProgram *p = (FakeProgram *)prog;
  const char *dir = getenv("DYN_EMU_DIR"), *cxx = getenv("DYN_EMU_CXX");
  char tmpl[] = "/tmp/dynemuXXXXXX";
  if (!dir || !mkdtemp(tmpl)) {
    p->log = "fakecuda: DYN_EMU_DIR is not set or no temporary directory";
    return 6;
  }
  std::string src = std::string(tmpl) + "/k.cu", so = std::string(tmpl) + "/k.so", log = std::string(tmpl) + "/log";
  FILE *f = fopen(src.c_str(), "w");
  fwrite(p->src.data(), 1, p->src.size(), f);
  fclose(f);
  std::string cmd = std::string(cxx ? cxx : "g++") + " -std=c++17 -O0 -fPIC -shared -w -pthread -include " + dir +
                    "/emu.h -x c++ " + src + " -o " + so + " > " + log + " 2>&1";
  int rc = system(cmd.c_str());
  FILE *lf = fopen(log.c_str(), "r");
  if (lf) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, lf)) > 0) p->log.append(buf, n);
    fclose(lf);
  }
  unlink(src.c_str());
  unlink(log.c_str());
  if (rc != 0) {
    rmdir(tmpl);
    return 6;
  }
  p->ptx = "DYNEMU " + so + "\n" + kernel_table(p->src);
  return 0;
}
int nvrtcGetPTXSize(void *prog, size_t *n) { *n = ((FakeProgram *)prog)->ptx.size() + 1; return 0; }
int nvrtcGetPTX(void *prog, char *out) { memcpy(out, ((FakeProgram *)prog)->ptx.c_str(), ((FakeProgram *)prog)->ptx.size() + 1); return 0; }
int nvrtcGetProgramLogSize(void *prog, size_t *n) { *n = ((FakeProgram *)prog)->log.size() + 1; return 0; }
int nvrtcGetProgramLog(void *prog, char *out) { memcpy(out, ((FakeProgram *)prog)->log.c_str(), ((FakeProgram *)prog)->log.size() + 1); return 0; }

}
