/* gemm_hpack.c -- the 16-bit engine's data movement (gemm_half.c): bf16 panels packed as
 * pairs along k for vdpbf16ps, f16 and bf16 rows widened to f32 and f32 rows rounded back.
 * It is C, so it cannot follow the model's ISA as the JIT'd kernels do: the unit-stride
 * loops are written in GCC's vector extension and compiled for three instruction sets, the
 * loader picking the host's (as cpu_attn.c's), and f16 converts with F16C's vcvtph2ps and
 * vcvtps2ph where the host has it.  Other strides take the scalar loops.  A panel's zero
 * columns past the last line are written inline: GCC made of each row's a memset call (13 x
 * 33 x 385 packs a panel of one line in twelve and one in thirty-two, a call a pair of k:
 * about a tenth of its 5 us on 2 threads of Zen 5, sampled by perf); its loop-to-call
 * pattern is turned off for these functions, which then need their optimisation level
 * restated (an optimize attribute starts from the defaults). */
#include "config.h"
#include "dyn_int.h"
#include "gemm_int.h"

#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define HPACK_CLONES                                                                                  \
  __attribute__((optimize("O3", "no-tree-loop-distribute-patterns"),                                  \
                 target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define HPACK_F16C 1
#else
#define HPACK_CLONES
#define HPACK_F16C 0
#endif

/* the helpers are inlined into each clone: their vector arguments never cross a call */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef uint16_t vh16 __attribute__((vector_size(32)));
typedef uint32_t vu16 __attribute__((vector_size(64)));
typedef uint32_t vu4 __attribute__((vector_size(16)));

/* ---- scalar conversions ---- */

static inline float bf16_widen(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* To nearest even, NaNs kept quiet with their top payload bits (as half_bf16_from). */
static inline uint16_t bf16_narrow(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* f16 by integer operations, for hosts without F16C.  Widening moves the exponent and
 * re-biases it; subnormals are scaled by a float subtraction, infinities and NaNs get the
 * f32 exponent. */
static inline float f16_widen(uint16_t h) {
  uint32_t u = (uint32_t)(h & 0x7fff) << 13, e = u & (0x7c00u << 13);
  float f;
  u += (127 - 15) << 23;
  if (e == 0x7c00u << 13) u += (128 - 16) << 23;        /* infinity or NaN */
  memcpy(&f, &u, 4);
  if (e == 0) {                                          /* zero or subnormal */
    u += 1 << 23;
    memcpy(&f, &u, 4);
    f -= 6.103515625e-05f;                               /* 2^-14 */
  }
  memcpy(&u, &f, 4);
  u |= (uint32_t)(h & 0x8000) << 16;
  memcpy(&f, &u, 4);
  return f;
}

/* To nearest even: above the largest finite f16 an infinity (a NaN stays a quiet NaN),
 * below the smallest normal an addition that lets the FPU round the subnormal, else the
 * mantissa rounded by an addition of half an ulp less one, plus its last kept bit. */
static inline uint16_t f16_narrow(float f) {
  uint32_t u, sign;
  memcpy(&u, &f, 4);
  sign = u & 0x80000000u;
  u ^= sign;
  uint16_t o;
  if (u >= (127u + 16) << 23) {
    o = u > 255u << 23 ? 0x7e00 : 0x7c00;
  } else if (u < 113u << 23) {
    const uint32_t magic = ((127u - 15) + (23 - 10) + 1) << 23;
    float x, m;
    memcpy(&x, &u, 4);
    memcpy(&m, &magic, 4);
    x += m;
    memcpy(&u, &x, 4);
    o = (uint16_t)(u - magic);
  } else {
    uint32_t odd = (u >> 13) & 1;
    u += ((uint32_t)(15 - 127) << 23) + 0xfff + odd;
    o = (uint16_t)(u >> 13);
  }
  return (uint16_t)(o | sign >> 16);
}

/* ---- bf16 rows, 16 lanes at a time ---- */

static HPACK_CLONES void bf16_widen_unit(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    vh16 h;
    memcpy(&h, s + i, sizeof h);
    vu16 u = __builtin_convertvector(h, vu16) << 16;
    memcpy(d + i, &u, sizeof u);
  }
  for (; i < n; i++) d[i] = bf16_widen(s[i]);
}

/* bf16_narrow on 16 lanes: the NaN lanes chosen by a mask. */
static HPACK_CLONES void bf16_narrow_unit(const float *s, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    vu16 u;
    memcpy(&u, s + i, sizeof u);
    vu16 r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    vu16 q = (u >> 16) | 0x40;
    vu16 nan = (vu16)((u & 0x7fffffffu) > 0x7f800000u);
    vh16 h = __builtin_convertvector((q & nan) | (r & ~nan), vh16);
    memcpy(d + i, &h, sizeof h);
  }
  for (; i < n; i++) d[i] = bf16_narrow(s[i]);
}

/* ---- f16 rows: F16C where the host has it ---- */

#if HPACK_F16C
__attribute__((target("avx,f16c"))) static void f16_widen_f16c(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  for (; i < n; i++) d[i] = _cvtsh_ss(s[i]);
}

__attribute__((target("avx,f16c"))) static void f16_narrow_f16c(const float *s, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) d[i] = f16_narrow(s[i]);
}

static bool has_f16c(void) {
  static int have = -1;
  if (have < 0) have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return have;
}
#endif

void hpack_widen(bool bf, const uint16_t *s, int64_t ss, float *d, int64_t n) {
  if (ss == 1 && bf) bf16_widen_unit(s, d, n);
#if HPACK_F16C
  else if (ss == 1 && has_f16c()) f16_widen_f16c(s, d, n);
#endif
  else for (int64_t i = 0; i < n; i++) d[i] = bf ? bf16_widen(s[i * ss]) : f16_widen(s[i * ss]);
}

void hpack_narrow(bool bf, const float *s, uint16_t *d, int64_t ds, int64_t n) {
  if (ds == 1 && bf) bf16_narrow_unit(s, d, n);
#if HPACK_F16C
  else if (ds == 1 && has_f16c()) f16_narrow_f16c(s, d, n);
#endif
  else for (int64_t i = 0; i < n; i++) d[i * ds] = bf ? bf16_narrow(s[i]) : f16_narrow(s[i]);
}

/* ---- bf16 pairs along k ---- */

/* Lines in unit stride (B row-major): pair p's line l is s[2p][l] | s[2p+1][l] << 16, two
 * rows interleaved, 16 lines a step. */
static HPACK_CLONES void pairs_lines_unit(const uint16_t *s, int64_t sk, int have, int w, int64_t kp,
                                          int64_t k, uint32_t *o) {
  for (int64_t p = 0; p < kp; p++, o += w) {
    const uint16_t *r0 = s + 2 * p * sk, *r1 = r0 + sk;
    bool two = 2 * p + 1 < k;
    int l = 0;
    for (; l + 16 <= have; l += 16) {
      vh16 x, y = {0};
      memcpy(&x, r0 + l, sizeof x);
      if (two) memcpy(&y, r1 + l, sizeof y);
      vu16 v = __builtin_convertvector(x, vu16) | __builtin_convertvector(y, vu16) << 16;
      memcpy(o + l, &v, sizeof v);
    }
    for (; l < have; l++) o[l] = r0[l] | (two ? (uint32_t)r1[l] << 16 : 0);
    for (; l < w; l++) o[l] = 0;
  }
}

/* k in unit stride (A row-major, B read as its transpose): a line's pairs are its 32-bit
 * words, so the panel is a transpose of words, done 4 lines by 4 pairs at a time. */
static HPACK_CLONES void pairs_k_unit(const uint16_t *s, int64_t ls, int have, int w, int64_t kp,
                                      int64_t k, uint32_t *o) {
  int64_t kf = k / 2;                          /* whole pairs; an odd k's last is half */
  int l = 0;
  for (; l + 4 <= have; l += 4) {
    const uint16_t *r[4] = { s + l * ls, s + (l + 1) * ls, s + (l + 2) * ls, s + (l + 3) * ls };
    int64_t p = 0;
    for (; p + 4 <= kf; p += 4) {
      vu4 x[4];
      for (int j = 0; j < 4; j++) memcpy(&x[j], r[j] + 2 * p, 16);
      vu4 t0 = __builtin_shufflevector(x[0], x[1], 0, 4, 1, 5);
      vu4 t1 = __builtin_shufflevector(x[2], x[3], 0, 4, 1, 5);
      vu4 t2 = __builtin_shufflevector(x[0], x[1], 2, 6, 3, 7);
      vu4 t3 = __builtin_shufflevector(x[2], x[3], 2, 6, 3, 7);
      vu4 y0 = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
      vu4 y1 = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
      vu4 y2 = __builtin_shufflevector(t2, t3, 0, 1, 4, 5);
      vu4 y3 = __builtin_shufflevector(t2, t3, 2, 3, 6, 7);
      memcpy(o + p * w + l, &y0, 16);
      memcpy(o + (p + 1) * w + l, &y1, 16);
      memcpy(o + (p + 2) * w + l, &y2, 16);
      memcpy(o + (p + 3) * w + l, &y3, 16);
    }
    for (int j = 0; j < 4; j++)
      for (int64_t q = p; q < kp; q++)
        o[q * w + l + j] = r[j][2 * q] | (2 * q + 1 < k ? (uint32_t)r[j][2 * q + 1] << 16 : 0);
  }
  for (; l < have; l++)
    for (int64_t q = 0; q < kp; q++)
      o[q * w + l] = s[l * ls + 2 * q] | (2 * q + 1 < k ? (uint32_t)s[l * ls + 2 * q + 1] << 16 : 0);
  for (int64_t q = 0; q < kp && have < w; q++)
    for (int j = have; j < w; j++) o[q * w + j] = 0;
}

void hpack_pairs(const uint16_t *s, int64_t ls, int64_t sk, int64_t l0, int64_t lines, int w,
                 int64_t kp, int64_t k, uint32_t *o) {
  int have = (int)imax(0, imin(w, lines - l0));
  s += l0 * ls;
  if (ls == 1) {
    pairs_lines_unit(s, sk, have, w, kp, k, o);
    return;
  }
  if (sk == 1) {
    pairs_k_unit(s, ls, have, w, kp, k, o);
    return;
  }
  for (int64_t p = 0; p < kp; p++, o += w) {
    const uint16_t *r = s + 2 * p * sk;
    if (2 * p + 1 < k)
      for (int l = 0; l < have; l++) o[l] = r[l * ls] | (uint32_t)r[l * ls + sk] << 16;
    else
      for (int l = 0; l < have; l++) o[l] = r[l * ls];
    for (int l = have; l < w; l++) o[l] = 0;
  }
}
