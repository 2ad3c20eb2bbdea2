#!/bin/sh
# run-gemm.sh -- build and run the contraction benchmark (bench_gemm.c): dyn against oneDNN
# and OpenBLAS on every line of a shape file, same thread count for all three.
#
# usage: tests/bench/run-gemm.sh [SHAPES.txt] [--threads N] [--csv FILE] [--budget S] [--rounds R]
#   SHAPES.txt defaults to ../shared/bench/gemm.txt relative to the repository root.
#   The binary is built in $BUILD (default: a temporary directory) from the sources with
#   $CC and $LLVM_CONFIG; oneDNN and OpenBLAS columns appear when their headers are found.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
shapes=""
threads=2
csv=gemm-bench.csv
budget=0.3
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) shapes=$1; shift ;;
  esac
done
[ -n "$shapes" ] || shapes="$root/../shared/bench/gemm.txt"
[ -r "$shapes" ] || { echo "run-gemm.sh: cannot read $shapes" >&2; exit 2; }

CC=${CC:-cc}
# The newest LLVM first, as configure does; the engine needs 15 or later (opaque pointers).
if [ -z "${LLVM_CONFIG:-}" ]; then
  for c in llvm-config-19 llvm-config-18 llvm-config-17 llvm-config-16 llvm-config-15 llvm-config; do
    if command -v "$c" >/dev/null 2>&1 && [ "$($c --version | sed 's/\..*//')" -ge 15 ]; then
      LLVM_CONFIG=$c
      break
    fi
  done
fi
[ -n "${LLVM_CONFIG:-}" ] || { echo "run-gemm.sh: no llvm-config for LLVM >= 15" >&2; exit 2; }

if [ -z "${BUILD:-}" ]; then
  BUILD=$(mktemp -d)
  trap 'rm -rf "$BUILD"' EXIT
fi
mkdir -p "$BUILD"
defs="" libs=""
inc_has() { echo "#include <$1>" | $CC -E -x c - >/dev/null 2>&1; }
if inc_has dnnl.h; then defs="$defs -DHAVE_DNNL_H"; libs="$libs -ldnnl"; fi
if inc_has cblas.h; then defs="$defs -DHAVE_CBLAS_H"; libs="$libs -lopenblas"; fi
# The engine comes from the configured tree's convenience library (make builds it), so the
# benchmark links whatever sources the engine is made of today.
lib="${CONFIG_DIR:-$root}/.libs/libdyn_int.a"
[ -r "$lib" ] || { echo "run-gemm.sh: no $lib: run make first" >&2; exit 2; }
# config.h comes from the configured tree (the root, or $CONFIG_DIR for a separate build).
$CC -std=gnu11 -O2 -I"$root/src" -I"${CONFIG_DIR:-$root}" $($LLVM_CONFIG --cflags) $defs \
  -DDYN_SRCDIR="\"$root\"" -DDYN_PKGDATADIR="\"$root\"" \
  "$root/tests/bench/bench_gemm.c" "$lib" \
  $($LLVM_CONFIG --ldflags --libs core orcjit native passes) $libs -lpthread -lm \
  -o "$BUILD/bench_gemm"

# The same threads for everyone.  The environment here may pin OpenBLAS to its Haswell
# kernels (OPENBLAS_CORETYPE=Haswell), which are slower on an AVX-512 CPU: run it with its
# best kernel for this machine instead, and say so.
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
if grep -q avx512f /proc/cpuinfo 2>/dev/null; then
  echo "run-gemm.sh: OPENBLAS_CORETYPE=SkylakeX (was ${OPENBLAS_CORETYPE:-unset})"
  export OPENBLAS_CORETYPE=SkylakeX
fi
export DYN_HW_DIR=${DYN_HW_DIR:-$root/hw}
echo "run-gemm.sh: $shapes, $threads threads, CSV to $csv"
"$BUILD/bench_gemm" --threads "$threads" --csv "$csv" --budget "$budget" --rounds "$rounds" "$shapes"
