#!/bin/sh
# device-check.sh -- the GPU back end on a machine with an NVIDIA GPU, in under 5 minutes:
# build from the tree, run every stdlib function (and an f64 contraction) on the GPU against
# the reference evaluator (through `dyn` with :target gpu and :check, and through bench_gpu
# --check, which forces every variant), the contractions again on the tensor cores in tf32
# (bench_gpu --check-tf32, within 1e-3), then time contractions against cuBLAS (exact f32,
# and tf32 against cuBLAS's TF32 tensor-op math) and row-wise kernels against the memory
# bandwidth, and print a table with the ratios.
#
# usage: tests/gpu/device-check.sh [BENCH_DIR]
#   BENCH_DIR holds gemm.txt, bmm.txt and rowwise.txt (default: ../shared/bench from the
#   repository root).  Builds with autotools when it can (autoreconf if configure is missing;
#   --without-llvm when there is no llvm-config), else compiles the sources directly into
#   build-gpu/ (no LLVM, readline or Check needed).  Exit: 0 all good, 1 a failure, 77 no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
bench_dir=${1:-$root/../shared/bench}
start=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 4)
status=0
log() { printf '\n== %s  [%ss]\n' "$*" $(( $(date +%s) - start )); }
fail() { echo "device-check: $*"; status=1; }
limit() { if command -v timeout >/dev/null 2>&1; then timeout "$@"; else shift; "$@"; fi; }

# ---- 1. build ----------------------------------------------------------------------------
log "build"
DYN=; LIB=; INC=; LIBS=; UNIT=
if [ ! -x configure ] && command -v autoreconf >/dev/null 2>&1; then
  autoreconf -fi >build-gpu-autoreconf.log 2>&1 || echo "device-check: autoreconf failed (see build-gpu-autoreconf.log)"
fi
if [ -x configure ]; then
  if [ ! -f Makefile ]; then
    opts=
    ls /usr/bin/llvm-config* /usr/local/bin/llvm-config* >/dev/null 2>&1 || command -v llvm-config >/dev/null 2>&1 || opts=--without-llvm
    ./configure $opts >build-gpu-configure.log 2>&1 || { tail -20 build-gpu-configure.log; fail "configure failed"; exit 1; }
  fi
  make -j"$jobs" >build-gpu-make.log 2>&1 || { tail -30 build-gpu-make.log; fail "make failed"; exit 1; }
  DYN=$root/dyn; LIB=$root/.libs/libdyn_int.a; INC="-I$root -I$root/src"
  LIBS="$(sed -n 's/^LLVM_LIBS = //p' Makefile) $(sed -n 's/^READLINE_LIBS = //p' Makefile)"
  if grep -q '^CHECK_LIBS = .*-lcheck' Makefile && make -j"$jobs" tests/unit/test_cuda >>build-gpu-make.log 2>&1; then
    UNIT=$root/tests/unit/test_cuda
  fi
else
  echo "device-check: no configure and no autoreconf: compiling the sources directly into build-gpu/"
  b=$root/build-gpu
  mkdir -p "$b/obj"
  version=$(sed -n 's/^AC_INIT(\[dyn\], *\[\([^]]*\)\].*/\1/p' configure.ac)
  cat >"$b/config.h" <<EOF
#define PACKAGE "dyn"
#define PACKAGE_NAME "dyn"
#define PACKAGE_VERSION "${version:-0.0}"
#define PACKAGE_STRING "dyn ${version:-0.0}"
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
EOF
  sh build-aux/embed.sh "$b/stdlib_embed.c" stdlib/linalg.dyn stdlib/nn.dyn stdlib/reduce.dyn
  sh build-aux/embed.sh --text "$b/cuda_prelude.c" curender_ src/cuda/prelude.cu src/cuda/prelude_mma.cu
  cflags="-std=gnu11 -O2 -I$b -I$root/src -DDYN_SRCDIR=\"$root\" -DDYN_PKGDATADIR=\"$root\""
  objs=
  for f in src/*.c "$b/stdlib_embed.c" "$b/cuda_prelude.c"; do
    case $f in src/stdlib_embed.c|src/cuda_prelude.c) continue ;; esac
    case $(basename "$f") in main.c|jit.c|pool.c|gemm.c) continue ;; esac
    o="$b/obj/$(basename "$f" .c).o"
    ${CC:-cc} $cflags -c "$f" -o "$o" || { fail "cannot compile $f"; exit 1; }
    objs="$objs $o"
  done
  ar rcs "$b/libdyn.a" $objs
  ${CC:-cc} $cflags src/main.c "$b/libdyn.a" -lm -lpthread -ldl -o "$b/dyn" || { fail "cannot link dyn"; exit 1; }
  DYN=$b/dyn; LIB=$b/libdyn.a; INC="-I$b -I$root/src"
fi
mkdir -p build-gpu
${CC:-cc} -std=gnu11 -O2 $INC -DDYN_SRCDIR="\"$root\"" -DDYN_PKGDATADIR="\"$root\"" tests/gpu/bench_gpu.c "$LIB" $LIBS -lm -ldl -lpthread \
  -o build-gpu/bench_gpu || { fail "cannot build bench_gpu"; exit 1; }
export DYN_HW_DIR="$root/hw"

# ---- 2. is there a GPU? ------------------------------------------------------------------
log "device"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
./build-gpu/bench_gpu --check none >build-gpu/probe.txt 2>&1
if [ $? -eq 77 ]; then cat build-gpu/probe.txt; echo "device-check: skipped (no GPU)"; exit 77; fi

# ---- 3. the unit suite's rendering and NVRTC/ptxas checks (no emulation: the GPU is here) --
if [ -n "$UNIT" ]; then
  log "unit tests: golden CUDA C, every stdlib function through NVRTC and ptxas"
  CK_RUN_CASE=render limit 120 "$UNIT" || fail "test_cuda failed"
fi

# ---- 4. every stdlib function on the GPU against the reference, through dyn ------------------
log "dyn :check with :target gpu"
cat >build-gpu/check.dyn <<'EOF'
import reduce
:target gpu
seed(7)
A = randn(f32[129, 77])
B = randn(f32[77, 130])
x = randn(f32[77])
y = randn(f32[130])
X3 = randn(f32[5, 33, 40])
Y3 = randn(f32[5, 40, 17])
R = randn(f32[37, 1001])
S = randn(f32[300, 4097])
g = randn(f32[1001])
be = randn(f32[1001])
W = randn(f32[50, 1001])
bias = randn(f32[50])
Q = randn(f32[3, 20, 16])
K = randn(f32[3, 24, 16])
V = randn(f32[3, 24, 16])
W1 = randn(f32[64, 1001])
b1 = randn(f32[64])
W2 = randn(f32[10, 64])
b2 = randn(f32[10])
C1 = randn(f32[2, 8, 50])
Wc1 = randn(f32[16, 8, 5])
C2 = randn(f32[2, 4, 17, 15])
Wc2 = randn(f32[8, 4, 3, 3])
:check matmul(A, B)
:check matvec(A, x)
:check bmm(X3, Y3)
:check outer(x, y)
:check transpose(A)
:check dot(x, x)
:check relu(R)
:check gelu(R)
:check gelu_erf(R)
:check silu(R)
:check softmax(R)
:check softmax(S)
:check log_softmax(R)
:check layernorm(R, g, be)
:check rmsnorm(R, g)
:check linear(R, W, bias)
:check conv1d(C1, Wc1, 2, 1)
:check conv2d(C2, Wc2, 1, 1)
:check maxpool2d(C2, 3, 2)
:check avgpool2d(C2, 2, 2)
:check attention(Q, K, V)
:check causal_attention(Q, K, K)
:check mlp(R, W1, b1, W2, b2)
:check sum(R)
:check mean(S)
:check var(R)
:check std(S)
:check amax(R)
:check argmax(R)
fn mm64(A: f64[M, K], B: f64[K, N]) -> f64[M, N] {
  C[i, j] = sum[k] A[i, k] * B[k, j]
  return C
}
A64 = randn(f64[129, 77])
B64 = randn(f64[77, 130])
:check mm64(A64, B64)
EOF
# -i -: REPL semantics on a pipe, so one mismatch does not stop the other checks
limit 120 "$DYN" --target=gpu -i - <build-gpu/check.dyn >build-gpu/check.txt 2>&1
cat build-gpu/check.txt
if grep -q "gpu vs ref" build-gpu/check.txt; then
  n_ok=$(grep -c "gpu vs ref:[^;]*: ok" build-gpu/check.txt)
  n_bad=$(grep -c "MISMATCH" build-gpu/check.txt)
  echo "dyn :check: $n_ok ok, $n_bad mismatches"
  [ "$n_bad" -eq 0 ] && [ "$n_ok" -ge 30 ] || fail "dyn :check found mismatches or missing results"
else
  echo "device-check: dyn's :check did not report the GPU (is the GPU back end integrated in src/toplevel.c?);"
  echo "              bench_gpu --check below covers the same functions"
fi

# ---- 5. every stdlib function, every variant forced, against the reference -----------------
log "bench_gpu --check: every stdlib function, every variant"
limit 150 ./build-gpu/bench_gpu --check >build-gpu/variants.txt 2>&1
rc=$?
grep -E "MISMATCH|fails|^check:|bench_gpu:" build-gpu/variants.txt
[ $rc -eq 0 ] || fail "bench_gpu --check failed (build-gpu/variants.txt)"

# ---- 5a. the contractions on the tensor cores (:target gpu tf32), every tile forced ----------
log "bench_gpu --check-tf32: the contractions in tf32 on the tensor cores, every tile"
limit 60 ./build-gpu/bench_gpu --check-tf32 >build-gpu/tf32.txt 2>&1
rc=$?
grep -E "MISMATCH|fails|^check|bench_gpu:" build-gpu/tf32.txt
[ $rc -eq 0 ] || fail "bench_gpu --check-tf32 failed (build-gpu/tf32.txt)"

# ---- 5b. memory errors and shared-memory races, where compute-sanitizer runs ---------------
if command -v compute-sanitizer >/dev/null 2>&1; then
  log "compute-sanitizer: memcheck on the contractions, racecheck on the row-wise kernels"
  limit 60 compute-sanitizer --tool memcheck --error-exitcode 3 ./build-gpu/bench_gpu --check bmm >build-gpu/memcheck.txt 2>&1
  rc=$?; tail -3 build-gpu/memcheck.txt; [ $rc -eq 0 ] || [ $rc -eq 124 ] || fail "memcheck reported errors (build-gpu/memcheck.txt)"
  limit 45 compute-sanitizer --tool memcheck --error-exitcode 3 ./build-gpu/bench_gpu --check-tf32 bmm >build-gpu/memcheck-tf32.txt 2>&1
  rc=$?; tail -3 build-gpu/memcheck-tf32.txt; [ $rc -eq 0 ] || [ $rc -eq 124 ] || fail "memcheck reported errors in tf32 (build-gpu/memcheck-tf32.txt)"
  limit 60 compute-sanitizer --tool racecheck --error-exitcode 3 ./build-gpu/bench_gpu --check layernorm >build-gpu/racecheck.txt 2>&1
  rc=$?; tail -3 build-gpu/racecheck.txt; [ $rc -eq 0 ] || [ $rc -eq 124 ] || fail "racecheck reported hazards (build-gpu/racecheck.txt)"
fi

# ---- 6. timings -------------------------------------------------------------------------
log "benchmark: dyn against cuBLAS (exact f32 and tf32) and the memory bandwidth"
limit 120 ./build-gpu/bench_gpu --bench "$bench_dir" || fail "the benchmark failed"

log "done: $( [ $status -eq 0 ] && echo "all checks pass" || echo "FAILURES above" )"
exit $status
