# bench_torch.py -- the PyTorch contender of `make bench`: a worker process that bench.c
# starts (python bench_torch.py --threads N --budget S) and drives over the same protocol as
# its own workers (commands on standard input, answers "ok ..." on descriptor 3; see the
# comment above worker_main in bench.c).  Each line's statement is written as a user would
# write it in PyTorch, on the same pseudo-random data as every other contender, and timed as
# bench.c times its own (warm-up, batches of calls under 1 ms, the median of the samples).
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

SAMPLE_S = 1e-3


def rand_floats(counts):
    """The arrays bench.c's fill() makes from seed 1, one after the other: its linear
    congruential generator, jumped ahead in doubling blocks so that NumPy makes millions at once."""
    total = sum(counts)
    mask = np.uint64(0xFFFFFFFF)
    a, c = np.uint64(1103515245), np.uint64(12345)
    seq = np.array([(1 * 1103515245 + 12345) & 0xFFFFFFFF], dtype=np.uint64)
    # seq[i] is the state after i + 1 steps; a block of length L is followed by the next
    # block as A_L * x + C_L, with A_L = a^L and C_L = c (a^(L-1) + ... + 1), all mod 2^32
    mul, add = a, c
    while len(seq) < total:
        seq = np.concatenate([seq, (seq * mul + add) & mask])
        mul, add = (mul * mul) & mask, (mul * add + add) & mask
    vals = (((seq[:total] >> np.uint64(8)) & np.uint64(0xFFFF)).astype(np.float32) / np.float32(65536.0)
            - np.float32(0.5))
    out, at = [], 0
    for n in counts:
        out.append(vals[at:at + n])
        at += n
    return out


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def prepare(words):
    """The line's call, as a function of no arguments returning its result."""
    op, rest = words[0], words[1:]
    spec = None
    if op in ("permute", "sum"):
        spec, rest = [int(ch) for ch in rest[0]], rest[1:]
    d = [int(w) for w in rest]
    if op in ("matmul", "bmm", "attention", "causal", "conv", "dwconv", "permute", "sum"):
        if op == "matmul":
            m, n, k = d
            shapes = [(m, k), (k, n)]
        elif op == "bmm":
            b, m, n, k = d
            shapes = [(b, m, k), (b, k, n)]
        elif op in ("attention", "causal"):
            b, s, tt, e = d
            shapes = [(b, s, e), (b, tt, e), (b, tt, e)]
        elif op == "conv":
            n, c, h, w, f, k, st, pad = d
            shapes = [(n, c, h, w), (f, c, k, k)]
        elif op == "dwconv":
            n, c, h, w, k, st, pad = d
            shapes = [(n, c, h, w), (c, k, k)]
        else:
            shapes = [tuple(d)]
    else:
        r, c = d
        shapes = {"layernorm": [(r, c), (c,), (c,)], "rmsnorm": [(r, c), (c,)],
                  "chain": [(r, c), (c,), (r, c)]}.get(op, [(r, c)])
    arrays = rand_floats([prod(s) for s in shapes])
    t = [torch.from_numpy(a.copy()).reshape(sh) for a, sh in zip(arrays, shapes)]
    if op == "matmul":
        A, B = t
        return lambda: A @ B
    if op == "bmm":
        A, B = t
        return lambda: torch.bmm(A, B)
    if op == "softmax":
        X, = t
        return lambda: torch.softmax(X, -1)
    if op == "layernorm":
        X, g, b = t
        return lambda: F.layer_norm(X, (X.shape[-1],), g, b, 1e-5)
    if op == "rmsnorm":
        X, g = t
        return lambda: X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + 1e-5) * g
    if op == "gelu":
        X, = t
        return lambda: F.gelu(X, approximate="tanh")
    if op == "silu":
        X, = t
        return lambda: F.silu(X)
    if op == "chain":
        X, bias, R = t
        return lambda: F.silu(X + bias) + R
    if op == "transpose":
        X, = t
        return lambda: X.t().contiguous()
    if op == "permute":
        X, = t
        return lambda: X.permute(*spec).contiguous()
    if op == "sum":
        X, = t
        axes = tuple(spec)
        return lambda: X.sum(dim=axes)
    if op == "conv":
        X, W = t
        return lambda: F.conv2d(X, W, stride=st, padding=pad)
    if op == "dwconv":
        X, W = t
        W = W.reshape(c, 1, k, k)
        return lambda: F.conv2d(X, W, stride=st, padding=pad, groups=c)
    if op in ("attention", "causal"):
        Q, K, V = t
        scale = math.sqrt(e)
        if op == "attention":
            return lambda: torch.softmax(Q @ K.transpose(-2, -1) / scale, -1) @ V
        mask = torch.ones(s, tt, dtype=torch.bool).triu(1)
        return lambda: torch.softmax((Q @ K.transpose(-2, -1) / scale).masked_fill(mask, float("-inf")), -1) @ V
    raise SystemExit("bench_torch: unknown op " + op)


def timeit(fn, budget):
    """bench.c's timeit: warm-up, then the median of batched samples within the budget."""
    t0, first = time.perf_counter(), 0.0
    for w in range(3):
        if w and time.perf_counter() - t0 >= budget / 4:
            break
        t1 = time.perf_counter()
        fn()
        first = time.perf_counter() - t1
    reps = 1
    if first < SAMPLE_S:
        t0 = time.perf_counter()
        for _ in range(10):
            fn()
        one = (time.perf_counter() - t0) / 10
        reps = max(1, min(10000, int(SAMPLE_S / one))) if one > 0 else 10000
    samples = []
    start = time.perf_counter()
    while len(samples) < 200 and (len(samples) < 3 or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps)
    samples.sort()
    return samples[len(samples) // 2]


def machine_cpu_s():
    """CPU seconds every process has run, as bench.c reads them; -1 without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return -1.0
    if len(v) < 8:
        return -1.0
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def main():
    args = sys.argv[1:]
    threads = int(args[args.index("--threads") + 1]) if "--threads" in args else 2
    torch.set_num_threads(threads)
    answers = os.fdopen(3, "w")

    def answer(text=""):
        sys.stdout.flush()
        answers.write("ok " + text + "\n" if text else "ok\n")
        answers.flush()

    fn = None
    with torch.inference_mode():
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "hello":
                answer("PyTorch %s, %d threads, Python %d.%d" % (torch.__version__, torch.get_num_threads(),
                                                                  sys.version_info[0], sys.version_info[1]))
            elif words[0] == "intro":
                answer()
            elif words[0] == "time":
                if fn is None:
                    raise SystemExit("bench_torch: time before a line")
                m0, c0, w0 = machine_cpu_s(), time.process_time(), time.perf_counter()
                t = timeit(fn, float(words[1]))
                m1, c1, w1 = machine_cpu_s(), time.process_time(), time.perf_counter()
                other = -1 if m0 < 0 or m1 < 0 else m1 - m0 - (c1 - c0)
                answer("%.9g %.6g %.6g" % (t, other, w1 - w0))
            elif words[0] == "dump":
                out = fn().contiguous().numpy().astype(np.float32)
                out.tofile(words[1])
                answer("%d" % out.size)
            elif words[0] == "free":
                fn = None
                answer()
            else:
                fn = prepare(words)
                answer("0")


if __name__ == "__main__":
    main()
