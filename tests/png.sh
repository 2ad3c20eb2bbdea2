#!/bin/sh
# save(X, "x.png"): a 2-D tensor as a grey picture, 3-D with 3 or 4 channels last as RGB(A).
# The files are decoded here (zlib and the five PNG row filters, in Python's standard
# library) and every pixel compared with the rule, to a level (f32 rounding at a half): floats in [0, 1] as they are (0 black,
# 1 white), anything else scaled from its least value (black) to its greatest (white).
# Then the errors: not an image's shape, an empty one, a directory that does not exist.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
work=$(mktemp -d "${TMPDIR:-/tmp}/dynpng.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 99
export HOME="$work"
grep -q "define HAVE_PNG 1" "$top_builddir/config.h" 2>/dev/null || {
  "$dyn" -e 'save(zeros(f32[2, 2]), "x.png")' 2>&1 | grep -q 'built without libpng' && { echo "no libpng: the message says so; skipped"; exit 77; }
  echo "FAIL: no libpng and no message"; exit 1; }
py=
for p in /usr/bin/python3 python3; do [ -z "$py" ] && command -v "$p" > /dev/null && py=$p; done
[ -n "$py" ] || { echo "no Python: skipped"; exit 77; }

cat > pics.dyn <<'DYN'
g[i, j]: f32[5, 7] = i * 7 + j
save(g, "grey.png")
save(g / 34.0, "unit.png")
save(g > 17, "mask.png")
n[i, j]: i32[3, 4] = i - j
save(n, "ints.png")
c[i, j, k]: f64[2, 3, 3] = where(k == 0, 1.0, where(k == 1, 0.5, 0.0)) * (i + 1) / 2.0
save(c, "rgb.png")
a[i, j, k]: f32[1, 2, 4] = k / 3.0
save(a, "rgba.png")
z = zeros(f32[4, 4])
save(z, "flat.png")
DYN
"$dyn" pics.dyn > out.txt 2>&1 || { echo "FAIL: dyn pics.dyn"; cat out.txt; exit 1; }

"$py" - <<'PY' || exit 1
import struct, zlib
def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], path
        if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
        if kind == b"IDAT": idat += body
        pos += 12 + n
    w, h, depth, ctype = ihdr[:4]
    assert depth == 8
    ch = {0: 1, 2: 3, 6: 4}[ctype]
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], [0] * (w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], list(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - ch] if x >= ch else 0
            b, c = prev[x], prev[x - ch] if x >= ch else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line); prev = line
    return w, h, ch, rows
def level(v, lo, hi, unit):
    l = v * 255 if unit else (v - lo) * 255 / (hi - lo) if hi > lo else 0
    return max(0, min(255, int(l + 0.5)))
bad = 0
def check(path, want_w, want_h, want_ch, value, lo, hi, unit):
    global bad
    w, h, ch, rows = decode(path)
    if (w, h, ch) != (want_w, want_h, want_ch):
        print("FAIL %s: %dx%dx%d, want %dx%dx%d" % (path, w, h, ch, want_w, want_h, want_ch)); bad += 1; return
    for y in range(h):
        for x in range(w):
            for k in range(ch):
                want = level(value(y, x, k), lo, hi, unit)
                if abs(rows[y][x * ch + k] - want) > 1:   # a level: f32 rounding at a half
                    print("FAIL %s at (%d, %d, %d): %d, want %d" % (path, y, x, k, rows[y][x * ch + k], want)); bad += 1; return
check("grey.png", 7, 5, 1, lambda i, j, k: i * 7 + j, 0, 34, False)
check("unit.png", 7, 5, 1, lambda i, j, k: (i * 7 + j) / 34.0, 0, 1, True)
check("mask.png", 7, 5, 1, lambda i, j, k: 1 if i * 7 + j > 17 else 0, 0, 1, True)
check("ints.png", 4, 3, 1, lambda i, j, k: i - j, -3, 2, False)
check("rgb.png", 3, 2, 3, lambda i, j, k: [1.0, 0.5, 0.0][k] * (i + 1) / 2.0, 0, 1, True)
check("rgba.png", 2, 1, 4, lambda i, j, k: k / 3.0, 0, 1, True)
check("flat.png", 4, 4, 1, lambda i, j, k: 0.0, 0, 1, True)
raise SystemExit(1 if bad else 0)
PY

fail=0
expect() {   # expect STATEMENT MESSAGE
  "$dyn" -e "$1" > err.txt 2>&1
  grep -qF -- "$2" err.txt || { fail=1; echo "FAIL '$1': no '$2' in:"; cat err.txt; }
}
expect 'save(zeros(f32[3]), "v.png")' 'error: v.png: a PNG image is a 2-D tensor (grey) or a 3-D one with 3 or 4 channels last (RGB, RGBA), not a 1-D one'
expect 'save(zeros(f32[2, 2, 5]), "v.png")' 'error: v.png: a PNG image is a 2-D tensor (grey) or a 3-D one with 3 or 4 channels last (RGB, RGBA), not a 3-D one of that many channels'
expect 'save(zeros(f32[0, 3]), "v.png")' 'error: v.png: an image needs at least one row and one column, not 0 x 3'
expect 'save(zeros(f32[2, 2]), "no-such-dir/v.png")' '-e:1:1: error: no-such-dir/v.png: cannot open for writing: No such file or directory'
[ ! -e v.png ] || { fail=1; echo "FAIL: a refused save left v.png"; }
[ $fail = 0 ] && echo "png: all passed"
exit $fail
