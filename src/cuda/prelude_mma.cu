/* ---- the tensor cores: the f32 contractions of this module run on them, in the precision
 * its first lines name, and its f16 and bf16 contractions on their stored operands ---- */

/* f32 to the tensor cores' operand formats.  tf32: round to nearest, ties away from zero, to
 * 10 bits of mantissa (cvt.rna: an f32 bit pattern with the low 13 bits zero).  bf16x2: two
 * f32 rounded to nearest, ties to even, to 7 bits of mantissa; lo in the low half, the first
 * of a fragment's pair.  Compiled off the GPU (the tests' CPU emulator, tests/cuda/emu.h),
 * the dyn_emu_ functions compute the same. */
__device__ __forceinline__ unsigned dyn_tf32(float x) {
#ifdef __CUDA_ARCH__
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  return dyn_emu_tf32(x);
#endif
}
__device__ __forceinline__ unsigned dyn_bf16x2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return dyn_emu_bf16x2(lo, hi);
#endif
}

/* One warp, one 16 x 8 tile of C: d += a . b over 8 (tf32) or 16 (bf16, f16) of k, the products
 * summed in f32.  Each lane holds its fragments in the layouts of the PTX ISA ("Matrix
 * Fragments for mma.m16n8k8", "... for mma.m16n8k16"): with g = lane / 4 and t = lane % 4,
 *   tf32  a: A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4];  b: B[t][g], B[t + 4][g]
 *   bf16  a: A[g][2t, 2t + 1], A[g + 8][2t, 2t + 1], A[g][2t + 8, 2t + 9], A[g + 8][2t + 8, 2t + 9];
 *         b: B[2t, 2t + 1][g], B[2t + 8, 2t + 9][g]  (pairs packed by dyn_bf16x2, or read as
 *         stored); f16 likewise
 *   d:    C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1] */
__device__ __forceinline__ void dyn_mma_tf32(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef __CUDA_ARCH__
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  dyn_emu_mma_tf32(d0, d1, d2, d3, a, b);
#endif
}
/* m16n8k16 on bf16 operands, or on f16 (F16: the same layouts; f16 x f16 is exact in f32 too). */
#define DYN_MMA_K16(T)                                                                                                   \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
template <bool F16>
__device__ __forceinline__ void dyn_mma_k16(float &d0, float &d1, float &d2, float &d3, const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef __CUDA_ARCH__
  if constexpr (F16) DYN_MMA_K16("f16");
  else DYN_MMA_K16("bf16");
#else
  if constexpr (F16) dyn_emu_mma_f16(d0, d1, d2, d3, a, b);
  else dyn_emu_mma_bf16(d0, d1, d2, d3, a, b);
#endif
}

/* What a tile stages in shared memory: f32, or the stored bits of f16 and bf16 (H != 0). */
template <int H> struct DynMmaStage { typedef unsigned short T; };
template <> struct DynMmaStage<0> { typedef float T; };

/* The levels below the block of a contraction on the tensor cores (dyn_gemm_run stages the
 * tiles, in f32; with H = 1 (f16) or 2 (bf16) the operands as stored, 16 bits each):
 *   block:  WM x WN warps.  Rows are padded so that a warp's fragment reads hit 32 different
 *           banks: lanes step by g = 0..7 across C's rows (columns) and by t = 0..3 along k, so
 *           tf32 wants rows of 4 mod 32 floats where k is contiguous (4g + t) and 8 mod 32
 *           where it is not (8t + g); bf16 reads pairs of k, which swaps the two.  16-bit
 *           tiles pad 8 halves either way: where k is contiguous a lane reads the word of
 *           its pair (rows of 20 words: 20g + t), where it is not two halves of the rows 2t
 *           and 2t + 1 (8t + g / 2 words: two lanes share a word).
 *   warp:   a WTM x WTN tile of C, MI x NI mma tiles of 16 x 8; per KS of k it reads its A
 *           and B fragments from shared memory, rounding them to tf32 (bf16) on the way, or
 *           16-bit operands as they are, and runs MI x NI mma.sync.
 *   thread: the four outputs of each mma tile it holds: acc[i][j] is C[row(ty, i)][col(tx, j)],
 *           ty = the warp's first row + g, tx = its first column + 2t. */
template <int BM_, int BN_, int BK_, int WM, int WN, bool A_KC_, bool B_KC_, bool BF16, int H = 0>
struct DynMma {
  typedef typename DynMmaStage<H>::T T;
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr bool A_KC = A_KC_, B_KC = B_KC_, SB_KC = B_KC_;
  static constexpr int THREADS = WM * WN * 32, WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NI = WTN / 8;
  static constexpr int TM = 2 * MI, TN = 2 * NI, KS = BF16 || H ? 16 : 8;
  static constexpr int APAD = H ? 8 : A_KC ? (BF16 ? 8 : 4) : (BF16 ? 4 : 8), BPAD = H ? 8 : SB_KC ? (BF16 ? 8 : 4) : (BF16 ? 4 : 8);
  static constexpr int AR = A_KC ? BM : BK, AC = A_KC ? BK : BM, ALD = AC + APAD, ATILE = AR * ALD;
  static constexpr int BR = SB_KC ? BN : BK, BC = SB_KC ? BK : BN, BLD = BC + BPAD, BTILE = BR * BLD;
  static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % KS == 0, "a warp tile of whole mma tiles");
  static __device__ __forceinline__ int ty() { return threadIdx.x / 32 / WN * WTM + threadIdx.x % 32 / 4; }
  static __device__ __forceinline__ int tx() { return threadIdx.x / 32 % WN * WTN + threadIdx.x % 4 * 2; }
  static __device__ __forceinline__ int row(int ty, int i) { return ty + i / 2 * 16 + i % 2 * 8; }
  static __device__ __forceinline__ int col(int tx, int j) { return tx + j / 2 * 8 + j % 2; }
  /* fragments: A at row r, B at column c, element k (tf32) or the pair k, k + 1 (bf16: one
   * 8-byte read where k is contiguous) */
  static __device__ __forceinline__ unsigned a_tf32(const float *sa, int r, int k) {
    return dyn_tf32(A_KC ? sa[r * ALD + k] : sa[k * ALD + r]);
  }
  static __device__ __forceinline__ unsigned b_tf32(const float *sb, int k, int c) {
    return dyn_tf32(SB_KC ? sb[c * BLD + k] : sb[k * BLD + c]);
  }
  static __device__ __forceinline__ unsigned a_bf16(const float *sa, int r, int k) {
    if constexpr (A_KC) {
      const float2 v = *(const float2 *)(sa + r * ALD + k);
      return dyn_bf16x2(v.x, v.y);
    } else {
      return dyn_bf16x2(sa[k * ALD + r], sa[(k + 1) * ALD + r]);
    }
  }
  static __device__ __forceinline__ unsigned b_bf16(const float *sb, int k, int c) {
    if constexpr (SB_KC) {
      const float2 v = *(const float2 *)(sb + c * BLD + k);
      return dyn_bf16x2(v.x, v.y);
    } else {
      return dyn_bf16x2(sb[k * BLD + c], sb[(k + 1) * BLD + c]);
    }
  }
  /* 16-bit operands: the pair k, k + 1 as one word, k in the low half (one 4-byte read where
   * k is contiguous) */
  static __device__ __forceinline__ unsigned a_h16(const T *sa, int r, int k) {
    if constexpr (A_KC) return *(const unsigned *)(sa + r * ALD + k);
    else return (unsigned)sa[k * ALD + r] | (unsigned)sa[(k + 1) * ALD + r] << 16;
  }
  static __device__ __forceinline__ unsigned b_h16(const T *sb, int k, int c) {
    if constexpr (SB_KC) return *(const unsigned *)(sb + c * BLD + k);
    else return (unsigned)sb[k * BLD + c] | (unsigned)sb[(k + 1) * BLD + c] << 16;
  }
  /* One k-step of the block: BK / KS rounds of fragments and mma.sync. */
  static __device__ __forceinline__ void compute(float (&acc)[TM][TN], const T *sa, const T *sb, int tx, int ty) {
    const int t = threadIdx.x % 4;
    const int c0 = tx - 2 * t + threadIdx.x % 32 / 4;      /* column g of the warp's first B tile */
#pragma unroll
    for (int kk = 0; kk < BK; kk += KS) {
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; i++) {
        const int r = ty + 16 * i;
        if constexpr (H != 0) {
          a[i][0] = a_h16(sa, r, kk + 2 * t);
          a[i][1] = a_h16(sa, r + 8, kk + 2 * t);
          a[i][2] = a_h16(sa, r, kk + 2 * t + 8);
          a[i][3] = a_h16(sa, r + 8, kk + 2 * t + 8);
        } else if constexpr (BF16) {
          a[i][0] = a_bf16(sa, r, kk + 2 * t);
          a[i][1] = a_bf16(sa, r + 8, kk + 2 * t);
          a[i][2] = a_bf16(sa, r, kk + 2 * t + 8);
          a[i][3] = a_bf16(sa, r + 8, kk + 2 * t + 8);
        } else {
          a[i][0] = a_tf32(sa, r, kk + t);
          a[i][1] = a_tf32(sa, r + 8, kk + t);
          a[i][2] = a_tf32(sa, r, kk + t + 4);
          a[i][3] = a_tf32(sa, r + 8, kk + t + 4);
        }
      }
#pragma unroll
      for (int j = 0; j < NI; j++) {
        const int c = c0 + 8 * j;
        if constexpr (H != 0) {
          b[j][0] = b_h16(sb, kk + 2 * t, c);
          b[j][1] = b_h16(sb, kk + 2 * t + 8, c);
        } else if constexpr (BF16) {
          b[j][0] = b_bf16(sb, kk + 2 * t, c);
          b[j][1] = b_bf16(sb, kk + 2 * t + 8, c);
        } else {
          b[j][0] = b_tf32(sb, kk + t, c);
          b[j][1] = b_tf32(sb, kk + t + 4, c);
        }
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) {
          float &d0 = acc[2 * i][2 * j], &d1 = acc[2 * i][2 * j + 1], &d2 = acc[2 * i + 1][2 * j], &d3 = acc[2 * i + 1][2 * j + 1];
          if constexpr (BF16 || H) dyn_mma_k16<H == 1>(d0, d1, d2, d3, a[i], b[j]);
          else dyn_mma_tf32(d0, d1, d2, d3, a[i], b[j]);
        }
    }
  }
};
