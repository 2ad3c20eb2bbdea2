"""attention.py -- compare.py's cases for attention chains (the CPU back end fuses them:
src/fuse_attn.c, src/cpu_attn.c).

The shapes sit around the block the fused kernel uses on this machine's model (read from
`:sched`, never assumed): 0, 1, primes, block-1, block, block+1, with D 1, 3, 64 and 80;
causal masks with S != T; NaN and infinities (rows all masked, an inf in V where the mask
hides it); scores large, huge (1e4 and more, exact ties) and tiny (1e-30), on both paths;
two chains of the same sizes in one function, the second causal, fed by the first; a
user-written chain with other names, another scale, no batch and its own mask,
which fuses too; and two chains that must not fuse (the scores also returned; a max over
the other axis).  The row path (a few query rows a task, K and V read in place) gets a
decoder's steps: S = 1 and the rows a task takes +-1, T from 1 past two of its key blocks,
D below, at and past the model's vector lanes and the odd heads 80 and 96, causal or not,
at top level as well as in a function; and an f64 chain, which no path fuses.  Each result is judged against float64 NumPy by the size of its terms.
tests/attention.sh runs these cases with the fusion forced on and off.
"""
import os
import re
import subprocess

import numpy as np

USER = '''
fn myattn(A: f32[N, E], Bk: f32[M, E], C: f32[M, F]) -> f32[N, F] {
  sc[i, j] = where(j + 2 > i, 0.25 * (sum[k] A[i, k] * Bk[j, k]), -inf)
  mx[i]    = max[j] sc[i, j]
  ex[i, j] = exp(sc[i, j] - mx[i])
  tot[i]   = sum[j] ex[i, j]
  R[i, f]  = (sum[j] ex[i, j] * C[j, f]) / tot[i]
  return R
}
fn withscores(Q: f32[S, D], K: f32[T, D], V: f32[T, D]) -> (f32[S, D], f32[S, T]) {
  a[s, t] = (sum[d] Q[s, d] * K[t, d]) / sqrt(f32(D))
  m[s]    = max[t] a[s, t]
  e[s, t] = exp(a[s, t] - m[s])
  z[s]    = sum[t] e[s, t]
  O[s, d] = (sum[t] e[s, t] * V[t, d]) / z[s]
  return (O, a)
}
fn colmax(Q: f32[S, D], K: f32[T, D], V: f32[T, D]) -> f32[S, D] {
  a[s, t] = sum[d] Q[s, d] * K[t, d]
  m[t]    = max[s] a[s, t]
  e[s, t] = exp(a[s, t] - m[t])
  z[s]    = sum[t] e[s, t]
  O[s, d] = (sum[t] e[s, t] * V[t, d]) / z[s]
  return O
}
'''


def sched(dyn, flags, line, pattern, default):
    """The numbers pattern finds in :sched's text for line, on the model in use (flags)."""
    try:
        r = subprocess.run([dyn] + flags + ['-e', line], capture_output=True, text=True,
                           timeout=120 * float(os.environ.get('DYN_TEST_TIMEOUT_SCALE') or 1))
        m = re.search(pattern, ' '.join(r.stdout.split()))
        if m:
            return tuple(int(g) for g in m.groups())
    except (OSError, subprocess.SubprocessError):
        pass
    return default


def block(dyn, D, flags=()):
    """The fused kernel's block of keys for head size D on this machine's model."""
    return sched(dyn, list(flags), ':sched attention B=1 S=100000 T=100000 D=%d' % D,
                 r'blocks: (\d+) query rows x (\d+) keys', (0, 128))[1]


def rows_block(dyn, flags):
    """The row path's query rows a task and keys a block on the model in use."""
    return sched(dyn, list(flags), ':sched attention B=1 S=1 T=100000 D=64',
                 r'rows: (\d+) query rows a task against keys in blocks of (\d+)', (4, 512))


def lanes(dyn, flags):
    """The f32 lanes of the model's vectors (:hw)."""
    return sched(dyn, list(flags), ':hw', r'(\d+)-bit vectors', (256,))[0] // 32


def ref(Q, K, V, scale, mask=None, colmax=False):
    """softmax(Q K^T * scale, masked with -inf) V in float64, and the sizes of its terms;
    NaN where the unfused program makes NaN (rows all masked, T = 0, NaN scores)."""
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    with np.errstate(all='ignore'):
        a = np.matmul(Q, np.swapaxes(K, -1, -2)) * scale
        if mask is not None:
            a = np.where(mask, a, -np.inf)
        if a.shape[-1] == 0:
            m = np.full(a.shape[:-1] + (1,), -np.inf)
        else:
            m = a.max(-2 if colmax else -1, keepdims=True)
        e = np.exp(a - m)
        z = e.sum(-1, keepdims=True)
        # products summed explicitly: 0 * inf must be NaN, as in the program
        O = (e[..., :, :, None] * V[..., None, :, :]).sum(-2) / z
        mag = (e[..., :, :, None] * np.abs(V)[..., None, :, :]).sum(-2) / np.abs(z)
    return O, mag


def add_cases(dyn, c):
    """Append the attention cases to compare.py's list (c: the compare module)."""
    tol = 2e-5          # the weights' exponentials and two sums of f32 roundings

    def attn_case(name, B, S, T, D, causal=False, poison=None):
        Q, K, V = c.randn((B, S, D)), c.randn((B, T, D)), c.randn((B, T, D))
        if poison:
            poison(Q, K, V)
        mask = None
        if causal:
            mask = np.arange(T)[None, :] <= np.arange(S)[:, None]
        O, mag = ref(Q, K, V, 1 / np.sqrt(np.float32(D)), mask)
        # a score is a sum of D products rounded in f32: its error grows with the size of its
        # terms (scores near 1000: 6e-5 a rounding), and the weight's relative error with it
        with np.errstate(all='ignore'):
            sabs = np.matmul(np.abs(c.f64(Q)), np.swapaxes(np.abs(c.f64(K)), -1, -2)) / np.sqrt(D)
            smax = sabs.max(-1, keepdims=True) if T else np.zeros(sabs.shape[:-1] + (1,))
            smax = np.where(np.isfinite(smax), smax, 0)   # a NaN or infinite score: NaN where it reaches
            mag = mag * (1 + 2 * 2.0 ** -24 * smax / tol)
        fn = 'causal_attention' if causal else 'attention'
        c.case('%s %s B%d S%d T%d D%d' % (fn, name, B, S, T, D), [('Q', Q), ('K', K), ('V', V)],
               'O = %s(Q, K, V)' % fn, [c.out('O', c.F32, O, ('terms', tol, np.broadcast_to(mag, O.shape)))])

    for D in (1, 3, 64, 80):
        n = block(dyn, D)
        shapes = [(0, 5), (5, 0), (1, 1), (1, 13), (13, 1), (7, 11)]
        if D in (3, 64):
            shapes += [(n - 1, n + 1), (n, n), (n + 1, n - 1), (3, 2 * n + 1)]
        for S, T in shapes:
            for causal in (False, True):
                attn_case('block %d' % n, 2 if S * T < 5000 else 1, S, T, D, causal)

    def nan_q(Q, K, V):
        Q[0, 1, 0] = np.nan

    def inf_k(Q, K, V):
        K[0, 3, 1] = np.inf

    def nan_k(Q, K, V):
        K[0, 3, 1] = np.nan     # one key's scores NaN beside finite ones: its weights NaN

    def inf_v_hidden(Q, K, V):
        V[0, 5, 2] = np.inf      # hidden from rows s < 5 by the causal mask: still NaN there

    def big_scores(Q, K, V):
        Q *= 40.0                # scores near +-1000: the running max must rescale

    def huge_scores(Q, K, V):
        # scores of 1e4 and more, whole multiples of 256 (exact in f32's products and sums),
        # so that two keys tie exactly or lie 148 apart after the scale: the weights' error
        # is the scale's rounding alone, and a weight past a tie underflows to 0
        Q[...] = np.round(Q * 4) * 256
        K[...] = np.round(K * 4)

    def tiny_scores(Q, K, V):
        Q *= 1e-30               # every weight 1: the mean of V's rows

    for name, f in (('NaN in Q', nan_q), ('NaN in K', nan_k), ('inf in K', inf_k), ('inf in V', inf_v_hidden),
                    ('large scores', big_scores), ('huge scores', huge_scores), ('tiny scores', tiny_scores)):
        attn_case(name, 2, 9, 21, 3, False, f)
        attn_case(name, 2, 9, 21, 3, True, f)
    n = block(dyn, 3)
    attn_case('inf in V, long', 1, 7, 3 * n + 2, 3, True, inf_v_hidden)

    # the row path: a decoder's steps around its rows a task and its block of keys
    R, nk = rows_block(dyn, c.FLAGS)
    L = lanes(dyn, c.FLAGS)
    for D in sorted({1, L - 1, L, L + 1, 80, 96}):
        shapes = [(1, 1), (1, nk + 1), (R + 1, 37)]
        if D in (L + 1, 80):
            shapes += [(1, 2), (1, nk - 1), (R, 2 * nk + 3), (R - 1, 5), (1, 0), (0, 3)]
        for S, T in shapes:
            for causal in (False, True):
                attn_case('rows %d x %d' % (R, nk), 3, S, T, D, causal)
    attn_case('rows, NaN in Q', 2, 2, 21, 3, False, nan_q)
    attn_case('rows, NaN in K', 2, 2, 21, 3, False, nan_k)
    attn_case('rows, inf in V hidden', 1, R + 2, 2 * nk + 2, 3, True, inf_v_hidden)
    attn_case('rows, large scores', 2, 1, 3 * nk + 1, 80, False, big_scores)
    for name, f in (('huge scores', huge_scores), ('tiny scores', tiny_scores)):
        attn_case('rows, ' + name, 2, R + 1, 2 * nk + 3, 3, False, f)
        attn_case('rows, ' + name, 2, R + 1, 2 * nk + 3, 3, True, f)
    # two chains of the same sizes in one function, the second masked and fed by the first:
    # each runs on its own plan (path, mask, scale), not on the other's, at a size the model
    # fuses on the tiles and at a decoder's step
    for S, T, D in ((n + 1, n + 1, 3), (1, nk + 1, 80)):
        Q, K, V = c.randn((2, S, D)), c.randn((2, T, D)), c.randn((2, T, D))
        O1, _ = ref(Q, K, V, 1 / np.sqrt(np.float32(D)))
        mask = np.arange(T)[None, :] <= np.arange(S)[:, None]
        O, mag = ref(O1.astype(np.float32), K, V, 1 / np.sqrt(np.float32(D)), mask)
        c.case('attention then causal_attention S%d T%d D%d' % (S, T, D), [('Q', Q), ('K', K), ('V', V)],
               'fn pair(Q: f32[B, S, D], K: f32[B, T, D], V: f32[B, T, D]) -> f32[B, S, D] {\n'
               '  P = attention(Q, K, V)\n'
               '  O = causal_attention(P, K, V)\n'
               '  return O\n'
               '}\n'
               'O = pair(Q, K, V)',
               [c.out('O', c.F32, O, ('terms', 4 * tol, np.broadcast_to(mag, O.shape)))])
    # the same chain written at top level, not in a function
    Q, K, V = c.randn((2, 1, 80)), c.randn((2, 131, 80)), c.randn((2, 131, 80))
    O, mag = ref(Q, K, V, 1 / np.sqrt(np.float32(80)))
    c.case('attention at top level S1 T131 D80', [('Q', Q), ('K', K), ('V', V)],
           'a[b, s, t] = (sum[d] Q[b, s, d] * K[b, t, d]) / sqrt(80.0)\n'
           'm[b, s] = max[t] a[b, s, t]\n'
           'e[b, s, t] = exp(a[b, s, t] - m[b, s])\n'
           'z[b, s] = sum[t] e[b, s, t]\n'
           'O[b, s, d] = (sum[t] e[b, s, t] * V[b, t, d]) / z[b, s]',
           [c.out('O', c.F32, O, ('terms', tol, np.broadcast_to(mag, O.shape)))])
    # f64: no path fuses it, the result is still softmax(Q K^T) V
    Q, K, V = c.randn((1, 96), dtype=c.F64), c.randn((nk + 1, 96), dtype=c.F64), c.randn((nk + 1, 96), dtype=c.F64)
    O, mag = ref(Q, K, V, 1.0)
    c.case('attention f64 chain S1 T%d D96' % (nk + 1), [('Q', Q), ('K', K), ('V', V)],
           'fn attn64(Q: f64[S, D], K: f64[T, D], V: f64[T, D]) -> f64[S, D] {\n'
           '  a[s, t] = sum[d] Q[s, d] * K[t, d]\n'
           '  m[s] = max[t] a[s, t]\n'
           '  e[s, t] = exp(a[s, t] - m[s])\n'
           '  z[s] = sum[t] e[s, t]\n'
           '  O[s, d] = (sum[t] e[s, t] * V[t, d]) / z[s]\n'
           '  return O\n'
           '}\n'
           'O = attn64(Q, K, V)',
           [c.out('O', c.F64, O, ('terms', 1e-12, np.broadcast_to(mag, O.shape)))])

    # the user's chain: other names, scale 0.25, no batch, mask j + 2 > i (none all masked)
    for N, M, E, F in ((5, 9, 3, 2), (n + 1, 2 * n + 3, 64, 7), (1, 1, 1, 1), (4, 0, 3, 2)):
        A, Bk, C = c.randn((N, E)), c.randn((M, E)), c.randn((M, F))
        mask = np.arange(M)[None, :] + 2 > np.arange(N)[:, None]
        O, mag = ref(A, Bk, C, 0.25, mask)
        c.case('attention user chain N%d M%d E%d F%d' % (N, M, E, F), [('A', A), ('Bk', Bk), ('C', C)],
               USER + 'R = myattn(A, Bk, C)',
               [c.out('R', c.F32, O, ('terms', tol, np.broadcast_to(mag, O.shape)))])

    # chains that must not fuse, still right
    for S, T, D in ((6, 11, 5), (n + 1, n - 1, 64)):
        Q, K, V = c.randn((S, D)), c.randn((T, D)), c.randn((T, D))
        O, mag = ref(Q, K, V, 1 / np.sqrt(np.float32(D)))
        a = np.asarray(Q, np.float64) @ np.asarray(K, np.float64).T / np.sqrt(np.float32(D))
        amag = np.abs(np.asarray(Q, np.float64)) @ np.abs(np.asarray(K, np.float64)).T / np.sqrt(np.float32(D))
        c.case('attention scores returned S%d T%d D%d' % (S, T, D), [('Q', Q), ('K', K), ('V', V)],
               USER + '(O, a) = withscores(Q, K, V)',
               [c.out('O', c.F32, O, ('terms', tol, np.broadcast_to(mag, O.shape))),
                c.out('a', c.F32, a, ('terms', 1e-5, amag))])
        Q = c.randn((S, D), 0.3)
        O, mag = ref(Q, K, V, 1.0, colmax=True)
        c.case('attention max over s S%d T%d D%d' % (S, T, D), [('Q', Q), ('K', K), ('V', V)],
               USER + 'O = colmax(Q, K, V)',
               [c.out('O', c.F32, O, ('terms', tol, np.broadcast_to(mag, O.shape)))])
