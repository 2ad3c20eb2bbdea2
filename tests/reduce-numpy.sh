#!/bin/sh
# reduce-numpy.sh -- sums over every subset of the axes of rank 2 to 4 tensors against
# NumPy, in a function and at top level, f32, f64 and integers, at awkward extents and with
# inputs read in place in Fortran order (tests/numpy/reduce.py), on every back end, through
# numpy.sh's runner.  First, where the compiled back end is built: a column sum whose reduced
# extent is split over the threads, and a sum of short kept runs read in whole vectors
# (runs of 7, alone and split), and row sums of short rows, a row in each lane of a gather (7)
# or each row in a vector of partials (37), a folded plan (runs of 19 under another reduced
# axis, W results at a time) and column sums of 7 rows in registers give the same bytes on
# 1, 2 and 3 threads, under the host's model and zen3's (the pieces and the lanes follow the
# model, never the threads).  Skips (77) without a Python that has NumPy.
srcdir_=$(cd "$(dirname "$0")" && pwd)
dyn=${top_builddir:-$srcdir_/..}/dyn
if [ -x "$dyn" ] && [ "$("$dyn" --target=cpu -e ':target' 2>/dev/null)" = "target: cpu" ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/dyn-reduce.XXXXXX") || exit 99
  for hw in host zen3; do
    cat > "$dir/split.dyn" <<EOD
:hw $hw
fn cs(X: f32[D0, D1]) -> f32[D1] {
  Y[i1] = sum[i0] X[i0, i1]
  return Y
}
fn mx(X: f64[D0, D1, D2]) -> f64[D2] {
  Y[i2] = max[i0, i1] X[i0, i1, i2]
  return Y
}
fn sr(X: f32[D0, D1, D2]) -> f32[D0, D2] {
  Y[i0, i2] = sum[i1] X[i0, i1, i2]
  return Y
}
fn rs(X: f32[D0, D1]) -> f32[D0] {
  Y[i0] = sum[i1] X[i0, i1]
  return Y
}
fn fo(X: f32[D0, D1, D2, D3]) -> f32[D1, D2] {
  Y[i1, i2] = sum[i0, i3] X[i0, i1, i2, i3]
  return Y
}
X = randn(f32[6007, 17])
save(cs(X), "cs.npy")
save(mx(randn(f64[131, 97, 9])), "mx.npy")
save(sr(randn(f32[5, 1021, 7])), "sr.npy")
save(cs(randn(f32[6007, 7])), "cs7.npy")
save(rs(randn(f32[6007, 7])), "rs7.npy")
save(rs(randn(f32[6007, 37])), "rs37.npy")
save(fo(randn(f32[13, 37, 19, 19])), "fo.npy")
save(cs(randn(f32[7, 20011])), "cw.npy")
:sched cs D0=6007 D1=17
:sched sr D0=5 D1=1021 D2=7
:sched rs D0=6007 D1=7
EOD
    for t in 1 2 3; do
      (cd "$dir" && "$dyn" --target=cpu --threads=$t split.dyn > sched.txt 2>&1) || { cat "$dir/sched.txt"; rm -rf "$dir"; exit 1; }
      grep -q 'split: i0 in' "$dir/sched.txt" || { echo "FAIL: --hw=$hw: the column sum is not split:"; cat "$dir/sched.txt"; rm -rf "$dir"; exit 1; }
      grep -q 'short kept runs of i2' "$dir/sched.txt" || { echo "FAIL: --hw=$hw: the sum of runs of 7 is not read in vectors:"; cat "$dir/sched.txt"; rm -rf "$dir"; exit 1; }
      grep -q 'short reduced runs of i1' "$dir/sched.txt" || { echo "FAIL: --hw=$hw: the rows of 7 are not summed in a gather's lanes:"; cat "$dir/sched.txt"; rm -rf "$dir"; exit 1; }
      for f in cs mx sr cs7 rs7 rs37 fo cw; do
        if [ $t = 1 ]; then mv "$dir/$f.npy" "$dir/$f.1"
        elif ! cmp -s "$dir/$f.npy" "$dir/$f.1"; then
          echo "FAIL: --hw=$hw: $f's result on $t threads differs from one thread's"; rm -rf "$dir"; exit 1
        fi
      done
    done
    echo "PASS: --hw=$hw: split reductions, short kept runs and short rows (7 and 37), a folded plan and few rows' column sums give the same bytes on 1, 2 and 3 threads"
  done
  rm -rf "$dir"
fi
NUMPY_SCRIPT=reduce.py exec "$srcdir_/numpy.sh"
