/* vmath.c -- the math functions of the expression language (exp log sqrt rsqrt sin cos tanh
 * sigmoid erf pow) as branch-free LLVM IR for f32 and f64, which the CPU back end (cpu.c)
 * builds in its loops in place of calls.
 *
 * Design.  Each function is expanded inline, on the scalar type, before vectorisation: a
 * range reduction by bit operations and Cody-Waite constants, a polynomial (or, in a few
 * places, a rational) approximation, and selects for the special values, with no branch, no
 * table and no call.  The loop vectoriser then widens it like any arithmetic, to whatever
 * width the target and the kernel's "prefer-vector-width" ask for (4, 8 or 16 f32 lanes; 2,
 * 4 or 8 f64 lanes; NEON and SVE on AArch64), and the scalar remainder runs the same code.
 * The alternative, a vector variant per function and width (a vector library), would need
 * one written for every width and ISA and kept in step with the scalar form; LLVM has no
 * vector library configured here, and its math intrinsics (llvm.sin, llvm.log, ...) become
 * scalar libm calls in a vector loop, which scalarise it.  An f32 function computes in f32
 * and i32 only, an f64 one in f64 and i64: a wider type in the loop would halve its width.
 *
 * One exception: where the target has AVX-512, exp is a call to a function with vector
 * variants (the vector function ABI, "vector-function-abi-variant") at every width the
 * target has vscalefps/vscalefpd for, whose vector forms scale by 2^n with one vscalef in
 * place of seven integer operations and two multiplies: a quarter of exp's work, and exp
 * bounds softmax (a softmax with exp replaced by a 9-term polynomial ran 20% faster at
 * 4096 x 4096).  The calls are inlined once vectorisation is done (vmath_release).
 *
 * Accuracy, measured against the long double libm (lang/reference.md, "Accuracy of the math
 * functions", has the figures and the ranges): a few ulp for every function over its whole
 * range, sin and cos for |x| up to 1e5 (f32) and 1.6e6 (f64) whatever the hardware
 * (beyond, their error grows unless multiply-adds are fused), and NaN past 4e6
 * (f32) and 1e15 (f64), where the quadrant can no longer be told.  pow loses a little
 * accuracy as |b log a| grows (see vmath_pow).
 */
#include "config.h"
#include "dyn_int.h"

#ifdef HAVE_LLVM

#include "irb.h"
#include "vmath.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The type a function is built for: float or a vector of floats, and its integer twin. */
typedef struct V {
  VMath *vm;
  LLVMBuilderRef b;
  LLVMTypeRef t, it, et, iet;
  unsigned lanes;          /* 0: scalar */
  bool d;                  /* f64 */
} V;

static V v_of(VMath *vm, LLVMValueRef x) {
  V v = {.vm = vm, .b = vm->b, .t = LLVMTypeOf(x)};
  v.lanes = LLVMGetTypeKind(v.t) == LLVMVectorTypeKind ? LLVMGetVectorSize(v.t) : 0;
  v.et = v.lanes ? LLVMGetElementType(v.t) : v.t;
  v.d = LLVMGetTypeKind(v.et) == LLVMDoubleTypeKind;
  v.iet = v.d ? LLVMInt64TypeInContext(vm->cx) : LLVMInt32TypeInContext(vm->cx);
  v.it = v.lanes ? LLVMVectorType(v.iet, v.lanes) : v.iet;
  return v;
}

static LLVMValueRef splat(const V *v, LLVMValueRef c) {
  if (!v->lanes) return c;
  LLVMValueRef e[64];
  for (unsigned i = 0; i < v->lanes && i < 64; i++) e[i] = c;
  return LLVMConstVector(e, v->lanes);
}

static LLVMValueRef K(const V *v, double c) { return splat(v, LLVMConstReal(v->et, c)); }
static LLVMValueRef KI(const V *v, int64_t c) { return splat(v, LLVMConstInt(v->iet, (unsigned long long)c, 1)); }

static LLVMValueRef intr(const V *v, const char *name, LLVMValueRef *args, int n) {
  return irb_call_intrinsic(v->b, v->vm->m, name, v->t, args, n);
}

static LLVMValueRef add(const V *v, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFAdd(v->b, a, c, ""); }
static LLVMValueRef sub(const V *v, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFSub(v->b, a, c, ""); }
static LLVMValueRef mul(const V *v, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFMul(v->b, a, c, ""); }
static LLVMValueRef dvd(const V *v, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFDiv(v->b, a, c, ""); }
/* a * b + c, fused where the target has FMA: every use below is exact or accurate either way */
static LLVMValueRef fma3(const V *v, LLVMValueRef a, LLVMValueRef c, LLVMValueRef d) {
  LLVMValueRef args[3] = {a, c, d};
  return intr(v, "llvm.fmuladd", args, 3);
}
static LLVMValueRef fabs1(const V *v, LLVMValueRef x) { return intr(v, "llvm.fabs", &x, 1); }
static LLVMValueRef copysign2(const V *v, LLVMValueRef mag, LLVMValueRef sgn) {
  LLVMValueRef args[2] = {mag, sgn};
  return intr(v, "llvm.copysign", args, 2);
}
static LLVMValueRef cmp(const V *v, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFCmp(v->b, p, a, c, ""); }
static LLVMValueRef sel(const V *v, LLVMValueRef c, LLVMValueRef a, LLVMValueRef d) { return LLVMBuildSelect(v->b, c, a, d, ""); }
static LLVMValueRef bits(const V *v, LLVMValueRef x) { return LLVMBuildBitCast(v->b, x, v->it, ""); }
static LLVMValueRef flt(const V *v, LLVMValueRef i) { return LLVMBuildBitCast(v->b, i, v->t, ""); }
static LLVMValueRef clamp(const V *v, LLVMValueRef x, double lo, double hi) {
  /* a NaN compares false both times and stays */
  x = sel(v, cmp(v, LLVMRealOGT, x, K(v, hi)), K(v, hi), x);
  return sel(v, cmp(v, LLVMRealOLT, x, K(v, lo)), K(v, lo), x);
}

/* c[0] x^(n-1) + ... + c[n-1] */
static LLVMValueRef horner(const V *v, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef p = K(v, c[0]);
  for (int i = 1; i < n; i++) p = fma3(v, p, x, K(v, c[i]));
  return p;
}

/* ---- exp ---- */

/* e^r for |r| <= ln2/2.  f32: degree 6, fitted for least maximum relative error on that
 * interval (2e-9 before rounding; with the f32 roundings exp is within 1.05 ulp, against
 * 0.91 ulp for the degree-7 Taylor polynomial it replaced, whose extra multiply-add cost
 * softmax 7% of its exp pass); f64: the Taylor polynomial of degree 13 (4e-18). */
static LLVMValueRef exp_poly(const V *v, LLVMValueRef r) {
  static const double c32[] = {0.0013836845755577087, 0.008374815806746483, 0.04166822507977486,
                               0.16666419804096222, 0.49999991059303284, 1.0, 1.0};
  if (!v->d) return horner(v, r, c32, 7);
  double c64[14];
  double f = 1;
  for (int k = 0; k <= 13; k++) {
    c64[13 - k] = 1 / f;
    f *= k + 1;
  }
  return horner(v, r, c64, 14);
}

/* p * 2^n for an integer n within twice the exponent range, in two factors so that each
 * is a normal number: the product makes the subnormals (one rounding) and the overflow. */
static LLVMValueRef scale2(const V *v, LLVMValueRef p, LLVMValueRef n) {
  int mant = v->d ? 52 : 23, bias = v->d ? 1023 : 127;
  LLVMValueRef h = LLVMBuildAShr(v->b, n, KI(v, 1), "");
  LLVMValueRef l = LLVMBuildSub(v->b, n, h, "");
  LLVMValueRef e1 = flt(v, LLVMBuildShl(v->b, LLVMBuildAdd(v->b, h, KI(v, bias), ""), KI(v, mant), ""));
  LLVMValueRef e2 = flt(v, LLVMBuildShl(v->b, LLVMBuildAdd(v->b, l, KI(v, bias), ""), KI(v, mant), ""));
  return mul(v, mul(v, p, e1), e2);
}

/* 2^n r' with r = x - n ln2, |r| <= ln2/2.  n = rint(x log2 e) comes from adding 1.5 * 2^23
 * (2^52): the sum's low mantissa bits are n, so one multiply-add gives n both as a float
 * (the sum less the constant) and as an integer (its bits less the constant's), where rint
 * and a conversion would cost two more instructions; and it is an ordinary value even for a
 * NaN x (a conversion of NaN would be poison), NaN flowing through the clamp and the
 * polynomial into the result.  Clamped to [-104, 89] ([-746, 710]), the scaling rounds to 0
 * or overflows to infinity by itself beyond the range of results, and makes the subnormals
 * in between.  scalef: x is a vector whose width has vscalef, which does the scaling. */
static LLVMValueRef exp_of(const V *v, LLVMValueRef x, bool scalef) {
  double magic = v->d ? 6755399441055744.0 : 12582912.0;   /* 1.5 * 2^52, 1.5 * 2^23 */
  double ln2hi = v->d ? 6.93147180369123816490e-01 : 0.693359375;
  double ln2lo = v->d ? 1.90821492927058770002e-10 : -2.12194440e-4;
  LLVMValueRef xc = v->d ? clamp(v, x, -746, 710) : clamp(v, x, -104, 89);
  LLVMValueRef sum = fma3(v, xc, K(v, 1.44269504088896341), K(v, magic));
  LLVMValueRef n = sub(v, sum, K(v, magic));
  LLVMValueRef r = fma3(v, n, K(v, -ln2hi), xc);
  r = fma3(v, n, K(v, -ln2lo), r);
  LLVMValueRef p = exp_poly(v, r);
  if (scalef) {
    unsigned w = v->lanes * (v->d ? 64 : 32);
    LLVMTypeRef mt = LLVMIntTypeInContext(v->vm->cx, v->lanes < 8 ? 8 : v->lanes);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(v->vm->cx);
    char name[48];
    snprintf(name, sizeof name, "llvm.x86.avx512.mask.scalef.%s.%u", v->d ? "pd" : "ps", w);
    LLVMValueRef args[5] = {p, n, LLVMGetUndef(v->t), LLVMConstAllOnes(mt), LLVMConstInt(i32, 4, 0)};
    LLVMTypeRef ps[5] = {v->t, v->t, v->t, mt, i32};
    int na = w == 512 ? 5 : 4;   /* only the 512-bit forms take a rounding mode */
    LLVMTypeRef ft = LLVMFunctionType(v->t, ps, (unsigned)na, 0);
    LLVMValueRef f = LLVMGetNamedFunction(v->vm->m, name);
    if (!f) f = LLVMAddFunction(v->vm->m, name, ft);
    return LLVMBuildCall2(v->b, ft, f, args, (unsigned)na, "");
  }
  LLVMValueRef ni = LLVMBuildSub(v->b, bits(v, sum), bits(v, K(v, magic)), "");
  return scale2(v, p, ni);
}

static void set_fn_attrs(VMath *vm, LLVMValueRef f) {
  static const char *attrs[] = {"noinline", "nounwind", "willreturn", "nosync", "nofree"};
  for (size_t a = 0; a < sizeof attrs / sizeof *attrs; a++) irb_fn_attr(f, attrs[a]);
  irb_fn_attr(f, "memory");   /* memory(none): reads and writes nothing */
  if (vm->width[0]) irb_fn_string_attr(f, "prefer-vector-width", vm->width);
}

/* The AVX-512 exp: a call of <prefix>_vm_exp<32|64>, whose vector variants are declared at
 * every width that has vscalef; both are kept out of line until vectorisation is done. */
static LLVMValueRef exp_call(V *v, LLVMValueRef x) {
  VMath *vm = v->vm;
  int k = v->d;
  if (!vm->exp_fn[k]) {
    LLVMBasicBlockRef at = LLVMGetInsertBlock(vm->b);
    char sname[96];
    snprintf(sname, sizeof sname, "%s_vm_exp%d", vm->prefix, v->d ? 64 : 32);
    LLVMValueRef sf = LLVMAddFunction(vm->m, sname, LLVMFunctionType(v->t, &v->t, 1, 0));
    LLVMSetLinkage(sf, LLVMInternalLinkage);
    set_fn_attrs(vm, sf);
    LLVMPositionBuilderAtEnd(vm->b, LLVMAppendBasicBlockInContext(vm->cx, sf, "entry"));
    LLVMBuildRet(vm->b, exp_of(v, LLVMGetParam(sf, 0), false));
    size_t len = 0;
    vm->exp_variant[k][0] = 0;
    for (unsigned w = 128; w <= 512; w *= 2) {
      if (!(vm->scalef & w)) continue;
      unsigned lanes = w / (v->d ? 64 : 32);
      LLVMTypeRef vt = LLVMVectorType(v->t, lanes);
      char vname[112];
      snprintf(vname, sizeof vname, "%s_v%u", sname, lanes);
      LLVMValueRef vf = LLVMAddFunction(vm->m, vname, LLVMFunctionType(vt, &vt, 1, 0));
      set_fn_attrs(vm, vf);
      LLVMPositionBuilderAtEnd(vm->b, LLVMAppendBasicBlockInContext(vm->cx, vf, "entry"));
      V vv = v_of(vm, LLVMGetParam(vf, 0));
      LLVMBuildRet(vm->b, exp_of(&vv, LLVMGetParam(vf, 0), true));
      len += (size_t)snprintf(vm->exp_variant[k] + len, sizeof vm->exp_variant[k] - len, "%s_ZGV_LLVM_N%uv_%s(%s)",
                              len ? "," : "", lanes, sname, vname);
    }
    LLVMPositionBuilderAtEnd(vm->b, at);
    vm->exp_fn[k] = sf;
  }
  LLVMValueRef call = LLVMBuildCall2(vm->b, LLVMGlobalGetValueType(vm->exp_fn[k]), vm->exp_fn[k], &x, 1, "");
  static const char attr[] = "vector-function-abi-variant";
  LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                           LLVMCreateStringAttribute(vm->cx, attr, (unsigned)strlen(attr), vm->exp_variant[k],
                                                     (unsigned)strlen(vm->exp_variant[k])));
  return call;
}

static LLVMValueRef exp_v(V *v, LLVMValueRef x) {
  if (v->vm->prefix && v->vm->scalef && !v->lanes) return exp_call(v, x);
  return exp_of(v, x, false);
}

/* ---- log ---- */

/* x = 2^e m with m in [sqrt(1/2), sqrt(2)): e as a float and f = m - 1 (exact).  Subnormal
 * x are scaled into the normal range first; 0, negative x, infinities and NaN give
 * meaningless values that the callers replace. */
static void log_parts(const V *v, LLVMValueRef x, LLVMValueRef *ef, LLVMValueRef *f) {
  int mant = v->d ? 52 : 23, bias = v->d ? 1023 : 127;
  double tiny = v->d ? 2.2250738585072014e-308 : 1.17549435e-38, up = v->d ? 18014398509481984.0 : 8388608.0;
  int64_t one = v->d ? 0x3ff0000000000000 : 0x3f800000, rt = v->d ? 0x3fe6a09e667f3bcd : 0x3f3504f3;
  int64_t mmask = v->d ? 0x000fffffffffffff : 0x007fffff;
  LLVMValueRef sm = cmp(v, LLVMRealOLT, x, K(v, tiny));
  LLVMValueRef xs = sel(v, sm, mul(v, x, K(v, up)), x);
  LLVMValueRef ix = LLVMBuildAdd(v->b, bits(v, xs), KI(v, one - rt), "");
  LLVMValueRef e = LLVMBuildSub(v->b, LLVMBuildAShr(v->b, ix, KI(v, mant), ""), KI(v, bias), "");
  e = LLVMBuildSub(v->b, e, sel(v, sm, KI(v, v->d ? 54 : 23), KI(v, 0)), "");
  LLVMValueRef m = flt(v, LLVMBuildAdd(v->b, LLVMBuildAnd(v->b, ix, KI(v, mmask), ""), KI(v, rt), ""));
  *ef = LLVMBuildSIToFP(v->b, e, v->t, "");
  *f = sub(v, m, K(v, 1));
}

/* log(1 + f) - f for f = m - 1 as log_parts makes it.  f32: the polynomial of Cephes' logf
 * (f - f^2/2 + f^3 P(f), no division); f64: fdlibm's log, log(1+f) = 2 atanh(s) with
 * s = f / (2 + f), a degree-14 polynomial in s (error below 2^-58.45). */
static LLVMValueRef log1p_rest(const V *v, LLVMValueRef f) {
  LLVMValueRef z = mul(v, f, f);
  if (!v->d) {
    static const double P[] = {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                               -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1};
    LLVMValueRef y = mul(v, mul(v, f, z), horner(v, f, P, 9));
    return fma3(v, z, K(v, -0.5), y);
  }
  static const double Lg[] = {6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
                              2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
                              1.479819860511658591e-01};
  LLVMValueRef s = dvd(v, f, add(v, K(v, 2), f));
  LLVMValueRef s2 = mul(v, s, s), w = mul(v, s2, s2);
  const double odd[] = {Lg[6], Lg[4], Lg[2], Lg[0]}, even[] = {Lg[5], Lg[3], Lg[1]};
  LLVMValueRef t1 = mul(v, w, horner(v, w, even, 3)), t2 = mul(v, s2, horner(v, w, odd, 4));
  LLVMValueRef R = add(v, t2, t1), hfsq = mul(v, K(v, 0.5), z);
  /* log(1+f) = f - (hfsq - s (hfsq + R)) */
  return LLVMBuildFNeg(v->b, sub(v, hfsq, mul(v, s, add(v, hfsq, R))), "");
}

static LLVMValueRef log_v(const V *v, LLVMValueRef x) {
  LLVMValueRef ef, f;
  log_parts(v, x, &ef, &f);
  double hi = v->d ? 6.93147180369123816490e-01 : 0.693359375;
  double lo = v->d ? 1.90821492927058770002e-10 : -2.12194440e-4;
  /* e ln2_hi + (f + (rest + e ln2_lo)): e ln2_hi is exact, and the small terms first */
  LLVMValueRef r = add(v, f, fma3(v, ef, K(v, lo), log1p_rest(v, f)));
  r = fma3(v, ef, K(v, hi), r);
  LLVMValueRef ok = LLVMBuildAnd(v->b, cmp(v, LLVMRealOGT, x, K(v, 0)), cmp(v, LLVMRealOLT, x, K(v, INFINITY)), "");
  LLVMValueRef special = sel(v, cmp(v, LLVMRealOEQ, x, K(v, 0)), K(v, -INFINITY),
                             sel(v, cmp(v, LLVMRealOEQ, x, K(v, INFINITY)), K(v, INFINITY), K(v, NAN)));
  return sel(v, ok, r, special);
}

/* ---- sin, cos ---- */

/* sin (cos_ false) or cos of x.  On |x|: n = rint(|x| 2/pi) (by the constant trick of exp),
 * r = |x| - n pi/2 with pi/2 in parts whose products with n are exact (Cody-Waite): four
 * parts of 8, 8, 8 and 24 bits for f32, exact for n < 2^16 (|x| < 1e5); three of 33, 33
 * and 53 bits for f64, exact for n < 2^20 (|x| < 1.6e6).  Beyond, the products round and
 * the error grows with |x|; past LIMIT the quadrant is not known and the result is NaN, as
 * for infinities.  Then the polynomials of sin and cos on [-pi/4, pi/4] (Cephes' sinf and
 * cosf; fdlibm's __kernel_sin and __kernel_cos), chosen and negated by the quadrant, and
 * sin takes x's sign (which keeps -0). */
static LLVMValueRef sincos_v(const V *v, LLVMValueRef x, bool cos_) {
  static const double cw32[] = {1.5703125, 0.000484466552734375, -0.00000064074993133544921875,
                                9.920936294705029467877466e-10};
  static const double cw64[] = {1.57079632673412561416626, 6.077100506303965976595549e-11,
                                2.022266248795950631541144e-21};
  double magic = v->d ? 6755399441055744.0 : 12582912.0;
  double limit = v->d ? 1e15 : 4e6;
  LLVMValueRef a = fabs1(v, x);
  LLVMValueRef sum = fma3(v, a, K(v, 0.63661977236758134308), K(v, magic));
  LLVMValueRef n = sub(v, sum, K(v, magic));
  LLVMValueRef q = LLVMBuildSub(v->b, bits(v, sum), bits(v, K(v, magic)), "");
  const double *cw = v->d ? cw64 : cw32;
  LLVMValueRef r = a;
  for (int i = 0; i < (v->d ? 3 : 4); i++) r = fma3(v, n, K(v, -cw[i]), r);
  if (cos_) q = LLVMBuildAdd(v->b, q, KI(v, 1), "");
  LLVMValueRef z = mul(v, r, r);
  LLVMValueRef s, c;
  if (!v->d) {
    static const double S[] = {-1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1};
    static const double C[] = {2.443315711809948E-005, -1.388731625493765E-003, 4.166664568298827E-002};
    s = fma3(v, mul(v, r, z), horner(v, z, S, 3), r);
    c = fma3(v, mul(v, z, z), horner(v, z, C, 3), fma3(v, z, K(v, -0.5), K(v, 1)));
  } else {
    static const double S[] = {1.58969099521155010221e-10, -2.50507602534068634195e-08, 2.75573137070700676789e-06,
                               -1.98412698298579493134e-04, 8.33333333332248946124e-03, -1.66666666666666324348e-01};
    static const double C[] = {-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,
                               2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02};
    s = fma3(v, mul(v, r, z), horner(v, z, S, 6), r);
    c = fma3(v, mul(v, z, z), horner(v, z, C, 6), fma3(v, z, K(v, -0.5), K(v, 1)));
  }
  LLVMValueRef odd = LLVMBuildICmp(v->b, LLVMIntNE, LLVMBuildAnd(v->b, q, KI(v, 1), ""), KI(v, 0), "");
  LLVMValueRef res = sel(v, odd, c, s);
  /* quadrants 2 and 3 negate; sin takes the sign of x: both by the sign bit */
  LLVMValueRef sign = LLVMBuildShl(v->b, LLVMBuildAnd(v->b, q, KI(v, 2), ""), KI(v, v->d ? 62 : 30), "");
  if (!cos_) sign = LLVMBuildXor(v->b, sign, LLVMBuildAnd(v->b, bits(v, x), KI(v, v->d ? INT64_MIN : INT32_MIN), ""), "");
  res = flt(v, LLVMBuildXor(v->b, bits(v, res), sign, ""));
  return sel(v, cmp(v, LLVMRealOLE, a, K(v, limit)), res, K(v, NAN));
}

/* ---- tanh, sigmoid, erf ---- */

/* Below |x| = 0.625, x (1 + x^2 P(x^2)), P a polynomial (f32, Cephes' tanhf) or a rational
 * function (f64, Cephes' tanh); above, 1 - 2 / (e^2x + 1), which cancels little there and
 * tends to +-1 (an overflowing e^2x is infinite and gives exactly 1).  Both on x itself
 * (the product keeps -0): taking |x| and x's sign back cost gelu 8% on this host's AVX2. */
static LLVMValueRef tanh_v(V *v, LLVMValueRef x) {
  LLVMValueRef a = fabs1(v, x), z = mul(v, x, x), p;
  if (!v->d) {
    static const double P[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                               -3.33332819422E-1};
    p = horner(v, z, P, 5);
  } else {
    static const double P[] = {-9.64399179425052238628E-1, -9.92877231001918586564E1, -1.61468768441708447952E3};
    static const double Q[] = {1.0, 1.12811678491632931402E2, 2.23548839060100448583E3, 4.84406305325125486048E3};
    p = dvd(v, horner(v, z, P, 3), horner(v, z, Q, 4));
  }
  LLVMValueRef small = mul(v, x, fma3(v, z, p, K(v, 1)));
  LLVMValueRef e2 = exp_v(v, mul(v, x, K(v, 2)));
  LLVMValueRef big = sub(v, K(v, 1), dvd(v, K(v, 2), add(v, e2, K(v, 1))));
  return sel(v, cmp(v, LLVMRealOLT, a, K(v, 0.625)), small, big);
}

/* 1 / (1 + e^-x).  Below x = -88.7 (f32; -709.8 for f64) e^-x overflows and the result is
 * 0 where the true one is below the smallest normal number: taking e^-|x| and choosing
 * between 1 / (1 + e) and e / (1 + e) would keep those, but cost silu 13% on this host. */
static LLVMValueRef sigmoid_v(V *v, LLVMValueRef x) {
  LLVMValueRef e = exp_v(v, LLVMBuildFNeg(v->b, x, ""));
  return dvd(v, K(v, 1), add(v, e, K(v, 1)));
}

/* erf on |x|, then x's sign.  Below 1: x P(x^2); above, 1 - e^Q(|x|), Q a polynomial
 * approximation of log(erfc) in u = (|x| - c) / h, on [1, 4] for f32 (past 4 erf rounds to 1)
 * and on [1, 2.5] and [2.5, 6] for f64, whose coefficients are chosen per lane.  Near-minimax
 * fits (Chebyshev interpolation, mpmath's chebyfit): f32 relative error 1.6e-9 (small) and
 * 8e-9 in erfc; f64 9e-18 and 4e-17, 2e-14 on [2.5, 6] where erfc < 4e-4. */
static LLVMValueRef erf_v(V *v, LLVMValueRef x) {
  static const double s32[] = {7.8758750626854883e-5, -8.0168642871658695e-4, 5.189087423433974e-3, -2.6854212010626412e-2,
                               1.1283594715160218e-1, -3.7612626666720331e-1, 1.1283791658483509};
  static const double l32[] = {-2.9150376798848158e-6, 4.1405577769660682e-5, -2.2084763175938325e-4,
                               8.8149317263962466e-4, -3.1953865969373221e-3, 1.096117247408716e-2,
                               -3.6646131158533697e-2, -2.1237607002462236, -8.0290211237589798, -7.8068152767534173};
  static const double s64[] = {-7.7958988270021422e-10, 1.3720064546777686e-8, -1.6208483801871706e-7,
                               1.6447424703317362e-6, -1.492473690741966e-5, 1.2055294904839708e-4,
                               -8.5483259753896921e-4, 5.2239776071164227e-3, -2.686617064323777e-2,
                               1.1283791670945006e-1, -3.761263890318354e-1, 1.1283791670955126};
  static const double m64[] = {-4.5361416403568976e-12, 8.7555073125126802e-12, 6.781175031623205e-11,
                               -7.3833092628652533e-10, 4.7772971294484135e-9, -2.2627777036099398e-8,
                               6.6889854829119099e-8, 8.2842443511037324e-8, -3.1691027451433538e-6,
                               3.1061356718162364e-5, -2.2878512862499519e-4, 1.4633569155670262e-3,
                               -8.6648232860039212e-3, -5.1184134365440988e-1, -2.9697081756100616,
                               -4.3178635254332227};
  static const double l64[] = {1.2323142825492614e-9, -2.5197361881742567e-9, -4.1088932242176466e-9,
                               3.9575951885080634e-8, -2.2056669808883711e-7, 1.0889173088276692e-6,
                               -4.8562803729376124e-6, 2.02501765377309e-5, -8.0762400220541881e-5,
                               3.124833673115284e-4, -1.1879764645359777e-3, 4.5068341942293575e-3,
                               -1.7491629496275135e-2, -2.9892590152172213, -1.5266607502163385e+1,
                               -2.0107769901469693e+1};
  LLVMValueRef a = fabs1(v, x), z = mul(v, a, a);
  LLVMValueRef small = mul(v, a, v->d ? horner(v, z, s64, 12) : horner(v, z, s32, 7));
  LLVMValueRef q;
  if (!v->d) {
    LLVMValueRef u = fma3(v, clamp(v, a, 0, 4), K(v, 1 / 1.5), K(v, -2.5 / 1.5));
    q = horner(v, u, l32, 10);
  } else {
    LLVMValueRef ac = clamp(v, a, 0, 6), hi = cmp(v, LLVMRealOGT, ac, K(v, 2.5));
    LLVMValueRef u = fma3(v, ac, sel(v, hi, K(v, 1 / 1.75), K(v, 1 / 0.75)), sel(v, hi, K(v, -4.25 / 1.75), K(v, -1.75 / 0.75)));
    q = sel(v, hi, K(v, l64[0]), K(v, m64[0]));
    for (int i = 1; i < 16; i++) q = fma3(v, q, u, sel(v, hi, K(v, l64[i]), K(v, m64[i])));
  }
  LLVMValueRef big = sub(v, K(v, 1), exp_v(v, q));
  return copysign2(v, sel(v, cmp(v, LLVMRealOLT, a, K(v, 1)), small, big), x);
}

/* ---- pow ---- */

/* Twice the precision without fused multiply-adds, for pow: Veltkamp's split of x into
 * halves whose products are exact, Dekker's exact product a b = p + e, Knuth's exact sum
 * a + b = s + e (fast_two_sum when |a| >= |b|). */
static void split2(const V *v, LLVMValueRef x, LLVMValueRef *hi, LLVMValueRef *lo) {
  LLVMValueRef c = mul(v, x, K(v, v->d ? 134217729.0 : 4097.0));   /* 2^27 + 1, 2^12 + 1 */
  *hi = sub(v, c, sub(v, c, x));
  *lo = sub(v, x, *hi);
}

static void two_prod(const V *v, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *p, LLVMValueRef *e) {
  LLVMValueRef ah, al, bh, bl;
  *p = mul(v, a, b);
  split2(v, a, &ah, &al);
  split2(v, b, &bh, &bl);
  *e = add(v, add(v, add(v, sub(v, mul(v, ah, bh), *p), mul(v, ah, bl)), mul(v, al, bh)), mul(v, al, bl));
}

static void fast_two_sum(const V *v, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *s, LLVMValueRef *e) {
  *s = add(v, a, b);
  *e = sub(v, b, sub(v, *s, a));
}

static void two_sum(const V *v, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *s, LLVMValueRef *e) {
  *s = add(v, a, b);
  LLVMValueRef bb = sub(v, *s, a);
  *e = add(v, sub(v, a, sub(v, *s, bb)), sub(v, b, bb));
}

/* a^b for a constant b that products or a square root give exactly or within an ulp, as
 * LLVM's own pow(x, 2.0) -> x * x: x ** 2.0 is common, and the general path is 40
 * operations and a few ulp.  NULL for other b. */
static LLVMValueRef pow_const(V *v, LLVMValueRef a, double c) {
  LLVMValueRef a2;
  if (c == 1) return a;
  if (c == 2) return mul(v, a, a);
  if (c == 3) return mul(v, mul(v, a, a), a);
  if (c == 4) return a2 = mul(v, a, a), mul(v, a2, a2);
  if (c == -1) return dvd(v, K(v, 1), a);
  if (c == -2) return dvd(v, K(v, 1), mul(v, a, a));
  if (c == 0.5) {
    /* C's pow(-0, 0.5) is +0 (sqrt keeps the sign) and pow(-inf, 0.5) is +inf */
    LLVMValueRef r = add(v, intr(v, "llvm.sqrt", &a, 1), K(v, 0));
    return sel(v, cmp(v, LLVMRealOEQ, a, K(v, -INFINITY)), K(v, INFINITY), r);
  }
  return NULL;
}

/* a^b = e^t, t = b log|a|, with t and log|a| carried in two parts, twice the working
 * precision (the relative error of e^t is the absolute error of t, which a rounded t has in
 * proportion to |t|, up to 745): log|a| = e ln2 + 2 atanh(u), u = f / (2 + f) as in log, the
 * quotient and the products by exact pieces (two_prod, two_sum); then e^t as exp computes
 * it, t's low part added to the reduced argument.  Within 1.5 ulp over the
 * ranges of lang/reference.md's table; the error still grows a little with |t| (f32 4.6 ulp
 * at t = 80, f64 43 ulp at t = 620), where the C library is exact.  With t in one part,
 * pow of f32[1000, 1000] took 3.1 ms instead of 4.8 (the C library's, called per element,
 * 6.2) but lost about |t| ulp (145 at f32's t = 80).  Then the special cases of C's pow:
 * zero and infinite a, infinite b, negative a (NaN unless b is an integer, negated when it
 * is odd), NaN, a = 1 or b = 0 (1), a = -1 with an infinite b (1). */
LLVMValueRef vmath_pow(VMath *vm, LLVMValueRef a, LLVMValueRef b) {
  V vv = v_of(vm, a), *v = &vv;
  if (LLVMIsAConstantFP(b)) {
    LLVMBool loses;
    LLVMValueRef r = pow_const(v, a, LLVMConstRealGetDouble(b, &loses));
    if (r) return r;
  }
  double magic = v->d ? 6755399441055744.0 : 12582912.0;
  double ln2hi = v->d ? 6.93147180369123816490e-01 : 0.693359375;
  double ln2lo = v->d ? 1.90821492927058770002e-10 : -2.12194440e-4;
  LLVMValueRef A = fabs1(v, a), ef, f;
  log_parts(v, A, &ef, &f);
  /* u = f / (2 + f) in two parts: the quotient and its remainder's */
  LLVMValueRef dh, dl, p, pe;
  fast_two_sum(v, K(v, 2), f, &dh, &dl);
  LLVMValueRef uh = dvd(v, f, dh);
  two_prod(v, uh, dh, &p, &pe);
  LLVMValueRef ul = dvd(v, sub(v, sub(v, sub(v, f, p), pe), mul(v, uh, dl)), dh);
  /* log(1 + f) = 2 atanh(u) = 2u + u^3 T(u^2), |u| <= 0.1716: the tail is below 0.0034,
   * and its Taylor series to u^11 (f32; to u^25 for f64) is exact to the rounding */
  double T[12];
  int nt = v->d ? 12 : 5;
  for (int k = 0; k < nt; k++) T[nt - 1 - k] = 2.0 / (2 * k + 3);
  LLVMValueRef z = mul(v, uh, uh);
  LLVMValueRef tail = mul(v, mul(v, uh, z), horner(v, z, T, nt));
  LLVMValueRef lh, ll;
  fast_two_sum(v, mul(v, uh, K(v, 2)), add(v, mul(v, ul, K(v, 2)), tail), &lh, &ll);
  /* L = log|a| = e ln2 + log(1 + f), e ln2_hi exact; each pair is renormalised (its low
   * part below half an ulp of its high part), so that the high part of t below is within
   * an ulp of t and the reduction of e^t by it leaves the low part small */
  LLVMValueRef Lh, Le, Ll;
  two_sum(v, mul(v, ef, K(v, ln2hi)), lh, &Lh, &Le);
  fast_two_sum(v, Lh, add(v, add(v, Le, ll), mul(v, ef, K(v, ln2lo))), &Lh, &Ll);
  /* t = b L in two parts.  b is held to +-1e30 (1e300) first, so that its split cannot
   * overflow: for |a| != 1 a larger b over- or underflows all the same */
  LLVMValueRef bc = v->d ? clamp(v, b, -1e300, 1e300) : clamp(v, b, -1e30, 1e30), th, te, tl;
  two_prod(v, bc, Lh, &th, &te);
  fast_two_sum(v, th, add(v, te, mul(v, bc, Ll)), &th, &tl);
  /* e^t as exp_of makes it, t's low part added to the reduced argument */
  LLVMValueRef tc = v->d ? clamp(v, th, -746, 710) : clamp(v, th, -104, 89);
  LLVMValueRef sum = fma3(v, tc, K(v, 1.44269504088896341), K(v, magic));
  LLVMValueRef n = sub(v, sum, K(v, magic));
  LLVMValueRef r = fma3(v, n, K(v, -ln2hi), tc);
  r = add(v, fma3(v, n, K(v, -ln2lo), r), tl);
  LLVMValueRef ni = LLVMBuildSub(v->b, bits(v, sum), bits(v, K(v, magic)), "");
  LLVMValueRef res = scale2(v, exp_poly(v, r), ni);

  LLVMValueRef zero = cmp(v, LLVMRealOEQ, A, K(v, 0)), inf = cmp(v, LLVMRealOEQ, A, K(v, INFINITY));
  LLVMValueRef edge = sel(v, LLVMBuildXor(v->b, zero, cmp(v, LLVMRealOGT, b, K(v, 0)), ""), K(v, INFINITY), K(v, 0));
  res = sel(v, LLVMBuildOr(v->b, zero, inf, ""), edge, res);
  /* an infinite b: infinity where |a| is on the side b points to, else 0 */
  LLVMValueRef binf = cmp(v, LLVMRealOEQ, fabs1(v, b), K(v, INFINITY));
  LLVMValueRef side = LLVMBuildICmp(v->b, LLVMIntEQ, cmp(v, LLVMRealOGT, A, K(v, 1)), cmp(v, LLVMRealOGT, b, K(v, 0)), "");
  res = sel(v, binf, sel(v, side, K(v, INFINITY), K(v, 0)), res);
  LLVMValueRef fb = intr(v, "llvm.floor", &b, 1), hb = mul(v, b, K(v, 0.5));
  LLVMValueRef bint = cmp(v, LLVMRealOEQ, fb, b);
  LLVMValueRef bodd = LLVMBuildAnd(v->b, bint, cmp(v, LLVMRealUNE, intr(v, "llvm.floor", &hb, 1), hb), "");
  LLVMValueRef neg = LLVMBuildICmp(v->b, LLVMIntSLT, bits(v, a), KI(v, 0), "");
  res = sel(v, LLVMBuildAnd(v->b, neg, bodd, ""), LLVMBuildFNeg(v->b, res, ""), res);
  LLVMValueRef bad = LLVMBuildAnd(v->b, cmp(v, LLVMRealOLT, a, K(v, 0)), LLVMBuildNot(v->b, LLVMBuildOr(v->b, bint, inf, ""), ""), "");
  res = sel(v, LLVMBuildOr(v->b, bad, cmp(v, LLVMRealUNO, a, b), ""), K(v, NAN), res);
  LLVMValueRef one = LLVMBuildOr(v->b, cmp(v, LLVMRealOEQ, a, K(v, 1)), cmp(v, LLVMRealOEQ, b, K(v, 0)), "");
  one = LLVMBuildOr(v->b, one, LLVMBuildAnd(v->b, cmp(v, LLVMRealOEQ, A, K(v, 1)),
                                            cmp(v, LLVMRealOEQ, fabs1(v, b), K(v, INFINITY)), ""), "");
  return sel(v, one, K(v, 1), res);
}

/* ---- the entry points ---- */

void vmath_init(VMath *vm, LLVMContextRef cx, LLVMModuleRef m, LLVMBuilderRef b, const char *prefix,
                const char *features, int vector_bits) {
  memset(vm, 0, sizeof *vm);
  vm->cx = cx;
  vm->m = m;
  vm->b = b;
  vm->prefix = prefix;
  if (vector_bits > 0) snprintf(vm->width, sizeof vm->width, "%d", vector_bits);
  /* vscalefps/pd: 512 bits with AVX512F, 128 and 256 with AVX512VL too */
  if (features && strstr(features, "+avx512f")) vm->scalef = 512 | (strstr(features, "+avx512vl") ? 128 | 256 : 0);
}

LLVMValueRef vmath_unary(VMath *vm, int op, LLVMValueRef x) {
  V v = v_of(vm, x);
  switch (op) {
  case OP_EXP: return exp_v(&v, x);
  case OP_LOG: return log_v(&v, x);
  case OP_SQRT: return intr(&v, "llvm.sqrt", &x, 1);
  case OP_RSQRT: return dvd(&v, K(&v, 1), intr(&v, "llvm.sqrt", &x, 1));
  case OP_SIN: return sincos_v(&v, x, false);
  case OP_COS: return sincos_v(&v, x, true);
  case OP_TANH: return tanh_v(&v, x);
  case OP_SIGMOID: return sigmoid_v(&v, x);
  case OP_ERF: return erf_v(&v, x);
  default: return x;
  }
}

bool vmath_release(LLVMModuleRef m, const char *prefix) {
  char head[96];
  int hl = snprintf(head, sizeof head, "%s_vm_", prefix);
  unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
  unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
  LLVMContextRef cx = LLVMGetModuleContext(m);
  bool any = false;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    size_t len;
    const char *name = LLVMGetValueName2(f, &len);
    if (len < (size_t)hl || strncmp(name, head, (size_t)hl) || LLVMIsDeclaration(f)) continue;
    LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, noinline);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cx, always, 0));
    LLVMSetLinkage(f, LLVMInternalLinkage);
    any = true;
  }
  return any;
}

#endif
