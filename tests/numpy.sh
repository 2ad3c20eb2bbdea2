#!/bin/sh
# numpy.sh -- numeric comparisons of dyn against NumPy: tests/numpy/compare.py runs dyn on
# scripts over random .npy inputs (fixed seed) and checks every result against a float64
# NumPy reference.  Skips (77) without a Python that has NumPy.  $NUMPY_SCRIPT names another
# script of tests/numpy that uses compare.py's runner (conv-numpy.sh's conv.py).
# Uses $PYTHON_NUMPY, else /usr/bin/python3, else python3; dyn is $top_builddir/dyn (default:
# the repository root's).  Scratch files go to a mktemp -d folder, removed at the end.

srcdir_=$(cd "$(dirname "$0")" && pwd)
top_builddir=${top_builddir:-$srcdir_/..}
dyn=$top_builddir/dyn

py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy; numpy.zeros(1)' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "numpy.sh: no Python with NumPy; skipped"
  exit 77
fi
if [ ! -x "$dyn" ]; then
  echo "numpy.sh: $dyn is not built"
  exit 99
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/dyn-numpy.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

"$py" "$srcdir_/numpy/${NUMPY_SCRIPT:-compare.py}" "$dyn" "$dir"
