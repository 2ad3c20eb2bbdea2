#!/usr/bin/env python3
"""conv.py -- convolutions of dyn against NumPy (run by tests/conv-numpy.sh).

Usage: conv.py DYN SCRATCH_DIR [CASE_SUBSTRING ...], as compare.py, whose cases, runner and
metrics it uses with cases of its own: nn's conv2d and conv1d, and a depthwise convolution
written in index notation as a user writes it (one filter a channel), on random data at
strides 1 and 2, padding 0 to 3, kernels 1, 3, 5 and 7, and awkward shapes: no images, one,
images smaller than the kernel (with the padding making up for it), prime sizes, one or
three channels.  The compiled CPU back end runs these as implicit GEMMs (B's panels packed
from the windows), as gathered GEMMs, as plain GEMMs on the image, or plane by plane (the
depthwise ones); each result is judged against the sum of the absolute values of its terms,
as compare.py judges a matrix product.  The implicit GEMM's cases (named 'tile ...') take
their sizes around the micro-tiles of the hardware model in use, f32 and f64, and run again
under --hw=zen3 (named 'zen3 ...') where this CPU runs that model's code, and with the
gathered path's images taken in groups (DYN_CONV=grouped, named 'grouped ...').
"""
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (defines its own cases on import; they are dropped below)

del compare.CASES[:]
F32, f64 = compare.F32, compare.f64
rng = np.random.default_rng(20261202)


def randn(shape):
    return rng.standard_normal(shape).astype(F32)


def windows(x, k, s, p):
    """x (N, C, H, W) padded by p, its k x k windows every s: (N, C, H', W', k, k)."""
    xp = np.pad(f64(x), ((0, 0), (0, 0), (p, p), (p, p)))
    v = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    return v[:, :, ::s, ::s]


def conv_case(n, c, h, w, f, k, s, p, view=False):
    Xb, Wt = randn((n, c, h, w + 2 * view)), randn((f, c, k, k))
    X = Xb[:, :, :, :w]
    v = windows(X, k, s, p)
    ref = np.einsum('nchwij,fcij->nfhw', v, f64(Wt))
    mag = np.einsum('nchwij,fcij->nfhw', np.abs(v), np.abs(f64(Wt)))
    compare.case('conv2d N=%d C=%d H=%d W=%d F=%d K=%d S=%d P=%d%s' % (n, c, h, w, f, k, s, p,
                                                                    ', X a view' if view else ''),
                 [('X', Xb), ('Wt', Wt)], ('Xv = X[:, :, :, 0:%d]\nY = conv2d(Xv, Wt, %d, %d)' % (w, s, p) if view
                                         else 'Y = conv2d(X, Wt, %d, %d)' % (s, p)),
                 [compare.summed('Y', F32, ref, mag)])


DW = '''
fn dwconv2d(X: f32[N, C, H, W], Wt: f32[C, KH, KW], S: size, P: size) -> f32[N, C, (H + 2*P - KH) / S + 1, (W + 2*P - KW) / S + 1] where S >= 1, H + 2*P >= KH, W + 2*P >= KW {
  Xp[n, c, y, x]: f32[N, C, H + 2*P, W + 2*P] = where(y >= P and y < H + P and x >= P and x < W + P, X[n, c, y - P, x - P], 0.0)
  Y[n, c, h, w] = sum[i, j] Xp[n, c, h * S + i, w * S + j] * Wt[c, i, j]
  return Y
}
'''


def dw_case(n, c, h, w, k, s, p):
    X, Wt = randn((n, c, h, w)), randn((c, k, k))
    v = windows(X, k, s, p)
    ref = np.einsum('nchwij,cij->nchw', v, f64(Wt))
    mag = np.einsum('nchwij,cij->nchw', np.abs(v), np.abs(f64(Wt)))
    compare.case('depthwise N=%d C=%d H=%d W=%d K=%d S=%d P=%d' % (n, c, h, w, k, s, p),
                 [('X', X), ('Wt', Wt)], DW + 'Y = dwconv2d(X, Wt, %d, %d)' % (s, p),
                 [compare.summed('Y', F32, ref, mag)])


def conv1d_case(n, c, l, f, k, s, p):
    X, Wt = randn((n, c, l)), randn((f, c, k))
    xp = np.pad(f64(X), ((0, 0), (0, 0), (p, p)))
    v = np.lib.stride_tricks.sliding_window_view(xp, k, axis=2)[:, :, ::s]
    ref = np.einsum('nclk,fck->nfl', v, f64(Wt))
    mag = np.einsum('nclk,fck->nfl', np.abs(v), np.abs(f64(Wt)))
    compare.case('conv1d N=%d C=%d L=%d F=%d K=%d S=%d P=%d' % (n, c, l, f, k, s, p),
                 [('X', X), ('Wt', Wt)], 'Y = conv1d(X, Wt, %d, %d)' % (s, p),
                 [compare.summed('Y', F32, ref, mag)])


# N C H W F K S P: no images; one pixel; images smaller than the kernel, padded up to it;
# 1 x 1 at strides 1 and 2 (a plain GEMM on the image at stride 1, padded or not); primes;
# paddings 0 to 3 with kernels 1 to 7
for shape in [(0, 3, 5, 5, 2, 3, 1, 1), (1, 1, 1, 1, 1, 1, 1, 0), (1, 1, 1, 1, 3, 3, 1, 1),
              (2, 3, 2, 2, 5, 3, 1, 1), (1, 3, 4, 3, 2, 7, 1, 3), (1, 2, 1, 2, 3, 5, 2, 2),
              (2, 16, 9, 8, 17, 1, 1, 0), (1, 13, 23, 23, 3, 1, 2, 0), (3, 7, 5, 11, 4, 1, 1, 1),
              (2, 3, 7, 5, 4, 7, 2, 3), (1, 1, 13, 11, 3, 5, 2, 2), (3, 5, 17, 19, 7, 3, 2, 0),
              (2, 7, 31, 29, 11, 3, 1, 1), (1, 3, 37, 41, 16, 7, 2, 3), (2, 17, 19, 13, 31, 5, 1, 2),
              (1, 32, 14, 14, 33, 3, 1, 1), (5, 11, 8, 8, 1, 3, 2, 1), (1, 3, 29, 31, 5, 3, 1, 3),
              # one small map and many long filters (rows 4 or 6 KiB apart): filters packed
              # by each task a block at a time, several k blocks, the last M block short
              (1, 1024, 9, 9, 701, 1, 2, 0), (1, 1536, 5, 5, 761, 1, 1, 0),
              # few filters whose rows are 4 and 8 KiB apart, read in place by tiles that
              # take them in groups (UK_GROUP_A): on the image itself and from the windows
              (2, 1024, 7, 7, 96, 1, 1, 0), (1, 2048, 14, 14, 40, 1, 2, 0),
              # rows of the windows shorter than a vector, gathered a vector at a time up to
              # the last element of an unpadded image (runs of 7, 1 and 15 elements)
              (2, 3, 9, 9, 5, 3, 1, 0), (3, 2, 5, 3, 4, 3, 1, 0), (1, 5, 19, 17, 6, 3, 1, 0)]:
    conv_case(*shape)

# At P = 0 conv2d reads X in place, its padding not run, where X's layout is the padded
# tensor's (above); X a view of the first W columns of W + 2 is not, and takes the padding's
# path
for shape in [(2, 16, 9, 8, 17, 1, 1, 0), (3, 5, 17, 19, 7, 3, 2, 0), (1, 3, 6, 5, 4, 3, 1, 1)]:
    conv_case(*shape, view=True)

# N C H W K S P: the same kinds of shape, one filter a channel; 7 x 7 maps and 112-wide
# rows at both strides (the plane computed in one run, and a row at a time)
for shape in [(0, 3, 5, 5, 3, 1, 1), (1, 1, 1, 1, 1, 1, 0), (1, 1, 1, 1, 3, 1, 1),
              (2, 3, 2, 2, 3, 1, 1), (1, 3, 4, 3, 7, 1, 3), (1, 2, 1, 2, 5, 2, 2),
              (3, 7, 7, 7, 3, 1, 1), (2, 5, 7, 7, 3, 2, 1), (1, 13, 23, 23, 1, 2, 0),
              (2, 3, 17, 19, 5, 2, 0), (1, 17, 31, 29, 3, 1, 1), (1, 3, 112, 112, 3, 2, 1),
              (1, 2, 112, 113, 3, 1, 1), (2, 7, 37, 41, 7, 1, 3), (1, 1, 61, 67, 5, 2, 2),
              (4, 31, 13, 13, 3, 1, 0),
              # many planes, shared out in chunks that do not divide them (7 x 7 and 14 x 14
              # maps, 201 and 262 planes); 169 taps, more than a task keeps in place
              (3, 67, 7, 7, 3, 1, 1), (2, 131, 14, 14, 3, 2, 1), (1, 97, 14, 14, 5, 1, 2),
              (2, 3, 20, 17, 13, 1, 6),
              # planes in bands of rows (as many as the scratch run holds: 17 rows of a
              # 112-wide map, 32 of a 61-wide one), the last band of one row or of several;
              # blocks of 8, 4, 2 and 1 lines of outputs at both strides
              (1, 3, 35, 112, 3, 1, 1), (1, 2, 33, 61, 3, 1, 1), (2, 3, 40, 100, 5, 1, 2),
              (1, 2, 9, 255, 3, 2, 1), (1, 2, 5, 263, 3, 1, 1)]:
    dw_case(*shape)

# A convolution with arithmetic around it in the same statement (a bias, a relu, a scale):
# the convolution is taken out as a kernel of its own (lower.c's hoist) and the rest reads
# its result; a depthwise one too.
EPI = '''
fn conv_bias_relu(X: f32[N, C, H, W], Wt: f32[F, C, KH, KW], b: f32[F], S: size, P: size) -> f32[N, F, (H + 2*P - KH) / S + 1, (W + 2*P - KW) / S + 1] where S >= 1, H + 2*P >= KH, W + 2*P >= KW {
  Xp[n, c, y, x]: f32[N, C, H + 2*P, W + 2*P] = where(y >= P and y < H + P and x >= P and x < W + P, X[n, c, y - P, x - P], 0.0)
  Y[n, f, h, w] = max(0.5 * (sum[c, i, j] Xp[n, c, h * S + i, w * S + j] * Wt[f, c, i, j]) + b[f], 0.0)
  return Y
}
fn dw_bias(X: f32[N, C, H, W], Wt: f32[C, K, K], b: f32[C]) -> f32[N, C, H - K + 1, W - K + 1] where H >= K, W >= K {
  Y[n, c, h, w] = b[c] - (sum[i, j] X[n, c, h + i, w + j] * Wt[c, i, j])
  return Y
}
'''


def epi_case(n, c, h, w, f, k, s, p):
    X, Wt, b = randn((n, c, h, w)), randn((f, c, k, k)), randn(f)
    v = windows(X, k, s, p)
    conv = np.einsum('nchwij,fcij->nfhw', v, f64(Wt))
    mag = 0.5 * np.einsum('nchwij,fcij->nfhw', np.abs(v), np.abs(f64(Wt))) + np.abs(f64(b))[:, None, None]
    ref = np.maximum(0.5 * conv + f64(b)[:, None, None], 0.0)
    compare.case('conv bias relu N=%d C=%d H=%d W=%d F=%d K=%d S=%d P=%d' % (n, c, h, w, f, k, s, p),
                 [('X', X), ('Wt', Wt), ('b', b)], EPI + 'Y = conv_bias_relu(X, Wt, b, %d, %d)' % (s, p),
                 [compare.summed('Y', F32, ref, mag)])


def dw_bias_case(n, c, h, w, k):
    X, Wt, b = randn((n, c, h, w)), randn((c, k, k)), randn(c)
    v = windows(X, k, 1, 0)
    ref = f64(b)[:, None, None] - np.einsum('nchwij,cij->nchw', v, f64(Wt))
    mag = np.abs(f64(b))[:, None, None] + np.einsum('nchwij,cij->nchw', np.abs(v), np.abs(f64(Wt)))
    compare.case('depthwise bias N=%d C=%d H=%d W=%d K=%d' % (n, c, h, w, k),
                 [('X', X), ('Wt', Wt), ('b', b)], EPI + 'Y = dw_bias(X, Wt, b)',
                 [compare.summed('Y', F32, ref, mag)])


for shape in [(1, 1, 1, 1, 1, 1, 1, 0), (2, 3, 7, 5, 4, 3, 1, 1), (1, 16, 9, 8, 17, 1, 1, 0),
              (3, 5, 17, 19, 7, 3, 2, 0), (1, 32, 14, 14, 33, 3, 1, 1), (2, 7, 13, 11, 5, 5, 2, 2)]:
    epi_case(*shape)
for shape in [(1, 1, 1, 1, 1), (2, 3, 7, 9, 3), (1, 17, 31, 29, 5)]:
    dw_bias_case(*shape)

# A window whose rows run backwards through X (row H - 3 - h + i): the gathered rows' first
# runs lie at the image's end, which runs of 3 or 19 copied in whole vectors would read past
# (test_api's test_window_at_page_end gives such an X from memory that ends there).
FLIP = '''
fn flip(X: f32[N, C, H, W], Wt: f32[F, C, 3, 3]) -> f32[N, F, H - 2, W - 2] where H >= 3, W >= 3 {
  Y[n, f, h, w] = sum[c, i, j] X[n, c, H - 3 - h + i, w + j] * Wt[f, c, i, j]
  return Y
}
'''


def flip_case(n, c, h, w, f):
    X, Wt = randn((n, c, h, w)), randn((f, c, 3, 3))
    v = windows(X[:, :, ::-1, :], 3, 1, 0)            # row H - 3 - h + i is row h + 2 - i flipped
    Wf = f64(Wt)[:, :, ::-1, :]
    ref = np.einsum('nchwij,fcij->nfhw', v, Wf)
    mag = np.einsum('nchwij,fcij->nfhw', np.abs(v), np.abs(Wf))
    compare.case('conv flipped rows N=%d C=%d H=%d W=%d F=%d' % (n, c, h, w, f), [('X', X), ('Wt', Wt)],
                 FLIP + 'Y = flip(X, Wt)', [compare.summed('Y', F32, ref, mag)])


for shape in [(2, 3, 9, 5, 5), (1, 2, 12, 4, 3), (2, 2, 7, 21, 3)]:
    flip_case(*shape)

DW64 = DW.replace('f32', 'f64')


def dw64_case(n, c, h, w, k, s, p):
    X, Wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((c, k, k))
    v = windows(X, k, s, p)
    ref = np.einsum('nchwij,cij->nchw', v, Wt)
    mag = np.einsum('nchwij,cij->nchw', np.abs(v), np.abs(Wt))
    compare.case('depthwise f64 N=%d C=%d H=%d W=%d K=%d S=%d P=%d' % (n, c, h, w, k, s, p),
                 [('X', X), ('Wt', Wt)], DW64 + 'Y = dwconv2d(X, Wt, %d, %d)' % (s, p),
                 [compare.summed('Y', np.float64, ref, mag)])


for shape in [(2, 3, 7, 7, 3, 1, 1), (1, 2, 35, 112, 3, 1, 1), (1, 2, 17, 129, 3, 2, 1), (1, 3, 13, 61, 5, 1, 2)]:
    dw64_case(*shape)

# A padding written otherwise, as a user may (the compiled back end builds each padded plane
# itself when it finds the condition true exactly where the load is inside X, and runs the
# padding apart otherwise): 1 row above and 2 columns left, 3 below and 0 right; conditions
# that are not the bounds (one that drops a row of X, one of or and not); a padding by 1.0;
# and a padded tensor that the function also returns.
PADDED = '''
fn padded(X: f32[N, C, H, W], Wt: f32[C, 3, 3]) -> f32[N, C, H + 2, W] {
  Xp[n, c, y, x]: f32[N, C, H + 4, W + 2] = where(%s, X[n, c, y - 1, x - 2], %s)
  Y[n, c, h, w]: f32[N, C, H + 2, W] = sum[i, j] Xp[n, c, h + i, w + j] * Wt[c, i, j]
  return Y
}
'''
BOUNDS = 'y >= 1 and y < H + 1 and x >= 2 and x < W + 2'


def padded_case(n, c, h, w, cond, inside_fn, fill, keep):
    X, Wt = randn((n, c, h, w)), randn((c, 3, 3))
    xp = np.full((n, c, h + 4, w + 2), fill, dtype=np.float64)
    ys, xs = np.meshgrid(np.arange(h + 4), np.arange(w + 2), indexing='ij')
    inside = inside_fn(ys, xs, h, w) & (ys >= 1) & (ys < h + 1) & (xs >= 2) & (xs < w + 2)
    src = np.zeros_like(xp)
    src[:, :, 1:h + 1, 2:w + 2] = f64(X)
    xp = np.where(inside, src, float(fill))
    v = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    ref = np.einsum('nchwij,cij->nchw', v, f64(Wt))
    mag = np.einsum('nchwij,cij->nchw', np.abs(v), np.abs(f64(Wt)))
    fn = PADDED % (cond, fill)
    if keep:                                   # Xp read again, at a plain subscript
        fn = fn.replace('  return Y', '  Z[n, c, h, w] = Y[n, c, h, w] + Xp[n, c, h + 1, w + 1]\n  return Z')
        ref, mag = ref + xp[:, :, 1:h + 3, 1:w + 1], mag + np.abs(xp[:, :, 1:h + 3, 1:w + 1])
    compare.case('padded depthwise N=%d C=%d H=%d W=%d where(%s, X, %s)%s'
                 % (n, c, h, w, cond, fill, ', Xp read again' if keep else ''),
                 [('X', X), ('Wt', Wt)], fn + 'Y = padded(X, Wt)', [compare.summed('Y', F32, ref, mag)])


def bounds(y, x, h, w):
    return (y >= 1) & (y < h + 1) & (x >= 2) & (x < w + 2)


for n, c, h, w, cond, inside, fill, keep in [
        (2, 5, 7, 7, BOUNDS, bounds, '0.0', False), (1, 3, 1, 1, BOUNDS, bounds, '0.0', False),
        (3, 11, 14, 13, BOUNDS, bounds, '0.0', False),
        (2, 3, 7, 9, 'y >= 2 and y < H + 1 and x >= 2 and x < W + 2',
         lambda y, x, h, w: bounds(y, x, h, w) & (y >= 2), '0.0', False),
        (1, 4, 6, 5, 'not (y < 1 or y >= H + 1 or x < 2 or x >= W + 2)', bounds, '0.0', False),
        (1, 4, 6, 5, 'not (y < 1 or y >= H + 1 or x < 2 or x > W + 2)', bounds, '0.0', False),
        (2, 3, 5, 6, BOUNDS, bounds, '1.0', False), (2, 3, 5, 6, BOUNDS, bounds, '0.0', True)]:
    padded_case(n, c, h, w, cond, inside, fill, keep)

# A strided 1 x 1 projection written on X itself, no padded tensor (the implicit GEMM's
# panels packed from B in place): maps small enough for the panels to run across images.
PROJ = '''
fn proj(X: f32[N, C, H, W], Wt: f32[F, C]) -> f32[N, F, (H + 1) / 2, (W + 1) / 2] {
  Y[n, f, h, w]: f32[N, F, (H + 1) / 2, (W + 1) / 2] = sum[c] X[n, c, 2 * h, 2 * w] * Wt[f, c]
  return Y
}
'''


def proj_case(n, c, h, w, f):
    X, Wt = randn((n, c, h, w)), randn((f, c))
    v = f64(X)[:, :, ::2, ::2]
    ref, mag = np.einsum('nchw,fc->nfhw', v, f64(Wt)), np.einsum('nchw,fc->nfhw', np.abs(v), np.abs(f64(Wt)))
    compare.case('strided projection N=%d C=%d H=%d W=%d F=%d' % (n, c, h, w, f), [('X', X), ('Wt', Wt)],
                 PROJ + 'Y = proj(X, Wt)', [compare.summed('Y', F32, ref, mag)])


for shape in [(6, 20, 7, 9, 30), (3, 33, 14, 14, 17), (1, 5, 1, 1, 7), (11, 8, 5, 3, 64)]:
    proj_case(*shape)

# A 1 x 1 convolution written as a user writes it: a one-index contraction with more output
# axes than a matrix product's (N, F, H, W), which runs as a window on the image in place
# (GEMMs an image); the weight either way round, and the operands either way round; and in
# NHWC, where the image is the first operand (M the pixels) and the weight the window.
PW = '''
fn pw(X: f32[N, C, H, W], Wt: f32[F, C]) -> f32[N, F, H, W] {
  Y[n, f, h, w]: f32[N, F, H, W] = sum[c] X[n, c, h, w] * Wt[f, c]
  return Y
}
fn pwt(X: f32[N, C, H, W], Wt: f32[C, F]) -> f32[N, F, H, W] {
  Y[n, f, h, w]: f32[N, F, H, W] = sum[c] Wt[c, f] * X[n, c, h, w]
  return Y
}
fn pwn(X: f32[N, H, W, C], Wt: f32[F, C]) -> f32[N, H, W, F] {
  Y[n, h, w, f]: f32[N, H, W, F] = sum[c] X[n, h, w, c] * Wt[f, c]
  return Y
}
'''


def pw_case(n, c, h, w, f):
    X, Wt = randn((n, c, h, w)), randn((f, c))
    ref = np.einsum('nchw,fc->nfhw', f64(X), f64(Wt))
    mag = np.einsum('nchw,fc->nfhw', np.abs(f64(X)), np.abs(f64(Wt)))
    compare.case('pointwise N=%d C=%d H=%d W=%d F=%d' % (n, c, h, w, f), [('X', X), ('Wt', Wt)],
                 PW + 'Y = pw(X, Wt)', [compare.summed('Y', F32, ref, mag)])
    Wtt = np.ascontiguousarray(Wt.T)
    compare.case('pointwise, weight [C, F], N=%d C=%d H=%d W=%d F=%d' % (n, c, h, w, f), [('X', X), ('Wt', Wtt)],
                 PW + 'Y = pwt(X, Wt)', [compare.summed('Y', F32, ref, mag)])
    Xn = np.ascontiguousarray(X.transpose(0, 2, 3, 1))
    compare.case('pointwise NHWC, N=%d C=%d H=%d W=%d F=%d' % (n, c, h, w, f), [('X', Xn), ('Wt', Wt)],
                 PW + 'Y = pwn(X, Wt)', [compare.summed('Y', F32, ref.transpose(0, 2, 3, 1), mag.transpose(0, 2, 3, 1))])


for shape in [(2, 7, 5, 3, 11), (1, 1, 1, 1, 1), (0, 3, 4, 4, 5), (3, 33, 13, 17, 29), (1, 64, 9, 31, 65),
              (2, 5, 0, 3, 4)]:
    pw_case(*shape)

# N C L F K S P
for shape in [(0, 2, 5, 3, 3, 1, 1), (1, 1, 1, 1, 1, 1, 0), (2, 3, 2, 4, 5, 1, 2),
              (3, 5, 31, 7, 3, 2, 1), (2, 7, 97, 13, 7, 1, 3), (1, 16, 64, 17, 1, 2, 0)]:
    conv1d_case(*shape)


# The implicit GEMM (cpu_conv_gemm.c), around the micro-tile of the hardware model in use:
# filters (M) and output columns (Q) one under, at and one over each family's mr and nr, read
# from dyn's `:sched` for the same flags (never assumed from the host); reductions longer than
# a k block (C K K of 333 and 1600), more filters than an M block, a map of many column
# chunks, one image of one panel whose filters the threads share, and f64 through a
# convolution written as a user writes it.
CONV64 = '''
fn conv64(X: f64[N, C, H, W], Wt: f64[F, C, KH, KW], S: size, P: size) -> f64[N, F, (H + 2*P - KH) / S + 1, (W + 2*P - KW) / S + 1] where S >= 1, H + 2*P >= KH, W + 2*P >= KW {
  Xp[n, c, y, x]: f64[N, C, H + 2*P, W + 2*P] = where(y >= P and y < H + P and x >= P and x < W + P, X[n, c, y - P, x - P], 0.0)
  Y[n, f, h, w] = sum[c, i, j] Xp[n, c, h * S + i, w * S + j] * Wt[f, c, i, j]
  return Y
}
'''


def conv64_case(n, c, h, w, f, k, s, p, tag):
    X, Wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((f, c, k, k))
    v = windows(X, k, s, p)
    ref = np.einsum('nchwij,fcij->nfhw', v, Wt)
    mag = np.einsum('nchwij,fcij->nfhw', np.abs(v), np.abs(Wt))
    compare.case('%s f64 N=%d C=%d H=%d W=%d F=%d K=%d S=%d P=%d' % (tag, n, c, h, w, f, k, s, p),
                 [('X', X), ('Wt', Wt)], CONV64 + 'Y = conv64(X, Wt, %d, %d)' % (s, p),
                 [compare.summed('Y', np.float64, ref, mag)])


def tiles(flags):
    """The micro-tile families (mr, nr) of f32 that dyn with these flags has, and how dyn's
    :sched ended (its exit status and the end of what it printed) for a message."""
    r = subprocess.run([DYN] + flags + ['-e', ':sched matmul'], capture_output=True, text=True)
    m = re.search(r'candidates \(mr x nr\):((?: \d+x\d+)+)', r.stdout)
    how = '%s; it printed: %s' % ('killed by signal %d' % -r.returncode if r.returncode < 0 else
                                  'exit status %d' % r.returncode, (r.stdout + r.stderr)[-600:].strip())
    return ([tuple(int(v) for v in t.split('x')) for t in m.group(1).split()] if m else []), how


def tile_cases(flags, tag):
    fams, how = tiles(flags)
    if not fams:
        raise SystemExit('conv.py: no micro-kernel families in dyn %s\'s :sched matmul (%s)'
                         % (' '.join(flags), how))
    for mr, nr in fams:
        for d in (-1, 0, 1):
            conv_case_tagged(tag, 2, 3, 5, 7, mr + d, 3, 1, 1)            # M around mr
            conv_case_tagged(tag, 1, 5, 3, nr + d, 9, 3, 1, 1)            # Q = nr + d columns
            conv_case_tagged(tag, 1, 4, 1, 2 * (nr + d) - 1, 7, 3, 2, 1)  # the same at stride 2
            conv_case_tagged(tag, 1, 2, 2 * (mr + d), 2 * (nr + d), mr + d, 1, 2, 0)  # 1 x 1, stride 2
        # one image of one panel of columns: its filters shared out over the threads in runs
        # of whole tiles, the last run short
        conv_case_tagged(tag, 1, 9, 7, 7, 3 * mr + 1, 1, 2, 0)
        conv_case_tagged(tag, 1, 5, 4, nr - 1, 5 * mr - 1, 1, 1, 1)
        # several images of small maps: panels that run across the images, C through scratch
        # (15, 30 and 25 columns an image; stride 2 and the padding fused; f64)
        conv_case_tagged(tag, 5, 6, 3, 5, 2 * mr + 1, 1, 1, 0)
        conv_case_tagged(tag, 7, 4, 4, 3, mr, 1, 1, 1)
        conv_case_tagged(tag, 9, 3, 7, 7, mr + 1, 1, 2, 1)
        conv64_case(4, 5, 3, 3, mr + 2, 1, 1, 0, tag)
    for shape in [(2, 37, 9, 11, 13, 3, 1, 1), (1, 64, 10, 9, 7, 5, 1, 2), (1, 3, 5, 6, 300, 3, 1, 1),
                  (1, 3, 100, 97, 8, 3, 1, 0), (0, 5, 7, 7, 9, 3, 1, 1), (1, 1, 2, 2, 11, 7, 2, 3),
                  (3, 13, 17, 19, 23, 5, 2, 2), (1, 7, 31, 29, 17, 7, 1, 3)]:
        conv_case_tagged(tag, *shape)
    for shape in [(2, 5, 9, 8, 11, 3, 1, 1), (1, 7, 13, 11, fams[0][0] + 1, 5, 2, 2), (1, 3, 4, 4, 6, 5, 1, 2),
                  (2, 3, 7, 7, 5, 3, 1, 0)]:
        conv64_case(*shape, tag)


def conv_case_tagged(tag, n, c, h, w, f, k, s, p):
    before = len(compare.CASES)
    conv_case(n, c, h, w, f, k, s, p)
    compare.CASES[before].name = tag + ' ' + compare.CASES[before].name


if __name__ == '__main__':
    DYN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else 'dyn'
    tile_cases(compare.FLAGS, 'tile')
    argv = sys.argv[:]
    status = compare.main()
    # the same cases with the gathered path's images taken in groups wherever they can be
    # (DYN_CONV=grouped; the model takes them so only where it predicts a gain)
    if not status and len(sys.argv) >= 3:
        del compare.CASES[:]
        tile_cases(compare.FLAGS, 'grouped')
        os.environ['DYN_CONV'], os.environ['DYN_NUMPY_TARGETS'] = 'grouped', 'cpu'
        scratch = os.path.join(argv[2], 'grouped')
        os.makedirs(scratch, exist_ok=True)
        sys.argv[2:] = [scratch, 'grouped']
        status = compare.main()
        del os.environ['DYN_CONV'], os.environ['DYN_NUMPY_TARGETS']
        sys.argv[:] = argv
    # the same cases again on a narrower model's code (AVX2's tiles), where this CPU runs it
    narrow = compare.FLAGS + ['--hw=zen3']
    ok = subprocess.run([DYN] + narrow + ['--target=cpu', '-e', 'x = sum[i] rand(f32[4])[i]'],
                        capture_output=True, text=True)
    if status or len(sys.argv) < 3 or ok.returncode or 'cannot run' in ok.stderr:
        print('conv.py: the cases under --hw=zen3 are skipped: %s'
              % ('an earlier failure' if status else ok.stderr.strip() or 'no scratch folder'))
        sys.exit(status)
    del compare.CASES[:]
    tile_cases(narrow, 'zen3')
    compare.FLAGS[:] = narrow
    os.environ['DYN_NUMPY_TARGETS'] = 'cpu'
    scratch = os.path.join(sys.argv[2], 'zen3')
    os.makedirs(scratch, exist_ok=True)
    sys.argv[2:] = [scratch, 'zen3']
    sys.exit(compare.main())
