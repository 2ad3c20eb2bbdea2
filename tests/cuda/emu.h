/* emu.h -- runs dyn's generated CUDA C on the CPU, for tests on machines without a GPU.
 *
 * fakecuda.cc compiles a module with g++ and `-include emu.h`: this header maps the CUDA
 * keywords and intrinsics the generated code uses onto C++ and POSIX threads.  A launch runs
 * the blocks one after another; the threads of a block are real threads, so __syncthreads,
 * __syncwarp and __shfl_xor_sync are real barriers and exchanges, and shared memory (static
 * storage) is reused block after block.  Slow, but it executes exactly the code NVRTC sees
 * (on the paths of GPUs before sm_80: cp.async becomes plain copies).  The tensor cores'
 * instructions, which have no such path, are emulated below (dyn_emu_*): the roundings of
 * cvt.rna.tf32.f32 and cvt.rn.bf16x2.f32, and mma.sync (tf32, bf16, f16) as the warp-wide
 * operation it is,
 * with the PTX ISA's fragment layouts, so that a fragment in the wrong place gives a wrong
 * product. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __restrict__

struct dim3 { unsigned x, y, z; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static thread_local unsigned emu_tid;          /* linear thread index in the block */
static pthread_barrier_t emu_block_bar;
static pthread_barrier_t emu_warp_bar[32];
static uint64_t emu_shfl[1024];

static inline void __syncthreads() { pthread_barrier_wait(&emu_block_bar); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; pthread_barrier_wait(&emu_warp_bar[emu_tid / 32]); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int o) {
  (void)mask;
  static_assert(sizeof(T) <= 8, "shuffle of a wide type");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  emu_shfl[emu_tid] = bits;
  __syncwarp();
  uint64_t got = emu_shfl[(emu_tid & ~31u) | ((emu_tid & 31u) ^ (unsigned)o)];
  __syncwarp();
  T r;
  memcpy(&r, &got, sizeof r);
  return r;
}

template <typename T> static inline T __ldg(const T *p) { return *p; }

static inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
static inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
static inline double __longlong_as_double(long long v) { double f; memcpy(&f, &v, 8); return f; }

/* cvt.rzi: toward zero, saturating (NaN is handled by the callers) */
template <typename I, typename F> static inline I emu_sat(F x, I lo, I hi) {
  if (x <= (F)lo) return lo;
  if (x >= (F)hi) return hi;
  return (I)x;
}
static inline int __float2int_rz(float x) { return emu_sat<int, double>(x, INT32_MIN, INT32_MAX); }
static inline int __double2int_rz(double x) { return emu_sat<int, double>(x, INT32_MIN, INT32_MAX); }
static inline long long __float2ll_rz(float x) { return emu_sat<long long, double>(x, INT64_MIN, INT64_MAX); }
static inline long long __double2ll_rz(double x) { return emu_sat<long long, double>(x, INT64_MIN, INT64_MAX); }

/* ---- the tensor cores ---- */

static inline uint32_t emu_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float emu_float(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* cvt.rna.tf32.f32: to nearest, ties away from zero, 10 bits of mantissa kept (the low 13 of
 * the f32 are zero); NaN becomes the canonical NaN, infinities stay, and values that round
 * past the largest finite one become infinite. */
static inline unsigned dyn_emu_tf32(float x) {
  uint32_t u = emu_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) ? 0x7fffffffu : u;
  return (u + 0x1000u) & 0xffffe000u;
}

/* cvt.rn.bf16x2.f32 d, hi, lo: each to nearest, ties to even, 7 bits of mantissa kept; lo in
 * the low half. */
static inline uint32_t emu_bf16(float x) {
  uint32_t u = emu_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return 0x7fffu;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
static inline unsigned dyn_emu_bf16x2(float lo, float hi) { return emu_bf16(lo) | emu_bf16(hi) << 16; }

/* An f16 bit pattern's value (every f16 is exact in f32): subnormals m 2^-24, infinities and
 * NaNs kept. */
static inline float emu_f16(uint32_t h) {
  const uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return emu_float(s | 0x7f800000u | (m << 13));
  if (e == 0) return s ? -ldexpf((float)m, -24) : ldexpf((float)m, -24);
  return emu_float(s | ((e + 112) << 23) | (m << 13));
}

/* The k-th 16-bit operand of a fragment's word (k = 0: the low half) as f32. */
enum { EMU_TF32, EMU_BF16, EMU_F16 };
template <int KIND> static inline float emu_half(uint32_t w, int k) {
  const uint32_t h = k ? w >> 16 : w & 0xffffu;
  return KIND == EMU_F16 ? emu_f16(h) : emu_float(h << 16);
}

static uint32_t emu_frag[1024][6];   /* each thread's A and B fragments, for its warp's mma */

/* mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (KIND EMU_TF32) and m16n8k16 ... .bf16
 * or .f16 (EMU_BF16, EMU_F16: the same layouts): every lane of the warp publishes its fragments; each then rebuilds the warp's A
 * (16 x K) and B (K x 8) from all 32 with the layouts of the PTX ISA ("Matrix Fragments for
 * mma.m16n8k8", "... for mma.m16n8k16 with floating point type"), g = lane / 4, t = lane % 4:
 *   tf32  a[r]: A[g + 8 (r & 1)][t + 4 (r >> 1)]                 b[r]: B[t + 4r][g]
 *   16-bit a[r]: A[g + 8 (r & 1)][2t + 8 (r >> 1) + {0 low half, 1 high}]
 *         b[r]: B[2t + 8r + {0 low, 1 high}][g]
 * and computes its own outputs d[i] = C[g + 8 (i >> 1)][2t + (i & 1)] + the sum over k, the
 * products exact (tf32 x tf32, bf16 x bf16 and f16 x f16 fit in f32) and summed in f32 in k order.  As the
 * tensor cores do, a tf32 operand's low 13 bits are ignored. */
template <int KIND>
static void emu_mma(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {
  constexpr bool BF16 = KIND != EMU_TF32;    /* a 16-bit type: pairs of k in each word */
  constexpr int K = BF16 ? 16 : 8;
  const unsigned warp0 = emu_tid & ~31u, lane = emu_tid & 31u;
  memcpy(emu_frag[emu_tid], a, sizeof a);
  memcpy(emu_frag[emu_tid] + 4, b, sizeof b);
  __syncwarp();
  float A[16][K], B[K][8];
  for (unsigned l = 0; l < 32; l++) {
    const uint32_t *f = emu_frag[warp0 + l];
    const unsigned g = l / 4, t = l % 4;
    for (unsigned r = 0; r < 4; r++) {
      const unsigned row = g + 8 * (r & 1);
      if (BF16) {
        A[row][2 * t + 8 * (r >> 1)] = emu_half<KIND>(f[r], 0);
        A[row][2 * t + 8 * (r >> 1) + 1] = emu_half<KIND>(f[r], 1);
      } else {
        A[row][t + 4 * (r >> 1)] = emu_float(f[r] & 0xffffe000u);
      }
    }
    for (unsigned r = 0; r < 2; r++) {
      if (BF16) {
        B[2 * t + 8 * r][g] = emu_half<KIND>(f[4 + r], 0);
        B[2 * t + 8 * r + 1][g] = emu_half<KIND>(f[4 + r], 1);
      } else {
        B[t + 4 * r][g] = emu_float(f[4 + r] & 0xffffe000u);
      }
    }
  }
  __syncwarp();    /* all have read the fragments before any lane publishes its next ones */
  float *d[4] = {&d0, &d1, &d2, &d3};
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; i++) {
    const unsigned row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    float s = *d[i];
    for (int k = 0; k < K; k++) s = fmaf(A[row][k], B[k][col], s);
    *d[i] = s;
  }
}
static inline void dyn_emu_mma_tf32(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {
  emu_mma<EMU_TF32>(d0, d1, d2, d3, a, b);
}
static inline void dyn_emu_mma_bf16(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {
  emu_mma<EMU_BF16>(d0, d1, d2, d3, a, b);
}
static inline void dyn_emu_mma_f16(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {
  emu_mma<EMU_F16>(d0, d1, d2, d3, a, b);
}

/* The launcher: the kernel takes its argument structure by value; every field is 8 bytes,
 * so a struct of as many words passes the same way (SysV x86-64 and AArch64). */
template <int N> struct EmuWords { uint64_t w[N]; };
template <int N> static void emu_call(void *fn, const void *p) {
  EmuWords<N> x;
  memcpy(&x, p, sizeof x);
  ((void (*)(EmuWords<N>))fn)(x);
}
typedef void (*EmuCaller)(void *, const void *);
template <int... I> static const EmuCaller *emu_callers(std::integer_sequence<int, I...>) {
  static const EmuCaller t[] = {emu_call<I + 1>...};
  return t;
}

struct EmuLaunch {
  void *fn;
  const void *args;
  int nwords;
  unsigned nthreads;
};

static void *emu_thread(void *arg) {
  EmuLaunch *L = (EmuLaunch *)((void **)arg)[0];
  unsigned tid = (unsigned)(uintptr_t)((void **)arg)[1];
  emu_tid = tid;
  threadIdx.x = tid % blockDim.x;
  threadIdx.y = tid / blockDim.x % blockDim.y;
  threadIdx.z = tid / (blockDim.x * blockDim.y);
  const EmuCaller *callers = emu_callers(std::make_integer_sequence<int, 256>{});
  for (unsigned z = 0; z < gridDim.z; z++)
    for (unsigned y = 0; y < gridDim.y; y++)
      for (unsigned x = 0; x < gridDim.x; x++) {
        blockIdx.x = x;
        blockIdx.y = y;
        blockIdx.z = z;
        callers[L->nwords - 1](L->fn, L->args);
        pthread_barrier_wait(&emu_block_bar);    /* the block is done before the next starts */
      }
  return NULL;
}

extern "C" int dyn_emu_launch(void *fn, const void *args, int nwords, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz) {
  if (nwords < 1 || nwords > 256) return 1;
  gridDim = dim3{gx, gy, gz};
  blockDim = dim3{bx, by, bz};
  unsigned n = bx * by * bz;
  if (n == 0 || n > 1024) return 1;
  EmuLaunch L = {fn, args, nwords, n};
  pthread_barrier_init(&emu_block_bar, NULL, n);
  for (unsigned w = 0; w < (n + 31) / 32; w++) pthread_barrier_init(&emu_warp_bar[w], NULL, n - w * 32 < 32 ? n - w * 32 : 32);
  pthread_t *th = (pthread_t *)calloc(n, sizeof(pthread_t));
  void *(*argv)[2] = (void *(*)[2])calloc(n, sizeof *argv);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  int rc = 0;
  for (unsigned t = 0; t < n; t++) {
    argv[t][0] = &L;
    argv[t][1] = (void *)(uintptr_t)t;
    if (pthread_create(&th[t], &attr, emu_thread, argv[t])) rc = 1;
  }
  for (unsigned t = 0; t < n; t++) pthread_join(th[t], NULL);
  pthread_attr_destroy(&attr);
  pthread_barrier_destroy(&emu_block_bar);
  for (unsigned w = 0; w < (n + 31) / 32; w++) pthread_barrier_destroy(&emu_warp_bar[w]);
  free(th);
  free(argv);
  return rc;
}
