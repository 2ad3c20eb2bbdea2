#!/usr/bin/env python3
"""Random programs, compiled against the reference evaluator.

Writes functions in index notation that no one wrote by hand -- elementwise math, where(),
min and max, guarded division, sum/max/min reductions nested in any order, subscripts in any
axis order and reversed (N - 1 - n), statements that read earlier ones, results of rank 0 to
3, in f32, f64, i32 or i64 (integers: no division by values, % and / by constants) -- and
runs each through `:check` in `dyn -i -` on random data of awkward sizes (1, primes, tiles
-1, +0, +1).  Every program must compile and agree with the reference; a crash, an
error or a disagreement fails the test and prints the program.

A sum that cancels exactly (sum[m] x[m] - x[M - 1 - m]) leaves rounding noise beside a
reference of 0, which :check's tolerance, relative to the largest value, calls a mismatch;
differences within ATOL absolute are accepted as that (for f32 torch.testing's atol; none
for integers).

  random_programs.py DYN [--seed S] [--count N] [--threads T] [--large] [--elem f32|f64|i32|i64]
                        [--windows]

--windows writes convolution-like windows instead: 1-D with a stride and a dilation, 2-D with
a stride, sum/max/min over channels and taps, an elementwise step after some.
"""
import random
import re
import subprocess
import sys

DIMS = ['M', 'N', 'K']
IDX = {'M': 'm', 'N': 'n', 'K': 'k'}
SMALL = [1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 100]
LARGE = [1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 63, 64, 65, 97, 127, 128, 129, 200, 257]
ATOL = {'f32': 1e-5, 'f64': 1e-12, 'i32': 0, 'i64': 0}
ELEM = 'f32'              # the element type of every parameter and result (--elem)


class Gen:
    def __init__(self, rng, sizes):
        self.r = rng
        self.sizes = sizes

    def leaf(self, avail):
        """A constant, or a parameter or earlier result whose axes are all in scope."""
        r = self.r
        choices = [p for p in self.params + self.stmts if set(p[1]) <= avail]
        if not choices or r.random() < 0.1:
            c = '%.2f' % r.uniform(-2, 2) if ELEM[0] == 'f' else str(r.randint(-3, 3))
            return (c if ELEM in ('f32', 'i64') else '%s(%s)' % (ELEM, c)), set()
        name, dims = r.choice(choices)
        subs = []
        for d in dims:
            # reversed only after a plain use in this statement, which gives its range
            if r.random() < 0.15 and d in self.plain:
                subs.append('%s - 1 - %s' % (d, IDX[d]))
            else:
                subs.append(IDX[d])
                self.plain.add(d)
        return ('%s[%s]' % (name, ', '.join(subs)) if subs else name), set(dims)

    def expr(self, avail, depth):
        r = self.r
        x = r.random()
        if depth <= 0 or x < 0.25:
            return self.leaf(avail)
        if x < 0.47:
            a, ua = self.expr(avail, depth - 1)
            b, ub = self.expr(avail, depth - 1)
            return '(%s %s %s)' % (a, r.choice(['+', '-', '*', '*', '*']), b), ua | ub
        if x < 0.53 and ELEM[0] == 'f':
            a, ua = self.expr(avail, depth - 1)
            b, ub = self.expr(avail, depth - 1)
            return ('(%s / (abs(%s) + 1.0))' if ELEM == 'f32' else '(%s / (abs(%s) + f64(1.0)))') % (a, b), ua | ub
        if x < 0.65:
            a, ua = self.expr(avail, depth - 1)
            f = r.choice(['exp(0.1 * %s)' if ELEM == 'f32' else 'exp(f64(0.1) * %s)', 'tanh(%s)', 'sigmoid(%s)', 'abs(%s)', 'sqrt(abs(%s))', '-%s'] if ELEM[0] == 'f' else ['abs(%s)', '-%s', '(%s %% ' + ('7' if ELEM == 'i64' else 'i32(7)') + ')', '(%s / ' + ('3' if ELEM == 'i64' else 'i32(3)') + ')'])
            return f % a, ua
        if x < 0.72:
            a, ua = self.expr(avail, depth - 1)
            b, ub = self.expr(avail, depth - 1)
            return '%s(%s, %s)' % (r.choice(['max', 'min']), a, b), ua | ub
        if x < 0.80:
            c1, u1 = self.expr(avail, depth - 1)
            c2, u2 = self.expr(avail, depth - 1)
            a, ua = self.expr(avail, depth - 1)
            b, ub = self.expr(avail, depth - 1)
            return 'where(%s > %s, %s, %s)' % (c1, c2, a, b), u1 | u2 | ua | ub
        # a reduction over an axis not in scope, each reduction index once a statement
        free = [d for d in DIMS if d not in avail and d not in self.reduced]
        if not free:
            return self.leaf(avail)
        d = r.choice(free)
        saved = set(self.plain)
        self.plain.discard(d)
        a, ua = self.expr(avail | {d}, depth - 1)
        if d not in ua:            # the body does not use it: drop the text it made
            self.plain = saved
            return self.leaf(avail)
        self.plain.discard(d)
        self.reduced.add(d)
        red = r.choice(['sum', 'sum', 'sum', 'max', 'min'])
        return '(%s[%s] %s)' % (red, IDX[d], a if a.startswith('(') else '(' + a + ')'), ua - {d}

    def program(self, name):
        r = self.r
        self.params = [('P%d' % p, r.sample(DIMS, r.randint(1, 3))) for p in range(r.randint(1, 3))]
        self.stmts = []
        lines = []
        for si in range(r.randint(1, 3)):
            for _ in range(20):
                out = r.sample(DIMS, r.randint(0, 3))
                self.plain, self.reduced = set(), set()
                e, used = self.expr(set(out), 3)
                if used == set(out):       # every axis of the result is read
                    break
            else:
                continue
            t = 'T%d' % si
            lhs = t + ('[%s]' % ', '.join(IDX[d] for d in out) if out else '')
            lines.append('  %s = %s' % (lhs, e))
            self.stmts.append((t, out))
        pdims = set(d for p in self.params for d in p[1])
        if not self.stmts or not set(self.stmts[-1][1]) <= pdims:
            return None              # the result's sizes must come from the parameters
        ret = self.stmts[-1]
        ty = lambda dims: ELEM + ('[%s]' % ', '.join(dims) if dims else '')
        sig = ', '.join('%s: %s' % (n, ty(d)) for n, d in self.params)
        src = 'fn %s(%s) -> %s {\n%s\n  return %s\n}' % (name, sig, ty(ret[1]), '\n'.join(lines), ret[0])
        size = {d: r.choice(self.sizes) for d in DIMS}
        if ELEM == 'f32': mk = 'randn(f32[%s])'
        elif ELEM == 'f64': mk = 'f64(randn(f32[%s]))'
        else: mk = ELEM + '(randn(f32[%s]) * 10.0)'
        args = ', '.join(mk % ', '.join(str(size[d]) for d in dd) for _, dd in self.params)
        return src, ':check %s(%s)' % (name, args)


def window_program(r, name):
    """A convolution-like window: 1-D with a stride and a dilation, or 2-D with a stride, a
    sum, max or min over channels and taps, optionally an elementwise step after it."""
    st, dil = r.choice([1, 1, 2, 3]), r.choice([1, 1, 2])
    red = r.choice(['sum', 'sum', 'sum', 'max', 'min'])
    act = r.choice(['', 'max(%s, 0.0)', 'tanh(%s)', '%s * 2.0 + 1.0'])
    if r.random() < 0.5:
        out = '(H - %d * (R - 1) - 1) / %d + 1' % (dil, st)
        sig = 'X: f32[N, C, H], Wt: f32[F, C, R]) -> f32[N, F, %s] where H >= %d * (R - 1) + 1' % (out, dil)
        y = 'Y[n, f, h]: f32[N, F, %s] = %s[c, r] X[n, c, %d * h + %d * r] * Wt[f, c, r]' % (out, red, st, dil)
        z, taps = 'Y[n, f, h]', [r.randint(1, 5)]
        shape = [r.randint(1, 40)]
        shape[0] = max(shape[0], dil * (taps[0] - 1) + 1)
    else:
        oh, ow = '(H - R) / %d + 1' % st, '(W - S) / %d + 1' % st
        sig = 'X: f32[N, C, H, W], Wt: f32[F, C, R, S]) -> f32[N, F, %s, %s] where H >= R, W >= S' % (oh, ow)
        y = 'Y[n, f, h, w]: f32[N, F, %s, %s] = %s[c, r, q] X[n, c, %d * h + r, %d * w + q] * Wt[f, c, r, q]' % (oh, ow, red, st, st)
        z, taps = 'Y[n, f, h, w]', [r.randint(1, 4), r.randint(1, 4)]
        shape = [r.randint(taps[0], 30), r.randint(taps[1], 70)]
    lines = ['  ' + y]
    ret = 'Y'
    if act:
        lines.append('  Z%s = %s' % (z[1:], act % z))
        ret = 'Z'
    src = 'fn %s(%s {\n%s\n  return %s\n}' % (name, sig, '\n'.join(lines), ret)
    n, c, f = r.randint(1, 3), r.randint(1, 6), r.randint(1, 17)
    dims = lambda xs: ', '.join(str(x) for x in xs)
    return src, ':check %s(randn(f32[%s]), randn(f32[%s]))' % (name, dims([n, c] + shape), dims([f, c] + taps))


def main():
    global ELEM
    argv = sys.argv[1:]
    if not argv:
        print(__doc__)
        return 2
    dyn, seed, count, threads, sizes, windows = argv[0], 1, 200, 2, SMALL, False
    i = 1
    while i < len(argv):
        if argv[i] == '--seed': seed = int(argv[i + 1]); i += 2
        elif argv[i] == '--count': count = int(argv[i + 1]); i += 2
        elif argv[i] == '--threads': threads = int(argv[i + 1]); i += 2
        elif argv[i] == '--large': sizes = LARGE; i += 1
        elif argv[i] == '--windows': windows = True; i += 1
        elif argv[i] == '--elem': ELEM = argv[i + 1]; i += 2
        else: print('random_programs: unknown argument %s' % argv[i]); return 2
    g = Gen(random.Random(seed), sizes)
    progs = []
    while len(progs) < count:
        name = 'g%d' % (len(progs) + 1)
        p = window_program(g.r, name) if windows else g.program(name)
        if p:
            progs.append(p)
    text = 'seed(%d)\n' % seed + ''.join('%s\n%s\n' % p for p in progs)
    run = subprocess.run([dyn, '--threads=%d' % threads, '-i', '-'], input=text, capture_output=True,
                         text=True, timeout=1800)
    out = run.stdout + run.stderr
    # the answers of the :check lines, in order (the REPL echoes each line after its prompt)
    answers = re.findall(r'^dyn> :check (g\d+)\(.*\n(.*)$', out, re.M)
    bad = []
    for name, line in answers:
        if ': ok' in line:
            continue
        m = re.search(r'max \|difference\| ([0-9.e+-]+)', line)
        if 'MISMATCH' in line and m and float(m.group(1)) <= ATOL[ELEM]:
            continue
        bad.append((name, line))
    errors = [l for l in out.splitlines() if ': error: ' in l and 'the back ends disagree' not in l]
    fails = len(bad) + len(errors) + (len(answers) != count) + (run.returncode != 0)
    for name, line in bad[:5]:
        k = int(name[1:]) - 1
        print('FAIL %s:\n%s\n%s\n  %s' % (name, progs[k][0], progs[k][1], line))
    for l in errors[:5]:
        print('FAIL: %s' % l)
    if len(answers) != count or run.returncode != 0:
        print('FAIL: %d of %d checks answered, exit status %d; the end of the output:\n%s'
              % (len(answers), count, run.returncode, out[-2000:]))
    print('random %s (%s, seed %d, %d thread%s%s): %d checked, %d failed'
          % ('windows' if windows else 'programs', ELEM, seed, threads, '' if threads == 1 else 's', ', large sizes' if sizes is LARGE else '', count, fails))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
