#!/usr/bin/env python3
"""compare.py -- numeric comparisons of dyn against NumPy (run by tests/numpy.sh).

Usage: compare.py DYN SCRATCH_DIR [CASE_SUBSTRING ...]
  Only the cases whose names contain a CASE_SUBSTRING run, when any are given.
  $DYN_NUMPY_FLAGS go to dyn (e.g. --threads=1); $DYN_NUMPY_TARGETS picks back ends ("ref").

Each case writes random inputs (fixed seed) as .npy files into its own folder under
SCRATCH_DIR, writes a .dyn script that loads them, calls dyn functions (the standard library
or functions defined in the script) and saves the results; dyn runs it on each back end (the
compiled CPU one where the build has it, and the reference evaluator), a dozen cases to a
session, and every result is compared with a float64 NumPy reference.  Python 3 and NumPy only.

Metrics (named in each result line):
  exact       same dtype, same shape, equal values (integers, bool, selections, copies)
  norm TOL    max|got - ref| / max|ref| <= TOL (f32: 1e-5, f64: 1e-12)
  terms TOL M |got - ref| <= TOL * M elementwise, M the sum of the absolute values of the
              terms of each result (sums and products of matrices: |A| @ |B|), so that a
              result that cancels is judged by the size of what was added, not by itself
  elem R A    elementwise |got - ref| <= A + R * |ref|, NaNs and infinities in the same places
  range, normal, same, sum    for rand/randn/seed: values in [0, 1), mean 0 and std 1 roughly,
              equal to another output, the f64 sum of another output (norm 1e-5)
Output: one line per case and back end, then exactly `numpy: N passed, N failed`; exit 1 on
any failure.  A case marked xfail (for every back end, or a dict by back end) names a known
dyn bug: it is expected to fail (XFAIL, not counted); if it passes it is an XPASS and counts
as a failure, so that the mark gets removed.
"""
import concurrent.futures
import math
import os
import subprocess
import sys
import time

import numpy as np

F32, F64, I32, I64, BOOL = np.float32, np.float64, np.int32, np.int64, np.bool_
NORM32, NORM64 = ('norm', 1e-5), ('norm', 1e-12)
ELEM32 = ('elem', 1e-6, 1e-30)       # a few f32 roundings (6e-8 each) of one operation
EXACT = ('exact',)

FLAGS = os.environ.get('DYN_NUMPY_FLAGS', '').split()   # e.g. --threads=1
BATCH = 12                           # cases per dyn session
# The time limits are for native speed; under an emulated CPU (tests/emulated.sh) dyn runs
# ten to twenty times slower, and a loaded machine slower again: $DYN_TEST_TIMEOUT_SCALE
# multiplies them (as CK_TIMEOUT_MULTIPLIER does Check's).
TIMEOUT_SCALE = float(os.environ.get('DYN_TEST_TIMEOUT_SCALE') or 1)
rng = np.random.default_rng(20240611)
CASES = []


class Case:
    def __init__(self, name, inputs, body, outputs, xfail=None, fortran=(), v2=()):
        self.name = name
        self.inputs = inputs          # list of (name, ndarray)
        self.body = body              # dyn source between the loads and the saves
        self.outputs = outputs        # list of (name, dtype, reference, metric)
        self.xfail = xfail            # None, or the dyn bug this case shows
        self.fortran = set(fortran)   # inputs written in Fortran order
        self.v2 = set(v2)             # inputs written in .npy format 2.0 (else 1.0)


def case(name, inputs, body, outputs, xfail=None, fortran=(), v2=()):
    CASES.append(Case(name, inputs, body, outputs, xfail, fortran, v2))


def out(name, dtype, ref, metric=None):
    if metric is None:
        metric = NORM32 if dtype is F32 else NORM64 if dtype is F64 else EXACT
    return (name, dtype, np.asarray(ref), metric)


def summed(name, dtype, ref, mag):
    """A sum or a matrix product, judged against the size of its terms (mag: the same
    computation on absolute values), since the result itself may cancel."""
    tol = 1e-5 if dtype is F32 else 1e-12
    return out(name, dtype, ref, ('terms', tol, np.broadcast_to(f64(mag), np.shape(ref))))


def mm(name, dtype, a, b):
    """The product a @ b (NumPy's matmul, batches included), judged by |a| @ |b|."""
    a, b = f64(a), f64(b)
    return summed(name, dtype, np.matmul(a, b), np.matmul(np.abs(a), np.abs(b)))


# ---- inputs ----
def randn(shape, scale=1.0, shift=0.0, dtype=F32):
    return (rng.standard_normal(shape) * scale + shift).astype(dtype)


def uniform(shape, lo, hi, dtype=F32):
    return rng.uniform(lo, hi, shape).astype(dtype)


def f64(a):
    return np.asarray(a, dtype=F64)


def shape_str(shape):
    return 'x'.join(str(n) for n in shape) if shape else 'scalar'


# Sizes: 1, primes, tile-ish sizes and a few random ones (fixed by the seed).
RAND = [int(n) for n in rng.integers(2, 100, 4)]

# ---- the standard library ----
for M, K, N in [(1, 1, 1), (1, 7, 1), (7, 13, 31), (13, 1, 7), (16, 16, 16), (17, 17, 17),
                (63, 64, 65), (65, 63, 64), (127, 31, 13), (1, 127, 64), (128, 128, 128),
                (RAND[0], RAND[1], RAND[2])]:
    A, B = randn((M, K)), randn((K, N))
    case('matmul %dx%dx%d' % (M, K, N), [('A', A), ('B', B)], 'C = matmul(A, B)',
         [mm('C', F32, A, B)])

# Shapes the compiled path runs other ways: a matrix times a vector and a few columns (the
# inner-product kernels), a small C over a long k (k split over the threads), both at once.
# Their data comes from a generator of their own, so the cases after them keep theirs.
rng_ip = np.random.default_rng(20261130)
for M, K, N in [(600, 700, 1), (333, 1001, 7), (5, 2003, 13), (16, 3000, 16), (1, 20000, 1),
                (2, 4099, 3)]:
    A, B = (rng_ip.standard_normal(s).astype(F32) for s in ((M, K), (K, N)))
    case('matmul %dx%dx%d (few columns, long k)' % (M, K, N), [('A', A), ('B', B)],
         'C = matmul(A, B)', [mm('C', F32, A, B)])

# Columns just past a multiple of a tile's width: the last few run apart as inner products
# when the model finds that faster (2048 x 513 x 33 does on two threads).
rng_edge = np.random.default_rng(20261201)
for M, K, N in [(2048, 513, 33), (200, 200, 33), (129, 768, 65), (300, 97, 129), (157, 300, 80)]:
    A, B = (rng_edge.standard_normal(s).astype(F32) for s in ((M, K), (K, N)))
    case('matmul %dx%dx%d (a narrow last strip)' % (M, K, N), [('A', A), ('B', B)],
         'C = matmul(A, B)', [mm('C', F32, A, B)])


def softmax_ref(x):
    x = f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


for (B, N), scale, shift in [((1, 1), 1, 0), ((1, 127), 4, 0), ((7, 13), 4, 0), ((16, 17), 2, 0),
                             ((63, 64), 4, 0), ((65, 31), 1, 100), ((128, 65), 30, -1000),
                             ((RAND[3], RAND[0]), 3, 0)]:
    X = randn((B, N), scale, shift)
    case('softmax %dx%d scale %g shift %g' % (B, N, scale, shift), [('X', X)],
         'Y = softmax(X)', [out('Y', F32, softmax_ref(X))])


def layernorm_ref(x, g, b):
    x = f64(x)
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    v = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(v + 1e-5) * f64(g) + f64(b)


for B, N in [(1, 1), (1, 7), (13, 16), (31, 64), (64, 65), (17, 127), (RAND[1], RAND[2])]:
    X, g, b = randn((B, N), 2, 0.5), randn(N), randn(N)
    case('layernorm %dx%d' % (B, N), [('X', X), ('g', g), ('b', b)], 'Y = layernorm(X, g, b)',
         [out('Y', F32, layernorm_ref(X, g, b))])


def gelu_ref(x):
    x = f64(x)
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


for B, N in [(1, 1), (7, 13), (16, 64), (63, 65), (RAND[2], RAND[3])]:
    X = randn((B, N), 3)
    case('relu %dx%d' % (B, N), [('X', X)], 'Y = relu(X)', [out('Y', F32, np.maximum(X, 0), EXACT)])
    # elementwise: relative 1e-5, and absolute 1e-6 max|X| where 1 + tanh cancels (X < -3)
    case('gelu %dx%d' % (B, N), [('X', X)], 'Y = gelu(X)',
         [out('Y', F32, gelu_ref(X), ('elem', 1e-5, 1e-6 * float(np.abs(X).max())))])

# ---- one image: a kernel whose parallel axis has fewer values than the threads splits
# its next axis instead, each task the kernel on views of its tensors from its share
# (cpu_rt.c's cpu_sub_axis); a broadcast operand subscripted by that axis, one it does not
# subscript, a row-wise chain's per-row locals, a padding whose conditions name other axes.
ONE = '''
fn ew3(X: f32[A, B, C], v: f32[B], u: f32[C]) -> f32[A, B, C] {
  Y[a, b, c] = exp(X[a, b, c]) * v[b] + u[c]
  return Y
}
fn ew4(X: f32[A, B, C, D], Z: f32[C, B, D]) -> f32[A, B, C, D] {
  Y[a, b, c, d] = X[a, b, c, d] * Z[c, b, d]
  return Y
}
fn sm3(X: f32[A, B, N]) -> f32[A, B, N] {
  m[a, b] = max[n] X[a, b, n]
  e[a, b, n] = exp(X[a, b, n] - m[a, b])
  s[a, b] = sum[n] e[a, b, n]
  Y[a, b, n] = e[a, b, n] / s[a, b]
  return Y
}
fn ew2(X: f32[A, B]) -> f32[A, B] {
  Y[a, b] = exp(X[a, b]) * 2.0
  return Y
}
fn pad1(X: f32[N, C, H, W]) -> f32[N, C, H + 2, W + 2] {
  Xp[n, c, y, x]: f32[N, C, H + 2, W + 2] = where(y >= 1 and y < H + 1 and x >= 1 and x < W + 1, X[n, c, y - 1, x - 1], 0.0)
  return Xp
}
'''
rng_kept, rng = rng, np.random.default_rng(20261205)   # its own: the cases after keep their data
for A, B, C in [(1, 300, 200), (1, 7, 5001), (1, 1, 40000), (2, 1031, 37), (1, 257, 129)]:
    X, v, u = randn((A, B, C)), randn(B), randn(C)
    t = np.exp(f64(X)) * f64(v)[:, None]
    case('one image: element-wise %dx%dx%d' % (A, B, C), [('X', X), ('v', v), ('u', u)], ONE + 'Y = ew3(X, v, u)',
         [out('Y', F32, t + f64(u), ('elem', 1e-5, 1e-6 * float(np.abs(t).max() + np.abs(u).max())))])
for A, B in [(1, 100003), (1, 40961), (1, 17), (3, 9999)]:
    X = randn((A, B))
    case('one image: a row in pieces %dx%d' % (A, B), [('X', X)], ONE + 'Y = ew2(X)',
         [out('Y', F32, 2 * np.exp(f64(X)), ('elem', 1e-5, 1e-30))])
for A, B, C, D in [(1, 150, 7, 33), (1, 2, 3, 40000), (3, 61, 5, 17)]:
    X, Z = randn((A, B, C, D)), randn((C, B, D))
    case('one image: broadcast %dx%dx%dx%d' % (A, B, C, D), [('X', X), ('Z', Z)], ONE + 'Y = ew4(X, Z)',
         [out('Y', F32, f64(X) * f64(Z).transpose(1, 0, 2)[None], ELEM32)])
for A, B, N in [(1, 500, 129), (1, 67, 1000), (3, 333, 65), (1, 3, 50000)]:
    X = randn((A, B, N), 3)
    case('one image: softmax rows %dx%dx%d' % (A, B, N), [('X', X)], ONE + 'Y = sm3(X)',
         [out('Y', F32, softmax_ref(X))])
for shape in [(1, 200, 31, 29), (1, 1, 300, 301), (2, 67, 5, 3)]:
    X = randn(shape)
    case('one image: padding %s' % 'x'.join(map(str, shape)), [('X', X)], ONE + 'Y = pad1(X)',
         [out('Y', F32, np.pad(f64(X), ((0, 0), (0, 0), (1, 1), (1, 1))), EXACT)])
rng = rng_kept

# ---- a row's last vector: a stage that evaluates a transcendental an element runs its row's
# whole vectors, the last ending at the row's end over elements the one before it wrote
# (cpu.c's cpu_stage_overlaps), and a row shorter than a vector as a plain loop; in f32 and
# f64 (16 and 8 lanes at 512 bits), rows of every length around the lanes, a 3-D stage,
# and a row-wise chain whose exp stage has no fused sum.
LAST = '''
fn ex32(X: f32[A, B]) -> f32[A, B] {
  Y[a, b] = exp(X[a, b]) * 2.0
  return Y
}
fn ex64(X: f64[A, B]) -> f64[A, B] {
  Y[a, b] = exp(X[a, b]) * 2.0
  return Y
}
fn ex3(X: f32[A, B, C], v: f32[C]) -> f32[A, B, C] {
  Y[a, b, c] = tanh(X[a, b, c]) + v[c]
  return Y
}
fn chain(X: f32[A, B]) -> f32[A, B] {
  m[a] = max[b] X[a, b]
  e[a, b] = exp(X[a, b] - m[a])
  Y[a, b] = e[a, b] * (1.0 + e[a, b])
  return Y
}
fn lse(X: f32[A, B]) -> f32[A] {
  m[a] = max[b] X[a, b]
  e[a, b] = exp(X[a, b] - m[a])
  s[a] = sum[b] e[a, b]
  L[a] = m[a] + log(s[a])
  return L
}
'''
rng_kept, rng = rng, np.random.default_rng(20261206)
for N in [1, 3, 7, 8, 15, 16, 17, 24, 31, 32, 33, 47, 63, 64, 65, 77, 79, 80, 127, 129, 255, 257]:
    X = randn((5, N), 2)
    case('last vector f32 5x%d' % N, [('X', X)], LAST + 'Y = ex32(X)',
         [out('Y', F32, 2 * np.exp(f64(X)), ('elem', 1e-5, 1e-30))])
    X64 = rng.standard_normal((3, N)) * 2
    case('last vector f64 3x%d' % N, [('X', X64)], LAST + 'Y = ex64(X)',
         [out('Y', F64, 2 * np.exp(X64), ('elem', 1e-12, 1e-300))])
# and rows of every length around the lanes for the row-wise kernels whose exp carries the
# row's sum (softmax, a logsumexp; an f64 softmax with the f64 cases below), which keep the
# vectoriser's loop
for N in [1, 5, 15, 16, 17, 31, 33, 48, 63, 64, 65, 77, 97, 131, 255, 257]:
    X = randn((6, N), 3)
    case('last vector softmax 6x%d' % N, [('X', X)], 'Y = softmax(X)', [out('Y', F32, softmax_ref(X))])
    lse = f64(X).max(axis=1) + np.log(np.exp(f64(X) - f64(X).max(axis=1, keepdims=True)).sum(axis=1))
    case('last vector logsumexp 6x%d' % N, [('X', X)], LAST + 'L = lse(X)',
         [out('L', F32, lse, ('elem', 1e-6, 1e-6))])
for A, B, C in [(2, 3, 19), (4, 5, 77), (1, 2, 9)]:
    X, v = randn((A, B, C)), randn(C)
    case('last vector 3-D %dx%dx%d' % (A, B, C), [('X', X), ('v', v)], LAST + 'Y = ex3(X, v)',
         [out('Y', F32, np.tanh(f64(X)) + f64(v), ('elem', 1e-5, 1e-6))])
for A, B in [(7, 77), (3, 5), (9, 33)]:
    X = randn((A, B), 2)
    e = np.exp(f64(X) - f64(X).max(axis=1, keepdims=True))
    case('last vector chain %dx%d' % (A, B), [('X', X)], LAST + 'Y = chain(X)',
         [out('Y', F32, e * (1 + e), ('elem', 1e-5, 1e-30))])
rng = rng_kept

# ---- reductions in index notation ----
REDS = '''
fn reds(A: f32[M, N]) -> (f32[M], f32[M], f32[M], f32[M], f32[N], f32[N], f32[N], f32[M]) {
  s[i]  = sum[j] A[i, j]
  mx[i] = max[j] A[i, j]
  mn[i] = min[j] A[i, j]
  p[i]  = prod[j] A[i, j]
  cs[j] = sum[i] A[i, j]
  cx[j] = max[i] A[i, j]
  cn[j] = min[i] A[i, j]
  w[i]  = (sum[j] A[i, j] * j) + i
  return (s, mx, mn, p, cs, cx, cn, w)
}
fn reds2(A: f32[B, M, N]) -> (f32[B], f32[B], f32[B], f32[B], f32[M], f32, f32[B]) {
  s[b]  = sum[m, n] A[b, m, n]
  mx[b] = max[m, n] A[b, m, n]
  mn[b] = min[m, n] A[b, m, n]
  p[b]  = prod[m, n] A[b, m, n]
  o[m]  = sum[b, n] A[b, m, n]
  t     = sum[b, m, n] A[b, m, n]
  nest[b] = sum[m] max[n] A[b, m, n]
  return (s, mx, mn, p, o, t, nest)
}
'''
for M, N in [(1, 1), (1, 7), (13, 1), (7, 13), (16, 17), (31, 64), (65, 63), (127, 16),
             (RAND[0], RAND[3])]:
    A = uniform((M, N), 0.9, 1.1) * np.where(rng.random((M, N)) < 0.2, -1, 1).astype(F32)
    a = f64(A)
    case('reductions over one index %dx%d' % (M, N), [('A', A)],
         REDS + '(s, mx, mn, p, cs, cx, cn, w) = reds(A)',
         [summed('s', F32, a.sum(1), np.abs(a).sum(1)), out('mx', F32, a.max(1), EXACT),
          out('mn', F32, a.min(1), EXACT), out('p', F32, a.prod(1)),
          summed('cs', F32, a.sum(0), np.abs(a).sum(0)), out('cx', F32, a.max(0), EXACT),
          out('cn', F32, a.min(0), EXACT),
          summed('w', F32, (a * np.arange(N)).sum(1) + np.arange(M),
                 (np.abs(a) * np.arange(N)).sum(1) + np.arange(M))])
for B, M, N in [(1, 1, 1), (2, 7, 13), (3, 16, 17), (5, 31, 1), (1, 64, 65), (4, RAND[1], 13)]:
    A = uniform((B, M, N), 0.95, 1.05) * np.where(rng.random((B, M, N)) < 0.3, -1, 1).astype(F32)
    a = f64(A)
    case('reductions over two indices %dx%dx%d' % (B, M, N), [('A', A)],
         REDS + '(s, mx, mn, p, o, t, nest) = reds2(A)',
         [summed('s', F32, a.sum((1, 2)), np.abs(a).sum((1, 2))),
          out('mx', F32, a.max((1, 2)), EXACT),
          out('mn', F32, a.min((1, 2)), EXACT), out('p', F32, a.prod((1, 2))),
          summed('o', F32, a.sum((0, 2)), np.abs(a).sum((0, 2))),
          summed('t', F32, a.sum(), np.abs(a).sum()),
          summed('nest', F32, a.max(2).sum(1), np.abs(a.max(2)).sum(1))])

# ---- transposes and permutations ----
TRANS = '''
fn tr(A: f32[M, N]) -> f32[N, M] {
  B[j, i] = A[i, j]
  return B
}
fn perm(A: f32[I, J, K]) -> f32[K, I, J] {
  B[k, i, j] = A[i, j, k]
  return B
}
'''
for (M, N), (I, J, K) in [((1, 1), (1, 1, 1)), ((1, 31), (2, 1, 7)), ((7, 13), (3, 16, 17)),
                          ((64, 65), (13, 7, 64)), ((127, 63), (RAND[2], 5, RAND[0]))]:
    A, C = randn((M, N)), randn((I, J, K))
    case('transpose %dx%d, permute %dx%dx%d' % (M, N, I, J, K), [('A', A), ('C', C)],
         TRANS + 'T = tr(A)\nP = perm(C)',
         [out('T', F32, A.T, EXACT), out('P', F32, C.transpose(2, 0, 1), EXACT)])

# ---- batched matmul ----
BMM = '''
fn bmm(A: f32[B, M, K], X: f32[B, K, N]) -> f32[B, M, N] {
  C[b, i, j] = sum[k] A[b, i, k] * X[b, k, j]
  return C
}
'''
for B, M, K, N in [(1, 1, 1, 1), (3, 7, 13, 31), (2, 16, 17, 63), (4, 64, 65, 31),
                   (7, 13, 1, 16), (RAND[3] % 5 + 1, RAND[0], 17, RAND[1])]:
    A, X = randn((B, M, K)), randn((B, K, N))
    case('batched matmul %dx%dx%dx%d' % (B, M, K, N), [('A', A), ('X', X)], BMM + 'C = bmm(A, X)',
         [mm('C', F32, A, X)])

# ---- matmul batched over several axes (a multi-head attention's [B, H, S, D] scores and
# its output): one GEMM over the batch axes where they nest (C order), one GEMM an index of
# the outer ones where they do not (Q a view of the first H heads of H + 1, and K shared by
# the heads: the inner batch in A and C only); f64; an outer axis of 0 and of 1 ----
MHA = '''
fn scores(Q: f32[B, H, S, D], K: f32[B, H, T, D]) -> f32[B, H, S, T] {
  Y[b, h, i, j]: f32[B, H, S, T] = sum[d] Q[b, h, i, d] * K[b, h, j, d]
  return Y
}
fn mix(P: f32[B, H, S, T], V: f32[B, H, T, D]) -> f32[B, H, S, D] {
  O[b, h, i, e]: f32[B, H, S, D] = sum[j] P[b, h, i, j] * V[b, h, j, e]
  return O
}
fn shared(Q: f32[B, H, S, D], K: f32[B, T, D]) -> f32[B, H, S, T] {
  Y[b, h, i, j]: f32[B, H, S, T] = sum[d] Q[b, h, i, d] * K[b, j, d]
  return Y
}
fn five(A: f64[G, B, H, M, K], X: f64[G, B, H, K, N]) -> f64[G, B, H, M, N] {
  C[g, b, h, i, j]: f64[G, B, H, M, N] = sum[k] A[g, b, h, i, k] * X[g, b, h, k, j]
  return C
}
'''
for B, H, S, T, D in [(2, 3, 7, 13, 5), (1, 1, 1, 1, 1), (3, 2, 17, 16, 64), (0, 4, 3, 3, 2), (2, 0, 3, 3, 2),
                      (2, 5, 33, 31, 17)]:
    Q, K, V = randn((B, H, S, D)), randn((B, H, T, D)), randn((B, H, T, D))
    P, Ks = randn((B, H, S, T)), randn((B, T, D))
    Kt = np.swapaxes(K, -1, -2)
    case('matmul batched over two axes %dx%dx%dx%dx%d' % (B, H, S, T, D),
         [('Q', Q), ('K', K), ('V', V), ('P', P), ('Ks', Ks)],
         MHA + 'Y = scores(Q, K)\nO = mix(P, V)\nZ = shared(Q, Ks)\n',
         [mm('Y', F32, Q, Kt), mm('O', F32, P, V), mm('Z', F32, Q, np.swapaxes(Ks, -1, -2)[:, None])])
    Qb = randn((B, H + 1, S, D))
    case('matmul batched over two axes, Q a view %dx%dx%dx%dx%d' % (B, H, S, T, D),
         [('Qb', Qb), ('K', K)], MHA + 'Qv = Qb[:, 0:%d, :, :]\nY = scores(Qv, K)\n' % H,
         [mm('Y', F32, Qb[:, :H], Kt)])
for G, B, H, M, K, N in [(2, 3, 2, 5, 7, 9), (1, 2, 1, 16, 3, 33)]:
    A5, X5 = randn((G, B, H, M, K), dtype=np.float64), randn((G, B, H, K, N), dtype=np.float64)
    case('matmul batched over three axes, f64 %dx%dx%dx%dx%dx%d' % (G, B, H, M, K, N), [('A', A5), ('X', X5)],
         MHA + 'C = five(A, X)\n', [mm('C', np.float64, A5, X5)])

# ---- 1-D convolution, output H - R + 1 ----
CONV = '''
fn conv1d(X: f32[N, H], Wt: f32[R]) -> f32[N, H - R + 1] {
  O[n, h] = sum[r] X[n, h + r] * Wt[r]
  return O
}
'''
for N, H, R in [(1, 1, 1), (1, 7, 7), (3, 13, 1), (4, 64, 3), (7, 127, 17), (2, 65, 16),
                (5, 63, 31), (2, RAND[2] + 10, 9)]:
    X, Wt = randn((N, H)), randn(R)
    ref = np.lib.stride_tricks.sliding_window_view(f64(X), R, axis=1) @ f64(Wt)
    case('conv1d N=%d H=%d R=%d' % (N, H, R), [('X', X), ('Wt', Wt)], CONV + 'O = conv1d(X, Wt)',
         [out('O', F32, ref)])

# ---- arithmetic on a reduction under the stage's last axis (run interchanged: each step of
# the reduction updates a row of partial results, the arithmetic a pass over the row after) --
WRAPPED = '''
fn colmean(X: f32[R, C]) -> f32[C] {
  Y[c] = sum[r] X[r, c] / f32(R)
  return Y
}
fn midscale(X: f32[A, B, C], w: f32[C], u: f32[A]) -> f32[A, C] {
  Y[a, c] = (sum[b] X[a, b, c]) * w[c] + u[a]
  return Y
}
fn winmax(X: f32[N, H], w: f32[R]) -> f32[N, H - R + 1] where H >= R {
  Y[n, h] = 2.0 * (max[r] X[n, h + r] * w[r]) - 1.0
  return Y
}
'''
for N, C, H, W, K, S in [(1, 1, 1, 1, 1, 1), (2, 3, 7, 9, 3, 1), (1, 2, 17, 33, 2, 2), (3, 5, 16, 15, 3, 2),
                         (2, 4, 31, 64, 5, 1), (1, 3, 9, 10, 9, 1)]:
    X = randn((N, C, H, W))
    win = np.lib.stride_tricks.sliding_window_view(f64(X), (K, K), axis=(2, 3))[:, :, ::S, ::S]
    case('avgpool2d %dx%dx%dx%d K=%d S=%d' % (N, C, H, W, K, S), [('X', X)],
         'Y = avgpool2d(X, %d, %d)' % (K, S), [summed('Y', F32, win.mean(axis=(4, 5)), np.abs(win).mean(axis=(4, 5)))])
for R, C in [(1, 1), (7, 1), (1, 17), (13, 31), (64, 65), (RAND[0], RAND[1])]:
    X = randn((R, C))
    case('column mean %dx%d' % (R, C), [('X', X)], WRAPPED + 'Y = colmean(X)',
         [summed('Y', F32, f64(X).mean(0), np.abs(f64(X)).mean(0))])
# ---- loads under where's guard (a padding, joins): loaded where the branch is taken, a
# masked load of consecutive lanes, never out of the operand; a where on the last axis
# alone splits its loop where the condition flips
PADS = '''
fn pad2(X: f32[M, N], c: f32) -> f32[M + 3, N + 4] {
  Y[i, j] = where(i >= 2 and i < M + 2 and j >= 1 and j <= N, X[i - 2, j - 1] * 2.0, c)
  return Y
}
fn shifted(X: f32[M, N]) -> (f32[M, N], f32[M, N]) {
  Y[i, j] = where(j >= 2, X[i, j - 2], X[i, j] * 0.5)
  Z[i, j] = where(N - 3 < j, -X[i, j], X[i, j] + 1.0)
  return (Y, Z)
}
fn joins(A: f64[M, N], B: f64[K, N], C: f64[M, L]) -> (f64[M + K, N], f64[M, N + L]) {
  R = concat(A, B, 0)
  S = concat(A, C, 1)
  return (R, S)
}
'''
for M, N, K, L in [(1, 1, 1, 1), (1, 17, 2, 3), (7, 1, 5, 16), (13, 31, 17, 15), (RAND[0], RAND[1], 33, 65)]:
    X, A, B, C = randn((M, N)), randn((M, N), dtype=F64), randn((K, N), dtype=F64), randn((M, L), dtype=F64)
    P = np.full((M + 3, N + 4), -1.5)
    P[2:M + 2, 1:N + 1] = f64(X) * 2
    Sh = f64(X) * 0.5
    Sh[:, 2:] = f64(X)[:, :-2]
    Zs = f64(X) + 1
    Zs[:, max(N - 2, 0):] = -f64(X)[:, max(N - 2, 0):]
    case('padding and joins %dx%d, %d, %d' % (M, N, K, L), [('X', X), ('A', A), ('B', B), ('C', C)],
         PADS + 'Y = pad2(X, -1.5)\n(R, S) = joins(A, B, C)\n(Sy, Sz) = shifted(X)',
         [out('Y', F32, P), out('R', F64, np.concatenate([A, B], 0)), out('S', F64, np.concatenate([A, C], 1)),
          out('Sy', F32, Sh), out('Sz', F32, Zs)])

# ---- a chain of reductions down the columns (softmax over axis 0, the variance of each
# column): each reduction its own kernel with its loops interchanged, not grouped per column
COLUMNS = '''
fn colsoftmax(X: f32[R, C]) -> f32[R, C] {
  m[c] = max[r] X[r, c]
  s[c] = sum[r] exp(X[r, c] - m[c])
  Y[r, c] = exp(X[r, c] - m[c]) / s[c]
  return Y
}
fn colvar(X: f32[R, C]) -> f32[C] {
  mu[c] = (sum[r] X[r, c]) / f32(R)
  v[c] = (sum[r] (X[r, c] - mu[c]) * (X[r, c] - mu[c])) / f32(R)
  return v
}
'''
for R, C in [(1, 1), (1, 17), (7, 1), (13, 31), (64, 65), (3, 40009), (RAND[0], RAND[1])]:
    X = randn((R, C)) * 4
    e = np.exp(f64(X) - f64(X).max(0))
    d = f64(X) - f64(X).mean(0)
    case('columns: softmax and variance %dx%d' % (R, C), [('X', X)], COLUMNS + 'Y = colsoftmax(X)\nV = colvar(X)',
         [out('Y', F32, e / e.sum(0)), summed('V', F32, (d * d).mean(0), ((np.abs(f64(X)) + np.abs(f64(X).mean(0))) ** 2).mean(0))])
for A, B, C in [(1, 1, 1), (3, 7, 17), (2, 33, 64), (5, 16, 63), (2, RAND[2] + 1, 31)]:
    X, w, u = randn((A, B, C)), randn(C), randn(A)
    ref = f64(X).sum(1) * f64(w) + f64(u)[:, None]
    mag = np.abs(f64(X)).sum(1) * np.abs(f64(w)) + np.abs(f64(u))[:, None]
    case('middle sum scaled %dx%dx%d' % (A, B, C), [('X', X), ('w', w), ('u', u)], WRAPPED + 'Y = midscale(X, w, u)',
         [summed('Y', F32, ref, mag)])
for N, H, R in [(1, 1, 1), (3, 20, 4), (2, 65, 16), (4, 33, 33)]:
    X, w = randn((N, H)), randn(R)
    ref = 2.0 * (np.lib.stride_tricks.sliding_window_view(f64(X), R, axis=1) * f64(w)).max(axis=2) - 1.0
    case('window max scaled N=%d H=%d R=%d' % (N, H, R), [('X', X), ('w', w)], WRAPPED + 'Y = winmax(X, w)',
         [out('Y', F32, ref)])

# ---- a contraction through a window whose other operand is not a matrix in place: the
# attention's heads projected back, O[h, s, e] read as s x (h, e) (gathered into a matrix
# first), and a batched one (M's axes b and s apart, the taps in two axes) --
PROJ = '''
fn proj(O: f32[NH, S, DH], Wo: f32[D, D], bo: f32[D]) -> f32[S, D] where D == NH * DH {
  Y[s, o] = (sum[h, e] O[h, s, e] * Wo[o, h * DH + e]) + bo[o]
  return Y
}
fn bproj(O: f64[B, NH, S, DH], Wo: f64[F, NH * DH]) -> f64[B, S, F] {
  Y[b, s, o] = sum[h, e] O[b, h, s, e] * Wo[o, h * DH + e]
  return Y
}
'''
for NH, S, DH, B in [(1, 1, 1, 1), (2, 3, 5, 2), (4, 17, 16, 3), (12, 33, 64, 1), (3, RAND[1], 7, 2)]:
    D = NH * DH
    O, Wo, bo = randn((NH, S, DH)), randn((D, D)), randn(D)
    Of = f64(O).transpose(1, 0, 2).reshape(S, D)
    ref = Of @ f64(Wo).T + f64(bo)
    mag = np.abs(Of) @ np.abs(f64(Wo)).T + np.abs(f64(bo))
    case('heads projected NH=%d S=%d DH=%d' % (NH, S, DH), [('O', O), ('Wo', Wo), ('bo', bo)],
         PROJ + 'Y = proj(O, Wo, bo)', [summed('Y', F32, ref, mag)])
    O4, W4 = randn((B, NH, S, DH), dtype=F64), randn((DH + 3, D), dtype=F64)
    Of4 = O4.transpose(0, 2, 1, 3).reshape(B, S, D)
    case('heads projected f64 B=%d NH=%d S=%d DH=%d' % (B, NH, S, DH), [('O', O4), ('Wo', W4)],
         PROJ + 'Y = bproj(O, Wo)', [summed('Y', F64, Of4 @ W4.T, np.abs(Of4) @ np.abs(W4).T)])

# ---- padding with where(...) and a size parameter ----
PAD = '''
fn pad(X: f32[H], P: size) -> f32[H + 2 * P] {
  Y[i] = where(i >= P and i < H + P, X[i - P], 0.0)
  return Y
}
fn pad2(X: f32[H, W], P: size) -> f32[H + 2 * P, W + 2 * P] {
  Y[i, j] = where(i >= P and i < H + P and j >= P and j < W + P, X[i - P, j - P], -1.5)
  return Y
}
'''
for H, W, P in [(1, 1, 0), (1, 1, 1), (7, 13, 3), (16, 17, 1), (64, 65, 2), (127, 31, 7),
                (RAND[1], RAND[0], 5)]:
    X, Z = randn(H), randn((H, W))
    case('pad H=%d W=%d P=%d' % (H, W, P), [('X', X), ('Z', Z)],
         PAD + 'Y = pad(X, %d)\nQ = pad2(Z, %d)' % (P, P),
         [out('Y', F32, np.pad(X, P), EXACT),
          out('Q', F32, np.pad(Z, P, constant_values=-1.5), EXACT)])

# ---- elementwise math (f32 and f64) ----
HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, 0, -0.0, 2, -7, 0.49999997])
UNARY = [  # name, dyn expression of x, reference, input maker, metric
    ('exp', 'exp(@)', np.exp, lambda s, d: uniform(s, -20, 20, d), None),
    ('log', 'log(@)', np.log, lambda s, d: np.exp(uniform(s, -9, 9, F64)).astype(d), None),
    ('sqrt', 'sqrt(@)', np.sqrt, lambda s, d: np.exp(uniform(s, -9, 9, F64)).astype(d), None),
    ('rsqrt', 'rsqrt(@)', lambda x: 1 / np.sqrt(x),
     lambda s, d: np.exp(uniform(s, -9, 9, F64)).astype(d), None),
    ('abs', 'abs(@)', np.abs, lambda s, d: randn(s, 10, dtype=d), EXACT),
    ('sin', 'sin(@)', np.sin, lambda s, d: uniform(s, -10, 10, d), None),
    ('cos', 'cos(@)', np.cos, lambda s, d: uniform(s, -10, 10, d), None),
    ('tanh', 'tanh(@)', np.tanh, lambda s, d: randn(s, 3, dtype=d), None),
    ('sigmoid', 'sigmoid(@)', lambda x: 1 / (1 + np.exp(-x)),
     lambda s, d: randn(s, 5, dtype=d), None),
    ('erf', 'erf(@)', None, lambda s, d: randn(s, 2, dtype=d), None),
    ('floor', 'floor(@)', np.floor, None, EXACT),
    ('ceil', 'ceil(@)', np.ceil, None, EXACT),
    ('round', 'round(@)', np.round, None, EXACT),
    ('neg', '-@', np.negative, lambda s, d: randn(s, dtype=d), EXACT),
    ('square via **', '@ ** 2.0', np.square, lambda s, d: randn(s, 3, dtype=d), None),
]


def erf_ref(x):
    """erf in float64 (math.erf: NumPy has none, and SciPy is not required)."""
    return np.vectorize(math.erf, otypes=[F64])(f64(x))


def rounding_input(shape, dtype):
    x = randn(shape, 10, dtype=dtype).ravel()
    k = min(x.size, HALVES.size)
    x[:k] = HALVES[:k]
    return x.reshape(shape)


SHAPES = [(1,), (7,), (13,), (31,), (127,), (16,), (17,), (63,), (64,), (65,), (RAND[0],),
          (7, 13), (17, 16), (RAND[1], RAND[2])]
for k, (name, expr, ref, make, metric) in enumerate(UNARY):
    for dtype, ty in [(F32, 'f32'), (F64, 'f64')]:
        shape = SHAPES[(3 * k + (dtype is F64)) % len(SHAPES)]
        x = make(shape, dtype) if make else rounding_input(shape, dtype)
        ref_fn = erf_ref if ref is None else ref
        idx = ', '.join('i%d' % d for d in range(len(shape)))
        dims = ', '.join('D%d' % d for d in range(len(shape)))
        body = ('fn f(X: %s[%s]) -> %s[%s] {\n  Y[%s] = %s\n  return Y\n}\nY = f(X)'
                % (ty, dims, ty, dims, idx, expr.replace('@', 'X[%s]' % idx)))
        m = metric or (ELEM32 if dtype is F32 else ('elem', 1e-13, 1e-300))
        case('%s %s %s' % (name, ty, shape_str(shape)), [('X', x)], body,
             [out('Y', dtype, ref_fn(f64(x)), m)])

BINARY = '''
fn bin(A: f32[N], B: f32[N], E: f32[N]) -> (f32[N], f32[N], f32[N], f32[N],
                                              f32[N], f32[N], f32[N]) {
  p[n]  = pow(A[n], E[n])
  q[n]  = A[n] ** E[n]
  r[n]  = A[n] ** 0.5 ** 2.0
  mx[n] = max(A[n], B[n])
  mn[n] = min(A[n], B[n])
  m[n]  = B[n] % 1.5
  d[n]  = B[n] / A[n]
  return (p, q, r, mx, mn, m, d)
}
'''
for N in [1, 7, 16, 65, 127, RAND[2]]:
    A, B, E = uniform(N, 0.1, 10), randn(N, 5), uniform(N, -3, 3)
    a, b, e = f64(A), f64(B), f64(E)
    case('pow, **, max, min, float %% and / N=%d' % N, [('A', A), ('B', B), ('E', E)],
         BINARY + '(p, q, r, mx, mn, m, d) = bin(A, B, E)',
         [out('p', F32, a ** e, ELEM32), out('q', F32, a ** e, ELEM32),
          out('r', F32, a ** (0.5 ** 2.0), ELEM32),
          out('mx', F32, np.maximum(A, B), EXACT), out('mn', F32, np.minimum(A, B), EXACT),
          out('m', F32, np.mod(b, 1.5), ('elem', 1e-6, 1e-6)), out('d', F32, b / a, ELEM32)])

# ---- f64 end to end ----
F64FNS = '''
fn matmul64(A: f64[M, K], B: f64[K, N]) -> f64[M, N] {
  C[i, j] = sum[k] A[i, k] * B[k, j]
  return C
}
fn softmax64(X: f64[B, N]) -> f64[B, N] {
  m[b]    = max[n] X[b, n]
  e[b, n] = exp(X[b, n] - m[b])
  s[b]    = sum[n] e[b, n]
  Y[b, n] = e[b, n] / s[b]
  return Y
}
fn lit64(X: f64[B, N]) -> f64[B, N] {
  Y[b, n] = X[b, n] * 0.1 + 1e-300 * 1e300 + 1.0000000001
  return Y
}
'''
for M, K, N in [(1, 1, 1), (7, 13, 31), (16, 17, 64), (65, 63, 127), (RAND[3], RAND[0], 13)]:
    A, B = randn((M, K), dtype=F64), randn((K, N), 3, dtype=F64)
    case('f64 matmul, softmax, literals %dx%dx%d' % (M, K, N), [('A', A), ('B', B)],
         F64FNS + 'C = matmul64(A, B)\nS = softmax64(B)\nL = lit64(A)\nT = A * 0.1 + 2 * A',
         [mm('C', F64, A, B), out('S', F64, softmax_ref(B)),
          out('L', F64, A * 0.1 + 1.0 + 1.0000000001, ('elem', 1e-15, 1e-300)),
          out('T', F64, A * 0.1 + 2 * A, ('elem', 1e-15, 1e-300))])

# softmax64 over rows of every length around the lanes (8 of f64 at 512 bits): the f32 cases'
# 'last vector' lengths
rng_kept, rng = rng, np.random.default_rng(20261207)
for N in [1, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 77, 131, 257]:
    X64 = rng.standard_normal((3, N)) * 3
    e = np.exp(X64 - X64.max(axis=1, keepdims=True))
    case('last vector softmax f64 3x%d' % N, [('X', X64)], F64FNS + 'Y = softmax64(X)',
         [out('Y', F64, e / e.sum(axis=1, keepdims=True), ('elem', 1e-12, 1e-300))])
rng = rng_kept

# ---- integer arithmetic: floor division and modulo on negative numbers ----
INTS = '''
fn iops(A: T[N], B: T[N]) -> (T[N], T[N], T[N], T[N], T[N], T[N], T[N], T[N], T[N], T[N], T[N]) {
  q[n]  = A[n] / B[n]
  r[n]  = A[n] % B[n]
  q3[n] = A[n] / -3
  r5[n] = A[n] % 5
  rm[n] = A[n] % -7
  s[n]  = A[n] + B[n] * 3 - 7
  ng[n] = -A[n]
  ab[n] = abs(A[n])
  mx[n] = max(A[n], B[n])
  mn[n] = min(A[n], B[n])
  ov[n] = A[n] * 65537 + 2147483647
  return (q, r, q3, r5, rm, s, ng, ab, mx, mn, ov)
}
fn ireds(A: T[M, N]) -> (T[M], T[M], T[M], T[N]) {
  s[i] = sum[j] A[i, j]
  x[i] = max[j] A[i, j]
  m[i] = min[j] A[i, j]
  c[j] = sum[i] A[i, j] % 3
  return (s, x, m, c)
}
'''
SIGNS = np.array([[7, 2], [-7, 2], [7, -2], [-7, -2], [6, 3], [-6, 3], [6, -3], [-6, -3],
                  [0, 5], [0, -5], [1, 1], [-1, 1], [1, -1], [-1, -1], [5, 7], [-5, 7], [5, -7],
                  [-5, -7]])
for dtype, ty, big in [(I32, 'i32', 2 ** 30), (I64, 'i64', 2 ** 62)]:
    for N in [1, 18, 64, 127, RAND[0]]:
        A = rng.integers(-1000, 1000, N)
        B = rng.integers(1, 50, N) * rng.choice([-1, 1], N)
        if N >= 18:
            A[:18], B[:18] = SIGNS[:, 0], SIGNS[:, 1]
        if N >= 64:   # large magnitudes, beyond 32 bits for i64
            A[40:50] = rng.integers(-big, big, 10)
            B[45:50] = rng.integers(1, 2 ** 20, 5) * rng.choice([-1, 1], 5)
        A, B = A.astype(dtype), B.astype(dtype)
        body = INTS.replace('T[', ty + '[') + \
            '(q, r, q3, r5, rm, s, ng, ab, mx, mn, ov) = iops(A, B)\nTQ = A / B\nTR = A % B'
        case('%s // %% + - * abs max min N=%d' % (ty, N), [('A', A), ('B', B)], body,
             [out('q', dtype, A // B), out('r', dtype, A % B), out('q3', dtype, A // dtype(-3)),
              out('r5', dtype, A % dtype(5)), out('rm', dtype, A % dtype(-7)),
              out('s', dtype, A + B * dtype(3) - dtype(7)), out('ng', dtype, -A),
              out('ab', dtype, np.abs(A)), out('mx', dtype, np.maximum(A, B)),
              out('mn', dtype, np.minimum(A, B)),
              out('ov', dtype, A * dtype(65537) + dtype(2147483647)),   # wraps around
              out('TQ', dtype, A // B), out('TR', dtype, A % B)])
    for M, N in [(1, 1), (7, 13), (31, 64), (RAND[1], RAND[2])]:
        A = rng.integers(-1000, 1000, (M, N)).astype(dtype)
        body = INTS.replace('T[', ty + '[') + '(s, x, m, c) = ireds(A)'
        case('%s reductions %dx%d' % (ty, M, N), [('A', A)], body,
             [out('s', dtype, A.sum(1, dtype=dtype)), out('x', dtype, A.max(1)),
              out('m', dtype, A.min(1)), out('c', dtype, (A % dtype(3)).sum(0, dtype=dtype))])

# ---- integer edges: INT_MIN / -1 wraps as in NumPy, sums that overflow wrap ----
IEDGE = """
fn edge(A: T[N], B: T[N]) -> (T[N], T[N]) {
  q[n] = A[n] / B[n]
  r[n] = A[n] % B[n]
  return (q, r)
}
fn wsum(X: T[M, N]) -> (T[M], T[M], T[M]) {
  s[i] = sum[j] X[i, j]
  x[i] = max[j] X[i, j]
  m[i] = min[j] X[i, j]
  return (s, x, m)
}
"""
for dtype, ty in [(I32, 'i32'), (I64, 'i64')]:
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    A = np.array([lo, lo, lo, hi, hi, -1, 0, lo + 1], dtype)
    B = np.array([-1, 1, lo, -1, lo, lo, lo, -1], dtype)
    X = rng.integers(hi // 8, hi, (5, 64)).astype(dtype)
    X = np.where(rng.random((5, 64)) < 0.3, -X, X)
    X[0, 5], X[1, 7] = lo, hi
    with np.errstate(all='ignore'):
        want = [A // B, A % B, X.sum(1, dtype=dtype), X.max(1), X.min(1)]
    case('%s edges: MIN / -1, MIN %% -1, sums that wrap' % ty, [('A', A), ('B', B), ('X', X)],
         IEDGE.replace('T[', ty + '[') + '(q, r) = edge(A, B)\n(s, x, m) = wsum(X)',
         [out('q', dtype, want[0]), out('r', dtype, want[1]), out('s', dtype, want[2]),
          out('x', dtype, want[3]), out('m', dtype, want[4])])


# ---- comparisons and logic give bool ----
CMP = '''
fn cmp(A: f32[N], B: f32[N], I: i32[N], M: bool[N]) -> (bool[N], bool[N], bool[N], bool[N],
    bool[N], bool[N], bool[N], bool[N], bool[N], f32[N]) {
  lt[n] = A[n] < B[n]
  le[n] = A[n] <= B[n]
  gt[n] = A[n] > B[n]
  ge[n] = A[n] >= B[n]
  eq[n] = A[n] == B[n]
  ne[n] = A[n] != B[n]
  ie[n] = I[n] % 2 == 0
  lg[n] = (A[n] < 0.0 and not M[n]) or I[n] > 3
  mm[n] = M[n] == (A[n] > B[n])
  sel[n] = where(M[n], A[n], B[n] * 2.0)
  return (lt, le, gt, ge, eq, ne, ie, lg, mm, sel)
}
'''
for N in [1, 7, 17, 64, 127, RAND[3]]:
    A = np.round(randn(N, 2), 1)
    B = np.where(rng.random(N) < 0.3, A, np.round(randn(N, 2), 1)).astype(F32)
    I, Mk = rng.integers(-6, 7, N).astype(I32), rng.random(N) < 0.5
    case('comparisons, and/or/not, where on bool N=%d' % N,
         [('A', A), ('B', B), ('I', I), ('M', Mk)],
         CMP + '(lt, le, gt, ge, eq, ne, ie, lg, mm, sel) = cmp(A, B, I, M)\nTC = A < B',
         [out('lt', BOOL, A < B), out('le', BOOL, A <= B), out('gt', BOOL, A > B),
          out('ge', BOOL, A >= B), out('eq', BOOL, A == B), out('ne', BOOL, A != B),
          out('ie', BOOL, I % 2 == 0), out('lg', BOOL, ((A < 0) & ~Mk) | (I > 3)),
          out('mm', BOOL, Mk == (A > B)), out('sel', F32, np.where(Mk, A, B * 2), EXACT),
          out('TC', BOOL, A < B)])

# ---- casts (float to int truncates toward zero) ----
CASTS = '''
fn casts(X: f32[N], D: f64[N], I: i32[N], L: i64[N]) -> (i32[N], i64[N], i64[N], i32[N],
    f32[N], f64[N], f32[N], f64[N], f32[N], i32[N]) {
  a[n] = i32(X[n])
  b[n] = i64(X[n])
  c[n] = i64(D[n])
  d[n] = i32(D[n])
  e[n] = f32(I[n])
  f[n] = f64(X[n])
  g[n] = f32(D[n])
  h[n] = f64(L[n])
  k[n] = f32(L[n])
  w[n] = i32(L[n])
  return (a, b, c, d, e, f, g, h, k, w)
}
'''
for N in [1, 16, 31, 65, RAND[2]]:
    X = randn(N, 50)
    X.ravel()[:min(N, 8)] = np.array([-2.7, -0.5, -0.0, 0.5, 2.7, -1.0, -99.99, 99.99])[:min(N, 8)]
    D = randn(N, 1e6, dtype=F64)
    I = rng.integers(-2 ** 24, 2 ** 24, N).astype(I32)
    L = rng.integers(-2 ** 40, 2 ** 40, N).astype(I64)
    if N >= 4:
        L[:4] = [2 ** 60 + 2 ** 36 + 1, -(2 ** 53 + 1), 2 ** 31 + 5, -(2 ** 32) - 3]
    case('casts N=%d' % N, [('X', X), ('D', D), ('I', I), ('L', L)],
         CASTS + '(a, b, c, d, e, f, g, h, k, w) = casts(X, D, I, L)',
         [out('a', I32, np.trunc(X).astype(I32)), out('b', I64, np.trunc(X).astype(I64)),
          out('c', I64, np.trunc(D).astype(I64)), out('d', I32, np.trunc(D).astype(I32)),
          out('e', F32, I.astype(F32), EXACT), out('f', F64, X.astype(F64), EXACT),
          out('g', F32, D.astype(F32), EXACT), out('h', F64, L.astype(F64), EXACT),
          out('k', F32, L.astype(F32), EXACT), out('w', I32, L.astype(I32))])

# ---- top level: elementwise arithmetic and index notation ----
for shape in [(1,), (13,), (7, 13), (64, 65), (3, 16, 17), (RAND[0], RAND[1])]:
    A, B = randn(shape), randn(shape)
    a, b = f64(A), f64(B)
    Ad, Bd = randn(shape, dtype=F64), randn(shape, dtype=F64)
    body = ('C = A + 2 * B\nD = A * B - A / 4 + 1.5\nE = -A\ns = 0.5\nF = s * (A - B)\n'
            'G = Ad - 0.1 * Bd')
    case('top-level elementwise %s' % shape_str(shape),
         [('A', A), ('B', B), ('Ad', Ad), ('Bd', Bd)], body,
         [out('C', F32, a + 2 * b, ELEM32),
          out('D', F32, a * b - a / 4 + 1.5, ('elem', 1e-6, 1e-6)),
          out('E', F32, -A, EXACT), out('F', F32, 0.5 * (a - b), ELEM32),
          out('G', F64, Ad - 0.1 * Bd, ('elem', 1e-15, 1e-300))])

for M, N in [(1, 1), (7, 13), (16, 17), (64, 65), (127, 31), (RAND[3], RAND[2])]:
    A = randn((M, N))
    a = f64(A)
    body = ('R[i] = sum[j] A[i, j]\nT[j, i] = A[i, j]\nX[i] = max[j] A[i, j] * 2.0\n'
            'P[i]: f32[%d] = where(i >= 1 and i < %d, A[i - 1, 0], 0.0)\n'
            'K = %d\nQ[i]: f32[K + 1] = where(i < K, A[min(i, K - 1), 0], -1.0)\n'
            'Z = zeros(f32[K, 2])'
            % (M + 2, M + 1, M))
    case('top-level index notation %dx%d' % (M, N), [('A', A)], body,
         [summed('R', F32, a.sum(1), np.abs(a).sum(1)), out('T', F32, A.T, EXACT), out('X', F32, (a * 2).max(1), EXACT),
          out('P', F32, np.pad(A[:, 0], 1), EXACT),
          out('Q', F32, np.append(A[:, 0], -1), EXACT), out('Z', F32, np.zeros((M, 2)), EXACT)])

# ---- tensor literals ----
case('tensor literals', [],
     'L1 = [1, -2.5, 3e2, 1.5e-3]\nL2 = [[1, 2], [3, 4], [5, 6]]\nL3 = [[[1], [-2]], [[3], [4]]]\n'
     'L4 = f64[[0.1, -0.2], [1e-300, 3]]\nL5 = i32[[1, -2, 2147483647]]\n'
     'L6 = i64[[9007199254740993, -5]]\nL7 = []\nW = matmul(L2, [[1, 0.5], [-1, 2]])',
     [out('L1', F32, np.array([1, -2.5, 3e2, 1.5e-3], F32), EXACT),
      out('L2', F32, [[1, 2], [3, 4], [5, 6]], EXACT),
      out('L3', F32, [[[1], [-2]], [[3], [4]]], EXACT),
      out('L4', F64, [[0.1, -0.2], [1e-300, 3]], EXACT),
      out('L5', I32, [[1, -2, 2147483647]]), out('L6', I64, [[9007199254740993, -5]]),
      out('L7', F32, np.zeros(0), EXACT),
      mm('W', F32, np.array([[1, 2], [3, 4], [5, 6]]), np.array([[1, 0.5], [-1, 2]]))])

# ---- .npy round trips ----
# NumPy writes C and Fortran order (format 1.0 and 2.0); dyn loads, copies, transposes.
for ty, dtype in [('f32', F32), ('f64', F64), ('i32', I32), ('i64', I64), ('bool', BOOL)]:
    for shape in [(7, 13), (1, 64), (65, 1)]:
        if dtype is BOOL:
            X = rng.random(shape) < 0.5
        elif dtype in (I32, I64):
            X = rng.integers(-2 ** 31, 2 ** 31 - 1, shape).astype(dtype)
        else:
            X = randn(shape, 1e3, dtype=dtype)
        body = 'T[j, i] = X[i, j]\nU[j, i] = Y[i, j]\nZ = Y'
        case('npy %s %s: C and Fortran order in, copy and transpose out' % (ty, shape_str(shape)),
             [('X', X), ('Y', X)], body,
             [out('X', dtype, X, EXACT), out('Y', dtype, X, EXACT), out('Z', dtype, X, EXACT),
              out('T', dtype, X.T, EXACT), out('U', dtype, X.T, EXACT)], fortran=('Y',))
    X3 = randn((3, 4, 5)) if dtype is not BOOL else rng.random((3, 4, 5)) < 0.5
    X3 = X3.astype(dtype)
    case('npy %s 3x4x5 Fortran order, version 2.0' % ty, [('X', X3), ('V2', X3)],
         'P[k, i, j] = X[i, j, k]\nQ = V2',
         [out('P', dtype, X3.transpose(2, 0, 1), EXACT), out('Q', dtype, X3, EXACT)],
         fortran=('X',), v2=('V2',))

# 0-d arrays: NumPy writes scalars, dyn loads them, uses them at top level, saves them.
sf, sd, si = np.array(1.5, F32), np.array(0.1, F64), np.array(-7, I64)
A = randn((4, 5))
Ad = randn((3,), dtype=F64)
case('npy rank 0 in and out', [('sf', sf), ('sd', sd), ('si', si), ('A', A), ('Ad', Ad)],
     'Y = A * sf\nZ = Ad + sd\nc = si',
     [out('sf', F32, sf, EXACT), out('sd', F64, sd, EXACT), out('si', I64, si),
      out('Y', F32, A * sf, EXACT), out('Z', F64, Ad + sd, EXACT), out('c', I64, si)])

# dyn writes: dtype and shape as made, scalars too.
case('npy written by dyn: zeros ones full rand randn seed, rank 0', [],
     'Z = zeros(i64[2, 3])\nO = ones(bool[4])\nF = full(f64[3, 1, 2], 0.1)\n'
     'I = full(i32[5], -7)\nE = zeros(f32[0, 3])\nseed(42)\nR = rand(f32[17, 5])\n'
     'N = randn(f64[1000])\nseed(42)\nR2 = rand(f32[17, 5])\nS = sum[i, j] R[i, j]\n'
     'V = 2.5\nK = 7',
     [out('Z', I64, np.zeros((2, 3))), out('O', BOOL, np.ones(4)),
      out('F', F64, np.full((3, 1, 2), 0.1), EXACT), out('I', I32, np.full(5, -7)),
      out('E', F32, np.zeros((0, 3)), EXACT), out('R', F32, None, ('range', 0.0, 1.0)),
      out('N', F64, None, ('normal',)), out('R2', F32, None, ('same', 'R')),
      out('S', F32, None, ('sum', 'R')), out('V', F32, np.float32(2.5), EXACT),
      out('K', I64, np.int64(7))])

# allclose, with NumPy's default rtol 1e-5, atol 1e-8 and with explicit ones.
for N in [1, 13, 64]:
    A = randn(N)
    near = (A * (1 + 3e-6)).astype(F32)
    far = A.copy()
    far.ravel()[N // 2] += np.float32(1e-3 + 2e-5 * abs(float(A.ravel()[N // 2])))
    case('allclose N=%d' % N, [('A', A), ('B', near), ('C', far)],
         'p = allclose(A, B)\nq = allclose(A, C)\nr = allclose(A, C, 0.0, 0.01)',
         [out('p', BOOL, np.allclose(A, near)), out('q', BOOL, np.allclose(A, far)),
          out('r', BOOL, np.allclose(A, far, 0.0, 0.01))])


# ---- composition, broadcasting, strided and reversed access, symbolic output sizes ----
COMPOSE = '''
fn mlp(X: f32[B, D], W1: f32[D, H], b1: f32[H], W2: f32[H, E]) -> f32[B, E] {
  Z[b, h] = (sum[d] X[b, d] * W1[d, h]) + b1[h]
  A = gelu(Z)
  Y = matmul(A, W2)
  return Y
}
fn outer(a: f32[M], c: f32[N]) -> (f32[M, N], f32[M, N]) {
  O[i, j] = a[i] * c[j]
  R[i, j] = a[i]
  return (O, R)
}
fn concat_cols(X: f32[B, D], Z: f32[B, D]) -> f32[B, 2 * D] {
  # X[b, i] would make i range over D, against the return type's 2 * D: hence min and max
  Y[b, i] = where(i < D, X[b, min(i, D - 1)], Z[b, max(i - D, 0)])
  return Y
}
fn strided(X: f32[N]) -> (f32[N / 2], f32[N]) where N >= 1 {
  D[i] = X[2 * i + 1]
  V[i] = X[N - 1 - i]
  return (D, V)
}
fn checker(X: f64[M, N]) -> (f64[M, N], i64[M, N]) {
  Y[i, j] = where((i + j) % 2 == 0, X[i, j] * i, -X[i, j] / (j + 1))
  K[i, j] = (i * N + j) / 3 - M % (j + 2)
  return (Y, K)
}
'''
for B, D, H, E in [(1, 1, 1, 1), (7, 13, 31, 5), (16, 64, 65, 17), (RAND[0], 33, RAND[1], 7)]:
    X, W1, b1, W2 = randn((B, D)), randn((D, H)), randn(H), randn((H, E))
    Z = randn((B, D))
    N = 2 * D + 1
    V = randn(N)
    hid = gelu_ref(f64(X) @ f64(W1) + f64(b1))
    # gelu's 1 + tanh cancels for inputs below about -3, so an f32 error is judged against
    # the size of the terms, not of the (possibly tiny) result
    mlp_atol = 1e-6 * float(((np.abs(f64(X)) @ np.abs(f64(W1)) + np.abs(f64(b1)))
                             @ np.abs(f64(W2))).max())
    Xd = randn((B, D), dtype=F64)
    ii, jj = np.meshgrid(np.arange(B), np.arange(D), indexing='ij')
    case('composition: mlp, outer, concat, strided %dx%dx%dx%d' % (B, D, H, E),
         [('X', X), ('W1', W1), ('b1', b1), ('W2', W2), ('Z', Z), ('V', V), ('Xd', Xd)],
         COMPOSE + 'Y = mlp(X, W1, b1, W2)\n(O, R) = outer(b1, V)\nC = concat_cols(X, Z)\n'
         '(Dn, Rv) = strided(V)\n(Ck, Ki) = checker(Xd)',
         [out('Y', F32, hid @ f64(W2), ('elem', 1e-5, mlp_atol)),
          out('O', F32, np.outer(f64(b1), f64(V)), ELEM32),
          out('R', F32, np.repeat(b1[:, None], N, 1), EXACT),
          out('C', F32, np.concatenate([X, Z], 1), EXACT),
          out('Dn', F32, V[1::2][:N // 2], EXACT), out('Rv', F32, V[::-1], EXACT),
          out('Ck', F64, np.where((ii + jj) % 2 == 0, Xd * ii, -Xd / (jj + 1)), ('elem', 1e-15, 0)),
          out('Ki', I64, (ii * D + jj) // 3 - B % (jj + 2))])

# ---- long rows: more than one 512-point strip of the evaluator, and empty axes ----
LONG = '''
fn rowstats(A: f32[M, N]) -> (f32[M], f32[M], f32[N], f32) {
  s[i] = sum[j] A[i, j]
  x[i] = max[j] A[i, j] * 0.5
  c[j] = sum[i] A[i, j] * A[i, j]
  t    = sum[i, j] A[i, j]
  return (s, x, c, t)
}
'''
for M, N in [(3, 513), (2, 1031), (5, 1100), (1, 2053), (600, 7)]:
    A = randn((M, N))
    a = f64(A)
    case('long rows %dx%d: softmax, row/column/total reductions, transpose, top level' % (M, N),
         [('A', A)],
         LONG + 'S = softmax(A)\n(s, x, c, t) = rowstats(A)\nT[j, i] = A[i, j]\n'
         'E = A * 3 - 1\nG = gelu(A)',
         [out('S', F32, softmax_ref(A)), summed('s', F32, a.sum(1), np.abs(a).sum(1)),
          out('x', F32, a.max(1) * 0.5, EXACT),
          summed('c', F32, (a * a).sum(0), (a * a).sum(0)),
          summed('t', F32, a.sum(), np.abs(a).sum()), out('T', F32, A.T, EXACT),
          out('E', F32, a * 3 - 1, ('elem', 1e-6, 2e-6)),   # A * 3 rounds, then cancels
          out('G', F32, gelu_ref(A))])
# ---- long sums: an error that grows with log n, not n ----
# Terms just above 1 (1 + u / 1024): once a running sum passes 2^14 their fractions are below
# half its last place and each addition drops them, so a row summed in one accumulator per
# vector lane (n / lanes terms each) loses about 1e-4 of the row on any target up to 128
# partial sums.  A blocked sum meets each term with at most a block's, whatever n.  The sums
# are judged by eps * log2(n) * sum|x|; layernorm's mean and variance are sums, and its
# Y = (x - mu) / sigma turns their errors into |dY| <= (dmu + |Y| * sigma * dv / 2v) / sigma.
# The rows before the long ones put the blocks' edges at 1, 255, 256, 257 and 513.
LONGSUM = '''
fn sums(A: f32[M, N]) -> (f32[M], f32) {
  s[i] = sum[j] A[i, j]
  t    = sum[i, j] A[i, j]
  return (s, t)
}
'''
EPS32 = 2.0 ** -24
rng_sum = np.random.default_rng(20261202)    # its own, so that the cases after keep their data
for M, N in [(5, 1), (3, 255), (1, 256), (3, 257), (2, 513), (2, 3000017), (1, 1 << 21)]:
    A = (1 + rng_sum.uniform(0, 1, (M, N)) / 1024).astype(F32)
    a = f64(A)
    lg = EPS32 * max(1.0, math.log2(N))
    mu, d = a.mean(1, keepdims=True), a - a.mean(1, keepdims=True)
    sd = np.sqrt((d * d).mean(1, keepdims=True))
    Yr = d / np.sqrt(sd * sd + 1e-5)
    # the 1e-5 inside the root keeps Y's scale below 1 / sigma; f32's own roundings of x - mu,
    # the root and the products are a few eps of |Y| more
    dY = (lg * np.abs(a).mean(1, keepdims=True) + np.abs(d) * lg / 2) / np.sqrt(sd * sd + 1e-5)
    case('long sums %dx%d: row sums, total, layernorm of terms just above 1' % (M, N),
         [('A', A), ('g', np.ones(N, F32)), ('b', np.zeros(N, F32))],
         LONGSUM + '(s, t) = sums(A)\nY = layernorm(A, g, b)',
         [out('s', F32, a.sum(1), ('terms', lg, np.abs(a).sum(1))),
          out('t', F32, a.sum(), ('terms', EPS32 * math.log2(A.size), np.abs(a).sum())),
          out('Y', F32, Yr, ('terms', 1.0, dY + 8 * EPS32 * np.abs(Yr) + 1e-30))])
for M, N in [(3, 0), (0, 4)]:
    A = np.zeros((M, N), F32)
    case('empty axis %dx%d: sum 0, prod 1' % (M, N), [('A', A)],
         REDS + '(s, mx, mn, p, cs, cx, cn, w) = reds(A)\nT[j, i] = A[i, j]',
         [out('s', F32, np.zeros(M), EXACT), out('p', F32, np.ones(M), EXACT),
          out('cs', F32, np.zeros(N), EXACT), out('T', F32, A.T, EXACT)])


# ---- wide input ranges for the math functions (inline approximations must hold up) ----
WIDE = """
fn wide(X: f32[N], P: f32[N], T: f32[N]) -> (f32[N], f32[N], f32[N], f32[N],
                                               f32[N], f32[N], f32[N], f32[N]) {
  th[n] = tanh(X[n])
  sg[n] = sigmoid(X[n])
  ex[n] = exp(T[n])
  lg[n] = log(P[n])
  sq[n] = sqrt(P[n])
  ef[n] = erf(X[n])
  sn[n] = sin(X[n] * 500.0)
  cs[n] = cos(X[n] * 500.0)
  return (th, sg, ex, lg, sq, ef, sn, cs)
}
"""
for N in [64, 1031]:
    X = (np.exp(rng.uniform(np.log(1e-8), np.log(30), N)) * rng.choice([-1, 1], N)).astype(F32)
    P = np.exp(rng.uniform(-80, 80, N)).astype(F32)
    T = rng.uniform(-100, 88, N).astype(F32)
    x, p, t = f64(X), f64(P), f64(T)
    xs = f64(X * np.float32(500))
    case('math over wide ranges N=%d: tanh sigmoid erf of 1e-8..30, exp of -100..88, '
         'log sqrt of 1e-35..1e35, sin cos of 500x' % N, [('X', X), ('P', P), ('T', T)],
         WIDE + '(th, sg, ex, lg, sq, ef, sn, cs) = wide(X, P, T)',
         [out('th', F32, np.tanh(x), ELEM32), out('sg', F32, 1 / (1 + np.exp(-x)), ELEM32),
          out('ex', F32, np.exp(t), ELEM32), out('lg', F32, np.log(p), ELEM32),
          out('sq', F32, np.sqrt(p), ELEM32), out('ef', F32, erf_ref(x), ELEM32),
          out('sn', F32, np.sin(xs), ('elem', 1e-6, 1e-6)),     # absolute near the zeros
          out('cs', F32, np.cos(xs), ('elem', 1e-6, 1e-6))])

# The same in f64, over f64's ranges, with pow and arguments of sin and cos up to 1e6.
WIDE64 = """
fn wide64(X: f64[N], P: f64[N], T: f64[N], A: f64[N], E: f64[N]) -> (f64[N], f64[N], f64[N],
    f64[N], f64[N], f64[N], f64[N], f64[N], f64[N], f64[N], f64[N], f64[N]) {
  th[n] = tanh(X[n])
  sg[n] = sigmoid(X[n])
  ex[n] = exp(T[n])
  lg[n] = log(P[n])
  sq[n] = sqrt(P[n])
  rs[n] = rsqrt(P[n])
  ef[n] = erf(X[n])
  sn[n] = sin(X[n] * 500.0)
  cs[n] = cos(X[n] * 500.0)
  sb[n] = sin(A[n] * 1000.0)
  cb[n] = cos(A[n] * 1000.0)
  pw[n] = pow(A[n], E[n])
  return (th, sg, ex, lg, sq, rs, ef, sn, cs, sb, cb, pw)
}
"""
ELEM64 = ('elem', 1e-13, 1e-300)
for N in [64, 1031]:
    X = np.exp(rng.uniform(np.log(1e-8), np.log(30), N)) * rng.choice([-1, 1], N)
    P = np.exp(rng.uniform(-690, 690, N))
    T = rng.uniform(-745, 709, N)
    A = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), N))
    E = rng.uniform(-5, 5, N)
    case('f64 math over wide ranges N=%d: tanh sigmoid erf of 1e-8..30, exp of -745..709, '
         'log sqrt rsqrt of 1e-300..1e300, sin cos of 500x and up to 1e6, pow' % N,
         [('X', X), ('P', P), ('T', T), ('A', A), ('E', E)],
         WIDE64 + '(th, sg, ex, lg, sq, rs, ef, sn, cs, sb, cb, pw) = wide64(X, P, T, A, E)',
         [out('th', F64, np.tanh(X), ELEM64), out('sg', F64, 1 / (1 + np.exp(-X)), ELEM64),
          out('ex', F64, np.exp(T), ELEM64), out('lg', F64, np.log(P), ELEM64),
          out('sq', F64, np.sqrt(P), ELEM64), out('rs', F64, 1 / np.sqrt(P), ELEM64),
          out('ef', F64, erf_ref(X), ELEM64),
          out('sn', F64, np.sin(X * 500), ('elem', 1e-13, 1e-13)),
          out('cs', F64, np.cos(X * 500), ('elem', 1e-13, 1e-13)),
          out('sb', F64, np.sin(A * 1000), ('elem', 1e-13, 1e-13)),
          out('cb', F64, np.cos(A * 1000), ('elem', 1e-13, 1e-13)),
          out('pw', F64, A ** E, ELEM64)])

# Special values through every math function, f32 and f64: NaN, infinities, zeros of both
# signs (1 / f(x) tells -0 from 0; rsqrt(-0) is -inf), subnormals, the largest finite
# value; pow's special cases as C's pow has them.  sin and cos get no huge arguments (lang/reference.md gives
# the range where they are accurate).
SPECIAL_MATH = """
fn smath(X: T[N], S: T[N], Z: T[M], A: T[K], B: T[K]) -> (T[N], T[N], T[N], T[N], T[N], T[N],
    T[N], T[N], T[N], T[N], T[M], T[M], T[M], T[M], T[M], T[K]) {
  ex[n] = exp(X[n])
  lg[n] = log(X[n])
  sq[n] = sqrt(X[n])
  rs[n] = rsqrt(X[n])
  th[n] = tanh(X[n])
  sg[n] = sigmoid(X[n])
  ef[n] = erf(X[n])
  sn[n] = sin(S[n])
  cs[n] = cos(S[n])
  pw[n] = X[n] ** 2.0
  zs[m] = 1.0 / sin(Z[m])
  zt[m] = 1.0 / tanh(Z[m])
  ze[m] = 1.0 / erf(Z[m])
  zq[m] = rsqrt(Z[m])
  zp[m] = 1.0 / Z[m] ** 3.0
  pp[k] = pow(A[k], B[k])
  return (ex, lg, sq, rs, th, sg, ef, sn, cs, pw, zs, zt, ze, zq, zp, pp)
}
"""
for dtype, ty in [(F32, 'f32'), (F64, 'f64')]:
    fi = np.finfo(dtype)
    sub = float(fi.smallest_subnormal) * 3
    X = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, float(fi.tiny), 1e-30, 0.5, 1.0,
                  -1.0, 3.5, -3.5, 30.0, -30.0, 80.0, -80.0, float(fi.max), -float(fi.max)], dtype)
    S = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, 1e-30, 0.5, -0.5, 1.0, 3.0,
                  -3.0, 100.0, -100.0, 12345.0, -98765.0, 2.5e4, 1.5707964, -3.1415927], dtype)
    Z = np.array([0.0, -0.0, sub, -sub], dtype)
    A = np.array([0, 0, -0.0, -0.0, np.inf, np.inf, -np.inf, -np.inf, -2, -2, np.nan, 1, -1, 2,
                  0.5, 2, 2, np.nan, 1, -8, 10, 10], dtype)
    B = np.array([2, -2, 3, -3, 2, -2, 3, 2, 3, 0.5, 0, np.nan, np.inf, 0, np.inf, np.inf, -np.inf,
                  2, 1e30, 1 / 3, 30, -30], dtype)
    x, s, z, a, b = f64(X), f64(S), f64(Z), f64(A), f64(B)
    m = ELEM32 if dtype is F32 else ELEM64
    with np.errstate(all='ignore'):
        case('special values through every math function %s: NaN, inf, -0, subnormals, '
             'the largest value, pow\'s special cases' % ty,
             [('X', X), ('S', S), ('Z', Z), ('A', A), ('B', B)],
             SPECIAL_MATH.replace('T[', ty + '[') +
             '(ex, lg, sq, rs, th, sg, ef, sn, cs, pw, zs, zt, ze, zq, zp, pp) = smath(X, S, Z, A, B)',
             [out('ex', dtype, np.exp(x), m), out('lg', dtype, np.log(x), m),
              out('sq', dtype, np.sqrt(x), m), out('rs', dtype, 1 / np.sqrt(x), m),
              out('th', dtype, np.tanh(x), m), out('sg', dtype, 1 / (1 + np.exp(-x)), m),
              out('ef', dtype, np.where(np.isnan(x), np.nan, erf_ref(np.nan_to_num(x))), m),
              out('sn', dtype, np.sin(s), m), out('cs', dtype, np.cos(s), m),
              out('pw', dtype, x ** 2, m),
              out('zs', dtype, 1 / np.sin(z), m), out('zt', dtype, 1 / np.tanh(z), m),
              out('ze', dtype, 1 / erf_ref(z), m), out('zq', dtype, 1 / np.sqrt(z), m),
              out('zp', dtype, 1 / z ** 3, m),
              out('pp', dtype, np.power(a, b), m)])

# ---- reductions over a written range: sum[k < N / 2], max[k < 3] ----
RANGED = '''
fn evens(X: f32[B, N]) -> f32[B] { s[b] = sum[k < N / 2] X[b, 2 * k]; return s }
fn prefix(X: f32[B, N], K: size) -> f32[B] where K <= N { s[b] = sum[k < K] X[b, k]; return s }
fn window(X: f32[B, N]) -> f32[B, N - 2] where N >= 3 { Y[b, i] = max[k < 3] X[b, i + k]; return Y }
'''
for B, N in [(1, 3), (2, 4), (3, 17), (5, 64), (2, 129)]:
    X = randn((B, N))
    x = f64(X)
    K = N // 3
    case('reductions over a written range %dx%d: evens, prefix of %d, window of 3' % (B, N, K), [('X', X)],
         RANGED + 'E = evens(X)\nP = prefix(X, %d)\nW = window(X)' % K,
         [summed('E', F32, x[:, 0:2 * (N // 2):2].sum(1), np.abs(x[:, 0:2 * (N // 2):2]).sum(1)),
          summed('P', F32, x[:, :K].sum(1), np.abs(x[:, :K]).sum(1)),
          out('W', F32, np.stack([x[:, i:N - 2 + i] for i in range(3)]).max(0), EXACT)])

# ---- exp at the edges of f32: subnormal results, the last finite one, overflow ----
EDGES = np.array([-1000, -104.5, -104, -103.9, -100, -95, -90, -87.5, -87.3, -50, -1, 0, 1e-8,
                  0.5, 1, 10, 88, 88.7, 88.72, 88.7228, 88.7229, 88.73, 89, 89.5, 1000], F32)
with np.errstate(all='ignore'):
    case('exp at the edges of f32: subnormals, the largest finite result, overflow',
         [('X', EDGES)], 'fn edge(X: f32[N]) -> f32[N] { Y[n] = exp(X[n]); return Y }\nE = edge(X)',
         [out('E', F32, np.exp(f64(EDGES)), ('elem', 1e-6, 3e-45))])   # within a subnormal step

# ---- where evaluates only the chosen branch: no division by zero in the other ----
SAFEDIV = """
fn safediv(A: T[N], B: T[N]) -> (T[N], T[N], T[N]) {
  q[n] = where(B[n] != 0, A[n] / B[n], 0)
  r[n] = where(B[n] == 0, -1, A[n] % B[n])
  g[n] = where(n < N - 1, A[n + 1], A[0])
  return (q, r, g)
}
"""
for dtype, ty in [(I32, 'i32'), (I64, 'i64')]:
    for N in [1, 17, 600]:
        A = rng.integers(-100, 100, N).astype(dtype)
        B = np.where(rng.random(N) < 0.4, 0, rng.integers(-9, 10, N)).astype(dtype)
        Bs = np.where(B == 0, 1, B)
        case('%s where guards a division by zero N=%d' % (ty, N), [('A', A), ('B', B)],
             SAFEDIV.replace('T[', ty + '[') + '(q, r, g) = safediv(A, B)',
             [out('q', dtype, np.where(B != 0, A // Bs, 0)),
              out('r', dtype, np.where(B == 0, -1, A % Bs)),
              out('g', dtype, np.append(A[1:], A[0]))])

# ---- contractions in other layouts, on Fortran-order inputs, scaled, larger, f64 ----
GEMMS = """
fn mm_tt(A: f32[K, M], B: f32[N, K]) -> f32[M, N] {
  C[i, j] = sum[k] A[k, i] * B[j, k]
  return C
}
fn mm_scaled(A: f32[M, K], B: f32[K, N], s: f32) -> f32[M, N] {
  C[i, j] = sum[k] 2.0 * A[i, k] * B[k, j] * s
  return C
}
fn mm64(A: f64[M, K], B: f64[K, N]) -> f64[M, N] {
  C[i, j] = sum[k] A[i, k] * B[k, j]
  return C
}
"""
for M, K, N in [(1, 1, 1), (5, 300, 3), (129, 65, 257), (64, 64, 64), (31, 257, 17)]:
    A, B = randn((M, K)), randn((K, N))
    Ad, Bd = f64(A) * 3, f64(B) - 0.5
    a, b = f64(A), f64(B)
    case('gemm layouts %dx%dx%d: A^T B^T, Fortran-order inputs, scaled, f64' % (M, K, N),
         [('A', A), ('B', B), ('At', np.ascontiguousarray(A.T)), ('Bt', np.ascontiguousarray(B.T)),
          ('AF', A), ('BF', B), ('Ad', Ad), ('Bd', Bd)],
         GEMMS + 'C1 = mm_tt(At, Bt)\nC2 = matmul(AF, BF)\nC3 = mm_scaled(A, B, 0.25)\n'
         'C4 = mm64(Ad, Bd)\nC5 = matmul(A, B)',
         [mm('C1', F32, a, b), mm('C2', F32, a, b), mm('C3', F32, 0.5 * a, b),
          mm('C4', F64, Ad, Bd), mm('C5', F32, a, b)], fortran=('AF', 'BF'))


# ---- special values: NaN, infinities, signed zeros ----
SPECIAL = '''
fn special(X: f32[N], Y: f32[M, N]) -> (f32[N], f32[N], f32[N], f32[N], f32[N], f32[N],
                                        f32[N], f32[M], f32[M], f32[M], bool[N], bool[N]) {
  ex[n] = exp(X[n])
  lg[n] = log(X[n])
  sq[n] = sqrt(X[n])
  mx[n] = max(X[n], 1.0)
  mn[n] = min(X[n], 1.0)
  fl[n] = floor(X[n])
  th[n] = tanh(X[n])
  rx[m] = max[n] Y[m, n]
  rn[m] = min[n] Y[m, n]
  rs[m] = sum[n] Y[m, n]
  lt[n] = X[n] < 1.0
  ne[n] = X[n] != X[n]
  return (ex, lg, sq, mx, mn, fl, th, rx, rn, rs, lt, ne)
}
'''
VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 100.0, -100.0, 1e-30, 3.5], F32)
Y = randn((5, 11))
Y[1, 3], Y[2, 0], Y[3, 10], Y[4, 5], Y[4, 6] = np.nan, np.inf, -np.inf, np.inf, -np.inf
with np.errstate(all='ignore'):
    x, y = f64(VALUES), f64(Y)
    case('special values: NaN, inf, -0 through math, max/min, reductions',
         [('X', VALUES), ('Y', Y)],
         SPECIAL + '(ex, lg, sq, mx, mn, fl, th, rx, rn, rs, lt, ne) = special(X, Y)\nR = relu(Y)',
         [out('ex', F32, np.exp(x), ELEM32), out('lg', F32, np.log(x), ELEM32),
          out('sq', F32, np.sqrt(x), ELEM32), out('mx', F32, np.maximum(x, 1), EXACT),
          out('mn', F32, np.minimum(x, 1), EXACT), out('fl', F32, np.floor(x), EXACT),
          out('th', F32, np.tanh(x), ELEM32), out('rx', F32, y.max(1), EXACT),
          out('rn', F32, y.min(1), EXACT), out('rs', F32, y.sum(1), ELEM32),
          out('lt', BOOL, x < 1), out('ne', BOOL, x != x), out('R', F32, np.maximum(Y, 0), EXACT)])

# ---- a function returning a tuple ----
MOMENTS = '''
fn moments(X: f32[B, N]) -> (f32[B], f32[B]) {
  mean[b] = (sum[n] X[b, n]) / N
  var[b]  = (sum[n] (X[b, n] - mean[b]) ** 2.0) / N
  return (mean, var)
}
'''
for B, N in [(1, 1), (7, 13), (64, 65), (RAND[2], RAND[1])]:
    X = randn((B, N), 3, 1)
    case('tuple return: mean and variance %dx%d' % (B, N), [('X', X)],
         MOMENTS + '(mu, v) = moments(X)',
         [summed('mu', F32, f64(X).mean(1), np.abs(f64(X)).mean(1)),
          out('v', F32, f64(X).var(1))])


# ---- gathers: an integer tensor (i32 or i64) as a subscript, checked at run time ----
GATHER = '''
fn embed(E: f32[V, D], tok: IT[T]) -> f32[T, D] {
  Y[t, d] = E[tok[t], d]
  return Y
}
fn embed_t(E: f32[D, V], tok: IT[T]) -> f32[T, D] {
  Y[t, d] = E[d, tok[t]]
  return Y
}
fn along(X: f32[B, N], I: IT[B, K]) -> f32[B, K] {
  Y[b, k] = X[b, I[b, k]]
  return Y
}
fn pick_sum(X: f32[B, N], I: IT[B, K], w: f32[K]) -> f32[B] {
  s[b] = sum[k] X[b, I[b, k]] * w[k]
  return s
}
fn take(X: f64[N], I: IT[M], W: f64[M]) -> f64[M] {
  Y[m] = X[I[m]] * 2.0 + W[m]
  return Y
}
'''
for dtype, ty in [(I32, 'i32'), (I64, 'i64')]:
    for V, D, T, K in [(1, 1, 1, 1), (3, 7, 13, 2), (17, 64, 5, 31), (RAND[0], RAND[1], RAND[2], 7),
                       (5, 0, 3, 1), (5, 3, 0, 0)]:
        E = randn((V, D))
        Et = np.ascontiguousarray(E.T)
        tok = rng.integers(0, V, T).astype(dtype)
        X = randn((T, V))
        I = rng.integers(0, V, (T, K)).astype(dtype)
        w = randn((K,))
        Xd = rng.standard_normal(V)
        Wd = rng.standard_normal(T)
        prods = np.take_along_axis(f64(X), I.astype(np.int64), 1) * f64(w)
        case('gather %s: embedding, its transpose, take_along_axis, in a sum, 1-D V=%d D=%d T=%d K=%d'
             % (ty, V, D, T, K),
             [('E', E), ('Et', Et), ('tok', tok), ('X', X), ('I', I), ('w', w), ('Xd', Xd), ('Wd', Wd)],
             GATHER.replace('IT[', ty + '[') +
             'Y = embed(E, tok)\nYt = embed_t(Et, tok)\nA = along(X, I)\nS = pick_sum(X, I, w)\n'
             'G = take(Xd, tok, Wd)',
             [out('Y', F32, E[tok.astype(np.int64)], EXACT), out('Yt', F32, E[tok.astype(np.int64)], EXACT),
              out('A', F32, np.take_along_axis(X, I.astype(np.int64), 1), EXACT),
              summed('S', F32, prods.sum(1), np.abs(prods).sum(1)),
              out('G', F64, Xd[tok.astype(np.int64)] * 2.0 + Wd)])

# ---- scans: running sums, products, maxima and minima, in order along one axis ----
# Each step is rounded to the element type, as NumPy's accumulate on that dtype does, so the
# results are compared exactly: along the last axis (the stdlib's cumsum family, tiles of
# rows), along the first and a middle axis (rows combined a vector at a time), in integers
# (wrapping) and f64; shapes of 0, 1, primes and more than one vector at any width.
SCANS = '''
import reduce
fn down(X: f32[B, N]) -> (f32[B, N], f32[B, N]) {
  S[b, n] = scan[b] +(X[b, n])
  M[b, n] = scan[b] min(X[b, n])
  return (S, M)
}
fn mid(X: f32[A, B, N]) -> f32[A, B, N] {
  P[a, b, n] = scan[b] *(X[a, b, n])
  return P
}
fn ints(I: i32[B, N], L: i64[N]) -> (i32[B, N], i32[B, N], i64[N]) {
  S[b, n] = scan[n] +(I[b, n] * 100000000)
  M[b, n] = scan[b] max(I[b, n])
  T[n] = scan[n] +(L[n])
  return (S, M, T)
}
fn wide(X: f64[B, N]) -> f64[B, N] {
  S[b, n] = scan[n] +(X[b, n] * 0.5)
  return S
}
'''
for B, N in [(0, 3), (3, 0), (1, 1), (1, 17), (17, 1), (7, 13), (16, 16), (5, 131), (33, 47),
             (RAND[0], RAND[1])]:
    X = randn((B, N))
    X3 = (randn((2, B, N)) * 0.25 + 1).astype(F32)
    I = rng.integers(-50, 50, (B, N)).astype(I32)
    L = rng.integers(-2**62, 2**62, N).astype(I64)
    Xd = rng.standard_normal((B, N))
    with np.errstate(over='ignore'):
        Iw = np.cumsum(I * np.int32(100000000), 1, dtype=I32)
        Lw = np.cumsum(L, dtype=I64)
    case('scans %dx%d: cumsum cumprod cummax cummin, down the rows, a middle axis, i32 i64 f64' % (B, N),
         [('X', X), ('X3', X3), ('I', I), ('L', L), ('Xd', Xd)],
         SCANS + 'Cs = cumsum(X)\nCp = cumprod(X)\nCx = cummax(X)\nCn = cummin(X)\n'
         '(Ds, Dm) = down(X)\nP = mid(X3)\n(Is, Im, Ls) = ints(I, L)\nW = wide(Xd)',
         [out('Cs', F32, np.cumsum(X, 1, dtype=F32), EXACT), out('Cp', F32, np.cumprod(X, 1, dtype=F32), EXACT),
          out('Cx', F32, np.maximum.accumulate(X, 1), EXACT), out('Cn', F32, np.minimum.accumulate(X, 1), EXACT),
          out('Ds', F32, np.cumsum(X, 0, dtype=F32), EXACT), out('Dm', F32, np.minimum.accumulate(X, 0), EXACT),
          out('P', F32, np.cumprod(X3, 1, dtype=F32), EXACT),
          out('Is', I32, Iw, EXACT), out('Im', I32, np.maximum.accumulate(I, 0), EXACT),
          out('Ls', I64, Lw, EXACT), out('W', F64, np.cumsum(Xd * 0.5, 1), EXACT)])

# ---- views: slices in functions (affine reads) and of values at top level ----
SLICES = '''
fn heads(X: f32[B, N], D: size) -> (f32[B, D], f32[B, D], f32[B, N - 2*D]) {
  Q = X[:, 0:D]
  K = X[:, D:2*D]
  R = X[:, 2*D:]
  return (Q, K, R)
}
fn strided(X: f32[B, N]) -> (f32[(B + 1)/2, (N + 1)/3], f32[N - 1]) {
  S = X[::2, 1::3]
  T = X[B - 1, 1:N]
  return (S, T)
}
fn tail_dot(X: f32[B, N], W: f32[N - 1]) -> f32[B] {
  L = X[:, 1:N]
  s[b] = sum[n] L[b, n] * W[n]
  return s
}
'''
for B, N, D in [(1, 1, 0), (1, 2, 1), (3, 4, 2), (7, 13, 5), (17, 31, 1), (RAND[0], RAND[1] + 1, RAND[1] // 2)]:
    X, W = randn((B, N)), randn(N - 1)
    case('slices in functions %dx%d D=%d' % (B, N, D), [('X', X), ('W', W)],
         SLICES + '(Q, K, R) = heads(X, %d)\n(S, T) = strided(X)\nL = tail_dot(X, W)' % D,
         [out('Q', F32, X[:, 0:D], EXACT), out('K', F32, X[:, D:2 * D], EXACT),
          out('R', F32, X[:, 2 * D:], EXACT), out('S', F32, X[::2, 1::3], EXACT),
          out('T', F32, X[B - 1, 1:N], EXACT),
          summed('L', F32, f64(X[:, 1:]) @ f64(W), np.abs(f64(X[:, 1:])) @ np.abs(f64(W)))])
for B, N in [(0, 3), (1, 1), (5, 7), (13, 2), (RAND[2], RAND[3])]:
    X = randn((B, N))
    case('slices of values %dx%d' % (B, N), [('X', X)],
         'N = %d\nV = X[:, 1:]\nE = X[0:0, :]\nM = X[::3, N - 1:N] * 2\nP = matmul(X[:, ::2], ones(f32[(N + 1)/2, 3]))' % N,
         [out('V', F32, X[:, 1:], EXACT), out('E', F32, X[0:0, :], EXACT),
          out('M', F32, X[::3, N - 1:N] * 2, EXACT),
          summed('P', F32, f64(X[:, ::2]) @ np.ones(((N + 1) // 2, 3)), np.abs(f64(X[:, ::2])) @ np.ones(((N + 1) // 2, 3)))])


RESHAPES = '''
fn split_heads(X: f32[B, N], H: size) -> f32[B, H, N / H] where N % H == 0 {
  Y = reshape(X, [B, H, N / H])
  return Y
}
fn merge(X: f32[B, H, D]) -> f32[B, H * D] {
  Y = reshape(X, [B, H * D])
  return Y
}
fn flip(X: f32[B, H, D]) -> f32[D, H, B] {
  Y = reshape(X, [D, H, B])
  return Y
}
'''
for B, H, D in [(0, 2, 3), (1, 1, 1), (2, 3, 5), (3, 7, 1), (5, 2, 13), (RAND[0], 3, RAND[3])]:
    X = randn((B, H * D))
    Z = randn((B, H, D))
    case('reshape %dx%dx%d' % (B, H, D), [('X', X), ('Z', Z)],
         RESHAPES + 'S = split_heads(X, %d)\nM = merge(Z)\nF = flip(Z)\nV = reshape(X, [%d, %d])\n'
         'G = reshape(Z[:, :, ::2], [%d])' % (H, H * D, B, B * H * ((D + 1) // 2)),
         [out('S', F32, X.reshape(B, H, D), EXACT), out('M', F32, Z.reshape(B, H * D), EXACT),
          out('F', F32, Z.reshape(D, H, B), EXACT), out('V', F32, X.reshape(H * D, B), EXACT),
          out('G', F32, Z[:, :, ::2].reshape(-1), EXACT)])


JOINS = '''
fn cat1(A: f32[M, N], B: f32[M, K]) -> f32[M, N + K] {
  C = concat(A, B, 1)
  return C
}
fn cat0(A: f32[M, N], B: f32[K, N], C: f32[M, N]) -> f32[2 * M + K, N] {
  D = concat(A, B, C)
  return D
}
fn st(A: f32[M, N], C: f32[M, N]) -> (f32[2, M, N], f32[M, N, 2]) {
  S = stack(A, C)
  T = stack(A, C, 2)
  return (S, T)
}
'''
for M, N, K in [(0, 3, 2), (1, 1, 1), (3, 5, 0), (7, 2, 13), (RAND[1], RAND[2], 3)]:
    A, B, C, Bt = randn((M, N)), randn((M, K)), randn((M, N)), randn((K, N))
    case('concat, stack %dx%dx%d' % (M, N, K), [('A', A), ('B', B), ('C', C), ('Bt', Bt)],
         JOINS + 'X = cat1(A, B)\nY = cat0(A, Bt, C)\n(S, T) = st(A, C)\nU = concat(A, C, B, 1)\nV = stack(A, C, A, 1)',
         [out('X', F32, np.concatenate([A, B], 1), EXACT), out('Y', F32, np.concatenate([A, Bt, C], 0), EXACT),
          out('S', F32, np.stack([A, C]), EXACT), out('T', F32, np.stack([A, C], 2), EXACT),
          out('U', F32, np.concatenate([A, C, B], 1), EXACT), out('V', F32, np.stack([A, C, A], 1), EXACT)])


# ---- f16 and bf16: stored in 16 bits, computed in f32, rounded once where stored ----
# NumPy has float16, so f16 inputs are written as such and f16 results read back as float16.
# bf16 has no NumPy type: its inputs are f32 data converted in dyn (bf16(X)), its results are
# saved as f4 (which holds each value exactly), and the reference takes the inputs rounded to
# bf16 here.  A result is off by at most one rounding to its 16-bit type (the unit roundoff
# U16 = 2^-11, UBF = 2^-8, of the result, itself at most the sum of the magnitudes of its
# terms) plus the f32 arithmetic's error, so the tolerances scale with the terms and with the
# type's epsilon.  A generator of their own keeps the data of the cases before them.
F16 = np.float16
U16, UBF, U32 = 2.0 ** -11, 2.0 ** -8, 2.0 ** -24
rng_h = np.random.default_rng(20261202)


def to_bf16(x):
    """x (finite f32 values) rounded to bf16, to nearest even, as f32 values."""
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(F32)


def h_randn(shape, dtype=F16, scale=1.0):
    return (rng_h.standard_normal(shape) * scale).astype(dtype)


def terms16(name, dtype, ref, mag, u, k=1):
    """A result of one rounding to a 16-bit type (unit roundoff u) after f32 arithmetic over
    k terms, judged against the magnitude of its terms."""
    return out(name, dtype, ref, ('terms', u * 1.01 + 4 * max(k, 1) * U32,
                                  np.broadcast_to(f64(mag), np.shape(ref))))


HALF_EW = '''
fn ew(X: f16[M, N], W: f16[M, N], Z: f16[M, N]) -> f16[M, N] {
  Y[i, j] = X[i, j] * W[i, j] + 0.5 - Z[i, j] / 3
  return Y
}
'''
for M, N in [(0, 3), (1, 1), (7, 13), (3, 1000), (31, 67), (RAND[3], 5)]:
    X, W, Z = h_randn((M, N)), h_randn((M, N)), h_randn((M, N), scale=30.0)
    Xd, Wd, Zd = f64(X), f64(W), f64(Z)
    case('f16 elementwise %dx%d' % (M, N), [('X', X), ('W', W), ('Z', Z)],
         HALF_EW + 'Y = ew(X, W, Z)\nT[i, j] = X[i, j] * 2 - W[i, j]\nP = f32(X) * f32(W)',
         [terms16('Y', F16, Xd * Wd + 0.5 - Zd / 3, np.abs(Xd * Wd) + 0.5 + np.abs(Zd / 3), U16, 3),
          terms16('T', F16, 2 * Xd - Wd, 2 * np.abs(Xd) + np.abs(Wd), U16),
          out('P', F32, Xd * Wd, EXACT)])      # a product of two f16s is exact in f32

HALF_MM = '''
fn mm16(A: f16[M, K], B: f16[K, N]) -> f16[M, N] {
  C[i, j] = sum[k] A[i, k] * B[k, j]
  return C
}
fn mm16to32(A: f16[M, K], B: f16[K, N]) -> f32[M, N] {
  C[i, j] = sum[k] f32(A[i, k]) * f32(B[k, j])
  return C
}
fn mmbf(A: bf16[M, K], B: bf16[K, N]) -> bf16[M, N] {
  C[i, j] = sum[k] A[i, k] * B[k, j]
  return C
}
'''
for M, K, N in [(1, 1, 1), (0, 3, 2), (4, 0, 3), (7, 13, 31), (17, 1, 5), (33, 64, 17),
                (64, 67, 65), (RAND[0], RAND[2], RAND[1])]:
    A, B = h_randn((M, K)), h_randn((K, N))
    Af, Bf = h_randn((M, K), F32), h_randn((K, N), F32)
    Ab, Bb = f64(to_bf16(Af)), f64(to_bf16(Bf))
    mag, magb = np.abs(f64(A)) @ np.abs(f64(B)), np.abs(Ab) @ np.abs(Bb)
    case('f16 bf16 matmul %dx%dx%d' % (M, K, N), [('A', A), ('B', B), ('Af', Af), ('Bf', Bf)],
         HALF_MM + 'C = mm16(A, B)\nD = mm16to32(A, B)\nE = mmbf(bf16(Af), bf16(Bf))',
         [terms16('C', F16, f64(A) @ f64(B), mag, U16, K),
          terms16('D', F32, f64(A) @ f64(B), mag, 0.0, K),
          terms16('E', F32, Ab @ Bb, magb, UBF, K)])

# 16-bit contractions on the matmul engine (bf16 on vdpbf16ps where the host has it, else
# widened to f32): shapes around its tiles (12 x 32 bf16 pairs, the f32 engine's 14 x 32 and
# 8 x 48 for f16), its k block of 384 and its C blocks (up to 144 x 512: 128 rows in one, 145
# in two), empty and unit sizes, operands packed by each task or all first (the larger two),
# batches (B shared by the batch or not) and B read with k contiguous.  A generator of their
# own keeps the data of the cases before them.
rng_hm = np.random.default_rng(20261203)
HALF_MM2 = '''
fn bmmh(A: f16[Q, M, K], B: f16[Q, K, N]) -> f16[Q, M, N] {
  C[q, i, j] = sum[k] A[q, i, k] * B[q, k, j]
  return C
}
fn bmmb(A: bf16[Q, M, K], B: bf16[K, N]) -> bf16[Q, M, N] {
  C[q, i, j] = sum[k] A[q, i, k] * B[k, j]
  return C
}
fn mmtb(A: bf16[M, K], B: bf16[N, K]) -> bf16[M, N] {
  C[i, j] = sum[k] A[i, k] * B[j, k]
  return C
}
fn mmth(A: f16[M, K], B: f16[N, K]) -> f16[M, N] {
  C[i, j] = sum[k] A[i, k] * B[j, k]
  return C
}
'''
for Q, M, K, N in [(1, 0, 5, 3), (2, 3, 5, 0), (1, 1, 1, 1), (1, 1, 385, 1), (2, 11, 7, 31),
                   (1, 12, 2, 32), (3, 13, 3, 33), (1, 14, 64, 48), (2, 15, 383, 47),
                   (1, 25, 384, 65), (1, 23, 385, 97), (1, 97, 769, 41), (1, 30, 50, 513),
                   (1, 95, 13, 511), (2, 2, 1000, 3), (1, 128, 40, 100), (1, 145, 17, 70),
                   (1, 300, 600, 700), (4, 150, 300, 600)]:
    A, B = (rng_hm.standard_normal(s).astype(F16) for s in ((Q, M, K), (Q, K, N)))
    Af, Bf = (rng_hm.standard_normal(s).astype(F32) for s in ((Q, M, K), (K, N)))
    Ab, Bb = f64(to_bf16(Af)), f64(to_bf16(Bf))
    Ad, Bd = f64(A), f64(B)
    Bt, Bft = np.ascontiguousarray(B[0].T), np.ascontiguousarray(Bf.T)
    mag = np.abs(Ad) @ np.abs(Bd)
    magb = np.abs(Ab) @ np.abs(Bb)
    case('f16 bf16 matmul engine %dx%dx%dx%d' % (Q, M, K, N),
         [('A', A), ('B', B), ('Af', Af), ('Bf', Bf), ('Bt', Bt), ('Bft', Bft), ('A0', A[0]),
          ('Af0', Af[0])],
         HALF_MM2 + 'C = bmmh(A, B)\nE = bmmb(bf16(Af), bf16(Bf))\nT = mmtb(bf16(Af0), bf16(Bft))\n'
         'H = mmth(A0, Bt)',
         [terms16('C', F16, Ad @ Bd, mag, U16, K),
          terms16('E', F32, Ab @ Bb, magb, UBF, K),
          terms16('T', F32, Ab[0] @ Bb, magb[0], UBF, K),
          terms16('H', F16, Ad[0] @ Bd[0], mag[0], U16, K)])

# The bf16 engine's edges and copies: k blocks split evenly (192 and 193 pairs, 384 and
# 385), C blocks of 96 rows and 512 columns +-1 split over the threads, edge rows as tiles
# of 8, 4, 2 and 1 (7, 11, 13 rows) and columns as one vector (15, 16, 17, 49), an odd k;
# A read along its rows (stored K x M: the packing's unit-stride lines) and operands with
# no unit stride at all (the batch axis innermost).  f16 takes the same shapes through its
# widened copies.
rng_he = np.random.default_rng(20261204)
HALF_MM3_ONE = '''
fn mma%(s)s(A: %(t)s[K, M], B: %(t)s[K, N]) -> %(t)s[M, N] {
  C[i, j] = sum[k] A[k, i] * B[k, j]
  return C
}
fn mmq%(s)s(A: %(t)s[K, M, Q], B: %(t)s[N, K, Q]) -> %(t)s[Q, M, N] {
  C[q, i, j] = sum[k] A[k, i, q] * B[j, k, q]
  return C
}
'''
HALF_MM3 = ''.join(HALF_MM3_ONE % {'s': s, 't': t} for s, t in (('b', 'bf16'), ('h', 'f16')))
for Q, M, K, N in [(1, 7, 386, 16), (1, 13, 770, 17), (2, 11, 383, 15), (1, 96, 385, 129),
                   (1, 97, 768, 49), (2, 61, 193, 33), (1, 5, 1, 49), (1, 1, 769, 513),
                   (3, 8, 2, 1), (1, 95, 387, 511)]:
    Af, Bf = (rng_he.standard_normal(s).astype(F32) for s in ((K, M, Q), (N, K, Q)))
    A, B = Af.astype(F16), Bf.astype(F16)
    Ab, Bb = f64(to_bf16(Af)), f64(to_bf16(Bf))
    Ad, Bd = f64(A), f64(B)
    # C[q] = A[:, :, q]^T B[:, :, q]^T
    ref = lambda X, Y: np.einsum('kiq,jkq->qij', X, Y)
    case('f16 bf16 matmul engine layouts %dx%dx%dx%d' % (Q, M, K, N),
         [('Af', Af), ('Bf', Bf), ('A', A), ('B', B), ('Af0', np.ascontiguousarray(Af[:, :, 0])),
          ('Bf0', np.ascontiguousarray(Bf[:, :, 0].T)), ('A0', np.ascontiguousarray(A[:, :, 0])),
          ('B0', np.ascontiguousarray(B[:, :, 0].T))],
         HALF_MM3 + 'E = mmab(bf16(Af0), bf16(Bf0))\nH = mmah(A0, B0)\n'
         'P = mmqb(bf16(Af), bf16(Bf))\nS = mmqh(A, B)',
         [terms16('E', F32, ref(Ab, Bb)[0], ref(np.abs(Ab), np.abs(Bb))[0], UBF, K),
          terms16('H', F16, ref(Ad, Bd)[0], ref(np.abs(Ad), np.abs(Bd))[0], U16, K),
          terms16('P', F32, ref(Ab, Bb), ref(np.abs(Ab), np.abs(Bb)), UBF, K),
          terms16('S', F16, ref(Ad, Bd), ref(np.abs(Ad), np.abs(Bd)), U16, K)])

# Intermediates are stored (rounded) too: a normalisation's mean, deviations and variance
# each round to f16 once, the result once more; the mean of bf16 rows.
HALF_ROWS = '''
fn norm16(X: f16[B, N]) -> f16[B, N] {
  m[b] = (sum[n] X[b, n]) / N
  d[b, n] = X[b, n] - m[b]
  v[b] = (sum[n] d[b, n] * d[b, n]) / N
  Y[b, n] = d[b, n] * rsqrt(v[b] + 0.001)
  return Y
}
fn meanbf(X: bf16[B, N]) -> bf16[B] {
  m[b] = (sum[n] X[b, n]) / N
  return m
}
'''
for Bn, N in [(1, 1), (3, 37), (5, 1000), (RAND[1], 7)]:
    X = h_randn((Bn, N), scale=3.0)
    Xf = h_randn((Bn, N), F32, scale=3.0)
    Xb = f64(to_bf16(Xf))
    Xd = f64(X)
    D = Xd - Xd.mean(axis=1, keepdims=True)
    Yref = D / np.sqrt((D * D).mean(axis=1, keepdims=True) + 0.001)
    case('f16 norm, bf16 mean %dx%d' % (Bn, N), [('X', X), ('Xf', Xf)],
         HALF_ROWS + 'Y = norm16(X)\nM = meanbf(bf16(Xf))',
         [out('Y', F16, Yref, ('elem', 8 * U16, 8 * U16)),
          terms16('M', F32, Xb.sum(axis=1) / N, np.abs(Xb).sum(axis=1) / N, UBF, N)])

# Conversions from f32: to f16 as NumPy's astype rounds (overflow to infinities, subnormals),
# to bf16 as to_bf16, both at top level and in index notation.
for n in [0, 1, 7, 1000]:
    Xf = (rng_h.standard_normal(n) * 10.0 ** rng_h.integers(-9, 6, n)).astype(F32)
    if n >= 7:
        Xf[:6] = [65504, 65519.99, 65520, -1e-8, 6e-8, 3e38]
    with np.errstate(over='ignore'):
        Xh = Xf.astype(F16)
    case('f16 bf16 conversions %d' % n, [('Xf', Xf)],
         'H = f16(Xf)\nG[i] = f16(Xf[i] * 1)\nQ = f32(bf16(Xf))\nR[i] = f32(bf16(Xf[i]))',
         [out('H', F16, Xh, EXACT), out('G', F16, Xh, EXACT),
          out('Q', F32, to_bf16(Xf), EXACT), out('R', F32, to_bf16(Xf), EXACT)])

# ---- permutations of every element type ----
# Transposes and permutations of rank 2 to 4 of each element type, in functions, at top level
# and under :check (which runs the compiled back end beside the reference evaluator): the
# compiled CPU back end runs a permutation that moves the last axis in tiles of the model's
# vector lanes (4 to 16), so the sizes are 0, 1, primes and 7-9, 15-17, 31-33 (a tile less one,
# a tile and a tile and one, for every tile a model gives), and a few tiles and an edge.  A
# generator of their own keeps the data of the cases before them.
rng_p = np.random.default_rng(20261203)
PERM3 = [(0, 2, 1), (2, 0, 1), (1, 0, 2), (1, 2, 0), (2, 1, 0)]
PERM4 = [(0, 2, 1, 3), (0, 2, 3, 1), (0, 3, 1, 2), (3, 2, 1, 0), (1, 0, 3, 2)]
PERM_SHAPES = [((0, 5), (3, 0, 7), (2, 1, 0, 3)), ((1, 1), (1, 17, 1), (1, 1, 1, 1)),
               ((16, 16), (15, 16, 17), (2, 9, 8, 7)), ((17, 15), (8, 33, 9), (3, 16, 17, 15)),
               ((31, 65), (13, 32, 31), (2, 33, 5, 16)), ((129, 257), (5, 64, 67), (3, 33, 17, 40))]


def perm_fn(name, ty, rank, perm):
    """dyn's Y = X.transpose(perm) for an X of rank `rank` and element type ty."""
    dims, ix = 'ABCD'[:rank], 'ijkl'[:rank]
    return ('fn %s(X: %s[%s]) -> %s[%s] {\n  Y[%s] = X[%s]\n  return Y\n}\n'
            % (name, ty, ', '.join(dims), ty, ', '.join(dims[p] for p in perm),
               ', '.join(ix[p] for p in perm), ', '.join(ix)))


def perm_input(shape, ty):
    if ty in ('i32', 'i64'):
        return rng_p.integers(-100000, 100000, shape).astype(I32 if ty == 'i32' else I64)
    x = rng_p.standard_normal(shape)
    return x.astype({'f32': F32, 'f64': F64, 'f16': F16}.get(ty, F32))


for ty in ['f32', 'f64', 'i32', 'i64', 'f16', 'bf16']:
    for c, (s2, s3, s4) in enumerate(PERM_SHAPES):
        p3, p4 = PERM3[c % len(PERM3)], PERM4[(c + 1) % len(PERM4)]
        X2, X3, X4 = perm_input(s2, ty), perm_input(s3, ty), perm_input(s4, ty)
        src = perm_fn('tr', ty, 2, (1, 0)) + perm_fn('p3', ty, 3, p3) + perm_fn('p4', ty, 4, p4)
        # the reference: the values dyn holds (bf16: the f32 inputs rounded), permuted
        r2, r3, r4 = (to_bf16(x) if ty == 'bf16' else x for x in (X2, X3, X4))
        dt = F32 if ty == 'bf16' else r2.dtype.type
        # bf16 has no NumPy type: its inputs are f32 values, rounded by dyn, its results saved as f32
        into, conv = ('bf16', 'f32') if ty == 'bf16' else ('', '')
        body = src + '\n'.join(['Y%d = %s(X%d)' % (r, into, r) for r in (2, 3, 4)] + [
            'T = %s(tr(Y2))' % conv, 'P = %s(p3(Y3))' % conv, 'R = %s(p4(Y4))' % conv,
            'Q[%s] = %s(Y4[i, j, k, l])' % (', '.join('ijkl'[p] for p in p4), conv),
            ':check p3(Y3)', ':check p4(Y4)'])
        case('permute %s %s, %s %s, %s %s' % (ty, shape_str(s2), shape_str(s3), ''.join(map(str, p3)),
                                             shape_str(s4), ''.join(map(str, p4))),
             [('X2', X2), ('X3', X3), ('X4', X4)], body,
             [out('T', dt, r2.T, EXACT), out('P', dt, r3.transpose(p3), EXACT),
              out('R', dt, r4.transpose(p4), EXACT), out('Q', dt, r4.transpose(p4), EXACT)])

# Transposes whose result and input outgrow the last cache of any model (over 64 MiB in
# all): the compiled back end streams the tiles' rows where they start on a vector's size,
# and stores the others plainly -- rows of 12004 bytes start anywhere, rows of 18432 bytes
# on a line.
for ty, (M, N) in [('f32', (2999, 3001)), ('f64', (2048, 2304))]:
    X2 = perm_input((M, N), ty)
    case('permute %s %s (larger than the last cache)' % (ty, shape_str((M, N))), [('X2', X2)],
         perm_fn('tr', ty, 2, (1, 0)) + 'T = tr(X2)', [out('T', X2.dtype.type, X2.T, EXACT)])

# ---- the runner ----
def dyn_string(path):
    return '"' + path.replace('\\', '\\\\').replace('"', '\\"') + '"'


def compare(got, dtype, ref, metric, outs):
    """None when got matches, else a description of the mismatch."""
    kind = metric[0]
    if got.dtype != np.dtype(dtype):
        return 'dtype %s, want %s' % (got.dtype, np.dtype(dtype))
    if kind == 'range':
        lo, hi = metric[1], metric[2]
        if got.size and not (got.min() >= lo and got.max() < hi):
            return 'range [%g, %g) expected, got min %g max %g' % (lo, hi, got.min(), got.max())
        return None
    if kind == 'normal':
        m, s = float(got.mean()), float(got.std())
        if abs(m) > 0.15 or abs(s - 1) > 0.1:
            return 'mean %g std %g, want about 0 and 1' % (m, s)
        return None
    if kind == 'same':
        ref = outs[metric[1]]
        kind = 'exact'
    if kind == 'sum':
        ref = np.asarray(f64(outs[metric[1]]).sum())
        kind, metric = 'norm', NORM32
    if got.shape != ref.shape:
        return 'shape %s, want %s' % (got.shape, ref.shape)
    if got.size == 0:
        return None
    if kind == 'exact':
        want = ref.astype(dtype)
        if np.dtype(dtype).kind == 'f':
            ok = np.array_equal(got, want, equal_nan=True)
            bad = (got != want) & ~(np.isnan(got) & np.isnan(want))
        else:
            ok = np.array_equal(got, want)
            bad = got != want
        if ok:
            return None
        i = np.unravel_index(np.argmax(bad), got.shape)
        return 'exact: %d of %d differ; first at %s: got %r, want %r' % (
            int(bad.sum()), got.size, tuple(int(k) for k in i), got[i].item(), ref[i].item())
    g, r = f64(got), f64(ref)
    if dtype is F32:   # beyond the f32 range the right answer is an infinity
        with np.errstate(over='ignore'):
            r = np.where(np.abs(r) > np.finfo(F32).max, f64(ref.astype(F32)), r)
    with np.errstate(invalid='ignore'):
        err = np.abs(g - r)
    same = (g == r) | (np.isnan(g) & np.isnan(r))       # equal infinities, NaN for NaN
    err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
    if kind == 'terms':
        with np.errstate(invalid='ignore', divide='ignore'):
            excess = np.where(err == 0, 0.0, err / (metric[1] * metric[2]))
        worst = np.unravel_index(np.argmax(excess), got.shape)
        if np.max(excess) <= 1:
            return None
        return ('terms: %d of %d outside |got-ref| <= %g * sum|terms|; worst at %s: got %r, '
                'want %r, sum|terms| %.3g' % (int((excess > 1).sum()), got.size, metric[1],
                                              tuple(int(k) for k in worst), g[worst], r[worst],
                                              metric[2][worst]))
    if kind == 'norm':
        scale = np.max(np.abs(r)) if np.max(np.abs(r)) > 0 else 1.0
        e = err / scale
        worst = np.unravel_index(np.argmax(e), got.shape)
        if np.max(e) <= metric[1]:
            return None
        return 'norm: max|got-ref|/max|ref| = %.3g > %g; worst at %s: got %r, want %r' % (
            np.max(e), metric[1], tuple(int(k) for k in worst), g[worst], r[worst])
    rtol, atol = metric[1], metric[2]
    with np.errstate(invalid='ignore', divide='ignore'):
        excess = np.where(err == 0, 0.0, err / (atol + rtol * np.abs(r)))
    worst = np.unravel_index(np.argmax(excess), got.shape)
    if np.max(excess) <= 1:
        return None
    return ('elem: %d of %d outside |got-ref| <= %g + %g|ref|; worst at %s: got %r, want %r '
            '(error %.3g)' % (int((excess > 1).sum()), got.size, atol, rtol,
                              tuple(int(k) for k in worst), g[worst], r[worst], err[worst]))


def case_lines(scratch, k, c, target):
    """The case's script (its inputs written on first use) and its folder."""
    d = os.path.join(scratch, 'case%03d' % k)
    os.makedirs(d, exist_ok=True)
    lines = ['# case %d: %s (target %s)' % (k, c.name, target)]
    for name, a in c.inputs:
        path = os.path.join(d, 'in_%s.npy' % name)
        if not os.path.exists(path):
            with open(path, 'wb') as f:
                arr = np.array(a, order='F' if name in c.fortran else 'C')   # keeps rank 0
                version = (2, 0) if name in c.v2 else (1, 0)
                np.lib.format.write_array(f, arr, version=version)
        lines.append('%s = load(%s)' % (name, dyn_string(path)))
    lines.append(c.body)
    for name, _, _, _ in c.outputs:
        path = os.path.join(d, 'out_%s_%s.npy' % (target, name))
        if os.path.exists(path):
            os.remove(path)
        lines.append('save(%s, %s)' % (name, dyn_string(path)))
    return d, lines


def run_dyn(dyn, target, script, cwd, timeout):
    """None when dyn ran the script, else why not."""
    try:
        r = subprocess.run([dyn, '--target=' + target] + FLAGS + [script], cwd=cwd,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 'dyn timed out after %d s on %s' % (timeout, script)
    except OSError as e:
        return 'cannot run %s: %s' % (dyn, e)
    if r.returncode == 0:
        return None
    why = 'killed by signal %d' % -r.returncode if r.returncode < 0 else \
        'exit status %d' % r.returncode
    return 'dyn failed (%s) on %s:\n%s' % (why, script, (r.stdout + r.stderr).strip())


def check_outputs(d, c, target):
    """A list of problems with the saved results (empty: they all match)."""
    problems, outs = [], {}
    for name, dtype, ref, metric in c.outputs:
        try:
            got = np.load(os.path.join(d, 'out_%s_%s.npy' % (target, name)))
        except Exception as e:   # a missing or malformed file is a failure, not a crash
            problems.append('%s: cannot load the saved result: %s' % (name, e))
            continue
        outs[name] = got
        why = compare(got, dtype, ref, metric, outs)
        if why:
            problems.append('%s (%s, dyn shape %s): %s' % (name, np.dtype(dtype).name,
                                                           got.shape, why))
    return problems


def run_alone(dyn, scratch, k, c, target):
    d, lines = case_lines(scratch, k, c, target)
    script = os.path.join(d, 'case_%s.dyn' % target)
    with open(script, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    why = run_dyn(dyn, target, script, d, 120 * TIMEOUT_SCALE)
    return [why] if why else check_outputs(d, c, target)


def run_batch(dyn, scratch, target, items):
    """Runs several cases in one dyn session (separated by :reset), which saves the start-up
    of a process per case.  When the session fails, every case is run alone to place the
    blame; a case that fails in the session is run alone too, and if it then passes, the
    difference (state left over from earlier cases) is itself reported as a failure.
    Returns {case number: (problems, seconds)}."""
    t0 = time.time()
    lines = []
    for k, c in items:
        lines += [':reset'] + case_lines(scratch, k, c, target)[1]
    script = os.path.join(scratch, 'batch_%s_%03d.dyn' % (target, items[0][0]))
    with open(script, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    why = run_dyn(dyn, target, script, scratch, (60 + 30 * len(items)) * TIMEOUT_SCALE)
    each = (time.time() - t0) / len(items)
    results = {}
    for k, c in items:
        if why:
            t1 = time.time()
            results[k] = (run_alone(dyn, scratch, k, c, target), time.time() - t1)
            continue
        problems = check_outputs(os.path.join(scratch, 'case%03d' % k), c, target)
        if problems:
            t1 = time.time()
            alone = run_alone(dyn, scratch, k, c, target)
            if not alone:
                problems = ['passes when run alone, fails in a session after other cases '
                            '(%s):' % script] + problems
            else:
                problems = alone
            results[k] = (problems, time.time() - t1)
        else:
            results[k] = ([], each)
    return results


def back_ends(dyn):
    """The back ends to compare: the compiled CPU one when this build has it, and always the
    reference evaluator.  $DYN_NUMPY_TARGETS (e.g. "ref") overrides."""
    if os.environ.get('DYN_NUMPY_TARGETS'):
        return os.environ['DYN_NUMPY_TARGETS'].split()
    try:
        r = subprocess.run([dyn, '--target=cpu', '-e', ':target'], capture_output=True,
                           text=True, timeout=60 * TIMEOUT_SCALE)
        cpu = r.returncode == 0 and r.stdout.strip() == 'target: cpu'
    except (OSError, subprocess.TimeoutExpired):
        cpu = False
    return ['cpu', 'ref'] if cpu else ['ref']


def main():
    if len(sys.argv) < 3:
        sys.stderr.write('usage: compare.py DYN SCRATCH_DIR [CASE_SUBSTRING ...]\n')
        return 2
    dyn, scratch, only = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    start = time.time()
    targets = back_ends(dyn)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import attention            # attention chains, around the block the fused kernel uses here
    attention.add_cases(dyn, sys.modules[__name__])
    chosen = [(k, c) for k, c in enumerate(CASES) if not only or any(s in c.name for s in only)]
    # Inputs first (one thread), then batches of cases on every core.
    for k, c in chosen:
        case_lines(scratch, k, c, targets[0])
    batches = [(t, chosen[i:i + BATCH]) for t in targets for i in range(0, len(chosen), BATCH)]
    workers = max(1, min(4, os.cpu_count() or 1))
    print('numpy: %d cases on back ends %s, %d dyn sessions, %d at a time'
          % (len(chosen), ', '.join(targets), len(batches), workers))
    sys.stdout.flush()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(run_batch, dyn, scratch, t, items): t for t, items in batches}
        for f in concurrent.futures.as_completed(futures):
            for k, r in f.result().items():
                results[(k, futures[f])] = r
    passed = failed = xfailed = 0
    failures = []
    for k, c in chosen:
        shapes = ', '.join('%s %s' % (n, shape_str(a.shape)) for n, a in c.inputs) or 'no inputs'
        for target in targets:
            problems, took = results[(k, target)]
            xfail = c.xfail.get(target) if isinstance(c.xfail, dict) else c.xfail
            what = '%s (%s) [%s]' % (c.name, target, shapes)
            if xfail and problems:
                xfailed += 1
                print('XFAIL: %s -- known bug: %s' % (what, xfail))
                for p in problems:
                    print('    ' + p.replace('\n', '\n    '))
            elif xfail:
                failed += 1
                failures.append('XPASS: ' + what)
                print('XPASS: %s -- marked as failing (%s) but passed; remove the mark'
                      % (what, xfail))
            elif problems:
                failed += 1
                failures.append('FAIL: %s: %s' % (what, problems[0].split('\n')[0]))
                print('FAIL: %s' % what)
                for p in problems:
                    print('    ' + p.replace('\n', '\n    '))
            else:
                passed += 1
                metrics = sorted({' '.join('%.3g' % x if isinstance(x, float) else
                                           'sum|terms|' if isinstance(x, np.ndarray) else str(x)
                                           for x in m) for _, _, _, m in c.outputs})
                print('PASS: %s (%s; %.2f s)' % (what, '; '.join(metrics), took))
    # The failures again at the end, where a log cut short in the middle still shows them.
    for f in failures:
        print('numpy: ' + f)
    print('numpy: %d expected failures (known dyn bugs), %.1f s' % (xfailed, time.time() - start))
    print('numpy: %d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
