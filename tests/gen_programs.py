#!/usr/bin/env python3
"""gen_programs.py -- random dyn programs written from the grammar, each run by dyn, judged.

Every program is a script of a few functions and top-level statements, made from the rules
of lang/grammar.ebnf and the typing rules of lang/reference.md:

- functions over size variables (M, N, K, L), compound dimensions (N + 1, 2*K), size
  parameters, scalar parameters and where facts;
- index notation whose subscripts the checker proves (bare, N - 1 - n, n / 2, 2*k + 1 into
  2*K, n + c narrowed by where) or checks at run time: gathers X[I[m]] with indices in and
  out of range, (n + c) % N, min(n + c, N - 1);
- where(), sum/max/min/prod (with and without a written bound), casts, math functions,
  integer / and % by constants and by values (division by zero at run time), elementwise
  definitions, calls of one function from another;
- top level: i32/i64/f32/f64/bool tensors, whole-tensor arithmetic, index notation,
  reductions, empty (0) and huge (2^40 .. 2^62) dimensions, save/load round trips, :check of
  every function call, and every command with odd arguments (:sched, :cost, :code, :check,
  :time, :hw, :target, :threads, :type, :vars, :ir, :reset, :load);
- one program in five has one line damaged (a token dropped, doubled or replaced).

The oracle, for each program run as `dyn PROG.dyn` (three in ten typed into the REPL instead,
`dyn -i -`, where errors do not stop it) on the default target (cpu when built with LLVM) and
again with --target=ref:
- no signal, exit status 0 or 1, nothing from a sanitizer (AddressSanitizer, LeakSanitizer,
  "runtime error:"), within the time limit;
- every error and warning located, FILE:LINE:COL with FILE a file of the program (or
  stdlib/NAME.dyn, or <repl:N>) and LINE one of its lines; a script's status 1 exactly when
  there is an error, the REPL's 0;
- every :check answered ok (float differences within a small absolute tolerance, as in
  tests/random_programs.py), or "did not run" (a back end that declines is not a fault);
- both targets report the same errors (a script's first, all of the REPL's).

  gen_programs.py --dyn DYN [--seed S] [--count N] [--threads T] [--timeout SEC]
                  [--keep DIR] [--no-ref] [--show N] [--print]

--print writes program N (the --seed and --count choose it) to standard output and runs
nothing.  --keep DIR saves every failing program there.  Exit status: 0 when every program
passed, 1 otherwise.
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

SIZEVARS = ['M', 'N', 'K', 'L']
IDX = {'M': 'm', 'N': 'n', 'K': 'k', 'L': 'l'}
SMALL = [0, 1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 33]
HUGE = ['1099511627776', '4398046511104', '1125899906842624', '4611686018427387904',
        '4611686018427387903', '9223372036854775807']
ELEMS = ['f32', 'f64', 'i32', 'i64']
ATOL = {'f32': 1e-4, 'f64': 1e-9}


def lit(elem, r, lo=-3, hi=3):
    """A literal of type elem: weak for f32 and i64 (the defaults), a cast otherwise; now and
    then an extreme one (the limits of the integers, 1e30, inf, nan)."""
    if r.random() < 0.03:
        x = {'f32': ['1e30', 'inf', '-inf', 'nan', '1e-40'], 'f64': ['f64(1e300)', 'f64(-inf)', 'f64(nan)'],
             'i32': ['i32(2147483647)', 'i32(-2147483647 - 1)'],
             'i64': ['9223372036854775807', '(-9223372036854775807 - 1)']}[elem]
        return r.choice(x)
    if elem[0] == 'f':
        v = '%.2f' % r.uniform(lo, hi)
        return v if elem == 'f32' else 'f64(%s)' % v
    v = str(r.randint(lo, hi))
    return v if elem == 'i64' else 'i32(%s)' % v


def data(elem, dims, r, index_of=None):
    """A top-level expression making a tensor of type elem[dims] (dims: concrete text)."""
    shape = ', '.join(dims)
    if index_of is not None:        # indices for a gather: mostly in [0, index_of), some not
        hi = index_of + (1 if r.random() < 0.15 else 0)
        return 'i64(rand(f32[%s]) * %d)' % (shape, hi) if r.random() < 0.9 else 'i64(rand(f32[%s]) * %d) - 1' % (shape, max(hi, 1))
    if elem == 'f32':
        return r.choice(['randn(f32[%s])', 'rand(f32[%s])', 'ones(f32[%s])', 'zeros(f32[%s])', 'full(f32[%s], -2.5)']) % shape
    if elem == 'f64':
        return r.choice(['randn(f64[%s])', 'f64(randn(f32[%s]))', 'full(f64[%s], 0.1)']) % shape
    if elem == 'bool':
        return r.choice(['randn(f32[%s]) > 0.0', 'ones(bool[%s])', 'zeros(bool[%s])']) % shape
    mk = r.choice(['%s(randn(f32[%%s]) * 10.0)', '%s(rand(f32[%%s]) * 3.0)', 'full(%s[%%s], 0)'])
    return (mk % elem) % shape


class Fn:
    """A generated function: its text, its parameters, what calling it needs."""
    def __init__(self, name):
        self.name = name
        self.params = []      # (name, kind, elem, dims) kind: tensor | size | scalar | index
        self.ret = None       # (elem, dims)
        self.facts = []       # (text, predicate over a size map)
        self.gather_dim = None  # the size variable that the index parameter I indexes
        self.text = ''


class Gen:
    def __init__(self, r):
        self.r = r

    # ---- expressions inside a function -----------------------------------------------
    def sub(self, dim, scope, allow_gather=True):
        """A subscript into a dimension dim (a size expression over SIZEVARS) given the
        indices in scope (size variable -> index name); None when nothing fits."""
        r = self.r
        m = re.fullmatch(r'([A-Z])', dim)
        if m and dim in scope:
            v = scope[dim]
            c = r.randint(1, 3)
            forms = ['BARE', 'BARE', 'BARE', '%s - 1 - %s' % (dim, v), '%s / 2' % v, '(%s + %d) %% %s' % (v, c, dim),
                     'min(%s + %d, %s - 1)' % (v, c, dim), 'max(%s - %d, 0)' % (v, c)]
            if allow_gather and self.gather and r.random() < 0.25:
                g, gdim = self.gather
                if gdim == dim and self.gather_idx in scope:
                    return '%s[%s]' % (g, scope[self.gather_idx])
            if r.random() < 0.01:
                return '%s + 1' % v      # proved out of bounds: an error
            f = r.choice(forms)
            if f == 'BARE':
                self.bare.add(dim)
                return v
            return f
        # into a compound dimension only expressions: a bare index would range over it
        m = re.fullmatch(r'([A-Z]) \+ (\d)', dim)
        if m and m.group(1) in scope:
            v, c = scope[m.group(1)], int(m.group(2))
            return r.choice(['%s + %d' % (v, r.randint(0, c)), '%s - %s + %d' % (m.group(1), v, c - 1)])
        m = re.fullmatch(r'2\*([A-Z])', dim)
        if m and m.group(1) in scope:
            v = scope[m.group(1)]
            return r.choice(['2 * %s' % v, '2 * %s + 1' % v, '%s + %s' % (v, v)])
        return None

    def access(self, scope):
        """A read of a tensor parameter or an earlier statement with every subscript in scope."""
        r = self.r
        cands = [(n, d) for n, k, e, d in self.f.params if k == 'tensor'] + self.stmts
        r.shuffle(cands)
        for name, dims in cands:
            subs = []
            for d in dims:
                s = self.sub(d, scope)
                if s is None:
                    break
                subs.append(s)
            else:
                if not dims:
                    return name
                return '%s[%s]' % (name, ', '.join(subs))
        return None

    def leaf(self, scope, elem):
        r = self.r
        x = r.random()
        if x < 0.6:
            a = self.access(scope)
            if a:
                return self.cast_to(a, elem)
        if x < 0.7 and self.scalars:
            return self.cast_to(r.choice(self.scalars), elem)
        if x < 0.8 and scope:
            v = r.choice(sorted(scope.values()))       # an index used as a value: weak i64
            return v if elem in ('i64',) or elem == 'f32' and r.random() < 0.5 else '%s(%s)' % (elem, v)
        if x < 0.85:
            v = r.choice(sorted(self.sizes))           # a size used as a value
            return v if elem == 'i64' else '%s(%s)' % (elem, v)
        return lit(elem, r)

    def cast_to(self, e, elem):
        """e (of the function's element type or another) as elem."""
        src = self.elem_of(e)
        if src == elem or src is None:
            return e
        return '%s(%s)' % (elem, e)

    def elem_of(self, e):
        m = re.match(r'([A-Za-z_]\w*)', e)
        if not m:
            return None
        for n, k, el, d in self.f.params:
            if n == m.group(1):
                return el
        for n, d in self.stmts:
            if n == m.group(1):
                return self.stmt_elem[n]
        return None

    def expr(self, scope, elem, depth):
        r = self.r
        x = r.random()
        if depth <= 0 or x < 0.22:
            return self.leaf(scope, elem)
        fl = elem[0] == 'f'
        if x < 0.45:
            a, b = self.expr(scope, elem, depth - 1), self.expr(scope, elem, depth - 1)
            return '(%s %s %s)' % (a, r.choice(['+', '-', '*', '*']), b)
        if x < 0.52:
            a, b = self.expr(scope, elem, depth - 1), self.expr(scope, elem, depth - 1)
            if fl:
                one = '1.0' if elem == 'f32' else 'f64(1.0)'
                return '(%s / (abs(%s) + %s))' % (a, b, one) if r.random() < 0.9 else '(%s / %s)' % (a, b)
            c = r.choice(['3', '-2', '7']) if elem == 'i64' else 'i32(%s)' % r.choice(['3', '-2', '7'])
            return '(%s %s %s)' % (a, r.choice(['/', '%']), c if r.random() < 0.8 else b)
        if x < 0.62:
            a = self.expr(scope, elem, depth - 1)
            if fl:
                f = r.choice(['tanh(%s)', 'sigmoid(%s)', 'abs(%s)', 'sqrt(abs(%s))', '-%s', 'floor(%s)',
                              'round(%s)', 'exp(%s * 0.1)' if elem == 'f32' else 'exp(%s * f64(0.1))',
                              'log(abs(%s) + 1.0)' if elem == 'f32' else 'log(abs(%s) + f64(1.0))',
                              'erf(%s)', 'cos(%s)', '%s ** 2' if elem == 'f32' else 'pow(%s, f64(2.0))'])
            else:
                f = r.choice(['abs(%s)', '-%s', '(%s %% 5)', '(%s / 3)'] if elem == 'i64'
                             else ['abs(%s)', '-%s', '(%s %% i32(5))', '(%s / i32(3))'])
            return f % a
        if x < 0.68:
            a, b = self.expr(scope, elem, depth - 1), self.expr(scope, elem, depth - 1)
            return '%s(%s, %s)' % (r.choice(['max', 'min']), a, b)
        if x < 0.78:
            a, b = self.expr(scope, elem, depth - 1), self.expr(scope, elem, depth - 1)
            if scope and r.random() < 0.5:
                # narrowing by where: a shifted read in the then branch
                d = r.choice(sorted(scope))
                c = r.randint(1, 2)
                v = scope[d]
                shifted = self.shifted(scope, d, c)
                if shifted:
                    return 'where(%s < %s - %d, %s, %s)' % (v, d, c, self.cast_to(shifted, elem), b)
            c1, c2 = self.expr(scope, elem, depth - 1), self.expr(scope, elem, depth - 1)
            cond = '%s %s %s' % (c1, r.choice(['>', '<', '>=', '==', '!=']), c2)
            if r.random() < 0.2:
                cond = '(%s) %s (%s > %s)' % (cond, r.choice(['and', 'or']), a, b)
            if r.random() < 0.1:
                cond = 'not (%s)' % cond
            return 'where(%s, %s, %s)' % (cond, a, b)
        if x < 0.82:
            other = r.choice([e for e in ELEMS if e != elem])       # a cast from another type
            return '%s(%s)' % (elem, self.expr(scope, other, depth - 1))
        # a reduction over a size variable not in scope
        free = [d for d in sorted(self.sizes) if d not in scope and d in SIZEVARS]
        if not free:
            return self.leaf(scope, elem)
        d = r.choice(free)
        inner = dict(scope)
        inner[d] = IDX[d]
        had = d in self.bare
        self.bare.discard(d)
        body = self.expr(inner, elem, depth - 1)
        ranged = d in self.bare                  # a bare subscript gives the index its range
        self.bare.discard(d)
        if had:
            self.bare.add(d)
        red = r.choice(['sum', 'sum', 'max', 'min', 'prod'])
        if not ranged or r.random() < 0.3:
            bound = r.choice([d, '%s / 2' % d, 'min(%s, 3)' % d, '%s - 1' % d])
            return '(%s[%s < %s] %s)' % (red, IDX[d], bound, body)
        return '(%s[%s] %s)' % (red, IDX[d], body)

    def shifted(self, scope, d, c):
        """A read whose subscript for axis d is index + c (proved by the narrowing)."""
        for name, k, e, dims in self.f.params:
            if k == 'tensor' and d in dims:
                subs = []
                for dd in dims:
                    if dd == d:
                        subs.append('%s + %d' % (scope[d], c))
                    else:
                        s = self.sub(dd, scope, allow_gather=False)
                        if s is None:
                            break
                        subs.append(s)
                else:
                    return '%s[%s]' % (name, ', '.join(subs))
        return None

    # ---- functions -----------------------------------------------------------------------
    def function(self, name, elem, callee=None):
        r = self.r
        f = Fn(name)
        self.f = f
        self.stmts, self.stmt_elem, self.scalars = [], {}, []
        self.gather, self.gather_idx = None, None
        nvars = r.randint(1, 3)
        vs = r.sample(SIZEVARS[:3], nvars)
        self.sizes = set(vs)
        for p in range(r.randint(1, 3)):
            rank = r.randint(0 if p else 1, min(3, len(vs)))
            dims = r.sample(vs, rank)
            if p and dims and r.random() < 0.3:            # a compound dimension of a bound variable
                i = r.randrange(len(dims))
                dims[i] = r.choice(['%s + 1' % dims[i], '2*%s' % dims[i], '%s + 2' % dims[i]])
            pel = elem if r.random() < 0.85 else r.choice(ELEMS)
            f.params.append(('X%d' % p, 'tensor', pel, dims))
        # the first parameter binds every size variable it uses; the others must be bound too
        bound = set(d for d in f.params[0][3])
        for i, (n, k, e, dims) in enumerate(f.params):
            for d in dims:
                base = re.sub(r'[^A-Z]', '', d)
                if base not in bound and d != base:
                    f.params[i] = (n, k, e, [base if x == d else x for x in dims])
                bound.add(base)
        self.sizes = set(re.sub(r'[^A-Z]', '', d) for p in f.params for d in p[3])
        if not self.sizes:
            self.sizes = {'N'}
            f.params[0] = (f.params[0][0], 'tensor', f.params[0][2], ['N'])
        if r.random() < 0.3:            # a gather through an index tensor over a new size L
            target = r.choice(sorted(self.sizes))
            f.params.append(('I', 'index', 'i64', ['L']))
            self.gather, self.gather_idx = ('I', target), 'L'
            f.gather_dim = target
            self.sizes.add('L')
        if r.random() < 0.25:
            f.params.append(('a', 'scalar', elem, []))
            self.scalars.append('a')
        if r.random() < 0.15:
            f.params.append(('P', 'size', 'i64', []))
        for v in sorted(self.sizes):
            if r.random() < 0.25:
                c = r.choice([1, 2, 3, 4])
                kind = r.choice(['>=', '%', '<='])
                if kind == '>=':
                    f.facts.append(('%s >= %d' % (v, c), lambda s, v=v, c=c: s[v] >= c))
                elif kind == '%':
                    f.facts.append(('%s %% %d == 0' % (v, c), lambda s, v=v, c=c: s[v] % c == 0))
                else:
                    f.facts.append(('%s <= 4096' % v, lambda s, v=v: s[v] <= 4096))
        lines = []
        if callee is not None:           # a call of an earlier function, its arguments our tensors
            args = self.call_args(callee)
            if args:
                lines.append('  C0 = %s(%s)' % (callee.name, ', '.join(args)))
                self.stmts.append(('C0', list(callee.ret[1])))   # its sizes are named as ours
                self.stmt_elem['C0'] = callee.ret[0]
        for si in range(r.randint(1, 3)):
            outv = r.sample(sorted(v for v in self.sizes if v in SIZEVARS), r.randint(0, min(2, len(self.sizes))))
            scope = {d: IDX[d] for d in outv}
            self.bare = set()
            e = self.expr(scope, elem, r.randint(1, 3))
            t = 'T%d' % si
            if outv:
                # an annotation gives the ranges that no bare subscript gives
                need = not set(outv) <= self.bare
                annot = ': %s[%s]' % (elem, ', '.join(outv)) if need or r.random() < 0.5 else ''
                lines.append('  %s[%s]%s = %s' % (t, ', '.join(IDX[d] for d in outv), annot, e))
            elif r.random() < 0.3 and self.stmts and self.stmts[-1][1]:
                prev, pd = self.stmts[-1]
                if self.stmt_elem[prev] == elem:
                    e = '%s * %s + %s' % (prev, lit(elem, r), prev)
                    outv = pd
                lines.append('  %s = %s' % (t, e))
            else:
                lines.append('  %s: %s = %s' % (t, elem, e) if r.random() < 0.3 else '  %s = %s' % (t, e))
            self.stmts.append((t, outv))
            self.stmt_elem[t] = elem
        ret = self.stmts[-1]
        f.ret = (self.stmt_elem[ret[0]], ret[1])
        sig = ', '.join('%s: %s' % (n, 'size' if k == 'size' else e + ('[%s]' % ', '.join(d) if d else ''))
                        for n, k, e, d in f.params)
        rt = f.ret[0] + ('[%s]' % ', '.join(f.ret[1]) if f.ret[1] else '')
        facts = (' where ' + ', '.join(t for t, _ in f.facts)) if f.facts else ''
        arrow = ' -> %s' % rt if r.random() < 0.85 else ''
        f.text = 'fn %s(%s)%s%s {\n%s\n  return %s\n}' % (name, sig, arrow, facts, '\n'.join(lines), ret[0])
        return f

    def call_args(self, callee):
        """Arguments for a call of callee from the function being built: tensors whose shapes
        are the callee's with its variables renamed to ours (only exact matches)."""
        args = []
        mine = [(n, d, e) for n, k, e, d in self.f.params if k == 'tensor']
        for n, k, e, d in callee.params:
            if k == 'size':
                args.append(self.r.choice(sorted(self.sizes)))
            elif k == 'scalar':
                return None
            else:
                m = [x for x, dd, ee in mine if dd == d and ee == e]
                if not m:
                    return None
                args.append(m[0])
        return args

    # ---- the top level -----------------------------------------------------------------
    def sizes_for(self, f):
        """Concrete sizes for a call of f: the facts hold mostly, not always."""
        r = self.r
        for _ in range(20):
            s = {v: r.choice(SMALL) for v in SIZEVARS}
            if all(p(s) for _, p in f.facts) or r.random() < 0.1:
                return s
        return s

    def call(self, f):
        r = self.r
        s = self.sizes_for(f)
        if r.random() < 0.05:
            s[r.choice(SIZEVARS)] = 0
        args = []
        for n, k, e, d in f.params:
            conc = [str(eval(x.replace('2*', '2 * '), {}, s)) for x in d]
            if k == 'size':
                args.append(str(r.choice([0, 1, 3, s['N']])))
            elif k == 'scalar':
                args.append(lit(e, r))
            elif k == 'index':
                args.append(data('i64', conc, r, index_of=s[f.gather_dim]))
            else:
                args.append(data(e, conc, r))
        return '%s(%s)' % (f.name, ', '.join(args))

    def toplevel(self, fns):
        r = self.r
        out, last = [], []
        for _ in range(r.randint(2, 8)):
            x = r.random()
            if x < 0.35 and fns:
                f = r.choice(fns)
                c = self.call(f)
                out.append(r.choice([':check %s' % c, ':check %s' % c, 'Y = %s' % c, ':type %s' % c]))
            elif x < 0.55:
                out.extend(self.tensors())
            elif x < 0.65:
                risky, ls = self.shapes()
                (last if risky and r.random() < 0.7 else out).extend(ls)
            elif x < 0.9:
                risky, c = self.command(fns)
                (last if risky and r.random() < 0.7 else out).append(c)
            else:
                out.extend(self.roundtrip())
        return out + last

    def tensors(self):
        """Whole-tensor arithmetic, index notation and reductions at top level."""
        r = self.r
        e = r.choice(ELEMS + ['bool'])
        dims = [str(r.choice(SMALL)) for _ in range(r.randint(0, 3))]
        lines = ['A = %s' % data(e, dims, r) if dims else 'A = %s' % lit('f32' if e == 'bool' else e, r)]
        if e == 'bool':
            lines.append(r.choice(['B = A and not A', 'B = where(A, 1, 2)', 'print(A)', 'B = A == A']))
            return lines
        one = lit(e, r)
        lines.append(r.choice(['B = A * %s + A' % one, 'B = A - A / (abs(A) + %s)' % (
            '1.0' if e == 'f32' else 'f64(1.0)') if e[0] == 'f' else 'B = A %% %s' % one,
            'B = where(A > %s, A, -A)' % one, 'B = max(A, %s)' % one, 'B = A > %s' % one]))
        if dims:
            ix = 'ijkq'[:len(dims)]
            lines.append(r.choice([
                's = %s[%s] A[%s]' % (r.choice(['sum', 'max', 'min', 'prod']), ', '.join(ix), ', '.join(ix)),
                'T[%s] = A[%s]' % (', '.join(reversed(ix)), ', '.join(ix)),
                'x = A[%s]' % ', '.join(str(r.choice([0, 1, int(d) - 1, int(d)])) for d in dims),
                'print(shape(A), A)',
            ]))
        lines.append(r.choice(['print(B)', ':type B', ':vars', 'print(shape(B))']))
        return lines

    def shapes(self):
        """Empty and huge dimensions: (whether it is meant to fail, the lines)."""
        r = self.r
        h = r.choice(HUGE)
        e = r.choice(ELEMS + ['bool'])
        if r.random() < 0.25:            # too large to allocate: an error
            return True, [r.choice(['Z = zeros(%s[%s])' % (e, h), 'Z = ones(%s[%s, %s])' % (e, h, h),
                                    'Z = full(%s[3, %s], 1)' % (e, h), 'n = %s\nZ = zeros(%s[n, 2])' % (h, e)])]
        z = r.choice(['zeros(%s[0, %s])' % (e, h), 'ones(%s[%s, 0, 3])' % (e, h), 'full(%s[0], 1)' % e,
                      'zeros(%s[2, 0])' % e, 'zeros(%s[%s, 0, %s])' % (e, h, h)])
        lines = ['Z = ' + z]
        lines.append(r.choice(['print(Z)', 'print(shape(Z))', 'Y = Z == Z', ':type Z', ':vars']
                              + (['Y = Z + Z', 's = sum[i, j] Z[i, j]', ':check relu(f32(Z))',
                                  'W[i] = max[j] Z[i, j]', 'W[j, i] = Z[i, j]', ':check Z * 2']
                                 if e != 'bool' and z.count(',') == 1 else [])
                              + [':check softmax(zeros(f32[0, %s]))' % h, ':check matmul(zeros(f32[0, %s]), zeros(f32[%s, 0]))' % (h, h),
                                 ':check layernorm(zeros(f32[0, 3]), zeros(f32[3]), zeros(f32[3]))']
                              + [':check layernorm(zeros(f32[%s, 0]), zeros(f32[0]), zeros(f32[0]))' % h,
                                 ':check softmax(zeros(f32[%s, 0]))' % h]))
        return False, lines

    def roundtrip(self):
        r = self.r
        e = r.choice(ELEMS + ['bool'])
        dims = [str(r.choice(SMALL)) for _ in range(r.randint(0, 3))]
        return ['S = %s' % (data(e, dims, r) if dims else lit('i64' if e == 'bool' else e, r)),
                'save(S, "s.npy")', 'R = load("s.npy")', r.choice(['print(allclose(%s(S), %s(R)))' % (
                    'f64', 'f64') if e != 'bool' else 'print(R == S)', ':type R', 'print(R)'])]

    def command(self, fns):
        """A command, with odd arguments one time in two (those mostly stop the script: the
        caller puts them last)."""
        r = self.r
        names = [f.name for f in fns] + ['matmul', 'softmax']
        n = r.choice(names)
        if r.random() < 0.5:
            return False, r.choice([
                ':sched %s' % n, ':sched %s M=%d N=%d K=%d' % (n, r.choice(SMALL), r.choice(SMALL), r.choice(SMALL)),
                ':cost %s' % n, ':code %s' % n, ':code %s asm' % n, ':ir %s' % n, ':type %s' % n,
                ':vars', ':threads %d' % r.randint(1, 4), ':target ref', ':target cpu', ':target',
                ':hw zen3', ':hw zen4', ':hw h100', ':hw host', ':load lib.dyn', ':help sched'])
        names = [f.name for f in fns] + ['matmul', 'softmax', 'layernorm', 'nosuch']
        n = r.choice(names)
        h = r.choice(HUGE)
        v = lambda: r.choice(['0', '1', '3', '17', h, '-1', '1e3', 'x', ''])
        return True, r.choice([
            ':sched %s M=%s N=%s K=%s' % (n, v(), v(), v()),
            ':sched %s %s' % (n, r.choice(['M=', '=3', 'M', 'M=1=2', 'Q=4', 'M=3 M=4'])),
            ':cost %s' % n, ':cost', ':cost %s extra' % n,
            ':code %s' % n, ':code %s %s' % (n, r.choice(['llvm', 'asm', 'cuda', 'bogus', ''])),
            ':ir %s' % n, ':ir', ':ir %s %s' % (n, n),
            ':check %s' % r.choice(['1 + 2', 'ones(f32[3]) * 2', '', 'nosuch(1)', '[1, 2] + [3]', 'Y']),
            ':time %s' % r.choice(['x = 1', '', 'ones(f32[4]) + 1', 'print(1)']),
            ':hw %s' % r.choice(['', 'zen4', 'h100', 'nosuch', 'host', 'zen3', '/dev/null', 'neoverse-v2']),
            ':target %s' % r.choice(['', 'ref', 'cpu', 'gpu', 'gpu tf32', 'gpu bogus', 'tpu']),
            ':threads %s' % r.choice(['', '0', '1', '2', '3', '1024', '1025', '-1', 'x', h]),
            ':type %s' % r.choice([n, '1 +', 'A', '', 'f32[3]', 'zeros']),
            ':vars', ':vars %s' % n, ':reset', ':reset now',
            ':load %s' % r.choice(['lib.dyn', 'nosuch.dyn', '', 'lib.dyn # comment', '.']),
            ':help %s' % r.choice(['', 'sched', ':load', 'nosuch']),
            ':frob', ':',
        ])

    def program(self):
        r = self.r
        fns = []
        for i in range(r.randint(1, 3)):
            elem = r.choice(ELEMS)
            callee = fns[-1] if fns and r.random() < 0.5 else None
            f = self.function('f%d' % i, elem, callee)
            fns.append(f)
        parts = ['seed(%d)' % r.randint(0, 99)] + [f.text for f in fns] + self.toplevel(fns)
        text = '\n'.join(parts) + '\n'
        if r.random() < 0.2:
            text = self.damage(text)
        lib = 'fn libf(X: f32[N]) -> f32[N] {\n  Y = X * 2\n  return Y\n}\nV = libf(ones(f32[3]))\n'
        return text, lib, r.random() < 0.3       # the last: typed into the REPL (dyn -i -)

    def damage(self, text):
        r = self.r
        lines = text.split('\n')
        i = r.randrange(len(lines))
        toks = re.findall(r'\w+|\*\*|->|[<>=!]=|\S', lines[i])
        if toks:
            j = r.randrange(len(toks))
            op = r.random()
            if op < 0.4:
                del toks[j]
            elif op < 0.7:
                toks.insert(j, toks[j])
            else:
                toks[j] = r.choice(['(', ')', '[', ']', ',', '=', '+', 'fn', 'where', ':', '!', '"', '1e', 'é', '{', '}'])
            lines[i] = ' '.join(toks)
        return '\n'.join(lines)


LOC = re.compile(r'^(\S+?):(\d+):(\d+): (error|warning): ')
SAN = re.compile(r'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|Sanitizer')


def judge(res, files, repl, check_values=True):
    """What is wrong with one run (a list of reasons; empty when it passed).  In the REPL
    errors do not stop anything, the status is 0, and inputs are named <repl:N>."""
    rc, out, err = res
    bad = []
    if rc is None:
        return ['timed out']
    if rc < 0:
        bad.append('killed by signal %d' % -rc)
    elif rc not in (0, 1):
        bad.append('exit status %d' % rc)
    if SAN.search(err):
        bad.append('sanitizer report')
    errors = 0
    for line in err.splitlines():             # diagnostics; standard output may hold code
        if ' error: ' not in line and ' warning: ' not in line and not line.startswith(('error:', 'warning:')):
            continue
        m = LOC.match(line)
        if not m:
            bad.append('unlocated: %s' % line)
            continue
        fname, ln = m.group(1), int(m.group(2))
        if m.group(4) == 'error':
            errors += 1
        if fname.startswith('stdlib/'):
            continue
        if repl and re.fullmatch(r'<repl:\d+>', fname) and 1 <= int(fname[6:-1]) <= files['prog.dyn'].count('\n') + 1:
            continue
        if fname not in files or not 1 <= ln <= files[fname].count('\n') + 1:
            bad.append('bad location: %s' % line)
        elif int(m.group(3)) < 1:
            bad.append('bad column: %s' % line)
    if repl and rc != 0:
        bad.append('the REPL exits with status %s' % rc)
    if not repl and rc == 1 and errors == 0:
        bad.append('exit status 1 without an error')
    if not repl and rc == 0 and errors:
        bad.append('exit status 0 after an error')
    if check_values:
        for line in out.splitlines():
            if ' vs ref: ' not in line:
                continue
            for part in line.split('; ')[1:]:
                if ' vs ref: ' not in part or part.endswith(': ok'):
                    continue
                m = re.search(r'max \|difference\| ([0-9.e+-]+|inf|nan)', part)
                el = line.split('[')[0].split(':')[0]
                if 'MISMATCH' in part and m and el in ATOL and float(m.group(1)) <= ATOL[el]:
                    continue
                bad.append('back ends disagree: %s' % line)
    return bad


def errors_of(err, repl):
    """The errors a run reports: the first in a script, all of them in the REPL."""
    found = [line for line in err.splitlines() if LOC.match(line) and ' error: ' in line]
    return found if repl else found[:1]


def run(dyn, args, path, cwd, timeout, text=None):
    env = dict(os.environ, HOME=cwd, DYN_CUDA_DRIVER='/nonexistent/libcuda.so.1',
               ASAN_OPTIONS='allocator_may_return_null=1:detect_leaks=1:abort_on_error=0',
               UBSAN_OPTIONS='print_stacktrace=1')
    try:
        if text is None:
            p = subprocess.run([dyn] + args + [path], cwd=cwd, capture_output=True, timeout=timeout,
                               env=env, stdin=subprocess.DEVNULL)
        else:
            p = subprocess.run([dyn] + args + ['-i', '-'], cwd=cwd, capture_output=True, timeout=timeout,
                               env=env, input=text.encode())
    except subprocess.TimeoutExpired:
        return (None, '', '')
    return (p.returncode, p.stdout.decode('utf-8', 'replace'), p.stderr.decode('utf-8', 'replace'))


def main():
    argv = sys.argv[1:]
    opts = {'--dyn': None, '--seed': '1', '--count': '100', '--threads': '2', '--timeout': '30',
            '--keep': None, '--show': '3', '--print': None}
    flags = set()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == '--no-ref':
            flags.add(a)
            i += 1
        elif a in opts and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 2
        else:
            print(__doc__)
            return 2
    seed, count = int(opts['--seed']), int(opts['--count'])
    r = random.Random(seed)
    g = Gen(r)
    progs = [g.program() for _ in range(count)]
    if opts['--print'] is not None:
        text, lib, repl = progs[int(opts['--print']) - 1]
        sys.stdout.write(text)
        return 0
    if not opts['--dyn']:
        print(__doc__)
        return 2
    dyn = os.path.abspath(opts['--dyn'])
    work = tempfile.mkdtemp(prefix='dyn-gen-')
    failed, shown, stats = 0, 0, {'ok': 0, 'error': 0, 'checks': 0, 'declined': 0}
    try:
        for n, (text, lib, repl) in enumerate(progs, 1):
            # each target in a folder of its own, as the program found it: a file the
            # first run saved must not be there for the second to load
            dirs = []
            for sub in ('cpu', 'ref'):
                d = os.path.join(work, sub)
                shutil.rmtree(d, ignore_errors=True)
                os.mkdir(d)
                with open(os.path.join(d, 'prog.dyn'), 'w') as fh:
                    fh.write(text)
                with open(os.path.join(d, 'lib.dyn'), 'w') as fh:
                    fh.write(lib)
                dirs.append(d)
            files = {'prog.dyn': text, 'lib.dyn': lib}
            stdin = text if repl else None
            a = run(dyn, ['--threads=' + opts['--threads']], 'prog.dyn', dirs[0], float(opts['--timeout']), stdin)
            bad = judge(a, files, repl)
            if not bad and '--no-ref' not in flags:
                b = run(dyn, ['--target=ref'], 'prog.dyn', dirs[1], float(opts['--timeout']), stdin)
                bad = ['with --target=ref: ' + x for x in judge(b, files, repl, False)]
                ea, eb = errors_of(a[2], repl), errors_of(b[2], repl)
                if not bad and (a[0] != b[0] or ea != eb):
                    diff = [(x, y) for x, y in zip(ea + [None] * len(eb), eb + [None] * len(ea)) if x != y][:1]
                    bad.append('the targets report different errors: cpu %s, ref %s' % (diff[0] if diff else (a[0], b[0])))
            if a[0] == 0:
                stats['ok'] += 1
            elif a[0] == 1:
                stats['error'] += 1
            stats['checks'] += a[1].count(' vs ref: ')
            stats['declined'] += a[1].count(' did not run ')
            if bad:
                failed += 1
                if shown < int(opts['--show']):
                    shown += 1
                    print('FAIL program %d (--seed %d --count %d --print %d%s): %s\n%s--- output:\n%s%s'
                          % (n, seed, count, n, ', in the REPL' if repl else '', '; '.join(bad[:4]), text,
                             a[1][-1500:], a[2][-3000:]))
                if opts['--keep']:
                    os.makedirs(opts['--keep'], exist_ok=True)
                    with open(os.path.join(opts['--keep'], 'gen-%d-%d.dyn' % (seed, n)), 'w') as fh:
                        fh.write(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print('generated programs (seed %d): %d run, %d ran to the end, %d stopped at an error, '
          '%d :check comparisons (%d declined by a back end), %d failed'
          % (seed, count, stats['ok'], stats['error'], stats['checks'], stats['declined'], failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
