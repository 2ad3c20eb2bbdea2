#!/usr/bin/env python3
"""compare.py -- every standard-library function against a float64 NumPy reference
(run by tests/stdlib.sh).

Usage: compare.py DYN SCRATCH_DIR [NAME_SUBSTRING ...]
       (only the cases whose names contain a NAME_SUBSTRING, when given)

Each case draws random f32 inputs (fixed seed) for one function at one shape and computes
the function in float64 with NumPy.  The cases of one function go into one .dyn script, in
a folder of their own under SCRATCH_DIR, that loads the inputs from .npy files, calls the
function at each shape (one compilation, many shapes) and saves the results; DYN runs it and
each result is compared with its reference.  If the script fails, its cases run one by one
so that the failure names its case.  Shapes come from sizes that are 1, primes and random
(all from the fixed seed), so every function meets a size of 1 and odd sizes.

Metrics (named in each result line):
  norm TOL  relative to the largest magnitude: max|got - ref| / max|ref| <= TOL, with
            TOL = 1e-5 for f32 results (a float64 reference rounded once to f32 is off by
            6e-8 of each value; the slack covers f32 arithmetic along reductions).
  exact     same dtype, same shape, equal values, NaN where NumPy has NaN (relu, transpose,
            amax, maxpool2d: they only select values; argmax: i64 indices).
The result's dtype and shape must always be the reference's.
Output: one line per case, then exactly `stdlib: N passed, N failed`; exit 1 on a failure.
"""
import concurrent.futures
import math
import os
import subprocess
import sys
import time

import numpy as np

F32, I64 = np.float32, np.int64
NORM = ('norm', 1e-5)
EXACT = ('exact',)
rng = np.random.default_rng(20250101)
CASES = []
PRIMES = [2, 3, 5, 7, 11, 13]


def rand_size(lo=1, hi=12):
    return int(rng.integers(lo, hi + 1))


def prime():
    return int(rng.choice(PRIMES))


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def f64(a):
    return np.asarray(a, dtype=np.float64)


class Case:
    def __init__(self, name, module, inputs, call, ref, metric, dtype=F32):
        self.name = name          # "softmax 1x7"
        self.module = module      # stdlib module to import (None: the prelude)
        self.inputs = inputs      # list of (name, f32 ndarray)
        self.call = call          # dyn expression over the input names
        self.ref = np.asarray(ref)
        self.metric = metric
        self.dtype = dtype


def case(fn, inputs, ref, sizes=(), metric=NORM, dtype=F32, module=None, tag=None):
    """One call fn(inputs..., sizes...); the name shows the input shapes and the sizes."""
    shapes = ','.join('x'.join(map(str, a.shape)) or 'scalar' for _, a in inputs)
    name = '%s %s%s' % (fn, shapes, ''.join(' %s' % s for s in sizes))
    if tag:
        name += ' (%s)' % tag
    args = [n for n, _ in inputs] + [str(s) for s in sizes]
    CASES.append(Case(name, module, inputs, '%s(%s)' % (fn, ', '.join(args)), ref, metric,
                      dtype))


# ---- float64 references ----
def softmax64(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def gelu64(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf64(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def linear64(x, w, b):
    return x @ w.T + b


def windows(xp, k, s, out, axis):
    """The slice of xp along axis that window offset k touches for each of out outputs."""
    idx = [slice(None)] * xp.ndim
    idx[axis] = slice(k, k + s * (out - 1) + 1, s)
    return xp[tuple(idx)]


def conv1d64(x, w, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p)))
    lo = (x.shape[2] + 2 * p - w.shape[2]) // s + 1
    y = np.zeros((x.shape[0], w.shape[0], lo))
    for k in range(w.shape[2]):
        y += np.einsum('ncl,fc->nfl', windows(xp, k, s, lo, 2), w[:, :, k])
    return y


def conv2d64(x, w, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    ho = (x.shape[2] + 2 * p - w.shape[2]) // s + 1
    wo = (x.shape[3] + 2 * p - w.shape[3]) // s + 1
    y = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            win = windows(windows(xp, i, s, ho, 2), j, s, wo, 3)
            y += np.einsum('nchw,fc->nfhw', win, w[:, :, i, j])
    return y


def pool64(x, k, s, how):
    ho, wo = (x.shape[2] - k) // s + 1, (x.shape[3] - k) // s + 1
    wins = [windows(windows(x, i, s, ho, 2), j, s, wo, 3) for i in range(k) for j in range(k)]
    return np.max(wins, axis=0) if how == 'max' else np.mean(wins, axis=0)


def attention64(q, k, v, causal):
    a = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[2])
    if causal:
        s, t = np.arange(q.shape[1])[:, None], np.arange(k.shape[1])[None, :]
        a = np.where(t <= s, a, -np.inf)
    return softmax64(a) @ v


# ---- the cases ----
def matrix_shapes():
    """(rows, cols): ones, primes, random."""
    return [(1, 1), (1, prime()), (prime(), 1), (prime(), prime()), (rand_size(), rand_size(2, 40))]


# linalg
for m, k, n in [(1, 1, 1), (1, 7, 1), (prime(), prime(), prime()), (rand_size(), rand_size(), rand_size()),
                (13, 37, 11)]:
    a, b = randn(m, k), randn(k, n)
    case('matmul', [('A', a), ('B', b)], f64(a) @ f64(b))
    x = randn(k)
    case('matvec', [('A', a), ('x', x)], f64(a) @ f64(x))
for bt, m, k, n in [(1, 1, 1, 1), (prime(), prime(), prime(), prime()), (rand_size(1, 4), rand_size(), rand_size(), rand_size())]:
    a, b = randn(bt, m, k), randn(bt, k, n)
    case('bmm', [('X', a), ('Y', b)], f64(a) @ f64(b))
for m, n in matrix_shapes():
    x, y = randn(m), randn(n)
    case('outer', [('x', x), ('y', y)], np.outer(f64(x), f64(y)))
    a = randn(m, n)
    case('transpose', [('A', a)], a.T, metric=EXACT)
for n in [1, 2, prime(), 31, rand_size(1, 100)]:
    x, y = randn(n), randn(n)
    case('dot', [('x', x), ('y', y)], f64(x) @ f64(y))

# nn: elementwise and row-wise layers on f32[B, N]
for b, n in matrix_shapes():
    x = randn(b, n, scale=3.0)
    case('relu', [('X', x)], np.maximum(x, 0), metric=EXACT)
    case('gelu', [('X', x)], gelu64(f64(x)))
    case('gelu_erf', [('X', x)], gelu_erf64(f64(x)))
    case('silu', [('X', x)], f64(x) / (1 + np.exp(-f64(x))))
    case('sigmoid', [('X', x)], 1 / (1 + np.exp(-f64(x))))     # the built-in, for nn's list
    case('softmax', [('X', x)], softmax64(f64(x)))
    case('log_softmax', [('X', x)], f64(x) - f64(x).max(1, keepdims=True) -
         np.log(np.exp(f64(x) - f64(x).max(1, keepdims=True)).sum(1, keepdims=True)))
    g, be = randn(n), randn(n)
    xs = randn(b, n, scale=2.0) + 1.5
    mu = f64(xs).mean(1, keepdims=True)
    var = ((f64(xs) - mu) ** 2).mean(1, keepdims=True)
    case('layernorm', [('X', xs), ('g', g), ('be', be)], (f64(xs) - mu) / np.sqrt(var + 1e-5) * g + be)
    case('rmsnorm', [('X', xs), ('g', g)],
         f64(xs) / np.sqrt((f64(xs) ** 2).mean(1, keepdims=True) + 1e-5) * g)
for b, i, o in [(1, 1, 1), (prime(), prime(), prime()), (rand_size(), rand_size(1, 40), rand_size())]:
    x, w, bias = randn(b, i), randn(o, i), randn(o)
    case('linear', [('X', x), ('W', w), ('bias', bias)], linear64(f64(x), f64(w), f64(bias)))
    h = rand_size(1, 20)
    w1, b1, w2, b2 = randn(h, i), randn(h), randn(o, h), randn(o)
    case('mlp', [('X', x), ('W1', w1), ('b1', b1), ('W2', w2), ('b2', b2)],
         linear64(gelu64(linear64(f64(x), f64(w1), f64(b1))), f64(w2), f64(b2)))

# convolutions: (N, C, L or H/W, F, K, stride, padding)
for n, c, l, f, k, s, p in [(1, 1, 1, 1, 1, 1, 0), (1, 1, 5, 1, 3, 1, 1), (2, 3, 11, 2, 3, 2, 1),
                            (1, 2, 7, 3, 5, 3, 2), (prime(), prime(), 13, prime(), 2, 1, 0)]:
    x, w = randn(n, c, l), randn(f, c, k)
    case('conv1d', [('X', x), ('Wt', w)], conv1d64(f64(x), f64(w), s, p), sizes=(s, p))
for n, c, h, wd, f, kh, kw, s, p in [(1, 1, 1, 1, 1, 1, 1, 1, 0), (1, 1, 1, 1, 1, 3, 3, 1, 1),
                                     (1, 2, 7, 5, 3, 3, 3, 1, 1), (2, 3, 11, 7, 2, 3, 2, 2, 0),
                                     (1, 2, 8, 9, 2, 5, 3, 3, 2), (1, 3, 6, 6, 4, 2, 2, 2, 1)]:
    x, w = randn(n, c, h, wd), randn(f, c, kh, kw)
    case('conv2d', [('X', x), ('Wt', w)], conv2d64(f64(x), f64(w), s, p), sizes=(s, p))
for n, c, h, wd, k, s in [(1, 1, 1, 1, 1, 1), (1, 1, 4, 4, 2, 2), (2, 3, 7, 5, 2, 2),
                          (1, 2, 11, 13, 3, 2), (1, 1, 7, 7, 3, 1), (2, 1, 9, 6, 3, 3)]:
    x = randn(n, c, h, wd)
    case('maxpool2d', [('X', x)], pool64(x, k, s, 'max'), sizes=(k, s), metric=EXACT)
    case('avgpool2d', [('X', x)], pool64(f64(x), k, s, 'mean'), sizes=(k, s))

# attention: (B, S, T, D)
for bt, s, t, d in [(1, 1, 1, 1), (1, 5, 5, 3), (2, 7, 3, 5), (prime(), 3, 11, 2), (1, 13, 13, 8)]:
    q, k, v = randn(bt, s, d), randn(bt, t, d), randn(bt, t, d)
    ins = [('Q', q), ('K', k), ('V', v)]
    case('attention', ins, attention64(f64(q), f64(k), f64(v), False))
    case('causal_attention', ins, attention64(f64(q), f64(k), f64(v), True))

# reduce (import reduce), along the last axis
for b, n in matrix_shapes() + [(3, 50)]:
    x = randn(b, n, scale=2.0) + 1.0
    R = 'reduce'
    case('sum', [('X', x)], f64(x).sum(1), module=R)
    case('mean', [('X', x)], f64(x).mean(1), module=R)
    case('var', [('X', x)], f64(x).var(1), module=R)
    case('std', [('X', x)], f64(x).std(1), module=R)
    case('amax', [('X', x)], x.max(1), metric=EXACT, module=R)
    case('argmax', [('X', x)], x.argmax(1), metric=EXACT, dtype=I64, module=R)
    # running forms (scans): each step rounded to f32 in order, as NumPy's accumulate does
    case('cumsum', [('X', x)], np.cumsum(x, 1, dtype=F32), metric=EXACT, module=R)
    case('cumprod', [('X', x)], np.cumprod(x, 1, dtype=F32), metric=EXACT, module=R)
    case('cummax', [('X', x)], np.maximum.accumulate(x, 1), metric=EXACT, module=R)
    case('cummin', [('X', x)], np.minimum.accumulate(x, 1), metric=EXACT, module=R)
    ties = rng.integers(0, 3, (b, n)).astype(F32)          # many equal maxima: the first wins
    case('argmax', [('X', ties)], ties.argmax(1), metric=EXACT, dtype=I64, module=R, tag='ties')
nans = randn(3, 6)
nans[0, 2] = nans[0, 4] = np.nan
nans[2, 5] = np.nan
case('amax', [('X', nans)], nans.max(1), metric=EXACT, module='reduce', tag='NaN')
case('argmax', [('X', nans)], nans.argmax(1), metric=EXACT, dtype=I64, module='reduce', tag='NaN')
case('cummax', [('X', nans)], np.maximum.accumulate(nans, 1), metric=EXACT, module='reduce', tag='NaN')
case('cummin', [('X', nans)], np.minimum.accumulate(nans, 1), metric=EXACT, module='reduce', tag='NaN')


# ---- running and comparing ----
# The cases of one function run in one dyn process, one after another: the function is
# compiled once and called at every shape (which is also how dyn is meant to be used, and
# keeps the suite fast when a compiling back end pays per process).  If that script fails,
# each of its cases runs alone, so the failure names its case.
def script(c, k):
    """Lines that load case c's inputs (names prefixed with cK_), call, and save RK.npy."""
    lines, call = [], c.call
    for name, _ in c.inputs:
        lines.append('c%d_%s = load("c%d_%s.npy")' % (k, name, k, name))
    args = call[call.index('(') + 1:-1].split(', ')
    args = ['c%d_%s' % (k, a) if any(a == n for n, _ in c.inputs) else a for a in args]
    lines += ['R%d = %s(%s)' % (k, call[:call.index('(')], ', '.join(args)),
              'save(R%d, "R%d.npy")' % (k, k)]
    return lines


def run_group(dyn, d, group):
    """Run the cases [(k, case)] in one script in folder d; a message if dyn failed."""
    os.makedirs(d, exist_ok=True)
    mods = sorted({c.module for _, c in group if c.module})
    lines = ['import %s' % m for m in mods]
    for k, c in group:
        for name, a in c.inputs:
            np.save(os.path.join(d, 'c%d_%s.npy' % (k, name)), a)
        lines += script(c, k)
    with open(os.path.join(d, 'case.dyn'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    try:
        r = subprocess.run([dyn, 'case.dyn'], cwd=d, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return 'dyn took more than 300 s'
    if r.returncode != 0 or r.stderr:
        return 'dyn exit %d: %s' % (r.returncode, (r.stderr or r.stdout).strip()[:600])
    return None


def compare(c, path):
    got = np.load(path)
    if got.dtype != c.dtype or got.shape != c.ref.shape:
        return False, 'got %s%s, want %s%s' % (got.dtype, list(got.shape),
                                               np.dtype(c.dtype), list(c.ref.shape))
    if c.metric[0] == 'exact':
        ok = np.array_equal(got, c.ref.astype(c.dtype), equal_nan=c.dtype is F32)
        return ok, 'exact' + ('' if ok else ': got %s, want %s' % (got, c.ref))
    ref = c.ref.astype(np.float64)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    rel = err / scale if scale > 0 else err
    ok = bool(np.isfinite(rel)) and rel <= c.metric[1]
    return ok, 'norm %.1e <= %g' % (rel, c.metric[1]) if ok else \
        'norm: max|got - ref| / max|ref| = %.3g > %g' % (rel, c.metric[1])


def run_function(dyn, scratch, fn, group):
    """[(k, ok, message)] for the cases of one function."""
    d = os.path.join(scratch, fn)
    err = run_group(dyn, d, group)
    if err is None:
        return [(k, *compare(c, os.path.join(d, 'R%d.npy' % k))) for k, c in group]
    out = []
    for k, c in group:
        dk = os.path.join(scratch, '%s-%d' % (fn, k))
        e = run_group(dyn, dk, [(k, c)])
        out.append((k, False, e) if e else (k, *compare(c, os.path.join(dk, 'R%d.npy' % k))))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dyn, scratch, only = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    todo = [(i, c) for i, c in enumerate(CASES) if not only or any(o in c.name for o in only)]
    groups = {}
    for i, c in todo:
        groups.setdefault(c.call[:c.call.index('(')], []).append((i, c))
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        done = pool.map(lambda fg: run_function(dyn, scratch, *fg), groups.items())
        by_case = {k: (ok, msg) for res in done for k, ok, msg in res}
    results = [by_case[i] for i, _ in todo]
    passed = failed = 0
    for (i, c), (ok, msg) in zip(todo, results):
        print('%s %s: %s' % ('ok  ' if ok else 'FAIL', c.name, msg))
        if ok:
            passed += 1
        else:
            failed += 1
    print('(%d cases in %.1f s)' % (len(todo), time.time() - t0))
    print('stdlib: %d passed, %d failed' % (passed, failed))
    sys.exit(1 if failed else 0)


main()
