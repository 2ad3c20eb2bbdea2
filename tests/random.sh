#!/bin/sh
# Random programs (tests/random_programs.py) compiled by the CPU back end against the
# reference evaluator: f32, f64, i32 and i64, windows as in convolutions, small and large
# sizes, 1 to 3 threads, fixed seeds so that a failure reproduces
# (`python3 tests/random_programs.py ./dyn --seed S --count N`).  Skipped (77) without LLVM
# or without a Python 3.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
grep -q "define HAVE_LLVM 1" "$top_builddir/config.h" 2>/dev/null || { echo "built without LLVM: skipped"; exit 77; }
py=${PYTHON_NUMPY:-}
[ -n "$py" ] || py=$(command -v python3) || { echo "no python3: skipped"; exit 77; }
gen="$top_srcdir/tests/random_programs.py"
dyn="$top_builddir/dyn"
st=0
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 1 --count 300 --threads 2 || st=1
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 2 --count 150 --threads 3 --large || st=1
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 3 --count 150 --threads 1 || st=1
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 4 --count 150 --elem f64 || st=1
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 5 --count 150 --elem i32 --large || st=1
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 6 --count 100 --elem i64 --threads 3 || st=1
HOME=${TMPDIR:-/tmp} DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$py" "$gen" "$dyn" --seed 7 --count 150 --windows --threads 3 || st=1
exit $st
