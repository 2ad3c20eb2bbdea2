/* half.c -- the 16-bit float types f16 (IEEE binary16) and bf16 (bfloat16): conversions
 * between their bit patterns and doubles, rounding to nearest, ties to even.  Every part of
 * dyn that touches their storage goes through here: tensors (get, set, print), the reference
 * evaluator's loads, stores and casts, .npy files and the C API.  The compiled back ends do
 * the same conversions in their own code (LLVM's fpext/fptrunc and irb.c's bf16 rounding; the
 * CUDA prelude's dyn_f32_f16 and dyn_f32_bf16). */
#include "config.h"
#include <math.h>
#include <string.h>
#include "dyn_int.h"

/* x rounded once, to nearest even, to a binary format with mbits stored significand bits and
 * ebits exponent bits, as its bit pattern.  Rounding straight from the double, rather than
 * through f32, avoids double rounding for values that are not already f32 (a literal,
 * rand's numbers, an f64 tensor converted). */
static uint16_t narrow(double x, int mbits, int ebits) {
  int bias = (1 << (ebits - 1)) - 1, emax = bias, emin = 1 - bias;
  uint16_t sign = signbit(x) ? (uint16_t)(1u << (mbits + ebits)) : 0;
  uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
  if (isnan(x)) return (uint16_t)(sign | inf | (1u << (mbits - 1)));   /* a quiet NaN */
  double a = fabs(x);
  if (isinf(a)) return sign | inf;
  if (a < ldexp(1.0, emin)) {
    /* subnormal (or zero): a multiple of 2^(emin - mbits); 2^mbits of them is the smallest
     * normal number, whose pattern is the same integer */
    double q = nearbyint(ldexp(a, mbits - emin));
    return (uint16_t)(sign | (uint16_t)q);
  }
  int e;
  double m = frexp(a, &e);                   /* a = m * 2^e, m in [0.5, 1) */
  double q = nearbyint(ldexp(m, mbits + 1)); /* the significand with its hidden bit */
  if (q == ldexp(1.0, mbits + 1)) {          /* rounded up to the next power of two */
    q = ldexp(1.0, mbits);
    e++;
  }
  int ex = e - 1;
  if (ex > emax) return sign | inf;
  return (uint16_t)(sign | (uint16_t)((ex + bias) << mbits) | ((uint16_t)q - (1u << mbits)));
}

static double widen(uint16_t h, int mbits, int ebits) {
  int bias = (1 << (ebits - 1)) - 1;
  unsigned ex = (h >> mbits) & ((1u << ebits) - 1), man = h & ((1u << mbits) - 1);
  double v;
  if (ex == (1u << ebits) - 1) v = man ? NAN : INFINITY;
  else if (ex == 0) v = ldexp((double)man, 1 - bias - mbits);
  else v = ldexp((double)(man | (1u << mbits)), (int)ex - bias - mbits);
  return (h >> (mbits + ebits)) & 1 ? -v : v;
}

uint16_t half_f16_from(double x) { return narrow(x, 10, 5); }
double half_f16_to(uint16_t h) { return widen(h, 10, 5); }

uint16_t half_bf16_from(double x) {
  /* bf16 is the top half of an f32; its NaNs keep the f32's payload's top bits, as the
   * hardware's conversions (vcvtneps2bf16) do */
  if (isnan(x)) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u >> 16) | 0x40);
  }
  return narrow(x, 7, 8);
}

double half_bf16_to(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

double half_round(DynElem e, double x) {
  switch (e) {
  case DYN_F16: return half_f16_to(half_f16_from(x));
  case DYN_BF16: return half_bf16_to(half_bf16_from(x));
  case DYN_F32: return (double)(float)x;
  default: return x;
  }
}
