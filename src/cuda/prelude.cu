/* ---- prelude: the types and helpers every kernel of this module shares ---- */
typedef long long i64;
typedef unsigned long long u64;
#define DYN_INF_F __int_as_float(0x7f800000)
#define DYN_NAN_F __int_as_float(0x7fffffff)
#define DYN_INF_D __longlong_as_double(0x7ff0000000000000LL)
#define DYN_NAN_D __longlong_as_double(0x7fffffffffffffffLL)
#define DYN_I32_MIN (-2147483647 - 1)
#define DYN_I32_MAX 2147483647
#define DYN_I64_MIN (-9223372036854775807LL - 1)
#define DYN_I64_MAX 9223372036854775807LL

/* Integers wrap around (two's complement), as the reference evaluator defines them. */
__device__ __forceinline__ int dyn_add(int x, int y) { return (int)((unsigned)x + (unsigned)y); }
__device__ __forceinline__ i64 dyn_add(i64 x, i64 y) { return (i64)((u64)x + (u64)y); }
__device__ __forceinline__ float dyn_add(float x, float y) { return x + y; }
__device__ __forceinline__ double dyn_add(double x, double y) { return x + y; }
__device__ __forceinline__ int dyn_sub(int x, int y) { return (int)((unsigned)x - (unsigned)y); }
__device__ __forceinline__ i64 dyn_sub(i64 x, i64 y) { return (i64)((u64)x - (u64)y); }
__device__ __forceinline__ int dyn_mul(int x, int y) { return (int)((unsigned)x * (unsigned)y); }
__device__ __forceinline__ i64 dyn_mul(i64 x, i64 y) { return (i64)((u64)x * (u64)y); }
__device__ __forceinline__ float dyn_mul(float x, float y) { return x * y; }
__device__ __forceinline__ double dyn_mul(double x, double y) { return x * y; }
__device__ __forceinline__ int dyn_neg(int x) { return (int)(0u - (unsigned)x); }
__device__ __forceinline__ i64 dyn_neg(i64 x) { return (i64)(0ull - (u64)x); }
__device__ __forceinline__ int dyn_abs(int x) { return x < 0 ? dyn_neg(x) : x; }
__device__ __forceinline__ i64 dyn_abs(i64 x) { return x < 0 ? dyn_neg(x) : x; }

/* q / d for q >= 0, d > 0: the index arithmetic of flattened loops, once per row.  32-bit
 * division when both fit; else long division (64 steps, no call to the 64-bit division
 * routine, whose saved registers ptxas would report as spills). */
__device__ __forceinline__ i64 dyn_udiv(i64 q, i64 d) {
  if ((((u64)q | (u64)d) >> 32) == 0) return (i64)((unsigned)q / (unsigned)d);
  u64 n = (u64)q, r = 0, quo = 0;
  for (int i = 63; i >= 0; i--) {
    r = r << 1 | (n >> i & 1);
    if (r >= (u64)d) {
      r -= (u64)d;
      quo |= 1ull << i;
    }
  }
  return (i64)quo;
}

/* Floor division and modulo, like Python; a zero divisor sets the error flag. */
template <typename T> __device__ __forceinline__ T dyn_div(T x, T y, int &bad) {
  if (y == 0) { bad = 1; return 0; }
  if (y == -1) return dyn_neg(x);
  T q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) q -= 1;
  return q;
}
template <typename T> __device__ __forceinline__ T dyn_mod(T x, T y, int &bad) {
  if (y == 0) { bad = 1; return 0; }
  if (y == -1) return 0;
  T m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return m;
}
__device__ __forceinline__ float dyn_fmod(float x, float y) {
  float m = fmodf(x, y);
  return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
}
__device__ __forceinline__ double dyn_fmod(double x, double y) {
  double m = fmod(x, y);
  return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
}
/* Integer power by repeated multiplication, as the reference evaluator computes it. */
template <typename T> __device__ T dyn_ipow(T x, T y) {
  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y % 2) ? -1 : 1) : 0;
  T r = 1;
  for (T k = 0; k < y && k < 64; k++) r = dyn_mul(r, x);
  return r;
}

/* max and min propagate NaN (fmaxf would drop it). */
__device__ __forceinline__ float dyn_max(float x, float y) { return x != x || y != y ? DYN_NAN_F : x > y ? x : y; }
__device__ __forceinline__ float dyn_min(float x, float y) { return x != x || y != y ? DYN_NAN_F : x < y ? x : y; }
__device__ __forceinline__ double dyn_max(double x, double y) { return x != x || y != y ? DYN_NAN_D : x > y ? x : y; }
__device__ __forceinline__ double dyn_min(double x, double y) { return x != x || y != y ? DYN_NAN_D : x < y ? x : y; }
__device__ __forceinline__ int dyn_max(int x, int y) { return x > y ? x : y; }
__device__ __forceinline__ int dyn_min(int x, int y) { return x < y ? x : y; }
__device__ __forceinline__ i64 dyn_max(i64 x, i64 y) { return x > y ? x : y; }
__device__ __forceinline__ i64 dyn_min(i64 x, i64 y) { return x < y ? x : y; }

/* Float to integer: toward zero, saturating, NaN to 0 (cvt.rzi saturates). */
__device__ __forceinline__ int dyn_f2i32(float x) { return x != x ? 0 : __float2int_rz(x); }
__device__ __forceinline__ int dyn_f2i32(double x) { return x != x ? 0 : __double2int_rz(x); }
__device__ __forceinline__ i64 dyn_f2i64(float x) { return x != x ? 0 : __float2ll_rz(x); }
__device__ __forceinline__ i64 dyn_f2i64(double x) { return x != x ? 0 : __double2ll_rz(x); }

/* f16 and bf16 are stored as their bit patterns and computed in f32: a load widens (exact),
 * a store or a cast rounds to nearest, ties to even, as the reference evaluator does (written
 * here rather than taken from cuda_fp16.h, so that the kernels need no header). */
__device__ __forceinline__ float dyn_bf16_f32(unsigned short h) { return __int_as_float((int)((unsigned)h << 16)); }
__device__ __forceinline__ unsigned short dyn_f32_bf16(float x) {
  unsigned u = (unsigned)__float_as_int(x);
  return (unsigned short)(x != x ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float dyn_f16_f32(unsigned short h) {
  unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return __int_as_float((int)(s | 0x7f800000u | (m << 13)));
  if (e == 0) return s ? -(float)m * 5.9604644775390625e-8f : (float)m * 5.9604644775390625e-8f;  /* m * 2^-24 */
  return __int_as_float((int)(s | ((e + 112) << 23) | (m << 13)));
}
__device__ __forceinline__ unsigned short dyn_f32_f16(float x) {
  unsigned u = (unsigned)__float_as_int(x), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);                 /* NaN */
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);                /* 65520 and up: inf */
  if (a < 0x38800000u) return (unsigned short)(s | (unsigned)rintf(__int_as_float((int)a) * 16777216.0f)); /* subnormal */
  return (unsigned short)(s | (((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - (112u << 10)));
}

/* Lane l of a 16-byte vector (l is a constant once the lane loop is unrolled). */
__device__ __forceinline__ float dyn_lane(float4 v, int l) { return l == 0 ? v.x : l == 1 ? v.y : l == 2 ? v.z : v.w; }
__device__ __forceinline__ int dyn_lane(int4 v, int l) { return l == 0 ? v.x : l == 1 ? v.y : l == 2 ? v.z : v.w; }

/* The reductions' combining steps. */
struct DynSum { template <typename T> __device__ static T op(T x, T y) { return dyn_add(x, y); } };
struct DynProd { template <typename T> __device__ static T op(T x, T y) { return dyn_mul(x, y); } };
struct DynMax { template <typename T> __device__ static T op(T x, T y) { return dyn_max(x, y); } };
struct DynMin { template <typename T> __device__ static T op(T x, T y) { return dyn_min(x, y); } };

/* Level warp, then block: combine one value per thread over the LANES threads of a row
 * (threadIdx.x; ROWS rows per block along threadIdx.y).  Butterfly shuffles inside each warp;
 * with more than one warp per row, one slot per warp in shared memory (buf: ROWS x LANES/32),
 * read back in the same order by every thread, so all get the same, deterministic result. */
template <typename OP, int LANES, int ROWS, typename T>
__device__ __forceinline__ T dyn_row_reduce(T v, T *buf) {
#pragma unroll
  for (int o = (LANES < 32 ? LANES : 32) / 2; o > 0; o /= 2) v = OP::op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (LANES <= 32) return v;
  constexpr int W = LANES / 32 > 0 ? LANES / 32 : 1;
  T *row = buf + threadIdx.y * W;
  __syncthreads();                       /* an earlier reduction has read the buffer */
  if ((threadIdx.x & 31) == 0) row[threadIdx.x / 32] = v;
  __syncthreads();
  T r = row[0];
#pragma unroll
  for (int w = 1; w < W; w++) r = OP::op(r, row[w]);
  return r;
}

/* Copies from global to shared memory: asynchronous (cp.async, zero-filling past `bytes`)
 * from sm_80 on, plain loads and stores before.  16 bytes: four f32, two f64 or eight f16 or
 * bf16 (`bytes` a multiple of 2); one element: 4 or 8 bytes, or 2 of a 16-bit type, which
 * cp.async cannot move (its least is 4): a plain load and store on every GPU. */
__device__ __forceinline__ void dyn_cp16(void *s, const void *g, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g), "r"(bytes));
#else
  if (bytes >= 16) *(float4 *)s = *(const float4 *)g;
  else {
    unsigned short *d = (unsigned short *)s;
    const unsigned short *h = (const unsigned short *)g;
    for (int i = 0; i < 8; i++) d[i] = 2 * i < bytes ? h[i] : (unsigned short)0;
  }
#endif
}
__device__ __forceinline__ void dyn_cp4(float *s, const float *g, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g), "r"(bytes));
#else
  *s = bytes ? *g : 0.f;
#endif
}
__device__ __forceinline__ void dyn_cp4(double *s, const double *g, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)), "l"(g), "r"(bytes));
#else
  *s = bytes ? *g : 0.0;
#endif
}
__device__ __forceinline__ void dyn_cp4(unsigned short *s, const unsigned short *g, int bytes) { *s = bytes ? *g : (unsigned short)0; }
__device__ __forceinline__ void dyn_cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void dyn_cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* Stage a ROWS x COLS tile of T (f32, f64, or the bits of f16 or bf16) into shared memory
 * (row pitch LD elements): element (r, c) is g[r * sr + c * sc] when r < nr and c < nc, else
 * 0 (the edges of any shape).  With vec (sc == 1, sr and g 16-byte aligned: the host checks)
 * V = 4 (f32), 2 (f64) or 8 (16-bit) columns move per 16-byte copy; else one element per copy, consecutive threads along
 * the columns, or along the rows when ROW_FAST (the rows are contiguous in memory: a
 * transpose on the way). */
template <int ROWS, int COLS, int LD, int THREADS, bool ROW_FAST, typename T>
__device__ __forceinline__ void dyn_tile_load(T *s, const T *g, int nr, i64 nc, i64 sr, i64 sc, bool vec) {
  if (!ROW_FAST && vec) {
    constexpr int V = 16 / (int)sizeof(T), C4 = COLS / V, N = ROWS * C4;
#pragma unroll 1
    for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {
      const int t = threadIdx.x + i * THREADS;
      if (N % THREADS != 0 && t >= N) break;
      const int r = t / C4, c = t % C4 * V;
      const i64 left = nc - c;
      const int bytes = r < nr && left > 0 ? (left >= V ? 16 : (int)left * (int)sizeof(T)) : 0;
      dyn_cp16(s + r * LD + c, bytes ? g + r * sr + c : g, bytes);
    }
  } else {
    constexpr int N = ROWS * COLS;
#pragma unroll 1
    for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {
      const int t = threadIdx.x + i * THREADS;
      if (N % THREADS != 0 && t >= N) break;
      const int r = ROW_FAST ? t % ROWS : t / COLS, c = ROW_FAST ? t / ROWS : t % COLS;
      const bool in = r < nr && c < nc;
      dyn_cp4(s + r * LD + c, in ? g + r * sr + c * sc : g, in ? (int)sizeof(T) : 0);
    }
  }
}

/* Level block of every contraction, whatever its tile type G (DynGemm below: the CUDA cores;
 * DynMma: the tensor cores): acc += A[m0 .. m0 + BM, k0 .. k1) . B[k0 .. k1, n0 .. n0 + BN)
 * over k-steps of G::BK.  The A and B tiles of a step sit in shared memory, two buffers: the
 * copy of step t + 1 runs while step t is computed.  An operand keeps the layout it has in
 * memory ([BM][BK] when k is contiguous, else [BK][BM]; B likewise, as G::SB_KC says), so
 * copies move 16 bytes; past the edges of A and B the tiles hold zeros. */
template <class G>
__device__ __forceinline__ void dyn_gemm_load(typename G::T *sa, typename G::T *sb, const typename G::T *ga, const typename G::T *gb,
                                              int ma, int nb, i64 kl, i64 a_sm, i64 a_sk, i64 b_sk, i64 b_sn, bool avec, bool bvec) {
  constexpr int BK = G::BK;
  if (G::A_KC) dyn_tile_load<G::AR, G::AC, G::ALD, G::THREADS, false>(sa, ga, ma, kl, a_sm, a_sk, avec);
  else dyn_tile_load<G::AR, G::AC, G::ALD, G::THREADS, false>(sa, ga, kl < BK ? (int)kl : BK, ma, a_sk, a_sm, avec);
  if (G::SB_KC) dyn_tile_load<G::BR, G::BC, G::BLD, G::THREADS, false>(sb, gb, nb, kl, b_sn, b_sk, bvec);
  else dyn_tile_load<G::BR, G::BC, G::BLD, G::THREADS, G::B_KC>(sb, gb, kl < BK ? (int)kl : BK, nb, b_sk, b_sn, bvec && !G::B_KC);
}
/* the tile's origins move by a k-step each time, so only two pointers and the extents left
 * stay live; the accumulators are G::T's, or f32 where G stages 16-bit operands */
template <class G, typename Acc>
__device__ __forceinline__ void dyn_gemm_run(Acc (&acc)[G::TM][G::TN], typename G::T *sa, typename G::T *sb,
                                             const typename G::T *A, const typename G::T *B, i64 m0, i64 n0, i64 k0, i64 k1, i64 M,
                                             i64 N, i64 a_sm, i64 a_sk, i64 b_sk, i64 b_sn, bool avec, bool bvec) {
  constexpr int BM = G::BM, BN = G::BN, BK = G::BK;
  const int tx = G::tx(), ty = G::ty();
  const int nt = k1 > k0 ? (int)((k1 - k0 + BK - 1) / BK) : 0;
  const int ma = M - m0 < BM ? (int)(M - m0) : BM, nb = N - n0 < BN ? (int)(N - n0) : BN;
  const typename G::T *ga = A + m0 * a_sm + k0 * a_sk, *gb = B + k0 * b_sk + n0 * b_sn;
  i64 kl = k1 - k0;
  if (nt > 0) dyn_gemm_load<G>(sa, sb, ga, gb, ma, nb, kl, a_sm, a_sk, b_sk, b_sn, avec, bvec);
  dyn_cp_commit();
  for (int t = 0; t < nt; t++) {
    if (t + 1 < nt) {
      ga += BK * a_sk;
      gb += BK * b_sk;
      kl -= BK;
      dyn_gemm_load<G>(sa + ((t + 1) & 1) * G::ATILE, sb + ((t + 1) & 1) * G::BTILE, ga, gb, ma, nb, kl, a_sm, a_sk, b_sk, b_sn, avec, bvec);
    }
    dyn_cp_commit();
    dyn_cp_wait<1>();
    __syncthreads();
    G::compute(acc, sa + (t & 1) * G::ATILE, sb + (t & 1) * G::BTILE, tx, ty);
    __syncthreads();
  }
}

/* Four consecutive elements from shared memory: one 16-byte read of f32, two of f64. */
__device__ __forceinline__ void dyn_ld4(const float *p, float (&q)[4]) {
  const float4 v = *(const float4 *)p;
  q[0] = v.x; q[1] = v.y; q[2] = v.z; q[3] = v.w;
}
__device__ __forceinline__ void dyn_ld4(const double *p, double (&q)[4]) {
  const double2 v = *(const double2 *)p, w = *(const double2 *)(p + 2);
  q[0] = v.x; q[1] = v.y; q[2] = w.x; q[3] = w.y;
}
__device__ __forceinline__ float dyn_fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double dyn_fma(double a, double b, double c) { return fma(a, b, c); }

/* The levels below the block of a contraction on the CUDA cores (exact FMA, in T: f32 or
 * f64):
 *   block:  THREADS threads; only when both operands keep k contiguous is B transposed on the
 *           way ([BK][BN]).  Rows are padded by 4 elements: 16-byte aligned, and successive
 *           rows change banks.
 *   thread: TM x TN outputs in registers, rows row(ty, i), columns col(tx, j): in runs of four
 *           where a dyn_ld4 read covers them, interleaved where each is read on its own. */
template <int BM_, int BN_, int BK_, int TM_, int TN_, bool A_KC_, bool B_KC_, typename T_ = float>
struct DynGemm {
  typedef T_ T;
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
  static constexpr bool A_KC = A_KC_, B_KC = B_KC_;
  static constexpr int THREADS = (BM / TM) * (BN / TN);
  static constexpr bool SB_KC = B_KC && !A_KC;
  static constexpr int AR = A_KC ? BM : BK, AC = A_KC ? BK : BM, ALD = AC + 4, ATILE = AR * ALD;
  static constexpr int BR = SB_KC ? BN : BK, BC = SB_KC ? BK : BN, BLD = BC + 4, BTILE = BR * BLD;
  static __device__ __forceinline__ int tx() { return threadIdx.x % (BN / TN); }
  static __device__ __forceinline__ int ty() { return threadIdx.x / (BN / TN); }
  static __device__ __forceinline__ int row(int ty, int i) {
    return A_KC ? ty + (BM / TM) * i : (i / 4) * (BM * 4 / TM) + ty * 4 + i % 4;
  }
  static __device__ __forceinline__ int col(int tx, int j) {
    return SB_KC ? tx + (BN / TN) * j : (j / 4) * (BN * 4 / TN) + tx * 4 + j % 4;
  }
  /* One k-step: the operand that keeps k contiguous is read a quad of k at a time (dyn_ld4
   * along k), the other one k at a time (dyn_ld4 along m or n). */
  static __device__ __forceinline__ void compute(T (&acc)[TM][TN], const T *sa, const T *sb, int tx, int ty) {
#pragma unroll
    for (int kq = 0; kq < BK; kq += 4) {
      T a[TM][4];
      if constexpr (A_KC) {
#pragma unroll
        for (int i = 0; i < TM; i++) dyn_ld4(sa + row(ty, i) * ALD + kq, a[i]);
      }
      if constexpr (SB_KC) {
#pragma unroll
        for (int j = 0; j < TN; j++) {
          T b[4];
          dyn_ld4(sb + col(tx, j) * BLD + kq, b);
#pragma unroll
          for (int u = 0; u < 4; u++) {
            if constexpr (!A_KC) {
              if (j == 0) {
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                  T w[4];
                  dyn_ld4(sa + (kq + u) * ALD + row(ty, i), w);
                  a[i][u] = w[0]; a[i + 1][u] = w[1]; a[i + 2][u] = w[2]; a[i + 3][u] = w[3];
                }
              }
            }
#pragma unroll
            for (int i = 0; i < TM; i++) acc[i][j] = dyn_fma(a[i][u], b[u], acc[i][j]);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          T b[TN];
#pragma unroll
          for (int j = 0; j < TN; j += 4) {
            T v[4];
            dyn_ld4(sb + (kq + u) * BLD + col(tx, j), v);
            b[j] = v[0]; b[j + 1] = v[1]; b[j + 2] = v[2]; b[j + 3] = v[3];
          }
          if constexpr (!A_KC) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
              T w[4];
              dyn_ld4(sa + (kq + u) * ALD + row(ty, i), w);
              a[i][u] = w[0]; a[i + 1][u] = w[1]; a[i + 2][u] = w[2]; a[i + 3][u] = w[3];
            }
          }
#pragma unroll
          for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = dyn_fma(a[i][u], b[j], acc[i][j]);
        }
      }
    }
  }
};
