#!/bin/sh
# npy-numpy.sh -- checks dyn's .npy files against NumPy itself: files dyn writes load in NumPy
# with equal values, files NumPy writes (C and Fortran order, format 1.0, 2.0, 3.0) load in
# dyn bit for bit, every integer width and both byte orders load as the dyn type that holds
# them (and a u64 beyond i64 is refused), and dyn's printed form matches NumPy's layout (edge items, wrapping,
# blank lines) when NumPy is given dyn's element format.  Skips (77) without Python+NumPy.
# Uses $NPY_TOOL, else $top_builddir/tests/unit/npy_tool; $PYTHON_NUMPY, else python3.

top_builddir=${top_builddir:-.}
tool=${NPY_TOOL:-$top_builddir/tests/unit/npy_tool}
py=${PYTHON_NUMPY:-}
if [ -z "$py" ]; then
  for p in /usr/bin/python3 python3; do
    if "$p" -c 'import numpy' >/dev/null 2>&1; then py=$p; break; fi
  done
fi
if [ -z "$py" ] || ! "$py" -c 'import numpy' >/dev/null 2>&1; then
  echo "npy-numpy.sh: no Python with NumPy; skipped"
  exit 77
fi
if [ ! -x "$tool" ]; then
  echo "npy-numpy.sh: $tool is not built; skipped"
  exit 77
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/dyn-npy.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT

"$py" - "$tool" "$dir" "$top_builddir/dyn" <<'EOF'
import subprocess, sys
import numpy as np

tool, d, dynbin = sys.argv[1], sys.argv[2], sys.argv[3]
names = {np.float32: 'f32', np.float64: 'f64', np.int32: 'i32', np.int64: 'i64',
         np.bool_: 'bool'}
failures = 0

def fail(msg):
    global failures
    failures += 1
    print('FAIL:', msg)

def run(*args):
    return subprocess.run([tool, *args], capture_output=True, text=True)

def word(x, kind):
    if kind == 'b':
        return 'true' if x else 'false'
    if kind == 'i':
        return str(int(x))
    x = float(x)
    if np.isnan(x):
        return 'nan'
    if np.isinf(x):
        return 'inf' if x > 0 else '-inf'
    return '%.6g' % x

def expected(a):
    """dyn's print form, built from NumPy's own array2string layout."""
    kind = a.dtype.kind
    ty = names[a.dtype.type]
    if a.ndim:
        ty += '[' + ', '.join(str(n) for n in a.shape) + ']'
    if a.ndim == 0:
        return ty + ' ' + word(a[()], kind)
    shown = a
    if a.size > 1000:
        for ax in range(a.ndim):
            if a.shape[ax] > 6:
                shown = np.take(shown, [0, 1, 2, -3, -2, -1], axis=ax)
    width = max(len(word(x, kind)) for x in shown.flat)
    body = np.array2string(a, max_line_width=75, separator=', ', threshold=1000,
                           edgeitems=3, formatter={'all': lambda x: word(x, kind).rjust(width)})
    return ty + '\n' + body

# 1. dyn writes, NumPy reads.
shapes = [(), (5,), (2, 3), (2, 3, 4), (1, 2, 3, 4), (0,), (3, 0), (2, 1, 0, 2)]
for ty, dt in [('f32', np.float32), ('f64', np.float64), ('i32', np.int32),
               ('i64', np.int64), ('bool', np.bool_)]:
    for shape in shapes:
        path = '%s/w_%s_%d.npy' % (d, ty, len(shape))
        r = run('write', ty, *[str(n) for n in shape], path)
        if r.returncode:
            fail('write %s %s: %s' % (ty, shape, r.stderr))
            continue
        a = np.load(path)
        n = int(np.prod(shape))
        want = (np.arange(n) % 2 == 1) if dt is np.bool_ else np.arange(n).astype(dt)
        want = want.reshape(shape)
        if a.dtype != np.dtype(dt) or a.shape != shape or not np.array_equal(a, want):
            fail('dyn wrote %s %s, NumPy read %s %s %r' % (ty, shape, a.dtype, a.shape, a))
        with open(path, 'rb') as f:
            version = np.lib.format.read_magic(f)
            np.lib.format.read_array_header_1_0(f)
            if version != (1, 0) or f.tell() % 64:
                fail('%s: version %s, data at %d' % (path, version, f.tell()))

# 2. NumPy writes, dyn reads (exact bytes through `copy`, and the printed form).
rng = np.random.default_rng(7)

def sample(dt, shape):
    n = int(np.prod(shape))
    if dt is np.bool_:
        return (rng.random(n) < 0.5).reshape(shape)
    if dt in (np.int32, np.int64):
        big = rng.integers(-2**31, 2**31 - 1, n) if dt is np.int32 else \
            rng.integers(-2**62, 2**62, n)
        small = rng.integers(-50, 1000, n)
        return np.where(rng.random(n) < 0.1, big, small).astype(dt).reshape(shape)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-7, 12, n)
    x = np.where(rng.random(n) < 0.5, np.round(x, 2), x)
    special = rng.random(n)
    x = np.where(special < 0.02, np.nan, x)
    x = np.where((special >= 0.02) & (special < 0.04), np.where(x < 0, -np.inf, np.inf), x)
    return x.astype(dt).reshape(shape)

cases = [(), (1,), (7,), (40,), (1000,), (1001,), (2000,), (3, 4), (12, 9), (3, 400),
         (100, 100), (7, 150), (2, 3, 4), (20, 20, 20), (4, 3, 2, 2), (2, 3, 4, 5, 6),
         (1, 1, 1), (9, 1, 120)]
k = 0
for dt in names:
    for shape in cases:
        a = sample(dt, shape)
        variants = [('c', a, (1, 0)), ('v2', a, (2, 0)), ('v3', a, (3, 0))]
        if a.ndim >= 2:
            variants.append(('f', np.asfortranarray(a), (1, 0)))
        for tag, arr, version in variants:
            k += 1
            src, dst = '%s/n%d_%s.npy' % (d, k, tag), '%s/n%d_%s_out.npy' % (d, k, tag)
            with open(src, 'wb') as f:
                np.lib.format.write_array(f, arr, version=version)
            r = run('copy', src, dst)
            if r.returncode:
                fail('copy %s %s %s: %s' % (names[dt], shape, tag, r.stderr))
                continue
            b = np.load(dst)
            if b.dtype != a.dtype or b.shape != a.shape or \
                    np.ascontiguousarray(a).tobytes() != b.tobytes():
                fail('NumPy wrote %s %s (%s); dyn read it differently' % (a.dtype, shape, tag))
            if tag != 'c':
                continue
            r = run('dump', src)
            want = expected(a)
            if r.returncode or r.stdout != want + '\n':
                fail('print of %s %s:\n--- dyn\n%s--- want\n%s' % (a.dtype, shape, r.stdout
                                                                    + r.stderr, want))

# 3. Every width and byte order NumPy writes: dyn holds each in the type that keeps every
# value (i1 i2 u1 u2 in i32, u4 u8 in i64, floats (f2 in f16) and bools as they are), swapped from
# big-endian, in C and Fortran order; the values over each type's whole range, u8 up to the
# i64 limit.
widen = {'i1': np.int32, 'i2': np.int32, 'i4': np.int32, 'i8': np.int64, 'u1': np.int32,
         'u2': np.int32, 'u4': np.int64, 'u8': np.int64, 'f2': np.float16, 'f4': np.float32, 'f8': np.float64,
         'b1': np.bool_}
for code, target in widen.items():
    for order in ('<', '>'):
        dt = np.dtype(order + code)
        for shape in [(), (1,), (13,), (3, 5), (2, 3, 7), (0, 4)]:
            n = int(np.prod(shape))
            if dt.kind in 'iu':
                info = np.iinfo(dt)
                hi = min(int(info.max), 2**63 - 1)
                v = rng.integers(int(info.min), hi, n, dtype=np.int64 if dt.kind == 'i' or code != 'u8' else np.uint64, endpoint=True)
                if n >= 2:
                    v[0], v[-1] = info.min, hi
                a = v.astype(dt).reshape(shape)
            else:
                a = sample(target, shape).astype(dt)
            for tag, arr in [('c', a)] + ([('f', np.asfortranarray(a))] if a.ndim >= 2 else []):
                k += 1
                src, dst = '%s/w%d_%s.npy' % (d, k, tag), '%s/w%d_%s_out.npy' % (d, k, tag)
                np.save(src, arr)
                r = run('copy', src, dst)
                if r.returncode:
                    fail('copy %s %s %s: %s' % (dt.str, shape, tag, r.stderr))
                    continue
                b = np.load(dst)
                want = a.astype(target)
                if b.dtype != np.dtype(target) or b.shape != a.shape or \
                        want.tobytes() != np.ascontiguousarray(b).tobytes():
                    fail('NumPy wrote %s %s (%s); dyn read %s %r' % (dt.str, shape, tag, b.dtype, b))

# 4. NumPy files dyn must refuse, with the reason (and for a value, where it is).
over = np.array([[1, 2, 3], [4, 2**63, 6]], dtype='>u8')
refuse = [(over, 'the u64 value 9223372036854775808 at [1, 1] is above the i64 range'),
          (np.asfortranarray(over), 'the u64 value 9223372036854775808 at [1, 1] is above the i64 range'),
          (np.arange(3, dtype=np.complex64), "unsupported dtype '<c8'"),
          (np.zeros(2, dtype=[('x', '<f4')]), 'structured arrays')]
for i, (arr, msg) in enumerate(refuse):
    path = '%s/bad%d.npy' % (d, i)
    np.save(path, arr)
    r = run('dump', path)
    if r.returncode != 1 or msg not in r.stderr or path not in r.stderr:
        fail('%s: expected an error with %r, got %r' % (arr.dtype, msg, r.stderr))

# 5. .npz archives (zlib): NumPy's savez and savez_compressed (zip64 local headers), members
# of several types and byte orders, load by name; dyn's save of several arrays reads back in
# NumPy with its members named after the variables; corrupt archives are refused with a
# message naming the problem, never a crash.
import zipfile
def dyn(code):
    return subprocess.run([dynbin, '-e', code], capture_output=True, text=True, cwd=d)
probe = dyn('save(i32([1]), "probe.npz")')
if 'built without' in probe.stderr:
    if 'zlib' not in probe.stderr or probe.returncode != 1:
        fail('without zlib, .npz is not refused clearly: %r' % probe.stderr)
    print('npy-numpy.sh: dyn is built without zlib: .npz not compared')
else:
    arrays = {'W': sample(np.float32, (13, 7)), 'b': np.arange(-5, 6, dtype='>i2'),
              'mask': sample(np.bool_, (4, 3)), 'big': sample(np.float64, (3, 1001)).astype('>f8'),
              'F': np.asfortranarray(sample(np.int64, (5, 3)))}
    for tag, saver in [('stored', np.savez), ('deflated', np.savez_compressed)]:
        saver('%s/%s.npz' % (d, tag), **arrays)
        for name, a in arrays.items():
            r = dyn('save(load("%s.npz", "%s"), "%s_%s.npy")' % (tag, name, tag, name))
            if r.returncode:
                fail('load %s.npz %s: %s' % (tag, name, r.stderr)); continue
            b = np.load('%s/%s_%s.npy' % (d, tag, name))
            if b.shape != a.shape or not np.array_equal(b, a.astype(b.dtype), equal_nan=a.dtype.kind == 'f'):
                fail('%s.npz member %s: dyn read %r' % (tag, name, b))
    r = dyn('W = load("stored.npz", "W")\nb = load("deflated.npz", "b")\nsave(W, b, W * 2.0, "mine.npz")')
    if r.returncode:
        fail('save several arrays: %s' % r.stderr)
    else:
        z = np.load('%s/mine.npz' % d)
        if sorted(z.files) != ['W', 'arr_2', 'b'] or not np.array_equal(z['W'], arrays['W'], equal_nan=True) or \
                not np.array_equal(z['arr_2'], arrays['W'] * 2, equal_nan=True) or not np.array_equal(z['b'], arrays['b']):
            fail('dyn saved %s' % {k: z[k] for k in z.files})
        if zipfile.ZipFile('%s/mine.npz' % d).testzip() is not None:
            fail('zipfile finds a bad CRC in what dyn wrote')
    for code, msg in [('x = load("stored.npz")', 'holds 5 arrays'),
                      ('x = load("stored.npz", "nope")', "no array 'nope'"),
                      ('x = load("a.npy", "W")', 'is for a .npz file')]:
        r = dyn(code)
        if r.returncode != 1 or msg not in r.stderr:
            fail('%s: expected %r, got %r' % (code, msg, r.stderr))
    # corruptions of a deflated archive of one array
    np.savez_compressed('%s/one.npz' % d, x=np.arange(1000, dtype=np.float32))
    good = open('%s/one.npz' % d, 'rb').read()
    zf = zipfile.ZipFile('%s/one.npz' % d)
    info = zf.infolist()[0]
    data_at = info.header_offset + 30 + len(info.filename) + len(info.extra)
    cd = good.rindex(b'PK\x01\x02')
    def patched(at, new):
        return good[:at] + new + good[at + len(new):]
    flipped = bytearray(good); flipped[data_at + info.compress_size // 2] ^= 0x55
    crc_bad = bytearray(good); crc_bad[cd + 16] ^= 1
    cases = [('truncated', good[:len(good) // 2], 'not a valid .npz'),
             ('no end record', good[:-22], 'no end of central directory'),
             ('bad crc', bytes(crc_bad), 'does not match its CRC-32'),
             ('bad data', bytes(flipped), 'x.npy: '),
             ('huge size', patched(cd + 24, (0xfffffff0).to_bytes(4, 'little')), 'cannot inflate to'),
             ('huge offset', patched(cd + 42, (0x7ffffff0).to_bytes(4, 'little')), 'bad local header'),
             ('huge count', patched(len(good) - 22 + 10, (0xfff0).to_bytes(2, 'little')), 'more entries'),
             ('empty', b'', 'too short'),
             ('not zip', b'\x93NUMPY' + b'\0' * 100, 'no end of central directory')]
    for name, blob, msg in cases:
        open('%s/bad.npz' % d, 'wb').write(blob)
        r = dyn('x = load("bad.npz")')
        if r.returncode != 1 or msg not in r.stderr or 'bad.npz' not in r.stderr:
            fail('corrupt .npz (%s): expected an error with %r, got %r (status %d)' % (name, msg, r.stderr, r.returncode))

print('npy-numpy.sh: %d files compared, %d failures' % (k, failures))
sys.exit(1 if failures else 0)
EOF
