"""bench_api.py -- what a call of a dyn function costs from Python beside the same call in C
(tests/bench/bench_api.c, run here) and NumPy's own, on shapes small enough that the fixed
cost is all there is: matmul 8x8x8 and an elementwise function on 64 elements, contiguous
and strided (a[::2] of 128 and b[::-1]: read in place, so no dearer).  The Python
binding is held to at most 5 us more than C per call (status 1 past it).  Each figure is
the best of 5 rounds of about SECONDS each (C's: of two runs, before and after Python's),
so a busy machine inflates it less.
Usage: bench_api.py BENCH_API_PROGRAM [SECONDS]
"""
import subprocess
import sys
import time

import numpy as np

import dyn

LIMIT_US = 5.0


def per_call(fn, secs):
    best = float("inf")
    for _ in range(5):
        n, t0 = 0, time.perf_counter()
        while True:
            for _ in range(100):
                fn()
            n += 100
            t = time.perf_counter() - t0
            if t >= secs:
                break
        best = min(best, t / n)
    return best * 1e6


def main():
    prog = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    c = {}

    def run_c():
        # the best of a run before and one after Python's: the machine's load moves
        out = subprocess.run([prog, str(secs)], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            name, us = line.split()
            c[name] = min(c.get(name, float("inf")), float(us))
    run_c()
    s = dyn.Session(threads=1)
    s.run("fn axpy(x: f32[N], y: f32[N]) -> f32[N] {\n  z[i] = x[i] * 2.0 + y[i]\n  return z\n}")
    a = np.arange(64, dtype=np.float32)
    b = a[::-1].copy()
    a2, rb = np.arange(128, dtype=np.float32)[::2], b[::-1]
    m, w = a.reshape(8, 8), b.reshape(8, 8)
    matmul, axpy = s["matmul"], s["axpy"]
    cases = [("matmul-8x8x8", lambda: matmul(m, w), lambda: np.matmul(m, w)),
             ("axpy-64", lambda: axpy(a, b), lambda: a * 2.0 + b),
             ("axpy-64-strided", lambda: axpy(a2, rb), lambda: a2 * 2.0 + rb)]
    print("%-16s %10s %10s %10s %10s" % ("call", "C us", "Python us", "extra us", "NumPy us"))
    worst = 0.0
    figures = [(name, per_call(py, secs), per_call(ref, secs)) for name, py, ref in cases]
    run_c()
    for name, p, r in figures:
        extra = p - c[name]
        worst = max(worst, extra)
        print("%-16s %10.2f %10.2f %10.2f %10.2f" % (name, c[name], p, extra, r))
    verdict = "within" if worst <= LIMIT_US else "over"
    print("Python over C: at most %.2f us a call, %s the %.0f us allowed" % (worst, verdict, LIMIT_US))
    return 0 if worst <= LIMIT_US else 1


if __name__ == "__main__":
    sys.exit(main())
