"""test_dyn.py -- the Python module dyn (python/dyn) against NumPy and PyTorch: results on
random data at awkward shapes (0, 1, primes), arguments read in place (contiguous and
strided -- steps, transposes, negative and zero strides -- with no byte gathered, and written
through between calls), results owned by their arrays until collected,
errors as dyn.Error with places and notes, :time and :sched as dicts, two sessions on two
threads.  A plain script: each test prints its name; any failure ends it with status 1.
PyTorch's part is skipped where torch is not installed.
"""
import contextlib
import gc
import io
import sys
import threading

import numpy as np

import dyn

RNG = np.random.default_rng(20240611)
PASSED = []


def test(fn):
    fn()
    PASSED.append(fn.__name__)
    print("ok", fn.__name__)
    return fn


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


S = dyn.Session(threads=2)
S.run("""
fn twice(x: f32[N]) -> f32[N] {
  y[i] = x[i] * 2.0
  return y
}
fn stats(x: f64[M, N]) -> (f64[M], f64[N]) {
  r[i] = sum[j] x[i, j]
  c[j] = max[i] x[i, j]
  return (r, c)
}
fn pad(x: i64[N], P: size) -> i64[N + P] {
  y[i] = where(i < N, x[min(i, N - 1)], 0)
  return y
}
fn mix(a: f32[M, N], b: f32[M, N]) -> (f32[M, N], f32[M], f32[M, M]) {
  y[i, j] = a[i, j] * 2.0 - exp(b[i, j])
  r[i] = sum[j] a[i, j] * b[i, j]
  g[i, k] = sum[j] a[i, j] * b[k, j]
  return (y, r, g)
}
fn positive(x: f32[N]) -> bool[N] {
  y[i] = x[i] > 0.0
  return y
}
""", "defs.dyn")


@test
def matmul_matches_numpy():
    f = S["matmul"]
    for m, k, n in [(1, 1, 1), (7, 13, 5), (0, 3, 4), (3, 0, 4), (17, 1, 31), (8, 8, 8), (37, 29, 41)]:
        a, b = rand(m, k), rand(k, n)
        c = f(a, b)
        assert c.shape == (m, n) and c.dtype == np.float32, (c.shape, c.dtype)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@test
def strided_arguments_read_in_place():
    f = S["matmul"]
    big = rand(20, 30)
    a = big[1:15:2, 3:25:3]          # steps on both axes
    b = rand(11, 8).T                # a transpose: strides (4, 32)
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    np.testing.assert_allclose(f(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    rev = rand(9)[::-1]              # negative strides
    np.testing.assert_allclose(S["twice"](rev), rev * 2, rtol=0)


def views(m, n):
    """(name, view) pairs of shape (m, n): each layout NumPy makes without a copy."""
    big = rand(2 * m + 5, 2 * n + 7)
    t = rand(n, m)
    return [("X[:, ::2]", big[:m, ::2][:, :n]), ("X.T", t.T), ("X[::-1]", big[:m, :n][::-1]),
            ("X[:, ::-1]", big[:m, :n][:, ::-1]), ("slice", big[3:3 + m, 5:5 + n]),
            ("broadcast row", np.broadcast_to(big[0, :n], (m, n))),
            ("broadcast column", np.broadcast_to(big[:m, :1], (m, n))),
            ("X.T[::-1, ::-1]", t.T[::-1, ::-1])]


@test
def strided_views_match_numpy_with_no_copy():
    f = S["mix"]
    for m, n in [(1, 1), (0, 4), (4, 0), (7, 13), (17, 33), (3, 64)]:
        vs = views(m, n)
        for (name_a, a), (name_b, b) in zip(vs, vs[::-1]):
            y, r, g = f(a, b)
            assert S.gathered_bytes() == 0, (name_a, name_b, S.gathered_bytes())
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            what = "%s, %s at %dx%d" % (name_a, name_b, m, n)
            np.testing.assert_allclose(y, a64 * 2 - np.exp(b64), rtol=1e-5, atol=1e-5, err_msg=what)
            np.testing.assert_allclose(r, (a64 * b64).sum(1), rtol=1e-4, atol=1e-4, err_msg=what)
            np.testing.assert_allclose(g, a64 @ b64.T, rtol=1e-4, atol=1e-4, err_msg=what)
            c = S["matmul"](a, b.T)
            assert S.gathered_bytes() == 0, (name_a, name_b, S.gathered_bytes())
            np.testing.assert_allclose(c, a64 @ b64.T, rtol=1e-4, atol=1e-4, err_msg=what)


@test
def no_copy_on_the_way_in():
    t = S["twice"]
    x = np.arange(10, dtype=np.float32)
    view = x[::3]
    for round_ in range(3):
        np.testing.assert_array_equal(t(x), x * 2)
        np.testing.assert_array_equal(t(view), view * 2)
        assert S.gathered_bytes() == 0       # the view was read where it is
        x[0] = 100 + round_          # written through the array (and so through view)
        x[9] = -round_
    np.testing.assert_array_equal(t(view), np.array([2 * 102, 6, 12, 2 * -2], np.float32))
    ro = np.arange(5, dtype=np.float32)
    ro.flags.writeable = False       # read-only arrays go in place too
    np.testing.assert_array_equal(t(ro), ro * 2)


@test
def results_own_their_memory_until_collected():
    gc.collect()
    base = dyn.live_results()
    y = S["twice"](np.ones(1000, np.float32))
    assert dyn.live_results() == base + 1
    assert not y.flags.owndata       # NumPy's array is a view of dyn's buffer, not a copy
    z = y[10:20]                     # a view keeps the result alive
    del y
    gc.collect()
    assert dyn.live_results() == base + 1
    np.testing.assert_array_equal(z, 2)
    del z
    gc.collect()
    assert dyn.live_results() == base, dyn.live_results()
    r, c = S["stats"](rand(3, 4, dtype=np.float64))
    assert dyn.live_results() == base + 2
    del r, c
    gc.collect()
    assert dyn.live_results() == base


@test
def tuples_sizes_bools_and_ints():
    x = rand(5, 7, dtype=np.float64)
    r, c = S["stats"](x)
    np.testing.assert_allclose(r, x.sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(c, x.max(axis=0))
    p = S["pad"](np.array([4, 5, 6], np.int64), 2)
    assert p.dtype == np.int64
    np.testing.assert_array_equal(p, [4, 5, 6, 0, 0])
    b = S["positive"](np.array([-1, 0, 2.5], np.float32))
    assert b.dtype == np.bool_
    np.testing.assert_array_equal(b, [False, False, True])
    sig = S["pad"].signature
    assert sig["text"] == "fn pad(x: i64[N], P: size) -> i64[N + P]", sig["text"]
    assert [p["name"] for p in sig["params"]] == ["x", "P"] and sig["params"][1]["is_size"]
    assert sig["results"][0]["dims"] == ["N + P"] and sorted(sig["sizes"]) == ["N", "P"], sig


@test
def errors_carry_places_and_notes():
    try:
        S.run("x = 1\ny = x +* 2\n", "bad.dyn")
        raise AssertionError("no error")
    except dyn.Error as e:
        assert (e.file, e.line, e.column) == ("bad.dyn", 2, 8), (e.file, e.line, e.column)
        assert e.message == "expected an expression, found '*'", e.message
        assert str(e) == "bad.dyn:2:8: expected an expression, found '*'"
    try:
        S["matmul"](rand(2, 3), rand(4, 5))
        raise AssertionError("no error")
    except dyn.Error as e:
        assert e.file is None and e.line is None
        assert e.message.startswith("matmul: "), e.message
        assert e.notes and e.notes[0][0] == "stdlib/linalg.dyn", e.notes
    try:
        S["matmul"](rand(2, 2, dtype=np.float64), rand(2, 2))
        raise AssertionError("no error")
    except dyn.Error as e:
        assert e.message == "matmul: parameter A is f32[M, K] but the argument is f64[2, 2]", e.message
        assert e.code == "E_ARG_TYPE"
        assert e.notes == [("stdlib/linalg.dyn", 4, 11, "parameter A of matmul is declared here")], e.notes
    try:
        S["matmul"](rand(2, 2).astype(np.float16), rand(2, 2))
        raise AssertionError("no error")
    except dyn.Error as e:
        assert e.message == "matmul: parameter A is f32[M, K] but the argument is f16[2, 2]", e.message
    try:
        S["matmul"](rand(2, 2).astype(np.uint16), rand(2, 2))
        raise AssertionError("no error")
    except dyn.Error as e:
        assert "element type dyn does not have" in e.message and "f16, bf16" in e.message, e.message
    try:
        S["nosuch"]
        raise AssertionError("no error")
    except KeyError as e:
        assert "no function named 'nosuch'" in str(e)
    try:
        dyn.Session(target="tpu")
        raise AssertionError("no error")
    except dyn.Error as e:
        assert e.message == "unknown target 'tpu' (cpu, gpu, gpu:tf32, gpu:bf16 or ref)", e.message


@test
def print_goes_to_sys_stdout():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        S.run("print(2 + 3)")
    assert buf.getvalue() == "i64 5\n", repr(buf.getvalue())


@test
def time_and_sched_are_data():
    S.run("A = rand(f32[24, 24])")
    t = S.time("B = matmul(A, A)")
    assert t["runs"] >= 3 and 0 < t["min_ms"] <= t["median_ms"] <= t["max_ms"], t
    assert t["function"] == "matmul" and t["gflops"] > 0 and t["bound"] in ("compute", "memory"), t
    assert t["text"].startswith("time: median"), t["text"]
    sc = S.sched("matmul", M=64, K=64, N=64)
    assert sc["function"] == "matmul" and sc["threads"] == 2, sc
    assert "matmul" in sc["text"]
    try:
        S.sched("matmul", M=64)
        raise AssertionError("no error")
    except dyn.Error as e:
        assert e.message == "give every size of matmul: K is missing", e.message


@test
def two_sessions_on_two_threads():
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            s = dyn.Session(threads=1)
            s.run("fn axpy(a: f32[N], b: f32[N]) -> f32[N] {\n  c[i] = a[i] * 3.0 + b[i]\n  return c\n}")
            f, g = s["axpy"], s["matmul"]
            for _ in range(100):
                n = int(rng.integers(1, 98))
                a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
                np.testing.assert_allclose(f(a, b), a * 3 + b, rtol=1e-5, atol=1e-5)
                m = int(rng.integers(1, 14))
                x, y = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
                np.testing.assert_allclose(g(x, y), x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)
            s.close()
        except Exception as e:       # reported by the main thread
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in (1, 2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def torch_tests(torch):
    @test
    def torch_tensors_in_place():
        f = S["matmul"]
        a, b = torch.randn(6, 11), torch.randn(11, 4)
        c = f(a, b)
        assert isinstance(c, torch.Tensor) and c.shape == (6, 4)
        assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        bt = torch.randn(4, 11).t()          # strided
        assert torch.allclose(f(a, bt), a @ bt, rtol=1e-4, atol=1e-4)
        assert S.gathered_bytes() == 0
        w = torch.randn(11, 13)
        for v in (w.t(), w[:, ::2], w[2:9, 1:12]):     # through DLPack, read in place
            my, mr, mg = S["mix"](v, v)
            assert S.gathered_bytes() == 0
            assert torch.allclose(my, v * 2 - torch.exp(v), rtol=1e-5, atol=1e-5)
            assert torch.allclose(mr, (v * v).sum(1), rtol=1e-4, atol=1e-4)
            assert torch.allclose(mg, v @ v.t(), rtol=1e-4, atol=1e-4)
        del my, mr, mg
        x = torch.arange(6, dtype=torch.float32)
        t = S["twice"]
        assert torch.equal(t(x), x * 2)
        x[2] = 50                            # written through between calls
        assert t(x)[2].item() == 100
        gc.collect()
        base = dyn.live_results()
        y = t(x)
        assert dyn.live_results() == base + 1
        del y
        gc.collect()
        assert dyn.live_results() == base

    @test
    def torch_errors():
        try:
            S["matmul"](torch.randn(2, 2, dtype=torch.float64), torch.randn(2, 2))
            raise AssertionError("no error")
        except dyn.Error as e:
            assert e.message == "matmul: parameter A is f32[M, K] but the argument is f64[2, 2]", e.message


try:
    import torch
except ImportError:
    torch = None
    print("skip: PyTorch is not installed; its tests are skipped")
if torch is not None:
    torch_tests(torch)


@test
def closed_session_fails_cleanly():
    s = dyn.Session(threads=1)
    f = s["matmul"]
    s.close()
    try:
        f(rand(2, 2), rand(2, 2))
        raise AssertionError("no error")
    except dyn.Error as e:
        assert e.message == "the session is closed", e.message


@test
def float16_in_and_out():
    s = dyn.Session(threads=1)
    s.run("""
fn fma16(x: f16[N], y: f16[N]) -> f16[N] {
  z[i] = x[i] * y[i] + 1.0
  return z
}
fn widebf(x: bf16[N]) -> bf16[N] {
  y[i] = x[i] * 2
  return y
}
b = bf16([1, 2.5])
""")
    for n in (0, 1, 7, 1000):
        x = (RNG.standard_normal(n) * 100).astype(np.float16)
        y = RNG.standard_normal(n).astype(np.float16)
        z = s["fma16"](x, y)
        # the product of two f16s is exact in f32, so NumPy's f32 arithmetic is dyn's
        want = (x.astype(np.float32) * y.astype(np.float32) + np.float32(1)).astype(np.float16)
        assert z.dtype == np.float16 and z.shape == (n,), (z.dtype, z.shape)
        np.testing.assert_array_equal(z, want)
    assert s["fma16"].signature["params"][0]["elem"] == "f16"
    for what, call in [("widebf returns bf16", lambda: s["widebf"](np.zeros(2, np.float32))),
                       ("b is bf16", lambda: s.value("b"))]:
        try:
            call()
            raise AssertionError("no error: " + what)
        except dyn.Error as e:
            assert e.message.startswith(what + ", which NumPy has no type for"), e.message


@test
def values_of_bindings_and_interactive_sessions():
    s = dyn.Session(threads=1, interactive=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        s.run("x[i, j]: f64[3, 4] = i * 4 + j\nm = x > 5.5\nx")
    assert "f64[3, 4]" in out.getvalue(), out.getvalue()          # the bare x printed
    assert np.array_equal(s.value("x"), np.arange(12.0).reshape(3, 4))
    m = s.value("m")
    assert m.dtype == np.bool_ and m.sum() == 6
    n0 = dyn.live_results()
    del m
    gc.collect()
    assert dyn.live_results() == n0 - 1
    for name, msg in [("nothing", "nothing is bound to 'nothing'"), ("matmul", "nothing is bound to 'matmul'")]:
        try:
            s.value(name)
            raise AssertionError("no error for " + name)
        except dyn.Error as e:
            assert e.message == msg, e.message
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        S.run("y = [1, 2]\ny")                                     # not interactive: silent
    assert quiet.getvalue() == "", quiet.getvalue()
    s.close()


S.close()
print("%d passed, 0 failed" % len(PASSED))
sys.exit(0)
