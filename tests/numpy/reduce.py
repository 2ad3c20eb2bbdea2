#!/usr/bin/env python3
"""reduce.py -- sums over every subset of axes against NumPy (run by tests/reduce-numpy.sh).

Usage: reduce.py DYN SCRATCH_DIR [CASE_SUBSTRING ...], as compare.py, whose cases, runner and
metrics it uses with cases of its own: for tensors of rank 2 to 4, Y = sum over each proper
subset of the axes, written in index notation in a function and as a top-level statement,
in f32, f64, i32 and i64, and a max in f32.  The extents are awkward: no elements, one,
primes, and the lanes of every x86 model's vector (4, 8 and 16 of f32 and f64) and one more
or less, so that merged runs of axes end inside a vector and in its last lane.  Some inputs
are written in Fortran order: read in place, their axes do not lie one after another as
the merged loops need, and the stage's own loops run them.  Short kept runs after a reduced
axis, read in whole vectors, run at the lengths and reduced extents around each model's
lanes and accumulators, as :sched reports them.  Sums are judged against the sum
of the absolute values of their terms (compare.py's `terms`), integers exactly.
"""
import itertools
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (defines its own cases on import; they are dropped below)

del compare.CASES[:]
F32, F64, I32, I64 = compare.F32, compare.F64, compare.I32, compare.I64
f64 = compare.f64
rng = np.random.default_rng(20261203)
TY = {F32: 'f32', F64: 'f64', I32: 'i32', I64: 'i64'}

SHAPES = {
    2: [(1, 17), (33, 15), (0, 7), (16, 9), (5, 1)],
    3: [(3, 17, 8), (1, 0, 5), (7, 31, 16), (2, 9, 1), (4, 1, 33)],
    4: [(2, 3, 17, 15), (1, 7, 1, 33), (3, 0, 2, 2), (5, 4, 9, 16), (2, 1, 8, 7)],
}


def data(shape, dtype):
    if dtype in (I32, I64):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def src(name, rank, axes, dtype, op):
    """A function that reduces X over axes, and the same as a top-level statement."""
    kept = [i for i in range(rank) if i not in axes]
    ins = ', '.join('D%d' % i for i in range(rank))
    outs = ', '.join('D%d' % i for i in kept)
    lhs = ', '.join('i%d' % i for i in kept)
    stmt = '[%s] = %s[%s] X[%s]' % (lhs, op, ', '.join('i%d' % i for i in axes),
                                    ', '.join('i%d' % i for i in range(rank)))
    ty = TY[dtype]
    return ('fn %s(X: %s[%s]) -> %s[%s] {\n  Y%s\n  return Y\n}\nYf = %s(X)\nYt%s\n'
            % (name, ty, ins, ty, outs, stmt, name, stmt))


def red_case(k, shape, axes, dtype, op='sum', fortran=False, hw=None):
    X = data(shape, dtype)
    name = 'r%d' % k
    if hw is not None and op in ('max', 'min') and X.size:
        # the extremes in the first and the last piece of a split, so that every partial counts
        X[(0,) * (len(shape) - 1) + (slice(0, None, 2),)] = 99 if op == 'max' else -99
        X[(-1,) * (len(shape) - 1) + (slice(1, None, 2),)] = 99 if op == 'max' else -99
    if op in ('max', 'min'):
        ref = getattr(X, op)(axis=axes) if 0 not in [shape[a] for a in axes] else None
        if ref is None:
            return
        outs = [compare.out(n, dtype, ref, compare.EXACT) for n in ('Yf', 'Yt')]
    elif dtype in (I32, I64):
        ref = X.sum(axis=axes, dtype=dtype)
        outs = [compare.out(n, dtype, ref, compare.EXACT) for n in ('Yf', 'Yt')]
    else:
        ref, mag = f64(X).sum(axis=axes), np.abs(f64(X)).sum(axis=axes)
        outs = [compare.summed(n, dtype, ref, mag) for n in ('Yf', 'Yt')]
    body = src(name, len(shape), axes, dtype, op)
    if hw:
        body = ':hw %s\n%s:hw host\n' % (hw, body)
    compare.case('%s %s over %s of %s%s%s' % (op, TY[dtype], ''.join(map(str, axes)), 'x'.join(map(str, shape)),
                                              ' (Fortran order)' if fortran else '', ' under --hw=%s' % hw if hw else ''),
                 [('X', X)], body, outs, fortran=('X',) if fortran else ())


k = 0
for rank in (2, 3, 4):
    for n in range(1, rank):
        for axes in itertools.combinations(range(rank), n):
            for i, shape in enumerate(SHAPES[rank]):
                red_case(k, shape, axes, F32)
                k += 1
            for j, dtype in enumerate((F64, I32, I64)):
                red_case(k, SHAPES[rank][(k + j) % len(SHAPES[rank])], axes, dtype)
                k += 1
            red_case(k, SHAPES[rank][k % len(SHAPES[rank])], axes, F32, 'max')
            k += 1
            red_case(k, SHAPES[rank][-1], axes, F32, fortran=True)
            k += 1

# large enough that each thread takes several tasks, the merged runs many vectors long:
# batch norm's statistics (the axes but the channels), the spatial axes, a middle axis
for shape, axes in [((6, 37, 29, 31), (0, 2, 3)), ((9, 33, 17, 23), (2, 3)), ((7, 131, 5, 67), (1,)),
                    ((65, 3, 127), (0, 1)), ((13, 41, 9, 17), (0, 3))]:
    red_case(k, shape, axes, F32)
    k += 1
    red_case(k, shape, axes, F64)
    k += 1


def split_probe(model):
    """The pieces a column sum's reduced extent is split into under `model` (twice its cores,
    cpu_reduce.c) and its f32 lanes, as the model in use says (:sched, :hw); (None, 8) where
    this build has no compiled back end.  A model under which a large column sum is not split
    stops the test: the cases below would not reach the split."""
    script = (':hw %s\nfn cs(X: f32[D0, D1]) -> f32[D1] {\n  Y[i1] = sum[i0] X[i0, i1]\n  return Y\n}\n'
              ':sched cs D0=6007 D1=17\n:hw\n' % model)
    try:
        r = subprocess.run([sys.argv[1], '--target=cpu'], input=script, capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None, 8
    if r.returncode != 0 or 'kernel cs_Y' not in r.stdout:
        return None, 8
    bits = re.search(r'(\d+)-bit vectors', r.stdout)
    pieces = re.search(r'split: i0 in (\d+) pieces', r.stdout)
    if not pieces:
        sys.exit('reduce.py: under --hw=%s a column sum of 6007 x 17 is not split over the threads:\n%s'
                 % (model, r.stdout))
    return int(pieces.group(1)), int(bits.group(1)) // 32 if bits else 8


# The reduced extent split over threads (cpu_reduce_split): column sums and reductions whose
# kept extent leaves cores idle, at the split's boundaries as the model in use places them
# (pieces - 1, pieces, pieces + 1 of the split axis) and at its vector's lanes - 1, lanes,
# lanes + 1 of kept results, under the host's model and a narrower one (zen3: 256 bits).
for model in ('host', 'zen3'):
    P, L = split_probe(model)
    P = P or 4
    hw = '' if model == 'host' else model
    for K in (1, L - 1, L, L + 1, 2 * L + 1):
        red_case(k, (6007, K), (0,), F32, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (6007, L + 1), (0,), F32, op, hw=hw)
        k += 1
    for shape, dtype in (((4099, L - 1), F64), ((3001, L + 1), I32), ((3001, L), I64)):
        red_case(k, shape, (0,), dtype, hw=hw)
        k += 1
    red_case(k, (3001, L - 1), (0,), I32, 'max', hw=hw)
    k += 1
    red_case(k, (6007, L + 1), (0,), F32, fortran=True, hw=hw)
    k += 1
    for shape in ((0, L + 1), (1, L + 1), (2, L + 1), (6007, 0)):
        red_case(k, shape, (0,), F32, hw=hw)
        k += 1
    for a in (P - 1, P, P + 1):
        red_case(k, (max(a, 2), 2003, L + 1), (0, 1), F32, hw=hw)
        k += 1
    red_case(k, (P + 1, 1009, L - 1), (0, 1), F64, hw=hw)
    k += 1
    red_case(k, (P + 1, 2, 401, L - 1), (0, 2), F32, hw=hw)
    k += 1
    red_case(k, (P - 1, 1, 401, L + 1), (0, 2), F32, 'min', hw=hw)
    k += 1


def short_probe(model, r):
    """The lanes and the accumulator vectors a sum over the middle axis of f32[3, 1000, r]
    takes under `model`, as its :sched says (cpu_reduce.c's short kept runs); (None, None)
    where this build has no compiled back end or the run takes the other loops."""
    script = (':hw %s\nfn sr(X: f32[D0, D1, D2]) -> f32[D0, D2] {\n  Y[i0, i2] = sum[i1] X[i0, i1, i2]\n'
              '  return Y\n}\n:sched sr D0=3 D1=1000 D2=%d\n' % (model, r))
    try:
        out = subprocess.run([sys.argv[1], '--target=cpu'], input=script, capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None, None
    m = re.search(r'vectors of (\d+) lanes into (\d+) vectors of accumulators', out)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


# Short kept runs (cpu_reduce.c): the kept innermost run r shorter than a few vectors, the
# reduced axis before it, read in whole vectors whose lanes keep to their columns.  Runs of
# 1, 2, 3, 5, 7 and the lanes - 1 and + 1 of the model in use (host, and zen3's and
# generic-avx2's narrower vectors and fewer registers); reduced extents of no rows, one, a
# prime, and the rows of one iteration of the accumulators (C lanes / r) and one more or
# less, so that the block's tail is empty, one vector or a few elements; f64 at its own lanes,
# integers, max and min; the reduced axis alone (the run the only kept axis, which the
# threads then take whole), beside another reduced or kept axis; and Fortran order, which
# the other loops run.
for model in ('host', 'zen3', 'generic-avx2'):
    hw = '' if model == 'host' else model
    L = short_probe(model, 7)[0] or 8
    for r in sorted({1, 2, 3, 5, 7, L - 1, L + 1}):
        lanes, C = short_probe(model, r)
        it = C * lanes // r if C else 8
        for R in sorted({0, 1, 13, it - 1, it, it + 1, 2 * it + 1}):
            red_case(k, (3, max(R, 0), r), (1,), F32, hw=hw)
            k += 1
        red_case(k, (2 * it + 3, r), (0,), F32, hw=hw)
        k += 1
        red_case(k, (2, 3, it + 1, r), (1, 2), F32, hw=hw)
        k += 1
    W = max(L // 2, 2)
    for r in (1, 3, W - 1, W + 1):
        red_case(k, (4, 101, r), (1,), F64, hw=hw)
        k += 1
    for r, dtype in ((5, I32), (3, I64), (L - 1, I32), (W + 1, I64)):
        red_case(k, (3, 211, r), (1,), dtype, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (3, 97, 7), (1,), F32, op, hw=hw)
        k += 1
        red_case(k, (2, 61, 3), (1,), F64, op, hw=hw)
        k += 1
    red_case(k, (3, 2, 67, 5), (0, 2), F32, hw=hw)
    k += 1
    red_case(k, (3, 67, 7), (1,), F32, fortran=True, hw=hw)
    k += 1




# Kept runs in registers (cpu_reduce.c's kept_gen): a kept last run of one vector to
# KEPT_VMAX (8) vectors whose lane pattern outgrows the accumulators (W + 1, 2 W + 1, ...),
# summed over the reduced axis before it with its columns in registers, its tail the run's
# last vector with the lanes already counted masked.  Runs of W + 1 to 8 W + 1 (the other
# loops) around the model's lanes, reduced extents of none, one and more, f64 at its own
# lanes, integers, max and min, a middle axis, and a split over the threads (a kept extent
# that leaves cores idle).
for model in ('host', 'zen3', 'generic-avx2'):
    hw = '' if model == 'host' else model
    W = short_probe(model, 7)[0] or 8
    for r in sorted({W + 1, 2 * W + 1, 33, 3 * W - 1, 8 * W - 1, 8 * W, 8 * W + 1}):
        for R in (0, 1, 7, 1001):
            red_case(k, (R, r), (0,), F32, hw=hw)
            k += 1
    w = max(W // 2, 2)
    for r in (w + 1, 3 * w + 1, 8 * w):
        red_case(k, (97, r), (0,), F64, hw=hw)
        k += 1
    for r, dtype in ((W + 3, I32), (w + 3, I64)):
        red_case(k, (61, r), (0,), dtype, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (53, 2 * W + 1), (0,), F32, op, hw=hw)
        k += 1
    red_case(k, (3, 211, 2 * W + 3), (1,), F32, hw=hw)
    k += 1
    red_case(k, (6007, W + 1), (0,), F32, hw=hw)
    k += 1

def rows_probe(model):
    """The rows a sum over the last axis of f32[B, N] takes at a time under `model`, as its
    :sched says (cpu_reduce.c's short reduced runs, a row in each lane of a gather); None
    where this build has no compiled back end or the model has no gathers."""
    script = (':hw %s\nfn rs(X: f32[D0, D1]) -> f32[D0] {\n  Y[i0] = sum[i1] X[i0, i1]\n  return Y\n}\n'
              ':sched rs D0=1000 D1=7\n' % model)
    try:
        out = subprocess.run([sys.argv[1], '--target=cpu'], input=script, capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None
    m = re.search(r'short reduced runs of i1, (\d+) rows of i0 at a time', out)
    return int(m.group(1)) if m else None


# Short reduced runs (cpu_reduce.c): rows shorter than a vector summed W at a time, a row
# in each lane of a gather (with AVX-512, rows of 5 and more by a masked load each), under
# the host's model and the narrower zen3 and generic-avx2.
# Rows of 0, 1, 2, 3, 7 and W - 1 (the longest), W, W + 1 (the other loops), 2 W - 1 and 2 W;
# row counts of none, one, W - 1, W + 1 and 3 W + 2, so that the last group is empty, whole
# or a few lanes; f64 at its own lanes, integers, max and min; rows under two kept axes, a
# row axis split over the threads, and Fortran order, where the gathers stride the rows.
for model in ('host', 'zen3', 'generic-avx2'):
    hw = '' if model == 'host' else model
    W = rows_probe(model) or 8
    for r in sorted({0, 1, 2, 3, 7, W - 1, W, W + 1, 2 * W - 1, 2 * W}):
        for R in sorted({0, 1, W - 1, W + 1, 3 * W + 2}):
            red_case(k, (R, r), (1,), F32, hw=hw)
            k += 1
    red_case(k, (20011, 7), (1,), F32, hw=hw)
    k += 1
    w = max(W // 2, 2)
    for r in (1, 3, 6, w + 1, 2 * w - 1):
        red_case(k, (3 * w + 1, r), (1,), F64, hw=hw)
        k += 1
    for r, dtype in ((5, I32), (3, I64), (6, I64), (W + 1, I32), (w + 1, I64)):
        red_case(k, (2 * W + 3, r), (1,), dtype, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (2 * W + 5, 7), (1,), F32, op, hw=hw)
        k += 1
        red_case(k, (w + 3, 3), (1,), F64, op, hw=hw)
        k += 1
    red_case(k, (3, 2 * W + 1, 5), (2,), F32, hw=hw)
    k += 1
    red_case(k, (2, 3, W + 1, 7), (3,), F32, hw=hw)
    k += 1
    red_case(k, (3 * W + 2, 7), (1,), F32, fortran=True, hw=hw)
    k += 1
    red_case(k, (5, W + 3, 3), (2,), F32, fortran=True, hw=hw)
    k += 1

# Rows of a vector to 256 elements (cpu_reduce.c's rows_vectors): each row in a vector of
# partials, its last W elements with the lanes already counted masked, W rows at a time
# folded together into one vector of their results; longer rows the other loops.  Rows of W,
# W + 1, 2 W + 3, 3 W - 1, 100, 255, 256 and 257 elements, under the same models; row counts of
# one, W - 1, W and 2 W + 1, so that a group is whole, cut short or both; f64 at its own lanes,
# integers, max and min (the masked lanes must not count), rows under two kept axes, and many
# groups a task.
for model in ('host', 'zen3', 'generic-avx2'):
    hw = '' if model == 'host' else model
    W = rows_probe(model) or 8
    for r in sorted({W, W + 1, 2 * W + 3, 3 * W - 1, 100, 255, 256, 257}):
        for R in sorted({1, W - 1, W, 2 * W + 1}):
            red_case(k, (R, r), (1,), F32, hw=hw)
            k += 1
    w = max(W // 2, 2)
    for r in (w, w + 1, 5 * w + 3, 256):
        red_case(k, (2 * w + 1, r), (1,), F64, hw=hw)
        k += 1
    for r, dtype in ((W, I32), (3 * W + 1, I32), (w + 5, I64)):
        red_case(k, (2 * W + 1, r), (1,), dtype, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (2 * W + 1, 2 * W + 3), (1,), F32, op, hw=hw)
        k += 1
        red_case(k, (w + 2, 3 * w + 1), (1,), F64, op, hw=hw)
        k += 1
    red_case(k, (3, 2 * W + 1, 3 * W + 1), (2,), F32, hw=hw)
    k += 1
    red_case(k, (2, 3, W + 1, 2 * W + 1), (3,), F32, hw=hw)
    k += 1
    red_case(k, (20011, W + 5), (1,), F32, hw=hw)
    k += 1

# A folded plan (cpu_reduce.c's folded_gen): a short reduced innermost run (a vector to 4
# vectors) under another reduced run, W results of the innermost kept run at a time, each
# in a vector of partials over all its runs, folded together once; a task's last group
# shifted back over the group before.  Innermost runs of W - 1 (the plan's loops), W, W + 1,
# 2 W + 3, 4 W - 1 and 4 W (the plan's loops); kept runs of fewer than W results, W, and a
# few groups and a piece; f64, integers, max and min; the kept run merged from two axes,
# a kept axis outside the reduced one, and Fortran order (the stage's loops).
for model in ('host', 'zen3', 'generic-avx2'):
    hw = '' if model == 'host' else model
    W = rows_probe(model) or 8
    for d in sorted({W - 1, W, W + 1, 2 * W + 3, 4 * W - 1, 4 * W}):
        for kin in sorted({3, W, 3 * W + 5}):
            red_case(k, (5, kin, d), (0, 2), F32, hw=hw)
            k += 1
    red_case(k, (13, 4, 2 * W + 1, W + 1), (0, 3), F32, hw=hw)
    k += 1
    red_case(k, (3, 5, 2 * W + 3, W + 2), (1, 3), F32, hw=hw)
    k += 1
    w = max(W // 2, 2)
    red_case(k, (7, 3 * w + 1, w + 3), (0, 2), F64, hw=hw)
    k += 1
    for dtype in (I32, I64):
        red_case(k, (4, 2 * W + 3, W + 5), (0, 2), dtype, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (6, 2 * W + 1, W + 3), (0, 2), F32, op, hw=hw)
        k += 1
    red_case(k, (5, 2 * W + 1, W + 3), (0, 2), F32, fortran=True, hw=hw)
    k += 1

# Column sums of few rows (cpu_reduce.c's columns_gen): at most 32 rows, the kept run in
# chunks of 8 vectors summed in registers over all the rows, a task's last chunk shifted
# back.  Rows of 1, 2, 7, 32 and 33 (the plan's loops); columns of a chunk less one (the
# loops), a chunk, one more, five and a piece, and 20011 (several chunks a task); leading
# axes merged, f64, integers, max and min, and Fortran order (the stage's loops).
for model in ('host', 'zen3', 'generic-avx2'):
    hw = '' if model == 'host' else model
    W = rows_probe(model) or 8
    CH = 8 * W
    for R in (1, 2, 7, 32, 33):
        for C in sorted({CH - 1, CH, CH + 1, 5 * CH + 3, 20011}):
            red_case(k, (R, C), (0,), F32, hw=hw)
            k += 1
    red_case(k, (3, 5, 2 * CH + 7), (0, 1), F32, hw=hw)
    k += 1
    red_case(k, (9, 3 * CH + 1), (0,), F64, hw=hw)
    k += 1
    for dtype in (I32, I64):
        red_case(k, (5, 2 * CH + 5), (0,), dtype, hw=hw)
        k += 1
    for op in ('max', 'min'):
        red_case(k, (6, 2 * CH + 3), (0,), F32, op, hw=hw)
        k += 1
    red_case(k, (7, 2 * CH + 3), (0,), F32, fortran=True, hw=hw)
    k += 1

if __name__ == '__main__':
    sys.exit(compare.main())
