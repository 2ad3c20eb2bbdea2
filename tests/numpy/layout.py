#!/usr/bin/env python3
"""layout.py -- layout changes against NumPy (run by tests/layout-numpy.sh).

Usage: layout.py DYN SCRATCH_DIR [CASE_SUBSTRING ...], as compare.py, whose runner and metrics
it uses with cases of its own.  The compiled CPU back end runs a permutation that moves the
last axis in tiles of the model's vector lanes, walked in blocks of 16 lines of the input's
rows and bands of 4 lines of the result's, each task whole tiles (src/cpu_layout.c).  So
for each hardware model -- the host's, and narrower ones (zen3 and generic-avx2: 256 bits)
-- the extents are derived from that model's vector width and line (dyn --hw=NAME -e :hw):
0, 1, primes, a tile, a band and a block each less one, exact and one more, and extents of
the parallel axis that the runtime's tasks split off a tile.  Ranks 2 to 5, f32, f64, i32
and bf16, in a function and as a top-level statement; each case first switches the session
to its model (:hw NAME), and the results are exact.  A transpose and a permutation outgrow
the last cache of every model, so that their tiles stream where the result's rows allow.
"""
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (defines its own cases on import; they are dropped below)

del compare.CASES[:]
F32, F64, I32 = compare.F32, compare.F64, compare.I32
rng = np.random.default_rng(20261204)
MODELS = ['host', 'zen3', 'generic-avx2']
ESIZE = {'f32': 4, 'f64': 8, 'i32': 4, 'bf16': 2}
DTYPE = {'f32': F32, 'f64': F64, 'i32': I32, 'bf16': F32}


def geometry(dyn, model):
    """The model's vector bits and L1 line, as dyn reads its file (:hw)."""
    r = subprocess.run([dyn, '--hw=' + model, '-e', ':hw'], capture_output=True, text=True, timeout=60)
    bits = re.search(r'(\d+)-bit vectors', r.stdout)
    line = re.search(r'L1 .*?(\d+) B lines', r.stdout)
    if not bits or not line:
        sys.exit('layout.py: cannot read the vector width and line of %s from :hw:\n%s' % (model, r.stdout + r.stderr))
    return int(bits.group(1)), int(line.group(1))


def extents(bits, line, ty):
    """A tile (w), a band (of v) and a block (of u) of this model and type, as cpu_layout.c
    derives them, each less one, exact and one more."""
    e = ESIZE[ty]
    w = max(2, min(16, bits // (8 * e)))
    block = max(w, 16 * line // e // w * w)
    band = max(1, 4 * line // (w * e)) * w
    return w, band, block


def data(shape, ty):
    if ty == 'i32':
        return rng.integers(-100000, 100000, shape).astype(I32)
    return rng.standard_normal(shape).astype(DTYPE[ty])


def to_bf16(x):
    return compare.to_bf16(x)


def case(model, ty, shape, perm):
    rank = len(shape)
    dims = ['D%d' % i for i in range(rank)]
    ix = ['i%d' % i for i in range(rank)]
    lhs = ', '.join(ix[p] for p in perm)
    X = data(shape, ty)
    ref = (to_bf16(X) if ty == 'bf16' else X).transpose(perm)
    into, back = ('bf16', 'f32') if ty == 'bf16' else ('', '')
    body = (':hw %s\n' % model +
            'fn pf(X: %s[%s]) -> %s[%s] {\n  Y[%s] = X[%s]\n  return Y\n}\n'
            % (ty, ', '.join(dims), ty, ', '.join(dims[p] for p in perm), lhs, ', '.join(ix)) +
            'Xs = %s(X)\nF = %s(pf(Xs))\nTl[%s] = Xs[%s]\nT = %s(Tl)\n' % (into, back, lhs, ', '.join(ix), back))
    compare.case('layout %s %s %s perm %s' % (model, ty, compare.shape_str(shape), ''.join(map(str, perm))),
                 [('X', X)], body, [compare.out(n, DTYPE[ty], ref, compare.EXACT) for n in ('F', 'T')])


def cases(dyn):
    for model in MODELS:
        bits, line = geometry(dyn, model)
        for ty in ('f32', 'f64', 'i32', 'bf16'):
            w, band, block = extents(bits, line, ty)
            # 2-D: the result's rows (u) around a block, its columns (v) around a band; tiles
            # and no tiles; the tasks' split of u (97 rows: 8 tasks of 13 rows before whole tiles);
            # a side shorter than a tile, whose cut tiles run with the longer side inside (1 x N,
            # 3 x N) and with the shorter (N x 3); a whole side shorter than a tile, the matrix
            # then cut into pieces 256 long (cpu.c's THIN) on the other, one more and one less
            for m, n in [(0, 5), (1, 1), (w, w), (w - 1, w + 1), (band - 1, block + 1), (band + 1, block - 1),
                         (band, block), (2 * band + 3, 2 * block + 1), (401, 97), (37, 2 * block - 1),
                         (1, block + 3), (3, 2 * block + 1), (2 * block + 1, 3),
                         (w - 1, 2 * 256 + 1), (2 * 256 + 1, w - 1), (1, 257), (255, 1)]:
                if ty in ('f64', 'bf16') and m * n > 40000:
                    continue
                case(model, ty, (m, n), (1, 0))
            # ranks 3 to 5 with the last axis moved (and one that keeps it)
            for shape, perm in [((3, w + 1, band + 1), (0, 2, 1)), ((2, 1, 0), (2, 0, 1)),
                                ((5, 13, 2 * w + 1), (2, 0, 1)), ((4, 17, w - 1), (1, 2, 0)),
                                ((2, 3, w + 1, band - 1), (0, 3, 1, 2)), ((2, w, 7, 2 * w), (0, 2, 3, 1)),
                                ((3, 2, 5, 31), (3, 2, 1, 0)), ((2, 3, 2, w + 1, 19), (0, 4, 1, 2, 3)),
                                ((2, 2, 3, 5, w - 1), (4, 3, 2, 1, 0)), ((1, 3, 7, 2 * w, 11), (0, 1, 2, 4, 3)),
                                ((2, 3, 5, 7, 11), (1, 0, 2, 3, 4)), ((2, 3, block + 5), (0, 2, 1)),
                                ((2, 3, 300), (0, 2, 1)),
                                # the result's rows whole vectors apart but off a vector's start
                                # (every other one, three in four): where the target masks
                                # lanes, a head tile at v0 and the rest from the vector's start
                                ((2, 2, w + w // 2, w + 3), (0, 3, 1, 2)),
                                ((3, 4, 2 * w + w // 4, 2 * w - 1), (0, 3, 1, 2))]:
                case(model, ty, shape, perm)
        # larger than any model's last cache (over 64 MiB in all), result rows on a vector: the
        # tiles stream their rows (cpu_rt.c's streaming)
        case(model, 'f32', (2304, 4099), (1, 0))
        # and rows of 56, off a 16-lane vector at every other start: at 16 lanes none streams
        case(model, 'f32', (4, 40, 56, 1031), (0, 3, 1, 2))


if __name__ == '__main__':
    if len(sys.argv) >= 2:
        cases(os.path.abspath(sys.argv[1]))
    if len(sys.argv) == 3:          # only these cases, not compare.py's attention cases
        sys.argv.append('layout ')
    sys.exit(compare.main())
