/* cuda_run.c -- the GPU back end's last steps and its entry points: NVRTC compiles the CUDA C
 * of cuda_render.c to PTX, the driver loads it into a module (cached by source text), and
 * cuda_run binds the shapes, moves the tensors, launches each kernel as cuda_plan.c planned
 * it and reads back the results and the error word.  The device layer (context, the pool of
 * device memory, the GPU model of the device) lives here too. */
#include "config.h"
#include "cuda_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- compiling: NVRTC to PTX ---------------------------------------------------------------- */

/* The newest architecture NVRTC supports that is not newer than cc (the PTX then runs there
 * and on every later GPU); the oldest it supports if cc is older than all of them. */
static int pick_arch(int cc) {
  int n = 0;
  if (cuload_rtc.nvrtcGetNumSupportedArchs(&n) != 0 || n <= 0 || n > 256) return cc;
  int archs[256];
  if (cuload_rtc.nvrtcGetSupportedArchs(archs) != 0) return cc;
  int best = -1, lowest = archs[0];
  for (int i = 0; i < n; i++) {
    if (archs[i] <= cc && archs[i] > best) best = archs[i];
    if (archs[i] < lowest) lowest = archs[i];
  }
  return best > 0 ? best : lowest;
}

bool cuda_compile_ptx(const char *src, int cc_major, int cc_minor, Buf *ptx, char *err, size_t errlen) {
  if (!cuload_have_nvrtc(err, errlen)) return false;
  int arch = pick_arch(cc_major * 10 + cc_minor);
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=compute_%d", arch);
  const char *opts[] = {archopt, "-std=c++17"};
  nvrtcProgram prog = NULL;
  nvrtcResult rc = cuload_rtc.nvrtcCreateProgram(&prog, src, "dyn.cu", 0, NULL, NULL);
  if (rc != 0) {
    snprintf(err, errlen, "NVRTC: %s", cuload_rtc.nvrtcGetErrorString(rc));
    return false;
  }
  rc = cuload_rtc.nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
  if (rc != 0) {
    size_t n = 0;
    cuload_rtc.nvrtcGetProgramLogSize(prog, &n);
    char *log = xcalloc(n + 1, 1);
    if (n) cuload_rtc.nvrtcGetProgramLog(prog, log);
    snprintf(err, errlen, "internal error: NVRTC rejected the generated CUDA C (%s): %.1500s", cuload_rtc.nvrtcGetErrorString(rc), log);
    free(log);
    cuload_rtc.nvrtcDestroyProgram(&prog);
    return false;
  }
  size_t n = 0;
  cuload_rtc.nvrtcGetPTXSize(prog, &n);
  char *text = xcalloc(n + 1, 1);
  cuload_rtc.nvrtcGetPTX(prog, text);
  buf_puts(ptx, text);
  free(text);
  cuload_rtc.nvrtcDestroyProgram(&prog);
  return true;
}

/* ---- the device: context, memory, modules ---------------------------------------------------- */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* A GPU model for the device: the hw file named like it ("NVIDIA H100 80GB HBM3" -> h100,
 * "NVIDIA GeForce RTX 4090" -> rtx4090), else what the device reports. */
static void model_for_device(const char *dname, CUdevice dev, HwModel *hw) {
  char low[256];
  size_t n = 0;
  for (const char *c = dname; *c && n + 1 < sizeof low; c++) low[n++] = (char)((*c >= 'A' && *c <= 'Z') ? *c - 'A' + 'a' : *c);
  low[n] = 0;
  char *tok[32];
  int nt = 0;
  for (char *t = strtok(low, " -_"); t && nt < 32; t = strtok(NULL, " -_")) tok[nt++] = t;
  for (int i = 0; i < nt; i++)
    for (int len = 1; len <= 2 && i + len <= nt; len++) {
      char cand[96] = "";
      for (int j = 0; j < len; j++) strncat(cand, tok[i + j], sizeof cand - strlen(cand) - 1);
      bool word = *cand != 0;
      for (char *c = cand; *c; c++) word = word && ((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'));
      if (!word || !strcmp(cand, "nvidia") || !strcmp(cand, "geforce")) continue;
      char e[256];
      HwModel m;
      if (hw_load(cand, &m, e, sizeof e) && !strcmp(m.kind, "gpu")) {
        *hw = m;
        return;
      }
    }
  /* what the device tells; FP32 lanes per SM by architecture (CUDA C++ Programming Guide,
   * "Arithmetic Instructions"): 64 on compute capability 6.0, 7.x and 8.0, else 128 */
  memset(hw, 0, sizeof *hw);
  int v = 0;
  snprintf(hw->name, sizeof hw->name, "device");
  snprintf(hw->kind, sizeof hw->kind, "gpu");
  snprintf(hw->desc, sizeof hw->desc, "%.80s (figures read from the device; approximate)", dname);
  cuload_drv.cuDeviceGetAttribute(&hw->sm_count, CU_DEV_SM_COUNT, dev);
  cuload_drv.cuDeviceGetAttribute(&hw->cc_major, CU_DEV_CC_MAJOR, dev);
  cuload_drv.cuDeviceGetAttribute(&hw->cc_minor, CU_DEV_CC_MINOR, dev);
  cuload_drv.cuDeviceGetAttribute(&hw->regs_per_sm, CU_DEV_REGS_PER_SM, dev);
  hw->warp_size = 32;
  hw->regs_per_thread_max = 255;
  hw->max_threads_per_block = 1024;
  cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_SMEM_PER_SM, dev);
  hw->smem_per_sm = v;
  cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_SMEM_PER_BLOCK_OPTIN, dev);
  hw->smem_per_block = v;
  cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_CLOCK_RATE, dev);
  hw->ghz = v / 1e6;
  int cc = hw->cc_major * 10 + hw->cc_minor;
  int lanes = cc == 60 || (cc >= 70 && cc < 80) || cc == 80 ? 64 : 128;
  hw->fp32_tflops = hw->sm_count * lanes * 2 * hw->ghz / 1e3;
  hw->peak_gflops_f32 = hw->fp32_tflops * 1e3;
  /* dense tf32 FLOPs per clock per SM on the tensor cores, bf16 twice that (whitepapers:
   * A100 1024, H100 2048, L4 512; GeForce parts halve them with f32 sums) -- approximate */
  int tc = cc < 80 ? 0 : cc == 80 ? 1024 : cc < 90 ? 512 : 2048;
  hw->tf32_tflops = hw->sm_count * tc * hw->ghz / 1e3;
  hw->bf16_tflops = 2 * hw->tf32_tflops;
  hw->cores = hw->sm_count;
  int memclk = 0, bus = 0, l2 = 0;
  cuload_drv.cuDeviceGetAttribute(&memclk, CU_DEV_MEM_CLOCK_RATE, dev);
  cuload_drv.cuDeviceGetAttribute(&bus, CU_DEV_BUS_WIDTH, dev);
  cuload_drv.cuDeviceGetAttribute(&l2, CU_DEV_L2_SIZE, dev);
  double hbm = memclk * 1e3 * 2 * bus / 8 / 1e9;
  hw->nlevels = 3;
  snprintf(hw->level[0].name, sizeof hw->level[0].name, "smem");
  hw->level[0].bytes = hw->smem_per_sm;
  hw->level[0].line = 128;
  hw->level[0].gbs = hw->level[0].total_gbs = 128.0 * hw->ghz * hw->sm_count;
  snprintf(hw->level[1].name, sizeof hw->level[1].name, "L2");
  hw->level[1].bytes = l2;
  hw->level[1].line = 128;
  hw->level[1].gbs = hw->level[1].total_gbs = 2.5 * hbm;
  snprintf(hw->level[2].name, sizeof hw->level[2].name, "HBM");
  hw->level[2].bytes = 0;
  hw->level[2].line = 128;
  hw->level[2].gbs = hw->level[2].total_gbs = hbm > 0 ? hbm : 500;
}

CudaBackend *cuda_backend_new(const HwModel *hw, char *why, size_t whylen) {
  if (!cuload_have_driver(why, whylen)) return NULL;
  CUresult rc = cuload_drv.cuInit(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    snprintf(why, whylen, "no CUDA device");
    return NULL;
  }
  if (rc != 0) {
    snprintf(why, whylen, "the NVIDIA driver did not start: %s", cuload_err(rc));
    return NULL;
  }
  int count = 0;
  if (cuload_drv.cuDeviceGetCount(&count) != 0 || count < 1) {
    snprintf(why, whylen, "no CUDA device");
    return NULL;
  }
  char nwhy[1024];
  if (!cuload_have_nvrtc(nwhy, sizeof nwhy)) {
    snprintf(why, whylen, "%.500s", nwhy);
    return NULL;
  }
  CudaBackend *be = xcalloc(1, sizeof *be);
  char dname[128] = "a CUDA device";
  if ((rc = cuload_drv.cuDeviceGet(&be->dev, 0)) != 0 || (rc = cuload_drv.cuDevicePrimaryCtxRetain(&be->ctx, be->dev)) != 0 ||
      (rc = cuload_drv.cuCtxSetCurrent(be->ctx)) != 0) {
    snprintf(why, whylen, "cannot use the CUDA device: %s", cuload_err(rc));
    free(be);
    return NULL;
  }
  cuload_drv.cuDeviceGetName(dname, sizeof dname, be->dev);
  if (hw && !strcmp(hw->kind, "gpu")) be->hw = *hw;
  else model_for_device(dname, be->dev, &be->hw);
  /* the device's own figures replace the file's where they differ */
  int v = 0;
  if (cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_SM_COUNT, be->dev) == 0 && v > 0) be->hw.sm_count = be->hw.cores = v;
  if (cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_CC_MAJOR, be->dev) == 0) be->hw.cc_major = v;
  if (cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_CC_MINOR, be->dev) == 0) be->hw.cc_minor = v;
  if (cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_REGS_PER_SM, be->dev) == 0 && v > 0) be->hw.regs_per_sm = v;
  if (cuload_drv.cuDeviceGetAttribute(&v, CU_DEV_SMEM_PER_SM, be->dev) == 0 && v > 0) be->hw.smem_per_sm = v;
  int drv = 0, rmaj = 0, rmin = 0;
  cuload_drv.cuDriverGetVersion(&drv);
  cuload_rtc.nvrtcVersion(&rmaj, &rmin);
  snprintf(be->desc, sizeof be->desc, "%s (compute capability %d.%d, %d SMs; driver %d.%d, NVRTC %d.%d)", dname, be->hw.cc_major,
           be->hw.cc_minor, be->hw.sm_count, drv / 1000, drv % 1000 / 10, rmaj, rmin);
  cuload_drv.cuEventCreate(&be->ev0, 0);
  cuload_drv.cuEventCreate(&be->ev1, 0);
  return be;
}

void cuda_backend_free(CudaBackend *be) {
  if (!be) return;
  cuload_drv.cuCtxSetCurrent(be->ctx);
  for (int i = 0; i < be->pool.n; i++) cuload_drv.cuMemFree(be->pool.a[i].p);
  vec_free(be->pool);
  for (int i = 0; i < be->mods.n; i++) {
    cuload_drv.cuModuleUnload(be->mods.a[i].mod);
    free(be->mods.a[i].src);
    free(be->mods.a[i].ptx);
  }
  vec_free(be->mods);
  if (be->ev0) cuload_drv.cuEventDestroy(be->ev0);
  if (be->ev1) cuload_drv.cuEventDestroy(be->ev1);
  cuload_drv.cuDevicePrimaryCtxRelease(be->dev);
  free(be);
}

const HwModel *cuda_backend_hw(const CudaBackend *be) { return &be->hw; }
const char *cuda_backend_device(const CudaBackend *be) { return be->desc; }
double cuda_last_ms(const CudaBackend *be) { return be->last_ms; }

void cuda_force(CudaBackend *be, const char *variant, int splits) {
  snprintf(be->force, sizeof be->force, "%s", variant ? variant : "");
  be->force_splits = splits;
}

/* Device memory, reused: a freed buffer waits in the pool for a request of about its size. */
static bool dev_alloc(CudaBackend *be, size_t bytes, CUdeviceptr *p, char *err, size_t errlen) {
  if (bytes < 256) bytes = 256;
  int best = -1;
  for (int i = 0; i < be->pool.n; i++) {
    size_t b = be->pool.a[i].bytes;
    if (b >= bytes && b <= 2 * bytes && (best < 0 || b < be->pool.a[best].bytes)) best = i;
  }
  if (best >= 0) {
    *p = be->pool.a[best].p;
    be->pooled -= be->pool.a[best].bytes;
    be->pool.a[best] = be->pool.a[--be->pool.n];
    return true;
  }
  CUresult rc = cuload_drv.cuMemAlloc(p, bytes);
  if (rc != 0 && be->pool.n) {
    for (int i = 0; i < be->pool.n; i++) cuload_drv.cuMemFree(be->pool.a[i].p);
    be->pool.n = 0;
    be->pooled = 0;
    rc = cuload_drv.cuMemAlloc(p, bytes);
  }
  if (rc != 0) {
    snprintf(err, errlen, "cannot allocate %zu bytes on the GPU: %s", bytes, cuload_err(rc));
    return false;
  }
  return true;
}

static void dev_free(CudaBackend *be, CUdeviceptr p, size_t bytes) {
  if (!p) return;
  if (bytes < 256) bytes = 256;
  DevBlock b = {p, bytes};
  vec_push(be->pool, b);
  be->pooled += bytes;
  while (be->pooled > ((size_t)1 << 31) && be->pool.n) {     /* keep at most 2 GiB idle */
    cuload_drv.cuMemFree(be->pool.a[0].p);
    be->pooled -= be->pool.a[0].bytes;
    be->pool.a[0] = be->pool.a[--be->pool.n];
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

CudaProgram *cuda_compile(CudaBackend *be, const Program *p, CudaMath math, char *err, size_t errlen) {
  double t0 = now_ms();
  cuload_drv.cuCtxSetCurrent(be->ctx);
  CudaProgram *cp = cuda_program_new(p, &be->hw, math);
  const char *src = cuda_program_source(cp);
  uint64_t h = fnv1a(src);
  Module *m = NULL;
  for (int i = 0; i < be->mods.n && !m; i++)
    if (be->mods.a[i].hash == h && !strcmp(be->mods.a[i].src, src)) m = &be->mods.a[i];
  if (!m) {
    Buf ptx = {0};
    if (!cuda_compile_ptx(src, be->hw.cc_major, be->hw.cc_minor, &ptx, err, errlen)) {
      buf_free(&ptx);
      cuda_program_free(cp);
      return NULL;
    }
    char log[4096] = "";
    int opts[2] = {CU_JIT_ERROR_LOG, CU_JIT_ERROR_LOG_SIZE};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUmodule mod = NULL;
    CUresult rc = cuload_drv.cuModuleLoadDataEx(&mod, ptx.s, 2, opts, vals);
    if (rc != 0) {
      snprintf(err, errlen, "the driver cannot load the PTX of %s: %s %.1000s", p->name, cuload_err(rc), log);
      buf_free(&ptx);
      cuda_program_free(cp);
      return NULL;
    }
    Module nm = {h, xstrdup(src), mod, ptx.s};
    vec_push(be->mods, nm);
    m = &be->mods.a[be->mods.n - 1];
  }
  for (int k = 0; k < cp->nk; k++)
    for (int i = 0; i < cp->k[k].nv; i++) {
      Var *v = &cp->k[k].v[i];
      CUresult rc = cuload_drv.cuModuleGetFunction(&v->fn, m->mod, v->name);
      if (rc != 0) {
        snprintf(err, errlen, "internal error: no kernel %s in the module: %s", v->name, cuload_err(rc));
        cuda_program_free(cp);
        return NULL;
      }
      cuload_drv.cuFuncGetAttribute(&v->regs, CU_FUNC_NUM_REGS, v->fn);
    }
  cp->ptx = xstrdup(m->ptx);
  cp->be = be;
  cp->compile_ms = now_ms() - t0;
  return cp;
}

double cuda_program_compile_ms(const CudaProgram *cp) { return cp->compile_ms; }

bool cuda_program_code(CudaProgram *cp, const char *what, Buf *out, char *err, size_t errlen) {
  if (!strcmp(what, "cuda")) {
    buf_puts(out, cuda_program_source(cp));
    return true;
  }
  if (strcmp(what, "ptx")) {
    snprintf(err, errlen, "the GPU back end shows cuda or ptx, not %s", what);
    return false;
  }
  if (!cp->ptx) {
    Buf b = {0};
    if (!cuda_compile_ptx(cuda_program_source(cp), cp->hw.cc_major, cp->hw.cc_minor, &b, err, errlen)) {
      buf_free(&b);
      return false;
    }
    cp->ptx = b.s ? b.s : xstrdup("");
  }
  buf_puts(out, cp->ptx);
  return true;
}

/* ---- running ---------------------------------------------------------------------------------- */

static size_t slot_bytes(const Program *p, int slot, const int64_t *shape) {
  const Slot *s = &p->slots[slot];
  size_t n = (size_t)elem_size(s->type.elem);
  for (int k = 0; k < s->type.rank; k++) n *= (size_t)(shape[slot * DYN_MAX_RANK + k] > 0 ? shape[slot * DYN_MAX_RANK + k] : 0);
  return n;
}

int cuda_run(CudaBackend *be, CudaProgram *cp, Tensor **inputs, const Extents *x, Tensor **outs, char *err, size_t errlen) {
  const Program *p = cp->p;
  int ns = p->nslots;
  int status = 1;
  CUresult rc;
  cuload_drv.cuCtxSetCurrent(be->ctx);
  /* the sizes bound once for every back end (extents.c) */
  const EvalSizes *sizes = &x->sz;
  const int64_t *ext = x->ext, *shape = x->shape, *strides = x->strides;
  CUdeviceptr *dp = xcalloc((size_t)ns + 1, sizeof(CUdeviceptr));
  size_t *db = xcalloc((size_t)ns + 1, sizeof(size_t));
  Launch *L = xcalloc((size_t)cp->nk + 1, sizeof(Launch));
  uint64_t *words = NULL;
  CUdeviceptr errp = 0, ws = 0;
  size_t ws_bytes = 0;
  for (int i = 0; i < ns && status == 1; i++) {
    if (!cp->buf[i]) continue;
    db[i] = slot_bytes(p, i, shape);
    if (!dev_alloc(be, db[i], &dp[i], err, errlen)) {
      status = -1;
      break;
    }
    const Slot *s = &p->slots[i];
    if (s->kind != SLOT_INPUT) continue;
    Tensor *t = inputs[s->param];
    if (!tensor_contiguous(t)) {
      snprintf(err, errlen, "%s is not contiguous", s->name);
      status = -1;
      break;
    }
    if (db[i] && (rc = cuload_drv.cuMemcpyHtoD(dp[i], tensor_data(t), db[i])) != 0) {
      snprintf(err, errlen, "cannot copy %s to the GPU: %s", s->name, cuload_err(rc));
      status = -1;
    }
  }
  if (status != 1) goto out;
  for (int k = 0; k < cp->nk; k++) {
    cuplan_kernel(cp, &cp->k[k], ext, shape, strides, be->force, be->force_splits, &L[k]);
    if (L[k].ws > ws_bytes) ws_bytes = L[k].ws;
  }
  if (!dev_alloc(be, 256, &errp, err, errlen) || (ws_bytes && !dev_alloc(be, ws_bytes, &ws, err, errlen))) {
    status = -1;
    goto out;
  }
  cuload_drv.cuMemsetD32(errp, 0, 1);
  cuload_drv.cuEventRecord(be->ev0, NULL);
  for (int k = 0; k < cp->nk && status == 1; k++) {
    CK *ck = &cp->k[k];
    if (L[k].skip) continue;
    words = xrealloc(words, sizeof(uint64_t) * (size_t)(ck->nf + 1));
    for (int i = 0; i < ck->nf; i++) {
      const Field *f = &ck->f[i];
      int64_t v = 0;
      switch (f->kind) {
      case F_PTR: v = (int64_t)dp[f->slot]; break;
      case F_STRIDE: v = strides[f->slot * DYN_MAX_RANK + f->dim]; break;
      case F_DIM: v = shape[f->slot * DYN_MAX_RANK + f->dim]; break;
      case F_EXT: v = ext[f->axis]; break;
      case F_SIZE: {
        const char *why = NULL;
        if (!poly_eval(f->size, eval_size_lookup, (void *)sizes, &v, &why)) {
          snprintf(err, errlen, "cannot evaluate a size of %s: %s", ck->kn->name, why ? why : "unbound");
          status = -1;
        }
        break;
      }
      case F_ERR: v = (int64_t)errp; break;
      case F_WS: v = (int64_t)ws; break;
      case F_SPLITS: v = L[k].splits; break;
      case F_AVEC: v = L[k].avec; break;
      default: v = L[k].bvec; break;
      }
      words[i] = (uint64_t)v;
    }
    if (status != 1) break;
    if (ck->kind == CK_SCALAR && ck->v[L[k].var].kind == V_GRID) cuload_drv.cuMemsetD32(ws, 0, 4);
    void *params[1] = {words};
    for (int pass = 0; pass < 2 && status == 1; pass++) {
      int vi = pass ? L[k].var2 : L[k].var;
      if (vi < 0) continue;
      const unsigned *g = pass ? L[k].grid2 : L[k].grid, *b = pass ? L[k].block2 : L[k].block;
      rc = cuload_drv.cuLaunchKernel(ck->v[vi].fn, g[0], g[1], g[2], b[0], b[1], b[2], 0, NULL, params, NULL);
      if (rc != 0) {
        snprintf(err, errlen, "cannot launch %s (%ux%ux%u blocks of %ux%u): %s", ck->v[vi].name, g[0], g[1], g[2], b[0], b[1], cuload_err(rc));
        status = -1;
      }
    }
  }
  cuload_drv.cuEventRecord(be->ev1, NULL);
  if ((rc = cuload_drv.cuCtxSynchronize()) != 0 && status == 1) {
    snprintf(err, errlen, "the GPU failed running %s: %s", p->name, cuload_err(rc));
    status = -1;
  }
  float ms = 0;
  if (status == 1 && cuload_drv.cuEventElapsedTime(&ms, be->ev0, be->ev1) == 0) be->last_ms = ms;
  if (status == 1) {
    int flag = 0;
    cuload_drv.cuMemcpyDtoH(&flag, errp, sizeof flag);
    if (flag) status = 0;
  }
  for (int i = 0; i < p->nout && status == 1; i++) {
    int s = p->outputs[i];
    const Slot *sl = &p->slots[s];
    int64_t dims[DYN_MAX_RANK];
    for (int k = 0; k < sl->type.rank; k++) dims[k] = shape[s * DYN_MAX_RANK + k];
    outs[i] = tensor_new(sl->type.elem, sl->type.rank, dims, err, errlen);
    if (!outs[i]) {
      status = -1;
      break;
    }
    if (db[s] && (rc = cuload_drv.cuMemcpyDtoH(tensor_data(outs[i]), dp[s], db[s])) != 0) {
      snprintf(err, errlen, "cannot copy %s from the GPU: %s", sl->name, cuload_err(rc));
      status = -1;
    }
  }
  if (status != 1)
    for (int i = 0; i < p->nout; i++) {
      tensor_release(outs[i]);
      outs[i] = NULL;
    }
out:
  for (int i = 0; i < ns; i++) dev_free(be, dp[i], db[i]);
  dev_free(be, errp, 256);
  dev_free(be, ws, ws_bytes);
  free(words);
  free(L);
  free(dp);
  free(db);
  return status;
}
