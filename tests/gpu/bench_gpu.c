/* bench_gpu.c -- the GPU back end on a real device: correctness of every stdlib function
 * against the reference evaluator, and timings against cuBLAS.  Built and run by
 * device-check.sh (linked with libdyn.a; the driver and cuBLAS are opened with dlopen).
 *
 *   bench_gpu --check [NAME]          every stdlib function (or NAME) on awkward shapes, every
 *                                     variant forced in turn: "gpu vs ref: NAME [sizes] variant: ok"
 *   bench_gpu --check-tf32 [NAME]     the same for the functions with a contraction, compiled with
 *                                     f32 contractions in tf32 on the tensor cores (:target gpu
 *                                     tf32), within 1e-3 (rtol, and atol of the largest value)
 *   bench_gpu --bench DIR             gemm.txt and bmm.txt against cublasSgemm and
 *                                     cublasSgemmStridedBatched, exact f32 (CUBLAS_DEFAULT_MATH) and
 *                                     tf32 (dyn's tensor-core tiles against
 *                                     CUBLAS_TF32_TENSOR_OP_MATH), and rowwise.txt against the
 *                                     bandwidth of the hw model
 * Times are kernel times from CUDA events (copies excluded), the median of the runs. */
#include "config.h"
#include "dyn_int.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *name; const char *text; } StdlibModule;
extern const StdlibModule dyn_stdlib[];

/* ---- the stdlib, lowered ---- */

static PolyCtx *pc;
static Func *fns[128];
static int nfns;

static Func *lookup(void *env, const char *name) {
  (void)env;
  for (int i = 0; i < nfns; i++)
    if (!strcmp(fns[i]->name, name)) return fns[i];
  return NULL;
}

static void load_stdlib(void) {
  Diags d = {0};
  pc = poly_ctx_new();
  for (const StdlibModule *m = dyn_stdlib; m->name; m++) {
    Source *src = xcalloc(1, sizeof *src);
    src->name = xstrdup(m->name);
    src->text = xstrdup(m->text);
    src->len = strlen(m->text);
    Arena *ar = arena_new();
    int n = 0;
    bool inc = false;
    Stmt **st = parse_source(ar, src, &d, &n, &inc);
    SemaEnv env = {pc, lookup, NULL};
    for (int i = 0; i < n; i++)
      if (st[i]->kind == ST_FN) {
        Func *f = sema_function(&env, st[i]->fn, ar, &d);
        if (f && nfns < 128) fns[nfns++] = f;
      }
  }
  if (d.nerrors) {
    diag_print_all(&d, stderr);
    exit(2);
  }
}

static CudaBackend *be;
static CudaProgram *tf32_progs[128];     /* per function (fns), compiled with CUDA_TF32 */

/* f compiled for the GPU with f32 contractions in math (exact: kept in Func.code.gpu). */
static CudaProgram *compiled_math(Func *f, CudaMath math) {
  if (!f->code.prog) f->code.prog = lower_function(f, pc, lookup, NULL);
  int fi = 0;
  while (fns[fi] != f) fi++;
  CudaProgram *cp = math == CUDA_EXACT ? f->code.gpu : tf32_progs[fi];
  if (!cp) {
    char err[4096];
    cp = cuda_compile(be, f->code.prog, math, err, sizeof err);
    if (!cp) {
      fprintf(stderr, "bench_gpu: %s (%s): %s\n", f->name, cuda_math_name(math), err);
      exit(1);
    }
    if (math == CUDA_EXACT) f->code.gpu = cp;
    else tf32_progs[fi] = cp;
  }
  return cp;
}


/* ---- inputs ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct Sizes { const char *names[16]; int64_t vals[16]; int n; } Sizes;

static bool size_lookup(void *env, const char *name, int64_t *v) {
  const EvalSizes *s = env;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name)) {
      *v = s->vals[i];
      return true;
    }
  return false;
}

static void parse_sizes(const char *text, Sizes *s) {
  char copy[256];
  snprintf(copy, sizeof copy, "%s", text);
  s->n = 0;
  for (char *t = strtok(copy, " "); t && s->n < 16; t = strtok(NULL, " ")) {
    char *eq = strchr(t, '=');
    *eq = 0;
    s->names[s->n] = xstrdup(t);
    s->vals[s->n++] = atoll(eq + 1);
  }
}

static void make_inputs(Func *f, const EvalSizes *sz, Tensor **in) {
  for (int i = 0; i < f->nparams; i++) {
    in[i] = NULL;
    if (f->params[i].is_size) continue;
    const Type *t = &f->params[i].type;
    int64_t dims[DYN_MAX_RANK];
    const char *why;
    for (int k = 0; k < t->rank; k++) poly_eval(t->dims[k], size_lookup, (void *)sz, &dims[k], &why);
    char err[256];
    in[i] = tensor_new(t->elem, t->rank, dims, err, sizeof err);
    if (!in[i]) {
      fprintf(stderr, "bench_gpu: %s\n", err);
      exit(1);
    }
    int64_t n = tensor_numel(in[i]);
    if (t->elem == DYN_F32) {
      float *p = tensor_data(in[i]);
      for (int64_t j = 0; j < n; j++) p[j] = (float)(2 * urand() - 1);
    } else {
      for (int64_t j = 0; j < n; j++) tensor_set_f64(in[i], j, 2 * urand() - 1);
    }
  }
}

/* :check's comparison: rtol of the element plus atol of the largest value (tol > 0: both tol,
 * the error tf32's rounding allows). */
static bool same(const Tensor *x, const Tensor *y, double tol, double *worst) {
  int64_t n = tensor_numel(x);
  double scale = 0;
  *worst = 0;
  if (x->rank != y->rank || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank)) return false;
  for (int64_t i = 0; i < n; i++) {
    double v = fabs(tensor_get_f64(y, i));
    if (isfinite(v) && v > scale) scale = v;
  }
  bool ok = true;
  for (int64_t i = 0; i < n; i++) {
    double p = tensor_get_f64(x, i), q = tensor_get_f64(y, i);
    bool s;
    if (!elem_is_float(x->elem)) s = tensor_get_i64(x, i) == tensor_get_i64(y, i);
    else if (isnan(p) || isnan(q)) s = isnan(p) && isnan(q);
    else s = tol > 0 ? fabs(p - q) <= tol * fabs(q) + tol * scale : fabs(p - q) <= 1e-4 * fabs(q) + 1e-5 * scale;
    if (isfinite(p) && isfinite(q) && fabs(p - q) > *worst) *worst = fabs(p - q);
    ok = ok && s;
  }
  return ok;
}

/* ---- --check ---- */

typedef struct Case { const char *fn, *sizes; } Case;

static const Case CASES[] = {
  {"matmul", "M=1 N=768 K=768"}, {"matmul", "M=129 N=129 K=129"}, {"matmul", "M=13 N=11 K=17"},
  {"matmul", "M=1000 N=768 K=768"}, {"matmul", "M=256 N=256 K=3000"}, {"matvec", "M=300 K=1001"},
  {"bmm", "B=12 M=100 N=100 K=64"}, {"bmm", "B=3 M=511 N=33 K=128"}, {"outer", "M=301 N=77"},
  {"transpose", "M=513 N=65"}, {"dot", "N=1000"}, {"dot", "N=1000003"}, {"relu", "B=33 N=3072"},
  {"relu", "B=7 N=1001"}, {"gelu", "B=100 N=768"}, {"gelu_erf", "B=3 N=5"}, {"silu", "B=64 N=4096"},
  {"softmax", "B=1 N=768"}, {"softmax", "B=33 N=3072"}, {"softmax", "B=128 N=50257"}, {"softmax", "B=2048 N=768"},
  {"log_softmax", "B=100 N=1000"}, {"layernorm", "B=1 N=768"}, {"layernorm", "B=2047 N=1024"},
  {"rmsnorm", "B=300 N=513"}, {"linear", "B=100 I=768 O=3072"}, {"linear", "B=1 I=17 O=5"},
  {"conv1d", "N=2 C=16 L=100 F=32 K=5 S=2 P=2"}, {"conv2d", "N=2 C=8 H=17 W=15 F=16 KH=3 KW=3 S=1 P=1"},
  {"maxpool2d", "N=2 C=8 H=17 W=15 K=3 S=2"}, {"avgpool2d", "N=2 C=8 H=16 W=16 K=2 S=2"},
  {"attention", "B=4 S=100 T=77 D=64"}, {"causal_attention", "B=2 S=128 T=128 D=32"},
  {"mlp", "B=50 I=128 H=512 O=10"}, {"sum", "B=100 N=1000"}, {"mean", "B=3 N=100000"},
  {"var", "B=1000 N=17"}, {"std", "B=64 N=4096"}, {"amax", "B=7 N=70000"}, {"argmax", "B=300 N=300"},
};

static const char *VARIANTS[] = {NULL, "loop", "loop4", "warp", "block256", "block1024", "grid", "gemm128x128", "gemm128x64",
                                 "gemm64x128", "gemm64x64", "gemm32x32"};

/* tf32: the functions with a contraction, on shapes of 1, primes and tiles +-1 whose
 * reference runs in seconds, every tensor-core tile forced in turn */
static const Case TF32_CASES[] = {
  {"matmul", "M=1 N=768 K=768"}, {"matmul", "M=129 N=129 K=129"}, {"matmul", "M=13 N=11 K=17"}, {"matmul", "M=127 N=65 K=1000"},
  {"matmul", "M=256 N=256 K=3000"}, {"bmm", "B=12 M=100 N=100 K=64"}, {"bmm", "B=3 M=511 N=33 K=128"},
  {"linear", "B=33 I=768 O=1000"}, {"linear", "B=1 I=17 O=5"}, {"attention", "B=4 S=100 T=77 D=64"},
  {"causal_attention", "B=2 S=128 T=128 D=32"}, {"mlp", "B=50 I=128 H=512 O=10"},
};

static const char *TF32_VARIANTS[] = {NULL, "tf32_128x128", "tf32_128x64", "tf32_64x128", "tf32_64x64", "tf32_32x32"};

static int check_all(const char *only, CudaMath math) {
  int bad = 0, done = 0;
  bool tc = math != CUDA_EXACT;
  const Case *cases = tc ? TF32_CASES : CASES;
  size_t ncases = tc ? sizeof TF32_CASES / sizeof *TF32_CASES : sizeof CASES / sizeof *CASES;
  const char **variants = tc ? TF32_VARIANTS : VARIANTS;
  size_t nvariants = tc ? sizeof TF32_VARIANTS / sizeof *TF32_VARIANTS : sizeof VARIANTS / sizeof *VARIANTS;
  const char *tag = tc ? " (tf32)" : "";
  for (size_t c = 0; c < ncases; c++) {
    if (only && strcmp(only, cases[c].fn)) continue;
    Func *f = lookup(NULL, cases[c].fn);
    if (!f) {
      printf("gpu vs ref%s: %s: not in the stdlib (skipped)\n", tag, cases[c].fn);
      continue;
    }
    CudaProgram *cp = compiled_math(f, math);
    Sizes s;
    parse_sizes(cases[c].sizes, &s);
    EvalSizes sz = {s.names, s.vals, s.n};
    Tensor *in[16];
    make_inputs(f, &sz, in);
    Tensor *ref[4] = {0};
    Buf err = {0};
    Extents x = {0};
    extents_bind(&x, f->code.prog, &sz);
    bool rok = eval_program(f->code.prog, in, &x, ref, NULL, &err, NULL);
    extents_free(&x);
    if (!rok) {
      printf("gpu vs ref%s: %s [%s]: the reference fails: %s\n", tag, f->name, cases[c].sizes, err.s);
      bad++;
      continue;
    }
    for (size_t v = 0; v < nvariants; v++) {
      /* a forced variant only where some kernel of the program has it */
      char def[64];
      snprintf(def, sizeof def, "_%s(const ", variants[v] ? variants[v] : "");
      if (variants[v] && !strstr(cuda_program_source(cp), def)) continue;
      bool tile = variants[v] && (!strncmp(variants[v], "gemm", 4) || !strncmp(variants[v], "tf32_", 5));
      for (int splits = 0; splits <= (tile ? 3 : 0); splits += 3) {
        Tensor *out[4] = {0};
        char e[2048];
        cuda_force(be, variants[v], splits);
        int st = cuda_run(be, cp, in, &sz, out, e, sizeof e);
        cuda_force(be, NULL, 0);
        bool ok = st == 1;
        double worst = 0;
        for (int i = 0; ok && i < f->code.prog->nout; i++) ok = same(out[i], ref[i], tc ? 1e-3 : 0, &worst);
        printf("gpu vs ref%s: %s [%s] %s%s: %s", tag, f->name, cases[c].sizes, variants[v] ? variants[v] : "model",
               splits ? ", K split in 3" : "", ok ? "ok" : "MISMATCH");
        if (st != 1) printf(" (%s)", st == 0 ? "an error detected on the GPU" : e);
        else printf(" (max |difference| %.3g)", worst);
        putchar('\n');
        bad += !ok;
        done++;
        for (int i = 0; i < 4; i++) tensor_release(out[i]);
      }
    }
    for (int i = 0; i < 4; i++) tensor_release(ref[i]);
    for (int i = 0; i < 16 && i < f->nparams; i++) tensor_release(in[i]);
    buf_free(&err);
  }
  printf("check%s: %d runs, %d mismatches\n", tag, done, bad);
  return bad ? 1 : 0;
}

/* ---- --bench ---- */

/* What the benchmark calls directly: device memory, events, cuBLAS. */
typedef int CUresult;
static CUresult (*cuMemAlloc)(unsigned long long *, size_t);
static CUresult (*cuMemFree)(unsigned long long);
static CUresult (*cuMemcpyHtoD)(unsigned long long, const void *, size_t);
static CUresult (*cuEventCreate)(void **, unsigned);
static CUresult (*cuEventRecord)(void *, void *);
static CUresult (*cuEventSynchronize)(void *);
static CUresult (*cuEventElapsedTime)(float *, void *, void *);
static int (*cublasCreate)(void **);
static int (*cublasSetMathMode)(void *, int);
static int (*cublasSgemm)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int, const float *,
                          float *, int);
static int (*cublasSgemmStridedBatched)(void *, int, int, int, int, int, const float *, const float *, int, long long,
                                        const float *, int, long long, const float *, float *, int, long long, int);
static void *cublas;

static void *sym(void *lib, const char *name) {
  void *f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "bench_gpu: no %s\n", name);
    exit(1);
  }
  return f;
}

static bool open_libs(void) {
  const char *drv = getenv("DYN_CUDA_DRIVER");
  void *cu = dlopen(drv && *drv ? drv : "libcuda.so.1", RTLD_NOW);
  const char *names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11", NULL};
  void *cb = NULL;
  for (int i = 0; !cb && names[i]; i++) cb = dlopen(names[i], RTLD_NOW);
  const char *home = getenv("CUDA_HOME");
  char path[512];
  snprintf(path, sizeof path, "%s/lib64/libcublas.so", home && *home ? home : "/usr/local/cuda");
  if (!cb) cb = dlopen(path, RTLD_NOW);
  if (!cu || !cb) {
    fprintf(stderr, "bench_gpu: %s\n", !cu ? "no libcuda.so.1" : "no libcublas (the cuBLAS columns are left out)");
    if (!cu) return false;
  }
  *(void **)&cuMemAlloc = sym(cu, "cuMemAlloc_v2");
  *(void **)&cuMemFree = sym(cu, "cuMemFree_v2");
  *(void **)&cuMemcpyHtoD = sym(cu, "cuMemcpyHtoD_v2");
  *(void **)&cuEventCreate = sym(cu, "cuEventCreate");
  *(void **)&cuEventRecord = sym(cu, "cuEventRecord");
  *(void **)&cuEventSynchronize = sym(cu, "cuEventSynchronize");
  *(void **)&cuEventElapsedTime = sym(cu, "cuEventElapsedTime");
  if (cb) {
    *(void **)&cublasCreate = sym(cb, "cublasCreate_v2");
    *(void **)&cublasSetMathMode = sym(cb, "cublasSetMathMode");
    *(void **)&cublasSgemm = sym(cb, "cublasSgemm_v2");
    *(void **)&cublasSgemmStridedBatched = sym(cb, "cublasSgemmStridedBatched");
    if (cublasCreate(&cublas) != 0) {
      fprintf(stderr, "bench_gpu: cublasCreate failed\n");
      cublas = NULL;
    } else {
      cublasSetMathMode(cublas, 0);         /* CUBLAS_DEFAULT_MATH: exact f32, no TF32 (time_cublas sets it per call) */
    }
  }
  return true;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define RUNS 9

/* dyn: the median kernel time of RUNS runs after one warm-up (copies excluded). */
static double time_dyn(Func *f, CudaMath math, const char *sizes) {
  CudaProgram *cp = compiled_math(f, math);
  Sizes s;
  parse_sizes(sizes, &s);
  EvalSizes sz = {s.names, s.vals, s.n};
  Tensor *in[16];
  make_inputs(f, &sz, in);
  double t[RUNS];
  for (int r = -1; r < RUNS; r++) {
    Tensor *out[4] = {0};
    char e[1024];
    if (cuda_run(be, cp, in, &sz, out, e, sizeof e) != 1) {
      fprintf(stderr, "bench_gpu: %s [%s]: %s\n", f->name, sizes, e);
      exit(1);
    }
    if (r >= 0) t[r] = cuda_last_ms(be);
    for (int i = 0; i < 4; i++) tensor_release(out[i]);
  }
  for (int i = 0; i < 16 && i < f->nparams; i++) tensor_release(in[i]);
  qsort(t, RUNS, sizeof *t, cmp_d);
  return t[RUNS / 2];
}

/* cuBLAS, row-major C[b] = A[b] . B[b] as column-major C^T = B^T . A^T; exact f32
 * (CUBLAS_DEFAULT_MATH, 0) or with TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH, 3). */
static double time_cublas(CudaMath math, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (!cublas) return NAN;
  cublasSetMathMode(cublas, math == CUDA_TF32 ? 3 : 0);
  unsigned long long A, B, C;
  size_t sa = (size_t)(batch * m * k) * 4, sb = (size_t)(batch * k * n) * 4, sc = (size_t)(batch * m * n) * 4;
  if (cuMemAlloc(&A, sa ? sa : 4) || cuMemAlloc(&B, sb ? sb : 4) || cuMemAlloc(&C, sc ? sc : 4)) return NAN;
  float *h = malloc(sa > sb ? sa + 4 : sb + 4);
  for (size_t i = 0; i < (sa > sb ? sa : sb) / 4; i++) h[i] = (float)(2 * urand() - 1);
  cuMemcpyHtoD(A, h, sa);
  cuMemcpyHtoD(B, h, sb);
  free(h);
  void *e0, *e1;
  cuEventCreate(&e0, 0);
  cuEventCreate(&e1, 0);
  const float one = 1, zero = 0;
  double t[RUNS];
  for (int r = -1; r < RUNS; r++) {
    cuEventRecord(e0, NULL);
    int rc;
    if (batch == 1)
      rc = cublasSgemm(cublas, 0, 0, (int)n, (int)m, (int)k, &one, (const float *)(uintptr_t)B, (int)n, (const float *)(uintptr_t)A,
                       (int)k, &zero, (float *)(uintptr_t)C, (int)n);
    else
      rc = cublasSgemmStridedBatched(cublas, 0, 0, (int)n, (int)m, (int)k, &one, (const float *)(uintptr_t)B, (int)n, k * n,
                                     (const float *)(uintptr_t)A, (int)k, m * k, &zero, (float *)(uintptr_t)C, (int)n, m * n,
                                     (int)batch);
    cuEventRecord(e1, NULL);
    cuEventSynchronize(e1);
    float ms = 0;
    cuEventElapsedTime(&ms, e0, e1);
    if (rc != 0) return NAN;
    if (r >= 0) t[r] = ms;
  }
  cuMemFree(A);
  cuMemFree(B);
  cuMemFree(C);
  qsort(t, RUNS, sizeof *t, cmp_d);
  return t[RUNS / 2];
}

static FILE *open_shapes(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) fprintf(stderr, "bench_gpu: cannot read %s (skipped)\n", path);
  return f;
}

static double geo_sum[2];
static int geo_n[2];

/* One shape: exact f32 against cuBLAS's, then tf32 (dyn's tensor-core tiles) against cuBLAS's. */
static void gemm_row(const char *what, int64_t b, int64_t m, int64_t n, int64_t k) {
  char sizes[128];
  Func *f = lookup(NULL, b > 1 || !strcmp(what, "bmm") ? "bmm" : "matmul");
  if (!strcmp(f->name, "bmm")) snprintf(sizes, sizeof sizes, "B=%lld M=%lld N=%lld K=%lld", (long long)b, (long long)m, (long long)n, (long long)k);
  else snprintf(sizes, sizeof sizes, "M=%lld N=%lld K=%lld", (long long)m, (long long)n, (long long)k);
  double flops = 2.0 * b * m * n * k;
  printf("%-6s %-22s", what, sizes);
  for (int t = 0; t < 2; t++) {
    CudaMath math = t ? CUDA_TF32 : CUDA_EXACT;
    double td = time_dyn(f, math, sizes), tc = time_cublas(math, b, m, n, k);
    CudaGemmPlan pl;
    char plan[48] = "";
    if (cuda_gemm_plan(cuda_backend_hw(be), math, b, m, n, k, &pl)) snprintf(plan, sizeof plan, "%dx%d/%d", pl.bm, pl.bn, pl.splits);
    printf(" %9.4f %9.4f %8.1f %8.1f %6.2f %-11s", td, tc, flops / td / 1e6, flops / tc / 1e6, tc / td, plan);
    if (isfinite(tc) && td > 0) {
      geo_sum[t] += log(tc / td);
      geo_n[t]++;
    }
  }
  putchar('\n');
}

static int bench(const char *dir) {
  if (!open_libs()) return 1;
  const HwModel *hw = cuda_backend_hw(be);
  printf("device: %s\nmodel: %s (%.1f TFLOP/s f32, %.1f tf32 on the tensor cores, %.0f GB/s)\n\n", cuda_backend_device(be), hw->name,
         hw->fp32_tflops, hw->tf32_tflops, hw->level[hw->nlevels - 1].gbs);
  printf("%-29s %-56s %s\n", "", "exact f32 (cuBLAS: CUBLAS_DEFAULT_MATH)", "tf32 (cuBLAS: CUBLAS_TF32_TENSOR_OP_MATH)");
  printf("%-6s %-22s", "op", "shape");
  for (int t = 0; t < 2; t++) printf(" %9s %9s %8s %8s %6s %-11s", "dyn ms", "cuBLAS ms", "dyn GF/s", "cuBLAS", "ratio", "tile/split");
  putchar('\n');
  char line[256];
  FILE *f = open_shapes(dir, "gemm.txt");
  while (f && fgets(line, sizeof line, f)) {
    long long m, n, k;
    if (line[0] == '#' || sscanf(line, "%lld %lld %lld", &m, &n, &k) != 3) continue;
    gemm_row("gemm", 1, m, n, k);
  }
  if (f) fclose(f);
  f = open_shapes(dir, "bmm.txt");
  while (f && fgets(line, sizeof line, f)) {
    long long b, m, n, k;
    if (line[0] == '#' || sscanf(line, "%lld %lld %lld %lld", &b, &m, &n, &k) != 4) continue;
    gemm_row("bmm", b, m, n, k);
  }
  if (f) fclose(f);
  for (int t = 0; t < 2; t++)
    if (geo_n[t])
      printf("geometric mean of cuBLAS time / dyn time, %s, over %d shapes: %.2f (above 1: dyn is faster)\n", t ? "tf32" : "exact f32",
             geo_n[t], exp(geo_sum[t] / geo_n[t]));
  double bw = hw->level[hw->nlevels - 1].gbs;
  printf("\n%-10s %-18s %10s %9s %9s  (ratio: the bandwidth bound's time / dyn's)\n", "op", "rows x cols", "dyn ms", "GB/s", "ratio");
  f = open_shapes(dir, "rowwise.txt");
  double gs = 0;
  int gn = 0;
  while (f && fgets(line, sizeof line, f)) {
    char op[32];
    long long rows, cols;
    if (line[0] == '#' || sscanf(line, "%31s %lld %lld", op, &rows, &cols) != 3) continue;
    Func *fn = lookup(NULL, op);
    if (!fn) continue;
    char sizes[96];
    snprintf(sizes, sizeof sizes, "B=%lld N=%lld", rows, cols);
    double t = time_dyn(fn, CUDA_EXACT, sizes);
    double bytes = 2.0 * rows * cols * 4 + (strcmp(op, "layernorm") ? 0 : 2.0 * cols * 4);
    double gbs = bytes / t / 1e6, ratio = bytes / (bw * 1e9) * 1e3 / t;
    printf("%-10s %-18s %10.4f %9.0f %9.2f\n", op, sizes, t, gbs, ratio);
    gs += log(ratio);
    gn++;
  }
  if (f) fclose(f);
  if (gn) printf("geometric mean of the bandwidth ratio over %d shapes: %.2f\n", gn, exp(gs / gn));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "--check") && strcmp(argv[1], "--check-tf32") && strcmp(argv[1], "--bench"))) {
    fprintf(stderr, "usage: bench_gpu --check [NAME] | --check-tf32 [NAME] | --bench DIR\n");
    return 2;
  }
  load_stdlib();
  char why[1024];
  be = cuda_backend_new(NULL, why, sizeof why);
  if (!be) {
    printf("bench_gpu: no GPU: %s\n", why);
    return 77;
  }
  const char *arg = argc > 2 ? argv[2] : NULL;
  int rc = !strcmp(argv[1], "--check")        ? check_all(arg, CUDA_EXACT)
           : !strcmp(argv[1], "--check-tf32") ? check_all(arg, CUDA_TF32)
                                              : bench(arg ? arg : "../shared/bench");
  return rc;
}
