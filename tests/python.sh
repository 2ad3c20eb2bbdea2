#!/bin/sh
# python.sh -- the Python module dyn (python/dyn) from the build tree: tests/python/test_dyn.py
# with the library just built ($DYN_LIBRARY) and NumPy; its PyTorch part runs where torch is
# installed.  Skips (77) without a Python that has NumPy, or without the shared library
# (a build with --disable-shared).
srcdir_=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$srcdir_/..}
top_builddir=${top_builddir:-$top_srcdir}
py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy; numpy.zeros(1)' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "python.sh: no Python with NumPy; skipped"
  exit 77
fi
lib=$top_builddir/.libs/libdyn.so.0
if [ ! -f "$lib" ]; then
  echo "python.sh: $lib is not built (configure --disable-shared?); skipped"
  exit 77
fi
cd "$top_builddir" || exit 99
DYN_LIBRARY=$lib PYTHONPATH=$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH} DYN_HW_DIR=$top_srcdir/hw \
  exec "$py" "$srcdir_/python/test_dyn.py"
