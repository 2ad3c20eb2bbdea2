#!/bin/sh
# stdlib.sh -- every standard-library function against a float64 NumPy reference:
# tests/stdlib/compare.py runs dyn on each function at random shapes (1, primes, random; fixed
# seed) and compares (relative to the largest magnitude, 1e-5 for f32; exact for selections
# and indices).  Skips (77) without a Python that has NumPy.
# Uses $PYTHON_NUMPY, else /usr/bin/python3, else python3; dyn is $top_builddir/dyn (default:
# the repository root's).  Scratch files go to a mktemp -d folder, removed at the end.

srcdir_=$(cd "$(dirname "$0")" && pwd)
top_builddir=${top_builddir:-$srcdir_/..}
dyn=$top_builddir/dyn

py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "stdlib.sh: no Python with NumPy; skipped"
  exit 77
fi
if [ ! -x "$dyn" ]; then
  echo "stdlib.sh: $dyn is not built"
  exit 99
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/dyn-stdlib.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

"$py" "$srcdir_/stdlib/compare.py" "$dyn" "$dir" "$@"
